/*
 * Placement: does a pod fit a node at its affinity level (filter), how good
 * is the best placement there (score), and which exact GPUs, MIG instances
 * and CPUs it gets (choose). Pure functions of a node model and a demand.
 *
 * Guaranteed mode accepts only placements that reach the requested level;
 * best-effort mode accepts any placement with enough resources and prefers
 * the tightest level. A demand without GPUs or MIG instances is placed by its
 * CPUs alone, so nvlink and pcie-switch affinity mean numa for it.
 *
 * MIG strategy single. On a node whose GPUs are all MIG-enabled with
 * instances of one profile (or whose annotation says "migStrategy":"single";
 * an explicit "mixed" turns the inference off), the NVIDIA device plugin
 * exposes the instances as nvidia.com/gpu. There a demand for N whole GPUs is
 * read as N instances of the node's profile, by every function below and by
 * the victim search (ft_place_adapt), and placements list instances.
 *
 * Capabilities (ft_caps_t, flextopo.io/requires). Only units that meet every
 * asked capability count, for filter, score, choose and victims alike:
 *   whole GPU     memory_mib >= memoryPerGpu; its product's precisions (MIG
 *                 catalog, by model) include every asked one, and a product
 *                 the catalog does not know meets no precision requirement;
 *                 interconnect nvlink: it has NVLink peers; nvlinkDomainSize
 *                 n: its NVLink domain (ft_topology_nvlink_domain_size) has
 *                 at least n GPUs. Interconnect pcie is met by every unit.
 *   MIG instance  the profile's memory (catalog); its GPU's precisions; no
 *                 NVLink (interconnect nvlink fails) and a domain of 1.
 * Filter refuses a node where too few units meet them with a reason that
 * says why the others fail ("requires: 0 of 8 GPUs match (memoryPerGpu 40Gi:
 * 24564 MiB; ...)"), unresolvable since usage cannot change it.
 * ft_place_check_units() lists the units one by one with the capabilities
 * each fails, by the same test, for the debug view.
 *
 * Shared GPUs. On a node whose topology marks GPUs shared into replicas
 * (time-slicing or MPS), a demand for R GPUs is read as R ranks
 * (ft_place_adapt): with flextopo.io/gpu-fraction f each rank takes
 * ceil(f x replicas) replicas of one shared GPU, the ranks on distinct GPUs
 * inside one domain of the affinity level (2 x 0.8 with nvlink affinity: two
 * GPUs of one NVLink group, 8 of 10 replicas each); without a fraction each
 * rank is one replica on any shared GPU. A GPU held whole serves no replica,
 * and a GPU with a replica held is not free for whole-GPU demands. Replicas
 * of unknown placement count against every shared demand node-wide. Packed
 * takes the GPUs with the most replicas used (filling leftovers), distributed
 * the emptiest.
 *
 * Memory. A demand that pins CPUs has its memory charged to the NUMA nodes
 * of those CPUs, so a domain fits it only with that much memory free in its
 * NUMA nodes, unless one of them has memory the topology does not know
 * (topology.h: a FlexTopo graph without memory attributes), where memory is
 * not checked at all rather than read as 0 MiB. A refusal names memory when
 * it is what is short: "numa: at most 0 GPUs with 8 CPUs and 2048 MiB in one
 * NUMA node even when empty, need 0 GPUs with 8 CPUs and 4096 MiB", or with
 * usage "... 8 free CPUs and 2048 MiB free in one NUMA node, ...".
 *
 * Unknown GPU locality. A GPU whose NUMA node is unknown (topology.h) is in
 * no NVLink, PCIe-switch or NUMA domain, so a placement using it reaches
 * level socket at best (node when its socket is unknown too). A refusal at a
 * level it cannot reach says how many of the demand's GPUs that leaves out:
 * "...; GPU locality unknown for 4 GPUs (graph GPUs without a NUMA or socket
 * edge)", or "...; NUMA node unknown for 2 GPUs (graph GPUs without a NUMA
 * edge)" for GPUs whose socket is known.
 *
 * Policy. Score and choose take the configured policy (packed or
 * distributed); a demand with has_policy (flextopo.io/allocation-policy)
 * uses its own instead. Packed takes MIG instances on GPUs that already have
 * used slices, keeping whole GPUs free; distributed takes them on the GPUs
 * with the fewest, spreading a pod's instances. MIG instances without an
 * affinity are chosen node-wide, by the policy alone.
 */
