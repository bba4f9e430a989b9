/*
 * flextopo-bench: how fast the extender answers kube-scheduler, and how much
 * memory its cluster model takes (bench/README.md).
 *
 * For each cluster size N it builds a synthetic cluster in memory: N nodes
 * cycling through the three reference servers of api/examples/ (8x RTX 4090
 * PCIe, 8x A100 NVSwitch, 8x H100 with MIG), every GPU and MIG uuid made
 * unique per node, and pods that hold about half of each node's GPUs, MIG
 * instances and CPUs through flextopo.io/allocation annotations. A fixed
 * seed makes runs comparable. The objects are loaded into a real ft_app_t the
 * way ft_app_load_snapshot() loads a List, the real HTTP server is started on
 * 127.0.0.1 in this process, and /filter then /prioritize are sent for one pod
 * at a time over one keep-alive libcurl connection with NodeNames naming all
 * N nodes, as kube-scheduler does with a nodeCacheCapable extender.
 *
 * Besides the HTTP latencies it times a GET /healthz (the transport's fixed
 * cost) and, without HTTP, the route handlers called directly and each of
 * their parts: decoding the request JSON, looking the N names up in the
 * snapshot, the placement sweeps (ft_place_filter, ft_place_score over every
 * node) and the two reply encoders, so that a reader sees where the time goes.
 * It reports the model bytes per node (ft_node_footprint), the RSS growth per
 * node while loading, and the process VmRSS and VmHWM.
 *
 * Then /preempt: the cluster's pods have priorities below the preemptor's,
 * and an ExtenderPreemptionArgs names all N nodes with the victims
 * kube-scheduler would propose (or none), for four preemptors in turn. Every
 * reply is checked: only requested nodes, each once, never an empty Pods
 * list, victims of that node below the preemptor, by descending priority,
 * whose eviction frees a placement at the preemptor's level. The handler,
 * the request decoding and ft_victims_search over the N nodes are also
 * timed without HTTP.
 *
 * Last, in this process, ft_victims_search alone on packed 8-GPU nodes of
 * 60 pods (A100 NVSwitch, RTX 4090, H100 with MIG), with random or tiered
 * priorities: the "a node with 8 GPUs and 60 pods, well under a
 * millisecond", with whether each answer was exact.
 *
 * Each size runs in a child process, so that RSS and its high-water mark
 * belong to that size alone. Every reply is checked (filter lists each node
 * once, prioritize scores each node 0..10, preempt as above): a failed
 * request, a malformed reply or a cluster that did not load as built makes
 * the run fail. No figure
 * is ever asserted. Out of memory, or any other failure, ends the run for
 * that size with a message.
 */
#include <flextopo/file.h>
#include <flextopo/app.h>
#include <flextopo/error.h>
#include <flextopo/place.h>
#include <flextopo/victims.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_client.h"
#include "bench_util.h"

#ifndef FT_SOURCE_DIR
#define FT_SOURCE_DIR "."
#endif

#define SIZES_MAX    16
#define ROWS_MAX     14
#define PROWS_MAX    (PSHAPES + 4)
#define KINDS	     3
#define SHAPES	     4
#define PSHAPES	     4
#define PLANS_MAX    (FT_GPU_MAX + FT_MIG_MAX + FT_NUMA_MAX)
#define POD_TOKEN    "bench-pod-00000000" /* name and uid, digits patched */
#define TOKEN_DIGITS 8
#define TOKENS_MAX   4
#define NAME_MAX_LEN 32

/* The aims: p99 of filter plus prioritize, and model per node. */
#define TARGET_SMALL_NODES  500u
#define TARGET_SMALL_P99_US 500.0
#define TARGET_LARGE_NODES  5000u
#define TARGET_LARGE_P99_US 2000.0
#define TARGET_MODEL_BYTES  16384.0
/* Preempt: p99 at 500 candidate nodes; one 8-GPU node of 60 pods "well
 * under a millisecond". */
#define TARGET_PREEMPT_NODES  500u
#define TARGET_PREEMPT_P99_US 10000.0
#define TARGET_VICTIM_P99_US  1000.0
/* The victim search on a node of kubelet's default 110 pods. */
#define TARGET_CROWDED_P99_US 10000.0

/* Pods of the cluster have priorities 0..FILL_PRIORITY_MAX (their own random
 * stream), the preemptor PREEMPTOR_PRIORITY: every pod is a candidate. */
#define FILL_PRIORITY_MAX  100
#define PREEMPTOR_PRIORITY 1000
#define PRIORITY_STREAM	   0x7072696f72697479ULL
/* Tiered priorities: pods holding GPUs or MIG instances get this much more
 * (inference above batch), still below the preemptor. */
#define TIERED_PRIORITY 500

/* Preempt over HTTP: requests timed per size unless --preempt-iterations,
 * and a cap on the seconds one phase may take. */
#define PREEMPT_ITERATIONS_SMALL 200u
#define PREEMPT_ITERATIONS_LARGE 40u
#define PREEMPT_SECONDS_MAX	 60.0

/* The victim search alone: MICRO_VARIANTS nodes of each server kind and
 * layout (pods per node and priorities), at most MICRO_SECONDS_MAX seconds
 * per node kind, layout and preemptor. */
#define MICRO_KINDS	     3
#define MICRO_LAYOUTS	     6
#define PACKED_PODS	     60 /* pods per node with --packed */
#define MICRO_POD_CPUS	     4
#define MICRO_VARIANTS	     8
#define MICRO_ITERATIONS     2000u
#define MICRO_SECONDS_MAX    2.0
#define MICRO_ITERATIONS_MIN (2 * MICRO_VARIANTS)

/* ---- what is built and sent ---- */

typedef struct kind {
	const char *file;  /* under api/examples/ */
	const char *label; /* in node names */
} kind_t;

static const kind_t kinds[KINDS] = {
    {"rtx4090-8x.json", "rtx4090"},
    {"a100-8x.json", "a100"},
    {"h100-8x-mig.json", "h100"},
};

/* A pod kube-scheduler asks about; the iterations rotate through these. */
typedef struct shape {
	const char *name;
	const char *affinity; /* flextopo.io/affinity */
	const char *mode;     /* flextopo.io/affinity-mode */
	const char *cpu;
	const char *memory;
	unsigned gpus;		 /* whole GPUs */
	const char *mig_profile; /* one instance of it, or NULL */
	bool limits;		 /* limits = requests: Guaranteed QoS, so an
				    integer CPU request is pinned */
} shape_t;

static const shape_t shapes[SHAPES] = {
    {"2gpu-nvlink", "nvlink", "guaranteed", "4", "32Gi", 2, NULL, true},
    {"8cpu-2gpu-numa", "numa", "guaranteed", "8", "64Gi", 2, NULL, true},
    {"1gpu-best-effort", "numa", "best-effort", "2", "8Gi", 1, NULL, false},
    {"mig-3g.40gb", "numa", "guaranteed", "2", "16Gi", 0, "3g.40gb", true},
};

/* Preemptors, of priority PREEMPTOR_PRIORITY. */
static const shape_t pshapes[PSHAPES] = {
    {"2gpu-nvlink", "nvlink", "guaranteed", "4", "32Gi", 2, NULL, true},
    {"1gpu-6cpu-numa", "numa", "guaranteed", "6", "32Gi", 1, NULL, true},
    {"mig-3g.40gb", "numa", "guaranteed", "2", "16Gi", 0, "3g.40gb", true},
    {"1gpu-best-effort", "numa", "best-effort", "2", "8Gi", 1, NULL, false},
};

/* Server kinds (positions in kinds[]) of the victim search alone. */
static const unsigned micro_kinds[MICRO_KINDS] = {1, 0, 2};

/* ---- options ---- */

typedef struct bench_options {
	unsigned sizes[SIZES_MAX];
	unsigned n_sizes;
	unsigned iterations; /* 0: by size */
	long warmup;	     /* < 0: a tenth of the iterations */
	unsigned threads;    /* server worker threads; 0: one per core */
	uint64_t seed;
	bool fixed_uids; /* one pod uid per shape, not one per iteration */
	bool via_file;	 /* load through a List file and load_snapshot */
	const char *source_dir;
	long preempt_iterations; /* < 0: by size; 0: no preempt */
	long victim_iterations;	 /* < 0: MICRO_ITERATIONS; 0: skip */
	bool packed;		 /* fill nodes as plan_packed does */
	bool tiered;		 /* device holders above CPU-only pods */
	const char *frag_window; /* fragmentationWindow, or NULL: default */
} bench_options_t;

/* ---- results, in memory shared with the child that measures ---- */

typedef struct row {
	char verb[40];
	unsigned iters;
	double min, p50, p99, max; /* microseconds */
} row_t;

/* Preempt replies of one shape, as checked. */
typedef struct preempt_stat {
	unsigned replies;  /* checked replies, timed ones */
	double kept;	   /* nodes in a reply / N, summed over replies */
	double victims;	   /* victims named, summed */
	double changed;	   /* kept nodes whose victims differ from the
			      proposal, summed */
	double sent_empty; /* nodes sent with no victims / N */
	unsigned searches; /* ft_victims_search calls timed without HTTP */
	unsigned inexact;  /* of them, set.exact false */
	unsigned found;	   /* of them, set.found */
	double slowest_us; /* the slowest of them */
} preempt_stat_t;

typedef struct result {
	bool done, ok;
	char error[512];
	unsigned nodes, pods, holdings;
	unsigned gpus_total, gpus_used, cpus_total, cpus_used;
	unsigned mig_total, mig_used;
	double load_s;
	double model_bytes; /* ft_node_footprint per node */
	double rss_bytes;   /* VmRSS growth while loading, per node */
	long rss_kib, hwm_kib;
	double request_kib, filter_reply_kib, prioritize_reply_kib;
	long connects, requests;
	double passed[SHAPES]; /* nodes passing filter, fraction */
	unsigned n_rows;
	row_t rows[ROWS_MAX];
	/* Preempt: */
	unsigned n_prows;
	row_t prows[PROWS_MAX];
	preempt_stat_t preempt[PSHAPES];
	double preempt_request_kib, preempt_reply_kib;
} result_t;

static int fail(result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record the first failure of a size; returns -1. */
static int fail(result_t *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- small helpers ---- */

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1. */
static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t klen = strlen(key);
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kib = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kib;
}

/* VmRSS after handing freed heap back, so that it counts live memory. */
static long live_rss_kib(void)
{
	malloc_trim(0);
	return status_kib("VmRSS");
}

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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void node_name(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size, "bench-%s-%05u", kinds[i % KINDS].label, i);
}

static const char *str_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static int int_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* ---- the synthetic cluster ---- */

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

