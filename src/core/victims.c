/*
 * Exact victim search for topology-aware preemption.
 *
 * For every affinity domain that could host the preemptor, the candidates are
 * the lower-priority pods holding GPUs, MIG instances, pinned CPUs or memory
 * inside that domain (or holding units of unknown placement, which count
 * node-wide). A depth-first branch and bound over them finds the cheapest
 * set after which the domain fits. Two facts keep it small and exact:
 * a superset of a set is always costlier (every cost key grows or, at equal
 * priority keys, the shifted sum grows), so a feasible set is never extended;
 * and a branch stops when evicting every candidate left would still not fit.
 * The best set over all domains is the answer. Eviction is simulated on a
 * copy of the node's usage counters (and of its MIG instances of unknown
 * placement); the node itself is never changed.
 * The preemptor's demand is read as placement reads it (ft_place_units):
 * translated on MIG-strategy single nodes, and only the units that meet its
 * capabilities (flextopo.io/requires) make a holding a candidate. On a node
 * with shared GPUs the demand is ranks of replicas: evicting a holding gives
 * back its replicas, and a pod holding a shared GPU whole gives back all.
 */
#include <flextopo/victims.h>

#include <string.h>

#define PRIORITY_SHIFT ((int64_t)1 << 31)
#define VISIT_BUDGET   20000 /* per domain; past it the best so far stands */

int ft_victims_compare(const ft_victim_cost_t *a, const ft_victim_cost_t *b)
{
	if (a->pdb_violations != b->pdb_violations)
		return a->pdb_violations < b->pdb_violations ? -1 : 1;
	if (a->max_priority != b->max_priority)
		return a->max_priority < b->max_priority ? -1 : 1;
	if (a->priority_sum != b->priority_sum)
		return a->priority_sum < b->priority_sum ? -1 : 1;
	if (a->count != b->count)
		return a->count < b->count ? -1 : 1;
	if (a->earliest_top_start != b->earliest_top_start)
		return a->earliest_top_start > b->earliest_top_start ? -1 : 1;
	return 0;
}

static void cost_empty(ft_victim_cost_t *c)
{
	memset(c, 0, sizeof(*c));
	c->max_priority = INT32_MIN;
}

static void cost_add(ft_victim_cost_t *c, const ft_holding_t *h, bool pdb)
{
	if (h->priority > c->max_priority || !c->count) {
		c->max_priority = h->priority;
		c->earliest_top_start = h->start_time;
	} else if (h->priority == c->max_priority &&
		   h->start_time < c->earliest_top_start) {
		c->earliest_top_start = h->start_time;
	}
	c->pdb_violations += pdb;
	c->priority_sum += (int64_t)h->priority + PRIORITY_SHIFT;
	c->count++;
}

/* Spend the budgets of holding `i`; true when one goes below zero. */
static bool spend(const ft_pdb_view_t *pdb, int32_t *spent, unsigned i)
{
	bool violates = false;

	if (!pdb || i >= FT_VICTIM_MAX)
		return false;
	for (unsigned k = 0; k < pdb->n_of[i]; k++) {
		unsigned b = pdb->of[i][k];
		spent[b]++;
		violates |= spent[b] > pdb->allowed[b];
	}
	return violates;
}

static void unspend(const ft_pdb_view_t *pdb, int32_t *spent, unsigned i)
{
	if (!pdb || i >= FT_VICTIM_MAX)
		return;
	for (unsigned k = 0; k < pdb->n_of[i]; k++)
		spent[pdb->of[i][k]]--;
}

void ft_victims_cost(ft_victim_cost_t *out, const ft_node_t *node,
		     const uint16_t *idx, unsigned n, const ft_pdb_view_t *pdb)
{
	int32_t spent[FT_PDB_MAX] = {0};

	cost_empty(out);
	for (unsigned i = 0; i < n; i++)
		cost_add(out, &node->holdings[idx[i]],
			 spend(pdb, spent, idx[i]));
}

