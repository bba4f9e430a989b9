/*
 * Node affinity and taints (noderules.h), read from v1 Pod specs and Node
 * objects as the watch gets them, against kube-scheduler's NodeAffinity and
 * TaintToleration filters: which nodes a pod's rules admit.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/noderules.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support.h"

static ft_node_rules_t rules_of(const char *spec)
{
	cJSON *s = ft_test_json(spec);
	ft_node_rules_t r;

	ft_codec_node_rules_decode(&r, s);
	cJSON_Delete(s);
	return r;
}

/* A node with `labels` (a JSON object's members) and `taints` (a JSON
 * array's members). */
static ft_node_labels_t *node_of(const char *labels, const char *taints)
{
	char text[1024];
	ft_node_labels_t *l = NULL;
	cJSON *node;

	snprintf(
	    text, sizeof(text),
	    "{'metadata':{'name':'n','labels':{%s}},'spec':{'taints':[%s]}}",
	    labels, taints);
	node = ft_test_json(text);
	if (ft_codec_node_labels_decode(&l, node) < 0)
		fail_msg("labels: %s", ft_error_last());
	cJSON_Delete(node);
	return l;
}

static bool admits(const char *spec, const char *labels, const char *taints)
{
	ft_node_rules_t r = rules_of(spec);
	ft_node_labels_t *l = node_of(labels, taints);
	bool ok = ft_node_rules_admit(&r, l);

	ft_node_labels_unref(l);
	return ok;
}

#define TERMS(t)                                                               \
	"'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuring"   \
	"Execution':{'nodeSelectorTerms':[" t "]}}}"
#define REQ(key, op, values)                                                   \
	"{'key':'" key "','operator':'" op "','values':[" values "]}"
#define EXPR(reqs) "{'matchExpressions':[" reqs "]}"

static void test_noderules__no_rules_admit_untainted_nodes(void **state)
{
	ft_node_rules_t r = rules_of("{}");

	(void)state;
	assert_int_equal(r.n_reqs, 0);
	assert_true(admits("{}", "'pool':'a'", ""));
	assert_true(admits("{}", "", ""));
	/* PreferNoSchedule does not filter. */
	assert_true(
	    admits("{}", "", "{'key':'spot','effect':'PreferNoSchedule'}"));
	assert_false(admits("{}", "", "{'key':'spot','effect':'NoSchedule'}"));
	assert_false(
	    admits("{}", "",
		   "{'key':'dedicated','value':'llm','effect':'NoExecute'}"));
	/* Labels unknown: every rule holds. */
	assert_true(ft_node_rules_admit(&r, NULL));
}

static void test_noderules__node_selector(void **state)
{
	const char *spec = "{'nodeSelector':{'pool':'a','zone':'z1'}}";
	ft_node_rules_t r = rules_of(spec);

	(void)state;
	assert_int_equal(r.n_reqs, 2);
	assert_true(admits(spec, "'pool':'a','zone':'z1','x':'y'", ""));
	assert_false(admits(spec, "'pool':'a','zone':'z2'", ""));
	assert_false(admits(spec, "'pool':'a'", ""));
	/* A value is matched with its key, never alone. */
	assert_false(admits(spec, "'other':'a','zone':'z1'", ""));
}

static void test_noderules__terms_ored_requirements_anded(void **state)
{
	const char *spec = "{" TERMS(EXPR(REQ("zone", "In", "'a','b'") "," REQ(
	    "gpu", "NotIn",
	    "'T4'")) "," EXPR("{'key':'pool','operator':'Exists'}")) "}";

	(void)state;
	assert_true(admits(spec, "'zone':'a','gpu':'A100'", ""));
	assert_true(admits(spec, "'zone':'b'", "")); /* NotIn: no label */
	assert_false(admits(spec, "'zone':'a','gpu':'T4'", ""));
	assert_false(admits(spec, "'zone':'c'", ""));
	assert_true(admits(spec, "'zone':'c','pool':''", "")); /* 2nd term */
	assert_false(admits(spec, "", ""));
}

static void test_noderules__does_not_exist_and_selector_with_terms(void **state)
{
	const char *spec = "{'nodeSelector':{'pool':'a'}," TERMS(
	    EXPR("{'key':'spot','operator':'DoesNotExist'}")) "}";

	(void)state;
	assert_true(admits(spec, "'pool':'a'", ""));
	assert_false(admits(spec, "'pool':'a','spot':'true'", ""));
	assert_false(admits(spec, "'pool':'b'", ""));
}

/*
 * The GPU model label is a label like any other: its values are matched
 * exactly, as kube-scheduler matches them, however they spell the model.
 * Site codes (the openb trace's V100M16) match site codes; GPU feature
 * discovery's spelling (NVML's name with dashes, and its MIG-strategy
 * suffix) matches only itself: not NVML's name with its space, nor the
 * name without the suffix. This is what decides where a class of the
 * workload mix may run (frag.h), not the topology's model name.
 */
