/* The transfer client's same-host side (shm); the protocol is described in
 * xfer_server_shm.c.
 *
 * A peer is same-host when its shm socket accepts a connection.  The first op
 * naming a segment maps it (one request and reply on that socket, the memfd
 * passed with SCM_RIGHTS); later ops copy between the caller's iovecs and the
 * mapping during cr_xfer_client_poll, after checking the segment's live
 * generation and the bounds: no syscall per op.  cr_xfer_client_map hands
 * out a pointer into the mapping for reading in place, with no copy at all. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_client_internal.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_shm.h"

static bool map_live(const struct xfer_peer *peer, const struct xfer_shm_map *map) {
    /* Acquire pairs with the server's release bump in cr_xfer_shm_bump. */
    return __atomic_load_n(&peer->generations[map->slot], __ATOMIC_ACQUIRE) == map->generation;
}

static void unmap(struct xfer_shm_map *map) {
    if (map->local != NULL) munmap(map->local, map->size);
    memset(map, 0, sizeof(*map));
}

bool cr_xfer_shm_connect(struct cr_xfer_client *cli, struct xfer_peer *peer, char *why,
                         size_t why_size) {
    (void)cli;
    struct sockaddr_un addr;
    socklen_t len = cr_xfer_shm_address(peer->endpoint, &addr);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, len) != 0) {
        snprintf(why, why_size, "no shm socket @%s: %s", addr.sun_path + 1, strerror(errno));
        if (fd >= 0) close(fd);
        return false;
    }
    /* Map requests are rare (once per segment) and answered at once: a
     * blocking socket with a deadline keeps them simple. */
    struct timeval tv = {.tv_sec = (time_t)(cli->cfg.connect_timeout_ms / 1000u),
                         .tv_usec = (suseconds_t)(cli->cfg.connect_timeout_ms % 1000u) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    peer->maps = calloc(CR_XFER_SHM_MAPS_MAX, sizeof(*peer->maps));
    if (peer->maps == NULL) {
        snprintf(why, why_size, "out of memory");
        close(fd);
        return false;
    }
    peer->shm_fd = fd;
    return true;
}

void cr_xfer_shm_disconnect(struct xfer_peer *peer) {
    if (peer->maps != NULL) {
        for (uint32_t i = 0; i < CR_XFER_SHM_MAPS_MAX; i++)
            if (peer->maps[i].used) unmap(&peer->maps[i]);
        free(peer->maps);
        peer->maps = NULL;
    }
    if (peer->generations != NULL) munmap((void *)peer->generations, CR_XFER_SHM_CONTROL_BYTES);
    peer->generations = NULL;
    if (peer->shm_fd >= 0) close(peer->shm_fd);
    peer->shm_fd = -1;
}

/* Receives the reply and its fds (nfds: 2 for a map, 1 for a file).
 * Returns the reply's status, or CR_ERR_IO / CR_ERR_PROTOCOL with
 * cli->last_error set. */
static int receive_reply(struct cr_xfer_client *cli, struct xfer_peer *peer,
                         struct cr_xfer_shm_reply *reply, int fds[2], size_t nfds) {
    assert(nfds == 1 || nfds == 2);
    struct iovec iov = {.iov_base = reply, .iov_len = sizeof(*reply)};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t n = recvmsg(peer->shm_fd, &msg, MSG_CMSG_CLOEXEC);
    fds[0] = fds[1] = -1;
    struct cmsghdr *cmsg = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    size_t got = 0;
    if (cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
        (cmsg->cmsg_len == CMSG_LEN(sizeof(int)) || cmsg->cmsg_len == CMSG_LEN(2 * sizeof(int)))) {
        got = cmsg->cmsg_len == CMSG_LEN(sizeof(int)) ? 1 : 2;
        memcpy(fds, CMSG_DATA(cmsg), got * sizeof(int));
    }
    if (n != (ssize_t)sizeof(*reply) || reply->magic != CR_XFER_SHM_MAGIC ||
        (reply->status == CR_OK && got != nfds) ||
        (reply->status == CR_OK && nfds == 2 && reply->slot >= CR_XFER_SHM_CONTROL_BYTES / 8)) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: shm reply %s", peer->endpoint,
                 n < 0 ? strerror(errno) : "malformed");
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0) close(fds[i]);
        return n < 0 ? CR_ERR_IO : CR_ERR_PROTOCOL;
    }
    if (reply->status != CR_OK) /* fds only come with CR_OK */
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0) close(fds[i]);
    return reply->status;
}

/* Asks the server for a segment and maps it.  Returns CR_OK,
 * CR_ERR_SEGMENT_NOT_FOUND (not registered, or plain memory: use tcp),
 * CR_ERR_ILLEGAL_CLIENT (the server wants a capability: this op goes by tcp,
 * a later op with one asks again), or
 * CR_ERR_IO / CR_ERR_PROTOCOL / CR_ERR_NOMEM. */
