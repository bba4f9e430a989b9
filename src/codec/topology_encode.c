/*
 * The hardware model of topology.h written back out as the topology
 * annotation (api/topology.schema.json, version 1), for flextopo-discover.
 *
 * The output nests the way the schema does and the way topology_json.c
 * reads: sockets in position order, each with its NUMA nodes, each NUMA
 * node with its PCIe switches (and their GPUs) and then its switchless GPUs.
 * A model built in that order (discovery builds it so, the parser reads it
 * so) comes back from ft_codec_topology_parse() with every position
 * unchanged. Every NVLink is listed on both ends with the same count, which
 * the parser accepts. Optional members (model, memoryMiB, nvlinks, mig,
 * reserved, empty arrays, a migStrategy that was inferred rather than given)
 * are left out when they hold nothing, which parses back to the same values.
 * What the schema cannot say is refused rather than guessed: a GPU whose
 * NUMA node is unknown, or a NUMA node whose memory is (topology.h; both
 * come only from the authors' FlexTopo graph, never from discovery).
 *
 * Also here: the merge patch that sets one annotation, so that cJSON stays
 * inside the codec stage.
 */
#include <flextopo/cpuset.h>
#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

/* Long enough for any cpulist of FT_CPU_MAX CPUs ("0,2,4,...,510"). */
#define CPULIST_LEN 4096

/* A new object appended to `array`; NULL when out of memory. */
static cJSON *append_object(cJSON *array)
{
	cJSON *item = array ? cJSON_CreateObject() : NULL;

	if (item && cJSON_AddItemToArray(array, item))
		return item;
	cJSON_Delete(item);
	return NULL;
}

static bool append_number(cJSON *array, double value)
{
	cJSON *item = cJSON_CreateNumber(value);

	if (item && cJSON_AddItemToArray(array, item))
		return true;
	cJSON_Delete(item);
	return false;
}

static bool add_cpulist(cJSON *obj, const char *key, const ft_cpuset_t *cpus)
{
	char text[CPULIST_LEN];

	ft_cpuset_format(text, sizeof(text), cpus);
	return cJSON_AddStringToObject(obj, key, text) != NULL;
}

static bool write_nvlinks(cJSON *obj, const ft_topology_t *t, unsigned g)
{
	const ft_gpu_t *gpu = &t->gpus[g];
	cJSON *array, *link;

	if (!gpu->nvlink_peers)
		return true;
	if (!(array = cJSON_AddArrayToObject(obj, "nvlinks")))
		return false;
	for (unsigned p = 0; p < t->n_gpus; p++) {
		if (!(gpu->nvlink_peers & (1u << p)))
			continue;
		if (!(link = append_object(array)) ||
		    !cJSON_AddNumberToObject(link, "peer", t->gpus[p].index) ||
		    !cJSON_AddNumberToObject(link, "links",
					     gpu->nvlink_links[p]))
			return false;
	}
	return true;
}

static bool write_mig_instances(cJSON *mig, const ft_topology_t *t, unsigned g)
{
	cJSON *array = NULL, *item;

	for (unsigned i = 0; i < t->n_mig; i++) {
		const ft_mig_instance_t *m = &t->mig[i];
		if (m->gpu != g)
			continue;
		if (!array &&
		    !(array = cJSON_AddArrayToObject(mig, "instances")))
			return false;
		if (!(item = append_object(array)) ||
		    !cJSON_AddStringToObject(item, "profile", m->profile) ||
		    !cJSON_AddNumberToObject(item, "start", m->start) ||
		    !cJSON_AddNumberToObject(item, "size", m->size) ||
		    !cJSON_AddStringToObject(item, "uuid", m->uuid))
			return false;
	}
	return true;
}

static bool write_mig(cJSON *obj, const ft_topology_t *t, unsigned g)
{
	cJSON *mig;

	if (!t->gpus[g].mig_enabled)
		return true;
	return (mig = cJSON_AddObjectToObject(obj, "mig")) &&
	       cJSON_AddTrueToObject(mig, "enabled") &&
	       write_mig_instances(mig, t, g);
}

static bool write_gpu(cJSON *array, const ft_topology_t *t, unsigned g)
{
	const ft_gpu_t *gpu = &t->gpus[g];
	cJSON *obj = append_object(array);

	return obj && cJSON_AddNumberToObject(obj, "index", gpu->index) &&
	       cJSON_AddStringToObject(obj, "uuid", gpu->uuid) &&
	       (!gpu->model[0] ||
		cJSON_AddStringToObject(obj, "model", gpu->model)) &&
	       (!gpu->memory_mib ||
		cJSON_AddNumberToObject(obj, "memoryMiB",
					(double)gpu->memory_mib)) &&
	       (!gpu->replicas ||
		cJSON_AddNumberToObject(obj, "replicas", gpu->replicas)) &&
	       write_nvlinks(obj, t, g) && write_mig(obj, t, g);
}

/* The GPUs of `mask` as obj[key], in position order; nothing when empty. */
static bool write_gpus(cJSON *obj, const char *key, const ft_topology_t *t,
		       uint16_t mask)
{
	cJSON *array;

	if (!mask)
		return true;
	if (!(array = cJSON_AddArrayToObject(obj, key)))
		return false;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if ((mask & (1u << g)) && !write_gpu(array, t, g))
			return false;
	return true;
}

