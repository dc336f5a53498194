/* Shared helpers for crescent's benchmarks: a monotonic clock, latency
 * percentiles and one report format, so every bench/ program prints results
 * that can be pasted into bench/RESULTS.md the same way.
 *
 * Header-only on purpose: each benchmark is one executable built from one
 * bench/<name>.c file plus the libraries it measures. */
#ifndef CRESCENT_BENCH_HARNESS_H
#define CRESCENT_BENCH_HARNESS_H

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread: for single-threaded microbenchmarks, a
 * steadier figure than wall time on a shared machine. */
static inline uint64_t bench_thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_u64_compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Latency samples in nanoseconds; sorted in place by bench_percentiles. */
struct bench_latency {
    uint64_t *samples_ns;
    size_t count;
    size_t capacity;
};

static inline void bench_latency_init(struct bench_latency *lat, size_t capacity) {
    assert(capacity > 0);
    lat->samples_ns = calloc(capacity, sizeof(uint64_t));
    assert(lat->samples_ns != NULL);
    lat->count = 0;
    lat->capacity = capacity;
}

/* Keeps the first `capacity` samples; callers size it for the whole run. */
static inline void bench_latency_add(struct bench_latency *lat, uint64_t ns) {
    if (lat->count < lat->capacity) lat->samples_ns[lat->count++] = ns;
}

static inline uint64_t bench_percentile(const struct bench_latency *lat, double p) {
    assert(lat->count > 0);
    size_t index = (size_t)(p * (double)(lat->count - 1) + 0.5);
    return lat->samples_ns[index];
}

static inline void bench_latency_free(struct bench_latency *lat) {
    free(lat->samples_ns);
    memset(lat, 0, sizeof(*lat));
}

/* Prints one result line:
 *   <name>  <ops/s>  p50 p99 p999 (or "-" when no latency was sampled). */
static inline void bench_report(const char *name, uint64_t ops, uint64_t elapsed_ns,
                                struct bench_latency *lat) {
    double seconds = (double)elapsed_ns / 1e9;
    double rate = seconds > 0 ? (double)ops / seconds : 0;
    if (lat != NULL && lat->count > 0) {
        qsort(lat->samples_ns, lat->count, sizeof(uint64_t), bench_u64_compare);
        printf("%-44s %14.0f ops/s  p50 %8.2f us  p99 %8.2f us  p999 %8.2f us\n", name, rate,
               bench_percentile(lat, 0.50) / 1e3, bench_percentile(lat, 0.99) / 1e3,
               bench_percentile(lat, 0.999) / 1e3);
    } else {
        printf("%-44s %14.0f ops/s\n", name, rate);
    }
    fflush(stdout);
}

static int bench_double_compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorts them in place): of interleaved rounds. */
static inline double bench_median(double *v, int n) {
    assert(n > 0);
    qsort(v, (size_t)n, sizeof(double), bench_double_compare);
    return v[n / 2];
}

/* CPU time (user + system) the whole process has used, in ns: divided by
 * the ops of a case, it is the cost of one op on every thread together, a
 * steadier figure than ops/s on a shared machine. */
static inline uint64_t bench_cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

#endif
