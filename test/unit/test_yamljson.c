/*
 * Unit tests of the YAML to cJSON conversion: the core-schema typing of
 * every kind of scalar, collections, a kubectl List snapshot, JSON input,
 * anchors and aliases, and each error with its exact message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <flextopo/error.h>
#include <flextopo/yamljson.h>

#include "support.h"

/* Convert `yaml`; the caller deletes the tree. Fails the test on error. */
static cJSON *convert(const char *yaml)
{
	cJSON *json = NULL;
	int rc = ft_yaml_to_json(&json, yaml, strlen(yaml), "t.yaml");

	if (rc != 0)
		fail_msg("%s: %s", yaml, ft_error_last());
	assert_non_null(json);
	return json;
}

/* `yaml` converts to the same tree as the JSON text `expected`. */
static void assert_converts(const char *yaml, const char *expected)
{
	cJSON *json = convert(yaml);
	cJSON *want = cJSON_Parse(expected);
	char *got = NULL;

	assert_non_null(want);
	if (!cJSON_Compare(json, want, 1)) {
		got = cJSON_PrintUnformatted(json);
		fail_msg("%s -> %s, expected %s", yaml, got, expected);
	}
	cJSON_Delete(want);
	cJSON_Delete(json);
}

/* The value of key "v" in the mapping "v: <scalar>". */
static cJSON *scalar(const char *text)
{
	char yaml[256];
	cJSON *json = NULL;
	cJSON *v = NULL;

	snprintf(yaml, sizeof(yaml), "v: %s\n", text);
	json = convert(yaml);
	v = cJSON_DetachItemFromObjectCaseSensitive(json, "v");
	cJSON_Delete(json);
	assert_non_null(v);
	return v;
}

static void assert_null_scalar(const char *text)
{
	cJSON *v = scalar(text);

	if (!cJSON_IsNull(v))
		fail_msg("%s is not null", text);
	cJSON_Delete(v);
}

static void assert_bool_scalar(const char *text, int expected)
{
	cJSON *v = scalar(text);

	if (!cJSON_IsBool(v) || cJSON_IsTrue(v) != expected)
		fail_msg("%s is not %s", text, expected ? "true" : "false");
	cJSON_Delete(v);
}

static void assert_number_scalar(const char *text, double expected)
{
	cJSON *v = scalar(text);

	if (!cJSON_IsNumber(v) || v->valuedouble != expected)
		fail_msg("%s is not the number %.17g", text, expected);
	cJSON_Delete(v);
}

static void assert_string_scalar(const char *text, const char *expected)
{
	cJSON *v = scalar(text);

	if (!cJSON_IsString(v) || strcmp(v->valuestring, expected))
		fail_msg("%s is not the string \"%s\"", text, expected);
	cJSON_Delete(v);
}

/* Converting `yaml` fails with `code` and exactly `message`. */
static void assert_fails(const char *yaml, size_t len, int code,
			 const char *message)
{
	cJSON *json = NULL;
	int rc = ft_yaml_to_json(&json, yaml, len, "t.yaml");

	assert_int_equal(rc, code);
	assert_null(json);
	assert_string_equal(ft_error_last(), message);
}

static void test_yamljson__null_scalars(void **state)
{
	(void)state;
	assert_null_scalar("");
	assert_null_scalar("~");
	assert_null_scalar("null");
	assert_null_scalar("Null");
	assert_null_scalar("NULL");
	assert_string_scalar("nULL", "nULL");
	assert_string_scalar("\"null\"", "null");
	assert_string_scalar("'~'", "~");
}

static void test_yamljson__bool_scalars(void **state)
{
	(void)state;
	assert_bool_scalar("true", 1);
	assert_bool_scalar("True", 1);
	assert_bool_scalar("TRUE", 1);
	assert_bool_scalar("false", 0);
	assert_bool_scalar("False", 0);
	assert_bool_scalar("FALSE", 0);
	/* YAML 1.1 booleans are plain strings in the 1.2 core schema. */
	assert_string_scalar("yes", "yes");
	assert_string_scalar("on", "on");
	assert_string_scalar("tRUE", "tRUE");
	assert_string_scalar("'true'", "true");
}

