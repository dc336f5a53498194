/* bench/verify_pipe: a verified same-host batch read on one thread against
 * the same work split over two (issue 27, src/client/client_verify.c).
 *
 *   zig build bench && ./zig-out/bench/verify_pipe [rounds]
 *
 * On 32 x 256 KiB blocks (8 MiB, as bench/mooncake_store.py reads them), in
 * interleaved rounds, medians of rounds, GB/s of the object bytes per second
 * of WALL time (the point is a second core, which CPU time of one thread
 * cannot show; on a shared machine read the ratios, measured in the same
 * rounds):
 *   memcpy                  the copy alone (the ceiling);
 *   one thread, chunked     copy 32 KiB, hash those 32 KiB while in cache,
 *                           next (client_copy.c: what a read does per object
 *                           on the reading thread);
 *   two threads             each block copied whole on this thread and
 *                           published (or, when the helper is behind,
 *                           copied and hashed chunked here); a helper
 *                           hashes the published ones behind it, this
 *                           thread hashes from the end once it has copied
 *                           all (cr_verify_start/publish/finish, a detached
 *                           thread started per call, as a batch read).
 * Every verified case checks its hashes against the one-shot XXH3 of each
 * block, so a wrong split cannot pass as a fast one. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "client/client_verify.h"
#include "copy_rounds.h"

#define CHUNK (32u * 1024u)

enum { MEMCPY, CHUNKED, TWO_THREADS, CASES };
static const char *const names[CASES] = {"memcpy", "one thread, chunked 32 KiB",
                                         "two threads (cr_verify)"};

/* One call: the whole 8 MiB as the case moves it; false on a wrong hash. */
static bool run_case(int c, uint8_t *dst, const uint8_t *src) {
    uint64_t got[BLOCKS];
    if (c == TWO_THREADS) {
        struct cr_verify_pipe *pipe = cr_verify_start(BLOCKS);
        if (pipe == NULL) return false;
        for (uint32_t b = 0; b < BLOCKS; b++) {
            uint8_t *d = dst + (size_t)b * BLOCK_BYTES;
            const uint8_t *s = src + (size_t)b * BLOCK_BYTES;
            if (cr_verify_keeping_up(pipe, b)) { /* as client_data.c's read_all */
                memcpy(d, s, BLOCK_BYTES);
                cr_verify_publish(pipe, b, d, BLOCK_BYTES, &got[b]);
            } else {
                got[b] = copy_chunked(d, s, BLOCK_BYTES, CHUNK);
                cr_verify_publish(pipe, b, NULL, 0, NULL);
            }
        }
        cr_verify_finish(pipe);
    } else {
        for (uint32_t b = 0; b < BLOCKS; b++) {
            uint8_t *d = dst + (size_t)b * BLOCK_BYTES;
            const uint8_t *s = src + (size_t)b * BLOCK_BYTES;
            if (c == MEMCPY) memcpy(d, s, BLOCK_BYTES);
            else got[b] = copy_chunked(d, s, BLOCK_BYTES, CHUNK);
        }
        if (c == MEMCPY) return true;
    }
    for (uint32_t b = 0; b < BLOCKS; b++)
        if (got[b] != expected[b]) return false;
    return true;
}

int main(int argc, char **argv) {
    const struct copy_rounds bench = {.name = "verify_pipe",
                                      .medians = "wall-time medians",
                                      .case_names = names,
                                      .cases = CASES,
                                      .name_width = 28,
                                      .calls_per_round = 10, /* 80 MiB per case per round */
                                      .clock_ns = bench_now_ns,
                                      .run_case = run_case};
    return copy_rounds_main(&bench, argc, argv);
}
