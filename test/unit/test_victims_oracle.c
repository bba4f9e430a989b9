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
 * Half the cases put pods in gangs (victims.h, ft_gang_view_t): whole gangs
 * and elastic ones with a slack, several members on the node, members on
 * other nodes with their own priorities and budgets, and now and then a
 * member the preemptor does not outrank. The reference costs each subset on
 * its own: it breaks the gangs the rules name, frees their members here,
 * adds their members elsewhere to the disrupted pods, and ranks those in
 * kube-scheduler's order; a subset that would disrupt a pod of the
 * preemptor's priority or above is no answer.
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
#define GANGS_MAX      3
#define REMOTE_MAX     5 /* members of a gang on other nodes */

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

/* A gang of the case: its rules and its members elsewhere. */
typedef struct {
	bool whole;
	uint32_t slack;
	unsigned n_remote;
	int32_t remote_priority[REMOTE_MAX];
	int64_t remote_start[REMOTE_MAX];
	uint8_t remote_budgets[REMOTE_MAX]; /* bit k: matches budget k */
} gang_t;

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
	bool with_gangs;	  /* pass the gangs to the search */
	unsigned n_gangs;
	gang_t gangs[GANGS_MAX];
	uint8_t gang[POD_MAX]; /* the pod's gang, 1-based; 0: none */
	char why[256];	       /* the disagreement */
	unsigned victims;      /* in the reference's answer */
	unsigned broken;       /* gangs the search's answer breaks */
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

/*
 * Gangs for half the cases: half the pods that might be victims join one,
 * the others now and then, with members elsewhere that are now and then
 * not outranked.
 */
