/*
 * The cluster half of the FlexTopo model: what pods ask for, what they hold,
 * and per-node allocation state, published as immutable snapshots.
 *
 * Units: CPU in millicores or whole logical CPUs (named so), memory in MiB,
 * GPUs in whole devices, MIG in instances of one profile, shared GPUs in
 * replicas (the device plugin's time-slicing or MPS replicas of one GPU).
 *
 * A node (ft_node_t) is immutable after ft_node_build() and reference
 * counted; a snapshot (ft_snapshot_t) is an immutable, reference-counted,
 * name-sorted array of nodes. The watcher builds a new node when a node or
 * one of its pods changes, and publishes a new snapshot sharing the unchanged
 * nodes. Readers take a reference and need no lock afterwards.
 */
#ifndef FLEXTOPO_CLUSTER_H
#define FLEXTOPO_CLUSTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "cpuset.h"
#include "gang.h"
#include "noderules.h"
#include "topology.h"

#define FT_PROFILE_MAX	    32 /* longest MIG profile name + 1 ("1g.10gb+me") */
#define FT_GPU_PRODUCTS_MAX 8  /* GPU models a pod's node affinity may name */
/* The node label of the GPU model, as GPU feature discovery sets it
 * (gpu-feature-discovery, "nvidia.com/gpu.product": the product name with
 * spaces as dashes, e.g. NVIDIA-A100-SXM4-80GB). */
#define FT_GPU_PRODUCT_LABEL "nvidia.com/gpu.product"
#define FT_ALLOC_MIG_MAX     16

/* flextopo.io/requires "interconnect". */
typedef enum {
	FT_INTERCONNECT_ANY = 0,  /* not asked */
	FT_INTERCONNECT_PCIE = 1, /* "pcie": any GPU or MIG instance */
	FT_INTERCONNECT_NVLINK =
	    2, /* "nvlink": a whole GPU with NVLink peers */
} ft_interconnect_t;

/*
 * Capabilities each allocation unit (a whole GPU or a MIG instance) given to
 * a pod must have: the annotation flextopo.io/requires, after Modelplane's
 * node pool capabilities (seed 001). A zero field asks nothing. How units
 * meet them is in place.h.
 */
typedef struct ft_caps {
	uint64_t memory_mib; /* memoryPerGpu: memory of one unit, MiB */
	unsigned precisions; /* precision: ft_precision_t bits (mig.h), all
				required */
	ft_interconnect_t interconnect;
	uint32_t nvlink_domain; /* nvlinkDomainSize: GPUs in the unit's NVLink
				   domain, at least */
} ft_caps_t;

/*
 * What a pod asks for, from its containers' resource requests (the larger of
 * the sum over app containers and the largest init container, as
 * kube-scheduler's NodeResourcesFit computes it: pkg/scheduler/framework/
 * types.go, computePodResourceRequest) and its flextopo.io annotations.
 */
