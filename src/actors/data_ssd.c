/* crescentd's local segment reports its SSD tier's gone files (data_ssd.h). */
#include "actors/data_ssd.h"

#include <stdlib.h>

#include "tier/ssd_host.h"

/* Gives notes back to the tier (the master is told at the next try). */
static void give_back(struct cr_store_ssd *ssd, struct cr_store_ssd_note *notes, size_t n) {
    struct cr_store_ssd_note **tail = &notes;
    while (*tail != NULL) tail = &(*tail)->next;
    pthread_mutex_lock(&ssd->lock);
    *tail = ssd->gone;
    ssd->gone = notes;
    ssd->gone_count += n;
    pthread_mutex_unlock(&ssd->lock);
}

bool cr_data_ssd_gone_take(struct cr_store_ssd *ssd, const char *segment,
                           struct cr_data_ssd_gone *out) {
    *out = (struct cr_data_ssd_gone){0};
    if (ssd == NULL || ssd->store == NULL) return false;
    size_t n = 0;
    struct cr_store_ssd_note *notes = cr_store_ssd_take_gone(ssd, CR_DATA_SSD_GONE_BATCH, &n);
    if (notes == NULL) return false;
    out->slots = calloc(n, sizeof(*out->slots));
    out->ptrs = calloc(n, sizeof(*out->ptrs));
    if (out->slots == NULL || out->ptrs == NULL) {
        free(out->slots);
        free(out->ptrs);
        give_back(ssd, notes, n);
        return false;
    }
    crescent__master__local_disk_report_request__init(&out->req);
    out->req.segment_name = (char *)segment;
    size_t i = 0;
    for (struct cr_store_ssd_note *note = notes; note != NULL; note = note->next, i++) {
        Crescent__Master__LocalDiskReportRequest__Entry *e = &out->slots[i];
        crescent__master__local_disk_report_request__entry__init(e);
        e->key = note->key;
        e->tenant_id = note->tenant;
        e->size = note->size;
        e->has_checksum_xxh3 = true;
        e->checksum_xxh3 = note->xxh3;
        e->position = note->position;
        e->has_gone = true;
        e->gone = true;
        out->ptrs[i] = e;
    }
    out->req.entries = out->ptrs;
    out->req.n_entries = n;
    out->notes = notes;
    return true;
}

void cr_data_ssd_gone_free(struct cr_data_ssd_gone *g) {
    cr_store_ssd_notes_free(g->notes);
    free(g->slots);
    free(g->ptrs);
    *g = (struct cr_data_ssd_gone){0};
}
