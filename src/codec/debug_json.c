/*
 * JSON of the debug API: node rows, a node's FlexTopo tree with its holders,
 * a pod's allocation and decisions, the decision log, and explain results.
 *
 * Trees are built with cJSON through put() and push(), which free an item
 * they could not attach, so an allocation failure anywhere leaks nothing and
 * surfaces once, as a failed print at the end. Units keep the model's names
 * for people: GPU index, NUMA id, socket id, switch id; MiB; cpulists.
 * What the topology does not know is shown as such (topology.h): the memory
 * of a NUMA node of unknown memory is null, and a GPU of unknown NUMA node
 * sits in its socket's "gpus", or in the node's "unplacedGpus" when its
 * socket is unknown too, instead of under a NUMA node.
 */
#include <flextopo/debugview.h>
#include <flextopo/error.h>
#include <flextopo/mig.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- building blocks ---- */

static cJSON *put(cJSON *obj, const char *key, cJSON *item)
{
	if (!obj || !item || !cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		return NULL;
	}
	return item;
}

static cJSON *push(cJSON *arr, cJSON *item)
{
	if (!arr || !item || !cJSON_AddItemToArray(arr, item)) {
		cJSON_Delete(item);
		return NULL;
	}
	return item;
}

static void put_str(cJSON *obj, const char *key, const char *s)
{
	put(obj, key, s ? cJSON_CreateString(s) : cJSON_CreateNull());
}

static void put_num(cJSON *obj, const char *key, double v)
{
	put(obj, key, cJSON_CreateNumber(v));
}

static void put_bool(cJSON *obj, const char *key, bool v)
{
	put(obj, key, cJSON_CreateBool(v));
}

static int finish(char **out, cJSON *root)
{
	*out = root ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *out ? 0 : ft_error_set(FT_ENOMEM, "debug view: out of memory");
}

static cJSON *cpulist(const ft_cpuset_t *set)
{
	char text[2048];

	ft_cpuset_format(text, sizeof(text), set);
	return cJSON_CreateString(text);
}

static cJSON *level_or_null(unsigned level)
{
	return level < FT_LEVEL_COUNT ? cJSON_CreateString(ft_level_name(level))
				      : cJSON_CreateNull();
}

static cJSON *levels_array(uint8_t levels)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned l = 0; l < FT_LEVEL_COUNT; l++)
		if (levels & (1u << l))
			push(arr, cJSON_CreateString(ft_level_name(l)));
	return arr;
}

static cJSON *gpu_indexes(const ft_topology_t *t, uint16_t gpus)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned g = 0; t && g < t->n_gpus; g++)
		if (gpus & (1u << g))
			push(arr, cJSON_CreateNumber(t->gpus[g].index));
	return arr;
}

static cJSON *numa_ids(const ft_topology_t *t, uint16_t numa_nodes)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned n = 0; t && n < t->n_numa; n++)
		if (numa_nodes & (1u << n))
			push(arr, cJSON_CreateNumber(t->numa[n].id));
	return arr;
}

static cJSON *mig_instance(const ft_topology_t *t, unsigned i)
{
	const ft_mig_instance_t *m = &t->mig[i];
	cJSON *o = cJSON_CreateObject();

	put_str(o, "uuid", m->uuid);
	put_str(o, "profile", m->profile);
	put_num(o, "gpu", t->gpus[m->gpu].index);
	put_num(o, "start", m->start);
	put_num(o, "size", m->size);
	return o;
}

static cJSON *mig_list(const ft_topology_t *t, const uint64_t *mig)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; t && i < t->n_mig; i++)
		if (ft_mig_mask_has(mig, i))
			push(arr, mig_instance(t, i));
	return arr;
}

/* Replicas taken per shared GPU: [{"gpu":index,"count":n}]. */
static cJSON *replica_list(const ft_topology_t *t, const uint8_t *replicas)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned g = 0; t && g < t->n_gpus; g++) {
		cJSON *r;
		if (!replicas[g])
			continue;
		r = push(arr, cJSON_CreateObject());
		put_num(r, "gpu", t->gpus[g].index);
		put_num(r, "count", replicas[g]);
	}
	return arr;
}

/*
 * A placement on `node` as the allocation annotation names things;
 * "replicas" only when it takes some, as in the annotation.
 */
static cJSON *placement_json(const ft_node_t *node, const ft_placement_t *p)
{
	const ft_topology_t *t = node->topology;
	cJSON *o = cJSON_CreateObject();

	put_str(o, "node", node->name);
	put(o, "level", level_or_null(p->level));
	put(o, "levels", levels_array(p->levels));
	put(o, "gpus", gpu_indexes(t, p->gpus));
	put(o, "mig", mig_list(t, p->mig));
	if (ft_replica_gpus(p->replicas))
		put(o, "replicas", replica_list(t, p->replicas));
	put(o, "cpus", cpulist(&p->cpus));
	put(o, "numaNodes", numa_ids(t, p->numa_nodes));
	put_num(o, "memoryMiB", (double)p->memory_mib);
	return o;
}

/* ---- node rows ---- */

typedef struct {
	uint32_t mig, cpus;
} block_t;

