/*
 * Victim search: exactness against an exhaustive search over every subset on
 * many random small nodes (whole GPUs, shared GPUs, MIG layouts the catalog
 * allows), the paper's scenario on an 8x RTX 4090 box, and the preemptor's
 * demand read as placement reads it (capabilities, MIG strategy single, GPUs
 * of unknown locality on a FlexTopo graph).
 * On MIG nodes the simulated eviction is also checked against the node
 * rebuilt without the evicted pods.
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

/*
 * Check the search against brute force; `out`, when not NULL, gets the
 * search's answer.
 */
static void check_against_brute_force(ft_victim_set_t *out, ft_node_t *node,
				      const ft_demand_t *d, int32_t priority,
				      const ft_pdb_view_t *pdb)
{
	ft_level_t level;
	ft_victim_cost_t best;
	ft_victim_set_t got;
	bool exists = brute_force_search(&best, &level, node, d, priority, pdb);

	ft_victims_search(&got, node, d, priority, pdb);
	if (out)
		*out = got;
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
		    NULL, node, &d,
		    (int32_t)((unsigned)rand_r(&seed) % 4) * 100 + 50, NULL);
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
		    NULL, node, &d,
		    (int32_t)((unsigned)rand_r(&seed) % 4) * 100 + 50, NULL);
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
		check_against_brute_force(NULL, node, &d, 250, &pdb);
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
		check_against_brute_force(NULL, node, &d, 250, NULL);
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	ft_topology_unref(t);
}

/* ---- MIG ---------------------------------------------------------------- */

static const char *const mig_models[2] = {"NVIDIA A100-SXM4-80GB",
					  "NVIDIA H100 80GB HBM3"};

/* Profiles both models offer (configs/mig-catalog.yaml), smallest first. */
static const char *const mig_profiles[6] = {"1g.10gb", "1g.20gb", "2g.20gb",
					    "3g.40gb", "4g.40gb", "7g.80gb"};

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

/*
 * A pod of a hand-written MIG node: it holds instance `uuid` of `profile`,
 * or with `uuid` NULL has no allocation and asked one nvidia.com/gpu.
 */
typedef struct {
	const char *uid;
	int32_t priority;
	const char *uuid;
	const char *profile;
} held_t;

/* h100_mig_box(at) with the pods `held`, and what the test must free. */
typedef struct {
	ft_mig_catalog_t catalog;
	ft_topology_t *t;
	ft_pod_t pods[8];
	unsigned n;
	ft_node_t *node;
} mig_node_t;

static void mig_node_init(mig_node_t *out, const mig_at_t *at, unsigned n_at,
			  const held_t *held, unsigned n)
{
	ft_pod_t *list[9];

	assert_true(n <= 8);
	assert_int_equal(ft_codec_mig_catalog_builtin(&out->catalog), 0);
	out->t = h100_mig_box(&out->catalog, at, n_at);
	out->n = n;
	for (unsigned i = 0; i < n; i++) {
		ft_pod_t *pod = &out->pods[i];
		ft_test_pod(pod, held[i].uid, held[i].priority, NULL, NULL,
			    !held[i].uuid);
		list[i] = pod;
		if (!held[i].uuid)
			continue;
		pod->allocation.mig_uuids[pod->allocation.n_mig++] =
		    strdup(held[i].uuid);
		pod->has_allocation = true;
		snprintf(pod->demand.mig_profile,
			 sizeof(pod->demand.mig_profile), "%s",
			 held[i].profile);
		pod->demand.mig_count = 1;
	}
	list[n] = NULL;
	out->node = ft_test_node("n", out->t, list);
}

static void mig_node_dispose(mig_node_t *m)
{
	for (unsigned i = 0; i < m->n; i++)
		ft_pod_dispose(&m->pods[i]);
	ft_node_unref(m->node);
	ft_topology_unref(m->t);
	ft_mig_catalog_dispose(&m->catalog);
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
 * MIG layouts are fixed (preemption does not repartition a GPU), so evicting
 * holders of other profiles frees no 3g.40gb however cheap they are: the
 * cheapest set frees instances of the profile asked, and with nvlink
 * affinity two of them on one GPU.
 */
static void test_victims__mig_frees_the_profile_asked(void **state)
{
	static const mig_at_t at[] = {{0, "3g.40gb", 0},
				      {0, "2g.20gb", 4},
				      {0, "1g.10gb", 6},
				      {1, "3g.40gb", 0},
				      {1, "3g.40gb", 4}};
	static const held_t held[] = {{"small", 0, "MIG-0-6", "1g.10gb"},
				      {"medium", 10, "MIG-0-4", "2g.20gb"},
				      {"big-0", 150, "MIG-0-0", "3g.40gb"},
				      {"big-1", 200, "MIG-1-0", "3g.40gb"},
				      {"big-2", 100, "MIG-1-4", "3g.40gb"}};
	ft_demand_t d = mig_demand("3g.40gb", 1, FT_LEVEL_NODE);
	ft_victim_set_t got;
	mig_node_t m;

	mig_node_init(&m, at, 5, held, 5);
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_true(got.found && got.exact);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(m.node, &got, 0), "big-2");
	/* Two anywhere: the two cheapest 3g.40gb holders. */
	d.mig_count = 2;
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_int_equal(got.n, 2);
	assert_string_equal(victim(m.node, &got, 0), "big-0");
	assert_string_equal(victim(m.node, &got, 1), "big-2");
	/* Two in one NVLink domain: a MIG GPU is one, so both of GPU 1. */
	d.level = FT_LEVEL_NVLINK;
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_int_equal(got.n, 2);
	assert_string_equal(victim(m.node, &got, 0), "big-1");
	assert_string_equal(victim(m.node, &got, 1), "big-2");
	assert_int_equal(got.level, FT_LEVEL_NVLINK);
	/* The small profile frees its own holder. */
	d = mig_demand("1g.10gb", 1, FT_LEVEL_NODE);
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(m.node, &got, 0), "small");
	mig_node_dispose(&m);
}

