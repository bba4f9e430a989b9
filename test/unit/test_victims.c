/*
 * Victim search: exactness against an exhaustive search over every subset on
 * many random small nodes, the paper's scenario on an 8x RTX 4090 box, and
 * the preemptor's demand read as placement reads it (capabilities, MIG
 * strategy single).
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

static ft_demand_t demand(uint32_t gpus, uint32_t cpus, ft_level_t level,
			  ft_affinity_mode_t mode)
{
	ft_demand_t d;

	memset(&d, 0, sizeof(d));
	d.gpus = gpus;
	d.exclusive_cpus = cpus;
	d.memory_mib = 0;
	d.has_affinity = true;
	d.level = level;
	d.mode = mode;
	return d;
}

/* Holding of GPU indexes (or -1) and a cpulist, at a priority. */
static void pod(ft_pod_t *out, const char *uid, int32_t prio, int gpu_a,
		int gpu_b, const char *cpus, const char *prefix)
{
	char a[64], b[64];
	const char *gpus[3] = {NULL, NULL, NULL};
	unsigned n = 0;

	if (gpu_a >= 0) {
		snprintf(a, sizeof(a), "%s-%d", prefix, gpu_a);
		gpus[n++] = a;
	}
	if (gpu_b >= 0) {
		snprintf(b, sizeof(b), "%s-%d", prefix, gpu_b);
		gpus[n++] = b;
	}
	ft_test_pod(out, uid, prio, gpus, cpus, 0);
}

/*
 * Exhaustive: the cheapest subset of lower-priority holdings after which `d`
 * fits at `level`, within `limit` (victims and PDB violations; NULL: none).
 */
static bool brute_force(ft_victim_cost_t *best, const ft_node_t *node,
			const ft_demand_t *d, int32_t priority,
			ft_level_t level, const ft_pdb_view_t *pdb,
			const ft_victim_cost_t *limit)
{
	uint16_t cand[32], idx[32];
	unsigned n = 0;
	bool found = false;

	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].priority < priority)
			cand[n++] = (uint16_t)i;
	for (uint32_t mask = 0; mask < (1u << n); mask++) {
		ft_victim_cost_t c;
		unsigned k = 0;
		for (unsigned i = 0; i < n; i++)
			if (mask & (1u << i))
				idx[k++] = cand[i];
		if (!ft_victims_feasible(node, d, level, idx, k))
			continue;
		ft_victims_cost(&c, node, idx, k, pdb);
		if (limit && (c.count > limit->count ||
			      c.pdb_violations > limit->pdb_violations))
			continue;
		if (!found || ft_victims_compare(&c, best) < 0)
			*best = c;
		found = true;
	}
	return found;
}

/*
 * What the search must find, by brute force, and at which level: in
 * guaranteed mode the cheapest set at the demand's level; in best-effort mode
 * the cheapest set node-wide, unless a set reaching a tighter level (the
 * tightest first) evicts no more pods and violates no more PDBs.
 */
static bool brute_force_search(ft_victim_cost_t *best, ft_level_t *level,
			       const ft_node_t *node, const ft_demand_t *d,
			       int32_t priority, const ft_pdb_view_t *pdb)
{
	ft_level_t want = ft_place_effective_level(d);
	ft_victim_cost_t base;

	*level = want;
	if (d->has_affinity && d->mode == FT_MODE_GUARANTEED)
		return brute_force(best, node, d, priority, want, pdb, NULL);
	*level = FT_LEVEL_NODE;
	if (!brute_force(&base, node, d, priority, FT_LEVEL_NODE, pdb, NULL))
		return false;
	*best = base;
	for (unsigned l = want; d->has_affinity && l < FT_LEVEL_NODE; l++)
		if (brute_force(best, node, d, priority, (ft_level_t)l, pdb,
				&base)) {
			*level = (ft_level_t)l;
			break;
		}
	return true;
}

static void random_cpus(char *buf, size_t size, unsigned *seed, unsigned n_cpus)
{
	unsigned first = (unsigned)rand_r(seed) % n_cpus;
	unsigned len = 1 + (unsigned)rand_r(seed) % 4;

	if (first + len > n_cpus)
		len = n_cpus - first;
	snprintf(buf, size, "%u-%u", first, first + len - 1);
}

