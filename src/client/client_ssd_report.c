/* A store server's report on its SSD tier (include/crescent/host.h,
 * cr_client_local_disk_report; docs/tiers.md, "Local SSD tier"). */
#include <assert.h>
#include <stdlib.h>

#include "client/client_internal.h"
#include "crescent/error.h"
#include "crescent/host.h"

int cr_client_local_disk_report(cr_client *c, const char *segment_name,
                                const struct cr_local_disk_entry *entries, size_t n,
                                int *statuses) {
    assert(c != NULL && segment_name != NULL && (entries != NULL || n == 0));
    assert(statuses != NULL || n == 0);
    if (n > CR_LOCAL_DISK_REPORT_MAX) return CR_ERR_INVALID_PARAMS;
    Crescent__Master__LocalDiskReportRequest__Entry *slots = calloc(n + 1, sizeof(*slots));
    Crescent__Master__LocalDiskReportRequest__Entry **ptrs = calloc(n + 1, sizeof(*ptrs));
    if (slots == NULL || ptrs == NULL) {
        free(slots);
        free(ptrs);
        return CR_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        crescent__master__local_disk_report_request__entry__init(&slots[i]);
        slots[i].key = (char *)entries[i].key;
        slots[i].tenant_id = (char *)(entries[i].tenant != NULL ? entries[i].tenant : "default");
        slots[i].size = entries[i].size;
        slots[i].has_checksum_xxh3 = 1;
        slots[i].checksum_xxh3 = entries[i].checksum;
        slots[i].position = entries[i].position;
        slots[i].has_gone = entries[i].gone;
        slots[i].gone = entries[i].gone;
        ptrs[i] = &slots[i];
    }
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__LocalDiskReportRequest req =
        CRESCENT__MASTER__LOCAL_DISK_REPORT_REQUEST__INIT;
    req.client_id = &id;
    req.segment_name = (char *)segment_name;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    req.n_entries = n;
    req.entries = ptrs;
    ProtobufCMessage *msg = NULL;
    int rc = cr_client_call(c, CR_METHOD_LOCAL_DISK_REPORT, &req.base, &msg);
    free(slots);
    free(ptrs);
    for (size_t i = 0; i < n; i++) statuses[i] = rc;
    if (rc != CR_OK) return rc;
    const Crescent__Master__LocalDiskReportResponse *resp = (const void *)msg;
    rc = resp->status_code;
    if (rc != CR_OK && resp->error_message != NULL)
        (void)cr_client_fail(c, rc, "%s", resp->error_message);
    for (size_t i = 0; i < n; i++)
        statuses[i] = rc != CR_OK ? rc : i < resp->n_status_codes ? resp->status_codes[i]
                                                                   : CR_ERR_PROTOCOL;
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}