/*
 * The only 3g.40gb is held by a pod of higher priority than the preemptor;
 * the lower-priority pods hold 1g.10gb instances. No set helps: the search
 * finds none, while filter says the node is short of a free 3g.40gb now
 * (unfit, not unresolvable: the instance exists).
 */
static void
test_victims__mig_none_when_only_other_profiles_are_lower(void **state)
{
	static const mig_at_t at[] = {{0, "3g.40gb", 0},
				      {0, "1g.10gb", 4},
				      {0, "1g.10gb", 5},
				      {0, "1g.10gb", 6}};
	static const held_t held[] = {{"serving", 2000, "MIG-0-0", "3g.40gb"},
				      {"batch-4", 0, "MIG-0-4", "1g.10gb"},
				      {"batch-5", 0, "MIG-0-5", "1g.10gb"},
				      {"batch-6", 0, "MIG-0-6", "1g.10gb"}};
	ft_demand_t d = mig_demand("3g.40gb", 1, FT_LEVEL_NODE);
	ft_victim_set_t got;
	ft_verdict_t v;
	mig_node_t m;

	mig_node_init(&m, at, 4, held, 4);
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_false(got.found);
	assert_int_equal(got.n, 0);
	assert_int_equal(got.level, FT_LEVEL_COUNT);
	d.mode = FT_MODE_BEST_EFFORT;
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_false(got.found);
	assert_int_equal(got.n, 0);
	ft_place_filter(&v, m.node, &d);
	assert_int_equal(v.fit, FT_UNFIT);
	assert_string_equal(
	    v.reason,
	    "node: at most 0 free GPUs (MIG) with 16 free CPUs in one node, need 0 GPUs and 1 3g.40gb MIG instances with 0 CPUs");
	/* Above the holder's priority the same search evicts it alone. */
	ft_victims_search(&got, m.node, &d, 3000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(m.node, &got, 0), "serving");
	mig_node_dispose(&m);
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
	static const held_t held[] = {{"a", 100, "MIG-0-0", "3g.40gb"},
				      {"b", 200, "MIG-0-4", "3g.40gb"},
				      {"c", 300, "MIG-1-0", "3g.40gb"},
				      {"unplaced", 0, NULL, NULL}};
	ft_demand_t d = demand(1, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	mig_node_t m;

	mig_node_init(&m, at, 4, held, 4);
	assert_int_equal(m.t->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	assert_false(ft_place_fits_level(m.node, &d, FT_LEVEL_NODE));
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(m.node, &got, 0), "unplaced");
	assert_true(ft_victims_feasible(m.node, &d, FT_LEVEL_NODE, got.holdings,
					got.n));
	/* The same asked as the profile itself. */
	d = mig_demand("3g.40gb", 1, FT_LEVEL_NODE);
	ft_victims_search(&got, m.node, &d, 1000, NULL);
	assert_int_equal(got.n, 1);
	assert_string_equal(victim(m.node, &got, 0), "unplaced");
	mig_node_dispose(&m);
}

/* Start slot number `k` (modulo their count) among those set in `starts`. */
static unsigned nth_start(uint8_t starts, unsigned k)
{
	k %= (unsigned)__builtin_popcount(starts);
	while (k--)
		starts &= (uint8_t)(starts - 1);
	return (unsigned)__builtin_ctz(starts);
}

/*
 * Random instances on MIG GPU position `g`, as its catalog entry allows:
 * known profiles at valid start slots, memory slices disjoint, at most 7
 * compute slices and each profile's instance limit; half of the tries take
 * one profile, so that a GPU often has several instances of it. `only`, when
 * not NULL, is the one profile used (a MIG-strategy single node).
 */
static void random_layout(ft_topology_t *t, unsigned g, const ft_mig_gpu_t *cat,
			  const char *only, unsigned *seed)
{
	unsigned counts[FT_MIG_PROFILES_MAX] = {0}, compute = 0, slices = 0;
	const ft_mig_profile_t *most =
	    only ? ft_mig_gpu_profile(cat, only)
		 : &cat->profiles[(unsigned)rand_r(seed) % cat->n_profiles];
	char uuid[32];

	for (int tries = 0; tries < 12; tries++) {
		const ft_mig_profile_t *p =
		    only || (unsigned)rand_r(seed) % 2
			? most
			: &cat->profiles[(unsigned)rand_r(seed) %
					 cat->n_profiles];
		unsigned at = (unsigned)(p - cat->profiles);
		unsigned start = nth_start(p->starts, (unsigned)rand_r(seed));
		unsigned span = ((1u << p->memory_slices) - 1) << start;
		if ((span & slices) || span > 0xff ||
		    compute + p->compute_slices > 7 ||
		    counts[at] >= p->max_instances)
			continue;
		slices |= span;
		compute += p->compute_slices;
		counts[at]++;
		snprintf(uuid, sizeof(uuid), "MIG-%u-%u", g, start);
		assert_true(ft_topology_add_mig(t, g, p->name, start,
						p->memory_slices, uuid) >= 0);
	}
}

/*
 * two_numa_box() with 1-4 MIG-enabled A100-80GB or H100-80GB GPUs with
 * random layouts and, unless `single`, 0-2 whole GPUs (NVLink-bridged when
 * two), alternating NUMA nodes; "G-<position>" are their uuids. `single`:
 * every instance of one profile, so the node is MIG strategy single.
 */
static ft_topology_t *random_mig_topology(const ft_mig_catalog_t *c,
					  bool single, unsigned *seed)
{
	unsigned n_mig = 1 + (unsigned)rand_r(seed) % 4;
	unsigned n_whole = single ? 0 : (unsigned)rand_r(seed) % 3;
	const char *only =
	    single ? mig_profiles[(unsigned)rand_r(seed) % 6] : NULL;
	ft_topology_t *t = two_numa_box();
	char uuid[16];

	for (unsigned g = 0; g < n_mig + n_whole; g++) {
		const char *model = mig_models[(unsigned)rand_r(seed) % 2];
		snprintf(uuid, sizeof(uuid), "G-%u", g);
		assert_int_equal(ft_topology_add_gpu(t, g % 2, g % 2, (int)g,
						     uuid, model, 81920),
				 (int)g);
		if (g < n_mig)
			random_layout(t, g, ft_mig_catalog_find(c, model), only,
				      seed);
	}
	if (n_whole == 2)
		assert_int_equal(
		    ft_topology_add_nvlink(t, (int)n_mig, (int)n_mig + 1, 4),
		    0);
	return finish_with_catalog(t, c);
}

/* Units already given to the random pods of one node. */
typedef struct {
	uint64_t mig[2];
	uint16_t gpus;
	ft_cpuset_t cpus;
} taken_t;

/* Up to `n` free instances of one profile, as pod `out`'s allocation. */
static void take_instances(ft_pod_t *out, const ft_topology_t *t,
			   taken_t *taken, unsigned n, unsigned *seed)
{
	const char *profile = NULL;

	for (int tries = 0; tries < 8 && out->allocation.n_mig < n; tries++) {
		unsigned i = (unsigned)rand_r(seed) % t->n_mig;
		if ((taken->mig[i / 64] >> (i % 64) & 1) ||
		    (profile && strcmp(profile, t->mig[i].profile) != 0))
			continue;
		taken->mig[i / 64] |= UINT64_C(1) << (i % 64);
		profile = t->mig[i].profile;
		out->allocation.mig_uuids[out->allocation.n_mig++] =
		    strdup(t->mig[i].uuid);
	}
	if (profile)
		snprintf(out->demand.mig_profile,
			 sizeof(out->demand.mig_profile), "%s", profile);
	out->demand.mig_count = out->allocation.n_mig;
}

/* Pinned CPUs not yet taken, as pod `out`'s allocation. */
static void take_cpus(ft_pod_t *out, taken_t *taken, unsigned *seed)
{
	char list[32];
	ft_cpuset_t set;

	random_cpus(list, sizeof(list), seed, 16);
	ft_cpuset_parse(&set, list);
	if (ft_cpuset_intersects(&set, &taken->cpus))
		return;
	ft_cpuset_or(&taken->cpus, &taken->cpus, &set);
	out->allocation.cpus = set;
	out->demand.exclusive_cpus = ft_cpuset_count(&set);
}

/*
 * One random pod on a MIG node: 1 or 2 instances of one profile, a whole
 * GPU, pinned CPUs alone, or an instance of unknown placement (no
 * allocation: on a MIG-strategy single node asked as nvidia.com/gpu); the
 * first two sometimes with pinned CPUs. Units never overlap.
 */
static void random_mig_pod(ft_pod_t *out, const char *uid,
			   const ft_topology_t *t, taken_t *taken,
			   unsigned *seed)
{
	unsigned kind = (unsigned)rand_r(seed) % 6;
	uint16_t whole = t->whole_gpus & (uint16_t)~taken->gpus;

	ft_test_pod(out, uid, (int32_t)((unsigned)rand_r(seed) % 4) * 100, NULL,
		    NULL, 0);
	out->start_time = (int64_t)((unsigned)rand_r(seed) % 5);
	if (kind < 3 && t->n_mig) {
		take_instances(out, t, taken, 1 + (kind == 2), seed);
	} else if (kind == 3 && whole) {
		unsigned g = (unsigned)__builtin_ctz(whole);
		taken->gpus |= (uint16_t)(1u << g);
		out->allocation.gpu_uuids[out->allocation.n_gpus++] =
		    strdup(t->gpus[g].uuid);
		out->demand.gpus = 1;
	} else if (kind == 4 && t->n_mig) {
		const char *single = ft_topology_single_profile(t);
		out->demand.gpus = single != NULL;
		out->demand.mig_count = single == NULL;
		snprintf(
		    out->demand.mig_profile, sizeof(out->demand.mig_profile),
		    "%s",
		    single ? ""
			   : t->mig[(unsigned)rand_r(seed) % t->n_mig].profile);
		return;
	}
	if (kind == 5 || (unsigned)rand_r(seed) % 2)
		take_cpus(out, taken, seed);
	out->has_allocation = out->allocation.n_mig || out->allocation.n_gpus ||
			      !ft_cpuset_empty(&out->allocation.cpus);
}

/*
 * A random preemptor on a MIG node: 1 or 2 instances of some profile (half
 * the time one the node has), sometimes with a whole GPU; on a MIG-strategy
 * single node, half the time 1 or 2 GPUs, which mean instances there. Some
 * also pin CPUs or require memory and a precision (fp8: H100 only).
 */
static ft_demand_t random_mig_demand(const ft_topology_t *t, unsigned *seed)
{
	static const unsigned precisions[] = {0, FT_PRECISION_FP8,
					      FT_PRECISION_BF16};
	ft_demand_t d = demand(
	    0, (unsigned)rand_r(seed) % 3 ? 0 : 1 + (unsigned)rand_r(seed) % 4,
	    (ft_level_t)((unsigned)rand_r(seed) % FT_LEVEL_COUNT),
	    (unsigned)rand_r(seed) % 2 ? FT_MODE_GUARANTEED
				       : FT_MODE_BEST_EFFORT);

	d.has_affinity = (unsigned)rand_r(seed) % 4 != 0;
	if (ft_topology_single_profile(t) && (unsigned)rand_r(seed) % 2) {
		d.gpus = 1 + (unsigned)rand_r(seed) % 2;
	} else {
		snprintf(d.mig_profile, sizeof(d.mig_profile), "%s",
			 (unsigned)rand_r(seed) % 5
			     ? t->mig[(unsigned)rand_r(seed) % t->n_mig].profile
			     : mig_profiles[(unsigned)rand_r(seed) % 6]);
		d.mig_count = 1 + (unsigned)rand_r(seed) % 2;
		d.gpus = t->whole_gpus && (unsigned)rand_r(seed) % 3 == 0;
	}
	if ((unsigned)rand_r(seed) % 4 == 0) {
		d.has_caps = true;
		d.caps.memory_mib = ((unsigned)rand_r(seed) % 3) * 20480;
		d.caps.precisions = precisions[(unsigned)rand_r(seed) % 3];
	}
	return d;
}

/* Does `d` fit at `level` on a node built afresh from `pods` less `gone`? */
static bool fits_rebuilt(ft_topology_t *t, ft_pod_t *pods, unsigned n,
			 const uint16_t *gone, unsigned n_gone,
			 const ft_demand_t *d, ft_level_t level)
{
	ft_pod_t *list[17];
	unsigned k = 0;
	ft_node_t *node;
	bool fits;

	for (unsigned i = 0; i < n; i++) {
		bool evicted = false;
		for (unsigned j = 0; j < n_gone; j++)
			evicted |= gone[j] == i;
		if (!evicted)
			list[k++] = &pods[i];
	}
	list[k] = NULL;
	node = ft_test_node("n", t, list);
	fits = ft_place_fits_level(node, d, level);
	ft_node_unref(node);
	return fits;
}

/*
 * The simulated eviction against the real thing: for a random subset of
 * lower-priority holdings, ft_victims_feasible() must agree with a node
 * rebuilt without those pods, at the level the demand asks and node-wide.
 */
static void check_eviction_rebuilt(ft_topology_t *t, ft_pod_t *pods, unsigned n,
				   const ft_node_t *node, const ft_demand_t *d,
				   int32_t priority, unsigned *seed)
{
	ft_level_t levels[2] = {ft_place_effective_level(d), FT_LEVEL_NODE};
	uint16_t gone[16];
	unsigned k = 0;

	for (unsigned i = 0; i < node->n_holdings; i++)
		if (node->holdings[i].priority < priority &&
		    (unsigned)rand_r(seed) % 2)
			gone[k++] = (uint16_t)i;
	for (unsigned l = 0; l < 2; l++)
		assert_int_equal(
		    ft_victims_feasible(node, d, levels[l], gone, k),
		    fits_rebuilt(t, pods, n, gone, k, d, levels[l]));
}

/*
 * Exactness on MIG nodes: random valid layouts (1-4 MIG GPUs, with whole
 * GPUs on mixed nodes; some nodes MIG strategy single), random holders of
 * instances, whole GPUs, CPUs and instances of unknown placement, random
 * budgets, and random preemptors asking instances (or GPUs meaning
 * instances), with affinities, both modes and capabilities.
 */
static void test_victims__exact_on_random_mig_nodes(void **state)
{
	ft_mig_catalog_t catalog;
	unsigned seed = 31337, single_nodes = 0, evicting = 0;

	assert_int_equal(ft_codec_mig_catalog_builtin(&catalog), 0);
	for (int round = 0; round < 4000; round++) {
		ft_topology_t *t = random_mig_topology(
		    &catalog, (unsigned)rand_r(&seed) % 4 == 0, &seed);
		unsigned n = 3 + (unsigned)rand_r(&seed) % 8;
		int32_t priority =
		    (int32_t)((unsigned)rand_r(&seed) % 4) * 100 + 50;
		ft_pod_t pods[10], *list[11];
		ft_demand_t d = random_mig_demand(t, &seed);
		ft_pdb_view_t pdb;
		ft_victim_set_t got;
		taken_t taken;
		ft_node_t *node;

		memset(&taken, 0, sizeof(taken));
		for (unsigned i = 0; i < n; i++) {
			char uid[16];
			snprintf(uid, sizeof(uid), "m%u", i);
			random_mig_pod(&pods[i], uid, t, &taken, &seed);
			list[i] = &pods[i];
		}
		list[n] = NULL;
		node = ft_test_node("n", t, list);
		assert_int_equal(node->conflicts, 0);
		random_pdb(&pdb, n, &seed);
		check_against_brute_force(&got, node, &d, priority,
					  (unsigned)rand_r(&seed) % 2 ? &pdb
								      : NULL);
		/* The pods really gone, the preemptor fits where it said. */
		assert_true(!got.found || fits_rebuilt(t, pods, n, got.holdings,
						       got.n, &d, got.level));
		evicting += got.found && got.n;
		check_eviction_rebuilt(t, pods, n, node, &d, priority, &seed);
		single_nodes += ft_topology_single_profile(t) != NULL;
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
		ft_topology_unref(t);
	}
	/* The random cases are not all trivial. */
	assert_true(evicting > 600);
	assert_true(single_nodes > 600);
	ft_mig_catalog_dispose(&catalog);
}

/*
 * GPUs of unknown NUMA node (graph-socket-gpus.json: GPUs 0 and 1 in socket
 * 0, GPU 2 in NUMA node 2, GPU 3 nowhere known) are victims only where
 * placement could use what they free: the cheap holder of GPU 3 frees
 * nothing at level socket, and no eviction gives two GPUs in a NUMA node.
 */
static void test_victims__unknown_gpu_locality(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-socket-gpus.json");
	ft_pod_t pods[4], *list[5];
	ft_demand_t d = demand(2, 0, FT_LEVEL_SOCKET, FT_MODE_GUARANTEED);
	static const int32_t prio[4] = {10, 10, 5, 1};
	static const char *const uid[4] = {"socket-0-a", "socket-0-b", "numa-2",
					   "nowhere"};
	ft_victim_set_t got;
	ft_node_t *node;

	for (unsigned i = 0; i < 4; i++) {
		pod(&pods[i], uid[i], prio[i], (int)i, -1, NULL, "GPU-graph");
		list[i] = &pods[i];
	}
	list[4] = NULL;
	node = ft_test_node("n", t, list);
	check_against_brute_force(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.level, FT_LEVEL_SOCKET);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "socket-0-a");
	assert_string_equal(node->holdings[got.holdings[1]].uid, "socket-0-b");
	d.level = FT_LEVEL_NUMA;
	check_against_brute_force(&got, node, &d, 1000, NULL);
	assert_false(got.found);
	d.level = FT_LEVEL_NODE;
	check_against_brute_force(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "numa-2");
	assert_string_equal(node->holdings[got.holdings[1]].uid, "nowhere");
	for (unsigned i = 0; i < 4; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* ---- cases found by comparing /preempt answers with a brute force ------- */

/* Many pods in one heap block, with their NULL-terminated list. */
typedef struct {
	ft_pod_t pods[300];
	ft_pod_t *list[301];
	unsigned n;
} crowd_t;

static crowd_t *crowd_new(void)
{
	crowd_t *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	return c;
}

/* The next pod of `c`: holding `uuids` (NULL-terminated) and `cpus`. */
static ft_pod_t *crowd_add(crowd_t *c, const char *uid, int32_t priority,
			   const char *const *uuids, const char *cpus)
{
	ft_pod_t *p = &c->pods[c->n];

	assert_true(c->n < 300);
	ft_test_pod(p, uid, priority, uuids, cpus, 0);
	c->list[c->n++] = p;
	c->list[c->n] = NULL;
	return p;
}

static void crowd_free(crowd_t *c)
{
	for (unsigned i = 0; i < c->n; i++)
		ft_pod_dispose(&c->pods[i]);
	free(c);
}

static const char *const a100_low[] = {"A-0", "A-1", "A-2", "A-3", NULL};
static const char *const a100_high[] = {"A-4", "A-5", "A-6", "A-7", NULL};

/* The uids of victims `set` in order, comma-separated, for asserts. */
static const char *victim_uids(char *buf, size_t size, const ft_node_t *node,
			       const uint16_t *idx, unsigned n)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < n && at < size; i++)
		at +=
		    (size_t)snprintf(buf + at, size - at, "%s%s", i ? "," : "",
				     node->holdings[idx[i]].uid);
	return buf;
}

