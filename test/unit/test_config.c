/*
 * Unit tests of the extender configuration: the defaults, the shipped
 * configs/flextopo.yaml (which must equal the defaults and list every key),
 * each key type and validator, every error with its exact "file:line"
 * message, command-line overrides, and that a failed load or set leaves the
 * configuration as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <flextopo/config.h>
#include <flextopo/error.h>

#include "support.h"

#define SHIPPED_CONFIG FT_SOURCE_DIR "/configs/flextopo.yaml"

/* The keys the extender documents, in schema order. */
static const char *const all_keys[] = {
    "listen",
    "debugListen",
    "metricsListen",
    "tlsCertFile",
    "tlsKeyFile",
    "tlsClientCAFile",
    "annotationPrefix",
    "kubeconfig",
    "snapshot",
    "logLevel",
    "gpuResource",
    "migResourcePrefix",
    "defaultAffinityMode",
    "policy",
    "maxRequestBytes",
    "threads",
    "maxConnections",
    "maxConnectionsPerClient",
    "connectionTimeoutSeconds",
    "apiTimeoutMs",
    "bindSettleSeconds",
    "watchBackoffInitialMs",
    "watchBackoffMaxMs",
    "decisionLogSize",
    "fragmentationWindow",
    "dra",
    "draDriver",
    "webhookListen",
    "webhookCertFile",
    "webhookKeyFile",
    "gangLabelKeys",
};

#define N_KEYS (sizeof(all_keys) / sizeof(all_keys[0]))

/* The keys as an unknown-key error lists them, in the schema's order. */
#define KNOWN_KEYS                                                              \
	"listen, debugListen, metricsListen, tlsCertFile, tlsKeyFile, "         \
	"tlsClientCAFile, "                                                     \
	"annotationPrefix, kubeconfig, snapshot, logLevel, gpuResource, "       \
	"migResourcePrefix, defaultAffinityMode, policy, maxRequestBytes, "     \
	"threads, maxConnections, maxConnectionsPerClient, "                    \
	"connectionTimeoutSeconds, apiTimeoutMs, bindSettleSeconds, "           \
	"watchBackoffInitialMs, watchBackoffMaxMs, decisionLogSize, "           \
	"fragmentationWindow, dra, draDriver, webhookListen, webhookCertFile, " \
	"webhookKeyFile, gangLabelKeys"

static void assert_config_equal(const ft_config_t *a, const ft_config_t *b)
{
	assert_string_equal(a->listen, b->listen);
	assert_string_equal(a->debug_listen, b->debug_listen);
	assert_string_equal(a->tls_cert_file, b->tls_cert_file);
	assert_string_equal(a->tls_key_file, b->tls_key_file);
	assert_string_equal(a->tls_client_ca_file, b->tls_client_ca_file);
	assert_string_equal(a->annotation_prefix, b->annotation_prefix);
	assert_string_equal(a->kubeconfig, b->kubeconfig);
	assert_string_equal(a->snapshot, b->snapshot);
	assert_string_equal(a->log_level, b->log_level);
	assert_string_equal(a->gpu_resource, b->gpu_resource);
	assert_string_equal(a->mig_resource_prefix, b->mig_resource_prefix);
	assert_int_equal(a->default_affinity_mode, b->default_affinity_mode);
	assert_int_equal(a->policy, b->policy);
	assert_int_equal(a->max_request_bytes, b->max_request_bytes);
	assert_int_equal(a->threads, b->threads);
	assert_int_equal(a->max_connections, b->max_connections);
	assert_int_equal(a->max_connections_per_client,
			 b->max_connections_per_client);
	assert_int_equal(a->connection_timeout_s, b->connection_timeout_s);
	assert_int_equal(a->api_timeout_ms, b->api_timeout_ms);
	assert_int_equal(a->watch_backoff_initial_ms,
			 b->watch_backoff_initial_ms);
	assert_int_equal(a->watch_backoff_max_ms, b->watch_backoff_max_ms);
	assert_int_equal(a->decision_log_size, b->decision_log_size);
	assert_int_equal(a->dra, b->dra);
	assert_string_equal(a->dra_driver, b->dra_driver);
}

static int load(ft_config_t *cfg, const char *text)
{
	return ft_config_load_string(cfg, text, strlen(text), "t.yaml");
}

