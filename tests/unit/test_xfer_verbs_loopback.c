/* The verbs transport wired end to end -- server (HELLO, KEY, segments
 * registered once), client (QPs per peer, keys, RDMA READ/WRITE striped over
 * QPs, completions in cr_xfer_client_poll), fallbacks to tcp -- run against
 * loopback_ibverbs.c, a TEST DOUBLE of libibverbs that this binary links
 * INSTEAD of -libverbs (build.zig: *_loopback.c tests).  The double moves
 * bytes with memcpy inside this process and checks what an HCA checks (keys,
 * bounds, access, QP states, PSNs, queue depth); it says nothing about real
 * hardware.  The real-device test is test_device_round_trip in
 * test_xfer_verbs.c, which prints SKIPPED on machines without a device.
 *
 * The server runs on its own thread (xfer_fixture.h); its stats are read
 * with that thread stopped. */
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "crescent/error.h"
#include "loopback_ibverbs.h"
#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_verbs.h"

#include "xfer_fixture.h"

/* The client never uses shm (same host here), and waits long for the
 * blocking hello and key answers: the machine running this may be loaded. */
static const struct cr_xfer_client_config client_config = {.shm_disabled = true,
                                                           .connect_timeout_ms = 60000};

/* The fixture with `devices` devices on each side (loopback0..; every
 * context in this process sees them all) and this file's client. */
static int setup_devices(void **state, int devices) {
    loopback_ibverbs_set_devices(devices);
    setup_with(state, false);
    struct fixture *f = *state;
    cr_xfer_client_destroy(f->cli);
    assert_int_equal(cr_xfer_client_create(&client_config, &f->cli), CR_OK);
    return 0;
}

static int setup(void **state) { return setup_devices(state, 1); }

static int setup_two_devices(void **state) { return setup_devices(state, 2); }

/* Every test ends with nothing left on the device: contexts, PDs, regions,
 * CQs and QPs all released by the destroys. */
static int teardown_checked(void **state) {
    teardown(state);
    struct loopback_ibverbs_counts c = loopback_ibverbs_counts();
    assert_int_equal(c.contexts, 0);
    assert_int_equal(c.pds, 0);
    assert_int_equal(c.mrs, 0);
    assert_int_equal(c.cqs, 0);
    assert_int_equal(c.qps, 0);
    loopback_ibverbs_set_devices(1);
    return 0;
}

static int find_libibverbs(struct dl_phdr_info *info, size_t size, void *found) {
    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libibverbs") != NULL)
        *(bool *)found = true;
    return 0;
}

/* The binary runs on the double, not on libibverbs. */
static void test_runs_on_the_double(void **state) {
    (void)state;
    bool found = false;
    dl_iterate_phdr(find_libibverbs, &found);
    assert_false(found);
    char why[160];
    assert_int_equal(cr_xfer_verbs_probe(why, sizeof(why)), 1);
    loopback_ibverbs_set_devices(0);
    assert_int_equal(cr_xfer_verbs_probe(why, sizeof(why)), 0);
    assert_non_null(strstr(why, "no RDMA device (ibv_get_device_list: Function not implemented)"));
    loopback_ibverbs_set_devices(1);
}

/* ---- the device layer: two QP sets connected to each other ------------- */

struct pair {
    struct cr_xfer_verbs_device *dev;
    struct cr_xfer_verbs *a, *b;
};

static void pair_open(struct pair *p, uint32_t qps) {
    char why[160];
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, -1, &p->dev, why, sizeof(why)), CR_OK);
    assert_string_equal(cr_xfer_verbs_device_name(p->dev), "loopback0 port 1");
    assert_int_equal(cr_xfer_verbs_open(&p->dev, 1, qps, 8, &p->a, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_open(&p->dev, 1, qps, 8, &p->b, why, sizeof(why)), CR_OK);
}

