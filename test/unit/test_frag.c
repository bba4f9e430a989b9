/* FGD fragmentation: the workload mix, the measure and the rank of a node,
 * and GPUs of unknown locality counted only at the levels they reach. */
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
#include <flextopo/frag.h>

#include "support.h"

static ft_demand_t gpus_demand(uint32_t gpus, int level)
{
	ft_demand_t d;

	memset(&d, 0, sizeof(d));
	d.gpus = gpus;
	d.has_affinity = level >= 0;
	d.level = level >= 0 ? (ft_level_t)level : FT_LEVEL_NODE;
	d.mode = FT_MODE_GUARANTEED;
	return d;
}

static ft_demand_t mig_demand(const char *profile)
{
	ft_demand_t d = gpus_demand(0, -1);

	snprintf(d.mig_profile, sizeof(d.mig_profile), "%s", profile);
	d.mig_count = 1;
	return d;
}

static ft_demand_t fraction_demand(uint32_t ranks, uint32_t milli)
{
	ft_demand_t d = gpus_demand(ranks, ranks > 1 ? FT_LEVEL_NVLINK : -1);

	d.gpu_fraction_milli = milli;
	return d;
}

/* A mix of `n` pods of `a` and `m` of `b`. */
static void mix_of(ft_mix_t *mix, const ft_demand_t *a, unsigned n,
		   const ft_demand_t *b, unsigned m)
{
	ft_mix_init(mix, 64);
	for (unsigned i = 0; i < n; i++)
		ft_mix_add(mix, a, NULL);
	for (unsigned i = 0; b && i < m; i++)
		ft_mix_add(mix, b, NULL);
}

/* Pod `uid` holding the whole GPUs of `t` listed by index (-1 ends). */
static void gpu_pod(ft_pod_t *out, const char *uid, const int *held)
{
	char uuids[FT_GPU_MAX][32];
	const char *list[FT_GPU_MAX + 1];
	unsigned n = 0;

	for (; held[n] >= 0; n++) {
		snprintf(uuids[n], sizeof(uuids[n]), "P-%d", held[n]);
		list[n] = uuids[n];
	}
	list[n] = NULL;
	ft_test_pod(out, uid, 0, list, NULL, 0);
}

/* A pairs4 node (NVLink pairs 0-1 and 2-3) whose listed GPUs are held. */
static ft_node_t *pairs_node(const char *name, const int *held)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_node_t *node;

	gpu_pod(&pod, "held", held);
	node = ft_test_node(name, t, held[0] >= 0 ? list : NULL);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
	return node;
}

/* Pods counted, the oldest leaving a full window, CPU-only pods ignored. */
static void test_frag__mix_window(void **state)
{
	ft_demand_t one = gpus_demand(1, -1), pair = gpus_demand(2, 0);
	ft_demand_t cpu = gpus_demand(0, -1);
	ft_mix_t mix;

	(void)state;
	ft_mix_init(&mix, 4);
	ft_mix_add(&mix, &cpu, NULL);
	assert_int_equal(mix.total, 0);
	ft_mix_add(&mix, &one, NULL);
	ft_mix_add(&mix, &one, NULL);
	ft_mix_add(&mix, &pair, NULL);
	assert_int_equal(mix.n_classes, 2);
	assert_int_equal(mix.counts[0], 2);
	assert_int_equal(mix.counts[1], 1);
	ft_mix_add(&mix, &pair, NULL);
	ft_mix_add(&mix, &pair, NULL); /* the first `one` leaves */
	ft_mix_add(&mix, &pair, NULL); /* the second leaves */
	assert_int_equal(mix.total, 4);
	assert_int_equal(mix.counts[0], 0);
	assert_int_equal(mix.counts[1], 4);
	one.cpu_millis = 500; /* millicores do not make a class */
	one.has_policy = true;
	ft_mix_add(&mix, &one, NULL);
	assert_int_equal(mix.n_classes, 2);
	assert_int_equal(mix.counts[0], 1);
	ft_mix_init(&mix, 0);
	ft_mix_add(&mix, &one, NULL);
	assert_int_equal(mix.total, 0);
}

/* A full class table gives the rarest class's slot to a new one. */
static void test_frag__mix_replaces_rarest_class(void **state)
{
	ft_mix_t mix;

	(void)state;
	ft_mix_init(&mix, 256);
	for (unsigned c = 0; c < FT_MIX_CLASSES; c++) {
		ft_demand_t d = gpus_demand(c + 1, -1);
		for (unsigned i = 0; i < (c == 5 ? 1 : 3); i++)
			ft_mix_add(&mix, &d, NULL);
	}
	assert_int_equal(mix.total, 3 * FT_MIX_CLASSES - 2);
	ft_demand_t fresh = gpus_demand(99, -1);
	ft_mix_add(&mix, &fresh, NULL);
	assert_int_equal(mix.n_classes, FT_MIX_CLASSES);
	assert_int_equal(mix.classes[5].gpus, 99);
	assert_int_equal(mix.counts[5], 1);
	assert_int_equal(mix.total, 3 * FT_MIX_CLASSES - 2);
	for (unsigned i = 0; i < mix.window; i++)
		assert_true(mix.ring[i] != 5 || i == 3 * FT_MIX_CLASSES - 2);
}

/*
 * F_n(m) with topology: for pods asking for an NVLink pair, a free GPU whose
 * peer is held is a fragment; a pod that does not fit at all sees every free
 * GPU as fragment.
 */
static void test_frag__of_class(void **state)
{
	const int held2[] = {2, -1};
	ft_node_t *node = pairs_node("n", held2);
	ft_demand_t pair = gpus_demand(2, FT_LEVEL_NVLINK);
	ft_demand_t one = gpus_demand(1, -1), four = gpus_demand(4, -1);
	ft_demand_t loose = gpus_demand(2, FT_LEVEL_NVLINK);

	(void)state;
	assert_int_equal(ft_frag_of(node, &one), 0);
	assert_int_equal(ft_frag_of(node, &pair), 1000); /* GPU 3 */
	assert_int_equal(ft_frag_of(node, &four), 3000);
	loose.mode = FT_MODE_BEST_EFFORT; /* may take any two */
	assert_int_equal(ft_frag_of(node, &loose), 0);
	ft_node_unref(node);
}

/*
 * A node of topology `t` (a reference is taken) holding `pods` (NULL or
 * NULL-terminated), labelled FT_GPU_PRODUCT_LABEL=`product` unless
 * `product` is NULL (labels not known).
 */
static ft_node_t *product_node(const char *name, ft_topology_t *t,
			       ft_pod_t *const *pods, const char *product)
{
	const ft_pod_t *list[2] = {pods ? pods[0] : NULL, NULL};
	ft_node_labels_t *l = NULL;
	ft_node_t *node = NULL;

	if (product) {
		assert_non_null(l = ft_node_labels_new());
		assert_int_equal(
		    ft_node_labels_add(l, FT_GPU_PRODUCT_LABEL, product), 0);
		ft_node_labels_seal(l);
	}
	assert_int_equal(
	    ft_node_build(&node, name, t, NULL, l, list, NULL, list[0] ? 1 : 0),
	    0);
	ft_node_labels_unref(l);
	return node;
}

/* A free 8x RTX 4090 node labelled FT_GPU_PRODUCT_LABEL=`product`: of
 * another GPU model than the NVIDIA A40 nodes here. */
static ft_node_t *other_model_node(const char *product)
{
	ft_topology_t *t = ft_test_topology_4090("R");
	ft_node_t *node = product_node("other", t, NULL, product);

	ft_topology_unref(t);
	return node;
}

/* A free pairs4 node (four NVIDIA A40) labelled FT_GPU_PRODUCT_LABEL=
 * `product`. */
static ft_node_t *a40_node(const char *product)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_node_t *node = product_node("a40", t, NULL, product);

	ft_topology_unref(t);
	return node;
}

