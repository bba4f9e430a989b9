/* Placement: filter verdicts, scores and chosen placements on reference
 * servers; MIG policies, MIG strategy single and capability matching; NUMA
 * memory (short, and unknown on FlexTopo graphs) and GPUs of unknown
 * locality. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/mig.h>
#include <flextopo/place.h>

#include "support.h"

/* The built-in MIG catalog, loaded by the group setup. */
static ft_mig_catalog_t catalog;

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

/*
 * Two pods whose annotations claim GPU 0 and CPUs 0-1 (a restarted extender
 * bound the second from an empty model): the pair is recorded, the units
 * they share count as held once and are never handed out again, and the
 * truly idle GPUs 2 and 3 stay usable.
 */
static void test_place__conflict_keeps_idle_units_usable(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("C");
	const char *gpu0[] = {"C-0", NULL}, *gpu1[] = {"C-1", NULL};
	ft_pod_t pods[3], *list[4] = {&pods[0], &pods[1], &pods[2], NULL};
	ft_demand_t one = demand(1, 2, -1, FT_MODE_GUARANTEED);
	ft_demand_t three = demand(3, 0, -1, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;
	ft_node_t *node;
	char text[256];

	ft_test_pod(&pods[0], "first", 0, gpu0, "0-1", 0);
	ft_test_pod(&pods[1], "second", 0, gpu1, NULL, 0);
	ft_test_pod(&pods[2], "again", 0, gpu0, "0-1", 0);
	node = ft_test_node("n", t, list);
	assert_int_equal(node->conflicts, 1);
	assert_int_equal(node->n_conflict_pairs, 1);
	assert_int_equal(node->conflict_pods, 2);
	assert_int_equal(node->conflict_pairs[0].earlier, 0);
	assert_int_equal(node->conflict_pairs[0].later, 2);
	assert_int_equal(node->conflict_pairs[0].gpus, 0x1);
	assert_true(node->holdings[0].in_conflict);
	assert_false(node->holdings[1].in_conflict);
	assert_string_equal(ft_conflict_units_text(text, sizeof(text), node,
						   &node->conflict_pairs[0]),
			    "GPU 0 (C-0), CPUs 0-1");
	assert_int_equal(node->gpus_used, 0x3);
	assert_int_equal(node->numa_free_cpus[0], 6);
	ft_place_filter(&v, node, &one);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(ft_place_choose(&p, node, &one, FT_POLICY_PACKED), 0);
	assert_true(p.gpus == 0x4 || p.gpus == 0x8);
	assert_false(ft_cpuset_intersects(&p.cpus, &node->cpus_used));
	ft_place_filter(&v, node, &three);
	assert_int_not_equal(v.fit, FT_FIT);
	for (unsigned i = 0; i < 3; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
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
	assert_string_equal(
	    v.reason,
	    "nvlink: at most 1 free GPUs with 8 free CPUs in one NVLink group, need 2 GPUs with 0 CPUs");
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
	assert_string_equal(
	    v.reason,
	    "numa: at most 1 GPUs with 8 CPUs in one NUMA node even when empty, need 2 GPUs with 8 CPUs");
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

static void test_place__mig_instances(void **state)
{
	ft_topology_t *t = ft_test_topology_mig();
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
	for (unsigned i = 0; i < t->n_mig; i++)
		if ((p->mig[i / 64] >> (i % 64)) & 1)
			pods[*n]
			    .allocation.mig_uuids[pods[*n].allocation.n_mig++] =
			    strdup(t->mig[i].uuid);
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

/* ---- MIG policies, MIG strategy single, capabilities ------------------ */

#define H100 "NVIDIA H100 80GB HBM3"

/* GPU g's instances from "profile@start" words; "" enables MIG only. */
static void add_layout(ft_topology_t *t, unsigned g, const char *layout)
{
	const ft_mig_gpu_t *cat =
	    ft_mig_catalog_find(&catalog, t->gpus[g].model);
	const char *at = layout;
	char profile[32], uuid[32];
	unsigned start;
	int used;

	assert_int_equal(ft_topology_enable_mig(t, g), 0);
	while (sscanf(at, " %31[^@]@%u%n", profile, &start, &used) == 2) {
		const ft_mig_profile_t *p = ft_mig_gpu_profile(cat, profile);
		assert_non_null(p);
		snprintf(uuid, sizeof(uuid), "MIG-%u-%u", g, start);
		assert_true(ft_topology_add_mig(t, g, profile, start,
						p->memory_slices, uuid) >= 0);
		at += used;
	}
}

/*
 * A box of `n` GPUs: one socket, one NUMA node (CPUs 0-15), one PCIe
 * switch, every pair of GPUs NVLinked (an NVSwitch board). models[g] names
 * GPU g's product (memory from the catalog, 24564 MiB when unknown);
 * layouts[g] is its MIG layout (see add_layout) or NULL for a whole GPU.
 * GPU uuids are "G-<g>", instance uuids "MIG-<g>-<start>". `strategy` < 0
 * leaves the MIG strategy to inference. The catalog's facts are applied.
 */
static ft_topology_t *box(const char *const *models, const char *const *layouts,
			  unsigned n, int strategy)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	assert_int_equal(ft_cpuset_parse(&cpus, "0-15"), 0);
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 262144), 0);
	assert_int_equal(ft_topology_add_switch(t, 0, 0), 0);
	for (unsigned g = 0; g < n; g++) {
		const ft_mig_gpu_t *cat =
		    ft_mig_catalog_find(&catalog, models[g]);
		char uuid[16];
		snprintf(uuid, sizeof(uuid), "G-%u", g);
		assert_int_equal(
		    ft_topology_add_gpu(t, 0, 0, (int)g, uuid, models[g],
					cat ? cat->memory_mib : 24564),
		    (int)g);
		if (layouts && layouts[g])
			add_layout(t, g, layouts[g]);
	}
	for (unsigned a = 0; a < n; a++)
		for (unsigned b = a + 1; b < n; b++)
			assert_int_equal(
			    ft_topology_add_nvlink(t, (int)a, (int)b, 18), 0);
	if (strategy >= 0)
		ft_topology_set_mig_strategy(t, (ft_mig_strategy_t)strategy);
	assert_int_equal(ft_topology_finish(t), 0);
	assert_int_equal(ft_mig_catalog_check(&catalog, t), 0);
	ft_mig_catalog_apply(&catalog, t);
	return t;
}

static ft_topology_t *h100_box(const char *const *layouts, unsigned n,
			       int strategy)
{
	const char *const models[4] = {H100, H100, H100, H100};

	assert_true(n <= 4);
	return box(models, layouts, n, strategy);
}

/* A pod holding the MIG instances named (NULL-terminated). */
static void mig_pod(ft_pod_t *out, const char *uid, int32_t priority,
		    const char *const *mig)
{
	ft_test_pod(out, uid, priority, NULL, NULL, 0);
	for (unsigned i = 0; mig[i]; i++)
		out->allocation.mig_uuids[out->allocation.n_mig++] =
		    strdup(mig[i]);
	out->has_allocation = true;
}

static ft_demand_t mig_demand(const char *profile, uint32_t count)
{
	ft_demand_t d = demand(0, 0, -1, FT_MODE_GUARANTEED);

	snprintf(d.mig_profile, sizeof(d.mig_profile), "%s", profile);
	d.mig_count = count;
	return d;
}

/* The GPU positions of a placement's MIG instances. */
static uint16_t mig_gpus(const ft_topology_t *t, const ft_placement_t *p)
{
	uint16_t gpus = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if ((p->mig[i / 64] >> (i % 64)) & 1)
			gpus |= (uint16_t)(1u << t->mig[i].gpu);
	return gpus;
}

static unsigned mig_count(const ft_placement_t *p)
{
	return (unsigned)(__builtin_popcountll(p->mig[0]) +
			  __builtin_popcountll(p->mig[1]));
}

/*
 * GPU 0 is empty with two free 2g.20gb; GPU 1 has three free 2g.20gb and a
 * used 1g.10gb. Fewest free instances would pick GPU 0 and break a whole
 * GPU; packed picks the GPU with used slices, distributed the empty one.
 */
static void test_place__mig_packed_fills_busy_gpu(void **state)
{
	const char *const layouts[3] = {
	    "2g.20gb@0 2g.20gb@2", "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6",
	    NULL};
	const char *const held[] = {"MIG-1-6", NULL};
	ft_topology_t *t = h100_box(layouts, 3, -1);
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = mig_demand("2g.20gb", 1);
	ft_placement_t p;
	ft_node_t *node;

	mig_pod(&pod, "small", 0, held);
	node = ft_test_node("n", t, list);
	assert_int_equal(t->mig_strategy, FT_MIG_STRATEGY_MIXED);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(mig_gpus(t, &p), 0x2);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(mig_gpus(t, &p), 0x1);
	/* With an affinity the domains are ordered the same way. */
	d.has_affinity = true;
	d.level = FT_LEVEL_NVLINK;
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(mig_gpus(t, &p), 0x2);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(mig_gpus(t, &p), 0x1);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__mig_distributed_spreads_instances(void **state)
{
	const char *const layouts[2] = {"3g.40gb@0 3g.40gb@4",
					"3g.40gb@0 3g.40gb@4"};
	ft_topology_t *t = h100_box(layouts, 2, -1);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = mig_demand("3g.40gb", 2);
	ft_placement_t p;

	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(mig_count(&p), 2);
	assert_int_equal(mig_gpus(t, &p), 0x3);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(mig_count(&p), 2);
	assert_int_equal(__builtin_popcount(mig_gpus(t, &p)), 1);
	assert_int_equal(p.level, FT_LEVEL_NVLINK);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* flextopo.io/allocation-policy wins over the configured policy. */
static void test_place__pod_policy_overrides_config(void **state)
{
	const char *const layouts[3] = {
	    "2g.20gb@0 2g.20gb@2", "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6",
	    NULL};
	const char *const held[] = {"MIG-1-6", NULL};
	ft_topology_t *t = h100_box(layouts, 3, -1);
	ft_topology_t *a100 = ft_test_topology_a100("A");
	const int gpu0[] = {0, -1};
	ft_node_t *whole = node_holding(a100, "A", gpu0);
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = mig_demand("2g.20gb", 1);
	ft_demand_t g = demand(1, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_node_t *node;

	mig_pod(&pod, "small", 0, held);
	node = ft_test_node("n", t, list);
	/* Five free 2g.20gb, none used: packed 0 points, distributed 2. */
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_PACKED), 8);
	d.has_policy = true;
	d.policy = FT_POLICY_DISTRIBUTED;
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(mig_gpus(t, &p), 0x1);
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_PACKED), 10);
	d.policy = FT_POLICY_PACKED;
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(mig_gpus(t, &p), 0x2);
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_DISTRIBUTED), 8);
	/* Whole GPUs: the NUMA node the pod's policy prefers. */
	g.has_policy = true;
	g.policy = FT_POLICY_DISTRIBUTED;
	assert_int_equal(ft_place_choose(&p, whole, &g, FT_POLICY_PACKED), 0);
	assert_int_equal(p.numa_nodes, 0x2);
	g.policy = FT_POLICY_PACKED;
	assert_int_equal(ft_place_choose(&p, whole, &g, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(p.numa_nodes, 0x1);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_node_unref(whole);
	ft_topology_unref(t);
	ft_topology_unref(a100);
}

#define SEVEN_1G                                                               \
	"1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 "         \
	"1g.10gb@6"

static void test_place__single_strategy_gpus_are_instances(void **state)
{
	const char *const layouts[2] = {SEVEN_1G, SEVEN_1G};
	ft_topology_t *t = h100_box(layouts, 2, -1);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = demand(2, 0, -1, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;
	ft_units_t u;

	assert_int_equal(t->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	assert_string_equal(ft_topology_single_profile(t), "1g.10gb");
	ft_place_units(&u, t, &d);
	assert_int_equal(u.demand.gpus, 0);
	assert_int_equal(u.demand.mig_count, 2);
	assert_string_equal(u.demand.mig_profile, "1g.10gb");
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(p.gpus, 0);
	assert_int_equal(mig_count(&p), 2);
	assert_int_equal(mig_gpus(t, &p), 0x3);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(__builtin_popcount(mig_gpus(t, &p)), 1);
	assert_true(ft_place_score(node, &d, FT_POLICY_PACKED) > 0);
	d.gpus = 15;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(
	    v.reason,
	    "node: at most 14 GPUs (MIG) with 16 CPUs in one node even when empty, need 0 GPUs and 15 1g.10gb MIG instances with 0 CPUs");
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* nvidia.com/gpu of a pod placed without flextopo are instances there. */
static void test_place__single_strategy_unknown_usage(void **state)
{
	const char *const layouts[2] = {SEVEN_1G, SEVEN_1G};
	ft_topology_t *t = h100_box(layouts, 2, -1);
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = demand(2, 0, -1, FT_MODE_GUARANTEED);
	ft_node_t *node;
	ft_verdict_t v;

	ft_test_pod(&pod, "unplaced", 0, NULL, NULL, 13);
	node = ft_test_node("n", t, list);
	assert_int_equal(node->unknown_gpus, 0);
	assert_int_equal(node->holdings[0].unknown_mig, 13);
	assert_string_equal(node->holdings[0].unknown_mig_profile, "1g.10gb");
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT);
	d.gpus = 1;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* "migStrategy":"mixed" turns the inference off: no whole GPU is there. */
static void test_place__explicit_mixed_strategy(void **state)
{
	const char *const layouts[2] = {SEVEN_1G, SEVEN_1G};
	ft_topology_t *t = h100_box(layouts, 2, FT_MIG_STRATEGY_MIXED);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = demand(1, 0, -1, FT_MODE_GUARANTEED);
	ft_verdict_t v;

	assert_null(ft_topology_single_profile(t));
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	d = mig_demand("1g.10gb", 1);
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static ft_caps_t caps(uint64_t mib, unsigned precisions,
		      ft_interconnect_t interconnect, uint32_t domain)
{
	ft_caps_t c = {mib, precisions, interconnect, domain};

	return c;
}

static ft_demand_t with_caps(ft_demand_t d, ft_caps_t c)
{
	d.has_caps = true;
	d.caps = c;
	return d;
}

static void expect_refused(const ft_node_t *node, const ft_demand_t *d,
			   const char *reason)
{
	ft_placement_t p;
	ft_verdict_t v;

	ft_place_filter(&v, node, d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(v.reason, reason);
	assert_int_equal(ft_place_choose(&p, node, d, FT_POLICY_PACKED),
			 FT_ENOTFOUND);
	assert_int_equal(ft_place_score(node, d, FT_POLICY_PACKED), 0);
}

static void expect_fit(const ft_node_t *node, const ft_demand_t *d)
{
	ft_verdict_t v;

	ft_place_filter(&v, node, d);
	if (v.fit != FT_FIT)
		fail_msg("expected a fit: %s", v.reason);
}

static void test_place__requires_memory_and_precision(void **state)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_topology_t *a100 = ft_test_topology_a100("A");
	ft_node_t *node, *node_a;
	ft_demand_t d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED),
				  caps(40960, FT_PRECISION_FP8, 0, 0));

	ft_mig_catalog_apply(&catalog, t);
	ft_mig_catalog_apply(&catalog, a100);
	node = ft_test_node("n", t, NULL);
	node_a = ft_test_node("a", a100, NULL);
	expect_refused(
	    node, &d,
	    "requires: 0 of 8 GPUs match (memoryPerGpu 40Gi: 24564 MiB; precision fp8: not supported by NVIDIA GeForce RTX 4090 (not in the MIG catalog))");
	expect_refused(
	    node_a, &d,
	    "requires: 0 of 8 GPUs match (precision fp8: not supported by NVIDIA A100-SXM4-80GB)");
	d.caps.precisions = FT_PRECISION_BF16 | FT_PRECISION_FP16;
	expect_fit(node_a, &d);
	d.caps.memory_mib = 81921;
	expect_refused(
	    node_a, &d,
	    "requires: 0 of 8 GPUs match (memoryPerGpu 81921Mi: 81920 MiB)");
	ft_node_unref(node);
	ft_node_unref(node_a);
	ft_topology_unref(t);
	ft_topology_unref(a100);
}

static void test_place__requires_interconnect_and_domain(void **state)
{
	ft_topology_t *r = ft_test_topology_4090("R");
	ft_topology_t *a = ft_test_topology_a100("A");
	ft_topology_t *pairs = ft_test_topology_pairs4("P");
	ft_node_t *nr = ft_test_node("r", r, NULL);
	ft_node_t *na = ft_test_node("a", a, NULL);
	ft_node_t *np = ft_test_node("p", pairs, NULL);
	ft_demand_t d = with_caps(demand(2, 0, -1, FT_MODE_GUARANTEED),
				  caps(0, 0, FT_INTERCONNECT_NVLINK, 0));

	expect_refused(
	    nr, &d,
	    "requires: 0 of 8 GPUs match (interconnect nvlink: no NVLink peers)");
	expect_fit(na, &d);
	expect_fit(np, &d);
	d.caps.interconnect = FT_INTERCONNECT_PCIE;
	expect_fit(nr, &d);
	d.caps.nvlink_domain = 4;
	expect_refused(
	    np, &d,
	    "requires: 0 of 4 GPUs match (nvlinkDomainSize 4: NVLink domain of 2 GPUs)");
	expect_fit(na, &d);
	d.caps.nvlink_domain = 1;
	expect_fit(nr, &d);
	ft_node_unref(nr);
	ft_node_unref(na);
	ft_node_unref(np);
	ft_topology_unref(r);
	ft_topology_unref(a);
	ft_topology_unref(pairs);
}

/*
 * The requirement case on a mixed H100: memoryPerGpu 40Gi and fp8 are met by a
 * 3g.40gb slice or a whole H100, never by a 1g.10gb.
 */
static void test_place__requires_mig_slice_or_whole_gpu(void **state)
{
	const char *const layouts[4] = {"3g.40gb@0 3g.40gb@4", SEVEN_1G, NULL,
					NULL};
	ft_topology_t *t = h100_box(layouts, 4, -1);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_caps_t c = caps(40960, FT_PRECISION_FP8, 0, 0);
	ft_demand_t d = with_caps(mig_demand("1g.10gb", 1), c);
	ft_placement_t p;

	expect_refused(
	    node, &d,
	    "requires: 0 of 7 MIG 1g.10gb instances match (memoryPerGpu 40Gi: 10240 MiB)");
	d = with_caps(mig_demand("3g.40gb", 1), c);
	expect_fit(node, &d);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(mig_gpus(t, &p), 0x1);
	d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED), c);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus & 0x3, 0);
	assert_int_equal(__builtin_popcount(p.gpus), 1);
	/* Slices share no NVLink; the two whole GPUs form a domain of 2. */
	d = with_caps(mig_demand("3g.40gb", 1),
		      caps(0, 0, FT_INTERCONNECT_NVLINK, 0));
	expect_refused(
	    node, &d,
	    "requires: 0 of 2 MIG 3g.40gb instances match (interconnect nvlink: MIG instances share no NVLink)");
	d = with_caps(mig_demand("3g.40gb", 1), caps(0, 0, 0, 2));
	expect_refused(
	    node, &d,
	    "requires: 0 of 2 MIG 3g.40gb instances match (nvlinkDomainSize 2: NVLink domain of 1 (a MIG instance))");
	d = with_caps(demand(2, 0, -1, FT_MODE_GUARANTEED), caps(0, 0, 0, 2));
	expect_fit(node, &d);
	d.caps.nvlink_domain = 3;
	expect_refused(
	    node, &d,
	    "requires: 0 of 2 GPUs match (nvlinkDomainSize 3: NVLink domain of 2 GPUs)");
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* On a single-strategy node nvidia.com/gpu must be met by the instances. */
static void test_place__requires_single_strategy(void **state)
{
	const char *const small[2] = {SEVEN_1G, SEVEN_1G};
	const char *const big[2] = {"3g.40gb@0 3g.40gb@4",
				    "3g.40gb@0 3g.40gb@4"};
	ft_topology_t *t1 = h100_box(small, 2, -1);
	ft_topology_t *t3 = h100_box(big, 2, -1);
	ft_node_t *n1 = ft_test_node("n1", t1, NULL);
	ft_node_t *n3 = ft_test_node("n3", t3, NULL);
	ft_demand_t d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED),
				  caps(40960, FT_PRECISION_FP8, 0, 0));
	ft_placement_t p;

	expect_refused(
	    n1, &d,
	    "requires: 0 of 14 MIG 1g.10gb instances match (memoryPerGpu 40Gi: 10240 MiB)");
	expect_fit(n3, &d);
	assert_int_equal(ft_place_choose(&p, n3, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0);
	assert_int_equal(mig_count(&p), 1);
	ft_node_unref(n1);
	ft_node_unref(n3);
	ft_topology_unref(t1);
	ft_topology_unref(t3);
}