static void pair_connect(struct pair *p) {
    char why[160];
    struct cr_xfer_verbs_hello ha, hb;
    cr_xfer_verbs_local_hello(p->a, &ha);
    cr_xfer_verbs_local_hello(p->b, &hb);
    assert_int_equal(ha.devices[0].lid, 0); /* RoCE-style: routed by GID */
    assert_int_equal(cr_xfer_verbs_connect(p->a, &hb, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_connect(p->b, &ha, why, sizeof(why)), CR_OK);
}

static void pair_close(struct pair *p) {
    cr_xfer_verbs_close(p->a);
    cr_xfer_verbs_close(p->b);
    cr_xfer_verbs_device_close(p->dev);
}

/* Polls until `expected` completions came; returns how many were not OK. */
static int reap(struct cr_xfer_verbs *v, int expected, const char **reason) {
    struct cr_xfer_verbs_completion done[32];
    int got = 0, failed = 0;
    while (got < expected) {
        int n = cr_xfer_verbs_poll(v, done, 32);
        assert_true(n > 0); /* the double completes at poll: never empty while some are due */
        for (int i = 0; i < n; i++) {
            if (done[i].status == CR_OK) continue;
            if (failed++ == 0 && reason != NULL) *reason = done[i].reason;
        }
        got += n;
    }
    assert_int_equal(cr_xfer_verbs_outstanding(v), 0);
    return failed;
}

static void test_device_layer_striped_round_trip(void **state) {
    (void)state;
    struct pair p;
    pair_open(&p, 4);
    pair_connect(&p);
    size_t len = 16 * MIB + 12345;
    uint8_t *src = malloc(len), *remote = calloc(1, len), *back = calloc(1, len);
    assert_non_null(src);
    fill_random(src, len, 7);
    struct ibv_mr *m_src, *m_back, *m_remote;
    uint32_t lk_src, lk_back, lk_remote, rk, rk_remote;
    char why[200];
    assert_int_equal(cr_xfer_verbs_register(p.dev, src, len, &m_src, &lk_src, &rk, why, 200), CR_OK);
    assert_int_equal(cr_xfer_verbs_register(p.dev, back, len, &m_back, &lk_back, &rk, why, 200), CR_OK);
    assert_int_equal(
        cr_xfer_verbs_register(p.dev, remote, len, &m_remote, &lk_remote, &rk_remote, why, 200),
        CR_OK);
    /* WRITE from a three-piece gather list, striped over the 4 QPs. */
    struct cr_xfer_verbs_local gather[3] = {{src, 1000, {lk_src}},
                                            {src + 1000, 8 * MIB, {lk_src}},
                                            {src + 1000 + 8 * MIB, len - 1000 - 8 * MIB, {lk_src}}};
    uint32_t n = 0;
    struct loopback_ibverbs_counts before = loopback_ibverbs_counts();
    assert_int_equal(
        cr_xfer_verbs_post(p.a, true, gather, 3, (uintptr_t)remote, &rk_remote, len, 1, &n), CR_OK);
    assert_int_equal(n, 4);
    assert_int_equal(cr_xfer_verbs_outstanding(p.a), 4);
    assert_int_equal(reap(p.a, 4, NULL), 0);
    assert_memory_equal(src, remote, len);
    struct cr_xfer_verbs_local one = {back, len, {lk_back}};
    assert_int_equal(
        cr_xfer_verbs_post(p.a, false, &one, 1, (uintptr_t)remote, &rk_remote, len, 2, &n), CR_OK);
    assert_int_equal(reap(p.a, 4, NULL), 0);
    assert_memory_equal(src, back, len);
    struct loopback_ibverbs_counts after = loopback_ibverbs_counts();
    assert_int_equal(after.writes - before.writes, 4);
    assert_int_equal(after.reads - before.reads, 4);
    assert_true(after.max_sge_seen >= 2); /* a stripe crossed gather entries */
    cr_xfer_verbs_deregister(m_remote);
    cr_xfer_verbs_deregister(m_src);
    cr_xfer_verbs_deregister(m_back);
    pair_close(&p);
    free(src);
    free(remote);
    free(back);
}

/* Posts one 4 KiB op on a 1-QP set and returns the completion's reason
 * (NULL when it succeeded). */
static const char *one_op(struct cr_xfer_verbs *v, bool write, void *local, uint32_t lkey,
                          void *remote, uint32_t rkey, uint64_t len) {
    struct cr_xfer_verbs_local l = {local, len, {lkey}};
    uint32_t n = 0;
    assert_int_equal(cr_xfer_verbs_post(v, write, &l, 1, (uintptr_t)remote, &rkey, len, 9, &n),
                     CR_OK);
    assert_int_equal(n, 1);
    const char *reason = NULL;
    reap(v, 1, &reason);
    return reason;
}

/* New QP sets on the same device (and PD: the regions stay valid). */
static void pair_reopen(struct pair *p, bool connect) {
    char why[160];
    cr_xfer_verbs_close(p->a);
    cr_xfer_verbs_close(p->b);
    assert_int_equal(cr_xfer_verbs_open(&p->dev, 1, 1, 8, &p->a, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_open(&p->dev, 1, 1, 8, &p->b, why, sizeof(why)), CR_OK);
    if (connect) pair_connect(p);
}

/* What the double refuses, with the statuses a real HCA gives. */
static void test_device_layer_refusals(void **state) {
    (void)state;
    char why[200];
    uint8_t *local = calloc(1, 8192), *remote = calloc(1, 8192);
    struct pair p;
    pair_open(&p, 1);
    struct ibv_mr *ml, *mr;
    uint32_t lkey, rkey, unused;
    assert_int_equal(cr_xfer_verbs_register(p.dev, local, 8192, &ml, &lkey, &unused, why, 200), CR_OK);
    assert_int_equal(cr_xfer_verbs_register(p.dev, remote, 4096, &mr, &unused, &rkey, why, 200),
                     CR_OK);
    /* Not connected: the QP is in INIT and ibv_post_send refuses. */
    struct cr_xfer_verbs_local l = {local, 4096, {lkey}};
    uint32_t n = 7;
    assert_int_equal(cr_xfer_verbs_post(p.a, true, &l, 1, (uintptr_t)remote, &rkey, 4096, 1, &n),
                     CR_ERR_IO);
    assert_int_equal(n, 0);
    /* b expects another PSN than a sends: nobody answers in sequence. */
    struct cr_xfer_verbs_hello ha, hb;
    cr_xfer_verbs_local_hello(p.a, &ha);
    cr_xfer_verbs_local_hello(p.b, &hb);
    ha.psn[0] = (ha.psn[0] + 1) & 0xffffffu;
    assert_int_equal(cr_xfer_verbs_connect(p.a, &hb, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_connect(p.b, &ha, why, sizeof(why)), CR_OK);
    assert_string_equal(one_op(p.a, true, local, lkey, remote, rkey, 4096),
                        "transport retry counter exceeded");

    pair_reopen(&p, true);
    assert_null(one_op(p.a, true, local, lkey, remote, rkey, 4096));
    assert_null(one_op(p.a, false, local + 4096, lkey, remote, rkey, 4096));
    assert_memory_equal(local, local + 4096, 4096);
    /* Past the region's end: remote access error, then the QP is in error
     * and what follows is flushed. */
    assert_string_equal(one_op(p.a, false, local, lkey, remote + 1, rkey, 4096),
                        "remote access error");
    assert_string_equal(one_op(p.a, false, local, lkey, remote, rkey, 64),
                        "Work Request Flushed Error");

    /* An rkey used as an lkey (and the other way round) is no key at all. */
    pair_reopen(&p, true);
    assert_string_equal(one_op(p.a, true, local, rkey, remote, rkey, 64), "local protection error");
    pair_reopen(&p, true);
    assert_string_equal(one_op(p.a, true, local, lkey, remote, lkey, 64), "remote access error");

    /* The send queue holds send_depth (8) requests; the op that does not fit
     * is refused whole, before anything is posted. */
    pair_reopen(&p, true);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(cr_xfer_verbs_post(p.a, true, &l, 1, (uintptr_t)remote, &rkey, 64, 1, &n),
                         CR_OK);
    }
    assert_int_equal(cr_xfer_verbs_post(p.a, true, &l, 1, (uintptr_t)remote, &rkey, 64, 1, &n),
                     CR_ERR_AGAIN);
    assert_int_equal(reap(p.a, 8, NULL), 0);
    cr_xfer_verbs_deregister(ml);
    cr_xfer_verbs_deregister(mr);
    pair_close(&p);

    /* Unmapped memory cannot be registered (it could not be pinned). */
    void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(gone != MAP_FAILED);
    munmap(gone, 8192);
    struct cr_xfer_verbs_device *dev;
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, -1, &dev, why, sizeof(why)), CR_OK);
    struct ibv_mr *never;
    assert_int_equal(cr_xfer_verbs_register(dev, gone, 8192, &never, &lkey, &rkey, why, 200),
                     CR_ERR_IO);
    assert_non_null(strstr(why, "ibv_reg_mr of 8192 bytes on loopback0 port 1 failed: Bad address"));
    cr_xfer_verbs_device_close(dev);
    free(local);
    free(remote);
    struct loopback_ibverbs_counts c = loopback_ibverbs_counts();
    assert_int_equal(c.mrs + c.qps + c.cqs + c.pds + c.contexts, 0);
}

