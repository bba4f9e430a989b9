/*
 * The NVIDIA device plugin's configuration file, its "sharing" section only,
 * into ft_sharing_t (sharing.h). The file goes through the YAML to cJSON
 * conversion with a line table, so that every fault names the file, the
 * line of the offending value (of its mapping when a key is missing) and
 * the field as a path the way the plugin's README spells the keys. What the
 * section means for a node's GPUs is decided where the GPUs are known
 * (src/discover/sharing.c); here only the shape and ranges are checked.
 */
#include <flextopo/error.h>
#include <flextopo/file.h>
#include <flextopo/sharing.h>
#include <flextopo/topology.h>
#include <flextopo/yamljson.h>

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define FILE_CAP	    (1024 * 1024)
#define PATH_LEN	    160
#define GPU_RESOURCE	    "nvidia.com/gpu"
#define MIG_RESOURCE_PREFIX "nvidia.com/mig-"
#define SHARED_SUFFIX	    ".shared" /* renameByDefault */

typedef struct reader {
	ft_sharing_t *s;
	const ft_yaml_lines_t *lines;
} reader_t;

/* "file:line: path: message", or "file: path: ..." where the line is not
 * known. */
__attribute__((format(printf, 4, 5))) static int fail(const reader_t *rd,
						      const cJSON *at,
						      const char *path,
						      const char *fmt, ...)
{
	unsigned line = ft_yaml_line(rd->lines, at);
	char at_line[32] = "", where[400];
	va_list ap;
	int rc;

	if (line)
		snprintf(at_line, sizeof(at_line), ":%u", line);
	snprintf(where, sizeof(where), "%.200s%s: %.160s", rd->s->file, at_line,
		 path);
	va_start(ap, fmt);
	rc = ft_error_vset_at(FT_EINVAL, where, fmt, ap);
	va_end(ap);
	return rc;
}

static int out_of_memory(const reader_t *rd)
{
	return ft_error_set(FT_ENOMEM, "%s: out of memory", rd->s->file);
}

static int copy_text(const reader_t *rd, char **out, const char *text)
{
	return (*out = strdup(text)) ? 0 : out_of_memory(rd);
}

/* A member; null counts as absent, as it does for the plugin. */
static const cJSON *member(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNull(v) ? NULL : v;
}

static bool is_int_in(const cJSON *v, double min, double max)
{
	return cJSON_IsNumber(v) && v->valuedouble >= min &&
	       v->valuedouble <= max &&
	       v->valuedouble == (double)(long long)v->valuedouble;
}