/* Rules of a pod with nodeSelector {key: value}. */
static ft_node_rules_t selector_rules(const char *key, const char *value)
{
	ft_node_rules_t r;

	memset(&r, 0, sizeof(r));
	r.reqs[r.n_reqs++] = (ft_node_req_t){
	    .op = FT_REQ_IN, .term = FT_RULE_ALL_TERMS, .first = 0, .n = 1};
	r.hashes[r.n_hashes++] = ft_label_hash(key, value);
	return r;
}

/* Four free NVIDIA A40 on a node labelled pool=`pool`, tainted
 * `taint`:NoSchedule unless `taint` is NULL. */
static ft_node_t *pool_node(const char *pool, const char *taint)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_node_labels_t *l = ft_node_labels_new();
	ft_node_t *node = NULL;

	assert_non_null(l);
	assert_int_equal(ft_node_labels_add(l, "pool", pool), 0);
	if (taint)
		assert_int_equal(ft_node_labels_add_taint(l, taint, NULL,
							  FT_TAINT_NO_SCHEDULE),
				 0);
	ft_node_labels_seal(l);
	assert_int_equal(ft_node_build(&node, pool, t, NULL, l, NULL, NULL, 0),
			 0);
	ft_node_labels_unref(l);
	ft_topology_unref(t);
	return node;
}

/* F_n of `node` under a mix of pods of demand `d` with `rules`, milli-GPU. */
static uint32_t frag_of_pods(const ft_node_t *node, const ft_demand_t *d,
			     const ft_node_rules_t *rules)
{
	ft_frag_t f;
	ft_mix_t mix;

	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, d, rules);
	ft_frag_measure(&f, node, &mix);
	return f.fragmentation_milli;
}

/* F_n of `node` under a mix of 1-GPU pods with `rules`, milli-GPU. */
static uint32_t frag_of_ruled(const ft_node_t *node,
			      const ft_node_rules_t *rules)
{
	ft_demand_t one = gpus_demand(1, -1);

	return frag_of_pods(node, &one, rules);
}

/*
 * Which nodes a class may use comes from the node labels its rules match,
 * whatever the label values spell: GPU feature discovery's NVML names with
 * dashes or site codes. A class whose nodeSelector asks the GPU model
 * label for the A40 uses the A40 node's four GPUs and none of the RTX 4090
 * node's eight, under either spelling, and a value spelt otherwise than
 * the node's label rules the node out, as kube-scheduler matches label
 * values exactly. The model name read out of the rules (gpu_products) is a
 * hint that never narrows: pods whose hint names a model no GPU has (a
 * site code, Tesla-T4) are weighed as pods without one.
 */
static void test_frag__model_names_never_narrow(void **state)
{
	static const char *const spelling[2][2] = {
	    {"NVIDIA-A40", "NVIDIA-GeForce-RTX-4090"}, /* GFD */
	    {"A40", "RTX4090"},			       /* site codes */
	};
	ft_node_t *unknown = a40_node(NULL);
	ft_demand_t one = gpus_demand(1, -1), hinted = one;

	(void)state;
	hinted.n_gpu_products = 1;
	hinted.gpu_products[0] = ft_gpu_product_hash("Tesla-T4");
	assert_int_equal(ft_frag_of(unknown, &hinted), 0);
	assert_int_equal(frag_of_pods(unknown, &hinted, NULL), 0);
	for (unsigned s = 0; s < 2; s++) {
		ft_node_t *a40 = a40_node(spelling[s][0]),
			  *rtx = other_model_node(spelling[s][1]),
			  *other_spelling = a40_node(spelling[1 - s][0]);
		ft_node_rules_t in_a40 =
		    selector_rules(FT_GPU_PRODUCT_LABEL, spelling[s][0]);
		hinted.gpu_products[0] = ft_gpu_product_hash(spelling[s][0]);
		assert_int_equal(frag_of_pods(a40, &hinted, &in_a40), 0);
		assert_int_equal(frag_of_pods(rtx, &hinted, &in_a40), 8000);
		assert_int_equal(frag_of_pods(other_spelling, &hinted, &in_a40),
				 4000);
		assert_int_equal(frag_of_pods(a40, &one, &in_a40), 0);
		assert_int_equal(frag_of_pods(rtx, &one, &in_a40), 8000);
		assert_int_equal(frag_of_pods(rtx, &hinted, NULL), 0);
		ft_node_unref(a40);
		ft_node_unref(rtx);
		ft_node_unref(other_spelling);
	}
	ft_node_unref(unknown);
}

/*
 * A node a class's node affinity or taints rule out strands all its free
 * GPUs for that class, as one of another GPU model does; a node whose
 * labels are not known rules nothing out. Pods alike but for their rules
 * are classes of their own.
 */
static void test_frag__of_class_ruled_out_by_node(void **state)
{
	const int none[] = {-1};
	ft_node_t *a = pool_node("a", NULL), *b = pool_node("b", NULL),
		  *tainted = pool_node("a", "dedicated"),
		  *unknown = pairs_node("u", none);
	ft_node_rules_t in_a = selector_rules("pool", "a");
	ft_demand_t one = gpus_demand(1, -1);
	ft_mix_t mix;

	(void)state;
	assert_int_equal(frag_of_ruled(a, &in_a), 0);
	assert_int_equal(frag_of_ruled(b, &in_a), 4000);
	assert_int_equal(frag_of_ruled(tainted, &in_a), 4000);
	assert_int_equal(frag_of_ruled(unknown, &in_a), 0);
	assert_int_equal(frag_of_ruled(b, NULL), 0);
	in_a.tolerations[in_a.n_tolerations++] =
	    (ft_toleration_t){.hash = ft_label_key_hash("dedicated"),
			      .exists = true,
			      .effects = FT_TAINT_NO_SCHEDULE};
	assert_int_equal(frag_of_ruled(tainted, &in_a), 0);
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &one, NULL);
	ft_mix_add(&mix, &one, &in_a);
	ft_mix_add(&mix, &one, NULL);
	assert_int_equal(mix.n_classes, 2);
	assert_int_equal(mix.counts[0], 2);
	ft_node_unref(a);
	ft_node_unref(b);
	ft_node_unref(tainted);
	ft_node_unref(unknown);
}

/*
 * NVIDIA/k8s-device-plugin #1193 across nodes: with NVLink-pair pods in the
 * recent mix, a 1-GPU pod scores lower on the node where it would break the
 * last free pair than on the node whose free GPU has no free peer, under
 * either policy; without a mix the scores are the plain ones.
 */
static void test_frag__single_gpu_spares_last_pair(void **state)
{
	const int pair_left[] = {2, 3, -1}, lone_left[] = {0, 1, 2, -1};
	ft_node_t *a = pairs_node("a", pair_left),
		  *b = pairs_node("b", lone_left);
	ft_demand_t one = gpus_demand(1, -1), pair = gpus_demand(2, 0);
	int64_t da = 0, db = 0;
	ft_mix_t mix;

	(void)state;
	mix_of(&mix, &pair, 1, &one, 1);
	assert_int_equal(ft_frag_delta(&da, a, &one, FT_POLICY_PACKED, &mix),
			 0);
	assert_int_equal(ft_frag_delta(&db, b, &one, FT_POLICY_PACKED, &mix),
			 0);
	assert_int_equal(da, 500);  /* half the mix loses GPU 1 */
	assert_int_equal(db, -500); /* GPU 3 was a fragment for pairs */
	for (int p = FT_POLICY_PACKED; p <= FT_POLICY_DISTRIBUTED; p++)
		assert_true(ft_place_rank(a, &one, (ft_policy_t)p, &mix) <
			    ft_place_rank(b, &one, (ft_policy_t)p, &mix));
	/* Without a mix the policy alone decides: packed the fuller b (one
	 * GPU free), distributed a (two). */
	ft_mix_init(&mix, 64);
	assert_true(ft_place_rank(a, &one, FT_POLICY_PACKED, &mix) <
		    ft_place_rank(b, &one, FT_POLICY_PACKED, &mix));
	assert_true(ft_place_rank(a, &one, FT_POLICY_DISTRIBUTED, &mix) >
		    ft_place_rank(b, &one, FT_POLICY_DISTRIBUTED, &mix));
	ft_node_unref(a);
	ft_node_unref(b);
}

