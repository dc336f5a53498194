/* The transfer client: ops, peers and the public calls.
 *
 * An op is validated and copied into a preallocated slot at submit (its iov
 * array too, so the caller's array may be temporary); its bytes move during
 * cr_xfer_client_poll.  A peer (one server endpoint) is set up on first use:
 * the transport is chosen and logged once, with the reason.  Over tcp, an op
 * goes to the peer's least loaded connection, or, at stripe_min_bytes and
 * more, is cut into one stripe per connection so several streams move it in
 * parallel; it completes when every stripe has.  A peer reached by verbs
 * takes the ops whose memory is registered (xfer_client_verbs.c); shm peers
 * take every op of a segment they could map.
 *
 * Nothing here allocates after create: op slots, peer connections (made on
 * first use, then reused) and the dirty list are sized from the config. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_client_internal.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_verbs.h"

#define DEFAULT_CONNECTIONS 4u
#define DEFAULT_MAX_OPS 1024u
#define DEFAULT_STRIPE_MIN_BYTES (UINT64_C(4) << 20) /* as verbs: below, one stream keeps up */
#define DEFAULT_CONNECT_TIMEOUT_MS 5000u
#define DEFAULT_OP_TIMEOUT_MS 30000u
#define STRIPE_ALIGN_BYTES 4096u
#define WAIT_SLICE_MS 100 /* longest epoll wait, so op timeouts are checked */
#define EVENTS_PER_WAIT 64

/* ---- lifecycle ---------------------------------------------------------- */

static void fill_defaults(struct cr_xfer_client_config *cfg) {
    if (cfg->connections_per_peer == 0) cfg->connections_per_peer = DEFAULT_CONNECTIONS;
    if (cfg->connections_per_peer > CR_XFER_CONNECTIONS_MAX)
        cfg->connections_per_peer = CR_XFER_CONNECTIONS_MAX;
    if (cfg->max_ops == 0) cfg->max_ops = DEFAULT_MAX_OPS;
    if (cfg->stripe_min_bytes == 0) cfg->stripe_min_bytes = DEFAULT_STRIPE_MIN_BYTES;
    if (cfg->connect_timeout_ms == 0) cfg->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    if (cfg->op_timeout_ms == 0) cfg->op_timeout_ms = DEFAULT_OP_TIMEOUT_MS;
}

int cr_xfer_client_create(const struct cr_xfer_client_config *cfg,
                          struct cr_xfer_client **out) {
    assert(out != NULL);
    *out = NULL;
    struct cr_xfer_client *cli = calloc(1, sizeof(*cli));
    if (cli == NULL) return CR_ERR_NOMEM;
    if (cfg != NULL) cli->cfg = *cfg;
    fill_defaults(&cli->cfg);
    cli->ops = calloc(cli->cfg.max_ops, sizeof(*cli->ops));
    cli->dirty = calloc((size_t)CR_XFER_PEERS_MAX * cli->cfg.connections_per_peer,
                        sizeof(*cli->dirty));
    cli->shm_ready = calloc(cli->cfg.max_ops, sizeof(*cli->shm_ready));
    cli->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (cli->ops == NULL || cli->dirty == NULL || cli->shm_ready == NULL || cli->epoll_fd < 0) {
        int rc = cli->epoll_fd < 0 ? CR_ERR_IO : CR_ERR_NOMEM;
        if (cli->epoll_fd >= 0) close(cli->epoll_fd);
        free(cli->shm_ready);
        free(cli->ops);
        free(cli->dirty);
        free(cli);
        return rc;
    }
    for (uint32_t i = 0; i < cli->cfg.max_ops; i++) cli->ops[i].next_free = i + 1;
    /* Once per client: the verbs transport needs a device on both sides. */
    cr_xfer_verbs_client_open(cli);
    cli->free_op = 0;
    *out = cli;
    return CR_OK;
}