static int read_bool(bool *out, const reader_t *rd, const cJSON *obj,
		     const char *parent, const char *key)
{
	const cJSON *v = member(obj, key);
	char path[PATH_LEN];

	if (!v)
		return 0;
	if (!cJSON_IsBool(v)) {
		snprintf(path, sizeof(path), "%.96s.%.32s", parent, key);
		return fail(rd, v, path, "must be true or false");
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

/* A non-empty string into *out (a copy); absent is fine unless required. */
static int read_string(char **out, const reader_t *rd, const cJSON *obj,
		       const char *parent, const char *key, bool required)
{
	const cJSON *v = member(obj, key);
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%.96s.%.32s", parent, key);
	if (!v && required)
		return fail(rd, obj, path, "missing");
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !v->valuestring[0])
		return fail(rd, v, path, "must be a non-empty string");
	return copy_text(rd, out, v->valuestring);
}

/* Devices */

static bool all_digits(const char *s, size_t n)
{
	return n > 0 && strspn(s, "0123456789") == n;
}

/* "3" (an index that fits an int), or false. */
static bool parse_index(int *out, const char *s)
{
	long v;

	if (!all_digits(s, strlen(s)) || strlen(s) > 9)
		return false;
	v = strtol(s, NULL, 10);
	*out = (int)v;
	return true;
}

/* "3:1": a MIG device by GPU index and MIG index. */
static bool is_mig_index(const char *s)
{
	const char *colon = strchr(s, ':');

	return colon && all_digits(s, (size_t)(colon - s)) &&
	       all_digits(colon + 1, strlen(colon + 1));
}

static bool has_prefix(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(s, prefix, n) == 0 && s[n] != '\0';
}

static int classify_text(ft_sharing_device_t *d, const char *s)
{
	if (parse_index(&d->index, s))
		d->ref = FT_SHARING_GPU_INDEX;
	else if (has_prefix(s, "GPU-"))
		d->ref = FT_SHARING_GPU_UUID;
	else if (is_mig_index(s) || has_prefix(s, "MIG-"))
		d->ref = FT_SHARING_MIG;
	else
		return -1;
	return 0;
}

static int decode_device(const reader_t *rd, ft_sharing_device_t *d,
			 const cJSON *v, const char *path)
{
	char number[16];

	d->line = ft_yaml_line(rd->lines, v);
	if (is_int_in(v, 0, INT_MAX)) {
		d->ref = FT_SHARING_GPU_INDEX;
		d->index = (int)v->valuedouble;
		snprintf(number, sizeof(number), "%d", d->index);
		return copy_text(rd, &d->text, number);
	}
	if (!cJSON_IsString(v) || classify_text(d, v->valuestring) < 0)
		return fail(
		    rd, v, path,
		    "must be a GPU index, a GPU UUID (GPU-...), a MIG index (GPU:MIG) or a MIG UUID (MIG-...)");
	return copy_text(rd, &d->text, v->valuestring);
}

static int decode_device_list(const reader_t *rd, ft_sharing_resource_t *r,
			      const cJSON *list, const char *path)
{
	char item_path[PATH_LEN];
	const cJSON *v = NULL;
	int n = cJSON_GetArraySize(list), rc;

	if (n == 0)
		return fail(rd, list, path,
			    "must name at least one device (or be \"all\")");
	if (!(r->devices = calloc((size_t)n, sizeof(*r->devices))))
		return out_of_memory(rd);
	r->select = FT_SHARING_LIST;
	cJSON_ArrayForEach (v, list) {
		snprintf(item_path, sizeof(item_path), "%.96s[%u]", path,
			 r->n_devices);
		if ((rc = decode_device(rd, &r->devices[r->n_devices++], v,
					item_path)) < 0)
			return rc;
	}
	return 0;
}

/* "devices": absent, null or "all"; a count; or a list. */
static int decode_devices(const reader_t *rd, ft_sharing_resource_t *r,
			  const cJSON *obj, const char *parent)
{
	const cJSON *v = member(obj, "devices");
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%.96s.devices", parent);
	r->select = FT_SHARING_ALL;
	r->devices_line = ft_yaml_line(rd->lines, v);
	if (!v || (cJSON_IsString(v) && !strcmp(v->valuestring, "all")))
		return 0;
	if (cJSON_IsArray(v))
		return decode_device_list(rd, r, v, path);
	if (!is_int_in(v, 1, INT_MAX))
		return fail(
		    rd, v, path,
		    "must be \"all\", a count of GPUs (1 or more) or a list of devices");
	r->select = FT_SHARING_COUNT;
	r->count = (unsigned)v->valuedouble;
	return 0;
}

/* Resources */

static int check_name(const reader_t *rd, const cJSON *obj, const char *parent,
		      const char *name)
{
	char path[PATH_LEN];

	if (!strcmp(name, GPU_RESOURCE) ||
	    has_prefix(name, MIG_RESOURCE_PREFIX))
		return 0;
	snprintf(path, sizeof(path), "%.96s.name", parent);
	return fail(rd, member(obj, "name"), path,
		    "\"%s\": the device plugin shares " GPU_RESOURCE
		    " and " MIG_RESOURCE_PREFIX "<profile> only",
		    name);
}

static int decode_replicas(const reader_t *rd, ft_sharing_resource_t *r,
			   const cJSON *obj, const char *parent)
{
	const cJSON *v = member(obj, "replicas");
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%.96s.replicas", parent);
	if (!v)
		return fail(rd, obj, path, "missing");
	if (!is_int_in(v, 2, FT_REPLICAS_MAX))
		return fail(rd, v, path, "must be an integer 2..%d",
			    FT_REPLICAS_MAX);
	r->replicas = (unsigned)v->valuedouble;
	return 0;
}

static int decode_resource(const reader_t *rd, ft_sharing_resource_t *r,
			   const cJSON *obj, const char *path)
{
	int rc;

	r->line = ft_yaml_line(rd->lines, obj);
	if (!cJSON_IsObject(obj))
		return fail(rd, obj, path, "must be a mapping");
	if ((rc = read_string(&r->name, rd, obj, path, "name", true)) < 0 ||
	    (rc = check_name(rd, obj, path, r->name)) < 0 ||
	    (rc = read_string(&r->rename, rd, obj, path, "rename", false)) <
		0 ||
	    (rc = decode_replicas(rd, r, obj, path)) < 0)
		return rc;
	r->rename_line = ft_yaml_line(rd->lines, member(obj, "rename"));
	return decode_devices(rd, r, obj, path);
}

static int decode_resources(const reader_t *rd, const cJSON *section,
			    const char *parent)
{
	const cJSON *list = member(section, "resources"), *v = NULL;
	ft_sharing_t *s = rd->s;
	char path[PATH_LEN];
	int n, rc;

	snprintf(path, sizeof(path), "%.96s.resources", parent);
	if (!list)
		return fail(rd, section, path, "missing");
	if (!cJSON_IsArray(list) || (n = cJSON_GetArraySize(list)) == 0)
		return fail(rd, list, path,
			    "must be a list of one resource or more");
	if (!(s->resources = calloc((size_t)n, sizeof(*s->resources))))
		return out_of_memory(rd);
	cJSON_ArrayForEach (v, list) {
		snprintf(path, sizeof(path), "%.96s.resources[%u]", parent,
			 s->n_resources);
		if ((rc = decode_resource(rd, &s->resources[s->n_resources++],
					  v, path)) < 0)
			return rc;
	}
	return 0;
}

static int decode_section(const reader_t *rd, const cJSON *section)
{
	bool fail_greater = false; /* read for its type; not a topology fact */
	char path[PATH_LEN];
	int rc;

	snprintf(path, sizeof(path), "sharing.%s",
		 ft_sharing_kind_name(rd->s->kind));
	rd->s->line = ft_yaml_line(rd->lines, section);
	if (!cJSON_IsObject(section))
		return fail(rd, section, path, "must be a mapping");
	if ((rc = read_bool(&rd->s->rename_by_default, rd, section, path,
			    "renameByDefault")) < 0 ||
	    (rc = read_bool(&fail_greater, rd, section, path,
			    "failRequestsGreaterThanOne")) < 0)
		return rc;
	return decode_resources(rd, section, path);
}

static int decode_sharing(const reader_t *rd, const cJSON *sharing)
{
	const cJSON *time_slicing = NULL, *mps = NULL;

	if (!sharing)
		return 0;
	if (!cJSON_IsObject(sharing))
		return fail(rd, sharing, "sharing", "must be a mapping");
	time_slicing = member(sharing, "timeSlicing");
	mps = member(sharing, "mps");
	if (time_slicing && mps)
		return fail(rd, sharing, "sharing",
			    "timeSlicing and mps exclude each other; give one");
	if (!time_slicing && !mps)
		return 0;
	rd->s->kind = time_slicing ? FT_SHARING_TIME_SLICING : FT_SHARING_MPS;
	return decode_section(rd, time_slicing ? time_slicing : mps);
}

static int decode_root(const reader_t *rd, const cJSON *root)
{
	const cJSON *version = NULL;

	if (!cJSON_IsObject(root))
		return ft_error_set(
		    FT_EINVAL,
		    "%s: expected the device plugin's configuration (a mapping with version: v1)",
		    rd->s->file);
	version = member(root, "version");
	if (version &&
	    (!cJSON_IsString(version) || strcmp(version->valuestring, "v1")))
		return fail(rd, version, "version", "must be v1");
	return decode_sharing(rd, member(root, "sharing"));
}

int ft_codec_sharing_decode(ft_sharing_t *out, const char *text, size_t len,
			    const char *name)
{
	ft_yaml_lines_t *lines = NULL;
	cJSON *root = NULL;
	reader_t rd = {out, NULL};
	int rc;

	memset(out, 0, sizeof(*out));
	if (!(out->file = strdup(name ? name : "<sharing config>")))
		return ft_error_set(FT_ENOMEM, "out of memory");
	if ((rc = ft_yaml_to_json_lines(&root, &lines, text, len, out->file)) <
	    0)
		goto cleanup;
	rd.lines = lines;
	rc = decode_root(&rd, root);

cleanup:
	if (rc < 0)
		ft_sharing_dispose(out);
	ft_yaml_lines_free(lines);
	cJSON_Delete(root);
	return rc;
}

int ft_codec_sharing_load(ft_sharing_t *out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ft_file_read(&text, &len, path, FILE_CAP)) == 0)
		rc = ft_codec_sharing_decode(out, text, len, path);
	free(text);
	return rc;
}

