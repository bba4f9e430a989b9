/*
 * Node hardware topology: building, validating and deriving affinity domains.
 *
 * Domains are computed once per topology so that filter and score reduce to a
 * scan over a few precomputed GPU and NUMA masks. NVLink domains are the
 * maximal cliques of the NVLink graph (Bron-Kerbosch over 16-bit masks): an
 * NVSwitch board is one clique of all its GPUs, bridged pairs are cliques of
 * two, and a GPU without links is a clique of one. A GPU whose NUMA node is
 * unknown (unplaced) is left out of every NVLink, PCIe-switch and NUMA
 * domain: those levels promise CPUs near the GPUs, which nobody can tell for
 * it. It lies in its socket's domain when the socket is known, and in the
 * node's. The MIG strategy (how the device plugin exposes MIG) is settled
 * here too, inferred from the layout unless the annotation gave it.
 */
#include <flextopo/error.h>
#include <flextopo/topology.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[FT_LEVEL_COUNT] = {
    "nvlink", "pcie-switch", "numa", "socket", "node"};

const char *ft_level_name(ft_level_t level)
{
	return level < FT_LEVEL_COUNT ? level_names[level] : "none";
}

int ft_level_parse(ft_level_t *out, const char *name)
{
	for (int i = 0; i < FT_LEVEL_COUNT; i++) {
		if (name && strcmp(name, level_names[i]) == 0) {
			*out = (ft_level_t)i;
			return 0;
		}
	}
	return ft_error_set(
	    FT_EINVAL,
	    "affinity \"%s\": expected nvlink, pcie-switch, numa, socket or node",
	    name ? name : "");
}

int ft_topology_new(ft_topology_t **out)
{
	ft_topology_t *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return ft_error_set(FT_ENOMEM, "topology: out of memory");
	atomic_init(&t->refcount, 1);
	*out = t;
	return 0;
}

ft_topology_t *ft_topology_ref(ft_topology_t *t)
{
	if (t)
		atomic_fetch_add(&t->refcount, 1);
	return t;
}

void ft_topology_unref(ft_topology_t *t)
{
	if (!t || atomic_fetch_sub(&t->refcount, 1) != 1)
		return;
	for (unsigned i = 0; i < t->n_gpus; i++) {
		free(t->gpus[i].uuid);
		free(t->gpus[i].model);
		free(t->gpus[i].pci_bus_id);
	}
	for (unsigned i = 0; i < t->n_mig; i++) {
		free(t->mig[i].profile);
		free(t->mig[i].uuid);
	}
	free(t->mig);
	free(t->domains);
	free(t->shared_resource);
	free(t);
}

int ft_topology_add_socket(ft_topology_t *t, int id)
{
	for (unsigned i = 0; i < t->n_sockets; i++)
		if (t->sockets[i].id == id)
			return ft_error_set(FT_EINVAL,
					    "socket %d: duplicate id", id);
	if (t->n_sockets >= FT_SOCKET_MAX)
		return ft_error_set(FT_EINVAL,
				    "socket %d: more than %d sockets", id,
				    FT_SOCKET_MAX);
	t->sockets[t->n_sockets].id = id;
	return (int)t->n_sockets++;
}

int ft_topology_add_numa(ft_topology_t *t, unsigned socket, int id,
			 const ft_cpuset_t *cpus, uint64_t memory_mib)
{
	ft_numa_node_t *n;

	if (socket >= t->n_sockets)
		return ft_error_set(FT_EINVAL, "NUMA node %d: no such socket",
				    id);
	if (ft_topology_find_numa_id(t, id) >= 0)
		return ft_error_set(FT_EINVAL, "NUMA node %d: duplicate id",
				    id);
	if (t->n_numa >= FT_NUMA_MAX)
		return ft_error_set(FT_EINVAL,
				    "NUMA node %d: more than %d NUMA nodes", id,
				    FT_NUMA_MAX);
	n = &t->numa[t->n_numa];
	n->id = id;
	n->socket = (uint8_t)socket;
	n->cpus = *cpus;
	n->n_cpus = ft_cpuset_count(cpus);
	n->memory_mib = memory_mib == FT_MEMORY_UNKNOWN ? 0 : memory_mib;
	if (memory_mib == FT_MEMORY_UNKNOWN)
		t->numa_memory_unknown |= (uint16_t)(1u << t->n_numa);
	t->sockets[socket].numa_nodes |= (uint16_t)(1u << t->n_numa);
	return (int)t->n_numa++;
}

