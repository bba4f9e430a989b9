/*
 * Tests for the HTTP server: real requests over loopback with libcurl against
 * a server listening on 127.0.0.1:0, covering routing, the body cap, the JSON
 * Content-Type rule, keep-alive, concurrency, the connection limits and
 * timeout, and the per-kind error counters; the same steps without a
 * connection through ft_server_handle();
 * then HTTPS with certificates made for the run by the openssl command in a
 * temporary directory: verification against the CA, HTTP/1.1 when the client
 * offers h2, plain HTTP refused, client certificates, and bad TLS files.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/server.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY_CAP 1024

typedef struct fixture {
	ft_server_t *server;
	char base[64];
	atomic_int calls;
	const char *ca_file;	 /* HTTPS: verify the server against it */
	const char *client_cert; /* HTTPS: present this client certificate */
	const char *client_key;
} fixture_t;

typedef struct reply {
	long status;
	long http_version; /* CURL_HTTP_VERSION_1_1, ... */
	CURLcode curl_code;
	char *body;
	size_t body_len;
	char allow[128];
	char content_type[128];
} reply_t;

typedef struct call {
	const char *method;
	const char *path;
	const char *content_type; /* NULL: no Content-Type header */
	const char *body;	  /* NULL: no body */
	size_t body_len;
	int chunked;
	size_t chunk; /* bytes per chunk when chunked; 0: 700 */
	int expect;   /* 1: "Expect: 100-continue", -1: none, 0: curl decides */
	long timeout_ms; /* 0: 10 s */
} call_t;

typedef struct upload {
	const char *data;
	size_t len;
	size_t pos;
	size_t chunk;
} upload_t;

/* ---- handlers ---- */

static void handle_health(ft_http_response_t *out, const ft_http_request_t *req,
			  void *payload)
{
	fixture_t *fx = payload;

	atomic_fetch_add(&fx->calls, 1);
	ft_http_reply_text(out, 200, "text/plain", "ok");
}

/* Echo the body back, byte for byte, after checking it is NUL-terminated. */
static void handle_echo(ft_http_response_t *out, const ft_http_request_t *req,
			void *payload)
{
	if (req->body[req->body_len] != '\0') {
		ft_http_reply_error(out, 500, "internal",
				    "body not terminated");
		return;
	}
	out->body = malloc(req->body_len + 1);
	if (!out->body)
		return;
	memcpy(out->body, req->body, req->body_len + 1);
	out->body_len = req->body_len;
}

static void handle_node(ft_http_response_t *out, const ft_http_request_t *req,
			void *payload)
{
	const char *node = ft_http_request_query(req, "node");
	char text[256];

	snprintf(text, sizeof(text), "prefix %s node=%s", req->path,
		 node ? node : "(none)");
	ft_http_reply_text(out, 200, "text/plain", text);
}

static void handle_special(ft_http_response_t *out,
			   const ft_http_request_t *req, void *payload)
{
	ft_http_reply_text(out, 200, "text/plain", "exact");
}

static void handle_bad_status(ft_http_response_t *out,
			      const ft_http_request_t *req, void *payload)
{
	out->status = 42;
}

/* ---- client ---- */

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
	reply_t *r = userdata;
	char *body = realloc(r->body, r->body_len + size * n + 1);

	if (!body)
		return 0;
	memcpy(body + r->body_len, data, size * n);
	r->body = body;
	r->body_len += size * n;
	r->body[r->body_len] = '\0';
	return size * n;
}

static void keep_header(char *dst, size_t size, const char *line, size_t len,
			const char *name)
{
	size_t nlen = strlen(name);

	if (len <= nlen || strncasecmp(line, name, nlen) != 0)
		return;
	line += nlen;
	len -= nlen;
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
		len--;
	if (len >= size)
		len = size - 1;
	memcpy(dst, line, len);
	dst[len] = '\0';
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
	reply_t *r = userdata;

	keep_header(r->allow, sizeof(r->allow), data, size * n, "Allow: ");
	keep_header(r->content_type, sizeof(r->content_type), data, size * n,
		    "Content-Type: ");
	return size * n;
}

static size_t on_read(char *buf, size_t size, size_t n, void *userdata)
{
	upload_t *u = userdata;
	size_t left = u->len - u->pos;
	size_t take = size * n < left ? size * n : left;

	if (take > u->chunk)
		take = u->chunk;
	memcpy(buf, u->data + u->pos, take);
	u->pos += take;
	return take;
}

static void set_body(CURL *curl, const call_t *c, upload_t *u)
{
	if (!c->body)
		return;
	if (!c->chunked) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, c->body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)c->body_len);
		return;
	}
	u->data = c->body;
	u->len = c->body_len;
	u->chunk = c->chunk ? c->chunk : 700;
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(curl, CURLOPT_READDATA, u);
}

/*
 * Over HTTPS, offer h2 and HTTP/1.1 by ALPN as kube-scheduler's Go client
 * does, trust only the test CA, and present a client certificate if set.
 */
static void set_tls(CURL *curl, const fixture_t *fx)
{
	if (!fx->ca_file)
		return;
	curl_easy_setopt(curl, CURLOPT_HTTP_VERSION,
			 (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(curl, CURLOPT_CAINFO, fx->ca_file);
	curl_easy_setopt(curl, CURLOPT_CAPATH, NULL);
	if (fx->client_cert) {
		curl_easy_setopt(curl, CURLOPT_SSLCERT, fx->client_cert);
		curl_easy_setopt(curl, CURLOPT_SSLKEY, fx->client_key);
	}
}

/* Run `c` on `curl` (which may be reused for keep-alive); 0 on success. */
static int perform(reply_t *out, CURL *curl, const fixture_t *fx,
		   const call_t *c)
{
	struct curl_slist *headers = NULL;
	upload_t upload = {0};
	char url[256], type[160];
	CURLcode rc;

	memset(out, 0, sizeof(*out));
	snprintf(url, sizeof(url), "%s%s", fx->base, c->path);
	curl_easy_reset(curl);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, c->method);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
			 c->timeout_ms > 0 ? c->timeout_ms : 10000L);
	if (c->content_type) {
		snprintf(type, sizeof(type), "Content-Type: %s",
			 c->content_type);
		headers = curl_slist_append(headers, type);
	} else if (c->body) {
		headers = curl_slist_append(headers, "Content-Type:");
	}
	if (c->chunked)
		headers =
		    curl_slist_append(headers, "Transfer-Encoding: chunked");
	if (c->expect)
		headers = curl_slist_append(
		    headers,
		    c->expect > 0 ? "Expect: 100-continue" : "Expect:");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	set_body(curl, c, &upload);
	set_tls(curl, fx);
	rc = curl_easy_perform(curl);
	out->curl_code = rc;
	if (rc == CURLE_OK) {
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
		curl_easy_getinfo(curl, CURLINFO_HTTP_VERSION,
				  &out->http_version);
	}
	curl_slist_free_all(headers);
	return rc == CURLE_OK ? 0 : -1;
}

