/*
 * Filter, score and choose: placement of one pod on one node.
 *
 * Filter and score scan the node's precomputed affinity domains and compare
 * the free units inside each with the demand, so their cost is a few dozen
 * mask operations per node, whatever the pod. Choose runs only at bind: it
 * takes the best domain under the node policy, then the best GPU subset in it
 * (an exhaustive search over at most a few thousand subsets, scoring pairs
 * like NVIDIA's go-gpuallocator and penalising NVLink pairs left broken, the
 * k8s-device-plugin #1193 problem), then MIG instances and CPUs near them.
 *
 * Each entry point first works out, once, which units may serve the pod
 * (ft_place_units): the demand as the node reads it (MIG strategy single
 * turns GPUs into instances) and masks of the GPUs and instances that meet
 * its capabilities (flextopo.io/requires). Everything after counts bits in
 * those masks, so capability matching adds one pass over at most 16 GPUs and
 * 128 instances per node and request.
 */
#include <flextopo/error.h>
#include <flextopo/mig.h>
#include <flextopo/place.h>

#include "place_priv.h"

#include <stdio.h>
#include <string.h>

ft_level_t ft_place_effective_level(const ft_demand_t *d)
{
	ft_level_t level = d->has_affinity ? d->level : FT_LEVEL_NODE;

	if (!d->gpus && !d->ranks && !d->mig_count && level < FT_LEVEL_NUMA)
		level = FT_LEVEL_NUMA;
	return level;
}

/*
 * The level a placement of `ad` (a demand as the node sees it,
 * ft_place_adapt) aims at: its affinity's; without one, an NVLink group
 * for GPUs and MIG instances, a NUMA node for CPUs alone.
 */
static ft_level_t wanted_level(const ft_demand_t *ad)
{
	if (ad->has_affinity)
		return ft_place_effective_level(ad);
	return ad->gpus || ad->ranks || ad->mig_count ? FT_LEVEL_NVLINK
						      : FT_LEVEL_NUMA;
}

/* The loosest level it may take: its own in guaranteed mode, else the
 * node. */
static ft_level_t loosest_level(const ft_demand_t *ad)
{
	return ad->has_affinity && ad->mode == FT_MODE_GUARANTEED
		   ? ft_place_effective_level(ad)
		   : FT_LEVEL_NODE;
}

void ft_place_adapt(ft_demand_t *out, const ft_topology_t *t,
		    const ft_demand_t *d)
{
	const char *profile = t ? ft_topology_single_profile(t) : NULL;

	*out = *d;
	out->key = 0; /* it may change below: no longer the key's demand */
	if (!profile && t && t->shared_gpus && d->gpus) {
		out->ranks = d->gpus;
		out->gpus = 0;
		return;
	}
	if (!profile || !d->gpus || strlen(profile) >= FT_PROFILE_MAX ||
	    (d->mig_count && strcmp(d->mig_profile, profile) != 0))
		return;
	snprintf(out->mig_profile, sizeof(out->mig_profile), "%s", profile);
	out->mig_count = d->mig_count > UINT32_MAX - d->gpus
			     ? UINT32_MAX
			     : d->mig_count + d->gpus;
	out->gpus = 0;
}

const char *ft_cap_name(ft_cap_t cap)
{
	static const char *const names[FT_CAP_COUNT] = {
	    "memoryPerGpu", "precision", "interconnect", "nvlinkDomainSize"};

	return cap < FT_CAP_COUNT ? names[cap] : "?";
}

/* GPUs in the NVLink domain of a unit: MIG slices share no NVLink. */
static unsigned unit_domain(const ft_topology_t *t, bool mig, unsigned i)
{
	return mig ? 1 : ft_topology_nvlink_domain_size(t, i);
}

/* What capability `k` asks of a unit (ft_unit_fault_t); 0: nothing. */
uint64_t place_cap_asked(const ft_caps_t *c, unsigned k)
{
	if (k == FT_CAP_MEMORY)
		return c->memory_mib;
	if (k == FT_CAP_PRECISION)
		return c->precisions;
	if (k == FT_CAP_INTERCONNECT)
		return c->interconnect == FT_INTERCONNECT_NVLINK
			   ? FT_INTERCONNECT_NVLINK
			   : 0;
	return c->nvlink_domain > 1 ? c->nvlink_domain : 0;
}

/*
 * What unit `i` (a whole GPU, or with `mig` an instance) has of capability
 * `k`, in the units of place_cap_asked(). Interconnect is read from the NVLink
 * domain, so that a GPU whose peers are all MIG-enabled counts as unlinked.
 */
uint64_t place_unit_has(const ft_topology_t *t, bool mig, unsigned i,
			unsigned k)
{
	const ft_gpu_t *g = &t->gpus[mig ? t->mig[i].gpu : i];

	if (k == FT_CAP_MEMORY)
		return mig ? t->mig[i].memory_mib : g->memory_mib;
	if (k == FT_CAP_PRECISION)
		return g->precisions;
	if (k == FT_CAP_INTERCONNECT)
		return unit_domain(t, mig, i) > 1 ? FT_INTERCONNECT_NVLINK
						  : FT_INTERCONNECT_PCIE;
	return unit_domain(t, mig, i);
}

