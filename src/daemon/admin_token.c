/* The admin token (see admin_token.h). */
#include "daemon/admin_token.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool cr_admin_token_read(const char *path, struct cr_admin_token *out, char *error,
                         size_t error_size) {
    memset(out, 0, sizeof(*out));
    if (path == NULL || path[0] == '\0') return true;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(error, error_size, "cannot read the admin token file %s: %s", path,
                 strerror(errno));
        return false;
    }
    char line[CR_ADMIN_TOKEN_MAX + 4] = "";
    bool got = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    size_t len = got ? strcspn(line, "\r\n") : 0;
    line[len] = '\0';
    bool printable = true;
    for (size_t i = 0; i < len; i++) printable &= line[i] > ' ' && line[i] < 0x7f;
    if (len < CR_ADMIN_TOKEN_MIN || len > CR_ADMIN_TOKEN_MAX || !printable) {
        snprintf(error, error_size,
                 "%s: the admin token (its first line) must be %u to %u printable characters "
                 "without spaces (e.g. `head -c 32 /dev/urandom | base64 > %s`)",
                 path, CR_ADMIN_TOKEN_MIN, CR_ADMIN_TOKEN_MAX, path);
        return false;
    }
    memcpy(out->text, line, len + 1);
    out->len = len;
    return true;
}

bool cr_admin_token_allows(const struct cr_admin_token *token, const char *given,
                           size_t given_len) {
    if (token->len == 0) return true;
    if (given == NULL || given_len != token->len) return false;
    uint8_t diff = 0;
    for (size_t i = 0; i < token->len; i++) diff |= (uint8_t)(token->text[i] ^ given[i]);
    return diff == 0;
}
