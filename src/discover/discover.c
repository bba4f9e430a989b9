/*
 * Node discovery for flextopo-discover: hwloc finds the sockets, NUMA nodes,
 * GPUs and PCIe switches (machine.c, pci.c); NVML, when given, names the
 * GPUs and counts their NVLinks and MIG instances (nvml_query.c); hwloc's
 * own NVML data and PCI order fill what is still missing; the device
 * plugin's sharing configuration, when given, marks the shared GPUs
 * (sharing.c). This file runs those steps and builds the model of
 * topology.h from what they found, in the canonical order described in
 * discover.h, then lets ft_topology_finish() check it.
 */
#include "probe.h"

#include <flextopo/discover.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void probe_warn(const probe_t *p, const char *fmt, ...)
{
	char message[512];
	va_list ap;

	if (!p->opts->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	p->opts->warn(message, p->opts->payload);
}

/* The GPUs to build: probe positions sorted by GPU index. */
typedef struct gpu_order {
	const probe_t *p;
	unsigned n;
	unsigned probe[FT_GPU_MAX];
	int pos[FT_GPU_MAX]; /* model position of each probe GPU, or -1 */
} gpu_order_t;

/* Insertion sort by GPU index: at most FT_GPU_MAX entries. */
static void order_gpus(gpu_order_t *o, const probe_t *p)
{
	unsigned k;

	o->p = p;
	o->n = 0;
	for (unsigned i = 0; i < p->n_gpus; i++) {
		o->pos[i] = -1;
		if (p->gpus[i].dropped)
			continue;
		for (k = o->n++;
		     k > 0 && p->gpus[o->probe[k - 1]].index > p->gpus[i].index;
		     k--)
			o->probe[k] = o->probe[k - 1];
		o->probe[k] = i;
	}
}

static int add_gpu(gpu_order_t *o, ft_topology_t *t, unsigned i, unsigned numa,
		   unsigned pcie_switch)
{
	const probe_gpu_t *g = &o->p->gpus[i];
	int pos = ft_topology_add_gpu(t, numa, pcie_switch, g->index, g->uuid,
				      g->model, g->memory_mib);
	char why[512];

	if (pos < 0) {
		snprintf(why, sizeof(why), "%s", ft_error_last());
		return ft_error_set(pos, "GPU %s: %s", g->bus_id, why);
	}
	o->pos[i] = pos;
	return 0;
}

/* The GPUs of probe switch `sw` (NO_SWITCH: switchless) on NUMA `id`. */
static int add_gpus_of(gpu_order_t *o, ft_topology_t *t, int id, int sw,
		       unsigned numa, unsigned pcie_switch)
{
	int rc;

	for (unsigned k = 0; k < o->n; k++) {
		const probe_gpu_t *g = &o->p->gpus[o->probe[k]];
		if (g->numa_id != id || g->pcie_switch != sw)
			continue;
		if ((rc = add_gpu(o, t, o->probe[k], numa, pcie_switch)) < 0)
			return rc;
	}
	return 0;
}

/* Probe switches in order of their first GPU by PCI address. */
static unsigned switch_order(const probe_t *p, int *out)
{
	unsigned n = 0;
	bool seen[FT_SWITCH_MAX] = {false};

	for (unsigned i = 0; i < p->n_gpus; i++) {
		int sw = p->gpus[i].pcie_switch;
		if (sw == NO_SWITCH || p->gpus[i].dropped || seen[sw])
			continue;
		seen[sw] = true;
		out[n++] = sw;
	}
	return n;
}

static int numa_of_switch(const probe_t *p, int sw)
{
	for (unsigned i = 0; i < p->n_gpus; i++)
		if (p->gpus[i].pcie_switch == sw)
			return p->gpus[i].numa_id;
	return -1;
}

/* NUMA position `n`: its switches with their GPUs, then its other GPUs. */
static int add_numa_gpus(gpu_order_t *o, ft_topology_t *t, unsigned n,
			 const int *switches, unsigned n_switches)
{
	int id = t->numa[n].id, pos, rc;

	for (unsigned s = 0; s < n_switches; s++) {
		if (numa_of_switch(o->p, switches[s]) != id)
			continue;
		pos = ft_topology_add_switch(t, n, (int)t->n_switches);
		if (pos < 0)
			return pos;
		rc = add_gpus_of(o, t, id, switches[s], n, (unsigned)pos);
		if (rc < 0)
			return rc;
	}
	return add_gpus_of(o, t, id, NO_SWITCH, n, FT_NONE);
}

static int add_gpus(gpu_order_t *o, ft_topology_t *t)
{
	int switches[FT_SWITCH_MAX];
	unsigned n_switches = switch_order(o->p, switches);
	int rc;

	for (unsigned n = 0; n < t->n_numa; n++)
		if ((rc = add_numa_gpus(o, t, n, switches, n_switches)) < 0)
			return rc;
	return 0;
}

/*
 * Direct links as either end counted them, plus for two GPUs on NVSwitches
 * the smaller of their switch link counts (every GPU of an NVSwitch board
 * reaches every other at its full link count).
 */
static unsigned pair_links(const probe_gpu_t *a, const probe_gpu_t *b,
			   unsigned ia, unsigned ib)
{
	unsigned links =
	    a->links[ib] > b->links[ia] ? a->links[ib] : b->links[ia];

	if (a->switch_links && b->switch_links)
		links += a->switch_links < b->switch_links ? a->switch_links
							   : b->switch_links;
	return links > 255 ? 255 : links;
}

static int add_nvlinks(const gpu_order_t *o, ft_topology_t *t)
{
	const probe_t *p = o->p;
	unsigned links;
	int rc;

	for (unsigned i = 0; i < p->n_gpus; i++) {
		for (unsigned j = i + 1; j < p->n_gpus; j++) {
			if (o->pos[i] < 0 || o->pos[j] < 0)
				continue;
			links = pair_links(&p->gpus[i], &p->gpus[j], i, j);
			if (links && (rc = ft_topology_add_nvlink(
					  t, p->gpus[i].index, p->gpus[j].index,
					  links)) < 0)
				return rc;
		}
	}
	return 0;
}

/* MIG in model position order, so that t->mig is grouped by GPU. */
static int add_mig(const gpu_order_t *o, ft_topology_t *t)
{
	int rc;

	for (unsigned pos = 0; pos < t->n_gpus; pos++) {
		for (unsigned i = 0; i < o->p->n_gpus; i++) {
			const probe_gpu_t *g = &o->p->gpus[i];
			if (o->pos[i] != (int)pos || !g->mig_enabled)
				continue;
			if ((rc = ft_topology_enable_mig(t, pos)) < 0)
				return rc;
			for (unsigned k = 0; k < g->n_mig; k++)
				if ((rc = ft_topology_add_mig(
					 t, pos, g->mig[k].profile,
					 g->mig[k].start, g->mig[k].size,
					 g->mig[k].uuid)) < 0)
					return rc;
		}
	}
	return 0;
}

static int build(probe_t *p, ft_topology_t *t)
{
	gpu_order_t o;
	int rc;

	order_gpus(&o, p);
	if ((rc = add_gpus(&o, t)) < 0 || (rc = add_nvlinks(&o, t)) < 0 ||
	    (rc = add_mig(&o, t)) < 0 ||
	    (rc = probe_share(p, t, p->opts->sharing)) < 0)
		return rc;
	return ft_topology_finish(t);
}

int ft_discover_topology(ft_topology_t **out, const ft_discover_options_t *opts)
{
	static const ft_discover_options_t none = {0};
	probe_t *p = calloc(1, sizeof(*p));
	ft_topology_t *t = NULL;
	int rc;

	*out = NULL;
	if (!p)
		return ft_error_set(FT_ENOMEM, "discover: out of memory");
	p->opts = opts ? opts : &none;
	if ((rc = probe_load(p, p->opts->xml_path)) < 0 ||
	    (rc = ft_topology_new(&t)) < 0 || (rc = probe_add_cpus(p, t)) < 0 ||
	    (rc = probe_find_gpus(p, t)) < 0 ||
	    (p->opts->nvml && (rc = probe_nvml(p, p->opts->nvml)) < 0))
		goto cleanup;
	probe_hwloc_identity(p);
	if (!p->nvml_active)
		probe_hwloc_nvlinks(p);
	probe_fallback_identity(p);
	if ((rc = build(p, t)) < 0)
		goto cleanup;
	*out = t;
	t = NULL;
cleanup:
	ft_topology_unref(t);
	if (p->topo)
		hwloc_topology_destroy(p->topo);
	free(p);
	return rc;
}
