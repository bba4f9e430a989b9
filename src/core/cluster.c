/*
 * Pods, holdings, nodes and snapshots: the allocation state of the model.
 *
 * ft_node_build() resolves each pod's decoded allocation against the node's
 * topology once, so that filter and score only read masks and counters. A
 * pod whose allocation cannot be resolved still counts, as usage of unknown
 * placement: the model never reports a device free that a pod may hold.
 *
 * What the node agent (flextopo-node) observed the containers really got
 * (flextopo.io/observed) wins over the allocation: a pod holds the observed
 * units, so that the extender never hands out a unit a container runs on.
 * A pod whose observed units differ from its allocation has drifted, and so
 * has one placed without flextopo (no valid allocation) that holds units;
 * its holding keeps what the allocation named, for the debug views and
 * metrics.
 */
#include <flextopo/cluster.h>
#include <flextopo/error.h>
#include <flextopo/place.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An index that cannot grow its buckets is dropped, never fatal. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

uint32_t ft_demand_cpu_millis(const ft_demand_t *d)
{
	uint64_t pinned = (uint64_t)d->exclusive_cpus * FT_MILLI_CPU;

	if (pinned > UINT32_MAX)
		pinned = UINT32_MAX;
	return pinned > d->cpu_millis ? (uint32_t)pinned : d->cpu_millis;
}

bool ft_demand_wants_devices(const ft_demand_t *d)
{
	return d->gpus || d->ranks || d->mig_count || d->exclusive_cpus;
}

void ft_allocation_dispose(ft_allocation_t *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < a->n_gpus; i++)
		free(a->gpu_uuids[i]);
	for (unsigned i = 0; i < a->n_mig; i++)
		free(a->mig_uuids[i]);
	for (unsigned i = 0; i < a->n_replicas; i++)
		free(a->replica_gpus[i]);
	memset(a, 0, sizeof(*a));
}

static int copy_strings(char **dst, char *const *src, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!(dst[i] = strdup(src[i])))
			return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

/* Deep copy; FT_ENOMEM. */
static int allocation_copy(ft_allocation_t *out, const ft_allocation_t *src)
{
	int rc;

	*out = *src;
	memset(out->gpu_uuids, 0, sizeof(out->gpu_uuids));
	memset(out->mig_uuids, 0, sizeof(out->mig_uuids));
	memset(out->replica_gpus, 0, sizeof(out->replica_gpus));
	if ((rc = copy_strings(out->gpu_uuids, src->gpu_uuids, src->n_gpus)) <
		0 ||
	    (rc = copy_strings(out->mig_uuids, src->mig_uuids, src->n_mig)) <
		0 ||
	    (rc = copy_strings(out->replica_gpus, src->replica_gpus,
			       src->n_replicas)) < 0)
		ft_allocation_dispose(out);
	return rc;
}

static bool has_string(char *const *list, unsigned n, const char *s)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static bool same_strings(char *const *a, unsigned na, char *const *b,
			 unsigned nb)
{
	for (unsigned i = 0; i < na; i++)
		if (!has_string(b, nb, a[i]))
			return false;
	for (unsigned i = 0; i < nb; i++)
		if (!has_string(a, na, b[i]))
			return false;
	return true;
}

/* Replicas `a` holds on the shared GPU `uuid`, over all its entries. */
static unsigned replicas_on(const ft_allocation_t *a, const char *uuid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < a->n_replicas; i++)
		if (strcmp(a->replica_gpus[i], uuid) == 0)
			n += a->replica_counts[i];
	return n;
}

static bool same_replicas(const ft_allocation_t *a, const ft_allocation_t *b)
{
	for (unsigned i = 0; i < a->n_replicas; i++)
		if (replicas_on(a, a->replica_gpus[i]) !=
		    replicas_on(b, a->replica_gpus[i]))
			return false;
	for (unsigned i = 0; i < b->n_replicas; i++)
		if (replicas_on(a, b->replica_gpus[i]) !=
		    replicas_on(b, b->replica_gpus[i]))
			return false;
	return true;
}

bool ft_allocation_same_units(const ft_allocation_t *a,
			      const ft_allocation_t *b)
{
	return same_strings(a->gpu_uuids, a->n_gpus, b->gpu_uuids, b->n_gpus) &&
	       same_strings(a->mig_uuids, a->n_mig, b->mig_uuids, b->n_mig) &&
	       same_replicas(a, b) && ft_cpuset_equal(&a->cpus, &b->cpus);
}

typedef struct {
	char *buf;
	size_t size, len;
} text_t;

__attribute__((format(printf, 2, 3))) static void text_add(text_t *t,
							   const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len >= t->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	t->len = n < 0 ? t->size : t->len + (size_t)n;
}

/* `name [a,b]`, or `name [a:2,b:1]` with counts, after a space. */
static void text_list(text_t *t, const char *name, char *const *items,
		      unsigned n, const uint8_t *counts)
{
	text_add(t, "%s%s [", t->len ? " " : "", name);
	for (unsigned i = 0; i < n; i++) {
		text_add(t, "%s%s", i ? "," : "", items[i]);
		if (counts)
			text_add(t, ":%u", counts[i]);
	}
	text_add(t, "]");
}