static int map_segment(struct cr_xfer_client *cli, struct xfer_peer *peer,
                       const char *segment, const struct cr_cap *cap, struct xfer_shm_map *map) {
    struct cr_xfer_shm_request req = {.magic = CR_XFER_SHM_MAGIC,
                                      .name_len = (uint8_t)strlen(segment),
                                      .has_cap = cap != NULL};
    memcpy(req.name, segment, req.name_len);
    if (cap != NULL) cr_cap_encode(cap, req.cap);
    if (send(peer->shm_fd, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: shm map request: %s",
                 peer->endpoint, strerror(errno));
        return CR_ERR_IO;
    }
    struct cr_xfer_shm_reply reply;
    int fds[2];
    int rc = receive_reply(cli, peer, &reply, fds, 2);
    if (rc != CR_OK) return rc;
    /* Touched only if it can never be shorter than we map: sealed against
     * shrinking and as long as the reply says (a server of an older build
     * hands out unsealed memfds, which any of its clients could truncate
     * under this process's mapping: a SIGBUS here).  Else tcp, which the
     * server bounds itself. */
    struct stat seg_st, control_st;
    if (!cr_xfer_size_sealed(fds[0]) || !cr_xfer_size_sealed(fds[1]) ||
        fstat(fds[0], &seg_st) != 0 || (uint64_t)seg_st.st_size < reply.size ||
        fstat(fds[1], &control_st) != 0 || control_st.st_size < CR_XFER_SHM_CONTROL_BYTES) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: segment '%s' is not mapped: its "
                 "memfd is not sealed against shrinking or is shorter than said; using tcp",
                 peer->endpoint, segment);
        CR_WARN("xfer", "%s", cli->last_error);
        close(fds[0]);
        close(fds[1]);
        return CR_ERR_SEGMENT_NOT_FOUND;
    }
    void *local = mmap(NULL, reply.size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (peer->generations == NULL) {
        void *control = mmap(NULL, CR_XFER_SHM_CONTROL_BYTES, PROT_READ, MAP_SHARED, fds[1], 0);
        if (control != MAP_FAILED) peer->generations = control;
    }
    close(fds[0]);
    close(fds[1]);
    if (local == MAP_FAILED || peer->generations == NULL) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: mapping segment '%s' failed: %s",
                 peer->endpoint, segment, strerror(errno));
        if (local != MAP_FAILED) munmap(local, reply.size);
        return CR_ERR_NOMEM;
    }
    map->used = true;
    map->name_len = req.name_len;
    memcpy(map->name, segment, req.name_len + 1u);
    map->slot = reply.slot;
    map->generation = reply.generation;
    map->base = reply.base;
    map->size = reply.size;
    map->local = local;
    return CR_OK;
}

static bool any_mapped(const struct xfer_peer *peer) {
    for (uint32_t i = 0; i < CR_XFER_SHM_MAPS_MAX; i++)
        if (peer->maps[i].used && peer->maps[i].local != NULL) return true;
    return false;
}

struct xfer_shm_map *cr_xfer_shm_find_map(struct cr_xfer_client *cli, struct xfer_peer *peer,
                                          const char *segment, const struct cr_cap *cap) {
    assert(peer->shm_fd >= 0);
    size_t len = strlen(segment);
    struct xfer_shm_map *free_map = NULL;
    for (uint32_t i = 0; i < CR_XFER_SHM_MAPS_MAX; i++) {
        struct xfer_shm_map *map = &peer->maps[i];
        if (map->used && map->name_len == len && memcmp(map->name, segment, len) == 0) {
            if (map->local == NULL || map_live(peer, map)) return map;
            unmap(map); /* unregistered (and maybe registered again) since */
        }
        if (!map->used && free_map == NULL) free_map = map;
    }
    if (free_map == NULL) return NULL;
    int rc = map_segment(cli, peer, segment, cap, free_map);
    if ((rc == CR_ERR_IO || rc == CR_ERR_PROTOCOL) && !any_mapped(peer)) {
        /* The socket accepted and then closed: the server refused this
         * process (another user, see xfer_server_shm.c) or went away.  With
         * nothing mapped no queued op points into peer->maps: drop shm. */
        CR_WARN("xfer", "peer %s: transport tcp from now on (%s)", peer->endpoint,
                cli->last_error);
        cr_xfer_shm_disconnect(peer);
        return NULL;
    }
    if (rc == CR_ERR_SEGMENT_NOT_FOUND) {
        /* Not shareable (plain memory) or not registered: remembered as
         * tcp-only, so later ops do not ask again; tcp gives the answer. */
        free_map->used = true;
        free_map->name_len = (uint8_t)len;
        memcpy(free_map->name, segment, len + 1);
        free_map->local = NULL;
    }
    return rc == CR_OK || rc == CR_ERR_SEGMENT_NOT_FOUND ? free_map : NULL;
}

