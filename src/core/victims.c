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

#include <stdlib.h>
#include <string.h>

#define PRIORITY_SHIFT ((int64_t)1 << 31)
#define NO_NUMA	       0xff

static const char *const fallback_names[FT_VICTIM_FALLBACKS] = {
    "exact",	 "too-many-pods", "visit-limit",
    "pdb-limit", "gang-limit",	  "out-of-memory"};

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

/* Add the cost of the pods of `u` (their budgets aside) to `c`. */
static void cost_merge(ft_victim_cost_t *c, const ft_victim_cost_t *u)
{
	if (!u->count)
		return;
	if (u->max_priority > c->max_priority || !c->count) {
		c->max_priority = u->max_priority;
		c->earliest_top_start = u->earliest_top_start;
	} else if (u->max_priority == c->max_priority &&
		   u->earliest_top_start < c->earliest_top_start) {
		c->earliest_top_start = u->earliest_top_start;
	}
	c->priority_sum += u->priority_sum;
	c->count += u->count;
}

static bool has_budgets(const ft_pdb_view_t *pdb, unsigned i)
{
	return pdb && i < FT_VICTIM_MAX && pdb->n_of[i];
}

/* ---- the disrupted pods, and the budgets they violate ---------------------
 */

/* A disrupted pod: a holding of the node, or a gang member elsewhere. */
typedef struct {
	int32_t priority;
	int64_t start_time;
	uint32_t key; /* the holding's position, or FT_VICTIM_MAX + remote's */
	uint8_t n_budgets;
	const uint8_t *budgets;
} disrupted_t;

/* The disrupted pods a search or a cost gathers; `n` of them. */
typedef struct {
	unsigned n;
	disrupted_t pods[FT_VICTIM_MAX + FT_GANG_REMOTE_MAX];
} disrupted_list_t;

static void disrupt_holding(disrupted_list_t *l, const ft_node_t *node,
			    const ft_pdb_view_t *pdb, uint16_t i)
{
	disrupted_t *p = &l->pods[l->n++];

	p->priority = node->holdings[i].priority;
	p->start_time = node->holdings[i].start_time;
	p->key = i;
	p->n_budgets = has_budgets(pdb, i) ? pdb->n_of[i] : 0;
	p->budgets = p->n_budgets ? pdb->of[i] : NULL;
}

static void disrupt_remote(disrupted_list_t *l, const ft_gang_view_t *gv,
			   const ft_pdb_view_t *pdb, uint32_t r)
{
	disrupted_t *p = &l->pods[l->n++];
	const ft_gang_remote_t *m = &gv->remote[r];

	p->priority = m->priority;
	p->start_time = m->start_time;
	p->key = FT_VICTIM_MAX + r;
	p->n_budgets = pdb ? m->n_budgets : 0;
	p->budgets = m->budgets;
}

/*
 * kube-scheduler's order of victims (pkg/scheduler/util/utils.go,
 * MoreImportantPod): higher priority first, then the earlier start; the
 * holding's position, then a member elsewhere's, breaks the remaining ties.
 */
static int more_important(const void *a, const void *b)
{
	const disrupted_t *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->start_time != y->start_time)
		return x->start_time < y->start_time ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/*
 * The pods of `l` that violate a budget when evicted in kube-scheduler's
 * order (filterPodsWithPDBViolation walks the victims sorted so): the count
 * is a function of the set, and it never falls when a pod is added. Sorts
 * `l`.
 */
static unsigned violations(disrupted_list_t *l, const ft_pdb_view_t *pdb)
{
	int32_t spent[FT_PDB_MAX] = {0};
	unsigned count = 0;

	if (!pdb || !pdb->n_budgets)
		return 0;
	qsort(l->pods, l->n, sizeof(l->pods[0]), more_important);
	for (unsigned i = 0; i < l->n; i++) {
		bool violates = false;
		for (unsigned k = 0; k < l->pods[i].n_budgets; k++) {
			unsigned b = l->pods[i].budgets[k];
			spent[b]++;
			violates |= spent[b] > pdb->allowed[b];
		}
		count += violates;
	}
	return count;
}