/* Loading `text` over the defaults fails with exactly `message`. */
static void assert_load_fails(const char *text, const char *message)
{
	ft_config_t cfg;
	ft_config_t defaults;

	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_init(&defaults), 0);
	assert_int_equal(load(&cfg, text), FT_EINVAL);
	assert_string_equal(ft_error_last(), message);
	assert_config_equal(&cfg, &defaults);
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
}

/* ft_config_set(key, value) succeeds (or fails) on the defaults. */
static void assert_set(const char *key, const char *value, int expected)
{
	ft_config_t cfg;
	int rc;

	assert_int_equal(ft_config_init(&cfg), 0);
	rc = ft_config_set(&cfg, key, value);
	if (rc != expected)
		fail_msg("%s=\"%s\": got %d (%s), expected %d", key, value, rc,
			 rc ? ft_error_last() : "ok", expected);
	ft_config_dispose(&cfg);
}

static void assert_set_fails(const char *key, const char *value,
			     const char *message)
{
	ft_config_t cfg;
	ft_config_t defaults;

	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_init(&defaults), 0);
	assert_int_equal(ft_config_set(&cfg, key, value), FT_EINVAL);
	assert_string_equal(ft_error_last(), message);
	assert_config_equal(&cfg, &defaults);
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
}

static void test_config__defaults(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_string_equal(cfg.listen, "0.0.0.0:8888");
	assert_string_equal(cfg.debug_listen, "");
	assert_string_equal(cfg.tls_cert_file, "");
	assert_string_equal(cfg.tls_key_file, "");
	assert_string_equal(cfg.tls_client_ca_file, "");
	assert_string_equal(cfg.annotation_prefix, "flextopo.io");
	assert_string_equal(cfg.kubeconfig, "");
	assert_string_equal(cfg.snapshot, "");
	assert_string_equal(cfg.log_level, "info");
	assert_string_equal(cfg.gpu_resource, "nvidia.com/gpu");
	assert_string_equal(cfg.mig_resource_prefix, "nvidia.com/mig-");
	assert_int_equal(cfg.default_affinity_mode, FT_MODE_GUARANTEED);
	assert_int_equal(cfg.policy, FT_POLICY_PACKED);
	assert_int_equal(cfg.max_request_bytes, 67108864);
	assert_int_equal(cfg.threads, 0);
	assert_int_equal(cfg.api_timeout_ms, 10000);
	assert_int_equal(cfg.watch_backoff_initial_ms, 800);
	assert_int_equal(cfg.watch_backoff_max_ms, 30000);
	assert_int_equal(cfg.decision_log_size, 1024);
	ft_config_dispose(&cfg);
	ft_config_dispose(&cfg);
	ft_config_dispose(NULL);
}

static void test_config__shipped_file_equals_defaults(void **state)
{
	ft_config_t cfg;
	ft_config_t defaults;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_init(&defaults), 0);
	/* Start from other values so that every key must come from the file. */
	assert_int_equal(
	    ft_config_load_file(&cfg, FT_FIXTURES_DIR "/config/full.yaml"), 0);
	if (ft_config_load_file(&cfg, SHIPPED_CONFIG) != 0)
		fail_msg("%s", ft_error_last());
	assert_config_equal(&cfg, &defaults);
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
}

/* True when `text` has a line that starts with "key:". */
static int has_key_line(const char *text, const char *key)
{
	size_t len = strlen(key);
	const char *line = text;

	while (line && *line) {
		if (!strncmp(line, key, len) && line[len] == ':')
			return 1;
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return 0;
}

static void test_config__shipped_file_lists_every_key(void **state)
{
	ft_config_t cfg;
	char *text = NULL;
	char expected[1024] = "";
	size_t i;

	(void)state;
	/* The schema table names its keys in the unknown-key message. */
	for (i = 0; i < N_KEYS; i++) {
		strcat(expected,
		       i ? ", " : "t.yaml:1: unknown key \"x\" (known keys: ");
		strcat(expected, all_keys[i]);
	}
	strcat(expected, ")");
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "x: 1\n"), FT_EINVAL);
	assert_string_equal(ft_error_last(), expected);
	text = ft_test_read_file(SHIPPED_CONFIG, NULL);
	assert_non_null(text);
	for (i = 0; i < N_KEYS; i++) {
		if (!has_key_line(text, all_keys[i]))
			fail_msg("%s is missing from configs/flextopo.yaml",
				 all_keys[i]);
	}
	free(text);
	ft_config_dispose(&cfg);
}

