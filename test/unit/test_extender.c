/*
 * The extender verbs through their real HTTP handlers (ft_app_filter,
 * ft_app_prioritize, ft_app_bind) over an application loaded from a snapshot
 * file, as `flextopo-extender --snapshot` runs.
 *
 * Golden wire cases live in test/fixtures/wire/<verb>/: <case>.request.json
 * is the body kube-scheduler POSTs, <case>.reply.json the reply expected
 * (compared as JSON: key order and whitespace do not matter), and an optional
 * <case>.status the expected HTTP status (200 when absent). Every case runs on
 * a fresh application loaded from test/fixtures/cluster/small.yaml (the
 * folders filter-mig and bind-mig from cluster/mig.yaml, filter-shared and
 * bind-shared from cluster/shared.yaml); adding a fixture
 * adds a case. Sequences that need state across calls (bind, then
 * filter again) are written out below, and so are binds against a fake API
 * server (fakeapi.h): one stuck on it while filters are answered over the
 * real HTTP server, and Bindings whose outcome is unknown until the upkeep
 * round (upkeep.h) reads the pod.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include <curl/curl.h>

#include <flextopo/app.h>
#include <flextopo/debug.h>
#include <flextopo/error.h>
#include <flextopo/state.h>
#include <flextopo/upkeep.h>
#include <flextopo/webhook.h>

#include "fakeapi.h"
#include "support.h"

#define CLUSTER		FT_FIXTURES_DIR "/cluster/small.yaml"
#define MIG_CLUSTER	FT_FIXTURES_DIR "/cluster/mig.yaml"
#define SHARED_CLUSTER	FT_FIXTURES_DIR "/cluster/shared.yaml"
#define VICTIMS_CLUSTER FT_FIXTURES_DIR "/cluster/victims.yaml"
#define DRA_CLUSTER	FT_FIXTURES_DIR "/cluster/dra.yaml"
#define GANGS_CLUSTER	FT_FIXTURES_DIR "/cluster/gangs.yaml"
#define WIRE		FT_FIXTURES_DIR "/wire"

/* Pods of test/fixtures/cluster/small.yaml. */
#define UID_HOLDER_A  "00000000-0000-4000-8000-00000000000a"
#define UID_HOLDER_F0 "00000000-0000-4000-8000-0000000000f0"

/*
 * The shortfall on pairs-free once its free NVLink pair is taken: GPU 0 is
 * held from the start, so only GPU 1 is left on the whole node.
 */
#define PAIRS_FREE_TAKEN                                                       \
	"node: at most 1 free GPUs with 16 free CPUs in one node, need 2 "     \
	"GPUs with 0 CPUs"

static ft_app_t *app_new_from(const char *cluster)
{
	ft_app_t *app = calloc(1, sizeof(*app));

	assert_non_null(app);
	assert_int_equal(ft_config_init(&app->cfg), 0);
	assert_int_equal(ft_config_set(&app->cfg, "logLevel", "error"), 0);
	assert_int_equal(ft_app_init(app), 0);
	if (ft_app_load_snapshot(app, cluster) < 0)
		fail_msg("%s: %s", cluster, ft_error_last());
	return app;
}

static ft_app_t *app_new(void)
{
	return app_new_from(CLUSTER);
}

static void app_free(ft_app_t *app)
{
	ft_app_dispose(app);
	free(app);
}

/* POST `body` to `fn` as the server would; the caller frees out->body. */
static void post(ft_http_response_t *out, ft_app_t *app, ft_http_handler_fn fn,
		 const char *path, const char *body, size_t len)
{
	ft_http_request_t req = {.method = "POST",
				 .path = path,
				 .content_type = "application/json",
				 .body = body,
				 .body_len = len,
				 .connection = NULL};

	memset(out, 0, sizeof(*out));
	out->status = 200;
	fn(out, &req, app);
}

/* ---- golden wire cases ------------------------------------------------ */

typedef struct {
	const char *verb; /* folder under test/fixtures/wire and URL path */
	ft_http_handler_fn fn;
	const char *cluster; /* NULL: test/fixtures/cluster/small.yaml */
} verb_t;

static char *read_case_file(const char *verb, const char *name, const char *ext)
{
	char rel[512];

	snprintf(rel, sizeof(rel), "wire/%s/%s.%s", verb, name, ext);
	return ft_test_read_fixture(rel, NULL);
}

static int expected_status(const char *verb, const char *name)
{
	char *text = read_case_file(verb, name, "status");
	int status = text ? atoi(text) : 200;

	free(text);
	return status;
}

static void print_json(const char *label, const cJSON *json, const char *raw)
{
	char *text = json ? cJSON_PrintUnformatted(json) : NULL;

	printf("      %s: %s\n", label, text ? text : raw ? raw : "(none)");
	free(text);
}

/* Compare one reply with the case's files; prints why when it differs. */
static bool reply_matches(const char *verb, const char *name,
			  const ft_http_response_t *res)
{
	char *want_text = read_case_file(verb, name, "reply.json");
	int want_status = expected_status(verb, name);
	cJSON *want = want_text ? cJSON_Parse(want_text) : NULL;
	cJSON *got =
	    res->body ? cJSON_ParseWithLength(res->body, res->body_len) : NULL;
	bool ok = true;

	if (!want) {
		printf("      %s.reply.json missing or not JSON\n", name);
		ok = false;
	}
	if (res->status != want_status) {
		printf("      status %d, expected %d\n", res->status,
		       want_status);
		ok = false;
	}
	if (!res->content_type ||
	    strcmp(res->content_type, "application/json") != 0) {
		printf("      content type %s\n",
		       res->content_type ? res->content_type : "(none)");
		ok = false;
	}
	if (!got || !want || !cJSON_Compare(want, got, true)) {
		print_json("expected", want, want_text);
		print_json("actual  ", got, res->body);
		ok = false;
	}
	cJSON_Delete(want);
	cJSON_Delete(got);
	free(want_text);
	return ok;
}

static bool run_case(const verb_t *v, const char *name)
{
	char *body = read_case_file(v->verb, name, "request.json");
	char path[64];
	ft_http_response_t res;
	ft_app_t *app;
	bool ok;

	if (!body) {
		printf("      cannot read %s.request.json\n", name);
		return false;
	}
	snprintf(path, sizeof(path), "/%s", v->verb);
	app = app_new_from(v->cluster ? v->cluster : CLUSTER);
	post(&res, app, v->fn, path, body, strlen(body));
	ok = reply_matches(v->verb, name, &res);
	free(res.body);
	app_free(app);
	free(body);
	return ok;
}

static bool run_verb_case(const char *name, void *payload)
{
	return run_case(payload, name);
}

/* Run every case of one verb in name order; fail if any case fails. */
static void run_verb(const verb_t *v)
{
	assert_int_equal(
	    ft_test_wire_cases(v->verb, "", run_verb_case, (void *)v), 0);
}

static void test_extender__wire_filter(void **state)
{
	const verb_t v = {"filter", ft_app_filter, NULL};

	run_verb(&v);
}

static void test_extender__wire_prioritize(void **state)
{
	const verb_t v = {"prioritize", ft_app_prioritize, NULL};

	run_verb(&v);
}

static void test_extender__wire_bind(void **state)
{
	const verb_t v = {"bind", ft_app_bind, NULL};

	run_verb(&v);
}

