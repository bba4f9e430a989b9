/*
 * The preempt verb: for each candidate node kube-scheduler proposes, replace
 * its victims by the cheapest set whose eviction gives the preemptor a
 * placement at its affinity level (victims.h), or drop the node when no set
 * does. The scheduler trusts the reply and does not re-check it
 * (pkg/scheduler/framework/preemption/preemption.go, callExtenders).
 *
 * Proposed victims that hold nothing the model tracks (no GPU, MIG instance,
 * replica, pinned CPU or NUMA-charged memory) are kept: the scheduler
 * proposed them for CPU, memory or pod counts that flextopo does not model.
 * PodDisruptionBudgets come from the watch and are counted as kube-scheduler
 * counts them (victims.h), over every victim of the reply; where the
 * scheduler's own victims are passed through, so is its NumPDBViolations.
 * A search that may not have found the cheapest set says why in the
 * decision log and in the metric victim_searches_total.
 *
 * On a DRA node (dra.h) claims hold the GPUs, and kube-scheduler v1.36
 * cannot preempt for DRA devices (KEP-5690): a GPU shortage there is
 * dropped with a reason in the decision log, a Warning Event
 * "DRAPreemptionUnsupported" on the pod and dra_preemption_refused_total;
 * a shortage of CPUs or memory alone is searched for as anywhere.
 */
#include <flextopo/app.h>
#include <flextopo/debug.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/place.h>
#include <flextopo/upkeep.h>
#include <flextopo/victims.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_victim(ft_preempt_choice_t *c, const char *uid,
		       int32_t priority)
{
	unsigned j = c->n;

	if (c->n >= FT_PREEMPT_VICTIMS_MAX)
		return;
	for (; j > 0 && c->victims[j - 1].priority < priority; j--)
		c->victims[j] = c->victims[j - 1];
	c->victims[j].uid = uid;
	c->victims[j].priority = priority;
	c->n++;
}

static int32_t cached_priority(ft_app_t *app, const char *uid)
{
	ft_pod_t pod;
	int32_t priority = 0;

	if (ft_state_find_pod(app->state, uid, &pod) == 0) {
		priority = pod.priority;
		ft_pod_dispose(&pod);
	}
	return priority;
}

/*
 * The holdings `idx` to evict, plus the proposed victims the model does not
 * know at all, by descending priority.
 */
static void merge(ft_preempt_choice_t *out, ft_app_t *app,
		  const ft_node_t *node, const uint16_t *idx, unsigned n_idx,
		  const ft_preempt_node_t *proposed)
{
	out->n = 0;
	for (unsigned i = 0; i < n_idx; i++) {
		const ft_holding_t *h = &node->holdings[idx[i]];
		add_victim(out, h->uid, h->priority);
	}
	for (unsigned i = 0; i < proposed->n_victims; i++) {
		const char *uid = proposed->victim_uids[i];
		if (!ft_node_find_holding(node, uid))
			add_victim(out, uid, cached_priority(app, uid));
	}
}

/* Why a search is not exact, closing the reason's parenthesis. */
static const char *fallback_reason(ft_victim_fallback_t f)
{
	switch (f) {
	case FT_VICTIM_TOO_MANY_PODS:
		return "more candidates than the search holds)";
	case FT_VICTIM_VISIT_LIMIT:
		return "visit limit reached, best set found kept)";
	case FT_VICTIM_PDB_LIMIT:
		return "some PodDisruptionBudgets not counted)";
	default:
		return ")";
	}
}

static int keep_node(ft_preempt_reply_t *r, const ft_preempt_node_t *n,
		     const ft_preempt_choice_t *c)
{
	const char *uids[FT_PREEMPT_VICTIMS_MAX];

	for (unsigned i = 0; i < c->n; i++)
		uids[i] = c->victims[i].uid;
	return ft_codec_preempt_reply_node(r, n->name, uids, c->n,
					   c->pdb_violations);
}

/* The victims on the decision row, named where the node knows them. */
static void note_victims(ft_decision_t *dec, const ft_decision_node_t *row,
			 const ft_node_t *node, const ft_preempt_choice_t *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		const ft_holding_t *h =
		    ft_node_find_holding(node, c->victims[i].uid);
		ft_decision_add_victim(dec, row, h ? h->ns : NULL,
				       h ? h->name : NULL, c->victims[i].uid,
				       c->victims[i].priority);
	}
}

