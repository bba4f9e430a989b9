/*
 * Tests for the topology annotation parser (ft_codec_topology_parse): the
 * api/examples files and fixtures checked model by model (counts, masks,
 * NVLink peers, MIG instances, reserved sets and the derived affinity
 * domains), the authors' FlexTopo graph with what it leaves unknown (NUMA
 * memory, GPU locality), and every error with its exact message. Inline JSON is
 * written with single quotes, turned into double quotes before parsing, to keep
 * it readable.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define EXAMPLES	  FT_SOURCE_DIR "/api/examples/"
#define TOPOLOGY_FIXTURES FT_FIXTURES_DIR "/topology"

/* Helpers */

/* A heap copy of `text` with ' turned into ". */
static char *dq(const char *text)
{
	char *copy = strdup(text);

	assert_non_null(copy);
	for (char *p = copy; *p; p++)
		if (*p == '\'')
			*p = '"';
	return copy;
}

static int parse(ft_topology_t **out, const char *text)
{
	char *json = dq(text);
	int rc = ft_codec_topology_parse(out, json, strlen(json));

	free(json);
	return rc;
}

static ft_topology_t *parse_ok(const char *text)
{
	ft_topology_t *t = NULL;
	int rc = parse(&t, text);

	if (rc != 0)
		print_error("unexpected error: %s\n", ft_error_last());
	assert_int_equal(rc, 0);
	assert_non_null(t);
	return t;
}

static void expect_error(const char *text, const char *message)
{
	ft_topology_t *t = (ft_topology_t *)1;
	int rc = parse(&t, text);

	assert_int_equal(rc, FT_EINVAL);
	assert_null(t);
	assert_string_equal(ft_error_last(), message);
}

static ft_topology_t *parse_file(const char *path)
{
	ft_topology_t *t = NULL;
	size_t len = 0;
	char *json = ft_test_read_file(path, &len);
	int rc;

	assert_non_null(json);
	rc = ft_codec_topology_parse(&t, json, len);
	if (rc != 0)
		print_error("%s: %s\n", path, ft_error_last());
	free(json);
	assert_int_equal(rc, 0);
	return t;
}

static void expect_file_error(const char *relpath, const char *message)
{
	ft_topology_t *t = NULL;
	size_t len = 0;
	char *json = ft_test_read_fixture(relpath, &len);
	int rc;

	assert_non_null(json);
	rc = ft_codec_topology_parse(&t, json, len);
	free(json);
	assert_int_equal(rc, FT_EINVAL);
	assert_null(t);
	assert_string_equal(ft_error_last(), message);
}

static void expect_cpus(const ft_cpuset_t *set, const char *cpulist)
{
	char buf[256];

	ft_cpuset_format(buf, sizeof(buf), set);
	assert_string_equal(buf, cpulist);
}

static unsigned n_level(const ft_topology_t *t, ft_level_t level)
{
	return t->level_first[level + 1] - t->level_first[level];
}

static const ft_domain_t *domain(const ft_topology_t *t, ft_level_t level,
				 unsigned i)
{
	assert_true(i < n_level(t, level));
	return &t->domains[t->level_first[level] + i];
}

/* True when some domain of `level` holds exactly the GPU mask `gpus`. */
static bool has_domain(const ft_topology_t *t, ft_level_t level, uint16_t gpus)
{
	for (unsigned i = 0; i < n_level(t, level); i++)
		if (domain(t, level, i)->gpus == gpus)
			return true;
	return false;
}

static void expect_nvlink_singletons(const ft_topology_t *t)
{
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), t->n_gpus);
	for (unsigned g = 0; g < t->n_gpus; g++)
		assert_true(
		    has_domain(t, FT_LEVEL_NVLINK, (uint16_t)(1u << g)));
}

/* Examples */

static void test_topology__rtx4090(void **state)
{
	ft_topology_t *t = parse_file(EXAMPLES "rtx4090-8x.json");
	char cpus[32];

	assert_int_equal(t->n_sockets, 2);
	assert_int_equal(t->n_numa, 8);
	assert_int_equal(t->n_switches, 8);
	assert_int_equal(t->n_gpus, 8);
	assert_int_equal(t->n_cpus, 64);
	assert_int_equal(t->sockets[0].numa_nodes, 0x0f);
	assert_int_equal(t->sockets[1].numa_nodes, 0xf0);
	assert_int_equal(t->sockets[1].gpus, 0xf0);
	for (unsigned k = 0; k < 8; k++) {
		const ft_gpu_t *g = &t->gpus[k];
		snprintf(cpus, sizeof(cpus), "%u-%u", 8 * k, 8 * k + 7);
		expect_cpus(&t->numa[k].cpus, cpus);
		assert_int_equal(t->numa[k].socket, k / 4);
		assert_int_equal(t->numa[k].gpus, 1u << k);
		assert_int_equal(g->index, k);
		assert_int_equal(g->numa, k);
		assert_int_equal(g->socket, k / 4);
		assert_int_equal(g->pcie_switch, k);
		assert_int_equal(g->memory_mib, 24564);
		assert_int_equal(g->nvlink_peers, 0);
		assert_string_equal(g->model, "NVIDIA GeForce RTX 4090");
	}
	assert_int_equal(t->whole_gpus, 0xff);
	expect_nvlink_singletons(t);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 8);
	assert_int_equal(n_level(t, FT_LEVEL_NUMA), 8);
	assert_int_equal(n_level(t, FT_LEVEL_SOCKET), 2);
	assert_int_equal(n_level(t, FT_LEVEL_NODE), 1);
	assert_int_equal(domain(t, FT_LEVEL_NODE, 0)->gpus, 0xff);
	ft_topology_unref(t);
}