static void test_extender__wire_preempt(void **state)
{
	const verb_t v = {"preempt", ft_app_preempt, NULL};

	run_verb(&v);
}

/*
 * The victim search's hard cases on victims.yaml: a proposed victim that
 * holds nothing tracked, a GPU claimed twice, equal priorities, budgets and
 * candidates past the 64th pod, a budget with an empty selector.
 */
static void test_extender__wire_preempt_victims(void **state)
{
	const verb_t v = {"preempt-victims", ft_app_preempt, VICTIMS_CLUSTER};

	run_verb(&v);
}

/*
 * Victims in gangs of every source on gangs.yaml: a member costs its whole
 * gang, within an elastic gang's slack it costs itself, a gang's members
 * on the node go together, and only the nodes of the least cost are
 * answered where a set breaks a gang.
 */
static void test_extender__wire_preempt_gangs(void **state)
{
	const verb_t v = {"preempt-gangs", ft_app_preempt, GANGS_CLUSTER};

	run_verb(&v);
}

/* MIG policies, MIG strategy single and capabilities on mig.yaml. */
static void test_extender__wire_filter_mig(void **state)
{
	const verb_t v = {"filter-mig", ft_app_filter, MIG_CLUSTER};

	run_verb(&v);
}

static void test_extender__wire_bind_mig(void **state)
{
	const verb_t v = {"bind-mig", ft_app_bind, MIG_CLUSTER};

	run_verb(&v);
}

/* DRA nodes beside device-plugin ones, on dra.yaml: claims counted by
 * their DeviceClass, CPUs near DRA's GPUs, no victims for a DRA GPU. */
static void test_extender__wire_filter_dra(void **state)
{
	const verb_t v = {"filter-dra", ft_app_filter, DRA_CLUSTER};

	run_verb(&v);
}

static void test_extender__wire_bind_dra(void **state)
{
	const verb_t v = {"bind-dra", ft_app_bind, DRA_CLUSTER};

	run_verb(&v);
}

static void test_extender__wire_preempt_dra(void **state)
{
	const verb_t v = {"preempt-dra", ft_app_preempt, DRA_CLUSTER};

	run_verb(&v);
}

/* Ranks of GPU fractions on time-sliced GPUs, on shared.yaml. */
static void test_extender__wire_filter_shared(void **state)
{
	const verb_t v = {"filter-shared", ft_app_filter, SHARED_CLUSTER};

	run_verb(&v);
}

static void test_extender__wire_bind_shared(void **state)
{
	const verb_t v = {"bind-shared", ft_app_bind, SHARED_CLUSTER};

	run_verb(&v);
}

/* ---- sequences over one state ---------------------------------------- */

/* A pending pod asking for `gpus` GPUs at `affinity` (NULL: no annotation). */
static char *pod_json(const char *name, const char *uid, unsigned gpus,
		      const char *affinity)
{
	char ann[160] = "";
	char *out = NULL;

	if (affinity)
		snprintf(ann, sizeof(ann),
			 ",\"annotations\":{\"flextopo.io/affinity\":\"%s\"}",
			 affinity);
	if (asprintf(
		&out,
		"{\"metadata\":{\"name\":\"%s\",\"namespace\":\"train\",\"uid\":\"%s\"%s},\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"2Gi\",\"nvidia.com/gpu\":\"%u\"},\"limits\":{\"nvidia.com/gpu\":\"%u\"}}}]},\"status\":{\"phase\":\"Pending\"}}",
		name, uid, ann, gpus, gpus) < 0)
		fail_msg("out of memory");
	return out;
}

/* Filter `pod` (JSON text) on `nodes` ("\"a\",\"b\""); returns the reply. */
static cJSON *filter(ft_app_t *app, const char *pod, const char *nodes)
{
	ft_http_response_t res;
	char *body = NULL;
	cJSON *reply;

	if (asprintf(&body, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[%s]}",
		     pod, nodes) < 0)
		fail_msg("out of memory");
	post(&res, app, ft_app_filter, "/filter", body, strlen(body));
	assert_int_equal(res.status, 200);
	reply = cJSON_ParseWithLength(res.body, res.body_len);
	assert_non_null(reply);
	free(res.body);
	free(body);
	return reply;
}

static bool passed(const cJSON *reply, const char *node)
{
	const cJSON *name;

	cJSON_ArrayForEach (
	    name, cJSON_GetObjectItemCaseSensitive(reply, "NodeNames")) {
		if (cJSON_IsString(name) &&
		    strcmp(name->valuestring, node) == 0)
			return true;
	}
	return false;
}

static const char *failed_reason(const cJSON *reply, const char *node)
{
	const cJSON *failed =
	    cJSON_GetObjectItemCaseSensitive(reply, "FailedNodes");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(failed, node);

	return cJSON_IsString(reason) ? reason->valuestring : NULL;
}

/* Bind pod ns/name; returns the reply's Error (heap; "" on success). */
static char *bind_in(ft_app_t *app, const char *ns, const char *name,
		     const char *uid, const char *node)
{
	ft_http_response_t res;
	char *body = NULL, *error;
	const cJSON *e;
	cJSON *reply;

	if (asprintf(
		&body,
		"{\"PodName\":\"%s\",\"PodNamespace\":\"%s\",\"PodUID\":\"%s\",\"Node\":\"%s\"}",
		name, ns, uid, node) < 0)
		fail_msg("out of memory");
	post(&res, app, ft_app_bind, "/bind", body, strlen(body));
	assert_int_equal(res.status, 200);
	reply = cJSON_ParseWithLength(res.body, res.body_len);
	e = cJSON_GetObjectItemCaseSensitive(reply, "Error");
	assert_true(cJSON_IsString(e));
	error = strdup(e->valuestring);
	cJSON_Delete(reply);
	free(res.body);
	free(body);
	return error;
}

/* Bind a pod of namespace train. */
static char *bind_call(ft_app_t *app, const char *name, const char *uid,
		       const char *node)
{
	return bind_in(app, "train", name, uid, node);
}

static void bind_ok(ft_app_t *app, const char *name, const char *uid,
		    const char *node)
{
	char *error = bind_call(app, name, uid, node);

	if (error[0])
		fail_msg("bind %s to %s: %s", name, node, error);
	free(error);
}

/* Filter then bind, as kube-scheduler does. */
static void schedule(ft_app_t *app, const char *name, const char *uid,
		     unsigned gpus, const char *affinity, const char *node)
{
	char *pod = pod_json(name, uid, gpus, affinity);
	char nodes[128];
	cJSON *reply;

	snprintf(nodes, sizeof(nodes), "\"%s\"", node);
	reply = filter(app, pod, nodes);
	assert_true(passed(reply, node));
	cJSON_Delete(reply);
	free(pod);
	bind_ok(app, name, uid, node);
}

/* The holding of `uid` on `node` in the current snapshot (copied). */
static bool holding(ft_app_t *app, const char *node, const char *uid,
		    ft_holding_t *out)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	const ft_node_t *n = ft_snapshot_find(snap, node);
	const ft_holding_t *h = n ? ft_node_find_holding(n, uid) : NULL;

	memset(out, 0, sizeof(*out));
	if (h) {
		*out = *h;
		out->uid = out->ns = out->name = NULL;
	}
	ft_snapshot_unref(snap);
	return h != NULL;
}

