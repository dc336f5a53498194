/* Sizes as people write them (see size_text.h). */
#include "core/size_text.h"

#include <errno.h>
#include <stdlib.h>

bool cr_parse_size(const char *text, uint64_t *out) {
    if (text == NULL || text[0] < '0' || text[0] > '9') return false;
    errno = 0;
    char *end;
    unsigned long long value = strtoull(text, &end, 0);
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (errno != 0 || *end != '\0' || (shift > 0 && value > (UINT64_MAX >> shift))) return false;
    *out = (uint64_t)value << shift;
    return true;
}
