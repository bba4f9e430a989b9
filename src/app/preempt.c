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
 * Gangs (gang.h) are costed whole: a set that breaks one disrupts every
 * running member, on any node, and names its members on the node as
 * victims too. kube-scheduler picks one node among those answered by its
 * own ranking of their victims, which cannot see gangs; so where a kept
 * node's set breaks a gang, only the nodes of the least gang-aware cost
 * are answered (ties kept), and kube-scheduler's pick is one of them. The
 * preemptor gets a Normal Event "PreemptionBreaksGangs" naming them.
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
	case FT_VICTIM_GANG_LIMIT:
		return "some gang members elsewhere not counted)";
	case FT_VICTIM_NO_MEMORY:
		return "out of memory, best set found kept)";
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

/* A holding of gang `g` (0-based) of view `gv`, or NULL. */
static const ft_holding_t *gang_member(const ft_node_t *node,
				       const ft_gang_view_t *gv, unsigned g)
{
	for (unsigned i = 0; i < node->n_holdings && i < FT_VICTIM_MAX; i++)
		if (gv->of[i] == g + 1)
			return &node->holdings[i];
	return NULL;
}

/*
 * The gangs `broken` (n of them, of view `gv`) by name into out->gangs,
 * and the pods they run into out->gang_pods.
 */
static void name_gangs(ft_preempt_choice_t *out, ft_app_t *app,
		       const ft_node_t *node, const ft_gang_view_t *gv,
		       const uint16_t *broken, unsigned n)
{
	ft_gang_describe_t g;
	size_t used = 0;

	out->gangs[0] = '\0';
	out->n_broken = n;
	out->gang_pods = 0;
	for (unsigned k = 0; k < n; k++) {
		const ft_holding_t *h = gang_member(node, gv, broken[k]);
		if (!h || !ft_state_describe_gang(app->state, h->uid, &g))
			continue;
		out->gang_pods += g.running;
		if (used < sizeof(out->gangs))
			used += (size_t)snprintf(
			    out->gangs + used, sizeof(out->gangs) - used,
			    "%s%s (%s)", used ? ", " : "", g.name,
			    ft_gang_source_name(g.source));
	}
}

/* The search's set on a node where it found one, with its decision row. */
static void choose(ft_preempt_choice_t *out, ft_app_t *app,
		   const ft_node_t *node, const ft_pod_t *pod,
		   const ft_preempt_node_t *n, const ft_victim_set_t *set,
		   const ft_pdb_view_t *pdb, const ft_gang_view_t *gv,
		   ft_decision_t *dec)
{
	ft_decision_node_t *row;
	uint16_t idx[FT_PREEMPT_VICTIMS_MAX], broken[FT_GANG_MAX];
	unsigned n_idx, n_broken = 0;
	char reason[160];

	n_idx = ft_victims_with_proposed(idx, FT_PREEMPT_VICTIMS_MAX, node, set,
					 n->victim_uids, n->n_victims);
	merge(out, app, node, idx, n_idx, n);
	if (!out->n) {
		pass_through(out, n, "fits without eviction", pod->name, dec);
		return;
	}
	/*
	 * Budgets and gangs are counted over every victim of the reply: a
	 * proposed victim the model does not track may be a gang's too.
	 */
	(void)ft_victims_cost_gangs(&out->cost, broken, &n_broken, node, idx,
				    n_idx, pdb, gv, INT32_MAX);
	name_gangs(out, app, node, gv, broken, n_broken);
	out->outcome = FT_PREEMPT_VICTIMS;
	out->pdb_violations = out->cost.pdb_violations;
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
		row->n_disrupted = out->cost.count;
	}
	if (out->n_broken)
		ft_decision_add_gangs(dec, n->name, out->gangs);
	note_victims(dec, row, node, out);
}

void ft_app_preempt_decide(ft_preempt_choice_t *out, ft_app_t *app,
			   const ft_snapshot_t *snap, const ft_pod_t *pod,
			   const ft_preempt_node_t *n, ft_decision_t *dec)
{
	const ft_node_t *node = ft_snapshot_find(snap, n->name);
	ft_demand_t demand = pod->demand;
	ft_gang_view_t *gangs = NULL;
	ft_pdb_view_t pdb;
	ft_victim_set_t set;
	char reason[160];

	out->outcome = FT_PREEMPT_DROPPED;
	out->n = out->pdb_violations = out->n_broken = out->gang_pods = 0;
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
	/* Out of memory leaves the gangs out: the search says so. */
	if ((gangs = malloc(sizeof(*gangs))))
		ft_state_victim_views(app->state, node, &pdb, gangs);
	else
		ft_state_pdb_view(app->state, node, &pdb);
	ft_victims_search_gangs(&set, node, &demand, pod->priority, &pdb,
				gangs);
	if (!gangs) {
		set.exact = false;
		set.fallback = FT_VICTIM_NO_MEMORY;
	}
	ft_metrics_victim_search(app->metrics, set.fallback);
	if (set.found) {
		choose(out, app, node, pod, n, &set, &pdb, gangs, dec);
		free(gangs);
		return;
	}
	free(gangs);
	snprintf(reason, sizeof(reason),
		 "no set of lower-priority pods frees a %s placement",
		 ft_level_name(ft_place_effective_level(&demand)));
	ft_log(FT_LOG_DEBUG, "preempt", pod->name, n->name, reason,
	       "node dropped");
	ft_decision_add_node(dec, n->name, FT_VERDICT_DROPPED, reason);
}