int ft_topology_add_switch(ft_topology_t *t, unsigned numa, int id)
{
	if (numa >= t->n_numa)
		return ft_error_set(FT_EINVAL,
				    "PCIe switch %d: no such NUMA node", id);
	for (unsigned i = 0; i < t->n_switches; i++)
		if (t->switches[i].id == id)
			return ft_error_set(FT_EINVAL,
					    "PCIe switch %d: duplicate id", id);
	if (t->n_switches >= FT_SWITCH_MAX)
		return ft_error_set(FT_EINVAL,
				    "PCIe switch %d: more than %d switches", id,
				    FT_SWITCH_MAX);
	t->switches[t->n_switches].id = id;
	t->switches[t->n_switches].numa = (uint8_t)numa;
	return (int)t->n_switches++;
}

uint64_t ft_gpu_product_hash(const char *name)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (const char *p = name ? name : ""; *p; p++) {
		h ^= (unsigned char)(*p == ' ' ? '-' : *p);
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* A new GPU at `numa` and `socket` (either may be FT_NONE); FT_EINVAL,
 * FT_ENOMEM. */
static int add_gpu(ft_topology_t *t, unsigned numa, unsigned socket,
		   unsigned pcie_switch, int index, const char *uuid,
		   const char *model, uint64_t memory_mib)
{
	ft_gpu_t *g;
	uint16_t bit;

	if (ft_topology_find_gpu_index(t, index) >= 0)
		return ft_error_set(FT_EINVAL, "GPU %d: duplicate index",
				    index);
	if (t->n_gpus >= FT_GPU_MAX)
		return ft_error_set(FT_EINVAL, "GPU %d: more than %d GPUs",
				    index, FT_GPU_MAX);
	g = &t->gpus[t->n_gpus];
	g->uuid = strdup(uuid ? uuid : "");
	g->model = strdup(model ? model : "");
	if (!g->uuid || !g->model)
		return ft_error_set(FT_ENOMEM, "GPU %d: out of memory", index);
	g->index = index;
	g->memory_mib = memory_mib;
	g->numa = (uint8_t)numa;
	g->socket = (uint8_t)socket;
	g->pcie_switch = (uint8_t)pcie_switch;
	bit = (uint16_t)(1u << t->n_gpus);
	if (numa != FT_NONE)
		t->numa[numa].gpus |= bit;
	else
		t->unplaced_gpus |= bit;
	if (socket != FT_NONE)
		t->sockets[socket].gpus |= bit;
	if (pcie_switch != FT_NONE)
		t->switches[pcie_switch].gpus |= bit;
	return (int)t->n_gpus++;
}

int ft_topology_set_gpu_pci_bus_id(ft_topology_t *t, unsigned g,
				   const char *bus_id)
{
	char *copy;

	if (g >= t->n_gpus || !bus_id || !bus_id[0])
		return ft_error_set(FT_EINVAL, "GPU position %u: no PCI bus id",
				    g);
	if (!(copy = strdup(bus_id)))
		return ft_error_set(FT_ENOMEM, "GPU position %u: out of memory",
				    g);
	free(t->gpus[g].pci_bus_id);
	t->gpus[g].pci_bus_id = copy;
	return 0;
}

int ft_topology_add_gpu(ft_topology_t *t, unsigned numa, unsigned pcie_switch,
			int index, const char *uuid, const char *model,
			uint64_t memory_mib)
{
	if (numa >= t->n_numa ||
	    (pcie_switch != FT_NONE && pcie_switch >= t->n_switches))
		return ft_error_set(FT_EINVAL, "GPU %d: no such parent", index);
	return add_gpu(t, numa, t->numa[numa].socket, pcie_switch, index, uuid,
		       model, memory_mib);
}

int ft_topology_add_gpu_unplaced(ft_topology_t *t, unsigned socket, int index,
				 const char *uuid, const char *model,
				 uint64_t memory_mib)
{
	if (socket != FT_NONE && socket >= t->n_sockets)
		return ft_error_set(FT_EINVAL, "GPU %d: no such socket", index);
	return add_gpu(t, FT_NONE, socket, FT_NONE, index, uuid, model,
		       memory_mib);
}

int ft_topology_add_nvlink(ft_topology_t *t, int gpu_index, int peer_index,
			   unsigned links)
{
	int a = ft_topology_find_gpu_index(t, gpu_index);
	int b = ft_topology_find_gpu_index(t, peer_index);

	if (a < 0 || b < 0 || a == b || links == 0 || links > 255)
		return ft_error_set(
		    FT_EINVAL,
		    "NVLink GPU %d -> %d: peer must be another GPU of this node, links 1-255",
		    gpu_index, peer_index);
	t->gpus[a].nvlink_peers |= (uint16_t)(1u << b);
	t->gpus[b].nvlink_peers |= (uint16_t)(1u << a);
	t->gpus[a].nvlink_links[b] = (uint8_t)links;
	t->gpus[b].nvlink_links[a] = (uint8_t)links;
	return 0;
}

int ft_topology_enable_mig(ft_topology_t *t, unsigned gpu)
{
	if (gpu >= t->n_gpus)
		return ft_error_set(FT_EINVAL, "MIG: no GPU at position %u",
				    gpu);
	t->gpus[gpu].mig_enabled = true;
	return 0;
}

/* Nominal memory from a profile name: "3g.40gb" and "1g.10gb+me" give GiB. */
static uint64_t profile_memory_mib(const char *profile)
{
	const char *dot = profile ? strchr(profile, '.') : NULL;
	char *end = NULL;
	unsigned long long gib;

	if (!dot || dot[1] < '0' || dot[1] > '9')
		return 0;
	gib = strtoull(dot + 1, &end, 10);
	if (strncmp(end, "gb", 2) != 0 || gib > UINT64_MAX / 1024)
		return 0;
	return (uint64_t)gib * 1024;
}

int ft_topology_add_mig(ft_topology_t *t, unsigned gpu, const char *profile,
			unsigned start, unsigned size, const char *uuid)
{
	ft_mig_instance_t *grown, *m;

	if (gpu >= t->n_gpus)
		return ft_error_set(FT_EINVAL, "MIG %s: no GPU at position %u",
				    profile, gpu);
	if (t->n_mig >= FT_MIG_MAX)
		return ft_error_set(FT_EINVAL, "MIG: more than %d instances",
				    FT_MIG_MAX);
	grown = realloc(t->mig, (t->n_mig + 1) * sizeof(*t->mig));
	if (!grown)
		return ft_error_set(FT_ENOMEM, "MIG: out of memory");
	t->mig = grown;
	m = &t->mig[t->n_mig];
	memset(m, 0, sizeof(*m));
	m->profile = strdup(profile ? profile : "");
	m->uuid = strdup(uuid ? uuid : "");
	m->gpu = (uint8_t)gpu;
	m->start = (uint8_t)start;
	m->size = (uint8_t)size;
	m->memory_mib = profile_memory_mib(profile);
	t->n_mig++;
	if (!m->profile || !m->uuid)
		return ft_error_set(FT_ENOMEM, "MIG: out of memory");
	t->gpus[gpu].mig_enabled = true;
	return (int)t->n_mig - 1;
}

int ft_topology_share_gpu(ft_topology_t *t, unsigned gpu, unsigned replicas)
{
	if (gpu >= t->n_gpus)
		return ft_error_set(FT_EINVAL, "GPU position %u out of range",
				    gpu);
	t->gpus[gpu].replicas =
	    (uint8_t)(replicas > UINT8_MAX ? UINT8_MAX : replicas);
	return 0;
}

int ft_topology_set_shared_resource(ft_topology_t *t, const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		return ft_error_set(FT_ENOMEM, "topology: out of memory");
	free(t->shared_resource);
	t->shared_resource = copy;
	return 0;
}

void ft_topology_set_mig_strategy(ft_topology_t *t, ft_mig_strategy_t s)
{
	t->mig_strategy = s;
	t->mig_strategy_given = true;
}

static int check_cpus(const ft_topology_t *t)
{
	for (unsigned i = 0; i < t->n_numa; i++)
		for (unsigned j = i + 1; j < t->n_numa; j++)
			if (ft_cpuset_intersects(&t->numa[i].cpus,
						 &t->numa[j].cpus))
				return ft_error_set(
				    FT_EINVAL,
				    "NUMA nodes %d and %d share CPUs",
				    t->numa[i].id, t->numa[j].id);
	return 0;
}

static int check_gpus(const ft_topology_t *t)
{
	for (unsigned i = 0; i < t->n_gpus; i++)
		for (unsigned j = i + 1; j < t->n_gpus; j++)
			if (t->gpus[i].uuid[0] &&
			    strcmp(t->gpus[i].uuid, t->gpus[j].uuid) == 0)
				return ft_error_set(
				    FT_EINVAL, "GPUs %d and %d share uuid %s",
				    t->gpus[i].index, t->gpus[j].index,
				    t->gpus[i].uuid);
	return 0;
}

static int check_mig(const ft_topology_t *t)
{
	uint8_t used[FT_GPU_MAX] = {0};

	for (unsigned i = 0; i < t->n_mig; i++) {
		const ft_mig_instance_t *m = &t->mig[i];
		unsigned span = m->start + m->size;
		uint8_t bits;
		if (m->size == 0 || span > FT_MIG_SLICES)
			return ft_error_set(
			    FT_EINVAL,
			    "MIG %s on GPU %d: placement %u:%u outside memory slices 0-7",
			    m->profile, t->gpus[m->gpu].index, m->start,
			    m->size);
		bits = (uint8_t)(((1u << m->size) - 1) << m->start);
		if (used[m->gpu] & bits)
			return ft_error_set(
			    FT_EINVAL,
			    "MIG %s on GPU %d: placement %u:%u overlaps another instance",
			    m->profile, t->gpus[m->gpu].index, m->start,
			    m->size);
		used[m->gpu] |= bits;
	}
	return 0;
}

/*
 * Why the node cannot be MIG-strategy single ("" when it can): a GPU without
 * MIG, no instances, or two profiles.
 */
static void single_fault(char *out, size_t size, const ft_topology_t *t)
{
	out[0] = '\0';
	if (!t->n_gpus || !t->n_mig) {
		snprintf(out, size, "the node has no MIG instances");
		return;
	}
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (!t->gpus[g].mig_enabled) {
			snprintf(out, size, "GPU %d is not MIG-enabled",
				 t->gpus[g].index);
			return;
		}
	for (unsigned i = 1; i < t->n_mig; i++)
		if (strcmp(t->mig[i].profile, t->mig[0].profile) != 0) {
			snprintf(
			    out, size,
			    "MIG instances of profiles %s and %s (single needs one)",
			    t->mig[0].profile, t->mig[i].profile);
			return;
		}
}

/* Infer the MIG strategy, or check the one the annotation gave. */
/* Replicas in range; a MIG-enabled GPU is partitioned, never time-sliced. */
static int check_shared(ft_topology_t *t)
{
	t->shared_gpus = 0;
	for (unsigned g = 0; g < t->n_gpus; g++) {
		const ft_gpu_t *gpu = &t->gpus[g];
		if (!gpu->replicas)
			continue;
		if (gpu->replicas < 2 || gpu->replicas > FT_REPLICAS_MAX)
			return ft_error_set(
			    FT_EINVAL, "GPU %d: replicas %u not in 2..%d",
			    gpu->index, gpu->replicas, FT_REPLICAS_MAX);
		if (gpu->mig_enabled)
			return ft_error_set(
			    FT_EINVAL,
			    "GPU %d: MIG-enabled GPU cannot be shared (replicas)",
			    gpu->index);
		t->shared_gpus |= (uint16_t)(1u << g);
	}
	return 0;
}

static int settle_mig_strategy(ft_topology_t *t)
{
	char fault[160];

	single_fault(fault, sizeof(fault), t);
	if (!t->mig_strategy_given) {
		t->mig_strategy =
		    fault[0] ? FT_MIG_STRATEGY_MIXED : FT_MIG_STRATEGY_SINGLE;
		return 0;
	}
	if (t->mig_strategy == FT_MIG_STRATEGY_SINGLE && fault[0])
		return ft_error_set(FT_EINVAL, "migStrategy single: %s", fault);
	return 0;
}

typedef struct {
	ft_domain_t list[FT_DOMAIN_MAX];
	unsigned n;
	bool overflow;
} domains_t;

static void push_domain(domains_t *d, ft_level_t level, unsigned owner,
			uint16_t gpus, uint16_t numa_nodes)
{
	if (d->n >= FT_DOMAIN_MAX) {
		d->overflow = true;
		return;
	}
	d->list[d->n].level = (uint8_t)level;
	d->list[d->n].owner = (uint8_t)owner;
	d->list[d->n].gpus = gpus;
	d->list[d->n].numa_nodes = numa_nodes;
	d->list[d->n].mig[0] = d->list[d->n].mig[1] = 0;
	d->n++;
}

static uint16_t numa_of_gpus(const ft_topology_t *t, uint16_t gpus)
{
	uint16_t numa = 0;

	for (unsigned g = 0; g < t->n_gpus; g++)
		if ((gpus & (1u << g)) && t->gpus[g].numa != FT_NONE)
			numa |= (uint16_t)(1u << t->gpus[g].numa);
	return numa;
}

/* Bron-Kerbosch without pivoting: at most 16 vertices. */
static void cliques(const ft_topology_t *t, domains_t *d, uint16_t r,
		    uint16_t p, uint16_t x)
{
	if (!p && !x) {
		push_domain(d, FT_LEVEL_NVLINK, d->n, r, numa_of_gpus(t, r));
		return;
	}
	for (unsigned v = 0; v < t->n_gpus; v++) {
		uint16_t bit = (uint16_t)(1u << v), nb;
		if (!(p & bit))
			continue;
		nb = t->gpus[v].nvlink_peers;
		cliques(t, d, r | bit, p & nb, x & nb);
		p &= (uint16_t)~bit;
		x |= bit;
	}
}

/* Unplaced GPUs take part in no domain below socket (the top of this file). */
static void derive_domains(const ft_topology_t *t, domains_t *d)
{
	uint16_t whole = 0, all_numa = 0, switchless = 0, mig = 0;

	for (unsigned g = 0; g < t->n_gpus; g++) {
		if (t->unplaced_gpus & (1u << g))
			continue;
		if (!t->gpus[g].mig_enabled)
			whole |= (uint16_t)(1u << g);
		else
			mig |= (uint16_t)(1u << g);
		if (t->gpus[g].pcie_switch == FT_NONE)
			switchless |= (uint16_t)(1u << g);
	}
	if (whole)
		cliques(t, d, 0, whole, 0);
	for (unsigned g = 0; g < t->n_gpus;
	     g++) /* MIG GPUs: no NVLink sharing */
		if (mig & (1u << g))
			push_domain(d, FT_LEVEL_NVLINK, d->n,
				    (uint16_t)(1u << g),
				    (uint16_t)(1u << t->gpus[g].numa));
	for (unsigned s = 0; s < t->n_switches; s++)
		push_domain(d, FT_LEVEL_PCIE_SWITCH, s, t->switches[s].gpus,
			    (uint16_t)(1u << t->switches[s].numa));
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (switchless & (1u << g))
			push_domain(d, FT_LEVEL_PCIE_SWITCH, FT_NONE,
				    (uint16_t)(1u << g),
				    (uint16_t)(1u << t->gpus[g].numa));
	for (unsigned n = 0; n < t->n_numa; n++) {
		push_domain(d, FT_LEVEL_NUMA, n, t->numa[n].gpus,
			    (uint16_t)(1u << n));
		all_numa |= (uint16_t)(1u << n);
	}
	for (unsigned s = 0; s < t->n_sockets; s++)
		push_domain(d, FT_LEVEL_SOCKET, s, t->sockets[s].gpus,
			    t->sockets[s].numa_nodes);
	push_domain(d, FT_LEVEL_NODE, 0,
		    (uint16_t)(t->n_gpus ? (1u << t->n_gpus) - 1 : 0),
		    all_numa);
}

static int by_level(const void *a, const void *b)
{
	const ft_domain_t *x = a, *y = b;

	if (x->level != y->level)
		return x->level < y->level ? -1 : 1;
	return 0;
}

static int store_domains(ft_topology_t *t, domains_t *d)
{
	unsigned i = 0;

	qsort(d->list, d->n, sizeof(d->list[0]), by_level);
	t->domains = malloc(d->n * sizeof(*t->domains));
	if (!t->domains)
		return ft_error_set(FT_ENOMEM, "topology: out of memory");
	memcpy(t->domains, d->list, d->n * sizeof(*t->domains));
	t->n_domains = d->n;
	for (unsigned l = 0; l <= FT_LEVEL_COUNT; l++) {
		while (i < d->n && d->list[i].level < l)
			i++;
		t->level_first[l] = i;
	}
	return 0;
}

/* Each domain's MIG instances, and each instance's profile id. */
static void derive_mig_masks(ft_topology_t *t)
{
	for (unsigned i = 0; i < t->n_mig; i++) {
		const ft_mig_instance_t *m = &t->mig[i];
		unsigned first = i;
		for (unsigned j = 0; j < i && first == i; j++)
			if (strcmp(t->mig[j].profile, m->profile) == 0)
				first = j;
		t->mig[i].profile_id = (uint8_t)first;
		for (unsigned k = 0; k < t->n_domains; k++)
			if (t->domains[k].gpus & (1u << m->gpu))
				ft_mig_mask_set(t->domains[k].mig, i);
	}
}

int ft_topology_finish(ft_topology_t *t)
{
	domains_t *d = NULL;
	int rc;

	if (t->n_numa == 0) {
		rc = ft_error_set(FT_EINVAL, "topology has no NUMA nodes");
		goto cleanup;
	}
	if ((rc = check_cpus(t)) < 0 || (rc = check_gpus(t)) < 0 ||
	    (rc = check_mig(t)) < 0 || (rc = check_shared(t)) < 0 ||
	    (rc = settle_mig_strategy(t)) < 0)
		goto cleanup;
	d = calloc(1, sizeof(*d));
	if (!d) {
		rc = ft_error_set(FT_ENOMEM, "topology: out of memory");
		goto cleanup;
	}
	derive_domains(t, d);
	if (d->overflow) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "more than %d affinity domains (NVLink groups, switches, NUMA nodes, sockets)",
		    FT_DOMAIN_MAX);
		goto cleanup;
	}
	free(t->domains);
	t->domains = NULL;
	if ((rc = store_domains(t, d)) < 0)
		goto cleanup;
	derive_mig_masks(t);
	t->whole_gpus = 0;
	t->n_cpus = 0;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (!t->gpus[g].mig_enabled)
			t->whole_gpus |= (uint16_t)(1u << g);
	for (unsigned n = 0; n < t->n_numa; n++)
		t->n_cpus += t->numa[n].n_cpus;
