/*
 * Filter verdicts remembered per node, by demand.
 *
 * kube-scheduler sends filter every node for every pod, and most pods of a
 * cluster ask for one of a few shapes; between two pods only the node the
 * first was bound to changes (a new ft_node_t, with an empty memo). The
 * verdict is a function of the node's value and the demand alone, so the
 * memo hands back the very verdict ft_place_filter() would work out,
 * reason included: a rejected node no longer costs a shortfall text per
 * pod. Demands are compared byte for byte (memcmp): two demands with the
 * same bytes are the same demand, padding included, and one that differs
 * only in padding is merely worked out again.
 */
#include <flextopo/place.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	bool used;
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

static const memo_entry_t *memo_find(const ft_filter_memo_t *memo,
				     const ft_demand_t *d)
{
	for (unsigned i = 0; i < FT_FILTER_MEMO; i++)
		if (memo->entries[i].used &&
		    memcmp(&memo->entries[i].demand, d, sizeof(*d)) == 0)
			return &memo->entries[i];
	return NULL;
}

static void memo_add(ft_filter_memo_t *memo, const ft_demand_t *d,
		     const ft_verdict_t *v)
{
	memo_entry_t *e = &memo->entries[memo->next];

	memo->next = (memo->next + 1) % FT_FILTER_MEMO;
	e->used = true;
	memcpy(&e->demand, d, sizeof(*d));
	e->verdict = *v;
}

void ft_place_filter_memo(ft_verdict_t *out, const ft_node_t *node,
			  const ft_demand_t *d)
{
	ft_filter_memo_t *memo = node->filter_memo;
	const memo_entry_t *hit;

	if (!memo || atomic_flag_test_and_set_explicit(&memo->busy,
						       memory_order_acquire)) {
		ft_place_filter(out, node, d);
		return;
	}
	if ((hit = memo_find(memo, d))) {
		*out = hit->verdict;
	} else {
		ft_place_filter(out, node, d);
		memo_add(memo, d, out);
	}
	atomic_flag_clear_explicit(&memo->busy, memory_order_release);
}
