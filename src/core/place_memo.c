/*
 * Filter verdicts remembered per node, by demand.
 *
 * kube-scheduler sends filter every node for every pod, and most pods of a
 * cluster ask for one of a few shapes; between two pods only the node the
 * first was bound to changes (a new ft_node_t, with an empty memo). The
 * verdict is a function of the node's value and the demand alone, so the
 * memo hands back the very verdict ft_place_filter() would work out,
 * reason included: a rejected node no longer costs a shortfall text per
 * pod. Prioritize's level points (ft_place_level_points) are kept beside
 * the verdict, worked out the first time they are asked. Demands are
 * compared byte for byte (memcmp): two demands with the
 * same bytes are the same demand, padding included, and one that differs
 * only in padding is merely worked out again.
 */
#include <flextopo/place.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Level points not worked out yet (ft_place_level_points gives -1..8). */
#define POINTS_UNKNOWN INT8_MIN

typedef struct {
	bool used;
	int8_t points; /* ft_place_level_points(), or POINTS_UNKNOWN */
	ft_demand_t demand;
	ft_verdict_t verdict;
} memo_entry_t;

struct ft_filter_memo {
	atomic_flag busy;
	unsigned next; /* the entry the next new demand replaces */
	memo_entry_t entries[FT_FILTER_MEMO];
};

ft_filter_memo_t *ft_filter_memo_new(void)
{
	ft_filter_memo_t *memo = calloc(1, sizeof(*memo));

	if (memo)
		atomic_flag_clear(&memo->busy);
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

static memo_entry_t *memo_find(ft_filter_memo_t *memo, const ft_demand_t *d)
{
	for (unsigned i = 0; i < FT_FILTER_MEMO; i++)
		if (memo->entries[i].used &&
		    memcmp(&memo->entries[i].demand, d, sizeof(*d)) == 0)
			return &memo->entries[i];
	return NULL;
}

static memo_entry_t *memo_add(ft_filter_memo_t *memo, const ft_demand_t *d,
			      const ft_verdict_t *v)
{
	memo_entry_t *e = &memo->entries[memo->next];

	memo->next = (memo->next + 1) % FT_FILTER_MEMO;
	e->used = true;
	e->points = POINTS_UNKNOWN;
	memcpy(&e->demand, d, sizeof(*d));
	e->verdict = *v;
	return e;
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
static memo_entry_t *memo_entry(ft_filter_memo_t *memo, const ft_node_t *node,
				const ft_demand_t *d)
{
	memo_entry_t *e = memo_find(memo, d);
	ft_verdict_t v;

	if (!e) {
		ft_place_filter(&v, node, d);
		e = memo_add(memo, d, &v);
	}
	return e;
}

void ft_place_filter_memo(ft_verdict_t *out, const ft_node_t *node,
			  const ft_demand_t *d)
{
	ft_filter_memo_t *memo = memo_take(node);

	if (!memo) {
		ft_place_filter(out, node, d);
		return;
	}
	*out = memo_entry(memo, node, d)->verdict;
	memo_give(memo);
}

int ft_place_fit_points_memo(const ft_node_t *node, const ft_demand_t *d)
{
	ft_filter_memo_t *memo = memo_take(node);
	memo_entry_t *e;
	ft_verdict_t v;
	int points = -1;

	if (!memo) {
		ft_place_filter(&v, node, d);
		return v.fit == FT_FIT ? ft_place_level_points(node, d) : -1;
	}
	e = memo_entry(memo, node, d);
	if (e->verdict.fit == FT_FIT && e->points == POINTS_UNKNOWN)
		e->points = (int8_t)ft_place_level_points(node, d);
	if (e->verdict.fit == FT_FIT)
		points = e->points;
	memo_give(memo);
	return points;
}

/* The lines of `node`'s caches a lookup reads first. */
static void prefetch_caches(const ft_node_t *node)
{
	const ft_filter_memo_t *memo = node->filter_memo;

	/* Each filter memo entry's head, compared first. */
	for (unsigned i = 0; memo && i < FT_FILTER_MEMO; i++)
		__builtin_prefetch(&memo->entries[i]);
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