static void test_config__empty_inputs_keep_values(void **state)
{
	const char *empty[] = {"",	"\n\n",	     "# only a comment\n",
			       "---\n", "--- ~\n",   "null\n",
			       "{}\n",	"---\n...\n"};
	ft_config_t cfg;
	ft_config_t defaults;
	size_t i;

	(void)state;
	assert_int_equal(ft_config_init(&defaults), 0);
	for (i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		assert_int_equal(ft_config_init(&cfg), 0);
		if (load(&cfg, empty[i]) != 0)
			fail_msg("\"%s\": %s", empty[i], ft_error_last());
		assert_config_equal(&cfg, &defaults);
		ft_config_dispose(&cfg);
	}
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_load_string(&cfg, NULL, 0, NULL), 0);
	assert_config_equal(&cfg, &defaults);
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
}

static void test_config__full_file(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(
	    ft_config_load_file(&cfg, FT_FIXTURES_DIR "/config/full.yaml"), 0);
	assert_string_equal(cfg.listen, "[::1]:9443");
	assert_string_equal(cfg.debug_listen, "127.0.0.1:6060");
	assert_string_equal(cfg.metrics_listen, "0.0.0.0:10270");
	assert_string_equal(cfg.tls_cert_file, "/etc/flextopo/tls/tls.crt");
	assert_string_equal(cfg.tls_key_file, "/etc/flextopo/tls/tls.key");
	assert_string_equal(cfg.tls_client_ca_file,
			    "/etc/flextopo/tls/client-ca.crt");
	assert_string_equal(cfg.annotation_prefix, "topo.example.com");
	assert_string_equal(cfg.kubeconfig, "/etc/flextopo/kubeconfig");
	assert_string_equal(cfg.snapshot, "snapshots/cluster state.yaml");
	assert_string_equal(cfg.log_level, "debug");
	assert_string_equal(cfg.gpu_resource, "example.com/accelerator");
	assert_string_equal(cfg.mig_resource_prefix, "example.com/slice-");
	assert_int_equal(cfg.default_affinity_mode, FT_MODE_BEST_EFFORT);
	assert_int_equal(cfg.policy, FT_POLICY_DISTRIBUTED);
	assert_int_equal(cfg.max_request_bytes, 16 * 1024 * 1024);
	assert_int_equal(cfg.threads, 8);
	assert_int_equal(cfg.max_connections, 4096);
	assert_int_equal(cfg.max_connections_per_client, 0);
	assert_int_equal(cfg.connection_timeout_s, 300);
	assert_int_equal(cfg.api_timeout_ms, 2500);
	assert_int_equal(cfg.bind_settle_s, 90);
	assert_int_equal(cfg.watch_backoff_initial_ms, 100);
	assert_int_equal(cfg.watch_backoff_max_ms, 60000);
	assert_int_equal(cfg.decision_log_size, 4096);
	ft_config_dispose(&cfg);
}

static void test_config__partial_file_keeps_other_values(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_set(&cfg, "threads", "12"), 0);
	assert_int_equal(load(&cfg, "policy: distributed\n"), 0);
	assert_int_equal(cfg.policy, FT_POLICY_DISTRIBUTED);
	assert_int_equal(cfg.threads, 12);
	assert_string_equal(cfg.listen, "0.0.0.0:8888");
	ft_config_dispose(&cfg);
}

static void test_config__string_keys(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "kubeconfig: ~/.kube/config\n"
				    "snapshot: \"/tmp/a b.yaml\"\n"),
			 0);
	assert_string_equal(cfg.kubeconfig, "~/.kube/config");
	assert_string_equal(cfg.snapshot, "/tmp/a b.yaml");
	/* A null string is "": the key's "off" or "default" value. */
	assert_int_equal(load(&cfg, "kubeconfig: ~\nsnapshot:\n"
				    "debugListen: null\n"),
			 0);
	assert_string_equal(cfg.kubeconfig, "");
	assert_string_equal(cfg.snapshot, "");
	assert_string_equal(cfg.debug_listen, "");
	/* A quoted "~" is text. */
	assert_int_equal(load(&cfg, "kubeconfig: '~'\n"), 0);
	assert_string_equal(cfg.kubeconfig, "~");
	ft_config_dispose(&cfg);
}

