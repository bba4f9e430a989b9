/*
 * Offload threads of the HTTP server (private to src/server): a handler that
 * may block for long (a bind waiting on the API server) runs here, while
 * its connection is suspended, so that it never holds one of libmicrohttpd's
 * worker threads that the other requests are answered on.
 *
 * Jobs are intrusive (the caller embeds ft_offload_job_t) and queued without
 * allocating. The queue is unbounded on purpose: every job belongs to one
 * suspended connection, and connections are capped (maxConnections).
 */
#ifndef FLEXTOPO_SERVER_OFFLOAD_H
#define FLEXTOPO_SERVER_OFFLOAD_H

#include <stdbool.h>

typedef struct ft_offload_job ft_offload_job_t;

/*
 * Runs on an offload thread; `cancelled` when the pool stops before the
 * job started (the job then only completes its request, say with a 503).
 */
typedef void (*ft_offload_fn)(ft_offload_job_t *job, bool cancelled);

struct ft_offload_job {
	ft_offload_fn run;
	ft_offload_job_t *next; /* the pool's */
};

typedef struct ft_offload ft_offload_t;

/* Start `threads` threads (at least 1). FT_ENOMEM, FT_EIO. */
int ft_offload_new(ft_offload_t **out, unsigned threads);

/* Queue `job` (not owned). False once the pool is stopping. */
bool ft_offload_submit(ft_offload_t *pool, ft_offload_job_t *job);

/*
 * Stop: jobs still queued run cancelled, running ones finish, the threads
 * are joined. Submits fail from then on. Idempotent; NULL is fine.
 */
void ft_offload_stop(ft_offload_t *pool);

/* Stop and free; NULL is fine. */
void ft_offload_free(ft_offload_t *pool);

#endif
