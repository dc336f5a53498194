/* crescentctl's client secrets across processes.
 *
 * crescentd issues a secret to a client id at its first Mount (or Ping once
 * known) and requires it on the id's later calls (proto/master.proto).  One
 * crescentctl process is one cr_client, so `crescentctl mount seg0 1G` and a
 * later `crescentctl put-start` for the same CRESCENT_CLIENT_ID are two
 * clients: the secret the first was issued is kept for the user in
 * $XDG_RUNTIME_DIR/crescent/client-secrets/ (else ~/.cache/crescent/...,
 * ~ from $HOME or the password database),
 * one 0600 file per daemon endpoint and client id, and read by the next.
 * CRESCENT_CLIENT_SECRET, when set, wins (libcrescent reads it at open). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/crescentctl.h"
#include "crescent/client.h"

/* The state file's path for (endpoint, client id); false when there is no
 * per-user directory to keep it in. */
static bool secret_path(const char *endpoint, const cr_client *c, char *path, size_t size,
                        bool create) {
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    const char *home = getenv("HOME");
    if (home == NULL || home[0] != '/') { /* an empty environment: the user's own home */
        const struct passwd *pw = getpwuid(getuid());
        home = pw != NULL ? pw->pw_dir : NULL;
    }
    char dir[512];
    if (runtime != NULL && runtime[0] == '/')
        snprintf(dir, sizeof(dir), "%s/crescent", runtime);
    else if (home != NULL && home[0] == '/')
        snprintf(dir, sizeof(dir), "%s/.cache/crescent", home);
    else
        return false;
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/client-secrets", dir);
    if (create) {
        if (strstr(dir, "/.cache/") != NULL) {
            char cache[512];
            snprintf(cache, sizeof(cache), "%s/.cache", home);
            (void)mkdir(cache, 0700);
        }
        (void)mkdir(dir, 0700);
        if (mkdir(sub, 0700) != 0 && errno != EEXIST) return false;
    }
    /* The endpoint with everything but letters and digits as '_'. */
    char ep[128];
    size_t n = 0;
    for (const char *p = endpoint; *p != '\0' && n + 1 < sizeof(ep); p++)
        ep[n++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
                      ? *p
                      : '_';
    ep[n] = '\0';
    uint8_t id[CR_CLIENT_ID_BYTES];
    char id_text[CR_CLIENT_UUID_TEXT];
    cr_client_get_id(c, id);
    cr_client_uuid_format(id, id_text);
    int len = snprintf(path, size, "%s/%s-%s", sub, ep, id_text);
    return len > 0 && (size_t)len < size;
}

static bool env_secret(void) {
    const char *env = getenv("CRESCENT_CLIENT_SECRET");
    return env != NULL && env[0] != '\0';
}

void ctl_secret_load(const char *endpoint, cr_client *c) {
    char path[1024];
    if (env_secret() || !secret_path(endpoint, c, path, sizeof(path), false)) return;
    FILE *f = fopen(path, "re");
    if (f == NULL) return; /* none kept: this id was never issued one here */
    char hex[2 * CR_CLIENT_SECRET_BYTES + 2] = {0};
    size_t got = fread(hex, 1, 2 * CR_CLIENT_SECRET_BYTES, f);
    fclose(f);
    uint8_t secret[CR_CLIENT_SECRET_BYTES];
    /* 32 hex digits parse as a UUID's 16 bytes; anything else is ignored. */
    if (got == 2 * CR_CLIENT_SECRET_BYTES && cr_client_uuid_parse(hex, secret) == CR_OK)
        cr_client_set_secret(c, secret);
}

void ctl_secret_save(const char *endpoint, const cr_client *c) {
    uint8_t secret[CR_CLIENT_SECRET_BYTES];
    char path[1024];
    if (env_secret() || !cr_client_get_secret(c, secret) ||
        !secret_path(endpoint, c, path, sizeof(path), true))
        return;
    char hex[2 * CR_CLIENT_SECRET_BYTES + 1];
    for (size_t i = 0; i < CR_CLIENT_SECRET_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", secret[i]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return; /* best effort: the next process is refused with a sentence saying why */
    ssize_t w = write(fd, hex, 2 * CR_CLIENT_SECRET_BYTES);
    (void)w;
    close(fd);
}
