/*
 * The device plugin's sharing configuration (sharing.h): every accepted
 * shape of the section decoded field by field, and every fault with its
 * exact message (file, line, field path). What the section does to a
 * discovered node is tested in test_discover.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/error.h>
#include <flextopo/sharing.h>

#include "support.h"

#define SHARING_DIR FT_FIXTURES_DIR "/sharing/"

static void decode(ft_sharing_t *out, const char *yaml)
{
	if (ft_codec_sharing_decode(out, yaml, strlen(yaml), "s.yaml") < 0)
		fail_msg("%s: %s", yaml, ft_error_last());
}

/* `yaml` fails with FT_EINVAL and exactly `message`; nothing is kept. */
static void assert_fails(const char *yaml, const char *message)
{
	ft_sharing_t s;

	assert_int_equal(
	    ft_codec_sharing_decode(&s, yaml, strlen(yaml), "s.yaml"),
	    FT_EINVAL);
	assert_string_equal(ft_error_last(), message);
	assert_null(s.file);
	assert_null(s.resources);
	assert_int_equal(s.n_resources, 0);
}

static void test_sharing__whole_gpus(void **state)
{
	ft_sharing_t s;
	char buf[64];

	decode(&s, "version: v1\n"
		   "flags:\n"
		   "  migStrategy: none\n"
		   "sharing:\n"
		   "  timeSlicing:\n"
		   "    failRequestsGreaterThanOne: true\n"
		   "    resources:\n"
		   "    - name: nvidia.com/gpu\n"
		   "      replicas: 10\n");
	assert_string_equal(s.file, "s.yaml");
	assert_int_equal(s.kind, FT_SHARING_TIME_SLICING);
	assert_string_equal(ft_sharing_kind_name(s.kind), "timeSlicing");
	assert_false(s.rename_by_default);
	assert_int_equal(s.line, 6);
	assert_int_equal(s.n_resources, 1);
	assert_string_equal(s.resources[0].name, "nvidia.com/gpu");
	assert_null(s.resources[0].rename);
	assert_int_equal(s.resources[0].replicas, 10);
	assert_int_equal(s.resources[0].select, FT_SHARING_ALL);
	assert_int_equal(s.resources[0].line, 8);
	assert_int_equal(s.resources[0].devices_line, 0);
	assert_int_equal(s.resources[0].rename_line, 0);
	assert_null(
	    ft_sharing_advertised(&s, &s.resources[0], buf, sizeof(buf)));
	ft_sharing_dispose(&s);
	assert_null(s.file);
	ft_sharing_dispose(&s);
}

static void test_sharing__renames(void **state)
{
	ft_sharing_t s;
	char buf[64];

	decode(&s, "sharing:\n"
		   "  mps:\n"
		   "    renameByDefault: true\n"
		   "    resources:\n"
		   "    - {name: nvidia.com/gpu, replicas: 4}\n"
		   "    - {name: nvidia.com/gpu, replicas: 2, rename: a.b/c}\n"
		   "    - name: nvidia.com/gpu\n"
		   "      rename: nvidia.com/gpu\n"
		   "      replicas: 64\n");
	assert_int_equal(s.kind, FT_SHARING_MPS);
	assert_string_equal(ft_sharing_kind_name(s.kind), "mps");
	assert_true(s.rename_by_default);
	assert_int_equal(s.n_resources, 3);
	assert_string_equal(
	    ft_sharing_advertised(&s, &s.resources[0], buf, sizeof(buf)),
	    "nvidia.com/gpu.shared");
	/* A rename wins over renameByDefault; a rename to the name itself
	 * is no rename. */
	assert_string_equal(
	    ft_sharing_advertised(&s, &s.resources[1], buf, sizeof(buf)),
	    "a.b/c");
	assert_null(
	    ft_sharing_advertised(&s, &s.resources[2], buf, sizeof(buf)));
	assert_int_equal(s.resources[1].rename_line, 6);
	assert_int_equal(s.resources[2].replicas, 64);
	assert_int_equal(s.resources[2].line, 7);
	assert_int_equal(s.resources[2].rename_line, 8);
	ft_sharing_dispose(&s);
}