#ifndef FLEXTOPO_PLACE_H
#define FLEXTOPO_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "policy.h"

typedef struct ft_placement {
	ft_level_t level;  /* the requested level when reached, else the
			      first looser level reached (for a pod without
			      affinity: the tightest level reached) */
	uint8_t levels;	   /* bit L set: the placement reaches level L */
	uint16_t gpus;	   /* GPU positions */
	ft_mig_mask_t mig; /* MIG instance positions */
	uint8_t replicas[FT_GPU_MAX]; /* replicas taken per shared GPU */
	ft_cpuset_t cpus;	      /* pinned CPUs */
	uint16_t numa_nodes;	      /* NUMA positions of the pinned CPUs */
	uint64_t memory_mib; /* charged to numa_nodes when CPUs are pinned */
} ft_placement_t;

typedef enum {
	FT_FIT = 0,		  /* a placement exists now */
	FT_UNFIT = 1,		  /* not now; preemption could help */
	FT_UNFIT_UNRESOLVABLE = 2 /* never, even on an empty node */
} ft_fit_t;

typedef struct ft_verdict {
	ft_fit_t fit;
	ft_level_t level; /* tightest level reachable now, or FT_LEVEL_COUNT */
	char reason[256]; /* why not, naming the shortfall; "" when fit */
} ft_verdict_t;

/*
 * The demand as node topology `t` (NULL: none) sees it: on a MIG-strategy
 * single node, whole GPUs asked become as many instances of the node's
 * profile, unless the demand also asks another profile (which such a node
 * never offers); on a node with shared GPUs, whole GPUs asked become ranks.
 * Elsewhere a copy of `d`. Applying it twice changes nothing.
 */
void ft_place_adapt(ft_demand_t *out, const ft_topology_t *t,
		    const ft_demand_t *d);

/* The units of a node that may serve a demand, whatever their usage. */
typedef struct ft_units {
	ft_demand_t demand; /* ft_place_adapt() of the demand */
	uint16_t gpus;	    /* GPUs that meet demand.caps: whole GPUs, or for a
			       demand of ranks the shared GPUs */
	ft_mig_mask_t mig;  /* instances of demand.mig_profile meeting them */
} ft_units_t;

/* Work out `out` for `d` on topology `t` (not NULL); at most 16 GPUs and
 * 128 instances are visited. */
void ft_place_units(ft_units_t *out, const ft_topology_t *t,
		    const ft_demand_t *d);

#define FT_MILLI_GPU 1000u /* a whole GPU's capacity in milli-GPU */

/* The units of a node a demand could take now (fragmentation, frag.h). */
typedef struct ft_usable {
	uint32_t milli; /* their capacity, milli-GPU (frag.h units) */
	uint16_t gpus;	/* whole GPUs, or for a demand of ranks shared GPUs */
	ft_mig_mask_t mig; /* MIG instances */
} ft_usable_t;

/*
 * The units `d` could take on `node` now: those meeting its capabilities,
 * free, and inside a domain of its level (in guaranteed mode; else the
 * node) where `d` fits now. A shared GPU counts with all its free replicas
 * when one rank fits on it. All zero when `d` does not fit the node now,
 * counting its CPU and memory requests against what the node's pods have
 * not requested (ft_node_free_cpu_millis: FGD's "the pod does not fit", so
 * a node whose CPUs are spoken for strands its free GPUs), or the node
 * has no topology. Where `d` may run at all (FGD's NoAccess) is not asked
 * here: the workload mix asks it of the node's labels (frag.h).
 */
