/*
 * The admission webhook's wire (codec.h): AdmissionReview requests decoded,
 * the JSONPatch that adds a matchAttribute constraint to a device claim,
 * and the reply with the patch base64-encoded. The claims are the published
 * shapes of test/fixtures/dra/.
 */
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

#include "kube/base64.h"
#include "support.h"

#define NUMA "resource.kubernetes.io/numaNode"

static const char *const gpu_classes[2] = {"gpu.nvidia.com", "mig.nvidia.com"};

/* A review of `object` (a JSON text with single quotes). */
static char *review(const char *kind, const char *object)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *req = cJSON_AddObjectToObject(root, "request");
	cJSON *k = cJSON_AddObjectToObject(req, "kind");
	char *text;

	cJSON_AddStringToObject(root, "apiVersion", "admission.k8s.io/v1");
	cJSON_AddStringToObject(root, "kind", "AdmissionReview");
	cJSON_AddStringToObject(req, "uid", "705ab4f5-6393-11e8-b7cc");
	cJSON_AddStringToObject(k, "group", "resource.k8s.io");
	cJSON_AddStringToObject(k, "version", "v1");
	cJSON_AddStringToObject(k, "kind", kind);
	cJSON_AddStringToObject(req, "namespace", "ml");
	cJSON_AddStringToObject(req, "operation", "CREATE");
	cJSON_AddItemToObject(req, "object", ft_test_json(object));
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return text;
}

static void patch_of(char **out, const char *devices, const char *path)
{
	cJSON *d = ft_test_json(devices);

	assert_int_equal(
	    ft_codec_claim_constraint_patch(out, d, path, NUMA, gpu_classes, 2),
	    0);
	cJSON_Delete(d);
}

static void test_admission__decodes_a_claim_review(void **state)
{
	char *body = review("ResourceClaim",
			    "{'metadata':{'name':'c'},'spec':{'devices':{}}}");
	ft_admission_t a;

	assert_int_equal(ft_codec_admission_decode(&a, body, strlen(body)), 0);
	assert_string_equal(a.uid, "705ab4f5-6393-11e8-b7cc");
	assert_string_equal(a.kind, "ResourceClaim");
	assert_string_equal(a.ns, "ml");
	assert_string_equal(a.operation, "CREATE");
	assert_true(cJSON_IsObject(a.object));
	ft_admission_dispose(&a);
	free(body);
	assert_int_equal(ft_codec_admission_decode(&a, "{\"request\":{}}", 14),
			 FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "AdmissionReview: request.uid, request.kind.kind and request.object are required");
	assert_int_equal(ft_codec_admission_decode(&a, "nope", 4), FT_EINVAL);
}

/* A uid that is not text cannot be echoed byte for byte: refused. */
static void test_admission__uid_must_be_text(void **state)
{
	static const char body[] =
	    "{\"request\":{\"uid\":\"\xff\x01\",\"kind\":{\"kind\":\"Pod\"},"
	    "\"object\":{}}}";
	ft_admission_t a;

	(void)state;
	assert_int_equal(ft_codec_admission_decode(&a, body, sizeof(body) - 1),
			 FT_EINVAL);
	assert_string_equal(ft_error_last(),
			    "AdmissionReview: request.uid is not UTF-8 text");
	assert_null(a.root);
}

/* No constraints yet: the list is added, over the GPU requests only. */
static void test_admission__adds_the_constraint_list(void **state)
{
	char *patch = NULL;

	patch_of(
	    &patch,
	    "{'requests':[{'name':'gpus','exactly':{'deviceClassName':'gpu.nvidia.com','count':2}},{'name':'nic','exactly':{'deviceClassName':'rdma.example.com'}}]}",
	    "/spec/devices");
	assert_non_null(patch);
	assert_string_equal(
	    patch,
	    "[{\"op\":\"add\",\"value\":[{\"requests\":[\"gpus\"],\"matchAttribute\":\"" NUMA
	    "\"}],\"path\":\"/spec/devices/constraints\"}]");
	free(patch);
}