void cr_xfer_client_destroy(struct cr_xfer_client *cli) {
    if (cli == NULL) return;
    while (cli->shm_count > 0) {
        uint32_t index = cli->shm_ready[cli->shm_head];
        cli->shm_head = (cli->shm_head + 1) % cli->cfg.max_ops;
        cli->shm_count--;
        cr_xfer_part_done(cli, index, CR_ERR_SHUTDOWN, "client shutting down");
    }
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX; i++) {
        struct xfer_peer *peer = &cli->peers[i];
        if (!peer->used) continue;
        cr_xfer_verbs_peer_close(cli, peer);
        for (uint32_t k = 0; k < cli->cfg.connections_per_peer; k++)
            cr_xfer_tcp_fail(&peer->conns[k], CR_ERR_SHUTDOWN, "client shutting down");
        free(peer->conns);
        cr_xfer_shm_disconnect(peer);
    }
    assert(cli->in_flight == 0);
    cr_xfer_verbs_client_close(cli); /* after every QP set on the device */
    close(cli->epoll_fd);
    free(cli->shm_ready);
    free(cli->dirty);
    free(cli->ops);
    free(cli);
}

int cr_xfer_client_fd(const struct cr_xfer_client *cli) {
    assert(cli != NULL);
    return cli->epoll_fd;
}

uint32_t cr_xfer_client_in_flight(const struct cr_xfer_client *cli) {
    assert(cli != NULL);
    return cli->in_flight;
}

const char *cr_xfer_client_last_error(const struct cr_xfer_client *cli) {
    assert(cli != NULL);
    return cli->last_error;
}

int cr_xfer_client_register(struct cr_xfer_client *cli, void *addr, size_t len) {
    assert(cli != NULL);
    if (addr == NULL || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr) {
        snprintf(cli->last_error, sizeof(cli->last_error), "buffer %p+%zu: empty or wraps", addr,
                 len);
        return CR_ERR_INVALID_PARAMS;
    }
    struct xfer_buffer *b = NULL;
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX && b == NULL; i++)
        if (!cli->buffers[i].used) b = &cli->buffers[i];
    if (b == NULL) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "%u buffers registered already (unregister one first)", CR_XFER_BUFFERS_MAX);
        return CR_ERR_NOMEM;
    }
    *b = (struct xfer_buffer){.addr = addr, .len = len};
    int rc = cr_xfer_verbs_buffer_register(cli, b);
    if (rc != CR_OK) {
        memset(b, 0, sizeof(*b));
        return rc;
    }
    b->used = true;
    return CR_OK;
}

/* Ops in flight with local memory in [addr, addr + len). */
static uint32_t ops_using(const struct cr_xfer_client *cli, const uint8_t *addr, uint64_t len) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < cli->cfg.max_ops; i++) {
        const struct xfer_op_slot *slot = &cli->ops[i];
        if (!slot->used) continue;
        for (uint32_t k = 0; k < slot->iov_count; k++) {
            const uint8_t *base = slot->iov[k].iov_base;
            size_t n_bytes = slot->iov[k].iov_len;
            if (n_bytes > 0 && base < addr + len && addr < base + n_bytes) {
                n++;
                break;
            }
        }
    }
    return n;
}

int cr_xfer_client_unregister(struct cr_xfer_client *cli, void *addr) {
    assert(cli != NULL);
    struct xfer_buffer *b = NULL;
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX && b == NULL; i++)
        if (cli->buffers[i].used && cli->buffers[i].addr == addr) b = &cli->buffers[i];
    if (b == NULL) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "buffer %p is not registered (unregister takes the address it was registered "
                 "with)", addr);
        return CR_ERR_INVALID_PARAMS;
    }
    uint32_t busy = ops_using(cli, b->addr, b->len);
    if (busy > 0) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "buffer %p+%llu: %u transfer(s) in flight use it; poll until they complete, "
                 "then unregister", addr, (unsigned long long)b->len, busy);
        return CR_ERR_AGAIN;
    }
    cr_xfer_verbs_buffer_release(b);
    memset(b, 0, sizeof(*b));
    return CR_OK;
}