static void give_back_cpus(ft_node_t *v, const ft_topology_t *t,
			   const ft_holding_t *h)
{
	ft_cpuset_t mine;

	if (ft_cpuset_empty(&h->cpus))
		return;
	for (unsigned m = 0; m < t->n_numa; m++) {
		ft_cpuset_and(&mine, &t->numa[m].cpus, &h->cpus);
		v->numa_free_cpus[m] += ft_cpuset_count(&mine);
	}
}

/*
 * A node with some holdings gone, for one demand. Placement counts the MIG
 * instances of unknown placement of the demand's profile from the holdings
 * themselves, not from a counter (place.c), so the copy has one holding:
 * what the holdings left hold of that profile, without a known placement.
 */
typedef struct {
	ft_node_t node;
	ft_holding_t unknown_mig;
} released_t;

static void keep_unknown_mig(released_t *out, const ft_node_t *node,
			     const char *profile, const uint16_t *idx,
			     unsigned n)
{
	ft_holding_t *u = &out->unknown_mig;

	memset(u, 0, sizeof(*u));
	memcpy(u->unknown_mig_profile, profile, FT_PROFILE_MAX);
	u->unknown_mig = profile[0] ? ft_node_unknown_mig(node, profile) : 0;
	for (unsigned i = 0; u->unknown_mig && i < n; i++)
		u->unknown_mig -=
		    ft_holding_unknown_mig(&node->holdings[idx[i]], profile);
	out->node.holdings = u;
	out->node.n_holdings = 1;
}

/*
 * `node` with the holdings in `idx` gone, for a demand of MIG `profile`
 * (adapted to the node: ft_place_adapt).
 */
static void release(released_t *out, const ft_node_t *node, const char *profile,
		    const uint16_t *idx, unsigned n)
{
	const ft_topology_t *t = node->topology;
	ft_node_t *v = &out->node;
	ft_cpuset_t free_cpus;

	ft_node_copy_value(v, node);
	keep_unknown_mig(out, node, profile, idx, n);
	for (unsigned i = 0; i < n; i++) {
		const ft_holding_t *h = &node->holdings[idx[i]];
		unsigned spread = (unsigned)__builtin_popcount(h->numa_nodes);
		v->gpus_used &= (uint16_t)~h->gpus;
		v->mig_used[0] &= ~h->mig[0];
		v->mig_used[1] &= ~h->mig[1];
		for (unsigned g = 0; g < t->n_gpus; g++)
			v->replicas_used[g] -=
			    h->replicas[g] < v->replicas_used[g]
				? h->replicas[g]
				: v->replicas_used[g];
		v->unknown_replicas -= h->unknown_replicas < v->unknown_replicas
					   ? h->unknown_replicas
					   : v->unknown_replicas;
		ft_cpuset_andnot(&v->cpus_used, &v->cpus_used, &h->cpus);
		v->unknown_gpus -= h->unknown_gpus < v->unknown_gpus
				       ? h->unknown_gpus
				       : v->unknown_gpus;
		v->unknown_cpus -= h->unknown_cpus < v->unknown_cpus
				       ? h->unknown_cpus
				       : v->unknown_cpus;
		for (unsigned m = 0; spread && m < t->n_numa; m++)
			if (h->numa_nodes & (1u << m))
				v->numa_free_memory_mib[m] +=
				    h->memory_mib / spread;
	}
	v->gpus_used |= t->reserved_gpus;
	ft_cpuset_or(&v->cpus_used, &v->cpus_used, &t->reserved_cpus);
	if (!node->conflicts) {
		/* Disjoint holdings: give back each one's CPUs, NUMA by NUMA.
		 */
		for (unsigned i = 0; i < n; i++)
			give_back_cpus(v, t, &node->holdings[idx[i]]);
		return;
	}
	for (unsigned m = 0; m < t->n_numa; m++) {
		ft_cpuset_andnot(&free_cpus, &t->numa[m].cpus, &v->cpus_used);
		v->numa_free_cpus[m] = ft_cpuset_count(&free_cpus);
	}
}

