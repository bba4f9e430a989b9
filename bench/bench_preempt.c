/*
 * Preempt of flextopo-bench (bench_preempt.h): POST /preempt over the run's
 * connection with an ExtenderPreemptionArgs whose NodeNameToMetaVictims
 * names all N nodes with the victims kube-scheduler would propose (or none),
 * for each preemptor of pshapes[] in turn; every pod of the cluster is below
 * the preemptor's priority, so every pod is a candidate.
 *
 * Every reply is checked: only requested nodes, each once, never an empty
 * Pods list, victims of that node below the preemptor, by descending
 * priority, whose eviction frees a placement at the preemptor's level. The
 * handler, the request decoding and ft_victims_search over the N nodes are
 * also timed without HTTP.
 */
#include "bench_preempt.h"

#include <flextopo/codec.h>
#include <flextopo/cpuset.h>
#include <flextopo/error.h>
#include <flextopo/pdb.h>
#include <flextopo/place.h>
#include <flextopo/state.h>
#include <flextopo/victims.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* The aim of bench/README.md: p99 of preempt for 500 candidate nodes. */
#define TARGET_PREEMPT_NODES  500u
#define TARGET_PREEMPT_P99_US 10000.0

/* A cap on the seconds one phase may take. */
#define PREEMPT_SECONDS_MAX 60.0

typedef struct preempt {
	request_t preqs[PSHAPES]; /* ExtenderPreemptionArgs */
	ft_pod_t ppods[PSHAPES];  /* their preemptors decoded */
	ft_pdb_view_t *pdbs;	  /* per node in NodeNames order */
	unsigned char *seen;	  /* per node, while checking a reply */
	unsigned iterations, warmup;
} preempt_t;

/* Does `h` hold units of the kind `d` asks for? */
static bool holds_kind(const ft_node_t *node, const ft_holding_t *h,
		       const ft_demand_t *d)
{
	const ft_topology_t *t = node->topology;

	if (d->mig_count) {
		for (unsigned i = 0; t && i < t->n_mig && i < 128; i++)
			if (ft_mig_mask_has(h->mig, i) &&
			    strcmp(t->mig[i].profile, d->mig_profile) == 0)
				return true;
		return false;
	}
	if (d->gpus)
		return h->gpus != 0;
	return !ft_cpuset_empty(&h->cpus);
}

/*
 * The victims kube-scheduler is made to propose on the node at position `i`
 * of NodeNames, by descending priority: none on every fourth node (what a
 * scheduler with kubernetes PR #135486 sends for a node that fits by counts),
 * else the lowest-priority pod holding units of the kind `d` asks for (any
 * pod on a node with none), the two lowest on every fourth node.
 */
static unsigned propose(uint16_t *out, const ft_node_t *node, unsigned i,
			const ft_demand_t *d)
{
	unsigned want = i % 4 == 0 ? 0 : i % 4 == 3 ? 2 : 1, n = 0;
	bool any = false;

	for (unsigned j = 0; j < node->n_holdings; j++)
		any |= holds_kind(node, &node->holdings[j], d);
	for (unsigned j = 0; want && j < node->n_holdings; j++) {
		const ft_holding_t *h = &node->holdings[j];
		unsigned at = n;
		if (any && !holds_kind(node, h, d))
			continue;
		while (at > 0 &&
		       node->holdings[out[at - 1]].priority > h->priority)
			at--;
		if (at >= want)
			continue;
		if (n < want)
			n++;
		memmove(&out[at + 1], &out[at], (n - 1 - at) * sizeof(*out));
		out[at] = (uint16_t)j;
	}
	for (unsigned a = 0, b = n; b-- > a + 1; a++) {
		uint16_t t = out[a];
		out[a] = out[b];
		out[b] = t;
	}
	return n;
}

/*
 * ExtenderPreemptionArgs for preemptor `k`: the Pod and NodeNameToMetaVictims
 * naming every node with its proposed victims. Decodes the preemptor too.
 */
