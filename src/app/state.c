/*
 * The cluster state: decoded Nodes and Pods, assumed allocations, and the
 * published snapshot.
 *
 * Only pods that hold something the model tracks (GPUs, MIG instances,
 * pinned CPUs, an allocation annotation, or an observed one for their node)
 * are linked to their node; a change to any other pod does not rebuild
 * anything. A change marks its node dirty; publishing rebuilds the dirty
 * nodes and swaps in a snapshot that shares every other node with the
 * previous one.
 *
 * The watch logs a pod's drift (its observed units differ from its
 * allocation) and a malformed observed annotation when they first appear
 * or change, comparing the pod with the version it replaces, so that the
 * periodic rewrites of flextopo-node and relists do not repeat the line.
 *
 * An assumption lives from bind until the watch shows the pod bound; one
 * whose Binding's answer never came stays until the watch or a read of the
 * pod settles it (ft_state_bind_settle). A rebuilt node's allocation
 * conflicts are reported once per pair of pods while both stay: logged,
 * counted, and queued for the upkeep thread's Events.
 */
#include <flextopo/clock.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>
#include <flextopo/log.h>
#include <flextopo/place.h>
#include <flextopo/state.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>
#include <utlist.h>

#include "state_priv.h"

#define FT_STATE_OBSERVED_MAX 65536

static void publish(ft_state_t *state);

int ft_state_new(ft_state_t **out, const ft_codec_options_t *opts)
{
	ft_state_t *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	s->opts = opts;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->snap_mu, NULL);
	atomic_init(&s->published_ns, ft_clock_ns());
	ft_mix_init(&s->mix, 0);
	if ((rc = ft_demand_keys_new(&s->demand_keys)) < 0 ||
	    (rc = ft_snapshot_new(&s->snapshot, NULL, 0, 0)) < 0) {
		ft_state_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void pod_rec_free(pod_rec_t *r)
{
	ft_pod_dispose(&r->pod);
	ft_allocation_dispose(&r->assumed_allocation);
	free(r->assumed_node);
	free(r->linked_node);
	free(r->uid);
	free(r);
}

static void node_rec_free(node_rec_t *r)
{
	free(r->view);
	ft_node_source_dispose(&r->src);
	ft_node_unref(r->built);
	free(r->name);
	free(r);
}

static void pdb_rec_free(pdb_rec_t *r)
{
	ft_pdb_dispose(&r->pdb);
	free(r->key);
	free(r);
}

static void conflict_rec_free(conflict_rec_t *c)
{
	free(c->key);
	free(c->uids[0]);
	free(c->uids[1]);
	free(c);
}

/* Forget the pairs reported of pod `uid` (NULL: all), so that a pod with
 * the same pair again later is reported again. */
static void forget_conflicts(ft_state_t *state, const char *uid)
{
	conflict_rec_t *c, *tmp;

	HASH_ITER (hh, state->conflicts, c, tmp) {
		if (uid && strcmp(c->uids[0], uid) != 0 &&
		    strcmp(c->uids[1], uid) != 0)
			continue;
		HASH_DEL(state->conflicts, c);
		conflict_rec_free(c);
	}
}

void ft_state_free(ft_state_t *state)
{
	pod_rec_t *p, *ptmp;
	node_rec_t *n, *ntmp;
	pdb_rec_t *b, *btmp;

	if (!state)
		return;
	ft_state_dra_free(state);
	ft_state_gang_free(state);
	HASH_ITER (hh, state->pdbs, b, btmp) {
		HASH_DEL(state->pdbs, b);
		pdb_rec_free(b);
	}
	HASH_ITER (hh, state->pods, p, ptmp) {
		HASH_DEL(state->pods, p);
		pod_rec_free(p);
	}
	HASH_ITER (hh, state->nodes, n, ntmp) {
		HASH_DEL(state->nodes, n);
		node_rec_free(n);
	}
	forget_conflicts(state, NULL);
	ft_conflict_notes_free(state->notes, state->n_notes);
	ft_snapshot_unref(state->snapshot);
	ft_demand_keys_free(state->demand_keys);
	pthread_mutex_destroy(&state->mu);
	pthread_mutex_destroy(&state->snap_mu);
	free(state);
}

void ft_state_settle_demand(ft_state_t *state, ft_pod_t *pod)
{
	pod->demand.gpus += ft_state_claim_gpus(state, pod);
	ft_demand_key(state->demand_keys, &pod->demand);
}

node_rec_t *ft_state_node_rec(ft_state_t *state, const char *name, bool create)
{
	node_rec_t *r = NULL;

	HASH_FIND_STR(state->nodes, name, r);
	if (r || !create)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->name = strdup(name))) {
		free(r);
		return NULL;
	}
	HASH_ADD_KEYPTR(hh, state->nodes, r->name, strlen(r->name), r);
	return r;
}

void ft_state_mark_dirty(ft_state_t *state, node_rec_t *n)
{
	if (!n->dirty) {
		DL_APPEND2(state->dirty_nodes, n, dirty_prev, dirty_next);
		state->n_dirty++;
	}
	n->dirty = true;
	state->dirty = true;
}

void ft_state_clear_dirty(ft_state_t *state, node_rec_t *n)
{
	if (n->dirty) {
		DL_DELETE2(state->dirty_nodes, n, dirty_prev, dirty_next);
		state->n_dirty--;
	}
	n->dirty = false;
}

/* Drop a node record nothing refers to any more. */
void ft_state_node_rec_gc(ft_state_t *state, node_rec_t *r)
{
	if (r->present || r->pods || r->claims || r->slices)
		return;
	ft_state_clear_dirty(state, r);
	HASH_DEL(state->nodes, r);
	node_rec_free(r);
}

/* Where a pod's holding lives: its bound node, else its assumed node. */
static const char *effective_node(const pod_rec_t *r)
{
	if (r->pod.terminal)
		return NULL;
	if (r->pod.node)
		return r->pod.node;
	return r->assumed ? r->assumed_node : NULL;
}

/* Pods that request only CPU or memory count too: scoring weighs what
 * they leave of the node (ft_node_free_cpu_millis). */
static bool holds_something(const pod_rec_t *r)
{
	return r->assumed || r->pod.has_allocation ||
	       ft_pod_holds_observed(&r->pod) ||
	       ft_demand_wants_devices(&r->pod.demand) ||
	       r->pod.demand.cpu_millis || r->pod.demand.memory_mib;
}

node_rec_t *ft_state_unlink(ft_state_t *state, char **linked)
{
	node_rec_t *n;

	if (!*linked)
		return NULL;
	n = ft_state_node_rec(state, *linked, false);
	free(*linked);
	*linked = NULL;
	return n;
}