static void test_config__listen_addresses(void **state)
{
	const char *good[] = {"0.0.0.0:8888",	 "127.0.0.1:0",
			      "localhost:65535", "my-host.example.com:443",
			      "[::1]:9000",	 "[fe80::1]:80",
			      "[::]:8888",	 "Host-1:8080"};
	const char *bad[] = {"0.0.0.0",	     "0.0.0.0:",  ":8888",
			     "::1:8888",     "[::1:8888", "[zz::1]:80",
			     "256.1.1.1:80", "1.2.3:80",  "host:65536",
			     "host:-1",	     "host:80x",  "-host:80",
			     "ho st:80",     "host_a:80", "a..b:80",
			     "host:123456",  ""};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_set("listen", good[i], 0);
		assert_set("debugListen", good[i], 0);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_set("listen", bad[i], FT_EINVAL);
	/* debugListen alone may be off. */
	assert_set("debugListen", "", 0);
	assert_set_fails("listen", "::1:8888",
			 "listen: expected HOST:PORT, got \"::1:8888\"");
	assert_set_fails(
	    "debugListen", "localhost",
	    "debugListen: expected HOST:PORT or \"\", got \"localhost\"");
}

static void test_config__annotation_prefix(void **state)
{
	const char *good[] = {"flextopo.io", "example.com", "a", "a-b.c-d.e",
			      "0.example"};
	const char *bad[] = {"",   "Example.com", "-a.com",  "a-.com",	"a..b",
			     ".a", "a.",	  "a_b.com", "a.com/x", "a b"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_set("annotationPrefix", good[i], 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_set("annotationPrefix", bad[i], FT_EINVAL);
	assert_load_fails(
	    "annotationPrefix: Flextopo.IO\n",
	    "t.yaml:1: annotationPrefix: expected a DNS subdomain, got \"Flextopo.IO\"");
}

static void test_config__resource_names(void **state)
{
	(void)state;
	assert_set("gpuResource", "nvidia.com/gpu", 0);
	assert_set("gpuResource", "amd.com/gpu", 0);
	assert_set("gpuResource", "gpu", FT_EINVAL);
	assert_set("gpuResource", "nvidia.com/", FT_EINVAL);
	assert_set("gpuResource", "nvidia.com/gpu-", FT_EINVAL);
	assert_set("gpuResource", "NVIDIA.com/gpu", FT_EINVAL);
	assert_set("migResourcePrefix", "nvidia.com/mig-", 0);
	assert_set("migResourcePrefix", "nvidia.com/", FT_EINVAL);
	assert_set("migResourcePrefix", "nvidia.com/-mig", FT_EINVAL);
	assert_set("migResourcePrefix", "mig-", FT_EINVAL);
	assert_set_fails(
	    "gpuResource", "gpu",
	    "gpuResource: expected a resource name such as nvidia.com/gpu, got \"gpu\"");
}

static void test_config__log_level(void **state)
{
	ft_config_t cfg;
	const char *levels[] = {"debug", "info", "warn", "error"};
	size_t i;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(ft_config_set(&cfg, "logLevel", levels[i]), 0);
		assert_string_equal(cfg.log_level, levels[i]);
	}
	ft_config_dispose(&cfg);
	assert_load_fails(
	    "logLevel: verbose\n",
	    "t.yaml:1: logLevel: expected debug, info, warn or error, got \"verbose\"");
	assert_set("logLevel", "INFO", FT_EINVAL);
	assert_set("logLevel", "warning", FT_EINVAL);
}

static void test_config__enum_keys(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "policy: distributed\n"
				    "defaultAffinityMode: best-effort\n"),
			 0);
	assert_int_equal(cfg.policy, FT_POLICY_DISTRIBUTED);
	assert_int_equal(cfg.default_affinity_mode, FT_MODE_BEST_EFFORT);
	assert_int_equal(load(&cfg, "policy: \"packed\"\n"
				    "defaultAffinityMode: guaranteed\n"),
			 0);
	assert_int_equal(cfg.policy, FT_POLICY_PACKED);
	assert_int_equal(cfg.default_affinity_mode, FT_MODE_GUARANTEED);
	ft_config_dispose(&cfg);
	assert_set_fails(
	    "defaultAffinityMode", "BestEffort",
	    "defaultAffinityMode: expected guaranteed or best-effort, got \"BestEffort\"");
	assert_set("policy", "Packed", FT_EINVAL);
	assert_set("policy", "", FT_EINVAL);
}

