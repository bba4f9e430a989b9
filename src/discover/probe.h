/*
 * What discovery learns about a node before it becomes a topology.h model:
 * the hwloc topology, and per GPU its PCI address, NUMA node, PCIe switch,
 * identity, NVLinks and MIG instances. Shared by the files of src/discover;
 * not a public interface.
 */
#ifndef FLEXTOPO_DISCOVER_PROBE_H
#define FLEXTOPO_DISCOVER_PROBE_H

#include <flextopo/discover.h>
#include <flextopo/topology.h>

#include <stdbool.h>
#include <stdint.h>

#include <hwloc.h>

#define PROBE_TEXT    96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE, name likewise */
#define PROBE_MIG_MAX 8	 /* GPU instances per GPU: 7, and one to spare */
#define NO_SWITCH     (-1)

typedef struct probe_mig {
	char profile[PROBE_TEXT];
	char uuid[PROBE_TEXT];
	unsigned gpu_instance; /* NVML GPU instance id */
	unsigned start, size;
} probe_mig_t;

typedef struct probe_gpu {
	hwloc_obj_t pci;
	char bus_id[16]; /* "0000:3b:00.0", hwloc's spelling */
	int numa_id;	 /* Linux NUMA node id */
	int pcie_switch; /* position in probe_t.switches, or NO_SWITCH */
	bool known;	 /* index and uuid found (NVML or hwloc) */
	bool dropped;	 /* NVML does not know it: left out */
	int index;
	char uuid[PROBE_TEXT];
	char model[PROBE_TEXT];
	uint64_t memory_mib;
	uint8_t links[FT_GPU_MAX]; /* NVLinks to other probe GPUs */
	unsigned switch_links;	   /* NVLinks to NVSwitches */
	bool mig_enabled;
	unsigned n_mig;
	probe_mig_t mig[PROBE_MIG_MAX];
} probe_gpu_t;

typedef struct probe {
	hwloc_topology_t topo;
	const ft_discover_options_t *opts;
	unsigned n_gpus;
	probe_gpu_t gpus[FT_GPU_MAX]; /* PCI bus id order */
	unsigned n_switches;
	hwloc_obj_t switches[FT_SWITCH_MAX]; /* outermost bridge of each */
	bool nvml_active;		     /* nvmlInit succeeded */
} probe_t;

/* Pass a warning to the options' callback (printf-style). */
void probe_warn(const probe_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* machine.c: load hwloc; add sockets and NUMA nodes to the model. */
int probe_load(probe_t *p, const char *xml_path);
int probe_add_cpus(probe_t *p, ft_topology_t *t);

/* pci.c: find GPUs with their NUMA node and switch; hwloc's identity and
 * NVLinkBandwidth; the PCI bus id order fallback. */
int probe_find_gpus(probe_t *p, const ft_topology_t *t);
void probe_hwloc_identity(probe_t *p);
void probe_hwloc_nvlinks(probe_t *p);
void probe_fallback_identity(probe_t *p);
/* The GPU with this PCI address (function ignored), or -1. */
int probe_gpu_by_address(const probe_t *p, unsigned domain, unsigned bus,
			 unsigned device);
/* True when hwloc knows the address as a non-NVIDIA device (a CPU's NVLink
 * port on POWER), which is then no NVSwitch. */
bool probe_address_is_foreign(const probe_t *p, unsigned domain, unsigned bus,
			      unsigned device);

/* nvml_query.c: identity, NVLinks and MIG from NVML. */
int probe_nvml(probe_t *p, const ft_nvml_t *nvml);

/* sharing.c: replicas and sharedResource from the device plugin's sharing
 * configuration, on the built model before it is finished; NULL or an
 * empty configuration changes nothing. */
int probe_share(const probe_t *p, ft_topology_t *t, const ft_sharing_t *s);

#endif
