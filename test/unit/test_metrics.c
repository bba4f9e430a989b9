/*
 * The metrics text: family names, HELP and TYPE lines before the samples of
 * their family, histogram buckets cumulative and ending in +Inf equal to
 * _count, label escaping, and counts that follow what was recorded. A real
 * Prometheus parser reads the served text too (test/api/
 * test_metrics_format.py, run by scripts/api-check.sh); this checks the
 * format rules that parser is lenient about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/metrics.h>

static const ft_metrics_gauges_t gauges = {
    .version = "0.1.0",
    .commit = "abc\"d\\e\nf",
    .ready = true,
    .nodes = 7,
    .nodes_bad_topology = 2,
    .pods = 11,
    .assumed = 1,
    .generation = 42,
    .cache_age_seconds = 1.5,
    .node_restarts = 3,
    .pod_restarts = 4,
    .pdb_restarts = 5,
    .decisions = 9,
    .decisions_capacity = 1024,
    .decisions_bytes = 6316160,
    .decisions_total = 9,
    .gpu_free_milli = 12375,
    .gpu_fragmentation_milli = 2500,
    .gpus_whole_free = 9,
    .mig_slices_stranded = 3,
    .mix_pods = 40,
    .conns_closed_idle = 6,
    .conns_refused = 2,
};

static char *render(ft_metrics_t *m)
{
	char *text = NULL;

	assert_int_equal(ft_metrics_render(&text, m, &gauges), 0);
	assert_non_null(text);
	return text;
}

/* The value of the sample line that starts with `series` + " ". */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		if (strncmp(line, series, n) == 0 && line[n] == ' ')
			return strtod(line + n + 1, NULL);
		line = end ? end + 1 : NULL;
	}
	fail_msg("no sample %s", series);
	return -1;
}

/* ---- a strict reader of the exposition format ---- */

typedef struct {
	char name[96];
	char type[16];
	bool help, samples;
} family_t;

typedef struct {
	family_t f[64];
	unsigned n;
	char last_series[256]; /* histogram: labels without le */
	double last_bucket;
	bool in_histogram;
} reader_t;

static family_t *family_of(reader_t *r, const char *name)
{
	for (unsigned i = 0; i < r->n; i++)
		if (strcmp(r->f[i].name, name) == 0)
			return &r->f[i];
	return NULL;
}

/* The family a sample belongs to: its name, or less a histogram suffix. */
static family_t *sample_family(reader_t *r, const char *name)
{
	static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
	char base[96];
	family_t *f = family_of(r, name);

	for (unsigned i = 0; !f && i < 3; i++) {
		size_t n = strlen(name), s = strlen(suffixes[i]);
		if (n <= s || strcmp(name + n - s, suffixes[i]) != 0)
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(n - s), name);
		f = family_of(r, base);
		if (f && strcmp(f->type, "histogram") != 0)
			f = NULL;
	}
	return f;
}

static void read_comment(reader_t *r, const char *line)
{
	char kind[8], name[96], rest[256];
	family_t *f;

	assert_int_equal(sscanf(line, "# %7s %95s %255[^\n]", kind, name, rest),
			 3);
	f = family_of(r, name);
	if (!f) {
		assert_true(r->n < 64);
		f = &r->f[r->n++];
		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), "%s", name);
	}
	assert_false(f->samples); /* metadata before samples */
	if (strcmp(kind, "HELP") == 0) {
		assert_false(f->help);
		f->help = true;
		return;
	}
	assert_string_equal(kind, "TYPE");
	assert_true(f->help); /* we write HELP first */
	assert_string_equal(f->type, "");
	assert_true(strcmp(rest, "counter") == 0 ||
		    strcmp(rest, "gauge") == 0 ||
		    strcmp(rest, "histogram") == 0);
	snprintf(f->type, sizeof(f->type), "%.15s", rest);
}

/* Buckets of one series rise and end in +Inf, which _count equals. */
static void read_histogram_line(reader_t *r, const char *name,
				const char *labels, double value)
{
	const char *le = strstr(labels, "le=\"");
	char series[256];

	if (strstr(name, "_bucket")) {
		assert_non_null(le);
		snprintf(series, sizeof(series), "%.*s", (int)(le - labels),
			 labels);
		if (!r->in_histogram || strcmp(series, r->last_series) != 0) {
			snprintf(r->last_series, sizeof(r->last_series), "%s",
				 series);
			r->last_bucket = 0;
		}
		assert_true(value >= r->last_bucket);
		r->last_bucket = value;
		r->in_histogram = strncmp(le, "le=\"+Inf\"", 9) != 0;
		return;
	}
	assert_false(r->in_histogram); /* _sum after the +Inf bucket */
	if (strstr(name, "_count"))
		assert_true(value == r->last_bucket);
}

