/*
 * Unit tests of the API server client: kubeconfig interpretation (token,
 * token file, inline certificate data, relative file paths, the exact error
 * texts), in-cluster credentials, base64 and escaping, the watch-stream
 * splitter fed at awkward cut points, and, against a tiny HTTP/1.1 server on
 * 127.0.0.1 inside the test, plain requests (headers, a rotating token file,
 * Binding and merge-patch bodies, status mapping) and the informer loop
 * through a list, a clean watch timeout, a 500, an in-stream 410, an HTTP
 * 410, two relists and a stop in the middle of a watch or a backoff.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <flextopo/error.h>
#include <flextopo/kube.h>
#include <flextopo/log.h>
#include <flextopo/yamljson.h>

#include "kube/base64.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "kube/watchstream.h"
#include "fakeapi.h"
#include "support.h"

#define KUBE_FIXTURES FT_FIXTURES_DIR "/kube"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- base64 and escaping ---------------------------------------------- */

static void assert_decodes(const char *in, const char *want)
{
	char *out = NULL;
	size_t len = 0;

	if (ft_kube_base64_decode(&out, &len, in, strlen(in)) != 0)
		fail_msg("%s: %s", in, ft_error_last());
	assert_int_equal(len, strlen(want));
	assert_string_equal(out, want);
	free(out);
}

static void assert_rejects(const char *in)
{
	char *out = NULL;

	if (ft_kube_base64_decode(&out, NULL, in, strlen(in)) != FT_EINVAL)
		fail_msg("accepted \"%s\"", in);
	assert_null(out);
}

static void test_kube__base64(void **state)
{
	assert_decodes("", "");
	assert_decodes("Zg==", "f");
	assert_decodes("Zm8=", "fo");
	assert_decodes("Zm9v", "foo");
	assert_decodes("Zm9vYg==", "foob");
	assert_decodes("Zm9vYmE=", "fooba");
	assert_decodes("Zm9vYmFy", "foobar");
	assert_decodes("Zm9vYg", "foob");
	assert_decodes("Zm9v\nYmFy\r\n", "foobar");
	assert_decodes("P+/+", "?\xef\xfe");
	assert_rejects("Zm9v!");
	assert_rejects("Z");
	assert_rejects("Zm9vY");
	assert_rejects("Zg===");
	assert_rejects("Zg=a");
	assert_rejects("Zm9v=");
	assert_rejects("-_8=");
}

static void test_kube__escape(void **state)
{
	char *out = ft_kube_escape("a-b.c_d~9");

	assert_string_equal(out, "a-b.c_d~9");
	free(out);
	out = ft_kube_escape("p/q r?&=%\xc3\xa9");
	assert_string_equal(out, "p%2Fq%20r%3F%26%3D%25%C3%A9");
	free(out);
}

/* ---- kubeconfig ------------------------------------------------------- */

static void load_fixture(ft_kube_credentials_t *out, const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", KUBE_FIXTURES, name);
	if (ft_kube_credentials_from_kubeconfig(out, path) != 0)
		fail_msg("%s: %s", path, ft_error_last());
}

static char *fixture_text(const char *relpath)
{
	char path[1024];
	char *text = NULL;

	snprintf(path, sizeof(path), "kube/%s", relpath);
	text = ft_test_read_fixture(path, NULL);
	assert_non_null(text);
	return text;
}

static void test_kube__kubeconfig_token(void **state)
{
	ft_kube_credentials_t creds = {0};

	load_fixture(&creds, "kubeconfig-token.yaml");
	assert_string_equal(creds.server, "https://10.0.0.1:6443");
	assert_string_equal(creds.token, "abc.def-123");
	assert_true(creds.insecure);
	assert_null(creds.token_file);
	assert_null(creds.ca_file);
	assert_null(creds.ca_pem);
	assert_null(creds.cert_pem);
	assert_null(creds.key_file);
	ft_kube_credentials_dispose(&creds);
	assert_null(creds.server);
}

static void test_kube__kubeconfig_files_relative(void **state)
{
	ft_kube_credentials_t creds = {0};

	load_fixture(&creds, "kubeconfig-files.yaml");
	assert_string_equal(creds.server, "https://[fd00::1]:6443");
	assert_null(creds.token);
	assert_false(creds.insecure);
	assert_string_equal(creds.token_file, KUBE_FIXTURES "/secrets/token");
	assert_string_equal(creds.ca_file, KUBE_FIXTURES "/certs/ca.crt");
	assert_string_equal(creds.cert_file, KUBE_FIXTURES "/certs/client.crt");
	assert_string_equal(creds.key_file,
			    KUBE_FIXTURES "/./certs/client.key");
	assert_null(creds.ca_pem);
	assert_null(creds.cert_pem);
	assert_null(creds.key_pem);
	ft_kube_credentials_dispose(&creds);
}

static void test_kube__kubeconfig_cert_data(void **state)
{
	ft_kube_credentials_t creds = {0};
	char *ca = fixture_text("certs/ca.crt");
	char *cert = fixture_text("certs/client.crt");
	char *key = fixture_text("certs/client.key");

	load_fixture(&creds, "kubeconfig-data.yaml");
	assert_string_equal(creds.server, "https://127.0.0.1:39451");
	assert_string_equal(creds.ca_pem, ca);
	assert_string_equal(creds.cert_pem, cert);
	assert_string_equal(creds.key_pem, key);
	assert_null(creds.ca_file);
	assert_null(creds.cert_file);
	assert_null(creds.key_file);
	assert_null(creds.token);
	ft_kube_credentials_dispose(&creds);
	free(ca);
	free(cert);
	free(key);
}

static void test_kube__kubeconfig_missing_context(void **state)
{
	ft_kube_credentials_t creds = {0};
	const char *path = KUBE_FIXTURES "/kubeconfig-missing-context.yaml";

	assert_int_equal(ft_kube_credentials_from_kubeconfig(&creds, path),
			 FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "kubeconfig " KUBE_FIXTURES
	    "/kubeconfig-missing-context.yaml: context \"foo\" not found");
	assert_null(creds.server);
}