typedef struct generator {
	cJSON *templates[KINDS];
	uint64_t rng;
	uint64_t prio_rng; /* priorities and start times: a stream of their
			      own, so that the fill does not depend on them */
	const ft_codec_options_t *opts;
	unsigned pods;
	unsigned memory_pct;	 /* memory of a pinned pod: this share of its
				    CPUs' part of the NUMA node's memory */
	int32_t device_priority; /* added to pods holding GPUs or MIG */
	bool equal_priority;	 /* every pod of priority 0 */
	bool packed;		 /* plan_packed instead of plan_half */
	unsigned packed_pods;	 /* pods per node of plan_packed */
} generator_t;

/* Where generated objects go: the state directly, or a List's items. */
typedef struct sink {
	ft_state_t *state;
	cJSON *items;
} sink_t;

static int generator_init(generator_t *g, result_t *r, const bench_options_t *o,
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
			return fail(r, "%s", ft_error_last());
		g->templates[k] = cJSON_Parse(text);
		free(text);
		if (!g->templates[k])
			return fail(r, "%s: not JSON", path);
	}
	return 0;
}

static void generator_dispose(generator_t *g)
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
	cJSON_ArrayForEach(inst,
			   cJSON_GetObjectItemCaseSensitive(mig, "instances"))
	{
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
	cJSON_ArrayForEach(
	    sw, cJSON_GetObjectItemCaseSensitive(numa, "pcieSwitches"))
	{
		cJSON_ArrayForEach(gpu,
				   cJSON_GetObjectItemCaseSensitive(sw, "gpus"))
		    facts_gpu(f, gpu, f->n_numa);
	}
	cJSON_ArrayForEach(gpu, cJSON_GetObjectItemCaseSensitive(numa, "gpus"))
	    facts_gpu(f, gpu, f->n_numa);
	f->n_numa++;
	return 0;
}

