/* bench/tasks: a copy task's data path next to a Put's, in the same run.
 *
 * One server thread hosts two 64 MiB memfd segments (as crescent-store runs
 * one); one client thread runs, interleaved, ROUNDS rounds of:
 *   put   - cr_xfer_write of the object into segment b (the bytes a Put moves)
 *   copy  - cr_task_exec_run: read the object from segment a (in place over
 *           shm, through a buffer over tcp), verify its XXH3, write it to b
 * for 64 KiB and 4 MiB objects, over tcp and shm, and prints the medians of
 * the rounds: tasks (or puts) per second and GB/s of object bytes.
 * The master's side of a task (CreateCopyTask, FetchTasks, MarkTaskToComplete:
 * three RPC round trips) is not in these numbers.
 *
 *   zig build bench && ./zig-out/bench/tasks [seconds_per_case]   (default 0.25) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "client/task_exec.h"
#include "core/log.h"
#include "crescent/error.h"
#include "harness.h"
#include "rdma/xfer.h"

#define SEGMENT_BYTES (UINT64_C(64) << 20)
#define ROUNDS 5

struct server_run {
    struct cr_xfer_server *srv;
    atomic_bool stop;
};

static void *serve(void *arg) {
    struct server_run *r = arg;
    while (!atomic_load(&r->stop)) cr_xfer_server_run(r->srv, 5);
    return NULL;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One case for `seconds`: ops per second (0 on a failure). */
static double run_case(struct cr_xfer_client *cli, const char *endpoint, uint64_t base_a,
                       uint64_t base_b, uint64_t size, bool copy, uint64_t checksum,
                       const void *object, double seconds) {
    uint64_t slots = SEGMENT_BYTES / size, ops = 0;
    uint64_t start = bench_now_ns(), end = start + (uint64_t)(seconds * 1e9);
    char why[CR_TASK_EXEC_ERROR_MAX];
    while (bench_now_ns() < end) {
        uint64_t dst = base_b + (ops % slots) * size;
        int rc;
        if (copy) {
            struct cr_task_exec_job job = {.size = size, .target_count = 1,
                                           .has_checksum = true, .checksum = checksum};
            job.source = (struct cr_task_exec_replica){.endpoint = endpoint, .segment = "seg-a",
                                                      .buffer = base_a};
            job.targets[0] = (struct cr_task_exec_replica){.endpoint = endpoint, .segment = "seg-b",
                                                          .buffer = dst};
            rc = cr_task_exec_run(cli, &job, why, sizeof(why));
        } else {
            rc = cr_xfer_write(cli, endpoint, "seg-b", dst, object, size);
        }
        if (rc != CR_OK) {
            fprintf(stderr, "bench/tasks: %s failed: %s\n", copy ? "copy" : "put",
                    copy ? why : cr_xfer_client_last_error(cli));
            return 0;
        }
        ops++;
    }
    return (double)ops / ((double)(bench_now_ns() - start) / 1e9);
}

static void run_transport(bool shm, double seconds) {
    struct cr_xfer_server_config sc = {.shm_disabled = !shm};
    struct cr_xfer_server *srv;
    struct cr_xfer_segment a, b;
    if (cr_xfer_server_create(&sc, &srv) != CR_OK || cr_xfer_segment_alloc(SEGMENT_BYTES, &a) ||
        cr_xfer_segment_alloc(SEGMENT_BYTES, &b) ||
        cr_xfer_server_register_segment(srv, "seg-a", &a) ||
        cr_xfer_server_register_segment(srv, "seg-b", &b)) {
        fprintf(stderr, "bench/tasks: cannot set up the server\n");
        exit(1);
    }
    memset(b.base, 0, SEGMENT_BYTES); /* fault the target pages in before timing */
    struct server_run run = {.srv = srv};
    pthread_t thread;
    pthread_create(&thread, NULL, serve, &run);
    struct cr_xfer_client_config cc = {.shm_disabled = !shm};
    struct cr_xfer_client *cli;
    if (cr_xfer_client_create(&cc, &cli) != CR_OK) exit(1);
    const uint64_t sizes[] = {64 * 1024, 4u << 20};
    for (size_t s = 0; s < 2; s++) {
        uint64_t size = sizes[s];
        for (uint64_t i = 0; i < size; i++) ((uint8_t *)a.base)[i] = (uint8_t)(i * 131 + 7);
        uint64_t checksum = XXH3_64bits(a.base, size);
        void *object = malloc(size);
        memcpy(object, a.base, size);
        double put[ROUNDS], copy[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) { /* interleaved: put, then copy, each round */
            put[r] = run_case(cli, cr_xfer_server_endpoint(srv), (uint64_t)(uintptr_t)a.base,
                              (uint64_t)(uintptr_t)b.base, size, false, checksum, object,
                              seconds);
            copy[r] = run_case(cli, cr_xfer_server_endpoint(srv), (uint64_t)(uintptr_t)a.base,
                               (uint64_t)(uintptr_t)b.base, size, true, checksum, object,
                               seconds);
        }
        qsort(put, ROUNDS, sizeof(double), by_double);
        qsort(copy, ROUNDS, sizeof(double), by_double);
        double p = put[ROUNDS / 2], c = copy[ROUNDS / 2];
        printf("%-3s %5llu KiB  put %9.0f ops/s %6.2f GB/s   copy task %9.0f tasks/s %6.2f GB/s"
               "   copy/put %.2f   (rounds: put %.0f-%.0f, copy %.0f-%.0f)\n",
               shm ? "shm" : "tcp", (unsigned long long)(size >> 10), p, p * (double)size / 1e9,
               c, c * (double)size / 1e9, p > 0 ? c / p : 0, put[0], put[ROUNDS - 1], copy[0],
               copy[ROUNDS - 1]);
        fflush(stdout);
        free(object);
    }
    cr_xfer_client_destroy(cli);
    atomic_store(&run.stop, true);
    pthread_join(thread, NULL);
    cr_xfer_server_destroy(srv);
    cr_xfer_segment_free(&a);
    cr_xfer_segment_free(&b);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.25;
    if (seconds <= 0) seconds = 0.25;
    cr_log_set_level(CR_LOG_WARN);
    run_transport(false, seconds);
    run_transport(true, seconds);
    return 0;
}