typedef struct ft_demand {
	uint32_t gpus; /* whole GPUs (nvidia.com/gpu or its shared name
			  "<gpu resource>.shared"); with gpu_fraction, ranks */
	uint32_t gpu_fraction_milli; /* flextopo.io/gpu-fraction in
					thousandths (1..1000); 0 when absent */
	uint32_t ranks; /* set by ft_place_adapt() on a node with shared GPUs:
			   the GPU count read as ranks of gpu_fraction (each
			   ceil(f x replicas) replicas of one GPU, ranks on
			   distinct GPUs) or, without a fraction, as single
			   replicas anywhere; gpus is then 0 */
	char mig_profile[FT_PROFILE_MAX]; /* "" when no MIG resource is asked */
	uint32_t mig_count;		  /* instances of mig_profile */
	uint32_t cpu_millis;		  /* CPU request, millicores */
	uint32_t exclusive_cpus; /* logical CPUs to pin: integer CPU of a
				    Guaranteed-QoS pod (kubelet static CPU
				    manager policy), else 0 */
	uint64_t memory_mib;	 /* memory request, MiB (rounded up) */
	bool has_affinity;	 /* flextopo.io/affinity was given */
	ft_level_t level; /* requested affinity (FT_LEVEL_NODE if none) */
	ft_affinity_mode_t mode; /* guaranteed | best-effort */
	bool has_policy;	 /* flextopo.io/allocation-policy was given */
	ft_policy_t policy; /* it overrides the configured policy for the pod */
	bool has_caps;	    /* flextopo.io/requires was given */
	ft_caps_t caps;
	/*
	 * The GPU model names the pod's nodeSelector and required node
	 * affinity allow on FT_GPU_PRODUCT_LABEL: ft_gpu_product_hash() of
	 * each allowed value, sorted; 0 when they name none or more than
	 * FT_GPU_PRODUCTS_MAX, or when an affinity term leaves the model free.
	 * A hint, shown in the debug API (gpuModels) and part of the workload
	 * mix's class key, that decides nothing: the label's values need not
	 * be the topology's model names (site codes such as V100M16, GPU
	 * feature discovery's MIG-strategy suffixes, a provider's own
	 * scheme). Where a pod may run is its node rules (ft_pod_t.rules,
	 * noderules.h) matched against the node's labels, which hold the same
	 * requirement, as kube-scheduler's NodeAffinity filter matches it.
	 */
	uint8_t n_gpu_products;
	uint64_t gpu_products[FT_GPU_PRODUCTS_MAX];
	/*
	 * The demand's memo key (ft_demand_key(), place.h): equal keys mean
	 * equal demands, for the life of the process; 0 when none was given.
	 * The per-node filter memo compares keys instead of the demand's
	 * bytes. A copy that is changed must drop it (ft_place_adapt does).
	 */
	uint64_t key;
} ft_demand_t;

#define FT_MILLI_CPU 1000 /* millicores per CPU */

/* The demand's CPU request, millicores: at least its pinned CPUs x 1000. */
uint32_t ft_demand_cpu_millis(const ft_demand_t *d);

/* True when the demand asks for GPUs, MIG instances or pinned CPUs. */
bool ft_demand_wants_devices(const ft_demand_t *d);

/*
 * The allocation annotation (flextopo.io/allocation) as decoded, before it
 * is resolved against a node's topology. Owns its strings.
 */
typedef struct ft_allocation {
	ft_level_t level;
	ft_affinity_mode_t mode;
	unsigned n_gpus;
	char *gpu_uuids[FT_GPU_MAX];
	unsigned n_mig;
	char *mig_uuids[FT_ALLOC_MIG_MAX];
	unsigned n_replicas;
	char *replica_gpus[FT_GPU_MAX]; /* uuids of shared GPUs ("replicas") */
	uint8_t replica_counts[FT_GPU_MAX]; /* replicas held on each */
	ft_cpuset_t cpus;
	uint64_t memory_mib;
	/*
	 * The allocation's "dra" key: DRA chose its GPUs and MIG instances
	 * (dra.h). The pod's ResourceClaims hold them, so the pod holds only
	 * its CPUs and memory.
	 */
	bool dra;
} ft_allocation_t;

void ft_allocation_dispose(ft_allocation_t *a);
/*
 * Do `a` and `b` name the same units: the same GPU and MIG uuids, the same
 * replica count on each shared GPU, the same CPUs? Sets, so order does not
 * matter; level, mode and memory are not compared.
 */
bool ft_allocation_same_units(const ft_allocation_t *a,
			      const ft_allocation_t *b);

/*
 * The units of `a` as one line for logs: `gpus [GPU-a,GPU-b] cpuset "0-3"`,
 * with `mig [...]` and `replicas [GPU-x:2]` when it has some. Truncated to
 * `size`; returns `buf`.
 */
const char *ft_allocation_units_text(char *buf, size_t size,
				     const ft_allocation_t *a);

/* flextopo.io/observed "source": where the node agent read the facts. */
typedef enum {
	/*
	 * "nri": the agent itself set the containers' devices and cpusets at
	 * creation (enforce mode); these are the units the containers run on.
	 */
	FT_OBSERVED_NRI = 0,
	/*
	 * "podresources": kubelet's PodResources API (List) reported them,
	 * the device plugin's and CPU manager's own choice (observe mode).
	 */
	FT_OBSERVED_PODRESOURCES = 1,
} ft_observed_source_t;

