/*
 * A PodDisruptionBudget (policy/v1) as preemption needs it: which pods it
 * covers and how many more may be disrupted now (status.disruptionsAllowed;
 * pods already listed in status.disruptedPods do not spend it again), as
 * kube-scheduler's DefaultPreemption reads it.
 */
#ifndef FLEXTOPO_PDB_H
#define FLEXTOPO_PDB_H

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

#endif
