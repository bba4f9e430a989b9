/*
 * The DRA side of the model: which ResourceSlices of a pool are current,
 * how a node's GPU and MIG devices land on its topology, and what a claim
 * holds there (dra.h). Every device found in a slice but not in the
 * topology, or published with a PCI bus id, NUMA node or PCIe root that
 * contradicts it, makes the node's view carry an error rather than a guess.
 */
#include <flextopo/dra.h>
#include <flextopo/error.h>

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

static void device_dispose(ft_dra_device_t *d)
{
	free(d->name);
	free(d->uuid);
	free(d->parent_uuid);
	free(d->profile);
	free(d->pci_bus_id);
	free(d->pcie_root);
}

void ft_dra_slice_dispose(ft_dra_slice_t *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->n_devices; i++)
		device_dispose(&s->devices[i]);
	free(s->devices);
	free(s->name);
	free(s->driver);
	free(s->pool);
	free(s->node);
	memset(s, 0, sizeof(*s));
}

void ft_dra_class_dispose(ft_dra_class_t *c)
{
	if (!c)
		return;
	free(c->name);
	free(c->extended_resource);
	memset(c, 0, sizeof(*c));
}

/* `text` without blanks, double quotes read as single ones; NULL: ENOMEM. */
static char *squeeze(const char *text)
{
	char *out = malloc(strlen(text) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *text; text++)
		if (*text != ' ' && *text != '\t' && *text != '\n' &&
		    *text != '\r')
			*o++ = *text == '"' ? '\'' : *text;
	*o = '\0';
	return out;
}

/* Whether squeezed `e` holds `prefix` + `value` + "'". */
static bool compares(const char *e, const char *prefix, const char *value)
{
	size_t np = strlen(prefix), nv = strlen(value);

	for (const char *at = strstr(e, prefix); at;
	     at = strstr(at + 1, prefix))
		if (!strncmp(at + np, value, nv) && at[np + nv] == '\'')
			return true;
	return false;
}

ft_dra_kind_t ft_dra_class_kind(const char *const *expressions, unsigned n,
				const char *driver)
{
	bool ours = false, gpu = false, mig = false, disjunction = false;
	char type_prefix[160];

	snprintf(type_prefix, sizeof(type_prefix),
		 "device.attributes['%s'].type=='", driver);
	for (unsigned i = 0; i < n; i++) {
		char *e = expressions[i] ? squeeze(expressions[i]) : NULL;
		if (!e)
			continue;
		ours |= compares(e, "device.driver=='", driver);
		gpu |= compares(e, type_prefix, "gpu");
		mig |= compares(e, type_prefix, "mig");
		disjunction |= strstr(e, "||") != NULL;
		free(e);
	}
	if (!ours || disjunction || gpu == mig)
		return FT_DRA_OTHER;
	return gpu ? FT_DRA_GPU : FT_DRA_MIG;
}

void ft_dra_claim_dispose(ft_dra_claim_t *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n_requests; i++) {
		free(c->requests[i].name);
		free(c->requests[i].device_class);
	}
	for (unsigned i = 0; i < c->n_results; i++) {
		free(c->results[i].request);
		free(c->results[i].driver);
		free(c->results[i].pool);
		free(c->results[i].device);
	}
	for (unsigned i = 0; i < c->n_consumers; i++) {
		free(c->consumers[i].uid);
		free(c->consumers[i].name);
	}
	free(c->requests);
	free(c->results);
	free(c->consumers);
	free(c->uid);
	free(c->ns);
	free(c->name);
	free(c->owner_pod);
	free(c->node);
	memset(c, 0, sizeof(*c));
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static bool same_pool(const ft_dra_slice_t *a, const ft_dra_slice_t *b)
{
	return same(a->driver, b->driver) && same(a->pool, b->pool);
}

