/*
 * HTTP server on libmicrohttpd: a route table, a request body cap, keep-alive
 * connections and one path for every error reply.
 *
 * Each request is answered from a worker thread of libmicrohttpd's internal
 * thread pool. Bodies above the configured cap are refused with HTTP 400 and a
 * JSON body naming the limit, before the body is buffered.
 *
 * The listener faces the cluster network, so connections are bounded: at
 * most `max_connections` open at once (further clients wait in the listen
 * backlog), at most `max_connections_per_client` from one address (at the
 * cap, a new connection closes that address's connection idle the longest,
 * or itself when none is idle: clients.h), and a connection that sends
 * nothing for
 * `connection_timeout_s` is closed, whether idle between requests or stalled
 * in one. Request lines and headers must fit libmicrohttpd's 32 KiB
 * per-connection buffer: a longer URL is answered 414, longer headers 431.
 * Each worker thread polls its own connections (epoll), so idle or slow
 * connections cost a file descriptor and a buffer each, never a thread. A
 * handler that may block for long is registered with
 * ft_server_route_offload() and runs on a thread of its own pool.
 *
 * With a certificate and key the server speaks HTTPS only (TLS through
 * libmicrohttpd's GnuTLS backend), HTTP/1.1 inside it: kube-scheduler's Go
 * client offers h2 by ALPN and falls back to HTTP/1.1 when the server does
 * not pick h2. With a client CA as well, requests must come with a client
 * certificate that chains to that CA (see ft_server_options_t).
 */
#ifndef FLEXTOPO_SERVER_H
#define FLEXTOPO_SERVER_H

#include <stdbool.h>
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

/* Value of header `name` (any case), borrowed for the request, or NULL. */
const char *ft_http_request_header(const ft_http_request_t *req,
				   const char *name);

/*
 * Fill `out` with an error reply {"error": "<kind>: <message>"} and count it
 * under `kind` ("bad_json", "too_large", "bad_content_type", "not_found",
 * "method_not_allowed", "unauthorized" (401), "forbidden", "bad_request",
 * "unavailable" (503: not able to answer now), "internal"). Every HTTP
 * error goes through here.
 */
