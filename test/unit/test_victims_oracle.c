/*
 * The victim search against an independent reference on many random nodes
 * of the shapes preemption meets: 8x A100 NVSwitch boxes, PCIe boxes with
 * bridged NVLink pairs, H100s with mixed MIG layouts and MIG-strategy single
 * nodes, PodDisruptionBudgets, GPUs and CPUs claimed twice, and crowded
 * nodes of ~110 pods where most pods hold nothing or outrank the preemptor
 * and the candidates share one priority.
 *
 * The reference enumerates every subset of the lower-priority pods that hold
 * something, sorts them by kube-scheduler's cost order (ft_victims_compare)
 * and takes the first after which the preemptor fits; "fits" builds the
 * node again without those pods (ft_node_build, ft_place_fits_level), so it
 * shares nothing with the search's simulated eviction. Best-effort
 * preemptors follow victims.h: the cheapest set node-wide, unless a set
 * reaching a tighter level costs no more victims and no more violations.
 *
 * Seeds are fixed. A disagreement prints the case shrunk to the fewest pods
 * that still disagree, as a reproduction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/mig.h>
#include <flextopo/victims.h>

#include "support.h"

#define POD_MAX	       128
#define CANDIDATES_MAX 14 /* the reference enumerates 2^14 subsets */
#define BUDGETS	       3

typedef enum {
	SHAPE_A100,
	SHAPE_PAIRS,
	SHAPE_MIG,
	SHAPE_MIG_SINGLE,
	SHAPE_CROWDED,
	SHAPES,
} shape_t;

static const char *const shape_names[SHAPES] = {
    "a100", "pcie-pairs", "h100-mig", "h100-mig-single", "crowded"};

typedef struct {
	shape_t shape;
	ft_topology_t *t; /* borrowed */
	unsigned n;
	ft_pod_t pods[POD_MAX];
	bool gone[POD_MAX];	  /* left out while shrinking */
	uint8_t budgets[POD_MAX]; /* bit k: the pod matches budget k */
	int32_t allowed[BUDGETS]; /* disruptions each budget allows */
	bool with_budgets;	  /* pass the budgets to the search */
	int32_t priority;	  /* the preemptor's */
	ft_demand_t d;		  /* the preemptor's */
	char why[256];		  /* the disagreement */
	unsigned victims;	  /* in the reference's answer */
} case_t;

static unsigned rnd(unsigned *seed, unsigned n)
{
	return (unsigned)rand_r(seed) % n;
}

/* ---- topologies ---------------------------------------------------------- */

/* One socket, NUMA 0 (CPUs 0-7) and NUMA 1 (CPUs 8-15), a switch each. */
static ft_topology_t *mig_box(const ft_mig_catalog_t *c, bool single)
{
	static const struct {
		unsigned gpu;
		const char *profile;
		unsigned start, size;
	} mixed[] = {
	    {0, "1g.10gb", 0, 1}, {0, "1g.10gb", 1, 1}, {0, "1g.10gb", 2, 1},
	    {0, "1g.10gb", 3, 1}, {0, "1g.10gb", 4, 1}, {0, "1g.10gb", 5, 1},
	    {0, "1g.10gb", 6, 1}, {1, "3g.40gb", 0, 4}, {1, "3g.40gb", 4, 4},
	    {2, "2g.20gb", 0, 2}, {2, "2g.20gb", 2, 2}, {2, "2g.20gb", 4, 2},
	    {2, "1g.10gb", 6, 1}};
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;
	char uuid[32];

	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	for (unsigned n = 0; n < 2; n++) {
		ft_cpuset_clear(&cpus);
		for (unsigned k = 0; k < 8; k++)
			ft_cpuset_add(&cpus, n * 8 + k);
		assert_int_equal(
		    ft_topology_add_numa(t, 0, (int)n, &cpus, 65536), (int)n);
		assert_int_equal(ft_topology_add_switch(t, n, (int)n), (int)n);
	}
	for (unsigned g = 0; g < (single ? 2u : 4u); g++) {
		snprintf(uuid, sizeof(uuid), "G-%u", g);
		assert_int_equal(
		    ft_topology_add_gpu(t, g / 2, g / 2, (int)g, uuid,
					"NVIDIA H100 80GB HBM3", 81920),
		    (int)g);
	}
	for (unsigned i = 0; i < sizeof(mixed) / sizeof(mixed[0]); i++) {
		unsigned gpu = single ? i % 2 : mixed[i].gpu;
		if (single && i >= 14)
			break;
		if (single)
			snprintf(uuid, sizeof(uuid), "MIG-%u-%u", gpu, i / 2);
		else
			snprintf(uuid, sizeof(uuid), "MIG-%u-%u", gpu,
				 mixed[i].start);
		assert_true(ft_topology_add_mig(
				t, gpu, single ? "1g.10gb" : mixed[i].profile,
				single ? i / 2 : mixed[i].start,
				single ? 1 : mixed[i].size, uuid) >= 0);
	}
	assert_int_equal(ft_topology_finish(t), 0);
	assert_int_equal(ft_mig_catalog_check(c, t), 0);
	ft_mig_catalog_apply(c, t);
	return t;
}