static uint16_t gpus_used(ft_app_t *app, const char *node)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	const ft_node_t *n = ft_snapshot_find(snap, node);
	uint16_t used = n ? n->gpus_used : 0;

	ft_snapshot_unref(snap);
	return used;
}

static void test_extender__bind_then_filter_sees_gpus_taken(void **state)
{
	ft_app_t *app = app_new();
	char *p = pod_json("nvl-a", "uid-nvl-a", 2, "nvlink");
	char *q = pod_json("nvl-b", "uid-nvl-b", 2, "nvlink");
	ft_state_stats_t st;
	ft_holding_t h;
	cJSON *reply;

	reply = filter(app, p, "\"pairs-busy\",\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	assert_false(passed(reply, "pairs-busy"));
	cJSON_Delete(reply);
	bind_ok(app, "nvl-a", "uid-nvl-a", "pairs-free");

	/* The free pair (2,3) of pairs-free now belongs to nvl-a, confirmed. */
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_int_equal(h.gpus, 0xc);
	assert_false(h.assumed);
	assert_int_equal(gpus_used(app, "pairs-free"), 0xd);
	ft_state_stats(app->state, &st);
	assert_int_equal(st.assumed, 0);

	reply = filter(app, q, "\"pairs-busy\",\"pairs-free\"");
	assert_false(passed(reply, "pairs-free"));
	assert_string_equal(failed_reason(reply, "pairs-free"),
			    PAIRS_FREE_TAKEN);
	cJSON_Delete(reply);
	free(p);
	free(q);
	app_free(app);
}

static void test_extender__bind_twice_is_idempotent(void **state)
{
	ft_app_t *app = app_new();
	ft_holding_t first, again;
	ft_state_stats_t st;

	schedule(app, "nvl-a", "uid-nvl-a", 2, "nvlink", "a100-0");
	assert_true(holding(app, "a100-0", "uid-nvl-a", &first));
	assert_int_equal(__builtin_popcount(first.gpus), 2);

	/* kube-scheduler retries a bind that timed out (issue #96579). */
	bind_ok(app, "nvl-a", "uid-nvl-a", "a100-0");
	assert_true(holding(app, "a100-0", "uid-nvl-a", &again));
	assert_int_equal(again.gpus, first.gpus);
	assert_true(ft_cpuset_equal(&again.cpus, &first.cpus));
	assert_int_equal(__builtin_popcount(gpus_used(app, "a100-0")), 5);
	ft_state_stats(app->state, &st);
	assert_int_equal(st.assumed, 0);
	app_free(app);
}

static void test_extender__two_binds_get_disjoint_gpus(void **state)
{
	ft_app_t *app = app_new();
	ft_holding_t a, b, held;

	schedule(app, "two-a", "uid-two-a", 2, NULL, "a100-0");
	schedule(app, "two-b", "uid-two-b", 2, NULL, "a100-0");
	assert_true(holding(app, "a100-0", "uid-two-a", &a));
	assert_true(holding(app, "a100-0", "uid-two-b", &b));
	assert_true(holding(app, "a100-0", UID_HOLDER_A, &held));
	assert_int_equal(held.gpus, 0x7);
	assert_int_equal(__builtin_popcount(a.gpus), 2);
	assert_int_equal(__builtin_popcount(b.gpus), 2);
	assert_int_equal(a.gpus & b.gpus, 0);
	assert_int_equal((a.gpus | b.gpus) & held.gpus, 0);
	assert_int_equal(gpus_used(app, "a100-0"), held.gpus | a.gpus | b.gpus);
	app_free(app);
}

static void
test_extender__bind_that_no_longer_fits_names_shortfall(void **state)
{
	ft_app_t *app = app_new();
	char *p = pod_json("nvl-a", "uid-nvl-a", 2, "nvlink");
	char *q = pod_json("nvl-b", "uid-nvl-b", 2, "nvlink");
	char *error;
	ft_holding_t h;
	cJSON *reply;

	/* Both pass the filter: filter reserves nothing. */
	reply = filter(app, p, "\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	cJSON_Delete(reply);
	reply = filter(app, q, "\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	cJSON_Delete(reply);

	bind_ok(app, "nvl-a", "uid-nvl-a", "pairs-free");
	error = bind_call(app, "nvl-b", "uid-nvl-b", "pairs-free");
	assert_string_equal(error, "node pairs-free: " PAIRS_FREE_TAKEN);
	free(error);
	assert_false(holding(app, "pairs-free", "uid-nvl-b", &h));
	assert_int_equal(gpus_used(app, "pairs-free"), 0xd);
	free(p);
	free(q);
	app_free(app);
}

static void test_extender__bind_of_pending_pod_from_snapshot(void **state)
{
	ft_app_t *app = app_new();
	ft_holding_t h;

	/* waiting-pair is in the snapshot file: bind needs no filter first. */
	bind_ok(app, "waiting-pair", "00000000-0000-4000-8000-000000000001",
		"a100-0");
	assert_true(
	    holding(app, "a100-0", "00000000-0000-4000-8000-000000000001", &h));
	assert_int_equal(__builtin_popcount(h.gpus), 2);
	assert_int_equal(h.gpus & 0x7, 0);
	assert_int_equal(h.level, FT_LEVEL_NVLINK);
	app_free(app);
}

static void test_extender__bind_mig_pod_holds_instances(void **state)
{
	ft_app_t *app = app_new();
	const char *uid = "00000000-0000-4000-8000-000000000003";
	ft_snapshot_t *snap;
	const ft_node_t *n;
	ft_holding_t h;

	bind_ok(app, "waiting-mig", uid, "h100-0");
	assert_true(holding(app, "h100-0", uid, &h));
	assert_int_equal(h.gpus, 0);
	assert_int_equal(h.mig[1], 0);
	assert_int_equal(__builtin_popcountll(h.mig[0]), 2);
	/* Both 3g.40gb instances under one PCIe switch: GPU 0 has two. */
	snap = ft_state_snapshot(app->state);
	n = ft_snapshot_find(snap, "h100-0");
	for (unsigned i = 0; i < n->topology->n_mig; i++) {
		if (!((h.mig[0] >> i) & 1))
			continue;
		assert_string_equal(n->topology->mig[i].profile, "3g.40gb");
		assert_int_equal(n->topology->mig[i].gpu, 0);
		assert_true(ft_node_mig_used(n, i));
	}
	ft_snapshot_unref(snap);
	app_free(app);
}

/* The uuid of MIG instance positions `mig` on `node` ("" when not one). */
static void held_mig(ft_app_t *app, const char *node, const uint64_t *mig,
		     char *out, size_t size, unsigned *count)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	const ft_node_t *n = ft_snapshot_find(snap, node);

	*count = 0;
	out[0] = '\0';
	for (unsigned i = 0; n && i < n->topology->n_mig; i++) {
		if (!((mig[i / 64] >> (i % 64)) & 1))
			continue;
		snprintf(out, size, "%s", n->topology->mig[i].uuid);
		(*count)++;
	}
	ft_snapshot_unref(snap);
}

/*
 * mig.yaml's pending pods: the pod's allocation-policy picks the 3g.40gb
 * (packed: GPU 1, beside holder-1g's slice; distributed: the empty GPU 0);
 * nvidia.com/gpu on a single-strategy node binds instances, and the
 * allocation annotation lists them under "mig" with "gpus" empty.
 */
static void test_extender__mig_policy_and_single_strategy(void **state)
{
	ft_app_t *app = app_new_from(MIG_CLUSTER);
	const char *single = "00000000-0000-4000-8000-0000000001b4";
	char uuid[64], *ann = NULL;
	unsigned n;
	ft_holding_t h;
	ft_pod_t pod;
	cJSON *json;

	bind_ok(app, "mig-packed", "00000000-0000-4000-8000-0000000001b1",
		"h100-mixed");
	assert_true(holding(app, "h100-mixed",
			    "00000000-0000-4000-8000-0000000001b1", &h));
	held_mig(app, "h100-mixed", h.mig, uuid, sizeof(uuid), &n);
	assert_int_equal(n, 1);
	assert_string_equal(uuid, "MIG-mixed-1-4");
	bind_ok(app, "mig-distributed", "00000000-0000-4000-8000-0000000001b2",
		"h100-mixed");
	assert_true(holding(app, "h100-mixed",
			    "00000000-0000-4000-8000-0000000001b2", &h));
	held_mig(app, "h100-mixed", h.mig, uuid, sizeof(uuid), &n);
	assert_string_equal(uuid, "MIG-mixed-0-0");

	bind_ok(app, "gpu-single", single, "h100-single-3g");
	assert_true(holding(app, "h100-single-3g", single, &h));
	assert_int_equal(h.gpus, 0);
	held_mig(app, "h100-single-3g", h.mig, uuid, sizeof(uuid), &n);
	assert_int_equal(n, 2);
	/* Assuming again gives the annotation bind wrote. */
	assert_int_equal(ft_state_find_pod(app->state, single, &pod), 0);
	assert_int_equal(ft_state_assume(app->state, &pod, "h100-single-3g",
					 FT_POLICY_PACKED, &ann),
			 0);
	json = cJSON_Parse(ann);
	assert_non_null(json);
	assert_int_equal(
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(json, "gpus")),
	    0);
	assert_int_equal(
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(json, "mig")),
	    2);
	assert_non_null(strstr(ann, "\"profile\":\"3g.40gb\""));
	cJSON_Delete(json);
	free(ann);
	ft_pod_dispose(&pod);
	app_free(app);
}

