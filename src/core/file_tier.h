/* The shared file tier's on-disk names and file header (docs/tiers.md).
 *
 * One file per object under <root_fs_dir>/<cluster_id>/:
 *
 *     <tenant>/<hh>/<hash>-<prefix>.obj
 *
 * <tenant> is the tenant's name escaped; <hash> 32 hex digits of XXH3-128
 * over the tenant, a 0 byte and the key, <hh> its first two (256 fan-out
 * directories); <prefix> the key's first bytes escaped, for people reading
 * a listing.  Escaping keeps [A-Za-z0-9_-] and writes every other byte as
 * %XX, so no name holds '/', a leading '.', "..", NUL or control bytes
 * whatever the key, and names stay short for 4 KiB keys.  Two keys share a
 * name only if their 128-bit hashes collide; the header holds the whole
 * tenant and key, and a reader checks them, so even then a file is never
 * served for another key.
 *
 * File: a 40-byte header, the tenant, the key, the value.
 *     magic "CRF1" | u32 header_len | u16 tenant_len | u16 reserved 0 |
 *     u32 key_len | u64 value_len | u64 value_xxh3 | u64 header_xxh3
 * little-endian; header_len = 40 + tenant_len + key_len; header_xxh3 is
 * XXH3-64 of the header with that field zeroed, the tenant and the key.
 *
 * Pure code (no I/O), shared by crescentd and libcrescent. */
#ifndef CRESCENT_CORE_FILE_TIER_H
#define CRESCENT_CORE_FILE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_FILE_TIER_HEADER_FIXED 40u
#define CR_FILE_TIER_TENANT_MAX 256u
#define CR_FILE_TIER_KEY_MAX 4096u
#define CR_FILE_TIER_PREFIX_BYTES 24u /* key bytes shown in a name */
/* The longest relative name: tenant (256 bytes, 3 each escaped) / hh /
 * hash - prefix (24 bytes, 3 each) .obj */
#define CR_FILE_TIER_NAME_MAX (3u * CR_FILE_TIER_TENANT_MAX + 1 + 2 + 1 + 32 + 1 + \
                               3u * CR_FILE_TIER_PREFIX_BYTES + 4 + 1)
#define CR_FILE_TIER_DEFAULT_CLUSTER "mooncake_cluster"

/* Writes the object's name relative to <root>/<cluster_id>/ into out (NUL
 * terminated).  tenant NULL or "" is "default".  Returns the length, or 0
 * when cap is too small (CR_FILE_TIER_NAME_MAX always suffices) or the
 * tenant or key is out of bounds (key_len 0 or over CR_FILE_TIER_KEY_MAX). */
size_t cr_file_tier_name(const char *tenant, const char *key, size_t key_len, char *out,
                         size_t cap);

struct cr_file_tier_header {
    uint32_t header_len; /* bytes before the value */
    uint32_t tenant_len;
    uint32_t key_len;
    uint64_t value_len;
    uint64_t value_xxh3;
    const char *tenant; /* decode: into the buffer given; not NUL terminated */
    const char *key;
};

/* Writes the header for (tenant, key, value_len, value_xxh3) into out.
 * Returns its length, or 0 when cap is too small or a length is out of
 * bounds. */
size_t cr_file_tier_header_encode(const char *tenant, const char *key, size_t key_len,
                                  uint64_t value_len, uint64_t value_xxh3, uint8_t *out,
                                  size_t cap);

enum cr_file_tier_verdict {
    CR_FILE_TIER_OK = 0,
    CR_FILE_TIER_SHORT = 1,     /* fewer bytes than the header says: read more (or torn) */
    CR_FILE_TIER_BAD = 2,       /* not a header of this format, or corrupt */
};

/* Decodes a header from p[0..len): on OK fills *out (tenant and key point
 * into p).  SHORT with out->header_len set when the fixed part was whole
 * but the tenant and key are not all there yet.  Reads nothing outside the
 * range; never trusts a length before checking it. */
enum cr_file_tier_verdict cr_file_tier_header_decode(const uint8_t *p, size_t len,
                                                     struct cr_file_tier_header *out);

/* Whether a decoded header names (tenant, key) with this value. */
bool cr_file_tier_header_matches(const struct cr_file_tier_header *h, const char *tenant,
                                 const char *key, size_t key_len, uint64_t value_len);

#endif
