/*
 * The debug views (codec stage): JSON for the debug API and an SVG picture of
 * one node. Pure functions of the model, the decision records and a
 * placement or victim search already made; api/openapi.yaml describes each
 * shape (components DebugNodeRow, DebugNode, DebugPod, Explain, Decisions).
 *
 * Every writer returns 0 with *out a NUL-terminated heap string the caller
 * frees, or FT_ENOMEM with *out NULL. GPUs and NUMA nodes are named by the
 * hardware's numbers (nvidia-smi index, NUMA id), never by model positions.
 */
#ifndef FLEXTOPO_DEBUGVIEW_H
#define FLEXTOPO_DEBUGVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "codec.h"
#include "decision.h"
#include "frag.h"
#include "place.h"
#include "victims.h"

/*
 * GET /debug/nodes: {"generation":G,"workloadMix":{...},"nodes":[row...]},
 * one row per node: GPUs, MIG instances, CPUs and memory total/used/free,
 * per affinity level the largest free block in one domain, the annotation
 * error, and "fragmentation" (ft_frag_measure() under `mix`, frag.h:
 * capacities in GPUs, slices and replicas in units). workloadMix lists the
 * classes of `mix` with their pods. `mix` may be NULL (no mix).
 */
int ft_codec_debug_nodes(char **out, const ft_snapshot_t *snap,
			 const ft_mix_t *mix);

/*
 * GET /debug/conflicts: {"generation":G,"conflictPods":P,"conflictsFound":F,
 * "conflicts":[...]}: one entry per pair of pods whose units overlap
 * (ft_conflict_t, cluster.h), with the node, the units as text and as GPU
 * indexes, MIG instances and a cpulist, and the two pods (namespace, name,
 * uid, priority, assumed), the one that held the units first first.
 * conflictPods counts the pods in some pair; `found` (conflictsFound) is the
 * count of pairs found since start (ft_state_stats_t.conflicts_found).
 */
int ft_codec_debug_conflicts(char **out, const ft_snapshot_t *snap,
			     uint64_t found);

/*
 * GET /debug/nodes/{name}: the node's FlexTopo tree (sockets, NUMA nodes,
 * PCIe switches, GPUs, MIG instances, NVLinks, affinity domains) with the pod
 * holding each unit, and the list of what each pod holds. A shared GPU also
 * has "replicas", "replicasUsed" and "replicasHeldBy" (each pod with the
 * "count" it holds). A holding of observed units (ft_holding_t.observed)
 * has "observedSource" ("nri" | "podresources", else null); a drifted one
 * "drifted": true and "drift": {"expected", "actual"}, each with GPU
 * indexes, MIG instances, replicas, a cpulist and the count of units the
 * topology lacks ("unknown").
 * What the topology does not know (topology.h) is shown as unknown: the
 * "memoryMiB" and "freeMemoryMiB" of a NUMA node of unknown memory are null
 * (so are the row's memory "total" and "free" when any NUMA node's memory is
 * unknown); GPUs of unknown NUMA node are listed in their socket's "gpus",
 * or, with the socket unknown too, in the node's "unplacedGpus" (each only
 * when not empty), and in no NUMA node.
 */
int ft_codec_debug_node(char **out, const ft_node_t *node, const ft_mix_t *mix);

/*
 * GET /debug/nodes/{name}?format=svg: a self-contained SVG 1.1 document
 * (no scripts, no external references). Sockets hold NUMA nodes; a NUMA node
 * shows its cores as a grid and its PCIe switches with their GPUs; NVLinks
 * are lines between GPUs (thicker for more links); MIG-enabled GPUs show
 * their 8 memory slices with each instance drawn over its slices; shared
 * GPUs show a bar of their replicas, each pod's share in its colour, under
 * "7/10 replicas". A held unit is filled with its pod's colour: the hue
 * tells pods apart, the depth gives its priority (higher priority is
 * darker), and a legend lists each pod with its priority. Deterministic:
 * the same node gives the same bytes.
 */
