/*
 * The observed annotation (flextopo.io/observed) that the node agent
 * flextopo-node writes: its decoder over the golden fixtures shared with
 * the agent's Go tests (test/fixtures/observed), the pod decoder's fallback
 * to the allocation, the model's holdings of observed units and its drift,
 * the state's log lines (once per change) and the drift gauge.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include <flextopo/cluster.h>
#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/metrics.h>
#include <flextopo/state.h>

#include "support.h"

#define OBSERVED_DIR   FT_FIXTURES_DIR "/observed"
#define ALLOCATION_DIR FT_FIXTURES_DIR "/allocation"
#define PREFIX	       "annotation flextopo.io/observed: "

static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

/* ---- helpers ---------------------------------------------------------- */

/* The file's text without trailing white space, as the Go tests read it. */
static char *read_trimmed(const char *path)
{
	char *text = ft_test_read_file(path, NULL);
	size_t n;

	if (!text)
		fail_msg("cannot read %s", path);
	n = strlen(text);
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = '\0';
	return text;
}

typedef void (*fixture_fn)(const char *path, const char *text);

/*
 * Call `fn` on each *.json of <base>/<sub> whose name starts with `prefix`;
 * the count.
 */
static unsigned each_json(const char *base, const char *sub, const char *prefix,
			  fixture_fn fn)
{
	char dir[512], path[1024];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", base, sub);
	if (!(d = opendir(dir)))
		fail_msg("no fixtures in %s", dir);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char *text;
		if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0 ||
		    strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		text = read_trimmed(path);
		fn(path, text);
		free(text);
		n++;
	}
	closedir(d);
	return n;
}

/* Each *.json of test/fixtures/observed/<sub>. */
static unsigned each_fixture(const char *sub, fixture_fn fn)
{
	return each_json(OBSERVED_DIR, sub, "", fn);
}

/* A bound pod object with the given annotations (NULL: absent). */
static cJSON *pod_object(const char *node, const char *allocation,
			 const char *observed)
{
	cJSON *pod = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
	cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON *spec = cJSON_AddObjectToObject(pod, "spec");

	cJSON_AddStringToObject(meta, "name", "p");
	cJSON_AddStringToObject(meta, "namespace", "ns");
	cJSON_AddStringToObject(meta, "uid", "uid-p");
	if (allocation)
		cJSON_AddStringToObject(ann, "flextopo.io/allocation",
					allocation);
	if (observed)
		cJSON_AddStringToObject(ann, "flextopo.io/observed", observed);
	if (node)
		cJSON_AddStringToObject(spec, "nodeName", node);
	cJSON_AddArrayToObject(spec, "containers");
	return pod;
}

static void decode_pod(ft_pod_t *out, const char *node, const char *allocation,
		       const char *observed)
{
	cJSON *obj = pod_object(node, allocation, observed);

	assert_int_equal(ft_codec_pod_decode(out, obj, &opts), 0);
	cJSON_Delete(obj);
}

static void add_uuids(char **dst, unsigned *n, const char *const *uuids)
{
	for (unsigned i = 0; uuids && uuids[i]; i++)
		assert_non_null(dst[(*n)++] = strdup(uuids[i]));
}

/*
 * Add units for model tests: GPU and MIG uuids (NULL-terminated lists, or
 * NULL) and set the CPUs (NULL: left as they are).
 */
static void set_units(ft_allocation_t *a, const char *const *gpus,
		      const char *const *mig, const char *cpus)
{
	add_uuids(a->gpu_uuids, &a->n_gpus, gpus);
	add_uuids(a->mig_uuids, &a->n_mig, mig);
	if (cpus)
		assert_int_equal(ft_cpuset_parse(&a->cpus, cpus), 0);
}

static void add_replicas(ft_allocation_t *a, const char *gpu, uint8_t count)
{
	assert_non_null(a->replica_gpus[a->n_replicas] = strdup(gpu));
	a->replica_counts[a->n_replicas++] = count;
}

/* A pod bound to node "n" holding `gpus` and `cpus` by its allocation. */
static void pod_with(ft_pod_t *out, const char *uid, const char *const *gpus,
		     const char *cpus)
{
	ft_test_pod(out, uid, 0, gpus, cpus, 0);
	out->allocation.level = FT_LEVEL_NVLINK;
}

