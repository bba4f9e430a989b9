/*
 * The hardware half of the FlexTopo model of one node: sockets, NUMA nodes
 * with their CPUs and memory, PCIe switches, GPUs with their NVLink peers,
 * and MIG instances; plus the affinity domains derived from them.
 *
 * Shape (hardware-topology.md in the design references; nvidia-smi topo -m):
 *   socket -> NUMA node (cpus, memory MiB) -> PCIe switch -> GPU -> MIG
 * instance GPU <-> GPU NVLink with a link count (NV#); an NVSwitch board links
 * every pair. Everything is addressed by small positions (0..n-1) in the arrays
 * below; masks are bit sets of positions. Ids and indexes as the hardware
 * reports them (socket id, NUMA id, GPU index) are kept beside the positions
 * for replies.
 *
 * What an annotation does not say stays unknown rather than guessed. The
 * FlexTopo graph of the paper's authors (codec.h) may leave out the memory of
 * a NUMA node and the NUMA node of a GPU:
 *   - NUMA memory not given (ft_topology_add_numa with FT_MEMORY_UNKNOWN):
 *     the node's memory_mib is 0 and its bit is set in numa_memory_unknown;
 *     placement does not check memory in a domain holding such a NUMA node
 *     (unconstrained, not zero); pods' memory is still recorded in their
 *     holdings, and the debug views show the NUMA memory as null. The Node's
 *     allocatable memory is not split over NUMA nodes instead: the topology
 *     is built from the annotation alone, and an even split would invent a
 *     per-NUMA figure no more true than zero.
 *   - GPU locality not given (ft_topology_add_gpu_unplaced): the GPU's numa
 *     is FT_NONE and its bit is set in unplaced_gpus. A GPU known to be in a
 *     socket (contained by a Socket, NUMA node unknown) keeps that socket and
 *     lies in its socket domain and the node domain; a GPU known nowhere
 *     (socket FT_NONE too) lies in the node domain only. Neither is in an
 *     NVLink, PCIe-switch or NUMA domain, so placements using them reach
 *     level socket at best, or node.
 *
 * A topology is immutable once ft_topology_finish() succeeded and is shared by
 * reference count between snapshots; the one exception is
 * ft_mig_catalog_apply() (mig.h), which records the catalog's capability
 * facts before the topology is shared. It does no I/O; the annotation
 * parsers in codec.h build it.
 */
#ifndef FLEXTOPO_TOPOLOGY_H
#define FLEXTOPO_TOPOLOGY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpuset.h"

#define FT_SOCKET_MAX 8
#define FT_NUMA_MAX   16
#define FT_SWITCH_MAX 32
#define FT_GPU_MAX    16
#define FT_MIG_MAX    128 /* MIG instances per node: 16 GPUs x 7 + slack */
#define FT_MIG_WORDS  (FT_MIG_MAX / 64)
#define FT_DOMAIN_MAX 128
#define FT_NONE	      0xff /* "no PCIe switch" and other absent positions */
#define FT_REPLICAS_MAX                                                        \
	100 /* replicas per shared GPU (time-slicing or MPS), at most */
#define FT_MIG_SLICES                                                          \
	8 /* memory slices per MIG-capable GPU (NVIDIA MIG user guide) */
#define FT_MEMORY_UNKNOWN                                                      \
	UINT64_MAX /* ft_topology_add_numa: the annotation gives no memory */

/*
 * A set of MIG instance positions of a node (bit i: ft_topology_t.mig[i]),
 * as every MIG field of the model holds one.
 */
typedef uint64_t ft_mig_mask_t[FT_MIG_WORDS];

static inline bool ft_mig_mask_has(const uint64_t *m, unsigned i)
{
	return i < FT_MIG_MAX && (m[i / 64] >> (i % 64)) & 1;
}

static inline void ft_mig_mask_set(uint64_t *m, unsigned i)
{
	if (i < FT_MIG_MAX)
		m[i / 64] |= UINT64_C(1) << (i % 64);
}