static void test_yamljson__int_scalars(void **state)
{
	(void)state;
	assert_number_scalar("0", 0);
	assert_number_scalar("42", 42);
	assert_number_scalar("-17", -17);
	assert_number_scalar("+5", 5);
	assert_number_scalar("007", 7);
	assert_number_scalar("0x1F", 31);
	assert_number_scalar("0xff", 255);
	assert_number_scalar("0o17", 15);
	assert_string_scalar("0o8", "0o8");
	assert_string_scalar("0x", "0x");
	assert_string_scalar("0xG", "0xG");
	assert_string_scalar("-0x10", "-0x10");
	assert_string_scalar("1_000", "1_000");
	assert_string_scalar("'123'", "123");
	assert_string_scalar("\"123\"", "123");
}

static void test_yamljson__large_ints_stay_strings(void **state)
{
	(void)state;
	assert_number_scalar("9007199254740992", 9007199254740992.0);
	assert_number_scalar("-9007199254740992", -9007199254740992.0);
	assert_string_scalar("9007199254740993", "9007199254740993");
	assert_string_scalar("-9007199254740993", "-9007199254740993");
	assert_string_scalar("184467440737095516150", "184467440737095516150");
	assert_string_scalar("0x20000000000001", "0x20000000000001");
	assert_number_scalar("0x20000000000000", 9007199254740992.0);
}

static void test_yamljson__float_scalars(void **state)
{
	cJSON *v = NULL;

	(void)state;
	assert_number_scalar("1.5", 1.5);
	assert_number_scalar("-0.25", -0.25);
	assert_number_scalar(".5", 0.5);
	assert_number_scalar("1.", 1.0);
	assert_number_scalar("1e3", 1000);
	assert_number_scalar("6.02E+23", 6.02e23);
	assert_number_scalar("-2.5e-3", -2.5e-3);
	assert_number_scalar(".inf", INFINITY);
	assert_number_scalar("+.Inf", INFINITY);
	assert_number_scalar("-.INF", -INFINITY);
	v = scalar(".nan");
	assert_true(cJSON_IsNumber(v) && isnan(v->valuedouble));
	cJSON_Delete(v);
	v = scalar(".NaN");
	assert_true(cJSON_IsNumber(v) && isnan(v->valuedouble));
	cJSON_Delete(v);
	assert_string_scalar("-.nan", "-.nan");
	assert_string_scalar(".", ".");
	assert_string_scalar("1e", "1e");
	assert_string_scalar("e3", "e3");
	assert_string_scalar("1.2.3", "1.2.3");
	assert_string_scalar("inf", "inf");
	assert_string_scalar("0x1p3", "0x1p3");
}

static void test_yamljson__quantities_stay_strings(void **state)
{
	(void)state;
	assert_string_scalar("100m", "100m");
	assert_string_scalar("16Gi", "16Gi");
	assert_string_scalar("1.5Gi", "1.5Gi");
	assert_string_scalar("500Mi", "500Mi");
	assert_string_scalar("2k", "2k");
	assert_number_scalar("1e3", 1000);
}

static void test_yamljson__quoted_and_block_scalars(void **state)
{
	(void)state;
	assert_converts("a: \"true\"\nb: '1.5'\nc: \"\"\nd: ''\n",
			"{\"a\":\"true\",\"b\":\"1.5\",\"c\":\"\",\"d\":\"\"}");
	assert_converts("a: |\n  42\nb: >\n  one\n  two\nc: |-\n  x\n",
			"{\"a\":\"42\\n\",\"b\":\"one two\\n\",\"c\":\"x\"}");
	assert_converts("a: !!str 42\nb: ! 43\nc: !!str true\n",
			"{\"a\":\"42\",\"b\":\"43\",\"c\":\"true\"}");
	assert_converts("a: \"tab\\there \\u00e9\"\n",
			"{\"a\":\"tab\\there \\u00e9\"}");
	assert_converts("a: http://example.com:8080/x?y=1#z\n",
			"{\"a\":\"http://example.com:8080/x?y=1#z\"}");
}

