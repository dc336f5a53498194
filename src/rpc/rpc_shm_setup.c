/* The same-host shared-memory endpoint's set-up socket: a client connects
 * to the Unix socket, is checked (uid), says hello, and is answered with a
 * memfd holding its request and reply rings plus two eventfds, or with a
 * refusal it can read.  The rings themselves are served by rpc_shm.c. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_shm.h"
#include "runtime/runtime.h"
#include "rpc/rpc_shm_internal.h"

/* ------------------------------------------------------------------------ */
/* Set-up */

static void send_welcome(int sock, const struct cr_rpc_shm_welcome *w, const int *fds) {
    struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof(*w)};
    union {
        char buf[CMSG_SPACE(CR_RPC_SHM_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fds != NULL) {
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(CR_RPC_SHM_FDS * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, CR_RPC_SHM_FDS * sizeof(int));
    }
    if (sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(*w))
        CR_DEBUG("rpc_shm", "welcome not sent: %s", strerror(errno));
}

/* Answers the hello with an error.  The hello is read first: a Unix
 * socket closed with unread bytes resets the peer, which would then never
 * read the answer. */
static void refuse(int sock, int32_t status, const char *text) {
    struct cr_rpc_shm_hello hello;
    ssize_t n = recv(sock, &hello, sizeof(hello), MSG_DONTWAIT);
    (void)n; /* a hello not sent yet, or read already: nothing to drain */
    struct cr_rpc_shm_welcome w = {.magic = CR_RPC_SHM_MAGIC, .status = status};
    snprintf(w.text, sizeof(w.text), "%s", text);
    send_welcome(sock, &w, NULL);
}

/* Makes the client's memfd and eventfds.  False with `why` set. */
static bool client_rings(struct cr_rpc_shm_server *srv, struct client *c, int *memfd,
                         char *why, size_t why_size) {
    size_t bytes = cr_rpc_shm_map_bytes(srv->ring_bytes);
    *memfd = memfd_create("crescent-rpc-shm", MFD_CLOEXEC);
    if (*memfd < 0 || ftruncate(*memfd, (off_t)bytes) != 0) {
        snprintf(why, why_size, "memfd of %zu bytes: %s", bytes, strerror(errno));
        return false;
    }
    c->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *memfd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        snprintf(why, why_size, "mmap of %zu bytes: %s", bytes, strerror(errno));
        return false;
    }
    c->to_server = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->to_client = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_WAKE, c->slot)};
    if (c->to_server < 0 || c->to_client < 0 ||
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, c->to_server, &ev) != 0) {
        snprintf(why, why_size, "eventfd: %s", strerror(errno));
        return false;
    }
    struct cr_rpc_shm_header *h = c->map;
    h->magic = CR_RPC_SHM_MAGIC;
    h->version = CR_RPC_SHM_VERSION;
    h->ring_bytes = srv->ring_bytes;
    uint8_t *rings = (uint8_t *)c->map + CR_RPC_SHM_HEADER_BYTES;
    cr_rpc_shm_ring_init(&c->req, &h->requests, rings, srv->ring_bytes);
    cr_rpc_shm_ring_init(&c->rep, &h->replies, rings + srv->ring_bytes, srv->ring_bytes);
    return true;
}

/* The client's hello: answered with its rings, or it is closed. */
static void client_hello(struct cr_rpc_shm_server *srv, struct client *c) {
    struct cr_rpc_shm_hello hello;
    ssize_t n = recv(c->sock, &hello, sizeof(hello), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n != (ssize_t)sizeof(hello) || hello.magic != CR_RPC_SHM_MAGIC ||
        hello.version != CR_RPC_SHM_VERSION) {
        if (n > 0) {
            srv->stats.closed_malformed++;
            refuse(c->sock, CR_ERR_PROTOCOL, "not a crescent shm hello of this version");
        }
        cr_rpc_shm_client_close(srv, c, n == 0 ? "it left before its hello" : "bad hello");
        return;
    }
    int memfd = -1;
    char why[200];
    if (!client_rings(srv, c, &memfd, why, sizeof(why))) {
        CR_WARN("rpc_shm", "shm client pid %d dropped: %s", c->pid, why);
        refuse(c->sock, CR_ERR_NOMEM, why);
        if (memfd >= 0) close(memfd);
        cr_rpc_shm_client_close(srv, c, why);
        return;
    }
    struct cr_rpc_shm_welcome w = {.magic = CR_RPC_SHM_MAGIC, .status = CR_OK,
                                   .ring_bytes = srv->ring_bytes};
    int fds[CR_RPC_SHM_FDS] = {memfd, c->to_server, c->to_client};
    send_welcome(c->sock, &w, fds);
    close(memfd); /* both mappings keep it alive */
    c->ready = true;
    srv->ready[srv->ready_count++] = c->slot;
}

