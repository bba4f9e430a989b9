/*
 * The debug API and /metrics through real HTTP requests (libcurl over
 * loopback): an application loaded from test/fixtures/cluster/small.yaml
 * serves the extender routes on one ft_server and the debug listener
 * started by ft_app_debug_start() on another, as flextopo-extender does with
 * debugListen set. Verbs sent to the extender listener must show up in the
 * decision log, and explain must leave the state exactly as it was.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <flextopo/app.h>
#include <flextopo/codec.h>
#include <flextopo/debug.h>
#include <flextopo/debugview.h>
#include <flextopo/error.h>
#include <flextopo/upkeep.h>

#include "fakeapi.h"
#include "support.h"

#define CLUSTER		  FT_FIXTURES_DIR "/cluster/small.yaml"
#define MIG_CLUSTER	  FT_FIXTURES_DIR "/cluster/mig.yaml"
#define SHARED_CLUSTER	  FT_FIXTURES_DIR "/cluster/shared.yaml"
#define OBS_CLUSTER	  FT_FIXTURES_DIR "/cluster/observed.yaml"
#define DRA_CLUSTER	  FT_FIXTURES_DIR "/cluster/dra.yaml"
#define UID_B2		  "00000000-0000-4000-8000-0000000000b2"
#define TOPOLOGY_FIXTURES FT_FIXTURES_DIR "/topology"

typedef struct {
	ft_app_t app;
	unsigned main_port;
	unsigned debug_port;
} fixture_t;

typedef struct {
	long status;
	char content_type[128];
	char *body;
	size_t len;
} reply_t;

/* ---- fixture ---- */

/* An application serving the cluster of `path` on both listeners. */
static int setup_cluster(void **state, const char *path)
{
	fixture_t *fx = calloc(1, sizeof(*fx));
	ft_server_options_t opts = {
	    .listen = "127.0.0.1:0", .max_body_bytes = 1 << 20, .threads = 2};

	assert_non_null(fx);
	assert_int_equal(ft_config_init(&fx->app.cfg), 0);
	assert_int_equal(ft_config_set(&fx->app.cfg, "logLevel", "error"), 0);
	assert_int_equal(
	    ft_config_set(&fx->app.cfg, "debugListen", "127.0.0.1:0"), 0);
	assert_int_equal(ft_app_init(&fx->app), 0);
	if (ft_app_load_snapshot(&fx->app, path) < 0)
		fail_msg("%s: %s", path, ft_error_last());
	assert_int_equal(ft_server_new(&fx->app.server, &opts), 0);
	assert_int_equal(ft_app_routes(&fx->app, fx->app.server), 0);
	assert_int_equal(ft_server_start(fx->app.server), 0);
	assert_int_equal(ft_app_debug_start(&fx->app), 0);
	assert_non_null(fx->app.debug_server);
	fx->main_port = ft_server_port(fx->app.server);
	fx->debug_port = ft_server_port(fx->app.debug_server);
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_cluster(state, CLUSTER);
}

static int setup_mig(void **state)
{
	return setup_cluster(state, MIG_CLUSTER);
}

static int setup_shared(void **state)
{
	return setup_cluster(state, SHARED_CLUSTER);
}

static int setup_observed(void **state)
{
	return setup_cluster(state, OBS_CLUSTER);
}

static int setup_dra(void **state)
{
	return setup_cluster(state, DRA_CLUSTER);
}

static int teardown(void **state)
{
	fixture_t *fx = *state;

	ft_app_dispose(&fx->app);
	free(fx);
	return 0;
}

/* ---- client ---- */

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
	reply_t *r = userdata;
	char *body = realloc(r->body, r->len + size * n + 1);

	if (!body)
		return 0;
	memcpy(body + r->len, data, size * n);
	r->body = body;
	r->len += size * n;
	r->body[r->len] = '\0';
	return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
	reply_t *r = userdata;
	size_t len = size * n;
	static const char name[] = "Content-Type: ";

	if (len > sizeof(name) - 1 &&
	    strncasecmp(data, name, sizeof(name) - 1) == 0)
		snprintf(r->content_type, sizeof(r->content_type), "%.*s",
			 (int)(len - (sizeof(name) - 1) - 2),
			 data + sizeof(name) - 1);
	return len;
}

/* Run `curl` (set up to write into *r) and free it and `headers`. */
static void perform(CURL *curl, struct curl_slist *headers, reply_t *r)
{
	assert_int_equal(curl_easy_perform(curl), CURLE_OK);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	if (!r->body)
		r->body = strdup("");
}

/* `method` `path` on `port`; a body is sent as application/json. */
static reply_t http(unsigned port, const char *method, const char *path,
		    const char *body)
{
	CURL *curl = curl_easy_init();
	struct curl_slist *headers = NULL;
	reply_t r;
	char url[512];

	memset(&r, 0, sizeof(r));
	assert_non_null(curl);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
	if (body) {
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	}
	perform(curl, headers, &r);
	return r;
}

/* GET or POST, expect `status` and JSON; returns the parsed body. */
static cJSON *json_call(unsigned port, const char *method, const char *path,
			const char *body, long status)
{
	reply_t r = http(port, method, path, body);
	cJSON *json = cJSON_Parse(r.body);

	if (r.status != status || !json)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body);
	assert_string_equal(r.content_type, "application/json");
	free(r.body);
	return json;
}

static const cJSON *at(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!item)
		fail_msg("no key %s", key);
	return item;
}

static const char *str(const cJSON *obj, const char *key)
{
	const cJSON *item = at(obj, key);

	assert_true(cJSON_IsString(item));
	return item->valuestring;
}

static double num(const cJSON *obj, const char *key)
{
	const cJSON *item = at(obj, key);

	assert_true(cJSON_IsNumber(item));
	return item->valuedouble;
}

/* The element of array `arr` whose `key` is the string `value`. */
static const cJSON *find(const cJSON *arr, const char *key, const char *value)
{
	const cJSON *item;

	cJSON_ArrayForEach (item, arr) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, key);
		if (cJSON_IsString(v) && strcmp(v->valuestring, value) == 0)
			return item;
	}
	fail_msg("no element with %s=%s", key, value);
	return NULL;
}

