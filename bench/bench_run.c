/*
 * One cluster size of flextopo-bench (bench_run.h): the app and server the
 * benchmarks measure, the client they measure it with, and the pod token
 * that makes every request a new pod.
 */
#include "bench_run.h"

#include <flextopo/error.h>
#include <flextopo/server.h>
#include <flextopo/state.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

void bench_run_init(run_t *run, result_t *r, const bench_options_t *o,
		    unsigned n)
{
	memset(run, 0, sizeof(*run));
	run->o = o;
	run->r = r;
	run->n = n;
}

int bench_run_setup(run_t *run)
{
	if (ft_config_init(&run->app.cfg) < 0 ||
	    ft_config_set(&run->app.cfg, "logLevel", "warn") < 0 ||
	    (run->o->frag_window &&
	     ft_config_set(&run->app.cfg, "fragmentationWindow",
			   run->o->frag_window) < 0) ||
	    ft_app_init(&run->app) < 0)
		return bench_fail(run->r, "app: %s", ft_error_last());
	return synth_generator_init(&run->gen, run->r, run->o, &run->app.opts);
}

static int start_server(run_t *run, unsigned *port)
{
	ft_server_options_t so = {
	    .listen = "127.0.0.1:0",
	    .max_body_bytes = run->app.cfg.max_request_bytes,
	    .threads = run->o->threads ? run->o->threads : run->app.cfg.threads,
	};

	if (ft_server_new(&run->app.server, &so) < 0 ||
	    ft_app_routes(&run->app, run->app.server) < 0 ||
	    ft_server_start(run->app.server) < 0)
		return bench_fail(run->r, "server: %s", ft_error_last());
	*port = ft_server_port(run->app.server);
	return 0;
}

/* The node names in NodeNames order and the nodes they name. */
static int find_nodes(run_t *run)
{
	ft_snapshot_t *snap;
	int rc = 0;

	run->names = calloc(run->n, sizeof(*run->names));
	run->by_name = calloc(run->n, sizeof(*run->by_name));
	if (!run->names || !run->by_name)
		return bench_fail(run->r, "names: out of memory");
	snap = ft_state_snapshot(run->app.state);
	for (unsigned i = 0; i < run->n && rc == 0; i++) {
		synth_node_name(run->names[i], sizeof(run->names[i]), i);
		if (!(run->by_name[i] = ft_snapshot_find(snap, run->names[i])))
			rc = bench_fail(run->r, "snapshot: no node %s",
					run->names[i]);
	}
	ft_snapshot_unref(snap);
	return rc;
}

int bench_run_start(run_t *run)
{
	unsigned port = 0;

	if (start_server(run, &port) < 0 || find_nodes(run) < 0)
		return -1;
	if (bench_client_open(&run->client, port) < 0)
		return bench_fail(run->r, "libcurl: cannot make a client");
	return 0;
}

void bench_run_dispose(run_t *run)
{
	bench_client_close(&run->client);
	free(run->by_name);
	free(run->names);
	ft_app_dispose(&run->app);
	synth_generator_dispose(&run->gen);
}

void bench_run_progress(const run_t *run, const char *what)
{
	fprintf(stderr, "flextopo-bench: %u nodes: %s\n", run->n, what);
}

int bench_run_request(run_t *run, const char *path, const request_t *q,
		      double *us)
{
	char err[512];

	if (bench_client_request(&run->client, path, q ? q->body : NULL,
				 q ? q->len : 0, us, err, sizeof(err)) < 0)
		return bench_fail(run->r, "%s", err);
	return 0;
}

int bench_run_call_handler(run_t *run, ft_http_handler_fn fn, const char *path,
			   const request_t *q, double *us)
{
	ft_http_request_t req = {.method = "POST",
				 .path = path,
				 .content_type = "application/json",
				 .body = q->body,
				 .body_len = q->len};
	ft_http_response_t res = {.status = 200};
	double t0 = now_us();
	int rc = 0;

	fn(&res, &req, &run->app);
	*us = now_us() - t0;
	if (res.status != 200)
		rc = bench_fail(run->r, "%s handler: HTTP %d: %.300s", path,
				res.status, res.body ? res.body : "");
	free(res.body);
	return rc;
}

/* Make the request name pod `id` (its name and uid). */
static void request_set_pod(request_t *q, unsigned id)
{
	char digits[TOKEN_DIGITS + 1];

	snprintf(digits, sizeof(digits), "%0*u", TOKEN_DIGITS, id % 100000000u);
	for (unsigned t = 0; t < q->n_tokens; t++)
		memcpy(q->body + q->token_at[t], digits, TOKEN_DIGITS);
}

void bench_run_name_pod(run_t *run, request_t *q, unsigned fixed)
{
	request_set_pod(q, run->o->fixed_uids ? fixed : ++run->next_pod);
}

int bench_request_print(request_t *out, cJSON *root)
{
	const char *p;

	out->body = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!out->body)
		return -1;
	out->len = strlen(out->body);
	for (p = out->body;
	     (p = strstr(p, POD_TOKEN)) && out->n_tokens < TOKENS_MAX;
	     p += strlen(POD_TOKEN))
		out->token_at[out->n_tokens++] =
		    (size_t)(p - out->body) + strlen(POD_TOKEN) - TOKEN_DIGITS;
	return out->n_tokens == 2 ? 0 : -1;
}
