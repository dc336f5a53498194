/* Gets of local_disk replicas: an object a master offloaded to a store
 * server's SSD tier is read through the transfer layer from the server's
 * read-only segment "<segment>#ssd" (include/crescent/host.h), the whole
 * value at the replica's position, and checked against the put's XXH3
 * here as well as on the server (docs/tiers.md, "Local SSD tier"). */
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

#include "client/client_internal.h"
#include "crescent/error.h"
#include "crescent/host.h"
#include "rdma/xfer.h"

uint64_t cr_client_offload_read_count(cr_client *c) {
    assert(c != NULL);
    return c->offload_reads;
}

bool cr_client_ssd_has_replica(const struct cr_replica_list *list) {
    for (size_t r = 0; r < list->count; r++)
        if (list->replicas[r].medium == CR_MEDIUM_LOCAL_DISK &&
            list->replicas[r].status == CR_REPLICA_COMPLETE)
            return true;
    return false;
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
