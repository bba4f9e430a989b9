/*
 * FGD fragmentation (frag.h): the recent workload mix, the measure per node
 * and the rank of a node for scoring. The usable units of a class come from
 * ft_place_usable(), so a unit counts as usable exactly when placement could
 * give it to the class.
 */
#include <flextopo/error.h>
#include <flextopo/frag.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NO_CLASS 0xff

_Static_assert(FT_FRAG_CACHE == FT_MIX_CLASSES,
	       "one node cache entry per mix class");
_Static_assert(FT_MIX_SAMPLES <= UINT8_MAX,
	       "sample counts, heads and shares are uint8_t");

/* Class generations are unique across every mix of the process, so that a
 * node's cache never mistakes one mix's class for another's. */
static atomic_uint generations;

void ft_mix_init(ft_mix_t *mix, unsigned window)
{
	memset(mix, 0, sizeof(*mix));
	mix->window = window > FT_MIX_WINDOW_MAX ? FT_MIX_WINDOW_MAX : window;
	memset(mix->ring, NO_CLASS, sizeof(mix->ring));
}

/*
 * The class key of a demand: its GPU shape, i.e. what it asks of GPU units
 * (whole GPUs, fraction, MIG profile and count), its affinity and mode, its
 * capabilities and the GPU model names its rules allow (a hint: they rule
 * no node out). CPU and memory, pinned or not, the policy and the node's
 * reading of the demand (ranks) are left out: the requests of a class's
 * pods are kept beside it as points (ft_mix_t). False for a demand that asks
 * no GPU unit.
 */
static bool class_of(ft_demand_t *out, const ft_demand_t *d)
{
	memset(out, 0, sizeof(*out));
	if (!d->gpus && !d->mig_count)
		return false;
	out->gpus = d->gpus;
	out->gpu_fraction_milli = d->gpu_fraction_milli;
	memcpy(out->mig_profile, d->mig_profile, sizeof(out->mig_profile));
	out->mig_count = d->mig_count;
	out->has_affinity = d->has_affinity;
	out->level = d->has_affinity ? d->level : FT_LEVEL_NODE;
	out->mode = d->has_affinity ? d->mode : FT_MODE_GUARANTEED;
	out->has_caps = d->has_caps;
	if (d->has_caps)
		out->caps = d->caps;
	out->n_gpu_products = d->n_gpu_products;
	memcpy(out->gpu_products, d->gpu_products,
	       d->n_gpu_products * sizeof(d->gpu_products[0]));
	return true;
}

/* Two class keys (class_of) ask alike: field by field, since a
 * struct copy need not copy padding. */
static bool same_class(const ft_demand_t *a, const ft_demand_t *b)
{
	return a->gpus == b->gpus &&
	       a->gpu_fraction_milli == b->gpu_fraction_milli &&
	       strcmp(a->mig_profile, b->mig_profile) == 0 &&
	       a->mig_count == b->mig_count &&
	       a->has_affinity == b->has_affinity && a->level == b->level &&
	       a->mode == b->mode && a->has_caps == b->has_caps &&
	       a->caps.memory_mib == b->caps.memory_mib &&
	       a->caps.precisions == b->caps.precisions &&
	       a->caps.interconnect == b->caps.interconnect &&
	       a->caps.nvlink_domain == b->caps.nvlink_domain &&
	       a->n_gpu_products == b->n_gpu_products &&
	       memcmp(a->gpu_products, b->gpu_products,
		      a->n_gpu_products * sizeof(a->gpu_products[0])) == 0;
}

/* The key of the node memo (ft_frag_memo_t): the class key with the
 * pod's own requests, which its placement charges. */
static void memo_shape(ft_demand_t *out, const ft_demand_t *d)
{
	class_of(out, d);
	out->cpu_millis = ft_demand_cpu_millis(d);
	out->exclusive_cpus = d->exclusive_cpus;
	out->memory_mib = d->memory_mib;
}

static bool same_shape(const ft_demand_t *a, const ft_demand_t *b)
{
	return same_class(a, b) && a->cpu_millis == b->cpu_millis &&
	       a->exclusive_cpus == b->exclusive_cpus &&
	       a->memory_mib == b->memory_mib;
}

/* The class equal to `key` with `rules`, or -1. */
static int find_class(const ft_mix_t *mix, const ft_demand_t *key,
		      const ft_node_rules_t *rules)
{
	for (unsigned c = 0; c < mix->n_classes; c++)
		if (same_class(&mix->classes[c], key) &&
		    ft_node_rules_equal(&mix->class_rules[c], rules))
			return (int)c;
	return -1;
}