void ft_http_reply_error(ft_http_response_t *out, int status, const char *kind,
			 const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set `out` to a heap copy of `body` with `content_type` (static). */
int ft_http_reply_text(ft_http_response_t *out, int status,
		       const char *content_type, const char *body);

/* Errors counted per kind since start (for metrics); 0 for unknown kinds. */
unsigned long ft_http_error_count(const char *kind);

/* The kinds counted ("other" last); *out is static. Returns how many. */
size_t ft_http_error_kinds(const char *const **out);

typedef struct ft_server ft_server_t;

/*
 * TLS. `tls_cert_file` and `tls_key_file` are PEM files: the certificate
 * chain (leaf first) and its private key, unencrypted (PKCS#1, SEC 1 or
 * PKCS#8). Both set: the server speaks HTTPS only. Both NULL or "": plain
 * HTTP. One without the other is FT_EINVAL.
 *
 * `tls_client_ca_file` (PEM, one or more CA certificates; needs the two
 * above) asks every client for a certificate and answers 403 "forbidden" to
 * a request whose connection presented none, or one that does not chain to
 * these CAs, is expired, or is not valid for TLS client authentication
 * (extended key usage). The check runs on every request. Paths listed in
 * `tls_public_paths` (exact paths, NULL-terminated; copied) are answered
 * without a client certificate: health checks from the kubelet, which has
 * none, like kube-scheduler's --authorization-always-allow-paths.
 *
 * The files are read, parsed and checked (the key must match the
 * certificate) once, by ft_server_new(): a renewed certificate takes effect
 * when the process restarts. Errors name the file.
 */
typedef struct ft_server_options {
	const char *listen;	   /* "HOST:PORT"; port 0 picks a free one */
	size_t max_body_bytes;	   /* request body cap */
	unsigned threads;	   /* worker threads; 0 = number of cores */
	const char *tls_cert_file; /* PEM; NULL or "" = plain HTTP */
	const char *tls_key_file;  /* PEM; set with tls_cert_file */
	const char *tls_client_ca_file; /* PEM; NULL or "" = no client certs */
	const char *const *tls_public_paths; /* NULL-terminated, or NULL */
	/* open connections; 0 = FT_SERVER_MAX_CONNECTIONS */
	unsigned max_connections;
	/* open connections from one client address; 0 = no limit */
	unsigned max_connections_per_client;
	/* seconds a connection may send nothing; 0 = FT_SERVER_TIMEOUT_S */
	unsigned connection_timeout_s;
	/* threads of offloaded routes; 0 = FT_SERVER_OFFLOAD_THREADS */
	unsigned offload_threads;
	/*
	 * Without tls_cert_file: serve HTTPS with a certificate made at start
	 * (self-signed, ECDSA P-256, valid a year), as kube-scheduler's secure
	 * port does without --tls-cert-file. For listeners whose clients send
	 * a bearer token and skip verification (Prometheus).
	 */
	bool tls_self_signed;
} ft_server_options_t;

/* Defaults of the connection limits above. */
#define FT_SERVER_MAX_CONNECTIONS 1024u
/*
 * Idle keep-alive connections are closed after this many seconds by default.
 * Go's http.Transport, which kube-scheduler uses, drops idle connections after
 * 90 s; closing later than the client avoids the race where a POST is sent on
 * a connection the server is closing (Go does not retry a POST).
 */
#define FT_SERVER_TIMEOUT_S 120u

/*
 * Offloaded requests handled at once by default; more wait in a queue that
 * the connection limit bounds (one request per connection).
 */
#define FT_SERVER_OFFLOAD_THREADS 16u

/*
 * Create, not yet started. FT_EINVAL for a bad listen address or TLS
 * options that do not go together, or for a TLS file that holds no usable
 * certificate or key, or a key that does not match the certificate; FT_EIO
 * when a TLS file cannot be read; FT_EUNAVAIL when libmicrohttpd was built
 * without TLS and TLS is asked for.
 */
int ft_server_new(ft_server_t **out, const ft_server_options_t *opts);

/*
 * Register `fn` for an exact `method` and `path`, or a path prefix when
 * `path` ends in a star (for "/debug/nodes/{name}", register "/debug/nodes/"
 * followed by a star). Call before ft_server_start().
 * A path with no route answers 404; a known path with another method, 405.
 */
int ft_server_route(ft_server_t *server, const char *method, const char *path,
		    ft_http_handler_fn fn, void *payload);

/*
 * As ft_server_route(), for a handler that may block for long (a bind that
 * waits on the API server). Its requests run on one of the server's
 * offload threads (ft_server_options_t.offload_threads) while their
 * connection is suspended (libmicrohttpd's MHD_suspend_connection), so that
 * it never holds a worker thread that other requests wait behind. A
 * request still queued when the server stops is answered 503
 * "unavailable". ft_server_handle() runs such handlers inline.
 */
int ft_server_route_offload(ft_server_t *server, const char *method,
			    const char *path, ft_http_handler_fn fn,
			    void *payload);

/*
 * Bind and start serving. FT_EIO when the address cannot be bound or
 * libmicrohttpd refuses to start (its reason is logged).
 */
int ft_server_start(ft_server_t *server);

/*
 * Answer one request without a connection, the way the server answers a
 * request that libmicrohttpd has read: the same route lookup, header checks,
 * body cap and handler, and the same error replies. `path` is the URL path
 * without the query; `headers` (names match case-insensitively) and `query`
 * are NULL-terminated lists of name, value pairs, or NULL; `body` holds
 * `body_len` bytes and may be NULL when there are none. Requests are not
 * checked for TLS client certificates beyond what a connection without one
 * gets. For fuzzing and tests; the server need not be started.
 *
 * Returns 0 with the reply in `out` (the caller frees out->body), FT_EIO when
 * the server would close the connection without a reply (a refused body
 * longer than it drains), or FT_ENOMEM.
 */
int ft_server_handle(ft_http_response_t *out, const ft_server_t *server,
		     const char *method, const char *path,
		     const char *const *headers, const char *const *query,
		     const char *body, size_t body_len);

/* The bound port (useful after listening on port 0). */
unsigned ft_server_port(const ft_server_t *server);

/*
 * Connections closed so far to keep max_connections_per_client: `idle`, a
 * client's connection idle the longest, closed for its new one; `refused`,
 * a new connection closed because every one of its client's was in the
 * middle of a request. Both 0 for a NULL server or one without the cap.
 */
void ft_server_connections_closed(const ft_server_t *server,
				  unsigned long *idle, unsigned long *refused);

/* Stop serving and free; NULL is fine. */
void ft_server_free(ft_server_t *server);

#endif