/* "nri", "podresources". */
const char *ft_observed_source_name(ft_observed_source_t source);

/*
 * The observed annotation (flextopo.io/observed, api/observed.schema.json)
 * as decoded: what the node really gave the pod's containers (their union),
 * written on the pod by the node agent flextopo-node (node/, Go package
 * node/alloc). `units` holds GPU and MIG uuids, replicas per shared
 * GPU and the exclusive CPUs ("" in the annotation, an empty set here: the
 * containers run on the shared pool); its level, mode and memory are unused.
 * The per-container list of the annotation is checked, not kept. Owns its
 * strings.
 */
typedef struct ft_observed {
	char *node; /* the Node the agent runs on */
	ft_observed_source_t source;
	ft_allocation_t units;
} ft_observed_t;

void ft_observed_dispose(ft_observed_t *o);
/* A pod as the cluster state keeps it. Owns its strings. */
typedef struct ft_pod {
	char *uid;
	char *ns;
	char *name;
	char *node; /* spec.nodeName; NULL when unscheduled */
	unsigned n_labels;
	char **labels;	  /* metadata.labels as "key=value" */
	int32_t priority; /* spec.priority (0 when absent) */
	int64_t
	    start_time; /* status.startTime, else creationTimestamp, Unix s */
	bool terminal;	/* Succeeded or Failed: holds nothing */
	ft_demand_t demand;
	/*
	 * Where the pod may run: its nodeSelector, required node affinity (the
	 * GPU model label included) and tolerations (noderules.h).
	 * kube-scheduler filters on them and flextopo only weighs
	 * fragmentation with them (the workload mix, frag.h). Kept apart from
	 * the demand, which placement copies per node.
	 */
	ft_node_rules_t rules;
	char *demand_error; /* a bad flextopo.io annotation; NULL when fine */
	bool has_allocation;
	ft_allocation_t allocation;
	char *allocation_error; /* annotation present but invalid */
	/*
	 * flextopo.io/observed (heap, owned): NULL when absent or invalid. An
	 * invalid one is ignored (the pod holds its allocation, or its
	 * demand), with observed_error saying why ("annotation
	 * flextopo.io/observed: ..."). On the heap because few pods have one.
	 */
	ft_observed_t *observed;
	char *observed_error;
	/*
	 * The ResourceClaims the pod uses, by name in its namespace:
	 * spec.resourceClaims[].resourceClaimName, the claims made from its
	 * templates (status.resourceClaimStatuses) and the one kube-scheduler
	 * made for its extended resources
	 * (status.extendedResourceClaimStatus). Owned.
	 */
	unsigned n_claims;
	char **claims;
	/*
	 * Not a pod: a ResourceClaim's allocation, built by the state so that
	 * the node charges what the claim holds (uid, ns and name are the
	 * claim's; priority INT32_MAX, so that it is never a victim).
	 */
	bool claim_holder;
	/*
	 * The pod runs on a DRA node (set by the state): its ResourceClaims
	 * hold its GPUs and MIG instances, so the pod holds only its CPUs and
	 * memory, whatever its allocation, observed units or demand say.
	 */
	bool devices_by_claims;
	/*
	 * The pod's gang (gang.h): its source and name in the pod's namespace
	 * (a PodGroup's name, or "<label key>=<value>" for FT_GANG_LABEL).
	 * Owned; NULL with FT_GANG_NONE. A reference that names no valid gang
	 * leaves the pod its own unit, and gang_error says why
	 * ("label scheduling.x-k8s.io/pod-group: \"A_b\" is not a DNS
	 * subdomain").
	 */
	ft_gang_source_t gang_source;
	char *gang;
	char *gang_error;
} ft_pod_t;

void ft_pod_dispose(ft_pod_t *pod);
int ft_pod_copy(ft_pod_t *out, const ft_pod_t *src);