const char *ft_allocation_units_text(char *buf, size_t size,
				     const ft_allocation_t *a)
{
	text_t t = {.buf = buf, .size = size, .len = 0};
	char cpus[2048];

	if (size)
		buf[0] = '\0';
	text_list(&t, "gpus", a->gpu_uuids, a->n_gpus, NULL);
	if (a->n_mig)
		text_list(&t, "mig", a->mig_uuids, a->n_mig, NULL);
	if (a->n_replicas)
		text_list(&t, "replicas", a->replica_gpus, a->n_replicas,
			  a->replica_counts);
	ft_cpuset_format(cpus, sizeof(cpus), &a->cpus);
	text_add(&t, " cpuset \"%s\"", cpus);
	return buf;
}

/* "GPU 5 (GPU-...)" per GPU of `gpus`, by the driver's index. */
static void text_gpus(text_t *t, const ft_topology_t *topo, uint16_t gpus)
{
	for (unsigned g = 0; topo && g < topo->n_gpus; g++)
		if (gpus & (1u << g))
			text_add(t, "%sGPU %d (%s)", t->len ? ", " : "",
				 topo->gpus[g].index, topo->gpus[g].uuid);
}

/* "MIG MIG-..." per instance of `mig`. */
static void text_mig(text_t *t, const ft_topology_t *topo, const uint64_t *mig)
{
	for (unsigned m = 0; topo && m < topo->n_mig; m++)
		if (ft_mig_mask_has(mig, m))
			text_add(t, "%sMIG %s", t->len ? ", " : "",
				 topo->mig[m].uuid);
}

const char *ft_conflict_units_text(char *buf, size_t size,
				   const ft_node_t *node,
				   const ft_conflict_t *c)
{
	text_t t = {.buf = buf, .size = size, .len = 0};
	char cpus[2048];

	if (size)
		buf[0] = '\0';
	text_gpus(&t, node->topology, c->gpus);
	text_mig(&t, node->topology, c->mig);
	if (!ft_cpuset_empty(&c->cpus)) {
		ft_cpuset_format(cpus, sizeof(cpus), &c->cpus);
		text_add(&t, "%sCPUs %s", t.len ? ", " : "", cpus);
	}
	return buf;
}

const char *ft_observed_source_name(ft_observed_source_t source)
{
	return source == FT_OBSERVED_PODRESOURCES ? "podresources" : "nri";
}

void ft_observed_dispose(ft_observed_t *o)
{
	if (!o)
		return;
	free(o->node);
	ft_allocation_dispose(&o->units);
	memset(o, 0, sizeof(*o));
}