static void test_topology__a100(void **state)
{
	ft_topology_t *t = parse_file(EXAMPLES "a100-8x.json");

	assert_int_equal(t->n_sockets, 2);
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_switches, 4);
	assert_int_equal(t->n_gpus, 8);
	assert_int_equal(t->n_cpus, 128);
	expect_cpus(&t->numa[0].cpus, "0-63");
	expect_cpus(&t->numa[1].cpus, "64-127");
	assert_int_equal(t->numa[0].gpus, 0x0f);
	assert_int_equal(t->numa[1].gpus, 0xf0);
	for (unsigned a = 0; a < 8; a++) {
		assert_int_equal(t->gpus[a].numa, a / 4);
		assert_int_equal(t->gpus[a].pcie_switch, a / 2);
		assert_int_equal(t->gpus[a].memory_mib, 81920);
		assert_string_equal(t->gpus[a].model, "NVIDIA A100-SXM4-80GB");
		assert_int_equal(t->gpus[a].nvlink_peers, 0xff & ~(1u << a));
		for (unsigned b = 0; b < 8; b++)
			assert_int_equal(t->gpus[a].nvlink_links[b],
					 a == b ? 0 : 12);
	}
	assert_int_equal(t->switches[3].gpus, 0xc0);
	assert_int_equal(t->switches[3].numa, 1);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 1);
	assert_int_equal(domain(t, FT_LEVEL_NVLINK, 0)->gpus, 0xff);
	assert_int_equal(domain(t, FT_LEVEL_NVLINK, 0)->numa_nodes, 0x3);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 4);
	for (unsigned s = 0; s < 4; s++)
		assert_true(has_domain(t, FT_LEVEL_PCIE_SWITCH,
				       (uint16_t)(0x3u << (2 * s))));
	assert_int_equal(n_level(t, FT_LEVEL_NUMA), 2);
	assert_int_equal(n_level(t, FT_LEVEL_SOCKET), 2);
	assert_int_equal(n_level(t, FT_LEVEL_NODE), 1);
	assert_int_equal(t->reserved_gpus, 0);
	assert_true(ft_cpuset_empty(&t->reserved_cpus));
	ft_topology_unref(t);
}

static void expect_mig(const ft_topology_t *t, unsigned i, unsigned gpu,
		       const char *profile, unsigned start, unsigned size)
{
	const ft_mig_instance_t *m = &t->mig[i];

	assert_int_equal(m->gpu, gpu);
	assert_string_equal(m->profile, profile);
	assert_int_equal(m->start, start);
	assert_int_equal(m->size, size);
	assert_memory_equal(m->uuid, "MIG-", 4);
	assert_int_equal(ft_topology_find_mig_uuid(t, m->uuid), (int)i);
}

static void test_topology__h100_mig(void **state)
{
	ft_topology_t *t = parse_file(EXAMPLES "h100-8x-mig.json");

	assert_int_equal(t->n_gpus, 8);
	assert_int_equal(t->n_cpus, 112);
	expect_cpus(&t->numa[0].cpus, "0-55");
	expect_cpus(&t->numa[1].cpus, "56-111");
	assert_string_equal(t->gpus[5].model, "NVIDIA H100 80GB HBM3");
	assert_int_equal(t->gpus[0].nvlink_links[7], 18);
	assert_int_equal(t->n_mig, 2 + 7 + 2);
	expect_mig(t, 0, 0, "3g.40gb", 0, 4);
	expect_mig(t, 1, 0, "3g.40gb", 4, 4);
	for (unsigned s = 0; s < 7; s++)
		expect_mig(t, 2 + s, 1, "1g.10gb", s, 1);
	expect_mig(t, 9, 2, "4g.40gb", 0, 4);
	expect_mig(t, 10, 2, "3g.40gb", 4, 4);
	for (unsigned g = 0; g < 8; g++)
		assert_int_equal(t->gpus[g].mig_enabled, g < 3);
	assert_int_equal(t->whole_gpus, 0xf8);
	/* The five whole GPUs form one clique; MIG GPUs stand alone. */
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 4);
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0xf8));
	for (unsigned g = 0; g < 3; g++)
		assert_true(
		    has_domain(t, FT_LEVEL_NVLINK, (uint16_t)(1u << g)));
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 4);
	ft_topology_unref(t);
}

static void test_topology__nvlink_bridges(void **state)
{
	ft_topology_t *t =
	    parse_file(FT_FIXTURES_DIR "/topology/bridged-4x.json");

	/* (0,1) is listed on GPU 0 only, (2,3) on both ends. */
	assert_int_equal(t->gpus[0].nvlink_peers, 0x2);
	assert_int_equal(t->gpus[1].nvlink_peers, 0x1);
	assert_int_equal(t->gpus[1].nvlink_links[0], 4);
	assert_int_equal(t->gpus[2].nvlink_peers, 0x8);
	assert_int_equal(t->gpus[3].nvlink_links[2], 4);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 2);
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0x3));
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0xc));
	/* GPU 1 sits on a root port: a pcie-switch domain of its own. */
	assert_int_equal(t->gpus[1].pcie_switch, FT_NONE);
	assert_int_equal(t->gpus[2].pcie_switch, 1);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 3);
	assert_true(has_domain(t, FT_LEVEL_PCIE_SWITCH, 0x1));
	assert_true(has_domain(t, FT_LEVEL_PCIE_SWITCH, 0x2));
	assert_true(has_domain(t, FT_LEVEL_PCIE_SWITCH, 0xc));
	ft_topology_unref(t);
}

static void test_topology__one_sided_nvlink(void **state)
{
	ft_topology_t *t = parse_ok(
	    "{'version':1,'sockets':[{'id':0,'numaNodes':[{'id':0,'cpus':'0-3','memoryMiB':0,'gpus':[{'index':0,'uuid':'GPU-0','nvlinks':[{'peer':1,'links':2}]},{'index':1,'uuid':'GPU-1'}]}]}]}");

	assert_int_equal(t->gpus[1].nvlink_peers, 0x1);
	assert_int_equal(t->gpus[1].nvlink_links[0], 2);
	assert_int_equal(t->gpus[0].nvlink_links[1], 2);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 1);
	assert_string_equal(t->gpus[0].model, "");
	assert_int_equal(t->gpus[0].memory_mib, 0);
	ft_topology_unref(t);
}

