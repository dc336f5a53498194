/* libcrescent's data path: Put and Get of object bytes through the transfer
 * layer (see "object bytes" in include/crescent/client.h).
 *
 * One engine serves the single and batch forms: a set of items, each with
 * its replica list from the master and a local buffer, is moved by
 * submitting every op at once to the cr_client's transfer client and
 * polling until none is in flight (a read of a same-host replica is copied
 * from its mapping and hashed at once instead, client_copy.h).  A write is
 * one attempt per replica (all must succeed); a read is one attempt at a
 * time per item, the next replica after a failure. */
#include <arpa/inet.h>
#include <assert.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* Debian's libxxhash picks XXH3's widest vector code at run time behind
 * these names (AVX2 where there is one: 12 GB/s against 1.8 for the plain
 * symbol on the EPYC VM, bench/RESULTS.md); the hash values are the same,
 * so objects put before and after agree.  The header renames XXH3_64bits. */
#include <xxh_x86dispatch.h>
#endif

#include "client/client_copy.h"
#include "client/copy_xxh3.h"
#include "client/client_verify.h"
#include "client/client_internal.h"
#include "rdma/xfer.h"

#define LOCAL_ADDRESSES_MAX 32u
/* How long this host's address list is trusted.  getifaddrs is a netlink
 * dump (a dozen syscalls, tens of microseconds on a loaded host); reading
 * it per Get cost more than the tcp read of a 4 KiB object.  A stale list
 * only orders replicas less well for this long: every replica is correct. */
#define LOCAL_HOSTS_TTL_MS 5000
#define POLL_SLICE_MS 1000

struct cr_client_local_hosts {
    int64_t read_ms;
    uint32_t count;
    char text[LOCAL_ADDRESSES_MAX][INET6_ADDRSTRLEN];
};

static void attempt_done(void *arg, int status, const char *message) {
    struct attempt *a = arg;
    assert(a->pending > 0);
    a->pending--;
    if (status != CR_OK && a->status == CR_OK) {
        a->status = status;
        snprintf(a->why, sizeof(a->why), "%s", message != NULL ? message : cr_strerror(status));
    }
}

static void attempt_fail(struct attempt *a, int status, const char *fmt, const char *arg) {
    if (a->status != CR_OK) return;
    a->status = status;
    snprintf(a->why, sizeof(a->why), fmt, arg);
}

/* ---- the transfer client ------------------------------------------------- */

void cr_client_data_close(cr_client *c) {
    cr_xfer_client_destroy(c->xfer);
    c->xfer = NULL;
    free(c->local_hosts);
    c->local_hosts = NULL;
}

int cr_client_data_open(cr_client *c) {
    if (c->xfer != NULL) return CR_OK;
    int rc = cr_xfer_client_create(NULL, &c->xfer);
    if (rc != CR_OK)
        return cr_client_fail(c, rc, "cannot create the transfer client: %s", cr_strerror(rc));
    return CR_OK;
}

int cr_client_register_buffer(cr_client *c, void *addr, size_t len) {
    assert(c != NULL);
    int rc = cr_client_data_open(c);
    if (rc != CR_OK) return rc;
    rc = cr_xfer_client_register(c->xfer, addr, len);
    if (rc != CR_OK)
        return cr_client_fail(c, rc, "cannot register %zu bytes at %p: %s", len, addr,
                              cr_xfer_client_last_error(c->xfer));
    return CR_OK;
}

int cr_client_unregister_buffer(cr_client *c, void *addr) {
    assert(c != NULL);
    if (c->xfer == NULL)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "cannot unregister the buffer at %p: "
                              "no buffer was registered on this client", addr);
    int rc = cr_xfer_client_unregister(c->xfer, addr);
    if (rc != CR_OK)
        return cr_client_fail(c, rc, "cannot unregister the buffer at %p: %s", addr,
                              cr_xfer_client_last_error(c->xfer));
    return CR_OK;
}

/* Polls until every submitted op has completed.  The transfer layer fails
 * ops that make no progress for its op timeout, so this ends. */
