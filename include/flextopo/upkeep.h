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

#endif