static void test_kube__kubeconfig_unreadable(void **state)
{
	ft_kube_credentials_t creds = {0};

	assert_int_equal(ft_kube_credentials_from_kubeconfig(
			     &creds, KUBE_FIXTURES "/no-such-kubeconfig"),
			 FT_EIO);
	assert_non_null(strstr(ft_error_last(), "kubeconfig " KUBE_FIXTURES
						"/no-such-kubeconfig"));
	assert_non_null(strstr(ft_error_last(), "No such file"));
}

/* Interpret `yaml` with base dir "/base" and file name "k.yaml". */
static int interpret(ft_kube_credentials_t *out, const char *yaml)
{
	cJSON *root = NULL;
	int rc = ft_yaml_to_json(&root, yaml, strlen(yaml), "k.yaml");

	if (rc != 0)
		fail_msg("%s: %s", yaml, ft_error_last());
	rc = ft_kube_kubeconfig_interpret(out, root, "/base", "k.yaml");
	cJSON_Delete(root);
	return rc;
}

static void assert_interpret_error(const char *yaml, const char *message)
{
	ft_kube_credentials_t creds = {0};

	assert_int_equal(interpret(&creds, yaml), FT_EINVAL);
	assert_string_equal(ft_error_last(), message);
	assert_null(creds.server);
}

#define CONTEXT_C_U                                                            \
	"current-context: x\n"                                                 \
	"contexts: [{name: x, context: {cluster: c, user: u}}]\n"
#define CLUSTER_C "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"

static void test_kube__kubeconfig_errors(void **state)
{
	assert_interpret_error("[1, 2]", "kubeconfig k.yaml: not a mapping");
	assert_interpret_error("kind: Config\n",
			       "kubeconfig k.yaml: current-context is not set");
	assert_interpret_error("current-context: x\ncontexts: {}\n",
			       "kubeconfig k.yaml: contexts must be a list");
	assert_interpret_error(
	    "current-context: x\ncontexts: [{name: x, context: {}}]\n",
	    "kubeconfig k.yaml: context \"x\": cluster is not set");
	assert_interpret_error(CONTEXT_C_U,
			       "kubeconfig k.yaml: cluster \"c\" not found");
	assert_interpret_error(
	    CONTEXT_C_U "clusters: [{name: c, cluster: {}}]\n",
	    "kubeconfig k.yaml: cluster \"c\": server is not set");
	assert_interpret_error(
	    CONTEXT_C_U "clusters: [{name: c, cluster: {server: h:1}}]\n",
	    "kubeconfig k.yaml: cluster \"c\": server is not an http(s) URL");
	assert_interpret_error(
	    CONTEXT_C_U
	    "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!'}}]\n",
	    "kubeconfig k.yaml: cluster \"c\": certificate-authority-data is not valid base64");
	assert_interpret_error(
	    CONTEXT_C_U
	    "clusters: [{name: c, cluster: {server: 'https://h', insecure-skip-tls-verify: 3}}]\n",
	    "kubeconfig k.yaml: cluster \"c\": insecure-skip-tls-verify must be true or false");
	assert_interpret_error(CONTEXT_C_U CLUSTER_C,
			       "kubeconfig k.yaml: user \"u\" not found");
	assert_interpret_error(
	    CONTEXT_C_U CLUSTER_C "users: [{name: u, user: {token: 5}}]\n",
	    "kubeconfig k.yaml: user \"u\": token must be a string");
	assert_interpret_error(
	    CONTEXT_C_U CLUSTER_C
	    "users: [{name: u, user: {client-certificate: c.crt}}]\n",
	    "kubeconfig k.yaml: user \"u\": client-certificate is set without client-key");
	assert_interpret_error(
	    CONTEXT_C_U CLUSTER_C
	    "users: [{name: u, user: {exec: {command: aws}}}]\n",
	    "kubeconfig k.yaml: user \"u\": exec (credential plugins) is not supported; use a token or a client certificate");
}

static void test_kube__kubeconfig_interpret_paths(void **state)
{
	ft_kube_credentials_t creds = {0};

	assert_int_equal(
	    interpret(
		&creds, CONTEXT_C_U
		"clusters: [{name: c, cluster: {server: 'http://h/p/', certificate-authority: /etc/ca.pem, insecure-skip-tls-verify: 'false'}}]\n"
		"users: [{name: u, user: {token: '', tokenFile: t, client-certificate: /abs/c.crt, client-key: k.key, exec: null}}]\n"),
	    0);
	assert_string_equal(creds.server, "http://h/p");
	assert_string_equal(creds.ca_file, "/etc/ca.pem");
	assert_false(creds.insecure);
	assert_null(creds.token);
	assert_string_equal(creds.token_file, "/base/t");
	assert_string_equal(creds.cert_file, "/abs/c.crt");
	assert_string_equal(creds.key_file, "/base/k.key");
	ft_kube_credentials_dispose(&creds);

	/* A context without a user talks to the server anonymously. */
	assert_int_equal(
	    interpret(
		&creds,
		"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n" CLUSTER_C),
	    0);
	assert_string_equal(creds.server, "https://h");
	assert_null(creds.token);
	ft_kube_credentials_dispose(&creds);
}

/* ---- in-cluster ------------------------------------------------------- */

static void test_kube__in_cluster(void **state)
{
	ft_kube_credentials_t creds = {0};

	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	assert_int_equal(ft_kube_credentials_in_cluster(&creds), FT_ENOTFOUND);

	setenv("FLEXTOPO_SERVICEACCOUNT_DIR", KUBE_FIXTURES "/serviceaccount",
	       1);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(ft_kube_credentials_in_cluster(&creds), 0);
	assert_string_equal(creds.server, "https://10.96.0.1:443");
	assert_string_equal(creds.token_file,
			    KUBE_FIXTURES "/serviceaccount/token");
	assert_string_equal(creds.ca_file,
			    KUBE_FIXTURES "/serviceaccount/ca.crt");
	assert_null(creds.token);
	assert_false(creds.insecure);
	ft_kube_credentials_dispose(&creds);

	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	assert_int_equal(ft_kube_credentials_in_cluster(&creds), 0);
	assert_string_equal(creds.server, "https://[fd00:10:96::1]:443");
	ft_kube_credentials_dispose(&creds);

	setenv("FLEXTOPO_SERVICEACCOUNT_DIR", KUBE_FIXTURES "/certs", 1);
	assert_int_equal(ft_kube_credentials_in_cluster(&creds), FT_EIO);
	assert_non_null(strstr(ft_error_last(), "/certs/token"));

	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("FLEXTOPO_SERVICEACCOUNT_DIR");
}