/* The cost of the disrupted pods of `l`, budgets included. */
static void cost_of(ft_victim_cost_t *out, disrupted_list_t *l,
		    const ft_pdb_view_t *pdb)
{
	cost_empty(out);
	for (unsigned i = 0; i < l->n; i++) {
		ft_holding_t h = {.priority = l->pods[i].priority,
				  .start_time = l->pods[i].start_time};
		cost_add(out, &h, false);
	}
	out->pdb_violations = violations(l, pdb);
}

void ft_victims_cost(ft_victim_cost_t *out, const ft_node_t *node,
		     const uint16_t *idx, unsigned n, const ft_pdb_view_t *pdb)
{
	(void)ft_victims_cost_gangs(out, NULL, NULL, node, idx, n, pdb, NULL,
				    INT32_MAX);
}

static unsigned gang_of(const ft_gang_view_t *gv, unsigned i)
{
	return gv && i < FT_VICTIM_MAX ? gv->of[i] : 0;
}

/* The highest priority among the members of gang `g` (1-based) elsewhere. */
static int32_t remote_top(const ft_gang_view_t *gv, unsigned g)
{
	const ft_victim_gang_t *gang = &gv->gangs[g - 1];
	int32_t top = INT32_MIN;

	for (uint32_t r = 0; r < gang->n_remote; r++)
		if (gv->remote[gang->first_remote + r].priority > top)
			top = gv->remote[gang->first_remote + r].priority;
	return top;
}

/* Does evicting `taken` members of gang `g` (1-based) break it? */
static bool breaks(const ft_gang_view_t *gv, unsigned g, unsigned taken)
{
	const ft_victim_gang_t *gang = &gv->gangs[g - 1];

	return taken && (gang->whole || taken > gang->slack);
}

static void disrupt_gang(disrupted_list_t *l, const ft_node_t *node,
			 const ft_pdb_view_t *pdb, const ft_gang_view_t *gv,
			 unsigned g)
{
	const ft_victim_gang_t *gang = &gv->gangs[g - 1];

	for (unsigned i = 0; i < node->n_holdings && i < FT_VICTIM_MAX; i++)
		if (gv->of[i] == g)
			disrupt_holding(l, node, pdb, (uint16_t)i);
	for (uint32_t r = 0; r < gang->n_remote; r++)
		disrupt_remote(l, gv, pdb, gang->first_remote + r);
}

bool ft_victims_cost_gangs(ft_victim_cost_t *out, uint16_t *broken,
			   unsigned *n_broken, const ft_node_t *node,
			   const uint16_t *idx, unsigned n,
			   const ft_pdb_view_t *pdb, const ft_gang_view_t *gv,
			   int32_t priority)
{
	disrupted_list_t list;
	uint16_t taken[FT_GANG_MAX + 1] = {0};
	unsigned nb = 0;
	bool allowed = true;

	list.n = 0;
	for (unsigned i = 0; i < n; i++)
		taken[gang_of(gv, idx[i])]++;
	/* A broken gang's members here come with the gang, once. */
	for (unsigned i = 0; i < n; i++) {
		unsigned g = gang_of(gv, idx[i]);
		if (!g || !breaks(gv, g, taken[g]))
			disrupt_holding(&list, node, pdb, idx[i]);
	}
	for (unsigned g = 1; gv && g <= gv->n_gangs; g++) {
		if (!breaks(gv, g, taken[g]))
			continue;
		disrupt_gang(&list, node, pdb, gv, g);
		if (broken)
			broken[nb] = (uint16_t)(g - 1);
		nb++;
	}
	for (unsigned i = 0; i < list.n; i++)
		allowed &= list.pods[i].priority < priority;
	if (n_broken)
		*n_broken = nb;
	cost_of(out, &list, pdb);
	return allowed;
}

/* The view's index of budget `b`, adding it; -1 when the view is full. */
static int view_budget(ft_pdb_view_t *out, const ft_pdb_t *b)
{
	for (unsigned k = 0; k < out->n_budgets; k++)
		if (out->budget[k] == b)
			return (int)k;
	if (out->n_budgets == FT_PDB_MAX)
		return -1;
	out->budget[out->n_budgets] = b;
	out->allowed[out->n_budgets] = b->disruptions_allowed;
	return (int)out->n_budgets++;
}

