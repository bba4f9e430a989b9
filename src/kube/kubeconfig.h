/*
 * Private to src/kube: the kubeconfig interpretation behind
 * ft_kube_credentials_from_kubeconfig, split from file reading so that the
 * fuzzer and the unit tests can drive it with a parsed tree, and the small
 * helpers the credential and client code share.
 */
#ifndef FLEXTOPO_KUBE_KUBECONFIG_H
#define FLEXTOPO_KUBE_KUBECONFIG_H

#include <flextopo/kube.h>

#include <stddef.h>

#include <cjson/cJSON.h>

/* Largest kubeconfig, token or certificate file we read, in bytes. */
#define FT_KUBE_FILE_MAX (4u << 20)

/*
 * Interpret a kubeconfig tree: current-context, then that context's cluster
 * and user. Relative file paths are resolved against `base_dir`; `name` (the
 * file's path) starts every error message. Touches no file. On success *out
 * is filled and owned by the caller (ft_kube_credentials_dispose); on error
 * *out is untouched. FT_EINVAL naming the field; FT_ENOMEM.
 */
int ft_kube_kubeconfig_interpret(ft_kube_credentials_t *out, const cJSON *root,
				 const char *base_dir, const char *name);

/* Deep copy; on error *out is untouched. FT_ENOMEM. */
int ft_kube_credentials_copy(ft_kube_credentials_t *out,
			     const ft_kube_credentials_t *src);

#endif
