/*
 * Wire codecs: Kubernetes quantities, v1 Pod and Node objects, the
 * allocation annotation, the extender argument decoders and the reply
 * encoders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/place.h>

#include "support.h"

static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

/* Add annotation `key` = `value` to a pod or node object. */
static void annotate(cJSON *obj, const char *key, const char *value)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");

	if (!ann)
		ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON_AddStringToObject(ann, key, value);
}

/* A pod named p/ns with `spec` (single-quoted JSON). */
static cJSON *pod_object(const char *spec)
{
	cJSON *pod = ft_test_json(
	    "{'metadata':{'name':'p','namespace':'ns','uid':'u-1'}}");

	cJSON_AddItemToObject(pod, "spec", ft_test_json(spec));
	return pod;
}

static void decode_pod(ft_pod_t *out, const cJSON *pod)
{
	if (ft_codec_pod_decode(out, pod, &opts) < 0)
		fail_msg("pod decode: %s", ft_error_last());
}

/* Decode a pod of `spec`; the demand is what the tests look at. */
static void decode_spec(ft_pod_t *out, const char *spec)
{
	cJSON *pod = pod_object(spec);

	decode_pod(out, pod);
	cJSON_Delete(pod);
}

/* ---- quantities ------------------------------------------------------- */

static int64_t milli(const char *text)
{
	int64_t v = -1;

	if (ft_quantity_milli(&v, text) < 0)
		fail_msg("quantity %s: %s", text, ft_error_last());
	return v;
}

static uint64_t mib(const char *text)
{
	uint64_t v = 0;

	if (ft_quantity_mib(&v, text) < 0)
		fail_msg("quantity %s: %s", text, ft_error_last());
	return v;
}

static void test_codec__quantity_milli(void **state)
{
	assert_int_equal(milli("100m"), 100);
	assert_int_equal(milli("1"), 1000);
	assert_int_equal(milli("1.5"), 1500);
	assert_int_equal(milli("0.1"), 100);
	assert_int_equal(milli("0.3"), 300);
	assert_int_equal(milli("2.7"), 2700);
	assert_int_equal(milli("1e3"), 1000000);
	assert_int_equal(milli("1E3"), 1000000);
	assert_int_equal(milli("+2"), 2000);
	assert_int_equal(milli("0"), 0);
	assert_int_equal(milli("1k"), 1000000);
	assert_int_equal(milli("1Ki"), 1024000);
	assert_int_equal(milli("2Gi"), INT64_C(2147483648000));
	/* Below a millicore rounds up, as Quantity.MilliValue() does. */
	assert_int_equal(milli("1u"), 1);
	assert_int_equal(milli("100n"), 1);
}

static void test_codec__quantity_mib(void **state)
{
	assert_int_equal(mib("2Gi"), 2048);
	assert_int_equal(mib("512Mi"), 512);
	assert_int_equal(mib("1.5Gi"), 1536);
	assert_int_equal(mib("0.5Gi"), 512);
	assert_int_equal(mib("1Mi"), 1);
	/* 10^9 bytes are 953.67 MiB: rounded up. */
	assert_int_equal(mib("1G"), 954);
	assert_int_equal(mib("1e3"), 1);
	assert_int_equal(mib("1048576"), 1);
	assert_int_equal(mib("1048577"), 2);
	assert_int_equal(mib("0"), 0);
	assert_int_equal(mib("1Ti"), 1048576);
}

static void test_codec__quantity_bad(void **state)
{
	static const char *const bad[] = {
	    "",	    "abc", "1Qi", "-",	  "+",	  " 1",	 "1 ",	"1.5.2",
	    ".",    "1e",  "Gi",  "1gi",  "1 Gi", "nan", "inf", "--1",
	    "-1Gi", "1mi", "1KI", "1Ki1", "Mi1",  "1,5", "\t1", "1\n"};
	int64_t m;
	uint64_t b;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ft_quantity_milli(&m, bad[i]) != FT_EINVAL)
			fail_msg("milli accepted \"%s\"", bad[i]);
		if (ft_quantity_mib(&b, bad[i]) != FT_EINVAL)
			fail_msg("mib accepted \"%s\"", bad[i]);
	}
	assert_int_equal(ft_quantity_milli(&m, NULL), FT_EINVAL);
	assert_int_equal(ft_quantity_milli(&m, "1E"), FT_EINVAL);
}

/*
 * Kubernetes quantities are decimal: a sign, digits with at most one '.', and
 * then either a suffix or a decimal exponent, not both (apimachinery
 * quantity.go, parseQuantityString). strtold also reads hexadecimal floats and
 * lets an exponent stand before a suffix, so "0x10" became 16 and "1e3m" 1.
 */
static void test_codec__quantity_rejects_non_kubernetes_syntax(void **state)
{
	static const char *const bad[] = {"0x10", "0x1p3", "0X1",
					  "1e3m", "1e3Gi", "2e-1k"};
	int64_t m = 0;
	uint64_t b = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ft_quantity_milli(&m, bad[i]) != FT_EINVAL)
			fail_msg("milli accepted \"%s\" as %lld", bad[i],
				 (long long)m);
		if (ft_quantity_mib(&b, bad[i]) != FT_EINVAL)
			fail_msg("mib accepted \"%s\" as %llu", bad[i],
				 (unsigned long long)b);
	}
}

/*
 * Negative quantities are out of range for both scalings. ft_quantity_milli
 * rejects "-1", but ft_quantity_mib rounded "-1" (bytes) up to -0.0, which
 * passes the `v < 0` check, and returned 0.
 */
static void test_codec__quantity_negative(void **state)
{
	static const char *const neg[] = {"-1",	    "-1Gi",  "-1Mi",
					  "-512Ki", "-100m", "-0.5"};
	int64_t m = 0;
	uint64_t b = 0;

	for (size_t i = 0; i < sizeof(neg) / sizeof(neg[0]); i++) {
		if (ft_quantity_milli(&m, neg[i]) != FT_EINVAL)
			fail_msg("milli accepted \"%s\" as %lld", neg[i],
				 (long long)m);
		if (ft_quantity_mib(&b, neg[i]) != FT_EINVAL)
			fail_msg("mib accepted \"%s\" as %llu", neg[i],
				 (unsigned long long)b);
	}
	/* Zero with a sign is zero. */
	assert_int_equal(milli("-0"), 0);
	assert_int_equal(mib("+0"), 0);
}

/* ---- pods ------------------------------------------------------------- */

static void test_codec__pod_requests_summed(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'500m','memory':'1Gi'}}},{'name':'b','resources':{'requests':{'cpu':'1500m','memory':'512Mi','ephemeral-storage':'1Gi'}}},{'name':'c'}]}");
	assert_string_equal(pod.uid, "u-1");
	assert_string_equal(pod.name, "p");
	assert_string_equal(pod.ns, "ns");
	assert_null(pod.node);
	assert_int_equal(pod.demand.cpu_millis, 2000);
	assert_int_equal(pod.demand.memory_mib, 1536);
	assert_int_equal(pod.demand.gpus, 0);
	/* Burstable: no limits. */
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	assert_false(pod.demand.has_affinity);
	assert_int_equal(pod.demand.level, FT_LEVEL_NODE);
	assert_int_equal(pod.demand.mode, FT_MODE_GUARANTEED);
	assert_null(pod.demand_error);
	assert_false(ft_demand_wants_devices(&pod.demand));
	ft_pod_dispose(&pod);
}

