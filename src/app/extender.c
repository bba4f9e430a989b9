/*
 * The extender verbs: filter, prioritize and bind, over the cluster state.
 *
 * Filter and prioritize read one snapshot taken at the start of the request
 * and never block on the API server. Bind chooses and assumes the placement
 * under the state's lock (so two binds never get one GPU), then POSTs the
 * Binding with the allocation annotation in it (one request; kube-apiserver
 * writes node and annotation together), on an offload thread of the server
 * (debug.c registers it so). A refusal forgets the assumption, like
 * kube-scheduler's own assume/forget; a Binding whose outcome is unknown
 * (FT_EUNKNOWN: a timeout, a reset, a reply cut short, a 5xx) keeps it until
 * the watch or a GET of the pod settles it (state.h, upkeep.h).
 */
#include <flextopo/app.h>
#include <flextopo/clock.h>
#include <flextopo/debug.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/place.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A node from the snapshot, or built from the request's Node object. */
typedef struct {
	const ft_node_t *node;
	ft_node_t *owned;
} node_ref_t;

static void node_lookup(node_ref_t *out, ft_app_t *app,
			const ft_snapshot_t *snap,
			const ft_extender_args_t *args, unsigned i)
{
	ft_node_source_t src;

	out->owned = NULL;
	out->node = ft_snapshot_find(snap, args->node_names[i]);
	if (out->node || !args->node_objects)
		return;
	if (ft_codec_node_decode(&src, args->node_objects[i], &app->opts,
				 NULL) < 0)
		return;
	if (ft_node_build(&out->owned, src.name, src.topology,
			  src.topology_error, src.labels, NULL, NULL, 0) == 0)
		out->node = out->owned;
	ft_node_source_dispose(&src);
}

static void reply_json(ft_http_response_t *out, char *body)
{
	out->status = 200;
	out->content_type = "application/json";
	out->body = body;
	out->body_len = body ? strlen(body) : 0;
}

static void reply_failure(ft_http_response_t *out, int rc)
{
	if (rc == FT_EINVAL)
		ft_http_reply_error(out, 400, "bad_json", "%s",
				    ft_error_last());
	else
		ft_http_reply_error(out, 500, "internal", "%s",
				    ft_error_last());
}

/*
 * Prioritize and preempt replies have no error field: out of sync, they
 * answer 503 with the error body. Returns true when `out` holds that reply.
 */
bool ft_app_refuse_unsynced(ft_http_response_t *out, ft_app_t *app)
{
	char why[256];

	if (ft_app_in_sync(app, why, sizeof(why)))
		return false;
	ft_http_reply_error(out, 503, "unavailable", "%s", why);
	return true;
}

/* Decode the args and the pod; on failure `out` holds the reply. */
static int decode_request(ft_http_response_t *out, ft_extender_args_t *args,
			  ft_pod_t *pod, ft_app_t *app,
			  const ft_http_request_t *req)
{
	int rc;

	memset(pod, 0, sizeof(*pod));
	if ((rc = ft_codec_extender_args_decode(args, req->body,
						req->body_len)) < 0) {
		reply_failure(out, rc);
		return rc;
	}
	if ((rc = ft_codec_pod_decode(pod, args->pod, &app->opts)) < 0) {
		ft_http_reply_error(out, 400, "bad_json", "Pod: %s",
				    ft_error_last());
		ft_codec_extender_args_dispose(args);
		return rc;
	}
	/* The GPUs its unallocated ResourceClaims ask (DRA nodes serve them),
	 * and its memo key. */
	ft_state_settle_demand(app->state, pod);
	return 0;
}

bool ft_app_needs_model(const ft_demand_t *d)
{
	return d->has_affinity || d->has_caps || ft_demand_wants_devices(d);
}

void ft_app_node_verdict(ft_verdict_t *out, const ft_node_t *node,
			 const ft_demand_t *d)
{
	if (node) {
		ft_place_filter_memo(out, node, d);
		return;
	}
	/*
	 * Devices, affinity and capabilities need the node's model: a node
	 * the watch has not shown yet may be full.
	 */
	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_COUNT;
	if (!ft_app_needs_model(d))
		return;
	out->fit = FT_UNFIT;
	snprintf(out->reason, sizeof(out->reason), "%s", FT_APP_NOT_CACHED);
}

