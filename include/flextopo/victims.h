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
 * branch and bound over the pods holding units in that domain, pruned by the
 * best cost so far and by "even evicting every remaining candidate would not
 * be enough". Pure: no I/O, no clock.
 */
#ifndef FLEXTOPO_VICTIMS_H
#define FLEXTOPO_VICTIMS_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "place.h"

#define FT_VICTIM_MAX  64 /* holdings considered per node */
#define FT_PDB_MAX     32 /* PodDisruptionBudgets per node search */
#define FT_PDB_PER_POD 4  /* budgets one pod may match */

/*
 * The PodDisruptionBudgets that cover the pods of one node, as kube-scheduler
 * counts violations (default_preemption.go, filterPodsWithPDBViolation):
 * evicting a pod spends one disruption of every budget it matches; a pod
 * whose eviction takes any of them below zero is one violation.
 */
typedef struct ft_pdb_view {
	unsigned n_budgets;
	int32_t allowed[FT_PDB_MAX]; /* status.disruptionsAllowed */
	uint8_t n_of[FT_VICTIM_MAX]; /* per holding: budgets matched */
	uint8_t of[FT_VICTIM_MAX][FT_PDB_PER_POD];
} ft_pdb_view_t;
#define FT_VICTIM_EXACT_MAX 64 /* candidates per domain searched exactly */

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
	bool exact;	  /* false when a domain had too many candidates */
	ft_level_t level; /* level the preemptor reaches after eviction */
	unsigned n;
	uint16_t holdings[FT_VICTIM_MAX]; /* indexes into node->holdings, by
					     descending priority */
	ft_victim_cost_t cost;
} ft_victim_set_t;

/* <0 when `a` is cheaper than `b`, 0 when equal, >0 otherwise. */
int ft_victims_compare(const ft_victim_cost_t *a, const ft_victim_cost_t *b);

/* The cost of evicting holdings `idx[0..n)` of `node` (`pdb` may be NULL). */
void ft_victims_cost(ft_victim_cost_t *out, const ft_node_t *node,
		     const uint16_t *idx, unsigned n, const ft_pdb_view_t *pdb);

/*
 * Would `d` fit on `node` at `level` if the holdings in `idx` were gone?
 * (`level` FT_LEVEL_NODE checks counts only.)
 */
bool ft_victims_feasible(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level, const uint16_t *idx, unsigned n);

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

#endif
