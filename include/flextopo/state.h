/*
 * The cluster state: the one writer of the model. It keeps the latest
 * decoded Node and Pod objects (from the API watch or a snapshot file), the
 * allocations assumed by bind and not yet seen in the watch, and publishes
 * immutable snapshots (cluster.h) for request handlers.
 *
 * Locking: one mutex guards the writer side; publishing swaps the snapshot
 * pointer under a second, short-held mutex. ft_state_snapshot() returns a
 * reference that the caller drops with ft_snapshot_unref(), without holding
 * any lock while it reads. Assumed allocations follow kube-scheduler's
 * assume/forget (pkg/scheduler/schedule_one.go): held from bind until the
 * watch shows the pod bound with its allocation, dropped if the bind is
 * refused, kept while its outcome is unknown (ft_state_bind_unknown).
 */
#ifndef FLEXTOPO_STATE_H
#define FLEXTOPO_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cluster.h"
#include "codec.h"
#include "frag.h"
#include "victims.h"

typedef struct ft_state ft_state_t;

/* `opts` is copied by reference: its strings must outlive the state. */
int ft_state_new(ft_state_t **out, const ft_codec_options_t *opts);
void ft_state_free(ft_state_t *state);

/*
 * Apply a v1 Node or Pod object (ADDED/MODIFIED) or its deletion. Bad
 * objects are logged and skipped: they never disturb other nodes or pods.
 * Each call publishes a new snapshot unless inside a replace. A pod's
 * drift (ft_pod_drifted, cluster.h) is logged at warn, naming the pod, its
 * node and the expected and actual units, and a malformed observed
 * annotation likewise, once each time they appear or change from the pod's
 * previous version; the end of a drift at info.
 */
void ft_state_apply_node(ft_state_t *state, const cJSON *node);
void ft_state_delete_node(ft_state_t *state, const cJSON *node);
void ft_state_apply_pod(ft_state_t *state, const cJSON *pod);
void ft_state_delete_pod(ft_state_t *state, const cJSON *pod);

/* Apply or delete a policy/v1 PodDisruptionBudget. */
void ft_state_apply_pdb(ft_state_t *state, const cJSON *pdb);
/*
 * A PodGroup of either API (gang.h), told apart by its apiVersion. One that
 * does not decode (no gang minimum, a negative one, an unknown disruption
 * mode) is logged with its name and the field, and its pods are their own
 * units until a good one replaces it; the watch goes on.
 */
void ft_state_apply_pod_group(ft_state_t *state, const cJSON *group);
void ft_state_delete_pod_group(ft_state_t *state, const cJSON *group);
void ft_state_delete_pdb(ft_state_t *state, const cJSON *pdb);

/*
 * Apply or delete a resource.k8s.io/v1 ResourceSlice or ResourceClaim
 * (dra.h). A node whose GPUs appear in slices is a DRA node: each claim
 * allocated on it holds its devices (a holding of its own, never a
 * victim), and the node's pods hold only their CPUs and memory. Bad
 * objects are logged and skipped.
 */
void ft_state_apply_slice(ft_state_t *state, const cJSON *slice);
void ft_state_delete_slice(ft_state_t *state, const cJSON *slice);
void ft_state_apply_claim(ft_state_t *state, const cJSON *claim);
void ft_state_delete_claim(ft_state_t *state, const cJSON *claim);
/* DeviceClasses: which claims' requests ask for GPUs (ft_dra_class_t). */
void ft_state_apply_class(ft_state_t *state, const cJSON *device_class);
void ft_state_delete_class(ft_state_t *state, const cJSON *device_class);

/*
 * The whole GPUs that `pod`'s ResourceClaims not yet allocated ask for: the
 * count of each request whose DeviceClass picks GPUs (one for a request of
 * allocationMode All, whose count depends on the node). Claims allocated
 * already hold their devices; claims not seen yet add nothing (kube-
 * scheduler does not schedule a pod before its claims exist).
 */
uint32_t ft_state_claim_gpus(ft_state_t *state, const ft_pod_t *pod);

/*
 * Make a pod's decoded demand final for filter, prioritize and preempt: add
 * the GPUs of its unallocated claims (ft_state_claim_gpus), then give it
 * its memo key from the state's table (ft_demand_key, place.h), by which
 * every node's filter memo finds it. Thread-safe.
 */
