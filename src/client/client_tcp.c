/* libcrescent's native transport: crescent://HOST:PORT endpoints, one TCP
 * connection per cr_client to crescentd's --rpc-tcp-address, framed as
 * msgs/rpc_stream.h.  The connection is made on the first send (as ZMQ
 * connects in the background, a client may be opened before crescentd
 * runs) and again on the next send after it broke; requests in flight on a
 * broken connection complete as timeouts, as with ZMQ. */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "msgs/rpc_stream.h"

#define RX_CHUNK (64u << 10)

int cr_client_tcp_open(cr_client *c, const char *endpoint, char *error, size_t error_size) {
    assert(strncmp(endpoint, CR_CLIENT_NATIVE_SCHEME, strlen(CR_CLIENT_NATIVE_SCHEME)) == 0);
    const char *address = endpoint + strlen(CR_CLIENT_NATIVE_SCHEME);
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address || colon[1] == '\0') {
        snprintf(error, error_size, "'%s' is not crescent://HOST:PORT", endpoint);
        return CR_ERR_INVALID_PARAMS;
    }
    c->tcp_fd = -1;
    c->tcp_address = strdup(address);
    if (c->tcp_address == NULL) {
        snprintf(error, error_size, "out of memory");
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

void cr_client_tcp_close(cr_client *c) {
    if (c->tcp_fd >= 0) close(c->tcp_fd);
    c->tcp_fd = -1;
    free(c->tcp_address);
    c->tcp_address = NULL;
    free(c->rx);
    c->rx = NULL;
}

static void drop_connection(cr_client *c) {
    if (c->tcp_fd >= 0) close(c->tcp_fd);
    c->tcp_fd = -1;
    c->rx_len = c->rx_taken = 0; /* a half frame of the old connection means nothing */
}

/* Waits for `events` on the connection until `deadline`: CR_OK, or
 * CR_ERR_TIMEOUT / CR_ERR_IO (recorded). */
static int wait_for(cr_client *c, short events, int64_t deadline, const char *what) {
    for (;;) {
        int64_t left = deadline - c->clock_ms(c->clock_ctx);
        if (left < 0) left = 0;
        struct pollfd p = {.fd = c->tcp_fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0) return CR_OK;
        if (n < 0 && errno != EINTR)
            return cr_client_fail(c, CR_ERR_IO, "poll: %s", strerror(errno));
        if (n == 0 && left == 0)
            return cr_client_fail(c, CR_ERR_TIMEOUT, "%s crescent://%s took over %d ms", what,
                                  c->tcp_address, c->timeout_ms);
    }
}

/* Connects (non-blocking, bounded by deadline) with TCP_NODELAY. */
static int connect_now(cr_client *c, int64_t deadline) {
    char host[256];
    const char *colon = strrchr(c->tcp_address, ':');
    size_t hl = (size_t)(colon - c->tcp_address);
    const char *h = c->tcp_address;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;
    if (hl >= sizeof(host)) return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "host too long");
    memcpy(host, h, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0)
        return cr_client_fail(c, CR_ERR_IO, "cannot resolve crescent://%s: %s", c->tcp_address,
                              gai_strerror(gai));
    c->tcp_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, rc = CR_OK;
    if (c->tcp_fd < 0 ||
        setsockopt(c->tcp_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        (connect(c->tcp_fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS)) {
        rc = cr_client_fail(c, CR_ERR_IO, "cannot connect to crescent://%s: %s (is crescentd "
                            "running with --rpc-tcp-address?)", c->tcp_address, strerror(errno));
    } else {
        rc = wait_for(c, POLLOUT, deadline, "connecting to");
        int err = 0;
        socklen_t len = sizeof(err);
        if (rc == CR_OK && (getsockopt(c->tcp_fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err))
            rc = cr_client_fail(c, CR_ERR_IO, "cannot connect to crescent://%s: %s (is "
                                "crescentd running with --rpc-tcp-address?)", c->tcp_address,
                                strerror(err ? err : errno));
    }
    freeaddrinfo(ai);
    if (rc != CR_OK) drop_connection(c);
    return rc;
}

/* Writes the whole frame or fails; a connection that broke is made again
 * once, so a crescentd restart costs the calls in flight, not the client. */
int cr_client_tcp_send(cr_client *c, const uint8_t *frame, size_t len, int64_t deadline) {
    assert(c->tcp_address != NULL && len >= CR_RPC_STREAM_LEN_BYTES);
    for (int attempt = 0;; attempt++) {
        int rc = c->tcp_fd >= 0 ? CR_OK : connect_now(c, deadline);
        if (rc != CR_OK) return rc;
        size_t done = 0;
        while (done < len && rc == CR_OK) {
            ssize_t n = send(c->tcp_fd, frame + done, len - done, MSG_NOSIGNAL);
            if (n > 0)
                done += (size_t)n;
            else if (n < 0 && errno == EINTR)
                continue;
            else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                rc = wait_for(c, POLLOUT, deadline, "sending to");
            else
                rc = cr_client_fail(c, CR_ERR_IO, "send to crescent://%s: %s", c->tcp_address,
                                    n < 0 ? strerror(errno) : "nothing written");
        }
        if (rc == CR_OK) return CR_OK;
        drop_connection(c); /* a half-written frame ends this connection */
        if (rc != CR_ERR_IO || done > 0 || attempt > 0) return rc;
    }
}

/* Makes room to read into: the rest of the frame being read, or a chunk. */
int cr_client_rx_reserve(cr_client *c, size_t frame_total) {
    size_t want = c->rx_len + RX_CHUNK;
    if (frame_total > want) want = frame_total;
    if (want <= c->rx_cap) return CR_OK;
    uint8_t *grown = realloc(c->rx, want);
    if (grown == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory reading a reply");
    c->rx = grown;
    c->rx_cap = want;
    return CR_OK;
}

/* Drops the frame handed out by the previous receive. */
void cr_client_rx_release(cr_client *c) {
    if (c->rx_taken == 0) return;
    c->rx_len -= c->rx_taken;
    if (c->rx_len > 0) memmove(c->rx, c->rx + c->rx_taken, c->rx_len);
    c->rx_taken = 0;
}

int cr_client_tcp_recv(cr_client *c, int64_t timeout_ms, const uint8_t **payload,
                       size_t *len) {
    cr_client_rx_release(c);
    int64_t deadline = c->clock_ms(c->clock_ctx) + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        size_t n = 0;
        enum cr_rpc_stream_verdict v =
            cr_rpc_stream_next(c->rx, c->rx_len, CR_RPC_REPLY_HEADER_BYTES,
                               CR_RPC_STREAM_REPLY_MAX, &n);
        if (v == CR_RPC_STREAM_FRAME) {
            *payload = c->rx + CR_RPC_STREAM_LEN_BYTES;
            *len = n;
            c->rx_taken = CR_RPC_STREAM_LEN_BYTES + n;
            return CR_OK;
        }
        if (v == CR_RPC_STREAM_BAD) {
            drop_connection(c);
            return cr_client_fail(c, CR_ERR_PROTOCOL, "crescent://%s sent a frame of length "
                                  "%zu, outside %u..%u: connection closed", c->tcp_address,
                                  n, CR_RPC_REPLY_HEADER_BYTES, CR_RPC_STREAM_REPLY_MAX);
        }
        if (c->tcp_fd < 0) return CR_ERR_TIMEOUT; /* nothing can come: the request times out */
        int rc = cr_client_rx_reserve(c, CR_RPC_STREAM_LEN_BYTES + n);
        if (rc != CR_OK) return rc;
        ssize_t got = recv(c->tcp_fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, MSG_DONTWAIT);
        if (got > 0) {
            c->rx_len += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (timeout_ms <= 0 || c->clock_ms(c->clock_ctx) >= deadline) return CR_ERR_TIMEOUT;
            rc = wait_for(c, POLLIN, deadline, "waiting for a reply from");
            if (rc == CR_ERR_TIMEOUT) return rc;
            if (rc != CR_OK) return rc;
            continue;
        }
        drop_connection(c); /* closed by crescentd (restart, or a frame it refused) */
        return cr_client_fail(c, CR_ERR_IO, "crescent://%s closed the connection%s%s",
                              c->tcp_address, got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
    }
}