/* ...and observed by flextopo-node on `node` with these units. */
static void observe(ft_pod_t *pod, const char *node, const char *const *gpus,
		    const char *const *mig, const char *cpus)
{
	assert_non_null(pod->observed = calloc(1, sizeof(*pod->observed)));
	pod->observed->source = FT_OBSERVED_PODRESOURCES;
	assert_non_null(pod->observed->node = strdup(node));
	set_units(&pod->observed->units, gpus, mig, cpus);
}

/* ---- codec: the golden fixtures --------------------------------------- */

static void decodes(const char *path, const char *text)
{
	ft_observed_t o;
	ft_pod_t pod;

	if (ft_codec_observed_decode(&o, text) != 0)
		fail_msg("%s: %s", path, ft_error_last());
	assert_non_null(o.node);
	ft_observed_dispose(&o);
	decode_pod(&pod, "n1", NULL, text);
	assert_non_null(pod.observed);
	assert_null(pod.observed_error);
	ft_pod_dispose(&pod);
}

static void test_observed__golden_valid(void **state)
{
	assert_true(each_fixture("valid", decodes) >= 5);
}

static void rejects(const char *path, const char *text)
{
	char errpath[1024];
	char *want;
	ft_observed_t o;
	ft_pod_t pod;

	snprintf(errpath, sizeof(errpath), "%.*s.error",
		 (int)(strlen(path) - 5), path);
	want = read_trimmed(errpath);
	assert_int_equal(ft_codec_observed_decode(&o, text), FT_EINVAL);
	if (!strstr(ft_error_last(), want))
		fail_msg("%s: error \"%s\", want one containing \"%s\"", path,
			 ft_error_last(), want);
	assert_null(o.node);
	assert_int_equal(o.units.n_gpus, 0);
	/* In a pod: recorded, named, and the pod still decodes. */
	decode_pod(&pod, "n1", NULL, text);
	assert_null(pod.observed);
	assert_non_null(pod.observed_error);
	assert_memory_equal(pod.observed_error, PREFIX, strlen(PREFIX));
	assert_non_null(strstr(pod.observed_error, want));
	ft_pod_dispose(&pod);
	free(want);
}

static void test_observed__golden_invalid(void **state)
{
	assert_true(each_fixture("invalid", rejects) >= 10);
}

static void allocation_decodes(const char *path, const char *text)
{
	ft_allocation_t a;

	if (ft_codec_allocation_decode(&a, text) != 0)
		fail_msg("%s: %s", path, ft_error_last());
	ft_allocation_dispose(&a);
}

static void allocation_rejects(const char *path, const char *text)
{
	char errpath[1024];
	ft_allocation_t a;
	char *want;

	snprintf(errpath, sizeof(errpath), "%.*s.error",
		 (int)(strlen(path) - 5), path);
	want = read_trimmed(errpath);
	assert_int_equal(ft_codec_allocation_decode(&a, text), FT_EINVAL);
	if (!strstr(ft_error_last(), want))
		fail_msg("%s: error \"%s\", want one containing \"%s\"", path,
			 ft_error_last(), want);
	free(want);
}

/*
 * The allocation fixtures the node agent's reader is tested on
 * (node/alloc): every valid one decodes here too, and the dra key
 * is held to the same rules with the same messages. (The extender reads
 * the rest of the annotation more leniently: it wrote it.)
 */
static void test_observed__allocation_golden(void **state)
{
	assert_true(
	    each_json(ALLOCATION_DIR, "valid", "", allocation_decodes) >= 6);
	assert_true(each_json(ALLOCATION_DIR, "invalid", "dra-",
			      allocation_rejects) >= 6);
}

