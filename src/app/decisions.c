/*
 * The decision log: why each recent request went the way it went, bounded in
 * memory so that it can stay on in production.
 *
 * Records (decision.h, built by the verbs on their own stack) are handed
 * over with one copy under the ring's mutex; so the cost on the
 * scheduler's path is a memset, a few bounded string copies and one
 * memcpy, and the ring never allocates after it is created.
 * Readers (the debug API) copy records out under the same mutex and format
 * them afterwards, so a slow reader never holds up a verb for long.
 */
#include <flextopo/decisions.h>
#include <flextopo/error.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ft_decisions {
	pthread_mutex_t mu;
	unsigned capacity;
	unsigned count; /* records held */
	unsigned next;	/* slot of the next record */
	uint64_t total; /* records ever recorded; the last seq */
	ft_decision_t *ring;
};

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct ft_decisions) <= FT_DECISIONS_HEADER_BYTES,
	       "update FT_DECISIONS_HEADER_BYTES in decisions.h");
#endif

/* ---- the ring ---- */

size_t ft_decisions_footprint(unsigned capacity)
{
	return FT_DECISIONS_HEADER_BYTES +
	       (size_t)capacity * sizeof(ft_decision_t);
}

int ft_decisions_new(ft_decisions_t **out, unsigned capacity)
{
	ft_decisions_t *log = NULL;
	int rc = 0;

	*out = NULL;
	if (capacity == 0)
		return ft_error_set(FT_EINVAL, "decision log: capacity 0");
	log = calloc(1, FT_DECISIONS_HEADER_BYTES);
	if (!log || !(log->ring = calloc(capacity, sizeof(*log->ring)))) {
		rc = ft_error_set(
		    FT_ENOMEM,
		    "decision log: out of memory for %u records (%zu bytes)",
		    capacity, ft_decisions_footprint(capacity));
		goto cleanup;
	}
	pthread_mutex_init(&log->mu, NULL);
	log->capacity = capacity;
	*out = log;
	log = NULL;
cleanup:
	if (log)
		free(log->ring);
	free(log);
	return rc;
}

void ft_decisions_free(ft_decisions_t *log)
{
	if (!log)
		return;
	pthread_mutex_destroy(&log->mu);
	free(log->ring);
	free(log);
}

unsigned ft_decisions_capacity(const ft_decisions_t *log)
{
	return log ? log->capacity : 0;
}

unsigned ft_decisions_count(ft_decisions_t *log)
{
	unsigned n;

	if (!log)
		return 0;
	pthread_mutex_lock(&log->mu);
	n = log->count;
	pthread_mutex_unlock(&log->mu);
	return n;
}

uint64_t ft_decisions_total(ft_decisions_t *log)
{
	uint64_t n;

	if (!log)
		return 0;
	pthread_mutex_lock(&log->mu);
	n = log->total;
	pthread_mutex_unlock(&log->mu);
	return n;
}

/* The summary of a decision that has no message of its own. */
static void summarize(ft_decision_t *d)
{
	const uint32_t *c = d->counts;

	if (d->message[0])
		return;
	if (d->verb == FT_VERB_FILTER)
		ft_decision_message(d, false, "%u of %u nodes pass",
				    c[FT_VERDICT_PASS], d->n_nodes_total);
	else if (d->verb == FT_VERB_PRIORITIZE && d->n_nodes_total)
		ft_decision_message(d, false, "best node %s (score %d) of %u",
				    d->node, d->best_score, d->n_nodes_total);
	else if (d->verb == FT_VERB_PREEMPT)
		ft_decision_message(
		    d, false,
		    "%u of %u candidate nodes kept (%u with victims flextopo chose), %u victims",
		    c[FT_VERDICT_KEPT] + c[FT_VERDICT_KEPT_PROPOSED],
		    d->n_nodes_total, c[FT_VERDICT_KEPT], d->n_victims_total);
}

void ft_decisions_record(ft_decisions_t *log, ft_decision_t *d)
{
	summarize(d);
	if (!log)
		return;
	pthread_mutex_lock(&log->mu);
	d->seq = ++log->total;
	log->ring[log->next] = *d;
	log->next = (log->next + 1) % log->capacity;
	if (log->count < log->capacity)
		log->count++;
	pthread_mutex_unlock(&log->mu);
}

/* The i-th newest record (0 = newest); the lock is held. */
static const ft_decision_t *newest(const ft_decisions_t *log, unsigned i)
{
	return &log->ring[(log->next + log->capacity - 1 - i) % log->capacity];
}

unsigned ft_decisions_recent(ft_decision_t *out, unsigned max,
			     ft_decisions_t *log)
{
	unsigned n = 0;

	if (!log)
		return 0;
	pthread_mutex_lock(&log->mu);
	for (; n < max && n < log->count; n++)
		out[n] = *newest(log, n);
	pthread_mutex_unlock(&log->mu);
	return n;
}

static bool involves(const ft_decision_t *d, const char *ns, const char *name,
		     const char *uid)
{
	if (uid && uid[0] && strcmp(d->uid, uid) == 0)
		return true;
	if (!uid && ns && name && strcmp(d->ns, ns) == 0 &&
	    strcmp(d->name, name) == 0)
		return true;
	for (unsigned i = 0; uid && uid[0] && i < d->n_victims; i++)
		if (strcmp(d->victims[i].uid, uid) == 0)
			return true;
	return false;
}

unsigned ft_decisions_for_pod(ft_decision_t *out, unsigned max,
			      ft_decisions_t *log, const char *ns,
			      const char *name, const char *uid)
{
	unsigned n = 0;

	if (!log)
		return 0;
	pthread_mutex_lock(&log->mu);
	for (unsigned i = 0; n < max && i < log->count; i++) {
		const ft_decision_t *d = newest(log, i);
		if (involves(d, ns, name, uid))
			out[n++] = *d;
	}
	pthread_mutex_unlock(&log->mu);
	return n;
}
