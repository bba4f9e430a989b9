/*
 * The API server client: libcurl easy handles behind one request primitive.
 *
 * Idle handles wait in a small pool under a mutex so that consecutive
 * requests reuse a live keep-alive connection and TLS session; a caller
 * takes a handle out, owns it for the request, and puts it back, so no
 * handle is ever used by two threads. Each request re-applies every option
 * (curl_easy_reset keeps the connection cache) and re-reads the token file,
 * because projected service-account tokens rotate under a running process.
 * Certificates given inline travel as curl blobs and never touch the disk.
 */
#include "client.h"
#include "kubeconfig.h"

#include <flextopo/error.h>
#include <flextopo/file.h>
#include <flextopo/kube.h>

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#define POOL_MAX	  4
#define REPLY_MAX	  ((size_t)512 << 20)
#define USER_AGENT	  "flextopo-extender"
#define DEFAULT_TIMEOUT	  10000L
#define KEEPALIVE_IDLE_S  30L
#define KEEPALIVE_INTVL_S 15L

struct ft_kube_client {
	ft_kube_credentials_t creds;
	long timeout_ms;
	pthread_mutex_t lock; /* guards idle[] and idle_count */
	CURL *idle[POOL_MAX];
	size_t idle_count;
};

/* What the write callback needs during one transfer. */
typedef struct {
	CURL *curl;
	const ft_kube_call_t *call;
	long status;
} transfer_t;

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_result = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int ft_kube_client_new(ft_kube_client_t **out,
		       const ft_kube_credentials_t *creds, long timeout_ms)
{
	ft_kube_client_t *client = NULL;
	int rc;

	pthread_once(&global_once, global_init);
	if (global_result != CURLE_OK)
		return ft_error_set(FT_EIO, "kube client: curl_global_init: %s",
				    curl_easy_strerror(global_result));
	if (!creds || !creds->server)
		return ft_error_set(FT_EINVAL, "kube client: no server");
	if (!(client = calloc(1, sizeof(*client))))
		return ft_error_set(FT_ENOMEM, "kube client: out of memory");
	if ((rc = ft_kube_credentials_copy(&client->creds, creds)) < 0) {
		free(client);
		return rc;
	}
	client->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT;
	pthread_mutex_init(&client->lock, NULL);
	*out = client;
	return 0;
}

void ft_kube_client_free(ft_kube_client_t *client)
{
	if (!client)
		return;
	for (size_t i = 0; i < client->idle_count; i++)
		curl_easy_cleanup(client->idle[i]);
	pthread_mutex_destroy(&client->lock);
	ft_kube_credentials_dispose(&client->creds);
	free(client);
}

/* An idle handle, reset, or a new one; NULL when out of memory. */
static CURL *acquire(ft_kube_client_t *client)
{
	CURL *curl = NULL;

	pthread_mutex_lock(&client->lock);
	if (client->idle_count > 0)
		curl = client->idle[--client->idle_count];
	pthread_mutex_unlock(&client->lock);
	if (!curl)
		return curl_easy_init();
	curl_easy_reset(curl);
	return curl;
}

static void release(ft_kube_client_t *client, CURL *curl)
{
	if (!curl)
		return;
	pthread_mutex_lock(&client->lock);
	if (client->idle_count < POOL_MAX) {
		client->idle[client->idle_count++] = curl;
		curl = NULL;
	}
	pthread_mutex_unlock(&client->lock);
	curl_easy_cleanup(curl);
}

/* Strip surrounding whitespace in place; refuse control characters. */
static int clean_token(char *token, const char *source)
{
	size_t len = strlen(token), start = 0;

	while (len > 0 && isspace((unsigned char)token[len - 1]))
		token[--len] = '\0';
	while (start < len && isspace((unsigned char)token[start]))
		start++;
	memmove(token, token + start, len - start + 1);
	for (char *c = token; *c; c++)
		if (iscntrl((unsigned char)*c))
			return ft_error_set(
			    FT_EINVAL,
			    "kube client: token from %s has control characters",
			    source);
	return 0;
}

/* Prefix the file reader's message, which names the file and the cause. */
static int token_file_error(void)
{
	char cause[512];

	snprintf(cause, sizeof(cause), "%s", ft_error_last());
	return ft_error_set(FT_EIO, "kube client: token %s", cause);
}

/* The current bearer token (a heap copy), or NULL when there is none. */
static int read_token(char **out, const ft_kube_credentials_t *creds)
{
	char *token = NULL;
	int rc = 0;

	*out = NULL;
	if (creds->token_file) {
		rc = ft_file_read(&token, NULL, creds->token_file,
				  FT_KUBE_FILE_MAX);
		if (rc < 0)
			return token_file_error();
	} else if (creds->token && !(token = strdup(creds->token))) {
		return ft_error_set(FT_ENOMEM, "kube client: out of memory");
	}
	if (token &&
	    (rc = clean_token(token, creds->token_file ? creds->token_file
						       : "kubeconfig")) < 0) {
		free(token);
		return rc;
	}
	if (token && !token[0]) {
		free(token);
		token = NULL;
	}
	*out = token;
	return 0;
}

