/*
 * Node discovery (flextopo-discover): hand-written hwloc XML machines under
 * test/fixtures/hwloc/ (their generator, make-fixtures.py, describes each)
 * read into the model and checked fact by fact; a fake NVML behind the
 * ft_nvml_t table for GPU identity, NVLink counts and MIG; the device
 * plugin's sharing configurations of test/fixtures/sharing/ applied to
 * those machines, checked against golden annotations beside them, and the
 * configurations a node cannot take; the annotation encoder checked by
 * round trips through ft_codec_topology_parse() on every api/examples file
 * and every discovered machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <flextopo/codec.h>
#include <flextopo/cpuset.h>
#include <flextopo/discover.h>
#include <flextopo/error.h>
#include <flextopo/sharing.h>
#include <flextopo/topology.h>

#include "support.h"

#define HWLOC_DIR   FT_FIXTURES_DIR "/hwloc/"
#define SHARING_DIR FT_FIXTURES_DIR "/sharing/"
#define EXAMPLES    FT_SOURCE_DIR "/api/examples/"
#define MIB	    (1024ull * 1024ull)

/* Warnings */

typedef struct warnings {
	unsigned count;
	char text[4096];
} warnings_t;

static void collect(const char *message, void *payload)
{
	warnings_t *w = payload;
	size_t used = strlen(w->text);

	w->count++;
	snprintf(w->text + used, sizeof(w->text) - used, "%s\n", message);
}

/* The fake NVML: GPUs by PCI address, MIG devices, GPU instances. */

#define FAKE_GPUS		     16
#define FAKE_MIGS		     16
#define NVML_ERROR_INVALID_ARGUMENT  2
#define NVML_ERROR_DRIVER_NOT_LOADED 9

typedef struct fake_link {
	bool inactive;
	int type; /* FT_NVML_LINK_*, or -1: the fake does not say */
	unsigned domain, bus, device;
} fake_link_t;

struct ft_nvml_device {
	char bus_id[32]; /* hwloc's spelling, as discovery asks */
	unsigned bus;
	unsigned index;
	char uuid[64];
	char name[96];
	unsigned long long memory;
	unsigned n_links;
	fake_link_t links[FT_NVML_NVLINK_MAX_LINKS];
	bool mig_capable;
	unsigned mig_current, mig_pending;
	unsigned n_mig;
	struct ft_nvml_device *mig[8];
	/* MIG devices */
	struct ft_nvml_device *parent;
	unsigned gpu_instance;
	int placement_result;
	unsigned start, size;
};

struct ft_nvml_gpu_instance {
	struct ft_nvml_device *parent;
	unsigned id;
};

static struct fake {
	int init_result;
	unsigned inits, shutdowns;
	unsigned n_gpus, n_migs, n_instances;
	struct ft_nvml_device gpus[FAKE_GPUS];
	struct ft_nvml_device migs[FAKE_MIGS];
	struct ft_nvml_gpu_instance instances[FAKE_MIGS];
} fake;

static int fake_init(void)
{
	fake.inits++;
	return fake.init_result;
}

static int fake_shutdown(void)
{
	fake.shutdowns++;
	return FT_NVML_SUCCESS;
}

static int fake_by_bus_id(const char *bus_id, ft_nvml_device_t *out)
{
	for (unsigned i = 0; i < fake.n_gpus; i++) {
		if (strcmp(fake.gpus[i].bus_id, bus_id) == 0) {
			*out = &fake.gpus[i];
			return FT_NVML_SUCCESS;
		}
	}
	return FT_NVML_ERROR_NOT_FOUND;
}

static int fake_index(ft_nvml_device_t dev, unsigned *out)
{
	*out = dev->index;
	return FT_NVML_SUCCESS;
}

static int fake_text(char *buf, unsigned len, const char *text)
{
	if (strlen(text) >= len)
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	strcpy(buf, text);
	return FT_NVML_SUCCESS;
}

static int fake_uuid(ft_nvml_device_t dev, char *buf, unsigned len)
{
	return fake_text(buf, len, dev->uuid);
}

static int fake_name(ft_nvml_device_t dev, char *buf, unsigned len)
{
	return fake_text(buf, len, dev->name);
}

static int fake_memory(ft_nvml_device_t dev, ft_nvml_memory_t *out)
{
	out->total = dev->memory;
	out->free = dev->memory;
	out->used = 0;
	return FT_NVML_SUCCESS;
}

static int fake_nvlink_state(ft_nvml_device_t dev, unsigned link, int *active)
{
	if (dev->n_links == 0)
		return FT_NVML_ERROR_NOT_SUPPORTED;
	if (link >= dev->n_links)
		return NVML_ERROR_INVALID_ARGUMENT;
	*active = !dev->links[link].inactive;
	return FT_NVML_SUCCESS;
}

static int fake_remote_type(ft_nvml_device_t dev, unsigned link, int *out)
{
	if (dev->links[link].type < 0)
		return FT_NVML_ERROR_NOT_SUPPORTED;
	*out = dev->links[link].type;
	return FT_NVML_SUCCESS;
}

static int fake_remote_pci(ft_nvml_device_t dev, unsigned link,
			   ft_nvml_pci_t *out)
{
	const fake_link_t *l = &dev->links[link];

	memset(out, 0, sizeof(*out));
	out->domain = l->domain;
	out->bus = l->bus;
	out->device = l->device;
	snprintf(out->bus_id, sizeof(out->bus_id), "%08X:%02X:%02X.0",
		 l->domain, l->bus, l->device);
	return FT_NVML_SUCCESS;
}

static int fake_mig_mode(ft_nvml_device_t dev, unsigned *current,
			 unsigned *pending)
{
	if (!dev->mig_capable)
		return FT_NVML_ERROR_NOT_SUPPORTED;
	*current = dev->mig_current;
	*pending = dev->mig_pending;
	return FT_NVML_SUCCESS;
}

static int fake_max_mig(ft_nvml_device_t dev, unsigned *out)
{
	*out = 7;
	return FT_NVML_SUCCESS;
}

static int fake_mig_by_index(ft_nvml_device_t dev, unsigned index,
			     ft_nvml_device_t *out)
{
	if (index >= dev->n_mig)
		return FT_NVML_ERROR_NOT_FOUND;
	*out = dev->mig[index];
	return FT_NVML_SUCCESS;
}

static int fake_gpu_instance_id(ft_nvml_device_t mig, unsigned *out)
{
	*out = mig->gpu_instance;
	return FT_NVML_SUCCESS;
}

static struct ft_nvml_device *fake_mig_of(struct ft_nvml_device *parent,
					  unsigned id)
{
	for (unsigned k = 0; k < parent->n_mig; k++)
		if (parent->mig[k]->gpu_instance == id)
			return parent->mig[k];
	return NULL;
}