/* ---- random pods --------------------------------------------------------- */

/* What the pods of a case already hold, to give out units once. */
typedef struct {
	uint16_t gpus;
	uint64_t mig[2];
	ft_cpuset_t cpus;
} taken_t;

static void take_gpu(ft_pod_t *p, const ft_topology_t *t, taken_t *taken,
		     unsigned g)
{
	taken->gpus |= (uint16_t)(1u << g);
	p->allocation.gpu_uuids[p->allocation.n_gpus++] =
	    strdup(t->gpus[g].uuid);
	p->demand.gpus = p->allocation.n_gpus;
}

/*
 * Up to `n` whole GPUs; with `twice` a GPU another pod holds may be claimed
 * again (a conflict, as a pod placed without flextopo makes one).
 */
static void random_gpus(ft_pod_t *p, const ft_topology_t *t, taken_t *taken,
			unsigned n, bool twice, unsigned *seed)
{
	for (unsigned tries = 0; tries < 8 && p->allocation.n_gpus < n;
	     tries++) {
		unsigned g = rnd(seed, t->n_gpus);
		if (!(t->whole_gpus & (1u << g)) ||
		    ((taken->gpus & (1u << g)) && !twice))
			continue;
		take_gpu(p, t, taken, g);
	}
}

/* 1-4 pinned CPUs in one NUMA node, `twice` as for GPUs. */
static void random_cpus(ft_pod_t *p, const ft_topology_t *t, taken_t *taken,
			bool twice, unsigned *seed)
{
	const ft_cpuset_t *numa = &t->numa[rnd(seed, t->n_numa)].cpus;
	unsigned want = 1 + rnd(seed, 4);
	ft_cpuset_t free_cpus;
	unsigned got;

	if (twice)
		free_cpus = *numa;
	else
		ft_cpuset_andnot(&free_cpus, numa, &taken->cpus);
	got = ft_cpuset_take_lowest(&p->allocation.cpus, &free_cpus, want);
	if (got < want && !twice)
		return;
	ft_cpuset_or(&taken->cpus, &taken->cpus, &p->allocation.cpus);
	p->demand.exclusive_cpus = ft_cpuset_count(&p->allocation.cpus);
	p->demand.memory_mib = 1024 * rnd(seed, 8);
}

/* 1-2 free instances of one profile. */
static void random_instances(ft_pod_t *p, const ft_topology_t *t,
			     taken_t *taken, unsigned *seed)
{
	const char *profile = NULL;

	for (unsigned tries = 0; tries < 8 && p->allocation.n_mig < 2;
	     tries++) {
		unsigned i = rnd(seed, t->n_mig);
		if ((taken->mig[i / 64] >> (i % 64) & 1) ||
		    (profile && strcmp(profile, t->mig[i].profile) != 0))
			continue;
		taken->mig[i / 64] |= UINT64_C(1) << (i % 64);
		profile = t->mig[i].profile;
		p->allocation.mig_uuids[p->allocation.n_mig++] =
		    strdup(t->mig[i].uuid);
	}
	if (profile)
		snprintf(p->demand.mig_profile, sizeof(p->demand.mig_profile),
			 "%s", profile);
	p->demand.mig_count = p->allocation.n_mig;
}

