/*
 * A growable byte buffer for writing replies without an intermediate tree.
 *
 * Used where a reply is large and regular (a score per node, a name per
 * node) and building it through cJSON costs more than the placement itself.
 * Errors are sticky: after a failed allocation every append is a no-op and
 * ft_buf_detach() reports FT_ENOMEM.
 */
#ifndef FLEXTOPO_BUF_H
#define FLEXTOPO_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ft_buf {
	char *data;
	size_t len;
	size_t cap;
	bool failed;
} ft_buf_t;

/* Caller storage; `hint` bytes are reserved up front (0 is fine). */
void ft_buf_init(ft_buf_t *b, size_t hint);
void ft_buf_dispose(ft_buf_t *b);

void ft_buf_put(ft_buf_t *b, const char *s, size_t n);
void ft_buf_puts(ft_buf_t *b, const char *s);
void ft_buf_put_uint(ft_buf_t *b, uint64_t v);
/*
 * A JSON string literal of the NUL-terminated `s`: in quotes, " and \ as
 * \" and \\, control characters and (as Go's encoder does) <, > and & as
 * \u00XX, valid UTF-8 as it is, and each byte that is not part of a valid
 * UTF-8 sequence as \ufffd, so that the output is valid JSON whatever `s`
 * holds. The one JSON string writer of the project: the codec's replies,
 * the server's error bodies and the log's fields all use it.
 */
void ft_buf_put_json_string(ft_buf_t *b, const char *s);

/*
 * Length of the valid UTF-8 sequence at `s` (1 to 4), or 0 when it is not
 * one (overlong forms, surrogates and code points above U+10FFFF
 * included).
 */
size_t ft_utf8_sequence_len(const unsigned char *s);

/* Whether the NUL-terminated `s` is valid UTF-8 throughout (RFC 3629). */
bool ft_utf8_valid(const char *s);

/* `n` bytes of `data` in standard base64 (RFC 4648 section 4), padded. */
void ft_buf_put_base64(ft_buf_t *b, const void *data, size_t n);

/*
 * Hand over the NUL-terminated contents (the caller frees them) and reset
 * the buffer. FT_ENOMEM if any append failed; then *out is NULL.
 */
int ft_buf_detach(char **out, ft_buf_t *b);

#endif