/* Capabilities cannot be checked without a topology. */
static void test_place__requires_needs_topology(void **state)
{
	ft_node_t *node = ft_test_node("bare", NULL, NULL);
	ft_demand_t d = demand(1, 0, -1, FT_MODE_GUARANTEED);
	ft_verdict_t v;

	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	d = with_caps(d, caps(40960, 0, 0, 0));
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(v.reason, "topology: no topology");
	ft_node_unref(node);
}

/* Two H100 (fp8) and two A100-40GB (no fp8) on one board. */
static ft_topology_t *mixed_products(void)
{
	const char *const models[4] = {H100, H100, "NVIDIA A100-SXM4-40GB",
				       "NVIDIA A100-SXM4-40GB"};

	return box(models, NULL, 4, -1);
}

static void test_place__requires_choose_and_score_count_matching(void **state)
{
	ft_topology_t *t = mixed_products();
	const char *const a100[] = {"G-2", NULL}, *const h100[] = {"G-0", NULL};
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = with_caps(demand(2, 0, -1, FT_MODE_GUARANTEED),
				  caps(0, FT_PRECISION_FP8, 0, 0));
	ft_demand_t plain = demand(1, 0, -1, FT_MODE_GUARANTEED);
	ft_node_t *empty = ft_test_node("n", t, NULL), *node;
	ft_placement_t p;
	ft_verdict_t v;

	assert_int_equal(ft_place_choose(&p, empty, &d, FT_POLICY_DISTRIBUTED),
			 0);
	assert_int_equal(p.gpus, 0x3);
	/* An A100 in use: of the matching GPUs none is, so packed gets no
	 * policy points; counting every GPU it would get 1. */
	ft_test_pod(&pod, "a100-user", 0, a100, NULL, 0);
	node = ft_test_node("n", t, list);
	d.gpus = 1;
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_PACKED), 8);
	assert_int_equal(ft_place_score(node, &plain, FT_POLICY_PACKED), 9);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	/* An H100 in use: one matching GPU left, so two are short now. */
	ft_test_pod(&pod, "h100-user", 0, h100, NULL, 0);
	node = ft_test_node("n", t, list);
	d.gpus = 2;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT);
	assert_string_equal(
	    v.reason,
	    "node: at most 1 free GPUs with 16 free CPUs in one node, need 2 GPUs with 0 CPUs");
	d.gpus = 1;
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0x2);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_node_unref(empty);
	ft_topology_unref(t);
}