static void test_yamljson__nested_collections(void **state)
{
	(void)state;
	assert_converts(
	    "a:\n  b:\n    - 1\n    - c: [x, {d: e}]\n  f: {}\n"
	    "g: []\n",
	    "{\"a\":{\"b\":[1,{\"c\":[\"x\",{\"d\":\"e\"}]}],\"f\":{}},\"g\":[]}");
	assert_converts("- - - deep\n  - 2\n- {k: v}\n",
			"[[[\"deep\"],2],{\"k\":\"v\"}]");
	assert_converts("42\n", "42");
	assert_converts("\"just a string\"\n", "\"just a string\"");
}

static void test_yamljson__keys_keep_their_text(void **state)
{
	(void)state;
	/* Keys are strings whatever they look like. */
	assert_converts(
	    "1: a\ntrue: b\nnull: c\n0x10: d\n'q': e\n",
	    "{\"1\":\"a\",\"true\":\"b\",\"null\":\"c\",\"0x10\":\"d\",\"q\":\"e\"}");
}

/* 100 keys, k0..k39 repeating: the last round (k0 = 80, ...) wins. */
static void wide_duplicates(void)
{
	char yaml[2048] = "";
	char line[32];
	cJSON *json = NULL;
	int i;

	for (i = 0; i < 100; i++) {
		snprintf(line, sizeof(line), "k%d: %d\n", i % 40, i);
		strcat(yaml, line);
	}
	json = convert(yaml);
	assert_int_equal(cJSON_GetArraySize(json), 40);
	for (i = 0; i < 40; i++) {
		snprintf(line, sizeof(line), "k%d", i);
		assert_int_equal(cJSON_GetObjectItem(json, line)->valueint,
				 i < 20 ? 80 + i : 40 + i);
	}
	cJSON_Delete(json);
}

static void test_yamljson__duplicate_keys_last_wins(void **state)
{
	(void)state;
	assert_converts("a: 1\nb: 2\na: 3\n", "{\"a\":3,\"b\":2}");
	/* Wide mappings find duplicates through an index. */
	wide_duplicates();
	/* The anchored value outlives its replacement. */
	assert_converts("a: &x [1, {b: 2}]\na: 2\nc: *x\n",
			"{\"a\":2,\"c\":[1,{\"b\":2}]}");
}

static void test_yamljson__empty_input_is_null(void **state)
{
	cJSON *json = NULL;

	(void)state;
	assert_int_equal(ft_yaml_to_json(&json, "", 0, "t.yaml"), 0);
	assert_true(cJSON_IsNull(json));
	cJSON_Delete(json);
	assert_int_equal(ft_yaml_to_json(&json, NULL, 0, "t.yaml"), 0);
	assert_true(cJSON_IsNull(json));
	cJSON_Delete(json);
	assert_converts("# only a comment\n", "null");
	assert_converts("---\n", "null");
}

static void test_yamljson__first_document_only(void **state)
{
	(void)state;
	assert_converts("a: 1\n---\nb: 2\n", "{\"a\":1}");
	assert_converts("--- [1]\n--- [2]\n...\n", "[1]");
	/* Later documents are not even parsed. */
	assert_converts("a: 1\n---\nb: [\n", "{\"a\":1}");
}

static void test_yamljson__json_input(void **state)
{
	const char *json_text =
	    "{\"kind\": \"Pod\", \"n\": [1, -2.5, 3e2, true, false, null],\n \"s\": \"a\\\"b\", \"o\": {\"e\": {}, \"l\": []},\t\"big\": 12345678901234567890}";

	(void)state;
	assert_converts(
	    json_text,
	    "{\"kind\":\"Pod\",\"n\":[1,-2.5,300,true,false,null],\"s\":\"a\\\"b\",\"o\":{\"e\":{},\"l\":[]},\"big\":\"12345678901234567890\"}");
}