static void test_config__unsigned_keys(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "threads: 256\napiTimeoutMs: 1\n"
				    "decisionLogSize: 1048576\n"
				    "watchBackoffInitialMs: 3600000\n"
				    "watchBackoffMaxMs: 3600000\n"),
			 0);
	assert_int_equal(cfg.threads, 256);
	assert_int_equal(cfg.api_timeout_ms, 1);
	assert_int_equal(cfg.decision_log_size, 1048576);
	assert_int_equal(cfg.watch_backoff_initial_ms, 3600000);
	assert_int_equal(cfg.fragmentation_window, 64); /* the default */
	assert_int_equal(load(&cfg, "fragmentationWindow: 0\n"), 0);
	assert_int_equal(cfg.fragmentation_window, 0);
	assert_int_equal(load(&cfg, "fragmentationWindow: 4096\n"), 0);
	assert_int_equal(cfg.fragmentation_window, 4096);
	/* A quoted number is the same number. */
	assert_int_equal(load(&cfg, "threads: \"0\"\n"), 0);
	assert_int_equal(cfg.threads, 0);
	ft_config_dispose(&cfg);
	assert_set("threads", "257", FT_EINVAL);
	assert_set("threads", "-1", FT_EINVAL);
	assert_set("threads", "+4", FT_EINVAL);
	assert_set("threads", " 4", FT_EINVAL);
	assert_set("threads", "4 ", FT_EINVAL);
	assert_set("threads", "4.0", FT_EINVAL);
	assert_set("threads", "0x10", FT_EINVAL);
	assert_set("threads", "", FT_EINVAL);
	assert_set("threads", "99999999999999999999999", FT_EINVAL);
	assert_set("threads", "4294967297", FT_EINVAL);
	assert_set("apiTimeoutMs", "0", FT_EINVAL);
	assert_set("decisionLogSize", "0", FT_EINVAL);
	assert_set("fragmentationWindow", "4097", FT_EINVAL);
	assert_set("maxConnections", "0", FT_EINVAL);
	assert_set("maxConnections", "65537", FT_EINVAL);
	assert_set("maxConnectionsPerClient", "65537", FT_EINVAL);
	assert_set("connectionTimeoutSeconds", "0", FT_EINVAL);
	assert_set("connectionTimeoutSeconds", "86401", FT_EINVAL);
	assert_load_fails(
	    "threads: many\n",
	    "t.yaml:1: threads: expected an integer from 0 to 256, got \"many\"");
	assert_load_fails(
	    "\napiTimeoutMs: 3600001\n",
	    "t.yaml:2: apiTimeoutMs: expected an integer from 1 to 3600000, got \"3600001\"");
}

static void test_config__dra_keys(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(cfg.dra, FT_ON);
	assert_string_equal(cfg.dra_driver, "gpu.nvidia.com");
	assert_int_equal(load(&cfg, "dra: off\ndraDriver: gpu.example.com\n"),
			 0);
	assert_int_equal(cfg.dra, FT_OFF);
	assert_string_equal(cfg.dra_driver, "gpu.example.com");
	ft_config_dispose(&cfg);
	assert_load_fails("dra: yes\n",
			  "t.yaml:1: dra: expected off or on, got \"yes\"");
	assert_set("draDriver", "GPU_driver", FT_EINVAL);
	assert_set("draDriver", "", FT_EINVAL);
	assert_load_fails(
	    "webhookListen: 0.0.0.0:9443\nwebhookCertFile: /c.pem\n",
	    "t.yaml:1: webhookListen: needs webhookCertFile and webhookKeyFile (kube-apiserver calls webhooks over HTTPS only)");
}

static void test_config__size_key(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_set(&cfg, "maxRequestBytes", "1Ki"), 0);
	assert_int_equal(cfg.max_request_bytes, 1024);
	assert_int_equal(ft_config_set(&cfg, "maxRequestBytes", "1Gi"), 0);
	assert_int_equal(cfg.max_request_bytes, 1073741824);
	assert_int_equal(ft_config_set(&cfg, "maxRequestBytes", "2048"), 0);
	assert_int_equal(cfg.max_request_bytes, 2048);
	assert_int_equal(ft_config_set(&cfg, "maxRequestBytes", "512Mi"), 0);
	assert_int_equal(cfg.max_request_bytes, 512 * 1024 * 1024);
	ft_config_dispose(&cfg);
	assert_set("maxRequestBytes", "1023", FT_EINVAL);
	assert_set("maxRequestBytes", "1073741825", FT_EINVAL);
	assert_set("maxRequestBytes", "2Gi", FT_EINVAL);
	assert_set("maxRequestBytes", "64MB", FT_EINVAL);
	assert_set("maxRequestBytes", "64mi", FT_EINVAL);
	assert_set("maxRequestBytes", "1.5Mi", FT_EINVAL);
	assert_set("maxRequestBytes", "Mi", FT_EINVAL);
	assert_set("maxRequestBytes", "18014398509481984Gi", FT_EINVAL);
	assert_load_fails(
	    "maxRequestBytes: 64 MiB\n",
	    "t.yaml:1: maxRequestBytes: expected a size from 1024 to 1073741824 bytes (suffix Ki, Mi or Gi allowed), got \"64 MiB\"");
}

