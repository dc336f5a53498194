/* The transfer server's same-host side (shm).
 *
 * Protocol: the server listens on an abstract Unix socket (SOCK_SEQPACKET)
 * named after its tcp endpoint, "\0crescent-xfer/<host>:<port>"; a client that
 * can connect to it is on the same host.  For each segment it wants, the
 * client sends one map request (the segment name); the server answers with
 * the segment's slot, generation, base address and size, and passes two fds
 * with SCM_RIGHTS: the segment's memfd and the server's control memfd.  The
 * client maps both and from then on moves bytes itself, with memcpy between
 * its buffers and the shared segment: no request crosses to the server, no
 * syscall per op.
 *
 * The control memfd holds one generation counter per segment slot.  The
 * server bumps a slot's generation when it registers or unregisters a segment
 * there; a client compares the generation it mapped with the live one before
 * every op, so an op on a segment unregistered since is refused (and a name
 * registered again is mapped again), never served from stale memory.
 *
 * Who may connect: the socket is abstract (no file, so no permissions), and
 * anyone on the host (in the same network namespace) can reach it.  A
 * connection is accepted only from a process of the server's own user or
 * root (SO_PEERCRED, checked at accept): anyone else is refused, counted
 * (shm_refused_peer) and logged, and never sees a memfd.  Such a client's map
 * request then fails and it uses tcp, where the segment's bounds still hold.
 *
 * Only segments registered with their memfd (cr_xfer_server_register_segment)
 * can be mapped, and only when that memfd's size is sealed (F_SEAL_SHRINK and
 * F_SEAL_SEAL; cr_xfer_segment_alloc seals its own): a client that could
 * shrink the file would make this process's next touch of the segment a
 * SIGBUS.  A plain-memory or unsealed segment is answered
 * CR_ERR_SEGMENT_NOT_FOUND (an unsealed one counted in shm_refused_unsealed
 * and logged), and the client then uses tcp for it.  The control memfd is
 * sealed the same way.
 *
 * A file request (kind CR_XFER_SHM_FILE) names a reader segment (a store
 * server's SSD tier) and a range: checked as a tcp READ of that range is,
 * then the segment's opener opens the file read-only and its descriptor is
 * passed (one fd), so a same-host client preads it instead of receiving the
 * bytes over loopback tcp.  Refused requests pass nothing and are counted
 * (shm_files_refused); the client then reads by tcp. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_server_internal.h"
#include "rdma/xfer_shm.h"

struct shm_conn {
    int kind; /* CR_XFER_CONN_SHM: first, like every connection's epoll tag */
    int fd;
    struct cr_xfer_server *srv;
    struct shm_conn *prev, *next; /* srv->shm_conns */
};

int cr_xfer_shm_listen(struct cr_xfer_server *srv) {
    srv->control_fd = memfd_create("crescent-xfer-control", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (srv->control_fd < 0 || ftruncate(srv->control_fd, CR_XFER_SHM_CONTROL_BYTES) != 0 ||
        !cr_xfer_seal_size(srv->control_fd)) {
        CR_ERROR("xfer", "shm control memfd failed: %s", strerror(errno));
        return CR_ERR_IO;
    }
    void *control = mmap(NULL, CR_XFER_SHM_CONTROL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                         srv->control_fd, 0);
    if (control == MAP_FAILED) return CR_ERR_IO;
    srv->generations = control;
    struct sockaddr_un addr;
    socklen_t len = cr_xfer_shm_address(srv->endpoint, &addr);
    srv->shm_listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->shm_listen_fd < 0 || bind(srv->shm_listen_fd, (struct sockaddr *)&addr, len) != 0 ||
        listen(srv->shm_listen_fd, 128) != 0) {
        CR_ERROR("xfer", "shm listener @%s failed: %s", addr.sun_path + 1, strerror(errno));
        return CR_ERR_IO;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->shm_listen_fd};
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->shm_listen_fd, &ev) != 0) return CR_ERR_IO;
    return CR_OK;
}

