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

#include <stdio.h>
#include <string.h>

typedef ft_room_t room_t;

/* One request on one node: the adapted demand, its units and the policy. */
typedef struct {
	const ft_node_t *node;
	const ft_topology_t *t;
	ft_units_t u; /* u.demand is the demand used throughout */
	ft_policy_t policy;
} ask_t;

static const char *const domain_nouns[FT_LEVEL_COUNT] = {
    "NVLink group", "PCIe switch", "NUMA node", "socket", "node"};

static bool has_bit(const uint64_t *mask, unsigned i)
{
	return (mask[i / 64] >> (i % 64)) & 1;
}

static void set_bit(uint64_t *mask, unsigned i)
{
	mask[i / 64] |= UINT64_C(1) << (i % 64);
}

static uint16_t gpus_of_mig(const ft_topology_t *t, const uint64_t *mig)
{
	uint16_t gpus = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if (has_bit(mig, i))
			gpus |= (uint16_t)(1u << t->mig[i].gpu);
	return gpus;
}

ft_level_t ft_place_effective_level(const ft_demand_t *d)
{
	ft_level_t level = d->has_affinity ? d->level : FT_LEVEL_NODE;

	if (!d->gpus && !d->ranks && !d->mig_count && level < FT_LEVEL_NUMA)
		level = FT_LEVEL_NUMA;
	return level;
}