void cr_client_drain(cr_client *c) {
    while (cr_xfer_client_in_flight(c->xfer) > 0) cr_xfer_client_poll(c->xfer, POLL_SLICE_MS);
}

/* Submits one op, polling for room while the client is at its limit. */
static int submit(cr_client *c, const struct cr_xfer_op *op) {
    int rc;
    while ((rc = cr_xfer_submit(c->xfer, op)) == CR_ERR_AGAIN) cr_xfer_client_poll(c->xfer, 0);
    return rc;
}

const struct cr_cap *cr_client_handle_cap(const struct cr_buf_handle *bh, struct cr_cap *out) {
    if (!bh->has_capability || cr_cap_decode(bh->capability, out) != 0) return NULL;
    return out;
}

/* Queues the ops that move bytes [offset, offset + len) of one replica's
 * object (laid out as its handles in order, object_len bytes in all) to or
 * from [base, base + len): one op per handle the window touches.  A failure
 * before anything was queued is recorded in the attempt. */
void cr_client_submit_window(cr_client *c, enum cr_xfer_opcode opcode, const struct cr_replica *r,
                             uint64_t object_len, uint64_t offset, uint8_t *base, size_t len,
                             struct attempt *a) {
    assert(offset <= object_len && len <= object_len - offset);
    *a = (struct attempt){0};
    uint64_t at = 0; /* where handle h starts in the object */
    for (size_t h = 0; h < r->handle_count; h++) {
        const struct cr_buf_handle *bh = &r->handles[h];
        if (bh->transport_endpoint == NULL || bh->transport_endpoint[0] == '\0') {
            attempt_fail(a, CR_ERR_IO, "segment '%s' was mounted without a transport endpoint",
                         bh->segment_name);
            return;
        }
        if (bh->size_bytes > object_len - at) {
            attempt_fail(a, CR_ERR_PROTOCOL, "segment '%s': the replica is longer than the "
                         "object", bh->segment_name);
            return;
        }
        uint64_t from = offset > at ? offset : at;
        uint64_t to = offset + len < at + bh->size_bytes ? offset + len : at + bh->size_bytes;
        at += bh->size_bytes;
        if (from >= to) continue; /* outside the window, or an empty handle */
        struct iovec iov = {.iov_base = base + (from - offset), .iov_len = (size_t)(to - from)};
        struct cr_cap cap; /* the transfer layer copies it at submit */
        struct cr_xfer_op op = {.opcode = opcode, .endpoint = bh->transport_endpoint,
                                .segment = bh->segment_name,
                                .remote_addr = bh->buffer + (from - (at - bh->size_bytes)),
                                .iov = &iov, .iov_count = 1, .done = attempt_done, .arg = a,
                                .cap = cr_client_handle_cap(bh, &cap)};
        int rc = submit(c, &op);
        if (rc != CR_OK) {
            attempt_fail(a, rc, "%s", cr_xfer_client_last_error(c->xfer));
            return;
        }
        a->pending++;
    }
    if (at != object_len) attempt_fail(a, CR_ERR_PROTOCOL, "%s", "the replica's handles do not "
                                       "cover the object");
}

/* The whole object: [0, len). */
static void submit_replica(cr_client *c, enum cr_xfer_opcode opcode, const struct cr_replica *r,
                           uint8_t *base, size_t len, struct attempt *a) {
    cr_client_submit_window(c, opcode, r, len, 0, base, len, a);
}

/* Bytes of an object as one replica lays them out (the sum of its handles). */
uint64_t cr_client_replica_bytes(const struct cr_replica *r) {
    uint64_t n = 0;
    for (size_t h = 0; h < r->handle_count; h++) n += r->handles[h].size_bytes;
    return n;
}

/* The object's bytes as its list gives them: a memory replica's handles,
 * else the object_size of a disk or local_disk replica. */
uint64_t cr_client_list_bytes(const struct cr_replica_list *list) {
    for (size_t r = 0; r < list->count; r++)
        if (list->replicas[r].medium == CR_MEDIUM_MEMORY && list->replicas[r].handle_count > 0)
            return cr_client_replica_bytes(&list->replicas[r]);
    for (size_t r = 0; r < list->count; r++)
        if (list->replicas[r].medium != CR_MEDIUM_MEMORY) return list->replicas[r].object_size;
    return 0;
}

