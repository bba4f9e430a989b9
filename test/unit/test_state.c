/*
 * The cluster state: applying watched Nodes and Pods, the snapshots it
 * publishes (generations, nodes shared between snapshots), relists, and the
 * assume / forget / confirm cycle of bind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/state.h>

#include "support.h"

static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

/* 4 GPUs, NVLink pairs (0,1) and (2,3), NUMA 0 = CPUs 0-7, NUMA 1 = 8-15. */
static char *pairs_topology(const char *prefix)
{
	char *out = NULL;

	if (asprintf(
		&out,
		"{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-7\",\"memoryMiB\":65536,\"pcieSwitches\":[{\"id\":0,\"gpus\":[{\"index\":0,\"uuid\":\"%s-0\",\"nvlinks\":[{\"peer\":1,\"links\":4}]},{\"index\":1,\"uuid\":\"%s-1\",\"nvlinks\":[{\"peer\":0,\"links\":4}]}]}]},{\"id\":1,\"cpus\":\"8-15\",\"memoryMiB\":65536,\"pcieSwitches\":[{\"id\":1,\"gpus\":[{\"index\":2,\"uuid\":\"%s-2\",\"nvlinks\":[{\"peer\":3,\"links\":4}]},{\"index\":3,\"uuid\":\"%s-3\",\"nvlinks\":[{\"peer\":2,\"links\":4}]}]}]}]}]}",
		prefix, prefix, prefix, prefix) < 0)
		fail_msg("out of memory");
	return out;
}

static cJSON *node_object(const char *name, bool with_topology)
{
	cJSON *node = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(node, "metadata");

	cJSON_AddStringToObject(meta, "name", name);
	if (with_topology) {
		char *topo = pairs_topology(name);
		cJSON_AddStringToObject(
		    cJSON_AddObjectToObject(meta, "annotations"),
		    "flextopo.io/topology", topo);
		free(topo);
	}
	return node;
}

static void apply_node(ft_state_t *s, const char *name)
{
	cJSON *node = node_object(name, true);

	ft_state_apply_node(s, node);
	cJSON_Delete(node);
}

typedef struct {
	const char *uid;
	const char *node;	/* spec.nodeName or NULL */
	unsigned gpus;		/* nvidia.com/gpu limit */
	const char *cpu;	/* cpu request (and limit when guaranteed) */
	bool guaranteed;	/* limits equal to requests */
	const char *allocation; /* flextopo.io/allocation or NULL */
	const char *phase;	/* NULL: Running */
} pod_spec_t;

static cJSON *pod_object(const pod_spec_t *p)
{
	cJSON *pod = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
	cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON *c = cJSON_CreateObject();
	cJSON *res = cJSON_AddObjectToObject(c, "resources");
	cJSON *req = cJSON_AddObjectToObject(res, "requests");
	cJSON *lim = cJSON_AddObjectToObject(res, "limits");
	char gpus[16];

	cJSON_AddStringToObject(meta, "name", p->uid);
	cJSON_AddStringToObject(meta, "namespace", "ns");
	cJSON_AddStringToObject(meta, "uid", p->uid);
	if (p->allocation)
		cJSON_AddStringToObject(
		    cJSON_AddObjectToObject(meta, "annotations"),
		    "flextopo.io/allocation", p->allocation);
	if (p->node)
		cJSON_AddStringToObject(spec, "nodeName", p->node);
	cJSON_AddStringToObject(c, "name", "main");
	cJSON_AddStringToObject(req, "cpu", p->cpu ? p->cpu : "100m");
	cJSON_AddStringToObject(req, "memory", "1Gi");
	if (p->guaranteed) {
		cJSON_AddStringToObject(lim, "cpu", p->cpu);
		cJSON_AddStringToObject(lim, "memory", "1Gi");
	}
	if (p->gpus) {
		snprintf(gpus, sizeof(gpus), "%u", p->gpus);
		cJSON_AddStringToObject(req, "nvidia.com/gpu", gpus);
		cJSON_AddStringToObject(lim, "nvidia.com/gpu", gpus);
	}
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase",
				p->phase ? p->phase : "Running");
	return pod;
}

static void apply_pod(ft_state_t *s, const pod_spec_t *p)
{
	cJSON *pod = pod_object(p);

	ft_state_apply_pod(s, pod);
	cJSON_Delete(pod);
}

static void delete_pod(ft_state_t *s, const pod_spec_t *p)
{
	cJSON *pod = pod_object(p);

	ft_state_delete_pod(s, pod);
	cJSON_Delete(pod);
}

static void decode_pod(ft_pod_t *out, const pod_spec_t *p)
{
	cJSON *pod = pod_object(p);

	assert_int_equal(ft_codec_pod_decode(out, pod, &opts), 0);
	cJSON_Delete(pod);
}

/* An allocation annotation of GPU indexes (bits of `gpus`) on `node`. */
static char *allocation(const char *node, uint16_t gpus)
{
	char list[256] = "";
	size_t n = 0;
	char *out = NULL;

	for (unsigned g = 0; g < 4; g++)
		if (gpus & (1u << g))
			n += (size_t)snprintf(list + n, sizeof(list) - n,
					      "%s\"%s-%u\"", n ? "," : "", node,
					      g);
	if (asprintf(
		&out,
		"{\"version\":1,\"node\":\"%s\",\"level\":\"nvlink\",\"mode\":\"guaranteed\",\"gpus\":[%s],\"cpuset\":\"\",\"memoryMiB\":0}",
		node, list) < 0)
		fail_msg("out of memory");
	return out;
}

static ft_state_t *state_new(void)
{
	ft_state_t *s = NULL;

	ft_log_set_level(FT_LOG_ERROR);
	assert_int_equal(ft_state_new(&s, &opts), 0);
	return s;
}

/* Node `name` in the current snapshot: GPUs in use, or -1 when absent. */
static int gpus_used(ft_state_t *s, const char *name)
{
	ft_snapshot_t *snap = ft_state_snapshot(s);
	const ft_node_t *n = ft_snapshot_find(snap, name);
	int used = n ? n->gpus_used : -1;

	ft_snapshot_unref(snap);
	return used;
}

/* The holding of `uid` on `node`: its GPUs, or -1 when it has none. */
static int held_gpus(ft_state_t *s, const char *node, const char *uid,
		     bool *assumed)
{
	ft_snapshot_t *snap = ft_state_snapshot(s);
	const ft_node_t *n = ft_snapshot_find(snap, node);
	const ft_holding_t *h = n ? ft_node_find_holding(n, uid) : NULL;
	int gpus = h ? h->gpus : -1;

	if (assumed)
		*assumed = h && h->assumed;
	ft_snapshot_unref(snap);
	return gpus;
}

