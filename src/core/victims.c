/*
 * Exact victim search for topology-aware preemption.
 *
 * For every affinity domain that could host the preemptor, the candidates are
 * the lower-priority pods whose eviction could give back something the
 * domain is short of: GPUs, MIG instances, replicas, pinned CPUs or memory
 * inside the domain, or units anywhere while the node as a whole is short
 * (usage of unknown placement counts node-wide). A depth-first branch and
 * bound over them finds the cheapest set after which the domain fits.
 *
 * What keeps it small and exact:
 * - a superset of a set is always costlier (every cost key grows or, at
 *   equal priority keys, the shifted sum grows), so a feasible set is never
 *   extended;
 * - a lower bound on every completion of a branch: each resource still
 *   short needs as many more pods as its largest givers take to cover it
 *   (knapsack-style), those pods cost at least the cheapest priorities left,
 *   and each short resource needs one of its givers;
 * - ties on the first four keys are cut by the start times that decide the
 *   fifth;
 * - pods of one priority, without budgets, that free the same amounts are
 *   interchangeable: only the latest-started ones are taken first.
 * The best set over all domains is the answer.
 *
 * Eviction is simulated on a ledger: a value copy of the node's usage that
 * counts the holders of every unit, so that a unit two pods claim (a
 * conflict) is freed only when both are gone; the node itself is never
 * changed. The preemptor's demand is read as placement reads it
 * (ft_place_units): translated on MIG-strategy single nodes, and only the
 * units that meet its capabilities (flextopo.io/requires) count. On a node
 * with shared GPUs the demand is ranks of replicas: evicting a holding gives
 * back its replicas, and a pod holding a shared GPU whole gives back all.
 */
#include <flextopo/victims.h>

#include <string.h>

#define PRIORITY_SHIFT ((int64_t)1 << 31)
#define NO_NUMA	       0xff

static const char *const fallback_names[FT_VICTIM_FALLBACKS] = {
    "exact", "too-many-pods", "visit-limit", "pdb-limit"};

const char *ft_victim_fallback_name(ft_victim_fallback_t f)
{
	return (unsigned)f < FT_VICTIM_FALLBACKS ? fallback_names[f]
						 : "unknown";
}

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
static bool spend_budgets(const ft_pdb_view_t *pdb, int32_t *spent, unsigned i)
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

static bool has_budgets(const ft_pdb_view_t *pdb, unsigned i)
{
	return pdb && i < FT_VICTIM_MAX && pdb->n_of[i];
}

/*
 * kube-scheduler's order of victims (pkg/scheduler/util/utils.go,
 * MoreImportantPod): higher priority first, then the earlier start; the
 * holding's position breaks the remaining ties.
 */
static bool more_important(const ft_node_t *node, uint16_t a, uint16_t b)
{
	const ft_holding_t *x = &node->holdings[a], *y = &node->holdings[b];

	if (x->priority != y->priority)
		return x->priority > y->priority;
	if (x->start_time != y->start_time)
		return x->start_time < y->start_time;
	return a < b;
}

/*
 * The pods of `idx` that violate a budget when evicted in kube-scheduler's
 * order (filterPodsWithPDBViolation walks the victims sorted so): the count
 * is a function of the set, and it never falls when a pod is added.
 */
static unsigned violations(const ft_node_t *node, const uint16_t *idx,
			   unsigned n, const ft_pdb_view_t *pdb)
{
	int32_t spent[FT_PDB_MAX] = {0};
	uint16_t sorted[FT_VICTIM_MAX];
	unsigned count = 0;

	if (!pdb || !pdb->n_budgets)
		return 0;
	for (unsigned i = 0; i < n && i < FT_VICTIM_MAX; i++) {
		unsigned j = i;
		for (; j > 0 && more_important(node, idx[i], sorted[j - 1]);
		     j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = idx[i];
	}
	for (unsigned i = 0; i < n && i < FT_VICTIM_MAX; i++)
		count += spend_budgets(pdb, spent, sorted[i]);
	return count;
}

void ft_victims_cost(ft_victim_cost_t *out, const ft_node_t *node,
		     const uint16_t *idx, unsigned n, const ft_pdb_view_t *pdb)
{
	cost_empty(out);
	for (unsigned i = 0; i < n; i++)
		cost_add(out, &node->holdings[idx[i]], false);
	out->pdb_violations = violations(node, idx, n, pdb);
}

/* The view's index of budget `b`, adding it; -1 when the view is full. */
static int view_budget(ft_pdb_view_t *out, const ft_pdb_t **seen,
		       const ft_pdb_t *b)
{
	for (unsigned k = 0; k < out->n_budgets; k++)
		if (seen[k] == b)
			return (int)k;
	if (out->n_budgets == FT_PDB_MAX)
		return -1;
	seen[out->n_budgets] = b;
	out->allowed[out->n_budgets] = b->disruptions_allowed;
	return (int)out->n_budgets++;
}

static void view_pod(ft_pdb_view_t *out, const ft_pdb_t **seen, unsigned i,
		     const ft_pod_t *pod, const ft_pdb_t *const *budgets,
		     unsigned n_budgets)
{
	for (unsigned b = 0; b < n_budgets; b++) {
		int k;
		if (!ft_pdb_counts(budgets[b], pod->ns, pod->name, pod->labels,
				   pod->n_labels))
			continue;
		if (i >= FT_VICTIM_MAX || out->n_of[i] == FT_PDB_PER_POD ||
		    (k = view_budget(out, seen, budgets[b])) < 0)
			out->truncated = true;
		else
			out->of[i][out->n_of[i]++] = (uint8_t)k;
	}
}

void ft_victims_pdb_view(ft_pdb_view_t *out, const ft_node_t *node,
			 const ft_pod_t *const *pods,
			 const ft_pdb_t *const *budgets, unsigned n_budgets)
{
	const ft_pdb_t *seen[FT_PDB_MAX];

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; n_budgets && i < node->n_holdings; i++)
		if (pods[i])
			view_pod(out, seen, i, pods[i], budgets, n_budgets);
}

