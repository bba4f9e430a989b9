/*
 * The state's DRA side: ResourceSlices and ResourceClaims from the watch
 * make a node a DRA node, its claims hold its GPUs (one holding per claim,
 * whoever uses it), its pods hold only their CPUs and memory, and the model
 * rebuilt from the same objects in any order is the same model. The objects
 * are the published-shape fixtures of test/fixtures/dra/.
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

#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/state.h>

#include "support.h"

static const ft_codec_options_t opts = {.annotation_prefix = "flextopo.io",
					.gpu_resource = "nvidia.com/gpu",
					.mig_resource_prefix =
					    "nvidia.com/mig-",
					.default_mode = FT_MODE_GUARANTEED,
					.dra_driver = "gpu.nvidia.com"};

#define NODE "dra-a100-0"

static cJSON *fixture(const char *rel)
{
	char *text = ft_test_read_fixture(rel, NULL);
	cJSON *root = text ? cJSON_Parse(text) : NULL;

	free(text);
	if (!root)
		fail_msg("%s: missing or not JSON", rel);
	return root;
}

/* The item of List fixture `rel` of `kind` named `name`; owned by `root`. */
static const cJSON *item(const cJSON *root, const char *kind, const char *name)
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
	const cJSON *it;

	if (!items)
		return root;
	cJSON_ArrayForEach (it, items) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "kind");
		const cJSON *meta =
		    cJSON_GetObjectItemCaseSensitive(it, "metadata");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(meta, "name");

		if (!strcmp(k->valuestring, kind) &&
		    !strcmp(n->valuestring, name))
			return it;
	}
	fail_msg("no %s %s", kind, name);
	return NULL;
}

/* Node dra-a100-0 with api/examples/a100-8x.json as its topology and
 * `gpus` device-plugin GPUs allocatable. */
static cJSON *node_object(unsigned gpus)
{
	char path[512], *topo, count[16];
	cJSON *node = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
	cJSON *status = cJSON_AddObjectToObject(node, "status");

	snprintf(path, sizeof(path), "%s/api/examples/a100-8x.json",
		 FT_SOURCE_DIR);
	topo = ft_test_read_file(path, NULL);
	assert_non_null(topo);
	cJSON_AddStringToObject(meta, "name", NODE);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
				"flextopo.io/topology", topo);
	free(topo);
	snprintf(count, sizeof(count), "%u", gpus);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(status, "allocatable"),
				"nvidia.com/gpu", count);
	return node;
}

static void apply_node(ft_state_t *s, unsigned gpus)
{
	cJSON *node = node_object(gpus);

	ft_state_apply_node(s, node);
	cJSON_Delete(node);
}

typedef enum { SLICE, CLAIM, POD } kind_t;

typedef struct {
	kind_t kind;
	const char *file;
	const char *name;
} object_t;

/* Apply fixture object `o` to `s` as a watch event: ADDED/MODIFIED, or
 * DELETED when `gone`. */
static void event(ft_state_t *s, const object_t *o, bool gone)
{
	static const char *const kinds[] = {"ResourceSlice", "ResourceClaim",
					    "Pod"};
	cJSON *root = fixture(o->file);
	const cJSON *obj = item(root, kinds[o->kind], o->name);

	if (o->kind == SLICE)
		(gone ? ft_state_delete_slice : ft_state_apply_slice)(s, obj);
	else if (o->kind == CLAIM)
		(gone ? ft_state_delete_claim : ft_state_apply_claim)(s, obj);
	else
		(gone ? ft_state_delete_pod : ft_state_apply_pod)(s, obj);
	cJSON_Delete(root);
}

static void apply(ft_state_t *s, const object_t *o)
{
	event(s, o, false);
}

static void remove_object(ft_state_t *s, const object_t *o)
{
	event(s, o, true);
}

static const object_t slice_a100 = {SLICE, "dra/resourceslice-a100-8x.json",
				    "00000-gpu.nvidia.com-dra-a100-0-x7k9q"};
static const object_t claim_trainer = {CLAIM, "dra/claim-template-pod.json",
				       "trainer-0-gpus-m4v8t"};
static const object_t pod_trainer = {POD, "dra/claim-template-pod.json",
				     "trainer-0"};
static const object_t claim_shared = {CLAIM, "dra/claim-shared.json",
				      "shared-a100"};
static const object_t pod_infer_a = {POD, "dra/claim-shared.json", "infer-a"};
static const object_t pod_infer_b = {POD, "dra/claim-shared.json", "infer-b"};
static const object_t claim_unreserved = {CLAIM, "dra/claim-unreserved.json",
					  "prealloc-a100"};

