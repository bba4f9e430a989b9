/*
 * Private to src/kube: the one request primitive under ft_kube_request, the
 * informer's lists and its long-running watches, and the helpers both use.
 */
#ifndef FLEXTOPO_KUBE_CLIENT_H
#define FLEXTOPO_KUBE_CLIENT_H

#include <flextopo/kube.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Receives the body as it arrives, with the HTTP status of the answer.
 * Returns 0 to go on; anything else aborts the transfer, and the callback
 * then sets the error message itself.
 */
typedef int (*ft_kube_body_fn)(long status, const char *data, size_t len,
			       void *payload);

typedef struct ft_kube_call {
	const char *method;	  /* "GET", "POST", "PATCH", ... */
	const char *path;	  /* from the server root, starts with '/' */
	const char *content_type; /* of `body`, or NULL */
	const char *body;	  /* or NULL */
	size_t body_len;
	long timeout_ms;	 /* whole transfer; 0 for none */
	long low_speed_s;	 /* abort after this many seconds without a byte
				    arriving; 0 for never */
	ft_kube_body_fn on_body; /* NULL drops the body */
	void *payload;
	const atomic_bool *stop; /* aborts within about a second; or NULL */
} ft_kube_call_t;

/*
 * Perform one call. *status gets the HTTP status (0 when none arrived), also
 * when the transfer fails later. 0 when the answer arrived in full;
 * FT_EUNAVAIL when nothing was sent (no connection, credentials that cannot
 * be read or used); FT_EIO on transport failure after the request may have
 * been sent, on a stop, or when `on_body` aborted (its message stays);
 * FT_ENOMEM. Thread-safe.
 */
int ft_kube_call(ft_kube_client_t *client, const ft_kube_call_t *call,
		 long *status);

/* A body collected in memory, NUL-terminated, at most `max` bytes. */
typedef struct ft_kube_reply {
	char *body;
	size_t len, cap, max;
} ft_kube_reply_t;

/* An ft_kube_body_fn appending to the ft_kube_reply_t in `payload`. */
int ft_kube_reply_collect(long status, const char *data, size_t len,
			  void *payload);

/* Hand the collected body over (never NULL on success); FT_ENOMEM. */
int ft_kube_reply_detach(char **out, ft_kube_reply_t *reply);

void ft_kube_reply_dispose(ft_kube_reply_t *reply);

/*
 * Percent-encode everything but RFC 3986 unreserved characters, for path
 * segments and query values. A new string the caller frees; NULL when out
 * of memory.
 */
char *ft_kube_escape(const char *s);

/* The "message" of a meta/v1 Status body, copied into `buf`, or "". */
void ft_kube_status_message(char *buf, size_t size, const char *body);

#endif
