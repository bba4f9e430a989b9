/*
 * The debug API, /metrics, and the hooks by which the verbs record what they
 * decided: everything a platform engineer needs to see why a pod went where
 * it went, why a node was refused and why a pod was evicted.
 *
 * The debug handlers only read: one snapshot reference per request, copies
 * of decision records, and copies of pods from the state. They serve a
 * second listener (debugListen) on the same ft_server module, so that
 * heavy debugging never competes with kube-scheduler's requests for worker
 * threads; /metrics is served on both.
 */
#include <flextopo/access.h>
#include <flextopo/debug.h>
#include <flextopo/debugview.h>
#include <flextopo/clock.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>
#include <flextopo/log.h>
#include <flextopo/place.h>
#include <flextopo/victims.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEBUG_THREADS	    2
#define DECISIONS_DEFAULT   20
#define POD_DECISIONS_MAX   32
#define SVG_CONTENT_TYPE    "image/svg+xml"
#define NODES_PREFIX	    "/debug/nodes/"
#define PODS_PREFIX	    "/debug/pods/"
#define DECISIONS_LIMIT_MAX 1048576u
#define BAD_REQUEST	    "bad_request"

/* Hand a heap body over, or answer 500 when making it failed. */
static void reply_body(ft_http_response_t *out, int rc, char *body,
		       const char *content_type)
{
	if (rc < 0 || !body) {
		ft_http_reply_error(out, 500, "internal", "%s",
				    ft_error_last());
		return;
	}
	out->status = 200;
	out->content_type = content_type;
	out->body = body;
	out->body_len = strlen(body);
}

/* ---- metered verbs ---- */

static void metered(ft_http_response_t *out, const ft_http_request_t *req,
		    ft_app_t *app, ft_verb_t verb, ft_http_handler_fn fn)
{
	uint64_t start = ft_clock_ns();

	fn(out, req, app);
	ft_metrics_request(app->metrics, verb, ft_clock_ns() - start);
}

void ft_app_metered_filter(ft_http_response_t *out,
			   const ft_http_request_t *req, void *payload)
{
	metered(out, req, payload, FT_VERB_FILTER, ft_app_filter);
}

void ft_app_metered_prioritize(ft_http_response_t *out,
			       const ft_http_request_t *req, void *payload)
{
	metered(out, req, payload, FT_VERB_PRIORITIZE, ft_app_prioritize);
}

void ft_app_metered_preempt(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload)
{
	metered(out, req, payload, FT_VERB_PREEMPT, ft_app_preempt);
}

void ft_app_metered_bind(ft_http_response_t *out, const ft_http_request_t *req,
			 void *payload)
{
	metered(out, req, payload, FT_VERB_BIND, ft_app_bind);
}

/* ---- recording ---- */

void ft_app_record_bind(ft_app_t *app, const ft_bind_args_t *b, int rc,
			const char *error)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	const ft_node_t *node = ft_snapshot_find(snap, b->node);
	const ft_holding_t *h =
	    node ? ft_node_find_holding(node, b->pod_uid) : NULL;
	ft_level_t level = FT_LEVEL_COUNT;
	ft_decision_t d;

	ft_decision_init(&d, FT_VERB_BIND, b->pod_namespace, b->pod_name,
			 b->pod_uid, h ? h->priority : 0);
	if (rc < 0) {
		ft_decision_message(&d, true, "%s", error ? error : "failed");
	} else if (h && node->topology) {
		ft_decision_set_holding(&d, node, h);
		level = h->level;
		ft_decision_message(&d, false, "bound to %s at level %s",
				    b->node, ft_level_name(level));
	} else {
		ft_decision_message(&d, false, "bound to %s (no devices)",
				    b->node);
	}
	if (rc >= 0 && !d.has_placement)
		snprintf(d.node, sizeof(d.node), "%.*s",
			 (int)sizeof(d.node) - 1, b->node);
	ft_decisions_record(app->decisions, &d);
	ft_metrics_bind(app->metrics,
			rc >= 0		    ? FT_BIND_BOUND
			: rc == FT_EUNKNOWN ? FT_BIND_UNKNOWN
					    : FT_BIND_FAILED,
			level);
	ft_snapshot_unref(snap);
}

