/*
 * CPU sets as fixed bitmaps and their cpulist text form.
 *
 * Fixed size keeps a set inside the structs that hold it (no allocation on the
 * scheduling path) and makes every operation a short loop over words.
 */
#include <flextopo/cpuset.h>
#include <flextopo/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS (FT_CPU_MAX / 64)

void ft_cpuset_clear(ft_cpuset_t *set)
{
	memset(set, 0, sizeof(*set));
}

void ft_cpuset_add(ft_cpuset_t *set, unsigned cpu)
{
	if (cpu < FT_CPU_MAX)
		set->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}

bool ft_cpuset_has(const ft_cpuset_t *set, unsigned cpu)
{
	return cpu < FT_CPU_MAX && (set->w[cpu / 64] >> (cpu % 64)) & 1;
}

/*
 * Counting bits is most of what the victim search spends, and without an
 * instruction for it every word costs a call into libgcc. On x86-64 the
 * function is built twice, with POPCNT (every x86-64 server CPU since
 * 2008) and without, and the loader picks the one the CPU runs.
 */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NO_CLONES /* the clone resolver runs before TSan's runtime */
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define NO_CLONES
#endif
/*
 * clang 14 names the dispatcher "ft_cpuset_count.ifunc", so callers in other
 * files do not link; clang expands the builtin inline without POPCNT anyway.
 */
#if defined(__clang__)
#define NO_CLONES
#endif
#if defined(__x86_64__) && defined(__has_attribute) && !defined(NO_CLONES)
#if __has_attribute(target_clones)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#endif
#endif
#ifndef POPCNT_CLONES
#define POPCNT_CLONES
#endif

POPCNT_CLONES unsigned ft_cpuset_count(const ft_cpuset_t *set)
{
	unsigned n = 0;

	for (int i = 0; i < WORDS; i++)
		n += (unsigned)__builtin_popcountll(set->w[i]);
	return n;
}

bool ft_cpuset_empty(const ft_cpuset_t *set)
{
	for (int i = 0; i < WORDS; i++)
		if (set->w[i])
			return false;
	return true;
}

void ft_cpuset_or(ft_cpuset_t *out, const ft_cpuset_t *a, const ft_cpuset_t *b)
{
	for (int i = 0; i < WORDS; i++)
		out->w[i] = a->w[i] | b->w[i];
}

void ft_cpuset_and(ft_cpuset_t *out, const ft_cpuset_t *a, const ft_cpuset_t *b)
{
	for (int i = 0; i < WORDS; i++)
		out->w[i] = a->w[i] & b->w[i];
}

void ft_cpuset_andnot(ft_cpuset_t *out, const ft_cpuset_t *a,
		      const ft_cpuset_t *b)
{
	for (int i = 0; i < WORDS; i++)
		out->w[i] = a->w[i] & ~b->w[i];
}

bool ft_cpuset_intersects(const ft_cpuset_t *a, const ft_cpuset_t *b)
{
	for (int i = 0; i < WORDS; i++)
		if (a->w[i] & b->w[i])
			return true;
	return false;
}

bool ft_cpuset_equal(const ft_cpuset_t *a, const ft_cpuset_t *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

/* Read a decimal CPU id at *p; advances *p. -1 when there is none or it is too
 * big. */
static long read_cpu(const char **p)
{
	char *end = NULL;
	long v;

	if (**p < '0' || **p > '9')
		return -1;
	v = strtol(*p, &end, 10);
	*p = end;
	return v < FT_CPU_MAX ? v : -1;
}

int ft_cpuset_parse(ft_cpuset_t *out, const char *text)
{
	const char *p = text;
	long lo, hi;

	ft_cpuset_clear(out);
	while (*p) {
		lo = hi = read_cpu(&p);
		if (lo >= 0 && *p == '-') {
			p++;
			hi = read_cpu(&p);
		}
		if (lo < 0 || hi < lo || (*p && *p != ','))
			goto bad;
		for (long c = lo; c <= hi; c++)
			ft_cpuset_add(out, (unsigned)c);
		if (*p == ',' && *++p == '\0')
			goto bad;
	}
	return 0;
bad:
	ft_cpuset_clear(out);
	return ft_error_set(
	    FT_EINVAL,
	    "cpulist \"%s\": bad range at offset %ld (CPU ids 0-%d, ranges low-high)",
	    text, (long)(p - text), FT_CPU_MAX - 1);
}

size_t ft_cpuset_format(char *buf, size_t size, const ft_cpuset_t *set)
{
	size_t len = 0;
	int n;

	if (size)
		buf[0] = '\0';
	for (unsigned c = 0; c < FT_CPU_MAX; c++) {
		unsigned end = c;
		if (!ft_cpuset_has(set, c))
			continue;
		while (end + 1 < FT_CPU_MAX && ft_cpuset_has(set, end + 1))
			end++;
		if (end == c)
			n = snprintf(len < size ? buf + len : NULL,
				     len < size ? size - len : 0, "%s%u",
				     len ? "," : "", c);
		else
			n = snprintf(len < size ? buf + len : NULL,
				     len < size ? size - len : 0, "%s%u-%u",
				     len ? "," : "", c, end);
		len += (size_t)n;
		c = end;
	}
	return len;
}

unsigned ft_cpuset_take_lowest(ft_cpuset_t *out, const ft_cpuset_t *from,
			       unsigned n)
{
	unsigned taken = 0;

	ft_cpuset_clear(out);
	for (unsigned c = 0; c < FT_CPU_MAX && taken < n; c++) {
		if (ft_cpuset_has(from, c)) {
			ft_cpuset_add(out, c);
			taken++;
		}
	}
	return taken;
}
