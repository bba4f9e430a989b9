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
 */
#include <flextopo/error.h>
#include <flextopo/place.h>

#include <stdio.h>
#include <string.h>

/* Free units inside one domain (or its capacity, when usage is ignored). */
typedef struct {
	uint32_t gpus, mig, cpus;
	uint64_t memory_mib;
} room_t;

static const char *const domain_nouns[FT_LEVEL_COUNT] = {
    "NVLink group", "PCIe switch", "NUMA node", "socket", "node"};

ft_level_t ft_place_effective_level(const ft_demand_t *d)
{
	ft_level_t level = d->has_affinity ? d->level : FT_LEVEL_NODE;

	if (!d->gpus && !d->mig_count && level < FT_LEVEL_NUMA)
		level = FT_LEVEL_NUMA;
	return level;
}

static bool mig_matches(const ft_node_t *node, unsigned i, const ft_demand_t *d,
			uint16_t gpus, bool ignore_usage)
{
	const ft_mig_instance_t *m = &node->topology->mig[i];

	return (gpus & (1u << m->gpu)) &&
	       strcmp(m->profile, d->mig_profile) == 0 &&
	       (ignore_usage || !ft_node_mig_used(node, i));
}

static room_t domain_room(const ft_node_t *node, const ft_domain_t *dom,
			  const ft_demand_t *d, bool ignore_usage)
{
	const ft_topology_t *t = node->topology;
	uint16_t gpus = dom->gpus & t->whole_gpus;
	room_t r = {0, 0, 0, 0};

	if (!ignore_usage)
		gpus &= (uint16_t)~node->gpus_used;
	r.gpus = (uint32_t)__builtin_popcount(gpus);
	for (unsigned i = 0; d->mig_count && i < t->n_mig; i++)
		r.mig += mig_matches(node, i, d, dom->gpus, ignore_usage);
	/* Visit only the domain's NUMA nodes: most domains hold one. */
	for (unsigned m = dom->numa_nodes; m; m &= m - 1) {
		unsigned n = (unsigned)__builtin_ctz(m);
		r.cpus +=
		    ignore_usage ? t->numa[n].n_cpus : node->numa_free_cpus[n];
		r.memory_mib += ignore_usage ? t->numa[n].memory_mib
					     : node->numa_free_memory_mib[n];
	}
	return r;
}

static bool room_fits(room_t r, const ft_demand_t *d)
{
	return r.gpus >= d->gpus && r.mig >= d->mig_count &&
	       r.cpus >= d->exclusive_cpus &&
	       (!d->exclusive_cpus || r.memory_mib >= d->memory_mib);
}

static uint32_t unknown_mig(const ft_node_t *node, const ft_demand_t *d)
{
	uint32_t n = 0;

	for (unsigned i = 0; d->mig_count && i < node->n_holdings; i++)
		if (strcmp(node->holdings[i].unknown_mig_profile,
			   d->mig_profile) == 0)
			n += node->holdings[i].unknown_mig;
	return n;
}

/* Node-wide room after the usage whose placement is unknown. */
static bool node_room_fits(const ft_node_t *node, const ft_demand_t *d)
{
	const ft_topology_t *t = node->topology;
	room_t r = domain_room(node, &t->domains[t->level_first[FT_LEVEL_NODE]],
			       d, false);
	uint32_t um = unknown_mig(node, d);

	r.gpus = r.gpus > node->unknown_gpus ? r.gpus - node->unknown_gpus : 0;
	r.cpus = r.cpus > node->unknown_cpus ? r.cpus - node->unknown_cpus : 0;
	r.mig = r.mig > um ? r.mig - um : 0;
	return room_fits(r, d);
}

static bool level_fits(const ft_node_t *node, ft_level_t level,
		       const ft_demand_t *d, bool ignore_usage)
{
	const ft_topology_t *t = node->topology;

	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++)
		if (room_fits(
			domain_room(node, &t->domains[i], d, ignore_usage), d))
			return true;
	return false;
}

bool ft_place_fits_domain(const ft_node_t *node, const ft_demand_t *d,
			  unsigned domain)
{
	return node->topology && domain < node->topology->n_domains &&
	       node_room_fits(node, d) &&
	       room_fits(domain_room(node, &node->topology->domains[domain], d,
				     false),
			 d);
}