/* Equal strings, NULL equal to NULL only. */
static bool equal_opt(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_device(const ft_dra_device_t *a, const ft_dra_device_t *b)
{
	return equal_opt(a->name, b->name) && a->kind == b->kind &&
	       equal_opt(a->uuid, b->uuid) &&
	       equal_opt(a->parent_uuid, b->parent_uuid) &&
	       equal_opt(a->profile, b->profile) &&
	       equal_opt(a->pci_bus_id, b->pci_bus_id) &&
	       equal_opt(a->pcie_root, b->pcie_root) &&
	       a->numa_node == b->numa_node &&
	       a->slice_start == b->slice_start && a->slices == b->slices &&
	       a->multiple == b->multiple && a->shares == b->shares;
}

bool ft_dra_slice_equal(const ft_dra_slice_t *a, const ft_dra_slice_t *b)
{
	bool eq =
	    equal_opt(a->name, b->name) && equal_opt(a->driver, b->driver) &&
	    equal_opt(a->pool, b->pool) && a->generation == b->generation &&
	    a->slice_count == b->slice_count && equal_opt(a->node, b->node) &&
	    a->n_devices == b->n_devices;

	for (unsigned i = 0; eq && i < a->n_devices; i++)
		eq = same_device(&a->devices[i], &b->devices[i]);
	return eq;
}

static bool same_result(const ft_dra_result_t *a, const ft_dra_result_t *b)
{
	return equal_opt(a->request, b->request) &&
	       equal_opt(a->driver, b->driver) && equal_opt(a->pool, b->pool) &&
	       equal_opt(a->device, b->device) &&
	       a->admin_access == b->admin_access && a->shares == b->shares;
}

bool ft_dra_claim_same_holding(const ft_dra_claim_t *a, const ft_dra_claim_t *b)
{
	bool eq = a->allocated == b->allocated && equal_opt(a->node, b->node) &&
		  equal_opt(a->uid, b->uid) && equal_opt(a->ns, b->ns) &&
		  equal_opt(a->name, b->name) && a->n_results == b->n_results;

	for (unsigned i = 0; eq && i < a->n_results; i++)
		eq = same_result(&a->results[i], &b->results[i]);
	return eq;
}

/*
 * As GatherPools does: the newest generation of the pool wins, and counts
 * only once all its resourceSliceCount slices are there.
 */
bool ft_dra_slice_current(const ft_dra_slice_t *s,
			  const ft_dra_slice_t *const *slices, unsigned n)
{
	int64_t seen = 0;

	for (unsigned i = 0; i < n; i++) {
		if (!same_pool(s, slices[i]))
			continue;
		if (slices[i]->generation > s->generation)
			return false;
		seen += slices[i]->generation == s->generation;
	}
	return seen == s->slice_count;
}

/* ---- matching a node's devices to its topology --------------------------- */

static void view_error(ft_dra_view_t *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The first disagreement is the node's error. */
static void view_error(ft_dra_view_t *v, const char *fmt, ...)
{
	va_list ap;

	if (v->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(v->error, sizeof(v->error), fmt, ap);
	va_end(ap);
}

/* The NUMA id of GPU position `g`, or FT_DRA_NO_NUMA when unknown. */
static int gpu_numa_id(const ft_topology_t *t, int g)
{
	unsigned numa = t->gpus[g].numa;

	return numa < t->n_numa ? t->numa[numa].id : FT_DRA_NO_NUMA;
}

static void check_numa(ft_dra_view_t *v, const ft_topology_t *t,
		       const ft_dra_device_t *d, int g)
{
	int id = gpu_numa_id(t, g);

	if (d->numa_node == FT_DRA_NO_NUMA || id == FT_DRA_NO_NUMA ||
	    d->numa_node == id)
		return;
	view_error(v,
		   "device %s: " FT_DRA_ATTR_NUMA_NODE
		   " %d, the topology annotation puts its GPU in NUMA node %d",
		   d->name, d->numa_node, id);
}

static void check_bus(ft_dra_view_t *v, const ft_topology_t *t,
		      const ft_dra_device_t *d, int g)
{
	const char *want = t->gpus[g].pci_bus_id;

	if (!d->pci_bus_id || !want || !want[0] ||
	    strcasecmp(d->pci_bus_id, want) == 0)
		return;
	view_error(v,
		   "device %s: " FT_DRA_ATTR_PCI_BUS_ID
		   " %s, the topology annotation says %s",
		   d->name, d->pci_bus_id, want);
}

/* MIG instance position on GPU `g` at memory slice `start`, or -1. */
static int find_instance(const ft_topology_t *t, int g, int start)
{
	for (unsigned i = 0; i < t->n_mig; i++)
		if (t->mig[i].gpu == (unsigned)g &&
		    t->mig[i].start == (unsigned)start)
			return (int)i;
	return -1;
}

static void match_mig(ft_dra_view_t *v, const ft_topology_t *t,
		      ft_dra_unit_t *u)
{
	const ft_dra_device_t *d = u->device;
	int by_uuid = d->uuid ? ft_topology_find_mig_uuid(t, d->uuid) : -1;

	u->gpu =
	    d->parent_uuid ? ft_topology_find_gpu_uuid(t, d->parent_uuid) : -1;
	if (u->gpu < 0) {
		view_error(
		    v,
		    "device %s: parentUUID %s is no GPU of the topology annotation",
		    d->name, d->parent_uuid ? d->parent_uuid : "(none)");
		return;
	}
	u->mig = d->slice_start >= 0 ? find_instance(t, u->gpu, d->slice_start)
				     : by_uuid;
	if (u->mig < 0 || (by_uuid >= 0 && by_uuid != u->mig)) {
		view_error(
		    v,
		    "device %s: MIG device %s is no instance the topology annotation lists on GPU %s",
		    d->name, d->uuid ? d->uuid : "(no uuid)",
		    t->gpus[u->gpu].uuid);
		u->mig = -1;
	}
}

static void match_gpu(ft_dra_view_t *v, const ft_topology_t *t,
		      ft_dra_unit_t *u)
{
	const ft_dra_device_t *d = u->device;

	u->gpu = d->uuid ? ft_topology_find_gpu_uuid(t, d->uuid) : -1;
	if (u->gpu < 0) {
		view_error(
		    v,
		    "device %s: uuid %s is no GPU of the topology annotation",
		    d->name, d->uuid ? d->uuid : "(none)");
		return;
	}
	check_numa(v, t, d, u->gpu);
	check_bus(v, t, d, u->gpu);
}

/*
 * GPUs under one PCIe switch sit under one root complex, so they share
 * resource.kubernetes.io/pcieRoot; two roots under one switch contradict
 * the topology.
 */
static void check_roots(ft_dra_view_t *v, const ft_topology_t *t)
{
	for (unsigned i = 0; i < v->n_units; i++)
		for (unsigned j = i + 1; j < v->n_units; j++) {
			const ft_dra_unit_t *a = &v->units[i],
					    *b = &v->units[j];
			if (a->kind != FT_DRA_GPU || b->kind != FT_DRA_GPU ||
			    a->gpu < 0 || b->gpu < 0 || !a->device->pcie_root ||
			    !b->device->pcie_root ||
			    t->gpus[a->gpu].pcie_switch == FT_NONE ||
			    t->gpus[a->gpu].pcie_switch !=
				t->gpus[b->gpu].pcie_switch ||
			    same(a->device->pcie_root, b->device->pcie_root))
				continue;
			view_error(
			    v,
			    "devices %s and %s: one PCIe switch in the topology annotation, PCIe roots %s and %s",
			    a->device->name, b->device->name,
			    a->device->pcie_root, b->device->pcie_root);
		}
}

static void add_unit(ft_dra_view_t *v, const ft_topology_t *t,
		     const ft_dra_slice_t *s, const ft_dra_device_t *d)
{
	ft_dra_unit_t *u;

	if (d->kind == FT_DRA_OTHER || v->n_units == FT_DRA_UNITS_MAX)
		return;
	u = &v->units[v->n_units++];
	*u = (ft_dra_unit_t){s, d, d->kind, -1, -1};
	if (!t) {
		view_error(v, "device %s: the node has no topology", d->name);
		return;
	}
	if (d->kind == FT_DRA_GPU)
		match_gpu(v, t, u);
	else
		match_mig(v, t, u);
}

void ft_dra_view_build(ft_dra_view_t *out, const char *node,
		       const ft_topology_t *t,
		       const ft_dra_slice_t *const *slices, unsigned n,
		       const char *driver, uint64_t gpu_allocatable)
{
	memset(out, 0, sizeof(*out));
	out->topology = t;
	for (unsigned i = 0; i < n; i++) {
		const ft_dra_slice_t *s = slices[i];
		if (!same(s->node, node) || !same(s->driver, driver) ||
		    !ft_dra_slice_current(s, slices, n))
			continue;
		for (unsigned k = 0; k < s->n_devices; k++)
			add_unit(out, t, s, &s->devices[k]);
	}
	if (t)
		check_roots(out, t);
	out->dra = out->n_units > 0;
	out->double_published = out->dra && gpu_allocatable > 0;
}

const ft_dra_unit_t *ft_dra_view_find(const ft_dra_view_t *view,
				      const char *driver, const char *pool,
				      const char *device)
{
	for (unsigned i = 0; i < view->n_units; i++) {
		const ft_dra_unit_t *u = &view->units[i];
		if (same(u->slice->driver, driver) &&
		    same(u->slice->pool, pool) && same(u->device->name, device))
			return u;
	}
	return NULL;
}

/* FNV-1a over `len` bytes, from `h`. */
static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* A string, NULL distinct from "" (the NUL is hashed too). */
static uint64_t fnv_str(uint64_t h, const char *s)
{
	return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "\xff", 1);
}

uint64_t ft_dra_view_fingerprint(const ft_dra_view_t *v)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	h = fnv(h, &v->topology, sizeof(v->topology));
	for (unsigned i = 0; i < v->n_units; i++) {
		const ft_dra_unit_t *u = &v->units[i];
		int pos[3] = {(int)u->kind, u->gpu, u->mig};
		uint32_t shares[2] = {u->device->multiple, u->device->shares};
		h = fnv(h, pos, sizeof(pos));
		h = fnv(h, shares, sizeof(shares));
		h = fnv_str(h, u->slice->driver);
		h = fnv_str(h, u->slice->pool);
		h = fnv_str(h, u->device->name);
		h = fnv_str(h, u->device->uuid);
	}
	return h;
}

/* ---- what a claim holds ---------------------------------------------------
 */

static int add_uuid(char **list, unsigned *n, unsigned max, const char *uuid)
{
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(list[i], uuid) == 0)
			return 0;
	if (*n == max)
		return 0;
	if (!(list[*n] = strdup(uuid)))
		return ft_error_set(FT_ENOMEM, "claim units: out of memory");
	(*n)++;
	return 0;
}

