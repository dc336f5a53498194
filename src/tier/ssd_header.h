/* The header of one SSD-tier file (docs/tiers.md, "Local SSD tier"): what a store server
 * writes before an offloaded object's value, and checks in full before it
 * serves a byte of the file.
 *
 * Layout, little-endian, value bytes right after the header:
 *   0  magic "CRSSDv\r\n" (8 bytes: a text tool or a line-ending rewrite
 *      spoils it visibly)
 *   8  u32 format version (CR_SSD_FORMAT_VERSION)
 *  12  u32 header length (fixed part + key + tenant + 8)
 *  16  u32 key length (1..CR_SSD_KEY_MAX)
 *  20  u32 tenant length (1..CR_SSD_TENANT_MAX)
 *  24  u64 value length
 *  32  u64 XXH3-64 of the value (the object's PutEnd checksum)
 *  40  key bytes, tenant bytes
 *   .  u64 XXH3-64 of every header byte before it
 *
 * Pure: no I/O, no allocation; the decoder is a libFuzzer target
 * (tests/fuzz/fuzz_ssd_header.c). */
#ifndef CRESCENT_TIER_SSD_HEADER_H
#define CRESCENT_TIER_SSD_HEADER_H

#include <stddef.h>
#include <stdint.h>

#define CR_SSD_FORMAT_VERSION 1u
#define CR_SSD_MAGIC "CRSSDv\r\n"
#define CR_SSD_MAGIC_BYTES 8u
#define CR_SSD_HEADER_FIXED 40u
#define CR_SSD_KEY_MAX 4096u   /* = CR_STORE_KEY_LEN_MAX */
#define CR_SSD_TENANT_MAX 255u /* a store tenant name */
#define CR_SSD_HEADER_MAX (CR_SSD_HEADER_FIXED + CR_SSD_KEY_MAX + CR_SSD_TENANT_MAX + 8u)
#define CR_SSD_WHY_MAX 160u

struct cr_ssd_header {
    uint32_t version;
    uint32_t header_len;   /* bytes before the value */
    const uint8_t *key;    /* into the decoded buffer (or the caller's, to encode) */
    uint32_t key_len;
    const uint8_t *tenant;
    uint32_t tenant_len;
    uint64_t value_len;
    uint64_t value_xxh3;
};

/* Bytes the header of a key_len/tenant_len pair takes. */
uint32_t cr_ssd_header_size(uint32_t key_len, uint32_t tenant_len);

/* Writes h's header (version and header_len are filled in here) into out,
 * which has cap bytes.  Returns the bytes written, or 0 when a length is out
 * of range or cap is short. */
size_t cr_ssd_header_encode(const struct cr_ssd_header *h, uint8_t *out, size_t cap);

/* Decodes and checks the header at the start of buf (len bytes: at least
 * the header; the value need not be there).  Every field is checked (magic,
 * version, lengths in range and consistent, the header's own checksum)
 * before *out is written; key and tenant point into buf.  Returns CR_OK,
 * CR_ERR_AGAIN (buf holds less than the header says it needs: read more,
 * *out->header_len tells how much), or CR_ERR_PROTOCOL with a sentence in
 * why (why_len may be 0). */
int cr_ssd_header_decode(const uint8_t *buf, size_t len, struct cr_ssd_header *out, char *why,
                         size_t why_len);

#endif