static void test_observed__fields(void **state)
{
	char *text =
	    read_trimmed(OBSERVED_DIR "/valid/nri-whole-gpus-pinned.json");
	ft_cpuset_t want;
	ft_observed_t o;

	assert_int_equal(ft_codec_observed_decode(&o, text), 0);
	assert_string_equal(o.node, "a100-0");
	assert_int_equal(o.source, FT_OBSERVED_NRI);
	assert_int_equal(o.units.n_gpus, 2);
	assert_string_equal(o.units.gpu_uuids[0], "GPU-a100-0002");
	assert_string_equal(o.units.gpu_uuids[1], "GPU-a100-0003");
	assert_int_equal(o.units.n_mig, 0);
	assert_int_equal(o.units.n_replicas, 0);
	assert_int_equal(ft_cpuset_parse(&want, "16-23"), 0);
	assert_true(ft_cpuset_equal(&o.units.cpus, &want));
	ft_observed_dispose(&o);
	free(text);

	text = read_trimmed(OBSERVED_DIR "/valid/shared-replicas.json");
	assert_int_equal(ft_codec_observed_decode(&o, text), 0);
	assert_int_equal(o.source, FT_OBSERVED_PODRESOURCES);
	assert_string_equal(ft_observed_source_name(o.source), "podresources");
	assert_int_equal(o.units.n_replicas, 2);
	assert_string_equal(o.units.replica_gpus[0], "GPU-a100-0000");
	assert_int_equal(o.units.replica_counts[0], 3);
	assert_int_equal(o.units.replica_counts[1], 1);
	assert_true(ft_cpuset_empty(&o.units.cpus));
	ft_observed_dispose(&o);
	free(text);

	text = read_trimmed(OBSERVED_DIR "/valid/mig-two-containers.json");
	assert_int_equal(ft_codec_observed_decode(&o, text), 0);
	assert_int_equal(o.units.n_mig, 2);
	assert_string_equal(o.units.mig_uuids[1],
			    "MIG-66666666-7777-8888-9999-000000000000");
	ft_observed_dispose(&o);
	free(text);
}

/* A pod's copy carries the observation, its error and source along. */
static void test_observed__pod_copy(void **state)
{
	ft_pod_t pod, copy;

	decode_pod(
	    &pod, "n1", NULL,
	    "{\"version\":1,\"node\":\"n1\",\"source\":\"nri\",\"gpus\":[\"GPU-a\"],\"mig\":[\"MIG-b\"],\"replicas\":[{\"gpu\":\"GPU-c\",\"count\":2}],\"cpuset\":\"1-2\"}");
	assert_non_null(pod.observed);
	assert_int_equal(ft_pod_copy(&copy, &pod), 0);
	assert_non_null(copy.observed);
	assert_string_equal(copy.observed->node, "n1");
	assert_int_equal(copy.observed->source, FT_OBSERVED_NRI);
	assert_string_equal(copy.observed->units.mig_uuids[0], "MIG-b");
	assert_string_equal(copy.observed->units.replica_gpus[0], "GPU-c");
	assert_ptr_not_equal(copy.observed, pod.observed);
	assert_ptr_not_equal(copy.observed->node, pod.observed->node);
	assert_true(ft_allocation_same_units(&copy.observed->units,
					     &pod.observed->units));
	ft_pod_dispose(&copy);
	ft_pod_dispose(&pod);

	decode_pod(&pod, "n1", NULL, "{\"version\":3}");
	assert_int_equal(ft_pod_copy(&copy, &pod), 0);
	assert_string_equal(copy.observed_error, pod.observed_error);
	ft_pod_dispose(&copy);
	ft_pod_dispose(&pod);
}

/* ---- model: what a pod holds ------------------------------------------ */

static const char *const g01[] = {"G-0", "G-1", NULL};
static const char *const g10[] = {"G-1", "G-0", NULL};
static const char *const g23[] = {"G-2", "G-3", NULL};
static const char *const g0[] = {"G-0", NULL};
static const char *const g1[] = {"G-1", NULL};
static const char *const g2[] = {"G-2", NULL};