/* A share of a shared GPU: replicas when the topology shares the GPU. */
static int add_share(ft_allocation_t *out, const ft_topology_t *t,
		     const ft_dra_unit_t *u, uint32_t shares)
{
	const char *uuid = t->gpus[u->gpu].uuid;
	unsigned k = 0;

	while (k < out->n_replicas && strcmp(out->replica_gpus[k], uuid) != 0)
		k++;
	if (k == out->n_replicas) {
		int rc = add_uuid(out->replica_gpus, &out->n_replicas,
				  FT_GPU_MAX, uuid);
		if (rc < 0 || k == out->n_replicas)
			return rc;
		out->replica_counts[k] = 0;
	}
	shares += out->replica_counts[k];
	out->replica_counts[k] =
	    (uint8_t)(shares > UINT8_MAX ? UINT8_MAX : shares);
	return 0;
}

static int add_result(ft_allocation_t *out, const ft_topology_t *t,
		      const ft_dra_unit_t *u, const ft_dra_result_t *r)
{
	if (u->kind == FT_DRA_MIG)
		return add_uuid(out->mig_uuids, &out->n_mig, FT_ALLOC_MIG_MAX,
				t->mig[u->mig].uuid);
	if (u->device->multiple && t->gpus[u->gpu].replicas)
		return add_share(out, t, u, r->shares ? r->shares : 1);
	return add_uuid(out->gpu_uuids, &out->n_gpus, FT_GPU_MAX,
			t->gpus[u->gpu].uuid);
}

