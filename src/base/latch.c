/*
 * The stop latch (latch.h): a mutex, a condition variable on
 * CLOCK_MONOTONIC and an atomic flag.
 */
#include <flextopo/error.h>
#include <flextopo/latch.h>

#include <errno.h>
#include <time.h>

int ft_latch_init(ft_latch_t *latch, const char *what)
{
	pthread_condattr_t attr;
	int rc = 0;

	atomic_init(&latch->set, false);
	if (pthread_condattr_init(&attr) != 0)
		return ft_error_set(FT_ENOMEM, "%s: condattr", what);
	if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&latch->wake, &attr) != 0)
		rc = ft_error_set(FT_ENOMEM, "%s: condition variable", what);
	else if (pthread_mutex_init(&latch->lock, NULL) != 0) {
		pthread_cond_destroy(&latch->wake);
		rc = ft_error_set(FT_ENOMEM, "%s: mutex", what);
	}
	pthread_condattr_destroy(&attr);
	return rc;
}

void ft_latch_dispose(ft_latch_t *latch)
{
	pthread_cond_destroy(&latch->wake);
	pthread_mutex_destroy(&latch->lock);
}

void ft_latch_set(ft_latch_t *latch)
{
	atomic_store(&latch->set, true);
	pthread_mutex_lock(&latch->lock);
	pthread_cond_broadcast(&latch->wake);
	pthread_mutex_unlock(&latch->lock);
}

bool ft_latch_is_set(const ft_latch_t *latch)
{
	return atomic_load(&latch->set);
}

bool ft_latch_sleep(ft_latch_t *latch, unsigned ms)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&latch->lock);
	while (!ft_latch_is_set(latch) &&
	       pthread_cond_timedwait(&latch->wake, &latch->lock, &deadline) !=
		   ETIMEDOUT)
		continue;
	pthread_mutex_unlock(&latch->lock);
	return ft_latch_is_set(latch);
}
