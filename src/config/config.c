/*
 * Extender configuration: one schema table, a libyaml event reader for the
 * file and a setter for command-line overrides.
 *
 * The table below is the single place where a key's name, type, allowed
 * values, default and meaning live: the defaults are applied through the
 * same setter and validators as the file and the command line, and
 * configs/flextopo.yaml repeats the table for people (a unit test keeps the
 * two equal). The file is read from libyaml's events rather than through a
 * generic YAML tree so that every error can name the line of the offending
 * key or value. Loading works on a copy that replaces the caller's
 * configuration only when the whole file is good.
 */
#include <flextopo/config.h>
#include <flextopo/error.h>
#include <flextopo/file.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

typedef enum {
	KEY_STRING,   /* char *; any text, `choices` or `valid` restrict it */
	KEY_ENUM,     /* an enum field; choice i is stored as value i */
	KEY_UNSIGNED, /* unsigned in [min, max] */
	KEY_SIZE, /* size_t in [min, max], with an optional Ki/Mi/Gi suffix */
} key_type_t;

typedef struct key_spec {
	const char *name;
	key_type_t type;
	size_t offset;
	const char *def;
	const char *const *choices; /* NULL-terminated, or NULL */
	unsigned long long min;
	unsigned long long max;
	bool (*valid)(const char *text);
	const char *expected; /* what `valid` accepts, for messages */
	const char *doc;
} key_spec_t;

static bool valid_listen(const char *text);
static bool valid_listen_or_off(const char *text);
static bool valid_subdomain(const char *text);
static bool valid_resource_name(const char *text);
static bool valid_resource_prefix(const char *text);
static bool valid_label_keys(const char *text);

static const char *const log_levels[] = {"debug", "info", "warn", "error",
					 NULL};

_Static_assert(sizeof(ft_affinity_mode_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ft_policy_t) == sizeof(int), "enum size");
_Static_assert(FT_MODE_BEST_EFFORT == 1 && FT_POLICY_DISTRIBUTED == 1,
	       "choice order");

#define FIELD(f) offsetof(ft_config_t, f)
#define STRING(name, f, def, valid, expected, doc)                             \
	{                                                                      \
		name, KEY_STRING, FIELD(f), def, NULL, 0, 0, valid, expected,  \
		    doc                                                        \
	}
#define CHOICE(name, type, f, def, choices, doc)                               \
	{                                                                      \
		name, type, FIELD(f), def, choices, 0, 0, NULL, NULL, doc      \
	}
#define NUMBER(name, type, f, def, min, max, doc)                              \
	{                                                                      \
		name, type, FIELD(f), def, NULL, min, max, NULL, NULL, doc     \
	}

const char *const ft_switch_names[] = {"off", "on", NULL};