/* Precisions are a set to include; the rest are amounts to reach. */
static bool cap_met(unsigned k, uint64_t asked, uint64_t has)
{
	return k == FT_CAP_PRECISION ? (has & asked) == asked : has >= asked;
}

/*
 * Which capabilities unit `i` (a whole GPU, or with `mig` an instance)
 * fails, as bits 1 << ft_cap_t: the one test of a match. The NVLink domain
 * is looked up only when asked.
 */
unsigned place_unit_faults(const ft_topology_t *t, const ft_caps_t *c, bool mig,
			   unsigned i)
{
	unsigned faults = 0;

	for (unsigned k = 0; k < FT_CAP_COUNT; k++) {
		uint64_t asked = place_cap_asked(c, k);
		if (asked && !cap_met(k, asked, place_unit_has(t, mig, i, k)))
			faults |= 1u << k;
	}
	return faults;
}

/* The GPUs that may serve `d` (adapted): shared ones for ranks, else those
 * that are not MIG-enabled. */
static uint16_t kind_gpus(const ft_topology_t *t, const ft_demand_t *d)
{
	return d->ranks ? t->shared_gpus : t->whole_gpus;
}

/*
 * Is unit `i` (a GPU, or with `mig` an instance) of a kind that may serve
 * `d` (adapted): an instance of its profile, or one of kind_gpus().
 */
bool place_of_kind(const ft_topology_t *t, const ft_demand_t *d, bool mig,
		   unsigned i)
{
	if (mig)
		return d->mig_count &&
		       strcmp(t->mig[i].profile, d->mig_profile) == 0;
	return (kind_gpus(t, d) >> i) & 1;
}

/* The first instance of the demand's profile; n_mig when none or none
 * asked. Profiles are compared by name once per profile, not per instance. */
static unsigned first_of_profile(const ft_topology_t *t, const ft_demand_t *d)
{
	for (unsigned i = 0; d->mig_count && i < t->n_mig; i++)
		if (t->mig[i].profile_id == i &&
		    strcmp(t->mig[i].profile, d->mig_profile) == 0)
			return i;
	return t->n_mig;
}

void ft_place_units(ft_units_t *out, const ft_topology_t *t,
		    const ft_demand_t *d)
{
	const ft_demand_t *a = &out->demand;
	unsigned first;

	ft_place_adapt(&out->demand, t, d);
	first = first_of_profile(t, a);
	out->gpus = kind_gpus(t, a);
	out->mig[0] = out->mig[1] = 0;
	for (unsigned g = 0; a->has_caps && g < t->n_gpus; g++)
		if (place_unit_faults(t, &a->caps, false, g))
			out->gpus &= (uint16_t) ~(1u << g);
	for (unsigned i = first; i < t->n_mig; i++)
		if (t->mig[i].profile_id == first &&
		    (!a->has_caps || !place_unit_faults(t, &a->caps, true, i)))
			ft_mig_mask_set(out->mig, i);
}

/* Only for a node with a topology. */
static void ask_init(ask_t *a, const ft_node_t *node, const ft_demand_t *d,
		     ft_policy_t policy)
{
	a->node = node;
	a->t = node->topology;
	ft_place_units(&a->u, node->topology, d);
	a->policy = d->has_policy ? d->policy : policy;
}

static bool mig_free(const ask_t *a, unsigned i, uint16_t gpus,
		     bool ignore_usage)
{
	return ft_mig_mask_has(a->u.mig, i) &&
	       (gpus & (1u << a->t->mig[i].gpu)) &&
	       (ignore_usage || !ft_node_mig_used(a->node, i));
}

/* Replicas one rank takes on GPU `g`: ceil(f x replicas), or 1. */
static unsigned rank_replicas(const ft_demand_t *d, const ft_topology_t *t,
			      unsigned g)
{
	if (!d->gpu_fraction_milli)
		return 1;
	return (d->gpu_fraction_milli * t->gpus[g].replicas + 999) / 1000;
}

/* Free replicas of shared GPU `g`: none when a pod holds it whole. */
static unsigned free_replicas(const ask_t *a, unsigned g, bool ignore_usage)
{
	return ignore_usage ? a->t->gpus[g].replicas
			    : ft_node_free_replicas(a->node, g);
}

/* One rank of the demand fits on shared GPU `g` now. */
static bool rank_fits(const ask_t *a, unsigned g)
{
	return free_replicas(a, g, false) >=
	       rank_replicas(&a->u.demand, a->t, g);
}

static uint32_t shared_room(const ask_t *a, uint16_t gpus, bool ignore_usage)
{
	const ft_demand_t *d = &a->u.demand;
	uint32_t r = 0;

	for (unsigned m = gpus & a->u.gpus; d->ranks && m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		unsigned f = free_replicas(a, g, ignore_usage);
		r += d->gpu_fraction_milli ? f >= rank_replicas(d, a->t, g) : f;
	}
	return r;
}

