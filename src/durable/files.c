/* Log and snapshot file formats: the pure scanners and the few system calls
 * around them (files.h). */
#include "durable/files.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crescent/error.h"

static const char log_magic[8] = {'C', 'R', 'E', 'S', 'W', 'A', 'L', '\0'};
static const char snap_magic[8] = {'C', 'R', 'E', 'S', 'S', 'N', 'A', 'P'};

static int log_pass(const uint8_t *data, size_t len, struct cr_durable_record *rec,
                    cr_durable_apply_fn apply, void *ctx, struct cr_durable_log_scan *out,
                    char *err, size_t err_len);

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void cr_durable_log_header(uint8_t out[CR_DURABLE_LOG_HEADER]) {
    memcpy(out, log_magic, 8);
    put_u32(out + 8, CR_DURABLE_FORMAT);
    put_u32(out + 12, 0);
}

void cr_durable_snapshot_header(uint64_t lsn, uint8_t out[CR_DURABLE_SNAPSHOT_HEADER]) {
    memcpy(out, snap_magic, 8);
    put_u32(out + 8, CR_DURABLE_FORMAT);
    put_u32(out + 12, 0);
    put_u32(out + 16, (uint32_t)lsn);
    put_u32(out + 20, (uint32_t)(lsn >> 32));
}

/* Checks a header's magic and format.  Returns CR_OK or CR_ERR_PROTOCOL. */
static int check_header(const uint8_t *data, size_t len, const char magic[8], size_t header_len,
                        const char *kind, char *err, size_t err_len) {
    if (len < header_len || memcmp(data, magic, 8) != 0) {
        snprintf(err, err_len, "not a crescent %s file (%s)", kind,
                 len < header_len ? "shorter than its header" : "wrong magic bytes");
        return CR_ERR_PROTOCOL;
    }
    uint32_t format = get_u32(data + 8);
    if (format != CR_DURABLE_FORMAT) {
        snprintf(err, err_len,
                 "%s format %u, but this crescentd reads format %u%s", kind, format,
                 CR_DURABLE_FORMAT,
                 format > CR_DURABLE_FORMAT ? " (written by a newer crescentd: run that one)"
                                            : "");
        return CR_ERR_PROTOCOL;
    }
    if (get_u32(data + 12) != 0) {
        snprintf(err, err_len, "%s header's reserved word is not 0 (corrupt, or a newer format)",
                 kind);
        return CR_ERR_PROTOCOL;
    }
    return CR_OK;
}

int cr_durable_log_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply, void *ctx,
                        struct cr_durable_log_scan *out, char *err, size_t err_len) {
    assert(data != NULL || len == 0);
    assert(apply != NULL && out != NULL && err != NULL && err_len > 0);
    memset(out, 0, sizeof(*out));
    int rc = check_header(data, len, log_magic, CR_DURABLE_LOG_HEADER, "log", err, err_len);
    if (rc != CR_OK) return rc;
    struct cr_durable_record *rec = malloc(sizeof(*rec)); /* ~6 KiB: off the stack */
    if (rec == NULL) {
        snprintf(err, err_len, "no memory to decode a record");
        return CR_ERR_NOMEM;
    }
    rc = log_pass(data, len, rec, apply, ctx, out, err, err_len);
    free(rec);
    return rc;
}

static int log_pass(const uint8_t *data, size_t len, struct cr_durable_record *rec,
                    cr_durable_apply_fn apply, void *ctx, struct cr_durable_log_scan *out,
                    char *err, size_t err_len) {
    size_t pos = CR_DURABLE_LOG_HEADER;
    for (;;) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        enum cr_durable_frame_status st =
            cr_durable_frame_next(data + pos, len - pos, &body, &body_len, &frame_len);
        if (st != CR_DURABLE_FRAME_OK) {
            out->good_len = pos;
            out->tail = st;
            return CR_OK;
        }
        char why[160];
        if (cr_durable_decode(body, body_len, rec, why, sizeof(why)) != CR_OK) {
            snprintf(err, err_len, "whole record at byte %zu does not decode: %s", pos, why);
            return CR_ERR_PROTOCOL;
        }
        if (rec->type == CR_DURABLE_SNAPSHOT_END ||
            (out->records > 0 && rec->lsn <= out->last_lsn)) {
            snprintf(err, err_len, "record at byte %zu (lsn %llu) is out of place", pos,
                     (unsigned long long)rec->lsn);
            return CR_ERR_PROTOCOL;
        }
        int rc = apply(ctx, rec, err, err_len);
        if (rc != CR_OK) return rc;
        out->records++;
        out->last_lsn = rec->lsn;
        pos += frame_len;
    }
}

