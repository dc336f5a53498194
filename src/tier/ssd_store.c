/* The SSD tier's files and index (see ssd_store.h). */
#include "tier/ssd_store.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
/* Inlined (the header-only mode of Debian's libxxhash-dev): the build targets
 * x86-64-v3, so the value's hash uses AVX2, about twice the speed of the
 * shared library's generic build; every read hashes the whole value. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/log.h"
#include "crescent/error.h"
#include "tier/ssd_header.h"

#define SUFFIX ".crs"
#define TMP_SUFFIX ".tmp"
#define NAME_MAX_BYTES 32u /* 16 hex digits and a suffix */

struct entry {
    uint64_t id;
    uint64_t value_len, value_xxh3;
    uint64_t file_bytes; /* header + value: what counts against capacity */
    uint64_t key_hash;
    uint8_t *key;        /* key bytes, then the tenant and its NUL */
    uint32_t key_len, tenant_len;
    uint64_t window_start_ms;
    uint32_t hits;
    struct entry *id_next, *key_next;
    struct entry *lru_prev, *lru_next; /* lru_head: most recent */
};

struct cr_ssd_store {
    char *dir;
    int dir_fd;
    uint64_t capacity;
    uint32_t promotion_hits;
    uint64_t window_ms;
    cr_ssd_evict_fn drop_hook; /* cr_ssd_set_drop_hook */
    void *drop_arg;
    uint64_t next_id;
    struct entry **by_id, **by_key;
    uint64_t buckets; /* a power of two, for both tables */
    struct entry *lru_head, *lru_tail;
    struct cr_ssd_stats stats;
};