bool ft_victims_feasible(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level, const uint16_t *idx, unsigned n)
{
	released_t v;
	ft_demand_t a;

	if (!node->topology)
		return false;
	ft_place_adapt(&a, node->topology, d);
	release(&v, node, a.mig_profile, idx, n);
	return ft_place_fits_level(&v.node, d, level);
}

typedef struct {
	const ft_node_t *node;
	const ft_demand_t *d;	 /* adapted to the node (ft_place_adapt) */
	const ft_units_t *units; /* the units that may serve it */
	const ft_pdb_view_t *pdb;
	int32_t spent[FT_PDB_MAX];
	int domain; /* -1: any domain of `level` */
	ft_level_t level;
	const ft_victim_cost_t *limit; /* best-effort cap, or NULL */
	uint16_t cand[FT_VICTIM_MAX];
	uint8_t
	    kinds[FT_VICTIM_MAX]; /* KIND_* the candidate holds in the domain */
	unsigned n_cand;
	uint16_t chosen[FT_VICTIM_MAX];
	unsigned n_chosen;
	ft_victim_set_t *best;
	unsigned long visits;
} search_t;

static bool fits(search_t *s, const uint16_t *idx, unsigned n)
{
	released_t v;

	release(&v, s->node, s->d->mig_profile, idx, n);
	if (s->domain >= 0)
		return ft_place_fits_domain(&v.node, s->d, (unsigned)s->domain);
	return ft_place_fits_level(&v.node, s->d, s->level);
}

/* Would chosen + every candidate from `from` on be enough? */
static bool fits_with_rest(search_t *s, unsigned from)
{
	uint16_t all[FT_VICTIM_MAX];
	unsigned n = s->n_chosen;

	memcpy(all, s->chosen, n * sizeof(all[0]));
	for (unsigned i = from; i < s->n_cand; i++)
		all[n++] = s->cand[i];
	return fits(s, all, n);
}

static bool within_limit(const search_t *s, const ft_victim_cost_t *c)
{
	const ft_victim_cost_t *l = s->limit;

	return !l ||
	       (c->count <= l->count && c->pdb_violations <= l->pdb_violations);
}

static bool improves(const search_t *s, const ft_victim_cost_t *c)
{
	return within_limit(s, c) &&
	       (!s->best->found || ft_victims_compare(c, &s->best->cost) < 0);
}

static void record(search_t *s, const ft_victim_cost_t *c)
{
	s->best->found = true;
	s->best->cost = *c;
	s->best->n = s->n_chosen;
	memcpy(s->best->holdings, s->chosen,
	       s->n_chosen * sizeof(s->chosen[0]));
}

/* What a pod may give back that a demand can use. */
enum { KIND_GPU = 1, KIND_MIG = 2, KIND_CPU = 4 };

/* The kinds of unit `h` holds inside `dom` that could serve the demand. */
static unsigned holding_kinds(const ft_node_t *node, const ft_holding_t *h,
			      const ft_domain_t *dom, const ft_units_t *u)
{
	const ft_topology_t *t = node->topology;
	const ft_demand_t *d = &u->demand;
	unsigned kinds = 0;
	bool node_unknown_mig = false;
	ft_cpuset_t dom_cpus;

	for (unsigned i = 0; d->mig_count && i < node->n_holdings; i++)
		node_unknown_mig |= node->holdings[i].unknown_mig > 0;

	/*
	 * Units of unknown placement are charged node-wide, so while there are
	 * any of a kind, freeing that kind anywhere on the node helps too.
	 */
	if ((h->gpus & u->gpus & (node->unknown_gpus ? 0xffff : dom->gpus)) ||
	    (d->gpus && h->unknown_gpus))
		kinds |= KIND_GPU;
	/*
	 * Replicas of unknown placement are charged node-wide, so while there
	 * are any, freeing replicas outside the domain helps as well.
	 */
	for (unsigned g = 0; d->ranks && g < t->n_gpus; g++)
		if ((h->replicas[g] || (h->gpus & (1u << g))) &&
		    (u->gpus & (1u << g)) &&
		    ((dom->gpus & (1u << g)) || node->unknown_replicas))
			kinds |= KIND_GPU;
	if (d->ranks && h->unknown_replicas)
		kinds |= KIND_GPU;
	for (unsigned i = 0; d->mig_count && i < t->n_mig; i++)
		if ((h->mig[i / 64] >> (i % 64) & 1) &&
		    (u->mig[i / 64] >> (i % 64) & 1) &&
		    ((dom->gpus & (1u << t->mig[i].gpu)) || node_unknown_mig))
			kinds |= KIND_MIG;
	if (d->mig_count && h->unknown_mig)
		kinds |= KIND_MIG;
	if (!d->exclusive_cpus)
		return kinds;
	ft_cpuset_clear(&dom_cpus);
	for (unsigned m = 0; m < t->n_numa; m++)
		if (dom->numa_nodes & (1u << m))
			ft_cpuset_or(&dom_cpus, &dom_cpus, &t->numa[m].cpus);
	if (ft_cpuset_intersects(&h->cpus, &dom_cpus) ||
	    (h->numa_nodes & dom->numa_nodes) || h->unknown_cpus ||
	    (node->unknown_cpus && !ft_cpuset_empty(&h->cpus)))
		kinds |= KIND_CPU;
	return kinds;
}

