/*
 * The allocation annotation (flextopo.io/allocation,
 * api/allocation.schema.json) that bind writes on a pod and the watch reads
 * back:
 *   {"version":1,"node":"n1","level":"numa","mode":"guaranteed",
 *    "gpus":["GPU-..."],"gpuIndexes":[0],"mig":[{"uuid":"MIG-...",
 *    "profile":"3g.40gb","gpu":"GPU-...","start":0,"size":4}],
 *    "cpuset":"0-7","numaNodes":[0],"memoryMiB":1024}
 * and, for replicas of shared GPUs, "replicas":[{"gpu":"GPU-...","count":8}]
 * (only when the pod holds some, so whole-GPU allocations read as before).
 * Devices are named by UUID so that the annotation stays true when GPU
 * indexes are renumbered; indexes and NUMA ids are there for people.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdlib.h>
#include <string.h>

static bool has_bit(const uint64_t *mask, unsigned i)
{
	return (mask[i / 64] >> (i % 64)) & 1;
}

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
		if (has_bit(p->mig, i))
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

int ft_codec_allocation_encode(char **out, const ft_placement_t *p,
			       const ft_node_t *node, ft_affinity_mode_t mode)
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
	    !(*out = cJSON_PrintUnformatted(root)))
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
		if (has_bit(p->mig, i) && out->n_mig < FT_ALLOC_MIG_MAX &&
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

static int decode_uuids(char **dst, unsigned *n, unsigned max,
			const cJSON *list, const char *key, const char *field)
{
	const cJSON *item;

	if (list && !cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL, "%s: expected an array", key);
	cJSON_ArrayForEach(item, list)
	{
		const cJSON *v =
		    field ? cJSON_GetObjectItemCaseSensitive(item, field)
			  : item;
		if (!cJSON_IsString(v))
			return ft_error_set(FT_EINVAL,
					    "%s[%u]: expected a uuid string",
					    key, *n);
		if (*n >= max)
			return ft_error_set(FT_EINVAL, "%s: more than %u", key,
					    max);
		if (!(dst[*n] = strdup(v->valuestring)))
			return ft_error_set(FT_ENOMEM, "out of memory");
		(*n)++;
	}
	return 0;
}

static int decode_replica(ft_allocation_t *out, const cJSON *item)
{
	const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(item, "gpu");
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(item, "count");
	unsigned i = out->n_replicas;

	if (!cJSON_IsString(gpu))
		return ft_error_set(
		    FT_EINVAL, "replicas[%u].gpu: expected a uuid string", i);
	if (!cJSON_IsNumber(count) || count->valuedouble < 1 ||
	    count->valuedouble > FT_REPLICAS_MAX ||
	    count->valuedouble != (double)(int)count->valuedouble)
		return ft_error_set(FT_EINVAL,
				    "replicas[%u].count: expected an integer "
				    "1-%d",
				    i, FT_REPLICAS_MAX);
	if (i >= FT_GPU_MAX)
		return ft_error_set(FT_EINVAL, "replicas: more than %d",
				    FT_GPU_MAX);
	if (!(out->replica_gpus[i] = strdup(gpu->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	out->replica_counts[i] = (uint8_t)count->valueint;
	out->n_replicas++;
	return 0;
}

static int decode_replicas(ft_allocation_t *out, const cJSON *list)
{
	const cJSON *item;
	int rc;

	if (list && !cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL, "replicas: expected an array");
	cJSON_ArrayForEach(item, list)
	{
		if ((rc = decode_replica(out, item)) < 0)
			return rc;
	}
	return 0;
}

static int decode_fields(ft_allocation_t *out, const cJSON *root)
{
	const cJSON *level = cJSON_GetObjectItemCaseSensitive(root, "level");
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
	const cJSON *cpus = cJSON_GetObjectItemCaseSensitive(root, "cpuset");
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
	if (cJSON_IsString(cpus) &&
	    (rc = ft_cpuset_parse(&out->cpus, cpus->valuestring)) < 0)
		return rc;
	if (cJSON_IsNumber(mem) && mem->valuedouble > 9007199254740992.0)
		return ft_error_set(FT_EINVAL, "memoryMiB: out of range");
	if (cJSON_IsNumber(mem) && mem->valuedouble >= 0)
		out->memory_mib = (uint64_t)mem->valuedouble;
	if ((rc = decode_uuids(out->gpu_uuids, &out->n_gpus, FT_GPU_MAX,
			       cJSON_GetObjectItemCaseSensitive(root, "gpus"),
			       "gpus", NULL)) < 0)
		return rc;
	if ((rc = decode_uuids(out->mig_uuids, &out->n_mig, FT_ALLOC_MIG_MAX,
			       cJSON_GetObjectItemCaseSensitive(root, "mig"),
			       "mig", "uuid")) < 0)
		return rc;
	return decode_replicas(
	    out, cJSON_GetObjectItemCaseSensitive(root, "replicas"));
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
