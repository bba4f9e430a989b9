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

#include <stdlib.h>
#include <string.h>

#include <uthash.h>
#include <utlist.h>

#include "state_priv.h"

static void slice_rec_free(slice_rec_t *r)
{
	ft_dra_slice_dispose(&r->slice);
	free(r->linked_node);
	free(r->name);
	free(r);
}

static void claim_rec_free(claim_rec_t *r)
{
	ft_dra_claim_dispose(&r->claim);
	free(r->linked_node);
	free(r->uid);
	free(r);
}

void ft_state_dra_free(ft_state_t *state)
{
	slice_rec_t *s, *stmp;
	claim_rec_t *c, *ctmp;

	HASH_ITER (hh, state->slices, s, stmp) {
		HASH_DEL(state->slices, s);
		slice_rec_free(s);
	}
	HASH_ITER (hh, state->claims, c, ctmp) {
		HASH_DEL(state->claims, c);
		claim_rec_free(c);
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
	if (r) {
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
	ft_state_node_changed(state, n);
}

static void remove_claim(ft_state_t *state, claim_rec_t *r)
{
	unlink_claim(state, r);
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
	if (!r && !(r = claim_rec_new(state, c.uid))) {
		FT_LOG_ERROR_MSG(
		    "state: out of memory keeping resourceclaim %s/%s", c.ns,
		    c.name);
		goto cleanup;
	}
	unlink_claim(state, r);
	ft_dra_claim_dispose(&r->claim);
	r->claim = c;
	memset(&c, 0, sizeof(c));
	r->mark = state->replace_mark[FT_KIND_CLAIM];
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

void ft_state_dra_sweep(ft_state_t *state, ft_kind_t kind, uint64_t mark)
{
	slice_rec_t *s, *stmp;
	claim_rec_t *c, *ctmp;

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

static int gather_holders(node_rec_t *n, const ft_dra_view_t *view,
			  const char *driver, ft_pod_t **holders,
			  unsigned *count)
{
	claim_rec_t *c;
	unsigned len = 0;
	int rc = 0;

	DL_COUNT(n->claims, c, len);
	*holders = NULL;
	*count = 0;
	if (!len)
		return 0;
	if (!(*holders = calloc(len, sizeof(**holders))))
		return ft_error_set(FT_ENOMEM, "state: out of memory");
	DL_FOREACH (n->claims, c) {
		if ((rc = holder_of(&(*holders)[(*count)++], &c->claim, view,
				    n->name, driver)) < 0)
			break;
	}
	return rc;
}

int ft_state_dra_gather(ft_state_t *state, node_rec_t *n, ft_dra_view_t **view,
			ft_pod_t **holders, unsigned *n_holders)
{
	const char *driver = state->opts->dra_driver ? state->opts->dra_driver
						     : FT_DRA_DRIVER_NVIDIA;
	const ft_dra_slice_t **slices = NULL;
	unsigned n_slices = 0;
	int rc;

	*view = NULL;
	*holders = NULL;
	*n_holders = 0;
	if ((rc = node_slices(n, &slices, &n_slices)) < 0 ||
	    (!n_slices && !n->claims))
		goto cleanup;
	if (!(*view = malloc(sizeof(**view)))) {
		rc = ft_error_set(FT_ENOMEM, "state: out of memory");
		goto cleanup;
	}
	ft_dra_view_build(*view, n->name, n->src.topology, slices, n_slices,
			  driver, n->src.gpu_allocatable);
	rc = gather_holders(n, *view, driver, holders, n_holders);
cleanup:
	free(slices);
	return rc;
}
