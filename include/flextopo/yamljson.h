/*
 * YAML to cJSON conversion with libyaml, for kubectl-style snapshot files
 * (`kubectl get nodes,pods -A -o yaml` prints one `kind: List` document) and
 * kubeconfig files. JSON input is YAML too and converts the same way.
 *
 * Scalars follow the YAML 1.2 core schema: null/~/empty -> null, true/false
 * -> bool, integers and floats -> number, everything else (and any quoted
 * scalar) -> string. Anchors and aliases are resolved; merge keys are not.
 */
#ifndef FLEXTOPO_YAMLJSON_H
#define FLEXTOPO_YAMLJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/*
 * Convert the first document of `text`. On success *out is a new cJSON tree
 * the caller frees with cJSON_Delete(). FT_EINVAL with "name:line:column:
 * problem" on a syntax error; FT_ENOMEM.
 */
int ft_yaml_to_json(cJSON **out, const char *text, size_t len,
		    const char *name);

/* Read and convert a file; FT_EIO when it cannot be read. */
int ft_yaml_file_to_json(cJSON **out, const char *path);

#endif