node_rec_t *ft_state_link(ft_state_t *state, const char *name, char **linked)
{
	node_rec_t *n = ft_state_node_rec(state, name, true);

	if (n && !(*linked = strdup(name)))
		n = NULL;
	return n;
}

void ft_state_node_changed(ft_state_t *state, node_rec_t *n)
{
	ft_state_mark_dirty(state, n);
	ft_state_node_rec_gc(state, n);
}

static void unlink_pod(ft_state_t *state, pod_rec_t *r)
{
	node_rec_t *n = ft_state_unlink(state, &r->linked_node);

	if (!n)
		return;
	DL_DELETE(n->pods, r);
	ft_state_node_changed(state, n);
}

static void link_pod(ft_state_t *state, pod_rec_t *r)
{
	const char *name = effective_node(r);
	node_rec_t *n;

	if (!name || !holds_something(r))
		return;
	if (!(n = ft_state_link(state, name, &r->linked_node))) {
		FT_LOG_ERROR_MSG("state: out of memory linking pod %s/%s",
				 r->pod.ns, r->pod.name);
		return;
	}
	DL_APPEND(n->pods, r);
	ft_state_node_changed(state, n);
	if (!r->in_mix) {
		ft_mix_add(&state->mix, &r->pod.demand, &r->pod.rules);
		r->in_mix = true;
	}
}

static void drop_assumed(pod_rec_t *r)
{
	r->assumed = false;
	r->assumed_units = false;
	r->bind_in_flight = false;
	r->bind_unknown = false;
	free(r->assumed_node);
	r->assumed_node = NULL;
	ft_allocation_dispose(&r->assumed_allocation);
}

/* Say once, as it comes, why a pod's gang reference is ignored. */
static void warn_gang(const ft_pod_t *before, const ft_pod_t *now)
{
	if (!now->gang_error || (before->gang_error &&
				 !strcmp(before->gang_error, now->gang_error)))
		return;
	ft_log(FT_LOG_WARN, "watch", now->name, now->node, now->gang_error,
	       "pod %s/%s: gang reference ignored", now->ns, now->name);
}

/* Replace a record's pod by a newly decoded one (ownership moves). */
static void update_pod(ft_state_t *state, pod_rec_t *r, ft_pod_t *pod)
{
	warn_gang(&r->pod, pod);
	unlink_pod(state, r);
	ft_pod_dispose(&r->pod);
	r->pod = *pod;
	memset(pod, 0, sizeof(*pod));
	if (r->assumed && r->pod.node &&
	    (r->pod.has_allocation || !r->assumed_units ||
	     strcmp(r->pod.node, r->assumed_node) != 0))
		drop_assumed(r);
	if (r->assumed && r->pod.terminal)
		drop_assumed(r);
	link_pod(state, r);
	ft_state_gang_link(state, r);
}

static pod_rec_t *pod_rec_new(ft_state_t *state, ft_pod_t *pod)
{
	pod_rec_t *r = calloc(1, sizeof(*r));

	if (!r || !(r->uid = strdup(pod->uid))) {
		free(r);
		return NULL;
	}
	HASH_ADD_KEYPTR(hh, state->pods, r->uid, strlen(r->uid), r);
	update_pod(state, r, pod);
	return r;
}

static void upsert_pod(ft_state_t *state, ft_pod_t *pod)
{
	pod_rec_t *r = NULL;

	HASH_FIND_STR(state->pods, pod->uid, r);
	if (r && r->observed_only) {
		r->observed_only = false;
		state->observed--;
	}
	if (r)
		update_pod(state, r, pod);
	else
		r = pod_rec_new(state, pod);
	if (r)
		r->mark = state->replace_mark[FT_KIND_POD];
}

static void remove_pod(ft_state_t *state, pod_rec_t *r)
{
	if (r->observed_only)
		state->observed--;
	if (state->conflicts)
		forget_conflicts(state, r->uid);
	unlink_pod(state, r);
	ft_state_gang_unlink(state, r);
	HASH_DEL(state->pods, r);
	pod_rec_free(r);
}

void ft_state_maybe_publish(ft_state_t *state)
{
	if (!state->in_replace[FT_KIND_NODE] && !state->in_replace[FT_KIND_POD])
		publish(state);
}

/* Budgets change no node model: preempt reads them under the lock. */
void ft_state_apply_pdb(ft_state_t *state, const cJSON *obj)
{
	pdb_rec_t *r = NULL;
	ft_pdb_t pdb;
	char *key = NULL;

	if (ft_codec_pdb_decode(&pdb, obj) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
		       "poddisruptionbudget skipped");
		return;
	}
	if (asprintf(&key, "%s/%s", pdb.ns, pdb.name) < 0) {
		ft_pdb_dispose(&pdb);
		return;
	}
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pdbs, key, r);
	if (!r && (r = calloc(1, sizeof(*r)))) {
		r->key = key;
		key = NULL;
		HASH_ADD_KEYPTR(hh, state->pdbs, r->key, strlen(r->key), r);
	}
	if (r) {
		ft_pdb_dispose(&r->pdb);
		r->pdb = pdb;
		memset(&pdb, 0, sizeof(pdb));
		r->mark = state->replace_mark[FT_KIND_PDB];
	}
	pthread_mutex_unlock(&state->mu);
	ft_pdb_dispose(&pdb);
	free(key);
}

void ft_state_delete_pdb(ft_state_t *state, const cJSON *obj)
{
	pdb_rec_t *r = NULL;
	ft_pdb_t pdb;
	char *key = NULL;

	if (ft_codec_pdb_decode(&pdb, obj) < 0)
		return;
	if (asprintf(&key, "%s/%s", pdb.ns, pdb.name) >= 0) {
		pthread_mutex_lock(&state->mu);
		HASH_FIND_STR(state->pdbs, key, r);
		if (r) {
			HASH_DEL(state->pdbs, r);
			pdb_rec_free(r);
		}
		pthread_mutex_unlock(&state->mu);
	}
	free(key);
	ft_pdb_dispose(&pdb);
}

void ft_state_pdb_view(ft_state_t *state, const ft_node_t *node,
		       ft_pdb_view_t *out)
{
	ft_state_victim_views(state, node, out, NULL);
}

/*
 * The gangs of the holdings `recs` (records of `node`'s holdings, NULL
 * where unknown) into `gv`, each gang once.
 */
