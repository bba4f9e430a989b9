/*
 * The synthetic cluster of flextopo-bench (synth.h): Node and Pod objects
 * built from the reference servers' topologies, applied to a state or added
 * to a List, and the pending pods the benchmarks ask about.
 *
 * A node's fill is planned on facts read from its topology (NUMA nodes with
 * their CPUs and memory, whole GPUs, MIG instances), then every pod of the
 * plan is written with the flextopo.io/allocation annotation flextopo would
 * have written at bind.
 */
#include "synth.h"

#include <flextopo/cpuset.h>
#include <flextopo/error.h>
#include <flextopo/file.h>
#include <flextopo/topology.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_options.h"
#include "bench_result.h"
#include "bench_util.h"

#define PLANS_MAX (FT_GPU_MAX + FT_MIG_MAX + FT_NUMA_MAX)
/* Seeds the stream of priorities and start times, apart from the fill's. */
#define PRIORITY_STREAM 0x7072696f72697479ULL
/* CPUs a pod of a packed node pins at most. */
#define PACKED_POD_CPUS 4

const kind_t kinds[KINDS] = {
    {"rtx4090-8x.json", "rtx4090"},
    {"a100-8x.json", "a100"},
    {"h100-8x-mig.json", "h100"},
};

const shape_t shapes[SHAPES] = {
    {"2gpu-nvlink", "nvlink", "guaranteed", "4", "32Gi", 2, NULL, true},
    {"8cpu-2gpu-numa", "numa", "guaranteed", "8", "64Gi", 2, NULL, true},
    {"1gpu-best-effort", "numa", "best-effort", "2", "8Gi", 1, NULL, false},
    {"mig-3g.40gb", "numa", "guaranteed", "2", "16Gi", 0, "3g.40gb", true},
};

const shape_t pshapes[PSHAPES] = {
    {"2gpu-nvlink", "nvlink", "guaranteed", "4", "32Gi", 2, NULL, true},
    {"1gpu-6cpu-numa", "numa", "guaranteed", "6", "32Gi", 1, NULL, true},
    {"mig-3g.40gb", "numa", "guaranteed", "2", "16Gi", 0, "3g.40gb", true},
    {"1gpu-best-effort", "numa", "best-effort", "2", "8Gi", 1, NULL, false},
};

/* Half of n, an odd unit going either way. */
static unsigned half(unsigned n, uint64_t *rng)
{
	return n / 2 + (n % 2 ? rng_below(rng, 2) : 0);
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

void synth_node_name(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size, "bench-%s-%05u", kinds[i % KINDS].label, i);
}

/* Facts of one node's topology, borrowed from its JSON. */
typedef struct gpu_fact {
	int index;
	const char *uuid;
	unsigned numa; /* position in node_facts_t.numa */
} gpu_fact_t;

typedef struct mig_fact {
	const char *uuid, *profile, *gpu_uuid;
	int start, size;
	unsigned numa;
} mig_fact_t;

typedef struct numa_fact {
	int id;
	ft_cpuset_t cpus;
	uint64_t memory_mib;
} numa_fact_t;

typedef struct node_facts {
	numa_fact_t numa[FT_NUMA_MAX];
	unsigned n_numa;
	gpu_fact_t gpus[FT_GPU_MAX]; /* whole GPUs (MIG off) */
	unsigned n_gpus;
	mig_fact_t mig[FT_MIG_MAX];
	unsigned n_mig;
} node_facts_t;

/* What one pod of the fill holds. */
typedef struct pod_plan {
	uint16_t gpus; /* positions in node_facts_t.gpus */
	int mig;       /* position in node_facts_t.mig, or -1 */
	unsigned numa; /* position in node_facts_t.numa */
	unsigned cpus; /* pinned CPUs */
} pod_plan_t;

