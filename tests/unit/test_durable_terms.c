/* The term history (src/durable/terms.c): what a master keeps of the terms
 * it saw and wrote under, and the test that decides whether a standby's log
 * is a prefix of its leader's (docs/ha.md, "A former leader comes back"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "durable/repl_wire.h"
#include "durable/terms.h"

static struct cr_terms history(uint32_t n, const uint64_t (*e)[2]) {
    struct cr_terms t = {0};
    for (uint32_t i = 0; i < n; i++) assert_true(cr_terms_note(&t, e[i][0], e[i][1]));
    return t;
}

static void test_note(void **state) {
    (void)state;
    struct cr_terms t = {0};
    assert_true(cr_terms_note(&t, 3, 1));
    assert_false(cr_terms_note(&t, 3, 50)); /* the same term goes on */
    assert_true(cr_terms_note(&t, 7, 101));
    assert_int_equal(t.count, 2);
    assert_true(t.highest == 7);
    /* Records from 90 on replaced by term 9's: term 7's entry goes. */
    assert_true(cr_terms_note(&t, 9, 90));
    assert_int_equal(t.count, 2);
    assert_true(t.e[1].term == 9 && t.e[1].first_lsn == 90);
    /* An older leader's term changes nothing. */
    assert_false(cr_terms_note(&t, 8, 200));
    assert_int_equal(t.count, 2);
    /* Seeing a term is kept apart from writing under it. */
    assert_true(cr_terms_see(&t, 12));
    assert_false(cr_terms_see(&t, 11));
    assert_true(t.highest == 12 && t.count == 2);
    /* A full history forgets its oldest entry. */
    struct cr_terms full = {0};
    for (uint64_t i = 1; i <= CR_TERMS_MAX + 3; i++) (void)cr_terms_note(&full, i, i * 10);
    assert_int_equal(full.count, CR_TERMS_MAX);
    assert_true(full.e[0].term == 4 && full.e[CR_TERMS_MAX - 1].term == CR_TERMS_MAX + 3);
}

static void test_agree(void **state) {
    (void)state;
    /* A led term 5 from lsn 1 and wrote up to 103; B followed it up to 100,
     * was elected at term 6 and wrote 101..110. */
    const uint64_t a_e[][2] = {{5, 1}};
    const uint64_t b_e[][2] = {{5, 1}, {6, 101}};
    struct cr_terms a = history(1, a_e), b = history(2, b_e);
    assert_true(cr_terms_agree(&a, 103, &b, 110) == 100); /* 101..103 are A's alone */
    assert_true(cr_terms_agree(&a, 100, &b, 110) == 100); /* A has nothing else: go on */
    assert_true(cr_terms_agree(&a, 60, &b, 110) == 60);
    assert_true(cr_terms_agree(&b, 110, &b, 110) == 110);
    /* Kafka's case: C followed B (term 6) from 91 while D, elected at 7,
     * had A's term-5 records up to 100: C's 91..95 are not D's. */
    const uint64_t c_e[][2] = {{5, 1}, {6, 91}};
    const uint64_t d_e[][2] = {{5, 1}, {7, 101}};
    struct cr_terms c = history(2, c_e), d = history(2, d_e);
    assert_true(cr_terms_agree(&c, 95, &d, 120) == 90);
    /* No history, or one that starts after lsn 1: nothing is known alike. */
    struct cr_terms none = {0};
    assert_true(cr_terms_agree(&none, 50, &b, 110) == 0);
    assert_true(cr_terms_agree(&none, 0, &b, 110) == 0);
    const uint64_t late_e[][2] = {{5, 20}};
    struct cr_terms late = history(1, late_e);
    assert_true(cr_terms_agree(&late, 50, &b, 110) == 0);
    /* Different terms from lsn 1. */
    const uint64_t other_e[][2] = {{4, 1}};
    struct cr_terms other = history(1, other_e);
    assert_true(cr_terms_agree(&other, 50, &b, 110) == 0);
}

/* A standby tags what it takes with the terms its leader's history gives
 * (TERMS), so a catch-up of old records does not make its history differ
 * from its leader's (which would make it start over at every reconnect). */