static inline bool ft_mig_mask_empty(const uint64_t *m)
{
	for (unsigned w = 0; w < FT_MIG_WORDS; w++)
		if (m[w])
			return false;
	return true;
}

/*
 * Affinity levels, tightest first. A placement reaches level L when all its
 * GPUs (and MIG instances) and the NUMA nodes of its CPUs lie inside one
 * domain of level L:
 *   nvlink      GPUs linked pairwise by NVLink (a maximal clique), CPUs in
 *               the NUMA nodes of that clique;
 *   pcie-switch GPUs under one PCIe switch, CPUs in the switch's NUMA node;
 *   numa        GPUs and CPUs of one NUMA node;
 *   socket      GPUs and CPUs of one socket;
 *   node        anything on the node.
 */
typedef enum {
	FT_LEVEL_NVLINK = 0,
	FT_LEVEL_PCIE_SWITCH = 1,
	FT_LEVEL_NUMA = 2,
	FT_LEVEL_SOCKET = 3,
	FT_LEVEL_NODE = 4,
	FT_LEVEL_COUNT = 5,
} ft_level_t;

/* "nvlink", "pcie-switch", "numa", "socket", "node". */
const char *ft_level_name(ft_level_t level);
/* Inverse of ft_level_name; FT_EINVAL listing the valid names. */
int ft_level_parse(ft_level_t *out, const char *name);

typedef struct ft_socket {
	int id;
	uint16_t numa_nodes; /* mask of NUMA positions */
	uint16_t gpus;	     /* mask of GPU positions, NUMA node known or not */
} ft_socket_t;

typedef struct ft_numa_node {
	int id;
	uint8_t socket; /* socket position */
	ft_cpuset_t cpus;
	uint32_t n_cpus;
	uint64_t memory_mib; /* 0 when unknown (numa_memory_unknown) */
	uint16_t gpus;	     /* GPUs known to be attached here */
} ft_numa_node_t;

typedef struct ft_pcie_switch {
	int id;
	uint8_t numa; /* NUMA position */
	uint16_t gpus;
} ft_pcie_switch_t;

/*
 * FNV-1a of a GPU model name with spaces read as dashes, so that
 * "NVIDIA A100-SXM4-80GB" (NVML's name, the topology's model) and
 * NVIDIA-A100-SXM4-80GB (gpu-feature-discovery's nvidia.com/gpu.product)
 * hash alike: the GPU model names of a pod's node rules
 * (demand.gpu_products, cluster.h).
 */
uint64_t ft_gpu_product_hash(const char *name);

typedef struct ft_gpu {
	int index;	  /* nvidia-smi index */
	char *uuid;	  /* "GPU-..." */
	char *model;	  /* "NVIDIA A100-SXM4-80GB" */
	char *pci_bus_id; /* "0000:07:00.0" (sysfs spelling), or NULL when the
			     annotation does not say */
	uint64_t memory_mib;
	uint8_t numa, socket,
	    pcie_switch;       /* positions; FT_NONE: no PCIe switch; numa (and
				  maybe socket) FT_NONE: unknown (unplaced_gpus) */
	uint16_t nvlink_peers; /* mask of GPU positions */
	uint8_t nvlink_links[FT_GPU_MAX]; /* NVLink count per peer position */
	bool mig_enabled; /* whole-GPU allocation impossible when set */
	uint8_t replicas; /* time-sliced or MPS-shared into this many replicas
			     (2..FT_REPLICAS_MAX); 0 when not shared */
	unsigned precisions; /* ft_precision_t bits (mig.h) of the product, from
				the MIG catalog (ft_mig_catalog_apply); 0 when
				the catalog does not know the product */
} ft_gpu_t;