static unsigned assumed_count(ft_state_t *s)
{
	ft_state_stats_t st;

	ft_state_stats(s, &st);
	return st.assumed;
}

/* CPU the pods on `name` request, in millicores; UINT32_MAX: no node. */
static uint32_t requested_cpu(ft_state_t *s, const char *name)
{
	ft_snapshot_t *snap = ft_state_snapshot(s);
	const ft_node_t *n = ft_snapshot_find(snap, name);
	uint32_t cpu = n ? n->requested_cpu_millis : UINT32_MAX;

	ft_snapshot_unref(snap);
	return cpu;
}

static void test_state__empty(void **state)
{
	ft_state_t *s = state_new();
	ft_snapshot_t *snap = ft_state_snapshot(s);
	ft_state_stats_t st;
	ft_pod_t pod;

	assert_non_null(snap);
	assert_int_equal(snap->n_nodes, 0);
	assert_null(ft_snapshot_find(snap, "n1"));
	ft_snapshot_unref(snap);
	ft_state_stats(s, &st);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.pods, 0);
	assert_int_equal(ft_state_find_pod(s, "nope", &pod), FT_ENOTFOUND);
	ft_state_free(s);
	ft_state_free(NULL);
}

static void test_state__apply_nodes_and_pods(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0x3);
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 2, .allocation = a};
	cJSON *bare = node_object("n3", false);
	ft_state_stats_t st;
	ft_snapshot_t *snap;
	ft_pod_t got;

	apply_node(s, "n1");
	apply_node(s, "n2");
	ft_state_apply_node(s, bare);
	apply_pod(s, &p);
	snap = ft_state_snapshot(s);
	assert_int_equal(snap->n_nodes, 3);
	assert_string_equal(snap->nodes[0]->name, "n1");
	assert_string_equal(snap->nodes[2]->name, "n3");
	assert_null(snap->nodes[2]->topology);
	assert_string_equal(snap->nodes[2]->topology_error,
			    "annotation flextopo.io/topology is missing");
	assert_int_equal(snap->nodes[0]->gpus_used, 0x3);
	assert_int_equal(snap->nodes[0]->n_holdings, 1);
	assert_int_equal(snap->nodes[1]->gpus_used, 0);
	ft_snapshot_unref(snap);

	ft_state_stats(s, &st);
	assert_int_equal(st.nodes, 3);
	assert_int_equal(st.nodes_bad_topology, 1);
	assert_int_equal(st.pods, 1);
	assert_int_equal(st.assumed, 0);

	assert_int_equal(ft_state_find_pod(s, "p1", &got), 0);
	assert_string_equal(got.node, "n1");
	assert_true(got.has_allocation);
	assert_int_equal(got.demand.gpus, 2);
	ft_pod_dispose(&got);

	cJSON_Delete(bare);
	free(a);
	ft_state_free(s);
}

static void test_state__pod_before_its_node(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0x4);
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 1, .allocation = a};

	/* The watch of pods may deliver before the watch of nodes. */
	apply_pod(s, &p);
	assert_int_equal(gpus_used(s, "n1"), -1);
	apply_node(s, "n1");
	assert_int_equal(gpus_used(s, "n1"), 0x4);
	free(a);
	ft_state_free(s);
}

/*
 * A publish builds the nodes marked since the last one and no other: also
 * across a relist, where many are marked before one publish, and when a
 * marked record goes (a pod on a node that never came, then deleted).
 */
static void test_state__publish_builds_marked_nodes(void **state)
{
	ft_state_t *s = state_new();
	char *a1 = allocation("n1", 0x1), *a3 = allocation("n3", 0x2);
	pod_spec_t p1 = {
	    .uid = "p1", .node = "n1", .gpus = 1, .allocation = a1};
	pod_spec_t p3 = {
	    .uid = "p3", .node = "n3", .gpus = 1, .allocation = a3};
	pod_spec_t lost = {.uid = "lost", .node = "gone", .gpus = 1};
	ft_snapshot_t *s1, *s2;

	apply_node(s, "n1");
	apply_node(s, "n2");
	apply_node(s, "n3");
	s1 = ft_state_snapshot(s);
	ft_state_replace_begin(s, FT_KIND_POD);
	apply_pod(s, &lost);
	apply_pod(s, &p1);
	delete_pod(s, &lost);
	apply_pod(s, &p3);
	ft_state_replace_end(s, FT_KIND_POD);
	s2 = ft_state_snapshot(s);
	assert_int_equal(s2->n_nodes, 3);
	assert_ptr_equal(ft_snapshot_find(s2, "n2"),
			 ft_snapshot_find(s1, "n2"));
	assert_int_equal(ft_snapshot_find(s2, "n1")->gpus_used, 0x1);
	assert_int_equal(ft_snapshot_find(s2, "n3")->gpus_used, 0x2);
	assert_null(ft_snapshot_find(s2, "gone"));
	ft_snapshot_unref(s1);
	/* Nothing left marked: the next event builds its own node alone. */
	delete_pod(s, &p3);
	s1 = ft_state_snapshot(s);
	assert_ptr_equal(ft_snapshot_find(s1, "n1"),
			 ft_snapshot_find(s2, "n1"));
	assert_int_equal(ft_snapshot_find(s1, "n3")->gpus_used, 0);
	ft_snapshot_unref(s1);
	ft_snapshot_unref(s2);
	free(a1);
	free(a3);
	ft_state_free(s);
}

static void test_state__generations_and_sharing(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0x1);
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 1, .allocation = a};
	ft_snapshot_t *s1, *s2;

	apply_node(s, "n1");
	apply_node(s, "n2");
	s1 = ft_state_snapshot(s);
	apply_pod(s, &p);
	s2 = ft_state_snapshot(s);
	assert_ptr_not_equal(s1, s2);
	assert_true(s2->generation > s1->generation);
	/* The untouched node is the very same object in both snapshots. */
	assert_ptr_equal(ft_snapshot_find(s2, "n2"),
			 ft_snapshot_find(s1, "n2"));
	assert_ptr_not_equal(ft_snapshot_find(s2, "n1"),
			     ft_snapshot_find(s1, "n1"));
	/* A snapshot already handed out does not change. */
	assert_int_equal(ft_snapshot_find(s1, "n1")->gpus_used, 0);
	assert_int_equal(ft_snapshot_find(s2, "n1")->gpus_used, 0x1);
	ft_snapshot_unref(s1);
	ft_snapshot_unref(s2);
	free(a);
	ft_state_free(s);
}

