/*
 * How a pod's placement is chosen (core): the affinity mode, which says
 * whether a pod may land looser than its affinity level, and the packing
 * policy, which ranks the placements that meet it. The configuration sets
 * the defaults (config.h); a pod's annotations override them
 * (flextopo.io/affinity-mode, flextopo.io/allocation-policy).
 */
#ifndef FLEXTOPO_POLICY_H
#define FLEXTOPO_POLICY_H

typedef enum {
	FT_MODE_GUARANTEED = 0,	 /* only at the requested level */
	FT_MODE_BEST_EFFORT = 1, /* the tightest level reachable */
} ft_affinity_mode_t;

typedef enum {
	FT_POLICY_PACKED = 0,	   /* fill busy nodes and domains first */
	FT_POLICY_DISTRIBUTED = 1, /* spread over the emptiest */
} ft_policy_t;

/*
 * The names of the values above, by value and NULL-terminated: what the
 * config keys and the pods' annotations say. "best-effort" is spelled as
 * the kubelet's topology manager policy.
 */
extern const char *const ft_affinity_mode_names[];
extern const char *const ft_policy_names[];

#endif