static int fake_gpu_instance_by_id(ft_nvml_device_t dev, unsigned id,
				   ft_nvml_gpu_instance_t *out)
{
	struct ft_nvml_device *mig = fake_mig_of(dev, id);

	if (!mig)
		return FT_NVML_ERROR_NOT_FOUND;
	if (mig->placement_result != FT_NVML_SUCCESS)
		return mig->placement_result;
	fake.instances[fake.n_instances].parent = dev;
	fake.instances[fake.n_instances].id = id;
	*out = &fake.instances[fake.n_instances++];
	return FT_NVML_SUCCESS;
}

static int fake_gpu_instance_info(ft_nvml_gpu_instance_t gi,
				  ft_nvml_gpu_instance_info_t *out)
{
	struct ft_nvml_device *mig = fake_mig_of(gi->parent, gi->id);

	memset(out, 0, sizeof(*out));
	out->device = gi->parent;
	out->id = gi->id;
	out->start = mig->start;
	out->size = mig->size;
	return FT_NVML_SUCCESS;
}

static const ft_nvml_t fake_nvml = {
    .init = fake_init,
    .shutdown = fake_shutdown,
    .device_by_pci_bus_id = fake_by_bus_id,
    .device_index = fake_index,
    .device_uuid = fake_uuid,
    .device_name = fake_name,
    .device_memory = fake_memory,
    .nvlink_state = fake_nvlink_state,
    .nvlink_remote_pci = fake_remote_pci,
    .nvlink_remote_type = fake_remote_type,
    .mig_mode = fake_mig_mode,
    .max_mig_devices = fake_max_mig,
    .mig_device_by_index = fake_mig_by_index,
    .gpu_instance_id = fake_gpu_instance_id,
    .gpu_instance_by_id = fake_gpu_instance_by_id,
    .gpu_instance_info = fake_gpu_instance_info,
};

/* GPU buses of the fixtures, in PCI order. */
static const unsigned rtx4090_buses[8] = {0x04, 0x23, 0x43, 0x63,
					  0x83, 0xa3, 0xc3, 0xe3};
static const unsigned v100_buses[8] = {0x12, 0x16, 0x22, 0x26,
				       0x92, 0x96, 0xa2, 0xa6};

/* A fake NVML that knows these GPUs with index = PCI order. */
static void fake_reset(const unsigned *buses, unsigned n, const char *name,
		       unsigned long long mib)
{
	memset(&fake, 0, sizeof(fake));
	fake.n_gpus = n;
	for (unsigned i = 0; i < n; i++) {
		struct ft_nvml_device *g = &fake.gpus[i];
		snprintf(g->bus_id, sizeof(g->bus_id), "0000:%02x:00.0",
			 buses[i]);
		g->bus = buses[i];
		g->index = i;
		snprintf(g->uuid, sizeof(g->uuid),
			 "GPU-f4ce%04x-0000-4000-8000-00000000000%u", buses[i],
			 i);
		snprintf(g->name, sizeof(g->name), "%s", name);
		g->memory = mib * MIB;
	}
}

/* `n` active links from GPU a to GPU b (both ends). */
static void fake_link_gpus(unsigned a, unsigned b, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		struct ft_nvml_device *x = &fake.gpus[a], *y = &fake.gpus[b];
		x->links[x->n_links++] =
		    (fake_link_t){.type = FT_NVML_LINK_GPU, .bus = y->bus};
		y->links[y->n_links++] =
		    (fake_link_t){.type = FT_NVML_LINK_GPU, .bus = x->bus};
	}
}

static struct ft_nvml_device *fake_add_mig(unsigned gpu, unsigned instance,
					   const char *profile, unsigned start,
					   unsigned size)
{
	struct ft_nvml_device *g = &fake.gpus[gpu];
	struct ft_nvml_device *m = &fake.migs[fake.n_migs++];
	char name[256] = "";

	m->parent = g;
	m->gpu_instance = instance;
	m->start = start;
	m->size = size;
	snprintf(m->uuid, sizeof(m->uuid),
		 "MIG-0b6c%04x-0000-5000-9000-0000000000%02u", g->bus,
		 fake.n_migs);
	/* "NVIDIA H100 80GB HBM3 MIG 3g.40gb" */
	snprintf(name, sizeof(name), "%s MIG %s", g->name, profile);
	memcpy(m->name, name, sizeof(m->name) - 1);
	g->mig[g->n_mig++] = m;
	return m;
}

/* Helpers */

/* Discover the hwloc fixture, with NVML and sharing when not NULL. */
static int discover_shared(ft_topology_t **out, const char *fixture,
			   const ft_nvml_t *nvml, const ft_sharing_t *sharing,
			   warnings_t *w)
{
	char path[512];
	ft_discover_options_t opts = {.xml_path = path,
				      .nvml = nvml,
				      .sharing = sharing,
				      .warn = collect,
				      .payload = w};

	memset(w, 0, sizeof(*w));
	snprintf(path, sizeof(path), "%s%s", HWLOC_DIR, fixture);
	return ft_discover_topology(out, &opts);
}

static ft_topology_t *discover(const char *fixture, const ft_nvml_t *nvml,
			       warnings_t *w)
{
	ft_topology_t *t = NULL;

	if (discover_shared(&t, fixture, nvml, NULL, w) < 0)
		fail_msg("discover %s: %s", fixture, ft_error_last());
	return t;
}

static void assert_cpus(const ft_cpuset_t *cpus, const char *cpulist)
{
	char text[256];

	ft_cpuset_format(text, sizeof(text), cpus);
	assert_string_equal(text, cpulist);
}

static const ft_gpu_t *gpu(const ft_topology_t *t, int index)
{
	int pos = ft_topology_find_gpu_index(t, index);

	assert_true(pos >= 0);
	return &t->gpus[pos];
}

static unsigned links(const ft_topology_t *t, int a, int b)
{
	int pb = ft_topology_find_gpu_index(t, b);

	assert_true(pb >= 0);
	return gpu(t, a)->nvlink_links[pb];
}