void ft_state_settle_demand(ft_state_t *state, ft_pod_t *pod);

/* A DeviceClass name, copied out of the state. */
typedef struct ft_class_name {
	char name[254]; /* a DNS subdomain: at most 253 characters */
} ft_class_name_t;

/*
 * The names of the DeviceClasses that pick GPUs or MIG devices, at most
 * `cap` of them, in `out`; returns how many.
 */
unsigned ft_state_gpu_classes(ft_state_t *state, ft_class_name_t *out,
			      unsigned cap);

/*
 * A relist of one kind: objects of that kind not applied between begin and
 * end are removed; one snapshot is published at the end.
 */
typedef enum {
	FT_KIND_NODE = 0,
	FT_KIND_POD = 1,
	FT_KIND_PDB = 2,
	FT_KIND_SLICE = 3, /* resource.k8s.io/v1 ResourceSlice */
	FT_KIND_CLAIM = 4, /* resource.k8s.io/v1 ResourceClaim */
	FT_KIND_CLASS = 5, /* resource.k8s.io/v1 DeviceClass */
	/* PodGroups (gang.h): the Workload API's, coscheduling's */
	FT_KIND_WORKLOAD_GROUP = 6, /* scheduling.k8s.io/v1alpha2 */
	FT_KIND_COSCHED_GROUP = 7,  /* scheduling.x-k8s.io/v1alpha1 */
	FT_KIND_COUNT = 8,
} ft_kind_t;
void ft_state_replace_begin(ft_state_t *state, ft_kind_t kind);
void ft_state_replace_end(ft_state_t *state, ft_kind_t kind);

/* A referenced snapshot (never NULL after ft_state_new). */
ft_snapshot_t *ft_state_snapshot(ft_state_t *state);

/* A copy of pod `uid` as last seen (watch, or filter); FT_ENOTFOUND. */
int ft_state_find_pod(ft_state_t *state, const char *uid, ft_pod_t *out);

/*
 * Remember a pod seen in a filter request when the watch has not shown it
 * yet, so that a bind right after the filter can find its demand.
 */
void ft_state_observe_pod(ft_state_t *state, const ft_pod_t *pod);

/*
 * Choose and assume a placement for `pod` on `node_name` atomically with
 * respect to other binds: the published snapshot holds it before this
 * returns. *out_annotation receives the allocation annotation JSON (heap,
 * NULL when the pod asks for no devices). A pod that asks for no device, or
 * a node without topology, is assumed with its CPU and memory requests only
 * (no annotation), so that scoring counts them before the watch shows the
 * Binding. Idempotent: if the pod already holds an allocation on that node,
 * that one is returned.
 * FT_ENOTFOUND (no such node, or no placement: message says why).
 */
int ft_state_assume(ft_state_t *state, const ft_pod_t *pod,
		    const char *node_name, ft_policy_t policy,
		    char **out_annotation);

/*
 * Bind on a DRA node (ft_node_t.dra), where DRA's allocator chose the pod's
 * GPUs and MIG devices (dra.h): `claims` (n of them, read from the API
 * server at bind, after DynamicResources' PreBind wrote them; NULL: the
 * state's copies of the pod's claims) name them. Assume the pod's pinned
 * CPUs and memory near them, at its affinity's level in its mode (its own
 * level only when guaranteed), and make the allocation annotation with
 * exactly those devices and the "dra" key naming each. The devices are held
 * by the claims, not by this assumption. FT_ENOTFOUND with a message when
 * no domain there has room for the CPUs near the devices, or when a
 * guaranteed pod with an affinity got devices the topology annotation does
 * not place; else as ft_state_assume().
 */
int ft_state_assume_dra(ft_state_t *state, const ft_pod_t *pod,
			const char *node_name, ft_policy_t policy,
			const ft_dra_claim_t *const *claims, unsigned n,
			char **out_annotation);

/* Whether node `name` is a DRA node in the current snapshot. */
bool ft_state_node_dra(ft_state_t *state, const char *name);

/*
 * The Binding of an assumed pod was accepted: the assumption now waits only
 * for the watch, and a relist that lacks the pod (deleted meanwhile) drops it.
 * Until then a relist keeps it, since the list may predate the pod.
 */