/*
 * The kinds the domain is short of on `v` (a node with some pods released):
 * each kind checked alone, the node-wide unknown usage included. Evicting a
 * pod that holds only kinds not short never helps, so such pods are never
 * candidates, and a feasible completion must take a holder of every short
 * kind: the lower bound of dfs().
 */
static unsigned short_kinds(const ft_node_t *v, const ft_demand_t *d,
			    unsigned domain)
{
	ft_demand_t part = *d;
	unsigned kinds = 0;

	part.mig_count = 0;
	part.exclusive_cpus = 0;
	if ((d->gpus || d->ranks) && !ft_place_fits_domain(v, &part, domain))
		kinds |= KIND_GPU;
	part = *d;
	part.gpus = 0;
	part.ranks = 0;
	part.exclusive_cpus = 0;
	if (d->mig_count && !ft_place_fits_domain(v, &part, domain))
		kinds |= KIND_MIG;
	part = *d;
	part.gpus = 0;
	part.ranks = 0;
	part.mig_count = 0;
	if (d->exclusive_cpus && !ft_place_fits_domain(v, &part, domain))
		kinds |= KIND_CPU;
	return kinds;
}

/*
 * A lower bound on any feasible completion of the chosen set: it must add a
 * holder of every kind still short, so at least one more pod, whose
 * priority is at least the cheapest such holder's. False when some short
 * kind has no holder left (the branch cannot succeed).
 */
static bool completion_bound(const search_t *s, unsigned i, unsigned short_k,
			     const ft_victim_cost_t *cost,
			     ft_victim_cost_t *out)
{
	int32_t top = INT32_MIN, cheapest = INT32_MAX;

	for (unsigned k = KIND_GPU; k <= KIND_CPU; k <<= 1) {
		int32_t lo = INT32_MAX;
		if (!(short_k & k))
			continue;
		for (unsigned j = i; j < s->n_cand; j++)
			if ((s->kinds[j] & k) &&
			    s->node->holdings[s->cand[j]].priority < lo)
				lo = s->node->holdings[s->cand[j]].priority;
		if (lo == INT32_MAX)
			return false;
		top = lo > top ? lo : top;
		cheapest = lo < cheapest ? lo : cheapest;
	}
	*out = *cost;
	if (top > out->max_priority || !out->count)
		out->max_priority = top;
	out->priority_sum += (int64_t)cheapest + PRIORITY_SHIFT;
	out->count++;
	return true;
}