static unsigned count(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* `item` printed compactly must be `expected`. */
static void expect_json(const cJSON *item, const char *expected)
{
	char *text = cJSON_PrintUnformatted(item);

	assert_non_null(text);
	assert_string_equal(text, expected);
	free(text);
}

/* ---- nodes ---- */

static void test_debug__nodes(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    json_call(fx->debug_port, "GET", "/debug/nodes", NULL, 200);
	const cJSON *nodes = at(root, "nodes"), *row;

	assert_int_equal(cJSON_GetArraySize(nodes), 7);
	assert_string_equal(str(cJSON_GetArrayItem(nodes, 0), "name"),
			    "a100-0");
	row = find(nodes, "name", "pairs-free");
	assert_true(cJSON_IsTrue(at(row, "hasTopology")));
	assert_int_equal(num(at(row, "gpus"), "total"), 4);
	assert_int_equal(num(at(row, "gpus"), "used"), 1);
	assert_int_equal(num(at(row, "gpus"), "free"), 3);
	/* The free NVLink pair (2,3) is the largest free block at nvlink. */
	assert_int_equal(
	    num(at(at(row, "levels"), "nvlink"), "largestFreeGpus"), 2);
	row = find(nodes, "name", "a100-0");
	assert_int_equal(num(at(row, "cpus"), "used"), 8);
	assert_int_equal(
	    num(at(at(row, "levels"), "nvlink"), "largestFreeGpus"), 5);
	row = find(nodes, "name", "broken-0");
	assert_false(cJSON_IsTrue(at(row, "hasTopology")));
	assert_non_null(strstr(str(row, "topologyError"), "cpulist"));
	row = find(nodes, "name", "h100-0");
	assert_int_equal(num(at(row, "mig"), "total"), 11);
	cJSON_Delete(root);
}

/*
 * Fragmentation per node under the workload mix of small.yaml's bound pods
 * (1 GPU x3, one of them with 2 pinned CPUs, 3 GPUs with 8: two classes, by
 * GPU shape): on pairs-free every
 * class still fits; on h100-0 no class asks MIG, so every free slice is
 * stranded and a fragment.
 */
static void test_debug__nodes_fragmentation(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    json_call(fx->debug_port, "GET", "/debug/nodes", NULL, 200);
	const cJSON *mix = at(root, "workloadMix"), *row, *f;

	assert_int_equal(num(mix, "window"), 64);
	assert_int_equal(num(mix, "pods"), 4);
	assert_int_equal(cJSON_GetArraySize(at(mix, "classes")), 2);
	/* Each class's requests: every pod counted once, unweighed here. */
	for (const cJSON *k = at(mix, "classes")->child; k; k = k->next) {
		int shares = 0;
		for (const cJSON *pt = at(k, "requests")->child; pt;
		     pt = pt->next) {
			shares += (int)num(pt, "share");
			assert_true(num(pt, "weight") == 1);
			assert_non_null(at(pt, "cpuMillicores"));
			assert_non_null(at(pt, "memoryMiB"));
		}
		assert_int_equal(shares, num(k, "pods"));
	}
	row = find(at(root, "nodes"), "name", "pairs-free");
	f = at(row, "fragmentation");
	expect_json(
	    f,
	    "{\"freeGpus\":3,\"fragmentedGpus\":0,\"wholeGpusFree\":3,\"largestFreeBlock\":{\"nvlink\":2,\"pcie-switch\":2,\"numa\":2,\"socket\":3,\"node\":3},\"migSlicesFree\":0,\"migSlicesStranded\":0,\"replicasFree\":0}");
	f = at(find(at(root, "nodes"), "name", "h100-0"), "fragmentation");
	assert_true(num(f, "migSlicesFree") > 0);
	assert_int_equal(num(f, "migSlicesStranded"), num(f, "migSlicesFree"));
	assert_true(num(f, "fragmentedGpus") >= num(f, "migSlicesFree") / 8);
	cJSON_Delete(root);
}

static void test_debug__node_tree(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    json_call(fx->debug_port, "GET", "/debug/nodes/a100-0", NULL, 200);
	const cJSON *numa, *gpus, *holder;

	assert_string_equal(str(root, "name"), "a100-0");
	numa = cJSON_GetArrayItem(
	    at(cJSON_GetArrayItem(at(root, "sockets"), 0), "numaNodes"), 0);
	assert_string_equal(str(numa, "cpus"), "0-63");
	assert_string_equal(str(numa, "freeCpus"), "8-63");
	gpus = at(cJSON_GetArrayItem(at(numa, "pcieSwitches"), 0), "gpus");
	holder = at(cJSON_GetArrayItem(gpus, 0), "heldBy");
	/* A GPU that is not shared has no replica keys. */
	assert_null(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(gpus, 0), "replicasHeldBy"));
	assert_string_equal(str(holder, "name"), "holder-a");
	assert_int_equal(num(holder, "priority"), 100);
	holder = find(at(root, "holdings"), "name", "holder-a");
	assert_int_equal(cJSON_GetArraySize(at(holder, "gpus")), 3);
	assert_string_equal(str(holder, "cpus"), "0-7");
	assert_int_equal(cJSON_GetArraySize(at(root, "nvlinks")), 28);
	cJSON_Delete(root);
}

static void test_debug__node_errors(void **state)
{
	fixture_t *fx = *state;
	reply_t r;

	cJSON_Delete(
	    json_call(fx->debug_port, "GET", "/debug/nodes/nope", NULL, 404));
	cJSON_Delete(
	    json_call(fx->debug_port, "GET", "/debug/nodes/", NULL, 404));
	cJSON_Delete(json_call(fx->debug_port, "GET",
			       "/debug/nodes/a100-0/gpus", NULL, 404));
	cJSON_Delete(json_call(fx->debug_port, "GET",
			       "/debug/nodes/a100-0?format=png", NULL, 400));
	r = http(fx->debug_port, "DELETE", "/debug/nodes/a100-0", NULL);
	assert_int_equal(r.status, 405);
	free(r.body);
	/* The debug API is not on the extender's listener. */
	r = http(fx->main_port, "GET", "/debug/nodes", NULL);
	assert_int_equal(r.status, 404);
	free(r.body);
}

