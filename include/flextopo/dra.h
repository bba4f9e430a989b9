/*
 * Dynamic Resource Allocation (resource.k8s.io/v1, Kubernetes v1.36) as the
 * model needs it: the GPU and MIG devices a node's ResourceSlices publish,
 * matched to the node's topology, and the devices ResourceClaims hold.
 *
 * On a DRA node kube-scheduler's DynamicResources plugin picks the devices
 * (first fit, no scoring: k8s.io/dynamic-resource-allocation,
 * structured/internal/experimental/allocator_incubating.go); flextopo only
 * counts them, so that filter, prioritize and the victim search never read a
 * device some claim holds as free, and places the pod's CPUs near them at
 * bind. docs/dra.md has the design; test/fixtures/dra/README.md the shapes
 * and their sources.
 *
 * Facts this module relies on:
 * - A device is named by (driver, pool, device name). Only the newest
 *   generation of a pool counts, and only when all of its
 *   pool.resourceSliceCount slices are there
 *   (k8s.io/dynamic-resource-allocation/structured/internal/
 *   pools_incubating.go, GatherPools).
 * - NVIDIA's driver (gpu.nvidia.com, kubernetes-sigs/dra-driver-nvidia-gpu
 *   cmd/gpu-kubelet-plugin/deviceinfo.go) publishes a whole GPU as
 *   "gpu-<minor>" with attributes type "gpu" and uuid "GPU-...", and a MIG
 *   device as "gpu-<minor>-mig-<profile>-<id>-<start>" with type "mig", its
 *   own uuid "MIG-...", parentUUID, profile, and capacities memorySlice<i>
 *   for the memory slices it covers. In static MIG mode the MIG-enabled GPU
 *   itself is not published. Standard attributes
 *   resource.kubernetes.io/pciBusID, /pcieRoot (the PCIe root complex, not
 *   the switch) and /numaNode (an int; left out when sysfs says -1) are
 *   checked against the topology.
 * - A device is held by every claim whose status.allocation names it,
 *   reserved or not, except adminAccess results
 *   (structured/internal/allocateddevices.go). A device with
 *   allowMultipleAllocations is shared: each result is a share, with the
 *   capacity it consumed (consumedCapacity; "shares" on NVIDIA's driver).
 *
 * Pure: no I/O. Strings are owned by the structs that hold them.
 */
#ifndef FLEXTOPO_DRA_H
#define FLEXTOPO_DRA_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "topology.h"

/* The driver whose devices flextopo maps onto GPUs (NVIDIA's). */
#define FT_DRA_DRIVER_NVIDIA "gpu.nvidia.com"
/* Attribute names: the driver's own (unqualified) and the standard ones. */
#define FT_DRA_ATTR_PCI_BUS_ID "resource.kubernetes.io/pciBusID"
#define FT_DRA_ATTR_PCIE_ROOT  "resource.kubernetes.io/pcieRoot"
#define FT_DRA_ATTR_NUMA_NODE  "resource.kubernetes.io/numaNode"
/* The annotation kube-scheduler puts on the claims it makes for extended
 * resources (KEP-5004, pkg/scheduler/framework/plugins/dynamicresources/
 * extendeddynamicresources.go). */
#define FT_DRA_EXTENDED_CLAIM "resource.kubernetes.io/extended-resource-claim"

typedef enum {
	FT_DRA_OTHER = 0, /* a type flextopo does not map (vfio, ...) */
	FT_DRA_GPU = 1,	  /* type "gpu": a whole GPU */
	FT_DRA_MIG = 2,	  /* type "mig": a MIG device */
} ft_dra_kind_t;

#define FT_DRA_NO_NUMA (-1) /* numaNode not published */

/* One device of a ResourceSlice, as far as flextopo reads it. */
typedef struct ft_dra_device {
	char *name;	    /* spec.devices[].name */
	ft_dra_kind_t kind; /* from the type attribute */
	char *uuid;	    /* "GPU-..." or "MIG-..."; NULL when absent */
	char *parent_uuid;  /* MIG: its GPU's uuid; NULL otherwise */
	char *profile;	    /* MIG: "1g.10gb"; NULL otherwise */
	char *pci_bus_id;   /* resource.kubernetes.io/pciBusID, or NULL */
	char *pcie_root;    /* resource.kubernetes.io/pcieRoot, or NULL */
	int numa_node;	    /* resource.kubernetes.io/numaNode, or
			       FT_DRA_NO_NUMA */
	int slice_start;    /* MIG: the first memory slice (memorySlice<i>
			       capacities), -1 when none is published */
	unsigned slices;    /* MIG: memory slices covered */
	bool multiple;	    /* allowMultipleAllocations: shared by claims */
	uint32_t shares;    /* capacity "shares" of a shared device, else 0 */
} ft_dra_device_t;

