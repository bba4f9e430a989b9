/*
 * Metrics of the extender in the Prometheus text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/), served as
 * GET /metrics on the extender listener and on the debug listener.
 *
 * Counters and histograms that the verbs feed live here as atomics, so that
 * counting costs the scheduler's path a few relaxed atomic adds and no lock.
 * Values owned elsewhere (the state's node and pod counts, informer restarts,
 * the decision log) are sampled by the caller at scrape time and passed in
 * as ft_metrics_gauges_t. HTTP errors by kind come from ft_http_error_count()
 * (server.h), process-wide over both listeners.
 *
 * Families (all prefixed flextopo_):
 *   requests_total{verb}                    counter
 *   request_duration_seconds{verb}          histogram, seconds
 *   http_errors_total{kind}                 counter: the kinds server.h
 *                                           counts (the debug API's
 *                                           bad_request counts as other)
 *   http_connections_closed_total{reason}   counter: the extender
 *                                           listener's connections closed
 *                                           at maxConnectionsPerClient:
 *                                           idle_at_cap | refused_at_cap
 *                                           (ft_server_connections_closed,
 *                                           server.h)
 *   preemption_nodes_total{mode,outcome}    counter: candidate nodes kept
 *                                           with victims we chose
 *                                           (outcome="victims"), kept with
 *                                           the scheduler's ("passed"), or
 *                                           dropped ("dropped")
 *   preemption_victims_total{mode}          counter
 *   victim_searches_total{result}           counter: node searches of the
 *                                           preempt verb by whether the
 *                                           set is the cheapest ("exact")
 *                                           or why not (victims.h,
 *                                           ft_victim_fallback_name)
 *   binds_total{result}                     counter: bound | failed |
 *                                           unknown (the Binding's
 *                                           answer never came; its
 *                                           units stay held)
 *   bind_affinity_level_total{level}        counter: level reached at bind
 *   nodes, nodes_bad_topology, pods, assumed_pods, snapshot_generation,
 *   cache_age_seconds, ready                gauges
 *   binds_unsettled                         gauge: assumed pods whose
 *                                           Binding's outcome is unknown
 *   informer_restarts_total{resource}       counter
 *   dra_nodes, dra_node_errors, dra_double_published_nodes,
 *   resource_claims_allocated               gauges (dra.h)
 *   dra_preemption_refused_total            counter: DRA nodes dropped by
 *                                           preempt for a GPU shortage
 *   preemption_gang_pods_disrupted_total    counter: running members of
 *                                           the gangs the answered
 *                                           victims break
 *   decision_log_records, decision_log_capacity, decision_log_bytes gauges
 *   decisions_total                         counter
 *   gpu_capacity_free, gpu_fragmentation    gauges, GPUs over all nodes:
 *                                           free capacity and the part of
 *                                           it the workload mix could not
 *                                           use (FGD, frag.h)
 *   gpus_whole_free, mig_slices_stranded,   gauges over all nodes
 *   workload_mix_pods                       gauge: pods in the mix
 *   conflict_pods                           gauge: pods of the snapshot in
 *                                           an allocation conflict (two
 *                                           pods' annotations claim one
 *                                           GPU, MIG instance or CPU)
 *   conflicts_found_total                   counter: such pairs found
 *   drift_pods                              gauge: pods of the snapshot
 *                                           whose observed units
 *                                           (flextopo.io/observed, written
 *                                           by flextopo-node) differ from
 *                                           their allocation
 *   build_info{version,commit}              gauge, always 1
 */
#ifndef FLEXTOPO_METRICS_H
#define FLEXTOPO_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "decisions.h"
#include "topology.h"
#include "victims.h"

/* Upper bounds of the latency buckets, in seconds (+Inf is implied). */
#define FT_METRICS_BUCKETS 15

typedef struct ft_metrics ft_metrics_t;

int ft_metrics_new(ft_metrics_t **out);
/* NULL is fine. */
void ft_metrics_free(ft_metrics_t *m);

/*
 * Every recording function accepts a NULL `m` and then does nothing, so that
 * handlers run unchanged in tests that build no metrics.
 */

