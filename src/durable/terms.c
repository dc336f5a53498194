/* The terms a master has seen and written under (see terms.h). */
#include "durable/terms.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/le.h"
#include "crescent/error.h"
#include "durable/files.h"

static const uint8_t terms_magic[8] = {'C', 'R', 'E', 'S', 'T', 'E', 'R', 'M'};

bool cr_terms_see(struct cr_terms *t, uint64_t term) {
    assert(t != NULL);
    if (term <= t->highest) return false;
    t->highest = term;
    return true;
}

bool cr_terms_note(struct cr_terms *t, uint64_t term, uint64_t first_lsn) {
    assert(t != NULL && first_lsn > 0);
    bool changed = cr_terms_see(t, term);
    uint32_t n = t->count;
    while (n > 0 && t->e[n - 1].first_lsn >= first_lsn) n--;
    if (n > 0 && t->e[n - 1].term > term) return changed; /* an older leader's: refused earlier */
    if (n != t->count) changed = true;
    t->count = n;
    if (n > 0 && t->e[n - 1].term == term) return changed;
    if (t->count == CR_TERMS_MAX) {
        /* Forget the oldest: its lsns count as of no known term. */
        memmove(&t->e[0], &t->e[1], (CR_TERMS_MAX - 1) * sizeof(t->e[0]));
        t->count--;
    }
    t->e[t->count++] = (struct cr_term_start){.term = term, .first_lsn = first_lsn};
    return true;
}

/* The index of the entry that covers lsn, or -1 when none does. */
static int32_t entry_at(const struct cr_terms *t, uint64_t lsn) {
    int32_t at = -1;
    for (uint32_t i = 0; i < t->count && t->e[i].first_lsn <= lsn; i++) at = (int32_t)i;
    return at;
}

bool cr_terms_note_as(struct cr_terms *t, const struct cr_terms *from, uint64_t fallback,
                      uint64_t first_lsn, uint64_t last_lsn) {
    assert(t != NULL && from != NULL && first_lsn > 0);
    int32_t at = entry_at(from, first_lsn);
    bool changed = cr_terms_note(t, at >= 0 ? from->e[at].term : fallback, first_lsn);
    for (uint32_t i = (uint32_t)(at + 1); i < from->count && from->e[i].first_lsn <= last_lsn;
         i++)
        changed |= cr_terms_note(t, from->e[i].term, from->e[i].first_lsn);
    return changed;
}

uint64_t cr_terms_agree(const struct cr_terms *a, uint64_t a_last, const struct cr_terms *b,
                        uint64_t b_last) {
    assert(a != NULL && b != NULL);
    uint64_t limit = a_last < b_last ? a_last : b_last;
    uint64_t lsn = 1;
    while (lsn <= limit) {
        int32_t ia = entry_at(a, lsn), ib = entry_at(b, lsn);
        if (ia < 0 || ib < 0 || a->e[ia].term != b->e[ib].term) return lsn - 1;
        /* Both hold one term up to the next entry of either. */
        uint64_t next = UINT64_MAX;
        if ((uint32_t)(ia + 1) < a->count) next = a->e[ia + 1].first_lsn;
        if ((uint32_t)(ib + 1) < b->count && b->e[ib + 1].first_lsn < next)
            next = b->e[ib + 1].first_lsn;
        if (next > limit) return limit;
        lsn = next;
    }
    return limit;
}

void cr_terms_put_entries(const struct cr_terms *t, uint8_t *out) {
    for (uint32_t i = 0; i < t->count; i++) {
        cr_le_put_u64(out + i * CR_TERMS_ENTRY, t->e[i].term);
        cr_le_put_u64(out + i * CR_TERMS_ENTRY + 8, t->e[i].first_lsn);
    }
}

bool cr_terms_get_entries(const uint8_t *p, uint32_t n, struct cr_terms *out) {
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    if (n > CR_TERMS_MAX) return false;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t term = cr_le_get_u64(p + i * CR_TERMS_ENTRY);
        uint64_t first = cr_le_get_u64(p + i * CR_TERMS_ENTRY + 8);
        if (first == 0 || (i > 0 && (term <= out->e[i - 1].term ||
                                     first <= out->e[i - 1].first_lsn)))
            return false;
        out->e[i] = (struct cr_term_start){.term = term, .first_lsn = first};
    }
    out->count = n;
    return true;
}