/* Free MIG instances and CPUs inside one domain. */
static block_t domain_free(const ft_node_t *node, const ft_domain_t *dom)
{
	const ft_topology_t *t = node->topology;
	block_t b = {0, 0};

	for (unsigned k = 0; k < 2; k++)
		b.mig += (uint32_t)__builtin_popcountll(dom->mig[k] &
							~node->mig_used[k]);
	for (unsigned n = 0; n < t->n_numa; n++)
		if (dom->numa_nodes & (1u << n))
			b.cpus += node->numa_free_cpus[n];
	return b;
}

/* Per level: domains and the largest free block inside one of them. */
static cJSON *levels_json(const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	cJSON *o = cJSON_CreateObject();
	uint8_t gpus[FT_LEVEL_COUNT];

	ft_frag_largest_blocks(gpus, node);
	for (unsigned l = 0; l < FT_LEVEL_COUNT; l++) {
		block_t best = {0, 0};
		cJSON *lv = put(o, ft_level_name(l), cJSON_CreateObject());
		for (unsigned i = t->level_first[l]; i < t->level_first[l + 1];
		     i++) {
			block_t b = domain_free(node, &t->domains[i]);
			best.mig = b.mig > best.mig ? b.mig : best.mig;
			best.cpus = b.cpus > best.cpus ? b.cpus : best.cpus;
		}
		put_num(lv, "domains",
			t->level_first[l + 1] - t->level_first[l]);
		put_num(lv, "largestFreeGpus", gpus[l]);
		put_num(lv, "largestFreeMig", best.mig);
		put_num(lv, "largestFreeCpus", best.cpus);
	}
	return o;
}

static cJSON *counts(uint64_t total, uint64_t used, uint64_t unknown)
{
	cJSON *o = cJSON_CreateObject();
	uint64_t taken = used + unknown;

	put_num(o, "total", (double)total);
	put_num(o, "used", (double)used);
	put_num(o, "unknown", (double)unknown);
	put_num(o, "free", (double)(taken < total ? total - taken : 0));
	return o;
}

static unsigned mig_used_count(const ft_node_t *node)
{
	return (unsigned)(__builtin_popcountll(node->mig_used[0]) +
			  __builtin_popcountll(node->mig_used[1]));
}

static uint64_t free_memory(const ft_node_t *node)
{
	uint64_t sum = 0;

	for (unsigned n = 0; n < node->topology->n_numa; n++)
		sum += node->numa_free_memory_mib[n];
	return sum;
}

static uint64_t total_memory(const ft_topology_t *t)
{
	uint64_t sum = 0;

	for (unsigned n = 0; n < t->n_numa; n++)
		sum += t->numa[n].memory_mib;
	return sum;
}

/* A MiB amount, or null when `known` is false. */
static void put_mib(cJSON *obj, const char *key, uint64_t mib, bool known)
{
	put(obj, key,
	    known ? cJSON_CreateNumber((double)mib) : cJSON_CreateNull());
}

static void put_usage(cJSON *row, const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	unsigned whole = (unsigned)__builtin_popcount(t->whole_gpus);
	unsigned free_whole =
	    (unsigned)__builtin_popcount(ft_node_free_gpus(node));
	cJSON *gpus = counts(whole, whole - free_whole, node->unknown_gpus);
	cJSON *cpus = counts(t->n_cpus, ft_cpuset_count(&node->cpus_used),
			     node->unknown_cpus);
	cJSON *mem;

	put_num(gpus, "migEnabled", t->n_gpus - whole);
	put(row, "gpus", gpus);
	put(row, "mig", counts(t->n_mig, mig_used_count(node), 0));
	put_num(cpus, "reserved", ft_cpuset_count(&t->reserved_cpus));
	put(row, "cpus", cpus);
	mem = put(row, "memoryMiB", cJSON_CreateObject());
	put_mib(mem, "total", total_memory(t), !t->numa_memory_unknown);
	put_mib(mem, "free", free_memory(node), !t->numa_memory_unknown);
	put(row, "levels", levels_json(node));
}

static unsigned assumed_count(const ft_node_t *node)
{
	unsigned n = 0;

	for (unsigned i = 0; i < node->n_holdings; i++)
		n += node->holdings[i].assumed;
	return n;
}

static cJSON *frag_json(const ft_node_t *node, const ft_mix_t *mix)
{
	cJSON *o = cJSON_CreateObject(), *blocks;
	ft_frag_t f;

	ft_frag_measure(&f, node, mix);
	put_num(o, "freeGpus", f.free_milli / 1e3);
	put_num(o, "fragmentedGpus", f.fragmentation_milli / 1e3);
	put_num(o, "wholeGpusFree", f.whole_gpus_free);
	blocks = put(o, "largestFreeBlock", cJSON_CreateObject());
	for (unsigned l = 0; blocks && l < FT_LEVEL_COUNT; l++)
		put_num(blocks, ft_level_name((ft_level_t)l),
			f.largest_block[l]);
	put_num(o, "migSlicesFree", f.mig_slices_free);
	put_num(o, "migSlicesStranded", f.mig_slices_stranded);
	put_num(o, "replicasFree", f.replicas_free);
	return o;
}