static void forget_class(ft_mix_t *mix, unsigned c)
{
	for (unsigned i = 0; i < mix->window; i++)
		if (mix->ring[i] == c)
			mix->ring[i] = NO_CLASS;
	mix->total -= mix->counts[c];
	mix->counts[c] = 0;
	mix->n_points[c] = 0;
	mix->n_samples[c] = 0;
	mix->sample_head[c] = 0;
}

static void new_generation(ft_mix_t *mix, unsigned c)
{
	do
		mix->generations[c] = atomic_fetch_add(&generations, 1) + 1;
	while (!mix->generations[c]);
}

typedef struct point {
	uint32_t cpu_millis;
	uint32_t memory_mib;
} point_t;

static int by_cpu(const void *a, const void *b)
{
	const point_t *x = a, *y = b;

	return x->cpu_millis != y->cpu_millis
		   ? (x->cpu_millis > y->cpu_millis) -
			 (x->cpu_millis < y->cpu_millis)
		   : (x->memory_mib > y->memory_mib) -
			 (x->memory_mib < y->memory_mib);
}

/* Set point `k` of class `c`, weighing 1. */
static void set_point(ft_mix_t *mix, unsigned c, unsigned k, const point_t *p,
		      unsigned share)
{
	mix->point_cpu_millis[c][k] = p->cpu_millis;
	mix->point_memory_mib[c][k] = p->memory_mib;
	mix->point_share[c][k] = (uint8_t)share;
	mix->point_weight[c][k] = FT_WEIGHT_ONE;
}

/* Points of the `n` sorted `pods`: each distinct one standing for its
 * copies. The number of points. */
static unsigned distinct_points(ft_mix_t *mix, unsigned c, const point_t *pods,
				unsigned n)
{
	unsigned k = 0;

	for (unsigned i = 0, run = 1; i < n; i++, run++)
		if (i + 1 == n || by_cpu(&pods[i], &pods[i + 1]) != 0) {
			set_point(mix, c, k++, &pods[i], run);
			run = 0;
		}
	return k;
}

/* Class `c`'s points: its distinct samples when there are at most
 * FT_MIX_POINTS, else samples at the middles of FT_MIX_POINTS equal
 * shares of them by CPU. */
static void refresh_points(ft_mix_t *mix, unsigned c)
{
	point_t pods[FT_MIX_SAMPLES];
	unsigned n = mix->n_samples[c], k = FT_MIX_POINTS, distinct = 0;

	for (unsigned i = 0; i < n; i++)
		pods[i] = (point_t){mix->sample_cpu_millis[c][i],
				    mix->sample_memory_mib[c][i]};
	qsort(pods, n, sizeof(pods[0]), by_cpu);
	for (unsigned i = 0; i < n; i++)
		distinct += !i || by_cpu(&pods[i], &pods[i - 1]) != 0;
	if (distinct <= FT_MIX_POINTS)
		k = distinct_points(mix, c, pods, n);
	else
		for (unsigned j = 0; j < k; j++)
			set_point(mix, c, j, &pods[(2 * j + 1) * n / (2 * k)],
				  1);
	mix->n_points[c] = (uint8_t)k;
	mix->class_shares[c] = 0;
	for (unsigned j = 0; j < k; j++)
		mix->class_shares[c] += mix->point_share[c][j];
	mix->class_weight[c] = (uint32_t)mix->class_shares[c] * FT_WEIGHT_ONE;
}

/* Keep `d`'s requests among class `c`'s samples, the oldest leaving. */
static void add_sample(ft_mix_t *mix, unsigned c, const ft_demand_t *d)
{
	unsigned s = mix->sample_head[c];

	mix->sample_cpu_millis[c][s] = ft_demand_cpu_millis(d);
	mix->sample_memory_mib[c][s] =
	    (uint32_t)(d->memory_mib > UINT32_MAX ? UINT32_MAX : d->memory_mib);
	mix->sample_head[c] = (uint8_t)((s + 1) % FT_MIX_SAMPLES);
	if (mix->n_samples[c] < FT_MIX_SAMPLES)
		mix->n_samples[c]++;
	refresh_points(mix, c);
}