static const key_spec_t schema[] =
    {
	STRING(
	    "listen", listen, "0.0.0.0:8888", valid_listen, "HOST:PORT",
	    "Address of the extender API that kube-scheduler calls, HOST:PORT (IPv4, name or [IPv6]; port 0 picks a free one)."),
	STRING(
	    "debugListen", debug_listen, "", valid_listen_or_off,
	    "HOST:PORT or \"\"",
	    "Address of the debug API (state dumps, decisions, metrics); \"\" turns it off."),
	STRING(
	    "metricsListen", metrics_listen, "", valid_listen_or_off,
	    "HOST:PORT or \"\"",
	    "Address of a listener that serves only GET /metrics, over HTTPS (tlsCertFile, or a certificate made at start), to a bearer token that the API server authenticates and allows to get the non-resource URL /metrics, as kube-scheduler's secure port does; \"\" turns it off. Needs an API server."),
	STRING(
	    "tlsCertFile", tls_cert_file, "", NULL, NULL,
	    "PEM certificate chain (the server's own first) for HTTPS on listen; set with tlsKeyFile. \"\" serves plain HTTP. Read once at start: a renewed certificate needs a restart."),
	STRING(
	    "tlsKeyFile", tls_key_file, "", NULL, NULL,
	    "PEM private key (unencrypted) of tlsCertFile; both or neither."),
	STRING(
	    "tlsClientCAFile", tls_client_ca_file, "", NULL, NULL,
	    "PEM CA certificates; with it every request on listen must present a client certificate signed by one of them (403 otherwise), except /healthz and /readyz. Needs tlsCertFile. \"\" asks for none."),
	STRING(
	    "annotationPrefix", annotation_prefix, "flextopo.io",
	    valid_subdomain, "a DNS subdomain",
	    "DNS subdomain in front of every annotation the extender reads and writes."),
	STRING(
	    "kubeconfig", kubeconfig, "", NULL, NULL,
	    "Kubeconfig file for the API server; \"\" uses the in-cluster service account."),
	STRING(
	    "snapshot", snapshot, "", NULL, NULL,
	    "`kubectl get nodes,pods -A -o yaml` file to serve from instead of watching the API server; \"\" watches."),
	CHOICE("logLevel", KEY_STRING, log_level, "info", log_levels,
	       "Least severe log level written: debug, info, warn or error."),
	STRING("gpuResource", gpu_resource, "nvidia.com/gpu",
	       valid_resource_name, "a resource name such as nvidia.com/gpu",
	       "Extended resource name of whole GPUs."),
	STRING("migResourcePrefix", mig_resource_prefix, "nvidia.com/mig-",
	       valid_resource_prefix,
	       "a resource name prefix such as nvidia.com/mig-",
	       "Prefix of MIG resource names (nvidia.com/mig-1g.10gb, ...)."),
	CHOICE(
	    "defaultAffinityMode", KEY_ENUM, default_affinity_mode,
	    "guaranteed", ft_affinity_mode_names,
	    "Affinity mode of pods without the mode annotation: guaranteed or best-effort."),
	CHOICE(
	    "policy", KEY_ENUM, policy, "packed", ft_policy_names,
	    "Placement policy: packed fills busy nodes first, distributed spreads; a pod's flextopo.io/allocation-policy annotation overrides it for that pod."),
	NUMBER(
	    "maxRequestBytes", KEY_SIZE, max_request_bytes, "64Mi", 1024,
	    1073741824,
	    "Cap on a request body in bytes, 1Ki to 1Gi; Ki, Mi and Gi suffixes allowed."),
	NUMBER("threads", KEY_UNSIGNED, threads, "0", 0, 256,
	       "HTTP worker threads, at most 256; 0 starts one per core."),
	NUMBER(
	    "maxConnections", KEY_UNSIGNED, max_connections, "1024", 1, 65536,
	    "Connections open at once on listen, 1 to 65536; further clients wait in the listen backlog."),
	NUMBER(
	    "maxConnectionsPerClient", KEY_UNSIGNED, max_connections_per_client,
	    "128", 0, 65536,
	    "Connections open at once from one client address, 0 to 65536; at the cap, a new connection closes the address's connection idle the longest, or itself when none is idle. 0 sets no limit."),
	NUMBER(
	    "connectionTimeoutSeconds", KEY_UNSIGNED, connection_timeout_s,
	    "120", 1, 86400,
	    "Seconds a connection may send nothing, idle or in the middle of a request, before it is closed (1 to 86400)."),
	NUMBER(
	    "apiTimeoutMs", KEY_UNSIGNED, api_timeout_ms, "10000", 1, 3600000,
	    "Timeout of one API server request in milliseconds (1 to 3600000)."),
	NUMBER(
	    "bindSettleSeconds", KEY_UNSIGNED, bind_settle_s, "60", 1, 86400,
	    "Seconds after a Binding whose answer never came (timeout, reset, 5xx) before a read of the pod that still shows it unbound frees its units: kube-apiserver's --request-timeout (60 s by default), after which the API server has given up on the request (1 to 86400)."),
	NUMBER(
	    "watchBackoffInitialMs", KEY_UNSIGNED, watch_backoff_initial_ms,
	    "800", 1, 3600000,
	    "First delay in milliseconds before a failed watch is retried (client-go's 800); it doubles up to watchBackoffMaxMs, which it may not exceed."),
	NUMBER(
	    "watchBackoffMaxMs", KEY_UNSIGNED, watch_backoff_max_ms, "30000", 1,
	    3600000,
	    "Longest delay in milliseconds between watch retries (1 to 3600000)."),
	NUMBER("decisionLogSize", KEY_UNSIGNED, decision_log_size, "1024", 1,
	       1048576,
	       "Scheduling decisions kept for the debug API (1 to 1048576)."),
	NUMBER(
	    "fragmentationWindow", KEY_UNSIGNED, fragmentation_window, "64", 0,
	    4096,
	    "Recent pods whose GPU requests make the workload mix that fragmentation (FGD) is measured against, 0 to 4096; 0 turns the fragmentation part of the nodes' rank in scoring off."),
	CHOICE(
	    "dra", KEY_ENUM, dra, "on",
	    ft_switch_names, "on: watch ResourceSlices and ResourceClaims (resource.k8s.io/v1) and count the GPUs claims hold on nodes whose GPUs the DRA driver publishes; a cluster that does not serve the API group simply has none. off: device-plugin GPUs only."),
	STRING(
	    "draDriver", dra_driver, "gpu.nvidia.com", valid_subdomain,
	    "a DNS subdomain",
	    "The DRA driver whose devices are GPUs and MIG devices of the nodes' topology (NVIDIA's: gpu.nvidia.com)."),
	STRING(
	    "webhookListen", webhook_listen, "", valid_listen_or_off,
	    "HOST:PORT or \"\"",
	    "Address of the mutating admission webhook (POST /mutate, HTTPS with webhookCertFile): on a DRA cluster it adds matchAttribute constraints to the ResourceClaims and ResourceClaimTemplates of guaranteed numa and pcie-switch affinity; \"\" turns it off."),
	STRING(
	    "webhookCertFile", webhook_cert_file, "", NULL, NULL,
	    "PEM certificate chain of webhookListen, for the name the MutatingWebhookConfiguration's service or URL uses; set with webhookKeyFile."),
	STRING("webhookKeyFile", webhook_key_file, "", NULL, NULL,
	       "PEM private key (unencrypted) of webhookCertFile."),
	STRING(
	    "gangLabelKeys", gang_label_keys,
	    "leaderworkerset.sigs.k8s.io/group-key,jobset.sigs.k8s.io/job-key,volcano.sh/job-name",
	    valid_label_keys,
	    "label keys separated by commas, at most 8, or \"\"",
	    "Pod labels, besides the Workload API's spec.schedulingGroup and coscheduling's scheduling.x-k8s.io/pod-group, that name a gang: the pods of one namespace with the same value run all or nothing, and a victim set that evicts one of them costs them all (docs/preemption.md). The defaults are LeaderWorkerSet's group, JobSet's job and Volcano's job; \"\" reads none."),
};

