/*
 * Kubernetes API server client over libcurl: credentials, plain requests,
 * list+watch informers, and the two writes the extender makes at bind time.
 *
 * Credentials come from a kubeconfig (token, client certificate and key, CA,
 * as files or inline base64 data) or from the in-cluster service account
 * (KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/
 * serviceaccount/{token,ca.crt}); a token file is re-read before each request
 * because projected service-account tokens rotate.
 *
 * Watch semantics follow client-go (k8s.io/client-go/tools/cache/reflector.go):
 * watch from the list's resourceVersion with allowWatchBookmarks=true and a
 * random timeoutSeconds of 300-600, resume from the last seen resourceVersion
 * after a clean end, relist at once when a watch answers 410 Gone (or an
 * in-stream ERROR event with code 410), back off 0.8 s doubling to 30 s with
 * jitter on failures, reset after two healthy minutes. Unlike client-go,
 * every list is a consistent read (resourceVersion unset) and a failed watch
 * relists rather than resumes (informer.c says why).
 */
#ifndef FLEXTOPO_KUBE_H
#define FLEXTOPO_KUBE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct ft_kube_credentials {
	char *server;	  /* "https://host:port", no trailing slash */
	char *token;	  /* bearer token, or NULL */
	char *token_file; /* re-read before each request when set */
	char *ca_file;	  /* PEM file, or NULL */
	char *ca_pem; /* PEM text (from certificate-authority-data), or NULL */
	char *cert_pem;	 /* client certificate PEM text, or NULL */
	char *key_pem;	 /* client key PEM text, or NULL */
	char *cert_file; /* client certificate file, or NULL */
	char *key_file;	 /* client key file, or NULL */
	bool insecure;	 /* insecure-skip-tls-verify */
} ft_kube_credentials_t;

/*
 * Read the current context of a kubeconfig (YAML). FT_EIO when the file
 * cannot be read, FT_EINVAL naming the file and the missing or bad field.
 */
int ft_kube_credentials_from_kubeconfig(ft_kube_credentials_t *out,
					const char *path);

/* In-cluster service account; FT_ENOTFOUND outside a pod. */
int ft_kube_credentials_in_cluster(ft_kube_credentials_t *out);

void ft_kube_credentials_dispose(ft_kube_credentials_t *creds);

typedef struct ft_kube_client ft_kube_client_t;

/* Copies `creds`. `timeout_ms` bounds each plain request. */
int ft_kube_client_new(ft_kube_client_t **out,
		       const ft_kube_credentials_t *creds, long timeout_ms);
void ft_kube_client_free(ft_kube_client_t *client);

/*
 * One request. `body` may be NULL. On return *status holds the HTTP status
 * (0 when no answer came) and, when `out_body` is not NULL, *out_body a
 * NUL-terminated heap copy of the reply the caller frees (NULL on transport
 * failure). Returns 0 when an HTTP answer arrived, whatever its status;
 * FT_EUNAVAIL when nothing was sent (no connection, unreadable credentials);
 * FT_EIO on transport failure after the request may have been sent (then
 * *status holds what came, if any). Thread-safe.
 */
int ft_kube_request(ft_kube_client_t *client, const char *method,
		    const char *path, const char *content_type,
		    const char *body, size_t body_len, long *status,
		    char **out_body);

/*
 * POST a v1 Binding of pod ns/name (uid, or NULL) to `node`, carrying the
 * annotation key: value in its metadata (key NULL: none). kube-apiserver
 * merges a Binding's annotations into the pod in the update that sets its
 * node (pkg/registry/core/pod/storage/storage.go,
 * BindingREST.setPodNodeAndMetadata), so both land together or not at all.
 * 0 when bound (2xx, even if the reply was cut short); FT_ECONFLICT when the
 * pod already has a node (409): the caller reads the pod to see whether it
 * is the same node; FT_ENOTFOUND (404); FT_EIO for another 4xx: a refusal;
 * FT_EINVAL (no node, an empty key or a key without value) and FT_EUNAVAIL
 * (nothing sent) before any request. FT_EUNKNOWN when the request was sent
 * and no status came (timeout, reset, a reply cut short) or a 5xx came: the
 * Binding may have been written, now or later (pods.c says why), and only
 * the pod itself can tell.
 */
int ft_kube_bind_pod(ft_kube_client_t *client, const char *ns, const char *name,
		     const char *uid, const char *node, const char *key,
		     const char *value);

/*
 * GET a pod; *out is a cJSON tree the caller deletes. FT_ENOTFOUND (404),
 * FT_EUNAVAIL (nothing sent), FT_EIO (any other failure).
 */
