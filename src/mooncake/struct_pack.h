/* yalantinglibs' struct_pack, the serialization of Mooncake's master RPC
 * (coro_rpc), as far as Mooncake's types use it: docs/mooncake.md has the
 * layout and where every constant comes from.
 *
 * A serialized value is
 *   u32 LE  type hash: MD5(type literal)[0..4] read big-endian, bit 0 cleared,
 *           then bit 0 set when a metainfo byte follows (always, here)
 *   u8      metainfo: 0x04 (a type literal follows) | size width code << 3
 *           (container lengths are 1 << code bytes wide)
 *   bytes   the type literal and a NUL (present when metainfo has 0x04)
 *   payload fields in declaration order: integers, enums and bools fixed
 *           width little-endian; strings and vectors a length then the
 *           elements; optional/expected a u8 tag then the value; variant a u8
 *           index then the alternative; a trivially copyable struct (UUID,
 *           std::pair<u64,u64>) its 16 bytes.
 *
 * The reader is for untrusted bytes: every read is bounded, a failed read
 * sets `bad` and returns zeros, and the caller checks `bad` (and `off == len`)
 * once at the end.  No allocation. */
#ifndef CRESCENT_MOONCAKE_STRUCT_PACK_H
#define CRESCENT_MOONCAKE_STRUCT_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One type's header: its hash (bit 0 clear) and literal (without the NUL). */
struct cr_sp_type {
    uint32_t hash;
    const uint8_t *literal;
    uint8_t literal_len;
};

struct cr_sp_reader {
    const uint8_t *p;
    size_t len, off;
    uint8_t width; /* bytes of a container length: 1, 2, 4 or 8 */
    bool bad;
};

/* Starts reading a value of type `t`: checks the hash, the metainfo and, when
 * present, that the literal is t's.  False (and `bad`) when they differ. */
bool cr_sp_read_begin(struct cr_sp_reader *r, const uint8_t *buf, size_t len,
                      const struct cr_sp_type *t);
uint8_t cr_sp_u8(struct cr_sp_reader *r);
bool cr_sp_bool(struct cr_sp_reader *r); /* 0 or 1; anything else is bad */
uint32_t cr_sp_u32(struct cr_sp_reader *r);
uint64_t cr_sp_u64(struct cr_sp_reader *r);
/* A container length, at most `max` (and, with elem_min > 0, at most the
 * bytes left / elem_min: a length the buffer cannot hold is bad at once). */
size_t cr_sp_len(struct cr_sp_reader *r, size_t max, size_t elem_min);
/* A string: its bytes stay in the buffer (not NUL-terminated). */
const uint8_t *cr_sp_str(struct cr_sp_reader *r, size_t max, size_t *n);
/* Raw bytes (a trivially copyable struct). */
const uint8_t *cr_sp_raw(struct cr_sp_reader *r, size_t n);
/* True when everything was read and nothing was bad. */
bool cr_sp_read_done(const struct cr_sp_reader *r);

struct cr_sp_writer {
    uint8_t *buf;
    size_t len, cap;
    uint8_t width;  /* bytes of a container length */
    bool too_long;  /* a length did not fit `width`: write again wider */
    bool nomem;
};

/* Starts a value of type `t` with container lengths `width` bytes wide
 * (cr_sp_write_value picks the width).  Appends to w->buf (grown with
 * realloc; nomem on failure). */
void cr_sp_write_begin(struct cr_sp_writer *w, const struct cr_sp_type *t, uint8_t width);
void cr_sp_put_u8(struct cr_sp_writer *w, uint8_t v);
void cr_sp_put_u32(struct cr_sp_writer *w, uint32_t v);
void cr_sp_put_u64(struct cr_sp_writer *w, uint64_t v);
void cr_sp_put_len(struct cr_sp_writer *w, size_t n);
void cr_sp_put_str(struct cr_sp_writer *w, const char *s, size_t n);
void cr_sp_put_raw(struct cr_sp_writer *w, const void *p, size_t n);

/* Writes a whole value: calls fill(w, ctx) with width 1, and again with 2,
 * 4 and 8 while a length did not fit (struct_pack picks the narrowest width
 * that holds the longest container).  The value starts at w->len on entry;
 * false on out of memory (w->nomem). */
bool cr_sp_write_value(struct cr_sp_writer *w, const struct cr_sp_type *t,
                       void (*fill)(struct cr_sp_writer *w, const void *ctx), const void *ctx);

#endif