/* Random pods with disjoint GPUs and CPUs on `t`. */
static unsigned random_pods(ft_pod_t *pods, ft_topology_t *t, unsigned *seed,
			    const char *prefix)
{
	uint16_t gpus_used = 0;
	ft_cpuset_t cpus_used;
	unsigned n = 0;

	ft_cpuset_clear(&cpus_used);
	for (int tries = 0; tries < 30 && n < 10; tries++) {
		char cpus[32], uid[16];
		ft_cpuset_t set;
		int g = (int)((unsigned)rand_r(seed) % (t->n_gpus + 2)) - 2;
		random_cpus(cpus, sizeof(cpus), seed, t->n_cpus);
		ft_cpuset_parse(&set, cpus);
		if ((g >= 0 && (gpus_used & (1u << g))) ||
		    ft_cpuset_intersects(&set, &cpus_used))
			continue;
		if (g >= 0)
			gpus_used |= (uint16_t)(1u << g);
		ft_cpuset_or(&cpus_used, &cpus_used, &set);
		snprintf(uid, sizeof(uid), "r%u", n);
		pod(&pods[n], uid, (int32_t)((unsigned)rand_r(seed) % 4) * 100,
		    g, -1, cpus, prefix);
		pods[n].start_time = (int64_t)((unsigned)rand_r(seed) % 5);
		n++;
	}
	return n;
}

static void check_against_brute_force(ft_node_t *node, const ft_demand_t *d,
				      int32_t priority,
				      const ft_pdb_view_t *pdb)
{
	ft_level_t level;
	ft_victim_cost_t best;
	ft_victim_set_t got;
	bool exists = brute_force_search(&best, &level, node, d, priority, pdb);

	ft_victims_search(&got, node, d, priority, pdb);
	assert_int_equal(got.found, exists);
	if (!exists) {
		assert_int_equal(got.n, 0);
		return;
	}
	assert_true(got.exact);
	assert_int_equal(ft_victims_compare(&got.cost, &best), 0);
	assert_true(ft_victims_feasible(node, d, level, got.holdings, got.n));
	assert_int_equal(got.level, level);
	for (unsigned i = 0; i < got.n; i++) {
		assert_true(node->holdings[got.holdings[i]].priority <
			    priority);
		if (i)
			assert_true(
			    node->holdings[got.holdings[i - 1]].priority >=
			    node->holdings[got.holdings[i]].priority);
	}
}

