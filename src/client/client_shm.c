/* libcrescent's same-host transport: shm://NAME endpoints (NAME "@abstract"
 * or a socket path: crescentd's --rpc-shm-path), the rings of
 * msgs/rpc_shm.h.  The set-up is made on the first send, as crescent://
 * connects then (a client may be opened before crescentd runs), and again
 * on the next send after crescentd went away; requests in flight on a
 * broken set-up complete as timeouts.
 *
 * A call writes its frame into the request ring (a syscall only to wake a
 * crescentd that sleeps) and reads its reply from the reply ring: the
 * caller spins on the ring for up to SHM_SPIN_NS, the time crescentd takes
 * for a call that is not queued behind others, then sleeps on its eventfd
 * (poll, with the set-up socket so a crescentd that exits is noticed).
 * Spinning only on a free core: at most one CPU fewer than the machine has
 * spin at once in this process (a core is left for crescentd), the others
 * sleep at once; eight spinning callers on two cores took the CPU that
 * crescentd needed to answer them (bench/RESULTS.md).  And spinning only
 * while it pays: when this process's recent waits for a reply were much
 * longer than the spin (crescentd has a queue: 64 callers of 32-key batches
 * waited 1.5 ms), a spin would end empty-handed, having burnt the core
 * that the callers decoding their replies needed, so callers sleep at once;
 * the waits are measured either way, so spinning resumes when they shorten. */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "msgs/rpc_shm.h"
#include "msgs/rpc_stream.h"

#define SHM_SPIN_NS 50000u
/* Spin only while the average wait is under this many spins' length; a
 * wait counts at most SHM_WAIT_SAMPLE_MAX_NS, so one caller descheduled for
 * milliseconds does not stop the spinning of a process whose waits are
 * short. */
#define SHM_SPIN_WAIT_MAX_NS (4u * SHM_SPIN_NS)
#define SHM_WAIT_SAMPLE_MAX_NS 1000000u

static _Atomic unsigned spinners; /* callers of this process spinning now */
/* Moving average (weight 1/8) of this process's waits for a reply, in ns;
 * updated without a lock: a sample lost to a race does not matter. */
static _Atomic uint64_t wait_avg_ns;

static void note_wait(uint64_t ns) {
    if (ns > SHM_WAIT_SAMPLE_MAX_NS) ns = SHM_WAIT_SAMPLE_MAX_NS;
    uint64_t avg = atomic_load_explicit(&wait_avg_ns, memory_order_relaxed);
    atomic_store_explicit(&wait_avg_ns, avg - avg / 8 + ns / 8, memory_order_relaxed);
}

/* Takes a spinner's place if spinning pays and a core is free for one (see
 * the top). */
static bool spin_begin(void) {
    static unsigned limit;
    if (limit == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        limit = cpus > 2 ? (unsigned)cpus - 1 : 1;
    }
    if (atomic_load_explicit(&wait_avg_ns, memory_order_relaxed) > SHM_SPIN_WAIT_MAX_NS)
        return false;
    if (atomic_fetch_add(&spinners, 1) < limit) return true;
    atomic_fetch_sub(&spinners, 1);
    return false;
}

struct cr_client_shm {
    char name[CR_RPC_SHM_PATH_MAX + 1];
    int sock; /* -1: not set up */
    int to_server, to_client;
    void *map;
    size_t map_bytes;
    struct cr_rpc_shm_ring req, rep;
};

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cr_client_shm_open(cr_client *c, const char *endpoint, char *error, size_t error_size) {
    assert(strncmp(endpoint, CR_RPC_SHM_SCHEME, strlen(CR_RPC_SHM_SCHEME)) == 0);
    const char *name = endpoint + strlen(CR_RPC_SHM_SCHEME);
    struct sockaddr_un addr;
    socklen_t len;
    if (!cr_rpc_shm_sockaddr(name, &addr, &len)) {
        snprintf(error, error_size, "'%s' is not shm://@NAME or shm:///SOCKET/PATH (at most %u "
                 "bytes after shm://)", endpoint, CR_RPC_SHM_PATH_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_client_shm *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(error, error_size, "out of memory");
        return CR_ERR_NOMEM;
    }
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->sock = s->to_server = s->to_client = -1;
    c->shm = s;
    return CR_OK;
}

static void drop(cr_client *c) {
    struct cr_client_shm *s = c->shm;
    int *fds[] = {&s->sock, &s->to_server, &s->to_client};
    for (size_t i = 0; i < 3; i++) {
        if (*fds[i] >= 0) close(*fds[i]);
        *fds[i] = -1;
    }
    if (s->map != NULL) munmap(s->map, s->map_bytes);
    s->map = NULL;
    c->rx_len = c->rx_taken = 0; /* a half frame of the old rings means nothing */
}

void cr_client_shm_close(cr_client *c) {
    if (c->shm == NULL) return;
    drop(c);
    free(c->shm);
    c->shm = NULL;
}

static void wake(int fd) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is already non-zero, the wake is pending */
}

