/*
 * Node topology discovery (flextopo-discover): the hardware of this machine,
 * or of an hwloc XML export, as the model of topology.h, and that model as
 * the flextopo.io/topology annotation (api/topology.schema.json).
 *
 * Where each fact comes from:
 *   sockets      hwloc Package objects; id = the physical package id.
 *   NUMA nodes   hwloc NUMANode objects that have CPUs; cpus = the OS
 *                indexes of the node's PUs (the Linux cpulist), memory =
 *                local memory in MiB. Memory-only nodes (CXL expanders, HBM
 *                beside DRAM, GPU memory on Grace Hopper) are left out: no
 *                pod CPU can be placed there. hwloc gives such a node the
 *                CPUs of the object it hangs from, so of the nodes hanging
 *                from one object only the lowest id is kept.
 *   whole node   hwloc is asked for disallowed CPUs too: the pod's cgroup
 *                does not shrink the node.
 *   GPUs         PCI devices of vendor 0x10de with class 0x0300 (VGA) or
 *                0x0302 (3D controller).
 *   PCIe switch  Linux exposes the path host bridge -> root port -> switch
 *                upstream port -> downstream port -> GPU as bridges. A GPU
 *                with two or more bridges above it is behind a switch, and
 *                GPUs that share the outermost bridge below the host bridge
 *                (the root port; its one link leads to one switch) share
 *                it. A GPU with one bridge (a root port) or none is on the
 *                root complex: no switch (nvidia-smi topo -m: PHB/NODE).
 *   NUMA of GPU  the first kept NUMA node in the nodeset of the GPU's
 *                first non-I/O ancestor (hwloc_get_non_io_ancestor_obj);
 *                with no locality (a GPU hanging from the Machine, as in
 *                many VMs) the first NUMA node, with a warning.
 *   identity     NVML when given: index, UUID, name, memory, NVLinks, MIG.
 *                Otherwise hwloc's own OS devices when hwloc was built with
 *                its nvml/cuda backends (index from the "nvmlN" name,
 *                "NVIDIAUUID", "GPUModel", "CUDAGlobalMemorySize"). Failing
 *                both, index = the GPU's position in PCI bus id order (what
 *                NVML itself uses) and uuid = "GPU-PCI-<bus id>", a
 *                stand-in the NVIDIA device plugin will not recognise.
 *   NVLink       NVML: active links counted per peer GPU; links to an
 *                NVSwitch link every pair of GPUs on the switch with the
 *                smaller of their switch link counts. Without NVML, hwloc's
 *                "NVLinkBandwidth" matrix (MB/s) divided by the per-link
 *                bandwidth hwloc's NVML backend assumes: 20000 for Tesla
 *                P100 (NVLink 1), 25000 for V100 (NVLink 2), 50000 for
 *                everything else (hwloc 2.9 stores NVLink 3 and 4 links,
 *                A100/H100/H200, as 50000). A non-zero value that does not
 *                divide evenly still counts as at least one link.
 *   MIG          NVML: MIG mode; for each MIG device its UUID, the profile
 *                from its name ("NVIDIA H100 80GB HBM3 MIG 3g.40gb" ->
 *                "3g.40gb") and the placement of its GPU instance
 *                (nvmlGpuInstanceGetInfo). One entry per GPU instance.
 *   sharing      The NVIDIA device plugin's configuration file when given
 *                (sharing.h): the GPUs that its timeSlicing or mps
 *                resources of nvidia.com/gpu cover get their replicas;
 *                a renamed resource (renameByDefault, rename) gives
 *                sharedResource. Discovery cannot see the plugin's
 *                setting on the machine itself.
 *
 * Model positions come out canonical: sockets by id, their NUMA nodes by id,
 * then per NUMA node its PCIe switches (ids 0.. in that order) with their
 * GPUs by index, then its switchless GPUs by index; which is also the order
 * in which ft_codec_topology_parse() reads ft_codec_topology_encode()'s
 * output, so a round trip keeps every position.
 */
#ifndef FLEXTOPO_DISCOVER_H
#define FLEXTOPO_DISCOVER_H

#include <stddef.h>

#include "sharing.h"
#include "topology.h"

/*
 * NVML as discovery uses it: a table of functions with the signatures and
 * result codes of nvml.h (NVIDIA Management Library API reference), so that
 * the real library's symbols fill it directly and tests can fill it with a
 * fake. Every function returns an NVML result (0 = NVML_SUCCESS).
 * Handles are opaque; a fake may define the structs behind them.
 */
typedef struct ft_nvml_device *ft_nvml_device_t; /* nvmlDevice_t */
typedef struct ft_nvml_gpu_instance
    *ft_nvml_gpu_instance_t; /* nvmlGpuInstance_t */

#define FT_NVML_SUCCESS		    0
#define FT_NVML_ERROR_NOT_SUPPORTED 3
#define FT_NVML_ERROR_NO_PERMISSION 4
#define FT_NVML_ERROR_NOT_FOUND	    6
#define FT_NVML_NVLINK_MAX_LINKS    18 /* NVML_NVLINK_MAX_LINKS (Hopper) */
#define FT_NVML_LINK_GPU	    0  /* nvmlIntNvLinkDeviceType_t */
#define FT_NVML_LINK_IBMNPU	    1
#define FT_NVML_LINK_SWITCH	    2

/* nvmlPciInfo_t, field for field. */
typedef struct ft_nvml_pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32]; /* "00000000:3B:00.0" */
} ft_nvml_pci_t;

/* nvmlMemory_t: bytes. */
typedef struct ft_nvml_memory {
	unsigned long long total, free, used;
} ft_nvml_memory_t;