static void test_debug__node_svg(void **state)
{
	fixture_t *fx = *state;
	reply_t r =
	    http(fx->debug_port, "GET", "/debug/nodes/a100-0?format=svg", NULL);
	reply_t again =
	    http(fx->debug_port, "GET", "/debug/nodes/a100-0?format=svg", NULL);

	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "image/svg+xml");
	assert_true(strncmp(r.body, "<?xml", 5) == 0);
	assert_non_null(
	    strstr(r.body, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	assert_string_equal(r.body + r.len - 7, "</svg>\n");
	assert_int_equal(count(r.body, "class=\"socket\""), 2);
	assert_int_equal(count(r.body, "class=\"numa\""), 2);
	assert_int_equal(count(r.body, "class=\"pcie-switch\""), 4);
	assert_int_equal(count(r.body, "class=\"gpu\""), 8);
	assert_int_equal(count(r.body, "class=\"core\""), 128);
	assert_int_equal(count(r.body, "class=\"nvlink-group\""), 1);
	assert_non_null(strstr(r.body, "train/holder-a"));
	assert_int_equal(count(r.body, "<text"), count(r.body, "</text>"));
	assert_int_equal(count(r.body, "<title>"), count(r.body, "</title>"));
	/* Deterministic: the same node draws the same bytes. */
	assert_string_equal(r.body, again.body);
	free(r.body);
	free(again.body);
	r = http(fx->debug_port, "GET", "/debug/nodes/h100-0?format=svg", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(count(r.body, "class=\"mig\""), 11);
	free(r.body);
	r = http(fx->debug_port, "GET", "/debug/nodes/bare-0?format=svg", NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "no topology"));
	free(r.body);
}

/* The GPU of nvidia-smi index `index` under a PCIe switch of a node's tree. */
static const cJSON *tree_gpu(const cJSON *node, int index)
{
	const cJSON *so, *numa, *sw, *gpu;

	cJSON_ArrayForEach (so, at(node, "sockets")) {
		cJSON_ArrayForEach (numa, at(so, "numaNodes")) {
			cJSON_ArrayForEach (sw, at(numa, "pcieSwitches")) {
				cJSON_ArrayForEach (gpu, at(sw, "gpus")) {
					if (num(gpu, "index") == index)
						return gpu;
				}
			}
		}
	}
	fail_msg("no GPU %d", index);
	return NULL;
}

/*
 * shared.yaml: holder-2x08 holds 8 of the 10 replicas of GPUs 2 and 3; the
 * tree says so per GPU and the picture draws 8/10 on them, 0/10 on 0 and 1.
 */
static void test_debug__node_shared_replicas(void **state)
{
	fixture_t *fx = *state;
	cJSON *root = json_call(fx->debug_port, "GET",
				"/debug/nodes/h100-shared", NULL, 200);
	const cJSON *gpu = tree_gpu(root, 2);
	reply_t r;

	assert_int_equal(num(gpu, "replicas"), 10);
	assert_int_equal(num(gpu, "replicasUsed"), 8);
	assert_true(cJSON_IsNull(at(gpu, "heldBy")));
	expect_json(
	    at(gpu, "replicasHeldBy"),
	    "[{\"namespace\":\"serve\",\"name\":\"holder-2x08\",\"uid\":\"00000000-0000-4000-8000-0000000002a0\",\"priority\":0,\"assumed\":false,\"count\":8}]");
	gpu = tree_gpu(root, 0);
	assert_int_equal(num(gpu, "replicasUsed"), 0);
	expect_json(at(gpu, "replicasHeldBy"), "[]");
	/* The holding lists its replicas per GPU too. */
	expect_json(
	    at(find(at(root, "holdings"), "name", "holder-2x08"), "replicas"),
	    "[{\"gpu\":2,\"count\":8},{\"gpu\":3,\"count\":8}]");
	cJSON_Delete(root);

	r = http(fx->debug_port, "GET", "/debug/nodes/h100-shared?format=svg",
		 NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(count(r.body, "class=\"replica-bar\""), 4);
	assert_int_equal(count(r.body, "class=\"replicas\""), 2);
	assert_int_equal(count(r.body, ">8/10 replicas</text>"), 2);
	assert_int_equal(count(r.body, ">0/10 replicas</text>"), 2);
	assert_int_equal(
	    count(
		r.body,
		"<title>8 of 10 replicas held by serve/holder-2x08 (priority 0)"),
	    2);
	assert_non_null(strstr(r.body, "81559 MiB, shared"));
	assert_non_null(strstr(r.body, "CPUs, 16 replicas"));
	free(r.body);
}

static void test_debug__svg_escapes_names(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("GPU-x");
	const char *gpus[] = {"GPU-x-0", NULL};
	ft_pod_t pod;
	ft_pod_t *pods[] = {&pod, NULL};
	ft_node_t *node;
	char *svg = NULL;

	ft_test_pod(&pod, "a<b&\"c'", 5, gpus, "0-1", 0);
	node = ft_test_node("n<1>", t, pods);
	assert_int_equal(ft_codec_node_svg(&svg, node), 0);
	assert_non_null(strstr(svg, "a&lt;b&amp;&quot;c&apos;"));
	assert_non_null(strstr(svg, "n&lt;1&gt;"));
	assert_null(strstr(svg, "a<b"));
	assert_int_equal(count(svg, "class=\"gpu\""), 4);
	/* Two NVLink pairs: arcs, no group bar. */
	assert_int_equal(count(svg, "class=\"nvlink\""), 2);
	assert_int_equal(count(svg, "class=\"nvlink-group\""), 0);
	free(svg);
	ft_node_unref(node);
	ft_pod_dispose(&pod);
	ft_topology_unref(t);
}

/* What a FlexTopo graph leaves unknown is drawn as unknown. */
static void test_debug__svg_unknown_locality_and_memory(void **state)
{
	ft_topology_t *t = ft_test_topology_fixture("graph-socket-gpus.json");
	ft_node_t *node = ft_test_node("n", t, NULL);
	char *svg = NULL;

	assert_int_equal(ft_codec_node_svg(&svg, node), 0);
	assert_int_equal(count(svg, "class=\"gpu\""), 4);
	assert_int_equal(count(svg, "class=\"unplaced\""), 2);
	assert_int_equal(count(svg, ">NUMA node unknown<"), 1);
	assert_int_equal(
	    count(svg, ">GPU locality unknown (no socket or NUMA node)<"), 1);
	assert_non_null(strstr(svg, "NUMA 2: CPUs 8-15, 64 GiB,"));
	free(svg);
	ft_node_unref(node);
	ft_topology_unref(t);
	t = ft_test_topology_fixture("graph-no-memory.json");
	node = ft_test_node("n", t, NULL);
	assert_int_equal(ft_codec_node_svg(&svg, node), 0);
	assert_non_null(strstr(svg, "NUMA 0: CPUs 0-7, memory unknown,"));
	assert_int_equal(count(svg, "class=\"unplaced\""), 0);
	free(svg);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* ---- golden topology fixtures (test/fixtures/topology/README.md) ---- */

/* The members of a node's debug view that show how its topology was read. */
static const char *const model_keys[] = {
    "memoryMiB", "levels", "sockets", "unplacedGpus", "nvlinks", "domains",
};

static cJSON *model_view(ft_topology_t *t)
{
	ft_node_t *node = ft_test_node("n", t, NULL);
	cJSON *view = NULL, *out = cJSON_CreateObject();
	char *json = NULL;

	assert_int_equal(ft_codec_debug_node(&json, node, NULL), 0);
	assert_non_null(view = cJSON_Parse(json));
	for (unsigned i = 0; i < sizeof(model_keys) / sizeof(*model_keys); i++)
		if (cJSON_HasObjectItem(view, model_keys[i]))
			cJSON_AddItemToObject(
			    out, model_keys[i],
			    cJSON_DetachItemFromObjectCaseSensitive(
				view, model_keys[i]));
	cJSON_Delete(view);
	free(json);
	ft_node_unref(node);
	return out;
}

/* `text` without the newlines at its end. */
static void chomp(char *text)
{
	size_t len = strlen(text);

	while (len && text[len - 1] == '\n')
		text[--len] = '\0';
}

/* Does case `name` ("<case>.json") give its error or its model view? */
static bool error_matches(const char *name, int rc, const char *want)
{
	if (rc == 0) {
		printf("      %s: parsed, expected \"%s\"\n", name, want);
		return false;
	}
	if (strcmp(ft_error_last(), want) != 0) {
		printf("      %s: \"%s\", expected \"%s\"\n", name,
		       ft_error_last(), want);
		return false;
	}
	return true;
}

static bool view_matches(const char *name, const char *path, ft_topology_t *t)
{
	cJSON *got = model_view(t), *want = NULL;
	char *got_text = cJSON_Print(got), *want_text = NULL;
	size_t len = 0;
	bool ok;

	want_text = ft_test_read_file(path, &len);
	want = want_text ? cJSON_Parse(want_text) : NULL;
	ok = want && cJSON_Compare(want, got, true);
	if (!ok)
		printf("      %s: the model view differs from %s; got:\n%s\n",
		       name, path, got_text);
	cJSON_Delete(want);
	cJSON_Delete(got);
	free(want_text);
	free(got_text);
	return ok;
}

static bool run_fixture(const char *name)
{
	char path[1024], *want = NULL;
	size_t len = 0, stem = strlen(name) - strlen(".json");
	ft_topology_t *t = NULL;
	char *json;
	bool ok;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", TOPOLOGY_FIXTURES, name);
	assert_non_null(json = ft_test_read_file(path, &len));
	rc = ft_codec_topology_parse(&t, json, len);
	free(json);
	snprintf(path, sizeof(path), "%s/%.*s.error", TOPOLOGY_FIXTURES,
		 (int)stem, name);
	if ((want = ft_test_read_file(path, &len))) {
		chomp(want);
		ok = error_matches(name, rc, want);
		free(want);
		ft_topology_unref(t);
		return ok;
	}
	if (rc != 0) {
		printf("      %s: %s\n", name, ft_error_last());
		return false;
	}
	snprintf(path, sizeof(path), "%s/%.*s.expected.json", TOPOLOGY_FIXTURES,
		 (int)stem, name);
	ok = view_matches(name, path, t);
	ft_topology_unref(t);
	return ok;
}

static int is_case(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return len > 5 && strcmp(e->d_name + len - 5, ".json") == 0 &&
	       (len < 14 || strcmp(e->d_name + len - 14, ".expected.json"));
}

static void test_debug__topology_fixtures(void **state)
{
	struct dirent **cases = NULL;
	int n = scandir(TOPOLOGY_FIXTURES, &cases, is_case, alphasort);
	unsigned failed = 0;

	assert_true(n >= 6);
	for (int i = 0; i < n; i++) {
		failed += !run_fixture(cases[i]->d_name);
		free(cases[i]);
	}
	free(cases);
	assert_int_equal(failed, 0);
}

/* ---- explain ---- */

static const char explain_pod[] =
    "{\"metadata\":{\"name\":\"chat\",\"namespace\":\"online\",\"annotations\":{\"flextopo.io/affinity\":\"nvlink\"}},\"spec\":{\"priority\":1000,\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"2\"},\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}";

static void test_debug__explain_changes_nothing(void **state)
{
	fixture_t *fx = *state;
	ft_snapshot_t *before = ft_state_snapshot(fx->app.state), *after;
	ft_state_stats_t st0, st1;
	uint64_t decisions = ft_decisions_total(fx->app.decisions);
	const cJSON *nodes, *node, *victims;
	cJSON *root;

	ft_state_stats(fx->app.state, &st0);
	root = json_call(fx->debug_port, "POST", "/debug/explain", explain_pod,
			 200);
	nodes = at(root, "nodes");
	assert_int_equal(cJSON_GetArraySize(nodes), 7);
	assert_int_equal(num(root, "generation"), (double)before->generation);
	node = find(nodes, "node", "pairs-free");
	assert_string_equal(str(node, "verdict"), "fit");
	assert_string_equal(str(at(node, "placement"), "level"), "nvlink");
	assert_int_equal(cJSON_GetArraySize(at(at(node, "placement"), "gpus")),
			 2);
	assert_int_equal(
	    cJSON_GetArrayItem(at(at(node, "placement"), "gpus"), 0)->valueint,
	    2);
	node = find(nodes, "node", "pairs-busy");
	assert_string_equal(str(node, "verdict"), "unfit");
	assert_true(cJSON_IsNull(at(node, "placement")));
	assert_true(cJSON_IsTrue(at(at(node, "preemption"), "found")));
	victims = at(at(node, "preemption"), "pods");
	assert_int_equal(cJSON_GetArraySize(victims), 1);
	assert_string_equal(str(cJSON_GetArrayItem(victims, 0), "uid"), UID_B2);
	node = find(nodes, "node", "rtx4090-0");
	assert_string_equal(str(node, "verdict"), "unresolvable");
	assert_true(cJSON_IsNull(at(node, "preemption")));
	cJSON_Delete(root);

	/* Nothing changed: same snapshot, same state, nothing recorded. */
	after = ft_state_snapshot(fx->app.state);
	ft_state_stats(fx->app.state, &st1);
	assert_ptr_equal(before, after);
	assert_int_equal(st0.generation, st1.generation);
	assert_int_equal(st0.pods, st1.pods);
	assert_int_equal(st0.assumed, st1.assumed);
	assert_int_equal(ft_decisions_total(fx->app.decisions), decisions);
	ft_snapshot_unref(before);
	ft_snapshot_unref(after);
}

static void test_debug__explain_options_and_errors(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    json_call(fx->debug_port, "POST", "/debug/explain?node=pairs-free",
		      explain_pod, 200);
	char wrapped[1024];

	assert_int_equal(cJSON_GetArraySize(at(root, "nodes")), 1);
	cJSON_Delete(root);
	snprintf(wrapped, sizeof(wrapped), "{\"Pod\":%s}", explain_pod);
	root =
	    json_call(fx->debug_port, "POST", "/debug/explain", wrapped, 200);
	assert_string_equal(str(at(root, "pod"), "name"), "chat");
	cJSON_Delete(root);
	cJSON_Delete(json_call(fx->debug_port, "POST",
			       "/debug/explain?node=nope", explain_pod, 404));
	cJSON_Delete(json_call(fx->debug_port, "POST", "/debug/explain",
			       "not json", 400));
	cJSON_Delete(
	    json_call(fx->debug_port, "POST", "/debug/explain", "[]", 400));
	cJSON_Delete(json_call(
	    fx->debug_port, "POST", "/debug/explain",
	    "{\"metadata\":{\"name\":\"x\",\"annotations\":{\"flextopo.io/affinity\":\"rack\"}},\"spec\":{\"containers\":[]}}",
	    400));
}

/* A pod spec of `resources` (JSON members) with `annotations`. */
static char *explain_body(const char *annotations, const char *resources)
{
	char *body = NULL;

	assert_true(
	    asprintf(
		&body,
		"{\"metadata\":{\"name\":\"units\",\"namespace\":\"t\",\"annotations\":{%s}},\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":{%s},\"limits\":{%s}}}]}}",
		annotations, resources, resources) > 0);
	return body;
}

static cJSON *explain_units(fixture_t *fx, const char *annotations,
			    const char *resources)
{
	char *body = explain_body(annotations, resources);
	cJSON *root =
	    json_call(fx->debug_port, "POST", "/debug/explain", body, 200);

	free(body);
	return root;
}

#define REQUIRES_40GI_FP8                                                      \
	"\"flextopo.io/requires\":\"{\\\"memoryPerGpu\\\":\\\"40Gi\\\","       \
	"\\\"precision\\\":[\\\"fp8\\\"]}\""

/*
 * mig.yaml with memoryPerGpu 40Gi and fp8 on one nvidia.com/gpu: the whole
 * H100s of the mixed node match, the 1g.10gb instances of a single-strategy
 * node lack memory, the RTX 4090s lack memory and fp8.
 */
static void test_debug__explain_units_requires(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    explain_units(fx, REQUIRES_40GI_FP8, "\"nvidia.com/gpu\":\"1\"");
	const cJSON *nodes = at(root, "nodes"), *units, *unit;

	units = at(find(nodes, "node", "h100-mixed"), "units");
	expect_json(
	    units,
	    "[{\"kind\":\"gpu\",\"gpu\":2,\"uuid\":\"GPU-mixed-2\",\"free\":true,\"matches\":true,\"failures\":[]},{\"kind\":\"gpu\",\"gpu\":3,\"uuid\":\"GPU-mixed-3\",\"free\":true,\"matches\":true,\"failures\":[]}]");
	units = at(find(nodes, "node", "h100-single-1g"), "units");
	assert_int_equal(cJSON_GetArraySize(units), 14);
	cJSON_ArrayForEach (unit, units) {
		assert_string_equal(str(unit, "profile"), "1g.10gb");
		assert_false(cJSON_IsTrue(at(unit, "matches")));
		expect_json(
		    at(unit, "failures"),
		    "[{\"capability\":\"memoryPerGpu\",\"asked\":40960,\"actual\":10240,\"reason\":\"memoryPerGpu 40Gi: 10240 MiB\"}]");
	}
	unit = cJSON_GetArrayItem(units, 13);
	assert_string_equal(str(unit, "uuid"), "MIG-s1g-1-6");
	assert_int_equal(num(unit, "gpu"), 1);
	units = at(find(nodes, "node", "h100-single-3g"), "units");
	assert_int_equal(cJSON_GetArraySize(units), 4);
	cJSON_ArrayForEach (unit, units)
		assert_true(cJSON_IsTrue(at(unit, "matches")));
	units = at(find(nodes, "node", "rtx4090-box"), "units");
	assert_int_equal(cJSON_GetArraySize(units), 8);
	expect_json(
	    cJSON_GetArrayItem(units, 7),
	    "{\"kind\":\"gpu\",\"gpu\":7,\"uuid\":\"GPU-8f9a4164-3544-78ff-e57f-5c5ca08bfeb7\",\"free\":true,\"matches\":false,\"failures\":[{\"capability\":\"memoryPerGpu\",\"asked\":40960,\"actual\":24564,\"reason\":\"memoryPerGpu 40Gi: 24564 MiB\"},{\"capability\":\"precision\",\"asked\":[\"fp8\"],\"actual\":[],\"reason\":\"precision fp8: not supported by NVIDIA GeForce RTX 4090 (not in the MIG catalog)\"}]}");
	cJSON_Delete(root);
}

/*
 * MIG instances are listed for a MIG demand even without requires (the
 * held one not free); whole GPUs without requires are not listed.
 */
/*
 * A 1-GPU pod: on pairs-free it would leave too few GPUs for the 3-GPU pods
 * of the mix (a quarter of the mix loses 2 GPUs: +0.5), so it ranks below
 * a100-0, where seven GPUs stay and nothing changes, and scores lower.
 */
static void test_debug__explain_fragmentation(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    explain_units(fx, "", "\"cpu\":\"1\",\"nvidia.com/gpu\":\"1\"");
	const cJSON *nodes = at(root, "nodes");

	expect_json(at(find(nodes, "node", "pairs-free"), "fragmentation"),
		    "{\"deltaGpus\":0.5}");
	expect_json(at(find(nodes, "node", "a100-0"), "fragmentation"),
		    "{\"deltaGpus\":0}");
	assert_null(cJSON_GetObjectItem(find(nodes, "node", "bare-0"),
					"fragmentation"));
	assert_true(num(find(nodes, "node", "a100-0"), "rank") >
		    num(find(nodes, "node", "pairs-free"), "rank"));
	assert_true(num(find(nodes, "node", "a100-0"), "score") >
		    num(find(nodes, "node", "pairs-free"), "score"));
	assert_true(cJSON_IsNull(at(find(nodes, "node", "bare-0"), "rank")));
	/* The mix as weighed for this pod: too few nodes for any scarcity. */
	assert_int_equal(num(at(root, "workloadMix"), "pods"), 4);
	for (const cJSON *k = at(at(root, "workloadMix"), "classes")->child; k;
	     k = k->next)
		for (const cJSON *pt = at(k, "requests")->child; pt;
		     pt = pt->next)
			assert_true(num(pt, "weight") == 1);
	cJSON_Delete(root);
}

static void test_debug__explain_units_mig(void **state)
{
	fixture_t *fx = *state;
	cJSON *root = explain_units(
	    fx,
	    "\"flextopo.io/requires\":\"{\\\"interconnect\\\":\\\"nvlink\\\"}\"",
	    "\"nvidia.com/mig-1g.10gb\":\"1\"");
	const cJSON *nodes = at(root, "nodes"), *units;

	units = at(find(nodes, "node", "h100-mixed"), "units");
	assert_int_equal(cJSON_GetArraySize(units), 4);
	expect_json(
	    cJSON_GetArrayItem(units, 0),
	    "{\"kind\":\"mig\",\"gpu\":1,\"uuid\":\"MIG-mixed-1-0\",\"profile\":\"1g.10gb\",\"free\":false,\"matches\":false,\"failures\":[{\"capability\":\"interconnect\",\"asked\":\"nvlink\",\"actual\":\"pcie\",\"reason\":\"interconnect nvlink: MIG instances share no NVLink\"}]}");
	assert_true(cJSON_IsTrue(at(cJSON_GetArrayItem(units, 3), "free")));
	/* No instance of the profile: an empty list says so. */
	expect_json(at(find(nodes, "node", "rtx4090-box"), "units"), "[]");
	cJSON_Delete(root);
	root = explain_units(fx, "", "\"nvidia.com/mig-3g.40gb\":\"1\"");
	units = at(find(at(root, "nodes"), "node", "h100-mixed"), "units");
	assert_int_equal(cJSON_GetArraySize(units), 3);
	assert_true(cJSON_IsTrue(at(cJSON_GetArrayItem(units, 2), "matches")));
	cJSON_Delete(root);
	root = explain_units(fx, "", "\"nvidia.com/gpu\":\"1\"");
	assert_null(cJSON_GetObjectItemCaseSensitive(
	    find(at(root, "nodes"), "node", "h100-mixed"), "units"));
	cJSON_Delete(root);
}

/*
 * shared.yaml: 2 ranks of 0.8 GPU with nvlink affinity. GPUs 2 and 3 have
 * 2 replicas left, too few for a rank; the placement takes 8 replicas of
 * GPUs 0 and 1.
 */
static void test_debug__explain_units_shared(void **state)
{
	fixture_t *fx = *state;
	cJSON *root = explain_units(
	    fx,
	    "\"flextopo.io/affinity\":\"nvlink\",\"flextopo.io/gpu-fraction\":\"0.8\"",
	    "\"nvidia.com/gpu.shared\":\"2\"");
	const cJSON *node = find(at(root, "nodes"), "node", "h100-shared");

	assert_string_equal(str(node, "verdict"), "fit");
	expect_json(at(at(node, "placement"), "replicas"),
		    "[{\"gpu\":0,\"count\":8},{\"gpu\":1,\"count\":8}]");
	expect_json(
	    at(node, "units"),
	    "[{\"kind\":\"shared\",\"gpu\":0,\"uuid\":\"GPU-shared-0\",\"replicas\":10,\"replicasFree\":10,\"free\":true,\"matches\":true,\"failures\":[]},{\"kind\":\"shared\",\"gpu\":1,\"uuid\":\"GPU-shared-1\",\"replicas\":10,\"replicasFree\":10,\"free\":true,\"matches\":true,\"failures\":[]},{\"kind\":\"shared\",\"gpu\":2,\"uuid\":\"GPU-shared-2\",\"replicas\":10,\"replicasFree\":2,\"free\":false,\"matches\":true,\"failures\":[]},{\"kind\":\"shared\",\"gpu\":3,\"uuid\":\"GPU-shared-3\",\"replicas\":10,\"replicasFree\":2,\"free\":false,\"matches\":true,\"failures\":[]}]");
	cJSON_Delete(root);
}

/* ---- decisions and pods ---- */

static char *fixture_text(const char *rel)
{
	char *text = ft_test_read_fixture(rel, NULL);

	assert_non_null(text);
	return text;
}

/* filter, prioritize, bind and preempt on the extender listener. */
static void run_verbs(fixture_t *fx)
{
	static const char pod[] =
	    "{\"Pod\":{\"metadata\":{\"name\":\"waiting-pair\",\"namespace\":\"train\",\"uid\":\"00000000-0000-4000-8000-000000000001\"},\"spec\":{\"containers\":[]}},\"NodeNames\":[\"a100-0\",\"pairs-free\",\"bare-0\"]}";
	static const char bind[] =
	    "{\"PodName\":\"waiting-pair\",\"PodNamespace\":\"train\",\"PodUID\":\"00000000-0000-4000-8000-000000000001\",\"Node\":\"a100-0\"}";
	char *preempt = fixture_text("wire/preempt/nvlink-meta.request.json");

	cJSON_Delete(json_call(fx->main_port, "POST", "/filter", pod, 200));
	cJSON_Delete(json_call(fx->main_port, "POST", "/prioritize", pod, 200));
	cJSON_Delete(json_call(fx->main_port, "POST", "/bind", bind, 200));
	cJSON_Delete(
	    json_call(fx->main_port, "POST", "/preempt", preempt, 200));
	free(preempt);
}

static void test_debug__decisions_of_the_verbs(void **state)
{
	fixture_t *fx = *state;
	const cJSON *list, *d, *row;
	cJSON *root;

	run_verbs(fx);
	root = json_call(fx->debug_port, "GET", "/debug/decisions?limit=4",
			 NULL, 200);
	assert_int_equal(num(root, "capacity"), 1024);
	assert_int_equal(num(root, "total"), 4);
	list = at(root, "decisions");
	assert_int_equal(cJSON_GetArraySize(list), 4);
	assert_string_equal(str(cJSON_GetArrayItem(list, 0), "verb"),
			    "preempt");
	assert_string_equal(str(cJSON_GetArrayItem(list, 3), "verb"), "filter");
	d = cJSON_GetArrayItem(list, 3);
	assert_int_equal(num(d, "nodesTotal"), 3);
	assert_int_equal(num(at(d, "counts"), "pass"), 3);
	d = cJSON_GetArrayItem(list, 1);
	assert_string_equal(str(d, "verb"), "bind");
	assert_false(cJSON_IsTrue(at(d, "failed")));
	assert_string_equal(str(at(d, "placement"), "level"), "nvlink");
	assert_int_equal(cJSON_GetArraySize(at(at(d, "placement"), "gpus")), 2);
	d = cJSON_GetArrayItem(list, 0);
	row = find(at(d, "nodes"), "node", "pairs-busy");
	assert_string_equal(str(row, "verdict"), "kept");
	assert_string_equal(str(row, "level"), "nvlink");
	row = find(at(d, "victims"), "uid", UID_B2);
	assert_string_equal(str(row, "pod"), "train/holder-b2");
	row = find(at(d, "nodes"), "node", "broken-0");
	assert_string_equal(str(row, "verdict"), "kept-proposed");
	row = find(at(d, "nodes"), "node", "pairs-free");
	assert_string_equal(str(row, "verdict"), "dropped");
	cJSON_Delete(root);

	root = json_call(fx->debug_port, "GET", "/debug/decisions", NULL, 200);
	assert_int_equal(cJSON_GetArraySize(at(root, "decisions")), 4);
	cJSON_Delete(root);
	root = json_call(fx->debug_port, "GET",
			 "/debug/decisions?limit=1048576", NULL, 200);
	cJSON_Delete(root);
	cJSON_Delete(json_call(fx->debug_port, "GET",
			       "/debug/decisions?limit=0", NULL, 400));
	cJSON_Delete(json_call(fx->debug_port, "GET",
			       "/debug/decisions?limit=-1", NULL, 400));
	cJSON_Delete(json_call(fx->debug_port, "GET",
			       "/debug/decisions?limit=ten", NULL, 400));
}

static void test_debug__pod_view(void **state)
{
	fixture_t *fx = *state;
	const cJSON *holding, *list;
	cJSON *root;

	run_verbs(fx);
	root = json_call(fx->debug_port, "GET",
			 "/debug/pods/train/waiting-pair", NULL, 200);
	holding = at(root, "holding");
	assert_string_equal(str(holding, "node"), "a100-0");
	assert_int_equal(cJSON_GetArraySize(at(holding, "gpus")), 2);
	assert_string_equal(str(at(root, "state"), "node"), "a100-0");
	list = at(root, "decisions");
	assert_int_equal(cJSON_GetArraySize(list), 3);
	assert_string_equal(str(cJSON_GetArrayItem(list, 0), "verb"), "bind");
	cJSON_Delete(root);

	/* A victim: its holding and the preemption that named it. */
	root = json_call(fx->debug_port, "GET", "/debug/pods/train/holder-b2",
			 NULL, 200);
	assert_string_equal(str(at(root, "holding"), "node"), "pairs-busy");
	list = at(root, "decisions");
	assert_int_equal(cJSON_GetArraySize(list), 1);
	assert_string_equal(str(cJSON_GetArrayItem(list, 0), "verb"),
			    "preempt");
	cJSON_Delete(root);

	cJSON_Delete(
	    json_call(fx->debug_port, "GET", "/debug/pods/x/y", NULL, 404));
	cJSON_Delete(
	    json_call(fx->debug_port, "GET", "/debug/pods/train", NULL, 404));
	cJSON_Delete(
	    json_call(fx->debug_port, "GET", "/debug/pods/a/b/c", NULL, 404));
}

/* ---- metrics, health, and the listener switch ---- */

static double metric(const char *text, const char *series)
{
	char needle[256];
	const char *p;

	snprintf(needle, sizeof(needle), "\n%s ", series);
	p = strstr(text, needle);
	if (!p)
		fail_msg("no sample %s", series);
	return strtod(p + strlen(needle), NULL);
}

static void test_debug__metrics_on_both_listeners(void **state)
{
	fixture_t *fx = *state;
	reply_t m, d;

	run_verbs(fx);
	m = http(fx->main_port, "GET", "/metrics", NULL);
	d = http(fx->debug_port, "GET", "/metrics", NULL);
	assert_int_equal(m.status, 200);
	assert_int_equal(d.status, 200);
	assert_string_equal(m.content_type,
			    "text/plain; version=0.0.4; charset=utf-8");
	assert_true(
	    metric(m.body, "flextopo_requests_total{verb=\"filter\"}") == 1);
	assert_true(metric(m.body, "flextopo_requests_total{verb=\"bind\"}") ==
		    1);
	assert_true(metric(m.body, "flextopo_binds_total{result=\"bound\"}") ==
		    1);
	assert_true(
	    metric(m.body,
		   "flextopo_bind_affinity_level_total{level=\"nvlink\"}") ==
	    1);
	assert_true(
	    metric(
		m.body,
		"flextopo_preemption_nodes_total{mode=\"guaranteed\",outcome=\"victims\"}") ==
	    1);
	assert_true(metric(m.body, "flextopo_nodes") == 7);
	assert_true(metric(m.body, "flextopo_nodes_bad_topology") == 2);
	assert_true(metric(m.body, "flextopo_ready") == 1);
	assert_true(metric(m.body, "flextopo_decisions_total") == 4);
	assert_true(metric(d.body, "flextopo_decision_log_bytes") ==
		    (double)ft_decisions_footprint(1024));
	assert_true(metric(d.body, "flextopo_cache_age_seconds") >= 0);
	/* small.yaml's 4 bound GPU pods and the one bound here. */
	assert_true(metric(d.body, "flextopo_workload_mix_pods") == 5);
	assert_true(metric(d.body, "flextopo_gpu_capacity_free") > 0);
	assert_true(metric(d.body, "flextopo_drift_pods") == 0);
	free(m.body);
	free(d.body);
}

/*
 * observed.yaml: the drifted pod holds what flextopo-node observed, and
 * the pod view, the node view and the metrics show it with what its
 * allocation named.
 */
static void test_debug__observed_drift(void **state)
{
	fixture_t *fx = *state;
	const cJSON *st, *holding;
	cJSON *root;
	reply_t m;

	root = json_call(fx->debug_port, "GET", "/debug/pods/train/drifted",
			 NULL, 200);
	st = at(root, "state");
	assert_true(cJSON_IsTrue(at(st, "drifted")));
	assert_string_equal(str(at(st, "observed"), "source"), "podresources");
	assert_true(cJSON_IsTrue(at(at(st, "observed"), "held")));
	assert_true(cJSON_IsNull(at(st, "observedError")));
	expect_json(
	    at(st, "drift"),
	    "{\"expected\":{\"gpus\":[\"GPU-obs-0\",\"GPU-obs-1\"],\"mig\":[],\"replicas\":[],\"cpuset\":\"0-1\"},\"actual\":{\"gpus\":[\"GPU-obs-3\",\"GPU-obs-2\"],\"mig\":[],\"replicas\":[],\"cpuset\":\"\"}}");
	holding = at(root, "holding");
	expect_json(at(holding, "gpus"), "[2,3]");
	assert_string_equal(str(holding, "cpus"), "");
	assert_string_equal(str(holding, "level"), "nvlink");
	assert_string_equal(str(holding, "observedSource"), "podresources");
	assert_true(cJSON_IsTrue(at(holding, "drifted")));
	expect_json(
	    at(at(holding, "drift"), "expected"),
	    "{\"gpus\":[0,1],\"mig\":[],\"cpus\":\"0-1\",\"unknown\":0}");
	expect_json(at(at(holding, "drift"), "actual"),
		    "{\"gpus\":[2,3],\"mig\":[],\"cpus\":\"\",\"unknown\":0}");
	cJSON_Delete(root);

	/* An observation for another node, and a malformed one. */
	root = json_call(fx->debug_port, "GET", "/debug/pods/batch/stale", NULL,
			 200);
	assert_false(
	    cJSON_IsTrue(at(at(at(root, "state"), "observed"), "held")));
	assert_true(cJSON_IsNull(at(at(root, "holding"), "observedSource")));
	expect_json(at(at(root, "holding"), "gpus"), "[1]");
	cJSON_Delete(root);
	root = json_call(fx->debug_port, "GET", "/debug/pods/batch/broken",
			 NULL, 200);
	st = at(root, "state");
	assert_true(cJSON_IsNull(at(st, "observed")));
	assert_string_equal(
	    str(st, "observedError"),
	    "annotation flextopo.io/observed: source: \"kubelet\" is not nri or podresources");
	cJSON_Delete(root);

	/* The node: every GPU held once, the unmanaged pod on GPU 0. */
	root = json_call(fx->debug_port, "GET", "/debug/nodes/pairs-obs", NULL,
			 200);
	holding = find(at(root, "holdings"), "name", "unmanaged");
	expect_json(at(holding, "gpus"), "[0]");
	/* Placed without flextopo: drift from nothing expected. */
	assert_true(cJSON_IsTrue(at(holding, "drifted")));
	expect_json(at(at(holding, "drift"), "expected"),
		    "{\"gpus\":[],\"mig\":[],\"cpus\":\"\",\"unknown\":0}");
	holding = find(at(root, "holdings"), "name", "drifted");
	assert_true(cJSON_IsTrue(at(holding, "drifted")));
	cJSON_Delete(root);

	m = http(fx->main_port, "GET", "/metrics", NULL);
	assert_true(metric(m.body, "flextopo_drift_pods") == 2);
	assert_true(metric(m.body, "flextopo_gpus_whole_free") == 0);
	free(m.body);
}

static void test_debug__health_on_the_debug_listener(void **state)
{
	fixture_t *fx = *state;
	const char *paths[] = {"/healthz", "/readyz", "/version"};

	for (unsigned i = 0; i < 3; i++) {
		reply_t r = http(fx->debug_port, "GET", paths[i], NULL);
		assert_int_equal(r.status, 200);
		free(r.body);
	}
}

static void test_debug__listener_off_by_default(void **state)
{
	ft_app_t app;

	memset(&app, 0, sizeof(app));
	assert_int_equal(ft_config_init(&app.cfg), 0);
	assert_int_equal(ft_config_set(&app.cfg, "logLevel", "error"), 0);
	assert_int_equal(ft_app_init(&app), 0);
	assert_int_equal(ft_app_debug_start(&app), 0);
	assert_null(app.debug_server);
	assert_int_equal(ft_decisions_capacity(app.decisions), 1024);
	ft_app_dispose(&app);
}

/* ---- the metrics listener ---- */

/* GET https://127.0.0.1:port/metrics with `token` (or none), unverified. */
static reply_t scrape(unsigned port, const char *token)
{
	reply_t r;

	memset(&r, 0, sizeof(r));
	r.status = ft_test_scrape_metrics(port, token, &r.body);
	return r;
}

#define TOKEN_REVIEW  "POST /apis/authentication.k8s.io/v1/tokenreviews "
#define ACCESS_REVIEW "POST /apis/authorization.k8s.io/v1/subjectaccessreviews "

/*
 * The metrics listener judges a scraper as kube-scheduler's secure port
 * does: HTTPS, a bearer token the API server authenticates (TokenReview)
 * and allows to get /metrics (SubjectAccessReview), decisions cached.
 */
static void test_debug__metrics_listener_checks_tokens(void **state)
{
	static const char *const prometheus[] = {
	    "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"system:serviceaccount:monitoring:prometheus\",\"uid\":\"u-p\",\"groups\":[\"system:serviceaccounts\"]}}}",
	    NULL};
	static const char *const allowed[] = {"{\"status\":{\"allowed\":true}}",
					      NULL};
	static const char *const unknown[] = {
	    "{\"status\":{\"authenticated\":false,\"error\":\"invalid bearer token\"}}",
	    NULL};
	static const char *const denied[] = {
	    "{\"status\":{\"allowed\":false,\"reason\":\"no RBAC policy matched\"}}",
	    NULL};
	static const ft_fake_step_t steps[] = {
	    {TOKEN_REVIEW, "201 Created", prometheus, FT_FAKE_END},
	    {ACCESS_REVIEW, "201 Created", allowed, FT_FAKE_END},
	    {TOKEN_REVIEW, "201 Created", unknown, FT_FAKE_END},
	    {TOKEN_REVIEW, "201 Created", prometheus, FT_FAKE_END},
	    {ACCESS_REVIEW, "201 Created", denied, FT_FAKE_END},
	};
	fixture_t *fx = *state;
	ft_fake_api_t api;
	unsigned port;
	cJSON *sar;
	reply_t r;

	ft_fake_api_start(&api, steps, 5);
	fx->app.kube = ft_fake_api_client(&api, NULL, 5000);
	free(fx->app.cfg.metrics_listen);
	fx->app.cfg.metrics_listen = strdup("127.0.0.1:0");
	assert_int_equal(ft_app_metrics_start(&fx->app), 0);
	port = ft_server_port(fx->app.metrics_server);
	r = scrape(port, NULL);
	assert_int_equal(r.status, 401);
	assert_string_equal(
	    r.body, "{\"error\":\"unauthorized: a bearer token is required\"}");
	free(r.body);
	for (int i = 0; i < 2; i++) { /* the second from the cache */
		r = scrape(port, "prometheus-token");
		assert_int_equal(r.status, 200);
		assert_non_null(strstr(r.body, "flextopo_ready 1"));
		free(r.body);
	}
	r = scrape(port, "stolen");
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(r.body, "invalid bearer token"));
	free(r.body);
	r = scrape(port, "other-prometheus");
	assert_int_equal(r.status, 403);
	assert_non_null(strstr(r.body, "forbidden: no RBAC policy matched"));
	free(r.body);
	ft_fake_api_finish(&api);
	assert_non_null(
	    strstr(api.requests[0], "\"token\":\"prometheus-token\""));
	sar = cJSON_Parse(ft_fake_request_body(api.requests[1]));
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(sar, "spec"), "user")
		->valuestring,
	    "system:serviceaccount:monitoring:prometheus");
	assert_non_null(strstr(
	    api.requests[1],
	    "\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"}"));
	cJSON_Delete(sar);
	ft_fake_api_dispose(&api);
}

/* ---- allocation conflicts ---- */

/* A pod bound to pairs-free whose annotation claims GPU-free-0 too. */
static const char dup_pod[] =
    "{\"metadata\":{\"name\":\"dup\",\"namespace\":\"serve\",\"uid\":\"uid-dup\",\"annotations\":{\"flextopo.io/allocation\":\"{\\\"version\\\":1,\\\"node\\\":\\\"pairs-free\\\",\\\"level\\\":\\\"node\\\",\\\"mode\\\":\\\"guaranteed\\\",\\\"gpus\\\":[\\\"GPU-free-0\\\"],\\\"cpuset\\\":\\\"\\\"}\"}},\"spec\":{\"nodeName\":\"pairs-free\",\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}";

/* The Event the fake API server received as request `i`, parsed. */
static cJSON *posted_event(const ft_fake_api_t *api, unsigned i)
{
	cJSON *e = cJSON_Parse(ft_fake_request_body(api->requests[i]));

	assert_non_null(e);
	return e;
}

static const char *field(const cJSON *obj, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);

	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/*
 * A conflict found in the annotations is loud: /debug/conflicts lists the
 * pair, the metrics count it, and each pod gets a Warning Event naming the
 * unit and the other pod. It never gets worse: GPU 0 is held once and not
 * handed out again, and the node's idle GPUs stay usable.
 */
static void test_debug__conflicts_reported(void **state)
{
	static const char *const created[] = {"{}", NULL};
	static const ft_fake_step_t steps[] = {
	    {"POST /api/v1/namespaces/train/events ", "201 Created", created,
	     FT_FAKE_END},
	    {"POST /api/v1/namespaces/serve/events ", "201 Created", created,
	     FT_FAKE_END},
	};
	fixture_t *fx = *state;
	cJSON *obj = cJSON_Parse(dup_pod), *e;
	ft_fake_api_t api;
	reply_t r;

	ft_state_apply_pod(fx->app.state, obj);
	cJSON_Delete(obj);
	r = http(fx->debug_port, "GET", "/debug/conflicts", NULL);
	assert_int_equal(r.status, 200);
	obj = cJSON_Parse(r.body);
	e = cJSON_GetArrayItem(cJSON_GetObjectItem(obj, "conflicts"), 0);
	assert_string_equal(field(e, "node", NULL), "pairs-free");
	assert_string_equal(field(e, "units", NULL), "GPU 0 (GPU-free-0)");
	assert_string_equal(
	    field(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "pods"), 1), "name",
		  NULL),
	    "dup");
	assert_int_equal(cJSON_GetObjectItem(obj, "conflictPods")->valueint, 2);
	cJSON_Delete(obj);
	free(r.body);
	r = http(fx->main_port, "GET", "/metrics", NULL);
	assert_true(metric(r.body, "flextopo_conflict_pods") == 2);
	assert_true(metric(r.body, "flextopo_conflicts_found_total") == 1);
	free(r.body);

	ft_fake_api_start(&api, steps, 2);
	fx->app.kube = ft_fake_api_client(&api, NULL, 5000);
	assert_int_equal(ft_upkeep_report_conflicts(&fx->app), 1);
	ft_fake_api_finish(&api);
	e = posted_event(&api, 0);
	assert_string_equal(field(e, "involvedObject", "name"), "holder-f0");
	assert_string_equal(field(e, "reason", NULL), "AllocationConflict");
	assert_string_equal(field(e, "type", NULL), "Warning");
	assert_non_null(strstr(field(e, "message", NULL),
			       "GPU 0 (GPU-free-0) on node pairs-free"));
	assert_non_null(strstr(field(e, "message", NULL), "pod serve/dup"));
	cJSON_Delete(e);
	e = posted_event(&api, 1);
	assert_string_equal(field(e, "involvedObject", "uid"), "uid-dup");
	assert_non_null(
	    strstr(field(e, "message", NULL), "pod train/holder-f0"));
	cJSON_Delete(e);
	ft_fake_api_dispose(&api);
	ft_kube_client_free(fx->app.kube);
	fx->app.kube = NULL;

	/* GPU 0 is held once; GPUs 1-3 stay free, and only they. */
	r = http(
	    fx->main_port, "POST", "/filter",
	    "{\"Pod\":{\"metadata\":{\"name\":\"three\",\"namespace\":\"t\",\"uid\":\"u3\"},\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"3\"}}}]}},\"NodeNames\":[\"pairs-free\"]}");
	assert_non_null(strstr(r.body, "\"NodeNames\":[\"pairs-free\"]"));
	free(r.body);
	r = http(
	    fx->main_port, "POST", "/bind",
	    "{\"PodName\":\"three\",\"PodNamespace\":\"t\",\"PodUID\":\"u3\",\"Node\":\"pairs-free\"}");
	assert_string_equal(r.body, "{\"Error\":\"\"}");
	free(r.body);
	r = http(fx->debug_port, "GET", "/debug/pods/t/three", NULL);
	assert_non_null(strstr(r.body, "\"gpus\":[1,2,3]"));
	free(r.body);
}