/* Waits until `deadline` (client clock) for the eventfd crescentd wakes us
 * with, or the socket (crescentd gone).  CR_OK, CR_ERR_TIMEOUT, or a
 * recorded CR_ERR_IO when crescentd closed the set-up socket. */
static int sleep_until(cr_client *c, int64_t deadline, const char *what) {
    struct cr_client_shm *s = c->shm;
    int64_t left = deadline - c->clock_ms(c->clock_ctx);
    if (left < 0) left = 0;
    struct pollfd p[2] = {{.fd = s->to_client, .events = POLLIN},
                          {.fd = s->sock, .events = POLLIN}};
    int n = poll(p, 2, (int)left);
    if (n < 0 && errno != EINTR) return cr_client_fail(c, CR_ERR_IO, "poll: %s", strerror(errno));
    if (p[0].revents & POLLIN) {
        uint64_t count;
        ssize_t r = read(s->to_client, &count, sizeof(count));
        (void)r;
    }
    if (p[1].revents != 0) return CR_ERR_IO; /* the caller looks at the ring once more */
    if (n == 0 && left == 0)
        return cr_client_fail(c, CR_ERR_TIMEOUT, "%s shm://%s took over %d ms", what, s->name,
                              c->timeout_ms);
    return CR_OK;
}

/* Receives the welcome and its fds; maps the rings.  CR_OK or recorded. */
static int take_welcome(cr_client *c) {
    struct cr_client_shm *s = c->shm;
    struct cr_rpc_shm_welcome w;
    int fds[CR_RPC_SHM_FDS];
    ssize_t n = cr_rpc_shm_recv_welcome(s->sock, MSG_CMSG_CLOEXEC | MSG_DONTWAIT, &w, fds);
    int rc = CR_OK;
    struct stat st;
    uint32_t rb = w.ring_bytes;
    if (n != (ssize_t)sizeof(w) || w.magic != CR_RPC_SHM_MAGIC) {
        rc = cr_client_fail(c, CR_ERR_PROTOCOL, "shm://%s: %s", s->name,
                            n < 0 ? strerror(errno) : "not a crescentd shm endpoint");
    } else if (w.status != CR_OK) {
        w.text[sizeof(w.text) - 1] = '\0';
        rc = cr_client_fail(c, w.status, "shm://%s refused: %s", s->name, w.text);
    } else if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || rb < CR_RPC_SHM_RING_MIN ||
               rb > CR_RPC_SHM_RING_MAX || (rb & (rb - 1)) != 0 || fstat(fds[0], &st) != 0 ||
               (size_t)st.st_size < cr_rpc_shm_map_bytes(rb)) {
        rc = cr_client_fail(c, CR_ERR_PROTOCOL, "shm://%s: malformed welcome", s->name);
    } else {
        s->map_bytes = cr_rpc_shm_map_bytes(rb);
        s->map = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        if (s->map == MAP_FAILED) {
            s->map = NULL;
            rc = cr_client_fail(c, CR_ERR_NOMEM, "shm://%s: mmap of %zu bytes: %s", s->name,
                                s->map_bytes, strerror(errno));
        }
    }
    if (fds[0] >= 0) close(fds[0]);
    if (rc != CR_OK) {
        if (fds[1] >= 0) close(fds[1]);
        if (fds[2] >= 0) close(fds[2]);
        return rc;
    }
    s->to_server = fds[1];
    s->to_client = fds[2];
    struct cr_rpc_shm_header *h = s->map;
    uint8_t *rings = (uint8_t *)s->map + CR_RPC_SHM_HEADER_BYTES;
    cr_rpc_shm_ring_init(&s->req, &h->requests, rings, rb);
    cr_rpc_shm_ring_init(&s->rep, &h->replies, rings + rb, rb);
    return CR_OK;
}

