/*
 * Fuzz target for the YAML to cJSON conversion (kubectl snapshots and
 * kubeconfig files). Any input must either convert to a tree that prints,
 * or fail with one of the documented codes and a message; never crash,
 * leak or run away on aliases or nesting.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <flextopo/error.h>
#include <flextopo/yamljson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *json = NULL;
	char *printed = NULL;
	int rc = ft_yaml_to_json(&json, (const char *)data, size, "fuzz.yaml");

	if (rc == 0) {
		if (!json)
			abort();
		printed = cJSON_PrintUnformatted(json);
		free(printed);
	} else if (json ||
		   (rc != FT_EINVAL && rc != FT_ETOOBIG && rc != FT_ENOMEM)) {
		abort();
	}
	cJSON_Delete(json);
	return 0;
}