int ft_codec_node_svg(char **out, const ft_node_t *node);

/* GET /debug/decisions: {"capacity":C,"total":T,"decisions":[...]}. */
int ft_codec_debug_decisions(char **out, const ft_decision_t *d, unsigned n,
			     unsigned capacity, uint64_t total);

/* What GET /debug/pods/{namespace}/{name} shows; everything borrowed. */
typedef struct ft_debug_pod {
	const char *ns;
	const char *name;
	const char *uid;		/* NULL when unknown */
	const ft_pod_t *pod;		/* as the state has it, or NULL */
	const ft_gang_describe_t *gang; /* its gang, or NULL (gang.h) */
	const ft_node_t *node;		/* node of `holding`, or NULL */
	const ft_holding_t *holding;	/* what it holds there, or NULL */
	const ft_decision_t *decisions;
	unsigned n_decisions;
} ft_debug_pod_t;

/*
 * {"namespace","name","uid","state","holding","decisions"}. "state" is the
 * pod as the state has it, with its observed annotation ("observed": the
 * uuids and cpuset flextopo-node reported, its "node", "source" and
 * "held": whether it is for the pod's node), "observedError", and
 * "drifted" with "drift": {"expected", "actual"} as the annotations name
 * the units (ft_pod_drifted, cluster.h), and "gang": its source, name,
 * PodGroup rules and running members, or null.
 */
int ft_codec_debug_pod(char **out, const ft_debug_pod_t *view);

/* One node of POST /debug/explain, as the caller computed it. */
typedef struct ft_explain_node {
	const ft_node_t *node; /* borrowed from the snapshot */
	ft_verdict_t verdict;  /* ft_place_filter() */
	int score;    /* ft_scores_of_ranks() over the nodes explained: what
			 prioritize gives when they are its candidates */
	int64_t rank; /* ft_place_rank() */
	bool placed;  /* ft_place_choose() gave `placement` */
	ft_placement_t placement;
	char choose_error[192]; /* why not, when the verdict fit but not */
	bool searched;		/* ft_victims_search() ran: `victims` */
	ft_victim_set_t victims;
	bool weighed;		  /* ft_frag_delta() ran: `frag_delta_milli` */
	int64_t frag_delta_milli; /* ft_frag_delta(): change of the node's
				     fragmentation, plus what is taken from
				     scarce bound classes (GPU models,
				     node labels) */
	bool listed; /* ft_place_check_units() ran: `units`, written as
			"units" (the pod asks capabilities of its GPUs or
			MIG instances, MIG instances, or shared-GPU ranks) */
	unsigned n_units;
	ft_unit_check_t units[FT_UNITS_MAX];
} ft_explain_node_t;

/*
 * The body of POST /debug/explain: a v1 Pod, or {"Pod": <v1 Pod>}. A
 * missing metadata.uid becomes "explain" and a missing namespace "default",
 * so that a pod spec written by hand is enough. FT_EINVAL with a message.
 */
int ft_codec_explain_pod_decode(ft_pod_t *out, const char *body, size_t len,
				const ft_codec_options_t *opts);

/*
 * {"pod":...,"generation":G,"workloadMix":...,"nodes":[...]}: the mix as
 * weighed for this pod (ft_mix_weigh over the nodes filter passes), its
 * classes' requests with their weights. A node with `listed` gets
 * "units": per unit its kind ("gpu", "mig", "shared"), GPU index, uuid (the
 * instance's for MIG), MIG profile, replicas and replicasFree (shared),
 * free, matches, and "failures": per failed capability its name, the
 * asked and actual values (MiB, precision names, "nvlink"/"pcie", GPUs)
 * and the reason filter gives (ft_place_unit_fault).
 */
int ft_codec_debug_explain(char **out, const ft_pod_t *pod, uint64_t generation,
			   const ft_mix_t *mix, const ft_explain_node_t *nodes,
			   unsigned n);

#endif
