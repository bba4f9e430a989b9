/*
 * The extender application: configuration, cluster state, the API server
 * client or snapshot file, and the HTTP routes for kube-scheduler's verbs.
 *
 * Routes (k8s.io/kube-scheduler/extender/v1; see api/openapi.yaml):
 *   POST /filter, /prioritize, /bind   extender verbs
 *   POST /preempt                      topology-aware victims (victims.h)
 *   GET  /healthz                      the process is serving
 *   GET  /readyz                       the model is in sync (ft_app_in_sync)
 *   GET  /version                      version, commit, build time
 *   GET  /metrics                      Prometheus text (metrics.h)
 * and the debug API on its own listener (debug.h).
 */
#ifndef FLEXTOPO_APP_H
#define FLEXTOPO_APP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "codec.h"
#include "config.h"
#include "decisions.h"
#include "kube.h"
#include "metrics.h"
#include "server.h"
#include "state.h"

typedef struct ft_app {
	ft_config_t cfg;
	ft_codec_options_t opts;
	ft_mig_catalog_t mig_catalog; /* built in: configs/mig-catalog.yaml */
	ft_state_t *state;
	ft_kube_client_t *kube; /* NULL in snapshot-file mode */
	ft_informer_t *node_informer;
	ft_informer_t *pod_informer;
	ft_informer_t *pdb_informer;
	ft_informer_t *slice_informer; /* resource.k8s.io/v1, when served */
	ft_informer_t *claim_informer;
	ft_informer_t *class_informer; /* DeviceClasses; NULL when dra is off */
	/* PodGroups of the Workload API and of coscheduling, when served. */
	ft_informer_t *workload_group_informer;
	ft_informer_t *cosched_group_informer;
	/* gangLabelKeys split (opts.gang_label_keys points into it). */
	char *gang_keys;
	const char *gang_key_list[FT_CONFIG_GANG_LABEL_KEYS];
	struct ft_upkeep *upkeep; /* upkeep.h; NULL in snapshot-file mode */
	ft_server_t *server;
	ft_server_t *debug_server;   /* NULL unless debugListen is set */
	ft_server_t *metrics_server; /* NULL unless metricsListen is set */
	ft_server_t *webhook_server; /* NULL unless webhookListen is set */
	struct ft_access *access;    /* its token checks (access.h) */
	ft_decisions_t *decisions;   /* decisionLogSize records (debug.h) */
	ft_metrics_t *metrics;
	atomic_bool snapshot_loaded;
	/* Embedded in another scheduler (embed.h): its informers feed the
	 * state, and it says when they have synced. */
	bool embedded;
	atomic_bool embedded_synced;
} ft_app_t;

/*
 * A pod needs the model of a node (its topology and usage) when it asks
 * for devices, an affinity or capabilities. Such a pod fails on a node the
 * model does not hold yet (FT_APP_NOT_CACHED): it may be full.
 */
bool ft_app_needs_model(const ft_demand_t *d);

#define FT_APP_NOT_CACHED "flextopo: node not in the extender's cache yet"

/*
 * The filter verdict on one node, as both front ends give it (the
 * extender's filter, the framework plugin's Filter): the node's filter memo
 * (ft_place_filter_memo, thread-safe), or for a node not in the model
 * (`node` NULL) a pass for a pod that needs no model and FT_UNFIT with
 * FT_APP_NOT_CACHED for the others.
 */
void ft_app_node_verdict(ft_verdict_t *out, const ft_node_t *node,
			 const ft_demand_t *d);

/*
 * Note verdict `v` on node `node_name` (`node`: its model, or NULL) as a
 * row of filter decision `dec`, and log a refusal at debug level.
 */
void ft_app_note_verdict(ft_decision_t *dec, const ft_node_t *node,
			 const char *node_name, const ft_verdict_t *v,
			 const char *pod_name);

#define FT_PREEMPT_VICTIMS_MAX (FT_VICTIM_MAX * 2)

typedef struct ft_preempt_victim {
	const char *uid; /* borrowed: from the snapshot or the proposed uids */
	int32_t priority;
} ft_preempt_victim_t;

/* What preempt decides for one candidate node (ft_app_preempt_decide). */
typedef struct ft_preempt_choice {
	ft_preempt_outcome_t outcome; /* metrics.h: dropped, the scheduler's
					 victims passed, or victims chosen */
	unsigned n;		      /* FT_PREEMPT_VICTIMS: victims, ... */
	unsigned pdb_violations; /* ... the budgets they break (victims.h) */
	/*
	 * FT_PREEMPT_VICTIMS: their cost over every pod they disrupt
	 * (victims.h: each broken gang's running members counted whole),
	 * the gangs they break, how many pods those run, and their names,
	 * "ns/name, ns/name" (cut to fit).
	 */
	ft_victim_cost_t cost;
	unsigned n_broken;
	unsigned gang_pods;
	char gangs[FT_DECISION_MESSAGE];
	ft_preempt_victim_t victims[FT_PREEMPT_VICTIMS_MAX]; /* by descending
								priority */
} ft_preempt_choice_t;