/*
 * A DRA node in the debug views and metrics: its claims as holdings, the
 * flags, and a preempt for a GPU there dropped with the reason (KEP-5690).
 */
static void test_debug__dra_node(void **state)
{
	fixture_t *fx = *state;
	cJSON *root =
	    json_call(fx->debug_port, "GET", "/debug/nodes", NULL, 200);
	const cJSON *row = find(at(root, "nodes"), "name", "dra-a100-0"), *dra;
	const char *preempt =
	    "{\"Pod\":{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\",\"uid\":\"u-big\"},\"spec\":{\"priority\":1000,\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}},\"NodeNameToMetaVictims\":{\"dra-a100-0\":{\"Pods\":[{\"UID\":\"5d3f1e2a-7b9c-4d8e-a1f2-3b4c5d6e7f80\"}],\"NumPDBViolations\":0}}}";
	static const char *const created[] = {"{}", NULL};
	static const ft_fake_step_t steps[] = {
	    {"POST /api/v1/namespaces/ml/events ", "201 Created", created,
	     FT_FAKE_END},
	};
	ft_fake_api_t api;
	cJSON *e;
	reply_t m;

	dra = at(row, "dra");
	assert_false(cJSON_IsTrue(at(dra, "doublePublished")));
	assert_true(cJSON_IsNull(at(dra, "error")));
	assert_int_equal(num(dra, "claims"), 4);
	assert_int_equal(num(at(row, "gpus"), "used"), 7);
	assert_true(cJSON_IsNull(
	    at(find(at(root, "nodes"), "name", "dp-a100-0"), "dra")));
	cJSON_Delete(root);
	root = json_call(fx->debug_port, "GET", "/debug/nodes/dra-a100-0", NULL,
			 200);
	assert_true(
	    cJSON_IsTrue(at(find(at(root, "holdings"), "name", "shared-a100"),
			    "resourceClaim")));
	cJSON_Delete(root);

	/* The pod is told why, once however often it is retried. */
	ft_fake_api_start(&api, steps, 1);
	fx->app.kube = ft_fake_api_client(&api, NULL, 5000);
	assert_int_equal(ft_upkeep_start(&fx->app.upkeep, &fx->app), 0);
	for (int i = 0; i < 2; i++) {
		root =
		    json_call(fx->main_port, "POST", "/preempt", preempt, 200);
		assert_int_equal(
		    cJSON_GetArraySize(at(root, "NodeNameToMetaVictims")), 0);
		cJSON_Delete(root);
	}
	ft_fake_api_wait(&api, 1);
	ft_upkeep_free(fx->app.upkeep);
	fx->app.upkeep = NULL;
	ft_fake_api_finish(&api);
	e = posted_event(&api, 0);
	assert_string_equal(field(e, "involvedObject", "name"), "big");
	assert_string_equal(field(e, "reason", NULL),
			    "DRAPreemptionUnsupported");
	assert_non_null(strstr(field(e, "message", NULL), "KEP-5690"));
	cJSON_Delete(e);
	ft_fake_api_dispose(&api);
	ft_kube_client_free(fx->app.kube);
	fx->app.kube = NULL;
	root = json_call(fx->debug_port, "GET", "/debug/decisions?limit=1",
			 NULL, 200);
	row = cJSON_GetArrayItem(
	    at(cJSON_GetArrayItem(at(root, "decisions"), 0), "nodes"), 0);
	assert_non_null(strstr(str(row, "reason"), "KEP-5690"));
	cJSON_Delete(root);
	m = http(fx->debug_port, "GET", "/metrics", NULL);
	assert_non_null(strstr(m.body, "\nflextopo_dra_nodes 1\n"));
	assert_non_null(strstr(m.body, "\nflextopo_dra_node_errors 0\n"));
	assert_non_null(
	    strstr(m.body, "\nflextopo_resource_claims_allocated 4\n"));
	assert_non_null(
	    strstr(m.body, "\nflextopo_dra_preemption_refused_total 2\n"));
	free(m.body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_debug__nodes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__conflicts_reported,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_debug__metrics_listener_checks_tokens, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__nodes_fragmentation,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__explain_fragmentation,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__node_tree, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_debug__node_errors, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_debug__node_svg, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_debug__node_shared_replicas,
					    setup_shared, teardown),
	    cmocka_unit_test(test_debug__svg_escapes_names),
	    cmocka_unit_test(test_debug__svg_unknown_locality_and_memory),
	    cmocka_unit_test(test_debug__topology_fixtures),
	    cmocka_unit_test_setup_teardown(test_debug__explain_changes_nothing,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_debug__explain_options_and_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__explain_units_requires,
					    setup_mig, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__explain_units_mig,
					    setup_mig, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__explain_units_shared,
					    setup_shared, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__decisions_of_the_verbs,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__pod_view, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_debug__metrics_on_both_listeners, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__observed_drift,
					    setup_observed, teardown),
	    cmocka_unit_test_setup_teardown(test_debug__dra_node, setup_dra,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_debug__health_on_the_debug_listener, setup, teardown),
	    cmocka_unit_test(test_debug__listener_off_by_default),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
