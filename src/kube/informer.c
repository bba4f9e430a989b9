/*
 * Informers: one thread per collection that lists, then watches, and hands
 * every change to its owner, the way client-go's reflector does.
 *
 * The thread lists, announces the items between replace_begin and
 * replace_end, and watches from the list's resourceVersion. Each event moves
 * the remembered resourceVersion forward, bookmarks included, so a watch
 * that times out cleanly resumes where it stopped.
 *
 * Every list is a consistent read (resourceVersion unset), where client-go
 * starts from the watch cache (resourceVersion=0): a cache that lags behind
 * etcd could miss the last binds, and the owner answers from what a list
 * brought (ft_informer_synced). A watch that fails (no answer, an HTTP
 * error, a broken stream) may have missed events, so the informer is not
 * synced from then until its next list has been announced, and it relists
 * rather than resumes: client-go's reflector also relists after most watch
 * errors (k8s.io/client-go/tools/cache/reflector.go, ListAndWatch).
 *
 * A 410 Gone (as an HTTP status or an in-stream ERROR event) only says that
 * the resume point has left the server's history: the reflector relists at
 * once, and so does the informer. Failures wait out an exponential backoff
 * with jitter that resets after two healthy minutes, so a flapping server is
 * never hammered; a 410 that comes at once from a watch just started after a
 * list counts as a failure, so that a server answering nothing but 410 is
 * not hammered either.
 *
 * Stopping sets a latch (latch.h) whose flag curl's progress callback polls
 * (about once a second even on an idle watch) and which wakes the backoff
 * sleep.
 */
#include "client.h"
#include "watchstream.h"

#include <flextopo/clock.h>
#include <flextopo/error.h>
#include <flextopo/kube.h>
#include <flextopo/latch.h>
#include <flextopo/log.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BACKOFF_INITIAL_MS 800u
#define DEFAULT_BACKOFF_MAX_MS	   30000u
#define HEALTHY_RESET_MS	   120000u
#define WATCH_TIMEOUT_MIN_S	   300u
#define WATCH_TIMEOUT_SPAN_S	   301u
#define WATCH_TIMEOUT_GRACE_S	   60u
#define SHORT_WATCH_MS		   1000u
#define LIST_LOW_SPEED_S	   60L
#define LIST_MAX		   ((size_t)1 << 30)
#define EVENT_MAX		   ((size_t)64 << 20)
#define ERROR_BODY_MAX		   ((size_t)64 << 10)

struct ft_informer {
	ft_kube_client_t *client;
	char *collection;
	ft_informer_handler_t handler;
	void *payload;
	unsigned backoff_initial_ms, backoff_max_ms;
	pthread_t thread;
	ft_latch_t stop; /* stops the backoff sleep and the transfers */
	atomic_bool synced;
	atomic_ulong restarts;
	/*
	 * The collection may not be served (its API group is not enabled): a
	 * list answered 404 then counts as a complete empty list, and the
	 * informer asks again after backoff_max_ms, staying synced.
	 */
	bool optional;
	/* Used by the informer thread only. */
	char *resource_version; /* where the watch resumes; NULL: relist */
	unsigned long events;	/* watch events since the last list */
	uint64_t rng;
};

/* One watch request's state, shared with the body callback. */
typedef struct {
	ft_informer_t *informer;
	ft_watch_stream_t stream;
	ft_kube_reply_t error_body; /* the body of a non-200 answer */
	bool gone;		    /* an ERROR event with code 410 came */
	unsigned long events;
} watch_t;

static bool stopping(const ft_informer_t *informer)
{
	return ft_latch_is_set(&informer->stop);
}

/* xorshift64*: jitter and watch timeouts need spread, not secrecy. */
static uint32_t next_random(ft_informer_t *informer)
{
	uint64_t x = informer->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	informer->rng = x;
	return (uint32_t)((x * UINT64_C(0x2545F4914F6CDD1D)) >> 32);
}

static int remember_version(ft_informer_t *informer, const char *version)
{
	char *copy = NULL;

	if (!version || !*version)
		return 0;
	if (!(copy = strdup(version)))
		return ft_error_set(FT_ENOMEM, "informer: out of memory");
	free(informer->resource_version);
	informer->resource_version = copy;
	return 0;
}

static void forget_version(ft_informer_t *informer)
{
	free(informer->resource_version);
	informer->resource_version = NULL;
}

/* The HTTP status and Status message of a failed answer, as an error. */
static int http_error(const char *verb, long status, const char *body)
{
	char message[256];

	ft_kube_status_message(message, sizeof(message), body);
	return ft_error_set(status == 410 ? FT_EGONE : FT_EIO,
			    "%s: HTTP %ld%s%s", verb, status,
			    message[0] ? ": " : "", message);
}