/* Free capacity, whole GPUs, and the largest free block per level. */
static void test_frag__measure_blocks(void **state)
{
	const int held[] = {1, -1};
	ft_node_t *node = pairs_node("n", held);
	ft_demand_t pair = gpus_demand(2, FT_LEVEL_NVLINK);
	ft_frag_t f;
	ft_mix_t mix;

	(void)state;
	mix_of(&mix, &pair, 3, NULL, 0);
	ft_frag_measure(&f, node, &mix);
	assert_int_equal(f.free_milli, 3000);
	assert_int_equal(f.whole_gpus_free, 3);
	assert_int_equal(f.largest_block[FT_LEVEL_NVLINK], 2);
	assert_int_equal(f.largest_block[FT_LEVEL_PCIE_SWITCH], 2);
	assert_int_equal(f.largest_block[FT_LEVEL_NUMA], 2);
	assert_int_equal(f.largest_block[FT_LEVEL_SOCKET], 3);
	assert_int_equal(f.largest_block[FT_LEVEL_NODE], 3);
	assert_int_equal(f.fragmentation_milli, 1000); /* GPU 0 */
	ft_frag_measure(&f, node, NULL);
	assert_int_equal(f.fragmentation_milli, 0);
	ft_node_unref(node);
}

/*
 * MIG slices: free instance slices count 125 each; slices no instance covers
 * are always stranded, and so are free instances of profiles the mix does not
 * ask for. Taking the 1g.10gb instance changes nothing for 3g.40gb pods.
 */
static void test_frag__mig_stranded(void **state)
{
	ft_topology_t *t = ft_test_topology_mig();
	ft_node_t *node = ft_test_node("m", t, NULL);
	ft_demand_t small = mig_demand("1g.10gb"), big = mig_demand("3g.40gb");
	ft_frag_t f;
	ft_mix_t mix;
	int64_t delta = 1;

	(void)state;
	ft_frag_measure(&f, node, NULL);
	assert_int_equal(f.mig_slices_free, 16);
	assert_int_equal(f.mig_slices_stranded, 3);
	assert_int_equal(f.free_milli, 16 * 125 + 1000);
	mix_of(&mix, &small, 4, NULL, 0);
	ft_frag_measure(&f, node, &mix);
	assert_int_equal(f.mig_slices_stranded, 3 + 12);
	/* All but the 1g.10gb slice is fragment for 1g pods. */
	assert_int_equal(f.fragmentation_milli, 16 * 125 + 1000 - 125);
	mix_of(&mix, &big, 4, NULL, 0);
	assert_int_equal(
	    ft_frag_delta(&delta, node, &small, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, -125);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* pairs4 with every GPU shared into `replicas`. */
static ft_topology_t *shared_box(unsigned replicas)
{
	ft_topology_t *t = ft_test_topology_pairs4("S");

	for (unsigned g = 0; g < t->n_gpus; g++)
		assert_int_equal(ft_topology_share_gpu(t, g, replicas), 0);
	assert_int_equal(ft_topology_finish(t), 0);
	return t;
}

/* shared_box(replicas) with `used` replicas of GPU `g` held. */
static ft_node_t *shared_node(unsigned replicas, unsigned g, unsigned used)
{
	ft_topology_t *t = shared_box(replicas);
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_node_t *node;

	ft_test_pod(&pod, "r", 0, NULL, NULL, 0);
	pod.allocation.replica_gpus[0] = strdup(t->gpus[g].uuid);
	pod.allocation.replica_counts[0] = (uint8_t)used;
	pod.allocation.n_replicas = 1;
	pod.has_allocation = true;
	node = ft_test_node("s", t, used ? list : NULL);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
	return node;
}

/*
 * FGD's own case: GPUs shared 10 ways, 0.8-GPU pods in the mix. A 0.3 pod
 * on a fresh GPU leaves 7 replicas that a 0.8 pod cannot use, and 5 on the
 * GPU that already has 2 used: both strand half a GPU or more.
 */
static void test_frag__shared_fraction(void **state)
{
	ft_node_t *fresh = shared_node(10, 0, 0), *busy = shared_node(10, 0, 2);
	ft_demand_t big = fraction_demand(1, 800),
		    small = fraction_demand(1, 300);
	int64_t delta = 0;
	ft_frag_t f;
	ft_mix_t mix;

	(void)state;
	mix_of(&mix, &big, 2, NULL, 0);
	ft_frag_measure(&f, busy, &mix);
	assert_int_equal(f.replicas_free, 38);
	assert_int_equal(f.free_milli, 3800);
	assert_int_equal(f.fragmentation_milli, 0);
	assert_int_equal(
	    ft_frag_delta(&delta, fresh, &small, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, 700);
	assert_int_equal(
	    ft_frag_delta(&delta, busy, &small, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, 500); /* GPU 0: 8 - 3 = 5 left */
	assert_true(ft_place_rank(busy, &small, FT_POLICY_PACKED, &mix) >
		    ft_place_rank(fresh, &small, FT_POLICY_PACKED, &mix));
	ft_node_unref(fresh);
	ft_node_unref(busy);
}

/*
 * A class asking a fraction of a GPU counts its pods times its pods per
 * GPU: with one whole-GPU pod and one 0.25-GPU pod in the mix, a node whose
 * GPU 0 is half taken strands its half GPU for the whole-GPU pods (500
 * milli) and nothing for the quarter ones, which weigh 4 times as much: F
 * is 500 x 1 / (1 + 4) = 100 milli, not FGD's (500 + 0) / 2.
 */
static void test_frag__fraction_weighs_by_pods_per_gpu(void **state)
{
	ft_node_t *half = shared_node(10, 0, 5);
	ft_demand_t whole = fraction_demand(1, 1000),
		    quarter = fraction_demand(1, 250);
	ft_frag_t f;
	ft_mix_t mix;

	(void)state;
	mix_of(&mix, &whole, 1, &quarter, 1);
	assert_int_equal(mix.n_classes, 2);
	ft_frag_measure(&f, half, &mix);
	assert_int_equal(f.free_milli, 3500);
	assert_int_equal(f.fragmentation_milli, 100);
	ft_node_unref(half);
}

/* A pairs4 node (16 CPUs, 128 GiB) with one pod requesting `cpu_millis`
 * and holding the whole GPUs listed (-1 ends), labelled with its GPU model
 * `product` (NULL: labels not known). */
static ft_node_t *busy_product_node(const char *name, uint32_t cpu_millis,
				    const int *held, const char *product)
{
	ft_topology_t *t = ft_test_topology_pairs4("P");
	ft_pod_t pod, *list[2] = {&pod, NULL};
	ft_node_t *node;

	gpu_pod(&pod, "busy", held);
	pod.demand.cpu_millis = cpu_millis;
	node = product_node(name, t, list, product);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
	return node;
}

static ft_node_t *busy_node(const char *name, uint32_t cpu_millis,
			    const int *held)
{
	return busy_product_node(name, cpu_millis, held, NULL);
}

/*
 * One class per GPU shape, whatever the CPU and memory: the requests of the
 * class's last pods are kept as samples, in the window or not, and stand as
 * points, each distinct one for its copies. The class key asks no CPU or
 * memory.
 */
static void test_frag__mix_keys_by_gpu_shape(void **state)
{
	ft_demand_t small = gpus_demand(1, -1), big = gpus_demand(1, -1);
	ft_mix_t mix;

	(void)state;
	small.cpu_millis = 2000;
	small.memory_mib = 1024;
	big.exclusive_cpus = 6; /* pinned: 6000 millicores */
	big.memory_mib = 8192;
	ft_mix_init(&mix, 4);
	ft_mix_add(&mix, &big, NULL);
	ft_mix_add(&mix, &small, NULL);
	assert_int_equal(mix.n_classes, 1);
	assert_int_equal(mix.counts[0], 2);
	assert_int_equal(mix.classes[0].cpu_millis, 0);
	assert_int_equal(mix.classes[0].exclusive_cpus, 0);
	assert_int_equal(mix.classes[0].memory_mib, 0);
	assert_int_equal(mix.n_points[0], 2);
	assert_int_equal(mix.point_cpu_millis[0][0], 2000); /* by CPU */
	assert_int_equal(mix.point_memory_mib[0][0], 1024);
	assert_int_equal(mix.point_cpu_millis[0][1], 6000);
	assert_int_equal(mix.point_memory_mib[0][1], 8192);
	ft_mix_add(&mix, &small, NULL);
	ft_mix_add(&mix, &small, NULL); /* the window is full: b s s s */
	ft_mix_add(&mix, &small, NULL); /* the big pod leaves the window */
	assert_int_equal(mix.counts[0], 4);
	assert_int_equal(mix.n_samples[0], 5);
	assert_int_equal(mix.n_points[0], 2); /* but not the samples */
	assert_int_equal(mix.point_share[0][0], 4);
	assert_int_equal(mix.point_share[0][1], 1);
	assert_int_equal(mix.point_cpu_millis[0][1], 6000);
	for (unsigned k = 0; k < 2; k++)
		assert_int_equal(mix.point_weight[0][k], FT_WEIGHT_ONE);
}

/* A class keeps its last FT_MIX_SAMPLES pods' requests only. */
static void test_frag__mix_samples_roll(void **state)
{
	ft_demand_t d = gpus_demand(1, -1);
	ft_mix_t mix;

	(void)state;
	ft_mix_init(&mix, 4);
	d.cpu_millis = 9000;
	ft_mix_add(&mix, &d, NULL);
	d.cpu_millis = 1000;
	for (unsigned i = 0; i < FT_MIX_SAMPLES; i++)
		ft_mix_add(&mix, &d, NULL);
	assert_int_equal(mix.n_samples[0], FT_MIX_SAMPLES);
	assert_int_equal(mix.n_points[0], 1);
	assert_int_equal(mix.point_cpu_millis[0][0], 1000);
	assert_int_equal(mix.point_share[0][0], FT_MIX_SAMPLES);
}

/* More distinct samples than points: the points sit at the middles of
 * equal shares. */
static void test_frag__mix_points_are_quantiles(void **state)
{
	ft_demand_t d = gpus_demand(1, -1);
	ft_mix_t mix;

	(void)state;
	ft_mix_init(&mix, 64);
	for (unsigned i = 0; i < 16; i++) {
		d.cpu_millis = 1000 * (16 - i); /* 16..1 CPUs, out of order */
		ft_mix_add(&mix, &d, NULL);
	}
	assert_int_equal(mix.n_points[0], FT_MIX_POINTS);
	for (unsigned k = 0; k < FT_MIX_POINTS; k++) {
		assert_int_equal(mix.point_cpu_millis[0][k],
				 1000 * (2 * k + 2));
		assert_int_equal(mix.point_share[0][k], 1);
	}
}

/* nodes[0]: a pairs4 node with all 16 CPUs free; the other n - 1: with 6
 * CPUs requested (10 free). No GPU held; labelled with their GPU model
 * `product` unless it is NULL. */
static void rare_and_common(ft_node_t **nodes, unsigned n, const char *product)
{
	const int none[] = {-1};

	for (unsigned i = 0; i < n; i++)
		nodes[i] = busy_product_node(i ? "common" : "rare",
					     i ? 6000 : 0, none, product);
}

static void unref_all(ft_node_t **nodes, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ft_node_unref(nodes[i]);
}

/* `gpus` whole GPUs, no affinity, with `cpu_millis`. */
static ft_demand_t cpu_gpus_demand(uint32_t gpus, uint32_t cpu_millis)
{
	ft_demand_t d = gpus_demand(gpus, -1);

	d.cpu_millis = cpu_millis;
	return d;
}

/*
 * Scarcity: a point that 1 of 16 nodes can take weighs 16, one all can
 * take 1, one that 1 of 3 can take 1 (below FT_WEIGHT_FROM), and one no
 * node can take 1 (there is no node left to keep for it). Spending the one
 * node that can take the scarce point then costs many times what it did.
 */
static void test_frag__weigh_scarce_points(void **state)
{
	ft_node_t *nodes[16];
	const ft_node_t *roomy;
	ft_demand_t small = cpu_gpus_demand(1, 2000),
		    big = cpu_gpus_demand(1, 14000),
		    huge = cpu_gpus_demand(1, 32000),
		    pod = cpu_gpus_demand(1, 4000);
	int64_t plain = 0, weighed = 0;
	ft_mix_t mix;

	(void)state;
	rare_and_common(nodes, 16, NULL);
	roomy = nodes[0];
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &small, NULL);
	ft_mix_add(&mix, &big, NULL);
	ft_mix_add(&mix, &huge, NULL);
	assert_int_equal(
	    ft_frag_delta(&plain, roomy, &pod, FT_POLICY_PACKED, &mix), 0);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 16);
	assert_int_equal(mix.point_weight[0][0], FT_WEIGHT_ONE);
	assert_int_equal(mix.point_weight[0][1], 16 * FT_WEIGHT_ONE);
	assert_int_equal(mix.point_weight[0][2], FT_WEIGHT_ONE);
	assert_int_equal(
	    ft_frag_delta(&weighed, roomy, &pod, FT_POLICY_PACKED, &mix), 0);
	/* F before: the huge point strands all 4 free GPUs, 4000 / 3. After:
	 * the big and the huge points strand the 3 left, 6000 / 3; weighed,
	 * the big one counts 16 times. */
	assert_int_equal(plain, 2000 - 1333);
	assert_int_equal(weighed, (16 * 3000 + 3000 + 1) / 3 - 1333);
	/* the roomy node and 2 common */
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 3);
	assert_int_equal(mix.point_weight[0][1], FT_WEIGHT_ONE);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 0);
	assert_int_equal(mix.point_weight[0][1], FT_WEIGHT_ONE);
	unref_all(nodes, 16);
}

