/*
 * The victim search alone of flextopo-bench (bench_victims.c):
 * ft_victims_search timed without HTTP on packed 8-GPU nodes of each server
 * kind and layout, for each preemptor.
 */
#ifndef FLEXTOPO_BENCH_VICTIMS_H
#define FLEXTOPO_BENCH_VICTIMS_H

#include <flextopo/place.h>

#include "bench_options.h"
#include "bench_result.h"
#include "synth.h"

/* MICRO_VARIANTS nodes of each of MICRO_KINDS server kinds and
 * MICRO_LAYOUTS layouts (pods per node and priorities); per node kind,
 * layout and preemptor MICRO_ITERATIONS searches unless
 * --victim-iterations, for at most MICRO_SECONDS_MAX seconds. */
#define MICRO_KINDS	  3
#define MICRO_LAYOUTS	  7
#define MICRO_VARIANTS	  8
#define MICRO_ITERATIONS  2000u
#define MICRO_SECONDS_MAX 2.0

/* One node kind and preemptor: ft_victims_search over the variants. */
typedef struct micro_row {
	const char *kind, *prio, *shape;
	unsigned pods;			     /* per node */
	row_t t;			     /* microseconds */
	double found, exact;		     /* fractions of the searches */
	double victims;			     /* per search that found a set */
	double broken;			     /* gangs broken, per set found */
	double visits;			     /* branch-and-bound nodes, mean */
	unsigned levels[FT_LEVEL_COUNT + 1]; /* level reached, when found */
} micro_row_t;

typedef struct micro {
	result_t r; /* for its error */
	unsigned variants, n_rows;
	micro_row_t rows[MICRO_KINDS * MICRO_LAYOUTS * PSHAPES];
} micro_t;

/* Build, load and time everything into `mc`; -1 with the failure in
 * mc->r. mc->r.ok and mc->r.done are set either way. */
int bench_victims_run(micro_t *mc, const bench_options_t *o);

/* The table of the searches (nothing unless they all ran). */
void bench_victims_print(const micro_t *mc);

/*
 * Per 8-GPU node kind and layout: the slowest preemptor's p99 against the
 * aim, and the lowest share of exact answers.
 */
void bench_victims_print_aims(const micro_t *mc);

#endif
