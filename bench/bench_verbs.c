/*
 * Filter and prioritize of flextopo-bench (bench_verbs.h): how fast the
 * extender answers kube-scheduler for one pod, and where that time goes.
 *
 * Over HTTP: /filter then /prioritize for one pod at a time over the run's
 * keep-alive connection, with NodeNames naming all N nodes as
 * kube-scheduler sends them to a nodeCacheCapable extender; each iteration
 * a new pod, rotating through shapes[]; every reply checked (filter names
 * each node once, prioritize scores each node 0..10). Then a GET /healthz,
 * the transport's fixed cost. Without HTTP: the route handlers called
 * directly, and each of their parts: decoding the request JSON, looking
 * the N names up in the snapshot, the placement sweeps (ft_place_filter,
 * ft_place_score over every node) and the two reply encoders.
 */
#include "bench_verbs.h"

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/place.h>
#include <flextopo/state.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* The aims of bench/README.md: p99 of filter plus prioritize. */
#define TARGET_SMALL_P99_US 500.0
#define TARGET_LARGE_P99_US 2000.0

struct bench_verbs {
	request_t reqs[SHAPES];
	/* For the timings without HTTP: */
	ft_extender_args_t args[SHAPES]; /* the requests decoded */
	ft_pod_t pods[SHAPES];		 /* their pods decoded */
	ft_verdict_t *verdicts;		 /* per node, last filter sweep */
	int *scores;			 /* per node, last score sweep */
	unsigned iterations, warmup;
};

/* ExtenderArgs for shape `s` with NodeNames naming every node. */
static int request_build(request_t *out, const run_t *run, const shape_t *s)
{
	cJSON *root = cJSON_CreateObject(), *names;

	cJSON_AddItemToObject(root, "Pod",
			      synth_request_pod(s, &run->app.opts, 0));
	names = cJSON_AddArrayToObject(root, "NodeNames");
	for (unsigned i = 0; i < run->n; i++)
		cJSON_AddItemToArray(names, cJSON_CreateString(run->names[i]));
	cJSON_AddNullToObject(root, "Nodes");
	return bench_request_print(out, root);
}

static int build_requests(run_t *run, bench_verbs_t *verbs)
{
	for (unsigned s = 0; s < SHAPES; s++)
		if (request_build(&verbs->reqs[s], run, &shapes[s]) < 0)
			return bench_fail(run->r, "request %s: cannot build",
					  shapes[s].name);
	run->r->request_kib = (double)verbs->reqs[0].len / 1024.0;
	return 0;
}

/* The pod of iteration `it`: a new one each time unless --fixed-uids. */
static request_t *next_request(run_t *run, bench_verbs_t *verbs, unsigned it)
{
	request_t *q = &verbs->reqs[it % SHAPES];

	bench_run_name_pod(run, q, it % SHAPES);
	return q;
}

/* ---- reply checks ---- */

static int count_of(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return 0;
	return cJSON_IsObject(v) || cJSON_IsArray(v) ? cJSON_GetArraySize(v)
						     : -1;
}

/* An ExtenderFilterResult naming each of the `n` nodes once, no Error. */
static int check_filter(result_t *r, unsigned *passed, const char *reply,
			unsigned n)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "Error");
	int names =
	    count_of(cJSON_GetObjectItemCaseSensitive(root, "NodeNames"));
	int failed =
	    count_of(cJSON_GetObjectItemCaseSensitive(root, "FailedNodes"));
	int unresolvable = count_of(cJSON_GetObjectItemCaseSensitive(
	    root, "FailedAndUnresolvableNodes"));
	int rc = 0;

	if (!cJSON_IsObject(root) || names < 0 || failed < 0 ||
	    unresolvable < 0)
		rc = bench_fail(
		    r, "filter: not an ExtenderFilterResult: %.300s", reply);
	else if (cJSON_IsString(error) && error->valuestring[0])
		rc = bench_fail(r, "filter: Error \"%s\"", error->valuestring);
	else if ((unsigned)(names + failed + unresolvable) != n)
		rc = bench_fail(
		    r,
		    "filter: %d passed + %d failed + %d unresolvable nodes, sent %u",
		    names, failed, unresolvable, n);
	*passed = names > 0 ? (unsigned)names : 0;
	cJSON_Delete(root);
	return rc;
}