static void test_yamljson__anchors_and_aliases(void **state)
{
	(void)state;
	assert_converts(
	    "base: &b {cpu: 1, mem: 2Gi}\nx: *b\ny: [*b, *b]\n",
	    "{\"base\":{\"cpu\":1,\"mem\":\"2Gi\"},\"x\":{\"cpu\":1,\"mem\":\"2Gi\"},\"y\":[{\"cpu\":1,\"mem\":\"2Gi\"},{\"cpu\":1,\"mem\":\"2Gi\"}]}");
	assert_converts("- &s hello\n- *s\n- &n 12\n- *n\n",
			"[\"hello\",\"hello\",12,12]");
	/* A redefined anchor hides the earlier one. */
	assert_converts("- &a 1\n- &a 2\n- *a\n", "[1,2,2]");
	/* An alias of a scalar may be a key; it keeps the scalar's text. */
	assert_converts("- &k 0x10\n- {*k : v}\n", "[16,{\"0x10\":\"v\"}]");
	/* Merge keys are not resolved: "<<" is an ordinary key. */
	assert_converts("a: &a {x: 1}\nb: {<<: *a}\n",
			"{\"a\":{\"x\":1},\"b\":{\"<<\":{\"x\":1}}}");
}

static void test_yamljson__alias_errors(void **state)
{
	(void)state;
	assert_fails("a: *nope\n", 9, FT_EINVAL,
		     "t.yaml:1:4: undefined alias \"nope\"");
	/* An alias inside its own anchored node cannot recurse. */
	assert_fails("a: &x [1, *x]\n", 14, FT_EINVAL,
		     "t.yaml:1:11: undefined alias \"x\"");
	assert_fails(
	    "- &m {a: 1}\n- {*m : 2}\n", 23, FT_EINVAL,
	    "t.yaml:2:4: alias \"m\" of a collection used as a mapping key");
}

static void test_yamljson__alias_bomb(void **state)
{
	const char *bomb =
	    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
	    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
	    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
	    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
	    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	    "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
	    "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
	cJSON *json = NULL;
	int rc = ft_yaml_to_json(&json, bomb, strlen(bomb), "bomb.yaml");

	(void)state;
	assert_int_equal(rc, FT_ETOOBIG);
	assert_null(json);
	assert_non_null(strstr(ft_error_last(), "bomb.yaml:"));
	assert_non_null(
	    strstr(ft_error_last(), "aliases expand to more than 1000000"));
	/* The first levels alone are fine. */
	json = convert("a: &a [lol, lol]\nb: &b [*a, *a]\nc: [*b, *b]\n");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "c")), 2);
	cJSON_Delete(json);
}

static void test_yamljson__deep_nesting(void **state)
{
	char yaml[2100];
	cJSON *json = NULL;

	(void)state;
	memset(yaml, '[', 1000);
	memset(yaml + 1000, ']', 1000);
	yaml[2000] = '\0';
	assert_int_equal(ft_yaml_to_json(&json, yaml, 2000, "t.yaml"),
			 FT_ETOOBIG);
	assert_null(json);
	assert_string_equal(ft_error_last(),
			    "t.yaml:1:513: nesting deeper than 512 levels");
	memset(yaml, '[', 256);
	memset(yaml + 256, ']', 256);
	yaml[512] = '\0';
	assert_int_equal(ft_yaml_to_json(&json, yaml, 512, "t.yaml"), 0);
	cJSON_Delete(json);
}

static void test_yamljson__non_scalar_keys(void **state)
{
	(void)state;
	assert_fails("? [a, b]\n: 1\n", 13, FT_EINVAL,
		     "t.yaml:1:3: mapping keys must be scalars");
	assert_fails("{{a: 1}: 2}", 11, FT_EINVAL,
		     "t.yaml:1:2: mapping keys must be scalars");
}