static void gang_view(ft_gang_view_t *gv, ft_pdb_view_t *pdb,
		      const ft_pdb_t *const *budgets, unsigned n_budgets,
		      pod_rec_t *const *recs, const ft_node_t *node)
{
	unsigned n =
	    node->n_holdings < FT_VICTIM_MAX ? node->n_holdings : FT_VICTIM_MAX;

	for (unsigned i = 0; i < n; i++) {
		unsigned k = 0;
		if (!recs[i] || !recs[i]->gang)
			continue;
		while (k < i && (!recs[k] || recs[k]->gang != recs[i]->gang))
			k++;
		gv->of[i] =
		    k < i ? gv->of[k]
			  : ft_state_gang_view_add(gv, pdb, budgets, n_budgets,
						   recs[i]->gang, node);
	}
}

void ft_state_victim_views(ft_state_t *state, const ft_node_t *node,
			   ft_pdb_view_t *pdb, ft_gang_view_t *gangs)
{
	pod_rec_t **recs = NULL;
	const ft_pod_t **pods = NULL;
	const ft_pdb_t **budgets = NULL;
	pdb_rec_t *b, *tmp;
	unsigned n = 0;

	memset(pdb, 0, sizeof(*pdb));
	if (gangs)
		memset(gangs, 0, offsetof(ft_gang_view_t, remote));
	pthread_mutex_lock(&state->mu);
	if (!node->n_holdings || (!state->pdbs && (!gangs || !state->gangs)))
		goto cleanup;
	recs = calloc(node->n_holdings, sizeof(*recs));
	pods = calloc(node->n_holdings, sizeof(*pods));
	budgets = calloc(HASH_COUNT(state->pdbs) + 1, sizeof(*budgets));
	if (!recs || !pods || !budgets) {
		/* Out of memory: say that budgets and gangs went uncounted. */
		pdb->truncated = true;
		if (gangs)
			gangs->truncated = true;
		goto cleanup;
	}
	for (unsigned i = 0; i < node->n_holdings; i++) {
		HASH_FIND_STR(state->pods, node->holdings[i].uid, recs[i]);
		pods[i] = recs[i] ? &recs[i]->pod : NULL;
	}
	HASH_ITER (hh, state->pdbs, b, tmp) {
		budgets[n++] = &b->pdb;
	}
	ft_victims_pdb_view(pdb, node, pods, budgets, n);
	if (gangs)
		gang_view(gangs, pdb, budgets, n, recs, node);
cleanup:
	pthread_mutex_unlock(&state->mu);
	free(recs);
	free(pods);
	free(budgets);
}

static bool same_text(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Did the drift of a pod (drifted in `now`) change since `before`? */
static bool drift_changed(const ft_pod_t *before, const ft_pod_t *now)
{
	return !before || !ft_pod_drifted(before) ||
	       !same_text(before->node, now->node) ||
	       !ft_allocation_same_units(&before->allocation,
					 &now->allocation) ||
	       !ft_allocation_same_units(&before->observed->units,
					 &now->observed->units);
}

static void log_drift(const ft_pod_t *pod)
{
	char expected[512], actual[512];

	if (!pod->has_allocation) {
		ft_log(
		    FT_LOG_WARN, "watch", pod->name, pod->node, NULL,
		    "pod %s/%s on node %s: placed without a flextopo allocation, holds %s; holding them (source %s)",
		    pod->ns, pod->name, pod->node,
		    ft_allocation_units_text(actual, sizeof(actual),
					     &pod->observed->units),
		    ft_observed_source_name(pod->observed->source));
		return;
	}
	ft_log(
	    FT_LOG_WARN, "watch", pod->name, pod->node, NULL,
	    "pod %s/%s on node %s: observed %s differ from allocation %s; holding the observed units (source %s)",
	    pod->ns, pod->name, pod->node,
	    ft_allocation_units_text(actual, sizeof(actual),
				     &pod->observed->units),
	    ft_allocation_units_text(expected, sizeof(expected),
				     &pod->allocation),
	    ft_observed_source_name(pod->observed->source));
}

/*
 * Log what flextopo-node reports about `now` when it changed since
 * `before` (the pod's previous version, or NULL): a malformed observed
 * annotation, a drift that appeared or changed, a drift that ended.
 */
static void note_observed(const ft_pod_t *before, const ft_pod_t *now)
{
	if (now->observed_error &&
	    !same_text(now->observed_error,
		       before ? before->observed_error : NULL))
		ft_log(FT_LOG_WARN, "watch", now->name, now->node,
		       now->observed_error,
		       "pod %s/%s: observed annotation ignored", now->ns,
		       now->name);
	if (ft_pod_drifted(now) && drift_changed(before, now))
		log_drift(now);
	else if (!ft_pod_drifted(now) && before && ft_pod_drifted(before) &&
		 !now->terminal)
		ft_log(FT_LOG_INFO, "watch", now->name, now->node, NULL,
		       "pod %s/%s: no drift any more", now->ns, now->name);
}

void ft_state_apply_pod(ft_state_t *state, const cJSON *obj)
{
	pod_rec_t *r = NULL;
	ft_pod_t pod;

	if (ft_codec_pod_decode(&pod, obj, state->opts) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
		       "pod skipped");
		return;
	}
	if (pod.allocation_error || pod.demand_error)
		ft_log(FT_LOG_WARN, "watch", pod.name, pod.node,
		       pod.allocation_error ? pod.allocation_error
					    : pod.demand_error,
		       "pod annotation ignored");
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, pod.uid, r);
	note_observed(r ? &r->pod : NULL, &pod);
	upsert_pod(state, &pod);
	ft_state_maybe_publish(state);
	pthread_mutex_unlock(&state->mu);
	ft_pod_dispose(&pod);
}

static const char *object_uid(const cJSON *obj)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");

	return cJSON_IsString(uid) ? uid->valuestring : NULL;
}

static const char *object_name(const cJSON *obj)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");

	return cJSON_IsString(name) ? name->valuestring : NULL;
}

void ft_state_delete_pod(ft_state_t *state, const cJSON *obj)
{
	const char *uid = object_uid(obj);
	pod_rec_t *r = NULL;

	if (!uid)
		return;
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r) {
		remove_pod(state, r);
		ft_state_maybe_publish(state);
	}
	pthread_mutex_unlock(&state->mu);
}

void ft_state_apply_node(ft_state_t *state, const cJSON *obj)
{
	const char *name = object_name(obj);
	ft_node_source_t src;
	node_rec_t *r;

	if (!name) {
		FT_LOG_WARN_MSG("watch: node without metadata.name skipped");
		return;
	}
	pthread_mutex_lock(&state->mu);
	r = ft_state_node_rec(state, name, true);
	if (!r || ft_codec_node_decode(&src, obj, state->opts, &r->src) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, name, ft_error_last(),
		       "node skipped");
		goto cleanup;
	}
	if (src.topology_error &&
	    (!r->src.topology_error ||
	     strcmp(src.topology_error, r->src.topology_error) != 0))
		ft_log(FT_LOG_WARN, "watch", NULL, name, src.topology_error,
		       "node topology unusable");
	ft_node_source_dispose(&r->src);
	r->src = src;
	state->membership_changed |= !r->present;
	r->present = true;
	ft_state_mark_dirty(state, r);
	ft_state_dra_stale(r);
	r->mark = state->replace_mark[FT_KIND_NODE];
	ft_state_maybe_publish(state);