static int facts_collect(node_facts_t *f, const cJSON *topology)
{
	const cJSON *socket, *numa;

	memset(f, 0, sizeof(*f));
	cJSON_ArrayForEach(
	    socket, cJSON_GetObjectItemCaseSensitive(topology, "sockets"))
	{
		cJSON_ArrayForEach(
		    numa, cJSON_GetObjectItemCaseSensitive(socket, "numaNodes"))
		{
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
 * MICRO_POD_CPUS each. A NUMA node with more pods than CPUs leaves some
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
			if (p->cpus && p->cpus < MICRO_POD_CPUS) {
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

/*
 * A node `name` of server kind `kind` (uuids suffixed with `suffix`) and its
 * pods as `plan` says.
 */
static int emit_host(generator_t *g, sink_t *s, result_t *r, unsigned kind,
		     const char *name, const char *suffix, planner_fn plan)
{
	static node_facts_t f; /* large; the generator runs on one thread */
	char *text = NULL;
	cJSON *topology = cJSON_Duplicate(g->templates[kind], true);
	int rc = 0;

	if (!topology) {
		rc = fail(r, "%s: out of memory", name);
		goto cleanup;
	}
	suffix_uuids(topology, suffix);
	if (facts_collect(&f, topology) < 0) {
		rc = fail(r, "%s: topology template not understood", name);
		goto cleanup;
	}
	if (!(text = cJSON_PrintUnformatted(topology)) ||
	    sink_put(s, node_object(name, g->opts->annotation_prefix, text),
		     true) < 0 ||
	    emit_pods(g, s, name, &f, plan) < 0)
		rc = fail(r, "%s: out of memory", name);
cleanup:
	free(text);
	cJSON_Delete(topology);
	return rc;
}

/* Node `i` of the cluster and the pods that fill it half. */
static int emit_node(generator_t *g, sink_t *s, result_t *r, unsigned i)
{
	char name[NAME_MAX_LEN], suffix[16];

	node_name(name, sizeof(name), i);
	snprintf(suffix, sizeof(suffix), "-n%05u", i);
	return emit_host(g, s, r, i % KINDS, name, suffix,
			 g->packed ? plan_packed : plan_half);
}

/* ---- one size: state, server, client ---- */

/* A request body with the pod token's digits at known offsets. */
typedef struct request {
	char *body;
	size_t len;
	size_t token_at[TOKENS_MAX];
	unsigned n_tokens;
} request_t;

typedef bench_client_t client_t;

typedef struct run {
	const bench_options_t *o;
	result_t *r;
	ft_app_t app;
	generator_t gen;
	request_t reqs[SHAPES];
	/* For the timings without HTTP: */
	ft_extender_args_t args[SHAPES]; /* the requests decoded */
	ft_pod_t pods[SHAPES];		 /* their pods decoded */
	const ft_node_t **by_name;	 /* nodes in NodeNames order */
	ft_verdict_t *verdicts;		 /* per node, last filter sweep */
	int *scores;			 /* per node, last score sweep */
	char (*names)[NAME_MAX_LEN];
	/* Preempt: */
	request_t preqs[PSHAPES]; /* ExtenderPreemptionArgs */
	ft_pod_t ppods[PSHAPES];  /* their preemptors decoded */
	ft_pdb_view_t *pdbs;	  /* per node in NodeNames order */
	unsigned char *seen;	  /* per node, while checking a reply */
	unsigned preempt_iterations, preempt_warmup;
	client_t client;
	unsigned n, iterations, warmup;
	unsigned next_pod;
	long rss_before_kib;
} run_t;

static int app_setup(run_t *run)
{
	if (ft_config_init(&run->app.cfg) < 0 ||
	    ft_config_set(&run->app.cfg, "logLevel", "warn") < 0 ||
	    (run->o->frag_window &&
	     ft_config_set(&run->app.cfg, "fragmentationWindow",
			   run->o->frag_window) < 0) ||
	    ft_app_init(&run->app) < 0)
		return fail(run->r, "app: %s", ft_error_last());
	return generator_init(&run->gen, run->r, run->o, &run->app.opts);
}

/* Objects applied one by one between replace_begin and replace_end. */
static int load_direct(run_t *run)
{
	ft_state_t *state = run->app.state;
	sink_t sink = {state, NULL};
	int rc = 0;

	run->rss_before_kib = live_rss_kib();
	ft_state_replace_begin(state, FT_KIND_NODE);
	ft_state_replace_begin(state, FT_KIND_POD);
	for (unsigned i = 0; i < run->n && rc == 0; i++)
		rc = emit_node(&run->gen, &sink, run->r, i);
	ft_state_replace_end(state, FT_KIND_NODE);
	ft_state_replace_end(state, FT_KIND_POD);
	atomic_store(&run->app.snapshot_loaded, true);
	return rc;
}

static int write_text(char *path, const char *text)
{
	int fd = mkstemps(path, 5);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	size_t len = strlen(text);
	int rc = 0;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fwrite(text, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

/* The whole List printed to a temporary file and read by load_snapshot. */
static int load_via_file(run_t *run)
{
	cJSON *list = cJSON_CreateObject();
	sink_t sink = {NULL, NULL};
	const char *tmp = getenv("TMPDIR");
	char path[4096], *text = NULL;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/flextopo-bench-XXXXXX.json",
		 tmp && *tmp ? tmp : "/tmp");
	cJSON_AddStringToObject(list, "apiVersion", "v1");
	cJSON_AddStringToObject(list, "kind", "List");
	sink.items = cJSON_AddArrayToObject(list, "items");
	for (unsigned i = 0; i < run->n && rc == 0; i++)
		rc = emit_node(&run->gen, &sink, run->r, i);
	if (rc == 0 && !(text = cJSON_PrintUnformatted(list)))
		rc = fail(run->r, "List: out of memory");
	cJSON_Delete(list);
	if (rc == 0 && write_text(path, text) < 0)
		rc = fail(run->r, "%s: %s", path, strerror(errno));
	free(text);
	if (rc < 0)
		return rc;
	run->rss_before_kib = live_rss_kib();
	if (ft_app_load_snapshot(&run->app, path) < 0)
		rc = fail(run->r, "load_snapshot: %s", ft_error_last());
	unlink(path);
	return rc;
}

/* Every node and pod is in, every pod holds what it was given. */
static int check_loaded(run_t *run)
{
	ft_state_stats_t st;

	ft_state_stats(run->app.state, &st);
	if (st.nodes != run->n || st.nodes_bad_topology ||
	    st.pods != run->gen.pods)
		return fail(run->r,
			    "loaded %u nodes (%u without topology) and %u "
			    "pods; built %u nodes and %u pods",
			    st.nodes, st.nodes_bad_topology, st.pods, run->n,
			    run->gen.pods);
	return 0;
}

static int load_cluster(run_t *run)
{
	result_t *r = run->r;
	double t0 = now_us();
	int rc = run->o->via_file ? load_via_file(run) : load_direct(run);

	r->load_s = (now_us() - t0) / 1e6;
	r->pods = run->gen.pods;
	if (rc < 0 || check_loaded(run) < 0)
		return -1;
	r->rss_bytes =
	    (double)(live_rss_kib() - run->rss_before_kib) * 1024.0 / run->n;
	return 0;
}

static void count_node(result_t *r, const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;

	r->gpus_total += (unsigned)__builtin_popcount(t->whole_gpus);
	r->gpus_used +=
	    (unsigned)__builtin_popcount(node->gpus_used & t->whole_gpus);
	r->cpus_total += t->n_cpus;
	r->cpus_used += ft_cpuset_count(&node->cpus_used);
	r->mig_total += t->n_mig;
	r->mig_used += (unsigned)(__builtin_popcountll(node->mig_used[0]) +
				  __builtin_popcountll(node->mig_used[1]));
	r->holdings += node->n_holdings;
}

/* Model bytes and fill, from the published snapshot. */
static int measure_model(run_t *run)
{
	ft_snapshot_t *snap = ft_state_snapshot(run->app.state);
	result_t *r = run->r;
	size_t bytes = 0;
	int rc = 0;

	for (unsigned i = 0; i < snap->n_nodes && rc == 0; i++) {
		const ft_node_t *node = snap->nodes[i];
		bytes += ft_node_footprint(node);
		if (!node->topology || node->conflicts || node->unknown_gpus ||
		    node->unknown_cpus)
			rc = fail(r,
				  "node %s: %s, %u conflicts, %u GPUs and %u "
				  "CPUs of unknown placement",
				  node->name,
				  node->topology ? "topology" : "no topology",
				  node->conflicts, node->unknown_gpus,
				  node->unknown_cpus);
		else
			count_node(r, node);
	}
	r->model_bytes = snap->n_nodes ? (double)bytes / snap->n_nodes : 0;
	if (rc == 0 && r->holdings != r->pods)
		rc = fail(r, "%u of %u pods hold something on their node",
			  r->holdings, r->pods);
	ft_snapshot_unref(snap);
	return rc;
}

static int start_server(run_t *run, unsigned *port)
{
	ft_server_options_t so = {
	    .listen = "127.0.0.1:0",
	    .max_body_bytes = run->app.cfg.max_request_bytes,
	    .threads = run->o->threads ? run->o->threads : run->app.cfg.threads,
	};

	if (ft_server_new(&run->app.server, &so) < 0 ||
	    ft_app_routes(&run->app, run->app.server) < 0 ||
	    ft_server_start(run->app.server) < 0)
		return fail(run->r, "server: %s", ft_error_last());
	*port = ft_server_port(run->app.server);
	return 0;
}

/* ---- requests ---- */

static cJSON *request_pod(const shape_t *s, const ft_codec_options_t *opts,
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

/* Print `root` (then free it) and find the pod token's two copies. */
static int request_print(request_t *out, cJSON *root)
{
	const char *p;

	out->body = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!out->body)
		return -1;
	out->len = strlen(out->body);
	for (p = out->body;
	     (p = strstr(p, POD_TOKEN)) && out->n_tokens < TOKENS_MAX;
	     p += strlen(POD_TOKEN))
		out->token_at[out->n_tokens++] =
		    (size_t)(p - out->body) + strlen(POD_TOKEN) - TOKEN_DIGITS;
	return out->n_tokens == 2 ? 0 : -1;
}

/* ExtenderArgs for shape `s` with NodeNames naming every node. */
static int request_build(request_t *out, const run_t *run, const shape_t *s)
{
	cJSON *root = cJSON_CreateObject(), *names;

	cJSON_AddItemToObject(root, "Pod", request_pod(s, &run->app.opts, 0));
	names = cJSON_AddArrayToObject(root, "NodeNames");
	for (unsigned i = 0; i < run->n; i++)
		cJSON_AddItemToArray(names, cJSON_CreateString(run->names[i]));
	cJSON_AddNullToObject(root, "Nodes");
	return request_print(out, root);
}

/* Make the request name pod `id` (its name and uid). */
static void request_set_pod(request_t *q, unsigned id)
{
	char digits[TOKEN_DIGITS + 1];

	snprintf(digits, sizeof(digits), "%0*u", TOKEN_DIGITS, id % 100000000u);
	for (unsigned t = 0; t < q->n_tokens; t++)
		memcpy(q->body + q->token_at[t], digits, TOKEN_DIGITS);
}

static int build_requests(run_t *run)
{
	run->names = calloc(run->n, sizeof(*run->names));
	if (!run->names)
		return fail(run->r, "names: out of memory");
	for (unsigned i = 0; i < run->n; i++)
		node_name(run->names[i], sizeof(run->names[i]), i);
	for (unsigned s = 0; s < SHAPES; s++)
		if (request_build(&run->reqs[s], run, &shapes[s]) < 0)
			return fail(run->r, "request %s: cannot build",
				    shapes[s].name);
	run->r->request_kib = (double)run->reqs[0].len / 1024.0;
	return 0;
}

/* The pod of iteration `it`: a new one each time unless --fixed-uids. */
static request_t *next_request(run_t *run, unsigned it)
{
	request_t *q = &run->reqs[it % SHAPES];

	request_set_pod(q, run->o->fixed_uids ? it % SHAPES : ++run->next_pod);
	return q;
}

/* ---- the HTTP client ---- */

static int client_open(client_t *c, result_t *r, unsigned port)
{
	if (bench_client_open(c, port) < 0)
		return fail(r, "libcurl: cannot make a client");
	return 0;
}

static void client_close(client_t *c)
{
	bench_client_close(c);
}

/* POST `q` to `path`, or GET it when `q` is NULL; *us is the wall time. */
static int client_request(client_t *c, result_t *r, const char *path,
			  const request_t *q, double *us)
{
	char err[512];

	if (bench_client_request(c, path, q ? q->body : NULL, q ? q->len : 0,
				 us, err, sizeof(err)) < 0)
		return fail(r, "%s", err);
	return 0;
}

/* ---- reply checks ---- */

static int count_of(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return 0;
	return cJSON_IsObject(v) || cJSON_IsArray(v) ? cJSON_GetArraySize(v)
						     : -1;
}

/* An ExtenderFilterResult naming each of the `n` nodes once, no Error. */
static int check_filter(result_t *r, unsigned *passed, const char *reply,
			unsigned n)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "Error");
	int names =
	    count_of(cJSON_GetObjectItemCaseSensitive(root, "NodeNames"));
	int failed =
	    count_of(cJSON_GetObjectItemCaseSensitive(root, "FailedNodes"));
	int unresolvable = count_of(cJSON_GetObjectItemCaseSensitive(
	    root, "FailedAndUnresolvableNodes"));
	int rc = 0;

	if (!cJSON_IsObject(root) || names < 0 || failed < 0 ||
	    unresolvable < 0)
		rc = fail(r, "filter: not an ExtenderFilterResult: %.300s",
			  reply);
	else if (cJSON_IsString(error) && error->valuestring[0])
		rc = fail(r, "filter: Error \"%s\"", error->valuestring);
	else if ((unsigned)(names + failed + unresolvable) != n)
		rc = fail(r,
			  "filter: %d passed + %d failed + %d unresolvable "
			  "nodes, sent %u",
			  names, failed, unresolvable, n);
	*passed = names > 0 ? (unsigned)names : 0;
	cJSON_Delete(root);
	return rc;
}

/* A HostPriorityList of `n` hosts with scores 0..10. */
static int check_scores(result_t *r, const char *reply, unsigned n)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *item;
	int rc = 0;

	if (!cJSON_IsArray(root) || (unsigned)cJSON_GetArraySize(root) != n)
		rc =
		    fail(r, "prioritize: expected %u scores: %.300s", n, reply);
	cJSON_ArrayForEach(item, root)
	{
		const cJSON *host =
		    cJSON_GetObjectItemCaseSensitive(item, "Host");
		const cJSON *score =
		    cJSON_GetObjectItemCaseSensitive(item, "Score");
		if (rc == 0 &&
		    (!cJSON_IsString(host) || !cJSON_IsNumber(score) ||
		     score->valuedouble < 0 || score->valuedouble > 10))
			rc = fail(r, "prioritize: bad HostPriority in %.300s",
				  reply);
	}
	cJSON_Delete(root);
	return rc;
}

/* ---- measurements ---- */

/*
 * Index of the nearest-rank percentile `per_mille` of `n` sorted samples: the
 * smallest sample with that share of the samples at or below it.
 */
static size_t rank(unsigned n, unsigned per_mille)
{
	unsigned long long r = ((unsigned long long)n * per_mille + 999) / 1000;

	return r ? (size_t)r - 1 : 0;
}

/* Sort the samples into the next of the `max` rows of a table counting
 * `*n_rows`; nothing when the table is full or there are no samples. */
static void append_row(row_t *rows, unsigned *n_rows, unsigned max,
		       const char *verb, double *v, unsigned n)
{
	row_t *row;

	if (*n_rows >= max || !n)
		return;
	row = &rows[(*n_rows)++];
	qsort(v, n, sizeof(*v), cmp_double);
	snprintf(row->verb, sizeof(row->verb), "%s", verb);
	row->iters = n;
	row->min = v[0];
	row->p50 = v[rank(n, 500)];
	row->p99 = v[rank(n, 990)];
	row->max = v[n - 1];
}

/* Sorted samples -> one table row. */
static void add_row(result_t *r, const char *verb, double *v, unsigned n)
{
	append_row(r->rows, &r->n_rows, ROWS_MAX, verb, v, n);
}

typedef struct series {
	double *v[4];
	unsigned n;
} series_t;

static int series_init(series_t *s, result_t *r, unsigned n)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	for (unsigned k = 0; k < 4; k++)
		if (!(s->v[k] = calloc(n ? n : 1, sizeof(double))))
			return fail(r, "samples: out of memory");
	return 0;
}

static void series_dispose(series_t *s)
{
	for (unsigned k = 0; k < 4; k++)
		free(s->v[k]);
}

/* Filter then prioritize for one pod over HTTP, both replies checked. */
static int http_pair(run_t *run, unsigned it, double *tf, double *tp,
		     unsigned *passed)
{
	client_t *c = &run->client;
	request_t *q = next_request(run, it);
	result_t *r = run->r;
	unsigned k = it < run->warmup ? 0 : run->iterations;

	if (client_request(c, r, "/filter", q, tf) < 0 ||
	    check_filter(r, passed, c->reply, run->n) < 0)
		return -1;
	if (k)
		r->filter_reply_kib += (double)c->reply_len / 1024.0 / k;
	if (client_request(c, r, "/prioritize", q, tp) < 0 ||
	    check_scores(r, c->reply, run->n) < 0)
		return -1;
	if (k)
		r->prioritize_reply_kib += (double)c->reply_len / 1024.0 / k;
	return 0;
}

/* GET /healthz on the same connection: the transport's fixed cost. */
static int run_floor(run_t *run, double *v)
{
	double us;

	for (unsigned it = 0; it < run->warmup + run->iterations; it++) {
		if (client_request(&run->client, run->r, "/healthz", NULL,
				   &us) < 0)
			return -1;
		if (it >= run->warmup)
			v[it - run->warmup] = us;
	}
	add_row(run->r, "http GET /healthz (floor)", v, run->iterations);
	return 0;
}

static int run_http(run_t *run)
{
	unsigned counted[SHAPES] = {0}, passed;
	result_t *r = run->r;
	series_t s;
	int rc;

	if ((rc = series_init(&s, r, run->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < run->warmup + run->iterations; it++) {
		unsigned j = it - run->warmup;
		double tf, tp;
		if ((rc = http_pair(run, it, &tf, &tp, &passed)) < 0)
			goto cleanup;
		if (it < run->warmup)
			continue;
		s.v[0][j] = tf;
		s.v[1][j] = tp;
		s.v[2][j] = tf + tp;
		r->passed[it % SHAPES] += (double)passed / run->n;
		counted[it % SHAPES]++;
	}
	for (unsigned k = 0; k < SHAPES; k++)
		r->passed[k] = counted[k] ? r->passed[k] / counted[k] : 0;
	add_row(r, "http filter", s.v[0], s.n);
	add_row(r, "http prioritize", s.v[1], s.n);
	add_row(r, "http filter+prioritize", s.v[2], s.n);
	rc = run_floor(run, s.v[3]);
	r->connects = run->client.connects;
	r->requests = run->client.requests;
cleanup:
	series_dispose(&s);
	return rc;
}

/* A route handler called directly, as the server would call it. */
static int call_handler(run_t *run, ft_http_handler_fn fn, const char *path,
			const request_t *q, double *us)
{
	ft_http_request_t req = {.method = "POST",
				 .path = path,
				 .content_type = "application/json",
				 .body = q->body,
				 .body_len = q->len};
	ft_http_response_t res = {.status = 200};
	double t0 = now_us();
	int rc = 0;

	fn(&res, &req, &run->app);
	*us = now_us() - t0;
	if (res.status != 200)
		rc = fail(run->r, "%s handler: HTTP %d: %.300s", path,
			  res.status, res.body ? res.body : "");
	free(res.body);
	return rc;
}

static int run_handlers(run_t *run)
{
	series_t s;
	int rc;

	if ((rc = series_init(&s, run->r, run->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < run->warmup + run->iterations; it++) {
		unsigned j = it - run->warmup;
		request_t *q = next_request(run, it);
		double tf, tp;
		if ((rc = call_handler(run, ft_app_filter, "/filter", q, &tf)) <
			0 ||
		    (rc = call_handler(run, ft_app_prioritize, "/prioritize", q,
				       &tp)) < 0)
			goto cleanup;
		if (it < run->warmup)
			continue;
		s.v[0][j] = tf;
		s.v[1][j] = tp;
	}
	add_row(run->r, "handler filter (no HTTP)", s.v[0], s.n);
	add_row(run->r, "handler prioritize (no HTTP)", s.v[1], s.n);
cleanup:
	series_dispose(&s);
	return rc;
}

/* Parse the request bodies, and look the N names up in the snapshot. */
static int run_decode_lookup(run_t *run)
{
	ft_snapshot_t *snap = ft_state_snapshot(run->app.state);
	ft_extender_args_t args;
	series_t s;
	int rc;

	if ((rc = series_init(&s, run->r, run->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < run->warmup + run->iterations; it++) {
		const request_t *q = &run->reqs[it % SHAPES];
		unsigned found = 0;
		double t0 = now_us(), t1;
		if ((rc = ft_codec_extender_args_decode(&args, q->body,
							q->len)) < 0) {
			rc = fail(run->r, "decode: %s", ft_error_last());
			goto cleanup;
		}
		ft_codec_extender_args_dispose(&args);
		t1 = now_us();
		for (unsigned i = 0; i < run->n; i++)
			found += ft_snapshot_find(snap, run->names[i]) != NULL;
		if (found != run->n) {
			rc = fail(run->r, "snapshot: %u of %u names", found,
				  run->n);
			goto cleanup;
		}
		if (it >= run->warmup) {
			s.v[0][it - run->warmup] = t1 - t0;
			s.v[1][it - run->warmup] = now_us() - t1;
		}
	}
	add_row(run->r, "decode request JSON", s.v[0], s.n);
	add_row(run->r, "look up N names in snapshot", s.v[1], s.n);
cleanup:
	series_dispose(&s);
	ft_snapshot_unref(snap);
	return rc;
}

/* The shapes' requests and pods, decoded once. */
static int decode_shapes(run_t *run)
{
	for (unsigned k = 0; k < SHAPES; k++) {
		int rc = ft_codec_extender_args_decode(
		    &run->args[k], run->reqs[k].body, run->reqs[k].len);
		if (rc == 0)
			rc = ft_codec_pod_decode(
			    &run->pods[k], run->args[k].pod, &run->app.opts);
		if (rc < 0)
			return fail(run->r, "shape %s: %s", shapes[k].name,
				    ft_error_last());
		if (run->pods[k].demand_error)
			return fail(run->r, "shape %s: %s", shapes[k].name,
				    run->pods[k].demand_error);
	}
	return 0;
}

/* Nodes in NodeNames order, found outside the timed loops. */
static int core_setup(run_t *run, const ft_snapshot_t *snap)
{
	run->by_name = calloc(run->n, sizeof(*run->by_name));
	run->verdicts = calloc(run->n, sizeof(*run->verdicts));
	run->scores = calloc(run->n, sizeof(*run->scores));
	if (!run->by_name || !run->verdicts || !run->scores)
		return fail(run->r, "core: out of memory");
	for (unsigned i = 0; i < run->n; i++)
		if (!(run->by_name[i] = ft_snapshot_find(snap, run->names[i])))
			return fail(run->r, "snapshot: no node %s",
				    run->names[i]);
	return decode_shapes(run);
}

/* The filter reply of the last filter sweep, as the handler builds it. */
static int encode_filter(run_t *run, unsigned k)
{
	ft_filter_reply_t *fr = NULL;
	char *body = NULL;
	int rc = ft_codec_filter_reply_new(&fr, &run->args[k]);

	for (unsigned i = 0; rc == 0 && i < run->n; i++) {
		const ft_verdict_t *v = &run->verdicts[i];
		rc = v->fit == FT_FIT ? ft_codec_filter_reply_pass(fr, i)
				      : ft_codec_filter_reply_fail(
					    fr, i, v->reason,
					    v->fit == FT_UNFIT_UNRESOLVABLE);
	}
	if (rc == 0) {
		rc = ft_codec_filter_reply_finish(&body, fr);
		fr = NULL;
	}
	ft_codec_filter_reply_free(fr);
	free(body);
	return rc < 0 ? fail(run->r, "encode: %s", ft_error_last()) : 0;
}

static int encode_scores(run_t *run, unsigned k)
{
	char *body = NULL;
	int rc = ft_codec_priorities_encode(&body, &run->args[k], run->scores);

	free(body);
	return rc < 0 ? fail(run->r, "encode: %s", ft_error_last()) : 0;
}

/*
 * One pod without HTTP: the placement sweeps of filter and prioritize over
 * every node, then the encoding of their replies. t[0..3] get the four times.
 */
static int core_iteration(run_t *run, unsigned k, double *t)
{
	const ft_demand_t *d = &run->pods[k].demand;
	double t0 = now_us(), t1, t2, t3;

	for (unsigned i = 0; i < run->n; i++)
		ft_place_filter(&run->verdicts[i], run->by_name[i], d);
	t1 = now_us();
	for (unsigned i = 0; i < run->n; i++)
		run->scores[i] =
		    ft_place_score(run->by_name[i], d, run->app.cfg.policy);
	t2 = now_us();
	if (encode_filter(run, k) < 0)
		return -1;
	t3 = now_us();
	if (encode_scores(run, k) < 0)
		return -1;
	t[0] = t1 - t0;
	t[1] = t2 - t1;
	t[2] = t3 - t2;
	t[3] = now_us() - t3;
	return 0;
}

static int run_core(run_t *run)
{
	ft_snapshot_t *snap = ft_state_snapshot(run->app.state);
	series_t s;
	int rc;

	if ((rc = series_init(&s, run->r, run->iterations)) < 0 ||
	    (rc = core_setup(run, snap)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < run->warmup + run->iterations; it++) {
		double t[4];
		if ((rc = core_iteration(run, it % SHAPES, t)) < 0)
			goto cleanup;
		for (unsigned m = 0; it >= run->warmup && m < 4; m++)
			s.v[m][it - run->warmup] = t[m];
	}
	add_row(run->r, "ft_place_filter x N", s.v[0], s.n);
	add_row(run->r, "ft_place_score x N", s.v[1], s.n);
	add_row(run->r, "encode filter reply", s.v[2], s.n);
	add_row(run->r, "encode HostPriorityList", s.v[3], s.n);
cleanup:
	series_dispose(&s);
	ft_snapshot_unref(snap);
	return rc;
}

/* ---- preempt ---- */

static void progress(const run_t *run, const char *what)
{
	fprintf(stderr, "flextopo-bench: %u nodes: %s\n", run->n, what);
}

/* Does `h` hold units of the kind `d` asks for? */
static bool holds_kind(const ft_node_t *node, const ft_holding_t *h,
		       const ft_demand_t *d)
{
	const ft_topology_t *t = node->topology;

	if (d->mig_count) {
		for (unsigned i = 0; t && i < t->n_mig && i < 128; i++)
			if ((h->mig[i / 64] >> (i % 64) & 1) &&
			    strcmp(t->mig[i].profile, d->mig_profile) == 0)
				return true;
		return false;
	}
	if (d->gpus)
		return h->gpus != 0;
	return !ft_cpuset_empty(&h->cpus);
}

/*
 * The victims kube-scheduler is made to propose on the node at position `i`
 * of NodeNames, by descending priority: none on every fourth node (what a
 * scheduler with kubernetes PR #135486 sends for a node that fits by counts),
 * else the lowest-priority pod holding units of the kind `d` asks for (any
 * pod on a node with none), the two lowest on every fourth node.
 */
static unsigned propose(uint16_t *out, const ft_node_t *node, unsigned i,
			const ft_demand_t *d)
{
	unsigned want = i % 4 == 0 ? 0 : i % 4 == 3 ? 2 : 1, n = 0;
	bool any = false;

	for (unsigned j = 0; j < node->n_holdings; j++)
		any |= holds_kind(node, &node->holdings[j], d);
	for (unsigned j = 0; want && j < node->n_holdings; j++) {
		const ft_holding_t *h = &node->holdings[j];
		unsigned at = n;
		if (any && !holds_kind(node, h, d))
			continue;
		while (at > 0 &&
		       node->holdings[out[at - 1]].priority > h->priority)
			at--;
		if (at >= want)
			continue;
		if (n < want)
			n++;
		memmove(&out[at + 1], &out[at], (n - 1 - at) * sizeof(*out));
		out[at] = (uint16_t)j;
	}
	for (unsigned a = 0, b = n; b-- > a + 1; a++) {
		uint16_t t = out[a];
		out[a] = out[b];
		out[b] = t;
	}
	return n;
}

/*
 * ExtenderPreemptionArgs for preemptor `k`: the Pod and NodeNameToMetaVictims
 * naming every node with its proposed victims. Decodes the preemptor too.
 */
static int preempt_request_build(run_t *run, unsigned k)
{
	const ft_codec_options_t *opts = &run->app.opts;
	cJSON *root = cJSON_CreateObject(), *map = NULL;
	cJSON *pod = request_pod(&pshapes[k], opts, PREEMPTOR_PRIORITY);
	const ft_demand_t *d = &run->ppods[k].demand;
	uint16_t idx[2];
	unsigned empty = 0;

	if (!root || !pod ||
	    ft_codec_pod_decode(&run->ppods[k], pod, opts) < 0 ||
	    run->ppods[k].demand_error) {
		cJSON_Delete(root);
		cJSON_Delete(pod);
		return fail(run->r, "preemptor %s: %s", pshapes[k].name,
			    run->ppods[k].demand_error
				? run->ppods[k].demand_error
				: ft_error_last());
	}
	cJSON_AddItemToObject(root, "Pod", pod);
	map = cJSON_AddObjectToObject(root, "NodeNameToMetaVictims");
	for (unsigned i = 0; map && i < run->n; i++) {
		cJSON *entry = cJSON_AddObjectToObject(map, run->names[i]);
		cJSON *pods = cJSON_AddArrayToObject(entry, "Pods");
		unsigned m = propose(idx, run->by_name[i], i, d);
		for (unsigned j = 0; j < m; j++) {
			cJSON *v = cJSON_CreateObject();
			cJSON_AddStringToObject(
			    v, "UID", run->by_name[i]->holdings[idx[j]].uid);
			cJSON_AddItemToArray(pods, v);
		}
		cJSON_AddNumberToObject(entry, "NumPDBViolations", 0);
		empty += m == 0;
	}
	run->r->preempt[k].sent_empty = (double)empty / run->n;
	if (request_print(&run->preqs[k], root) < 0)
		return fail(run->r, "preempt request %s: cannot build",
			    pshapes[k].name);
	return 0;
}

static int preempt_setup(run_t *run)
{
	run->seen = calloc(run->n, 1);
	run->pdbs = calloc(run->n, sizeof(*run->pdbs));
	if (!run->seen || !run->pdbs)
		return fail(run->r, "preempt: out of memory");
	for (unsigned i = 0; i < run->n; i++)
		ft_state_pdb_view(run->app.state, run->by_name[i],
				  &run->pdbs[i]);
	for (unsigned k = 0; k < PSHAPES; k++)
		if (preempt_request_build(run, k) < 0)
			return -1;
	run->r->preempt_request_kib = (double)run->preqs[0].len / 1024.0;
	return 0;
}

/* The position in NodeNames of node `name`, or run->n. */
static unsigned node_position(const run_t *run, const char *name)
{
	const char *dash = strrchr(name, '-');
	unsigned long i = dash ? strtoul(dash + 1, NULL, 10) : run->n;

	return i < run->n && strcmp(run->names[i], name) == 0 ? (unsigned)i
							      : run->n;
}

/* Is holding `x` among idx[0..n)? */
static bool among(const uint16_t *idx, unsigned n, uint16_t x)
{
	for (unsigned i = 0; i < n; i++)
		if (idx[i] == x)
			return true;
	return false;
}

/*
 * One node of a reply: asked about, named once, a non-empty Pods list of
 * pods on that node below the preemptor's priority, each once, by
 * descending priority, whose eviction lets the preemptor fit at its level
 * (any level in best-effort mode). Adds to `st` when `tally`.
 */
static int check_preempt_node(run_t *run, unsigned k, const cJSON *entry,
			      preempt_stat_t *st, bool tally)
{
	const ft_demand_t *d = &run->ppods[k].demand;
	ft_level_t level = d->has_affinity && d->mode == FT_MODE_GUARANTEED
			       ? ft_place_effective_level(d)
			       : FT_LEVEL_NODE;
	const char *name = entry->string ? entry->string : "";
	const cJSON *pods = cJSON_GetObjectItemCaseSensitive(entry, "Pods");
	const cJSON *pdb =
	    cJSON_GetObjectItemCaseSensitive(entry, "NumPDBViolations");
	unsigned i = node_position(run, name), n = 0, m;
	uint16_t idx[FT_VICTIM_MAX], prop[2];
	const ft_node_t *node;
	const cJSON *v;
	result_t *r = run->r;

	if (i >= run->n)
		return fail(r, "preempt %s: names node \"%s\", not asked about",
			    pshapes[k].name, name);
	if (run->seen[i]++)
		return fail(r, "preempt %s: names %s twice", pshapes[k].name,
			    name);
	node = run->by_name[i];
	if (!cJSON_IsArray(pods) || !cJSON_GetArraySize(pods))
		return fail(r, "preempt %s: %s with an empty or no Pods list",
			    pshapes[k].name, name);
	if (!cJSON_IsNumber(pdb) || pdb->valuedouble < 0)
		return fail(r, "preempt %s: %s: bad NumPDBViolations",
			    pshapes[k].name, name);
	cJSON_ArrayForEach(v, pods)
	{
		const ft_holding_t *h =
		    ft_node_find_holding(node, str_of(v, "UID"));
		uint16_t x = h ? (uint16_t)(h - node->holdings) : 0;
		if (!h || n >= FT_VICTIM_MAX || among(idx, n, x))
			return fail(r,
				    "preempt %s: %s: victim \"%s\" is not a "
				    "pod of the node, or named twice",
				    pshapes[k].name, name, str_of(v, "UID"));
		if (h->priority >= PREEMPTOR_PRIORITY ||
		    (n && h->priority > node->holdings[idx[n - 1]].priority))
			return fail(r,
				    "preempt %s: %s: victim %s (priority %d) "
				    "out of order or not below the preemptor",
				    pshapes[k].name, name, h->uid, h->priority);
		idx[n++] = x;
	}
	if (!ft_victims_feasible(node, d, level, idx, n))
		return fail(r,
			    "preempt %s: %s: evicting the %u victims frees "
			    "no %s placement",
			    pshapes[k].name, name, n, ft_level_name(level));
	if (!tally)
		return 0;
	m = propose(prop, node, i, d);
	st->kept += 1.0 / run->n;
	st->victims += n;
	for (unsigned j = 0; j < n && m == n; j++)
		if (!among(prop, m, idx[j]))
			m = 0;
	st->changed += m != n;
	return 0;
}

/* An ExtenderPreemptionResult for preemptor `k`, every node checked. */
static int check_preempt(run_t *run, unsigned k, const char *reply, bool tally)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *map =
	    cJSON_GetObjectItemCaseSensitive(root, "NodeNameToMetaVictims");
	const cJSON *entry;
	preempt_stat_t *st = &run->r->preempt[k];
	int rc = 0;

	if (!cJSON_IsObject(root) ||
	    !(cJSON_IsObject(map) || cJSON_IsNull(map)))
		rc = fail(run->r,
			  "preempt %s: not an ExtenderPreemptionResult: "
			  "%.300s",
			  pshapes[k].name, reply);
	memset(run->seen, 0, run->n);
	if (rc < 0)
		map = NULL;
	cJSON_ArrayForEach(entry, map)
	{
		if ((rc = check_preempt_node(run, k, entry, st, tally)) < 0)
			break;
	}
	st->replies += tally && rc == 0;
	cJSON_Delete(root);
	return rc;
}

/* Preemptor of iteration `it`, a new pod unless --fixed-uids. */
static request_t *next_preempt(run_t *run, unsigned it)
{
	request_t *q = &run->preqs[it % PSHAPES];

	request_set_pod(q, run->o->fixed_uids ? it % PSHAPES : ++run->next_pod);
	return q;
}

/* Sorted samples -> one row of the preempt table. */
static void add_prow(result_t *r, const char *verb, double *v, unsigned n)
{
	append_row(r->prows, &r->n_prows, PROWS_MAX, verb, v, n);
}

/*
 * POST /preempt over HTTP, the preemptors in turn, every reply checked.
 * Stops early (at a whole round of shapes) after PREEMPT_SECONDS_MAX.
 */
static int run_preempt_http(run_t *run)
{
	unsigned total = run->preempt_warmup + run->preempt_iterations;
	unsigned counted[PSHAPES] = {0}, done = 0;
	double *all = calloc(run->preempt_iterations, sizeof(double));
	double *by[PSHAPES] = {NULL}, t0 = now_us(), reply = 0;
	client_t *c = &run->client;
	char verb[64];
	int rc = 0;

	for (unsigned k = 0; k < PSHAPES; k++)
		if (!(by[k] = calloc(run->preempt_iterations, sizeof(double))))
			rc = fail(run->r, "samples: out of memory");
	if (!all)
		rc = fail(run->r, "samples: out of memory");
	for (unsigned it = 0; rc == 0 && it < total; it++) {
		unsigned k = it % PSHAPES;
		bool timed = it >= run->preempt_warmup;
		double us;
		if (timed && k == 0 && done >= PSHAPES &&
		    now_us() - t0 > PREEMPT_SECONDS_MAX * 1e6)
			break;
		if ((rc = client_request(c, run->r, "/preempt",
					 next_preempt(run, it), &us)) < 0 ||
		    (rc = check_preempt(run, k, c->reply, timed)) < 0)
			break;
		if (!timed)
			continue;
		all[done++] = us;
		by[k][counted[k]++] = us;
		reply += (double)c->reply_len / 1024.0;
	}
	if (rc == 0) {
		run->r->preempt_reply_kib = done ? reply / done : 0;
		add_prow(run->r, "http preempt", all, done);
		for (unsigned k = 0; k < PSHAPES; k++) {
			snprintf(verb, sizeof(verb), "http preempt %s",
				 pshapes[k].name);
			add_prow(run->r, verb, by[k], counted[k]);
		}
	}
	for (unsigned k = 0; k < PSHAPES; k++)
		free(by[k]);
	free(all);
	return rc;
}

/*
 * The same without HTTP: the handler called directly, the request decoding
 * alone, and ft_victims_search over every node (the PDB views taken once,
 * untimed; each search timed on its own, so the row is their sum).
 */
static int run_preempt_core(run_t *run)
{
	unsigned total = run->preempt_warmup + run->preempt_iterations;
	series_t s;
	double t0 = now_us();
	unsigned done = 0;
	int rc;

	if ((rc = series_init(&s, run->r, run->preempt_iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < total; it++) {
		unsigned k = it % PSHAPES;
		bool timed = it >= run->preempt_warmup;
		preempt_stat_t *st = &run->r->preempt[k];
		ft_preempt_args_t args;
		double us, t1, sum = 0;
		if (timed && k == 0 && done >= PSHAPES &&
		    now_us() - t0 > PREEMPT_SECONDS_MAX * 1e6)
			break;
		if ((rc = call_handler(run, ft_app_preempt, "/preempt",
				       next_preempt(run, it), &us)) < 0)
			goto cleanup;
		t1 = now_us();
		if ((rc = ft_codec_preempt_args_decode(
			 &args, run->preqs[k].body, run->preqs[k].len)) < 0) {
			rc =
			    fail(run->r, "preempt decode: %s", ft_error_last());
			goto cleanup;
		}
		ft_codec_preempt_args_dispose(&args);
		t1 = now_us() - t1;
		for (unsigned i = 0; i < run->n; i++) {
			ft_victim_set_t set;
			double t2 = now_us(), one;
			ft_victims_search(&set, run->by_name[i],
					  &run->ppods[k].demand,
					  PREEMPTOR_PRIORITY, &run->pdbs[i]);
			one = now_us() - t2;
			sum += one;
			if (!timed)
				continue;
			st->searches++;
			st->found += set.found;
			st->inexact += set.found && !set.exact;
			if (one > st->slowest_us)
				st->slowest_us = one;
		}
		if (!timed)
			continue;
		s.v[0][done] = us;
		s.v[1][done] = t1;
		s.v[2][done] = sum;
		done++;
	}
	add_prow(run->r, "handler preempt (no HTTP)", s.v[0], done);
	add_prow(run->r, "decode ExtenderPreemptionArgs", s.v[1], done);
	add_prow(run->r, "ft_victims_search x N", s.v[2], done);
cleanup:
	series_dispose(&s);
	return rc;
}

static int run_preempt(run_t *run)
{
	long k = run->o->preempt_iterations;

	if (k == 0)
		return 0;
	run->preempt_iterations = k > 0		   ? (unsigned)k
				  : run->n <= 1000 ? PREEMPT_ITERATIONS_SMALL
						   : PREEMPT_ITERATIONS_LARGE;
	run->preempt_warmup = run->o->warmup >= 0
				  ? (unsigned)run->o->warmup
				  : (run->preempt_iterations + 9) / 10;
	if (preempt_setup(run) < 0)
		return -1;
	progress(run, "preempt over HTTP");
	if (run_preempt_http(run) < 0)
		return -1;
	progress(run, "preempt without HTTP");
	return run_preempt_core(run);
}

static void run_dispose(run_t *run)
{
	client_close(&run->client);
	for (unsigned k = 0; k < SHAPES; k++) {
		free(run->reqs[k].body);
		ft_codec_extender_args_dispose(&run->args[k]);
		ft_pod_dispose(&run->pods[k]);
	}
	for (unsigned k = 0; k < PSHAPES; k++) {
		free(run->preqs[k].body);
		ft_pod_dispose(&run->ppods[k]);
	}
	free(run->pdbs);
	free(run->seen);
	free(run->by_name);
	free(run->verdicts);
	free(run->scores);
	free(run->names);
	ft_app_dispose(&run->app);
	generator_dispose(&run->gen);
}

/* Everything for one cluster size; fills `r`. */
static int run_size(result_t *r, const bench_options_t *o, unsigned n)
{
	run_t run;
	unsigned port = 0;
	int rc;

	memset(&run, 0, sizeof(run));
	memset(r, 0, sizeof(*r));
	run.o = o;
	run.r = r;
	run.n = r->nodes = n;
	run.iterations = o->iterations ? o->iterations : n <= 1000 ? 2000 : 500;
	run.warmup =
	    o->warmup >= 0 ? (unsigned)o->warmup : (run.iterations + 9) / 10;
	progress(&run, "building and loading the cluster");
	if ((rc = app_setup(&run)) < 0 || (rc = load_cluster(&run)) < 0 ||
	    (rc = measure_model(&run)) < 0 ||
	    (rc = start_server(&run, &port)) < 0 ||
	    (rc = build_requests(&run)) < 0 ||
	    (rc = client_open(&run.client, r, port)) < 0)
		goto cleanup;
	progress(&run, "filter and prioritize over HTTP");
	if ((rc = run_http(&run)) < 0)
		goto cleanup;
	progress(&run, "the same without HTTP");
	if ((rc = run_handlers(&run)) < 0 ||
	    (rc = run_decode_lookup(&run)) < 0 || (rc = run_core(&run)) < 0)
		goto cleanup;
	/* Memory as filter and prioritize leave it, before the preempt
	 * requests and the decisions they record. */
	r->rss_kib = status_kib("VmRSS");
	r->hwm_kib = status_kib("VmHWM");
	if ((rc = run_preempt(&run)) < 0)
		goto cleanup;
	r->ok = true;
cleanup:
	run_dispose(&run);
	r->done = true;
	return rc;
}

/* run_size in a child, so that VmRSS and VmHWM are this size's alone. */
static int run_isolated(result_t *r, const bench_options_t *o, unsigned n)
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return run_size(r, o, n);
	if (pid == 0) {
		int rc = run_size(r, o, n);
		fflush(NULL);
		_exit(rc == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) < 0 || !r->done) {
		r->nodes = n;
		snprintf(r->error, sizeof(r->error),
			 "the run for %u nodes died (wait status %d)", n,
			 status);
	}
	return r->ok ? 0 : -1;
}

/* ---- the victim search alone ---- */

/* One node kind and preemptor: ft_victims_search over the variants. */
typedef struct micro_row {
	const char *kind, *prio, *shape;
	unsigned pods;			     /* per node */
	row_t t;			     /* microseconds */
	double found, exact;		     /* fractions of the searches */
	double victims;			     /* per search that found a set */
	double visits;			     /* branch-and-bound nodes, mean */
	unsigned levels[FT_LEVEL_COUNT + 1]; /* level reached, when found */
} micro_row_t;

typedef struct micro {
	result_t r; /* for its error */
	unsigned variants, n_rows;
	micro_row_t rows[MICRO_KINDS * MICRO_LAYOUTS * PSHAPES];
} micro_t;

/*
 * Pods per node and their priorities: every pod random 0..100, device
 * holders TIERED_PRIORITY more ("tiered"), or every pod 0 ("equal": batch
 * jobs of one priority, told apart by start time); 60 pods, or kubelet's
 * default maxPods of 110 ("crowded").
 */
typedef struct micro_layout {
	const char *prio;
	unsigned pods;
	int32_t device_priority;
	bool equal;
} micro_layout_t;

static const micro_layout_t micro_layouts[MICRO_LAYOUTS] = {
    {"random", PACKED_PODS, 0, false},
    {"tiered", PACKED_PODS, TIERED_PRIORITY, false},
    {"equal", PACKED_PODS, 0, true},
    {"random", 110, 0, false},
    {"tiered", 110, TIERED_PRIORITY, false},
    {"equal", 110, 0, true},
};

static void micro_name(char *buf, size_t size, unsigned kind, unsigned layout,
		       unsigned v)
{
	snprintf(buf, size, "victims-%s-%s-%u-v%u",
		 kinds[micro_kinds[kind]].label, micro_layouts[layout].prio,
		 micro_layouts[layout].pods, v);
}

/* MICRO_VARIANTS nodes of each kind and layout, packed, loaded. */
static int micro_load(ft_app_t *app, generator_t *g, result_t *r)
{
	sink_t sink = {app->state, NULL};
	char name[NAME_MAX_LEN], suffix[16];
	int rc = 0;

	g->memory_pct = 50;
	ft_state_replace_begin(app->state, FT_KIND_NODE);
	ft_state_replace_begin(app->state, FT_KIND_POD);
	for (unsigned i = 0;
	     i < MICRO_KINDS * MICRO_LAYOUTS * MICRO_VARIANTS && rc == 0; i++) {
		unsigned k = i / (MICRO_LAYOUTS * MICRO_VARIANTS);
		unsigned m = i / MICRO_VARIANTS % MICRO_LAYOUTS;
		unsigned v = i % MICRO_VARIANTS;
		g->device_priority = micro_layouts[m].device_priority;
		g->equal_priority = micro_layouts[m].equal;
		g->packed_pods = micro_layouts[m].pods;
		micro_name(name, sizeof(name), k, m, v);
		snprintf(suffix, sizeof(suffix), "-v%u%u%u", k, m, v);
		rc = emit_host(g, &sink, r, micro_kinds[k], name, suffix,
			       plan_packed);
	}
	ft_state_replace_end(app->state, FT_KIND_NODE);
	ft_state_replace_end(app->state, FT_KIND_POD);
	return rc;
}

/* The nodes of kind `k` and layout `m` from the snapshot, checked as built. */
static int micro_nodes(const ft_node_t **out, const ft_snapshot_t *snap,
		       result_t *r, unsigned k, unsigned m)
{
	char name[NAME_MAX_LEN];

	for (unsigned v = 0; v < MICRO_VARIANTS; v++) {
		const ft_node_t *node;
		micro_name(name, sizeof(name), k, m, v);
		node = out[v] = ft_snapshot_find(snap, name);
		if (!node || !node->topology || node->conflicts ||
		    node->unknown_gpus || node->unknown_cpus ||
		    node->n_holdings != micro_layouts[m].pods)
			return fail(r,
				    "%s: not loaded as built (%u pods "
				    "held, %u conflicts)",
				    name, node ? node->n_holdings : 0,
				    node ? node->conflicts : 0);
	}
	return 0;
}

/* Time the searches of one kind and preemptor into `row`. */
static int micro_series(micro_row_t *row, ft_app_t *app,
			const ft_node_t *const *nodes, const ft_pod_t *pod,
			unsigned iterations)
{
	unsigned warmup = iterations >= 4 * MICRO_VARIANTS ? MICRO_VARIANTS : 0;
	unsigned n = 0, found = 0, exact = 0;
	double *v = calloc(iterations, sizeof(double)), t0 = now_us();
	double victims = 0, visits = 0;
	ft_pdb_view_t pdbs[MICRO_VARIANTS];

	if (!v)
		return -1;
	for (unsigned i = 0; i < MICRO_VARIANTS; i++)
		ft_state_pdb_view(app->state, nodes[i], &pdbs[i]);
	for (unsigned it = 0; n < iterations; it++) {
		unsigned i = it % MICRO_VARIANTS;
		ft_victim_set_t set;
		double t1;
		if (n >= MICRO_ITERATIONS_MIN && i == 0 &&
		    now_us() - t0 > MICRO_SECONDS_MAX * 1e6)
			break;
		t1 = now_us();
		ft_victims_search(&set, nodes[i], &pod->demand,
				  PREEMPTOR_PRIORITY, &pdbs[i]);
		t1 = now_us() - t1;
		if (it < warmup)
			continue;
		v[n++] = t1;
		found += set.found;
		exact += set.exact;
		visits += (double)set.visits;
		if (set.found) {
			victims += set.n;
			row->levels[set.level <= FT_LEVEL_COUNT
					? set.level
					: FT_LEVEL_COUNT]++;
		}
	}
	qsort(v, n, sizeof(*v), cmp_double);
	row->t.iters = n;
	row->t.min = v[0];
	row->t.p50 = v[rank(n, 500)];
	row->t.p99 = v[rank(n, 990)];
	row->t.max = v[n - 1];
	row->found = (double)found / n;
	row->exact = (double)exact / n;
	row->victims = found ? victims / found : 0;
	row->visits = visits / n;
	free(v);
	return 0;
}

/*
 * ft_victims_search alone, on packed 8-GPU nodes of each layout
 * (micro_layouts), priorities below the preemptor's, for each preemptor
 * shape.
 */
static int run_micro(micro_t *mc, const bench_options_t *o)
{
	ft_app_t app;
	generator_t gen;
	ft_pod_t pods[PSHAPES];
	ft_snapshot_t *snap = NULL;
	const ft_node_t *nodes[MICRO_VARIANTS];
	result_t *r = &mc->r;
	unsigned iterations = o->victim_iterations > 0
				  ? (unsigned)o->victim_iterations
				  : MICRO_ITERATIONS;
	int rc = 0;

	memset(&app, 0, sizeof(app));
	memset(&gen, 0, sizeof(gen));
	memset(pods, 0, sizeof(pods));
	mc->variants = MICRO_VARIANTS;
	fprintf(stderr, "flextopo-bench: the victim search alone\n");
	if (ft_config_init(&app.cfg) < 0 ||
	    ft_config_set(&app.cfg, "logLevel", "warn") < 0 ||
	    ft_app_init(&app) < 0) {
		rc = fail(r, "app: %s", ft_error_last());
		goto cleanup;
	}
	if ((rc = generator_init(&gen, r, o, &app.opts)) < 0 ||
	    (rc = micro_load(&app, &gen, r)) < 0)
		goto cleanup;
	for (unsigned k = 0; k < PSHAPES && rc == 0; k++) {
		cJSON *pod =
		    request_pod(&pshapes[k], &app.opts, PREEMPTOR_PRIORITY);
		if (!pod || ft_codec_pod_decode(&pods[k], pod, &app.opts) < 0 ||
		    pods[k].demand_error)
			rc = fail(r, "preemptor %s: cannot decode",
				  pshapes[k].name);
		cJSON_Delete(pod);
	}
	snap = ft_state_snapshot(app.state);
	for (unsigned i = 0; i < MICRO_KINDS * MICRO_LAYOUTS && rc == 0; i++) {
		unsigned k = i / MICRO_LAYOUTS, m = i % MICRO_LAYOUTS;
		if ((rc = micro_nodes(nodes, snap, r, k, m)) < 0)
			break;
		for (unsigned s = 0; s < PSHAPES && rc == 0; s++) {
			micro_row_t *row = &mc->rows[mc->n_rows++];
			row->kind = kinds[micro_kinds[k]].label;
			row->prio = micro_layouts[m].prio;
			row->shape = pshapes[s].name;
			row->pods = micro_layouts[m].pods;
			if (micro_series(row, &app, nodes, &pods[s],
					 iterations) < 0)
				rc = fail(r, "samples: out of memory");
		}
	}
cleanup:
	if (snap)
		ft_snapshot_unref(snap);
	for (unsigned k = 0; k < PSHAPES; k++)
		ft_pod_dispose(&pods[k]);
	ft_app_dispose(&app);
	generator_dispose(&gen);
	r->ok = rc == 0;
	r->done = true;
	return rc;
}

/* ---- report ---- */

static void print_header(const bench_options_t *o)
{
	printf("flextopo-bench: seed %llu, %ld CPUs online, server threads: ",
	       (unsigned long long)o->seed, sysconf(_SC_NPROCESSORS_ONLN));
	if (o->threads)
		printf("%u", o->threads);
	else
		printf("one per core");
	printf(", %s, load: %s",
	       o->fixed_uids ? "one pod uid per shape"
			     : "a new pod uid per iteration",
	       o->via_file ? "List file + ft_app_load_snapshot"
			   : "objects applied one by one");
	if (o->packed || o->tiered)
		printf(", nodes: %s%s%s", o->packed ? "packed" : "",
		       o->packed && o->tiered ? ", " : "",
		       o->tiered ? "tiered priorities" : "");
	printf(", fragmentationWindow %s",
	       o->frag_window ? o->frag_window : "64 (default)");
	printf("\n\n");
}

static void print_latency(const result_t *res, unsigned n)
{
	printf("nodes  %-30s %6s %9s %9s %9s %9s\n", "verb", "iters", "min_us",
	       "p50_us", "p99_us", "max_us");
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; res[k].ok && i < res[k].n_rows; i++) {
			const row_t *w = &res[k].rows[i];
			printf("%5u  %-30s %6u %9.1f %9.1f %9.1f %9.1f\n",
			       res[k].nodes, w->verb, w->iters, w->min, w->p50,
			       w->p99, w->max);
		}
	printf("\n");
}

static double pct(unsigned part, unsigned whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void print_memory(const result_t *res, unsigned n)
{
	printf("nodes   pods  fill%%:gpu  cpu  mig  model_B/node  "
	       "rss_B/node  VmRSS_MiB  VmHWM_MiB  load_s\n");
	for (unsigned k = 0; k < n; k++) {
		const result_t *r = &res[k];
		if (!r->ok)
			continue;
		printf("%5u %6u  %9.0f %4.0f %4.0f  %12.0f  %10.0f  %9.1f  "
		       "%9.1f  %6.2f\n",
		       r->nodes, r->pods, pct(r->gpus_used, r->gpus_total),
		       pct(r->cpus_used, r->cpus_total),
		       pct(r->mig_used, r->mig_total), r->model_bytes,
		       r->rss_bytes, r->rss_kib / 1024.0, r->hwm_kib / 1024.0,
		       r->load_s);
	}
	printf("\n");
}

static void print_traffic(const result_t *res, unsigned n)
{
	printf("nodes  request_KiB  filter_reply_KiB  prioritize_reply_KiB  "
	       "connections/requests\n");
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok)
			printf("%5u  %11.1f  %16.1f  %20.1f  %ld/%ld\n",
			       res[k].nodes, res[k].request_kib,
			       res[k].filter_reply_kib,
			       res[k].prioritize_reply_kib, res[k].connects,
			       res[k].requests);
	printf("\nnodes passing filter, by pod shape:\nnodes");
	for (unsigned s = 0; s < SHAPES; s++)
		printf("  %16s", shapes[s].name);
	printf("\n");
	for (unsigned k = 0; k < n; k++) {
		if (!res[k].ok)
			continue;
		printf("%5u", res[k].nodes);
		for (unsigned s = 0; s < SHAPES; s++)
			printf("  %15.1f%%", 100.0 * res[k].passed[s]);
		printf("\n");
	}
	printf("\n");
}

static bool any_preempt(const result_t *res, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok && res[k].n_prows)
			return true;
	return false;
}

static void print_preempt(const bench_options_t *o, const result_t *res,
			  unsigned n)
{
	if (!any_preempt(res, n))
		return;
	printf("preempt: ExtenderPreemptionArgs with NodeNameToMetaVictims "
	       "naming all N nodes; preemptor priority %d, pods 0..%d",
	       PREEMPTOR_PRIORITY, FILL_PRIORITY_MAX);
	if (o->tiered)
		printf(", GPU and MIG holders %d..%d", TIERED_PRIORITY,
		       TIERED_PRIORITY + FILL_PRIORITY_MAX);
	printf("\n");
	printf("nodes  %-30s %6s %9s %9s %9s %9s\n", "preempt", "iters",
	       "min_us", "p50_us", "p99_us", "max_us");
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; res[k].ok && i < res[k].n_prows; i++) {
			const row_t *w = &res[k].prows[i];
			printf("%5u  %-30s %6u %9.1f %9.1f %9.1f %9.1f\n",
			       res[k].nodes, w->verb, w->iters, w->min, w->p50,
			       w->p99, w->max);
		}
	printf("\nnodes  %-17s %10s %6s %12s %8s %8s %8s %14s\n", "preemptor",
	       "sent_empty", "kept", "victims/kept", "changed", "found",
	       "inexact", "slowest_node");
	for (unsigned k = 0; k < n; k++)
		for (unsigned s = 0; res[k].ok && res[k].n_prows && s < PSHAPES;
		     s++) {
			const preempt_stat_t *st = &res[k].preempt[s];
			double kept = st->replies ? st->kept / st->replies : 0;
			double nodes = kept * res[k].nodes * st->replies;
			printf("%5u  %-17s %9.1f%% %5.1f%% %12.2f %7.1f%% "
			       "%7.1f%% %7.1f%% %11.1f us\n",
			       res[k].nodes, pshapes[s].name,
			       100.0 * st->sent_empty, 100.0 * kept,
			       nodes > 0 ? st->victims / nodes : 0,
			       nodes > 0 ? 100.0 * st->changed / nodes : 0,
			       pct(st->found, st->searches),
			       pct(st->inexact, st->found), st->slowest_us);
		}
	printf("\nnodes  request_KiB  reply_KiB\n");
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok && res[k].n_prows)
			printf("%5u  %11.1f  %9.1f\n", res[k].nodes,
			       res[k].preempt_request_kib,
			       res[k].preempt_reply_kib);
	printf("\n");
}

static const char *level_reached(const micro_row_t *w)
{
	unsigned best = FT_LEVEL_COUNT + 1;

	for (unsigned l = 0; l <= FT_LEVEL_COUNT; l++)
		if (w->levels[l] &&
		    (best > FT_LEVEL_COUNT || w->levels[l] > w->levels[best]))
			best = l;
	return best < FT_LEVEL_COUNT	? ft_level_name((ft_level_t)best)
	       : best == FT_LEVEL_COUNT ? "?"
					: "-";
}

static void print_micro(const micro_t *mc)
{
	if (!mc || !mc->r.ok || !mc->n_rows)
		return;
	printf("victim search alone (ft_victims_search): %u variants of each "
	       "node and layout; priorities random 0..%d, tiered (GPU and MIG "
	       "holders %d more) or equal (all 0); preemptor %d\n",
	       mc->variants, FILL_PRIORITY_MAX, TIERED_PRIORITY,
	       PREEMPTOR_PRIORITY);
	printf("%-8s %-6s %4s %-17s %6s %9s %9s %9s %9s %6s %6s %7s %8s  %s\n",
	       "node", "prio", "pods", "preemptor", "iters", "min_us", "p50_us",
	       "p99_us", "max_us", "found", "exact", "victims", "visits",
	       "level");
	for (unsigned i = 0; i < mc->n_rows; i++) {
		const micro_row_t *w = &mc->rows[i];
		printf(
		    "%-8s %-6s %4u %-17s %6u %9.1f %9.1f %9.1f %9.1f %5.0f%% "
		    "%5.0f%% %7.2f %8.0f  %s\n",
		    w->kind, w->prio, w->pods, w->shape, w->t.iters, w->t.min,
		    w->t.p50, w->t.p99, w->t.max, 100.0 * w->found,
		    100.0 * w->exact, w->victims, w->visits, level_reached(w));
	}
	printf("\n");
}

static const row_t *find_row(const result_t *r, const char *verb)
{
	for (unsigned i = 0; i < r->n_rows; i++)
		if (strcmp(r->rows[i].verb, verb) == 0)
			return &r->rows[i];
	return NULL;
}

/* The aims, where a measured size matches them. Never asserted. */
static void print_targets(const result_t *res, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		const result_t *r = &res[k];
		const row_t *w = find_row(r, "http filter+prioritize");
		double aim =
		    r->nodes == TARGET_SMALL_NODES   ? TARGET_SMALL_P99_US
		    : r->nodes == TARGET_LARGE_NODES ? TARGET_LARGE_P99_US
						     : 0;
		if (!r->ok)
			continue;
		if (aim > 0 && w)
			printf("aim: %u nodes, filter+prioritize p99 %.1f us "
			       "<= %.0f us: %s\n",
			       r->nodes, w->p99, aim,
			       w->p99 <= aim ? "met" : "MISSED");
		printf("aim: %u nodes, model %.0f B/node <= %.0f B/node: %s\n",
		       r->nodes, r->model_bytes, TARGET_MODEL_BYTES,
		       r->model_bytes <= TARGET_MODEL_BYTES ? "met" : "MISSED");
	}
	for (unsigned k = 0; k < n; k++) {
		const result_t *r = &res[k];
		const row_t *w = NULL;
		for (unsigned i = 0; r->ok && i < r->n_prows; i++)
			if (strcmp(r->prows[i].verb, "http preempt") == 0)
				w = &r->prows[i];
		if (w && r->nodes == TARGET_PREEMPT_NODES)
			printf("aim: %u candidate nodes, preempt p99 %.1f us "
			       "<= %.0f us: %s\n",
			       r->nodes, w->p99, TARGET_PREEMPT_P99_US,
			       w->p99 <= TARGET_PREEMPT_P99_US ? "met"
							       : "MISSED");
	}
}

/* Per 8-GPU node kind and layout: the slowest preemptor's p99, and the
 * lowest share of exact answers. */
static void print_micro_targets(const micro_t *mc)
{
	for (unsigned j = 0; mc && mc->r.ok && j < MICRO_KINDS * MICRO_LAYOUTS;
	     j++) {
		const char *kind = kinds[micro_kinds[j / MICRO_LAYOUTS]].label;
		const micro_layout_t *l = &micro_layouts[j % MICRO_LAYOUTS];
		double aim = l->pods > PACKED_PODS ? TARGET_CROWDED_P99_US
						   : TARGET_VICTIM_P99_US;
		const micro_row_t *worst = NULL, *least = NULL;
		for (unsigned i = 0; i < mc->n_rows; i++) {
			const micro_row_t *w = &mc->rows[i];
			if (strcmp(w->kind, kind) != 0 ||
			    strcmp(w->prio, l->prio) != 0 || w->pods != l->pods)
				continue;
			if (!worst || w->t.p99 > worst->t.p99)
				worst = w;
			if (!least || w->exact < least->exact)
				least = w;
		}
		if (!worst)
			continue;
		printf("aim: 8-GPU node with %u pods (%s, %s priorities), "
		       "victim search p99 %.1f us (%s, the slowest) under "
		       "%.0f us: %s; ",
		       l->pods, kind, l->prio, worst->t.p99, worst->shape, aim,
		       worst->t.p99 < aim ? "met" : "MISSED");
		if (least->exact < 1)
			printf("exact: %.0f%% of %s searches (the fewest)\n",
			       100.0 * least->exact, least->shape);
		else
			printf("exact: all\n");
	}
}

static int print_report(const bench_options_t *o, const result_t *res,
			unsigned n, const micro_t *mc)
{
	int rc = 0;

	print_header(o);
	print_latency(res, n);
	print_memory(res, n);
	print_traffic(res, n);
	print_preempt(o, res, n);
	print_micro(mc);
	print_targets(res, n);
	print_micro_targets(mc);
	if (mc && !mc->r.ok) {
		fprintf(stderr, "flextopo-bench: victim search: FAILED: %s\n",
			mc->r.error[0] ? mc->r.error : "unknown error");
		rc = -1;
	}
	for (unsigned k = 0; k < n; k++) {
		if (res[k].ok)
			continue;
		fprintf(stderr, "flextopo-bench: %u nodes: FAILED: %s\n",
			res[k].nodes,
			res[k].error[0] ? res[k].error : "unknown error");
		rc = -1;
	}
	return rc;
}

/* ---- flags ---- */

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: flextopo-bench [--nodes N[,N...]]... [--iterations K] "
	    "[--warmup W]\n"
	    "                      [--seed S] [--threads T] [--fixed-uids] "
	    "[--via-file]\n"
	    "                      [--packed] [--tiered] "
	    "[--fragmentation-window N]\n"
	    "                      [--preempt-iterations K]\n"
	    "                      [--victim-iterations K]\n"
	    "                      [--source-dir DIR]\n"
	    "  --nodes N[,N...]  cluster sizes, repeatable (default "
	    "500,5000)\n"
	    "  --iterations K    timed filter+prioritize pairs per size\n"
	    "                    (default 2000 up to 1000 nodes, else 500)\n"
	    "  --warmup W        untimed pairs first (default K/10)\n"
	    "  --seed S          seed of the synthetic cluster (default 1)\n"
	    "  --threads T       server worker threads (default one per "
	    "core)\n"
	    "  --fixed-uids      one pod uid per shape instead of a new pod "
	    "per pair\n"
	    "  --via-file        write the List to a temporary file and "
	    "load it with\n"
	    "                    ft_app_load_snapshot (default: apply the "
	    "objects one\n"
	    "                    by one, as ft_app_load_snapshot does)\n"
	    "  --packed          fill every node with %d pods, as the victim "
	    "search alone\n"
	    "                    does, instead of about half\n"
	    "  --tiered          pods holding GPUs or MIG instances get "
	    "priority %d more\n"
	    "  --fragmentation-window N\n"
	    "                    the config's fragmentationWindow (default "
	    "64; 0 turns\n"
	    "                    the fragmentation penalty of prioritize "
	    "off)\n"
	    "  --preempt-iterations K\n"
	    "                    timed preempt requests per size (default "
	    "%u up to 1000\n"
	    "                    nodes, else %u; 0: no preempt)\n"
	    "  --victim-iterations K\n"
	    "                    timed searches per node kind and preemptor "
	    "in the victim\n"
	    "                    search alone (default %u, at most %.0f s "
	    "each; 0: skip)\n"
	    "  --source-dir DIR  the tree holding api/examples/ (default "
	    "%s)\n",
	    PACKED_PODS, TIERED_PRIORITY, PREEMPT_ITERATIONS_SMALL,
	    PREEMPT_ITERATIONS_LARGE, MICRO_ITERATIONS, MICRO_SECONDS_MAX,
	    FT_SOURCE_DIR);
}

static int add_sizes(bench_options_t *o, const char *list)
{
	char *copy = strdup(list), *save = NULL, *tok;
	unsigned long n;
	int rc = copy ? 0 : -1;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && rc == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		if ((rc = bench_parse_ulong("flextopo-bench", &n, tok, 1,
					    1000000)) == 0 &&
		    o->n_sizes >= SIZES_MAX) {
			fprintf(stderr, "flextopo-bench: at most %d sizes\n",
				SIZES_MAX);
			rc = -1;
		}
		if (rc == 0)
			o->sizes[o->n_sizes++] = (unsigned)n;
	}
	free(copy);
	return rc;
}