room_t place_domain_room(const ask_t *a, const ft_domain_t *dom,
			 bool ignore_usage)
{
	const ft_node_t *node = a->node;
	const ft_topology_t *t = a->t;
	uint16_t gpus = dom->gpus & a->u.gpus;
	room_t r = {0, 0, 0, 0, 0, false};

	if (!ignore_usage)
		gpus &= (uint16_t)~node->gpus_used;
	if (!ignore_usage)
		gpus &= (uint16_t)~ft_node_replica_gpus(node);
	r.gpus = a->u.demand.ranks ? 0 : (uint32_t)__builtin_popcount(gpus);
	r.shared = shared_room(a, dom->gpus, ignore_usage);
	for (unsigned k = 0; a->u.demand.mig_count && k < 2; k++)
		r.mig += (uint32_t)__builtin_popcountll(
		    a->u.mig[k] & dom->mig[k] &
		    (ignore_usage ? ~UINT64_C(0) : ~node->mig_used[k]));
	/* Visit only the domain's NUMA nodes: most domains hold one. */
	for (unsigned m = dom->numa_nodes; m; m &= m - 1) {
		unsigned n = (unsigned)__builtin_ctz(m);
		r.cpus +=
		    ignore_usage ? t->numa[n].n_cpus : node->numa_free_cpus[n];
		r.memory_mib += ignore_usage ? t->numa[n].memory_mib
					     : node->numa_free_memory_mib[n];
	}
	r.memory_unknown = (dom->numa_nodes & t->numa_memory_unknown) != 0;
	return r;
}

/* Enough units and CPUs, whatever the memory. */
bool place_room_fits_units(room_t r, const ft_demand_t *d)
{
	return r.gpus >= d->gpus && r.mig >= d->mig_count &&
	       r.shared >= d->ranks && r.cpus >= d->exclusive_cpus;
}

/* Memory is charged to NUMA nodes only with pinned CPUs; unknown passes. */
bool place_room_fits_memory(room_t r, const ft_demand_t *d)
{
	return !d->exclusive_cpus || r.memory_unknown ||
	       r.memory_mib >= d->memory_mib;
}

static bool room_fits(room_t r, const ft_demand_t *d)
{
	return place_room_fits_units(r, d) && place_room_fits_memory(r, d);
}

static uint32_t unknown_mig(const ft_node_t *node, const ft_demand_t *d)
{
	return d->mig_count ? ft_node_unknown_mig(node, d->mig_profile) : 0;
}

static const ft_domain_t *node_domain(const ft_topology_t *t)
{
	return &t->domains[t->level_first[FT_LEVEL_NODE]];
}

/* Node-wide room after the usage whose placement is unknown. */
static room_t node_room(const ask_t *a)
{
	const ft_node_t *node = a->node;
	room_t r = place_domain_room(a, node_domain(a->t), false);
	uint32_t um = unknown_mig(node, &a->u.demand);

	r.gpus = r.gpus > node->unknown_gpus ? r.gpus - node->unknown_gpus : 0;
	r.cpus = r.cpus > node->unknown_cpus ? r.cpus - node->unknown_cpus : 0;
	r.mig = r.mig > um ? r.mig - um : 0;
	r.shared = r.shared > node->unknown_replicas
		       ? r.shared - node->unknown_replicas
		       : 0;
	return r;
}

static bool node_room_fits(const ask_t *a)
{
	return room_fits(node_room(a), &a->u.demand);
}

static bool level_fits(const ask_t *a, ft_level_t level, bool ignore_usage)
{
	const ft_topology_t *t = a->t;

	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++)
		if (room_fits(
			place_domain_room(a, &t->domains[i], ignore_usage),
			&a->u.demand))
			return true;
	return false;
}

bool ft_place_fits_domain(const ft_node_t *node, const ft_demand_t *d,
			  unsigned domain)
{
	ask_t a;

	if (!node->topology || domain >= node->topology->n_domains)
		return false;
	ask_init(&a, node, d, FT_POLICY_PACKED);
	return node_room_fits(&a) &&
	       room_fits(place_domain_room(&a, &a.t->domains[domain], false),
			 &a.u.demand);
}

void ft_place_rooms(ft_room_t *domain_out, ft_room_t *node_out,
		    const ft_node_t *node, const ft_units_t *u, unsigned domain)
{
	ask_t a;

	a.node = node;
	a.t = node->topology;
	a.u = *u;
	a.policy = FT_POLICY_PACKED;
	*domain_out = place_domain_room(&a, &a.t->domains[domain], false);
	*node_out = node_room(&a);
}

bool ft_place_room_fits(const ft_room_t *r, const ft_demand_t *d)
{
	return room_fits(*r, d);
}

bool ft_place_fits_level(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level)
{
	ask_t a;

	if (!node->topology)
		return false;
	ask_init(&a, node, d, FT_POLICY_PACKED);
	return node_room_fits(&a) && level_fits(&a, level, false);
}

/* Tightest level (not tighter than `from`) with a fitting domain now. */
static ft_level_t reachable_level(const ask_t *a, ft_level_t from)
{
	if (!node_room_fits(a))
		return FT_LEVEL_COUNT;
	for (unsigned l = from; l < FT_LEVEL_COUNT; l++)
		if (level_fits(a, (ft_level_t)l, false))
			return (ft_level_t)l;
	return FT_LEVEL_COUNT;
}

