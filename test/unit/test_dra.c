/*
 * DRA: ResourceSlices and ResourceClaims decoded from the published shapes
 * of test/fixtures/dra/ (NVIDIA's gpu.nvidia.com driver, kube-scheduler
 * v1.36.3), matched to the topologies of api/examples/ whose GPUs they
 * publish, and what claims hold there.
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
#include <flextopo/dra.h>
#include <flextopo/error.h>

#include "support.h"

#define A100_GPU0 "GPU-c4f82fda-f11d-4492-a176-950eab898aad"

static cJSON *fixture_json(const char *rel)
{
	char *text = ft_test_read_fixture(rel, NULL);
	cJSON *root = text ? cJSON_Parse(text) : NULL;

	if (!root)
		fail_msg("%s: missing or not JSON", rel);
	free(text);
	return root;
}

static ft_topology_t *example(const char *name)
{
	char path[512], *text;
	ft_topology_t *t = NULL;

	snprintf(path, sizeof(path), "%s/api/examples/%s", FT_SOURCE_DIR, name);
	text = ft_test_read_file(path, NULL);
	assert_non_null(text);
	if (ft_codec_topology_parse(&t, text, strlen(text)) < 0)
		fail_msg("%s: %s", name, ft_error_last());
	free(text);
	return t;
}

/* The first item of a List fixture of `kind` named `name` (any: NULL). */
static const cJSON *item(const cJSON *list, const char *kind, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, cJSON_GetObjectItem(list, "items")) {
		const cJSON *meta = cJSON_GetObjectItem(it, "metadata");
		if (strcmp(cJSON_GetObjectItem(it, "kind")->valuestring,
			   kind) == 0 &&
		    (!name ||
		     strcmp(cJSON_GetObjectItem(meta, "name")->valuestring,
			    name) == 0))
			return it;
	}
	fail_msg("no %s %s", kind, name ? name : "");
	return NULL;
}

static void slice_from(ft_dra_slice_t *out, const char *rel)
{
	cJSON *root = fixture_json(rel);
	const cJSON *obj = root;

	if (strcmp(cJSON_GetObjectItem(root, "kind")->valuestring, "List") == 0)
		obj = item(root, "ResourceSlice", NULL);
	if (ft_codec_dra_slice_decode(out, obj) < 0)
		fail_msg("%s: %s", rel, ft_error_last());
	cJSON_Delete(root);
}

static void claim_from(ft_dra_claim_t *out, const char *rel, const char *name)
{
	cJSON *root = fixture_json(rel);
	const cJSON *obj = root;

	if (strcmp(cJSON_GetObjectItem(root, "kind")->valuestring, "List") == 0)
		obj = item(root, "ResourceClaim", name);
	if (ft_codec_dra_claim_decode(out, obj) < 0)
		fail_msg("%s: %s", rel, ft_error_last());
	cJSON_Delete(root);
}

static void test_dra__slice_decodes_nvidia_gpus(void **state)
{
	ft_dra_slice_t s;

	slice_from(&s, "dra/resourceslice-a100-8x.json");
	assert_string_equal(s.driver, FT_DRA_DRIVER_NVIDIA);
	assert_string_equal(s.pool, "dra-a100-0");
	assert_string_equal(s.node, "dra-a100-0");
	assert_int_equal(s.generation, 1);
	assert_int_equal(s.slice_count, 1);
	assert_int_equal(s.n_devices, 8);
	assert_string_equal(s.devices[0].name, "gpu-0");
	assert_int_equal(s.devices[0].kind, FT_DRA_GPU);
	assert_string_equal(s.devices[0].uuid, A100_GPU0);
	assert_string_equal(s.devices[0].pci_bus_id, "0000:07:00.0");
	assert_string_equal(s.devices[0].pcie_root, "pci0000:00");
	assert_int_equal(s.devices[0].numa_node, 0);
	assert_int_equal(s.devices[7].numa_node, 1);
	assert_null(s.devices[0].parent_uuid);
	assert_false(s.devices[0].multiple);
	ft_dra_slice_dispose(&s);
}