static reply_t request(const fixture_t *fx, const call_t *c)
{
	CURL *curl = curl_easy_init();
	reply_t r;

	assert_non_null(curl);
	assert_int_equal(perform(&r, curl, fx, c), 0);
	curl_easy_cleanup(curl);
	return r;
}

/* The "error" string of a JSON error reply (must parse as JSON). */
static void assert_error_body(const reply_t *r, const char *expect_prefix)
{
	cJSON *json = cJSON_Parse(r->body);
	cJSON *error = cJSON_GetObjectItemCaseSensitive(json, "error");

	assert_non_null(json);
	assert_true(cJSON_IsString(error));
	assert_string_equal(r->content_type, "application/json");
	if (strncmp(error->valuestring, expect_prefix, strlen(expect_prefix)))
		fail_msg("error \"%s\" does not start with \"%s\"",
			 error->valuestring, expect_prefix);
	cJSON_Delete(json);
}

/* ---- fixtures ---- */

static int start_server(fixture_t *fx)
{
	ft_server_options_t opts = {
	    .listen = "127.0.0.1:0", .max_body_bytes = BODY_CAP, .threads = 4};
	ft_server_t *s = NULL;

	if (ft_server_new(&s, &opts) != 0 ||
	    ft_server_route(s, "GET", "/healthz", handle_health, fx) != 0 ||
	    ft_server_route(s, "POST", "/filter", handle_echo, fx) != 0 ||
	    ft_server_route(s, "GET", "/debug/nodes/*", handle_node, fx) != 0 ||
	    ft_server_route(s, "GET", "/debug/nodes/special", handle_special,
			    fx) != 0 ||
	    ft_server_route(s, "GET", "/bad-status", handle_bad_status, fx) ||
	    ft_server_start(s) != 0) {
		ft_server_free(s);
		return -1;
	}
	fx->server = s;
	snprintf(fx->base, sizeof(fx->base), "http://127.0.0.1:%u",
		 ft_server_port(s));
	return 0;
}

static int setup(void **state)
{
	fixture_t *fx = calloc(1, sizeof(*fx));

	if (!fx || start_server(fx) != 0) {
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture_t *fx = *state;

	ft_server_free(fx->server);
	free(fx);
	return 0;
}

static void reply_dispose(reply_t *r)
{
	free(r->body);
	r->body = NULL;
}

/* ---- routing ---- */

static void test_server__exact_route(void **state)
{
	fixture_t *fx = *state;
	reply_t r = request(fx, &(call_t){.method = "GET", .path = "/healthz"});

	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok");
	assert_string_equal(r.content_type, "text/plain");
	assert_true(ft_server_port(fx->server) > 0);
	reply_dispose(&r);
}

static void test_server__prefix_route(void **state)
{
	fixture_t *fx = *state;
	reply_t r = request(
	    fx, &(call_t){.method = "GET", .path = "/debug/nodes/gpu-1"});

	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "prefix /debug/nodes/gpu-1 node=(none)");
	reply_dispose(&r);

	/* An exact route wins over a prefix that also matches. */
	r = request(fx,
		    &(call_t){.method = "GET", .path = "/debug/nodes/special"});
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "exact");
	reply_dispose(&r);
}

static void test_server__not_found(void **state)
{
	fixture_t *fx = *state;
	reply_t r = request(fx, &(call_t){.method = "GET", .path = "/nope"});

	assert_int_equal(r.status, 404);
	assert_error_body(&r, "not_found: ");
	reply_dispose(&r);

	/* A prefix route does not match its parent path. */
	r = request(fx, &(call_t){.method = "GET", .path = "/debug/nodes"});
	assert_int_equal(r.status, 404);
	reply_dispose(&r);

	/* A client waiting for "100 Continue" is answered before its body. */
	r = request(fx, &(call_t){.method = "POST",
				  .path = "/nope",
				  .content_type = "application/json",
				  .body = "{}",
				  .body_len = 2,
				  .expect = 1});
	assert_int_equal(r.status, 404);
	assert_error_body(&r, "not_found: no route for POST /nope");
	reply_dispose(&r);
}

static void test_server__method_not_allowed(void **state)
{
	fixture_t *fx = *state;
	reply_t r = request(fx, &(call_t){.method = "GET", .path = "/filter"});

	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "POST");
	assert_error_body(&r, "method_not_allowed: GET /filter");
	reply_dispose(&r);

	r = request(
	    fx, &(call_t){.method = "DELETE", .path = "/debug/nodes/special"});
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET");
	reply_dispose(&r);
}

static void test_server__bad_handler_status(void **state)
{
	fixture_t *fx = *state;
	reply_t r =
	    request(fx, &(call_t){.method = "GET", .path = "/bad-status"});

	assert_int_equal(r.status, 500);
	assert_error_body(&r, "internal: ");
	reply_dispose(&r);
}

/* ---- bodies ---- */

static void test_server__post_requires_json(void **state)
{
	fixture_t *fx = *state;
	const char *body = "{\"Pod\":null}";
	reply_t r = request(fx, &(call_t){.method = "POST",
					  .path = "/filter",
					  .content_type = "text/plain",
					  .body = body,
					  .body_len = strlen(body)});

	assert_int_equal(r.status, 400);
	assert_error_body(&r, "bad_content_type: ");
	reply_dispose(&r);

	r = request(fx, &(call_t){.method = "POST",
				  .path = "/filter",
				  .body = body,
				  .body_len = strlen(body)});
	assert_int_equal(r.status, 400);
	assert_error_body(&r, "bad_content_type: ");
	reply_dispose(&r);

	/* Parameters and any letter case are fine. */
	r = request(fx,
		    &(call_t){.method = "POST",
			      .path = "/filter",
			      .content_type = "Application/JSON; charset=utf-8",
			      .body = body,
			      .body_len = strlen(body)});
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, body);
	reply_dispose(&r);
}

/*
 * A Content-Length above the cap, from a client waiting for "100 Continue", is
 * refused before the body is sent; the connection is closed after the reply
 * since the body was never consumed.
 */
static void test_server__too_large_content_length(void **state)
{
	fixture_t *fx = *state;
	char *body = malloc(4 * BODY_CAP);
	CURL *curl = curl_easy_init();
	call_t post = {.method = "POST",
		       .path = "/filter",
		       .content_type = "application/json",
		       .body = body,
		       .body_len = 4 * BODY_CAP,
		       .expect = 1};
	long connects = -1;
	reply_t r;

	assert_non_null(body);
	assert_non_null(curl);
	memset(body, 'x', 4 * BODY_CAP);
	assert_int_equal(perform(&r, curl, fx, &post), 0);
	assert_int_equal(r.status, 400);
	assert_error_body(&r, "too_large: request body exceeds 1024 bytes");
	reply_dispose(&r);

	/* Exactly the cap is accepted, on a new connection. */
	post.body_len = BODY_CAP;
	assert_int_equal(perform(&r, curl, fx, &post), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, BODY_CAP);
	curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
	assert_int_equal(connects, 1);
	reply_dispose(&r);
	curl_easy_cleanup(curl);
	free(body);
}