static void read_sample(reader_t *r, const char *line)
{
	char name[96], labels[256] = "";
	const char *brace = strchr(line, '{'), *space;
	family_t *f;
	double value;
	char *end;

	space = brace ? strstr(line, "} ") + 1 : strchr(line, ' ');
	assert_non_null(space);
	snprintf(name, sizeof(name), "%.*s",
		 (int)((brace ? brace : space) - line), line);
	if (brace)
		snprintf(labels, sizeof(labels), "%.*s",
			 (int)(space - brace - 1), brace + 1);
	value = strtod(space + 1, &end);
	assert_true(*end == '\0' && end != space + 1);
	assert_true(strncmp(name, "flextopo_", 9) == 0);
	f = sample_family(r, name);
	if (!f)
		fail_msg("sample %s has no HELP/TYPE", name);
	assert_string_not_equal(f->type, "");
	f->samples = true;
	if (strcmp(f->type, "counter") == 0)
		assert_true(strlen(name) > 6 &&
			    strcmp(name + strlen(name) - 6, "_total") == 0);
	if (strcmp(f->type, "histogram") == 0)
		read_histogram_line(r, name, labels, value);
}

static void check_format(const char *text)
{
	reader_t r;
	char line[1024];
	const char *p = text;

	memset(&r, 0, sizeof(r));
	assert_true(text[strlen(text) - 1] == '\n');
	while (*p) {
		const char *end = strchr(p, '\n');
		snprintf(line, sizeof(line), "%.*s", (int)(end - p), p);
		assert_true(line[0] != '\0');
		if (line[0] == '#')
			read_comment(&r, line);
		else
			read_sample(&r, line);
		p = end + 1;
	}
	for (unsigned i = 0; i < r.n; i++)
		if (!r.f[i].samples)
			fail_msg("family %s has no samples", r.f[i].name);
}

/* ---- cases ---- */

static void test_metrics__format_of_an_idle_process(void **state)
{
	char *text = render(NULL);

	check_format(text);
	assert_non_null(
	    strstr(text, "# TYPE flextopo_requests_total counter\n"));
	assert_non_null(strstr(
	    text, "# TYPE flextopo_request_duration_seconds histogram\n"));
	assert_non_null(
	    strstr(text, "# TYPE flextopo_cache_age_seconds gauge\n"));
	assert_true(sample(text, "flextopo_nodes_bad_topology") == 2);
	assert_true(sample(text, "flextopo_cache_age_seconds") == 1.5);
	assert_true(
	    sample(text,
		   "flextopo_informer_restarts_total{resource=\"pods\"}") == 4);
	assert_true(sample(text, "flextopo_decision_log_bytes") == 6316160);
	assert_true(sample(text, "flextopo_gpu_capacity_free") == 12.375);
	assert_true(sample(text, "flextopo_gpu_fragmentation") == 2.5);
	assert_true(sample(text, "flextopo_gpus_whole_free") == 9);
	assert_true(sample(text, "flextopo_mig_slices_stranded") == 3);
	assert_true(sample(text, "flextopo_workload_mix_pods") == 40);
	assert_true(sample(text, "flextopo_requests_total{verb=\"bind\"}") ==
		    0);
	free(text);
}

static void test_metrics__labels_are_escaped(void **state)
{
	char *text = render(NULL);

	assert_non_null(strstr(
	    text,
	    "flextopo_build_info{version=\"0.1.0\",commit=\"abc\\\"d\\\\e\\nf\"} 1\n"));
	free(text);
}

/* The per-client cap's closings, by reason, as counters. */
static void test_metrics__connections_closed_at_the_cap(void **state)
{
	char *text = render(NULL);

	(void)state;
	check_format(text);
	assert_non_null(strstr(
	    text, "# TYPE flextopo_http_connections_closed_total counter\n"));
	assert_true(
	    sample(
		text,
		"flextopo_http_connections_closed_total{reason=\"idle_at_cap\"}") ==
	    6);
	assert_true(
	    sample(
		text,
		"flextopo_http_connections_closed_total{reason=\"refused_at_cap\"}") ==
	    2);
	free(text);
}

