/*
 * What flextopo-bench measures for one cluster size (bench_result.c): the
 * result_t that the child measuring a size fills in memory shared with the
 * parent, which prints the report, and the helpers that fill and print its
 * tables.
 */
#ifndef FLEXTOPO_BENCH_RESULT_H
#define FLEXTOPO_BENCH_RESULT_H

#include <stdbool.h>

#include "synth.h"

#define ROWS_MAX  14
#define PROWS_MAX (PSHAPES + 4)

/* One line of a latency table. */
typedef struct row {
	char verb[40];
	unsigned iters;
	double min, p50, p99, max; /* microseconds */
} row_t;

/* Preempt replies of one shape, as checked. */
typedef struct preempt_stat {
	unsigned replies;  /* checked replies, timed ones */
	double kept;	   /* nodes in a reply / N, summed over replies */
	double victims;	   /* victims named, summed */
	double changed;	   /* kept nodes whose victims differ from the
			      proposal, summed */
	double sent_empty; /* nodes sent with no victims / N */
	unsigned searches; /* ft_victims_search calls timed without HTTP */
	unsigned inexact;  /* of them, set.exact false */
	unsigned found;	   /* of them, set.found */
	double slowest_us; /* the slowest of them */
} preempt_stat_t;

typedef struct result {
	bool done, ok;
	char error[512];
	unsigned nodes, pods, holdings;
	unsigned gpus_total, gpus_used, cpus_total, cpus_used;
	unsigned mig_total, mig_used;
	double load_s;
	double model_bytes; /* ft_node_footprint per node */
	double rss_bytes;   /* VmRSS growth while loading, per node */
	long rss_kib, hwm_kib;
	double request_kib, filter_reply_kib, prioritize_reply_kib;
	long connects, requests;
	double passed[SHAPES]; /* nodes passing filter, fraction */
	unsigned n_rows;
	row_t rows[ROWS_MAX];
	/* Preempt: */
	unsigned n_prows;
	row_t prows[PROWS_MAX];
	preempt_stat_t preempt[PSHAPES];
	double preempt_request_kib, preempt_reply_kib;
} result_t;

/* Record the first failure of a size in r->error; returns -1. */
int bench_fail(result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Sort the `n` samples (microseconds, n > 0) and set row->iters, min, the
 * nearest-rank p50 and p99, and max; row->verb is left as it is.
 */
void bench_row_fill(row_t *row, double *v, unsigned n);

/*
 * The samples into the next of the `max` rows of a table counting
 * `*n_rows`, named `verb`; nothing when the table is full or there are no
 * samples.
 */
void bench_append_row(row_t *rows, unsigned *n_rows, unsigned max,
		      const char *verb, double *v, unsigned n);

/* The heading of a latency table whose first column after the size is
 * `column`. */
void bench_print_row_head(const char *column);

/* One line of a latency table: the cluster size and the row. */
void bench_print_row(unsigned nodes, const row_t *w);

/* `part` in percent of `whole`, 0 when `whole` is 0. */
double bench_pct(unsigned part, unsigned whole);

/* Up to four series of `n` samples each, timed side by side. */
typedef struct series {
	double *v[4];
	unsigned n;
} series_t;

/* -1 with "samples: out of memory" recorded in `r`. */
int bench_series_init(series_t *s, result_t *r, unsigned n);
void bench_series_dispose(series_t *s);

#endif