int synth_generator_init(generator_t *g, result_t *r, const bench_options_t *o,
			 const ft_codec_options_t *opts)
{
	char path[4096];

	memset(g, 0, sizeof(*g));
	g->rng = o->seed;
	g->prio_rng = o->seed ^ PRIORITY_STREAM;
	g->opts = opts;
	g->packed = o->packed;
	g->memory_pct = o->packed ? 50 : 100;
	g->packed_pods = PACKED_PODS;
	g->device_priority = o->tiered ? TIERED_PRIORITY : 0;
	for (unsigned k = 0; k < KINDS; k++) {
		char *text;
		snprintf(path, sizeof(path), "%s/api/examples/%s",
			 o->source_dir, kinds[k].file);
		if (ft_file_read(&text, NULL, path, (size_t)1 << 24) < 0)
			return bench_fail(r, "%s", ft_error_last());
		g->templates[k] = cJSON_Parse(text);
		free(text);
		if (!g->templates[k])
			return bench_fail(r, "%s: not JSON", path);
	}
	return 0;
}

void synth_generator_dispose(generator_t *g)
{
	for (unsigned k = 0; k < KINDS; k++)
		cJSON_Delete(g->templates[k]);
	memset(g, 0, sizeof(*g));
}

static void facts_gpu(node_facts_t *f, const cJSON *gpu, unsigned numa)
{
	const cJSON *mig = cJSON_GetObjectItemCaseSensitive(gpu, "mig");
	const cJSON *inst;

	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mig, "enabled"))) {
		if (f->n_gpus < FT_GPU_MAX)
			f->gpus[f->n_gpus++] = (gpu_fact_t){
			    int_of(gpu, "index"), str_of(gpu, "uuid"), numa};
		return;
	}
	cJSON_ArrayForEach (
	    inst, cJSON_GetObjectItemCaseSensitive(mig, "instances")) {
		if (f->n_mig < FT_MIG_MAX)
			f->mig[f->n_mig++] = (mig_fact_t){
			    str_of(inst, "uuid"), str_of(inst, "profile"),
			    str_of(gpu, "uuid"),  int_of(inst, "start"),
			    int_of(inst, "size"), numa};
	}
}

static int facts_numa(node_facts_t *f, const cJSON *numa)
{
	const cJSON *sw, *gpu, *mem;
	numa_fact_t *n;

	if (f->n_numa >= FT_NUMA_MAX)
		return -1;
	n = &f->numa[f->n_numa];
	n->id = int_of(numa, "id");
	mem = cJSON_GetObjectItemCaseSensitive(numa, "memoryMiB");
	n->memory_mib = cJSON_IsNumber(mem) ? (uint64_t)mem->valuedouble : 0;
	if (ft_cpuset_parse(&n->cpus, str_of(numa, "cpus")) < 0)
		return -1;
	cJSON_ArrayForEach (
	    sw, cJSON_GetObjectItemCaseSensitive(numa, "pcieSwitches")) {
		cJSON_ArrayForEach (
		    gpu, cJSON_GetObjectItemCaseSensitive(sw, "gpus"))
			facts_gpu(f, gpu, f->n_numa);
	}
	cJSON_ArrayForEach (gpu, cJSON_GetObjectItemCaseSensitive(numa, "gpus"))
		facts_gpu(f, gpu, f->n_numa);
	f->n_numa++;
	return 0;
}

static int facts_collect(node_facts_t *f, const cJSON *topology)
{
	const cJSON *socket, *numa;

	memset(f, 0, sizeof(*f));
	cJSON_ArrayForEach (
	    socket, cJSON_GetObjectItemCaseSensitive(topology, "sockets")) {
		cJSON_ArrayForEach (numa, cJSON_GetObjectItemCaseSensitive(
					      socket, "numaNodes")) {
			if (facts_numa(f, numa) < 0)
				return -1;
		}
	}
	return f->n_numa ? 0 : -1;
}

/*
 * Half of the whole GPUs, in pods of one GPU or two of one NUMA node, and
 * half of the MIG instances, one per pod.
 */
