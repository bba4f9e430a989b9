/*
 * The pod annotations that name units by uuid: the allocation
 * (flextopo.io/allocation, api/allocation.schema.json) that bind writes on a
 * pod and the watch reads back, and the observed assignment
 * (flextopo.io/observed, api/observed.schema.json) that the node agent
 * flextopo-node writes. Both list GPUs, MIG devices, replicas of shared GPUs
 * and a cpuset, and one set of decoders reads those units for both (and for
 * each container of the observed one). The allocation:
 *   {"version":1,"node":"n1","level":"numa","mode":"guaranteed",
 *    "gpus":["GPU-..."],"gpuIndexes":[0],"mig":[{"uuid":"MIG-...",
 *    "profile":"3g.40gb","gpu":"GPU-...","start":0,"size":4}],
 *    "cpuset":"0-7","numaNodes":[0],"memoryMiB":1024}
 * and, for replicas of shared GPUs, "replicas":[{"gpu":"GPU-...","count":8}]
 * (only when the pod holds some, so whole-GPU allocations read as before).
 * Devices are named by UUID so that the annotation stays true when GPU
 * indexes are renumbered; indexes and NUMA ids are there for people.
 *
 * The allocation is read leniently (missing keys take defaults), as it
 * always was; the observed annotation is checked as node/alloc
 * (ParseObserved) checks it, so that both read the golden fixtures of
 * test/fixtures/observed alike: required keys, version 1, a node, a known
 * source, uuid strings each listed once, replica counts 1-100, cpulists.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *mig_entry(const ft_topology_t *t, unsigned i)
{
	const ft_mig_instance_t *m = &t->mig[i];
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "uuid", m->uuid);
	cJSON_AddStringToObject(o, "profile", m->profile);
	cJSON_AddStringToObject(o, "gpu", t->gpus[m->gpu].uuid);
	cJSON_AddNumberToObject(o, "start", m->start);
	cJSON_AddNumberToObject(o, "size", m->size);
	return o;
}

static bool add_devices(cJSON *root, const ft_placement_t *p,
			const ft_topology_t *t)
{
	cJSON *gpus = cJSON_AddArrayToObject(root, "gpus");
	cJSON *indexes = cJSON_AddArrayToObject(root, "gpuIndexes");
	cJSON *mig = cJSON_AddArrayToObject(root, "mig");
	cJSON *numa = NULL;

	if (!gpus || !indexes || !mig)
		return false;
	for (unsigned g = 0; g < t->n_gpus; g++) {
		if (!(p->gpus & (1u << g)))
			continue;
		cJSON_AddItemToArray(gpus, cJSON_CreateString(t->gpus[g].uuid));
		cJSON_AddItemToArray(indexes,
				     cJSON_CreateNumber(t->gpus[g].index));
	}
	for (unsigned i = 0; i < t->n_mig; i++)
		if (ft_mig_mask_has(p->mig, i))
			cJSON_AddItemToArray(mig, mig_entry(t, i));
	numa = cJSON_CreateArray();
	for (unsigned n = 0; numa && n < t->n_numa; n++)
		if (p->numa_nodes & (1u << n))
			cJSON_AddItemToArray(numa,
					     cJSON_CreateNumber(t->numa[n].id));
	return numa && cJSON_AddItemToObject(root, "numaNodes", numa);
}

static bool add_replicas(cJSON *root, const ft_placement_t *p,
			 const ft_topology_t *t)
{
	cJSON *list = NULL;

	for (unsigned g = 0; g < t->n_gpus; g++) {
		cJSON *o;
		if (!p->replicas[g])
			continue;
		if (!list && !(list = cJSON_AddArrayToObject(root, "replicas")))
			return false;
		if (!(o = cJSON_CreateObject()) ||
		    !cJSON_AddItemToArray(list, o) ||
		    !cJSON_AddStringToObject(o, "gpu", t->gpus[g].uuid) ||
		    !cJSON_AddNumberToObject(o, "count", p->replicas[g]))
			return false;
	}
	return true;
}

static bool add_levels(cJSON *root, uint8_t levels)
{
	cJSON *list = cJSON_AddArrayToObject(root, "levels");

	for (unsigned l = 0; list && l < FT_LEVEL_COUNT; l++)
		if (levels & (1u << l))
			cJSON_AddItemToArray(
			    list,
			    cJSON_CreateString(ft_level_name((ft_level_t)l)));
	return list != NULL;
}

/* "dra":{"devices":[...]}: what DRA allocated, named as the claims do. */
static bool add_dra(cJSON *root, const ft_dra_device_ref_t *refs, unsigned n)
{
	cJSON *list;
	char claim[512];

	if (!refs)
		return true;
	if (!(list = cJSON_AddArrayToObject(
		  cJSON_AddObjectToObject(root, "dra"), "devices")))
		return false;
	for (unsigned i = 0; i < n; i++) {
		const ft_dra_device_ref_t *r = &refs[i];
		cJSON *o = cJSON_CreateObject();
		snprintf(claim, sizeof(claim), "%s/%s", r->claim_ns,
			 r->claim_name);
		if (!o || !cJSON_AddItemToArray(list, o) ||
		    !cJSON_AddStringToObject(o, "claim", claim) ||
		    !cJSON_AddStringToObject(o, "claimUID", r->claim_uid) ||
		    (r->request &&
		     !cJSON_AddStringToObject(o, "request", r->request)) ||
		    !cJSON_AddStringToObject(o, "driver", r->driver) ||
		    !cJSON_AddStringToObject(o, "pool", r->pool) ||
		    !cJSON_AddStringToObject(o, "device", r->device) ||
		    !cJSON_AddStringToObject(o, "uuid", r->uuid))
			return false;
	}
	return true;
}

