/*
 * The pod requests the extender makes: read a pod, and POST its Binding, as
 * kube-scheduler's DefaultBinder does, with the allocation annotation in the
 * Binding's metadata: kube-apiserver merges a Binding's annotations into the
 * pod in the same update that sets spec.nodeName
 * (k8s.io/kubernetes pkg/registry/core/pod/storage/storage.go,
 * BindingREST.setPodNodeAndMetadata, v1.36.3), so node and allocation are
 * written at once, in one request.
 *
 * Bodies are built with cJSON so that names and annotation values are
 * escaped however odd they are, path segments are percent-encoded, and HTTP
 * statuses map to the codes the bind path acts on: 404 -> FT_ENOTFOUND and,
 * for a Binding, 409 -> FT_ECONFLICT (the pod already has a node).
 *
 * A Binding is a write, and a write whose answer never came may still have
 * happened: kube-apiserver can commit it after the client gave up (etcd
 * slow or frozen), or commit it and die before answering. So the Binding's
 * outcome is unknown (FT_EUNKNOWN) when no status came (timeout, reset,
 * reset, a reply cut short) and on 5xx (500 from etcd
 * errors, 503, and 504, which kube-apiserver sends when it "may still be
 * processing the request"). Only another 4xx is a refusal. A 2xx status is
 * a success even when the reply's body was cut short.
 */
#include "client.h"

#include <flextopo/error.h>
#include <flextopo/kube.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "GROUP/namespaces/NS/RESOURCE/NAME" + suffix, segments escaped. */
static int object_path(char **out, const char *group, const char *resource,
		       const char *ns, const char *name, const char *suffix)
{
	char *ns_escaped = ft_kube_escape(ns);
	char *name_escaped = ft_kube_escape(name);
	int rc = 0;

	if (!ns_escaped || !name_escaped ||
	    asprintf(out, "%s/namespaces/%s/%s/%s%s", group, ns_escaped,
		     resource, name_escaped, suffix) < 0) {
		*out = NULL;
		rc = ft_error_set(FT_ENOMEM, "kube: out of memory");
	}
	free(ns_escaped);
	free(name_escaped);
	return rc;
}

/* "/api/v1/namespaces/NS/pods/NAME" + suffix. */
static int pod_path(char **out, const char *ns, const char *name,
		    const char *suffix)
{
	return object_path(out, "/api/v1", "pods", ns, name, suffix);
}

static int check_pod_args(const char *what, const char *ns, const char *name)
{
	if (!ns || !*ns || !name || !*name)
		return ft_error_set(FT_EINVAL,
				    "%s: namespace and name required", what);
	return 0;
}

/* Map an answer's status to a code, with the Status message on errors. */
static int status_outcome(long status, const char *body, bool conflict_ok,
			  const char *what, const char *ns, const char *name)
{
	char message[256];

	if (status >= 200 && status < 300)
		return 0;
	ft_kube_status_message(message, sizeof(message), body);
	if (status == 404)
		return ft_error_set(FT_ENOTFOUND, "%s %s/%s: not found%s%s",
				    what, ns, name, message[0] ? ": " : "",
				    message);
	return ft_error_set(status == 409 && conflict_ok ? FT_ECONFLICT
							 : FT_EIO,
			    "%s %s/%s: HTTP %ld%s%s", what, ns, name, status,
			    message[0] ? ": " : "", message);
}

/* Serialize `root`; consumes it. */
static int print_body(char **out, cJSON *root)
{
	*out = root ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *out ? 0 : ft_error_set(FT_ENOMEM, "kube: out of memory");
}

static bool fill_metadata(cJSON *metadata, const char *ns, const char *name,
			  const char *uid, const char *key, const char *value)
{
	return cJSON_AddStringToObject(metadata, "name", name) &&
	       cJSON_AddStringToObject(metadata, "namespace", ns) &&
	       (!uid || !*uid ||
		cJSON_AddStringToObject(metadata, "uid", uid)) &&
	       (!key || cJSON_AddStringToObject(
			    cJSON_AddObjectToObject(metadata, "annotations"),
			    key, value));
}

static bool fill_target(cJSON *target, const char *node)
{
	return cJSON_AddStringToObject(target, "apiVersion", "v1") &&
	       cJSON_AddStringToObject(target, "kind", "Node") &&
	       cJSON_AddStringToObject(target, "name", node);
}