/* ---- watch stream ----------------------------------------------------- */

typedef struct {
	char log[32][96];
	size_t n;
	int stop_at; /* return 7 from this event on; -1 never */
} events_t;

static const char *const kind_names[] = {"ADDED", "MODIFIED", "DELETED",
					 "BOOKMARK", "ERROR"};

static int record_event(const ft_watch_decoded_t *event, void *payload)
{
	events_t *events = payload;
	const cJSON *metadata =
	    cJSON_GetObjectItemCaseSensitive(event->object, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(metadata, "name");

	if (events->stop_at >= 0 && (int)events->n >= events->stop_at)
		return 7;
	assert_true(events->n < 32);
	snprintf(events->log[events->n++], sizeof(events->log[0]),
		 "%s %s rv=%s code=%d", kind_names[event->kind],
		 cJSON_IsString(name) ? name->valuestring : "-",
		 event->resource_version ? event->resource_version : "-",
		 event->code);
	return 0;
}

static const char stream_text[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"},\"spec\":{\"x\":\"line\\nbreak\"}}}\n"
    "\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"\xc3\xa9t\xc3\xa9\",\"resourceVersion\":\"12\"}}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"15\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 15 (20)\",\"reason\":\"Expired\",\"code\":410}}";

static const char *const stream_events[] = {
    "ADDED a rv=11 code=0",    "MODIFIED \xc3\xa9t\xc3\xa9 rv=12 code=0",
    "BOOKMARK - rv=15 code=0", "DELETED a rv=16 code=0",
    "ERROR - rv=- code=410",
};

static void assert_stream_events(const events_t *events)
{
	size_t want = sizeof(stream_events) / sizeof(stream_events[0]);

	assert_int_equal(events->n, want);
	for (size_t i = 0; i < want; i++)
		assert_string_equal(events->log[i], stream_events[i]);
}

/* Feed the stream cut at `cut`, then cut again in the middle of the rest. */
static void feed_cut(size_t cut)
{
	ft_watch_stream_t stream;
	events_t events = {.stop_at = -1};
	size_t len = sizeof(stream_text) - 1, mid = cut + (len - cut) / 2;

	ft_watch_stream_init(&stream, 1 << 20);
	assert_int_equal(ft_watch_stream_feed(&stream, stream_text, cut,
					      record_event, &events),
			 0);
	assert_int_equal(ft_watch_stream_feed(&stream, stream_text + cut,
					      mid - cut, record_event, &events),
			 0);
	assert_int_equal(ft_watch_stream_feed(&stream, stream_text + mid,
					      len - mid, record_event, &events),
			 0);
	assert_int_equal(ft_watch_stream_finish(&stream, record_event, &events),
			 0);
	assert_stream_events(&events);
	ft_watch_stream_dispose(&stream);
}

static void test_kube__watch_stream_chunks(void **state)
{
	ft_watch_stream_t stream;
	events_t events = {.stop_at = -1};

	for (size_t cut = 0; cut < sizeof(stream_text); cut++)
		feed_cut(cut);
	/* One byte at a time. */
	ft_watch_stream_init(&stream, 1 << 20);
	for (size_t i = 0; i + 1 < sizeof(stream_text); i++)
		assert_int_equal(ft_watch_stream_feed(&stream, stream_text + i,
						      1, record_event, &events),
				 0);
	assert_int_equal(events.n, 4);
	assert_int_equal(ft_watch_stream_finish(&stream, record_event, &events),
			 0);
	assert_stream_events(&events);
	ft_watch_stream_dispose(&stream);
}

static void test_kube__watch_event_decode(void **state)
{
	static const char gone[] =
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"message\":\"too old resource version\"}}";
	static const char bookmark[] =
	    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":\"12345\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}";
	ft_watch_decoded_t event = {.root = NULL};

	assert_int_equal(ft_watch_event_decode(&event, gone, strlen(gone)), 0);
	assert_int_equal(event.kind, FT_WATCH_KIND_ERROR);
	assert_int_equal(event.code, 410);
	assert_string_equal(event.message, "too old resource version");
	assert_null(event.resource_version);
	ft_watch_event_dispose(&event);

	assert_int_equal(
	    ft_watch_event_decode(&event, bookmark, strlen(bookmark)), 0);
	assert_int_equal(event.kind, FT_WATCH_KIND_BOOKMARK);
	assert_string_equal(event.resource_version, "12345");
	assert_int_equal(event.code, 0);
	ft_watch_event_dispose(&event);
	ft_watch_event_dispose(NULL);
}

static void assert_feed_fails(const char *text, size_t max, int code)
{
	ft_watch_stream_t stream;
	events_t events = {.stop_at = -1};

	ft_watch_stream_init(&stream, max);
	assert_int_equal(ft_watch_stream_feed(&stream, text, strlen(text),
					      record_event, &events),
			 code);
	ft_watch_stream_dispose(&stream);
}

static void test_kube__watch_stream_errors(void **state)
{
	ft_watch_stream_t stream;
	events_t events = {.stop_at = 1};

	assert_feed_fails("not json\n", 1024, FT_EINVAL);
	assert_feed_fails("[1]\n", 1024, FT_EINVAL);
	assert_feed_fails("{\"object\":{}}\n", 1024, FT_EINVAL);
	assert_feed_fails("{\"type\":\"SYNC\",\"object\":{}}\n", 1024,
			  FT_EINVAL);
	assert_feed_fails("{\"type\":\"ADDED\"}\n", 1024, FT_EINVAL);
	assert_feed_fails("{\"type\":\"ADDED\",\"object\":[]}\n", 1024,
			  FT_EINVAL);
	/* A line over the cap fails as soon as it is held, newline or not. */
	assert_feed_fails("{\"type\":\"ADDED\",\"object\":{}}", 8, FT_ETOOBIG);

	/* The callback's non-zero value stops the feed and comes back. */
	ft_watch_stream_init(&stream, 1024);
	assert_int_equal(ft_watch_stream_feed(&stream, stream_text,
					      sizeof(stream_text) - 1,
					      record_event, &events),
			 7);
	assert_int_equal(events.n, 1);
	ft_watch_stream_dispose(&stream);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* ---- plain requests --------------------------------------------------- */

static const char *const pod_x[] = {
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\",\"namespace\":\"default\"}}",
    NULL};

static void test_kube__request_token_rotates(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {"GET /api/v1/namespaces/default/pods/x HTTP/1.1", "200 OK", pod_x,
	     FT_FAKE_END},
	    {"GET /api/v1/namespaces/default/pods/x HTTP/1.1", "200 OK", pod_x,
	     FT_FAKE_END},
	    {"DELETE /api/v1/namespaces/default/pods/x HTTP/1.1", "200 OK",
	     NULL, FT_FAKE_END},
	};
	char dir[] = "/tmp/ft_kube_XXXXXX", path[64];
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;
	cJSON *pod = NULL;
	char *body = NULL;
	long status = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/token", dir);
	write_file(path, "tok-1\n");
	ft_fake_api_start(&server, steps, 3);
	client = ft_fake_api_client(&server, path, 5000);

	assert_int_equal(ft_kube_get_pod(client, "default", "x", &pod), 0);
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "name")
		->valuestring,
	    "x");
	cJSON_Delete(pod);
	write_file(path, "  tok-2  \n");
	assert_int_equal(ft_kube_request(client, "GET",
					 "/api/v1/namespaces/default/pods/x",
					 NULL, NULL, 0, &status, &body),
			 0);
	assert_int_equal(status, 200);
	assert_non_null(strstr(body, "\"name\":\"x\""));
	free(body);
	unlink(path);
	/* Without the token file there is no request to make. */
	assert_int_equal(
	    ft_kube_request(client, "GET", "/x", NULL, NULL, 0, &status, &body),
	    FT_EUNAVAIL);
	assert_int_equal(status, 0);
	assert_null(body);
	write_file(path, "tok-3");
	assert_int_equal(ft_kube_request(client, "DELETE",
					 "/api/v1/namespaces/default/pods/x",
					 NULL, NULL, 0, &status, NULL),
			 0);
	assert_int_equal(status, 200);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);

	assert_non_null(
	    strstr(server.requests[0], "\r\nAuthorization: Bearer tok-1\r\n"));
	assert_non_null(
	    strstr(server.requests[0], "\r\nAccept: application/json\r\n"));
	assert_non_null(strstr(server.requests[0],
			       "\r\nUser-Agent: flextopo-extender\r\n"));
	assert_non_null(
	    strstr(server.requests[1], "\r\nAuthorization: Bearer tok-2\r\n"));
	assert_non_null(
	    strstr(server.requests[2], "\r\nAuthorization: Bearer tok-3\r\n"));
	ft_fake_api_dispose(&server);
	unlink(path);
	rmdir(dir);
}