static unsigned plan_devices(pod_plan_t *plans, const node_facts_t *f,
			     uint64_t *rng)
{
	unsigned order[FT_MIG_MAX], k, n = 0;

	shuffle(order, f->n_gpus, rng);
	k = half(f->n_gpus, rng);
	qsort(order, k, sizeof(*order), cmp_unsigned);
	for (unsigned i = 0; i < k; i++) {
		const gpu_fact_t *g = &f->gpus[order[i]];
		pod_plan_t *last = n ? &plans[n - 1] : NULL;
		if (last && __builtin_popcount(last->gpus) == 1 &&
		    last->numa == g->numa && rng_below(rng, 2))
			last->gpus |= (uint16_t)(1u << order[i]);
		else
			plans[n++] = (pod_plan_t){(uint16_t)(1u << order[i]),
						  -1, g->numa, 0};
	}
	shuffle(order, f->n_mig, rng);
	k = half(f->n_mig, rng);
	for (unsigned i = 0; i < k; i++)
		plans[n++] =
		    (pod_plan_t){0, (int)order[i], f->mig[order[i]].numa, 0};
	return n;
}

/*
 * Half of each NUMA node's CPUs, shared by the pods whose devices are there;
 * a NUMA node without such pods gets one CPU-only pod.
 */
static unsigned plan_cpus(pod_plan_t *plans, unsigned n, const node_facts_t *f)
{
	for (unsigned m = 0; m < f->n_numa; m++) {
		unsigned budget = ft_cpuset_count(&f->numa[m].cpus) / 2;
		unsigned on = 0, seen = 0;
		for (unsigned i = 0; i < n; i++)
			on += plans[i].numa == m;
		if (!on) {
			if (budget && n < PLANS_MAX)
				plans[n++] = (pod_plan_t){0, -1, m, budget};
			continue;
		}
		for (unsigned i = 0; i < n; i++)
			if (plans[i].numa == m)
				plans[i].cpus =
				    budget / on + (seen++ < budget % on);
	}
	return n;
}

static cJSON *mig_entry(const mig_fact_t *m)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "uuid", m->uuid);
	cJSON_AddStringToObject(o, "profile", m->profile);
	cJSON_AddStringToObject(o, "gpu", m->gpu_uuid);
	cJSON_AddNumberToObject(o, "start", m->start);
	cJSON_AddNumberToObject(o, "size", m->size);
	return o;
}

/* The flextopo.io/allocation text of one pod (heap), or NULL. */
static char *allocation_text(const char *node, const node_facts_t *f,
			     const pod_plan_t *p, const ft_cpuset_t *cpus,
			     uint64_t memory_mib)
{
	cJSON *a = cJSON_CreateObject(), *gpus, *indexes, *mig, *numa;
	char cpulist[1024], *text;

	cJSON_AddNumberToObject(a, "version", 1);
	cJSON_AddStringToObject(a, "node", node);
	cJSON_AddStringToObject(a, "level", "numa");
	cJSON_AddStringToObject(a, "mode", "guaranteed");
	gpus = cJSON_AddArrayToObject(a, "gpus");
	indexes = cJSON_AddArrayToObject(a, "gpuIndexes");
	for (unsigned g = 0; g < f->n_gpus; g++) {
		if (!(p->gpus & (1u << g)))
			continue;
		cJSON_AddItemToArray(gpus, cJSON_CreateString(f->gpus[g].uuid));
		cJSON_AddItemToArray(indexes,
				     cJSON_CreateNumber(f->gpus[g].index));
	}
	mig = cJSON_AddArrayToObject(a, "mig");
	if (p->mig >= 0)
		cJSON_AddItemToArray(mig, mig_entry(&f->mig[p->mig]));
	ft_cpuset_format(cpulist, sizeof(cpulist), cpus);
	cJSON_AddStringToObject(a, "cpuset", cpulist);
	numa = cJSON_AddArrayToObject(a, "numaNodes");
	cJSON_AddItemToArray(numa, cJSON_CreateNumber(f->numa[p->numa].id));
	cJSON_AddNumberToObject(a, "memoryMiB", (double)memory_mib);
	text = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return text;
}