/*
 * Every name is found at its node, in a new snapshot and in one that
 * replaced some nodes (and shares the first one's index), after the first
 * is gone; names that are not there, or only their prefixes, are not.
 */
static void test_state__snapshot_finds_every_name(void **state)
{
	enum { N = 300 };
	ft_node_t *nodes[N], *swapped[N / 3];
	ft_snapshot_t *s1 = NULL, *s2 = NULL;
	char name[96];

	for (unsigned i = 0; i < N; i++) {
		/* Every seventh name long, with a long shared prefix. */
		snprintf(name, sizeof(name), "%s-%u",
			 i % 7 ? "node"
			       : "node-with-a-much-longer-name-than-the-others-"
				 "have-here",
			 (i * 7919u) % 1000u);
		assert_int_equal(ft_node_build(&nodes[i], name, NULL, "none",
					       NULL, NULL, NULL, 0),
				 0);
	}
	assert_int_equal(ft_snapshot_new(&s1, nodes, N, 1), 0);
	for (unsigned i = 0; i < N / 3; i++)
		assert_int_equal(ft_node_build(&swapped[i], nodes[3 * i]->name,
					       NULL, "none", NULL, NULL, NULL,
					       0),
				 0);
	assert_int_equal(ft_snapshot_with(&s2, s1, swapped, N / 3, 2), 0);
	for (unsigned i = 0; i < N; i++)
		assert_ptr_equal(ft_snapshot_find(s1, nodes[i]->name),
				 nodes[i]);
	ft_snapshot_unref(s1);
	for (unsigned i = 0; i < N; i++)
		assert_ptr_equal(ft_snapshot_find(s2, nodes[i]->name),
				 i % 3 ? nodes[i] : swapped[i / 3]);
	assert_null(ft_snapshot_find(s2, "node-"));
	assert_null(ft_snapshot_find(s2, "node-1000"));
	assert_null(ft_snapshot_find(s2, ""));
	/* A third from the second, which then goes: the chunks they shared
	 * keep their nodes, the positions stay sorted. */
	assert_int_equal(ft_snapshot_with(&s1, s2, nodes, 1, 3), 0);
	ft_snapshot_unref(s2);
	for (unsigned i = 0; i < N; i++)
		assert_ptr_equal(ft_snapshot_find(s1, nodes[i]->name),
				 i % 3 && i ? nodes[i]
				 : i	    ? swapped[i / 3]
					    : nodes[0]);
	for (unsigned i = 1; i < s1->n_nodes; i++)
		assert_true(strcmp(s1->nodes[i - 1]->name, s1->nodes[i]->name) <
			    0);
	for (unsigned i = 0; i < N; i++)
		ft_node_unref(nodes[i]);
	for (unsigned i = 0; i < N / 3; i++)
		ft_node_unref(swapped[i]);
	ft_snapshot_unref(s1);
	/* Names that are prefixes of one another, 55 to 57 bytes. */
	for (unsigned i = 0; i < 3; i++) {
		memset(name, 'x', 55 + i);
		name[55 + i] = '\0';
		assert_int_equal(ft_node_build(&nodes[i], name, NULL, "none",
					       NULL, NULL, NULL, 0),
				 0);
	}
	assert_int_equal(ft_snapshot_new(&s1, nodes, 3, 5), 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_ptr_equal(ft_snapshot_find(s1, nodes[i]->name),
				 nodes[i]);
		memset(name, 'x', 54 + i);
		name[54 + i] = '\0';
		assert_true(i == 0
				? ft_snapshot_find(s1, name) == NULL
				: ft_snapshot_find(s1, name) == nodes[i - 1]);
		ft_node_unref(nodes[i]);
	}
	assert_null(ft_snapshot_find(s1, ""));
	ft_snapshot_unref(s1);
	/* One name. */
	assert_int_equal(
	    ft_node_build(&nodes[0], "only", NULL, "none", NULL, NULL, NULL, 0),
	    0);
	assert_int_equal(ft_snapshot_new(&s1, nodes, 1, 4), 0);
	assert_ptr_equal(ft_snapshot_find(s1, "only"), nodes[0]);
	assert_null(ft_snapshot_find(s1, "onl"));
	assert_null(ft_snapshot_find(s1, "only2"));
	ft_node_unref(nodes[0]);
	ft_snapshot_unref(s1);
}

/*
 * Pods without devices still count on their node: their CPU and memory
 * requests are what scoring weighs (ft_node_free_cpu_millis). A finished
 * one counts no more.
 */
static void test_state__pods_without_devices_count_requests(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t web = {.uid = "web", .node = "n1", .cpu = "500m"};
	pod_spec_t shared = {
	    .uid = "shared", .node = "n1", .cpu = "1500m", .guaranteed = true};
	const ft_node_t *n;
	ft_snapshot_t *s1;

	apply_node(s, "n1");
	apply_pod(s, &web);
	apply_pod(s, &shared);
	s1 = ft_state_snapshot(s);
	n = ft_snapshot_find(s1, "n1");
	assert_int_equal(n->requested_cpu_millis, 2000);
	assert_int_equal(n->requested_memory_mib, 2048);
	assert_int_equal(ft_node_free_cpu_millis(n), 16000 - 2000);
	assert_int_equal(n->gpus_used, 0);
	assert_true(ft_cpuset_empty(&n->cpus_used));
	ft_snapshot_unref(s1);
	web.phase = "Succeeded";
	apply_pod(s, &web);
	delete_pod(s, &shared);
	s1 = ft_state_snapshot(s);
	assert_int_equal(ft_snapshot_find(s1, "n1")->requested_cpu_millis, 0);
	ft_snapshot_unref(s1);
	ft_state_free(s);
}

static void test_state__pinned_cpus_are_devices(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t pinned = {.uid = "pinned",
			     .node = "n1",
			     .cpu = "2",
			     .guaranteed = true,
			     .allocation = "{\"cpuset\":\"8-9\"}"};
	ft_snapshot_t *snap;
	const ft_node_t *n;

	apply_node(s, "n1");
	apply_pod(s, &pinned);
	snap = ft_state_snapshot(s);
	n = ft_snapshot_find(snap, "n1");
	assert_int_equal(n->n_holdings, 1);
	assert_true(ft_cpuset_has(&n->cpus_used, 8));
	assert_true(ft_cpuset_has(&n->cpus_used, 9));
	assert_int_equal(n->numa_free_cpus[1], 6);
	ft_snapshot_unref(snap);
	ft_state_free(s);
}