bool ft_place_fits_level(const ft_node_t *node, const ft_demand_t *d,
			 ft_level_t level)
{
	return node->topology && node_room_fits(node, d) &&
	       level_fits(node, level, d, false);
}

/* Tightest level (not tighter than `from`) with a fitting domain now. */
static ft_level_t reachable_level(const ft_node_t *node, ft_level_t from,
				  const ft_demand_t *d)
{
	if (!node_room_fits(node, d))
		return FT_LEVEL_COUNT;
	for (unsigned l = from; l < FT_LEVEL_COUNT; l++)
		if (level_fits(node, (ft_level_t)l, d, false))
			return (ft_level_t)l;
	return FT_LEVEL_COUNT;
}

/*
 * Reasons are written by hand rather than with snprintf: a filter over
 * thousands of nodes writes one per refused node, and formatting was most of
 * the filter's cost (bench/README.md).
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

static void put_u(text_t *t, unsigned v)
{
	char digits[12];
	int n = (int)sizeof(digits) - 1;

	digits[n] = '\0';
	do {
		digits[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_s(t, digits + n);
}

static void describe_need(text_t *t, const ft_demand_t *d)
{
	put_u(t, d->gpus);
	put_s(t, " GPUs");
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
}

/* "numa: at most 2 free GPUs with 8 free CPUs in one NUMA node, need ..." */
static void describe_shortfall(char *buf, size_t size, const ft_node_t *node,
			       ft_level_t level, const ft_demand_t *d,
			       bool ignore_usage)
{
	const ft_topology_t *t = node->topology;
	room_t best = {0, 0, 0, 0};
	text_t out = {buf, size};
	const char *free_word = ignore_usage ? "" : "free ";

	for (unsigned i = t->level_first[level]; i < t->level_first[level + 1];
	     i++) {
		room_t r = domain_room(node, &t->domains[i], d, ignore_usage);
		if (r.gpus + r.mig > best.gpus + best.mig ||
		    (r.gpus + r.mig == best.gpus + best.mig &&
		     r.cpus > best.cpus))
			best = r;
	}
	put_s(&out, ft_level_name(level));
	put_s(&out, ": at most ");
	put_u(&out, d->mig_count ? best.mig : best.gpus);
	put_s(&out, " ");
	put_s(&out, free_word);
	put_s(&out, d->mig_count ? "GPUs (MIG) with " : "GPUs with ");
	put_u(&out, best.cpus);
	put_s(&out, " ");
	put_s(&out, free_word);
	put_s(&out, "CPUs in one ");
	put_s(&out, domain_nouns[level]);
	put_s(&out, ignore_usage ? " even when empty, need " : ", need ");
	describe_need(&out, d);
}

static void filter_without_topology(ft_verdict_t *out, const ft_node_t *node,
				    const ft_demand_t *d)
{
	if (!d->has_affinity)
		return;
	out->fit = FT_UNFIT_UNRESOLVABLE;
	snprintf(out->reason, sizeof(out->reason), "topology: %s",
		 node->topology_error ? node->topology_error
				      : "no topology annotation");
}

void ft_place_filter(ft_verdict_t *out, const ft_node_t *node,
		     const ft_demand_t *d)
{
	ft_level_t level = ft_place_effective_level(d);
	bool strict = d->has_affinity && d->mode == FT_MODE_GUARANTEED;
	ft_level_t need = strict ? level : FT_LEVEL_NODE;

	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_COUNT;
	if (!node->topology) {
		filter_without_topology(out, node, d);
		return;
	}
	if (!level_fits(node, need, d, true)) {
		out->fit = FT_UNFIT_UNRESOLVABLE;
		describe_shortfall(out->reason, sizeof(out->reason), node, need,
				   d, true);
		return;
	}
	out->level = reachable_level(node, level, d);
	if (out->level <= need)
		return;
	out->fit = FT_UNFIT;
	if (!node_room_fits(node, d))
		describe_shortfall(out->reason, sizeof(out->reason), node,
				   FT_LEVEL_NODE, d, false);
	else
		describe_shortfall(out->reason, sizeof(out->reason), node, need,
				   d, false);
}