static void test_note_as(void **state) {
    (void)state;
    const uint64_t l_e[][2] = {{5, 1}, {6, 101}};
    struct cr_terms leader = history(2, l_e);
    const uint64_t s_e[][2] = {{5, 1}};
    struct cr_terms standby = history(1, s_e);
    /* It had 1..90; the leader (term 6 from 101) sends 91..120. */
    assert_true(cr_terms_note_as(&standby, &leader, 6, 91, 120));
    assert_int_equal(standby.count, 2);
    assert_true(standby.e[1].term == 6 && standby.e[1].first_lsn == 101);
    assert_true(cr_terms_agree(&standby, 120, &leader, 130) == 120);
    /* Without the leader's history it would tag 91.. with 6: a mismatch. */
    struct cr_terms naive = history(1, s_e);
    (void)cr_terms_note(&naive, 6, 91);
    assert_true(cr_terms_agree(&naive, 120, &leader, 130) == 90);
    /* More of the same term: no change. */
    assert_false(cr_terms_note_as(&standby, &leader, 6, 121, 130));
    /* A leader history that knows nothing of the lsns: the fallback term. */
    struct cr_terms none = {0}, t = {0};
    assert_true(cr_terms_note_as(&t, &none, 9, 1, 10));
    assert_true(t.count == 1 && t.e[0].term == 9 && t.e[0].first_lsn == 1);
}

static void test_codec(void **state) {
    (void)state;
    const uint64_t e[][2] = {{5, 1}, {6, 101}, {9, 4000}};
    struct cr_terms t = history(3, e), back;
    (void)cr_terms_see(&t, 11);
    uint8_t buf[CR_TERMS_FILE_MAX];
    char err[256];
    size_t len = cr_terms_encode(&t, buf);
    assert_int_equal(cr_terms_decode(buf, len, &back, err, sizeof(err)), CR_OK);
    assert_memory_equal(&t, &back, sizeof(t));
    for (size_t n = 0; n < len; n++)
        assert_int_equal(cr_terms_decode(buf, n, &back, err, sizeof(err)), CR_ERR_PROTOCOL);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(cr_terms_decode(buf, len, &back, err, sizeof(err)),
                             CR_ERR_PROTOCOL);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

static void test_files(void **state) {
    (void)state;
    char dir[] = "/tmp/crescent-terms-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[1024], path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, CR_TERMS_FILE);
    struct cr_terms t, back;
    assert_int_equal(cr_terms_load(dir, &t, err, sizeof(err)), CR_OK); /* first start */
    assert_int_equal(t.count, 0);
    assert_true(t.highest == 0);
    (void)cr_terms_note(&t, 42, 7);
    assert_int_equal(cr_terms_store(dir, &t, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_terms_load(dir, &back, err, sizeof(err)), CR_OK);
    assert_memory_equal(&t, &back, sizeof(t));
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 17, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    assert_int_equal(cr_terms_load(dir, &back, err, sizeof(err)), CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "checksum"));
    unlink(path);
    rmdir(dir);
}

/* The HELLO carries the history; a damaged one is refused whole. */
static void test_hello(void **state) {
    (void)state;
    const uint64_t e[][2] = {{5, 1}, {6, 101}};
    struct cr_terms t = history(2, e);
    struct cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(cr_repl_put_hello_terms(&b, 110, 6, &t), CR_OK);
    struct cr_repl_frame f;
    size_t used;
    char err[256];
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data, b.len, &f, &used, err, sizeof(err)),
                     CR_REPL_OK);
    assert_int_equal(used, b.len);
    assert_true(f.kind == CR_REPL_HELLO && f.lsn == 110 && f.term == 6 && f.has_history);
    assert_int_equal(f.history.count, 2);
    assert_true(f.history.e[1].term == 6 && f.history.e[1].first_lsn == 101);
    /* Entries out of order, with a good checksum: still not a history. */
    struct cr_terms bad = t;
    bad.e[1].first_lsn = 1;
    b.len = 0;
    assert_int_equal(cr_repl_put_hello_terms(&b, 110, 6, &bad), CR_OK);
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data, b.len, &f, &used, err, sizeof(err)),
                     CR_REPL_BAD);
    /* RESYNC round-trips its term, lsn and reason. */
    b.len = 0;
    assert_int_equal(cr_repl_put_resync(&b, 6, 100, "diverged"), CR_OK);
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data, b.len, &f, &used, err, sizeof(err)),
                     CR_REPL_OK);
    assert_true(f.kind == CR_REPL_RESYNC && f.term == 6 && f.lsn == 100);
    assert_string_equal(f.text, "diverged");
    /* TERMS carries the leader's history. */
    b.len = 0;
    assert_int_equal(cr_repl_put_terms(&b, 6, &t), CR_OK);
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data, b.len, &f, &used, err, sizeof(err)),
                     CR_REPL_OK);
    assert_true(f.kind == CR_REPL_TERMS && f.term == 6 && f.has_history);
    assert_int_equal(f.history.count, 2);
    assert_true(f.history.e[0].term == 5 && f.history.e[1].first_lsn == 101);
    cr_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_note),  cmocka_unit_test(test_agree),
        cmocka_unit_test(test_note_as), cmocka_unit_test(test_codec),
        cmocka_unit_test(test_files), cmocka_unit_test(test_hello),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