int ft_codec_allocation_encode(char **out, const ft_placement_t *p,
			       const ft_node_t *node, ft_affinity_mode_t mode)
{
	return ft_codec_allocation_encode_dra(out, p, node, mode, NULL, 0);
}

int ft_codec_allocation_encode_dra(char **out, const ft_placement_t *p,
				   const ft_node_t *node,
				   ft_affinity_mode_t mode,
				   const ft_dra_device_ref_t *refs, unsigned n)
{
	cJSON *root = cJSON_CreateObject();
	char cpus[2048];
	int rc = 0;

	*out = NULL;
	ft_cpuset_format(cpus, sizeof(cpus), &p->cpus);
	if (!root || !node->topology ||
	    !cJSON_AddNumberToObject(root, "version", 1) ||
	    !cJSON_AddStringToObject(root, "node", node->name) ||
	    !cJSON_AddStringToObject(root, "level", ft_level_name(p->level)) ||
	    !add_levels(root, p->levels) ||
	    !cJSON_AddStringToObject(
		root, "mode",
		mode == FT_MODE_GUARANTEED ? "guaranteed" : "best-effort") ||
	    !add_devices(root, p, node->topology) ||
	    !add_replicas(root, p, node->topology) ||
	    !cJSON_AddStringToObject(root, "cpuset", cpus) ||
	    !cJSON_AddNumberToObject(root, "memoryMiB",
				     (double)p->memory_mib) ||
	    !add_dra(root, refs, n) || !(*out = cJSON_PrintUnformatted(root)))
		rc = ft_error_set(FT_ENOMEM, "allocation: out of memory");
	cJSON_Delete(root);
	return rc;
}

int ft_codec_allocation_from_placement(ft_allocation_t *out,
				       const ft_placement_t *p,
				       const ft_node_t *node,
				       ft_affinity_mode_t mode)
{
	const ft_topology_t *t = node->topology;

	memset(out, 0, sizeof(*out));
	out->level = p->level;
	out->mode = mode;
	out->cpus = p->cpus;
	out->memory_mib = p->memory_mib;
	for (unsigned g = 0; t && g < t->n_gpus; g++)
		if ((p->gpus & (1u << g)) &&
		    !(out->gpu_uuids[out->n_gpus++] = strdup(t->gpus[g].uuid)))
			goto nomem;
	for (unsigned i = 0; t && i < t->n_mig; i++)
		if (ft_mig_mask_has(p->mig, i) &&
		    out->n_mig < FT_ALLOC_MIG_MAX &&
		    !(out->mig_uuids[out->n_mig++] = strdup(t->mig[i].uuid)))
			goto nomem;
	for (unsigned g = 0; t && g < t->n_gpus; g++) {
		if (!p->replicas[g])
			continue;
		out->replica_counts[out->n_replicas] = p->replicas[g];
		if (!(out->replica_gpus[out->n_replicas++] =
			  strdup(t->gpus[g].uuid)))
			goto nomem;
	}
	return 0;
nomem:
	ft_allocation_dispose(out);
	return ft_error_set(FT_ENOMEM, "allocation: out of memory");
}

static bool has_uuid(char *const *list, unsigned n, const char *uuid)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(list[i], uuid) == 0)
			return true;
	return false;
}

/*
 * A list of uuid strings at `key`, or of objects with the uuid in `field`:
 * each non-empty and listed once, at most `max`.
 */
