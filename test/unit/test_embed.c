/*
 * The embedding API (embed.h) as kube-scheduler's framework plugins use it,
 * held to the extender's own golden replies: for every wire case of filter,
 * prioritize and preempt (test/fixtures/wire, on the cluster the extender
 * test loads for it), the cluster is fed to an embedded state object by
 * object as JSON, as the plugins' informers feed it, and each node's
 * verdict, score and victims must be what the golden reply says the
 * extender answers. Then the cycle's other questions: assume and forget,
 * the preemption dry run's removed pods, refusals before the informers
 * sync, and the decisions recorded for the debug API.
 */
#include <pthread.h>
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

#include <flextopo/decisions.h>
#include <flextopo/embed.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>
#include <flextopo/log.h>
#include <flextopo/yamljson.h>

#include "fakeapi.h"
#include "support.h"

#define CLUSTER		FT_FIXTURES_DIR "/cluster/small.yaml"
#define MIG_CLUSTER	FT_FIXTURES_DIR "/cluster/mig.yaml"
#define SHARED_CLUSTER	FT_FIXTURES_DIR "/cluster/shared.yaml"
#define VICTIMS_CLUSTER FT_FIXTURES_DIR "/cluster/victims.yaml"
#define DRA_CLUSTER	FT_FIXTURES_DIR "/cluster/dra.yaml"

static const char *const kinds[FT_KIND_COUNT] = {
    "Node",	     "Pod",	      "PodDisruptionBudget",
    "ResourceSlice", "ResourceClaim", "DeviceClass"};

static ft_kind_t kind_of(const cJSON *item)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "kind");

	for (unsigned i = 0; cJSON_IsString(k) && i < FT_KIND_COUNT; i++)
		if (strcmp(k->valuestring, kinds[i]) == 0)
			return (ft_kind_t)i;
	fail_msg("item of kind %s", cJSON_IsString(k) ? k->valuestring : "?");
	return FT_KIND_COUNT;
}

static void feed_item(ft_embed_t *e, const cJSON *item)
{
	char *json = cJSON_PrintUnformatted(item);

	assert_non_null(json);
	assert_int_equal(ft_embed_apply(e, kind_of(item), json, strlen(json)),
			 0);
	free(json);
}

/* Feed `e` with `cluster` item by item, as the informers feed it: each
 * kind's first list bracketed, then synced. */
static ft_embed_t *embed_feed(ft_embed_t *e, const char *cluster)
{
	cJSON *root = NULL;
	const cJSON *item;

	ft_log_set_level(FT_LOG_ERROR);
	if (ft_yaml_file_to_json(&root, cluster) < 0)
		fail_msg("%s: %s", cluster, ft_error_last());
	for (unsigned k = 0; k < FT_KIND_COUNT; k++)
		ft_embed_list_begin(e, (ft_kind_t)k);
	cJSON_ArrayForEach (item, cJSON_GetObjectItem(root, "items"))
		feed_item(e, item);
	for (unsigned k = 0; k < FT_KIND_COUNT; k++)
		ft_embed_list_end(e, (ft_kind_t)k);
	cJSON_Delete(root);
	ft_embed_set_synced(e, true);
	return e;
}

/* An embedded state with the defaults, fed `cluster`. */
static ft_embed_t *embed_new_from(const char *cluster)
{
	ft_embed_t *e = NULL;

	assert_int_equal(ft_embed_new(&e, NULL), 0);
	return embed_feed(e, cluster);
}

static ft_embed_pod_t *pod_of(ft_embed_t *e, const cJSON *pod)
{
	char *json = cJSON_PrintUnformatted(pod);
	ft_embed_pod_t *p = NULL;

	assert_non_null(json);
	if (ft_embed_pod_new(&p, e, json, strlen(json)) < 0)
		fail_msg("pod: %s", ft_error_last());
	free(json);
	return p;
}

/* ---- the golden wire cases ---------------------------------------------
 */

typedef struct {
	const char *verb;    /* folder under test/fixtures/wire */
	const char *cluster; /* what the extender test loads for it */
	bool (*check)(ft_embed_t *e, const cJSON *request, const cJSON *reply);
} wire_t;

