/*
 * Delegated authentication and authorization of a bearer token, as
 * kube-scheduler's secure port does for its /metrics
 * (k8s.io/apiserver pkg/authentication/authenticatorfactory and
 * pkg/authorization/authorizerfactory, the delegating ones): a TokenReview
 * says who the token belongs to, and a SubjectAccessReview whether that
 * user may use the verb on the non-resource path. Both are created with the
 * extender's own credentials, which need create on tokenreviews and
 * subjectaccessreviews (the ClusterRole system:auth-delegator).
 */
#include "client.h"

#include <flextopo/error.h>
#include <flextopo/kube.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* POST `root` (consumed) to `path`; the parsed reply's "status" in *out. */
static int create_review(cJSON **out, ft_kube_client_t *client,
			 const char *path, cJSON *root, const char *what)
{
	char *body = root ? cJSON_PrintUnformatted(root) : NULL;
	char *reply = NULL, message[256];
	long status = 0;
	int rc;

	cJSON_Delete(root);
	*out = NULL;
	if (!body)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", what);
	rc = ft_kube_request(client, "POST", path, "application/json", body,
			     strlen(body), &status, &reply);
	if (rc == 0 && (status < 200 || status >= 300)) {
		ft_kube_status_message(message, sizeof(message), reply);
		rc = ft_error_set(FT_EIO, "%s: HTTP %ld%s%s", what, status,
				  message[0] ? ": " : "", message);
	} else if (rc == 0 && !(*out = cJSON_Parse(reply))) {
		rc = ft_error_set(FT_EIO, "%s: the reply is not JSON", what);
	}
	free(reply);
	free(body);
	return rc;
}

static cJSON *review(const char *api_version, const char *kind)
{
	cJSON *root = cJSON_CreateObject();

	if (!cJSON_AddStringToObject(root, "apiVersion", api_version) ||
	    !cJSON_AddStringToObject(root, "kind", kind)) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

static const cJSON *status_of(const cJSON *reply)
{
	return cJSON_GetObjectItemCaseSensitive(reply, "status");
}

static void copy_reason(char *why, size_t size, const cJSON *status,
			const char *key)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(status, key);

	snprintf(why, size, "%s", cJSON_IsString(r) ? r->valuestring : "");
}

/* TokenReview: the user (a copy the caller deletes) or NULL. */
static int review_token(cJSON **user, ft_kube_client_t *client,
			const char *token, char *why, size_t size)
{
	cJSON *root = review("authentication.k8s.io/v1", "TokenReview");
	cJSON *reply = NULL;
	const cJSON *st;
	int rc;

	*user = NULL;
	if (root &&
	    !cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "spec"),
				     "token", token)) {
		cJSON_Delete(root);
		root = NULL;
	}
	if ((rc = create_review(&reply, client,
				"/apis/authentication.k8s.io/v1/tokenreviews",
				root, "tokenreview")) < 0)
		return rc;
	st = status_of(reply);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated")))
		*user = cJSON_Duplicate(
		    cJSON_GetObjectItemCaseSensitive(st, "user"), 1);
	else
		copy_reason(why, size, st, "error");
	cJSON_Delete(reply);
	return 0;
}

/* The SubjectAccessReview spec for `user` (TokenReview's UserInfo). */
static cJSON *access_spec(const cJSON *user, const char *path, const char *verb)
{
	static const char *const keys[][2] = {{"username", "user"},
					      {"uid", "uid"},
					      {"groups", "groups"},
					      {"extra", "extra"}};
	cJSON *spec = cJSON_CreateObject(), *attrs;

	for (unsigned i = 0; spec && i < 4; i++) {
		const cJSON *v =
		    cJSON_GetObjectItemCaseSensitive(user, keys[i][0]);
		if (v)
			cJSON_AddItemToObject(spec, keys[i][1],
					      cJSON_Duplicate(v, 1));
	}
	attrs = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
	if (!cJSON_AddStringToObject(attrs, "path", path) ||
	    !cJSON_AddStringToObject(attrs, "verb", verb)) {
		cJSON_Delete(spec);
		return NULL;
	}
	return spec;
}

static int review_access(bool *allowed, ft_kube_client_t *client,
			 const cJSON *user, const char *path, const char *verb,
			 char *why, size_t size)
{
	cJSON *root = review("authorization.k8s.io/v1", "SubjectAccessReview");
	cJSON *spec = access_spec(user, path, verb), *reply = NULL;
	int rc;

	if (!root || !spec || !cJSON_AddItemToObject(root, "spec", spec)) {
		cJSON_Delete(spec);
		cJSON_Delete(root);
		root = NULL;
	}
	if ((rc = create_review(
		 &reply, client,
		 "/apis/authorization.k8s.io/v1/subjectaccessreviews", root,
		 "subjectaccessreview")) < 0)
		return rc;
	*allowed = cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(status_of(reply), "allowed"));
	copy_reason(why, size, status_of(reply), "reason");
	cJSON_Delete(reply);
	return 0;
}

int ft_kube_review_access(ft_kube_client_t *client, const char *token,
			  const char *path, const char *verb,
			  ft_kube_access_t *out, char *why, size_t size)
{
	cJSON *user = NULL;
	bool allowed = false;
	int rc;

	*out = FT_KUBE_UNAUTHENTICATED;
	if (size)
		why[0] = '\0';
	if ((rc = review_token(&user, client, token, why, size)) < 0 || !user)
		return rc;
	if ((rc = review_access(&allowed, client, user, path, verb, why,
				size)) == 0)
		*out = allowed ? FT_KUBE_ALLOWED : FT_KUBE_DENIED;
	cJSON_Delete(user);
	return rc;
}
