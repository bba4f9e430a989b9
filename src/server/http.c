/*
 * The HTTP edge of the extender: a small server on libmicrohttpd that maps
 * "METHOD path" to a handler, caps request bodies, and funnels every error
 * reply through one counting function.
 *
 * kube-scheduler POSTs JSON over keep-alive HTTP/1.1 and gives up after 5 s,
 * so the server is built for many short requests on long-lived connections:
 * libmicrohttpd runs a pool of epoll worker threads (poll where epoll is
 * missing) on a listening socket that we bind ourselves, which lets us report
 * the real port after listening on port 0 and keep bind errors our own.
 *
 * A request lives in a request_state_t hung on libmicrohttpd's per-request
 * pointer. The access handler is called once when the headers are in, once per
 * piece of body and once at the end; libmicrohttpd cannot queue a reply in the
 * middle of an upload, and a reply queued before the body is read makes it
 * close the connection, so most refusals wait for the end: problems known from
 * the headers (no route, wrong method, wrong Content-Type, a Content-Length
 * above the cap) are remembered, the body is read and thrown away, and the
 * error is sent with the connection still usable. A body without
 * Content-Length that grows past the cap is dropped the same way. A client
 * that sends more than DRAIN_MAX_BYTES of refused body loses the connection
 * without a reply. Two cases are answered at once, closing the connection: any
 * refusal of a client that waits for "100 Continue" (it will not send the
 * body), and a Content-Length above DRAIN_MAX_BYTES.
 *
 * Routes are written before ft_server_start() and only read afterwards, so the
 * worker threads share them without a lock. The per-kind error counters are
 * process-wide atomics because ft_http_error_count() takes no server.
 *
 * Connections are bounded (server.h): libmicrohttpd caps them in all and
 * closes one that stays silent too long; clients.c keeps the cap per client
 * address, from libmicrohttpd's notices of connections opened and closed
 * and of requests begun and completed. A client
 * that has sent headers only is a connection like any other: what it
 * announces in Content-Length is not allocated up front beyond
 * RESERVE_MAX_BYTES, so stalled uploads cost little memory.
 *
 * ft_server_handle() runs the same steps on a request given as strings,
 * without libmicrohttpd: a request_source_t stands for the connection that
 * headers and query parameters are read from.
 *
 * A route registered with ft_server_route_offload() (bind, which waits on the
 * API server) runs its handler on an offload thread (offload.c) while
 * libmicrohttpd keeps its connection suspended; the offload thread resumes
 * it with the reply in the request state, and the next call of the access
 * handler sends it. So a slow API server holds offload threads, never the
 * workers that filter and prioritize are answered on.
 *
 * With TLS (tls.c) libmicrohttpd does the handshakes and record layer through
 * GnuTLS; a request from a connection without an acceptable client
 * certificate is one more refusal known from the headers, answered 403 after
 * its body like the others.
 */
#include "clients.h"
#include "offload.h"
#include "tls.h"

#include <flextopo/buf.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/server.h>

#include <microhttpd.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Body bytes thrown away after a rejection before the connection is cut. */
#define DRAIN_MAX_BYTES ((size_t)8 << 20)

/* Most body memory reserved from Content-Length before the bytes arrive. */
#define RESERVE_MAX_BYTES ((size_t)1 << 20)

/* Longest wait for offloaded replies to go out when the server stops. */
#define DEFERRED_DRAIN_MS 2000u

/* File descriptors wanted beyond the connections: files, the API client. */
#define SPARE_FDS 64u

#define DEFAULT_CONTENT_TYPE "application/json"

typedef struct route {
	char *method;
	char *path; /* without the trailing '*' of a prefix route */
	size_t path_len;
	int prefix;
	int offload; /* the handler runs on an offload thread */
	ft_http_handler_fn fn;
	void *payload;
} route_t;

struct ft_server {
	struct addrinfo *addrs; /* resolved listen address candidates */
	char *listen;
	size_t max_body_bytes;
	unsigned threads;
	unsigned max_connections;
	unsigned max_per_client; /* 0: no limit */
	unsigned timeout_s;
	route_t *routes;
	size_t routes_len;
	size_t routes_cap;
	struct MHD_Daemon *daemon;
	unsigned port;
	ft_tls_t *tls; /* NULL: plain HTTP */
	unsigned offload_threads;
	ft_offload_t *offload;	   /* NULL unless a route is offloaded */
	atomic_uint deferred_open; /* offloaded requests not yet completed */
	ft_clients_t *clients;	   /* the per-client cap (clients.h) */
};

/*
 * Where a request's headers and query parameters come from: libmicrohttpd's
 * connection, or the NULL-terminated name, value lists of ft_server_handle().
 * ft_http_request_t.connection points at one.
 */
typedef struct request_source {
	struct MHD_Connection *connection; /* NULL: the lists below */
	const char *const *headers;
	const char *const *query;
} request_source_t;