/* The node's DRA side (dra.h), or null on a device-plugin node. */
static cJSON *dra_json(const ft_node_t *node)
{
	cJSON *o;
	unsigned claims = 0;

	if (!node->dra)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	for (unsigned i = 0; i < node->n_holdings; i++)
		claims += node->holdings[i].claim;
	put_bool(o, "doublePublished", node->dra_double_published);
	put_str(o, "error", node->dra_error);
	put_num(o, "claims", claims);
	return o;
}

static cJSON *node_row(const ft_node_t *node, const ft_mix_t *mix)
{
	cJSON *row = cJSON_CreateObject();

	put_str(row, "name", node->name);
	put_bool(row, "hasTopology", node->topology != NULL);
	put_str(row, "topologyError", node->topology_error);
	put_num(row, "pods", node->n_holdings);
	put_num(row, "assumedPods", assumed_count(node));
	put_num(row, "conflicts", node->conflicts);
	put(row, "dra", dra_json(node));
	if (node->topology) {
		put_usage(row, node);
		put(row, "fragmentation", frag_json(node, mix));
	}
	return row;
}

static cJSON *demand_json(const ft_demand_t *d, const ft_node_rules_t *rules);

/* The points of class `c`: the requests its pods stand for, with weights. */
static cJSON *points_json(const ft_mix_t *mix, unsigned c)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned k = 0; arr && k < mix->n_points[c]; k++) {
		cJSON *pt = push(arr, cJSON_CreateObject());
		put_num(pt, "cpuMillicores", mix->point_cpu_millis[c][k]);
		put_num(pt, "memoryMiB", mix->point_memory_mib[c][k]);
		put_num(pt, "share", mix->point_share[c][k]);
		put_num(pt, "weight",
			(double)mix->point_weight[c][k] / FT_WEIGHT_ONE);
	}
	return arr;
}

static cJSON *mix_json(const ft_mix_t *mix)
{
	cJSON *o = cJSON_CreateObject(), *classes;

	put_num(o, "window", mix ? mix->window : 0);
	put_num(o, "pods", mix ? mix->total : 0);
	classes = put(o, "classes", cJSON_CreateArray());
	for (unsigned c = 0; mix && classes && c < mix->n_classes; c++) {
		cJSON *k;
		if (!mix->counts[c])
			continue;
		k = push(classes, cJSON_CreateObject());
		put(k, "demand",
		    demand_json(&mix->classes[c], &mix->class_rules[c]));
		put_num(k, "pods", mix->counts[c]);
		put(k, "requests", points_json(mix, c));
	}
	return o;
}

int ft_codec_debug_nodes(char **out, const ft_snapshot_t *snap,
			 const ft_mix_t *mix)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *nodes = cJSON_CreateArray();

	put_num(root, "generation", (double)snap->generation);
	put(root, "workloadMix", mix_json(mix));
	for (unsigned i = 0; i < snap->n_nodes; i++)
		push(nodes, node_row(snap->nodes[i], mix));
	if (!put(root, "nodes", nodes)) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}

/* ---- allocation conflicts ---- */

static cJSON *pod_ref(const ft_holding_t *h);

static cJSON *conflict_json(const ft_node_t *node, const ft_conflict_t *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *pods = cJSON_CreateArray();
	char units[1024];

	put_str(o, "node", node->name);
	put_str(o, "units",
		ft_conflict_units_text(units, sizeof(units), node, c));
	put(o, "gpus", gpu_indexes(node->topology, c->gpus));
	put(o, "mig", mig_list(node->topology, c->mig));
	put(o, "cpus", cpulist(&c->cpus));
	push(pods, pod_ref(&node->holdings[c->earlier]));
	push(pods, pod_ref(&node->holdings[c->later]));
	put(o, "pods", pods);
	return o;
}

int ft_codec_debug_conflicts(char **out, const ft_snapshot_t *snap,
			     uint64_t found)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *list = cJSON_CreateArray();
	unsigned pods = 0;

	for (unsigned i = 0; i < snap->n_nodes; i++) {
		const ft_node_t *n = snap->nodes[i];
		pods += n->conflict_pods;
		for (unsigned k = 0; k < n->n_conflict_pairs; k++)
			push(list, conflict_json(n, &n->conflict_pairs[k]));
	}
	put_num(root, "generation", (double)snap->generation);
	put_num(root, "conflictPods", pods);
	put_num(root, "conflictsFound", (double)found);
	if (!put(root, "conflicts", list)) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}

/* ---- one node's tree ---- */

static cJSON *pod_ref(const ft_holding_t *h)
{
	cJSON *o;

	if (!h)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put_str(o, "namespace", h->ns);
	put_str(o, "name", h->name);
	put_str(o, "uid", h->uid);
	put_num(o, "priority", h->priority);
	put_bool(o, "assumed", h->assumed);
	return o;
}

static const ft_holding_t *gpu_holder(const ft_node_t *node, unsigned g)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].gpus & (1u << g))
			return &node->holdings[i];
	return NULL;
}

static const ft_holding_t *mig_holder(const ft_node_t *node, unsigned m)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (ft_mig_mask_has(node->holdings[i].mig, m))
			return &node->holdings[i];
	return NULL;
}

