/*
 * Connections per client address (private to src/server), for the cap
 * ft_server_options_t.max_connections_per_client sets.
 *
 * libmicrohttpd's own per-address limit refuses every new connection of an
 * address at its cap. In scheduler mode the extender is kube-scheduler's
 * sidecar on 127.0.0.1, and any other process of that address that leaks
 * keep-alive connections would lock kube-scheduler out until they time out
 * (connectionTimeoutSeconds). So the cap is kept here instead: when a
 * connection takes its address over the cap, the connection of that
 * address that has been idle the longest (no request in progress, the new
 * one included as idle since now) is closed to make room; only when none is
 * idle is the new connection closed. A leaker's idle connections go first,
 * and a client that sends requests always gets through.
 *
 * Closing is a shutdown(2) of the socket, which libmicrohttpd then sees as
 * the client gone; it closes the descriptor itself. libmicrohttpd reports a
 * connection closed before it closes its socket, and the records are
 * guarded by one mutex, so a descriptor is never shut down after it has been
 * closed and reused.
 */
#ifndef FLEXTOPO_SERVER_CLIENTS_H
#define FLEXTOPO_SERVER_CLIENTS_H

#include <stdbool.h>
#include <sys/socket.h>

typedef struct ft_clients ft_clients_t;
typedef struct ft_client_conn ft_client_conn_t;

/* `cap` connections per address; 0 tracks nothing. FT_ENOMEM. */
int ft_clients_new(ft_clients_t **out, unsigned cap);
void ft_clients_free(ft_clients_t *clients);

/*
 * A connection from `addr` on socket `fd` opened: track it, closing what
 * the cap requires. The record (or NULL without a cap or memory) goes to
 * ft_clients_closed() and ft_clients_busy().
 */
ft_client_conn_t *ft_clients_opened(ft_clients_t *clients,
				    const struct sockaddr *addr, int fd);
void ft_clients_closed(ft_clients_t *clients, ft_client_conn_t *conn);

/* A request began (busy) or ended on `conn`; NULL is fine. */
void ft_clients_busy(ft_clients_t *clients, ft_client_conn_t *conn, bool busy);

/* Connections closed to keep the cap so far (idle ones, new ones). */
void ft_clients_closed_counts(const ft_clients_t *clients, unsigned long *idle,
			      unsigned long *refused);

#endif
