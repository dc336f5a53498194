/* The ZMQ connection's fate before its first handshake, so a call fails at
 * once with the reason instead of waiting out its timeout: a refused or
 * unreachable connection (nothing listens at the endpoint), or a handshake
 * crescentd turned down (CurveZMQ on there, keys missing or not allowed
 * here); both are CR_ERR_RPC_FAIL (crescentctl: exit 3, unreachable).  libzmq
 * reports both only as events on a monitor socket; once a
 * handshake succeeds the monitor is no longer read and calls take the usual
 * blocking path (client_call.c), so an established client pays nothing. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "client/client_internal.h"

#define MONITOR_EVENTS                                                               \
    (ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |                     \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |    \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* Each monitor's inproc name is new: a client's address alone repeats when
 * a freed client's memory is reused (or an etcd:// client reopens its
 * transport) before libzmq has let go of the old monitor's name, and the
 * bind then fails with "Address already in use". */
static atomic_ulong monitors_opened;

int cr_client_monitor_open(cr_client *c, char *error, size_t error_size) {
    char address[96];
    snprintf(address, sizeof(address), "inproc://crescent-client-monitor-%p-%lu", (void *)c,
             atomic_fetch_add_explicit(&monitors_opened, 1, memory_order_relaxed));
    if (zmq_socket_monitor(c->socket, address, MONITOR_EVENTS) != 0 ||
        (c->monitor = zmq_socket(c->context, ZMQ_PAIR)) == NULL ||
        zmq_connect(c->monitor, address) != 0) {
        snprintf(error, error_size, "zmq monitor: %s", zmq_strerror(errno));
        return CR_ERR_IO;
    }
    return CR_OK;
}

void cr_client_monitor_close(cr_client *c) {
    if (c->monitor == NULL) return;
    zmq_socket_monitor(c->socket, NULL, 0);
    zmq_close(c->monitor);
    c->monitor = NULL;
}

/* One event: its id and the endpoint it is about (the second frame). */
static bool read_event(cr_client *c, uint16_t *event, char *endpoint, size_t size) {
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    bool ok = zmq_msg_recv(&frame, c->monitor, ZMQ_DONTWAIT) >= 6;
    if (ok) memcpy(event, zmq_msg_data(&frame), sizeof(*event));
    bool more = ok && zmq_msg_more(&frame);
    zmq_msg_close(&frame);
    endpoint[0] = '\0';
    if (!more) return ok;
    zmq_msg_init(&frame);
    int n = zmq_msg_recv(&frame, c->monitor, ZMQ_DONTWAIT);
    if (n >= 0) snprintf(endpoint, size, "%.*s", n, (const char *)zmq_msg_data(&frame));
    zmq_msg_close(&frame);
    return ok;
}

int cr_client_monitor_wait(cr_client *c, int wait_ms) {
    zmq_pollitem_t items[] = {{c->socket, 0, ZMQ_POLLIN, 0}, {c->monitor, 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, 2, wait_ms);
    if (n < 0) return errno == EINTR ? CR_ERR_AGAIN : cr_client_fail(c, CR_ERR_IO, "zmq_poll: %s",
                                                                     zmq_strerror(errno));
    if (items[0].revents & ZMQ_POLLIN) {
        c->link_up = true; /* a reply: the handshake is behind us */
        return CR_OK;
    }
    if (n == 0) return CR_ERR_AGAIN;
    uint16_t event = 0;
    char endpoint[256];
    while (read_event(c, &event, endpoint, sizeof(endpoint))) {
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            c->link_up = true;
            return CR_OK;
        }
        /* The second retry, not the first: one refused connect can be a
         * passing one (a listener's backlog under load), which libzmq
         * retries by itself 100 ms later; two in a row is nobody there. */
        if (event == ZMQ_EVENT_CONNECT_RETRIED && ++c->connect_retries >= 2)
            return cr_client_fail(c, CR_ERR_RPC_FAIL,
                                  "nothing accepts connections at %s (refused or unreachable): "
                                  "is crescentd running there? (its --rpc-address)",
                                  endpoint[0] ? endpoint : "the --rpc endpoint");
        if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
            return cr_client_fail(
                c, CR_ERR_RPC_FAIL,
                "crescentd at %s turned down the connection's handshake: it runs CurveZMQ "
                "(--curve-secret-key-file) and this client %s (CRESCENT_CURVE_SERVER_KEY, "
                "CRESCENT_CURVE_PUBLIC_KEY, CRESCENT_CURVE_SECRET_KEY; its public key in "
                "crescentd's --curve-clients), or this client has keys and crescentd none",
                endpoint[0] ? endpoint : "the --rpc endpoint",
                event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? "is not among its allowed keys"
                                                         : "has no keys or other ones");
    }
    return CR_ERR_AGAIN;
}
