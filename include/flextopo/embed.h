/*
 * flextopo embedded in a scheduler process: the second front end over the
 * same state, placement, ranking and victim search as the extender's verbs
 * (DESIGN.md, "One core, two front ends"). scheduler/ registers it in
 * kube-scheduler as framework plugins (Go, through cgo); each extension
 * point asks one question here, and each question is answered by the code
 * that answers the extender verb:
 *
 *   PreFilter       ft_embed_pod_new       decode the pod once, one snapshot
 *   Filter          ft_embed_filter        one node (ft_app_node_verdict)
 *   PreScore        ft_embed_rank          every feasible node (ft_state_rank)
 *   NormalizeScore  ft_scores_of_ranks     (frag.h) onto 0..100
 *   Reserve         ft_embed_assume        ft_state_assume: the annotation
 *   Bind            ft_embed_assume_dra, ft_embed_bound
 *   Unreserve       ft_embed_forget        ft_state_forget
 *   PostFilter      ft_embed_victims       per candidate node
 *                                          (ft_app_preempt_decide)
 *
 * The host feeds the state with the objects its own informers see (Nodes,
 * Pods, PodDisruptionBudgets, and ResourceSlices, ResourceClaims and
 * DeviceClasses where served), as JSON of the Kubernetes API types
 * (encoding/json of k8s.io/api), and says when their first lists are in
 * (ft_embed_set_synced): until then every pod is refused, as the extender
 * refuses before its watch has synced.
 *
 * Threading: every function may be called from any thread at any time;
 * the state locks its writer side and each pod handle reads one immutable
 * snapshot, so concurrent ft_embed_filter() calls on one pod (kube-
 * scheduler filters nodes in parallel) never wait on each other except for
 * a short lock to note the verdict. A pod handle may be used from several
 * threads at once and is freed once, by its owner.
 *
 * Strings passed with a length need no NUL. Lists of names are passed as
 * one buffer of `n` NUL-terminated strings back to back ("a\0b\0").
 *
 * Errors: as everywhere (error.h), a negative code and the calling thread's
 * ft_error_last(). A host whose threads may change between two calls (a Go
 * goroutine) reads the message in the same call (scheduler/'s C shims).
 *
 * Observability: the debug API and /metrics of the extender (api/
 * openapi.yaml) are served from the host process on debugListen, and
 * /metrics to bearer tokens the API server allows on metricsListen
 * (ft_embed_serve), which also serves the DRA claim admission webhook on
 * webhookListen. Decisions are recorded per pod and verb as the extender
 * records them: filter (once per scheduling cycle, when the cycle moves on
 * to scoring, reserving or preemption, or when the handle is freed),
 * prioritize, preempt and bind.
 */
#ifndef FLEXTOPO_EMBED_H
#define FLEXTOPO_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "place.h"
#include "state.h"

typedef struct ft_embed ft_embed_t;
typedef struct ft_embed_pod ft_embed_pod_t;

/*
 * A state with the configuration of `config_path` (configs/flextopo.yaml
 * documents the keys; NULL or "": the defaults). Keys of the extender's
 * API listener and watch (listen, tlsClientCAFile, maxConnections, threads,
 * snapshot, watchBackoff*) are ignored: the host's informers feed the
 * state. FT_EIO / FT_EINVAL as
 * ft_config_load_file(), FT_ENOMEM.
 */
int ft_embed_new(ft_embed_t **out, const char *config_path);

/*
 * Serve, as the extender does: the debug API and /metrics on the
 * configuration's debugListen; /metrics over HTTPS to authorized bearer
 * tokens on metricsListen (tlsCertFile/tlsKeyFile, or a certificate made
 * at start); and the admission webhook, POST /mutate over HTTPS with
 * webhookCertFile/webhookKeyFile, on webhookListen (webhook.h). Each is off
 * when its address is "". metricsListen reviews tokens with the API
 * server: its client comes from kubeconfig, or the pod's service account
 * when that is "" (ft_app_connect). The webhook answers from the
 * DeviceClasses the host feeds (ft_embed_apply) and calls no API server.
 * FT_EINVAL / FT_EIO as ft_server_start() and ft_app_connect(), FT_ENOMEM.
 */
int ft_embed_serve(ft_embed_t *e);

/* Stop serving and free everything; `e` may be NULL. Pod handles first. */
void ft_embed_free(ft_embed_t *e);

/* The application inside (borrowed): its state, metrics and decisions. */
ft_app_t *ft_embed_app(ft_embed_t *e);

/*
 * Apply an object of `kind` (added or updated) or its deletion, as the
 * extender's watch applies it (ft_state_apply_* / ft_state_delete_*): a bad
 * object is logged and skipped. FT_EINVAL when `json` does not parse,
 * FT_ENOMEM.
 */
int ft_embed_apply(ft_embed_t *e, ft_kind_t kind, const char *json, size_t len);
int ft_embed_delete(ft_embed_t *e, ft_kind_t kind, const char *json,
		    size_t len);

/*
 * Bracket the first list of `kind` (ft_state_replace_begin/end): objects
 * applied in between are published once, at the end.
 */
void ft_embed_list_begin(ft_embed_t *e, ft_kind_t kind);
void ft_embed_list_end(ft_embed_t *e, ft_kind_t kind);

/* Whether the host's informers have delivered their first lists. */
void ft_embed_set_synced(ft_embed_t *e, bool synced);

/* Whether the configuration asks for ResourceSlices and ResourceClaims. */
bool ft_embed_dra(const ft_embed_t *e);

