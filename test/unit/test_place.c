/* Placement: filter verdicts, scores and chosen placements on reference
 * servers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/error.h>
#include <flextopo/place.h>

#include "support.h"

static ft_demand_t demand(uint32_t gpus, uint32_t cpus, int level,
			  ft_affinity_mode_t mode)
{
	ft_demand_t d;

	memset(&d, 0, sizeof(d));
	d.gpus = gpus;
	d.exclusive_cpus = cpus;
	d.cpu_millis = cpus * 1000;
	d.memory_mib = 1024;
	d.has_affinity = level >= 0;
	d.level = level >= 0 ? (ft_level_t)level : FT_LEVEL_NODE;
	d.mode = mode;
	return d;
}

/* A node of `t` whose listed GPU indexes (-1 terminated) are held. */
static ft_node_t *node_holding(ft_topology_t *t, const char *prefix,
			       const int *held)
{
	ft_pod_t pods[16], *list[17];
	char uuids[16][64];
	const char *one[2] = {NULL, NULL};
	unsigned n = 0;
	ft_node_t *node;

	for (; held && held[n] >= 0; n++) {
		char uid[16];
		snprintf(uuids[n], sizeof(uuids[n]), "%s-%d", prefix, held[n]);
		snprintf(uid, sizeof(uid), "held-%u", n);
		one[0] = uuids[n];
		ft_test_pod(&pods[n], uid, 0, one, NULL, 0);
		list[n] = &pods[n];
	}
	list[n] = NULL;
	node = ft_test_node("n", t, list);
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
	return node;
}

