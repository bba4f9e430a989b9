/*
 * The extender's observability surface (app stage): the debug API on its own
 * listener, GET /metrics on both listeners, the metered extender verbs, and
 * the calls by which the verbs record their decisions (decisions.h) and
 * metrics (metrics.h).
 *
 * Debug listener (config debugListen; "" leaves it off), read-only except
 * that nothing is written at all (see api/openapi.yaml):
 *   GET  /debug/nodes                    one row per node
 *   GET  /debug/nodes/{name}[?format=svg] the node's tree, or its picture
 *   GET  /debug/pods/{namespace}/{name}  allocation, observed units, drift
 *                                        and decisions of a pod
 *   POST /debug/explain[?node=NAME]      what would happen to a pod spec
 *   GET  /debug/conflicts                pairs of pods whose allocation
 *                                        annotations claim one unit
 *   GET  /debug/decisions[?limit=N]      the newest decisions (N: 1-1048576,
 *                                        default 20, at most decisionLogSize)
 *   GET  /metrics, /healthz, /readyz, /version
 *
 * Explain changes nothing: it reads one snapshot and runs the pure
 * placement (ft_place_filter, ft_place_score, ft_place_choose) and victim
 * search (ft_victims_search, with the pod's priority and the budgets of
 * ft_state_pdb_view) on it.
 */
#ifndef FLEXTOPO_DEBUG_H
#define FLEXTOPO_DEBUG_H

#include "app.h"
#include "codec.h"
#include "decisions.h"
#include "server.h"

/* POST /filter, /prioritize, /preempt, /bind (metered) and GET /metrics. */
int ft_app_verb_routes(ft_app_t *app, ft_server_t *server);

/* The debug API, /metrics, /healthz, /readyz and /version. */
int ft_app_debug_routes(ft_app_t *app, ft_server_t *server);

/*
 * Start the debug listener on app->cfg.debug_listen into app->debug_server;
 * nothing when it is "". FT_EINVAL / FT_EIO as ft_server_start().
 */
int ft_app_debug_start(ft_app_t *app);

/*
 * Start the metrics listener on app->cfg.metrics_listen (nothing when "")
 * into app->metrics_server: GET /metrics only, over HTTPS (the extender's
 * certificate, or one made at start), to a bearer token the API server
 * allows (access.h); the check, which may wait on the API server, runs on
 * the listener's offload threads. FT_EINVAL without an API server;
 * otherwise as ft_server_start().
 */
int ft_app_metrics_start(ft_app_t *app);

/* GET /metrics behind the token check (the metrics listener's route). */
void ft_app_metrics_checked(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload);

/* The verbs with their latency and count recorded (`payload`: the app). */
void ft_app_metered_filter(ft_http_response_t *out,
			   const ft_http_request_t *req, void *payload);
void ft_app_metered_prioritize(ft_http_response_t *out,
			       const ft_http_request_t *req, void *payload);
void ft_app_metered_preempt(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload);
void ft_app_metered_bind(ft_http_response_t *out, const ft_http_request_t *req,
			 void *payload);

/* Route handlers; `payload` is the ft_app_t. */
void ft_app_metrics(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload);
void ft_app_debug_nodes(ft_http_response_t *out, const ft_http_request_t *req,
			void *payload);
void ft_app_debug_node(ft_http_response_t *out, const ft_http_request_t *req,
		       void *payload);
void ft_app_debug_conflicts(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload);
void ft_app_debug_pod(ft_http_response_t *out, const ft_http_request_t *req,
		      void *payload);
void ft_app_debug_explain(ft_http_response_t *out, const ft_http_request_t *req,
			  void *payload);
void ft_app_debug_decisions(ft_http_response_t *out,
			    const ft_http_request_t *req, void *payload);

/*
 * Record the outcome of a bind of `b` (rc < 0: failed with `error`): the
 * decision, with the placement the pod now holds, and the bind metrics.
 * Does not touch the calling thread's error message.
 */
void ft_app_record_bind(ft_app_t *app, const ft_bind_args_t *b, int rc,
			const char *error);

/* Record a preempt decision built by the verb and its metrics. */
void ft_app_record_preempt(ft_app_t *app, ft_decision_t *d,
			   ft_affinity_mode_t mode);

#endif