void ft_place_usable(ft_usable_t *out, const ft_node_t *node,
		     const ft_demand_t *d);

/* The capabilities of flextopo.io/requires, in the order reasons list them. */
typedef enum {
	FT_CAP_MEMORY = 0,	 /* memoryPerGpu */
	FT_CAP_PRECISION = 1,	 /* precision */
	FT_CAP_INTERCONNECT = 2, /* interconnect (only nvlink can fail) */
	FT_CAP_DOMAIN = 3,	 /* nvlinkDomainSize */
	FT_CAP_COUNT = 4,
} ft_cap_t;

/* "memoryPerGpu", "precision", "interconnect", "nvlinkDomainSize". */
const char *ft_cap_name(ft_cap_t cap);

/* The kinds of allocation unit a demand is served in. */
typedef enum {
	FT_UNIT_GPU = 0,    /* a whole GPU */
	FT_UNIT_MIG = 1,    /* a MIG instance of the demand's profile */
	FT_UNIT_SHARED = 2, /* a shared GPU, serving ranks in replicas */
} ft_unit_kind_t;

#define FT_UNITS_MAX (FT_GPU_MAX + FT_MIG_MAX)

/*
 * One unit of a node as a demand sees it (ft_place_check_units). The unit
 * matches when `faults` is 0.
 */
typedef struct ft_unit_check {
	uint8_t kind;	  /* ft_unit_kind_t */
	uint8_t position; /* GPU position; for FT_UNIT_MIG the instance's */
	uint8_t faults;	  /* bit 1 << ft_cap_t per capability it fails */
	uint8_t replicas_free; /* FT_UNIT_SHARED: replicas not held (0 when
				  a pod holds the GPU whole); else 0 */
	bool free; /* usable now: a whole GPU free (ft_node_free_gpus), an
		      instance not held, a shared GPU with room for one
		      rank of the demand */
} ft_unit_check_t;

/*
 * Every unit of `node` of the kinds that may serve `d`, read as
 * ft_place_units() reads it: whole GPUs for GPUs asked, shared GPUs for
 * ranks, instances of the asked profile for MIG instances (GPUs first, then
 * instances, each in position order), whether it meets the capabilities
 * (by the same test filter, score, choose and victims apply) and whether
 * it is free now. Usage of unknown placement is node-wide and marks no
 * unit. `out` has room for FT_UNITS_MAX; returns the count, 0 without a
 * topology or when `d` asks no GPU, replica or MIG instance.
 */
unsigned ft_place_check_units(ft_unit_check_t *out, const ft_node_t *node,
			      const ft_demand_t *d);

/*
 * Why unit `u` of topology `t` fails capability `cap` of `c`: the value
 * asked and the unit's own, and the words filter uses for it ("memoryPerGpu
 * 40Gi: 10240 MiB"). Values by capability: memory in MiB; precision as
 * ft_precision_t bits (asked: all asked; actual: the product's, 0 when the
 * MIG catalog does not know it); interconnect as ft_interconnect_t (actual
 * nvlink when the unit's NVLink domain holds another GPU, else pcie);
 * nvlinkDomainSize in GPUs. `u` comes from ft_place_check_units() on a node
 * of `t`; `cap` is one it fails.
 */
typedef struct ft_unit_fault {
	ft_cap_t cap;
	uint64_t asked;
	uint64_t actual;
	char reason[128];
} ft_unit_fault_t;

void ft_place_unit_fault(ft_unit_fault_t *out, const ft_topology_t *t,
			 const ft_caps_t *c, const ft_unit_check_t *u,
			 ft_cap_t cap);

/* The level a demand is placed at: its own, with CPU-only demands at numa or
 * looser. */
ft_level_t ft_place_effective_level(const ft_demand_t *d);

