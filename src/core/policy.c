/* The names of policy.h's values. */
#include <flextopo/policy.h>

#include <stddef.h>

const char *const ft_affinity_mode_names[] = {"guaranteed", "best-effort",
					      NULL};
const char *const ft_policy_names[] = {"packed", "distributed", NULL};
