/*
 * The openb replay's plain cluster model (bench/README.md, "The openb trace
 * replay"): the trace's nodes and pods, the pod sequence of one seed, a
 * per-node model of GPU milli-capacities, CPU and memory, the three baseline
 * policies of the FGD paper (Random, BestFit, FGD) and its two measures,
 * unallocated and fragmented GPU capacity.
 *
 * Definitions follow Weng et al., "Beware of Fragmentation" (USENIX ATC '23)
 * and its simulator (hkust-adsl/kubernetes-scheduler-simulator, commit
 * 8f3d641): pkg/simulator/plugin/{random,best_fit,fgd}_score.go,
 * open_gpu_share.go (GPU choice inside a node), pkg/utils/frag.go (the
 * fragmentation measure and typical pods), pkg/simulator/simulator.go (the
 * shuffle and the workload tuning to 130 %). Units: CPU in millicores,
 * memory in MiB, GPU in milli-GPU (1000 is one GPU).
 */
#ifndef FLEXTOPO_BENCH_OPENB_MODEL_H
#define FLEXTOPO_BENCH_OPENB_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#define OB_GPU_MAX    8
#define OB_MILLI      1000
#define OB_LEVELS     132 /* arrived workload 0..131 % */
#define OB_NAME_MAX   32
#define OB_MODEL_MAX  16
#define OB_MODELS_MAX 31 /* distinct GPU models in one trace */
/* The models bit of a gpu_spec that names only models no node has. */
#define OB_MODELS_NONE (UINT32_C(1) << 31)
#define OB_TYPICAL_MAX 256

typedef struct ob_node {
	char name[OB_NAME_MAX];
	uint32_t cpu_milli;
	uint64_t memory_mib;
	unsigned n_gpus;
	char model[OB_MODEL_MAX];
	unsigned model_id; /* index into ob_trace_t.models */
	bool nvlink;	   /* 8-GPU V100 box: NVLink hybrid cube mesh */
} ob_node_t;

typedef struct ob_pod {
	uint32_t cpu_milli;
	uint64_t memory_mib;
	unsigned n_gpus;
	uint32_t gpu_milli; /* per GPU: < 1000 only with n_gpus 1 (shared) */
	uint32_t models;    /* gpu_spec: bits of the GPU models it may run on
			       (ob_trace_t.models); 0: any node */
} ob_pod_t;

typedef struct ob_trace {
	ob_node_t *nodes;
	unsigned n_nodes;
	ob_pod_t *pods;
	unsigned n_pods;
	uint64_t gpu_capacity_milli;
	char models[OB_MODELS_MAX][OB_MODEL_MAX]; /* the GPU nodes' models */
	unsigned n_models;
} ob_trace_t;

/* Read the node and pod CSVs; -1 with a message on stderr. */
int ob_trace_load(ob_trace_t *out, const char *node_csv, const char *pod_csv);
void ob_trace_dispose(ob_trace_t *t);

static inline uint64_t ob_pod_gpu_milli(const ob_pod_t *p)
{
	return (uint64_t)p->n_gpus * p->gpu_milli;
}

/* Pod kinds for counting failures: no GPU, a share of one GPU, one whole
 * GPU, several. */
#define OB_KINDS 4
static inline unsigned ob_pod_kind(const ob_pod_t *p)
{
	if (!p->n_gpus)
		return 0;
	if (p->gpu_milli < OB_MILLI)
		return 1;
	return p->n_gpus == 1 ? 2 : 3;
}

/* Are GPUs a and b of an NVLink node linked (DGX-1 hybrid cube mesh)? */
bool ob_nvlinked(unsigned a, unsigned b);
/* Are all GPUs of `mask` pairwise linked? */
bool ob_nvlink_aligned(uint32_t mask);

/*
 * The pod sequence of one seed: the trace's pods shuffled, then pods drawn
 * from the trace with replacement appended while the arrived GPU request
 * stays within `ratio` x the cluster's capacity. Indexes into t->pods
 * (heap, *n entries); at most `max_pods` when that is not 0. NULL: no
 * memory.
 */
unsigned *ob_sequence(const ob_trace_t *t, uint64_t seed, double ratio,
		      unsigned max_pods, unsigned *n);

/* The typical pods of FGD: the most frequent shapes, 95 % of the pods. */
typedef struct ob_typical {
	ob_pod_t shapes[OB_TYPICAL_MAX]; /* memory ignored */
	double freq[OB_TYPICAL_MAX];
	unsigned n;
} ob_typical_t;