/* Is `lb` worse than the best set on the keys a completion cannot lower? */
static bool bound_prunes(const search_t *s, const ft_victim_cost_t *lb)
{
	const ft_victim_cost_t *b = &s->best->cost;

	if (s->limit && (lb->count > s->limit->count ||
			 lb->pdb_violations > s->limit->pdb_violations))
		return true;
	if (!s->best->found)
		return false;
	if (lb->pdb_violations != b->pdb_violations)
		return lb->pdb_violations > b->pdb_violations;
	if (lb->max_priority != b->max_priority)
		return lb->max_priority > b->max_priority;
	if (lb->priority_sum != b->priority_sum)
		return lb->priority_sum > b->priority_sum;
	return lb->count > b->count;
}

static void dfs(search_t *s, unsigned i, ft_victim_cost_t cost)
{
	const ft_holding_t *h;
	ft_victim_cost_t with, lb;
	unsigned short_k;
	released_t v;

	if (++s->visits > VISIT_BUDGET) {
		s->best->exact = false;
		return;
	}
	release(&v, s->node, s->d->mig_profile, s->chosen, s->n_chosen);
	short_k = short_kinds(&v.node, s->d, (unsigned)s->domain);
	if (!short_k &&
	    ft_place_fits_domain(&v.node, s->d, (unsigned)s->domain)) {
		if (improves(s, &cost))
			record(s, &cost);
		return;
	}
	if (i == s->n_cand || !completion_bound(s, i, short_k, &cost, &lb) ||
	    bound_prunes(s, &lb) || !fits_with_rest(s, i))
		return;
	h = &s->node->holdings[s->cand[i]];
	with = cost;
	cost_add(&with, h, spend(s->pdb, s->spent, s->cand[i]));
	if (improves(s, &with)) {
		s->chosen[s->n_chosen++] = s->cand[i];
		dfs(s, i + 1, with);
		s->n_chosen--;
	}
	unspend(s->pdb, s->spent, s->cand[i]);
	dfs(s, i + 1, cost);
}

/* Does `h` hold units of `dom` that could serve the demand? */
/* Cheap candidates first: no PDB, low priority, recently started. */
static bool before(const ft_node_t *node, const ft_pdb_view_t *pdb, uint16_t a,
		   uint16_t b)
{
	const ft_holding_t *x = &node->holdings[a], *y = &node->holdings[b];
	bool pa = pdb && a < FT_VICTIM_MAX && pdb->n_of[a];
	bool pb = pdb && b < FT_VICTIM_MAX && pdb->n_of[b];

	if (pa != pb)
		return !pa;
	if (x->priority != y->priority)
		return x->priority < y->priority;
	return x->start_time > y->start_time;
}

static void collect(search_t *s, int32_t priority, const ft_domain_t *dom,
		    unsigned wanted)
{
	const ft_node_t *node = s->node;

	s->n_cand = 0;
	for (unsigned i = 0; i < node->n_holdings && s->n_cand < FT_VICTIM_MAX;
	     i++) {
		const ft_holding_t *h = &node->holdings[i];
		unsigned kinds = holding_kinds(node, h, dom, s->units) & wanted;
		unsigned j;
		if (h->priority >= priority || !kinds)
			continue;
		for (j = s->n_cand;
		     j > 0 && before(node, s->pdb, (uint16_t)i, s->cand[j - 1]);
		     j--) {
			s->cand[j] = s->cand[j - 1];
			s->kinds[j] = s->kinds[j - 1];
		}
		s->cand[j] = (uint16_t)i;
		s->kinds[j] = (uint8_t)kinds;
		s->n_cand++;
	}
}

/*
 * kube-scheduler's own heuristic, the starting bound of the exact search and
 * the answer above FT_VICTIM_EXACT_MAX candidates:
 * evict in cost order until it fits, then reprieve from the most expensive.
 */
static void greedy(search_t *s)
{
	ft_victim_cost_t cost;
	unsigned n = 0;

	while (n < s->n_cand && !fits(s, s->cand, n))
		n++;
	if (!fits(s, s->cand, n))
		return;
	memcpy(s->chosen, s->cand, n * sizeof(s->cand[0]));
	s->n_chosen = n;
	for (unsigned k = n; k-- > 0;) {
		uint16_t keep = s->chosen[k];
		memmove(&s->chosen[k], &s->chosen[k + 1],
			(s->n_chosen - k - 1) * sizeof(s->chosen[0]));
		s->n_chosen--;
		if (!fits(s, s->chosen, s->n_chosen)) {
			memmove(&s->chosen[k + 1], &s->chosen[k],
				(s->n_chosen - k) * sizeof(s->chosen[0]));
			s->chosen[k] = keep;
			s->n_chosen++;
		}
	}
	ft_victims_cost(&cost, s->node, s->chosen, s->n_chosen, s->pdb);
	if (improves(s, &cost))
		record(s, &cost);
}

