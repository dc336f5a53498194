/* The listening socket of a stream edge (rpc_tcp.c, the native endpoint;
 * src/mooncake/mc_edge.c, Mooncake's coro_rpc endpoint): HOST:PORT parsed,
 * resolved, bound and listened on, non-blocking, with the same messages and
 * the same rule for a default address that is taken.  On the main thread,
 * before spawn (edge.h: create). */
#ifndef CRESCENT_RPC_STREAM_LISTEN_H
#define CRESCENT_RPC_STREAM_LISTEN_H

#include <stdbool.h>

struct cr_stream_listen {
    const char *address;         /* HOST:PORT or [V6]:PORT */
    const char *flag;            /* for messages: "--rpc-tcp-address" */
    const char *what;            /* for messages: "native RPC" */
    const char *default_address; /* taken: not an error (NULL: none) */
    /* Optional: refuses a resolved address (e.g. not loopback) with the
     * message it writes to stderr; returns false to refuse. */
    bool (*accept_address)(const void *sockaddr, const char *address, const void *arg);
    const void *arg;
};

/* Binds and listens.  CR_OK with *fd set; CR_OK with *fd -1 and
 * *default_busy when the default address is in use (the edge then serves
 * nothing and says so at wire); CR_ERR_INVALID_PARAMS (not HOST:PORT, or
 * refused by accept_address) or CR_ERR_IO (cannot resolve or bind), each
 * said in one line on stderr. */
int cr_stream_listen(const struct cr_stream_listen *spec, int *fd, bool *default_busy);

#endif
