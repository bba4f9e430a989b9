/*
 * A fixed pool of threads that run the handlers of offloaded routes, so
 * that a request waiting on something slow (a bind on a slow or frozen API
 * server: up to apiTimeoutMs) never delays a filter or prioritize queued
 * behind it on a libmicrohttpd worker.
 *
 * One mutex guards a FIFO of intrusive jobs; the threads wait on a
 * condition variable. Stopping wakes them all: a thread that finds the
 * pool stopping takes the queued jobs and runs them cancelled, so that
 * every suspended connection is completed before libmicrohttpd stops
 * (which must never see a suspended connection).
 */
#include "offload.h"

#include <flextopo/error.h>

#include <pthread.h>
#include <stdlib.h>

struct ft_offload {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	ft_offload_job_t *head, *tail;
	bool stopping;
	bool stopped; /* threads joined */
	unsigned n_threads;
	pthread_t *threads;
};

/* The next job, or NULL when stopping with nothing queued. */
static ft_offload_job_t *take(ft_offload_t *pool, bool *cancelled)
{
	ft_offload_job_t *job;

	pthread_mutex_lock(&pool->lock);
	while (!pool->head && !pool->stopping)
		pthread_cond_wait(&pool->wake, &pool->lock);
	job = pool->head;
	if (job) {
		pool->head = job->next;
		if (!pool->head)
			pool->tail = NULL;
		job->next = NULL;
	}
	*cancelled = pool->stopping;
	pthread_mutex_unlock(&pool->lock);
	return job;
}

static void *worker(void *arg)
{
	ft_offload_t *pool = arg;
	ft_offload_job_t *job;
	bool cancelled;

	while ((job = take(pool, &cancelled)))
		job->run(job, cancelled);
	return NULL;
}

static int start_threads(ft_offload_t *pool, unsigned threads)
{
	for (; pool->n_threads < threads; pool->n_threads++)
		if (pthread_create(&pool->threads[pool->n_threads], NULL,
				   worker, pool) != 0)
			return ft_error_set(
			    FT_EIO, "server: cannot start offload thread %u",
			    pool->n_threads);
	return 0;
}

int ft_offload_new(ft_offload_t **out, unsigned threads)
{
	ft_offload_t *pool = calloc(1, sizeof(*pool));
	int rc;

	*out = NULL;
	if (threads == 0)
		threads = 1;
	if (!pool || !(pool->threads = calloc(threads, sizeof(pthread_t)))) {
		free(pool);
		return ft_error_set(FT_ENOMEM, "server: out of memory");
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->wake, NULL);
	if ((rc = start_threads(pool, threads)) < 0) {
		ft_offload_free(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

bool ft_offload_submit(ft_offload_t *pool, ft_offload_job_t *job)
{
	bool queued = false;

	job->next = NULL;
	pthread_mutex_lock(&pool->lock);
	if (!pool->stopping) {
		if (pool->tail)
			pool->tail->next = job;
		else
			pool->head = job;
		pool->tail = job;
		queued = true;
		pthread_cond_signal(&pool->wake);
	}
	pthread_mutex_unlock(&pool->lock);
	return queued;
}

void ft_offload_stop(ft_offload_t *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = true;
	pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->lock);
	if (pool->stopped)
		return;
	for (unsigned i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	pool->stopped = true;
}

void ft_offload_free(ft_offload_t *pool)
{
	if (!pool)
		return;
	ft_offload_stop(pool);
	pthread_cond_destroy(&pool->wake);
	pthread_mutex_destroy(&pool->lock);
	free(pool->threads);
	free(pool);
}
