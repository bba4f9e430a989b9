/*
 * YAML to cJSON conversion with libyaml, for kubectl-style snapshot files
 * (`kubectl get nodes,pods -A -o yaml` prints one `kind: List` document) and
 * kubeconfig files. JSON input is YAML too and converts the same way.
 *
 * Scalars follow the YAML 1.2 core schema: null/~/empty -> null, true/false
 * -> bool, integers and floats -> number, everything else (and any quoted
 * scalar) -> string. Anchors and aliases are resolved; merge keys are not.
 *
 * A decoder that wants to name the line of a bad value asks for a line
 * table beside the tree: it maps each node converted from the text to the
 * line where the node starts (a mapping or sequence at its first entry, a
 * scalar at its first character). Nodes that alias expansion copied have no
 * line of their own.
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

/* Where the nodes of one converted tree start; opaque. */
typedef struct ft_yaml_lines ft_yaml_lines_t;

/*
 * As ft_yaml_to_json(), and on success *lines (when `lines` is not NULL) is
 * a new line table for the tree, which the caller frees with
 * ft_yaml_lines_free(); NULL on error.
 */
int ft_yaml_to_json_lines(cJSON **out, ft_yaml_lines_t **lines,
			  const char *text, size_t len, const char *name);

/*
 * The 1-based line where `node` starts, or 0 when the table does not know
 * it (a copy made by an alias, a node of another tree, a NULL table).
 * Nodes are found by address: ask only while the tree is alive.
 */
unsigned ft_yaml_line(const ft_yaml_lines_t *lines, const cJSON *node);

/* NULL is fine. */
void ft_yaml_lines_free(ft_yaml_lines_t *lines);

/* Read and convert a file; FT_EIO when it cannot be read. */
int ft_yaml_file_to_json(cJSON **out, const char *path);

#endif