/*
 * Pods whose nodeSelector asks the GPU model label for the A40 under its
 * site code: the model name read out of it names no GPU of the topology
 * (NVIDIA A40), and only the label decides.
 */
static void bind_to_a40(ft_demand_t *d, ft_node_rules_t *rules)
{
	*rules = selector_rules(FT_GPU_PRODUCT_LABEL, "A40");
	d->n_gpu_products = 1;
	d->gpu_products[0] = ft_gpu_product_hash("A40");
}

/*
 * A class bound to GPU models is weighed from FT_WEIGHT_FROM_BOUND: among a
 * rare and a common NVIDIA A40 node and an RTX 4090 one, labelled with
 * their models' site codes, a 14-CPU point that only the rare node can take
 * weighs 3 when its class may use only the A40 (bound: its nodeSelector
 * rules the 4090 node out); the same pods of any model can also take the
 * 4090 node, and weigh 1 (scarcity 3 / 2, under FT_WEIGHT_FROM). Among A40
 * nodes alone, the model binds nothing.
 */
static void test_frag__weigh_bound_class_from_lower_scarcity(void **state)
{
	ft_node_t *nodes[3];
	ft_demand_t big = cpu_gpus_demand(1, 14000), bound = big;
	ft_node_rules_t in_a40;
	ft_mix_t mix;

	(void)state;
	rare_and_common(nodes, 2, "A40");
	nodes[2] = other_model_node("RTX4090");
	bind_to_a40(&bound, &in_a40);
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &big, NULL);
	ft_mix_add(&mix, &bound, &in_a40);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 3);
	assert_int_equal(mix.n_classes, 2);
	assert_true(mix.class_bound[1]);
	assert_int_equal(mix.point_weight[0][0], FT_WEIGHT_ONE);
	assert_int_equal(mix.point_weight[1][0], 3 * FT_WEIGHT_ONE);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 2);
	assert_false(mix.class_bound[1]);
	unref_all(nodes, 3);
}

/*
 * A class is bound by its node rules when some node looked at is one they
 * rule out: pods of pool a among nodes of pools a and b, not among nodes
 * of pool a alone. A selector every node looked at meets (Exists pool),
 * tolerations alone, or no rules bind nothing.
 */