/* Inline PEM and file credentials are accepted by libcurl as options;
 * over plain http they are carried along unused. */
static void test_kube__client_tls_options(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {"GET /api/v1/namespaces/default/pods/x HTTP/1.1", "200 OK", pod_x,
	     FT_FAKE_END},
	    {"GET /api/v1/namespaces/default/pods/x HTTP/1.1", "200 OK", pod_x,
	     FT_FAKE_END},
	};
	ft_kube_credentials_t creds = {0};
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;
	cJSON *pod = NULL;
	char url[64];

	ft_fake_api_start(&server, steps, 2);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", server.port);
	load_fixture(&creds, "kubeconfig-data.yaml");
	free(creds.server);
	assert_non_null(creds.server = strdup(url));
	assert_int_equal(ft_kube_client_new(&client, &creds, 5000), 0);
	ft_kube_credentials_dispose(&creds);
	assert_int_equal(ft_kube_get_pod(client, "default", "x", &pod), 0);
	cJSON_Delete(pod);
	ft_kube_client_free(client);

	load_fixture(&creds, "kubeconfig-files.yaml");
	free(creds.server);
	assert_non_null(creds.server = strdup(url));
	assert_int_equal(ft_kube_client_new(&client, &creds, 5000), 0);
	ft_kube_credentials_dispose(&creds);
	assert_int_equal(ft_kube_get_pod(client, "default", "x", &pod), 0);
	cJSON_Delete(pod);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);
	assert_non_null(
	    strstr(server.requests[1],
		   "\r\nAuthorization: Bearer token-from-file\r\n"));
	ft_fake_api_dispose(&server);
}

static const char *const status_conflict[] = {
    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pod p1 is already assigned to node \\\"n2\\\"\",\"reason\":\"Conflict\",\"code\":409}",
    NULL};
static const char *const status_missing[] = {
    "{\"kind\":\"Status\",\"message\":\"pods \\\"p1\\\" not found\",\"code\":404}",
    NULL};
static const char *const binding_created[] = {"{\"kind\":\"Status\"}", NULL};
static const char *const status_500[] = {
    "{\"kind\":\"Status\",\"message\":\"etcdserver: leader changed\",\"code\":500}",
    NULL};

static void assert_json_body(const char *request, const char *expected)
{
	cJSON *got = cJSON_Parse(ft_fake_request_body(request));
	cJSON *want = cJSON_Parse(expected);

	assert_non_null(got);
	assert_non_null(want);
	if (!cJSON_Compare(got, want, 1))
		fail_msg("body %s, expected %s", ft_fake_request_body(request),
			 expected);
	cJSON_Delete(got);
	cJSON_Delete(want);
}