/* A pod placed without flextopo: its demand, of unknown placement. */
static void unplaced(ft_pod_t *p, const ft_topology_t *t, unsigned *seed)
{
	const char *single = ft_topology_single_profile(t);

	if (t->n_mig && !single) {
		snprintf(p->demand.mig_profile, sizeof(p->demand.mig_profile),
			 "%s", t->mig[rnd(seed, t->n_mig)].profile);
		p->demand.mig_count = 1;
	} else {
		p->demand.gpus = 1;
	}
	p->demand.exclusive_cpus = rnd(seed, 3);
}

static void finish_pod(ft_pod_t *p)
{
	p->has_allocation = p->allocation.n_gpus || p->allocation.n_mig ||
			    !ft_cpuset_empty(&p->allocation.cpus);
	if (p->has_allocation)
		p->allocation.level = FT_LEVEL_NODE;
}

/* Priorities repeat, as batch jobs' do. */
static int32_t random_priority(unsigned *seed)
{
	static const int32_t prio[] = {0, 0, 0, 10, 20, 100};

	return prio[rnd(seed, 6)];
}

static ft_pod_t *new_pod(case_t *c, int32_t priority, unsigned *seed)
{
	ft_pod_t *p = &c->pods[c->n];
	char uid[16];

	snprintf(uid, sizeof(uid), "p%u", c->n);
	ft_test_pod(p, uid, priority, NULL, NULL, 0);
	p->start_time = (int64_t)rnd(seed, 5);
	c->n++;
	return p;
}

/* A pod of a GPU box: GPUs, pinned CPUs, both, none, or unplaced. */
static void random_gpu_pod(case_t *c, taken_t *taken, unsigned *seed)
{
	ft_pod_t *p = new_pod(c, random_priority(seed), seed);
	unsigned kind = rnd(seed, 10);
	bool twice = rnd(seed, 12) == 0;

	if (kind < 4)
		random_gpus(p, c->t, taken, 1 + rnd(seed, 2), twice, seed);
	if (kind >= 2 && kind < 7)
		random_cpus(p, c->t, taken, twice, seed);
	if (kind == 7)
		unplaced(p, c->t, seed);
	if (kind == 8)
		p->demand.cpu_millis = 500 * (1 + rnd(seed, 4));
	finish_pod(p);
}

static void random_mig_pod(case_t *c, taken_t *taken, unsigned *seed)
{
	ft_pod_t *p = new_pod(c, random_priority(seed), seed);
	unsigned kind = rnd(seed, 8);

	if (kind < 4)
		random_instances(p, c->t, taken, seed);
	else if (kind == 4)
		random_gpus(p, c->t, taken, 1, false, seed);
	else if (kind == 5)
		unplaced(p, c->t, seed);
	if (kind >= 3 && kind < 7)
		random_cpus(p, c->t, taken, false, seed);
	finish_pod(p);
}

/*
 * A crowded A100 box: 70-90 pods holding nothing (DaemonSets, CPU-only
 * pods), a few pods above the preemptor holding GPUs and CPUs, and up to
 * CANDIDATES_MAX candidates, nearly all of priority 0.
 */
static void random_crowd(case_t *c, taken_t *taken, unsigned *seed)
{
	unsigned idle = 70 + rnd(seed, 21);
	unsigned high = 2 + rnd(seed, 4);
	unsigned low = 8 + rnd(seed, CANDIDATES_MAX - 7);

	for (unsigned i = 0; i < idle; i++)
		new_pod(c, (int32_t)rnd(seed, 3) * 1000, seed)
		    ->demand.cpu_millis = 100;
	for (unsigned i = 0; i < high; i++) {
		ft_pod_t *p = new_pod(c, 5000, seed);
		random_gpus(p, c->t, taken, 1, false, seed);
		random_cpus(p, c->t, taken, false, seed);
		finish_pod(p);
	}
	for (unsigned i = 0; i < low && c->n < POD_MAX; i++) {
		ft_pod_t *p = new_pod(c, rnd(seed, 6) ? 0 : 10, seed);
		if (rnd(seed, 3) == 0)
			random_gpus(p, c->t, taken, 1, false, seed);
		random_cpus(p, c->t, taken, false, seed);
		finish_pod(p);
	}
}