/*
 * Like kube-scheduler: no "Expect: 100-continue", the body follows the headers
 * at once. It is drained so that the client reads the 400, and the connection
 * stays open.
 */
static void test_server__too_large_without_expect(void **state)
{
	size_t len = 256 * BODY_CAP;
	fixture_t *fx = *state;
	char *body = malloc(len);
	CURL *curl = curl_easy_init();
	long connects = -1;
	reply_t r;

	assert_non_null(body);
	assert_non_null(curl);
	memset(body, 'y', len);
	assert_int_equal(perform(&r, curl, fx,
				 &(call_t){.method = "POST",
					   .path = "/filter",
					   .content_type = "application/json",
					   .body = body,
					   .body_len = len,
					   .expect = -1}),
			 0);
	assert_int_equal(r.status, 400);
	assert_error_body(&r, "too_large: request body exceeds 1024 bytes");
	reply_dispose(&r);
	assert_int_equal(
	    perform(&r, curl, fx,
		    &(call_t){.method = "GET", .path = "/healthz"}),
	    0);
	assert_int_equal(r.status, 200);
	curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
	assert_int_equal(connects, 0);
	reply_dispose(&r);
	curl_easy_cleanup(curl);
	free(body);
}

/*
 * A chunked body is refused only once it passes the cap; the rest is read and
 * thrown away, so the connection survives for the next request.
 */
static void test_server__too_large_chunked(void **state)
{
	fixture_t *fx = *state;
	char *body = malloc(8 * BODY_CAP);
	CURL *curl = curl_easy_init();
	long connects = -1;
	reply_t r;

	assert_non_null(body);
	assert_non_null(curl);
	memset(body, 'z', 8 * BODY_CAP);
	assert_int_equal(perform(&r, curl, fx,
				 &(call_t){.method = "POST",
					   .path = "/filter",
					   .content_type = "application/json",
					   .body = body,
					   .body_len = 8 * BODY_CAP,
					   .chunked = 1}),
			 0);
	assert_int_equal(r.status, 400);
	assert_error_body(&r, "too_large: request body exceeds 1024 bytes");
	reply_dispose(&r);
	assert_int_equal(
	    perform(&r, curl, fx,
		    &(call_t){.method = "GET", .path = "/healthz"}),
	    0);
	assert_int_equal(r.status, 200);
	curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
	assert_int_equal(connects, 0);
	reply_dispose(&r);
	curl_easy_cleanup(curl);
	free(body);
}

/* A client that keeps sending long after the refusal loses the connection. */
static void test_server__too_large_endless(void **state)
{
	fixture_t *fx = *state;
	size_t len = (size_t)10 << 20;
	char *body = malloc(len);
	CURL *curl = curl_easy_init();
	reply_t r;

	assert_non_null(body);
	assert_non_null(curl);
	memset(body, 'w', len);
	assert_int_not_equal(
	    perform(&r, curl, fx,
		    &(call_t){.method = "POST",
			      .path = "/filter",
			      .content_type = "application/json",
			      .body = body,
			      .body_len = len,
			      .chunked = 1,
			      .chunk = 64 * 1024}),
	    0);
	reply_dispose(&r);
	curl_easy_cleanup(curl);
	free(body);

	/* The server is fine afterwards. */
	r = request(fx, &(call_t){.method = "GET", .path = "/healthz"});
	assert_int_equal(r.status, 200);
	reply_dispose(&r);
}

static void test_server__body_intact(void **state)
{
	fixture_t *fx = *state;
	const char *body =
	    "{\"Pod\":{\"metadata\":{\"name\":\"a\\u003cb\\u0026c\"}},\"NodeNames\":[\"n\\\"1\",\"\xc3\xa9\"]}";
	char big[BODY_CAP];
	reply_t r;

	r = request(fx, &(call_t){.method = "POST",
				  .path = "/filter",
				  .content_type = "application/json",
				  .body = body,
				  .body_len = strlen(body)});
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, strlen(body));
	assert_memory_equal(r.body, body, strlen(body));
	reply_dispose(&r);

	/* A chunked body within the cap arrives whole, in several pieces. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	r = request(fx, &(call_t){.method = "POST",
				  .path = "/filter",
				  .content_type = "application/json",
				  .body = big,
				  .body_len = sizeof(big),
				  .chunked = 1});
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, sizeof(big));
	assert_memory_equal(r.body, big, sizeof(big));
	reply_dispose(&r);

	/* No body at all is handed over as "". */
	r = request(fx, &(call_t){.method = "POST",
				  .path = "/filter",
				  .content_type = "application/json"});
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 0);
	reply_dispose(&r);
}

static void test_server__query(void **state)
{
	fixture_t *fx = *state;
	reply_t r = request(
	    fx, &(call_t){.method = "GET",
			  .path = "/debug/nodes/x?node=gpu%2D7&other=1"});

	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "prefix /debug/nodes/x node=gpu-7");
	reply_dispose(&r);
}

/* ---- without a connection ---- */

/* ft_server_handle() on the fixture's routes; the reply's body is returned. */
static char *handle(int *status, const fixture_t *fx, const char *method,
		    const char *path, const char *const *headers,
		    const char *const *query, const char *body)
{
	ft_http_response_t res;

	assert_int_equal(ft_server_handle(&res, fx->server, method, path,
					  headers, query, body,
					  body ? strlen(body) : 0),
			 0);
	*status = res.status;
	assert_non_null(res.body);
	return res.body;
}

static void test_server__handle_without_connection(void **state)
{
	fixture_t *fx = *state;
	const char *json[] = {"content-TYPE", "Application/JSON", NULL};
	const char *big[] = {"Content-Type", "application/json",
			     "Content-Length", "99999", NULL};
	const char *query[] = {"other", "1", "node", "gpu-7", NULL};
	size_t n = ((size_t)8 << 20) + BODY_CAP + 2;
	ft_http_response_t res;
	char *flood = NULL;
	char *body;
	int status;

	body = handle(&status, fx, "POST", "/filter", json, NULL, "{\"a\":1}");
	assert_int_equal(status, 200);
	assert_string_equal(body, "{\"a\":1}");
	free(body);
	body = handle(&status, fx, "GET", "/debug/nodes/x", NULL, query, NULL);
	assert_string_equal(body, "prefix /debug/nodes/x node=gpu-7");
	free(body);
	body = handle(&status, fx, "POST", "/filter", NULL, NULL, "{}");
	assert_int_equal(status, 400);
	assert_non_null(strstr(body, "bad_content_type"));
	free(body);
	body = handle(&status, fx, "PUT", "/filter", json, NULL, "{}");
	assert_int_equal(status, 405);
	free(body);
	body = handle(&status, fx, "POST", "/filter", big, NULL, "{}");
	assert_int_equal(status, 400);
	assert_non_null(strstr(body, "too_large"));
	free(body);

	/* A body over the cap, and over what is drained: no reply at all. */
	flood = malloc(n);
	assert_non_null(flood);
	memset(flood, ' ', n);
	assert_int_equal(ft_server_handle(&res, fx->server, "POST", "/filter",
					  json, NULL, flood, n),
			 FT_EIO);
	assert_null(res.body);
	free(flood);
}