static const char *text_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The verdict and reason the golden filter reply gives `node`. */
static ft_fit_t golden_verdict(const cJSON *reply, const char *node,
			       const char **reason)
{
	const cJSON *failed = cJSON_GetObjectItem(reply, "FailedNodes");
	const cJSON *never =
	    cJSON_GetObjectItem(reply, "FailedAndUnresolvableNodes");

	*reason = "";
	if ((*reason = text_of(failed, node)))
		return FT_UNFIT;
	if ((*reason = text_of(never, node)))
		return FT_UNFIT_UNRESOLVABLE;
	*reason = "";
	return FT_FIT;
}

/* The embedded filter on each node of a filter request. */
static bool check_filter(ft_embed_t *e, const cJSON *request,
			 const cJSON *reply)
{
	const char *error = text_of(reply, "Error");
	const cJSON *name;
	ft_embed_pod_t *p = NULL;
	char *json =
	    cJSON_PrintUnformatted(cJSON_GetObjectItem(request, "Pod"));
	int rc = ft_embed_pod_new(&p, e, json, strlen(json));
	bool ok = true;

	free(json);
	if (error && error[0]) {
		ok = rc < 0 && strcmp(ft_error_last(), error) == 0;
		if (!ok)
			printf("      pod: rc %d \"%s\", want \"%s\"\n", rc,
			       rc < 0 ? ft_error_last() : "", error);
		ft_embed_pod_free(p);
		return ok;
	}
	assert_int_equal(rc, 0);
	cJSON_ArrayForEach (name, cJSON_GetObjectItem(request, "NodeNames")) {
		char reason[256];
		const char *want_reason;
		ft_fit_t want =
		    golden_verdict(reply, name->valuestring, &want_reason);
		ft_fit_t got = ft_embed_filter(p, name->valuestring,
					       strlen(name->valuestring), NULL,
					       0, reason, sizeof(reason));
		if (got == want && strcmp(reason, want_reason) == 0)
			continue;
		printf("      %s: %d \"%s\", want %d \"%s\"\n",
		       name->valuestring, got, reason, want, want_reason);
		ok = false;
	}
	ft_embed_pod_free(p);
	return ok;
}

/* NodeNames of a request back to back, as ft_embed_rank() takes them. */
static char *names_of(const cJSON *array, unsigned *n)
{
	const cJSON *v;
	size_t len = 0;
	char *out, *at;

	*n = 0;
	cJSON_ArrayForEach (v, array)
		len += strlen(v->valuestring) + 1;
	at = out = malloc(len + 1);
	assert_non_null(out);
	cJSON_ArrayForEach (v, array) {
		memcpy(at, v->valuestring, strlen(v->valuestring) + 1);
		at += strlen(v->valuestring) + 1;
		(*n)++;
	}
	return out;
}

/* The embedded ranks, spread over 0..10, against the golden scores. */
static bool check_prioritize(ft_embed_t *e, const cJSON *request,
			     const cJSON *reply)
{
	ft_embed_pod_t *p = pod_of(e, cJSON_GetObjectItem(request, "Pod"));
	unsigned n;
	char *names = names_of(cJSON_GetObjectItem(request, "NodeNames"), &n);
	int64_t *ranks = calloc(n + 1, sizeof(*ranks));
	int *scores = calloc(n + 1, sizeof(*scores));
	const cJSON *host;
	bool ok = true;
	unsigned i = 0;

	assert_int_equal(ft_embed_rank(p, names, n, ranks), 0);
	ft_scores_of_ranks(scores, ranks, n, FT_EXTENDER_SCORE_MAX);
	cJSON_ArrayForEach (host, reply) {
		int want = cJSON_GetObjectItem(host, "Score")->valueint;
		if (i >= n || scores[i] != want) {
			printf("      %s: score %d, want %d\n",
			       text_of(host, "Host"), i < n ? scores[i] : -1,
			       want);
			ok = false;
		}
		i++;
	}
	ok = ok && i == n;
	free(scores);
	free(ranks);
	free(names);
	ft_embed_pod_free(p);
	return ok;
}

/* UIDs of a victims entry back to back: Pods[].UID, or Pods[].metadata.uid
 * (full victim Pods). */
