/*
 * What NVML says about the GPUs hwloc found: index, UUID, name and memory;
 * NVLinks counted per peer; MIG mode and GPU instances. Works through the
 * ft_nvml_t table, so the same code runs on the real library and on the
 * fake of the unit tests.
 *
 * NVML failures degrade, they do not fail discovery: nvmlInit failing means
 * no NVML at all (hwloc and PCI order take over); a GPU NVML cannot open is
 * left out; a missing name, memory size, NVLink or MIG fact is left out with
 * a warning. NVLinks: each active link's far end is a GPU of this node (by
 * PCI address), an NVSwitch (the remote device type says so, or the far end
 * is not a GPU and hwloc does not know it as another vendor's device: the
 * switches of NVSwitch-3 systems are not host PCI devices), or something
 * else (a POWER CPU port), which is ignored. MIG: one instance per GPU
 * instance; further MIG devices (compute instances) of the same GPU
 * instance add nothing.
 */
#include "probe.h"

#include <flextopo/discover.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <string.h>

#define MIB	       (1024ull * 1024ull)
#define MIG_ENABLED    1 /* NVML_DEVICE_MIG_ENABLE */
#define LINK_UNKNOWN   (-1)
#define MIG_NAME_INFIX "MIG "

static const char *nvml_error(const ft_nvml_t *nvml, int result)
{
	static const char *const names[] = {
	    [1] = "Uninitialized",     [2] = "Invalid Argument",
	    [3] = "Not Supported",     [4] = "Insufficient Permissions",
	    [6] = "Not Found",	       [9] = "Driver Not Loaded",
	    [12] = "Library Not Found"};
	const char *s = nvml->error_string ? nvml->error_string(result) : NULL;

	if (s)
		return s;
	if (result > 0 && (size_t)result < sizeof(names) / sizeof(names[0]) &&
	    names[result])
		return names[result];
	return "NVML error";
}

static int read_identity(probe_t *p, const ft_nvml_t *nvml, probe_gpu_t *g,
			 ft_nvml_device_t dev)
{
	ft_nvml_memory_t memory;
	unsigned index = 0;
	int r;

	if ((r = nvml->device_index(dev, &index)) != FT_NVML_SUCCESS ||
	    (r = nvml->device_uuid(dev, g->uuid, sizeof(g->uuid))) !=
		FT_NVML_SUCCESS) {
		g->uuid[0] = '\0';
		return r;
	}
	g->uuid[sizeof(g->uuid) - 1] = '\0';
	g->index = (int)index;
	if (nvml->device_name &&
	    (r = nvml->device_name(dev, g->model, sizeof(g->model))) !=
		FT_NVML_SUCCESS) {
		g->model[0] = '\0';
		probe_warn(p, "GPU %s: NVML has no name for it (%s)", g->bus_id,
			   nvml_error(nvml, r));
	}
	g->model[sizeof(g->model) - 1] = '\0';
	if (nvml->device_memory &&
	    nvml->device_memory(dev, &memory) == FT_NVML_SUCCESS)
		g->memory_mib = memory.total / MIB;
	return FT_NVML_SUCCESS;
}

/* Open every GPU; those NVML does not know are dropped. */
static void open_gpus(probe_t *p, const ft_nvml_t *nvml, ft_nvml_device_t *dev)
{
	for (unsigned i = 0; i < p->n_gpus; i++) {
		probe_gpu_t *g = &p->gpus[i];
		int r = nvml->device_by_pci_bus_id(g->bus_id, &dev[i]);
		if (r == FT_NVML_SUCCESS)
			r = read_identity(p, nvml, g, dev[i]);
		if (r == FT_NVML_SUCCESS)
			continue;
		g->dropped = true;
		probe_warn(p, "GPU %s: NVML cannot use it (%s); left out",
			   g->bus_id, nvml_error(nvml, r));
	}
}

static int remote_type(const ft_nvml_t *nvml, ft_nvml_device_t dev,
		       unsigned link)
{
	int type = LINK_UNKNOWN;

	if (!nvml->nvlink_remote_type ||
	    nvml->nvlink_remote_type(dev, link, &type) != FT_NVML_SUCCESS)
		return LINK_UNKNOWN;
	return type;
}