typedef struct {
	ft_app_t *app;
	char name[32];
	char uid[32];
	char *error;
} bind_job_t;

static void *bind_job(void *payload)
{
	bind_job_t *job = payload;
	char body[256];
	ft_http_response_t res;

	snprintf(
	    body, sizeof(body),
	    "{\"PodName\":\"%s\",\"PodNamespace\":\"train\",\"PodUID\":\"%s\",\"Node\":\"a100-0\"}",
	    job->name, job->uid);
	post(&res, job->app, ft_app_bind, "/bind", body, strlen(body));
	job->error = res.body; /* checked by the main thread */
	return NULL;
}

/* Binds racing for the last GPUs of one node never share a GPU. */
static void test_extender__concurrent_binds_are_disjoint(void **state)
{
	enum { JOBS = 6 };
	ft_app_t *app = app_new();
	bind_job_t jobs[JOBS];
	pthread_t threads[JOBS];
	uint16_t seen = 0;
	unsigned bound = 0;

	for (unsigned i = 0; i < JOBS; i++) {
		char *pod;
		cJSON *reply;

		jobs[i].app = app;
		snprintf(jobs[i].name, sizeof(jobs[i].name), "racer-%u", i);
		snprintf(jobs[i].uid, sizeof(jobs[i].uid), "uid-racer-%u", i);
		pod = pod_json(jobs[i].name, jobs[i].uid, 1, NULL);
		reply = filter(app, pod, "\"a100-0\"");
		assert_true(passed(reply, "a100-0"));
		cJSON_Delete(reply);
		free(pod);
	}
	for (unsigned i = 0; i < JOBS; i++)
		assert_int_equal(
		    pthread_create(&threads[i], NULL, bind_job, &jobs[i]), 0);
	for (unsigned i = 0; i < JOBS; i++)
		pthread_join(threads[i], NULL);
	/* Five GPUs are free for six pods: five bind, one is refused. */
	for (unsigned i = 0; i < JOBS; i++) {
		ft_holding_t h;
		bool ok = strcmp(jobs[i].error, "{\"Error\":\"\"}") == 0;
		if (ok) {
			assert_true(holding(app, "a100-0", jobs[i].uid, &h));
			assert_int_equal(__builtin_popcount(h.gpus), 1);
			assert_int_equal(h.gpus & seen, 0);
			seen |= h.gpus;
			bound++;
		} else {
			assert_non_null(strstr(jobs[i].error, "node a100-0: "));
		}
		free(jobs[i].error);
	}
	assert_int_equal(bound, 5);
	assert_int_equal(seen, 0xf8);
	assert_int_equal(gpus_used(app, "a100-0"), 0xff);
	app_free(app);
}

static void test_extender__held_gpus_of_snapshot(void **state)
{
	ft_app_t *app = app_new();
	ft_state_stats_t st;
	ft_holding_t h;

	/* The Succeeded pod on pairs-free holds nothing. */
	assert_int_equal(gpus_used(app, "pairs-free"), 0x1);
	assert_true(holding(app, "pairs-free", UID_HOLDER_F0, &h));
	assert_int_equal(gpus_used(app, "pairs-busy"), 0x6);
	assert_int_equal(gpus_used(app, "a100-0"), 0x7);
	ft_state_stats(app->state, &st);
	assert_int_equal(st.nodes, 7);
	assert_int_equal(st.nodes_bad_topology, 2);
	assert_int_equal(st.assumed, 0);
	assert_true(ft_app_ready(app));
	app_free(app);
}

static void test_extender__load_snapshot_errors(void **state)
{
	ft_app_t app;

	memset(&app, 0, sizeof(app));
	assert_int_equal(ft_config_init(&app.cfg), 0);
	assert_int_equal(ft_config_set(&app.cfg, "logLevel", "error"), 0);
	assert_int_equal(ft_app_init(&app), 0);
	assert_false(ft_app_ready(&app));
	assert_int_equal(ft_app_load_snapshot(&app, FT_FIXTURES_DIR
					      "/cluster/no-such-file.yaml"),
			 FT_EIO);
	assert_false(ft_app_ready(&app));
	/* A YAML document that is not a List. */
	assert_int_equal(ft_app_load_snapshot(&app, FT_FIXTURES_DIR
					      "/cluster/not-a-list.yaml"),
			 FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "expected a List"));
	assert_false(ft_app_ready(&app));
	assert_int_equal(ft_app_load_snapshot(&app, CLUSTER), 0);
	assert_true(ft_app_ready(&app));
	ft_app_dispose(&app);
}

static void test_extender__health_routes(void **state)
{
	ft_app_t *app = app_new();
	ft_app_t empty;
	ft_http_request_t req = {
	    .method = "GET", .path = "/readyz", .body = ""};
	ft_http_response_t res = {.status = 200};

	ft_app_readyz(&res, &req, app);
	assert_int_equal(res.status, 200);
	free(res.body);

	memset(&empty, 0, sizeof(empty));
	memset(&res, 0, sizeof(res));
	ft_app_readyz(&res, &req, &empty);
	assert_int_equal(res.status, 503);
	free(res.body);

	memset(&res, 0, sizeof(res));
	req.path = "/healthz";
	ft_app_healthz(&res, &req, app);
	assert_int_equal(res.status, 200);
	assert_string_equal(res.body, "ok\n");
	free(res.body);
	app_free(app);
}