static void random_gangs(case_t *c, unsigned *seed)
{
	if (rnd(seed, 2))
		return;
	c->with_gangs = true;
	c->n_gangs = 1 + rnd(seed, GANGS_MAX);
	for (unsigned g = 0; g < c->n_gangs; g++) {
		gang_t *gang = &c->gangs[g];
		gang->whole = rnd(seed, 2);
		gang->slack = rnd(seed, 4);
		gang->n_remote =
		    rnd(seed, 3) ? rnd(seed, 3) : rnd(seed, REMOTE_MAX + 1);
		for (unsigned r = 0; r < gang->n_remote; r++) {
			gang->remote_priority[r] =
			    rnd(seed, 10) ? random_priority(seed) : c->priority;
			gang->remote_start[r] = (int64_t)rnd(seed, 5);
			gang->remote_budgets[r] =
			    rnd(seed, 3) ? 0 : (uint8_t)(1 + rnd(seed, 7));
		}
	}
	for (unsigned i = 0; i < c->n; i++) {
		const ft_pod_t *p = &c->pods[i];
		bool holds =
		    p->has_allocation || p->demand.gpus || p->demand.mig_count;
		if (p->priority < c->priority && holds ? rnd(seed, 2) == 0
						       : rnd(seed, 20) == 0)
			c->gang[i] = (uint8_t)(1 + rnd(seed, c->n_gangs));
	}
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
	random_gangs(c, seed);
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

/* The case's gangs as the search reads them (holding i is pod pos[i]). */
static void case_gangs(ft_gang_view_t *out, const case_t *c,
		       const unsigned *pos, unsigned n)
{
	memset(out, 0, sizeof(*out));
	out->n_gangs = c->n_gangs;
	for (unsigned g = 0; g < c->n_gangs; g++) {
		const gang_t *gang = &c->gangs[g];
		out->gangs[g] = (ft_victim_gang_t){
		    gang->whole, gang->slack, out->n_remote, gang->n_remote};
		for (unsigned r = 0; r < gang->n_remote; r++) {
			ft_gang_remote_t *m = &out->remote[out->n_remote++];
			m->priority = gang->remote_priority[r];
			m->start_time = gang->remote_start[r];
			for (unsigned k = 0; k < BUDGETS; k++)
				if (gang->remote_budgets[r] & (1u << k))
					m->budgets[m->n_budgets++] = (uint8_t)k;
		}
	}
	for (unsigned i = 0; i < n; i++)
		out->of[i] = c->gang[pos[i]];
}

typedef struct {
	uint32_t mask; /* bit j: candidate j is evicted */
	bool allowed;  /* it disrupts no pod the preemptor does not outrank */
	ft_victim_cost_t cost;
} subset_t;

static int by_cost(const void *a, const void *b)
{
	const subset_t *x = a, *y = b;

	if (x->allowed != y->allowed)
		return x->allowed ? -1 : 1;
	return ft_victims_compare(&x->cost, &y->cost);
}

/* What the reference works over: the node and its candidates. */
typedef struct {
	const case_t *c;
	const ft_node_t *node;
	const unsigned *pos; /* holding -> pod position in the case */
	unsigned n_cand;
	uint16_t cand[CANDIDATES_MAX + 1]; /* holdings */
	uint32_t bit_of[POD_MAX]; /* per holding: its candidate's bit */
	unsigned n_subsets;
	subset_t *subsets; /* every subset, cheapest first */
} reference_t;

/* A disrupted pod, as the reference ranks it. */
typedef struct {
	int32_t priority;
	int64_t start;
	unsigned key; /* holding position, or FT_VICTIM_MAX + remote's */
	uint8_t budgets;
} disrupted_t;

static int by_importance(const void *a, const void *b)
{
	const disrupted_t *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/*
 * kube-scheduler's cost of evicting the disrupted pods `v` (n of them):
 * budgets spent in its order of victims, a pod that takes one below zero a
 * violation, then the priorities and the start of the earliest of the
 * highest.
 */
static void reference_cost(ft_victim_cost_t *out, const case_t *c,
			   disrupted_t *v, unsigned n)
{
	int32_t spent[BUDGETS] = {0};

	memset(out, 0, sizeof(*out));
	out->max_priority = INT32_MIN;
	qsort(v, n, sizeof(*v), by_importance);
	for (unsigned i = 0; i < n; i++) {
		bool violates = false;
		for (unsigned k = 0; c->with_budgets && k < BUDGETS; k++)
			if (v[i].budgets & (1u << k))
				violates |= ++spent[k] > c->allowed[k];
		out->pdb_violations += violates;
		out->priority_sum +=
		    (int64_t)v[i].priority + ((int64_t)1 << 31);
	}
	out->count = n;
	if (n) {
		out->max_priority = v[0].priority;
		out->earliest_top_start = v[0].start;
	}
}

/*
 * What evicting the candidates of `mask` does: the gangs it breaks, the
 * holdings it frees (into `freed`, `n_freed` of them) and the cost of every
 * pod it disrupts. False when it would disrupt a pod the preemptor does not
 * outrank.
 */
static bool disrupts(const reference_t *r, uint32_t mask,
		     ft_victim_cost_t *cost, uint16_t *freed, unsigned *n_freed)
{
	const case_t *c = r->c;
	disrupted_t v[POD_MAX + GANGS_MAX * REMOTE_MAX];
	unsigned taken[GANGS_MAX + 1] = {0}, n = 0, first = 0;
	bool broken[GANGS_MAX + 1] = {false}, allowed = true;

	*n_freed = 0;
	for (unsigned j = 0; j < r->n_cand; j++)
		if (mask & (1u << j))
			taken[c->with_gangs ? c->gang[r->pos[r->cand[j]]]
					    : 0]++;
	for (unsigned g = 1; c->with_gangs && g <= c->n_gangs; g++)
		broken[g] = taken[g] && (c->gangs[g - 1].whole ||
					 taken[g] > c->gangs[g - 1].slack);
	for (unsigned i = 0; i < r->node->n_holdings; i++) {
		unsigned p = r->pos[i];
		bool evicted = broken[c->with_gangs ? c->gang[p] : 0] ||
			       (mask & r->bit_of[i]);
		if (!evicted)
			continue;
		freed[(*n_freed)++] = (uint16_t)i;
		v[n++] = (disrupted_t){c->pods[p].priority,
				       c->pods[p].start_time, i, c->budgets[p]};
	}
	for (unsigned g = 1; c->with_gangs && g <= c->n_gangs; g++) {
		const gang_t *gang = &c->gangs[g - 1];
		for (unsigned k = 0; broken[g] && k < gang->n_remote; k++)
			v[n++] = (disrupted_t){
			    gang->remote_priority[k], gang->remote_start[k],
			    FT_VICTIM_MAX + first + k, gang->remote_budgets[k]};
		first += gang->n_remote;
	}
	for (unsigned k = 0; k < n; k++)
		allowed &= v[k].priority < c->priority;
	reference_cost(cost, c, v, n);
	return allowed;
}

/* Does the preemptor fit at `level` with holdings `freed` deleted? */
static bool fits_freed(const reference_t *r, const uint16_t *freed,
		       unsigned n_freed, ft_level_t level)
{
	unsigned gone[POD_MAX];
	ft_node_t *node;
	bool fits;

	for (unsigned k = 0; k < n_freed; k++)
		gone[k] = r->pos[freed[k]];
	node = case_node(r->c, gone, n_freed, NULL);
	fits = ft_place_fits_level(node, &r->c->d, level);
	ft_node_unref(node);
	return fits;
}

/* Does the preemptor fit at `level` once the candidates of `mask` go? */
static bool fits_without(const reference_t *r, uint32_t mask, ft_level_t level)
{
	uint16_t freed[POD_MAX];
	ft_victim_cost_t cost;
	unsigned n;

	(void)disrupts(r, mask, &cost, freed, &n);
	return fits_freed(r, freed, n, level);
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
	for (unsigned k = 0; k < r->n_subsets && r->subsets[k].allowed; k++)
		if (within(&r->subsets[k].cost, limit) &&
		    fits_without(r, r->subsets[k].mask, level))
			return &r->subsets[k];
	return NULL;
}

static void reference_init(reference_t *r, const case_t *c,
			   const ft_node_t *node, const unsigned *pos)
{
	uint16_t freed[POD_MAX];
	unsigned n_freed;

	memset(r, 0, sizeof(*r));
	r->c = c;
	r->node = node;
	r->pos = pos;
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].priority < c->priority &&
		    ft_victims_holds_units(&node->holdings[i])) {
			r->bit_of[i] = 1u << r->n_cand;
			r->cand[r->n_cand++] = (uint16_t)i;
		}
	assert_true(r->n_cand <= CANDIDATES_MAX);
	r->n_subsets = 1u << r->n_cand;
	r->subsets = calloc(r->n_subsets, sizeof(*r->subsets));
	assert_non_null(r->subsets);
	for (uint32_t m = 0; m < r->n_subsets; m++) {
		r->subsets[m].mask = m;
		r->subsets[m].allowed =
		    disrupts(r, m, &r->subsets[m].cost, freed, &n_freed);
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

/*
 * Is the set found what it says: its holdings those it evicts with the
 * members here of the gangs it breaks, costing what it says?
 */
static bool consistent(const ft_victim_set_t *got, const ft_node_t *node,
		       const ft_pdb_view_t *pdb, const ft_gang_view_t *gv,
		       int32_t priority)
{
	uint16_t broken[FT_GANG_MAX];
	ft_victim_cost_t cost;
	unsigned n_broken;

	if (!ft_victims_cost_gangs(&cost, broken, &n_broken, node,
				   got->holdings, got->n, pdb, gv, priority))
		return false;
	return ft_victims_compare(&cost, &got->cost) == 0 &&
	       cost.pdb_violations == got->cost.pdb_violations &&
	       n_broken == got->n_broken &&
	       !memcmp(broken, got->broken, n_broken * sizeof(broken[0]));
}

/* Compare the search with the reference; false with c->why when they differ. */
static bool case_agrees(case_t *c)
{
	unsigned pos[POD_MAX];
	ft_node_t *node = case_node(c, NULL, 0, pos);
	const subset_t *want;
	ft_pdb_view_t pdb;
	ft_gang_view_t *gv = malloc(sizeof(*gv));
	ft_victim_set_t got;
	reference_t r;
	ft_level_t level;

	assert_non_null(gv);
	case_budgets(&pdb, c, pos, node->n_holdings);
	case_gangs(gv, c, pos, node->n_holdings);
	reference_init(&r, c, node, pos);
	want = reference_answer(&r, &level);
	ft_victims_search_gangs(&got, node, &c->d, c->priority,
				c->with_budgets ? &pdb : NULL,
				c->with_gangs ? gv : NULL);
	c->why[0] = '\0';
	c->victims = want ? want->cost.count : 0;
	c->broken = got.found ? got.n_broken : 0;
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
	else if (want && !fits_freed(&r, got.holdings, got.n, level))
		snprintf(c->why, sizeof(c->why),
			 "the set found does not fit at %s",
			 ft_level_name(level));
	else if (want && !consistent(&got, node, c->with_budgets ? &pdb : NULL,
				     c->with_gangs ? gv : NULL, c->priority))
		snprintf(
		    c->why, sizeof(c->why),
		    "the set found is not the holdings and gangs its cost counts");
	else if (want && got.level != level)
		snprintf(c->why, sizeof(c->why), "level %s, reference %s",
			 ft_level_name(got.level), ft_level_name(level));
	else if (!got.exact)
		snprintf(c->why, sizeof(c->why), "not exact: %s",
			 ft_victim_fallback_name(got.fallback));
	free(r.subsets);
	free(gv);
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
	for (unsigned g = 0; c->with_gangs && g < c->n_gangs; g++) {
		const gang_t *gang = &c->gangs[g];
		printf("  gang %u: %s, slack %u, elsewhere:", g + 1,
		       gang->whole ? "whole" : "elastic", gang->slack);
		for (unsigned r = 0; r < gang->n_remote; r++)
			printf(" (priority %d, start %lld, budgets 0x%x)",
			       gang->remote_priority[r],
			       (long long)gang->remote_start[r],
			       gang->remote_budgets[r]);
		printf("\n");
	}
	for (unsigned i = 0; i < c->n; i++) {
		const ft_pod_t *p = &c->pods[i];
		if (c->gone[i])
			continue;
		printf(
		    "  pod %s: priority %d, start %lld, budgets 0x%x, gang %u:",
		    p->uid, p->priority, (long long)p->start_time,
		    c->budgets[i], c->with_gangs ? c->gang[i] : 0);
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
	unsigned evicting = 0, failed = 0, gangs = 0, breaking = 0;

	assert_non_null(c);
	for (unsigned k = 0; k < run->cases && !failed; k++) {
		case_init(c, run->shape, run->t, &seed);
		if (!case_agrees(c)) {
			shrink(c);
			print_case(c, k);
			failed++;
		}
		evicting += c->victims > 0;
		gangs += c->with_gangs;
		breaking += c->broken > 0;
		case_dispose(c);
	}
	free(c);
	printf("    %s: %u cases, %u evict, %u with gangs, %u break one, %u "
	       "disagree\n",
	       shape_names[run->shape], run->cases, evicting, gangs, breaking,
	       failed);
	assert_int_equal(failed, 0);
	/* The random cases are not all trivial. */
	assert_true(evicting > run->cases / 10);
	assert_true(breaking * 50 > evicting); /* 2 % of answers break gangs */
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
