/*
 * The capability annotation of a pod (flextopo.io/requires) into ft_caps_t.
 *
 * The keys are Modelplane's node pool capabilities (seed 001), asked of every
 * allocation unit the pod gets:
 *   {"memoryPerGpu":"40Gi","precision":["fp8"],"interconnect":"nvlink",
 *    "nvlinkDomainSize":2}
 * All are optional. "precisionSupport", the name of Modelplane's pool field,
 * is read as "precision". An unknown key is an error rather than ignored: a
 * misspelt requirement would otherwise place the pod on units that do not
 * have what it needs.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <string.h>

#define DOMAIN_SIZE_MAX 65535

static int decode_memory(ft_caps_t *out, const cJSON *item)
{
	char msg[256];

	if (!cJSON_IsString(item))
		return ft_error_set(
		    FT_EINVAL,
		    "memoryPerGpu: expected a quantity string such as \"40Gi\"");
	if (ft_quantity_mib(&out->memory_mib, item->valuestring) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "%s", ft_error_last());
	return ft_error_set(FT_EINVAL, "memoryPerGpu: %s", msg);
}

static int decode_precisions(ft_caps_t *out, const cJSON *item)
{
	const cJSON *p;
	unsigned i = 0, bit;

	if (!cJSON_IsArray(item))
		return ft_error_set(
		    FT_EINVAL,
		    "precision: expected an array of names such as [\"fp8\"]");
	cJSON_ArrayForEach (p, item) {
		const char *name = cJSON_IsString(p) ? p->valuestring : "";
		if (!(bit = ft_precision_parse(name)))
			return ft_error_set(
			    FT_EINVAL,
			    "precision[%u]: \"%.32s\" is not one of fp64, tf32, bf16, fp16, fp8, int8, fp4",
			    i, name);
		out->precisions |= bit;
		i++;
	}
	return 0;
}

static int decode_interconnect(ft_caps_t *out, const cJSON *item)
{
	const char *v = cJSON_IsString(item) ? item->valuestring : "";

	if (strcmp(v, "nvlink") == 0)
		out->interconnect = FT_INTERCONNECT_NVLINK;
	else if (strcmp(v, "pcie") == 0)
		out->interconnect = FT_INTERCONNECT_PCIE;
	else
		return ft_error_set(
		    FT_EINVAL, "interconnect: expected \"nvlink\" or \"pcie\"");
	return 0;
}

static int decode_domain_size(ft_caps_t *out, const cJSON *item)
{
	double v = cJSON_IsNumber(item) ? item->valuedouble : 0;

	if (v < 1 || v > DOMAIN_SIZE_MAX || v != (double)(uint32_t)v)
		return ft_error_set(
		    FT_EINVAL, "nvlinkDomainSize: expected an integer 1-%d",
		    DOMAIN_SIZE_MAX);
	out->nvlink_domain = (uint32_t)v;
	return 0;
}

static int decode_key(ft_caps_t *out, const cJSON *item)
{
	const char *key = item->string ? item->string : "";

	if (strcmp(key, "memoryPerGpu") == 0)
		return decode_memory(out, item);
	if (strcmp(key, "precision") == 0 ||
	    strcmp(key, "precisionSupport") == 0)
		return decode_precisions(out, item);
	if (strcmp(key, "interconnect") == 0)
		return decode_interconnect(out, item);
	if (strcmp(key, "nvlinkDomainSize") == 0)
		return decode_domain_size(out, item);
	return ft_error_set(
	    FT_EINVAL,
	    "unknown key \"%.64s\" (memoryPerGpu, precision, interconnect, nvlinkDomainSize)",
	    key);
}

int ft_codec_requires_decode(ft_caps_t *out, const char *json)
{
	cJSON *root = json ? cJSON_Parse(json) : NULL;
	const cJSON *item;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(root)) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "expected a JSON object such as {\"memoryPerGpu\":\"40Gi\"}");
		goto cleanup;
	}
	cJSON_ArrayForEach (item, root) {
		if ((rc = decode_key(out, item)) < 0)
			goto cleanup;
	}
cleanup:
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	cJSON_Delete(root);
	return rc;
}