/*
 * Does the pod hold its observed units? True when it has a valid observed
 * annotation written for the node it is bound to (spec.nodeName); an
 * annotation naming another node (left from an earlier binding, or a
 * mistake) is ignored. Such a pod holds the observed GPUs, MIG instances,
 * replicas and CPUs instead of its allocation's, keeping the allocation's
 * level; without an allocation (placed without flextopo) it holds them all
 * the same.
 */
bool ft_pod_holds_observed(const ft_pod_t *pod);

/*
 * Has the pod drifted? True when it holds its observed units
 * (ft_pod_holds_observed) and either has a valid allocation whose units
 * differ (ft_allocation_same_units) or has no valid allocation (placed
 * without flextopo, or its allocation is malformed) and holds some GPU, MIG
 * instance, replica or exclusive CPU. An allocation with pinned CPUs
 * observed with an empty cpuset is drift: the containers run on the shared
 * pool.
 */
bool ft_pod_drifted(const ft_pod_t *pod);

/*
 * Units resolved to topology positions: what a drifted pod's allocation
 * named (ft_holding_t.expected), beside what the node gave it.
 */
typedef struct ft_expected_units {
	uint16_t gpus;		      /* GPU positions */
	ft_mig_mask_t mig;	      /* MIG instance positions */
	uint8_t replicas[FT_GPU_MAX]; /* replicas per shared GPU */
	ft_cpuset_t cpus;
	uint32_t unknown; /* GPUs, MIG instances and replicas named by uuids
			     the topology lacks */
} ft_expected_units_t;

/* What one pod holds on a node, resolved to topology positions. */
typedef struct ft_holding {
	char *uid;
	char *ns;
	char *name;
	int32_t priority;
	int64_t start_time;
	uint16_t gpus;		      /* GPU positions */
	ft_mig_mask_t mig;	      /* MIG instance positions (128 bits) */
	uint8_t replicas[FT_GPU_MAX]; /* replicas held per shared GPU */
	ft_cpuset_t cpus;	      /* pinned CPUs */
	uint16_t numa_nodes;	      /* NUMA positions of cpus and memory */
	uint64_t memory_mib;   /* charged evenly to numa_nodes when pinned */
	uint32_t unknown_gpus; /* held GPUs whose placement is not known */
	uint32_t unknown_mig;  /* held instances of unknown_mig_profile */
	uint32_t unknown_replicas; /* held replicas of unknown placement */
	char unknown_mig_profile[FT_PROFILE_MAX];
	uint32_t unknown_cpus; /* pinned CPUs of unknown placement */
	/*
	 * The pod's requests, whatever their placement: CPU in millicores
	 * (pinned CPUs count 1000 each) and memory in MiB. Node-wide usage
	 * as kube-scheduler's NodeResourcesFit counts it, for scoring.
	 */
	uint32_t requested_cpu_millis;
	uint64_t requested_memory_mib;
	ft_level_t level; /* as the allocation annotation says */
	uint8_t levels;	  /* every level reached (bit per ft_level_t) */
	bool assumed;	  /* from a bind the watch has not shown yet */
	bool in_conflict; /* in a pair of ft_node_t.conflict_pairs */
	/*
	 * The units above are the observed ones (ft_pod_holds_observed),
	 * reported from `observed_source`.
	 */
	bool observed;
	ft_observed_source_t observed_source;
	/*
	 * The pod has drifted (ft_pod_drifted): `expected` is what its
	 * allocation named, the units above what the node gave. NULL when not
	 * drifted; owned by the node.
	 */
	ft_expected_units_t *expected;
	/* The units of a ResourceClaim (ft_pod_t.claim_holder), not a pod. */
	bool claim;
} ft_holding_t;

#define FT_FRAG_CACHE 16 /* FT_MIX_CLASSES (frag.h) */

/* One class's usable units on a node (ft_usable_t of place.h, frag.h). */
typedef struct ft_frag_cache_entry {
	uint32_t generation; /* of the mix class it is for; 0: empty */
	uint32_t milli;
	uint16_t gpus;
	bool reaches; /* the class's node rules admit the node */
	ft_mig_mask_t mig;
} ft_frag_cache_entry_t;