static char *uids_of(const cJSON *victims, unsigned *n)
{
	cJSON *array = cJSON_CreateArray();
	const cJSON *pod;
	char *out;

	cJSON_ArrayForEach (pod, cJSON_GetObjectItem(victims, "Pods")) {
		const char *uid = text_of(pod, "UID");
		if (!uid)
			uid = text_of(cJSON_GetObjectItem(pod, "metadata"),
				      "uid");
		cJSON_AddItemToArray(array, cJSON_CreateString(uid));
	}
	out = names_of(array, n);
	cJSON_Delete(array);
	return out;
}

/* NumPDBViolations as the codec reads it: clamped to 0..UINT32_MAX. */
static unsigned pdb_count(const cJSON *victims)
{
	double v =
	    cJSON_GetObjectItem(victims, "NumPDBViolations")->valuedouble;

	return v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (unsigned)v;
}

/* The golden reply's victims on a node against the embedded search's:
 * the victims it chose, or the scheduler's proposed ones it passed. */
static bool same_victims(const ft_embed_victims_t *got, const cJSON *proposed,
			 const cJSON *want)
{
	unsigned pdb = got->outcome == FT_PREEMPT_PASSED ? pdb_count(proposed)
							 : got->pdb_violations;
	unsigned n_want = 0, n_got = 0;
	char *want_uids = uids_of(want, &n_want);
	char *passed = uids_of(proposed, &n_got);
	const char *got_uids =
	    got->outcome == FT_PREEMPT_PASSED ? passed : got->uids;
	bool ok =
	    got->outcome != FT_PREEMPT_DROPPED &&
	    n_want == (got->outcome == FT_PREEMPT_PASSED ? n_got : got->n) &&
	    pdb == pdb_count(want);

	for (size_t at = 0, i = 0; ok && i < n_want; i++) {
		ok = strcmp(got_uids + at, want_uids + at) == 0;
		at += strlen(want_uids + at) + 1;
	}
	free(passed);
	free(want_uids);
	return ok;
}

static bool check_preempt(ft_embed_t *e, const cJSON *request,
			  const cJSON *reply)
{
	const cJSON *nodes =
	    cJSON_GetObjectItem(request, "NodeNameToMetaVictims");
	const cJSON *want_nodes =
	    cJSON_GetObjectItem(reply, "NodeNameToMetaVictims");
	ft_embed_pod_t *p = pod_of(e, cJSON_GetObjectItem(request, "Pod"));
	const cJSON *node;
	bool ok = true;

	if (cJSON_IsNull(nodes) || !nodes)
		nodes = cJSON_GetObjectItem(request, "NodeNameToVictims");
	cJSON_ArrayForEach (node, nodes) {
		const cJSON *want =
		    cJSON_GetObjectItem(want_nodes, node->string);
		ft_embed_victims_t got;
		unsigned n;
		char *proposed = uids_of(node, &n);
		bool same;

		assert_int_equal(ft_embed_victims(&got, p, node->string,
						  proposed, n, pdb_count(node)),
				 0);
		same = want ? same_victims(&got, node, want)
			    : got.outcome == FT_PREEMPT_DROPPED;
		if (!same) {
			printf("      %s: outcome %d, %u victims\n",
			       node->string, got.outcome, got.n);
			ok = false;
		}
		free(got.uids);
		free(proposed);
	}
	ft_embed_preempt_done(p);
	ft_embed_pod_free(p);
	return ok;
}

/* One case; a case answered with another HTTP status than 200 (a body the
 * codec refuses) or with Node objects (no cache) has no embedded twin. */
static bool run_wire_case(const char *name, void *payload)
{
	const wire_t *w = payload;
	char rel[512];
	char *request_text, *reply_text, *status;
	cJSON *request, *reply;
	ft_embed_t *e;
	bool ok = true;

	snprintf(rel, sizeof(rel), "wire/%s/%s.status", w->verb, name);
	if ((status = ft_test_read_fixture(rel, NULL))) {
		free(status);
		return true;
	}
	snprintf(rel, sizeof(rel), "wire/%s/%s.request.json", w->verb, name);
	request_text = ft_test_read_fixture(rel, NULL);
	snprintf(rel, sizeof(rel), "wire/%s/%s.reply.json", w->verb, name);
	reply_text = ft_test_read_fixture(rel, NULL);
	request = cJSON_Parse(request_text);
	reply = cJSON_Parse(reply_text);
	assert_non_null(request);
	assert_non_null(reply);
	if (!cJSON_IsObject(cJSON_GetObjectItem(request, "Nodes"))) {
		e = embed_new_from(w->cluster);
		ok = w->check(e, request, reply);
		ft_embed_free(e);
	}
	cJSON_Delete(request);
	cJSON_Delete(reply);
	free(request_text);
	free(reply_text);
	return ok;
}