/* Container requests of a fill pod (limits are the same). */
static cJSON *fill_resources(const generator_t *g, const node_facts_t *f,
			     const pod_plan_t *p, uint64_t memory_mib)
{
	cJSON *res = cJSON_CreateObject();
	char q[64], key[128];

	if (p->cpus)
		snprintf(q, sizeof(q), "%u", p->cpus);
	else
		snprintf(q, sizeof(q), "500m");
	cJSON_AddStringToObject(res, "cpu", q);
	snprintf(q, sizeof(q), "%lluMi", (unsigned long long)memory_mib);
	cJSON_AddStringToObject(res, "memory", q);
	if (p->gpus) {
		snprintf(q, sizeof(q), "%d", __builtin_popcount(p->gpus));
		cJSON_AddStringToObject(res, g->opts->gpu_resource, q);
	}
	if (p->mig >= 0) {
		snprintf(key, sizeof(key), "%s%s", g->opts->mig_resource_prefix,
			 f->mig[p->mig].profile);
		cJSON_AddStringToObject(res, key, "1");
	}
	return res;
}

/* A container "main" with these requests and, when asked, equal limits. */
static cJSON *containers_with(cJSON *requests, bool limits)
{
	cJSON *list = cJSON_CreateArray(), *c = cJSON_CreateObject();
	cJSON *res = cJSON_AddObjectToObject(c, "resources");

	cJSON_AddStringToObject(c, "name", "main");
	cJSON_AddStringToObject(c, "image", "registry.example/llm:1");
	if (limits)
		cJSON_AddItemToObject(res, "limits",
				      cJSON_Duplicate(requests, true));
	cJSON_AddItemToObject(res, "requests", requests);
	cJSON_AddItemToArray(list, c);
	return list;
}

/* metadata with name, namespace, uid and one or two annotations. */
static cJSON *pod_metadata(const char *name, const char *key1,
			   const char *value1, const char *key2,
			   const char *value2)
{
	cJSON *meta = cJSON_CreateObject(), *ann;

	cJSON_AddStringToObject(meta, "name", name);
	cJSON_AddStringToObject(meta, "namespace", "bench");
	cJSON_AddStringToObject(meta, "uid", name);
	cJSON_AddStringToObject(meta, "creationTimestamp",
				"2026-01-01T00:00:00Z");
	ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON_AddStringToObject(ann, key1, value1);
	if (key2)
		cJSON_AddStringToObject(ann, key2, value2);
	return meta;
}

/* A pod; `start` (status.startTime) may be NULL. */
static cJSON *pod_object(cJSON *meta, const char *node, cJSON *containers,
			 const char *phase, int32_t priority, const char *start)
{
	cJSON *pod = cJSON_CreateObject(), *spec, *status;

	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	cJSON_AddItemToObject(pod, "metadata", meta);
	spec = cJSON_AddObjectToObject(pod, "spec");
	if (node)
		cJSON_AddStringToObject(spec, "nodeName", node);
	cJSON_AddStringToObject(spec, "schedulerName", "default-scheduler");
	cJSON_AddNumberToObject(spec, "priority", priority);
	cJSON_AddItemToObject(spec, "containers", containers);
	status = cJSON_AddObjectToObject(pod, "status");
	cJSON_AddStringToObject(status, "phase", phase);
	if (start)
		cJSON_AddStringToObject(status, "startTime", start);
	return pod;
}

static cJSON *node_object(const char *name, const char *prefix,
			  const char *topology)
{
	cJSON *node = cJSON_CreateObject(), *meta, *labels, *ann;
	char key[256];

	cJSON_AddStringToObject(node, "apiVersion", "v1");
	cJSON_AddStringToObject(node, "kind", "Node");
	meta = cJSON_AddObjectToObject(node, "metadata");
	cJSON_AddStringToObject(meta, "name", name);
	labels = cJSON_AddObjectToObject(meta, "labels");
	cJSON_AddStringToObject(labels, "kubernetes.io/hostname", name);
	ann = cJSON_AddObjectToObject(meta, "annotations");
	snprintf(key, sizeof(key), "%s/topology", prefix);
	cJSON_AddStringToObject(ann, key, topology);
	return node;
}