static void test_config__error_file_line(void **state)
{
	ft_config_t cfg;
	char expected[1200];

	(void)state;
	assert_load_fails(
	    "threads: 4\n\n# comment\npolicy: spread\n",
	    "t.yaml:4: policy: expected packed or distributed, got \"spread\"");
	/* The value's own line, for a value on the line after its key. */
	assert_load_fails(
	    "threads:\n  -4\n",
	    "t.yaml:2: threads: expected an integer from 0 to 256, got \"-4\"");
	/* A real file is named by its path. */
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_load_file(&cfg, FT_FIXTURES_DIR
					     "/config/bad-policy.yaml"),
			 FT_EINVAL);
	snprintf(
	    expected, sizeof(expected),
	    "%s/config/bad-policy.yaml:4: policy: expected packed or distributed, got \"spread\"",
	    FT_FIXTURES_DIR);
	assert_string_equal(ft_error_last(), expected);
	ft_config_dispose(&cfg);
}

static void test_config__error_unknown_key(void **state)
{
	(void)state;
	assert_load_fails(
	    "listen: 0.0.0.0:1\nthread: 4\n",
	    "t.yaml:2: unknown key \"thread\" (known keys: " KNOWN_KEYS ")");
	/* Keys are case-sensitive camelCase. */
	assert_set("LogLevel", "info", FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "unknown key \"LogLevel\""));
}

static void test_config__error_top_level(void **state)
{
	(void)state;
	assert_load_fails(
	    "- listen\n- threads\n",
	    "t.yaml:1: expected a mapping of keys at the top level, got a sequence");
	assert_load_fails(
	    "\n\nlisten\n",
	    "t.yaml:3: expected a mapping of keys at the top level, got \"listen\"");
	assert_load_fails(
	    "--- |\n  two\n  lines\n",
	    "t.yaml:1: expected a mapping of keys at the top level, got \"two\\nlines\\n\"");
}

static void test_config__error_duplicate_key(void **state)
{
	(void)state;
	assert_load_fails(
	    "policy: packed\nthreads: 1\npolicy: distributed\n",
	    "t.yaml:3: duplicate key \"policy\" (first set on line 1)");
}

static void test_config__error_non_scalars(void **state)
{
	(void)state;
	assert_load_fails(
	    "threads: [1]\n",
	    "t.yaml:1: threads: expected an integer from 0 to 256, got a sequence");
	assert_load_fails(
	    "listen:\n  host: a\n  port: 1\n",
	    "t.yaml:2: listen: expected HOST:PORT, got a mapping");
	assert_load_fails("a: &x 1\n",
			  "t.yaml:1: unknown key \"a\" (known keys: " KNOWN_KEYS
			  ")");
	assert_load_fails(
	    "threads: &t 4\napiTimeoutMs: *t\n",
	    "t.yaml:2: apiTimeoutMs: expected an integer from 1 to 3600000, got an alias");
	assert_load_fails("? [threads]\n: 4\n",
			  "t.yaml:1: expected a key, got a sequence");
}

static void test_config__error_syntax(void **state)
{
	(void)state;
	assert_load_fails(
	    "threads: 4\npolicy: packed\nlisten: 'x\n",
	    "t.yaml:4: found unexpected end of stream (while scanning a quoted scalar at line 3)");
	assert_load_fails(
	    "threads: 4\n- packed\n",
	    "t.yaml:2: did not find expected key (while parsing a block mapping at line 1)");
	assert_load_fails(
	    "kubeconfig: a\n  policy: packed\n",
	    "t.yaml:2: mapping values are not allowed in this context");
	assert_load_fails("threads: 4\nlisten: \"\xc3\x28\"\n",
			  "t.yaml:2: invalid trailing UTF-8 octet");
}

static void test_config__error_second_document(void **state)
{
	(void)state;
	assert_load_fails(
	    "threads: 4\n---\nthreads: 5\n",
	    "t.yaml:2: expected one YAML document, found another");
}

