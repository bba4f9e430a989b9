/*
 * flextopo-bench's command line as parsed (bench_main.c): what every
 * benchmark of the program reads.
 */
#ifndef FLEXTOPO_BENCH_OPTIONS_H
#define FLEXTOPO_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#define SIZES_MAX 16

typedef struct bench_options {
	unsigned sizes[SIZES_MAX];
	unsigned n_sizes;
	unsigned iterations; /* 0: by size */
	long warmup;	     /* < 0: a tenth of the iterations */
	unsigned threads;    /* server worker threads; 0: one per core */
	uint64_t seed;
	bool fixed_uids; /* one pod uid per shape, not one per iteration */
	bool via_file;	 /* load through a List file and load_snapshot */
	const char *source_dir;
	long preempt_iterations; /* < 0: by size; 0: no preempt */
	long victim_iterations;	 /* < 0: MICRO_ITERATIONS; 0: skip */
	bool packed;		 /* fill nodes as plan_packed does */
	bool tiered;		 /* device holders above CPU-only pods */
	const char *frag_window; /* fragmentationWindow, or NULL: default */
	long dra_events;	 /* per kind and round of the DRA arm; < 0:
				    DRA_EVENTS_DEFAULT; 0: skip */
} bench_options_t;

#endif