void ft_app_record_preempt(ft_app_t *app, ft_decision_t *d,
			   ft_affinity_mode_t mode)
{
	unsigned nodes[FT_PREEMPT_OUTCOMES] = {
	    d->counts[FT_VERDICT_KEPT], d->counts[FT_VERDICT_KEPT_PROPOSED],
	    d->counts[FT_VERDICT_DROPPED]};

	ft_decisions_record(app->decisions, d);
	ft_metrics_preempt(app->metrics, mode, nodes, d->n_victims_total);
}

/* ---- /metrics ---- */

static double cache_age(ft_app_t *app)
{
	uint64_t now = ft_clock_ns();
	uint64_t at = ft_state_published_ns(app->state);

	return now > at ? (double)(now - at) / 1e9 : 0.0;
}

/* A copy of the workload mix (heap: 17 KB); NULL and FT_ENOMEM set. */
static ft_mix_t *mix_copy(ft_app_t *app)
{
	ft_mix_t *mix = malloc(sizeof(*mix));

	if (mix)
		ft_state_mix(app->state, mix);
	else
		ft_error_set(FT_ENOMEM, "workload mix: out of memory");
	return mix;
}

/* The gauges summed over the snapshot's nodes: GPU capacity and drift. */
static int model_gauges(ft_metrics_gauges_t *g, ft_app_t *app)
{
	ft_snapshot_t *snap = NULL;
	ft_mix_t *mix = mix_copy(app);

	if (!mix)
		return FT_ENOMEM;
	snap = ft_state_snapshot(app->state);
	for (unsigned i = 0; i < snap->n_nodes; i++) {
		ft_frag_t f;
		ft_frag_measure(&f, snap->nodes[i], mix);
		g->gpu_free_milli += f.free_milli;
		g->gpu_fragmentation_milli += f.fragmentation_milli;
		g->gpus_whole_free += f.whole_gpus_free;
		g->mig_slices_stranded += f.mig_slices_stranded;
		g->drift_pods += snap->nodes[i]->drifted;
		g->conflict_pods += snap->nodes[i]->conflict_pods;
	}
	g->mix_pods = mix->total;
	free(mix);
	ft_snapshot_unref(snap);
	return 0;
}

void ft_app_metrics(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload)
{
	ft_app_t *app = payload;
	ft_metrics_gauges_t g = {.version = FLEXTOPO_VERSION,
				 .commit = FLEXTOPO_COMMIT};
	ft_state_stats_t st;
	char *body = NULL;
	int rc;

	ft_state_stats(app->state, &st);
	g.ready = ft_app_ready(app);
	g.nodes = st.nodes;
	g.nodes_bad_topology = st.nodes_bad_topology;
	g.pods = st.pods;
	g.assumed = st.assumed;
	g.unsettled = st.unsettled;
	g.conflicts_found = st.conflicts_found;
	g.generation = st.generation;
	g.cache_age_seconds = cache_age(app);
	g.node_restarts = ft_informer_restarts(app->node_informer);
	g.pod_restarts = ft_informer_restarts(app->pod_informer);
	g.pdb_restarts = ft_informer_restarts(app->pdb_informer);
	g.slice_restarts = ft_informer_restarts(app->slice_informer);
	g.claim_restarts = ft_informer_restarts(app->claim_informer);
	g.class_restarts = ft_informer_restarts(app->class_informer);
	g.dra_nodes = st.dra_nodes;
	g.dra_node_errors = st.dra_node_errors;
	g.dra_double_published = st.dra_double_published;
	g.claims_allocated = st.claims_allocated;
	g.decisions = ft_decisions_count(app->decisions);
	g.decisions_capacity = ft_decisions_capacity(app->decisions);
	g.decisions_bytes =
	    app->decisions ? ft_decisions_footprint(g.decisions_capacity) : 0;
	g.decisions_total = ft_decisions_total(app->decisions);
	ft_server_connections_closed(app->server, &g.conns_closed_idle,
				     &g.conns_refused);
	if ((rc = model_gauges(&g, app)) == 0)
		rc = ft_metrics_render(&body, app->metrics, &g);
	reply_body(out, rc, body, FT_METRICS_CONTENT_TYPE);
}