static void test_dra__a100_slice_matches_its_topology(void **state)
{
	ft_topology_t *t = example("a100-8x.json");
	ft_dra_slice_t s;
	const ft_dra_slice_t *list[1] = {&s};
	ft_dra_view_t v;

	slice_from(&s, "dra/resourceslice-a100-8x.json");
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_true(v.dra);
	assert_false(v.double_published);
	assert_string_equal(v.error, "");
	assert_int_equal(v.n_units, 8);
	for (unsigned i = 0; i < 8; i++) {
		assert_int_equal(v.units[i].kind, FT_DRA_GPU);
		assert_true(v.units[i].gpu >= 0);
		assert_string_equal(t->gpus[v.units[i].gpu].uuid,
				    s.devices[i].uuid);
	}
	/* Another node's view holds none of it. */
	ft_dra_view_build(&v, "other", t, list, 1, FT_DRA_DRIVER_NVIDIA, 0);
	assert_false(v.dra);
	assert_int_equal(v.n_units, 0);
	/* The device plugin advertising GPUs too: published twice. */
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  8);
	assert_true(v.double_published);
	ft_dra_slice_dispose(&s);
	ft_topology_unref(t);
}

/* A slice that contradicts the annotation is a node-level error. */
static void test_dra__disagreements_are_errors(void **state)
{
	ft_topology_t *t = example("a100-8x.json");
	ft_dra_slice_t s;
	const ft_dra_slice_t *list[1] = {&s};
	ft_dra_view_t v;

	slice_from(&s, "dra/resourceslice-a100-8x.json");
	s.devices[2].numa_node = 1;
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_string_equal(
	    v.error,
	    "device gpu-2: resource.kubernetes.io/numaNode 1, the topology annotation puts its GPU in NUMA node 0");
	s.devices[2].numa_node = 0;
	free(s.devices[5].uuid);
	s.devices[5].uuid = strdup("GPU-not-here");
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_string_equal(
	    v.error,
	    "device gpu-5: uuid GPU-not-here is no GPU of the topology annotation");
	/* The others still count. */
	assert_int_equal(v.n_units, 8);
	assert_int_equal(v.units[5].gpu, -1);
	assert_true(v.units[4].gpu >= 0);
	free(s.devices[5].uuid);
	s.devices[5].uuid = strdup(t->gpus[5].uuid);
	/* GPUs 0 and 1 share a PCIe switch: one root complex. */
	free(s.devices[1].pcie_root);
	s.devices[1].pcie_root = strdup("pci0000:80");
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_string_equal(
	    v.error,
	    "devices gpu-0 and gpu-1: one PCIe switch in the topology annotation, PCIe roots pci0000:00 and pci0000:80");
	/* A bus id the annotation knows must agree. */
	free(s.devices[1].pcie_root);
	s.devices[1].pcie_root = strdup("pci0000:00");
	assert_int_equal(ft_topology_set_gpu_pci_bus_id(t, 0, "0000:99:00.0"),
			 0);
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_string_equal(
	    v.error,
	    "device gpu-0: resource.kubernetes.io/pciBusID 0000:07:00.0, the topology annotation says 0000:99:00.0");
	ft_dra_slice_dispose(&s);
	ft_topology_unref(t);
}

