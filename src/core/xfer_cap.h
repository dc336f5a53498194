/* Data-plane capabilities: what lets a client read or write a range of a
 * store server's segment (issue 28, "Also").  Pure functions, no sockets.
 *
 * The master and a segment's owner share a per-segment key (32 random bytes,
 * cr_cap_key_generate).  For every replica descriptor it hands out, the
 * master signs a capability: a range [addr, addr + length) of the segment
 * (addr as in BufHandle.buffer: the segment's base plus an offset), a mode
 * (read, write) and an expiry in Unix milliseconds (the lease's end for a
 * read, the put's deadline for a write).  The MAC is keyed BLAKE2b (libsodium's
 * crypto_generichash with a key, 128-bit output) over a domain string, the
 * segment's name and those fields, so a capability for one segment, range,
 * mode or time says nothing about any other.  The store server that holds the
 * key checks each request against it before a byte moves (cr_cap_check).
 *
 * Wire form (CR_CAP_BYTES, little-endian):
 *   u64 addr, u64 length, u64 expiry_ms, u8 mode (1 read, 2 write, 3 both),
 *   7 zero bytes, 16 bytes MAC. */
#ifndef CRESCENT_CORE_XFER_CAP_H
#define CRESCENT_CORE_XFER_CAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_CAP_KEY_BYTES 32u
#define CR_CAP_MAC_BYTES 16u
#define CR_CAP_BYTES 48u
/* How far the server's clock may run ahead of the master's before a fresh
 * capability reads as expired: the check accepts now <= expiry + skew. */
#define CR_CAP_SKEW_MS_DEFAULT 2000u
/* The suffix of a store server's read-only SSD segment ("<segment>#ssd"),
 * whose reads the master signs for local_disk replicas: the same text as
 * include/crescent/host.h's CR_HOST_SSD_SUFFIX, for code that cannot include
 * the public headers beside the store's (tests/integration/test_data_capability.py
 * reads through both). */
#define CR_CAP_SSD_SUFFIX "#ssd"

enum {
    CR_CAP_READ = 1,
    CR_CAP_WRITE = 2,
};

struct cr_cap {
    uint64_t addr;
    uint64_t length;
    uint64_t expiry_ms;
    uint8_t mode;
    uint8_t mac[CR_CAP_MAC_BYTES];
};

/* Why a capability was refused; CR_CAP_OK when it allows the access. */
enum cr_cap_verdict {
    CR_CAP_OK = 0,
    CR_CAP_MISSING,      /* required and not sent (the server's verdict, not cr_cap_check's) */
    CR_CAP_NO_KEY,       /* the segment has no key: nothing can be checked */
    CR_CAP_BAD_MAC,      /* forged, or signed for another segment or key */
    CR_CAP_EXPIRED,      /* now > expiry + skew */
    CR_CAP_OUT_OF_RANGE, /* the request leaves the capability's range */
    CR_CAP_WRONG_MODE,   /* a write with a read capability, or the reverse */
    CR_CAP_VERDICTS
};

/* A short name for a verdict, for logs and metric labels ("bad_mac"). */
const char *cr_cap_verdict_name(enum cr_cap_verdict v);

/* Fills key with CR_CAP_KEY_BYTES from the system's CSPRNG (libsodium).
 * Returns 0, or -1 when libsodium could not be initialised. */
int cr_cap_key_generate(uint8_t key[CR_CAP_KEY_BYTES]);

/* Writes cap->mac for the segment `name` (name_len 1..255 bytes) under key. */
void cr_cap_sign(const uint8_t key[CR_CAP_KEY_BYTES], const char *name, size_t name_len,
                 struct cr_cap *cap);

void cr_cap_encode(const struct cr_cap *cap, uint8_t out[CR_CAP_BYTES]);

/* Decodes CR_CAP_BYTES.  Returns 0, or -1 (nothing written to *out) when the
 * mode is not 1..3 or a reserved byte is not zero. */
int cr_cap_decode(const uint8_t in[CR_CAP_BYTES], struct cr_cap *out);

/* Checks a request of `mode` (CR_CAP_READ or CR_CAP_WRITE) on
 * [addr, addr + length) of segment `name` against cap, at now_ms (the
 * server's clock, Unix ms).  The MAC is compared in constant time and
 * first, so a forged capability is told apart from an expired one only by
 * whoever holds the key. */
enum cr_cap_verdict cr_cap_check(const uint8_t key[CR_CAP_KEY_BYTES], const char *name,
                                 size_t name_len, const struct cr_cap *cap, uint8_t mode,
                                 uint64_t addr, uint64_t length, uint64_t now_ms,
                                 uint64_t skew_ms);

#endif
