/* libFuzzer target for the term history (src/durable/terms.c): DIR/terms
 * as a crash, a bad disk or a person may have left it, and the comparison
 * a leader makes with a standby's history (docs/ha.md, "A former leader
 * comes back").
 *
 * The input is read as a terms file.  Bit 0 of its first byte set: the
 * target fixes the checksum at the end (no fuzzer guesses a 64-bit hash),
 * so the checks past it are reached.  Checks:
 * - a refusal has a message; a file that decodes re-encodes to exactly its
 *   bytes, with terms and lsns increasing and highest >= every term;
 * - cr_terms_agree is symmetric, never above either last lsn, and a
 *   history agrees with itself up to its last lsn when it starts at 1;
 * - cr_terms_note_as of a history onto an empty one, for a range from 1,
 *   agrees with it over that whole range.
 * Build and run: tests/fuzz/README.md. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "crescent/error.h"
#include "durable/terms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t buf[CR_TERMS_FILE_MAX + 64];
    if (size == 0 || size > sizeof(buf)) return 0;
    memcpy(buf, data, size);
    if ((data[0] & 1) && size >= 8) {
        uint64_t h = XXH3_64bits(buf, size - 8);
        for (int i = 0; i < 8; i++) buf[size - 8 + i] = (uint8_t)(h >> (8 * i));
    }
    struct cr_terms t;
    char err[256] = "";
    if (cr_terms_decode(buf, size, &t, err, sizeof(err)) != CR_OK) {
        if (err[0] == '\0') abort();
        return 0;
    }
    uint8_t again[CR_TERMS_FILE_MAX];
    size_t n = cr_terms_encode(&t, again);
    if (n != size || memcmp(again, buf, size) != 0) abort();
    for (uint32_t i = 0; i < t.count; i++) {
        if (t.e[i].term > t.highest || t.e[i].first_lsn == 0) abort();
        if (i > 0 && (t.e[i].term <= t.e[i - 1].term ||
                      t.e[i].first_lsn <= t.e[i - 1].first_lsn))
            abort();
    }
    /* Two histories from one: t, and t without its last entry. */
    struct cr_terms u = t;
    if (u.count > 0) u.count--;
    uint64_t top = t.count > 0 ? t.e[t.count - 1].first_lsn : 0;
    uint64_t last = top > UINT64_MAX - 5 ? UINT64_MAX : top + 5;
    /* Last lsns to compare at: small ones, and around every entry. */
    uint64_t at[4 + 3 * CR_TERMS_MAX];
    uint32_t m = 0;
    for (uint64_t a = 0; a < 4; a++) at[m++] = a;
    for (uint32_t i = 0; i < t.count; i++) {
        at[m++] = t.e[i].first_lsn - 1;
        at[m++] = t.e[i].first_lsn;
        at[m++] = t.e[i].first_lsn == UINT64_MAX ? UINT64_MAX : t.e[i].first_lsn + 1;
    }
    for (uint32_t k = 0; k < m; k++) {
        uint64_t a = at[k];
        uint64_t x = cr_terms_agree(&t, a, &u, last), y = cr_terms_agree(&u, last, &t, a);
        if (x != y || x > a) abort();
        uint64_t self = cr_terms_agree(&t, a, &t, a);
        if (t.count > 0 && t.e[0].first_lsn == 1 && self != a) abort();
        if (self > a) abort();
    }
    struct cr_terms copy = {0};
    (void)cr_terms_note_as(&copy, &t, t.highest, 1, last);
    if (t.count > 0 && t.e[0].first_lsn == 1 && t.count < CR_TERMS_MAX &&
        cr_terms_agree(&copy, last, &t, last) != last)
        abort();
    return 0;
}