/* A node answered with victims flextopo chose, and what they cost. */
typedef struct {
	bool chosen;
	ft_victim_cost_t cost;
	unsigned gang_pods; /* running members of the gangs they break */
	char *gangs;	    /* their names (heap), NULL when none */
} answered_t;

/* One node of the reply: the victims decided, the scheduler's, or none. */
static int decide(ft_preempt_reply_t *r, answered_t *a, ft_app_t *app,
		  const ft_snapshot_t *snap, const ft_pod_t *pod,
		  const ft_preempt_node_t *n, ft_decision_t *dec)
{
	ft_preempt_choice_t choice, *c = &choice;
	int rc = 0;

	ft_app_preempt_decide(c, app, snap, pod, n, dec);
	if (c->outcome == FT_PREEMPT_VICTIMS) {
		a->chosen = true;
		a->cost = c->cost;
		a->gang_pods = c->gang_pods;
		if (c->n_broken && !(a->gangs = strdup(c->gangs)))
			rc = ft_error_set(FT_ENOMEM, "out of memory");
		if (rc == 0)
			rc = keep_node(r, n, c);
	} else if (c->outcome == FT_PREEMPT_PASSED) {
		rc = ft_codec_preempt_reply_node(r, n->name, n->victim_uids,
						 n->n_victims,
						 n->pdb_violations);
	}
	return rc;
}

/* The decision row of node `name`, or NULL when the rows ran out. */
static ft_decision_node_t *row_of(ft_decision_t *dec, const char *name)
{
	for (unsigned i = 0; i < dec->n_nodes; i++)
		if (!strcmp(dec->nodes[i].name, name))
			return &dec->nodes[i];
	return NULL;
}

#define CHEAPER_NODE                                                           \
	"another node's victims disrupt less (gangs counted whole): kube-scheduler, which cannot see gangs, must not pick this one"

/*
 * Where a chosen set breaks a gang, answer only the nodes whose victims
 * cost least, gangs counted whole (ties kept): kube-scheduler ranks the
 * answered nodes by their victims alone, as if no gang were broken.
 * Without a broken gang both rankings agree and every node stays.
 */
static void keep_cheapest(ft_preempt_reply_t *r, answered_t *a,
			  const ft_preempt_args_t *args, ft_decision_t *dec)
{
	const ft_victim_cost_t *least = NULL;
	bool breaks = false;

	for (unsigned i = 0; i < args->n_nodes; i++) {
		if (!a[i].chosen)
			continue;
		breaks |= a[i].gangs != NULL;
		if (!least || ft_victims_compare(&a[i].cost, least) < 0)
			least = &a[i].cost;
	}
	for (unsigned i = 0; breaks && i < args->n_nodes; i++) {
		ft_decision_node_t *row;
		if (!a[i].chosen || ft_victims_compare(&a[i].cost, least) == 0)
			continue;
		a[i].chosen = false;
		ft_codec_preempt_reply_drop(r, args->nodes[i].name);
		dec->counts[FT_VERDICT_KEPT]--;
		dec->counts[FT_VERDICT_DROPPED]++;
		if ((row = row_of(dec, args->nodes[i].name))) {
			row->verdict = FT_VERDICT_DROPPED;
			snprintf(row->reason, sizeof(row->reason), "%s",
				 CHEAPER_NODE);
		}
	}
}

/*
 * Tell the preemptor which gangs the answered victims break (a Normal
 * Event), and count their pods.
 */
static void tell_gangs(ft_app_t *app, const ft_pod_t *pod, const answered_t *a,
		       const ft_preempt_args_t *args)
{
	char message[1024];
	size_t used = 0;
	ft_kube_event_t e = {.ns = pod->ns,
			     .name = pod->name,
			     .uid = pod->uid,
			     .type = "Normal",
			     .reason = "PreemptionBreaksGangs",
			     .message = message};

	for (unsigned i = 0; i < args->n_nodes; i++) {
		if (!a[i].chosen || !a[i].gangs)
			continue;
		ft_metrics_gang_pods_disrupted(app->metrics, a[i].gang_pods);
		if (used < sizeof(message))
			used += (size_t)snprintf(
			    message + used, sizeof(message) - used,
			    "%son node %s the victims break %s",
			    used ? "; " : "", args->nodes[i].name, a[i].gangs);
	}
	if (used)
		ft_upkeep_event(app->upkeep, &e);
}

static void answered_free(answered_t *a, unsigned n)
{
	for (unsigned i = 0; a && i < n; i++)
		free(a[i].gangs);
	free(a);
}

void ft_app_preempt(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload)
{
	ft_app_t *app = payload;
	ft_preempt_reply_t *r = NULL;
	ft_snapshot_t *snap = NULL;
	answered_t *answered = NULL;
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
	if (!(answered = calloc(args.n_nodes + 1, sizeof(*answered)))) {
		rc = ft_error_set(FT_ENOMEM, "out of memory");
		goto failed;
	}
	ft_decision_init(&dec, FT_VERB_PREEMPT, pod.ns, pod.name, pod.uid,
			 pod.priority);
	for (unsigned i = 0; rc == 0 && i < args.n_nodes; i++)
		rc = decide(r, &answered[i], app, snap, &pod, &args.nodes[i],
			    &dec);
	if (rc == 0) {
		keep_cheapest(r, answered, &args, &dec);
		tell_gangs(app, &pod, answered, &args);
	}
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
	answered_free(answered, args.n_nodes);
	ft_codec_preempt_reply_free(r);
	ft_snapshot_unref(snap);
	ft_pod_dispose(&pod);
	ft_codec_preempt_args_dispose(&args);
}
