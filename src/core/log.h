/* Leveled logging to stderr: one line per event, with time, level and module.
 *
 * The level comes from CRESCENT_LOG_LEVEL (DEBUG, INFO, WARN, ERROR; default
 * INFO) or cr_log_set_level.  Logging is not for hot paths: a message rate
 * that can be high is counted, and logged at most once a while (cr_log_ratelimit). */
#ifndef CRESCENT_CORE_LOG_H
#define CRESCENT_CORE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum cr_log_level { CR_LOG_DEBUG = 0, CR_LOG_INFO = 1, CR_LOG_WARN = 2, CR_LOG_ERROR = 3 };

/* Parses "DEBUG", "INFO", "WARN"/"WARNING", "ERROR" (any case). Returns false if unknown. */
bool cr_log_parse_level(const char *text, enum cr_log_level *out);

/* Reads CRESCENT_LOG_LEVEL; returns false (and keeps INFO) if it is set but invalid. */
bool cr_log_init_from_env(void);
void cr_log_set_level(enum cr_log_level level);
enum cr_log_level cr_log_get_level(void);

void cr_log(enum cr_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True at most once per `interval_ns` for one *last_ns cell (not thread-safe:
 * each cell belongs to one thread). */
bool cr_log_ratelimit(uint64_t *last_ns, uint64_t now_ns, uint64_t interval_ns);

#define CR_DEBUG(module, ...) cr_log(CR_LOG_DEBUG, module, __VA_ARGS__)
#define CR_INFO(module, ...) cr_log(CR_LOG_INFO, module, __VA_ARGS__)
#define CR_WARN(module, ...) cr_log(CR_LOG_WARN, module, __VA_ARGS__)
#define CR_ERROR(module, ...) cr_log(CR_LOG_ERROR, module, __VA_ARGS__)

#endif