#define SCHEMA_SIZE (sizeof(schema) / sizeof(schema[0]))

/* Validators */

/* RFC 1123 host name label: [A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])? */
static bool valid_label(const char *s, size_t len, bool lower_only)
{
	size_t i;

	if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (i = 0; i < len; i++) {
		char c = s[i];
		bool lower = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!lower && c != '-' &&
		    (lower_only || !(c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

static bool valid_dns_name(const char *s, size_t len, bool lower_only)
{
	size_t start = 0;
	size_t i;

	if (len == 0 || len > 253)
		return false;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!valid_label(s + start, i - start, lower_only))
			return false;
		start = i + 1;
	}
	return true;
}

static bool valid_subdomain(const char *text)
{
	return valid_dns_name(text, strlen(text), true);
}

/* An IPv4 address, a host name or a bracketed IPv6 address. */
static bool valid_host(const char *s, size_t len)
{
	char buf[256];
	unsigned char addr[16];

	if (len == 0 || len >= sizeof(buf))
		return false;
	if (s[0] == '[') {
		if (len < 3 || s[len - 1] != ']')
			return false;
		memcpy(buf, s + 1, len - 2);
		buf[len - 2] = '\0';
		return inet_pton(AF_INET6, buf, addr) == 1;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	/* Digits and dots only: an IPv4 address, never a name. */
	if (strspn(buf, "0123456789.") == len)
		return inet_pton(AF_INET, buf, addr) == 1;
	return valid_dns_name(buf, len, false);
}

static bool valid_port(const char *s)
{
	size_t len = strspn(s, "0123456789");

	return len > 0 && len <= 5 && s[len] == '\0' && atoi(s) <= 65535;
}

static bool valid_listen(const char *text)
{
	const char *colon = strrchr(text, ':');

	return colon && valid_host(text, (size_t)(colon - text)) &&
	       valid_port(colon + 1);
}

static bool valid_listen_or_off(const char *text)
{
	return text[0] == '\0' || valid_listen(text);
}

/* Kubernetes qualified name characters after the first: [-A-Za-z0-9_.] */
static bool valid_name_chars(const char *s)
{
	return strspn(
		   s,
		   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
	       strlen(s);
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* "domain/name" whose name starts with a letter or digit (or is empty). */
static bool valid_prefixed(const char *text, bool whole_name)
{
	const char *slash = strchr(text, '/');
	const char *name = slash ? slash + 1 : NULL;
	size_t len = name ? strlen(name) : 0;

	if (!slash || !valid_dns_name(text, (size_t)(slash - text), true))
		return false;
	if (len == 0 || len > 63 || !is_alnum(name[0]) ||
	    !valid_name_chars(name))
		return false;
	return !whole_name || is_alnum(name[len - 1]);
}

static bool valid_resource_name(const char *text)
{
	return valid_prefixed(text, true);
}

static bool valid_resource_prefix(const char *text)
{
	return valid_prefixed(text, false);
}

/* A label key: an optional "prefix/" and a name of 1-63 characters. */
static bool valid_label_key(const char *text, size_t len)
{
	char key[320];

	if (!len || len >= sizeof(key))
		return false;
	memcpy(key, text, len);
	key[len] = '\0';
	if (strchr(key, '/'))
		return valid_prefixed(key, true);
	return len <= 63 && is_alnum(key[0]) && is_alnum(key[len - 1]) &&
	       valid_name_chars(key);
}

static bool valid_label_keys(const char *text)
{
	unsigned n = 0;

	for (const char *s = text; *s; n++) {
		size_t len = strcspn(s, ",");
		if (!valid_label_key(s, len) || n == FT_CONFIG_GANG_LABEL_KEYS)
			return false;
		s += len + (s[len] == ',');
	}
	return true;
}

/* Messages */

/* Add to the string in `buf`, cutting it short when full. */
__attribute__((format(printf, 3, 4))) static void append(char *buf, size_t size,
							 const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, size - used, fmt, ap);
	va_end(ap);
}

/* "a, b or c" */
static void describe_choices(char *buf, size_t size, const char *const *c)
{
	size_t i;

	for (i = 0; c[i]; i++) {
		if (i > 0)
			append(buf, size, "%s", c[i + 1] ? ", " : " or ");
		append(buf, size, "%s", c[i]);
	}
}

/* What a key accepts, as the end of "expected ...". */
static void describe_expected(char *buf, size_t size, const key_spec_t *spec)
{
	buf[0] = '\0';
	if (spec->choices)
		describe_choices(buf, size, spec->choices);
	else if (spec->type == KEY_UNSIGNED)
		append(buf, size, "an integer from %llu to %llu", spec->min,
		       spec->max);
	else if (spec->type == KEY_SIZE)
		append(
		    buf, size,
		    "a size from %llu to %llu bytes (suffix Ki, Mi or Gi allowed)",
		    spec->min, spec->max);
	else
		append(buf, size, "%s",
		       spec->expected ? spec->expected : "text");
}

/* `where` is "path:line: " or "" and starts every message. */
static int bad_value(const char *where, const key_spec_t *spec, const char *got)
{
	char expected[256];

	describe_expected(expected, sizeof(expected), spec);
	return ft_error_set(FT_EINVAL, "%s%s: expected %s, got %s", where,
			    spec->name, expected, got);
}

/*
 * `text` in double quotes for a one-line message: newlines and tabs
 * escaped, other control characters as '?', long values cut short.
 */
static void quote_text(char *buf, size_t size, const char *text)
{
	size_t n = 0;
	size_t i;

	buf[n++] = '"';
	for (i = 0; text[i] && n + 8 < size; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c == '\n' || c == '\t') {
			buf[n++] = '\\';
			buf[n++] = c == '\n' ? 'n' : 't';
		} else {
			buf[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
		}
	}
	if (text[i]) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n++] = '"';
	buf[n] = '\0';
}

static int bad_text(const char *where, const key_spec_t *spec, const char *text)
{
	char got[128];

	quote_text(got, sizeof(got), text);
	return bad_value(where, spec, got);
}

/* Parsing values */

static char **string_field(ft_config_t *cfg, const key_spec_t *spec)
{
	return (char **)((char *)cfg + spec->offset);
}

static const char *string_value(const ft_config_t *cfg, const key_spec_t *spec)
{
	return *(char *const *)((const char *)cfg + spec->offset);
}

static int find_choice(const char *const *choices, const char *text)
{
	int i;

	for (i = 0; choices[i]; i++) {
		if (!strcmp(choices[i], text))
			return i;
	}
	return -1;
}

/* Decimal digits, then a Ki, Mi or Gi suffix when `with_suffix`. */
static bool parse_number(unsigned long long *out, const char *text,
			 bool with_suffix)
{
	static const struct {
		const char *suffix;
		unsigned long long factor;
	} suffixes[] = {{"", 1},
			{"Ki", 1ULL << 10},
			{"Mi", 1ULL << 20},
			{"Gi", 1ULL << 30}};
	char *end = NULL;
	unsigned long long n;
	size_t i;

	if (text[0] < '0' || text[0] > '9')
		return false;
	errno = 0;
	n = strtoull(text, &end, 10);
	if (errno == ERANGE)
		return false;
	for (i = 0; i < (with_suffix ? 4 : 1); i++) {
		if (strcmp(end, suffixes[i].suffix))
			continue;
		if (n > ULLONG_MAX / suffixes[i].factor)
			return false;
		*out = n * suffixes[i].factor;
		return true;
	}
	return false;
}

static int set_string(ft_config_t *cfg, const key_spec_t *spec,
		      const char *text, const char *where)
{
	char **field = string_field(cfg, spec);
	char *copy = NULL;

	if ((spec->choices && find_choice(spec->choices, text) < 0) ||
	    (spec->valid && !spec->valid(text)))
		return bad_text(where, spec, text);
	if (!(copy = strdup(text)))
		return ft_error_set(FT_ENOMEM, "%s%s: out of memory", where,
				    spec->name);
	free(*field);
	*field = copy;
	return 0;
}

static int set_enum(ft_config_t *cfg, const key_spec_t *spec, const char *text,
		    const char *where)
{
	int choice = find_choice(spec->choices, text);

	if (choice < 0)
		return bad_text(where, spec, text);
	memcpy((char *)cfg + spec->offset, &choice, sizeof(choice));
	return 0;
}

static int set_number(ft_config_t *cfg, const key_spec_t *spec,
		      const char *text, const char *where)
{
	bool is_size = spec->type == KEY_SIZE;
	unsigned long long n = 0;
	size_t size_value;
	unsigned unsigned_value;

	if (!parse_number(&n, text, is_size) || n < spec->min || n > spec->max)
		return bad_text(where, spec, text);
	if (is_size) {
		size_value = (size_t)n;
		memcpy((char *)cfg + spec->offset, &size_value,
		       sizeof(size_value));
	} else {
		unsigned_value = (unsigned)n;
		memcpy((char *)cfg + spec->offset, &unsigned_value,
		       sizeof(unsigned_value));
	}
	return 0;
}

/* Validate `text` for `spec` and store it; the one setter for all sources. */
static int set_value(ft_config_t *cfg, const key_spec_t *spec, const char *text,
		     const char *where)
{
	switch (spec->type) {
	case KEY_STRING:
		return set_string(cfg, spec, text, where);
	case KEY_ENUM:
		return set_enum(cfg, spec, text, where);
	default:
		return set_number(cfg, spec, text, where);
	}
}

static const key_spec_t *find_key(const char *name)
{
	size_t i;

	for (i = 0; i < SCHEMA_SIZE; i++) {
		if (!strcmp(schema[i].name, name))
			return &schema[i];
	}
	return NULL;
}

static int unknown_key(const char *where, const char *name)
{
	char known[768] = "";
	char quoted[80];
	size_t i;

	for (i = 0; i < SCHEMA_SIZE; i++)
		append(known, sizeof(known), "%s%s", i ? ", " : "",
		       schema[i].name);
	quote_text(quoted, sizeof(quoted), name);
	return ft_error_set(FT_EINVAL, "%sunknown key %s (known keys: %s)",
			    where, quoted, known);
}

/*
 * The backoff may only grow. This spans two keys, so it is checked once
 * both are known; `blame_max` says whether the message names the maximum
 * (the key that was set) rather than the initial delay.
 */
static int check_backoff(const ft_config_t *cfg, const char *where,
			 bool blame_max)
{
	unsigned initial = cfg->watch_backoff_initial_ms;
	unsigned max = cfg->watch_backoff_max_ms;

	if (initial <= max)
		return 0;
	if (blame_max)
		return ft_error_set(
		    FT_EINVAL,
		    "%swatchBackoffMaxMs: expected at least watchBackoffInitialMs (%u), got \"%u\"",
		    where, initial, max);
	return ft_error_set(
	    FT_EINVAL,
	    "%swatchBackoffInitialMs: expected at most watchBackoffMaxMs (%u), got \"%u\"",
	    where, max, initial);
}

/* Whole configurations */

void ft_config_dispose(ft_config_t *cfg)
{
	size_t i;

	if (!cfg)
		return;
	for (i = 0; i < SCHEMA_SIZE; i++) {
		if (schema[i].type != KEY_STRING)
			continue;
		free(*string_field(cfg, &schema[i]));
		*string_field(cfg, &schema[i]) = NULL;
	}
}

static int config_copy(ft_config_t *out, const ft_config_t *src)
{
	const char *text = NULL;
	char **field = NULL;
	size_t i;

	/* Strings are NULL first, so a failure half way disposes cleanly. */
	*out = *src;
	for (i = 0; i < SCHEMA_SIZE; i++) {
		if (schema[i].type == KEY_STRING)
			*string_field(out, &schema[i]) = NULL;
	}
	for (i = 0; i < SCHEMA_SIZE; i++) {
		if (schema[i].type != KEY_STRING)
			continue;
		field = string_field(out, &schema[i]);
		text = string_value(src, &schema[i]);
		if (text && !(*field = strdup(text))) {
			ft_config_dispose(out);
			return ft_error_set(FT_ENOMEM, "config: out of memory");
		}
	}
	return 0;
}

int ft_config_init(ft_config_t *out)
{
	ft_config_t cfg;
	int error = 0;
	size_t i;

	memset(&cfg, 0, sizeof(cfg));
	for (i = 0; i < SCHEMA_SIZE; i++) {
		if ((error = set_value(&cfg, &schema[i], schema[i].def,
				       "default: ")) < 0)
			goto cleanup;
	}
	*out = cfg;
	memset(&cfg, 0, sizeof(cfg));

cleanup:
	ft_config_dispose(&cfg);
	return error;
}

int ft_config_set(ft_config_t *cfg, const char *key, const char *value)
{
	const key_spec_t *spec = find_key(key);
	ft_config_t copy;
	int error = 0;

	memset(&copy, 0, sizeof(copy));
	if (!spec)
		return unknown_key("", key);
	if (!value)
		return bad_value("", spec, "no value");
	if ((error = config_copy(&copy, cfg)) < 0)
		return error;
	if ((error = set_value(&copy, spec, value, "")) < 0 ||
	    (error = check_backoff(&copy, "",
				   !strcmp(key, "watchBackoffMaxMs"))) < 0)
		goto cleanup;
	ft_config_dispose(cfg);
	*cfg = copy;
	memset(&copy, 0, sizeof(copy));

cleanup:
	ft_config_dispose(&copy);
	return error;
}

/* Reading a file */

typedef struct loader {
	yaml_parser_t parser;
	const char *name;
	const char *text;
	size_t len;
	ft_config_t *cfg;
	size_t lines[SCHEMA_SIZE]; /* line that set each key; 0 = unset */
} loader_t;

static size_t line_of(const yaml_event_t *ev)
{
	return ev->start_mark.line + 1;
}

__attribute__((format(printf, 3, 4))) static int
fail_at(const loader_t *ld, size_t line, const char *fmt, ...)
{
	char where[320];
	va_list ap;
	int rc;

	snprintf(where, sizeof(where), "%s:%zu", ld->name, line);
	va_start(ap, fmt);
	rc = ft_error_vset_at(FT_EINVAL, where, fmt, ap);
	va_end(ap);
	return rc;
}

/* libyaml's reader reports a byte offset instead of a mark. */
static size_t line_at_offset(const loader_t *ld, size_t offset)
{
	size_t line = 1;
	size_t i;

	for (i = 0; i < offset && i < ld->len; i++)
		line += ld->text[i] == '\n';
	return line;
}

static int parser_error(const loader_t *ld)
{
	const yaml_parser_t *p = &ld->parser;
	const char *problem = p->problem ? p->problem : "syntax error";
	size_t line = p->problem_mark.line + 1;

	if (p->error == YAML_MEMORY_ERROR)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", ld->name);
	if (p->error == YAML_READER_ERROR)
		line = line_at_offset(ld, p->problem_offset);
	if (p->context)
		return fail_at(ld, line, "%s (%s at line %zu)", problem,
			       p->context, p->context_mark.line + 1);
	return fail_at(ld, line, "%s", problem);
}

static int next_event(loader_t *ld, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&ld->parser, ev))
		return parser_error(ld);
	return 0;
}

/* "a sequence", "a mapping", "an alias" for non-scalar events. */
static const char *event_kind(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SEQUENCE_START_EVENT:
		return "a sequence";
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_ALIAS_EVENT:
		return "an alias";
	default:
		return "something else";
	}
}

