/*
 * GPU fragmentation of a node, after Weng et al., "Beware of Fragmentation:
 * Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
 * (USENIX ATC '23), and its use in scoring.
 *
 * FGD's measure. The fragmentation of node n for a pod class m, F_n(m), is
 * the free GPU capacity of n that m cannot use: all of it when m does not fit
 * n at all, else the free capacity of the units m could not take. The
 * node's fragmentation is its expectation over the recent workload mix,
 * F_n = sum over classes m of p(m) x F_n(m), and FGD places a pod where
 * F_n grows least. FGD's p(m) is how often m's pods come; flextopo weighs
 * a class that asks a fraction f of a GPU by its pods per GPU as well,
 * p(m) proportional to pods x 1 / f (its mass, FT_MASS_ONE per pod of a GPU
 * or more). Weighed by pods alone, the measure is ruled by the whole-GPU
 * pods, for which every partly used GPU's free share is a fragment that any
 * fill shrinks alike, so which gap a fractional pod fills, and the sliver it
 * leaves, hardly counts. Weighed by mass, the slivers that the common
 * fractions cannot use do. On the openb trace this left 0.09 points less
 * GPU capacity unallocated at 100 % arrived on the default variant (0.11
 * over 20 seeds), 0.18 on multigpu50 and 0.30 on gpuspec33, and the same
 * on gpushare100 (docs/bench-history.md, "Fractional classes weighed by their
 * pods per GPU"). flextopo adds topology to "could take": a unit is usable by
 * m only when it meets m's capabilities and lies in a domain of m's affinity
 * level where m fits now (ft_place_usable). So a GPU without a
 * free NVLink peer is a fragment for pods asking for an NVLink pair, and a
 * 1-GPU pod that takes one GPU of the last free pair raises F_n while one that
 * takes an unpaired GPU lowers it (NVIDIA/k8s-device-plugin #1193).
 * "Does not fit" counts CPU and memory as FGD does: the pods of a class
 * differ in what they request, so F_n(m) averages over the class's points
 * (ft_mix_t): all the free capacity for a point whose CPU or memory the
 * node's unrequested room cannot hold (ft_node_free_cpu_millis), else what
 * the class's units cannot take. For ranking, each point may also weigh by
 * how few nodes could take it (ft_mix_weigh): FGD's measure is local to a
 * node and would spend the last nodes able to take a rare large pod on pods
 * that fit anywhere.
 *
 * Units: capacity is in milli-GPU: a whole GPU is 1000, a MIG memory slice
 * 1000 / 8 = 125 (FT_MIG_SLICES, NVIDIA MIG user guide), a replica of a
 * GPU shared into r replicas 1000 / r (rounded down).
 *
 * The workload mix (ft_mix_t) is a window of the last `window` pods placed,
 * grouped into at most FT_MIX_CLASSES classes by what they ask of GPUs and
 * where they may run (nodeSelector, node affinity and tolerations:
 * ft_mix_add). The nodes a class may use are those whose labels and taints
 * its rules admit, as kube-scheduler's NodeAffinity and TaintToleration
 * filters decide (noderules.h); a GPU model name read out of a label value
 * (demand.gpu_products) is a hint that never narrows them, since a label
 * value need not be the topology's model name. Pods asking for no GPU, MIG
 * instance or replica are not part of it: they cannot use GPU capacity, so
 * they would count every free GPU as fragment on every node alike.
 *
 * All of it is pure: no I/O, no allocation. Two exceptions to the model's
 * immutability, both invisible in results: each node keeps a cache of what
 * the classes of a mix could use there and of the shapes weighed there
 * (ft_node_frag_t, cluster.h), guarded by a try-lock; and mix classes get
 * generations from one process-wide atomic counter, so that a cache never
 * mistakes one mix's class for another's.
 */
#ifndef FLEXTOPO_FRAG_H
#define FLEXTOPO_FRAG_H

#include <stdint.h>

#include "cluster.h"
#include "policy.h"
#include "place.h"

