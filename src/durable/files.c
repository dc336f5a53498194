/* Log and snapshot file formats: the pure scanners and the few system calls
 * around them (files.h). */
#include "durable/files.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crescent/error.h"

static const char log_magic[8] = {'C', 'R', 'E', 'S', 'W', 'A', 'L', '\0'};
static const char snap_magic[8] = {'C', 'R', 'E', 'S', 'S', 'N', 'A', 'P'};

/* Where scanned records go: apply (the decoded record) or body (the same
 * with the bytes it was decoded from). */
struct sink {
    cr_durable_apply_fn apply;
    cr_durable_body_fn body;
    void *ctx;
    /* A snapshot's lookahead (cr_durable_snapshot_load_ahead): each record
     * is shown to peek once decoded, and applied `ahead` records later. */
    cr_durable_peek_fn peek;
    uint32_t ahead;
};

static int sink_call(const struct sink *s, const struct cr_durable_record *rec,
                     const uint8_t *body, uint32_t body_len, char *err, size_t err_len) {
    return s->body != NULL ? s->body(s->ctx, rec, body, body_len, err, err_len)
                           : s->apply(s->ctx, rec, err, err_len);
}

static int log_pass(const uint8_t *data, size_t len, struct cr_durable_record *rec,
                    const struct sink *sink, struct cr_durable_log_scan *out, char *err,
                    size_t err_len);

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

static int log_scan(const uint8_t *data, size_t len, const struct sink *sink,
                    struct cr_durable_log_scan *out, char *err, size_t err_len) {
    assert(data != NULL || len == 0);
    assert(out != NULL && err != NULL && err_len > 0);
    memset(out, 0, sizeof(*out));
    int rc = check_header(data, len, log_magic, CR_DURABLE_LOG_HEADER, "log", err, err_len);
    if (rc != CR_OK) return rc;
    struct cr_durable_record *rec = malloc(sizeof(*rec)); /* ~6 KiB: off the stack */
    if (rec == NULL) {
        snprintf(err, err_len, "no memory to decode a record");
        return CR_ERR_NOMEM;
    }
    rc = log_pass(data, len, rec, sink, out, err, err_len);
    free(rec);
    return rc;
}

int cr_durable_log_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply, void *ctx,
                        struct cr_durable_log_scan *out, char *err, size_t err_len) {
    assert(apply != NULL);
    struct sink sink = {.apply = apply, .ctx = ctx};
    return log_scan(data, len, &sink, out, err, err_len);
}

int cr_durable_log_scan_bodies(const uint8_t *data, size_t len, cr_durable_body_fn apply,
                               void *ctx, struct cr_durable_log_scan *out, char *err,
                               size_t err_len) {
    assert(apply != NULL);
    struct sink sink = {.body = apply, .ctx = ctx};
    return log_scan(data, len, &sink, out, err, err_len);
}

static int log_pass(const uint8_t *data, size_t len, struct cr_durable_record *rec,
                    const struct sink *sink, struct cr_durable_log_scan *out, char *err,
                    size_t err_len) {
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
        int rc = sink_call(sink, rec, body, body_len, err, err_len);
        if (rc != CR_OK) return rc;
        out->records++;
        out->last_lsn = rec->lsn;
        pos += frame_len;
    }
}

/* One pass over a snapshot's frames: checks only (sink NULL) or applies.
 * rec holds 1 + sink->ahead records: record k is decoded into rec[k % that]
 * and applied once record k + ahead is decoded (the rest after the end
 * record checked), so a sink's peek sees each record ahead of its apply. */