/* A slot for a new class: a free one, else the class with the fewest pods. */
static unsigned new_class(ft_mix_t *mix, const ft_demand_t *key,
			  const ft_node_rules_t *rules)
{
	unsigned c = 0;

	if (mix->n_classes < FT_MIX_CLASSES) {
		c = mix->n_classes++;
	} else {
		for (unsigned i = 1; i < FT_MIX_CLASSES; i++)
			if (mix->counts[i] < mix->counts[c])
				c = i;
		forget_class(mix, c);
	}
	mix->classes[c] = *key;
	mix->class_rules[c] = *rules;
	mix->class_bound[c] = false;
	new_generation(mix, c);
	return c;
}

void ft_mix_add(ft_mix_t *mix, const ft_demand_t *d,
		const ft_node_rules_t *rules)
{
	static const ft_node_rules_t none;
	ft_demand_t key;
	uint8_t *slot;
	int c;

	if (!rules)
		rules = &none;
	if (!mix->window || !class_of(&key, d))
		return;
	if ((c = find_class(mix, &key, rules)) < 0)
		c = (int)new_class(mix, &key, rules);
	slot = &mix->ring[mix->head];
	if (*slot != NO_CLASS) {
		mix->counts[*slot]--;
		mix->total--;
	}
	*slot = (uint8_t)c;
	mix->counts[c]++;
	mix->total++;
	mix->head = (mix->head + 1) % mix->window;
	add_sample(mix, (unsigned)c, d);
}

/* Free slices of MIG-enabled GPU `g`: of free instances and uncovered. */
static unsigned free_slices(const ft_node_t *node, unsigned g,
			    unsigned *uncovered)
{
	const ft_topology_t *t = node->topology;
	unsigned covered = 0, free = 0;

	for (unsigned i = 0; i < t->n_mig; i++) {
		if (t->mig[i].gpu != g)
			continue;
		covered += t->mig[i].size;
		if (!ft_node_mig_used(node, i))
			free += t->mig[i].size;
	}
	*uncovered = covered < FT_MIG_SLICES ? FT_MIG_SLICES - covered : 0;
	return free + *uncovered;
}

/* Free capacity; fills the per-kind counts of `out` when not NULL. */
static uint32_t free_milli(const ft_node_t *node, ft_frag_t *out)
{
	const ft_topology_t *t = node->topology;
	uint16_t whole = ft_node_free_gpus(node);
	uint32_t milli = 0;

	for (unsigned g = 0; g < t->n_gpus; g++) {
		const ft_gpu_t *gpu = &t->gpus[g];
		unsigned uncovered = 0, n;
		if (gpu->mig_enabled) {
			n = free_slices(node, g, &uncovered);
			milli += n * FT_MILLI_GPU / FT_MIG_SLICES;
			if (out) {
				out->mig_slices_free += (uint16_t)n;
				out->mig_slices_stranded += (uint16_t)uncovered;
			}
		} else if (gpu->replicas) {
			n = ft_node_free_replicas(node, g);
			milli += n * FT_MILLI_GPU / gpu->replicas;
			if (out)
				out->replicas_free += (uint16_t)n;
		} else if (whole & (1u << g)) {
			milli += FT_MILLI_GPU;
		}
	}
	return milli;
}

uint32_t ft_frag_of(const ft_node_t *node, const ft_demand_t *m)
{
	ft_usable_t u;
	uint32_t free;

	if (!node->topology)
		return 0;
	free = free_milli(node, NULL);
	ft_place_usable(&u, node, m);
	return u.milli < free ? free - u.milli : 0;
}

/* The node's fragmentation cache, when it has one and no other thread
 * holds it. The cache is not part of the node's value. */
static bool lock_node(const ft_node_t *node)
{
	return node->frag && !atomic_flag_test_and_set_explicit(
				 &node->frag->busy, memory_order_acquire);
}

static void unlock_node(const ft_node_t *node)
{
	atomic_flag_clear_explicit(&node->frag->busy, memory_order_release);
}

/*
 * What class `c` could use on `node` (ft_place_usable), nothing where its
 * node rules rule the node out (FGD's NoAccess). Whether they admit it.
 * The rules match the node's labels as kube-scheduler does; the GPU model
 * names of the class key are a hint and rule nothing out (frag.h).
 */
static bool class_usable(ft_usable_t *out, const ft_node_t *node,
			 const ft_mix_t *mix, unsigned c)
{
	bool reaches = node->topology &&
		       ft_node_rules_admit(&mix->class_rules[c], node->labels);

	if (reaches)
		ft_place_usable(out, node, &mix->classes[c]);
	else
		memset(out, 0, sizeof(*out));
	return reaches;
}