#define FT_MIX_CLASSES	     16
#define FT_MIX_WINDOW_MAX    4096 /* pods a mix remembers, at most */
#define FT_MIX_POINTS	     8	  /* pods standing for a class's requests */
#define FT_MIX_SAMPLES	     64	  /* pods a class's points are drawn from */
#define FT_WEIGHT_ONE	     16	  /* a point's weight of 1 (ft_mix_t) */
#define FT_WEIGHT_FROM	     4	  /* scarcity below which a point weighs 1 */
#define FT_WEIGHT_FROM_BOUND 2	  /* the same for a bound class */
#define FT_WEIGHT_MAX	     64	  /* the most a point weighs */
#define FT_WEIGH_NODES	     256  /* nodes ft_mix_weigh() looks at, at most */
#define FT_MASS_ONE	     1000 /* a class's mass per pod of a GPU or more */

typedef struct ft_mix {
	unsigned window;    /* pods remembered; 0 turns the mix off */
	unsigned n_classes; /* classes in use (some may count 0) */
	ft_demand_t classes[FT_MIX_CLASSES]; /* class keys (frag.c, class_of) */
	/* Where each class may run: with its key, what tells classes apart */
	ft_node_rules_t class_rules[FT_MIX_CLASSES];
	/* Bound (ft_mix_weigh): some node looked at is not one the class may
	 * run on, by its node rules */
	bool class_bound[FT_MIX_CLASSES];
	uint32_t counts[FT_MIX_CLASSES];      /* pods of each in the window */
	uint32_t generations[FT_MIX_CLASSES]; /* unique in the process and
						 never 0, set whenever a slot
						 gets a class: the key of the
						 node cache */
	uint32_t total;			      /* sum of counts */
	/*
	 * The requests of each class's last FT_MIX_SAMPLES pods, in the window
	 * or not, for as long as the class keeps its slot (ft_mix_add):
	 * millicores (pinned CPUs count 1000 each) and MiB. A class
	 * seen a few times in the window would otherwise lose its rare large
	 * requests, which the nodes able to take them must be kept for.
	 */
	uint8_t n_samples[FT_MIX_CLASSES]; /* samples kept, to FT_MIX_SAMPLES */
	uint8_t sample_head[FT_MIX_CLASSES]; /* next sample slot */
	uint32_t sample_cpu_millis[FT_MIX_CLASSES][FT_MIX_SAMPLES];
	uint32_t sample_memory_mib[FT_MIX_CLASSES][FT_MIX_SAMPLES];
	/*
	 * The samples as up to FT_MIX_POINTS points, in CPU order: each
	 * distinct sample standing for its copies (point_share) when there
	 * are at most FT_MIX_POINTS, else samples at evenly spaced quantiles
	 * of CPU standing for one share each. point_weight, in 1/FT_WEIGHT_ONE,
	 * is how scarce the nodes are that could take the point
	 * (ft_mix_weigh); FT_WEIGHT_ONE until weighed.
	 */
	uint8_t n_points[FT_MIX_CLASSES];
	uint32_t point_cpu_millis[FT_MIX_CLASSES][FT_MIX_POINTS];
	uint32_t point_memory_mib[FT_MIX_CLASSES][FT_MIX_POINTS];
	uint8_t point_share[FT_MIX_CLASSES][FT_MIX_POINTS];
	uint16_t point_weight[FT_MIX_CLASSES][FT_MIX_POINTS];
	uint32_t class_weight[FT_MIX_CLASSES]; /* sum of share x weight */
	uint8_t class_shares[FT_MIX_CLASSES];  /* sum of shares */
	unsigned head;			       /* next ring slot */
	uint8_t ring[FT_MIX_WINDOW_MAX]; /* class of each pod; 0xff: none */
} ft_mix_t;

/* An empty mix of `window` pods (clamped to FT_MIX_WINDOW_MAX). */
void ft_mix_init(ft_mix_t *mix, unsigned window);

