/* The transfer server's lifecycle: listen, report, tear down.  Serving is in
 * xfer_server.c. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_server_internal.h"
#include "rdma/xfer_shm.h"
#include "rdma/xfer_verbs.h"

#define DEFAULT_ADDRESS "127.0.0.1:0"
#define DEFAULT_MAX_CONNECTIONS 1024u
#define DEFAULT_MAX_REQUEST_BYTES (UINT64_C(1) << 30)
#define LISTEN_BACKLOG 1024

static int listen_tcp(struct cr_xfer_server *srv, const char *address) {
    struct sockaddr_storage addr;
    socklen_t len = 0;
    if (cr_xfer_endpoint_parse(address, &addr, &len) != CR_OK) {
        CR_ERROR("xfer", "data address '%s' is not host:port (e.g. 127.0.0.1:0)", address);
        return CR_ERR_INVALID_PARAMS;
    }
    srv->listen_fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0) {
        CR_ERROR("xfer", "%s: socket failed: %s", address, strerror(errno));
        return CR_ERR_IO;
    }
    int one = 1;
    setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(srv->listen_fd, (struct sockaddr *)&addr, len) != 0 ||
        listen(srv->listen_fd, LISTEN_BACKLOG) != 0) {
        CR_ERROR("xfer", "%s: bind/listen failed: %s (another process on the port? "
                 "change the data address)", address, strerror(errno));
        return CR_ERR_IO;
    }
    len = sizeof(addr);
    if (getsockname(srv->listen_fd, (struct sockaddr *)&addr, &len) != 0) return CR_ERR_IO;
    cr_xfer_endpoint_format(&addr, srv->endpoint, sizeof(srv->endpoint));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->listen_fd};
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &ev) != 0) return CR_ERR_IO;
    return CR_OK;
}

int cr_xfer_server_create(const struct cr_xfer_server_config *cfg,
                          struct cr_xfer_server **out) {
    assert(out != NULL);
    *out = NULL;
    struct cr_xfer_server_config defaults = {0};
    if (cfg == NULL) cfg = &defaults;
    struct cr_xfer_server *srv = calloc(1, sizeof(*srv));
    if (srv == NULL) return CR_ERR_NOMEM;
    srv->listen_fd = srv->shm_listen_fd = srv->control_fd = -1;
    for (uint32_t i = 0; i < CR_XFER_SERVER_SEGMENTS_MAX; i++) srv->segments[i].fd = -1;
    srv->max_connections = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    srv->max_request_bytes =
        cfg->max_request_bytes ? cfg->max_request_bytes : DEFAULT_MAX_REQUEST_BYTES;
    srv->require_capability = cfg->require_capability;
    srv->capability_skew_ms =
        cfg->capability_skew_ms ? cfg->capability_skew_ms : CR_CAP_SKEW_MS_DEFAULT;
    srv->now_ms = cfg->now_ms;
    srv->now_arg = cfg->now_arg;
    srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (srv->epoll_fd < 0) {
        CR_ERROR("xfer", "epoll_create1 failed: %s", strerror(errno));
        free(srv);
        return CR_ERR_IO;
    }
    int rc = listen_tcp(srv, cfg->tcp_address ? cfg->tcp_address : DEFAULT_ADDRESS);
    if (rc != CR_OK) {
        cr_xfer_server_destroy(srv);
        return rc;
    }
    if (!cfg->shm_disabled && (rc = cr_xfer_shm_listen(srv)) != CR_OK) {
        cr_xfer_server_destroy(srv);
        return rc;
    }
    cr_xfer_server_verbs_open(srv, cfg);
    CR_INFO("xfer", "serving transfers on %s (tcp%s; verbs: %s)", srv->endpoint,
            cfg->shm_disabled ? "" : "; shm for same-host clients",
            srv->verbs_why); /* the devices in use, or why none */
    *out = srv;
    return CR_OK;
}

const char *cr_xfer_server_endpoint(const struct cr_xfer_server *srv) {
    assert(srv != NULL);
    return srv->endpoint;
}

const char *cr_xfer_server_protocol(const struct cr_xfer_server *srv) {
    assert(srv != NULL);
    return srv->verbs_count > 0 ? "rdma" : "tcp";
}

int cr_xfer_server_fd(const struct cr_xfer_server *srv) {
    assert(srv != NULL);
    return srv->epoll_fd;
}

void cr_xfer_server_get_stats(const struct cr_xfer_server *srv,
                              struct cr_xfer_server_stats *out) {
    assert(srv != NULL && out != NULL);
    *out = srv->stats;
}