static void test_topology__graph_example(void **state)
{
	ft_topology_t *t = parse_file(EXAMPLES "flextopo-graph.json");

	assert_int_equal(t->n_sockets, 1);
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_switches, 0);
	assert_int_equal(t->n_gpus, 2);
	assert_int_equal(t->n_cpus, 16);
	expect_cpus(&t->numa[0].cpus, "0-7");
	expect_cpus(&t->numa[1].cpus, "8-15");
	assert_int_equal(t->numa[0].memory_mib, 65536);
	expect_cpus(&t->reserved_cpus, "0-1,9");
	/*
	 * gpu-1 has no edge: its NUMA node and socket stay unknown, so it is
	 * in the node domain only.
	 */
	assert_int_equal(t->gpus[0].index, 0);
	assert_int_equal(t->gpus[1].index, 1);
	assert_int_equal(t->gpus[0].numa, 0);
	assert_int_equal(t->gpus[1].numa, FT_NONE);
	assert_int_equal(t->gpus[1].socket, FT_NONE);
	assert_int_equal(t->gpus[1].pcie_switch, FT_NONE);
	assert_int_equal(t->unplaced_gpus, 0x2);
	assert_int_equal(t->numa_memory_unknown, 0);
	assert_int_equal(t->gpus[1].memory_mib, 24564);
	assert_string_equal(t->gpus[1].model, "NVIDIA GeForce RTX 4090");
	assert_int_equal(t->reserved_gpus, 0x1);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 1);
	assert_int_equal(domain(t, FT_LEVEL_NVLINK, 0)->gpus, 0x1);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 1);
	assert_int_equal(domain(t, FT_LEVEL_NUMA, 0)->gpus, 0x1);
	assert_int_equal(domain(t, FT_LEVEL_NUMA, 1)->gpus, 0);
	assert_int_equal(domain(t, FT_LEVEL_SOCKET, 0)->gpus, 0x1);
	assert_int_equal(domain(t, FT_LEVEL_NODE, 0)->gpus, 0x3);
	ft_topology_unref(t);
}

/* Two sockets listed out of order; GPUs under a Socket and under nothing. */
static const char graph_two_sockets[] =
    "{'nodes':[{'id':'socket-1','type':'Socket'},{'id':'socket-0','type':'Socket','attributes':{}},{'id':'numa-3','type':'NUMANode','attributes':{'memory':'64Gi'}},{'id':'numa-2','type':'NUMANode','attributes':{'memoryMiB':'1024'}},{'id':'numa-1','type':'NUMANode','attributes':{'memory':2048}},{'id':'core-5','type':'CPUCore','attributes':{'status':'used'}},{'id':'core-2','type':'CPUCore'},{'id':'core-9','type':'CPUCore','attributes':{'status':'free'}},{'id':'dimm-0','type':'Memory'},{'id':'gpu-7','type':'GPU','attributes':{'status':'used'}},{'id':'gpu-3','type':'GPU','attributes':{'uuid':'GPU-x3'}}],'edges':[{'source':'socket-1','target':'numa-3','type':'contains'},{'source':'socket-0','target':'numa-2'},{'source':'socket-1','target':'numa-1','type':'contains'},{'source':'numa-3','target':'core-5','type':'contains'},{'source':'numa-1','target':'core-9','type':'contains'},{'source':'numa-2','target':'core-2','type':'contains'},{'source':'numa-2','target':'dimm-0','type':'contains'},{'source':'numa-1','target':'gpu-3','type':'attached'},{'source':'socket-1','target':'gpu-7','type':'contains'}]}";

static void test_topology__graph_placement(void **state)
{
	ft_topology_t *t = parse_ok(graph_two_sockets);

	/* Positions follow ids: socket 0, 1; NUMA 1, 2, 3; GPU 3, 7. */
	assert_int_equal(t->sockets[0].id, 0);
	assert_int_equal(t->numa[0].id, 1);
	assert_int_equal(t->numa[0].socket, 1);
	assert_int_equal(t->numa[1].id, 2);
	assert_int_equal(t->numa[1].socket, 0);
	assert_int_equal(t->numa[0].memory_mib, 2048);
	assert_int_equal(t->numa[1].memory_mib, 1024);
	assert_int_equal(t->numa[2].memory_mib, 65536);
	expect_cpus(&t->numa[0].cpus, "9");
	expect_cpus(&t->numa[2].cpus, "5");
	expect_cpus(&t->reserved_cpus, "5");
	/*
	 * gpu-3 is unattached ("attached" is not containment): locality
	 * unknown; gpu-7 is under socket 1: that socket, NUMA node unknown.
	 */
	assert_int_equal(t->gpus[0].index, 3);
	assert_string_equal(t->gpus[0].uuid, "GPU-x3");
	assert_int_equal(t->gpus[0].numa, FT_NONE);
	assert_int_equal(t->gpus[0].socket, FT_NONE);
	assert_int_equal(t->gpus[1].index, 7);
	assert_string_equal(t->gpus[1].uuid, "gpu-7");
	assert_int_equal(t->gpus[1].numa, FT_NONE);
	assert_int_equal(t->gpus[1].socket, 1);
	assert_int_equal(t->unplaced_gpus, 0x3);
	for (unsigned n = 0; n < t->n_numa; n++)
		assert_int_equal(t->numa[n].gpus, 0);
	assert_int_equal(t->sockets[0].gpus, 0);
	assert_int_equal(t->sockets[1].gpus, 0x2);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 0);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 0);
	assert_true(has_domain(t, FT_LEVEL_SOCKET, 0x2));
	assert_int_equal(domain(t, FT_LEVEL_NODE, 0)->gpus, 0x3);
	assert_int_equal(t->reserved_gpus, 0x2);
	ft_topology_unref(t);
}

/* A NUMANode without a memory attribute has unknown memory, not 0 MiB. */
static void test_topology__graph_memory_unknown(void **state)
{
	ft_topology_t *t = parse_ok(
	    "{'nodes':[{'id':'socket-0','type':'Socket'},{'id':'numa-0','type':'NUMANode'},{'id':'numa-1','type':'NUMANode','attributes':{'status':'free'}},{'id':'numa-2','type':'NUMANode','attributes':{'memoryMiB':0}},{'id':'numa-3','type':'NUMANode','attributes':{'memory':'1Gi'}}],'edges':[{'source':'socket-0','target':'numa-0'},{'source':'socket-0','target':'numa-1'},{'source':'socket-0','target':'numa-2'},{'source':'socket-0','target':'numa-3'}]}");

	assert_int_equal(t->numa_memory_unknown, 0x3);
	assert_int_equal(t->numa[0].memory_mib, 0);
	assert_int_equal(t->numa[1].memory_mib, 0);
	assert_int_equal(t->numa[2].memory_mib, 0);
	assert_int_equal(t->numa[3].memory_mib, 1024);
	ft_topology_unref(t);
}

