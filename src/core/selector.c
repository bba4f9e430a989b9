/*
 * Label selector matching. Requirements are ANDed; matchLabels entries are
 * In requirements with one value, as LabelSelectorAsSelector makes them.
 */
#include <flextopo/pdb.h>
#include <flextopo/selector.h>

#include <stdlib.h>
#include <string.h>

static void selector_dispose(ft_selector_t *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->n_reqs; i++) {
		for (unsigned j = 0; j < s->reqs[i].n_values; j++)
			free(s->reqs[i].values[j]);
		free(s->reqs[i].values);
		free(s->reqs[i].key);
	}
	free(s->reqs);
	memset(s, 0, sizeof(*s));
}

/* The value of `key` in labels, or NULL. */
static const char *label_value(const char *key, char *const *labels, unsigned n)
{
	size_t klen = strlen(key);

	for (unsigned i = 0; i < n; i++)
		if (strncmp(labels[i], key, klen) == 0 &&
		    labels[i][klen] == '=')
			return labels[i] + klen + 1;
	return NULL;
}

static bool in_values(const ft_selector_req_t *r, const char *v)
{
	for (unsigned i = 0; i < r->n_values; i++)
		if (strcmp(r->values[i], v) == 0)
			return true;
	return false;
}

static bool req_matches(const ft_selector_req_t *r, char *const *labels,
			unsigned n)
{
	const char *v = label_value(r->key, labels, n);

	switch (r->op) {
	case FT_SEL_IN:
		return v && in_values(r, v);
	case FT_SEL_NOT_IN:
		return !v || !in_values(r, v);
	case FT_SEL_EXISTS:
		return v != NULL;
	case FT_SEL_DOES_NOT_EXIST:
		return v == NULL;
	}
	return false;
}

bool ft_selector_matches(const ft_selector_t *s, char *const *labels,
			 unsigned n)
{
	if (s->nothing)
		return false;
	for (unsigned i = 0; i < s->n_reqs; i++)
		if (!req_matches(&s->reqs[i], labels, n))
			return false;
	return true;
}

void ft_pdb_dispose(ft_pdb_t *pdb)
{
	if (!pdb)
		return;
	free(pdb->ns);
	free(pdb->name);
	selector_dispose(&pdb->selector);
	for (unsigned i = 0; i < pdb->n_disrupted; i++)
		free(pdb->disrupted[i]);
	free(pdb->disrupted);
	memset(pdb, 0, sizeof(*pdb));
}

static bool listed(char *const *names, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

bool ft_pdb_counts(const ft_pdb_t *pdb, const char *ns, const char *name,
		   char *const *labels, unsigned n)
{
	return n && pdb->selector.n_reqs && ns && pdb->ns &&
	       strcmp(pdb->ns, ns) == 0 &&
	       ft_selector_matches(&pdb->selector, labels, n) &&
	       !(name && listed(pdb->disrupted, pdb->n_disrupted, name));
}
