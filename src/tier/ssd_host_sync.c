/* A store server's reports on its SSD tier to the master (tier/ssd_host.h,
 * cr_store_ssd_sync; docs/tiers.md, "Local SSD tier"): after each (re)mount
 * every file the open found whole is re-registered, and files gone since
 * (evicted by the SSD's LRU, found corrupt at a read) are reported so the
 * master never offers their replicas again. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier/ssd_host.h"
#include "core/log.h"
#include "crescent/error.h"
#include "crescent/host.h"

static struct cr_store_ssd_note *note_of(const struct cr_ssd_object *o) {
    struct cr_store_ssd_note *n = malloc(sizeof(*n) + o->key_len + 1);
    if (n == NULL) return NULL;
    n->next = NULL;
    n->position = o->id;
    n->size = o->value_len;
    n->xxh3 = o->value_xxh3;
    snprintf(n->tenant, sizeof(n->tenant), "%s", o->tenant);
    memcpy(n->key, o->key, o->key_len);
    n->key[o->key_len] = '\0';
    return n;
}

void cr_store_ssd_note_gone(void *arg, const struct cr_ssd_object *gone) {
    struct cr_store_ssd *ssd = arg; /* its lock is held: called from a write or read */
    if (!ssd->reports) return; /* nobody reports for it: a stale replica fails its read */
    struct cr_store_ssd_note *n = ssd->gone_count < CR_STORE_SSD_GONE_MAX ? note_of(gone) : NULL;
    if (n == NULL) {
        ssd->gone_lost++; /* out of memory: the master keeps a replica a get will fail on */
        return;
    }
    n->next = ssd->gone;
    ssd->gone = n;
    ssd->gone_count++;
}

struct listing {
    struct cr_store_ssd_note *head;
    bool failed;
};

static void list_one(void *arg, const struct cr_ssd_object *o) {
    struct listing *l = arg;
    struct cr_store_ssd_note *n = note_of(o);
    if (n == NULL) {
        l->failed = true;
        return;
    }
    n->next = l->head;
    l->head = n;
}

void cr_store_ssd_notes_free(struct cr_store_ssd_note *n) {
    while (n != NULL) {
        struct cr_store_ssd_note *next = n->next;
        free(n);
        n = next;
    }
}

/* Sends notes in reports of at most CR_LOCAL_DISK_REPORT_MAX; a file the
 * master refuses (another put's) is deleted.  Returns CR_OK or the first
 * call's failure (the rest is not sent). */
static int send_notes(struct cr_store_ssd *ssd, cr_client *master, const char *segment,
                      struct cr_store_ssd_note *notes, bool gone) {
    enum { BATCH = 512 };
    struct cr_local_disk_entry e[BATCH];
    const struct cr_store_ssd_note *which[BATCH];
    int statuses[BATCH];
    while (notes != NULL) {
        size_t n = 0;
        for (; notes != NULL && n < BATCH; notes = notes->next, n++) {
            e[n] = (struct cr_local_disk_entry){.tenant = notes->tenant, .key = notes->key,
                                                .size = notes->size, .checksum = notes->xxh3,
                                                .position = notes->position, .gone = gone};
            which[n] = notes;
        }
        int rc = cr_client_local_disk_report(master, segment, e, n, statuses);
        if (rc != CR_OK) return rc;
        for (size_t i = 0; i < n; i++) {
            if (gone) {
                ssd->reported_gone++;
            } else if (statuses[i] == CR_OK) {
                ssd->registered++;
            } else if (statuses[i] == CR_ERR_INVALID_PARAMS) {
                CR_WARN("store", "SSD file %016" PRIx64 " ('%s'): the master holds another put "
                        "of the key, or none (removed or put again meanwhile); file removed",
                        which[i]->position, which[i]->key);
                pthread_mutex_lock(&ssd->lock);
                (void)cr_ssd_remove(ssd->store, which[i]->position);
                pthread_mutex_unlock(&ssd->lock);
                ssd->refused++;
            } else {
                ssd->refused++; /* replica slots full, object table full: kept for later */
            }
        }
    }
    return CR_OK;
}

int cr_store_ssd_sync(void *arg, cr_client *master, const char *segment, bool mounted) {
    struct cr_store_ssd *ssd = arg;
    if (ssd->store == NULL) return CR_OK;
    struct listing all = {0};
    pthread_mutex_lock(&ssd->lock);
    if (mounted) cr_ssd_foreach(ssd->store, list_one, &all);
    struct cr_store_ssd_note *gone = ssd->gone;
    ssd->gone = NULL;
    ssd->gone_count = 0;
    pthread_mutex_unlock(&ssd->lock);
    int rc = all.failed ? CR_ERR_NOMEM : CR_OK;
    if (rc == CR_OK && gone != NULL) rc = send_notes(ssd, master, segment, gone, true);
    if (rc != CR_OK && gone != NULL) { /* told next time */
        pthread_mutex_lock(&ssd->lock);
        struct cr_store_ssd_note **tail = &gone;
        uint64_t count = 0;
        for (; *tail != NULL; tail = &(*tail)->next) count++;
        *tail = ssd->gone;
        ssd->gone = gone;
        ssd->gone_count += count;
        pthread_mutex_unlock(&ssd->lock);
        gone = NULL;
    }
    if (rc == CR_OK && all.head != NULL) {
        rc = send_notes(ssd, master, segment, all.head, false);
        if (rc == CR_OK)
            CR_INFO("store", "SSD tier: %" PRIu64 " file(s) registered with the master, %" PRIu64
                    " refused", ssd->registered, ssd->refused);
    }
    if (rc != CR_OK)
        CR_WARN("store", "SSD report to the master failed: %s (retried at the next ping)",
                cr_client_last_error(master));
    cr_store_ssd_notes_free(gone);
    cr_store_ssd_notes_free(all.head);
    return rc;
}

void cr_store_ssd_forget_gone(struct cr_store_ssd *ssd) {
    cr_store_ssd_notes_free(ssd->gone);
    ssd->gone = NULL;
    ssd->gone_count = 0;
}

struct cr_store_ssd_note *cr_store_ssd_take_gone(struct cr_store_ssd *ssd, size_t max,
                                                 size_t *count) {
    *count = 0;
    if (max == 0) return NULL;
    pthread_mutex_lock(&ssd->lock);
    struct cr_store_ssd_note *head = ssd->gone, **tail = &ssd->gone;
    while (*tail != NULL && *count < max) {
        tail = &(*tail)->next;
        (*count)++;
    }
    ssd->gone = *tail;
    *tail = NULL;
    ssd->gone_count -= *count;
    pthread_mutex_unlock(&ssd->lock);
    return *count > 0 ? head : NULL;
}