#define FT_FRAG_MEMO 4 /* pod shapes remembered per node */

/* What a node has for the classes of a mix (frag.h). */
typedef struct ft_frag_room {
	uint32_t free_milli; /* free GPU capacity, milli-GPU */
	uint64_t
	    cpu_millis; /* CPU no pod requested (ft_node_free_cpu_millis) */
	uint64_t memory_mib; /* memory no pod requested, when known */
	bool memory_known;
} ft_frag_room_t;

/* A node after a placement: its room and each class's usable capacity. */
typedef struct ft_frag_after {
	ft_frag_room_t room;
	uint32_t usable[FT_FRAG_CACHE]; /* milli-GPU */
} ft_frag_after_t;

/* A pod shape weighed on a node: the node after its placement. */
typedef struct ft_frag_memo {
	bool used;
	ft_demand_t shape; /* the pod's class key with its own requests */
	uint8_t policy;	   /* the policy its placement followed */
	uint32_t generations[FT_FRAG_CACHE]; /* of the classes in `after` */
	ft_frag_after_t after;
} ft_frag_memo_t;

/*
 * What each class of the workload mix could use on a node, the node's room,
 * and the fragmentation each class would see after the placements of the
 * last pod shapes weighed there, kept so that each is worked out once per
 * node.
 * `busy` guards the rest as a try-lock: a thread that finds it held works
 * without the cache.
 */
typedef struct ft_node_frag {
	atomic_flag busy;
	bool room_known;     /* `room` is worked out */
	ft_frag_room_t room; /* the node's room, beside `busy`: prioritize
				reads it for every node */
	ft_frag_cache_entry_t cache[FT_FRAG_CACHE];
	ft_frag_memo_t memo[FT_FRAG_MEMO];
	unsigned memo_next; /* the slot the next shape replaces */
} ft_node_frag_t;

#define FT_FILTER_MEMO 4 /* pod demands remembered per node */

/*
 * Filter verdicts already worked out on a node, by demand. A node never
 * changes, so the verdict of an equal demand (byte for byte) is the same;
 * kube-scheduler asks about the same few pod shapes on thousands of nodes
 * that mostly did not change since the last pod. The verdict type is
 * place.h's, kept opaque here so that the model does not include it.
 * `busy` guards the rest as a try-lock, as in ft_node_frag_t.
 */
typedef struct ft_filter_memo ft_filter_memo_t;

typedef struct ft_node {
	atomic_int refcount;
	char *name;
	ft_topology_t
	    *topology;	      /* NULL when the annotation is missing or bad */
	char *topology_error; /* why topology is NULL; NULL when present */
	ft_node_labels_t *labels; /* labels and taints (a reference); NULL
				     when not known */
	unsigned n_holdings;
	ft_holding_t *holdings;
	/* Derived usage. */
	uint16_t gpus_used;
	ft_mig_mask_t mig_used;
	uint8_t replicas_used[FT_GPU_MAX]; /* per shared GPU, from holdings */
	ft_cpuset_t cpus_used;
	uint32_t numa_free_cpus[FT_NUMA_MAX];
	uint64_t numa_free_memory_mib[FT_NUMA_MAX];
	uint32_t unknown_gpus;
	uint32_t unknown_replicas;
	uint32_t unknown_cpus;
	uint64_t requested_cpu_millis; /* sum of the holdings' requests */
	uint64_t requested_memory_mib;
	unsigned conflicts; /* holdings that claimed an already-held unit */
	unsigned drifted;   /* holdings with `expected` (drifted pods) */
	/*
	 * Who claims what twice, one pair per holding counted in `conflicts`
	 * (ft_conflict_t); owned by the node, borrowed by value copies, which
	 * keep the count of the node they copy even when they charge more.
	 */
	struct ft_conflict *conflict_pairs;
	unsigned n_conflict_pairs;
	unsigned conflict_pods; /* holdings with in_conflict */
	/*
	 * Dynamic Resource Allocation (dra.h): the node's GPUs are published
	 * in ResourceSlices, so the DRA allocator alone picks them and
	 * ResourceClaims hold them (holdings with `claim`). double_published:
	 * the device plugin advertises GPUs on the node too. dra_error: a
	 * slice disagrees with the topology annotation (owned; NULL when
	 * none). Set by ft_node_set_dra() before the node is shared.
	 */
	bool dra;
	bool dra_double_published;
	char *dra_error;
	/*
	 * Not part of the node's value: a cache for fragmentation (frag.h),
	 * allocated with the node and filled as requests weigh it. NULL in
	 * value copies (ft_node_copy_value), which then work without it.
	 */
	ft_node_frag_t *frag;
	/*
	 * Likewise for filter (ft_place_filter_memo, place.h): NULL in value
	 * copies and when it could not be allocated.
	 */
	ft_filter_memo_t *filter_memo;
} ft_node_t;