/* A ResourceSlice (spec). */
typedef struct ft_dra_slice {
	char *name;
	char *driver;
	char *pool;
	int64_t generation;  /* spec.pool.generation */
	int64_t slice_count; /* spec.pool.resourceSliceCount */
	char *node;	     /* spec.nodeName; NULL when the slice is not
				for one node */
	unsigned n_devices;
	ft_dra_device_t *devices;
} ft_dra_slice_t;

void ft_dra_slice_dispose(ft_dra_slice_t *s);

/* One entry of a claim's status.allocation.devices.results. */
typedef struct ft_dra_result {
	char *request;
	char *driver;
	char *pool;
	char *device;
	bool admin_access; /* holds nothing (allocateddevices.go) */
	uint32_t shares;   /* consumedCapacity "shares"; 0 when absent */
} ft_dra_result_t;

/* A pod a claim is reserved for (status.reservedFor, resource "pods"). */
typedef struct ft_dra_consumer {
	char *uid;
	char *name;
} ft_dra_consumer_t;

/*
 * What a claim asks (spec.devices.requests[].exactly; firstAvailable
 * subrequests count by their first entry), and what it holds.
 */
typedef struct ft_dra_request {
	char *name;
	char *device_class;
	bool all;	/* allocationMode All */
	uint32_t count; /* allocationMode ExactCount */
} ft_dra_request_t;

typedef struct ft_dra_claim {
	char *uid;
	char *ns;
	char *name;
	char *owner_pod; /* uid of the controlling Pod owner (template and
			    KEP-5004 claims), or NULL */
	bool extended;	 /* made by kube-scheduler for extended resources */
	unsigned n_requests;
	ft_dra_request_t *requests;
	bool allocated;
	char *node; /* the node of status.allocation.nodeSelector (matchFields
		       metadata.name In [node]), or NULL */
	unsigned n_results;
	ft_dra_result_t *results;
	unsigned n_consumers;
	ft_dra_consumer_t *consumers;
} ft_dra_claim_t;

void ft_dra_claim_dispose(ft_dra_claim_t *c);

/*
 * A DeviceClass (spec): what its CEL selectors pick of driver `driver`'s
 * devices. flextopo does not evaluate CEL: ft_dra_class_kind() reads the
 * selector shape NVIDIA's chart ships (deviceclass-gpu.yaml,
 * deviceclass-mig.yaml: "device.driver == 'gpu.nvidia.com' &&
 * device.attributes['gpu.nvidia.com'].type == 'gpu'"). A class it cannot
 * read that way is FT_DRA_OTHER, and its requests add no GPU demand.
 */
typedef struct ft_dra_class {
	char *name;
	ft_dra_kind_t kind;
	char *extended_resource; /* spec.extendedResourceName, or NULL */
} ft_dra_class_t;

void ft_dra_class_dispose(ft_dra_class_t *c);

/*
 * The kind of device `n` CEL selector expressions (all of which must hold)
 * pick of `driver`: FT_DRA_GPU or FT_DRA_MIG when one expression compares
 * device.driver with `driver` and one compares the driver's type attribute
 * with "gpu" or "mig", with no "||" anywhere; FT_DRA_OTHER otherwise.
 */
ft_dra_kind_t ft_dra_class_kind(const char *const *expressions, unsigned n,
				const char *driver);

/* ResourceClaims of one pod that flextopo reads, at most. */
#define FT_DRA_POD_CLAIMS_MAX 32

/*
 * Whether two decodings of a slice say the same to the model: name,
 * driver, pool, generation, slice count, node and every device as
 * decoded (a change flextopo does not read, such as a productName or a
 * label, leaves them equal).
 */
bool ft_dra_slice_equal(const ft_dra_slice_t *a, const ft_dra_slice_t *b);

/*
 * Whether two decodings of a claim hold the same: allocated or not, on the
 * same node, with the same results (reservedFor and the requests do not
 * change what the claim holds).
 */
bool ft_dra_claim_same_holding(const ft_dra_claim_t *a,
			       const ft_dra_claim_t *b);

/* Is `s` (a slice of some generation) part of the newest complete
 * generation of its pool, among `slices` (n of them, any pools)? */
