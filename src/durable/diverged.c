/* Bounding the diverged-<ms> directories of a state directory (see
 * diverged.h). */
#include "durable/diverged.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"

struct aside {
    uint64_t ms;
    char name[64];
};

/* "diverged-<digits>" (what repl_terms.c names them); nothing else. */
static bool parse(const char *name, uint64_t *ms) {
    size_t n = strlen(CR_DIVERGED_PREFIX);
    if (strncmp(name, CR_DIVERGED_PREFIX, n) != 0 || name[n] == '\0' || strlen(name) >= 64)
        return false;
    uint64_t v = 0;
    for (const char *p = name + n; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *ms = v;
    return true;
}

static int by_age(const void *a, const void *b) {
    const struct aside *x = a, *y = b;
    if (x->ms != y->ms) return x->ms < y->ms ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The files of dir/name (a start over puts only logs and snapshots there,
 * no subdirectories), then the directory. */
static int remove_aside(int dfd, const char *name, char *err, size_t err_len) {
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        snprintf(err, err_len, "%s: %s", name, strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_IO;
    }
    int rc = CR_OK;
    struct dirent *e;
    while (rc == CR_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            snprintf(err, err_len, "%s/%s: %s", name, e->d_name, strerror(errno));
            rc = CR_ERR_IO;
        }
    }
    closedir(d);
    if (rc == CR_OK && unlinkat(dfd, name, AT_REMOVEDIR) != 0) {
        snprintf(err, err_len, "%s: %s", name, strerror(errno));
        rc = CR_ERR_IO;
    }
    return rc;
}

int cr_durable_diverged_prune(const char *dir, uint32_t keep, uint32_t *kept, char *err,
                              size_t err_len) {
    assert(dir != NULL && kept != NULL && err != NULL);
    *kept = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(err, err_len, "%.300s: %s", dir, strerror(errno));
        return CR_ERR_IO;
    }
    struct aside *list = NULL;
    uint32_t count = 0, cap = 0;
    int rc = CR_OK;
    struct dirent *e;
    while (rc == CR_OK && (e = readdir(d)) != NULL) {
        uint64_t ms;
        if (!parse(e->d_name, &ms)) continue;
        if (count == cap) {
            cap = cap == 0 ? 8 : cap * 2;
            struct aside *grown = realloc(list, cap * sizeof(*list));
            if (grown == NULL) {
                snprintf(err, err_len, "no memory to list %.300s", dir);
                rc = CR_ERR_NOMEM;
                break;
            }
            list = grown;
        }
        list[count].ms = ms;
        memcpy(list[count].name, e->d_name, strlen(e->d_name) + 1); /* < 64: parse() */
        count++;
    }
    if (rc == CR_OK && count > keep) {
        qsort(list, count, sizeof(*list), by_age);
        char why[512];
        for (uint32_t i = 0; i < count - keep; i++) {
            if (remove_aside(dirfd(d), list[i].name, why, sizeof(why)) != CR_OK) {
                snprintf(err, err_len, "%.300s/%s", dir, why);
                rc = CR_ERR_IO;
                *kept = count - i;
                break;
            }
            CR_INFO("durable", "%s/%s deleted: --keep-diverged %u keeps the newest %u "
                    "(a former leader's records its new leader did not have)", dir,
                    list[i].name, keep, keep);
        }
        if (rc == CR_OK) *kept = keep;
    } else if (rc == CR_OK) {
        *kept = count;
    }
    if (rc == CR_OK && count > keep && fsync(dirfd(d)) != 0) {
        snprintf(err, err_len, "fsync %.300s: %s", dir, strerror(errno));
        rc = CR_ERR_IO;
    }
    closedir(d);
    free(list);
    return rc;
}
