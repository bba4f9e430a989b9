/*
 * The state's DRA side: ResourceSlices and ResourceClaims from the watch
 * (dra.h), and what they add to a node's build.
 *
 * A slice change marks the nodes of its pool dirty (which slices of a pool
 * count depends on the others: ft_dra_slice_current); a claim is linked to
 * the node of its allocation, and a change marks the node it leaves and the
 * node it joins. At a build, a node whose GPUs are published in slices is a
 * DRA node: each claim allocated there becomes a holding of its own (a
 * claim holder: ft_pod_t.claim_holder), and the pods there hold only their
 * CPUs and memory (ft_pod_t.devices_by_claims), since their claims hold
 * their devices.
 */
#include <flextopo/error.h>
#include <flextopo/log.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>
#include <utlist.h>

#include "state_priv.h"

static const char *driver_of(const ft_state_t *state)
{
	return state->opts->dra_driver ? state->opts->dra_driver
				       : FT_DRA_DRIVER_NVIDIA;
}

static void slice_rec_free(slice_rec_t *r)
{
	ft_dra_slice_dispose(&r->slice);
	free(r->linked_node);
	free(r->name);
	free(r);
}

static void drop_holder(claim_rec_t *c);

static void claim_rec_free(claim_rec_t *r)
{
	drop_holder(r);
	ft_dra_claim_dispose(&r->claim);
	free(r->linked_node);
	free(r->key);
	free(r->uid);
	free(r);
}

static void class_rec_free(class_rec_t *r)
{
	ft_dra_class_dispose(&r->dc);
	free(r);
}

void ft_state_dra_free(ft_state_t *state)
{
	slice_rec_t *s, *stmp;
	claim_rec_t *c, *ctmp;
	class_rec_t *k, *ktmp;

	HASH_ITER (hh, state->slices, s, stmp) {
		HASH_DEL(state->slices, s);
		slice_rec_free(s);
	}

	HASH_CLEAR(hh_name, state->claims_by_name);
	HASH_ITER (hh, state->claims, c, ctmp) {
		HASH_DEL(state->claims, c);
		claim_rec_free(c);
	}
	HASH_ITER (hh, state->classes, k, ktmp) {
		HASH_DEL(state->classes, k);
		class_rec_free(k);
	}
}

/*
 * A slice is linked to its node (spec.nodeName): node-local devices, whose
 * pool lives on that node alone, as NVIDIA's driver publishes one pool per
 * node. Slices for no single node (network-attached devices) hold no GPU
 * of a node's topology and are kept unlinked.
 */
static void unlink_slice(ft_state_t *state, slice_rec_t *r)
{
	node_rec_t *n = ft_state_unlink(state, &r->linked_node);

	if (!n)
		return;
	DL_DELETE(n->slices, r);
	n->view_stale = true;
	ft_state_node_changed(state, n);
}

static void link_slice(ft_state_t *state, slice_rec_t *r)
{
	node_rec_t *n;

	if (!r->slice.node)
		return;
	if (!(n = ft_state_link(state, r->slice.node, &r->linked_node))) {
		FT_LOG_ERROR_MSG(
		    "state: out of memory linking resourceslice %s", r->name);
		return;
	}
	DL_APPEND(n->slices, r);
	n->view_stale = true;
	ft_state_node_changed(state, n);
}

static const char *object_name(const cJSON *obj)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");

	return cJSON_IsString(name) ? name->valuestring : NULL;
}

static void remove_slice(ft_state_t *state, slice_rec_t *r)
{
	unlink_slice(state, r);
	HASH_DEL(state->slices, r);
	slice_rec_free(r);
}

void ft_state_apply_slice(ft_state_t *state, const cJSON *obj)
{
	slice_rec_t *r = NULL;
	ft_dra_slice_t s;

	if (ft_codec_dra_slice_decode(&s, obj) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
		       "resourceslice skipped");
		return;
	}
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->slices, s.name, r);
	if (r && ft_dra_slice_equal(&r->slice, &s)) {
		/* Nothing the model reads changed: keep the record, whose
		 * devices the node's view points to. */
		r->mark = state->replace_mark[FT_KIND_SLICE];
		r = NULL;
	} else if (r) {
		unlink_slice(state, r);
		ft_dra_slice_dispose(&r->slice);
	} else if ((r = calloc(1, sizeof(*r))) && (r->name = strdup(s.name))) {
		HASH_ADD_KEYPTR(hh, state->slices, r->name, strlen(r->name), r);
	} else {
		free(r);
		r = NULL;
		FT_LOG_ERROR_MSG(
		    "state: out of memory keeping resourceslice %s", s.name);
	}
	if (r) {
		r->slice = s;
		memset(&s, 0, sizeof(s));
		r->mark = state->replace_mark[FT_KIND_SLICE];
		link_slice(state, r);
		ft_state_maybe_publish(state);
	}
	pthread_mutex_unlock(&state->mu);
	ft_dra_slice_dispose(&s);
}