/* ---- connections ---- */

struct gate;
static void handle_blocked(ft_http_response_t *out,
			   const ft_http_request_t *req, void *payload);

/*
 * A server on 127.0.0.1:0 with `opts` (listen and cap filled in), GET
 * /healthz and, when `gate` is set, POST /bind blocked on it, offloaded.
 */
static ft_server_t *start_gated(ft_server_options_t opts, fixture_t *fx,
				struct gate *gate)
{
	ft_server_t *s = NULL;

	opts.listen = "127.0.0.1:0";
	opts.max_body_bytes = BODY_CAP;
	assert_int_equal(ft_server_new(&s, &opts), 0);
	assert_int_equal(
	    ft_server_route(s, "GET", "/healthz", handle_health, fx), 0);
	if (gate)
		assert_int_equal(ft_server_route_offload(s, "POST", "/bind",
							 handle_blocked, gate),
				 0);
	assert_int_equal(ft_server_start(s), 0);
	fx->server = s;
	snprintf(fx->base, sizeof(fx->base), "http://127.0.0.1:%u",
		 ft_server_port(s));
	return s;
}

static ft_server_t *start_limited(ft_server_options_t opts, fixture_t *fx)
{
	return start_gated(opts, fx, NULL);
}

static int connect_raw(const ft_server_t *s)
{
	struct sockaddr_in addr = {.sin_family = AF_INET,
				   .sin_port =
				       htons((uint16_t)ft_server_port(s)),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)),
			 0);
	return fd;
}

/* Whether the server closes `fd` within `ms` (it never writes first). */
static int closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	return poll(&p, 1, ms) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `c` again, on one handle, until it is answered `status` (a connection
 * refused, closed or timed out is retried), for up to 10 s. */
static reply_t request_until(const fixture_t *fx, const call_t *c, long status)
{
	CURL *curl = curl_easy_init();
	double deadline = now_s() + 10;
	reply_t r = {0};

	assert_non_null(curl);
	while ((perform(&r, curl, fx, c) != 0 || r.status != status) &&
	       now_s() < deadline) {
		reply_dispose(&r);
		usleep(20 * 1000);
	}
	curl_easy_cleanup(curl);
	return r;
}

/* Send a request head whose body is still to come: busy until it does. */
static void start_request(int fd)
{
	static const char head[] = "POST /healthz HTTP/1.1\r\nHost: t\r\n"
				   "Content-Type: application/json\r\n"
				   "Content-Length: 10\r\n\r\n";

	assert_int_equal(send(fd, head, sizeof(head) - 1, 0),
			 (ssize_t)(sizeof(head) - 1));
}

/* The server closes `closed` and keeps `open1` and `open2`. */
static void assert_closed_not(int closed, int open1, int open2)
{
	assert_true(closed_within(closed, 2000));
	assert_false(closed_within(open1, 200));
	assert_false(closed_within(open2, 0));
}

/*
 * At the cap, a new connection from the same address closes the one idle
 * the longest; only when none is idle is the new one closed.
 */
static void test_server__per_client_limit(void **state)
{
	fixture_t fx = {0};
	ft_server_t *s = start_limited(
	    (ft_server_options_t){.threads = 2,
				  .max_connections_per_client = 2},
	    &fx);
	int a = connect_raw(s), b, c, d;
	unsigned long idle, refused;
	reply_t r;

	usleep(50 * 1000);
	b = connect_raw(s);
	usleep(50 * 1000);
	c = connect_raw(s);
	assert_closed_not(a, b, c);
	/* Both in the middle of a request: the newcomer goes. */
	start_request(b);
	start_request(c);
	usleep(100 * 1000);
	d = connect_raw(s);
	assert_closed_not(d, b, c);
	ft_server_connections_closed(s, &idle, &refused);
	assert_int_equal(idle, 1);
	assert_int_equal(refused, 1);
	close(a);
	close(b);
	close(c);
	close(d);
	/* Once the server has seen b and c close, a new connection is under
	 * the cap again. */
	r = request_until(&fx, &(call_t){.method = "GET", .path = "/healthz"},
			  200);
	assert_int_equal(r.status, 200);
	reply_dispose(&r);
	ft_server_free(s);
}

/* One keep-alive request on a new connection, left open: a leaking client. */
static int leak_connection(const ft_server_t *s)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
	int fd = connect_raw(s);
	char reply[512];
	size_t got = 0;

	assert_int_equal(send(fd, req, sizeof(req) - 1, 0),
			 (ssize_t)(sizeof(req) - 1));
	reply[0] = '\0';
	while (got < sizeof(reply) - 1 && !strstr(reply, "\r\n\r\nok")) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n =
		    poll(&p, 1, 5000) == 1
			? recv(fd, reply + got, sizeof(reply) - 1 - got, 0)
			: -1;
		if (n <= 0)
			fail_msg("no reply on a leaked connection");
		got += (size_t)n;
		reply[got] = '\0';
	}
	return fd;
}

/*
 * A co-located client that leaks a keep-alive connection per call cannot
 * lock out another client of its address (kube-scheduler beside it on
 * 127.0.0.1): every new connection gets in, and the leaker keeps at most
 * the cap.
 */
static void test_server__leaky_client_cannot_lock_out(void **state)
{
	fixture_t fx = {0};
	ft_server_t *s = start_limited(
	    (ft_server_options_t){.threads = 2,
				  .max_connections_per_client = 4},
	    &fx);
	int leaked[16], open = 0;
	reply_t r;

	for (int i = 0; i < 16; i++)
		leaked[i] = leak_connection(s);
	for (int i = 0; i < 8; i++) {
		r = request(&fx,
			    &(call_t){.method = "GET", .path = "/healthz"});
		assert_int_equal(r.status, 200);
		reply_dispose(&r);
	}
	usleep(100 * 1000);
	for (int i = 0; i < 16; i++) {
		open += !closed_within(leaked[i], 0);
		close(leaked[i]);
	}
	assert_true(open <= 4);
	ft_server_free(s);
}

