/* bench/tasks_master: copy and move tasks through the master, next to Put,
 * in the same run.
 *
 * Starts crescentd (no local segment) and two crescent-store processes
 * (seg0, seg1: 1 GiB each, --ping-interval-ms 5) from BIN_DIR, then for
 * 64 KiB and 4 MiB objects runs ROUNDS interleaved rounds of:
 *   put   - N cr_client_put of fresh keys onto seg0 (libcrescent's data plane)
 *   copy  - N CreateCopyTask seg0 -> seg1 at once, then QueryTask each until
 *           it ends: tasks/s and GB/s from the first create to the last end
 *   put   - N more keys onto seg0
 *   move  - N CreateMoveTask seg0 -> seg1, timed the same way
 * and removes the round's keys.  It prints the medians of the rounds.  The
 * tasks run on crescent-store 0 (it holds the sources), one after another,
 * taken 16 at a time with its heartbeat Ping (a full round pings again at
 * once); so a task's figure is the whole real path: RPC create, hand-out,
 * read + XXH3 + write through the transfer layer, report, commit, query.
 *
 *   zig build && zig build bench && ./zig-out/bench/tasks_master [BIN_DIR] [ROUNDS]
 *   (BIN_DIR default zig-out/bin, ROUNDS default 5; N = 2048 of 64 KiB, 64 of 4 MiB) */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crescent/client.h"
#include "crescent/error.h"
#include "harness.h"

#define ROUNDS_MAX 9
#define PROCS 3

struct size_case {
    const char *name;
    size_t bytes;
    int count; /* objects per phase */
};

static const struct size_case CASES[] = {
    {"64KiB", 64u << 10, 2048},
    {"4MiB", 4u << 20, 64},
};

static pid_t procs[PROCS];

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("tasks_master: a free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts argv[0] from bin_dir with its output going to log_path. */
static pid_t spawn(const char *bin_dir, char *const argv[], const char *log_path) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", bin_dir, argv[0]);
    pid_t pid = fork();
    if (pid == 0) {
        int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log >= 0) dup2(log, 1), dup2(log, 2);
        execv(path, argv);
        fprintf(stderr, "tasks_master: cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        perror("tasks_master: fork");
        exit(1);
    }
    return pid;
}

static void stop_all(void) {
    for (int i = PROCS; i-- > 0;)
        if (procs[i] > 0) {
            kill(procs[i], SIGTERM);
            waitpid(procs[i], NULL, 0);
            procs[i] = 0;
        }
}

static void die(const char *what, cr_client *c, int rc) {
    fprintf(stderr, "tasks_master: %s: %s (%s)\n", what, cr_strerror(rc),
            c != NULL ? cr_client_last_error(c) : "");
    stop_all();
    exit(1);
}

/* Puts key onto `segment` (preferred) and says whether it landed there. */
static bool put_on(cr_client *c, const char *key, const void *data, size_t len,
                   const char *segment) {
    struct cr_replicate_config cfg = {.replica_num = 1, .preferred_segment = segment};
    int rc = cr_client_put(c, NULL, key, data, len, &cfg);
    if (rc != CR_OK) return false;
    struct cr_replica_list list;
    if (cr_client_get_replica_list(c, NULL, key, &list) != CR_OK) return false;
    bool there = list.count == 1 && list.replicas[0].handle_count > 0 &&
                 strcmp(list.replicas[0].handles[0].segment_name, segment) == 0;
    cr_client_replica_list_free(&list);
    return there;
}

/* Waits (up to 60 s) until both store servers' segments take puts. */
static void wait_ready(cr_client *c) {
    static const char probe[4096];
    for (int seg = 0; seg < 2; seg++) {
        char name[8], key[32];
        snprintf(name, sizeof(name), "seg%d", seg);
        snprintf(key, sizeof(key), "probe-%d", seg);
        uint64_t deadline = bench_now_ns() + 60000000000ull;
        while (!put_on(c, key, probe, sizeof(probe), name)) {
            if (bench_now_ns() > deadline) die("the store servers never mounted", c, CR_ERR_TIMEOUT);
            (void)cr_client_remove(c, NULL, key, false);
            usleep(50000);
        }
        (void)cr_client_remove(c, NULL, key, false);
    }
}

/* N puts of prefix-i onto seg0; returns the elapsed ns. */
static uint64_t put_phase(cr_client *c, const struct size_case *sc, const char *prefix,
                          const void *data) {
    struct cr_replicate_config cfg = {.replica_num = 1, .preferred_segment = "seg0"};
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < sc->count; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        int rc = cr_client_put(c, NULL, key, data, sc->bytes, &cfg);
        if (rc != CR_OK) die("put", c, rc);
    }
    return bench_now_ns() - t0;
}

/* N copy (or move) tasks seg0 -> seg1 of prefix-i, then each queried until
 * it ends; returns the elapsed ns.  A FAILED task ends the benchmark. */
