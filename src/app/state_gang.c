/*
 * The state's gangs (gang.h): the PodGroups of both APIs, fed by their
 * watches, and the pods that name each gang, linked as pods link to their
 * node. The victim search reads them as a gang view (victims.h): per gang,
 * its rules and its running members on other nodes, with the budgets those
 * match. Every function here runs with state->mu held, except the two that
 * apply and delete PodGroups, which take it.
 */
#include "state_priv.h"

#include <flextopo/error.h>
#include <flextopo/log.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

/* "<source>:<namespace>/<name>": FT_ENOMEM. */
static int gang_key(char **out, ft_gang_source_t source, const char *ns,
		    const char *name)
{
	if (asprintf(out, "%s:%s/%s", ft_gang_source_name(source), ns, name) <
	    0) {
		*out = NULL;
		return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

static void gang_rec_free(gang_rec_t *g)
{
	ft_pod_group_dispose(&g->group);
	free(g->key);
	free(g);
}

/* The record of `*key`, made when `create` (taking *key, set NULL). */
static gang_rec_t *gang_find(ft_state_t *state, char **key,
			     ft_gang_source_t source, bool create)
{
	gang_rec_t *g = NULL;

	HASH_FIND_STR(state->gangs, *key, g);
	if (g || !create || !(g = calloc(1, sizeof(*g))))
		return g;
	g->key = *key;
	g->source = source;
	*key = NULL;
	HASH_ADD_KEYPTR(hh, state->gangs, g->key, strlen(g->key), g);
	return g;
}

/* Drop `g` when no pod names it and no PodGroup is known for it. */
static void gang_gc(ft_state_t *state, gang_rec_t *g)
{
	if (g && !g->pods && !g->has_group && !g->bad_group) {
		HASH_DEL(state->gangs, g);
		gang_rec_free(g);
	}
}

void ft_state_gang_unlink(ft_state_t *state, pod_rec_t *r)
{
	gang_rec_t *g = r->gang;

	if (!g)
		return;
	DL_DELETE2(g->pods, r, gang_prev, gang_next);
	r->gang = NULL;
	gang_gc(state, g);
}

void ft_state_gang_link(ft_state_t *state, pod_rec_t *r)
{
	char *key = NULL;
	gang_rec_t *g;

	if (r->pod.gang &&
	    gang_key(&key, r->pod.gang_source, r->pod.ns, r->pod.gang) < 0)
		FT_LOG_ERROR_MSG(
		    "state: out of memory linking pod %s/%s to its gang",
		    r->pod.ns, r->pod.name);
	if (r->gang && key && strcmp(r->gang->key, key) == 0) {
		free(key);
		return;
	}
	ft_state_gang_unlink(state, r);
	if (key && (g = gang_find(state, &key, r->pod.gang_source, true))) {
		DL_APPEND2(g->pods, r, gang_prev, gang_next);
		r->gang = g;
	}
	free(key);
}

void ft_state_gang_free(ft_state_t *state)
{
	gang_rec_t *g, *tmp;

	HASH_ITER (hh, state->gangs, g, tmp) {
		HASH_DEL(state->gangs, g);
		gang_rec_free(g);
	}
}

static ft_kind_t group_kind(ft_gang_source_t source)
{
	return source == FT_GANG_WORKLOAD ? FT_KIND_WORKLOAD_GROUP
					  : FT_KIND_COSCHED_GROUP;
}

/* Forget `g`'s PodGroup. */
static void clear_group(ft_state_t *state, gang_rec_t *g)
{
	ft_pod_group_dispose(&g->group);
	g->has_group = g->bad_group = false;
	gang_gc(state, g);
}

void ft_state_gang_sweep(ft_state_t *state, ft_kind_t kind, uint64_t mark)
{
	gang_rec_t *g, *tmp;

	HASH_ITER (hh, state->gangs, g, tmp)
		if ((g->has_group || g->bad_group) && g->mark != mark &&
		    group_kind(g->source) == kind)
			clear_group(state, g);
}

static const char *meta_str(const cJSON *obj, const char *key)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The source a PodGroup's apiVersion names, or FT_GANG_NONE. */
static ft_gang_source_t group_source(const cJSON *obj)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
	const char *version = cJSON_IsString(v) ? v->valuestring : "";

	if (!strncmp(version, "scheduling.k8s.io/", 18))
		return FT_GANG_WORKLOAD;
	if (!strncmp(version, "scheduling.x-k8s.io/", 20))
		return FT_GANG_COSCHEDULING;
	return FT_GANG_NONE;
}

/* The key of PodGroup `obj`; NULL (logged) when it names none. */
static char *group_key(const cJSON *obj, ft_gang_source_t *source)
{
	const char *ns = meta_str(obj, "namespace");
	const char *name = meta_str(obj, "name");
	char *key = NULL;

	*source = group_source(obj);
	if (*source == FT_GANG_NONE || !name)
		FT_LOG_WARN_MSG(
		    "podgroup %s ignored: %s", name ? name : "?",
		    name
			? "apiVersion is neither scheduling.k8s.io nor scheduling.x-k8s.io"
			: "metadata.name is required");
	else if (gang_key(&key, *source, ns ? ns : "default", name) < 0)
		FT_LOG_ERROR_MSG("state: out of memory recording podgroup %s",
				 name);
	return key;
}

void ft_state_apply_pod_group(ft_state_t *state, const cJSON *obj)
{
	ft_gang_source_t source;
	ft_pod_group_t group;
	char *key = group_key(obj, &source);
	int rc = ft_codec_pod_group_decode(&group, obj);
	gang_rec_t *g;

	if (!key)
		goto cleanup;
	pthread_mutex_lock(&state->mu);
	if ((g = gang_find(state, &key, source, true))) {
		if (rc < 0 && !g->bad_group)
			ft_log(
			    FT_LOG_WARN, "watch", NULL, NULL, ft_error_last(),
			    "podgroup ignored: its pods are their own units");
		ft_pod_group_dispose(&g->group);
		g->has_group = rc == 0;
		g->bad_group = rc < 0;
		if (rc == 0) {
			g->group = group;
			memset(&group, 0, sizeof(group));
		}
		g->mark = state->replace_mark[group_kind(source)];
	}
	pthread_mutex_unlock(&state->mu);
cleanup:
	ft_pod_group_dispose(&group);
	free(key);
}

void ft_state_delete_pod_group(ft_state_t *state, const cJSON *obj)
{
	ft_gang_source_t source;
	char *key = group_key(obj, &source);
	gang_rec_t *g;

	if (!key)
		return;
	pthread_mutex_lock(&state->mu);
	if ((g = gang_find(state, &key, source, false)))
		clear_group(state, g);
	pthread_mutex_unlock(&state->mu);
	free(key);
}

/* The node a member runs on (bound or assumed, not finished), or NULL. */
static const char *member_node(const pod_rec_t *m)
{
	if (m->pod.terminal || m->observed_only)
		return NULL;
	if (m->pod.node)
		return m->pod.node;
	return m->assumed ? m->assumed_node : NULL;
}

static uint32_t running(const gang_rec_t *g)
{
	const pod_rec_t *m;
	uint32_t n = 0;

	DL_FOREACH2(g->pods, m, gang_next)
	n += member_node(m) != NULL;
	return n;
}

/* Member `m` of the gang being added, running elsewhere, into `gv`. */
static void add_remote(ft_gang_view_t *gv, ft_victim_gang_t *gang,
		       ft_pdb_view_t *pdb, const ft_pdb_t *const *budgets,
		       unsigned n_budgets, const pod_rec_t *m)
{
	ft_gang_remote_t *r;

	if (gv->n_remote == FT_GANG_REMOTE_MAX) {
		gv->truncated = true;
		return;
	}
	r = &gv->remote[gv->n_remote++];
	r->priority = m->pod.priority;
	r->start_time = m->pod.start_time;
	r->n_budgets = (uint8_t)ft_victims_pdb_view_match(
	    pdb, r->budgets, &m->pod, budgets, n_budgets);
	gang->n_remote++;
}

uint16_t ft_state_gang_view_add(ft_gang_view_t *gv, ft_pdb_view_t *pdb,
				const ft_pdb_t *const *budgets,
				unsigned n_budgets, const gang_rec_t *g,
				const ft_node_t *node)
{
	const pod_rec_t *m;
	ft_victim_gang_t *gang;
	bool whole;
	uint32_t slack;

	if (g->bad_group ||
	    !ft_gang_rules(&whole, &slack, g->source,
			   g->has_group ? &g->group : NULL, running(g)))
		return 0;
	if (gv->n_gangs == FT_GANG_MAX) {
		gv->truncated = true;
		return 0;
	}
	gang = &gv->gangs[gv->n_gangs];
	*gang = (ft_victim_gang_t){whole, slack, gv->n_remote, 0};
	DL_FOREACH2(g->pods, m, gang_next)
	{
		const char *where = member_node(m);
		/* A member here that the node does not hold (it holds
		 * nothing) is disrupted all the same: costed as elsewhere. */
		if (where && (strcmp(where, node->name) != 0 ||
			      !ft_node_find_holding(node, m->uid)))
			add_remote(gv, gang, pdb, budgets, n_budgets, m);
	}
	return (uint16_t)++gv->n_gangs;
}

bool ft_state_describe_gang(ft_state_t *state, const char *uid,
			    ft_gang_describe_t *out)
{
	pod_rec_t *r = NULL;
	const gang_rec_t *g;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&state->mu);
	HASH_FIND_STR(state->pods, uid, r);
	if (r) {
		g = r->gang;
		out->source = r->pod.gang_source;
		snprintf(out->name, sizeof(out->name), "%s/%s", r->pod.ns,
			 r->pod.gang ? r->pod.gang : "");
		snprintf(out->error, sizeof(out->error), "%s",
			 r->pod.gang_error ? r->pod.gang_error : "");
	}
	if (r && (g = r->gang)) {
		uint32_t slack;
		const pod_rec_t *m;
		out->has_group = g->has_group;
		out->min = g->has_group ? g->group.min : 0;
		out->running = running(g);
		DL_FOREACH2(g->pods, m, gang_next)
		out->members++;
		out->is_gang = !g->bad_group &&
			       ft_gang_rules(&out->whole, &slack, g->source,
					     g->has_group ? &g->group : NULL,
					     out->running);
		if (g->bad_group)
			snprintf(
			    out->error, sizeof(out->error),
			    "its PodGroup does not decode (logged when it came): the pod is its own unit");
		else if (!out->is_gang)
			snprintf(
			    out->error, sizeof(out->error),
			    "no PodGroup of this name: the pod is its own unit");
	}
	pthread_mutex_unlock(&state->mu);
	return r != NULL;
}