void ft_app_note_verdict(ft_decision_t *dec, const ft_node_t *node,
			 const char *node_name, const ft_verdict_t *v,
			 const char *pod_name)
{
	if (!node) {
		ft_decision_add_node(dec, node_name,
				     v->fit == FT_FIT ? FT_VERDICT_PASS
						      : FT_VERDICT_FAIL,
				     FT_APP_NOT_CACHED);
		return;
	}
	ft_decision_add_verdict(dec, node->name, v);
	/* Checked here: a call that logs nothing still costs, per node. */
	if (v->fit != FT_FIT && ft_log_enabled(FT_LOG_DEBUG))
		ft_log(FT_LOG_DEBUG, "filter", pod_name, node->name, v->reason,
		       "node rejected");
}

static void filter_node(ft_filter_reply_t *r, unsigned i, const ft_node_t *node,
			const ft_demand_t *d, const char *pod_name,
			ft_decision_t *dec, const char *node_name)
{
	ft_verdict_t v;

	ft_app_node_verdict(&v, node, d);
	ft_app_note_verdict(dec, node, node_name, &v, pod_name);
	if (v.fit == FT_FIT)
		ft_codec_filter_reply_pass(r, i);
	else
		ft_codec_filter_reply_fail(r, i, v.reason,
					   v.fit == FT_UNFIT_UNRESOLVABLE);
}

/*
 * Out of sync (ft_app_in_sync): the reply's Error, not a failure of every
 * node. kube-scheduler takes an extender's error for a scheduling error and
 * retries the pod after its backoff (1 s, doubling to 10 s). Nodes that
 * fail would make it unschedulable, rejected by "Extender", and kube-
 * scheduler would try it again only on some cluster event, or after
 * podMaxInUnschedulablePodsDuration (5 min): the extender coming back in
 * sync is no event it sees, and a quiet cluster has none.
 */
static int refuse_unsynced(ft_filter_reply_t *r, ft_decision_t *dec,
			   const char *why)
{
	char error[416];

	snprintf(error, sizeof(error), "flextopo: %.400s", why);
	ft_decision_message(dec, true, "%s", error);
	return ft_codec_filter_reply_error(r, error);
}

/*
 * A pod whose Binding to `pending` is in flight or of unknown outcome may
 * be bound only there until that is settled (bind refuses other nodes), and
 * there with the units it already holds: they are its own, whether or not
 * that Binding landed. So that node passes although its model counts those
 * units as taken, and kube-scheduler's retry binds the pod there at once
 * (a Binding that had landed answers 409 for that node: bound), instead of
 * waiting, unschedulable, until the outcome is settled and some cluster
 * event happens to requeue the pod. Every other node fails, and preemption
 * cannot help there. Returns false when the normal filter decides.
 */
static bool filter_pending(ft_filter_reply_t *r, unsigned i,
			   const ft_node_t *node, const char *node_name,
			   const ft_pod_t *pod, const char *pending,
			   bool unknown, ft_decision_t *dec)
{
	const ft_holding_t *held;
	char reason[640];

	if (strcmp(node_name, pending) != 0) {
		snprintf(reason, sizeof(reason),
			 "flextopo: the pod's Binding to node %.253s is %s; "
			 "it may be bound only there until that is settled",
			 pending,
			 unknown ? "of unknown outcome" : "still in flight");
		ft_codec_filter_reply_fail(r, i, reason, true);
		ft_decision_add_node(dec, node_name, FT_VERDICT_UNRESOLVABLE,
				     reason);
		return true;
	}
	held = node ? ft_node_find_holding(node, pod->uid) : NULL;
	if (!held || !ft_holding_has_units(held))
		return false;
	ft_codec_filter_reply_pass(r, i);
	ft_decision_add_node(dec, node_name, FT_VERDICT_PASS,
			     "holds its units here from a Binding not settled "
			     "yet");
	return true;
}