bool ft_dra_slice_current(const ft_dra_slice_t *s,
			  const ft_dra_slice_t *const *slices, unsigned n);

/* Where a device of the node lands in the topology. */
typedef struct ft_dra_unit {
	const ft_dra_slice_t *slice; /* borrowed */
	const ft_dra_device_t *device;
	ft_dra_kind_t kind;
	int gpu; /* GPU position (of the parent for MIG); -1: unmatched */
	int mig; /* MIG instance position; -1 for a GPU or unmatched */
} ft_dra_unit_t;

#define FT_DRA_UNITS_MAX (FT_GPU_MAX + FT_MIG_MAX)

/*
 * The DRA side of one node: the GPU and MIG devices of the node's current
 * slices (of driver `driver`), matched to its topology. A disagreement
 * between a slice and the topology annotation is a node-level error,
 * `error` saying which device and which fact; the units that did match are
 * still listed, so that what claims hold on them is still counted.
 * `double_published`: the node's GPUs are in ResourceSlices and the node
 * also advertises the device plugin's GPU resource as allocatable.
 */
typedef struct ft_dra_view {
	const ft_topology_t *topology; /* borrowed */
	bool dra; /* a GPU or MIG device of the node is published in a
		     ResourceSlice (matched to the topology or not) */
	bool double_published;
	unsigned n_units;
	ft_dra_unit_t units[FT_DRA_UNITS_MAX];
	char error[256]; /* "" when slices and topology agree */
} ft_dra_view_t;

/*
 * Match the current slices of `node` among `slices` (any nodes; borrowed
 * until `out` is dropped) to topology `t` (may be NULL: nothing matches).
 * `gpu_allocatable` is the node's allocatable device-plugin GPU count.
 */
void ft_dra_view_build(ft_dra_view_t *out, const char *node,
		       const ft_topology_t *t,
		       const ft_dra_slice_t *const *slices, unsigned n,
		       const char *driver, uint64_t gpu_allocatable);

/*
 * A 64-bit fingerprint (FNV-1a) of what a claim's units depend on in
 * `view`: the topology, and each unit's device (driver, pool, name, uuid,
 * sharing) and position. Two views of equal fingerprints give every claim
 * the same units (a 2^-64 chance of a collision aside); it is kept instead
 * of the view itself because a view borrows the slices it was built from.
 */
uint64_t ft_dra_view_fingerprint(const ft_dra_view_t *view);

/* The unit of device (driver, pool, device) in `view`, or NULL. */
const ft_dra_unit_t *ft_dra_view_find(const ft_dra_view_t *view,
				      const char *driver, const char *pool,
				      const char *device);

/*
 * The units claim `c` holds on the node of `view`, as an allocation the
 * model charges (cluster.h): uuids of whole GPUs and MIG instances, and on
 * a shared GPU its shares as replicas (the whole GPU when the topology does
 * not share it). Only results of `driver` count, adminAccess ones never. A
 * result of `driver` the view does not place (slice missing or
 * incomplete, device unknown to the topology) is held as a GPU of unknown
 * placement ("dra:<driver>/<pool>/<device>", a uuid no topology has), so
 * that it is never handed out; `unmatched` (may be NULL) counts them.
 * FT_ENOMEM.
 */
int ft_dra_claim_units(ft_allocation_t *out, unsigned *unmatched,
		       const ft_dra_claim_t *c, const ft_dra_view_t *view,
		       const char *driver);

/*
 * One device DRA allocated to a pod, as the allocation annotation's "dra"
 * key names it (api/allocation.schema.json). Borrowed strings.
 */
typedef struct ft_dra_device_ref {
	const char *claim_ns, *claim_name, *claim_uid;
	const char *request, *driver, *pool, *device;
	const char *uuid; /* the GPU's or MIG device's */
} ft_dra_device_ref_t;

/*
 * The devices claims `claims` (n of them, read fresh at bind) hold on the
 * node of `view`: their refs in `out` (room for `cap`; returns how many)
 * and the GPU and MIG positions in *gpus and mig[2]. `unmatched` counts the
 * results the view does not place (another node, a device the topology
 * lacks).
 */
unsigned ft_dra_pod_devices(ft_dra_device_ref_t *out, unsigned cap,
			    uint16_t *gpus, ft_mig_mask_t mig,
			    unsigned *unmatched,
			    const ft_dra_claim_t *const *claims, unsigned n,
			    const ft_dra_view_t *view);

#endif