/* SO_PEERCRED: only crescentd's own user or root may connect (the
 * abstract socket has no file permissions; see rdma/xfer_shm.h). */
static bool peer_allowed(struct cr_rpc_shm_server *srv, int fd, int *pid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred);
    *pid = known ? (int)cred.pid : -1;
    if (known && cr_xfer_shm_peer_allowed(geteuid(), cred.uid)) return true;
    srv->stats.refused_peer++;
    if (cr_log_ratelimit(&srv->last_log_ns, cr_monotonic_ns(), 10ull * 1000000000u))
        CR_WARN("rpc_shm", "shm client pid %d uid %d refused: only uid %u (crescentd's user) or "
                "root may use %s", *pid, known ? (int)cred.uid : -1, (unsigned)geteuid(),
                srv->path);
    return false;
}

/* Refuses a client once its hello is there (at once if it is, else when
 * its socket becomes readable; with REFUSING_MAX refusals waiting, at once).
 * Takes fd. */
static void refuse_client(struct cr_rpc_shm_server *srv, int fd, int32_t status,
                          const char *text) {
    struct cr_rpc_shm_hello hello;
    uint32_t i = 0;
    while (i < REFUSING_MAX && srv->refusing[i].fd >= 0) i++;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_REFUSE, i)};
    if (recv(fd, &hello, sizeof(hello), MSG_PEEK | MSG_DONTWAIT) > 0 || i == REFUSING_MAX ||
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        refuse(fd, status, text);
        close(fd);
        return;
    }
    srv->refusing[i].fd = fd;
    srv->refusing[i].status = status;
    snprintf(srv->refusing[i].text, sizeof(srv->refusing[i].text), "%s", text);
}

void cr_rpc_shm_refusal_ready(struct cr_rpc_shm_server *srv, uint32_t i) {
    assert(i < REFUSING_MAX && srv->refusing[i].fd >= 0);
    int fd = srv->refusing[i].fd;
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    refuse(fd, srv->refusing[i].status, srv->refusing[i].text);
    close(fd);
    srv->refusing[i].fd = -1;
}

void cr_rpc_shm_accept_some(struct cr_rpc_shm_server *srv, uint32_t *work) {
    for (unsigned i = 0; i < SHM_ACCEPT_BATCH; i++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        int pid;
        if (!peer_allowed(srv, fd, &pid)) {
            refuse_client(srv, fd, CR_ERR_ILLEGAL_CLIENT, "only crescentd's own user or root "
                          "may use its shm endpoint");
            continue;
        }
        if (srv->free_count == 0) {
            srv->stats.refused_full++;
            char text[160];
            snprintf(text, sizeof(text), "%u shm clients are connected "
                     "(--rpc-shm-clients-max): try again later or use crescent://",
                     srv->clients_max);
            if (cr_log_ratelimit(&srv->last_log_ns, cr_monotonic_ns(), 10ull * 1000000000u))
                CR_WARN("rpc_shm", "shm client pid %d refused: %s", pid, text);
            refuse_client(srv, fd, CR_ERR_AGAIN, text);
            continue;
        }
        struct client *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->sock = fd;
        c->to_server = c->to_client = -1;
        c->pid = pid;
        c->slot = srv->free_slots[--srv->free_count];
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_SOCK, c->slot)};
        if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            srv->free_slots[srv->free_count++] = c->slot;
            free(c);
            close(fd);
            continue;
        }
        srv->clients[c->slot] = c;
        srv->stats.clients_open++;
        srv->stats.accepted++;
        (*work)++;
        client_hello(srv, c); /* usually already sent */
    }
}

/* The set-up socket of a ready client is readable: it closed (EOF), or it
 * sent something it must not. */
void cr_rpc_shm_client_sock_event(struct cr_rpc_shm_server *srv, struct client *c) {
    if (!c->ready) {
        client_hello(srv, c);
        return;
    }
    uint8_t byte;
    ssize_t n = recv(c->sock, &byte, sizeof(byte), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) srv->stats.closed_malformed++;
    cr_rpc_shm_client_close(srv, c, n == 0 ? "it closed its socket" : n > 0 ? "it wrote after its hello"
                                                          : strerror(errno));
}

