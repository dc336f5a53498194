/* Rendering the indexer's /query answer as JSON (wire-formats.md §5, the
 * conductor's shape):
 *   {"<tenant>":{"<instance>":{"longest_matched":N,"GPU":N,"CPU":N,"DISK":N
 *                              [,"<other medium>":N],"DP":{"<rank>":N,...}},...}}
 * or {} without hits.  Pure functions, safe on any thread. */
#ifndef CRESCENT_HTTP_INDEXER_RENDER_H
#define CRESCENT_HTTP_INDEXER_RENDER_H

#include "core/buf.h"
#include "msgs/indexer_msgs.h"

/* Appends the answer for `tenant` to b (failures leave b failed: check
 * cr_buf_ok).  Every hit becomes one entry, in r's order. */
void cr_indexer_render_matches_json(struct cr_buf *b, const char *tenant,
                                    const struct cr_indexer_result *r);

/* Appends s as a JSON string literal: quotes, backslashes and control
 * characters escaped (names are caller-supplied bytes), other bytes as they are. */
void cr_indexer_render_quoted(struct cr_buf *b, const char *s);

/* Keeps the k hits with the longest matches (a tie goes to the earlier
 * hit), in r's order; k 0 or at least hit_count keeps all.  For a request's
 * top_k.  CR_OK, or CR_ERR_NOMEM (r unchanged). */
int cr_indexer_result_keep_top(struct cr_indexer_result *r, uint32_t k);

#endif