static void test_frag__bound_by_nodes_ruled_out(void **state)
{
	ft_node_t *nodes[4] = {pool_node("a", NULL), pool_node("a", NULL),
			       pool_node("a", NULL), pool_node("b", NULL)};
	ft_node_rules_t in_a = selector_rules("pool", "a"), any_pool, tolerant;
	ft_demand_t one = gpus_demand(1, -1);
	ft_mix_t mix;

	(void)state;
	memset(&any_pool, 0, sizeof(any_pool));
	any_pool.reqs[any_pool.n_reqs++] = (ft_node_req_t){
	    .op = FT_REQ_EXISTS, .term = FT_RULE_ALL_TERMS, .first = 0, .n = 1};
	any_pool.hashes[any_pool.n_hashes++] = ft_label_key_hash("pool");
	memset(&tolerant, 0, sizeof(tolerant));
	tolerant.tolerates_all = true;
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &one, &in_a);
	ft_mix_add(&mix, &one, &any_pool);
	ft_mix_add(&mix, &one, &tolerant);
	ft_mix_add(&mix, &one, NULL);
	assert_int_equal(mix.n_classes, 4);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 4);
	assert_true(mix.class_bound[0]);
	assert_false(mix.class_bound[1]);
	assert_false(mix.class_bound[2]);
	assert_false(mix.class_bound[3]);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 3); /* pool a */
	assert_false(mix.class_bound[0]);
	unref_all(nodes, 4);
}

/*
 * What a placement takes from a scarce class bound to GPU models counts:
 * the mix has 1-GPU pods of any model (2 CPUs) and 1-GPU pods bound to
 * NVIDIA A40 by its label's site code asking 14 CPUs, which only the rare
 * node of 3 holds (scarcity 3; the third node is an RTX 4090 one). A 1-GPU
 * pod of any model on the rare node strands nothing, but takes a GPU the
 * bound pods could use: unweighed it costs 0, weighed (3 - 1) x 1000
 * milli, averaged over the 2 classes. One that also
 * takes the CPU they need costs all 4 GPUs, plus what FGD counts. A class
 * not bound to a model costs nothing for what is taken, however scarce.
 */
static void test_frag__taking_from_bound_class_costs(void **state)
{
	ft_node_t *nodes[3], *many[16];
	ft_demand_t small = cpu_gpus_demand(1, 2000),
		    bound = cpu_gpus_demand(1, 14000),
		    pod = cpu_gpus_demand(1, 1000),
		    hungry = cpu_gpus_demand(1, 3000);
	int64_t delta = 0;
	ft_node_rules_t in_a40;
	ft_mix_t mix, unbound;

	(void)state;
	rare_and_common(nodes, 2, "A40");
	nodes[2] = other_model_node("RTX4090"); /* it binds the A40 class */
	bind_to_a40(&bound, &in_a40);
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &small, NULL);
	ft_mix_add(&mix, &bound, &in_a40);
	assert_int_equal(
	    ft_frag_delta(&delta, nodes[0], &pod, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, 0);
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 3);
	assert_int_equal(mix.point_weight[1][0], 3 * FT_WEIGHT_ONE);
	assert_int_equal(
	    ft_frag_delta(&delta, nodes[0], &pod, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, (2 * 1000 + 1) / 2);
	/* After: the bound point no longer fits 13 CPUs; FGD counts the 3
	 * GPUs left 3 times over, and the bound class loses all 4. */
	assert_int_equal(
	    ft_frag_delta(&delta, nodes[0], &hungry, FT_POLICY_PACKED, &mix),
	    0);
	assert_int_equal(delta, (3 * 3000 + 1) / 2 + (2 * 4000 + 1) / 2);
	/* The common nodes cannot hold the bound point: nothing is taken. */
	assert_int_equal(
	    ft_frag_delta(&delta, nodes[1], &pod, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, (3 * 3000 + 1) / 2 - (3 * 4000 + 1) / 2);
	unref_all(nodes, 3);
	/* Unbound, the 14-CPU pods are the second point of the 1-GPU class;
	 * it weighs 16 among 16 nodes, and taking from it still costs
	 * nothing: FGD's measure alone decides. */
	rare_and_common(many, 16, NULL);
	bound.n_gpu_products = 0;
	mix_of(&unbound, &small, 1, &bound, 1);
	ft_mix_weigh(&unbound, (const ft_node_t *const *)many, 16);
	assert_int_equal(unbound.n_classes, 1);
	assert_int_equal(unbound.point_weight[0][1], 16 * FT_WEIGHT_ONE);
	assert_int_equal(
	    ft_frag_delta(&delta, many[0], &pod, FT_POLICY_PACKED, &unbound),
	    0);
	assert_int_equal(delta, 0);
	unref_all(many, 16);
}

/*
 * Prioritize over one rare node (16 CPUs free, the only one that takes the
 * mix's 14-CPU pods) and 3 common ones (10 CPUs free). A 5-CPU pod leaves a
 * common node too little CPU for the mix's 8-CPU pairs, and the rare node
 * too little for its 14-CPU pods: unweighed, FGD counts the two alike and
 * prefers the rare node; weighed, spending the only host of the 14-CPU pods
 * costs 4 times as much, and a common node wins.
 */
static void test_frag__weigh_keeps_scarce_node(void **state)
{
	ft_node_t *nodes[4];
	const ft_node_t *rare, *common;
	ft_demand_t small = cpu_gpus_demand(1, 2000),
		    big = cpu_gpus_demand(1, 14000),
		    pair = cpu_gpus_demand(2, 8000),
		    pod = cpu_gpus_demand(1, 5000);
	ft_mix_t mix;

	(void)state;
	rare_and_common(nodes, 4, NULL);
	rare = nodes[0];
	common = nodes[1];
	ft_mix_init(&mix, 64);
	ft_mix_add(&mix, &small, NULL);
	ft_mix_add(&mix, &big, NULL);
	ft_mix_add(&mix, &pair, NULL);
	ft_mix_add(&mix, &pair, NULL);
	assert_true(ft_place_rank(rare, &pod, FT_POLICY_PACKED, &mix) >
		    ft_place_rank(common, &pod, FT_POLICY_PACKED, &mix));
	ft_mix_weigh(&mix, (const ft_node_t *const *)nodes, 4);
	assert_int_equal(mix.point_weight[0][1], 4 * FT_WEIGHT_ONE);
	assert_true(ft_place_rank(common, &pod, FT_POLICY_PACKED, &mix) >
		    ft_place_rank(rare, &pod, FT_POLICY_PACKED, &mix));
	unref_all(nodes, 4);
}

/*
 * FGD's "the pod does not fit": a node whose CPUs are requested strands its
 * free GPUs for a class that needs CPUs with them.
 */
static void test_frag__cpu_strands_gpus(void **state)
{
	const int none[] = {-1};
	ft_node_t *cramped = busy_node("c", 15000, none),
		  *roomy = busy_node("r", 4000, none);
	ft_demand_t one = gpus_demand(1, -1);

	(void)state;
	one.cpu_millis = 4000;
	assert_int_equal(ft_node_free_cpu_millis(cramped), 1000);
	assert_int_equal(ft_frag_of(cramped, &one), 4000);
	assert_int_equal(ft_frag_of(roomy, &one), 0);
	one.memory_mib = 200000; /* more than the node's 128 GiB */
	assert_int_equal(ft_frag_of(roomy, &one), 4000);
	ft_node_unref(cramped);
	ft_node_unref(roomy);
}

/*
 * F_n(m) averages over the class's points: with half of its pods asking more
 * CPU than the node has left, half the free capacity is a fragment.
 */
static void test_frag__points_share_the_fragment(void **state)
{
	const int none[] = {-1};
	ft_node_t *node = busy_node("n", 10000, none); /* 6 CPUs left */
	ft_demand_t small = gpus_demand(1, -1), big = gpus_demand(1, -1);
	ft_frag_t f;
	ft_mix_t mix;

	(void)state;
	small.cpu_millis = 2000;
	big.cpu_millis = 8000;
	mix_of(&mix, &small, 2, &big, 2);
	ft_frag_measure(&f, node, &mix);
	assert_int_equal(f.free_milli, 4000);
	assert_int_equal(f.fragmentation_milli, 2000);
	ft_node_unref(node);
}

/*
 * A CPU-only pod is ranked too: where its CPUs would strand free GPUs it
 * ranks below a node whose GPUs are all held, under either policy.
 */
static void test_frag__cpu_only_pod_ranked(void **state)
{
	const int none[] = {-1}, all[] = {0, 1, 2, 3, -1};
	ft_node_t *idle = busy_node("i", 0, none),
		  *full = busy_node("f", 0, all);
	ft_node_t *bare = ft_test_node("x", NULL, NULL);
	ft_demand_t one = gpus_demand(1, -1), cpu = gpus_demand(0, -1);
	int64_t delta = 0;
	ft_mix_t mix;

	(void)state;
	one.cpu_millis = 4000;
	cpu.cpu_millis = 13000;
	mix_of(&mix, &one, 4, NULL, 0);
	assert_int_equal(
	    ft_frag_delta(&delta, idle, &cpu, FT_POLICY_PACKED, &mix), 0);
	assert_int_equal(delta, 4000);
	for (int p = FT_POLICY_PACKED; p <= FT_POLICY_DISTRIBUTED; p++)
		assert_true(ft_place_rank(idle, &cpu, (ft_policy_t)p, &mix) <
			    ft_place_rank(full, &cpu, (ft_policy_t)p, &mix));
	/* A node flextopo does not model strands no GPU either. */
	assert_true(ft_place_rank(bare, &cpu, FT_POLICY_PACKED, &mix) >
		    ft_place_rank(idle, &cpu, FT_POLICY_PACKED, &mix));
	ft_node_unref(bare);
	ft_node_unref(idle);
	ft_node_unref(full);
}

/* The best rank gets the top score alone; no rank gets 0. */
static void test_frag__scores_of_ranks(void **state)
{
	const int64_t spread[] = {5, FT_RANK_NONE, 5 + (INT64_C(1) << 40), 5},
		      even[] = {7, 7}, line[] = {0, 50, 99, 100};
	int out[4] = {-1, -1, -1, -1};

	(void)state;
	ft_scores_of_ranks(out, spread, 4, 10);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 0);
	assert_int_equal(out[2], 10);
	assert_int_equal(out[3], 0);
	ft_scores_of_ranks(out, even, 2, 10);
	assert_int_equal(out[0], 10);
	assert_int_equal(out[1], 10);
	ft_scores_of_ranks(out, line, 4, 10);
	assert_int_equal(out[1], 5);
	assert_int_equal(out[2], 9); /* below the best, however close */
	assert_int_equal(out[3], 10);
	ft_scores_of_ranks(out, line, 0, 10);
}

