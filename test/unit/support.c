/* Shared helpers for the unit tests. */
#include "support.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <flextopo/buf.h>
#include <flextopo/codec.h>
#include <flextopo/cpuset.h>
#include <flextopo/error.h>

struct cJSON *ft_test_json(const char *text)
{
	char *copy = strdup(text);
	cJSON *out;

	if (!copy)
		abort();
	for (char *p = copy; *p; p++)
		if (*p == '\'')
			*p = '"';
	if (!(out = cJSON_Parse(copy))) {
		fprintf(stderr, "bad test JSON: %s\n", copy);
		abort();
	}
	free(copy);
	return out;
}

char *ft_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
			if (len)
				*len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

char *ft_test_read_fixture(const char *relpath, size_t *len)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", FT_FIXTURES_DIR, relpath);
	return ft_test_read_file(path, len);
}

static void must(int rc)
{
	if (rc < 0) {
		fprintf(stderr, "test topology: %s\n", ft_error_last());
		abort();
	}
}

static void add_numa(ft_topology_t *t, unsigned socket, int id, unsigned first,
		     unsigned count, uint64_t mib)
{
	ft_cpuset_t cpus;

	ft_cpuset_clear(&cpus);
	for (unsigned c = first; c < first + count; c++)
		ft_cpuset_add(&cpus, c);
	must(ft_topology_add_numa(t, socket, id, &cpus, mib));
}

static void add_gpu(ft_topology_t *t, unsigned numa, unsigned sw, int index,
		    const char *prefix, const char *model, uint64_t mib)
{
	char uuid[64];

	snprintf(uuid, sizeof(uuid), "%s-%d", prefix, index);
	must(ft_topology_add_gpu(t, numa, sw, index, uuid, model, mib));
}

ft_topology_t *ft_test_topology_4090(const char *prefix)
{
	ft_topology_t *t = NULL;

	must(ft_topology_new(&t));
	must(ft_topology_add_socket(t, 0));
	must(ft_topology_add_socket(t, 1));
	for (int k = 0; k < 8; k++) {
		add_numa(t, (unsigned)(k / 4), k, (unsigned)(8 * k), 8, 65536);
		must(ft_topology_add_switch(t, (unsigned)k, k));
		add_gpu(t, (unsigned)k, (unsigned)k, k, prefix,
			"NVIDIA GeForce RTX 4090", 24564);
	}
	must(ft_topology_finish(t));
	return t;
}

ft_topology_t *ft_test_topology_a100(const char *prefix)
{
	ft_topology_t *t = NULL;

	must(ft_topology_new(&t));
	must(ft_topology_add_socket(t, 0));
	must(ft_topology_add_socket(t, 1));
	add_numa(t, 0, 0, 0, 64, 524288);
	add_numa(t, 1, 1, 64, 64, 524288);
	for (int s = 0; s < 4; s++)
		must(ft_topology_add_switch(t, (unsigned)(s / 2), s));
	for (int g = 0; g < 8; g++)
		add_gpu(t, (unsigned)(g / 4), (unsigned)(g / 2), g, prefix,
			"NVIDIA A100-SXM4-80GB", 81920);
	for (int a = 0; a < 8; a++)
		for (int b = a + 1; b < 8; b++)
			must(ft_topology_add_nvlink(t, a, b, 12));
	must(ft_topology_finish(t));
	return t;
}

ft_topology_t *ft_test_topology_pairs4(const char *prefix)
{
	ft_topology_t *t = NULL;

	must(ft_topology_new(&t));
	must(ft_topology_add_socket(t, 0));
	add_numa(t, 0, 0, 0, 8, 65536);
	add_numa(t, 0, 1, 8, 8, 65536);
	must(ft_topology_add_switch(t, 0, 0));
	must(ft_topology_add_switch(t, 1, 1));
	for (int g = 0; g < 4; g++)
		add_gpu(t, (unsigned)(g / 2), (unsigned)(g / 2), g, prefix,
			"NVIDIA A40", 46068);
	must(ft_topology_add_nvlink(t, 0, 1, 4));
	must(ft_topology_add_nvlink(t, 2, 3, 4));
	must(ft_topology_finish(t));
	return t;
}

void ft_test_pod(ft_pod_t *out, const char *uid, int32_t priority,
		 const char *const *gpus, const char *cpus,
		 uint32_t unknown_gpus)
{
	memset(out, 0, sizeof(*out));
	out->uid = strdup(uid);
	out->ns = strdup("default");
	out->name = strdup(uid);
	out->node = strdup("n");
	out->priority = priority;
	out->demand.level = FT_LEVEL_NODE;
	for (unsigned i = 0; gpus && gpus[i]; i++)
		out->allocation.gpu_uuids[out->allocation.n_gpus++] =
		    strdup(gpus[i]);
	if (cpus)
		must(ft_cpuset_parse(&out->allocation.cpus, cpus));
	out->has_allocation = (gpus && gpus[0]) || cpus;
	out->demand.gpus =
	    out->has_allocation ? out->allocation.n_gpus : unknown_gpus;
	out->demand.exclusive_cpus = ft_cpuset_count(&out->allocation.cpus);
}

