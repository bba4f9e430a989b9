/*
 * Where API server credentials come from: a kubeconfig file or the
 * in-cluster service account, plus the helpers that copy and free them.
 *
 * Reading a kubeconfig is file work around the pure interpretation in
 * kubeconfig.c: read and parse the YAML, hand the tree over with the file's
 * folder, then check that the files it names can be opened so that a typo
 * shows up at start rather than at the first request. The in-cluster form
 * mirrors client-go's rest.InClusterConfig; FLEXTOPO_SERVICEACCOUNT_DIR
 * replaces the service-account folder for tests.
 */
#include "kubeconfig.h"

#include <flextopo/error.h>
#include <flextopo/file.h>
#include <flextopo/kube.h>
#include <flextopo/log.h>
#include <flextopo/yamljson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int copy_field(char **out, const char *src)
{
	*out = NULL;
	if (!src)
		return 0;
	*out = strdup(src);
	return *out ? 0 : FT_ENOMEM;
}

int ft_kube_credentials_copy(ft_kube_credentials_t *out,
			     const ft_kube_credentials_t *src)
{
	ft_kube_credentials_t creds = {.insecure = src->insecure};
	int rc;

	if ((rc = copy_field(&creds.server, src->server)) < 0 ||
	    (rc = copy_field(&creds.token, src->token)) < 0 ||
	    (rc = copy_field(&creds.token_file, src->token_file)) < 0 ||
	    (rc = copy_field(&creds.ca_file, src->ca_file)) < 0 ||
	    (rc = copy_field(&creds.ca_pem, src->ca_pem)) < 0 ||
	    (rc = copy_field(&creds.cert_pem, src->cert_pem)) < 0 ||
	    (rc = copy_field(&creds.key_pem, src->key_pem)) < 0 ||
	    (rc = copy_field(&creds.cert_file, src->cert_file)) < 0 ||
	    (rc = copy_field(&creds.key_file, src->key_file)) < 0) {
		ft_error_set(rc, "kube credentials: out of memory");
		goto cleanup;
	}
	*out = creds;
	memset(&creds, 0, sizeof(creds));
cleanup:
	ft_kube_credentials_dispose(&creds);
	return rc;
}

void ft_kube_credentials_dispose(ft_kube_credentials_t *creds)
{
	if (!creds)
		return;
	free(creds->server);
	free(creds->token);
	free(creds->token_file);
	free(creds->ca_file);
	free(creds->ca_pem);
	free(creds->cert_pem);
	free(creds->key_pem);
	free(creds->cert_file);
	free(creds->key_file);
	memset(creds, 0, sizeof(*creds));
}

/* The folder of `path` ("." for a bare file name); the caller frees it. */
static char *folder_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static int check_readable(const char *kubeconfig, const char *field,
			  const char *path)
{
	if (!path || access(path, R_OK) == 0)
		return 0;
	return ft_error_set(FT_EINVAL, "kubeconfig %s: %s %s: %s", kubeconfig,
			    field, path, strerror(errno));
}

static int check_files(const ft_kube_credentials_t *creds, const char *path)
{
	int rc;

	if ((rc = check_readable(path, "certificate-authority",
				 creds->ca_file)) < 0 ||
	    (rc = check_readable(path, "client-certificate",
				 creds->cert_file)) < 0 ||
	    (rc = check_readable(path, "client-key", creds->key_file)) < 0)
		return rc;
	return check_readable(path, "tokenFile", creds->token_file);
}

/* Put "kubeconfig " before the message a lower layer left. */
static int prefix_error(int code)
{
	char message[512];

	snprintf(message, sizeof(message), "%s", ft_error_last());
	return ft_error_set(code, "kubeconfig %s", message);
}

int ft_kube_credentials_from_kubeconfig(ft_kube_credentials_t *out,
					const char *path)
{
	ft_kube_credentials_t creds = {0};
	cJSON *root = NULL;
	char *text = NULL, *dir = NULL;
	size_t len = 0;
	int rc;

	if ((rc = ft_file_read(&text, &len, path, FT_KUBE_FILE_MAX)) < 0) {
		rc = prefix_error(rc == FT_ENOMEM ? rc : FT_EIO);
		goto cleanup;
	}
	if (!(dir = folder_of(path))) {
		rc = ft_error_set(FT_ENOMEM, "kubeconfig %s: out of memory",
				  path);
		goto cleanup;
	}
	if ((rc = ft_yaml_to_json(&root, text, len, path)) < 0) {
		rc = prefix_error(rc);
		goto cleanup;
	}
	if ((rc = ft_kube_kubeconfig_interpret(&creds, root, dir, path)) < 0 ||
	    (rc = check_files(&creds, path)) < 0)
		goto cleanup;
	*out = creds;
	memset(&creds, 0, sizeof(creds));
cleanup:
	ft_kube_credentials_dispose(&creds);
	cJSON_Delete(root);
	free(text);
	free(dir);
	return rc;
}

/* "https://host:port", with an IPv6 host in brackets. */
static int in_cluster_server(char **out, const char *host, const char *port)
{
	bool v6 = strchr(host, ':') && host[0] != '[';

	if (asprintf(out, "https://%s%s%s:%s", v6 ? "[" : "", host,
		     v6 ? "]" : "", port) < 0) {
		*out = NULL;
		return ft_error_set(FT_ENOMEM, "in-cluster: out of memory");
	}
	return 0;
}

static int in_cluster_files(ft_kube_credentials_t *creds, const char *dir)
{
	if (asprintf(&creds->token_file, "%s/token", dir) < 0) {
		creds->token_file = NULL;
		return ft_error_set(FT_ENOMEM, "in-cluster: out of memory");
	}
	if (access(creds->token_file, R_OK) != 0)
		return ft_error_set(FT_EIO, "in-cluster: token %s: %s",
				    creds->token_file, strerror(errno));
	if (asprintf(&creds->ca_file, "%s/ca.crt", dir) < 0) {
		creds->ca_file = NULL;
		return ft_error_set(FT_ENOMEM, "in-cluster: out of memory");
	}
	if (access(creds->ca_file, R_OK) != 0) {
		/* Like client-go: go on with the system CAs. */
		FT_LOG_WARN_MSG("in-cluster: CA %s: %s; using system CAs",
				creds->ca_file, strerror(errno));
		free(creds->ca_file);
		creds->ca_file = NULL;
	}
	return 0;
}

int ft_kube_credentials_in_cluster(ft_kube_credentials_t *out)
{
	ft_kube_credentials_t creds = {0};
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = getenv("FLEXTOPO_SERVICEACCOUNT_DIR");
	int rc;

	if (!host || !*host || !port || !*port) {
		rc = ft_error_set(
		    FT_ENOTFOUND,
		    "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
		goto cleanup;
	}
	if ((rc = in_cluster_server(&creds.server, host, port)) < 0 ||
	    (rc = in_cluster_files(&creds,
				   dir && *dir ? dir : SERVICEACCOUNT_DIR)) < 0)
		goto cleanup;
	*out = creds;
	memset(&creds, 0, sizeof(creds));
cleanup:
	ft_kube_credentials_dispose(&creds);
	return rc;
}