/* ---- random preemptors and budgets ----------------------------------------
 */

static void random_demand(case_t *c, unsigned *seed)
{
	const ft_topology_t *t = c->t;
	ft_demand_t *d = &c->d;

	memset(d, 0, sizeof(*d));
	d->has_affinity = rnd(seed, 4) != 0;
	d->level = d->has_affinity ? (ft_level_t)rnd(seed, FT_LEVEL_COUNT)
				   : FT_LEVEL_NODE;
	d->mode = rnd(seed, 3) ? FT_MODE_GUARANTEED : FT_MODE_BEST_EFFORT;
	if (t->n_mig && rnd(seed, 4)) {
		snprintf(d->mig_profile, sizeof(d->mig_profile), "%s",
			 t->mig[rnd(seed, t->n_mig)].profile);
		d->mig_count = 1 + rnd(seed, 2);
	} else if (c->shape != SHAPE_CROWDED || rnd(seed, 2)) {
		d->gpus = 1 + rnd(seed, t->n_gpus > 4 ? 4 : 2);
	}
	if (c->shape == SHAPE_CROWDED || rnd(seed, 2))
		d->exclusive_cpus = c->shape == SHAPE_CROWDED
					? 8 + rnd(seed, 48)
					: rnd(seed, 8);
	if (d->exclusive_cpus && rnd(seed, 3) == 0)
		d->memory_mib = 4096 * (1 + rnd(seed, 8));
	if (rnd(seed, 8) == 0) {
		d->has_caps = true;
		d->caps.memory_mib = 40960;
	}
	c->priority = rnd(seed, 4) ? 1000 : 15;
}

static void random_budgets(case_t *c, unsigned *seed)
{
	c->with_budgets = rnd(seed, 2);
	for (unsigned k = 0; k < BUDGETS; k++)
		c->allowed[k] = (int32_t)rnd(seed, 3);
	for (unsigned i = 0; i < c->n; i++)
		c->budgets[i] = rnd(seed, 3) ? 0 : (uint8_t)(1 + rnd(seed, 7));
}

static void case_init(case_t *c, shape_t shape, ft_topology_t *t,
		      unsigned *seed)
{
	taken_t taken;
	unsigned n;

	memset(c, 0, sizeof(*c));
	memset(&taken, 0, sizeof(taken));
	c->shape = shape;
	c->t = t;
	if (shape == SHAPE_CROWDED) {
		random_crowd(c, &taken, seed);
	} else {
		n = 3 + rnd(seed, 9);
		for (unsigned i = 0; i < n; i++)
			if (t->n_mig)
				random_mig_pod(c, &taken, seed);
			else
				random_gpu_pod(c, &taken, seed);
	}
	random_budgets(c, seed);
	random_demand(c, seed);
}

static void case_dispose(case_t *c)
{
	for (unsigned i = 0; i < c->n; i++)
		ft_pod_dispose(&c->pods[i]);
}

/* ---- the node, its budgets, and the reference -----------------------------
 */

/* The case's node without `also` (pods by position, n_also of them). */
static ft_node_t *case_node(const case_t *c, const unsigned *also,
			    unsigned n_also, unsigned *pos)
{
	const ft_pod_t *list[POD_MAX];
	ft_node_t *node = NULL;
	unsigned n = 0;

	for (unsigned i = 0; i < c->n; i++) {
		bool left = c->gone[i];
		for (unsigned k = 0; k < n_also; k++)
			left |= also[k] == i;
		if (left)
			continue;
		if (pos)
			pos[n] = i;
		list[n++] = &c->pods[i];
	}
	assert_int_equal(
	    ft_node_build(&node, "n", c->t, NULL, NULL, list, NULL, n), 0);
	return node;
}

