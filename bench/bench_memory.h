/*
 * Model memory of flextopo-bench (bench_memory.c): loading the synthetic
 * cluster into the run's app and what the model and the process then take.
 */
#ifndef FLEXTOPO_BENCH_MEMORY_H
#define FLEXTOPO_BENCH_MEMORY_H

#include "bench_result.h"
#include "bench_run.h"

/*
 * Build the cluster of run->n nodes and load it: objects applied one by
 * one between ft_state_replace_begin and _end, or with --via-file a List
 * written to a temporary file and read by ft_app_load_snapshot(). Fails
 * unless every node and pod is in and every pod holds, without conflicts,
 * what it was given. Sets the load time, the fill, the model bytes per node
 * and the VmRSS growth per node in run->r.
 */
int bench_memory_load(run_t *run);

/* VmRSS and VmHWM of the process now, into `r`. */
void bench_memory_sample(result_t *r);

/* The memory table of the sizes that ran. */
void bench_memory_print(const result_t *res, unsigned n);

/* The model-bytes aim line of one size (nothing when it failed). */
void bench_memory_print_aim(const result_t *r);

#endif