/* ---- the metrics listener ---- */

/* GET /metrics to a bearer token the API server allows (access.h). */
void ft_app_metrics_checked(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload)
{
	ft_app_t *app = payload;
	char why[512];
	int status = ft_access_check(
	    app->access, ft_http_request_header(req, "Authorization"),
	    req->path, why, sizeof(why));

	if (status == 200)
		ft_app_metrics(out, req, payload);
	else
		ft_http_reply_error(out, status,
				    status == 401   ? "unauthorized"
				    : status == 403 ? "forbidden"
						    : "unavailable",
				    "%s", why);
}

int ft_app_metrics_start(ft_app_t *app)
{
	ft_server_options_t opts = {.listen = app->cfg.metrics_listen,
				    .max_body_bytes = 1024,
				    .threads = DEBUG_THREADS,
				    .tls_cert_file = app->cfg.tls_cert_file,
				    .tls_key_file = app->cfg.tls_key_file,
				    .tls_self_signed = true,
				    .max_connections_per_client =
					app->cfg.max_connections_per_client};
	int rc;

	if (!app->cfg.metrics_listen || !app->cfg.metrics_listen[0])
		return 0;
	if (!app->kube)
		return ft_error_set(
		    FT_EINVAL,
		    "metricsListen %s: needs an API server to check the scrapers' tokens",
		    app->cfg.metrics_listen);
	if ((rc = ft_access_new(&app->access, app->kube)) < 0 ||
	    (rc = ft_server_new(&app->metrics_server, &opts)) < 0 ||
	    (rc =
		 ft_server_route_offload(app->metrics_server, "GET", "/metrics",
					 ft_app_metrics_checked, app)) < 0 ||
	    (rc = ft_server_start(app->metrics_server)) < 0)
		return rc;
	FT_LOG_INFO_MSG(
	    "serving /metrics to authorized bearer tokens on %s (port %u)",
	    app->cfg.metrics_listen, ft_server_port(app->metrics_server));
	return 0;
}

/* ---- conflicts ---- */

void ft_app_debug_conflicts(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload)
{
	ft_app_t *app = payload;
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	ft_state_stats_t st;
	char *body = NULL;
	int rc;

	ft_state_stats(app->state, &st);
	rc = ft_codec_debug_conflicts(&body, snap, st.conflicts_found);
	reply_body(out, rc, body, "application/json");
	ft_snapshot_unref(snap);
}

/* ---- nodes ---- */

void ft_app_debug_nodes(ft_http_response_t *out, const ft_http_request_t *req,
			void *payload)
{
	ft_app_t *app = payload;
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	ft_mix_t *mix = mix_copy(app);
	char *body = NULL;
	int rc = mix ? ft_codec_debug_nodes(&body, snap, mix) : FT_ENOMEM;

	reply_body(out, rc, body, "application/json");
	free(mix);
	ft_snapshot_unref(snap);
}

/* The path segment after `prefix`: non-empty, no '/'; else NULL. */
static const char *segment(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *rest;

	if (strncmp(path, prefix, n) != 0)
		return NULL;
	rest = path + n;
	return rest[0] && !strchr(rest, '/') ? rest : NULL;
}

/* "json" (also when absent) -> 0, "svg" -> 1, anything else -> -1. */
static int node_format(const ft_http_request_t *req)
{
	const char *format = ft_http_request_query(req, "format");

	if (!format || strcmp(format, "json") == 0)
		return 0;
	return strcmp(format, "svg") == 0 ? 1 : -1;
}

