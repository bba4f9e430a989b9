/*
 * Standard base64 decoding for the *-data fields of a kubeconfig.
 *
 * libcurl keeps its base64 code private and the kube library links nothing
 * else that exposes one, so this small decoder lives here.
 */
#ifndef FLEXTOPO_KUBE_BASE64_H
#define FLEXTOPO_KUBE_BASE64_H

#include <stddef.h>

/*
 * Decode `len` bytes of standard base64 (RFC 4648 section 4). ASCII
 * whitespace is skipped; padding may be present or left out. On success *out
 * is a NUL-terminated heap buffer the caller frees and *out_len (when not
 * NULL) its length without the NUL. FT_EINVAL on a character outside the
 * alphabet, misplaced padding or a dangling final character; FT_ENOMEM.
 */
int ft_kube_base64_decode(char **out, size_t *out_len, const char *in,
			  size_t len);

#endif