/* Two contexts on loopback0, routing by GID index ga and gb (-1: picked),
 * a 1-QP set on each connected to the other; returns the reason a 4 KiB
 * WRITE from a to b completed with (NULL: it succeeded). */
static const char *gid_pair_write(int ga, int gb) {
    char why[200];
    struct cr_xfer_verbs_device *da, *db;
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, ga, &da, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, gb, &db, why, sizeof(why)), CR_OK);
    struct pair p = {0};
    assert_int_equal(cr_xfer_verbs_open(&da, 1, 1, 8, &p.a, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_open(&db, 1, 1, 8, &p.b, why, sizeof(why)), CR_OK);
    pair_connect(&p);
    struct cr_xfer_verbs *a = p.a, *b = p.b;
    static uint8_t local[4096], remote[4096];
    struct ibv_mr *ml, *mr;
    uint32_t lkey, rkey, unused;
    assert_int_equal(cr_xfer_verbs_register(da, local, 4096, &ml, &lkey, &unused, why, 200), CR_OK);
    assert_int_equal(cr_xfer_verbs_register(db, remote, 4096, &mr, &unused, &rkey, why, 200), CR_OK);
    const char *reason = one_op(a, true, local, lkey, remote, rkey, 4096);
    cr_xfer_verbs_deregister(ml);
    cr_xfer_verbs_deregister(mr);
    cr_xfer_verbs_close(a);
    cr_xfer_verbs_close(b);
    cr_xfer_verbs_device_close(da);
    cr_xfer_verbs_device_close(db);
    return reason;
}

/* The GID a device routes by: picked by type from the port's table (RoCE v2
 * IPv4-mapped first; empty entries skipped), or the index asked for, which
 * must be a live entry; RoCE v1 and v2 ends never meet. */
static void test_gid_choice(void **state) {
    (void)state;
    char why[200];
    struct cr_xfer_verbs_device *dev;
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, -1, &dev, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_device_gid_index(dev), 3); /* the ConnectX layout's v2 IPv4 */
    struct cr_xfer_verbs *v;
    assert_int_equal(cr_xfer_verbs_open(&dev, 1, 1, 8, &v, why, sizeof(why)), CR_OK);
    struct cr_xfer_verbs_hello h;
    cr_xfer_verbs_local_hello(v, &h);
    const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    assert_memory_equal(h.devices[0].gid, mapped, 16);
    cr_xfer_verbs_close(v);
    cr_xfer_verbs_device_close(dev);
    /* Both ends v2 (one link-local, asked for; one picked): they meet. */
    assert_null(gid_pair_write(1, -1));
    assert_null(gid_pair_write(3, 3));
    /* A v1 end and a v2 end: connected, but no packet arrives. */
    assert_string_equal(gid_pair_write(2, -1), "transport retry counter exceeded");
    /* An index past the table, or an empty entry, is refused by name. */
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, 9, &dev, why, sizeof(why)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(why, "GID index 9 of loopback0 port 1 is not a live entry (its table "
                                "has 4"));
    /* Another layout: the IPv4 entries moved, an empty entry between. */
    struct ibv_gid_entry table[6] = {0};
    const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 7, 9};
    for (uint32_t i = 0; i < 6; i++) {
        table[i] = (struct ibv_gid_entry){.gid_index = i, .port_num = 1,
                                          .gid_type = i % 2 ? IBV_GID_TYPE_ROCE_V2
                                                            : IBV_GID_TYPE_ROCE_V1};
        if (i == 2) continue; /* empty */
        if (i >= 3) memcpy(table[i].gid.raw, v4, 16);
        else table[i].gid.raw[0] = 0xfe, table[i].gid.raw[1] = 0x80, table[i].gid.raw[15] = 1;
    }
    table[3].gid_type = IBV_GID_TYPE_ROCE_V1; /* 3 v1, 4 v1, 5 v2 */
    table[4].gid_type = IBV_GID_TYPE_ROCE_V1;
    loopback_ibverbs_set_gids(0, table, 6);
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, -1, &dev, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_device_gid_index(dev), 5);
    cr_xfer_verbs_device_close(dev);
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, 2, &dev, why, sizeof(why)),
                     CR_ERR_INVALID_PARAMS);
    loopback_ibverbs_set_devices(1); /* the default table again */
    struct loopback_ibverbs_counts c = loopback_ibverbs_counts();
    assert_int_equal(c.mrs + c.qps + c.cqs + c.pds + c.contexts, 0);
}

