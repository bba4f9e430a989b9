/*
 * The benchmarks' HTTP client (flextopo-bench, flextopo-openb-replay): one
 * libcurl easy handle, so one keep-alive connection as kube-scheduler keeps
 * to its extender, and the last reply in a growing buffer.
 */
#ifndef FLEXTOPO_BENCH_CLIENT_H
#define FLEXTOPO_BENCH_CLIENT_H

#include <curl/curl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct bench_client {
	CURL *curl;
	struct curl_slist *headers;
	unsigned port;
	char *reply; /* NUL-terminated */
	size_t reply_len, reply_cap;
	long connects, requests;
} bench_client_t;

static inline size_t bench_client_on_reply(char *data, size_t size,
					   size_t nmemb, void *payload)
{
	bench_client_t *c = payload;
	size_t n = size * nmemb;

	if (c->reply_len + n + 1 > c->reply_cap) {
		size_t cap = c->reply_cap ? c->reply_cap : 65536;
		char *grown;
		while (cap < c->reply_len + n + 1)
			cap *= 2;
		if (!(grown = realloc(c->reply, cap)))
			return 0;
		c->reply = grown;
		c->reply_cap = cap;
	}
	memcpy(c->reply + c->reply_len, data, n);
	c->reply_len += n;
	c->reply[c->reply_len] = '\0';
	return n;
}

/* JSON bodies, no "Expect: 100-continue" (Go's client, like
 * kube-scheduler's, sends none). -1 when libcurl cannot make a handle. */
static inline int bench_client_open(bench_client_t *c, unsigned port)
{
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");

	memset(c, 0, sizeof(*c));
	c->port = port;
	if (h) {
		c->headers = h;
		h = curl_slist_append(h, "Expect:");
	}
	if (!h || !(c->curl = curl_easy_init()))
		return -1;
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, bench_client_on_reply);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 60000L);
	return 0;
}

/*
 * POST `len` bytes of `body` to `path`, or GET it when `body` is NULL, and
 * keep the reply in c->reply; *us (when not NULL) is the wall time of the
 * exchange. 0 for HTTP 200 with a body, else -1 with the reason, starting
 * with the path, in `err` (`err_size` bytes).
 */
static inline int bench_client_request(bench_client_t *c, const char *path,
				       const char *body, size_t len, double *us,
				       char *err, size_t err_size)
{
	char url[96];
	long status = 0, connects = 0;
	CURLcode code;
	double t0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", c->port, path);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	} else {
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	}
	c->reply_len = 0;
	t0 = now_us();
	code = curl_easy_perform(c->curl);
	if (us)
		*us = now_us() - t0;
	if (code != CURLE_OK) {
		snprintf(err, err_size, "%s: %s", path,
			 curl_easy_strerror(code));
		return -1;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &connects);
	c->connects += connects;
	c->requests++;
	if (status != 200 || !c->reply_len) {
		snprintf(err, err_size, "%s: HTTP %ld: %.300s", path, status,
			 c->reply_len ? c->reply : "(no body)");
		return -1;
	}
	return 0;
}

static inline void bench_client_close(bench_client_t *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	free(c->reply);
	memset(c, 0, sizeof(*c));
}

#endif