/* No topology, no GPU asked, no placement: no rank and no measure. */
static void test_frag__edges(void **state)
{
	ft_node_t *bare = ft_test_node("x", NULL, NULL);
	const int all[] = {0, 1, 2, 3, -1};
	ft_node_t *full = pairs_node("f", all);
	ft_demand_t one = gpus_demand(1, -1), cpu = gpus_demand(0, 0);
	int64_t delta = 7;
	ft_frag_t f;
	ft_mix_t mix;

	(void)state;
	mix_of(&mix, &one, 2, NULL, 0);
	ft_frag_measure(&f, bare, &mix);
	assert_int_equal(f.free_milli, 0);
	assert_int_equal(ft_frag_of(bare, &one), 0);
	assert_int_equal(
	    ft_frag_delta(&delta, bare, &one, FT_POLICY_PACKED, &mix),
	    FT_EINVAL);
	assert_int_equal(
	    ft_frag_delta(&delta, full, &one, FT_POLICY_PACKED, &mix),
	    FT_ENOTFOUND);
	assert_int_equal(delta, 0);
	assert_int_equal(ft_place_rank(full, &one, FT_POLICY_PACKED, &mix),
			 FT_RANK_NONE);
	assert_int_equal(ft_place_rank(bare, &cpu, FT_POLICY_PACKED, &mix),
			 FT_RANK_NONE);
	assert_true(ft_place_rank(full, &cpu, FT_POLICY_PACKED, &mix) >= 0);
	ft_node_unref(bare);
	ft_node_unref(full);
}

static unsigned rnd(unsigned *seed, unsigned n)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 16) % n;
}

/* Pod shapes the property test draws mixes and pods from. */
static ft_demand_t palette(unsigned k)
{
	ft_demand_t d;

	switch (k) {
	case 0:
		return gpus_demand(1, -1);
	case 1:
		return gpus_demand(2, FT_LEVEL_NVLINK);
	case 2:
		return gpus_demand(4, FT_LEVEL_NVLINK);
	case 3:
		d = gpus_demand(2, FT_LEVEL_NUMA);
		d.exclusive_cpus = 4;
		d.memory_mib = 1024;
		return d;
	case 4:
		return mig_demand("1g.10gb");
	case 5:
		return mig_demand("3g.40gb");
	case 7:
		return fraction_demand(1, 300);
	case 8:
		return fraction_demand(1, 800);
	case 9:
		return fraction_demand(2, 800);
	default:
		d = gpus_demand(1, FT_LEVEL_PCIE_SWITCH);
		d.mode = FT_MODE_BEST_EFFORT;
		return d;
	}
}

/* A random node of box `t`: some GPUs, instances or replicas held. */
static ft_node_t *random_node(unsigned *seed, ft_topology_t *t, ft_pod_t *pods,
			      unsigned *n)
{
	ft_pod_t *list[FT_GPU_MAX + FT_MIG_MAX + 1];

	*n = 0;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (t->gpus[g].replicas && rnd(seed, 2)) {
			char uid[16];
			snprintf(uid, sizeof(uid), "s%u", g);
			ft_test_pod(&pods[*n], uid, 0, NULL, NULL, 0);
			pods[*n].allocation.replica_gpus[0] =
			    strdup(t->gpus[g].uuid);
			pods[*n].allocation.replica_counts[0] =
			    (uint8_t)(1 + rnd(seed, t->gpus[g].replicas));
			pods[*n].allocation.n_replicas = 1;
			pods[*n].has_allocation = true;
			(*n)++;
		} else if (!t->gpus[g].mig_enabled && !t->gpus[g].replicas &&
			   !rnd(seed, 3)) {
			const char *one[2] = {t->gpus[g].uuid, NULL};
			char uid[16];
			snprintf(uid, sizeof(uid), "g%u", g);
			ft_test_pod(&pods[*n], uid, 0, one, NULL, 0);
			(*n)++;
		}
	for (unsigned i = 0; i < t->n_mig; i++)
		if (!rnd(seed, 3)) {
			char uid[16];
			snprintf(uid, sizeof(uid), "m%u", i);
			ft_test_pod(&pods[*n], uid, 0, NULL, NULL, 0);
			pods[*n].allocation.mig_uuids[0] =
			    strdup(t->mig[i].uuid);
			pods[*n].allocation.n_mig = 1;
			pods[*n].has_allocation = true;
			(*n)++;
		}
	for (unsigned i = 0; i < *n; i++)
		list[i] = &pods[i];
	list[*n] = NULL;
	return ft_test_node("r", t, list);
}

/* F under `mix` from ft_frag_of alone: no cache, no shortcut. Each class
 * counts its pods, times its pods per GPU when it asks a fraction. */
static int64_t reference(const ft_node_t *node, const ft_mix_t *mix)
{
	uint64_t sum = 0, mass = 0;

	for (unsigned c = 0; c < mix->n_classes; c++) {
		uint32_t f = mix->classes[c].gpu_fraction_milli;
		uint64_t m = (uint64_t)mix->counts[c] *
			     (f && f < 1000 ? 1000000 / f : 1000);
		sum += m * ft_frag_of(node, &mix->classes[c]);
		mass += m;
	}
	return (int64_t)((sum + mass / 2) / mass);
}