static int preempt_request_build(run_t *run, preempt_t *pre, unsigned k)
{
	const ft_codec_options_t *opts = &run->app.opts;
	cJSON *root = cJSON_CreateObject(), *map = NULL;
	cJSON *pod = synth_request_pod(&pshapes[k], opts, PREEMPTOR_PRIORITY);
	const ft_demand_t *d = &pre->ppods[k].demand;
	uint16_t idx[2];
	unsigned empty = 0;

	if (!root || !pod ||
	    ft_codec_pod_decode(&pre->ppods[k], pod, opts) < 0 ||
	    pre->ppods[k].demand_error) {
		cJSON_Delete(root);
		cJSON_Delete(pod);
		return bench_fail(run->r, "preemptor %s: %s", pshapes[k].name,
				  pre->ppods[k].demand_error
				      ? pre->ppods[k].demand_error
				      : ft_error_last());
	}
	cJSON_AddItemToObject(root, "Pod", pod);
	map = cJSON_AddObjectToObject(root, "NodeNameToMetaVictims");
	for (unsigned i = 0; map && i < run->n; i++) {
		cJSON *entry = cJSON_AddObjectToObject(map, run->names[i]);
		cJSON *pods = cJSON_AddArrayToObject(entry, "Pods");
		unsigned m = propose(idx, run->by_name[i], i, d);
		for (unsigned j = 0; j < m; j++) {
			cJSON *v = cJSON_CreateObject();
			cJSON_AddStringToObject(
			    v, "UID", run->by_name[i]->holdings[idx[j]].uid);
			cJSON_AddItemToArray(pods, v);
		}
		cJSON_AddNumberToObject(entry, "NumPDBViolations", 0);
		empty += m == 0;
	}
	run->r->preempt[k].sent_empty = (double)empty / run->n;
	if (bench_request_print(&pre->preqs[k], root) < 0)
		return bench_fail(run->r, "preempt request %s: cannot build",
				  pshapes[k].name);
	return 0;
}

static int preempt_setup(run_t *run, preempt_t *pre)
{
	pre->seen = calloc(run->n, 1);
	pre->pdbs = calloc(run->n, sizeof(*pre->pdbs));
	if (!pre->seen || !pre->pdbs)
		return bench_fail(run->r, "preempt: out of memory");
	for (unsigned i = 0; i < run->n; i++)
		ft_state_pdb_view(run->app.state, run->by_name[i],
				  &pre->pdbs[i]);
	for (unsigned k = 0; k < PSHAPES; k++)
		if (preempt_request_build(run, pre, k) < 0)
			return -1;
	run->r->preempt_request_kib = (double)pre->preqs[0].len / 1024.0;
	return 0;
}

/* The position in NodeNames of node `name`, or run->n. */
static unsigned node_position(const run_t *run, const char *name)
{
	const char *dash = strrchr(name, '-');
	unsigned long i = dash ? strtoul(dash + 1, NULL, 10) : run->n;

	return i < run->n && strcmp(run->names[i], name) == 0 ? (unsigned)i
							      : run->n;
}

/* Is holding `x` among idx[0..n)? */
static bool among(const uint16_t *idx, unsigned n, uint16_t x)
{
	for (unsigned i = 0; i < n; i++)
		if (idx[i] == x)
			return true;
	return false;
}

/*
 * One node of a reply: asked about, named once, a non-empty Pods list of
 * pods on that node below the preemptor's priority, each once, by
 * descending priority, whose eviction lets the preemptor fit at its level
 * (any level in best-effort mode). Adds to `st` when `tally`.
 */
