/*
 * CLOCK_MONOTONIC in nanoseconds and milliseconds: one reading function for
 * every edge that measures durations.
 */
#include <flextopo/clock.h>

#include <time.h>

uint64_t ft_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ft_clock_ms(void)
{
	return ft_clock_ns() / 1000000u;
}
