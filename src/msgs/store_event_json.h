/* Seed-000 payload → JSON, for `crescentctl events --follow`.
 *
 * Decodes one batch payload (`[ts, [event, ...]]`, see store_event.h) into one
 * JSON object per event:
 *   {"seq":7, "ts":1700000000.5, "type":"BlockStoreEvent", "key":"k",
 *    "replicas":[{"type":"memory","location":"tcp://..."}], "model_name":"",
 *    "block_size":0, "block_hash":"", "parent_block_hash":"", "token_ids":[]}
 * BlockUpdateEvent objects stop after "replicas"; RemoveAllEvent after "type".
 *
 * The payload comes from the network, so it is validated completely (shape,
 * element counts, msgpack types, u32 ranges, replica type names, UTF-8 of
 * strings, no trailing bytes) with allocations bounded by its size: a fuzzer
 * may feed it anything. */
#ifndef CRESCENT_MSGS_STORE_EVENT_JSON_H
#define CRESCENT_MSGS_STORE_EVENT_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Decodes `payload` of batch `seq` (≤ INT64_MAX, JSON's integer range).
 * Returns CR_OK and sets *events_out to a new JSON array of event objects
 * (the caller json_decref()s it), CR_ERR_PROTOCOL for malformed input with a
 * NUL-terminated reason written to `error` (when error_size > 0; it may be
 * NULL when error_size is 0), CR_ERR_INVALID_PARAMS for a seq above
 * INT64_MAX, or CR_ERR_NOMEM.  *events_out is untouched on error. */
int cr_store_event_json_decode(const uint8_t *payload, size_t len, uint64_t seq,
                               json_t **events_out, char *error, size_t error_size);

/* Decodes like cr_store_event_json_decode and writes each event as one
 * compact JSON line to `out`.  Writes nothing when decoding fails.  Returns
 * the decoder's errors, or CR_ERR_IO when writing fails. */
int cr_store_event_json_write_lines(const uint8_t *payload, size_t len, uint64_t seq,
                                    FILE *out, char *error, size_t error_size);

#endif