void ft_state_delete_slice(ft_state_t *state, const cJSON *obj)
{
	const char *name = object_name(obj);
	slice_rec_t *r = NULL;

	if (!name)
		return;
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->slices, name, r);
	if (r) {
		remove_slice(state, r);
		ft_state_maybe_publish(state);
	}
	pthread_mutex_unlock(&state->mu);
}

/* ---- claims ---------------------------------------------------------- */

static void unlink_claim(ft_state_t *state, claim_rec_t *r)
{
	node_rec_t *n = ft_state_unlink(state, &r->linked_node);

	if (!n)
		return;
	DL_DELETE(n->claims, r);
	drop_holder(r);
	n->view_stale |= !n->slices; /* the view may go with the last claim */
	ft_state_node_changed(state, n);
}

/* A claim holds devices on the node of its allocation. */
static void link_claim(ft_state_t *state, claim_rec_t *r)
{
	const ft_dra_claim_t *c = &r->claim;
	node_rec_t *n;

	if (!c->allocated || !c->node || !c->n_results)
		return;
	if (!(n = ft_state_link(state, c->node, &r->linked_node))) {
		FT_LOG_ERROR_MSG(
		    "state: out of memory linking resourceclaim %s/%s", c->ns,
		    c->name);
		return;
	}
	DL_APPEND(n->claims, r);
	drop_holder(r);
	n->view_stale |= !n->view; /* a node with claims has a view */
	ft_state_node_changed(state, n);
}

static void unname_claim(ft_state_t *state, claim_rec_t *r)
{
	if (r->named)
		HASH_DELETE(hh_name, state->claims_by_name, r);
	r->named = false;
	free(r->key);
	r->key = NULL;
}

/* Index `r` by "namespace/name"; it takes the name from an older claim. */
static void name_claim(ft_state_t *state, claim_rec_t *r)
{
	claim_rec_t *old = NULL;

	if (asprintf(&r->key, "%s/%s", r->claim.ns, r->claim.name) < 0) {
		r->key = NULL;
		return;
	}
	HASH_FIND(hh_name, state->claims_by_name, r->key, strlen(r->key), old);
	if (old) {
		HASH_DELETE(hh_name, state->claims_by_name, old);
		old->named = false;
	}
	HASH_ADD_KEYPTR(hh_name, state->claims_by_name, r->key, strlen(r->key),
			r);
	r->named = true;
}

static void remove_claim(ft_state_t *state, claim_rec_t *r)
{
	unlink_claim(state, r);
	unname_claim(state, r);
	HASH_DEL(state->claims, r);
	claim_rec_free(r);
}

static claim_rec_t *claim_rec_new(ft_state_t *state, const char *uid)
{
	claim_rec_t *r = calloc(1, sizeof(*r));

	if (!r || !(r->uid = strdup(uid))) {
		free(r);
		return NULL;
	}
	HASH_ADD_KEYPTR(hh, state->claims, r->uid, strlen(r->uid), r);
	return r;
}

void ft_state_apply_claim(ft_state_t *state, const cJSON *obj)
{
	claim_rec_t *r = NULL;
	ft_dra_claim_t c;

	if (ft_codec_dra_claim_decode(&c, obj) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
		       "resourceclaim skipped");
		return;
	}
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->claims, c.uid, r);
	if (r && ft_dra_claim_same_holding(&r->claim, &c)) {
		/* It holds what it held (reservedFor or its requests
		 * changed): no node changes. */
		ft_dra_claim_dispose(&r->claim);
		r->claim = c;
		memset(&c, 0, sizeof(c));
		r->mark = state->replace_mark[FT_KIND_CLAIM];
		goto cleanup;
	}
	if (!r && !(r = claim_rec_new(state, c.uid))) {
		FT_LOG_ERROR_MSG(
		    "state: out of memory keeping resourceclaim %s/%s", c.ns,
		    c.name);
		goto cleanup;
	}
	unlink_claim(state, r);
	unname_claim(state, r);
	ft_dra_claim_dispose(&r->claim);
	r->claim = c;
	memset(&c, 0, sizeof(c));
	r->mark = state->replace_mark[FT_KIND_CLAIM];
	name_claim(state, r);
	link_claim(state, r);
	ft_state_maybe_publish(state);
cleanup:
	pthread_mutex_unlock(&state->mu);
	ft_dra_claim_dispose(&c);
}

void ft_state_delete_claim(ft_state_t *state, const cJSON *obj)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
	claim_rec_t *r = NULL;

	if (!cJSON_IsString(uid))
		return;
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->claims, uid->valuestring, r);
	if (r) {
		remove_claim(state, r);
		ft_state_maybe_publish(state);
	}
	pthread_mutex_unlock(&state->mu);
}

