/* Unit tests for the verbs transport's pure parts (src/rdma/xfer_verbs_plan.c):
 * the setup messages and their HELLO/KEY frames, the striping plan and the
 * transport choice; and a device test of the libibverbs side (two QP sets on
 * one device, RC QPs connected to each other, RDMA WRITE then READ, 16 MiB
 * striped) that reports itself skipped where there is no RDMA device, never
 * passed.  The wiring into server and client runs against a test double in
 * test_xfer_verbs_loopback.c; that is not a device test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crescent/error.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_verbs.h"

/* Four QPs over two devices (QP i on device i % 2). */
static struct cr_xfer_verbs_hello sample_hello(void) {
    struct cr_xfer_verbs_hello h = {.qp_count = 4, .device_count = 2,
                                    .devices = {{.port = 1, .mtu = 5, .lid = 0x1234},
                                                {.port = 2, .mtu = 3, .lid = 0}}};
    for (int i = 0; i < 16; i++) h.devices[0].gid[i] = (uint8_t)(0xf0 + i);
    for (int i = 0; i < 16; i++) h.devices[1].gid[i] = (uint8_t)(0x10 + i);
    for (uint32_t i = 0; i < 4; i++) {
        h.qpn[i] = 0x100 + i;
        h.psn[i] = 0xabcde0 + i;
    }
    return h;
}

static void test_hello_round_trip(void **state) {
    (void)state;
    struct cr_xfer_verbs_hello h = sample_hello(), back;
    uint8_t buf[CR_XFER_VERBS_HELLO_BYTES];
    assert_int_equal(cr_xfer_verbs_hello_encode(&h, buf), CR_XFER_VERBS_HELLO_BYTES);
    assert_int_equal(cr_xfer_verbs_hello_decode(buf, sizeof(buf), &back), CR_OK);
    assert_int_equal(back.qp_count, 4);
    assert_int_equal(back.device_count, 2);
    assert_int_equal(back.devices[0].lid, 0x1234);
    assert_int_equal(back.devices[1].port, 2);
    assert_int_equal(back.devices[1].mtu, 3);
    assert_int_equal(back.qpn[3], 0x103);
    assert_int_equal(back.psn[3], 0xabcde3);
    assert_memory_equal(back.devices[0].gid, h.devices[0].gid, 16);
    assert_memory_equal(back.devices[1].gid, h.devices[1].gid, 16);
    uint8_t again[CR_XFER_VERBS_HELLO_BYTES]; /* every field survived */
    cr_xfer_verbs_hello_encode(&back, again);
    assert_memory_equal(buf, again, sizeof(buf));
    assert_int_equal(cr_xfer_verbs_hello_decode(buf, sizeof(buf) - 1, &back), CR_ERR_PROTOCOL);
}

static void test_hello_refuses_malformed(void **state) {
    (void)state;
    struct cr_xfer_verbs_hello h = sample_hello(), out;
    uint8_t good[CR_XFER_VERBS_HELLO_BYTES];
    cr_xfer_verbs_hello_encode(&h, good);
    enum { DEV1 = 8 + 20, QPN = 8 + 4 * 20, PSN = QPN + 64 };
    struct { size_t at; uint8_t value; } cases[] = {
        {0, 0},   /* magic */
        {4, 0},   /* no QPs */
        {4, 17},  /* more QPs than the maximum */
        {4, 1},   /* fewer QPs than devices */
        {5, 0},   /* no devices */
        {5, 5},   /* more devices than the maximum */
        {6, 1},   /* reserved */
        {8, 0},   /* device 0: port 0 */
        {DEV1, 0},     /* device 1 (in use): port 0 */
        {DEV1 + 1, 0}, /* device 1: mtu below 256 */
        {DEV1 + 1, 6}, /* device 1: mtu above 4096 */
        {QPN + 3, 1},  /* QPN 0 wider than 24 bits */
        {PSN + 3, 1},  /* PSN 0 wider than 24 bits */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t bad[CR_XFER_VERBS_HELLO_BYTES];
        memcpy(bad, good, sizeof(bad));
        bad[cases[i].at] = cases[i].value;
        assert_int_equal(cr_xfer_verbs_hello_decode(bad, sizeof(bad), &out), CR_ERR_PROTOCOL);
    }
    uint8_t zero_qpn[CR_XFER_VERBS_HELLO_BYTES];
    memcpy(zero_qpn, good, sizeof(zero_qpn));
    memset(zero_qpn + 8 + 4 * 20, 0, 4); /* QP 0 of an offered QP */
    assert_int_equal(cr_xfer_verbs_hello_decode(zero_qpn, sizeof(zero_qpn), &out),
                     CR_ERR_PROTOCOL);
}