/* GPU -> NUMANode "contains" edges put each GPU in its NUMA node. */
static void test_topology__graph_gpu_numa_edges(void **state)
{
	ft_topology_t *t =
	    parse_file(TOPOLOGY_FIXTURES "/graph-gpu-numa-edges.json");

	assert_int_equal(t->n_gpus, 4);
	assert_int_equal(t->unplaced_gpus, 0);
	assert_int_equal(t->numa_memory_unknown, 0);
	for (unsigned g = 0; g < 4; g++) {
		assert_int_equal(t->gpus[g].numa, g / 2);
		assert_int_equal(t->gpus[g].socket, 0);
	}
	assert_int_equal(t->numa[0].gpus, 0x3);
	assert_int_equal(t->numa[1].gpus, 0xc);
	assert_int_equal(t->numa[1].memory_mib, 65536);
	expect_nvlink_singletons(t);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 4);
	assert_true(has_domain(t, FT_LEVEL_NUMA, 0x3));
	assert_true(has_domain(t, FT_LEVEL_NUMA, 0xc));
	ft_topology_unref(t);
}

/* The builder of GPUs of unknown NUMA node checks the socket. */
static void test_topology__unplaced_gpu_builder(void **state)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;

	assert_int_equal(ft_cpuset_parse(&cpus, "0-3"), 0);
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 1024), 0);
	assert_int_equal(ft_topology_add_gpu_unplaced(t, 1, 3, "g3", NULL, 0),
			 FT_EINVAL);
	assert_string_equal(ft_error_last(), "GPU 3: no such socket");
	assert_int_equal(ft_topology_add_gpu_unplaced(t, 0, 3, "g3", NULL, 0),
			 0);
	assert_int_equal(
	    ft_topology_add_gpu_unplaced(t, FT_NONE, 4, "g4", NULL, 0), 1);
	assert_int_equal(ft_topology_add_gpu_unplaced(t, 0, 4, "g5", NULL, 0),
			 FT_EINVAL);
	assert_string_equal(ft_error_last(), "GPU 4: duplicate index");
	assert_int_equal(ft_topology_finish(t), 0);
	assert_int_equal(t->unplaced_gpus, 0x3);
	assert_int_equal(t->whole_gpus, 0x3);
	assert_int_equal(t->sockets[0].gpus, 0x1);
	assert_int_equal(t->numa[0].gpus, 0);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 0);
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 0);
	assert_int_equal(domain(t, FT_LEVEL_SOCKET, 0)->gpus, 0x1);
	assert_int_equal(domain(t, FT_LEVEL_NODE, 0)->gpus, 0x3);
	ft_topology_unref(t);
}

static void test_topology__graph_errors(void **state)
{
	expect_error(
	    "{'spec':{'nodes':[{'id':'socket-0','type':'Socket'}],'edges':[{'source':'socket-0','target':'core-99'}]}}",
	    "spec.edges[0].target: unknown node \"core-99\"");
	expect_error(
	    "{'nodes':[{'id':'socket-0','type':'Socket'},{'id':'numa-0','type':'NUMANode'}],'edges':[]}",
	    "nodes[1]: NUMANode \"numa-0\" is not contained by a Socket");
	expect_error(
	    "{'nodes':[{'id':'socket-0','type':'Socket'},{'id':'numa-0','type':'NUMANode'}],'edges':[{'source':'socket-0','target':'numa-0'},{'source':'numa-0','target':'socket-0'}]}",
	    "edges: containment cycle through \"socket-0\"");
	expect_error(
	    "{'nodes':[{'id':'coregroup-0-0','type':'CoreGroup'}],'edges':[{'source':'coregroup-0-0','target':'coregroup-0-0'}]}",
	    "edges: containment cycle through \"coregroup-0-0\"");
	expect_error(
	    "{'nodes':[{'id':'core-0','type':'CPUCore'},{'id':'gpu-0','type':'GPU'}],'edges':[{'source':'core-0','target':'gpu-0'}]}",
	    "edges[0]: a CPUCore (\"core-0\") cannot contain a GPU (\"gpu-0\")");
	expect_error(
	    "{'nodes':[{'id':'numa-0','type':'NUMANode'},{'id':'numa-1','type':'NUMANode'},{'id':'core-0','type':'CPUCore'}],'edges':[{'source':'numa-0','target':'core-0'},{'source':'numa-0','target':'core-0'},{'source':'numa-1','target':'core-0'}]}",
	    "edges[2]: \"core-0\" is contained by both \"numa-0\" and \"numa-1\"");
	expect_error(
	    "{'nodes':[{'id':'core-0','type':'CPUCore'},{'id':'core-0','type':'CPUCore'}],'edges':[]}",
	    "nodes[1].id: duplicate id \"core-0\"");
	expect_error(
	    "{'nodes':[{'id':'core-x','type':'CPUCore'}],'edges':[]}",
	    "nodes[0].id: \"core-x\": expected a number after the last '-'");
	expect_error(
	    "{'nodes':[{'id':'core-600','type':'CPUCore'}],'edges':[]}",
	    "nodes[0].id: CPU 600 is above the highest CPU id 511");
}

static const char graph_one_numa_head[] =
    "{'nodes':[{'id':'socket-0','type':'Socket'},{'id':'numa-0','type':'NUMANode'},";
static const char graph_one_numa_tail[] =
    "],'edges':[{'source':'socket-0','target':'numa-0'}]}";

static void expect_graph_error(const char *more_nodes, const char *message)
{
	char text[1024];

	snprintf(text, sizeof(text), "%s%s%s", graph_one_numa_head, more_nodes,
		 graph_one_numa_tail);
	expect_error(text, message);
}