static void test_place__nvlink_pair_free_fits(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_node_t *node = node_holding(t, "P", NULL);
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(v.level, FT_LEVEL_NVLINK);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_true(p.gpus == 0x3 || p.gpus == 0xc);
	assert_int_equal(p.level, FT_LEVEL_NVLINK);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__nvlink_broken_pairs_unfit(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	const int held[] = {1, 2, -1};
	ft_node_t *node = node_holding(t, "P", held);
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT);
	assert_string_equal(v.reason,
			    "nvlink: at most 1 free GPUs with 8 free CPUs in "
			    "one NVLink group, need 2 GPUs with 0 CPUs");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED),
			 FT_ENOTFOUND);
	/* Best-effort still takes the two unlinked GPUs. */
	d.mode = FT_MODE_BEST_EFFORT;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0x9);
	assert_int_equal(p.level, FT_LEVEL_SOCKET);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__nvlink_never_on_pcie_box(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_node_t *node = node_holding(t, "R", NULL);
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_non_null(strstr(v.reason, "even when empty"));
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__numa_gpus_and_cpus_together(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	const int held[] = {0, 1, 2, -1};
	ft_node_t *node = node_holding(t, "A", held);
	ft_demand_t d = demand(2, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	/* NUMA 0 has one free GPU left, so both GPUs come from NUMA 1. */
	assert_int_equal(p.gpus & 0x0f, 0);
	assert_int_equal(__builtin_popcount(p.gpus), 2);
	assert_int_equal(p.numa_nodes, 0x2);
	assert_int_equal(ft_cpuset_count(&p.cpus), 8);
	for (unsigned c = 0; c < 64; c++)
		assert_false(ft_cpuset_has(&p.cpus, c));
	assert_int_equal(p.level, FT_LEVEL_NUMA);
	assert_true(p.levels & (1u << FT_LEVEL_NVLINK));
	assert_int_equal(p.memory_mib, 1024);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__numa_unresolvable_on_one_gpu_per_numa(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_node_t *node = node_holding(t, "R", NULL);
	ft_demand_t d = demand(2, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(v.reason,
			    "numa: at most 1 GPUs with 8 CPUs in one NUMA "
			    "node even when empty, need 2 GPUs with 8 CPUs");
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__best_effort_prefers_socket(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	const int held[] = {0, -1};
	ft_node_t *node = node_holding(t, "R", held);
	ft_demand_t d = demand(2, 0, FT_LEVEL_NUMA, FT_MODE_BEST_EFFORT);
	ft_placement_t p;

	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	/* Two GPUs of socket 0 (GPUs 1-3), never one from each socket. */
	assert_int_equal(p.gpus & 0xf1, 0);
	assert_int_equal(p.level, FT_LEVEL_SOCKET);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__single_gpu_keeps_nvlink_pair(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	const int held[] = {1, -1};
	ft_node_t *node = node_holding(t, "P", held);
	ft_demand_t d = demand(1, 0, -1, FT_MODE_BEST_EFFORT);
	ft_placement_t p;

	/* GPU 0 lost its partner already; taking it keeps pair (2,3) whole. */
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0x1);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__unknown_usage_counts(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_node_t *node;
	ft_verdict_t v;

	ft_test_pod(&pod, "unplaced", 0, NULL, NULL, 7);
	node = ft_test_node("n", t, list);
	assert_int_equal(node->unknown_gpus, 7);
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT);
	assert_non_null(strstr(v.reason, "node:"));
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__policy_picks_domain(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	const int held[] = {0, -1};
	ft_node_t *node = node_holding(t, "A", held);
	ft_demand_t d = demand(1, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;

	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.numa_nodes, 0x1);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(p.numa_nodes, 0x2);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__score_follows_level_and_policy(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	const int broken[] = {1, 2, -1}, one[] = {3, -1};
	ft_node_t *empty = node_holding(t, "P", NULL);
	ft_node_t *split = node_holding(t, "P", broken);
	ft_node_t *half = node_holding(t, "P", one);
	ft_demand_t d = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_BEST_EFFORT);

	/* Free pair: 8 level points; split pairs: socket level, 8 - 2*3 = 2. */
	assert_int_equal(ft_place_score(empty, &d, FT_POLICY_DISTRIBUTED), 10);
	assert_int_equal(ft_place_score(empty, &d, FT_POLICY_PACKED), 8);
	assert_int_equal(ft_place_score(split, &d, FT_POLICY_PACKED), 3);
	assert_int_equal(ft_place_score(half, &d, FT_POLICY_PACKED), 9);
	assert_true(ft_place_score(half, &d, FT_POLICY_PACKED) >
		    ft_place_score(split, &d, FT_POLICY_PACKED));
	ft_node_unref(empty);
	ft_node_unref(split);
	ft_node_unref(half);
	ft_topology_unref(t);
}

static void test_place__cpu_only_numa(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = demand(0, 8, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_node_t *node;

	ft_test_pod(&pod, "cpus", 0, NULL, "0-3,8-11", 0);
	node = ft_test_node("n", t, list);
	assert_int_equal(ft_place_effective_level(&d), FT_LEVEL_NUMA);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(__builtin_popcount(p.numa_nodes), 1);
	assert_int_equal(ft_cpuset_count(&p.cpus), 8);
	assert_false(ft_cpuset_intersects(&p.cpus, &node->cpus_used));
	assert_int_equal(p.level, FT_LEVEL_NUMA);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__no_topology(void **state)
{
	ft_node_t *node = ft_test_node("bare", NULL, NULL);
	ft_demand_t d = demand(1, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(v.reason, "topology: no topology");
	d.has_affinity = false;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED),
			 FT_EINVAL);
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_PACKED), 0);
	ft_node_unref(node);
}

static ft_topology_t *mig_topology(void)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	ft_cpuset_parse(&cpus, "0-15");
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 65536), 0);
	assert_int_equal(
	    ft_topology_add_gpu(t, 0, FT_NONE, 0, "H-0", "H100", 81920), 0);
	assert_int_equal(
	    ft_topology_add_gpu(t, 0, FT_NONE, 1, "H-1", "H100", 81920), 1);
	assert_int_equal(
	    ft_topology_add_gpu(t, 0, FT_NONE, 2, "H-2", "H100", 81920), 2);
	assert_int_equal(ft_topology_add_mig(t, 0, "3g.40gb", 0, 4, "MIG-0a"),
			 0);
	assert_int_equal(ft_topology_add_mig(t, 0, "3g.40gb", 4, 4, "MIG-0b"),
			 1);
	assert_int_equal(ft_topology_add_mig(t, 1, "3g.40gb", 0, 4, "MIG-1a"),
			 2);
	assert_int_equal(ft_topology_add_mig(t, 1, "1g.10gb", 4, 1, "MIG-1b"),
			 3);
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

static void test_place__mig_instances(void **state)
{
	ft_topology_t *t = mig_topology();
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = demand(0, 0, -1, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;
	ft_node_t *node;

	ft_test_pod(&pod, "small", 0, NULL, NULL, 0);
	pod.allocation.mig_uuids[pod.allocation.n_mig++] = strdup("MIG-1b");
	pod.has_allocation = true;
	node = ft_test_node("n", t, list);
	snprintf(d.mig_profile, sizeof(d.mig_profile), "3g.40gb");
	d.mig_count = 1;
	assert_int_equal(t->whole_gpus, 0x4);
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	/* Packed: the GPU with a used slice (GPU 1) first. */
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.mig[0], UINT64_C(1) << 2);
	assert_int_equal(p.gpus, 0);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(p.mig[0], UINT64_C(1) << 0);
	d.mig_count = 4;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	snprintf(d.mig_profile, sizeof(d.mig_profile), "7g.80gb");
	d.mig_count = 1;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* Add a placement to a node as a new holding and rebuild it. */
static ft_node_t *with_placement(ft_node_t *node, const ft_placement_t *p,
				 ft_pod_t *pods, unsigned *n)
{
	const ft_topology_t *t = node->topology;
	ft_pod_t *list[64];
	char uid[32];
	ft_node_t *next;

	snprintf(uid, sizeof(uid), "p%u", *n);
	ft_test_pod(&pods[*n], uid, 0, NULL, NULL, 0);
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (p->gpus & (1u << g))
			pods[*n]
			    .allocation
			    .gpu_uuids[pods[*n].allocation.n_gpus++] =
			    strdup(t->gpus[g].uuid);
	pods[*n].allocation.cpus = p->cpus;
	pods[*n].has_allocation = true;
	(*n)++;
	for (unsigned i = 0; i < *n; i++)
		list[i] = &pods[i];
	list[*n] = NULL;
	next = ft_test_node("n", node->topology, list);
	ft_node_unref(node);
	return next;
}

/*
 * Property: on random demands against a filling node, choose succeeds
 * exactly when filter says FIT, and a chosen placement uses only free units,
 * has the asked counts and reaches the asked level in guaranteed mode.
 */
static void test_place__choose_agrees_with_filter(void **state)
{
	ft_topology_t *tops[3] = {ft_test_topology_4090("R"),
				  ft_test_topology_a100("A"),
				  ft_test_topology_pairs4("P")};
	unsigned seed = 12345;

	for (int round = 0; round < 60; round++) {
		ft_topology_t *t = tops[round % 3];
		ft_node_t *node = ft_test_node("n", t, NULL);
		ft_pod_t pods[48];
		unsigned n = 0;
		for (int step = 0; step < 40 && n < 48; step++) {
			ft_demand_t d =
			    demand((unsigned)rand_r(&seed) % 4,
				   (unsigned)rand_r(&seed) % 12,
				   (int)((unsigned)rand_r(&seed) % 6) - 1,
				   rand_r(&seed) % 2 ? FT_MODE_GUARANTEED
						     : FT_MODE_BEST_EFFORT);
			ft_verdict_t v;
			ft_placement_t p;
			int rc;
			ft_place_filter(&v, node, &d);
			rc = ft_place_choose(&p, node, &d, FT_POLICY_PACKED);
			assert_int_equal(rc == 0, v.fit == FT_FIT);
			if (rc < 0)
				continue;
			assert_int_equal(__builtin_popcount(p.gpus), d.gpus);
			assert_int_equal(p.gpus & node->gpus_used, 0);
			assert_int_equal(ft_cpuset_count(&p.cpus),
					 d.exclusive_cpus);
			assert_false(
			    ft_cpuset_intersects(&p.cpus, &node->cpus_used));
			if (d.has_affinity && d.mode == FT_MODE_GUARANTEED)
				assert_true(
				    p.levels &
				    (1u << ft_place_effective_level(&d)));
			node = with_placement(node, &p, pods, &n);
			assert_int_equal(node->conflicts, 0);
		}
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	for (int i = 0; i < 3; i++)
		ft_topology_unref(tops[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_place__nvlink_pair_free_fits),
	    cmocka_unit_test(test_place__nvlink_broken_pairs_unfit),
	    cmocka_unit_test(test_place__nvlink_never_on_pcie_box),
	    cmocka_unit_test(test_place__numa_gpus_and_cpus_together),
	    cmocka_unit_test(test_place__numa_unresolvable_on_one_gpu_per_numa),
	    cmocka_unit_test(test_place__best_effort_prefers_socket),
	    cmocka_unit_test(test_place__single_gpu_keeps_nvlink_pair),
	    cmocka_unit_test(test_place__unknown_usage_counts),
	    cmocka_unit_test(test_place__policy_picks_domain),
	    cmocka_unit_test(test_place__score_follows_level_and_policy),
	    cmocka_unit_test(test_place__cpu_only_numa),
	    cmocka_unit_test(test_place__no_topology),
	    cmocka_unit_test(test_place__mig_instances),
	    cmocka_unit_test(test_place__choose_agrees_with_filter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