static void case_budgets(ft_pdb_view_t *out, const case_t *c,
			 const unsigned *pos, unsigned n)
{
	memset(out, 0, sizeof(*out));
	out->n_budgets = BUDGETS;
	memcpy(out->allowed, c->allowed, sizeof(c->allowed));
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < BUDGETS; k++)
			if (c->budgets[pos[i]] & (1u << k))
				out->of[i][out->n_of[i]++] = (uint8_t)k;
}

typedef struct {
	uint32_t mask; /* bit j: candidate j is evicted */
	ft_victim_cost_t cost;
} subset_t;

static int by_cost(const void *a, const void *b)
{
	return ft_victims_compare(&((const subset_t *)a)->cost,
				  &((const subset_t *)b)->cost);
}

/* What the reference works over: the node and its candidates. */
typedef struct {
	const case_t *c;
	const ft_node_t *node;
	const unsigned *pos; /* holding -> pod position in the case */
	unsigned n_cand;
	uint16_t cand[CANDIDATES_MAX + 1]; /* holdings */
	unsigned n_subsets;
	subset_t *subsets; /* every subset, cheapest first */
} reference_t;

/* Does the preemptor fit at `level` with the pods of `mask` deleted? */
static bool fits_without(const reference_t *r, uint32_t mask, ft_level_t level)
{
	unsigned gone[CANDIDATES_MAX];
	unsigned n = 0;
	ft_node_t *node;
	bool fits;

	for (unsigned j = 0; j < r->n_cand; j++)
		if (mask & (1u << j))
			gone[n++] = r->pos[r->cand[j]];
	node = case_node(r->c, gone, n, NULL);
	fits = ft_place_fits_level(node, &r->c->d, level);
	ft_node_unref(node);
	return fits;
}

static bool within(const ft_victim_cost_t *c, const ft_victim_cost_t *limit)
{
	return !limit || (c->count <= limit->count &&
			  c->pdb_violations <= limit->pdb_violations);
}

/* The cheapest subset within `limit` after which it fits at `level`. */
static const subset_t *cheapest(const reference_t *r, ft_level_t level,
				const ft_victim_cost_t *limit)
{
	for (unsigned k = 0; k < r->n_subsets; k++)
		if (within(&r->subsets[k].cost, limit) &&
		    fits_without(r, r->subsets[k].mask, level))
			return &r->subsets[k];
	return NULL;
}

static void reference_init(reference_t *r, const case_t *c,
			   const ft_node_t *node, const unsigned *pos,
			   const ft_pdb_view_t *pdb)
{
	uint16_t idx[CANDIDATES_MAX];

	memset(r, 0, sizeof(*r));
	r->c = c;
	r->node = node;
	r->pos = pos;
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].priority < c->priority &&
		    ft_victims_holds_units(&node->holdings[i]))
			r->cand[r->n_cand++] = (uint16_t)i;
	assert_true(r->n_cand <= CANDIDATES_MAX);
	r->n_subsets = 1u << r->n_cand;
	r->subsets = calloc(r->n_subsets, sizeof(*r->subsets));
	assert_non_null(r->subsets);
	for (uint32_t m = 0; m < r->n_subsets; m++) {
		unsigned n = 0;
		for (unsigned j = 0; j < r->n_cand; j++)
			if (m & (1u << j))
				idx[n++] = r->cand[j];
		r->subsets[m].mask = m;
		ft_victims_cost(&r->subsets[m].cost, node, idx, n, pdb);
	}
	qsort(r->subsets, r->n_subsets, sizeof(*r->subsets), by_cost);
}

/*
 * What the search must find, and the level it reaches: victims.h's rules
 * over the reference's subsets.
 */
static const subset_t *reference_answer(const reference_t *r, ft_level_t *level)
{
	const ft_demand_t *d = &r->c->d;
	ft_level_t want = ft_place_effective_level(d);
	const subset_t *base, *tighter;

	*level = want;
	if (d->has_affinity && d->mode == FT_MODE_GUARANTEED)
		return cheapest(r, want, NULL);
	*level = FT_LEVEL_NODE;
	if (!(base = cheapest(r, FT_LEVEL_NODE, NULL)))
		return NULL;
	for (unsigned l = want; d->has_affinity && l < FT_LEVEL_NODE; l++)
		if ((tighter = cheapest(r, (ft_level_t)l, &base->cost))) {
			*level = (ft_level_t)l;
			return tighter;
		}
	return base;
}