static void test_metrics__histogram_buckets_are_cumulative(void **state)
{
	static const uint64_t ns[] = {50000,	   100000,	150000,
				      2000000,	   2000000,	70000000,
				      4000000000u, 9000000000u, 1};
	ft_metrics_t *m = NULL;
	char *text;

	assert_int_equal(ft_metrics_new(&m), 0);
	for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		ft_metrics_request(m, FT_VERB_FILTER, ns[i]);
	ft_metrics_request(m, FT_VERB_BIND, 3000);
	text = render(m);
	check_format(text);
	/* A bound is inclusive: 100000 ns is in le="0.0001". */
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_bucket{verb=\"filter\",le=\"0.0001\"}") ==
	    3);
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_bucket{verb=\"filter\",le=\"0.0025\"}") ==
	    6);
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_bucket{verb=\"filter\",le=\"0.1\"}") ==
	    7);
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_bucket{verb=\"filter\",le=\"5\"}") ==
	    8);
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"}") ==
	    9);
	assert_true(
	    sample(
		text,
		"flextopo_request_duration_seconds_count{verb=\"filter\"}") ==
	    9);
	assert_true(sample(text, "flextopo_requests_total{verb=\"filter\"}") ==
		    9);
	assert_true(sample(text, "flextopo_requests_total{verb=\"bind\"}") ==
		    1);
	assert_in_range(
	    (uint64_t)(sample(
			   text,
			   "flextopo_request_duration_seconds_sum{verb=\"filter\"}") *
		       1e6),
	    13074000, 13076000);
	free(text);
	ft_metrics_free(m);
}

static void test_metrics__preemption_and_binds(void **state)
{
	const unsigned nodes[FT_PREEMPT_OUTCOMES] = {2, 1, 3};
	ft_metrics_t *m = NULL;
	char *text;

	assert_int_equal(ft_metrics_new(&m), 0);
	ft_metrics_preempt(m, FT_MODE_BEST_EFFORT, nodes, 5);
	ft_metrics_preempt(m, FT_MODE_GUARANTEED, nodes, 1);
	ft_metrics_bind(m, FT_BIND_BOUND, FT_LEVEL_NVLINK);
	ft_metrics_bind(m, FT_BIND_BOUND, FT_LEVEL_COUNT);
	ft_metrics_bind(m, FT_BIND_FAILED, FT_LEVEL_NUMA);
	ft_metrics_bind(m, FT_BIND_UNKNOWN, FT_LEVEL_NUMA);
	ft_metrics_bind(m, FT_BIND_UNKNOWN, FT_LEVEL_NUMA);
	ft_metrics_bind(NULL, FT_BIND_BOUND, FT_LEVEL_NUMA);
	text = render(m);
	check_format(text);
	assert_true(
	    sample(
		text,
		"flextopo_preemption_nodes_total{mode=\"best-effort\",outcome=\"dropped\"}") ==
	    3);
	assert_true(
	    sample(text,
		   "flextopo_preemption_victims_total{mode=\"best-effort\"}") ==
	    5);
	assert_true(
	    sample(text,
		   "flextopo_preemption_victims_total{mode=\"guaranteed\"}") ==
	    1);
	assert_true(sample(text, "flextopo_binds_total{result=\"bound\"}") ==
		    2);
	assert_true(sample(text, "flextopo_binds_total{result=\"failed\"}") ==
		    1);
	assert_true(sample(text, "flextopo_binds_total{result=\"unknown\"}") ==
		    2);
	assert_true(
	    sample(text,
		   "flextopo_bind_affinity_level_total{level=\"nvlink\"}") ==
	    1);
	assert_true(
	    sample(text,
		   "flextopo_bind_affinity_level_total{level=\"numa\"}") == 0);
	free(text);
	ft_metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics__format_of_an_idle_process),
	    cmocka_unit_test(test_metrics__labels_are_escaped),
	    cmocka_unit_test(test_metrics__histogram_buckets_are_cumulative),
	    cmocka_unit_test(test_metrics__connections_closed_at_the_cap),
	    cmocka_unit_test(test_metrics__preemption_and_binds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
