/* The same-host shared-memory transport of the store-master RPC
 * (crescentd's --rpc-shm-path, libcrescent's shm:// endpoints): the layout
 * both sides map and the byte rings in it.
 *
 * Set-up: the client connects to crescentd's Unix socket (SOCK_SEQPACKET,
 * abstract "@name" or a file path) and sends a hello; crescentd creates a
 * memfd holding this header and two rings (requests: client → crescentd;
 * replies: crescentd → client) and two eventfds (to_server, to_client), and
 * passes the three fds with SCM_RIGHTS in its answer.  After that, no
 * syscall per call while both sides are awake: a call is bytes in a ring.
 * The socket stays open: its end (EOF) is how crescentd learns the client
 * is gone and frees its rings.
 *
 * Each ring is a byte stream carrying exactly the native TCP framing
 * (msgs/rpc_stream.h: [length u32 BE][one-frame envelope]), so a frame may
 * be larger than the ring (it crosses in pieces, read into the receiver's
 * own buffer) and the server parses it with the same code as a TCP stream.
 *
 * Why not ck_ring here: a ck_ring keeps its size and mask in the same
 * struct as its indices, i.e. in memory the peer can write; a peer that
 * changes the mask makes the other side index outside the ring.  These
 * rings keep size, mask and their own index in private memory, publish
 * their own index to the shared line, and check the peer's index before
 * using it (cr_rpc_shm_ring_*: a peer index more than the ring's size away
 * is corruption, never a read or write outside the ring).  Bytes are
 * copied out of the ring before anything parses them, so a peer that
 * rewrites a frame while it is read cannot make a check and a use see
 * different bytes.
 *
 * Sleeping and waking (a Dekker pair per direction, as the actor runtime's
 * `parked`): a consumer about to sleep stores `sleeping = 1`, issues a full
 * fence and looks at the ring again; a producer publishes its tail, issues
 * a full fence and reads `sleeping`; if it is set (and the producer wins the
 * exchange back to 0) it writes the consumer's eventfd.  So a write to an
 * eventfd happens only for a consumer that sleeps.  A producer that finds
 * the ring full sets `producer_waiting` the same way and the consumer,
 * after freeing room, wakes it on its eventfd.
 *
 * Header only (static inline): both crescentd and libcrescent use it, and
 * both sides run the same build, so the header's fields are native. */
#ifndef CRESCENT_MSGS_RPC_SHM_H
#define CRESCENT_MSGS_RPC_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define CR_RPC_SHM_MAGIC 0x31435052u    /* "RPC1" */
#define CR_RPC_SHM_VERSION 1u
#define CR_RPC_SHM_HEADER_BYTES 4096u   /* the rings start on the next page */
#define CR_RPC_SHM_RING_MIN (4u << 10)  /* --rpc-shm-ring-bytes bounds */
#define CR_RPC_SHM_RING_MAX (64u << 20)
#define CR_RPC_SHM_FDS 3u               /* memfd, to_server, to_client */
#define CR_RPC_SHM_SCHEME "shm://"      /* libcrescent's endpoints */
#define CR_RPC_SHM_PATH_MAX 107u        /* sun_path less its NUL */

/* One direction's shared indices, each on its own cache line: the consumer
 * writes head and sleeping, the producer tail and producer_waiting. */
struct cr_rpc_shm_ring_ctl {
    _Alignas(64) uint64_t head;      /* bytes consumed, free-running */
    _Alignas(64) uint64_t tail;      /* bytes produced, free-running */
    _Alignas(64) uint32_t sleeping;  /* the consumer sleeps on its eventfd */
    _Alignas(64) uint32_t producer_waiting; /* the producer waits for room */
};

/* The memfd's first page.  magic, version and ring_bytes are written by
 * crescentd before the memfd is passed; neither side re-reads them after the
 * set-up (each keeps its own copy). */
struct cr_rpc_shm_header {
    uint32_t magic;
    uint32_t version;
    uint32_t ring_bytes; /* of each ring; a power of two */
    uint32_t reserved;
    struct cr_rpc_shm_ring_ctl requests; /* client → crescentd */
    struct cr_rpc_shm_ring_ctl replies;  /* crescentd → client */
};
_Static_assert(sizeof(struct cr_rpc_shm_header) <= CR_RPC_SHM_HEADER_BYTES,
               "the header fits its page");

