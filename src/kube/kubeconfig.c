/*
 * Kubeconfig interpretation: from a parsed kubeconfig tree to the
 * credentials of its current context.
 *
 * The walk follows kubectl: current-context names a context, the context
 * names a cluster (server, CA, insecure-skip-tls-verify) and a user (token,
 * token file, client certificate and key). Inline *-data fields win over
 * their file counterparts, empty strings count as unset, and relative paths
 * are taken relative to the kubeconfig's folder. Every error names the file
 * and the field so that an operator can fix the file without reading code.
 * Nothing here opens a file; the fuzzer drives this with arbitrary trees.
 */
#include "kubeconfig.h"
#include "base64.h"

#include <flextopo/error.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *name;     /* the kubeconfig's path, for messages */
	const char *base_dir; /* folder relative paths start from */
	char where[160];      /* "cluster \"x\"" or "user \"y\"" */
} walk_t;

static int oom(const walk_t *walk)
{
	return ft_error_set(FT_ENOMEM, "kubeconfig %s: out of memory",
			    walk->name);
}

static int bad_field(const walk_t *walk, const char *field, const char *why)
{
	return ft_error_set(FT_EINVAL, "kubeconfig %s: %s: %s %s", walk->name,
			    walk->where, field, why);
}

/*
 * A string member; *out is NULL when the member is absent, null or empty.
 */
static int get_string(const char **out, const walk_t *walk, const cJSON *obj,
		      const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

	*out = NULL;
	if (!item || cJSON_IsNull(item))
		return 0;
	if (!cJSON_IsString(item))
		return bad_field(walk, key, "must be a string");
	if (item->valuestring[0] != '\0')
		*out = item->valuestring;
	return 0;
}

/* A boolean member; "true" and "false" strings are accepted too. */
static int get_bool(bool *out, const walk_t *walk, const cJSON *obj,
		    const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

	*out = false;
	if (!item || cJSON_IsNull(item))
		return 0;
	if (cJSON_IsBool(item)) {
		*out = cJSON_IsTrue(item);
		return 0;
	}
	if (cJSON_IsString(item) && strcmp(item->valuestring, "true") == 0) {
		*out = true;
		return 0;
	}
	if (cJSON_IsString(item) && strcmp(item->valuestring, "false") == 0)
		return 0;
	return bad_field(walk, key, "must be true or false");
}

static int copy_string(char **out, const walk_t *walk, const char *s)
{
	*out = strdup(s);
	return *out ? 0 : oom(walk);
}

/* Resolve `path` against the kubeconfig's folder unless it is absolute. */
static int resolve_path(char **out, const walk_t *walk, const char *path)
{
	if (path[0] == '/' || !walk->base_dir || !walk->base_dir[0])
		return copy_string(out, walk, path);
	if (asprintf(out, "%s/%s", walk->base_dir, path) < 0) {
		*out = NULL;
		return oom(walk);
	}
	return 0;
}

static int decode_field(char **out, const walk_t *walk, const char *field,
			const char *b64)
{
	int rc = ft_kube_base64_decode(out, NULL, b64, strlen(b64));

	if (rc == FT_EINVAL)
		return bad_field(walk, field, "is not valid base64");
	if (rc < 0)
		return oom(walk);
	return 0;
}

/*
 * Take the inline form of a field when present (base64, decoded into
 * *pem_out), else its file form (resolved into *file_out).
 */
static int take_pem_or_file(char **pem_out, char **file_out, const walk_t *walk,
			    const cJSON *obj, const char *file_key,
			    const char *data_key)
{
	const char *file = NULL, *data = NULL;
	int rc;

	if ((rc = get_string(&file, walk, obj, file_key)) < 0 ||
	    (rc = get_string(&data, walk, obj, data_key)) < 0)
		return rc;
	if (data)
		return decode_field(pem_out, walk, data_key, data);
	if (file)
		return resolve_path(file_out, walk, file);
	return 0;
}

/*
 * The member `member` of the entry of `list_key` whose "name" is `name`;
 * FT_ENOTFOUND when there is no such entry (or no list), FT_EINVAL when the
 * list is not a sequence.
 */
static int find_named(const cJSON **out, const walk_t *walk, const cJSON *root,
		      const char *list_key, const char *member,
		      const char *name)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, list_key);
	const cJSON *entry = NULL;

	*out = NULL;
	if (!list || cJSON_IsNull(list))
		return FT_ENOTFOUND;
	if (!cJSON_IsArray(list))
		return ft_error_set(FT_EINVAL,
				    "kubeconfig %s: %s must be a list",
				    walk->name, list_key);
	cJSON_ArrayForEach (entry, list) {
		const cJSON *n =
		    cJSON_GetObjectItemCaseSensitive(entry, "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) {
			*out = cJSON_GetObjectItemCaseSensitive(entry, member);
			return cJSON_IsObject(*out) ? 0 : FT_ENOTFOUND;
		}
	}
	return FT_ENOTFOUND;
}

/* Look up one named entry and fail with "<kind> "<name>" not found". */
static int require_named(const cJSON **out, walk_t *walk, const cJSON *root,
			 const char *list_key, const char *kind,
			 const char *name)
{
	int rc = find_named(out, walk, root, list_key, kind, name);

	if (rc == FT_ENOTFOUND)
		return ft_error_set(FT_EINVAL,
				    "kubeconfig %s: %s \"%s\" not found",
				    walk->name, kind, name);
	if (rc == 0)
		snprintf(walk->where, sizeof(walk->where), "%s \"%.120s\"",
			 kind, name);
	return rc;
}

static bool is_http_url(const char *s)
{
	return strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0;
}