#define NOT_SYNCED                                                             \
	"not in sync with the API server: waiting for a complete list of "     \
	"nodes, pods, poddisruptionbudgets"

/* POST `body` to `fn` and check a 503 "unavailable" error naming NOT_SYNCED. */
static void assert_unavailable(ft_app_t *app, ft_http_handler_fn fn,
			       const char *body)
{
	ft_http_response_t res;

	post(&res, app, fn, "/verb", body, strlen(body));
	assert_int_equal(res.status, 503);
	assert_string_equal(res.body,
			    "{\"error\":\"unavailable: " NOT_SYNCED "\"}");
	free(res.body);
}

/*
 * Truth before answers: a model that is not in sync (here: nodes and pods
 * applied, but no informer has delivered a complete list) answers no verb.
 * Filter answers its Error; prioritize and preempt answer 503; bind refuses
 * and assumes nothing.
 */
static void test_extender__verbs_refuse_until_synced(void **state)
{
	ft_app_t *app = app_new();
	char *pod = pod_json("nvl-a", "uid-nvl-a", 2, "nvlink");
	char *args = NULL, *error;
	ft_http_response_t res = {.status = 200};
	ft_http_request_t req = {.method = "GET", .path = "/readyz"};
	ft_state_stats_t st;
	cJSON *reply;

	atomic_store(&app->snapshot_loaded, false);
	/* Filter answers the Error: kube-scheduler retries after its backoff
	 * (nodes that fail would leave the pod waiting for a cluster event). */
	reply = filter(app, pod, "\"pairs-free\",\"ghost-0\"");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
			     reply, "NodeNames")),
			 0);
	assert_string_equal(
	    cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(reply, "Error")),
	    "flextopo: " NOT_SYNCED);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
			     reply, "FailedNodes")),
			 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
			     reply, "FailedAndUnresolvableNodes")),
			 0);
	cJSON_Delete(reply);
	if (asprintf(&args, "{\"Pod\":%s,\"NodeNames\":[\"pairs-free\"]}",
		     pod) < 0)
		fail_msg("out of memory");
	assert_unavailable(app, ft_app_prioritize, args);
	assert_unavailable(app, ft_app_preempt, args);
	error = bind_call(app, "nvl-a", "uid-nvl-a", "pairs-free");
	assert_string_equal(error, "pod train/nvl-a not bound: " NOT_SYNCED);
	free(error);
	ft_state_stats(app->state, &st);
	assert_int_equal(st.assumed, 0);
	ft_app_readyz(&res, &req, app);
	assert_int_equal(res.status, 503);
	assert_string_equal(res.body, NOT_SYNCED "\n");
	free(res.body);

	/* In sync again, the same requests are answered. */
	atomic_store(&app->snapshot_loaded, true);
	reply = filter(app, pod, "\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	cJSON_Delete(reply);
	bind_ok(app, "nvl-a", "uid-nvl-a", "pairs-free");
	free(args);
	free(pod);
	app_free(app);
}

/*
 * Preemption honours PodDisruptionBudgets: on pairs-busy, evicting holder-b2
 * (priority 0) frees an NVLink pair more cheaply than holder-b1 (100), until
 * a budget with no disruptions left covers holder-b2.
 */
static void test_extender__preempt_avoids_pdb(void **state)
{
	static const char pdb_b2[] =
	    "{\"metadata\":{\"name\":\"keep-b2\",\"namespace\":\"train\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"b2\"}}},\"status\":{\"disruptionsAllowed\":0}}";
	static const char pdb_all[] =
	    "{\"metadata\":{\"name\":\"keep-batch\",\"namespace\":\"train\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"batch\"]}]}},\"status\":{\"disruptionsAllowed\":0}}";
	static const char request[] =
	    "{\"Pod\":{\"metadata\":{\"name\":\"chat\",\"namespace\":\"online\",\"uid\":\"p-1\",\"annotations\":{\"flextopo.io/affinity\":\"nvlink\"}},\"spec\":{\"priority\":1000,\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"2\"}}}]}},\"NodeNameToMetaVictims\":{\"pairs-busy\":{\"Pods\":[],\"NumPDBViolations\":0}}}";
	ft_app_t *app = app_new();
	ft_http_response_t out;
	cJSON *obj;

	post(&out, app, ft_app_preempt, "/preempt", request, strlen(request));
	assert_non_null(
	    strstr(out.body, "0000000000b2\"}],\"NumPDBViolations\":0"));
	free(out.body);

	obj = cJSON_Parse(pdb_b2);
	ft_state_apply_pdb(app->state, obj);
	cJSON_Delete(obj);
	post(&out, app, ft_app_preempt, "/preempt", request, strlen(request));
	assert_non_null(
	    strstr(out.body, "0000000000b1\"}],\"NumPDBViolations\":0"));
	free(out.body);

	/* Both covered: the cheaper pod again, with its violation counted. */
	obj = cJSON_Parse(pdb_all);
	ft_state_apply_pdb(app->state, obj);
	cJSON_Delete(obj);
	post(&out, app, ft_app_preempt, "/preempt", request, strlen(request));
	assert_non_null(
	    strstr(out.body, "0000000000b2\"}],\"NumPDBViolations\":1"));
	free(out.body);
	app_free(app);
}

/*
 * Seed 000 end to end on shared.yaml: the 0.2 pod fills a leftover of the
 * pair holder-2x08 uses (packed), and 2 x 0.8 takes 8 replicas on each GPU
 * of the free NVLink pair; neither holds a GPU whole.
 */
static void test_extender__shared_ranks_and_leftover(void **state)
{
	ft_app_t *app = app_new_from(SHARED_CLUSTER);
	const char *small = "00000000-0000-4000-8000-0000000002b2";
	const char *ranks = "00000000-0000-4000-8000-0000000002b1";
	ft_holding_t h, again;
	char *annotation = NULL;
	ft_pod_t pod;

	bind_ok(app, "small-02", small, "h100-shared");
	assert_true(holding(app, "h100-shared", small, &h));
	assert_int_equal(h.gpus, 0);
	assert_int_equal(h.replicas[0] + h.replicas[1], 0);
	assert_int_equal(h.replicas[2] + h.replicas[3], 2);
	bind_ok(app, "ranks-2x08", ranks, "h100-shared");
	assert_true(holding(app, "h100-shared", ranks, &h));
	assert_int_equal(h.replicas[0], 8);
	assert_int_equal(h.replicas[1], 8);
	assert_int_equal(h.level, FT_LEVEL_NVLINK);
	assert_int_equal(gpus_used(app, "h100-shared"), 0);

	/* A retried bind keeps the replicas the pod holds, and names them. */
	bind_ok(app, "ranks-2x08", ranks, "h100-shared");
	assert_true(holding(app, "h100-shared", ranks, &again));
	assert_memory_equal(again.replicas, h.replicas, sizeof(h.replicas));
	assert_int_equal(ft_state_find_pod(app->state, ranks, &pod), 0);
	assert_int_equal(ft_state_assume(app->state, &pod, "h100-shared",
					 app->cfg.policy, &annotation),
			 0);
	assert_non_null(annotation);
	assert_non_null(strstr(annotation, "\"count\":8}"));
	free(annotation);
	ft_pod_dispose(&pod);
	app_free(app);
}