/* ---- nearest replica first ------------------------------------------------ */

/* The host part of "host:port" or "[v6]:port", copied into out. */
static void endpoint_host(const char *endpoint, char *out, size_t cap) {
    const char *start = endpoint, *end = strrchr(endpoint, ':');
    if (endpoint[0] == '[') {
        start = endpoint + 1;
        end = strchr(start, ']');
    }
    size_t n = end != NULL ? (size_t)(end - start) : strlen(start);
    if (n >= cap) n = cap - 1;
    memcpy(out, start, n);
    out[n] = '\0';
}

/* This host's interface addresses as text, read at most every
 * LOCAL_HOSTS_TTL_MS; NULL when they cannot be read (then only loopback
 * counts as local). */
static const struct cr_client_local_hosts *local_hosts(cr_client *c) {
    int64_t now = c->clock_ms(c->clock_ctx);
    struct cr_client_local_hosts *h = c->local_hosts;
    if (h != NULL && now - h->read_ms < LOCAL_HOSTS_TTL_MS) return h;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return h; /* keep what was read before, if anything */
    if (h == NULL && (h = c->local_hosts = calloc(1, sizeof(*h))) == NULL) {
        freeifaddrs(ifs);
        return NULL;
    }
    h->read_ms = now;
    h->count = 0;
    for (struct ifaddrs *i = ifs; i != NULL && h->count < LOCAL_ADDRESSES_MAX; i = i->ifa_next) {
        if (i->ifa_addr == NULL) continue;
        sa_family_t family = i->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        const void *addr = family == AF_INET
                               ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (inet_ntop(family, addr, h->text[h->count], INET6_ADDRSTRLEN) != NULL) h->count++;
    }
    freeifaddrs(ifs);
    return h;
}

/* Whether `endpoint` is served from this host: a loopback address or one of
 * this host's interface addresses. */
static bool endpoint_is_local(const char *endpoint, const struct cr_client_local_hosts *hosts) {
    char host[INET6_ADDRSTRLEN + 1];
    endpoint_host(endpoint, host, sizeof(host));
    struct in_addr v4;
    if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0) return true;
    if (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return true;
    for (uint32_t i = 0; hosts != NULL && i < hosts->count; i++)
        if (strcmp(hosts->text[i], host) == 0) return true;
    return false;
}

static bool replica_readable(const struct cr_replica *rep) {
    return rep->status == CR_REPLICA_COMPLETE && rep->medium == CR_MEDIUM_MEMORY &&
           rep->handle_count > 0;
}

/* order[] = the complete replicas of `list`, same-host ones first (the
 * transfer layer serves those by shm), then the rest in the master's order.
 * Only a list with a choice is ranked (and looks at this host's addresses).
 * Returns how many. */
size_t cr_client_rank_replicas(cr_client *c, const struct cr_replica_list *list, size_t *order) {
    size_t n = 0;
    for (size_t r = 0; r < list->count; r++)
        if (replica_readable(&list->replicas[r])) order[n++] = r;
    if (n < 2) return n;
    const struct cr_client_local_hosts *hosts = local_hosts(c);
    n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r < list->count; r++) {
            const struct cr_replica *rep = &list->replicas[r];
            if (!replica_readable(rep)) continue;
            const char *ep = rep->handles[0].transport_endpoint;
            bool local = ep != NULL && ep[0] != '\0' && endpoint_is_local(ep, hosts);
            if (local == (pass == 0)) order[n++] = r;
        }
    }
    return n;
}

/* ---- reads ----------------------------------------------------------------- */

/* One object being read. */
struct read_item {
    const struct cr_replica_list *list;
    struct cr_get_buffer *out;
    int64_t started_ms;       /* before the GetReplicaList that took the lease */
    size_t order[16];
    size_t ranked, tried;
    struct attempt attempt;
    bool active;              /* an attempt is in flight this round */
    bool done;
    bool mapped;              /* the attempt copied from a same-host mapping, and */
    uint64_t hash;            /* (checksummed lists) the XXH3-64 of what it wrote */
    int status;               /* the latest failure */
    uint64_t attempt_ns;      /* when the latest replica's read started */
    char why[CR_XFER_MESSAGE_MAX + 96];
};