/*
 * A unit claimed twice: holding `later` claims units that holding `earlier`
 * (a lower index in the node's holdings) already holds: whole GPUs or
 * replicas of a GPU one of them holds whole or that the two overflow, MIG
 * instances, pinned CPUs. A conflict is found in what the annotations say
 * (flextopo.io/allocation, or the observed units): two pods bound with the
 * same unit, which the node cannot honour. Every unit either claims stays
 * held, so it is never handed out a third time, and the node's other units
 * stay usable.
 */
typedef struct ft_conflict {
	uint16_t earlier, later; /* holding indexes */
	uint16_t gpus;		 /* GPU positions claimed by both */
	ft_mig_mask_t mig;	 /* MIG instance positions claimed by both */
	ft_cpuset_t cpus;	 /* pinned CPUs claimed by both */
} ft_conflict_t;

/*
 * The units of `c` as text for people: "GPU 5 (GPU-...), MIG MIG-..., CPUs
 * 72-79"; positions the topology names. Truncated to `size`; returns `buf`.
 */
const char *ft_conflict_units_text(char *buf, size_t size,
				   const ft_node_t *node,
				   const ft_conflict_t *c);

/*
 * Build a node from its topology (a reference is taken; may be NULL with
 * `topology_error` saying why), its labels and taints (a reference is
 * taken; NULL when not known) and the pods bound to it (borrowed; terminal
 * pods are skipped). A pod holds its observed units when it has them
 * (ft_pod_holds_observed), else its allocation's. Pods whose allocation is
 * absent, or whose units name what this topology lacks, count as usage of
 * unknown placement. `assumed` flags, one per pod, may be NULL. FT_ENOMEM.
 */
int ft_node_build(ft_node_t **out, const char *name, ft_topology_t *topology,
		  const char *topology_error, ft_node_labels_t *labels,
		  const ft_pod_t *const *pods, const bool *assumed,
		  unsigned n_pods);
/*
 * Mark a node just built (not yet shared) as a DRA node, with its flags and
 * error (copied; NULL: none). FT_ENOMEM.
 */
int ft_node_set_dra(ft_node_t *node, bool double_published, const char *error);
ft_node_t *ft_node_ref(ft_node_t *node);
void ft_node_unref(ft_node_t *node);

/*
 * A value copy of `node` in `out`, to change its usage: it borrows node's
 * name, topology and holdings (it takes no reference; never ft_node_unref
 * it, and it lives no longer than `node`), and has no fragmentation cache
 * and no filter memo.
 * The reference count, which other threads change, is not read.
 */
void ft_node_copy_value(ft_node_t *out, const ft_node_t *node);

/*
 * `node` as it would be with holding `h` charged too, in `out`: a value copy
 * (ft_node_copy_value). For weighing a placement before it is made
 * (frag.h). Only the usage fields of `h` are read.
 */
void ft_node_preview(ft_node_t *out, const ft_node_t *node,
		     const ft_holding_t *h);

/* The holding of pod `uid`, or NULL. */
const ft_holding_t *ft_node_find_holding(const ft_node_t *node,
					 const char *uid);

/*
 * Whether `h` holds units of known placement: GPUs, MIG instances, replicas
 * of shared GPUs or pinned CPUs (not only CPU and memory requests).
 */
bool ft_holding_has_units(const ft_holding_t *h);