/*
 * class_usable() of class `c` on `node`, through the node's cache; a node
 * without one, or whose cache another thread holds, works it out alone.
 */
static bool usable_cached(ft_usable_t *out, const ft_node_t *node,
			  const ft_mix_t *mix, unsigned c)
{
	ft_frag_cache_entry_t *e = node->frag ? &node->frag->cache[c] : NULL;
	bool locked = lock_node(node);
	bool hit = locked && e->generation == mix->generations[c];
	bool reaches;

	if (hit) {
		out->milli = e->milli;
		out->gpus = e->gpus;
		memcpy(out->mig, e->mig, sizeof(out->mig));
		reaches = e->reaches;
	} else {
		reaches = class_usable(out, node, mix, c);
	}
	if (locked && !hit) {
		e->generation = mix->generations[c];
		e->milli = out->milli;
		e->gpus = out->gpus;
		memcpy(e->mig, out->mig, sizeof(e->mig));
		e->reaches = reaches;
	}
	if (locked)
		unlock_node(node);
	return reaches;
}

static uint32_t saturating_sub(uint32_t a, uint32_t b)
{
	return b < a ? a - b : 0;
}

/*
 * How much class `c` counts in the mix's average, in FT_MASS_ONE: its pods,
 * times its pods per GPU when it asks a fraction of one (frag.h, ft_mix_t).
 */
static uint64_t class_mass(const ft_mix_t *mix, unsigned c)
{
	uint32_t f = mix->classes[c].gpu_fraction_milli;

	return (uint64_t)mix->counts[c] *
	       (f && f < 1000 ? FT_MASS_ONE * 1000 / f : FT_MASS_ONE);
}

/* `sum` over the classes, each weighed by its mass, averaged over `mass`. */
static uint32_t weighted(uint64_t sum, uint64_t mass)
{
	return mass ? (uint32_t)((sum + mass / 2) / mass) : 0;
}

/* The CPU and memory the node's pods have not requested. */
static void requests_room(ft_frag_room_t *out, const ft_node_t *node)
{
	out->cpu_millis = ft_node_free_cpu_millis(node);
	out->memory_known = ft_node_free_memory_mib(node, &out->memory_mib);
}

static void room_of(ft_frag_room_t *out, const ft_node_t *node)
{
	out->free_milli = free_milli(node, NULL);
	requests_room(out, node);
}

/*
 * room_of() through the node's cache: the room reads the topology's GPUs
 * and NUMA nodes, lines prioritize would otherwise fetch for every node.
 * Only for a node with a topology.
 */
static void room_cached(ft_frag_room_t *out, const ft_node_t *node)
{
	if (!lock_node(node)) {
		room_of(out, node);
		return;
	}
	if (!node->frag->room_known) {
		room_of(&node->frag->room, node);
		node->frag->room_known = true;
	}
	*out = node->frag->room;
	unlock_node(node);
}

/* Whether `r` holds the CPU and memory of point `k` of class `c`. */
static bool point_fits(const ft_mix_t *mix, unsigned c, unsigned k,
		       const ft_frag_room_t *r)
{
	return r->cpu_millis >= mix->point_cpu_millis[c][k] &&
	       (!r->memory_known ||
		r->memory_mib >= mix->point_memory_mib[c][k]);
}

/*
 * F_n(m) of class `c` whose units could take `usable` of the free capacity:
 * averaged over its points, all the free capacity for a point whose requests
 * the room cannot hold, else the free capacity its units cannot take.
 */
static uint32_t class_frag(const ft_mix_t *mix, unsigned c,
			   const ft_frag_room_t *r, uint32_t usable)
{
	unsigned n = mix->n_points[c];
	uint64_t fit = 0, div = (uint64_t)mix->class_shares[c] * FT_WEIGHT_ONE;

	if (!n)
		return saturating_sub(r->free_milli, usable);
	/* The points are in CPU order: none after the first too big fits. */
	for (unsigned k = 0;
	     k < n && r->cpu_millis >= mix->point_cpu_millis[c][k]; k++)
		if (point_fits(mix, c, k, r))
			fit += (uint64_t)mix->point_weight[c][k] *
			       mix->point_share[c][k];
	/* A point that fits strands what its units cannot take, one that
	 * does not all the free capacity. */
	return (uint32_t)(((uint64_t)mix->class_weight[c] * r->free_milli -
			   fit * (r->free_milli -
				  saturating_sub(r->free_milli, usable)) +
			   div / 2) /
			  div);
}

