/*
 * The per-address connection cap (clients.h): one list of the open
 * connections under a mutex. A new connection scans it once (at most
 * maxConnections entries) to count its address and find the connection
 * idle the longest.
 */
#include "clients.h"

#include <flextopo/clock.h>
#include <flextopo/error.h>
#include <flextopo/log.h>

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An address without its port: family and up to 16 bytes. */
typedef struct {
	sa_family_t family;
	unsigned char bytes[16];
} addr_key_t;

struct ft_client_conn {
	addr_key_t key;
	int fd;
	bool busy;	  /* a request in progress */
	bool closing;	  /* shut down here; no longer counted */
	uint64_t idle_ns; /* idle since (CLOCK_MONOTONIC) */
	ft_client_conn_t *prev, *next;
};

struct ft_clients {
	unsigned cap;
	pthread_mutex_t lock;
	ft_client_conn_t *head;
	atomic_ulong closed_idle, refused;
};

static void key_of(addr_key_t *k, const struct sockaddr *addr)
{
	memset(k, 0, sizeof(*k));
	if (!addr)
		return;
	k->family = addr->sa_family;
	if (addr->sa_family == AF_INET)
		memcpy(k->bytes, &((const struct sockaddr_in *)addr)->sin_addr,
		       4);
	else if (addr->sa_family == AF_INET6)
		memcpy(k->bytes,
		       &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
}

static bool same_key(const addr_key_t *a, const addr_key_t *b)
{
	return a->family == b->family &&
	       memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

int ft_clients_new(ft_clients_t **out, unsigned cap)
{
	ft_clients_t *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return ft_error_set(FT_ENOMEM, "server: out of memory");
	c->cap = cap;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void ft_clients_free(ft_clients_t *c)
{
	ft_client_conn_t *conn, *next;

	if (!c)
		return;
	for (conn = c->head; conn; conn = next) {
		next = conn->next;
		free(conn);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/*
 * Over the cap, the connection of `conn`'s address idle the longest, `conn`
 * included; NULL when the address is within the cap.
 */
static ft_client_conn_t *over_cap(const ft_clients_t *c,
				  const ft_client_conn_t *conn)
{
	ft_client_conn_t *p, *oldest = NULL;
	unsigned n = 0;

	for (p = c->head; p; p = p->next) {
		if (p->closing || !same_key(&p->key, &conn->key))
			continue;
		n++;
		if (!p->busy && (!oldest || p->idle_ns < oldest->idle_ns))
			oldest = p;
	}
	return n > c->cap ? oldest : NULL;
}

/* Close `victim` (shutdown: libmicrohttpd closes it), counted. */
static void reclaim(ft_clients_t *c, ft_client_conn_t *victim,
		    const ft_client_conn_t *conn)
{
	/* Counted before the close, which the client may see at once. */
	victim->closing = true;
	atomic_fetch_add(victim == conn ? &c->refused : &c->closed_idle, 1);
	shutdown(victim->fd, SHUT_RDWR);
	ft_log(FT_LOG_DEBUG, NULL, NULL, NULL, NULL,
	       "connection cap of %u per client reached: %s", c->cap,
	       victim == conn ? "new connection closed, none idle"
			      : "the connection idle the longest closed");
}

ft_client_conn_t *ft_clients_opened(ft_clients_t *c,
				    const struct sockaddr *addr, int fd)
{
	ft_client_conn_t *conn, *victim;

	if (!c->cap || !(conn = calloc(1, sizeof(*conn))))
		return NULL;
	key_of(&conn->key, addr);
	conn->fd = fd;
	conn->idle_ns = ft_clock_ns();
	pthread_mutex_lock(&c->lock);
	conn->next = c->head;
	if (c->head)
		c->head->prev = conn;
	c->head = conn;
	if ((victim = over_cap(c, conn)))
		reclaim(c, victim, conn);
	pthread_mutex_unlock(&c->lock);
	return conn;
}

void ft_clients_closed(ft_clients_t *c, ft_client_conn_t *conn)
{
	if (!conn)
		return;
	pthread_mutex_lock(&c->lock);
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		c->head = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	pthread_mutex_unlock(&c->lock);
	free(conn);
}

void ft_clients_busy(ft_clients_t *c, ft_client_conn_t *conn, bool busy)
{
	if (!conn)
		return;
	pthread_mutex_lock(&c->lock);
	conn->busy = busy;
	if (!busy)
		conn->idle_ns = ft_clock_ns();
	pthread_mutex_unlock(&c->lock);
}

void ft_clients_closed_counts(const ft_clients_t *c, unsigned long *idle,
			      unsigned long *refused)
{
	*idle = c ? atomic_load(&c->closed_idle) : 0;
	*refused = c ? atomic_load(&c->refused) : 0;
}