ft_node_t *ft_test_node(const char *name, ft_topology_t *t,
			ft_pod_t *const *pods)
{
	const ft_pod_t *list[320];
	ft_node_t *node = NULL;
	unsigned n = 0;

	while (pods && pods[n] && n < 320) {
		list[n] = pods[n];
		n++;
	}
	must(ft_node_build(&node, name, t, t ? NULL : "no topology", NULL, list,
			   NULL, n));
	return node;
}

ft_topology_t *ft_test_topology_mig(void)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	ft_cpuset_parse(&cpus, "0-15");
	must(ft_topology_new(&t));
	must(ft_topology_add_socket(t, 0));
	must(ft_topology_add_numa(t, 0, 0, &cpus, 65536));
	must(ft_topology_add_gpu(t, 0, FT_NONE, 0, "H-0", "H100", 81920));
	must(ft_topology_add_gpu(t, 0, FT_NONE, 1, "H-1", "H100", 81920));
	must(ft_topology_add_gpu(t, 0, FT_NONE, 2, "H-2", "H100", 81920));
	must(ft_topology_add_mig(t, 0, "3g.40gb", 0, 4, "MIG-0a"));
	must(ft_topology_add_mig(t, 0, "3g.40gb", 4, 4, "MIG-0b"));
	must(ft_topology_add_mig(t, 1, "3g.40gb", 0, 4, "MIG-1a"));
	must(ft_topology_add_mig(t, 1, "1g.10gb", 4, 1, "MIG-1b"));
	must(ft_topology_finish(t));
	return t;
}

ft_topology_t *ft_test_topology_fixture(const char *name)
{
	char path[256];
	ft_topology_t *t = NULL;
	size_t len = 0;
	char *json;

	snprintf(path, sizeof(path), "topology/%s", name);
	json = ft_test_read_fixture(path, &len);
	if (!json) {
		fprintf(stderr, "test topology: cannot read %s\n", path);
		abort();
	}
	must(ft_codec_topology_parse(&t, json, len));
	free(json);
	return t;
}

static int is_request(const struct dirent *e)
{
	size_t n = strlen(e->d_name), s = strlen(".request.json");

	return e->d_name[0] != '.' && n > s &&
	       strcmp(e->d_name + n - s, ".request.json") == 0;
}

int ft_test_wire_cases(const char *verb, const char *label,
		       bool (*run)(const char *name, void *payload),
		       void *payload)
{
	char dir[512];
	struct dirent **list = NULL;
	int n, failed = 0;

	snprintf(dir, sizeof(dir), "%s/wire/%s", FT_FIXTURES_DIR, verb);
	if ((n = scandir(dir, &list, is_request, alphasort)) <= 0) {
		printf("    no cases in %s\n", dir);
		free(list);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char name[256];
		size_t len = strlen(list[i]->d_name) - strlen(".request.json");
		bool ok;

		snprintf(name, sizeof(name), "%.*s", (int)len, list[i]->d_name);
		ok = run(name, payload);
		printf("    [%s] %s%s/%s\n", ok ? "  OK  " : " FAIL ", label,
		       verb, name);
		failed += !ok;
		free(list[i]);
	}
	free(list);
	printf("    %d %s%s cases, %d failed\n", n, label, verb, failed);
	return failed;
}

static size_t keep_body(char *data, size_t size, size_t n, void *userdata)
{
	ft_buf_put(userdata, data, size * n);
	return size * n;
}

long ft_test_https(unsigned port, const char *path, const char *token,
		   const char *post, char **body)
{
	CURL *curl = curl_easy_init();
	struct curl_slist *headers = NULL;
	char url[256], auth[256];
	long status = 0;
	ft_buf_t b;

	ft_buf_init(&b, 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		headers = curl_slist_append(headers, auth);
	}
	if (post) {
		headers = curl_slist_append(headers,
					    "Content-Type: application/json");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post);
	}
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	assert_int_equal(curl_easy_perform(curl), CURLE_OK);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	assert_int_equal(ft_buf_detach(body, &b), 0);
	return status;
}

long ft_test_scrape_metrics(unsigned port, const char *token, char **body)
{
	return ft_test_https(port, "/metrics", token, NULL, body);
}

bool ft_test_make_cert(char *dir, size_t size)
{
	char cmd[512];

	if (system("openssl version >/dev/null 2>&1") != 0)
		return false;
	snprintf(dir, size, "/tmp/flextopo-cert-XXXXXX");
	if (!mkdtemp(dir))
		fail_msg("mkdtemp: %s", dir);
	snprintf(
	    cmd, sizeof(cmd),
	    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
	    "-nodes -keyout %s/tls.key -out %s/tls.crt -subj /CN=localhost "
	    "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -days 2 "
	    ">%s/openssl.log 2>&1",
	    dir, dir, dir);
	if (system(cmd) != 0)
		fail_msg(
		    "making a certificate in %s failed (openssl.log there)",
		    dir);
	return true;
}

void ft_test_remove_cert(const char *dir)
{
	static const char *const names[] = {"tls.key", "tls.crt",
					    "openssl.log"};
	char path[256];

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

void ft_test_assert_review_patch(const char *reply, size_t len,
				 const char *patch)
{
	cJSON *root = cJSON_ParseWithLength(reply, len);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
	const cJSON *got = cJSON_GetObjectItemCaseSensitive(resp, "patch");

	if (!cJSON_IsString(got))
		fail_msg("no response.patch in %.*s", (int)len, reply);
	assert_string_equal(got->valuestring, patch);
	cJSON_Delete(root);
}