cleanup:
	free(d);
	return rc;
}

const char *ft_topology_single_profile(const ft_topology_t *t)
{
	return t->mig_strategy == FT_MIG_STRATEGY_SINGLE && t->n_mig
		   ? t->mig[0].profile
		   : NULL;
}

unsigned ft_topology_nvlink_domain_size(const ft_topology_t *t, unsigned gpu)
{
	unsigned best = 1;

	for (unsigned i = t->level_first[FT_LEVEL_NVLINK];
	     i < t->level_first[FT_LEVEL_NVLINK + 1]; i++) {
		unsigned n = (unsigned)__builtin_popcount(t->domains[i].gpus);
		if ((t->domains[i].gpus & (1u << gpu)) && n > best)
			best = n;
	}
	return best;
}

int ft_topology_find_gpu_uuid(const ft_topology_t *t, const char *uuid)
{
	for (unsigned i = 0; i < t->n_gpus; i++)
		if (strcmp(t->gpus[i].uuid, uuid) == 0)
			return (int)i;
	return -1;
}

int ft_topology_find_gpu_index(const ft_topology_t *t, int index)
{
	for (unsigned i = 0; i < t->n_gpus; i++)
		if (t->gpus[i].index == index)
			return (int)i;
	return -1;
}

int ft_topology_find_mig_uuid(const ft_topology_t *t, const char *uuid)
{
	for (unsigned i = 0; i < t->n_mig; i++)
		if (strcmp(t->mig[i].uuid, uuid) == 0)
			return (int)i;
	return -1;
}