void ft_app_debug_node(ft_http_response_t *out, const ft_http_request_t *req,
		       void *payload)
{
	ft_app_t *app = payload;
	const char *name = segment(req->path, NODES_PREFIX);
	int format = node_format(req);
	ft_snapshot_t *snap = NULL;
	const ft_node_t *node;
	char *body = NULL;
	int rc;

	if (format < 0) {
		ft_http_reply_error(out, 400, BAD_REQUEST,
				    "format: expected json or svg");
		return;
	}
	snap = ft_state_snapshot(app->state);
	node = name ? ft_snapshot_find(snap, name) : NULL;
	if (!node) {
		ft_http_reply_error(out, 404, "not_found", "no node %s",
				    name ? name : "(empty name)");
		goto cleanup;
	}
	if (format) {
		rc = ft_codec_node_svg(&body, node);
	} else {
		ft_mix_t *mix = mix_copy(app);
		rc = mix ? ft_codec_debug_node(&body, node, mix) : FT_ENOMEM;
		free(mix);
	}
	reply_body(out, rc, body,
		   format ? SVG_CONTENT_TYPE : "application/json");
cleanup:
	ft_snapshot_unref(snap);
}

/* ---- pods ---- */

/* "/debug/pods/NS/NAME" -> ns, name in `buf`; false when malformed. */
static bool pod_path(char *buf, size_t size, const char **ns, const char **name,
		     const char *path)
{
	const char *rest = path + strlen(PODS_PREFIX);
	char *slash;

	if (strncmp(path, PODS_PREFIX, strlen(PODS_PREFIX)) != 0 ||
	    strlen(rest) >= size)
		return false;
	strcpy(buf, rest);
	slash = strchr(buf, '/');
	if (!slash || slash == buf || !slash[1] || strchr(slash + 1, '/'))
		return false;
	*slash = '\0';
	*ns = buf;
	*name = slash + 1;
	return true;
}

/* The pod's holding in `snap`, by namespace and name. */
static const ft_holding_t *find_holding(const ft_node_t **node,
					const ft_snapshot_t *snap,
					const char *ns, const char *name)
{
	for (unsigned i = 0; i < snap->n_nodes; i++) {
		const ft_node_t *n = snap->nodes[i];
		for (unsigned k = 0; k < n->n_holdings; k++) {
			const ft_holding_t *h = &n->holdings[k];
			if (strcmp(h->ns, ns) == 0 &&
			    strcmp(h->name, name) == 0) {
				*node = n;
				return h;
			}
		}
	}
	*node = NULL;
	return NULL;
}

/* The UID of ns/name from the newest decision about it, or NULL. */
static const char *uid_from_decisions(const ft_decision_t *d, unsigned n,
				      const char *ns, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (d[i].uid[0] && strcmp(d[i].ns, ns) == 0 &&
		    strcmp(d[i].name, name) == 0)
			return d[i].uid;
	return NULL;
}

static int pod_view(char **body, ft_app_t *app, const ft_snapshot_t *snap,
		    ft_debug_pod_t *v, ft_decision_t *decisions)
{
	char uid[FT_DECISION_UID];
	ft_gang_describe_t gang;
	ft_pod_t pod;
	bool have_pod = false;
	int rc;

	v->holding = find_holding(&v->node, snap, v->ns, v->name);
	v->n_decisions = ft_decisions_for_pod(
	    decisions, POD_DECISIONS_MAX, app->decisions, v->ns, v->name, NULL);
	v->uid = v->holding ? v->holding->uid
			    : uid_from_decisions(decisions, v->n_decisions,
						 v->ns, v->name);
	if (v->uid) {
		snprintf(uid, sizeof(uid), "%s", v->uid);
		v->uid = uid;
		have_pod = ft_state_find_pod(app->state, uid, &pod) == 0;
		v->pod = have_pod ? &pod : NULL;
		if (ft_state_describe_gang(app->state, uid, &gang) &&
		    (gang.source != FT_GANG_NONE || gang.error[0]))
			v->gang = &gang;
		v->n_decisions =
		    ft_decisions_for_pod(decisions, POD_DECISIONS_MAX,
					 app->decisions, NULL, NULL, uid);
	}
	if (!v->holding && !v->n_decisions && !have_pod)
		rc = FT_ENOTFOUND;
	else
		rc = ft_codec_debug_pod(body, v);
	if (have_pod)
		ft_pod_dispose(&pod);
	return rc;
}

