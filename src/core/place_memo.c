/*
 * Filter verdicts remembered per node, by demand, and the demand keys they
 * are found by.
 *
 * kube-scheduler sends filter every node for every pod, and most pods of a
 * cluster ask for one of a few shapes; between two pods only the node the
 * first was bound to changes (a new ft_node_t, with an empty memo). The
 * verdict is a function of the node's value and the demand alone, so the
 * memo hands back the very verdict ft_place_filter() would work out,
 * reason included: a rejected node no longer costs a shortfall text per
 * pod. Prioritize's level points (ft_place_level_points) are kept beside
 * the verdict, worked out the first time they are asked.
 *
 * An entry is found by the demand's key (ft_demand_key) when it has one:
 * the keys, verdicts and points of all entries share the memo's first
 * cache line, and a fit is answered from it alone. A demand without a key
 * is compared byte for byte (memcmp): two demands with the same bytes are
 * the same demand, padding included, and one that differs only in padding
 * is merely worked out again. An entry added under a key holds that key in
 * its demand's bytes, so a demand without one never matches it.
 */
#include <flextopo/error.h>
#include <flextopo/place.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* uthash: the demand keys' table; a full one never fails, it starts over. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* Level points not worked out yet (ft_place_level_points gives -1..8). */
#define POINTS_UNKNOWN INT8_MIN

typedef struct {
	ft_demand_t demand;
	char reason[sizeof(((ft_verdict_t *)0)->reason)];
} memo_body_t;

/* The heads first, beside `busy`: with 4 entries, one cache line. */
#define MEMO_ALIGN 64
struct ft_filter_memo {
	_Alignas(MEMO_ALIGN) atomic_flag busy;
	uint8_t next; /* the entry the next new demand replaces */
	bool used[FT_FILTER_MEMO];
	uint8_t fit[FT_FILTER_MEMO];   /* ft_fit_t */
	uint8_t level[FT_FILTER_MEMO]; /* ft_level_t */
	int8_t points[FT_FILTER_MEMO]; /* ft_place_level_points(), or
					  POINTS_UNKNOWN */
	uint64_t key[FT_FILTER_MEMO];  /* the demand's key; 0: none */
	memo_body_t body[FT_FILTER_MEMO];
};

_Static_assert(offsetof(ft_filter_memo_t, body) <= MEMO_ALIGN,
	       "the filter memo's heads outgrew one cache line");

ft_filter_memo_t *ft_filter_memo_new(void)
{
	/* sizeof is a multiple of the alignment, as aligned_alloc asks. */
	ft_filter_memo_t *memo = aligned_alloc(MEMO_ALIGN, sizeof(*memo));

	if (memo) {
		memset(memo, 0, sizeof(*memo));
		atomic_flag_clear(&memo->busy);
	}
	return memo;
}

void ft_filter_memo_free(ft_filter_memo_t *memo)
{
	free(memo);
}

size_t ft_filter_memo_size(void)
{
	return sizeof(ft_filter_memo_t);
}

/* Entry `i` is `d`'s: the same key, or without keys the same bytes. */
static bool entry_is(const ft_filter_memo_t *memo, unsigned i,
		     const ft_demand_t *d)
{
	if (!memo->used[i])
		return false;
	if (d->key)
		return memo->key[i] == d->key;
	return !memo->key[i] &&
	       memcmp(&memo->body[i].demand, d, sizeof(*d)) == 0;
}

/* The entry of `d`, or -1. */
static int memo_find(const ft_filter_memo_t *memo, const ft_demand_t *d)
{
	int at = -1;

	for (unsigned i = 0; i < FT_FILTER_MEMO && at < 0; i++)
		if (entry_is(memo, i, d))
			at = (int)i;
	return at;
}

static unsigned memo_add(ft_filter_memo_t *memo, const ft_demand_t *d,
			 const ft_verdict_t *v)
{
	unsigned i = memo->next;

	memo->next = (uint8_t)((i + 1) % FT_FILTER_MEMO);
	memo->used[i] = true;
	memo->fit[i] = (uint8_t)v->fit;
	memo->level[i] = (uint8_t)v->level;
	memo->points[i] = POINTS_UNKNOWN;
	memo->key[i] = d->key;
	memcpy(&memo->body[i].demand, d, sizeof(*d));
	memcpy(memo->body[i].reason, v->reason, sizeof(v->reason));
	return i;
}

/* The node's memo held by this thread, or NULL: none, or another holds it. */
static ft_filter_memo_t *memo_take(const ft_node_t *node)
{
	ft_filter_memo_t *memo = node->filter_memo;

	return memo && !atomic_flag_test_and_set_explicit(&memo->busy,
							  memory_order_acquire)
		   ? memo
		   : NULL;
}

static void memo_give(ft_filter_memo_t *memo)
{
	atomic_flag_clear_explicit(&memo->busy, memory_order_release);
}