static void announce(ft_informer_t *informer, const cJSON *items)
{
	const cJSON *item = NULL;

	if (informer->handler.replace_begin)
		informer->handler.replace_begin(informer->payload);
	cJSON_ArrayForEach (item, items) {
		informer->handler.apply(FT_WATCH_ADDED, item,
					informer->payload);
	}
	if (informer->handler.replace_end)
		informer->handler.replace_end(informer->payload);
}

/* Check a list's envelope, announce its items, keep its version. */
static int take_list(ft_informer_t *informer, const ft_kube_reply_t *reply,
		     uint64_t started)
{
	cJSON *root = cJSON_ParseWithLength(reply->body, reply->len);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
	const cJSON *metadata =
	    cJSON_GetObjectItemCaseSensitive(root, "metadata");
	const cJSON *version =
	    cJSON_GetObjectItemCaseSensitive(metadata, "resourceVersion");
	int rc = 0;

	if (!cJSON_IsObject(root) ||
	    !(cJSON_IsArray(items) || !items || cJSON_IsNull(items)) ||
	    !cJSON_IsString(version) || !version->valuestring[0]) {
		rc = ft_error_set(FT_EIO, "list: the answer is not a list");
		goto cleanup;
	}
	if ((rc = remember_version(informer, version->valuestring)) < 0)
		goto cleanup;
	announce(informer, items);
	informer->events = 0;
	atomic_store(&informer->synced, true);
	FT_LOG_INFO_MSG(
	    "informer %s: listed %d objects at resourceVersion %s in %llu ms",
	    informer->collection, cJSON_GetArraySize(items),
	    version->valuestring,
	    (unsigned long long)(ft_clock_ms() - started));
cleanup:
	cJSON_Delete(root);
	return rc;
}

/*
 * An optional collection the API server does not serve: nothing of it
 * exists, which is complete knowledge. FT_ENOTFOUND tells run() to ask
 * again later without unsyncing.
 */
static int not_served(ft_informer_t *informer)
{
	if (!ft_informer_synced(informer))
		FT_LOG_INFO_MSG(
		    "informer %s: not served by the API server (HTTP 404): none exist; asking again every %u ms",
		    informer->collection, informer->backoff_max_ms);
	announce(informer, NULL);
	atomic_store(&informer->synced, true);
	return ft_error_set(FT_ENOTFOUND, "list: not served");
}

static const char *query_separator(const char *collection)
{
	return strchr(collection, '?') ? "&" : "?";
}

static int list_once(ft_informer_t *informer)
{
	ft_kube_reply_t reply = {.max = LIST_MAX};
	ft_kube_call_t call = {.method = "GET",
			       .low_speed_s = LIST_LOW_SPEED_S,
			       .on_body = ft_kube_reply_collect,
			       .payload = &reply,
			       .stop = &informer->stop.set};
	char *path = NULL;
	uint64_t started = ft_clock_ms();
	long status = 0;
	int rc = 0;

	if (asprintf(&path, "%s%sresourceVersion=", informer->collection,
		     query_separator(informer->collection)) < 0) {
		path = NULL;
		rc = ft_error_set(FT_ENOMEM, "informer: out of memory");
		goto cleanup;
	}
	call.path = path;
	if ((rc = ft_kube_call(informer->client, &call, &status)) < 0)
		goto cleanup;
	if (status == 404 && informer->optional) {
		rc = not_served(informer);
		goto cleanup;
	}
	if (status != 200) {
		rc = http_error("list", status, reply.body);
		goto cleanup;
	}
	rc = take_list(informer, &reply, started);
cleanup:
	ft_kube_reply_dispose(&reply);
	free(path);
	return rc;
}

static int watch_error_event(watch_t *watch, const ft_watch_decoded_t *event)
{
	if (event->code == 410) {
		watch->gone = true;
		return ft_error_set(FT_EGONE, "watch: %s",
				    event->message ? event->message : "gone");
	}
	return ft_error_set(FT_EIO, "watch: ERROR event, code %d: %s",
			    event->code, event->message ? event->message : "");
}

static int on_event(const ft_watch_decoded_t *event, void *payload)
{
	watch_t *watch = payload;
	ft_informer_t *informer = watch->informer;

	watch->events++;
	informer->events++;
	if (event->kind == FT_WATCH_KIND_ERROR)
		return watch_error_event(watch, event);
	if (event->kind != FT_WATCH_KIND_BOOKMARK)
		informer->handler.apply((ft_watch_event_t)event->kind,
					event->object, informer->payload);
	return remember_version(informer, event->resource_version);
}

static int on_watch_body(long status, const char *data, size_t len,
			 void *payload)
{
	watch_t *watch = payload;

	if (status == 200)
		return ft_watch_stream_feed(&watch->stream, data, len, on_event,
					    watch);
	/* Keep the head of an error answer for its Status message. */
	if (watch->error_body.len + len < ERROR_BODY_MAX)
		return ft_kube_reply_collect(status, data, len,
					     &watch->error_body);
	return 0;
}

