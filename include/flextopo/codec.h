/*
 * Wire codecs: the only users of cJSON. JSON in (scheduler extender requests,
 * Kubernetes Node and Pod objects, our annotations) becomes the plain structs
 * of topology.h and cluster.h; replies and annotations go back out as JSON.
 *
 * Extender wire types are k8s.io/kube-scheduler/extender/v1 (types.go): Go
 * field names as keys (capitalised), decoded case-insensitively, unknown keys
 * ignored, unused fields written as null.
 *
 * Every decoder reports bad input as FT_EINVAL with a message naming where
 * ("annotation flextopo.io/topology: sockets[0].numaNodes[1].cpus: ...").
 */
#ifndef FLEXTOPO_CODEC_H
#define FLEXTOPO_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "arena.h"
#include "cluster.h"
#include "dra.h"
#include "mig.h"
#include "pdb.h"
#include "place.h"
#include "policy.h"
#include "topology.h"

int ft_codec_mig_catalog_builtin(ft_mig_catalog_t *out);

typedef struct ft_codec_options {
	const char *annotation_prefix;	 /* "flextopo.io" */
	const char *gpu_resource;	 /* "nvidia.com/gpu" */
	const char *mig_resource_prefix; /* "nvidia.com/mig-" */
	ft_affinity_mode_t default_mode; /* when affinity-mode is absent */
	const ft_mig_catalog_t
	    *mig_catalog;	/* MIG layouts checked; may be NULL */
	const char *dra_driver; /* "gpu.nvidia.com" (dra.h) */
	/*
	 * Label keys read as all-or-nothing gangs (gang.h, FT_GANG_LABEL),
	 * in order; borrowed, NULL or n_gang_label_keys 0 for none.
	 */
	const char *const *gang_label_keys;
	unsigned n_gang_label_keys;
} ft_codec_options_t;

/*
 * Parse a topology annotation: our schema (api/topology.schema.json) or the
 * FlexTopo graph of the paper's authors ({"nodes":[...],"edges":[...]},
 * optionally inside "spec"). *out is a finished topology with refcount 1.
 * What a graph leaves out stays unknown (topology.h): NUMA memory without a
 * memory attribute, and the NUMA node (and socket) of a GPU without an edge
 * from a NUMANode (or a Socket).
 */
int ft_codec_topology_parse(ft_topology_t **out, const char *json, size_t len);

/*
 * Parse a Kubernetes quantity ("500m", "2", "1.5Gi", "1e3") and return it
 * scaled: ft_quantity_milli gives thousandths (CPU millicores), ft_quantity_mib
 * gives MiB rounded up (memory). FT_EINVAL for bad text or overflow.
 */
int ft_quantity_milli(int64_t *out, const char *text);
int ft_quantity_mib(uint64_t *out, const char *text);

/*
 * The capability annotation (flextopo.io/requires): a JSON object with the
 * optional keys memoryPerGpu (a Kubernetes quantity), precision (names as
 * ft_precision_parse reads them; "precisionSupport" is read the same),
 * interconnect ("nvlink" | "pcie") and nvlinkDomainSize (an integer from 1).
 * FT_EINVAL naming the key; an unknown key is an error.
 */
int ft_codec_requires_decode(ft_caps_t *out, const char *json);

/*
 * Decode a v1 Pod. Demand, allocation and observed annotation errors do not
 * fail the decode: they are recorded in demand_error / allocation_error /
 * observed_error ("annotation flextopo.io/observed: gpus[1]: empty uuid").
 * FT_EINVAL only when the object is not a pod (no metadata.name or uid),
 * FT_ENOMEM.
 */
int ft_codec_pod_decode(ft_pod_t *out, const cJSON *pod,
			const ft_codec_options_t *opts);

/*
 * Decode a policy/v1 PodDisruptionBudget. A missing selector matches no pod
 * (as policy/v1 does for a null selector). FT_EINVAL naming the field.
 */
int ft_codec_pdb_decode(ft_pdb_t *out, const cJSON *pdb);

/*
 * Decode a PodGroup of the Workload API (apiVersion scheduling.k8s.io/...)
 * or of coscheduling (scheduling.x-k8s.io/...), told apart by apiVersion
 * (gang.h). FT_EINVAL naming the object and the field: no metadata.name, an
 * unknown apiVersion, no gang minimum (Workload API: neither
 * spec.schedulingPolicy.gang.minCount nor spec.schedulingPolicy.basic;
 * coscheduling: no spec.minMember), a negative one, or a disruptionMode
 * other than Pod and PodGroup. FT_ENOMEM.
 */