static void test_topology__graph_attribute_errors(void **state)
{
	expect_graph_error(
	    "{'id':'core-0','type':'CPUCore'}",
	    "nodes[2]: CPUCore \"core-0\" is not inside a NUMANode");
	expect_graph_error(
	    "{'id':'gpu-0','type':'GPU','attributes':{'status':'busy'}}",
	    "nodes[2].attributes.status: expected \"free\" or \"used\"");
	expect_graph_error(
	    "{'id':'gpu-0','type':'GPU','attributes':{'memoryMiB':-1}}",
	    "nodes[2].attributes.memoryMiB: expected a non-negative integer");
	expect_graph_error("{'id':'gpu-0','type':'GPU','attributes':[]}",
			   "nodes[2].attributes: expected an object");
	expect_graph_error("{'id':'gpu-0'}", "nodes[2].type: missing");
	expect_graph_error(
	    "{'id':'gpu-0','type':'GPU'},{'id':'gpu-00','type':'GPU'}",
	    "nodes[3]: GPU 0: duplicate index");
	expect_graph_error(
	    "{'id':'gpu-0','type':'GPU'},{'id':'gpu-1','type':'GPU','attributes':{'uuid':'gpu-0'}}",
	    "GPUs 0 and 1 share uuid gpu-0");
}

/* Our schema: errors */

static void test_topology__json_errors(void **state)
{
	expect_error("{'version':1,'a':tru}", "not JSON at offset 17");
	expect_error("{'version':1} x", "not JSON at offset 14");
	expect_error("", "not JSON at offset 0");
	expect_error(
	    "{'version':1}",
	    "unknown format: expected \"sockets\" or \"nodes\"/\"edges\"");
	expect_error(
	    "[]",
	    "unknown format: expected \"sockets\" or \"nodes\"/\"edges\"");
	expect_error(
	    "{'spec':{'nodes':[]}}",
	    "unknown format: expected \"sockets\" or \"nodes\"/\"edges\"");
}

static void test_topology__size_cap(void **state)
{
	size_t len = 1024 * 1024 + 1;
	char *big = malloc(len);
	ft_topology_t *t = NULL;

	assert_non_null(big);
	memset(big, ' ', len);
	memcpy(big, "{\"version\":1,\"sockets\":[]}", 26);
	assert_int_equal(ft_codec_topology_parse(&t, big, len), FT_EINVAL);
	assert_null(t);
	assert_string_equal(
	    ft_error_last(),
	    "topology of 1048577 bytes is above the cap of 1048576 bytes");
	/* Exactly at the cap it is read (and fails for want of NUMA nodes). */
	assert_int_equal(ft_codec_topology_parse(&t, big, len - 1), FT_EINVAL);
	assert_string_equal(ft_error_last(), "topology has no NUMA nodes");
	free(big);
}

#define SOCKET0(numa)                                                          \
	"{'version':1,'sockets':[{'id':0,'numaNodes':[" numa "]}]}"
#define NUMA0(gpus)                                                            \
	SOCKET0("{'id':0,'cpus':'0-7','memoryMiB':1024,'gpus':[" gpus "]}")

static void test_topology__field_errors(void **state)
{
	expect_error("{'sockets':[]}", "version: missing");
	expect_error("{'version':2,'sockets':[]}",
		     "version: 2 is not supported (expected 1)");
	expect_error("{'version':'1','sockets':[]}",
		     "version: expected a non-negative integer");
	expect_error("{'version':1,'sockets':{}}",
		     "sockets: expected an array");
	expect_error("{'version':1,'sockets':[7]}",
		     "sockets[0]: expected an object");
	expect_error("{'version':1,'sockets':[{'id':-1,'numaNodes':[]}]}",
		     "sockets[0].id: expected a non-negative integer");
	expect_error("{'version':1,'sockets':[{'id':1.5,'numaNodes':[]}]}",
		     "sockets[0].id: expected a non-negative integer");
	expect_error("{'version':1,'sockets':[{'id':'0','numaNodes':[]}]}",
		     "sockets[0].id: expected a non-negative integer");
	expect_error("{'version':1,'sockets':[{'id':0}]}",
		     "sockets[0].numaNodes: missing");
	expect_error(SOCKET0("{'id':0,'cpus':'0-7'}"),
		     "sockets[0].numaNodes[0].memoryMiB: missing");
	expect_error(SOCKET0("{'id':0,'cpus':7,'memoryMiB':0}"),
		     "sockets[0].numaNodes[0].cpus: expected a string");
	expect_error(
	    SOCKET0(
		"{'id':0,'cpus':'0-7','memoryMiB':0},{'id':1,'cpus':'0-x','memoryMiB':0}"),
	    "sockets[0].numaNodes[1].cpus: cpulist \"0-x\": bad range at offset 2 (CPU ids 0-511, ranges low-high)");
	expect_error(NUMA0("{'index':0}"),
		     "sockets[0].numaNodes[0].gpus[0].uuid: missing");
	expect_error(
	    NUMA0("{'index':0,'uuid':''}"),
	    "sockets[0].numaNodes[0].gpus[0].uuid: expected a non-empty string");
	expect_error(
	    NUMA0("{'index':0,'uuid':'a','memoryMiB':1e300}"),
	    "sockets[0].numaNodes[0].gpus[0].memoryMiB: expected a non-negative integer");
	expect_error(
	    NUMA0("{'index':0,'uuid':'a','nvlinks':{}}"),
	    "sockets[0].numaNodes[0].gpus[0].nvlinks: expected an array");
}

static void test_topology__builder_errors(void **state)
{
	expect_error(
	    "{'version':1,'sockets':[{'id':0,'numaNodes':[]},{'id':0,'numaNodes':[]}]}",
	    "sockets[1]: socket 0: duplicate id");
	expect_error(NUMA0("{'index':0,'uuid':'a'},{'index':0,'uuid':'b'}"),
		     "sockets[0].numaNodes[0].gpus[1]: GPU 0: duplicate index");
	expect_error(
	    SOCKET0(
		"{'id':0,'cpus':'0-7','memoryMiB':0,'pcieSwitches':[{'id':1},{'id':1}]}"),
	    "sockets[0].numaNodes[0].pcieSwitches[1]: PCIe switch 1: duplicate id");
	/* Checks of ft_topology_finish() carry no path. */
	expect_error(
	    SOCKET0(
		"{'id':0,'cpus':'0-7','memoryMiB':0},{'id':1,'cpus':'7-9','memoryMiB':0}"),
	    "NUMA nodes 0 and 1 share CPUs");
	expect_error(NUMA0("{'index':0,'uuid':'a'},{'index':1,'uuid':'a'}"),
		     "GPUs 0 and 1 share uuid a");
	expect_error("{'version':1,'sockets':[]}",
		     "topology has no NUMA nodes");
}