/* Starts the next replica of `it`, or settles it when none is left.  With
 * `defer_hash`, a same-host copy is not hashed here: true tells the caller
 * that it->hash is its to fill (read_all hands that to a second thread). */
static bool read_next(cr_client *c, struct read_item *it, bool defer_hash) {
    it->active = false;
    if (it->tried == it->ranked) {
        it->done = true;
        it->out->status = it->ranked == 0 ? CR_ERR_IO : it->status;
        if (it->ranked == 0) snprintf(it->why, sizeof(it->why), "no complete replica to read");
        return false;
    }
    const struct cr_replica *r = &it->list->replicas[it->order[it->tried++]];
    it->attempt_ns = cr_client_now_ns();
    /* Same host: copy and hash chunk by chunk now, while each chunk is in
     * cache, rather than a copy op and then a second pass to hash. */
    bool hash_here = it->list->has_checksum && !defer_hash;
    it->mapped = cr_client_read_mapped(c->xfer, r, it->out->buf, it->out->len,
                                       hash_here ? &it->hash : NULL) == CR_OK;
    if (it->mapped) it->attempt = (struct attempt){0}; /* done, nothing in flight */
    else submit_replica(c, CR_XFER_READ, r, it->out->buf, it->out->len, &it->attempt);
    it->active = true;
    return it->mapped && it->list->has_checksum && defer_hash;
}

/* Judges a finished attempt: a transfer failure or a checksum mismatch moves
 * to the next replica; an expired lease ends the item (every replica's bytes
 * may have been reused, and the lease is the object's). */
static void read_judge(cr_client *c, struct read_item *it) {
    it->active = false; /* read_next makes it active again when it starts another */
    const struct cr_replica *r = &it->list->replicas[it->order[it->tried - 1]];
    const char *seg = r->handles[0].segment_name;
    if (it->attempt.status != CR_OK) {
        it->status = it->attempt.status;
        snprintf(it->why, sizeof(it->why), "replica on '%s': %s", seg, it->attempt.why);
        read_next(c, it, false);
        return;
    }
    /* An empty object has no bytes that eviction could have reused under it. */
    int64_t elapsed = c->clock_ms(c->clock_ctx) - it->started_ms;
    if (it->list->lease_ttl_ms > 0 && it->out->len > 0 &&
        elapsed >= (int64_t)it->list->lease_ttl_ms) {
        it->done = true;
        it->out->status = it->status = CR_ERR_LEASE_EXPIRED;
        snprintf(it->why, sizeof(it->why), "the read took %lld ms, past the %llu ms lease: "
                 "the bytes may have been replaced; read again", (long long)elapsed,
                 (unsigned long long)it->list->lease_ttl_ms);
        return;
    }
    if (it->list->has_checksum &&
        (it->mapped ? it->hash : XXH3_64bits(it->out->buf, it->out->len)) !=
            it->list->checksum_xxh3) {
        it->status = CR_ERR_CHECKSUM;
        snprintf(it->why, sizeof(it->why), "replica on '%s': bytes do not match the put's "
                 "checksum", seg);
        read_next(c, it, false);
        return;
    }
    it->done = true;
    it->out->status = CR_OK;
    cr_client_read_observe(c, r->medium == CR_MEDIUM_LOCAL_DISK ? CR_READ_TIER_LOCAL_DISK
                                                                : CR_READ_TIER_MEMORY,
                           cr_client_now_ns() - it->attempt_ns);
}

/* Whether a batch has enough checksummed bytes to verify on a second
 * thread (client_verify.h): at least two objects and CR_VERIFY_MIN_BYTES
 * (counted before knowing which replicas are same-host: a tcp batch starts
 * the helper for nothing, a thread's start against a transfer of 2 MiB+). */
