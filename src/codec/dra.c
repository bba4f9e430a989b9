/*
 * resource.k8s.io/v1 ResourceSlice and ResourceClaim objects -> the structs
 * of dra.h. The API server has validated them, so the decoders check only
 * what flextopo relies on and name it when it is wrong
 * ("resourceslice x: spec.devices[1].attributes.uuid: want a string").
 * Shapes: k8s.io/api resource/v1/types.go (v0.36.3); examples in
 * test/fixtures/dra/.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMORY_SLICE "memorySlice"

static const cJSON *at(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static const char *str_at(const cJSON *obj, const char *key)
{
	const cJSON *v = at(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int dup_opt(char **out, const char *s)
{
	*out = NULL;
	if (s && !(*out = strdup(s)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

/* A whole number of at most 2^53 (JSON numbers are doubles). */
static bool whole(const cJSON *v, int64_t *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < -9007199254740992.0 ||
	    v->valuedouble > 9007199254740992.0 ||
	    v->valuedouble != (double)(int64_t)v->valuedouble)
		return false;
	*out = (int64_t)v->valuedouble;
	return true;
}

/* ---- ResourceSlice ------------------------------------------------------- */

typedef struct {
	const char *slice; /* metadata.name, for messages */
	const char *driver;
	unsigned device; /* position in spec.devices */
} where_t;

static int bad(const where_t *w, const char *field, const char *why)
{
	return ft_error_set(FT_EINVAL,
			    "resourceslice %s: spec.devices[%u].%s: %s",
			    w->slice, w->device, field, why);
}

/* The attributes decode_device reads, in one pass over the map. */
enum {
	ATTR_TYPE,
	ATTR_UUID,
	ATTR_PARENT_UUID,
	ATTR_PROFILE,
	ATTR_PCI_BUS_ID,
	ATTR_PCIE_ROOT,
	ATTR_NUMA_NODE,
	ATTR_COUNT
};

static const char *const attr_names[ATTR_COUNT] = {"type",
						   "uuid",
						   "parentUUID",
						   "profile",
						   FT_DRA_ATTR_PCI_BUS_ID,
						   FT_DRA_ATTR_PCIE_ROOT,
						   FT_DRA_ATTR_NUMA_NODE};

/*
 * The device's attributes by name: unqualified names are the driver's
 * own, and "<driver>/<name>" names the same one (resource/v1,
 * QualifiedName); the unqualified spelling wins when both are there.
 */
static void collect_attributes(const cJSON *found[ATTR_COUNT],
			       const cJSON *attrs, const char *driver)
{
	size_t dlen = driver ? strlen(driver) : 0;
	const cJSON *a;

	memset(found, 0, ATTR_COUNT * sizeof(found[0]));
	cJSON_ArrayForEach (a, attrs) {
		const char *name = a->string;
		bool qualified =
		    dlen && !strncmp(name, driver, dlen) && name[dlen] == '/';
		if (qualified)
			name += dlen + 1;
		for (unsigned i = 0; name && i < ATTR_COUNT; i++)
			if (name[0] == attr_names[i][0] &&
			    !strcmp(name, attr_names[i]) &&
			    (!found[i] || !qualified))
				found[i] = a;
	}
}

static int string_attribute(char **out, const where_t *w,
			    const cJSON *const found[ATTR_COUNT], unsigned i)
{
	const cJSON *v = found[i];
	const char *s = str_at(v, "string");
	char field[300];

	*out = NULL;
	if (!v)
		return 0;
	if (!s) {
		snprintf(field, sizeof(field), "attributes.%s", attr_names[i]);
		return bad(w, field, "want a string");
	}
	return dup_opt(out, s);
}

/* numaNode: an int, or a list of one with DRAListTypeAttributes. */
static int numa_attribute(int *out, const where_t *w, const cJSON *v)
{
	const cJSON *ints = at(v, "ints");
	int64_t n;

	*out = FT_DRA_NO_NUMA;
	if (!v)
		return 0;
	if (cJSON_GetArraySize(ints) == 1)
		v = cJSON_GetArrayItem(ints, 0);
	else
		v = at(v, "int");
	if (!whole(v, &n) || n < 0 || n > 255)
		return bad(w, "attributes." FT_DRA_ATTR_NUMA_NODE,
			   "want an int from 0 to 255");
	*out = (int)n;
	return 0;
}

static ft_dra_kind_t kind_of(const char *type)
{
	if (!type)
		return FT_DRA_OTHER;
	if (strcmp(type, "gpu") == 0)
		return FT_DRA_GPU;
	if (strcmp(type, "mig") == 0)
		return FT_DRA_MIG;
	return FT_DRA_OTHER;
}