static bool is_plain_null(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;

	return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!strcmp(s, "") || !strcmp(s, "~") || !strcmp(s, "null") ||
		!strcmp(s, "Null") || !strcmp(s, "NULL"));
}

static int load_value(loader_t *ld, const key_spec_t *spec,
		      const yaml_event_t *ev)
{
	char where[300];
	const char *text = NULL;

	snprintf(where, sizeof(where), "%s:%zu: ", ld->name, line_of(ev));
	if (ev->type != YAML_SCALAR_EVENT)
		return bad_value(where, spec, event_kind(ev));
	text = (const char *)ev->data.scalar.value;
	/* A null string key ("kubeconfig:" or "~") means "". */
	if (spec->type == KEY_STRING && is_plain_null(ev))
		text = "";
	return set_value(ld->cfg, spec, text, where);
}

static int load_key(const key_spec_t **out, loader_t *ld,
		    const yaml_event_t *ev)
{
	char where[300];
	const char *name = NULL;
	size_t index;

	if (ev->type != YAML_SCALAR_EVENT)
		return fail_at(ld, line_of(ev), "expected a key, got %s",
			       event_kind(ev));
	name = (const char *)ev->data.scalar.value;
	if (!(*out = find_key(name))) {
		snprintf(where, sizeof(where), "%s:%zu: ", ld->name,
			 line_of(ev));
		return unknown_key(where, name);
	}
	index = (size_t)(*out - schema);
	if (ld->lines[index])
		return fail_at(ld, line_of(ev),
			       "duplicate key \"%s\" (first set on line %zu)",
			       (*out)->name, ld->lines[index]);
	ld->lines[index] = line_of(ev);
	return 0;
}