unsigned ft_victims_pdb_view_match(ft_pdb_view_t *view, uint8_t *out,
				   const ft_pod_t *pod,
				   const ft_pdb_t *const *budgets,
				   unsigned n_budgets)
{
	unsigned n = 0;

	for (unsigned b = 0; b < n_budgets; b++) {
		int k;
		if (!ft_pdb_counts(budgets[b], pod->ns, pod->name, pod->labels,
				   pod->n_labels))
			continue;
		if (n == FT_PDB_PER_POD ||
		    (k = view_budget(view, budgets[b])) < 0)
			view->truncated = true;
		else
			out[n++] = (uint8_t)k;
	}
	return n;
}

void ft_victims_pdb_view(ft_pdb_view_t *out, const ft_node_t *node,
			 const ft_pod_t *const *pods,
			 const ft_pdb_t *const *budgets, unsigned n_budgets)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; n_budgets && i < node->n_holdings; i++) {
		if (!pods[i])
			continue;
		if (i >= FT_VICTIM_MAX) {
			/* Its budgets, if any, cannot be counted. */
			uint8_t none[FT_PDB_PER_POD];
			out->truncated |=
			    ft_victims_pdb_view_match(out, none, pods[i],
						      budgets, n_budgets) != 0;
			continue;
		}
		out->n_of[i] = (uint8_t)ft_victims_pdb_view_match(
		    out, out->of[i], pods[i], budgets, n_budgets);
	}
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

/*
 * The gangs of a search: each gang's members on the node, whether a set may
 * break it, and, while the branch and bound runs, what its branch has done
 * to it. Gang `g` here is ft_gang_view_t.gangs[g - 1].
 */
typedef struct {
	const ft_gang_view_t *view; /* NULL: no gangs */
	uint16_t first[FT_GANG_MAX + 1];
	uint16_t n[FT_GANG_MAX + 1];
	uint16_t members[FT_VICTIM_MAX]; /* holdings, gang by gang */
	/* No member here or elsewhere outranks or matches the preemptor. */
	bool breakable[FT_GANG_MAX + 1];
	uint16_t taken[FT_GANG_MAX + 1]; /* members evicted one by one */
	bool broken[FT_GANG_MAX + 1];
} gangs_t;

/*
 * A candidate of the search: a holding evicted alone (`whole` false; `gang`
 * names the gang whose slack it spends, if any), or gang `gang` broken whole,
 * with its members here.
 */
typedef struct {
	uint16_t holding;
	uint16_t gang; /* 1-based; 0: a pod of no gang */
	bool whole;
	bool budgets;	       /* a pod it disrupts matches a budget */
	ft_victim_cost_t cost; /* over the pods it disrupts, budgets aside */
	uint64_t gives[ROWS];
} cand_t;

