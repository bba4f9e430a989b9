/*
 * The decision log: the most recent filter, prioritize, preempt and bind
 * decisions, kept for the debug API (GET /debug/decisions,
 * GET /debug/pods/{namespace}/{name}).
 *
 * A decision is a fixed-size record (decision.h) built in caller storage by
 * the verb (ft_decision_init() and the ft_decision_* builders) and copied
 * into a ring
 * of `decisionLogSize` records by ft_decisions_record(). Nothing in a record
 * points elsewhere: names and reasons are copied, cut to the field sizes
 * below (a cut string ends in "..."), so the ring never allocates after
 * ft_decisions_new() and its memory is exactly
 *
 *   ft_decisions_footprint(capacity)
 *     = FT_DECISIONS_HEADER_BYTES + capacity * sizeof(ft_decision_t)
 *
 * which on LP64 (x86-64, arm64) is 128 + capacity * 6168 bytes
 * (FT_DECISION_BYTES): 6,316,160 bytes (6.02 MiB) at the default capacity of
 * 1024, and 6,467,616,896 bytes (6.02 GiB) at 1048576, the largest capacity
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

#include "decision.h"

/* The ring's fixed part on LP64 (see above). */
#define FT_DECISIONS_HEADER_BYTES 128

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
