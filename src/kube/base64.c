/*
 * Base64 decoding for kubeconfig certificate and key data.
 *
 * The decoder first collects the significant characters (alphabet and
 * padding) so that line breaks in wrapped data cost nothing, then turns each
 * group of four into three bytes. Go's encoding/base64, which writes these
 * fields, pads; unpadded input is accepted too because hand-edited files
 * sometimes lose the padding.
 */
#include "base64.h"

#include <flextopo/error.h>

#include <stdint.h>
#include <stdlib.h>

/* The 6-bit value of an alphabet character, or -1. */
static int sextet(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

/*
 * Copy the 6-bit values of `in` to `vals`, skipping whitespace and stopping
 * at padding, which may only be followed by padding and whitespace.
 */
static int collect(unsigned char *vals, size_t *count, const char *in,
		   size_t len)
{
	size_t n = 0, pad = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int v = sextet(c);

		if (is_space(c))
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		if (v < 0 || pad > 0)
			return FT_EINVAL;
		vals[n++] = (unsigned char)v;
	}
	if (pad > 2 || (pad > 0 && (n + pad) % 4 != 0) || n % 4 == 1)
		return FT_EINVAL;
	*count = n;
	return 0;
}

/* Turn `count` 6-bit values into bytes; returns the number written. */
static size_t assemble(char *out, const unsigned char *vals, size_t count)
{
	size_t o = 0, i = 0;

	for (; i + 4 <= count; i += 4) {
		uint32_t w = (uint32_t)vals[i] << 18 |
			     (uint32_t)vals[i + 1] << 12 |
			     (uint32_t)vals[i + 2] << 6 | vals[i + 3];
		out[o++] = (char)(w >> 16);
		out[o++] = (char)(w >> 8 & 0xff);
		out[o++] = (char)(w & 0xff);
	}
	if (count - i >= 2)
		out[o++] = (char)(vals[i] << 2 | vals[i + 1] >> 4);
	if (count - i == 3)
		out[o++] = (char)((vals[i + 1] & 0x0f) << 4 | vals[i + 2] >> 2);
	return o;
}

int ft_kube_base64_decode(char **out, size_t *out_len, const char *in,
			  size_t len)
{
	unsigned char *vals = NULL;
	char *buf = NULL;
	size_t count = 0, n;
	int rc;

	vals = malloc(len + 1);
	buf = malloc(len / 4 * 3 + 4);
	if (!vals || !buf) {
		rc = ft_error_set(FT_ENOMEM, "base64: out of memory");
		goto cleanup;
	}
	rc = collect(vals, &count, in, len);
	if (rc < 0) {
		ft_error_set(rc, "base64: invalid encoding");
		goto cleanup;
	}
	n = assemble(buf, vals, count);
	buf[n] = '\0';
	if (out_len)
		*out_len = n;
	*out = buf;
	buf = NULL;
cleanup:
	free(vals);
	free(buf);
	return rc;
}