/* ---- peers -------------------------------------------------------------- */

static struct xfer_peer *find_peer(struct cr_xfer_client *cli, const char *endpoint) {
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX; i++)
        if (cli->peers[i].used && strcmp(cli->peers[i].endpoint, endpoint) == 0)
            return &cli->peers[i];
    return NULL;
}

const char *cr_xfer_client_transport(const struct cr_xfer_client *cli, const char *endpoint) {
    struct xfer_peer *peer = find_peer((struct cr_xfer_client *)cli, endpoint);
    if (peer == NULL) return NULL;
    if (peer->shm_fd >= 0) return "shm";
    return peer->verbs != NULL && !peer->verbs->failed ? "verbs" : "tcp";
}

static struct xfer_peer *add_peer(struct cr_xfer_client *cli, const char *endpoint) {
    struct xfer_peer *peer = NULL;
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX && peer == NULL; i++)
        if (!cli->peers[i].used) peer = &cli->peers[i];
    if (peer == NULL) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "%s: no room for another peer (%u peers per client)", endpoint,
                 CR_XFER_PEERS_MAX);
        return NULL;
    }
    memset(peer, 0, sizeof(*peer));
    if (cr_xfer_endpoint_parse(endpoint, &peer->addr, &peer->addr_len) != CR_OK) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "'%.64s': endpoint is not host:port", endpoint);
        return NULL;
    }
    peer->conns = calloc(cli->cfg.connections_per_peer, sizeof(*peer->conns));
    if (peer->conns == NULL) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: out of memory", endpoint);
        return NULL;
    }
    for (uint32_t k = 0; k < cli->cfg.connections_per_peer; k++) {
        peer->conns[k].cli = cli;
        peer->conns[k].peer = peer;
        peer->conns[k].fd = -1;
    }
    snprintf(peer->endpoint, sizeof(peer->endpoint), "%s", endpoint);
    peer->shm_fd = -1;
    peer->used = true;
    char shm_error[128] = "", verbs_error[192] = "";
    struct cr_xfer_transport_facts facts = {
        .shm_disabled = cli->cfg.shm_disabled, .local_devices = cli->verbs_devices,
        .verbs_error = cli->verbs_error};
    if (!cli->cfg.shm_disabled)
        facts.shm_reachable = cr_xfer_shm_connect(cli, peer, shm_error, sizeof(shm_error));
    facts.shm_error = shm_error;
    /* Not same-host and a device here: ask the peer for verbs (HELLO). */
    if (!facts.shm_reachable && cli->verbs_devices > 0) {
        facts.peer_offers_verbs =
            cr_xfer_verbs_peer_connect(cli, peer, verbs_error, sizeof(verbs_error));
        facts.peer_verbs_error = verbs_error;
    }
    char why[320];
    enum cr_xfer_transport transport = cr_xfer_choose_transport(&facts, why, sizeof(why));
    CR_INFO("xfer", "peer %s: transport %s (%s)", endpoint, cr_xfer_transport_name(transport), why);
    return peer;
}

struct xfer_peer *cr_xfer_client_peer(struct cr_xfer_client *cli, const char *endpoint) {
    struct xfer_peer *peer = find_peer(cli, endpoint);
    return peer != NULL ? peer : add_peer(cli, endpoint);
}

/* Queues a same-host op: its copy runs at the next poll. */
static void submit_shm(struct cr_xfer_client *cli, struct xfer_peer *peer,
                       const struct cr_xfer_op *op, uint64_t length, struct xfer_shm_map *map) {
    uint32_t index = cr_xfer_op_take(cli, op, length, peer);
    struct xfer_op_slot *slot = &cli->ops[index];
    slot->parts_left = 1;
    slot->map = map;
    assert(cli->shm_count < cli->cfg.max_ops);
    cli->shm_ready[(cli->shm_head + cli->shm_count++) % cli->cfg.max_ops] = index;
}

/* ---- ops ---------------------------------------------------------------- */