static void test_kube__bind_pod(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {"POST /api/v1/namespaces/team-a/pods/p1/binding HTTP/1.1",
	     "201 Created", binding_created, FT_FAKE_END},
	    {"POST /api/v1/namespaces/team-a/pods/p1/binding HTTP/1.1",
	     "409 Conflict", status_conflict, FT_FAKE_END},
	    {"POST /api/v1/namespaces/team-a/pods/p1/binding HTTP/1.1",
	     "404 Not Found", status_missing, FT_FAKE_END},
	    {"POST /api/v1/namespaces/team-a/pods/p1/binding HTTP/1.1",
	     "500 Internal Server Error", NULL, FT_FAKE_END},
	};
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;

	ft_fake_api_start(&server, steps, 4);
	client = ft_fake_api_client(&server, NULL, 5000);
	assert_int_equal(ft_kube_bind_pod(client, "team-a", "p1", "uid-1",
					  "gpu-node-3", NULL, NULL),
			 0);
	assert_int_equal(ft_kube_bind_pod(client, "team-a", "p1", "uid-1",
					  "gpu-node-3", NULL, NULL),
			 FT_ECONFLICT);
	assert_non_null(strstr(ft_error_last(), "HTTP 409"));
	assert_non_null(strstr(ft_error_last(), "already assigned"));
	assert_int_equal(ft_kube_bind_pod(client, "team-a", "p1", NULL,
					  "gpu-node-3", NULL, NULL),
			 FT_ENOTFOUND);
	/* A 5xx, unlike a 4xx, does not say that nothing was written. */
	assert_int_equal(ft_kube_bind_pod(client, "team-a", "p1", "uid-1",
					  "gpu-node-3", NULL, NULL),
			 FT_EUNKNOWN);
	assert_non_null(strstr(ft_error_last(), "outcome unknown (HTTP 500"));
	assert_int_equal(
	    ft_kube_bind_pod(client, "team-a", "p1", "u", "", NULL, NULL),
	    FT_EINVAL);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);

	assert_non_null(strstr(server.requests[0],
			       "\r\nContent-Type: application/json\r\n"));
	assert_non_null(strstr(server.requests[0],
			       "\r\nAuthorization: Bearer static-token\r\n"));
	assert_json_body(
	    server.requests[0],
	    "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"team-a\",\"uid\":\"uid-1\"},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"gpu-node-3\"}}");
	assert_json_body(
	    server.requests[2],
	    "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"team-a\"},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"gpu-node-3\"}}");
	ft_fake_api_dispose(&server);
}

/*
 * A client of a port bound but not listening: connections to it are
 * refused, and no other process (nor the client's own source port) can
 * take the port while `*fd` stays open. `url` (of `size` bytes) holds the
 * server URL for the client's lifetime; the caller closes `*fd` after
 * freeing the client.
 */
static ft_kube_client_t *refused_client(char *url, size_t size, int *fd)
{
	ft_kube_credentials_t creds = {0};
	ft_kube_client_t *client = NULL;
	struct sockaddr_in addr = {.sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(addr);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(*fd >= 0);
	assert_int_equal(bind(*fd, (struct sockaddr *)&addr, len), 0);
	assert_int_equal(getsockname(*fd, (struct sockaddr *)&addr, &len), 0);
	snprintf(url, size, "http://127.0.0.1:%d", ntohs(addr.sin_port));
	creds.server = url;
	assert_int_equal(ft_kube_client_new(&client, &creds, 2000), 0);
	return client;
}

#define BINDING "POST /api/v1/namespaces/team-a/pods/p1/binding HTTP/1.1"

static int bind_p1(ft_kube_client_t *client)
{
	return ft_kube_bind_pod(client, "team-a", "p1", "uid-1", "gpu-node-3",
				NULL, NULL);
}

/*
 * Which answers to a Binding are a refusal and which leave its outcome
 * unknown (as test/e2e/fault_test.go found: a reply cut short by a
 * kube-apiserver killed while it answered, a timeout while etcd was frozen;
 * both Bindings had landed).
 */
static void test_kube__bind_pod_outcomes(void **state)
{
	static const char *const status_forbidden[] = {
	    "{\"kind\":\"Status\",\"message\":\"forbidden\",\"code\":403}",
	    NULL};
	static const char *const status_timeout[] = {
	    "{\"kind\":\"Status\",\"message\":\"the server was unable to return a response in the time allotted, but may still be processing the request\",\"code\":504}",
	    NULL};
	static const ft_fake_step_t steps[] = {
	    {BINDING, "403 Forbidden", status_forbidden, FT_FAKE_END},
	    {BINDING, "504 Gateway Timeout", status_timeout, FT_FAKE_END},
	    /* Closed without a word, as by a kube-apiserver killed. */
	    {BINDING, NULL, NULL, FT_FAKE_END},
	    /* "Transferred a partial file": the status came, so did the
	     * Binding. */
	    {BINDING, "201 Created", binding_created, FT_FAKE_CUT},
	    {BINDING, "500 Internal Server Error", status_500, FT_FAKE_CUT},
	    /* No answer before the client's timeout. */
	    {BINDING, NULL, NULL, FT_FAKE_HANG},
	};
	ft_kube_credentials_t creds = {0};
	ft_kube_client_t *client = NULL, *impatient = NULL;
	ft_fake_api_t server;
	char url[64];

	ft_fake_api_start(&server, steps, 6);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", server.port);
	creds.server = url;
	/* The answered steps get time enough on a loaded machine; the last
	 * one, which hangs, a 500 ms client. */
	assert_int_equal(ft_kube_client_new(&client, &creds, 10000), 0);
	assert_int_equal(ft_kube_client_new(&impatient, &creds, 500), 0);
	assert_int_equal(bind_p1(client), FT_EIO);
	assert_non_null(strstr(ft_error_last(), "HTTP 403: forbidden"));
	assert_int_equal(bind_p1(client), FT_EUNKNOWN);
	assert_non_null(strstr(ft_error_last(), "may still be processing"));
	assert_int_equal(bind_p1(client), FT_EUNKNOWN);
	assert_int_equal(bind_p1(client), 0);
	assert_int_equal(bind_p1(client), FT_EUNKNOWN);
	assert_int_equal(bind_p1(impatient), FT_EUNKNOWN);
	assert_non_null(strstr(ft_error_last(), "outcome unknown (HTTP 0: "));
	ft_kube_client_free(impatient);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);
	ft_fake_api_dispose(&server);
}