/* A capacity's value as a whole number ("1", "10"); false otherwise. */
static bool capacity_count(const cJSON *cap, uint32_t *out)
{
	int64_t v;

	if (!cJSON_IsString(at(cap, "value")) ||
	    ft_quantity_milli(&v, at(cap, "value")->valuestring) < 0 || v < 0 ||
	    v % 1000 || v / 1000 > UINT32_MAX)
		return false;
	*out = (uint32_t)(v / 1000);
	return true;
}

/* MIG: the memory slices covered, from the memorySlice<i> capacities. */
static void memory_slices(ft_dra_device_t *d, const cJSON *capacity)
{
	const cJSON *c;

	d->slice_start = -1;
	cJSON_ArrayForEach (c, capacity) {
		const char *name = c->string;
		char *end;
		long i;
		if (strncmp(name, MEMORY_SLICE, strlen(MEMORY_SLICE)) != 0)
			continue;
		i = strtol(name + strlen(MEMORY_SLICE), &end, 10);
		if (*end || i < 0 || i > 7)
			continue;
		if (d->slice_start < 0 || i < d->slice_start)
			d->slice_start = (int)i;
		d->slices++;
	}
}

static int decode_device(ft_dra_device_t *d, const where_t *w, const cJSON *dev)
{
	const cJSON *capacity = at(dev, "capacity");
	const cJSON *found[ATTR_COUNT];
	char *type = NULL;
	int rc;

	if (!str_at(dev, "name"))
		return bad(w, "name", "required");
	collect_attributes(found, at(dev, "attributes"), w->driver);
	if ((rc = dup_opt(&d->name, str_at(dev, "name"))) < 0 ||
	    (rc = string_attribute(&type, w, found, ATTR_TYPE)) < 0)
		goto cleanup;
	d->kind = kind_of(type);
	if ((rc = string_attribute(&d->uuid, w, found, ATTR_UUID)) < 0 ||
	    (rc = string_attribute(&d->parent_uuid, w, found,
				   ATTR_PARENT_UUID)) < 0 ||
	    (rc = string_attribute(&d->profile, w, found, ATTR_PROFILE)) < 0 ||
	    (rc = string_attribute(&d->pci_bus_id, w, found, ATTR_PCI_BUS_ID)) <
		0 ||
	    (rc = string_attribute(&d->pcie_root, w, found, ATTR_PCIE_ROOT)) <
		0 ||
	    (rc = numa_attribute(&d->numa_node, w, found[ATTR_NUMA_NODE])) < 0)
		goto cleanup;
	memory_slices(d, capacity);
	d->multiple = cJSON_IsTrue(at(dev, "allowMultipleAllocations"));
	if (d->multiple)
		capacity_count(at(capacity, "shares"), &d->shares);
cleanup:
	free(type);
	return rc;
}

