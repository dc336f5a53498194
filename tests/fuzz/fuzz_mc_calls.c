/* libFuzzer target for Mooncake's master calls (src/mooncake/mc_calls.c,
 * struct_pack.c), as crescentd's Mooncake endpoint reads them.
 *
 * Input: byte 0 picks the call (mod the table's size), byte 1 the mode; the
 * rest is bytes from the wire.
 *  - mode even: the rest is a request body.  cr_mc_decode must accept it or
 *    refuse it with CR_ERR_PROTOCOL and a message naming the call; an
 *    accepted request names a crescent method (or 0: answered locally) whose
 *    packed protobuf request protobuf-c reads back (so the intake gets a
 *    well-formed body), and the local answer encodes.
 *  - mode odd: the rest is a crescent reply (packed protobuf, as the intake
 *    or segments send it; any bytes): cr_mc_answer must encode a result or
 *    refuse it, never crash; the encoded result must start with the call's
 *    type hash.
 * Bytes 2-5 also name a function id: an id the table does not serve gets a
 * typed UNAVAILABLE answer only if the table names it.
 * One cr_mc_state is kept across inputs, as the endpoint keeps one (mounts
 * and secrets accumulate), bounded by resetting it every 4096 inputs.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "mooncake/mc_calls.h"
#include "rpc/rpc_codec.h"

static struct cr_mc_state state;
static unsigned inputs;

static void decode_case(const struct cr_mc_fn *fn, const uint8_t *data, size_t size) {
    struct cr_mc_request req;
    char err[256];
    int rc = cr_mc_decode(fn, data, size, &state, &req, err, sizeof(err));
    if (rc == CR_ERR_PROTOCOL) {
        if (strstr(err, cr_mc_fn_name(fn)) == NULL) abort();
        return;
    }
    if (rc == CR_ERR_NOMEM) return;
    if (rc != CR_OK) abort();
    if (req.method == 0) {
        struct cr_sp_writer w = {0};
        if (!cr_mc_answer_local(fn, &w) || w.len < 5) abort();
        free(w.buf);
    } else {
        const struct cr_rpc_method *m = cr_rpc_method_find(req.method);
        if (m == NULL || req.body == NULL) abort();
        ProtobufCMessage *pb = protobuf_c_message_unpack(m->request, NULL, req.body_len, req.body);
        if (pb == NULL) abort();
        protobuf_c_message_free_unpacked(pb, NULL);
        for (size_t i = 0; i < req.more_count; i++) {
            pb = protobuf_c_message_unpack(m->request, NULL, req.more_len[i], req.more[i]);
            if (pb == NULL) abort();
            protobuf_c_message_free_unpacked(pb, NULL);
        }
    }
    cr_mc_request_free(&req);
}

static void answer_case(const struct cr_mc_fn *fn, const uint8_t *data, size_t size,
                        uint8_t mode) {
    struct cr_sp_writer w = {0};
    struct cr_mc_uuid client = {mode, 7};
    uint32_t entries = mode >> 4;
    bool ok;
    if (cr_mc_fn_method(fn) != 0 && (mode & 2))
        ok = cr_mc_answer(fn, (mode & 4) ? CR_ERR_TIMEOUT : CR_OK, data, size, entries, &client,
                          &state, &w);
    else
        ok = cr_mc_answer_error(fn, CR_MC_INTERNAL_ERROR, entries, &w);
    if (ok && w.len < 4) abort();
    free(w.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    if (++inputs % 4096 == 0) cr_mc_state_free(&state);
    const struct cr_mc_fn *fn = NULL;
    for (uint16_t i = data[0]; fn == NULL; i = (uint16_t)(i / 2)) fn = cr_mc_fn_at(i);
    if (data[1] % 2 == 0) decode_case(fn, data + 2, size - 2);
    else answer_case(fn, data + 2, size - 2, data[1]);
    if (size >= 6) { /* an id crescent does not serve, from the input */
        uint32_t id = (uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16 |
                      (uint32_t)data[5] << 24;
        const char *name = NULL;
        struct cr_sp_writer w = {0};
        if (cr_mc_fn_find(id, &name) == NULL && cr_mc_unavailable(id, &w) && name == NULL)
            abort(); /* a typed answer only for a call the table names */
        free(w.buf);
    }
    return 0;
}