/* The nodes of a request, looked up once: refs[i] for node_names[i]. */
static node_ref_t *lookup_all(ft_app_t *app, const ft_snapshot_t *snap,
			      const ft_extender_args_t *args)
{
	node_ref_t *refs =
	    calloc(args->n_nodes ? args->n_nodes : 1, sizeof(*refs));

	for (unsigned i = 0; refs && i < args->n_nodes; i++)
		node_lookup(&refs[i], app, snap, args, i);
	return refs;
}

static void release_all(node_ref_t *refs, unsigned n)
{
	for (unsigned i = 0; refs && i < n; i++)
		ft_node_unref(refs[i].owned);
	free(refs);
}

/* The nodes of `refs` as one array (NULL when out of memory). */
static const ft_node_t **nodes_of(const node_ref_t *refs, unsigned n)
{
	const ft_node_t **nodes = calloc(n ? n : 1, sizeof(*nodes));

	for (unsigned i = 0; nodes && i < n; i++)
		nodes[i] = refs[i].node;
	return nodes;
}

static int filter_nodes(ft_filter_reply_t *r, ft_app_t *app,
			const ft_extender_args_t *args, const ft_pod_t *pod)
{
	ft_snapshot_t *snap = ft_state_snapshot(app->state);
	node_ref_t *refs = NULL;
	const ft_node_t **nodes = NULL;
	ft_decision_t dec;
	char msg[400], *pending;
	bool unknown;
	int rc;

	ft_decision_init(&dec, FT_VERB_FILTER, pod->ns, pod->name, pod->uid,
			 pod->priority);
	if (!ft_app_in_sync(app, msg, sizeof(msg))) {
		ft_snapshot_unref(snap);
		rc = refuse_unsynced(r, &dec, msg);
		ft_decisions_record(app->decisions, &dec);
		return rc;
	}
	if (pod->demand_error) {
		snprintf(msg, sizeof(msg), "pod %s/%s: %s", pod->ns, pod->name,
			 pod->demand_error);
		ft_snapshot_unref(snap);
		ft_decision_message(&dec, true, "%s", msg);
		ft_decisions_record(app->decisions, &dec);
		return ft_codec_filter_reply_error(r, msg);
	}
	if (!(refs = lookup_all(app, snap, args)) ||
	    !(nodes = nodes_of(refs, args->n_nodes))) {
		release_all(refs, args->n_nodes);
		ft_snapshot_unref(snap);
		return ft_error_set(FT_ENOMEM, "filter: out of memory");
	}
	pending = ft_state_bind_pending(app->state, pod->uid, &unknown);
	for (unsigned i = 0; i < args->n_nodes; i++) {
		ft_place_prefetch_ahead(nodes, args->n_nodes, i);
		if (!pending ||
		    !filter_pending(r, i, nodes[i], args->node_names[i], pod,
				    pending, unknown, &dec))
			filter_node(r, i, nodes[i], &pod->demand, pod->name,
				    &dec, args->node_names[i]);
	}
	free(pending);
	free(nodes);
	release_all(refs, args->n_nodes);
	ft_snapshot_unref(snap);
	ft_decisions_record(app->decisions, &dec);
	return 0;
}

void ft_app_filter(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload)
{
	ft_app_t *app = payload;
	ft_extender_args_t args;
	ft_filter_reply_t *r = NULL;
	ft_pod_t pod;
	char *body = NULL;
	int rc;

	if (decode_request(out, &args, &pod, app, req) < 0)
		return;
	ft_state_observe_pod(app->state, &pod);
	if (ft_codec_filter_reply_new(&r, &args) < 0 ||
	    filter_nodes(r, app, &args, &pod) < 0) {
		reply_failure(out, FT_ENOMEM);
		goto cleanup;
	}
	rc = ft_codec_filter_reply_finish(&body, r);
	r = NULL;
	if (rc < 0)
		reply_failure(out, FT_ENOMEM);
	else
		reply_json(out, body);
cleanup:
	ft_codec_filter_reply_free(r);
	ft_pod_dispose(&pod);
	ft_codec_extender_args_dispose(&args);
}