/* Constraints there already: appended, unless one already covers it. */
static void test_admission__appends_or_leaves_alone(void **state)
{
	char *patch = NULL;

	patch_of(
	    &patch,
	    "{'requests':[{'name':'a','exactly':{'deviceClassName':'gpu.nvidia.com'}},{'name':'b','firstAvailable':[{'deviceClassName':'mig.nvidia.com'},{'deviceClassName':'gpu.nvidia.com'}]}],'constraints':[{'requests':['a'],'matchAttribute':'gpu.nvidia.com/productName'}]}",
	    "/spec/spec/devices");
	assert_string_equal(
	    patch,
	    "[{\"op\":\"add\",\"value\":{\"requests\":[\"a\",\"b\"],\"matchAttribute\":\"" NUMA
	    "\"},\"path\":\"/spec/spec/devices/constraints/-\"}]");
	free(patch);
	patch_of(
	    &patch,
	    "{'requests':[{'name':'a','exactly':{'deviceClassName':'gpu.nvidia.com'}}],'constraints':[{'matchAttribute':'" NUMA
	    "'}]}",
	    "/spec/devices");
	assert_null(patch);
	patch_of(
	    &patch,
	    "{'requests':[{'name':'x','exactly':{'deviceClassName':'other'}}]}",
	    "/spec/devices");
	assert_null(patch);
}

/* The claim of the published template, as the controller creates it. */
static void test_admission__published_claim(void **state)
{
	char *text = ft_test_read_fixture("dra/claim-template-pod.json", NULL);
	cJSON *list = cJSON_Parse(text);
	const cJSON *claim =
	    cJSON_GetArrayItem(cJSON_GetObjectItem(list, "items"), 1);
	const cJSON *devices =
	    cJSON_GetObjectItem(cJSON_GetObjectItem(claim, "spec"), "devices");
	char *patch = NULL;

	assert_int_equal(ft_codec_claim_constraint_patch(&patch, devices,
							 "/spec/devices", NUMA,
							 gpu_classes, 2),
			 0);
	assert_non_null(strstr(patch, "\"requests\":[\"gpus\"]"));
	free(patch);
	cJSON_Delete(list);
	free(text);
}

static void test_admission__reply_carries_the_patch(void **state)
{
	const char *patch = "[{\"op\":\"add\",\"path\":\"/x\",\"value\":1}]";
	cJSON *root;
	const cJSON *resp;
	char *out = NULL, *decoded = NULL;
	const char *b64;

	assert_int_equal(
	    ft_codec_admission_reply(&out, "u-1", patch, "numa: constrained"),
	    0);
	root = cJSON_Parse(out);
	resp = cJSON_GetObjectItem(root, "response");
	assert_string_equal(
	    cJSON_GetObjectItem(root, "apiVersion")->valuestring,
	    "admission.k8s.io/v1");
	assert_string_equal(cJSON_GetObjectItem(resp, "uid")->valuestring,
			    "u-1");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
	assert_string_equal(cJSON_GetObjectItem(resp, "patchType")->valuestring,
			    "JSONPatch");
	b64 = cJSON_GetObjectItem(resp, "patch")->valuestring;
	assert_int_equal(
	    ft_kube_base64_decode(&decoded, NULL, b64, strlen(b64)), 0);
	assert_string_equal(decoded, patch);
	assert_string_equal(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "warnings"), 0)
		->valuestring,
	    "numa: constrained");
	free(decoded);
	free(out);
	cJSON_Delete(root);
	/* Without a patch: allowed, nothing else. */
	assert_int_equal(ft_codec_admission_reply(&out, "u-2", NULL, NULL), 0);
	assert_string_equal(
	    out,
	    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"u-2\",\"allowed\":true}}");
	free(out);
}

static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED};

typedef struct {
	char *patch;   /* decoded JSONPatch, or NULL */
	char *warning; /* or NULL */
} answer_t;

/* Review `object` of `kind` through ft_codec_admission_mutate. */
static answer_t mutate(const char *kind, const char *operation,
		       const char *object)
{
	char *body = review(kind, object), *out = NULL;
	const cJSON *resp, *w;
	answer_t a = {NULL, NULL};
	ft_admission_t adm;
	cJSON *root;

	assert_int_equal(ft_codec_admission_decode(&adm, body, strlen(body)),
			 0);
	adm.operation = operation;
	assert_int_equal(
	    ft_codec_admission_mutate(&out, &adm, &opts, gpu_classes, 2), 0);
	root = cJSON_Parse(out);
	resp = cJSON_GetObjectItem(root, "response");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
	assert_string_equal(cJSON_GetObjectItem(resp, "uid")->valuestring,
			    "705ab4f5-6393-11e8-b7cc");
	if (cJSON_GetObjectItem(resp, "patch")) {
		const char *b64 =
		    cJSON_GetObjectItem(resp, "patch")->valuestring;
		assert_int_equal(
		    ft_kube_base64_decode(&a.patch, NULL, b64, strlen(b64)), 0);
	}
	if ((w = cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "warnings"), 0)))
		a.warning = strdup(w->valuestring);
	cJSON_Delete(root);
	ft_admission_dispose(&adm);
	free(out);
	free(body);
	return a;
}

