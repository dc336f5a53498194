/* Gets of local_disk replicas: an object a master offloaded to a store
 * server's SSD tier is read through the transfer layer from the server's
 * read-only segment "<segment>#ssd" (include/crescent/host.h), the whole
 * value at the replica's position, and checked against the put's XXH3
 * here as well as on the server (docs/tiers.md, "Local SSD tier").
 *
 * Same host: the server passes the object's file over the shm socket
 * (cr_xfer_client_open_file, after the same capability check as a tcp
 * READ), and it is read here with two preads, its header and value checked
 * as the server would, the value against the put's XXH3: no copy through a
 * socket.  Any refusal or failure of that path falls back to the tcp read,
 * whose server-side check drops a corrupt file. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* The vector XXH3 picked at run time, as in client_data.c and client_files.c
 * (same values as the put's checksum): the plain symbol is the library's
 * baseline build, several times slower over a 1 MiB value. */
#include <xxh_x86dispatch.h>
#endif

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "core/log.h"
#include "crescent/error.h"
#include "crescent/host.h"
#include "rdma/xfer.h"
#include "tier/ssd_header.h"

uint64_t cr_client_offload_read_count(cr_client *c) {
    assert(c != NULL);
    return c->offload_reads;
}

void cr_client_offload_shm_counts(cr_client *c, uint64_t *reads, uint64_t *fallbacks) {
    assert(c != NULL && reads != NULL && fallbacks != NULL);
    *reads = c->offload_shm_reads;
    *fallbacks = c->offload_shm_fallbacks;
}

bool cr_client_ssd_has_replica(const struct cr_replica_list *list) {
    for (size_t r = 0; r < list->count; r++)
        if (list->replicas[r].medium == CR_MEDIUM_LOCAL_DISK &&
            list->replicas[r].status == CR_REPLICA_COMPLETE)
            return true;
    return false;
}

static bool pread_all(int fd, void *buf, uint64_t len, uint64_t off) {
    uint8_t *at = buf;
    while (len > 0) {
        ssize_t n = pread(fd, at, len, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        at += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return true;
}

/* The object's file, read from fd (the value at offset): its header must
 * decode, sit just before the value and describe this value (length and
 * XXH3); the value must hash to the put's checksum. */
static int read_file(const struct cr_replica_list *list, const struct cr_replica *r, int fd,
                     uint64_t offset, void *buf, char *why, size_t why_len) {
    uint8_t hbuf[CR_SSD_HEADER_MAX];
    uint64_t want = offset < sizeof(hbuf) ? offset : sizeof(hbuf);
    struct cr_ssd_header h;
    char reason[128];
    if (offset < CR_SSD_HEADER_FIXED || offset > CR_SSD_HEADER_MAX || !pread_all(fd, hbuf, want, 0))
        snprintf(reason, sizeof(reason), "its header cannot be read (offset %" PRIu64 ")", offset);
    else if (cr_ssd_header_decode(hbuf, want, &h, reason, sizeof(reason)) != CR_OK)
        ; /* reason says why */
    else if (h.header_len != offset || h.value_len != r->object_size ||
             (list->has_checksum && h.value_xxh3 != list->checksum_xxh3))
        snprintf(reason, sizeof(reason), "its header describes another value");
    else if (!pread_all(fd, buf, r->object_size, offset))
        snprintf(reason, sizeof(reason), "its value cannot be read: %s",
                 errno != 0 ? strerror(errno) : "short");
    else if (XXH3_64bits(buf, r->object_size) != h.value_xxh3)
        snprintf(reason, sizeof(reason), "bytes do not match the put's checksum");
    else
        return CR_OK;
    snprintf(why, why_len, "SSD replica on '%s' read over shm: %s", r->segment_name, reason);
    return CR_ERR_CHECKSUM;
}

/* Same host: the file over shm, read and checked here.  CR_OK, or anything
 * else (counted) for the tcp read to follow. */
static int read_local(cr_client *c, const struct cr_replica_list *list,
                      const struct cr_replica *r, const char *segment, const struct cr_cap *capp,
                      void *buf) {
    int fd = -1;
    uint64_t offset = 0;
    int rc = cr_xfer_client_open_file(c->xfer, r->endpoint, segment, r->position,
                                      r->object_size, capp, &fd, &offset);
    if (rc == CR_ERR_AGAIN) return rc; /* not same-host: tcp, as always */
    if (rc == CR_OK) {
        char why[256];
        errno = 0;
        rc = read_file(list, r, fd, offset, buf, why, sizeof(why));
        close(fd);
        if (rc != CR_OK) CR_WARN("client", "%s; reading it by tcp", why);
    }
    if (rc == CR_OK) c->offload_shm_reads++;
    else c->offload_shm_fallbacks++;
    return rc;
}

/* One replica: read, then checked. */
static int read_one(cr_client *c, const struct cr_replica_list *list, const struct cr_replica *r,
                    void *buf, char *why, size_t why_len) {
    char segment[CR_XFER_SEGMENT_NAME_MAX + 1];
    int n = snprintf(segment, sizeof(segment), "%s%s", r->segment_name, CR_HOST_SSD_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof(segment)) {
        snprintf(why, why_len, "SSD replica on '%s': the segment name is too long",
                 r->segment_name);
        return CR_ERR_PROTOCOL;
    }
    c->offload_reads++;
    /* The master's read capability for this segment and range, when it
     * signed one (a server with --data-require-capability refuses a read
     * without it). */
    struct cr_cap cap;
    const struct cr_cap *capp = r->has_capability && cr_cap_decode(r->capability, &cap) == 0
                                    ? &cap : NULL;
    if (r->object_size > 0 && read_local(c, list, r, segment, capp, buf) == CR_OK)
        return CR_OK; /* checked against the put's XXH3 in read_file */
    int rc = r->object_size == 0 ? CR_OK
                                 : cr_xfer_read_cap(c->xfer, r->endpoint, segment, r->position,
                                                    buf, r->object_size, capp);
    if (rc != CR_OK) {
        snprintf(why, why_len, "SSD replica on '%s' (%s, object %" PRIu64 "): %s",
                 r->segment_name, r->endpoint, r->position, cr_xfer_client_last_error(c->xfer));
        return rc;
    }
    if (list->has_checksum && XXH3_64bits(buf, r->object_size) != list->checksum_xxh3) {
        snprintf(why, why_len, "SSD replica on '%s': bytes do not match the put's checksum",
                 r->segment_name);
        return CR_ERR_CHECKSUM;
    }
    return CR_OK;
}

int cr_client_ssd_read(cr_client *c, const struct cr_replica_list *list, void *buf, size_t cap,
                       size_t *len, char *why, size_t why_len) {
    int rc = CR_ERR_IO;
    snprintf(why, why_len, "no SSD replica to read");
    for (size_t i = 0; i < list->count; i++) {
        const struct cr_replica *r = &list->replicas[i];
        if (r->medium != CR_MEDIUM_LOCAL_DISK || r->status != CR_REPLICA_COMPLETE) continue;
        if (r->object_size > cap) {
            snprintf(why, why_len, "the object has %" PRIu64 " bytes, the buffer %zu",
                     r->object_size, cap);
            return CR_ERR_INVALID_PARAMS;
        }
        rc = read_one(c, list, r, buf, why, why_len);
        if (rc == CR_OK) {
            *len = (size_t)r->object_size;
            return CR_OK;
        }
    }
    return rc;
}