void ft_app_prioritize(ft_http_response_t *out, const ft_http_request_t *req,
		       void *payload)
{
	ft_app_t *app = payload;
	ft_extender_args_t args;
	ft_snapshot_t *snap = NULL;
	node_ref_t *refs = NULL;
	const ft_node_t **nodes = NULL;
	int64_t *ranks = NULL;
	int *scores = NULL;
	ft_decision_t dec;
	ft_pod_t pod;
	char *body = NULL;
	unsigned n;

	if (ft_app_refuse_unsynced(out, app) ||
	    decode_request(out, &args, &pod, app, req) < 0)
		return;
	n = args.n_nodes ? args.n_nodes : 1;
	ft_decision_init(&dec, FT_VERB_PRIORITIZE, pod.ns, pod.name, pod.uid,
			 pod.priority);
	snap = ft_state_snapshot(app->state);
	scores = calloc(n, sizeof(*scores));
	ranks = calloc(n, sizeof(*ranks));
	refs = lookup_all(app, snap, &args);
	nodes = refs ? nodes_of(refs, args.n_nodes) : NULL;
	if (scores && ranks && nodes && refs) {
		ft_state_rank(app->state, ranks, nodes, args.n_nodes,
			      &pod.demand, app->cfg.policy);
		ft_scores_of_ranks(scores, ranks, args.n_nodes,
				   FT_EXTENDER_SCORE_MAX);
		for (unsigned i = 0; i < args.n_nodes; i++)
			ft_decision_add_score(&dec, args.node_names[i],
					      scores[i]);
	}
	ft_decisions_record(app->decisions, &dec);
	if (!scores || !ranks || !nodes || !refs ||
	    ft_codec_priorities_encode(&body, &args, scores) < 0)
		reply_failure(out, FT_ENOMEM);
	else
		reply_json(out, body);
	release_all(refs, args.n_nodes);
	free(nodes);
	free(ranks);
	free(scores);
	ft_snapshot_unref(snap);
	ft_pod_dispose(&pod);
	ft_codec_extender_args_dispose(&args);
}

/* The pod to bind: from the cache, else read from the API server. */
static int bind_pod(ft_pod_t *out, ft_app_t *app, const ft_bind_args_t *b)
{
	cJSON *obj = NULL;
	int rc;

	if (ft_state_find_pod(app->state, b->pod_uid, out) == 0)
		return 0;
	if (!app->kube)
		return ft_error_set(FT_ENOTFOUND, "pod %s/%s: not in cache",
				    b->pod_namespace, b->pod_name);
	if ((rc = ft_kube_get_pod(app->kube, b->pod_namespace, b->pod_name,
				  &obj)) < 0)
		return rc;
	rc = ft_codec_pod_decode(out, obj, &app->opts);
	cJSON_Delete(obj);
	if (rc == 0 && strcmp(out->uid, b->pod_uid) != 0) {
		ft_pod_dispose(out);
		rc = ft_error_set(FT_ENOTFOUND, "pod %s/%s: uid %s is gone",
				  b->pod_namespace, b->pod_name, b->pod_uid);
	}
	return rc;
}

/*
 * After a 409: did an earlier try of this very bind succeed? The pod has a
 * node; when it cannot be read, whether ours is unknown.
 */
static int check_already_bound(ft_app_t *app, const ft_bind_args_t *b)
{
	cJSON *obj = NULL;
	ft_pod_t pod;
	int rc;

	rc = ft_kube_get_pod(app->kube, b->pod_namespace, b->pod_name, &obj);
	if (rc == FT_EIO || rc == FT_EUNAVAIL)
		return ft_error_set(
		    FT_EUNKNOWN,
		    "bind pod %s/%s: it has a node (HTTP 409), and reading it failed: %s",
		    b->pod_namespace, b->pod_name, ft_error_last());
	if (rc < 0)
		return rc;
	rc = ft_codec_pod_decode(&pod, obj, &app->opts);
	cJSON_Delete(obj);
	if (rc < 0)
		return rc;
	if (!pod.node || strcmp(pod.node, b->node) != 0 ||
	    strcmp(pod.uid, b->pod_uid) != 0)
		rc = ft_error_set(FT_ECONFLICT,
				  "pod %s/%s is bound to node %s, not %s",
				  b->pod_namespace, b->pod_name,
				  pod.node ? pod.node : "(none)", b->node);
	ft_pod_dispose(&pod);
	return rc;
}