cleanup:
	pthread_mutex_unlock(&state->mu);
}

static void remove_node(ft_state_t *state, node_rec_t *r)
{
	r->present = false;
	ft_state_clear_dirty(state, r);
	state->membership_changed = true;
	ft_node_source_dispose(&r->src);
	ft_node_unref(r->built);
	r->built = NULL;
	ft_state_node_rec_gc(state, r);
}

void ft_state_delete_node(ft_state_t *state, const cJSON *obj)
{
	const char *name = object_name(obj);
	node_rec_t *r;

	if (!name)
		return;
	pthread_mutex_lock(&state->mu);
	r = ft_state_node_rec(state, name, false);
	if (r && r->present) {
		remove_node(state, r);
		ft_state_maybe_publish(state);
	}
	pthread_mutex_unlock(&state->mu);
}

void ft_state_replace_begin(ft_state_t *state, ft_kind_t kind)
{
	pthread_mutex_lock(&state->mu);
	state->in_replace[kind] = true;
	state->replace_mark[kind] = ++state->next_mark;
	pthread_mutex_unlock(&state->mu);
}

static void sweep(ft_state_t *state, ft_kind_t kind)
{
	uint64_t mark = state->replace_mark[kind];
	pod_rec_t *p, *ptmp;
	node_rec_t *n, *ntmp;

	if (kind == FT_KIND_SLICE || kind == FT_KIND_CLAIM ||
	    kind == FT_KIND_CLASS) {
		ft_state_dra_sweep(state, kind, mark);
		return;
	}
	if (kind == FT_KIND_WORKLOAD_GROUP || kind == FT_KIND_COSCHED_GROUP) {
		ft_state_gang_sweep(state, kind, mark);
		return;
	}
	if (kind == FT_KIND_PDB) {
		pdb_rec_t *b, *btmp;
		HASH_ITER (hh, state->pdbs, b, btmp)
			if (b->mark != mark) {
				HASH_DEL(state->pdbs, b);
				pdb_rec_free(b);
			}
		return;
	}
	if (kind == FT_KIND_POD) {
		/*
		 * A pod missing from a relist is gone, assumed or not, unless
		 * its bind is still in flight (the list may predate it).
		 */
		HASH_ITER (hh, state->pods, p, ptmp)
			if (p->mark != mark && !p->bind_in_flight)
				remove_pod(state, p);
		return;
	}
	HASH_ITER (hh, state->nodes, n, ntmp)
		if (n->present && n->mark != mark)
			remove_node(state, n);
}

void ft_state_replace_end(ft_state_t *state, ft_kind_t kind)
{
	pthread_mutex_lock(&state->mu);
	sweep(state, kind);
	state->in_replace[kind] = false;
	ft_state_maybe_publish(state);
	pthread_mutex_unlock(&state->mu);
}

static bool pod_key_copy(ft_pod_key_t *k, const ft_holding_t *h)
{
	k->ns = strdup(h->ns ? h->ns : "");
	k->name = strdup(h->name ? h->name : "");
	k->uid = strdup(h->uid ? h->uid : "");
	return k->ns && k->name && k->uid;
}

static void note_dispose(ft_conflict_note_t *note)
{
	free(note->node);
	free(note->units);
	for (unsigned k = 0; k < 2; k++) {
		free(note->pods[k].ns);
		free(note->pods[k].name);
		free(note->pods[k].uid);
	}
	memset(note, 0, sizeof(*note));
}

/* Queue a note for the pair; a full queue drops it (the count stays). */
static void queue_note(ft_state_t *state, const ft_node_t *node,
		       const ft_holding_t *a, const ft_holding_t *b,
		       const char *units)
{
	ft_conflict_note_t *note;

	if (state->n_notes >= FT_STATE_NOTES_MAX)
		return;
	if (!state->notes &&
	    !(state->notes = calloc(FT_STATE_NOTES_MAX, sizeof(*note))))
		return;
	note = &state->notes[state->n_notes];
	if (!(note->node = strdup(node->name)) ||
	    !(note->units = strdup(units)) ||
	    !pod_key_copy(&note->pods[0], a) ||
	    !pod_key_copy(&note->pods[1], b)) {
		note_dispose(note);
		return;
	}
	state->n_notes++;
}

/* Remember a pair as reported; false when it already was (or no memory). */
static bool first_report(ft_state_t *state, const ft_node_t *node,
			 const ft_holding_t *a, const ft_holding_t *b)
{
	conflict_rec_t *c = NULL;
	char *key = NULL;

	if (asprintf(&key, "%s %s %s", node->name, a->uid, b->uid) < 0)
		return false;
	HASH_FIND_STR(state->conflicts, key, c);
	if (c || !(c = calloc(1, sizeof(*c))) ||
	    !(c->uids[0] = strdup(a->uid)) || !(c->uids[1] = strdup(b->uid))) {
		if (c && !c->key)
			conflict_rec_free(c);
		free(key);
		return false;
	}
	c->key = key;
	HASH_ADD_KEYPTR(hh, state->conflicts, c->key, strlen(c->key), c);
	return true;
}

/*
 * A pair found in a rebuilt node. Only what the annotations say is a
 * conflict: an assumption is ours and was chosen free. Each pair is logged,
 * counted and queued once while both pods stay.
 */
static void note_conflict(ft_state_t *state, const ft_node_t *node,
			  const ft_conflict_t *c)
{
	const ft_holding_t *a = &node->holdings[c->earlier];
	const ft_holding_t *b = &node->holdings[c->later];
	char units[512];

	if (a->assumed || b->assumed || !first_report(state, node, a, b))
		return;
	state->conflicts_found++;
	ft_conflict_units_text(units, sizeof(units), node, c);
	ft_log(
	    FT_LOG_WARN, "state", b->name, node->name, units,
	    "allocation conflict: pods %s/%s and %s/%s both hold these units; they stay held, and the node's other units stay in use",
	    a->ns, a->name, b->ns, b->name);
	queue_note(state, node, a, b, units);
}

/* The pods of a node as node_build wants them, assumed allocations filled in.
 */