/* Count `node` among the nodes each class may run on (`reach`) and among
 * the hosts of each point it could take now. */
static void count_hosts(uint32_t (*hosts)[FT_MIX_POINTS], uint32_t *reach,
			const ft_mix_t *mix, const ft_node_t *node)
{
	ft_frag_room_t r;

	/* point_fits reads the room's CPU and memory, kept per node value. */
	room_cached(&r, node);
	for (unsigned c = 0; c < mix->n_classes; c++) {
		ft_usable_t u;
		if (!mix->counts[c])
			continue;
		reach[c] += usable_cached(&u, node, mix, c);
		for (unsigned k = 0; u.milli && k < mix->n_points[c]; k++)
			hosts[c][k] += point_fits(mix, c, k, &r);
	}
}

/* The weight of a point `hosts` of `seen` nodes could take, weighed from a
 * scarcity of `from`. */
static uint16_t scarcity_weight(uint32_t seen, uint32_t hosts, unsigned from)
{
	uint64_t w = hosts ? (uint64_t)seen * FT_WEIGHT_ONE / hosts : 0;

	if (w < from * FT_WEIGHT_ONE)
		return FT_WEIGHT_ONE;
	return (uint16_t)(w > FT_WEIGHT_MAX * FT_WEIGHT_ONE
			      ? FT_WEIGHT_MAX * FT_WEIGHT_ONE
			      : w);
}

void ft_mix_weigh(ft_mix_t *mix, const ft_node_t *const *nodes, unsigned n)
{
	uint32_t hosts[FT_MIX_CLASSES][FT_MIX_POINTS], reach[FT_MIX_CLASSES];
	unsigned look = n < FT_WEIGH_NODES ? n : FT_WEIGH_NODES;
	uint32_t seen = 0;

	memset(hosts, 0, sizeof(hosts));
	memset(reach, 0, sizeof(reach));
	for (unsigned i = 0; i < look; i++) {
		const ft_node_t *node = nodes[(uint64_t)i * n / look];
		if (!node || !node->topology)
			continue;
		seen++;
		count_hosts(hosts, reach, mix, node);
	}
	for (unsigned c = 0; c < mix->n_classes; c++) {
		unsigned from;
		mix->class_bound[c] = reach[c] < seen;
		from =
		    mix->class_bound[c] ? FT_WEIGHT_FROM_BOUND : FT_WEIGHT_FROM;
		mix->class_weight[c] = 0;
		for (unsigned k = 0; k < mix->n_points[c]; k++) {
			mix->point_weight[c][k] =
			    scarcity_weight(seen, hosts[c][k], from);
			mix->class_weight[c] +=
			    (uint32_t)mix->point_weight[c][k] *
			    mix->point_share[c][k];
		}
	}
}

/* What point `k` of class `c` could use of `usable` under room `r`. */
static uint32_t point_avail(const ft_mix_t *mix, unsigned c, unsigned k,
			    const ft_frag_room_t *r, uint32_t usable)
{
	return point_fits(mix, c, k, r) ? usable : 0;
}

/*
 * What a placement takes from class `c`, of mass `mass`, when it is
 * bound to nodes by label (a GPU model's, a node pool's), milli-GPU:
 * averaged over its points, the capacity each could use before (`before`,
 * `usable`) and cannot after (`after`, `usable_after`: its units taken, or
 * its CPU or memory), times how far the point's scarcity weight exceeds 1
 * (ft_mix_weigh). 0 for a class free to run anywhere. FGD counts what a
 * placement strands, not what it takes: a pod that may run anywhere would
 * take the GPUs a model's bound pods need at no cost.
 */
static uint64_t bound_taken(const ft_mix_t *mix, unsigned c, uint64_t mass,
			    const ft_frag_room_t *before, uint32_t usable,
			    const ft_frag_room_t *after, uint32_t usable_after)
{
	uint64_t lost = 0;

	if (!mix->class_bound[c])
		return 0;
	for (unsigned k = 0; k < mix->n_points[c]; k++)
		lost += (uint64_t)saturating_sub(
			    point_avail(mix, c, k, before, usable),
			    point_avail(mix, c, k, after, usable_after)) *
			mix->point_share[c][k] *
			(mix->point_weight[c][k] - FT_WEIGHT_ONE);
	return mass * lost / ((uint64_t)mix->class_shares[c] * FT_WEIGHT_ONE);
}

