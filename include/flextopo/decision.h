/*
 * One decision of a verb (codec stage): a fixed-size record of what filter,
 * prioritize, preempt or bind said about a pod and each node, built in the
 * caller's storage by ft_decision_init() and the builders below, with no
 * lock and no allocation. Nothing in a record points elsewhere: names and
 * reasons are copied, cut to the field sizes below (a cut string ends in
 * "..." and is cut before a UTF-8 sequence, never inside one). The debug
 * views encode records (debugview.h); the app keeps the recent ones in a
 * ring (decisions.h).
 *
 * Per record: at most FT_DECISION_NODES per-node rows (the first nodes of
 * the request, in its order; the counts cover every node) and at most
 * FT_DECISION_VICTIMS victims (those of the kept rows).
 */
#ifndef FLEXTOPO_DECISION_H
#define FLEXTOPO_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "place.h"
#include "topology.h"

#define FT_DECISION_NODES   16	/* per-node rows kept per decision */
#define FT_DECISION_VICTIMS 16	/* victims kept per decision */
#define FT_DECISION_NAME    64	/* node names and "ns/name" of victims */
#define FT_DECISION_POD	    254 /* pod names: a DNS subdomain, 253 bytes */
#define FT_DECISION_NS	    64	/* namespaces: a DNS label, 63 bytes */
#define FT_DECISION_UID	    40	/* a Kubernetes UID is 36 bytes */
#define FT_DECISION_REASON  128 /* one node's reason */
#define FT_DECISION_MESSAGE 192 /* the decision's summary or error */

/* sizeof(ft_decision_t) on LP64 (decisions.h counts the ring's bytes). */
#define FT_DECISION_BYTES 6168

/* The extender verbs, also the label of the request metrics. */
typedef enum {
	FT_VERB_FILTER = 0,
	FT_VERB_PRIORITIZE = 1,
	FT_VERB_PREEMPT = 2,
	FT_VERB_BIND = 3,
	FT_VERB_COUNT = 4,
} ft_verb_t;

/* "filter", "prioritize", "preempt", "bind". */
const char *ft_verb_name(ft_verb_t verb);

/* What a verb said about one node. */
typedef enum {
	FT_VERDICT_PASS = 0,	     /* filter: the pod fits now */
	FT_VERDICT_FAIL = 1,	     /* filter: not now; preemption may help */
	FT_VERDICT_UNRESOLVABLE = 2, /* filter: never, even when empty */
	FT_VERDICT_SCORED = 3,	     /* prioritize: see score */
	FT_VERDICT_KEPT = 4, /* preempt: kept with victims flextopo chose */
	FT_VERDICT_KEPT_PROPOSED = 5, /* preempt: kept with the scheduler's */
	FT_VERDICT_DROPPED = 6,	      /* preempt: no victim set works */
	FT_VERDICT_COUNT = 7,
} ft_verdict_kind_t;

/*
 * "pass", "fail", "unresolvable", "scored", "kept", "kept-proposed",
 * "dropped".
 */
const char *ft_verdict_name(ft_verdict_kind_t verdict);

typedef struct ft_decision_node {
	char name[FT_DECISION_NAME];
	char reason[FT_DECISION_REASON]; /* "" when there is nothing to say */
	uint8_t verdict;		 /* ft_verdict_kind_t */
	uint8_t level; /* level reached or promised; FT_LEVEL_COUNT: none */
	int8_t score;  /* prioritize 0..10; -1 otherwise */
	bool exact;    /* preempt: the victim search was exhaustive */
	uint32_t n_victims; /* preempt: victims on this node (all of them) */
	/*
	 * preempt, kept rows: the pods the victims disrupt (victims.h), every
	 * running member of a gang they break included.
	 */
	uint32_t n_disrupted;
} ft_decision_node_t;

typedef struct ft_decision_victim {
	char pod[FT_DECISION_NAME]; /* "namespace/name"; "" when unknown */
	char uid[FT_DECISION_UID];
	int32_t priority;
	uint8_t row; /* index into ft_decision_t.nodes */
} ft_decision_victim_t;