static void test_state__delete_pod_frees_gpus(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0xc);
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 2, .allocation = a};
	ft_pod_t got;

	apply_node(s, "n1");
	apply_pod(s, &p);
	assert_int_equal(gpus_used(s, "n1"), 0xc);
	delete_pod(s, &p);
	assert_int_equal(gpus_used(s, "n1"), 0);
	assert_int_equal(ft_state_find_pod(s, "p1", &got), FT_ENOTFOUND);
	/* Deleting twice is harmless. */
	delete_pod(s, &p);
	free(a);
	ft_state_free(s);
}

static void test_state__terminal_pod_frees_gpus(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0x3);
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 2, .allocation = a};

	apply_node(s, "n1");
	apply_pod(s, &p);
	assert_int_equal(gpus_used(s, "n1"), 0x3);
	p.phase = "Failed";
	apply_pod(s, &p);
	assert_int_equal(gpus_used(s, "n1"), 0);
	free(a);
	ft_state_free(s);
}

static void test_state__pod_without_allocation_is_unknown_usage(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .node = "n1", .gpus = 2};
	ft_snapshot_t *snap;
	const ft_node_t *n;

	apply_node(s, "n1");
	apply_pod(s, &p);
	snap = ft_state_snapshot(s);
	n = ft_snapshot_find(snap, "n1");
	assert_int_equal(n->gpus_used, 0);
	assert_int_equal(n->unknown_gpus, 2);
	ft_snapshot_unref(snap);
	ft_state_free(s);
}

static void test_state__delete_node(void **state)
{
	ft_state_t *s = state_new();
	cJSON *n2 = node_object("n2", true);
	ft_state_stats_t st;

	apply_node(s, "n1");
	ft_state_apply_node(s, n2);
	ft_state_delete_node(s, n2);
	assert_int_equal(gpus_used(s, "n2"), -1);
	assert_int_equal(gpus_used(s, "n1"), 0);
	ft_state_stats(s, &st);
	assert_int_equal(st.nodes, 1);
	/* Back again. */
	ft_state_apply_node(s, n2);
	assert_int_equal(gpus_used(s, "n2"), 0);
	cJSON_Delete(n2);
	ft_state_free(s);
}

static void test_state__bad_objects_skipped(void **state)
{
	ft_state_t *s = state_new();
	cJSON *nameless = cJSON_Parse("{\"metadata\":{}}");
	cJSON *not_object = cJSON_Parse("[1,2]");
	ft_snapshot_t *s1, *s2;
	ft_state_stats_t st;

	apply_node(s, "n1");
	s1 = ft_state_snapshot(s);
	ft_state_apply_node(s, nameless);
	ft_state_apply_pod(s, nameless);
	ft_state_apply_node(s, not_object);
	ft_state_apply_pod(s, not_object);
	ft_state_delete_node(s, nameless);
	ft_state_delete_pod(s, nameless);
	s2 = ft_state_snapshot(s);
	assert_ptr_equal(s1, s2);
	ft_state_stats(s, &st);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(st.pods, 0);
	ft_snapshot_unref(s1);
	ft_snapshot_unref(s2);
	cJSON_Delete(nameless);
	cJSON_Delete(not_object);
	ft_state_free(s);
}

static void test_state__replace_removes_what_was_not_announced(void **state)
{
	ft_state_t *s = state_new();
	char *a1 = allocation("n1", 0x1), *a2 = allocation("n2", 0x2);
	pod_spec_t p1 = {
	    .uid = "p1", .node = "n1", .gpus = 1, .allocation = a1};
	pod_spec_t p2 = {
	    .uid = "p2", .node = "n2", .gpus = 1, .allocation = a2};
	ft_snapshot_t *before, *after;
	ft_state_stats_t st;

	apply_node(s, "n1");
	apply_node(s, "n2");
	apply_pod(s, &p1);
	apply_pod(s, &p2);

	/* A relist of nodes that no longer has n2: one snapshot at the end. */
	before = ft_state_snapshot(s);
	ft_state_replace_begin(s, FT_KIND_NODE);
	apply_node(s, "n1");
	after = ft_state_snapshot(s);
	assert_ptr_equal(after, before);
	ft_snapshot_unref(after);
	ft_state_replace_end(s, FT_KIND_NODE);
	after = ft_state_snapshot(s);
	assert_int_equal(after->generation, before->generation + 1);
	assert_int_equal(after->n_nodes, 1);
	assert_null(ft_snapshot_find(after, "n2"));
	ft_snapshot_unref(before);
	ft_snapshot_unref(after);

	/* A relist of pods without p2. */
	ft_state_replace_begin(s, FT_KIND_POD);
	apply_pod(s, &p1);
	ft_state_replace_end(s, FT_KIND_POD);
	ft_state_stats(s, &st);
	assert_int_equal(st.pods, 1);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(gpus_used(s, "n1"), 0x1);

	/* n2 comes back empty: p2 is gone with the pod relist. */
	apply_node(s, "n2");
	assert_int_equal(gpus_used(s, "n2"), 0);
	free(a1);
	free(a2);
	ft_state_free(s);
}