static int fail(char *why, size_t why_len, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t why_len, int status, const char *fmt, ...) {
    if (why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return status;
}

static uint64_t key_hash(const char *tenant, const uint8_t *key, uint32_t key_len) {
    return XXH3_64bits_withSeed(key, key_len, XXH3_64bits(tenant, strlen(tenant)));
}
static uint64_t id_slot(const cr_ssd_store *s, uint64_t id) {
    return XXH3_64bits(&id, sizeof(id)) & (s->buckets - 1);
}
static const char *tenant_of(const struct entry *e) { return (const char *)e->key + e->key_len; }

static void name_of(uint64_t id, const char *suffix, char out[NAME_MAX_BYTES]) {
    snprintf(out, NAME_MAX_BYTES, "%016" PRIx64 "%s", id, suffix);
}

static void object_of(const struct entry *e, struct cr_ssd_object *o) {
    *o = (struct cr_ssd_object){.id = e->id, .key = e->key, .key_len = e->key_len,
                                .tenant = tenant_of(e), .value_len = e->value_len,
                                .value_xxh3 = e->value_xxh3};
}

/* ---- the index ---------------------------------------------------------- */

static bool grow(cr_ssd_store *s) {
    uint64_t n = s->buckets * 2;
    struct entry **by_id = calloc(n, sizeof(*by_id)), **by_key = calloc(n, sizeof(*by_key));
    if (by_id == NULL || by_key == NULL) {
        free(by_id);
        free(by_key);
        return false;
    }
    uint64_t old = s->buckets;
    struct entry **old_id = s->by_id;
    free(s->by_key);
    s->by_id = by_id;
    s->by_key = by_key;
    s->buckets = n;
    for (uint64_t b = 0; b < old; b++) {
        for (struct entry *e = old_id[b], *next; e != NULL; e = next) {
            next = e->id_next;
            uint64_t i = id_slot(s, e->id), k = e->key_hash & (n - 1);
            e->id_next = by_id[i];
            by_id[i] = e;
            e->key_next = by_key[k];
            by_key[k] = e;
        }
    }
    free(old_id);
    return true;
}

static struct entry *by_id(const cr_ssd_store *s, uint64_t id) {
    for (struct entry *e = s->by_id[id_slot(s, id)]; e != NULL; e = e->id_next)
        if (e->id == id) return e;
    return NULL;
}

static struct entry *by_key(const cr_ssd_store *s, const char *tenant, const uint8_t *key,
                            uint32_t key_len) {
    uint64_t h = key_hash(tenant, key, key_len);
    for (struct entry *e = s->by_key[h & (s->buckets - 1)]; e != NULL; e = e->key_next)
        if (e->key_hash == h && e->key_len == key_len && memcmp(e->key, key, key_len) == 0 &&
            strcmp(tenant_of(e), tenant) == 0)
            return e;
    return NULL;
}

static void lru_unlink(cr_ssd_store *s, struct entry *e) {
    if (e->lru_prev != NULL) e->lru_prev->lru_next = e->lru_next; else s->lru_head = e->lru_next;
    if (e->lru_next != NULL) e->lru_next->lru_prev = e->lru_prev; else s->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(cr_ssd_store *s, struct entry *e) {
    e->lru_prev = NULL;
    e->lru_next = s->lru_head;
    if (s->lru_head != NULL) s->lru_head->lru_prev = e; else s->lru_tail = e;
    s->lru_head = e;
}

/* Files an entry (most recently used; or least, for a scan's older files). */
static bool insert(cr_ssd_store *s, struct entry *e, bool recent) {
    if (s->stats.objects + 1 > s->buckets / 2 && !grow(s)) return false;
    uint64_t i = id_slot(s, e->id), k = e->key_hash & (s->buckets - 1);
    e->id_next = s->by_id[i];
    s->by_id[i] = e;
    e->key_next = s->by_key[k];
    s->by_key[k] = e;
    if (recent) {
        lru_push_front(s, e);
    } else {
        e->lru_next = NULL;
        e->lru_prev = s->lru_tail;
        if (s->lru_tail != NULL) s->lru_tail->lru_next = e; else s->lru_head = e;
        s->lru_tail = e;
    }
    s->stats.objects++;
    s->stats.used += e->file_bytes;
    if (e->id >= s->next_id) s->next_id = e->id + 1;
    return true;
}

/* Drops e from the index and its file from the disk, and frees it. */
static void erase(cr_ssd_store *s, struct entry *e) {
    struct entry **p = &s->by_id[id_slot(s, e->id)];
    while (*p != e) p = &(*p)->id_next;
    *p = e->id_next;
    p = &s->by_key[e->key_hash & (s->buckets - 1)];
    while (*p != e) p = &(*p)->key_next;
    *p = e->key_next;
    lru_unlink(s, e);
    char name[NAME_MAX_BYTES];
    name_of(e->id, SUFFIX, name);
    if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT)
        CR_WARN("ssd", "%s/%s: cannot remove: %s", s->dir, name, strerror(errno));
    s->stats.objects--;
    s->stats.used -= e->file_bytes;
    free(e->key);
    free(e);
}

static struct entry *entry_new(uint64_t id, const char *tenant, const uint8_t *key,
                               uint32_t key_len, uint64_t value_len, uint64_t xxh3) {
    size_t tenant_len = strlen(tenant);
    struct entry *e = calloc(1, sizeof(*e));
    uint8_t *bytes = malloc((size_t)key_len + tenant_len + 1);
    if (e == NULL || bytes == NULL) {
        free(e);
        free(bytes);
        return NULL;
    }
    memcpy(bytes, key, key_len);
    memcpy(bytes + key_len, tenant, tenant_len + 1);
    *e = (struct entry){.id = id, .value_len = value_len, .value_xxh3 = xxh3,
                        .file_bytes = cr_ssd_header_size(key_len, (uint32_t)tenant_len) + value_len,
                        .key_hash = key_hash(tenant, key, key_len), .key = bytes,
                        .key_len = key_len, .tenant_len = (uint32_t)tenant_len};
    return e;
}

/* ---- files -------------------------------------------------------------- */

static bool read_all(int fd, void *dst, uint64_t len, uint64_t off) {
    uint8_t *p = dst;
    while (len > 0) {
        ssize_t got = pread(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got;
        off += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return true;
}

/* Reads and checks a file's header into hdr (key and tenant in buf, which
 * has CR_SSD_HEADER_MAX bytes) and its size.  CR_OK or CR_ERR_CHECKSUM. */
static int check_header(int fd, uint8_t *buf, struct cr_ssd_header *hdr, char *why,
                        size_t why_len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return fail(why, why_len, CR_ERR_CHECKSUM, "fstat: %s", strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    uint64_t want = size < CR_SSD_HEADER_MAX ? size : CR_SSD_HEADER_MAX;
    if (!read_all(fd, buf, want, 0))
        return fail(why, why_len, CR_ERR_CHECKSUM, "cannot read its header: %s",
                    errno != 0 ? strerror(errno) : "short");
    char reason[CR_SSD_WHY_MAX];
    int rc = cr_ssd_header_decode(buf, want, hdr, reason, sizeof(reason));
    if (rc == CR_ERR_AGAIN) return fail(why, why_len, CR_ERR_CHECKSUM, "truncated header");
    if (rc != CR_OK) return fail(why, why_len, CR_ERR_CHECKSUM, "%s", reason);
    if (size != hdr->header_len + hdr->value_len)
        return fail(why, why_len, CR_ERR_CHECKSUM, "file is %" PRIu64 " bytes, its header says %"
                    PRIu64 " (torn write)", size, hdr->header_len + hdr->value_len);
    return CR_OK;
}

/* Reads the value at `off` into dst and checks its XXH3. */
static int check_value(int fd, const struct cr_ssd_header *hdr, void *dst, char *why,
                       size_t why_len) {
    if (!read_all(fd, dst, hdr->value_len, hdr->header_len))
        return fail(why, why_len, CR_ERR_CHECKSUM, "cannot read its value: %s",
                    errno != 0 ? strerror(errno) : "short");
    if (XXH3_64bits(dst, hdr->value_len) != hdr->value_xxh3)
        return fail(why, why_len, CR_ERR_CHECKSUM, "value checksum mismatch (corrupt file)");
    return CR_OK;
}

/* Checks one directory entry in full; files it when whole. */
static void scan_one(cr_ssd_store *s, const char *name, uint64_t id,
                     struct cr_ssd_scan_report *r, void **scratch, uint64_t *scratch_cap) {
    char why[CR_SSD_WHY_MAX] = "";
    uint8_t hbuf[CR_SSD_HEADER_MAX];
    struct cr_ssd_header hdr;
    int rc = CR_ERR_CHECKSUM;
    int fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof(why), "cannot open: %s", strerror(errno));
    } else {
        rc = check_header(fd, hbuf, &hdr, why, sizeof(why));
        if (rc == CR_OK) {
            void **buf = scratch;  /* one buffer reused for every file's value */
            if (hdr.value_len > *scratch_cap) {
                void *bigger = realloc(*buf, hdr.value_len);
                if (bigger == NULL) {
                    rc = fail(why, sizeof(why), CR_ERR_CHECKSUM, "no memory to check its %"
                              PRIu64 " bytes", hdr.value_len);
                } else {
                    *buf = bigger;
                    *scratch_cap = hdr.value_len;
                }
            }
            if (rc == CR_OK) rc = check_value(fd, &hdr, *buf, why, sizeof(why));
        }
        close(fd);
    }
    char tenant[CR_SSD_TENANT_MAX + 1];
    if (rc == CR_OK) {
        memcpy(tenant, hdr.tenant, hdr.tenant_len);
        tenant[hdr.tenant_len] = '\0';
        if (memchr(tenant, '\0', hdr.tenant_len) != NULL)
            rc = fail(why, sizeof(why), CR_ERR_CHECKSUM, "tenant name holds a NUL byte");
        else if (by_key(s, tenant, hdr.key, hdr.key_len) != NULL)
            rc = fail(why, sizeof(why), CR_ERR_CHECKSUM, "a second file of the same key");
    }
    if (rc == CR_OK) {
        struct entry *e = entry_new(id, tenant, hdr.key, hdr.key_len, hdr.value_len,
                                    hdr.value_xxh3);
        if (e != NULL && insert(s, e, true)) {
            r->kept++;
            r->kept_bytes += e->file_bytes;
            return;
        }
        if (e != NULL) free(e->key);
        free(e);
        CR_WARN("ssd", "%s/%s: no memory to index it; left on disk", s->dir, name);
        return;
    }
    CR_WARN("ssd", "%s/%s: dropped: %s", s->dir, name, why);
    r->dropped++;
    s->stats.corrupt_dropped++;
    if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT)
        CR_WARN("ssd", "%s/%s: cannot remove: %s", s->dir, name, strerror(errno));
}

/* "<16 hex>.crs" or ".tmp": the id, or false for a name not ours. */
static bool parse_name(const char *name, const char *suffix, uint64_t *id) {
    if (strlen(name) != 16 + strlen(suffix) || strcmp(name + 16, suffix) != 0) return false;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = (v << 4) | (uint64_t)d;
    }
    *id = v;
    return true;
}