static int invalid(struct cr_xfer_client *cli, const char *what) {
    snprintf(cli->last_error, sizeof(cli->last_error), "invalid transfer op: %s", what);
    return CR_ERR_INVALID_PARAMS;
}

static int validate_op(struct cr_xfer_client *cli, const struct cr_xfer_op *op,
                       uint64_t *length) {
    if (op->opcode != CR_XFER_READ && op->opcode != CR_XFER_WRITE) return invalid(cli, "opcode");
    if (op->endpoint == NULL || strlen(op->endpoint) > CR_XFER_ENDPOINT_MAX)
        return invalid(cli, "endpoint missing or longer than 63 bytes");
    if (op->segment == NULL || !cr_xfer_name_valid(op->segment, strlen(op->segment)))
        return invalid(cli, "segment name (1..255 printable bytes, no '/')");
    if (op->done == NULL) return invalid(cli, "no completion callback");
    if (op->iov_count > CR_XFER_OP_IOV_MAX || (op->iov_count > 0 && op->iov == NULL))
        return invalid(cli, "more than 16 iovecs");
    uint64_t total = 0;
    for (uint32_t i = 0; i < op->iov_count; i++) {
        if (op->iov[i].iov_base == NULL && op->iov[i].iov_len > 0) return invalid(cli, "NULL iov");
        total += op->iov[i].iov_len;
    }
    if (op->remote_addr + total < op->remote_addr) return invalid(cli, "remote range wraps");
    *length = total;
    return CR_OK;
}

uint32_t cr_xfer_op_take(struct cr_xfer_client *cli, const struct cr_xfer_op *op, uint64_t length,
                         struct xfer_peer *peer) {
    uint32_t index = cli->free_op;
    struct xfer_op_slot *slot = &cli->ops[index];
    assert(!slot->used);
    cli->free_op = slot->next_free;
    slot->used = true;
    slot->verbs = false;
    slot->opcode = (uint8_t)op->opcode;
    slot->segment_len = (uint8_t)strlen(op->segment);
    memcpy(slot->segment, op->segment, slot->segment_len + 1u);
    slot->iov_count = op->iov_count;
    if (op->iov_count > 0) memcpy(slot->iov, op->iov, op->iov_count * sizeof(*op->iov));
    slot->length = length;
    slot->status = CR_OK;
    slot->message[0] = '\0';
    slot->done = op->done;
    slot->arg = op->arg;
    slot->peer = peer;
    slot->remote_addr = op->remote_addr;
    slot->has_cap = op->cap != NULL;
    if (op->cap != NULL) slot->cap = *op->cap;
    slot->map = NULL;
    cli->in_flight++;
    return index;
}

void cr_xfer_part_done(struct cr_xfer_client *cli, uint32_t index, int status,
                       const char *message) {
    struct xfer_op_slot *slot = &cli->ops[index];
    assert(slot->used && slot->parts_left > 0);
    if (status != CR_OK && slot->status == CR_OK) {
        slot->status = status;
        snprintf(slot->message, sizeof(slot->message), "%s", message);
    }
    if (--slot->parts_left > 0) return;
    if (slot->status != CR_OK)
        snprintf(cli->last_error, sizeof(cli->last_error), "%s", slot->message);
    cr_xfer_done_fn done = slot->done;
    void *arg = slot->arg;
    int final = slot->status;
    char text[CR_XFER_MESSAGE_MAX];
    memcpy(text, slot->message, sizeof(text));
    /* Free the slot before the callback, so the callback may submit again. */
    slot->used = false;
    slot->next_free = cli->free_op;
    cli->free_op = index;
    cli->in_flight--;
    cli->completed++;
    done(arg, final, text);
}

/* The connection with the fewest bytes queued, the first among equals: one
 * op at a time always takes the same (warm) connection, and ops in flight
 * together still spread, since a busy connection has bytes queued. */