static int snapshot_pass(const uint8_t *data, size_t len, uint64_t lsn,
                         struct cr_durable_record *rec, const struct sink *sink, char *err,
                         size_t err_len) {
    uint32_t ring = sink != NULL ? sink->ahead + 1 : 1;
    assert(ring <= CR_DURABLE_SNAPSHOT_AHEAD_MAX + 1);
    const uint8_t *bodies[CR_DURABLE_SNAPSHOT_AHEAD_MAX + 1];
    uint32_t body_lens[CR_DURABLE_SNAPSHOT_AHEAD_MAX + 1];
    size_t pos = CR_DURABLE_SNAPSHOT_HEADER;
    uint64_t count = 0, applied = 0;
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
        struct cr_durable_record *r = &rec[count % ring];
        if (cr_durable_decode(body, body_len, r, why, sizeof(why)) != CR_OK) {
            snprintf(err, err_len, "corrupt at byte %zu: %s", pos, why);
            return CR_ERR_PROTOCOL;
        }
        pos += frame_len;
        if (r->type == CR_DURABLE_SNAPSHOT_END) {
            if (r->lsn != lsn) {
                snprintf(err, err_len, "corrupt: its header says lsn %llu, its end record %llu",
                         (unsigned long long)lsn, (unsigned long long)r->lsn);
                return CR_ERR_PROTOCOL;
            }
            if (r->record_count != count || pos != len) {
                snprintf(err, err_len,
                         "corrupt: its end record counts %llu records, %llu precede it, "
                         "%zu bytes follow it",
                         (unsigned long long)r->record_count, (unsigned long long)count,
                         len - pos);
                return CR_ERR_PROTOCOL;
            }
            break;
        }
        if (r->type != CR_DURABLE_SEGMENT_MOUNT && r->type != CR_DURABLE_OBJECT_PUT &&
            r->type != CR_DURABLE_DRAIN_JOB) {
            snprintf(err, err_len, "corrupt at byte %zu: a record of type %u has no place in "
                     "a snapshot", pos - frame_len, (unsigned)r->type);
            return CR_ERR_PROTOCOL;
        }
        bodies[count % ring] = body;
        body_lens[count % ring] = body_len;
        count++;
        if (sink == NULL) continue;
        if (sink->peek != NULL) sink->peek(sink->ctx, r);
        if (count - applied < ring) continue;
        uint32_t at = (uint32_t)(applied % ring);
        int rc = sink_call(sink, &rec[at], bodies[at], body_lens[at], err, err_len);
        if (rc != CR_OK) return rc;
        applied++;
    }
    /* The end record took the slot of the record `ring` before it, which
     * was applied already: the ones after that are whole. */
    for (; sink != NULL && applied < count; applied++) {
        uint32_t at = (uint32_t)(applied % ring);
        int rc = sink_call(sink, &rec[at], bodies[at], body_lens[at], err, err_len);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

/* Checks the header and sets *lsn; *rec malloc'd for the passes (ring
 * records). */
static int snapshot_open(const uint8_t *data, size_t len, uint64_t *lsn, uint32_t ring,
                         struct cr_durable_record **rec, char *err, size_t err_len) {
    assert(data != NULL || len == 0);
    assert(lsn != NULL && err != NULL && err_len > 0);
    *rec = NULL;
    int rc = check_header(data, len, snap_magic, CR_DURABLE_SNAPSHOT_HEADER, "snapshot", err,
                          err_len);
    if (rc != CR_OK) return rc;
    *lsn = (uint64_t)get_u32(data + 16) | (uint64_t)get_u32(data + 20) << 32;
    if ((*rec = malloc(ring * sizeof(**rec))) == NULL) {
        snprintf(err, err_len, "no memory to decode a record");
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

int cr_durable_snapshot_scan(const uint8_t *data, size_t len, cr_durable_apply_fn apply,
                             void *ctx, uint64_t *lsn, char *err, size_t err_len) {
    assert(apply != NULL);
    struct cr_durable_record *rec;
    int rc = snapshot_open(data, len, lsn, 1, &rec, err, err_len);
    if (rc != CR_OK) return rc;
    /* Check all of it first: a bad snapshot must apply nothing. */
    struct sink sink = {.apply = apply, .ctx = ctx};
    rc = snapshot_pass(data, len, *lsn, rec, NULL, err, err_len);
    if (rc == CR_OK) rc = snapshot_pass(data, len, *lsn, rec, &sink, err, err_len);
    free(rec);
    return rc;
}

int cr_durable_snapshot_load(const uint8_t *data, size_t len, cr_durable_body_fn apply,
                             void *ctx, uint64_t *lsn, char *err, size_t err_len) {
    assert(apply != NULL);
    struct cr_durable_record *rec;
    int rc = snapshot_open(data, len, lsn, 1, &rec, err, err_len);
    if (rc != CR_OK) return rc;
    struct sink sink = {.body = apply, .ctx = ctx};
    rc = snapshot_pass(data, len, *lsn, rec, &sink, err, err_len);
    free(rec);
    return rc;
}

int cr_durable_snapshot_load_ahead(const uint8_t *data, size_t len, uint32_t ahead,
                                   cr_durable_peek_fn peek, cr_durable_body_fn apply, void *ctx,
                                   uint64_t *lsn, char *err, size_t err_len) {
    assert(apply != NULL && ahead <= CR_DURABLE_SNAPSHOT_AHEAD_MAX);
    struct cr_durable_record *rec;
    int rc = snapshot_open(data, len, lsn, ahead + 1, &rec, err, err_len);
    if (rc != CR_OK) return rc;
    struct sink sink = {.body = apply, .ctx = ctx, .peek = peek, .ahead = ahead};
    rc = snapshot_pass(data, len, *lsn, rec, &sink, err, err_len);
    free(rec);
    return rc;
}

/* The end record: a frame header and a body of type, lsn and count. */
#define SNAPSHOT_END_FRAME (CR_DURABLE_FRAME_HEADER + 1u + 8u + 8u)

uint64_t cr_durable_snapshot_count_hint(const uint8_t *data, size_t len) {
    if (data == NULL || len < CR_DURABLE_SNAPSHOT_HEADER + SNAPSHOT_END_FRAME) return 0;
    const uint8_t *p = data + len - SNAPSHOT_END_FRAME, *body;
    uint32_t body_len;
    size_t frame_len;
    if (cr_durable_frame_next(p, SNAPSHOT_END_FRAME, &body, &body_len, &frame_len) !=
            CR_DURABLE_FRAME_OK ||
        frame_len != SNAPSHOT_END_FRAME || body[0] != CR_DURABLE_SNAPSHOT_END)
        return 0;
    uint64_t count = (uint64_t)get_u32(body + 9) | (uint64_t)get_u32(body + 13) << 32;
    uint64_t most = len / (CR_DURABLE_FRAME_HEADER + 9u); /* no record is shorter */
    return count < most ? count : most;
}

/* ---- files ------------------------------------------------------------------ */

/* Opens path read-only and stats it; -1 with the reason in err. */
static int open_for_reading(const char *path, struct stat *st, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Reads the whole file into a buffer from malloc or (big) from mmap. */
static int read_whole(const char *path, bool big, uint8_t **data, size_t *len, char *err,
                      size_t err_len) {
    assert(path != NULL && data != NULL && len != NULL);
    *data = NULL;
    *len = 0;
    struct stat st;
    int fd = open_for_reading(path, &st, err, err_len);
    if (fd < 0) return CR_ERR_IO;
    size_t n = (size_t)st.st_size;
    uint8_t *buf;
    if (big) {
        /* Its pages faulted in 2 MiB at a time where the kernel allows
         * (a 4 KiB fault per page was a tenth of a restart's time in a VM,
         * bench/RESULTS.md). */
        buf = mmap(NULL, n > 0 ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
        if (buf == MAP_FAILED) buf = NULL;
#ifdef MADV_HUGEPAGE
        if (buf != NULL) (void)madvise(buf, n > 0 ? n : 1, MADV_HUGEPAGE); /* a hint */
#endif
    } else {
        buf = malloc(n > 0 ? n : 1);
    }
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
            if (big) cr_durable_big_free(buf, n);
            else free(buf);
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

int cr_durable_read_file(const char *path, uint8_t **data, size_t *len, char *err,
                         size_t err_len) {
    return read_whole(path, false, data, len, err, err_len);
}

int cr_durable_read_big(const char *path, uint8_t **data, size_t *len, char *err,
                        size_t err_len) {
    return read_whole(path, true, data, len, err, err_len);
}

int cr_durable_map_snapshot(const char *path, uint8_t **data, size_t *len, char *err,
                            size_t err_len) {
    assert(path != NULL && data != NULL && len != NULL);
    *data = NULL;
    *len = 0;
    struct stat st;
    int fd = open_for_reading(path, &st, err, err_len);
    if (fd < 0) return CR_ERR_IO;
    if (st.st_size == 0) { /* nothing to map: refused as the reader refuses it */
        close(fd);
        return read_whole(path, true, data, len, err, err_len);
    }
    size_t n = (size_t)st.st_size;
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) {
        snprintf(err, err_len, "%s: cannot map its %zu bytes: %s", path, n, strerror(e));
        return e == ENOMEM ? CR_ERR_NOMEM : CR_ERR_IO;
    }
    *data = p;
    *len = n;
    return CR_OK;
}

void cr_durable_big_free(uint8_t *data, size_t len) {
    if (data != NULL) munmap(data, len > 0 ? len : 1);
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