/* Keep the scheduler's own victims, or drop the node when it proposed none. */
static void pass_through(ft_preempt_choice_t *out, const ft_preempt_node_t *n,
			 const char *why, const char *pod, ft_decision_t *dec)
{
	ft_decision_node_t *row;

	out->outcome = FT_PREEMPT_DROPPED;
	if (!n->n_victims) {
		ft_log(FT_LOG_DEBUG, "preempt", pod, n->name, why,
		       "node dropped: no victims proposed");
		ft_decision_add_node(dec, n->name, FT_VERDICT_DROPPED, why);
		return;
	}
	out->outcome = FT_PREEMPT_PASSED;
	ft_log(FT_LOG_DEBUG, "preempt", pod, n->name, why,
	       "scheduler's victims kept");
	row = ft_decision_add_node(dec, n->name, FT_VERDICT_KEPT_PROPOSED, why);
	if (row)
		row->n_victims = n->n_victims;
	for (unsigned i = 0; i < n->n_victims; i++)
		ft_decision_add_victim(dec, row, NULL, NULL, n->victim_uids[i],
				       0);
}

#define DRA_NO_GPU_PREEMPTION                                                  \
	"DRA node: its GPUs are held by ResourceClaims, and kube-scheduler "   \
	"v1.36 cannot preempt for DRA devices (KEP-5690, DRA preemption, is "  \
	"planned for v1.38); no eviction frees a GPU here"

static bool wants_gpus(const ft_demand_t *d)
{
	return d->gpus || d->ranks || d->mig_count;
}

/*
 * On a DRA node a GPU shortage has no victims (claims hold the GPUs; no
 * eviction frees a claim's device in v1.36): true, with the node dropped
 * and the pod told why. A shortage of CPUs or memory alone is searched for
 * as anywhere, with the GPUs left to DRA (*cpu_only).
 */
static bool dra_gpu_shortage(ft_app_t *app, const ft_node_t *node,
			     const ft_pod_t *pod, ft_demand_t *cpu_only,
			     ft_decision_t *dec)
{
	ft_demand_t gpus_only = pod->demand;
	ft_verdict_t v;
	ft_kube_event_t e = {.ns = pod->ns,
			     .name = pod->name,
			     .uid = pod->uid,
			     .type = "Warning",
			     .reason = "DRAPreemptionUnsupported",
			     .message = DRA_NO_GPU_PREEMPTION};

	gpus_only.cpu_millis = gpus_only.exclusive_cpus = 0;
	gpus_only.memory_mib = gpus_only.key = 0;
	ft_place_filter(&v, node, &gpus_only);
	if (v.fit == FT_FIT) {
		*cpu_only = pod->demand;
		cpu_only->gpus = cpu_only->ranks = cpu_only->mig_count = 0;
		cpu_only->key = 0;
		cpu_only->mig_profile[0] = '\0';
		return false;
	}
	ft_log(FT_LOG_DEBUG, "preempt", pod->name, node->name,
	       DRA_NO_GPU_PREEMPTION, "node dropped");
	ft_decision_add_node(dec, node->name, FT_VERDICT_DROPPED,
			     DRA_NO_GPU_PREEMPTION);
	ft_metrics_dra_preemption_refused(app->metrics);
	ft_upkeep_event(app->upkeep, &e);
	return true;
}

/* The search's set on a node where it found one, with its decision row. */
static void choose(ft_preempt_choice_t *out, ft_app_t *app,
		   const ft_node_t *node, const ft_pod_t *pod,
		   const ft_preempt_node_t *n, const ft_victim_set_t *set,
		   const ft_pdb_view_t *pdb, ft_decision_t *dec)
{
	ft_victim_cost_t cost;
	ft_decision_node_t *row;
	uint16_t idx[FT_PREEMPT_VICTIMS_MAX];
	unsigned n_idx;
	char reason[160];

	n_idx = ft_victims_with_proposed(idx, FT_PREEMPT_VICTIMS_MAX, node, set,
					 n->victim_uids, n->n_victims);
	merge(out, app, node, idx, n_idx, n);
	if (!out->n) {
		pass_through(out, n, "fits without eviction", pod->name, dec);
		return;
	}
	/* Budgets are counted over every victim of the reply. */
	ft_victims_cost(&cost, node, idx, n_idx, pdb);
	out->outcome = FT_PREEMPT_VICTIMS;
	out->pdb_violations = cost.pdb_violations;
	snprintf(reason, sizeof(reason), "level %s%s%s",
		 ft_level_name(set->level), set->exact ? "" : " (not exact: ",
		 set->exact ? "" : fallback_reason(set->fallback));
	ft_log(FT_LOG_DEBUG, "preempt", pod->name, n->name, reason,
	       "%u victims chosen (scheduler proposed %u)", out->n,
	       n->n_victims);
	if ((row =
		 ft_decision_add_node(dec, n->name, FT_VERDICT_KEPT, reason))) {
		row->level = (uint8_t)set->level;
		row->exact = set->exact;
		row->n_victims = out->n;
	}
	note_victims(dec, row, node, out);
}