/*
 * kube-scheduler proposes [x, hog, y]: x and y hold four GPUs each, hog
 * only requests CPU from the shared pool. The search evicts x alone (its
 * NUMA node's GPUs); hog stays a victim, since kube-scheduler needed its
 * CPU, and y does not.
 */
static void test_victims__untracked_proposed_victim_kept(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(4, 0, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	const char *proposed[3] = {"x", "hog", "y"};
	uint16_t idx[FT_VICTIM_MAX + 3];
	ft_victim_set_t got;
	ft_node_t *node;
	char uids[64];
	unsigned n;

	crowd_add(c, "x", 0, a100_low, NULL)->start_time = 100;
	crowd_add(c, "hog", 0, NULL, NULL)->demand.cpu_millis = 2000;
	crowd_add(c, "y", 0, a100_high, NULL)->start_time = 50;
	node = ft_test_node("n", t, c->list);
	assert_false(ft_victims_holds_units(&node->holdings[1]));
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found && got.exact);
	assert_string_equal(
	    victim_uids(uids, sizeof(uids), node, got.holdings, got.n), "x");
	n = ft_victims_with_proposed(idx, FT_VICTIM_MAX + 3, node, &got,
				     proposed, 3);
	assert_string_equal(victim_uids(uids, sizeof(uids), node, idx, n),
			    "x,hog");
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/*
 * GPU 0 is claimed twice: x (priority 100) by its allocation, y (priority
 * 0, placed without flextopo) as the node agent observed it. Evicting y
 * frees nothing while x holds GPU 0, so the pair needs GPU 7 and one of the
 * priority-50 pods on GPUs 1-6.
 */
static void test_victims__double_claimed_gpu_not_freed_alone(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	const char *const gpu0[] = {"A-0", NULL};
	ft_victim_set_t got;
	ft_observed_t *o;
	ft_node_t *node;
	ft_pod_t *y;
	uint16_t only_y = 1;

	crowd_add(c, "x", 100, gpu0, NULL);
	y = crowd_add(c, "y", 0, NULL, NULL);
	o = calloc(1, sizeof(*o));
	assert_non_null(o);
	o->node = strdup("n");
	o->source = FT_OBSERVED_PODRESOURCES;
	o->units.gpu_uuids[o->units.n_gpus++] = strdup("A-0");
	y->observed = o;
	for (unsigned g = 1; g < 7; g++) {
		char uid[8], uuid[8];
		const char *one[2] = {uuid, NULL};
		snprintf(uid, sizeof(uid), "z%u", g);
		snprintf(uuid, sizeof(uuid), "A-%u", g);
		crowd_add(c, uid, 50, one, NULL);
	}
	node = ft_test_node("n", t, c->list);
	assert_int_equal(node->conflicts, 1);
	assert_false(
	    ft_victims_feasible(node, &d, FT_LEVEL_NVLINK, &only_y, 1));
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found && got.exact);
	assert_int_equal(got.n, 1);
	assert_int_equal(node->holdings[got.holdings[0]].priority, 50);
	assert_int_equal(got.level, FT_LEVEL_NVLINK);
	assert_true(fits_rebuilt(t, c->pods, c->n, got.holdings, got.n, &d,
				 FT_LEVEL_NVLINK));
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/*
 * 21 batch pods of priority 0 on NUMA node 0 of an A100 box (64 CPUs per
 * NUMA node): five pin 4 CPUs, sixteen pin 2; 12 CPUs are free and NUMA
 * node 1 is held by a pod above the preemptor. A preemptor pinning 32 CPUs
 * needs 20 more: the five 4-CPU pods are the fewest, so the cheapest.
 */
static void test_victims__exact_with_many_equal_priorities(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(0, 32, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;
	unsigned cpu = 0;

	crowd_add(c, "serving", 5000, NULL, "64-127");
	for (unsigned i = 0; i < 21; i++) {
		char uid[16], cpus[16];
		unsigned k = i < 5 ? 4 : 2;
		snprintf(uid, sizeof(uid), "%s-%u", k == 4 ? "wide" : "narrow",
			 i);
		snprintf(cpus, sizeof(cpus), "%u-%u", cpu, cpu + k - 1);
		crowd_add(c, uid, 0, NULL, cpus)->start_time = (int64_t)i;
		cpu += k;
	}
	node = ft_test_node("n", t, c->list);
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found);
	assert_true(got.exact);
	assert_int_equal(got.fallback, FT_VICTIM_EXACT);
	assert_int_equal(got.n, 5);
	for (unsigned i = 0; i < got.n; i++)
		assert_memory_equal(node->holdings[got.holdings[i]].uid, "wide",
				    4);
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/* A budget allowing `allowed` disruptions, selecting app=`app`. */
static void budget_init(ft_pdb_t *out, const char *app, int32_t allowed)
{
	memset(out, 0, sizeof(*out));
	out->ns = strdup("default");
	out->name = strdup(app ? app : "all");
	out->disruptions_allowed = allowed;
	if (!app)
		return;
	out->selector.n_reqs = 1;
	out->selector.reqs = calloc(1, sizeof(*out->selector.reqs));
	out->selector.reqs->key = strdup("app");
	out->selector.reqs->op = FT_SEL_IN;
	out->selector.reqs->n_values = 1;
	out->selector.reqs->values = calloc(1, sizeof(char *));
	out->selector.reqs->values[0] = strdup(app);
}

static void label(ft_pod_t *pod, const char *app)
{
	char text[64];

	snprintf(text, sizeof(text), "app=%s", app);
	pod->labels = calloc(1, sizeof(char *));
	pod->labels[0] = strdup(text);
	pod->n_labels = 1;
}

/* Holdings in pod order: every pod of the crowd is bound and running. */
static void view_budgets(ft_pdb_view_t *out, const ft_node_t *node,
			 const crowd_t *c, const ft_pdb_t *budgets, unsigned n)
{
	const ft_pod_t *pods[300];
	const ft_pdb_t *list[4];

	assert_int_equal(node->n_holdings, c->n);
	for (unsigned i = 0; i < c->n; i++)
		pods[i] = &c->pods[i];
	for (unsigned i = 0; i < n; i++)
		list[i] = &budgets[i];
	ft_victims_pdb_view(out, node, pods, list, n);
}

/*
 * 64 DaemonSet-like pods come first on the node. A (priority 10) is covered
 * by a budget allowing no disruption, B (priority 20) by none: evicting B
 * violates nothing, so B is the answer, whatever A's position.
 */
static void test_victims__budgets_past_the_64th_pod(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(4, 0, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_pdb_view_t pdb;
	ft_pdb_t budget;
	ft_node_t *node;

	for (unsigned i = 0; i < 64; i++) {
		char uid[16];
		snprintf(uid, sizeof(uid), "daemon-%u", i);
		label(crowd_add(c, uid, 2000, NULL, NULL), "daemon");
	}
	label(crowd_add(c, "A", 10, a100_low, NULL), "a");
	label(crowd_add(c, "B", 20, a100_high, NULL), "b");
	node = ft_test_node("n", t, c->list);
	budget_init(&budget, "a", 0);
	view_budgets(&pdb, node, c, &budget, 1);
	assert_false(pdb.truncated);
	assert_int_equal(pdb.n_of[64], 1);
	ft_victims_search(&got, node, &d, 1000, &pdb);
	assert_true(got.found && got.exact);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "B");
	assert_int_equal(got.cost.pdb_violations, 0);
	ft_pdb_dispose(&budget);
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/* One socket, two NUMA nodes of 96 CPUs (0-95, 96-191), no GPUs. */
static ft_topology_t *cpu_box_96(void)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_cpuset_parse(&cpus, "0-95"), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 262144), 0);
	assert_int_equal(ft_cpuset_parse(&cpus, "96-191"), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 1, &cpus, 262144), 1);
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