bool ft_victims_holds_units(const ft_holding_t *h)
{
	bool replicas = false;

	for (unsigned g = 0; g < FT_GPU_MAX; g++)
		replicas |= h->replicas[g] != 0;
	return h->gpus || !ft_mig_mask_empty(h->mig) || replicas ||
	       !ft_cpuset_empty(&h->cpus) || h->unknown_gpus ||
	       h->unknown_mig || h->unknown_replicas || h->unknown_cpus ||
	       (h->numa_nodes && h->memory_mib);
}

unsigned ft_victims_with_proposed(uint16_t *out, unsigned cap,
				  const ft_node_t *node,
				  const ft_victim_set_t *set,
				  const char *const *proposed,
				  unsigned n_proposed)
{
	unsigned n = set->n;

	memcpy(out, set->holdings, n * sizeof(out[0]));
	for (unsigned i = 0; i < n_proposed && n < cap; i++) {
		const ft_holding_t *h = ft_node_find_holding(node, proposed[i]);
		if (h && !ft_victims_holds_units(h))
			out[n++] = (uint16_t)(h - node->holdings);
	}
	return n;
}

/* ---- the ledger: a node with some holdings released ---------------------- */

typedef struct {
	ft_node_t v; /* the node's value with the released pods gone */
	/*
	 * Placement counts the MIG instances of unknown placement of the
	 * demand's profile from the holdings themselves (place.c), so `v` has
	 * one holding: what the holdings left hold of it.
	 */
	ft_holding_t unknown_mig;
	const char *profile; /* the demand's MIG profile, adapted */
	uint16_t gpu_holders[FT_GPU_MAX];
	uint16_t mig_holders[FT_MIG_MAX];
	uint16_t cpu_holders[FT_CPU_MAX];
	uint8_t numa_of_cpu[FT_CPU_MAX]; /* NO_NUMA outside every NUMA node */
	uint32_t replicas[FT_GPU_MAX];	 /* held per shared GPU, uncapped */
	uint64_t memory_charged[FT_NUMA_MAX]; /* MiB charged per NUMA node */
} ledger_t;

static void count_holders(ledger_t *l, const ft_holding_t *h)
{
	unsigned spread = (unsigned)__builtin_popcount(h->numa_nodes);

	for (unsigned m = h->gpus; m; m &= m - 1)
		l->gpu_holders[__builtin_ctz(m)]++;
	for (unsigned k = 0; k < 2; k++)
		for (uint64_t m = h->mig[k]; m; m &= m - 1)
			l->mig_holders[k * 64 + (unsigned)__builtin_ctzll(m)]++;
	for (unsigned w = 0; w < FT_CPU_MAX / 64; w++)
		for (uint64_t m = h->cpus.w[w]; m; m &= m - 1)
			l->cpu_holders[w * 64 + (unsigned)__builtin_ctzll(m)]++;
	for (unsigned g = 0; g < FT_GPU_MAX; g++)
		l->replicas[g] += h->replicas[g];
	for (unsigned m = h->numa_nodes; spread && m; m &= m - 1)
		l->memory_charged[__builtin_ctz(m)] += h->memory_mib / spread;
}

static void map_cpus(ledger_t *l, const ft_topology_t *t)
{
	memset(l->numa_of_cpu, NO_NUMA, sizeof(l->numa_of_cpu));
	for (unsigned n = 0; n < t->n_numa; n++)
		for (unsigned w = 0; w < FT_CPU_MAX / 64; w++)
			for (uint64_t m = t->numa[n].cpus.w[w]; m; m &= m - 1)
				l->numa_of_cpu[w * 64 +
					       (unsigned)__builtin_ctzll(m)] =
				    (uint8_t)n;
}