static void test_topology__nvlink_errors(void **state)
{
	expect_file_error(
	    "topology/bad-nvlink-peer.json",
	    "sockets[1].numaNodes[0].pcieSwitches[0].gpus[2].nvlinks[0].peer: no GPU with index 9");
	expect_error(
	    NUMA0(
		"{'index':0,'uuid':'a','nvlinks':[{'peer':1,'links':4}]},{'index':1,'uuid':'b','nvlinks':[{'peer':0,'links':2}]}"),
	    "sockets[0].numaNodes[0].gpus[1].nvlinks[0].links: 2 links between GPUs 1 and 0 disagree with the 4 listed before");
	expect_error(
	    NUMA0(
		"{'index':0,'uuid':'a','nvlinks':[{'peer':1,'links':4},{'peer':1,'links':3}]},{'index':1,'uuid':'b'}"),
	    "sockets[0].numaNodes[0].gpus[0].nvlinks[1].links: 3 links between GPUs 0 and 1 disagree with the 4 listed before");
	expect_error(
	    NUMA0("{'index':0,'uuid':'a','nvlinks':[{'peer':0,'links':4}]}"),
	    "sockets[0].numaNodes[0].gpus[0].nvlinks[0].peer: GPU 0 cannot link to itself");
	expect_error(
	    NUMA0(
		"{'index':0,'uuid':'a','nvlinks':[{'peer':1,'links':0}]},{'index':1,'uuid':'b'}"),
	    "sockets[0].numaNodes[0].gpus[0].nvlinks[0].links: expected an integer 1-255");
	expect_error(
	    NUMA0("{'index':0,'uuid':'a','nvlinks':[{'peer':1}]}"),
	    "sockets[0].numaNodes[0].gpus[0].nvlinks[0].links: missing");
}

static void test_topology__nvlink_both_ends_agree(void **state)
{
	ft_topology_t *t = parse_ok(NUMA0(
	    "{'index':0,'uuid':'a','nvlinks':[{'peer':1,'links':4},{'peer':1,'links':4}]},{'index':1,'uuid':'b','nvlinks':[{'peer':0,'links':4}]}"));

	assert_int_equal(t->gpus[0].nvlink_links[1], 4);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 1);
	ft_topology_unref(t);
}

/* MIG */

#define MIG_GPU(mig) NUMA0("{'index':0,'uuid':'a','mig':" mig "}")
#define MIG_PATH     "sockets[0].numaNodes[0].gpus[0].mig"

static void test_topology__mig_overlap(void **state)
{
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'3g.40gb','start':0,'size':4,'uuid':'MIG-1'},{'profile':'3g.40gb','start':2,'size':4,'uuid':'MIG-2'}]}"),
	    "MIG 3g.40gb on GPU 0: placement 2:4 overlaps another instance");
}

static void test_topology__mig_bounds(void **state)
{
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'1g.10gb','start':8,'size':1,'uuid':'MIG-1'}]}"),
	    MIG_PATH ".instances[0].start: expected an integer 0-7");
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'1g.10gb','start':9,'size':1,'uuid':'MIG-1'}]}"),
	    MIG_PATH ".instances[0].start: expected an integer 0-7");
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'4g.40gb','start':6,'size':4,'uuid':'MIG-1'}]}"),
	    MIG_PATH ".instances[0]: placement 6:4 ends past memory slice 7");
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'1g.10gb','start':0,'size':0,'uuid':'MIG-1'}]}"),
	    MIG_PATH ".instances[0].size: expected an integer 1-8");
	expect_error(
	    MIG_GPU(
		"{'enabled':true,'instances':[{'profile':'1g.10gb','start':0,'size':1}]}"),
	    MIG_PATH ".instances[0].uuid: missing");
	expect_error(MIG_GPU("{'instances':[]}"), MIG_PATH ".enabled: missing");
	expect_error(MIG_GPU("{'enabled':1}"),
		     MIG_PATH ".enabled: expected true or false");
	expect_error(
	    MIG_GPU(
		"{'enabled':false,'instances':[{'profile':'1g.10gb','start':0,'size':1,'uuid':'MIG-1'}]}"),
	    MIG_PATH ".instances: instances listed while MIG is disabled");
	expect_error(MIG_GPU("true"), MIG_PATH ": expected an object");
}

static void test_topology__mig_enabled_empty(void **state)
{
	ft_topology_t *t = parse_ok(NUMA0(
	    "{'index':0,'uuid':'a','mig':{'enabled':true},'nvlinks':[{'peer':1,'links':4}]},{'index':1,'uuid':'b','mig':{'enabled':false,'instances':[]}},{'index':2,'uuid':'c','nvlinks':[{'peer':1,'links':4}]}"));

	assert_true(t->gpus[0].mig_enabled);
	assert_false(t->gpus[1].mig_enabled);
	assert_int_equal(t->n_mig, 0);
	assert_int_equal(t->whole_gpus, 0x6);
	/* GPU 0 keeps its links in the model but is a domain of its own. */
	assert_int_equal(t->gpus[0].nvlink_peers, 0x2);
	assert_int_equal(n_level(t, FT_LEVEL_NVLINK), 2);
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0x1));
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0x6));
	ft_topology_unref(t);
}

/* MIG strategy: inferred, or given and checked */

#define STRATEGY(s, gpus)                                                      \
	"{'version':1," s "'sockets':[{'id':0,'numaNodes':[{'id':0,'cpus':"    \
	"'0-7','memoryMiB':1024,'gpus':[" gpus "]}]}]}"
