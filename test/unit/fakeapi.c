/*
 * The fake API server of the unit tests (fakeapi.h): plain sockets and a
 * thread, chunked answers with a pause between chunks so that each reaches
 * the client on its own.
 */
#include "fakeapi.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static bool wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, timeout_ms) == 1;
}

static void send_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		data += n;
		len -= (size_t)n;
	}
}

static size_t content_length(const char *head)
{
	const char *h = strcasestr(head, "\r\nContent-Length:");

	return h ? (size_t)strtoul(h + 17, NULL, 10) : 0;
}

/* The request head and body as one string. */
static char *read_request(int fd)
{
	char *buf = calloc(1, 65536), *end = NULL;
	size_t len = 0;

	while (len < 65535 && wait_readable(fd, 5000)) {
		ssize_t n = recv(fd, buf + len, 65535 - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end && len >= (size_t)(end + 4 - buf) + content_length(buf))
			break;
	}
	return buf;
}

static void send_chunk(int fd, const char *chunk)
{
	struct timespec pause = {.tv_sec = 0, .tv_nsec = 3000000};
	char size[32];

	snprintf(size, sizeof(size), "%zx\r\n", strlen(chunk));
	send_all(fd, size, strlen(size));
	send_all(fd, chunk, strlen(chunk));
	send_all(fd, "\r\n", 2);
	/* Let each chunk reach the client on its own. */
	nanosleep(&pause, NULL);
}

/* Wait until the client closes the connection (at most 10 s). */
static void wait_closed(int fd)
{
	char buf[256];

	while (wait_readable(fd, 10000) && recv(fd, buf, sizeof(buf), 0) > 0)
		continue;
}

static void respond(int fd, const ft_fake_step_t *step)
{
	char head[256];

	if (!step->status) {
		if (step->end == FT_FAKE_HANG)
			wait_closed(fd);
		return;
	}
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
		 step->status);
	send_all(fd, head, strlen(head));
	for (size_t i = 0; step->chunks && step->chunks[i]; i++)
		send_chunk(fd, step->chunks[i]);
	if (step->end == FT_FAKE_HANG)
		wait_closed(fd);
	else if (step->end == FT_FAKE_END)
		send_all(fd, "0\r\n\r\n", 5);
}

static void *serve(void *arg)
{
	ft_fake_api_t *api = arg;

	for (size_t i = 0; i < api->nsteps; i++) {
		int fd;

		if (!wait_readable(api->fd, 10000))
			break;
		if ((fd = accept(api->fd, NULL, NULL)) < 0)
			break;
		api->requests[i] = read_request(fd);
		atomic_fetch_add(&api->received, 1);
		respond(fd, &api->steps[i]);
		close(fd);
	}
	return NULL;
}

void ft_fake_api_start(ft_fake_api_t *api, const ft_fake_step_t *steps,
		       size_t n)
{
	struct sockaddr_in addr = {.sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(addr);

	memset(api, 0, sizeof(*api));
	assert_true(n <= FT_FAKE_STEPS);
	api->steps = steps;
	api->nsteps = n;
	api->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(api->fd >= 0);
	assert_int_equal(bind(api->fd, (struct sockaddr *)&addr, len), 0);
	assert_int_equal(listen(api->fd, 8), 0);
	assert_int_equal(getsockname(api->fd, (struct sockaddr *)&addr, &len),
			 0);
	api->port = ntohs(addr.sin_port);
	assert_int_equal(pthread_create(&api->thread, NULL, serve, api), 0);
}

void ft_fake_api_finish(ft_fake_api_t *api)
{
	pthread_join(api->thread, NULL);
	close(api->fd);
	for (size_t i = 0; i < api->nsteps; i++) {
		if (!api->requests[i])
			fail_msg("step %zu: no request", i);
		if (strncmp(api->requests[i], api->steps[i].expect,
			    strlen(api->steps[i].expect)) != 0)
			fail_msg("step %zu: got \"%.200s\", expected \"%s\"", i,
				 api->requests[i], api->steps[i].expect);
	}
}

void ft_fake_api_dispose(ft_fake_api_t *api)
{
	for (size_t i = 0; i < FT_FAKE_STEPS; i++)
		free(api->requests[i]);
}

void ft_fake_api_wait(ft_fake_api_t *api, size_t n)
{
	struct timespec pause = {.tv_sec = 0, .tv_nsec = 2000000};

	for (int i = 0; i < 5000 && atomic_load(&api->received) < n; i++)
		nanosleep(&pause, NULL);
	if (atomic_load(&api->received) < n)
		fail_msg("the fake API server read %zu of %zu requests",
			 atomic_load(&api->received), n);
}

ft_kube_client_t *ft_fake_api_client(const ft_fake_api_t *api,
				     const char *token_file, long timeout_ms)
{
	ft_kube_credentials_t creds = {0};
	ft_kube_client_t *client = NULL;
	char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", api->port);
	creds.server = url;
	creds.token = "static-token";
	creds.token_file = (char *)token_file;
	assert_int_equal(ft_kube_client_new(&client, &creds, timeout_ms), 0);
	return client;
}

const char *ft_fake_request_body(const char *request)
{
	const char *end = strstr(request, "\r\n\r\n");

	assert_non_null(end);
	return end + 4;
}