/* Apply `obj` (then free it) or add it to the List; takes ownership. */
static int sink_put(sink_t *s, cJSON *obj, bool is_node)
{
	if (!obj)
		return -1;
	if (s->items)
		return cJSON_AddItemToArray(s->items, obj) ? 0 : -1;
	if (is_node)
		ft_state_apply_node(s->state, obj);
	else
		ft_state_apply_pod(s->state, obj);
	cJSON_Delete(obj);
	return 0;
}

static int emit_pod(generator_t *g, sink_t *s, const char *node,
		    const node_facts_t *f, const pod_plan_t *p,
		    ft_cpuset_t *free_cpus)
{
	const numa_fact_t *m = &f->numa[p->numa];
	uint64_t mib = p->cpus
			   ? p->cpus * m->memory_mib /
				 ft_cpuset_count(&m->cpus) * g->memory_pct / 100
			   : 1024;
	int32_t priority =
	    (int32_t)rng_below(&g->prio_rng, FILL_PRIORITY_MAX + 1) +
	    (p->gpus || p->mig >= 0 ? g->device_priority : 0);
	unsigned start = rng_below(&g->prio_rng, 86400);
	char name[96], key[256], when[32], *alloc;
	ft_cpuset_t got;
	cJSON *pod = NULL;

	if (g->equal_priority)
		priority = 0;
	ft_cpuset_take_lowest(&got, free_cpus, p->cpus);
	ft_cpuset_andnot(free_cpus, free_cpus, &got);
	snprintf(name, sizeof(name), "%s-p%u", node, g->pods);
	snprintf(key, sizeof(key), "%s/allocation", g->opts->annotation_prefix);
	snprintf(when, sizeof(when), "2026-01-01T%02u:%02u:%02uZ", start / 3600,
		 start / 60 % 60, start % 60);
	if ((alloc = allocation_text(node, f, p, &got, mib)))
		pod = pod_object(
		    pod_metadata(name, key, alloc, NULL, NULL), node,
		    containers_with(fill_resources(g, f, p, mib), true),
		    "Running", priority, when);
	free(alloc);
	g->pods++;
	return sink_put(s, pod, false);
}

/* What the pods of one node hold; returns how many pods. */
typedef unsigned (*planner_fn)(pod_plan_t *plans, const node_facts_t *f,
			       generator_t *g);

/* The fill of the synthetic cluster: about half of everything. */
static unsigned plan_half(pod_plan_t *plans, const node_facts_t *f,
			  generator_t *g)
{
	return plan_cpus(plans, plan_devices(plans, f, &g->rng), f);
}

/*
 * A packed node for the victim search alone: one pod per whole GPU and per
 * MIG instance, then CPU-only pods on the NUMA nodes in turn up to
 * g->packed_pods. Every pod pins one CPU of its NUMA node; the CPUs left
 * there after a slack of 1/16 go one at a time to random pods, at most
 * PACKED_POD_CPUS each. A NUMA node with more pods than CPUs leaves some
 * without pinned CPUs (they ask 500m).
 */