static bool verify_piped(const struct read_item *items, size_t n) {
    /* Off unless CRESCENT_VERIFY_THREAD=1: on a machine whose cores are all
     * busy the helper rarely runs and the split measured slower (bench/
     * RESULTS.md).  Read per batch, so a benchmark compares both in one
     * process. */
    const char *env = getenv("CRESCENT_VERIFY_THREAD");
    if (env == NULL || strcmp(env, "1") != 0) return false;
    size_t bytes = 0, objects = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].done || !items[i].list->has_checksum) continue;
        bytes += items[i].out->len;
        objects++;
    }
    return objects >= 2 && bytes >= CR_VERIFY_MIN_BYTES;
}

/* Reads every item whose list is usable into its buffer: all first attempts
 * in parallel, then rounds of fallbacks for the failed ones.  A big batch's
 * same-host copies are hashed on a second thread while this one copies the
 * next (client_verify.h); every hash is in before any item is judged. */
static void read_all(cr_client *c, struct read_item *items, size_t n) {
    struct cr_verify_pipe *pipe = verify_piped(items, n) ? cr_verify_start(n) : NULL;
    for (size_t i = 0; i < n; i++) {
        struct read_item *it = &items[i];
        bool deferred = false;
        if (!it->done) {
            it->ranked = cr_client_rank_replicas(c, it->list, it->order);
            deferred = read_next(c, it, pipe != NULL && cr_verify_keeping_up(pipe, i));
        }
        if (pipe != NULL)
            cr_verify_publish(pipe, i, deferred ? it->out->buf : NULL, it->out->len, &it->hash);
    }
    if (pipe != NULL) cr_verify_finish(pipe);
    for (bool again = true; again;) {
        cr_client_drain(c);
        again = false;
        for (size_t i = 0; i < n; i++) {
            if (!items[i].active) continue;
            read_judge(c, &items[i]);
            again |= items[i].active;
        }
    }
}

/* Checks an item's list against its buffer; false settles it (not found,
 * too small, inconsistent replicas). */
static bool read_prepare(struct read_item *it) {
    const struct cr_replica_list *list = it->list;
    struct cr_get_buffer *out = it->out;
    it->done = true;
    if (list->status != CR_OK) {
        out->status = it->status = list->status;
        snprintf(it->why, sizeof(it->why), "%s", cr_strerror(list->status));
        return false;
    }
    if (list->count == 0 || list->count > sizeof(it->order) / sizeof(it->order[0])) {
        out->status = it->status = CR_ERR_PROTOCOL;
        snprintf(it->why, sizeof(it->why), "the master listed %zu replicas", list->count);
        return false;
    }
    out->len = (size_t)cr_client_list_bytes(list);
    if (out->len > out->cap) {
        out->status = it->status = CR_ERR_INVALID_PARAMS;
        snprintf(it->why, sizeof(it->why), "the object has %zu bytes, the buffer %zu",
                 out->len, out->cap);
        return false;
    }
    it->done = false;
    return true;
}

/* A read that found no memory replica it could read: the object's file, if
 * it has one (docs/tiers.md).  Leaves the memory attempt's verdict when it
 * has no disk replica or the buffer is too small. */
static void read_from_file(cr_client *c, const char *tenant, struct read_item *it) {
    struct cr_get_buffer *out = it->out;
    if (out->status == CR_OK || out->len > out->cap || cr_client_files_replica(it->list) == NULL)
        return;
    char why[sizeof(it->why)];
    size_t len = 0;
    int rc = cr_client_files_read(c, tenant, out->key, it->list, out->buf, out->cap, &len, why,
                                  sizeof(why));
    out->status = it->status = rc;
    out->len = len;
    if (rc != CR_OK) snprintf(it->why, sizeof(it->why), "%s", why);
}

/* A read that found no memory replica it could read: a local_disk replica
 * on a store server's SSD, if it has one, before the shared file tier. */