/* ---- binds against a fake API server -------------------------------- */

#define BINDING_NVL_A "POST /api/v1/namespaces/train/pods/nvl-a/binding "
#define GET_NVL_A     "GET /api/v1/namespaces/train/pods/nvl-a "
static const char *const nvl_a_pending[] = {
    "{\"metadata\":{\"name\":\"nvl-a\",\"namespace\":\"train\",\"uid\":\"uid-nvl-a\"},\"spec\":{\"containers\":[{\"name\":\"main\"}]},\"status\":{\"phase\":\"Pending\"}}",
    NULL};
static const char *const nvl_a_bound[] = {
    "{\"metadata\":{\"name\":\"nvl-a\",\"namespace\":\"train\",\"uid\":\"uid-nvl-a\"},\"spec\":{\"nodeName\":\"pairs-free\",\"containers\":[{\"name\":\"main\"}]},\"status\":{\"phase\":\"Pending\"}}",
    NULL};

/* The app of app_new() with its API client on `api` (requests cut at
 * `timeout_ms`); nvl-a, wanting an NVLink pair, seen in a filter. */
static ft_app_t *app_with_api(const ft_fake_api_t *api, long timeout_ms)
{
	ft_app_t *app = app_new();
	char *pod = pod_json("nvl-a", "uid-nvl-a", 2, "nvlink");
	cJSON *reply;

	app->kube = ft_fake_api_client(api, NULL, timeout_ms);
	reply = filter(app, pod, "\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	cJSON_Delete(reply);
	free(pod);
	return app;
}

static unsigned unsettled(ft_app_t *app)
{
	ft_state_stats_t st;

	ft_state_stats(app->state, &st);
	return st.unsettled;
}

/* POST `body` to `url` with curl, cut at `timeout_ms`: the status (0: no
 * answer), with the reply in *out when not NULL. */
static long http_post(char **out, const char *url, const char *body,
		      long timeout_ms)
{
	CURL *curl = curl_easy_init();
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	FILE *sink = out ? open_memstream(out, &(size_t){0}) : NULL;
	long status = 0;

	assert_non_null(curl);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
	if (curl_easy_perform(curl) == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (sink)
		fclose(sink);
	curl_slist_free_all(h);
	curl_easy_cleanup(curl);
	return status;
}

typedef struct {
	pthread_t thread;
	char url[96];
	char *reply;
	long status;
} bind_call_t;

static void *post_bind(void *arg)
{
	bind_call_t *c = arg;

	c->status = http_post(
	    &c->reply, c->url,
	    "{\"PodName\":\"nvl-a\",\"PodNamespace\":\"train\",\"PodUID\":\"uid-nvl-a\",\"Node\":\"pairs-free\"}",
	    20000);
	return NULL;
}

/* ---- DRA nodes (test/fixtures/cluster/dra.yaml) ------------------------- */

#define UID_NUMA_WORKER	 "8e9f0a1b-2c3d-4e5f-8a6b-7c8d9e0f1a2b"
#define UID_SPLIT_WORKER "8e9f0a1b-2c3d-4e5f-8a6b-00000000005a"
#define UID_WAITING_DRA	 "8e9f0a1b-2c3d-4e5f-8a6b-0000000000b0"

/* The object of `kind` named `name` of dra.yaml, as JSON text (heap). */
static char *dra_object(const char *kind_name, const char *name)
{
	char *text = ft_test_read_file(DRA_CLUSTER, NULL);
	const char *json = text ? strchr(text, '{') : NULL;
	cJSON *root = json ? cJSON_Parse(json) : NULL, *it;
	char *out = NULL;

	assert_non_null(root);
	cJSON_ArrayForEach (it,
			    cJSON_GetObjectItemCaseSensitive(root, "items")) {
		const cJSON *meta =
		    cJSON_GetObjectItemCaseSensitive(it, "metadata");
		const cJSON *kind =
		    cJSON_GetObjectItemCaseSensitive(it, "kind");
		if (!strcmp(kind->valuestring, kind_name) &&
		    !strcmp(cJSON_GetObjectItemCaseSensitive(meta, "name")
				->valuestring,
			    name))
			out = cJSON_PrintUnformatted(it);
	}
	cJSON_Delete(root);
	free(text);
	assert_non_null(out);
	return out;
}

static char *dra_pod(const char *name)
{
	return dra_object("Pod", name);
}

/*
 * On a DRA node the claims hold the GPUs: 0-6 are allocated (7 is free),
 * whoever uses them, and the pods there hold none of their own. A pod
 * whose unallocated claim asks two GPUs of the GPU DeviceClass does not fit
 * there; the device-plugin node beside it has all eight free.
 */
static void test_extender__dra_claims_hold_the_gpus(void **state)
{
	ft_app_t *app = app_new_from(DRA_CLUSTER);
	char *pod = dra_pod("waiting-dra");
	cJSON *reply;

	assert_int_equal(gpus_used(app, "dra-a100-0"), 0x7f);
	assert_int_equal(gpus_used(app, "dp-a100-0"), 0);
	assert_true(ft_state_node_dra(app->state, "dra-a100-0"));
	assert_false(ft_state_node_dra(app->state, "dp-a100-0"));
	reply = filter(app, pod, "\"dra-a100-0\",\"dp-a100-0\"");
	assert_false(passed(reply, "dra-a100-0"));
	assert_non_null(
	    strstr(failed_reason(reply, "dra-a100-0"), "need 2 GPUs"));
	assert_true(passed(reply, "dp-a100-0"));
	cJSON_Delete(reply);
	free(pod);
	app_free(app);
}

/*
 * Bind on a DRA node takes the GPUs DRA allocated (4 and 6, NUMA node 1)
 * and pins the pod's 8 CPUs on their NUMA node; a guaranteed numa pod
 * whose GPUs DRA put on two NUMA nodes is refused, saying so.
 */
static void test_extender__dra_bind_pins_cpus_near_dra_gpus(void **state)
{
	ft_app_t *app = app_new_from(DRA_CLUSTER);
	ft_holding_t h;
	char *error;

	error =
	    bind_in(app, "ml", "numa-worker", UID_NUMA_WORKER, "dra-a100-0");
	assert_string_equal(error, "");
	free(error);
	assert_true(holding(app, "dra-a100-0", UID_NUMA_WORKER, &h));
	assert_int_equal(h.gpus, 0);
	assert_int_equal(ft_cpuset_count(&h.cpus), 8);
	for (unsigned c = 0; c < 64; c++)
		assert_false(ft_cpuset_has(&h.cpus, c));
	assert_int_equal(h.numa_nodes, 0x2);
	assert_int_equal(gpus_used(app, "dra-a100-0"), 0x7f);

	error =
	    bind_in(app, "ml", "split-worker", UID_SPLIT_WORKER, "dra-a100-0");
	assert_non_null(strstr(error, "no numa domain holds the GPUs DRA "
				      "allocated (positions 0x28)"));
	free(error);
	assert_false(holding(app, "dra-a100-0", UID_SPLIT_WORKER, &h));
	app_free(app);
}

/*
 * The admission webhook over the state's DeviceClasses: a template whose
 * claims are guaranteed numa gets the numaNode constraint on its
 * gpu.nvidia.com request, not on a request of another class.
 */
static void test_extender__webhook_uses_watched_classes(void **state)
{
	ft_app_t *app = app_new_from(DRA_CLUSTER);
	const char *review = FT_TEST_REVIEW_NUMA_TEMPLATE;
	ft_http_response_t res;

	post(&res, app, ft_app_mutate, "/mutate", review, strlen(review));
	if (res.status != 200)
		fail_msg("%d %s", res.status, res.body);
	ft_test_assert_review_patch(res.body, res.body_len,
				    FT_TEST_REVIEW_NUMA_TEMPLATE_PATCH);
	free(res.body);
	post(&res, app, ft_app_mutate, "/mutate", "{}", 2);
	assert_int_equal(res.status, 400);
	free(res.body);
	app_free(app);
}

/*
 * Against an API server: bind reads the pod and its claim fresh (PreBind
 * has just written the claim) and POSTs the Binding with an allocation
 * that names exactly DRA's GPUs, marked as DRA's in its "dra" key, and
 * the CPUs of their NUMA node.
 */
static void test_extender__dra_bind_reads_claims_from_the_api(void **state)
{
	char *pod = dra_pod("numa-worker");
	char *claim = dra_object("ResourceClaim", "numa-pair");
	const char *const pod_chunks[] = {pod, NULL};
	const char *const claim_chunks[] = {claim, NULL};
	static const char *const created[] = {"{\"kind\":\"Status\"}", NULL};
	const ft_fake_step_t steps[] = {
	    {"GET /api/v1/namespaces/ml/pods/numa-worker ", "200 OK",
	     pod_chunks, FT_FAKE_END},
	    {"GET /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/numa-pair ",
	     "200 OK", claim_chunks, FT_FAKE_END},
	    {"POST /api/v1/namespaces/ml/pods/numa-worker/binding ",
	     "201 Created", created, FT_FAKE_END},
	};
	ft_app_t *app = app_new_from(DRA_CLUSTER);
	cJSON *binding, *alloc, *dra;
	ft_fake_api_t api;
	const char *value;
	char *error;

	ft_fake_api_start(&api, steps, 3);
	app->kube = ft_fake_api_client(&api, NULL, 3000);
	error =
	    bind_in(app, "ml", "numa-worker", UID_NUMA_WORKER, "dra-a100-0");
	assert_string_equal(error, "");
	free(error);
	ft_fake_api_finish(&api);
	binding = cJSON_Parse(ft_fake_request_body(api.requests[2]));
	value = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(binding, "metadata"),
			"annotations"),
		    "flextopo.io/allocation")
		    ->valuestring;
	alloc = cJSON_Parse(value);
	assert_non_null(alloc);
	dra = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(alloc, "dra"), "devices");
	if (cJSON_GetArraySize(dra) != 2)
		fail_msg("%s", value);
	assert_non_null(strstr(value, "\"gpuIndexes\":[4,6]"));
	assert_non_null(strstr(value, "\"device\":\"gpu-4\""));
	assert_non_null(strstr(value, "\"device\":\"gpu-6\""));
	assert_non_null(strstr(value, "\"claim\":\"ml/numa-pair\""));
	assert_non_null(strstr(value, "\"cpuset\":\"64-71\""));
	cJSON_Delete(alloc);
	cJSON_Delete(binding);
	ft_fake_api_dispose(&api);
	free(pod);
	free(claim);
	app_free(app);
}