/*
 * Count a placed pod of demand `d` and node rules `rules` (its nodeSelector,
 * node affinity and tolerations, noderules.h; NULL: none). Its class is its
 * class key (its GPU shape, affinity, mode, capabilities and GPU models) with
 * its rules, equal when written alike in the same order (the pods of one
 * controller are). The oldest pod leaves a full window. A new class when all
 * FT_MIX_CLASSES are in use replaces the one with the fewest pods, whose pods
 * leave the window. A demand asking no GPU unit, or a mix with window 0, is
 * ignored. The points of the class the pod joins, and of the class of the pod
 * leaving the window, are worked out again from the window.
 */
void ft_mix_add(ft_mix_t *mix, const ft_demand_t *d,
		const ft_node_rules_t *rules);

/*
 * Weigh each point of `mix` by how scarce the nodes are that could take it
 * now, among the `n` nodes of one request (those with topology; at most
 * FT_WEIGH_NODES of them, evenly spread, are looked at): nodes looked at /
 * nodes where the class's rules admit the node (noderules.h), its units are
 * usable (ft_place_usable) and the point's CPU and memory fit, clamped to
 * FT_WEIGHT_MAX; 1 below FT_WEIGHT_FROM (FT_WEIGHT_FROM_BOUND for a bound
 * class), and 1 when no node could take it (none is left to keep). A class
 * is bound (class_bound) when its node rules rule out some node looked at:
 * a nodeSelector that every candidate meets (a label all GPU nodes carry,
 * or a GPU model every candidate has) binds nothing.
 *
 * FGD weighs a typical pod only by how often it comes, so a pod shape that
 * few nodes can hold counts for as little as it is frequent, and the last
 * such nodes go to pods that fit anywhere (the openb trace's 120-CPU 8-GPU
 * pods fit only 39 of its 1,213 nodes: docs/bench-history.md, "flextopo on
 * the trace"). Weighed, spending such a node costs in proportion to how few
 * are left. Scarcities below
 * FT_WEIGHT_FROM stay at 1: weighing them cost the default openb trace
 * placement quality and protects nothing scarce. A class bound to GPU
 * models (by a node affinity on their label) is weighed from
 * FT_WEIGHT_FROM_BOUND: its hosts are the nodes of its models, which do
 * not grow as others fill, and a model can be short
 * although a third of the nodes have it (openb's gpuspec33: 404 of 1,213
 * nodes are T4 nodes, 13.5 % of the GPUs, for 16 % of the pods, which may
 * use only T4; weighing those pods' points from 2 instead of 4 left 0.42
 * points less GPU capacity unallocated at 100 % arrived,
 * docs/bench-history.md, "flextopo on the trace").
 * So is a class whose node rules rule out some of the nodes (a node pool,
 * a zone, a taint), for the same reason.
 */
void ft_mix_weigh(ft_mix_t *mix, const ft_node_t *const *nodes, unsigned n);

/* GPU capacity of a node and how it is broken up. */
typedef struct ft_frag {
	uint32_t free_milli; /* free GPU capacity: free whole GPUs, free MIG
				instances and uncovered MIG slices, free
				replicas */
	uint32_t fragmentation_milli; /* FGD's F_n under the mix (0 with an
					 empty mix) */
	uint16_t whole_gpus_free;     /* ft_node_free_gpus() */
	uint8_t largest_block[FT_LEVEL_COUNT]; /* most free whole GPUs in one
						  domain of each level */
	uint16_t mig_slices_free;     /* memory slices of free instances and
					 slices no instance covers */
	uint16_t mig_slices_stranded; /* of those: slices no instance covers,
					 plus those of free instances no class
					 of the mix could take now */
	uint16_t replicas_free;	      /* free replicas of shared GPUs */
} ft_frag_t;

/* The most free whole GPUs inside one domain of each level (FT_LEVEL_COUNT
 * entries); all 0 without topology. */
void ft_frag_largest_blocks(uint8_t *out, const ft_node_t *node);

/* Measure `node` under `mix` (may be NULL or empty). A node without
 * topology measures all zero. */
void ft_frag_measure(ft_frag_t *out, const ft_node_t *node,
		     const ft_mix_t *mix);

/* F_n(m) of `node` for the one demand `m` (its own requests), milli-GPU. */
uint32_t ft_frag_of(const ft_node_t *node, const ft_demand_t *m);

