/* Helpers shared by the benchmark programs (flextopo-bench,
 * flextopo-policy-table, flextopo-openb-replay). */
#ifndef FLEXTOPO_BENCH_UTIL_H
#define FLEXTOPO_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

/*
 * A whole number from min to max in `text`, else -1 with a message naming
 * `tool` and the text on stderr.
 */
static inline int bench_parse_ulong(const char *tool, unsigned long *out,
				    const char *text, unsigned long min,
				    unsigned long max)
{
	char *end = NULL;

	errno = 0;
	*out = strtoul(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end || errno || *out < min ||
	    *out > max) {
		fprintf(stderr,
			"%s: \"%s\": expected a number from %lu to %lu\n", tool,
			text, min, max);
		return -1;
	}
	return 0;
}

/* splitmix64 (Steele, Lea and Flood, 2014): a reproducible stream. */
static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in 0..n-1 (0 when n is 0). */
static inline unsigned rng_below(uint64_t *state, unsigned n)
{
	return n ? (unsigned)(rng_next(state) % n) : 0;
}

/* order = a random permutation of 0..n-1 (Fisher-Yates). */
static inline void shuffle(unsigned *order, unsigned n, uint64_t *rng)
{
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	for (unsigned i = n; i > 1; i--) {
		unsigned j = rng_below(rng, i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
}

/* CLOCK_MONOTONIC in microseconds. */
static inline double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The string `key` of `obj`, or "" when it is absent or not a string. */
static inline const char *str_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* The number `key` of `obj` as an int, or 0 when it is absent or not a
 * number. */
static inline int int_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* Append `suffix` to every "uuid" string under `obj` (unique devices per node).
 */
static inline void suffix_uuids(cJSON *obj, const char *suffix)
{
	cJSON *item;
	char buf[256];

	cJSON_ArrayForEach (item, obj) {
		if (cJSON_IsString(item) && item->string &&
		    strcmp(item->string, "uuid") == 0) {
			snprintf(buf, sizeof(buf), "%s%s", item->valuestring,
				 suffix);
			cJSON_SetValuestring(item, buf);
		} else if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
			suffix_uuids(item, suffix);
		}
	}
}

#endif
