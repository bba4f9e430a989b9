/*
 * The MIG catalog from YAML (configs/mig-catalog.yaml, built into the binary
 * as ft_mig_catalog_yaml[] by CMake) into ft_mig_catalog_t.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>
#include <flextopo/mig.h>
#include <flextopo/yamljson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char ft_mig_catalog_yaml[];
extern const size_t ft_mig_catalog_yaml_len;

static int uint_at(unsigned *out, const cJSON *obj, const char *key,
		   unsigned max, const char *where)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max ||
	    v->valuedouble != (double)(unsigned)v->valuedouble)
		return ft_error_set(FT_EINVAL,
				    "%s.%s: expected an integer 0-%u", where,
				    key, max);
	*out = (unsigned)v->valuedouble;
	return 0;
}

static int dup_name(char **out, const cJSON *obj, const char *key,
		    const char *where)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsString(v) || !v->valuestring[0])
		return ft_error_set(FT_EINVAL, "%s.%s: expected a string",
				    where, key);
	if (!(*out = strdup(v->valuestring)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	return 0;
}

static int decode_starts(ft_mig_profile_t *p, const cJSON *list,
			 const char *where)
{
	const cJSON *v;

	if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list))
		return ft_error_set(
		    FT_EINVAL, "%s.starts: expected a list of slots", where);
	cJSON_ArrayForEach (v, list) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
		    v->valuedouble > 7)
			return ft_error_set(FT_EINVAL,
					    "%s.starts: slots are 0-7", where);
		p->starts |= (uint8_t)(1u << (unsigned)v->valuedouble);
	}
	return 0;
}

static int decode_profile(ft_mig_profile_t *p, const cJSON *obj,
			  const char *where)
{
	unsigned compute = 0, memory = 0, max = 0, mib = 0;
	int rc;

	if ((rc = dup_name(&p->name, obj, "name", where)) < 0 ||
	    (rc = uint_at(&compute, obj, "computeSlices", 7, where)) < 0 ||
	    (rc = uint_at(&memory, obj, "memorySlices", 8, where)) < 0 ||
	    (rc = uint_at(&max, obj, "maxInstances", 7, where)) < 0 ||
	    (rc = uint_at(&mib, obj, "memoryMiB", 1u << 30, where)) < 0 ||
	    (rc = decode_starts(p,
				cJSON_GetObjectItemCaseSensitive(obj, "starts"),
				where)) < 0)
		return rc;
	p->compute_slices = (uint8_t)compute;
	p->memory_slices = (uint8_t)memory;
	p->max_instances = (uint8_t)max;
	p->memory_mib = mib;
	return 0;
}

static int decode_strings(char **dst, unsigned *n, unsigned max,
			  const cJSON *list, const char *where)
{
	const cJSON *v;

	cJSON_ArrayForEach (v, list) {
		if (!cJSON_IsString(v) || *n >= max)
			return ft_error_set(FT_EINVAL,
					    "%s.models: up to %u strings",
					    where, max);
		if (!(dst[(*n)++] = strdup(v->valuestring)))
			return ft_error_set(FT_ENOMEM, "out of memory");
	}
	return 0;
}

static int decode_precisions(ft_mig_gpu_t *g, const cJSON *list,
			     const char *where)
{
	const cJSON *v;

	cJSON_ArrayForEach (v, list) {
		unsigned bit =
		    cJSON_IsString(v) ? ft_precision_parse(v->valuestring) : 0;
		if (!bit)
			return ft_error_set(FT_EINVAL,
					    "%s.precisions: unknown precision",
					    where);
		g->precisions |= bit;
	}
	return 0;
}

static int decode_gpu(ft_mig_gpu_t *g, const cJSON *obj, unsigned index)
{
	const cJSON *profiles =
	    cJSON_GetObjectItemCaseSensitive(obj, "profiles");
	const cJSON *p;
	unsigned mib = 0;
	char where[64];
	int rc;

	snprintf(where, sizeof(where), "gpus[%u]", index);
	if ((rc = dup_name(&g->name, obj, "name", where)) < 0 ||
	    (rc = uint_at(&mib, obj, "memoryMiB", 1u << 30, where)) < 0 ||
	    (rc = decode_strings(
		 g->models, &g->n_models, FT_MIG_MODELS_MAX,
		 cJSON_GetObjectItemCaseSensitive(obj, "models"), where)) < 0 ||
	    (rc = decode_precisions(
		 g, cJSON_GetObjectItemCaseSensitive(obj, "precisions"),
		 where)) < 0)
		return rc;
	g->memory_mib = mib;
	cJSON_ArrayForEach (p, profiles) {
		char pwhere[96];
		if (g->n_profiles >= FT_MIG_PROFILES_MAX)
			return ft_error_set(FT_EINVAL,
					    "%s.profiles: more than %d", where,
					    FT_MIG_PROFILES_MAX);
		snprintf(pwhere, sizeof(pwhere), "%s.profiles[%u]", where,
			 g->n_profiles);
		if ((rc = decode_profile(&g->profiles[g->n_profiles++], p,
					 pwhere)) < 0)
			return rc;
	}
	return 0;
}

/*
 * The MIG catalog from its YAML form (configs/mig-catalog.yaml), as
 * converted to JSON. FT_EINVAL naming the entry and field.
 */
static int mig_catalog_decode(ft_mig_catalog_t *out, const cJSON *root)
{
	const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
	const cJSON *g;
	unsigned n = (unsigned)cJSON_GetArraySize(gpus);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsArray(gpus) || !n)
		return ft_error_set(FT_EINVAL, "gpus: expected a list");
	if (!(out->gpus = calloc(n, sizeof(*out->gpus))))
		return ft_error_set(FT_ENOMEM, "out of memory");
	cJSON_ArrayForEach (g, gpus) {
		if ((rc = decode_gpu(&out->gpus[out->n_gpus], g, out->n_gpus)) <
		    0)
			break;
		out->n_gpus++;
	}
	if (rc < 0) {
		out->n_gpus++; /* dispose the partly decoded entry too */
		ft_mig_catalog_dispose(out);
	}
	return rc;
}

int ft_codec_mig_catalog_builtin(ft_mig_catalog_t *out)
{
	cJSON *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ft_yaml_to_json(&root, (const char *)ft_mig_catalog_yaml,
				  ft_mig_catalog_yaml_len,
				  "configs/mig-catalog.yaml")) == 0)
		rc = mig_catalog_decode(out, root);
	cJSON_Delete(root);
	return rc;
}
