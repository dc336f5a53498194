/* The protobuf-c code generated from proto/master.proto at build time:
 * it links, round-trips, and rejects a message missing required fields
 * (the first line of defence for RPC frames). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "master.pb-c.h"

static void test_put_start_round_trip(void **unused) {
    (void)unused;
    Crescent__Master__ReplicateConfig config = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    config.has_replica_num = 1;
    config.replica_num = 2;
    uint32_t tokens[] = {1, 2, 3, 4};
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "llama";
    block.n_token_ids = 4;
    block.token_ids = tokens;
    Crescent__Master__PutStartRequest req = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    req.key = "k1";
    req.value_length = 4096;
    req.config = &config;
    req.block = &block;

    size_t len = crescent__master__put_start_request__get_packed_size(&req);
    uint8_t *bytes = malloc(len);
    assert_non_null(bytes);
    assert_int_equal(crescent__master__put_start_request__pack(&req, bytes), len);
    Crescent__Master__PutStartRequest *back =
        crescent__master__put_start_request__unpack(NULL, len, bytes);
    assert_non_null(back);
    assert_string_equal(back->key, "k1");
    assert_int_equal(back->value_length, 4096);
    assert_int_equal(back->config->replica_num, 2);
    assert_string_equal(back->tenant_id, "default"); /* proto default when unset */
    assert_int_equal(back->block->n_token_ids, 4);
    assert_int_equal(back->block->token_ids[3], 4);
    crescent__master__put_start_request__free_unpacked(back, NULL);
    free(bytes);
}

static void test_missing_required_field_is_rejected(void **unused) {
    (void)unused;
    /* PutEndRequest with field 2 (tenant_id) only: key (required) absent. */
    const uint8_t bytes[] = {0x12, 0x01, 't'};
    assert_null(crescent__master__put_end_request__unpack(NULL, sizeof(bytes), bytes));
    /* Garbage is rejected, not crashed on. */
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    assert_null(crescent__master__put_end_request__unpack(NULL, sizeof(junk), junk));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_start_round_trip),
        cmocka_unit_test(test_missing_required_field_is_rejected),
    };
    return cmocka_run_group_tests_name("proto", tests, NULL, NULL);
}
