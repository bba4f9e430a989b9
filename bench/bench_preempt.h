/*
 * Preempt of flextopo-bench (bench_preempt.c): the latency of the preempt
 * verb over HTTP for every node a candidate, the replies checked, and the
 * same work without HTTP.
 */
#ifndef FLEXTOPO_BENCH_PREEMPT_H
#define FLEXTOPO_BENCH_PREEMPT_H

#include "bench_options.h"
#include "bench_result.h"
#include "bench_run.h"

/* Requests timed per size unless --preempt-iterations. */
#define PREEMPT_ITERATIONS_SMALL 200u
#define PREEMPT_ITERATIONS_LARGE 40u

/*
 * Time /preempt over HTTP, then without it, into run->r's preempt rows
 * and statistics (--preempt-iterations, else PREEMPT_ITERATIONS_SMALL up
 * to 1,000 nodes and PREEMPT_ITERATIONS_LARGE above; 0: nothing). Each
 * phase stops at the end of a round of preemptors after 60 s. -1 with the
 * failure in run->r.
 */
int bench_preempt_run(run_t *run);

/* The preempt tables of the sizes that ran it. */
void bench_preempt_print(const bench_options_t *o, const result_t *res,
			 unsigned n);

/* The preempt aim line of one size, when it is the size the aim names. */
void bench_preempt_print_aim(const result_t *r);

#endif