/* The pods holding replicas of shared GPU `g`, each with its count. */
static cJSON *replica_holders(const ft_node_t *node, unsigned g)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; i < node->n_holdings; i++) {
		const ft_holding_t *h = &node->holdings[i];
		if (h->replicas[g])
			put_num(push(arr, pod_ref(h)), "count", h->replicas[g]);
	}
	return arr;
}

static cJSON *gpu_json(const ft_node_t *node, unsigned g)
{
	const ft_topology_t *t = node->topology;
	const ft_gpu_t *gpu = &t->gpus[g];
	cJSON *o = cJSON_CreateObject();
	cJSON *mig;

	put_num(o, "index", gpu->index);
	put_str(o, "uuid", gpu->uuid);
	put_str(o, "model", gpu->model);
	put_num(o, "memoryMiB", (double)gpu->memory_mib);
	put_bool(o, "migEnabled", gpu->mig_enabled);
	put_bool(o, "reserved", (t->reserved_gpus >> g) & 1);
	put(o, "heldBy", pod_ref(gpu_holder(node, g)));
	if (gpu->replicas) {
		put_num(o, "replicas", gpu->replicas);
		put_num(o, "replicasUsed", node->replicas_used[g]);
		put(o, "replicasHeldBy", replica_holders(node, g));
	}
	mig = put(o, "mig", cJSON_CreateArray());
	for (unsigned i = 0; i < t->n_mig; i++) {
		cJSON *m;
		if (t->mig[i].gpu != g)
			continue;
		m = push(mig, mig_instance(t, i));
		put(m, "heldBy", pod_ref(mig_holder(node, i)));
	}
	return o;
}

static cJSON *gpus_under(const ft_node_t *node, unsigned numa, unsigned sw)
{
	const ft_topology_t *t = node->topology;
	cJSON *arr = cJSON_CreateArray();

	for (unsigned g = 0; g < t->n_gpus; g++)
		if (t->gpus[g].numa == numa && t->gpus[g].pcie_switch == sw)
			push(arr, gpu_json(node, g));
	return arr;
}

static cJSON *numa_json(const ft_node_t *node, unsigned n)
{
	const ft_topology_t *t = node->topology;
	cJSON *o = cJSON_CreateObject();
	cJSON *switches;
	ft_cpuset_t free_cpus;

	ft_cpuset_andnot(&free_cpus, &t->numa[n].cpus, &node->cpus_used);
	put_num(o, "id", t->numa[n].id);
	put(o, "cpus", cpulist(&t->numa[n].cpus));
	put(o, "freeCpus", cpulist(&free_cpus));
	put_mib(o, "memoryMiB", t->numa[n].memory_mib,
		!((t->numa_memory_unknown >> n) & 1));
	put_mib(o, "freeMemoryMiB", node->numa_free_memory_mib[n],
		!((t->numa_memory_unknown >> n) & 1));
	switches = put(o, "pcieSwitches", cJSON_CreateArray());
	for (unsigned s = 0; s < t->n_switches; s++) {
		cJSON *sw;
		if (t->switches[s].numa != n)
			continue;
		sw = push(switches, cJSON_CreateObject());
		put_num(sw, "id", t->switches[s].id);
		put(sw, "gpus", gpus_under(node, n, s));
	}
	put(o, "gpus", gpus_under(node, n, FT_NONE));
	return o;
}

/*
 * obj[key]: the GPUs of unknown NUMA node in socket position `socket`
 * (FT_NONE: socket unknown too); nothing when there are none.
 */
static void put_unplaced(cJSON *obj, const char *key, const ft_node_t *node,
			 unsigned socket)
{
	const ft_topology_t *t = node->topology;
	cJSON *arr = NULL;

	for (unsigned g = 0; t && g < t->n_gpus; g++) {
		if (!((t->unplaced_gpus >> g) & 1) ||
		    t->gpus[g].socket != socket)
			continue;
		if (!arr && !(arr = put(obj, key, cJSON_CreateArray())))
			return;
		push(arr, gpu_json(node, g));
	}
}

static cJSON *sockets_json(const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	cJSON *arr = cJSON_CreateArray();

	for (unsigned s = 0; t && s < t->n_sockets; s++) {
		cJSON *so = push(arr, cJSON_CreateObject());
		cJSON *numa;
		put_num(so, "id", t->sockets[s].id);
		numa = put(so, "numaNodes", cJSON_CreateArray());
		for (unsigned n = 0; n < t->n_numa; n++)
			if (t->numa[n].socket == s)
				push(numa, numa_json(node, n));
		put_unplaced(so, "gpus", node, s);
	}
	return arr;
}

static cJSON *nvlinks_json(const ft_topology_t *t)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned a = 0; t && a < t->n_gpus; a++)
		for (unsigned b = a + 1; b < t->n_gpus; b++) {
			cJSON *l;
			if (!(t->gpus[a].nvlink_peers & (1u << b)))
				continue;
			l = push(arr, cJSON_CreateObject());
			put_num(l, "gpu", t->gpus[a].index);
			put_num(l, "peer", t->gpus[b].index);
			put_num(l, "links", t->gpus[a].nvlink_links[b]);
		}
	return arr;
}