static void run_wire(const wire_t *w)
{
	assert_int_equal(
	    ft_test_wire_cases(w->verb, "embedded ", run_wire_case, (void *)w),
	    0);
}

static void test_embed__filter_as_extender(void **state)
{
	const wire_t cases[] = {{"filter", CLUSTER, check_filter},
				{"filter-mig", MIG_CLUSTER, check_filter},
				{"filter-shared", SHARED_CLUSTER, check_filter},
				{"filter-dra", DRA_CLUSTER, check_filter}};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_wire(&cases[i]);
}

static void test_embed__rank_as_prioritize(void **state)
{
	const wire_t w = {"prioritize", CLUSTER, check_prioritize};

	run_wire(&w);
}

static void test_embed__victims_as_preempt(void **state)
{
	const wire_t cases[] = {
	    {"preempt", CLUSTER, check_preempt},
	    {"preempt-victims", VICTIMS_CLUSTER, check_preempt},
	    {"preempt-dra", DRA_CLUSTER, check_preempt}};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_wire(&cases[i]);
}

/* The item of `kind` in `items` whose metadata has `key` = `value`. */
static const cJSON *find_item(const cJSON *items, const char *kind,
			      const char *key, const char *value)
{
	const cJSON *item;

	cJSON_ArrayForEach (item, items) {
		const char *v =
		    text_of(cJSON_GetObjectItem(item, "metadata"), key);
		if (strcmp(text_of(item, "kind"), kind) == 0 && v &&
		    strcmp(v, value) == 0)
			return item;
	}
	return NULL;
}

/* The ResourceClaims of `root` that `obj`'s list `key` names by
 * resourceClaimName, added to `claims`. */
static void add_claims(cJSON *claims, const cJSON *root, const cJSON *obj,
		       const char *key)
{
	const cJSON *ref, *claim;

	cJSON_ArrayForEach (ref, cJSON_GetObjectItem(obj, key)) {
		const char *name = text_of(ref, "resourceClaimName");
		if (name &&
		    (claim = find_item(cJSON_GetObjectItem(root, "items"),
				       "ResourceClaim", "name", name)))
			cJSON_AddItemToArray(claims,
					     cJSON_Duplicate(claim, true));
	}
}

/*
 * A bind on a DRA node: Reserve leaves it to bind (1), and bind assumes the
 * pod around the devices of its claims as the extender's bind does, with
 * the same refusal.
 */
static bool check_bind_dra(ft_embed_t *e, const cJSON *request,
			   const cJSON *reply)
{
	cJSON *root = NULL, *claims = cJSON_CreateArray();
	const cJSON *pod;
	const char *node = text_of(request, "Node");
	const char *error = text_of(reply, "Error");
	char *pod_json, *claims_json, *annotation = NULL;
	ft_embed_pod_t *p;
	bool ok;
	int rc;

	assert_int_equal(ft_yaml_file_to_json(&root, DRA_CLUSTER), 0);
	pod = find_item(cJSON_GetObjectItem(root, "items"), "Pod", "uid",
			text_of(request, "PodUID"));
	assert_non_null(pod);
	add_claims(claims, root, cJSON_GetObjectItem(pod, "spec"),
		   "resourceClaims");
	add_claims(claims, root, cJSON_GetObjectItem(pod, "status"),
		   "resourceClaimStatuses");
	p = pod_of(e, pod);
	assert_int_equal(ft_embed_assume(p, node, &annotation), 1);
	pod_json = cJSON_PrintUnformatted(pod);
	claims_json = cJSON_PrintUnformatted(claims);
	rc = ft_embed_assume_dra(e, pod_json, strlen(pod_json), node,
				 claims_json, strlen(claims_json), &annotation);
	ok = error[0] ? rc < 0 && strcmp(ft_error_last(), error) == 0
		      : rc == 0 && annotation &&
			    strstr(annotation, "\"gpuIndexes\":[4,6]");
	if (!ok)
		printf("      rc %d \"%s\", want \"%s\"\n", rc,
		       rc < 0 ? ft_error_last() : annotation, error);
	free(annotation);
	free(claims_json);
	free(pod_json);
	ft_embed_pod_free(p);
	cJSON_Delete(claims);
	cJSON_Delete(root);
	return ok;
}