/* A state with node dra-a100-0 (`gpus` device-plugin GPUs allocatable)
 * and, when `sliced`, its ResourceSlice. */
static ft_state_t *start(unsigned gpus, bool sliced)
{
	ft_state_t *s = NULL;

	assert_int_equal(ft_state_new(&s, &opts), 0);
	apply_node(s, gpus);
	if (sliced)
		apply(s, &slice_a100);
	return s;
}

/* The node's model in a fresh snapshot (a reference the caller drops). */
static ft_node_t *model(ft_state_t *s)
{
	ft_snapshot_t *snap = ft_state_snapshot(s);
	const ft_node_t *n = snap ? ft_snapshot_find(snap, NODE) : NULL;
	ft_node_t *out = n ? ft_node_ref((ft_node_t *)n) : NULL;

	ft_snapshot_unref(snap);
	return out;
}

static unsigned claim_holdings(const ft_node_t *n)
{
	unsigned count = 0;

	for (unsigned i = 0; i < n->n_holdings; i++)
		count += n->holdings[i].claim;
	return count;
}

static void test_state_dra__claims_hold_gpus_pods_hold_cpus(void **state)
{
	ft_state_t *s = start(0, false);
	ft_node_t *n;

	(void)state;
	n = model(s);
	assert_false(n->dra);
	assert_int_equal(n->gpus_used, 0);
	ft_node_unref(n);

	apply(s, &slice_a100);
	n = model(s);
	assert_true(n->dra);
	assert_null(n->dra_error);
	assert_false(n->dra_double_published);
	assert_int_equal(n->gpus_used, 0);
	ft_node_unref(n);

	/* The template claim holds GPUs 0 and 1; its pod adds no GPU. */
	apply(s, &claim_trainer);
	apply(s, &pod_trainer);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x3);
	assert_int_equal(n->unknown_gpus, 0);
	assert_int_equal(n->conflicts, 0);
	assert_int_equal(claim_holdings(n), 1);
	ft_node_unref(n);

	/* A claim shared by two pods is one holding, no conflict. */
	apply(s, &claim_shared);
	apply(s, &pod_infer_a);
	apply(s, &pod_infer_b);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x7);
	assert_int_equal(n->conflicts, 0);
	assert_int_equal(claim_holdings(n), 2);
	ft_node_unref(n);

	/* Allocated but reserved for no pod yet: held all the same. */
	apply(s, &claim_unreserved);
	n = model(s);
	assert_int_equal(claim_holdings(n), 3);
	assert_int_equal(__builtin_popcount(n->gpus_used), 4);
	ft_node_unref(n);

	/* Deleting a claim frees its GPUs; deleting a pod frees none. */
	remove_object(s, &pod_trainer);
	n = model(s);
	assert_int_equal(__builtin_popcount(n->gpus_used), 4);
	ft_node_unref(n);
	remove_object(s, &claim_trainer);
	n = model(s);
	assert_int_equal(n->gpus_used & 0x3, 0);
	assert_int_equal(claim_holdings(n), 2);
	ft_node_unref(n);
	ft_state_free(s);
}

/* The same objects in any order make the same model: what a restarted
 * extender rebuilds from its lists equals what it had. */
static void assert_same_model(const ft_node_t *a, const ft_node_t *b)
{
	assert_int_equal(a->gpus_used, b->gpus_used);
	assert_int_equal(a->unknown_gpus, b->unknown_gpus);
	assert_int_equal(a->conflicts, b->conflicts);
	assert_int_equal(a->dra, b->dra);
	assert_int_equal(a->n_holdings, b->n_holdings);
	assert_int_equal(claim_holdings(a), claim_holdings(b));
	assert_memory_equal(&a->cpus_used, &b->cpus_used, sizeof(a->cpus_used));
	assert_int_equal(a->requested_cpu_millis, b->requested_cpu_millis);
}