static void test_key_codec(void **state) {
    (void)state;
    struct cr_xfer_verbs_key key = {.device_count = 3, .rkey = {0xdeadbeef, 7, 0x40000009},
                                    .base = 0x7f0000000000, .size = 1 << 30};
    struct cr_xfer_verbs_key back;
    uint8_t buf[CR_XFER_VERBS_KEY_BYTES];
    assert_int_equal(cr_xfer_verbs_key_encode(&key, buf), CR_XFER_VERBS_KEY_BYTES);
    assert_int_equal(cr_xfer_verbs_key_decode(buf, sizeof(buf), &back), CR_OK);
    assert_int_equal(back.device_count, 3);
    assert_memory_equal(back.rkey, key.rkey, sizeof(key.rkey));
    assert_int_equal(back.base, key.base);
    assert_int_equal(back.size, key.size);
    assert_int_equal(cr_xfer_verbs_key_decode(buf, sizeof(buf) - 1, &back), CR_ERR_PROTOCOL);
    const size_t bad_at[][2] = {{4, 0}, {4, 5}, {5, 1}, {7, 1}}; /* no devices, too many, reserved */
    for (size_t i = 0; i < sizeof(bad_at) / sizeof(bad_at[0]); i++) {
        uint8_t bad[CR_XFER_VERBS_KEY_BYTES];
        memcpy(bad, buf, sizeof(bad));
        bad[bad_at[i][0]] = (uint8_t)bad_at[i][1];
        assert_int_equal(cr_xfer_verbs_key_decode(bad, sizeof(bad), &back), CR_ERR_PROTOCOL);
    }
    key.size = 0;
    cr_xfer_verbs_key_encode(&key, buf);
    assert_int_equal(cr_xfer_verbs_key_decode(buf, sizeof(buf), &back), CR_ERR_PROTOCOL);
    key.size = 16;
    key.base = UINT64_MAX - 4;
    cr_xfer_verbs_key_encode(&key, buf);
    assert_int_equal(cr_xfer_verbs_key_decode(buf, sizeof(buf), &back), CR_ERR_PROTOCOL);
}