static void test_yamljson__syntax_errors(void **state)
{
	(void)state;
	assert_fails(
	    "a: 1\nb: [1, 2\nc: 3\n", 18, FT_EINVAL,
	    "t.yaml:3:2: did not find expected ',' or ']' (while parsing a flow sequence at line 2)");
	assert_fails(
	    "a: 1\nb\nc: 2\n", 11, FT_EINVAL,
	    "t.yaml:3:1: could not find expected ':' (while scanning a simple key at line 2)");
	assert_fails(
	    "a: 1\n  b: 2\n", 12, FT_EINVAL,
	    "t.yaml:2:4: mapping values are not allowed in this context");
	assert_fails(
	    "a: \"open\n", 9, FT_EINVAL,
	    "t.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar at line 1)");
	/* Reader errors come as offsets; they get a line and column too. */
	assert_fails("a: 1\nb: \xff\n", 10, FT_EINVAL,
		     "t.yaml:2:4: invalid leading UTF-8 octet");
	assert_fails("a: 1\nb: x\0y\n", 11, FT_EINVAL,
		     "t.yaml:2:5: control characters are not allowed");
}

/*
 * Walk from `v` through member names, or "#N" for item N of an array, up to
 * a NULL; fails the test when a step is missing.
 */
static const cJSON *dig(const cJSON *v, ...)
{
	const char *step = NULL;
	va_list ap;

	va_start(ap, v);
	while (v && (step = va_arg(ap, const char *)))
		v = step[0] == '#' ? cJSON_GetArrayItem(v, atoi(step + 1))
				   : cJSON_GetObjectItemCaseSensitive(v, step);
	va_end(ap);
	if (!v)
		fail_msg("no \"%s\" in the kubectl list", step);
	return v;
}

static const char *dig_string(const cJSON *v, const char *a, const char *b,
			      const char *c)
{
	const cJSON *s = dig(v, a, b, c, NULL);

	assert_true(cJSON_IsString(s));
	return s->valuestring;
}

/* The GPU node: JSON annotations in single quotes, quantities as text. */
static void check_gpu_node(const cJSON *node)
{
	const char *topology_text = NULL;
	cJSON *topology = NULL;

	topology_text =
	    dig_string(node, "metadata", "annotations", "flextopo.io/topology");
	topology = cJSON_Parse(topology_text);
	assert_non_null(topology);
	assert_int_equal(cJSON_GetArraySize(dig(topology, "gpus", NULL)), 2);
	cJSON_Delete(topology);
	assert_string_equal(
	    dig_string(node, "metadata", "resourceVersion", NULL),
	    "184467440737095516");
	assert_string_equal(dig_string(node, "status", "allocatable", "cpu"),
			    "191500m");
	assert_string_equal(dig_string(node, "status", "allocatable", "memory"),
			    "2113245692Ki");
	assert_string_equal(
	    dig_string(node, "status", "allocatable", "nvidia.com/gpu"), "8");
}

/* The CPU node: a literal block scalar and a boolean. */
static void check_cpu_node(const cJSON *node)
{
	assert_string_equal(
	    dig_string(node, "metadata", "annotations", "flextopo.io/notes"),
	    "Spare node, no GPUs.\nKept for CPU-only jobs.\n");
	assert_true(cJSON_IsTrue(dig(node, "spec", "unschedulable", NULL)));
}

/* The running pod: a block scalar holding JSON, plain integers. */
static void check_running_pod(const cJSON *pod)
{
	cJSON *applied = NULL;

	applied = cJSON_Parse(
	    dig_string(pod, "metadata", "annotations",
		       "kubectl.kubernetes.io/last-applied-configuration"));
	assert_non_null(applied);
	assert_string_equal(dig_string(applied, "metadata", "name", NULL),
			    "trainer-0");
	cJSON_Delete(applied);
	assert_int_equal(dig(pod, "spec", "priority", NULL)->valueint, 1000);
	assert_int_equal(
	    dig(pod, "spec", "tolerations", "#1", "tolerationSeconds", NULL)
		->valueint,
	    300);
	assert_string_equal(dig_string(pod, "spec", "nodeName", NULL),
			    "gpu-node-a");
}