/*
 * A slow API server does not stall the verbs: a bind whose Binding the API
 * server never answers holds its request for the client's 3 s, while a
 * server with a single worker thread answers filters at once (each must
 * come within 1 s). Then the outcome is unknown: the pair stays held
 * through a read that shows the pod unbound before bindSettleSeconds, and
 * is freed by one after.
 */
static void test_extender__slow_api_server_stalls_no_filter(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {BINDING_NVL_A, NULL, NULL, FT_FAKE_HANG},
	    {GET_NVL_A, "200 OK", nvl_a_pending, FT_FAKE_END},
	    {GET_NVL_A, "200 OK", nvl_a_pending, FT_FAKE_END},
	};
	ft_server_options_t opts = {
	    .listen = "127.0.0.1:0", .max_body_bytes = 1 << 20, .threads = 1};
	ft_fake_api_t api;
	ft_app_t *app = NULL;
	ft_server_t *server = NULL;
	bind_call_t bind = {0};
	char url[96], *pod = pod_json("nvl-b", "uid-nvl-b", 1, NULL), *args;
	ft_holding_t h;

	ft_fake_api_start(&api, steps, 3);
	app = app_with_api(&api, 3000);
	assert_int_equal(ft_server_new(&server, &opts), 0);
	assert_int_equal(ft_app_routes(app, server), 0);
	assert_int_equal(ft_server_start(server), 0);
	snprintf(bind.url, sizeof(bind.url), "http://127.0.0.1:%u/bind",
		 ft_server_port(server));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/filter",
		 ft_server_port(server));
	assert_int_equal(pthread_create(&bind.thread, NULL, post_bind, &bind),
			 0);
	ft_fake_api_wait(&api, 1);
	if (asprintf(&args, "{\"Pod\":%s,\"NodeNames\":[\"a100-0\"]}", pod) < 0)
		fail_msg("out of memory");
	/* Under the bind's 3 s, with room for valgrind (scripts/test.sh). */
	for (int i = 0; i < 5; i++) {
		char *reply = NULL;
		assert_int_equal(http_post(&reply, url, args, 2000), 200);
		assert_non_null(strstr(reply, "\"NodeNames\":[\"a100-0\"]"));
		free(reply);
	}
	pthread_join(bind.thread, NULL);
	assert_int_equal(bind.status, 200);
	assert_non_null(strstr(bind.reply, "outcome unknown"));
	assert_non_null(strstr(bind.reply, "stay held"));
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_true(h.assumed);
	assert_int_equal(h.gpus, 0xc);
	assert_int_equal(unsettled(app), 1);

	/* Unbound, and the API server may still be writing: held. */
	assert_int_equal(ft_upkeep_settle_binds(app), 0);
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	/* The request was sent over 3 s ago: past a 1 s settle time. */
	app->cfg.bind_settle_s = 1;
	assert_int_equal(ft_upkeep_settle_binds(app), 1);
	assert_false(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_int_equal(gpus_used(app, "pairs-free"), 0x1);
	assert_int_equal(unsettled(app), 0);
	ft_server_free(server);
	ft_fake_api_finish(&api);
	ft_fake_api_dispose(&api);
	free(bind.reply);
	free(args);
	free(pod);
	app_free(app);
}

/*
 * A Binding whose reply is cut short (a kube-apiserver killed as it
 * answered): the pair stays held, the pod is bound nowhere else meanwhile,
 * a read that fails settles nothing, and a read that shows the pod bound
 * there settles it as landed.
 */