/*
 * Does `d` fit `node` now in domain `domain` (an index into the topology's
 * domains), or in some domain of `level`? Both include the node-wide check
 * of usage of unknown placement, read `d` as ft_place_adapt() does and
 * count only units that meet its capabilities. False without a topology.
 */
bool ft_place_fits_domain(const ft_node_t *node, const ft_demand_t *d,
			  unsigned domain);
bool ft_place_fits_level(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level);

/*
 * Free units of one domain for a demand, or a domain's capacity when usage
 * is ignored: whole GPUs meeting the demand (none for a demand of ranks),
 * ranks of a shared demand that fit (one per shared GPU with a fraction,
 * else free replicas), instances of its MIG profile, CPUs and memory (MiB)
 * of the domain's NUMA nodes; memory_unknown when one of them has memory
 * the topology does not know.
 */
typedef struct ft_room {
	uint32_t gpus, mig, cpus;
	uint32_t shared;
	uint64_t memory_mib;
	bool memory_unknown;
} ft_room_t;

/*
 * The rooms ft_place_fits_domain() compares with the demand: domain `domain`
 * of `node` (topology present) in `domain_out`, and the whole node less the
 * usage of unknown placement in `node_out`, for the demand and units of `u`
 * (ft_place_units on the node's topology). The demand fits the domain now
 * exactly when ft_place_room_fits() holds for both. For a search that asks
 * many times about one demand (victims.h).
 */
void ft_place_rooms(ft_room_t *domain_out, ft_room_t *node_out,
		    const ft_node_t *node, const ft_units_t *u,
		    unsigned domain);

/*
 * Does room `r` hold demand `d`: enough GPUs, ranks, instances and CPUs, and
 * with pinned CPUs enough memory unless it is unknown?
 */
bool ft_place_room_fits(const ft_room_t *r, const ft_demand_t *d);

/*
 * Decide whether `d` fits `node` now. Never fails. A node without topology
 * passes a pod that asks neither an affinity nor capabilities, and is
 * unresolvable for the others.
 */
void ft_place_filter(ft_verdict_t *out, const ft_node_t *node,
		     const ft_demand_t *d);

/*
 * ft_place_filter() through the node's filter memo (cluster.h): the verdict
 * last worked out on `node` for a demand equal to `d` (the same key, or for
 * a demand without one, the same bytes), else worked out and remembered
 * (the oldest of FT_FILTER_MEMO is replaced). The same verdict as
 * ft_place_filter() always; a node without a memo, or whose memo another
 * thread holds, is worked out without it. A keyed lookup that finds a fit
 * reads one cache line of the memo. Thread-safe.
 */
void ft_place_filter_memo(ft_verdict_t *out, const ft_node_t *node,
			  const ft_demand_t *d);

/*
 * For node `i` of a sweep over `nodes` (n of them, NULL ones allowed), ask
 * the processor for what filter and rank read first some nodes ahead: the
 * record of the node 2 x FT_PREFETCH_AHEAD ahead, and the first lines of the
 * filter memo and fragmentation cache (cluster.h) of the node
 * FT_PREFETCH_AHEAD ahead, whose record is there by then. The misses of
 * several nodes then overlap instead of coming one node at a time. A hint
 * that changes no result and takes no lock.
 */
#define FT_PREFETCH_AHEAD 8
void ft_place_prefetch_ahead(const ft_node_t *const *nodes, unsigned n,
			     unsigned i);

/*
 * Demand keys (ft_demand_t.key): each distinct demand seen gets a key of
 * its own, and an equal demand seen later the same key, so that a sweep
 * over thousands of filter memos compares 8 bytes per node where it
 * compared the whole demand. Keys come from one counter for the whole
 * process and are never given twice; a table that holds FT_DEMAND_KEYS
 * demands starts over empty, after which the demands it held get new keys
 * (their memo entries then simply miss). The table is a cache: out of
 * memory, a demand is left without a key (0), which the memo compares by
 * its bytes.
 */