static void test_state__replace_keeps_assumed_pods(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *ann = NULL;
	ft_pod_t pod;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	ft_state_replace_begin(s, FT_KIND_POD);
	ft_state_replace_end(s, FT_KIND_POD);
	/* The bind is in flight: the watch has not shown it yet. */
	assert_int_equal(assumed_count(s), 1);
	assert_int_equal(__builtin_popcount((unsigned)gpus_used(s, "n1")), 2);
	/* Once the Binding is answered, a relist without the pod means it is
	 * gone. */
	ft_state_bind_done(s, "p1");
	ft_state_replace_begin(s, FT_KIND_POD);
	ft_state_replace_end(s, FT_KIND_POD);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(gpus_used(s, "n1"), 0);
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__assume_and_forget(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *ann = NULL;
	ft_allocation_t a;
	bool assumed = false;
	ft_pod_t pod;
	int held;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	assert_non_null(ann);
	assert_int_equal(ft_codec_allocation_decode(&a, ann), 0);
	assert_int_equal(a.n_gpus, 2);
	ft_allocation_dispose(&a);

	/* The published snapshot holds it before assume returns. */
	held = held_gpus(s, "n1", "p1", &assumed);
	assert_true(held == 0x3 || held == 0xc);
	assert_true(assumed);
	assert_int_equal(gpus_used(s, "n1"), held);
	assert_int_equal(assumed_count(s), 1);

	ft_state_forget(s, "p1");
	assert_int_equal(gpus_used(s, "n1"), 0);
	assert_int_equal(held_gpus(s, "n1", "p1", NULL), -1);
	assert_int_equal(assumed_count(s), 0);
	/* Forgetting again, or an unknown pod, is harmless. */
	ft_state_forget(s, "p1");
	ft_state_forget(s, "nobody");
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__assume_and_confirm(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *ann = NULL;
	bool assumed = true;
	ft_pod_t pod, got;
	int held;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	held = held_gpus(s, "n1", "p1", NULL);
	ft_state_confirm(s, "p1");
	assert_int_equal(held_gpus(s, "n1", "p1", &assumed), held);
	assert_false(assumed);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(ft_state_find_pod(s, "p1", &got), 0);
	assert_string_equal(got.node, "n1");
	assert_true(got.has_allocation);
	assert_int_equal(got.allocation.n_gpus, 2);
	ft_pod_dispose(&got);
	/* Forget after confirm changes nothing. */
	ft_state_forget(s, "p1");
	assert_int_equal(gpus_used(s, "n1"), held);
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

/*
 * A pod asking for no device is assumed with its requests only: its CPU
 * counts on the node as soon as bind assumes it, with no annotation; forget
 * takes it back, and the watch showing the pod bound ends the assumption.
 */
static void test_state__assume_cpu_only_pod(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "c1", .cpu = "1500m"};
	pod_spec_t bound = {.uid = "c1", .cpu = "1500m", .node = "n1"};
	char *ann = (char *)"unset";
	ft_pod_t pod;

	apply_node(s, "n1");
	apply_node(s, "n2");
	decode_pod(&pod, &p);
	assert_int_equal(requested_cpu(s, "n1"), 0);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	assert_null(ann);
	assert_int_equal(requested_cpu(s, "n1"), 1500);
	assert_int_equal(gpus_used(s, "n1"), 0);
	assert_int_equal(assumed_count(s), 1);
	/* Again on the same node: nothing more. */
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	assert_int_equal(requested_cpu(s, "n1"), 1500);
	assert_int_equal(assumed_count(s), 1);

	ft_state_forget(s, "c1");
	assert_int_equal(requested_cpu(s, "n1"), 0);
	assert_int_equal(assumed_count(s), 0);

	/* Assumed on n2, then the watch shows it bound there: counted once,
	 * no longer assumed. */
	assert_int_equal(ft_state_assume(s, &pod, "n2", FT_POLICY_PACKED, &ann),
			 0);
	bound.node = "n2";
	apply_pod(s, &bound);
	assert_int_equal(requested_cpu(s, "n2"), 1500);
	assert_int_equal(requested_cpu(s, "n1"), 0);
	assert_int_equal(assumed_count(s), 0);
	/* A bound pod is not assumed again. */
	assert_int_equal(ft_state_assume(s, &pod, "n2", FT_POLICY_PACKED, &ann),
			 0);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(requested_cpu(s, "n2"), 1500);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

/* In snapshot mode confirm binds a requests-only assumption with no
 * allocation. */
static void test_state__confirm_cpu_only_pod(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "c1", .cpu = "2"};
	char *ann = NULL;
	ft_pod_t pod, got;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	ft_state_confirm(s, "c1");
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(requested_cpu(s, "n1"), 2000);
	assert_int_equal(ft_state_find_pod(s, "c1", &got), 0);
	assert_string_equal(got.node, "n1");
	assert_false(got.has_allocation);
	ft_pod_dispose(&got);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__assume_is_idempotent(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *first = NULL, *again = NULL;
	ft_pod_t pod;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(
	    ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &first), 0);
	assert_int_equal(
	    ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &again), 0);
	assert_string_equal(first, again);
	assert_int_equal(__builtin_popcount((unsigned)gpus_used(s, "n1")), 2);
	assert_int_equal(assumed_count(s), 1);
	free(first);
	free(again);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__two_assumes_are_disjoint(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p1 = {.uid = "p1", .gpus = 2}, p2 = {.uid = "p2", .gpus = 2};
	pod_spec_t p3 = {.uid = "p3", .gpus = 1};
	char *a1 = NULL, *a2 = NULL, *a3 = NULL;
	ft_pod_t pod1, pod2, pod3;

	apply_node(s, "n1");
	decode_pod(&pod1, &p1);
	decode_pod(&pod2, &p2);
	decode_pod(&pod3, &p3);
	assert_int_equal(ft_state_assume(s, &pod1, "n1", FT_POLICY_PACKED, &a1),
			 0);
	assert_int_equal(ft_state_assume(s, &pod2, "n1", FT_POLICY_PACKED, &a2),
			 0);
	assert_int_equal(
	    held_gpus(s, "n1", "p1", NULL) & held_gpus(s, "n1", "p2", NULL), 0);
	assert_int_equal(gpus_used(s, "n1"), 0xf);
	/* Full: the error names the node and the shortfall. */
	assert_int_equal(ft_state_assume(s, &pod3, "n1", FT_POLICY_PACKED, &a3),
			 FT_ENOTFOUND);
	assert_null(a3);
	assert_non_null(strstr(ft_error_last(), "node n1: "));
	assert_non_null(strstr(ft_error_last(), "at most 0 free GPUs"));
	assert_int_equal(assumed_count(s), 2);
	free(a1);
	free(a2);
	ft_pod_dispose(&pod1);
	ft_pod_dispose(&pod2);
	ft_pod_dispose(&pod3);
	ft_state_free(s);
}

static void test_state__assume_errors(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	pod_spec_t plain = {.uid = "p2", .cpu = "1"};
	cJSON *bare = node_object("bare", false);
	char *ann = NULL;
	ft_pod_t pod;

	apply_node(s, "n1");
	ft_state_apply_node(s, bare);
	decode_pod(&pod, &p);
	assert_int_equal(
	    ft_state_assume(s, &pod, "ghost", FT_POLICY_PACKED, &ann),
	    FT_ENOTFOUND);
	assert_string_equal(ft_error_last(), "node ghost: not in cache");
	assert_null(ann);
	assert_int_equal(assumed_count(s), 0);
	ft_pod_dispose(&pod);

	/* No devices asked: no annotation; only the requests are assumed
	 * (test_state__assume_cpu_only_pod). */
	decode_pod(&pod, &plain);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	assert_null(ann);
	assert_int_equal(assumed_count(s), 1);
	assert_int_equal(gpus_used(s, "n1"), 0);
	ft_pod_dispose(&pod);

	/* A node without topology: GPUs are not flextopo's to choose there,
	 * so a GPU pod gets no annotation either. */
	decode_pod(&pod, &p);
	assert_int_equal(
	    ft_state_assume(s, &pod, "bare", FT_POLICY_PACKED, &ann), 0);
	assert_null(ann);
	assert_int_equal(assumed_count(s), 2);
	ft_pod_dispose(&pod);
	cJSON_Delete(bare);
	ft_state_free(s);
}

static void test_state__watch_update_drops_assumption(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *ann = NULL;
	bool assumed = true;
	ft_pod_t pod;
	int held;

	apply_node(s, "n1");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	held = held_gpus(s, "n1", "p1", NULL);
	assert_int_equal(assumed_count(s), 1);

	/* The watch shows the annotation first, then the binding. */
	p.allocation = ann;
	apply_pod(s, &p);
	assert_int_equal(assumed_count(s), 1);
	assert_int_equal(gpus_used(s, "n1"), held);
	p.node = "n1";
	apply_pod(s, &p);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(held_gpus(s, "n1", "p1", &assumed), held);
	assert_false(assumed);
	assert_int_equal(gpus_used(s, "n1"), held);
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__watch_bound_elsewhere_drops_assumption(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	char *ann = NULL;
	ft_pod_t pod;

	apply_node(s, "n1");
	apply_node(s, "n2");
	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	/* Another scheduler bound it to n2, without our annotation. */
	p.node = "n2";
	apply_pod(s, &p);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(gpus_used(s, "n1"), 0);
	assert_int_equal(held_gpus(s, "n2", "p1", NULL), 0);
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

static void test_state__watch_allocation_takes_gpus(void **state)
{
	ft_state_t *s = state_new();
	char *a = allocation("n1", 0xc);
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	pod_spec_t q = {.uid = "q1", .gpus = 2};
	char *ann = NULL;
	ft_pod_t pod;

	apply_node(s, "n1");
	apply_pod(s, &p); /* pending */
	assert_int_equal(gpus_used(s, "n1"), 0);
	p.node = "n1";
	p.allocation = a;
	apply_pod(s, &p); /* bound by another replica of the extender */
	assert_int_equal(gpus_used(s, "n1"), 0xc);
	assert_int_equal(held_gpus(s, "n1", "p1", NULL), 0xc);

	/* A bind now gets the other pair. */
	decode_pod(&pod, &q);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	assert_int_equal(held_gpus(s, "n1", "q1", NULL), 0x3);
	free(ann);
	ft_pod_dispose(&pod);
	free(a);
	ft_state_free(s);
}

#define SEC UINT64_C(1000000000)

static unsigned unsettled_count(ft_state_t *s)
{
	ft_state_stats_t st;

	ft_state_stats(s, &st);
	return st.unsettled;
}

/* Assume `p` on n1 and say that its Binding, sent at `sent`, has an
 * unknown outcome; returns the GPUs it holds. */
static int assume_unknown(ft_state_t *s, const pod_spec_t *p, uint64_t sent)
{
	char *ann = NULL;
	ft_pod_t pod;

	decode_pod(&pod, p);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	ft_state_bind_unknown(s, p->uid, sent);
	free(ann);
	ft_pod_dispose(&pod);
	return held_gpus(s, "n1", p->uid, NULL);
}

/*
 * A bind of unknown outcome is still a bind: its GPUs stay held through a
 * later refusal, a relist without the pod and a read that shows it unbound
 * too early; it is never bound elsewhere meanwhile; and only a read after
 * bindSettleSeconds that still shows it unbound frees them.
 */
static void test_state__unknown_bind_stays_assumed(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 2};
	ft_pod_key_t *keys = NULL;
	unsigned n = 0;
	char *ann = NULL;
	ft_pod_t pod, seen;
	int held;

	apply_node(s, "n1");
	apply_node(s, "n2");
	held = assume_unknown(s, &p, 100 * SEC);
	assert_int_equal(unsettled_count(s), 1);
	ft_state_forget(s, "p1");
	ft_state_replace_begin(s, FT_KIND_POD);
	ft_state_replace_end(s, FT_KIND_POD);
	assert_int_equal(held_gpus(s, "n1", "p1", NULL), held);
	assert_int_equal(ft_state_unsettled(s, &keys, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(keys[0].uid, "p1");
	assert_string_equal(keys[0].ns, "ns");
	ft_pod_keys_free(keys, n);

	decode_pod(&pod, &p);
	assert_int_equal(ft_state_assume(s, &pod, "n2", FT_POLICY_PACKED, &ann),
			 FT_ECONFLICT);
	assert_non_null(strstr(ft_error_last(), "of unknown outcome"));
	assert_int_equal(gpus_used(s, "n2"), 0);

	decode_pod(&seen, &p); /* pending, unbound */
	assert_false(ft_state_bind_settle(s, "p1", &seen, 159 * SEC, 60 * SEC));
	assert_int_equal(held_gpus(s, "n1", "p1", NULL), held);
	assert_true(ft_state_bind_settle(s, "p1", &seen, 160 * SEC, 60 * SEC));
	assert_int_equal(gpus_used(s, "n1"), 0);
	assert_int_equal(assumed_count(s), 0);
	assert_int_equal(unsettled_count(s), 0);
	/* Settled, the pod may go anywhere. */
	assert_int_equal(ft_state_assume(s, &pod, "n2", FT_POLICY_PACKED, &ann),
			 0);
	free(ann);
	ft_pod_dispose(&seen);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

/* What a read of the pod shows settles the bind at once, early or not. */
static void test_state__unknown_bind_settles_by_the_pod(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t a = {.uid = "a", .gpus = 1}, b = {.uid = "b", .gpus = 1};
	pod_spec_t c = {.uid = "c", .gpus = 1}, d = {.uid = "d", .gpus = 1};
	ft_pod_t seen;
	int held_a, held_d;

	apply_node(s, "n1");
	held_a = assume_unknown(s, &a, 10 * SEC);
	assume_unknown(s, &b, 10 * SEC);
	assume_unknown(s, &c, 10 * SEC);
	held_d = assume_unknown(s, &d, 10 * SEC);
	assert_int_equal(unsettled_count(s), 4);

	/* a: bound to n1, the Binding landed; held until the watch shows it */
	a.node = "n1";
	decode_pod(&seen, &a);
	assert_true(ft_state_bind_settle(s, "a", &seen, 11 * SEC, 60 * SEC));
	ft_pod_dispose(&seen);
	assert_int_equal(held_gpus(s, "n1", "a", NULL), held_a);
	/* b: bound elsewhere, ours never lands */
	b.node = "n2";
	decode_pod(&seen, &b);
	assert_true(ft_state_bind_settle(s, "b", &seen, 11 * SEC, 60 * SEC));
	ft_pod_dispose(&seen);
	assert_int_equal(held_gpus(s, "n1", "b", NULL), -1);
	/* c: gone */
	assert_true(ft_state_bind_settle(s, "c", NULL, 11 * SEC, 60 * SEC));
	assert_int_equal(held_gpus(s, "n1", "c", NULL), -1);
	assert_int_equal(unsettled_count(s), 1);
	/* d: the watch shows it bound with its allocation */
	d.node = "n1";
	d.allocation = allocation("n1", (uint16_t)held_d);
	apply_pod(s, &d);
	free((char *)d.allocation);
	assert_int_equal(unsettled_count(s), 0);
	assert_int_equal(assumed_count(s), 1); /* a, until the watch */
	assert_int_equal(gpus_used(s, "n1"), held_a | held_d);
	ft_state_free(s);
}

static uint64_t conflicts_found(ft_state_t *s)
{
	ft_state_stats_t st;

	ft_state_stats(s, &st);
	return st.conflicts_found;
}

/*
 * Two pods bound with the same GPU: found once, however often the node is
 * rebuilt; the note names both pods and the unit; after one pod goes, the
 * pair is forgotten and a new one is found again.
 */
static void test_state__conflict_found_once(void **state)
{
	ft_state_t *s = state_new();
	char *gpu0 = allocation("n1", 0x1);
	pod_spec_t a = {
	    .uid = "a", .node = "n1", .gpus = 1, .allocation = gpu0};
	pod_spec_t b = {
	    .uid = "b", .node = "n1", .gpus = 1, .allocation = gpu0};
	pod_spec_t c = {
	    .uid = "c", .node = "n1", .gpus = 1, .allocation = gpu0};
	ft_conflict_note_t *notes = NULL;
	unsigned n = 0;

	apply_node(s, "n1");
	apply_pod(s, &a);
	apply_pod(s, &b);
	apply_pod(s, &b); /* a rewrite of b rebuilds the node */
	apply_node(s, "n1");
	assert_int_equal(conflicts_found(s), 1);
	assert_int_equal(gpus_used(s, "n1"), 0x1);
	ft_state_take_conflicts(s, &notes, &n);
	assert_int_equal(n, 1);
	assert_string_equal(notes[0].node, "n1");
	assert_string_equal(notes[0].units, "GPU 0 (n1-0)");
	assert_string_equal(notes[0].pods[0].uid, "a");
	assert_string_equal(notes[0].pods[1].uid, "b");
	assert_string_equal(notes[0].pods[1].ns, "ns");
	ft_conflict_notes_free(notes, n);
	ft_state_take_conflicts(s, &notes, &n);
	assert_int_equal(n, 0);
	assert_null(notes);

	delete_pod(s, &a);
	apply_pod(s, &c);
	assert_int_equal(conflicts_found(s), 2);
	ft_state_take_conflicts(s, &notes, &n);
	assert_int_equal(n, 1);
	assert_string_equal(notes[0].pods[0].uid, "b");
	assert_string_equal(notes[0].pods[1].uid, "c");
	/* Notes that could not be reported wait for the next round. */
	ft_state_requeue_conflicts(s, notes, n);
	ft_state_take_conflicts(s, &notes, &n);
	assert_int_equal(n, 1);
	assert_string_equal(notes[0].pods[1].uid, "c");
	ft_conflict_notes_free(notes, n);
	free(gpu0);
	ft_state_free(s);
}

static void test_state__observe_pod(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t p = {.uid = "p1", .gpus = 1};
	pod_spec_t newer = {.uid = "p1", .gpus = 3};
	ft_snapshot_t *s1, *s2;
	ft_pod_t pod, got;

	apply_node(s, "n1");
	s1 = ft_state_snapshot(s);
	decode_pod(&pod, &p);
	ft_state_observe_pod(s, &pod);
	assert_int_equal(ft_state_find_pod(s, "p1", &got), 0);
	assert_int_equal(got.demand.gpus, 1);
	ft_pod_dispose(&got);
	/* A pending pod links to no node: nothing rebuilt. */
	s2 = ft_state_snapshot(s);
	assert_ptr_equal(s1, s2);
	ft_snapshot_unref(s2);
	ft_pod_dispose(&pod);

	/* What the watch said wins over a later filter request. */
	apply_pod(s, &newer);
	decode_pod(&pod, &p);
	ft_state_observe_pod(s, &pod);
	assert_int_equal(ft_state_find_pod(s, "p1", &got), 0);
	assert_int_equal(got.demand.gpus, 3);
	ft_pod_dispose(&got);
	ft_pod_dispose(&pod);
	ft_snapshot_unref(s1);
	ft_state_free(s);
}

/*
 * The workload mix counts each pod once, when it is first placed: bound by
 * the watch or assumed by bind; updates, relinks and pods without GPUs add
 * nothing, and a window of 0 counts nothing.
 */
static void test_state__workload_mix(void **state)
{
	ft_state_t *s = state_new();
	pod_spec_t one = {.uid = "m1", .node = "n1", .gpus = 1};
	pod_spec_t two = {.uid = "m2", .gpus = 2};
	pod_spec_t cpu = {.uid = "m3", .node = "n1"};
	pod_spec_t pending = {.uid = "m4", .gpus = 1};
	char *ann = NULL;
	ft_mix_t mix;
	ft_pod_t pod;

	(void)state;
	ft_state_set_mix_window(s, 16);
	apply_node(s, "n1");
	apply_pod(s, &one);
	apply_pod(s, &one); /* an update */
	apply_pod(s, &cpu);
	apply_pod(s, &pending);
	decode_pod(&pod, &two);
	assert_int_equal(ft_state_assume(s, &pod, "n1", FT_POLICY_PACKED, &ann),
			 0);
	two.node = "n1";
	apply_pod(s, &two); /* the watch confirms the bind */
	ft_state_mix(s, &mix);
	assert_int_equal(mix.window, 16);
	assert_int_equal(mix.total, 2);
	assert_int_equal(mix.n_classes, 2);
	assert_int_equal(mix.classes[0].gpus, 1);
	assert_int_equal(mix.classes[1].gpus, 2);
	ft_state_set_mix_window(s, 0);
	apply_pod(s, &(pod_spec_t){.uid = "m5", .node = "n1", .gpus = 1});
	ft_state_mix(s, &mix);
	assert_int_equal(mix.total, 0);
	free(ann);
	ft_pod_dispose(&pod);
	ft_state_free(s);
}

/* ---- gangs --------------------------------------------------------------- */

/* Pod `p` in coscheduling gang `gang` (scheduling.x-k8s.io/pod-group). */
static void apply_member(ft_state_t *s, const pod_spec_t *p, const char *gang)
{
	cJSON *pod = pod_object(p);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");

	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "labels"),
				"scheduling.x-k8s.io/pod-group", gang);
	ft_state_apply_pod(s, pod);
	cJSON_Delete(pod);
}

static void apply_group(ft_state_t *s, const char *json, bool delete)
{
	cJSON *obj = ft_test_json(json);

	if (delete)
		ft_state_delete_pod_group(s, obj);
	else
		ft_state_apply_pod_group(s, obj);
	cJSON_Delete(obj);
}

/* The gang views of node `name`; the caller frees *gv. */
static const ft_node_t *views(ft_state_t *s, const char *name,
			      ft_snapshot_t **snap, ft_gang_view_t **gv)
{
	ft_pdb_view_t pdb;
	const ft_node_t *node;

	*snap = ft_state_snapshot(s);
	node = ft_snapshot_find(*snap, name);
	assert_non_null(node);
	*gv = malloc(sizeof(**gv));
	assert_non_null(*gv);
	ft_state_victim_views(s, node, &pdb, *gv);
	return node;
}

static unsigned gang_at(const ft_node_t *node, const ft_gang_view_t *gv,
			const char *uid)
{
	const ft_holding_t *h = ft_node_find_holding(node, uid);

	assert_non_null(h);
	return gv->of[h - node->holdings];
}

/*
 * The state's gangs as the victim search reads them: a label without its
 * PodGroup runs all or nothing, the PodGroup's minimum gives the slack, a
 * PodGroup that does not decode leaves the pods their own units, and only
 * running members elsewhere are costed there.
 */
static void test_state__gang_views(void **state)
{
	static const char group[] =
	    "{'apiVersion':'scheduling.x-k8s.io/v1alpha1','kind':'PodGroup','metadata':{'name':'g','namespace':'ns'},'spec':{'minMember':2}}";
	static const char bad[] =
	    "{'apiVersion':'scheduling.x-k8s.io/v1alpha1','kind':'PodGroup','metadata':{'name':'g','namespace':'ns'},'spec':{'minMember':-1}}";
	ft_state_t *s = state_new();
	char *a0 = allocation("n1", 1), *a1 = allocation("n1", 2);
	char *c0 = allocation("n2", 1), *d2 = allocation("n1", 4);
	pod_spec_t a = {"a", "n1", 1, NULL, false, a0, NULL};
	pod_spec_t b = {"b", "n1", 1, NULL, false, a1, NULL};
	pod_spec_t c = {"c", "n2", 1, NULL, false, c0, NULL};
	pod_spec_t d = {"d", "n1", 1, NULL, false, d2, NULL};
	pod_spec_t e = {"e", NULL, 1, NULL, false, NULL, NULL};
	ft_gang_describe_t desc;
	const ft_node_t *node;
	ft_snapshot_t *snap;
	ft_gang_view_t *gv;

	apply_node(s, "n1");
	apply_node(s, "n2");
	apply_member(s, &a, "g");
	apply_member(s, &b, "g");
	apply_member(s, &c, "g");
	apply_pod(s, &d);
	apply_member(s, &e, "g");

	node = views(s, "n1", &snap, &gv);
	assert_int_equal(gv->n_gangs, 1);
	assert_int_equal(gang_at(node, gv, "a"), 1);
	assert_int_equal(gang_at(node, gv, "b"), 1);
	assert_int_equal(gang_at(node, gv, "d"), 0);
	assert_true(gv->gangs[0].whole);
	assert_int_equal(gv->gangs[0].n_remote, 1); /* c; e is not running */
	free(gv);
	ft_snapshot_unref(snap);

	apply_group(s, group, false);
	node = views(s, "n1", &snap, &gv);
	assert_false(gv->gangs[0].whole);
	assert_int_equal(gv->gangs[0].slack, 1); /* 3 running, 2 needed */
	free(gv);
	ft_snapshot_unref(snap);
	assert_true(ft_state_describe_gang(s, "a", &desc));
	assert_int_equal(desc.source, FT_GANG_COSCHEDULING);
	assert_string_equal(desc.name, "ns/g");
	assert_true(desc.is_gang);
	assert_int_equal(desc.min, 2);
	assert_int_equal(desc.running, 3);
	assert_int_equal(desc.members, 4);

	apply_group(s, bad, false);
	node = views(s, "n1", &snap, &gv);
	assert_int_equal(gv->n_gangs, 0);
	assert_int_equal(gang_at(node, gv, "a"), 0);
	free(gv);
	ft_snapshot_unref(snap);

	apply_group(s, group, true);
	delete_pod(s, &c);
	node = views(s, "n1", &snap, &gv);
	assert_true(gv->gangs[0].whole);
	assert_int_equal(gv->gangs[0].n_remote, 0);
	free(gv);
	ft_snapshot_unref(snap);
	free(a0);
	free(a1);
	free(c0);
	free(d2);
	ft_state_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state__empty),
	    cmocka_unit_test(test_state__gang_views),
	    cmocka_unit_test(test_state__workload_mix),
	    cmocka_unit_test(test_state__apply_nodes_and_pods),
	    cmocka_unit_test(test_state__pod_before_its_node),
	    cmocka_unit_test(test_state__publish_builds_marked_nodes),
	    cmocka_unit_test(test_state__generations_and_sharing),
	    cmocka_unit_test(test_state__pods_without_devices_count_requests),
	    cmocka_unit_test(test_state__pinned_cpus_are_devices),
	    cmocka_unit_test(test_state__delete_pod_frees_gpus),
	    cmocka_unit_test(test_state__terminal_pod_frees_gpus),
	    cmocka_unit_test(
		test_state__pod_without_allocation_is_unknown_usage),
	    cmocka_unit_test(test_state__delete_node),
	    cmocka_unit_test(test_state__bad_objects_skipped),
	    cmocka_unit_test(
		test_state__replace_removes_what_was_not_announced),
	    cmocka_unit_test(test_state__replace_keeps_assumed_pods),
	    cmocka_unit_test(test_state__assume_and_forget),
	    cmocka_unit_test(test_state__assume_and_confirm),
	    cmocka_unit_test(test_state__assume_cpu_only_pod),
	    cmocka_unit_test(test_state__confirm_cpu_only_pod),
	    cmocka_unit_test(test_state__assume_is_idempotent),
	    cmocka_unit_test(test_state__two_assumes_are_disjoint),
	    cmocka_unit_test(test_state__assume_errors),
	    cmocka_unit_test(test_state__watch_update_drops_assumption),
	    cmocka_unit_test(
		test_state__watch_bound_elsewhere_drops_assumption),
	    cmocka_unit_test(test_state__watch_allocation_takes_gpus),
	    cmocka_unit_test(test_state__unknown_bind_stays_assumed),
	    cmocka_unit_test(test_state__unknown_bind_settles_by_the_pod),
	    cmocka_unit_test(test_state__conflict_found_once),
	    cmocka_unit_test(test_state__observe_pod),
	    cmocka_unit_test(test_state__snapshot_finds_every_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
