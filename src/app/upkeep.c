/*
 * Background work against the API server (upkeep.h): a thread that wakes
 * every second, or at once when stopped, settles the binds whose outcome
 * is unknown by reading their pods, and posts the Events of allocation
 * conflicts and those the verbs queued.
 */
#include <flextopo/clock.h>
#include <flextopo/error.h>
#include <flextopo/latch.h>
#include <flextopo/log.h>
#include <flextopo/upkeep.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUND_MS 1000u
/* Events about pods waiting for the next round, at most. */
#define EVENTS_MAX 64
/* One Event per pod and reason in this long (kube-scheduler's own
 * recorder folds repeats into a count; the verbs here repeat every
 * scheduling attempt). */
#define EVENT_REPEAT_NS (600ull * 1000000000ull)
#define RECENT_MAX	256

typedef struct {
	char *ns, *name, *uid, *type, *reason, *message;
} queued_event_t;

typedef struct {
	char key[192]; /* "uid reason" */
	uint64_t at_ns;
} recent_event_t;

struct ft_upkeep {
	ft_app_t *app;
	pthread_t thread;
	ft_latch_t stop;
	pthread_mutex_t mu; /* guards the queue and the recent list */
	queued_event_t queue[EVENTS_MAX];
	unsigned queued;
	recent_event_t recent[RECENT_MAX];
	unsigned next_recent;
};

static void queued_event_free(queued_event_t *q)
{
	free(q->ns);
	free(q->name);
	free(q->uid);
	free(q->type);
	free(q->reason);
	free(q->message);
	memset(q, 0, sizeof(*q));
}

/* Seen within EVENT_REPEAT_NS: true; else remembered now. */
static bool recently(ft_upkeep_t *u, const char *key, uint64_t now)
{
	for (unsigned i = 0; i < RECENT_MAX; i++)
		if (u->recent[i].at_ns &&
		    now - u->recent[i].at_ns < EVENT_REPEAT_NS &&
		    !strcmp(u->recent[i].key, key))
			return true;
	snprintf(u->recent[u->next_recent].key, sizeof(u->recent[0].key), "%s",
		 key);
	u->recent[u->next_recent].at_ns = now;
	u->next_recent = (u->next_recent + 1) % RECENT_MAX;
	return false;
}

static bool queue_copy(queued_event_t *q, const ft_kube_event_t *e)
{
	return (q->ns = strdup(e->ns)) && (q->name = strdup(e->name)) &&
	       (q->uid = strdup(e->uid ? e->uid : "")) &&
	       (q->type = strdup(e->type)) && (q->reason = strdup(e->reason)) &&
	       (q->message = strdup(e->message));
}

void ft_upkeep_event(ft_upkeep_t *u, const ft_kube_event_t *e)
{
	char key[192];

	if (!u || !e->ns || !e->name)
		return;
	snprintf(key, sizeof(key), "%s %s", e->uid ? e->uid : e->name,
		 e->reason);
	pthread_mutex_lock(&u->mu);
	if (!recently(u, key, ft_clock_ns()) && u->queued < EVENTS_MAX) {
		if (queue_copy(&u->queue[u->queued], e))
			u->queued++;
		else
			queued_event_free(&u->queue[u->queued]);
	}
	pthread_mutex_unlock(&u->mu);
}

int ft_upkeep_post_events(ft_upkeep_t *u)
{
	queued_event_t batch[EVENTS_MAX];
	unsigned n, posted = 0;
	int rc = 0;

	pthread_mutex_lock(&u->mu);
	n = u->queued;
	memcpy(batch, u->queue, n * sizeof(batch[0]));
	memset(u->queue, 0, n * sizeof(batch[0]));
	u->queued = 0;
	pthread_mutex_unlock(&u->mu);
	for (unsigned i = 0; i < n; i++) {
		ft_kube_event_t e = {batch[i].ns,     batch[i].name,
				     batch[i].uid,    batch[i].type,
				     batch[i].reason, batch[i].message};
		if (rc == 0 &&
		    (rc = ft_kube_post_pod_event(u->app->kube, &e)) == 0)
			posted++;
		else if (rc < 0 && posted == i)
			ft_log(FT_LOG_DEBUG, "upkeep", e.name, NULL,
			       ft_error_last(), "event %s not posted",
			       e.reason);
		queued_event_free(&batch[i]);
	}
	return rc < 0 ? rc : (int)posted;
}

/*
 * What a GET of `key` shows: 0 with *seen decoded (or *gone: 404, or a pod
 * of another UID), else the GET's error.
 */