static cJSON *domains_json(const ft_topology_t *t)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; t && i < t->n_domains; i++) {
		cJSON *d = push(arr, cJSON_CreateObject());
		put_str(d, "level", ft_level_name(t->domains[i].level));
		put(d, "gpus", gpu_indexes(t, t->domains[i].gpus));
		put(d, "numaNodes", numa_ids(t, t->domains[i].numa_nodes));
	}
	return arr;
}

/* Units at topology positions: GPU indexes, MIG instances, replicas, CPUs. */
static cJSON *held_units_json(const ft_topology_t *t, uint16_t gpus,
			      const uint64_t *mig, const uint8_t *replicas,
			      const ft_cpuset_t *cpus, uint32_t unknown)
{
	cJSON *o = cJSON_CreateObject();

	put(o, "gpus", gpu_indexes(t, gpus));
	put(o, "mig", mig_list(t, mig));
	if (ft_replica_gpus(replicas))
		put(o, "replicas", replica_list(t, replicas));
	put(o, "cpus", cpulist(cpus));
	put_num(o, "unknown", unknown);
	return o;
}

/* A drifted holding: what the allocation named and what the node gave. */
static cJSON *drift_json(const ft_topology_t *t, const ft_holding_t *h)
{
	const ft_expected_units_t *e = h->expected;
	cJSON *o;

	if (!e)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put(o, "expected",
	    held_units_json(t, e->gpus, e->mig, e->replicas, &e->cpus,
			    e->unknown));
	put(o, "actual",
	    held_units_json(t, h->gpus, h->mig, h->replicas, &h->cpus,
			    h->unknown_gpus + h->unknown_mig +
				h->unknown_replicas));
	return o;
}

static cJSON *holding_json(const ft_node_t *node, const ft_holding_t *h)
{
	const ft_topology_t *t = node->topology;
	cJSON *o = pod_ref(h);

	put_num(o, "startTime", (double)h->start_time);
	if (h->claim)
		put_bool(o, "resourceClaim", true);
	put(o, "level", level_or_null(h->level));
	put(o, "levels", levels_array(h->levels));
	put(o, "gpus", gpu_indexes(t, h->gpus));
	put(o, "mig", mig_list(t, h->mig));
	if (ft_replica_gpus(h->replicas))
		put(o, "replicas", replica_list(t, h->replicas));
	put(o, "cpus", cpulist(&h->cpus));
	put(o, "numaNodes", numa_ids(t, h->numa_nodes));
	put_num(o, "memoryMiB", (double)h->memory_mib);
	put_num(o, "unknownGpus", h->unknown_gpus);
	if (h->unknown_replicas)
		put_num(o, "unknownReplicas", h->unknown_replicas);
	put_num(o, "unknownMig", h->unknown_mig);
	put_str(o, "unknownMigProfile",
		h->unknown_mig ? h->unknown_mig_profile : NULL);
	put_num(o, "unknownCpus", h->unknown_cpus);
	put_str(o, "observedSource",
		h->observed ? ft_observed_source_name(h->observed_source)
			    : NULL);
	put_bool(o, "drifted", h->expected != NULL);
	put(o, "drift", drift_json(t, h));
	return o;
}

int ft_codec_debug_node(char **out, const ft_node_t *node, const ft_mix_t *mix)
{
	cJSON *root = node_row(node, mix);
	cJSON *pods;

	put(root, "sockets", sockets_json(node));
	put_unplaced(root, "unplacedGpus", node, FT_NONE);
	put(root, "nvlinks", nvlinks_json(node->topology));
	put(root, "domains", domains_json(node->topology));
	pods = put(root, "holdings", cJSON_CreateArray());
	for (unsigned i = 0; i < node->n_holdings; i++)
		push(pods, holding_json(node, &node->holdings[i]));
	if (!pods) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}

/* ---- decisions ---- */

static cJSON *time_json(int64_t ms)
{
	char text[96];
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return cJSON_CreateString(text);
}

static cJSON *recorded_placement(const ft_decision_t *d)
{
	const ft_decision_placement_t *p = &d->placement;
	cJSON *o, *gpus, *mig, *numa;

	if (!d->has_placement)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put_str(o, "node", d->node);
	put(o, "level", level_or_null(p->level));
	put(o, "levels", levels_array(p->levels));
	gpus = put(o, "gpus", cJSON_CreateArray());
	for (unsigned i = 0; i < p->n_gpus; i++)
		push(gpus, cJSON_CreateNumber(p->gpus[i]));
	mig = put(o, "mig", cJSON_CreateArray());
	for (unsigned i = 0; i < p->n_mig; i++) {
		cJSON *m = push(mig, cJSON_CreateObject());
		put_str(m, "profile", p->mig_profile);
		put_num(m, "gpu", p->mig[i].gpu);
		put_num(m, "start", p->mig[i].start);
		put_num(m, "size", p->mig[i].size);
	}
	put(o, "cpus", cpulist(&p->cpus));
	numa = put(o, "numaNodes", cJSON_CreateArray());
	for (unsigned i = 0; i < p->n_numa; i++)
		push(numa, cJSON_CreateNumber(p->numa[i]));
	put_num(o, "memoryMiB", (double)p->memory_mib);
	return o;
}