/* A HostPriorityList of `n` hosts with scores 0..10. */
static int check_scores(result_t *r, const char *reply, unsigned n)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *item;
	int rc = 0;

	if (!cJSON_IsArray(root) || (unsigned)cJSON_GetArraySize(root) != n)
		rc = bench_fail(r, "prioritize: expected %u scores: %.300s", n,
				reply);
	cJSON_ArrayForEach (item, root) {
		const cJSON *host =
		    cJSON_GetObjectItemCaseSensitive(item, "Host");
		const cJSON *score =
		    cJSON_GetObjectItemCaseSensitive(item, "Score");
		if (rc == 0 &&
		    (!cJSON_IsString(host) || !cJSON_IsNumber(score) ||
		     score->valuedouble < 0 || score->valuedouble > 10))
			rc = bench_fail(
			    r, "prioritize: bad HostPriority in %.300s", reply);
	}
	cJSON_Delete(root);
	return rc;
}

/* ---- measurements ---- */

/* Sorted samples -> one table row. */
static void add_row(result_t *r, const char *verb, double *v, unsigned n)
{
	bench_append_row(r->rows, &r->n_rows, ROWS_MAX, verb, v, n);
}

/* Filter then prioritize for one pod over HTTP, both replies checked. */
static int http_pair(run_t *run, bench_verbs_t *verbs, unsigned it, double *tf,
		     double *tp, unsigned *passed)
{
	bench_client_t *c = &run->client;
	request_t *q = next_request(run, verbs, it);
	result_t *r = run->r;
	unsigned k = it < verbs->warmup ? 0 : verbs->iterations;

	if (bench_run_request(run, "/filter", q, tf) < 0 ||
	    check_filter(r, passed, c->reply, run->n) < 0)
		return -1;
	if (k)
		r->filter_reply_kib += (double)c->reply_len / 1024.0 / k;
	if (bench_run_request(run, "/prioritize", q, tp) < 0 ||
	    check_scores(r, c->reply, run->n) < 0)
		return -1;
	if (k)
		r->prioritize_reply_kib += (double)c->reply_len / 1024.0 / k;
	return 0;
}

/* GET /healthz on the same connection: the transport's fixed cost. */
static int run_floor(run_t *run, bench_verbs_t *verbs, double *v)
{
	double us;

	for (unsigned it = 0; it < verbs->warmup + verbs->iterations; it++) {
		if (bench_run_request(run, "/healthz", NULL, &us) < 0)
			return -1;
		if (it >= verbs->warmup)
			v[it - verbs->warmup] = us;
	}
	add_row(run->r, "http GET /healthz (floor)", v, verbs->iterations);
	return 0;
}