/* One "key: value" pair; `key_ev` stays owned by the caller. */
static int load_member(loader_t *ld, const yaml_event_t *key_ev)
{
	yaml_event_t ev = {0};
	const key_spec_t *spec = NULL;
	int error = 0;

	if ((error = load_key(&spec, ld, key_ev)) < 0 ||
	    (error = next_event(ld, &ev)) < 0)
		goto cleanup;
	error = load_value(ld, spec, &ev);

cleanup:
	yaml_event_delete(&ev);
	return error;
}

static int load_mapping(loader_t *ld)
{
	yaml_event_t ev = {0};
	int error = 0;

	while ((error = next_event(ld, &ev)) == 0 &&
	       ev.type != YAML_MAPPING_END_EVENT) {
		if ((error = load_member(ld, &ev)) < 0)
			break;
		yaml_event_delete(&ev);
	}
	yaml_event_delete(&ev);
	return error;
}

/* The root must be a mapping; a null root ("---" alone) sets nothing. */
static int load_root(loader_t *ld)
{
	yaml_event_t ev = {0};
	char quoted[128];
	int error = 0;

	if ((error = next_event(ld, &ev)) < 0)
		goto cleanup;
	if (ev.type == YAML_MAPPING_START_EVENT)
		error = load_mapping(ld);
	else if (ev.type != YAML_SCALAR_EVENT)
		error = fail_at(
		    ld, line_of(&ev),
		    "expected a mapping of keys at the top level, got %s",
		    event_kind(&ev));
	else if (!is_plain_null(&ev)) {
		quote_text(quoted, sizeof(quoted),
			   (const char *)ev.data.scalar.value);
		error = fail_at(
		    ld, line_of(&ev),
		    "expected a mapping of keys at the top level, got %s",
		    quoted);
	}

cleanup:
	yaml_event_delete(&ev);
	return error;
}

