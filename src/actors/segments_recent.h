/* The keys of the last objects put (segments_recent.c). */
#ifndef CRESCENT_ACTORS_SEGMENTS_RECENT_H
#define CRESCENT_ACTORS_SEGMENTS_RECENT_H

#include <stdint.h>

#include "core/store.h"
#include "msgs/master_msgs.h"

#define SEGMENTS_RECENT_MAX 64u /* keys remembered; /api/v1/objects?order=recent shows at most these */

struct segments_recent;

struct segments_recent *segments_recent_new(void);
void segments_recent_free(struct segments_recent *r);
/* At an object's first PutEnd (a STORE event). */
void segments_recent_note(struct segments_recent *r, const char *tenant, const char *key,
                          uint32_t key_len);
/* The remembered objects that still exist, newest first, at most q->limit,
 * of q->tenant when set: /api/v1/objects's JSON. */
int segments_recent_render(const struct segments_recent *r, const cr_store *store,
                           uint64_t now_ms, const struct cr_master_admin_query *q,
                           char **json_out);

#endif
