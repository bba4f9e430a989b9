/*
 * flextopo embedded in a scheduler process (embed.h): an application
 * without listeners of its own for the verbs, fed by the host's informers,
 * asked by the host's extension points. Every answer comes from the
 * function that answers the matching extender verb (extender.c, preempt.c,
 * state.c); what is here is the handle of one pod's scheduling cycle and
 * the bookkeeping of its decisions.
 *
 * A pod handle holds the decoded pod and one snapshot reference for the
 * whole cycle, so that Filter, PreScore, Reserve and PostFilter all read
 * the model kube-scheduler's cycle began with (as the extender takes one
 * snapshot per request). Its decisions are built under its own mutex:
 * kube-scheduler runs Filter, and the victim search of preemption, for
 * many nodes at once.
 */
#include <flextopo/clock.h>
#include <flextopo/debug.h>
#include <flextopo/embed.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>
#include <flextopo/log.h>
#include <flextopo/victims.h>
#include <flextopo/webhook.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define NODE_NAME_MAX 254 /* a DNS subdomain, 253 bytes, and the NUL */

struct ft_embed {
	ft_app_t app;
};

struct ft_embed_pod {
	ft_embed_t *embed;
	ft_pod_t pod;
	ft_snapshot_t *snap;
	pthread_mutex_t mu; /* guards what follows */
	uint64_t filter_ns; /* time spent in ft_embed_filter() */
	bool filter_recorded;
	ft_decision_t filter;
	uint64_t preempt_ns; /* time spent in ft_embed_victims() */
	bool preempt_recorded;
	ft_decision_t preempt;
};

typedef void (*feed_fn)(ft_state_t *state, const cJSON *obj);

static const feed_fn apply_fns[FT_KIND_COUNT] = {
    ft_state_apply_node,      ft_state_apply_pod,      ft_state_apply_pdb,
    ft_state_apply_slice,     ft_state_apply_claim,    ft_state_apply_class,
    ft_state_apply_pod_group, ft_state_apply_pod_group};
static const feed_fn delete_fns[FT_KIND_COUNT] = {
    ft_state_delete_node,      ft_state_delete_pod,	 ft_state_delete_pdb,
    ft_state_delete_slice,     ft_state_delete_claim,	 ft_state_delete_class,
    ft_state_delete_pod_group, ft_state_delete_pod_group};
_Static_assert(FT_KIND_COUNT == 8, "a feed function per kind");

int ft_embed_new(ft_embed_t **out, const char *config_path)
{
	ft_embed_t *e = calloc(1, sizeof(*e));
	int rc;

	*out = NULL;
	if (!e)
		return ft_error_set(FT_ENOMEM, "embed: out of memory");
	if ((rc = ft_config_init(&e->app.cfg)) < 0 ||
	    (config_path && config_path[0] &&
	     (rc = ft_config_load_file(&e->app.cfg, config_path)) < 0) ||
	    (rc = ft_app_init(&e->app)) < 0) {
		ft_embed_free(e);
		return rc;
	}
	e->app.embedded = true;
	*out = e;
	return 0;
}

int ft_embed_serve(ft_embed_t *e)
{
	ft_app_t *app = &e->app;
	int rc;

	if ((rc = ft_app_debug_start(app)) < 0)
		return rc;
	/* The scrapers' tokens are reviewed by the API server: the host's
	 * client lives in Go, so the listener gets one of its own. */
	if (app->cfg.metrics_listen[0] &&
	    ((!app->kube && (rc = ft_app_connect(app)) < 0) ||
	     (rc = ft_app_metrics_start(app)) < 0))
		return rc;
	/* The admission webhook reads the state's DeviceClasses, which the
	 * host's informers feed, and never calls the API server. */
	return ft_app_webhook_start(app);
}

void ft_embed_free(ft_embed_t *e)
{
	if (!e)
		return;
	ft_app_dispose(&e->app);
	free(e);
}

ft_app_t *ft_embed_app(ft_embed_t *e)
{
	return &e->app;
}

