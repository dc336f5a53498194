/* The admin token (--admin-token-file): a secret that destructive RPCs and
 * HTTP mutations must carry when it is set (README, "Exposing crescentd
 * safely").  Read once at start; compared in constant time. */
#ifndef CRESCENT_DAEMON_ADMIN_TOKEN_H
#define CRESCENT_DAEMON_ADMIN_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define CR_ADMIN_TOKEN_MIN 16u  /* shorter is guessable */
#define CR_ADMIN_TOKEN_MAX 256u

struct cr_admin_token {
    size_t len; /* 0: no token configured, everything is allowed as before */
    char text[CR_ADMIN_TOKEN_MAX + 1];
};

/* Reads the token: the file's first line without its line end.  An empty
 * path leaves *out empty (no token).  False with a sentence in `error` for a
 * file that cannot be read or a token outside CR_ADMIN_TOKEN_MIN..MAX
 * printable characters. */
bool cr_admin_token_read(const char *path, struct cr_admin_token *out, char *error,
                         size_t error_size);

/* Whether `given` (given_len bytes, need not be NUL-terminated) is the token;
 * true when no token is configured.  Takes the same time for every wrong
 * token of a length. */
bool cr_admin_token_allows(const struct cr_admin_token *token, const char *given,
                           size_t given_len);

#endif
