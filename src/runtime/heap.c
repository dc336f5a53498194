/* Giving free heap memory back after a spike (heap.h). */
#include "runtime/heap.h"

#include <assert.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

#include "core/log.h"

bool cr_heap_trim_due(struct cr_heap_trim *t, uint64_t now_ns, uint64_t free_bytes) {
    assert(t != NULL);
    if (now_ns < t->next_check_ns) return false;
    t->next_check_ns = now_ns + CR_HEAP_CHECK_NS;
    t->free_bytes = free_bytes;
    /* Pages trimmed stay counted as free (madvise does not change the free
     * lists): the base is what was free after the last trim, and it follows
     * the free bytes down as the program allocates again. */
    if (!t->have_base || free_bytes < t->base_free_bytes) {
        t->base_free_bytes = free_bytes;
        t->have_base = true;
    }
    return free_bytes >= t->base_free_bytes + CR_HEAP_TRIM_BYTES;
}

/* Resident bytes of the process (/proc/self/statm), 0 if unreadable. */
static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f == NULL) return 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    return n == 2 ? resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

void cr_heap_trim_tick(struct cr_heap_trim *t, uint64_t now_ns) {
    assert(t != NULL);
    if (now_ns < t->next_check_ns) return; /* mallinfo2 locks each arena too */
    struct mallinfo2 info = mallinfo2();
    if (!cr_heap_trim_due(t, now_ns, info.fordblks)) return;
    uint64_t before = rss_bytes();
    malloc_trim(0);
    uint64_t after = rss_bytes();
    uint64_t released = before > after ? before - after : 0;
    t->trims++;
    t->released_bytes += released;
    t->base_free_bytes = info.fordblks;
    CR_INFO("heap", "%llu MB free in the heap: %llu MB given back to the system (RSS %llu MB)",
            (unsigned long long)(info.fordblks >> 20), (unsigned long long)(released >> 20),
            (unsigned long long)(after >> 20));
}