static uint32_t mask_of(const reference_t *r, const ft_victim_set_t *got)
{
	uint32_t m = 0;

	for (unsigned i = 0; i < got->n; i++)
		for (unsigned j = 0; j < r->n_cand; j++)
			if (r->cand[j] == got->holdings[i])
				m |= 1u << j;
	return m;
}

/* Compare the search with the reference; false with c->why when they differ. */
static bool case_agrees(case_t *c)
{
	unsigned pos[POD_MAX];
	ft_node_t *node = case_node(c, NULL, 0, pos);
	const subset_t *want;
	ft_pdb_view_t pdb;
	ft_victim_set_t got;
	reference_t r;
	ft_level_t level;

	case_budgets(&pdb, c, pos, node->n_holdings);
	reference_init(&r, c, node, pos, c->with_budgets ? &pdb : NULL);
	want = reference_answer(&r, &level);
	ft_victims_search(&got, node, &c->d, c->priority,
			  c->with_budgets ? &pdb : NULL);
	c->why[0] = '\0';
	c->victims = want ? want->cost.count : 0;
	if (got.found != (want != NULL))
		snprintf(c->why, sizeof(c->why), "found %d, reference %d",
			 got.found, want != NULL);
	else if (want && ft_victims_compare(&got.cost, &want->cost) != 0)
		snprintf(
		    c->why, sizeof(c->why),
		    "cost (pdb %u, max %d, count %u, start %lld), reference (pdb %u, max %d, count %u, start %lld)",
		    got.cost.pdb_violations, got.cost.max_priority,
		    got.cost.count, (long long)got.cost.earliest_top_start,
		    want->cost.pdb_violations, want->cost.max_priority,
		    want->cost.count, (long long)want->cost.earliest_top_start);
	else if (want && !fits_without(&r, mask_of(&r, &got), level))
		snprintf(c->why, sizeof(c->why),
			 "the set found does not fit at %s",
			 ft_level_name(level));
	else if (want && got.level != level)
		snprintf(c->why, sizeof(c->why), "level %s, reference %s",
			 ft_level_name(got.level), ft_level_name(level));
	else if (!got.exact)
		snprintf(c->why, sizeof(c->why), "not exact: %s",
			 ft_victim_fallback_name(got.fallback));
	free(r.subsets);
	ft_node_unref(node);
	return c->why[0] == '\0';
}

/* ---- reproductions --------------------------------------------------------
 */

/* Leave out every pod the disagreement survives without. */
static void shrink(case_t *c)
{
	char why[sizeof(c->why)];
	bool smaller = true;

	memcpy(why, c->why, sizeof(why));
	while (smaller) {
		smaller = false;
		for (unsigned i = 0; i < c->n; i++) {
			if (c->gone[i])
				continue;
			c->gone[i] = true;
			if (case_agrees(c)) {
				c->gone[i] = false;
			} else {
				smaller = true;
				memcpy(why, c->why, sizeof(why));
			}
		}
	}
	memcpy(c->why, why, sizeof(why));
}

static void print_units(const ft_allocation_t *a)
{
	char cpus[128];

	for (unsigned k = 0; k < a->n_gpus; k++)
		printf(" gpu %s", a->gpu_uuids[k]);
	for (unsigned k = 0; k < a->n_mig; k++)
		printf(" mig %s", a->mig_uuids[k]);
	ft_cpuset_format(cpus, sizeof(cpus), &a->cpus);
	if (cpus[0])
		printf(" cpus %s", cpus);
}