void ft_app_debug_pod(ft_http_response_t *out, const ft_http_request_t *req,
		      void *payload)
{
	ft_app_t *app = payload;
	ft_debug_pod_t v = {.decisions = NULL};
	ft_decision_t *decisions = NULL;
	ft_snapshot_t *snap = NULL;
	char path[600], *body = NULL;
	int rc;

	if (!pod_path(path, sizeof(path), &v.ns, &v.name, req->path)) {
		ft_http_reply_error(out, 404, "not_found",
				    "expected /debug/pods/NAMESPACE/NAME");
		return;
	}
	decisions = malloc(POD_DECISIONS_MAX * sizeof(*decisions));
	if (!decisions) {
		ft_http_reply_error(out, 500, "internal", "out of memory");
		return;
	}
	v.decisions = decisions;
	snap = ft_state_snapshot(app->state);
	rc = pod_view(&body, app, snap, &v, decisions);
	if (rc == FT_ENOTFOUND)
		ft_http_reply_error(
		    out, 404, "not_found",
		    "pod %s/%s: no allocation, no decision and not in the cache",
		    v.ns, v.name);
	else
		reply_body(out, rc, body, "application/json");
	ft_snapshot_unref(snap);
	free(decisions);
}

/* ---- decisions ---- */

/* ?limit=N: 1..DECISIONS_LIMIT_MAX, default DECISIONS_DEFAULT; 0 if bad. */
static unsigned decisions_limit(const ft_http_request_t *req)
{
	const char *text = ft_http_request_query(req, "limit");
	char *end = NULL;
	unsigned long n;

	if (!text)
		return DECISIONS_DEFAULT;
	errno = 0;
	n = strtoul(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end || errno || n == 0 ||
	    n > DECISIONS_LIMIT_MAX)
		return 0;
	return (unsigned)n;
}

void ft_app_debug_decisions(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload)
{
	ft_app_t *app = payload;
	unsigned limit = decisions_limit(req), cap, n;
	ft_decision_t *d = NULL;
	char *body = NULL;
	int rc;

	if (!limit) {
		ft_http_reply_error(out, 400, BAD_REQUEST,
				    "limit: expected an integer from 1 to %u",
				    DECISIONS_LIMIT_MAX);
		return;
	}
	cap = ft_decisions_capacity(app->decisions);
	limit = limit < cap ? limit : cap;
	d = malloc((limit ? limit : 1) * sizeof(*d));
	if (!d) {
		ft_http_reply_error(out, 500, "internal", "out of memory");
		return;
	}
	n = ft_decisions_recent(d, limit, app->decisions);
	rc = ft_codec_debug_decisions(&body, d, n, cap,
				      ft_decisions_total(app->decisions));
	reply_body(out, rc, body, "application/json");
	free(d);
}

/* ---- explain ---- */

/*
 * Units are listed where matching them is the question: the pod asks
 * capabilities of its GPUs, MIG instances, or ranks of shared GPUs.
 */
static bool lists_units(const ft_node_t *node, const ft_demand_t *d)
{
	ft_demand_t a;

	if (!node->topology)
		return false;
	ft_place_adapt(&a, node->topology, d);
	return a.mig_count || a.ranks || (a.gpus && a.has_caps);
}

