/*
 * The decision log: the most recent filter, prioritize, preempt and bind
 * decisions, kept for the debug API (GET /debug/decisions,
 * GET /debug/pods/{namespace}/{name}).
 *
 * A decision is a fixed-size record built in caller storage by the verb
 * (ft_decision_init() and the ft_decision_* builders) and copied into a ring
 * of `decisionLogSize` records by ft_decisions_record(). Nothing in a record
 * points elsewhere: names and reasons are copied, cut to the field sizes
 * below (a cut string ends in "..."), so the ring never allocates after
 * ft_decisions_new() and its memory is exactly
 *
 *   ft_decisions_footprint(capacity)
 *     = FT_DECISIONS_HEADER_BYTES + capacity * sizeof(ft_decision_t)
 *
 * which on LP64 (x86-64, arm64) is 128 + capacity * 5912 bytes
 * (FT_DECISION_BYTES): 6,054,016 bytes (5.77 MiB) at the default capacity of
 * 1024, and 6,199,181,440 bytes (5.77 GiB) at 1048576, the largest capacity
 * the configuration accepts. Those are the bytes requested from malloc in
 * two blocks (plus the allocator's few bytes of overhead per block); the
 * ring is allocated whole at start, so the figure is also the steady state.
 *
 * Per record: at most FT_DECISION_NODES per-node rows (the first nodes of
 * the request, in its order; the counts cover every node) and at most
 * FT_DECISION_VICTIMS victims (those of the kept rows).
 *
 * Thread safety: one mutex guards the ring; recording copies one record under
 * it and does no I/O and no allocation. Readers copy records out under the
 * same mutex.
 */
#ifndef FLEXTOPO_DECISIONS_H
#define FLEXTOPO_DECISIONS_H

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

/* sizeof(ft_decision_t) and the ring's fixed part on LP64 (see above). */
#define FT_DECISION_BYTES	  5912
#define FT_DECISIONS_HEADER_BYTES 128

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

/* A victim on row `row` (a value returned by ft_decision_add_node). */
void ft_decision_add_victim(ft_decision_t *d, const ft_decision_node_t *row,
			    const char *ns, const char *name, const char *uid,
			    int32_t priority);

/* The chosen node and placement (positions resolved against `node`). */
void ft_decision_set_placement(ft_decision_t *d, const ft_node_t *node,
			       const ft_placement_t *p);

/* The same from what a pod holds on `node` (bind, after the assumption). */
void ft_decision_set_holding(ft_decision_t *d, const ft_node_t *node,
			     const ft_holding_t *h);

/*
 * The summary or, with `failed`, the error. Without one, recording writes a
 * summary from the counts ("2 of 7 nodes pass").
 */
void ft_decision_message(ft_decision_t *d, bool failed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the ring ---- */

typedef struct ft_decisions ft_decisions_t;

/* A ring of `capacity` records (1 or more), all allocated now. */
int ft_decisions_new(ft_decisions_t **out, unsigned capacity);
/* NULL is fine. */
void ft_decisions_free(ft_decisions_t *log);

/* Exact heap bytes of a ring of `capacity` records (see the top). */
size_t ft_decisions_footprint(unsigned capacity);

unsigned ft_decisions_capacity(const ft_decisions_t *log);

/* Records held now (at most the capacity) and recorded since start. */
unsigned ft_decisions_count(ft_decisions_t *log);
uint64_t ft_decisions_total(ft_decisions_t *log);

/*
 * Copy `d` into the ring, overwriting the oldest record when full; sets
 * d->seq. A NULL `log` records nothing (tests, tools).
 */
void ft_decisions_record(ft_decisions_t *log, ft_decision_t *d);

/* Copy up to `max` records into `out`, newest first; returns how many. */
unsigned ft_decisions_recent(ft_decision_t *out, unsigned max,
			     ft_decisions_t *log);

/*
 * Copy up to `max` records that involve a pod, newest first: as the pod of
 * the decision (by uid, or by namespace and name when `uid` is NULL) or as a
 * victim (by uid). Returns how many.
 */
unsigned ft_decisions_for_pod(ft_decision_t *out, unsigned max,
			      ft_decisions_t *log, const char *ns,
			      const char *name, const char *uid);

#endif