static void test_server__connection_timeout(void **state)
{
	fixture_t fx = {0};
	ft_server_t *s = start_limited(
	    (ft_server_options_t){.threads = 1, .connection_timeout_s = 1},
	    &fx);
	double start = now_s();
	int fd = connect_raw(s);

	/* A connection that sends nothing is closed after about 1 s. */
	assert_true(closed_within(fd, 4000));
	assert_true(now_s() - start > 0.5);
	close(fd);
	ft_server_free(s);
}

static void test_server__keep_alive(void **state)
{
	fixture_t *fx = *state;
	const char *body = "{}";
	call_t post = {.method = "POST",
		       .path = "/filter",
		       .content_type = "application/json",
		       .body = body,
		       .body_len = 2};
	call_t missing = {.method = "GET", .path = "/missing"};
	CURL *curl = curl_easy_init();
	long connects = -1;
	reply_t r;

	assert_non_null(curl);
	assert_int_equal(perform(&r, curl, fx, &post), 0);
	assert_int_equal(r.status, 200);
	reply_dispose(&r);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    perform(&r, curl, fx, i == 1 ? &missing : &post), 0);
		assert_int_equal(r.status, i == 1 ? 404 : 200);
		curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
		assert_int_equal(connects, 0);
		reply_dispose(&r);
	}
	curl_easy_cleanup(curl);
}

#define CLIENT_THREADS	6
#define CLIENT_REQUESTS 25

static void *client_thread(void *arg)
{
	const fixture_t *fx = arg;
	CURL *curl = curl_easy_init();
	char body[64];
	long ok = 0;
	reply_t r;

	for (int i = 0; curl && i < CLIENT_REQUESTS; i++) {
		snprintf(body, sizeof(body), "{\"n\":%d}", i);
		call_t c = {.method = "POST",
			    .path = "/filter",
			    .content_type = "application/json",
			    .body = body,
			    .body_len = strlen(body)};
		if (perform(&r, curl, fx, &c) == 0 && r.status == 200 &&
		    r.body && strcmp(r.body, body) == 0)
			ok++;
		free(r.body);
	}
	curl_easy_cleanup(curl);
	return (void *)(intptr_t)ok;
}

static void test_server__concurrent(void **state)
{
	fixture_t *fx = *state;
	pthread_t threads[CLIENT_THREADS];
	long total = 0;

	for (int i = 0; i < CLIENT_THREADS; i++)
		assert_int_equal(
		    pthread_create(&threads[i], NULL, client_thread, fx), 0);
	for (int i = 0; i < CLIENT_THREADS; i++) {
		void *ok = NULL;

		pthread_join(threads[i], &ok);
		total += (long)(intptr_t)ok;
	}
	assert_int_equal(total, CLIENT_THREADS * CLIENT_REQUESTS);
}

/* ---- offloaded routes ---- */

/* A handler that blocks until the test releases it (a bind on a frozen
 * API server), counting the requests that reached it. */
typedef struct gate {
	atomic_int running;
	atomic_bool release;
} gate_t;

static void handle_blocked(ft_http_response_t *out,
			   const ft_http_request_t *req, void *payload)
{
	gate_t *g = payload;
	double deadline = now_s() + 20;

	atomic_fetch_add(&g->running, 1);
	while (!atomic_load(&g->release) && now_s() < deadline)
		usleep(5 * 1000);
	ft_http_reply_text(out, 200, "text/plain", "slow done");
}

typedef struct slow_call {
	pthread_t thread;
	const fixture_t *fx;
	reply_t reply;
} slow_call_t;

static void *post_blocked(void *arg)
{
	slow_call_t *c = arg;
	CURL *curl = curl_easy_init();
	call_t post = {.method = "POST",
		       .path = "/bind",
		       .content_type = "application/json",
		       .body = "{}",
		       .body_len = 2};

	if (curl)
		perform(&c->reply, curl, c->fx, &post);
	curl_easy_cleanup(curl);
	return NULL;
}

/* POST /bind from a thread of its own. */
static void start_blocked(slow_call_t *c, const fixture_t *fx)
{
	memset(c, 0, sizeof(*c));
	c->fx = fx;
	assert_int_equal(pthread_create(&c->thread, NULL, post_blocked, c), 0);
}

static void wait_running(gate_t *g, int n)
{
	double deadline = now_s() + 10;

	while (atomic_load(&g->running) < n && now_s() < deadline)
		usleep(2 * 1000);
	assert_int_equal(atomic_load(&g->running), n);
}

/*
 * Three blocked requests on a server with one worker thread: each waits on
 * an offload thread with its connection suspended, and the worker still
 * answers other requests at once (curl's own limit here is 10 s; the
 * blocked handlers hold out up to 20 s).
 */
static void test_server__offloaded_route_frees_workers(void **state)
{
	fixture_t fx = {0};
	gate_t g = {0};
	ft_server_t *s = start_gated(
	    (ft_server_options_t){.threads = 1, .offload_threads = 4}, &fx, &g);
	slow_call_t calls[3];
	reply_t r;

	for (int i = 0; i < 3; i++)
		start_blocked(&calls[i], &fx);
	wait_running(&g, 3);
	for (int i = 0; i < 5; i++) {
		r = request(&fx,
			    &(call_t){.method = "GET", .path = "/healthz"});
		assert_int_equal(r.status, 200);
		reply_dispose(&r);
	}
	assert_int_equal(atomic_load(&fx.calls), 5);
	atomic_store(&g.release, true);
	for (int i = 0; i < 3; i++) {
		pthread_join(calls[i].thread, NULL);
		assert_int_equal(calls[i].reply.status, 200);
		assert_string_equal(calls[i].reply.body, "slow done");
		reply_dispose(&calls[i].reply);
	}
	ft_server_free(s);
}

static void *free_server(void *arg)
{
	ft_server_free(arg);
	return NULL;
}

/*
 * Wait until a server being freed refuses new offloaded requests: it
 * answers them 503 at once. A probe sent before that waits in the queue
 * until its short timeout; the stop answers it 503 later, to no one.
 */
static void wait_stopping(const fixture_t *fx)
{
	reply_t r = request_until(fx,
				  &(call_t){.method = "POST",
					    .path = "/bind",
					    .content_type = "application/json",
					    .body = "{}",
					    .body_len = 2,
					    .timeout_ms = 300},
				  503);

	assert_int_equal(r.status, 503);
	reply_dispose(&r);
}

/*
 * Stopping the server completes every suspended connection: the request
 * running finishes, the one still queued is answered 503.
 */