/*
 * The change of F under `mix` from ft_frag_of alone, on `node` rebuilt from
 * its `n` pods plus one holding placement `p` (which must hold no unit
 * already held).
 */
static int64_t rebuilt_delta(const ft_node_t *node, ft_pod_t *pods, unsigned n,
			     const ft_placement_t *p, const ft_demand_t *d,
			     const ft_mix_t *mix)
{
	ft_pod_t *list[FT_GPU_MAX + FT_MIG_MAX + 2];
	ft_node_t *after;
	int64_t delta;

	ft_test_pod(&pods[n], "new", 0, NULL, NULL, 0);
	assert_int_equal(ft_codec_allocation_from_placement(&pods[n].allocation,
							    p, node, d->mode),
			 0);
	pods[n].has_allocation = true;
	for (unsigned i = 0; i <= n; i++)
		list[i] = &pods[i];
	list[n + 1] = NULL;
	after = ft_test_node("r", node->topology, list);
	assert_int_equal(after->conflicts, 0);
	delta = reference(after, mix) - reference(node, mix);
	ft_node_unref(after);
	ft_pod_dispose(&pods[n]);
	return delta;
}

/*
 * The rank of `d` on `node` read through the node's caches (the filter
 * memo's verdict and level points, the fragmentation cache's room and
 * placements), first filled and then read, is the rank of a value copy,
 * which has no caches; under both policies.
 */
static void check_rank_caches(const ft_node_t *node, const ft_demand_t *d,
			      const ft_mix_t *mix)
{
	ft_node_t copy;

	ft_node_copy_value(&copy, node);
	for (unsigned pol = 0; pol < 2; pol++) {
		int64_t bare = ft_place_rank(&copy, d, (ft_policy_t)pol, mix);
		assert_true(ft_place_rank(node, d, (ft_policy_t)pol, mix) ==
			    bare);
		assert_true(ft_place_rank(node, d, (ft_policy_t)pol, mix) ==
			    bare);
	}
}

/*
 * ft_frag_delta, with its node cache and its shortcut for classes the
 * placement leaves alone, equals the change of ft_frag_of computed from
 * scratch on the node rebuilt with the pod bound, on random nodes, mixes
 * and pods; asked twice (the second time from the cache) it answers the
 * same. The rank through the caches is a copy's without them, and none
 * where no placement exists.
 */
static void test_frag__delta_matches_reference(void **state)
{
	ft_topology_t *boxes[3] = {ft_test_topology_a100("P"),
				   ft_test_topology_mig(), shared_box(10)};
	unsigned seed = 7, checked = 0;

	(void)state;
	for (unsigned iter = 0; iter < 600; iter++) {
		ft_topology_t *t = boxes[iter % 3];
		ft_pod_t pods[FT_GPU_MAX + FT_MIG_MAX + 1];
		ft_demand_t d = palette(rnd(&seed, 10));
		ft_node_t *node;
		int64_t delta = 0, again = 0;
		ft_placement_t p;
		unsigned n;
		ft_mix_t mix;

		node = random_node(&seed, t, pods, &n);
		ft_mix_init(&mix, 32);
		for (unsigned k = 0, m = 1 + rnd(&seed, 6); k < m; k++) {
			ft_demand_t c = palette(rnd(&seed, 10));
			ft_mix_add(&mix, &c, NULL);
		}
		check_rank_caches(node, &d, &mix);
		if (ft_place_choose(&p, node, &d, FT_POLICY_PACKED) < 0) {
			assert_int_equal(ft_frag_delta(&delta, node, &d,
						       FT_POLICY_PACKED, &mix),
					 FT_ENOTFOUND);
			assert_true(ft_place_rank(node, &d, FT_POLICY_PACKED,
						  &mix) == FT_RANK_NONE);
		} else {
			assert_int_equal(ft_frag_delta(&delta, node, &d,
						       FT_POLICY_PACKED, &mix),
					 0);
			assert_int_equal(ft_frag_delta(&again, node, &d,
						       FT_POLICY_PACKED, &mix),
					 0);
			assert_int_equal(again, delta);
			/* The delta weighs ft_place_choose()'s placement,
			 * which holds no unit already held. */
			assert_int_equal(
			    delta, rebuilt_delta(node, pods, n, &p, &d, &mix));
			checked++;
		}
		for (unsigned i = 0; i < n; i++)
			ft_pod_dispose(&pods[i]);
		ft_node_unref(node);
	}
	assert_true(checked > 300);
	for (unsigned b = 0; b < 3; b++)
		ft_topology_unref(boxes[b]);
}

#define SWEEP_NODES 40

/*
 * ft_place_rank_all, which asks for the nodes' caches ahead of the sweep,
 * ranks each node as ft_place_rank does, NULL ones FT_RANK_NONE, over more
 * nodes than it looks ahead; on fresh caches and on filled ones.
 */
static void test_frag__rank_all_matches_rank(void **state)
{
	ft_topology_t *boxes[3] = {ft_test_topology_a100("P"),
				   ft_test_topology_mig(), shared_box(10)};
	/* On the heap: 40 nodes' pods overflow a thread's stack. */
	ft_pod_t(*pods)[FT_GPU_MAX + FT_MIG_MAX + 1] =
	    calloc(SWEEP_NODES, sizeof(*pods));
	const ft_node_t *nodes[SWEEP_NODES];
	ft_node_t *owned[SWEEP_NODES];
	unsigned counts[SWEEP_NODES], seed = 11;
	int64_t ranks[SWEEP_NODES];
	ft_mix_t mix;

	(void)state;
	assert_non_null(pods);
	ft_mix_init(&mix, 32);
	for (unsigned k = 0; k < 6; k++) {
		ft_demand_t c = palette(rnd(&seed, 10));
		ft_mix_add(&mix, &c, NULL);
	}
	for (unsigned i = 0; i < SWEEP_NODES; i++) {
		owned[i] =
		    random_node(&seed, boxes[i % 3], pods[i], &counts[i]);
		nodes[i] = i % 7 == 3 ? NULL : owned[i];
	}
	for (unsigned round = 0; round < 20; round++) {
		ft_demand_t d = palette(rnd(&seed, 10));
		ft_policy_t policy = (ft_policy_t)(round % 2);
		ft_place_rank_all(ranks, nodes, SWEEP_NODES, &d, policy, &mix);
		for (unsigned i = 0; i < SWEEP_NODES; i++)
			assert_true(ranks[i] ==
				    (nodes[i] ? ft_place_rank(nodes[i], &d,
							      policy, &mix)
					      : FT_RANK_NONE));
	}
	for (unsigned i = 0; i < SWEEP_NODES; i++) {
		for (unsigned k = 0; k < counts[i]; k++)
			ft_pod_dispose(&pods[i][k]);
		ft_node_unref(owned[i]);
	}
	free(pods);
	for (unsigned b = 0; b < 3; b++)
		ft_topology_unref(boxes[b]);
}

/*
 * A class whose pods left the window keeps its slot; when its pods come
 * back, a node's memo of a shape weighed meanwhile must not answer for it
 * (it was not worked out then): the node weighs as a fresh one does.
 */
static void test_frag__memo_ignores_classes_without_pods(void **state)
{
	const int none[] = {-1};
	ft_demand_t one = gpus_demand(1, -1), pair = gpus_demand(2, 0);
	ft_node_t *a = pairs_node("a", none), *b = pairs_node("b", none);
	int64_t memo = 0, fresh = 0;
	ft_mix_t mix;

	(void)state;
	ft_mix_init(&mix, 4);
	ft_mix_add(&mix, &pair, NULL);
	for (int i = 0; i < 4; i++)
		ft_mix_add(&mix, &one, NULL); /* the pair pod leaves */
	assert_int_equal(mix.counts[0], 0);
	assert_int_equal(ft_frag_delta(&memo, a, &one, FT_POLICY_PACKED, &mix),
			 0);
	ft_mix_add(&mix, &pair, NULL); /* same class, same generation */
	assert_int_equal(ft_frag_delta(&memo, a, &one, FT_POLICY_PACKED, &mix),
			 0);
	assert_int_equal(ft_frag_delta(&fresh, b, &one, FT_POLICY_PACKED, &mix),
			 0);
	assert_int_equal(fresh, 250);
	assert_int_equal(memo, fresh);
	ft_node_unref(a);
	ft_node_unref(b);
}

