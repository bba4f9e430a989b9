/*
 * Topology annotations (flextopo.io/topology) into the hardware model of
 * topology.h. Two formats are read.
 *
 * Ours (api/topology.schema.json, version 1) nests sockets, NUMA nodes, PCIe
 * switches, GPUs and MIG instances the way the hardware does, and names NVLink
 * peers by GPU index. An optional "migStrategy" states how the device plugin
 * exposes MIG; without it ft_topology_finish() infers it. A link may be listed
 * on one end or on both; both ends must then agree on the link count. Peers are
 * resolved in a second pass, once every GPU of the node is known.
 *
 * The FlexTopo graph of the paper's authors (arXiv 2411.11560) is a flat list
 * of typed nodes (Socket, NUMANode, CoreGroup, CPUCore, GPU) joined by
 * "contains" edges, optionally inside "spec". It carries no PCIe switches, no
 * NVLink and no MIG. What it leaves out stays unknown (topology.h): a
 * NUMANode without a memory attribute has unknown memory, not 0 MiB; a GPU
 * contained by a Socket has that socket but an unknown NUMA node, and a GPU
 * contained by nothing (the authors' own code writes GPUs without edges) an
 * unknown socket too. Cores and GPUs whose status is "used" become the
 * topology's reserved sets.
 *
 * Both readers call the builders of topology.h and leave the checks that span
 * the whole node (CPU overlap, uuid clashes, MIG overlap) to
 * ft_topology_finish(). Every other fault is FT_EINVAL with the JSON path of
 * the offending value, so that a person can find it in a node annotation.
 * Input is capped at 1 MiB; nesting is bounded by the formats themselves and
 * by cJSON's nesting limit, and the graph is walked without recursion.
 */
#include <flextopo/codec.h>
#include <flextopo/cpuset.h>
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define INPUT_CAP (1024 * 1024)
#define PATH_LEN  256
/* 2^53: JSON numbers are doubles, exact for integers up to here. */
#define MAX_EXACT_INT 9007199254740992LL
#define NO_NODE	      (-1)
#define UNRESOLVED    (-2)

/* Errors and JSON paths */

__attribute__((format(printf, 2, 3))) static int fail(const char *path,
						      const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = ft_error_vset_at(FT_EINVAL, path, fmt, ap);
	va_end(ap);
	return rc;
}

/* Prefix the message that a builder or a cpulist parser set with `path`. */
static int fail_with_last(int code, const char *path)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", ft_error_last());
	return ft_error_set(code, "%s: %s", path, msg);
}

__attribute__((format(printf, 2, 3))) static void path_set(char *out,
							   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, PATH_LEN, fmt, ap);
	va_end(ap);
}

/* One member of a JSON object and where it is. */
typedef struct field {
	const cJSON *item; /* NULL when absent */
	char path[PATH_LEN];
} field_t;

static void field_get(field_t *f, const cJSON *obj, const char *parent,
		      const char *key)
{
	f->item = cJSON_GetObjectItemCaseSensitive(obj, key);
	path_set(f->path, "%s%s%s", parent, parent[0] ? "." : "", key);
}

static void field_of(field_t *f, const cJSON *item, const char *path)
{
	f->item = item;
	path_set(f->path, "%s", path);
}

static int require_object(const cJSON *item, const char *path)
{
	return cJSON_IsObject(item) ? 0 : fail(path, "expected an object");
}

static int field_int(int64_t *out, const field_t *f, int64_t min, int64_t max)
{
	double v;

	if (!f->item)
		return fail(f->path, "missing");
	v = f->item->valuedouble;
	if (cJSON_IsNumber(f->item) && v >= (double)min && v <= (double)max &&
	    v == (double)(int64_t)v) {
		*out = (int64_t)v;
		return 0;
	}
	if (min == 0 && max >= INT_MAX)
		return fail(f->path, "expected a non-negative integer");
	return fail(f->path, "expected an integer %lld-%lld", (long long)min,
		    (long long)max);
}

static int field_string(const char **out, const field_t *f, bool allow_empty)
{
	if (!f->item)
		return fail(f->path, "missing");
	if (!cJSON_IsString(f->item) ||
	    (!allow_empty && f->item->valuestring[0] == '\0'))
		return fail(f->path, allow_empty
					 ? "expected a string"
					 : "expected a non-empty string");
	*out = f->item->valuestring;
	return 0;
}

static int field_bool(bool *out, const field_t *f)
{
	if (!f->item)
		return fail(f->path, "missing");
	if (!cJSON_IsBool(f->item))
		return fail(f->path, "expected true or false");
	*out = cJSON_IsTrue(f->item);
	return 0;
}

/* Called for each element of an array; `parent` is the caller's position. */
typedef int (*item_fn)(void *payload, const cJSON *item, const char *path,
		       unsigned parent);