static void test_observed__replaces_allocation(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("G");
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	const ft_holding_t *h;
	ft_cpuset_t want;
	ft_node_t *node;

	pod_with(&pod, "p", g01, "0-1");
	observe(&pod, "n", g23, NULL, "8-9");
	assert_true(ft_pod_holds_observed(&pod));
	assert_true(ft_pod_drifted(&pod));
	node = ft_test_node("n", t, pods);
	h = &node->holdings[0];
	assert_int_equal(h->gpus, 0xc);
	assert_int_equal(node->gpus_used, 0xc);
	assert_int_equal(ft_cpuset_parse(&want, "8-9"), 0);
	assert_true(ft_cpuset_equal(&h->cpus, &want));
	assert_true(ft_cpuset_equal(&node->cpus_used, &want));
	assert_int_equal(h->numa_nodes, 0x2);
	/* The level is the allocation's; the levels reached, the units'. */
	assert_int_equal(h->level, FT_LEVEL_NVLINK);
	assert_true(h->levels & (1u << FT_LEVEL_NVLINK));
	assert_true(h->observed);
	assert_int_equal(h->observed_source, FT_OBSERVED_PODRESOURCES);
	/* What the allocation named stays visible, held by no one. */
	assert_non_null(h->expected);
	assert_int_equal(h->expected->gpus, 0x3);
	assert_int_equal(ft_cpuset_parse(&want, "0-1"), 0);
	assert_true(ft_cpuset_equal(&h->expected->cpus, &want));
	assert_int_equal(h->expected->unknown, 0);
	assert_int_equal(node->drifted, 1);
	assert_int_equal(node->conflicts, 0);
	assert_int_equal(ft_node_free_gpus(node), 0x3);
	ft_node_unref(node);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

/*
 * Placed without flextopo (no allocation): it holds what it was given, and
 * counts as drift (flextopo expected nothing of it) while it holds units.
 */
static void test_observed__observed_only(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("G");
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	ft_node_t *node;

	ft_test_pod(&pod, "p", 0, NULL, NULL, 1); /* 1 GPU, no allocation */
	observe(&pod, "n", g2, NULL, "");
	assert_true(ft_pod_drifted(&pod));
	node = ft_test_node("n", t, pods);
	assert_int_equal(node->holdings[0].gpus, 0x4);
	assert_int_equal(node->holdings[0].unknown_gpus, 0);
	assert_int_equal(node->holdings[0].level, FT_LEVEL_NODE);
	assert_true(node->holdings[0].observed);
	assert_non_null(node->holdings[0].expected);
	assert_int_equal(node->holdings[0].expected->gpus, 0);
	assert_int_equal(node->unknown_gpus, 0);
	assert_int_equal(node->drifted, 1);
	ft_node_unref(node);
	ft_pod_dispose(&pod);

	/* Observed holding nothing: nothing to drift from. */
	ft_test_pod(&pod, "p", 0, NULL, NULL, 0);
	observe(&pod, "n", NULL, NULL, "");
	assert_false(ft_pod_drifted(&pod));
	node = ft_test_node("n", t, pods);
	assert_int_equal(node->drifted, 0);
	ft_node_unref(node);
	ft_pod_dispose(&pod);

	/* Without a topology the observed units are of unknown placement. */
	ft_test_pod(&pod, "p", 0, NULL, NULL, 0);
	observe(&pod, "n", g23, NULL, "4-6");
	node = ft_test_node("n", NULL, pods);
	assert_int_equal(node->unknown_gpus, 2);
	assert_int_equal(node->unknown_cpus, 3);
	ft_node_unref(node);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

static bool drifted(const char *const *alloc_gpus, const char *alloc_cpus,
		    const char *const *obs_gpus, const char *obs_cpus)
{
	ft_pod_t pod;
	bool d;

	pod_with(&pod, "p", alloc_gpus, alloc_cpus);
	observe(&pod, "n", obs_gpus, NULL, obs_cpus);
	d = ft_pod_drifted(&pod);
	ft_pod_dispose(&pod);
	return d;
}

static void test_observed__drift(void **state)
{
	assert_false(drifted(g01, "0-3", g01, "0-3"));
	/* Sets: order, and how a cpulist is written, do not matter. */
	assert_false(drifted(g01, "0-3", g10, "3,0-2"));
	assert_true(drifted(g01, "0-3", g23, "0-3"));
	assert_true(drifted(g01, "0-3", g0, "0-3"));
	assert_true(drifted(g01, "0-3", g01, "4-7"));
	/* Pinned by the allocation, on the shared pool on the node. */
	assert_true(drifted(g01, "0-3", g01, ""));
	assert_false(drifted(g01, NULL, g01, ""));
}

static void test_observed__drift_mig_and_replicas(void **state)
{
	static const char *const mig_a[] = {"MIG-a", "MIG-b", NULL};
	static const char *const mig_b[] = {"MIG-b", "MIG-a", NULL};
	static const char *const mig_c[] = {"MIG-a", "MIG-c", NULL};
	ft_pod_t pod;

	pod_with(&pod, "p", NULL, "0");
	set_units(&pod.allocation, NULL, mig_a, NULL);
	observe(&pod, "n", NULL, mig_b, "0");
	assert_false(ft_pod_drifted(&pod));
	ft_pod_dispose(&pod);

	pod_with(&pod, "p", NULL, "0");
	set_units(&pod.allocation, NULL, mig_a, NULL);
	observe(&pod, "n", NULL, mig_c, "0");
	assert_true(ft_pod_drifted(&pod));
	ft_pod_dispose(&pod);

	pod_with(&pod, "p", NULL, "0");
	add_replicas(&pod.allocation, "G-0", 3);
	add_replicas(&pod.allocation, "G-1", 1);
	observe(&pod, "n", NULL, NULL, "0");
	add_replicas(&pod.observed->units, "G-1", 1);
	add_replicas(&pod.observed->units, "G-0", 3);
	assert_false(ft_pod_drifted(&pod));
	pod.observed->units.replica_counts[1] = 2;
	assert_true(ft_pod_drifted(&pod));
	ft_pod_dispose(&pod);
}

/* MIG instances held are the observed ones. */
static void test_observed__mig_holding(void **state)
{
	static const char *const mig_0a[] = {"MIG-0a", NULL};
	static const char *const mig_1a[] = {"MIG-1a", NULL};
	ft_topology_t *t = ft_test_topology_mig();
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	ft_node_t *node;
	int a = ft_topology_find_mig_uuid(t, "MIG-0a");
	int b = ft_topology_find_mig_uuid(t, "MIG-1a");

	pod_with(&pod, "p", NULL, NULL);
	set_units(&pod.allocation, NULL, mig_0a, NULL);
	pod.has_allocation = true;
	observe(&pod, "n", NULL, mig_1a, NULL);
	node = ft_test_node("n", t, pods);
	assert_true(ft_node_mig_used(node, (unsigned)b));
	assert_false(ft_node_mig_used(node, (unsigned)a));
	assert_non_null(node->holdings[0].expected);
	assert_true((node->holdings[0].expected->mig[a / 64] >> (a % 64)) & 1);
	ft_node_unref(node);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

/* An observation for another node is not about this binding. */
static void test_observed__node_mismatch_ignored(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("G");
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	ft_node_t *node;

	pod_with(&pod, "p", g01, NULL);
	observe(&pod, "other", g23, NULL, NULL);
	assert_false(ft_pod_holds_observed(&pod));
	assert_false(ft_pod_drifted(&pod));
	node = ft_test_node("n", t, pods);
	assert_int_equal(node->holdings[0].gpus, 0x3);
	assert_false(node->holdings[0].observed);
	assert_int_equal(node->drifted, 0);
	ft_node_unref(node);
	ft_pod_dispose(&pod);

	/* Not bound (yet): nothing observed applies. */
	pod_with(&pod, "p", g01, NULL);
	observe(&pod, "n", g23, NULL, NULL);
	free(pod.node);
	pod.node = NULL;
	assert_false(ft_pod_holds_observed(&pod));
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

/* Two pods observed on one GPU: the model shows the double claim. */
static void test_observed__collision_visible(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("G");
	ft_pod_t a, b;
	ft_pod_t *pods[] = {&a, &b, NULL};
	ft_node_t *node;

	pod_with(&a, "a", g0, NULL);
	pod_with(&b, "b", g1, NULL);
	observe(&b, "n", g0, NULL, NULL);
	node = ft_test_node("n", t, pods);
	assert_int_equal(node->conflicts, 1);
	assert_int_equal(node->gpus_used, 0x1);
	assert_int_equal(node->drifted, 1);
	ft_node_unref(node);
	ft_pod_dispose(&a);
	ft_pod_dispose(&b);
	ft_topology_unref(t);
}

/* A malformed observation leaves the pod on its allocation. */
static void test_observed__malformed_falls_back(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("G");
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	ft_node_t *node;

	decode_pod(
	    &pod, "n",
	    "{\"version\":1,\"node\":\"n\",\"level\":\"nvlink\",\"mode\":\"guaranteed\",\"gpus\":[\"G-0\",\"G-1\"],\"gpuIndexes\":[0,1],\"mig\":[],\"cpuset\":\"0-1\",\"numaNodes\":[0],\"memoryMiB\":0}",
	    "{\"version\":1,\"node\":\"n\",\"source\":\"nri\",\"gpus\":[\"G-2\",\"G-2\"],\"mig\":[],\"cpuset\":\"\"}");
	assert_true(pod.has_allocation);
	assert_null(pod.allocation_error);
	assert_null(pod.observed);
	assert_string_equal(pod.observed_error,
			    PREFIX "gpus[1]: G-2 listed twice");
	node = ft_test_node("n", t, pods);
	assert_int_equal(node->holdings[0].gpus, 0x3);
	assert_false(node->holdings[0].observed);
	assert_int_equal(node->drifted, 0);
	ft_node_unref(node);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

static void test_observed__units_text(void **state)
{
	char buf[256], small[12];
	ft_pod_t pod;

	pod_with(&pod, "p", g01, "0-3,8");
	assert_string_equal(
	    ft_allocation_units_text(buf, sizeof(buf), &pod.allocation),
	    "gpus [G-0,G-1] cpuset \"0-3,8\"");
	add_replicas(&pod.allocation, "G-3", 2);
	set_units(&pod.allocation, NULL, (const char *const[]){"M", NULL}, "");
	assert_string_equal(
	    ft_allocation_units_text(buf, sizeof(buf), &pod.allocation),
	    "gpus [G-0,G-1] mig [M] replicas [G-3:2] cpuset \"\"");
	ft_allocation_units_text(small, sizeof(small), &pod.allocation);
	assert_string_equal(small, "gpus [G-0,G");
	ft_pod_dispose(&pod);
}

/* ---- state: log lines and the drift count ----------------------------- */

static const char topology[] =
    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-7\",\"memoryMiB\":65536,\"pcieSwitches\":[{\"id\":0,\"gpus\":[{\"index\":0,\"uuid\":\"G-0\"},{\"index\":1,\"uuid\":\"G-1\"},{\"index\":2,\"uuid\":\"G-2\"}]}]}]}]}";

static const char allocation01[] =
    "{\"version\":1,\"node\":\"n\",\"level\":\"numa\",\"mode\":\"guaranteed\",\"gpus\":[\"G-0\",\"G-1\"],\"gpuIndexes\":[0,1],\"mig\":[],\"cpuset\":\"0-1\",\"numaNodes\":[0],\"memoryMiB\":0}";

static void apply_pod(ft_state_t *s, const char *allocation,
		      const char *observed)
{
	cJSON *pod = pod_object("n", allocation, observed);

	ft_state_apply_pod(s, pod);
	cJSON_Delete(pod);
}

/* Run the state's log lines into a file; count those containing `text`. */
typedef struct {
	int saved;
	FILE *file;
} capture_t;

static void capture_start(capture_t *c)
{
	fflush(stderr);
	assert_non_null(c->file = tmpfile());
	c->saved = dup(STDERR_FILENO);
	assert_true(dup2(fileno(c->file), STDERR_FILENO) >= 0);
	ft_log_set_level(FT_LOG_INFO);
}

static unsigned capture_count(capture_t *c, const char *text)
{
	char line[4096];
	unsigned n = 0;

	fflush(stderr);
	rewind(c->file);
	while (fgets(line, sizeof(line), c->file))
		n += strstr(line, text) != NULL;
	return n;
}

static void capture_stop(capture_t *c)
{
	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	fclose(c->file);
	ft_log_set_level(FT_LOG_ERROR);
}

static unsigned drifted_in(ft_state_t *s)
{
	ft_snapshot_t *snap = ft_state_snapshot(s);
	unsigned n = 0;

	for (unsigned i = 0; i < snap->n_nodes; i++)
		n += snap->nodes[i]->drifted;
	ft_snapshot_unref(snap);
	return n;
}

static ft_state_t *state_with_node(void)
{
	cJSON *node = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
	ft_state_t *s = NULL;

	cJSON_AddStringToObject(meta, "name", "n");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
				"flextopo.io/topology", topology);
	assert_int_equal(ft_state_new(&s, &opts), 0);
	ft_state_apply_node(s, node);
	cJSON_Delete(node);
	return s;
}

static void test_observed__state_logs_once_per_change(void **state)
{
	static const char drift[] = "differ from allocation";
	static const char obs2[] =
	    "{\"version\":1,\"node\":\"n\",\"source\":\"nri\",\"gpus\":[\"G-1\",\"G-2\"],\"mig\":[],\"cpuset\":\"0-1\"}";
	static const char obs1[] =
	    "{\"version\":1,\"node\":\"n\",\"source\":\"nri\",\"gpus\":[\"G-2\"],\"mig\":[],\"cpuset\":\"0-1\"}";
	static const char same[] =
	    "{\"version\":1,\"node\":\"n\",\"source\":\"nri\",\"gpus\":[\"G-1\",\"G-0\"],\"mig\":[],\"cpuset\":\"1,0\"}";
	ft_state_t *s = state_with_node();
	capture_t c;

	capture_start(&c);
	apply_pod(s, allocation01, obs2);
	assert_int_equal(capture_count(&c, drift), 1);
	assert_int_equal(
	    capture_count(
		&c,
		"pod ns/p on node n: observed gpus [G-1,G-2] cpuset \\\"0-1\\\" differ from allocation gpus [G-0,G-1] cpuset \\\"0-1\\\"; holding the observed units (source nri)"),
	    1);
	assert_int_equal(drifted_in(s), 1);
	/* The agent rewrites it, a relist brings it again: no new line. */
	apply_pod(s, allocation01, obs2);
	apply_pod(s, allocation01, obs2);
	assert_int_equal(capture_count(&c, drift), 1);
	/* Other units: one more. */
	apply_pod(s, allocation01, obs1);
	assert_int_equal(capture_count(&c, drift), 2);
	/* Back in line with the allocation: said once, at info. */
	apply_pod(s, allocation01, same);
	apply_pod(s, allocation01, same);
	assert_int_equal(capture_count(&c, drift), 2);
	assert_int_equal(capture_count(&c, "no drift any more"), 1);
	assert_int_equal(drifted_in(s), 0);
	/* Malformed: warned once per change of the fault. */
	apply_pod(s, allocation01, "{\"version\":2}");
	apply_pod(s, allocation01, "{\"version\":2}");
	assert_int_equal(capture_count(&c, "observed annotation ignored"), 1);
	assert_int_equal(capture_count(&c, "version: required key missing"), 0);
	assert_int_equal(capture_count(&c, "node: required key missing"), 1);
	apply_pod(s, allocation01, "{}");
	assert_int_equal(capture_count(&c, "observed annotation ignored"), 2);
	capture_stop(&c);
	ft_state_free(s);
}

/* A pod that asks for nothing flextopo tracks still holds what it got. */
static void test_observed__state_links_observed_only(void **state)
{
	ft_state_t *s = state_with_node();
	ft_snapshot_t *snap;
	const ft_node_t *node;

	apply_pod(
	    s, NULL,
	    "{\"version\":1,\"node\":\"n\",\"source\":\"podresources\",\"gpus\":[\"G-2\"],\"mig\":[],\"cpuset\":\"\"}");
	snap = ft_state_snapshot(s);
	node = ft_snapshot_find(snap, "n");
	assert_non_null(node);
	assert_int_equal(node->n_holdings, 1);
	assert_int_equal(node->gpus_used, 0x4);
	assert_true(node->holdings[0].observed);
	assert_int_equal(node->drifted, 1); /* held without an allocation */
	ft_snapshot_unref(snap);
	ft_state_free(s);
}

/* ---- metrics ---------------------------------------------------------- */

static void test_observed__metric(void **state)
{
	ft_metrics_gauges_t g = {
	    .version = "v", .commit = "c", .drift_pods = 3};
	char *text = NULL;

	assert_int_equal(ft_metrics_render(&text, NULL, &g), 0);
	assert_non_null(strstr(text, "# TYPE flextopo_drift_pods gauge\n"));
	assert_non_null(strstr(text, "\nflextopo_drift_pods 3\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_observed__golden_valid),
	    cmocka_unit_test(test_observed__golden_invalid),
	    cmocka_unit_test(test_observed__allocation_golden),
	    cmocka_unit_test(test_observed__fields),
	    cmocka_unit_test(test_observed__pod_copy),
	    cmocka_unit_test(test_observed__replaces_allocation),
	    cmocka_unit_test(test_observed__observed_only),
	    cmocka_unit_test(test_observed__drift),
	    cmocka_unit_test(test_observed__drift_mig_and_replicas),
	    cmocka_unit_test(test_observed__mig_holding),
	    cmocka_unit_test(test_observed__node_mismatch_ignored),
	    cmocka_unit_test(test_observed__collision_visible),
	    cmocka_unit_test(test_observed__malformed_falls_back),
	    cmocka_unit_test(test_observed__units_text),
	    cmocka_unit_test(test_observed__state_logs_once_per_change),
	    cmocka_unit_test(test_observed__state_links_observed_only),
	    cmocka_unit_test(test_observed__metric),
	};

	ft_log_set_level(FT_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