typedef struct {
	const ft_node_t *node;
	const ft_units_t *units; /* the demand adapted, and its units */
	const ft_pdb_view_t *pdb;
	gangs_t *gangs;
	ledger_t *ledger;
	unsigned domain;
	const ft_victim_cost_t *limit; /* best-effort cap, or NULL */
	ft_victim_set_t *best;
	unsigned long visits;
	/* Candidates, cheapest first. */
	unsigned n_cand;
	cand_t cand[FT_VICTIM_MAX];
	/* Interchangeable candidates share a class (symmetry). */
	uint16_t class_of[FT_VICTIM_MAX];
	bool closed[FT_VICTIM_MAX]; /* per class: a member was left out */
	/*
	 * Candidate positions by their cost's highest priority, priority sum
	 * and count, and by what they give per row.
	 */
	uint16_t by_key[3][FT_VICTIM_MAX];
	uint16_t by_gift[ROWS][FT_VICTIM_MAX];
	bool short_rows[ROWS]; /* rows the domain is short of at the root */
	/* Some candidate disrupts more than one pod (a gang broken whole). */
	bool multi;
	uint16_t chosen[FT_VICTIM_MAX]; /* candidate positions */
	unsigned n_chosen;
	disrupted_list_t scratch; /* for the budgets of the chosen */
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

/* ---- gangs --------------------------------------------------------------- */

/* The members here of each gang of `view`, and which gangs may break. */
static void gangs_init(gangs_t *out, const ft_node_t *node,
		       const ft_gang_view_t *view, int32_t priority)
{
	unsigned n =
	    node->n_holdings < FT_VICTIM_MAX ? node->n_holdings : FT_VICTIM_MAX;
	unsigned at = 0;

	memset(out, 0, sizeof(*out));
	out->view = view;
	for (unsigned g = 1; view && g <= view->n_gangs; g++) {
		out->first[g] = (uint16_t)at;
		out->breakable[g] = remote_top(view, g) < priority;
		for (unsigned i = 0; i < n; i++) {
			if (view->of[i] != g)
				continue;
			out->members[at++] = (uint16_t)i;
			out->breakable[g] &=
			    node->holdings[i].priority < priority;
		}
		out->n[g] = (uint16_t)(at - out->first[g]);
	}
}

/* May candidate `j` join the chosen ones, as its gang stands? */
static bool can_take(const search_t *s, unsigned j)
{
	const cand_t *c = &s->cand[j];
	const gangs_t *gs = s->gangs;

	if (!c->gang)
		return true;
	if (gs->broken[c->gang])
		return false;
	if (c->whole)
		return !gs->taken[c->gang];
	return gs->taken[c->gang] < gs->view->gangs[c->gang - 1].slack;
}

/* Release candidate `j` in the ledger (`give`), or take it back. */
static void cand_move(search_t *s, unsigned j, bool give)
{
	const cand_t *c = &s->cand[j];
	gangs_t *gs = s->gangs;

	if (!c->whole) {
		ledger_move(s->ledger, &s->node->holdings[c->holding], give);
		if (c->gang)
			gs->taken[c->gang] += give ? 1 : (uint16_t)-1;
		return;
	}
	for (unsigned k = 0; k < gs->n[c->gang]; k++)
		ledger_move(
		    s->ledger,
		    &s->node->holdings[gs->members[gs->first[c->gang] + k]],
		    give);
	gs->broken[c->gang] = give;
}

/* The pods candidate `j` disrupts, into `l`. */
static void cand_disrupts(disrupted_list_t *l, const search_t *s, unsigned j)
{
	const cand_t *c = &s->cand[j];

	if (c->whole)
		disrupt_gang(l, s->node, s->pdb, s->gangs->view, c->gang);
	else
		disrupt_holding(l, s->node, s->pdb, c->holding);
}

/* The budget violations of the chosen candidates' disrupted pods. */
static unsigned chosen_violations(search_t *s)
{
	s->scratch.n = 0;
	for (unsigned k = 0; k < s->n_chosen; k++)
		cand_disrupts(&s->scratch, s, s->chosen[k]);
	return violations(&s->scratch, s->pdb);
}

/* ---- candidates ---------------------------------------------------------- */

/* Cheap candidates first: no PDB, then the cheapest disrupted pods. */
static bool cheaper(const cand_t *a, const cand_t *b)
{
	if (a->budgets != b->budgets)
		return !a->budgets;
	return ft_victims_compare(&a->cost, &b->cost) < 0;
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

/* Insert `c` in cost order; the dearest falls off. */
static void insert_candidate(search_t *s, const cand_t *c)
{
	unsigned j = s->n_cand;

	if (j == FT_VICTIM_MAX) {
		note_fallback(s->best, FT_VICTIM_TOO_MANY_PODS);
		if (!cheaper(c, &s->cand[j - 1]))
			return;
		j--;
	} else {
		s->n_cand++;
	}
	for (; j > 0 && cheaper(c, &s->cand[j - 1]); j--)
		s->cand[j] = s->cand[j - 1];
	s->cand[j] = *c;
}

/* Holding `i` evicted alone, spending its gang's slack if it has one. */
static void holding_candidate(search_t *s, unsigned i, const ft_domain_t *dom)
{
	const ft_holding_t *h = &s->node->holdings[i];
	cand_t c = {.holding = (uint16_t)i,
		    .gang = (uint16_t)gang_of(s->gangs->view, i)};

	if (c.gang && s->gangs->view->gangs[c.gang - 1].whole)
		return;
	if (c.gang && !s->gangs->view->gangs[c.gang - 1].slack)
		return;
	gifts(c.gives, s, h, dom);
	if (!gives_short(s, c.gives))
		return;
	c.budgets = has_budgets(s->pdb, i);
	cost_empty(&c.cost);
	cost_add(&c.cost, h, false);
	insert_candidate(s, &c);
}

/* Gang `g` broken whole: what its members here give, what all cost. */
static void gang_candidate(search_t *s, unsigned g, const ft_domain_t *dom)
{
	const gangs_t *gs = s->gangs;
	cand_t c = {.gang = (uint16_t)g, .whole = true};
	disrupted_list_t *l = &s->scratch;
	uint64_t one[ROWS];

	if (!gs->breakable[g] || !gs->n[g])
		return;
	for (unsigned k = 0; k < gs->n[g]; k++) {
		gifts(one, s, &s->node->holdings[gs->members[gs->first[g] + k]],
		      dom);
		for (unsigned r = 0; r < ROWS; r++)
			c.gives[r] += one[r];
	}
	if (!gives_short(s, c.gives))
		return;
	l->n = 0;
	disrupt_gang(l, s->node, s->pdb, gs->view, g);
	cost_empty(&c.cost);
	for (unsigned k = 0; k < l->n; k++) {
		ft_holding_t h = {.priority = l->pods[k].priority,
				  .start_time = l->pods[k].start_time};
		cost_add(&c.cost, &h, false);
		c.budgets |= l->pods[k].n_budgets != 0;
	}
	insert_candidate(s, &c);
}

static void collect(search_t *s, int32_t priority)
{
	const ft_node_t *node = s->node;
	const ft_domain_t *dom = &node->topology->domains[s->domain];
	const gangs_t *gs = s->gangs;

	s->n_cand = 0;
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].priority < priority)
			holding_candidate(s, i, dom);
	for (unsigned g = 1; gs->view && g <= gs->view->n_gangs; g++)
		gang_candidate(s, g, dom);
}

