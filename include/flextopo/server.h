/*
 * HTTP server on libmicrohttpd: a route table, a request body cap, keep-alive
 * connections and one path for every error reply.
 *
 * Each request is answered from a worker thread of libmicrohttpd's internal
 * thread pool. Bodies above the configured cap are refused with HTTP 400 and a
 * JSON body naming the limit, before the body is buffered.
 */
#ifndef FLEXTOPO_SERVER_H
#define FLEXTOPO_SERVER_H

#include <stddef.h>

typedef struct ft_http_request {
	const char *method;	  /* "GET", "POST", ... */
	const char *path;	  /* URL path without the query */
	const char *content_type; /* may be NULL */
	const char *body;	  /* NUL-terminated; "" when none */
	size_t body_len;
	void *connection; /* opaque, for ft_http_request_query() */
} ft_http_request_t;

typedef struct ft_http_response {
	int status;		  /* default 200 */
	const char *content_type; /* static string; default application/json */
	char *body;		  /* heap; the server frees it */
	size_t body_len;
} ft_http_response_t;

/* A route handler fills `out`; it must not keep `req` after returning. */
typedef void (*ft_http_handler_fn)(ft_http_response_t *out,
				   const ft_http_request_t *req, void *payload);

/* Value of query parameter `key`, borrowed for the request, or NULL. */
const char *ft_http_request_query(const ft_http_request_t *req,
				  const char *key);

/*
 * Fill `out` with an error reply {"error": "<kind>: <message>"} and count it
 * under `kind` ("bad_json", "too_large", "bad_content_type", "not_found",
 * "method_not_allowed", "internal"). Every HTTP error goes through here.
 */
void ft_http_reply_error(ft_http_response_t *out, int status, const char *kind,
			 const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set `out` to a heap copy of `body` with `content_type` (static). */
int ft_http_reply_text(ft_http_response_t *out, int status,
		       const char *content_type, const char *body);

/* Errors counted per kind since start (for metrics); 0 for unknown kinds. */
unsigned long ft_http_error_count(const char *kind);

typedef struct ft_server ft_server_t;

typedef struct ft_server_options {
	const char *listen;    /* "HOST:PORT"; port 0 picks a free one */
	size_t max_body_bytes; /* request body cap */
	unsigned threads;      /* worker threads; 0 = number of cores */
} ft_server_options_t;

/* Create, not yet started. FT_EINVAL for a bad listen address. */
int ft_server_new(ft_server_t **out, const ft_server_options_t *opts);

/*
 * Register `fn` for an exact `method` and `path`, or a path prefix when
 * `path` ends in a star (for "/debug/nodes/{name}", register "/debug/nodes/"
 * followed by a star). Call before ft_server_start().
 * A path with no route answers 404; a known path with another method, 405.
 */
int ft_server_route(ft_server_t *server, const char *method, const char *path,
		    ft_http_handler_fn fn, void *payload);

/* Bind and start serving. FT_EIO when the address cannot be bound. */
int ft_server_start(ft_server_t *server);

/* The bound port (useful after listening on port 0). */
unsigned ft_server_port(const ft_server_t *server);

/* Stop serving and free; NULL is fine. */
void ft_server_free(ft_server_t *server);

#endif