static void test_config__error_backoff_order(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_load_fails(
	    "watchBackoffMaxMs: 1000\n"
	    "watchBackoffInitialMs: 5000\n",
	    "t.yaml:2: watchBackoffInitialMs: expected at most watchBackoffMaxMs (1000), got \"5000\"");
	assert_load_fails(
	    "threads: 1\nwatchBackoffMaxMs: 500\n",
	    "t.yaml:2: watchBackoffMaxMs: expected at least watchBackoffInitialMs (800), got \"500\"");
	/* Checked after the whole file: the order of the keys is free. */
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "watchBackoffMaxMs: 500\n"
				    "watchBackoffInitialMs: 100\n"),
			 0);
	assert_int_equal(cfg.watch_backoff_initial_ms, 100);
	assert_int_equal(cfg.watch_backoff_max_ms, 500);
	/* Equal is fine. */
	assert_int_equal(ft_config_set(&cfg, "watchBackoffInitialMs", "500"),
			 0);
	ft_config_dispose(&cfg);
	assert_set_fails(
	    "watchBackoffMaxMs", "799",
	    "watchBackoffMaxMs: expected at least watchBackoffInitialMs (800), got \"799\"");
	assert_set_fails(
	    "watchBackoffInitialMs", "30001",
	    "watchBackoffInitialMs: expected at most watchBackoffMaxMs (30000), got \"30001\"");
}

static void test_config__error_missing_file(void **state)
{
	ft_config_t cfg;
	ft_config_t defaults;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_init(&defaults), 0);
	assert_int_equal(
	    ft_config_load_file(&cfg, "/nonexistent/flextopo.yaml"), FT_EIO);
	assert_string_equal(
	    ft_error_last(),
	    "/nonexistent/flextopo.yaml: No such file or directory");
	assert_int_equal(ft_config_load_file(&cfg, FT_FIXTURES_DIR "/config"),
			 FT_EIO);
	assert_non_null(strstr(ft_error_last(), "/config: Is a directory"));
	assert_config_equal(&cfg, &defaults);
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
}

static void test_config__unchanged_on_error(void **state)
{
	ft_config_t cfg;
	ft_config_t before;
	char *listen = NULL;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "listen: 10.0.0.1:80\nthreads: 3\n"), 0);
	assert_int_equal(ft_config_init(&before), 0);
	assert_int_equal(load(&before, "listen: 10.0.0.1:80\nthreads: 3\n"), 0);
	listen = cfg.listen;
	/* Good keys before the bad one are not applied either. */
	assert_int_equal(load(&cfg, "listen: 10.0.0.2:81\n"
				    "policy: distributed\n"
				    "threads: 4\n"
				    "logLevel: loud\n"),
			 FT_EINVAL);
	assert_config_equal(&cfg, &before);
	assert_ptr_equal(cfg.listen, listen);
	assert_int_equal(load(&cfg, "listen: 10.0.0.2:81\npolicy: [\n"),
			 FT_EINVAL);
	assert_config_equal(&cfg, &before);
	assert_int_equal(ft_config_set(&cfg, "listen", "nope"), FT_EINVAL);
	assert_config_equal(&cfg, &before);
	ft_config_dispose(&cfg);
	ft_config_dispose(&before);
}

static void test_config__set_overrides(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_set(&cfg, "policy", "distributed"), 0);
	assert_int_equal(ft_config_set(&cfg, "listen", "[::]:9000"), 0);
	assert_int_equal(ft_config_set(&cfg, "kubeconfig", "/k"), 0);
	assert_int_equal(ft_config_set(&cfg, "maxRequestBytes", "8Mi"), 0);
	assert_int_equal(ft_config_set(&cfg, "threads", "2"), 0);
	assert_int_equal(cfg.policy, FT_POLICY_DISTRIBUTED);
	assert_string_equal(cfg.listen, "[::]:9000");
	assert_string_equal(cfg.kubeconfig, "/k");
	assert_int_equal(cfg.max_request_bytes, 8 * 1024 * 1024);
	assert_int_equal(cfg.threads, 2);
	/* A later file load keeps overrides it does not mention... */
	assert_int_equal(load(&cfg, "threads: 6\n"), 0);
	assert_int_equal(cfg.policy, FT_POLICY_DISTRIBUTED);
	assert_int_equal(cfg.threads, 6);
	ft_config_dispose(&cfg);
	assert_set_fails(
	    "threads", NULL,
	    "threads: expected an integer from 0 to 256, got no value");
	assert_set_fails(
	    "policy", "spread",
	    "policy: expected packed or distributed, got \"spread\"");
	assert_set_fails("nope", "1",
			 "unknown key \"nope\" (known keys: " KNOWN_KEYS ")");
}