/* Explain `node`, whose filter verdict for the pod is `verdict`. */
static void explain_node(ft_explain_node_t *e, const ft_node_t *node,
			 const ft_verdict_t *verdict, const ft_pod_t *pod,
			 ft_app_t *app, const ft_mix_t *mix)
{
	const ft_demand_t *d = &pod->demand;
	ft_policy_t policy = app->cfg.policy;
	ft_pdb_view_t pdb;

	memset(e, 0, sizeof(*e));
	e->node = node;
	e->verdict = *verdict;
	e->rank = ft_place_rank(node, d, policy, mix);
	e->weighed = mix->total && ft_frag_delta(&e->frag_delta_milli, node, d,
						 policy, mix) == 0;
	e->listed = lists_units(node, d);
	if (e->listed)
		e->n_units = ft_place_check_units(e->units, node, d);
	if (!ft_demand_wants_devices(d)) {
		snprintf(
		    e->choose_error, sizeof(e->choose_error),
		    "the pod asks for no GPUs, MIG instances or pinned CPUs: there is nothing to place");
		return;
	}
	if (e->verdict.fit == FT_FIT) {
		e->placed =
		    ft_place_choose(&e->placement, node, d, policy) == 0;
		if (!e->placed)
			snprintf(e->choose_error, sizeof(e->choose_error), "%s",
				 ft_error_last());
	} else if (e->verdict.fit == FT_UNFIT && node->topology) {
		ft_state_pdb_view(app->state, node, &pdb);
		ft_victims_search(&e->victims, node, d, pod->priority, &pdb);
		e->searched = true;
	}
}

/* The scores prioritize would give the nodes explained. */
static void score_explained(ft_explain_node_t *nodes, unsigned n)
{
	int64_t *ranks = malloc((n ? n : 1) * sizeof(*ranks));
	int *scores = malloc((n ? n : 1) * sizeof(*scores));

	for (unsigned i = 0; ranks && i < n; i++)
		ranks[i] = nodes[i].rank;
	if (ranks && scores)
		ft_scores_of_ranks(scores, ranks, n, FT_EXTENDER_SCORE_MAX);
	for (unsigned i = 0; i < n; i++)
		nodes[i].score = ranks && scores ? scores[i] : 0;
	free(scores);
	free(ranks);
}

/* Weigh the mix as prioritize would: over the nodes kube-scheduler would
 * send, those the pod's node affinity and tolerations admit, that filter
 * passes (given each node's verdict). */
static void weigh_passing(ft_mix_t *mix, const ft_snapshot_t *snap,
			  const ft_verdict_t *verdicts, const ft_pod_t *pod)
{
	const ft_node_t **passing =
	    malloc((snap->n_nodes ? snap->n_nodes : 1) * sizeof(*passing));
	unsigned n = 0;

	for (unsigned i = 0; passing && i < snap->n_nodes; i++)
		if (verdicts[i].fit == FT_FIT &&
		    ft_node_rules_admit(&pod->rules, snap->nodes[i]->labels))
			passing[n++] = snap->nodes[i];
	if (passing)
		ft_mix_weigh(mix, passing, n);
	free(passing);
}

static int explain(char **body, ft_app_t *app, const ft_pod_t *pod,
		   const char *only)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	ft_mix_t *mix = mix_copy(app); /* one mix for every node */
	ft_explain_node_t *nodes = NULL;
	ft_verdict_t *verdicts = NULL; /* filter's, per node of the snapshot */
	unsigned n = 0;
	int rc;

	nodes = calloc(snap->n_nodes ? snap->n_nodes : 1, sizeof(*nodes));
	verdicts =
	    malloc((snap->n_nodes ? snap->n_nodes : 1) * sizeof(*verdicts));
	if (!nodes || !verdicts || !mix) {
		rc = ft_error_set(FT_ENOMEM, "explain: out of memory");
		goto cleanup;
	}
	for (unsigned i = 0; i < snap->n_nodes; i++)
		ft_place_filter(&verdicts[i], snap->nodes[i], &pod->demand);
	weigh_passing(mix, snap, verdicts, pod);
	for (unsigned i = 0; i < snap->n_nodes; i++)
		if (!only || strcmp(snap->nodes[i]->name, only) == 0)
			explain_node(&nodes[n++], snap->nodes[i], &verdicts[i],
				     pod, app, mix);
	score_explained(nodes, n);
	rc = only && !n ? ft_error_set(FT_ENOTFOUND, "no node %s", only)
			: ft_codec_debug_explain(body, pod, snap->generation,
						 mix, nodes, n);
cleanup:
	free(verdicts);
	free(mix);
	free(nodes);
	ft_snapshot_unref(snap);
	return rc;
}