/* Nothing sent, nothing written: a refusal to connect is not unknown. */
static void test_kube__bind_pod_not_sent(void **state)
{
	char url[64];
	int port_fd;
	ft_kube_client_t *client = refused_client(url, sizeof(url), &port_fd);

	assert_int_equal(bind_p1(client), FT_EUNAVAIL);
	ft_kube_client_free(client);
	close(port_fd);
}

/* The allocation rides in the Binding; names and values are escaped. */
static void test_kube__bind_pod_with_annotation(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {"POST /api/v1/namespaces/ns/pods/odd%20name%2Fx/binding HTTP/1.1",
	     "201 Created", binding_created, FT_FAKE_END},
	};
	const char *value = "{\"gpus\":[0,1],\"note\":\"a \\\"b\\\"\n\"}";
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;
	cJSON *binding = NULL;
	const cJSON *annotations = NULL;

	ft_fake_api_start(&server, steps, 1);
	client = ft_fake_api_client(&server, NULL, 5000);
	assert_int_equal(ft_kube_bind_pod(client, "ns", "odd name/x", "u", "n1",
					  "flextopo.io/allocation", value),
			 0);
	assert_int_equal(
	    ft_kube_bind_pod(client, "ns", "p", "u", "n1", "", value),
	    FT_EINVAL);
	assert_int_equal(
	    ft_kube_bind_pod(client, "ns", "p", "u", "n1", "k", NULL),
	    FT_EINVAL);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);

	binding = cJSON_Parse(ft_fake_request_body(server.requests[0]));
	assert_non_null(binding);
	annotations = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(binding, "metadata"),
	    "annotations");
	assert_int_equal(cJSON_GetArraySize(annotations), 1);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(
				annotations, "flextopo.io/allocation")
				->valuestring,
			    value);
	assert_string_equal(
	    cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(binding, "target"), "name")
		->valuestring,
	    "n1");
	cJSON_Delete(binding);
	ft_fake_api_dispose(&server);
}

/* ---- informer --------------------------------------------------------- */

/*
 * The handler calls of an informer, each with whether the informer said it
 * was synced at that moment (`informer` points at the test's variable,
 * which ft_informer_start() sets before the thread starts).
 */
typedef struct {
	pthread_mutex_t lock;
	char log[64][64];
	bool synced[64];
	size_t n;
	ft_informer_t *const *informer;
} recorder_t;