#define FT_DEMAND_KEYS 1024
typedef struct ft_demand_keys ft_demand_keys_t;

/* A table (FT_ENOMEM) and its free (NULL is fine). */
int ft_demand_keys_new(ft_demand_keys_t **out);
void ft_demand_keys_free(ft_demand_keys_t *keys);

/*
 * Set d->key: the key of a demand equal to `d` (its bytes, with the key
 * left out) seen before, else a new one. Call it once the demand is final;
 * a demand changed after must drop its key (0). Thread-safe.
 */
void ft_demand_key(ft_demand_keys_t *keys, ft_demand_t *d);

/*
 * A filter memo for ft_node_build() (NULL when out of memory), its free, and
 * its size in bytes (ft_node_footprint).
 */
ft_filter_memo_t *ft_filter_memo_new(void);
void ft_filter_memo_free(ft_filter_memo_t *memo);
size_t ft_filter_memo_size(void);

/*
 * Score 0..10 (kube-scheduler's MinExtenderPriority..MaxExtenderPriority,
 * k8s.io/kube-scheduler/extender/v1/types.go): up to 8 points for the
 * affinity level reachable (8 at the requested level, 2 less per looser
 * level), up to 2 for the policy (packed: fuller nodes; distributed: emptier
 * nodes), counting only the units of the demand's kind that meet its
 * capabilities. `policy` is the configured one; the demand's own wins.
 * 0 for a node without topology or without room.
 */
int ft_place_score(const ft_node_t *node, const ft_demand_t *d,
		   ft_policy_t policy);

/*
 * The affinity part of ft_place_score() alone: 8 at the requested level, 2
 * less per looser level, not below 0; 8 for a demand with neither devices
 * nor an affinity (on any node); -1 without topology or room.
 */
int ft_place_level_points(const ft_node_t *node, const ft_demand_t *d);

/*
 * ft_place_level_points() where `d` fits `node` now (ft_place_filter()'s
 * FT_FIT), else -1: through the node's filter memo, as
 * ft_place_filter_memo() gives the verdict, the points kept beside the
 * verdict of a demand equal to `d`, byte for byte (an entry is added, its
 * verdict worked out, when there is none). Prioritize asks it for every
 * node kube-scheduler sends: a node where the pod does not fit is answered
 * from the verdict, without trying a placement. Thread-safe.
 */
int ft_place_fit_points_memo(const ft_node_t *node, const ft_demand_t *d);

/*
 * Choose the exact units for `d` on `node` under `policy` (the configured
 * one; the demand's own wins). FT_ENOTFOUND with a message when no placement
 * is acceptable under the demand's mode; FT_EINVAL when the node has no
 * topology.
 */
int ft_place_choose(ft_placement_t *out, const ft_node_t *node,
		    const ft_demand_t *d, ft_policy_t policy);

/*
 * A placement whose GPUs and MIG instances are given (the DRA allocator
 * chose them: dra.h): the pod's pinned CPUs and memory near them, in the
 * tightest domain of its levels (its own only, in guaranteed mode) that
 * holds all the given units, CPUs of their NUMA nodes first. FT_ENOTFOUND
 * with a message naming the level when no domain has room; FT_EINVAL
 * without a topology.
 */
int ft_place_choose_near(ft_placement_t *out, const ft_node_t *node,
			 const ft_demand_t *d, uint16_t gpus,
			 const ft_mig_mask_t mig, ft_policy_t policy);

/*
 * The levels (bit L for level L) at which one domain holds all of `gpus` and
 * `numa_nodes`. Levels are not nested: an NVLink group may span NUMA nodes.
 */
uint8_t ft_place_levels_of(const ft_topology_t *t, uint16_t gpus,
			   uint16_t numa_nodes);

/* The first level at or after `from` set in `levels`; FT_LEVEL_NODE if none. */
ft_level_t ft_place_first_level(uint8_t levels, ft_level_t from);

#endif