static int watch_path(char **out, ft_informer_t *informer)
{
	char *version = ft_kube_escape(informer->resource_version);
	unsigned timeout_s =
	    WATCH_TIMEOUT_MIN_S + next_random(informer) % WATCH_TIMEOUT_SPAN_S;
	int rc = 0;

	if (!version ||
	    asprintf(
		out,
		"%s%swatch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%u",
		informer->collection, query_separator(informer->collection),
		version, timeout_s) < 0) {
		*out = NULL;
		rc = ft_error_set(FT_ENOMEM, "informer: out of memory");
	}
	free(version);
	return rc;
}

/* Turn the end of a watch request into 0 (resume), FT_EGONE or an error. */
static int watch_outcome(watch_t *watch, int rc, long status, uint64_t started)
{
	if (watch->gone)
		return FT_EGONE;
	if (status != 0 && status != 200)
		return http_error("watch", status, watch->error_body.body);
	if (rc < 0)
		return rc;
	if ((rc = ft_watch_stream_finish(&watch->stream, on_event, watch)) != 0)
		return watch->gone ? FT_EGONE : rc;
	if (watch->events == 0 && ft_clock_ms() - started < SHORT_WATCH_MS)
		return ft_error_set(FT_EIO,
				    "watch: ended at once without events");
	return 0;
}

static int watch_once(ft_informer_t *informer)
{
	watch_t watch = {.informer = informer,
			 .error_body = {.max = ERROR_BODY_MAX}};
	ft_kube_call_t call = {.method = "GET",
			       .on_body = on_watch_body,
			       .payload = &watch,
			       .stop = &informer->stop.set};
	char *path = NULL;
	uint64_t started = ft_clock_ms();
	long status = 0;
	int rc;

	ft_watch_stream_init(&watch.stream, EVENT_MAX);
	if ((rc = watch_path(&path, informer)) < 0)
		goto cleanup;
	call.path = path;
	/* A safety net over the server's timeoutSeconds. */
	call.timeout_ms = (long)(WATCH_TIMEOUT_MIN_S + WATCH_TIMEOUT_SPAN_S +
				 WATCH_TIMEOUT_GRACE_S) *
			  1000L;
	rc = ft_kube_call(informer->client, &call, &status);
	rc = watch_outcome(&watch, rc, status, started);
cleanup:
	ft_watch_stream_dispose(&watch.stream);
	ft_kube_reply_dispose(&watch.error_body);
	free(path);
	return rc;
}

/*
 * List, then watch until something other than a timeout. Whatever ends it
 * leaves the informer unsynced and the next call lists again.
 */
static int list_and_watch(ft_informer_t *informer)
{
	int rc = 0;

	if ((rc = list_once(informer)) < 0)
		goto cleanup;
	while (!stopping(informer) && (rc = watch_once(informer)) == 0)
		continue;
cleanup:
	if (rc != FT_ENOTFOUND)
		atomic_store(&informer->synced, false);
	forget_version(informer);
	return rc;
}

/*
 * A 410 relists at once, unless it came from the first watch after a list,
 * at once and before any event: then the server answers nothing else, and
 * the 410 waits like a failure.
 */
static bool relist_now(const ft_informer_t *informer, int rc, uint64_t started)
{
	return rc == FT_EGONE && (informer->events > 1 ||
				  ft_clock_ms() - started >= SHORT_WATCH_MS);
}

/*
 * The wait after a cycle that began at `started`: none for a 410 that
 * relists now, else the current delay with +-20% jitter, which then doubles.
 * Two healthy minutes reset the delay either way.
 */
static unsigned next_delay(ft_informer_t *informer, unsigned *delay_ms, int rc,
			   uint64_t started)
{
	unsigned base, spread;

	if (ft_clock_ms() - started >= HEALTHY_RESET_MS)
		*delay_ms = informer->backoff_initial_ms;
	if (relist_now(informer, rc, started))
		return 0;
	base = *delay_ms;
	*delay_ms = base > informer->backoff_max_ms / 2
			? informer->backoff_max_ms
			: base * 2;
	spread = base / 5;
	return base - spread + next_random(informer) % (2 * spread + 1);
}

static void note_restart(ft_informer_t *informer, int rc, unsigned delay_ms)
{
	unsigned long restarts = atomic_fetch_add(&informer->restarts, 1) + 1;

	if (rc == FT_EGONE && !delay_ms)
		FT_LOG_INFO_MSG("informer %s: %s; relisting now (restart %lu)",
				informer->collection, ft_error_last(),
				restarts);
	else if (rc == FT_EGONE)
		FT_LOG_INFO_MSG(
		    "informer %s: %s; relisting in %u ms (restart %lu)",
		    informer->collection, ft_error_last(), delay_ms, restarts);
	else
		FT_LOG_WARN_MSG(
		    "informer %s: %s; retrying in %u ms (restart %lu)",
		    informer->collection, ft_error_last(), delay_ms, restarts);
}