static int scan(cr_ssd_store *s, struct cr_ssd_scan_report *r, char *why, size_t why_len) {
    int fd = dup(s->dir_fd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0) close(fd);
        return fail(why, why_len, CR_ERR_IO, "--ssd-dir %s: cannot list it: %s", s->dir,
                    strerror(errno));
    }
    void *scratch = NULL;
    uint64_t scratch_cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t id;
        bool tmp = parse_name(de->d_name, TMP_SUFFIX, &id);
        /* ids are never reused, not even a dropped file's: a master may
         * still name it, and must find it gone rather than another object */
        if ((tmp || parse_name(de->d_name, SUFFIX, &id)) && id >= s->next_id) s->next_id = id + 1;
        if (tmp) {
            if (unlinkat(s->dir_fd, de->d_name, 0) == 0) r->tmp_removed++;
            continue;
        }
        if (parse_name(de->d_name, SUFFIX, &id)) scan_one(s, de->d_name, id, r, &scratch, &scratch_cap);
    }
    closedir(d);
    free(scratch);
    if (r->tmp_removed > 0 && fsync(s->dir_fd) != 0)
        CR_WARN("ssd", "%s: fsync: %s", s->dir, strerror(errno));
    /* Over capacity (--ssd-size shrank): the LRU order of a scan is directory
     * order, which is as good a guess as any. */
    while (s->stats.used > s->capacity && s->lru_tail != NULL) {
        r->over_capacity++;
        s->stats.evictions++;
        s->stats.evicted_bytes += s->lru_tail->file_bytes;
        erase(s, s->lru_tail);
    }
    return CR_OK;
}

