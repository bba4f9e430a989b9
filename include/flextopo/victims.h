/*
 * Victim search for preemption: the cheapest set of lower-priority pods on a
 * node whose removal, with what is already free, gives the preemptor a
 * placement at its affinity level (the idea of "Topology-aware Preemptive
 * Scheduling for Co-located LLM Workloads", arXiv 2411.11560).
 *
 * Cost order is kube-scheduler's for preemption candidates
 * (pkg/scheduler/framework/preemption/preemption.go, pickOneNodeForPreemption):
 *   1. fewest PodDisruptionBudget violations,
 *   2. lowest highest victim priority,
 *   3. smallest sum of victim priorities (each shifted by 2^31, as upstream,
 *      so that the sum only grows with the set),
 *   4. fewest victims,
 *   5. latest earliest start time among the highest-priority victims.
 *
 * The search is exact: per affinity domain that could host the preemptor, a
 * branch and bound over the pods holding units in that domain. It prunes a
 * branch by a lower bound on the cost of any set that completes it (how many
 * more pods the shortest resource still needs, knapsack-style, and the
 * cheapest priorities that many pods can have), by the start times that
 * decide ties, and by symmetry between pods of the same priority that free
 * the same amounts. A pod that two holdings claim (a conflict, cluster.h) is
 * freed only when both go. Pure: no I/O, no clock.
 *
 * Gangs (ft_gang_view_t below) change what a set costs, not the search's
 * shape: a set that breaks a gang disrupts every running member of it, on
 * any node, and the cost keys above are taken over the disrupted pods. A
 * broken gang is one decision of the search, not one per member.
 */
#ifndef FLEXTOPO_VICTIMS_H
#define FLEXTOPO_VICTIMS_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "pdb.h"
#include "place.h"

/*
 * Pods per node the search considers: kubelet's maxPods defaults to 110
 * (k8s.io/kubelet/config/v1beta1, KubeletConfiguration.MaxPods) and managed
 * platforms allow up to 256 (GKE's maximum pods per node). On a node with
 * more candidates the cheapest FT_VICTIM_MAX are searched and the answer is
 * reported as not exact (FT_VICTIM_TOO_MANY_PODS).
 */
#define FT_VICTIM_MAX  256
#define FT_PDB_MAX     64 /* PodDisruptionBudgets per node search */
#define FT_PDB_PER_POD 8  /* budgets one pod may match */

/*
 * The PodDisruptionBudgets that cover the pods of one node, as kube-scheduler
 * counts violations (pkg/scheduler/framework/plugins/defaultpreemption/
 * default_preemption.go, filterPodsWithPDBViolation): evicting a pod spends
 * one disruption of every budget it matches; a pod whose eviction takes any
 * of them below zero is one violation. As there, a budget with an empty or
 * null selector and a pod without labels match nothing (ft_pdb_counts).
 * Holding `i` of the node matches budgets of[i][0..n_of[i])
 * (i < FT_VICTIM_MAX).
 */
typedef struct ft_pdb_view {
	unsigned n_budgets;
	/*
	 * Some matches were left out: more than FT_PDB_MAX budgets, a pod
	 * matching more than FT_PDB_PER_POD, or a budget on a holding past
	 * FT_VICTIM_MAX. The search then reports FT_VICTIM_PDB_LIMIT.
	 */
	bool truncated;
	int32_t allowed[FT_PDB_MAX];	    /* status.disruptionsAllowed */
	const ft_pdb_t *budget[FT_PDB_MAX]; /* which, borrowed: for building */
	uint8_t n_of[FT_VICTIM_MAX];	    /* per holding: budgets matched */
	uint8_t of[FT_VICTIM_MAX][FT_PDB_PER_POD];
} ft_pdb_view_t;

/*
 * The view of `node`'s holdings against `budgets` (n of them, borrowed):
 * `pods[i]` is the pod of holding i, NULL when unknown (it matches none).
 * Matched with ft_pdb_counts() (pdb.h).
 */
void ft_victims_pdb_view(ft_pdb_view_t *out, const ft_node_t *node,
			 const ft_pod_t *const *pods,
			 const ft_pdb_t *const *budgets, unsigned n_budgets);

/*
 * The budgets of `budgets` that `pod`, a gang member on another node,
 * matches, added to `view` where it lacks them: their indexes into `out`
 * (room for FT_PDB_PER_POD, ft_gang_remote_t.budgets), their count
 * returned. Sets view->truncated when some do not fit. Call while the
 * budgets the view borrows live.
 */
