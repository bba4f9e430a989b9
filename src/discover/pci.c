/*
 * The GPU side of discovery as hwloc sees it: which PCI devices are NVIDIA
 * GPUs, the NUMA node local to each, the PCIe switch above it, what hwloc's
 * own NVML and CUDA OS devices say about it, and hwloc's NVLinkBandwidth
 * matrix. Also the last resort for GPU identity: PCI bus id order.
 *
 * The rules (switch = outermost bridge below the host bridge when at least
 * two bridges lie on the path, NUMA node from the non-I/O ancestor, per-link
 * bandwidths of the NVLink matrix) are explained in discover.h.
 */
#include "probe.h"

#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VENDOR_NVIDIA	 0x10de
#define CLASS_VGA	 0x0300
#define CLASS_3D	 0x0302
#define SWITCH_MIN_DEPTH 2 /* bridges between host bridge and a GPU */

static bool is_nvidia_gpu(hwloc_obj_t obj)
{
	const struct hwloc_pcidev_attr_s *pci = &obj->attr->pcidev;

	return pci->vendor_id == VENDOR_NVIDIA &&
	       (pci->class_id == CLASS_VGA || pci->class_id == CLASS_3D);
}

static bool is_pci_bridge(hwloc_obj_t obj)
{
	return obj && obj->type == HWLOC_OBJ_BRIDGE &&
	       obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* The switch of `gpu` as a position in p->switches, or NO_SWITCH. */
static int find_switch(probe_t *p, hwloc_obj_t gpu)
{
	hwloc_obj_t outermost = NULL;
	unsigned bridges = 0;

	for (hwloc_obj_t o = gpu->parent; is_pci_bridge(o); o = o->parent) {
		outermost = o;
		bridges++;
	}
	if (bridges < SWITCH_MIN_DEPTH)
		return NO_SWITCH;
	for (unsigned s = 0; s < p->n_switches; s++)
		if (p->switches[s] == outermost)
			return (int)s;
	if (p->n_switches >= FT_SWITCH_MAX)
		return ft_error_set(
		    FT_EINVAL,
		    "more than %d PCIe switches above GPUs: the model's limit",
		    FT_SWITCH_MAX);
	p->switches[p->n_switches] = outermost;
	return (int)p->n_switches++;
}

/* The first NUMA node of the model local to `gpu`. */
static int find_numa(const probe_t *p, const ft_topology_t *t,
		     const char *bus_id, hwloc_obj_t gpu)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(p->topo, gpu);
	int id;

	if (anc && anc->type == HWLOC_OBJ_MACHINE && t->n_numa > 1)
		probe_warn(
		    p,
		    "GPU %s: its NUMA node is unknown (the firmware or hypervisor does not say); put on the first",
		    bus_id);
	if (anc && anc->nodeset) {
		hwloc_bitmap_foreach_begin(id, anc->nodeset)
		{
			if (ft_topology_find_numa_id(t, id) >= 0)
				return id;
		}
		hwloc_bitmap_foreach_end();
	}
	probe_warn(
	    p,
	    "GPU %s: no NUMA node with CPUs is local to it; put on NUMA node %d",
	    bus_id, t->numa[0].id);
	return t->numa[0].id;
}

static int by_address(const void *a, const void *b)
{
	const struct hwloc_pcidev_attr_s *x =
	    &((const probe_gpu_t *)a)->pci->attr->pcidev;
	const struct hwloc_pcidev_attr_s *y =
	    &((const probe_gpu_t *)b)->pci->attr->pcidev;
	unsigned long kx = ((unsigned long)x->domain << 24) |
			   ((unsigned long)x->bus << 16) |
			   ((unsigned long)x->dev << 8) | x->func;
	unsigned long ky = ((unsigned long)y->domain << 24) |
			   ((unsigned long)y->bus << 16) |
			   ((unsigned long)y->dev << 8) | y->func;

	return (kx > ky) - (kx < ky);
}