#define MIG_1G(i)                                                              \
	"{'index':" #i ",'uuid':'g" #i "','mig':{'enabled':true,'instances':[" \
	"{'profile':'1g.10gb','start':0,'size':1,'uuid':'M" #i "a'},"          \
	"{'profile':'1g.10gb','start':1,'size':1,'uuid':'M" #i "b'}]}}"
#define MIG_3G(i)                                                              \
	"{'index':" #i ",'uuid':'g" #i "','mig':{'enabled':true,'instances':[" \
	"{'profile':'3g.40gb','start':0,'size':4,'uuid':'M" #i "a'}]}}"
#define WHOLE(i) "{'index':" #i ",'uuid':'g" #i "'}"

static void expect_strategy(const char *text, ft_mig_strategy_t strategy,
			    bool given)
{
	ft_topology_t *t = parse_ok(text);

	assert_int_equal(t->mig_strategy, strategy);
	assert_int_equal(t->mig_strategy_given, given);
	if (strategy == FT_MIG_STRATEGY_SINGLE)
		assert_string_equal(ft_topology_single_profile(t),
				    t->mig[0].profile);
	else
		assert_null(ft_topology_single_profile(t));
	ft_topology_unref(t);
}

static void test_topology__mig_strategy_inferred(void **state)
{
	expect_strategy(STRATEGY("", MIG_1G(0) "," MIG_1G(1)),
			FT_MIG_STRATEGY_SINGLE, false);
	/* An enabled GPU without instances does not count against it. */
	expect_strategy(
	    STRATEGY(
		"",
		MIG_1G(0) ",{'index':1,'uuid':'g1','mig':{'enabled':true}}"),
	    FT_MIG_STRATEGY_SINGLE, false);
	expect_strategy(STRATEGY("", MIG_1G(0) "," MIG_3G(1)),
			FT_MIG_STRATEGY_MIXED, false);
	expect_strategy(STRATEGY("", MIG_1G(0) "," WHOLE(1)),
			FT_MIG_STRATEGY_MIXED, false);
	expect_strategy(STRATEGY("", WHOLE(0)), FT_MIG_STRATEGY_MIXED, false);
	expect_strategy(STRATEGY("", ""), FT_MIG_STRATEGY_MIXED, false);
}

static void test_topology__mig_strategy_given(void **state)
{
	expect_strategy(STRATEGY("'migStrategy':'mixed',", MIG_1G(0)),
			FT_MIG_STRATEGY_MIXED, true);
	expect_strategy(STRATEGY("'migStrategy':'single',", MIG_3G(0)),
			FT_MIG_STRATEGY_SINGLE, true);
	expect_error(
	    STRATEGY("'migStrategy':'single',", MIG_1G(0) "," WHOLE(1)),
	    "migStrategy single: GPU 1 is not MIG-enabled");
	expect_error(
	    STRATEGY("'migStrategy':'single',", MIG_1G(0) "," MIG_3G(1)),
	    "migStrategy single: MIG instances of profiles 1g.10gb and 3g.40gb (single needs one)");
	expect_error(STRATEGY("'migStrategy':'single',", WHOLE(0)),
		     "migStrategy single: the node has no MIG instances");
	expect_error(STRATEGY("'migStrategy':'auto',", MIG_1G(0)),
		     "migStrategy: \"auto\" is not single or mixed");
	expect_error(STRATEGY("'migStrategy':1,", MIG_1G(0)),
		     "migStrategy: expected a non-empty string");
}

/* Shared GPUs (time-slicing and MPS replicas) */

#define SHARED(i, n) "{'index':" #i ",'uuid':'g" #i "','replicas':" #n "}"

static void test_topology__shared_gpus(void **state)
{
	ft_topology_t *t =
	    parse_ok(STRATEGY("'sharedResource':'nvidia.com/gpu.shared',",
			      SHARED(0, 10) "," WHOLE(1)));
	ft_topology_t *back = NULL;
	char *text = NULL, *again = NULL;

	assert_int_equal(t->gpus[0].replicas, 10);
	assert_int_equal(t->gpus[1].replicas, 0);
	assert_int_equal(t->shared_gpus, 0x1);
	assert_string_equal(t->shared_resource, "nvidia.com/gpu.shared");
	/* The encoder writes what the parser reads. */
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_non_null(strstr(text, "\"replicas\":10"));
	assert_int_equal(ft_codec_topology_parse(&back, text, strlen(text)), 0);
	assert_int_equal(ft_codec_topology_encode(&again, back), 0);
	assert_string_equal(text, again);
	free(text);
	free(again);
	ft_topology_unref(back);
	ft_topology_unref(t);
	t = parse_ok(STRATEGY("", SHARED(0, 4)));
	assert_null(t->shared_resource);
	ft_topology_unref(t);
	/* The example: two NVLink pairs, every GPU shared 10 ways. */
	t = parse_file(EXAMPLES "h100-4x-shared.json");
	assert_int_equal(t->shared_gpus, 0xf);
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0x3));
	assert_true(has_domain(t, FT_LEVEL_NVLINK, 0xc));
	ft_topology_unref(t);
}

static void test_topology__shared_gpu_errors(void **state)
{
	expect_error(
	    STRATEGY("", SHARED(0, 1)),
	    "sockets[0].numaNodes[0].gpus[0].replicas: expected an integer 2-100");
	expect_error(
	    STRATEGY("", SHARED(0, 101)),
	    "sockets[0].numaNodes[0].gpus[0].replicas: expected an integer 2-100");
	expect_error(
	    STRATEGY(
		"",
		"{'index':0,'uuid':'g0','replicas':4,'mig':{'enabled':true}}"),
	    "GPU 0: MIG-enabled GPU cannot be shared (replicas)");
	expect_error(STRATEGY("'sharedResource':'',", SHARED(0, 4)),
		     "sharedResource: expected a non-empty string");
}

/* Reserved resources and forward compatibility */

#define RESERVED(r)                                                            \
	"{'version':1,'reserved':" r ",'sockets':[{'id':0,'numaNodes':["       \
	"{'id':0,'cpus':'0-7','memoryMiB':1,'gpus':[{'index':3,'uuid':'a'},"   \
	"{'index':5,'uuid':'b'}]}]}]}"