/* Affinity and capabilities cannot be checked without a topology. */
static void filter_without_topology(ft_verdict_t *out, const ft_node_t *node,
				    const ft_demand_t *d)
{
	if (!d->has_affinity && !d->has_caps)
		return;
	out->fit = FT_UNFIT_UNRESOLVABLE;
	snprintf(out->reason, sizeof(out->reason), "topology: %s",
		 node->topology_error ? node->topology_error
				      : "no topology annotation");
}

/* Filter once the units are known; `need` is the level to reach. */
static void filter_ask(ft_verdict_t *out, const ask_t *a, ft_level_t need)
{
	ft_level_t level = ft_place_effective_level(&a->u.demand);
	caps_count_t caps;

	if (place_caps_short(&caps, a)) {
		out->fit = FT_UNFIT_UNRESOLVABLE;
		place_describe_caps(out->reason, sizeof(out->reason), a, &caps);
		return;
	}
	if (!level_fits(a, need, true)) {
		out->fit = FT_UNFIT_UNRESOLVABLE;
		place_describe_shortfall(out->reason, sizeof(out->reason), a,
					 need, true);
		return;
	}
	out->level = reachable_level(a, level);
	if (out->level <= need)
		return;
	out->fit = FT_UNFIT;
	place_describe_shortfall(out->reason, sizeof(out->reason), a,
				 node_room_fits(a) ? need : FT_LEVEL_NODE,
				 false);
}

void ft_place_filter(ft_verdict_t *out, const ft_node_t *node,
		     const ft_demand_t *d)
{
	ask_t a;

	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_COUNT;
	if (!node->topology) {
		filter_without_topology(out, node, d);
		return;
	}
	ask_init(&a, node, d, FT_POLICY_PACKED);
	filter_ask(out, &a, loosest_level(&a.u.demand));
}

/* Unit `i` of kind `kind` checked against the asked capabilities. */
static ft_unit_check_t check_unit(const ask_t *a, ft_unit_kind_t kind,
				  unsigned i)
{
	const ft_demand_t *d = &a->u.demand;
	bool mig = kind == FT_UNIT_MIG;
	ft_unit_check_t u = {(uint8_t)kind, (uint8_t)i, 0, 0, false};

	if (d->has_caps)
		u.faults = (uint8_t)place_unit_faults(a->t, &d->caps, mig, i);
	if (kind == FT_UNIT_SHARED) {
		u.replicas_free = (uint8_t)free_replicas(a, i, false);
		u.free = rank_fits(a, i);
	} else {
		u.free = mig ? !ft_node_mig_used(a->node, i)
			     : (ft_node_free_gpus(a->node) >> i) & 1;
	}
	return u;
}

unsigned ft_place_check_units(ft_unit_check_t *out, const ft_node_t *node,
			      const ft_demand_t *d)
{
	unsigned n = 0;
	ask_t a;

	if (!node->topology)
		return 0;
	ask_init(&a, node, d, FT_POLICY_PACKED);
	for (unsigned g = 0;
	     (a.u.demand.gpus || a.u.demand.ranks) && g < a.t->n_gpus; g++)
		if (place_of_kind(a.t, &a.u.demand, false, g))
			out[n++] = check_unit(
			    &a, a.u.demand.ranks ? FT_UNIT_SHARED : FT_UNIT_GPU,
			    g);
	for (unsigned i = 0; i < a.t->n_mig; i++)
		if (place_of_kind(a.t, &a.u.demand, true, i))
			out[n++] = check_unit(&a, FT_UNIT_MIG, i);
	return n;
}

/* Replicas of the shared GPUs that may serve the demand: total and held. */
static void shared_usage(const ask_t *a, unsigned *total, unsigned *used)
{
	*total = *used = 0;
	for (unsigned m = a->u.gpus; m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		*total += a->t->gpus[g].replicas;
		*used += a->t->gpus[g].replicas - free_replicas(a, g, false);
	}
	*used += a->node->unknown_replicas;
}

/* Units of the demand's kind that meet its capabilities: total and held. */
static void usage_of_kind(const ask_t *a, unsigned *total, unsigned *used)
{
	const ft_node_t *node = a->node;
	const ft_topology_t *t = a->t;
	const ft_demand_t *d = &a->u.demand;

	if (d->mig_count) {
		*total = place_domain_room(a, node_domain(t), true).mig;
		*used = *total -
			place_domain_room(a, node_domain(t), false).mig +
			unknown_mig(node, d);
	} else if (d->ranks) {
		shared_usage(a, total, used);
	} else if (d->gpus) {
		*total = (unsigned)__builtin_popcount(a->u.gpus);
		*used =
		    (unsigned)__builtin_popcount(node->gpus_used & a->u.gpus) +
		    node->unknown_gpus;
	} else {
		*total = t->n_cpus;
		*used = ft_cpuset_count(&node->cpus_used) + node->unknown_cpus;
	}
}

static int policy_points(const ask_t *a)
{
	unsigned total, used;

	usage_of_kind(a, &total, &used);
	if (!total)
		return 0;
	if (used > total)
		used = total;
	/* Round to 0..2: packed favours the fuller node, distributed the
	 * emptier. */
	return (
	    int)(((a->policy == FT_POLICY_PACKED ? used : total - used) * 2 +
		  total / 2) /
		 total);
}

