/*
 * MIG catalog lookups and layout checks against it.
 *
 * The topology already refuses overlapping instances and placements outside
 * the 8 memory slices; this adds what only the product knows: which profiles
 * exist, where each may start, how large it is and how many fit; and, for
 * capability matching (flextopo.io/requires), the precisions of each GPU and
 * the memory of each instance.
 */
#include <flextopo/error.h>
#include <flextopo/mig.h>

#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	ft_precision_t bit;
} precisions[] = {
    {"fp64", FT_PRECISION_FP64}, {"tf32", FT_PRECISION_TF32},
    {"bf16", FT_PRECISION_BF16}, {"fp16", FT_PRECISION_FP16},
    {"fp8", FT_PRECISION_FP8},	 {"int8", FT_PRECISION_INT8},
    {"fp4", FT_PRECISION_FP4},
};

unsigned ft_precision_parse(const char *name)
{
	for (size_t i = 0;
	     name && i < sizeof(precisions) / sizeof(precisions[0]); i++)
		if (strcasecmp(name, precisions[i].name) == 0)
			return precisions[i].bit;
	return 0;
}

const char *ft_precision_name(unsigned bits)
{
	for (size_t i = 0; i < sizeof(precisions) / sizeof(precisions[0]); i++)
		if (bits & precisions[i].bit)
			return precisions[i].name;
	return "?";
}

void ft_mig_catalog_dispose(ft_mig_catalog_t *c)
{
	if (!c)
		return;
	for (unsigned g = 0; g < c->n_gpus; g++) {
		ft_mig_gpu_t *gpu = &c->gpus[g];
		free(gpu->name);
		for (unsigned m = 0; m < gpu->n_models; m++)
			free(gpu->models[m]);
		for (unsigned p = 0; p < gpu->n_profiles; p++)
			free(gpu->profiles[p].name);
	}
	free(c->gpus);
	memset(c, 0, sizeof(*c));
}

const ft_mig_gpu_t *ft_mig_catalog_find(const ft_mig_catalog_t *c,
					const char *model)
{
	for (unsigned g = 0; c && model && g < c->n_gpus; g++)
		for (unsigned m = 0; m < c->gpus[g].n_models; m++)
			if (strcasestr(model, c->gpus[g].models[m]))
				return &c->gpus[g];
	return NULL;
}

const ft_mig_profile_t *ft_mig_gpu_profile(const ft_mig_gpu_t *gpu,
					   const char *name)
{
	for (unsigned p = 0; gpu && p < gpu->n_profiles; p++)
		if (strcmp(gpu->profiles[p].name, name) == 0)
			return &gpu->profiles[p];
	return NULL;
}

static int check_instance(const ft_mig_gpu_t *cat, const ft_gpu_t *g,
			  const ft_mig_instance_t *m, unsigned *counts)
{
	const ft_mig_profile_t *p = ft_mig_gpu_profile(cat, m->profile);
	unsigned at;

	if (!p)
		return ft_error_set(
		    FT_EINVAL,
		    "GPU %d (%s): MIG profile %s is not one of %s's (configs/mig-catalog.yaml)",
		    g->index, g->model, m->profile, cat->name);
	at = (unsigned)(p - cat->profiles);
	if (m->start >= 8 || !(p->starts & (1u << m->start)))
		return ft_error_set(
		    FT_EINVAL,
		    "GPU %d (%s): MIG %s at start %u: not a valid start slot for that profile",
		    g->index, g->model, m->profile, m->start);
	if (m->size != p->memory_slices)
		return ft_error_set(
		    FT_EINVAL,
		    "GPU %d (%s): MIG %s has size %u, the profile has %u memory slices",
		    g->index, g->model, m->profile, m->size, p->memory_slices);
	if (++counts[at] > p->max_instances)
		return ft_error_set(
		    FT_EINVAL, "GPU %d (%s): more than %u MIG %s instances",
		    g->index, g->model, p->max_instances, m->profile);
	return 0;
}

static int check_gpu(const ft_mig_catalog_t *c, const ft_topology_t *t,
		     unsigned gpu)
{
	const ft_gpu_t *g = &t->gpus[gpu];
	const ft_mig_gpu_t *cat = ft_mig_catalog_find(c, g->model);
	unsigned counts[FT_MIG_PROFILES_MAX] = {0};
	int rc;

	if (!cat)
		return 0;
	for (unsigned i = 0; i < t->n_mig; i++)
		if (t->mig[i].gpu == gpu &&
		    (rc = check_instance(cat, g, &t->mig[i], counts)) < 0)
			return rc;
	return 0;
}

int ft_mig_catalog_check(const ft_mig_catalog_t *c, const ft_topology_t *t)
{
	int rc;

	for (unsigned g = 0; c && g < t->n_gpus; g++)
		if (t->gpus[g].mig_enabled && (rc = check_gpu(c, t, g)) < 0)
			return rc;
	return 0;
}

void ft_mig_catalog_apply(const ft_mig_catalog_t *c, ft_topology_t *t)
{
	const ft_mig_gpu_t *cat[FT_GPU_MAX];

	for (unsigned g = 0; g < t->n_gpus; g++) {
		cat[g] = ft_mig_catalog_find(c, t->gpus[g].model);
		t->gpus[g].precisions = cat[g] ? cat[g]->precisions : 0;
	}
	for (unsigned i = 0; i < t->n_mig; i++) {
		const ft_mig_profile_t *p =
		    ft_mig_gpu_profile(cat[t->mig[i].gpu], t->mig[i].profile);
		if (p)
			t->mig[i].memory_mib = p->memory_mib;
	}
}
