/* The native RPC framing (src/msgs/rpc_stream.h): frames cut anywhere,
 * lengths out of bounds, and a request's payload decoded by the gateway's
 * own envelope reader (cr_rpc_read_envelope), as the native endpoint does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "rpc/rpc_codec.h"
#include "msgs/rpc_stream.h"

static void test_next_bounds(void **unused) {
    (void)unused;
    uint8_t buf[64] = {0};
    size_t n = 99;
    /* Fewer than 4 bytes: more, and no length known. */
    for (size_t len = 0; len < 4; len++) {
        assert_int_equal(cr_rpc_stream_next(buf, len, 10, 100, &n), CR_RPC_STREAM_MORE);
        assert_int_equal(n, 0);
    }
    cr_rpc_stream_put_len(buf, 9); /* below the minimum */
    assert_int_equal(cr_rpc_stream_next(buf, 4, 10, 100, &n), CR_RPC_STREAM_BAD);
    cr_rpc_stream_put_len(buf, 101); /* above the maximum */
    assert_int_equal(cr_rpc_stream_next(buf, 64, 10, 100, &n), CR_RPC_STREAM_BAD);
    cr_rpc_stream_put_len(buf, 0xffffffffu);
    assert_int_equal(cr_rpc_stream_next(buf, 4, 10, CR_RPC_STREAM_REQUEST_MAX, &n),
                     CR_RPC_STREAM_BAD);
    cr_rpc_stream_put_len(buf, 20); /* within: more until 24 bytes, then a frame */
    for (size_t len = 4; len < 24; len++) {
        assert_int_equal(cr_rpc_stream_next(buf, len, 10, 100, &n), CR_RPC_STREAM_MORE);
        assert_int_equal(n, 20);
    }
    assert_int_equal(cr_rpc_stream_next(buf, 24, 10, 100, &n), CR_RPC_STREAM_FRAME);
    assert_int_equal(n, 20);
    assert_int_equal(cr_rpc_stream_next(buf, 64, 10, 100, &n), CR_RPC_STREAM_FRAME);
    cr_rpc_stream_put_len(buf, 10); /* exactly the bounds */
    assert_int_equal(cr_rpc_stream_next(buf, 14, 10, 10, &n), CR_RPC_STREAM_FRAME);
}

static void test_request_payload_is_the_zmq_envelope(void **unused) {
    (void)unused;
    uint8_t frame[4 + CR_RPC_REQUEST_HEADER_BYTES + 3];
    cr_rpc_stream_put_len(frame, CR_RPC_REQUEST_HEADER_BYTES + 3);
    cr_rpc_put_u16(frame + 4, 7);
    cr_rpc_put_u64(frame + 6, 0x0102030405060708ull);
    memcpy(frame + 14, "abc", 3);
    size_t n;
    assert_int_equal(cr_rpc_stream_next(frame, sizeof(frame), CR_RPC_REQUEST_HEADER_BYTES,
                                        CR_RPC_STREAM_REQUEST_MAX, &n),
                     CR_RPC_STREAM_FRAME);
    const uint8_t *data[3] = {frame + 4, NULL, NULL};
    const size_t size[3] = {n, 0, 0};
    struct cr_rpc_envelope env;
    assert_true(cr_rpc_read_envelope(1, data, size, &env));
    assert_true(env.one_frame);
    assert_int_equal(env.method, 7);
    assert_true(env.request_id == 0x0102030405060708ull);
    assert_int_equal(env.body_len, 3);
    assert_memory_equal(env.body, "abc", 3);

    uint8_t prefix[CR_RPC_STREAM_REPLY_PREFIX];
    cr_rpc_stream_reply_prefix(prefix, 42, -3, 5);
    assert_int_equal(cr_rpc_stream_next(prefix, sizeof(prefix), CR_RPC_REPLY_HEADER_BYTES,
                                        CR_RPC_STREAM_REPLY_MAX, &n),
                     CR_RPC_STREAM_MORE);
    assert_int_equal(n, CR_RPC_REPLY_HEADER_BYTES + 5);
    assert_true(cr_rpc_get_u64(prefix + 4) == 42);
    assert_int_equal(cr_rpc_get_i32(prefix + 12), -3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_bounds),
        cmocka_unit_test(test_request_payload_is_the_zmq_envelope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
