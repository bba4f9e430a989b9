/*
 * Where a pod may run, apart from what it asks of resources: the rules of
 * kube-scheduler's NodeAffinity and TaintToleration filters, kept so that
 * the fragmentation measure (frag.h) counts a node's free GPUs as usable
 * only for the kinds of pod that may run there.
 *
 * - Node affinity: spec.nodeSelector ANDed with spec.affinity.nodeAffinity.
 *   requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, the
 *   terms ORed and the matchExpressions of a term ANDed
 *   (pkg/scheduler/framework/plugins/nodeaffinity, matching through
 *   k8s.io/component-helpers/scheduling/corev1/nodeaffinity).
 * - Taints of effect NoSchedule and NoExecute, each needing a toleration
 *   (pkg/scheduler/framework/plugins/tainttoleration; a toleration matches
 *   as k8s.io/api/core/v1 Toleration.ToleratesTaint does: an empty effect
 *   matches every effect, Exists with an empty key every taint, Exists any
 *   value, Equal the same value). PreferNoSchedule is not a filter.
 *
 * kube-scheduler applies these rules to the pod it schedules, before
 * flextopo sees the nodes; flextopo applies them only to the other kinds of
 * pod it weighs. Keys and labels are kept as 64-bit FNV-1a hashes.
 *
 * The rules are bounded. What does not fit, and what flextopo does not
 * read (operators Gt and Lt, matchFields), widens them and never narrows
 * them: a requirement left out of a term makes the term hold more nodes, a
 * term that holds every node makes the affinity hold every node, and
 * tolerations beyond the bound tolerate every taint. So a kind of pod is
 * never thought unable to run where it could; at worst it is weighed as it
 * was before these rules were read. Pure.
 */
#ifndef FLEXTOPO_NODERULES_H
#define FLEXTOPO_NODERULES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FT_RULE_REQS_MAX	8  /* requirements, over all terms */
#define FT_RULE_HASHES_MAX	16 /* keys and values of the requirements */
#define FT_RULE_TOLERATIONS_MAX 6
#define FT_RULE_ALL_TERMS	0xff /* a requirement of the nodeSelector */

typedef enum {
	FT_REQ_IN = 1,
	FT_REQ_NOT_IN = 2,
	FT_REQ_EXISTS = 3,
	FT_REQ_DOES_NOT_EXIST = 4,
} ft_req_op_t;

/* Taint effects, as bits; the two that filter. */
#define FT_TAINT_NO_SCHEDULE 1u
#define FT_TAINT_NO_EXECUTE  2u

/*
 * One requirement: hashes[first .. first + n) of its rules are, for In and
 * NotIn, ft_label_hash() of each (key, value); for Exists and
 * DoesNotExist, the one ft_label_key_hash() of its key.
 */
typedef struct ft_node_req {
	uint8_t op;   /* ft_req_op_t */
	uint8_t term; /* its nodeSelectorTerm, or FT_RULE_ALL_TERMS */
	uint8_t first;
	uint8_t n;
} ft_node_req_t;

typedef struct ft_toleration {
	uint64_t hash;	 /* Equal: ft_label_hash(key, value); Exists:
			    ft_label_key_hash(key), or 0 for every key */
	bool exists;	 /* operator Exists */
	uint8_t effects; /* FT_TAINT_* bits it tolerates */
} ft_toleration_t;

/*
 * A pod's rules, part of its demand (cluster.h) and of the workload mix's
 * class keys. Zeroed, it holds on every node that has no taint.
 */
typedef struct ft_node_rules {
	uint8_t n_terms; /* nodeSelectorTerms kept: 0 when the affinity
			    holds every node */
	uint8_t n_reqs;
	uint8_t n_hashes;
	uint8_t n_tolerations;
	bool tolerates_all; /* tolerates every taint */
	ft_node_req_t reqs[FT_RULE_REQS_MAX];
	uint64_t hashes[FT_RULE_HASHES_MAX];
	ft_toleration_t tolerations[FT_RULE_TOLERATIONS_MAX];
} ft_node_rules_t;

/* A NoSchedule or NoExecute taint of a node. */
typedef struct ft_taint {
	uint64_t key;	/* ft_label_key_hash(key) */
	uint64_t pair;	/* ft_label_hash(key, value); value "" when absent */
	uint8_t effect; /* FT_TAINT_NO_SCHEDULE or FT_TAINT_NO_EXECUTE */
} ft_taint_t;

/*
 * A node's labels and filtering taints, immutable once built and reference
 * counted: the node's source and each model node built from it share one.
 */
typedef struct ft_node_labels {
	atomic_int refcount;
	unsigned n_hashes;
	uint64_t *hashes; /* sorted: each label's key hash and pair hash */
	unsigned n_taints;
	ft_taint_t *taints;
	unsigned cap_hashes, cap_taints; /* allocated, while building */
} ft_node_labels_t;

/* FNV-1a of a label key, and of a key with a value. */
uint64_t ft_label_key_hash(const char *key);
uint64_t ft_label_hash(const char *key, const char *value);

/* Parse a taint effect: its FT_TAINT_* bit, 0 for PreferNoSchedule and
 * what is unknown. */
uint8_t ft_taint_effect(const char *effect);

/* A new, empty set with one reference; NULL when out of memory. */
ft_node_labels_t *ft_node_labels_new(void);
/* Add a label or a taint (effect 0 is ignored) while building;
 * FT_ENOMEM. Call ft_node_labels_seal() when done. */
int ft_node_labels_add(ft_node_labels_t *l, const char *key, const char *value);
int ft_node_labels_add_taint(ft_node_labels_t *l, const char *key,
			     const char *value, uint8_t effect);
void ft_node_labels_seal(ft_node_labels_t *l);
ft_node_labels_t *ft_node_labels_ref(ft_node_labels_t *l);
void ft_node_labels_unref(ft_node_labels_t *l);

/*
 * Do `rules` let a pod run on a node with `labels`? NULL labels stand for a
 * node whose labels are not known (one built without its Node object, as in
 * tests and benchmarks): every rule holds there.
 */
bool ft_node_rules_admit(const ft_node_rules_t *rules,
			 const ft_node_labels_t *labels);

/* Are `a` and `b` the same rules, in the same order? */
bool ft_node_rules_equal(const ft_node_rules_t *a, const ft_node_rules_t *b);

#endif