int ft_codec_pod_group_decode(ft_pod_group_t *out, const cJSON *group);

/*
 * Decode a resource.k8s.io/v1 ResourceSlice or ResourceClaim (dra.h).
 * FT_EINVAL naming the object and field ("resourceslice x:
 * spec.devices[1].attributes.uuid: want a string"), FT_ENOMEM.
 */
int ft_codec_dra_slice_decode(ft_dra_slice_t *out, const cJSON *obj);
int ft_codec_dra_claim_decode(ft_dra_claim_t *out, const cJSON *obj);
/*
 * Decode a DeviceClass, its kind read for driver `driver`
 * (ft_dra_class_kind). FT_EINVAL without a name, FT_ENOMEM.
 */
int ft_codec_dra_class_decode(ft_dra_class_t *out, const cJSON *obj,
			      const char *driver);

/*
 * A mutating admission request (admission.k8s.io/v1 AdmissionReview, as
 * kube-apiserver sends it to a webhook): the request uid the reply must
 * echo, the object's kind, namespace and operation, and the object. The
 * strings and the object are borrowed from `root`, which
 * ft_admission_dispose() frees.
 */
typedef struct ft_admission {
	cJSON *root;
	const char *uid;
	const char *kind;      /* request.kind.kind, e.g. "ResourceClaim" */
	const char *ns;	       /* request.namespace; NULL when absent */
	const char *operation; /* "CREATE", ...; NULL when absent */
	const cJSON *object;   /* request.object */
} ft_admission_t;

/* FT_EINVAL when the body is no AdmissionReview with a request. */
int ft_codec_admission_decode(ft_admission_t *out, const char *body,
			      size_t len);
void ft_admission_dispose(ft_admission_t *a);

/*
 * A JSONPatch (RFC 6902) that adds, to the device claim `devices`
 * (resource/v1 DeviceClaim: spec.devices of a ResourceClaim,
 * spec.spec.devices of a ResourceClaimTemplate; `path` is its JSON pointer,
 * "/spec/devices"), one constraint with matchAttribute `attribute` over its
 * requests whose device class is one of `classes` (n of them; a
 * firstAvailable request when all its subrequests are). Requests a
 * constraint on `attribute` already covers are left out. *out is NULL
 * when no request is left. FT_ENOMEM.
 */
int ft_codec_claim_constraint_patch(char **out, const cJSON *devices,
				    const char *path, const char *attribute,
				    const char *const *classes,
				    unsigned n_classes);

/*
 * The AdmissionReview reply: allowed, with `patch` (a JSONPatch; NULL:
 * none) base64-encoded as the API asks, and `warning` (NULL: none) shown
 * to the client. FT_ENOMEM.
 */
int ft_codec_admission_reply(char **out, const char *uid, const char *patch,
			     const char *warning);

/*
 * The webhook's answer to review `a` (docs/dra.md, "Alignment DRA can
 * enforce"): on CREATE of a ResourceClaim or a ResourceClaimTemplate that
 * carries the affinity annotations (opts' prefix + "/affinity" and
 * "/affinity-mode", on the object or, for a template, on the claims it
 * makes: spec.metadata), in guaranteed mode, a constraint with
 * matchAttribute resource.kubernetes.io/numaNode (affinity numa) or
 * resource.kubernetes.io/pcieRoot (pcie-switch) over its requests of
 * `classes` (the GPU and MIG DeviceClasses). Everything else is allowed
 * unchanged, with a warning where the affinity cannot be expressed:
 * nvlink (no standard attribute), a claim kube-scheduler made for extended
 * resources (allocated before it is created), a bad annotation. Always
 * allowed: the webhook adds constraints, it never refuses a claim. *out is
 * the whole AdmissionReview reply. FT_ENOMEM.
 */
int ft_codec_admission_mutate(char **out, const ft_admission_t *a,
			      const ft_codec_options_t *opts,
			      const char *const *classes, unsigned n_classes);

/*
 * The annotation JSON of `t` (api/topology.schema.json, version 1; compact,
 * no whitespace): sockets -> numaNodes -> pcieSwitches / gpus, every NVLink
 * listed on both ends, "mig" for MIG-enabled GPUs, "reserved" when the
 * topology has reserved CPUs or GPUs. ft_codec_topology_parse() of the text
 * gives back an equal model. *out is a heap string the caller frees with
 * free(). FT_ENOMEM; FT_EINVAL for a model the schema cannot express: a GPU
 * of unknown NUMA node or a NUMA node of unknown memory (topology.h), which
 * only the authors' FlexTopo graph gives.
 */
