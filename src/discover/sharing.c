/*
 * The device plugin's sharing configuration (sharing.h) applied to the
 * discovered node before ft_topology_finish(): the GPUs each nvidia.com/gpu
 * resource of the file covers get its replicas, and a renamed resource
 * becomes the topology's sharedResource.
 *
 * Which GPUs a resource covers follows the plugin (k8s-device-plugin
 * README, "Shared Access to GPUs" and "MIG strategies"): "all" is every GPU
 * of the resource and a count N the first N by index. A MIG-enabled GPU is
 * no nvidia.com/gpu device under the mixed strategy, so "all" and counts
 * pass over it with a warning; naming one in a devices list is an error,
 * and so is "all" when every GPU is MIG-enabled (under the single strategy
 * nvidia.com/gpu means the MIG instances). Replicas of MIG instances
 * (nvidia.com/mig-* resources, MIG entries of a devices list) have no place
 * in the annotation and are left out with a warning. The annotation has one
 * sharedResource, so every resource must give its replicas the same name,
 * and a GPU may be shared by one resource entry only.
 */
#include "probe.h"

#include <flextopo/error.h>
#include <flextopo/sharing.h>
#include <flextopo/topology.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define GPU_RESOURCE "nvidia.com/gpu"
#define NAME_LEN     320
#define NOT_SHARED   (-1)
#define IGNORED_FIELD                                                          \
	"released NVIDIA device plugins (v0.20 and earlier) ignore this "      \
	"field and "

typedef struct share {
	const probe_t *p;
	const ft_sharing_t *s;
	ft_topology_t *t;
	unsigned n_by_index;
	unsigned by_index[FT_GPU_MAX]; /* GPU positions in index order */
	int owner[FT_GPU_MAX];	       /* resource sharing each, NOT_SHARED */
	int named_by;		       /* first resource that shared a GPU */
	const char *name;	       /* its replicas' name; NULL: the GPU's */
	char name_buf[NAME_LEN];       /* "<name>.shared" */
} share_t;

/* "file:line: sharing.mps.resources[i]field" (no line when unknown). */
static void where(char *out, size_t size, const share_t *sh, unsigned line,
		  unsigned i, const char *field)
{
	char at[32] = "";

	if (line)
		snprintf(at, sizeof(at), ":%u", line);
	snprintf(out, size, "%s%s: sharing.%s.resources[%u]%s", sh->s->file, at,
		 ft_sharing_kind_name(sh->s->kind), i, field);
}

__attribute__((format(printf, 5, 6))) static int fail(const share_t *sh,
						      unsigned line, unsigned i,
						      const char *field,
						      const char *fmt, ...)
{
	char at[320];
	va_list ap;
	int rc;

	where(at, sizeof(at), sh, line, i, field);
	va_start(ap, fmt);
	rc = ft_error_vset_at(FT_EINVAL, at, fmt, ap);
	va_end(ap);
	return rc;
}

static void warn_at(const share_t *sh, unsigned line, unsigned i,
		    const char *field, const char *what)
{
	char at[320];

	where(at, sizeof(at), sh, line, i, field);
	probe_warn(sh->p, "%s: %s", at, what);
}

/* Insertion sort by GPU index: at most FT_GPU_MAX entries. */
static void sort_by_index(share_t *sh)
{
	const ft_topology_t *t = sh->t;
	unsigned k;

	for (unsigned pos = 0; pos < t->n_gpus; pos++) {
		for (k = sh->n_by_index++;
		     k > 0 &&
		     t->gpus[sh->by_index[k - 1]].index > t->gpus[pos].index;
		     k--)
			sh->by_index[k] = sh->by_index[k - 1];
		sh->by_index[k] = pos;
		sh->owner[pos] = NOT_SHARED;
	}
}

/* GPU position `pos` gets the replicas of resource i. */
static int take(share_t *sh, unsigned i, unsigned pos, unsigned line,
		const char *field)
{
	const ft_gpu_t *g = &sh->t->gpus[pos];

	if (sh->owner[pos] == (int)i)
		return fail(sh, line, i, field, "GPU %d (%s) is named twice",
			    g->index, g->uuid);
	if (sh->owner[pos] != NOT_SHARED)
		return fail(sh, line, i, field,
			    "GPU %d (%s) is shared by resources[%d] already",
			    g->index, g->uuid, sh->owner[pos]);
	if (g->mig_enabled)
		return fail(
		    sh, line, i, field,
		    "GPU %d (%s) is MIG-enabled; a MIG-enabled GPU cannot take replicas",
		    g->index, g->uuid);
	sh->owner[pos] = (int)i;
	return ft_topology_share_gpu(sh->t, pos, sh->s->resources[i].replicas);
}

