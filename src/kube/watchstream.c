/*
 * Watch response bodies: newline-delimited JSON events, split and decoded.
 *
 * A complete line inside a chunk is decoded straight from the transport's
 * buffer; only the tail of a chunk that ends mid-line is copied, and it
 * grows until the newline arrives or the line passes the cap. Decoding
 * checks the envelope (type, object) and lifts out the fields the informer
 * acts on, so the informer never walks raw JSON itself.
 */
#include "watchstream.h"

#include <flextopo/error.h>

#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	ft_watch_kind_t kind;
} kinds[] = {
    {"ADDED", FT_WATCH_KIND_ADDED},	{"MODIFIED", FT_WATCH_KIND_MODIFIED},
    {"DELETED", FT_WATCH_KIND_DELETED}, {"BOOKMARK", FT_WATCH_KIND_BOOKMARK},
    {"ERROR", FT_WATCH_KIND_ERROR},
};

static int kind_of(ft_watch_kind_t *out, const cJSON *type)
{
	if (!cJSON_IsString(type))
		return ft_error_set(FT_EINVAL, "watch event: no type");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(type->valuestring, kinds[i].name) == 0) {
			*out = kinds[i].kind;
			return 0;
		}
	}
	return ft_error_set(FT_EINVAL, "watch event: unknown type \"%.64s\"",
			    type->valuestring);
}

static const char *resource_version_of(const cJSON *object)
{
	const cJSON *metadata =
	    cJSON_GetObjectItemCaseSensitive(object, "metadata");
	const cJSON *rv =
	    cJSON_GetObjectItemCaseSensitive(metadata, "resourceVersion");

	return cJSON_IsString(rv) ? rv->valuestring : NULL;
}

/* An ERROR event's object is a meta/v1 Status. */
static void read_status(ft_watch_decoded_t *event)
{
	const cJSON *code =
	    cJSON_GetObjectItemCaseSensitive(event->object, "code");
	const cJSON *message =
	    cJSON_GetObjectItemCaseSensitive(event->object, "message");

	event->code = cJSON_IsNumber(code) ? code->valueint : 0;
	event->message = cJSON_IsString(message) ? message->valuestring : NULL;
}

int ft_watch_event_decode(ft_watch_decoded_t *out, const char *line, size_t len)
{
	ft_watch_decoded_t event = {.root = NULL};
	int rc = 0;

	event.root = cJSON_ParseWithLength(line, len);
	if (!cJSON_IsObject(event.root)) {
		rc = ft_error_set(FT_EINVAL, "watch event: not a JSON object");
		goto cleanup;
	}
	if ((rc = kind_of(&event.kind, cJSON_GetObjectItemCaseSensitive(
					   event.root, "type"))) < 0)
		goto cleanup;
	event.object = cJSON_GetObjectItemCaseSensitive(event.root, "object");
	if (!cJSON_IsObject(event.object)) {
		rc = ft_error_set(FT_EINVAL, "watch event: no object");
		goto cleanup;
	}
	if (event.kind == FT_WATCH_KIND_ERROR)
		read_status(&event);
	else
		event.resource_version = resource_version_of(event.object);
	*out = event;
	event.root = NULL;
cleanup:
	cJSON_Delete(event.root);
	return rc;
}

void ft_watch_event_dispose(ft_watch_decoded_t *event)
{
	if (!event)
		return;
	cJSON_Delete(event->root);
	memset(event, 0, sizeof(*event));
}

void ft_watch_stream_init(ft_watch_stream_t *stream, size_t max_line)
{
	memset(stream, 0, sizeof(*stream));
	stream->max = max_line;
}

void ft_watch_stream_dispose(ft_watch_stream_t *stream)
{
	if (!stream)
		return;
	free(stream->line);
	memset(stream, 0, sizeof(*stream));
}

static int is_blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

static int emit(const char *line, size_t len, ft_watch_event_fn fn,
		void *payload)
{
	ft_watch_decoded_t event = {.root = NULL};
	int rc;

	if (is_blank(line, len))
		return 0;
	if ((rc = ft_watch_event_decode(&event, line, len)) < 0)
		return rc;
	rc = fn(&event, payload);
	ft_watch_event_dispose(&event);
	return rc;
}

/* Keep `len` more bytes of the unfinished line. */
static int keep_partial_line(ft_watch_stream_t *stream, const char *data,
			     size_t len)
{
	size_t need = stream->len + len;

	if (need > stream->max)
		return ft_error_set(FT_ETOOBIG,
				    "watch event: longer than %zu bytes",
				    stream->max);
	if (need > stream->cap) {
		size_t cap = stream->cap ? stream->cap : 4096;
		char *line = NULL;

		while (cap < need)
			cap *= 2;
		if (!(line = realloc(stream->line, cap)))
			return ft_error_set(FT_ENOMEM,
					    "watch event: out of memory");
		stream->line = line;
		stream->cap = cap;
	}
	memcpy(stream->line + stream->len, data, len);
	stream->len = need;
	return 0;
}

/* Finish the held line with `len` bytes of its end and emit it. */
static int complete(ft_watch_stream_t *stream, const char *data, size_t len,
		    ft_watch_event_fn fn, void *payload)
{
	size_t total;
	int rc;

	if (stream->len == 0)
		return emit(data, len, fn, payload);
	if ((rc = keep_partial_line(stream, data, len)) < 0)
		return rc;
	total = stream->len;
	stream->len = 0;
	return emit(stream->line, total, fn, payload);
}

int ft_watch_stream_feed(ft_watch_stream_t *stream, const char *data,
			 size_t len, ft_watch_event_fn fn, void *payload)
{
	const char *end = NULL;
	int rc = 0;

	if (len == 0)
		return 0;
	for (end = data + len; data < end && rc == 0;) {
		const char *nl = memchr(data, '\n', (size_t)(end - data));

		if (!nl)
			return keep_partial_line(stream, data,
						 (size_t)(end - data));
		rc = complete(stream, data, (size_t)(nl - data), fn, payload);
		data = nl + 1;
	}
	return rc;
}

int ft_watch_stream_finish(ft_watch_stream_t *stream, ft_watch_event_fn fn,
			   void *payload)
{
	size_t total = stream->len;

	if (total == 0)
		return 0;
	stream->len = 0;
	return emit(stream->line, total, fn, payload);
}