static int run_http(run_t *run, bench_verbs_t *verbs)
{
	unsigned counted[SHAPES] = {0}, passed;
	result_t *r = run->r;
	series_t s;
	int rc;

	if ((rc = bench_series_init(&s, r, verbs->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < verbs->warmup + verbs->iterations; it++) {
		unsigned j = it - verbs->warmup;
		double tf, tp;
		if ((rc = http_pair(run, verbs, it, &tf, &tp, &passed)) < 0)
			goto cleanup;
		if (it < verbs->warmup)
			continue;
		s.v[0][j] = tf;
		s.v[1][j] = tp;
		s.v[2][j] = tf + tp;
		r->passed[it % SHAPES] += (double)passed / run->n;
		counted[it % SHAPES]++;
	}
	for (unsigned k = 0; k < SHAPES; k++)
		r->passed[k] = counted[k] ? r->passed[k] / counted[k] : 0;
	add_row(r, "http filter", s.v[0], s.n);
	add_row(r, "http prioritize", s.v[1], s.n);
	add_row(r, "http filter+prioritize", s.v[2], s.n);
	rc = run_floor(run, verbs, s.v[3]);
	r->connects = run->client.connects;
	r->requests = run->client.requests;
cleanup:
	bench_series_dispose(&s);
	return rc;
}

static int run_handlers(run_t *run, bench_verbs_t *verbs)
{
	series_t s;
	int rc;

	if ((rc = bench_series_init(&s, run->r, verbs->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < verbs->warmup + verbs->iterations; it++) {
		unsigned j = it - verbs->warmup;
		request_t *q = next_request(run, verbs, it);
		double tf, tp;
		if ((rc = bench_run_call_handler(run, ft_app_filter, "/filter",
						 q, &tf)) < 0 ||
		    (rc = bench_run_call_handler(run, ft_app_prioritize,
						 "/prioritize", q, &tp)) < 0)
			goto cleanup;
		if (it < verbs->warmup)
			continue;
		s.v[0][j] = tf;
		s.v[1][j] = tp;
	}
	add_row(run->r, "handler filter (no HTTP)", s.v[0], s.n);
	add_row(run->r, "handler prioritize (no HTTP)", s.v[1], s.n);
cleanup:
	bench_series_dispose(&s);
	return rc;
}

/*
 * The N names looked up, in a shuffled order, each time after a sweep over
 * more memory than the caches hold: kube-scheduler's Filter asks flextopo
 * for one node at a time between its own plugins, whose work evicts the
 * index. `s` is filled in v[0].
 */
static int run_lookup_cold(run_t *run, const ft_snapshot_t *snap, series_t *s)
{
	enum { EVICT_BYTES = 64 << 20 };
	unsigned char *evict = malloc(EVICT_BYTES);
	unsigned *order = malloc(run->n * sizeof(*order));
	volatile unsigned sink = 0;
	uint64_t rng = 1;
	int rc = 0;

	if (!evict || !order) {
		rc = bench_fail(run->r, "out of memory");
		goto cleanup;
	}
	shuffle(order, run->n, &rng);
	for (unsigned it = 0; it < s->n; it++) {
		double t0;
		memset(evict, (int)it, EVICT_BYTES);
		t0 = now_us();
		for (unsigned i = 0; i < run->n; i++)
			sink += ft_snapshot_find(snap, run->names[order[i]]) !=
				NULL;
		s->v[0][it] = now_us() - t0;
	}
	if (sink != s->n * run->n)
		rc = bench_fail(run->r, "snapshot: %u of %u names", sink,
				s->n * run->n);
cleanup:
	free(order);
	free(evict);
	return rc;
}

/* Parse the request bodies, and look the N names up in the snapshot. */
static int run_decode_lookup(run_t *run, bench_verbs_t *verbs)
{
	ft_snapshot_t *snap = ft_state_snapshot(run->app.state);
	ft_extender_args_t args;
	series_t s;
	int rc;

	if ((rc = bench_series_init(&s, run->r, verbs->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < verbs->warmup + verbs->iterations; it++) {
		const request_t *q = &verbs->reqs[it % SHAPES];
		unsigned found = 0;
		double t0 = now_us(), t1;
		if ((rc = ft_codec_extender_args_decode(&args, q->body,
							q->len)) < 0) {
			rc = bench_fail(run->r, "decode: %s", ft_error_last());
			goto cleanup;
		}
		ft_codec_extender_args_dispose(&args);
		t1 = now_us();
		for (unsigned i = 0; i < run->n; i++)
			found += ft_snapshot_find(snap, run->names[i]) != NULL;
		if (found != run->n) {
			rc = bench_fail(run->r, "snapshot: %u of %u names",
					found, run->n);
			goto cleanup;
		}
		if (it >= verbs->warmup) {
			s.v[0][it - verbs->warmup] = t1 - t0;
			s.v[1][it - verbs->warmup] = now_us() - t1;
		}
	}
	add_row(run->r, "decode request JSON", s.v[0], s.n);
	add_row(run->r, "look up N names in snapshot", s.v[1], s.n);
	if ((rc = run_lookup_cold(run, snap, &s)) < 0)
		goto cleanup;
	add_row(run->r, "look up N names, cold caches", s.v[0], s.n);
cleanup:
	bench_series_dispose(&s);
	ft_snapshot_unref(snap);
	return rc;
}

/* The shapes' requests and pods, decoded once. */
static int decode_shapes(run_t *run, bench_verbs_t *verbs)
{
	for (unsigned k = 0; k < SHAPES; k++) {
		int rc = ft_codec_extender_args_decode(
		    &verbs->args[k], verbs->reqs[k].body, verbs->reqs[k].len);
		if (rc == 0)
			rc = ft_codec_pod_decode(&verbs->pods[k],
						 verbs->args[k].pod,
						 &run->app.opts);
		if (rc < 0)
			return bench_fail(run->r, "shape %s: %s",
					  shapes[k].name, ft_error_last());
		if (verbs->pods[k].demand_error)
			return bench_fail(run->r, "shape %s: %s",
					  shapes[k].name,
					  verbs->pods[k].demand_error);
	}
	return 0;
}

/* The sweeps' verdicts and scores per node, and the shapes decoded. */
static int core_setup(run_t *run, bench_verbs_t *verbs)
{
	verbs->verdicts = calloc(run->n, sizeof(*verbs->verdicts));
	verbs->scores = calloc(run->n, sizeof(*verbs->scores));
	if (!verbs->verdicts || !verbs->scores)
		return bench_fail(run->r, "core: out of memory");
	return decode_shapes(run, verbs);
}

/* The filter reply of the last filter sweep, as the handler builds it. */
static int encode_filter(run_t *run, bench_verbs_t *verbs, unsigned k)
{
	ft_filter_reply_t *fr = NULL;
	char *body = NULL;
	int rc = ft_codec_filter_reply_new(&fr, &verbs->args[k]);

	for (unsigned i = 0; rc == 0 && i < run->n; i++) {
		const ft_verdict_t *v = &verbs->verdicts[i];
		rc = v->fit == FT_FIT ? ft_codec_filter_reply_pass(fr, i)
				      : ft_codec_filter_reply_fail(
					    fr, i, v->reason,
					    v->fit == FT_UNFIT_UNRESOLVABLE);
	}
	if (rc == 0) {
		rc = ft_codec_filter_reply_finish(&body, fr);
		fr = NULL;
	}
	ft_codec_filter_reply_free(fr);
	free(body);
	return rc < 0 ? bench_fail(run->r, "encode: %s", ft_error_last()) : 0;
}

static int encode_scores(run_t *run, bench_verbs_t *verbs, unsigned k)
{
	char *body = NULL;
	int rc =
	    ft_codec_priorities_encode(&body, &verbs->args[k], verbs->scores);

	free(body);
	return rc < 0 ? bench_fail(run->r, "encode: %s", ft_error_last()) : 0;
}

/*
 * One pod without HTTP: the placement sweeps of filter and prioritize over
 * every node, then the encoding of their replies. t[0..3] get the four times.
 */
static int core_iteration(run_t *run, bench_verbs_t *verbs, unsigned k,
			  double *t)
{
	const ft_demand_t *d = &verbs->pods[k].demand;
	double t0 = now_us(), t1, t2, t3;

	for (unsigned i = 0; i < run->n; i++)
		ft_place_filter(&verbs->verdicts[i], run->by_name[i], d);
	t1 = now_us();
	for (unsigned i = 0; i < run->n; i++)
		verbs->scores[i] =
		    ft_place_score(run->by_name[i], d, run->app.cfg.policy);
	t2 = now_us();
	if (encode_filter(run, verbs, k) < 0)
		return -1;
	t3 = now_us();
	if (encode_scores(run, verbs, k) < 0)
		return -1;
	t[0] = t1 - t0;
	t[1] = t2 - t1;
	t[2] = t3 - t2;
	t[3] = now_us() - t3;
	return 0;
}

static int run_core(run_t *run, bench_verbs_t *verbs)
{
	series_t s;
	int rc;

	if ((rc = bench_series_init(&s, run->r, verbs->iterations)) < 0 ||
	    (rc = core_setup(run, verbs)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < verbs->warmup + verbs->iterations; it++) {
		double t[4];
		if ((rc = core_iteration(run, verbs, it % SHAPES, t)) < 0)
			goto cleanup;
		for (unsigned m = 0; it >= verbs->warmup && m < 4; m++)
			s.v[m][it - verbs->warmup] = t[m];
	}
	add_row(run->r, "ft_place_filter x N", s.v[0], s.n);
	add_row(run->r, "ft_place_score x N", s.v[1], s.n);
	add_row(run->r, "encode filter reply", s.v[2], s.n);
	add_row(run->r, "encode HostPriorityList", s.v[3], s.n);
cleanup:
	bench_series_dispose(&s);
	return rc;
}

/* ---- the benchmark ---- */

int bench_verbs_new(bench_verbs_t **out, run_t *run)
{
	const bench_options_t *o = run->o;
	bench_verbs_t *verbs = calloc(1, sizeof(*verbs));

	*out = NULL;
	if (!verbs)
		return bench_fail(run->r,
				  "filter and prioritize: out of memory");
	verbs->iterations = o->iterations    ? o->iterations
			    : run->n <= 1000 ? 2000
					     : 500;
	verbs->warmup =
	    o->warmup >= 0 ? (unsigned)o->warmup : (verbs->iterations + 9) / 10;
	if (build_requests(run, verbs) < 0) {
		bench_verbs_free(verbs);
		return -1;
	}
	*out = verbs;
	return 0;
}

int bench_verbs_measure(bench_verbs_t *verbs, run_t *run)
{
	bench_run_progress(run, "filter and prioritize over HTTP");
	if (run_http(run, verbs) < 0)
		return -1;
	bench_run_progress(run, "the same without HTTP");
	if (run_handlers(run, verbs) < 0 || run_decode_lookup(run, verbs) < 0)
		return -1;
	return run_core(run, verbs);
}

void bench_verbs_free(bench_verbs_t *verbs)
{
	if (!verbs)
		return;
	for (unsigned k = 0; k < SHAPES; k++) {
		free(verbs->reqs[k].body);
		ft_codec_extender_args_dispose(&verbs->args[k]);
		ft_pod_dispose(&verbs->pods[k]);
	}
	free(verbs->verdicts);
	free(verbs->scores);
	free(verbs);
}

/* ---- report ---- */

void bench_verbs_print_latency(const result_t *res, unsigned n)
{
	bench_print_row_head("verb");
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; res[k].ok && i < res[k].n_rows; i++)
			bench_print_row(res[k].nodes, &res[k].rows[i]);
	printf("\n");
}

void bench_verbs_print_traffic(const result_t *res, unsigned n)
{
	printf(
	    "nodes  request_KiB  filter_reply_KiB  prioritize_reply_KiB  connections/requests\n");
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok)
			printf("%5u  %11.1f  %16.1f  %20.1f  %ld/%ld\n",
			       res[k].nodes, res[k].request_kib,
			       res[k].filter_reply_kib,
			       res[k].prioritize_reply_kib, res[k].connects,
			       res[k].requests);
	printf("\nnodes passing filter, by pod shape:\nnodes");
	for (unsigned s = 0; s < SHAPES; s++)
		printf("  %16s", shapes[s].name);
	printf("\n");
	for (unsigned k = 0; k < n; k++) {
		if (!res[k].ok)
			continue;
		printf("%5u", res[k].nodes);
		for (unsigned s = 0; s < SHAPES; s++)
			printf("  %15.1f%%", 100.0 * res[k].passed[s]);
		printf("\n");
	}
	printf("\n");
}

static const row_t *find_row(const result_t *r, const char *verb)
{
	for (unsigned i = 0; i < r->n_rows; i++)
		if (strcmp(r->rows[i].verb, verb) == 0)
			return &r->rows[i];
	return NULL;
}

void bench_verbs_print_aim(const result_t *r)
{
	const row_t *w = find_row(r, "http filter+prioritize");
	double aim = r->nodes == TARGET_SMALL_NODES   ? TARGET_SMALL_P99_US
		     : r->nodes == TARGET_LARGE_NODES ? TARGET_LARGE_P99_US
						      : 0;

	if (!r->ok || aim <= 0 || !w)
		return;
	printf("aim: %u nodes, filter+prioritize p99 %.1f us <= %.0f us: %s\n",
	       r->nodes, w->p99, aim, w->p99 <= aim ? "met" : "MISSED");
}