/* One pass over a snapshot's frames: checks only (apply NULL) or applies. */
static int snapshot_pass(const uint8_t *data, size_t len, uint64_t lsn,
                         struct cr_durable_record *rec, cr_durable_apply_fn apply, void *ctx,
                         char *err, size_t err_len) {
    size_t pos = CR_DURABLE_SNAPSHOT_HEADER;
    uint64_t count = 0;
    for (;;) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        enum cr_durable_frame_status st =
            cr_durable_frame_next(data + pos, len - pos, &body, &body_len, &frame_len);
        if (st == CR_DURABLE_FRAME_END) {
            snprintf(err, err_len, "truncated: it ends at byte %zu without its end record", pos);
            return CR_ERR_PROTOCOL;
        }
        if (st != CR_DURABLE_FRAME_OK) {
            snprintf(err, err_len, "corrupt at byte %zu: %s", pos,
                     cr_durable_frame_status_text(st));
            return CR_ERR_PROTOCOL;
        }
        char why[160];
        if (cr_durable_decode(body, body_len, rec, why, sizeof(why)) != CR_OK) {
            snprintf(err, err_len, "corrupt at byte %zu: %s", pos, why);
            return CR_ERR_PROTOCOL;
        }
        pos += frame_len;
        if (rec->type == CR_DURABLE_SNAPSHOT_END) {
            if (rec->lsn != lsn) {
                snprintf(err, err_len, "corrupt: its header says lsn %llu, its end record %llu",
                         (unsigned long long)lsn, (unsigned long long)rec->lsn);
                return CR_ERR_PROTOCOL;
            }
            if (rec->record_count != count || pos != len) {
                snprintf(err, err_len,
                         "corrupt: its end record counts %llu records, %llu precede it, "
                         "%zu bytes follow it",
                         (unsigned long long)rec->record_count, (unsigned long long)count,
                         len - pos);
                return CR_ERR_PROTOCOL;
            }
            return CR_OK;
        }
        if (rec->type != CR_DURABLE_SEGMENT_MOUNT && rec->type != CR_DURABLE_OBJECT_PUT) {
            snprintf(err, err_len, "corrupt at byte %zu: a record of type %u has no place in "
                     "a snapshot", pos - frame_len, (unsigned)rec->type);
            return CR_ERR_PROTOCOL;
        }
        count++;
        if (apply != NULL) {
            int rc = apply(ctx, rec, err, err_len);
            if (rc != CR_OK) return rc;
        }
    }
}

int cr_durable_snapshot_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply,
                             void *ctx, uint64_t *lsn, char *err, size_t err_len) {
    assert(data != NULL || len == 0);
    assert(apply != NULL && lsn != NULL && err != NULL && err_len > 0);
    int rc = check_header(data, len, snap_magic, CR_DURABLE_SNAPSHOT_HEADER, "snapshot", err,
                          err_len);
    if (rc != CR_OK) return rc;
    *lsn = (uint64_t)get_u32(data + 16) | (uint64_t)get_u32(data + 20) << 32;
    struct cr_durable_record *rec = malloc(sizeof(*rec));
    if (rec == NULL) {
        snprintf(err, err_len, "no memory to decode a record");
        return CR_ERR_NOMEM;
    }
    /* Check all of it first: a bad snapshot must apply nothing. */
    rc = snapshot_pass(data, len, *lsn, rec, NULL, NULL, err, err_len);
    if (rc == CR_OK) rc = snapshot_pass(data, len, *lsn, rec, apply, ctx, err, err_len);
    free(rec);
    return rc;
}

/* ---- files ------------------------------------------------------------------ */

int cr_durable_read_file(const char *path, uint8_t **data, size_t *len, char *err,
                         size_t err_len) {
    assert(path != NULL && data != NULL && len != NULL);
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_IO;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        close(fd);
        snprintf(err, err_len, "%s: no memory for its %zu bytes", path, n);
        return CR_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, err_len, "%s: read failed at byte %zu: %s", path, got,
                     r < 0 ? strerror(errno) : "file shrank");
            free(buf);
            close(fd);
            return CR_ERR_IO;
        }
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = n;
    return CR_OK;
}

int cr_durable_sync_dir(const char *dir, char *err, size_t err_len) {
    assert(dir != NULL);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(err, err_len, "%s: cannot fsync the directory: %s", dir, strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_IO;
    }
    close(fd);
    return CR_OK;
}

int cr_durable_truncate(const char *path, size_t len, char *err, size_t err_len) {
    assert(path != NULL);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 || fsync(fd) != 0) {
        snprintf(err, err_len, "%s: cannot truncate to %zu bytes: %s", path, len,
                 strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_IO;
    }
    close(fd);
    return CR_OK;
}