static void record(recorder_t *recorder, const char *what, const cJSON *object)
{
	const cJSON *metadata =
	    cJSON_GetObjectItemCaseSensitive(object, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(metadata, "name");

	pthread_mutex_lock(&recorder->lock);
	if (recorder->n < 64) {
		recorder->synced[recorder->n] =
		    recorder->informer &&
		    ft_informer_synced(*recorder->informer);
		snprintf(recorder->log[recorder->n++], sizeof(recorder->log[0]),
			 "%s%s%s", what, object ? " " : "",
			 cJSON_IsString(name) ? name->valuestring : "");
	}
	pthread_mutex_unlock(&recorder->lock);
}

static void on_replace_begin(void *payload)
{
	record(payload, "begin", NULL);
}

static void on_apply(ft_watch_event_t type, const cJSON *object, void *payload)
{
	record(payload, kind_names[type], object);
}

static void on_replace_end(void *payload)
{
	record(payload, "end", NULL);
}

static const ft_informer_handler_t recorder_handler = {
    .replace_begin = on_replace_begin,
    .apply = on_apply,
    .replace_end = on_replace_end,
};

static size_t recorded(recorder_t *recorder)
{
	size_t n;

	pthread_mutex_lock(&recorder->lock);
	n = recorder->n;
	pthread_mutex_unlock(&recorder->lock);
	return n;
}

static void wait_recorded(recorder_t *recorder, size_t n)
{
	uint64_t deadline = now_ms() + 15000;

	while (recorded(recorder) < n && now_ms() < deadline)
		sleep_ms(5);
	if (recorded(recorder) < n)
		fail_msg("only %zu of %zu handler calls", recorded(recorder),
			 n);
}

#define POD(name, rv)                                                          \
	"{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\","      \
	"\"resourceVersion\":\"" rv "\"},\"spec\":{\"nodeName\":\"n1\"}}"
#define EVENT(type, name, rv)                                                  \
	"{\"type\":\"" type "\",\"object\":" POD(name, rv) "}\n"
#define WATCH_PREFIX                                                           \
	"GET /api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion="

#define LIST "GET /api/v1/pods?resourceVersion= HTTP/1.1"

static const char *const list_10[] = {
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resou",
    "rceVersion\":\"10\"},\"items\":[" POD("a", "5") ",", POD("b", "7") "]}",
    NULL};
static const char *const watch_10[] = {
    EVENT("ADDED", "c", "11") "{\"type\":\"MODI",
    "FIED\",\"object\":" POD("a", "12") "}",
    "\n{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"15\"}}}\n",
    NULL};
static const char *const list_20[] = {
    "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[" POD(
	"a", "12") "," POD("c", "11") "]}",
    NULL};
#define GONE_EVENT                                                             \
	"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"  \
	"\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old " \
	"resource version: 20 (22)\",\"reason\":\"Expired\",\"code\":410}}\n"
static const char *const watch_20[] = {EVENT("DELETED", "c", "21"), GONE_EVENT,
				       NULL};
static const char *const list_30[] = {
    "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"30\"},\"items\":[" POD(
	"a", "12") "]}",
    NULL};
static const char *const status_410[] = {
    "{\"kind\":\"Status\",\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}",
    NULL};
static const char *const list_40[] = {
    "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"40\"},\"items\":[" POD(
	"a", "12") "]}",
    NULL};
static const char *const watch_40[] = {EVENT("ADDED", "d", "41"), NULL};

static const ft_fake_step_t informer_steps[] = {
    {LIST, "200 OK", list_10, FT_FAKE_END},
    /* Events cut mid-line, then a clean end: resume from the bookmark. */
    {WATCH_PREFIX "10&timeoutSeconds=", "200 OK", watch_10, FT_FAKE_END},
    /* A failed watch may have missed events: relist, never resume. */
    {WATCH_PREFIX "15&timeoutSeconds=", "500 Internal Server Error", status_500,
     FT_FAKE_END},
    {LIST, "200 OK", list_20, FT_FAKE_END},
    /* An in-stream 410 after an event: relist. */
    {WATCH_PREFIX "20&timeoutSeconds=", "200 OK", watch_20, FT_FAKE_HANG},
    {LIST, "200 OK", list_30, FT_FAKE_END},
    /* An HTTP 410 from the first watch after a list: relist. */
    {WATCH_PREFIX "30&timeoutSeconds=", "410 Gone", status_410, FT_FAKE_END},
    {LIST, "200 OK", list_40, FT_FAKE_END},
    {WATCH_PREFIX "40&timeoutSeconds=", "200 OK", watch_40, FT_FAKE_HANG},
};

#define INFORMER_STEPS (sizeof(informer_steps) / sizeof(informer_steps[0]))

/* Each call, and whether the informer was synced: only in watch events. */
static const char *const informer_calls[] = {
    "begin",   "ADDED a", "ADDED b", "end",	"ADDED c",   "MODIFIED a",
    "begin",   "ADDED a", "ADDED c", "end",	"DELETED c", "begin",
    "ADDED a", "end",	  "begin",   "ADDED a", "end",	     "ADDED d",
};
static const bool informer_call_synced[] = {
    false, false, false, false, true,  true,  false, false, false,
    false, true,  false, false, false, false, false, false, true,
};

static void assert_watch_timeout(const char *request)
{
	const char *t = strstr(request, "&timeoutSeconds=");
	unsigned long seconds;

	assert_non_null(t);
	seconds = strtoul(t + 16, NULL, 10);
	assert_true(seconds >= 300 && seconds <= 600);
}

static void test_kube__informer_sequence(void **state)
{
	size_t ncalls = sizeof(informer_calls) / sizeof(informer_calls[0]);
	recorder_t recorder = {.lock = PTHREAD_MUTEX_INITIALIZER};
	ft_kube_client_t *client = NULL;
	ft_informer_t *informer = NULL;
	ft_fake_api_t server;
	uint64_t stop_started;

	recorder.informer = &informer;
	ft_fake_api_start(&server, informer_steps, INFORMER_STEPS);
	client = ft_fake_api_client(&server, NULL, 5000);
	assert_int_equal(ft_informer_start(&informer, client, "/api/v1/pods",
					   &recorder_handler, &recorder, 10,
					   40),
			 0);
	wait_recorded(&recorder, ncalls);
	assert_true(ft_informer_synced(informer));
	assert_int_equal(ft_informer_restarts(informer), 3);

	/* The last watch is open and idle: stopping must cut it short. */
	stop_started = now_ms();
	ft_informer_free(informer);
	assert_true(now_ms() - stop_started < 2500);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);

	assert_int_equal(recorder.n, ncalls);
	for (size_t i = 0; i < ncalls; i++) {
		assert_string_equal(recorder.log[i], informer_calls[i]);
		if (recorder.synced[i] != informer_call_synced[i])
			fail_msg("call %zu (%s): synced %d", i,
				 informer_calls[i], recorder.synced[i]);
	}
	for (size_t i = 0; i < INFORMER_STEPS; i++) {
		assert_non_null(strstr(server.requests[i],
				       "\r\nAccept: application/json\r\n"));
		if (strstr(server.requests[i], "watch=1"))
			assert_watch_timeout(server.requests[i]);
	}
	ft_fake_api_dispose(&server);
}

/*
 * Start an informer on /api/v1/pods with a 60 s backoff into *out, which
 * the recorder's handlers read.
 */
static void slow_backoff_informer(ft_informer_t **out, ft_kube_client_t *client,
				  recorder_t *recorder)
{
	assert_int_equal(ft_informer_start(out, client, "/api/v1/pods",
					   &recorder_handler, recorder, 60000,
					   60000),
			 0);
}

/*
 * A 410 after a healthy watch relists at once: with a backoff of a minute,
 * the relist and the watch after it arrive well within wait_recorded's 15 s.
 */
static void test_kube__informer_relists_at_once_on_410(void **state)
{
	static const ft_fake_step_t steps[] = {
	    {LIST, "200 OK", list_10, false},
	    {WATCH_PREFIX "10&timeoutSeconds=", "200 OK", watch_20, true},
	    {LIST, "200 OK", list_40, false},
	    {WATCH_PREFIX "40&timeoutSeconds=", "200 OK", watch_40, true},
	};
	static const char *const calls[] = {
	    "begin", "ADDED a", "ADDED b", "end",     "DELETED c",
	    "begin", "ADDED a", "end",	   "ADDED d",
	};
	recorder_t recorder = {.lock = PTHREAD_MUTEX_INITIALIZER};
	ft_informer_t *informer = NULL;
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;

	recorder.informer = &informer;
	ft_fake_api_start(&server, steps, 4);
	client = ft_fake_api_client(&server, NULL, 5000);
	slow_backoff_informer(&informer, client, &recorder);
	wait_recorded(&recorder, 9);
	assert_int_equal(ft_informer_restarts(informer), 1);
	assert_true(ft_informer_synced(informer));
	ft_informer_free(informer);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);
	for (size_t i = 0; i < 9; i++)
		assert_string_equal(recorder.log[i], calls[i]);
	assert_true(recorder.synced[4] && recorder.synced[8]);
	assert_false(recorder.synced[5] || recorder.synced[7]);
	ft_fake_api_dispose(&server);
}

/*
 * A failed watch leaves the informer unsynced while it backs off: whatever
 * happened meanwhile is unknown until the relist.
 */