/* ---- device classes ------------------------------------------------- */

void ft_state_apply_class(ft_state_t *state, const cJSON *obj)
{
	class_rec_t *r = NULL;
	ft_dra_class_t dc;

	if (ft_codec_dra_class_decode(&dc, obj, driver_of(state)) < 0) {
		ft_log(FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
		       "deviceclass skipped");
		return;
	}
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->classes, dc.name, r);
	if (!r && (r = calloc(1, sizeof(*r)))) {
		r->dc.name = dc.name;
		dc.name = NULL;
		HASH_ADD_KEYPTR(hh, state->classes, r->dc.name,
				strlen(r->dc.name), r);
	}
	if (r) {
		free(r->dc.extended_resource);
		r->dc.kind = dc.kind;
		r->dc.extended_resource = dc.extended_resource;
		dc.extended_resource = NULL;
		r->mark = state->replace_mark[FT_KIND_CLASS];
	} else {
		FT_LOG_ERROR_MSG("state: out of memory keeping deviceclass %s",
				 dc.name);
	}
	pthread_mutex_unlock(&state->mu);
	ft_dra_class_dispose(&dc);
}

void ft_state_delete_class(ft_state_t *state, const cJSON *obj)
{
	const char *name = object_name(obj);
	class_rec_t *r = NULL;

	if (!name)
		return;
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->classes, name, r);
	if (r) {
		HASH_DEL(state->classes, r);
		class_rec_free(r);
	}
	pthread_mutex_unlock(&state->mu);
}

static uint32_t request_gpus(const ft_state_t *state, const ft_dra_request_t *q)
{
	class_rec_t *k = NULL;

	if (q->device_class)
		HASH_FIND_STR(state->classes, q->device_class, k);
	if (!k || k->dc.kind != FT_DRA_GPU)
		return 0;
	return q->all ? 1 : q->count;
}

uint32_t ft_state_claim_gpus(ft_state_t *state, const ft_pod_t *pod)
{
	uint32_t gpus = 0;
	char key[512];

	if (!pod->n_claims || !pod->ns)
		return 0;
	pthread_mutex_lock(&state->mu);
	for (unsigned i = 0; i < pod->n_claims; i++) {
		claim_rec_t *r = NULL;
		snprintf(key, sizeof(key), "%s/%s", pod->ns, pod->claims[i]);
		HASH_FIND(hh_name, state->claims_by_name, key, strlen(key), r);
		for (unsigned q = 0;
		     r && !r->claim.allocated && q < r->claim.n_requests; q++)
			gpus += request_gpus(state, &r->claim.requests[q]);
	}
	pthread_mutex_unlock(&state->mu);
	return gpus;
}

unsigned ft_state_dra_claims_linked(ft_state_t *state)
{
	claim_rec_t *c, *ctmp;
	unsigned n = 0;

	HASH_ITER (hh, state->claims, c, ctmp)
		n += c->linked_node != NULL;
	return n;
}

unsigned ft_state_gpu_classes(ft_state_t *state, ft_class_name_t *out,
			      unsigned cap)
{
	class_rec_t *k, *ktmp;
	unsigned n = 0;

	pthread_mutex_lock(&state->mu);
	HASH_ITER (hh, state->classes, k, ktmp) {
		if (n < cap && k->dc.kind != FT_DRA_OTHER)
			snprintf(out[n++].name, sizeof(out[0].name), "%s",
				 k->dc.name);
	}
	pthread_mutex_unlock(&state->mu);
	return n;
}

void ft_state_dra_sweep(ft_state_t *state, ft_kind_t kind, uint64_t mark)
{
	slice_rec_t *s, *stmp;
	claim_rec_t *c, *ctmp;
	class_rec_t *k, *ktmp;

	if (kind == FT_KIND_CLASS)
		HASH_ITER (hh, state->classes, k, ktmp) {
			if (k->mark != mark) {
				HASH_DEL(state->classes, k);
				class_rec_free(k);
			}
		}

	if (kind == FT_KIND_SLICE)
		HASH_ITER (hh, state->slices, s, stmp) {
			if (s->mark != mark)
				remove_slice(state, s);
		}
	if (kind == FT_KIND_CLAIM)
		HASH_ITER (hh, state->claims, c, ctmp) {
			if (c->mark != mark)
				remove_claim(state, c);
		}
}

/* ---- what a node's build gets ------------------------------------------ */

void ft_state_dra_stale(node_rec_t *n)
{
	n->view_stale = true;
}

