/*
 * A fake API server for the unit tests: a thread on 127.0.0.1 that accepts
 * one connection per step, in order, reads the request and answers as the
 * step says (Connection: close), so that tests can script what a real
 * kube-apiserver does when it is healthy, slow, killed or half-answering.
 */
#ifndef FLEXTOPO_TEST_FAKEAPI_H
#define FLEXTOPO_TEST_FAKEAPI_H

#include <flextopo/kube.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define FT_FAKE_STEPS 12

/* How a step's answer ends. */
enum {
	FT_FAKE_END = 0,  /* end the body */
	FT_FAKE_HANG = 1, /* keep the stream open until the client goes away
			     (at most 10 s) */
	FT_FAKE_CUT = 2,  /* close after the chunks, without the last one: a
			     reply cut short */
};

/*
 * One canned exchange: what the request line starts with, the answer. A
 * NULL status answers nothing: the connection is closed at once, or with
 * FT_FAKE_HANG when the client gives up.
 */
typedef struct ft_fake_step {
	const char *expect;
	const char *status;	   /* "200 OK", or NULL */
	const char *const *chunks; /* body pieces, NULL-terminated, or NULL */
	int end; /* FT_FAKE_END, FT_FAKE_HANG or FT_FAKE_CUT */
} ft_fake_step_t;

typedef struct ft_fake_api {
	int fd;
	int port;
	const ft_fake_step_t *steps;
	size_t nsteps;
	pthread_t thread;
	char *requests[FT_FAKE_STEPS]; /* head and body, as received */
	atomic_size_t received;	       /* requests read so far */
} ft_fake_api_t;

/* Listen on a free port of 127.0.0.1 and serve `n` steps. */
void ft_fake_api_start(ft_fake_api_t *api, const ft_fake_step_t *steps,
		       size_t n);

/* Join the thread and check every request line against its step. */
void ft_fake_api_finish(ft_fake_api_t *api);

void ft_fake_api_dispose(ft_fake_api_t *api);

/*
 * Wait (at most 10 s) until `n` requests have been read; fails the test
 * otherwise.
 */
void ft_fake_api_wait(ft_fake_api_t *api, size_t n);

/*
 * A client of the fake server with bearer token "static-token" and
 * `token_file` (or NULL), each request limited to `timeout_ms`.
 */
ft_kube_client_t *ft_fake_api_client(const ft_fake_api_t *api,
				     const char *token_file, long timeout_ms);

/* The body of a request as the server received it. */
const char *ft_fake_request_body(const char *request);

#endif