/* "all" or a count: the first `want` GPUs by index that are not MIG. */
static int take_first(share_t *sh, unsigned i, unsigned want)
{
	const ft_sharing_resource_t *r = &sh->s->resources[i];
	unsigned line = r->devices_line ? r->devices_line : r->line;
	unsigned taken = 0, mig = 0;
	char what[160];
	int rc;

	for (unsigned k = 0; k < sh->n_by_index && taken < want; k++) {
		const ft_gpu_t *g = &sh->t->gpus[sh->by_index[k]];
		if (g->mig_enabled) {
			snprintf(what, sizeof(what),
				 "GPU %d is MIG-enabled, no " GPU_RESOURCE
				 " device: left unshared",
				 g->index);
			warn_at(sh, r->line, i, "", what);
			mig++;
			continue;
		}
		if ((rc = take(sh, i, sh->by_index[k], line, ".devices")) < 0)
			return rc;
		taken++;
	}
	if (r->select == FT_SHARING_COUNT && taken < want)
		return fail(
		    sh, line, i, ".devices",
		    "%u GPUs asked for, this node has %u that are not MIG-enabled",
		    want, taken);
	if (taken == 0 && mig > 0)
		return fail(
		    sh, r->line, i, "",
		    "every GPU of this node is MIG-enabled; a MIG-enabled GPU cannot take replicas");
	return 0;
}

static int find_device(share_t *sh, unsigned i, unsigned k)
{
	const ft_sharing_device_t *d = &sh->s->resources[i].devices[k];
	char field[32];
	int pos;

	snprintf(field, sizeof(field), ".devices[%u]", k);
	if (d->ref == FT_SHARING_MIG) {
		warn_at(
		    sh, d->line, i, field,
		    "a MIG device: replicas of MIG instances are not in the annotation; left out");
		return 0;
	}
	pos = d->ref == FT_SHARING_GPU_INDEX
		  ? ft_topology_find_gpu_index(sh->t, d->index)
		  : ft_topology_find_gpu_uuid(sh->t, d->text);
	if (pos < 0)
		return fail(sh, d->line, i, field, "no GPU %s %s on this node",
			    d->ref == FT_SHARING_GPU_INDEX ? "with index"
							   : "with UUID",
			    d->text);
	return take(sh, i, (unsigned)pos, d->line, field);
}

static int take_devices(share_t *sh, unsigned i)
{
	const ft_sharing_resource_t *r = &sh->s->resources[i];
	int rc;

	switch (r->select) {
	case FT_SHARING_COUNT:
		return take_first(sh, i, r->count);
	case FT_SHARING_LIST:
		for (unsigned k = 0; k < r->n_devices; k++)
			if ((rc = find_device(sh, i, k)) < 0)
				return rc;
		return 0;
	default:
		return take_first(sh, i, FT_GPU_MAX);
	}
}

static bool same_name(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* One sharedResource: every resource that shares GPUs names them alike. */
static int settle_name(share_t *sh, unsigned i)
{
	const ft_sharing_resource_t *r = &sh->s->resources[i];
	char buf[NAME_LEN];
	const char *name = ft_sharing_advertised(sh->s, r, buf, sizeof(buf));

	if (sh->named_by < 0) {
		/* A rename lives as long as the configuration; buf does not. */
		if (name == buf)
			name = strcpy(sh->name_buf, buf);
		sh->named_by = (int)i;
		sh->name = name;
		return 0;
	}
	if (same_name(name, sh->name))
		return 0;
	return fail(
	    sh, r->line, i, "",
	    "its replicas go by %s, those of resources[%d] by %s; the annotation has one sharedResource",
	    name ? name : r->name, sh->named_by,
	    sh->name ? sh->name : GPU_RESOURCE);
}

/* Fields the released plugins reset: say that the annotation may differ. */
static void warn_ignored(const share_t *sh, unsigned i)
{
	const ft_sharing_resource_t *r = &sh->s->resources[i];

	if (r->select != FT_SHARING_ALL)
		warn_at(sh, r->devices_line, i, ".devices",
			IGNORED_FIELD
			"share every GPU; the annotation follows this file");
	if (r->rename)
		warn_at(
		    sh, r->rename_line, i, ".rename",
		    IGNORED_FIELD
		    "keep the default name; the annotation follows this file");
}

static bool shares_any(const share_t *sh, unsigned i)
{
	for (unsigned pos = 0; pos < sh->t->n_gpus; pos++)
		if (sh->owner[pos] == (int)i)
			return true;
	return false;
}

static int share_resource(share_t *sh, unsigned i)
{
	const ft_sharing_resource_t *r = &sh->s->resources[i];
	int rc;

	if (strcmp(r->name, GPU_RESOURCE)) {
		warn_at(
		    sh, r->line, i, ".name",
		    "replicas of MIG instances are not in the annotation; left out");
		return 0;
	}
	warn_ignored(sh, i);
	if ((rc = take_devices(sh, i)) < 0)
		return rc;
	return shares_any(sh, i) ? settle_name(sh, i) : 0;
}

int probe_share(const probe_t *p, ft_topology_t *t, const ft_sharing_t *s)
{
	share_t sh = {.p = p, .s = s, .t = t, .named_by = NOT_SHARED};
	int rc;

	if (!s || s->kind == FT_SHARING_NONE)
		return 0;
	sort_by_index(&sh);
	for (unsigned i = 0; i < s->n_resources; i++)
		if ((rc = share_resource(&sh, i)) < 0)
			return rc;
	if (sh.name)
		return ft_topology_set_shared_resource(t, sh.name);
	return 0;
}