static int append_header(struct curl_slist **headers, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int append_header(struct curl_slist **headers, const char *fmt, ...)
{
	struct curl_slist *grown = NULL;
	char *line = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return ft_error_set(FT_ENOMEM, "kube client: out of memory");
	grown = curl_slist_append(*headers, line);
	free(line);
	if (!grown)
		return ft_error_set(FT_ENOMEM, "kube client: out of memory");
	*headers = grown;
	return 0;
}

static int build_headers(struct curl_slist **out, ft_kube_client_t *client,
			 const ft_kube_call_t *call)
{
	struct curl_slist *headers = NULL;
	char *token = NULL;
	int rc;

	/* "Expect:" drops curl's 100-continue round trip before big bodies. */
	if ((rc = read_token(&token, &client->creds)) < 0 ||
	    (rc = append_header(&headers, "Accept: application/json")) < 0 ||
	    (token && (rc = append_header(&headers, "Authorization: Bearer %s",
					  token)) < 0) ||
	    (call->content_type &&
	     (rc = append_header(&headers, "Content-Type: %s",
				 call->content_type)) < 0) ||
	    (rc = append_header(&headers, "Expect:")) < 0)
		goto cleanup;
	*out = headers;
	headers = NULL;
cleanup:
	curl_slist_free_all(headers);
	free(token);
	return rc;
}

static int set_blob(CURL *curl, CURLoption option, const char *pem,
		    const char *what)
{
	struct curl_blob blob = {
	    .data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};
	CURLcode res = curl_easy_setopt(curl, option, &blob);

	if (res != CURLE_OK)
		return ft_error_set(FT_EINVAL, "kube client: %s: %s", what,
				    curl_easy_strerror(res));
	return 0;
}

static int set_file(CURL *curl, CURLoption option, const char *path,
		    const char *what)
{
	CURLcode res = curl_easy_setopt(curl, option, path);

	if (res != CURLE_OK)
		return ft_error_set(FT_EINVAL, "kube client: %s: %s", what,
				    curl_easy_strerror(res));
	return 0;
}

/* One credential that comes as PEM text or as a file. */
static int set_pem(CURL *curl, const char *pem, CURLoption blob_option,
		   const char *file, CURLoption file_option, const char *what)
{
	if (pem)
		return set_blob(curl, blob_option, pem, what);
	if (file)
		return set_file(curl, file_option, file, what);
	return 0;
}

static int set_tls(CURL *curl, const ft_kube_credentials_t *creds)
{
	int rc;

	if (creds->insecure) {
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if ((creds->cert_pem || creds->cert_file) &&
	    (curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK ||
	     curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK))
		return ft_error_set(FT_EINVAL, "kube client: PEM unsupported");
	if ((rc = set_pem(curl, creds->ca_pem, CURLOPT_CAINFO_BLOB,
			  creds->ca_file, CURLOPT_CAINFO,
			  "certificate authority")) < 0 ||
	    (rc = set_pem(curl, creds->cert_pem, CURLOPT_SSLCERT_BLOB,
			  creds->cert_file, CURLOPT_SSLCERT,
			  "client certificate")) < 0)
		return rc;
	return set_pem(curl, creds->key_pem, CURLOPT_SSLKEY_BLOB,
		       creds->key_file, CURLOPT_SSLKEY, "client key");
}

static void set_method(CURL *curl, const ft_kube_call_t *call)
{
	const char *method = call->method ? call->method : "GET";

	if (strcmp(method, "GET") == 0 && !call->body) {
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
		return;
	}
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(call->body ? call->body_len : 0));
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS,
			 call->body ? call->body : "");
	if (strcmp(method, "POST") != 0)
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	transfer_t *transfer = userdata;
	size_t len = size * nmemb;

	if (transfer->status == 0)
		curl_easy_getinfo(transfer->curl, CURLINFO_RESPONSE_CODE,
				  &transfer->status);
	if (!transfer->call->on_body || len == 0)
		return len;
	if (transfer->call->on_body(transfer->status, data, len,
				    transfer->call->payload) != 0)
		return 0;
	return len;
}

static int on_progress(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	const atomic_bool *stop = clientp;

	return atomic_load(stop) ? 1 : 0;
}

static void set_limits(CURL *curl, const ft_kube_client_t *client,
		       const ft_kube_call_t *call)
{
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, client->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, call->timeout_ms);
	if (call->low_speed_s > 0) {
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
				 call->low_speed_s);
	}
	if (call->stop) {
		curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(curl, CURLOPT_XFERINFODATA,
				 (void *)call->stop);
		curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	}
}

static void set_transport(CURL *curl, const char *url,
			  struct curl_slist *headers, transfer_t *transfer)
{
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, USER_AGENT);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, KEEPALIVE_IDLE_S);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, KEEPALIVE_INTVL_S);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, transfer);
}

/*
 * FT_EUNAVAIL when curl sent nothing (no connection), FT_EIO when the
 * request may have reached the server: a write may then have happened.
 */