int ft_kube_get_pod(ft_kube_client_t *client, const char *ns, const char *name,
		    cJSON **out);

/* GET a ResourceClaim (resource.k8s.io/v1); the same contract. */
int ft_kube_get_claim(ft_kube_client_t *client, const char *ns,
		      const char *name, cJSON **out);

/* A core/v1 Event about a pod; every string borrowed. */
typedef struct ft_kube_event {
	const char *ns, *name, *uid; /* the pod; uid may be NULL */
	const char *type;	     /* "Normal" or "Warning" */
	const char *reason; /* UpperCamelCase, e.g. "AllocationConflict" */
	const char *message;
} ft_kube_event_t;

/*
 * POST an Event about a pod (POST /api/v1/namespaces/NS/events, named by
 * the API server from the pod's name), as kube-scheduler's event recorder
 * writes one: source and reportingComponent "flextopo-extender",
 * reportingInstance the host name, first and last timestamp now, count 1.
 * Needs RBAC create on events. FT_EINVAL (no namespace or name), FT_EIO
 * naming the status and the API server's message, FT_EUNAVAIL, FT_ENOMEM.
 */
int ft_kube_post_pod_event(ft_kube_client_t *client, const ft_kube_event_t *e);

typedef enum {
	FT_KUBE_ALLOWED = 0,
	FT_KUBE_UNAUTHENTICATED = 1, /* the TokenReview did not authenticate */
	FT_KUBE_DENIED = 2,	     /* the user may not */
} ft_kube_access_t;

/*
 * May the bearer `token` use `verb` on the non-resource `path`? A
 * TokenReview (authentication.k8s.io/v1) names the user, then a
 * SubjectAccessReview (authorization.k8s.io/v1) with its username, uid,
 * groups and extra decides, as kube-scheduler's secure port delegates both
 * (k8s.io/apiserver, the delegating authenticator and authorizer). *out
 * says which; `why` (of `size` bytes) gets the review's error or reason.
 * 0 when both answered; FT_EIO or FT_EUNAVAIL when the API server did not
 * (the request was not judged), FT_ENOMEM. The client's credentials need
 * create on tokenreviews and subjectaccessreviews.
 */
int ft_kube_review_access(ft_kube_client_t *client, const char *token,
			  const char *path, const char *verb,
			  ft_kube_access_t *out, char *why, size_t size);

typedef enum {
	FT_WATCH_ADDED = 0,
	FT_WATCH_MODIFIED = 1,
	FT_WATCH_DELETED = 2,
} ft_watch_event_t;

/*
 * What an informer tells its owner, always from the informer's own thread,
 * never two calls at once for one informer. A relist is bracketed by
 * replace_begin / replace_end: objects not re-announced between them are
 * gone. `object` is borrowed for the duration of the call.
 */
typedef struct ft_informer_handler {
	void (*replace_begin)(void *payload);
	void (*apply)(ft_watch_event_t type, const cJSON *object,
		      void *payload);
	void (*replace_end)(void *payload);
} ft_informer_handler_t;

typedef struct ft_informer ft_informer_t;

/*
 * Start a thread that lists and watches `collection` (e.g. "/api/v1/nodes",
 * "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"). The client must
 * outlive the informer. *out is set before the thread starts, so that the
 * handlers may read it (ft_informer_synced).
 */
int ft_informer_start(ft_informer_t **out, ft_kube_client_t *client,
		      const char *collection, const ft_informer_handler_t *h,
		      void *payload, unsigned backoff_initial_ms,
		      unsigned backoff_max_ms);

/*
 * The same for a collection the API server may not serve (an API group not
 * enabled, such as resource.k8s.io/v1 on an older cluster): a list answered
 * 404 is a complete empty list (its objects, if any, are removed), the
 * informer stays synced and asks again every backoff_max_ms.
 */
int ft_informer_start_optional(ft_informer_t **out, ft_kube_client_t *client,
			       const char *collection,
			       const ft_informer_handler_t *h, void *payload,
			       unsigned backoff_initial_ms,
			       unsigned backoff_max_ms);

/*
 * True while what the informer delivered is complete: from the end of a list
 * (replace_end returned) until its watch fails or answers 410, when it may
 * have missed events; it is true again once the relist that follows has been
 * delivered. False before the first list. Any thread.
 */
bool ft_informer_synced(const ft_informer_t *informer);

/* Number of times the watch was re-established after an error or 410. */
unsigned long ft_informer_restarts(const ft_informer_t *informer);

/* Stop the thread (interrupts a blocked watch) and free. NULL is fine. */
void ft_informer_free(ft_informer_t *informer);

#endif