static struct xfer_tcp_conn *least_loaded(struct cr_xfer_client *cli, struct xfer_peer *peer) {
    uint32_t n = cli->cfg.connections_per_peer;
    struct xfer_tcp_conn *best = &peer->conns[0];
    for (uint32_t k = 1; k < n && best->bytes_queued > 0; k++)
        if (peer->conns[k].bytes_queued < best->bytes_queued) best = &peer->conns[k];
    return best;
}

/* Queues an op on the peer's tcp connections, connecting those it needs. */
static int submit_tcp(struct cr_xfer_client *cli, struct xfer_peer *peer,
                      const struct cr_xfer_op *op, uint64_t length) {
    uint32_t stripes = 1;
    struct xfer_tcp_conn *single = NULL;
    if (length >= cli->cfg.stripe_min_bytes) stripes = cli->cfg.connections_per_peer;
    else single = least_loaded(cli, peer);
    for (uint32_t k = 0; k < stripes; k++) {
        struct xfer_tcp_conn *c = single != NULL ? single : &peer->conns[k];
        if (c->fd < 0 && cr_xfer_tcp_connect(c) != CR_OK) return CR_ERR_IO;
        if (!cr_xfer_tcp_has_room(c, 1)) return CR_ERR_AGAIN;
    }
    uint32_t index = cr_xfer_op_take(cli, op, length, peer);
    cli->ops[index].parts_left = stripes;
    uint64_t stripe = (length / stripes + STRIPE_ALIGN_BYTES - 1) / STRIPE_ALIGN_BYTES *
                      STRIPE_ALIGN_BYTES;
    uint64_t offset = 0;
    for (uint32_t k = 0; k < stripes; k++) {
        uint64_t len = k + 1 == stripes ? length - offset : stripe;
        if (len > length - offset) len = length - offset;
        struct xfer_part part = {.op = index, .remote_addr = op->remote_addr + offset,
                                 .length = len, .local_offset = offset};
        cr_xfer_tcp_enqueue(single != NULL ? single : &peer->conns[k], &part);
        offset += len;
    }
    assert(offset == length);
    return CR_OK;
}

int cr_xfer_submit(struct cr_xfer_client *cli, const struct cr_xfer_op *op) {
    assert(cli != NULL && op != NULL);
    uint64_t length = 0;
    int rc = validate_op(cli, op, &length);
    if (rc != CR_OK) return rc;
    if (cli->free_op >= cli->cfg.max_ops) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "%u transfer ops in flight (max_ops): poll and retry", cli->cfg.max_ops);
        return CR_ERR_AGAIN;
    }
    struct xfer_peer *peer = cr_xfer_client_peer(cli, op->endpoint);
    if (peer == NULL) return CR_ERR_INVALID_PARAMS;
    if (peer->shm_fd >= 0) {
        struct xfer_shm_map *map = cr_xfer_shm_find_map(cli, peer, op->segment, op->cap);
        if (map != NULL && map->local != NULL) {
            submit_shm(cli, peer, op, length, map);
            return CR_OK;
        }
    }
    if (peer->verbs_offered && length > 0) {
        rc = cr_xfer_verbs_submit(cli, peer, op, length);
        if (rc != CR_XFER_VERBS_USE_TCP) return rc;
    }
    return submit_tcp(cli, peer, op, length);
}

/* ---- polling ------------------------------------------------------------ */

static void flush_dirty(struct cr_xfer_client *cli) {
    /* A flush can fail a connection, whose callbacks can queue more: loop. */
    while (cli->dirty_count > 0) {
        struct xfer_tcp_conn *c = cli->dirty[--cli->dirty_count];
        c->dirty = false;
        cr_xfer_tcp_flush(c);
    }
}

static void check_timeouts(struct cr_xfer_client *cli) {
    uint64_t now = cr_xfer_now_ns();
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX; i++) {
        struct xfer_peer *peer = &cli->peers[i];
        if (!peer->used) continue;
        for (uint32_t k = 0; k < cli->cfg.connections_per_peer; k++)
            cr_xfer_tcp_check_timeout(&peer->conns[k], now);
    }
}