int ft_codec_topology_encode(char **out, const ft_topology_t *t);

/*
 * The JSON merge patch (RFC 7386) that sets one annotation on an object:
 * {"metadata":{"annotations":{key: value}}}. *out is a heap string the
 * caller frees with free(). FT_ENOMEM.
 */
int ft_codec_annotation_patch_encode(char **out, const char *key,
				     const char *value);

/*
 * A decoded v1 Node: name, the topology or why there is none, and its
 * labels and NoSchedule/NoExecute taints (noderules.h).
 */
typedef struct ft_node_source {
	char *name;
	char *topology_text;	  /* raw annotation, NULL when missing */
	ft_topology_t *topology;  /* NULL when missing or invalid */
	char *topology_error;	  /* set when topology is NULL */
	ft_node_labels_t *labels; /* a reference; never NULL once decoded */
	uint64_t gpu_allocatable; /* status.allocatable of the GPU resource
				     (the device plugin's); 0 when absent */
} ft_node_source_t;

/*
 * Decode a v1 Node. When `previous` is not NULL and its annotation text is
 * identical, its topology is shared instead of parsed again.
 */
int ft_codec_node_decode(ft_node_source_t *out, const cJSON *node,
			 const ft_codec_options_t *opts,
			 const ft_node_source_t *previous);
void ft_node_source_dispose(ft_node_source_t *src);

/*
 * A pod's nodeSelector, required node affinity and tolerations from its v1
 * spec (noderules.h). Never fails: what the rules cannot hold (or what is
 * malformed; kube-apiserver validates pods) widens them.
 */
void ft_codec_node_rules_decode(ft_node_rules_t *out, const cJSON *spec);

/*
 * A v1 Node's metadata.labels and its spec.taints of effect NoSchedule or
 * NoExecute, in a new set with one reference (`*out`). Entries that are not
 * strings are skipped. FT_ENOMEM, with `*out` NULL.
 */
int ft_codec_node_labels_decode(ft_node_labels_t **out, const cJSON *node);

/* The allocation annotation of a placement (api/allocation.schema.json). */
int ft_codec_allocation_encode(char **out, const ft_placement_t *p,
			       const ft_node_t *node, ft_affinity_mode_t mode);

/*
 * The same with the "dra" key naming the `n` devices DRA allocated
 * (`refs`; NULL: no key): their GPUs and MIG devices must be those of `p`.
 */
int ft_codec_allocation_encode_dra(char **out, const ft_placement_t *p,
				   const ft_node_t *node,
				   ft_affinity_mode_t mode,
				   const ft_dra_device_ref_t *refs, unsigned n);
int ft_codec_allocation_decode(ft_allocation_t *out, const char *json);
/* The decoded allocation equivalent of a placement (for assumed pods). */
int ft_codec_allocation_from_placement(ft_allocation_t *out,
				       const ft_placement_t *p,
				       const ft_node_t *node,
				       ft_affinity_mode_t mode);

/*
 * The observed annotation (flextopo.io/observed, api/observed.schema.json),
 * written by the node agent flextopo-node (node/alloc, Observed).
 * Checked as that package's ParseObserved checks it: the keys version,
 * node, source, gpus, mig and cpuset are required; version is 1; node is
 * not empty; source is "nri" or "podresources"; uuids are non-empty strings,
 * each listed once; replica counts are integers 1-100; cpusets are cpulists
 * ("" is the shared pool). Each entry of "containers" is checked the same
 * way and then dropped: the pod-level lists are the union. Unknown keys are
 * ignored. Lists are bounded by what one pod of the model holds
 * (FT_GPU_MAX GPUs and shared GPUs, FT_ALLOC_MIG_MAX MIG devices, CPU ids
 * below FT_CPU_MAX), which the schema's 64 may exceed. FT_EINVAL with a
 * message naming the key ("replicas[0].count: 0 is outside 1-100"), the
 * golden cases being test/fixtures/observed; FT_ENOMEM.
 */
int ft_codec_observed_decode(ft_observed_t *out, const char *json);