/* Where an offloaded request is (request_state_t.deferred_state). */
enum { DEFER_NONE = 0, DEFER_RUNNING = 1, DEFER_DONE = 2 };

typedef struct request_state {
	const route_t *route;	   /* NULL while a rejection is pending */
	ft_http_response_t reject; /* the pending error reply, if any */
	int rejected;
	char allow[96]; /* Allow header of a 405 */
	char *body;
	size_t body_len;
	size_t body_cap;
	size_t discarded;
	/*
	 * An offloaded request: its handler runs as `job` on an offload
	 * thread while the connection is suspended, fills `deferred`, sets
	 * `deferred_state` to DEFER_DONE and resumes the connection.
	 * `method` and `url` are libmicrohttpd's, valid for the request.
	 */
	ft_offload_job_t job;
	struct MHD_Connection *connection;
	const char *method, *url;
	ft_http_response_t deferred;
	atomic_int deferred_state;
} request_state_t;

/* ---- error replies and their counters ---- */

static const char *const error_kinds[] = {
    "bad_json",
    "too_large",
    "bad_content_type",
    "not_found",
    "method_not_allowed",
    "unauthorized",
    "forbidden",
    "bad_request",
    "unavailable",
    "internal",
    "other",
};

#define ERROR_KINDS (sizeof(error_kinds) / sizeof(error_kinds[0]))

size_t ft_http_error_kinds(const char *const **out)
{
	*out = error_kinds;
	return ERROR_KINDS;
}
#define ERROR_KIND_OTHER (ERROR_KINDS - 1)

static atomic_ulong error_counts[ERROR_KINDS];

static size_t error_kind_index(const char *kind)
{
	for (size_t i = 0; kind && i < ERROR_KINDS; i++) {
		if (strcmp(kind, error_kinds[i]) == 0)
			return i;
	}
	return ERROR_KIND_OTHER;
}

unsigned long ft_http_error_count(const char *kind)
{
	size_t i = error_kind_index(kind);

	if (i == ERROR_KIND_OTHER && (!kind || strcmp(kind, "other") != 0))
		return 0;
	return atomic_load(&error_counts[i]);
}

/* The heap string "<kind>: <formatted message>", or NULL without memory. */
static char *format_error_text(const char *kind, const char *fmt, va_list ap)
{
	va_list again;
	char *text = NULL;
	size_t prefix = strlen(kind) + 2;
	int n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	if (n < 0)
		goto cleanup;
	text = malloc(prefix + (size_t)n + 1);
	if (!text)
		goto cleanup;
	sprintf(text, "%s: ", kind);
	vsnprintf(text + prefix, (size_t)n + 1, fmt, again);
cleanup:
	va_end(again);
	return text;
}

/* {"error":"<text>"} on the heap, or NULL without memory. */
static char *error_body(const char *text, size_t *len)
{
	char *body = NULL;
	ft_buf_t b;

	ft_buf_init(&b, strlen(text) + 16);
	ft_buf_puts(&b, "{\"error\":");
	ft_buf_put_json_string(&b, text);
	ft_buf_puts(&b, "}");
	*len = b.len;
	if (ft_buf_detach(&body, &b) < 0)
		return NULL;
	return body;
}

/*
 * Any body already in `out` is freed first. Without memory the status is still
 * set and the body left empty: the status alone tells the client enough.
 */
void ft_http_reply_error(ft_http_response_t *out, int status, const char *kind,
			 const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;

	if (!kind)
		kind = "other";
	atomic_fetch_add(&error_counts[error_kind_index(kind)], 1);
	va_start(ap, fmt);
	text = format_error_text(kind, fmt, ap);
	va_end(ap);
	free(out->body);
	out->status = status;
	out->content_type = DEFAULT_CONTENT_TYPE;
	out->body_len = 0;
	out->body = text ? error_body(text, &out->body_len) : NULL;
	free(text);
}

/* Any body already in `out` is freed on success; `out` is untouched on error.
 */
int ft_http_reply_text(ft_http_response_t *out, int status,
		       const char *content_type, const char *body)
{
	size_t len = body ? strlen(body) : 0;
	char *copy = malloc(len + 1);

	if (!copy)
		return ft_error_set(
		    FT_ENOMEM, "http reply: out of memory copying %zu bytes",
		    len);
	memcpy(copy, body ? body : "", len + 1);
	free(out->body);
	out->status = status;
	out->content_type = content_type ? content_type : DEFAULT_CONTENT_TYPE;
	out->body = copy;
	out->body_len = len;
	return 0;
}

/* The value of `key` in a name, value list; header names ignore case. */
static const char *list_value(const char *const *list, const char *key,
			      int ignore_case)
{
	for (size_t i = 0; list && list[i] && list[i + 1]; i += 2) {
		if ((ignore_case ? strcasecmp(list[i], key)
				 : strcmp(list[i], key)) == 0)
			return list[i + 1];
	}
	return NULL;
}