/* One active link of GPU `i`: to a peer GPU, an NVSwitch, or neither. */
static void count_link(probe_t *p, const ft_nvml_t *nvml, unsigned i,
		       ft_nvml_device_t dev, unsigned link)
{
	int type = remote_type(nvml, dev, link), peer;
	ft_nvml_pci_t pci;

	if (type == FT_NVML_LINK_SWITCH) {
		p->gpus[i].switch_links++;
		return;
	}
	if (type == FT_NVML_LINK_IBMNPU || !nvml->nvlink_remote_pci ||
	    nvml->nvlink_remote_pci(dev, link, &pci) != FT_NVML_SUCCESS)
		return;
	peer = probe_gpu_by_address(p, pci.domain, pci.bus, pci.device);
	if (peer >= 0) {
		if (peer != (int)i && !p->gpus[peer].dropped &&
		    p->gpus[i].links[peer] < 255)
			p->gpus[i].links[peer]++;
		return;
	}
	if (type != FT_NVML_LINK_GPU &&
	    !probe_address_is_foreign(p, pci.domain, pci.bus, pci.device))
		p->gpus[i].switch_links++;
}

static void count_links(probe_t *p, const ft_nvml_t *nvml, unsigned i,
			ft_nvml_device_t dev)
{
	int active = 0;

	if (!nvml->nvlink_state)
		return;
	/* NVML answers an error past the GPU's last link, and
	 * NOT_SUPPORTED on GPUs without NVLink. */
	for (unsigned link = 0; link < FT_NVML_NVLINK_MAX_LINKS; link++) {
		if (nvml->nvlink_state(dev, link, &active) != FT_NVML_SUCCESS)
			break;
		if (active)
			count_link(p, nvml, i, dev, link);
	}
}

/* "NVIDIA H100 80GB HBM3 MIG 3g.40gb" -> "3g.40gb"; NULL if not so. */
static const char *profile_of(const char *name)
{
	const char *found = NULL;

	for (const char *s = strstr(name, MIG_NAME_INFIX); s;
	     s = strstr(s + 1, MIG_NAME_INFIX))
		found = s + strlen(MIG_NAME_INFIX);
	return found && *found ? found : NULL;
}

static bool has_gpu_instance(const probe_gpu_t *g, unsigned id)
{
	for (unsigned k = 0; k < g->n_mig; k++)
		if (g->mig[k].gpu_instance == id)
			return true;
	return false;
}

/* Placement of GPU instance `id` of `dev`; an NVML result. */
static int read_placement(const ft_nvml_t *nvml, ft_nvml_device_t dev,
			  unsigned id, probe_mig_t *m)
{
	ft_nvml_gpu_instance_info_t info;
	ft_nvml_gpu_instance_t gi = NULL;
	int r;

	if (!nvml->gpu_instance_by_id || !nvml->gpu_instance_info)
		return FT_NVML_ERROR_NOT_SUPPORTED;
	if ((r = nvml->gpu_instance_by_id(dev, id, &gi)) != FT_NVML_SUCCESS ||
	    (r = nvml->gpu_instance_info(gi, &info)) != FT_NVML_SUCCESS)
		return r;
	m->start = info.start;
	m->size = info.size;
	return FT_NVML_SUCCESS;
}