static ft_caps_t random_caps(unsigned *seed)
{
	static const uint64_t mib[] = {0, 10240, 20480, 40960, 81920};
	static const unsigned prec[] = {0, FT_PRECISION_FP8,
					FT_PRECISION_BF16 | FT_PRECISION_FP16,
					FT_PRECISION_FP64};
	static const uint32_t domain[] = {0, 1, 2, 4};

	return caps(mib[(unsigned)rand_r(seed) % 5],
		    prec[(unsigned)rand_r(seed) % 4],
		    (ft_interconnect_t)((unsigned)rand_r(seed) % 3),
		    domain[(unsigned)rand_r(seed) % 4]);
}

static ft_demand_t random_demand(unsigned *seed, const ft_topology_t *t)
{
	ft_demand_t d =
	    demand((unsigned)rand_r(seed) % 3, (unsigned)rand_r(seed) % 6,
		   (int)((unsigned)rand_r(seed) % 6) - 1,
		   rand_r(seed) % 2 ? FT_MODE_GUARANTEED : FT_MODE_BEST_EFFORT);

	if (t->n_mig && rand_r(seed) % 2) {
		const char *profile =
		    t->mig[(unsigned)rand_r(seed) % t->n_mig].profile;
		snprintf(d.mig_profile, sizeof(d.mig_profile), "%s", profile);
		d.mig_count = 1 + (unsigned)rand_r(seed) % 3;
		d.gpus = 0;
	}
	d.has_policy = rand_r(seed) % 2;
	d.policy = rand_r(seed) % 2 ? FT_POLICY_PACKED : FT_POLICY_DISTRIBUTED;
	if (rand_r(seed) % 4)
		d = with_caps(d, random_caps(seed));
	return d;
}