static unsigned plan_packed(pod_plan_t *plans, const node_facts_t *f,
			    generator_t *g)
{
	unsigned n = 0, on[PLANS_MAX], want = g->packed_pods;
	uint64_t *rng = &g->rng;

	for (unsigned i = 0; i < f->n_gpus && n < want; i++)
		plans[n++] =
		    (pod_plan_t){(uint16_t)(1u << i), -1, f->gpus[i].numa, 0};
	for (unsigned i = 0; i < f->n_mig && n < want; i++)
		plans[n++] = (pod_plan_t){0, (int)i, f->mig[i].numa, 0};
	for (unsigned m = 0; n < want; m = (m + 1) % f->n_numa)
		plans[n++] = (pod_plan_t){0, -1, m, 0};
	for (unsigned m = 0; m < f->n_numa; m++) {
		unsigned cap = ft_cpuset_count(&f->numa[m].cpus);
		unsigned budget = cap - cap / 16, k = 0, tries = 0;
		for (unsigned i = 0; i < n; i++)
			if (plans[i].numa == m)
				on[k++] = i;
		for (unsigned i = 0; i < k && budget; i++, budget--)
			plans[on[i]].cpus = 1;
		while (k && budget && tries++ < 64 * want) {
			pod_plan_t *p = &plans[on[rng_below(rng, k)]];
			if (p->cpus && p->cpus < PACKED_POD_CPUS) {
				p->cpus++;
				budget--;
			}
		}
	}
	return n;
}

static int emit_pods(generator_t *g, sink_t *s, const char *node,
		     const node_facts_t *f, planner_fn plan)
{
	pod_plan_t plans[PLANS_MAX];
	ft_cpuset_t free_cpus[FT_NUMA_MAX];
	unsigned n = plan(plans, f, g);

	for (unsigned m = 0; m < f->n_numa; m++)
		free_cpus[m] = f->numa[m].cpus;
	for (unsigned j = 0; j < n; j++)
		if (emit_pod(g, s, node, f, &plans[j],
			     &free_cpus[plans[j].numa]) < 0)
			return -1;
	return 0;
}

int synth_emit_host(generator_t *g, sink_t *s, result_t *r, unsigned kind,
		    const char *name, const char *suffix)
{
	static node_facts_t f; /* large; the generator runs on one thread */
	planner_fn plan = g->packed ? plan_packed : plan_half;
	char *text = NULL;
	cJSON *topology = cJSON_Duplicate(g->templates[kind], true);
	int rc = 0;

	if (!topology) {
		rc = bench_fail(r, "%s: out of memory", name);
		goto cleanup;
	}
	suffix_uuids(topology, suffix);
	if (facts_collect(&f, topology) < 0) {
		rc =
		    bench_fail(r, "%s: topology template not understood", name);
		goto cleanup;
	}
	if (!(text = cJSON_PrintUnformatted(topology)) ||
	    sink_put(s, node_object(name, g->opts->annotation_prefix, text),
		     true) < 0 ||
	    emit_pods(g, s, name, &f, plan) < 0)
		rc = bench_fail(r, "%s: out of memory", name);
cleanup:
	free(text);
	cJSON_Delete(topology);
	return rc;
}

int synth_emit_node(generator_t *g, sink_t *s, result_t *r, unsigned i)
{
	char name[NAME_MAX_LEN], suffix[16];

	synth_node_name(name, sizeof(name), i);
	snprintf(suffix, sizeof(suffix), "-n%05u", i);
	return synth_emit_host(g, s, r, i % KINDS, name, suffix);
}

cJSON *synth_request_pod(const shape_t *s, const ft_codec_options_t *opts,
			 int32_t priority)
{
	cJSON *res = cJSON_CreateObject();
	char key[2][256], q[16];

	snprintf(key[0], sizeof(key[0]), "%s/affinity",
		 opts->annotation_prefix);
	snprintf(key[1], sizeof(key[1]), "%s/affinity-mode",
		 opts->annotation_prefix);
	cJSON_AddStringToObject(res, "cpu", s->cpu);
	cJSON_AddStringToObject(res, "memory", s->memory);
	snprintf(q, sizeof(q), "%u", s->gpus);
	if (s->gpus)
		cJSON_AddStringToObject(res, opts->gpu_resource, q);
	if (s->mig_profile) {
		char mig[128];
		snprintf(mig, sizeof(mig), "%s%s", opts->mig_resource_prefix,
			 s->mig_profile);
		cJSON_AddStringToObject(res, mig, "1");
	}
	return pod_object(
	    pod_metadata(POD_TOKEN, key[0], s->affinity, key[1], s->mode), NULL,
	    containers_with(res, s->limits), "Pending", priority, NULL);
}