/* The mix's classes summed over one node, each weighed by its mass. */
typedef struct frag_sums {
	uint64_t before; /* F_n(m) now */
	uint64_t after;	 /* F_n(m) after a placement */
	uint64_t taken;	 /* bound_taken() by the placement */
	uint64_t mass;	 /* of the classes summed */
} frag_sums_t;

/*
 * One pass over the classes of `mix` on `node`, whose room is `room`: F
 * before and, when `after` (the node after a placement) is given, F after
 * and what the placement takes. The instances some class could take now
 * go into `mig_usable` when it is not NULL.
 */
static void sum_classes(frag_sums_t *out, const ft_node_t *node,
			const ft_mix_t *mix, const ft_frag_room_t *room,
			const ft_frag_after_t *after, uint64_t *mig_usable)
{
	memset(out, 0, sizeof(*out));
	for (unsigned c = 0; c < mix->n_classes; c++) {
		ft_usable_t u;
		uint64_t m = class_mass(mix, c);
		if (!m)
			continue;
		out->mass += m;
		usable_cached(&u, node, mix, c);
		out->before += m * class_frag(mix, c, room, u.milli);
		if (after) {
			out->after += m * class_frag(mix, c, &after->room,
						     after->usable[c]);
			out->taken +=
			    bound_taken(mix, c, m, room, u.milli, &after->room,
					after->usable[c]);
		}
		if (mig_usable) {
			mig_usable[0] |= u.mig[0];
			mig_usable[1] |= u.mig[1];
		}
	}
}

/* F_n under `mix`, and (when not NULL) the instances some class could take. */
static uint32_t expected_fragmentation(const ft_node_t *node,
				       const ft_mix_t *mix,
				       uint64_t *mig_usable)
{
	ft_frag_room_t room;
	frag_sums_t s;

	if (!mix || !mix->total || !node->topology)
		return 0;
	room_of(&room, node);
	sum_classes(&s, node, mix, &room, NULL, mig_usable);
	return weighted(s.before, s.mass);
}

/* Slices of free instances that no class of the mix could take now. */
static unsigned unwanted_slices(const ft_node_t *node, const uint64_t *usable)
{
	const ft_topology_t *t = node->topology;
	unsigned n = 0;

	for (unsigned i = 0; i < t->n_mig; i++)
		if (!ft_node_mig_used(node, i) && !ft_mig_mask_has(usable, i))
			n += t->mig[i].size;
	return n;
}

void ft_frag_largest_blocks(uint8_t *out, const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	uint16_t free = ft_node_free_gpus(node);

	memset(out, 0, FT_LEVEL_COUNT);
	for (unsigned i = 0; t && i < t->n_domains; i++) {
		const ft_domain_t *dom = &t->domains[i];
		unsigned n = (unsigned)__builtin_popcount(dom->gpus & free);
		if (n > out[dom->level])
			out[dom->level] = (uint8_t)n;
	}
}

void ft_frag_measure(ft_frag_t *out, const ft_node_t *node, const ft_mix_t *mix)
{
	uint64_t usable[2] = {0, 0};

	memset(out, 0, sizeof(*out));
	if (!node->topology)
		return;
	out->free_milli = free_milli(node, out);
	out->whole_gpus_free =
	    (uint16_t)__builtin_popcount(ft_node_free_gpus(node));
	ft_frag_largest_blocks(out->largest_block, node);
	out->fragmentation_milli = expected_fragmentation(node, mix, usable);
	if (mix && mix->total)
		out->mig_slices_stranded +=
		    (uint16_t)unwanted_slices(node, usable);
}

/*
 * Whether placing `p` leaves what class `m` could use as it was (`u`): a
 * class that fits nowhere fits nowhere after; one whose usable units the
 * placement does not take, whose pinned CPUs it does not compete for, on a
 * node without usage of unknown placement (which makes node-wide room
 * count), keeps them. Otherwise the caller works it out again.
 */
static bool unchanged(const ft_usable_t *u, const ft_placement_t *p,
		      const ft_demand_t *m, const ft_node_t *node)
{
	if (!u->milli)
		return true;
	return !((p->gpus | ft_replica_gpus(p->replicas)) & u->gpus) &&
	       !(p->mig[0] & u->mig[0]) && !(p->mig[1] & u->mig[1]) &&
	       (!m->exclusive_cpus || ft_cpuset_empty(&p->cpus)) &&
	       !node->unknown_gpus && !node->unknown_replicas &&
	       !node->unknown_cpus;
}

