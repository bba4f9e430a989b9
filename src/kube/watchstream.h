/*
 * Private to src/kube: the body of a watch response, cut into events.
 *
 * The API server writes one JSON object per line, {"type":..., "object":...},
 * and the transport hands the body over in arbitrary chunks, so a line may
 * arrive in pieces and one chunk may hold several lines. This module holds
 * the unfinished line between chunks and decodes each complete one; it does
 * no I/O, which lets the tests cut a stream at awkward places.
 */
#ifndef FLEXTOPO_KUBE_WATCHSTREAM_H
#define FLEXTOPO_KUBE_WATCHSTREAM_H

#include <flextopo/kube.h>

#include <stddef.h>

#include <cjson/cJSON.h>

/* The event types of a watch; the first three match ft_watch_event_t. */
typedef enum {
	FT_WATCH_KIND_ADDED = FT_WATCH_ADDED,
	FT_WATCH_KIND_MODIFIED = FT_WATCH_MODIFIED,
	FT_WATCH_KIND_DELETED = FT_WATCH_DELETED,
	FT_WATCH_KIND_BOOKMARK = 3,
	FT_WATCH_KIND_ERROR = 4,
} ft_watch_kind_t;

typedef struct ft_watch_decoded {
	ft_watch_kind_t kind;
	cJSON *root;		      /* the whole event; owned */
	const cJSON *object;	      /* "object", borrowed from root */
	const char *resource_version; /* object.metadata.resourceVersion */
	int code;		      /* ERROR: the Status code, else 0 */
	const char *message;	      /* ERROR: the Status message or NULL */
} ft_watch_decoded_t;

/*
 * Decode one line. On success *out owns a tree the caller releases with
 * ft_watch_event_dispose. FT_EINVAL when the line is not an event (not
 * JSON, no type, an unknown type, no object).
 */
int ft_watch_event_decode(ft_watch_decoded_t *out, const char *line,
			  size_t len);

/* Release a decoded event; NULL and zeroed events are fine. */
void ft_watch_event_dispose(ft_watch_decoded_t *event);

/*
 * Called for each complete event, in stream order, with the event borrowed
 * for the call. A non-zero return stops the feed and is returned by it.
 */
typedef int (*ft_watch_event_fn)(const ft_watch_decoded_t *event,
				 void *payload);

typedef struct ft_watch_stream {
	char *line;	 /* the unfinished line */
	size_t len, cap; /* bytes held, bytes allocated */
	size_t max;	 /* longest line accepted, in bytes */
} ft_watch_stream_t;

void ft_watch_stream_init(ft_watch_stream_t *stream, size_t max_line);
void ft_watch_stream_dispose(ft_watch_stream_t *stream);

/*
 * Take the next `len` bytes of the body and hand every line they complete
 * to `fn`; blank lines are skipped. Returns 0, the callback's non-zero
 * value, FT_EINVAL for a line that is not an event, FT_ETOOBIG for a line
 * over the limit, FT_ENOMEM. After an error the stream only accepts
 * dispose.
 */
int ft_watch_stream_feed(ft_watch_stream_t *stream, const char *data,
			 size_t len, ft_watch_event_fn fn, void *payload);

/* At the end of the body: decode a last line that had no newline. */
int ft_watch_stream_finish(ft_watch_stream_t *stream, ft_watch_event_fn fn,
			   void *payload);

#endif
