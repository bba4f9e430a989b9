/*
 * Gangs: pods that start and die together (DESIGN.md, "Gangs: one cost
 * model, two searches"). Where a pod's gang comes from, the PodGroups that
 * give a gang its rules, and how a victim set breaks one (victims.h,
 * ft_victim_gang_t). Pure: no I/O.
 *
 * Sources, in the order a pod is read (the first that names a gang wins):
 *   - the Workload API of Kubernetes v1.36 (alpha; KEP-4671 gang
 *     scheduling, KEP-5710 workload-aware preemption): the pod's
 *     spec.schedulingGroup.podGroupName names a PodGroup of
 *     scheduling.k8s.io/v1alpha2 in its namespace
 *     (k8s.io/api/scheduling/v1alpha2, PodGroupSpec);
 *   - scheduler-plugins' coscheduling: the pod's label
 *     scheduling.x-k8s.io/pod-group names a PodGroup of
 *     scheduling.x-k8s.io/v1alpha1 (sigs.k8s.io/scheduler-plugins,
 *     apis/scheduling/v1alpha1, PodGroupSpec.MinMember);
 *   - a label of the configured keys (gangLabelKeys: LeaderWorkerSet's
 *     group, JobSet's job, Volcano's job by default), read as a gang that
 *     runs all or nothing.
 */
#ifndef FLEXTOPO_GANG_H
#define FLEXTOPO_GANG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
	FT_GANG_NONE = 0,
	FT_GANG_WORKLOAD = 1,	  /* spec.schedulingGroup.podGroupName */
	FT_GANG_COSCHEDULING = 2, /* label scheduling.x-k8s.io/pod-group */
	FT_GANG_LABEL = 3,	  /* a label of gangLabelKeys */
	FT_GANG_SOURCES = 4,
} ft_gang_source_t;

/* The coscheduling label (scheduler-plugins' coscheduling plugin). */
#define FT_GANG_COSCHEDULING_LABEL "scheduling.x-k8s.io/pod-group"

/* "none", "workload", "coscheduling", "label". */
const char *ft_gang_source_name(ft_gang_source_t source);

/* A PodGroup of either API, as the victim search needs it. */
typedef struct ft_pod_group {
	ft_gang_source_t source; /* FT_GANG_WORKLOAD or FT_GANG_COSCHEDULING */
	char *ns;
	char *name;
	/*
	 * Running members the group needs: spec.schedulingPolicy.gang.minCount
	 * (0 under the basic policy, which schedules pods one by one), or
	 * coscheduling's spec.minMember.
	 */
	uint32_t min;
	/* spec.disruptionMode "PodGroup": disrupted as one (Workload API). */
	bool whole;
} ft_pod_group_t;

void ft_pod_group_dispose(ft_pod_group_t *group);

/*
 * How a victim set breaks a gang of `source` with `running` running
 * members: into *whole (any eviction breaks it) and *slack (otherwise, the
 * members that may go one by one). `group` is the PodGroup its pods name,
 * NULL when none is known:
 *   - a label gang, and a coscheduling label without its PodGroup, run all
 *     or nothing: whole;
 *   - disruptionMode PodGroup: whole;
 *   - otherwise the slack is running - min (0 below the minimum).
 * False when the pods are no gang: a Workload API pod naming a PodGroup
 * that does not exist (yet) is its own unit.
 */
bool ft_gang_rules(bool *whole, uint32_t *slack, ft_gang_source_t source,
		   const ft_pod_group_t *group, uint32_t running);

/*
 * One pod's gang as the victim search reads it (the state describes it for
 * the debug API and the preempt verb's Events).
 */
typedef struct ft_gang_describe {
	ft_gang_source_t source; /* FT_GANG_NONE: the pod is no gang's */
	char name[320];		 /* "<namespace>/<name>" */
	bool has_group;		 /* its PodGroup is known */
	bool is_gang;		 /* ft_gang_rules: false, its own unit */
	bool whole;
	uint32_t min;	  /* the PodGroup's minimum (0 without one) */
	uint32_t running; /* members bound and not finished */
	uint32_t members; /* every pod that names it */
	char error[256];  /* why the pod or its PodGroup is ignored */
} ft_gang_describe_t;

/*
 * Is `name` a DNS subdomain (RFC 1123, at most 253 characters), as the name
 * of a PodGroup must be?
 */
bool ft_gang_valid_name(const char *name);

#endif