/* The entry of `d`, worked out and added when it is not there yet. */
static unsigned memo_entry(ft_filter_memo_t *memo, const ft_node_t *node,
			   const ft_demand_t *d)
{
	int at = memo_find(memo, d);
	ft_verdict_t v;

	if (at < 0) {
		ft_place_filter(&v, node, d);
		at = (int)memo_add(memo, d, &v);
	}
	return (unsigned)at;
}

void ft_place_filter_memo(ft_verdict_t *out, const ft_node_t *node,
			  const ft_demand_t *d)
{
	ft_filter_memo_t *memo = memo_take(node);
	unsigned i;

	if (!memo) {
		ft_place_filter(out, node, d);
		return;
	}
	i = memo_entry(memo, node, d);
	out->fit = (ft_fit_t)memo->fit[i];
	out->level = (ft_level_t)memo->level[i];
	/* A fit has no reason: its text is not read. */
	if (out->fit == FT_FIT)
		out->reason[0] = '\0';
	else
		memcpy(out->reason, memo->body[i].reason, sizeof(out->reason));
	memo_give(memo);
}

int ft_place_fit_points_memo(const ft_node_t *node, const ft_demand_t *d)
{
	ft_filter_memo_t *memo = memo_take(node);
	int points = -1;
	ft_verdict_t v;
	unsigned i;

	if (!memo) {
		ft_place_filter(&v, node, d);
		return v.fit == FT_FIT ? ft_place_level_points(node, d) : -1;
	}
	i = memo_entry(memo, node, d);
	if (memo->fit[i] == FT_FIT && memo->points[i] == POINTS_UNKNOWN)
		memo->points[i] = (int8_t)ft_place_level_points(node, d);
	if (memo->fit[i] == FT_FIT)
		points = memo->points[i];
	memo_give(memo);
	return points;
}

/* ---- demand keys ---- */

typedef struct {
	UT_hash_handle hh;
	ft_demand_t demand; /* the hash key: the demand, key field 0 */
	uint64_t key;
} key_entry_t;

struct ft_demand_keys {
	pthread_mutex_t mu;
	key_entry_t *head;
	unsigned n;
};

/* One counter for every table: a key is never given to two demands. */
static atomic_uint_fast64_t last_key;

int ft_demand_keys_new(ft_demand_keys_t **out)
{
	ft_demand_keys_t *keys = calloc(1, sizeof(*keys));

	*out = keys;
	if (!keys)
		return ft_error_set(FT_ENOMEM, "demand keys: out of memory");
	pthread_mutex_init(&keys->mu, NULL);
	return 0;
}

static void keys_clear(ft_demand_keys_t *keys)
{
	key_entry_t *e, *tmp;

	HASH_ITER (hh, keys->head, e, tmp) {
		HASH_DEL(keys->head, e);
		free(e);
	}
	keys->n = 0;
}

void ft_demand_keys_free(ft_demand_keys_t *keys)
{
	if (!keys)
		return;
	keys_clear(keys);
	pthread_mutex_destroy(&keys->mu);
	free(keys);
}

/* The entry of `d` (key 0), added with a new key; NULL out of memory. */
static key_entry_t *keys_add(ft_demand_keys_t *keys, const ft_demand_t *d)
{
	key_entry_t *e;

	if (keys->n >= FT_DEMAND_KEYS)
		keys_clear(keys);
	if (!(e = malloc(sizeof(*e))))
		return NULL;
	e->demand = *d;
	e->key = atomic_fetch_add(&last_key, 1) + 1;
	HASH_ADD(hh, keys->head, demand, sizeof(e->demand), e);
	if (HASH_COUNT(keys->head) != keys->n + 1) {
		free(e);
		return NULL;
	}
	keys->n++;
	return e;
}

void ft_demand_key(ft_demand_keys_t *keys, ft_demand_t *d)
{
	key_entry_t *e = NULL;

	d->key = 0;
	pthread_mutex_lock(&keys->mu);
	HASH_FIND(hh, keys->head, d, sizeof(*d), e);
	if (!e)
		e = keys_add(keys, d);
	if (e)
		d->key = e->key;
	pthread_mutex_unlock(&keys->mu);
}

/* The lines of `node`'s caches a lookup reads first. */
static void prefetch_caches(const ft_node_t *node)
{
	/* The filter memo's heads: a keyed lookup's only line. */
	if (node->filter_memo)
		__builtin_prefetch(node->filter_memo);
	if (node->frag) {
		__builtin_prefetch(node->frag);
		for (unsigned i = 0; i < FT_FRAG_MEMO; i++)
			__builtin_prefetch(&node->frag->memo[i]);
	}
}

void ft_place_prefetch_ahead(const ft_node_t *const *nodes, unsigned n,
			     unsigned i)
{
	unsigned near = i + FT_PREFETCH_AHEAD, far = i + 2 * FT_PREFETCH_AHEAD;

	/* The record's line with the caches' pointers. */
	if (far < n && nodes[far])
		__builtin_prefetch(&nodes[far]->filter_memo);
	if (near < n && nodes[near])
		prefetch_caches(nodes[near]);
}