static void test_embed__bind_dra_as_extender(void **state)
{
	const wire_t w = {"bind-dra", DRA_CLUSTER, check_bind_dra};

	run_wire(&w);
}

/* ---- the rest of a cycle ------------------------------------------------
 */

/* A pending pod of namespace t asking `gpus` GPUs with `affinity`. */
static char *pending_pod(const char *name, const char *uid, int gpus,
			 const char *affinity, int priority)
{
	char *json = NULL;

	assert_true(
	    asprintf(
		&json,
		"{\"metadata\":{\"name\":\"%s\",\"namespace\":\"t\",\"uid\":\"%s\","
		"\"annotations\":{\"flextopo.io/affinity\":\"%s\"}},"
		"\"spec\":{\"priority\":%d,\"containers\":[{\"name\":\"c\","
		"\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"%d\"},"
		"\"limits\":{\"nvidia.com/gpu\":\"%d\"}}}]},"
		"\"status\":{\"phase\":\"Pending\"}}",
		name, uid, affinity, priority, gpus, gpus) > 0);
	return json;
}

static ft_embed_pod_t *new_pod(ft_embed_t *e, const char *name, const char *uid,
			       int gpus, const char *affinity, int priority)
{
	char *json = pending_pod(name, uid, gpus, affinity, priority);
	ft_embed_pod_t *p = NULL;

	if (ft_embed_pod_new(&p, e, json, strlen(json)) < 0)
		fail_msg("%s", ft_error_last());
	free(json);
	return p;
}

static ft_fit_t filter(ft_embed_pod_t *p, const char *node)
{
	char reason[256];

	return ft_embed_filter(p, node, strlen(node), NULL, 0, reason,
			       sizeof(reason));
}

/*
 * pairs-free has one free NVLink pair: the first pod assumed there takes
 * it, and a pod of the next cycle no longer fits; forgetting the first
 * frees it again. The annotation names the pair.
 */
static void test_embed__assume_and_forget(void **state)
{
	ft_embed_t *e = embed_new_from(CLUSTER);
	ft_embed_pod_t *a = new_pod(e, "a", "uid-a", 2, "nvlink", 0);
	ft_embed_pod_t *b;
	char *annotation = NULL;
	cJSON *alloc;

	assert_int_equal(filter(a, "pairs-free"), FT_FIT);
	assert_int_equal(ft_embed_assume(a, "pairs-free", &annotation), 0);
	assert_non_null(annotation);
	alloc = cJSON_Parse(annotation);
	assert_string_equal(text_of(alloc, "node"), "pairs-free");
	assert_string_equal(text_of(alloc, "level"), "nvlink");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(alloc, "gpus")),
			 2);
	cJSON_Delete(alloc);
	free(annotation);

	b = new_pod(e, "b", "uid-b", 2, "nvlink", 0);
	assert_int_equal(filter(b, "pairs-free"), FT_UNFIT);
	ft_embed_pod_free(b);

	ft_embed_forget(e, "uid-a");
	b = new_pod(e, "b", "uid-b", 2, "nvlink", 0);
	assert_int_equal(filter(b, "pairs-free"), FT_FIT);
	ft_embed_pod_free(b);
	ft_embed_pod_free(a);
	ft_embed_free(e);
}

/*
 * kube-scheduler's preemption dry run removes lower-priority pods from a
 * copy of the node and filters again: pairs-busy's pairs are held by pods
 * of the cluster, and once their uids are removed the pair fits.
 */