static int decode_devices(ft_dra_slice_t *out, const where_t *base,
			  const cJSON *devices)
{
	where_t w = *base;
	const cJSON *dev;
	unsigned n = (unsigned)cJSON_GetArraySize(devices);
	int rc = 0;

	if (devices && !cJSON_IsArray(devices))
		return ft_error_set(
		    FT_EINVAL, "resourceslice %s: spec.devices: want a list",
		    base->slice);
	if (!n)
		return 0;
	if (!(out->devices = calloc(n, sizeof(*out->devices))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (dev, devices) {
		w.device = out->n_devices;
		if ((rc = decode_device(&out->devices[out->n_devices++], &w,
					dev)) < 0)
			break;
	}
	return rc;
}

static int decode_pool(ft_dra_slice_t *out, const char *name, const cJSON *pool)
{
	if (!str_at(pool, "name") ||
	    !whole(at(pool, "generation"), &out->generation) ||
	    !whole(at(pool, "resourceSliceCount"), &out->slice_count) ||
	    out->slice_count < 1)
		return ft_error_set(
		    FT_EINVAL,
		    "resourceslice %s: spec.pool: want name, generation and resourceSliceCount >= 1",
		    name);
	return dup_opt(&out->pool, str_at(pool, "name"));
}

int ft_codec_dra_slice_decode(ft_dra_slice_t *out, const cJSON *obj)
{
	const cJSON *spec = at(obj, "spec");
	const char *name = str_at(at(obj, "metadata"), "name");
	where_t w = {name, NULL, 0};
	int rc;

	memset(out, 0, sizeof(*out));
	if (!name)
		return ft_error_set(FT_EINVAL,
				    "resourceslice: metadata.name is required");
	if (!str_at(spec, "driver"))
		return ft_error_set(FT_EINVAL,
				    "resourceslice %s: spec.driver is required",
				    name);
	w.driver = str_at(spec, "driver");
	if ((rc = dup_opt(&out->name, name)) < 0 ||
	    (rc = dup_opt(&out->driver, w.driver)) < 0 ||
	    (rc = dup_opt(&out->node, str_at(spec, "nodeName"))) < 0 ||
	    (rc = decode_pool(out, name, at(spec, "pool"))) < 0 ||
	    (rc = decode_devices(out, &w, at(spec, "devices"))) < 0)
		ft_dra_slice_dispose(out);
	return rc;
}

/* ---- ResourceClaim --------------------------------------------------------
 */

static int claim_bad(const char *name, const char *field, const char *why)
{
	return ft_error_set(FT_EINVAL, "resourceclaim %s: %s: %s", name, field,
			    why);
}

/* The uid of the controlling owner when it is a Pod. */
static const char *owner_pod(const cJSON *meta)
{
	const cJSON *ref;

	cJSON_ArrayForEach (ref, at(meta, "ownerReferences")) {
		const char *kind = str_at(ref, "kind");
		if (kind && strcmp(kind, "Pod") == 0 &&
		    cJSON_IsTrue(at(ref, "controller")))
			return str_at(ref, "uid");
	}
	return NULL;
}

/* exactly, or the first of firstAvailable (the preferred subrequest). */
static int decode_request(ft_dra_request_t *r, const char *claim,
			  const cJSON *req)
{
	const cJSON *ex = at(req, "exactly");
	const char *mode;
	int64_t count = 1;
	int rc;

	if (!ex)
		ex = cJSON_GetArrayItem(at(req, "firstAvailable"), 0);
	if (!str_at(req, "name") || !ex)
		return claim_bad(claim, "spec.devices.requests",
				 "want a name and exactly or firstAvailable");
	mode = str_at(ex, "allocationMode");
	r->all = mode && strcmp(mode, "All") == 0;
	if (at(ex, "count") && (!whole(at(ex, "count"), &count) || count < 0 ||
				count > UINT32_MAX))
		return claim_bad(claim, "spec.devices.requests.count",
				 "want a whole number");
	r->count = (uint32_t)count;
	if ((rc = dup_opt(&r->name, str_at(req, "name"))) < 0 ||
	    (rc = dup_opt(&r->device_class, str_at(ex, "deviceClassName"))) < 0)
		return rc;
	return 0;
}

static int decode_requests(ft_dra_claim_t *out, const cJSON *requests)
{
	const cJSON *req;
	unsigned n = (unsigned)cJSON_GetArraySize(requests);
	int rc = 0;

	if (!n)
		return 0;
	if (!(out->requests = calloc(n, sizeof(*out->requests))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (req, requests) {
		if ((rc = decode_request(&out->requests[out->n_requests++],
					 out->name, req)) < 0)
			break;
	}
	return rc;
}

static uint32_t consumed_shares(const cJSON *result)
{
	const cJSON *v = at(at(result, "consumedCapacity"), "shares");
	int64_t milli;

	if (!cJSON_IsString(v) ||
	    ft_quantity_milli(&milli, v->valuestring) < 0 || milli < 1000 ||
	    milli / 1000 > UINT32_MAX)
		return 0;
	return (uint32_t)(milli / 1000);
}

static int decode_result(ft_dra_result_t *r, const char *claim,
			 const cJSON *res)
{
	int rc;

	if (!str_at(res, "driver") || !str_at(res, "pool") ||
	    !str_at(res, "device"))
		return claim_bad(claim, "status.allocation.devices.results",
				 "want driver, pool and device");
	r->admin_access = cJSON_IsTrue(at(res, "adminAccess"));
	r->shares = consumed_shares(res);
	if ((rc = dup_opt(&r->request, str_at(res, "request"))) < 0 ||
	    (rc = dup_opt(&r->driver, str_at(res, "driver"))) < 0 ||
	    (rc = dup_opt(&r->pool, str_at(res, "pool"))) < 0 ||
	    (rc = dup_opt(&r->device, str_at(res, "device"))) < 0)
		return rc;
	return 0;
}

/*
 * The node of the allocation: kube-scheduler writes a single term with
 * matchFields metadata.name In [node] (structured allocator, nodeSelector).
 */
static const char *allocation_node(const cJSON *selector)
{
	const cJSON *term =
	    cJSON_GetArrayItem(at(selector, "nodeSelectorTerms"), 0);
	const cJSON *field;

	cJSON_ArrayForEach (field, at(term, "matchFields")) {
		const char *key = str_at(field, "key");
		const char *op = str_at(field, "operator");
		const cJSON *values = at(field, "values");
		if (key && op && strcmp(key, "metadata.name") == 0 &&
		    strcmp(op, "In") == 0 && cJSON_GetArraySize(values) == 1 &&
		    cJSON_IsString(cJSON_GetArrayItem(values, 0)))
			return cJSON_GetArrayItem(values, 0)->valuestring;
	}
	return NULL;
}

static int decode_allocation(ft_dra_claim_t *out, const cJSON *alloc)
{
	const cJSON *results = at(at(alloc, "devices"), "results");
	const cJSON *res;
	unsigned n = (unsigned)cJSON_GetArraySize(results);
	int rc;

	if (!cJSON_IsObject(alloc))
		return 0;
	out->allocated = true;
	if ((rc = dup_opt(&out->node,
			  allocation_node(at(alloc, "nodeSelector")))) < 0)
		return rc;
	if (!n)
		return 0;
	if (!(out->results = calloc(n, sizeof(*out->results))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (res, results) {
		if ((rc = decode_result(&out->results[out->n_results++],
					out->name, res)) < 0)
			return rc;
	}
	return 0;
}

/* status.reservedFor: the pods among the consumers. */
static int decode_consumers(ft_dra_claim_t *out, const cJSON *reserved)
{
	const cJSON *c;
	unsigned n = (unsigned)cJSON_GetArraySize(reserved);
	int rc;

	if (!n)
		return 0;
	if (!(out->consumers = calloc(n, sizeof(*out->consumers))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (c, reserved) {
		const char *resource = str_at(c, "resource");
		const char *group = str_at(c, "apiGroup");
		ft_dra_consumer_t *k;
		if (!resource || strcmp(resource, "pods") != 0 ||
		    (group && group[0]) || !str_at(c, "uid"))
			continue;
		k = &out->consumers[out->n_consumers++];
		if ((rc = dup_opt(&k->uid, str_at(c, "uid"))) < 0 ||
		    (rc = dup_opt(&k->name, str_at(c, "name"))) < 0)
			return rc;
	}
	return 0;
}

static bool extended_claim(const cJSON *meta)
{
	const char *v = str_at(at(meta, "annotations"), FT_DRA_EXTENDED_CLAIM);

	return v && strcmp(v, "true") == 0;
}

int ft_codec_dra_claim_decode(ft_dra_claim_t *out, const cJSON *obj)
{
	const cJSON *meta = at(obj, "metadata");
	const cJSON *status = at(obj, "status");
	const char *name = str_at(meta, "name");
	int rc;

	memset(out, 0, sizeof(*out));
	if (!name || !str_at(meta, "uid"))
		return ft_error_set(
		    FT_EINVAL,
		    "resourceclaim: metadata.name and uid are required");
	out->extended = extended_claim(meta);
	if ((rc = dup_opt(&out->name, name)) < 0 ||
	    (rc = dup_opt(&out->uid, str_at(meta, "uid"))) < 0 ||
	    (rc = dup_opt(&out->ns, str_at(meta, "namespace")
					? str_at(meta, "namespace")
					: "default")) < 0 ||
	    (rc = dup_opt(&out->owner_pod, owner_pod(meta))) < 0 ||
	    (rc = decode_requests(
		 out, at(at(at(obj, "spec"), "devices"), "requests"))) < 0 ||
	    (rc = decode_allocation(out, at(status, "allocation"))) < 0 ||
	    (rc = decode_consumers(out, at(status, "reservedFor"))) < 0)
		ft_dra_claim_dispose(out);
	return rc;
}

/* ---- DeviceClass ---------------------------------------------------------
 */

#define CLASS_SELECTORS_MAX 16

int ft_codec_dra_class_decode(ft_dra_class_t *out, const cJSON *obj,
			      const char *driver)
{
	const cJSON *spec = at(obj, "spec"), *sel;
	const char *name = str_at(at(obj, "metadata"), "name");
	const char *exprs[CLASS_SELECTORS_MAX];
	unsigned n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!name)
		return ft_error_set(FT_EINVAL,
				    "deviceclass: metadata.name is required");
	cJSON_ArrayForEach (sel, at(spec, "selectors")) {
		const char *e = str_at(at(sel, "cel"), "expression");
		if (e && n < CLASS_SELECTORS_MAX)
			exprs[n++] = e;
	}
	out->kind = ft_dra_class_kind(exprs, n, driver);
	if ((rc = dup_opt(&out->name, name)) < 0 ||
	    (rc = dup_opt(&out->extended_resource,
			  str_at(spec, "extendedResourceName"))) < 0)
		ft_dra_class_dispose(out);
	return rc;
}