static void read_from_ssd(cr_client *c, struct read_item *it) {
    struct cr_get_buffer *out = it->out;
    if (out->status == CR_OK || out->len > out->cap || !cr_client_ssd_has_replica(it->list))
        return;
    char why[sizeof(it->why)];
    size_t len = 0;
    int rc = cr_client_ssd_read(c, it->list, out->buf, out->cap, &len, why, sizeof(why));
    out->status = it->status = rc;
    out->len = len;
    if (rc != CR_OK) snprintf(it->why, sizeof(it->why), "%s", why);
}

static int single_get(cr_client *c, const char *tenant, const char *key, void *buf, size_t cap,
                      bool allocate, void **data_out, size_t *len) {
    int rc = cr_client_data_open(c);
    if (rc == CR_OK) rc = cr_client_files_check(c);
    if (rc != CR_OK) return rc;
    cr_client_files_poll(c);
    cr_client_read_report_poll(c);
    struct cr_replica_list list;
    int64_t started = c->clock_ms(c->clock_ctx);
    rc = cr_client_get_replica_list(c, tenant, key, &list);
    if (rc != CR_OK) return rc;
    list.status = CR_OK;
    struct cr_get_buffer out = {.key = key, .buf = buf, .cap = cap};
    struct read_item it = {.list = &list, .out = &out, .started_ms = started};
    if (allocate && list.count > 0) { /* size the buffer from the list */
        out.cap = (size_t)cr_client_list_bytes(&list);
        out.buf = malloc(out.cap > 0 ? out.cap : 1);
        if (out.buf == NULL) {
            cr_client_replica_list_free(&list);
            return cr_client_fail(c, CR_ERR_NOMEM, "no memory for %zu bytes", out.cap);
        }
    }
    if (read_prepare(&it)) read_all(c, &it, 1);
    read_from_ssd(c, &it);
    read_from_file(c, tenant, &it);
    cr_client_replica_list_free(&list);
    *len = out.len;
    if (out.status != CR_OK) {
        if (allocate) free(out.buf);
        return cr_client_fail(c, out.status, "get '%s': %s", key, it.why);
    }
    if (allocate) *data_out = out.buf;
    return CR_OK;
}

int cr_client_get(cr_client *c, const char *tenant, const char *key, void **data, size_t *len) {
    assert(c != NULL && data != NULL && len != NULL);
    *data = NULL;
    *len = 0;
    return single_get(c, tenant, key, NULL, 0, true, data, len);
}

int cr_client_get_into(cr_client *c, const char *tenant, const char *key, void *buf, size_t cap,
                       size_t *len) {
    assert(c != NULL && len != NULL && (buf != NULL || cap == 0));
    *len = 0;
    return single_get(c, tenant, key, buf, cap, false, NULL, len);
}

int cr_client_batch_get_into(cr_client *c, const char *tenant, struct cr_get_buffer *items,
                             size_t count) {
    assert(c != NULL && (items != NULL || count == 0));
    int rc = cr_client_data_open(c);
    if (rc == CR_OK) rc = cr_client_files_check(c);
    if (rc != CR_OK) return rc;
    cr_client_files_poll(c);
    cr_client_read_report_poll(c);
    const char **keys = malloc((count > 0 ? count : 1) * sizeof(*keys));
    struct read_item *reads = calloc(count > 0 ? count : 1, sizeof(*reads));
    if (keys == NULL || reads == NULL) {
        free(keys), free(reads);
        return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < count; i++) keys[i] = items[i].key;
    struct cr_replica_lists lists;
    int64_t started = c->clock_ms(c->clock_ctx);
    rc = cr_client_batch_get_replica_list(c, tenant, keys, count, &lists);
    if (rc == CR_OK) {
        for (size_t i = 0; i < count; i++) {
            items[i].len = 0;
            reads[i] = (struct read_item){.list = &lists.lists[i], .out = &items[i],
                                          .started_ms = started};
            read_prepare(&reads[i]);
        }
        read_all(c, reads, count);
        for (size_t i = 0; i < count; i++) {
            read_from_ssd(c, &reads[i]);
            read_from_file(c, tenant, &reads[i]);
        }
        cr_client_replica_lists_free(&lists);
    }
    free(keys);
    free(reads);
    return rc;
}