/* A chosen placement has the asked units, all free and all matching. */
static void check_placement(const ft_node_t *node, const ft_demand_t *d,
			    const ft_placement_t *p)
{
	ft_units_t u;

	ft_place_units(&u, node->topology, d);
	assert_int_equal(__builtin_popcount(p->gpus), u.demand.gpus);
	assert_int_equal(mig_count(p), u.demand.mig_count);
	assert_int_equal(p->gpus & (uint16_t)~u.gpus, 0);
	assert_int_equal(p->mig[0] & ~u.mig[0], 0);
	assert_int_equal(p->mig[1] & ~u.mig[1], 0);
	assert_int_equal(p->gpus & node->gpus_used, 0);
	assert_int_equal(p->mig[0] & node->mig_used[0], 0);
	assert_int_equal(p->mig[1] & node->mig_used[1], 0);
	assert_false(ft_cpuset_intersects(&p->cpus, &node->cpus_used));
	if (d->has_affinity && d->mode == FT_MODE_GUARANTEED)
		assert_true(p->levels &
			    (1u << ft_place_effective_level(&u.demand)));
}

/*
 * The units listed one by one agree with the masks filter and choose count
 * (ft_place_units) and with the node's usage.
 */
static void check_units_agree(const ft_node_t *node, const ft_demand_t *d)
{
	ft_unit_check_t u[FT_UNITS_MAX];
	unsigned n = ft_place_check_units(u, node, d);
	uint64_t mig[2] = {0, 0};
	uint16_t gpus = 0;
	ft_units_t units;

	ft_place_units(&units, node->topology, d);
	for (unsigned i = 0; i < n; i++) {
		unsigned pos = u[i].position;
		assert_int_not_equal(u[i].kind, FT_UNIT_SHARED);
		if (u[i].kind == FT_UNIT_MIG) {
			mig[pos / 64] |= (uint64_t)!u[i].faults << (pos % 64);
			assert_int_equal(u[i].free,
					 !ft_node_mig_used(node, pos));
		} else {
			gpus |= (uint16_t)(!u[i].faults << pos);
			assert_int_equal(u[i].free,
					 (ft_node_free_gpus(node) >> pos) & 1);
		}
	}
	assert_int_equal(gpus, units.demand.gpus ? units.gpus : 0);
	assert_int_equal(mig[0], units.mig[0]);
	assert_int_equal(mig[1], units.mig[1]);
}

/*
 * The servers of the randomised tests: the three reference servers with the
 * MIG catalog applied, mixed MIG products, an H100 box in mixed and one in
 * single strategy.
 */
static void random_tops(ft_topology_t *out[6])
{
	const char *const mixed[4] = {"3g.40gb@0 3g.40gb@4", SEVEN_1G,
				      "2g.20gb@0 2g.20gb@2 1g.10gb@4", NULL};
	const char *const single[3] = {"3g.40gb@0 3g.40gb@4",
				       "3g.40gb@0 3g.40gb@4", ""};

	out[0] = ft_test_topology_4090("R");
	out[1] = ft_test_topology_a100("A");
	out[2] = ft_test_topology_pairs4("P");
	out[3] = mixed_products();
	out[4] = h100_box(mixed, 4, -1);
	out[5] = h100_box(single, 3, -1);
	for (int i = 0; i < 3; i++)
		ft_mig_catalog_apply(&catalog, out[i]);
}

/*
 * Property: with capabilities, pod policies, MIG and single-strategy nodes
 * in the mix, choose succeeds exactly when filter says FIT, and a chosen
 * placement uses only free units that meet the capabilities.
 */