typedef struct ft_mig_instance {
	char *profile;	     /* "3g.40gb" */
	char *uuid;	     /* "MIG-..." */
	uint8_t gpu;	     /* GPU position */
	uint8_t start, size; /* memory-slice placement {start}:size, 0..8 */
	uint64_t memory_mib; /* the profile's memory: nominal from the name
				("3g.40gb": 40 x 1024), replaced by the MIG
				catalog's figure when it knows the product */
	uint8_t profile_id;  /* position of the first instance of the same
				profile (derived by finish): instances of one
				profile compare equal without strcmp */
} ft_mig_instance_t;

/*
 * How the NVIDIA device plugin exposes MIG instances on the node
 * (k8s-device-plugin README, "MIG strategies"): mixed names each profile
 * (nvidia.com/mig-3g.40gb) and keeps nvidia.com/gpu for whole GPUs; single
 * exposes the instances themselves as nvidia.com/gpu, which the plugin allows
 * only when every GPU is MIG-enabled with instances of one profile.
 */
typedef enum {
	FT_MIG_STRATEGY_MIXED = 0,
	FT_MIG_STRATEGY_SINGLE = 1,
} ft_mig_strategy_t;

typedef struct ft_domain {
	uint8_t level; /* ft_level_t */
	uint8_t owner; /* socket/NUMA/switch position; clique number */
	uint16_t gpus;
	uint16_t numa_nodes;
	ft_mig_mask_t mig; /* MIG instance positions on its GPUs (derived) */
} ft_domain_t;

typedef struct ft_topology {
	atomic_int refcount;
	unsigned n_sockets, n_numa, n_switches, n_gpus, n_mig, n_domains;
	ft_socket_t sockets[FT_SOCKET_MAX];
	ft_numa_node_t numa[FT_NUMA_MAX];
	ft_pcie_switch_t switches[FT_SWITCH_MAX];
	ft_gpu_t gpus[FT_GPU_MAX];
	ft_mig_instance_t *mig; /* n_mig entries, grouped by GPU */
	ft_domain_t *domains;	/* n_domains entries, sorted by level */
	unsigned level_first[FT_LEVEL_COUNT + 1]; /* domains of level L:
						     [first[L], first[L+1]) */
	uint16_t whole_gpus;	/* GPUs that are not MIG-enabled */
	uint16_t shared_gpus;	/* GPUs with replicas (derived by finish) */
	char *shared_resource;	/* "sharedResource": the resource name of the
				   replicas ("nvidia.com/gpu.shared"); NULL
				   when not given (the GPU resource itself) */
	uint16_t reserved_gpus; /* marked used by the annotation itself */
	uint16_t unplaced_gpus; /* GPUs whose NUMA node is unknown (see the
				   top of this file) */
	uint16_t numa_memory_unknown; /* NUMA positions whose memory is
					 unknown (likewise) */
	ft_cpuset_t
	    reserved_cpus; /* likewise (FlexTopo graph "status: used") */
	uint32_t n_cpus;
	ft_mig_strategy_t mig_strategy; /* as given, else inferred by
					   ft_topology_finish() */
	bool mig_strategy_given;	/* "migStrategy" in the annotation */
} ft_topology_t;

/* A new empty topology with refcount 1. FT_ENOMEM. */
int ft_topology_new(ft_topology_t **out);
ft_topology_t *ft_topology_ref(ft_topology_t *t);
/* Drop a reference; frees on the last. NULL is fine. */
void ft_topology_unref(ft_topology_t *t);

/*
 * Builders used by the parsers; each returns the new position (>= 0) or
 * FT_EINVAL with a message (duplicate id, too many, unknown parent).
 */
int ft_topology_add_socket(ft_topology_t *t, int id);
/* `memory_mib` may be FT_MEMORY_UNKNOWN (numa_memory_unknown). */
/* Record GPU position `g`'s PCI bus id (copied). FT_EINVAL, FT_ENOMEM. */
int ft_topology_set_gpu_pci_bus_id(ft_topology_t *t, unsigned g,
				   const char *bus_id);