/* The HELLO and KEY requests of the tcp frame carry the setup. */
static void test_frame_hello_and_key(void **state) {
    (void)state;
    struct cr_xfer_verbs_hello h = sample_hello();
    uint8_t hello[CR_XFER_VERBS_HELLO_BYTES];
    cr_xfer_verbs_hello_encode(&h, hello);
    struct cr_xfer_request in = {.op = CR_XFER_FRAME_HELLO, .request_id = 5, .hello = hello};
    uint8_t buf[CR_XFER_REQUEST_MAX_BYTES];
    size_t len = cr_xfer_request_encode(&in, buf);
    assert_int_equal(len, CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES);
    struct cr_xfer_request out;
    size_t used = 0;
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(cr_xfer_request_parse(buf, cut, 1u << 30, &out, &used), CR_ERR_AGAIN);
    assert_int_equal(cr_xfer_request_parse(buf, len, 1u << 30, &out, &used), CR_OK);
    assert_int_equal(used, len);
    assert_int_equal(out.op, CR_XFER_FRAME_HELLO);
    assert_int_equal(out.request_id, 5);
    assert_memory_equal(out.hello, hello, sizeof(hello));
    struct { size_t at; uint8_t value; } bad_hello[] = {
        {1, 4},   /* a name */
        {8, 1},   /* an address */
        {16, 1},  /* another length */
        {CR_XFER_REQUEST_HEADER_BYTES, 0},     /* the hello's magic */
        {CR_XFER_REQUEST_HEADER_BYTES + 4, 0}, /* no QPs */
        {CR_XFER_REQUEST_HEADER_BYTES + 5, 0}, /* no devices */
    };
    for (size_t i = 0; i < sizeof(bad_hello) / sizeof(bad_hello[0]); i++) {
        uint8_t bad[CR_XFER_REQUEST_MAX_BYTES];
        memcpy(bad, buf, len);
        bad[bad_hello[i].at] = bad_hello[i].value;
        assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
    }
    struct cr_xfer_request key = {.op = CR_XFER_FRAME_KEY, .name_len = 4, .request_id = 6,
                                  .name = "seg0"};
    len = cr_xfer_request_encode(&key, buf);
    assert_int_equal(cr_xfer_request_parse(buf, len, 1u << 30, &out, &used), CR_OK);
    assert_int_equal(out.op, CR_XFER_FRAME_KEY);
    assert_memory_equal(out.name, "seg0", 4);
    struct { size_t at; uint8_t value; } bad_key[] = {{1, 0}, {8, 1}, {16, 1}};
    for (size_t i = 0; i < sizeof(bad_key) / sizeof(bad_key[0]); i++) {
        uint8_t bad[CR_XFER_REQUEST_MAX_BYTES];
        memcpy(bad, buf, len);
        bad[bad_key[i].at] = bad_key[i].value;
        assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
    }
    buf[0] = 5; /* no op 5 */
    assert_int_equal(cr_xfer_request_parse(buf, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
}

/* Stripes cover [0, length) exactly, in order, on distinct QPs. */
static void check_plan(uint64_t length, uint32_t qps, uint32_t devices) {
    struct cr_xfer_stripe s[CR_XFER_VERBS_QPS_MAX];
    uint32_t next = 0;
    uint32_t n = cr_xfer_verbs_plan(length, qps, devices, &next, s, CR_XFER_VERBS_QPS_MAX);
    assert_true(n >= 1 && n <= qps);
    uint64_t offset = 0;
    uint32_t used = 0;
    for (uint32_t k = 0; k < n; k++) {
        assert_int_equal(s[k].offset, offset);
        assert_true(s[k].qp < qps);
        assert_false(used & (1u << s[k].qp));
        used |= 1u << s[k].qp;
        if (k + 1 < n) assert_int_equal(s[k].length % CR_XFER_VERBS_STRIPE_ALIGN_BYTES, 0);
        if (k > 0 && devices > 1) /* neighbours on different devices */
            assert_int_not_equal(s[k].qp % devices, s[k - 1].qp % devices);
        offset += s[k].length;
    }
    assert_int_equal(offset, length);
    if (length >= CR_XFER_VERBS_STRIPE_MIN_BYTES) assert_int_equal(n, qps);
}

static void test_plan_stripes_large_objects(void **state) {
    (void)state;
    const uint64_t mib = UINT64_C(1) << 20;
    check_plan(4 * mib, 4, 1);
    check_plan(4 * mib, 4, 2);
    check_plan(16 * mib + 1, 8, 2);
    check_plan(64 * mib - 4095, 16, 4);
    check_plan(4 * mib, 1, 1);
    uint64_t x = 42;
    for (int i = 0; i < 2000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint32_t qps = 1 + (uint32_t)(x >> 60);
        uint32_t devices = 1 + (uint32_t)((x >> 40) % qps);
        check_plan((x >> 20) % (80 * mib), qps, devices);
    }
}

static void test_plan_small_objects_round_robin(void **state) {
    (void)state;
    struct cr_xfer_stripe s[CR_XFER_VERBS_QPS_MAX];
    uint32_t next = 0;
    for (uint32_t i = 0; i < 10; i++) {
        uint32_t n = cr_xfer_verbs_plan(4096, 4, 2, &next, s, CR_XFER_VERBS_QPS_MAX);
        assert_int_equal(n, 1);
        assert_int_equal(s[0].qp, i % 4);
        assert_int_equal(s[0].length, 4096);
    }
    assert_int_equal(cr_xfer_verbs_plan(CR_XFER_VERBS_STRIPE_MIN_BYTES - 1, 4, 1, &next, s, 16), 1);
    assert_int_equal(cr_xfer_verbs_plan(0, 4, 1, &next, s, 16), 1);
    assert_int_equal(s[0].length, 0);
}

static void test_choose_transport(void **state) {
    (void)state;
    char why[320];
    struct cr_xfer_transport_facts f = {.shm_reachable = true, .local_devices = 2,
                                        .peer_offers_verbs = true};
    assert_int_equal(cr_xfer_choose_transport(&f, why, sizeof(why)), CR_XFER_TRANSPORT_SHM);
    assert_non_null(strstr(why, "same host"));
    f.shm_disabled = true;
    assert_int_equal(cr_xfer_choose_transport(&f, why, sizeof(why)), CR_XFER_TRANSPORT_VERBS);
    assert_non_null(strstr(why, "disabled"));
    f.peer_offers_verbs = false;
    assert_int_equal(cr_xfer_choose_transport(&f, why, sizeof(why)), CR_XFER_TRANSPORT_TCP);
    assert_non_null(strstr(why, "peer offers no verbs"));
    f.peer_verbs_error = "the peer has no RDMA device (its protocol is tcp)";
    assert_int_equal(cr_xfer_choose_transport(&f, why, sizeof(why)), CR_XFER_TRANSPORT_TCP);
    assert_non_null(strstr(why, "verbs: the peer has no RDMA device"));
    f = (struct cr_xfer_transport_facts){.shm_error = "no shm socket", .local_devices = 0,
                                         .verbs_error = "no RDMA device (ENOSYS)",
                                         .peer_offers_verbs = true};
    assert_int_equal(cr_xfer_choose_transport(&f, why, sizeof(why)), CR_XFER_TRANSPORT_TCP);
    assert_non_null(strstr(why, "no shm socket"));
    assert_non_null(strstr(why, "no RDMA device (ENOSYS)"));
    assert_string_equal(cr_xfer_transport_name(CR_XFER_TRANSPORT_VERBS), "verbs");
}

/* On a machine with a device: two contexts on device 0, QPs connected to
 * each other, RDMA WRITE A -> B and READ B -> A, 16 MiB striped over 4 QPs. */
static void wait_completions(struct cr_xfer_verbs *v, int expected) {
    struct cr_xfer_verbs_completion done[32];
    int got = 0;
    for (long spins = 0; got < expected; spins++) {
        assert_true(spins < 2000000000L);
        int n = cr_xfer_verbs_poll(v, done, 32);
        for (int i = 0; i < n; i++) assert_int_equal(done[i].status, CR_OK);
        got += n;
    }
}

/* A GID table entry: type, then 16 address bytes given as its last 6. */
static struct cr_xfer_verbs_gid gid_entry(uint32_t index, uint32_t type, const char *kind,
                                          uint8_t last) {
    struct cr_xfer_verbs_gid g = {.index = index, .type = type};
    if (strcmp(kind, "link-local") == 0) g.raw[0] = 0xfe, g.raw[1] = 0x80;
    if (strcmp(kind, "ipv4") == 0) g.raw[10] = g.raw[11] = 0xff, g.raw[12] = 10;
    if (strcmp(kind, "global") == 0) g.raw[0] = 0x20, g.raw[1] = 0x01;
    g.raw[15] = last;
    return g;
}

/* RoCE v2 with an IPv4-mapped address first, then v2 not link-local, then
 * any v2, then the first entry; InfiniBand: the first entry. */
static void test_pick_gid(void **state) {
    (void)state;
    const char *why = NULL;
    enum { V1 = CR_XFER_GID_ROCE_V1, V2 = CR_XFER_GID_ROCE_V2 };
    struct cr_xfer_verbs_gid connectx[] = {gid_entry(0, V1, "link-local", 1),
                                           gid_entry(1, V2, "link-local", 1),
                                           gid_entry(2, V1, "ipv4", 1), gid_entry(3, V2, "ipv4", 1)};
    assert_int_equal(cr_xfer_verbs_pick_gid(connectx, 4, true, &why), 3);
    assert_string_equal(why, "the first RoCE v2 entry with an IPv4-mapped address");
    assert_int_equal(cr_xfer_verbs_pick_gid(connectx, 4, false, &why), 0); /* InfiniBand */
    struct cr_xfer_verbs_gid v6[] = {gid_entry(0, V2, "link-local", 1), gid_entry(4, V1, "global", 2),
                                     gid_entry(7, V2, "global", 2)};
    assert_int_equal(cr_xfer_verbs_pick_gid(v6, 3, true, &why), 2);
    assert_string_equal(why, "the first RoCE v2 entry that is not link-local");
    assert_int_equal(cr_xfer_verbs_pick_gid(connectx, 2, true, &why), 1); /* link-local only */
    assert_string_equal(why, "the first RoCE v2 entry");
    struct cr_xfer_verbs_gid v1_only[] = {gid_entry(5, V1, "ipv4", 1), gid_entry(6, V1, "ipv4", 2)};
    assert_int_equal(cr_xfer_verbs_pick_gid(v1_only, 2, true, &why), 0);
    assert_string_equal(why, "the first entry");
    assert_int_equal(cr_xfer_verbs_pick_gid(NULL, 0, true, &why), -1);
    char text[80];
    cr_xfer_verbs_gid_describe(&connectx[3], text, sizeof(text));
    assert_string_equal(text, "RoCE v2 ::ffff:10.0.0.1");
    int index = 7;
    assert_true(cr_xfer_verbs_parse_gid_index("auto", &index) && index == -1);
    assert_true(cr_xfer_verbs_parse_gid_index("255", &index) && index == 255);
    assert_true(cr_xfer_verbs_parse_gid_index("0", &index) && index == 0);
    const char *bad[] = {"256", "-1", "", "3x", " 3", "+3", "Auto"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(cr_xfer_verbs_parse_gid_index(bad[i], &index));
}

static void test_device_round_trip(void **state) {
    (void)state;
    char why[160];
    if (cr_xfer_verbs_probe(why, sizeof(why)) == 0) {
        printf("SKIPPED: %s\n", why); /* "no RDMA device (...)" */
        skip();
    }
    struct cr_xfer_verbs_device *dev;
    assert_int_equal(cr_xfer_verbs_device_open(0, 1, -1, &dev, why, sizeof(why)), CR_OK);
    struct cr_xfer_verbs *a, *b;
    assert_int_equal(cr_xfer_verbs_open(&dev, 1, 4, 128, &a, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_open(&dev, 1, 4, 128, &b, why, sizeof(why)), CR_OK);
    struct cr_xfer_verbs_hello ha, hb;
    cr_xfer_verbs_local_hello(a, &ha);
    cr_xfer_verbs_local_hello(b, &hb);
    assert_int_equal(cr_xfer_verbs_connect(a, &hb, why, sizeof(why)), CR_OK);
    assert_int_equal(cr_xfer_verbs_connect(b, &ha, why, sizeof(why)), CR_OK);
    size_t len = 16u << 20;
    uint8_t *src = malloc(len), *remote = calloc(1, len), *back = calloc(1, len);
    for (size_t i = 0; i < len; i++) src[i] = (uint8_t)(i * 31 + 7);
    uint32_t lk_src, rk_src, lk_remote, rk_remote, lk_back, rk_back;
    struct ibv_mr *mr_src, *mr_back, *mr_remote;
    assert_int_equal(cr_xfer_verbs_register(dev, src, len, &mr_src, &lk_src, &rk_src, why, 160),
                     CR_OK);
    assert_int_equal(
        cr_xfer_verbs_register(dev, back, len, &mr_back, &lk_back, &rk_back, why, 160), CR_OK);
    assert_int_equal(cr_xfer_verbs_register(dev, remote, len, &mr_remote, &lk_remote, &rk_remote,
                                            why, 160),
                     CR_OK);
    uint32_t n = 0;
    struct cr_xfer_verbs_local local = {.addr = src, .length = len, .lkey = {lk_src}};
    assert_int_equal(cr_xfer_verbs_post(a, true, &local, 1, (uintptr_t)remote, &rk_remote, len, 1, &n),
                     CR_OK);
    assert_int_equal(n, 4);
    wait_completions(a, (int)n);
    assert_memory_equal(src, remote, len);
    local = (struct cr_xfer_verbs_local){.addr = back, .length = len, .lkey = {lk_back}};
    assert_int_equal(cr_xfer_verbs_post(a, false, &local, 1, (uintptr_t)remote, &rk_remote, len, 2, &n),
                     CR_OK);
    wait_completions(a, (int)n);
    assert_memory_equal(src, back, len);
    cr_xfer_verbs_close(a);
    cr_xfer_verbs_close(b);
    cr_xfer_verbs_deregister(mr_src);
    cr_xfer_verbs_deregister(mr_back);
    cr_xfer_verbs_deregister(mr_remote);
    cr_xfer_verbs_device_close(dev);
    free(src);
    free(remote);
    free(back);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_round_trip),
        cmocka_unit_test(test_hello_refuses_malformed),
        cmocka_unit_test(test_key_codec),
        cmocka_unit_test(test_frame_hello_and_key),
        cmocka_unit_test(test_plan_stripes_large_objects),
        cmocka_unit_test(test_plan_small_objects_round_robin),
        cmocka_unit_test(test_choose_transport),
        cmocka_unit_test(test_pick_gid),
        cmocka_unit_test(test_device_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