static int parse_option(bench_options_t *o, int c, bool *sized)
{
	unsigned long v = 0;

	switch (c) {
	case 'n':
		if (!*sized)
			o->n_sizes = 0;
		*sized = true;
		return add_sizes(o, optarg);
	case 'i':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 1,
				      10000000) < 0)
			return -1;
		o->iterations = (unsigned)v;
		return 0;
	case 'w':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->warmup = (long)v;
		return 0;
	case 's':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      ULONG_MAX) < 0)
			return -1;
		o->seed = v;
		return 0;
	case 't':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 1, 256) < 0)
			return -1;
		o->threads = (unsigned)v;
		return 0;
	case 'f':
		o->fixed_uids = true;
		return 0;
	case 'v':
		o->via_file = true;
		return 0;
	case 'd':
		o->source_dir = optarg;
		return 0;
	case 'p':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->preempt_iterations = (long)v;
		return 0;
	case 'V':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->victim_iterations = (long)v;
		return 0;
	case 'P':
		o->packed = true;
		return 0;
	case 'T':
		o->tiered = true;
		return 0;
	case 'F':
		o->frag_window = optarg;
		return 0;
	default:
		return -1;
	}
}

/* 0: run; 1: help printed; -1: bad flags. */
static int parse_options(bench_options_t *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"nodes", required_argument, NULL, 'n'},
	    {"iterations", required_argument, NULL, 'i'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"seed", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {"fixed-uids", no_argument, NULL, 'f'},
	    {"via-file", no_argument, NULL, 'v'},
	    {"source-dir", required_argument, NULL, 'd'},
	    {"preempt-iterations", required_argument, NULL, 'p'},
	    {"victim-iterations", required_argument, NULL, 'V'},
	    {"packed", no_argument, NULL, 'P'},
	    {"tiered", no_argument, NULL, 'T'},
	    {"fragmentation-window", required_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	bool sized = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->sizes[0] = TARGET_SMALL_NODES;
	o->sizes[1] = TARGET_LARGE_NODES;
	o->n_sizes = 2;
	o->warmup = -1;
	o->preempt_iterations = -1;
	o->victim_iterations = -1;
	o->seed = 1;
	o->source_dir = FT_SOURCE_DIR;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (parse_option(o, c, &sized) < 0) {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "flextopo-bench: unexpected \"%s\"\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bench_options_t o;
	static micro_t mc; /* large */
	result_t *res;
	int rc = parse_options(&o, argc, argv);
	size_t bytes;

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	bytes = o.n_sizes * sizeof(*res);
	res = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("flextopo-bench: mmap");
		return 1;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "flextopo-bench: curl_global_init failed\n");
		return 1;
	}
	for (unsigned k = 0; k < o.n_sizes; k++) {
		if (o.n_sizes == 1)
			run_size(&res[k], &o, o.sizes[k]);
		else
			run_isolated(&res[k], &o, o.sizes[k]);
	}
	if (o.victim_iterations != 0)
		run_micro(&mc, &o);
	rc = print_report(&o, res, o.n_sizes,
			  o.victim_iterations != 0 ? &mc : NULL);
	curl_global_cleanup();
	munmap(res, bytes);
	return rc < 0 ? 1 : 0;
}