/* Runs one op against its mapping; returns its status. */
static int run_op(const struct xfer_op_slot *op, char *message, size_t size) {
    struct xfer_peer *peer = op->peer;
    struct xfer_shm_map *map = op->map;
    if (!map->used || !map_live(peer, map)) {
        snprintf(message, size,
                 "%s: segment '%.64s' was unregistered", peer->endpoint, op->segment);
        return CR_ERR_SEGMENT_NOT_FOUND;
    }
    if (!cr_xfer_range_inside(map->base, map->size, op->remote_addr, op->length)) {
        snprintf(message, size, "%s: segment '%.64s' range 0x%llx+%llu out of bounds",
                 peer->endpoint, op->segment, (unsigned long long)op->remote_addr,
                 (unsigned long long)op->length);
        return CR_ERR_INVALID_PARAMS;
    }
    uint8_t *at = map->local + (op->remote_addr - map->base);
    for (uint32_t i = 0; i < op->iov_count; i++) {
        if (op->opcode == CR_XFER_READ) memcpy(op->iov[i].iov_base, at, op->iov[i].iov_len);
        else memcpy(at, op->iov[i].iov_base, op->iov[i].iov_len);
        at += op->iov[i].iov_len;
    }
    return CR_OK;
}

void cr_xfer_shm_run(struct cr_xfer_client *cli) {
    /* Only the ops queued before this call: callbacks may queue more. */
    for (uint32_t n = cli->shm_count; n > 0; n--) {
        uint32_t index = cli->shm_ready[cli->shm_head];
        cli->shm_head = (cli->shm_head + 1) % cli->cfg.max_ops;
        cli->shm_count--;
        char message[CR_XFER_MESSAGE_MAX];
        int status = run_op(&cli->ops[index], message, sizeof(message));
        cr_xfer_part_done(cli, index, status, message);
    }
}

int cr_xfer_client_map(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                       uint64_t remote_addr, uint64_t len, void **out) {
    return cr_xfer_client_map_cap(cli, endpoint, segment, remote_addr, len, NULL, out);
}

int cr_xfer_client_map_cap(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                           uint64_t remote_addr, uint64_t len, const struct cr_cap *cap,
                           void **out) {
    assert(cli != NULL && out != NULL);
    *out = NULL;
    struct xfer_peer *peer = endpoint == NULL ? NULL : cr_xfer_client_peer(cli, endpoint);
    if (peer == NULL) return CR_ERR_INVALID_PARAMS;
    if (peer->shm_fd < 0) return CR_ERR_AGAIN;
    if (segment == NULL || !cr_xfer_name_valid(segment, strlen(segment)))
        return CR_ERR_INVALID_PARAMS;
    struct xfer_shm_map *map = cr_xfer_shm_find_map(cli, peer, segment, cap);
    if (map == NULL || map->local == NULL) return CR_ERR_AGAIN;
    if (!cr_xfer_range_inside(map->base, map->size, remote_addr, len)) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "%s: segment '%.64s' range 0x%llx+%llu out of bounds", peer->endpoint, segment,
                 (unsigned long long)remote_addr, (unsigned long long)len);
        return CR_ERR_INVALID_PARAMS;
    }
    *out = map->local + (remote_addr - map->base);
    return CR_OK;
}

int cr_xfer_client_open_file(struct cr_xfer_client *cli, const char *endpoint,
                             const char *segment, uint64_t addr, uint64_t len,
                             const struct cr_cap *cap, int *fd, uint64_t *offset) {
    assert(cli != NULL && fd != NULL && offset != NULL);
    *fd = -1;
    struct xfer_peer *peer = endpoint == NULL ? NULL : cr_xfer_client_peer(cli, endpoint);
    if (peer == NULL) return CR_ERR_INVALID_PARAMS;
    if (peer->shm_fd < 0) return CR_ERR_AGAIN;
    if (segment == NULL || !cr_xfer_name_valid(segment, strlen(segment)) || len == 0 ||
        addr + len < addr)
        return CR_ERR_INVALID_PARAMS;
    struct cr_xfer_shm_request req = {.magic = CR_XFER_SHM_MAGIC,
                                      .name_len = (uint8_t)strlen(segment),
                                      .has_cap = cap != NULL,
                                      .kind = CR_XFER_SHM_FILE,
                                      .addr = addr,
                                      .length = len};
    memcpy(req.name, segment, req.name_len);
    if (cap != NULL) cr_cap_encode(cap, req.cap);
    if (send(peer->shm_fd, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: shm file request: %s",
                 peer->endpoint, strerror(errno));
        return CR_ERR_IO;
    }
    struct cr_xfer_shm_reply reply;
    int fds[2];
    int rc = receive_reply(cli, peer, &reply, fds, 1);
    if (rc != CR_OK) {
        if (rc != CR_ERR_IO && rc != CR_ERR_PROTOCOL) /* those wrote their own */
            snprintf(cli->last_error, sizeof(cli->last_error),
                     "%.63s: shm file of '%.40s' refused: %.60s", peer->endpoint, segment,
                     cr_strerror(rc));
        return rc;
    }
    if (reply.size != len) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: shm file reply for %llu bytes, "
                 "asked %llu", peer->endpoint, (unsigned long long)reply.size,
                 (unsigned long long)len);
        close(fds[0]);
        return CR_ERR_PROTOCOL;
    }
    *fd = fds[0];
    *offset = reply.base;
    return CR_OK;
}
