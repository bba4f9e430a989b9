/*
 * A stop latch: set once, by the owner of a background thread; the thread
 * sleeps on it between rounds and wakes at once when it is set. `set` is an
 * atomic that a transfer can poll too (a libcurl progress callback), so
 * that one flag stops both the sleep and the request in progress.
 * The sleep runs on CLOCK_MONOTONIC: a change of the wall clock does not
 * stretch it.
 */
#ifndef FLEXTOPO_LATCH_H
#define FLEXTOPO_LATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct ft_latch {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	atomic_bool set;
} ft_latch_t;

/* Caller storage; FT_ENOMEM naming `what` when it cannot be set up. */
int ft_latch_init(ft_latch_t *latch, const char *what);
void ft_latch_dispose(ft_latch_t *latch);

/* Set it and wake every sleeper. Any thread. */
void ft_latch_set(ft_latch_t *latch);

bool ft_latch_is_set(const ft_latch_t *latch);

/* Sleep up to `ms` milliseconds, less when set. True when set. */
bool ft_latch_sleep(ft_latch_t *latch, unsigned ms);

#endif