int cr_xfer_client_poll(struct cr_xfer_client *cli, int timeout_ms) {
    assert(cli != NULL);
    cli->completed = 0;
    uint64_t start = cr_xfer_now_ns();
    /* A blocking poll blocks from its first epoll_wait, which returns at once
     * when a response is already in: a zero-timeout look first cost one more
     * syscall per op (a whole 4 KiB Get is a few syscalls). */
    int wait_ms = timeout_ms == 0 ? 0
                  : timeout_ms < 0 || timeout_ms > WAIT_SLICE_MS ? WAIT_SLICE_MS : timeout_ms;
    for (;;) {
        cr_xfer_shm_run(cli);
        cr_xfer_verbs_run(cli);
        /* Done, nothing to wait for, or shm ops queued by callbacks: just look. */
        if (cli->completed > 0 || cli->in_flight == 0 || cli->shm_count > 0) wait_ms = 0;
        flush_dirty(cli);
        struct epoll_event events[EVENTS_PER_WAIT];
        /* Only tcp needs the kernel: with shm peers alone a poll makes no
         * syscall.  verbs completions are busy-polled: no sleeping then. */
        if (cli->verbs_outstanding > 0) wait_ms = 0;
        int n = cli->tcp_open == 0 ? 0
                                   : epoll_wait(cli->epoll_fd, events, EVENTS_PER_WAIT, wait_ms);
        for (int i = 0; i < n; i++) cr_xfer_tcp_event(events[i].data.ptr, events[i].events);
        flush_dirty(cli);
        if (cli->completed > 0 || timeout_ms == 0 || cli->in_flight == 0) break;
        check_timeouts(cli);
        uint64_t waited_ms = (cr_xfer_now_ns() - start) / 1000000u;
        if (timeout_ms > 0 && waited_ms >= (uint64_t)timeout_ms) break;
        wait_ms = WAIT_SLICE_MS;
        if (timeout_ms > 0 && (uint64_t)timeout_ms - waited_ms < (uint64_t)wait_ms)
            wait_ms = (int)((uint64_t)timeout_ms - waited_ms);
    }
    return (int)cli->completed;
}

/* ---- blocking conveniences ---------------------------------------------- */

struct wait_one {
    bool done;
    int status;
};

static void wait_one_done(void *arg, int status, const char *message) {
    (void)message;
    struct wait_one *w = arg;
    w->done = true;
    w->status = status;
}

static int run_one(struct cr_xfer_client *cli, enum cr_xfer_opcode opcode, const char *endpoint,
                   const char *segment, uint64_t remote_addr, void *buf, size_t len,
                   const struct cr_cap *cap) {
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct wait_one w = {0};
    struct cr_xfer_op op = {.opcode = opcode, .endpoint = endpoint, .segment = segment,
                            .remote_addr = remote_addr, .cap = cap, .iov = &iov,
                            .iov_count = len ? 1 : 0, .done = wait_one_done, .arg = &w};
    int rc;
    while ((rc = cr_xfer_submit(cli, &op)) == CR_ERR_AGAIN) cr_xfer_client_poll(cli, -1);
    if (rc != CR_OK) return rc;
    while (!w.done) cr_xfer_client_poll(cli, -1);
    return w.status;
}

int cr_xfer_read(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                 uint64_t remote_addr, void *dst, size_t len) {
    return run_one(cli, CR_XFER_READ, endpoint, segment, remote_addr, dst, len, NULL);
}

int cr_xfer_read_cap(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                     uint64_t remote_addr, void *dst, size_t len, const struct cr_cap *cap) {
    return run_one(cli, CR_XFER_READ, endpoint, segment, remote_addr, dst, len, cap);
}

int cr_xfer_write(struct cr_xfer_client *cli, const char *endpoint, const char *segment,
                  uint64_t remote_addr, const void *src, size_t len) {
    return run_one(cli, CR_XFER_WRITE, endpoint, segment, remote_addr, (void *)src, len, NULL);
}