static int check_preempt_node(run_t *run, preempt_t *pre, unsigned k,
			      const cJSON *entry, preempt_stat_t *st,
			      bool tally)
{
	const ft_demand_t *d = &pre->ppods[k].demand;
	ft_level_t level = d->has_affinity && d->mode == FT_MODE_GUARANTEED
			       ? ft_place_effective_level(d)
			       : FT_LEVEL_NODE;
	const char *name = entry->string ? entry->string : "";
	const cJSON *pods = cJSON_GetObjectItemCaseSensitive(entry, "Pods");
	const cJSON *pdb =
	    cJSON_GetObjectItemCaseSensitive(entry, "NumPDBViolations");
	unsigned i = node_position(run, name), n = 0, m;
	uint16_t idx[FT_VICTIM_MAX], prop[2];
	const ft_node_t *node;
	const cJSON *v;
	result_t *r = run->r;

	if (i >= run->n)
		return bench_fail(
		    r, "preempt %s: names node \"%s\", not asked about",
		    pshapes[k].name, name);
	if (pre->seen[i]++)
		return bench_fail(r, "preempt %s: names %s twice",
				  pshapes[k].name, name);
	node = run->by_name[i];
	if (!cJSON_IsArray(pods) || !cJSON_GetArraySize(pods))
		return bench_fail(
		    r, "preempt %s: %s with an empty or no Pods list",
		    pshapes[k].name, name);
	if (!cJSON_IsNumber(pdb) || pdb->valuedouble < 0)
		return bench_fail(r, "preempt %s: %s: bad NumPDBViolations",
				  pshapes[k].name, name);
	cJSON_ArrayForEach (v, pods) {
		const ft_holding_t *h =
		    ft_node_find_holding(node, str_of(v, "UID"));
		uint16_t x = h ? (uint16_t)(h - node->holdings) : 0;
		if (!h || n >= FT_VICTIM_MAX || among(idx, n, x))
			return bench_fail(
			    r,
			    "preempt %s: %s: victim \"%s\" is not a pod of the node, or named twice",
			    pshapes[k].name, name, str_of(v, "UID"));
		if (h->priority >= PREEMPTOR_PRIORITY ||
		    (n && h->priority > node->holdings[idx[n - 1]].priority))
			return bench_fail(
			    r,
			    "preempt %s: %s: victim %s (priority %d) out of order or not below the preemptor",
			    pshapes[k].name, name, h->uid, h->priority);
		idx[n++] = x;
	}
	if (!ft_victims_feasible(node, d, level, idx, n))
		return bench_fail(
		    r,
		    "preempt %s: %s: evicting the %u victims frees no %s placement",
		    pshapes[k].name, name, n, ft_level_name(level));
	if (!tally)
		return 0;
	m = propose(prop, node, i, d);
	st->kept += 1.0 / run->n;
	st->victims += n;
	for (unsigned j = 0; j < n && m == n; j++)
		if (!among(prop, m, idx[j]))
			m = 0;
	st->changed += m != n;
	return 0;
}

/* An ExtenderPreemptionResult for preemptor `k`, every node checked. */
static int check_preempt(run_t *run, preempt_t *pre, unsigned k,
			 const char *reply, bool tally)
{
	cJSON *root = cJSON_Parse(reply);
	const cJSON *map =
	    cJSON_GetObjectItemCaseSensitive(root, "NodeNameToMetaVictims");
	const cJSON *entry;
	preempt_stat_t *st = &run->r->preempt[k];
	int rc = 0;

	if (!cJSON_IsObject(root) ||
	    !(cJSON_IsObject(map) || cJSON_IsNull(map)))
		rc = bench_fail(
		    run->r,
		    "preempt %s: not an ExtenderPreemptionResult: %.300s",
		    pshapes[k].name, reply);
	memset(pre->seen, 0, run->n);
	if (rc < 0)
		map = NULL;
	cJSON_ArrayForEach (entry, map) {
		if ((rc = check_preempt_node(run, pre, k, entry, st, tally)) <
		    0)
			break;
	}
	st->replies += tally && rc == 0;
	cJSON_Delete(root);
	return rc;
}

/* Preemptor of iteration `it`, a new pod unless --fixed-uids. */
static request_t *next_preempt(run_t *run, preempt_t *pre, unsigned it)
{
	request_t *q = &pre->preqs[it % PSHAPES];

	bench_run_name_pod(run, q, it % PSHAPES);
	return q;
}

/* Sorted samples -> one row of the preempt table. */
static void add_prow(result_t *r, const char *verb, double *v, unsigned n)
{
	bench_append_row(r->prows, &r->n_prows, PROWS_MAX, verb, v, n);
}

/*
 * POST /preempt over HTTP, the preemptors in turn, every reply checked.
 * Stops early (at a whole round of shapes) after PREEMPT_SECONDS_MAX.
 */