/* Connects to the set-up socket, says hello and maps the rings. */
static int set_up(cr_client *c, int64_t deadline) {
    struct cr_client_shm *s = c->shm;
    struct sockaddr_un addr;
    socklen_t len;
    bool ok = cr_rpc_shm_sockaddr(s->name, &addr, &len);
    assert(ok);
    (void)ok;
    s->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct cr_rpc_shm_hello hello = {.magic = CR_RPC_SHM_MAGIC, .version = CR_RPC_SHM_VERSION};
    int rc = CR_OK;
    /* A hello that finds the socket closed (EPIPE) still has crescentd's
     * refusal to read, sent before it closed. */
    if (s->sock < 0 || connect(s->sock, (struct sockaddr *)&addr, len) != 0 ||
        (send(s->sock, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello) &&
         errno != EPIPE)) {
        rc = cr_client_fail(c, CR_ERR_IO, "cannot connect to shm://%s: %s (is crescentd running "
                            "on this host with --rpc-shm-path %s?)", s->name, strerror(errno),
                            s->name);
    } else {
        for (;;) {
            int64_t left = deadline - c->clock_ms(c->clock_ctx);
            struct pollfd p = {.fd = s->sock, .events = POLLIN};
            int n = poll(&p, 1, left > 0 ? (int)left : 0);
            if (n > 0) {
                rc = take_welcome(c);
                break;
            }
            if (n < 0 && errno == EINTR) continue;
            rc = n < 0 ? cr_client_fail(c, CR_ERR_IO, "poll: %s", strerror(errno))
                       : cr_client_fail(c, CR_ERR_TIMEOUT, "shm://%s did not answer within %d "
                                        "ms", s->name, c->timeout_ms);
            break;
        }
    }
    if (rc != CR_OK) drop(c);
    return rc;
}

int cr_client_shm_send(cr_client *c, const uint8_t *frame, size_t len, int64_t deadline) {
    struct cr_client_shm *s = c->shm;
    assert(s != NULL && len >= CR_RPC_STREAM_LEN_BYTES);
    int rc = s->sock >= 0 ? CR_OK : set_up(c, deadline);
    if (rc != CR_OK) return rc;
    size_t done = 0;
    while (done < len) {
        int64_t room = cr_rpc_shm_ring_room(&s->req);
        if (room < 0) {
            drop(c);
            return cr_client_fail(c, CR_ERR_PROTOCOL, "shm://%s: the request ring is corrupt",
                                  s->name);
        }
        size_t n = (size_t)room < len - done ? (size_t)room : len - done;
        if (n > 0) {
            cr_rpc_shm_ring_put(&s->req, frame + done, n);
            done += n;
            if (cr_rpc_shm_ring_needs_wake(&s->req)) wake(s->to_server);
            continue;
        }
        /* A frame larger than the room: crescentd takes it in pieces. */
        if (!cr_rpc_shm_ring_arm_room(&s->req)) continue;
        rc = sleep_until(c, deadline, "sending to");
        if (rc != CR_OK) {
            drop(c); /* a half-written frame ends these rings */
            return rc == CR_ERR_IO ? cr_client_fail(c, CR_ERR_IO, "shm://%s closed", s->name)
                                   : rc;
        }
    }
    return CR_OK;
}

/* Copies what the reply ring holds into rx.  Returns the bytes copied, or
 * -1 (recorded) when the ring is corrupt. */