int cr_ssd_open(const struct cr_ssd_config *cfg, cr_ssd_store **out,
                struct cr_ssd_scan_report *report, char *why, size_t why_len) {
    assert(cfg != NULL && out != NULL && (why != NULL || why_len == 0));
    *out = NULL;
    struct cr_ssd_scan_report unused;
    if (report == NULL) report = &unused;
    *report = (struct cr_ssd_scan_report){0};
    if (cfg->dir == NULL || cfg->dir[0] == '\0' || cfg->capacity == 0)
        return fail(why, why_len, CR_ERR_INVALID_PARAMS, "--ssd-dir and --ssd-size > 0 are needed");
    if (mkdir(cfg->dir, 0700) != 0 && errno != EEXIST)
        return fail(why, why_len, CR_ERR_IO, "--ssd-dir %s: cannot create it: %s", cfg->dir,
                    strerror(errno));
    cr_ssd_store *s = calloc(1, sizeof(*s));
    if (s == NULL) return fail(why, why_len, CR_ERR_NOMEM, "no memory for the SSD tier");
    s->dir = strdup(cfg->dir);
    s->buckets = 1024;
    s->by_id = calloc(s->buckets, sizeof(*s->by_id));
    s->by_key = calloc(s->buckets, sizeof(*s->by_key));
    s->capacity = s->stats.capacity = cfg->capacity;
    s->promotion_hits = cfg->promotion_hits;
    s->window_ms = cfg->promotion_window_ms != 0 ? cfg->promotion_window_ms
                                                  : CR_SSD_PROMOTION_WINDOW_MS_DEFAULT;
    s->next_id = 1;
    s->dir_fd = -1;
    if (s->dir == NULL || s->by_id == NULL || s->by_key == NULL) {
        cr_ssd_close(s);
        return fail(why, why_len, CR_ERR_NOMEM, "no memory for the SSD tier");
    }
    s->dir_fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0 || faccessat(s->dir_fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        int rc = fail(why, why_len, CR_ERR_IO, "--ssd-dir %s: not a writable directory: %s",
                      cfg->dir, strerror(errno));
        cr_ssd_close(s);
        return rc;
    }
    int rc = scan(s, report, why, why_len);
    if (rc != CR_OK) {
        cr_ssd_close(s);
        return rc;
    }
    *out = s;
    return CR_OK;
}