static int write_binding(ft_app_t *app, const ft_bind_args_t *b,
			 const char *annotation)
{
	char key[300];
	int rc;

	snprintf(key, sizeof(key), "%s/allocation",
		 app->opts.annotation_prefix);
	rc = ft_kube_bind_pod(app->kube, b->pod_namespace, b->pod_name,
			      b->pod_uid, b->node, annotation ? key : NULL,
			      annotation);
	if (rc == FT_ECONFLICT)
		rc = check_already_bound(app, b);
	return rc;
}

/*
 * Settle the assumption by the Binding's outcome: bound, refused (forget),
 * or unknown (keep: the upkeep thread reads the pod until it is known).
 */
static void note_outcome(ft_app_t *app, const char *uid, int rc,
			 uint64_t sent_ns)
{
	char why[512];

	if (rc == FT_EUNKNOWN) {
		snprintf(why, sizeof(why), "%s", ft_error_last());
		ft_state_bind_unknown(app->state, uid, sent_ns);
		ft_error_set(
		    FT_EUNKNOWN,
		    "%s; its units stay held until the API server shows whether the Binding landed",
		    why);
	} else if (rc < 0) {
		ft_state_forget(app->state, uid);
	} else {
		ft_state_bind_done(app->state, uid);
	}
}

/* The pod's claims, read from the API server: `claims` gets n of them. */
static int read_claims(ft_dra_claim_t *claims, unsigned *n, ft_app_t *app,
		       const ft_pod_t *pod)
{
	cJSON *obj = NULL;
	int rc = 0;

	*n = 0;
	for (unsigned i = 0; i < pod->n_claims && rc == 0; i++) {
		if ((rc = ft_kube_get_claim(app->kube, pod->ns, pod->claims[i],
					    &obj)) < 0)
			break;
		if ((rc = ft_codec_dra_claim_decode(&claims[*n], obj)) == 0 &&
		    !claims[(*n)++].allocated)
			rc = ft_error_set(
			    FT_EIO,
			    "pod %s/%s: resourceclaim %s is not allocated at bind (DynamicResources' PreBind writes it first)",
			    pod->ns, pod->name, pod->claims[i]);
		cJSON_Delete(obj);
		obj = NULL;
	}
	return rc;
}

int ft_app_assume_claims(char **annotation, ft_app_t *app, const ft_pod_t *pod,
			 const char *node, ft_dra_claim_t *claims, unsigned n,
			 int rc)
{
	const ft_dra_claim_t *ptrs[FT_DRA_POD_CLAIMS_MAX];

	for (unsigned i = 0; i < n && i < FT_DRA_POD_CLAIMS_MAX; i++)
		ptrs[i] = &claims[i];
	if (rc == 0)
		rc = ft_state_assume_dra(app->state, pod, node, app->cfg.policy,
					 ptrs, n, annotation);
	for (unsigned i = 0; i < n; i++)
		ft_dra_claim_dispose(&claims[i]);
	return rc;
}

/*
 * Bind on a DRA node: the pod and its claims read fresh (a cache may lag
 * the write PreBind just made), then the CPUs near DRA's devices. Without
 * an API server (a snapshot), the state's own copies.
 */
static int assume_dra(char **annotation, ft_app_t *app, const ft_bind_args_t *b,
		      const ft_pod_t *cached)
{
	ft_dra_claim_t claims[FT_DRA_POD_CLAIMS_MAX];
	unsigned n = 0;
	cJSON *obj = NULL;
	ft_pod_t pod;
	int rc;

	if (!app->kube)
		return ft_state_assume_dra(app->state, cached, b->node,
					   app->cfg.policy, NULL, 0,
					   annotation);
	memset(&pod, 0, sizeof(pod));
	if ((rc = ft_kube_get_pod(app->kube, b->pod_namespace, b->pod_name,
				  &obj)) < 0 ||
	    (rc = ft_codec_pod_decode(&pod, obj, &app->opts)) < 0)
		goto cleanup;
	if (pod.n_claims > FT_DRA_POD_CLAIMS_MAX) {
		rc = ft_error_set(
		    FT_EINVAL, "pod %s/%s: %u resourceclaims, at most %d",
		    pod.ns, pod.name, pod.n_claims, FT_DRA_POD_CLAIMS_MAX);
		goto cleanup;
	}
	rc = read_claims(claims, &n, app, &pod);
	rc =
	    ft_app_assume_claims(annotation, app, &pod, b->node, claims, n, rc);
cleanup:
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
	return rc;
}