static int add_gpu(probe_t *p, const ft_topology_t *t, hwloc_obj_t obj)
{
	const struct hwloc_pcidev_attr_s *pci = &obj->attr->pcidev;
	probe_gpu_t *g;
	int sw;

	if (p->n_gpus >= FT_GPU_MAX)
		return ft_error_set(
		    FT_EINVAL, "more than %d NVIDIA GPUs: the model's limit",
		    FT_GPU_MAX);
	g = &p->gpus[p->n_gpus];
	memset(g, 0, sizeof(*g));
	g->pci = obj;
	g->index = -1;
	snprintf(g->bus_id, sizeof(g->bus_id), "%04x:%02x:%02x.%x",
		 (unsigned)pci->domain, pci->bus, pci->dev, pci->func);
	if ((sw = find_switch(p, obj)) < NO_SWITCH)
		return sw;
	g->pcie_switch = sw;
	g->numa_id = find_numa(p, t, g->bus_id, obj);
	p->n_gpus++;
	return 0;
}

int probe_find_gpus(probe_t *p, const ft_topology_t *t)
{
	int rc;

	for (hwloc_obj_t o = hwloc_get_next_pcidev(p->topo, NULL); o;
	     o = hwloc_get_next_pcidev(p->topo, o))
		if (is_nvidia_gpu(o) && (rc = add_gpu(p, t, o)) < 0)
			return rc;
	qsort(p->gpus, p->n_gpus, sizeof(p->gpus[0]), by_address);
	return 0;
}

int probe_gpu_by_address(const probe_t *p, unsigned domain, unsigned bus,
			 unsigned device)
{
	for (unsigned i = 0; i < p->n_gpus; i++) {
		const struct hwloc_pcidev_attr_s *pci =
		    &p->gpus[i].pci->attr->pcidev;
		if (pci->domain == domain && pci->bus == bus &&
		    pci->dev == device)
			return (int)i;
	}
	return -1;
}

bool probe_address_is_foreign(const probe_t *p, unsigned domain, unsigned bus,
			      unsigned device)
{
	for (hwloc_obj_t o = hwloc_get_next_pcidev(p->topo, NULL); o;
	     o = hwloc_get_next_pcidev(p->topo, o)) {
		const struct hwloc_pcidev_attr_s *pci = &o->attr->pcidev;
		if (pci->domain == domain && pci->bus == bus &&
		    pci->dev == device)
			return pci->vendor_id != VENDOR_NVIDIA;
	}
	return false;
}

/* The GPU that `obj` (a GPU's PCI device or one of its OS devices) is. */
static int gpu_of_object(const probe_t *p, hwloc_obj_t obj)
{
	while (obj && obj->type == HWLOC_OBJ_OS_DEVICE)
		obj = obj->parent;
	for (unsigned i = 0; i < p->n_gpus; i++)
		if (p->gpus[i].pci == obj)
			return (int)i;
	return -1;
}

static void copy_text(char *out, const char *value)
{
	snprintf(out, PROBE_TEXT, "%s", value);
}

/* What one of hwloc's OS devices (nvmlN, cudaN) says about its GPU. */
static void read_osdev(probe_gpu_t *g, hwloc_obj_t dev)
{
	const char *uuid = hwloc_obj_get_info_by_name(dev, "NVIDIAUUID");
	const char *model = hwloc_obj_get_info_by_name(dev, "GPUModel");
	const char *kib =
	    hwloc_obj_get_info_by_name(dev, "CUDAGlobalMemorySize");
	unsigned index;
	char end;

	/* "nvmlN" is NVML's index N; a CUDA index depends on
	 * CUDA_DEVICE_ORDER and is not used. */
	if (g->index < 0 && dev->name &&
	    sscanf(dev->name, "nvml%u%c", &index, &end) == 1)
		g->index = (int)index;
	if (!g->uuid[0] && uuid && uuid[0])
		copy_text(g->uuid, uuid);
	if (!g->model[0] && model && model[0])
		copy_text(g->model, model);
	if (!g->memory_mib && kib)
		g->memory_mib = strtoull(kib, NULL, 10) / 1024;
}