void ft_place_adapt(ft_demand_t *out, const ft_topology_t *t,
		    const ft_demand_t *d)
{
	const char *profile = t ? ft_topology_single_profile(t) : NULL;

	*out = *d;
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
static uint64_t cap_asked(const ft_caps_t *c, unsigned k)
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
 * `k`, in the units of cap_asked(). Interconnect is read from the NVLink
 * domain, so that a GPU whose peers are all MIG-enabled counts as unlinked.
 */
static uint64_t unit_has(const ft_topology_t *t, bool mig, unsigned i,
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
static unsigned unit_faults(const ft_topology_t *t, const ft_caps_t *c,
			    bool mig, unsigned i)
{
	unsigned faults = 0;

	for (unsigned k = 0; k < FT_CAP_COUNT; k++) {
		uint64_t asked = cap_asked(c, k);
		if (asked && !cap_met(k, asked, unit_has(t, mig, i, k)))
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
static bool of_kind(const ft_topology_t *t, const ft_demand_t *d, bool mig,
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
		if (unit_faults(t, &a->caps, false, g))
			out->gpus &= (uint16_t) ~(1u << g);
	for (unsigned i = first; i < t->n_mig; i++)
		if (t->mig[i].profile_id == first &&
		    (!a->has_caps || !unit_faults(t, &a->caps, true, i)))
			set_bit(out->mig, i);
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
	return has_bit(a->u.mig, i) && (gpus & (1u << a->t->mig[i].gpu)) &&
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

static room_t domain_room(const ask_t *a, const ft_domain_t *dom,
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
static bool room_fits_units(room_t r, const ft_demand_t *d)
{
	return r.gpus >= d->gpus && r.mig >= d->mig_count &&
	       r.shared >= d->ranks && r.cpus >= d->exclusive_cpus;
}

/* Memory is charged to NUMA nodes only with pinned CPUs; unknown passes. */
static bool room_fits_memory(room_t r, const ft_demand_t *d)
{
	return !d->exclusive_cpus || r.memory_unknown ||
	       r.memory_mib >= d->memory_mib;
}

static bool room_fits(room_t r, const ft_demand_t *d)
{
	return room_fits_units(r, d) && room_fits_memory(r, d);
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
	room_t r = domain_room(a, node_domain(a->t), false);
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
		if (room_fits(domain_room(a, &t->domains[i], ignore_usage),
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
	       room_fits(domain_room(&a, &a.t->domains[domain], false),
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
	*domain_out = domain_room(&a, &a.t->domains[domain], false);
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

/*
 * Reasons are written by hand rather than with snprintf: a filter over
 * thousands of nodes writes one per refused node, and formatting was most of
 * the filter's cost (docs/bench-history.md, "Where filter and prioritize
 * spend their time").
 */
typedef struct {
	char *p;
	size_t left;
} text_t;

static void put_s(text_t *t, const char *s)
{
	while (*s && t->left > 1) {
		*t->p++ = *s++;
		t->left--;
	}
	*t->p = '\0';
}

static void put_u(text_t *t, uint64_t v)
{
	char digits[24];
	int n = (int)sizeof(digits) - 1;

	digits[n] = '\0';
	do {
		digits[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_s(t, digits + n);
}

/* A MiB amount in Kubernetes quantity syntax: "40Gi", "1536Mi". */
static void put_quantity(text_t *t, uint64_t mib)
{
	bool gib = mib && mib % 1024 == 0;

	put_u(t, gib ? mib / 1024 : mib);
	put_s(t, gib ? "Gi" : "Mi");
}

/* "2 ranks of 0.8 GPU" or "3 GPU replicas". */
static void describe_ranks(text_t *t, const ft_demand_t *d)
{
	put_u(t, d->ranks);
	if (!d->gpu_fraction_milli) {
		put_s(t, " GPU replicas");
		return;
	}
	put_s(t, " ranks of ");
	put_u(t, d->gpu_fraction_milli / 1000);
	if (d->gpu_fraction_milli % 1000) {
		char frac[4] = {(char)('0' + d->gpu_fraction_milli / 100 % 10),
				(char)('0' + d->gpu_fraction_milli / 10 % 10),
				(char)('0' + d->gpu_fraction_milli % 10), '\0'};
		for (int i = 2; i > 0 && frac[i] == '0'; i--)
			frac[i] = '\0';
		put_s(t, ".");
		put_s(t, frac);
	}
	put_s(t, " GPU on distinct GPUs");
}

/* "2 GPUs with 8 CPUs", and "and 4096 MiB" when memory is what is short. */
static void describe_need(text_t *t, const ft_demand_t *d, bool memory)
{
	if (d->ranks)
		describe_ranks(t, d);
	else
		put_u(t, d->gpus);
	put_s(t, d->ranks ? "" : " GPUs");
	if (d->mig_count) {
		put_s(t, " and ");
		put_u(t, d->mig_count);
		put_s(t, " ");
		put_s(t, d->mig_profile);
		put_s(t, " MIG instances");
	}
	put_s(t, " with ");
	put_u(t, d->exclusive_cpus);
	put_s(t, " CPUs");
	if (!memory)
		return;
	put_s(t, " and ");
	put_u(t, d->memory_mib);
	put_s(t, " MiB");
}

static uint32_t room_units(room_t r)
{
	return r.gpus + r.mig + r.shared;
}

/*
 * The domain of `level` a refusal reports. When some domain has the units
 * and CPUs but too little memory, memory is what is short (*memory set):
 * the one of those with the most memory. Otherwise the one with the most
 * units, then CPUs.
 */
static room_t shortfall_room(bool *memory, const ask_t *a, ft_level_t level,
			     bool ignore_usage)
{
	const ft_topology_t *t = a->t;
	const ft_demand_t *d = &a->u.demand;
	room_t best, most_memory, r;

	memset(&best, 0, sizeof(best));
	memset(&most_memory, 0, sizeof(most_memory));
	*memory = false;
	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++) {
		r = domain_room(a, &t->domains[i], ignore_usage);
		if (room_fits_units(r, d) && !room_fits_memory(r, d)) {
			if (!*memory || r.memory_mib > most_memory.memory_mib)
				most_memory = r;
			*memory = true;
		} else if (room_units(r) > room_units(best) ||
			   (room_units(r) == room_units(best) &&
			    r.cpus > best.cpus)) {
			best = r;
		}
	}
	return *memory ? most_memory : best;
}

/* The GPUs that may serve the demand: whole or shared ones asked, and those
 * of its matching MIG instances. */
static uint16_t demand_gpus(const ask_t *a)
{
	const ft_demand_t *d = &a->u.demand;
	uint16_t gpus = d->gpus || d->ranks ? a->u.gpus : 0;

	return d->mig_count ? gpus | gpus_of_mig(a->t, a->u.mig) : gpus;
}

/*
 * After a shortfall at `level`: the demand's GPUs that no domain of that
 * level holds because their locality is unknown (topology.h), so that the
 * reason does not read as if the node lacked them.
 */
static void describe_unplaced(text_t *out, const ask_t *a, ft_level_t level)
{
	const ft_topology_t *t = a->t;
	uint16_t gpus = demand_gpus(a) & t->unplaced_gpus, nowhere = 0;

	if (level >= FT_LEVEL_NODE || !gpus)
		return;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (((gpus >> g) & 1) && t->gpus[g].socket == FT_NONE)
			nowhere |= (uint16_t)(1u << g);
	if (level == FT_LEVEL_SOCKET)
		gpus = nowhere;
	if (!gpus)
		return;
	put_s(out, gpus == nowhere ? "; GPU locality unknown for "
				   : "; NUMA node unknown for ");
	put_u(out, (uint64_t)__builtin_popcount(gpus));
	put_s(out, gpus == nowhere
		       ? " GPUs (graph GPUs without a NUMA or socket edge)"
		       : " GPUs (graph GPUs without a NUMA edge)");
}

/*
 * "numa: at most 2 free GPUs with 8 free CPUs in one NUMA node, need ...";
 * with memory short "... with 8 free CPUs and 2048 MiB free in one ...".
 */
static void describe_shortfall(char *buf, size_t size, const ask_t *a,
			       ft_level_t level, bool ignore_usage)
{
	const ft_demand_t *d = &a->u.demand;
	text_t out = {buf, size};
	const char *free_word = ignore_usage ? "" : "free ";
	bool memory;
	room_t best = shortfall_room(&memory, a, level, ignore_usage);

	put_s(&out, ft_level_name(level));
	put_s(&out, ": at most ");
	put_u(&out, d->mig_count ? best.mig : best.gpus + best.shared);
	put_s(&out, " ");
	put_s(&out, free_word);
	put_s(&out, d->mig_count	    ? "GPUs (MIG) with "
		    : !d->ranks		    ? "GPUs with "
		    : d->gpu_fraction_milli ? "GPUs with room for a rank with "
					    : "GPU replicas with ");
	put_u(&out, best.cpus);
	put_s(&out, " ");
	put_s(&out, free_word);
	put_s(&out, "CPUs");
	if (memory) {
		put_s(&out, " and ");
		put_u(&out, best.memory_mib);
		put_s(&out, ignore_usage ? " MiB" : " MiB free");
	}
	put_s(&out, " in one ");
	put_s(&out, domain_nouns[level]);
	put_s(&out, ignore_usage ? " even when empty, need " : ", need ");
	describe_need(&out, d, memory);
	describe_unplaced(&out, a, level);
}

/* The units of one kind on a node, and those meeting the capabilities. */
typedef struct {
	bool mig;	/* MIG instances of the demand's profile, else GPUs */
	unsigned total; /* units of the kind */
	unsigned matching;	/* of them, those meeting the capabilities */
	unsigned need;		/* units the demand asks */
	int unit[FT_CAP_COUNT]; /* per capability, the first unit failing it */
} caps_count_t;

static void count_caps(caps_count_t *out, const ask_t *a, bool mig)
{
	const ft_topology_t *t = a->t;
	unsigned n = mig ? t->n_mig : t->n_gpus;

	memset(out, 0, sizeof(*out));
	out->mig = mig;
	/* Ranks of shared GPUs are GPUs too: one distinct GPU each. */
	out->need =
	    mig ? a->u.demand.mig_count : a->u.demand.gpus + a->u.demand.ranks;
	for (unsigned k = 0; k < FT_CAP_COUNT; k++)
		out->unit[k] = -1;
	for (unsigned i = 0; i < n; i++) {
		unsigned faults;
		if (!of_kind(t, &a->u.demand, mig, i))
			continue;
		out->total++;
		faults = unit_faults(t, &a->u.demand.caps, mig, i);
		out->matching += !faults;
		for (unsigned k = 0; k < FT_CAP_COUNT; k++)
			if ((faults & (1u << k)) && out->unit[k] < 0)
				out->unit[k] = (int)i;
	}
}

/* Some units fail the capabilities, and too few are left. */
static bool caps_short(caps_count_t *out, const ask_t *a)
{
	if (!a->u.demand.has_caps)
		return false;
	count_caps(out, a, false);
	if (out->need && out->matching < out->need &&
	    out->matching < out->total)
		return true;
	count_caps(out, a, true);
	return out->need && out->matching < out->need &&
	       out->matching < out->total;
}

static const char *gpu_model(const ft_gpu_t *g)
{
	return g->model && g->model[0] ? g->model : "this GPU";
}

/*
 * Why unit `i` fails capability `k`: it has `has` where `asked` was asked
 * (cap_asked(), unit_has()).
 */
static void describe_fault(text_t *out, const ft_topology_t *t, bool mig,
			   unsigned i, unsigned k, uint64_t asked, uint64_t has)
{
	const ft_gpu_t *g = &t->gpus[mig ? t->mig[i].gpu : i];

	put_s(out, ft_cap_name((ft_cap_t)k));
	if (k == FT_CAP_MEMORY) {
		put_s(out, " ");
		put_quantity(out, asked);
		put_s(out, ": ");
		put_u(out, has);
		put_s(out, " MiB");
	} else if (k == FT_CAP_PRECISION) {
		put_s(out, " ");
		put_s(out, ft_precision_name((unsigned)(asked & ~has)));
		put_s(out, ": not supported by ");
		put_s(out, gpu_model(g));
		put_s(out, has ? "" : " (not in the MIG catalog)");
	} else if (k == FT_CAP_INTERCONNECT) {
		put_s(out, mig ? " nvlink: MIG instances share no NVLink"
			       : " nvlink: no NVLink peers");
	} else {
		put_s(out, " ");
		put_u(out, asked);
		put_s(out, ": NVLink domain of ");
		put_u(out, has);
		put_s(out, mig ? " (a MIG instance)" : " GPUs");
	}
}

/* "requires: 0 of 8 GPUs match (memoryPerGpu 40Gi: 24564 MiB; ...)" */
static void describe_caps(char *buf, size_t size, const ask_t *a,
			  const caps_count_t *c)
{
	const ft_caps_t *caps = &a->u.demand.caps;
	text_t out = {buf, size};
	const char *sep = " (";

	put_s(&out, "requires: ");
	put_u(&out, c->matching);
	put_s(&out, " of ");
	put_u(&out, c->total);
	if (c->mig) {
		put_s(&out, " MIG ");
		put_s(&out, a->u.demand.mig_profile);
		put_s(&out, " instances match");
	} else {
		put_s(&out,
		      a->u.demand.ranks ? " shared GPUs match" : " GPUs match");
	}
	for (unsigned k = 0; k < FT_CAP_COUNT; k++) {
		unsigned i = (unsigned)c->unit[k];
		if (c->unit[k] < 0)
			continue;
		put_s(&out, sep);
		describe_fault(&out, a->t, c->mig, i, k, cap_asked(caps, k),
			       unit_has(a->t, c->mig, i, k));
		sep = "; ";
	}
	put_s(&out, ")");
}

void ft_place_unit_fault(ft_unit_fault_t *out, const ft_topology_t *t,
			 const ft_caps_t *c, const ft_unit_check_t *u,
			 ft_cap_t cap)
{
	bool mig = u->kind == FT_UNIT_MIG;
	text_t text = {out->reason, sizeof(out->reason)};

	out->cap = cap;
	out->asked = cap_asked(c, cap);
	out->actual = unit_has(t, mig, u->position, cap);
	describe_fault(&text, t, mig, u->position, cap, out->asked,
		       out->actual);
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

	if (caps_short(&caps, a)) {
		out->fit = FT_UNFIT_UNRESOLVABLE;
		describe_caps(out->reason, sizeof(out->reason), a, &caps);
		return;
	}
	if (!level_fits(a, need, true)) {
		out->fit = FT_UNFIT_UNRESOLVABLE;
		describe_shortfall(out->reason, sizeof(out->reason), a, need,
				   true);
		return;
	}
	out->level = reachable_level(a, level);
	if (out->level <= need)
		return;
	out->fit = FT_UNFIT;
	describe_shortfall(out->reason, sizeof(out->reason), a,
			   node_room_fits(a) ? need : FT_LEVEL_NODE, false);
}

void ft_place_filter(ft_verdict_t *out, const ft_node_t *node,
		     const ft_demand_t *d)
{
	bool strict = d->has_affinity && d->mode == FT_MODE_GUARANTEED;
	ask_t a;

	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_COUNT;
	if (!node->topology) {
		filter_without_topology(out, node, d);
		return;
	}
	ask_init(&a, node, d, FT_POLICY_PACKED);
	filter_ask(out, &a,
		   strict ? ft_place_effective_level(&a.u.demand)
			  : FT_LEVEL_NODE);
}

/* Unit `i` of kind `kind` checked against the asked capabilities. */
static ft_unit_check_t check_unit(const ask_t *a, ft_unit_kind_t kind,
				  unsigned i)
{
	const ft_demand_t *d = &a->u.demand;
	bool mig = kind == FT_UNIT_MIG;
	ft_unit_check_t u = {(uint8_t)kind, (uint8_t)i, 0, 0, false};

	if (d->has_caps)
		u.faults = (uint8_t)unit_faults(a->t, &d->caps, mig, i);
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
		if (of_kind(a.t, &a.u.demand, false, g))
			out[n++] = check_unit(
			    &a, a.u.demand.ranks ? FT_UNIT_SHARED : FT_UNIT_GPU,
			    g);
	for (unsigned i = 0; i < a.t->n_mig; i++)
		if (of_kind(a.t, &a.u.demand, true, i))
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
		*total = domain_room(a, node_domain(t), true).mig;
		*used = *total - domain_room(a, node_domain(t), false).mig +
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

	want = ad->has_affinity
		   ? ft_place_effective_level(ad)
		   : (ad->gpus || ad->ranks || ad->mig_count ? FT_LEVEL_NVLINK
							     : FT_LEVEL_NUMA);
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
		    (taken && has_bit(taken, i)))
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
			if (!mig_free(a, i, gpus, false) || has_bit(out, i))
				continue;
			v = a->policy == FT_POLICY_PACKED ? v : -v;
			if (best < 0 || v > best_v) {
				best = (int)i;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		set_bit(out, (unsigned)best);
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

	gpus |= gpus_of_mig(t, mig);
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
	out->levels = ft_place_levels_of(t,
					 out->gpus | gpus_of_mig(t, out->mig) |
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
	room_t r = domain_room(a, dom, false);
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
			    !room_fits(domain_room(a, &t->domains[i], false),
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
 * The levels a placement of `d` may take, tightest first: from its own
 * (or nvlink, without an affinity) to its own in guaranteed mode, else to
 * the node; a demand without GPUs or MIG instances starts at numa.
 */
static void level_range(ft_level_t *from, ft_level_t *to, const ft_demand_t *d,
			const ask_t *a)
{
	*from = d->has_affinity ? ft_place_effective_level(&a->u.demand)
				: FT_LEVEL_NVLINK;
	*to = d->has_affinity && d->mode == FT_MODE_GUARANTEED ? *from
							       : FT_LEVEL_NODE;
	if (!a->u.demand.gpus && !a->u.demand.ranks && !a->u.demand.mig_count &&
	    *from < FT_LEVEL_NUMA)
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
	level_range(&from, &to, d, &a);
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
			 const uint64_t mig[2], ft_policy_t policy)
{
	ft_level_t from, to;
	uint16_t units;
	ask_t a;

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return ft_error_set(FT_EINVAL, "node %s: no topology",
				    node->name);
	ask_init(&a, node, d, policy);
	level_range(&from, &to, d, &a);
	out->gpus = gpus;
	out->mig[0] = mig[0];
	out->mig[1] = mig[1];
	units = gpus | gpus_of_mig(node->topology, mig);
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

bool ft_place_requests_fit(const ft_node_t *node, const ft_demand_t *d)
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
	level = ad->has_affinity && ad->mode == FT_MODE_GUARANTEED
		    ? ft_place_effective_level(ad)
		    : FT_LEVEL_NODE;
	if (!node_room_fits(&a) || !ft_place_requests_fit(node, ad))
		return;
	for (unsigned i = a.t->level_first[level];
	     i < a.t->level_first[level + 1]; i++)
		if (room_fits(domain_room(&a, &a.t->domains[i], false), ad))
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
			set_bit(out->mig, i);
			out->milli +=
			    a.t->mig[i].size * FT_MILLI_GPU / FT_MIG_SLICES;
		}
}
