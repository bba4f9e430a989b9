/*
 * Who may read /metrics on the metrics listener (config metricsListen): the
 * request's bearer token, judged by the API server with a TokenReview and a
 * SubjectAccessReview for "get" on the non-resource URL /metrics
 * (ft_kube_review_access), the way kube-scheduler's secure port judges its
 * scrapers, so that one ServiceMonitor with one token scrapes both.
 *
 * Decisions are cached by the token's SHA-256 for 10 s, allowed or denied
 * (k8s.io/apiserver's delegating authenticator and authorizer cache for
 * 10 s too), at most FT_ACCESS_CACHE tokens; an API server that does not
 * answer is not cached.
 */
#ifndef FLEXTOPO_ACCESS_H
#define FLEXTOPO_ACCESS_H

#include <stddef.h>

#include "kube.h"

#define FT_ACCESS_CACHE 64

typedef struct ft_access ft_access_t;

/* `kube` outlives the checker. FT_ENOMEM. */
int ft_access_new(ft_access_t **out, ft_kube_client_t *kube);
void ft_access_free(ft_access_t *access);

/*
 * The HTTP status for a request whose Authorization header is
 * `authorization` (NULL when absent) on `path`: 200 (allowed), 401 (no
 * bearer token, or one the API server does not authenticate), 403 (the
 * user may not get `path`) or 503 (the API server did not answer). `why`
 * (of `size` bytes) says why for an error reply. Thread-safe.
 */
int ft_access_check(ft_access_t *access, const char *authorization,
		    const char *path, char *why, size_t size);

#endif