static int gather_pods(node_rec_t *n, ft_pod_t **views, const ft_pod_t ***ptrs,
		       bool **assumed, unsigned *count)
{
	pod_rec_t *p;
	unsigned len = 0, i = 0;

	DL_COUNT(n->pods, p, len);
	*views = calloc(len ? len : 1, sizeof(**views));
	*ptrs = calloc(len ? len : 1, sizeof(**ptrs));
	*assumed = calloc(len ? len : 1, sizeof(**assumed));
	if (!*views || !*ptrs || !*assumed)
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	DL_FOREACH (n->pods, p) {
		(*views)[i] = p->pod; /* shallow: only read during the build */
		if (p->assumed && p->assumed_units && !p->pod.has_allocation) {
			(*views)[i].has_allocation = true;
			(*views)[i].allocation = p->assumed_allocation;
		}
		(*ptrs)[i] = &(*views)[i];
		(*assumed)[i] = p->assumed;
		i++;
	}
	*count = i;
	return 0;
}

/*
 * On a DRA node the claims hold the GPUs: the pods hold only their CPUs
 * and memory, and each claim allocated there is a holding of its own,
 * after the pods.
 */
static int add_dra(const ft_pod_t ***ptrs, ft_pod_t *views, unsigned *count,
		   const ft_pod_t **holders, unsigned n_holders)
{
	const ft_pod_t **grown;

	for (unsigned i = 0; i < *count; i++)
		views[i].devices_by_claims = true;
	if (!n_holders)
		return 0;
	if (!(grown = realloc(*ptrs, (*count + n_holders) * sizeof(*grown))))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	*ptrs = grown;
	for (unsigned i = 0; i < n_holders; i++)
		grown[(*count)++] = holders[i];
	return 0;
}

static int build(ft_node_t **out, node_rec_t *n, const ft_pod_t **ptrs,
		 const bool *assumed, unsigned count, const ft_dra_view_t *view)
{
	int rc;

	if ((rc = ft_node_build(out, n->name, n->src.topology,
				n->src.topology_error, n->src.labels, ptrs,
				assumed, count)) < 0)
		return rc;
	if (view)
		rc = ft_node_set_dra(*out, view->double_published, view->error);
	return rc;
}

/*
 * A DRA node: its GPUs are published in slices, or claims are allocated on
 * it (their slices not seen yet: the claims hold what they name all the
 * same).
 */
static bool dra_node(const ft_dra_view_t *view, unsigned n_holders)
{
	return view && (view->dra || n_holders);
}

static int rebuild_node(ft_state_t *state, node_rec_t *n)
{
	ft_pod_t *views = NULL;
	const ft_pod_t **holders = NULL;
	const ft_pod_t **ptrs = NULL;
	bool *assumed = NULL, *grown;
	const ft_dra_view_t *view = NULL;
	ft_node_t *built = NULL;
	unsigned count = 0, n_holders = 0, pods;
	int rc;

	if ((rc = gather_pods(n, &views, &ptrs, &assumed, &count)) < 0 ||
	    (rc = ft_state_dra_gather(state, n, &view, &holders, &n_holders)) <
		0)
		goto cleanup;
	pods = count;
	if (dra_node(view, n_holders) &&
	    ((rc = add_dra(&ptrs, views, &count, holders, n_holders)) < 0 ||
	     !(grown =
		   realloc(assumed, (count ? count : 1) * sizeof(*grown))))) {
		rc = rc < 0 ? rc
			    : ft_error_set(FT_ENOMEM, "state: out of memory");
		goto cleanup;
	}
	if (dra_node(view, n_holders)) {
		assumed = grown;
		memset(assumed + pods, 0, (count - pods) * sizeof(*assumed));
	}
	if ((rc = build(&built, n, ptrs, assumed, count,
			dra_node(view, n_holders) ? view : NULL)) < 0)
		goto cleanup;
	for (unsigned i = 0; i < built->n_conflict_pairs; i++)
		note_conflict(state, built, &built->conflict_pairs[i]);
	ft_node_unref(n->built);
	n->built = built;
	built = NULL;
	ft_state_clear_dirty(state, n);
cleanup:
	ft_node_unref(built);
	free(holders);
	free(views);
	free(ptrs);
	free(assumed);
	return rc;
}

/* Node `n` for the next snapshot: built again when dirty (the previous
 * model is kept when that fails); NULL when it has no model. */
static ft_node_t *node_for_publish(ft_state_t *state, node_rec_t *n)
{
	if (!n->present) {
		/* Its Node's arrival marks it again. */
		ft_state_clear_dirty(state, n);
		return NULL;
	}
	if (n->dirty && rebuild_node(state, n) < 0)
		return NULL;
	return n->built;
}

/* Every node (`full`), or the dirty ones alone, into *out. */
static int collect(ft_state_t *state, ft_node_t ***out, unsigned *count,
		   bool full)
{
	node_rec_t *n, *tmp;
	unsigned cap = full ? HASH_COUNT(state->nodes) : state->n_dirty, i = 0;
	ft_node_t *built;

	*out = calloc(cap ? cap : 1, sizeof(**out));
	if (!*out)
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	if (full) {
		HASH_ITER (hh, state->nodes, n, tmp)
			if ((built = node_for_publish(state, n)))
				(*out)[i++] = built;
	} else {
		DL_FOREACH_SAFE2(state->dirty_nodes, n, tmp, dirty_next)
		if ((built = node_for_publish(state, n)))
			(*out)[i++] = built;
	}
	*count = i;
	return 0;
}

static void swap_snapshot(ft_state_t *state, ft_snapshot_t *next)
{
	ft_snapshot_t *old;

	pthread_mutex_lock(&state->snap_mu);
	old = state->snapshot;
	state->snapshot = next;
	pthread_mutex_unlock(&state->snap_mu);
	atomic_store(&state->published_ns, ft_clock_ns());
	ft_snapshot_unref(old);
}

/* Rebuild dirty nodes and publish. Called with state->mu held. */
static void publish(ft_state_t *state)
{
	bool full = state->membership_changed;
	ft_snapshot_t *next = NULL;
	ft_node_t **nodes = NULL;
	unsigned count = 0;
	int rc = 0;

	if (!full && !state->dirty)
		return;
	state->dirty = false;
	if ((rc = collect(state, &nodes, &count, full)) < 0)
		goto cleanup;
	if (!full && !count)
		goto cleanup;
	if (full)
		rc = ft_snapshot_new(&next, nodes, count, ++state->generation);
	else
		rc = ft_snapshot_with(&next, state->snapshot, nodes, count,
				      ++state->generation);
	if (rc < 0)
		goto cleanup;
	state->membership_changed = false;
	swap_snapshot(state, next);
cleanup:
	if (rc < 0)
		FT_LOG_ERROR_MSG("state: publish failed: %s", ft_error_last());
	free(nodes);
}