void ft_app_debug_explain(ft_http_response_t *out, const ft_http_request_t *req,
			  void *payload)
{
	ft_app_t *app = payload;
	char *body = NULL;
	ft_pod_t pod;
	int rc;

	if ((rc = ft_codec_explain_pod_decode(&pod, req->body, req->body_len,
					      &app->opts)) < 0) {
		ft_http_reply_error(out, rc == FT_EINVAL ? 400 : 500,
				    rc == FT_EINVAL ? "bad_json" : "internal",
				    "%s", ft_error_last());
		return;
	}
	if (pod.demand_error)
		ft_http_reply_error(out, 400, "bad_json", "Pod %s/%s: %s",
				    pod.ns, pod.name, pod.demand_error);
	else if ((rc = explain(&body, app, &pod,
			       ft_http_request_query(req, "node"))) ==
		 FT_ENOTFOUND)
		ft_http_reply_error(out, 404, "not_found", "%s",
				    ft_error_last());
	else
		reply_body(out, rc, body, "application/json");
	ft_pod_dispose(&pod);
}

/* ---- routes and the listener ---- */

typedef struct {
	const char *method;
	const char *path;
	ft_http_handler_fn fn;
	bool offload; /* may wait on the API server: off the HTTP workers */
} route_t;

static int add_routes(ft_server_t *server, ft_app_t *app, const route_t *r,
		      size_t n)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = r[i].offload
			 ? ft_server_route_offload(server, r[i].method,
						   r[i].path, r[i].fn, app)
			 : ft_server_route(server, r[i].method, r[i].path,
					   r[i].fn, app);
	return rc;
}

/*
 * Bind waits on the API server (up to apiTimeoutMs): it runs on the
 * server's offload threads, so that a slow API server never delays a filter
 * or prioritize behind it.
 */
int ft_app_verb_routes(ft_app_t *app, ft_server_t *server)
{
	static const route_t routes[] = {
	    {"POST", "/filter", ft_app_metered_filter, false},
	    {"POST", "/prioritize", ft_app_metered_prioritize, false},
	    {"POST", "/preempt", ft_app_metered_preempt, false},
	    {"POST", "/bind", ft_app_metered_bind, true},
	    {"GET", "/metrics", ft_app_metrics, false},
	};

	return add_routes(server, app, routes,
			  sizeof(routes) / sizeof(routes[0]));
}

int ft_app_debug_routes(ft_app_t *app, ft_server_t *server)
{
	static const route_t routes[] = {
	    {"GET", "/debug/nodes", ft_app_debug_nodes, false},
	    {"GET", "/debug/conflicts", ft_app_debug_conflicts, false},
	    {"GET", NODES_PREFIX "*", ft_app_debug_node, false},
	    {"GET", PODS_PREFIX "*", ft_app_debug_pod, false},
	    {"POST", "/debug/explain", ft_app_debug_explain, false},
	    {"GET", "/debug/decisions", ft_app_debug_decisions, false},
	    {"GET", "/metrics", ft_app_metrics, false},
	    {"GET", "/healthz", ft_app_healthz, false},
	    {"GET", "/readyz", ft_app_readyz, false},
	    {"GET", "/version", ft_app_version, false},
	};

	return add_routes(server, app, routes,
			  sizeof(routes) / sizeof(routes[0]));
}

int ft_app_debug_start(ft_app_t *app)
{
	ft_server_options_t opts = {.listen = app->cfg.debug_listen,
				    .max_body_bytes =
					app->cfg.max_request_bytes,
				    .threads = DEBUG_THREADS};
	int rc;

	if (!app->cfg.debug_listen || !app->cfg.debug_listen[0])
		return 0;
	if ((rc = ft_server_new(&app->debug_server, &opts)) < 0 ||
	    (rc = ft_app_debug_routes(app, app->debug_server)) < 0 ||
	    (rc = ft_server_start(app->debug_server)) < 0)
		return rc;
	FT_LOG_INFO_MSG("serving the debug API on %s (port %u)",
			app->cfg.debug_listen,
			ft_server_port(app->debug_server));
	return 0;
}