static int outcome(CURLcode res, CURL *curl, const ft_kube_call_t *call,
		   const char *url)
{
	const char *method = call->method ? call->method : "GET";
	long sent = 0;

	if (res == CURLE_OK)
		return 0;
	if (res == CURLE_WRITE_ERROR)
		return FT_EIO; /* the body callback said why */
	curl_easy_getinfo(curl, CURLINFO_REQUEST_SIZE, &sent);
	if (res == CURLE_ABORTED_BY_CALLBACK)
		return ft_error_set(sent ? FT_EIO : FT_EUNAVAIL,
				    "%s %s: stopped", method, url);
	return ft_error_set(sent ? FT_EIO : FT_EUNAVAIL, "%s %s: %s", method,
			    url, curl_easy_strerror(res));
}

/* A request that could not be made at all was not sent. */
static int not_sent(int rc)
{
	return rc == FT_ENOMEM ? rc : FT_EUNAVAIL;
}

int ft_kube_call(ft_kube_client_t *client, const ft_kube_call_t *call,
		 long *status)
{
	transfer_t transfer = {.curl = NULL, .call = call};
	struct curl_slist *headers = NULL;
	char *url = NULL;
	int rc;

	*status = 0;
	if (asprintf(&url, "%s%s", client->creds.server, call->path) < 0) {
		url = NULL;
		rc = ft_error_set(FT_ENOMEM, "kube client: out of memory");
		goto cleanup;
	}
	if (!(transfer.curl = acquire(client))) {
		rc = ft_error_set(FT_ENOMEM, "kube client: curl_easy_init");
		goto cleanup;
	}
	if ((rc = build_headers(&headers, client, call)) < 0 ||
	    (rc = set_tls(transfer.curl, &client->creds)) < 0) {
		rc = not_sent(rc);
		goto cleanup;
	}
	set_transport(transfer.curl, url, headers, &transfer);
	set_method(transfer.curl, call);
	set_limits(transfer.curl, client, call);
	rc =
	    outcome(curl_easy_perform(transfer.curl), transfer.curl, call, url);
	curl_easy_getinfo(transfer.curl, CURLINFO_RESPONSE_CODE, status);
cleanup:
	release(client, transfer.curl);
	curl_slist_free_all(headers);
	free(url);
	return rc;
}

int ft_kube_reply_collect(long status, const char *data, size_t len,
			  void *payload)
{
	ft_kube_reply_t *reply = payload;
	size_t need = reply->len + len + 1;

	if (need > reply->max)
		return ft_error_set(FT_ETOOBIG,
				    "kube client: reply larger than %zu bytes",
				    reply->max);
	if (need > reply->cap) {
		size_t cap = reply->cap ? reply->cap : 16384;
		char *body = NULL;

		while (cap < need)
			cap *= 2;
		if (!(body = realloc(reply->body, cap)))
			return ft_error_set(FT_ENOMEM,
					    "kube client: out of memory");
		reply->body = body;
		reply->cap = cap;
	}
	memcpy(reply->body + reply->len, data, len);
	reply->len += len;
	reply->body[reply->len] = '\0';
	return 0;
}

int ft_kube_reply_detach(char **out, ft_kube_reply_t *reply)
{
	if (!reply->body && !(reply->body = calloc(1, 1)))
		return ft_error_set(FT_ENOMEM, "kube client: out of memory");
	*out = reply->body;
	memset(reply, 0, sizeof(*reply));
	return 0;
}

void ft_kube_reply_dispose(ft_kube_reply_t *reply)
{
	if (!reply)
		return;
	free(reply->body);
	memset(reply, 0, sizeof(*reply));
}

int ft_kube_request(ft_kube_client_t *client, const char *method,
		    const char *path, const char *content_type,
		    const char *body, size_t body_len, long *status,
		    char **out_body)
{
	ft_kube_reply_t reply = {.max = REPLY_MAX};
	ft_kube_call_t call = {.method = method,
			       .path = path,
			       .content_type = content_type,
			       .body = body,
			       .body_len = body_len,
			       .timeout_ms = client->timeout_ms,
			       .on_body =
				   out_body ? ft_kube_reply_collect : NULL,
			       .payload = &reply};
	int rc;

	if (out_body)
		*out_body = NULL;
	if ((rc = ft_kube_call(client, &call, status)) < 0)
		goto cleanup;
	if (out_body)
		rc = ft_kube_reply_detach(out_body, &reply);
cleanup:
	ft_kube_reply_dispose(&reply);
	return rc;
}

/* RFC 3986 unreserved, spelled out so that no locale changes it. */
static bool is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

char *ft_kube_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (is_unreserved(c)) {
			*o++ = (char)c;
			continue;
		}
		*o++ = '%';
		*o++ = hex[c >> 4];
		*o++ = hex[c & 0x0f];
	}
	*o = '\0';
	return out;
}

void ft_kube_status_message(char *buf, size_t size, const char *body)
{
	cJSON *root = body ? cJSON_Parse(body) : NULL;
	const cJSON *message =
	    cJSON_GetObjectItemCaseSensitive(root, "message");

	snprintf(buf, size, "%s",
		 cJSON_IsString(message) ? message->valuestring : "");
	cJSON_Delete(root);
}