/*
 * A device of the GPU driver that the view does not place (its slice is
 * missing or incomplete, or the topology lacks it) is still held: as a GPU
 * of unknown placement, named by a uuid no topology has, so that the node
 * charges it node-wide and never hands it out.
 */
static int add_unplaced(ft_allocation_t *out, const ft_dra_result_t *r)
{
	char name[512];

	snprintf(name, sizeof(name), "dra:%s/%s/%s", r->driver, r->pool,
		 r->device);
	return add_uuid(out->gpu_uuids, &out->n_gpus, FT_GPU_MAX, name);
}

int ft_dra_claim_units(ft_allocation_t *out, unsigned *unmatched,
		       const ft_dra_claim_t *c, const ft_dra_view_t *view,
		       const char *driver)
{
	unsigned missed = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->level = FT_LEVEL_NODE;
	for (unsigned i = 0; rc == 0 && i < c->n_results; i++) {
		const ft_dra_result_t *r = &c->results[i];
		const ft_dra_unit_t *u;
		if (r->admin_access || !same(r->driver, driver))
			continue;
		u = ft_dra_view_find(view, r->driver, r->pool, r->device);
		if (!u || u->gpu < 0 || (u->kind == FT_DRA_MIG && u->mig < 0)) {
			missed++;
			rc = add_unplaced(out, r);
			continue;
		}
		rc = add_result(out, view->topology, u, r);
	}
	if (unmatched)
		*unmatched = missed;
	if (rc < 0)
		ft_allocation_dispose(out);
	return rc;
}