static void test_kube__informer_unsynced_after_failure(void **state)
{
	static const char *const watch_fails[] = {
	    EVENT("ADDED", "c", "11"),
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"etcdserver: request timed out\",\"code\":500}}\n",
	    NULL};
	static const ft_fake_step_t steps[] = {
	    {LIST, "200 OK", list_10, false},
	    {WATCH_PREFIX "10&timeoutSeconds=", "200 OK", watch_fails, true},
	};
	recorder_t recorder = {.lock = PTHREAD_MUTEX_INITIALIZER};
	ft_informer_t *informer = NULL;
	ft_kube_client_t *client = NULL;
	uint64_t deadline = now_ms() + 10000;
	ft_fake_api_t server;

	recorder.informer = &informer;
	ft_fake_api_start(&server, steps, 2);
	client = ft_fake_api_client(&server, NULL, 5000);
	slow_backoff_informer(&informer, client, &recorder);
	while (ft_informer_restarts(informer) == 0 && now_ms() < deadline)
		sleep_ms(5);
	assert_int_equal(ft_informer_restarts(informer), 1);
	assert_false(ft_informer_synced(informer));
	wait_recorded(&recorder, 5);
	assert_string_equal(recorder.log[4], "ADDED c");
	assert_true(recorder.synced[4]);
	ft_informer_free(informer);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);
	ft_fake_api_dispose(&server);
}

/*
 * A collection the API server does not serve (an API group not enabled):
 * the 404 list is a complete empty list, the informer is synced, and it
 * asks again after backoff_max_ms; once served, it lists and watches.
 */
static void test_kube__informer_optional_not_served(void **state)
{
	static const char *const not_found[] = {
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\",\"code\":404}",
	    NULL};
	static const ft_fake_step_t steps[] = {
	    {LIST, "404 Not Found", not_found, FT_FAKE_END},
	    {LIST, "404 Not Found", not_found, FT_FAKE_END},
	    {LIST, "200 OK", list_40, FT_FAKE_END},
	    {WATCH_PREFIX "40&timeoutSeconds=", "200 OK", watch_40,
	     FT_FAKE_HANG},
	};
	static const char *const calls[] = {"begin", "end",    "begin",
					    "end",   "begin",  "ADDED a",
					    "end",   "ADDED d"};
	recorder_t recorder = {.lock = PTHREAD_MUTEX_INITIALIZER};
	ft_informer_t *informer = NULL;
	ft_kube_client_t *client = NULL;
	ft_fake_api_t server;

	(void)state;
	recorder.informer = &informer;
	ft_fake_api_start(&server, steps, 4);
	client = ft_fake_api_client(&server, NULL, 5000);
	assert_int_equal(
	    ft_informer_start_optional(&informer, client, "/api/v1/pods",
				       &recorder_handler, &recorder, 10, 50),
	    0);
	wait_recorded(&recorder, 8);
	assert_true(ft_informer_synced(informer));
	ft_informer_free(informer);
	ft_kube_client_free(client);
	ft_fake_api_finish(&server);
	for (size_t i = 0; i < 8; i++)
		assert_string_equal(recorder.log[i], calls[i]);
	/* Synced from the first 404 on: between lists nothing is unknown. */
	assert_true(recorder.synced[2] && recorder.synced[7]);
	ft_fake_api_dispose(&server);
}

static void test_kube__informer_stop_in_backoff(void **state)
{
	recorder_t recorder = {.lock = PTHREAD_MUTEX_INITIALIZER};
	char url[64];
	int port_fd;
	ft_kube_client_t *client = refused_client(url, sizeof(url), &port_fd);
	ft_informer_t *informer = NULL;
	uint64_t deadline, stop_started;

	assert_int_equal(ft_informer_start(&informer, client, "/api/v1/nodes",
					   &recorder_handler, &recorder, 60000,
					   60000),
			 0);
	deadline = now_ms() + 5000;
	while (ft_informer_restarts(informer) == 0 && now_ms() < deadline)
		sleep_ms(5);
	assert_int_equal(ft_informer_restarts(informer), 1);
	assert_false(ft_informer_synced(informer));
	stop_started = now_ms();
	ft_informer_free(informer);
	/* Not the backoff's 60 s: woken, with room for a loaded machine. */
	assert_true(now_ms() - stop_started < 5000);
	assert_int_equal(recorder.n, 0);
	ft_kube_client_free(client);
	close(port_fd);
	ft_informer_free(NULL);
	ft_kube_client_free(NULL);
}

static int quiet_logs(void **state)
{
	ft_log_set_level(getenv("FT_TEST_VERBOSE") ? FT_LOG_DEBUG
						   : FT_LOG_ERROR);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube__base64),
	    cmocka_unit_test(test_kube__escape),
	    cmocka_unit_test(test_kube__kubeconfig_token),
	    cmocka_unit_test(test_kube__kubeconfig_files_relative),
	    cmocka_unit_test(test_kube__kubeconfig_cert_data),
	    cmocka_unit_test(test_kube__kubeconfig_missing_context),
	    cmocka_unit_test(test_kube__kubeconfig_unreadable),
	    cmocka_unit_test(test_kube__kubeconfig_errors),
	    cmocka_unit_test(test_kube__kubeconfig_interpret_paths),
	    cmocka_unit_test(test_kube__in_cluster),
	    cmocka_unit_test(test_kube__watch_stream_chunks),
	    cmocka_unit_test(test_kube__watch_event_decode),
	    cmocka_unit_test(test_kube__watch_stream_errors),
	    cmocka_unit_test(test_kube__request_token_rotates),
	    cmocka_unit_test(test_kube__client_tls_options),
	    cmocka_unit_test(test_kube__bind_pod),
	    cmocka_unit_test(test_kube__bind_pod_with_annotation),
	    cmocka_unit_test(test_kube__bind_pod_outcomes),
	    cmocka_unit_test(test_kube__bind_pod_not_sent),
	    cmocka_unit_test(test_kube__informer_sequence),
	    cmocka_unit_test(test_kube__informer_relists_at_once_on_410),
	    cmocka_unit_test(test_kube__informer_unsynced_after_failure),
	    cmocka_unit_test(test_kube__informer_stop_in_backoff),
	    cmocka_unit_test(test_kube__informer_optional_not_served),
	};

	return cmocka_run_group_tests(tests, quiet_logs, NULL);
}