/*
 * Free whole GPUs (not MIG-enabled, not held, no replica held), as a mask of
 * positions.
 */
uint16_t ft_node_free_gpus(const ft_node_t *node);

/*
 * CPU no pod on the node has requested, millicores: the topology's CPUs
 * less its reserved ones, x 1000, less every holding's request (pinned or
 * not); 0 without a topology or when overcommitted.
 */
uint64_t ft_node_free_cpu_millis(const ft_node_t *node);

/*
 * Memory no pod on the node has requested, MiB, in `out`: the topology's
 * NUMA memory less every holding's request. False (and `out` 0) when the
 * node has no topology or the memory of a NUMA node is unknown.
 */
bool ft_node_free_memory_mib(const ft_node_t *node, uint64_t *out);

/* GPUs with at least one replica held, as a mask of positions. */
uint16_t ft_node_replica_gpus(const ft_node_t *node);

/*
 * MIG instances of `profile` held with no known placement: by holding `h`,
 * or by all of `node`'s holdings. 0 for the empty profile.
 */
uint32_t ft_holding_unknown_mig(const ft_holding_t *h, const char *profile);
uint32_t ft_node_unknown_mig(const ft_node_t *node, const char *profile);

/* GPU positions with a count in `replicas` (FT_GPU_MAX per-GPU counts). */
uint16_t ft_replica_gpus(const uint8_t *replicas);

/*
 * Free replicas of shared GPU position `g` (topology present): none when a
 * pod holds the GPU whole.
 */
unsigned ft_node_free_replicas(const ft_node_t *node, unsigned g);

/* Is MIG instance position `i` held? */
bool ft_node_mig_used(const ft_node_t *node, unsigned i);

/* Approximate heap bytes of the node model, topology included. */
size_t ft_node_footprint(const ft_node_t *node);

/* A hash of node names to positions in a snapshot (private to cluster.c). */
typedef struct ft_name_index ft_name_index_t;
/*
 * A run of FT_SNAPSHOT_CHUNK consecutive positions of a snapshot that holds
 * the references to their nodes (private to cluster.c). Snapshots share
 * the chunks where their nodes are the same, so that one replacing a node
 * copies one chunk and counts references to chunks, not to every node:
 * 5,000 node references taken and dropped per watch event were most of
 * its cost at 5,000 nodes.
 */
typedef struct ft_snapshot_chunk ft_snapshot_chunk_t;
#define FT_SNAPSHOT_CHUNK 64

typedef struct ft_snapshot {
	atomic_int refcount;
	uint64_t generation;
	unsigned n_nodes;
	ft_node_t **nodes; /* sorted by name; borrowed from `chunks` */
	unsigned n_chunks;
	ft_snapshot_chunk_t **chunks; /* each holds a reference */
	/*
	 * Name -> position in `nodes`, for ft_snapshot_find(): a filter over
	 * 5,000 names spent more on binary search than on encoding its reply.
	 * Snapshots with the same names share one (ft_snapshot_with).
	 */
	ft_name_index_t *index;
} ft_snapshot_t;

/*
 * A snapshot over `nodes` (references are taken; the array is copied and
 * sorted). Duplicate names: FT_EINVAL. FT_ENOMEM.
 */
int ft_snapshot_new(ft_snapshot_t **out, ft_node_t *const *nodes, unsigned n,
		    uint64_t generation);
ft_snapshot_t *ft_snapshot_ref(ft_snapshot_t *s);
void ft_snapshot_unref(ft_snapshot_t *s);

/*
 * A snapshot equal to `base` but with each node of `replacements` in place of
 * the node of the same name (references are taken). Cheaper than
 * ft_snapshot_new() when the set of nodes is unchanged. FT_ENOTFOUND when a
 * replacement's name is not in `base`.
 */
int ft_snapshot_with(ft_snapshot_t **out, const ft_snapshot_t *base,
		     ft_node_t *const *replacements, unsigned n,
		     uint64_t generation);

/* Borrowed node by name (a hash lookup), or NULL. */
const ft_node_t *ft_snapshot_find(const ft_snapshot_t *s, const char *name);

#endif
