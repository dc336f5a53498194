/* The DRAIN_JOB record (record.h): one drain job's whole state
 * (src/actors/segments_drain.c, Mooncake's /api/v1/drain_jobs), written when
 * the job is created, when its status or counters changed in a tick (at most
 * once a second per job), when it ends or is canceled, and into every
 * snapshot for each job kept.  Like every record it states an effect: a
 * later record of the same job id replaces the earlier one.
 *
 * Payload, little-endian:
 *     u64 id_first | u64 id_second | u8 status | u32 max_concurrency
 *     u64 created_wall_ms | u64 updated_wall_ms
 *     u64 succeeded | u64 failed | u64 migrated_bytes
 *     u8 segment_count | u8 target_count
 *     segment names, then target names (u16 length, bytes each) | message
 *
 * Pure code, like record.c. */
#ifndef CRESCENT_DURABLE_RECORD_DRAIN_H
#define CRESCENT_DURABLE_RECORD_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_DURABLE_DRAIN_SEGMENTS_MAX 64u     /* segments (and targets) of a job */
#define CR_DURABLE_DRAIN_NAMES_MAX 12288u     /* their names, NUL-terminated, together */
#define CR_DURABLE_DRAIN_MESSAGE_MAX 200u
#define CR_DURABLE_DRAIN_STATUS_MAX 5u        /* CANCELED, segments_drain.c's last */
#define CR_DURABLE_DRAIN_CONCURRENCY_MAX 1024u
#define CR_DURABLE_DRAIN_JOBS_MAX 64u         /* kept by the replay, as by segments_drain.c */

struct cr_durable_drain {
    uint64_t id_first, id_second;
    uint8_t status; /* segments_drain.c's enum job_status: 0 CREATED .. 5 CANCELED */
    uint32_t max_concurrency;
    uint64_t created_wall_ms, updated_wall_ms;
    uint64_t succeeded, failed, migrated_bytes;
    uint32_t segment_count, target_count;
    uint32_t names_len;                       /* bytes of names used */
    char names[CR_DURABLE_DRAIN_NAMES_MAX];   /* segments then targets, each NUL-ended */
    char message[CR_DURABLE_DRAIN_MESSAGE_MAX + 1];
};

/* Clears d's identity and lists (not its name bytes). */
void cr_durable_drain_clear(struct cr_durable_drain *d);

/* Appends a segment (target false) or target name: segments first.
 * False when it does not fit (count or bytes) or is empty or too long. */
bool cr_durable_drain_add(struct cr_durable_drain *d, const char *name, bool target);

/* Walks the names: start with *cursor = 0; the segments come first
 * (segment_count of them), then the targets.  NULL at the end. */
const char *cr_durable_drain_next(const struct cr_durable_drain *d, uint32_t *cursor);

/* Bytes of the payload, and writing it (p has room for them). */
size_t cr_durable_drain_payload_size(const struct cr_durable_drain *d);
void cr_durable_drain_encode(const struct cr_durable_drain *d, uint8_t *p);

/* Decodes and validates a whole payload p[0..len) (every byte used): known
 * status, concurrency 1..1024, 1..64 segments and 0..64 targets with
 * non-empty names without NUL, no name twice among the segments, no target
 * that is one of them, a message of at most 200 bytes.  Returns NULL, or
 * the field that is wrong. */
const char *cr_durable_drain_decode(const uint8_t *p, size_t len, struct cr_durable_drain *d);

/* The jobs a replay kept, in the order they were first seen: a record of a
 * known id replaces it, a new one is added, dropping the oldest finished one
 * (the oldest one when none finished) when CR_DURABLE_DRAIN_JOBS_MAX are kept
 * (what segments_drain.c does with its own). */
struct cr_durable_drain_jobs {
    struct cr_durable_drain *at[CR_DURABLE_DRAIN_JOBS_MAX];
    uint32_t count;
};

/* Returns 0, or -1 when out of memory (the set is unchanged). */
int cr_durable_drain_jobs_put(struct cr_durable_drain_jobs *jobs, const struct cr_durable_drain *d);
void cr_durable_drain_jobs_free(struct cr_durable_drain_jobs *jobs);

#endif
