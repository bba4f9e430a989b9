/*
 * The one clock of the edges: CLOCK_MONOTONIC, for durations and deadlines
 * (cache age, request latency, watch backoff, how long a Binding has been
 * unanswered). The core reads no clock; it is handed times.
 */
#ifndef FLEXTOPO_CLOCK_H
#define FLEXTOPO_CLOCK_H

#include <stdint.h>

/* Nanoseconds of CLOCK_MONOTONIC: since an unspecified start. */
uint64_t ft_clock_ns(void);

/* Milliseconds of the same clock. */
uint64_t ft_clock_ms(void);

#endif