/* Reads the next event and checks its type. */
static int expect_event(loader_t *ld, yaml_event_type_t type,
			const char *problem)
{
	yaml_event_t ev = {0};
	int error = 0;

	if ((error = next_event(ld, &ev)) < 0)
		return error;
	if (ev.type != type)
		error = fail_at(ld, line_of(&ev), "%s", problem);
	yaml_event_delete(&ev);
	return error;
}

/* A stream of no document (an empty file) or of exactly one. */
static int load_stream(loader_t *ld)
{
	yaml_event_t ev = {0};
	int error = 0;

	if ((error = expect_event(ld, YAML_STREAM_START_EVENT,
				  "expected a YAML stream")) < 0 ||
	    (error = next_event(ld, &ev)) < 0 ||
	    ev.type == YAML_STREAM_END_EVENT)
		goto cleanup;
	if ((error = load_root(ld)) < 0 ||
	    (error = expect_event(ld, YAML_DOCUMENT_END_EVENT,
				  "expected the end of the document")) < 0)
		goto cleanup;
	error = expect_event(ld, YAML_STREAM_END_EVENT,
			     "expected one YAML document, found another");

cleanup:
	yaml_event_delete(&ev);
	return error;
}

static size_t key_line(const loader_t *ld, const char *name)
{
	return ld->lines[find_key(name) - schema];
}