/* ---- server and client wired: the transfer layer over verbs ------------ */

/* A registered buffer of the client. */
struct buffer {
    uint8_t *bytes;
    size_t len;
};

static struct buffer registered(struct fixture *f, size_t len) {
    struct buffer b = {.bytes = malloc(len), .len = len};
    assert_non_null(b.bytes);
    assert_int_equal(cr_xfer_client_register(f->cli, b.bytes, len), CR_OK);
    return b;
}

static void release(struct fixture *f, struct buffer *b) {
    assert_int_equal(cr_xfer_client_unregister(f->cli, b->bytes), CR_OK);
    free(b->bytes);
}

static void test_protocol_is_rdma_with_a_device(void **state) {
    struct fixture *f = *state;
    assert_string_equal(cr_xfer_server_protocol(f->srv), "rdma");
}

/* WRITE then READ of several sizes, 4 MiB and more striped over the 4 QPs;
 * every byte compared with the server's memory; no data request went by tcp. */
static void test_round_trips_over_verbs(void **state) {
    struct fixture *f = *state;
    const size_t sizes[] = {1, 4095, 4096, 65536 + 3, MIB, 4 * MIB, 16 * MIB + 1};
    struct buffer src = registered(f, 16 * MIB + 1), dst = registered(f, 16 * MIB + 1);
    uint64_t expect_wr = 0;
    struct loopback_ibverbs_counts before = loopback_ibverbs_counts();
    uint64_t offset = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = sizes[i];
        fill_random(src.bytes, len, 100 + i);
        memset(dst.bytes, 0x5a, len + (len < dst.len ? 1 : 0));
        assert_int_equal(
            cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, offset), src.bytes, len), CR_OK);
        assert_memory_equal(src.bytes, (uint8_t *)f->seg.base + offset, len);
        assert_int_equal(
            cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, offset), dst.bytes, len), CR_OK);
        assert_memory_equal(src.bytes, dst.bytes, len);
        if (len < dst.len) assert_int_equal(dst.bytes[len], 0x5a);
        expect_wr += len >= 4 * MIB ? 4 : 1; /* one stripe per QP at 4 MiB and more */
        offset += (len + 4095) / 4096 * 4096;
    }
    struct loopback_ibverbs_counts after = loopback_ibverbs_counts();
    assert_int_equal(after.writes - before.writes, expect_wr);
    assert_int_equal(after.reads - before.reads, expect_wr);
    assert_int_equal(after.errors, before.errors);
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "verbs");
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.requests_read + s.requests_written, 0);
    assert_int_equal(s.verbs_hellos, 1);
    assert_int_equal(s.verbs_keys, 1); /* asked once, then cached */
    release(f, &src);
    release(f, &dst);
}

/* Many ops in flight, each a gather list over two registered buffers. */
static void test_many_in_flight_scatter_gather(void **state) {
    struct fixture *f = *state;
    enum { OPS = 300, PIECE = 3000 };
    struct buffer a = registered(f, OPS * PIECE), b = registered(f, OPS * PIECE);
    fill_random(a.bytes, a.len, 11);
    fill_random(b.bytes, b.len, 12);
    struct counter done = {0};
    struct iovec iov[OPS][2];
    for (uint32_t i = 0; i < OPS; i++) {
        iov[i][0] = (struct iovec){a.bytes + i * PIECE, PIECE};
        iov[i][1] = (struct iovec){b.bytes + i * PIECE, PIECE};
        struct cr_xfer_op op = {.opcode = CR_XFER_WRITE, .endpoint = f->endpoint,
                                .segment = "seg0", .remote_addr = seg_addr(f, i * 2 * PIECE),
                                .iov = iov[i], .iov_count = 2, .done = count_done, .arg = &done};
        int rc;
        while ((rc = cr_xfer_submit(f->cli, &op)) == CR_ERR_AGAIN) cr_xfer_client_poll(f->cli, 0);
        assert_int_equal(rc, CR_OK);
    }
    while (done.done < OPS) cr_xfer_client_poll(f->cli, 100);
    assert_int_equal(done.failed, 0);
    for (uint32_t i = 0; i < OPS; i++) {
        const uint8_t *at = (const uint8_t *)f->seg.base + i * 2 * PIECE;
        assert_memory_equal(at, a.bytes + i * PIECE, PIECE);
        assert_memory_equal(at + PIECE, b.bytes + i * PIECE, PIECE);
    }
    assert_true(loopback_ibverbs_counts().max_sge_seen >= 2);
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.requests_written, 0);
    release(f, &a);
    release(f, &b);
}

/* Memory that was never registered cannot be an RDMA target: tcp moves it. */
static void test_unregistered_memory_goes_by_tcp(void **state) {
    struct fixture *f = *state;
    struct buffer reg = registered(f, 4096); /* the peer is reached by verbs */
    uint64_t bytes = loopback_ibverbs_counts().bytes;
    round_trip(f, 0, 70000, 5);              /* malloc'd, not registered */
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.requests_written, 1);
    assert_int_equal(s.requests_read, 1);
    assert_int_equal(loopback_ibverbs_counts().bytes, bytes);
    release(f, &reg);
}