static int take_server(ft_kube_credentials_t *creds, const walk_t *walk,
		       const cJSON *cluster)
{
	const char *server = NULL;
	size_t len;
	int rc;

	if ((rc = get_string(&server, walk, cluster, "server")) < 0)
		return rc;
	if (!server)
		return bad_field(walk, "server", "is not set");
	if (!is_http_url(server))
		return bad_field(walk, "server", "is not an http(s) URL");
	if ((rc = copy_string(&creds->server, walk, server)) < 0)
		return rc;
	len = strlen(creds->server);
	while (len > 0 && creds->server[len - 1] == '/')
		creds->server[--len] = '\0';
	return 0;
}

static int take_cluster(ft_kube_credentials_t *creds, const walk_t *walk,
			const cJSON *cluster)
{
	int rc;

	if ((rc = take_server(creds, walk, cluster)) < 0 ||
	    (rc = get_bool(&creds->insecure, walk, cluster,
			   "insecure-skip-tls-verify")) < 0)
		return rc;
	return take_pem_or_file(&creds->ca_pem, &creds->ca_file, walk, cluster,
				"certificate-authority",
				"certificate-authority-data");
}

/* Exec plugins and auth providers need code we do not run. */
static int reject_plugins(const walk_t *walk, const cJSON *user)
{
	const cJSON *exec = cJSON_GetObjectItemCaseSensitive(user, "exec");
	const cJSON *provider =
	    cJSON_GetObjectItemCaseSensitive(user, "auth-provider");

	if (exec && !cJSON_IsNull(exec))
		return bad_field(
		    walk, "exec",
		    "(credential plugins) is not supported; use a token or a client certificate");
	if (provider && !cJSON_IsNull(provider))
		return bad_field(
		    walk, "auth-provider",
		    "is not supported; use a token or a client certificate");
	return 0;
}

static int take_token(ft_kube_credentials_t *creds, const walk_t *walk,
		      const cJSON *user)
{
	const char *token = NULL, *token_file = NULL;
	int rc;

	if ((rc = get_string(&token, walk, user, "token")) < 0 ||
	    (rc = get_string(&token_file, walk, user, "tokenFile")) < 0)
		return rc;
	if (token && (rc = copy_string(&creds->token, walk, token)) < 0)
		return rc;
	if (token_file)
		return resolve_path(&creds->token_file, walk, token_file);
	return 0;
}

static int take_user(ft_kube_credentials_t *creds, const walk_t *walk,
		     const cJSON *user)
{
	bool has_cert, has_key;
	int rc;

	if ((rc = take_token(creds, walk, user)) < 0 ||
	    (rc = take_pem_or_file(&creds->cert_pem, &creds->cert_file, walk,
				   user, "client-certificate",
				   "client-certificate-data")) < 0 ||
	    (rc = take_pem_or_file(&creds->key_pem, &creds->key_file, walk,
				   user, "client-key", "client-key-data")) < 0)
		return rc;
	has_cert = creds->cert_pem || creds->cert_file;
	has_key = creds->key_pem || creds->key_file;
	if (has_cert && !has_key)
		return bad_field(walk, "client-certificate",
				 "is set without client-key");
	if (has_key && !has_cert)
		return bad_field(walk, "client-key",
				 "is set without client-certificate");
	if (!creds->token && !creds->token_file && !has_cert)
		return reject_plugins(walk, user);
	return 0;
}

/* The context's cluster and user names; the user may be unset. */
static int read_context(const char **cluster, const char **user, walk_t *walk,
			const cJSON *root, const char *name)
{
	const cJSON *context = NULL;
	int rc;

	if ((rc = require_named(&context, walk, root, "contexts", "context",
				name)) < 0 ||
	    (rc = get_string(cluster, walk, context, "cluster")) < 0 ||
	    (rc = get_string(user, walk, context, "user")) < 0)
		return rc;
	if (!*cluster)
		return bad_field(walk, "cluster", "is not set");
	return 0;
}

static int read_current(const char **out, walk_t *walk, const cJSON *root)
{
	int rc;

	if (!cJSON_IsObject(root))
		return ft_error_set(FT_EINVAL, "kubeconfig %s: not a mapping",
				    walk->name);
	snprintf(walk->where, sizeof(walk->where), "top level");
	if ((rc = get_string(out, walk, root, "current-context")) < 0)
		return rc;
	if (!*out)
		return ft_error_set(FT_EINVAL,
				    "kubeconfig %s: current-context is not set",
				    walk->name);
	return 0;
}

int ft_kube_kubeconfig_interpret(ft_kube_credentials_t *out, const cJSON *root,
				 const char *base_dir, const char *name)
{
	ft_kube_credentials_t creds = {0};
	walk_t walk = {.name = name ? name : "(unnamed)", .base_dir = base_dir};
	const char *current = NULL, *cluster_name = NULL, *user_name = NULL;
	const cJSON *cluster = NULL, *user = NULL;
	int rc;

	if ((rc = read_current(&current, &walk, root)) < 0 ||
	    (rc = read_context(&cluster_name, &user_name, &walk, root,
			       current)) < 0 ||
	    (rc = require_named(&cluster, &walk, root, "clusters", "cluster",
				cluster_name)) < 0 ||
	    (rc = take_cluster(&creds, &walk, cluster)) < 0)
		goto cleanup;
	if (user_name && ((rc = require_named(&user, &walk, root, "users",
					      "user", user_name)) < 0 ||
			  (rc = take_user(&creds, &walk, user)) < 0))
		goto cleanup;
	*out = creds;
	memset(&creds, 0, sizeof(creds));
cleanup:
	ft_kube_credentials_dispose(&creds);
	return rc;
}