/* After the whole file: blame the backoff key the file set, if any. */
static int check_loaded_backoff(const loader_t *ld)
{
	size_t initial_line = key_line(ld, "watchBackoffInitialMs");
	size_t max_line = key_line(ld, "watchBackoffMaxMs");
	char where[300];

	if (initial_line || max_line)
		snprintf(where, sizeof(where), "%s:%zu: ", ld->name,
			 initial_line ? initial_line : max_line);
	else
		snprintf(where, sizeof(where), "%s: ", ld->name);
	return check_backoff(ld->cfg, where, !initial_line && max_line);
}

/* "path:line: " of the first of the keys that the file set, else "path: ". */
static void where_keys(char *buf, size_t size, const loader_t *ld,
		       const char *key, const char *other)
{
	size_t line = key_line(ld, key);

	if (!line && other)
		line = key_line(ld, other);
	if (line)
		snprintf(buf, size, "%s:%zu: ", ld->name, line);
	else
		snprintf(buf, size, "%s: ", ld->name);
}

/*
 * After the whole file: TLS needs both the certificate and its key, and
 * client certificates need TLS. The line is that of the key that is set,
 * or, when the file did not set it, of the one the file left empty.
 */
static int check_loaded_tls(const loader_t *ld)
{
	const ft_config_t *cfg = ld->cfg;
	bool cert = cfg->tls_cert_file[0] != '\0';
	bool key = cfg->tls_key_file[0] != '\0';
	const char *set = cert ? "tlsCertFile" : "tlsKeyFile";
	const char *unset = cert ? "tlsKeyFile" : "tlsCertFile";
	char where[300];

	if (cert != key) {
		where_keys(where, sizeof(where), ld, set, unset);
		return ft_error_set(
		    FT_EINVAL, "%s%s: needs %s too (TLS takes both or neither)",
		    where, set, unset);
	}
	if (cfg->webhook_listen[0] &&
	    (!cfg->webhook_cert_file[0] || !cfg->webhook_key_file[0])) {
		where_keys(where, sizeof(where), ld, "webhookListen", NULL);
		return ft_error_set(
		    FT_EINVAL,
		    "%swebhookListen: needs webhookCertFile and webhookKeyFile (kube-apiserver calls webhooks over HTTPS only)",
		    where);
	}
	if (!cert && cfg->tls_client_ca_file[0]) {
		where_keys(where, sizeof(where), ld, "tlsClientCAFile", NULL);
		return ft_error_set(
		    FT_EINVAL,
		    "%stlsClientCAFile: needs tlsCertFile and tlsKeyFile (client certificates are asked for over TLS only)",
		    where);
	}
	return 0;
}

