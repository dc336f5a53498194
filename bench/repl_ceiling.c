/* The ceiling for a standby's lag (bench/RESULTS.md, "Standby lag"): the
 * same blocks a leader streams, at the same rate and size, over a bare
 * loopback TCP connection to another process that answers each read with an
 * 8-byte acknowledgement, as a standby's journal does, but with no log, no
 * store and no actor in between.  What it measures (block sent → its
 * acknowledgement read, CLOCK_MONOTONIC in the sender) is what this machine's
 * scheduler and loopback cost at that load; crescent's lag cannot be lower.
 *   repl_ceiling BLOCK_BYTES BLOCKS_PER_SECOND SECONDS [SENDER_CPU ACKER_CPU]
 * prints "p50_ms p99_ms max_ms blocks".  With the CPUs, the sender is pinned
 * to one and the acknowledging process to the other, as a leader and its
 * standby pinned with taskset (scripts/bench-replication.sh). */
#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BLOCKS (1u << 22)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The standby's side: reads whole blocks (an 8-byte sequence number, then
 * the rest), acknowledges the last whole one after each read. */
static void receiver(int fd, size_t block) {
    uint8_t *in = malloc(block * 64);
    size_t have = 0;
    uint64_t done = 0;
    for (;;) {
        ssize_t r = recv(fd, in + have, block * 64 - have, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        size_t whole = have / block;
        if (whole == 0) continue;
        memcpy(&done, in + (whole - 1) * block, sizeof(done));
        memmove(in, in + whole * block, have - whole * block);
        have -= whole * block;
        if (write_all(fd, &done, sizeof(done)) != 0) break;
    }
    free(in);
    _exit(0);
}

struct sender {
    int fd;
    uint64_t *sent_ns;
    uint64_t *lag_ns;
    volatile uint64_t count;
    uint64_t acked;
};

static void *ack_reader(void *arg) {
    struct sender *s = arg;
    uint64_t seq;
    for (;;) {
        size_t got = 0;
        while (got < sizeof(seq)) {
            ssize_t r = recv(s->fd, (uint8_t *)&seq + got, sizeof(seq) - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return NULL;
            got += (size_t)r;
        }
        uint64_t t = now_ns();
        while (s->acked <= seq && s->acked < MAX_BLOCKS) {
            s->lag_ns[s->acked] = t - s->sent_ns[s->acked];
            s->acked++;
        }
    }
}

/* Pins the calling process to one CPU; false (with a message) if it cannot. */
static bool pin(const char *cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)strtol(cpu, NULL, 10), &set);
    if (sched_setaffinity(0, sizeof(set), &set) == 0) return true;
    fprintf(stderr, "repl_ceiling: cannot pin to CPU %s: %s\n", cpu, strerror(errno));
    return false;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: repl_ceiling BLOCK_BYTES BLOCKS_PER_SECOND SECONDS "
                        "[SENDER_CPU ACKER_CPU]\n");
        return 2;
    }
    size_t block = strtoull(argv[1], NULL, 10);
    double rate = strtod(argv[2], NULL);
    double secs = strtod(argv[3], NULL);
    if (block < 8 || rate <= 0 || secs <= 0 || rate * secs >= MAX_BLOCKS) {
        fprintf(stderr, "repl_ceiling: BLOCK_BYTES >= 8, rate and seconds > 0, rate x seconds "
                        "< %u\n", MAX_BLOCKS);
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        perror("repl_ceiling: listen");
        return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        if (argc == 6 && !pin(argv[5])) _exit(1);
        int fd = accept(ls, NULL, NULL);
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        receiver(fd, block);
    }
    if (argc == 6 && !pin(argv[4])) return 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        perror("repl_ceiling: connect");
        return 1;
    }
    uint64_t n = (uint64_t)(rate * secs);
    struct sender s = {.fd = fd, .sent_ns = calloc(n, 8), .lag_ns = calloc(n, 8)};
    uint8_t *buf = calloc(1, block);
    pthread_t t;
    if (s.sent_ns == NULL || s.lag_ns == NULL || buf == NULL ||
        pthread_create(&t, NULL, ack_reader, &s) != 0)
        return 1;
    uint64_t start = now_ns(), gap = (uint64_t)(1e9 / rate);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t due = start + i * gap;
        struct timespec ts = {.tv_sec = (time_t)(due / 1000000000ull),
                              .tv_nsec = (long)(due % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
        memcpy(buf, &i, sizeof(i));
        s.sent_ns[i] = now_ns();
        if (write_all(fd, buf, block) != 0) break;
    }
    /* The last acknowledgements, then the numbers. */
    for (int i = 0; i < 200 && s.acked < n; i++) usleep(10000);
    shutdown(fd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(fd);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    uint64_t m = s.acked;
    if (m == 0) {
        printf("- - - 0\n");
        return 1;
    }
    qsort(s.lag_ns, m, 8, cmp);
    printf("%.3f %.3f %.3f %llu\n", s.lag_ns[m / 2] / 1e6, s.lag_ns[(m * 99) / 100] / 1e6,
           s.lag_ns[m - 1] / 1e6, (unsigned long long)m);
    free(s.sent_ns);
    free(s.lag_ns);
    free(buf);
    return 0;
}
