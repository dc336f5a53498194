/* crescentctl put / get: object bytes between a file (or stdin/stdout) and the
 * store, through libcrescent's cr_client_put / cr_client_get (see
 * crescentctl.h).  Output is written only after the object was read whole
 * and its checksum verified, so a failed get never leaves partial bytes.
 *
 * Progress: objects of PROGRESS_MIN_BYTES or more get a progress line on
 * stderr, rewritten in place, when stderr is a terminal (never in pipes or
 * logs): bytes read from the input, then the transfer, then a summary. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd/crescentctl.h"
#include "crescent/client.h"

#define PROGRESS_MIN_BYTES (8u << 20)
#define READ_CHUNK (1u << 20)

struct progress {
    bool on;
    const char *what; /* "put KEY" */
    const char *key;
    struct timespec start;
};

static double seconds_since(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void progress_line(const struct progress *p, const char *phase, size_t bytes) {
    if (!p->on) return;
    fprintf(stderr, "\r\033[K%s %s: %s %.1f MiB", p->what, p->key, phase,
            (double)bytes / (1 << 20));
    fflush(stderr);
}

static void progress_done(const struct progress *p, size_t bytes) {
    if (!p->on) return;
    double s = seconds_since(&p->start);
    fprintf(stderr, "\r\033[K%s %s: %.1f MiB in %.2f s (%.0f MiB/s)\n", p->what, p->key,
            (double)bytes / (1 << 20), s, s > 0 ? (double)bytes / (1 << 20) / s : 0.0);
}

static void progress_init(struct progress *p, const char *what, const char *key) {
    *p = (struct progress){.on = isatty(STDERR_FILENO) == 1, .what = what, .key = key};
    clock_gettime(CLOCK_MONOTONIC, &p->start);
}

/* Reads all of `fd` into a malloc'd buffer.  Returns 0 or an errno. */
static int read_all(int fd, struct progress *p, uint8_t **out, size_t *len) {
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                     ? (size_t)st.st_size : READ_CHUNK;
    bool show = S_ISREG(st.st_mode) ? (size_t)st.st_size >= PROGRESS_MIN_BYTES : true;
    uint8_t *buf = malloc(cap);
    size_t n = 0;
    for (;;) {
        if (buf == NULL) return ENOMEM;
        if (n == cap) {
            uint8_t *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (grown == NULL) {
                free(buf);
                return ENOMEM;
            }
            buf = grown, cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n < READ_CHUNK ? cap - n : READ_CHUNK);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return e;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (show && n >= PROGRESS_MIN_BYTES) progress_line(p, "reading input", n);
    }
    *out = buf;
    *len = n;
    return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t len) {
    for (size_t done = 0; done < len;) {
        ssize_t put = write(fd, buf + done, len - done);
        if (put < 0 && errno == EINTR) continue;
        if (put < 0) return errno;
        done += (size_t)put;
    }
    return 0;
}

/* TIMEOUT or RPC_FAIL means crescentd did not answer or could not be reached
 * (exit 3); everything else was an answer or a transfer failure that the
 * message explains (exit 1). */
static int data_failed(cr_client *c, const char *command, int rc) {
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr); /* over a progress line */
    ctl_error(command, "%s", cr_client_last_error(c)[0] ? cr_client_last_error(c) : cr_strerror(rc));
    return rc == CR_ERR_TIMEOUT || rc == CR_ERR_RPC_FAIL ? CTL_EXIT_UNREACHABLE
                                                         : CTL_EXIT_SERVER_FAILURE;
}

int ctl_data_put(cr_client *c, bool json, const char *command, const char *tenant,
                 const char *key, const char *path, const struct cr_replicate_config *config) {
    bool stdin_input = strcmp(path, "-") == 0;
    int fd = stdin_input ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ctl_error(command, "cannot open '%s': %s", path, strerror(errno));
        return CTL_EXIT_USAGE;
    }
    struct progress p;
    progress_init(&p, command, key);
    uint8_t *data = NULL;
    size_t len = 0;
    int err = read_all(fd, &p, &data, &len);
    if (!stdin_input) close(fd);
    if (err != 0) {
        ctl_error(command, "cannot read '%s': %s", path, strerror(err));
        return CTL_EXIT_USAGE;
    }
    p.on = p.on && len >= PROGRESS_MIN_BYTES;
    progress_line(&p, "writing to the store", len);
    int rc = cr_client_put(c, tenant, key, data, len, config);
    free(data);
    if (rc != CR_OK) return data_failed(c, command, rc);
    progress_done(&p, len);
    if (json)
        ctl_emit(json_pack("{s:s, s:I}", "key", key, "size_bytes", (json_int_t)len));
    else
        printf("stored %s: %zu bytes\n", key, len);
    return CTL_EXIT_OK;
}

int ctl_data_get(cr_client *c, bool json, const char *command, const char *tenant,
                 const char *key, const char *path) {
    struct progress p;
    progress_init(&p, command, key);
    void *data = NULL;
    size_t len = 0;
    int rc = cr_client_get(c, tenant, key, &data, &len);
    if (rc != CR_OK) return data_failed(c, command, rc);
    p.on = p.on && len >= PROGRESS_MIN_BYTES;
    bool to_stdout = path == NULL || strcmp(path, "-") == 0;
    int fd = to_stdout ? STDOUT_FILENO : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : 0;
    if (err == 0) {
        progress_line(&p, "writing output", len);
        err = write_all(fd, data, len);
        if (!to_stdout && close(fd) != 0 && err == 0) err = errno;
    }
    free(data);
    if (err != 0) {
        ctl_error(command, "cannot write '%s': %s", to_stdout ? "stdout" : path, strerror(err));
        return CTL_EXIT_SERVER_FAILURE;
    }
    progress_done(&p, len);
    if (json && !to_stdout)
        ctl_emit(json_pack("{s:s, s:s, s:I}", "key", key, "file", path, "size_bytes",
                           (json_int_t)len));
    return CTL_EXIT_OK;
}