int ft_config_load_string(ft_config_t *cfg, const char *text, size_t len,
			  const char *name)
{
	loader_t ld;
	ft_config_t copy;
	int error = 0;

	memset(&ld, 0, sizeof(ld));
	memset(&copy, 0, sizeof(copy));
	ld.name = name ? name : "<config>";
	ld.text = text ? text : "";
	ld.len = text ? len : 0;
	ld.cfg = &copy;
	if ((error = config_copy(&copy, cfg)) < 0)
		return error;
	if (!yaml_parser_initialize(&ld.parser)) {
		ft_config_dispose(&copy);
		return ft_error_set(FT_ENOMEM, "%s: out of memory", ld.name);
	}
	yaml_parser_set_input_string(&ld.parser, (const unsigned char *)ld.text,
				     ld.len);
	if ((error = load_stream(&ld)) < 0 ||
	    (error = check_loaded_backoff(&ld)) < 0 ||
	    (error = check_loaded_tls(&ld)) < 0)
		goto cleanup;
	ft_config_dispose(cfg);
	*cfg = copy;
	memset(&copy, 0, sizeof(copy));

cleanup:
	yaml_parser_delete(&ld.parser);
	ft_config_dispose(&copy);
	return error;
}

int ft_config_load_file(ft_config_t *cfg, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int error = 0;

	if ((error = ft_file_read(&text, &len, path, (size_t)1 << 20)) < 0)
		goto cleanup;
	error = ft_config_load_string(cfg, text, len, path);

cleanup:
	free(text);
	return error;
}