/* A v1 Binding of ns/name (uid) to `node`, with annotation key: value. */
static int binding_body(char **out, const char *ns, const char *name,
			const char *uid, const char *node, const char *key,
			const char *value)
{
	cJSON *root = cJSON_CreateObject();
	bool ok = cJSON_AddStringToObject(root, "apiVersion", "v1") &&
		  cJSON_AddStringToObject(root, "kind", "Binding") &&
		  fill_metadata(cJSON_AddObjectToObject(root, "metadata"), ns,
				name, uid, key, value) &&
		  fill_target(cJSON_AddObjectToObject(root, "target"), node);

	if (!ok) {
		cJSON_Delete(root);
		root = NULL;
	}
	return print_body(out, root);
}

/* What the answer to a Binding says (see the top of this file). */
static int binding_outcome(int rc, long status, const char *reply,
			   const char *ns, const char *name)
{
	char cause[512];

	if (status >= 200 && status < 300)
		return 0;
	if (status > 0 && status < 500)
		return status_outcome(status, reply, true, "bind pod", ns,
				      name);
	if (status == 0 && rc != FT_EIO)
		return rc; /* never sent */
	if (rc < 0)
		snprintf(cause, sizeof(cause), "%s", ft_error_last());
	else
		ft_kube_status_message(cause, sizeof(cause), reply);
	return ft_error_set(FT_EUNKNOWN,
			    "bind pod %s/%s: outcome unknown (HTTP %ld%s%s)",
			    ns, name, status, cause[0] ? ": " : "", cause);
}

/* POST a Binding: 0, FT_EUNKNOWN, or the refusal's code. */
static int post_binding(ft_kube_client_t *client, const char *path,
			const char *body, const char *ns, const char *name)
{
	char *reply = NULL;
	long status = 0;
	int rc;

	rc = ft_kube_request(client, "POST", path, "application/json", body,
			     strlen(body), &status, &reply);
	rc = binding_outcome(rc, status, reply, ns, name);
	free(reply);
	return rc;
}

int ft_kube_bind_pod(ft_kube_client_t *client, const char *ns, const char *name,
		     const char *uid, const char *node, const char *key,
		     const char *value)
{
	char *path = NULL, *body = NULL;
	int rc;

	if ((rc = check_pod_args("bind pod", ns, name)) < 0)
		goto cleanup;
	if (!node || !*node) {
		rc = ft_error_set(FT_EINVAL, "bind pod %s/%s: no node", ns,
				  name);
		goto cleanup;
	}
	if (key && (!*key || !value)) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "bind pod %s/%s: annotation without a key or value", ns,
		    name);
		goto cleanup;
	}
	if ((rc = pod_path(&path, ns, name, "/binding")) < 0 ||
	    (rc = binding_body(&body, ns, name, uid, node, key, value)) < 0)
		goto cleanup;
	rc = post_binding(client, path, body, ns, name);
cleanup:
	free(path);
	free(body);
	return rc;
}

/* GET one namespaced object of `resource` in API `group`, named `what`
 * in errors. */
static int get_object(ft_kube_client_t *client, const char *group,
		      const char *resource, const char *what, const char *ns,
		      const char *name, cJSON **out)
{
	char *path = NULL, *reply = NULL;
	cJSON *obj = NULL;
	long status = 0;
	int rc;

	*out = NULL;
	if ((rc = check_pod_args(what, ns, name)) < 0 ||
	    (rc = object_path(&path, group, resource, ns, name, "")) < 0 ||
	    (rc = ft_kube_request(client, "GET", path, NULL, NULL, 0, &status,
				  &reply)) < 0 ||
	    (rc = status_outcome(status, reply, false, what, ns, name)) < 0)
		goto cleanup;
	if (!cJSON_IsObject(obj = cJSON_Parse(reply))) {
		rc = ft_error_set(FT_EIO, "%s %s/%s: reply is not JSON", what,
				  ns, name);
		goto cleanup;
	}
	*out = obj;
	obj = NULL;
cleanup:
	cJSON_Delete(obj);
	free(path);
	free(reply);
	return rc;
}

int ft_kube_get_pod(ft_kube_client_t *client, const char *ns, const char *name,
		    cJSON **out)
{
	return get_object(client, "/api/v1", "pods", "get pod", ns, name, out);
}

int ft_kube_get_claim(ft_kube_client_t *client, const char *ns,
		      const char *name, cJSON **out)
{
	return get_object(client, "/apis/resource.k8s.io/v1", "resourceclaims",
			  "get resourceclaim", ns, name, out);
}