int ft_topology_add_numa(ft_topology_t *t, unsigned socket, int id,
			 const ft_cpuset_t *cpus, uint64_t memory_mib);
int ft_topology_add_switch(ft_topology_t *t, unsigned numa, int id);
/* `pcie_switch` may be FT_NONE (GPU on a root port of `numa`). Copies strings.
 */
int ft_topology_add_gpu(ft_topology_t *t, unsigned numa, unsigned pcie_switch,
			int index, const char *uuid, const char *model,
			uint64_t memory_mib);
/*
 * A GPU whose NUMA node is unknown (unplaced_gpus): in socket position
 * `socket`, or with FT_NONE in no known socket either. Copies strings.
 */
int ft_topology_add_gpu_unplaced(ft_topology_t *t, unsigned socket, int index,
				 const char *uuid, const char *model,
				 uint64_t memory_mib);
/* NVLink by GPU index (not position); recorded in both directions. */
int ft_topology_add_nvlink(ft_topology_t *t, int gpu_index, int peer_index,
			   unsigned links);
/* Marks the GPU MIG-enabled. Copies strings. */
int ft_topology_add_mig(ft_topology_t *t, unsigned gpu, const char *profile,
			unsigned start, unsigned size, const char *uuid);
int ft_topology_enable_mig(ft_topology_t *t, unsigned gpu);
/*
 * Marks GPU position `gpu` shared into `replicas` replicas, as the NVIDIA
 * device plugin's time-slicing or MPS sharing exposes them (k8s-device-plugin
 * README, "Shared Access to GPUs"). ft_topology_finish() checks the range.
 */
int ft_topology_share_gpu(ft_topology_t *t, unsigned gpu, unsigned replicas);
/* The resource name of the replicas ("sharedResource"). Copies. FT_ENOMEM. */
int ft_topology_set_shared_resource(ft_topology_t *t, const char *name);
/* The MIG strategy the annotation states; ft_topology_finish() checks it. */
void ft_topology_set_mig_strategy(ft_topology_t *t, ft_mig_strategy_t s);

/*
 * Validate and derive: CPUs of NUMA nodes disjoint, GPU uuids unique, NVLink
 * peers exist, MIG instances inside 0..8 and not overlapping on one GPU,
 * shared GPUs with 2..FT_REPLICAS_MAX replicas and not MIG-enabled; then
 * compute the affinity domains. The MIG strategy, when not given, is
 * inferred: single when the node has GPUs, every one MIG-enabled, and MIG
 * instances that all share one profile; mixed otherwise. A given single that
 * breaks that rule is an error. FT_EINVAL naming the fault.
 */
int ft_topology_finish(ft_topology_t *t);

/* The profile of a MIG-strategy single node's instances; NULL otherwise. */
const char *ft_topology_single_profile(const ft_topology_t *t);

/*
 * GPUs in the largest NVLink domain (level nvlink) holding GPU position
 * `gpu`: 1 for a GPU without NVLink peers and for a MIG-enabled GPU.
 */
unsigned ft_topology_nvlink_domain_size(const ft_topology_t *t, unsigned gpu);

/* Positions by external name; -1 when absent. */
int ft_topology_find_gpu_uuid(const ft_topology_t *t, const char *uuid);
int ft_topology_find_gpu_index(const ft_topology_t *t, int index);
int ft_topology_find_mig_uuid(const ft_topology_t *t, const char *uuid);
int ft_topology_find_numa_id(const ft_topology_t *t, int id);

/* NUMA positions whose CPUs intersect `cpus`. */
uint16_t ft_topology_numa_of_cpus(const ft_topology_t *t,
				  const ft_cpuset_t *cpus);

/* Approximate heap bytes held by `t` (for the memory benchmark). */
size_t ft_topology_footprint(const ft_topology_t *t);

/* The GPU positions (bit g) holding the MIG instances of `mig`. */
uint16_t ft_topology_mig_gpus(const ft_topology_t *t, const uint64_t *mig);

#endif