void cr_ssd_close(cr_ssd_store *s) {
    if (s == NULL) return;
    for (struct entry *e = s->lru_head, *next; e != NULL; e = next) {
        next = e->lru_next;
        free(e->key);
        free(e);
    }
    if (s->dir_fd >= 0) close(s->dir_fd);
    free(s->by_id);
    free(s->by_key);
    free(s->dir);
    free(s);
}

/* ---- writes ------------------------------------------------------------- */

/* Writes tmp, fsyncs it, renames it to its name and fsyncs the directory. */
static int write_file(cr_ssd_store *s, uint64_t id, const uint8_t *header, size_t header_len,
                      const void *value, uint64_t value_len, char *why, size_t why_len) {
    char tmp[NAME_MAX_BYTES], final[NAME_MAX_BYTES];
    name_of(id, TMP_SUFFIX, tmp);
    name_of(id, SUFFIX, final);
    int fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(why, why_len, CR_ERR_IO, "%s/%s: cannot create: %s", s->dir, tmp, strerror(errno));
    struct iovec iov[2] = {{(void *)header, header_len}, {(void *)value, value_len}};
    uint64_t total = header_len + value_len, done = 0;
    int err = 0;
    while (done < total) {
        int first = done < header_len ? 0 : 1;
        struct iovec cur[2];
        int n = 0;
        for (int i = first; i < 2; i++) cur[n++] = iov[i];
        uint64_t skip = first == 0 ? done : done - header_len;
        cur[0].iov_base = (uint8_t *)cur[0].iov_base + skip;
        cur[0].iov_len -= skip;
        ssize_t put = pwritev(fd, cur, n, (off_t)done);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) {
            err = put < 0 ? errno : ENOSPC;
            break;
        }
        done += (uint64_t)put;
    }
    if (err == 0 && fdatasync(fd) != 0) err = errno;
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && renameat(s->dir_fd, tmp, s->dir_fd, final) != 0) err = errno;
    if (err != 0) {
        unlinkat(s->dir_fd, tmp, 0);
        return fail(why, why_len, CR_ERR_IO, "%s/%s: cannot write: %s", s->dir, final, strerror(err));
    }
    if (fsync(s->dir_fd) != 0) {
        err = errno;
        unlinkat(s->dir_fd, final, 0);
        return fail(why, why_len, CR_ERR_IO, "%s: fsync of the directory: %s", s->dir, strerror(err));
    }
    return CR_OK;
}

int cr_ssd_put(cr_ssd_store *s, const char *tenant, const uint8_t *key, uint32_t key_len,
               const void *value, uint64_t value_len, uint64_t xxh3, cr_ssd_evict_fn evicted,
               void *arg, uint64_t *id, char *why, size_t why_len) {
    assert(s != NULL && tenant != NULL && key != NULL && id != NULL);
    assert(value != NULL || value_len == 0);
    size_t tenant_len = strlen(tenant);
    uint8_t header[CR_SSD_HEADER_MAX];
    struct cr_ssd_header h = {.key = key, .key_len = key_len, .tenant = (const uint8_t *)tenant,
                              .tenant_len = (uint32_t)tenant_len, .value_len = value_len,
                              .value_xxh3 = xxh3};
    size_t header_len = tenant_len > CR_SSD_TENANT_MAX ? 0
                                                       : cr_ssd_header_encode(&h, header, sizeof(header));
    if (header_len == 0)
        return fail(why, why_len, CR_ERR_INVALID_PARAMS, "key (1..4096 bytes) or tenant (1..255) "
                    "out of range");
    uint64_t need = header_len + value_len;
    if (need > s->capacity)
        return fail(why, why_len, CR_ERR_INVALID_PARAMS, "%" PRIu64 " bytes do not fit in the "
                    "SSD tier's %" PRIu64, need, s->capacity);
    if (XXH3_64bits(value, value_len) != xxh3) {
        s->stats.write_failures++;
        return fail(why, why_len, CR_ERR_CHECKSUM, "the value does not match its checksum: not "
                    "written");
    }
    struct entry *old = by_key(s, tenant, key, key_len);
    uint64_t room = s->stats.used - (old != NULL ? old->file_bytes : 0);
    while (room + need > s->capacity && s->lru_tail != NULL) {
        struct entry *victim = s->lru_tail == old ? old->lru_prev : s->lru_tail;
        if (victim == NULL) break;
        struct cr_ssd_object o;
        object_of(victim, &o);
        if (evicted != NULL) evicted(arg, &o);
        s->stats.evictions++;
        s->stats.evicted_bytes += victim->file_bytes;
        room -= victim->file_bytes;
        erase(s, victim);
    }
    struct entry *e = entry_new(s->next_id, tenant, key, key_len, value_len, xxh3);
    if (e == NULL) return fail(why, why_len, CR_ERR_NOMEM, "no memory to index the object");
    int rc = write_file(s, e->id, header, header_len, value, value_len, why, why_len);
    if (rc != CR_OK) {
        s->stats.write_failures++;
        free(e->key);
        free(e);
        return rc;
    }
    s->next_id++;
    if (old != NULL) erase(s, old);
    if (!insert(s, e, true)) {
        char name[NAME_MAX_BYTES];
        name_of(e->id, SUFFIX, name);
        unlinkat(s->dir_fd, name, 0);
        free(e->key);
        free(e);
        return fail(why, why_len, CR_ERR_NOMEM, "no memory to index the object");
    }
    s->stats.writes++;
    s->stats.write_bytes += value_len;
    *id = e->id;
    return CR_OK;
}