static int64_t pull(cr_client *c, size_t frame_total) {
    struct cr_client_shm *s = c->shm;
    int64_t readable = cr_rpc_shm_ring_readable(&s->rep);
    if (readable <= 0) {
        if (readable < 0)
            cr_client_fail(c, CR_ERR_PROTOCOL, "shm://%s: the reply ring is corrupt", s->name);
        return readable;
    }
    if (cr_client_rx_reserve(c, frame_total) != CR_OK) return -1;
    size_t n = (size_t)readable;
    if (n > c->rx_cap - c->rx_len) n = c->rx_cap - c->rx_len;
    cr_rpc_shm_ring_take(&s->rep, c->rx + c->rx_len, n);
    c->rx_len += n;
    if (cr_rpc_shm_ring_room_needs_wake(&s->rep)) wake(s->to_server);
    return (int64_t)n;
}

int cr_client_shm_recv(cr_client *c, int64_t timeout_ms, const uint8_t **payload, size_t *len) {
    struct cr_client_shm *s = c->shm;
    cr_client_rx_release(c);
    int64_t deadline = c->clock_ms(c->clock_ctx) + (timeout_ms > 0 ? timeout_ms : 0);
    bool may_spin = true; /* once per wait: after a wake, sleep again at once */
    uint64_t waited_from = 0; /* when this call first found nothing to read */
    for (;;) {
        size_t n = 0;
        enum cr_rpc_stream_verdict v = cr_rpc_stream_next(
            c->rx, c->rx_len, CR_RPC_REPLY_HEADER_BYTES, CR_RPC_STREAM_REPLY_MAX, &n);
        if (v == CR_RPC_STREAM_FRAME) {
            *payload = c->rx + CR_RPC_STREAM_LEN_BYTES;
            *len = n;
            c->rx_taken = CR_RPC_STREAM_LEN_BYTES + n;
            note_wait(waited_from != 0 ? mono_ns() - waited_from : 0);
            return CR_OK;
        }
        if (v == CR_RPC_STREAM_BAD) {
            drop(c);
            return cr_client_fail(c, CR_ERR_PROTOCOL, "shm://%s sent a frame of length %zu, "
                                  "outside %u..%u", s->name, n, CR_RPC_REPLY_HEADER_BYTES,
                                  CR_RPC_STREAM_REPLY_MAX);
        }
        if (s->sock < 0) return CR_ERR_TIMEOUT; /* nothing can come: the request times out */
        int64_t got = pull(c, CR_RPC_STREAM_LEN_BYTES + n);
        if (got < 0) {
            drop(c);
            return c->error[0] != '\0' ? CR_ERR_PROTOCOL : CR_ERR_NOMEM;
        }
        if (got > 0) {
            may_spin = true;
            continue;
        }
        if (timeout_ms <= 0) return CR_ERR_TIMEOUT;
        if (waited_from == 0) waited_from = mono_ns();
        /* Spin first, on a free core: a reply usually comes sooner than a
         * sleep and a wake. */
        if (may_spin) {
            may_spin = false;
            if (spin_begin()) {
                uint64_t end = mono_ns() + SHM_SPIN_NS;
                while (cr_rpc_shm_ring_readable(&s->rep) == 0 && mono_ns() < end)
                    for (int i = 0; i < 16; i++) __builtin_ia32_pause();
                atomic_fetch_sub(&spinners, 1);
                continue;
            }
        }
        if (!cr_rpc_shm_ring_arm(&s->rep)) continue;
        int rc = sleep_until(c, deadline, "waiting for a reply from");
        cr_rpc_shm_ring_disarm(&s->rep);
        if (rc == CR_ERR_IO && cr_rpc_shm_ring_readable(&s->rep) == 0) {
            drop(c);
            return cr_client_fail(c, CR_ERR_IO, "shm://%s closed (crescentd stopped?)",
                                  s->name);
        }
        if (rc != CR_OK && rc != CR_ERR_IO) return rc;
        if (c->clock_ms(c->clock_ctx) >= deadline && cr_rpc_shm_ring_readable(&s->rep) == 0)
            return CR_ERR_TIMEOUT;
    }
}