/* Fill `m` from MIG device `mig`; false (with a warning) to skip it. */
static bool read_mig_device(probe_t *p, const ft_nvml_t *nvml, probe_gpu_t *g,
			    ft_nvml_device_t dev, ft_nvml_device_t mig,
			    probe_mig_t *m)
{
	char name[PROBE_TEXT] = "";
	const char *profile;
	int r;

	memset(m, 0, sizeof(*m));
	if ((r = nvml->device_uuid(mig, m->uuid, sizeof(m->uuid))) !=
		FT_NVML_SUCCESS ||
	    !nvml->device_name ||
	    (r = nvml->device_name(mig, name, sizeof(name))) !=
		FT_NVML_SUCCESS ||
	    !nvml->gpu_instance_id ||
	    (r = nvml->gpu_instance_id(mig, &m->gpu_instance)) !=
		FT_NVML_SUCCESS) {
		probe_warn(p, "GPU %s: a MIG device could not be read (%s)",
			   g->bus_id, nvml_error(nvml, r));
		return false;
	}
	m->uuid[sizeof(m->uuid) - 1] = name[sizeof(name) - 1] = '\0';
	if (has_gpu_instance(g, m->gpu_instance))
		return false; /* another compute instance of it */
	if (!(profile = profile_of(name))) {
		probe_warn(p, "MIG device %s: no profile in its name \"%s\"",
			   m->uuid, name);
		return false;
	}
	snprintf(m->profile, sizeof(m->profile), "%s", profile);
	if ((r = read_placement(nvml, dev, m->gpu_instance, m)) !=
	    FT_NVML_SUCCESS) {
		probe_warn(
		    p,
		    "MIG device %s: NVML does not tell its placement (%s; it needs a privileged pod); left out",
		    m->uuid, nvml_error(nvml, r));
		return false;
	}
	if (m->size == 0 || m->start + m->size > FT_MIG_SLICES) {
		probe_warn(
		    p,
		    "MIG device %s: placement %u:%u is outside memory slices 0-7; left out",
		    m->uuid, m->start, m->size);
		return false;
	}
	return true;
}

static void read_mig_devices(probe_t *p, const ft_nvml_t *nvml, probe_gpu_t *g,
			     ft_nvml_device_t dev)
{
	ft_nvml_device_t mig = NULL;
	unsigned count = 0;
	int r;

	if (!nvml->max_mig_devices || !nvml->mig_device_by_index ||
	    (r = nvml->max_mig_devices(dev, &count)) != FT_NVML_SUCCESS) {
		probe_warn(
		    p,
		    "GPU %s: MIG is on but NVML cannot list its MIG devices; none reported",
		    g->bus_id);
		return;
	}
	for (unsigned k = 0; k < count && g->n_mig < PROBE_MIG_MAX; k++) {
		r = nvml->mig_device_by_index(dev, k, &mig);
		if (r == FT_NVML_ERROR_NOT_FOUND)
			continue; /* an empty slot */
		if (r != FT_NVML_SUCCESS) {
			probe_warn(p, "GPU %s: MIG device %u: %s", g->bus_id, k,
				   nvml_error(nvml, r));
			continue;
		}
		if (read_mig_device(p, nvml, g, dev, mig, &g->mig[g->n_mig]))
			g->n_mig++;
	}
}

static void read_mig(probe_t *p, const ft_nvml_t *nvml, probe_gpu_t *g,
		     ft_nvml_device_t dev)
{
	unsigned current = 0, pending = 0;

	if (!nvml->mig_mode ||
	    nvml->mig_mode(dev, &current, &pending) != FT_NVML_SUCCESS)
		return; /* not MIG-capable */
	if (current != pending)
		probe_warn(
		    p,
		    "GPU %s: a MIG mode change waits for a GPU reset; the current mode is reported",
		    g->bus_id);
	if (current != MIG_ENABLED)
		return;
	g->mig_enabled = true;
	read_mig_devices(p, nvml, g, dev);
}

int probe_nvml(probe_t *p, const ft_nvml_t *nvml)
{
	ft_nvml_device_t dev[FT_GPU_MAX] = {0};
	int r = nvml->init();

	if (r != FT_NVML_SUCCESS) {
		probe_warn(p, "NVML did not start (%s); going on without it",
			   nvml_error(nvml, r));
		return 0;
	}
	p->nvml_active = true;
	open_gpus(p, nvml, dev);
	for (unsigned i = 0; i < p->n_gpus; i++) {
		if (p->gpus[i].dropped)
			continue;
		count_links(p, nvml, i, dev[i]);
		read_mig(p, nvml, &p->gpus[i], dev[i]);
	}
	nvml->shutdown();
	return 0;
}