/*
 * Can candidate b stand in for candidate a in any set? Both pods of no
 * gang and without budgets, of one priority, freeing the same amounts on
 * every row and the same memory on the same NUMA nodes, holding no replica
 * (a shared GPU's replicas free ranks by threshold, not by amount) on a
 * node without conflicts (where what a pod frees depends on the others).
 */
static bool interchangeable(const search_t *s, unsigned a, unsigned b)
{
	const cand_t *ca = &s->cand[a], *cb = &s->cand[b];
	const ft_holding_t *x = &s->node->holdings[ca->holding];
	const ft_holding_t *y = &s->node->holdings[cb->holding];
	uint8_t none[FT_GPU_MAX] = {0};

	return !s->node->conflicts && !ca->gang && !cb->gang && !ca->budgets &&
	       !cb->budgets && x->priority == y->priority &&
	       x->numa_nodes == y->numa_nodes &&
	       x->memory_mib == y->memory_mib &&
	       !memcmp(x->replicas, none, sizeof(none)) &&
	       !memcmp(y->replicas, none, sizeof(none)) &&
	       !memcmp(ca->gives, cb->gives, sizeof(ca->gives));
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

/* The keys of a candidate's cost the lower bound sums or maximises. */
enum { KEY_PRIORITY, KEY_SUM, KEY_COUNT, KEYS };

static int64_t cost_key(const cand_t *c, unsigned k)
{
	return k == KEY_PRIORITY ? c->cost.max_priority
	       : k == KEY_SUM	 ? c->cost.priority_sum
				 : (int64_t)c->cost.count;
}

static void order(search_t *s)
{
	int64_t key[FT_VICTIM_MAX];

	s->multi = false;
	for (unsigned j = 0; j < s->n_cand; j++)
		s->multi |= s->cand[j].cost.count > 1;
	for (unsigned k = 0; k < KEYS; k++) {
		for (unsigned j = 0; j < s->n_cand; j++)
			key[j] = -cost_key(&s->cand[j], k);
		sort_desc(s->by_key[k], s->n_cand, key);
	}
	for (unsigned r = 0; r < ROWS; r++) {
		if (!s->short_rows[r])
			continue;
		for (unsigned j = 0; j < s->n_cand; j++)
			key[j] = (int64_t)s->cand[j].gives[r];
		sort_desc(s->by_gift[r], s->n_cand, key);
	}
}

/* ---- branch and bound ---------------------------------------------------- */

/*
 * Candidate position `j` may still join a set decided up to position i: not
 * decided yet, its class not closed, and its gang not in the way.
 */
static bool open_at(const search_t *s, unsigned j, unsigned i)
{
	return j >= i && !s->closed[s->class_of[j]] && can_take(s, j);
}

typedef struct {
	unsigned cands; /* more candidates any completion needs, at least */
	/* Per key: what one of them costs at least (a short row's giver). */
	int64_t must[KEYS];
} need_t;

/*
 * What row `r` short by `deficit` needs: the fewest open candidates whose
 * gifts cover it, largest first, and the cheapest keys among its givers
 * (one of them must go). False when all of them cannot cover it.
 */
static bool row_need(need_t *out, const search_t *s, unsigned i, unsigned r,
		     int64_t deficit)
{
	int64_t covered = 0;
	unsigned n = 0;

	/* One pod each: the sum's order is the priority's, the count 1. */
	unsigned first = s->multi ? 0 : KEY_SUM;
	unsigned last = s->multi ? KEYS : KEY_SUM + 1;

	for (unsigned k = 0; k < KEYS; k++)
		out->must[k] = INT64_MAX;
	for (unsigned k = 0; k < s->n_cand; k++) {
		unsigned j = s->by_gift[r][k];
		if (!s->cand[j].gives[r])
			break;
		if (!open_at(s, j, i))
			continue;
		if (covered < deficit) {
			covered += (int64_t)s->cand[j].gives[r];
			n++;
		}
		for (unsigned key = first; key < last; key++)
			if (cost_key(&s->cand[j], key) < out->must[key])
				out->must[key] = cost_key(&s->cand[j], key);
	}
	out->cands = n;
	return covered >= deficit;
}

static bool gives_to(const search_t *s, unsigned j, const bool *rows)
{
	for (unsigned r = 0; r < ROWS; r++)
		if (rows[r] && s->cand[j].gives[r])
			return true;
	return false;
}

/*
 * Over the `n` open candidates of the smallest key `k` that give to a live
 * row: the sum of all but the largest (`head`) and the largest (`last`).
 * False when fewer than n are open.
 */
static bool smallest(int64_t *head, int64_t *last, const search_t *s,
		     unsigned i, const bool *live, unsigned k, unsigned n)
{
	unsigned taken = 0;

	*head = 0;
	for (unsigned q = 0; q < s->n_cand && taken < n; q++) {
		unsigned j = s->by_key[k][q];
		if (!open_at(s, j, i) || !gives_to(s, j, live))
			continue;
		*last = cost_key(&s->cand[j], k);
		if (++taken < n)
			*head += *last;
	}
	return taken == n;
}

/*
 * A lower bound on the cost of every set that adds open candidates from
 * position `i` on to the chosen ones and fits; false when none fits. Only
 * candidates giving to a row still short can be in a cheapest completion
 * (one without them fits too), so the bound counts those alone: at least
 * need.cands of them. Each key is bounded on its own (a completion's cost is
 * at least the bound on every key, so at least the bound in cost order):
 * the sum and the count by the cheapest need.cands - 1 candidates and a
 * last one no cheaper than the next, nor than the cheapest giver of each
 * short row (one of which must go); the highest priority by that last one.
 * With no gangs each candidate is one pod, and the count bound is need.cands.
 */
static bool lower_bound(ft_victim_cost_t *out, const search_t *s, unsigned i,
			const int64_t *deficit, const ft_victim_cost_t *cost)
{
	need_t need = {0, {INT64_MIN, INT64_MIN, INT64_MIN}}, row;
	int64_t head[KEYS], last[KEYS];
	bool live[ROWS];

	for (unsigned r = 0; r < ROWS; r++) {
		/* Rows not short at the root follow the domain's (mark_short).
		 */
		live[r] = deficit[r] > 0 && s->short_rows[r];
		if (!live[r])
			continue;
		if (!row_need(&row, s, i, r, deficit[r]))
			return false;
		need.cands = row.cands > need.cands ? row.cands : need.cands;
		for (unsigned k = 0; k < KEYS; k++)
			if (row.must[k] > need.must[k])
				need.must[k] = row.must[k];
	}
	need.cands = need.cands ? need.cands : 1;
	for (unsigned k = s->multi ? 0 : KEY_SUM;
	     k < (s->multi ? KEYS : KEY_SUM + 1); k++) {
		if (!smallest(&head[k], &last[k], s, i, live, k, need.cands))
			return false;
		last[k] = need.must[k] > last[k] ? need.must[k] : last[k];
	}
	if (!s->multi) {
		last[KEY_PRIORITY] = last[KEY_SUM] - PRIORITY_SHIFT;
		head[KEY_COUNT] = (int64_t)need.cands - 1;
		last[KEY_COUNT] = 1;
	}
	*out = *cost;
	if (!out->count)
		out->max_priority = INT32_MIN;
	out->priority_sum += head[KEY_SUM] + last[KEY_SUM];
	out->count += (unsigned)(head[KEY_COUNT] + last[KEY_COUNT]);
	if (last[KEY_PRIORITY] > out->max_priority)
		out->max_priority = (int32_t)last[KEY_PRIORITY];
	return true;
}

/*
 * The latest earliest-start a completion of the chosen set can have at
 * highest priority `top`: the chosen victims of that priority only lower
 * it; otherwise it is set by an open candidate whose pods reach that
 * priority.
 */
static int64_t start_bound(const search_t *s, unsigned i,
			   const ft_victim_cost_t *cost, int32_t top)
{
	int64_t best = INT64_MIN;

	if (cost->count && cost->max_priority == top)
		return cost->earliest_top_start;
	for (unsigned j = i; j < s->n_cand; j++)
		if (open_at(s, j, i) && s->cand[j].cost.max_priority == top &&
		    s->cand[j].cost.earliest_top_start > best)
			best = s->cand[j].cost.earliest_top_start;
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

/* The chosen candidates as holdings to evict, and the gangs they break. */
static void record(search_t *s, const ft_victim_cost_t *c)
{
	const gangs_t *gs = s->gangs;
	ft_victim_set_t *best = s->best;

	best->found = true;
	best->cost = *c;
	best->n = 0;
	best->n_broken = 0;
	for (unsigned k = 0; k < s->n_chosen; k++) {
		const cand_t *cand = &s->cand[s->chosen[k]];
		if (!cand->whole) {
			best->holdings[best->n++] = cand->holding;
			continue;
		}
		best->broken[best->n_broken++] = (uint16_t)(cand->gang - 1);
		for (unsigned m = 0; m < gs->n[cand->gang]; m++)
			best->holdings[best->n++] =
			    gs->members[gs->first[cand->gang] + m];
	}
	for (unsigned k = 1; k < best->n_broken; k++) {
		uint16_t g = best->broken[k];
		unsigned j = k;
		for (; j > 0 && best->broken[j - 1] > g; j--)
			best->broken[j] = best->broken[j - 1];
		best->broken[j] = g;
	}
}

static void dfs(search_t *s, unsigned i, ft_victim_cost_t cost);

/* The branch that evicts candidate `i` too. */
static void take(search_t *s, unsigned i, const ft_victim_cost_t *cost)
{
	ft_victim_cost_t with = *cost;

	s->chosen[s->n_chosen++] = (uint16_t)i;
	cost_merge(&with, &s->cand[i].cost);
	if (s->cand[i].budgets)
		with.pdb_violations = chosen_violations(s);
	if (improves(s, &with)) {
		cand_move(s, i, true);
		dfs(s, i + 1, with);
		cand_move(s, i, false);
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
	if (!s->closed[cls] && can_take(s, i))
		take(s, i, &cost);
	/* Leaving a member out leaves out the later ones of its class. */
	was_closed = s->closed[cls];
	s->closed[cls] = true;
	dfs(s, i + 1, cost);
	s->closed[cls] = was_closed;
}

/* The cost of the chosen candidates. */
static void chosen_cost(ft_victim_cost_t *out, search_t *s)
{
	cost_empty(out);
	for (unsigned k = 0; k < s->n_chosen; k++)
		cost_merge(out, &s->cand[s->chosen[k]].cost);
	out->pdb_violations = chosen_violations(s);
}

/*
 * kube-scheduler's own heuristic, the first bound of the exact search:
 * evict in cost order until it fits, then reprieve from the most expensive.
 */
static void greedy(search_t *s)
{
	bool evicted[FT_VICTIM_MAX] = {false};
	int64_t deficit[ROWS];
	ft_victim_cost_t cost;
	bool fits = false;
	unsigned n = 0;

	for (; n < s->n_cand && !fits; n++) {
		if (!can_take(s, n))
			continue;
		cand_move(s, n, true);
		evicted[n] = true;
		fits = deficits(deficit, s);
	}
	for (unsigned k = n; fits && k-- > 0;) {
		if (!evicted[k])
			continue;
		cand_move(s, k, false);
		evicted[k] = !deficits(deficit, s);
		if (evicted[k])
			cand_move(s, k, true);
	}
	s->n_chosen = 0;
	for (unsigned k = 0; k < n; k++)
		if (evicted[k])
			s->chosen[s->n_chosen++] = (uint16_t)k;
	for (unsigned k = n; k-- > 0;)
		if (evicted[k])
			cand_move(s, k, false);
	chosen_cost(&cost, s);
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

/* What every level's search shares. */
typedef struct {
	const ft_node_t *node;
	const ft_units_t *units;
	int32_t priority;
	const ft_pdb_view_t *pdb;
	ledger_t *ledger;
	gangs_t *gangs;
} request_t;

/* Search every domain of `level`; FT_LEVEL_NODE checks counts only. */
static void search_level(ft_victim_set_t *best, const request_t *q,
			 ft_level_t level, const ft_victim_cost_t *limit)
{
	const ft_topology_t *t = q->node->topology;
	search_t *s = malloc(sizeof(*s));

	if (!s) {
		note_fallback(best, FT_VICTIM_NO_MEMORY);
		return;
	}
	/* The arrays are written before they are read: no need to clear. */
	s->node = q->node;
	s->units = q->units;
	s->pdb = q->pdb;
	s->gangs = q->gangs;
	s->ledger = q->ledger;
	s->limit = limit;
	s->best = best;
	s->visits = 0;
	s->n_cand = 0;
	s->n_chosen = 0;
	if (q->pdb && q->pdb->truncated)
		note_fallback(best, FT_VICTIM_PDB_LIMIT);
	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++)
		search_domain(s, q->priority, i);
	best->visits += s->visits;
	free(s);
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
 * level (the tightest first) disrupts no more pods and violates no more
 * budgets.
 */
static void search_best_effort(ft_victim_set_t *out, const request_t *q)
{
	const ft_demand_t *d = &q->units->demand;
	ft_victim_set_t *alt = malloc(sizeof(*alt));

	search_level(out, q, FT_LEVEL_NODE, NULL);
	for (unsigned l = ft_place_effective_level(d);
	     alt && out->found && d->has_affinity && l < FT_LEVEL_NODE; l++) {
		set_init(alt);
		search_level(alt, q, (ft_level_t)l, &out->cost);
		out->visits += alt->visits;
		if (!alt->exact)
			note_fallback(out, alt->fallback);
		if (alt->found) {
			alt->visits = out->visits;
			alt->exact = out->exact;
			alt->fallback = out->fallback;
			*out = *alt;
			break;
		}
	}
	if (!alt)
		note_fallback(out, FT_VICTIM_NO_MEMORY);
	free(alt);
}

void ft_victims_search(ft_victim_set_t *out, const ft_node_t *node,
		       const ft_demand_t *pod_demand, int32_t priority,
		       const ft_pdb_view_t *pdb)
{
	ft_victims_search_gangs(out, node, pod_demand, priority, pdb, NULL);
}

void ft_victims_search_gangs(ft_victim_set_t *out, const ft_node_t *node,
			     const ft_demand_t *pod_demand, int32_t priority,
			     const ft_pdb_view_t *pdb,
			     const ft_gang_view_t *gangs)
{
	ledger_t ledger;
	ft_units_t u;
	gangs_t gs;
	request_t q = {node, &u, priority, pdb, &ledger, &gs};

	set_init(out);
	if (!node->topology)
		return;
	if (gangs && gangs->truncated)
		note_fallback(out, FT_VICTIM_GANG_LIMIT);
	/* The demand as the node reads it, and the units that may serve it. */
	ft_place_units(&u, node->topology, pod_demand);
	ledger_init(&ledger, node, u.demand.mig_profile);
	gangs_init(&gs, node, gangs, priority);
	if (u.demand.has_affinity && u.demand.mode == FT_MODE_GUARANTEED)
		search_level(out, &q, ft_place_effective_level(&u.demand),
			     NULL);
	else
		search_best_effort(out, &q);
	if (out->found)
		finish(out, &ledger, node, &u.demand);
}