static void test_topology__reserved(void **state)
{
	ft_topology_t *t = parse_ok(RESERVED("{'cpus':'0-1','gpus':[5]}"));

	expect_cpus(&t->reserved_cpus, "0-1");
	assert_int_equal(t->reserved_gpus, 0x2);
	ft_topology_unref(t);
	expect_error(RESERVED("{'cpus':'7-9'}"),
		     "reserved.cpus: CPU 8 is in no NUMA node");
	expect_error(
	    RESERVED("{'cpus':'x'}"),
	    "reserved.cpus: cpulist \"x\": bad range at offset 0 (CPU ids 0-511, ranges low-high)");
	expect_error(RESERVED("{'gpus':[0]}"),
		     "reserved.gpus[0]: no GPU with index 0");
	expect_error(RESERVED("{'gpus':[3,'5']}"),
		     "reserved.gpus[1]: expected a non-negative integer");
	expect_error(RESERVED("[]"), "reserved: expected an object");
}

static void test_topology__unknown_keys(void **state)
{
	ft_topology_t *t = parse_ok(
	    "{'version':1,'generator':{'name':'x'},'sockets':[{'id':0,'vendor':'AMD','numaNodes':[{'id':0,'cpus':'','memoryMiB':1e3,'distance':[10],'pcieSwitches':[{'id':0,'bus':'0000:1a'}],'gpus':[{'index':0,'uuid':'a','pci':'0000:1b:00.0','mig':{'enabled':false,'mode':'x'}}]}]}]}");

	assert_int_equal(t->n_cpus, 0);
	assert_int_equal(t->numa[0].memory_mib, 1000);
	assert_int_equal(t->n_switches, 1);
	/* An empty switch is still a domain; the GPU has its own. */
	assert_int_equal(n_level(t, FT_LEVEL_PCIE_SWITCH), 2);
	ft_topology_unref(t);
}

/* Memory: run under valgrind, these must leave nothing behind. */

static void parse_prefixes(const char *path)
{
	size_t len = 0;
	char *json = ft_test_read_file(path, &len);
	ft_topology_t *t = NULL;

	assert_non_null(json);
	for (size_t n = 0; n < len - 2; n += 13) {
		assert_int_equal(ft_codec_topology_parse(&t, json, n),
				 FT_EINVAL);
		assert_null(t);
	}
	free(json);
}

static void test_topology__no_leak_on_error(void **state)
{
	ft_topology_t *t = NULL;

	parse_prefixes(EXAMPLES "h100-8x-mig.json");
	parse_prefixes(EXAMPLES "flextopo-graph.json");
	/* Errors found late: after the model holds GPUs, MIG and links. */
	expect_file_error(
	    "topology/bad-nvlink-peer.json",
	    "sockets[1].numaNodes[0].pcieSwitches[0].gpus[2].nvlinks[0].peer: no GPU with index 9");
	expect_error(RESERVED("{'gpus':[9]}"),
		     "reserved.gpus[0]: no GPU with index 9");
	assert_int_equal(ft_codec_topology_parse(&t, NULL, 0), FT_EINVAL);
	assert_null(t);
}

/* 15 GPUs in 5 groups of 3, linked across groups only: 3^5 NVLink cliques. */
static void test_topology__too_many_domains_is_an_error(void **state)
{
	ft_topology_t *t = NULL;
	ft_cpuset_t cpus;
	char uuid[32];

	ft_cpuset_parse(&cpus, "0-7");
	assert_int_equal(ft_topology_new(&t), 0);
	assert_int_equal(ft_topology_add_socket(t, 0), 0);
	assert_int_equal(ft_topology_add_numa(t, 0, 0, &cpus, 1024), 0);
	for (int g = 0; g < 15; g++) {
		snprintf(uuid, sizeof(uuid), "GPU-%d", g);
		assert_int_equal(
		    ft_topology_add_gpu(t, 0, FT_NONE, g, uuid, "x", 1), g);
	}
	for (int a = 0; a < 15; a++)
		for (int b = a + 1; b < 15; b++)
			if (a / 3 != b / 3)
				assert_int_equal(
				    ft_topology_add_nvlink(t, a, b, 1), 0);
	assert_int_equal(ft_topology_finish(t), FT_EINVAL);
	assert_non_null(strstr(ft_error_last(), "more than 128 affinity"));
	ft_topology_unref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_topology__too_many_domains_is_an_error),
	    cmocka_unit_test(test_topology__rtx4090),
	    cmocka_unit_test(test_topology__a100),
	    cmocka_unit_test(test_topology__h100_mig),
	    cmocka_unit_test(test_topology__nvlink_bridges),
	    cmocka_unit_test(test_topology__one_sided_nvlink),
	    cmocka_unit_test(test_topology__graph_example),
	    cmocka_unit_test(test_topology__graph_placement),
	    cmocka_unit_test(test_topology__graph_memory_unknown),
	    cmocka_unit_test(test_topology__graph_gpu_numa_edges),
	    cmocka_unit_test(test_topology__unplaced_gpu_builder),
	    cmocka_unit_test(test_topology__graph_errors),
	    cmocka_unit_test(test_topology__graph_attribute_errors),
	    cmocka_unit_test(test_topology__json_errors),
	    cmocka_unit_test(test_topology__size_cap),
	    cmocka_unit_test(test_topology__field_errors),
	    cmocka_unit_test(test_topology__builder_errors),
	    cmocka_unit_test(test_topology__nvlink_errors),
	    cmocka_unit_test(test_topology__nvlink_both_ends_agree),
	    cmocka_unit_test(test_topology__mig_overlap),
	    cmocka_unit_test(test_topology__mig_bounds),
	    cmocka_unit_test(test_topology__mig_enabled_empty),
	    cmocka_unit_test(test_topology__mig_strategy_inferred),
	    cmocka_unit_test(test_topology__mig_strategy_given),
	    cmocka_unit_test(test_topology__shared_gpus),
	    cmocka_unit_test(test_topology__shared_gpu_errors),
	    cmocka_unit_test(test_topology__reserved),
	    cmocka_unit_test(test_topology__unknown_keys),
	    cmocka_unit_test(test_topology__no_leak_on_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
