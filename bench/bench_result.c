/*
 * The tables of flextopo-bench's results (bench_result.h): the first failure
 * of a size, latency rows with nearest-rank percentiles and their lines in
 * the report, and the sample series the benchmarks time into.
 */
#include "bench_result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_fail(result_t *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Index of the nearest-rank percentile `per_mille` of `n` sorted samples: the
 * smallest sample with that share of the samples at or below it.
 */
static size_t rank(unsigned n, unsigned per_mille)
{
	unsigned long long r = ((unsigned long long)n * per_mille + 999) / 1000;

	return r ? (size_t)r - 1 : 0;
}

void bench_row_fill(row_t *row, double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	row->iters = n;
	row->min = v[0];
	row->p50 = v[rank(n, 500)];
	row->p99 = v[rank(n, 990)];
	row->max = v[n - 1];
}

void bench_append_row(row_t *rows, unsigned *n_rows, unsigned max,
		      const char *verb, double *v, unsigned n)
{
	row_t *row;

	if (*n_rows >= max || !n)
		return;
	row = &rows[(*n_rows)++];
	snprintf(row->verb, sizeof(row->verb), "%s", verb);
	bench_row_fill(row, v, n);
}

void bench_print_row_head(const char *column)
{
	printf("nodes  %-30s %6s %9s %9s %9s %9s\n", column, "iters", "min_us",
	       "p50_us", "p99_us", "max_us");
}

void bench_print_row(unsigned nodes, const row_t *w)
{
	printf("%5u  %-30s %6u %9.1f %9.1f %9.1f %9.1f\n", nodes, w->verb,
	       w->iters, w->min, w->p50, w->p99, w->max);
}

double bench_pct(unsigned part, unsigned whole)
{
	return whole ? 100.0 * part / whole : 0;
}

int bench_series_init(series_t *s, result_t *r, unsigned n)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	for (unsigned k = 0; k < 4; k++)
		if (!(s->v[k] = calloc(n ? n : 1, sizeof(double))))
			return bench_fail(r, "samples: out of memory");
	return 0;
}

void bench_series_dispose(series_t *s)
{
	for (unsigned k = 0; k < 4; k++)
		free(s->v[k]);
}