static void answer_free(answer_t *a)
{
	free(a->patch);
	free(a->warning);
}

#define GPU_REQUEST                                                            \
	"'requests':[{'name':'gpus','exactly':{'deviceClassName':'gpu.nvidia.com','count':2}}]"

/*
 * A template whose claims carry a guaranteed numa affinity gets the
 * numaNode constraint at /spec/spec/devices; a claim at pcie-switch the
 * pcieRoot one, with a warning that a root is coarser than a switch.
 */
static void test_admission__affinity_becomes_a_constraint(void **state)
{
	answer_t a = mutate(
	    "ResourceClaimTemplate", "CREATE",
	    "{'metadata':{'name':'two'},'spec':{'metadata':{'annotations':{'flextopo.io/affinity':'numa'}},'spec':{'devices':{" GPU_REQUEST
	    "}}}}");

	assert_string_equal(
	    a.patch,
	    "[{\"op\":\"add\",\"value\":[{\"requests\":[\"gpus\"],\"matchAttribute\":\"resource.kubernetes.io/numaNode\"}],\"path\":\"/spec/spec/devices/constraints\"}]");
	assert_null(a.warning);
	answer_free(&a);
	a = mutate(
	    "ResourceClaim", "CREATE",
	    "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'pcie-switch','flextopo.io/affinity-mode':'guaranteed'}},'spec':{'devices':{" GPU_REQUEST
	    "}}}");
	assert_non_null(strstr(a.patch, "resource.kubernetes.io/pcieRoot"));
	assert_non_null(strstr(a.patch, "\"/spec/devices/constraints\""));
	assert_non_null(strstr(a.warning, "one PCIe root"));
	answer_free(&a);
}

/* What DRA cannot be told: left alone, and said so where it matters. */
static void test_admission__what_is_left_alone(void **state)
{
	static const struct {
		const char *kind, *operation, *object, *warning;
	} cases[] = {
	    {"ResourceClaim", "CREATE",
	     "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'nvlink'}},'spec':{'devices':{" GPU_REQUEST
	     "}}}",
	     "NVLink has no standard device attribute"},
	    {"ResourceClaim", "CREATE",
	     "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'numa','flextopo.io/affinity-mode':'best-effort'}},'spec':{'devices':{" GPU_REQUEST
	     "}}}",
	     NULL},
	    {"ResourceClaim", "CREATE",
	     "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'same-rack'}},'spec':{'devices':{" GPU_REQUEST
	     "}}}",
	     "\"same-rack\" is not one of nvlink"},
	    {"ResourceClaim", "CREATE",
	     "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'numa','resource.kubernetes.io/extended-resource-claim':'true'}},'spec':{'devices':{" GPU_REQUEST
	     "}}}",
	     "allocated this extended-resource claim before creating it"},
	    {"ResourceClaim", "UPDATE",
	     "{'metadata':{'name':'c','annotations':{'flextopo.io/affinity':'numa'}},'spec':{'devices':{" GPU_REQUEST
	     "}}}",
	     NULL},
	    {"ResourceClaim", "CREATE",
	     "{'metadata':{'name':'c'},'spec':{'devices':{" GPU_REQUEST "}}}",
	     NULL},
	    {"Pod", "CREATE",
	     "{'metadata':{'name':'p','annotations':{'flextopo.io/affinity':'numa'}},'spec':{}}",
	     NULL},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		answer_t a =
		    mutate(cases[i].kind, cases[i].operation, cases[i].object);
		if (a.patch)
			fail_msg("case %u: patched %s", i, a.patch);
		if (cases[i].warning
			? !a.warning || !strstr(a.warning, cases[i].warning)
			: a.warning != NULL)
			fail_msg("case %u: warning %s", i,
				 a.warning ? a.warning : "(none)");
		answer_free(&a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_admission__decodes_a_claim_review),
	    cmocka_unit_test(test_admission__uid_must_be_text),
	    cmocka_unit_test(test_admission__adds_the_constraint_list),
	    cmocka_unit_test(test_admission__appends_or_leaves_alone),
	    cmocka_unit_test(test_admission__published_claim),
	    cmocka_unit_test(test_admission__reply_carries_the_patch),
	    cmocka_unit_test(test_admission__affinity_becomes_a_constraint),
	    cmocka_unit_test(test_admission__what_is_left_alone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