void cr_xfer_shm_bump(struct cr_xfer_server *srv, uint32_t slot) {
    assert(slot < CR_XFER_SERVER_SEGMENTS_MAX);
    if (srv->generations == NULL) return;
    /* Release: a client that sees the new generation sees it after the
     * server's changes to the slot. */
    __atomic_fetch_add(&srv->generations[slot], 1, __ATOMIC_RELEASE);
}

bool cr_xfer_shm_peer_allowed(uid_t server_uid, uid_t peer_uid) {
    return peer_uid == server_uid || peer_uid == 0;
}

/* SO_PEERCRED of a new connection: false (logged, counted) when its user may
 * not map this server's segments. */
static bool peer_may_map(struct cr_xfer_server *srv, int fd) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred);
    uid_t self = geteuid();
    if (known && cr_xfer_shm_peer_allowed(self, cred.uid)) return true;
    srv->stats.shm_refused_peer++;
    if (cr_log_ratelimit(&srv->last_refusal_log_ns, cr_xfer_now_ns(), 1000000000ull)) {
        if (known)
            CR_WARN("xfer", "%s: shm connection from pid %d uid %u refused: only uid %u (this "
                    "server's user) or root may map its segments; that client will use tcp",
                    srv->endpoint, (int)cred.pid, (unsigned)cred.uid, (unsigned)self);
        else
            CR_WARN("xfer", "%s: shm connection refused: SO_PEERCRED failed: %s", srv->endpoint,
                    strerror(errno));
    }
    return false;
}

void cr_xfer_shm_accept(struct cr_xfer_server *srv) {
    for (;;) {
        int fd = accept4(srv->shm_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (!peer_may_map(srv, fd)) {
            close(fd);
            continue;
        }
        struct shm_conn *c = calloc(1, sizeof(*c));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (c == NULL || epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            continue;
        }
        c->kind = CR_XFER_CONN_SHM;
        c->fd = fd;
        c->srv = srv;
        c->next = srv->shm_conns;
        if (c->next != NULL) c->next->prev = c;
        srv->shm_conns = c;
        srv->stats.shm_clients++;
    }
}

static void shm_close(struct shm_conn *c) {
    struct cr_xfer_server *srv = c->srv;
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev != NULL) c->prev->next = c->next;
    if (c->next != NULL) c->next->prev = c->prev;
    if (srv->shm_conns == c) srv->shm_conns = c->next;
    free(c);
}

void cr_xfer_shm_close_all(struct cr_xfer_server *srv) {
    while (srv->shm_conns != NULL) shm_close(srv->shm_conns);
    if (srv->shm_listen_fd >= 0) close(srv->shm_listen_fd);
    if (srv->generations != NULL) munmap(srv->generations, CR_XFER_SHM_CONTROL_BYTES);
    if (srv->control_fd >= 0) close(srv->control_fd);
    srv->shm_listen_fd = srv->control_fd = -1;
    srv->generations = NULL;
}

/* The reply, with nfds (0..2) fds riding along. */
static bool send_reply(struct shm_conn *c, const struct cr_xfer_shm_reply *reply,
                       const int *fds, size_t nfds) {
    assert(nfds <= 2);
    struct iovec iov = {.iov_base = (void *)reply, .iov_len = sizeof(*reply)};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, nfds * sizeof(int));
    }
    return sendmsg(c->fd, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*reply);
}

bool cr_xfer_shm_request_valid(const struct cr_xfer_shm_request *req, size_t n,
                               struct cr_cap *cap) {
    assert(req != NULL && cap != NULL);
    if (n != sizeof(*req) || req->magic != CR_XFER_SHM_MAGIC ||
        !cr_xfer_name_valid(req->name, req->name_len) || req->has_cap > 1 ||
        (req->has_cap && cr_cap_decode(req->cap, cap) != 0))
        return false;
    if (req->kind == CR_XFER_SHM_MAP) return true;
    return req->kind == CR_XFER_SHM_FILE && req->length > 0 &&
           req->addr + req->length >= req->addr;
}