static cJSON *row_json(const ft_decision_t *d, unsigned r)
{
	const ft_decision_node_t *row = &d->nodes[r];
	cJSON *o = cJSON_CreateObject();

	put_str(o, "node", row->name);
	put_str(o, "verdict", ft_verdict_name(row->verdict));
	put_str(o, "reason", row->reason[0] ? row->reason : NULL);
	put(o, "level", level_or_null(row->level));
	put(o, "score",
	    row->score >= 0 ? cJSON_CreateNumber(row->score)
			    : cJSON_CreateNull());
	if (row->verdict == FT_VERDICT_KEPT ||
	    row->verdict == FT_VERDICT_KEPT_PROPOSED)
		put_num(o, "victims", row->n_victims);
	if (row->verdict == FT_VERDICT_KEPT) {
		put_bool(o, "exact", row->exact);
		put_num(o, "disrupted", row->n_disrupted);
	}
	return o;
}

static cJSON *victim_json(const ft_decision_t *d, unsigned i)
{
	const ft_decision_victim_t *v = &d->victims[i];
	cJSON *o = cJSON_CreateObject();

	put_str(o, "node", d->nodes[v->row].name);
	put_str(o, "pod", v->pod[0] ? v->pod : NULL);
	put_str(o, "uid", v->uid);
	put_num(o, "priority", v->priority);
	return o;
}

static cJSON *counts_json(const ft_decision_t *d)
{
	cJSON *o = cJSON_CreateObject();

	for (unsigned k = 0; k < FT_VERDICT_COUNT; k++)
		if (d->counts[k])
			put_num(o, ft_verdict_name(k), d->counts[k]);
	return o;
}

static cJSON *decision_json(const ft_decision_t *d)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *pod, *rows, *victims;

	put_num(o, "seq", (double)d->seq);
	put(o, "time", time_json(d->time_ms));
	put_str(o, "verb", ft_verb_name(d->verb));
	pod = put(o, "pod", cJSON_CreateObject());
	put_str(pod, "namespace", d->ns);
	put_str(pod, "name", d->name);
	put_str(pod, "uid", d->uid);
	put_num(pod, "priority", d->priority);
	put_bool(o, "failed", d->failed);
	put_str(o, "message", d->message);
	put_str(o, "node", d->node[0] ? d->node : NULL);
	put(o, "placement", recorded_placement(d));
	put_num(o, "nodesTotal", d->n_nodes_total);
	put(o, "counts", counts_json(d));
	rows = put(o, "nodes", cJSON_CreateArray());
	for (unsigned r = 0; r < d->n_nodes; r++)
		push(rows, row_json(d, r));
	put_num(o, "nodesOmitted", d->n_nodes_total - d->n_nodes);
	victims = put(o, "victims", cJSON_CreateArray());
	for (unsigned i = 0; i < d->n_victims; i++)
		push(victims, victim_json(d, i));
	put_num(o, "victimsOmitted", d->n_victims_total - d->n_victims);
	if (d->verb == FT_VERB_PREEMPT)
		put_str(o, "brokenGangs", d->gangs[0] ? d->gangs : NULL);
	return o;
}

static cJSON *decision_list(const ft_decision_t *d, unsigned n)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; i < n; i++)
		push(arr, decision_json(&d[i]));
	return arr;
}

int ft_codec_debug_decisions(char **out, const ft_decision_t *d, unsigned n,
			     unsigned capacity, uint64_t total)
{
	cJSON *root = cJSON_CreateObject();

	put_num(root, "capacity", capacity);
	put_num(root, "total", (double)total);
	if (!put(root, "decisions", decision_list(d, n))) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}

/* ---- a pod ---- */

/* How much of a pod's node affinity and tolerations flextopo weighs. */
static cJSON *node_rules_json(const ft_node_rules_t *r)
{
	cJSON *o = cJSON_CreateObject();

	put_num(o, "requirements", r->n_reqs);
	put_num(o, "terms", r->n_terms);
	put_num(o, "tolerations", r->n_tolerations);
	put(o, "toleratesAll", cJSON_CreateBool(r->tolerates_all));
	return o;
}

/* A demand with the node rules it is weighed with. */
static cJSON *demand_json(const ft_demand_t *d, const ft_node_rules_t *rules)
{
	cJSON *o = cJSON_CreateObject();

	put_num(o, "gpus", d->gpus);
	if (d->gpu_fraction_milli)
		put_num(o, "gpuFraction", d->gpu_fraction_milli / 1e3);
	put_str(o, "migProfile", d->mig_profile[0] ? d->mig_profile : NULL);
	put_num(o, "migCount", d->mig_count);
	put_num(o, "cpuMillis", d->cpu_millis);
	put_num(o, "exclusiveCpus", d->exclusive_cpus);
	put_num(o, "memoryMiB", (double)d->memory_mib);
	put(o, "affinity",
	    d->has_affinity ? cJSON_CreateString(ft_level_name(d->level))
			    : cJSON_CreateNull());
	put_str(o, "affinityMode",
		d->mode == FT_MODE_BEST_EFFORT ? "best-effort" : "guaranteed");
	if (d->n_gpu_products)
		put_num(o, "gpuModels", d->n_gpu_products);
	if (rules->n_reqs || rules->n_tolerations || rules->tolerates_all)
		put(o, "nodeRules", node_rules_json(rules));
	return o;
}