/* The pending pod: a folded block scalar, a number quantity, a null. */
static void check_pending_pod(const cJSON *pod)
{
	const cJSON *requests = NULL;
	const cJSON *condition = NULL;

	assert_string_equal(
	    dig_string(pod, "metadata", "annotations", "description"),
	    "Waits for a GPU; folded into one line.\n");
	requests =
	    dig(pod, "spec", "containers", "#0", "resources", "requests", NULL);
	assert_true(
	    cJSON_IsNumber(dig(requests, "nvidia.com/mig-1g.10gb", NULL)));
	assert_string_equal(dig_string(requests, "cpu", NULL, NULL), "500m");
	condition = dig(pod, "status", "conditions", "#0", NULL);
	assert_true(cJSON_IsNull(dig(condition, "lastProbeTime", NULL)));
	assert_string_equal(dig_string(condition, "status", NULL, NULL),
			    "False");
}

static void test_yamljson__kubectl_list(void **state)
{
	cJSON *json = NULL;
	const cJSON *items = NULL;

	(void)state;
	assert_int_equal(ft_yaml_file_to_json(&json, FT_FIXTURES_DIR
					      "/yaml/kubectl-list.yaml"),
			 0);
	assert_string_equal(dig_string(json, "kind", NULL, NULL), "List");
	assert_string_equal(
	    dig_string(json, "metadata", "resourceVersion", NULL), "");
	items = dig(json, "items", NULL);
	assert_int_equal(cJSON_GetArraySize(items), 4);
	check_gpu_node(dig(items, "#0", NULL));
	check_cpu_node(dig(items, "#1", NULL));
	check_running_pod(dig(items, "#2", NULL));
	check_pending_pod(dig(items, "#3", NULL));
	cJSON_Delete(json);
}

static void test_yamljson__file_errors(void **state)
{
	cJSON *json = NULL;
	char path[1024];

	(void)state;
	snprintf(path, sizeof(path), "%s/yaml/does-not-exist.yaml",
		 FT_FIXTURES_DIR);
	assert_int_equal(ft_yaml_file_to_json(&json, path), FT_EIO);
	assert_null(json);
	assert_non_null(strstr(
	    ft_error_last(), "does-not-exist.yaml: No such file or directory"));
	snprintf(path, sizeof(path), "%s/yaml", FT_FIXTURES_DIR);
	assert_int_equal(ft_yaml_file_to_json(&json, path), FT_EIO);
	assert_null(json);
	assert_non_null(strstr(ft_error_last(), "Is a directory"));
	/* Errors in a file are named by its path. */
	snprintf(path, sizeof(path), "%s/yaml/broken.yaml", FT_FIXTURES_DIR);
	assert_int_equal(ft_yaml_file_to_json(&json, path), FT_EINVAL);
	assert_non_null(strstr(
	    ft_error_last(),
	    "/yaml/broken.yaml:5:1: did not find expected ',' or '}' (while parsing a flow mapping at line 4)"));
}