ft_snapshot_t *ft_state_snapshot(ft_state_t *state)
{
	ft_snapshot_t *s;

	pthread_mutex_lock(&state->snap_mu);
	s = ft_snapshot_ref(state->snapshot);
	pthread_mutex_unlock(&state->snap_mu);
	return s;
}

int ft_state_find_pod(ft_state_t *state, const char *uid, ft_pod_t *out)
{
	pod_rec_t *r = NULL;
	int rc;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	rc = r ? ft_pod_copy(out, &r->pod)
	       : ft_error_set(FT_ENOTFOUND, "pod uid %s: not in cache", uid);
	pthread_mutex_unlock(&state->mu);
	return rc;
}

void ft_state_observe_pod(ft_state_t *state, const ft_pod_t *pod)
{
	pod_rec_t *r = NULL;
	ft_pod_t copy;

	/*
	 * An unscheduled pod changes no node, so nothing is published. Pods
	 * seen only here are bounded: the watch removes them when they go, but
	 * a snapshot file has no watch.
	 */
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, pod->uid, r);
	if (!r && state->observed < FT_STATE_OBSERVED_MAX &&
	    ft_pod_copy(&copy, pod) == 0) {
		if ((r = pod_rec_new(state, &copy))) {
			r->observed_only = true;
			state->observed++;
		} else {
			ft_pod_dispose(&copy);
		}
	}
	pthread_mutex_unlock(&state->mu);
}

static void placement_from_holding(ft_placement_t *p, const ft_holding_t *h)
{
	memset(p, 0, sizeof(*p));
	p->level = h->level;
	p->levels = h->levels;
	p->gpus = h->gpus;
	p->mig[0] = h->mig[0];
	p->mig[1] = h->mig[1];
	memcpy(p->replicas, h->replicas, sizeof(p->replicas));
	p->cpus = h->cpus;
	p->numa_nodes = h->numa_nodes;
	p->memory_mib = h->memory_mib;
}

static pod_rec_t *pod_rec_for(ft_state_t *state, const ft_pod_t *pod)
{
	pod_rec_t *r = NULL;
	ft_pod_t copy;

	HASH_FIND_STR(state->pods, pod->uid, r);
	if (r || ft_pod_copy(&copy, pod) < 0)
		return r;
	if (!(r = pod_rec_new(state, &copy)))
		ft_pod_dispose(&copy);
	return r;
}

/*
 * Record placement `p` on `node` as assumed on the pod; `dra`: DRA chose
 * its devices, which its claims hold (ft_allocation_t.dra).
 */
static int assume_placement(ft_state_t *state, pod_rec_t *r,
			    const ft_node_t *node, const ft_placement_t *p,
			    ft_affinity_mode_t mode, bool dra)
{
	int rc;

	unlink_pod(state, r);
	drop_assumed(r);
	if ((rc = ft_codec_allocation_from_placement(&r->assumed_allocation, p,
						     node, mode)) < 0)
		goto relink;
	r->assumed_allocation.dra = dra;
	if (!(r->assumed_node = strdup(node->name))) {
		ft_allocation_dispose(&r->assumed_allocation);
		rc = ft_error_set(FT_ENOMEM, "state: out of memory");
		goto relink;
	}
	r->assumed = true;
	r->assumed_units = true;
	r->bind_in_flight = true;
relink:
	link_pod(state, r);
	publish(state);
	return rc;
}

/* Choose a placement on `node` and record it as assumed on the pod. */
static int assume_new(ft_state_t *state, pod_rec_t *r, const ft_pod_t *pod,
		      const ft_node_t *node, ft_policy_t policy,
		      ft_placement_t *p)
{
	int rc;

	if ((rc = ft_place_choose(p, node, &pod->demand, policy)) < 0)
		return rc;
	return assume_placement(state, r, node, p, pod->demand.mode, false);
}

/*
 * A pod that asks for no device (or lands on a node without topology) holds
 * only its CPU and memory requests: assumed on the node with no units, so
 * that scoring counts them before the watch shows the Binding.
 */
static int assume_requests(ft_state_t *state, pod_rec_t *r,
			   const ft_node_t *node)
{
	const ft_demand_t *d = &r->pod.demand;
	char *name;

	if (r->pod.node ||
	    (r->assumed && !strcmp(r->assumed_node, node->name)) ||
	    (!ft_demand_cpu_millis(d) && !d->memory_mib &&
	     !ft_demand_wants_devices(d)))
		return 0;
	if (!(name = strdup(node->name)))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	unlink_pod(state, r);
	drop_assumed(r);
	r->assumed_node = name;
	r->assumed = true;
	r->bind_in_flight = true;
	link_pod(state, r);
	publish(state);
	return 0;
}

/* The pod's record, when the pod may be assumed on `node_name` now. */
static int assumable(pod_rec_t **out, ft_state_t *state, const ft_pod_t *pod,
		     const char *node_name)
{
	pod_rec_t *r;

	*out = NULL;
	if (!(r = pod_rec_for(state, pod)))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	if (r->pod.node && strcmp(r->pod.node, node_name) != 0)
		return ft_error_set(FT_ECONFLICT,
				    "pod %s/%s is already bound to node %s",
				    pod->ns, pod->name, r->pod.node);
	if (r->assumed && r->bind_in_flight &&
	    strcmp(r->assumed_node, node_name) != 0)
		return ft_error_set(
		    FT_ECONFLICT,
		    "pod %s/%s: its Binding to node %s is %s; not bound to %s before that is settled",
		    pod->ns, pod->name, r->assumed_node,
		    r->bind_unknown ? "of unknown outcome" : "still in flight",
		    node_name);
	*out = r;
	return 0;
}

static int assume_locked(ft_state_t *state, const ft_pod_t *pod,
			 const char *node_name, ft_policy_t policy,
			 char **out_annotation)
{
	const ft_node_t *node = ft_snapshot_find(state->snapshot, node_name);
	const ft_holding_t *held;
	ft_placement_t p;
	pod_rec_t *r;
	int rc;

	if (!node)
		return ft_error_set(FT_ENOTFOUND, "node %s: not in cache",
				    node_name);
	if ((rc = assumable(&r, state, pod, node_name)) < 0)
		return rc;
	if (!ft_demand_wants_devices(&pod->demand) || !node->topology)
		return assume_requests(state, r, node);
	held = ft_node_find_holding(node, pod->uid);
	if (held && ft_holding_has_units(held))
		placement_from_holding(&p, held);
	else if ((rc = assume_new(state, r, pod, node, policy, &p)) < 0)
		return rc;
	node = ft_snapshot_find(state->snapshot, node_name);
	return ft_codec_allocation_encode(out_annotation, &p, node,
					  pod->demand.mode);
}