/* 8 - 2 per level below the wanted one (not below 0); -1: unreachable. */
static int level_points(const ask_t *a)
{
	const ft_demand_t *ad = &a->u.demand;
	ft_level_t want, got;
	int points;

	want = wanted_level(ad);
	got = reachable_level(a, want);
	if (got == FT_LEVEL_COUNT)
		return -1;
	points = 8 - 2 * (int)(got - want);
	return points < 0 ? 0 : points;
}

int ft_place_score(const ft_node_t *node, const ft_demand_t *d,
		   ft_policy_t policy)
{
	int points;
	ask_t a;

	if (!node->topology ||
	    (!ft_demand_wants_devices(d) && !d->has_affinity))
		return 0;
	ask_init(&a, node, d, policy);
	points = level_points(&a);
	return points < 0 ? 0 : points + policy_points(&a);
}

int ft_place_level_points(const ft_node_t *node, const ft_demand_t *d)
{
	ask_t a;

	if (!ft_demand_wants_devices(d) && !d->has_affinity)
		return 8;
	if (!node->topology)
		return -1;
	ask_init(&a, node, d, FT_POLICY_PACKED);
	return level_points(&a);
}

uint8_t ft_place_levels_of(const ft_topology_t *t, uint16_t gpus,
			   uint16_t numa_nodes)
{
	unsigned first = gpus ? 0 : t->level_first[FT_LEVEL_NUMA];
	uint8_t levels = 0;

	for (unsigned i = first; i < t->n_domains; i++) {
		const ft_domain_t *dom = &t->domains[i];
		if (!(gpus & ~dom->gpus) && !(numa_nodes & ~dom->numa_nodes))
			levels |= (uint8_t)(1u << dom->level);
	}
	return levels;
}

ft_level_t ft_place_first_level(uint8_t levels, ft_level_t from)
{
	for (unsigned l = from; l < FT_LEVEL_COUNT; l++)
		if (levels & (1u << l))
			return (ft_level_t)l;
	return FT_LEVEL_NODE;
}

/* go-gpuallocator's pair weights: NVLink 100 a link, switch 50, NUMA 30, socket
 * 20, else 10. */
static int pair_weight(const ft_topology_t *t, unsigned a, unsigned b)
{
	const ft_gpu_t *x = &t->gpus[a], *y = &t->gpus[b];

	if (x->nvlink_peers & (1u << b))
		return 100 * x->nvlink_links[b];
	if (x->pcie_switch != FT_NONE && x->pcie_switch == y->pcie_switch)
		return 50;
	if (x->numa != FT_NONE && x->numa == y->numa)
		return 30;
	return x->socket != FT_NONE && x->socket == y->socket ? 20 : 10;
}

/* The GPUs next to GPU `g`: its PCIe switch's, else its NUMA node's; none
 * known for an unplaced GPU. */
static uint16_t gpu_neighbours(const ft_topology_t *t, unsigned g)
{
	const ft_gpu_t *gpu = &t->gpus[g];

	if (gpu->pcie_switch != FT_NONE)
		return t->switches[gpu->pcie_switch].gpus;
	return gpu->numa != FT_NONE ? t->numa[gpu->numa].gpus : 0;
}

/*
 * Value of taking `set` out of the free GPUs `free`: links kept inside the
 * set, minus NVLink pairs it breaks with GPUs left free, plus (packed) GPUs
 * already held beside it or (distributed) free ones.
 */
static long subset_value(const ft_node_t *node, uint16_t set, uint16_t free,
			 ft_policy_t policy)
{
	const ft_topology_t *t = node->topology;
	uint16_t rest = free & (uint16_t)~set;
	long v = 0;

	for (unsigned a = 0; a < t->n_gpus; a++) {
		const ft_gpu_t *g = &t->gpus[a];
		uint16_t nb = gpu_neighbours(t, a);
		if (!(set & (1u << a)))
			continue;
		for (unsigned b = a + 1; b < t->n_gpus; b++)
			if (set & (1u << b))
				v += 1000L * pair_weight(t, a, b);
		for (unsigned b = 0; b < t->n_gpus; b++)
			if ((rest & (1u << b)) && (g->nvlink_peers & (1u << b)))
				v -= 10L * g->nvlink_links[b];
		v += (policy == FT_POLICY_PACKED ? 1 : -1) *
		     __builtin_popcount(nb & node->gpus_used);
	}
	return v;
}

/* Best `n`-subset of `cand` by subset_value; exhaustive over <= 2^16 masks. */
static uint16_t choose_gpus(const ask_t *a, uint16_t cand, unsigned n)
{
	uint16_t free = ft_node_free_gpus(a->node), best = 0;
	long best_v = 0;

	if (!n)
		return 0;
	for (uint32_t s = cand;; s = (s - 1) & cand) {
		long v;
		if ((unsigned)__builtin_popcount(s) == n) {
			v = subset_value(a->node, (uint16_t)s, free, a->policy);
			if (!best || v > best_v) {
				best = (uint16_t)s;
				best_v = v;
			}
		}
		if (!s)
			break;
	}
	return best;
}