static int feed(ft_embed_t *e, const feed_fn *fns, ft_kind_t kind,
		const char *json, size_t len)
{
	cJSON *obj;

	if ((unsigned)kind >= FT_KIND_COUNT)
		return ft_error_set(FT_EINVAL, "embed: object kind %d unknown",
				    (int)kind);
	if (!(obj = cJSON_ParseWithLength(json, len)))
		return ft_error_set(
		    FT_EINVAL, "embed: object of kind %d: not JSON", (int)kind);
	fns[kind](e->app.state, obj);
	cJSON_Delete(obj);
	return 0;
}

int ft_embed_apply(ft_embed_t *e, ft_kind_t kind, const char *json, size_t len)
{
	return feed(e, apply_fns, kind, json, len);
}

int ft_embed_delete(ft_embed_t *e, ft_kind_t kind, const char *json, size_t len)
{
	return feed(e, delete_fns, kind, json, len);
}

void ft_embed_list_begin(ft_embed_t *e, ft_kind_t kind)
{
	ft_state_replace_begin(e->app.state, kind);
}

void ft_embed_list_end(ft_embed_t *e, ft_kind_t kind)
{
	ft_state_replace_end(e->app.state, kind);
}

void ft_embed_set_synced(ft_embed_t *e, bool synced)
{
	atomic_store(&e->app.embedded_synced, synced);
}

bool ft_embed_dra(const ft_embed_t *e)
{
	return e->app.cfg.dra == FT_ON;
}

const char *ft_embed_annotation_prefix(const ft_embed_t *e)
{
	return e->app.cfg.annotation_prefix;
}

/* ---- one pod's cycle ---- */

/* A filter decision that refuses the pod before any node: out of sync, or
 * annotations that do not parse (the extender's filter records the same). */
static void record_refusal(ft_app_t *app, const ft_pod_t *pod, const char *msg)
{
	ft_decision_t dec;

	ft_decision_init(&dec, FT_VERB_FILTER, pod->ns, pod->name, pod->uid,
			 pod->priority);
	ft_decision_message(&dec, true, "%s", msg);
	ft_decisions_record(app->decisions, &dec);
}

/* Refuse a pod the state may not answer for yet, or whose annotations
 * are wrong; 0 when it may be scheduled. */
static int refuse(ft_app_t *app, const ft_pod_t *pod)
{
	char why[400], msg[512];

	if (!ft_app_in_sync(app, why, sizeof(why))) {
		snprintf(msg, sizeof(msg), "flextopo: %s", why);
		record_refusal(app, pod, msg);
		return ft_error_set(FT_EUNAVAIL, "%s", msg);
	}
	if (!pod->demand_error)
		return 0;
	snprintf(msg, sizeof(msg), "pod %s/%s: %s", pod->ns, pod->name,
		 pod->demand_error);
	record_refusal(app, pod, msg);
	return ft_error_set(FT_EINVAL, "%s", msg);
}

static int decode_pod(ft_pod_t *out, ft_app_t *app, const char *json,
		      size_t len)
{
	cJSON *obj = cJSON_ParseWithLength(json, len);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!obj)
		return ft_error_set(FT_EINVAL, "embed: pod: not JSON");
	rc = ft_codec_pod_decode(out, obj, &app->opts);
	cJSON_Delete(obj);
	return rc;
}

int ft_embed_pod_new(ft_embed_pod_t **out, ft_embed_t *e, const char *json,
		     size_t len)
{
	ft_embed_pod_t *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return ft_error_set(FT_ENOMEM, "embed: out of memory");
	if ((rc = decode_pod(&p->pod, &e->app, json, len)) < 0 ||
	    (rc = refuse(&e->app, &p->pod)) < 0) {
		ft_pod_dispose(&p->pod);
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->mu, NULL);
	p->embed = e;
	/* The GPUs its unallocated ResourceClaims ask (DRA nodes serve them),
	 * and its memo key. */
	ft_state_settle_demand(e->app.state, &p->pod);
	p->snap = ft_state_snapshot(e->app.state);
	ft_decision_init(&p->filter, FT_VERB_FILTER, p->pod.ns, p->pod.name,
			 p->pod.uid, p->pod.priority);
	ft_decision_init(&p->preempt, FT_VERB_PREEMPT, p->pod.ns, p->pod.name,
			 p->pod.uid, p->pod.priority);
	*out = p;
	return 0;
}