void probe_hwloc_identity(probe_t *p)
{
	for (unsigned i = 0; i < p->n_gpus; i++) {
		probe_gpu_t *g = &p->gpus[i];
		if (g->dropped)
			continue;
		for (hwloc_obj_t c = g->pci->io_first_child; c;
		     c = c->next_sibling)
			if (c->type == HWLOC_OBJ_OS_DEVICE)
				read_osdev(g, c);
	}
}

static bool index_taken(const probe_t *p, int index)
{
	for (unsigned i = 0; i < p->n_gpus; i++)
		if (!p->gpus[i].dropped && p->gpus[i].index == index)
			return true;
	return false;
}

/* "GPU-PCI-<bus id>" (built aside: GCC cannot tell the members apart). */
static void stand_in_uuid(probe_gpu_t *g)
{
	char uuid[PROBE_TEXT];

	snprintf(uuid, sizeof(uuid), "GPU-PCI-%s", g->bus_id);
	memcpy(g->uuid, uuid, sizeof(uuid));
}

void probe_fallback_identity(probe_t *p)
{
	int next = 0;

	for (unsigned i = 0; i < p->n_gpus; i++) {
		probe_gpu_t *g = &p->gpus[i];
		if (g->dropped || (g->index >= 0 && g->uuid[0]))
			continue;
		if (g->index < 0) {
			while (index_taken(p, next))
				next++;
			g->index = next;
		}
		if (!g->uuid[0])
			stand_in_uuid(g);
		probe_warn(
		    p,
		    "GPU %s: neither NVML nor hwloc knows it: index %d (PCI bus id order), uuid %s (not the NVML uuid)",
		    g->bus_id, g->index, g->uuid);
	}
}

/*
 * MB/s per NVLink as hwloc's NVML backend (hwloc 2.9) fills the matrix:
 * NVLink 1 (P100) 20000, NVLink 2 (V100) 25000, NVLink 3 and 4 (A100,
 * H100, H200) 50000. The version is not in the matrix, so the model says.
 */
static unsigned long long link_mbps(const char *model)
{
	if (strstr(model, "P100"))
		return 20000;
	if (strstr(model, "V100"))
		return 25000;
	return 50000;
}

static uint8_t links_of(unsigned long long mbps, const char *model)
{
	unsigned long long per_link = link_mbps(model);
	unsigned long long links = (mbps + per_link / 2) / per_link;

	if (links == 0)
		return 1; /* a link of unknown speed is still a link */
	return links > 255 ? 255 : (uint8_t)links;
}

static bool has_nvswitch(const struct hwloc_distances_s *d)
{
	for (unsigned i = 0; i < d->nbobjs; i++)
		if (d->objs[i] && d->objs[i]->subtype &&
		    strcmp(d->objs[i]->subtype, "NVSwitch") == 0)
			return true;
	return false;
}

static void read_matrix(probe_t *p, const struct hwloc_distances_s *d)
{
	for (unsigned i = 0; i < d->nbobjs; i++) {
		int a = gpu_of_object(p, d->objs[i]);
		if (a < 0 || p->gpus[a].dropped)
			continue;
		for (unsigned j = 0; j < d->nbobjs; j++) {
			int b = gpu_of_object(p, d->objs[j]);
			hwloc_uint64_t mbps = d->values[i * d->nbobjs + j];
			if (b < 0 || b == a || !mbps || p->gpus[b].dropped)
				continue;
			p->gpus[a].links[b] = links_of(mbps, p->gpus[a].model);
		}
	}
}

void probe_hwloc_nvlinks(probe_t *p)
{
	struct hwloc_distances_s *d = NULL;
	unsigned nr = 1;

	if (hwloc_distances_get_by_name(p->topo, "NVLinkBandwidth", &nr, &d,
					0) < 0 ||
	    nr == 0)
		return;
	/* GPUs linked through NVSwitch ports: GPU-to-GPU bandwidth is the
	 * smaller of the two GPUs' bandwidths to the switches. */
	if (has_nvswitch(d) &&
	    hwloc_distances_transform(
		p->topo, d, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE, NULL,
		0) < 0)
		probe_warn(
		    p,
		    "hwloc could not resolve NVLinks through NVSwitch; those links are left out");
	read_matrix(p, d);
	hwloc_distances_release(p->topo, d);
}
