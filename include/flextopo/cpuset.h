/*
 * Fixed-size CPU sets: logical CPU ids 0..FT_CPU_MAX-1 as a bitmap, with the
 * Linux "cpulist" text form ("0-7,16-23") used in annotations and in
 * /sys/devices/system/node/nodeN/cpulist
 * (Documentation/admin-guide/cputopology.rst).
 */
#ifndef FLEXTOPO_CPUSET_H
#define FLEXTOPO_CPUSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FT_CPU_MAX 512

typedef struct ft_cpuset {
	uint64_t w[FT_CPU_MAX / 64];
} ft_cpuset_t;

void ft_cpuset_clear(ft_cpuset_t *set);
void ft_cpuset_add(ft_cpuset_t *set, unsigned cpu);
bool ft_cpuset_has(const ft_cpuset_t *set, unsigned cpu);
unsigned ft_cpuset_count(const ft_cpuset_t *set);
bool ft_cpuset_empty(const ft_cpuset_t *set);
/* out = a | b, a & b, a & ~b; `out` may alias an input. */
void ft_cpuset_or(ft_cpuset_t *out, const ft_cpuset_t *a, const ft_cpuset_t *b);
void ft_cpuset_and(ft_cpuset_t *out, const ft_cpuset_t *a,
		   const ft_cpuset_t *b);
void ft_cpuset_andnot(ft_cpuset_t *out, const ft_cpuset_t *a,
		      const ft_cpuset_t *b);
bool ft_cpuset_intersects(const ft_cpuset_t *a, const ft_cpuset_t *b);
bool ft_cpuset_equal(const ft_cpuset_t *a, const ft_cpuset_t *b);

/*
 * Parse a cpulist ("0-3,8,10-11"; "" is the empty set). FT_EINVAL with the
 * offending position for bad syntax, a reversed range or a CPU id at or above
 * FT_CPU_MAX.
 */
int ft_cpuset_parse(ft_cpuset_t *out, const char *text);

/*
 * Write the canonical cpulist into buf (always NUL-terminated). Returns the
 * length it needed, like snprintf.
 */
size_t ft_cpuset_format(char *buf, size_t size, const ft_cpuset_t *set);

/*
 * out = the `n` lowest CPUs of `from`. Returns the number taken (< n when
 * `from` holds fewer).
 */
unsigned ft_cpuset_take_lowest(ft_cpuset_t *out, const ft_cpuset_t *from,
			       unsigned n);

#endif