/* ---- writes ----------------------------------------------------------------- */

/* Writes every replica of items[i] (whose PutStart succeeded, start[i] ==
 * CR_OK) in parallel; start[i] becomes the first failure of each item. */
static void write_all(cr_client *c, const struct cr_replica_list *lists,
                      const struct cr_put_data *items, int *start, char (*why)[256], size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += start[i] == CR_OK ? lists[i].count : 0;
    struct attempt *attempts = calloc(total > 0 ? total : 1, sizeof(*attempts));
    if (attempts == NULL) {
        for (size_t i = 0; i < n; i++)
            if (start[i] == CR_OK) start[i] = CR_ERR_NOMEM;
        return;
    }
    struct attempt *a = attempts;
    for (size_t i = 0; i < n; i++) {
        if (start[i] != CR_OK) continue;
        for (size_t r = 0; r < lists[i].count; r++)
            submit_replica(c, CR_XFER_WRITE, &lists[i].replicas[r], (uint8_t *)items[i].data,
                           items[i].len, a++);
    }
    cr_client_drain(c);
    a = attempts;
    for (size_t i = 0; i < n; i++) {
        if (start[i] != CR_OK) continue;
        for (size_t r = 0; r < lists[i].count; r++, a++) {
            if (a->status == CR_OK || start[i] != CR_OK) continue;
            start[i] = a->status;
            snprintf(why[i], sizeof(why[i]), "write to '%s': %s",
                     lists[i].replicas[r].handles[0].segment_name, a->why);
        }
    }
    free(attempts);
}

static int check_put_item(cr_client *c, const struct cr_put_data *item) {
    if (item->data == NULL && item->len > 0)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "put '%s': data is NULL", item->key);
    return CR_OK;
}

int cr_client_put(cr_client *c, const char *tenant, const char *key, const void *data,
                  size_t len, const struct cr_replicate_config *config) {
    assert(c != NULL);
    struct cr_put_data item = {.key = key, .data = data, .len = len, .config = config};
    int rc = check_put_item(c, &item);
    if (rc == CR_OK) rc = cr_client_data_open(c);
    if (rc == CR_OK) rc = cr_client_files_check(c);
    if (rc != CR_OK) return rc;
    cr_client_files_poll(c);
    /* The checksum before the bytes leave; with the file tier, computed
     * while copying them for its writer: one pass that loads each stripe
     * once, stores it and feeds it to the hash (copy_xxh3.h), not a copy
     * and then a hash of each chunk (bench/RESULTS.md, "Tier gets and the
     * put, fifth pass"). */
    void *copy = NULL;
    struct cr_files_job *persist = cr_client_files_reserve(c, tenant, key, len, &copy);
    uint64_t checksum = persist != NULL ? cr_copy_xxh3(copy, data, len) : XXH3_64bits(data, len);
    struct cr_put_item start = {.key = key, .size_bytes = len, .config = config};
    struct cr_replica_list list;
    rc = cr_client_put_start_retrying(c, tenant, &start, &list);
    if (rc != CR_OK) {
        cr_client_files_cancel(c, persist);
        return rc;
    }
    char why[1][256] = {""};
    int status = CR_OK;
    write_all(c, &list, &item, &status, why, 1);
    cr_client_replica_list_free(&list);
    if (status == CR_OK) {
        rc = cr_client_put_end_checksum(c, tenant, key, checksum);
        if (rc == CR_OK && persist != NULL) cr_client_files_commit(c, persist, checksum);
        else cr_client_files_cancel(c, persist);
        return rc;
    }
    cr_client_files_cancel(c, persist);
    int revoked = cr_client_put_revoke(c, tenant, key);
    return cr_client_fail(c, status, "put '%s' revoked%s: %s", key,
                          revoked == CR_OK ? "" : " (the revoke failed too: the master frees "
                                                  "it after its release timeout)", why[0]);
}

/* Ends the items written whole (with their checksums) and revokes the rest,
 * one RPC each; item statuses are updated from the answers. */