void ft_app_preempt_decide(ft_preempt_choice_t *out, ft_app_t *app,
			   const ft_snapshot_t *snap, const ft_pod_t *pod,
			   const ft_preempt_node_t *n, ft_decision_t *dec)
{
	const ft_node_t *node = ft_snapshot_find(snap, n->name);
	ft_demand_t demand = pod->demand;
	ft_pdb_view_t pdb;
	ft_victim_set_t set;
	char reason[160];

	out->outcome = FT_PREEMPT_DROPPED;
	out->n = out->pdb_violations = 0;
	if (!node || !node->topology) {
		pass_through(out, n, "no topology for this node", pod->name,
			     dec);
		return;
	}
	if (!ft_demand_wants_devices(&pod->demand)) {
		pass_through(out, n, "pod asks for no devices", pod->name, dec);
		return;
	}
	if (node->dra && wants_gpus(&demand) &&
	    dra_gpu_shortage(app, node, pod, &demand, dec))
		return;
	ft_state_pdb_view(app->state, node, &pdb);
	ft_victims_search(&set, node, &demand, pod->priority, &pdb);
	ft_metrics_victim_search(app->metrics, set.fallback);
	if (set.found) {
		choose(out, app, node, pod, n, &set, &pdb, dec);
		return;
	}
	snprintf(reason, sizeof(reason),
		 "no set of lower-priority pods frees a %s placement",
		 ft_level_name(ft_place_effective_level(&demand)));
	ft_log(FT_LOG_DEBUG, "preempt", pod->name, n->name, reason,
	       "node dropped");
	ft_decision_add_node(dec, n->name, FT_VERDICT_DROPPED, reason);
}

/* One node of the reply: the victims decided, the scheduler's, or none. */
static int decide(ft_preempt_reply_t *r, ft_app_t *app,
		  const ft_snapshot_t *snap, const ft_pod_t *pod,
		  const ft_preempt_node_t *n, ft_decision_t *dec)
{
	ft_preempt_choice_t c;

	ft_app_preempt_decide(&c, app, snap, pod, n, dec);
	if (c.outcome == FT_PREEMPT_VICTIMS)
		return keep_node(r, n, &c);
	if (c.outcome == FT_PREEMPT_PASSED)
		return ft_codec_preempt_reply_node(r, n->name, n->victim_uids,
						   n->n_victims,
						   n->pdb_violations);
	return 0;
}

void ft_app_preempt(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload)
{
	ft_app_t *app = payload;
	ft_preempt_reply_t *r = NULL;
	ft_snapshot_t *snap = NULL;
	ft_preempt_args_t args;
	ft_decision_t dec;
	ft_pod_t pod;
	char *body = NULL;
	int rc = 0;

	if (ft_app_refuse_unsynced(out, app))
		return;
	memset(&pod, 0, sizeof(pod));
	if (ft_codec_preempt_args_decode(&args, req->body, req->body_len) < 0) {
		ft_http_reply_error(out, 400, "bad_json", "%s",
				    ft_error_last());
		return;
	}
	if (ft_codec_pod_decode(&pod, args.pod, &app->opts) < 0) {
		ft_http_reply_error(out, 400, "bad_json", "Pod: %s",
				    ft_error_last());
		goto cleanup;
	}
	ft_state_settle_demand(app->state, &pod);
	snap = ft_state_snapshot(app->state);
	if ((rc = ft_codec_preempt_reply_new(&r)) < 0)
		goto failed;
	ft_decision_init(&dec, FT_VERB_PREEMPT, pod.ns, pod.name, pod.uid,
			 pod.priority);
	for (unsigned i = 0; rc == 0 && i < args.n_nodes; i++)
		rc = decide(r, app, snap, &pod, &args.nodes[i], &dec);
	ft_app_record_preempt(app, &dec, pod.demand.mode);
	if (rc < 0)
		goto failed;
	rc = ft_codec_preempt_reply_finish(&body, r);
	r = NULL;
	if (rc < 0)
		goto failed;
	out->status = 200;
	out->content_type = "application/json";
	out->body = body;
	out->body_len = strlen(body);
	goto cleanup;
failed:
	ft_http_reply_error(out, 500, "internal", "%s", ft_error_last());
cleanup:
	ft_codec_preempt_reply_free(r);
	ft_snapshot_unref(snap);
	ft_pod_dispose(&pod);
	ft_codec_preempt_args_dispose(&args);
}