/* A map request: the segment's memfd and the control memfd, or a refusal. */
static void answer_map(struct shm_conn *c, const struct cr_xfer_shm_request *req,
                       const struct cr_cap *cap) {
    struct cr_xfer_server *srv = c->srv;
    struct cr_xfer_shm_reply reply = {.magic = CR_XFER_SHM_MAGIC,
                                      .status = CR_ERR_SEGMENT_NOT_FOUND};
    const struct cr_xfer_server_segment *seg = cr_xfer_server_find(srv, req->name, req->name_len);
    int fds[2] = {-1, c->srv->control_fd};
    if (seg != NULL && seg->fd >= 0 && !cr_xfer_size_sealed(seg->fd)) {
        srv->stats.shm_refused_unsealed++;
        if (cr_log_ratelimit(&srv->last_refusal_log_ns, cr_xfer_now_ns(), 1000000000ull))
            CR_WARN("xfer", "%s: segment %.*s is not mapped over shm: its memfd's size is not "
                    "sealed (F_SEAL_SHRINK), so a client could shrink it under this process; "
                    "that client will use tcp", srv->endpoint, (int)req->name_len, req->name);
    } else if (seg != NULL && seg->fd >= 0 &&
               cr_xfer_server_cap_check(srv, "an shm client", seg, 0, 0, 0, req->has_cap, cap) !=
                   CR_CAP_OK) {
        reply.status = CR_ERR_ILLEGAL_CLIENT; /* no memfd: its ops go by tcp, checked there */
    } else if (seg != NULL && seg->fd >= 0) {
        reply.status = CR_OK;
        reply.slot = (uint32_t)(seg - srv->segments);
        reply.generation = __atomic_load_n(&srv->generations[reply.slot], __ATOMIC_ACQUIRE);
        reply.base = (uint64_t)(uintptr_t)seg->base;
        reply.size = seg->size;
        fds[0] = seg->fd;
        srv->stats.shm_maps++;
    }
    if (!send_reply(c, &reply, fds, fds[0] >= 0 ? 2 : 0)) shm_close(c);
}

/* A file request: the reader segment's file for the range, opened by its
 * opener after a tcp READ's capability check, passed and closed here; or a
 * refusal (counted), after which the client reads by tcp. */
static void answer_file(struct shm_conn *c, const struct cr_xfer_shm_request *req,
                        const struct cr_cap *cap) {
    struct cr_xfer_server *srv = c->srv;
    struct cr_xfer_shm_reply reply = {.magic = CR_XFER_SHM_MAGIC,
                                      .status = CR_ERR_SEGMENT_NOT_FOUND};
    const struct cr_xfer_server_segment *seg = cr_xfer_server_find(srv, req->name, req->name_len);
    int fd = -1;
    uint64_t offset = 0;
    if (seg != NULL && seg->opener != NULL) {
        if (cr_xfer_server_cap_check(srv, "an shm client", seg, CR_CAP_READ, req->addr,
                                     req->length, req->has_cap, cap) != CR_CAP_OK)
            reply.status = CR_ERR_ILLEGAL_CLIENT;
        else
            reply.status = seg->opener(seg->reader_arg, req->addr, req->length, &fd, &offset);
    }
    if (reply.status == CR_OK && fd >= 0) {
        reply.base = offset;
        reply.size = req->length;
        srv->stats.shm_files++;
    } else {
        if (reply.status == CR_OK) reply.status = CR_ERR_IO; /* an opener without an fd */
        srv->stats.shm_files_refused++;
    }
    bool sent = send_reply(c, &reply, &fd, fd >= 0 ? 1 : 0);
    if (fd >= 0) close(fd);
    if (!sent) shm_close(c);
}

/* One request per message; anything malformed closes the connection. */
void cr_xfer_shm_readable(void *tag) {
    struct shm_conn *c = tag;
    struct cr_xfer_server *srv = c->srv;
    struct cr_xfer_shm_request req;
    ssize_t n = recv(c->fd, &req, sizeof(req), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    struct cr_cap cap = {0};
    if (n <= 0 || !cr_xfer_shm_request_valid(&req, (size_t)n, &cap)) {
        if (n > 0) srv->stats.refused_malformed++;
        shm_close(c);
        return;
    }
    if (req.kind == CR_XFER_SHM_FILE) answer_file(c, &req, &cap);
    else answer_map(c, &req, &cap);
}
