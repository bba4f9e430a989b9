/*
 * The extender's background work against the API server, on one thread of
 * its own so that no verb waits for it: every second it settles the binds
 * whose outcome is unknown. For each such pod (ft_state_unsettled) it GETs
 * the pod and hands what the API server shows to ft_state_bind_settle(),
 * which holds the rule (state.h): bound there, landed; bound elsewhere,
 * finished or gone, never will; unbound, only once bindSettleSeconds have
 * passed since the Binding was sent. A GET that fails ends the round: the
 * API server is unreachable, and the next round tries again.
 *
 * Then it reports the allocation conflicts found since the last round
 * (ft_state_take_conflicts): a Warning Event "AllocationConflict" on each of
 * the two pods, naming the units, the node and the other pod, and what to
 * do. Notes whose Events could not be posted wait for the next round.
 * Last, the Events the verbs queued (ft_upkeep_event): preempt's, for a
 * pod whose GPU shortage on DRA nodes no eviction can resolve.
 *
 * Runs only when the extender watches an API server (not with --snapshot).
 */
#ifndef FLEXTOPO_UPKEEP_H
#define FLEXTOPO_UPKEEP_H

#include "app.h"

typedef struct ft_upkeep ft_upkeep_t;

/* Start the thread over app->state and app->kube, which outlive it. */
int ft_upkeep_start(ft_upkeep_t **out, ft_app_t *app);

/* Stop (wakes a waiting thread; a GET in progress ends first) and free. */
void ft_upkeep_free(ft_upkeep_t *upkeep);

/*
 * One round, on the calling thread: settle what a GET of each unsettled pod
 * allows. Returns how many binds it settled, or FT_ENOMEM.
 */
int ft_upkeep_settle_binds(ft_app_t *app);

/*
 * One round of conflict Events, on the calling thread: the number of
 * conflicts reported, or the error that stopped the round (the rest wait).
 */
int ft_upkeep_report_conflicts(ft_app_t *app);

/*
 * Queue an Event about a pod for the next round (copied; thread-safe),
 * for a verb that must not wait on the API server. One per pod and reason
 * in 10 minutes: the verbs repeat at every scheduling attempt. At most 64
 * wait; more are dropped. No-op when `upkeep` is NULL (a snapshot).
 */
void ft_upkeep_event(ft_upkeep_t *upkeep, const ft_kube_event_t *e);

/* Post the queued Events on the calling thread: how many, or the first
 * error (the rest of that round is dropped and logged at debug). */
int ft_upkeep_post_events(ft_upkeep_t *upkeep);

#endif