/*
 * The victims on candidate node `n` (its name and the victims kube-
 * scheduler proposed there) for `pod`, as both front ends choose them (the
 * extender's preempt verb, the framework plugin's PostFilter): the
 * cheapest set of the victim search (victims.h) plus the proposed victims
 * that hold nothing the model tracks, counted against the budgets of
 * ft_state_pdb_view(); the scheduler's own victims where the model cannot
 * judge (no topology, a pod asking for no devices); the node dropped when
 * no set works, or, on a DRA node, when GPUs are short (a Warning Event
 * and dra_preemption_refused_total). Each node adds a row to `dec` and
 * counts its search in the metrics. Borrows from `snap` and `n`.
 */
void ft_app_preempt_decide(ft_preempt_choice_t *out, ft_app_t *app,
			   const ft_snapshot_t *snap, const ft_pod_t *pod,
			   const ft_preempt_node_t *n, ft_decision_t *dec);

/*
 * DRA chose the pod's GPUs (dra.h): it has claims, or asks for GPUs on a
 * node whose GPUs DRA serves (KEP-5004). Then the placement is assumed at
 * bind, around the devices of its claims (ft_state_assume_dra).
 */
bool ft_app_dra_chooses(ft_app_t *app, const ft_pod_t *pod, const char *node);

/*
 * Assume `pod` on DRA node `node` around the devices of its `n` claims
 * (ft_state_assume_dra) unless `rc`, the outcome of reading them, is an
 * error, which is returned; the claims are disposed of either way.
 */
int ft_app_assume_claims(char **annotation, ft_app_t *app, const ft_pod_t *pod,
			 const char *node, ft_dra_claim_t *claims, unsigned n,
			 int rc);

/* Route handlers; `payload` is the ft_app_t. */
void ft_app_filter(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload);
void ft_app_prioritize(ft_http_response_t *out, const ft_http_request_t *req,
		       void *payload);
void ft_app_preempt(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload);
void ft_app_bind(ft_http_response_t *out, const ft_http_request_t *req,
		 void *payload);
void ft_app_healthz(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload);
void ft_app_readyz(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload);
void ft_app_version(ft_http_response_t *out, const ft_http_request_t *req,
		    void *payload);

/*
 * Truth before answers: the model may answer only while it holds what the
 * API server holds, as kube-scheduler's own informers must have synced
 * before it schedules (client-go's WaitForCacheSync). In sync: the snapshot
 * file is loaded, embedded: the host's informers have delivered their first
 * lists (ft_embed_set_synced), or every informer (nodes, pods,
 * PodDisruptionBudgets) is
 * synced now (ft_informer_synced: a list delivered, and no watch failure or
 * 410 since, or a relist after it). When not, `why` (when not NULL) gets a
 * sentence naming the kinds that are not ("not in sync with the API server:
 * waiting for a complete list of pods, poddisruptionbudgets").
 *
 * Until then the verbs refuse in the protocol's error forms: filter fails
 * every node in FailedNodes (not FailedAndUnresolvableNodes, so that the
 * pod stays a candidate and kube-scheduler tries it again), bind answers
 * with ExtenderBindingResult.Error, and prioritize and preempt, whose
 * replies have no error field, answer HTTP 503 with the JSON error body
 * (kind "unavailable"). They fail rather than wait for a relist: a wait
 * holds an HTTP worker, and the relist after an outage lasts as long as the
 * outage; kube-scheduler requeues the pod either way.
 */
bool ft_app_in_sync(const ft_app_t *app, char *why, size_t size);

/* ft_app_in_sync() without the reason: what /readyz answers. */
bool ft_app_ready(const ft_app_t *app);

/*
 * Out of sync: fill `out` with the 503 "unavailable" reply of a verb whose
 * reply has no error field, and return true; false when in sync.
 */
bool ft_app_refuse_unsynced(ft_http_response_t *out, ft_app_t *app);

/*
 * Load a `kubectl get nodes,pods -A -o yaml` (or JSON) List into the state.
 * FT_EIO / FT_EINVAL naming the file and the item.
 */
int ft_app_load_snapshot(ft_app_t *app, const char *path);

/* Set up state and codec options from app->cfg (already loaded). */
int ft_app_init(ft_app_t *app);
/* Free everything ft_app_init and later steps created; keeps nothing. */
void ft_app_dispose(ft_app_t *app);

/*
 * The API server client app->kube, from cfg.kubeconfig or, when that is "",
 * the pod's service account (in-cluster). FT_EINVAL for credentials that
 * cannot be read (named), FT_ENOMEM.
 */
int ft_app_connect(ft_app_t *app);

/* Register the routes on `server`. */
int ft_app_routes(ft_app_t *app, ft_server_t *server);

/* The program: flags, config, state source, server, signals. */
int ft_app_main(int argc, char **argv);

#endif