/* Memory slices per GPU held by pods or by `taken` (may be NULL). */
static void busy_slices(uint8_t *out, const ask_t *a, const uint64_t *taken)
{
	const ft_topology_t *t = a->t;

	memset(out, 0, FT_GPU_MAX);
	for (unsigned i = 0; i < t->n_mig; i++)
		if (ft_node_mig_used(a->node, i) ||
		    (taken && ft_mig_mask_has(taken, i)))
			out[t->mig[i].gpu] += t->mig[i].size;
}

/*
 * `n` free matching instances in `gpus`, one at a time: packed takes the
 * GPU with the most busy slices (counting those just taken), keeping empty
 * GPUs whole; distributed the one with the fewest.
 */
static int choose_mig(uint64_t *out, const ask_t *a, uint16_t gpus)
{
	const ft_topology_t *t = a->t;
	uint8_t busy[FT_GPU_MAX];

	out[0] = out[1] = 0;
	for (unsigned taken = 0; taken < a->u.demand.mig_count; taken++) {
		int best = -1;
		long best_v = 0;
		busy_slices(busy, a, out);
		for (unsigned i = 0; i < t->n_mig; i++) {
			long v = busy[t->mig[i].gpu];
			if (!mig_free(a, i, gpus, false) ||
			    ft_mig_mask_has(out, i))
				continue;
			v = a->policy == FT_POLICY_PACKED ? v : -v;
			if (best < 0 || v > best_v) {
				best = (int)i;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		ft_mig_mask_set(out, (unsigned)best);
	}
	return 0;
}

/*
 * Ranks of a shared demand in `gpus`, one at a time: each on the GPU that
 * has room for it with the most replicas used (packed; counting those just
 * taken, so replicas without a fraction stack up) or the fewest
 * (distributed). With a fraction a rank's replicas stay on one GPU and ranks
 * take distinct GPUs.
 */
static int choose_replicas(uint8_t *out, const ask_t *a, uint16_t gpus)
{
	const ft_demand_t *d = &a->u.demand;

	for (unsigned rank = 0; rank < d->ranks; rank++) {
		int best = -1;
		long best_v = 0;
		for (unsigned m = gpus & a->u.gpus; m; m &= m - 1) {
			unsigned g = (unsigned)__builtin_ctz(m);
			unsigned f = free_replicas(a, g, false);
			long v = (long)(a->t->gpus[g].replicas - f + out[g]);
			if ((d->gpu_fraction_milli && out[g]) ||
			    f < out[g] + rank_replicas(d, a->t, g))
				continue;
			v = a->policy == FT_POLICY_PACKED ? v : -v;
			if (best < 0 || v > best_v) {
				best = (int)g;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		out[best] += (uint8_t)rank_replicas(d, a->t, (unsigned)best);
	}
	return 0;
}

static uint16_t numa_of_units(const ft_topology_t *t, uint16_t gpus,
			      const uint64_t *mig)
{
	uint16_t numa = 0;

	gpus |= ft_topology_mig_gpus(t, mig);
	for (unsigned g = 0; g < t->n_gpus; g++)
		if ((gpus & (1u << g)) && t->gpus[g].numa != FT_NONE)
			numa |= (uint16_t)(1u << t->gpus[g].numa);
	return numa;
}

/* Take CPUs from `numa` in order of most free first. */
static void take_cpus(ft_placement_t *p, const ft_node_t *node, uint16_t numa,
		      unsigned *left)
{
	const ft_topology_t *t = node->topology;

	while (*left && numa) {
		int best = -1;
		ft_cpuset_t free_cpus, got;
		unsigned n;
		for (unsigned i = 0; i < t->n_numa; i++)
			if ((numa & (1u << i)) &&
			    (best < 0 || node->numa_free_cpus[i] >
					     node->numa_free_cpus[best]))
				best = (int)i;
		numa &= (uint16_t) ~(1u << best);
		ft_cpuset_andnot(&free_cpus, &t->numa[best].cpus,
				 &node->cpus_used);
		n = ft_cpuset_take_lowest(&got, &free_cpus, *left);
		if (!n)
			continue;
		ft_cpuset_or(&p->cpus, &p->cpus, &got);
		p->numa_nodes |= (uint16_t)(1u << best);
		*left -= n;
	}
}

static int choose_in_domain(ft_placement_t *out, const ask_t *a,
			    const ft_domain_t *dom, ft_level_t from)
{
	const ft_node_t *node = a->node;
	const ft_topology_t *t = a->t;
	const ft_demand_t *d = &a->u.demand;
	uint16_t cand = dom->gpus & ft_node_free_gpus(node) & a->u.gpus, near;
	unsigned left = d->exclusive_cpus;

	memset(out, 0, sizeof(*out));
	out->gpus = choose_gpus(a, cand, d->gpus);
	if (d->mig_count && choose_mig(out->mig, a, dom->gpus))
		return FT_ENOTFOUND;
	if (d->ranks && choose_replicas(out->replicas, a, dom->gpus))
		return FT_ENOTFOUND;
	near = numa_of_units(t, out->gpus | ft_replica_gpus(out->replicas),
			     out->mig) &
	       dom->numa_nodes;
	take_cpus(out, node, near, &left);
	take_cpus(out, node, dom->numa_nodes & (uint16_t)~near, &left);
	if (left)
		return FT_ENOTFOUND;
	out->memory_mib = d->exclusive_cpus ? d->memory_mib : 0;
	out->levels =
	    ft_place_levels_of(t,
			       out->gpus | ft_topology_mig_gpus(t, out->mig) |
				   ft_replica_gpus(out->replicas),
			       out->numa_nodes);
	out->level = ft_place_first_level(out->levels, from);
	return 0;
}

/* Busy slices on the GPUs of `dom` that offer a free matching instance. */
static long domain_busy_slices(const ask_t *a, const ft_domain_t *dom)
{
	uint8_t busy[FT_GPU_MAX];
	uint16_t gpus = 0;
	long n = 0;

	busy_slices(busy, a, NULL);
	for (unsigned i = 0; i < a->t->n_mig; i++)
		if (mig_free(a, i, dom->gpus, false))
			gpus |= (uint16_t)(1u << a->t->mig[i].gpu);
	for (unsigned g = 0; g < a->t->n_gpus; g++)
		if (gpus & (1u << g))
			n += busy[g];
	return n;
}

/* Replicas used on the shared GPUs of `dom` that may serve the demand. */
static long domain_busy_replicas(const ask_t *a, const ft_domain_t *dom)
{
	long n = 0;

	for (unsigned m = dom->gpus & a->u.gpus; m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		n += a->node->replicas_used[g];
	}
	return n;
}

/*
 * Lowest first. Packed tries the tightest-fitting domain first, distributed
 * the roomiest; for MIG instances the busy slices come first, so that packed
 * fills GPUs already in use and distributed spreads.
 */
static long domain_order(const ask_t *a, const ft_domain_t *dom)
{
	room_t r = place_domain_room(a, dom, false);
	long v = (long)(r.gpus + r.mig + r.shared) * 4096 + r.cpus;

	if (a->u.demand.mig_count)
		v -= domain_busy_slices(a, dom) << 24;
	if (a->u.demand.ranks)
		v -= domain_busy_replicas(a, dom) << 24;
	return a->policy == FT_POLICY_PACKED ? v : -v;
}

static int choose_at_level(ft_placement_t *out, const ask_t *a,
			   ft_level_t level, ft_level_t from)
{
	const ft_topology_t *t = a->t;
	bool tried[FT_DOMAIN_MAX] = {false};

	for (;;) {
		int best = -1;
		long best_v = 0;
		for (unsigned i = t->level_first[level];
		     i < t->level_first[level + 1]; i++) {
			long v;
			if (tried[i] ||
			    !room_fits(
				place_domain_room(a, &t->domains[i], false),
				&a->u.demand))
				continue;
			v = domain_order(a, &t->domains[i]);
			if (best < 0 || v < best_v) {
				best = (int)i;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		tried[best] = true;
		if (choose_in_domain(out, a, &t->domains[best], from) == 0)
			return 0;
	}
}

/*
 * The first level to choose at. MIG instances without an affinity are
 * chosen node-wide, so that the policy alone spreads or packs them over the
 * GPUs: at level nvlink every MIG GPU is a domain of its own, which would
 * always pack.
 */
static ft_level_t first_level(const ask_t *a, ft_level_t from)
{
	const ft_demand_t *d = &a->u.demand;

	bool spread = d->mig_count || (d->ranks && !d->gpu_fraction_milli);

	return spread && !d->gpus && !d->has_affinity ? FT_LEVEL_NODE : from;
}

/*
 * The levels a placement may take, tightest first: from the wanted one to
 * the loosest (a demand without GPUs or MIG instances starts at numa, even
 * with a tighter affinity).
 */
static void level_range(ft_level_t *from, ft_level_t *to, const ask_t *a)
{
	const ft_demand_t *ad = &a->u.demand;

	*from = wanted_level(ad);
	*to = loosest_level(ad);
	if (!ad->gpus && !ad->ranks && !ad->mig_count && *from < FT_LEVEL_NUMA)
		*from = FT_LEVEL_NUMA;
}

int ft_place_choose(ft_placement_t *out, const ft_node_t *node,
		    const ft_demand_t *d, ft_policy_t policy)
{
	ft_level_t from, to;
	ft_verdict_t v;
	ask_t a;

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return ft_error_set(
		    FT_EINVAL, "node %s: topology: %s", node->name,
		    node->topology_error ? node->topology_error : "none");
	ask_init(&a, node, d, policy);
	level_range(&from, &to, &a);
	if (node_room_fits(&a))
		for (unsigned l = first_level(&a, from); l <= to; l++)
			if (choose_at_level(out, &a, (ft_level_t)l, from) == 0)
				return 0;
	ft_place_filter(&v, node, d);
	return ft_error_set(FT_ENOTFOUND, "node %s: %s", node->name,
			    v.reason[0] ? v.reason : "no placement");
}

/* Free memory of the NUMA nodes `numa`, and whether one is unknown. */
static bool memory_fits(const ft_node_t *node, uint16_t numa,
			const ft_demand_t *d)
{
	const ft_topology_t *t = node->topology;
	uint64_t mib = 0;

	if (!d->exclusive_cpus || (numa & t->numa_memory_unknown))
		return true;
	for (unsigned m = numa; m; m &= m - 1)
		mib += node->numa_free_memory_mib[__builtin_ctz(m)];
	return mib >= d->memory_mib;
}

/* CPUs for units fixed in `out` inside domain `dom`, near them first. */
static bool take_near(ft_placement_t *out, const ft_node_t *node,
		      const ft_domain_t *dom, const ft_demand_t *d)
{
	uint16_t near = numa_of_units(node->topology, out->gpus, out->mig) &
			dom->numa_nodes;
	unsigned left = d->exclusive_cpus;

	out->cpus = (ft_cpuset_t){0};
	out->numa_nodes = 0;
	take_cpus(out, node, near, &left);
	take_cpus(out, node, dom->numa_nodes & (uint16_t)~near, &left);
	if (left || !memory_fits(node, out->numa_nodes, d))
		return false;
	out->memory_mib = d->exclusive_cpus ? d->memory_mib : 0;
	return true;
}

/* The first domain of `level` holding `units` where the CPUs fit. */
static bool choose_near_at(ft_placement_t *out, const ft_node_t *node,
			   const ft_demand_t *d, uint16_t units,
			   ft_level_t level)
{
	const ft_topology_t *t = node->topology;

	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++) {
		const ft_domain_t *dom = &t->domains[i];
		if ((dom->gpus & units) != units)
			continue;
		if (take_near(out, node, dom, d))
			return true;
	}
	return false;
}

int ft_place_choose_near(ft_placement_t *out, const ft_node_t *node,
			 const ft_demand_t *d, uint16_t gpus,
			 const ft_mig_mask_t mig, ft_policy_t policy)
{
	ft_level_t from, to;
	uint16_t units;
	ask_t a;

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return ft_error_set(FT_EINVAL, "node %s: no topology",
				    node->name);
	ask_init(&a, node, d, policy);
	level_range(&from, &to, &a);
	out->gpus = gpus;
	out->mig[0] = mig[0];
	out->mig[1] = mig[1];
	units = gpus | ft_topology_mig_gpus(node->topology, mig);
	for (unsigned l = from; l <= to; l++) {
		if (!choose_near_at(out, node, d, units, (ft_level_t)l))
			continue;
		out->levels =
		    ft_place_levels_of(node->topology, units, out->numa_nodes);
		out->level = ft_place_first_level(out->levels, from);
		return 0;
	}
	return ft_error_set(
	    FT_ENOTFOUND,
	    "node %s: no %s domain holds the GPUs DRA allocated (positions 0x%x) with %u free CPUs%s",
	    node->name, ft_level_name(to), units, d->exclusive_cpus,
	    d->exclusive_cpus && d->memory_mib ? " and the memory asked" : "");
}

/* Shared GPUs of `gpus` where one rank fits now, with their free capacity. */
static uint32_t usable_replicas(const ask_t *a, uint16_t *gpus)
{
	const ft_demand_t *d = &a->u.demand;
	uint32_t milli = 0;
	uint16_t kept = 0;

	for (unsigned m = *gpus & a->u.gpus; d->ranks && m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);
		if (!rank_fits(a, g))
			continue;
		kept |= (uint16_t)(1u << g);
		milli += free_replicas(a, g, false) * FT_MILLI_GPU /
			 a->t->gpus[g].replicas;
	}
	*gpus = kept;
	return milli;
}

/*
 * Whether the CPU and memory `d` requests (ft_demand_cpu_millis,
 * memory_mib) are left on `node` by its pods' requests; memory passes
 * when unknown.
 */
static bool requests_fit(const ft_node_t *node, const ft_demand_t *d)
{
	uint64_t memory;

	return ft_node_free_cpu_millis(node) >= ft_demand_cpu_millis(d) &&
	       (!ft_node_free_memory_mib(node, &memory) ||
		memory >= d->memory_mib);
}

void ft_place_usable(ft_usable_t *out, const ft_node_t *node,
		     const ft_demand_t *d)
{
	const ft_demand_t *ad;
	uint16_t domains = 0;
	ft_level_t level;
	ask_t a;

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return;
	ask_init(&a, node, d, FT_POLICY_PACKED);
	ad = &a.u.demand;
	level = loosest_level(ad);
	if (!node_room_fits(&a) || !requests_fit(node, ad))
		return;
	for (unsigned i = a.t->level_first[level];
	     i < a.t->level_first[level + 1]; i++)
		if (room_fits(place_domain_room(&a, &a.t->domains[i], false),
			      ad))
			domains |= a.t->domains[i].gpus;
	if (ad->gpus) {
		out->gpus = domains & ft_node_free_gpus(node) & a.u.gpus;
		out->milli =
		    FT_MILLI_GPU * (uint32_t)__builtin_popcount(out->gpus);
	}
	if (ad->ranks) {
		uint16_t shared = domains;
		out->milli += usable_replicas(&a, &shared);
		out->gpus |= shared;
	}
	for (unsigned i = 0; ad->mig_count && i < a.t->n_mig; i++)
		if (mig_free(&a, i, domains, false)) {
			ft_mig_mask_set(out->mig, i);
			out->milli +=
			    a.t->mig[i].size * FT_MILLI_GPU / FT_MIG_SLICES;
		}
}