/* Position by position: counts, every field, and the derived domains. */
static void assert_same_model(const ft_topology_t *a, const ft_topology_t *b)
{
	assert_int_equal(a->n_sockets, b->n_sockets);
	assert_int_equal(a->n_numa, b->n_numa);
	assert_int_equal(a->n_switches, b->n_switches);
	assert_int_equal(a->n_gpus, b->n_gpus);
	assert_int_equal(a->n_mig, b->n_mig);
	assert_int_equal(a->n_cpus, b->n_cpus);
	for (unsigned i = 0; i < a->n_sockets; i++)
		assert_memory_equal(&a->sockets[i], &b->sockets[i],
				    sizeof(a->sockets[i]));
	for (unsigned i = 0; i < a->n_numa; i++)
		assert_memory_equal(&a->numa[i], &b->numa[i],
				    sizeof(a->numa[i]));
	for (unsigned i = 0; i < a->n_switches; i++)
		assert_memory_equal(&a->switches[i], &b->switches[i],
				    sizeof(a->switches[i]));
	for (unsigned i = 0; i < a->n_gpus; i++) {
		const ft_gpu_t *x = &a->gpus[i], *y = &b->gpus[i];
		assert_int_equal(x->index, y->index);
		assert_string_equal(x->uuid, y->uuid);
		assert_string_equal(x->model, y->model);
		assert_int_equal(x->memory_mib, y->memory_mib);
		assert_int_equal(x->numa, y->numa);
		assert_int_equal(x->socket, y->socket);
		assert_int_equal(x->pcie_switch, y->pcie_switch);
		assert_int_equal(x->nvlink_peers, y->nvlink_peers);
		assert_memory_equal(x->nvlink_links, y->nvlink_links,
				    sizeof(x->nvlink_links));
		assert_int_equal(x->mig_enabled, y->mig_enabled);
		assert_int_equal(x->replicas, y->replicas);
	}
	for (unsigned i = 0; i < a->n_mig; i++) {
		assert_string_equal(a->mig[i].profile, b->mig[i].profile);
		assert_string_equal(a->mig[i].uuid, b->mig[i].uuid);
		assert_int_equal(a->mig[i].gpu, b->mig[i].gpu);
		assert_int_equal(a->mig[i].start, b->mig[i].start);
		assert_int_equal(a->mig[i].size, b->mig[i].size);
	}
	assert_int_equal(a->n_domains, b->n_domains);
	assert_memory_equal(a->domains, b->domains,
			    a->n_domains * sizeof(*a->domains));
	assert_memory_equal(a->level_first, b->level_first,
			    sizeof(a->level_first));
	assert_int_equal(a->whole_gpus, b->whole_gpus);
	assert_int_equal(a->shared_gpus, b->shared_gpus);
	assert_true(a->shared_resource == b->shared_resource ||
		    (a->shared_resource && b->shared_resource &&
		     !strcmp(a->shared_resource, b->shared_resource)));
	assert_int_equal(a->reserved_gpus, b->reserved_gpus);
	assert_true(ft_cpuset_equal(&a->reserved_cpus, &b->reserved_cpus));
	assert_int_equal(a->mig_strategy, b->mig_strategy);
	assert_int_equal(a->mig_strategy_given, b->mig_strategy_given);
}

/*
 * encode(t) parses back to the same model, and encoding that model gives
 * the same text again.
 */
static void assert_round_trip(const ft_topology_t *t)
{
	ft_topology_t *back = NULL;
	char *text = NULL, *again = NULL;

	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	if (ft_codec_topology_parse(&back, text, strlen(text)) < 0)
		fail_msg("parse of encoded topology: %s\n%s", ft_error_last(),
			 text);
	assert_same_model(t, back);
	assert_int_equal(ft_codec_topology_encode(&again, back), 0);
	assert_string_equal(text, again);
	free(text);
	free(again);
	ft_topology_unref(back);
}

/* Machines from hwloc XML */