static void *run(void *arg)
{
	ft_informer_t *informer = arg;
	unsigned delay_ms = informer->backoff_initial_ms;

	while (!stopping(informer)) {
		uint64_t started = ft_clock_ms();
		unsigned wait_ms;
		int rc;

		ft_error_clear();
		rc = list_and_watch(informer);
		if (stopping(informer))
			break;
		if (rc == FT_ENOTFOUND) {
			ft_latch_sleep(&informer->stop,
				       informer->backoff_max_ms);
			continue;
		}
		wait_ms = next_delay(informer, &delay_ms, rc, started);
		note_restart(informer, rc, wait_ms);
		if (wait_ms)
			ft_latch_sleep(&informer->stop, wait_ms);
	}
	return NULL;
}

static void configure(ft_informer_t *informer, ft_kube_client_t *client,
		      const ft_informer_handler_t *h, void *payload,
		      unsigned backoff_initial_ms, unsigned backoff_max_ms)
{
	informer->client = client;
	informer->handler = *h;
	informer->payload = payload;
	informer->backoff_initial_ms = backoff_initial_ms
					   ? backoff_initial_ms
					   : DEFAULT_BACKOFF_INITIAL_MS;
	informer->backoff_max_ms =
	    backoff_max_ms ? backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
	if (informer->backoff_max_ms < informer->backoff_initial_ms)
		informer->backoff_max_ms = informer->backoff_initial_ms;
	informer->rng = ft_clock_ms() ^ (uint64_t)(uintptr_t)informer ^
			UINT64_C(0x9E3779B97F4A7C15);
	atomic_init(&informer->synced, false);
	atomic_init(&informer->restarts, 0);
}

static int start(ft_informer_t **out, ft_kube_client_t *client,
		 const char *collection, const ft_informer_handler_t *h,
		 void *payload, unsigned backoff_initial_ms,
		 unsigned backoff_max_ms, bool optional)
{
	ft_informer_t *informer = NULL;
	bool sync_ready = false;
	int rc = 0;

	if (!client || !collection || collection[0] != '/' || !h || !h->apply)
		return ft_error_set(
		    FT_EINVAL,
		    "informer: need a client, a collection path and apply");
	if (!(informer = calloc(1, sizeof(*informer))) ||
	    !(informer->collection = strdup(collection))) {
		rc = ft_error_set(FT_ENOMEM, "informer: out of memory");
		goto cleanup;
	}
	configure(informer, client, h, payload, backoff_initial_ms,
		  backoff_max_ms);
	informer->optional = optional;
	if ((rc = ft_latch_init(&informer->stop, "informer")) < 0)
		goto cleanup;
	sync_ready = true;
	/* Set before the thread starts, so that its handlers may read it. */
	*out = informer;
	if (pthread_create(&informer->thread, NULL, run, informer) != 0) {
		*out = NULL;
		rc = ft_error_set(FT_EIO, "informer %s: cannot start thread",
				  collection);
		goto cleanup;
	}
	informer = NULL;
cleanup:
	if (informer && sync_ready)
		ft_latch_dispose(&informer->stop);
	if (informer)
		free(informer->collection);
	free(informer);
	return rc;
}

int ft_informer_start(ft_informer_t **out, ft_kube_client_t *client,
		      const char *collection, const ft_informer_handler_t *h,
		      void *payload, unsigned backoff_initial_ms,
		      unsigned backoff_max_ms)
{
	return start(out, client, collection, h, payload, backoff_initial_ms,
		     backoff_max_ms, false);
}

int ft_informer_start_optional(ft_informer_t **out, ft_kube_client_t *client,
			       const char *collection,
			       const ft_informer_handler_t *h, void *payload,
			       unsigned backoff_initial_ms,
			       unsigned backoff_max_ms)
{
	return start(out, client, collection, h, payload, backoff_initial_ms,
		     backoff_max_ms, true);
}

bool ft_informer_synced(const ft_informer_t *informer)
{
	return informer && atomic_load(&informer->synced);
}

unsigned long ft_informer_restarts(const ft_informer_t *informer)
{
	return informer ? atomic_load(&informer->restarts) : 0;
}

void ft_informer_free(ft_informer_t *informer)
{
	if (!informer)
		return;
	ft_latch_set(&informer->stop);
	pthread_join(informer->thread, NULL);
	ft_latch_dispose(&informer->stop);
	free(informer->resource_version);
	free(informer->collection);
	free(informer);
}