/*
 * How F_n under `mix` changes when `d` is placed on `node` as
 * ft_place_choose() would place it under `policy`: F after minus F before,
 * milli-GPU (negative when the pod takes capacity that was fragment), plus
 * what the placement takes from classes bound to nodes by label (a GPU
 * model's label, a node pool): for each point
 * of such a class, the capacity it could use before and cannot after (its
 * GPUs taken, or the CPU or memory it needs), times how far its scarcity
 * weight exceeds 1, averaged over the mix (0 until ft_mix_weigh() finds
 * such a point scarce). FGD counts what a placement strands, not what it
 * takes, so a pod that may run anywhere would otherwise take the GPUs that
 * a model's bound pods need at no cost: on openb's gpuspec33 this term left
 * 0.30 points less GPU capacity unallocated at 100 % arrived
 * (docs/bench-history.md, "flextopo on the trace").
 * FT_ENOTFOUND when there is no placement; FT_EINVAL without topology.
 */
int ft_frag_delta(int64_t *out, const ft_node_t *node, const ft_demand_t *d,
		  ft_policy_t policy, const ft_mix_t *mix);

/* The highest extender score: MaxExtenderPriority,
 * k8s.io/kube-scheduler/extender/v1/types.go. */
#define FT_EXTENDER_SCORE_MAX 10

/* The rank of a node where the pod cannot go (ft_place_rank). */
#define FT_RANK_NONE INT64_C(-1)

/*
 * How good a node is for `d`, finely, to rank the nodes of one prioritize
 * request: larger is better, FT_RANK_NONE where filter would not pass it
 * (ft_place_filter: no room now) or without (but see below) topology. Three
 * parts, each deciding only between nodes equal in the ones before:
 *   1. the affinity level reachable (ft_place_fit_points_memo);
 *   2. the fragmentation the placement adds under `mix`, and what it takes
 *      from scarce classes bound to nodes by label, in milli-GPU
 *      (ft_frag_delta; the less the better), its points weighed as the
 *      caller weighed them (prioritize: ft_mix_weigh over the request's
 *      nodes). It counts CPU and memory: a pod that takes the CPU a node's
 *      free GPUs need strands them, so CPU-only pods are ranked by it too;
 *   3. the policy (the demand's own wins over `policy`): packed ranks the
 *      node with less free GPU capacity (milli-GPU), then fewer unrequested
 *      CPUs, higher; distributed the opposite.
 * Nothing is rounded, so that nodes tie only when they are alike. A node
 * without topology ranks for a pod asking neither devices nor an affinity
 * as one where it strands nothing and no GPU or CPU is left: CPU-only pods
 * go to the nodes flextopo does not model before they strand GPUs.
 * The parts that depend on the node alone come from its memos (the filter
 * memo's verdict and level points, the fragmentation cache's room and
 * placements), so a node unchanged since the last pod of the same shape
 * costs a few cache lines.
 */
int64_t ft_place_rank(const ft_node_t *node, const ft_demand_t *d,
		      ft_policy_t policy, const ft_mix_t *mix);

/*
 * ft_place_rank() of each of the `n` nodes (NULL ones rank FT_RANK_NONE)
 * into ranks[i], the same values, asking for each node's caches ahead of
 * the sweep (ft_place_prefetch_ahead, place.h).
 */
void ft_place_rank_all(int64_t *ranks, const ft_node_t *const *nodes,
		       unsigned n, const ft_demand_t *d, ft_policy_t policy,
		       const ft_mix_t *mix);

/*
 * Map the ranks of the `n` nodes of one request onto 0..max (10 for an
 * extender, MaxExtenderPriority in k8s.io/kube-scheduler/extender/v1): the
 * nodes of the highest rank get `max`, every other node less, linearly
 * between the lowest rank (0) and the highest, so that the best node is
 * unique whenever the ranks differ (kube-scheduler's own score plugins
 * normalise per cycle alike, pkg/scheduler/framework/plugins/helper/
 * normalize_score.go). FT_RANK_NONE gets 0.
 */
void ft_scores_of_ranks(int *out, const int64_t *ranks, unsigned n, int max);

#endif