static void test_discover__rtx4090(void **state)
{
	warnings_t w;
	ft_topology_t *t = discover("rtx4090-8x.xml", NULL, &w);
	char uuid[64];

	assert_int_equal(t->n_sockets, 2);
	assert_int_equal(t->n_numa, 8);
	assert_int_equal(t->n_gpus, 8);
	assert_int_equal(t->n_switches, 8);
	assert_int_equal(t->n_cpus, 64);
	for (int k = 0; k < 8; k++) {
		const ft_numa_node_t *n = &t->numa[k];
		const ft_gpu_t *g = gpu(t, k);
		assert_int_equal(n->id, k);
		assert_int_equal(t->sockets[n->socket].id, k / 4);
		assert_int_equal(n->n_cpus, 8);
		assert_true(ft_cpuset_has(&n->cpus, 8 * k) &&
			    ft_cpuset_has(&n->cpus, 8 * k + 7));
		assert_int_equal(n->memory_mib, 64 * 1024 - 17 * k);
		/* GPU k: NUMA k, its own switch, in PCI order; no NVML and no
		 * hwloc NVML data, so the uuid is the PCI stand-in. */
		assert_int_equal(t->numa[g->numa].id, k);
		assert_int_equal(t->sockets[g->socket].id, k / 4);
		assert_true(g->pcie_switch != FT_NONE);
		assert_int_equal(t->switches[g->pcie_switch].numa, g->numa);
		assert_int_equal(t->switches[g->pcie_switch].gpus,
				 1u << (g - t->gpus));
		snprintf(uuid, sizeof(uuid), "GPU-PCI-0000:%02x:00.0",
			 rtx4090_buses[k]);
		assert_string_equal(g->uuid, uuid);
		assert_string_equal(g->model, "");
		assert_int_equal(g->nvlink_peers, 0);
		assert_false(g->mig_enabled);
	}
	assert_cpus(&t->numa[0].cpus, "0-7");
	assert_cpus(&t->numa[7].cpus, "56-63");
	/* The BMC's VGA and the GPUs' audio functions are no GPUs. */
	assert_int_equal(w.count, 8);
	assert_non_null(strstr(
	    w.text,
	    "GPU 0000:04:00.0: neither NVML nor hwloc knows it: index 0"));
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__v100_hwloc_nvlink(void **state)
{
	static const int dgx1[8][8] = {
	    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
	    {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
	    {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
	    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
	warnings_t w;
	ft_topology_t *t = discover("v100-8x-nvlink.xml", NULL, &w);
	char uuid[64];

	assert_int_equal(w.count, 0);
	assert_int_equal(t->n_sockets, 2);
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_gpus, 8);
	assert_int_equal(t->n_switches, 4);
	assert_cpus(&t->numa[0].cpus, "0-7,16-23");
	assert_cpus(&t->numa[1].cpus, "8-15,24-31");
	assert_int_equal(t->numa[0].memory_mib, 256 * 1024);
	assert_int_equal(t->numa[1].memory_mib, 256 * 1024 - 300);
	for (int i = 0; i < 8; i++) {
		const ft_gpu_t *g = gpu(t, i);
		/* From hwloc's nvml and cuda OS devices. */
		snprintf(uuid, sizeof(uuid),
			 "GPU-%08x-1dbb-4a3f-9c1e-5d0e7a6b%04x", 0x3a7c1f00 + i,
			 0xd100 + i);
		assert_string_equal(g->uuid, uuid);
		assert_string_equal(g->model, "Tesla V100-SXM2-32GB");
		assert_int_equal(g->memory_mib, 32768);
		assert_int_equal(t->numa[g->numa].id, i / 4);
		/* Two GPUs per switch, two switches per socket. */
		assert_int_equal(g->pcie_switch, i / 2);
		assert_int_equal(t->switches[g->pcie_switch].id, i / 2);
		assert_int_equal(t->switches[g->pcie_switch].gpus,
				 3u << (2 * (i / 2)));
		for (int j = 0; j < 8; j++)
			assert_int_equal(links(t, i, j), dgx1[i][j]);
	}
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__a100_hwloc_nvswitch(void **state)
{
	warnings_t w;
	ft_topology_t *t = discover("a100-4x-nvswitch.xml", NULL, &w);

	/* hwloc lists GPU-to-NVSwitch bandwidth; through the switches every
	 * pair gets the smaller of the two GPUs' link counts: 12 (A100: 50000
	 * MB/s per link), 11 with GPU 3, which has a link down. */
	assert_int_equal(w.count, 0);
	assert_int_equal(t->n_gpus, 4);
	assert_int_equal(t->n_switches, 2);
	assert_string_equal(gpu(t, 2)->uuid,
			    "GPU-a100a100-0000-4000-8000-000000000002");
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			assert_int_equal(links(t, i, j), i == j ? 0
							 : i == 3 || j == 3
							     ? 11
							     : 12);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__no_gpu(void **state)
{
	warnings_t w;
	ft_topology_t *t = discover("no-gpu.xml", NULL, &w);
	char *text = NULL;

	assert_int_equal(w.count, 0);
	assert_int_equal(t->n_sockets, 1);
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_gpus, 0);
	assert_int_equal(t->n_switches, 0);
	assert_cpus(&t->numa[1].cpus, "4-7");
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_string_equal(
	    text,
	    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-3\",\"memoryMiB\":32768},{\"id\":1,\"cpus\":\"4-7\",\"memoryMiB\":32768}]}]}");
	free(text);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__root_port_and_cpuless_numa(void **state)
{
	warnings_t w;
	ft_topology_t *t = discover("workstation-2x.xml", NULL, &w);

	/* The CXL node has no CPUs and is left out. */
	assert_int_equal(t->n_numa, 1);
	assert_int_equal(t->numa[0].id, 0);
	assert_non_null(
	    strstr(w.text, "NUMA node 1 shares the CPUs of NUMA node 0"));
	assert_int_equal(t->n_gpus, 2);
	/* 01:00.0 sits on a root port: no switch. 07:00.0 is behind one. */
	assert_string_equal(gpu(t, 0)->uuid, "GPU-PCI-0000:01:00.0");
	assert_int_equal(gpu(t, 0)->pcie_switch, FT_NONE);
	assert_string_equal(gpu(t, 1)->uuid, "GPU-PCI-0000:07:00.0");
	assert_int_equal(gpu(t, 1)->pcie_switch, 0);
	assert_int_equal(t->n_switches, 1);
	/* Switch GPUs come first in the canonical order. */
	assert_int_equal(t->gpus[0].index, 1);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__vm_without_locality(void **state)
{
	warnings_t w;
	ft_topology_t *t = discover("vm-1x.xml", NULL, &w);

	/* On the host bus itself (no bridge): no switch; no locality: the
	 * first NUMA node, with a warning. */
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_gpus, 1);
	assert_int_equal(t->n_switches, 0);
	assert_int_equal(t->gpus[0].pcie_switch, FT_NONE);
	assert_int_equal(t->numa[t->gpus[0].numa].id, 0);
	assert_int_equal(w.count, 2);
	assert_non_null(
	    strstr(w.text, "GPU 0000:00:05.0: its NUMA node is unknown"));
	assert_round_trip(t);
	ft_topology_unref(t);
}

/*
 * A real machine: test/fixtures/hwloc/h100-vm-lstopo.xml is `lstopo --of xml`
 * on a virtual machine with one NVIDIA H100 80GB HBM3 (driver 580.159.04),
 * one NUMA node and the GPU on the host bus with sysfs numa_node -1. There
 * flextopo-discover with the real NVML printed exactly `want` below; the
 * fake NVML answers as that NVML did (the uuid, name and memory nvidia-smi
 * showed).
 */
static void test_discover__h100_vm_real(void **state)
{
	static const unsigned buses[1] = {0x00};
	static const char *want =
	    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-15\",\"memoryMiB\":4571,\"gpus\":[{\"index\":0,\"uuid\":\"GPU-b25e4eb2-0d35-b6ef-0869-242ae5faf4b6\",\"model\":\"NVIDIA H100 80GB HBM3\",\"memoryMiB\":81559}]}]}]}";
	warnings_t w;
	ft_topology_t *t;
	char *text = NULL;

	fake_reset(buses, 1, "NVIDIA H100 80GB HBM3", 81559);
	snprintf(fake.gpus[0].bus_id, sizeof(fake.gpus[0].bus_id),
		 "0000:00:06.0");
	fake.gpus[0].bus = 0;
	snprintf(fake.gpus[0].uuid, sizeof(fake.gpus[0].uuid),
		 "GPU-b25e4eb2-0d35-b6ef-0869-242ae5faf4b6");
	t = discover("h100-vm-lstopo.xml", &fake_nvml, &w);
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_string_equal(text, want);
	assert_int_equal(w.count, 0);
	free(text);
	ft_topology_unref(t);
	/* Without NVML, hwloc's OpenCL device names no uuid: the stand-in. */
	t = discover("h100-vm-lstopo.xml", NULL, &w);
	assert_string_equal(t->gpus[0].uuid, "GPU-PCI-0000:00:06.0");
	assert_int_equal(t->numa[t->gpus[0].numa].id, 0);
	assert_non_null(strstr(
	    w.text,
	    "GPU 0000:00:06.0: neither NVML nor hwloc knows it: index 0"));
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__this_machine(void **state)
{
	ft_discover_options_t opts = {0};
	ft_topology_t *t = NULL;
	int rc;

	/* hwloc's pci component (libpciaccess) leaks a few bytes per load,
	 * lstopo included, which LeakSanitizer and valgrind would blame on
	 * this test; the fixtures above cover the PCI side. */
	setenv("HWLOC_COMPONENTS", "-pci", 1);
	rc = ft_discover_topology(&t, &opts);
	unsetenv("HWLOC_COMPONENTS");
	if (rc < 0)
		fail_msg("discover this machine: %s", ft_error_last());
	assert_true(t->n_sockets >= 1);
	assert_true(t->n_numa >= 1);
	assert_true(t->n_cpus >= 1);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__errors(void **state)
{
	char path[] = "/tmp/test_discover_XXXXXX";
	ft_discover_options_t opts = {.xml_path = HWLOC_DIR "no-such.xml"};
	ft_topology_t *t = NULL;
	int fd;

	assert_int_equal(ft_discover_topology(&t, &opts), FT_EIO);
	assert_null(t);
	assert_non_null(strstr(ft_error_last(), "no-such.xml: No such file"));

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "<topology>not hwloc", 19), 19);
	close(fd);
	opts.xml_path = path;
	setenv("HWLOC_XML_VERBOSE", "0", 1);
	assert_int_equal(ft_discover_topology(&t, &opts), FT_EIO);
	assert_null(t);
	assert_non_null(strstr(ft_error_last(), "file /tmp/test_discover_"));
	assert_non_null(strstr(ft_error_last(), "hwloc"));
	unsetenv("HWLOC_XML_VERBOSE");
	unlink(path);
}

/* The fake NVML */

static void test_discover__nvml_identity(void **state)
{
	warnings_t w;
	ft_topology_t *t;

	/* NVML numbers the GPUs backwards and names them. */
	fake_reset(rtx4090_buses, 8, "NVIDIA GeForce RTX 4090", 24564);
	for (unsigned i = 0; i < 8; i++)
		fake.gpus[i].index = 7 - i;
	t = discover("rtx4090-8x.xml", &fake_nvml, &w);
	assert_int_equal(w.count, 0);
	assert_int_equal(fake.inits, 1);
	assert_int_equal(fake.shutdowns, 1);
	assert_int_equal(t->n_gpus, 8);
	for (int k = 0; k < 8; k++) {
		const ft_gpu_t *g = gpu(t, 7 - k);
		assert_string_equal(g->uuid, fake.gpus[k].uuid);
		assert_string_equal(g->model, "NVIDIA GeForce RTX 4090");
		assert_int_equal(g->memory_mib, 24564);
		assert_int_equal(t->numa[g->numa].id, k);
		assert_int_equal(g->nvlink_peers, 0);
	}
	/* Positions follow NUMA order, whatever the index. */
	assert_int_equal(t->gpus[0].index, 7);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__nvml_nvlinks_win_over_hwloc(void **state)
{
	warnings_t w;
	ft_topology_t *t;

	/* hwloc's matrix says hybrid cube mesh; NVML (the live truth) says
	 * bridged pairs with 4 links, one of them down. */
	fake_reset(v100_buses, 8, "Tesla V100-SXM2-32GB", 32510);
	for (unsigned i = 0; i < 8; i += 2)
		fake_link_gpus(i, i + 1, 4);
	fake.gpus[0].links[3].inactive = true;
	fake.gpus[1].links[3].inactive = true;
	t = discover("v100-8x-nvlink.xml", &fake_nvml, &w);
	assert_int_equal(w.count, 0);
	assert_string_equal(gpu(t, 0)->uuid, fake.gpus[0].uuid);
	assert_int_equal(gpu(t, 0)->memory_mib, 32510);
	assert_int_equal(links(t, 0, 1), 3);
	assert_int_equal(links(t, 2, 3), 4);
	assert_int_equal(links(t, 6, 7), 4);
	assert_int_equal(links(t, 0, 3), 0);
	assert_int_equal(links(t, 0, 4), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(gpu(t, i)->nvlink_peers,
				 1u << ft_topology_find_gpu_index(t, i ^ 1));
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__nvml_nvswitch(void **state)
{
	warnings_t w;
	ft_topology_t *t;

	/* 12 links per GPU to NVSwitches: NV12 between every pair. GPU 0
	 * has a driver without the remote type: its far ends are NVSwitch
	 * addresses hwloc does not know (switches), plus one link to the
	 * BMC's VGA (a foreign device: not a switch). GPU 7 has one link
	 * down: 11 to the switches. */
	fake_reset(rtx4090_buses, 8, "NVIDIA A100-SXM4-80GB", 81920);
	for (unsigned i = 0; i < 8; i++) {
		struct ft_nvml_device *g = &fake.gpus[i];
		for (unsigned k = 0; k < 12; k++)
			g->links[g->n_links++] = (fake_link_t){
			    .type = i == 0 ? -1 : FT_NVML_LINK_SWITCH,
			    .domain = 0,
			    .bus = 0xf0 + k / 2,
			    .device = 0};
	}
	fake.gpus[0].links[fake.gpus[0].n_links++] =
	    (fake_link_t){.type = -1, .bus = 0x01};
	fake.gpus[7].links[5].inactive = true;
	t = discover("rtx4090-8x.xml", &fake_nvml, &w);
	assert_int_equal(w.count, 0);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 8; j++)
			assert_int_equal(links(t, i, j), i == j ? 0
							 : i == 7 || j == 7
							     ? 11
							     : 12);
	/* One NVLink domain of all 8 GPUs. */
	assert_int_equal(t->level_first[FT_LEVEL_NVLINK + 1] -
			     t->level_first[FT_LEVEL_NVLINK],
			 1);
	assert_int_equal(t->domains[t->level_first[FT_LEVEL_NVLINK]].gpus,
			 0xff);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__nvml_mig(void **state)
{
	struct ft_nvml_device *denied;
	warnings_t w;
	ft_topology_t *t;
	const ft_gpu_t *g;

	fake_reset(rtx4090_buses, 8, "NVIDIA H100 80GB HBM3", 81559);
	for (unsigned i = 0; i < 8; i++)
		fake.gpus[i].mig_capable = true;
	/* GPU 1: 4g at 0 and 3g at 4, the 3g split into two compute
	 * instances (two MIG devices, one GPU instance). */
	fake.gpus[1].mig_current = fake.gpus[1].mig_pending = 1;
	fake_add_mig(1, 5, "4g.40gb", 0, 4);
	fake_add_mig(1, 2, "3g.40gb", 4, 4);
	fake_add_mig(1, 2, "1c.3g.40gb", 4, 4);
	/* GPU 2: MIG on, no instances yet. GPU 3: one 7g whose placement
	 * NVML refuses to tell. */
	fake.gpus[2].mig_current = fake.gpus[2].mig_pending = 1;
	fake.gpus[3].mig_current = fake.gpus[3].mig_pending = 1;
	denied = fake_add_mig(3, 0, "7g.80gb", 0, 8);
	denied->placement_result = FT_NVML_ERROR_NO_PERMISSION;
	/* GPU 4: MIG turned on, waiting for a reset. */
	fake.gpus[4].mig_pending = 1;
	t = discover("rtx4090-8x.xml", &fake_nvml, &w);

	g = gpu(t, 1);
	assert_true(g->mig_enabled);
	assert_int_equal(t->n_mig, 2);
	assert_int_equal(t->mig[0].gpu, g - t->gpus);
	assert_string_equal(t->mig[0].profile, "4g.40gb");
	assert_string_equal(t->mig[0].uuid, fake.migs[0].uuid);
	assert_int_equal(t->mig[0].start, 0);
	assert_int_equal(t->mig[0].size, 4);
	assert_string_equal(t->mig[1].profile, "3g.40gb");
	assert_string_equal(t->mig[1].uuid, fake.migs[1].uuid);
	assert_int_equal(t->mig[1].start, 4);
	assert_int_equal(t->mig[1].size, 4);
	assert_true(gpu(t, 2)->mig_enabled);
	assert_true(gpu(t, 3)->mig_enabled);
	assert_false(gpu(t, 4)->mig_enabled);
	assert_false(gpu(t, 0)->mig_enabled);
	assert_int_equal(t->whole_gpus & (1u << (g - t->gpus)), 0);
	assert_int_equal(w.count, 2);
	assert_non_null(strstr(w.text, "Insufficient Permissions"));
	assert_non_null(strstr(w.text, "waits for a GPU reset"));
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__nvml_unknown_gpu_left_out(void **state)
{
	warnings_t w;
	ft_topology_t *t;

	fake_reset(rtx4090_buses, 8, "NVIDIA GeForce RTX 4090", 24564);
	fake.gpus[5] = fake.gpus[7]; /* 0000:a3:00.0 fell off the bus */
	fake.n_gpus = 7;
	t = discover("rtx4090-8x.xml", &fake_nvml, &w);
	assert_int_equal(t->n_gpus, 7);
	assert_int_equal(ft_topology_find_gpu_index(t, 5), -1);
	assert_int_equal(t->numa[5].gpus, 0);
	assert_int_equal(t->n_switches, 7);
	assert_int_equal(w.count, 1);
	assert_non_null(strstr(
	    w.text,
	    "GPU 0000:a3:00.0: NVML cannot use it (Not Found); left out"));
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__nvml_init_fails(void **state)
{
	warnings_t w;
	ft_topology_t *t;

	fake_reset(v100_buses, 8, "unused", 1);
	fake.init_result = NVML_ERROR_DRIVER_NOT_LOADED;
	t = discover("v100-8x-nvlink.xml", &fake_nvml, &w);
	assert_int_equal(fake.shutdowns, 0);
	assert_int_equal(w.count, 1);
	assert_non_null(strstr(
	    w.text,
	    "NVML did not start (Driver Not Loaded); going on without it"));
	/* hwloc's data takes over, NVLinks included. */
	assert_string_equal(gpu(t, 0)->model, "Tesla V100-SXM2-32GB");
	assert_int_equal(links(t, 0, 3), 2);
	ft_topology_unref(t);
}

static void test_discover__nvml_library(void **state)
{
	ft_nvml_t *nvml = NULL;
	int rc;

	assert_int_equal(
	    ft_discover_nvml_new(&nvml, "libflextopo-no-such-nvml.so.1"),
	    FT_EUNAVAIL);
	assert_null(nvml);
	assert_non_null(strstr(ft_error_last(), "NVML: "));
	assert_non_null(strstr(ft_error_last(), "libflextopo-no-such-nvml"));
	/* A library that is not NVML. */
	assert_int_equal(ft_discover_nvml_new(&nvml, "libc.so.6"), FT_EUNAVAIL);
	assert_string_equal(ft_error_last(),
			    "NVML: libc.so.6 lacks nvmlInit_v2");
	/* The real one loads where a driver is installed, and is cleanly
	 * unavailable elsewhere. */
	rc = ft_discover_nvml_new(&nvml, NULL);
	assert_true(rc == 0 || rc == FT_EUNAVAIL);
	assert_true(rc < 0 || (nvml && nvml->init && nvml->device_uuid));
	ft_discover_nvml_free(nvml);
	ft_discover_nvml_free(NULL);
}

/* Shared GPUs: the device plugin's sharing configuration */

/* Two MIG-enabled GPUs on the fake 8x machine: 1 with an instance, 2 not
 * yet partitioned. */
static void fake_mig_on_1_and_2(void)
{
	fake_reset(rtx4090_buses, 8, "NVIDIA H100 80GB HBM3", 81559);
	for (unsigned i = 1; i <= 2; i++) {
		fake.gpus[i].mig_capable = true;
		fake.gpus[i].mig_current = fake.gpus[i].mig_pending = 1;
	}
	fake_add_mig(1, 1, "7g.80gb", 0, 8);
}

/*
 * The annotation of `fixture` with test/fixtures/sharing/`config` is the
 * golden file `golden` there (compact JSON, one line); the model round
 * trips; there are `n_warnings` warnings, `warning` (when not NULL) among
 * them.
 */
static void assert_golden(const char *fixture, const ft_nvml_t *nvml,
			  const char *config, const char *golden,
			  unsigned n_warnings, const char *warning)
{
	char path[512], *text = NULL, *want = NULL;
	ft_topology_t *t = NULL;
	ft_sharing_t s;
	warnings_t w;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s%s", SHARING_DIR, config);
	if (ft_codec_sharing_load(&s, path) < 0 ||
	    discover_shared(&t, fixture, nvml, &s, &w) < 0)
		fail_msg("%s with %s: %s", fixture, config, ft_error_last());
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	snprintf(path, sizeof(path), "%s%s", SHARING_DIR, golden);
	want = ft_test_read_file(path, &len);
	assert_non_null(want);
	while (len > 0 && want[len - 1] == '\n')
		want[--len] = '\0';
	if (strcmp(text, want))
		fail_msg("%s with %s:\n%s\nis not %s", fixture, config, text,
			 golden);
	if (w.count != n_warnings || (warning && !strstr(w.text, warning)))
		fail_msg("%u warnings, not %u with \"%s\":\n%s", w.count,
			 n_warnings, warning ? warning : "", w.text);
	assert_round_trip(t);
	free(text);
	free(want);
	ft_sharing_dispose(&s);
	ft_topology_unref(t);
}

static void test_discover__sharing_whole(void **state)
{
	assert_golden("a100-4x-nvswitch.xml", NULL, "time-slicing.yaml",
		      "time-slicing.a100-4x.json", 0, NULL);
	assert_golden("a100-4x-nvswitch.xml", NULL, "renamed.yaml",
		      "renamed.a100-4x.json", 0, NULL);
}

static void test_discover__sharing_subsets(void **state)
{
	/* Indexes 0, 2, 5; the plugin's own releases would share all. */
	assert_golden(
	    "v100-8x-nvlink.xml", NULL, "by-index.yaml",
	    "by-index.v100-8x.json", 1,
	    "by-index.yaml:9: sharing.timeSlicing.resources[0].devices: released NVIDIA device plugins (v0.20 and earlier) ignore this field and share every GPU; the annotation follows this file\n");
	/* UUIDs from NVML: indexes 1 and 7; the MIG entry is left out. */
	fake_reset(rtx4090_buses, 8, "NVIDIA GeForce RTX 4090", 24564);
	assert_golden(
	    "rtx4090-8x.xml", &fake_nvml, "by-uuid.yaml",
	    "by-uuid.rtx4090-8x.json", 2,
	    "by-uuid.yaml:10: sharing.timeSlicing.resources[0].devices[1]: a MIG device: replicas of MIG instances are not in the annotation; left out\n");
	/* MPS, a count of 2 (GPUs 0 and 1), renamed. */
	assert_golden(
	    "v100-8x-nvlink.xml", NULL, "mps.yaml", "mps.v100-8x.json", 2,
	    "mps.yaml:8: sharing.mps.resources[0].rename: released NVIDIA device plugins (v0.20 and earlier) ignore this field and keep the default name; the annotation follows this file\n");
}

/* "all" passes over MIG-enabled GPUs 1 and 2: under the mixed strategy
 * they are no nvidia.com/gpu devices. */
static void test_discover__sharing_passes_over_mig(void **state)
{
	fake_mig_on_1_and_2();
	assert_golden(
	    "rtx4090-8x.xml", &fake_nvml, "time-slicing.yaml",
	    "time-slicing.mig-mixed.json", 2,
	    "time-slicing.yaml:11: sharing.timeSlicing.resources[0]: GPU 1 is MIG-enabled, no nvidia.com/gpu device: left unshared\n");
}

/* A node without GPUs takes any configuration and shares nothing. */
static void test_discover__sharing_without_gpus(void **state)
{
	ft_topology_t *t = NULL;
	ft_sharing_t s;
	warnings_t w;

	assert_int_equal(ft_codec_sharing_load(&s, SHARING_DIR "renamed.yaml"),
			 0);
	assert_int_equal(discover_shared(&t, "no-gpu.xml", NULL, &s, &w), 0);
	assert_int_equal(w.count, 0);
	assert_int_equal(t->shared_gpus, 0);
	assert_null(t->shared_resource);
	ft_topology_unref(t);
	ft_sharing_dispose(&s);
}

/* `yaml` (as s.yaml) cannot be applied to `fixture`: exactly `message`. */
static void assert_refused(const char *fixture, const ft_nvml_t *nvml,
			   const char *yaml, const char *message)
{
	ft_topology_t *t = NULL;
	ft_sharing_t s;
	warnings_t w;

	if (ft_codec_sharing_decode(&s, yaml, strlen(yaml), "s.yaml") < 0)
		fail_msg("%s: %s", yaml, ft_error_last());
	assert_int_equal(discover_shared(&t, fixture, nvml, &s, &w), FT_EINVAL);
	assert_null(t);
	assert_string_equal(ft_error_last(), message);
	ft_sharing_dispose(&s);
}

#define TIME_SLICED(entries)                                                   \
	"sharing:\n  timeSlicing:\n    resources:\n" entries
#define GPU_ENTRY(replicas)                                                    \
	"    - name: nvidia.com/gpu\n      replicas: " #replicas "\n"
#define A100_UUID(i) "GPU-a100a100-0000-4000-8000-00000000000" #i

static void test_discover__sharing_refused(void **state)
{
	static const char a100[] = "a100-4x-nvswitch.xml";

	assert_refused(
	    a100, NULL, TIME_SLICED(GPU_ENTRY(2) "      devices: [1, 9]\n"),
	    "s.yaml:6: sharing.timeSlicing.resources[0].devices[1]: no GPU with index 9 on this node");
	assert_refused(
	    a100, NULL, TIME_SLICED(GPU_ENTRY(2) "      devices: [GPU-nope]\n"),
	    "s.yaml:6: sharing.timeSlicing.resources[0].devices[0]: no GPU with UUID GPU-nope on this node");
	assert_refused(
	    a100, NULL,
	    TIME_SLICED(GPU_ENTRY(2) "      devices: [0, " A100_UUID(0) "]\n"),
	    "s.yaml:6: sharing.timeSlicing.resources[0].devices[1]: GPU 0 (" A100_UUID(
		0) ") is named twice");
	assert_refused(
	    a100, NULL,
	    TIME_SLICED(GPU_ENTRY(2) "      devices: [" A100_UUID(
		3) "]\n" GPU_ENTRY(3)),
	    "s.yaml:7: sharing.timeSlicing.resources[1].devices: GPU 3 (" A100_UUID(
		3) ") is shared by resources[0] already");
	assert_refused(
	    a100, NULL, TIME_SLICED(GPU_ENTRY(2) "      devices: 5\n"),
	    "s.yaml:6: sharing.timeSlicing.resources[0].devices: 5 GPUs asked for, this node has 4 that are not MIG-enabled");
	assert_refused(
	    a100, NULL,
	    TIME_SLICED(GPU_ENTRY(2) "      devices: [0]\n" GPU_ENTRY(
		2) "      devices: [1]\n      rename: x.io/gpu\n"),
	    "s.yaml:7: sharing.timeSlicing.resources[1]: its replicas go by x.io/gpu, those of resources[0] by nvidia.com/gpu; the annotation has one sharedResource");
}

static void test_discover__sharing_refused_on_mig(void **state)
{
	fake_mig_on_1_and_2();
	assert_refused(
	    "rtx4090-8x.xml", &fake_nvml,
	    TIME_SLICED(GPU_ENTRY(4) "      devices: [0, \"2\"]\n"),
	    "s.yaml:6: sharing.timeSlicing.resources[0].devices[1]: GPU 2 (GPU-f4ce0043-0000-4000-8000-000000000002) is MIG-enabled; a MIG-enabled GPU cannot take replicas");
	/* Every GPU MIG-enabled: "all" would mean the MIG instances. */
	for (unsigned i = 0; i < 8; i++) {
		fake.gpus[i].mig_capable = true;
		fake.gpus[i].mig_current = fake.gpus[i].mig_pending = 1;
	}
	assert_refused(
	    "rtx4090-8x.xml", &fake_nvml, TIME_SLICED(GPU_ENTRY(4)),
	    "s.yaml:4: sharing.timeSlicing.resources[0]: every GPU of this node is MIG-enabled; a MIG-enabled GPU cannot take replicas");
}

/* Replicas of MIG resources have no place in the annotation. */
static void test_discover__sharing_mig_resource_left_out(void **state)
{
	static const char yaml[] =
	    TIME_SLICED("    - name: nvidia.com/mig-1g.10gb\n"
			"      replicas: 2\n");
	ft_topology_t *t = NULL;
	ft_sharing_t s;
	warnings_t w;

	assert_int_equal(
	    ft_codec_sharing_decode(&s, yaml, strlen(yaml), "s.yaml"), 0);
	fake_mig_on_1_and_2();
	assert_int_equal(
	    discover_shared(&t, "rtx4090-8x.xml", &fake_nvml, &s, &w), 0);
	assert_int_equal(t->shared_gpus, 0);
	assert_int_equal(w.count, 1);
	assert_string_equal(
	    w.text,
	    "s.yaml:4: sharing.timeSlicing.resources[0].name: replicas of MIG instances are not in the annotation; left out\n");
	ft_topology_unref(t);
	ft_sharing_dispose(&s);
}

/* The encoder */

static ft_topology_t *parse_path(const char *path)
{
	ft_topology_t *t = NULL;
	size_t len = 0;
	char *json = ft_test_read_file(path, &len);

	assert_non_null(json);
	if (ft_codec_topology_parse(&t, json, len) < 0)
		fail_msg("%s: %s", path, ft_error_last());
	free(json);
	return t;
}

static void round_trip_file(const char *dir, const char *name)
{
	char path[512];
	ft_topology_t *t;

	snprintf(path, sizeof(path), "%s%s", dir, name);
	t = parse_path(path);
	assert_round_trip(t);
	ft_topology_unref(t);
}

static void test_discover__encode_examples(void **state)
{
	round_trip_file(EXAMPLES, "rtx4090-8x.json");
	round_trip_file(EXAMPLES, "a100-8x.json");
	round_trip_file(EXAMPLES, "h100-8x-mig.json");
	/* A graph whose GPUs all have a NUMANode: the schema says it all. */
	round_trip_file(FT_FIXTURES_DIR "/topology/",
			"graph-gpu-numa-edges.json");
}

/* What the schema cannot say (a graph's unknowns) is refused, not guessed. */
static void expect_encode_refused(const char *path, const char *message)
{
	ft_topology_t *t = parse_path(path);
	char *text = (char *)1;

	assert_int_equal(ft_codec_topology_encode(&text, t), FT_EINVAL);
	assert_null(text);
	assert_string_equal(ft_error_last(), message);
	ft_topology_unref(t);
}

static void test_discover__encode_refuses_unknowns(void **state)
{
	expect_encode_refused(
	    EXAMPLES "flextopo-graph.json",
	    "encode: GPU 1: NUMA node unknown, which the schema cannot express");
	expect_encode_refused(
	    FT_FIXTURES_DIR "/topology/graph-no-memory.json",
	    "encode: NUMA node 0: memory unknown, which the schema cannot express");
}

/* A given MIG strategy is written back; an inferred one is left out. */
static void test_discover__encode_mig_strategy(void **state)
{
	static const char json[] =
	    "{\"version\":1,\"sockets\":[{\"id\":0,\"numaNodes\":[{\"id\":0,\"cpus\":\"0-3\",\"memoryMiB\":1024,\"gpus\":[{\"index\":0,\"uuid\":\"GPU-a\",\"mig\":{\"enabled\":true,\"instances\":[{\"profile\":\"3g.40gb\",\"start\":0,\"size\":4,\"uuid\":\"MIG-a\"}]}}]}]}],\"migStrategy\":\"mixed\"}";
	ft_topology_t *t = NULL;
	char *text = NULL;

	if (ft_codec_topology_parse(&t, json, strlen(json)) < 0)
		fail_msg("%s", ft_error_last());
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_string_equal(text, json);
	assert_round_trip(t);
	free(text);
	t->mig_strategy_given = false;
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_null(strstr(text, "migStrategy"));
	free(text);
	ft_topology_unref(t);
}

static void test_discover__encode_shape(void **state)
{
	static const char json[] =
	    "{\"version\":1,\"sockets\":[{\"id\":3,\"numaNodes\":[{\"id\":2,\"cpus\":\"0-3,8\",\"memoryMiB\":1024,\"pcieSwitches\":[{\"id\":9,\"gpus\":[{\"index\":1,\"uuid\":\"GPU-b\",\"nvlinks\":[{\"peer\":0,\"links\":4}],\"mig\":{\"enabled\":true,\"instances\":[{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4,\"uuid\":\"MIG-a\"}]}}]}],\"gpus\":[{\"index\":0,\"uuid\":\"GPU-a\",\"model\":\"NVIDIA A100\",\"memoryMiB\":81920,\"nvlinks\":[{\"peer\":1,\"links\":4}]}]}]}],\"reserved\":{\"cpus\":\"0\",\"gpus\":[0]}}";
	ft_topology_t *t = NULL;
	char *text = NULL;

	if (ft_codec_topology_parse(&t, json, strlen(json)) < 0)
		fail_msg("%s", ft_error_last());
	assert_int_equal(ft_codec_topology_encode(&text, t), 0);
	assert_string_equal(text, json);
	free(text);
	ft_topology_unref(t);
}

static void test_discover__annotation_patch(void **state)
{
	char *body = NULL;

	assert_int_equal(ft_codec_annotation_patch_encode(
			     &body, "flextopo.io/topology", "{\"version\":1}"),
			 0);
	assert_string_equal(
	    body,
	    "{\"metadata\":{\"annotations\":{\"flextopo.io/topology\":\"{\\\"version\\\":1}\"}}}");
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_discover__rtx4090),
	    cmocka_unit_test(test_discover__v100_hwloc_nvlink),
	    cmocka_unit_test(test_discover__h100_vm_real),
	    cmocka_unit_test(test_discover__a100_hwloc_nvswitch),
	    cmocka_unit_test(test_discover__no_gpu),
	    cmocka_unit_test(test_discover__root_port_and_cpuless_numa),
	    cmocka_unit_test(test_discover__vm_without_locality),
	    cmocka_unit_test(test_discover__this_machine),
	    cmocka_unit_test(test_discover__errors),
	    cmocka_unit_test(test_discover__nvml_identity),
	    cmocka_unit_test(test_discover__nvml_nvlinks_win_over_hwloc),
	    cmocka_unit_test(test_discover__nvml_nvswitch),
	    cmocka_unit_test(test_discover__nvml_mig),
	    cmocka_unit_test(test_discover__nvml_unknown_gpu_left_out),
	    cmocka_unit_test(test_discover__nvml_init_fails),
	    cmocka_unit_test(test_discover__nvml_library),
	    cmocka_unit_test(test_discover__sharing_whole),
	    cmocka_unit_test(test_discover__sharing_subsets),
	    cmocka_unit_test(test_discover__sharing_passes_over_mig),
	    cmocka_unit_test(test_discover__sharing_without_gpus),
	    cmocka_unit_test(test_discover__sharing_refused),
	    cmocka_unit_test(test_discover__sharing_refused_on_mig),
	    cmocka_unit_test(test_discover__sharing_mig_resource_left_out),
	    cmocka_unit_test(test_discover__encode_examples),
	    cmocka_unit_test(test_discover__encode_refuses_unknowns),
	    cmocka_unit_test(test_discover__encode_mig_strategy),
	    cmocka_unit_test(test_discover__encode_shape),
	    cmocka_unit_test(test_discover__annotation_patch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