static cJSON *uuid_list(char *const *uuids, unsigned n)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; i < n; i++)
		push(arr, cJSON_CreateString(uuids[i]));
	return arr;
}

/* Units as the annotations name them: uuids and a cpulist. */
static cJSON *named_units_json(const ft_allocation_t *a)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *replicas;

	put(o, "gpus", uuid_list(a->gpu_uuids, a->n_gpus));
	put(o, "mig", uuid_list(a->mig_uuids, a->n_mig));
	replicas = put(o, "replicas", cJSON_CreateArray());
	for (unsigned i = 0; i < a->n_replicas; i++) {
		cJSON *r = push(replicas, cJSON_CreateObject());
		put_str(r, "gpu", a->replica_gpus[i]);
		put_num(r, "count", a->replica_counts[i]);
	}
	put(o, "cpuset", cpulist(&a->cpus));
	return o;
}

/* flextopo.io/observed as decoded; "held" when it is for the pod's node. */
static cJSON *observed_json(const ft_pod_t *pod)
{
	cJSON *o;

	if (!pod->observed)
		return cJSON_CreateNull();
	o = named_units_json(&pod->observed->units);
	put_str(o, "node", pod->observed->node);
	put_str(o, "source", ft_observed_source_name(pod->observed->source));
	put_bool(o, "held", ft_pod_holds_observed(pod));
	return o;
}

static cJSON *pod_drift_json(const ft_pod_t *pod)
{
	cJSON *o;

	if (!ft_pod_drifted(pod))
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put(o, "expected", named_units_json(&pod->allocation));
	put(o, "actual", named_units_json(&pod->observed->units));
	return o;
}

static cJSON *pod_state_json(const ft_pod_t *pod)
{
	cJSON *o;

	if (!pod)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put_str(o, "node", pod->node);
	put_num(o, "priority", pod->priority);
	put_bool(o, "terminal", pod->terminal);
	put(o, "demand", demand_json(&pod->demand, &pod->rules));
	put_str(o, "demandError", pod->demand_error);
	put_bool(o, "hasAllocation", pod->has_allocation);
	put_str(o, "allocationError", pod->allocation_error);
	put(o, "observed", observed_json(pod));
	put_str(o, "observedError", pod->observed_error);
	put_bool(o, "drifted", ft_pod_drifted(pod));
	put(o, "drift", pod_drift_json(pod));
	return o;
}

static cJSON *gang_json(const ft_gang_describe_t *g)
{
	cJSON *o;

	if (!g)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	put_str(o, "source", ft_gang_source_name(g->source));
	put_str(o, "name", g->source != FT_GANG_NONE ? g->name : NULL);
	put_bool(o, "podGroup", g->has_group);
	put_bool(o, "isGang", g->is_gang);
	put_bool(o, "whole", g->whole);
	put_num(o, "min", g->min);
	put_num(o, "running", g->running);
	put_num(o, "members", g->members);
	put_str(o, "error", g->error[0] ? g->error : NULL);
	return o;
}

int ft_codec_debug_pod(char **out, const ft_debug_pod_t *v)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *held;

	put_str(root, "namespace", v->ns);
	put_str(root, "name", v->name);
	put_str(root, "uid", v->uid);
	put(root, "state", pod_state_json(v->pod));
	put(root, "gang", gang_json(v->gang));
	if (v->holding) {
		held = put(root, "holding", holding_json(v->node, v->holding));
		put_str(held, "node", v->node->name);
	} else {
		put(root, "holding", cJSON_CreateNull());
	}
	if (!put(root, "decisions",
		 decision_list(v->decisions, v->n_decisions))) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}

/* ---- explain ---- */

int ft_codec_explain_pod_decode(ft_pod_t *out, const char *body, size_t len,
				const ft_codec_options_t *opts)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	cJSON *pod = cJSON_GetObjectItemCaseSensitive(root, "Pod");
	cJSON *meta;
	int rc;

	memset(out, 0, sizeof(*out));
	pod = cJSON_IsObject(pod) ? pod : root;
	meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	if (!cJSON_IsObject(pod) || !cJSON_IsObject(meta)) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "expected a v1 Pod with metadata (or {\"Pod\": <v1 Pod>})");
		goto cleanup;
	}
	if (!cJSON_GetObjectItemCaseSensitive(meta, "uid") &&
	    !cJSON_AddStringToObject(meta, "uid", "explain")) {
		rc = ft_error_set(FT_ENOMEM, "explain: out of memory");
		goto cleanup;
	}
	rc = ft_codec_pod_decode(out, pod, opts);
cleanup:
	cJSON_Delete(root);
	return rc;
}

static cJSON *victims_json(const ft_node_t *node, const ft_victim_set_t *s)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *pods;

	put_bool(o, "found", s->found);
	put_bool(o, "exact", s->exact);
	put(o, "fallback",
	    cJSON_CreateString(ft_victim_fallback_name(s->fallback)));
	put(o, "visits", cJSON_CreateNumber((double)s->visits));
	put(o, "level", level_or_null(s->found ? s->level : FT_LEVEL_COUNT));
	pods = put(o, "pods", cJSON_CreateArray());
	for (unsigned i = 0; s->found && i < s->n; i++)
		push(pods, pod_ref(&node->holdings[s->holdings[i]]));
	return o;
}

