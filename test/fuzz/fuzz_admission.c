/*
 * Fuzz target for the admission webhook's wire: the input is decoded as an
 * AdmissionReview; what decodes has the matchAttribute patch worked out on
 * its object's device claim (spec.devices, or spec.spec.devices of a
 * template) and the reply written, which must be JSON that echoes the
 * request uid. Any input must decode or fail with FT_EINVAL (FT_ENOMEM
 * under memory pressure); never crash or leak.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <flextopo/codec.h>
#include <flextopo/error.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const classes[2] = {"gpu.nvidia.com", "mig.nvidia.com"};

static bool valid_json(const char *text)
{
	cJSON *j = cJSON_Parse(text);

	cJSON_Delete(j);
	return j != NULL;
}

static void check_reply(const char *uid, const char *patch)
{
	char *out = NULL;
	cJSON *root;
	const cJSON *echoed;

	if (ft_codec_admission_reply(&out, uid, patch, NULL) < 0)
		return;
	root = cJSON_Parse(out);
	echoed =
	    cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "uid");
	if (!cJSON_IsString(echoed) || strcmp(echoed->valuestring, uid) != 0)
		abort();
	cJSON_Delete(root);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const cJSON *spec, *devices;
	ft_admission_t a;
	char *patch = NULL;

	if (ft_codec_admission_decode(&a, (const char *)data, size) < 0)
		return 0;
	spec = cJSON_GetObjectItem(a.object, "spec");
	devices = cJSON_GetObjectItem(spec, "devices");
	if (!devices)
		devices = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "spec"),
					      "devices");
	if (ft_codec_claim_constraint_patch(&patch, devices, "/spec/devices",
					    "resource.kubernetes.io/numaNode",
					    classes, 2) == 0 &&
	    patch && !valid_json(patch))
		abort();
	check_reply(a.uid, patch);
	free(patch);
	/* The whole decision: always a reply that echoes the uid. */
	{
		static const ft_codec_options_t opts = {
		    .annotation_prefix = "flextopo.io",
		    .default_mode = FT_MODE_GUARANTEED};
		char *out = NULL;
		if (ft_codec_admission_mutate(&out, &a, &opts, classes, 2) ==
			0 &&
		    (!valid_json(out) || !strstr(out, "\"allowed\":true")))
			abort();
		free(out);
	}
	ft_admission_dispose(&a);
	return 0;
}
