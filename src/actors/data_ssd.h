/* crescentd's local segment reports its SSD tier's gone files (docs/tiers.md,
 * "What the server reports"): files the tier's LRU evicted to make room, or a
 * read found corrupt, go to the master as a store server's LocalDiskReport
 * (method 71), sent as a call to the segments actor like the segment's mount
 * and pings, so the master drops those local_disk replicas (an UPDATE event
 * each, the object removed with its last replica) instead of offering files
 * that are gone. */
#ifndef CRESCENT_ACTORS_DATA_SSD_H
#define CRESCENT_ACTORS_DATA_SSD_H

#include <stdbool.h>

#include "master.pb-c.h"

struct cr_store_ssd;
struct cr_store_ssd_note;

/* One report: the request (client id and secret left for the caller) and
 * what its entries point into. */
struct cr_data_ssd_gone {
    Crescent__Master__LocalDiskReportRequest req;
    Crescent__Master__LocalDiskReportRequest__Entry *slots;
    Crescent__Master__LocalDiskReportRequest__Entry **ptrs;
    struct cr_store_ssd_note *notes;
};

#define CR_DATA_SSD_GONE_BATCH 512u

/* Takes up to CR_DATA_SSD_GONE_BATCH gone files off `ssd` into a report of
 * `segment`'s.  False when there is none (or no memory: the notes stay for
 * the next try). */
bool cr_data_ssd_gone_take(struct cr_store_ssd *ssd, const char *segment,
                           struct cr_data_ssd_gone *out);

/* Frees a report taken (after it was sent: sending copies it). */
void cr_data_ssd_gone_free(struct cr_data_ssd_gone *g);

#endif