static const char *source_value(const request_source_t *src,
				enum MHD_ValueKind kind, const char *key)
{
	if (src->connection)
		return MHD_lookup_connection_value(src->connection, kind, key);
	if (kind == MHD_HEADER_KIND)
		return list_value(src->headers, key, 1);
	return list_value(src->query, key, 0);
}

const char *ft_http_request_query(const ft_http_request_t *req, const char *key)
{
	if (!req || !req->connection || !key)
		return NULL;
	return source_value(req->connection, MHD_GET_ARGUMENT_KIND, key);
}

const char *ft_http_request_header(const ft_http_request_t *req,
				   const char *name)
{
	if (!req || !req->connection || !name)
		return NULL;
	return source_value(req->connection, MHD_HEADER_KIND, name);
}

/* ---- listen address ---- */

/*
 * Split "HOST:PORT" or "[V6]:PORT" into `host` (empty: every address) and
 * `port`, two buffers of `size` bytes.
 */
static int split_listen(char *host, char *port, size_t size, const char *listen)
{
	const char *colon = strrchr(listen, ':');
	const char *h = listen;
	size_t hlen = colon ? (size_t)(colon - listen) : 0;

	if (!colon)
		return ft_error_set(
		    FT_EINVAL, "listen \"%s\": expected HOST:PORT", listen);
	if (listen[0] == '[') {
		if (hlen < 2 || colon[-1] != ']')
			return ft_error_set(
			    FT_EINVAL, "listen \"%s\": unclosed '['", listen);
		h++;
		hlen -= 2;
	} else if (memchr(listen, ':', hlen)) {
		return ft_error_set(
		    FT_EINVAL,
		    "listen \"%s\": write an IPv6 address as [ADDR]:PORT",
		    listen);
	}
	if (hlen >= size || strlen(colon + 1) >= size)
		return ft_error_set(FT_EINVAL, "listen \"%s\": too long",
				    listen);
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

static int check_port(const char *listen, const char *port)
{
	char *end = NULL;
	unsigned long n;

	errno = 0;
	n = strtoul(port, &end, 10);
	if (port[0] < '0' || port[0] > '9' || *end || errno || n > 65535)
		return ft_error_set(FT_EINVAL,
				    "listen \"%s\": port must be 0 to 65535",
				    listen);
	return 0;
}

static int resolve_listen(struct addrinfo **out, const char *listen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	char host[256], port[256];
	int error;
	int rc = split_listen(host, port, sizeof(host), listen);

	if (rc == 0)
		rc = check_port(listen, port);
	if (rc != 0)
		return rc;
	error = getaddrinfo(host[0] ? host : NULL, port, &hints, out);
	if (error != 0)
		return ft_error_set(FT_EINVAL, "listen \"%s\": %s", listen,
				    gai_strerror(error));
	return 0;
}

/* A listening, non-blocking socket on `ai`, or -1 with errno set. */
static int bind_one(const struct addrinfo *ai)
{
	int one = 1;
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* Bind the first candidate address that works; FT_EIO when none does. */
static int bind_listen(int *out, const ft_server_t *server)
{
	int saved = EADDRNOTAVAIL;

	for (const struct addrinfo *ai = server->addrs; ai; ai = ai->ai_next) {
		int fd = bind_one(ai);

		if (fd >= 0) {
			*out = fd;
			return 0;
		}
		saved = errno;
	}
	return ft_error_set(FT_EIO, "listen \"%s\": %s", server->listen,
			    strerror(saved));
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* ---- routes ---- */

static int path_matches(const route_t *r, const char *path)
{
	if (r->prefix)
		return strncmp(path, r->path, r->path_len) == 0;
	return strcmp(path, r->path) == 0;
}

/* Exact routes win over prefixes, longer prefixes over shorter ones. */
static int route_beats(const route_t *r, const route_t *best)
{
	if (!best)
		return 1;
	if (best->prefix != r->prefix)
		return !r->prefix;
	return r->path_len > best->path_len;
}

/* Add `method` to the comma-separated `allow` list unless already there. */
static void allow_add(char *allow, size_t size, const char *method)
{
	size_t len = strlen(allow);
	const char *found = strstr(allow, method);
	size_t mlen = strlen(method);

	if (found && (found == allow || found[-1] == ' ') &&
	    (found[mlen] == '\0' || found[mlen] == ','))
		return;
	if (len + mlen + 3 > size)
		return;
	snprintf(allow + len, size - len, "%s%s", len ? ", " : "", method);
}

/*
 * The route for `method` `path`, or NULL; in that case `allow` lists the
 * methods that `path` does accept (empty: an unknown path).
 */
static const route_t *find_route(char *allow, size_t size,
				 const ft_server_t *server, const char *method,
				 const char *path)
{
	const route_t *best = NULL;

	allow[0] = '\0';
	for (size_t i = 0; i < server->routes_len; i++) {
		const route_t *r = &server->routes[i];

		if (!path_matches(r, path))
			continue;
		allow_add(allow, size, r->method);
		if (strcmp(r->method, method) == 0 && route_beats(r, best))
			best = r;
	}
	return best;
}

static int grow_routes(ft_server_t *server)
{
	size_t cap = server->routes_cap ? server->routes_cap * 2 : 8;
	route_t *routes = NULL;

	if (server->routes_len < server->routes_cap)
		return 0;
	routes = realloc(server->routes, cap * sizeof(*routes));
	if (!routes)
		return ft_error_set(FT_ENOMEM, "server route: out of memory");
	server->routes = routes;
	server->routes_cap = cap;
	return 0;
}

static int add_route(ft_server_t *server, const char *method, const char *path,
		     ft_http_handler_fn fn, void *payload, int offload)
{
	route_t r = {.fn = fn, .payload = payload, .offload = offload};
	int rc = 0;

	if (!server || !method || !method[0] || !path || path[0] != '/' || !fn)
		return ft_error_set(
		    FT_EINVAL,
		    "server route: need a method, a path starting with '/' and a handler");
	if (server->daemon)
		return ft_error_set(
		    FT_EINVAL,
		    "server route %s %s: the server is already started", method,
		    path);
	r.path_len = strlen(path);
	r.prefix = path[r.path_len - 1] == '*';
	r.path_len -= (size_t)r.prefix;
	r.method = strdup(method);
	r.path = strndup(path, r.path_len);
	if (!r.method || !r.path) {
		rc = ft_error_set(FT_ENOMEM, "server route: out of memory");
		goto cleanup;
	}
	rc = grow_routes(server);
	if (rc != 0)
		goto cleanup;
	server->routes[server->routes_len++] = r;
	r.method = r.path = NULL;
cleanup:
	free(r.method);
	free(r.path);
	return rc;
}

int ft_server_route(ft_server_t *server, const char *method, const char *path,
		    ft_http_handler_fn fn, void *payload)
{
	return add_route(server, method, path, fn, payload, 0);
}

int ft_server_route_offload(ft_server_t *server, const char *method,
			    const char *path, ft_http_handler_fn fn,
			    void *payload)
{
	return add_route(server, method, path, fn, payload, 1);
}

/* ---- one request ---- */

/* "application/json", any case, optionally followed by parameters. */
static int is_json_content_type(const char *value)
{
	static const char json[] = "application/json";
	size_t n = sizeof(json) - 1;

	if (!value)
		return 0;
	value += strspn(value, " \t");
	if (strncasecmp(value, json, n) != 0)
		return 0;
	value += n;
	value += strspn(value, " \t");
	return *value == '\0' || *value == ';';
}

static void reject_too_large(request_state_t *state, size_t cap)
{
	state->rejected = 1;
	ft_http_reply_error(&state->reject, 400, "too_large",
			    "request body exceeds %zu bytes", cap);
}

/* The request's Content-Length, or -1 when it has none (chunked). */
static long long content_length(const request_source_t *src)
{
	const char *value =
	    source_value(src, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (!value)
		return -1;
	return strtoll(value, NULL, 10);
}

/* Make room for `len` body bytes and the NUL after them. */
static int reserve_body(request_state_t *state, size_t len)
{
	size_t cap = state->body_cap ? state->body_cap : 1024;
	char *body = NULL;

	if (len < state->body_cap)
		return 0;
	while (cap <= len)
		cap *= 2;
	body = realloc(state->body, cap);
	if (!body)
		return FT_ENOMEM;
	state->body = body;
	state->body_cap = cap;
	return 0;
}

/* Reject a request whose route is unknown or refuses its Content-Type. */
static void check_route(request_state_t *state, const request_source_t *src,
			const char *method, const char *url)
{
	const char *type =
	    source_value(src, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);

	if (!state->route && !state->allow[0])
		ft_http_reply_error(&state->reject, 404, "not_found",
				    "no route for %s %s", method, url);
	else if (!state->route)
		ft_http_reply_error(&state->reject, 405, "method_not_allowed",
				    "%s %s not allowed, use %s", method, url,
				    state->allow);
	else if (strcmp(state->route->method, "POST") == 0 &&
		 !is_json_content_type(type))
		ft_http_reply_error(&state->reject, 400, "bad_content_type",
				    "expected application/json, got \"%s\"",
				    type ? type : "");
	else
		return;
	state->rejected = 1;
}

/* Whether the client waits for "100 Continue" before sending the body. */
static int expects_continue(const request_source_t *src)
{
	const char *value =
	    source_value(src, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

	return value && strcasecmp(value, "100-continue") == 0;
}

/*
 * Refuse, with 403, a request that needs a client certificate and comes
 * without an acceptable one (tls.c decides). Returns 1 when refused.
 */
static int check_client(request_state_t *state, const ft_server_t *server,
			const request_source_t *src, const char *url)
{
	const union MHD_ConnectionInfo *info = NULL;
	char why[512];

	if (!server->tls)
		return 0;
	if (src->connection)
		info = MHD_get_connection_info(
		    src->connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (ft_tls_client_allowed(why, sizeof(why), server->tls,
				  info ? info->tls_session : NULL, url))
		return 0;
	state->rejected = 1;
	ft_http_reply_error(&state->reject, 403, "forbidden", "%s", why);
	return 1;
}

/*
 * What the headers decide: the route, or a pending rejection. Returns 1 when
 * the rejection must be sent now, before any body is read, and -1 without
 * memory.
 *
 * A refusal is sent at once when the client waits for "100 Continue" (it then
 * never sends the body), and so is a Content-Length too big to drain.
 * Otherwise the body is already on its way, like kube-scheduler's (Go
 * sends no Expect): closing now would reset the connection under the unread
 * body and the client could lose the reply, so the body is drained instead.
 * Memory for the body is reserved from Content-Length only up to
 * RESERVE_MAX_BYTES: a client may announce a body it never sends.
 */
static int check_headers(request_state_t *state, const ft_server_t *server,
			 const request_source_t *src, const char *method,
			 const char *url)
{
	long long length = content_length(src);

	if (check_client(state, server, src, url) != 0)
		return expects_continue(src) ||
		       (length > 0 &&
			(unsigned long long)length > DRAIN_MAX_BYTES);
	if (length > 0 && (unsigned long long)length > server->max_body_bytes) {
		reject_too_large(state, server->max_body_bytes);
		return expects_continue(src) ||
		       (unsigned long long)length > DRAIN_MAX_BYTES;
	}
	state->route =
	    find_route(state->allow, sizeof(state->allow), server, method, url);
	check_route(state, src, method, url);
	if (state->rejected)
		return expects_continue(src);
	if (length > 0 && reserve_body(state, (size_t)length < RESERVE_MAX_BYTES
						  ? (size_t)length
						  : RESERVE_MAX_BYTES) != 0)
		return -1;
	return 0;
}

/* Take a piece of body: keep it, or count it as thrown away. */
static enum MHD_Result take_upload(request_state_t *state, size_t cap,
				   const char *data, size_t *size)
{
	size_t n = *size;

	*size = 0;
	if (!state->rejected && n > cap - state->body_len) {
		free(state->body);
		state->body = NULL;
		state->body_len = state->body_cap = 0;
		reject_too_large(state, cap);
	}
	if (state->rejected) {
		state->discarded += n;
		if (state->discarded <= DRAIN_MAX_BYTES)
			return MHD_YES;
		ft_log(
		    FT_LOG_WARN, NULL, NULL, NULL, "too_large",
		    "closing a connection still sending after %zu bytes of refused body",
		    state->discarded);
		return MHD_NO;
	}
	if (reserve_body(state, state->body_len + n) != 0)
		return MHD_NO;
	memcpy(state->body + state->body_len, data, n);
	state->body_len += n;
	return MHD_YES;
}

static void log_request(const char *method, const char *url,
			const ft_http_response_t *res)
{
	int failed = res->status >= 400;

	ft_log(failed ? FT_LOG_WARN : FT_LOG_DEBUG, url, NULL, NULL,
	       failed && res->body ? res->body : NULL,
	       "%s %s -> %d (%zu bytes)", method, url, res->status,
	       res->body_len);
}

/* Hand `res` (and its body) to libmicrohttpd; `res->body` is taken. */
static enum MHD_Result send_reply(struct MHD_Connection *connection,
				  ft_http_response_t *res, const char *allow)
{
	struct MHD_Response *response = NULL;
	enum MHD_Result result = MHD_NO;

	if (res->body)
		response = MHD_create_response_from_buffer_with_free_callback(
		    res->body_len, res->body, free);
	else
		response = MHD_create_response_from_buffer(
		    0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!response)
		goto cleanup;
	res->body = NULL;
	if (MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
				    res->content_type
					? res->content_type
					: DEFAULT_CONTENT_TYPE) != MHD_YES ||
	    (allow && allow[0] &&
	     MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow) !=
		 MHD_YES))
		goto cleanup;
	result =
	    MHD_queue_response(connection, (unsigned)res->status, response);
cleanup:
	free(res->body);
	res->body = NULL;
	if (response)
		MHD_destroy_response(response);
	return result;
}

static enum MHD_Result send_rejection(struct MHD_Connection *connection,
				      request_state_t *state,
				      const char *method, const char *url)
{
	log_request(method, url, &state->reject);
	return send_reply(connection, &state->reject,
			  state->reject.status == 405 ? state->allow : NULL);
}

/* Run the route's handler on the complete body; `out` gets its reply. */
static void run_handler(ft_http_response_t *out, request_state_t *state,
			const request_source_t *src, const char *method,
			const char *url)
{
	ft_http_request_t req = {
	    .method = method,
	    .path = url,
	    .content_type = source_value(src, MHD_HEADER_KIND,
					 MHD_HTTP_HEADER_CONTENT_TYPE),
	    .body = "",
	    .body_len = state->body_len,
	    .connection = (void *)src,
	};

	out->status = 200;
	if (state->body) {
		state->body[state->body_len] = '\0';
		req.body = state->body;
	}
	state->route->fn(out, &req, state->route->payload);
	if (out->status < 100 || out->status > 599)
		ft_http_reply_error(out, 500, "internal",
				    "handler for %s %s set status %d", method,
				    url, out->status);
	log_request(method, url, out);
}

/* Run the route's handler on the complete body and send what it made. */
static enum MHD_Result dispatch(struct MHD_Connection *connection,
				request_state_t *state, const char *method,
				const char *url)
{
	ft_http_response_t res = {.status = 200};
	request_source_t src = {.connection = connection};

	run_handler(&res, state, &src, method, url);
	return send_reply(connection, &res, NULL);
}

#define container_of(ptr, type, member)                                        \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/*
 * An offload thread runs the handler of a suspended request (or, cancelled
 * as the server stops, refuses it) and hands the connection back.
 */
static void run_offloaded(ft_offload_job_t *job, bool cancelled)
{
	request_state_t *state = container_of(job, request_state_t, job);
	request_source_t src = {.connection = state->connection};

	if (cancelled) {
		ft_http_reply_error(&state->deferred, 503, "unavailable",
				    "the server is stopping");
		log_request(state->method, state->url, &state->deferred);
	} else {
		run_handler(&state->deferred, state, &src, state->method,
			    state->url);
	}
	atomic_store(&state->deferred_state, DEFER_DONE);
	MHD_resume_connection(state->connection);
}

/*
 * An offloaded route: the first call suspends the connection and queues
 * the handler; libmicrohttpd calls again once it is resumed, and the reply
 * is sent then. The connection is suspended before the job is queued, so
 * that the job never resumes a connection not yet suspended.
 */
static enum MHD_Result defer(ft_server_t *server,
			     struct MHD_Connection *connection,
			     request_state_t *state, const char *method,
			     const char *url)
{
	int phase = atomic_load(&state->deferred_state);

	if (phase == DEFER_DONE)
		return send_reply(connection, &state->deferred, NULL);
	if (phase == DEFER_RUNNING)
		return MHD_YES;
	state->connection = connection;
	state->method = method;
	state->url = url;
	state->job.run = run_offloaded;
	atomic_fetch_add(&server->deferred_open, 1);
	atomic_store(&state->deferred_state, DEFER_RUNNING);
	MHD_suspend_connection(connection);
	if (!ft_offload_submit(server->offload, &state->job))
		run_offloaded(&state->job, true);
	return MHD_YES;
}

/* The per-client record of `connection` (its socket context), or NULL. */
static ft_client_conn_t *client_conn(struct MHD_Connection *connection)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
	    connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

/* Connections opened and closed, for the per-client cap. */
static void on_connection(void *cls, struct MHD_Connection *connection,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	ft_server_t *server = cls;
	const union MHD_ConnectionInfo *addr, *fd;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		ft_clients_closed(server->clients, *socket_context);
		*socket_context = NULL;
		return;
	}
	addr = MHD_get_connection_info(connection,
				       MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	fd = MHD_get_connection_info(connection,
				     MHD_CONNECTION_INFO_CONNECTION_FD);
	if (addr && fd)
		*socket_context = ft_clients_opened(
		    server->clients, addr->client_addr, fd->connect_fd);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	ft_server_t *server = cls;
	request_state_t *state = *con_cls;
	request_source_t src = {.connection = connection};
	int now;

	if (!state) {
		state = calloc(1, sizeof(*state));
		if (!state)
			return MHD_NO;
		*con_cls = state;
		ft_clients_busy(server->clients, client_conn(connection), true);
		now = check_headers(state, server, &src, method, url);
		if (now < 0)
			return MHD_NO;
		return now ? send_rejection(connection, state, method, url)
			   : MHD_YES;
	}
	if (*upload_data_size)
		return take_upload(state, server->max_body_bytes, upload_data,
				   upload_data_size);
	if (state->rejected)
		return send_rejection(connection, state, method, url);
	if (state->route->offload && server->offload)
		return defer(server, connection, state, method, url);
	return dispatch(connection, state, method, url);
}

static void free_state(request_state_t *state)
{
	if (!state)
		return;
	free(state->reject.body);
	free(state->deferred.body);
	free(state->body);
	free(state);
}

static void on_completed(void *cls, struct MHD_Connection *connection,
			 void **con_cls, enum MHD_RequestTerminationCode toe)
{
	ft_server_t *server = cls;
	request_state_t *state = *con_cls;

	if (state)
		ft_clients_busy(server->clients, client_conn(connection),
				false);
	if (state && atomic_load(&state->deferred_state) != DEFER_NONE)
		atomic_fetch_sub(&server->deferred_open, 1);
	free_state(state);
	*con_cls = NULL;
}

/* The pending rejection becomes `out`, logged as on_request() sends it. */
static void take_rejection(ft_http_response_t *out, request_state_t *state,
			   const char *method, const char *path)
{
	log_request(method, path, &state->reject);
	*out = state->reject;
	state->reject.body = NULL;
}

int ft_server_handle(ft_http_response_t *out, const ft_server_t *server,
		     const char *method, const char *path,
		     const char *const *headers, const char *const *query,
		     const char *body, size_t body_len)
{
	request_source_t src = {.headers = headers, .query = query};
	request_state_t *state = calloc(1, sizeof(*state));
	size_t left = body_len;
	int now, rc = 0;

	memset(out, 0, sizeof(*out));
	if (!state)
		return ft_error_set(FT_ENOMEM, "http: out of memory");
	now = check_headers(state, server, &src, method, path);
	if (now < 0) {
		rc = ft_error_set(FT_ENOMEM, "http: out of memory");
	} else if (!now && left &&
		   take_upload(state, server->max_body_bytes, body, &left) !=
		       MHD_YES) {
		rc = ft_error_set(
		    FT_EIO, "http: connection closed while reading the body");
	} else if (now || state->rejected) {
		take_rejection(out, state, method, path);
	} else {
		run_handler(out, state, &src, method, path);
	}
	free_state(state);
	return rc;
}

/* libmicrohttpd's own error messages, as warnings in our log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	len = strlen(msg);
	while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
		msg[--len] = '\0';
	ft_log(FT_LOG_WARN, NULL, NULL, NULL, NULL, "microhttpd: %s", msg);
}

/* ---- server lifetime ---- */

/* Read the TLS files, when there are any, once libmicrohttpd can use them. */
static int new_tls(ft_server_t *server, const ft_server_options_t *opts)
{
	int wants_tls = (opts->tls_cert_file && opts->tls_cert_file[0]) ||
			(opts->tls_key_file && opts->tls_key_file[0]);

	if (wants_tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return ft_error_set(
		    FT_EUNAVAIL,
		    "listen \"%s\": TLS asked for, but this libmicrohttpd was built without it",
		    opts->listen);
	return ft_tls_new(&server->tls, opts);
}

int ft_server_new(ft_server_t **out, const ft_server_options_t *opts)
{
	ft_server_t *server = NULL;
	int rc = 0;

	*out = NULL;
	if (!opts || !opts->listen || opts->max_body_bytes == 0)
		return ft_error_set(
		    FT_EINVAL,
		    "server: need a listen address and a body cap above 0");
	server = calloc(1, sizeof(*server));
	if (!server || !(server->listen = strdup(opts->listen))) {
		rc = ft_error_set(FT_ENOMEM, "server: out of memory");
		goto cleanup;
	}
	rc = resolve_listen(&server->addrs, opts->listen);
	if (rc == 0)
		rc = new_tls(server, opts);
	if (rc != 0)
		goto cleanup;
	server->max_body_bytes = opts->max_body_bytes;
	server->threads = opts->threads;
	server->max_connections = opts->max_connections
				      ? opts->max_connections
				      : FT_SERVER_MAX_CONNECTIONS;
	server->max_per_client = opts->max_connections_per_client;
	server->timeout_s = opts->connection_timeout_s
				? opts->connection_timeout_s
				: FT_SERVER_TIMEOUT_S;
	server->offload_threads = opts->offload_threads
				      ? opts->offload_threads
				      : FT_SERVER_OFFLOAD_THREADS;
	*out = server;
	server = NULL;
cleanup:
	ft_server_free(server);
	return rc;
}

/*
 * libmicrohttpd splits the connection limit between the workers, so there
 * are never more workers than connections.
 */
static unsigned worker_threads(const ft_server_t *server)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = server->threads ? server->threads
		     : cores > 0     ? (unsigned)cores
				     : 1;

	return n < server->max_connections ? n : server->max_connections;
}

static unsigned daemon_flags(const ft_server_t *server)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;

	if (server->tls)
		flags |= MHD_USE_TLS;
	if (server->offload)
		flags |= MHD_ALLOW_SUSPEND_RESUME;
	if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES)
		return flags | MHD_USE_EPOLL;
	return flags | MHD_USE_POLL;
}

/*
 * The options that vary: the connection limits, the thread pool and the TLS
 * credentials, which libmicrohttpd copies into GnuTLS when it starts. `out`
 * holds 8 items.
 */
static void daemon_options(struct MHD_OptionItem *out,
			   const ft_server_t *server)
{
	unsigned threads = worker_threads(server);
	size_t n = 0;

	out[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
					   server->max_connections, NULL};
	out[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
					   server->timeout_s, NULL};
	/* A pool of 1 is refused: one worker is the polling thread itself. */
	if (threads > 1)
		out[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE,
						   threads, NULL};
	if (server->tls) {
		out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
						   server->tls->cert};
		out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
						   server->tls->key};
	}
	if (server->tls && server->tls->client_ca)
		out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST,
						   0, server->tls->client_ca};
	out[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

/*
 * Start libmicrohttpd on the listening socket `fd`, which it then owns: it
 * closes it when stopped and on most of its own failure paths, so the caller
 * must not close it again even on failure (it could close a descriptor that
 * another thread has just opened under the same number).
 */
static int start_daemon(ft_server_t *server, int fd)
{
	struct MHD_OptionItem options[8];

	daemon_options(options, server);
	server->daemon = MHD_start_daemon(
	    daemon_flags(server), 0, NULL, NULL, on_request, server,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, server, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
	    server, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
	if (!server->daemon)
		return ft_error_set(
		    FT_EIO, "listen \"%s\": libmicrohttpd did not start",
		    server->listen);
	return 0;
}

/*
 * Make room for the connection limit under RLIMIT_NOFILE, raising the soft
 * limit towards the hard one as Go programs do: a default soft limit of 1024
 * would otherwise refuse connections below the limit (accept fails with
 * EMFILE). Short of room, the server still starts and says so.
 */
static void reserve_fds(const ft_server_t *server)
{
	struct rlimit lim;
	rlim_t want = (rlim_t)server->max_connections + SPARE_FDS;
	rlim_t had;

	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= want)
		return;
	had = lim.rlim_cur;
	lim.rlim_cur = lim.rlim_max < want ? lim.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
		lim.rlim_cur = had;
	if (lim.rlim_cur < want)
		ft_log(
		    FT_LOG_WARN, NULL, NULL, NULL, NULL,
		    "listen \"%s\": %u connections allowed, but only %llu file descriptors (RLIMIT_NOFILE)",
		    server->listen, server->max_connections,
		    (unsigned long long)lim.rlim_cur);
}

/* The offload threads, when some route is offloaded. */
static int start_offload(ft_server_t *server)
{
	for (size_t i = 0; i < server->routes_len; i++)
		if (server->routes[i].offload)
			return ft_offload_new(&server->offload,
					      server->offload_threads);
	return 0;
}

int ft_server_start(ft_server_t *server)
{
	unsigned port;
	int fd = -1;
	int rc = 0;

	if (!server || server->daemon)
		return ft_error_set(FT_EINVAL, "server: missing or started");
	if ((rc = start_offload(server)) < 0 ||
	    (rc = ft_clients_new(&server->clients, server->max_per_client)) < 0)
		return rc;
	reserve_fds(server);
	rc = bind_listen(&fd, server);
	if (rc != 0)
		return rc;
	port = bound_port(fd);
	rc = start_daemon(server, fd);
	if (rc != 0)
		return rc;
	server->port = port;
	ft_log(FT_LOG_INFO, NULL, NULL, NULL, NULL,
	       "listening on %s (port %u, %s)", server->listen, server->port,
	       !server->tls		? "plain HTTP"
	       : server->tls->client_ca ? "HTTPS, client certificates required"
					: "HTTPS");
	return 0;
}

void ft_server_connections_closed(const ft_server_t *server,
				  unsigned long *idle, unsigned long *refused)
{
	ft_clients_closed_counts(server ? server->clients : NULL, idle,
				 refused);
}

unsigned ft_server_port(const ft_server_t *server)
{
	return server ? server->port : 0;
}

/*
 * Give the offloaded replies, all resumed once the offload threads have
 * stopped, up to DEFERRED_DRAIN_MS to go out: libmicrohttpd closes every
 * connection when it stops, sent or not.
 */
static void drain_deferred(ft_server_t *server)
{
	for (unsigned waited = 0;
	     atomic_load(&server->deferred_open) && waited < DEFERRED_DRAIN_MS;
	     waited += 5)
		usleep(5 * 1000);
}

void ft_server_free(ft_server_t *server)
{
	if (!server)
		return;
	/* Every suspended connection is resumed before libmicrohttpd stops. */
	ft_offload_stop(server->offload);
	if (server->daemon)
		drain_deferred(server);
	if (server->daemon)
		MHD_stop_daemon(server->daemon);
	ft_offload_free(server->offload);
	ft_clients_free(server->clients);
	for (size_t i = 0; i < server->routes_len; i++) {
		free(server->routes[i].method);
		free(server->routes[i].path);
	}
	free(server->routes);
	if (server->addrs)
		freeaddrinfo(server->addrs);
	ft_tls_free(server->tls);
	free(server->listen);
	free(server);
}