/* Units of the demand's kind on the node: total and held. */
static void usage_of_kind(const ft_node_t *node, const ft_demand_t *d,
			  unsigned *total, unsigned *used)
{
	const ft_topology_t *t = node->topology;
	const ft_domain_t *all = &t->domains[t->level_first[FT_LEVEL_NODE]];

	if (d->mig_count) {
		*total = domain_room(node, all, d, true).mig;
		*used = *total - domain_room(node, all, d, false).mig +
			unknown_mig(node, d);
	} else if (d->gpus) {
		*total = (unsigned)__builtin_popcount(t->whole_gpus);
		*used = (unsigned)__builtin_popcount(node->gpus_used &
						     t->whole_gpus) +
			node->unknown_gpus;
	} else {
		*total = t->n_cpus;
		*used = ft_cpuset_count(&node->cpus_used) + node->unknown_cpus;
	}
}

static int policy_points(const ft_node_t *node, const ft_demand_t *d,
			 ft_policy_t policy)
{
	unsigned total, used;

	usage_of_kind(node, d, &total, &used);
	if (!total)
		return 0;
	if (used > total)
		used = total;
	/* Round to 0..2: packed favours the fuller node, distributed the
	 * emptier. */
	return (int)(((policy == FT_POLICY_PACKED ? used : total - used) * 2 +
		      total / 2) /
		     total);
}