static void test_extender__cut_bind_reply_keeps_the_pair(void **state)
{
	static const char *const status_500[] = {"{\"kind\":\"Status\"", NULL};
	static const ft_fake_step_t steps[] = {
	    {BINDING_NVL_A, "500 Internal Server Error", status_500,
	     FT_FAKE_CUT},
	    {GET_NVL_A, NULL, NULL, FT_FAKE_END},
	    {GET_NVL_A, "200 OK", nvl_a_bound, FT_FAKE_END},
	};
	ft_fake_api_t api;
	ft_app_t *app = NULL;
	char *error;
	ft_holding_t h;

	ft_fake_api_start(&api, steps, 3);
	app = app_with_api(&api, 3000);
	error = bind_call(app, "nvl-a", "uid-nvl-a", "pairs-free");
	assert_non_null(strstr(error, "outcome unknown (HTTP 500"));
	free(error);
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_int_equal(h.gpus, 0xc);
	/* kube-scheduler tries another node: refused until settled. */
	error = bind_call(app, "nvl-a", "uid-nvl-a", "a100-0");
	assert_non_null(strstr(error, "of unknown outcome"));
	free(error);
	assert_int_equal(ft_upkeep_settle_binds(app), 0);
	assert_int_equal(unsettled(app), 1);
	assert_int_equal(ft_upkeep_settle_binds(app), 1);
	assert_int_equal(unsettled(app), 0);
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_true(h.assumed); /* until the watch shows the pod */
	ft_fake_api_finish(&api);
	ft_fake_api_dispose(&api);
	app_free(app);
}

/* The reason `node` fails as unresolvable in a filter reply, or NULL. */
static const char *unresolvable_reason(const cJSON *reply, const char *node)
{
	const cJSON *failed = cJSON_GetObjectItemCaseSensitive(
	    reply, "FailedAndUnresolvableNodes");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(failed, node);

	return cJSON_IsString(reason) ? reason->valuestring : NULL;
}

/*
 * kube-scheduler retries a pod whose Binding went unanswered (a
 * kube-apiserver killed mid-request) before that is settled: the pod's node
 * passes filter although its pair is held, by the pod itself; every other
 * node fails, as bind would refuse it; another pod still finds the pair
 * taken. The retried bind there sends the same Binding, with the same
 * GPUs, and settles the assumption, instead of the pod waiting,
 * unschedulable, for bindSettleSeconds and then for an event to requeue it.
 */
static void test_extender__retry_after_unknown_bind_reuses_units(void **state)
{
	static const char *const status_500[] = {"{\"kind\":\"Status\"", NULL};
	static const char *const created[] = {"{\"kind\":\"Status\"}", NULL};
	static const ft_fake_step_t steps[] = {
	    {BINDING_NVL_A, "500 Internal Server Error", status_500,
	     FT_FAKE_CUT},
	    {BINDING_NVL_A, "201 Created", created, FT_FAKE_END},
	};
	char *a = pod_json("nvl-a", "uid-nvl-a", 2, "nvlink");
	char *b = pod_json("nvl-b", "uid-nvl-b", 2, "nvlink");
	ft_fake_api_t api;
	ft_app_t *app = NULL;
	cJSON *reply;
	char *error;
	ft_holding_t h;

	ft_fake_api_start(&api, steps, 2);
	app = app_with_api(&api, 3000);
	error = bind_call(app, "nvl-a", "uid-nvl-a", "pairs-free");
	assert_non_null(strstr(error, "outcome unknown"));
	free(error);

	reply = filter(app, a, "\"a100-0\",\"pairs-free\"");
	assert_true(passed(reply, "pairs-free"));
	assert_false(passed(reply, "a100-0"));
	assert_non_null(unresolvable_reason(reply, "a100-0"));
	assert_non_null(strstr(unresolvable_reason(reply, "a100-0"),
			       "Binding to node pairs-free is of unknown "
			       "outcome"));
	cJSON_Delete(reply);
	reply = filter(app, b, "\"pairs-free\"");
	assert_false(passed(reply, "pairs-free"));
	assert_string_equal(failed_reason(reply, "pairs-free"),
			    PAIRS_FREE_TAKEN);
	cJSON_Delete(reply);

	bind_ok(app, "nvl-a", "uid-nvl-a", "pairs-free");
	ft_fake_api_finish(&api);
	assert_string_equal(ft_fake_request_body(api.requests[0]),
			    ft_fake_request_body(api.requests[1]));
	assert_true(holding(app, "pairs-free", "uid-nvl-a", &h));
	assert_true(h.assumed); /* until the watch shows the pod */
	assert_int_equal(h.gpus, 0xc);
	assert_int_equal(unsettled(app), 0);
	/* Settled: a filter decides as for any pod again. */
	reply = filter(app, a, "\"a100-0\"");
	assert_true(passed(reply, "a100-0"));
	cJSON_Delete(reply);
	ft_fake_api_dispose(&api);
	app_free(app);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_extender__wire_filter),
	    cmocka_unit_test(test_extender__wire_prioritize),
	    cmocka_unit_test(test_extender__wire_bind),
	    cmocka_unit_test(test_extender__wire_preempt),
	    cmocka_unit_test(test_extender__wire_preempt_victims),
	    cmocka_unit_test(test_extender__wire_preempt_gangs),
	    cmocka_unit_test(test_extender__wire_filter_mig),
	    cmocka_unit_test(test_extender__wire_bind_mig),
	    cmocka_unit_test(test_extender__wire_filter_shared),
	    cmocka_unit_test(test_extender__wire_bind_shared),
	    cmocka_unit_test(test_extender__wire_filter_dra),
	    cmocka_unit_test(test_extender__wire_bind_dra),
	    cmocka_unit_test(test_extender__wire_preempt_dra),
	    cmocka_unit_test(test_extender__mig_policy_and_single_strategy),
	    cmocka_unit_test(test_extender__shared_ranks_and_leftover),
	    cmocka_unit_test(test_extender__preempt_avoids_pdb),
	    cmocka_unit_test(test_extender__bind_then_filter_sees_gpus_taken),
	    cmocka_unit_test(test_extender__dra_claims_hold_the_gpus),
	    cmocka_unit_test(test_extender__dra_bind_pins_cpus_near_dra_gpus),
	    cmocka_unit_test(test_extender__dra_bind_reads_claims_from_the_api),
	    cmocka_unit_test(test_extender__webhook_uses_watched_classes),
	    cmocka_unit_test(test_extender__bind_twice_is_idempotent),
	    cmocka_unit_test(test_extender__two_binds_get_disjoint_gpus),
	    cmocka_unit_test(
		test_extender__bind_that_no_longer_fits_names_shortfall),
	    cmocka_unit_test(test_extender__bind_of_pending_pod_from_snapshot),
	    cmocka_unit_test(test_extender__bind_mig_pod_holds_instances),
	    cmocka_unit_test(test_extender__concurrent_binds_are_disjoint),
	    cmocka_unit_test(test_extender__held_gpus_of_snapshot),
	    cmocka_unit_test(test_extender__load_snapshot_errors),
	    cmocka_unit_test(test_extender__health_routes),
	    cmocka_unit_test(test_extender__verbs_refuse_until_synced),
	    cmocka_unit_test(test_extender__slow_api_server_stalls_no_filter),
	    cmocka_unit_test(test_extender__cut_bind_reply_keeps_the_pair),
	    cmocka_unit_test(
		test_extender__retry_after_unknown_bind_reuses_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
