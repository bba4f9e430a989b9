/*
 * The mutating admission webhook's wire: an AdmissionReview request
 * (admission.k8s.io/v1) in, and out the reply with a JSONPatch (RFC 6902)
 * that adds a matchAttribute constraint to a device claim (resource/v1
 * DeviceClaim.constraints: the allocator then takes every device of the
 * listed requests with one value of the attribute). kube-apiserver sends
 * the review and applies the patch (k8s.io/api admission/v1/types.go).
 */
#include <flextopo/buf.h>
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *at(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static const char *str_at(const cJSON *obj, const char *key)
{
	const cJSON *v = at(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

void ft_admission_dispose(ft_admission_t *a)
{
	if (!a)
		return;
	cJSON_Delete(a->root);
	memset(a, 0, sizeof(*a));
}

int ft_codec_admission_decode(ft_admission_t *out, const char *body, size_t len)
{
	const cJSON *req;

	memset(out, 0, sizeof(*out));
	if (!(out->root = cJSON_ParseWithLength(body, len)))
		return ft_error_set(FT_EINVAL, "AdmissionReview: not JSON");
	req = at(out->root, "request");
	out->uid = str_at(req, "uid");
	out->kind = str_at(at(req, "kind"), "kind");
	out->ns = str_at(req, "namespace");
	out->operation = str_at(req, "operation");
	out->object = at(req, "object");
	if (!out->uid || !out->kind || !cJSON_IsObject(out->object)) {
		ft_admission_dispose(out);
		return ft_error_set(
		    FT_EINVAL,
		    "AdmissionReview: request.uid, request.kind.kind and request.object are required");
	}
	/* The reply must echo the uid byte for byte, which JSON can only do
	 * for text: kube-apiserver sends a UUID. */
	if (!ft_utf8_valid(out->uid)) {
		ft_admission_dispose(out);
		return ft_error_set(
		    FT_EINVAL,
		    "AdmissionReview: request.uid is not UTF-8 text");
	}
	return 0;
}

static bool in_classes(const char *cls, const char *const *classes, unsigned n)
{
	for (unsigned i = 0; cls && i < n; i++)
		if (strcmp(cls, classes[i]) == 0)
			return true;
	return false;
}

/* The device class of a request: exactly's, or every firstAvailable's. */
static bool request_in(const cJSON *req, const char *const *classes, unsigned n)
{
	const cJSON *sub;
	bool all = cJSON_GetArraySize(at(req, "firstAvailable")) > 0;

	if (at(req, "exactly"))
		return in_classes(str_at(at(req, "exactly"), "deviceClassName"),
				  classes, n);
	cJSON_ArrayForEach (sub, at(req, "firstAvailable")) {
		all &= in_classes(str_at(sub, "deviceClassName"), classes, n);
	}
	return all;
}

/* Does a constraint already hold `attribute` over request `name`? */
static bool constrained(const cJSON *devices, const char *name,
			const char *attribute)
{
	const cJSON *c, *r;

	cJSON_ArrayForEach (c, at(devices, "constraints")) {
		const char *attr = str_at(c, "matchAttribute");
		const cJSON *reqs = at(c, "requests");
		if (!attr || strcmp(attr, attribute) != 0)
			continue;
		if (!cJSON_GetArraySize(reqs))
			return true; /* no list: every request */
		cJSON_ArrayForEach (r, reqs) {
			if (cJSON_IsString(r) &&
			    strcmp(r->valuestring, name) == 0)
				return true;
		}
	}
	return false;
}

/* The constraint object: {"requests":[...],"matchAttribute":attribute}. */
static cJSON *constraint(const cJSON *devices, const char *attribute,
			 const char *const *classes, unsigned n)
{
	cJSON *c = cJSON_CreateObject();
	cJSON *names = cJSON_AddArrayToObject(c, "requests");
	const cJSON *req;
	bool any = false;

	cJSON_ArrayForEach (req, at(devices, "requests")) {
		const char *name = str_at(req, "name");
		if (!name || !request_in(req, classes, n) ||
		    constrained(devices, name, attribute))
			continue;
		cJSON_AddItemToArray(names, cJSON_CreateString(name));
		any = true;
	}
	cJSON_AddStringToObject(c, "matchAttribute", attribute);
	if (!any) {
		cJSON_Delete(c);
		return NULL;
	}
	return c;
}

int ft_codec_claim_constraint_patch(char **out, const cJSON *devices,
				    const char *path, const char *attribute,
				    const char *const *classes,
				    unsigned n_classes)
{
	cJSON *c = constraint(devices, attribute, classes, n_classes);
	cJSON *patch = NULL, *op;
	char where[256];
	int rc = 0;

	*out = NULL;
	if (!c)
		return 0;
	patch = cJSON_CreateArray();
	op = cJSON_CreateObject();
	cJSON_AddItemToArray(patch, op);
	cJSON_AddStringToObject(op, "op", "add");
	if (cJSON_IsArray(at(devices, "constraints"))) {
		snprintf(where, sizeof(where), "%s/constraints/-", path);
		cJSON_AddItemToObject(op, "value", c);
	} else {
		cJSON *list = cJSON_CreateArray();
		snprintf(where, sizeof(where), "%s/constraints", path);
		cJSON_AddItemToArray(list, c);
		cJSON_AddItemToObject(op, "value", list);
	}
	cJSON_AddStringToObject(op, "path", where);
	if (!(*out = cJSON_PrintUnformatted(patch)))
		rc = ft_error_set(FT_ENOMEM, "admission patch: out of memory");
	cJSON_Delete(patch);
	return rc;
}

int ft_codec_admission_reply(char **out, const char *uid, const char *patch,
			     const char *warning)
{
	ft_buf_t b;

	ft_buf_init(&b, 256);
	ft_buf_puts(
	    &b,
	    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
	ft_buf_put_json_string(&b, uid);
	ft_buf_puts(&b, ",\"allowed\":true");
	if (patch) {
		ft_buf_puts(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
		ft_buf_put_base64(&b, patch, strlen(patch));
		ft_buf_puts(&b, "\"");
	}
	if (warning) {
		ft_buf_puts(&b, ",\"warnings\":[");
		ft_buf_put_json_string(&b, warning);
		ft_buf_puts(&b, "]");
	}
	ft_buf_puts(&b, "}}");
	return ft_buf_detach(out, &b);
}

/* ---- the decision ------------------------------------------------------- */

static const char *annotation_of(const cJSON *meta, const char *prefix,
				 const char *name)
{
	char key[300];

	snprintf(key, sizeof(key), "%s/%s", prefix, name);
	return str_at(at(meta, "annotations"), key);
}

/* The affinity annotations: the object's, a template's claims' first. */
static void affinity_of(const char **level, const char **mode,
			const ft_admission_t *a, const char *prefix)
{
	const cJSON *claim_meta = at(at(a->object, "spec"), "metadata");
	const cJSON *meta = at(a->object, "metadata");

	*level = annotation_of(claim_meta, prefix, "affinity");
	*mode = annotation_of(claim_meta, prefix, "affinity-mode");
	if (!*level)
		*level = annotation_of(meta, prefix, "affinity");
	if (!*mode)
		*mode = annotation_of(meta, prefix, "affinity-mode");
}

typedef struct {
	const cJSON *devices;
	const char *path;
	const char *attribute;
	char warning[400];
} mutation_t;

/* The attribute of level `level` in mode `mode`, or a warning. */
static void attribute_for(mutation_t *m, const ft_admission_t *a,
			  const ft_codec_options_t *opts)
{
	const char *level_name, *mode_name;
	ft_affinity_mode_t mode = opts->default_mode;
	ft_level_t level;

	affinity_of(&level_name, &mode_name, a, opts->annotation_prefix);
	if (!level_name)
		return;
	if (ft_level_parse(&level, level_name) < 0) {
		snprintf(
		    m->warning, sizeof(m->warning),
		    "flextopo: annotation %s/affinity: \"%.64s\" is not one of nvlink, pcie-switch, numa, socket, node; no constraint added",
		    opts->annotation_prefix, level_name);
		return;
	}
	if (mode_name && strcmp(mode_name, "best-effort") == 0)
		mode = FT_MODE_BEST_EFFORT;
	else if (mode_name && strcmp(mode_name, "guaranteed") == 0)
		mode = FT_MODE_GUARANTEED;
	if (mode != FT_MODE_GUARANTEED)
		return;
	if (level == FT_LEVEL_NUMA)
		m->attribute = "resource.kubernetes.io/numaNode";
	else if (level == FT_LEVEL_PCIE_SWITCH)
		m->attribute = "resource.kubernetes.io/pcieRoot";
	else if (level == FT_LEVEL_NVLINK)
		snprintf(
		    m->warning, sizeof(m->warning),
		    "flextopo: NVLink has no standard device attribute DRA can match; nvlink affinity stays best-effort on DRA nodes (node choice only)");
	if (level == FT_LEVEL_PCIE_SWITCH)
		snprintf(
		    m->warning, sizeof(m->warning),
		    "flextopo: pcie-switch affinity is enforced as one PCIe root (resource.kubernetes.io/pcieRoot), which may hold several switches");
}

static bool extended_claim(const cJSON *obj)
{
	const char *v = str_at(at(at(obj, "metadata"), "annotations"),
			       FT_DRA_EXTENDED_CLAIM);

	return v && strcmp(v, "true") == 0;
}

/* Where the device claim of the reviewed object is, or false. */
static bool devices_of(mutation_t *m, const ft_admission_t *a)
{
	if (!a->operation || strcmp(a->operation, "CREATE") != 0)
		return false;
	if (strcmp(a->kind, "ResourceClaim") == 0) {
		m->devices = at(at(a->object, "spec"), "devices");
		m->path = "/spec/devices";
	} else if (strcmp(a->kind, "ResourceClaimTemplate") == 0) {
		m->devices = at(at(at(a->object, "spec"), "spec"), "devices");
		m->path = "/spec/spec/devices";
	}
	return m->devices != NULL;
}

int ft_codec_admission_mutate(char **out, const ft_admission_t *a,
			      const ft_codec_options_t *opts,
			      const char *const *classes, unsigned n_classes)
{
	mutation_t m = {0};
	char *patch = NULL;
	int rc = 0;

	if (devices_of(&m, a))
		attribute_for(&m, a, opts);
	if (m.attribute && extended_claim(a->object)) {
		m.attribute = NULL;
		snprintf(
		    m.warning, sizeof(m.warning),
		    "flextopo: kube-scheduler allocated this extended-resource claim before creating it; a constraint added now would not change its devices");
	}
	if (m.attribute)
		rc = ft_codec_claim_constraint_patch(
		    &patch, m.devices, m.path, m.attribute, classes, n_classes);
	if (rc == 0)
		rc = ft_codec_admission_reply(out, a->uid, patch,
					      m.warning[0] ? m.warning : NULL);
	free(patch);
	return rc;
}