static void test_server__offload_stop_answers_queued(void **state)
{
	fixture_t fx = {0};
	gate_t g = {0};
	ft_server_t *s = start_gated(
	    (ft_server_options_t){.threads = 2, .offload_threads = 1}, &fx, &g);
	slow_call_t calls[2];
	pthread_t stopper;

	start_blocked(&calls[0], &fx);
	wait_running(&g, 1);
	start_blocked(&calls[1], &fx);
	/* The second request waits in the queue behind the first. */
	usleep(500 * 1000);
	assert_int_equal(atomic_load(&g.running), 1);
	assert_int_equal(pthread_create(&stopper, NULL, free_server, s), 0);
	wait_stopping(&fx);
	atomic_store(&g.release, true);
	pthread_join(stopper, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(calls[i].thread, NULL);
	assert_int_equal(calls[0].reply.status, 200);
	assert_int_equal(calls[1].reply.status, 503);
	assert_error_body(&calls[1].reply,
			  "unavailable: the server is stopping");
	assert_int_equal(atomic_load(&g.running), 1);
	for (int i = 0; i < 2; i++)
		reply_dispose(&calls[i].reply);
}

/* ---- error replies ---- */

static void test_server__error_counts(void **state)
{
	fixture_t *fx = *state;
	unsigned long not_found = ft_http_error_count("not_found");
	unsigned long bad_type = ft_http_error_count("bad_content_type");
	unsigned long other = ft_http_error_count("other");
	ft_http_response_t out = {0};
	reply_t r;

	r = request(fx, &(call_t){.method = "GET", .path = "/a"});
	reply_dispose(&r);
	r = request(fx, &(call_t){.method = "GET", .path = "/b"});
	reply_dispose(&r);
	r = request(fx, &(call_t){.method = "POST",
				  .path = "/filter",
				  .content_type = "text/json",
				  .body = "{}",
				  .body_len = 2});
	reply_dispose(&r);
	assert_int_equal(ft_http_error_count("not_found"), not_found + 2);
	assert_int_equal(ft_http_error_count("bad_content_type"), bad_type + 1);

	/* Unknown kinds are counted under "other" and read back as 0. */
	ft_http_reply_error(&out, 500, "made_up", "x");
	assert_int_equal(ft_http_error_count("other"), other + 1);
	assert_int_equal(ft_http_error_count("made_up"), 0);
	free(out.body);
}

static void test_server__reply_error_escapes(void **state)
{
	ft_http_response_t out = {0};
	cJSON *json = NULL;
	const char *msg;

	ft_http_reply_error(&out, 422, "bad_json", "at %d: \"%s\"\n\t\\ %s", 7,
			    "q<>", "\xff\xc3\xa9\x01");
	assert_int_equal(out.status, 422);
	assert_string_equal(out.content_type, "application/json");
	assert_int_equal(out.body_len, strlen(out.body));
	json = cJSON_Parse(out.body);
	assert_non_null(json);
	msg = cJSON_GetObjectItemCaseSensitive(json, "error")->valuestring;
	assert_string_equal(
	    msg, "bad_json: at 7: \"q<>\"\n\t\\ \xef\xbf\xbd\xc3\xa9\x01");
	cJSON_Delete(json);

	/* A second reply replaces the first body without leaking it. */
	assert_int_equal(ft_http_reply_text(&out, 201, NULL, "{\"ok\":true}"),
			 0);
	assert_int_equal(out.status, 201);
	assert_string_equal(out.body, "{\"ok\":true}");
	assert_string_equal(out.content_type, "application/json");
	free(out.body);
}

/* ---- lifetime and listen addresses ---- */

static void test_server__bad_listen(void **state)
{
	static const char *const bad[] = {
	    "no-port",	    "127.0.0.1:", "127.0.0.1:65536",
	    "127.0.0.1:8x", "::1:8080",	  "[::1:8080",
	    "[::1]8080",    "1.2.3.4:-1", "bad host name.invalid:80",
	};
	ft_server_options_t opts = {.max_body_bytes = BODY_CAP};
	ft_server_t *s = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		opts.listen = bad[i];
		if (ft_server_new(&s, &opts) != FT_EINVAL)
			fail_msg("listen \"%s\" was accepted", bad[i]);
		assert_null(s);
	}
	opts.listen = NULL;
	assert_int_equal(ft_server_new(&s, &opts), FT_EINVAL);
	opts.listen = "127.0.0.1:0";
	opts.max_body_bytes = 0;
	assert_int_equal(ft_server_new(&s, &opts), FT_EINVAL);
}

static void listen_and_ask(const char *listen, const char *host)
{
	ft_server_options_t opts = {
	    .listen = listen, .max_body_bytes = BODY_CAP, .threads = 1};
	fixture_t fx = {0};
	reply_t r;

	assert_int_equal(ft_server_new(&fx.server, &opts), 0);
	assert_int_equal(
	    ft_server_route(fx.server, "GET", "/healthz", handle_health, &fx),
	    0);
	if (ft_server_start(fx.server) != 0) {
		/* No IPv6 on this machine, say. */
		print_message("skipping %s: %s\n", listen, ft_error_last());
		ft_server_free(fx.server);
		return;
	}
	snprintf(fx.base, sizeof(fx.base), "http://%s:%u", host,
		 ft_server_port(fx.server));
	r = request(&fx, &(call_t){.method = "GET", .path = "/healthz"});
	assert_int_equal(r.status, 200);
	assert_int_equal(atomic_load(&fx.calls), 1);
	reply_dispose(&r);
	ft_server_free(fx.server);
}

static void test_server__listen_forms(void **state)
{
	listen_and_ask("[::1]:0", "[::1]");
	listen_and_ask("localhost:0", "localhost");
	listen_and_ask("0.0.0.0:0", "127.0.0.1");
	listen_and_ask(":0", "127.0.0.1");
}

static void test_server__port_in_use(void **state)
{
	fixture_t *fx = *state;
	char listen[64];
	ft_server_options_t opts = {.listen = listen,
				    .max_body_bytes = BODY_CAP};
	ft_server_t *s = NULL;

	snprintf(listen, sizeof(listen), "127.0.0.1:%u",
		 ft_server_port(fx->server));
	assert_int_equal(ft_server_new(&s, &opts), 0);
	assert_int_equal(ft_server_start(s), FT_EIO);
	ft_server_free(s);
}

static void test_server__route_rules(void **state)
{
	fixture_t *fx = *state;
	ft_server_options_t opts = {.listen = "127.0.0.1:0",
				    .max_body_bytes = BODY_CAP};
	ft_server_t *s = NULL;

	assert_int_equal(
	    ft_server_route(fx->server, "GET", "/late", handle_health, fx),
	    FT_EINVAL);
	assert_int_equal(ft_server_new(&s, &opts), 0);
	assert_int_equal(
	    ft_server_route(s, "GET", "relative", handle_health, NULL),
	    FT_EINVAL);
	assert_int_equal(ft_server_route(s, "GET", "/x", NULL, NULL),
			 FT_EINVAL);
	for (int i = 0; i < 40; i++)
		assert_int_equal(
		    ft_server_route(s, "GET", "/many", handle_health, NULL), 0);
	ft_server_free(s); /* never started */
	ft_server_free(NULL);
}

/* ---- TLS ---- */