/* KEY for a segment the server does not have: the op fails with tcp's
 * refusal, naming the peer and the segment. */
static void test_unknown_segment_key_refused(void **state) {
    struct fixture *f = *state;
    struct buffer b = registered(f, 4096);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg9", seg_addr(f, 0), b.bytes, 4096),
                     CR_ERR_SEGMENT_NOT_FOUND);
    const char *why = cr_xfer_client_last_error(f->cli);
    assert_non_null(strstr(why, f->endpoint));
    assert_non_null(strstr(why, "segment 'seg9'"));
    assert_non_null(strstr(why, "no such segment"));
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.verbs_keys_missing, 1);
    assert_int_equal(s.verbs_keys, 0);
    release(f, &b);
}

/* The server unregisters a segment whose key the client holds: the rkey
 * dies with the region, the op fails with the remote access error and a
 * message naming peer, op and segment; the client says hello again, asks
 * for the key, is told there is none, and tcp refuses the next op.  The
 * segment registered again works over verbs again. */
static void test_unregistered_segment_key_refused(void **state) {
    struct fixture *f = *state;
    struct buffer b = registered(f, 8192);
    fill_random(b.bytes, 8192, 3);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 8192),
                     CR_OK);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "seg0"), CR_OK);
    server_start(f);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 4096),
                     CR_ERR_IO);
    const char *why = cr_xfer_client_last_error(f->cli);
    assert_non_null(strstr(why, f->endpoint));
    assert_non_null(strstr(why, "RDMA READ of segment 'seg0'"));
    assert_non_null(strstr(why, "remote access error (the segment was unregistered"));
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 4096),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "no such segment"));
    server_stop(f);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    server_start(f);
    uint64_t reads = loopback_ibverbs_counts().reads;
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 8192),
                     CR_OK);
    assert_memory_equal(b.bytes, f->seg.base, 8192);
    assert_int_equal(loopback_ibverbs_counts().reads, reads + 1);
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.verbs_hellos, 2); /* the first QPs failed: a second hello */
    release(f, &b);
}

/* A range outside the segment never reaches the QPs: tcp refuses it. */
static void test_out_of_bounds_refused(void **state) {
    struct fixture *f = *state;
    struct buffer b = registered(f, 8192);
    uint64_t errors = loopback_ibverbs_counts().errors;
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, SEGMENT_BYTES - 4096),
                                  b.bytes, 8192),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "out of bounds"));
    assert_int_equal(loopback_ibverbs_counts().errors, errors);
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.refused_out_of_bounds, 1);
    release(f, &b);
}

/* A client destroyed with verbs ops in flight: their callbacks run with
 * CR_ERR_SHUTDOWN and everything on the device is released. */
static void test_destroy_with_ops_in_flight(void **state) {
    struct fixture *f = *state;
    struct buffer b = registered(f, MIB);
    struct counter done = {0};
    struct iovec iov = {b.bytes, MIB};
    for (int i = 0; i < 8; i++) {
        struct cr_xfer_op op = {.opcode = CR_XFER_READ, .endpoint = f->endpoint,
                                .segment = "seg0", .remote_addr = seg_addr(f, 0), .iov = &iov,
                                .iov_count = 1, .done = count_done, .arg = &done};
        assert_int_equal(cr_xfer_submit(f->cli, &op), CR_OK);
    }
    assert_int_equal(done.done, 0);
    cr_xfer_client_destroy(f->cli);
    f->cli = NULL;
    assert_int_equal(done.done, 8);
    assert_int_equal(done.failed, 8);
    free(b.bytes); /* the client's regions went with it */
}

/* Writes 64 KiB from a registered buffer, which must go by tcp (one WRITE
 * served); returns the server's stats. */
static struct cr_xfer_server_stats write_registered_by_tcp(struct fixture *f, uint64_t seed) {
    struct buffer b = registered(f, 65536);
    fill_random(b.bytes, b.len, seed);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, b.len),
                     CR_OK);
    assert_memory_equal(b.bytes, f->seg.base, b.len);
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "tcp");
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.requests_written, 1);
    release(f, &b);
    return s;
}

/* A server without a device answers the hello with "no verbs here": the
 * client logs why and moves everything by tcp. */
static void test_server_without_device_tcp_fallback(void **state) {
    (void)state;
    loopback_ibverbs_set_devices(0);
    void *st = NULL;
    setup_with(&st, false);
    struct fixture *f = st;
    loopback_ibverbs_set_devices(1);
    uint64_t bytes = loopback_ibverbs_counts().bytes;
    assert_string_equal(cr_xfer_server_protocol(f->srv), "tcp");
    cr_xfer_client_destroy(f->cli); /* a client made on a host with a device */
    assert_int_equal(cr_xfer_client_create(&client_config, &f->cli), CR_OK);
    struct cr_xfer_server_stats s = write_registered_by_tcp(f, 9);
    assert_int_equal(loopback_ibverbs_counts().bytes, bytes);
    assert_int_equal(s.verbs_hellos_refused, 1);
    teardown_checked(&st);
}

/* A client without a device does not say hello at all. */
static void test_client_without_device_uses_tcp(void **state) {
    struct fixture *f = *state;
    cr_xfer_client_destroy(f->cli);
    loopback_ibverbs_set_devices(0);
    assert_int_equal(cr_xfer_client_create(&client_config, &f->cli), CR_OK);
    loopback_ibverbs_set_devices(1);
    uint8_t buf[4096];
    assert_int_equal(cr_xfer_client_register(f->cli, buf, sizeof(buf)), CR_OK);
    round_trip(f, 0, 4096, 1);
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "tcp");
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.verbs_hellos + s.verbs_hellos_refused, 0);
}