static void dispose_pods(ft_pod_t *pods, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ft_pod_dispose(&pods[i]);
}

#define WEIGH_NODES   6
#define WEIGH_THREADS 4
#define WEIGH_ROUNDS  30

/* Nodes, mix and demands every thread weighs, and what each one got. */
typedef struct {
	ft_node_t *nodes[WEIGH_NODES];
	ft_mix_t mix;
	int64_t got[WEIGH_THREADS][WEIGH_NODES][10];
	uint32_t measured[WEIGH_THREADS][WEIGH_NODES];
	pthread_barrier_t start; /* so that the first, filling round overlaps */
} weigh_t;

typedef struct {
	weigh_t *w;
	unsigned id;
} weigher_t;

static void weigh_all(weigh_t *w, unsigned id)
{
	for (unsigned r = 0; r < WEIGH_ROUNDS; r++)
		for (unsigned n = 0; n < WEIGH_NODES; n++) {
			ft_frag_t f;
			for (unsigned k = 0; k < 10; k++) {
				ft_demand_t d = palette((k + r) % 10);
				int64_t delta = -1;
				if (ft_frag_delta(&delta, w->nodes[n], &d,
						  FT_POLICY_PACKED,
						  &w->mix) < 0)
					delta = INT64_MIN;
				w->got[id][n][(k + r) % 10] = delta;
			}
			ft_frag_measure(&f, w->nodes[n], &w->mix);
			w->measured[id][n] = f.fragmentation_milli;
		}
}

static void *weigher(void *arg)
{
	weigher_t *me = arg;

	pthread_barrier_wait(&me->w->start);
	weigh_all(me->w, me->id);
	return NULL;
}

/*
 * Threads weighing the same nodes at once, as prioritize's workers do, fill
 * and read the nodes' caches under their try-lock; each gets what one
 * thread alone gets on nodes built afresh. (scripts/test.sh also runs this
 * under ThreadSanitizer.)
 */
static void test_frag__concurrent_weighing(void **state)
{
	ft_topology_t *boxes[3] = {ft_test_topology_a100("P"),
				   ft_test_topology_mig(), shared_box(10)};
	static ft_pod_t pods[FT_GPU_MAX + FT_MIG_MAX + 1];
	static weigh_t w, alone;
	unsigned n_pods, seed = 11;
	pthread_t threads[WEIGH_THREADS];
	weigher_t args[WEIGH_THREADS];

	(void)state;
	/* Two nodes from one seed each: the same state, separate caches. */
	for (unsigned n = 0; n < WEIGH_NODES; n++) {
		unsigned copy = seed;
		w.nodes[n] = random_node(&seed, boxes[n % 3], pods, &n_pods);
		dispose_pods(pods, n_pods);
		alone.nodes[n] =
		    random_node(&copy, boxes[n % 3], pods, &n_pods);
		dispose_pods(pods, n_pods);
	}
	ft_mix_init(&w.mix, 32);
	for (unsigned k = 0; k < 10; k++) {
		ft_demand_t c = palette(k);
		ft_mix_add(&w.mix, &c, NULL);
	}
	alone.mix = w.mix;
	weigh_all(&alone, 0);
	assert_int_equal(pthread_barrier_init(&w.start, NULL, WEIGH_THREADS),
			 0);
	for (unsigned i = 0; i < WEIGH_THREADS; i++) {
		args[i] = (weigher_t){&w, i};
		assert_int_equal(
		    pthread_create(&threads[i], NULL, weigher, &args[i]), 0);
	}
	for (unsigned i = 0; i < WEIGH_THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	pthread_barrier_destroy(&w.start);
	for (unsigned i = 0; i < WEIGH_THREADS; i++) {
		assert_memory_equal(w.got[i], alone.got[0], sizeof(w.got[i]));
		assert_memory_equal(w.measured[i], alone.measured[0],
				    sizeof(w.measured[i]));
	}
	for (unsigned n = 0; n < WEIGH_NODES; n++) {
		ft_node_unref(w.nodes[n]);
		ft_node_unref(alone.nodes[n]);
	}
	for (unsigned b = 0; b < 3; b++)
		ft_topology_unref(boxes[b]);
}

/*
 * graph-socket-gpus.json: GPUs 0 and 1 in socket 0 with their NUMA node
 * unknown, GPU 2 in NUMA node 2, GPU 3 nowhere known. Blocks and usable
 * units count a GPU only at the levels placement lets it reach.
 */
static void test_frag__unknown_gpu_locality(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-socket-gpus.json");
	ft_node_t *node = ft_test_node("n", t, NULL);
	ft_demand_t numa_pair = gpus_demand(2, FT_LEVEL_NUMA);
	ft_demand_t socket_pair = gpus_demand(2, FT_LEVEL_SOCKET);
	uint8_t blocks[FT_LEVEL_COUNT];
	ft_usable_t u;

	(void)state;
	ft_frag_largest_blocks(blocks, node);
	assert_int_equal(blocks[FT_LEVEL_NVLINK], 1);
	assert_int_equal(blocks[FT_LEVEL_PCIE_SWITCH], 1);
	assert_int_equal(blocks[FT_LEVEL_NUMA], 1);
	assert_int_equal(blocks[FT_LEVEL_SOCKET], 2);
	assert_int_equal(blocks[FT_LEVEL_NODE], 4);
	ft_place_usable(&u, node, &numa_pair);
	assert_int_equal(u.milli, 0);
	assert_int_equal(u.gpus, 0);
	ft_place_usable(&u, node, &socket_pair);
	assert_int_equal(u.milli, 2000);
	assert_int_equal(u.gpus, 0x3);
	ft_node_unref(node);
	ft_topology_unref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_frag__mix_window),
	    cmocka_unit_test(test_frag__mix_replaces_rarest_class),
	    cmocka_unit_test(test_frag__of_class),
	    cmocka_unit_test(test_frag__model_names_never_narrow),
	    cmocka_unit_test(test_frag__of_class_ruled_out_by_node),
	    cmocka_unit_test(test_frag__weigh_bound_class_from_lower_scarcity),
	    cmocka_unit_test(test_frag__bound_by_nodes_ruled_out),
	    cmocka_unit_test(test_frag__taking_from_bound_class_costs),
	    cmocka_unit_test(test_frag__single_gpu_spares_last_pair),
	    cmocka_unit_test(test_frag__measure_blocks),
	    cmocka_unit_test(test_frag__mig_stranded),
	    cmocka_unit_test(test_frag__shared_fraction),
	    cmocka_unit_test(test_frag__fraction_weighs_by_pods_per_gpu),
	    cmocka_unit_test(test_frag__edges),
	    cmocka_unit_test(test_frag__mix_keys_by_gpu_shape),
	    cmocka_unit_test(test_frag__mix_samples_roll),
	    cmocka_unit_test(test_frag__mix_points_are_quantiles),
	    cmocka_unit_test(test_frag__weigh_scarce_points),
	    cmocka_unit_test(test_frag__weigh_keeps_scarce_node),
	    cmocka_unit_test(test_frag__cpu_strands_gpus),
	    cmocka_unit_test(test_frag__points_share_the_fragment),
	    cmocka_unit_test(test_frag__cpu_only_pod_ranked),
	    cmocka_unit_test(test_frag__scores_of_ranks),
	    cmocka_unit_test(test_frag__delta_matches_reference),
	    cmocka_unit_test(test_frag__rank_all_matches_rank),
	    cmocka_unit_test(test_frag__memo_ignores_classes_without_pods),
	    cmocka_unit_test(test_frag__concurrent_weighing),
	    cmocka_unit_test(test_frag__unknown_gpu_locality),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