static void node_after_placement(ft_node_t *after, const ft_node_t *node,
				 const ft_placement_t *p, const ft_demand_t *d)
{
	ft_holding_t h;

	memset(&h, 0, sizeof(h));
	h.requested_cpu_millis = ft_demand_cpu_millis(d);
	h.requested_memory_mib = d->memory_mib;
	h.gpus = p->gpus;
	memcpy(h.mig, p->mig, sizeof(h.mig));
	memcpy(h.replicas, p->replicas, sizeof(h.replicas));
	h.cpus = p->cpus;
	h.numa_nodes = p->numa_nodes;
	h.memory_mib = p->memory_mib;
	ft_node_preview(after, node, &h);
}

/* The memo of `shape` under `policy`, fresh for every class of the mix in
 * use; NULL when there is none. Called with the node's try-lock held. */
static const ft_frag_memo_t *memo_find(const ft_node_t *node,
				       const ft_demand_t *shape, uint8_t policy,
				       const ft_mix_t *mix)
{
	for (unsigned k = 0; k < FT_FRAG_MEMO; k++) {
		const ft_frag_memo_t *e = &node->frag->memo[k];
		bool fresh = e->used && e->policy == policy &&
			     same_shape(&e->shape, shape);
		for (unsigned c = 0; fresh && c < mix->n_classes; c++)
			fresh = !mix->counts[c] ||
				e->generations[c] == mix->generations[c];
		if (fresh)
			return e;
	}
	return NULL;
}

/* Work out what each class of the mix could use after `d` is placed. */
static int work_after(ft_frag_after_t *out, const ft_node_t *node,
		      const ft_demand_t *d, ft_policy_t policy,
		      const ft_mix_t *mix)
{
	ft_placement_t p;
	ft_node_t next;
	int rc;

	if ((rc = ft_place_choose(&p, node, d, policy)) < 0)
		return rc;
	node_after_placement(&next, node, &p, d);
	room_of(&out->room, &next);
	for (unsigned c = 0; c < mix->n_classes; c++) {
		const ft_demand_t *m = &mix->classes[c];
		ft_usable_t u, v;
		if (!mix->counts[c])
			continue;
		usable_cached(&u, node, mix, c);
		if (unchanged(&u, &p, m, node))
			v = u;
		else
			class_usable(&v, &next, mix, c);
		out->usable[c] = v.milli;
	}
	return 0;
}

/*
 * The node after `d` is placed: from the node's memo of pod shapes when it
 * has this one, else worked out and remembered.
 */
static int frag_after(ft_frag_after_t *out, const ft_node_t *node,
		      const ft_demand_t *d, ft_policy_t policy,
		      const ft_mix_t *mix)
{
	uint8_t pol = (uint8_t)(d->has_policy ? d->policy : policy);
	const ft_frag_memo_t *hit = NULL;
	ft_frag_memo_t *slot;
	ft_demand_t shape;
	int rc;

	memo_shape(&shape, d);
	if (lock_node(node)) {
		if ((hit = memo_find(node, &shape, pol, mix)))
			*out = hit->after;
		unlock_node(node);
	}
	if (hit)
		return 0;
	if ((rc = work_after(out, node, d, policy, mix)) < 0 ||
	    !lock_node(node))
		return rc;
	slot = &node->frag->memo[node->frag->memo_next];
	slot->used = true;
	slot->shape = shape;
	slot->policy = pol;
	/* A class without pods was not worked out: 0 never matches it. */
	for (unsigned c = 0; c < FT_MIX_CLASSES; c++)
		slot->generations[c] = mix->counts[c] ? mix->generations[c] : 0;
	slot->after = *out;
	node->frag->memo_next = (node->frag->memo_next + 1) % FT_FRAG_MEMO;
	unlock_node(node);
	return 0;
}

/* ft_frag_delta() on a node with a topology whose room is `before`. */
static int delta_of(int64_t *out, const ft_node_t *node,
		    const ft_frag_room_t *before, const ft_demand_t *d,
		    ft_policy_t policy, const ft_mix_t *mix)
{
	frag_sums_t s;
	ft_frag_after_t after;
	ft_placement_t p;
	int rc;

	*out = 0;
	if (!mix || !mix->total)
		return (rc = ft_place_choose(&p, node, d, policy)) < 0 ? rc : 0;
	memset(&after, 0, sizeof(after));
	if ((rc = frag_after(&after, node, d, policy, mix)) < 0)
		return rc;
	sum_classes(&s, node, mix, before, &after, NULL);
	*out = (int64_t)weighted(s.after, s.mass) -
	       (int64_t)weighted(s.before, s.mass) +
	       (int64_t)weighted(s.taken, s.mass);
	return 0;
}