unsigned ft_victims_pdb_view_match(ft_pdb_view_t *view, uint8_t *out,
				   const ft_pod_t *pod,
				   const ft_pdb_t *const *budgets,
				   unsigned n_budgets);

/* Why a search is not exact; the first reason met is kept. */
typedef enum {
	FT_VICTIM_EXACT = 0,
	FT_VICTIM_TOO_MANY_PODS = 1, /* more candidates than FT_VICTIM_MAX */
	FT_VICTIM_VISIT_LIMIT = 2,   /* FT_VICTIM_VISITS ran out: the best set
					found by then stands */
	FT_VICTIM_PDB_LIMIT = 3,     /* ft_pdb_view_t.truncated */
	FT_VICTIM_GANG_LIMIT = 4,    /* ft_gang_view_t.truncated */
	FT_VICTIM_NO_MEMORY = 5,     /* the search's state could not be
					allocated: the best set found by then
					stands, often none */
	FT_VICTIM_FALLBACKS = 6,
} ft_victim_fallback_t;

/*
 * "exact", "too-many-pods", "visit-limit", "pdb-limit", "gang-limit",
 * "out-of-memory".
 */
const char *ft_victim_fallback_name(ft_victim_fallback_t f);

/*
 * Branch-and-bound nodes visited per node search before the best set so far
 * stands: a guard against pathological nodes, not a bound that decides
 * (bench/README.md, "Victim search", measures visits on crowded nodes).
 */
#define FT_VICTIM_VISITS 200000

/*
 * Gangs: pods that start and die together (a Workload API PodGroup, a
 * coscheduling PodGroup, or a group named only by a label; DESIGN.md, "Gangs:
 * one cost model, two searches"). A victim set breaks a gang when it evicts
 *   - any member of a `whole` gang: disruptionMode PodGroup
 *     (scheduling.k8s.io/v1alpha2 PodGroupSpec.DisruptionMode), or a gang
 *     with no minimum, which runs all or nothing; or
 *   - more than `slack` members of any other: the running members would
 *     fall below the minimum (gang.minCount, or coscheduling's minMember).
 * A broken gang disrupts every running member, on any node. Its members on
 * the searched node are freed with the set at no further cost, and named
 * among the holdings to evict; its members elsewhere free nothing here but
 * are costed as victims. A gang with a member of the preemptor's priority
 * or above, here or elsewhere, is never broken: that member is no victim.
 * Members evicted one by one, within the slack, are pods like any other.
 */
#define FT_GANG_MAX	   FT_VICTIM_MAX /* gangs in one node search */
#define FT_GANG_REMOTE_MAX 1024		 /* members elsewhere, all gangs */

/* A running member of a gang on another node: what it costs when evicted. */
typedef struct ft_gang_remote {
	int32_t priority;
	int64_t start_time;
	uint8_t n_budgets;		 /* budgets it matches, at most */
	uint8_t budgets[FT_PDB_PER_POD]; /* indexes into ft_pdb_view_t */
} ft_gang_remote_t;

typedef struct ft_victim_gang {
	bool whole;	/* any eviction breaks it */
	uint32_t slack; /* otherwise: members that may go one by one */
	/* Its members on other nodes: ft_gang_view_t.remote[first, +n). */
	uint32_t first_remote;
	uint32_t n_remote;
} ft_victim_gang_t;

/*
 * The gangs of one node's holdings. Holding `i` (i < FT_VICTIM_MAX) belongs
 * to gangs[of[i] - 1], or to none when of[i] is 0. Built by the front end
 * from its gang table; the search only reads it. Budgets of members
 * elsewhere index the ft_pdb_view_t passed with it.
 */
typedef struct ft_gang_view {
	unsigned n_gangs;
	/*
	 * Some members elsewhere were left out (more than FT_GANG_REMOTE_MAX,
	 * or more budgets than the view holds): the search reports
	 * FT_VICTIM_GANG_LIMIT.
	 */
	bool truncated;
	uint16_t of[FT_VICTIM_MAX];
	ft_victim_gang_t gangs[FT_GANG_MAX];
	unsigned n_remote;
	ft_gang_remote_t remote[FT_GANG_REMOTE_MAX];
} ft_gang_view_t;

typedef struct ft_victim_cost {
	unsigned pdb_violations;
	int32_t max_priority; /* INT32_MIN for the empty set */
	int64_t priority_sum; /* sum of (priority + 2^31) */
	unsigned count;
	int64_t
	    earliest_top_start; /* earliest start among max-priority victims */
} ft_victim_cost_t;