static void test_place__choose_agrees_with_filter_with_requires(void **state)
{
	ft_topology_t *tops[6];
	unsigned seed = 4242;

	random_tops(tops);
	assert_int_equal(tops[5]->mig_strategy, FT_MIG_STRATEGY_SINGLE);
	for (int round = 0; round < 90; round++) {
		ft_topology_t *t = tops[round % 6];
		ft_node_t *node = ft_test_node("n", t, NULL);
		ft_pod_t pods[48];
		unsigned n = 0;
		for (int step = 0; step < 30 && n < 48; step++) {
			ft_demand_t d = random_demand(&seed, t);
			ft_verdict_t v;
			ft_placement_t p;
			int rc;
			check_units_agree(node, &d);
			ft_place_filter(&v, node, &d);
			rc = ft_place_choose(&p, node, &d,
					     rand_r(&seed) % 2
						 ? FT_POLICY_PACKED
						 : FT_POLICY_DISTRIBUTED);
			assert_int_equal(rc == 0, v.fit == FT_FIT);
			if (rc < 0)
				continue;
			check_placement(node, &d, &p);
			node = with_placement(node, &p, pods, &n);
			assert_int_equal(node->conflicts, 0);
		}
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	for (int i = 0; i < 6; i++)
		ft_topology_unref(tops[i]);
}

/* The pairs4 box with every GPU shared into `replicas` replicas. */
static ft_topology_t *shared_pairs4(unsigned replicas)
{
	ft_topology_t *t = ft_test_topology_pairs4("S");

	for (unsigned g = 0; g < t->n_gpus; g++)
		assert_int_equal(ft_topology_share_gpu(t, g, replicas), 0);
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

static ft_demand_t shared_demand(uint32_t ranks, uint32_t fraction_milli,
				 int level)
{
	ft_demand_t d = demand(ranks, 0, level, FT_MODE_GUARANTEED);

	d.gpu_fraction_milli = fraction_milli;
	return d;
}

/* Bind `p` on `node` as a new pod (through the allocation codec). */
static ft_node_t *with_shared_placement(ft_node_t *node,
					const ft_placement_t *p, ft_pod_t *pods,
					unsigned *n)
{
	ft_pod_t *list[16];
	char uid[32];
	ft_node_t *next;

	snprintf(uid, sizeof(uid), "s%u", *n);
	ft_test_pod(&pods[*n], uid, 0, NULL, NULL, 0);
	assert_int_equal(ft_codec_allocation_from_placement(
			     &pods[*n].allocation, p, node, FT_MODE_GUARANTEED),
			 0);
	pods[*n].has_allocation = true;
	(*n)++;
	for (unsigned i = 0; i < *n; i++)
		list[i] = &pods[i];
	list[*n] = NULL;
	next = ft_test_node("n", node->topology, list);
	ft_node_unref(node);
	return next;
}

static uint16_t replica_mask(const ft_placement_t *p)
{
	uint16_t gpus = 0;

	for (unsigned g = 0; g < FT_GPU_MAX; g++)
		if (p->replicas[g])
			gpus |= (uint16_t)(1u << g);
	return gpus;
}

/*
 * Seed 000: 2 ranks x 0.8 GPU on an NVLink pair of GPUs shared 10 ways take
 * 8 replicas of each; a 0.2 pod fills a leftover under packed and takes an
 * empty GPU under distributed.
 */
static void test_place__shared_ranks_on_nvlink_pair(void **state)
{
	ft_topology_t *t = shared_pairs4(10);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t big = shared_demand(2, 800, FT_LEVEL_NVLINK);
	ft_demand_t small = shared_demand(1, 200, -1);
	ft_pod_t pods[4];
	unsigned n = 0;
	ft_placement_t p, q;
	ft_verdict_t v;

	ft_place_filter(&v, node, &big);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(v.level, FT_LEVEL_NVLINK);
	assert_int_equal(ft_place_choose(&p, node, &big, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0);
	assert_true(replica_mask(&p) == 0x3 || replica_mask(&p) == 0xc);
	assert_true(p.levels & (1u << FT_LEVEL_NVLINK));
	for (unsigned g = 0; g < 4; g++)
		assert_int_equal(p.replicas[g],
				 (replica_mask(&p) >> g) & 1 ? 8 : 0);
	node = with_shared_placement(node, &p, pods, &n);
	assert_int_equal(ft_place_choose(&q, node, &small, FT_POLICY_PACKED),
			 0);
	assert_int_equal(__builtin_popcount(replica_mask(&q)), 1);
	assert_true(replica_mask(&q) & replica_mask(&p));
	assert_int_equal(q.replicas[__builtin_ctz(replica_mask(&q))], 2);
	assert_int_equal(
	    ft_place_choose(&q, node, &small, FT_POLICY_DISTRIBUTED), 0);
	assert_false(replica_mask(&q) & replica_mask(&p));
	/* The same replicas claimed twice overflow the GPUs: a conflict. */
	node = with_shared_placement(node, &p, pods, &n);
	assert_int_equal(node->conflicts, 1);
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_place__shared_pairs_fill_up(void **state)
{
	ft_topology_t *t = shared_pairs4(10);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t big = shared_demand(2, 800, FT_LEVEL_NVLINK);
	ft_pod_t pods[4];
	unsigned n = 0;
	ft_placement_t p;
	ft_verdict_t v;

	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(
		    ft_place_choose(&p, node, &big, FT_POLICY_PACKED), 0);
		node = with_shared_placement(node, &p, pods, &n);
	}
	assert_int_equal(node->conflicts, 0);
	ft_place_filter(&v, node, &big);
	assert_int_equal(v.fit, FT_UNFIT);
	assert_non_null(strstr(v.reason, "2 ranks of 0.8 GPU"));
	/* 0.2 still fits in every leftover, and 0.3 in none. */
	big = shared_demand(4, 200, -1);
	ft_place_filter(&v, node, &big);
	assert_int_equal(v.fit, FT_FIT);
	big = shared_demand(1, 300, -1);
	ft_place_filter(&v, node, &big);
	assert_int_equal(v.fit, FT_UNFIT);
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * A GPU held whole serves no replica (nor its NVLink pair a 2 x 0.8 whose
 * peer has 7 free); a GPU with replicas held is not free
 * for whole GPUs; without a fraction, replicas stack under packed and
 * spread under distributed; off shared nodes a fraction rounds up to a GPU.
 */
static void test_place__shared_whole_exclusion(void **state)
{
	ft_topology_t *t = shared_pairs4(10);
	const char *whole[] = {"S-0", NULL};
	ft_demand_t big = shared_demand(2, 800, FT_LEVEL_NVLINK);
	ft_demand_t three = shared_demand(3, 0, -1);
	ft_topology_t *plain = ft_test_topology_pairs4("P");
	ft_node_t *node, *pnode;
	ft_pod_t pods[2];
	ft_pod_t *list[3] = {&pods[0], &pods[1], NULL};
	ft_placement_t p;

	ft_test_pod(&pods[0], "whole", 0, whole, NULL, 0);
	ft_test_pod(&pods[1], "shared", 0, NULL, NULL, 0);
	pods[1].has_allocation = true;
	pods[1].allocation.replica_gpus[0] = strdup("S-3");
	pods[1].allocation.replica_counts[0] = 3;
	pods[1].allocation.n_replicas = 1;
	node = ft_test_node("n", t, list);
	assert_int_equal(node->conflicts, 0);
	assert_int_equal(node->replicas_used[3], 3);
	assert_int_equal(ft_node_free_gpus(node), 0x6);
	assert_int_equal(ft_place_choose(&p, node, &big, FT_POLICY_PACKED),
			 FT_ENOTFOUND);
	assert_int_equal(ft_place_choose(&p, node, &three, FT_POLICY_PACKED),
			 0);
	assert_int_equal(p.replicas[3], 3);
	assert_int_equal(
	    ft_place_choose(&p, node, &three, FT_POLICY_DISTRIBUTED), 0);
	assert_int_equal(replica_mask(&p), 0x6);
	pnode = ft_test_node("n", plain, NULL);
	assert_int_equal(ft_place_choose(&p, pnode, &big, FT_POLICY_PACKED), 0);
	assert_int_equal(__builtin_popcount(p.gpus), 2);
	assert_int_equal(replica_mask(&p), 0);
	for (unsigned i = 0; i < 2; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(pnode);
	ft_node_unref(node);
	ft_topology_unref(plain);
	ft_topology_unref(t);
}

/* ---- units checked one by one (the debug view's explain) ------------ */

/*
 * A listing as words "<kind><position>[/<free replicas>]:<free|held>:
 * <failed capabilities joined by +, or ok>", separated by spaces.
 */
static void units_text(char *buf, size_t size, const ft_unit_check_t *u,
		       unsigned n)
{
	static const char *const kinds[] = {"gpu", "mig", "shared"};
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < n && len < size; i++) {
		const char *sep = "";
		len += (size_t)snprintf(buf + len, size - len, "%s%s%u",
					i ? " " : "", kinds[u[i].kind],
					u[i].position);
		if (u[i].kind == FT_UNIT_SHARED && len < size)
			len += (size_t)snprintf(buf + len, size - len, "/%u",
						u[i].replicas_free);
		if (len < size)
			len += (size_t)snprintf(buf + len, size - len, ":%s:%s",
						u[i].free ? "free" : "held",
						u[i].faults ? "" : "ok");
		for (unsigned k = 0; k < FT_CAP_COUNT && len < size; k++)
			if (u[i].faults & (1u << k)) {
				len += (size_t)snprintf(
				    buf + len, size - len, "%s%s", sep,
				    ft_cap_name((ft_cap_t)k));
				sep = "+";
			}
	}
}

static void expect_units(const ft_node_t *node, const ft_demand_t *d,
			 const char *expected)
{
	ft_unit_check_t u[FT_UNITS_MAX];
	char text[2048];

	units_text(text, sizeof(text), u, ft_place_check_units(u, node, d));
	assert_string_equal(text, expected);
}

static void expect_fault(const ft_topology_t *t, const ft_caps_t *c,
			 const ft_unit_check_t *u, ft_cap_t cap, uint64_t asked,
			 uint64_t actual, const char *reason)
{
	ft_unit_fault_t f;

	assert_true(u->faults & (1u << cap));
	ft_place_unit_fault(&f, t, c, u, cap);
	assert_int_equal(f.cap, cap);
	assert_int_equal(f.asked, asked);
	assert_int_equal(f.actual, actual);
	assert_string_equal(f.reason, reason);
}

/*
 * A mixed H100 box: GPU 0 two 3g.40gb, GPU 1 seven 1g.10gb (the first
 * held), GPUs 2 (held) and 3 whole, NVLinked as a domain of two.
 */
static void test_place__check_units_on_mixed_node(void **state)
{
	const char *const layouts[4] = {"3g.40gb@0 3g.40gb@4", SEVEN_1G, NULL,
					NULL};
	const char *const held_mig[] = {"MIG-1-0", NULL};
	const char *const held_gpu[] = {"G-2", NULL};
	ft_topology_t *t = h100_box(layouts, 4, -1);
	ft_pod_t pods[2], *list[3] = {&pods[0], &pods[1], NULL};
	ft_unit_check_t u[FT_UNITS_MAX];
	ft_demand_t d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED),
				  caps(40960, FT_PRECISION_FP8, 0, 4));
	ft_node_t *node, *bare = ft_test_node("bare", NULL, NULL);

	mig_pod(&pods[0], "mig-user", 0, held_mig);
	ft_test_pod(&pods[1], "gpu-user", 0, held_gpu, NULL, 0);
	node = ft_test_node("n", t, list);
	expect_units(node, &d,
		     "gpu2:held:nvlinkDomainSize gpu3:free:nvlinkDomainSize");
	assert_int_equal(ft_place_check_units(u, node, &d), 2);
	expect_fault(t, &d.caps, &u[1], FT_CAP_DOMAIN, 4, 2,
		     "nvlinkDomainSize 4: NVLink domain of 2 GPUs");
	d = with_caps(mig_demand("1g.10gb", 1),
		      caps(20480, 0, FT_INTERCONNECT_NVLINK, 0));
	expect_units(
	    node, &d,
	    "mig2:held:memoryPerGpu+interconnect mig3:free:memoryPerGpu+interconnect mig4:free:memoryPerGpu+interconnect mig5:free:memoryPerGpu+interconnect mig6:free:memoryPerGpu+interconnect mig7:free:memoryPerGpu+interconnect mig8:free:memoryPerGpu+interconnect");
	assert_int_equal(ft_place_check_units(u, node, &d), 7);
	expect_fault(t, &d.caps, &u[0], FT_CAP_MEMORY, 20480, 10240,
		     "memoryPerGpu 20Gi: 10240 MiB");
	expect_fault(t, &d.caps, &u[0], FT_CAP_INTERCONNECT,
		     FT_INTERCONNECT_NVLINK, FT_INTERCONNECT_PCIE,
		     "interconnect nvlink: MIG instances share no NVLink");
	/* Whole GPUs and instances of one profile in one demand. */
	d = with_caps(mig_demand("3g.40gb", 1),
		      caps(40960, FT_PRECISION_FP8, 0, 0));
	d.gpus = 1;
	expect_units(node, &d,
		     "gpu2:held:ok gpu3:free:ok mig0:free:ok mig1:free:ok");
	/* Nothing to list for CPUs alone, or without a topology. */
	d = demand(0, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	expect_units(node, &d, "");
	d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED),
		      caps(40960, 0, 0, 0));
	expect_units(bare, &d, "");
	for (unsigned i = 0; i < 2; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_node_unref(bare);
	ft_topology_unref(t);
}

/* Precisions: an A100 lacks fp8; an RTX 4090 is not in the catalog. */
static void test_place__check_units_precision(void **state)
{
	ft_topology_t *t = mixed_products(), *r = ft_test_topology_4090("R");
	ft_node_t *node = ft_test_node("n", t, NULL), *rnode;
	ft_demand_t d = with_caps(demand(1, 0, -1, FT_MODE_GUARANTEED),
				  caps(40960, FT_PRECISION_FP8, 0, 0));
	ft_unit_check_t u[FT_UNITS_MAX];

	ft_mig_catalog_apply(&catalog, r);
	rnode = ft_test_node("r", r, NULL);
	expect_units(
	    node, &d,
	    "gpu0:free:ok gpu1:free:ok gpu2:free:precision gpu3:free:precision");
	assert_int_equal(ft_place_check_units(u, node, &d), 4);
	assert_true(t->gpus[2].precisions != 0);
	expect_fault(t, &d.caps, &u[2], FT_CAP_PRECISION, FT_PRECISION_FP8,
		     t->gpus[2].precisions,
		     "precision fp8: not supported by NVIDIA A100-SXM4-40GB");
	assert_int_equal(ft_place_check_units(u, rnode, &d), 8);
	assert_int_equal(u[7].faults,
			 (1u << FT_CAP_MEMORY) | (1u << FT_CAP_PRECISION));
	expect_fault(r, &d.caps, &u[7], FT_CAP_MEMORY, 40960, 24564,
		     "memoryPerGpu 40Gi: 24564 MiB");
	expect_fault(
	    r, &d.caps, &u[7], FT_CAP_PRECISION, FT_PRECISION_FP8, 0,
	    "precision fp8: not supported by NVIDIA GeForce RTX 4090 (not in the MIG catalog)");
	ft_node_unref(node);
	ft_node_unref(rnode);
	ft_topology_unref(t);
	ft_topology_unref(r);
}

/*
 * Shared GPUs: GPU 0 held whole serves no replica; 8 of 10 replicas held
 * on GPUs 2 and 3 leave room for a 0.2 rank, not for a 0.8 one.
 */
static void test_place__check_units_shared(void **state)
{
	ft_topology_t *t = shared_pairs4(10);
	const char *whole[] = {"S-0", NULL};
	ft_pod_t pods[2], *list[3] = {&pods[0], &pods[1], NULL};
	ft_demand_t d = shared_demand(2, 800, FT_LEVEL_NVLINK);
	ft_node_t *node;

	ft_test_pod(&pods[0], "whole", 0, whole, NULL, 0);
	ft_test_pod(&pods[1], "ranks", 0, NULL, NULL, 0);
	pods[1].has_allocation = true;
	for (unsigned i = 0; i < 2; i++) {
		pods[1].allocation.replica_gpus[i] = strdup(i ? "S-3" : "S-2");
		pods[1].allocation.replica_counts[i] = 8;
	}
	pods[1].allocation.n_replicas = 2;
	node = ft_test_node("n", t, list);
	expect_units(
	    node, &d,
	    "shared0/0:held:ok shared1/10:free:ok shared2/2:held:ok shared3/2:held:ok");
	d = shared_demand(1, 200, -1);
	expect_units(
	    node, &d,
	    "shared0/0:held:ok shared1/10:free:ok shared2/2:free:ok shared3/2:free:ok");
	d = with_caps(shared_demand(1, 0, -1),
		      caps(0, 0, FT_INTERCONNECT_NVLINK, 4));
	expect_units(
	    node, &d,
	    "shared0/0:held:nvlinkDomainSize shared1/10:free:nvlinkDomainSize shared2/2:free:nvlinkDomainSize shared3/2:free:nvlinkDomainSize");
	for (unsigned i = 0; i < 2; i++)
		ft_pod_dispose(&pods[i]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * A shared-GPU demand whose requires no GPU meets is refused for the
 * requirement, as a whole-GPU demand is, not for want of room.
 */
static void test_place__shared_requires_refused_for_caps(void **state)
{
	ft_topology_t *t = shared_pairs4(10);
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = shared_demand(1, 500, -1);
	ft_verdict_t v;

	(void)state;
	d.has_caps = true;
	d.caps.memory_mib = 81920;
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_UNFIT_UNRESOLVABLE);
	assert_string_equal(
	    v.reason,
	    "requires: 0 of 4 shared GPUs match (memoryPerGpu 80Gi: 46068 MiB)");
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* ---- NUMA memory and GPU locality the topology may not know ---- */

static void expect_verdict(const ft_node_t *node, const ft_demand_t *d,
			   ft_fit_t fit, const char *reason)
{
	ft_verdict_t v;

	ft_place_filter(&v, node, d);
	assert_int_equal(v.fit, fit);
	assert_string_equal(v.reason, reason);
}

/*
 * A graph without memory attributes: NUMA memory is unknown, not 0 MiB, so
 * a pod pinning CPUs and asking memory fits at level numa (the old reading
 * refused it as "at most 1 GPUs with 8 CPUs ..., need 0 GPUs with 8 CPUs").
 */
static void test_place__graph_without_memory_accepts_memory(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-no-memory.json");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_demand_t d = demand(0, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_node_t *node;

	/* A pod holding CPUs and memory on NUMA 0 changes nothing. */
	ft_test_pod(&pod, "pinned", 0, NULL, "0-1", 0);
	pod.demand.memory_mib = 65536;
	node = ft_test_node("n", t, list);
	d.memory_mib = 4096;
	expect_verdict(node, &d, FT_FIT, "");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.numa_nodes, 0x2);
	assert_int_equal(p.memory_mib, 4096);
	assert_int_equal(p.level, FT_LEVEL_NUMA);
	/* A GPU with CPUs of its NUMA node (GPU -> NUMANode edges). */
	d = demand(1, 6, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	d.memory_mib = 1 << 20;
	expect_verdict(node, &d, FT_FIT, "");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.numa_nodes,
			 1u << t->gpus[__builtin_ctz(p.gpus)].numa);
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* Our schema with small NUMA nodes: a refusal for memory says MiB. */
static const char small_numa[] =
    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-7\",\"memoryMiB\":4096,\"gpus\":[{\"index\":0,\"uuid\":\"S-0\"}]},{\"id\":1,\"cpus\":\"8-15\",\"memoryMiB\":3072,\"gpus\":[{\"index\":1,\"uuid\":\"S-1\"}]}]}]}";

static void test_place__numa_memory_short_is_named(void **state)
{
	ft_topology_t *t = NULL;
	ft_pod_t pods[2], *list[3] = {&pods[0], &pods[1], NULL};
	ft_demand_t d = demand(1, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_node_t *node;

	assert_int_equal(
	    ft_codec_topology_parse(&t, small_numa, strlen(small_numa)), 0);
	node = ft_test_node("n", t, NULL);
	d.memory_mib = 6144;
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "numa: at most 1 GPUs with 8 CPUs and 4096 MiB in one NUMA node even when empty, need 1 GPUs with 8 CPUs and 6144 MiB");
	/* GPUs short too: the GPUs are named, as before. */
	d.gpus = 2;
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "numa: at most 1 GPUs with 8 CPUs in one NUMA node even when empty, need 2 GPUs with 8 CPUs");
	ft_node_unref(node);

	/* Pods pin 2 CPUs and 2560 MiB on each NUMA node. */
	ft_test_pod(&pods[0], "a", 0, NULL, "0-1", 0);
	ft_test_pod(&pods[1], "b", 0, NULL, "8-9", 0);
	pods[0].demand.memory_mib = pods[1].demand.memory_mib = 2560;
	node = ft_test_node("n", t, list);
	d = demand(0, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	d.memory_mib = 2048;
	expect_verdict(
	    node, &d, FT_UNFIT,
	    "numa: at most 1 free GPUs with 6 free CPUs and 1536 MiB free in one NUMA node, need 0 GPUs with 4 CPUs and 2048 MiB");
	d.memory_mib = 1536;
	expect_verdict(node, &d, FT_FIT, "");
	ft_pod_dispose(&pods[0]);
	ft_pod_dispose(&pods[1]);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * GPUs without edges, as the authors' code writes them: their locality is
 * unknown, so they satisfy level node only, and a refusal says why (the old
 * reading put all four in the first NUMA node and accepted numa).
 */
static void test_place__graph_edgeless_gpus_reach_node_only(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-edgeless-gpus.json");
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = demand(2, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_verdict_t v;

	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "numa: at most 0 GPUs with 8 CPUs in one NUMA node even when empty, need 2 GPUs with 4 CPUs; GPU locality unknown for 4 GPUs (graph GPUs without a NUMA or socket edge)");
	d.level = FT_LEVEL_SOCKET;
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "socket: at most 0 GPUs with 8 CPUs in one socket even when empty, need 2 GPUs with 4 CPUs; GPU locality unknown for 4 GPUs (graph GPUs without a NUMA or socket edge)");
	d = demand(1, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "nvlink: at most 0 GPUs with 0 CPUs in one NVLink group even when empty, need 1 GPUs with 0 CPUs; GPU locality unknown for 4 GPUs (graph GPUs without a NUMA or socket edge)");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED),
			 FT_ENOTFOUND);
	/* Level node, and best effort, take them; the placement says node. */
	d = demand(2, 4, FT_LEVEL_NODE, FT_MODE_GUARANTEED);
	expect_verdict(node, &d, FT_FIT, "");
	d = demand(2, 4, FT_LEVEL_NUMA, FT_MODE_BEST_EFFORT);
	ft_place_filter(&v, node, &d);
	assert_int_equal(v.fit, FT_FIT);
	assert_int_equal(v.level, FT_LEVEL_NODE);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(__builtin_popcount(p.gpus), 2);
	assert_int_equal(ft_cpuset_count(&p.cpus), 4);
	assert_int_equal(p.levels, 1u << FT_LEVEL_NODE);
	assert_int_equal(p.level, FT_LEVEL_NODE);
	/* Numa asked, node reached: 8 - 2 x 2 points; packed, empty: 0. */
	assert_int_equal(ft_place_score(node, &d, FT_POLICY_PACKED), 4);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/*
 * GPUs contained by a Socket: socket known, NUMA node unknown. They reach
 * level socket, never numa.
 */
static void test_place__graph_socket_gpus_reach_socket(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-socket-gpus.json");
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t d = demand(2, 4, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;

	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "numa: at most 1 GPUs with 8 CPUs in one NUMA node even when empty, need 2 GPUs with 4 CPUs; NUMA node unknown for 3 GPUs (graph GPUs without a NUMA edge)");
	d.level = FT_LEVEL_SOCKET;
	expect_verdict(node, &d, FT_FIT, "");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0x3);
	/* CPUs of socket 0 (NUMA nodes 0 and 1), none of NUMA 2. */
	assert_int_equal(ft_cpuset_count(&p.cpus), 4);
	assert_false(ft_cpuset_intersects(&p.cpus, &t->numa[2].cpus));
	assert_int_equal(p.level, FT_LEVEL_SOCKET);
	assert_int_equal(p.levels,
			 (1u << FT_LEVEL_SOCKET) | (1u << FT_LEVEL_NODE));
	d = demand(3, 0, FT_LEVEL_SOCKET, FT_MODE_GUARANTEED);
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "socket: at most 2 GPUs with 8 CPUs in one socket even when empty, need 3 GPUs with 0 CPUs; GPU locality unknown for 1 GPUs (graph GPUs without a NUMA or socket edge)");
	/* GPU 2 has its NUMANode: numa and tighter, with its CPUs. */
	d = demand(1, 4, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0x4);
	assert_int_equal(p.numa_nodes, 0x4);
	assert_int_equal(p.level, FT_LEVEL_NVLINK);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* GPU -> NUMANode edges are honoured: GPUs and CPUs of one NUMA node. */
static void test_place__graph_gpu_numa_edges_honoured(void **state)
{
	ft_topology_t *t =
	    ft_test_topology_fixture("graph-gpu-numa-edges.json");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	const char *held[] = {"GPU-graph-0", NULL};
	ft_demand_t d = demand(2, 8, FT_LEVEL_NUMA, FT_MODE_GUARANTEED);
	ft_placement_t p;
	ft_node_t *node;

	ft_test_pod(&pod, "held", 0, held, NULL, 0);
	node = ft_test_node("n", t, list);
	expect_verdict(node, &d, FT_FIT, "");
	assert_int_equal(ft_place_choose(&p, node, &d, FT_POLICY_PACKED), 0);
	assert_int_equal(p.gpus, 0xc);
	assert_int_equal(p.numa_nodes, 0x2);
	assert_int_equal(p.level, FT_LEVEL_NUMA);
	d.gpus = 3;
	expect_verdict(
	    node, &d, FT_UNFIT_UNRESOLVABLE,
	    "numa: at most 2 GPUs with 8 CPUs in one NUMA node even when empty, need 3 GPUs with 8 CPUs");
	ft_pod_dispose(&pod);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static int setup(void **state)
{
	return ft_codec_mig_catalog_builtin(&catalog);
}

static int teardown(void **state)
{
	ft_mig_catalog_dispose(&catalog);
	return 0;
}

/* What ft_place_fit_points_memo() answers, worked out without the memo. */
static int fit_points(const ft_node_t *node, const ft_demand_t *d,
		      const ft_verdict_t *v)
{
	return v->fit == FT_FIT ? ft_place_level_points(node, d) : -1;
}

/* Each demand of `pool` through the node's memo, as filter and prioritize
 * answer it: as decoded (no key) or, one time in two, with its key, so that
 * both kinds of entries share the memo. */
static void check_memo(const ft_node_t *node, const ft_demand_t *pool,
		       unsigned n, unsigned *seed, ft_demand_keys_t *keys)
{
	for (unsigned q = 0; q < 3 * n; q++) {
		ft_demand_t keyed = pool[(unsigned)rand_r(seed) % n];
		const ft_demand_t *d = &keyed;
		ft_verdict_t full, fast;
		if (rand_r(seed) % 2)
			ft_demand_key(keys, &keyed);
		ft_place_filter(&full, node, d);
		ft_place_filter_memo(&fast, node, d);
		assert_int_equal(fast.fit, full.fit);
		assert_int_equal(fast.level, full.level);
		assert_string_equal(fast.reason, full.reason);
		assert_int_equal(ft_place_fit_points_memo(node, d),
				 fit_points(node, d, &full));
	}
}

/*
 * Property: the filter memo answers as ft_place_filter() does, and its
 * level points as ft_place_level_points() where the demand fits, on nodes
 * filled by random placements of the reference servers, for a pool of
 * random demands larger than the memo (entries are replaced) asked in
 * random order, with and without their keys; a value copy has no memo.
 */
static void test_place__filter_memo_matches_filter(void **state)
{
	ft_topology_t *tops[6];
	ft_demand_t pool[2 * FT_FILTER_MEMO + 1];
	ft_demand_keys_t *keys;
	unsigned seed = 77;
	ft_node_t copy;

	assert_int_equal(ft_demand_keys_new(&keys), 0);
	random_tops(tops);
	for (int round = 0; round < 60; round++) {
		ft_topology_t *t = tops[round % 6];
		ft_node_t *node = ft_test_node("n", t, NULL);
		ft_pod_t pods[48];
		unsigned n = 0;
		for (unsigned k = 0; k < 2 * FT_FILTER_MEMO + 1; k++)
			pool[k] = random_demand(&seed, t);
		for (int step = 0; step < 20 && n < 48; step++) {
			ft_demand_t d = random_demand(&seed, t);
			ft_placement_t p;
			check_memo(node, pool, 2 * FT_FILTER_MEMO + 1, &seed,
				   keys);
			if (ft_place_choose(&p, node, &d, FT_POLICY_PACKED) < 0)
				continue;
			node = with_placement(node, &p, pods, &n);
		}
		ft_node_copy_value(&copy, node);
		assert_null(copy.filter_memo);
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	for (int i = 0; i < 6; i++)
		ft_topology_unref(tops[i]);
	ft_demand_keys_free(keys);
}

/* Whether `key` is among the `n` of `given`. */
static bool key_given(const uint64_t *given, unsigned n, uint64_t key)
{
	for (unsigned i = 0; i < n; i++)
		if (given[i] == key)
			return true;
	return false;
}

/*
 * Demand keys: equal demands (the key field left out) get one key, others
 * their own; a full table starts over and gives the demands it forgot new
 * keys, never one given before, in any table.
 */
static void test_place__demand_keys(void **state)
{
	enum { N = FT_DEMAND_KEYS + 6 };
	uint64_t *given = calloc(N + 1, sizeof(*given));
	ft_demand_keys_t *keys, *other;
	ft_demand_t a = demand(2, 0, FT_LEVEL_NVLINK, FT_MODE_GUARANTEED);
	ft_demand_t b = a, c = a, d;
	uint64_t first;

	assert_non_null(given);
	assert_int_equal(ft_demand_keys_new(&keys), 0);
	assert_int_equal(ft_demand_keys_new(&other), 0);
	ft_demand_key(keys, &a);
	b.key = 12345; /* whatever it held, it is not compared */
	ft_demand_key(keys, &b);
	c.gpus = 1;
	ft_demand_key(keys, &c);
	assert_true(a.key != 0);
	assert_true(a.key == b.key);
	assert_true(c.key != 0 && c.key != a.key);
	first = a.key;
	given[0] = a.key;
	given[1] = c.key;
	/* More new demands than the table holds, the last few in another
	 * table: the first starts over once. */
	for (unsigned i = 0; i < N - 2; i++) {
		d = demand(0, 0, -1, FT_MODE_GUARANTEED);
		d.cpu_millis = 1000 + i;
		ft_demand_key(i < FT_DEMAND_KEYS ? keys : other, &d);
		assert_true(d.key != 0);
		assert_false(key_given(given, i + 2, d.key));
		given[i + 2] = d.key;
	}
	/* `a` was forgotten: a new key, and an equal demand gets it too. */
	ft_demand_key(keys, &a);
	assert_true(a.key != first);
	assert_false(key_given(given, N, a.key));
	b.key = 0;
	ft_demand_key(keys, &b);
	assert_true(b.key == a.key);
	ft_demand_keys_free(other);
	ft_demand_keys_free(keys);
	free(given);
}

#define MEMO_THREADS 4
#define MEMO_DEMANDS (2 * FT_FILTER_MEMO + 1)

/* Nodes and demands the threads filter, and how often they disagreed. */
typedef struct {
	ft_node_t *nodes[6];
	ft_demand_t demands[MEMO_DEMANDS];
	unsigned differ[MEMO_THREADS];
	pthread_barrier_t start;
} memo_race_t;

typedef struct {
	memo_race_t *race;
	unsigned id;
} memo_racer_t;

static void *memo_racer(void *arg)
{
	memo_racer_t *me = arg;
	memo_race_t *race = me->race;

	pthread_barrier_wait(&race->start);
	for (unsigned r = 0; r < 50; r++)
		for (unsigned n = 0; n < 6; n++) {
			const ft_demand_t *d =
			    &race->demands[(r + me->id + n) % MEMO_DEMANDS];
			ft_verdict_t full, fast;
			ft_place_filter(&full, race->nodes[n], d);
			ft_place_filter_memo(&fast, race->nodes[n], d);
			race->differ[me->id] +=
			    fast.fit != full.fit || fast.level != full.level ||
			    strcmp(fast.reason, full.reason) != 0 ||
			    ft_place_fit_points_memo(race->nodes[n], d) !=
				fit_points(race->nodes[n], d, &full);
		}
	return NULL;
}

/*
 * Threads filtering the same nodes at once, as the extender's workers do,
 * fill and read the nodes' memos under their try-lock and get
 * ft_place_filter()'s verdicts. (scripts/test.sh also runs this under
 * ThreadSanitizer.)
 */
static void test_place__filter_memo_concurrent(void **state)
{
	static memo_race_t race;
	ft_demand_keys_t *keys;
	ft_topology_t *tops[6];
	pthread_t threads[MEMO_THREADS];
	memo_racer_t args[MEMO_THREADS];
	unsigned seed = 5;

	random_tops(tops);
	for (unsigned n = 0; n < 6; n++)
		race.nodes[n] = ft_test_node("n", tops[n], NULL);
	assert_int_equal(ft_demand_keys_new(&keys), 0);
	/* Half keyed, as the extender and the plugin key them; the rest as
	 * a caller that gives no key. */
	for (unsigned k = 0; k < MEMO_DEMANDS; k++) {
		race.demands[k] = random_demand(&seed, tops[k % 6]);
		if (k % 2)
			ft_demand_key(keys, &race.demands[k]);
	}
	assert_int_equal(pthread_barrier_init(&race.start, NULL, MEMO_THREADS),
			 0);
	for (unsigned i = 0; i < MEMO_THREADS; i++) {
		args[i] = (memo_racer_t){&race, i};
		assert_int_equal(
		    pthread_create(&threads[i], NULL, memo_racer, &args[i]), 0);
	}
	for (unsigned i = 0; i < MEMO_THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	pthread_barrier_destroy(&race.start);
	for (unsigned i = 0; i < MEMO_THREADS; i++)
		assert_int_equal(race.differ[i], 0);
	for (unsigned n = 0; n < 6; n++) {
		ft_node_unref(race.nodes[n]);
		ft_topology_unref(tops[n]);
	}
	ft_demand_keys_free(keys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_place__shared_requires_refused_for_caps),
	    cmocka_unit_test(test_place__conflict_keeps_idle_units_usable),
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
	    cmocka_unit_test(test_place__mig_packed_fills_busy_gpu),
	    cmocka_unit_test(test_place__mig_distributed_spreads_instances),
	    cmocka_unit_test(test_place__pod_policy_overrides_config),
	    cmocka_unit_test(test_place__single_strategy_gpus_are_instances),
	    cmocka_unit_test(test_place__single_strategy_unknown_usage),
	    cmocka_unit_test(test_place__explicit_mixed_strategy),
	    cmocka_unit_test(test_place__requires_memory_and_precision),
	    cmocka_unit_test(test_place__requires_interconnect_and_domain),
	    cmocka_unit_test(test_place__requires_mig_slice_or_whole_gpu),
	    cmocka_unit_test(test_place__requires_single_strategy),
	    cmocka_unit_test(test_place__requires_needs_topology),
	    cmocka_unit_test(
		test_place__requires_choose_and_score_count_matching),
	    cmocka_unit_test(
		test_place__choose_agrees_with_filter_with_requires),
	    cmocka_unit_test(test_place__shared_ranks_on_nvlink_pair),
	    cmocka_unit_test(test_place__shared_pairs_fill_up),
	    cmocka_unit_test(test_place__shared_whole_exclusion),
	    cmocka_unit_test(test_place__check_units_on_mixed_node),
	    cmocka_unit_test(test_place__check_units_precision),
	    cmocka_unit_test(test_place__check_units_shared),
	    cmocka_unit_test(test_place__graph_without_memory_accepts_memory),
	    cmocka_unit_test(test_place__numa_memory_short_is_named),
	    cmocka_unit_test(test_place__graph_edgeless_gpus_reach_node_only),
	    cmocka_unit_test(test_place__graph_socket_gpus_reach_socket),
	    cmocka_unit_test(test_place__graph_gpu_numa_edges_honoured),
	    cmocka_unit_test(test_place__filter_memo_matches_filter),
	    cmocka_unit_test(test_place__demand_keys),
	    cmocka_unit_test(test_place__filter_memo_concurrent),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
