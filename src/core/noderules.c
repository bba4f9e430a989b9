/*
 * Node affinity and taint rules against a node's labels and taints, all as
 * hashes: a requirement looks its keys and (key, value) pairs up in the
 * node's sorted hash set.
 */
#include <flextopo/error.h>
#include <flextopo/noderules.h>

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET UINT64_C(14695981039346656037)
#define FNV_PRIME  UINT64_C(1099511628211)

static uint64_t fnv(uint64_t h, const char *s)
{
	for (const char *p = s ? s : ""; *p; p++) {
		h ^= (unsigned char)*p;
		h *= FNV_PRIME;
	}
	return h;
}

uint64_t ft_label_key_hash(const char *key)
{
	return fnv(FNV_OFFSET, key);
}

uint64_t ft_label_hash(const char *key, const char *value)
{
	/* FNV-1a of "key=value": a key holds no '=', so no two pairs, and no
	 * pair and key, are the same string. */
	return fnv(fnv(fnv(FNV_OFFSET, key), "="), value);
}

uint8_t ft_taint_effect(const char *effect)
{
	if (effect && strcmp(effect, "NoSchedule") == 0)
		return FT_TAINT_NO_SCHEDULE;
	if (effect && strcmp(effect, "NoExecute") == 0)
		return FT_TAINT_NO_EXECUTE;
	return 0;
}

ft_node_labels_t *ft_node_labels_new(void)
{
	ft_node_labels_t *l = calloc(1, sizeof(*l));

	if (l)
		atomic_init(&l->refcount, 1);
	return l;
}

/* Room for `need` items of `size` in `*items`, which holds `*cap`. */
static int reserve(void **items, unsigned *cap, unsigned need, size_t size)
{
	unsigned next = *cap ? *cap : 8;
	void *grown;

	if (need <= *cap)
		return 0;
	while (next < need)
		next *= 2;
	if (!(grown = realloc(*items, next * size)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	*items = grown;
	*cap = next;
	return 0;
}

int ft_node_labels_add(ft_node_labels_t *l, const char *key, const char *value)
{
	int rc = reserve((void **)&l->hashes, &l->cap_hashes, l->n_hashes + 2,
			 sizeof(l->hashes[0]));

	if (rc < 0)
		return rc;
	l->hashes[l->n_hashes++] = ft_label_key_hash(key);
	l->hashes[l->n_hashes++] = ft_label_hash(key, value);
	return 0;
}

int ft_node_labels_add_taint(ft_node_labels_t *l, const char *key,
			     const char *value, uint8_t effect)
{
	int rc = 0;

	if (effect &&
	    (rc = reserve((void **)&l->taints, &l->cap_taints, l->n_taints + 1,
			  sizeof(l->taints[0]))) == 0)
		l->taints[l->n_taints++] =
		    (ft_taint_t){.key = ft_label_key_hash(key),
				 .pair = ft_label_hash(key, value),
				 .effect = effect};
	return rc;
}

static int by_hash(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

void ft_node_labels_seal(ft_node_labels_t *l)
{
	if (l->n_hashes)
		qsort(l->hashes, l->n_hashes, sizeof(l->hashes[0]), by_hash);
}

ft_node_labels_t *ft_node_labels_ref(ft_node_labels_t *l)
{
	if (l)
		atomic_fetch_add(&l->refcount, 1);
	return l;
}

void ft_node_labels_unref(ft_node_labels_t *l)
{
	if (!l || atomic_fetch_sub(&l->refcount, 1) != 1)
		return;
	free(l->hashes);
	free(l->taints);
	free(l);
}

static bool has(const ft_node_labels_t *l, uint64_t h)
{
	return l->n_hashes &&
	       bsearch(&h, l->hashes, l->n_hashes, sizeof(h), by_hash);
}

static bool any_of(const ft_node_rules_t *r, const ft_node_req_t *q,
		   const ft_node_labels_t *l)
{
	bool found = false;

	for (unsigned i = q->first; !found && i < q->first + q->n; i++)
		found = has(l, r->hashes[i]);
	return found;
}

static bool req_holds(const ft_node_rules_t *r, const ft_node_req_t *q,
		      const ft_node_labels_t *l)
{
	bool found = any_of(r, q, l);

	/* NotIn holds where the label is missing too: no pair is found. */
	return q->op == FT_REQ_IN || q->op == FT_REQ_EXISTS ? found : !found;
}

/* Do all requirements of `term` hold? */
static bool term_holds(const ft_node_rules_t *r, unsigned term,
		       const ft_node_labels_t *l)
{
	bool ok = true;

	for (unsigned i = 0; ok && i < r->n_reqs; i++)
		if (r->reqs[i].term == term)
			ok = req_holds(r, &r->reqs[i], l);
	return ok;
}

static bool affinity_holds(const ft_node_rules_t *r, const ft_node_labels_t *l)
{
	bool any = !r->n_terms;

	for (unsigned t = 0; !any && t < r->n_terms; t++)
		any = term_holds(r, t, l);
	return any && term_holds(r, FT_RULE_ALL_TERMS, l);
}

static bool tolerates(const ft_toleration_t *t, const ft_taint_t *taint)
{
	return (t->effects & taint->effect) &&
	       ((t->exists && !t->hash) ||
		t->hash == (t->exists ? taint->key : taint->pair));
}

static bool taints_tolerated(const ft_node_rules_t *r,
			     const ft_node_labels_t *l)
{
	bool ok = true;

	for (unsigned i = 0; !r->tolerates_all && ok && i < l->n_taints; i++) {
		ok = false;
		for (unsigned j = 0; !ok && j < r->n_tolerations; j++)
			ok = tolerates(&r->tolerations[j], &l->taints[i]);
	}
	return ok;
}

bool ft_node_rules_admit(const ft_node_rules_t *rules,
			 const ft_node_labels_t *labels)
{
	return !labels || (affinity_holds(rules, labels) &&
			   taints_tolerated(rules, labels));
}

static bool same_req(const ft_node_req_t *a, const ft_node_req_t *b)
{
	return a->op == b->op && a->term == b->term && a->first == b->first &&
	       a->n == b->n;
}

static bool same_toleration(const ft_toleration_t *a, const ft_toleration_t *b)
{
	return a->hash == b->hash && a->exists == b->exists &&
	       a->effects == b->effects;
}

bool ft_node_rules_equal(const ft_node_rules_t *a, const ft_node_rules_t *b)
{
	bool same = a->n_terms == b->n_terms && a->n_reqs == b->n_reqs &&
		    a->n_hashes == b->n_hashes &&
		    a->n_tolerations == b->n_tolerations &&
		    a->tolerates_all == b->tolerates_all &&
		    memcmp(a->hashes, b->hashes,
			   a->n_hashes * sizeof(a->hashes[0])) == 0;

	for (unsigned i = 0; same && i < a->n_reqs; i++)
		same = same_req(&a->reqs[i], &b->reqs[i]);
	for (unsigned i = 0; same && i < a->n_tolerations; i++)
		same = same_toleration(&a->tolerations[i], &b->tolerations[i]);
	return same;
}