static void print_case(const case_t *c, unsigned number)
{
	const ft_demand_t *d = &c->d;

	printf("victim search disagrees with the reference, case %u (%s): %s\n",
	       number, shape_names[c->shape], c->why);
	printf(
	    "  preemptor: priority %d, %u GPUs, %u x %s, %u CPUs, %llu MiB, %s %s%s, memoryPerGpu %llu\n",
	    c->priority, d->gpus, d->mig_count,
	    d->mig_profile[0] ? d->mig_profile : "-", d->exclusive_cpus,
	    (unsigned long long)d->memory_mib, ft_level_name(d->level),
	    d->mode == FT_MODE_GUARANTEED ? "guaranteed" : "best-effort",
	    d->has_affinity ? "" : " (no affinity)",
	    (unsigned long long)d->caps.memory_mib);
	printf("  budgets%s: allowed %d %d %d\n",
	       c->with_budgets ? "" : " (not passed)", c->allowed[0],
	       c->allowed[1], c->allowed[2]);
	for (unsigned i = 0; i < c->n; i++) {
		const ft_pod_t *p = &c->pods[i];
		if (c->gone[i])
			continue;
		printf(
		    "  pod %s: priority %d, start %lld, budgets 0x%x:", p->uid,
		    p->priority, (long long)p->start_time, c->budgets[i]);
		if (p->has_allocation)
			print_units(&p->allocation);
		else if (p->demand.gpus || p->demand.mig_count)
			printf(" unplaced %u GPUs, %u x %s, %u CPUs",
			       p->demand.gpus, p->demand.mig_count,
			       p->demand.mig_profile, p->demand.exclusive_cpus);
		else
			printf(" nothing");
		if (p->observed)
			print_units(&p->observed->units);
		printf("\n");
	}
}

/* ---- the runs --------------------------------------------------------------
 */

typedef struct {
	ft_topology_t *t;
	shape_t shape;
	unsigned cases;
} run_t;

/* `cases` random cases of one shape; fails printing the first that differs. */
static void run_shape(const run_t *run, unsigned seed)
{
	case_t *c = malloc(sizeof(*c));
	unsigned evicting = 0, failed = 0;

	assert_non_null(c);
	for (unsigned k = 0; k < run->cases && !failed; k++) {
		case_init(c, run->shape, run->t, &seed);
		if (!case_agrees(c)) {
			shrink(c);
			print_case(c, k);
			failed++;
		}
		evicting += c->victims > 0;
		case_dispose(c);
	}
	free(c);
	printf("    %s: %u cases, %u evict, %u disagree\n",
	       shape_names[run->shape], run->cases, evicting, failed);
	assert_int_equal(failed, 0);
	/* The random cases are not all trivial. */
	assert_true(evicting > run->cases / 10);
}

static void test_victims_oracle__a100(void **state)
{
	run_t r = {ft_test_topology_a100("A"), SHAPE_A100, 3000};

	run_shape(&r, 20261126);
	ft_topology_unref(r.t);
}

static void test_victims_oracle__pcie_pairs(void **state)
{
	run_t r = {ft_test_topology_pairs4("P"), SHAPE_PAIRS, 3000};

	run_shape(&r, 7);
	ft_topology_unref(r.t);
}

static void test_victims_oracle__h100_mig(void **state)
{
	ft_mig_catalog_t catalog;
	run_t mixed, single;

	assert_int_equal(ft_codec_mig_catalog_builtin(&catalog), 0);
	mixed = (run_t){mig_box(&catalog, false), SHAPE_MIG, 2000};
	single = (run_t){mig_box(&catalog, true), SHAPE_MIG_SINGLE, 1000};
	assert_int_equal(single.t->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	run_shape(&mixed, 11);
	run_shape(&single, 13);
	ft_topology_unref(mixed.t);
	ft_topology_unref(single.t);
	ft_mig_catalog_dispose(&catalog);
}

static void test_victims_oracle__crowded(void **state)
{
	run_t r = {ft_test_topology_a100("A"), SHAPE_CROWDED, 1000};

	run_shape(&r, 110);
	ft_topology_unref(r.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_victims_oracle__a100),
	    cmocka_unit_test(test_victims_oracle__pcie_pairs),
	    cmocka_unit_test(test_victims_oracle__h100_mig),
	    cmocka_unit_test(test_victims_oracle__crowded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