/* The uuid of unit `u`: its MIG device's, or its GPU's. */
static const char *unit_uuid(const ft_dra_view_t *view, const ft_dra_unit_t *u)
{
	return u->kind == FT_DRA_MIG ? view->topology->mig[u->mig].uuid
				     : view->topology->gpus[u->gpu].uuid;
}

static void add_ref(ft_dra_device_ref_t *out, const ft_dra_claim_t *c,
		    const ft_dra_result_t *r, const char *uuid)
{
	*out = (ft_dra_device_ref_t){c->ns,	c->name, c->uid,    r->request,
				     r->driver, r->pool, r->device, uuid};
}

unsigned ft_dra_pod_devices(ft_dra_device_ref_t *out, unsigned cap,
			    uint16_t *gpus, ft_mig_mask_t mig,
			    unsigned *unmatched,
			    const ft_dra_claim_t *const *claims, unsigned n,
			    const ft_dra_view_t *view)
{
	unsigned count = 0, missed = 0;

	*gpus = 0;
	mig[0] = mig[1] = 0;
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; i < claims[k]->n_results; i++) {
			const ft_dra_result_t *r = &claims[k]->results[i];
			const ft_dra_unit_t *u;
			if (r->admin_access)
				continue;
			u = ft_dra_view_find(view, r->driver, r->pool,
					     r->device);
			if (!u || u->gpu < 0 ||
			    (u->kind == FT_DRA_MIG && u->mig < 0)) {
				missed++;
				continue;
			}
			if (u->kind == FT_DRA_MIG)
				ft_mig_mask_set(mig, (unsigned)u->mig);
			else
				*gpus |= (uint16_t)(1u << u->gpu);
			if (count < cap)
				add_ref(&out[count++], claims[k], r,
					unit_uuid(view, u));
		}
	if (unmatched)
		*unmatched = missed;
	return count;
}