static int each_item(const field_t *f, bool required, item_fn fn, void *payload,
		     unsigned parent)
{
	char path[PATH_LEN];
	const cJSON *item = NULL;
	unsigned i = 0;
	int rc;

	if (!f->item)
		return required ? fail(f->path, "missing") : 0;
	if (!cJSON_IsArray(f->item))
		return fail(f->path, "expected an array");
	cJSON_ArrayForEach (item, f->item) {
		path_set(path, "%s[%u]", f->path, i++);
		if ((rc = fn(payload, item, path, parent)) < 0)
			return rc;
	}
	return 0;
}

/* Our schema */

/* A GPU's "nvlinks", kept for the second pass. */
typedef struct nvlink_list {
	field_t field;
	int gpu_index;
} nvlink_list_t;

typedef struct schema_reader {
	ft_topology_t *t;
	unsigned n_lists;
	nvlink_list_t lists[FT_GPU_MAX]; /* one per GPU at most */
} schema_reader_t;

typedef struct gpu_fields {
	int64_t index;
	int64_t memory_mib;
	int64_t replicas;
	const char *uuid;
	const char *model;
} gpu_fields_t;

static int read_version(const cJSON *root)
{
	field_t f;
	int64_t v = 0;
	int rc;

	field_get(&f, root, "", "version");
	if ((rc = field_int(&v, &f, 0, INT_MAX)) < 0)
		return rc;
	if (v != 1)
		return fail(f.path, "%lld is not supported (expected 1)",
			    (long long)v);
	return 0;
}

static int read_mig_instance(void *payload, const cJSON *obj, const char *path,
			     unsigned gpu)
{
	schema_reader_t *r = payload;
	const char *profile = NULL, *uuid = NULL;
	int64_t start = 0, size = 0;
	field_t f;
	int rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "profile");
	if ((rc = field_string(&profile, &f, false)) < 0)
		return rc;
	field_get(&f, obj, path, "start");
	if ((rc = field_int(&start, &f, 0, FT_MIG_SLICES - 1)) < 0)
		return rc;
	field_get(&f, obj, path, "size");
	if ((rc = field_int(&size, &f, 1, FT_MIG_SLICES)) < 0)
		return rc;
	field_get(&f, obj, path, "uuid");
	if ((rc = field_string(&uuid, &f, false)) < 0)
		return rc;
	if (start + size > FT_MIG_SLICES)
		return fail(
		    path, "placement %lld:%lld ends past memory slice %d",
		    (long long)start, (long long)size, FT_MIG_SLICES - 1);
	rc = ft_topology_add_mig(r->t, gpu, profile, (unsigned)start,
				 (unsigned)size, uuid);
	return rc < 0 ? fail_with_last(rc, path) : 0;
}

static int read_mig(schema_reader_t *r, const cJSON *obj, const char *path,
		    unsigned gpu)
{
	field_t f, instances;
	bool enabled = false;
	int rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "enabled");
	if ((rc = field_bool(&enabled, &f)) < 0)
		return rc;
	field_get(&instances, obj, path, "instances");
	if (instances.item && !cJSON_IsArray(instances.item))
		return fail(instances.path, "expected an array");
	if (!enabled)
		return instances.item && instances.item->child
			   ? fail(instances.path,
				  "instances listed while MIG is disabled")
			   : 0;
	if ((rc = ft_topology_enable_mig(r->t, gpu)) < 0)
		return fail_with_last(rc, path);
	return each_item(&instances, false, read_mig_instance, r, gpu);
}

static int read_gpu_fields(gpu_fields_t *out, const cJSON *obj,
			   const char *path)
{
	field_t f;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "index");
	if ((rc = field_int(&out->index, &f, 0, INT_MAX)) < 0)
		return rc;
	field_get(&f, obj, path, "uuid");
	if ((rc = field_string(&out->uuid, &f, false)) < 0)
		return rc;
	field_get(&f, obj, path, "model");
	if (f.item && (rc = field_string(&out->model, &f, true)) < 0)
		return rc;
	field_get(&f, obj, path, "memoryMiB");
	if (f.item &&
	    (rc = field_int(&out->memory_mib, &f, 0, MAX_EXACT_INT)) < 0)
		return rc;
	return 0;
}

static int read_gpu(schema_reader_t *r, const cJSON *obj, const char *path,
		    unsigned numa, unsigned pcie_switch)
{
	gpu_fields_t g;
	field_t f;
	int pos, rc;

	if ((rc = read_gpu_fields(&g, obj, path)) < 0)
		return rc;
	pos = ft_topology_add_gpu(r->t, numa, pcie_switch, (int)g.index, g.uuid,
				  g.model, (uint64_t)g.memory_mib);
	if (pos < 0)
		return fail_with_last(pos, path);
	field_get(&f, obj, path, "nvlinks");
	if (f.item && !cJSON_IsArray(f.item))
		return fail(f.path, "expected an array");
	if (f.item) {
		r->lists[r->n_lists].field = f;
		r->lists[r->n_lists].gpu_index = (int)g.index;
		r->n_lists++;
	}
	field_get(&f, obj, path, "replicas");
	if (f.item &&
	    ((rc = field_int(&g.replicas, &f, 2, FT_REPLICAS_MAX)) < 0 ||
	     (rc = ft_topology_share_gpu(r->t, (unsigned)pos,
					 (unsigned)g.replicas)) < 0))
		return rc;
	field_get(&f, obj, path, "mig");
	return f.item ? read_mig(r, f.item, f.path, (unsigned)pos) : 0;
}