static void test_config__tls_keys(void **state)
{
	ft_config_t cfg;

	(void)state;
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(load(&cfg, "tlsCertFile: /tls/tls.crt\n"
				    "tlsKeyFile: /tls/tls.key\n"),
			 0);
	assert_string_equal(cfg.tls_cert_file, "/tls/tls.crt");
	assert_string_equal(cfg.tls_key_file, "/tls/tls.key");
	assert_string_equal(cfg.tls_client_ca_file, "");
	assert_int_equal(load(&cfg, "tlsClientCAFile: /tls/ca.crt\n"), 0);
	assert_string_equal(cfg.tls_client_ca_file, "/tls/ca.crt");
	/* Back to plain HTTP: all three off in one file. */
	assert_int_equal(load(&cfg, "tlsCertFile: \"\"\ntlsKeyFile: ~\n"
				    "tlsClientCAFile:\n"),
			 0);
	assert_string_equal(cfg.tls_cert_file, "");
	assert_string_equal(cfg.tls_client_ca_file, "");
	ft_config_dispose(&cfg);

	/* Both or neither, blamed on the line of the key that is set. */
	assert_load_fails(
	    "threads: 2\ntlsCertFile: /tls/tls.crt\n",
	    "t.yaml:2: tlsCertFile: needs tlsKeyFile too (TLS takes both or neither)");
	assert_load_fails(
	    "tlsKeyFile: /tls/tls.key\ntlsCertFile: \"\"\n",
	    "t.yaml:1: tlsKeyFile: needs tlsCertFile too (TLS takes both or neither)");
	assert_load_fails(
	    "threads: 2\n\ntlsClientCAFile: /tls/ca.crt\n",
	    "t.yaml:3: tlsClientCAFile: needs tlsCertFile and tlsKeyFile (client certificates are asked for over TLS only)");
	/* The file completes a pair begun on the command line... */
	assert_int_equal(ft_config_init(&cfg), 0);
	assert_int_equal(ft_config_set(&cfg, "tlsCertFile", "/a.crt"), 0);
	assert_int_equal(load(&cfg, "tlsKeyFile: /a.key\n"), 0);
	assert_string_equal(cfg.tls_key_file, "/a.key");
	/* ...and a file that breaks one is blamed at its line. */
	assert_int_equal(load(&cfg, "threads: 1\ntlsKeyFile: \"\"\n"),
			 FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "t.yaml:2: tlsCertFile: needs tlsKeyFile too (TLS takes both or neither)");
	ft_config_dispose(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config__defaults),
	    cmocka_unit_test(test_config__shipped_file_equals_defaults),
	    cmocka_unit_test(test_config__shipped_file_lists_every_key),
	    cmocka_unit_test(test_config__empty_inputs_keep_values),
	    cmocka_unit_test(test_config__full_file),
	    cmocka_unit_test(test_config__partial_file_keeps_other_values),
	    cmocka_unit_test(test_config__string_keys),
	    cmocka_unit_test(test_config__listen_addresses),
	    cmocka_unit_test(test_config__annotation_prefix),
	    cmocka_unit_test(test_config__resource_names),
	    cmocka_unit_test(test_config__log_level),
	    cmocka_unit_test(test_config__enum_keys),
	    cmocka_unit_test(test_config__unsigned_keys),
	    cmocka_unit_test(test_config__size_key),
	    cmocka_unit_test(test_config__error_file_line),
	    cmocka_unit_test(test_config__error_unknown_key),
	    cmocka_unit_test(test_config__error_top_level),
	    cmocka_unit_test(test_config__error_duplicate_key),
	    cmocka_unit_test(test_config__error_non_scalars),
	    cmocka_unit_test(test_config__error_syntax),
	    cmocka_unit_test(test_config__error_second_document),
	    cmocka_unit_test(test_config__error_backoff_order),
	    cmocka_unit_test(test_config__tls_keys),
	    cmocka_unit_test(test_config__error_missing_file),
	    cmocka_unit_test(test_config__unchanged_on_error),
	    cmocka_unit_test(test_config__set_overrides),
	    cmocka_unit_test(test_config__dra_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
