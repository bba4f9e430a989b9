/* The MIG catalog: the built-in copy of configs/mig-catalog.yaml and layout
 * checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/mig.h>

#include "support.h"

static ft_mig_catalog_t catalog;

static int setup(void **state)
{
	return ft_codec_mig_catalog_builtin(&catalog);
}

static int teardown(void **state)
{
	ft_mig_catalog_dispose(&catalog);
	return 0;
}

static void test_mig__builtin_catalog(void **state)
{
	const ft_mig_gpu_t *h100 =
	    ft_mig_catalog_find(&catalog, "NVIDIA H100 80GB HBM3");
	const ft_mig_gpu_t *a100 =
	    ft_mig_catalog_find(&catalog, "NVIDIA A100-SXM4-40GB");
	const ft_mig_profile_t *p;

	assert_int_equal(catalog.n_gpus, 4);
	assert_non_null(h100);
	assert_string_equal(h100->name, "H100-80GB");
	assert_true(h100->precisions & FT_PRECISION_FP8);
	assert_non_null(a100);
	assert_false(a100->precisions & FT_PRECISION_FP8);
	p = ft_mig_gpu_profile(h100, "3g.40gb");
	assert_non_null(p);
	assert_int_equal(p->memory_slices, 4);
	assert_int_equal(p->starts, (1u << 0) | (1u << 4));
	assert_int_equal(p->max_instances, 2);
	assert_int_equal(p->memory_mib, 40960);
	p = ft_mig_gpu_profile(ft_mig_catalog_find(&catalog, "NVIDIA H200"),
			       "1g.18gb");
	assert_non_null(p);
	assert_int_equal(p->starts, 0x7f);
	assert_null(ft_mig_catalog_find(&catalog, "NVIDIA GeForce RTX 4090"));
}

/* One H100 with the given instances; FT_OK or the check's error. */
static int check_layout(const char *const *profiles, const unsigned *starts,
			const unsigned *sizes, unsigned n)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;
	char uuid[32];
	int rc;

	ft_cpuset_parse(&cpus, "0-7");
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 1024), 0);
	assert_int_equal(ft_topology_add_gpu(t, 0, FT_NONE, 0, "GPU-0",
					     "NVIDIA H100 80GB HBM3", 81920),
			 0);
	for (unsigned i = 0; i < n; i++) {
		snprintf(uuid, sizeof(uuid), "MIG-%u", i);
		assert_true(ft_topology_add_mig(t, 0, profiles[i], starts[i],
						sizes[i], uuid) >= 0);
	}
	rc = ft_topology_finish(t);
	if (rc == 0)
		rc = ft_mig_catalog_check(&catalog, t);
	ft_topology_unref(t);
	return rc;
}

static void test_mig__valid_layouts(void **state)
{
	const char *const mixed[] = {"4g.40gb", "3g.40gb"};
	const unsigned mixed_starts[] = {0, 4}, mixed_sizes[] = {4, 4};
	const char *const ones[] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
				    "1g.10gb", "1g.10gb", "1g.10gb"};
	const unsigned one_starts[] = {0, 1, 2, 3, 4, 5, 6};
	const unsigned one_sizes[] = {1, 1, 1, 1, 1, 1, 1};

	assert_int_equal(check_layout(mixed, mixed_starts, mixed_sizes, 2), 0);
	assert_int_equal(check_layout(ones, one_starts, one_sizes, 7), 0);
}

static void test_mig__layouts_that_break_the_catalog(void **state)
{
	const char *const three[] = {"3g.40gb"};
	const char *const unknown[] = {"5g.50gb"};
	const char *const me[] = {"1g.10gb+me", "1g.10gb+me"};
	const unsigned at2[] = {2}, size4[] = {4}, at0[] = {0}, size2[] = {2};
	const unsigned me_starts[] = {0, 1}, me_sizes[] = {1, 1};

	assert_int_equal(check_layout(three, at2, size4, 1), FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "GPU 0 (NVIDIA H100 80GB HBM3): MIG 3g.40gb at start 2: not a valid start slot for that profile");
	assert_int_equal(check_layout(three, at0, size2, 1), FT_EINVAL);
	assert_non_null(strstr(ft_error_last(),
			       "has size 2, the profile has 4 memory slices"));
	assert_int_equal(check_layout(unknown, at0, size4, 1), FT_EINVAL);
	assert_non_null(
	    strstr(ft_error_last(), "5g.50gb is not one of H100-80GB's"));
	assert_int_equal(check_layout(me, me_starts, me_sizes, 2), FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "more than 1 MIG 1g.10gb+me"));
}

static void test_mig__examples_pass(void **state)
{
	char *text = ft_test_read_file(
	    FT_SOURCE_DIR "/api/examples/h100-8x-mig.json", NULL);
	ft_topology_t *t = NULL;

	assert_non_null(text);
	assert_int_equal(ft_codec_topology_parse(&t, text, strlen(text)), 0);
	assert_int_equal(ft_mig_catalog_check(&catalog, t), 0);
	ft_topology_unref(t);
	free(text);
}

static void test_mig__precisions(void **state)
{
	assert_int_equal(ft_precision_parse("FP8"), FT_PRECISION_FP8);
	assert_int_equal(ft_precision_parse("bf16"), FT_PRECISION_BF16);
	assert_int_equal(ft_precision_parse("fp3"), 0);
	assert_string_equal(ft_precision_name(FT_PRECISION_FP8), "fp8");
	assert_string_equal(
	    ft_precision_name(FT_PRECISION_FP8 | FT_PRECISION_BF16), "bf16");
	assert_string_equal(ft_precision_name(0), "?");
}

/* Capability facts: the catalog's where it knows the product, else the
 * profile name's memory and no precisions. */
static void test_mig__apply_records_capabilities(void **state)
{
	char *text = ft_test_read_file(
	    FT_SOURCE_DIR "/api/examples/h100-8x-mig.json", NULL);
	ft_topology_t *t = NULL, *r = ft_test_topology_4090("R");

	assert_non_null(text);
	assert_int_equal(ft_codec_topology_parse(&t, text, strlen(text)), 0);
	/* Before: nominal memory from the profile names, no precisions. */
	assert_int_equal(t->mig[0].memory_mib, 40960);
	assert_int_equal(t->mig[2].memory_mib, 10240);
	assert_int_equal(t->gpus[0].precisions, 0);
	ft_mig_catalog_apply(&catalog, t);
	assert_true(t->gpus[0].precisions & FT_PRECISION_FP8);
	assert_true(t->gpus[7].precisions & FT_PRECISION_BF16);
	assert_int_equal(t->mig[0].memory_mib, 40960);
	assert_int_equal(t->mig[9].memory_mib, 40960); /* 4g.40gb */
	ft_mig_catalog_apply(&catalog, r);
	assert_int_equal(r->gpus[0].precisions, 0);
	ft_mig_catalog_apply(NULL, r);
	assert_int_equal(r->gpus[0].precisions, 0);
	ft_topology_unref(t);
	ft_topology_unref(r);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mig__builtin_catalog),
	    cmocka_unit_test(test_mig__valid_layouts),
	    cmocka_unit_test(test_mig__layouts_that_break_the_catalog),
	    cmocka_unit_test(test_mig__examples_pass),
	    cmocka_unit_test(test_mig__precisions),
	    cmocka_unit_test(test_mig__apply_records_capabilities),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