size_t cr_terms_encode(const struct cr_terms *t, uint8_t out[CR_TERMS_FILE_MAX]) {
    assert(t != NULL && t->count <= CR_TERMS_MAX);
    memcpy(out, terms_magic, sizeof(terms_magic));
    cr_le_put_u32(out + 8, CR_TERMS_FORMAT);
    cr_le_put_u32(out + 12, t->count);
    cr_le_put_u64(out + 16, t->highest);
    cr_terms_put_entries(t, out + CR_TERMS_HEADER);
    size_t len = CR_TERMS_HEADER + (size_t)t->count * CR_TERMS_ENTRY;
    cr_le_put_u64(out + len, XXH3_64bits(out, len));
    return len + 8;
}

int cr_terms_decode(const uint8_t *data, size_t len, struct cr_terms *out, char *err,
                    size_t err_len) {
    assert(data != NULL || len == 0);
    assert(out != NULL);
    if (len < CR_TERMS_HEADER + 8 || memcmp(data, terms_magic, sizeof(terms_magic)) != 0) {
        snprintf(err, err_len, "is not a term history (%zu bytes, wrong length or magic)", len);
        return CR_ERR_PROTOCOL;
    }
    uint32_t format = cr_le_get_u32(data + 8), n = cr_le_get_u32(data + 12);
    if (format != CR_TERMS_FORMAT) {
        snprintf(err, err_len, "has format %u; this crescentd reads format %u (a newer "
                 "version wrote it)", format, CR_TERMS_FORMAT);
        return CR_ERR_PROTOCOL;
    }
    if (n > CR_TERMS_MAX || len != CR_TERMS_HEADER + (size_t)n * CR_TERMS_ENTRY + 8) {
        snprintf(err, err_len, "is %zu bytes for %u entries (truncated or corrupt)", len, n);
        return CR_ERR_PROTOCOL;
    }
    size_t body = len - 8;
    if (XXH3_64bits(data, body) != cr_le_get_u64(data + body)) {
        snprintf(err, err_len, "fails its checksum (corrupt)");
        return CR_ERR_PROTOCOL;
    }
    struct cr_terms t;
    if (!cr_terms_get_entries(data + CR_TERMS_HEADER, n, &t)) {
        snprintf(err, err_len, "holds terms or lsns that do not increase (corrupt)");
        return CR_ERR_PROTOCOL;
    }
    t.highest = cr_le_get_u64(data + 16);
    if (n > 0 && t.e[n - 1].term > t.highest) {
        snprintf(err, err_len, "says the highest term is %llu below its term %llu (corrupt)",
                 (unsigned long long)t.highest, (unsigned long long)t.e[n - 1].term);
        return CR_ERR_PROTOCOL;
    }
    *out = t;
    return CR_OK;
}

int cr_terms_load(const char *dir, struct cr_terms *out, char *err, size_t err_len) {
    assert(dir != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, CR_TERMS_FILE);
    if (access(path, F_OK) != 0 && errno == ENOENT) return CR_OK; /* first start */
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = cr_durable_read_file(path, &data, &len, err, err_len);
    if (rc != CR_OK) return rc;
    char why[160];
    rc = cr_terms_decode(data, len, out, why, sizeof(why));
    free(data);
    if (rc != CR_OK)
        snprintf(err, err_len, "%s %s; the highest term seen (the fencing token) is unknown, "
                 "so this master could follow a stale leader: restore the file, or move the "
                 "whole state directory away to start this master empty", path, why);
    return rc;
}

int cr_terms_store(const char *dir, const struct cr_terms *t, char *err, size_t err_len) {
    assert(dir != NULL && t != NULL);
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, CR_TERMS_FILE);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        snprintf(err, err_len, "%s: the state directory's path is too long", dir);
        return CR_ERR_INVALID_PARAMS;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    uint8_t buf[CR_TERMS_FILE_MAX];
    size_t len = cr_terms_encode(t, buf);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len && fsync(fd) == 0;
    int saved = errno;
    if (fd >= 0) close(fd);
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        snprintf(err, err_len, "%s: cannot write the term history: %s", path, strerror(saved));
        unlink(tmp);
        return CR_ERR_IO;
    }
    return cr_durable_sync_dir(dir, err, err_len);
}