/* ExtenderArgs (filter, prioritize) and ExtenderPreemptionArgs' Pod. */
typedef struct ft_extender_args {
	ft_arena_t arena;	 /* holds the parsed tree */
	cJSON *root;		 /* lives in arena: the body, or just the Pod */
	const cJSON *pod;	 /* "Pod" */
	bool node_cache_capable; /* NodeNames was given (else Nodes.items) */
	unsigned n_nodes;
	const char **node_names;    /* n_nodes names */
	const cJSON **node_objects; /* n_nodes Node objects, or NULL */
} ft_extender_args_t;

/*
 * FT_EINVAL "bad_json: ..." for malformed JSON or a wrong shape. The usual
 * body (a Pod and NodeNames of plain strings) is scanned without building
 * a cJSON node per name; any other is parsed whole, as
 * ft_codec_extender_args_decode_tree() does, with the same result.
 */
int ft_codec_extender_args_decode(ft_extender_args_t *out, const char *body,
				  size_t len);
/*
 * The same from one cJSON parse of the whole body: what the fast path is
 * held to by the tests and the fuzz target. `root` is then the body's
 * object; after the fast path it is the Pod.
 */
int ft_codec_extender_args_decode_tree(ft_extender_args_t *out,
				       const char *body, size_t len);
void ft_codec_extender_args_dispose(ft_extender_args_t *args);

/* One node of ExtenderPreemptionArgs: the victims kube-scheduler proposed. */
typedef struct ft_preempt_node {
	const char *name;
	unsigned n_victims;
	const char **victim_uids; /* borrowed from the args' root */
	unsigned pdb_violations;  /* NumPDBViolations */
} ft_preempt_node_t;

/*
 * ExtenderPreemptionArgs: Pod plus NodeNameToMetaVictims (victims by UID,
 * nodeCacheCapable) or NodeNameToVictims (full victim Pods).
 */
typedef struct ft_preempt_args {
	cJSON *root;
	const cJSON *pod;
	unsigned n_nodes;
	ft_preempt_node_t *nodes;
} ft_preempt_args_t;

int ft_codec_preempt_args_decode(ft_preempt_args_t *out, const char *body,
				 size_t len);
void ft_codec_preempt_args_dispose(ft_preempt_args_t *args);

/* ExtenderPreemptionResult, built node by node (victims by UID). */
typedef struct ft_preempt_reply ft_preempt_reply_t;

int ft_codec_preempt_reply_new(ft_preempt_reply_t **out);
int ft_codec_preempt_reply_node(ft_preempt_reply_t *r, const char *node,
				const char *const *uids, unsigned n,
				unsigned pdb_violations);
/* Take node `node` out of the reply again (no-op when absent). */
void ft_codec_preempt_reply_drop(ft_preempt_reply_t *r, const char *node);
/* Print and free; *out is a heap string. */
int ft_codec_preempt_reply_finish(char **out, ft_preempt_reply_t *r);
void ft_codec_preempt_reply_free(ft_preempt_reply_t *r);

/* ExtenderBindingArgs. Owns its strings. */
typedef struct ft_bind_args {
	char *pod_name;
	char *pod_namespace;
	char *pod_uid;
	char *node;
} ft_bind_args_t;

int ft_codec_bind_args_decode(ft_bind_args_t *out, const char *body,
			      size_t len);
void ft_codec_bind_args_dispose(ft_bind_args_t *args);

/* ExtenderFilterResult, built node by node. */
typedef struct ft_filter_reply ft_filter_reply_t;

int ft_codec_filter_reply_new(ft_filter_reply_t **out,
			      const ft_extender_args_t *args);
/* Node i of the args passes. */
int ft_codec_filter_reply_pass(ft_filter_reply_t *r, unsigned i);
/* Node i fails; unresolvable ones go to FailedAndUnresolvableNodes. */
int ft_codec_filter_reply_fail(ft_filter_reply_t *r, unsigned i,
			       const char *reason, bool unresolvable);
int ft_codec_filter_reply_error(ft_filter_reply_t *r, const char *error);
/* Print and free; *out is a heap string. */
int ft_codec_filter_reply_finish(char **out, ft_filter_reply_t *r);
void ft_codec_filter_reply_free(ft_filter_reply_t *r);

/* HostPriorityList: `scores[i]` for node i of the args. */
int ft_codec_priorities_encode(char **out, const ft_extender_args_t *args,
			       const int *scores);

/* ExtenderBindingResult {"Error": error or ""}. */
int ft_codec_bind_result_encode(char **out, const char *error);

#endif