static void test_codec__pod_limits_only(void **state)
{
	ft_pod_t pod;

	/* The API server defaults requests to limits. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'cpu':'2','memory':'4Gi','nvidia.com/gpu':'1'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 2000);
	assert_int_equal(pod.demand.memory_mib, 4096);
	assert_int_equal(pod.demand.gpus, 1);
	assert_int_equal(pod.demand.exclusive_cpus, 2);
	assert_true(ft_demand_wants_devices(&pod.demand));
	ft_pod_dispose(&pod);
}

static void test_codec__pod_init_containers_max(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'initContainers':[{'name':'i1','resources':{'requests':{'cpu':'4','memory':'1Gi'}}},{'name':'i2','resources':{'requests':{'cpu':'1','memory':'8Gi','nvidia.com/gpu':'2'}}}],'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'2Gi','nvidia.com/gpu':'1'}}},{'name':'b','resources':{'requests':{'cpu':'1','memory':'2Gi'}}}]}");
	/* Each resource is the larger of the app sum and the largest init. */
	assert_int_equal(pod.demand.cpu_millis, 4000);
	assert_int_equal(pod.demand.memory_mib, 8192);
	assert_int_equal(pod.demand.gpus, 2);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_sidecars_summed(void **state)
{
	ft_pod_t pod;

	/* A regular init container runs beside the sidecars started before
	 * it; sidecars also run beside the app containers. */
	decode_spec(
	    &pod,
	    "{'initContainers':[{'name':'proxy','restartPolicy':'Always','resources':{'requests':{'cpu':'500m','memory':'256Mi'}}},{'name':'setup','resources':{'requests':{'cpu':'2','memory':'1Gi'}}},{'name':'log','restartPolicy':'Always','resources':{'requests':{'cpu':'250m','memory':'128Mi'}}}],'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'2Gi'}}}]}");
	/* cpu: max(1 + 0.5 + 0.25, 2 + 0.5) = 2.5 */
	assert_int_equal(pod.demand.cpu_millis, 2500);
	/* memory: max(2048 + 256 + 128, 1024 + 256) = 2432 */
	assert_int_equal(pod.demand.memory_mib, 2432);
	ft_pod_dispose(&pod);

	/* A sidecar started after the init container does not add to it. */
	decode_spec(
	    &pod,
	    "{'initContainers':[{'name':'setup','resources':{'requests':{'cpu':'2'}}},{'name':'proxy','restartPolicy':'Always','resources':{'requests':{'cpu':'500m'}}}],'containers':[{'name':'a','resources':{'requests':{'cpu':'1'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 2000);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_overhead(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'overhead':{'cpu':'250m','memory':'128Mi'},'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 1250);
	assert_int_equal(pod.demand.memory_mib, 1152);
	ft_pod_dispose(&pod);
}

/*
 * A request list naming cpu three times, each 4e15 cores (the pod fuzzer's
 * find): the sum stops at the largest value instead of overflowing, and the
 * demand saturates.
 */
static void test_codec__pod_huge_requests_saturate(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'4e15','cpu':'4e15','cpu':'4e15','memory':'8Ei','memory':'8Ei'}}},{'name':'b','resources':{'requests':{'cpu':'4e15','memory':'8Ei'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, UINT32_MAX);
	assert_true(pod.demand.memory_mib >= UINT64_C(8) << 40);
	ft_pod_dispose(&pod);
}

/* The GPU models of a pod's nodeSelector and required node affinity. */
static void products_of(ft_pod_t *pod, const char *spec_extra)
{
	char spec[2048];

	snprintf(
	    spec, sizeof(spec),
	    "{%s'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'1'}}}]}",
	    spec_extra);
	decode_spec(pod, spec);
}

static bool has_product(const ft_pod_t *pod, const char *name)
{
	for (unsigned i = 0; i < pod->demand.n_gpu_products; i++)
		if (pod->demand.gpu_products[i] == ft_gpu_product_hash(name))
			return true;
	return false;
}

#define AFFINITY(TERMS)                                                        \
	"'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnored"         \
	"DuringExecution':{'nodeSelectorTerms':[" TERMS "]}}},"
#define IN(...)                                                                \
	"{'key':'nvidia.com/"                                                  \
	"gpu.product','operator':'In','values':[" __VA_ARGS__ "]}"

/* How many GPU models a pod with `extra` in its spec is held to. */
static unsigned n_products(const char *extra)
{
	ft_pod_t pod;
	unsigned n;

	products_of(&pod, extra);
	n = pod.demand.n_gpu_products;
	ft_pod_dispose(&pod);
	return n;
}

static void test_codec__pod_gpu_products(void **state)
{
	ft_pod_t pod;

	assert_int_equal(n_products(""), 0);
	products_of(
	    &pod,
	    "'nodeSelector':{'nvidia.com/gpu.product':'NVIDIA-A100-SXM4-80GB','zone':'a'},");
	assert_int_equal(pod.demand.n_gpu_products, 1);
	assert_true(has_product(&pod, "NVIDIA A100-SXM4-80GB"));
	ft_pod_dispose(&pod);

	/* Terms are ORed, requirements in a term ANDed. */
	products_of(
	    &pod,
	    AFFINITY("{'matchExpressions':[" IN("'T4','V100'") "," IN(
		"'V100','P100'") "]},{'matchExpressions':[" IN("'A10'") "]}"));
	assert_int_equal(pod.demand.n_gpu_products, 2);
	assert_true(has_product(&pod, "V100"));
	assert_true(has_product(&pod, "A10"));
	ft_pod_dispose(&pod);

	/* nodeSelector and affinity both hold. */
	products_of(&pod,
		    "'nodeSelector':{'nvidia.com/gpu.product':'T4'}," AFFINITY(
			"{'matchExpressions':[" IN("'T4','V100'") "]}"));
	assert_int_equal(pod.demand.n_gpu_products, 1);
	assert_true(has_product(&pod, "T4"));
	ft_pod_dispose(&pod);

	/* A term that leaves the model free, NotIn, more models than flextopo
	 * keeps, or shapes the API server would reject: not counted. */
	assert_int_equal(
	    n_products(AFFINITY("{'matchExpressions':[" IN(
		"'T4'") "]},{'matchExpressions':[{'key':'zone','operator':'In','values':['a']}]}")),
	    0);
	assert_int_equal(
	    n_products(AFFINITY(
		"{'matchExpressions':[{'key':'nvidia.com/gpu.product','operator':'NotIn','values':['T4']}]}")),
	    0);
	assert_int_equal(n_products(AFFINITY("{'matchExpressions':[" IN(
			     "'a','b','c','d','e','f','g','h','i'") "]}")),
			 0);
	assert_int_equal(
	    n_products(
		"'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':{'x':1}}}},'nodeSelector':[1],"),
	    0);
}

static void test_codec__pod_guaranteed_pins_integer_cpus(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'3','memory':'4Gi','nvidia.com/gpu':'1'},'limits':{'cpu':'3','memory':'4Gi','nvidia.com/gpu':'1'}}},{'name':'b','resources':{'requests':{'cpu':'1000m','memory':'1024Mi'},'limits':{'cpu':'1','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 4000);
	assert_int_equal(pod.demand.exclusive_cpus, 4);
	ft_pod_dispose(&pod);

	/* Guaranteed, but a fractional CPU: shared pool, nothing pinned. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1500m','memory':'1Gi'},'limits':{'cpu':'1500m','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 1500);
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_burstable_pins_nothing(void **state)
{
	ft_pod_t pod;

	/* Limit above request. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'2','memory':'1Gi'},'limits':{'cpu':'4','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);

	/* No memory limit. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'2','memory':'1Gi'},'limits':{'cpu':'2'}}}]}");
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);

	/* One Guaranteed container and one without limits. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'2','memory':'1Gi'},'limits':{'cpu':'2','memory':'1Gi'}}},{'name':'b','resources':{'requests':{'cpu':'1','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 3000);
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);

	/* A Burstable init container makes the pod Burstable. */
	decode_spec(
	    &pod,
	    "{'initContainers':[{'name':'i','resources':{'requests':{'cpu':'1'}}}],'containers':[{'name':'a','resources':{'requests':{'cpu':'2','memory':'1Gi'},'limits':{'cpu':'2','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);

	/* No containers at all. */
	decode_spec(&pod, "{}");
	assert_int_equal(pod.demand.cpu_millis, 0);
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);
}

/*
 * Pod overhead is charged to the pod (NodeResourcesFit) but the kubelet's
 * static CPU manager pins only the containers' integer CPUs
 * (policy_static.go, guaranteedCPUs: the container's request). A Guaranteed
 * pod with 2 CPUs and a RuntimeClass overhead of 250m still gets 2 pinned
 * CPUs.
 */
static void test_codec__pod_overhead_not_pinned(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'overhead':{'cpu':'250m','memory':'64Mi'},'containers':[{'name':'a','resources':{'requests':{'cpu':'2','memory':'1Gi'},'limits':{'cpu':'2','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 2250);
	assert_int_equal(pod.demand.exclusive_cpus, 2);
	ft_pod_dispose(&pod);
}

/*
 * The static CPU manager decides per container: in a Guaranteed pod only
 * containers with an integer CPU request get exclusive CPUs. 1500m + 500m
 * pins nothing; 1 + 500m pins 1.
 */
static void test_codec__pod_exclusive_cpus_per_container(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1500m','memory':'1Gi'},'limits':{'cpu':'1500m','memory':'1Gi'}}},{'name':'b','resources':{'requests':{'cpu':'500m','memory':'1Gi'},'limits':{'cpu':'500m','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 2000);
	assert_int_equal(pod.demand.exclusive_cpus, 0);
	ft_pod_dispose(&pod);

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'1Gi'},'limits':{'cpu':'1','memory':'1Gi'}}},{'name':'b','resources':{'requests':{'cpu':'500m','memory':'1Gi'},'limits':{'cpu':'500m','memory':'1Gi'}}}]}");
	assert_int_equal(pod.demand.cpu_millis, 1500);
	assert_int_equal(pod.demand.exclusive_cpus, 1);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_gpus_and_mig(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'}}},{'name':'b','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}");
	assert_int_equal(pod.demand.gpus, 3);
	assert_int_equal(pod.demand.mig_count, 0);
	assert_string_equal(pod.demand.mig_profile, "");
	ft_pod_dispose(&pod);

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/mig-3g.40gb':'1'}}},{'name':'b','resources':{'limits':{'nvidia.com/mig-3g.40gb':'1'}}}]}");
	assert_int_equal(pod.demand.gpus, 0);
	assert_int_equal(pod.demand.mig_count, 2);
	assert_string_equal(pod.demand.mig_profile, "3g.40gb");
	assert_null(pod.demand_error);
	assert_true(ft_demand_wants_devices(&pod.demand));
	ft_pod_dispose(&pod);
}