static int run_preempt_http(run_t *run, preempt_t *pre)
{
	unsigned total = pre->warmup + pre->iterations;
	unsigned counted[PSHAPES] = {0}, done = 0;
	double *all = calloc(pre->iterations, sizeof(double));
	double *by[PSHAPES] = {NULL}, t0 = now_us(), reply = 0;
	bench_client_t *c = &run->client;
	char verb[64];
	int rc = 0;

	for (unsigned k = 0; k < PSHAPES; k++)
		if (!(by[k] = calloc(pre->iterations, sizeof(double))))
			rc = bench_fail(run->r, "samples: out of memory");
	if (!all)
		rc = bench_fail(run->r, "samples: out of memory");
	for (unsigned it = 0; rc == 0 && it < total; it++) {
		unsigned k = it % PSHAPES;
		bool timed = it >= pre->warmup;
		double us;
		if (timed && k == 0 && done >= PSHAPES &&
		    now_us() - t0 > PREEMPT_SECONDS_MAX * 1e6)
			break;
		if ((rc = bench_run_request(run, "/preempt",
					    next_preempt(run, pre, it), &us)) <
			0 ||
		    (rc = check_preempt(run, pre, k, c->reply, timed)) < 0)
			break;
		if (!timed)
			continue;
		all[done++] = us;
		by[k][counted[k]++] = us;
		reply += (double)c->reply_len / 1024.0;
	}
	if (rc == 0) {
		run->r->preempt_reply_kib = done ? reply / done : 0;
		add_prow(run->r, "http preempt", all, done);
		for (unsigned k = 0; k < PSHAPES; k++) {
			snprintf(verb, sizeof(verb), "http preempt %s",
				 pshapes[k].name);
			add_prow(run->r, verb, by[k], counted[k]);
		}
	}
	for (unsigned k = 0; k < PSHAPES; k++)
		free(by[k]);
	free(all);
	return rc;
}

/*
 * The same without HTTP: the handler called directly, the request decoding
 * alone, and ft_victims_search over every node (the PDB views taken once,
 * untimed; each search timed on its own, so the row is their sum).
 */
static int run_preempt_core(run_t *run, preempt_t *pre)
{
	unsigned total = pre->warmup + pre->iterations;
	series_t s;
	double t0 = now_us();
	unsigned done = 0;
	int rc;

	if ((rc = bench_series_init(&s, run->r, pre->iterations)) < 0)
		goto cleanup;
	for (unsigned it = 0; it < total; it++) {
		unsigned k = it % PSHAPES;
		bool timed = it >= pre->warmup;
		preempt_stat_t *st = &run->r->preempt[k];
		ft_preempt_args_t args;
		double us, t1, sum = 0;
		if (timed && k == 0 && done >= PSHAPES &&
		    now_us() - t0 > PREEMPT_SECONDS_MAX * 1e6)
			break;
		if ((rc = bench_run_call_handler(
			 run, ft_app_preempt, "/preempt",
			 next_preempt(run, pre, it), &us)) < 0)
			goto cleanup;
		t1 = now_us();
		if ((rc = ft_codec_preempt_args_decode(
			 &args, pre->preqs[k].body, pre->preqs[k].len)) < 0) {
			rc = bench_fail(run->r, "preempt decode: %s",
					ft_error_last());
			goto cleanup;
		}
		ft_codec_preempt_args_dispose(&args);
		t1 = now_us() - t1;
		for (unsigned i = 0; i < run->n; i++) {
			ft_victim_set_t set;
			double t2 = now_us(), one;
			ft_victims_search(&set, run->by_name[i],
					  &pre->ppods[k].demand,
					  PREEMPTOR_PRIORITY, &pre->pdbs[i]);
			one = now_us() - t2;
			sum += one;
			if (!timed)
				continue;
			st->searches++;
			st->found += set.found;
			st->inexact += set.found && !set.exact;
			if (one > st->slowest_us)
				st->slowest_us = one;
		}
		if (!timed)
			continue;
		s.v[0][done] = us;
		s.v[1][done] = t1;
		s.v[2][done] = sum;
		done++;
	}
	add_prow(run->r, "handler preempt (no HTTP)", s.v[0], done);
	add_prow(run->r, "decode ExtenderPreemptionArgs", s.v[1], done);
	add_prow(run->r, "ft_victims_search x N", s.v[2], done);
cleanup:
	bench_series_dispose(&s);
	return rc;
}

