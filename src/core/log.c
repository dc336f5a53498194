/* Leveled logging (see log.h).  The level is read with relaxed atomics so any
 * thread may log; each line is written with one fprintf so lines do not interleave. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

static _Atomic int log_level = CR_LOG_INFO;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

bool cr_log_parse_level(const char *text, enum cr_log_level *out) {
    if (text == NULL) return false;
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(text, level_names[i]) == 0) {
            *out = (enum cr_log_level)i;
            return true;
        }
    }
    if (strcasecmp(text, "WARNING") == 0) {
        *out = CR_LOG_WARN;
        return true;
    }
    return false;
}

bool cr_log_init_from_env(void) {
    const char *text = getenv("CRESCENT_LOG_LEVEL");
    if (text == NULL || *text == '\0') return true;
    enum cr_log_level level;
    if (!cr_log_parse_level(text, &level)) return false;
    cr_log_set_level(level);
    return true;
}

void cr_log_set_level(enum cr_log_level level) {
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum cr_log_level cr_log_get_level(void) {
    return (enum cr_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

void cr_log(enum cr_log_level level, const char *module, const char *fmt, ...) {
    if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed)) return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);

    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %-9s %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000,
            level_names[level], module, message);
}

bool cr_log_ratelimit(uint64_t *last_ns, uint64_t now_ns, uint64_t interval_ns) {
    if (*last_ns != 0 && now_ns - *last_ns < interval_ns) return false;
    *last_ns = now_ns;
    return true;
}
