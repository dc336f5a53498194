/* Sizes as people write them on command lines and in config files. */
#ifndef CRESCENT_CORE_SIZE_TEXT_H
#define CRESCENT_CORE_SIZE_TEXT_H

#include <stdbool.h>
#include <stdint.h>

/* Parses "4096", "0x1000", or a number with a binary suffix K, M, G or T
 * (either case: "64K", "16M", "2G", "1T") into bytes.  Returns false for
 * anything else (a sign, trailing text, an overflow); *out is unchanged then. */
bool cr_parse_size(const char *text, uint64_t *out);

#endif