void ft_state_bind_done(ft_state_t *state, const char *uid);

/*
 * Drop an assumed allocation after a bind that was refused for certain. An
 * assumption whose earlier Binding has an unknown outcome is kept: a
 * refusal now says nothing about that one.
 */
void ft_state_forget(ft_state_t *state, const char *uid);

/*
 * A bind whose outcome is unknown stays assumed, as kube-scheduler's assume
 * cache keeps an assumption until its informer settles it
 * (pkg/scheduler/internal/cache). ft_kube_bind_pod() answered FT_EUNKNOWN
 * for the Binding sent at `sent_ns` (CLOCK_MONOTONIC): a timeout, a reset,
 * a reply cut short or a 5xx, after which the Binding may still be written,
 * even later (etcd slow or frozen). The assumption then holds its units,
 * relists keep it, and a bind of the pod to another node is refused
 * (FT_ECONFLICT) until it is settled:
 * - the watch shows the pod bound (to that node: the normal path; elsewhere:
 *   dropped), finished or deleted; or
 * - ft_state_bind_settle() with what a GET of the pod shows.
 */
void ft_state_bind_unknown(ft_state_t *state, const char *uid,
			   uint64_t sent_ns);

/*
 * The node of pod `uid`'s Binding that is still in flight or of unknown
 * outcome (heap; NULL when none): until that is settled the pod may be
 * bound there and nowhere else, with the units it holds there.
 * *unknown says whether the outcome is unknown (else the bind is running).
 */
char *ft_state_bind_pending(ft_state_t *state, const char *uid, bool *unknown);

/*
 * Settle the Binding of unknown outcome of pod `uid` from a GET of the pod
 * made at `now_ns`. `seen` is the pod it returned, NULL when the GET
 * answered 404 or a pod of another UID. The rule:
 * - bound to the assumed node: the Binding landed; the assumption stays
 *   until the watch shows the pod, as after an accepted Binding;
 * - bound to another node, finished or gone: it never will land; forgotten;
 * - unbound: proof only once `settle_ns` have passed since the Binding was
 *   sent. Until the API server has given up on the request (its
 *   --request-timeout, 60 s by default, after which kube-apiserver cancels
 *   the request's storage calls) the write may still be in flight, and a GET
 *   that shows the pod unbound proves nothing; after it, the pod is
 *   forgotten. What remains: a write already inside etcd that etcd commits
 *   even later (frozen longer than the timeout). The watch then shows the
 *   pod bound with its allocation, the model holds it, and a unit handed
 *   out meanwhile is reported as a conflict.
 * Returns false while the outcome is still unknown; true once settled, or
 * when there is nothing to settle. Logs what it decided.
 */
bool ft_state_bind_settle(ft_state_t *state, const char *uid,
			  const ft_pod_t *seen, uint64_t now_ns,
			  uint64_t settle_ns);

/* A pod by namespace, name and UID (heap strings). */
typedef struct ft_pod_key {
	char *ns;
	char *name;
	char *uid;
} ft_pod_key_t;

/*
 * The pods whose Binding has an unknown outcome, copied into *out (heap,
 * *count entries; free with ft_pod_keys_free). FT_ENOMEM.
 */
int ft_state_unsettled(ft_state_t *state, ft_pod_key_t **out, unsigned *count);
void ft_pod_keys_free(ft_pod_key_t *keys, unsigned count);

/*
 * Make an assumed allocation permanent without a watch (snapshot-file mode):
 * the pod is recorded as bound to its node with that allocation.
 */
void ft_state_confirm(ft_state_t *state, const char *uid);

/*
 * The budgets covering the holdings of `node` (a node of a snapshot from
 * this state), for ft_victims_search(), matched as kube-scheduler matches
 * them (victims.h): holdings whose pod is unknown, has no labels or matches
 * no budget get none, and a budget with an empty or null selector covers
 * no pod. Matches past the view's bounds set out->truncated.
 */
void ft_state_pdb_view(ft_state_t *state, const ft_node_t *node,
		       ft_pdb_view_t *out);

/*
 * The budgets and the gangs of `node`'s holdings for
 * ft_victims_search_gangs(), from the state as it stands: the budgets as
 * ft_state_pdb_view() gives them, with those that the gangs' members on
 * other nodes match; the gangs with their rules (ft_gang_rules) and their
 * running members elsewhere: bound (or assumed) to another node and not
 * finished. A gang past the view's bounds sets gangs->truncated. FT_ENOMEM
 * leaves both views truncated.
 */
