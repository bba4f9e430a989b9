/*
 * The reasons filter gives for a node it refuses: what the demand needs,
 * what the tightest domain of the level has, and which capabilities
 * (flextopo.io/requires) rule units out. Written by hand rather than with
 * snprintf: a filter over thousands of nodes writes one per refused node,
 * and formatting was most of the filter's cost (docs/bench-history.md,
 * "Where filter and prioritize spend their time").
 */
#include <flextopo/mig.h>
#include <flextopo/place.h>

#include <stdio.h>
#include <string.h>

#include "place_priv.h"

static const char *const domain_nouns[FT_LEVEL_COUNT] = {
    "NVLink group", "PCIe switch", "NUMA node", "socket", "node"};

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
		r = place_domain_room(a, &t->domains[i], ignore_usage);
		if (place_room_fits_units(r, d) &&
		    !place_room_fits_memory(r, d)) {
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

	return d->mig_count ? gpus | ft_topology_mig_gpus(a->t, a->u.mig)
			    : gpus;
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
void place_describe_shortfall(char *buf, size_t size, const ask_t *a,
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
		if (!place_of_kind(t, &a->u.demand, mig, i))
			continue;
		out->total++;
		faults = place_unit_faults(t, &a->u.demand.caps, mig, i);
		out->matching += !faults;
		for (unsigned k = 0; k < FT_CAP_COUNT; k++)
			if ((faults & (1u << k)) && out->unit[k] < 0)
				out->unit[k] = (int)i;
	}
}

/* Some units fail the capabilities, and too few are left. */
bool place_caps_short(caps_count_t *out, const ask_t *a)
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
 * (place_cap_asked(), place_unit_has()).
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
void place_describe_caps(char *buf, size_t size, const ask_t *a,
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
		describe_fault(&out, a->t, c->mig, i, k,
			       place_cap_asked(caps, k),
			       place_unit_has(a->t, c->mig, i, k));
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
	out->asked = place_cap_asked(c, cap);
	out->actual = place_unit_has(t, mig, u->position, cap);
	describe_fault(&text, t, mig, u->position, cap, out->asked,
		       out->actual);
}