/* A placement by the names people read (nvidia-smi GPU index, NUMA id). */
typedef struct ft_decision_placement {
	ft_cpuset_t cpus; /* pinned CPUs */
	uint64_t memory_mib;
	int16_t gpus[FT_GPU_MAX]; /* GPU indexes */
	struct {
		int16_t gpu; /* index of the GPU holding the instance */
		uint8_t start, size;
	} mig[FT_ALLOC_MIG_MAX];
	int16_t numa[FT_NUMA_MAX]; /* NUMA ids */
	char mig_profile[FT_PROFILE_MAX];
	uint8_t n_gpus, n_mig, n_numa;
	uint8_t level;	/* ft_level_t */
	uint8_t levels; /* bit L: level L reached */
} ft_decision_placement_t;

typedef struct ft_decision {
	uint64_t seq;			   /* 1, 2, ... in recording order */
	int64_t time_ms;		   /* Unix time in milliseconds */
	uint32_t counts[FT_VERDICT_COUNT]; /* nodes per verdict, all nodes */
	uint32_t n_nodes_total;		   /* nodes in the request */
	uint32_t n_victims_total;	   /* victims over all nodes */
	int32_t priority;		   /* the pod's priority */
	int16_t best_score;		   /* prioritize: score of `node` */
	uint8_t verb;			   /* ft_verb_t */
	uint8_t n_nodes;		   /* rows in nodes[] */
	uint8_t n_victims;		   /* entries in victims[] */
	bool failed;	    /* the request failed (message says why) */
	bool has_placement; /* placement and node are set */
	char ns[FT_DECISION_NS];
	char name[FT_DECISION_POD];
	char uid[FT_DECISION_UID];
	char node[FT_DECISION_NAME]; /* bind: the node; prioritize: the best */
	char message[FT_DECISION_MESSAGE];
	/*
	 * preempt: the gangs the kept rows' victims break, "node: ns/name,
	 * ns/name; node: ..." ("" when none; cut to fit).
	 */
	char gangs[FT_DECISION_MESSAGE];
	ft_decision_placement_t placement;
	ft_decision_node_t nodes[FT_DECISION_NODES];
	ft_decision_victim_t victims[FT_DECISION_VICTIMS];
} ft_decision_t;

/* ---- building one decision (caller storage, no lock, no allocation) ---- */

/*
 * Start a decision of `verb` about pod ns/name (uid) now. NULL strings are
 * recorded as "".
 */
void ft_decision_init(ft_decision_t *d, ft_verb_t verb, const char *ns,
		      const char *name, const char *uid, int32_t priority);

/*
 * Count a node's verdict and, while rows are left, add a row for it. Returns
 * the row (to set level, score, victims) or NULL when the rows are full.
 */
ft_decision_node_t *ft_decision_add_node(ft_decision_t *d, const char *node,
					 ft_verdict_kind_t verdict,
					 const char *reason);

/* A filter verdict of place.h as a row. */
void ft_decision_add_verdict(ft_decision_t *d, const char *node,
			     const ft_verdict_t *v);

/* A prioritize score as a row; the best node so far becomes d->node. */
void ft_decision_add_score(ft_decision_t *d, const char *node, int score);

/*
 * Add the node rows, their victims and the counts of `from` (a decision of
 * the same verb and pod, built apart: one candidate node of a preemption
 * searched on its own thread) to `d`, as if they had been added to it.
 */
void ft_decision_merge(ft_decision_t *d, const ft_decision_t *from);

/*
 * The gangs that the victims kept on `node` break, "ns/name, ns/name",
 * appended to d->gangs as "node: ...".
 */
void ft_decision_add_gangs(ft_decision_t *d, const char *node,
			   const char *gangs);

/* A victim on row `row` (a value returned by ft_decision_add_node). */
void ft_decision_add_victim(ft_decision_t *d, const ft_decision_node_t *row,
			    const char *ns, const char *name, const char *uid,
			    int32_t priority);

/* The same from what a pod holds on `node` (bind, after the assumption). */
void ft_decision_set_holding(ft_decision_t *d, const ft_node_t *node,
			     const ft_holding_t *h);

/*
 * The summary or, with `failed`, the error. Without one, recording writes a
 * summary from the counts ("2 of 7 nodes pass").
 */
void ft_decision_message(ft_decision_t *d, bool failed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