static void test_embed__filter_without_removed_pods(void **state)
{
	ft_embed_t *e = embed_new_from(CLUSTER);
	ft_embed_pod_t *p = new_pod(e, "big", "uid-big", 2, "nvlink", 1000);
	ft_embed_victims_t v;
	char reason[256];

	assert_int_equal(filter(p, "pairs-busy"), FT_UNFIT);
	assert_int_equal(ft_embed_victims(&v, p, "pairs-busy", "", 0, 0), 0);
	assert_int_equal(v.outcome, FT_PREEMPT_VICTIMS);
	assert_true(v.n > 0);
	assert_int_equal(ft_embed_filter(p, "pairs-busy", strlen("pairs-busy"),
					 v.uids, v.n, reason, sizeof(reason)),
			 FT_FIT);
	/* A uid that holds nothing there changes nothing. */
	assert_int_equal(ft_embed_filter(p, "pairs-busy", strlen("pairs-busy"),
					 "no-such-uid", 1, reason,
					 sizeof(reason)),
			 FT_UNFIT);
	free(v.uids);
	ft_embed_preempt_done(p);
	ft_embed_pod_free(p);
	ft_embed_free(e);
}

/* Before the informers have synced every pod is refused, and the refusal
 * is a filter decision as the extender's is. */
static void test_embed__refused_until_synced(void **state)
{
	ft_embed_t *e = NULL;
	ft_embed_pod_t *p = NULL;
	char *json = pending_pod("early", "uid-early", 1, "numa", 0);
	ft_decision_t recorded[4];

	assert_int_equal(ft_embed_new(&e, NULL), 0);
	ft_log_set_level(FT_LOG_ERROR);
	assert_int_equal(ft_embed_pod_new(&p, e, json, strlen(json)),
			 FT_EUNAVAIL);
	assert_null(p);
	assert_non_null(strstr(ft_error_last(), "not in sync"));
	assert_int_equal(
	    ft_decisions_recent(recorded, 4, ft_embed_app(e)->decisions), 1);
	assert_true(recorded[0].failed);
	ft_embed_set_synced(e, true);
	assert_int_equal(ft_embed_pod_new(&p, e, json, strlen(json)), 0);
	assert_true(ft_embed_pod_wants_topology(p));
	ft_embed_pod_free(p);
	free(json);
	ft_embed_free(e);
}

static ft_embed_t *embed_of_config(const char *yaml)
{
	char path[] = "/tmp/flextopo-embed-XXXXXX";
	int fd = mkstemp(path);
	ft_embed_t *e = NULL;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	assert_int_equal(ft_embed_new(&e, path), 0);
	unlink(path);
	return e;
}

/*
 * metricsListen in the scheduler process: /metrics over HTTPS to a bearer
 * token the API server reviews, as the extender serves it. The client for
 * the reviews comes from kubeconfig: one that cannot be read is named.
 */
static void test_embed__metrics_listener(void **state)
{
	static const char *const reviewed[] = {
	    "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"system:serviceaccount:monitoring:prometheus\",\"groups\":[]}}}",
	    NULL};
	static const char *const allowed[] = {"{\"status\":{\"allowed\":true}}",
					      NULL};
	static const ft_fake_step_t steps[] = {
	    {"POST /apis/authentication.k8s.io/v1/tokenreviews ", "201 Created",
	     reviewed, FT_FAKE_END},
	    {"POST /apis/authorization.k8s.io/v1/subjectaccessreviews ",
	     "201 Created", allowed, FT_FAKE_END},
	};
	ft_embed_t *e =
	    embed_of_config("logLevel: error\nmetricsListen: 127.0.0.1:0\n"
			    "kubeconfig: /nonexistent/kubeconfig\n");
	ft_fake_api_t api;
	char *body = NULL;

	(void)state;
	assert_int_not_equal(ft_embed_serve(e), 0);
	assert_non_null(strstr(ft_error_last(), "/nonexistent/kubeconfig"));
	ft_embed_free(e);

	e = embed_of_config("logLevel: error\nmetricsListen: 127.0.0.1:0\n");
	ft_fake_api_start(&api, steps, 2);
	ft_embed_app(e)->kube = ft_fake_api_client(&api, NULL, 5000);
	ft_embed_set_synced(e, true);
	assert_int_equal(ft_embed_serve(e), 0);
	assert_int_equal(ft_test_scrape_metrics(
			     ft_server_port(ft_embed_app(e)->metrics_server),
			     "prometheus-token", &body),
			 200);
	assert_non_null(strstr(body, "flextopo_ready 1"));
	free(body);
	ft_fake_api_finish(&api);
	ft_fake_api_dispose(&api);
	ft_embed_free(e);
}

