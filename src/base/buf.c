/*
 * Growable byte buffer with sticky allocation failure.
 *
 * Doubling growth keeps appends amortised O(1); the failure flag lets a
 * writer append a whole reply and check once at the end.
 */
#include <flextopo/buf.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ft_buf_init(ft_buf_t *b, size_t hint)
{
	memset(b, 0, sizeof(*b));
	if (hint && (b->data = malloc(hint)))
		b->cap = hint;
}

void ft_buf_dispose(ft_buf_t *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static bool reserve(ft_buf_t *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	char *grown;

	if (b->failed)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	while (cap < b->len + more + 1)
		cap *= 2;
	grown = realloc(b->data, cap);
	if (!grown) {
		b->failed = true;
		return false;
	}
	b->data = grown;
	b->cap = cap;
	return true;
}

void ft_buf_put(ft_buf_t *b, const char *s, size_t n)
{
	if (!n || !reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

void ft_buf_puts(ft_buf_t *b, const char *s)
{
	ft_buf_put(b, s, strlen(s));
}

void ft_buf_put_uint(ft_buf_t *b, uint64_t v)
{
	char digits[24];
	size_t n = sizeof(digits);

	do {
		digits[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	ft_buf_put(b, digits + n, sizeof(digits) - n);
}

/*
 * Bytes that a JSON string cannot carry as they are (control characters,
 * quote, backslash), the <, > and & that Go's encoder escapes too, and
 * every byte of 0x80 and up, which is written only as part of a valid UTF-8
 * sequence. A table: replies carry thousands of node names and reasons, and
 * one load per byte is most of what writing them costs.
 */
/* clang-format off */
static const bool escaped[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00..0x0f */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10..0x1f */
	['"'] = 1, ['\\'] = 1, ['<'] = 1, ['>'] = 1, ['&'] = 1,
	[0x80] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x90..0x9f */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xf0..0xff */
};
/* clang-format on */

static bool plain(unsigned char c)
{
	return !escaped[c];
}

/* Write "s" at once when nothing in it needs escaping, as node names. */
static bool put_plain_string(ft_buf_t *b, const char *s)
{
	size_t n = 0;

	while (plain((unsigned char)s[n]))
		n++;
	if (s[n] || !reserve(b, n + 2))
		return s[n] == '\0';
	b->data[b->len] = '"';
	memcpy(b->data + b->len + 1, s, n);
	b->data[b->len + 1 + n] = '"';
	b->len += n + 2;
	return true;
}

size_t ft_utf8_sequence_len(const unsigned char *s)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

	if (n == 0 || s[0] > 0xf4)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	}
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

bool ft_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 1;

	while (*p && n > 0) {
		n = *p < 0x80 ? 1 : ft_utf8_sequence_len(p);
		p += n;
	}
	return n > 0;
}

/* The escape of the byte at `s` into `esc`; returns the bytes of `s` it
 * stands for (a whole UTF-8 sequence is copied as it is). */
static size_t escape_one(char esc[8], size_t *len, const unsigned char *s)
{
	size_t n;

	if (*s == '"' || *s == '\\') {
		esc[0] = '\\';
		esc[1] = (char)*s;
		*len = 2;
		return 1;
	}
	if (*s >= 0x80 && (n = ft_utf8_sequence_len(s)) > 0) {
		memcpy(esc, s, n);
		*len = n;
		return n;
	}
	/* Control characters, <, >, &; U+FFFD for a broken sequence. */
	*len = (size_t)snprintf(esc, 8, "\\u%04x", *s >= 0x80 ? 0xfffd : *s);
	return 1;
}

void ft_buf_put_json_string(ft_buf_t *b, const char *s)
{
	char esc[8];
	size_t len;

	if (put_plain_string(b, s))
		return;
	ft_buf_put(b, "\"", 1);
	while (*s) {
		size_t run = 0;
		while (s[run] && plain((unsigned char)s[run]))
			run++;
		ft_buf_put(b, s, run);
		s += run;
		if (!*s)
			break;
		s += escape_one(esc, &len, (const unsigned char *)s);
		ft_buf_put(b, esc, len);
	}
	ft_buf_put(b, "\"", 1);
}

void ft_buf_put_base64(ft_buf_t *b, const void *data, size_t n)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	char quad[4];

	for (size_t i = 0; i < n; i += 3) {
		uint32_t w = (uint32_t)p[i] << 16;
		size_t left = n - i;
		w |= left > 1 ? (uint32_t)p[i + 1] << 8 : 0;
		w |= left > 2 ? p[i + 2] : 0;
		quad[0] = alphabet[w >> 18];
		quad[1] = alphabet[w >> 12 & 63];
		quad[2] = left > 1 ? alphabet[w >> 6 & 63] : '=';
		quad[3] = left > 2 ? alphabet[w & 63] : '=';
		ft_buf_put(b, quad, 4);
	}
}

int ft_buf_detach(char **out, ft_buf_t *b)
{
	*out = NULL;
	if (!reserve(b, 0)) {
		ft_buf_dispose(b);
		return ft_error_set(FT_ENOMEM, "reply: out of memory");
	}
	b->data[b->len] = '\0';
	*out = b->data;
	memset(b, 0, sizeof(*b));
	return 0;
}