/* verbs_disabled (crescentd --data-no-verbs, crescent-store --no-verbs) on
 * a host that has a device: a disabled server opens none and publishes tcp;
 * a disabled client never says hello; both move every byte by tcp. */
static void test_verbs_disabled_by_config(void **state) {
    struct fixture *f = *state;
    struct cr_xfer_client_config off = client_config;
    off.verbs_disabled = true;
    cr_xfer_client_destroy(f->cli);
    assert_int_equal(cr_xfer_client_create(&off, &f->cli), CR_OK);
    uint64_t bytes = loopback_ibverbs_counts().bytes;
    struct cr_xfer_server_stats s = write_registered_by_tcp(f, 21);
    assert_int_equal(loopback_ibverbs_counts().bytes, bytes);
    assert_int_equal(s.verbs_hellos + s.verbs_hellos_refused, 0);

    /* A disabled server: no context opened, protocol tcp, a verbs client's
     * hello answered "no verbs here". */
    struct cr_xfer_server_config scfg = {.verbs_disabled = true};
    struct cr_xfer_server *srv;
    uint32_t contexts = loopback_ibverbs_counts().contexts;
    assert_int_equal(cr_xfer_server_create(&scfg, &srv), CR_OK);
    assert_string_equal(cr_xfer_server_protocol(srv), "tcp");
    assert_int_equal(loopback_ibverbs_counts().contexts, contexts);
    cr_xfer_server_destroy(srv);
}

/* Over verbs: the region stays while the op runs (its pages pinned), goes
 * with the unregister. */
static void test_unregister_waits_for_ops(void **state) {
    struct fixture *f = *state;
    round_trip(f, 0, 64, 1); /* the peer connected first: its QPs are not counted below */
    uint32_t mrs = loopback_ibverbs_counts().mrs;
    uint64_t reads = loopback_ibverbs_counts().reads;
    check_unregister_waits_for_ops(f);
    assert_int_equal(loopback_ibverbs_counts().reads, reads + 1); /* the op went by verbs */
    assert_int_equal(loopback_ibverbs_counts().mrs, mrs);
}

/* The config's GID index reaches the device: a client asking for an entry
 * that does not exist cannot use verbs and says why; tcp moves its bytes. */
static void test_config_gid_index(void **state) {
    struct fixture *f = *state;
    struct cr_xfer_client_config cfg = client_config;
    cfg.rdma_gid_index_set = true;
    cfg.rdma_gid_index = 1; /* v2 link-local: meets the server's picked v2 */
    cr_xfer_client_destroy(f->cli);
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    struct buffer b = registered(f, 8192);
    fill_random(b.bytes, b.len, 5);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, b.len),
                     CR_OK);
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "verbs");
    release(f, &b);
    cr_xfer_client_destroy(f->cli);
    cfg.rdma_gid_index = 9;
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    struct cr_xfer_server_stats before = server_stats(f);
    struct cr_xfer_server_stats s = write_registered_by_tcp(f, 6);
    assert_int_equal(s.verbs_hellos, before.verbs_hellos); /* no hello: no device here */
}

/* ---- several devices ---------------------------------------------------- */

/* Which devices are opened: every active one by default, exactly the named
 * ones (in that order) when named, never a port that is down. */
static void test_devices_opened(void **state) {
    (void)state;
    loopback_ibverbs_set_devices(3);
    struct cr_xfer_verbs_device *devs[CR_XFER_VERBS_DEVICES_MAX];
    char why[200];
    assert_int_equal(cr_xfer_verbs_devices_open(NULL, -1, devs, why, sizeof(why)), 3);
    assert_string_equal(cr_xfer_verbs_device_name(devs[2]), "loopback2 port 1");
    cr_xfer_verbs_devices_close(devs, 3);
    assert_int_equal(cr_xfer_verbs_devices_open("loopback2,loopback0", -1, devs, why, sizeof(why)), 2);
    assert_string_equal(cr_xfer_verbs_device_name(devs[0]), "loopback2 port 1");
    assert_string_equal(cr_xfer_verbs_device_name(devs[1]), "loopback0 port 1");
    cr_xfer_verbs_devices_close(devs, 2);
    assert_int_equal(cr_xfer_verbs_devices_open("loopback0,mlx5_9", -1, devs, why, sizeof(why)), 0);
    assert_string_equal(why, "RDMA device 'mlx5_9' not found (this host has: loopback0, "
                             "loopback1, loopback2)");
    loopback_ibverbs_set_port_state(1, IBV_PORT_DOWN);
    assert_int_equal(cr_xfer_verbs_devices_open("", -1, devs, why, sizeof(why)), 2); /* 0 and 2 */
    assert_string_equal(cr_xfer_verbs_device_name(devs[1]), "loopback2 port 1");
    cr_xfer_verbs_devices_close(devs, 2);
    assert_int_equal(cr_xfer_verbs_devices_open("loopback1", -1, devs, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "RDMA device 'loopback1' unusable: loopback1 port 1 is not active "
                                "(PORT_DOWN)"));
    loopback_ibverbs_set_devices(1);
    struct loopback_ibverbs_counts c = loopback_ibverbs_counts();
    assert_int_equal(c.pds + c.contexts, 0);
}

/* Objects of 4 MiB and more are striped over the QPs of both devices, small
 * ones go round robin over all QPs; every byte compared; the segment and
 * the buffers are registered on each device (an rkey per server device). */