/* One answered request of `verb` that took `nanoseconds`. */
void ft_metrics_request(ft_metrics_t *m, ft_verb_t verb, uint64_t nanoseconds);

typedef enum {
	FT_PREEMPT_VICTIMS = 0, /* kept, with the victims flextopo chose */
	FT_PREEMPT_PASSED = 1,	/* kept, with the scheduler's victims */
	FT_PREEMPT_DROPPED = 2, /* no set of victims works */
	FT_PREEMPT_OUTCOMES = 3,
} ft_preempt_outcome_t;

/*
 * One preempt request of a preemptor in `mode`: its candidate nodes by
 * outcome (`nodes[o]` for outcome o) and the victims named in the reply.
 */
void ft_metrics_preempt(ft_metrics_t *m, ft_affinity_mode_t mode,
			const unsigned nodes[FT_PREEMPT_OUTCOMES],
			unsigned victims);

/* A DRA node dropped by preempt for a GPU shortage (preempt.c). */
void ft_metrics_dra_preemption_refused(ft_metrics_t *m);

/*
 * The running members of the gangs that one node's answered victims break
 * (preempt.c).
 */
void ft_metrics_gang_pods_disrupted(ft_metrics_t *m, unsigned pods);

/* One victim search of the preempt verb, by its fallback (victims.h). */
void ft_metrics_victim_search(ft_metrics_t *m, ft_victim_fallback_t fallback);

typedef enum {
	FT_BIND_BOUND = 0,
	FT_BIND_FAILED = 1,
	FT_BIND_UNKNOWN = 2, /* the Binding's outcome is unknown */
	FT_BIND_RESULTS = 3,
} ft_bind_result_t;

/*
 * One bind and its result; `level` the affinity level the placement
 * reached, FT_LEVEL_COUNT when the pod holds no devices (read only when
 * bound).
 */
void ft_metrics_bind(ft_metrics_t *m, ft_bind_result_t result,
		     ft_level_t level);

/* What the caller samples at scrape time. */
typedef struct ft_metrics_gauges {
	const char *version;
	const char *commit;
	bool ready;
	unsigned nodes;
	unsigned nodes_bad_topology; /* topology annotation missing or bad */
	unsigned pods;
	unsigned assumed;
	unsigned unsettled; /* assumed, Binding of unknown outcome */
	uint64_t generation;
	double cache_age_seconds;    /* since the last snapshot publish */
	unsigned long node_restarts; /* watch restarts of the node informer */
	unsigned long pod_restarts;
	unsigned long pdb_restarts; /* PodDisruptionBudget informer */
	/* resource.k8s.io informers (0 when dra is off) */
	unsigned long slice_restarts, claim_restarts, class_restarts;
	/* ft_state_stats_t's DRA counts */
	unsigned dra_nodes, dra_node_errors, dra_double_published;
	unsigned claims_allocated;
	unsigned decisions;	     /* records held */
	unsigned decisions_capacity; /* decisionLogSize */
	size_t decisions_bytes;	     /* ft_decisions_footprint() */
	uint64_t decisions_total;
	/* Sums of ft_frag_measure() over the nodes (frag.h). */
	uint64_t gpu_free_milli;
	uint64_t gpu_fragmentation_milli;
	unsigned long gpus_whole_free;
	unsigned long mig_slices_stranded;
	unsigned mix_pods; /* pods in the workload mix */
	/* ft_server_connections_closed() of the extender listener */
	unsigned long conns_closed_idle, conns_refused;
	unsigned drift_pods;	  /* holdings of the snapshot with `expected`
				     (ft_pod_drifted, cluster.h) */
	unsigned conflict_pods;	  /* holdings in_conflict (cluster.h) */
	uint64_t conflicts_found; /* ft_state_stats_t.conflicts_found */
} ft_metrics_gauges_t;

/* The exposition text (heap, caller frees). FT_ENOMEM. */
int ft_metrics_render(char **out, ft_metrics_t *m,
		      const ft_metrics_gauges_t *g);

/* The Content-Type of the exposition text. */
#define FT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