void ob_typical_init(ob_typical_t *out, const ob_trace_t *t);

/* What a node has left. */
typedef struct ob_left {
	uint32_t cpu_milli;
	uint64_t memory_mib;
	uint32_t gpu[OB_GPU_MAX]; /* milli left per GPU */
} ob_left_t;

/*
 * FGD's fragmentation of `node` with `l` left (milli-GPU) under the typical
 * pods; a typical pod whose gpu_spec excludes the node's model counts all
 * its free GPU (the simulator's NoAccess).
 */
double ob_frag(const ob_left_t *l, const ob_node_t *node,
	       const ob_typical_t *tp);

/* The cluster as one policy sees it. */
typedef struct ob_cluster {
	const ob_trace_t *trace;
	const ob_typical_t *typical;
	ob_left_t *left;
	double *frag;	     /* per node, ob_frag */
	double frag_sum;     /* milli-GPU */
	uint64_t used_milli; /* GPU milli requested by the placed pods */
	uint64_t arrived_milli;
	unsigned arrived, placed, failed;
	unsigned failed_kind[OB_KINDS];	      /* by ob_pod_kind() */
	unsigned multi_nvlink, multi_aligned; /* 2- and 4-GPU pods on NVLink
						 nodes, and of those the ones
						 on pairwise-linked GPUs */
	bool overcommitted;		      /* an invariant broke */
	bool name_ties; /* ties go to the lowest node name (the simulator's
			   selectHost) instead of a uniform random choice
			   (kube-scheduler's) */
	struct ob_candidate *cand; /* scratch: one per node (ob_candidate_t) */
	/* Per arrived-workload percent, as the simulator's analysis. */
	double sum_unalloc[OB_LEVELS], sum_frag[OB_LEVELS];
	unsigned n_level[OB_LEVELS];
	/*
	 * Where the unallocated GPU capacity is when arrivals first reach
	 * 100 %, % of capacity: in GPUs partly taken, and in whole free GPUs
	 * (of those, on nodes with less than OB_CPU_SHORT millicores left).
	 */
	double partial_at_100, whole_at_100, whole_cpu_short_at_100;
} ob_cluster_t;

/* Millicores: 90 % of the default trace's GPU pods ask at least this (its
 * commonest GPU pod CPU request); a node with less left strands its GPUs. */
#define OB_CPU_SHORT 3152

/* A node that passed the filter, its score and, for FGD, its GPU (-1:
 * none chosen). */
typedef struct ob_candidate {
	unsigned node;
	int64_t score;
	int gpu;
} ob_candidate_t;

/*
 * kube-scheduler's selectHost over `n` candidates: the index of the highest
 * score, uniform among ties from `rng`, or with c->name_ties the lowest
 * node name (the simulator's); -1 when n is 0.
 */
int ob_select_host(const ob_cluster_t *c, const ob_candidate_t *cand,
		   unsigned n, uint64_t *rng);

int ob_cluster_init(ob_cluster_t *c, const ob_trace_t *t,
		    const ob_typical_t *tp);
void ob_cluster_dispose(ob_cluster_t *c);

/* In-tree NodeResourcesFit: CPU and memory requests fit what is left. */
/*
 * kube-scheduler's in-tree filters as the replay has them: NodeResourcesFit
 * (CPU and memory left) and NodeAffinity (the pod's gpu_spec against the
 * node's GPU model, the label nvidia.com/gpu.product).
 */
bool ob_fits_in_tree(const ob_cluster_t *c, unsigned node, const ob_pod_t *p);

/*
 * Account pod `p` placed on `node` with `milli[g]` taken from GPU g (or
 * failed when node < 0), then record the measures at the arrived level.
 */
void ob_cluster_place(ob_cluster_t *c, const ob_pod_t *p, int node,
		      const uint32_t *milli);
void ob_cluster_fail(ob_cluster_t *c, const ob_pod_t *p);

/* Unallocated and fragmented GPU % at arrived level `pct` (the bucket, or
 * its neighbours when empty, as merge_*_discrete.py do); NAN if none. */
double ob_unalloc_at(const ob_cluster_t *c, unsigned pct);
double ob_frag_at(const ob_cluster_t *c, unsigned pct);

typedef enum {
	OB_RANDOM = 0,
	OB_BESTFIT = 1,
	OB_FGD = 2,
} ob_policy_t;

/* Schedule one pod under a baseline policy, ties broken by `rng`. */
void ob_schedule(ob_cluster_t *c, ob_policy_t policy, const ob_pod_t *p,
		 uint64_t *rng);

#endif