/* Deep copy; FT_ENOMEM. */
static int observed_copy(ft_observed_t *out, const ft_observed_t *src)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->source = src->source;
	if (src->node && !(out->node = strdup(src->node)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	if ((rc = allocation_copy(&out->units, &src->units)) < 0)
		ft_observed_dispose(out);
	return rc;
}

bool ft_pod_holds_observed(const ft_pod_t *pod)
{
	return pod->observed && pod->node &&
	       strcmp(pod->node, pod->observed->node) == 0;
}

static bool holds_units(const ft_allocation_t *a)
{
	return a->n_gpus || a->n_mig || a->n_replicas ||
	       !ft_cpuset_empty(&a->cpus);
}

bool ft_pod_drifted(const ft_pod_t *pod)
{
	if (!ft_pod_holds_observed(pod))
		return false;
	if (!pod->has_allocation)
		return holds_units(&pod->observed->units);
	return !ft_allocation_same_units(&pod->allocation,
					 &pod->observed->units);
}

void ft_pod_dispose(ft_pod_t *pod)
{
	if (!pod)
		return;
	free(pod->uid);
	free(pod->ns);
	free(pod->name);
	free(pod->node);
	for (unsigned i = 0; i < pod->n_labels; i++)
		free(pod->labels[i]);
	free(pod->labels);
	for (unsigned i = 0; i < pod->n_claims; i++)
		free(pod->claims[i]);
	free(pod->claims);
	free(pod->demand_error);
	free(pod->allocation_error);
	ft_allocation_dispose(&pod->allocation);
	free(pod->observed_error);
	ft_observed_dispose(pod->observed);
	free(pod->observed);
	free(pod->gang);
	free(pod->gang_error);
	memset(pod, 0, sizeof(*pod));
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	if (src && !(*dst = strdup(src)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

/* A heap copy of the list `src` of `n` strings in *out, its count in
 * *count. */
static int copy_string_list(char ***out, unsigned *count, char *const *src,
			    unsigned n)
{
	*out = NULL;
	*count = 0;
	if (!n)
		return 0;
	if (!(*out = calloc(n, sizeof(**out))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	*count = n; /* unset entries are NULL: the dispose frees the rest */
	return copy_strings(*out, src, n);
}

static int copy_observed(ft_pod_t *out, const ft_pod_t *src)
{
	int rc;

	if (!src->observed)
		return 0;
	if (!(out->observed = malloc(sizeof(*out->observed))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	if ((rc = observed_copy(out->observed, src->observed)) < 0) {
		free(out->observed);
		out->observed = NULL;
	}
	return rc;
}

int ft_pod_copy(ft_pod_t *out, const ft_pod_t *src)
{
	int rc;

	*out = *src;
	out->uid = out->ns = out->name = out->node = NULL;
	out->labels = out->claims = NULL;
	out->n_labels = out->n_claims = 0;
	out->demand_error = out->allocation_error = out->observed_error = NULL;
	out->gang = out->gang_error = NULL;
	memset(&out->allocation, 0, sizeof(out->allocation));
	out->observed = NULL;
	if ((rc = dup_opt(&out->uid, src->uid)) < 0 ||
	    (rc = dup_opt(&out->ns, src->ns)) < 0 ||
	    (rc = dup_opt(&out->name, src->name)) < 0 ||
	    (rc = dup_opt(&out->node, src->node)) < 0 ||
	    (rc = dup_opt(&out->demand_error, src->demand_error)) < 0 ||
	    (rc = dup_opt(&out->allocation_error, src->allocation_error)) < 0 ||
	    (rc = dup_opt(&out->observed_error, src->observed_error)) < 0 ||
	    (rc = dup_opt(&out->gang, src->gang)) < 0 ||
	    (rc = dup_opt(&out->gang_error, src->gang_error)) < 0 ||
	    (rc = allocation_copy(&out->allocation, &src->allocation)) < 0 ||
	    (rc = copy_observed(out, src)) < 0 ||
	    (rc = copy_string_list(&out->labels, &out->n_labels, src->labels,
				   src->n_labels)) < 0 ||
	    (rc = copy_string_list(&out->claims, &out->n_claims, src->claims,
				   src->n_claims)) < 0)
		ft_pod_dispose(out);
	return rc;
}

static void holding_dispose(ft_holding_t *h)
{
	free(h->uid);
	free(h->ns);
	free(h->name);
	free(h->expected);
}

static void node_free(ft_node_t *node)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		holding_dispose(&node->holdings[i]);
	free(node->holdings);
	free(node->conflict_pairs);
	free(node->name);
	free(node->topology_error);
	free(node->dra_error);
	free(node->frag);
	ft_filter_memo_free(node->filter_memo);
	ft_topology_unref(node->topology);
	ft_node_labels_unref(node->labels);
	free(node);
}

int ft_node_set_dra(ft_node_t *node, bool double_published, const char *error)
{
	node->dra = true;
	node->dra_double_published = double_published;
	free(node->dra_error);
	node->dra_error = NULL;
	if (error && error[0] && !(node->dra_error = strdup(error)))
		return ft_error_set(FT_ENOMEM, "node %s: out of memory",
				    node->name);
	return 0;
}

ft_node_t *ft_node_ref(ft_node_t *node)
{
	if (node)
		atomic_fetch_add(&node->refcount, 1);
	return node;
}

void ft_node_unref(ft_node_t *node)
{
	if (node && atomic_fetch_sub(&node->refcount, 1) == 1)
		node_free(node);
}

bool ft_node_mig_used(const ft_node_t *node, unsigned i)
{
	return ft_mig_mask_has(node->mig_used, i);
}

/* Resolve GPU and MIG uuids; units the topology lacks become unknown usage. */
static void resolve_devices(ft_holding_t *h, const ft_topology_t *t,
			    const ft_allocation_t *a)
{
	for (unsigned i = 0; i < a->n_gpus; i++) {
		int g = t ? ft_topology_find_gpu_uuid(t, a->gpu_uuids[i]) : -1;
		if (g >= 0)
			h->gpus |= (uint16_t)(1u << g);
		else
			h->unknown_gpus++;
	}
	for (unsigned i = 0; i < a->n_mig; i++) {
		int m = t ? ft_topology_find_mig_uuid(t, a->mig_uuids[i]) : -1;
		if (m >= 0)
			ft_mig_mask_set(h->mig, (unsigned)m);
		else
			h->unknown_mig++;
	}
	for (unsigned i = 0; i < a->n_replicas; i++) {
		int g =
		    t ? ft_topology_find_gpu_uuid(t, a->replica_gpus[i]) : -1;
		if (g >= 0 && (t->shared_gpus & (1u << g)))
			h->replicas[g] += a->replica_counts[i];
		else
			h->unknown_replicas += a->replica_counts[i];
	}
}

/* Replicas a shared demand holds when its placement is not known. */
static uint32_t demand_replicas(const ft_topology_t *t, const ft_demand_t *d)
{
	unsigned most = 1;

	if (!d->gpu_fraction_milli)
		return d->ranks;
	for (unsigned g = 0; g < t->n_gpus; g++)
		if (t->gpus[g].replicas > most)
			most = t->gpus[g].replicas;
	return d->ranks * ((d->gpu_fraction_milli * most + 999) / 1000);
}

/*
 * Without a topology the CPUs are of unknown placement: as many as were
 * observed, else as many as the demand pins.
 */
static void resolve_cpus(ft_holding_t *h, const ft_topology_t *t,
			 const ft_pod_t *pod, const ft_allocation_t *a)
{
	if (!t) {
		h->unknown_cpus = h->observed ? ft_cpuset_count(&a->cpus)
					      : pod->demand.exclusive_cpus;
		return;
	}
	h->cpus = a->cpus;
	h->numa_nodes = ft_topology_numa_of_cpus(t, &a->cpus);
	if (h->numa_nodes)
		h->memory_mib = pod->demand.memory_mib;
}

uint16_t ft_replica_gpus(const uint8_t *replicas)
{
	uint16_t gpus = 0;

	for (unsigned g = 0; g < FT_GPU_MAX; g++)
		if (replicas[g])
			gpus |= (uint16_t)(1u << g);
	return gpus;
}

bool ft_holding_has_units(const ft_holding_t *h)
{
	return h->gpus || !ft_mig_mask_empty(h->mig) ||
	       ft_replica_gpus(h->replicas) || !ft_cpuset_empty(&h->cpus);
}

uint32_t ft_holding_unknown_mig(const ft_holding_t *h, const char *profile)
{
	return profile[0] && h->unknown_mig &&
		       strcmp(h->unknown_mig_profile, profile) == 0
		   ? h->unknown_mig
		   : 0;
}

uint32_t ft_node_unknown_mig(const ft_node_t *node, const char *profile)
{
	uint32_t n = 0;

	for (unsigned i = 0; profile[0] && i < node->n_holdings; i++)
		n += ft_holding_unknown_mig(&node->holdings[i], profile);
	return n;
}

unsigned ft_node_free_replicas(const ft_node_t *node, unsigned g)
{
	unsigned n = node->topology->gpus[g].replicas;
	unsigned used = node->replicas_used[g];

	if (node->gpus_used & (1u << g))
		return 0;
	return used < n ? n - used : 0;
}

uint16_t ft_node_replica_gpus(const ft_node_t *node)
{
	if (!node->topology || !node->topology->shared_gpus)
		return 0;
	return ft_replica_gpus(node->replicas_used);
}

/*
 * Replicas beyond a GPU's count, or on a GPU another pod holds whole, are
 * double claims.
 */
static bool charge_replicas(ft_node_t *node, const ft_holding_t *h)
{
	const ft_topology_t *t = node->topology;
	bool conflict = false;

	for (unsigned g = 0; t && g < t->n_gpus; g++) {
		unsigned used = node->replicas_used[g] + h->replicas[g];
		if (!h->replicas[g])
			continue;
		conflict |=
		    used > t->gpus[g].replicas || (node->gpus_used & (1u << g));
		node->replicas_used[g] =
		    (uint8_t)(used > UINT8_MAX ? UINT8_MAX : used);
	}
	return conflict || (h->gpus & ft_node_replica_gpus(node));
}

/* A pod with no units to hold: its demand, of unknown placement. */
static void hold_demand(ft_holding_t *h, const ft_topology_t *t,
			const ft_demand_t *d)
{
	h->unknown_gpus = d->gpus;
	h->unknown_replicas = t ? demand_replicas(t, d) : 0;
	h->unknown_mig = d->mig_count;
	memcpy(h->unknown_mig_profile, d->mig_profile, FT_PROFILE_MAX);
	h->unknown_cpus = d->exclusive_cpus;
}

/* What a drifted pod's allocation named, resolved as the holding is. */
static int resolve_expected(ft_holding_t *h, const ft_topology_t *t,
			    const ft_pod_t *pod)
{
	ft_holding_t named;

	if (!ft_pod_drifted(pod))
		return 0;
	if (!(h->expected = calloc(1, sizeof(*h->expected))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	memset(&named, 0, sizeof(named));
	resolve_devices(&named, t, &pod->allocation);
	h->expected->gpus = named.gpus;
	memcpy(h->expected->mig, named.mig, sizeof(named.mig));
	memcpy(h->expected->replicas, named.replicas, sizeof(named.replicas));
	h->expected->cpus = pod->allocation.cpus;
	h->expected->unknown =
	    named.unknown_gpus + named.unknown_mig + named.unknown_replicas;
	return 0;
}

/*
 * On a MIG-strategy single node a pod's nvidia.com/gpu are instances, so
 * the usage of unknown placement is counted with the adapted demand. The
 * units held are the observed ones when the pod has them, else the
 * allocation's; the level is the allocation's either way.
 */
static int holding_init(ft_holding_t *h, const ft_topology_t *t,
			const ft_pod_t *pod, bool assumed)
{
	const ft_allocation_t *units = &pod->allocation;
	ft_demand_t d;
	int rc;

	memset(h, 0, sizeof(*h));
	if ((rc = dup_opt(&h->uid, pod->uid)) < 0 ||
	    (rc = dup_opt(&h->ns, pod->ns)) < 0 ||
	    (rc = dup_opt(&h->name, pod->name)) < 0)
		return rc;
	h->priority = pod->priority;
	h->start_time = pod->start_time;
	h->assumed = assumed;
	h->claim = pod->claim_holder;
	h->level = pod->has_allocation ? pod->allocation.level : FT_LEVEL_NODE;
	h->requested_cpu_millis = ft_demand_cpu_millis(&pod->demand);
	h->requested_memory_mib = pod->demand.memory_mib;
	ft_place_adapt(&d, t, &pod->demand);
	if ((h->observed = ft_pod_holds_observed(pod))) {
		h->observed_source = pod->observed->source;
		units = &pod->observed->units;
	} else if (!pod->has_allocation) {
		if (pod->devices_by_claims)
			d.gpus = d.ranks = d.mig_count = 0;
		hold_demand(h, t, &d);
		return 0;
	}
	/* DRA chose its devices: its claims hold them, not the pod. */
	if (!pod->devices_by_claims &&
	    (!pod->has_allocation || !pod->allocation.dra))
		resolve_devices(h, t, units);
	if (h->unknown_mig)
		memcpy(h->unknown_mig_profile, d.mig_profile, FT_PROFILE_MAX);
	resolve_cpus(h, t, pod, units);
	if (t)
		h->levels = ft_place_levels_of(
		    t,
		    h->gpus | ft_topology_mig_gpus(t, h->mig) |
			ft_replica_gpus(h->replicas),
		    h->numa_nodes);
	return resolve_expected(h, t, pod);
}

/* Fold one holding into the node's usage, counting double claims. */
static void charge(ft_node_t *node, const ft_holding_t *h)
{
	const ft_topology_t *t = node->topology;
	unsigned spread;

	if (charge_replicas(node, h))
		node->conflicts++;
	else if (node->gpus_used & h->gpus || node->mig_used[0] & h->mig[0] ||
		 node->mig_used[1] & h->mig[1] ||
		 ft_cpuset_intersects(&node->cpus_used, &h->cpus))
		node->conflicts++;
	node->gpus_used |= h->gpus;
	node->mig_used[0] |= h->mig[0];
	node->mig_used[1] |= h->mig[1];
	ft_cpuset_or(&node->cpus_used, &node->cpus_used, &h->cpus);
	node->unknown_gpus += h->unknown_gpus;
	node->unknown_replicas += h->unknown_replicas;
	node->unknown_cpus += h->unknown_cpus;
	node->requested_cpu_millis += h->requested_cpu_millis;
	node->requested_memory_mib += h->requested_memory_mib;
	spread = (unsigned)__builtin_popcount(h->numa_nodes);
	if (!t || !spread)
		return;
	for (unsigned n = 0; n < t->n_numa; n++)
		if (h->numa_nodes & (1u << n))
			node->numa_free_memory_mib[n] -=
			    h->memory_mib / spread >
				    node->numa_free_memory_mib[n]
				? node->numa_free_memory_mib[n]
				: h->memory_mib / spread;
}

static void derive_free(ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	ft_cpuset_t free_cpus;

	if (!t)
		return;
	for (unsigned n = 0; n < t->n_numa; n++) {
		ft_cpuset_andnot(&free_cpus, &t->numa[n].cpus,
				 &node->cpus_used);
		node->numa_free_cpus[n] = ft_cpuset_count(&free_cpus);
	}
}

static int node_alloc(ft_node_t **out, const char *name,
		      ft_topology_t *topology, const char *topology_error,
		      ft_node_labels_t *labels, unsigned n_pods)
{
	ft_node_t *node = calloc(1, sizeof(*node));

	*out = node;
	if (!node)
		return ft_error_set(FT_ENOMEM, "node %s: out of memory", name);
	atomic_init(&node->refcount, 1);
	node->frag = calloc(1, sizeof(*node->frag));
	node->filter_memo = ft_filter_memo_new();
	node->topology = ft_topology_ref(topology);
	node->labels = ft_node_labels_ref(labels);
	node->name = strdup(name);
	node->topology_error = topology_error ? strdup(topology_error) : NULL;
	node->holdings =
	    n_pods ? calloc(n_pods, sizeof(*node->holdings)) : NULL;
	if (!node->name || (topology_error && !node->topology_error) ||
	    (n_pods && !node->holdings) || !node->frag)
		return ft_error_set(FT_ENOMEM, "node %s: out of memory", name);
	atomic_flag_clear(&node->frag->busy);
	if (!topology)
		return 0;
	for (unsigned n = 0; n < topology->n_numa; n++)
		node->numa_free_memory_mib[n] = topology->numa[n].memory_mib;
	node->gpus_used = topology->reserved_gpus;
	node->cpus_used = topology->reserved_cpus;
	return 0;
}

/*
 * The units `a` and `b` both claim, in `c`. `replicas`: count replicas of
 * one GPU that both hold (only a replica overflow makes those a conflict).
 */
static bool overlap(ft_conflict_t *c, const ft_holding_t *a,
		    const ft_holding_t *b, bool replicas)
{
	uint16_t ra = ft_replica_gpus(a->replicas);
	uint16_t rb = ft_replica_gpus(b->replicas);

	c->gpus = (uint16_t)((a->gpus & (b->gpus | rb)) | (ra & b->gpus));
	if (replicas)
		c->gpus |= ra & rb;
	c->mig[0] = a->mig[0] & b->mig[0];
	c->mig[1] = a->mig[1] & b->mig[1];
	ft_cpuset_and(&c->cpus, &a->cpus, &b->cpus);
	return c->gpus || !ft_mig_mask_empty(c->mig) ||
	       !ft_cpuset_empty(&c->cpus);
}

/*
 * Holding `later` has just been counted as a conflict: pair it with the
 * first earlier holding it shares a unit with (a device or CPU first, then
 * replicas of one GPU) and mark both.
 */
static int pair_conflict(ft_node_t *node, unsigned later)
{
	ft_holding_t *h = &node->holdings[later];
	ft_conflict_t c, *grown;

	memset(&c, 0, sizeof(c));
	for (int replicas = 0; replicas < 2; replicas++)
		for (unsigned j = 0; j < later; j++) {
			if (!overlap(&c, &node->holdings[j], h, replicas))
				continue;
			if (!(grown = realloc(node->conflict_pairs,
					      (node->n_conflict_pairs + 1) *
						  sizeof(*grown))))
				return ft_error_set(FT_ENOMEM,
						    "node %s: out of memory",
						    node->name);
			c.earlier = (uint16_t)j;
			c.later = (uint16_t)later;
			node->conflict_pairs = grown;
			node->conflict_pairs[node->n_conflict_pairs++] = c;
			node->conflict_pods += !node->holdings[j].in_conflict;
			node->conflict_pods += !h->in_conflict;
			node->holdings[j].in_conflict = h->in_conflict = true;
			return 0;
		}
	return 0;
}

/* Charge holding `i` and pair it when it claims a unit already held. */
static int charge_holding(ft_node_t *node, unsigned i)
{
	unsigned before = node->conflicts;

	charge(node, &node->holdings[i]);
	node->drifted += node->holdings[i].expected != NULL;
	return node->conflicts > before ? pair_conflict(node, i) : 0;
}

int ft_node_build(ft_node_t **out, const char *name, ft_topology_t *topology,
		  const char *topology_error, ft_node_labels_t *labels,
		  const ft_pod_t *const *pods, const bool *assumed,
		  unsigned n_pods)
{
	ft_node_t *node = NULL;
	int rc;

	*out = NULL;
	if ((rc = node_alloc(&node, name, topology, topology_error, labels,
			     n_pods)) < 0)
		goto cleanup;
	for (unsigned i = 0; i < n_pods; i++) {
		ft_holding_t *h = &node->holdings[node->n_holdings];
		if (pods[i]->terminal)
			continue;
		node->n_holdings++;
		if ((rc = holding_init(h, topology, pods[i],
				       assumed && assumed[i])) < 0 ||
		    (rc = charge_holding(node, node->n_holdings - 1)) < 0)
			goto cleanup;
	}
	derive_free(node);
	*out = node;
	node = NULL;
cleanup:
	if (node)
		node_free(node);
	return rc;
}

/* The reference count alone comes before `name`; the copy starts there. */
_Static_assert(offsetof(ft_node_t, refcount) == 0 &&
		   offsetof(ft_node_t, name) ==
		       (sizeof(atomic_int) + _Alignof(char *) - 1) /
			   _Alignof(char *) * _Alignof(char *),
	       "ft_node_t: only refcount before name");

void ft_node_copy_value(ft_node_t *out, const ft_node_t *node)
{
	size_t skip = offsetof(ft_node_t, name);

	memcpy((char *)out + skip, (const char *)node + skip,
	       sizeof(*out) - skip);
	atomic_init(&out->refcount, 0);
	out->frag = NULL;
	out->filter_memo = NULL;
}

void ft_node_preview(ft_node_t *out, const ft_node_t *node,
		     const ft_holding_t *h)
{
	ft_node_copy_value(out, node);
	charge(out, h);
	derive_free(out);
}

const ft_holding_t *ft_node_find_holding(const ft_node_t *node, const char *uid)
{
	for (unsigned i = 0; i < node->n_holdings; i++)
		if (strcmp(node->holdings[i].uid, uid) == 0)
			return &node->holdings[i];
	return NULL;
}

uint16_t ft_node_free_gpus(const ft_node_t *node)
{
	if (!node->topology)
		return 0;
	return (uint16_t)(node->topology->whole_gpus & ~node->gpus_used &
			  ~ft_node_replica_gpus(node));
}

uint64_t ft_node_free_cpu_millis(const ft_node_t *node)
{
	const ft_topology_t *t = node->topology;
	uint64_t cpus;

	if (!t)
		return 0;
	cpus = (uint64_t)(t->n_cpus - ft_cpuset_count(&t->reserved_cpus)) *
	       FT_MILLI_CPU;
	return cpus > node->requested_cpu_millis
		   ? cpus - node->requested_cpu_millis
		   : 0;
}

bool ft_node_free_memory_mib(const ft_node_t *node, uint64_t *out)
{
	const ft_topology_t *t = node->topology;
	uint64_t memory = 0;

	*out = 0;
	if (!t || t->numa_memory_unknown)
		return false;
	for (unsigned n = 0; n < t->n_numa; n++)
		memory += t->numa[n].memory_mib;
	*out = memory > node->requested_memory_mib
		   ? memory - node->requested_memory_mib
		   : 0;
	return true;
}

size_t ft_node_footprint(const ft_node_t *node)
{
	size_t bytes = sizeof(*node) + strlen(node->name) + 1 +
		       node->n_holdings * sizeof(*node->holdings) +
		       (node->frag ? sizeof(*node->frag) : 0) +
		       (node->filter_memo ? ft_filter_memo_size() : 0);

	for (unsigned i = 0; i < node->n_holdings; i++)
		bytes +=
		    strlen(node->holdings[i].uid) +
		    strlen(node->holdings[i].ns) +
		    strlen(node->holdings[i].name) + 3 +
		    (node->holdings[i].expected ? sizeof(ft_expected_units_t)
						: 0);
	if (node->topology)
		bytes += ft_topology_footprint(node->topology);
	return bytes;
}

static int by_name(const void *a, const void *b)
{
	const ft_node_t *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/*
 * Node names hashed to their positions. It owns copies of the names, so that
 * snapshots that replace nodes of the same names can share it while the
 * nodes it was built from are freed.
 */
typedef struct {
	UT_hash_handle hh;
	unsigned position;
	char *name;
} name_entry_t;

struct ft_name_index {
	atomic_int refcount;
	name_entry_t *head;
	name_entry_t *entries; /* one block, n_nodes long */
	char *names;	       /* the names, NUL-separated, one block */
};

static void index_unref(ft_name_index_t *ix)
{
	if (!ix || atomic_fetch_sub(&ix->refcount, 1) != 1)
		return;
	HASH_CLEAR(hh, ix->head);
	free(ix->entries);
	free(ix->names);
	free(ix);
}

static ft_name_index_t *index_ref(ft_name_index_t *ix)
{
	if (ix)
		atomic_fetch_add(&ix->refcount, 1);
	return ix;
}

static int index_alloc(ft_name_index_t **out, const ft_snapshot_t *s)
{
	ft_name_index_t *ix = calloc(1, sizeof(*ix));
	size_t bytes = 0;

	*out = ix;
	if (!ix)
		return ft_error_set(FT_ENOMEM, "snapshot: out of memory");
	atomic_init(&ix->refcount, 1);
	for (unsigned i = 0; i < s->n_nodes; i++)
		bytes += strlen(s->nodes[i]->name) + 1;
	if (!(ix->entries = calloc(s->n_nodes, sizeof(*ix->entries))) ||
	    !(ix->names = malloc(bytes)))
		return ft_error_set(FT_ENOMEM, "snapshot: out of memory");
	return 0;
}

/* The index of a snapshot with nodes (sorted, no duplicate names). */
static int index_build(ft_name_index_t **out, const ft_snapshot_t *s)
{
	ft_name_index_t *ix = NULL;
	char *at;
	int rc;

	if ((rc = index_alloc(&ix, s)) < 0)
		goto cleanup;
	at = ix->names;
	for (unsigned i = 0; i < s->n_nodes; i++) {
		name_entry_t *e = &ix->entries[i];
		size_t len = strlen(s->nodes[i]->name);
		e->position = i;
		e->name = memcpy(at, s->nodes[i]->name, len + 1);
		at += len + 1;
		HASH_ADD_KEYPTR(hh, ix->head, e->name, len, e);
		if (HASH_COUNT(ix->head) != i + 1) {
			rc = ft_error_set(FT_ENOMEM, "snapshot: out of memory");
			goto cleanup;
		}
	}
	*out = ix;
	ix = NULL;
cleanup:
	index_unref(ix);
	return rc;
}

struct ft_snapshot_chunk {
	atomic_int refcount;
	unsigned n;
	ft_node_t *nodes[FT_SNAPSHOT_CHUNK]; /* each holds a reference */
};

/* A chunk of the `n` nodes at `nodes`, each referenced. */
static ft_snapshot_chunk_t *chunk_new(ft_node_t *const *nodes, unsigned n)
{
	ft_snapshot_chunk_t *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	atomic_init(&c->refcount, 1);
	c->n = n;
	for (unsigned i = 0; i < n; i++)
		c->nodes[i] = ft_node_ref(nodes[i]);
	return c;
}

static ft_snapshot_chunk_t *chunk_ref(ft_snapshot_chunk_t *c)
{
	atomic_fetch_add(&c->refcount, 1);
	return c;
}

static void chunk_unref(ft_snapshot_chunk_t *c)
{
	if (!c || atomic_fetch_sub(&c->refcount, 1) != 1)
		return;
	for (unsigned i = 0; i < c->n; i++)
		ft_node_unref(c->nodes[i]);
	free(c);
}

static unsigned chunks_for(unsigned n)
{
	return (n + FT_SNAPSHOT_CHUNK - 1) / FT_SNAPSHOT_CHUNK;
}

/* The arrays of a snapshot of `n` nodes, unfilled. */
static int snapshot_alloc(ft_snapshot_t **out, unsigned n, uint64_t generation)
{
	ft_snapshot_t *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return ft_error_set(FT_ENOMEM, "snapshot: out of memory");
	atomic_init(&s->refcount, 1);
	s->generation = generation;
	if (n && (!(s->nodes = malloc(n * sizeof(*s->nodes))) ||
		  !(s->chunks = calloc(chunks_for(n), sizeof(*s->chunks)))))
		return ft_error_set(FT_ENOMEM, "snapshot: out of memory");
	return 0;
}

int ft_snapshot_new(ft_snapshot_t **out, ft_node_t *const *nodes, unsigned n,
		    uint64_t generation)
{
	ft_snapshot_t *s = NULL;
	int rc;

	*out = NULL;
	if ((rc = snapshot_alloc(&s, n, generation)) < 0)
		goto cleanup;
	if (n) {
		memcpy(s->nodes, nodes, n * sizeof(*s->nodes));
		qsort(s->nodes, n, sizeof(*s->nodes), by_name);
	}
	for (unsigned at = 0; at < n; at += FT_SNAPSHOT_CHUNK) {
		unsigned len =
		    n - at < FT_SNAPSHOT_CHUNK ? n - at : FT_SNAPSHOT_CHUNK;
		if (!(s->chunks[s->n_chunks] = chunk_new(s->nodes + at, len))) {
			rc = ft_error_set(FT_ENOMEM, "snapshot: out of memory");
			goto cleanup;
		}
		s->n_chunks++;
	}
	s->n_nodes = n;
	for (unsigned i = 1; i < n; i++) {
		if (strcmp(s->nodes[i - 1]->name, s->nodes[i]->name) == 0) {
			rc = ft_error_set(FT_EINVAL, "snapshot: node %s twice",
					  s->nodes[i]->name);
			goto cleanup;
		}
	}
	if (n && (rc = index_build(&s->index, s)) < 0)
		goto cleanup;
	*out = s;
	s = NULL;
cleanup:
	ft_snapshot_unref(s);
	return rc;
}

ft_snapshot_t *ft_snapshot_ref(ft_snapshot_t *s)
{
	if (s)
		atomic_fetch_add(&s->refcount, 1);
	return s;
}

void ft_snapshot_unref(ft_snapshot_t *s)
{
	if (!s || atomic_fetch_sub(&s->refcount, 1) != 1)
		return;
	for (unsigned i = 0; i < s->n_chunks; i++)
		chunk_unref(s->chunks[i]);
	index_unref(s->index);
	free(s->chunks);
	free(s->nodes);
	free(s);
}

static int find_index(const ft_snapshot_t *s, const char *name)
{
	name_entry_t *e = NULL;

	if (!s->index)
		return -1;
	HASH_FIND_STR(s->index->head, name, e);
	return e ? (int)e->position : -1;
}

const ft_node_t *ft_snapshot_find(const ft_snapshot_t *s, const char *name)
{
	int at = s ? find_index(s, name) : -1;

	return at < 0 ? NULL : s->nodes[at];
}

/*
 * Put `node` at position `at` of `s`, in a chunk of its own: the chunk is
 * copied first while another snapshot shares it.
 */
static int replace_at(ft_snapshot_t *s, const ft_snapshot_t *base, unsigned at,
		      ft_node_t *node)
{
	unsigned c = at / FT_SNAPSHOT_CHUNK, i = at % FT_SNAPSHOT_CHUNK;
	ft_snapshot_chunk_t *chunk = s->chunks[c];

	if (chunk == base->chunks[c]) {
		if (!(chunk = chunk_new(chunk->nodes, chunk->n)))
			return ft_error_set(FT_ENOMEM,
					    "snapshot: out of memory");
		chunk_unref(s->chunks[c]);
		s->chunks[c] = chunk;
	}
	ft_node_unref(chunk->nodes[i]);
	chunk->nodes[i] = ft_node_ref(node);
	s->nodes[at] = node;
	return 0;
}

int ft_snapshot_with(ft_snapshot_t **out, const ft_snapshot_t *base,
		     ft_node_t *const *replacements, unsigned n,
		     uint64_t generation)
{
	ft_snapshot_t *s = NULL;
	int rc;

	*out = NULL;
	if ((rc = snapshot_alloc(&s, base->n_nodes, generation)) < 0)
		goto cleanup;
	if (base->n_nodes)
		memcpy(s->nodes, base->nodes,
		       base->n_nodes * sizeof(*s->nodes));
	s->n_nodes = base->n_nodes;
	for (unsigned c = 0; c < base->n_chunks; c++)
		s->chunks[s->n_chunks++] = chunk_ref(base->chunks[c]);
	s->index = index_ref(base->index);
	for (unsigned i = 0; i < n && rc == 0; i++) {
		int at = find_index(s, replacements[i]->name);
		rc = at < 0
			 ? ft_error_set(FT_ENOTFOUND,
					"snapshot: node %s not in base",
					replacements[i]->name)
			 : replace_at(s, base, (unsigned)at, replacements[i]);
	}
	if (rc < 0)
		goto cleanup;
	*out = s;
	s = NULL;
cleanup:
	ft_snapshot_unref(s);
	return rc;
}
