/* cr_heap_trim_due: when the heap's free memory is given back (heap.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "runtime/heap.h"

#define MB (1ull << 20)
#define S 1000000000ull

static void test_a_spike_of_free_memory_is_trimmed_once(void **unused) {
    (void)unused;
    struct cr_heap_trim t = {0};
    assert_false(cr_heap_trim_due(&t, 0, 10 * MB)); /* the base */
    assert_false(cr_heap_trim_due(&t, 1 * S, 2000 * MB)); /* not due before the interval */
    assert_true(cr_heap_trim_due(&t, 2 * S, 2000 * MB));  /* a RemoveAll's worth freed */
    assert_int_equal(t.free_bytes, 2000 * MB);
    t.base_free_bytes = 2000 * MB; /* what cr_heap_trim_tick sets after trimming */
    /* The trimmed pages still count as free: no second trim for them. */
    assert_false(cr_heap_trim_due(&t, 4 * S, 2000 * MB));
    assert_false(cr_heap_trim_due(&t, 6 * S, 2000 * MB + CR_HEAP_TRIM_BYTES - 1));
    /* Reused, then freed again: the base followed it down. */
    assert_false(cr_heap_trim_due(&t, 8 * S, 20 * MB));
    assert_false(cr_heap_trim_due(&t, 10 * S, 20 * MB + CR_HEAP_TRIM_BYTES - 1));
    assert_true(cr_heap_trim_due(&t, 12 * S, 20 * MB + CR_HEAP_TRIM_BYTES));
}

static void test_trim_tick_gives_freed_pages_back(void **unused) {
    (void)unused;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's malloc is its own allocator: glibc's mallinfo2 and malloc_trim
     * never see these blocks.  The plain build (zig build test) runs this. */
    skip();
#endif
    /* 256 MiB in small blocks, nearly all freed: glibc keeps them until a trim. */
    enum { N = 256 * 1024 };
    void **blocks = malloc(N * sizeof(*blocks));
    assert_non_null(blocks);
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(1000);
        assert_non_null(blocks[i]);
        ((char *)blocks[i])[0] = 1;
        for (int j = 0; j < 1000; j += 512) ((volatile char *)blocks[i])[j] = (char)j;
    }
    /* Every 128th block stays: the free runs between them (~128 KiB each)
     * cannot merge into the heap's top, which glibc would return itself. */
    for (int i = 0; i < N; i++)
        if (i % 128 != 127) free(blocks[i]);
    struct cr_heap_trim t = {.have_base = true, .base_free_bytes = 0};
    cr_heap_trim_tick(&t, 0);
    assert_int_equal(t.trims, 1);
    assert_true(t.released_bytes > 128 * MB);
    for (int i = 127; i < N; i += 128) free(blocks[i]);
    free(blocks);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_spike_of_free_memory_is_trimmed_once),
        cmocka_unit_test(test_trim_tick_gives_freed_pages_back),
    };
    return cmocka_run_group_tests_name("heap", tests, NULL, NULL);
}