int ft_place_score(const ft_node_t *node, const ft_demand_t *d,
		   ft_policy_t policy)
{
	ft_level_t want, got;
	int points;

	if (!node->topology ||
	    (!ft_demand_wants_devices(d) && !d->has_affinity))
		return 0;
	want = d->has_affinity ? ft_place_effective_level(d)
			       : (d->gpus || d->mig_count ? FT_LEVEL_NVLINK
							  : FT_LEVEL_NUMA);
	got = reachable_level(node, want, d);
	if (got == FT_LEVEL_COUNT)
		return 0;
	points = 8 - 2 * (int)(got - want);
	if (points < 0)
		points = 0;
	return points + policy_points(node, d, policy);
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
	if (x->numa == y->numa)
		return 30;
	return x->socket == y->socket ? 20 : 10;
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
		uint16_t nb = g->pcie_switch != FT_NONE
				  ? t->switches[g->pcie_switch].gpus
				  : t->numa[g->numa].gpus;
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
static uint16_t choose_gpus(const ft_node_t *node, uint16_t cand, unsigned n,
			    ft_policy_t policy)
{
	uint16_t free = ft_node_free_gpus(node), best = 0;
	long best_v = 0;

	if (!n)
		return 0;
	for (uint32_t s = cand;; s = (s - 1) & cand) {
		long v;
		if ((unsigned)__builtin_popcount(s) == n) {
			v = subset_value(node, (uint16_t)s, free, policy);
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

static unsigned gpu_used_slices(const ft_node_t *node, unsigned gpu)
{
	const ft_topology_t *t = node->topology;
	unsigned slices = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if (t->mig[i].gpu == gpu && ft_node_mig_used(node, i))
			slices += t->mig[i].size;
	return slices;
}

/* `n` free instances of the profile in `gpus`: packed fills used GPUs first. */
static int choose_mig(uint64_t *out, const ft_node_t *node, uint16_t gpus,
		      const ft_demand_t *d, ft_policy_t policy)
{
	const ft_topology_t *t = node->topology;
	unsigned taken = 0;

	out[0] = out[1] = 0;
	while (taken < d->mig_count) {
		int best = -1;
		long best_v = 0;
		for (unsigned i = 0; i < t->n_mig; i++) {
			long v;
			if (!mig_matches(node, i, d, gpus, false) ||
			    (out[i / 64] >> (i % 64)) & 1)
				continue;
			v = (long)gpu_used_slices(node, t->mig[i].gpu);
			v = policy == FT_POLICY_PACKED ? v : -v;
			if (best < 0 || v > best_v) {
				best = (int)i;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		out[best / 64] |= UINT64_C(1) << (best % 64);
		taken++;
	}
	return 0;
}

static uint16_t gpus_of_mig(const ft_topology_t *t, const uint64_t *mig)
{
	uint16_t gpus = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if ((mig[i / 64] >> (i % 64)) & 1)
			gpus |= (uint16_t)(1u << t->mig[i].gpu);
	return gpus;
}

static uint16_t numa_of_units(const ft_topology_t *t, uint16_t gpus,
			      const uint64_t *mig)
{
	uint16_t numa = 0;

	for (unsigned g = 0; g < t->n_gpus; g++)
		if (gpus & (1u << g))
			numa |= (uint16_t)(1u << t->gpus[g].numa);
	for (unsigned i = 0; i < t->n_mig; i++)
		if ((mig[i / 64] >> (i % 64)) & 1)
			numa |= (uint16_t)(1u << t->gpus[t->mig[i].gpu].numa);
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

static int choose_in_domain(ft_placement_t *out, const ft_node_t *node,
			    const ft_domain_t *dom, const ft_demand_t *d,
			    ft_level_t from, ft_policy_t policy)
{
	const ft_topology_t *t = node->topology;
	uint16_t cand = dom->gpus & ft_node_free_gpus(node), near;
	unsigned left = d->exclusive_cpus;

	memset(out, 0, sizeof(*out));
	out->gpus = choose_gpus(node, cand, d->gpus, policy);
	if (d->mig_count && choose_mig(out->mig, node, dom->gpus, d, policy))
		return FT_ENOTFOUND;
	near = numa_of_units(t, out->gpus, out->mig) & dom->numa_nodes;
	take_cpus(out, node, near, &left);
	take_cpus(out, node, dom->numa_nodes & (uint16_t)~near, &left);
	if (left)
		return FT_ENOTFOUND;
	out->memory_mib = d->exclusive_cpus ? d->memory_mib : 0;
	out->levels = ft_place_levels_of(
	    t, out->gpus | gpus_of_mig(t, out->mig), out->numa_nodes);
	out->level = ft_place_first_level(out->levels, from);
	return 0;
}

/* Packed tries the tightest-fitting domain first, distributed the roomiest. */
static long domain_order(const ft_node_t *node, const ft_domain_t *dom,
			 const ft_demand_t *d, ft_policy_t policy)
{
	room_t r = domain_room(node, dom, d, false);
	long v = (long)(r.gpus + r.mig) * 4096 + r.cpus;

	return policy == FT_POLICY_PACKED ? v : -v;
}

static int choose_at_level(ft_placement_t *out, const ft_node_t *node,
			   ft_level_t level, const ft_demand_t *d,
			   ft_level_t from, ft_policy_t policy)
{
	const ft_topology_t *t = node->topology;
	bool tried[FT_DOMAIN_MAX] = {false};

	for (;;) {
		int best = -1;
		long best_v = 0;
		for (unsigned i = t->level_first[level];
		     i < t->level_first[level + 1]; i++) {
			long v;
			if (tried[i] ||
			    !room_fits(
				domain_room(node, &t->domains[i], d, false), d))
				continue;
			v = domain_order(node, &t->domains[i], d, policy);
			if (best < 0 || v < best_v) {
				best = (int)i;
				best_v = v;
			}
		}
		if (best < 0)
			return FT_ENOTFOUND;
		tried[best] = true;
		if (choose_in_domain(out, node, &t->domains[best], d, from,
				     policy) == 0)
			return 0;
	}
}

int ft_place_choose(ft_placement_t *out, const ft_node_t *node,
		    const ft_demand_t *d, ft_policy_t policy)
{
	ft_level_t level = ft_place_effective_level(d);
	bool strict = d->has_affinity && d->mode == FT_MODE_GUARANTEED;
	ft_level_t from = d->has_affinity ? level : FT_LEVEL_NVLINK;
	ft_level_t to = strict ? level : FT_LEVEL_NODE;
	ft_verdict_t v;

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return ft_error_set(
		    FT_EINVAL, "node %s: topology: %s", node->name,
		    node->topology_error ? node->topology_error : "none");
	if (!d->gpus && !d->mig_count && from < FT_LEVEL_NUMA)
		from = FT_LEVEL_NUMA;
	if (node_room_fits(node, d))
		for (unsigned l = from; l <= to; l++)
			if (choose_at_level(out, node, (ft_level_t)l, d, from,
					    policy) == 0)
				return 0;
	ft_place_filter(&v, node, d);
	return ft_error_set(FT_ENOTFOUND, "node %s: %s", node->name,
			    v.reason[0] ? v.reason : "no placement");
}