void ft_state_victim_views(ft_state_t *state, const ft_node_t *node,
			   ft_pdb_view_t *pdb, ft_gang_view_t *gangs);

/*
 * The gang of the pod `uid` as the victim search reads it, into `out`
 * (gang.h): its source and name, its PodGroup's rules, and its running
 * members. False when the state does not know the pod.
 */
bool ft_state_describe_gang(ft_state_t *state, const char *uid,
			    ft_gang_describe_t *out);

/*
 * A conflict found in the annotations (ft_conflict_t, cluster.h): two pods
 * bound with the same GPU, MIG instance or CPU. pods[0] held the units
 * first (in the node's order), pods[1] claims them again.
 */
typedef struct ft_conflict_note {
	char *node;
	char *
	    units; /* ft_conflict_units_text(): "GPU 5 (GPU-...), CPUs 72-79" */
	ft_pod_key_t pods[2];
} ft_conflict_note_t;

/*
 * The conflicts found since the last call, moved into *out (heap, *count
 * entries, NULL when none; free with ft_conflict_notes_free). Each pair of
 * pods on a node is found once while both stay; it is logged at warn and
 * counted (conflicts_found) when found. Pairs involving an assumed pod are
 * not reported: an assumption is chosen among free units, and its Binding,
 * once the watch shows it, is what could conflict. At most 256 notes wait;
 * more are counted and logged, not queued.
 */
void ft_state_take_conflicts(ft_state_t *state, ft_conflict_note_t **out,
			     unsigned *count);
void ft_conflict_notes_free(ft_conflict_note_t *notes, unsigned count);

/*
 * Put notes that could not be reported back (takes ownership of `notes`,
 * a heap array of `count`), behind those found meanwhile; what does not
 * fit is dropped.
 */
void ft_state_requeue_conflicts(ft_state_t *state, ft_conflict_note_t *notes,
				unsigned count);

/* Counters for readiness and metrics. */
typedef struct ft_state_stats {
	uint64_t generation;
	uint64_t conflicts_found; /* pairs found since start */
	unsigned nodes;
	unsigned nodes_bad_topology;
	unsigned pods;
	unsigned assumed;
	unsigned unsettled; /* assumed, Binding of unknown outcome */
	/* DRA (dra.h): nodes whose GPUs ResourceSlices publish, of them those
	 * whose slices disagree with the topology annotation and those that
	 * also advertise device-plugin GPUs; claims allocated on a node. */
	unsigned dra_nodes;
	unsigned dra_node_errors;
	unsigned dra_double_published;
	unsigned claims_allocated;
} ft_state_stats_t;

void ft_state_stats(ft_state_t *state, ft_state_stats_t *out);

/*
 * The workload mix of fragmentation (frag.h): each pod is counted once, when
 * it is first placed on a node (bound as the watch shows, or assumed by our
 * bind), relists included, so after a start the mix is the running
 * workload. The state starts with window 0 (off); set the window before
 * the first list: setting it empties the mix, and pods counted before are
 * not counted again. ft_state_mix() copies it under the state's lock.
 */
void ft_state_set_mix_window(ft_state_t *state, unsigned window);
void ft_state_mix(ft_state_t *state, ft_mix_t *out);

/*
 * Rank the `n` nodes a pod with demand `d` may go to, as both front ends
 * rank them (the extender's prioritize, the framework plugin's PreScore):
 * ranks[i] = ft_place_rank(nodes[i]) under the state's workload mix weighed
 * over these nodes (ft_mix_weigh), FT_RANK_NONE for a NULL node (not in the
 * model). `policy` is the configured one; the demand's own wins.
 */
void ft_state_rank(ft_state_t *state, int64_t *ranks,
		   const ft_node_t *const *nodes, unsigned n,
		   const ft_demand_t *d, ft_policy_t policy);

/*
 * When the current snapshot was published (or the state created), in
 * CLOCK_MONOTONIC nanoseconds: the cache age of the metrics is now minus it.
 */
uint64_t ft_state_published_ns(ft_state_t *state);

#endif
