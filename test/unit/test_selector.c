/* Label selectors and PodDisruptionBudget decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/selector.h>

static ft_pdb_t decode(const char *json, int want_rc)
{
	cJSON *obj = cJSON_Parse(json);
	ft_pdb_t pdb;

	assert_non_null(obj);
	assert_int_equal(ft_codec_pdb_decode(&pdb, obj), want_rc);
	cJSON_Delete(obj);
	return pdb;
}

static void test_selector__match_labels_and_expressions(void **state)
{
	char *web[] = {"app=web", "tier=front"};
	char *db[] = {"app=db"};
	ft_pdb_t pdb = decode(
	    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"front\",\"edge\"]},{\"key\":\"legacy\",\"operator\":\"DoesNotExist\"}]}},\"status\":{\"disruptionsAllowed\":2,\"disruptedPods\":{\"web-0\":\"2026-11-21T00:00:00Z\"}}}",
	    0);

	assert_string_equal(pdb.ns, "ns");
	assert_int_equal(pdb.disruptions_allowed, 2);
	assert_int_equal(pdb.n_disrupted, 1);
	assert_string_equal(pdb.disrupted[0], "web-0");
	assert_true(ft_selector_matches(&pdb.selector, web, 2));
	assert_false(ft_selector_matches(&pdb.selector, web, 1));
	assert_false(ft_selector_matches(&pdb.selector, db, 1));
	ft_pdb_dispose(&pdb);
}

static void test_selector__null_matches_nothing_empty_everything(void **state)
{
	char *any[] = {"x=y"};
	ft_pdb_t none =
	    decode("{\"metadata\":{\"name\":\"p\"},\"spec\":{}}", 0);
	ft_pdb_t all = decode(
	    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"selector\":{}}}", 0);

	assert_string_equal(none.ns, "default");
	assert_false(ft_selector_matches(&none.selector, any, 1));
	assert_true(ft_selector_matches(&all.selector, any, 1));
	assert_true(ft_selector_matches(&all.selector, NULL, 0));
	ft_pdb_dispose(&none);
	ft_pdb_dispose(&all);
}

static void test_selector__not_in_and_exists(void **state)
{
	char *a[] = {"zone=a"}, *b[] = {"zone=b"};
	ft_pdb_t pdb = decode(
	    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"a\"]},{\"key\":\"zone\",\"operator\":\"Exists\"}]}}}",
	    0);

	assert_false(ft_selector_matches(&pdb.selector, a, 1));
	assert_true(ft_selector_matches(&pdb.selector, b, 1));
	assert_false(ft_selector_matches(&pdb.selector, NULL, 0));
	ft_pdb_dispose(&pdb);
}

static void test_selector__bad_input(void **state)
{
	ft_pdb_t pdb;

	pdb = decode(
	    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"k\",\"operator\":\"Near\"}]}}}",
	    FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "operator \"Near\""));
	pdb = decode("{\"spec\":{}}", FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "metadata.name"));
	(void)pdb;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_selector__match_labels_and_expressions),
	    cmocka_unit_test(
		test_selector__null_matches_nothing_empty_everything),
	    cmocka_unit_test(test_selector__not_in_and_exists),
	    cmocka_unit_test(test_selector__bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