/* The filter decision, once, when the cycle has filtered some node. */
static void record_filter(ft_embed_pod_t *p)
{
	ft_app_t *app = &p->embed->app;

	pthread_mutex_lock(&p->mu);
	if (!p->filter_recorded && p->filter.n_nodes_total) {
		ft_decisions_record(app->decisions, &p->filter);
		ft_metrics_request(app->metrics, FT_VERB_FILTER, p->filter_ns);
	}
	p->filter_recorded = true;
	pthread_mutex_unlock(&p->mu);
}

void ft_embed_preempt_done(ft_embed_pod_t *p)
{
	ft_app_t *app = &p->embed->app;

	pthread_mutex_lock(&p->mu);
	if (!p->preempt_recorded && p->preempt.n_nodes_total) {
		ft_app_record_preempt(app, &p->preempt, p->pod.demand.mode);
		ft_metrics_request(app->metrics, FT_VERB_PREEMPT,
				   p->preempt_ns);
	}
	p->preempt_recorded = true;
	pthread_mutex_unlock(&p->mu);
}

void ft_embed_pod_free(ft_embed_pod_t *p)
{
	if (!p)
		return;
	record_filter(p);
	ft_embed_preempt_done(p);
	ft_snapshot_unref(p->snap);
	ft_pod_dispose(&p->pod);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

bool ft_embed_pod_wants_topology(const ft_embed_pod_t *p)
{
	return ft_app_needs_model(&p->pod.demand);
}

/* A name passed with its length, NUL-terminated in `out`; "" when it
 * cannot be a node name. */
static void copy_name(char *out, const char *name, size_t len)
{
	if (len >= NODE_NAME_MAX)
		len = 0;
	memcpy(out, name, len);
	out[len] = '\0';
}

/*
 * The verdict with the holdings of the pods `removed` gone, as kube-
 * scheduler's preemption dry run asks it: feasible at the pod's level in
 * guaranteed mode, anywhere on the node otherwise (ft_place_filter's
 * levels).
 */
static void verdict_without(ft_verdict_t *out, const ft_node_t *node,
			    const ft_demand_t *d, const char *removed,
			    unsigned n_removed)
{
	ft_level_t level = d->has_affinity && d->mode == FT_MODE_GUARANTEED
			       ? ft_place_effective_level(d)
			       : FT_LEVEL_NODE;
	uint16_t idx[FT_VICTIM_MAX];
	unsigned n = 0;

	for (unsigned i = 0; i < n_removed;
	     i++, removed += strlen(removed) + 1) {
		const ft_holding_t *h = ft_node_find_holding(node, removed);
		if (h && n < FT_VICTIM_MAX)
			idx[n++] = (uint16_t)(h - node->holdings);
	}
	if (!n) {
		ft_place_filter_memo(out, node, d);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_COUNT;
	if (ft_victims_feasible(node, d, level, idx, n))
		return;
	out->fit = FT_UNFIT;
	snprintf(
	    out->reason, sizeof(out->reason),
	    "%s: no placement even with the %u pods that hold units here removed",
	    ft_level_name(level), n);
}

ft_fit_t ft_embed_filter(ft_embed_pod_t *p, const char *name, size_t name_len,
			 const char *removed, unsigned n_removed, char *reason,
			 size_t size)
{
	uint64_t start = ft_clock_ns();
	char key[NODE_NAME_MAX];
	const ft_node_t *node;
	ft_verdict_t v;

	copy_name(key, name, name_len);
	node = ft_snapshot_find(p->snap, key);
	if (n_removed && node && node->topology &&
	    ft_demand_wants_devices(&p->pod.demand))
		verdict_without(&v, node, &p->pod.demand, removed, n_removed);
	else
		ft_app_node_verdict(&v, node, &p->pod.demand);
	/* A fit has no reason: the plugin reads none. */
	if (size && v.fit != FT_FIT)
		snprintf(reason, size, "%s", v.reason);
	else if (size)
		reason[0] = '\0';
	pthread_mutex_lock(&p->mu);
	if (!p->filter_recorded) {
		ft_app_note_verdict(&p->filter, node, key, &v, p->pod.name);
		p->filter_ns += ft_clock_ns() - start;
	}
	pthread_mutex_unlock(&p->mu);
	return v.fit;
}

int ft_embed_rank(ft_embed_pod_t *p, const char *names, unsigned n,
		  int64_t *ranks)
{
	ft_app_t *app = &p->embed->app;
	uint64_t start = ft_clock_ns();
	const ft_node_t **nodes = calloc(n ? n : 1, sizeof(*nodes));
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	int *scores = calloc(n ? n : 1, sizeof(*scores));
	ft_decision_t dec;
	int rc = 0;

	record_filter(p);
	if (!nodes || !keys || !scores) {
		rc = ft_error_set(FT_ENOMEM, "embed: out of memory");
		goto cleanup;
	}
	for (unsigned i = 0; i < n; i++, names += strlen(names) + 1) {
		keys[i] = names;
		nodes[i] = ft_snapshot_find(p->snap, names);
	}
	ft_state_rank(app->state, ranks, nodes, n, &p->pod.demand,
		      app->cfg.policy);
	ft_scores_of_ranks(scores, ranks, n, FT_EXTENDER_SCORE_MAX);
	ft_decision_init(&dec, FT_VERB_PRIORITIZE, p->pod.ns, p->pod.name,
			 p->pod.uid, p->pod.priority);
	for (unsigned i = 0; i < n; i++)
		ft_decision_add_score(&dec, keys[i], scores[i]);
	ft_decisions_record(app->decisions, &dec);
	ft_metrics_request(app->metrics, FT_VERB_PRIORITIZE,
			   ft_clock_ns() - start);
cleanup:
	free(scores);
	free(keys);
	free(nodes);
	return rc;
}

int ft_embed_assume(ft_embed_pod_t *p, const char *name, char **out_annotation)
{
	ft_app_t *app = &p->embed->app;

	*out_annotation = NULL;
	record_filter(p);
	if (ft_app_dra_chooses(app, &p->pod, name))
		return 1;
	return ft_state_assume(app->state, &p->pod, name, app->cfg.policy,
			       out_annotation);
}

/* The claims of a JSON array, each allocated; *n of them decoded. */
static int decode_claims(ft_dra_claim_t *claims, unsigned *n,
			 const cJSON *array, const ft_pod_t *pod)
{
	const cJSON *obj;
	int rc;

	*n = 0;
	if (!cJSON_IsArray(array))
		return ft_error_set(FT_EINVAL,
				    "embed: resourceclaims: not a JSON array");
	cJSON_ArrayForEach (obj, array) {
		if (*n >= FT_DRA_POD_CLAIMS_MAX)
			return ft_error_set(
			    FT_EINVAL, "pod %s/%s: more than %d resourceclaims",
			    pod->ns, pod->name, FT_DRA_POD_CLAIMS_MAX);
		if ((rc = ft_codec_dra_claim_decode(&claims[*n], obj)) < 0)
			return rc;
		if (!claims[(*n)++].allocated)
			return ft_error_set(
			    FT_EINVAL,
			    "pod %s/%s: resourceclaim %s is not allocated at bind",
			    pod->ns, pod->name, claims[*n - 1].name);
	}
	return 0;
}

int ft_embed_assume_dra(ft_embed_t *e, const char *pod_json, size_t pod_len,
			const char *name, const char *claims_json,
			size_t claims_len, char **out_annotation)
{
	ft_dra_claim_t claims[FT_DRA_POD_CLAIMS_MAX];
	cJSON *array = cJSON_ParseWithLength(claims_json, claims_len);
	unsigned n = 0;
	ft_pod_t pod;
	int rc;

	*out_annotation = NULL;
	if ((rc = decode_pod(&pod, &e->app, pod_json, pod_len)) == 0) {
		rc = decode_claims(claims, &n, array, &pod);
		rc = ft_app_assume_claims(out_annotation, &e->app, &pod, name,
					  claims, n, rc);
	}
	ft_pod_dispose(&pod);
	cJSON_Delete(array);
	return rc;
}

void ft_embed_bound(ft_embed_pod_t *p, const char *name, int rc,
		    const char *error, uint64_t ns)
{
	ft_app_t *app = &p->embed->app;
	ft_bind_args_t b = {.pod_name = p->pod.name,
			    .pod_namespace = p->pod.ns,
			    .pod_uid = p->pod.uid,
			    .node = (char *)name};

	/*
	 * As kube-scheduler forgets a pod whose bind failed (its cache), so
	 * does the model: a Binding that landed all the same comes back
	 * through the informer with its annotation.
	 */
	if (rc < 0)
		ft_state_forget(app->state, p->pod.uid);
	else
		ft_state_bind_done(app->state, p->pod.uid);
	ft_app_record_bind(app, &b, rc, error);
	ft_metrics_request(app->metrics, FT_VERB_BIND, ns);
}

void ft_embed_forget(ft_embed_t *e, const char *uid)
{
	ft_state_forget(e->app.state, uid);
}

/* `n` NUL-terminated strings back to back as an array (heap, borrowed). */
static const char **split(const char *list, unsigned n)
{
	const char **out = calloc(n ? n : 1, sizeof(*out));

	for (unsigned i = 0; out && i < n; i++, list += strlen(list) + 1)
		out[i] = list;
	return out;
}

/* The chosen victims' uids back to back (heap). */
static int join_victims(ft_embed_victims_t *out, const ft_preempt_choice_t *c)
{
	size_t len = 0, at = 0;

	for (unsigned i = 0; i < c->n; i++)
		len += strlen(c->victims[i].uid) + 1;
	if (!(out->uids = malloc(len ? len : 1)))
		return ft_error_set(FT_ENOMEM, "embed: out of memory");
	for (unsigned i = 0; i < c->n; i++) {
		size_t k = strlen(c->victims[i].uid) + 1;
		memcpy(out->uids + at, c->victims[i].uid, k);
		at += k;
	}
	out->n = c->n;
	return 0;
}

int ft_embed_victims(ft_embed_victims_t *out, ft_embed_pod_t *p,
		     const char *name, const char *proposed,
		     unsigned n_proposed, unsigned proposed_pdb_violations)
{
	ft_app_t *app = &p->embed->app;
	uint64_t start = ft_clock_ns();
	ft_preempt_node_t n = {.name = name,
			       .n_victims = n_proposed,
			       .pdb_violations = proposed_pdb_violations};
	ft_preempt_choice_t c;
	ft_decision_t dec;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	record_filter(p);
	if (!(n.victim_uids = split(proposed, n_proposed)))
		return ft_error_set(FT_ENOMEM, "embed: out of memory");
	ft_decision_init(&dec, FT_VERB_PREEMPT, p->pod.ns, p->pod.name,
			 p->pod.uid, p->pod.priority);
	ft_app_preempt_decide(&c, app, p->snap, &p->pod, &n, &dec);
	out->outcome = c.outcome;
	out->pdb_violations = c.pdb_violations;
	out->cost = c.cost;
	out->n_broken = c.n_broken;
	if (c.outcome == FT_PREEMPT_VICTIMS)
		rc = join_victims(out, &c);
	pthread_mutex_lock(&p->mu);
	ft_decision_merge(&p->preempt, &dec);
	p->preempt_ns += ft_clock_ns() - start;
	pthread_mutex_unlock(&p->mu);
	free(n.victim_uids);
	return rc;
}