static void preempt_dispose(preempt_t *pre)
{
	for (unsigned k = 0; k < PSHAPES; k++) {
		free(pre->preqs[k].body);
		ft_pod_dispose(&pre->ppods[k]);
	}
	free(pre->pdbs);
	free(pre->seen);
}

static int preempt_measure(run_t *run, preempt_t *pre)
{
	long k = run->o->preempt_iterations;

	pre->iterations = k > 0		   ? (unsigned)k
			  : run->n <= 1000 ? PREEMPT_ITERATIONS_SMALL
					   : PREEMPT_ITERATIONS_LARGE;
	pre->warmup = run->o->warmup >= 0 ? (unsigned)run->o->warmup
					  : (pre->iterations + 9) / 10;
	if (preempt_setup(run, pre) < 0)
		return -1;
	bench_run_progress(run, "preempt over HTTP");
	if (run_preempt_http(run, pre) < 0)
		return -1;
	bench_run_progress(run, "preempt without HTTP");
	return run_preempt_core(run, pre);
}

int bench_preempt_run(run_t *run)
{
	preempt_t pre;
	int rc;

	if (run->o->preempt_iterations == 0)
		return 0;
	memset(&pre, 0, sizeof(pre));
	rc = preempt_measure(run, &pre);
	preempt_dispose(&pre);
	return rc;
}

/* ---- report ---- */

static bool any_preempt(const result_t *res, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok && res[k].n_prows)
			return true;
	return false;
}

void bench_preempt_print(const bench_options_t *o, const result_t *res,
			 unsigned n)
{
	if (!any_preempt(res, n))
		return;
	printf(
	    "preempt: ExtenderPreemptionArgs with NodeNameToMetaVictims naming all N nodes; preemptor priority %d, pods 0..%d",
	    PREEMPTOR_PRIORITY, FILL_PRIORITY_MAX);
	if (o->tiered)
		printf(", GPU and MIG holders %d..%d", TIERED_PRIORITY,
		       TIERED_PRIORITY + FILL_PRIORITY_MAX);
	printf("\n");
	bench_print_row_head("preempt");
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; res[k].ok && i < res[k].n_prows; i++)
			bench_print_row(res[k].nodes, &res[k].prows[i]);
	printf("\nnodes  %-17s %10s %6s %12s %8s %8s %8s %14s\n", "preemptor",
	       "sent_empty", "kept", "victims/kept", "changed", "found",
	       "inexact", "slowest_node");
	for (unsigned k = 0; k < n; k++)
		for (unsigned s = 0; res[k].ok && res[k].n_prows && s < PSHAPES;
		     s++) {
			const preempt_stat_t *st = &res[k].preempt[s];
			double kept = st->replies ? st->kept / st->replies : 0;
			double nodes = kept * res[k].nodes * st->replies;
			printf(
			    "%5u  %-17s %9.1f%% %5.1f%% %12.2f %7.1f%% %7.1f%% %7.1f%% %11.1f us\n",
			    res[k].nodes, pshapes[s].name,
			    100.0 * st->sent_empty, 100.0 * kept,
			    nodes > 0 ? st->victims / nodes : 0,
			    nodes > 0 ? 100.0 * st->changed / nodes : 0,
			    bench_pct(st->found, st->searches),
			    bench_pct(st->inexact, st->found), st->slowest_us);
		}
	printf("\nnodes  request_KiB  reply_KiB\n");
	for (unsigned k = 0; k < n; k++)
		if (res[k].ok && res[k].n_prows)
			printf("%5u  %11.1f  %9.1f\n", res[k].nodes,
			       res[k].preempt_request_kib,
			       res[k].preempt_reply_kib);
	printf("\n");
}

void bench_preempt_print_aim(const result_t *r)
{
	const row_t *w = NULL;

	for (unsigned i = 0; r->ok && i < r->n_prows; i++)
		if (strcmp(r->prows[i].verb, "http preempt") == 0)
			w = &r->prows[i];
	if (w && r->nodes == TARGET_PREEMPT_NODES)
		printf(
		    "aim: %u candidate nodes, preempt p99 %.1f us <= %.0f us: %s\n",
		    r->nodes, w->p99, TARGET_PREEMPT_P99_US,
		    w->p99 <= TARGET_PREEMPT_P99_US ? "met" : "MISSED");
}