static int read_port_gpu(void *payload, const cJSON *obj, const char *path,
			 unsigned numa)
{
	return read_gpu(payload, obj, path, numa, FT_NONE);
}

static int read_switch_gpu(void *payload, const cJSON *obj, const char *path,
			   unsigned pcie_switch)
{
	schema_reader_t *r = payload;

	return read_gpu(r, obj, path, r->t->switches[pcie_switch].numa,
			pcie_switch);
}

/* An object with a non-negative integer "id": sockets, NUMA nodes, switches. */
static int object_id(int64_t *id, const cJSON *obj, const char *path)
{
	field_t f;
	int rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "id");
	return field_int(id, &f, 0, INT_MAX);
}

static int read_switch(void *payload, const cJSON *obj, const char *path,
		       unsigned numa)
{
	schema_reader_t *r = payload;
	int64_t id = 0;
	field_t f;
	int pos, rc;

	if ((rc = object_id(&id, obj, path)) < 0)
		return rc;
	if ((pos = ft_topology_add_switch(r->t, numa, (int)id)) < 0)
		return fail_with_last(pos, path);
	field_get(&f, obj, path, "gpus");
	return each_item(&f, false, read_switch_gpu, r, (unsigned)pos);
}

static int read_numa(void *payload, const cJSON *obj, const char *path,
		     unsigned socket)
{
	schema_reader_t *r = payload;
	const char *cpulist = NULL;
	int64_t id = 0, mib = 0;
	ft_cpuset_t cpus;
	field_t f;
	int pos, rc;

	if ((rc = object_id(&id, obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "cpus");
	if ((rc = field_string(&cpulist, &f, true)) < 0)
		return rc;
	if ((rc = ft_cpuset_parse(&cpus, cpulist)) < 0)
		return fail_with_last(rc, f.path);
	field_get(&f, obj, path, "memoryMiB");
	if ((rc = field_int(&mib, &f, 0, MAX_EXACT_INT)) < 0)
		return rc;
	pos = ft_topology_add_numa(r->t, socket, (int)id, &cpus, (uint64_t)mib);
	if (pos < 0)
		return fail_with_last(pos, path);
	field_get(&f, obj, path, "pcieSwitches");
	if ((rc = each_item(&f, false, read_switch, r, (unsigned)pos)) < 0)
		return rc;
	field_get(&f, obj, path, "gpus");
	return each_item(&f, false, read_port_gpu, r, (unsigned)pos);
}

static int read_socket(void *payload, const cJSON *obj, const char *path,
		       unsigned unused)
{
	schema_reader_t *r = payload;
	int64_t id = 0;
	field_t f;
	int pos, rc;

	if ((rc = object_id(&id, obj, path)) < 0)
		return rc;
	if ((pos = ft_topology_add_socket(r->t, (int)id)) < 0)
		return fail_with_last(pos, path);
	field_get(&f, obj, path, "numaNodes");
	return each_item(&f, true, read_numa, r, (unsigned)pos);
}

/*
 * One NVLink entry of the GPU of nvlink list `list`. A link listed again
 * (from the other end, or twice on one end) must repeat the same count.
 */
static int read_nvlink(void *payload, const cJSON *obj, const char *path,
		       unsigned list)
{
	schema_reader_t *r = payload;
	int gpu_index = r->lists[list].gpu_index;
	int64_t peer = 0, links = 0;
	field_t peer_f, links_f;
	const ft_gpu_t *gpu;
	int b, rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&peer_f, obj, path, "peer");
	if ((rc = field_int(&peer, &peer_f, 0, INT_MAX)) < 0)
		return rc;
	field_get(&links_f, obj, path, "links");
	if ((rc = field_int(&links, &links_f, 1, 255)) < 0)
		return rc;
	if ((b = ft_topology_find_gpu_index(r->t, (int)peer)) < 0)
		return fail(peer_f.path, "no GPU with index %lld",
			    (long long)peer);
	if (peer == gpu_index)
		return fail(peer_f.path, "GPU %d cannot link to itself",
			    gpu_index);
	gpu = &r->t->gpus[ft_topology_find_gpu_index(r->t, gpu_index)];
	if (!(gpu->nvlink_peers & (1u << b))) {
		rc = ft_topology_add_nvlink(r->t, gpu_index, (int)peer,
					    (unsigned)links);
		return rc < 0 ? fail_with_last(rc, path) : 0;
	}
	if (gpu->nvlink_links[b] != links)
		return fail(
		    links_f.path,
		    "%lld links between GPUs %d and %lld disagree with the %u listed before",
		    (long long)links, gpu_index, (long long)peer,
		    gpu->nvlink_links[b]);
	return 0;
}

static int read_nvlinks(schema_reader_t *r)
{
	int rc;

	for (unsigned i = 0; i < r->n_lists; i++)
		if ((rc = each_item(&r->lists[i].field, false, read_nvlink, r,
				    i)) < 0)
			return rc;
	return 0;
}

static int read_reserved_cpus(ft_topology_t *t, const field_t *f)
{
	const char *cpulist = NULL;
	ft_cpuset_t cpus, outside;
	int rc;

	if ((rc = field_string(&cpulist, f, true)) < 0)
		return rc;
	if ((rc = ft_cpuset_parse(&cpus, cpulist)) < 0)
		return fail_with_last(rc, f->path);
	outside = cpus;
	for (unsigned n = 0; n < t->n_numa; n++)
		ft_cpuset_andnot(&outside, &outside, &t->numa[n].cpus);
	for (unsigned c = 0; c < FT_CPU_MAX; c++)
		if (ft_cpuset_has(&outside, c))
			return fail(f->path, "CPU %u is in no NUMA node", c);
	t->reserved_cpus = cpus;
	return 0;
}

static int read_reserved_gpu(void *payload, const cJSON *item, const char *path,
			     unsigned unused)
{
	schema_reader_t *r = payload;
	int64_t index = 0;
	field_t f;
	int pos, rc;

	field_of(&f, item, path);
	if ((rc = field_int(&index, &f, 0, INT_MAX)) < 0)
		return rc;
	if ((pos = ft_topology_find_gpu_index(r->t, (int)index)) < 0)
		return fail(path, "no GPU with index %lld", (long long)index);
	r->t->reserved_gpus |= (uint16_t)(1u << pos);
	return 0;
}

/* "reserved": {"cpus": cpulist, "gpus": [GPU index, ...]}, optional. */
static int read_reserved(schema_reader_t *r, const cJSON *root)
{
	field_t reserved, f;
	int rc;

	field_get(&reserved, root, "", "reserved");
	if (!reserved.item)
		return 0;
	if ((rc = require_object(reserved.item, reserved.path)) < 0)
		return rc;
	field_get(&f, reserved.item, reserved.path, "cpus");
	if (f.item && (rc = read_reserved_cpus(r->t, &f)) < 0)
		return rc;
	field_get(&f, reserved.item, reserved.path, "gpus");
	return each_item(&f, false, read_reserved_gpu, r, 0);
}

/* The optional string `key` of the root: 1 and `*v` when present, 0 when
 * absent, < 0 when not a string. */
static int optional_root_string(const char **v, field_t *f, const cJSON *root,
				const char *key)
{
	int rc;

	field_get(f, root, "", key);
	if (!f->item)
		return 0;
	return (rc = field_string(v, f, false)) < 0 ? rc : 1;
}

/* "migStrategy": "single" | "mixed", optional; finish() checks single. */
static int read_mig_strategy(ft_topology_t *t, const cJSON *root)
{
	const char *v = NULL;
	field_t f;
	int rc;

	if ((rc = optional_root_string(&v, &f, root, "migStrategy")) <= 0)
		return rc;
	if (strcmp(v, "single") == 0)
		ft_topology_set_mig_strategy(t, FT_MIG_STRATEGY_SINGLE);
	else if (strcmp(v, "mixed") == 0)
		ft_topology_set_mig_strategy(t, FT_MIG_STRATEGY_MIXED);
	else
		return fail(f.path, "\"%.32s\" is not single or mixed", v);
	return 0;
}

/* "sharedResource": the name the replicas of shared GPUs go by, optional. */
static int read_shared_resource(ft_topology_t *t, const cJSON *root)
{
	const char *v = NULL;
	field_t f;
	int rc;

	if ((rc = optional_root_string(&v, &f, root, "sharedResource")) <= 0)
		return rc;
	return ft_topology_set_shared_resource(t, v);
}

static int read_schema(ft_topology_t *t, const cJSON *root)
{
	schema_reader_t r = {.t = t};
	field_t f;
	int rc;

	if ((rc = read_version(root)) < 0)
		return rc;
	field_get(&f, root, "", "sockets");
	if ((rc = each_item(&f, true, read_socket, &r, 0)) < 0 ||
	    (rc = read_nvlinks(&r)) < 0 || (rc = read_reserved(&r, root)) < 0 ||
	    (rc = read_mig_strategy(t, root)) < 0 ||
	    (rc = read_shared_resource(t, root)) < 0)
		return rc;
	return ft_topology_finish(t);
}

/* The FlexTopo graph */

typedef enum {
	KIND_OTHER, /* a type we do not know: ignored with its edges */
	KIND_SOCKET,
	KIND_NUMA,
	KIND_COREGROUP,
	KIND_CORE,
	KIND_GPU,
	KIND_COUNT,
} kind_t;

static const char *const kind_names[KIND_COUNT] = {
    "", "Socket", "NUMANode", "CoreGroup", "CPUCore", "GPU"};

/* Which kinds may contain a node of each kind (bits of kind_t). */
static const unsigned containers[KIND_COUNT] = {
    [KIND_NUMA] = 1u << KIND_SOCKET,
    [KIND_COREGROUP] = (1u << KIND_NUMA) | (1u << KIND_COREGROUP),
    [KIND_CORE] = (1u << KIND_NUMA) | (1u << KIND_COREGROUP),
    [KIND_GPU] = (1u << KIND_NUMA) | (1u << KIND_SOCKET),
};

typedef struct graph_node {
	const char *id;	    /* borrowed from the cJSON tree */
	const cJSON *attrs; /* "attributes"; NULL when absent */
	kind_t kind;
	int number;   /* socket id, NUMA id, CPU id or GPU index */
	int parent;   /* index of the container; NO_NODE for none */
	int edge;     /* the edges[] entry that named the container */
	int numa;     /* index of the enclosing NUMANode, or UNRESOLVED */
	int pos;      /* topology position of a socket or NUMA node */
	uint8_t mark; /* cycle search: 0 new, 1 on this walk, 2 done */
} graph_node_t;

typedef struct graph {
	ft_topology_t *t;
	char nodes_path[PATH_LEN]; /* "spec.nodes" or "nodes" */
	char edges_path[PATH_LEN];
	graph_node_t *nodes;
	graph_node_t *
	    *order; /* by id for find_node(), later one kind by number */
	unsigned n_nodes, n_edges;
} graph_t;

static void node_path(char *out, const graph_t *g, const graph_node_t *n,
		      const char *suffix)
{
	path_set(out, "%s[%td]%s", g->nodes_path, n - g->nodes, suffix);
}

static kind_t kind_of(const char *type)
{
	for (int k = KIND_SOCKET; k < KIND_COUNT; k++)
		if (strcmp(type, kind_names[k]) == 0)
			return (kind_t)k;
	return KIND_OTHER;
}

/* The number after the last '-' of an id ("core-27" is 27); -1 when none. */
static int id_number(const char *id)
{
	const char *p = strrchr(id, '-');
	long v = 0;

	if (!p || !p[1])
		return -1;
	for (p++; *p; p++) {
		if (*p < '0' || *p > '9' || v > INT_MAX / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v <= INT_MAX ? (int)v : -1;
}

static int read_node_number(graph_node_t *n, const char *path)
{
	char id_path[PATH_LEN];

	if (n->kind == KIND_OTHER || n->kind == KIND_COREGROUP)
		return 0;
	path_set(id_path, "%s.id", path);
	if ((n->number = id_number(n->id)) < 0)
		return fail(id_path,
			    "\"%s\": expected a number after the last '-'",
			    n->id);
	if (n->kind == KIND_CORE && n->number >= FT_CPU_MAX)
		return fail(id_path, "CPU %d is above the highest CPU id %d",
			    n->number, FT_CPU_MAX - 1);
	return 0;
}

static int read_graph_node(void *payload, const cJSON *obj, const char *path,
			   unsigned unused)
{
	graph_t *g = payload;
	graph_node_t *n = &g->nodes[g->n_nodes];
	const char *type = NULL;
	field_t f;
	int rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "id");
	if ((rc = field_string(&n->id, &f, false)) < 0)
		return rc;
	field_get(&f, obj, path, "type");
	if ((rc = field_string(&type, &f, false)) < 0)
		return rc;
	field_get(&f, obj, path, "attributes");
	if (f.item && (rc = require_object(f.item, f.path)) < 0)
		return rc;
	n->attrs = f.item;
	n->kind = kind_of(type);
	n->number = -1;
	n->parent = NO_NODE;
	n->edge = -1;
	n->numa = n->kind == KIND_NUMA ? (int)g->n_nodes : UNRESOLVED;
	g->n_nodes++;
	return read_node_number(n, path);
}

static int by_id(const void *a, const void *b)
{
	const graph_node_t *x = *(graph_node_t *const *)a;
	const graph_node_t *y = *(graph_node_t *const *)b;
	int c = strcmp(x->id, y->id);

	return c ? c : (x < y ? -1 : x > y);
}

static int id_matches(const void *key, const void *elem)
{
	return strcmp(key, (*(graph_node_t *const *)elem)->id);
}

static graph_node_t *find_node(const graph_t *g, const char *id)
{
	graph_node_t **hit =
	    bsearch(id, g->order, g->n_nodes, sizeof(*g->order), id_matches);

	return hit ? *hit : NULL;
}

/* Sort g->order by id for find_node(); ids must be unique. */
static int index_ids(graph_t *g)
{
	char path[PATH_LEN];

	for (unsigned i = 0; i < g->n_nodes; i++)
		g->order[i] = &g->nodes[i];
	qsort(g->order, g->n_nodes, sizeof(*g->order), by_id);
	for (unsigned i = 1; i < g->n_nodes; i++) {
		if (strcmp(g->order[i - 1]->id, g->order[i]->id) != 0)
			continue;
		node_path(path, g, g->order[i], ".id");
		return fail(path, "duplicate id \"%s\"", g->order[i]->id);
	}
	return 0;
}

static int find_end(graph_node_t **out, const graph_t *g, const cJSON *obj,
		    const char *path, const char *key)
{
	const char *id = NULL;
	field_t f;
	int rc;

	field_get(&f, obj, path, key);
	if ((rc = field_string(&id, &f, false)) < 0)
		return rc;
	if (!(*out = find_node(g, id)))
		return fail(f.path, "unknown node \"%s\"", id);
	return 0;
}

static int read_edge(void *payload, const cJSON *obj, const char *path,
		     unsigned unused)
{
	graph_t *g = payload;
	graph_node_t *source = NULL, *target = NULL;
	int edge = (int)g->n_edges++;
	const char *type = "contains";
	field_t f;
	int rc;

	if ((rc = require_object(obj, path)) < 0)
		return rc;
	field_get(&f, obj, path, "type");
	if (f.item && (rc = field_string(&type, &f, false)) < 0)
		return rc;
	if ((rc = find_end(&source, g, obj, path, "source")) < 0 ||
	    (rc = find_end(&target, g, obj, path, "target")) < 0)
		return rc;
	if (strcmp(type, "contains") != 0 || source->kind == KIND_OTHER ||
	    target->kind == KIND_OTHER)
		return 0;
	if (target->parent == source - g->nodes)
		return 0; /* the same edge again */
	if (target->parent != NO_NODE)
		return fail(
		    path, "\"%s\" is contained by both \"%s\" and \"%s\"",
		    target->id, g->nodes[target->parent].id, source->id);
	target->parent = (int)(source - g->nodes);
	target->edge = edge;
	return 0;
}

/*
 * Every node has at most one container, so containment is a forest unless a
 * walk up from some node comes back to a node of the same walk.
 */
static int check_cycles(graph_t *g)
{
	for (unsigned i = 0; i < g->n_nodes; i++) {
		int j = (int)i;
		while (j != NO_NODE && g->nodes[j].mark == 0) {
			g->nodes[j].mark = 1;
			j = g->nodes[j].parent;
		}
		if (j != NO_NODE && g->nodes[j].mark == 1)
			return fail(g->edges_path,
				    "containment cycle through \"%s\"",
				    g->nodes[j].id);
		for (j = (int)i; j != NO_NODE && g->nodes[j].mark == 1;
		     j = g->nodes[j].parent)
			g->nodes[j].mark = 2;
	}
	return 0;
}

static int check_containers(const graph_t *g)
{
	char path[PATH_LEN];

	for (unsigned i = 0; i < g->n_nodes; i++) {
		const graph_node_t *n = &g->nodes[i], *p;
		if (n->parent == NO_NODE) {
			if (n->kind != KIND_NUMA)
				continue;
			node_path(path, g, n, "");
			return fail(
			    path,
			    "NUMANode \"%s\" is not contained by a Socket",
			    n->id);
		}
		p = &g->nodes[n->parent];
		if (containers[n->kind] & (1u << p->kind))
			continue;
		path_set(path, "%s[%d]", g->edges_path, n->edge);
		return fail(path, "a %s (\"%s\") cannot contain a %s (\"%s\")",
			    kind_names[p->kind], p->id, kind_names[n->kind],
			    n->id);
	}
	return 0;
}

static int by_number(const void *a, const void *b)
{
	const graph_node_t *x = *(graph_node_t *const *)a;
	const graph_node_t *y = *(graph_node_t *const *)b;

	if (x->number != y->number)
		return x->number < y->number ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Fill g->order with the nodes of one kind by number; returns the count. */
static unsigned sort_kind(graph_t *g, kind_t kind)
{
	unsigned count = 0;

	for (unsigned i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].kind == kind)
			g->order[count++] = &g->nodes[i];
	qsort(g->order, count, sizeof(*g->order), by_number);
	return count;
}

/* The NUMANode enclosing node i, through CoreGroups; memoised. */
static int numa_of(graph_t *g, int i)
{
	int j = i, found;

	while (j != NO_NODE && g->nodes[j].numa == UNRESOLVED)
		j = g->nodes[j].parent;
	found = j == NO_NODE ? NO_NODE : g->nodes[j].numa;
	for (int k = i; k != j; k = g->nodes[k].parent)
		g->nodes[k].numa = found;
	return found;
}

/* attributes.status of a core or GPU: true when "used". */
static int read_used(bool *out, const graph_t *g, const graph_node_t *n)
{
	char path[PATH_LEN];
	field_t f;

	*out = false;
	if (!n->attrs)
		return 0;
	node_path(path, g, n, ".attributes");
	field_get(&f, n->attrs, path, "status");
	if (!f.item)
		return 0;
	if (!cJSON_IsString(f.item) ||
	    (strcmp(f.item->valuestring, "used") != 0 &&
	     strcmp(f.item->valuestring, "free") != 0))
		return fail(f.path, "expected \"free\" or \"used\"");
	*out = strcmp(f.item->valuestring, "used") == 0;
	return 0;
}

static bool all_digits(const char *s)
{
	size_t len = strlen(s);

	return len > 0 && len <= 15 && strspn(s, "0123456789") == len;
}

/*
 * Memory in MiB from attributes "memoryMiB" or "memory": a JSON number or a
 * decimal string of MiB, or a Kubernetes quantity with a unit ("64Gi").
 * Strings are accepted because the authors' attributes are string maps.
 * Without either attribute, `absent`.
 */
static int read_memory(uint64_t *out, const graph_t *g, const graph_node_t *n,
		       uint64_t absent)
{
	char path[PATH_LEN];
	int64_t mib = 0;
	field_t f;
	int rc;

	*out = absent;
	if (!n->attrs)
		return 0;
	node_path(path, g, n, ".attributes");
	field_get(&f, n->attrs, path, "memoryMiB");
	if (!f.item)
		field_get(&f, n->attrs, path, "memory");
	if (!f.item)
		return 0;
	if (cJSON_IsString(f.item) && all_digits(f.item->valuestring)) {
		*out = strtoull(f.item->valuestring, NULL, 10);
		return 0;
	}
	if (cJSON_IsString(f.item)) {
		rc = ft_quantity_mib(out, f.item->valuestring);
		return rc < 0 ? fail_with_last(rc, f.path) : 0;
	}
	if ((rc = field_int(&mib, &f, 0, MAX_EXACT_INT)) < 0)
		return rc;
	*out = (uint64_t)mib;
	return 0;
}

static int read_gpu_text(const char **out, const graph_t *g,
			 const graph_node_t *n, const char *key)
{
	char path[PATH_LEN];
	field_t f;

	*out = NULL;
	if (!n->attrs)
		return 0;
	node_path(path, g, n, ".attributes");
	field_get(&f, n->attrs, path, key);
	return f.item ? field_string(out, &f, false) : 0;
}

static int build_sockets(graph_t *g)
{
	unsigned count = sort_kind(g, KIND_SOCKET);
	char path[PATH_LEN];

	for (unsigned i = 0; i < count; i++) {
		graph_node_t *n = g->order[i];
		if ((n->pos = ft_topology_add_socket(g->t, n->number)) < 0) {
			node_path(path, g, n, "");
			return fail_with_last(n->pos, path);
		}
	}
	return 0;
}

/* Each core's CPU into the cpuset of its NUMA node (by NUMA position). */
static int collect_cores(graph_t *g, ft_cpuset_t *cpus)
{
	char path[PATH_LEN];
	ft_cpuset_t seen;
	bool used = false;
	int numa, rc;

	ft_cpuset_clear(&seen);
	for (unsigned i = 0; i < g->n_nodes; i++) {
		graph_node_t *n = &g->nodes[i];
		if (n->kind != KIND_CORE)
			continue;
		node_path(path, g, n, "");
		if ((numa = numa_of(g, (int)i)) == NO_NODE)
			return fail(path,
				    "CPUCore \"%s\" is not inside a NUMANode",
				    n->id);
		if (ft_cpuset_has(&seen, (unsigned)n->number))
			return fail(path, "CPU %d is listed twice", n->number);
		if ((rc = read_used(&used, g, n)) < 0)
			return rc;
		ft_cpuset_add(&seen, (unsigned)n->number);
		ft_cpuset_add(&cpus[g->nodes[numa].pos], (unsigned)n->number);
		if (used)
			ft_cpuset_add(&g->t->reserved_cpus,
				      (unsigned)n->number);
	}
	return 0;
}

static int build_numa(graph_t *g)
{
	unsigned count = sort_kind(g, KIND_NUMA);
	ft_cpuset_t cpus[FT_NUMA_MAX];
	char path[PATH_LEN];
	uint64_t mib = 0;
	int pos, rc;

	if (count > FT_NUMA_MAX)
		return fail(g->nodes_path, "more than %d NUMA nodes",
			    FT_NUMA_MAX);
	for (unsigned i = 0; i < count; i++) {
		g->order[i]->pos = (int)i;
		ft_cpuset_clear(&cpus[i]);
	}
	if ((rc = collect_cores(g, cpus)) < 0)
		return rc;
	for (unsigned i = 0; i < count; i++) {
		graph_node_t *n = g->order[i];
		if ((rc = read_memory(&mib, g, n, FT_MEMORY_UNKNOWN)) < 0)
			return rc;
		pos = ft_topology_add_numa(g->t,
					   (unsigned)g->nodes[n->parent].pos,
					   n->number, &cpus[i], mib);
		if (pos < 0) {
			node_path(path, g, n, "");
			return fail_with_last(pos, path);
		}
	}
	return 0;
}

/*
 * Add GPU node `n` where the graph puts it: in its NUMANode; in its Socket
 * with the NUMA node unknown; or, contained by nothing, nowhere known.
 */
static int add_graph_gpu(graph_t *g, const graph_node_t *n, const char *uuid,
			 const char *model, uint64_t mib)
{
	const graph_node_t *p =
	    n->parent == NO_NODE ? NULL : &g->nodes[n->parent];

	if (p && p->kind == KIND_NUMA)
		return ft_topology_add_gpu(g->t, (unsigned)p->pos, FT_NONE,
					   n->number, uuid, model, mib);
	return ft_topology_add_gpu_unplaced(
	    g->t, p ? (unsigned)p->pos : FT_NONE, n->number, uuid, model, mib);
}

static int build_gpu(graph_t *g, const graph_node_t *n)
{
	const char *uuid = NULL, *model = NULL;
	char path[PATH_LEN], fallback[32];
	uint64_t mib = 0;
	bool used = false;
	int pos, rc;

	if ((rc = read_gpu_text(&uuid, g, n, "uuid")) < 0 ||
	    (rc = read_gpu_text(&model, g, n, "model")) < 0 ||
	    (rc = read_memory(&mib, g, n, 0)) < 0 ||
	    (rc = read_used(&used, g, n)) < 0)
		return rc;
	snprintf(fallback, sizeof(fallback), "gpu-%d", n->number);
	pos = add_graph_gpu(g, n, uuid ? uuid : fallback, model, mib);
	if (pos < 0) {
		node_path(path, g, n, "");
		return fail_with_last(pos, path);
	}
	if (used)
		g->t->reserved_gpus |= (uint16_t)(1u << pos);
	return 0;
}

static int build_gpus(graph_t *g)
{
	unsigned count = sort_kind(g, KIND_GPU);
	int rc;

	for (unsigned i = 0; i < count; i++)
		if ((rc = build_gpu(g, g->order[i])) < 0)
			return rc;
	return 0;
}

static int graph_alloc(graph_t *g, const field_t *nodes)
{
	size_t count;

	if (!nodes->item)
		return fail(nodes->path, "missing");
	if (!cJSON_IsArray(nodes->item))
		return fail(nodes->path, "expected an array");
	count = (size_t)cJSON_GetArraySize(nodes->item) + 1;
	g->nodes = calloc(count, sizeof(*g->nodes));
	g->order = calloc(count, sizeof(*g->order));
	if (!g->nodes || !g->order)
		return ft_error_set(FT_ENOMEM, "topology: out of memory");
	return 0;
}

static int read_graph(ft_topology_t *t, const cJSON *obj, const char *parent)
{
	graph_t g = {.t = t};
	field_t nodes, edges;
	int rc;

	field_get(&nodes, obj, parent, "nodes");
	field_get(&edges, obj, parent, "edges");
	path_set(g.nodes_path, "%s", nodes.path);
	path_set(g.edges_path, "%s", edges.path);
	if ((rc = graph_alloc(&g, &nodes)) < 0 ||
	    (rc = each_item(&nodes, true, read_graph_node, &g, 0)) < 0 ||
	    (rc = index_ids(&g)) < 0 ||
	    (rc = each_item(&edges, true, read_edge, &g, 0)) < 0 ||
	    (rc = check_cycles(&g)) < 0 || (rc = check_containers(&g)) < 0 ||
	    (rc = build_sockets(&g)) < 0 || (rc = build_numa(&g)) < 0 ||
	    (rc = build_gpus(&g)) < 0)
		goto cleanup;
	rc = ft_topology_finish(t);
cleanup:
	free(g.nodes);
	free(g.order);
	return rc;
}

/* Input and format detection */

static bool is_graph(const cJSON *obj)
{
	return cJSON_IsObject(obj) &&
	       cJSON_GetObjectItemCaseSensitive(obj, "nodes") &&
	       cJSON_GetObjectItemCaseSensitive(obj, "edges");
}

static int fail_unknown(void)
{
	return ft_error_set(
	    FT_EINVAL,
	    "unknown format: expected \"sockets\" or \"nodes\"/\"edges\"");
}

static int read_topology(ft_topology_t *t, const cJSON *root)
{
	const cJSON *spec = NULL;

	if (!cJSON_IsObject(root))
		return fail_unknown();
	if (cJSON_GetObjectItemCaseSensitive(root, "sockets"))
		return read_schema(t, root);
	if (is_graph(root))
		return read_graph(t, root, "");
	spec = cJSON_GetObjectItemCaseSensitive(root, "spec");
	if (is_graph(spec))
		return read_graph(t, spec, "spec");
	return fail_unknown();
}

static size_t skip_space(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len &&
	       (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* cJSON reads at most `len` bytes; after the value only whitespace may follow.
 */
static int parse_json(cJSON **out, const char *json, size_t len)
{
	const char *end = json;
	size_t at;

	*out =
	    json && len ? cJSON_ParseWithLengthOpts(json, len, &end, 0) : NULL;
	at = end && end >= json ? (size_t)(end - json) : 0;
	if (*out)
		at += skip_space(json + at, len - at);
	if (*out && at == len)
		return 0;
	cJSON_Delete(*out);
	*out = NULL;
	return ft_error_set(FT_EINVAL, "not JSON at offset %zu", at);
}

int ft_codec_topology_parse(ft_topology_t **out, const char *json, size_t len)
{
	ft_topology_t *t = NULL;
	cJSON *root = NULL;
	int rc;

	*out = NULL;
	if (len > INPUT_CAP) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "topology of %zu bytes is above the cap of %d bytes", len,
		    INPUT_CAP);
		goto cleanup;
	}
	if ((rc = parse_json(&root, json, len)) < 0 ||
	    (rc = ft_topology_new(&t)) < 0 || (rc = read_topology(t, root)) < 0)
		goto cleanup;
	*out = t;
	t = NULL;
cleanup:
	ft_topology_unref(t);
	cJSON_Delete(root);
	return rc;
}