/* nvmlGpuInstanceInfo_t; placement in memory slices. */
typedef struct ft_nvml_gpu_instance_info {
	ft_nvml_device_t device;
	unsigned id, profile_id;
	unsigned start, size;
} ft_nvml_gpu_instance_info_t;

/*
 * Each member stands for the NVML symbol named above it. The first five
 * functions are required; the others may be NULL (older drivers lack some
 * of them) and discovery then goes without what they would tell.
 */
typedef struct ft_nvml {
	/* dlopen handle; NULL for a fake */
	void *library;
	/* nvmlInit_v2 */
	int (*init)(void);
	/* nvmlShutdown */
	int (*shutdown)(void);
	/* nvmlDeviceGetHandleByPciBusId_v2 */
	int (*device_by_pci_bus_id)(const char *bus_id, ft_nvml_device_t *out);
	/* nvmlDeviceGetIndex */
	int (*device_index)(ft_nvml_device_t dev, unsigned *out);
	/* nvmlDeviceGetUUID */
	int (*device_uuid)(ft_nvml_device_t dev, char *buf, unsigned len);

	/* nvmlErrorString */
	const char *(*error_string)(int result);
	/* nvmlDeviceGetName */
	int (*device_name)(ft_nvml_device_t dev, char *buf, unsigned len);
	/* nvmlDeviceGetMemoryInfo */
	int (*device_memory)(ft_nvml_device_t dev, ft_nvml_memory_t *out);
	/* nvmlDeviceGetNvLinkState: *active is an nvmlEnableState_t */
	int (*nvlink_state)(ft_nvml_device_t dev, unsigned link, int *active);
	/* nvmlDeviceGetNvLinkRemotePciInfo_v2 */
	int (*nvlink_remote_pci)(ft_nvml_device_t dev, unsigned link,
				 ft_nvml_pci_t *out);
	/* nvmlDeviceGetNvLinkRemoteDeviceType: FT_NVML_LINK_* */
	int (*nvlink_remote_type)(ft_nvml_device_t dev, unsigned link,
				  int *out);
	/* nvmlDeviceGetMigMode: 1 = enabled */
	int (*mig_mode)(ft_nvml_device_t dev, unsigned *current,
			unsigned *pending);
	/* nvmlDeviceGetMaxMigDeviceCount */
	int (*max_mig_devices)(ft_nvml_device_t dev, unsigned *out);
	/* nvmlDeviceGetMigDeviceHandleByIndex */
	int (*mig_device_by_index)(ft_nvml_device_t dev, unsigned index,
				   ft_nvml_device_t *out);
	/* nvmlDeviceGetGpuInstanceId (of a MIG device) */
	int (*gpu_instance_id)(ft_nvml_device_t mig, unsigned *out);
	/* nvmlDeviceGetGpuInstanceById (of the parent GPU) */
	int (*gpu_instance_by_id)(ft_nvml_device_t dev, unsigned id,
				  ft_nvml_gpu_instance_t *out);
	/* nvmlGpuInstanceGetInfo */
	int (*gpu_instance_info)(ft_nvml_gpu_instance_t gi,
				 ft_nvml_gpu_instance_info_t *out);
} ft_nvml_t;

/*
 * Load NVML with dlopen: `library` or, when NULL, "libnvidia-ml.so.1" (the
 * name the NVIDIA container toolkit mounts). Never linked, never required:
 * FT_EUNAVAIL with dlerror()'s text when the library or one of the required
 * symbols (init, shutdown, device_by_pci_bus_id, device_index, device_uuid)
 * is missing. Does not call nvmlInit; discovery does.
 */
int ft_discover_nvml_new(ft_nvml_t **out, const char *library);
/* dlclose and free. NULL is fine. */
void ft_discover_nvml_free(ft_nvml_t *nvml);

typedef struct ft_discover_options {
	/* hwloc XML export to read (lstopo --of xml); NULL: this machine. */
	const char *xml_path;
	/*
	 * NVML to ask, or NULL; borrowed. Discovery calls init and shutdown.
	 * When init fails, discovery goes on without NVML (and warns). When it
	 * succeeds, NVML decides which GPUs exist: a GPU that hwloc lists but
	 * NVML cannot open is left out, as the device plugin would.
	 */
	const ft_nvml_t *nvml;
	/*
	 * The device plugin's sharing configuration to apply, or NULL;
	 * borrowed. Which GPUs a resource covers, and what is refused, is
	 * described at the top of src/discover/sharing.c: a device the node
	 * lacks, a MIG-enabled GPU named, a GPU named twice, two names for
	 * the replicas. Warnings tell what was left out (MIG instances) and
	 * which fields released plugins ignore (devices, rename).
	 */
	const ft_sharing_t *sharing;
	/* Told, one line each, what discovery guessed or left out; may be
	 * NULL. */
	void (*warn)(const char *message, void *payload);
	void *payload;
} ft_discover_options_t;

/*
 * Discover the node. *out is a finished topology (ft_topology_finish) with
 * refcount 1. FT_EIO when the XML file cannot be read or hwloc fails
 * (message "file X: ..." or "hwloc: ..."), FT_EINVAL when the machine is
 * outside the model's limits (more than 16 GPUs or NUMA nodes, a CPU id
 * of 512 or more) or when the sharing configuration does not fit the node
 * ("file:line: sharing.timeSlicing.resources[0].devices[1]: no GPU with
 * index 9 on this node"), FT_ENOMEM.
 */
int ft_discover_topology(ft_topology_t **out,
			 const ft_discover_options_t *opts);

#endif