/* ---- reads -------------------------------------------------------------- */

bool cr_ssd_lookup(const cr_ssd_store *s, uint64_t id, struct cr_ssd_object *out) {
    assert(s != NULL && out != NULL);
    const struct entry *e = by_id(s, id);
    if (e != NULL) object_of(e, out);
    return e != NULL;
}

bool cr_ssd_find(const cr_ssd_store *s, const char *tenant, const uint8_t *key,
                 uint32_t key_len, struct cr_ssd_object *out) {
    assert(s != NULL && tenant != NULL && out != NULL);
    const struct entry *e = by_key(s, tenant, key, key_len);
    if (e != NULL) object_of(e, out);
    return e != NULL;
}

/* The file's header must name exactly what the index holds. */
static bool header_matches(const struct entry *e, const struct cr_ssd_header *h) {
    return h->key_len == e->key_len && memcmp(h->key, e->key, e->key_len) == 0 &&
           h->tenant_len == e->tenant_len && memcmp(h->tenant, tenant_of(e), e->tenant_len) == 0 &&
           h->value_len == e->value_len && h->value_xxh3 == e->value_xxh3;
}

/* A file that failed a check at read: logged, counted, the owner told, and
 * removed from the index and the disk; returns rc with why. */
static int drop_at_read(cr_ssd_store *s, struct entry *e, const char *name, const char *reason,
                        int rc, char *why, size_t why_len) {
    CR_WARN("ssd", "%s/%s: dropped at read: %s", s->dir, name, reason);
    s->stats.read_failures++;
    s->stats.corrupt_dropped++;
    if (s->drop_hook != NULL) {
        struct cr_ssd_object o;
        object_of(e, &o);
        s->drop_hook(s->drop_arg, &o);
    }
    erase(s, e);
    return fail(why, why_len, rc, "SSD file %s/%s: %s", s->dir, name, reason);
}

/* A read served: counted, the object marked recently used, and its hit
 * counted toward promotion. */
static void count_hit(cr_ssd_store *s, struct entry *e, uint64_t now_ms, bool *promote) {
    s->stats.reads++;
    s->stats.read_bytes += e->value_len;
    lru_unlink(s, e);
    lru_push_front(s, e);
    if (s->promotion_hits > 0) {
        if (e->hits == 0 || now_ms - e->window_start_ms > s->window_ms) {
            e->window_start_ms = now_ms;
            e->hits = 0;
        }
        if (++e->hits >= s->promotion_hits) {
            e->hits = 0;
            s->stats.promotions++;
            if (promote != NULL) *promote = true;
        }
    }
}

/* Opens object e's file and checks its header against the index: the fd,
 * or -1 with the reason (CR_ERR_CHECKSUM) in reason; hdr gets the header. */