int ft_frag_delta(int64_t *out, const ft_node_t *node, const ft_demand_t *d,
		  ft_policy_t policy, const ft_mix_t *mix)
{
	ft_frag_room_t before;
	ft_placement_t p;
	int rc;

	*out = 0;
	if (!node->topology)
		return (rc = ft_place_choose(&p, node, d, policy)) < 0 ? rc : 0;
	room_cached(&before, node);
	return delta_of(out, node, &before, d, policy, mix);
}

/* Bits of a rank (ft_place_rank), from the most significant part. */
#define RANK_POLICY_BITS 24
#define RANK_FRAG_BITS	 24
#define RANK_FRAG_MAX	 ((INT64_C(1) << (RANK_FRAG_BITS - 1)) - 1)
#define RANK_GPU_MAX	 ((1u << 14) - 1) /* milli-GPU */
#define RANK_CPU_MAX	 ((1u << 10) - 1) /* CPUs */

static uint32_t clamp_u(uint64_t v, uint32_t max)
{
	return v > max ? max : (uint32_t)v;
}

/* What the node has left (`room`): packed ranks less higher, distributed
 * more. */
static int64_t policy_part(const ft_frag_room_t *room, const ft_demand_t *d,
			   ft_policy_t policy)
{
	uint32_t gpu = clamp_u(room->free_milli, RANK_GPU_MAX);
	uint32_t cpu = clamp_u(room->cpu_millis / FT_MILLI_CPU, RANK_CPU_MAX);

	if ((d->has_policy ? d->policy : policy) == FT_POLICY_PACKED) {
		gpu = RANK_GPU_MAX - gpu;
		cpu = RANK_CPU_MAX - cpu;
	}
	return (int64_t)gpu << 10 | cpu;
}

/* Fragmentation added, as a rank part: less is better. */
static int64_t frag_part(int64_t delta)
{
	if (delta > RANK_FRAG_MAX)
		delta = RANK_FRAG_MAX;
	if (delta < -RANK_FRAG_MAX)
		delta = -RANK_FRAG_MAX;
	return RANK_FRAG_MAX - delta;
}

int64_t ft_place_rank(const ft_node_t *node, const ft_demand_t *d,
		      ft_policy_t policy, const ft_mix_t *mix)
{
	int level = ft_place_fit_points_memo(node, d);
	/* A node without topology has no GPU flextopo knows of, nor CPUs. */
	ft_frag_room_t room = {0, 0, 0, false};
	int64_t delta = 0;

	if (level < 0)
		return FT_RANK_NONE;
	if (node->topology) {
		room_cached(&room, node);
		if (delta_of(&delta, node, &room, d, policy, mix) < 0)
			return FT_RANK_NONE;
	}
	return (int64_t)level << (RANK_FRAG_BITS + RANK_POLICY_BITS) |
	       frag_part(delta) << RANK_POLICY_BITS |
	       policy_part(&room, d, policy);
}

void ft_place_rank_all(int64_t *ranks, const ft_node_t *const *nodes,
		       unsigned n, const ft_demand_t *d, ft_policy_t policy,
		       const ft_mix_t *mix)
{
	for (unsigned i = 0; i < n; i++) {
		ft_place_prefetch_ahead(nodes, n, i);
		ranks[i] = nodes[i] ? ft_place_rank(nodes[i], d, policy, mix)
				    : FT_RANK_NONE;
	}
}

void ft_scores_of_ranks(int *out, const int64_t *ranks, unsigned n, int max)
{
	int64_t lo = INT64_MAX, hi = FT_RANK_NONE;

	for (unsigned i = 0; i < n; i++) {
		if (ranks[i] == FT_RANK_NONE)
			continue;
		lo = ranks[i] < lo ? ranks[i] : lo;
		hi = ranks[i] > hi ? ranks[i] : hi;
	}
	for (unsigned i = 0; i < n; i++)
		out[i] = ranks[i] == FT_RANK_NONE ? 0
			 : ranks[i] == hi
			     ? max
			     : (int)((ranks[i] - lo) * max / (hi - lo));
}