int ft_topology_find_numa_id(const ft_topology_t *t, int id)
{
	for (unsigned i = 0; i < t->n_numa; i++)
		if (t->numa[i].id == id)
			return (int)i;
	return -1;
}

uint16_t ft_topology_numa_of_cpus(const ft_topology_t *t,
				  const ft_cpuset_t *cpus)
{
	uint16_t mask = 0;

	for (unsigned n = 0; n < t->n_numa; n++)
		if (ft_cpuset_intersects(&t->numa[n].cpus, cpus))
			mask |= (uint16_t)(1u << n);
	return mask;
}

size_t ft_topology_footprint(const ft_topology_t *t)
{
	size_t bytes = sizeof(*t) + t->n_domains * sizeof(*t->domains) +
		       t->n_mig * sizeof(*t->mig);

	for (unsigned i = 0; i < t->n_gpus; i++)
		bytes += strlen(t->gpus[i].uuid) + strlen(t->gpus[i].model) + 2;
	for (unsigned i = 0; i < t->n_mig; i++)
		bytes += strlen(t->mig[i].uuid) + strlen(t->mig[i].profile) + 2;
	return bytes;
}

uint16_t ft_topology_mig_gpus(const ft_topology_t *t, const uint64_t *mig)
{
	uint16_t gpus = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if (ft_mig_mask_has(mig, i))
			gpus |= (uint16_t)(1u << t->mig[i].gpu);
	return gpus;
}