/* The hello a client sends on the set-up socket, and crescentd's answer
 * (with the three fds when status is CR_OK; otherwise `text` says why). */
struct cr_rpc_shm_hello {
    uint32_t magic;
    uint32_t version;
};
struct cr_rpc_shm_welcome {
    uint32_t magic;
    int32_t status;
    uint32_t ring_bytes;
    char text[244];
};

/* The set-up socket's address for a name: "@NAME" is NAME in the abstract
 * namespace (no file; gone with the process), anything else a file path.
 * False when the name is empty or too long for sun_path. */
static inline bool cr_rpc_shm_sockaddr(const char *name, struct sockaddr_un *out,
                                       socklen_t *len) {
    size_t n = strlen(name);
    if (n == 0 || n > CR_RPC_SHM_PATH_MAX || (name[0] == '@' && n == 1)) return false;
    memset(out, 0, sizeof(*out));
    out->sun_family = AF_UNIX;
    memcpy(out->sun_path, name, n);
    if (name[0] == '@') out->sun_path[0] = '\0'; /* abstract: the '@' stands for the NUL */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '@' ? 0 : 1));
    return true;
}

/* Bytes of the memfd for rings of ring_bytes each. */
static inline size_t cr_rpc_shm_map_bytes(uint32_t ring_bytes) {
    return CR_RPC_SHM_HEADER_BYTES + 2 * (size_t)ring_bytes;
}

/* A client's read of the welcome (one recvmsg, `flags` as for recvmsg):
 * returns recvmsg's result; fds[] are the CR_RPC_SHM_FDS descriptors when
 * exactly that many came as SCM_RIGHTS, else all -1.  The caller checks the
 * length, magic and status. */
