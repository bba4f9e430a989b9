/*
 * Fuzz target for kubeconfig files: the YAML conversion, then the
 * interpretation of the tree into credentials (contexts, clusters, users,
 * base64 data, relative paths). The interpretation opens no file, so any
 * input is safe to run; only crashes and sanitizer reports matter here.
 */
#include <stddef.h>
#include <stdint.h>

#include <flextopo/kube.h>
#include <flextopo/yamljson.h>

#include "kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_kube_credentials_t creds = {0};
	cJSON *root = NULL;

	if (ft_yaml_to_json(&root, (const char *)data, size, "fuzz.yaml") == 0)
		ft_kube_kubeconfig_interpret(&creds, root, "/fuzz",
					     "fuzz.yaml");
	ft_kube_credentials_dispose(&creds);
	cJSON_Delete(root);
	return 0;
}