static void test_victims__exact_on_random_nodes(void **state)
{
	ft_topology_t *tops[3] = {ft_test_topology_pairs4("P"),
				  ft_test_topology_4090("R"),
				  ft_test_topology_a100("A")};
	const char *prefixes[3] = {"P", "R", "A"};
	unsigned seed = 2026, checked = 0;

	for (int round = 0; round < 600; round++) {
		ft_topology_t *t = tops[round % 3];
		ft_pod_t pods[10], *list[11];
		unsigned n = random_pods(pods, t, &seed, prefixes[round % 3]);
		ft_node_t *node;
		ft_demand_t d = demand(
		    1 + (unsigned)rand_r(&seed) % 3,
		    (unsigned)rand_r(&seed) % 8,
		    (ft_level_t)((unsigned)rand_r(&seed) % FT_LEVEL_COUNT),
		    FT_MODE_GUARANTEED);
		for (unsigned i = 0; i < n; i++)
			list[i] = &pods[i];
		list[n] = NULL;
		node = ft_test_node("n", t, list);
		check_against_brute_force(
		    node, &d, (int32_t)((unsigned)rand_r(&seed) % 4) * 100 + 50,
		    NULL);
		checked++;
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	assert_int_equal(checked, 600);
	for (int i = 0; i < 3; i++)
		ft_topology_unref(tops[i]);
}

/* The pairs4 box with every GPU shared into 10 replicas. */
static ft_topology_t *shared_pairs4(void)
{
	ft_topology_t *t = ft_test_topology_pairs4("S");

	for (unsigned g = 0; g < t->n_gpus; g++)
		assert_int_equal(ft_topology_share_gpu(t, g, 10), 0);
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

/* One random pod on a shared node: replicas, a whole GPU, or unknown. */
static void random_shared_pod(ft_pod_t *out, const char *uid, unsigned *seed,
			      uint8_t *replicas, uint16_t *whole)
{
	unsigned g = (unsigned)rand_r(seed) % 4;
	unsigned kind = (unsigned)rand_r(seed) % 6;
	unsigned count = 1 + (unsigned)rand_r(seed) % 8;
	char uuid[16];
	const char *one[2] = {uuid, NULL};

	snprintf(uuid, sizeof(uuid), "S-%u", g);
	if (kind == 0 && !replicas[g] && !(*whole & (1u << g))) {
		ft_test_pod(out, uid, 0, one, NULL, 0);
		*whole |= (uint16_t)(1u << g);
	} else if (kind == 1) {
		ft_test_pod(out, uid, 0, NULL, NULL, 1);
		out->demand.gpu_fraction_milli = 100;
	} else {
		ft_test_pod(out, uid, 0, NULL, NULL, 0);
		if (!(*whole & (1u << g)) && replicas[g] + count <= 10) {
			out->has_allocation = true;
			out->allocation.replica_gpus[0] = strdup(uuid);
			out->allocation.replica_counts[0] = (uint8_t)count;
			out->allocation.n_replicas = 1;
			replicas[g] = (uint8_t)(replicas[g] + count);
		}
	}
	out->priority = (int32_t)((unsigned)rand_r(seed) % 4) * 100;
	out->start_time = (int64_t)((unsigned)rand_r(seed) % 5);
}

/*
 * Exactness on shared GPUs: random replica, whole-GPU and unknown holdings
 * against random demands of ranks (with and without a fraction).
 */
static void test_victims__exact_on_random_shared_nodes(void **state)
{
	static const uint32_t fractions[] = {0, 200, 500, 800, 1000};
	ft_topology_t *t = shared_pairs4();
	unsigned seed = 77;

	for (int round = 0; round < 400; round++) {
		ft_pod_t pods[8], *list[9];
		uint8_t replicas[4] = {0};
		uint16_t whole = 0;
		unsigned n = 3 + (unsigned)rand_r(&seed) % 6;
		ft_node_t *node;
		ft_demand_t d = demand(
		    1 + (unsigned)rand_r(&seed) % 3, 0,
		    (ft_level_t)((unsigned)rand_r(&seed) % FT_LEVEL_COUNT),
		    FT_MODE_GUARANTEED);

		d.gpu_fraction_milli = fractions[(unsigned)rand_r(&seed) % 5];
		for (unsigned i = 0; i < n; i++) {
			char uid[16];
			snprintf(uid, sizeof(uid), "s%u", i);
			random_shared_pod(&pods[i], uid, &seed, replicas,
					  &whole);
			list[i] = &pods[i];
		}
		list[n] = NULL;
		node = ft_test_node("n", t, list);
		assert_int_equal(node->conflicts, 0);
		check_against_brute_force(
		    node, &d, (int32_t)((unsigned)rand_r(&seed) % 4) * 100 + 50,
		    NULL);
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	ft_topology_unref(t);
}

/*
 * The paper's scenario: low-priority batch pods scattered over the NUMA nodes
 * of an 8x RTX 4090 box. A high-priority pod needs 1 GPU and 6 CPUs in one
 * NUMA node. Evicting the lowest-priority GPU pod (on NUMA 1) frees a GPU
 * whose NUMA node has only 2 free cores left (a priority-200 pod pins 6).
 * The aligned answer evicts the pod on NUMA 2, whose GPU and cores sit
 * together, even though its priority is a little higher.
 */
static void test_victims__paper_scenario_numa(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_pod_t pods[10], *list[11];
	ft_demand_t d = demand(1, 6, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	unsigned n = 0;
	ft_node_t *node;

	/* Every GPU busy; NUMA k holds CPUs 8k..8k+7. */
	pod(&pods[n++], "batch-0", 100, 0, -1, "0-7", "R");
	pod(&pods[n++], "batch-1", 10, 1, -1, "8-9", "R");
	pod(&pods[n++], "pinned-1", 200, -1, -1, "10-15", "R");
	pod(&pods[n++], "batch-2", 20, 2, -1, "16-17", "R");
	pod(&pods[n++], "batch-3", 100, 3, -1, "24-31", "R");
	pod(&pods[n++], "batch-4", 100, 4, -1, "32-39", "R");
	pod(&pods[n++], "batch-5", 100, 5, -1, "40-47", "R");
	pod(&pods[n++], "batch-6", 100, 6, -1, "48-55", "R");
	pod(&pods[n++], "batch-7", 100, 7, -1, "56-63", "R");
	for (unsigned i = 0; i < n; i++)
		list[i] = &pods[i];
	list[n] = NULL;
	node = ft_test_node("n", t, list);

	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_true(got.exact);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "batch-2");
	assert_int_equal(got.level, FT_LEVEL_NUMA);

	/* Best-effort takes the cheapest count-feasible set, batch-1 alone. */
	d.mode = FT_MODE_BEST_EFFORT;
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "batch-2");
	assert_int_equal(got.level, FT_LEVEL_NUMA);
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_victims__pdb_avoided_when_another_set_exists(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_pod_t pods[4], *list[5];
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_pdb_view_t pdb;
	ft_victim_set_t got;
	ft_node_t *node;

	pod(&pods[0], "a", 0, 0, -1, NULL, "P");
	pod(&pods[1], "b", 0, 1, -1, NULL, "P");
	pod(&pods[2], "c", 50, 2, -1, NULL, "P");
	pod(&pods[3], "d", 50, 3, -1, NULL, "P");
	for (unsigned i = 0; i < 4; i++)
		list[i] = &pods[i];
	list[4] = NULL;
	node = ft_test_node("n", t, list);
	ft_victims_search(&got, node, &d, 100, NULL);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.cost.max_priority, 0);
	/* "a" and "b" share a budget that allows no disruption. */
	memset(&pdb, 0, sizeof(pdb));
	pdb.n_budgets = 1;
	pdb.allowed[0] = 0;
	pdb.n_of[0] = pdb.n_of[1] = 1;
	ft_victims_search(&got, node, &d, 100, &pdb);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.cost.pdb_violations, 0);
	assert_int_equal(got.cost.max_priority, 50);
	/* A budget of one disruption: evicting both is one violation. */
	pdb.allowed[0] = 1;
	{
		uint16_t both[2] = {0, 1};
		ft_victim_cost_t c;
		ft_victims_cost(&c, node, both, 2, &pdb);
		assert_int_equal(c.pdb_violations, 1);
		ft_victims_cost(&c, node, both, 1, &pdb);
		assert_int_equal(c.pdb_violations, 0);
	}
	for (unsigned i = 0; i < 4; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * Two budgets over the first `n` holdings: one allowing 0 or 1 disruption,
 * one allowing none; each holding matches one of them or neither.
 */
static void random_pdb(ft_pdb_view_t *out, unsigned n, unsigned *seed)
{
	memset(out, 0, sizeof(*out));
	out->n_budgets = 2;
	out->allowed[0] = (int32_t)((unsigned)rand_r(seed) % 2);
	out->allowed[1] = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned k = (unsigned)rand_r(seed) % 3;
		if (k < 2) {
			out->n_of[i] = 1;
			out->of[i][0] = (uint8_t)k;
		}
	}
}

/* Exactness holds with budgets too: random budgets against brute force. */
static void test_victims__exact_with_budgets(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	unsigned seed = 77;

	for (int round = 0; round < 200; round++) {
		ft_pod_t pods[10], *list[11];
		unsigned n = random_pods(pods, t, &seed, "A");
		ft_demand_t d = demand(
		    1 + (unsigned)rand_r(&seed) % 3,
		    (unsigned)rand_r(&seed) % 8,
		    (ft_level_t)((unsigned)rand_r(&seed) % FT_LEVEL_COUNT),
		    FT_MODE_GUARANTEED);
		ft_pdb_view_t pdb;
		ft_node_t *node;

		random_pdb(&pdb, n, &seed);
		for (unsigned i = 0; i < n; i++)
			list[i] = &pods[i];
		list[n] = NULL;
		node = ft_test_node("n", t, list);
		check_against_brute_force(node, &d, 250, &pdb);
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	ft_topology_unref(t);
}

static void test_victims__none_when_higher_priority_blocks(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_pod_t pods[2], *list[3] = {&pods[0], &pods[1], NULL};
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;

	pod(&pods[0], "low", 0, 0, -1, NULL, "P");
	pod(&pods[1], "high", 500, 2, -1, NULL, "P");
	node = ft_test_node("n", t, list);
	/* Pair (2,3) is free of low pods only if "high" goes: it cannot. */
	ft_victims_search(&got, node, &d, 100, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "low");
	d.gpus = 4;
	d.level = FT_LEVEL_NODE;
	ft_victims_search(&got, node, &d, 100, NULL);
	assert_false(got.found);
	ft_pod_dispose(&pods[0]);
	ft_pod_dispose(&pods[1]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * One NUMA node (CPUs 0-7), GPUs "V-0".."V-3" without NVLink: 0 and 1 with
 * 81920 MiB, 2 and 3 with 40960 MiB. `mig` makes GPU 0 the only GPU, MIG-
 * enabled with seven 1g.10gb instances "M-0".."M-6" (MIG strategy single).
 */
static ft_topology_t *victim_box(bool mig)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;
	char uuid[16];

	assert_int_equal(ft_cpuset_parse(&cpus, "0-7"), 0);
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 65536), 0);
	for (unsigned g = 0; g < (mig ? 1u : 4u); g++) {
		snprintf(uuid, sizeof(uuid), "V-%u", g);
		assert_int_equal(ft_topology_add_gpu(t, 0, FT_NONE, (int)g,
						     uuid, "GPU",
						     g < 2 ? 81920 : 40960),
				 (int)g);
	}
	for (unsigned i = 0; mig && i < 7; i++) {
		snprintf(uuid, sizeof(uuid), "M-%u", i);
		assert_int_equal(
		    ft_topology_add_mig(t, 0, "1g.10gb", i, 1, uuid), (int)i);
	}
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

/* Only pods holding units that meet the capabilities are candidates. */
static void test_victims__requires_only_matching_units(void **state)
{
	ft_topology_t *t = victim_box(false);
	ft_pod_t pods[4], *list[5];
	ft_demand_t d = demand(1, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;

	pod(&pods[0], "big-0", 50, 0, -1, NULL, "V");
	pod(&pods[1], "big-1", 60, 1, -1, NULL, "V");
	pod(&pods[2], "small-2", 0, 2, -1, NULL, "V");
	pod(&pods[3], "small-3", 0, 3, -1, NULL, "V");
	for (unsigned i = 0; i < 4; i++)
		list[i] = &pods[i];
	list[4] = NULL;
	node = ft_test_node("n", t, list);
	ft_victims_search(&got, node, &d, 100, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_memory_equal(node->holdings[got.holdings[0]].uid, "small", 5);
	d.has_caps = true;
	d.caps.memory_mib = 81920;
	ft_victims_search(&got, node, &d, 100, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "big-0");
	assert_true(
	    ft_victims_feasible(node, &d, FT_LEVEL_NODE, got.holdings, got.n));
	for (unsigned i = 0; i < 4; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* On a MIG-strategy single node whole GPUs asked are instances to free. */
static void test_victims__single_strategy_frees_instances(void **state)
{
	ft_topology_t *t = victim_box(true);
	ft_pod_t pods[7], *list[8];
	ft_demand_t d = demand(2, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;
	char uid[16], uuid[16];

	assert_int_equal(t->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	for (unsigned i = 0; i < 7; i++) {
		snprintf(uid, sizeof(uid), "p%u", i);
		snprintf(uuid, sizeof(uuid), "M-%u", i);
		ft_test_pod(&pods[i], uid, (int32_t)(10 * (i + 1)), NULL, NULL,
			    0);
		pods[i].allocation.mig_uuids[pods[i].allocation.n_mig++] =
		    strdup(uuid);
		pods[i].has_allocation = true;
		list[i] = &pods[i];
	}
	list[7] = NULL;
	node = ft_test_node("n", t, list);
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 2);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "p1");
	assert_string_equal(node->holdings[got.holdings[1]].uid, "p0");
	for (unsigned i = 0; i < 7; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * Exactness with usage of unknown placement: pods placed without flextopo
 * are charged node-wide, so evicting known holders anywhere can help.
 */
static void test_victims__exact_with_unknown_usage(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	unsigned seed = 4242;

	for (int round = 0; round < 200; round++) {
		ft_pod_t pods[12], *list[13];
		unsigned n = random_pods(pods, t, &seed, "A");
		ft_node_t *node;
		ft_demand_t d = demand(
		    1 + (unsigned)rand_r(&seed) % 3, 0,
		    (ft_level_t)((unsigned)rand_r(&seed) % FT_LEVEL_COUNT),
		    FT_MODE_GUARANTEED);
		if (n > 10)
			n = 10;
		for (unsigned k = 0; k < 2; k++) {
			char uid[16];
			snprintf(uid, sizeof(uid), "unknown-%u", k);
			ft_test_pod(
			    &pods[n], uid,
			    (int32_t)((unsigned)rand_r(&seed) % 4) * 100, NULL,
			    NULL, 1 + (unsigned)rand_r(&seed) % 2);
			n++;
		}
		for (unsigned i = 0; i < n; i++)
			list[i] = &pods[i];
		list[n] = NULL;
		node = ft_test_node("n", t, list);
		check_against_brute_force(node, &d, 250, NULL);
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	ft_topology_unref(t);
}

/* ---- MIG ---------------------------------------------------------------- */

static const char *const mig_models[2] = {"NVIDIA A100-SXM4-80GB",
					  "NVIDIA H100 80GB HBM3"};

/* One socket, NUMA 0 (CPUs 0-7) and NUMA 1 (CPUs 8-15), a PCIe switch each. */
static ft_topology_t *two_numa_box(void)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	ft_cpuset_parse(&cpus, "0-7");
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 65536), 0);
	ft_cpuset_parse(&cpus, "8-15");
	assert_int_equal(ft_topology_add_numa(t, 0, 1, &cpus, 65536), 1);
	assert_int_equal(ft_topology_add_switch(t, 0, 0), 0);
	assert_int_equal(ft_topology_add_switch(t, 1, 1), 1);
	return t;
}

/* Finish `t`, check its MIG layouts against the catalog and apply it. */
static ft_topology_t *finish_with_catalog(ft_topology_t *t,
					  const ft_mig_catalog_t *c)
{
	assert_int_equal(ft_topology_finish(t), 0);
	assert_int_equal(ft_mig_catalog_check(c, t), 0);
	ft_mig_catalog_apply(c, t);
	return t;
}

/* An instance of `profile` at memory slice `start` of GPU position `gpu`. */
typedef struct {
	unsigned gpu;
	const char *profile;
	unsigned start;
} mig_at_t;

/*
 * two_numa_box() with two H100-80GB GPUs, "G-0" on NUMA 0 and "G-1" on
 * NUMA 1, and the instances `at`, named "MIG-<gpu>-<start>".
 */
static ft_topology_t *h100_mig_box(const ft_mig_catalog_t *c,
				   const mig_at_t *at, unsigned n)
{
	const ft_mig_gpu_t *h100 = ft_mig_catalog_find(c, mig_models[1]);
	ft_topology_t *t = two_numa_box();
	char uuid[32];

	for (unsigned g = 0; g < 2; g++) {
		snprintf(uuid, sizeof(uuid), "G-%u", g);
		assert_int_equal(ft_topology_add_gpu(t, g, g, (int)g, uuid,
						     mig_models[1], 81920),
				 (int)g);
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(uuid, sizeof(uuid), "MIG-%u-%u", at[i].gpu,
			 at[i].start);
		assert_true(
		    ft_topology_add_mig(
			t, at[i].gpu, at[i].profile, at[i].start,
			ft_mig_gpu_profile(h100, at[i].profile)->memory_slices,
			uuid) >= 0);
	}
	return finish_with_catalog(t, c);
}

/* A pod holding the MIG instance `uuid`, of `profile`. */
static void mig_pod(ft_pod_t *out, const char *uid, int32_t priority,
		    const char *uuid, const char *profile)
{
	ft_test_pod(out, uid, priority, NULL, NULL, 0);
	out->allocation.mig_uuids[out->allocation.n_mig++] = strdup(uuid);
	out->has_allocation = true;
	snprintf(out->demand.mig_profile, sizeof(out->demand.mig_profile), "%s",
		 profile);
	out->demand.mig_count = 1;
}

static ft_demand_t mig_demand(const char *profile, uint32_t count,
			      ft_level_t level)
{
	ft_demand_t d = demand(0, 0, level, FT_MODE_GUARANTEED);

	snprintf(d.mig_profile, sizeof(d.mig_profile), "%s", profile);
	d.mig_count = count;
	return d;
}

static const char *victim(const ft_node_t *node, const ft_victim_set_t *set,
			  unsigned i)
{
	return node->holdings[set->holdings[i]].uid;
}

/*
 * A pod holding an instance of unknown placement (bound without flextopo, so
 * without an allocation) gives it back when evicted: on this MIG-strategy
 * single node (two H100s, two 3g.40gb each) it asked one nvidia.com/gpu, an
 * instance, and it is the cheapest victim. Evicting it used to count as
 * freeing nothing, so a costlier pod was chosen.
 */
static void test_victims__mig_unknown_placement_given_back(void **state)
{
	static const mig_at_t at[] = {{0, "3g.40gb", 0},
				      {0, "3g.40gb", 4},
				      {1, "3g.40gb", 0},
				      {1, "3g.40gb", 4}};
	ft_mig_catalog_t c;
	ft_topology_t *t;
	ft_pod_t pods[4], *list[5];
	ft_demand_t d = demand(1, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;

	assert_int_equal(ft_codec_mig_catalog_builtin(&c), 0);
	t = h100_mig_box(&c, at, 4);
	assert_int_equal(t->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	mig_pod(&pods[0], "a", 100, "MIG-0-0", "3g.40gb");
	mig_pod(&pods[1], "b", 200, "MIG-0-4", "3g.40gb");
	mig_pod(&pods[2], "c", 300, "MIG-1-0", "3g.40gb");
	ft_test_pod(&pods[3], "unplaced", 0, NULL, NULL, 1);
	for (unsigned i = 0; i < 4; i++)
		list[i] = &pods[i];
	list[4] = NULL;
	node = ft_test_node("n", t, list);
	assert_false(ft_place_fits_level(node, &d, FT_LEVEL_NODE));

	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(node, &got, 0), "unplaced");
	assert_true(
	    ft_victims_feasible(node, &d, FT_LEVEL_NODE, got.holdings, got.n));
	/* The same asked as the profile itself. */
	d = mig_demand("3g.40gb", 1, FT_LEVEL_NODE);
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(node, &got, 0), "unplaced");
	for (unsigned i = 0; i < 4; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
	ft_mig_catalog_dispose(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_victims__exact_on_random_nodes),
	    cmocka_unit_test(test_victims__exact_on_random_shared_nodes),
	    cmocka_unit_test(test_victims__paper_scenario_numa),
	    cmocka_unit_test(test_victims__pdb_avoided_when_another_set_exists),
	    cmocka_unit_test(test_victims__exact_with_budgets),
	    cmocka_unit_test(test_victims__exact_with_unknown_usage),
	    cmocka_unit_test(test_victims__none_when_higher_priority_blocks),
	    cmocka_unit_test(test_victims__requires_only_matching_units),
	    cmocka_unit_test(test_victims__single_strategy_frees_instances),
	    cmocka_unit_test(test_victims__mig_unknown_placement_given_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
