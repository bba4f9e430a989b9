/*
 * Filter and prioritize of flextopo-bench (bench_verbs.c): their latency
 * over HTTP for one pod with NodeNames naming every node, and the same work
 * without HTTP, part by part.
 */
#ifndef FLEXTOPO_BENCH_VERBS_H
#define FLEXTOPO_BENCH_VERBS_H

#include "bench_result.h"
#include "bench_run.h"

/* The sizes of bench/README.md's aims, flextopo-bench's default sizes. */
#define TARGET_SMALL_NODES 500u
#define TARGET_LARGE_NODES 5000u

typedef struct bench_verbs bench_verbs_t;

/*
 * The requests of every pod shape for the run's nodes, and the iterations
 * (--iterations, else 2,000 up to 1,000 nodes and 500 above; a tenth more
 * untimed first unless --warmup). -1 with the failure in run->r.
 */
int bench_verbs_new(bench_verbs_t **out, run_t *run);

/*
 * Time filter and prioritize over HTTP, then without it, into run->r's
 * rows. What the benchmark allocates stays until bench_verbs_free, so that
 * the process's memory can be read as the two verbs leave it.
 */
int bench_verbs_measure(bench_verbs_t *verbs, run_t *run);

void bench_verbs_free(bench_verbs_t *verbs);

/* The latency table of the sizes that ran. */
void bench_verbs_print_latency(const result_t *res, unsigned n);

/* Request and reply sizes, connections, and the nodes passing filter. */
void bench_verbs_print_traffic(const result_t *res, unsigned n);

/*
 * The filter+prioritize aim line of one size, when it is a size the aims
 * name (nothing otherwise, or when it failed).
 */
void bench_verbs_print_aim(const result_t *r);

#endif
