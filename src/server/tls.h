/*
 * TLS credentials of the HTTP server (private to src/server): the PEM files
 * of ft_server_options_t read and checked once, handed to libmicrohttpd as
 * text, and the per-request client-certificate check.
 */
#ifndef FLEXTOPO_SERVER_TLS_H
#define FLEXTOPO_SERVER_TLS_H

#include <flextopo/server.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct ft_tls {
	char *cert;	     /* PEM chain, NUL-terminated */
	char *key;	     /* PEM key, NUL-terminated; wiped when freed */
	size_t key_len;	     /* bytes to wipe */
	char *client_ca;     /* PEM CA certificates, or NULL */
	char **public_paths; /* NULL-terminated, or NULL */
} ft_tls_t;

/*
 * Read and check the TLS files named in `opts`. `*out` is NULL when TLS is
 * off (no certificate and no key). Errors as ft_server_new() documents.
 */
int ft_tls_new(ft_tls_t **out, const ft_server_options_t *opts);

/*
 * Whether a request for `path` on the TLS session `session` (a
 * gnutls_session_t, NULL when unknown) may proceed: always without a client
 * CA or for a public path; otherwise only with a client certificate that
 * verifies. When refused, `why` (of `size` bytes) says why.
 */
bool ft_tls_client_allowed(char *why, size_t size, const ft_tls_t *tls,
			   void *session, const char *path);

/* Wipe the key and free; NULL is fine. */
void ft_tls_free(ft_tls_t *tls);

#endif