static void test_dra__mig_devices_match_by_parent_and_slices(void **state)
{
	ft_topology_t *t = example("h100-8x-mig.json");
	ft_dra_slice_t s;
	const ft_dra_slice_t *list[1] = {&s};
	ft_dra_view_t v;
	unsigned migs = 0, gpus = 0;

	slice_from(&s, "dra/resourceslice-h100-mig.json");
	ft_dra_view_build(&v, "dra-h100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_string_equal(v.error, "");
	for (unsigned i = 0; i < v.n_units; i++) {
		const ft_dra_unit_t *u = &v.units[i];
		assert_true(u->gpu >= 0);
		if (u->kind == FT_DRA_MIG) {
			const ft_mig_instance_t *m = &t->mig[u->mig];
			assert_int_equal(m->gpu, u->gpu);
			assert_int_equal(m->start, u->device->slice_start);
			assert_int_equal(m->size, u->device->slices);
			migs++;
		} else {
			assert_false(t->gpus[u->gpu].mig_enabled);
			gpus++;
		}
	}
	assert_int_equal(migs, t->n_mig);
	assert_int_equal(gpus, 5);
	ft_dra_slice_dispose(&s);
	ft_topology_unref(t);
}

/* Only the newest generation of a pool counts, and only when complete. */
static void test_dra__newest_complete_generation(void **state)
{
	ft_dra_slice_t a = {
	    .driver = "d", .pool = "p", .generation = 1, .slice_count = 1};
	ft_dra_slice_t b = {
	    .driver = "d", .pool = "p", .generation = 2, .slice_count = 2};
	ft_dra_slice_t c = b;
	ft_dra_slice_t other = {
	    .driver = "d", .pool = "q", .generation = 9, .slice_count = 1};
	const ft_dra_slice_t *two[2] = {&a, &other};
	const ft_dra_slice_t *three[3] = {&a, &b, &other};
	const ft_dra_slice_t *four[4] = {&a, &b, &c, &other};

	assert_true(ft_dra_slice_current(&a, two, 2));
	/* Generation 2 started: 1 is obsolete, 2 incomplete (1 of 2). */
	assert_false(ft_dra_slice_current(&a, three, 3));
	assert_false(ft_dra_slice_current(&b, three, 3));
	assert_true(ft_dra_slice_current(&b, four, 4));
	assert_true(ft_dra_slice_current(&other, four, 4));
}

static void test_dra__template_claim_holds_its_gpus(void **state)
{
	ft_topology_t *t = example("a100-8x.json");
	ft_dra_slice_t s;
	const ft_dra_slice_t *list[1] = {&s};
	ft_dra_claim_t c;
	ft_allocation_t units;
	ft_dra_view_t v;
	unsigned missed;

	slice_from(&s, "dra/resourceslice-a100-8x.json");
	claim_from(&c, "dra/claim-template-pod.json", "trainer-0-gpus-m4v8t");
	assert_true(c.allocated);
	assert_false(c.extended);
	assert_string_equal(c.node, "dra-a100-0");
	assert_string_equal(c.ns, "ml");
	assert_string_equal(c.owner_pod,
			    "5d3f1e2a-7b9c-4d8e-a1f2-3b4c5d6e7f80");
	assert_int_equal(c.n_requests, 1);
	assert_string_equal(c.requests[0].device_class, "gpu.nvidia.com");
	assert_int_equal(c.requests[0].count, 2);
	assert_int_equal(c.n_consumers, 1);
	assert_string_equal(c.consumers[0].name, "trainer-0");
	ft_dra_view_build(&v, "dra-a100-0", t, list, 1, FT_DRA_DRIVER_NVIDIA,
			  0);
	assert_int_equal(
	    ft_dra_claim_units(&units, &missed, &c, &v, FT_DRA_DRIVER_NVIDIA),
	    0);
	assert_int_equal(missed, 0);
	assert_int_equal(units.n_gpus, 2);
	assert_string_equal(units.gpu_uuids[0], t->gpus[0].uuid);
	assert_string_equal(units.gpu_uuids[1], t->gpus[1].uuid);
	ft_allocation_dispose(&units);
	/* An adminAccess result holds nothing; a foreign pool is unmatched. */
	c.results[0].admin_access = true;
	free(c.results[1].pool);
	c.results[1].pool = strdup("elsewhere");
	assert_int_equal(
	    ft_dra_claim_units(&units, &missed, &c, &v, FT_DRA_DRIVER_NVIDIA),
	    0);
	assert_int_equal(missed, 1);
	/* Held all the same, as a GPU no topology places. */
	assert_int_equal(units.n_gpus, 1);
	assert_string_equal(units.gpu_uuids[0],
			    "dra:gpu.nvidia.com/elsewhere/gpu-1");
	ft_allocation_dispose(&units);
	ft_dra_claim_dispose(&c);
	ft_dra_slice_dispose(&s);
	ft_topology_unref(t);
}

static void test_dra__extended_resource_claim(void **state)
{
	ft_dra_claim_t c;

	claim_from(&c, "dra/claim-extended-resource.json", NULL);
	assert_true(c.extended);
	assert_string_equal(c.requests[0].name, "container-0-request-2");
	assert_int_equal(c.n_results, 1);
	assert_string_equal(c.results[0].device, "gpu-3");
	assert_int_equal(c.n_consumers, 1);
	assert_string_equal(c.consumers[0].name, "legacy-0");
	ft_dra_claim_dispose(&c);
}

static void test_dra__unreserved_claim_is_allocated(void **state)
{
	ft_dra_claim_t c;

	claim_from(&c, "dra/claim-unreserved.json", NULL);
	assert_true(c.allocated);
	assert_int_equal(c.n_consumers, 0);
	assert_true(c.n_results > 0);
	ft_dra_claim_dispose(&c);
}

/* Two shares of one GPU shared into 10 replicas: one replica each. */
static void test_dra__consumable_shares_are_replicas(void **state)
{
	ft_topology_t *t = example("h100-4x-shared.json");
	ft_dra_slice_t s;
	const ft_dra_slice_t *list[1] = {&s};
	ft_dra_claim_t a, b;
	ft_allocation_t units;
	ft_dra_view_t v;

	slice_from(&s, "dra/claim-consumable.json");
	assert_true(s.devices[0].multiple);
	assert_int_equal(s.devices[0].shares, 10);
	claim_from(&a, "dra/claim-consumable.json", "share-a");
	claim_from(&b, "dra/claim-consumable.json", "share-b");
	assert_int_equal(a.results[0].shares, 1);
	ft_dra_view_build(&v, "dra-h100-shared-0", t, list, 1,
			  FT_DRA_DRIVER_NVIDIA, 0);
	assert_string_equal(v.error, "");
	assert_int_equal(
	    ft_dra_claim_units(&units, NULL, &a, &v, FT_DRA_DRIVER_NVIDIA), 0);
	assert_int_equal(units.n_gpus, 0);
	assert_int_equal(units.n_replicas, 1);
	assert_string_equal(units.replica_gpus[0], t->gpus[0].uuid);
	assert_int_equal(units.replica_counts[0], 1);
	ft_allocation_dispose(&units);
	ft_dra_claim_dispose(&a);
	ft_dra_claim_dispose(&b);
	ft_dra_slice_dispose(&s);
	ft_topology_unref(t);
}

/* NVIDIA's classes, and the selector shapes flextopo will not guess at. */
static void test_dra__device_classes(void **state)
{
	static const struct {
		const char *expr;
		ft_dra_kind_t kind;
	} cases[] = {
	    {"device.driver == \"gpu.nvidia.com\" && "
	     "device.attributes[\"gpu.nvidia.com\"].type == \"mig\"",
	     FT_DRA_MIG},
	    {"device.driver=='gpu.nvidia.com'&&\n  "
	     "device.attributes['gpu.nvidia.com'].type=='gpu'",
	     FT_DRA_GPU},
	    /* Another driver, a type it does not name, either type. */
	    {"device.driver == 'gpu.example.com' && "
	     "device.attributes['gpu.example.com'].type == 'gpu'",
	     FT_DRA_OTHER},
	    {"device.driver == 'gpu.nvidia.com'", FT_DRA_OTHER},
	    {"device.driver == 'gpu.nvidia.com' && "
	     "(device.attributes['gpu.nvidia.com'].type == 'gpu' || "
	     "device.attributes['gpu.nvidia.com'].type == 'mig')",
	     FT_DRA_OTHER},
	    {"device.driver == 'gpu.nvidia.com.evil' && "
	     "device.attributes['gpu.nvidia.com'].type == 'gpu'",
	     FT_DRA_OTHER},
	};
	cJSON *obj = fixture_json("dra/deviceclass-gpu.json");
	ft_dra_class_t dc;

	(void)state;
	assert_int_equal(
	    ft_codec_dra_class_decode(&dc, obj, FT_DRA_DRIVER_NVIDIA), 0);
	assert_string_equal(dc.name, "gpu.nvidia.com");
	assert_int_equal(dc.kind, FT_DRA_GPU);
	assert_string_equal(dc.extended_resource, "nvidia.com/gpu");
	ft_dra_class_dispose(&dc);
	cJSON_Delete(obj);
	obj = fixture_json("dra/deviceclass-mig.json");
	assert_int_equal(
	    ft_codec_dra_class_decode(&dc, obj, FT_DRA_DRIVER_NVIDIA), 0);
	assert_int_equal(dc.kind, FT_DRA_MIG);
	assert_null(dc.extended_resource);
	ft_dra_class_dispose(&dc);
	cJSON_Delete(obj);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *e = cases[i].expr;
		if (ft_dra_class_kind(&e, 1, FT_DRA_DRIVER_NVIDIA) !=
		    cases[i].kind)
			fail_msg("case %u: %s", i, e);
	}
	/* Two selectors, each one half (all of them must hold). */
	{
		const char *two[] = {
		    "device.driver == 'gpu.nvidia.com'",
		    "device.attributes['gpu.nvidia.com'].type == 'gpu'"};
		assert_int_equal(
		    ft_dra_class_kind(two, 2, FT_DRA_DRIVER_NVIDIA),
		    FT_DRA_GPU);
	}
	obj = ft_test_json("{'spec':{}}");
	assert_int_equal(ft_codec_dra_class_decode(&dc, obj, "d"), FT_EINVAL);
	assert_string_equal(ft_error_last(),
			    "deviceclass: metadata.name is required");
	cJSON_Delete(obj);
}