/* The line table: where each node starts; alias copies have none. */
static void test_yamljson__lines(void **state)
{
	static const char yaml[] = "# comment\n"
				   "a: 1\n"
				   "b:\n"
				   "  - x: &name one\n"
				   "    y: [2, 3]\n"
				   "  - *name\n"
				   "c: {d: true}\n";
	ft_yaml_lines_t *lines = NULL;
	cJSON *json = NULL;
	const cJSON *b = NULL;

	(void)state;
	assert_int_equal(
	    ft_yaml_to_json_lines(&json, &lines, yaml, strlen(yaml), "t.yaml"),
	    0);
	b = dig(json, "b", NULL);
	assert_int_equal(ft_yaml_line(lines, json), 2);
	assert_int_equal(ft_yaml_line(lines, dig(json, "a", NULL)), 2);
	assert_int_equal(ft_yaml_line(lines, b), 4);
	assert_int_equal(ft_yaml_line(lines, dig(b, "#0", NULL)), 4);
	assert_int_equal(ft_yaml_line(lines, dig(b, "#0", "x", NULL)), 4);
	assert_int_equal(ft_yaml_line(lines, dig(b, "#0", "y", "#1", NULL)), 5);
	assert_int_equal(ft_yaml_line(lines, dig(b, "#1", NULL)), 0);
	assert_int_equal(ft_yaml_line(lines, dig(json, "c", "d", NULL)), 7);
	assert_int_equal(ft_yaml_line(NULL, json), 0);
	assert_int_equal(ft_yaml_line(lines, NULL), 0);
	ft_yaml_lines_free(lines);
	cJSON_Delete(json);
	/* No table on error. */
	lines = NULL;
	assert_int_equal(
	    ft_yaml_to_json_lines(&json, &lines, "a: [", 4, "t.yaml"),
	    FT_EINVAL);
	assert_null(json);
	assert_null(lines);
	ft_yaml_lines_free(NULL);
}

/*
 * An empty document whose last line has no break: libyaml marks its null
 * on the line after the input (the fuzzer's find); it gets the last line.
 * No document at all: no event, line 0 (unknown).
 */
static void test_yamljson__lines_end_of_input(void **state)
{
	static const struct {
		const char *yaml;
		unsigned line;
	} cases[] = {
	    {"---\n#%f%f??", 2},       {"---\n# c\n", 3}, {"# c", 0},
	    {"---\r\n# c", 2},	       {"a:\n  # c", 1},  {"---\xc2\x85# c", 2},
	    {"---\xe2\x80\xa8# c", 2},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ft_yaml_lines_t *lines = NULL;
		cJSON *json = NULL;
		const cJSON *node = NULL;
		assert_int_equal(
		    ft_yaml_to_json_lines(&json, &lines, cases[i].yaml,
					  strlen(cases[i].yaml), "t.yaml"),
		    0);
		node = cJSON_IsObject(json) ? json->child : json;
		assert_int_equal(ft_yaml_line(lines, node), cases[i].line);
		ft_yaml_lines_free(lines);
		cJSON_Delete(json);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_yamljson__null_scalars),
	    cmocka_unit_test(test_yamljson__lines_end_of_input),
	    cmocka_unit_test(test_yamljson__bool_scalars),
	    cmocka_unit_test(test_yamljson__int_scalars),
	    cmocka_unit_test(test_yamljson__large_ints_stay_strings),
	    cmocka_unit_test(test_yamljson__float_scalars),
	    cmocka_unit_test(test_yamljson__quantities_stay_strings),
	    cmocka_unit_test(test_yamljson__quoted_and_block_scalars),
	    cmocka_unit_test(test_yamljson__nested_collections),
	    cmocka_unit_test(test_yamljson__keys_keep_their_text),
	    cmocka_unit_test(test_yamljson__duplicate_keys_last_wins),
	    cmocka_unit_test(test_yamljson__empty_input_is_null),
	    cmocka_unit_test(test_yamljson__first_document_only),
	    cmocka_unit_test(test_yamljson__json_input),
	    cmocka_unit_test(test_yamljson__anchors_and_aliases),
	    cmocka_unit_test(test_yamljson__alias_errors),
	    cmocka_unit_test(test_yamljson__alias_bomb),
	    cmocka_unit_test(test_yamljson__deep_nesting),
	    cmocka_unit_test(test_yamljson__non_scalar_keys),
	    cmocka_unit_test(test_yamljson__syntax_errors),
	    cmocka_unit_test(test_yamljson__kubectl_list),
	    cmocka_unit_test(test_yamljson__file_errors),
	    cmocka_unit_test(test_yamljson__lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