/*
 * The pod's CPUs near DRA's devices: those it already holds there (a bind
 * tried again), else chosen near them. A guaranteed pod whose devices the
 * topology does not place all of cannot be aligned.
 */
static int choose_near_dra(ft_placement_t *p, const ft_node_t *node,
			   const ft_pod_t *pod, uint16_t gpus,
			   const ft_mig_mask_t mig, unsigned unmatched,
			   ft_policy_t policy)
{
	const ft_holding_t *held = ft_node_find_holding(node, pod->uid);

	if (unmatched && pod->demand.mode == FT_MODE_GUARANTEED &&
	    pod->demand.has_affinity)
		return ft_error_set(
		    FT_ENOTFOUND,
		    "node %s: %u of the devices DRA allocated to pod %s/%s are not in the topology annotation; its affinity cannot be checked (guaranteed mode)",
		    node->name, unmatched, pod->ns, pod->name);
	if (held && !ft_cpuset_empty(&held->cpus)) {
		placement_from_holding(p, held);
		p->gpus = gpus;
		p->mig[0] = mig[0];
		p->mig[1] = mig[1];
		return 0;
	}
	return ft_place_choose_near(p, node, &pod->demand, gpus, mig, policy);
}

static int assume_dra_locked(ft_state_t *state, const ft_pod_t *pod,
			     const char *node_name, ft_policy_t policy,
			     const ft_dra_claim_t *const *claims, unsigned n,
			     char **out_annotation)
{
	const ft_node_t *node = ft_snapshot_find(state->snapshot, node_name);
	node_rec_t *nr = ft_state_node_rec(state, node_name, false);
	const ft_dra_claim_t *cached[FT_DRA_POD_CLAIMS_MAX];
	ft_dra_device_ref_t refs[FT_DRA_UNITS_MAX];
	const ft_dra_view_t *view = NULL;
	unsigned count, unmatched = 0;
	ft_mig_mask_t mig;
	ft_placement_t p;
	uint16_t gpus;
	pod_rec_t *r;
	int rc;

	if (!node || !nr || !node->topology)
		return ft_error_set(FT_ENOTFOUND,
				    "node %s: not in cache, or no topology",
				    node_name);
	if ((rc = assumable(&r, state, pod, node_name)) < 0 ||
	    (rc = ft_state_dra_view(state, nr, &view)) < 0)
		goto cleanup;
	if (!view) {
		rc = ft_error_set(FT_ENOTFOUND, "node %s: no ResourceSlice",
				  node_name);
		goto cleanup;
	}
	if (!claims) {
		n = ft_state_dra_pod_claims(nr, pod, cached,
					    FT_DRA_POD_CLAIMS_MAX);
		claims = cached;
	}
	count = ft_dra_pod_devices(refs, FT_DRA_UNITS_MAX, &gpus, mig,
				   &unmatched, claims, n, view);
	if ((rc = choose_near_dra(&p, node, pod, gpus, mig, unmatched,
				  policy)) < 0 ||
	    (rc = assume_placement(state, r, node, &p, pod->demand.mode,
				   true)) < 0)
		goto cleanup;
	node = ft_snapshot_find(state->snapshot, node_name);
	rc = ft_codec_allocation_encode_dra(out_annotation, &p, node,
					    pod->demand.mode, refs, count);
cleanup:
	return rc;
}

int ft_state_assume(ft_state_t *state, const ft_pod_t *pod,
		    const char *node_name, ft_policy_t policy,
		    char **out_annotation)
{
	int rc;

	*out_annotation = NULL;
	pthread_mutex_lock(&state->mu);
	rc = assume_locked(state, pod, node_name, policy, out_annotation);
	pthread_mutex_unlock(&state->mu);
	return rc;
}

int ft_state_assume_dra(ft_state_t *state, const ft_pod_t *pod,
			const char *node_name, ft_policy_t policy,
			const ft_dra_claim_t *const *claims, unsigned n,
			char **out_annotation)
{
	int rc;

	*out_annotation = NULL;
	pthread_mutex_lock(&state->mu);
	rc = assume_dra_locked(state, pod, node_name, policy, claims, n,
			       out_annotation);
	pthread_mutex_unlock(&state->mu);
	return rc;
}

bool ft_state_node_dra(ft_state_t *state, const char *name)
{
	ft_snapshot_t *snap = ft_state_snapshot(state);
	const ft_node_t *node = ft_snapshot_find(snap, name);
	bool dra = node && node->dra;

	ft_snapshot_unref(snap);
	return dra;
}

static void forget_locked(ft_state_t *state, pod_rec_t *r)
{
	unlink_pod(state, r);
	drop_assumed(r);
	link_pod(state, r);
	publish(state);
}

void ft_state_forget(ft_state_t *state, const char *uid)
{
	pod_rec_t *r = NULL;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	/* A refusal now says nothing of an earlier Binding that may land. */
	if (r && r->assumed && !r->bind_unknown)
		forget_locked(state, r);
	else if (r && r->assumed)
		r->bind_in_flight = true;
	pthread_mutex_unlock(&state->mu);
}

void ft_state_bind_done(ft_state_t *state, const char *uid)
{
	pod_rec_t *r = NULL;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r) {
		r->bind_in_flight = false;
		r->bind_unknown = false;
	}
	pthread_mutex_unlock(&state->mu);
}

void ft_state_bind_unknown(ft_state_t *state, const char *uid, uint64_t sent_ns)
{
	pod_rec_t *r = NULL;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r && r->assumed) {
		r->bind_in_flight = true;
		r->bind_unknown = true;
		r->bind_sent_ns = sent_ns;
	}
	pthread_mutex_unlock(&state->mu);
}

char *ft_state_bind_pending(ft_state_t *state, const char *uid, bool *unknown)
{
	pod_rec_t *r = NULL;
	char *node = NULL;

	*unknown = false;
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	/* The condition under which assume_locked refuses other nodes. */
	if (r && r->assumed && r->bind_in_flight && !r->pod.node) {
		node = strdup(r->assumed_node);
		*unknown = r->bind_unknown;
	}
	pthread_mutex_unlock(&state->mu);
	return node;
}

/* Why `seen` proves that the Binding never landed, or NULL. */
static const char *not_landed(const pod_rec_t *r, const ft_pod_t *seen,
			      uint64_t now_ns, uint64_t settle_ns)
{
	if (!seen)
		return "the pod is gone";
	if (seen->node)
		return "the pod is bound to another node";
	if (seen->terminal)
		return "the pod has finished";
	if (now_ns - r->bind_sent_ns >= settle_ns)
		return "the pod is still unbound, and the API server gave up on the request (bindSettleSeconds) before this read";
	return NULL;
}