static void search_domain(search_t *s, int32_t priority, int domain)
{
	ft_victim_cost_t empty;
	released_t v;

	s->domain = domain;
	s->visits = 0;
	release(&v, s->node, s->d->mig_profile, NULL, 0);
	collect(s, priority, &s->node->topology->domains[domain],
		short_kinds(&v.node, s->d, (unsigned)domain));
	/* The heuristic's set bounds the exact search from the start. */
	s->n_chosen = 0;
	greedy(s);
	s->n_chosen = 0;
	if (s->n_cand > FT_VICTIM_EXACT_MAX) {
		s->best->exact = false;
		return;
	}
	cost_empty(&empty);
	dfs(s, 0, empty);
}

/* Search every domain of `level`; FT_LEVEL_NODE checks counts only. */
static void search_level(ft_victim_set_t *best, const ft_node_t *node,
			 const ft_units_t *u, int32_t priority,
			 const ft_pdb_view_t *pdb, ft_level_t level,
			 const ft_victim_cost_t *limit)
{
	const ft_topology_t *t = node->topology;
	search_t s;

	memset(&s, 0, sizeof(s));
	s.node = node;
	s.d = &u->demand;
	s.units = u;
	s.pdb = pdb;
	s.level = level;
	s.limit = limit;
	s.best = best;
	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++)
		search_domain(&s, priority, (int)i);
}

static void finish(ft_victim_set_t *out, const ft_node_t *node,
		   const ft_demand_t *d)
{
	ft_verdict_t v;
	released_t after;

	release(&after, node, d->mig_profile, out->holdings, out->n);
	ft_place_filter(&v, &after.node, d);
	out->level = v.level;
	/* Victims by descending priority: kube-scheduler reads Pods[0]. */
	for (unsigned i = 1; i < out->n; i++) {
		uint16_t x = out->holdings[i];
		unsigned j = i;
		for (; j > 0 && node->holdings[out->holdings[j - 1]].priority <
				    node->holdings[x].priority;
		     j--)
			out->holdings[j] = out->holdings[j - 1];
		out->holdings[j] = x;
	}
}

void ft_victims_search(ft_victim_set_t *out, const ft_node_t *node,
		       const ft_demand_t *pod_demand, int32_t priority,
		       const ft_pdb_view_t *pdb_violating)
{
	const ft_demand_t *d;
	ft_level_t level;
	ft_victim_set_t alt;
	ft_units_t u;

	memset(out, 0, sizeof(*out));
	out->exact = true;
	out->level = FT_LEVEL_COUNT;
	if (!node->topology)
		return;
	/* The demand as the node reads it, and the units that may serve it. */
	ft_place_units(&u, node->topology, pod_demand);
	d = &u.demand;
	level = ft_place_effective_level(d);
	if (d->has_affinity && d->mode == FT_MODE_GUARANTEED) {
		search_level(out, node, &u, priority, pdb_violating, level,
			     NULL);
	} else {
		search_level(out, node, &u, priority, pdb_violating,
			     FT_LEVEL_NODE, NULL);
		for (unsigned l = level;
		     out->found && d->has_affinity && l < FT_LEVEL_NODE; l++) {
			memset(&alt, 0, sizeof(alt));
			alt.exact = true;
			search_level(&alt, node, &u, priority, pdb_violating,
				     (ft_level_t)l, &out->cost);
			if (alt.found) {
				alt.exact = alt.exact && out->exact;
				*out = alt;
				break;
			}
		}
	}
	if (out->found)
		finish(out, node, d);
}
