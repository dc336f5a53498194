/* A store server's SSD tier (see ssd_host.h and docs/tiers.md, "Local SSD tier"). */
#include "tier/ssd_host.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "crescent/error.h"

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int cr_store_ssd_open(struct cr_store_ssd *ssd, const char *dir, uint64_t size,
                      uint32_t promotion_hits, char *why, size_t why_len) {
    *ssd = (struct cr_store_ssd){0};
    pthread_mutex_init(&ssd->lock, NULL);
    if (dir == NULL || dir[0] == '\0') return CR_OK;
    struct cr_ssd_config cfg = {.dir = dir, .capacity = size, .promotion_hits = promotion_hits};
    struct cr_ssd_scan_report r;
    int rc = cr_ssd_open(&cfg, &ssd->store, &r, why, why_len);
    if (rc != CR_OK) return rc;
    cr_ssd_set_drop_hook(ssd->store, cr_store_ssd_note_gone, ssd); /* corrupt at a read */
    CR_INFO("store", "SSD tier %s (%" PRIu64 " bytes): %" PRIu64 " object(s), %" PRIu64
            " bytes kept; %" PRIu64 " bad file(s) dropped, %" PRIu64 " interrupted write(s) "
            "removed, %" PRIu64 " evicted over its size", dir, size, r.kept,
            r.kept_bytes, r.dropped, r.tmp_removed, r.over_capacity);
    return CR_OK;
}

int cr_store_ssd_read(void *arg, uint64_t addr, uint64_t len, void *dst) {
    struct cr_store_ssd *ssd = arg;
    struct cr_ssd_object o;
    bool promote = false;
    char why[256];
    pthread_mutex_lock(&ssd->lock);
    int rc = CR_ERR_OBJECT_NOT_FOUND;
    if (cr_ssd_lookup(ssd->store, addr, &o))
        rc = o.value_len != len ? CR_ERR_INVALID_PARAMS /* the whole value, nothing else */
             : cr_ssd_read(ssd->store, addr, dst, len, now_ms(), &len, &promote, why, sizeof(why));
    if (promote) ssd->promotions_asked++;
    pthread_mutex_unlock(&ssd->lock);
    if (rc == CR_ERR_CHECKSUM) CR_WARN("store", "%s: not served", why);
    return rc;
}

int cr_store_ssd_open_value(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *offset) {
    struct cr_store_ssd *ssd = arg;
    struct cr_ssd_object o;
    bool promote = false;
    char why[256];
    uint64_t value_len = 0;
    *fd = -1;
    pthread_mutex_lock(&ssd->lock);
    int rc = CR_ERR_OBJECT_NOT_FOUND;
    if (cr_ssd_lookup(ssd->store, addr, &o))
        rc = o.value_len != len ? CR_ERR_INVALID_PARAMS /* the whole value, nothing else */
             : cr_ssd_open_value(ssd->store, addr, now_ms(), fd, offset, &value_len, &promote,
                                 why, sizeof(why));
    if (promote) ssd->promotions_asked++;
    pthread_mutex_unlock(&ssd->lock);
    if (rc == CR_ERR_CHECKSUM) CR_WARN("store", "%s: not served", why);
    return rc;
}

int cr_store_ssd_write(void *arg, const char *tenant, const char *key, const void *value,
                       uint64_t len, uint64_t xxh3, uint64_t *position, char *why,
                       size_t why_len) {
    struct cr_store_ssd *ssd = arg;
    pthread_mutex_lock(&ssd->lock);
    int rc = cr_ssd_put(ssd->store, tenant, (const uint8_t *)key, (uint32_t)strlen(key), value,
                        len, xxh3, cr_store_ssd_note_gone, ssd, position, why, why_len);
    pthread_mutex_unlock(&ssd->lock);
    return rc;
}

void cr_store_ssd_remove(void *arg, uint64_t position) {
    struct cr_store_ssd *ssd = arg;
    pthread_mutex_lock(&ssd->lock);
    (void)cr_ssd_remove(ssd->store, position);
    pthread_mutex_unlock(&ssd->lock);
}

void cr_store_ssd_close(struct cr_store_ssd *ssd) {
    if (ssd->store != NULL) {
        struct cr_ssd_stats st;
        cr_ssd_get_stats(ssd->store, &st);
        CR_INFO("store", "SSD tier %s: %" PRIu64 " object(s), %" PRIu64 " of %" PRIu64 " bytes; "
                "%" PRIu64 " written, %" PRIu64 " read, %" PRIu64 " evicted, %" PRIu64
                " corrupt dropped, %" PRIu64 " promotion(s) asked", cr_ssd_dir(ssd->store),
                st.objects, st.used, st.capacity, st.writes, st.reads, st.evictions,
                st.corrupt_dropped, ssd->promotions_asked);
        cr_ssd_close(ssd->store);
        ssd->store = NULL;
    }
    cr_store_ssd_forget_gone(ssd); /* not reported: the master learns at the next start */
    pthread_mutex_destroy(&ssd->lock);
}