static int open_checked(cr_ssd_store *s, struct entry *e, const char *name,
                        struct cr_ssd_header *hdr, uint8_t *hbuf, char *reason,
                        size_t reason_len, int *rc) {
    int fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *rc = fail(reason, reason_len, CR_ERR_CHECKSUM, "cannot open: %s", strerror(errno));
        return -1;
    }
    *rc = check_header(fd, hbuf, hdr, reason, reason_len);
    if (*rc == CR_OK && !header_matches(e, hdr))
        *rc = fail(reason, reason_len, CR_ERR_CHECKSUM, "its header names another object");
    if (*rc != CR_OK) {
        close(fd);
        return -1;
    }
    return fd;
}

int cr_ssd_read(cr_ssd_store *s, uint64_t id, void *dst, uint64_t cap, uint64_t now_ms,
                uint64_t *len, bool *promote, char *why, size_t why_len) {
    assert(s != NULL && (dst != NULL || cap == 0) && len != NULL);
    if (promote != NULL) *promote = false;
    struct entry *e = by_id(s, id);
    if (e == NULL) return fail(why, why_len, CR_ERR_OBJECT_NOT_FOUND, "no object %" PRIu64
                               " on the SSD tier", id);
    *len = e->value_len;
    if (cap < e->value_len)
        return fail(why, why_len, CR_ERR_INVALID_PARAMS, "a %" PRIu64 "-byte buffer for a %"
                    PRIu64 "-byte object", cap, e->value_len);
    char name[NAME_MAX_BYTES];
    name_of(id, SUFFIX, name);
    uint8_t hbuf[CR_SSD_HEADER_MAX];
    struct cr_ssd_header hdr;
    char reason[CR_SSD_WHY_MAX] = "";
    int rc;
    int fd = open_checked(s, e, name, &hdr, hbuf, reason, sizeof(reason), &rc);
    if (fd >= 0) {
        rc = check_value(fd, &hdr, dst, reason, sizeof(reason));
        close(fd);
    }
    if (rc != CR_OK) return drop_at_read(s, e, name, reason, rc, why, why_len);
    count_hit(s, e, now_ms, promote);
    return CR_OK;
}

int cr_ssd_open_value(cr_ssd_store *s, uint64_t id, uint64_t now_ms, int *fd,
                      uint64_t *header_len, uint64_t *len, bool *promote, char *why,
                      size_t why_len) {
    assert(s != NULL && fd != NULL && header_len != NULL && len != NULL);
    *fd = -1;
    if (promote != NULL) *promote = false;
    struct entry *e = by_id(s, id);
    if (e == NULL) return fail(why, why_len, CR_ERR_OBJECT_NOT_FOUND, "no object %" PRIu64
                               " on the SSD tier", id);
    char name[NAME_MAX_BYTES];
    name_of(id, SUFFIX, name);
    uint8_t hbuf[CR_SSD_HEADER_MAX];
    struct cr_ssd_header hdr;
    char reason[CR_SSD_WHY_MAX] = "";
    int rc;
    int opened = open_checked(s, e, name, &hdr, hbuf, reason, sizeof(reason), &rc);
    if (opened < 0) return drop_at_read(s, e, name, reason, rc, why, why_len);
    *fd = opened;
    *header_len = hdr.header_len;
    *len = hdr.value_len;
    count_hit(s, e, now_ms, promote);
    return CR_OK;
}

int cr_ssd_remove(cr_ssd_store *s, uint64_t id) {
    assert(s != NULL);
    struct entry *e = by_id(s, id);
    if (e == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    erase(s, e);
    return CR_OK;
}

void cr_ssd_foreach(const cr_ssd_store *s, void (*fn)(void *arg, const struct cr_ssd_object *o),
                    void *arg) {
    assert(s != NULL && fn != NULL);
    for (const struct entry *e = s->lru_tail; e != NULL; e = e->lru_prev) {
        struct cr_ssd_object o;
        object_of(e, &o);
        fn(arg, &o);
    }
}

void cr_ssd_set_drop_hook(cr_ssd_store *s, cr_ssd_evict_fn fn, void *arg) {
    assert(s != NULL);
    s->drop_hook = fn;
    s->drop_arg = arg;
}

void cr_ssd_get_stats(const cr_ssd_store *s, struct cr_ssd_stats *out) {
    assert(s != NULL && out != NULL);
    *out = s->stats;
}

const char *cr_ssd_dir(const cr_ssd_store *s) { return s->dir; }