static void test_state_dra__any_order_same_model(void **state)
{
	const object_t objects[] = {slice_a100,	     claim_trainer, pod_trainer,
				    claim_shared,    pod_infer_a,   pod_infer_b,
				    claim_unreserved};
	const unsigned n = sizeof(objects) / sizeof(objects[0]);
	ft_state_t *first = NULL, *s = NULL;
	ft_node_t *want, *got;
	unsigned order[sizeof(objects) / sizeof(objects[0])];

	(void)state;
	assert_int_equal(ft_state_new(&first, &opts), 0);
	apply_node(first, 0);
	for (unsigned i = 0; i < n; i++)
		apply(first, &objects[i]);
	want = model(first);
	srand(7);
	for (unsigned round = 0; round < 20; round++) {
		for (unsigned i = 0; i < n; i++)
			order[i] = i;
		for (unsigned i = n - 1; i > 0; i--) {
			unsigned j = (unsigned)rand() % (i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		assert_int_equal(ft_state_new(&s, &opts), 0);
		/* The node comes at any point, the claims before their
		 * slices or after. */
		for (unsigned i = 0; i < n; i++) {
			if (i == round % n)
				apply_node(s, 0);
			apply(s, &objects[order[i]]);
		}
		got = model(s);
		assert_non_null(got);
		assert_same_model(want, got);
		ft_node_unref(got);
		ft_state_free(s);
	}
	ft_node_unref(want);
	ft_state_free(first);
}

/* Until its slices come, a claim's devices are GPUs of unknown placement:
 * held, never handed out. */
static void test_state_dra__claim_before_slices(void **state)
{
	ft_state_t *s = start(0, false);
	ft_node_t *n;

	(void)state;
	apply(s, &claim_trainer);
	n = model(s);
	assert_true(n->dra);
	assert_int_equal(n->gpus_used, 0);
	assert_int_equal(n->unknown_gpus, 2);
	ft_node_unref(n);
	apply(s, &slice_a100);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x3);
	assert_int_equal(n->unknown_gpus, 0);
	ft_node_unref(n);
	/* The slice goes: the claim still holds its two GPUs. */
	remove_object(s, &slice_a100);
	n = model(s);
	assert_int_equal(n->unknown_gpus, 2);
	ft_node_unref(n);
	ft_state_free(s);
}

static void test_state_dra__double_published(void **state)
{
	ft_state_t *s = start(8, true);
	ft_node_t *n;

	(void)state;
	n = model(s);
	assert_true(n->dra);
	assert_true(n->dra_double_published);
	ft_node_unref(n);
	ft_state_free(s);
}

/* A relist that no longer shows a claim drops it, as for pods. */
static void test_state_dra__relist_sweeps_claims_and_slices(void **state)
{
	ft_state_t *s = start(0, true);
	ft_node_t *n;

	(void)state;
	apply(s, &claim_trainer);
	apply(s, &claim_shared);
	ft_state_replace_begin(s, FT_KIND_CLAIM);
	apply(s, &claim_shared);
	ft_state_replace_end(s, FT_KIND_CLAIM);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x4);
	assert_int_equal(claim_holdings(n), 1);
	ft_node_unref(n);
	ft_state_replace_begin(s, FT_KIND_SLICE);
	ft_state_replace_end(s, FT_KIND_SLICE);
	n = model(s);
	/* Its claim's device is no longer placed: held, place unknown. */
	assert_true(n->dra);
	assert_int_equal(n->gpus_used, 0);
	assert_int_equal(n->unknown_gpus, 1);
	ft_node_unref(n);
	ft_state_free(s);
}

/* A claim object that cannot be read is skipped with a warning naming it;
 * what the state held stays. */
static void test_state_dra__bad_claim_skipped(void **state)
{
	ft_state_t *s = start(0, true);
	cJSON *bad = cJSON_Parse("{\"metadata\":{\"name\":\"x\"},\"status\":"
				 "{\"allocation\":7}}");
	ft_node_t *n;

	(void)state;
	apply(s, &claim_trainer);
	ft_state_apply_claim(s, bad);
	ft_state_apply_slice(s, bad);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x3);
	ft_node_unref(n);
	cJSON_Delete(bad);
	ft_state_free(s);
}

/* What a pod's unallocated claims ask, by their DeviceClass. */
static void test_state_dra__claim_gpus_by_class(void **state)
{
	ft_state_t *s = start(0, true);
	cJSON *root = fixture("dra/claim-with-constraint.json");
	cJSON *claim =
	    cJSON_Duplicate(item(root, "ResourceClaim", "numa-pair"), true);
	cJSON *gpu_class = fixture("dra/deviceclass-gpu.json");
	cJSON *status = cJSON_DetachItemFromObject(claim, "status");
	ft_pod_t pod = {.ns = "ml"};
	char *names[] = {"numa-pair", "not-made-yet"};

	(void)state;
	pod.n_claims = 2;
	pod.claims = names;
	ft_state_apply_claim(s, claim);
	/* The class is not known yet: nothing is counted. */
	assert_int_equal(ft_state_claim_gpus(s, &pod), 0);
	ft_state_apply_class(s, gpu_class);
	assert_int_equal(ft_state_claim_gpus(s, &pod), 2);
	/* Allocated, the claim holds its GPUs: the pod asks none more. */
	cJSON_AddItemToObject(claim, "status", status);
	ft_state_apply_claim(s, claim);
	assert_int_equal(ft_state_claim_gpus(s, &pod), 0);
	pod.ns = "elsewhere";
	assert_int_equal(ft_state_claim_gpus(s, &pod), 0);
	ft_state_delete_class(s, gpu_class);
	cJSON_Delete(gpu_class);
	cJSON_Delete(claim);
	cJSON_Delete(root);
	ft_state_free(s);
}

