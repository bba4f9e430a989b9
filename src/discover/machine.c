/*
 * The CPU side of discovery: load the hwloc topology (this machine or an XML
 * export) and turn its packages and NUMA nodes into the sockets and NUMA
 * nodes of the model.
 *
 * hwloc is asked for the whole machine
 * (HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED): flextopo-discover runs in a pod
 * whose cgroup usually allows a few CPUs only, and the annotation must describe
 * the node, not the pod. Every PCI device, bridge and OS device is kept (hwloc
 * 2 keeps no I/O objects by default): GPUs, the bridges above them, and the
 * NVSwitches and CPU ports at the far end of NVLinks.
 *
 * A NUMA node belongs to the package whose CPUs contain its CPUs. NUMA nodes
 * that hold memory only are left out (see discover.h and drop_memory_only). A
 * NUMA node that spans packages goes to the first of them, with a warning; a
 * machine without package objects becomes one socket 0.
 */
#include "probe.h"

#include <flextopo/cpuset.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)

static int fail_hwloc(const char *xml_path, const char *what)
{
	int err = errno;

	if (xml_path)
		return ft_error_set(FT_EIO, "file %s: hwloc %s: %s", xml_path,
				    what, strerror(err));
	return ft_error_set(FT_EIO, "hwloc %s: %s", what, strerror(err));
}

/* A clear message for a missing or unreadable file before hwloc's own. */
static int check_readable(const char *path)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return ft_error_set(FT_EIO, "file %s: %s", path,
				    strerror(errno));
	fclose(f);
	return 0;
}