static const char *fit_name(ft_fit_t fit)
{
	return fit == FT_FIT	 ? "fit"
	       : fit == FT_UNFIT ? "unfit"
				 : "unresolvable";
}

/* Precision names of ft_precision_t bits, lowest first. */
static cJSON *precision_names(uint64_t bits)
{
	cJSON *arr = cJSON_CreateArray();

	for (uint64_t b = 1; b && b <= bits; b <<= 1)
		if (bits & b)
			push(arr, cJSON_CreateString(
				      ft_precision_name((unsigned)b)));
	return arr;
}

/* An asked or actual value of capability `cap` (ft_unit_fault_t). */
static cJSON *cap_value(ft_cap_t cap, uint64_t v)
{
	if (cap == FT_CAP_PRECISION)
		return precision_names(v);
	if (cap == FT_CAP_INTERCONNECT)
		return cJSON_CreateString(v == FT_INTERCONNECT_NVLINK ? "nvlink"
								      : "pcie");
	return cJSON_CreateNumber((double)v);
}

static cJSON *fault_json(const ft_topology_t *t, const ft_caps_t *c,
			 const ft_unit_check_t *u, ft_cap_t cap)
{
	cJSON *o = cJSON_CreateObject();
	ft_unit_fault_t f;

	ft_place_unit_fault(&f, t, c, u, cap);
	put_str(o, "capability", ft_cap_name(cap));
	put(o, "asked", cap_value(cap, f.asked));
	put(o, "actual", cap_value(cap, f.actual));
	put_str(o, "reason", f.reason);
	return o;
}

static cJSON *unit_json(const ft_topology_t *t, const ft_caps_t *c,
			const ft_unit_check_t *u)
{
	static const char *const kinds[] = {"gpu", "mig", "shared"};
	const ft_mig_instance_t *m =
	    u->kind == FT_UNIT_MIG ? &t->mig[u->position] : NULL;
	const ft_gpu_t *g = &t->gpus[m ? m->gpu : u->position];
	cJSON *o = cJSON_CreateObject();
	cJSON *failures;

	put_str(o, "kind", kinds[u->kind]);
	put_num(o, "gpu", g->index);
	put_str(o, "uuid", m ? m->uuid : g->uuid);
	if (m)
		put_str(o, "profile", m->profile);
	if (u->kind == FT_UNIT_SHARED) {
		put_num(o, "replicas", g->replicas);
		put_num(o, "replicasFree", u->replicas_free);
	}
	put_bool(o, "free", u->free);
	put_bool(o, "matches", !u->faults);
	failures = put(o, "failures", cJSON_CreateArray());
	for (unsigned k = 0; k < FT_CAP_COUNT; k++)
		if (u->faults & (1u << k))
			push(failures, fault_json(t, c, u, (ft_cap_t)k));
	return o;
}

static cJSON *units_json(const ft_explain_node_t *e, const ft_caps_t *c)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; i < e->n_units; i++)
		push(arr, unit_json(e->node->topology, c, &e->units[i]));
	return arr;
}

static cJSON *explain_node_json(const ft_explain_node_t *e,
				const ft_caps_t *caps)
{
	cJSON *o = cJSON_CreateObject();

	put_str(o, "node", e->node->name);
	put_str(o, "verdict", fit_name(e->verdict.fit));
	put_str(o, "reason", e->verdict.reason[0] ? e->verdict.reason : NULL);
	put(o, "level", level_or_null(e->verdict.level));
	put_num(o, "score", e->score);
	put(o, "rank",
	    e->rank == FT_RANK_NONE ? cJSON_CreateNull()
				    : cJSON_CreateNumber((double)e->rank));
	if (e->weighed) {
		cJSON *f = put(o, "fragmentation", cJSON_CreateObject());
		put_num(f, "deltaGpus", (double)e->frag_delta_milli / 1e3);
	}
	put(o, "placement",
	    e->placed ? placement_json(e->node, &e->placement)
		      : cJSON_CreateNull());
	put_str(o, "placementError",
		e->choose_error[0] ? e->choose_error : NULL);
	put(o, "preemption",
	    e->searched ? victims_json(e->node, &e->victims)
			: cJSON_CreateNull());
	if (e->listed)
		put(o, "units", units_json(e, caps));
	return o;
}

int ft_codec_debug_explain(char **out, const ft_pod_t *pod, uint64_t generation,
			   const ft_mix_t *mix, const ft_explain_node_t *nodes,
			   unsigned n)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *p = put(root, "pod", cJSON_CreateObject());
	cJSON *arr;

	put_str(p, "namespace", pod->ns);
	put_str(p, "name", pod->name);
	put_num(p, "priority", pod->priority);
	put(p, "demand", demand_json(&pod->demand, &pod->rules));
	put_num(root, "generation", (double)generation);
	put(root, "workloadMix", mix_json(mix));
	arr = put(root, "nodes", cJSON_CreateArray());
	for (unsigned i = 0; i < n; i++)
		push(arr, explain_node_json(&nodes[i], &pod->demand.caps));
	if (!arr) {
		cJSON_Delete(root);
		root = NULL;
	}
	return finish(out, root);
}