static bool settle_locked(ft_state_t *state, pod_rec_t *r, const ft_pod_t *seen,
			  uint64_t now_ns, uint64_t settle_ns)
{
	const char *why;

	if (!r->assumed || !r->bind_unknown)
		return true;
	if (seen && seen->node && strcmp(seen->node, r->assumed_node) == 0) {
		ft_log(FT_LOG_INFO, "bind", r->pod.name, r->assumed_node, NULL,
		       "pod %s/%s: the Binding of unknown outcome landed",
		       r->pod.ns, r->pod.name);
		r->bind_in_flight = false;
		r->bind_unknown = false;
		return true;
	}
	if (!(why = not_landed(r, seen, now_ns, settle_ns)))
		return false;
	ft_log(
	    FT_LOG_INFO, "bind", r->pod.name, r->assumed_node, why,
	    "pod %s/%s: the Binding of unknown outcome did not land; its units are free again",
	    r->pod.ns, r->pod.name);
	forget_locked(state, r);
	return true;
}

bool ft_state_bind_settle(ft_state_t *state, const char *uid,
			  const ft_pod_t *seen, uint64_t now_ns,
			  uint64_t settle_ns)
{
	pod_rec_t *r = NULL;
	bool settled = true;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r)
		settled = settle_locked(state, r, seen, now_ns, settle_ns);
	pthread_mutex_unlock(&state->mu);
	return settled;
}

void ft_pod_keys_free(ft_pod_key_t *keys, unsigned count)
{
	for (unsigned i = 0; keys && i < count; i++) {
		free(keys[i].ns);
		free(keys[i].name);
		free(keys[i].uid);
	}
	free(keys);
}

static bool key_copy(ft_pod_key_t *k, const pod_rec_t *r)
{
	k->ns = strdup(r->pod.ns ? r->pod.ns : "");
	k->name = strdup(r->pod.name ? r->pod.name : "");
	k->uid = strdup(r->uid);
	return k->ns && k->name && k->uid;
}

int ft_state_unsettled(ft_state_t *state, ft_pod_key_t **out, unsigned *count)
{
	pod_rec_t *r, *tmp;
	unsigned n = 0, cap;
	int rc = 0;

	pthread_mutex_lock(&state->mu);
	cap = HASH_COUNT(state->pods);
	*out = calloc(cap ? cap : 1, sizeof(**out));
	HASH_ITER (hh, state->pods, r, tmp) {
		if (!*out || !r->bind_unknown)
			continue;
		if (!key_copy(&(*out)[n++], r))
			rc = ft_error_set(FT_ENOMEM, "state: out of memory");
	}
	pthread_mutex_unlock(&state->mu);
	if (!*out || rc < 0) {
		ft_pod_keys_free(*out, n);
		*out = NULL;
		n = 0;
		rc = ft_error_set(FT_ENOMEM, "state: out of memory");
	}
	*count = n;
	return rc;
}

void ft_state_confirm(ft_state_t *state, const char *uid)
{
	pod_rec_t *r = NULL;

	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r && r->assumed && !r->pod.node &&
	    (r->pod.node = strdup(r->assumed_node))) {
		unlink_pod(state, r);
		if (r->assumed_units) {
			ft_allocation_dispose(&r->pod.allocation);
			r->pod.allocation = r->assumed_allocation;
			r->pod.has_allocation = true;
			memset(&r->assumed_allocation, 0,
			       sizeof(r->assumed_allocation));
		}
		drop_assumed(r);
		link_pod(state, r);
		publish(state);
	}
	pthread_mutex_unlock(&state->mu);
}

void ft_conflict_notes_free(ft_conflict_note_t *notes, unsigned count)
{
	for (unsigned i = 0; notes && i < count; i++)
		note_dispose(&notes[i]);
	free(notes);
}

void ft_state_requeue_conflicts(ft_state_t *state, ft_conflict_note_t *notes,
				unsigned count)
{
	pthread_mutex_lock(&state->mu);
	for (unsigned i = 0; i < count; i++) {
		if (state->n_notes >= FT_STATE_NOTES_MAX ||
		    (!state->notes &&
		     !(state->notes =
			   calloc(FT_STATE_NOTES_MAX, sizeof(*notes))))) {
			note_dispose(&notes[i]);
			continue;
		}
		state->notes[state->n_notes++] = notes[i];
		memset(&notes[i], 0, sizeof(notes[i]));
	}
	pthread_mutex_unlock(&state->mu);
	free(notes);
}

void ft_state_take_conflicts(ft_state_t *state, ft_conflict_note_t **out,
			     unsigned *count)
{
	pthread_mutex_lock(&state->mu);
	*out = state->notes;
	*count = state->n_notes;
	state->notes = NULL;
	state->n_notes = 0;
	pthread_mutex_unlock(&state->mu);
}

void ft_state_stats(ft_state_t *state, ft_state_stats_t *out)
{
	node_rec_t *n, *ntmp;
	pod_rec_t *p, *ptmp;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&state->mu);
	out->generation = state->generation;
	out->conflicts_found = state->conflicts_found;
	HASH_ITER (hh, state->nodes, n, ntmp) {
		out->nodes += n->present;
		out->nodes_bad_topology += n->present && !n->src.topology;
		if (!n->present || !n->built || !n->built->dra)
			continue;
		out->dra_nodes++;
		out->dra_node_errors += n->built->dra_error != NULL;
		out->dra_double_published += n->built->dra_double_published;
	}
	out->claims_allocated = ft_state_dra_claims_linked(state);
	HASH_ITER (hh, state->pods, p, ptmp) {
		out->pods++;
		out->assumed += p->assumed;
		out->unsettled += p->bind_unknown;
	}
	pthread_mutex_unlock(&state->mu);
}

uint64_t ft_state_published_ns(ft_state_t *state)
{
	return atomic_load(&state->published_ns);
}

void ft_state_set_mix_window(ft_state_t *state, unsigned window)
{
	pthread_mutex_lock(&state->mu);
	ft_mix_init(&state->mix, window);
	pthread_mutex_unlock(&state->mu);
}

void ft_state_mix(ft_state_t *state, ft_mix_t *out)
{
	pthread_mutex_lock(&state->mu);
	*out = state->mix;
	pthread_mutex_unlock(&state->mu);
}

void ft_state_rank(ft_state_t *state, int64_t *ranks,
		   const ft_node_t *const *nodes, unsigned n,
		   const ft_demand_t *d, ft_policy_t policy)
{
	ft_mix_t mix;

	ft_state_mix(state, &mix);
	ft_mix_weigh(&mix, nodes, n);
	ft_place_rank_all(ranks, nodes, n, d, policy, &mix);
}