int probe_load(probe_t *p, const char *xml_path)
{
	if (xml_path && check_readable(xml_path) < 0)
		return FT_EIO;
	if (hwloc_topology_init(&p->topo) < 0) {
		p->topo = NULL;
		return fail_hwloc(NULL, "could not start");
	}
	if (hwloc_topology_set_flags(
		p->topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0 ||
	    hwloc_topology_set_io_types_filter(p->topo,
					       HWLOC_TYPE_FILTER_KEEP_ALL) < 0)
		return fail_hwloc(xml_path, "refused the discovery flags");
	if (xml_path && hwloc_topology_set_xml(p->topo, xml_path) < 0)
		return fail_hwloc(xml_path, "cannot read it as XML");
	if (hwloc_topology_load(p->topo) < 0)
		return fail_hwloc(
		    xml_path,
		    xml_path
			? "could not load it (set HWLOC_XML_VERBOSE=1 for details)"
			: "could not discover this machine");
	return 0;
}

static int os_id(hwloc_obj_t obj)
{
	return obj->os_index == HWLOC_UNKNOWN_INDEX ? (int)obj->logical_index
						    : (int)obj->os_index;
}

static int by_os_id(const void *a, const void *b)
{
	int x = os_id(*(const hwloc_obj_t *)a);
	int y = os_id(*(const hwloc_obj_t *)b);

	return (x > y) - (x < y);
}

/* The objects of `type` by OS index; *n their count. Caller frees. */
static int objects_by_id(hwloc_obj_t **out, unsigned *n, probe_t *p,
			 hwloc_obj_type_t type)
{
	int count = hwloc_get_nbobjs_by_type(p->topo, type);

	*out = NULL;
	*n = count > 0 ? (unsigned)count : 0;
	if (*n == 0)
		return 0;
	if (!(*out = calloc(*n, sizeof(**out))))
		return ft_error_set(FT_ENOMEM, "discover: out of memory");
	for (unsigned i = 0; i < *n; i++)
		(*out)[i] = hwloc_get_obj_by_type(p->topo, type, i);
	qsort(*out, *n, sizeof(**out), by_os_id);
	return 0;
}

/* hwloc cpusets hold OS indexes of PUs: the Linux CPU ids. */
static int numa_cpus(ft_cpuset_t *out, hwloc_obj_t numa)
{
	int cpu;

	ft_cpuset_clear(out);
	hwloc_bitmap_foreach_begin(cpu, numa->cpuset)
	{
		if (cpu >= FT_CPU_MAX)
			return ft_error_set(
			    FT_EINVAL,
			    "NUMA node %d: CPU %d is above the model's limit of %d CPUs",
			    os_id(numa), cpu, FT_CPU_MAX - 1);
		ft_cpuset_add(out, (unsigned)cpu);
	}
	hwloc_bitmap_foreach_end();
	return 0;
}

/* Position in `packages` of the package holding `numa`'s CPUs; 0 if none. */
static unsigned package_of(const probe_t *p, hwloc_obj_t numa,
			   hwloc_obj_t *packages, unsigned n_packages)
{
	for (unsigned i = 0; i < n_packages; i++) {
		if (!hwloc_bitmap_intersects(packages[i]->cpuset, numa->cpuset))
			continue;
		if (!hwloc_bitmap_isincluded(numa->cpuset, packages[i]->cpuset))
			probe_warn(
			    p,
			    "NUMA node %d spans several packages; put under socket %d",
			    os_id(numa), os_id(packages[i]));
		return i;
	}
	return 0;
}

static int add_numa(probe_t *p, ft_topology_t *t, unsigned socket,
		    hwloc_obj_t numa)
{
	ft_cpuset_t cpus;
	int rc;

	if ((rc = numa_cpus(&cpus, numa)) < 0)
		return rc;
	rc = ft_topology_add_numa(t, socket, os_id(numa), &cpus,
				  numa->attr->numanode.local_memory / MIB);
	return rc < 0 ? rc : 0;
}

/*
 * Socket `id` and, in id order, the NUMA nodes that `owner` assigns to
 * package position `pkg`. A package without such NUMA nodes adds nothing.
 */
static int add_socket(probe_t *p, ft_topology_t *t, int id, unsigned pkg,
		      hwloc_obj_t *numa, const unsigned *owner, unsigned n_numa)
{
	int socket = -1, rc;

	for (unsigned i = 0; i < n_numa; i++) {
		if (!numa[i] || owner[i] != pkg)
			continue;
		if (socket < 0 && (socket = ft_topology_add_socket(t, id)) < 0)
			return socket;
		if ((rc = add_numa(p, t, (unsigned)socket, numa[i])) < 0)
			return rc;
	}
	return 0;
}

/*
 * Drop (set NULL), with a warning each, the NUMA nodes that hold memory
 * only. hwloc 2 gives a CPU-less node (CXL expander, HBM or NVDIMM beside
 * DRAM, GPU memory on Grace Hopper) the CPUs of the object it is attached
 * to, which are those of the DRAM node attached there too: of the nodes
 * attached to one object the lowest id is the one with CPUs (Linux numbers
 * DRAM nodes first), the others are memory only. `numa` is sorted by id.
 */
static void drop_memory_only(const probe_t *p, hwloc_obj_t *numa, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		for (unsigned j = 0; j < i && numa[i]; j++) {
			if (!numa[j] || numa[j]->parent != numa[i]->parent)
				continue;
			probe_warn(
			    p,
			    "NUMA node %d shares the CPUs of NUMA node %d (memory only: CXL, HBM or GPU memory); left out",
			    os_id(numa[i]), os_id(numa[j]));
			numa[i] = NULL;
		}
		if (numa[i] && hwloc_bitmap_iszero(numa[i]->cpuset)) {
			probe_warn(p, "NUMA node %d has no CPUs; left out",
				   os_id(numa[i]));
			numa[i] = NULL;
		}
	}
}

int probe_add_cpus(probe_t *p, ft_topology_t *t)
{
	hwloc_obj_t *packages = NULL, *numa = NULL;
	unsigned n_packages = 0, n_numa = 0, *owner = NULL;
	int rc;

	if ((rc = objects_by_id(&packages, &n_packages, p, HWLOC_OBJ_PACKAGE)) <
		0 ||
	    (rc = objects_by_id(&numa, &n_numa, p, HWLOC_OBJ_NUMANODE)) < 0)
		goto cleanup;
	if (!(owner = calloc(n_numa + 1, sizeof(*owner)))) {
		rc = ft_error_set(FT_ENOMEM, "discover: out of memory");
		goto cleanup;
	}
	drop_memory_only(p, numa, n_numa);
	for (unsigned i = 0; i < n_numa; i++)
		if (numa[i])
			owner[i] = package_of(p, numa[i], packages, n_packages);
	if (n_packages == 0)
		rc = add_socket(p, t, 0, 0, numa, owner, n_numa);
	for (unsigned i = 0; i < n_packages && rc == 0; i++)
		rc = add_socket(p, t, os_id(packages[i]), i, numa, owner,
				n_numa);
cleanup:
	free(packages);
	free(numa);
	free(owner);
	return rc;
}