static void test_sharing__devices(void **state)
{
	static const char yaml[] = "sharing:\n"
				   "  timeSlicing:\n"
				   "    resources:\n"
				   "    - name: nvidia.com/gpu\n"
				   "      replicas: 2\n"
				   "      devices:\n"
				   "      - 0\n"
				   "      - \"12\"\n"
				   "      - GPU-8f1c\n"
				   "      - \"1:3\"\n"
				   "      - MIG-GPU-8f1c/3/0\n"
				   "    - name: nvidia.com/mig-1g.10gb\n"
				   "      replicas: 3\n"
				   "      devices: 2\n"
				   "    - name: nvidia.com/gpu\n"
				   "      replicas: 3\n"
				   "      devices: all\n";
	const ft_sharing_device_t *d;
	ft_sharing_t s;

	decode(&s, yaml);
	assert_int_equal(s.n_resources, 3);
	assert_int_equal(s.resources[0].select, FT_SHARING_LIST);
	assert_int_equal(s.resources[0].devices_line, 7);
	assert_int_equal(s.resources[0].n_devices, 5);
	d = s.resources[0].devices;
	assert_int_equal(d[0].ref, FT_SHARING_GPU_INDEX);
	assert_int_equal(d[0].index, 0);
	assert_string_equal(d[0].text, "0");
	assert_int_equal(d[0].line, 7);
	assert_int_equal(d[1].ref, FT_SHARING_GPU_INDEX);
	assert_int_equal(d[1].index, 12);
	assert_string_equal(d[1].text, "12");
	assert_int_equal(d[2].ref, FT_SHARING_GPU_UUID);
	assert_string_equal(d[2].text, "GPU-8f1c");
	assert_int_equal(d[2].line, 9);
	assert_int_equal(d[3].ref, FT_SHARING_MIG);
	assert_string_equal(d[3].text, "1:3");
	assert_int_equal(d[4].ref, FT_SHARING_MIG);
	assert_int_equal(d[4].line, 11);
	assert_string_equal(s.resources[1].name, "nvidia.com/mig-1g.10gb");
	assert_int_equal(s.resources[1].select, FT_SHARING_COUNT);
	assert_int_equal(s.resources[1].count, 2);
	assert_int_equal(s.resources[1].devices_line, 14);
	assert_int_equal(s.resources[2].select, FT_SHARING_ALL);
	assert_int_equal(s.resources[2].devices_line, 17);
	ft_sharing_dispose(&s);
}

/* No sharing section, an empty one, null sections, JSON text. */
static void test_sharing__nothing_shared(void **state)
{
	static const char *const none[] = {
	    "version: v1\nflags: {migStrategy: mixed}\n",
	    "sharing: {}\n",
	    "sharing:\n",
	    "sharing:\n  timeSlicing: null\n  mps: ~\n",
	    "{\"version\": \"v1\", \"sharing\": {\"other\": 1}}",
	};
	ft_sharing_t s;

	for (size_t i = 0; i < sizeof(none) / sizeof(*none); i++) {
		decode(&s, none[i]);
		assert_int_equal(s.kind, FT_SHARING_NONE);
		assert_int_equal(s.n_resources, 0);
		assert_string_equal(ft_sharing_kind_name(s.kind), "");
		ft_sharing_dispose(&s);
	}
	decode(
	    &s,
	    "{\"sharing\": {\"mps\": {\"resources\": [{\"name\": \"nvidia.com/gpu\", \"replicas\": 5}]}}}");
	assert_int_equal(s.kind, FT_SHARING_MPS);
	assert_int_equal(s.resources[0].replicas, 5);
	ft_sharing_dispose(&s);
}

#define RESOURCE_HEAD                                                          \
	"sharing:\n"                                                           \
	"  timeSlicing:\n"                                                     \
	"    resources:\n"                                                     \
	"    - name: nvidia.com/gpu\n"
#define AT_RESOURCE "sharing.timeSlicing.resources[0]"

static void test_sharing__replicas_errors(void **state)
{
	static const char *const bad[] = {"1",	"101", "\"10\"", "2.5",
					  "-3", "[2]", "true"};
	char yaml[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(yaml, sizeof(yaml),
			 RESOURCE_HEAD "      replicas: %s\n", bad[i]);
		assert_fails(yaml, "s.yaml:5: " AT_RESOURCE
				   ".replicas: must be an integer 2..100");
	}
	assert_fails(RESOURCE_HEAD "      devices: all\n",
		     "s.yaml:4: " AT_RESOURCE ".replicas: missing");
	/* A value copied by an alias has no line of its own. */
	assert_fails("one: &one 1\n" RESOURCE_HEAD "      replicas: *one\n",
		     "s.yaml: " AT_RESOURCE
		     ".replicas: must be an integer 2..100");
}

static void test_sharing__devices_errors(void **state)
{
	static const char *const bad[] = {"some", "0",	    "-1",
					  "2.5",  "{a: 1}", "\"\""};
	static const char *const bad_entry[] = {
	    "gpu0", "-1", "\"GPU-\"", "\"1:\"", "true", "[0]", "9999999999"};
	char yaml[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(yaml, sizeof(yaml),
			 RESOURCE_HEAD "      replicas: 2\n      devices: %s\n",
			 bad[i]);
		assert_fails(
		    yaml,
		    "s.yaml:6: " AT_RESOURCE
		    ".devices: must be \"all\", a count of GPUs (1 or more) or a list of devices");
	}
	assert_fails(RESOURCE_HEAD "      replicas: 2\n      devices: []\n",
		     "s.yaml:6: " AT_RESOURCE
		     ".devices: must name at least one device (or be \"all\")");
	for (size_t i = 0; i < sizeof(bad_entry) / sizeof(*bad_entry); i++) {
		snprintf(yaml, sizeof(yaml),
			 RESOURCE_HEAD "      replicas: 2\n"
				       "      devices:\n"
				       "      - 0\n"
				       "      - %s\n",
			 bad_entry[i]);
		assert_fails(
		    yaml,
		    "s.yaml:8: " AT_RESOURCE
		    ".devices[1]: must be a GPU index, a GPU UUID (GPU-...), a MIG index (GPU:MIG) or a MIG UUID (MIG-...)");
	}
}