static void test_codec__pod_demand_errors(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/mig-3g.40gb':'1','nvidia.com/mig-1g.10gb':'1'}}}]}");
	assert_non_null(pod.demand_error);
	assert_non_null(strstr(pod.demand_error, "MIG profiles"));
	assert_non_null(strstr(pod.demand_error, "one profile per pod"));
	ft_pod_dispose(&pod);

	/* The MIG prefix alone names no profile (found by fuzz_pod). */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/mig-':'1'}}}]}");
	assert_non_null(pod.demand_error);
	assert_non_null(strstr(pod.demand_error, "no MIG profile"));
	assert_int_equal(pod.demand.mig_count, 0);
	ft_pod_dispose(&pod);

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'500m'}}}]}");
	assert_string_equal(
	    pod.demand_error,
	    "resource nvidia.com/gpu: \"500m\" is not a whole number");
	ft_pod_dispose(&pod);

	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'requests':{'cpu':'lots'}}}]}");
	assert_string_equal(pod.demand_error,
			    "resource cpu: bad quantity \"lots\"");
	ft_pod_dispose(&pod);
}

/* Ranks of a GPU fraction, through either name of the GPU resource. */
static void test_codec__pod_gpu_fraction(void **state)
{
	cJSON *obj = pod_object(
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu.shared':'2'}}}]}");
	ft_pod_t pod;

	annotate(obj, "flextopo.io/gpu-fraction", "0.8");
	decode_pod(&pod, obj);
	assert_null(pod.demand_error);
	assert_int_equal(pod.demand.gpus, 2);
	assert_int_equal(pod.demand.gpu_fraction_milli, 800);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object(
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}");
	annotate(obj, "flextopo.io/gpu-fraction", "1.5");
	decode_pod(&pod, obj);
	assert_string_equal(
	    pod.demand_error,
	    "annotation flextopo.io/gpu-fraction: \"1.5\" is not a number in (0, 1]");
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/gpu-fraction", "0");
	decode_pod(&pod, obj);
	assert_non_null(pod.demand_error);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	/* Other suffixes are not the GPU resource. */
	decode_spec(
	    &pod,
	    "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu.other':'1'}}}]}");
	assert_int_equal(pod.demand.gpus, 0);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_affinity_annotations(void **state)
{
	cJSON *obj = pod_object("{'containers':[]}");
	ft_pod_t pod;

	annotate(obj, "flextopo.io/affinity", "pcie-switch");
	annotate(obj, "flextopo.io/affinity-mode", "best-effort");
	decode_pod(&pod, obj);
	assert_true(pod.demand.has_affinity);
	assert_int_equal(pod.demand.level, FT_LEVEL_PCIE_SWITCH);
	assert_int_equal(pod.demand.mode, FT_MODE_BEST_EFFORT);
	assert_null(pod.demand_error);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/affinity", "NVLink");
	decode_pod(&pod, obj);
	assert_false(pod.demand.has_affinity);
	assert_string_equal(
	    pod.demand_error,
	    "annotation flextopo.io/affinity: \"NVLink\" is not one of nvlink, pcie-switch, numa, socket, node");
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/affinity-mode", "strict");
	decode_pod(&pod, obj);
	assert_non_null(pod.demand_error);
	assert_non_null(strstr(pod.demand_error, "affinity-mode"));
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	/* Another prefix's annotations are not ours. */
	obj = pod_object("{'containers':[]}");
	annotate(obj, "example.com/affinity", "nvlink");
	decode_pod(&pod, obj);
	assert_false(pod.demand.has_affinity);
	assert_null(pod.demand_error);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

static void test_codec__pod_allocation_policy(void **state)
{
	cJSON *obj = pod_object("{'containers':[]}");
	ft_pod_t pod;

	decode_pod(&pod, obj);
	assert_false(pod.demand.has_policy);
	ft_pod_dispose(&pod);
	annotate(obj, "flextopo.io/allocation-policy", "distributed");
	decode_pod(&pod, obj);
	assert_true(pod.demand.has_policy);
	assert_int_equal(pod.demand.policy, FT_POLICY_DISTRIBUTED);
	assert_null(pod.demand_error);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/allocation-policy", "spread");
	decode_pod(&pod, obj);
	assert_false(pod.demand.has_policy);
	assert_string_equal(
	    pod.demand_error,
	    "annotation flextopo.io/allocation-policy: \"spread\" is not packed or distributed");
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

/* The requires annotation on a pod, and its error naming the key. */
static void expect_requires_error(const char *value, const char *message)
{
	cJSON *obj = pod_object("{'containers':[]}");
	ft_pod_t pod;

	annotate(obj, "flextopo.io/requires", value);
	decode_pod(&pod, obj);
	assert_false(pod.demand.has_caps);
	assert_non_null(pod.demand_error);
	assert_string_equal(pod.demand_error, message);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

static void test_codec__pod_requires(void **state)
{
	cJSON *obj = pod_object("{'containers':[]}");
	ft_pod_t pod;

	annotate(
	    obj, "flextopo.io/requires",
	    "{\"memoryPerGpu\":\"40Gi\",\"precision\":[\"fp8\",\"bf16\"],\"interconnect\":\"nvlink\",\"nvlinkDomainSize\":2}");
	decode_pod(&pod, obj);
	assert_null(pod.demand_error);
	assert_true(pod.demand.has_caps);
	assert_int_equal(pod.demand.caps.memory_mib, 40960);
	assert_int_equal(pod.demand.caps.precisions,
			 FT_PRECISION_FP8 | FT_PRECISION_BF16);
	assert_int_equal(pod.demand.caps.interconnect, FT_INTERCONNECT_NVLINK);
	assert_int_equal(pod.demand.caps.nvlink_domain, 2);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	/* Everything optional; Modelplane's "precisionSupport" is read too. */
	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/requires",
		 "{\"precisionSupport\":[\"fp16\"],\"interconnect\":\"pcie\"}");
	decode_pod(&pod, obj);
	assert_null(pod.demand_error);
	assert_true(pod.demand.has_caps);
	assert_int_equal(pod.demand.caps.memory_mib, 0);
	assert_int_equal(pod.demand.caps.precisions, FT_PRECISION_FP16);
	assert_int_equal(pod.demand.caps.interconnect, FT_INTERCONNECT_PCIE);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	expect_requires_error(
	    "{\"memoryPerGpu\":\"40GB\"}",
	    "annotation flextopo.io/requires: memoryPerGpu: quantity \"40GB\": not a Kubernetes quantity");
	expect_requires_error(
	    "{\"memoryPerGpu\":40}",
	    "annotation flextopo.io/requires: memoryPerGpu: expected a quantity string such as \"40Gi\"");
	expect_requires_error(
	    "{\"precision\":[\"fp8\",\"fp9\"]}",
	    "annotation flextopo.io/requires: precision[1]: \"fp9\" is not one of fp64, tf32, bf16, fp16, fp8, int8, fp4");
	expect_requires_error(
	    "{\"precision\":\"fp8\"}",
	    "annotation flextopo.io/requires: precision: expected an array of names such as [\"fp8\"]");
	expect_requires_error(
	    "{\"interconnect\":\"infiniband\"}",
	    "annotation flextopo.io/requires: interconnect: expected \"nvlink\" or \"pcie\"");
	expect_requires_error(
	    "{\"nvlinkDomainSize\":0}",
	    "annotation flextopo.io/requires: nvlinkDomainSize: expected an integer 1-65535");
	expect_requires_error(
	    "{\"nvlinkDomainSize\":1.5}",
	    "annotation flextopo.io/requires: nvlinkDomainSize: expected an integer 1-65535");
	expect_requires_error(
	    "{\"memory\":\"40Gi\"}",
	    "annotation flextopo.io/requires: unknown key \"memory\" (memoryPerGpu, precision, interconnect, nvlinkDomainSize)");
	expect_requires_error(
	    "[]",
	    "annotation flextopo.io/requires: expected a JSON object such as {\"memoryPerGpu\":\"40Gi\"}");
	expect_requires_error(
	    "{",
	    "annotation flextopo.io/requires: expected a JSON object such as {\"memoryPerGpu\":\"40Gi\"}");
}

static void test_codec__pod_status_fields(void **state)
{
	cJSON *obj = ft_test_json(
	    "{'metadata':{'name':'p','uid':'u-2','creationTimestamp':'2026-11-20T08:00:00Z'},'spec':{'nodeName':'n1','priority':1000,'containers':[]},'status':{'phase':'Running','startTime':'2026-11-21T04:32:00Z'}}");
	ft_pod_t pod;

	decode_pod(&pod, obj);
	assert_string_equal(pod.ns, "default");
	assert_string_equal(pod.node, "n1");
	assert_int_equal(pod.priority, 1000);
	assert_int_equal(pod.start_time, INT64_C(1795235520));
	assert_false(pod.terminal);
	ft_pod_dispose(&pod);

	/* No startTime yet: creationTimestamp. */
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(obj, "status"),
				   "startTime");
	decode_pod(&pod, obj);
	assert_int_equal(pod.start_time, INT64_C(1795161600));
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = ft_test_json(
	    "{'metadata':{'name':'p','uid':'u-3'},'spec':{'nodeName':'','priority':-5}}");
	decode_pod(&pod, obj);
	assert_null(pod.node);
	assert_int_equal(pod.priority, -5);
	assert_int_equal(pod.start_time, 0);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

/*
 * spec.priority is an int32 in the API, but the decoder converted any JSON
 * number with a bare (int32_t) cast: undefined behaviour for 1e10 (UBSan
 * float-cast-overflow; x86-64 gives INT32_MIN, so an absurdly important pod
 * became the least important victim). Out-of-range values must saturate.
 */
static void test_codec__pod_priority_out_of_range(void **state)
{
	static const struct {
		const char *spec;
		int32_t want;
	} cases[] = {{"{'priority':1e10}", INT32_MAX},
		     {"{'priority':-1e10}", INT32_MIN},
		     {"{'priority':2147483647}", INT32_MAX},
		     {"{'priority':-2147483648}", INT32_MIN},
		     {"{'priority':1e300}", INT32_MAX}};
	ft_pod_t pod;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		decode_spec(&pod, cases[i].spec);
		if (pod.priority != cases[i].want)
			fail_msg("%s: priority %d", cases[i].spec,
				 (int)pod.priority);
		ft_pod_dispose(&pod);
	}
}

/*
 * Each quantity is capped at INT64_MAX / 2 millis, but the per-container
 * values were summed into an int64_t without a check: three containers of
 * 4e15 CPUs overflow it (undefined behaviour, UBSan: kobj.c sum_into) and
 * the demand wrapped to a small number of millicores. Memory sums wrap the
 * same way in uint64_t. A pod that asks for more than can be counted must
 * never look small: saturate, or report a demand error.
 */
static void test_codec__pod_request_sums_do_not_wrap(void **state)
{
	ft_pod_t pod;

	decode_spec(
	    &pod,
	    "{'containers':[{'resources':{'requests':{'cpu':'4e15'}}},{'resources':{'requests':{'cpu':'4e15'}}},{'resources':{'requests':{'cpu':'4e15'}}}]}");
	if (!pod.demand_error && pod.demand.cpu_millis != UINT32_MAX)
		fail_msg("cpu_millis %u", pod.demand.cpu_millis);
	ft_pod_dispose(&pod);

	decode_spec(
	    &pod,
	    "{'containers':[{'resources':{'requests':{'memory':'9e24'}}},{'resources':{'requests':{'memory':'9e24'}}},{'resources':{'requests':{'memory':'9e24'}}}]}");
	if (!pod.demand_error && pod.demand.memory_mib != UINT64_MAX)
		fail_msg("memory_mib %llu",
			 (unsigned long long)pod.demand.memory_mib);
	ft_pod_dispose(&pod);
}

static void test_codec__pod_terminal_phases(void **state)
{
	static const struct {
		const char *phase;
		bool terminal;
	} cases[] = {{"Pending", false},
		     {"Running", false},
		     {"Succeeded", true},
		     {"Failed", true},
		     {"Unknown", false}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *obj =
		    ft_test_json("{'metadata':{'name':'p','uid':'u'}}");
		cJSON *status = cJSON_AddObjectToObject(obj, "status");
		ft_pod_t pod;

		cJSON_AddStringToObject(status, "phase", cases[i].phase);
		decode_pod(&pod, obj);
		if (pod.terminal != cases[i].terminal)
			fail_msg("phase %s", cases[i].phase);
		ft_pod_dispose(&pod);
		cJSON_Delete(obj);
	}
}

static void test_codec__pod_allocation_annotation(void **state)
{
	cJSON *obj = pod_object("{'nodeName':'n1','containers':[]}");
	ft_cpuset_t want;
	ft_pod_t pod;

	annotate(
	    obj, "flextopo.io/allocation",
	    "{\"version\":1,\"node\":\"n1\",\"level\":\"numa\",\"mode\":\"best-effort\",\"gpus\":[\"GPU-a\",\"GPU-b\"],\"gpuIndexes\":[0,1],\"mig\":[{\"uuid\":\"MIG-x\",\"profile\":\"1g.10gb\",\"gpu\":\"GPU-c\",\"start\":0,\"size\":1}],\"cpuset\":\"0-3,8\",\"numaNodes\":[0],\"memoryMiB\":2048}");
	decode_pod(&pod, obj);
	assert_true(pod.has_allocation);
	assert_null(pod.allocation_error);
	assert_int_equal(pod.allocation.level, FT_LEVEL_NUMA);
	assert_int_equal(pod.allocation.mode, FT_MODE_BEST_EFFORT);
	assert_int_equal(pod.allocation.n_gpus, 2);
	assert_string_equal(pod.allocation.gpu_uuids[0], "GPU-a");
	assert_string_equal(pod.allocation.gpu_uuids[1], "GPU-b");
	assert_int_equal(pod.allocation.n_mig, 1);
	assert_string_equal(pod.allocation.mig_uuids[0], "MIG-x");
	assert_int_equal(ft_cpuset_parse(&want, "0-3,8"), 0);
	assert_true(ft_cpuset_equal(&pod.allocation.cpus, &want));
	assert_int_equal(pod.allocation.memory_mib, 2048);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'nodeName':'n1','containers':[]}");
	annotate(obj, "flextopo.io/allocation",
		 "{\"gpus\":[\"GPU-a\"],\"cpuset\":\"7-3\"}");
	decode_pod(&pod, obj);
	assert_false(pod.has_allocation);
	assert_int_equal(pod.allocation.n_gpus, 0);
	assert_non_null(pod.allocation_error);
	assert_memory_equal(pod.allocation_error,
			    "annotation flextopo.io/allocation: ",
			    strlen("annotation flextopo.io/allocation: "));
	/* A broken allocation is not a broken demand. */
	assert_null(pod.demand_error);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);

	obj = pod_object("{'containers':[]}");
	annotate(obj, "flextopo.io/allocation", "{not json");
	decode_pod(&pod, obj);
	assert_false(pod.has_allocation);
	assert_string_equal(
	    pod.allocation_error,
	    "annotation flextopo.io/allocation: not a JSON object");
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

static void test_codec__pod_not_a_pod(void **state)
{
	static const char *const bad[] = {"{}",
					  "{'metadata':{'name':'p'}}",
					  "{'metadata':{'uid':'u'}}",
					  "{'metadata':{'name':7,'uid':'u'}}",
					  "[]",
					  "'pod'"};
	ft_pod_t pod;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *obj = ft_test_json(bad[i]);
		assert_int_equal(ft_codec_pod_decode(&pod, obj, &opts),
				 FT_EINVAL);
		assert_null(pod.uid);
		cJSON_Delete(obj);
	}
	assert_int_equal(ft_codec_pod_decode(&pod, NULL, &opts), FT_EINVAL);
}

static void test_codec__pod_other_prefix(void **state)
{
	const ft_codec_options_t mine = {.annotation_prefix = "gpu.example",
					 .gpu_resource = "example.com/gpu",
					 .mig_resource_prefix =
					     "example.com/mig-",
					 .default_mode = FT_MODE_BEST_EFFORT};
	cJSON *obj = pod_object(
	    "{'containers':[{'name':'a','resources':{'limits':{'example.com/gpu':'2','nvidia.com/gpu':'1'}}}]}");
	ft_pod_t pod;

	annotate(obj, "gpu.example/affinity", "numa");
	annotate(obj, "flextopo.io/affinity", "nvlink");
	assert_int_equal(ft_codec_pod_decode(&pod, obj, &mine), 0);
	assert_int_equal(pod.demand.gpus, 2);
	assert_int_equal(pod.demand.level, FT_LEVEL_NUMA);
	assert_int_equal(pod.demand.mode, FT_MODE_BEST_EFFORT);
	ft_pod_dispose(&pod);
	cJSON_Delete(obj);
}

/* ---- allocation annotation ------------------------------------------- */

static void placement_a100(ft_placement_t *p, const ft_topology_t *t)
{
	memset(p, 0, sizeof(*p));
	p->gpus = 0x30; /* positions 4, 5: NUMA 1, switch 2 */
	assert_int_equal(ft_cpuset_parse(&p->cpus, "64-71"), 0);
	p->numa_nodes = 0x2;
	p->memory_mib = 16384;
	p->levels = ft_place_levels_of(t, p->gpus, p->numa_nodes);
	p->level = ft_place_first_level(p->levels, FT_LEVEL_NUMA);
}

static void test_codec__allocation_encode(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_node_t *node = ft_test_node("a100-0", t, NULL);
	ft_placement_t p;
	char *text = NULL;
	cJSON *got, *want;

	placement_a100(&p, t);
	assert_int_equal(p.level, FT_LEVEL_NUMA);
	assert_int_equal(
	    ft_codec_allocation_encode(&text, &p, node, FT_MODE_GUARANTEED), 0);
	got = cJSON_Parse(text);
	want = ft_test_json(
	    "{'version':1,'node':'a100-0','level':'numa','levels':['nvlink','pcie-switch','numa','socket','node'],'mode':'guaranteed','gpus':['A-4','A-5'],'gpuIndexes':[4,5],'mig':[],'numaNodes':[1],'cpuset':'64-71','memoryMiB':16384}");
	if (!cJSON_Compare(want, got, true))
		fail_msg("allocation %s", text);
	cJSON_Delete(got);
	cJSON_Delete(want);
	free(text);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_codec__allocation_round_trip(void **state)
{
	ft_topology_t *t = ft_test_topology_a100("A");
	ft_node_t *node = ft_test_node("a100-0", t, NULL);
	ft_allocation_t back, direct;
	ft_placement_t p;
	char *text = NULL;

	placement_a100(&p, t);
	assert_int_equal(
	    ft_codec_allocation_encode(&text, &p, node, FT_MODE_BEST_EFFORT),
	    0);
	assert_int_equal(ft_codec_allocation_decode(&back, text), 0);
	assert_int_equal(ft_codec_allocation_from_placement(
			     &direct, &p, node, FT_MODE_BEST_EFFORT),
			 0);
	assert_int_equal(back.level, FT_LEVEL_NUMA);
	assert_int_equal(back.mode, FT_MODE_BEST_EFFORT);
	assert_int_equal(back.n_gpus, 2);
	assert_string_equal(back.gpu_uuids[0], "A-4");
	assert_string_equal(back.gpu_uuids[1], "A-5");
	assert_int_equal(back.n_mig, 0);
	assert_true(ft_cpuset_equal(&back.cpus, &p.cpus));
	assert_int_equal(back.memory_mib, 16384);
	/* What bind assumes equals what the watch reads back. */
	assert_int_equal(direct.level, back.level);
	assert_int_equal(direct.mode, back.mode);
	assert_int_equal(direct.n_gpus, back.n_gpus);
	for (unsigned i = 0; i < back.n_gpus; i++)
		assert_string_equal(direct.gpu_uuids[i], back.gpu_uuids[i]);
	assert_true(ft_cpuset_equal(&direct.cpus, &back.cpus));
	assert_int_equal(direct.memory_mib, back.memory_mib);
	ft_allocation_dispose(&back);
	ft_allocation_dispose(&direct);
	free(text);
	ft_node_unref(node);
	ft_topology_unref(t);
}

/* Replicas of shared GPUs survive encode and decode. */
static void test_codec__allocation_replicas(void **state)
{
	ft_topology_t *t = ft_test_topology_pairs4("S");
	ft_node_t *node = NULL;
	ft_allocation_t back, direct;
	ft_placement_t p;
	char *text = NULL;

	for (unsigned g = 0; g < 4; g++)
		assert_int_equal(ft_topology_share_gpu(t, g, 10), 0);
	assert_int_equal(ft_topology_finish(t), 0);
	node = ft_test_node("n", t, NULL);
	memset(&p, 0, sizeof(p));
	p.level = FT_LEVEL_NVLINK;
	p.replicas[0] = p.replicas[1] = 8;
	assert_int_equal(
	    ft_codec_allocation_encode(&text, &p, node, FT_MODE_GUARANTEED), 0);
	assert_non_null(strstr(
	    text,
	    "\"replicas\":[{\"gpu\":\"S-0\",\"count\":8},{\"gpu\":\"S-1\",\"count\":8}]"));
	assert_int_equal(ft_codec_allocation_decode(&back, text), 0);
	assert_int_equal(ft_codec_allocation_from_placement(&direct, &p, node,
							    FT_MODE_GUARANTEED),
			 0);
	assert_int_equal(back.n_gpus, 0);
	assert_int_equal(back.n_replicas, 2);
	assert_int_equal(direct.n_replicas, 2);
	for (unsigned i = 0; i < 2; i++) {
		assert_string_equal(back.replica_gpus[i],
				    direct.replica_gpus[i]);
		assert_int_equal(back.replica_counts[i], 8);
		assert_int_equal(direct.replica_counts[i], 8);
	}
	ft_allocation_dispose(&back);
	ft_allocation_dispose(&direct);
	assert_int_equal(ft_codec_allocation_decode(
			     &back, "{\"replicas\":[{\"gpu\":\"S-0\"}]}"),
			 FT_EINVAL);
	assert_string_equal(ft_error_last(),
			    "replicas[0].count: expected an integer 1-100");
	assert_int_equal(ft_codec_allocation_decode(&back, "{\"replicas\":{}}"),
			 FT_EINVAL);
	free(text);
	ft_node_unref(node);
	ft_topology_unref(t);
}

static void test_codec__allocation_decode_minimal_and_bad(void **state)
{
	ft_allocation_t a;
	char many[1024];
	size_t n;

	/* Missing lists are empty; missing level is node. */
	assert_int_equal(ft_codec_allocation_decode(&a, "{}"), 0);
	assert_int_equal(a.level, FT_LEVEL_NODE);
	assert_int_equal(a.mode, FT_MODE_GUARANTEED);
	assert_int_equal(a.n_gpus, 0);
	assert_true(ft_cpuset_empty(&a.cpus));
	ft_allocation_dispose(&a);

	assert_int_equal(ft_codec_allocation_decode(&a, "[]"), FT_EINVAL);
	assert_int_equal(ft_codec_allocation_decode(&a, ""), FT_EINVAL);
	assert_int_equal(ft_codec_allocation_decode(&a, "{\"level\":\"rack\"}"),
			 FT_EINVAL);
	assert_int_equal(ft_codec_allocation_decode(&a, "{\"cpuset\":\"x\"}"),
			 FT_EINVAL);
	assert_int_equal(ft_codec_allocation_decode(&a, "{\"gpus\":\"GPU-a\"}"),
			 FT_EINVAL);
	assert_int_equal(ft_codec_allocation_decode(&a, "{\"gpus\":[1]}"),
			 FT_EINVAL);
	assert_int_equal(
	    ft_codec_allocation_decode(&a, "{\"gpus\":[\"a\"],\"mig\":[{}]}"),
	    FT_EINVAL);
	assert_int_equal(a.n_gpus, 0);

	/* More GPUs than a node can have. */
	n = (size_t)snprintf(many, sizeof(many), "{\"gpus\":[");
	for (int i = 0; i <= FT_GPU_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"G%d\"",
				      i ? "," : "", i);
	snprintf(many + n, sizeof(many) - n, "]}");
	assert_int_equal(ft_codec_allocation_decode(&a, many), FT_EINVAL);
	assert_int_equal(a.n_gpus, 0);
}

/*
 * memoryMiB was converted with a bare (uint64_t) cast of the JSON double:
 * undefined behaviour above 2^64 (UBSan float-cast-overflow, allocation.c
 * decode_fields). The schema bounds MiB at 2^53; beyond that the annotation
 * is invalid.
 */
static void test_codec__allocation_memory_out_of_range(void **state)
{
	ft_allocation_t a;
	int rc;

	rc = ft_codec_allocation_decode(&a, "{\"memoryMiB\":1e30}");
	if (rc == 0) {
		assert_true(a.memory_mib <= (UINT64_C(1) << 53));
		ft_allocation_dispose(&a);
	} else {
		assert_int_equal(rc, FT_EINVAL);
	}
	assert_int_equal(
	    ft_codec_allocation_decode(&a, "{\"memoryMiB\":9007199254740992}"),
	    0);
	assert_int_equal(a.memory_mib, UINT64_C(9007199254740992));
	ft_allocation_dispose(&a);
}

/* ---- nodes ------------------------------------------------------------ */

static const char pairs_topology[] =
    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-7\",\"memoryMiB\":65536,\"pcieSwitches\":[{\"id\":0,\"gpus\":[{\"index\":0,\"uuid\":\"GPU-p-0\",\"model\":\"NVIDIA A40\",\"memoryMiB\":46068,\"nvlinks\":[{\"peer\":1,\"links\":4}]},{\"index\":1,\"uuid\":\"GPU-p-1\",\"model\":\"NVIDIA A40\",\"memoryMiB\":46068,\"nvlinks\":[{\"peer\":0,\"links\":4}]}]}]}]}]}";

static cJSON *node_object(const char *name, const char *topology)
{
	cJSON *node =
	    ft_test_json("{'metadata':{'labels':{'a':'b'}},'status':{}}");

	cJSON_AddStringToObject(cJSON_GetObjectItem(node, "metadata"), "name",
				name);
	if (topology)
		annotate(node, "flextopo.io/topology", topology);
	return node;
}

static void test_codec__node_decode(void **state)
{
	cJSON *obj = node_object("n1", pairs_topology);
	ft_node_source_t src;

	assert_int_equal(ft_codec_node_decode(&src, obj, &opts, NULL), 0);
	assert_string_equal(src.name, "n1");
	assert_string_equal(src.topology_text, pairs_topology);
	assert_non_null(src.topology);
	assert_null(src.topology_error);
	assert_int_equal(src.topology->n_gpus, 2);
	assert_int_equal(src.topology->gpus[0].nvlink_peers, 0x2);
	assert_non_null(src.labels); /* a=b: its key and its pair */
	assert_int_equal(src.labels->n_hashes, 2);
	assert_int_equal(src.labels->n_taints, 0);
	ft_node_source_dispose(&src);
	assert_null(src.name);
	ft_node_source_dispose(&src);
	ft_node_source_dispose(NULL);
	cJSON_Delete(obj);
}

static void test_codec__node_missing_annotation(void **state)
{
	cJSON *obj = node_object("n1", NULL);
	ft_node_source_t src;

	assert_int_equal(ft_codec_node_decode(&src, obj, &opts, NULL), 0);
	assert_string_equal(src.name, "n1");
	assert_null(src.topology_text);
	assert_null(src.topology);
	assert_string_equal(src.topology_error,
			    "annotation flextopo.io/topology is missing");
	ft_node_source_dispose(&src);
	cJSON_Delete(obj);
}

static void test_codec__node_broken_annotation(void **state)
{
	static const char *const prefix = "annotation flextopo.io/topology: ";
	static const char *const broken[] = {
	    /* one string, split to fit the line */
	    ("{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-x\",\"memoryMiB\":1}]}]}"),
	    "not json", "", "[]", "{\"version\":2,\"sockets\":[]}"};

	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		cJSON *obj = node_object("n1", broken[i]);
		ft_node_source_t src;

		assert_int_equal(ft_codec_node_decode(&src, obj, &opts, NULL),
				 0);
		assert_null(src.topology);
		assert_string_equal(src.topology_text, broken[i]);
		assert_non_null(src.topology_error);
		if (strncmp(src.topology_error, prefix, strlen(prefix)) != 0)
			fail_msg("error \"%s\"", src.topology_error);
		ft_node_source_dispose(&src);
		cJSON_Delete(obj);
	}
}

static void test_codec__node_reuses_topology(void **state)
{
	cJSON *obj = node_object("n1", pairs_topology);
	cJSON *other = node_object("n1", NULL);
	cJSON *broken = node_object("n1", "{");
	ft_node_source_t first, again, changed, bad, bad_again;
	char *modified = strdup(pairs_topology);

	assert_int_equal(ft_codec_node_decode(&first, obj, &opts, NULL), 0);
	assert_int_equal(ft_codec_node_decode(&again, obj, &opts, &first), 0);
	/* Same text: the parsed topology is shared, not parsed again. */
	assert_ptr_equal(again.topology, first.topology);
	assert_int_equal(atomic_load(&first.topology->refcount), 2);

	/* Different text: parsed anew. */
	*strstr(modified, "NVIDIA A40") = 'n';
	annotate(other, "flextopo.io/topology", modified);
	assert_int_equal(ft_codec_node_decode(&changed, other, &opts, &first),
			 0);
	assert_non_null(changed.topology);
	assert_ptr_not_equal(changed.topology, first.topology);

	/* A broken annotation seen twice keeps its error. */
	assert_int_equal(ft_codec_node_decode(&bad, broken, &opts, NULL), 0);
	assert_int_equal(ft_codec_node_decode(&bad_again, broken, &opts, &bad),
			 0);
	assert_null(bad_again.topology);
	assert_string_equal(bad_again.topology_error, bad.topology_error);

	ft_node_source_dispose(&first);
	assert_int_equal(atomic_load(&again.topology->refcount), 1);
	ft_node_source_dispose(&again);
	ft_node_source_dispose(&changed);
	ft_node_source_dispose(&bad);
	ft_node_source_dispose(&bad_again);
	free(modified);
	cJSON_Delete(obj);
	cJSON_Delete(other);
	cJSON_Delete(broken);
}

static void test_codec__node_without_name(void **state)
{
	cJSON *obj = ft_test_json("{'metadata':{'labels':{}}}");
	ft_node_source_t src;

	assert_int_equal(ft_codec_node_decode(&src, obj, &opts, NULL),
			 FT_EINVAL);
	assert_null(src.name);
	cJSON_Delete(obj);
}

/* ---- extender arguments ---------------------------------------------- */

static int args_decode(ft_extender_args_t *out, const char *text)
{
	char *copy = strdup(text);
	int rc;

	for (char *p = copy; *p; p++)
		if (*p == '\'')
			*p = '"';
	rc = ft_codec_extender_args_decode(out, copy, strlen(copy));
	free(copy);
	return rc;
}

static void test_codec__args_node_names(void **state)
{
	ft_extender_args_t a;

	assert_int_equal(
	    args_decode(
		&a,
		"{'Pod':{'metadata':{'name':'p'}},'Nodes':null,'NodeNames':['n1','n2','n3']}"),
	    0);
	assert_true(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 3);
	assert_string_equal(a.node_names[0], "n1");
	assert_string_equal(a.node_names[2], "n3");
	assert_null(a.node_objects);
	assert_true(cJSON_IsObject(a.pod));
	ft_codec_extender_args_dispose(&a);
	assert_null(a.root);
	ft_codec_extender_args_dispose(&a);
	ft_codec_extender_args_dispose(NULL);

	/* Case-insensitive keys; unknown keys ignored; NodeNames wins. */
	assert_int_equal(
	    args_decode(
		&a,
		"{'pod':{},'NODENAMES':['x'],'nodes':{'items':[]},'Extra':1}"),
	    0);
	assert_true(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 1);
	assert_string_equal(a.node_names[0], "x");
	ft_codec_extender_args_dispose(&a);

	assert_int_equal(args_decode(&a, "{'Pod':{},'NodeNames':[]}"), 0);
	assert_true(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 0);
	ft_codec_extender_args_dispose(&a);

	assert_int_equal(args_decode(&a, "{'Pod':{}}"), 0);
	assert_true(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 0);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__args_nodes(void **state)
{
	ft_extender_args_t a;

	assert_int_equal(
	    args_decode(
		&a,
		"{'Pod':{},'NodeNames':null,'Nodes':{'metadata':{},'items':[{'metadata':{'name':'n1'}},{'metadata':{'name':'n2','labels':{}}}]}}"),
	    0);
	assert_false(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 2);
	assert_string_equal(a.node_names[1], "n2");
	assert_non_null(a.node_objects);
	assert_ptr_equal(
	    cJSON_GetObjectItem(
		cJSON_GetObjectItem(a.node_objects[1], "metadata"), "name")
		->valuestring,
	    a.node_names[1]);
	ft_codec_extender_args_dispose(&a);

	assert_int_equal(args_decode(&a, "{'Pod':{},'Nodes':{'items':null}}"),
			 0);
	assert_false(a.node_cache_capable);
	assert_int_equal(a.n_nodes, 0);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__args_bad(void **state)
{
	static const struct {
		const char *body;
		const char *error;
	} cases[] = {
	    {"", "malformed JSON at offset 0"},
	    {"{'Pod':", NULL},
	    {"[]", "expected a JSON object"},
	    {"'Pod'", "expected a JSON object"},
	    {"{}", "Pod: expected a Pod object"},
	    {"{'Pod':null,'NodeNames':[]}", "Pod: expected a Pod object"},
	    {"{'Pod':[],'NodeNames':[]}", "Pod: expected a Pod object"},
	    {"{'Pod':{},'NodeNames':'n1'}", "NodeNames: expected an array"},
	    {"{'Pod':{},'NodeNames':['n1',2]}",
	     "NodeNames[1]: expected a string"},
	    {"{'Pod':{},'Nodes':[]}", "Nodes: expected a NodeList"},
	    {"{'Pod':{},'Nodes':{'items':{}}}", "Nodes: expected a NodeList"},
	    {"{'Pod':{},'Nodes':{'items':[{'metadata':{}}]}}",
	     "Nodes.items[0]: metadata.name missing"},
	};
	ft_extender_args_t a;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = args_decode(&a, cases[i].body);
		if (rc != FT_EINVAL)
			fail_msg("\"%s\": rc %d", cases[i].body, rc);
		if (cases[i].error &&
		    strcmp(ft_error_last(), cases[i].error) != 0)
			fail_msg("\"%s\": %s", cases[i].body, ft_error_last());
		assert_null(a.root);
		assert_null(a.node_names);
	}
}

static void test_codec__args_length_bounded(void **state)
{
	const char body[] = "{\"Pod\":{},\"NodeNames\":[\"n1\"]}GARBAGE";
	ft_extender_args_t a;

	/* Only `len` bytes are read; what follows is not part of the body. */
	assert_int_equal(
	    ft_codec_extender_args_decode(&a, body, strlen(body) - 7), 0);
	assert_int_equal(a.n_nodes, 1);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__bind_args(void **state)
{
	const char *ok =
	    "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"PodUID\":\"u-1\",\"Node\":\"n1\"}";
	const char *lower =
	    "{\"podname\":\"p\",\"podnamespace\":\"ns\",\"poduid\":\"u-1\",\"node\":\"n1\"}";
	static const char *const bad[] = {
	    "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"Node\":\"n1\"}",
	    "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"PodUID\":\"\",\"Node\":\"n1\"}",
	    "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"PodUID\":7,\"Node\":\"n1\"}",
	    "[]",
	    "{",
	    ""};
	ft_bind_args_t b;

	assert_int_equal(ft_codec_bind_args_decode(&b, ok, strlen(ok)), 0);
	assert_string_equal(b.pod_name, "p");
	assert_string_equal(b.pod_namespace, "ns");
	assert_string_equal(b.pod_uid, "u-1");
	assert_string_equal(b.node, "n1");
	ft_codec_bind_args_dispose(&b);
	assert_null(b.pod_name);
	ft_codec_bind_args_dispose(NULL);

	assert_int_equal(ft_codec_bind_args_decode(&b, lower, strlen(lower)),
			 0);
	assert_string_equal(b.pod_uid, "u-1");
	ft_codec_bind_args_dispose(&b);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    ft_codec_bind_args_decode(&b, bad[i], strlen(bad[i])),
		    FT_EINVAL);
		assert_null(b.pod_name);
		assert_null(b.pod_uid);
	}
	assert_int_equal(ft_codec_bind_args_decode(&b, bad[0], strlen(bad[0])),
			 FT_EINVAL);
	assert_string_equal(ft_error_last(),
			    "PodUID: expected a non-empty string");
}

/* ---- replies ---------------------------------------------------------- */

static void assert_json(const char *text, const char *want_single_quoted)
{
	cJSON *got = cJSON_Parse(text);
	cJSON *want = ft_test_json(want_single_quoted);
	bool same = got && cJSON_Compare(want, got, true);
	char *w = same ? NULL : cJSON_PrintUnformatted(want);

	if (!same)
		print_error("got  %s\nwant %s\n", text, w ? w : "?");
	free(w);
	cJSON_Delete(got);
	cJSON_Delete(want);
	if (!same)
		fail();
}

static void test_codec__filter_reply_names(void **state)
{
	ft_extender_args_t a;
	ft_filter_reply_t *r = NULL;
	char *out = NULL;

	assert_int_equal(
	    args_decode(&a, "{'Pod':{},'NodeNames':['n1','n2','n3','n4']}"), 0);
	assert_int_equal(ft_codec_filter_reply_new(&r, &a), 0);
	assert_int_equal(ft_codec_filter_reply_pass(r, 0), 0);
	assert_int_equal(ft_codec_filter_reply_fail(r, 1, "no room", false), 0);
	assert_int_equal(ft_codec_filter_reply_fail(r, 2, "never", true), 0);
	assert_int_equal(ft_codec_filter_reply_pass(r, 3), 0);
	assert_int_equal(ft_codec_filter_reply_finish(&out, r), 0);
	assert_json(
	    out,
	    "{'NodeNames':['n1','n4'],'Nodes':null,'FailedNodes':{'n2':'no room'},'FailedAndUnresolvableNodes':{'n3':'never'},'Error':''}");
	free(out);

	/* Nothing passes: an empty list, never null. */
	assert_int_equal(ft_codec_filter_reply_new(&r, &a), 0);
	assert_int_equal(ft_codec_filter_reply_finish(&out, r), 0);
	assert_json(
	    out,
	    "{'NodeNames':[],'Nodes':null,'FailedNodes':{},'FailedAndUnresolvableNodes':{},'Error':''}");
	free(out);

	/* Freed unfinished. */
	assert_int_equal(ft_codec_filter_reply_new(&r, &a), 0);
	assert_int_equal(ft_codec_filter_reply_pass(r, 0), 0);
	ft_codec_filter_reply_free(r);
	ft_codec_filter_reply_free(NULL);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__filter_reply_nodes(void **state)
{
	ft_extender_args_t a;
	ft_filter_reply_t *r = NULL;
	char *out = NULL;

	assert_int_equal(
	    args_decode(
		&a,
		"{'Pod':{},'Nodes':{'items':[{'metadata':{'name':'n1'},'spec':{}},{'metadata':{'name':'n2'}}]}}"),
	    0);
	assert_int_equal(ft_codec_filter_reply_new(&r, &a), 0);
	assert_int_equal(ft_codec_filter_reply_pass(r, 0), 0);
	assert_int_equal(ft_codec_filter_reply_fail(r, 1, "no room", false), 0);
	assert_int_equal(ft_codec_filter_reply_finish(&out, r), 0);
	assert_json(
	    out,
	    "{'Nodes':{'items':[{'metadata':{'name':'n1'},'spec':{}}]},'NodeNames':null,'FailedNodes':{'n2':'no room'},'FailedAndUnresolvableNodes':{},'Error':''}");
	free(out);
	ft_codec_extender_args_dispose(&a);
}

/*
 * Error replaces the "" placed by reply_new. The reply must still carry the
 * key "Error": kube-scheduler reads ExtenderFilterResult.Error by name, and a
 * reply without it is an empty NodeNames list with no error, which rejects
 * every node silently instead of failing the scheduling attempt.
 */
static void test_codec__filter_reply_error(void **state)
{
	ft_extender_args_t a;
	ft_filter_reply_t *r = NULL;
	char *out = NULL;

	assert_int_equal(args_decode(&a, "{'Pod':{},'NodeNames':['n1']}"), 0);
	assert_int_equal(ft_codec_filter_reply_new(&r, &a), 0);
	assert_int_equal(ft_codec_filter_reply_error(r, "pod ns/p: bad"), 0);
	assert_int_equal(ft_codec_filter_reply_finish(&out, r), 0);
	assert_json(
	    out,
	    "{'NodeNames':[],'Nodes':null,'FailedNodes':{},'FailedAndUnresolvableNodes':{},'Error':'pod ns/p: bad'}");
	free(out);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__priorities_encode(void **state)
{
	ft_extender_args_t a;
	const int scores[] = {10, 0, 7};
	char *out = NULL;

	assert_int_equal(
	    args_decode(&a, "{'Pod':{},'NodeNames':['n1','n2','n3']}"), 0);
	assert_int_equal(ft_codec_priorities_encode(&out, &a, scores), 0);
	assert_json(
	    out,
	    "[{'Host':'n1','Score':10},{'Host':'n2','Score':0},{'Host':'n3','Score':7}]");
	/* Scores are JSON integers. */
	assert_null(strchr(out, '.'));
	free(out);
	ft_codec_extender_args_dispose(&a);

	assert_int_equal(args_decode(&a, "{'Pod':{},'NodeNames':[]}"), 0);
	assert_int_equal(ft_codec_priorities_encode(&out, &a, scores), 0);
	assert_string_equal(out, "[]");
	free(out);
	ft_codec_extender_args_dispose(&a);
}

static void test_codec__bind_result_encode(void **state)
{
	char *out = NULL;

	assert_int_equal(ft_codec_bind_result_encode(&out, NULL), 0);
	assert_json(out, "{'Error':''}");
	free(out);
	assert_int_equal(ft_codec_bind_result_encode(&out, ""), 0);
	assert_json(out, "{'Error':''}");
	free(out);
	assert_int_equal(ft_codec_bind_result_encode(&out, "node n1: full"), 0);
	assert_json(out, "{'Error':'node n1: full'}");
	free(out);
	/* Quotes and control characters are escaped. */
	assert_int_equal(ft_codec_bind_result_encode(&out, "a \"b\"\n"), 0);
	assert_string_equal(out, "{\"Error\":\"a \\\"b\\\"\\n\"}");
	free(out);
}

/* ---- gangs ------------------------------------------------------------ */

/* The gang of a pod of `json` (single-quoted), decoded with gang keys. */
static void decode_gang_of(ft_pod_t *out, const char *json)
{
	static const char *const keys[] = {
	    "leaderworkerset.sigs.k8s.io/group-key", "volcano.sh/job-name"};
	ft_codec_options_t mine = opts;
	cJSON *pod = ft_test_json(json);

	mine.gang_label_keys = keys;
	mine.n_gang_label_keys = 2;
	if (ft_codec_pod_decode(out, pod, &mine) < 0)
		fail_msg("pod decode: %s", ft_error_last());
	cJSON_Delete(pod);
}

/*
 * A pod's gang, in order: the Workload API's PodGroup, coscheduling's label,
 * then the configured labels; a name that is no DNS subdomain leaves the
 * pod its own unit and says why.
 */
static void test_codec__pod_gang_sources(void **state)
{
	ft_pod_t pod;

	decode_gang_of(
	    &pod,
	    "{'metadata':{'name':'p','uid':'u','labels':{'scheduling.x-k8s.io/pod-group':'cs'}},'spec':{'schedulingGroup':{'podGroupName':'train-a'}}}");
	assert_int_equal(pod.gang_source, FT_GANG_WORKLOAD);
	assert_string_equal(pod.gang, "train-a");
	ft_pod_dispose(&pod);
	decode_gang_of(
	    &pod,
	    "{'metadata':{'name':'p','uid':'u','labels':{'scheduling.x-k8s.io/pod-group':'cs','volcano.sh/job-name':'v'}}}");
	assert_int_equal(pod.gang_source, FT_GANG_COSCHEDULING);
	assert_string_equal(pod.gang, "cs");
	ft_pod_dispose(&pod);
	decode_gang_of(
	    &pod,
	    "{'metadata':{'name':'p','uid':'u','labels':{'volcano.sh/job-name':'v','leaderworkerset.sigs.k8s.io/group-key':'9f0c'}}}");
	assert_int_equal(pod.gang_source, FT_GANG_LABEL);
	assert_string_equal(pod.gang,
			    "leaderworkerset.sigs.k8s.io/group-key=9f0c");
	ft_pod_dispose(&pod);
	decode_gang_of(
	    &pod, "{'metadata':{'name':'p','uid':'u','labels':{'app':'x'}}}");
	assert_int_equal(pod.gang_source, FT_GANG_NONE);
	assert_null(pod.gang);
	assert_null(pod.gang_error);
	ft_pod_dispose(&pod);
	decode_gang_of(
	    &pod,
	    "{'metadata':{'name':'p','uid':'u','labels':{'scheduling.x-k8s.io/pod-group':'Train_A'}}}");
	assert_int_equal(pod.gang_source, FT_GANG_NONE);
	assert_null(pod.gang);
	assert_string_equal(
	    pod.gang_error,
	    "label scheduling.x-k8s.io/pod-group: \"Train_A\" is not a DNS subdomain; the pod is its own unit");
	ft_pod_dispose(&pod);
}

static int decode_group(ft_pod_group_t *out, const char *json)
{
	cJSON *obj = ft_test_json(json);
	int rc = ft_codec_pod_group_decode(out, obj);

	cJSON_Delete(obj);
	return rc;
}

/* Both PodGroup APIs, and every way a PodGroup can be wrong. */
static void test_codec__pod_groups(void **state)
{
	ft_pod_group_t g;

	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.k8s.io/v1alpha2','metadata':{'name':'a','namespace':'t'},'spec':{'schedulingPolicy':{'gang':{'minCount':4}},'disruptionMode':'PodGroup'}}"),
	    0);
	assert_int_equal(g.source, FT_GANG_WORKLOAD);
	assert_string_equal(g.ns, "t");
	assert_int_equal(g.min, 4);
	assert_true(g.whole);
	ft_pod_group_dispose(&g);
	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.k8s.io/v1alpha2','metadata':{'name':'b'},'spec':{'schedulingPolicy':{'basic':{}}}}"),
	    0);
	assert_int_equal(g.min, 0);
	assert_false(g.whole);
	ft_pod_group_dispose(&g);
	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.x-k8s.io/v1alpha1','metadata':{'name':'c'},'spec':{'minMember':3}}"),
	    0);
	assert_int_equal(g.source, FT_GANG_COSCHEDULING);
	assert_int_equal(g.min, 3);
	ft_pod_group_dispose(&g);

	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.x-k8s.io/v1alpha1','metadata':{'name':'c','namespace':'t'},'spec':{'minMember':-1}}"),
	    FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "podgroup t/c (scheduling.x-k8s.io/v1alpha1): spec.minMember: -1 is not a non-negative integer");
	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.x-k8s.io/v1alpha1','metadata':{'name':'c'},'spec':{}}"),
	    FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "podgroup default/c (scheduling.x-k8s.io/v1alpha1): spec.minMember is required");
	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.k8s.io/v1alpha2','metadata':{'name':'a'},'spec':{'schedulingPolicy':{}}}"),
	    FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "podgroup default/a (scheduling.k8s.io/v1alpha2): spec.schedulingPolicy needs gang (with minCount) or basic");
	assert_int_equal(
	    decode_group(
		&g,
		"{'apiVersion':'scheduling.k8s.io/v1alpha2','metadata':{'name':'a'},'spec':{'schedulingPolicy':{'gang':{'minCount':2}},'disruptionMode':'Node'}}"),
	    FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "podgroup default/a (scheduling.k8s.io/v1alpha2): spec.disruptionMode: \"Node\" is neither Pod nor PodGroup");
	assert_int_equal(
	    decode_group(&g,
			 "{'apiVersion':'batch/v1','metadata':{'name':'a'}}"),
	    FT_EINVAL);
	assert_int_equal(
	    decode_group(&g, "{'apiVersion':'scheduling.k8s.io/v1alpha2'}"),
	    FT_EINVAL);
	assert_null(g.name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_codec__quantity_milli),
	    cmocka_unit_test(test_codec__pod_gang_sources),
	    cmocka_unit_test(test_codec__pod_groups),
	    cmocka_unit_test(test_codec__quantity_mib),
	    cmocka_unit_test(test_codec__quantity_bad),
	    cmocka_unit_test(
		test_codec__quantity_rejects_non_kubernetes_syntax),
	    cmocka_unit_test(test_codec__quantity_negative),
	    cmocka_unit_test(test_codec__pod_requests_summed),
	    cmocka_unit_test(test_codec__pod_limits_only),
	    cmocka_unit_test(test_codec__pod_init_containers_max),
	    cmocka_unit_test(test_codec__pod_sidecars_summed),
	    cmocka_unit_test(test_codec__pod_overhead),
	    cmocka_unit_test(test_codec__pod_huge_requests_saturate),
	    cmocka_unit_test(test_codec__pod_gpu_products),
	    cmocka_unit_test(test_codec__pod_guaranteed_pins_integer_cpus),
	    cmocka_unit_test(test_codec__pod_burstable_pins_nothing),
	    cmocka_unit_test(test_codec__pod_overhead_not_pinned),
	    cmocka_unit_test(test_codec__pod_exclusive_cpus_per_container),
	    cmocka_unit_test(test_codec__pod_gpus_and_mig),
	    cmocka_unit_test(test_codec__pod_demand_errors),
	    cmocka_unit_test(test_codec__pod_gpu_fraction),
	    cmocka_unit_test(test_codec__pod_affinity_annotations),
	    cmocka_unit_test(test_codec__pod_allocation_policy),
	    cmocka_unit_test(test_codec__pod_requires),
	    cmocka_unit_test(test_codec__pod_status_fields),
	    cmocka_unit_test(test_codec__pod_priority_out_of_range),
	    cmocka_unit_test(test_codec__pod_request_sums_do_not_wrap),
	    cmocka_unit_test(test_codec__pod_terminal_phases),
	    cmocka_unit_test(test_codec__pod_allocation_annotation),
	    cmocka_unit_test(test_codec__pod_not_a_pod),
	    cmocka_unit_test(test_codec__pod_other_prefix),
	    cmocka_unit_test(test_codec__allocation_encode),
	    cmocka_unit_test(test_codec__allocation_round_trip),
	    cmocka_unit_test(test_codec__allocation_replicas),
	    cmocka_unit_test(test_codec__allocation_decode_minimal_and_bad),
	    cmocka_unit_test(test_codec__allocation_memory_out_of_range),
	    cmocka_unit_test(test_codec__node_decode),
	    cmocka_unit_test(test_codec__node_missing_annotation),
	    cmocka_unit_test(test_codec__node_broken_annotation),
	    cmocka_unit_test(test_codec__node_reuses_topology),
	    cmocka_unit_test(test_codec__node_without_name),
	    cmocka_unit_test(test_codec__args_node_names),
	    cmocka_unit_test(test_codec__args_nodes),
	    cmocka_unit_test(test_codec__args_bad),
	    cmocka_unit_test(test_codec__args_length_bounded),
	    cmocka_unit_test(test_codec__bind_args),
	    cmocka_unit_test(test_codec__filter_reply_names),
	    cmocka_unit_test(test_codec__filter_reply_nodes),
	    cmocka_unit_test(test_codec__filter_reply_error),
	    cmocka_unit_test(test_codec__priorities_encode),
	    cmocka_unit_test(test_codec__bind_result_encode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
