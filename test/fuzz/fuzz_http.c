/*
 * Fuzz target for the HTTP entry: one request as libmicrohttpd hands it to
 * the server (method, path, query, headers, body), answered by
 * ft_server_handle() with the extender's real routes, verbs and debug API,
 * over the demo cluster (configs/demo-cluster.yaml). No socket is opened.
 *
 * The input is split like a request head with bare newlines:
 *
 *   METHOD SP PATH[?NAME=VALUE&...] \n (NAME: VALUE \n)* \n BODY
 *
 * Any input must be answered with a status from 100 to 599 and, when the
 * reply says it is JSON, a body that parses as JSON (an error reply: an
 * object with an "error" string), or be refused the way the server refuses
 * (FT_EIO: connection closed; FT_ENOMEM) with no reply; never crash or leak.
 *
 * Requests change the cluster state (/bind assumes pods), so an input may
 * behave differently after others; the state only grows by the demo's
 * pending pods, which bind once.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <flextopo/app.h>
#include <flextopo/debug.h>
#include <flextopo/error.h>
#include <flextopo/server.h>

#include <cjson/cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PAIRS 32

typedef struct fuzz_request {
	char *text; /* a NUL-terminated copy of the input, cut in place */
	const char *method;
	const char *path;
	const char *headers[2 * MAX_PAIRS + 2];
	const char *query[2 * MAX_PAIRS + 2];
	const char *body;
	size_t body_len;
} fuzz_request_t;

/* The app and its routes, made once: loading the demo takes milliseconds. */
static ft_server_t *fuzz_server(void)
{
	static ft_app_t app;
	static ft_server_t *server;
	ft_server_options_t opts = {.listen = "127.0.0.1:0"};

	if (server)
		return server;
	if (ft_config_init(&app.cfg) < 0 ||
	    ft_config_set(&app.cfg, "logLevel", "error") < 0 ||
	    ft_app_init(&app) < 0 ||
	    ft_app_load_snapshot(&app, FT_SOURCE_DIR
				 "/configs/demo-cluster.yaml") < 0)
		abort();
	opts.max_body_bytes = app.cfg.max_request_bytes;
	if (ft_server_new(&server, &opts) < 0 ||
	    ft_app_routes(&app, server) < 0 ||
	    ft_app_debug_routes(&app, server) < 0)
		abort();
	return server;
}

/* Cut the next '\n'-terminated line off *rest; NULL at the end. */
static char *next_line(char **rest)
{
	char *line = *rest;
	char *nl;

	if (!line)
		return NULL;
	nl = strchr(line, '\n');
	*rest = nl ? nl + 1 : NULL;
	if (nl)
		*nl = '\0';
	return line;
}

/* Append name, value to a NULL-terminated pair list of `n` pairs. */
static void add_pair(const char **list, size_t *n, const char *name,
		     const char *value)
{
	if (*n >= MAX_PAIRS)
		return;
	list[2 * *n] = name;
	list[2 * *n + 1] = value;
	(*n)++;
	list[2 * *n] = NULL;
}

/* "a=1&b" -> a, 1, b, "" (libmicrohttpd has decoded them already). */
static void split_query(fuzz_request_t *r, char *query)
{
	size_t n = 0;
	char *arg;

	while ((arg = strsep(&query, "&"))) {
		char *eq = strchr(arg, '=');

		if (eq)
			*eq = '\0';
		add_pair(r->query, &n, arg, eq ? eq + 1 : "");
	}
}

static void split_request_line(fuzz_request_t *r, char *line)
{
	char *sp = strchr(line, ' ');
	char *q;

	r->method = line;
	r->path = "/";
	if (!sp)
		return;
	*sp = '\0';
	r->path = sp + 1;
	q = strchr(sp + 1, '?');
	if (q) {
		*q = '\0';
		split_query(r, q + 1);
	}
}

static void split_headers(fuzz_request_t *r, char **rest)
{
	size_t n = 0;
	char *line;

	while ((line = next_line(rest)) && line[0]) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		add_pair(r->headers, &n, line,
			 colon + 1 + strspn(colon + 1, " "));
	}
}

/* Split `data`; the body keeps its bytes, NULs included. */
static int split_request(fuzz_request_t *r, const uint8_t *data, size_t size)
{
	const uint8_t *gap = memmem(data, size, "\n\n", 2);
	size_t head_len = gap ? (size_t)(gap - data) : size;
	char *rest;

	memset(r, 0, sizeof(*r));
	r->text = malloc(size + 1);
	if (!r->text)
		return -1;
	memcpy(r->text, data, size);
	r->text[size] = '\0';
	r->text[head_len] = '\0';
	if (gap) {
		r->body = r->text + head_len + 2;
		r->body_len = size - head_len - 2;
	}
	rest = r->text;
	split_request_line(r, next_line(&rest));
	split_headers(r, &rest);
	return 0;
}

static void check_reply(const ft_http_response_t *res)
{
	cJSON *root;

	if (res->status < 100 || res->status > 599 || !res->content_type ||
	    (res->body_len && !res->body))
		abort();
	if (strncmp(res->content_type, "application/json", 16) != 0 ||
	    !res->body)
		return;
	root = cJSON_ParseWithLength(res->body, res->body_len);
	if (!root)
		abort();
	if (res->status >= 400 &&
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "error")))
		abort();
	cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_server_t *server = fuzz_server();
	ft_http_response_t res;
	fuzz_request_t r;
	int rc;

	if (split_request(&r, data, size) < 0)
		return 0;
	rc = ft_server_handle(&res, server, r.method, r.path, r.headers,
			      r.query, r.body, r.body_len);
	if (rc == 0)
		check_reply(&res);
	else if (res.body || (rc != FT_EIO && rc != FT_ENOMEM))
		abort();
	free(res.body);
	free(r.text);
	return 0;
}