bool ft_app_dra_chooses(ft_app_t *app, const ft_pod_t *pod, const char *node)
{
	return (pod->n_claims || ft_demand_wants_devices(&pod->demand)) &&
	       ft_state_node_dra(app->state, node);
}

static int do_bind(ft_app_t *app, const ft_bind_args_t *b)
{
	char *annotation = NULL, why[256];
	uint64_t sent_ns;
	ft_pod_t pod;
	int rc;

	if (!ft_app_in_sync(app, why, sizeof(why)))
		return ft_error_set(FT_EUNAVAIL, "pod %s/%s not bound: %s",
				    b->pod_namespace, b->pod_name, why);
	if ((rc = bind_pod(&pod, app, b)) < 0)
		return rc;
	if (pod.demand_error) {
		rc = ft_error_set(FT_EINVAL, "pod %s/%s: %s", pod.ns, pod.name,
				  pod.demand_error);
		goto cleanup;
	}
	if (ft_app_dra_chooses(app, &pod, b->node))
		rc = assume_dra(&annotation, app, b, &pod);
	else
		rc = ft_state_assume(app->state, &pod, b->node, app->cfg.policy,
				     &annotation);
	if (rc < 0)
		goto cleanup;
	if (!app->kube) {
		ft_state_confirm(app->state, pod.uid);
		goto cleanup;
	}
	sent_ns = ft_clock_ns();
	rc = write_binding(app, b, annotation);
	note_outcome(app, pod.uid, rc, sent_ns);
cleanup:
	ft_log(rc < 0 ? FT_LOG_WARN : FT_LOG_DEBUG, "bind", pod.name, b->node,
	       rc < 0 ? ft_error_last() : NULL, "%s %s",
	       rc < 0 ? "bind failed" : "bound",
	       annotation ? annotation : "(no devices)");
	free(annotation);
	ft_pod_dispose(&pod);
	return rc;
}

void ft_app_bind(ft_http_response_t *out, const ft_http_request_t *req,
		 void *payload)
{
	ft_app_t *app = payload;
	ft_bind_args_t b;
	char *body = NULL;
	int rc;

	if ((rc = ft_codec_bind_args_decode(&b, req->body, req->body_len)) <
	    0) {
		reply_failure(out, rc);
		return;
	}
	rc = do_bind(app, &b);
	ft_app_record_bind(app, &b, rc, rc < 0 ? ft_error_last() : NULL);
	if (ft_codec_bind_result_encode(&body, rc < 0 ? ft_error_last() : "") <
	    0)
		reply_failure(out, FT_ENOMEM);
	else
		reply_json(out, body);
	ft_codec_bind_args_dispose(&b);
}

void ft_app_healthz(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload)
{
	ft_http_reply_text(out, 200, "text/plain", "ok\n");
}

void ft_app_readyz(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload)
{
	char why[256];

	if (ft_app_in_sync(payload, why, sizeof(why))) {
		ft_http_reply_text(out, 200, "text/plain", "ok\n");
		return;
	}
	strcat(why, "\n");
	ft_http_reply_text(out, 503, "text/plain", why);
}

void ft_app_version(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload)
{
	char body[256];

	snprintf(body, sizeof(body),
		 "{\"version\":\"%s\",\"commit\":\"%s\",\"buildTime\":\"%s\"}",
		 FLEXTOPO_VERSION, FLEXTOPO_COMMIT, FLEXTOPO_BUILD_TIME);
	ft_http_reply_text(out, 200, "application/json", body);
}