static void test_noderules__gpu_model_label_matched_exactly(void **state)
{
	const char *codes = "{" TERMS(EXPR(
	    REQ("nvidia.com/gpu.product", "In", "'V100M16','V100M32'"))) "}";
	const char *gfd =
	    "{'nodeSelector':{'nvidia.com/gpu.product':'Tesla-V100-SXM2-16GB'}}";
	const char *nvml =
	    "{'nodeSelector':{'nvidia.com/gpu.product':'Tesla V100-SXM2-16GB'}}";
	const char *mig =
	    "{" TERMS(EXPR(REQ("nvidia.com/gpu.product", "In",
			       "'NVIDIA-A100-SXM4-40GB-MIG-1g.5gb'"))) "}";

	(void)state;
	assert_int_equal(rules_of(codes).n_reqs, 1);
	assert_true(admits(codes, "'nvidia.com/gpu.product':'V100M16'", ""));
	assert_true(admits(codes, "'nvidia.com/gpu.product':'V100M32'", ""));
	assert_false(admits(codes, "'nvidia.com/gpu.product':'T4'", ""));
	assert_false(admits(
	    codes, "'nvidia.com/gpu.product':'Tesla-V100-SXM2-16GB'", ""));
	assert_true(
	    admits(gfd, "'nvidia.com/gpu.product':'Tesla-V100-SXM2-16GB'", ""));
	assert_false(admits(gfd, "'nvidia.com/gpu.product':'V100M16'", ""));
	assert_false(admits(
	    nvml, "'nvidia.com/gpu.product':'Tesla-V100-SXM2-16GB'", ""));
	assert_true(admits(
	    mig, "'nvidia.com/gpu.product':'NVIDIA-A100-SXM4-40GB-MIG-1g.5gb'",
	    ""));
	assert_false(admits(
	    mig, "'nvidia.com/gpu.product':'NVIDIA-A100-SXM4-40GB'", ""));
}

/* What is not read, or does not fit, widens the rules. */
static void test_noderules__widened_never_narrowed(void **state)
{
	ft_node_rules_t r;

	(void)state;
	/* Gt and matchFields are not read: a term of them holds every node,
	 * so the affinity does. */
	r = rules_of("{" TERMS(EXPR(REQ(
	    "zone", "In",
	    "'a'")) ",{'matchExpressions':[{'key':'cores','operator':'Gt','values':['8']}]}") "}");
	assert_int_equal(r.n_terms, 0);
	assert_int_equal(r.n_reqs, 0);
	r = rules_of("{" TERMS(
	    "{'matchFields':[{'key':'metadata.name','operator':'In','values':['n1']}]}") "}");
	assert_int_equal(r.n_reqs, 0);
	/* Inside a term, the requirement alone is left out. */
	assert_true(admits(
	    "{" TERMS(EXPR(REQ(
		"zone", "In",
		"'a'") ",{'key':'cores','operator':'Lt','values':['8']}")) "}",
	    "'zone':'a'", ""));
	/* An empty term matches no node: it is skipped, the others hold. */
	r = rules_of("{" TERMS("{}," EXPR(REQ("zone", "In", "'a'"))) "}");
	assert_int_equal(r.n_terms, 1);
	assert_false(admits("{" TERMS("{}," EXPR(REQ("zone", "In", "'a'"))) "}",
			    "'zone':'b'", ""));
	/* Nine selector entries: the ninth does not fit and is left out. */
	assert_true(admits(
	    "{'nodeSelector':{'a':'1','b':'1','c':'1','d':'1','e':'1','f':'1','g':'1','h':'1','i':'1'}}",
	    "'a':'1','b':'1','c':'1','d':'1','e':'1','f':'1','g':'1','h':'1'",
	    ""));
	/* More values than the rules hold: the requirement is left out. */
	r = rules_of("{" TERMS(EXPR(REQ(
	    "zone", "In",
	    "'1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16','17'"))) "}");
	assert_int_equal(r.n_reqs, 0);
	/* Values that are not strings: left out. */
	r = rules_of("{" TERMS(EXPR(REQ("zone", "In", "1"))) "}");
	assert_int_equal(r.n_reqs, 0);
	/* Shapes the API server rejects read as no rules. */
	r = rules_of(
	    "{'nodeSelector':[1],'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':{'x':1}}}},'tolerations':7}");
	assert_int_equal(r.n_reqs + r.n_terms + r.n_tolerations, 0);
}