/* The ledger of `node` (topology present) with nothing released. */
static void ledger_init(ledger_t *l, const ft_node_t *node, const char *profile)
{
	ft_holding_t *u = &l->unknown_mig;

	memset(l, 0, sizeof(*l));
	ft_node_copy_value(&l->v, node);
	l->profile = profile;
	map_cpus(l, node->topology);
	for (unsigned i = 0; i < node->n_holdings; i++)
		count_holders(l, &node->holdings[i]);
	memcpy(u->unknown_mig_profile, profile, FT_PROFILE_MAX);
	u->unknown_mig = profile[0] ? ft_node_unknown_mig(node, profile) : 0;
	l->v.holdings = u;
	l->v.n_holdings = 1;
}

/*
 * One holder of each of `h`'s GPUs and MIG instances fewer (`give` false:
 * one more). A unit is free when no holder is left and the topology does
 * not reserve it.
 */
static void move_devices(ledger_t *l, const ft_holding_t *h, bool give)
{
	const ft_topology_t *t = l->v.topology;

	for (unsigned m = h->gpus; m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		uint16_t bit = (uint16_t)(1u << g);
		l->gpu_holders[g] =
		    (uint16_t)(l->gpu_holders[g] + (give ? -1 : 1));
		if (!l->gpu_holders[g] && !(t->reserved_gpus & bit))
			l->v.gpus_used &= (uint16_t)~bit;
		else
			l->v.gpus_used |= bit;
	}
	for (unsigned k = 0; k < 2; k++)
		for (uint64_t m = h->mig[k]; m; m &= m - 1) {
			unsigned b = (unsigned)__builtin_ctzll(m);
			uint16_t *n = &l->mig_holders[k * 64 + b];
			*n = (uint16_t)(*n + (give ? -1 : 1));
			if (*n)
				l->v.mig_used[k] |= UINT64_C(1) << b;
			else
				l->v.mig_used[k] &= ~(UINT64_C(1) << b);
		}
}

static void move_cpu(ledger_t *l, unsigned c, bool give)
{
	const ft_topology_t *t = l->v.topology;
	unsigned numa = l->numa_of_cpu[c];
	bool was_free = !ft_cpuset_has(&l->v.cpus_used, c);

	l->cpu_holders[c] = (uint16_t)(l->cpu_holders[c] + (give ? -1 : 1));
	if (!l->cpu_holders[c] && !ft_cpuset_has(&t->reserved_cpus, c))
		l->v.cpus_used.w[c / 64] &= ~(UINT64_C(1) << (c % 64));
	else
		ft_cpuset_add(&l->v.cpus_used, c);
	if (numa != NO_NUMA && was_free != !ft_cpuset_has(&l->v.cpus_used, c))
		l->v.numa_free_cpus[numa] += was_free ? (uint32_t)-1 : 1;
}

