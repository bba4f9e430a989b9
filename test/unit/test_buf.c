/* The growable buffer: JSON strings as the replies write them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/buf.h>

/* One byte at a time, for strings whose bytes of 0x80 and up stand alone. */
static void reference_json_string(char *out, const char *s)
{
	size_t n = 0;

	out[n++] = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = (char)c;
		} else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
			n += (size_t)sprintf(out + n, "\\u%04x", c);
		} else if (c >= 0x80) {
			/* A lone byte of 0x80 and up is no UTF-8. */
			n += (size_t)sprintf(out + n, "\\ufffd");
		} else {
			out[n++] = (char)c;
		}
	}
	out[n++] = '"';
	out[n] = '\0';
}

static void expect_json_string(const char *s)
{
	char want[6 * 64 + 3];
	ft_buf_t b;
	char *got = NULL;

	reference_json_string(want, s);
	ft_buf_init(&b, 0);
	ft_buf_put_json_string(&b, s);
	assert_int_equal(ft_buf_detach(&got, &b), 0);
	assert_string_equal(got, want);
	free(got);
}

/*
 * Each byte that needs escaping, and bytes at the edges of the ranges, at
 * every position of strings of 0 to 40 bytes: the word-at-a-time scan
 * misses none and escapes nothing else.
 */
static void test_buf__json_string_escapes_every_position(void **state)
{
	static const unsigned char probes[] = {
	    0x01, 0x1f, 0x20, '"',  '\\', '<',	'>',  '&', '=', '?',
	    '%',  '\'', 0x7f, 0x80, 0xa0, 0xc3, 0xff, '!', 'a', 'Z'};
	char s[64];

	for (size_t len = 0; len <= 40; len++) {
		memset(s, 'n', len);
		s[len] = '\0';
		expect_json_string(s);
		for (size_t at = 0; at < len; at++)
			for (size_t p = 0; p < sizeof(probes); p++) {
				s[at] = (char)probes[p];
				expect_json_string(s);
				s[at] = 'n';
			}
	}
	expect_json_string("gpu-node-00042.zone-a.example.com");
	expect_json_string("needs <2> GPUs & \"4\" CPUs\\\t\n");
}

static char *json_of(const char *s)
{
	char *out = NULL;
	ft_buf_t b;

	ft_buf_init(&b, 0);
	ft_buf_put_json_string(&b, s);
	assert_int_equal(ft_buf_detach(&out, &b), 0);
	return out;
}

/*
 * Valid UTF-8 passes as it is; what is not UTF-8 (a cut sequence, an
 * overlong form, a surrogate, a code point past U+10FFFF) becomes U+FFFD
 * byte by byte, so that the output is always valid JSON.
 */
static void test_buf__json_string_utf8(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"Gr\xc3\xbc\xc3\x9f"
	     "e",
	     "\"Gr\xc3\xbc\xc3\x9f"
	     "e\""},
	    {"gpu \xe2\x82\xac \xf0\x9f\x9a\x80",
	     "\"gpu \xe2\x82\xac \xf0\x9f\x9a\x80\""},
	    {"cut \xe2\x82", "\"cut \\ufffd\\ufffd\""},
	    {"overlong \xc0\xaf", "\"overlong \\ufffd\\ufffd\""},
	    {"surrogate \xed\xa0\x80", "\"surrogate \\ufffd\\ufffd\\ufffd\""},
	    {"past \xf4\x90\x80\x80", "\"past \\ufffd\\ufffd\\ufffd\\ufffd\""},
	    {"del \x7f", "\"del \x7f\""},
	};
	(void)state;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = json_of(cases[i].in);
		assert_string_equal(got, cases[i].want);
		free(got);
	}
}

/* Validation agrees with the writer: what it would replace is not valid. */
static void test_buf__utf8_valid(void **state)
{
	(void)state;
	assert_true(ft_utf8_valid(""));
	assert_true(ft_utf8_valid("705ab4f5-6393-11e8"));
	assert_true(ft_utf8_valid("gpu \xe2\x82\xac \xf0\x9f\x9a\x80"));
	assert_false(ft_utf8_valid("cut \xe2\x82"));
	assert_false(ft_utf8_valid("overlong \xc0\xaf"));
	assert_false(ft_utf8_valid("surrogate \xed\xa0\x80"));
	assert_false(ft_utf8_valid("\xff"));
}

/* RFC 4648's test vectors (section 10), and bytes with the high bit set. */
static void test_buf__base64_rfc4648_vectors(void **state)
{
	static const char *const in[] = {
	    "", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\xfe\x80"};
	static const char *const want[] = {
	    "",		"Zg==",	    "Zm8=",	"Zm9v",
	    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "//6A"};
	ft_buf_t b;
	char *got;

	for (unsigned i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		ft_buf_init(&b, 0);
		ft_buf_put_base64(&b, in[i], strlen(in[i]));
		assert_int_equal(ft_buf_detach(&got, &b), 0);
		assert_string_equal(got, want[i]);
		free(got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf__json_string_escapes_every_position),
	    cmocka_unit_test(test_buf__json_string_utf8),
	    cmocka_unit_test(test_buf__utf8_valid),
	    cmocka_unit_test(test_buf__base64_rfc4648_vectors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