typedef struct ft_victim_set {
	bool found;
	bool exact; /* the set is the cheapest: fallback is FT_VICTIM_EXACT */
	ft_victim_fallback_t fallback;
	unsigned long visits; /* branch-and-bound nodes visited */
	ft_level_t level;     /* level the preemptor reaches after eviction */
	unsigned n;
	uint16_t holdings[FT_VICTIM_MAX]; /* indexes into node->holdings, by
					     descending priority; with the
					     members here of broken gangs */
	/*
	 * Over the disrupted pods: the holdings above and the members
	 * elsewhere of the broken gangs (cost.count counts both).
	 */
	ft_victim_cost_t cost;
	unsigned n_broken;
	uint16_t broken[FT_GANG_MAX]; /* gangs broken, ascending */
} ft_victim_set_t;

/* <0 when `a` is cheaper than `b`, 0 when equal, >0 otherwise. */
int ft_victims_compare(const ft_victim_cost_t *a, const ft_victim_cost_t *b);

/*
 * The cost of evicting holdings `idx[0..n)` of `node` (`pdb` may be NULL).
 * Budgets are spent in kube-scheduler's order of victims (higher priority
 * first, then the earlier start: pkg/scheduler/util/utils.go,
 * MoreImportantPod), so the violations are a function of the set and never
 * fall when a pod is added.
 */
void ft_victims_cost(ft_victim_cost_t *out, const ft_node_t *node,
		     const uint16_t *idx, unsigned n, const ft_pdb_view_t *pdb);

/*
 * The same with `gangs` (NULL: none): the cost over the disrupted pods, the
 * holdings in `idx` and every member of each gang they break. `broken`, when
 * not NULL, gets the gangs broken (room for FT_GANG_MAX), ascending, and
 * `n_broken` their count. Returns false when a pod the set disrupts (a
 * member of a gang it breaks, on any node, or one it evicts) has priority
 * `priority` or above: no preemptor of that priority may choose it.
 */
bool ft_victims_cost_gangs(ft_victim_cost_t *out, uint16_t *broken,
			   unsigned *n_broken, const ft_node_t *node,
			   const uint16_t *idx, unsigned n,
			   const ft_pdb_view_t *pdb,
			   const ft_gang_view_t *gangs, int32_t priority);

/*
 * Would `d` fit on `node` at `level` if the holdings in `idx` were gone?
 * The same answer as ft_place_fits_level() on the node built without those
 * pods: a unit two holdings claim stays held while one of them remains.
 */
bool ft_victims_feasible(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level, const uint16_t *idx, unsigned n);

/*
 * Does holding `h` hold anything the model tracks: a GPU, MIG instance,
 * replica or pinned CPU, known or of unknown placement, or memory charged
 * to NUMA nodes? A pod that holds none (it only requests CPU or memory
 * from the shared pool) is never a candidate of the search.
 */
bool ft_victims_holds_units(const ft_holding_t *h);

/*
 * The holdings to evict on `node`: the search's set, then those of the
 * proposed victims (kube-scheduler's, by uid; n_proposed of them) that hold
 * nothing the model tracks. kube-scheduler proposed those for CPU, memory
 * or pod counts that flextopo does not model, so they stay victims.
 * Proposed uids that are no holding of the node are left to the caller.
 * `out` has room for `cap` (at least set->n); returns the count.
 */
unsigned ft_victims_with_proposed(uint16_t *out, unsigned cap,
				  const ft_node_t *node,
				  const ft_victim_set_t *set,
				  const char *const *proposed,
				  unsigned n_proposed);

/*
 * Search the victims for a preemptor of `priority` with demand `d`. `pdb`,
 * when not NULL, holds the budgets of the node's pods. Guaranteed mode: only
 * sets that give a placement at the demand's level. Best-effort: the cheapest
 * set that frees enough units anywhere on the node, or a cheapest set reaching
 * a tighter level that evicts no more pods and violates no more PDBs than it.
 * out->found is false when no set works (the node should be dropped).
 */
void ft_victims_search(ft_victim_set_t *out, const ft_node_t *node,
		       const ft_demand_t *d, int32_t priority,
		       const ft_pdb_view_t *pdb);

/*
 * The same, costing sets by the gangs they break (`gangs`, NULL: none; see
 * ft_gang_view_t). Still exact: out->exact is false only for the reasons of
 * ft_victim_fallback_t.
 */
void ft_victims_search_gangs(ft_victim_set_t *out, const ft_node_t *node,
			     const ft_demand_t *d, int32_t priority,
			     const ft_pdb_view_t *pdb,
			     const ft_gang_view_t *gangs);

#endif
