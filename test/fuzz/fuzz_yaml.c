/*
 * Fuzz target for the YAML to cJSON conversion (kubectl snapshots and
 * kubeconfig files). Any input must either convert to a tree that prints,
 * or fail with one of the documented codes and a message; never crash,
 * leak or run away on aliases or nesting. A line table comes with every
 * tree, and the root's line is at most the input's line count.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <flextopo/error.h>
#include <flextopo/yamljson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * More than the lines libyaml sees: it breaks lines at CR, LF and the UTF-8
 * NEL (C2 85), LS (E2 80 A8) and PS (E2 80 A9); their last bytes count.
 */
static unsigned count_lines(const uint8_t *data, size_t size)
{
	unsigned n = 1;

	for (size_t i = 0; i < size; i++)
		n += data[i] == '\n' || data[i] == '\r' || data[i] == 0x85 ||
		     data[i] == 0xa8 || data[i] == 0xa9;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_yaml_lines_t *lines = NULL;
	cJSON *json = NULL;
	char *printed = NULL;
	int rc = ft_yaml_to_json_lines(&json, &lines, (const char *)data, size,
				       "fuzz.yaml");

	if (rc == 0) {
		if (!json || !lines ||
		    ft_yaml_line(lines, json) > count_lines(data, size))
			abort();
		printed = cJSON_PrintUnformatted(json);
		free(printed);
	} else if (json || lines ||
		   (rc != FT_EINVAL && rc != FT_ETOOBIG && rc != FT_ENOMEM)) {
		abort();
	}
	ft_yaml_lines_free(lines);
	cJSON_Delete(json);
	return 0;
}