static void test_two_devices_carry_the_stripes(void **state) {
    struct fixture *f = *state;
    struct buffer src = registered(f, 16 * MIB + 1), dst = registered(f, 16 * MIB + 1);
    assert_int_equal(loopback_ibverbs_counts().mrs, 2 * 3); /* segment + 2 buffers, 2 devices */
    struct loopback_ibverbs_counts before = loopback_ibverbs_counts();
    fill_random(src.bytes, src.len, 77);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), src.bytes, src.len),
                     CR_OK);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), dst.bytes, dst.len),
                     CR_OK);
    assert_memory_equal(src.bytes, f->seg.base, src.len);
    assert_memory_equal(src.bytes, dst.bytes, src.len);
    struct loopback_ibverbs_counts after = loopback_ibverbs_counts();
    for (int d = 0; d < 2; d++) { /* QPs 0, 2 on loopback0; 1, 3 on loopback1 */
        assert_int_equal(after.device_wrs[d] - before.device_wrs[d], 2 + 2);
        assert_true(after.device_bytes[d] - before.device_bytes[d] >= 16 * MIB - 4096);
    }
    for (int i = 0; i < 4; i++) /* small ops: one QP each, round robin */
        assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), dst.bytes, 4096),
                         CR_OK);
    struct loopback_ibverbs_counts small = loopback_ibverbs_counts();
    for (int d = 0; d < 2; d++) assert_int_equal(small.device_wrs[d] - after.device_wrs[d], 2);
    assert_int_equal(server_stats(f).requests_read + server_stats(f).requests_written, 0);
    release(f, &src);
    release(f, &dst);
}

/* A client on one device (named) and a server on two: QP i meets the
 * server's device i % 2, under that device's rkey. */
static void test_one_device_to_two(void **state) {
    struct fixture *f = *state;
    struct cr_xfer_client_config cfg = client_config;
    cfg.rdma_devices = "loopback1";
    cr_xfer_client_destroy(f->cli);
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    struct buffer b = registered(f, 8 * MIB);
    struct loopback_ibverbs_counts before = loopback_ibverbs_counts();
    fill_random(b.bytes, b.len, 78);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, MIB), b.bytes, b.len),
                     CR_OK);
    assert_memory_equal(b.bytes, (uint8_t *)f->seg.base + MIB, b.len);
    struct loopback_ibverbs_counts after = loopback_ibverbs_counts();
    assert_int_equal(after.device_wrs[1] - before.device_wrs[1], 4); /* all on the client's one */
    assert_int_equal(after.device_wrs[0], before.device_wrs[0]);
    assert_int_equal(after.errors, before.errors);
    release(f, &b);
}

/* One device's link fails: the op in flight on its QPs fails with an error
 * naming that device; later ops go on the other device's QPs alone and
 * their bytes arrive; when that device fails too, the op fails naming it
 * and the peer is moved by tcp (no new hello for a while). */
static void test_device_failure_falls_back(void **state) {
    struct fixture *f = *state;
    struct buffer b = registered(f, 16 * MIB);
    fill_random(b.bytes, b.len, 79);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, b.len),
                     CR_OK);
    loopback_ibverbs_fail_device(1);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, b.len),
                     CR_ERR_IO);
    const char *why = cr_xfer_client_last_error(f->cli);
    assert_non_null(strstr(why, "RDMA WRITE of segment 'seg0'"));
    assert_non_null(strstr(why, "on loopback1 port 1 failed: transport retry counter exceeded"));
    struct loopback_ibverbs_counts before = loopback_ibverbs_counts();
    fill_random(b.bytes, b.len, 80);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, b.len),
                     CR_OK);
    assert_memory_equal(b.bytes, f->seg.base, b.len);
    struct loopback_ibverbs_counts after = loopback_ibverbs_counts();
    assert_int_equal(after.device_wrs[0] - before.device_wrs[0], 2); /* QPs 0 and 2 */
    assert_int_equal(after.device_wrs[1], before.device_wrs[1]);
    assert_int_equal(after.errors, before.errors);
    loopback_ibverbs_fail_device(0);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 4096),
                     CR_ERR_IO);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli),
                           "on loopback0 port 1 failed: transport retry counter exceeded"));
    fill_random(b.bytes, b.len, 81); /* no QP left: tcp, no new hello */
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0), b.bytes, 65536),
                     CR_OK);
    assert_memory_equal(b.bytes, f->seg.base, 65536);
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.requests_written, 1);
    assert_int_equal(s.verbs_hellos, 1);
    release(f, &b);
}

/* ---- malformed setup frames -------------------------------------------- */

static int raw_connect(struct fixture *f) {
    struct sockaddr_storage addr;
    socklen_t len;
    assert_int_equal(cr_xfer_endpoint_parse(f->endpoint, &addr, &len), CR_OK);
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, len), 0);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads until the server closes; returns the bytes it sent first. */
static size_t read_until_closed(int fd, uint8_t *buf, size_t cap) {
    size_t have = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + have, cap - have, 0);
        assert_true(n >= 0); /* closed (0), never a timeout */
        if (n == 0) return have;
        have += (size_t)n;
        assert_true(have < cap);
    }
}

static size_t hello_frame(uint8_t *out, uint32_t id) {
    struct cr_xfer_verbs_hello h = {.qp_count = 2, .device_count = 1,
                                     .devices = {{.port = 1, .mtu = 3}}};
    for (int i = 0; i < 2; i++) {
        h.qpn[i] = 0x77000 + (uint32_t)i;
        h.psn[i] = 5;
    }
    uint8_t hello[CR_XFER_VERBS_HELLO_BYTES];
    cr_xfer_verbs_hello_encode(&h, hello);
    struct cr_xfer_request req = {.op = CR_XFER_FRAME_HELLO, .request_id = id, .hello = hello};
    return cr_xfer_request_encode(&req, out);
}