/*
 * webhookListen in the scheduler process: POST /mutate over HTTPS with
 * webhookCertFile/webhookKeyFile answers an AdmissionReview from the
 * DeviceClasses the host fed, as the extender's webhook answers it.
 */
static void test_embed__admission_webhook(void **state)
{
	char dir[64], yaml[512];
	ft_embed_t *e;
	char *body = NULL;

	(void)state;
	if (!ft_test_make_cert(dir, sizeof(dir))) {
		print_message(
		    "openssl not found: the webhook case is skipped\n");
		return;
	}
	snprintf(yaml, sizeof(yaml),
		 "logLevel: error\nwebhookListen: 127.0.0.1:0\n"
		 "webhookCertFile: %s/tls.crt\nwebhookKeyFile: %s/tls.key\n",
		 dir, dir);
	e = embed_feed(embed_of_config(yaml), DRA_CLUSTER);
	assert_int_equal(ft_embed_serve(e), 0);
	/* Neither the debug nor the metrics listener, nor an API client. */
	assert_null(ft_embed_app(e)->debug_server);
	assert_null(ft_embed_app(e)->metrics_server);
	assert_null(ft_embed_app(e)->kube);
	assert_int_equal(
	    ft_test_https(ft_server_port(ft_embed_app(e)->webhook_server),
			  "/mutate", NULL, FT_TEST_REVIEW_NUMA_TEMPLATE, &body),
	    200);
	ft_test_assert_review_patch(body, strlen(body),
				    FT_TEST_REVIEW_NUMA_TEMPLATE_PATCH);
	free(body);
	assert_int_equal(
	    ft_test_https(ft_server_port(ft_embed_app(e)->webhook_server),
			  "/mutate", NULL, "{}", &body),
	    400);
	free(body);
	ft_embed_free(e);
	ft_test_remove_cert(dir);
}

static void test_embed__bad_objects(void **state)
{
	ft_embed_t *e = embed_new_from(CLUSTER);
	ft_embed_pod_t *p = NULL;
	const char *plain =
	    "{\"metadata\":{\"name\":\"plain\",\"namespace\":"
	    "\"t\",\"uid\":\"u\"},\"spec\":{\"containers\":[]}}";

	assert_int_equal(ft_embed_apply(e, FT_KIND_POD, "{", 1), FT_EINVAL);
	assert_int_equal(ft_embed_apply(e, FT_KIND_COUNT, "{}", 2), FT_EINVAL);
	assert_int_equal(ft_embed_pod_new(&p, e, "[]", 2), FT_EINVAL);
	assert_int_equal(ft_embed_pod_new(&p, e, plain, strlen(plain)), 0);
	assert_false(ft_embed_pod_wants_topology(p));
	ft_embed_pod_free(p);
	/* A deleted node is no longer in the next cycle's snapshot. */
	assert_int_equal(
	    ft_embed_delete(e, FT_KIND_NODE,
			    "{\"metadata\":{\"name\":\"pairs-free\"}}", 37),
	    0);
	p = new_pod(e, "a", "uid-a", 2, "nvlink", 0);
	assert_int_equal(filter(p, "pairs-free"), FT_UNFIT);
	ft_embed_pod_free(p);
	ft_embed_free(e);
}

/*
 * One cycle leaves the decisions the extender's verbs leave: filter (its
 * rows gathered from the parallel Filter calls), prioritize, and bind.
 */