static inline ssize_t cr_rpc_shm_recv_welcome(int sock, int flags, struct cr_rpc_shm_welcome *w,
                                              int fds[CR_RPC_SHM_FDS]) {
    struct iovec iov = {.iov_base = w, .iov_len = sizeof(*w)};
    union {
        char buf[CMSG_SPACE(CR_RPC_SHM_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t n = recvmsg(sock, &msg, flags);
    for (uint32_t i = 0; i < CR_RPC_SHM_FDS; i++) fds[i] = -1;
    struct cmsghdr *cmsg = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
        cmsg->cmsg_len == CMSG_LEN(CR_RPC_SHM_FDS * sizeof(int)))
        memcpy(fds, CMSG_DATA(cmsg), CR_RPC_SHM_FDS * sizeof(int));
    return n;
}

/* One side's view of one ring: its own index and the ring's geometry are
 * private; `ctl` and `data` are in the shared mapping. */
struct cr_rpc_shm_ring {
    struct cr_rpc_shm_ring_ctl *ctl;
    uint8_t *data;
    uint64_t size; /* a power of two */
    uint64_t pos;  /* this side's index: head for the consumer, tail for the producer */
};

static inline void cr_rpc_shm_ring_init(struct cr_rpc_shm_ring *r, struct cr_rpc_shm_ring_ctl *ctl,
                                        uint8_t *data, uint32_t size) {
    r->ctl = ctl;
    r->data = data;
    r->size = size;
    r->pos = 0;
}

/* Consumer: bytes readable now, or -1 when the producer's tail is not
 * within one ring of the consumer's head (a corrupt or hostile peer). */
static inline int64_t cr_rpc_shm_ring_readable(const struct cr_rpc_shm_ring *r) {
    uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);
    uint64_t n = tail - r->pos;
    return n <= r->size ? (int64_t)n : -1;
}

/* Consumer: copies n bytes (at most what cr_rpc_shm_ring_readable said)
 * out of the ring into dst and frees their room. */
static inline void cr_rpc_shm_ring_take(struct cr_rpc_shm_ring *r, uint8_t *dst, size_t n) {
    uint64_t at = r->pos & (r->size - 1);
    size_t first = n < r->size - at ? n : (size_t)(r->size - at);
    memcpy(dst, r->data + at, first);
    memcpy(dst + first, r->data, n - first);
    r->pos += n;
    __atomic_store_n(&r->ctl->head, r->pos, __ATOMIC_RELEASE);
}

/* Producer: room free now, or -1 when the consumer's head is not within
 * one ring behind the producer's tail. */
static inline int64_t cr_rpc_shm_ring_room(const struct cr_rpc_shm_ring *r) {
    uint64_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
    uint64_t used = r->pos - head;
    return used <= r->size ? (int64_t)(r->size - used) : -1;
}

/* Producer: copies n bytes (at most the room) into the ring and publishes
 * them. */
static inline void cr_rpc_shm_ring_put(struct cr_rpc_shm_ring *r, const uint8_t *src, size_t n) {
    uint64_t at = r->pos & (r->size - 1);
    size_t first = n < r->size - at ? n : (size_t)(r->size - at);
    memcpy(r->data + at, src, first);
    memcpy(r->data, src + first, n - first);
    r->pos += n;
    __atomic_store_n(&r->ctl->tail, r->pos, __ATOMIC_RELEASE);
}

/* The store→load barrier of the sleep handshakes.  TSan models no fences:
 * there (as in the actor runtime's barriers) a seq_cst read-modify-write of
 * the flag word, which it does model, stands in for the fence. */
static inline void cr_rpc_shm_fence(uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
    __atomic_fetch_add(flag, 0, __ATOMIC_SEQ_CST);
#else
    (void)flag;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Consumer about to sleep: announces it, then looks again.  True when it
 * may sleep (nothing readable, and a producer that publishes from now on
 * will see the flag); false when bytes came (the flag is cleared). */
static inline bool cr_rpc_shm_ring_arm(struct cr_rpc_shm_ring *r) {
    __atomic_store_n(&r->ctl->sleeping, 1, __ATOMIC_SEQ_CST);
    cr_rpc_shm_fence(&r->ctl->sleeping);
    if (cr_rpc_shm_ring_readable(r) == 0) return true;
    __atomic_store_n(&r->ctl->sleeping, 0, __ATOMIC_RELAXED);
    return false;
}

static inline void cr_rpc_shm_ring_disarm(struct cr_rpc_shm_ring *r) {
    __atomic_store_n(&r->ctl->sleeping, 0, __ATOMIC_RELAXED);
}

/* Producer after publishing: whether the consumer sleeps and this producer
 * must write its eventfd (it won the flag back to 0, so one wake per sleep). */
static inline bool cr_rpc_shm_ring_needs_wake(struct cr_rpc_shm_ring *r) {
    cr_rpc_shm_fence(&r->ctl->sleeping);
    if (__atomic_load_n(&r->ctl->sleeping, __ATOMIC_RELAXED) == 0) return false;
    return __atomic_exchange_n(&r->ctl->sleeping, 0, __ATOMIC_RELAXED) != 0;
}

/* Producer finding the ring full: announces that it waits for room, then
 * looks again.  True when it may wait (still no room); false when room
 * appeared (the flag is cleared). */
static inline bool cr_rpc_shm_ring_arm_room(struct cr_rpc_shm_ring *r) {
    __atomic_store_n(&r->ctl->producer_waiting, 1, __ATOMIC_SEQ_CST);
    cr_rpc_shm_fence(&r->ctl->producer_waiting);
    if (cr_rpc_shm_ring_room(r) == 0) return true;
    __atomic_store_n(&r->ctl->producer_waiting, 0, __ATOMIC_RELAXED);
    return false;
}

/* Consumer after freeing room: whether the producer waits for it and this
 * consumer must write the producer's eventfd. */
static inline bool cr_rpc_shm_ring_room_needs_wake(struct cr_rpc_shm_ring *r) {
    cr_rpc_shm_fence(&r->ctl->producer_waiting);
    if (__atomic_load_n(&r->ctl->producer_waiting, __ATOMIC_RELAXED) == 0) return false;
    return __atomic_exchange_n(&r->ctl->producer_waiting, 0, __ATOMIC_RELAXED) != 0;
}

#endif
