/*
 * Kubernetes label selectors (metav1.LabelSelector: matchLabels and
 * matchExpressions with In, NotIn, Exists, DoesNotExist), as
 * PodDisruptionBudgets use them (k8s.io/apimachinery/pkg/apis/meta/v1,
 * LabelSelectorAsSelector). Labels are a flat array of "key=value"
 * strings. Pure; owns its strings.
 */
#ifndef FLEXTOPO_SELECTOR_H
#define FLEXTOPO_SELECTOR_H

#include <stdbool.h>

typedef enum {
	FT_SEL_IN = 0,
	FT_SEL_NOT_IN = 1,
	FT_SEL_EXISTS = 2,
	FT_SEL_DOES_NOT_EXIST = 3,
} ft_selector_op_t;

typedef struct ft_selector_req {
	char *key;
	ft_selector_op_t op;
	unsigned n_values;
	char **values;
} ft_selector_req_t;

typedef struct ft_selector {
	bool nothing;	 /* a null selector matches no pod */
	unsigned n_reqs; /* all must hold; none: matches every pod */
	ft_selector_req_t *reqs;
} ft_selector_t;

/* Does a pod with `labels` ("key=value", n of them) match? */
bool ft_selector_matches(const ft_selector_t *s, char *const *labels,
			 unsigned n);

#endif