static int read_pod(ft_pod_t *seen, bool *gone, ft_app_t *app,
		    const ft_pod_key_t *key)
{
	cJSON *obj = NULL;
	int rc;

	*gone = false;
	rc = ft_kube_get_pod(app->kube, key->ns, key->name, &obj);
	if (rc == FT_ENOTFOUND) {
		*gone = true;
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = ft_codec_pod_decode(seen, obj, &app->opts);
	cJSON_Delete(obj);
	if (rc == 0 && strcmp(seen->uid, key->uid) != 0) {
		ft_pod_dispose(seen);
		*gone = true;
	}
	return rc;
}

/* Settle one pod; FT_EIO and friends when the API server did not answer. */
static int settle_one(ft_app_t *app, const ft_pod_key_t *key)
{
	uint64_t settle_ns = (uint64_t)app->cfg.bind_settle_s * 1000000000u;
	ft_pod_t seen;
	bool gone, settled;
	int rc;

	memset(&seen, 0, sizeof(seen));
	if ((rc = read_pod(&seen, &gone, app, key)) < 0)
		return rc;
	settled =
	    ft_state_bind_settle(app->state, key->uid, gone ? NULL : &seen,
				 ft_clock_ns(), settle_ns);
	if (!gone)
		ft_pod_dispose(&seen);
	return settled ? 1 : 0;
}

/* The Event on pods[k] of `note`: what it holds with whom. */
static int post_conflict_event(ft_app_t *app, const ft_conflict_note_t *note,
			       unsigned k)
{
	const ft_pod_key_t *self = &note->pods[k], *other = &note->pods[!k];
	char message[1024];
	ft_kube_event_t e = {.ns = self->ns,
			     .name = self->name,
			     .uid = self->uid,
			     .type = "Warning",
			     .reason = "AllocationConflict",
			     .message = message};

	snprintf(
	    message, sizeof(message),
	    "%s on node %s: %s, by the allocation annotations of this pod and of pod %s/%s. The node cannot give both; flextopo keeps these units held, so nothing else is placed on them. Delete the pod bound later of the two; its controller recreates it on free units.",
	    note->units, note->node,
	    k ? "also held by an earlier pod" : "held by this pod first",
	    other->ns, other->name);
	return ft_kube_post_pod_event(app->kube, &e);
}

/* Give notes[from..n) back to the state for the next round; free the rest. */
static void requeue_from(ft_app_t *app, ft_conflict_note_t *notes, unsigned n,
			 unsigned from)
{
	ft_conflict_note_t *rest = malloc((n - from) * sizeof(*rest));

	if (rest) {
		memcpy(rest, notes + from, (n - from) * sizeof(*rest));
		memset(notes + from, 0, (n - from) * sizeof(*rest));
		ft_state_requeue_conflicts(app->state, rest, n - from);
	}
	ft_conflict_notes_free(notes, n);
}

int ft_upkeep_report_conflicts(ft_app_t *app)
{
	ft_conflict_note_t *notes = NULL;
	unsigned n = 0, i = 0;
	int rc = 0;

	ft_state_take_conflicts(app->state, &notes, &n);
	for (; i < n; i++)
		if ((rc = post_conflict_event(app, &notes[i], 0)) < 0 ||
		    (rc = post_conflict_event(app, &notes[i], 1)) < 0)
			break;
	if (i == n) {
		ft_conflict_notes_free(notes, n);
		return (int)n;
	}
	ft_log(FT_LOG_WARN, "state", notes[i].pods[1].name, notes[i].node,
	       ft_error_last(),
	       "allocation conflict: posting its Events failed; retrying");
	requeue_from(app, notes, n, i);
	return rc;
}

int ft_upkeep_settle_binds(ft_app_t *app)
{
	ft_pod_key_t *keys = NULL;
	unsigned n = 0;
	int rc, settled = 0;

	if ((rc = ft_state_unsettled(app->state, &keys, &n)) < 0)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		if ((rc = settle_one(app, &keys[i])) < 0) {
			ft_log(FT_LOG_DEBUG, "bind", keys[i].name, NULL,
			       ft_error_last(),
			       "reading a pod of unknown bind outcome failed");
			break;
		}
		settled += rc;
	}
	ft_pod_keys_free(keys, n);
	return settled;
}

static void *run(void *arg)
{
	ft_upkeep_t *u = arg;

	while (!ft_latch_sleep(&u->stop, ROUND_MS)) {
		ft_upkeep_settle_binds(u->app);
		ft_upkeep_report_conflicts(u->app);
		ft_upkeep_post_events(u);
	}
	return NULL;
}

int ft_upkeep_start(ft_upkeep_t **out, ft_app_t *app)
{
	ft_upkeep_t *u = calloc(1, sizeof(*u));
	int rc;

	*out = NULL;
	if (!u)
		return ft_error_set(FT_ENOMEM, "upkeep: out of memory");
	u->app = app;
	pthread_mutex_init(&u->mu, NULL);
	if ((rc = ft_latch_init(&u->stop, "upkeep")) < 0) {
		pthread_mutex_destroy(&u->mu);
		free(u);
		return rc;
	}
	if (pthread_create(&u->thread, NULL, run, u) != 0) {
		ft_latch_dispose(&u->stop);
		pthread_mutex_destroy(&u->mu);
		free(u);
		return ft_error_set(FT_EIO, "upkeep: cannot start thread");
	}
	*out = u;
	return 0;
}

void ft_upkeep_free(ft_upkeep_t *u)
{
	if (!u)
		return;
	ft_latch_set(&u->stop);
	pthread_join(u->thread, NULL);
	ft_latch_dispose(&u->stop);
	for (unsigned i = 0; i < u->queued; i++)
		queued_event_free(&u->queue[i]);
	pthread_mutex_destroy(&u->mu);
	free(u);
}
