/*
 * One cluster size of flextopo-bench (bench_run.c): the real ft_app_t and
 * its HTTP server on 127.0.0.1, the synthetic cluster's node names and
 * nodes, and the one keep-alive client, which the benchmarks of that size
 * share: filter and prioritize (bench_verbs.h), then preempt
 * (bench_preempt.h).
 */
#ifndef FLEXTOPO_BENCH_RUN_H
#define FLEXTOPO_BENCH_RUN_H

#include <flextopo/app.h>
#include <flextopo/cluster.h>

#include <cjson/cJSON.h>

#include <stddef.h>

#include "bench_client.h"
#include "bench_options.h"
#include "bench_result.h"
#include "synth.h"

#define TOKENS_MAX 4

/* A request body with the pod token's digits at known offsets. */
typedef struct request {
	char *body;
	size_t len;
	size_t token_at[TOKENS_MAX];
	unsigned n_tokens;
} request_t;

typedef struct run {
	const bench_options_t *o;
	result_t *r;
	ft_app_t app;
	generator_t gen;
	unsigned n;		     /* nodes */
	char (*names)[NAME_MAX_LEN]; /* their names, in NodeNames order */
	const ft_node_t **by_name;   /* the nodes in that order */
	bench_client_t client;
	unsigned next_pod; /* the last pod uid handed out */
} run_t;

/* A run of `n` nodes that records its failures in `r`; nothing started. */
void bench_run_init(run_t *run, result_t *r, const bench_options_t *o,
		    unsigned n);

/* The app as the options configure it, and the cluster's generator. */
int bench_run_setup(run_t *run);

/*
 * Once the cluster is loaded: the server on 127.0.0.1 with the app's
 * routes, the node names and their nodes in the published snapshot (found
 * once, untimed), and the client connected to the server.
 */
int bench_run_start(run_t *run);

void bench_run_dispose(run_t *run);

/* A line on stderr saying what the run of this size does now. */
void bench_run_progress(const run_t *run, const char *what);

/* POST `q` to `path`, or GET it when `q` is NULL; *us is the wall time. */
int bench_run_request(run_t *run, const char *path, const request_t *q,
		      double *us);

/* A route handler called directly, as the server would call it. */
int bench_run_call_handler(run_t *run, ft_http_handler_fn fn, const char *path,
			   const request_t *q, double *us);

/*
 * Make `q` name a new pod, or the pod `fixed` with --fixed-uids (its name
 * and uid).
 */
void bench_run_name_pod(run_t *run, request_t *q, unsigned fixed);

/*
 * Print `root` (then free it) into `out` and find the two copies of
 * POD_TOKEN in it, the pod's name and uid; -1 otherwise.
 */
int bench_request_print(request_t *out, cJSON *root);

#endif