static uint64_t task_phase(cr_client *c, const struct size_case *sc, const char *prefix,
                           bool move) {
    uint8_t (*ids)[CR_CLIENT_ID_BYTES] = calloc((size_t)sc->count, sizeof(*ids));
    if (ids == NULL) die("memory", NULL, CR_ERR_NOMEM);
    static const char *const targets[] = {"seg1"};
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < sc->count; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        int rc = move ? cr_client_create_move_task(c, NULL, key, "seg0", "seg1", ids[i])
                      : cr_client_create_copy_task(c, NULL, key, "seg0", targets, 1, ids[i]);
        if (rc != CR_OK) die(move ? "CreateMoveTask" : "CreateCopyTask", c, rc);
    }
    for (int i = 0; i < sc->count; i++) {
        struct cr_task_info info;
        for (;;) {
            int rc = cr_client_query_task(c, ids[i], &info);
            if (rc != CR_OK) die("QueryTask", c, rc);
            if (info.status == CR_CLIENT_TASK_SUCCESS) break;
            if (info.status == CR_CLIENT_TASK_FAILED) {
                fprintf(stderr, "tasks_master: a task FAILED: %s\n", info.message);
                stop_all();
                exit(1);
            }
            usleep(200);
        }
    }
    uint64_t elapsed = bench_now_ns() - t0;
    free(ids);
    return elapsed;
}

static void remove_phase(cr_client *c, const struct size_case *sc, const char *prefix) {
    for (int i = 0; i < sc->count; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        (void)cr_client_remove(c, NULL, key, false);
    }
}

static void print_rate(const char *what, const struct size_case *sc, double ops_s) {
    char name[64];
    snprintf(name, sizeof(name), "tasks_master %-5s %s", what, sc->name);
    printf("%-44s %14.1f ops/s  %8.3f GB/s\n", name, ops_s, ops_s * (double)sc->bytes / 1e9);
}

static void run_case(cr_client *c, const struct size_case *sc, int rounds) {
    void *data = malloc(sc->bytes);
    if (data == NULL) die("memory", NULL, CR_ERR_NOMEM);
    for (size_t i = 0; i < sc->bytes; i++) ((uint8_t *)data)[i] = (uint8_t)(i * 131u + 7u);
    double put[2 * ROUNDS_MAX], copy[ROUNDS_MAX], move[ROUNDS_MAX];
    for (int r = 0; r < rounds; r++) {
        char cp[32], mv[32];
        snprintf(cp, sizeof(cp), "c%s-%d", sc->name, r);
        snprintf(mv, sizeof(mv), "m%s-%d", sc->name, r);
        put[2 * r] = sc->count / ((double)put_phase(c, sc, cp, data) / 1e9);
        copy[r] = sc->count / ((double)task_phase(c, sc, cp, false) / 1e9);
        put[2 * r + 1] = sc->count / ((double)put_phase(c, sc, mv, data) / 1e9);
        move[r] = sc->count / ((double)task_phase(c, sc, mv, true) / 1e9);
        remove_phase(c, sc, cp);
        remove_phase(c, sc, mv);
    }
    print_rate("put", sc, bench_median(put, 2 * rounds));
    print_rate("copy", sc, bench_median(copy, rounds));
    print_rate("move", sc, bench_median(move, rounds));
    free(data);
}

static void print_load(const char *when) {
    char buf[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL && fgets(buf, sizeof(buf), f) != NULL) printf("# load average %s: %s", when, buf);
    if (f != NULL) fclose(f);
}

int main(int argc, char **argv) {
    const char *bin_dir = argc > 1 ? argv[1] : "zig-out/bin";
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "usage: tasks_master [BIN_DIR] [ROUNDS 1..%d]\n", ROUNDS_MAX);
        return 2;
    }
    char rpc[64], http[32], pub[32], replay[32];
    snprintf(rpc, sizeof(rpc), "tcp://127.0.0.1:%d", free_port());
    snprintf(http, sizeof(http), "127.0.0.1:%d", free_port());
    snprintf(pub, sizeof(pub), "tcp://127.0.0.1:%d", free_port());
    snprintf(replay, sizeof(replay), "tcp://127.0.0.1:%d", free_port());
    char *daemon[] = {"crescentd", "--rpc-address", rpc, "--http-address", http,
                      "--event-address", pub, "--replay-address", replay,
                      "--local-segment-size", "0", "--no-pin", NULL};
    procs[0] = spawn(bin_dir, daemon, "/tmp/tasks_master-crescentd.log");
    for (int i = 0; i < 2; i++) {
        char name[8], log[64];
        snprintf(name, sizeof(name), "seg%d", i);
        snprintf(log, sizeof(log), "/tmp/tasks_master-store%d.log", i);
        char *store[] = {"crescent-store", "--master", rpc, "--segment-name", name,
                         "--segment-size", "1G", "--no-pin", "--ping-interval-ms", "5", NULL};
        procs[1 + i] = spawn(bin_dir, store, log);
    }
    cr_client *c = NULL;
    char err[256];
    int rc = cr_client_open(rpc, NULL, &c, err, sizeof(err));
    if (rc != CR_OK) {
        fprintf(stderr, "tasks_master: %s\n", err);
        stop_all();
        return 1;
    }
    (void)cr_client_set_timeout(c, 30000);
    wait_ready(c);
    print_load("before");
    printf("# %d rounds, medians; crescentd + 2 crescent-store, tasks run by store 0\n", rounds);
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) run_case(c, &CASES[i], rounds);
    print_load("after");
    cr_client_close(c);
    stop_all();
    return 0;
}
