/*
 * The DRA arm of flextopo-bench (bench_dra.c): what a watch event costs the
 * state, from the apply to the published snapshot, for a Pod on a
 * device-plugin node (the cost before DRA), a Pod on a DRA node, a
 * ResourceClaim whose reservedFor or allocation changes, and a
 * ResourceSlice republished as it was or with a new pool generation, on a
 * cluster where half of the nodes
 * are DRA nodes (api/examples/a100-8x.json, their GPUs in slices shaped as
 * NVIDIA's driver publishes them, test/fixtures/dra/).
 */
#ifndef FLEXTOPO_BENCH_DRA_H
#define FLEXTOPO_BENCH_DRA_H

#include "bench_options.h"
#include "bench_result.h"

#define DRA_ROUNDS	   5
#define DRA_EVENTS_DEFAULT 2000u
/* A pod on a device-plugin node and on a DRA node, a claim's reservedFor
 * and its allocation changing, a slice unchanged and of a new generation */
#define DRA_KINDS 6

typedef struct dra_result {
	result_t r; /* its error */
	unsigned nodes, events;
	/* Per kind: the rounds' mean microseconds per event, and the pooled
	 * percentiles of every event. */
	double round_mean[DRA_KINDS][DRA_ROUNDS];
	row_t t[DRA_KINDS];
} dra_result_t;

/* `o->dra_events` events of each kind per round, DRA_ROUNDS rounds, on a
 * cluster of `nodes`. -1 with the failure in out->r. */
int bench_dra_run(dra_result_t *out, const bench_options_t *o, unsigned nodes);

/* The table: per kind mean +- sd over the rounds, p50, p99, and the ratio
 * of each mean to the device-plugin pod event's. */
void bench_dra_print(const dra_result_t *res, unsigned n);

#endif