static void test_sharing__resource_errors(void **state)
{
	assert_fails("sharing:\n  timeSlicing:\n    renameByDefault: true\n",
		     "s.yaml:3: sharing.timeSlicing.resources: missing");
	assert_fails(
	    "sharing:\n  mps:\n    resources: []\n",
	    "s.yaml:3: sharing.mps.resources: must be a list of one resource or more");
	assert_fails(
	    "sharing:\n  mps:\n    resources: {name: x}\n",
	    "s.yaml:3: sharing.mps.resources: must be a list of one resource or more");
	assert_fails("sharing:\n  mps:\n    resources:\n    - nvidia.com/gpu\n",
		     "s.yaml:4: sharing.mps.resources[0]: must be a mapping");
	assert_fails("sharing:\n  mps:\n    resources:\n    - replicas: 2\n",
		     "s.yaml:4: sharing.mps.resources[0].name: missing");
	assert_fails(
	    "sharing:\n  mps:\n    resources:\n    - replicas: 2\n"
	    "      name: \"\"\n",
	    "s.yaml:5: sharing.mps.resources[0].name: must be a non-empty string");
	assert_fails(
	    RESOURCE_HEAD "      replicas: 2\n"
			  "    - name: example.com/gpu\n"
			  "      replicas: 2\n",
	    "s.yaml:6: sharing.timeSlicing.resources[1].name: \"example.com/gpu\": the device plugin shares nvidia.com/gpu and nvidia.com/mig-<profile> only");
	assert_fails(RESOURCE_HEAD "      replicas: 2\n      rename: 7\n",
		     "s.yaml:6: " AT_RESOURCE
		     ".rename: must be a non-empty string");
}

static void test_sharing__section_errors(void **state)
{
	assert_fails(
	    "sharing:\n"
	    "  timeSlicing:\n"
	    "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"
	    "  mps:\n"
	    "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
	    "s.yaml:2: sharing: timeSlicing and mps exclude each other; give one");
	assert_fails("sharing: [timeSlicing]\n",
		     "s.yaml:1: sharing: must be a mapping");
	assert_fails("sharing:\n  mps: 4\n",
		     "s.yaml:2: sharing.mps: must be a mapping");
	assert_fails(
	    "sharing:\n  timeSlicing:\n    renameByDefault: yes\n",
	    "s.yaml:3: sharing.timeSlicing.renameByDefault: must be true or false");
	assert_fails(
	    "sharing:\n  mps:\n    failRequestsGreaterThanOne: 1\n",
	    "s.yaml:3: sharing.mps.failRequestsGreaterThanOne: must be true or false");
	assert_fails("version: v2\n", "s.yaml:1: version: must be v1");
	assert_fails(
	    "- sharing\n",
	    "s.yaml: expected the device plugin's configuration (a mapping with version: v1)");
	assert_fails(
	    "",
	    "s.yaml: expected the device plugin's configuration (a mapping with version: v1)");
	assert_fails(
	    "sharing:\n  mps: {resources: [\n",
	    "s.yaml:3:1: did not find expected node content (while parsing a flow node at line 3)");
}

static void test_sharing__load(void **state)
{
	ft_sharing_t s;

	assert_int_equal(
	    ft_codec_sharing_load(&s, SHARING_DIR "time-slicing.yaml"), 0);
	assert_non_null(strstr(s.file, "/sharing/time-slicing.yaml"));
	assert_int_equal(s.kind, FT_SHARING_TIME_SLICING);
	ft_sharing_dispose(&s);
	assert_int_equal(ft_codec_sharing_load(&s, SHARING_DIR "no-such.yaml"),
			 FT_EIO);
	assert_non_null(strstr(ft_error_last(), "no-such.yaml: No such file"));
	assert_null(s.file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sharing__whole_gpus),
	    cmocka_unit_test(test_sharing__renames),
	    cmocka_unit_test(test_sharing__devices),
	    cmocka_unit_test(test_sharing__nothing_shared),
	    cmocka_unit_test(test_sharing__replicas_errors),
	    cmocka_unit_test(test_sharing__devices_errors),
	    cmocka_unit_test(test_sharing__resource_errors),
	    cmocka_unit_test(test_sharing__section_errors),
	    cmocka_unit_test(test_sharing__load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