/*
 * Certificates for the TLS cases, made once per run with the openssl command
 * in a temporary directory: a CA, a server certificate for 127.0.0.1 and
 * localhost, a client certificate from the same CA, and a second CA with a
 * client certificate of its own (not trusted by the server).
 */
enum {
	CA_CRT,
	SRV_CRT,
	SRV_KEY,
	CLI_CRT,
	CLI_KEY,
	OTHER_CA_CRT,
	OTHER_CLI_CRT,
	OTHER_CLI_KEY,
	GARBAGE,
	EMPTY,
	TLS_FILES
};

typedef struct tls_files {
	char dir[64];
	char path[TLS_FILES][128];
} tls_files_t;

static const char *const tls_names[TLS_FILES] = {
    "ca.crt",	   "srv.crt",	   "srv.key",	    "cli.crt",
    "cli.key",	   "other-ca.crt", "other-cli.crt", "other-cli.key",
    "garbage.pem", "empty.pem",
};

/* The script that makes them; $1 is the directory. */
static const char make_certs_script[] =
    "set -e; cd \"$1\"\n"
    "printf '[srv]\\nsubjectAltName=IP:127.0.0.1,DNS:localhost\\n"
    "extendedKeyUsage=serverAuth\\n[cli]\\nextendedKeyUsage=clientAuth\\n' > ext.cnf\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\"; }\n"
    "ca() { key \"$1.key\"; openssl req -x509 -new -key \"$1.key\" -out \"$1.crt\" -subj \"/CN=$1\" -days 2; }\n"
    "leaf() { key \"$1.key\"; openssl req -new -key \"$1.key\" -subj \"/CN=$1\" -out \"$1.csr\"; openssl x509 -req -in \"$1.csr\" -CA \"$2.crt\" -CAkey \"$2.key\" -set_serial \"$4\" -days 2 -extfile ext.cnf -extensions \"$3\" -out \"$1.crt\"; }\n"
    "ca ca; ca other-ca\n"
    "leaf srv ca srv 2; leaf cli ca cli 3; leaf other-cli other-ca cli 4\n"
    "echo 'not a certificate' > garbage.pem; : > empty.pem\n";

static tls_files_t tls;

/* Write the script into the directory and run it there. */
static int make_certs(void)
{
	char path[128], cmd[512];
	FILE *f = NULL;

	snprintf(path, sizeof(path), "%s/make-certs.sh", tls.dir);
	if (!(f = fopen(path, "w")))
		return -1;
	fputs(make_certs_script, f);
	if (fclose(f) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "sh %s %s >%s/openssl.log 2>&1", path,
		 tls.dir, tls.dir);
	if (system(cmd) == 0)
		return 0;
	snprintf(cmd, sizeof(cmd), "cat %s/openssl.log", tls.dir);
	print_message("making the test certificates failed:\n");
	fflush(stdout);
	if (system(cmd) != 0)
		print_message("(no log)\n");
	return -1;
}

static int tls_setup(void **state)
{
	if (system("openssl version >/dev/null 2>&1") != 0) {
		print_message("openssl not found: the TLS cases are skipped\n");
		return 0;
	}
	snprintf(tls.dir, sizeof(tls.dir), "/tmp/flextopo-tls-XXXXXX");
	if (!mkdtemp(tls.dir) || make_certs() != 0)
		return -1;
	for (int i = 0; i < TLS_FILES; i++)
		snprintf(tls.path[i], sizeof(tls.path[i]), "%s/%s", tls.dir,
			 tls_names[i]);
	return 0;
}

static int tls_teardown(void **state)
{
	char cmd[128];

	if (!tls.dir[0])
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tls.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void skip_without_openssl(void)
{
	if (!tls.path[0][0])
		skip();
}

/* An HTTPS server with the test certificate, and `client_ca` if set. */
static void start_tls_server(fixture_t *fx, const char *client_ca)
{
	static const char *const public_paths[] = {"/healthz", NULL};
	ft_server_options_t opts = {.listen = "127.0.0.1:0",
				    .max_body_bytes = BODY_CAP,
				    .threads = 2,
				    .tls_cert_file = tls.path[SRV_CRT],
				    .tls_key_file = tls.path[SRV_KEY],
				    .tls_client_ca_file = client_ca,
				    .tls_public_paths = public_paths};

	memset(fx, 0, sizeof(*fx));
	if (ft_server_new(&fx->server, &opts) != 0)
		fail_msg("%s", ft_error_last());
	assert_int_equal(
	    ft_server_route(fx->server, "GET", "/healthz", handle_health, fx),
	    0);
	assert_int_equal(
	    ft_server_route(fx->server, "POST", "/filter", handle_echo, fx), 0);
	if (ft_server_start(fx->server) != 0)
		fail_msg("%s", ft_error_last());
	snprintf(fx->base, sizeof(fx->base), "https://127.0.0.1:%u",
		 ft_server_port(fx->server));
	fx->ca_file = tls.path[CA_CRT];
}

static const call_t json_post = {.method = "POST",
				 .path = "/filter",
				 .content_type = "application/json",
				 .body = "{\"Pod\":{}}",
				 .body_len = 10};

static void test_server__tls_https(void **state)
{
	fixture_t fx;
	CURL *curl = curl_easy_init();
	long connects = -1;
	reply_t r;

	skip_without_openssl();
	start_tls_server(&fx, NULL);
	assert_non_null(curl);
	/* Verified against the CA; HTTP/1.1 although h2 was offered. */
	assert_int_equal(perform(&r, curl, &fx, &json_post), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.http_version, CURL_HTTP_VERSION_1_1);
	assert_string_equal(r.body, json_post.body);
	reply_dispose(&r);
	/* Keep-alive works inside TLS as well. */
	assert_int_equal(perform(&r, curl, &fx, &json_post), 0);
	assert_int_equal(r.status, 200);
	curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
	assert_int_equal(connects, 0);
	reply_dispose(&r);
	curl_easy_cleanup(curl);

	/* A client that trusts another CA refuses the server. */
	fx.ca_file = tls.path[OTHER_CA_CRT];
	curl = curl_easy_init();
	assert_int_equal(perform(&r, curl, &fx, &json_post), -1);
	assert_int_equal(r.curl_code, CURLE_PEER_FAILED_VERIFICATION);
	reply_dispose(&r);
	curl_easy_cleanup(curl);
	ft_server_free(fx.server);
}

static void test_server__tls_refuses_plain_http(void **state)
{
	fixture_t fx;
	CURL *curl = curl_easy_init();
	reply_t r;

	skip_without_openssl();
	start_tls_server(&fx, NULL);
	snprintf(fx.base, sizeof(fx.base), "http://127.0.0.1:%u",
		 ft_server_port(fx.server));
	fx.ca_file = NULL;
	assert_int_equal(perform(&r, curl, &fx, &json_post), -1);
	assert_int_equal(atomic_load(&fx.calls), 0);
	reply_dispose(&r);
	curl_easy_cleanup(curl);

	/* The server still answers HTTPS afterwards. */
	snprintf(fx.base, sizeof(fx.base), "https://127.0.0.1:%u",
		 ft_server_port(fx.server));
	fx.ca_file = tls.path[CA_CRT];
	r = request(&fx, &(call_t){.method = "GET", .path = "/healthz"});
	assert_int_equal(r.status, 200);
	reply_dispose(&r);
	ft_server_free(fx.server);
}

/* POST /filter with the client certificate `crt` (NULL: none). */
static reply_t post_as(fixture_t *fx, int crt, int key)
{
	fx->client_cert = crt >= 0 ? tls.path[crt] : NULL;
	fx->client_key = key >= 0 ? tls.path[key] : NULL;
	return request(fx, &json_post);
}

static void test_server__tls_client_cert(void **state)
{
	unsigned long forbidden = ft_http_error_count("forbidden");
	fixture_t fx;
	reply_t r;

	skip_without_openssl();
	start_tls_server(&fx, tls.path[CA_CRT]);
	/* Without a certificate: refused, with the reason. */
	r = post_as(&fx, -1, -1);
	assert_int_equal(r.status, 403);
	assert_error_body(&r, "forbidden: a client certificate is required");
	reply_dispose(&r);
	/* A public path needs none (the kubelet's probes). */
	r = request(&fx, &(call_t){.method = "GET", .path = "/healthz"});
	assert_int_equal(r.status, 200);
	reply_dispose(&r);
	/* The CA's own client certificate: served. */
	r = post_as(&fx, CLI_CRT, CLI_KEY);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, json_post.body);
	reply_dispose(&r);
	/* Another CA's client certificate: refused. */
	r = post_as(&fx, OTHER_CLI_CRT, OTHER_CLI_KEY);
	assert_int_equal(r.status, 403);
	assert_error_body(&r, "forbidden: client certificate refused: ");
	assert_non_null(strstr(r.body, "NOT trusted"));
	reply_dispose(&r);
	/* Right CA, but only good for servers (extended key usage). */
	r = post_as(&fx, SRV_CRT, SRV_KEY);
	assert_int_equal(r.status, 403);
	assert_non_null(strstr(r.body, "intended purpose"));
	reply_dispose(&r);
	assert_int_equal(ft_http_error_count("forbidden"), forbidden + 3);
	ft_server_free(fx.server);
}