static uint64_t sub_floor(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static void move_memory(ledger_t *l, const ft_holding_t *h, bool give)
{
	const ft_topology_t *t = l->v.topology;
	unsigned spread = (unsigned)__builtin_popcount(h->numa_nodes);

	for (unsigned m = h->numa_nodes; spread && m; m &= m - 1) {
		unsigned n = (unsigned)__builtin_ctz(m);
		uint64_t share = h->memory_mib / spread;
		l->memory_charged[n] += give ? -share : share;
		l->v.numa_free_memory_mib[n] =
		    sub_floor(t->numa[n].memory_mib, l->memory_charged[n]);
	}
}

static uint32_t move_count(uint32_t have, uint32_t n, bool give)
{
	return give ? have - n : have + n;
}

/* Release holding `h` (`give`), or take it back after a release. */
static void ledger_move(ledger_t *l, const ft_holding_t *h, bool give)
{
	ft_node_t *v = &l->v;

	move_devices(l, h, give);
	for (unsigned w = 0; w < FT_CPU_MAX / 64; w++)
		for (uint64_t m = h->cpus.w[w]; m; m &= m - 1)
			move_cpu(l, w * 64 + (unsigned)__builtin_ctzll(m),
				 give);
	for (unsigned g = 0; g < FT_GPU_MAX; g++) {
		if (!h->replicas[g])
			continue;
		l->replicas[g] =
		    move_count(l->replicas[g], h->replicas[g], give);
		v->replicas_used[g] =
		    (uint8_t)(l->replicas[g] > UINT8_MAX ? UINT8_MAX
							 : l->replicas[g]);
	}
	move_memory(l, h, give);
	v->unknown_gpus = move_count(v->unknown_gpus, h->unknown_gpus, give);
	v->unknown_cpus = move_count(v->unknown_cpus, h->unknown_cpus, give);
	v->unknown_replicas =
	    move_count(v->unknown_replicas, h->unknown_replicas, give);
	l->unknown_mig.unknown_mig =
	    move_count(l->unknown_mig.unknown_mig,
		       ft_holding_unknown_mig(h, l->profile), give);
}

static void ledger_release(ledger_t *l, const ft_node_t *node,
			   const uint16_t *idx, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ledger_move(l, &node->holdings[idx[i]], true);
}

bool ft_victims_feasible(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level, const uint16_t *idx, unsigned n)
{
	ledger_t l;
	ft_demand_t a;

	if (!node->topology)
		return false;
	ft_place_adapt(&a, node->topology, d);
	ledger_init(&l, node, a.mig_profile);
	ledger_release(&l, node, idx, n);
	return ft_place_fits_level(&l.v, d, level);
}

/* ---- what a domain is short of, and what each pod could give back -------- */

/* The resources of a room, each checked in the domain and node-wide. */
enum { RES_GPUS, RES_SHARED, RES_MIG, RES_CPUS, RES_MEMORY, RESOURCES };
#define ROWS (2 * RESOURCES) /* the domain's, then the node's */

/* How much `r` lacks of each resource `d` needs (<= 0: enough). */
static void scope_deficit(int64_t *out, const ft_demand_t *d,
			  const ft_room_t *r)
{
	bool memory = d->exclusive_cpus && !r->memory_unknown;

	out[RES_GPUS] = (int64_t)d->gpus - r->gpus;
	out[RES_SHARED] = (int64_t)d->ranks - r->shared;
	out[RES_MIG] = (int64_t)d->mig_count - r->mig;
	out[RES_CPUS] = (int64_t)d->exclusive_cpus - r->cpus;
	out[RES_MEMORY] =
	    memory ? (int64_t)d->memory_mib - (int64_t)r->memory_mib : 0;
}

typedef struct {
	const ft_node_t *node;
	const ft_units_t *units; /* the demand adapted, and its units */
	const ft_pdb_view_t *pdb;
	ledger_t *ledger;
	unsigned domain;
	const ft_victim_cost_t *limit; /* best-effort cap, or NULL */
	ft_victim_set_t *best;
	unsigned long visits;
	/* Candidates, cheapest first, and what each could give back. */
	unsigned n_cand;
	uint16_t cand[FT_VICTIM_MAX];
	uint64_t gives[FT_VICTIM_MAX][ROWS];
	/* Interchangeable candidates share a class (symmetry). */
	uint16_t class_of[FT_VICTIM_MAX];
	bool closed[FT_VICTIM_MAX]; /* per class: a member was left out */
	/* Candidate positions by priority, and by what they give per row. */
	uint16_t by_priority[FT_VICTIM_MAX];
	uint16_t by_gift[ROWS][FT_VICTIM_MAX];
	bool short_rows[ROWS]; /* rows the domain is short of at the root */
	uint16_t chosen[FT_VICTIM_MAX];
	unsigned n_chosen;
} search_t;

/* The deficits of the domain and the node, as the ledger stands. */
static bool deficits(int64_t *out, const search_t *s)
{
	ft_room_t dom, all;
	bool fits = true;

	ft_place_rooms(&dom, &all, &s->ledger->v, s->units, s->domain);
	scope_deficit(out, &s->units->demand, &dom);
	scope_deficit(out + RESOURCES, &s->units->demand, &all);
	for (unsigned r = 0; r < ROWS; r++)
		fits &= out[r] <= 0;
	return fits;
}

/* Replicas (or, with a fraction, ranks) `h` could give back on `gpus`. */
static uint64_t shared_gift(const ft_topology_t *t, const ft_demand_t *d,
			    const ft_holding_t *h, uint16_t gpus)
{
	uint64_t n = 0;

	for (unsigned m = gpus; d->ranks && m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		n += d->gpu_fraction_milli   ? 1
		     : (h->gpus & (1u << g)) ? t->gpus[g].replicas
					     : h->replicas[g];
	}
	return n;
}

static unsigned mig_count(const uint64_t *a, const uint64_t *b,
			  const uint64_t *c)
{
	return (unsigned)(__builtin_popcountll(a[0] & b[0] & c[0]) +
			  __builtin_popcountll(a[1] & b[1] & c[1]));
}

static unsigned cpus_in(const ft_topology_t *t, const ft_holding_t *h,
			uint16_t numa_nodes)
{
	ft_cpuset_t mine;
	unsigned n = 0;

	for (unsigned m = numa_nodes; m; m &= m - 1) {
		ft_cpuset_and(&mine, &t->numa[__builtin_ctz(m)].cpus, &h->cpus);
		n += ft_cpuset_count(&mine);
	}
	return n;
}

/*
 * At most what evicting `h` gives back to each row of domain `dom`: the
 * units it holds there, whoever else claims them, so the bound holds with
 * conflicts too.
 */
static void gifts(uint64_t *out, const search_t *s, const ft_holding_t *h,
		  const ft_domain_t *dom)
{
	const ft_topology_t *t = s->node->topology;
	const ft_units_t *u = s->units;
	const ft_demand_t *d = &u->demand;
	static const uint64_t all[2] = {~UINT64_C(0), ~UINT64_C(0)};
	uint16_t touched = (h->gpus | ft_replica_gpus(h->replicas)) & u->gpus;
	unsigned spread = (unsigned)__builtin_popcount(h->numa_nodes);
	uint64_t share = spread ? h->memory_mib / spread : 0;
	uint64_t *n = out + RESOURCES;

	out[RES_GPUS] = (unsigned)__builtin_popcount(touched & dom->gpus);
	n[RES_GPUS] = (unsigned)__builtin_popcount(touched) + h->unknown_gpus;
	out[RES_SHARED] = shared_gift(t, d, h, touched & dom->gpus);
	n[RES_SHARED] = shared_gift(t, d, h, touched) + h->unknown_replicas;
	out[RES_MIG] = mig_count(h->mig, u->mig, dom->mig);
	n[RES_MIG] = mig_count(h->mig, u->mig, all) +
		     ft_holding_unknown_mig(h, d->mig_profile);
	out[RES_CPUS] = cpus_in(t, h, dom->numa_nodes);
	n[RES_CPUS] = ft_cpuset_count(&h->cpus) + h->unknown_cpus;
	out[RES_MEMORY] = share * (unsigned)__builtin_popcount(h->numa_nodes &
							       dom->numa_nodes);
	n[RES_MEMORY] = share * spread;
}

/* ---- candidates ---------------------------------------------------------- */

/* Cheap candidates first: no PDB, low priority, recently started. */
static bool cheaper(const search_t *s, uint16_t a, uint16_t b)
{
	const ft_holding_t *x = &s->node->holdings[a];
	const ft_holding_t *y = &s->node->holdings[b];
	bool pa = has_budgets(s->pdb, a), pb = has_budgets(s->pdb, b);

	if (pa != pb)
		return !pa;
	if (x->priority != y->priority)
		return x->priority < y->priority;
	return x->start_time > y->start_time;
}

static bool gives_short(const search_t *s, const uint64_t *g)
{
	for (unsigned r = 0; r < ROWS; r++)
		if (s->short_rows[r] && g[r])
			return true;
	return false;
}

static void note_fallback(ft_victim_set_t *set, ft_victim_fallback_t f)
{
	if (set->fallback == FT_VICTIM_EXACT)
		set->fallback = f;
	set->exact = false;
}

/* Insert holding `i` (giving `g`) in cost order; the dearest falls off. */
static void insert_candidate(search_t *s, uint16_t i, const uint64_t *g)
{
	unsigned j = s->n_cand;

	if (j == FT_VICTIM_MAX) {
		note_fallback(s->best, FT_VICTIM_TOO_MANY_PODS);
		if (!cheaper(s, i, s->cand[j - 1]))
			return;
		j--;
	} else {
		s->n_cand++;
	}
	for (; j > 0 && cheaper(s, i, s->cand[j - 1]); j--) {
		s->cand[j] = s->cand[j - 1];
		memcpy(s->gives[j], s->gives[j - 1], sizeof(s->gives[j]));
	}
	s->cand[j] = i;
	memcpy(s->gives[j], g, sizeof(s->gives[j]));
}

static void collect(search_t *s, int32_t priority)
{
	const ft_node_t *node = s->node;
	const ft_domain_t *dom = &node->topology->domains[s->domain];
	uint64_t g[ROWS];

	s->n_cand = 0;
	for (unsigned i = 0; i < node->n_holdings; i++) {
		const ft_holding_t *h = &node->holdings[i];
		if (h->priority >= priority)
			continue;
		gifts(g, s, h, dom);
		if (gives_short(s, g))
			insert_candidate(s, (uint16_t)i, g);
	}
}

/*
 * Can candidate b stand in for candidate a in any set? Both without
 * budgets, of one priority, freeing the same amounts on every row and the
 * same memory on the same NUMA nodes, holding no replica (a shared GPU's
 * replicas free ranks by threshold, not by amount) on a node without
 * conflicts (where what a pod frees depends on the others).
 */
static bool interchangeable(const search_t *s, unsigned a, unsigned b)
{
	const ft_holding_t *x = &s->node->holdings[s->cand[a]];
	const ft_holding_t *y = &s->node->holdings[s->cand[b]];
	uint8_t none[FT_GPU_MAX] = {0};

	return !s->node->conflicts && !has_budgets(s->pdb, s->cand[a]) &&
	       !has_budgets(s->pdb, s->cand[b]) && x->priority == y->priority &&
	       x->numa_nodes == y->numa_nodes &&
	       x->memory_mib == y->memory_mib &&
	       !memcmp(x->replicas, none, sizeof(none)) &&
	       !memcmp(y->replicas, none, sizeof(none)) &&
	       !memcmp(s->gives[a], s->gives[b], sizeof(s->gives[a]));
}

/* Classes of interchangeable candidates: the first member's position. */
static void classify(search_t *s)
{
	for (unsigned j = 0; j < s->n_cand; j++) {
		unsigned k = 0;
		while (k < j &&
		       !(s->class_of[k] == k && interchangeable(s, k, j)))
			k++;
		s->class_of[j] = (uint16_t)k;
		s->closed[j] = false;
	}
}

/* Positions 0..n sorted by `key` descending (insertion sort, stable). */
static void sort_desc(uint16_t *out, unsigned n, const int64_t *key)
{
	for (unsigned j = 0; j < n; j++) {
		unsigned k = j;
		for (; k > 0 && key[out[k - 1]] < key[j]; k--)
			out[k] = out[k - 1];
		out[k] = (uint16_t)j;
	}
}

static void order(search_t *s)
{
	int64_t key[FT_VICTIM_MAX];

	for (unsigned j = 0; j < s->n_cand; j++)
		key[j] = -(int64_t)s->node->holdings[s->cand[j]].priority;
	sort_desc(s->by_priority, s->n_cand, key);
	for (unsigned r = 0; r < ROWS; r++) {
		if (!s->short_rows[r])
			continue;
		for (unsigned j = 0; j < s->n_cand; j++)
			key[j] = (int64_t)s->gives[j][r];
		sort_desc(s->by_gift[r], s->n_cand, key);
	}
}

/* ---- branch and bound ---------------------------------------------------- */

/* Candidate position `j` may still join a set decided up to position i. */
static bool open_at(const search_t *s, unsigned j, unsigned i)
{
	return j >= i && !s->closed[s->class_of[j]];
}

static const ft_holding_t *holding_at(const search_t *s, unsigned j)
{
	return &s->node->holdings[s->cand[j]];
}

typedef struct {
	unsigned pods;	       /* more pods any completion needs, at least */
	int32_t must_priority; /* a completion's highest priority, at least */
} need_t;

/*
 * What row `r` short by `deficit` needs: the fewest open candidates whose
 * gifts cover it, largest first, and the cheapest priority among its
 * givers (one of them must go). False when all of them cannot cover it.
 */
static bool row_need(need_t *out, const search_t *s, unsigned i, unsigned r,
		     int64_t deficit)
{
	int64_t covered = 0;
	int32_t lo = INT32_MAX;
	unsigned n = 0;

	for (unsigned k = 0; k < s->n_cand; k++) {
		unsigned j = s->by_gift[r][k];
		if (!s->gives[j][r])
			break;
		if (!open_at(s, j, i))
			continue;
		if (covered < deficit) {
			covered += (int64_t)s->gives[j][r];
			n++;
		}
		if (holding_at(s, j)->priority < lo)
			lo = holding_at(s, j)->priority;
	}
	out->pods = n;
	out->must_priority = lo;
	return covered >= deficit;
}

static bool gives_to(const search_t *s, unsigned j, const bool *rows)
{
	for (unsigned r = 0; r < ROWS; r++)
		if (rows[r] && s->gives[j][r])
			return true;
	return false;
}

/*
 * A lower bound on the cost of every set that adds open candidates from
 * position `i` on to the chosen ones and fits; false when none fits. Only
 * pods giving to a row still short can be in a cheapest completion (one
 * without them fits too), so the bound counts those alone: at least
 * need.pods of them, the cheapest need.pods - 1 priorities summed, and a
 * last one no cheaper than the next, nor than the cheapest giver of each
 * short row (one of which must go).
 */
static bool lower_bound(ft_victim_cost_t *out, const search_t *s, unsigned i,
			const int64_t *deficit, const ft_victim_cost_t *cost)
{
	need_t need = {0, INT32_MIN}, row;
	bool live[ROWS];
	int32_t last = INT32_MIN;
	unsigned taken = 0;

	for (unsigned r = 0; r < ROWS; r++) {
		/* Rows not short at the root follow the domain's (mark_short).
		 */
		live[r] = deficit[r] > 0 && s->short_rows[r];
		if (!live[r])
			continue;
		if (!row_need(&row, s, i, r, deficit[r]))
			return false;
		need.pods = row.pods > need.pods ? row.pods : need.pods;
		if (row.must_priority > need.must_priority)
			need.must_priority = row.must_priority;
	}
	*out = *cost;
	if (!out->count)
		out->max_priority = INT32_MIN;
	need.pods = need.pods ? need.pods : 1;
	for (unsigned k = 0; k < s->n_cand && taken < need.pods; k++) {
		unsigned j = s->by_priority[k];
		int32_t p = holding_at(s, j)->priority;
		if (!open_at(s, j, i) || !gives_to(s, j, live))
			continue;
		if (++taken < need.pods)
			out->priority_sum += (int64_t)p + PRIORITY_SHIFT;
		last = p;
	}
	if (taken < need.pods)
		return false;
	last = need.must_priority > last ? need.must_priority : last;
	out->priority_sum += (int64_t)last + PRIORITY_SHIFT;
	out->max_priority = last > out->max_priority ? last : out->max_priority;
	out->count += need.pods;
	return true;
}

/*
 * The latest earliest-start a completion of the chosen set can have at
 * highest priority `top`: the chosen victims of that priority only lower
 * it; otherwise it is set by an open candidate of that priority.
 */
static int64_t start_bound(const search_t *s, unsigned i,
			   const ft_victim_cost_t *cost, int32_t top)
{
	int64_t best = INT64_MIN;

	if (cost->count && cost->max_priority == top)
		return cost->earliest_top_start;
	for (unsigned j = i; j < s->n_cand; j++)
		if (open_at(s, j, i) && holding_at(s, j)->priority == top &&
		    holding_at(s, j)->start_time > best)
			best = holding_at(s, j)->start_time;
	return best;
}

/* Can no completion, costing at least `lb`, beat the best set? */
static bool bound_prunes(const search_t *s, unsigned i,
			 const ft_victim_cost_t *lb,
			 const ft_victim_cost_t *cost)
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
	if (lb->count != b->count)
		return lb->count > b->count;
	return start_bound(s, i, cost, b->max_priority) <=
	       b->earliest_top_start;
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

static void dfs(search_t *s, unsigned i, ft_victim_cost_t cost);

/* The branch that evicts candidate `i` too. */
static void take(search_t *s, unsigned i, const ft_victim_cost_t *cost)
{
	const ft_holding_t *h = holding_at(s, i);
	ft_victim_cost_t with = *cost;

	s->chosen[s->n_chosen++] = s->cand[i];
	cost_add(&with, h, false);
	if (has_budgets(s->pdb, s->cand[i]))
		with.pdb_violations =
		    violations(s->node, s->chosen, s->n_chosen, s->pdb);
	if (improves(s, &with)) {
		ledger_move(s->ledger, h, true);
		dfs(s, i + 1, with);
		ledger_move(s->ledger, h, false);
	}
	s->n_chosen--;
}

static void dfs(search_t *s, unsigned i, ft_victim_cost_t cost)
{
	int64_t deficit[ROWS];
	ft_victim_cost_t lb;
	unsigned cls;
	bool was_closed;

	if (++s->visits > FT_VICTIM_VISITS) {
		note_fallback(s->best, FT_VICTIM_VISIT_LIMIT);
		return;
	}
	if (deficits(deficit, s)) {
		if (improves(s, &cost))
			record(s, &cost);
		return;
	}
	if (i == s->n_cand || !lower_bound(&lb, s, i, deficit, &cost) ||
	    bound_prunes(s, i, &lb, &cost))
		return;
	cls = s->class_of[i];
	if (!s->closed[cls])
		take(s, i, &cost);
	/* Leaving a member out leaves out the later ones of its class. */
	was_closed = s->closed[cls];
	s->closed[cls] = true;
	dfs(s, i + 1, cost);
	s->closed[cls] = was_closed;
}

/* Take back the first `n` candidates, released in greedy(). */
static void take_back(search_t *s, const bool *evicted, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (evicted[k])
			ledger_move(s->ledger, holding_at(s, k), false);
}

/*
 * kube-scheduler's own heuristic, the first bound of the exact search:
 * evict in cost order until it fits, then reprieve from the most expensive.
 */
static void greedy(search_t *s)
{
	bool evicted[FT_VICTIM_MAX];
	int64_t deficit[ROWS];
	ft_victim_cost_t cost;
	bool fits = false;
	unsigned n = 0;

	while (n < s->n_cand && !fits) {
		ledger_move(s->ledger, holding_at(s, n), true);
		evicted[n++] = true;
		fits = deficits(deficit, s);
	}
	for (unsigned k = n; fits && k-- > 0;) {
		ledger_move(s->ledger, holding_at(s, k), false);
		evicted[k] = !deficits(deficit, s);
		if (evicted[k])
			ledger_move(s->ledger, holding_at(s, k), true);
	}
	s->n_chosen = 0;
	for (unsigned k = 0; fits && k < n; k++)
		if (evicted[k])
			s->chosen[s->n_chosen++] = s->cand[k];
	take_back(s, evicted, n);
	ft_victims_cost(&cost, s->node, s->chosen, s->n_chosen, s->pdb);
	if (fits && improves(s, &cost))
		record(s, &cost);
	s->n_chosen = 0;
}

/*
 * The rows the domain is short of. A node-wide row counts only while usage
 * of unknown placement takes from it: otherwise the node has at least the
 * domain's room, so a set that fills the domain fills the node too, and a
 * pod that gives back only outside the domain is never worth evicting.
 */
static void mark_short(search_t *s, const int64_t *deficit)
{
	const ft_node_t *v = &s->ledger->v;
	const bool unknown[RESOURCES] = {
	    v->unknown_gpus != 0, v->unknown_replicas != 0,
	    s->ledger->unknown_mig.unknown_mig != 0, v->unknown_cpus != 0,
	    false};

	for (unsigned r = 0; r < RESOURCES; r++) {
		s->short_rows[r] = deficit[r] > 0;
		s->short_rows[RESOURCES + r] =
		    deficit[RESOURCES + r] > 0 && unknown[r];
	}
}

static void search_domain(search_t *s, int32_t priority, unsigned domain)
{
	int64_t deficit[ROWS];
	ft_victim_cost_t empty;

	s->domain = domain;
	s->n_chosen = 0;
	cost_empty(&empty);
	if (deficits(deficit, s)) {
		if (improves(s, &empty))
			record(s, &empty);
		return;
	}
	mark_short(s, deficit);
	collect(s, priority);
	classify(s);
	order(s);
	greedy(s);
	dfs(s, 0, empty);
}

/* Search every domain of `level`; FT_LEVEL_NODE checks counts only. */
static void search_level(ft_victim_set_t *best, ledger_t *ledger,
			 const ft_node_t *node, const ft_units_t *u,
			 int32_t priority, const ft_pdb_view_t *pdb,
			 ft_level_t level, const ft_victim_cost_t *limit)
{
	const ft_topology_t *t = node->topology;
	search_t search, *s = &search;

	/* The arrays are written before they are read: no need to clear. */
	s->node = node;
	s->units = u;
	s->pdb = pdb;
	s->ledger = ledger;
	s->limit = limit;
	s->best = best;
	s->visits = 0;
	s->n_cand = 0;
	s->n_chosen = 0;
	if (pdb && pdb->truncated)
		note_fallback(best, FT_VICTIM_PDB_LIMIT);
	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++)
		search_domain(s, priority, i);
	best->visits += s->visits;
}