/*
 * Events that change nothing the model reads publish no new snapshot: a
 * claim whose reservedFor changes, a slice applied again. A slice of a new
 * generation with the same devices keeps what the claims hold; one whose
 * device changed moves the claim's GPU.
 */
static void test_state_dra__events_that_change_nothing(void **state)
{
	ft_state_t *s = start(0, true);
	cJSON *root = fixture("dra/claim-template-pod.json");
	cJSON *claim = cJSON_Duplicate(
	    item(root, "ResourceClaim", "trainer-0-gpus-m4v8t"), true);
	cJSON *slice_root = fixture(slice_a100.file), *slice;
	cJSON *dev;
	ft_state_stats_t st;
	uint64_t generation;
	ft_node_t *n;

	(void)state;
	ft_state_apply_claim(s, claim);
	ft_state_stats(s, &st);
	generation = st.generation;
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(claim, "status"),
				  "reservedFor", cJSON_CreateArray());
	ft_state_apply_claim(s, claim);
	apply(s, &slice_a100);
	ft_state_stats(s, &st);
	assert_int_equal(st.generation, generation);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x3);
	ft_node_unref(n);

	/* A new generation of the same devices. */
	slice = (cJSON *)item(slice_root, "ResourceSlice", slice_a100.name);
	cJSON_ReplaceItemInObject(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(slice, "spec"), "pool"),
	    "generation", cJSON_CreateNumber(7));
	ft_state_apply_slice(s, slice);
	n = model(s);
	assert_int_equal(n->gpus_used, 0x3);
	assert_null(n->dra_error);
	ft_node_unref(n);
	/* gpu-1 now names GPU 5's uuid: the claim holds GPUs 0 and 5, and
	 * the slice disagrees with the topology (two devices, one GPU). */
	cJSON_ArrayForEach (
	    dev, cJSON_GetObjectItem(cJSON_GetObjectItem(slice, "spec"),
				     "devices")) {
		if (!strcmp(cJSON_GetObjectItem(dev, "name")->valuestring,
			    "gpu-1")) {
			cJSON *gpu5 = NULL, *d2;
			cJSON_ArrayForEach (
			    d2, cJSON_GetObjectItem(
				    cJSON_GetObjectItem(slice, "spec"),
				    "devices")) {
				if (!strcmp(cJSON_GetObjectItem(d2, "name")
						->valuestring,
					    "gpu-5"))
					gpu5 = d2;
			}
			cJSON_ReplaceItemInObject(
			    cJSON_GetObjectItem(dev, "attributes"), "uuid",
			    cJSON_Duplicate(
				cJSON_GetObjectItem(
				    cJSON_GetObjectItem(gpu5, "attributes"),
				    "uuid"),
				true));
			cJSON_ReplaceItemInObject(
			    cJSON_GetObjectItem(dev, "attributes"),
			    "resource.kubernetes.io/pciBusID",
			    cJSON_Duplicate(
				cJSON_GetObjectItem(
				    cJSON_GetObjectItem(gpu5, "attributes"),
				    "resource.kubernetes.io/pciBusID"),
				true));
		}
	}
	cJSON_ReplaceItemInObject(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(slice, "spec"), "pool"),
	    "generation", cJSON_CreateNumber(8));
	ft_state_apply_slice(s, slice);
	n = model(s);
	assert_int_equal(n->gpus_used & 0x21, 0x21);
	ft_node_unref(n);
	cJSON_Delete(slice_root);
	cJSON_Delete(claim);
	cJSON_Delete(root);
	ft_state_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state_dra__claims_hold_gpus_pods_hold_cpus),
	    cmocka_unit_test(test_state_dra__any_order_same_model),
	    cmocka_unit_test(test_state_dra__claim_before_slices),
	    cmocka_unit_test(test_state_dra__double_published),
	    cmocka_unit_test(test_state_dra__relist_sweeps_claims_and_slices),
	    cmocka_unit_test(test_state_dra__bad_claim_skipped),
	    cmocka_unit_test(test_state_dra__claim_gpus_by_class),
	    cmocka_unit_test(test_state_dra__events_that_change_nothing),
	};

	ft_log_set_level(FT_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
