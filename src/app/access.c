/*
 * The /metrics access check (access.h): bearer token -> cached decision ->
 * TokenReview and SubjectAccessReview. The cache keeps SHA-256 digests,
 * never tokens, in a small array under a mutex; the oldest entry gives way.
 */
#include <flextopo/access.h>
#include <flextopo/clock.h>
#include <flextopo/error.h>

#include <gnutls/crypto.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TTL_NS	    (UINT64_C(10) * 1000000000u)
#define DIGEST_SIZE 32

typedef struct {
	unsigned char digest[DIGEST_SIZE];
	int status; /* 200, 401 or 403 */
	uint64_t expires_ns;
} entry_t;

struct ft_access {
	ft_kube_client_t *kube;
	pthread_mutex_t lock;
	entry_t cache[FT_ACCESS_CACHE];
};

int ft_access_new(ft_access_t **out, ft_kube_client_t *kube)
{
	ft_access_t *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return ft_error_set(FT_ENOMEM, "metrics access: out of memory");
	a->kube = kube;
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

void ft_access_free(ft_access_t *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The token of "Bearer TOKEN" (any case), or NULL. */
static const char *bearer(const char *authorization)
{
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	authorization += 7;
	while (*authorization == ' ')
		authorization++;
	return *authorization ? authorization : NULL;
}

/* A cached status for `digest` still valid at `now`, or 0. */
static int cached(ft_access_t *a, const unsigned char *digest, uint64_t now)
{
	int status = 0;

	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < FT_ACCESS_CACHE && !status; i++)
		if (a->cache[i].expires_ns > now &&
		    memcmp(a->cache[i].digest, digest, DIGEST_SIZE) == 0)
			status = a->cache[i].status;
	pthread_mutex_unlock(&a->lock);
	return status;
}

static void remember(ft_access_t *a, const unsigned char *digest, int status,
		     uint64_t now)
{
	entry_t *slot = &a->cache[0];

	pthread_mutex_lock(&a->lock);
	for (unsigned i = 1; i < FT_ACCESS_CACHE; i++)
		if (a->cache[i].expires_ns < slot->expires_ns)
			slot = &a->cache[i];
	memcpy(slot->digest, digest, DIGEST_SIZE);
	slot->status = status;
	slot->expires_ns = now + TTL_NS;
	pthread_mutex_unlock(&a->lock);
}

/* Ask the API server; the status, or 503 when it did not answer. */
static int judge(ft_access_t *a, const char *token, const char *path, char *why,
		 size_t size)
{
	ft_kube_access_t verdict;

	if (ft_kube_review_access(a->kube, token, path, "get", &verdict, why,
				  size) < 0) {
		snprintf(why, size, "%s", ft_error_last());
		return 503;
	}
	return verdict == FT_KUBE_ALLOWED	    ? 200
	       : verdict == FT_KUBE_UNAUTHENTICATED ? 401
						    : 403;
}

int ft_access_check(ft_access_t *a, const char *authorization, const char *path,
		    char *why, size_t size)
{
	const char *token = bearer(authorization);
	unsigned char digest[DIGEST_SIZE];
	uint64_t now = ft_clock_ns();
	int status;

	if (size)
		why[0] = '\0';
	if (!token) {
		snprintf(why, size, "a bearer token is required");
		return 401;
	}
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), digest) <
	    0) {
		snprintf(why, size, "cannot hash the token");
		return 503;
	}
	if ((status = cached(a, digest, now))) {
		snprintf(why, size, "%s (decided less than 10 s ago)",
			 status == 401 ? "the token is not authenticated"
				       : "the user may not get this path");
		return status;
	}
	status = judge(a, token, path, why, size);
	if (status != 503)
		remember(a, digest, status, now);
	return status;
}
