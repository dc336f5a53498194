/* The event plane's sequence high-water mark (see seqmark.h). */
#include "durable/seqmark.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/le.h"
#include "crescent/error.h"
#include "durable/files.h"

static const uint8_t seqmark_magic[8] = {'C', 'R', 'E', 'S', 'S', 'E', 'Q', 0};

void cr_seqmark_encode(uint64_t mark, uint8_t out[CR_SEQMARK_LEN]) {
    assert(out != NULL);
    memcpy(out, seqmark_magic, sizeof(seqmark_magic));
    cr_le_put_u64(out + 8, mark);
    cr_le_put_u64(out + 16, XXH3_64bits(out, 16));
}

int cr_seqmark_decode(const uint8_t *data, size_t len, uint64_t *mark, char *err,
                      size_t err_len) {
    assert(data != NULL || len == 0);
    assert(mark != NULL);
    if (len != CR_SEQMARK_LEN) {
        snprintf(err, err_len, "is %zu bytes, a sequence mark is %u", len, CR_SEQMARK_LEN);
        return CR_ERR_PROTOCOL;
    }
    if (memcmp(data, seqmark_magic, sizeof(seqmark_magic)) != 0) {
        snprintf(err, err_len, "is not a sequence mark file (wrong magic)");
        return CR_ERR_PROTOCOL;
    }
    if (XXH3_64bits(data, 16) != cr_le_get_u64(data + 16)) {
        snprintf(err, err_len, "fails its checksum (corrupt)");
        return CR_ERR_PROTOCOL;
    }
    *mark = cr_le_get_u64(data + 8);
    return CR_OK;
}

int cr_seqmark_load(const char *dir, uint64_t *mark, char *err, size_t err_len) {
    assert(dir != NULL && mark != NULL);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, CR_SEQMARK_FILE);
    *mark = 0;
    if (access(path, F_OK) != 0 && errno == ENOENT) return CR_OK; /* first start */
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = cr_durable_read_file(path, &data, &len, err, err_len);
    if (rc != CR_OK) return rc;
    char why[128];
    rc = cr_seqmark_decode(data, len, mark, why, sizeof(why));
    free(data);
    if (rc != CR_OK)
        snprintf(err, err_len,
                 "%s %s; event sequence numbers cannot be continued safely (move the file "
                 "away to accept that subscribers may see reused numbers)",
                 path, why);
    return rc;
}

int cr_seqmark_store(const char *dir, uint64_t mark, char *err, size_t err_len) {
    assert(dir != NULL);
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, CR_SEQMARK_FILE);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        snprintf(err, err_len, "%s: the state directory's path is too long", dir);
        return CR_ERR_INVALID_PARAMS;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "%s: cannot create the state directory: %s", dir,
                 strerror(errno));
        return CR_ERR_IO;
    }
    uint8_t buf[CR_SEQMARK_LEN];
    cr_seqmark_encode(mark, buf);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && fsync(fd) == 0;
    int saved = errno;
    if (fd >= 0) close(fd);
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        snprintf(err, err_len, "%s: cannot write the event sequence mark: %s", path,
                 strerror(saved));
        unlink(tmp);
        return CR_ERR_IO;
    }
    return cr_durable_sync_dir(dir, err, err_len);
}
