/*
 * A PodDisruptionBudget (policy/v1) as preemption needs it: which pods it
 * covers and how many more may be disrupted now (status.disruptionsAllowed;
 * pods already listed in status.disruptedPods do not spend it again), as
 * kube-scheduler's DefaultPreemption reads it.
 */
#ifndef FLEXTOPO_PDB_H
#define FLEXTOPO_PDB_H

#include <stdbool.h>
#include <stdint.h>

#include "selector.h"

typedef struct ft_pdb {
	char *ns;
	char *name;
	ft_selector_t selector;
	int32_t disruptions_allowed;
	unsigned n_disrupted;
	char **disrupted; /* pod names in status.disruptedPods */
} ft_pdb_t;

void ft_pdb_dispose(ft_pdb_t *pdb);

/*
 * Does evicting the pod `ns`/`name` with `labels` ("key=value", n of them)
 * spend a disruption of `pdb`? As kube-scheduler's preemption counts it
 * (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go,
 * filterPodsWithPDBViolation): a pod without labels matches no budget, a
 * budget with an empty or null selector matches no pod, only budgets of the
 * pod's namespace count, and a pod the budget lists in
 * status.disruptedPods spends nothing. (The eviction API reads an empty
 * selector as every pod; preemption deletes its victims instead, and
 * kube-scheduler's count is the one that ranks its candidate nodes.)
 */
bool ft_pdb_counts(const ft_pdb_t *pdb, const char *ns, const char *name,
		   char *const *labels, unsigned n);

#endif