static int end_or_revoke_batch(cr_client *c, const char *tenant, struct cr_put_data *items,
                               const int *written, size_t count, uint64_t *item_sums) {
    const char **end_keys = malloc(count * sizeof(*end_keys));
    const char **rev_keys = malloc(count * sizeof(*rev_keys));
    uint64_t *sums = malloc(count * sizeof(*sums));
    size_t *end_at = malloc(count * sizeof(*end_at));
    int rc = end_keys && rev_keys && sums && end_at ? CR_OK : CR_ERR_NOMEM;
    size_t ends = 0, revs = 0;
    for (size_t i = 0; rc == CR_OK && i < count; i++) {
        if (items[i].status != CR_OK) continue; /* PutStart failed: nothing to end */
        if (written[i] != CR_OK) {
            rev_keys[revs++] = items[i].key;
            items[i].status = written[i];
            continue;
        }
        end_at[ends] = i;
        sums[ends] = item_sums[i] = XXH3_64bits(items[i].data, items[i].len);
        end_keys[ends++] = items[i].key;
    }
    struct cr_status_list st = {0};
    if (rc == CR_OK && ends > 0) {
        rc = cr_client_batch_put_end_checksums(c, tenant, end_keys, sums, ends, &st);
        for (size_t k = 0; rc == CR_OK && k < ends; k++) items[end_at[k]].status = st.statuses[k];
        cr_client_status_list_free(&st);
    }
    if (rc == CR_OK && revs > 0) { /* a failed revoke leaves a zombie the master frees */
        (void)cr_client_batch_put_revoke(c, tenant, rev_keys, revs, &st);
        cr_client_status_list_free(&st);
    }
    free(end_keys), free(rev_keys), free(sums), free(end_at);
    return rc == CR_ERR_NOMEM ? cr_client_fail(c, rc, "out of memory") : rc;
}

int cr_client_batch_put_once(cr_client *c, const char *tenant, struct cr_put_data *items,
                             size_t count) {
    assert(c != NULL && (items != NULL || count == 0));
    int rc = count > 0 && count <= CR_CLIENT_BATCH_MAX ? cr_client_data_open(c)
             : cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a batch holds 1 to %u puts, not %zu",
                              CR_CLIENT_BATCH_MAX, count);
    for (size_t i = 0; rc == CR_OK && i < count; i++) rc = check_put_item(c, &items[i]);
    if (rc == CR_OK) rc = cr_client_files_check(c);
    if (rc != CR_OK) return rc;
    cr_client_files_poll(c);
    struct cr_put_item *starts = calloc(count, sizeof(*starts));
    int *written = calloc(count, sizeof(*written));
    char (*why)[256] = calloc(count, sizeof(*why));
    uint64_t *sums = calloc(count, sizeof(*sums)); /* hashed once, for PutEnd and the file */
    if (starts == NULL || written == NULL || why == NULL || sums == NULL) {
        free(starts), free(written), free(why), free(sums);
        return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < count; i++)
        starts[i] = (struct cr_put_item){.key = items[i].key, .size_bytes = items[i].len,
                                         .config = items[i].config};
    struct cr_replica_lists lists;
    rc = cr_client_batch_put_start(c, tenant, starts, count, &lists);
    if (rc == CR_OK) {
        for (size_t i = 0; i < count; i++) written[i] = items[i].status = lists.lists[i].status;
        write_all(c, lists.lists, items, written, why, count);
        cr_client_replica_lists_free(&lists);
        rc = end_or_revoke_batch(c, tenant, items, written, count, sums);
    }
    for (size_t i = 0; rc == CR_OK && c->files != NULL && i < count; i++)
        if (items[i].status == CR_OK)
            cr_client_files_enqueue(c, tenant, items[i].key, items[i].data, items[i].len,
                                    sums[i]);
    for (size_t i = 0; rc == CR_OK && i < count; i++) /* say why the first one failed */
        if (items[i].status != CR_OK && why[i][0] != '\0') {
            snprintf(c->error, sizeof(c->error), "put '%s' revoked: %s", items[i].key, why[i]);
            break;
        }
    free(starts), free(written), free(why), free(sums);
    return rc;
}