/* The slices of node `n`. */
static int node_slices(node_rec_t *n, const ft_dra_slice_t ***out,
		       unsigned *count)
{
	slice_rec_t *r;
	unsigned len = 0;

	*out = NULL;
	*count = 0;
	DL_COUNT(n->slices, r, len);
	if (!len)
		return 0;
	if (!(*out = calloc(len, sizeof(**out))))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	DL_FOREACH (n->slices, r)
		(*out)[(*count)++] = &r->slice;
	return 0;
}

static void drop_holder(claim_rec_t *c)
{
	if (c->has_holder)
		ft_pod_dispose(&c->holder);
	c->has_holder = false;
}

/* Claim `c` as a claim holder: its units, never a victim. */
static int holder_of(ft_pod_t *out, const ft_dra_claim_t *c,
		     const ft_dra_view_t *view, const char *node,
		     const char *driver)
{
	unsigned missed = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->claim_holder = true;
	out->priority = INT32_MAX;
	out->demand.level = FT_LEVEL_NODE;
	if ((rc = ft_dra_claim_units(&out->allocation, &missed, c, view,
				     driver)) < 0)
		return rc;
	out->has_allocation = true;
	if (missed)
		FT_LOG_WARN_MSG(
		    "resourceclaim %s/%s: %u devices on node %s that no current slice and topology place; held as GPUs of unknown placement",
		    c->ns, c->name, missed, node);
	if (!(out->uid = strdup(c->uid)) || !(out->ns = strdup(c->ns)) ||
	    !(out->name = strdup(c->name)) || !(out->node = strdup(node)))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	return 0;
}

/* The node's view, built again when a slice, a claim's link or the Node
 * changed; the claims' holders go with the old one. */
static int refresh_view(ft_state_t *state, node_rec_t *n)
{
	const ft_dra_slice_t **slices = NULL;
	ft_dra_view_t *fresh = NULL;
	unsigned n_slices = 0;
	claim_rec_t *c;
	int rc;

	if (!n->view_stale)
		return 0;
	n->view_stale = false;
	if ((rc = node_slices(n, &slices, &n_slices)) < 0)
		goto cleanup;
	if ((n_slices || n->claims) && !(fresh = malloc(sizeof(*fresh)))) {
		rc = ft_error_set(FT_ENOMEM, "state: out of memory");
		goto cleanup;
	}
	if (fresh)
		ft_dra_view_build(fresh, n->name, n->src.topology, slices,
				  n_slices, driver_of(state),
				  n->src.gpu_allocatable);
	/* A new generation of the same devices: the claims hold the same. */
	if (!fresh || !n->view ||
	    ft_dra_view_fingerprint(fresh) != n->view_fingerprint)
		DL_FOREACH (n->claims, c)
			drop_holder(c);
	n->view_fingerprint = fresh ? ft_dra_view_fingerprint(fresh) : 0;
	free(n->view);
	n->view = fresh;
	fresh = NULL;
cleanup:
	if (rc < 0) {
		n->view_stale = true;
		DL_FOREACH (n->claims, c)
			drop_holder(c);
	}
	free(fresh);
	free(slices);
	return rc;
}

int ft_state_dra_view(ft_state_t *state, node_rec_t *n,
		      const ft_dra_view_t **view)
{
	int rc = refresh_view(state, n);

	*view = n->view;
	return rc;
}

int ft_state_dra_gather(ft_state_t *state, node_rec_t *n,
			const ft_dra_view_t **view, const ft_pod_t ***holders,
			unsigned *n_holders)
{
	claim_rec_t *c;
	unsigned len = 0;
	int rc;

	*holders = NULL;
	*n_holders = 0;
	if ((rc = ft_state_dra_view(state, n, view)) < 0 || !*view)
		return rc;
	DL_COUNT(n->claims, c, len);
	if (!len)
		return 0;
	if (!(*holders = calloc(len, sizeof(**holders))))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	DL_FOREACH (n->claims, c) {
		if (!c->has_holder) {
			if ((rc = holder_of(&c->holder, &c->claim, *view,
					    n->name, driver_of(state))) < 0) {
				ft_pod_dispose(&c->holder);
				return rc;
			}
			c->has_holder = true;
		}
		(*holders)[(*n_holders)++] = &c->holder;
	}
	return 0;
}

static bool uses_claim(const ft_pod_t *pod, const ft_dra_claim_t *c)
{
	if (!pod->ns || !c->ns || strcmp(pod->ns, c->ns) != 0)
		return false;
	for (unsigned i = 0; i < pod->n_claims; i++)
		if (!strcmp(pod->claims[i], c->name))
			return true;
	return false;
}

unsigned ft_state_dra_pod_claims(node_rec_t *n, const ft_pod_t *pod,
				 const ft_dra_claim_t **out, unsigned cap)
{
	claim_rec_t *c;
	unsigned count = 0;

	DL_FOREACH (n->claims, c) {
		if (count < cap && uses_claim(pod, &c->claim))
			out[count++] = &c->claim;
	}
	return count;
}