/* ft_server_new() with these TLS files fails with `rc` and `message`. */
static void assert_tls_new_fails(int cert, int key, int ca, int rc,
				 const char *message)
{
	ft_server_options_t opts = {
	    .listen = "127.0.0.1:0",
	    .max_body_bytes = BODY_CAP,
	    .tls_cert_file = cert >= 0 ? tls.path[cert] : NULL,
	    .tls_key_file = key >= 0 ? tls.path[key] : "",
	    .tls_client_ca_file = ca >= 0 ? tls.path[ca] : NULL};
	ft_server_t *s = NULL;
	int got = ft_server_new(&s, &opts);

	if (got != rc || !strstr(ft_error_last(), message))
		fail_msg("got %d \"%s\", want %d \"...%s...\"", got,
			 ft_error_last(), rc, message);
	assert_null(s);
}

static void test_server__tls_bad_files(void **state)
{
	skip_without_openssl();
	assert_tls_new_fails(SRV_CRT, -1, -1, FT_EINVAL,
			     "a certificate file needs a key file");
	assert_tls_new_fails(-1, SRV_KEY, -1, FT_EINVAL, "got only the key");
	assert_tls_new_fails(-1, -1, CA_CRT, FT_EINVAL,
			     "client certificates need TLS");
	assert_tls_new_fails(SRV_CRT, CLI_KEY, -1, FT_EINVAL,
			     "does not match the certificate in");
	assert_tls_new_fails(GARBAGE, SRV_KEY, -1, FT_EINVAL,
			     "garbage.pem: no PEM certificate");
	assert_tls_new_fails(SRV_CRT, GARBAGE, -1, FT_EINVAL,
			     "garbage.pem: no unencrypted PEM private key");
	assert_tls_new_fails(SRV_CRT, SRV_KEY, EMPTY, FT_EINVAL,
			     "TLS client CA");
	assert_tls_new_fails(SRV_CRT, SRV_KEY, GARBAGE, FT_EINVAL,
			     "garbage.pem: no PEM certificate");
	/* A file that is not there is named. */
	snprintf(tls.path[EMPTY], sizeof(tls.path[EMPTY]), "%s/missing.crt",
		 tls.dir);
	assert_tls_new_fails(EMPTY, SRV_KEY, -1, FT_EIO,
			     "missing.crt: No such file or directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_server__exact_route),
	    cmocka_unit_test(test_server__prefix_route),
	    cmocka_unit_test(test_server__not_found),
	    cmocka_unit_test(test_server__method_not_allowed),
	    cmocka_unit_test(test_server__bad_handler_status),
	    cmocka_unit_test(test_server__post_requires_json),
	    cmocka_unit_test(test_server__too_large_content_length),
	    cmocka_unit_test(test_server__too_large_without_expect),
	    cmocka_unit_test(test_server__too_large_chunked),
	    cmocka_unit_test(test_server__too_large_endless),
	    cmocka_unit_test(test_server__body_intact),
	    cmocka_unit_test(test_server__query),
	    cmocka_unit_test(test_server__handle_without_connection),
	    cmocka_unit_test(test_server__keep_alive),
	    cmocka_unit_test(test_server__per_client_limit),
	    cmocka_unit_test(test_server__leaky_client_cannot_lock_out),
	    cmocka_unit_test(test_server__connection_timeout),
	    cmocka_unit_test(test_server__concurrent),
	    cmocka_unit_test(test_server__offloaded_route_frees_workers),
	    cmocka_unit_test(test_server__offload_stop_answers_queued),
	    cmocka_unit_test(test_server__error_counts),
	    cmocka_unit_test(test_server__reply_error_escapes),
	    cmocka_unit_test(test_server__bad_listen),
	    cmocka_unit_test(test_server__listen_forms),
	    cmocka_unit_test(test_server__port_in_use),
	    cmocka_unit_test(test_server__route_rules),
	};
	const struct CMUnitTest tls_tests[] = {
	    cmocka_unit_test(test_server__tls_https),
	    cmocka_unit_test(test_server__tls_refuses_plain_http),
	    cmocka_unit_test(test_server__tls_client_cert),
	    cmocka_unit_test(test_server__tls_bad_files),
	};
	int failed;

	ft_log_set_level(FT_LOG_ERROR);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	failed = cmocka_run_group_tests(tests, setup, teardown);
	failed += cmocka_run_group_tests(tls_tests, tls_setup, tls_teardown);
	curl_global_cleanup();
	return failed;
}