static void test_embed__decisions(void **state)
{
	ft_embed_t *e = embed_new_from(CLUSTER);
	ft_embed_pod_t *p = new_pod(e, "a", "uid-a", 2, "nvlink", 0);
	const char names[] = "pairs-free\0a100-0";
	ft_decision_t d[4];
	char *annotation = NULL;
	int64_t ranks[2];

	assert_int_equal(filter(p, "pairs-free"), FT_FIT);
	assert_int_equal(filter(p, "a100-0"), FT_FIT);
	assert_int_equal(filter(p, "rtx4090-0"), FT_UNFIT_UNRESOLVABLE);
	assert_int_equal(ft_embed_rank(p, names, 2, ranks), 0);
	assert_true(ranks[0] != FT_RANK_NONE && ranks[1] != FT_RANK_NONE);
	assert_int_equal(ft_embed_assume(p, "a100-0", &annotation), 0);
	ft_embed_bound(p, "a100-0", 0, NULL, 1000);
	free(annotation);
	ft_embed_pod_free(p);
	assert_int_equal(ft_decisions_recent(d, 4, ft_embed_app(e)->decisions),
			 3);
	/* Newest first. */
	assert_int_equal(d[0].verb, FT_VERB_BIND);
	assert_false(d[0].failed);
	assert_int_equal(d[1].verb, FT_VERB_PRIORITIZE);
	assert_int_equal(d[1].n_nodes_total, 2);
	assert_int_equal(d[2].verb, FT_VERB_FILTER);
	assert_int_equal(d[2].n_nodes_total, 3);
	assert_int_equal(d[2].counts[FT_VERDICT_UNRESOLVABLE], 1);
	ft_embed_free(e);
}

typedef struct {
	ft_embed_pod_t *pod;
	ft_fit_t want[2];
	bool same;
} filter_run_t;

static void *filter_many(void *arg)
{
	filter_run_t *r = arg;
	static const char *const nodes[2] = {"pairs-free", "rtx4090-0"};

	for (unsigned i = 0; i < 2000; i++)
		r->same &= filter(r->pod, nodes[i % 2]) == r->want[i % 2];
	return NULL;
}

/*
 * kube-scheduler filters nodes in parallel while its informers feed the
 * model and the next cycles assume: one pod's verdicts stay those of its
 * snapshot throughout (run under ThreadSanitizer by scripts/test.sh).
 */
static void test_embed__parallel_filter(void **state)
{
	ft_embed_t *e = embed_new_from(CLUSTER);
	ft_embed_pod_t *p = new_pod(e, "a", "uid-a", 2, "nvlink", 0);
	filter_run_t runs[4];
	pthread_t threads[4];
	char uid[32], *annotation = NULL;

	for (unsigned t = 0; t < 4; t++) {
		runs[t] =
		    (filter_run_t){p, {FT_FIT, FT_UNFIT_UNRESOLVABLE}, true};
		assert_int_equal(
		    pthread_create(&threads[t], NULL, filter_many, &runs[t]),
		    0);
	}
	/* Meanwhile other pods take and free pairs-free's pair. */
	for (unsigned i = 0; i < 50; i++) {
		ft_embed_pod_t *o;
		snprintf(uid, sizeof(uid), "uid-o%u", i);
		o = new_pod(e, "o", uid, 2, "nvlink", 0);
		if (ft_embed_assume(o, "pairs-free", &annotation) == 0)
			ft_embed_forget(e, uid);
		free(annotation);
		annotation = NULL;
		ft_embed_pod_free(o);
	}
	for (unsigned t = 0; t < 4; t++) {
		assert_int_equal(pthread_join(threads[t], NULL), 0);
		assert_true(runs[t].same);
	}
	ft_embed_pod_free(p);
	ft_embed_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_embed__filter_as_extender),
	    cmocka_unit_test(test_embed__rank_as_prioritize),
	    cmocka_unit_test(test_embed__victims_as_preempt),
	    cmocka_unit_test(test_embed__bind_dra_as_extender),
	    cmocka_unit_test(test_embed__assume_and_forget),
	    cmocka_unit_test(test_embed__filter_without_removed_pods),
	    cmocka_unit_test(test_embed__refused_until_synced),
	    cmocka_unit_test(test_embed__metrics_listener),
	    cmocka_unit_test(test_embed__admission_webhook),
	    cmocka_unit_test(test_embed__bad_objects),
	    cmocka_unit_test(test_embed__decisions),
	    cmocka_unit_test(test_embed__parallel_filter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