static void test_noderules__tolerations(void **state)
{
	const char *equal =
	    "{'tolerations':[{'key':'dedicated','operator':'Equal','value':'llm','effect':'NoSchedule'}]}";
	const char *exists =
	    "{'tolerations':[{'key':'dedicated','operator':'Exists'}]}";
	const char *all = "{'tolerations':[{'operator':'Exists'}]}";
	const char *execute_only =
	    "{'tolerations':[{'operator':'Exists','effect':'NoExecute'}]}";
	const char *llm =
	    "{'key':'dedicated','value':'llm','effect':'NoSchedule'}";
	const char *batch =
	    "{'key':'dedicated','value':'batch','effect':'NoExecute'}";

	(void)state;
	assert_true(admits(equal, "", llm));
	assert_false(admits(equal, "", batch));
	assert_true(admits(exists, "", llm));
	assert_true(admits(exists, "", batch)); /* empty effect: both */
	assert_false(
	    admits(exists, "", "{'key':'spot','effect':'NoSchedule'}"));
	assert_true(admits(all, "", batch));
	assert_true(rules_of(all).tolerates_all);
	assert_true(admits(execute_only, "", batch));
	assert_false(admits(execute_only, "", llm));
	/* Every taint needs a toleration. */
	assert_false(admits(
	    equal, "",
	    "{'key':'dedicated','value':'llm','effect':'NoSchedule'},{'key':'spot','effect':'NoSchedule'}"));
	/* A PreferNoSchedule toleration tolerates no filtering taint. */
	assert_int_equal(
	    rules_of(
		"{'tolerations':[{'key':'x','operator':'Exists','effect':'PreferNoSchedule'}]}")
		.n_tolerations,
	    0);
	/* More tolerations than the rules hold tolerate everything. */
	assert_true(
	    rules_of(
		"{'tolerations':[{'key':'a','operator':'Exists'},{'key':'b','operator':'Exists'},{'key':'c','operator':'Exists'},{'key':'d','operator':'Exists'},{'key':'e','operator':'Exists'},{'key':'f','operator':'Exists'},{'key':'g','operator':'Exists'}]}")
		.tolerates_all);
}

static void test_noderules__node_labels_decode(void **state)
{
	ft_node_labels_t *l;
	cJSON *node = ft_test_json(
	    "{'metadata':{'labels':{'a':'1','b':2}},'spec':{'taints':[{'value':'no-key','effect':'NoSchedule'},{'key':'k','effect':'PreferNoSchedule'},{'key':'k','effect':'NoExecute'}]}}");

	(void)state;
	assert_int_equal(ft_codec_node_labels_decode(&l, node), 0);
	assert_int_equal(l->n_hashes, 2); /* the key and the pair of 'a' */
	assert_int_equal(l->n_taints, 1);
	assert_int_equal(l->taints[0].effect, FT_TAINT_NO_EXECUTE);
	ft_node_labels_unref(l);
	cJSON_Delete(node);
	/* No labels, no taints: an empty set, not an unknown one. */
	node = ft_test_json("{'metadata':{'name':'n'}}");
	assert_int_equal(ft_codec_node_labels_decode(&l, node), 0);
	assert_non_null(l);
	assert_int_equal(l->n_hashes + l->n_taints, 0);
	ft_node_labels_unref(l);
	cJSON_Delete(node);
}

static void test_noderules__equal(void **state)
{
	ft_node_rules_t
	    a = rules_of("{'nodeSelector':{'pool':'a'}}"),
	    b = rules_of("{'nodeSelector':{'pool':'a'}}"),
	    c = rules_of("{'nodeSelector':{'pool':'b'}}"),
	    d = rules_of(
		"{'nodeSelector':{'pool':'a'},'tolerations':[{'key':'x','operator':'Exists'}]}");

	(void)state;
	assert_true(ft_node_rules_equal(&a, &b));
	assert_false(ft_node_rules_equal(&a, &c));
	assert_false(ft_node_rules_equal(&a, &d));
	assert_true(ft_label_hash("a", "b") != ft_label_hash("ab", ""));
	assert_true(ft_label_hash("a", "") != ft_label_key_hash("a"));
	/* The boundary between key and value does not slide: with '=' only
	 * XORed in, "gpu"/"dev" and "gpuY"/"Xv" hashed alike. */
	assert_true(ft_label_hash("gpu", "dev") != ft_label_hash("gpuY", "Xv"));
	assert_true(ft_label_hash("k", "xy") != ft_label_hash("kE", "D"));
	assert_true(admits("{" TERMS(EXPR(REQ("pool", "NotIn", "'dev'"))) "}",
			   "'poolY':'Xv'", ""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_noderules__no_rules_admit_untainted_nodes),
	    cmocka_unit_test(test_noderules__node_selector),
	    cmocka_unit_test(test_noderules__terms_ored_requirements_anded),
	    cmocka_unit_test(
		test_noderules__does_not_exist_and_selector_with_terms),
	    cmocka_unit_test(test_noderules__gpu_model_label_matched_exactly),
	    cmocka_unit_test(test_noderules__widened_never_narrowed),
	    cmocka_unit_test(test_noderules__tolerations),
	    cmocka_unit_test(test_noderules__node_labels_decode),
	    cmocka_unit_test(test_noderules__equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