static bool write_switches(cJSON *obj, const ft_topology_t *t, unsigned n)
{
	cJSON *array = NULL, *item;

	for (unsigned s = 0; s < t->n_switches; s++) {
		if (t->switches[s].numa != n)
			continue;
		if (!array &&
		    !(array = cJSON_AddArrayToObject(obj, "pcieSwitches")))
			return false;
		if (!(item = append_object(array)) ||
		    !cJSON_AddNumberToObject(item, "id", t->switches[s].id) ||
		    !write_gpus(item, "gpus", t, t->switches[s].gpus))
			return false;
	}
	return true;
}

static bool write_numa(cJSON *array, const ft_topology_t *t, unsigned n)
{
	const ft_numa_node_t *numa = &t->numa[n];
	uint16_t switchless = 0;
	cJSON *obj = append_object(array);

	for (unsigned g = 0; g < t->n_gpus; g++)
		if ((numa->gpus & (1u << g)) &&
		    t->gpus[g].pcie_switch == FT_NONE)
			switchless |= (uint16_t)(1u << g);
	return obj && cJSON_AddNumberToObject(obj, "id", numa->id) &&
	       add_cpulist(obj, "cpus", &numa->cpus) &&
	       cJSON_AddNumberToObject(obj, "memoryMiB",
				       (double)numa->memory_mib) &&
	       write_switches(obj, t, n) &&
	       write_gpus(obj, "gpus", t, switchless);
}

static bool write_socket(cJSON *array, const ft_topology_t *t, unsigned s)
{
	cJSON *obj = append_object(array), *numa_nodes;

	if (!obj || !cJSON_AddNumberToObject(obj, "id", t->sockets[s].id) ||
	    !(numa_nodes = cJSON_AddArrayToObject(obj, "numaNodes")))
		return false;
	for (unsigned n = 0; n < t->n_numa; n++)
		if (t->numa[n].socket == s && !write_numa(numa_nodes, t, n))
			return false;
	return true;
}

static bool write_reserved(cJSON *root, const ft_topology_t *t)
{
	cJSON *reserved, *gpus;

	if (ft_cpuset_empty(&t->reserved_cpus) && !t->reserved_gpus)
		return true;
	if (!(reserved = cJSON_AddObjectToObject(root, "reserved")))
		return false;
	if (!ft_cpuset_empty(&t->reserved_cpus) &&
	    !add_cpulist(reserved, "cpus", &t->reserved_cpus))
		return false;
	if (!t->reserved_gpus)
		return true;
	if (!(gpus = cJSON_AddArrayToObject(reserved, "gpus")))
		return false;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if ((t->reserved_gpus & (1u << g)) &&
		    !append_number(gpus, t->gpus[g].index))
			return false;
	return true;
}

static bool write_topology(cJSON *root, const ft_topology_t *t)
{
	cJSON *sockets;

	if (!cJSON_AddNumberToObject(root, "version", 1) ||
	    !(sockets = cJSON_AddArrayToObject(root, "sockets")))
		return false;
	for (unsigned s = 0; s < t->n_sockets; s++)
		if (!write_socket(sockets, t, s))
			return false;
	if (t->mig_strategy_given &&
	    !cJSON_AddStringToObject(
		root, "migStrategy",
		t->mig_strategy == FT_MIG_STRATEGY_SINGLE ? "single" : "mixed"))
		return false;
	if (t->shared_resource &&
	    !cJSON_AddStringToObject(root, "sharedResource",
				     t->shared_resource))
		return false;
	return write_reserved(root, t);
}

/* Print and delete `root`; FT_ENOMEM when building or printing failed. */
static int finish(char **out, cJSON *root, bool built)
{
	*out = built ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *out ? 0 : ft_error_set(FT_ENOMEM, "encode: out of memory");
}

/* FT_EINVAL for what the schema cannot express (the top of this file). */
static int check_expressible(const ft_topology_t *t)
{
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (t->unplaced_gpus & (1u << g))
			return ft_error_set(
			    FT_EINVAL,
			    "encode: GPU %d: NUMA node unknown, which the schema cannot express",
			    t->gpus[g].index);
	for (unsigned n = 0; n < t->n_numa; n++)
		if (t->numa_memory_unknown & (1u << n))
			return ft_error_set(
			    FT_EINVAL,
			    "encode: NUMA node %d: memory unknown, which the schema cannot express",
			    t->numa[n].id);
	return 0;
}

int ft_codec_topology_encode(char **out, const ft_topology_t *t)
{
	cJSON *root = NULL;
	int rc;

	*out = NULL;
	if ((rc = check_expressible(t)) < 0)
		return rc;
	root = cJSON_CreateObject();
	return finish(out, root, root && write_topology(root, t));
}

int ft_codec_annotation_patch_encode(char **out, const char *key,
				     const char *value)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *metadata = cJSON_AddObjectToObject(root, "metadata");
	cJSON *annotations = cJSON_AddObjectToObject(metadata, "annotations");

	/* cJSON's adders return NULL for a NULL parent: one check will do. */
	return finish(out, root,
		      cJSON_AddStringToObject(annotations, key, value) != NULL);
}