static void resource_dispose(ft_sharing_resource_t *r)
{
	for (unsigned k = 0; k < r->n_devices; k++)
		free(r->devices[k].text);
	free(r->devices);
	free(r->name);
	free(r->rename);
}

void ft_sharing_dispose(ft_sharing_t *s)
{
	if (!s)
		return;
	/* A resource that failed halfway is counted too: calloc'd, so its
	 * unset members are NULL. */
	for (unsigned i = 0; i < s->n_resources; i++)
		resource_dispose(&s->resources[i]);
	free(s->resources);
	free(s->file);
	memset(s, 0, sizeof(*s));
}

const char *ft_sharing_kind_name(ft_sharing_kind_t kind)
{
	switch (kind) {
	case FT_SHARING_TIME_SLICING:
		return "timeSlicing";
	case FT_SHARING_MPS:
		return "mps";
	default:
		return "";
	}
}

const char *ft_sharing_advertised(const ft_sharing_t *s,
				  const ft_sharing_resource_t *r, char *buf,
				  size_t size)
{
	if (r->rename)
		return strcmp(r->rename, r->name) ? r->rename : NULL;
	if (!s->rename_by_default)
		return NULL;
	snprintf(buf, size, "%s" SHARED_SUFFIX, r->name);
	return buf;
}