/*
 * 64 pods of priority 100-163 pin one CPU each of NUMA node 0; Z (priority
 * 0), listed after them, pins 8. A preemptor needing 8 more CPUs there
 * evicts Z alone.
 */
static void test_victims__candidates_past_the_64th(void **state)
{
	ft_topology_t *t = cpu_box_96();
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(0, 32, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_node_t *node;

	crowd_add(c, "serving", 5000, NULL, "96-191");
	for (unsigned i = 0; i < 64; i++) {
		char uid[16], cpus[8];
		snprintf(uid, sizeof(uid), "one-%u", i);
		snprintf(cpus, sizeof(cpus), "%u", i);
		crowd_add(c, uid, (int32_t)(100 + i), NULL, cpus);
	}
	crowd_add(c, "Z", 0, NULL, "64-71");
	node = ft_test_node("n", t, c->list);
	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_true(got.found && got.exact);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "Z");
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/*
 * p (priority 10) is covered by a budget selecting app=p, q (priority 20)
 * only by one with an empty selector, both allowing no disruption.
 * kube-scheduler counts no budget for q (an empty selector matches no pod
 * there), so evicting q violates none and is cheaper than p. A pod without
 * labels matches no budget, even one that selects by NotIn.
 */
static void test_victims__budgets_counted_as_kube_scheduler_counts(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	crowd_t *c = crowd_new();
	ft_demand_t d = demand(4, 0, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_victim_set_t got;
	ft_pdb_view_t pdb;
	ft_pdb_t budgets[2];
	ft_node_t *node;
	ft_pod_t *p;

	p = crowd_add(c, "p", 10, a100_low, NULL);
	label(p, "p");
	label(crowd_add(c, "q", 20, a100_high, NULL), "q");
	node = ft_test_node("n", t, c->list);
	budget_init(&budgets[0], "p", 0);
	budget_init(&budgets[1], NULL, 0);
	view_budgets(&pdb, node, c, budgets, 2);
	assert_int_equal(pdb.n_of[0], 1);
	assert_int_equal(pdb.n_of[1], 0);
	ft_victims_search(&got, node, &d, 1000, &pdb);
	assert_true(got.found && got.exact);
	assert_int_equal(got.n, 1);
	assert_string_equal(node->holdings[got.holdings[0]].uid, "q");
	assert_int_equal(got.cost.pdb_violations, 0);
	/* No labels: no budget, whatever its selector. */
	budgets[0].selector.reqs[0].op = FT_SEL_NOT_IN;
	assert_true(ft_pdb_counts(&budgets[0], "default", "q", p->labels, 0) ==
		    false);
	assert_true(
	    ft_pdb_counts(&budgets[0], "default", "q", c->pods[1].labels, 1));
	budgets[0].selector.nothing = true;
	assert_false(
	    ft_pdb_counts(&budgets[0], "default", "q", c->pods[1].labels, 1));
	ft_pdb_dispose(&budgets[0]);
	ft_pdb_dispose(&budgets[1]);
	ft_node_unref(node);
	crowd_free(c);
	ft_topology_unref(t);
}

/* ---- gangs -----------------------------------------------------------------
 */

/* Holdings of `node` by uid, in `uids` order. */
static void holdings_named(uint16_t *out, const ft_node_t *node,
			   const char *const *uids, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		const ft_holding_t *h = ft_node_find_holding(node, uids[k]);
		assert_non_null(h);
		out[k] = (uint16_t)(h - node->holdings);
	}
}

/* Gang `g` (1-based) of `gv` gets the holdings named, and `n_remote`
 * members elsewhere of `priority`. */
static void gang_add(ft_gang_view_t *gv, unsigned g, bool whole, uint32_t slack,
		     const ft_node_t *node, const char *const *uids, unsigned n,
		     unsigned n_remote, int32_t priority)
{
	uint16_t idx[8];

	gv->n_gangs = g > gv->n_gangs ? g : gv->n_gangs;
	gv->gangs[g - 1] =
	    (ft_victim_gang_t){whole, slack, gv->n_remote, n_remote};
	for (unsigned r = 0; r < n_remote; r++)
		gv->remote[gv->n_remote++] =
		    (ft_gang_remote_t){.priority = priority, .start_time = 1};
	holdings_named(idx, node, uids, n);
	for (unsigned k = 0; k < n; k++)
		gv->of[idx[k]] = (uint16_t)g;
}

static bool names(const ft_victim_set_t *set, const ft_node_t *node,
		  const char *uid)
{
	for (unsigned i = 0; i < set->n; i++)
		if (!strcmp(node->holdings[set->holdings[i]].uid, uid))
			return true;
	return false;
}

/*
 * An 8x A100 box (`t`): pods m0..m<members-1> of priority 0, started at
 * `start`, on the first GPUs, and pods solo-<k> of priority `solo`, started
 * at 0, on the others; 8 pods.
 */
static ft_node_t *members_and_solos(ft_topology_t *t, ft_pod_t *pods,
				    unsigned members, int64_t start,
				    int32_t solo)
{
	ft_pod_t *list[9];
	char uid[16];

	for (unsigned k = 0; k < 8; k++) {
		snprintf(uid, sizeof(uid), k < members ? "m%u" : "solo-%u", k);
		pod(&pods[k], uid, k < members ? 0 : solo, (int)k, -1, NULL,
		    "A");
		pods[k].start_time = k < members ? start : 0;
		list[k] = &pods[k];
	}
	list[8] = NULL;
	return ft_test_node("n", t, list);
}

static void dispose_all(ft_pod_t *pods, unsigned n, ft_node_t *node,
			ft_topology_t *t, ft_gang_view_t *gv)
{
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
	free(gv);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * issue 35's example: one member of an 8-pod training gang holds a NUMA
 * node of an 8x RTX 4090 box; two solo pods of the same priority hold
 * another. Counted pod by pod, the member alone is cheaper; counted by what
 * the cluster loses, the two solo pods are.
 */
static void test_victims__gang_member_costs_its_whole_gang(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_demand_t d = demand(1, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_gang_view_t *gv = calloc(1, sizeof(*gv));
	const char *train[] = {"train-0"};
	ft_pod_t pods[9], *list[10];
	ft_victim_set_t got;
	unsigned n = 0;
	ft_node_t *node;
	char uid[16], cpus[16];

	assert_non_null(gv);
	pod(&pods[n++], "train-0", 0, 0, -1, "0-7", "R");
	pod(&pods[n++], "solo-a", 0, 1, -1, "8-11", "R");
	pod(&pods[n++], "solo-b", 0, -1, -1, "12-15", "R");
	for (unsigned k = 2; k < 8; k++) {
		snprintf(uid, sizeof(uid), "online-%u", k);
		snprintf(cpus, sizeof(cpus), "%u-%u", 8 * k, 8 * k + 7);
		pod(&pods[n++], uid, 5000, (int)k, -1, cpus, "R");
	}
	for (unsigned i = 0; i < n; i++)
		list[i] = &pods[i];
	list[n] = NULL;
	node = ft_test_node("n", t, list);

	ft_victims_search(&got, node, &d, 1000, NULL);
	assert_int_equal(got.n, 1);
	assert_true(names(&got, node, "train-0"));

	gang_add(gv, 1, true, 0, node, train, 1, 7, 0);
	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_true(got.found);
	assert_true(got.exact);
	assert_int_equal(got.n, 2);
	assert_true(names(&got, node, "solo-a"));
	assert_true(names(&got, node, "solo-b"));
	assert_int_equal(got.cost.count, 2);
	assert_int_equal(got.n_broken, 0);
	assert_int_equal(got.level, FT_LEVEL_NUMA);
	dispose_all(pods, n, node, t, gv);
}

/*
 * A set that breaks a gang frees its other members here too, and names
 * them: they are lost anyway. One GPU asked, two freed.
 */
static void test_victims__broken_gang_frees_its_members_here(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_demand_t d = demand(1, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_gang_view_t *gv = calloc(1, sizeof(*gv));
	const char *members[] = {"m0", "m1"};
	ft_pod_t pods[8];
	ft_victim_set_t got;
	ft_victim_cost_t cost;
	uint16_t idx[2], broken[FT_GANG_MAX];
	unsigned n_broken;
	ft_node_t *node = members_and_solos(t, pods, 2, 0, 50);

	assert_non_null(gv);
	gang_add(gv, 1, true, 0, node, members, 2, 2, 0);

	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_true(got.found);
	assert_int_equal(got.n, 2);
	assert_true(names(&got, node, "m0"));
	assert_true(names(&got, node, "m1"));
	assert_int_equal(got.n_broken, 1);
	assert_int_equal(got.broken[0], 0);
	assert_int_equal(got.cost.count, 4); /* two here, two elsewhere */
	assert_int_equal(got.cost.max_priority, 0);

	/* The cost of evicting m0 alone is the whole gang's. */
	holdings_named(idx, node, members, 1);
	assert_true(ft_victims_cost_gangs(&cost, broken, &n_broken, node, idx,
					  1, NULL, gv, 1000));
	assert_int_equal(cost.count, 4);
	assert_int_equal(n_broken, 1);
	/* No preemptor of priority 0 may break it. */
	assert_false(ft_victims_cost_gangs(&cost, NULL, NULL, node, idx, 1,
					   NULL, gv, 0));
	dispose_all(pods, 8, node, t, gv);
}

/*
 * An elastic gang above its minimum loses members one by one, each a pod;
 * one more than its slack breaks it, and then it costs all its members.
 */
static void test_victims__elastic_gang_within_its_slack(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_demand_t d = demand(1, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_gang_view_t *gv = calloc(1, sizeof(*gv));
	const char *members[] = {"m0", "m1"};
	ft_pod_t pods[8];
	ft_victim_set_t got;
	/* The members started last: alone, each is the cheapest pod. */
	ft_node_t *node = members_and_solos(t, pods, 2, 9, 0);

	assert_non_null(gv);
	gang_add(gv, 1, false, 1, node, members, 2, 4, 0);

	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_int_equal(got.n, 1);
	assert_true(names(&got, node, "m0") || names(&got, node, "m1"));
	assert_int_equal(got.cost.count, 1);
	assert_int_equal(got.n_broken, 0);

	/* Two GPUs: both members would break it (6 pods); two solo pods. */
	d.gpus = 2;
	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_int_equal(got.cost.count, 2);
	assert_int_equal(got.n_broken, 0);
	assert_false(names(&got, node, "m0") && names(&got, node, "m1"));
	dispose_all(pods, 8, node, t, gv);
}

/*
 * A gang with a member the preemptor does not outrank, here or elsewhere,
 * is never broken: no set may evict its whole members.
 */
static void test_victims__gang_with_a_higher_member_not_broken(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_demand_t d = demand(8, 0, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	ft_gang_view_t *gv = calloc(1, sizeof(*gv));
	const char *members[] = {"m0"};
	ft_pod_t pods[8];
	ft_victim_set_t got;
	ft_node_t *node = members_and_solos(t, pods, 1, 0, 0);

	assert_non_null(gv);
	gang_add(gv, 1, true, 0, node, members, 1, 1, 1000);

	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_false(got.found);
	d.gpus = 7;
	ft_victims_search_gangs(&got, node, &d, 1000, NULL, gv);
	assert_true(got.found);
	assert_int_equal(got.n, 7);
	assert_false(names(&got, node, "m0"));
	dispose_all(pods, 8, node, t, gv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_victims__exact_on_random_nodes),
	    cmocka_unit_test(test_victims__exact_on_random_shared_nodes),
	    cmocka_unit_test(test_victims__exact_on_random_mig_nodes),
	    cmocka_unit_test(test_victims__paper_scenario_numa),
	    cmocka_unit_test(test_victims__pdb_avoided_when_another_set_exists),
	    cmocka_unit_test(test_victims__exact_with_budgets),
	    cmocka_unit_test(test_victims__exact_with_unknown_usage),
	    cmocka_unit_test(test_victims__none_when_higher_priority_blocks),
	    cmocka_unit_test(test_victims__requires_only_matching_units),
	    cmocka_unit_test(test_victims__single_strategy_frees_instances),
	    cmocka_unit_test(test_victims__mig_frees_the_profile_asked),
	    cmocka_unit_test(
		test_victims__mig_none_when_only_other_profiles_are_lower),
	    cmocka_unit_test(test_victims__mig_unknown_placement_given_back),
	    cmocka_unit_test(test_victims__unknown_gpu_locality),
	    cmocka_unit_test(test_victims__untracked_proposed_victim_kept),
	    cmocka_unit_test(test_victims__double_claimed_gpu_not_freed_alone),
	    cmocka_unit_test(test_victims__exact_with_many_equal_priorities),
	    cmocka_unit_test(test_victims__budgets_past_the_64th_pod),
	    cmocka_unit_test(test_victims__candidates_past_the_64th),
	    cmocka_unit_test(test_victims__gang_member_costs_its_whole_gang),
	    cmocka_unit_test(test_victims__broken_gang_frees_its_members_here),
	    cmocka_unit_test(test_victims__elastic_gang_within_its_slack),
	    cmocka_unit_test(
		test_victims__gang_with_a_higher_member_not_broken),
	    cmocka_unit_test(
		test_victims__budgets_counted_as_kube_scheduler_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