static void test_malformed_setup_frames_refused(void **state) {
    struct fixture *f = *state;
    uint8_t frame[CR_XFER_REQUEST_MAX_BYTES], buf[4096];
    /* A hello that does not decode (no QPs): closed at once, nothing answered. */
    size_t len = hello_frame(frame, 1);
    frame[CR_XFER_REQUEST_HEADER_BYTES + 4] = 0;
    int fd = raw_connect(f);
    assert_int_equal(send(fd, frame, len, 0), (ssize_t)len);
    assert_int_equal(read_until_closed(fd, buf, sizeof(buf)), 0);
    close(fd);
    /* A KEY with an address: closed. */
    struct cr_xfer_request key = {.op = CR_XFER_FRAME_KEY, .name_len = 4, .request_id = 2,
                                  .name = "seg0"};
    len = cr_xfer_request_encode(&key, frame);
    frame[8] = 1;
    fd = raw_connect(f);
    assert_int_equal(send(fd, frame, len, 0), (ssize_t)len);
    assert_int_equal(read_until_closed(fd, buf, sizeof(buf)), 0);
    close(fd);
    /* A good hello is answered with the server's; a second one on the same
     * connection is refused and closes it, QPs and all. */
    fd = raw_connect(f);
    len = hello_frame(frame, 3);
    assert_int_equal(send(fd, frame, len, 0), (ssize_t)len);
    uint8_t answer[CR_XFER_RESPONSE_BYTES + CR_XFER_VERBS_HELLO_BYTES];
    assert_int_equal(recv(fd, answer, sizeof(answer), MSG_WAITALL), (ssize_t)sizeof(answer));
    struct cr_xfer_response resp;
    assert_int_equal(cr_xfer_response_parse(answer, &resp), CR_OK);
    assert_int_equal(resp.status, CR_OK);
    assert_int_equal(resp.length, CR_XFER_VERBS_HELLO_BYTES);
    struct cr_xfer_verbs_hello theirs;
    assert_int_equal(cr_xfer_verbs_hello_decode(answer + CR_XFER_RESPONSE_BYTES,
                                                CR_XFER_VERBS_HELLO_BYTES, &theirs),
                     CR_OK);
    assert_int_equal(theirs.qp_count, 2);
    assert_int_equal(loopback_ibverbs_counts().qps, 2);
    len = hello_frame(frame, 4);
    assert_int_equal(send(fd, frame, len, 0), (ssize_t)len);
    size_t got = read_until_closed(fd, buf, sizeof(buf));
    assert_int_equal(got, CR_XFER_RESPONSE_BYTES);
    assert_int_equal(cr_xfer_response_parse(buf, &resp), CR_OK);
    assert_int_equal(resp.status, CR_ERR_PROTOCOL);
    close(fd);
    struct cr_xfer_server_stats s = server_stats(f);
    assert_int_equal(s.refused_malformed, 3);
    assert_int_equal(s.verbs_hellos, 1);
    assert_int_equal(loopback_ibverbs_counts().qps, 0); /* closed with the connection */
    /* The server still serves everyone else. */
    round_trip(f, 0, 4096, 2);
}

/* Client buffer registration: errors say why. */
static void test_client_register_errors(void **state) {
    struct fixture *f = *state;
    void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(gone != MAP_FAILED);
    munmap(gone, 8192);
    assert_int_equal(cr_xfer_client_register(f->cli, gone, 8192), CR_ERR_IO);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "ibv_reg_mr"));
    uint8_t small[64];
    assert_int_equal(cr_xfer_client_unregister(f->cli, small), CR_ERR_INVALID_PARAMS);
    for (int i = 0; i < 64; i++)
        assert_int_equal(cr_xfer_client_register(f->cli, small + i, 1), CR_OK);
    assert_int_equal(cr_xfer_client_register(f->cli, small, 64), CR_ERR_NOMEM);
    assert_int_equal(loopback_ibverbs_counts().mrs, 64 + 1); /* + the server's segment */
    for (int i = 0; i < 64; i++) assert_int_equal(cr_xfer_client_unregister(f->cli, small + i), CR_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_on_the_double),
        cmocka_unit_test(test_device_layer_striped_round_trip),
        cmocka_unit_test(test_device_layer_refusals),
        cmocka_unit_test(test_gid_choice),
        cmocka_unit_test_setup_teardown(test_protocol_is_rdma_with_a_device, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_round_trips_over_verbs, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_many_in_flight_scatter_gather, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_unregistered_memory_goes_by_tcp, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_unknown_segment_key_refused, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_unregistered_segment_key_refused, setup,
                                        teardown_checked),
        cmocka_unit_test_setup_teardown(test_out_of_bounds_refused, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_destroy_with_ops_in_flight, setup, teardown_checked),
        cmocka_unit_test(test_server_without_device_tcp_fallback),
        cmocka_unit_test_setup_teardown(test_client_without_device_uses_tcp, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_verbs_disabled_by_config, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_unregister_waits_for_ops, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_config_gid_index, setup, teardown_checked),
        cmocka_unit_test(test_devices_opened),
        cmocka_unit_test_setup_teardown(test_two_devices_carry_the_stripes, setup_two_devices,
                                        teardown_checked),
        cmocka_unit_test_setup_teardown(test_one_device_to_two, setup_two_devices, teardown_checked),
        cmocka_unit_test_setup_teardown(test_device_failure_falls_back, setup_two_devices,
                                        teardown_checked),
        cmocka_unit_test_setup_teardown(test_malformed_setup_frames_refused, setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_client_register_errors, setup, teardown_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