/* The configured annotation prefix ("flextopo.io"); borrowed. */
const char *ft_embed_annotation_prefix(const ft_embed_t *e);

/*
 * A pod of one scheduling cycle: the v1 Pod `json` decoded once, with the
 * GPUs of its unallocated claims (ft_state_claim_gpus), and a reference to
 * the current snapshot that every later question of the cycle reads.
 * FT_EUNAVAIL while not in sync (the message says why), FT_EINVAL when the
 * object is not a pod or its flextopo annotations are wrong ("pod ns/name:
 * annotation flextopo.io/affinity: ..."), FT_ENOMEM.
 */
int ft_embed_pod_new(ft_embed_pod_t **out, ft_embed_t *e, const char *json,
		     size_t len);

/* Record what is still unrecorded and free; `p` may be NULL. */
void ft_embed_pod_free(ft_embed_pod_t *p);

/*
 * Whether the pod needs the model to be filtered (ft_app_needs_model:
 * devices, pinned CPUs, an affinity or capabilities). A host may skip
 * filtering the others, where the model has nothing to refuse, and should
 * still rank them (ft_embed_rank), as the extender's prioritize ranks every
 * pod it is sent: their CPUs should go where they strand the fewest GPUs.
 */
bool ft_embed_pod_wants_topology(const ft_embed_pod_t *p);

/*
 * The verdict on node `name` of the pod's snapshot (ft_app_node_verdict),
 * its reason copied into `reason` (`size` bytes, NUL-terminated).
 * `removed` lists the uids of pods the host removed from the node to try
 * preemption (kube-scheduler's dry run: PreFilterExtensions.RemovePod),
 * `n_removed` of them: the verdict is then whether the pod would fit once
 * the holdings of those pods are gone (ft_victims_feasible), at its level
 * in guaranteed mode, anywhere on the node otherwise. Thread-safe.
 */
ft_fit_t ft_embed_filter(ft_embed_pod_t *p, const char *name, size_t name_len,
			 const char *removed, unsigned n_removed, char *reason,
			 size_t size);

/*
 * Rank the `n` nodes of `names` (ft_state_rank): ranks[i] for the i-th
 * name, FT_RANK_NONE for a node not in the snapshot. Records the prioritize
 * decision with the scores the extender would give (0..10). FT_ENOMEM.
 */
int ft_embed_rank(ft_embed_pod_t *p, const char *names, unsigned n,
		  int64_t *ranks);

/*
 * Assume the pod on node `name` (ft_state_assume): *out_annotation gets the
 * allocation annotation (heap; NULL for a pod that holds no devices).
 * Returns 0; 1 when DRA chooses the pod's devices there
 * (ft_app_dra_chooses), with nothing assumed: the host assumes at bind,
 * after the DRA plugin has written the claims (ft_embed_assume_dra).
 * FT_ENOTFOUND (no such node, no placement: the message says why),
 * FT_ECONFLICT, FT_ENOMEM.
 */
int ft_embed_assume(ft_embed_pod_t *p, const char *name, char **out_annotation);

/*
 * Assume a pod on a DRA node at bind (ft_state_assume_dra): `pod_json` is
 * the pod read again (its claim statuses), `claims_json` a JSON array of
 * its ResourceClaims read after the DRA plugin's PreBind, each allocated.
 * FT_EINVAL for bad JSON or a claim not allocated; else as
 * ft_state_assume_dra().
 */
int ft_embed_assume_dra(ft_embed_t *e, const char *pod_json, size_t pod_len,
			const char *name, const char *claims_json,
			size_t claims_len, char **out_annotation);

/*
 * The Binding of pod `p` to node `name` was written (rc 0) or refused
 * (rc < 0, `error` says why): settle the assumption (ft_state_bind_done, or
 * ft_state_forget) and record the bind decision and its metrics; `ns` is
 * how long the bind took.
 */
void ft_embed_bound(ft_embed_pod_t *p, const char *name, int rc,
		    const char *error, uint64_t ns);

/* Drop the assumption of pod `uid` (Unreserve: ft_state_forget). */
void ft_embed_forget(ft_embed_t *e, const char *uid);

/* The victims on one node (ft_app_preempt_decide). */
typedef struct ft_embed_victims {
	ft_preempt_outcome_t outcome; /* metrics.h */
	unsigned n;		      /* FT_PREEMPT_VICTIMS: victims, ... */
	unsigned pdb_violations;      /* ... the budgets they break, ... */
	/*
	 * ... their cost over every pod they disrupt (victims.h: broken gangs
	 * counted whole; compare with ft_victims_compare) and the gangs they
	 * break.
	 */
	ft_victim_cost_t cost;
	unsigned n_broken;
	char *uids; /* n NUL-terminated uids back to back, by descending
		       priority (heap; free()) */
} ft_embed_victims_t;

/*
 * The victims on node `name` for the pod: `proposed` lists the uids of the
 * victims the scheduler chose (n_proposed of them; their budget violations
 * `proposed_pdb_violations`). Thread-safe: a host searches candidate nodes
 * in parallel. The node's decision row joins the pod's preempt decision,
 * recorded by ft_embed_preempt_done(). FT_ENOMEM.
 */
int ft_embed_victims(ft_embed_victims_t *out, ft_embed_pod_t *p,
		     const char *name, const char *proposed,
		     unsigned n_proposed, unsigned proposed_pdb_violations);

/* Record the preempt decision of the pod's cycle and its metrics. */
void ft_embed_preempt_done(ft_embed_pod_t *p);

#endif