static void set_init(ft_victim_set_t *set)
{
	memset(set, 0, sizeof(*set));
	set->exact = true;
	set->fallback = FT_VICTIM_EXACT;
	set->level = FT_LEVEL_COUNT;
}

/* The level reached after eviction; victims by descending priority. */
static void finish(ft_victim_set_t *out, ledger_t *ledger,
		   const ft_node_t *node, const ft_demand_t *d)
{
	ft_verdict_t v;

	ledger_release(ledger, node, out->holdings, out->n);
	ft_place_filter(&v, &ledger->v, d);
	out->level = v.level;
	/* kube-scheduler reads Pods[0]. */
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

/*
 * Best-effort: the cheapest set node-wide, unless a set reaching a tighter
 * level (the tightest first) evicts no more pods and violates no more
 * budgets.
 */
static void search_best_effort(ft_victim_set_t *out, ledger_t *ledger,
			       const ft_node_t *node, const ft_units_t *u,
			       int32_t priority, const ft_pdb_view_t *pdb)
{
	const ft_demand_t *d = &u->demand;
	ft_victim_set_t alt;

	search_level(out, ledger, node, u, priority, pdb, FT_LEVEL_NODE, NULL);
	for (unsigned l = ft_place_effective_level(d);
	     out->found && d->has_affinity && l < FT_LEVEL_NODE; l++) {
		set_init(&alt);
		search_level(&alt, ledger, node, u, priority, pdb,
			     (ft_level_t)l, &out->cost);
		out->visits += alt.visits;
		if (!alt.exact)
			note_fallback(out, alt.fallback);
		if (alt.found) {
			alt.visits = out->visits;
			alt.exact = out->exact;
			alt.fallback = out->fallback;
			*out = alt;
			return;
		}
	}
}

void ft_victims_search(ft_victim_set_t *out, const ft_node_t *node,
		       const ft_demand_t *pod_demand, int32_t priority,
		       const ft_pdb_view_t *pdb)
{
	const ft_demand_t *d;
	ledger_t ledger;
	ft_units_t u;

	set_init(out);
	if (!node->topology)
		return;
	/* The demand as the node reads it, and the units that may serve it. */
	ft_place_units(&u, node->topology, pod_demand);
	d = &u.demand;
	ledger_init(&ledger, node, d->mig_profile);
	if (d->has_affinity && d->mode == FT_MODE_GUARANTEED)
		search_level(out, &ledger, node, &u, priority, pdb,
			     ft_place_effective_level(d), NULL);
	else
		search_best_effort(out, &ledger, node, &u, priority, pdb);
	if (out->found)
		finish(out, &ledger, node, d);
}