static void test_dra__bad_objects_name_the_field(void **state)
{
	cJSON *obj = ft_test_json(
	    "{'metadata':{'name':'s1'},'spec':{'driver':'gpu.nvidia.com','pool':{'name':'n','generation':1,'resourceSliceCount':1},'devices':[{'name':'gpu-0','attributes':{'uuid':{'int':3}}}]}}");
	ft_dra_slice_t s;
	ft_dra_claim_t c;

	assert_int_equal(ft_codec_dra_slice_decode(&s, obj), FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "resourceslice s1: spec.devices[0].attributes.uuid: want a string");
	cJSON_Delete(obj);
	obj = ft_test_json("{'metadata':{'name':'s2'},'spec':{'driver':'d'}}");
	assert_int_equal(ft_codec_dra_slice_decode(&s, obj), FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "resourceslice s2: spec.pool: want name, generation and resourceSliceCount >= 1");
	cJSON_Delete(obj);
	obj = ft_test_json(
	    "{'metadata':{'name':'c','uid':'u'},'status':{'allocation':{'devices':{'results':[{'driver':'d','pool':'p'}]}}}}");
	assert_int_equal(ft_codec_dra_claim_decode(&c, obj), FT_EINVAL);
	assert_string_equal(
	    ft_error_last(),
	    "resourceclaim c: status.allocation.devices.results: want driver, pool and device");
	cJSON_Delete(obj);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra__slice_decodes_nvidia_gpus),
	    cmocka_unit_test(test_dra__a100_slice_matches_its_topology),
	    cmocka_unit_test(test_dra__disagreements_are_errors),
	    cmocka_unit_test(test_dra__mig_devices_match_by_parent_and_slices),
	    cmocka_unit_test(test_dra__newest_complete_generation),
	    cmocka_unit_test(test_dra__template_claim_holds_its_gpus),
	    cmocka_unit_test(test_dra__extended_resource_claim),
	    cmocka_unit_test(test_dra__unreserved_claim_is_allocated),
	    cmocka_unit_test(test_dra__consumable_shares_are_replicas),
	    cmocka_unit_test(test_dra__device_classes),
	    cmocka_unit_test(test_dra__bad_objects_name_the_field),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