static int decode_uuids(char **dst, unsigned *n, unsigned max,
			const cJSON *list, const char *key, const char *field)
{
	const cJSON *item;

	if (list && !cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL, "%s: expected an array", key);
	cJSON_ArrayForEach (item, list) {
		const cJSON *v =
		    field ? cJSON_GetObjectItemCaseSensitive(item, field)
			  : item;
		if (!cJSON_IsString(v))
			return ft_error_set(FT_EINVAL,
					    "%s[%u]: expected a uuid string",
					    key, *n);
		if (!v->valuestring[0])
			return ft_error_set(FT_EINVAL, "%s[%u]: empty uuid",
					    key, *n);
		if (has_uuid(dst, *n, v->valuestring))
			return ft_error_set(FT_EINVAL,
					    "%s[%u]: %s listed twice", key, *n,
					    v->valuestring);
		if (*n >= max)
			return ft_error_set(FT_EINVAL, "%s: more than %u", key,
					    max);
		if (!(dst[*n] = strdup(v->valuestring)))
			return ft_error_set(FT_ENOMEM, "out of memory");
		(*n)++;
	}
	return 0;
}

static int decode_replica(ft_allocation_t *out, const cJSON *item,
			  const char *key)
{
	const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(item, "gpu");
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(item, "count");
	unsigned i = out->n_replicas;

	if (!cJSON_IsString(gpu) || !gpu->valuestring[0])
		return ft_error_set(FT_EINVAL, "%s[%u].gpu: %s", key, i,
				    cJSON_IsString(gpu)
					? "empty uuid"
					: "expected a uuid string");
	if (has_uuid(out->replica_gpus, i, gpu->valuestring))
		return ft_error_set(FT_EINVAL, "%s[%u].gpu: %s listed twice",
				    key, i, gpu->valuestring);
	if (cJSON_IsNumber(count) &&
	    (count->valuedouble < 1 || count->valuedouble > FT_REPLICAS_MAX))
		return ft_error_set(FT_EINVAL,
				    "%s[%u].count: %g is outside 1-%d", key, i,
				    count->valuedouble, FT_REPLICAS_MAX);
	if (!cJSON_IsNumber(count) ||
	    count->valuedouble != (double)(int)count->valuedouble)
		return ft_error_set(FT_EINVAL,
				    "%s[%u].count: expected an integer 1-%d",
				    key, i, FT_REPLICAS_MAX);
	if (i >= FT_GPU_MAX)
		return ft_error_set(FT_EINVAL, "%s: more than %d", key,
				    FT_GPU_MAX);
	if (!(out->replica_gpus[i] = strdup(gpu->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	out->replica_counts[i] = (uint8_t)count->valueint;
	out->n_replicas++;
	return 0;
}

static int decode_replicas(ft_allocation_t *out, const cJSON *list,
			   const char *key)
{
	const cJSON *item;
	int rc;

	if (list && !cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL, "%s: expected an array", key);
	cJSON_ArrayForEach (item, list) {
		if ((rc = decode_replica(out, item, key)) < 0)
			return rc;
	}
	return 0;
}

/* A cpulist string at `key`; absent is the empty set. */
static int decode_cpuset(ft_cpuset_t *out, const cJSON *v, const char *key)
{
	ft_cpuset_clear(out);
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return ft_error_set(FT_EINVAL, "%s: expected a cpulist string",
				    key);
	if (ft_cpuset_parse(out, v->valuestring) < 0)
		return ft_error_set(
		    FT_EINVAL,
		    "%s: \"%.64s\": not a cpulist of CPU ids 0-%d in ascending ranges",
		    key, v->valuestring, FT_CPU_MAX - 1);
	return 0;
}

/*
 * The units of `obj`: "gpus", "mig" (uuids in `mig_field` of objects, or
 * plain uuids when NULL), "replicas" and "cpuset", each named in errors
 * after `prefix` ("" or "containers[0].").
 */
static int decode_units(ft_allocation_t *out, const cJSON *obj,
			const char *prefix, const char *mig_field)
{
	char key[64];
	int rc;

	snprintf(key, sizeof(key), "%sgpus", prefix);
	if ((rc = decode_uuids(out->gpu_uuids, &out->n_gpus, FT_GPU_MAX,
			       cJSON_GetObjectItemCaseSensitive(obj, "gpus"),
			       key, NULL)) < 0)
		return rc;
	snprintf(key, sizeof(key), "%smig", prefix);
	if ((rc = decode_uuids(out->mig_uuids, &out->n_mig, FT_ALLOC_MIG_MAX,
			       cJSON_GetObjectItemCaseSensitive(obj, "mig"),
			       key, mig_field)) < 0)
		return rc;
	snprintf(key, sizeof(key), "%sreplicas", prefix);
	if ((rc = decode_replicas(
		 out, cJSON_GetObjectItemCaseSensitive(obj, "replicas"), key)) <
	    0)
		return rc;
	snprintf(key, sizeof(key), "%scpuset", prefix);
	return decode_cpuset(
	    &out->cpus, cJSON_GetObjectItemCaseSensitive(obj, "cpuset"), key);
}

static const char *const dra_fields[] = {"claim", "claimUID", "driver",
					 "pool",  "device",   "uuid"};

static const char *dra_field(const cJSON *d, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Was device (claimUID, device) of `d` listed before position `i`? */
static bool dra_listed(const cJSON *devices, const cJSON *d, unsigned i)
{
	const cJSON *e;
	unsigned k = 0;

	cJSON_ArrayForEach (e, devices) {
		if (k++ == i)
			break;
		if (strcmp(dra_field(e, "claimUID"),
			   dra_field(d, "claimUID")) == 0 &&
		    strcmp(dra_field(e, "device"), dra_field(d, "device")) == 0)
			return true;
	}
	return false;
}

/*
 * One device of the dra key, as the node agent's reader checks it too
 * (node/alloc, the same golden fixtures): every field set, the
 * claim as namespace/name, listed once, its uuid in gpus or mig.
 */
static int decode_dra_device(const ft_allocation_t *out, const cJSON *devices,
			     const cJSON *d, unsigned i)
{
	const char *claim, *uuid;

	for (unsigned k = 0; k < sizeof(dra_fields) / sizeof(dra_fields[0]);
	     k++) {
		const char *v = dra_field(d, dra_fields[k]);
		if (!v || !v[0])
			return ft_error_set(FT_EINVAL,
					    "dra.devices[%u].%s: empty", i,
					    dra_fields[k]);
	}
	claim = dra_field(d, "claim");
	uuid = dra_field(d, "uuid");
	if (!strchr(claim, '/') || claim[0] == '/' || !strchr(claim, '/')[1])
		return ft_error_set(
		    FT_EINVAL,
		    "dra.devices[%u].claim: \"%s\" is not namespace/name", i,
		    claim);
	if (dra_listed(devices, d, i))
		return ft_error_set(
		    FT_EINVAL,
		    "dra.devices[%u]: device %s of claim %s (uid %s) listed twice",
		    i, dra_field(d, "device"), claim, dra_field(d, "claimUID"));
	if (!has_uuid(out->gpu_uuids, out->n_gpus, uuid) &&
	    !has_uuid(out->mig_uuids, out->n_mig, uuid))
		return ft_error_set(
		    FT_EINVAL,
		    "dra.devices[%u].uuid: %s is in neither gpus nor mig", i,
		    uuid);
	return 0;
}

/*
 * The "dra" key: DRA chose the devices (api/allocation.schema.json). Each
 * device is named fully and listed in gpus or mig.
 */
static int decode_dra(ft_allocation_t *out, const cJSON *dra)
{
	const cJSON *devices = cJSON_GetObjectItemCaseSensitive(dra, "devices");
	const cJSON *d;
	unsigned i = 0;
	int rc;

	if (!dra)
		return 0;
	if (!cJSON_IsObject(dra) || !cJSON_IsArray(devices))
		return ft_error_set(FT_EINVAL,
				    "dra.devices: required key missing");
	cJSON_ArrayForEach (d, devices) {
		if ((rc = decode_dra_device(out, devices, d, i++)) < 0)
			return rc;
	}
	out->dra = true;
	return 0;
}

static int decode_fields(ft_allocation_t *out, const cJSON *root)
{
	const cJSON *level = cJSON_GetObjectItemCaseSensitive(root, "level");
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memoryMiB");
	int rc;

	out->level = FT_LEVEL_NODE;
	if (cJSON_IsString(level) &&
	    (rc = ft_level_parse(&out->level, level->valuestring)) < 0)
		return rc;
	out->mode = cJSON_IsString(mode) &&
			    strcmp(mode->valuestring, "best-effort") == 0
			? FT_MODE_BEST_EFFORT
			: FT_MODE_GUARANTEED;
	if (cJSON_IsNumber(mem) && mem->valuedouble > 9007199254740992.0)
		return ft_error_set(FT_EINVAL, "memoryMiB: out of range");
	if (cJSON_IsNumber(mem) && mem->valuedouble >= 0)
		out->memory_mib = (uint64_t)mem->valuedouble;
	if ((rc = decode_units(out, root, "", "uuid")) < 0)
		return rc;
	return decode_dra(out, cJSON_GetObjectItemCaseSensitive(root, "dra"));
}

int ft_codec_allocation_decode(ft_allocation_t *out, const char *json)
{
	cJSON *root = cJSON_Parse(json);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(root)) {
		rc = ft_error_set(FT_EINVAL, "not a JSON object");
		goto cleanup;
	}
	if ((rc = decode_fields(out, root)) < 0)
		ft_allocation_dispose(out);
cleanup:
	cJSON_Delete(root);
	return rc;
}

/* The keys api/observed.schema.json requires, as ParseObserved checks. */
static int check_observed_keys(const cJSON *root)
{
	static const char *const required[] = {"version", "node", "source",
					       "gpus",	  "mig",  "cpuset"};

	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!cJSON_GetObjectItemCaseSensitive(root, required[i]))
			return ft_error_set(
			    FT_EINVAL, "%s: required key missing", required[i]);
	return 0;
}

static int decode_source(ft_observed_source_t *out, const cJSON *v)
{
	if (!cJSON_IsString(v))
		return ft_error_set(FT_EINVAL, "source: expected a string");
	if (strcmp(v->valuestring, "nri") == 0)
		*out = FT_OBSERVED_NRI;
	else if (strcmp(v->valuestring, "podresources") == 0)
		*out = FT_OBSERVED_PODRESOURCES;
	else
		return ft_error_set(
		    FT_EINVAL, "source: \"%.64s\" is not nri or podresources",
		    v->valuestring);
	return 0;
}

static int decode_observed_header(ft_observed_t *out, const cJSON *root)
{
	const cJSON *version =
	    cJSON_GetObjectItemCaseSensitive(root, "version");
	const cJSON *node = cJSON_GetObjectItemCaseSensitive(root, "node");
	int rc;

	if (!cJSON_IsNumber(version))
		return ft_error_set(FT_EINVAL, "version: expected an integer");
	if (version->valuedouble != 1)
		return ft_error_set(FT_EINVAL, "version: %g is not 1",
				    version->valuedouble);
	if (!cJSON_IsString(node))
		return ft_error_set(FT_EINVAL, "node: expected a string");
	if (!node->valuestring[0])
		return ft_error_set(FT_EINVAL, "node: empty");
	if ((rc = decode_source(&out->source, cJSON_GetObjectItemCaseSensitive(
						  root, "source"))) < 0)
		return rc;
	if (!(out->node = strdup(node->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

/*
 * The per-container holdings are informational (the pod holds their union,
 * given at the top) but checked like it, as the agent's own reader does.
 */
static int check_container(const cJSON *c, unsigned i)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
	ft_allocation_t units;
	char prefix[32];
	int rc;

	if (!cJSON_IsObject(c))
		return ft_error_set(FT_EINVAL,
				    "containers[%u]: expected an object", i);
	if (name && !cJSON_IsString(name))
		return ft_error_set(
		    FT_EINVAL, "containers[%u].name: expected a string", i);
	if (!name || !name->valuestring[0])
		return ft_error_set(FT_EINVAL, "containers[%u].name: empty", i);
	snprintf(prefix, sizeof(prefix), "containers[%u].", i);
	memset(&units, 0, sizeof(units));
	rc = decode_units(&units, c, prefix, NULL);
	ft_allocation_dispose(&units);
	return rc;
}

static int check_containers(const cJSON *list)
{
	const cJSON *c;
	unsigned i = 0;
	int rc;

	if (list && !cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL, "containers: expected an array");
	cJSON_ArrayForEach (c, list) {
		if ((rc = check_container(c, i++)) < 0)
			return rc;
	}
	return 0;
}

int ft_codec_observed_decode(ft_observed_t *out, const char *json)
{
	cJSON *root = cJSON_Parse(json);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(root)) {
		rc = ft_error_set(FT_EINVAL, "not a JSON object");
		goto cleanup;
	}
	if ((rc = check_observed_keys(root)) < 0 ||
	    (rc = decode_observed_header(out, root)) < 0 ||
	    (rc = decode_units(&out->units, root, "", NULL)) < 0 ||
	    (rc = check_containers(
		 cJSON_GetObjectItemCaseSensitive(root, "containers"))) < 0)
		ft_observed_dispose(out);
cleanup:
	cJSON_Delete(root);
	return rc;
}
