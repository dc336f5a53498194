/* The Host, Origin and body type checks of the HTTP front (browsers.h). */
#include "http/browsers.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "crescent/error.h"

/* [start, start + len) of one name in a list, trimmed. */
static int name_add(struct cr_http_names *out, const char *start, size_t len, bool origins,
                    const char *flag, char *error, size_t error_size) {
    while (len > 0 && (*start == ' ' || *start == '\t')) start++, len--;
    while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t')) len--;
    if (len == 0) {
        snprintf(error, error_size, "%s: an empty name in the list (NAME,NAME,...)", flag);
        return CR_ERR_INVALID_PARAMS;
    }
    if (len == 1 && *start == '*') {
        out->any = true;
        return CR_OK;
    }
    if (out->count == CR_HTTP_NAMES_MAX || len >= CR_HTTP_NAME_LEN) {
        snprintf(error, error_size, "%s: at most %u names of at most %u bytes each", flag,
                 CR_HTTP_NAMES_MAX, CR_HTTP_NAME_LEN - 1);
        return CR_ERR_INVALID_PARAMS;
    }
    char *name = out->name[out->count];
    memcpy(name, start, len);
    name[len] = '\0';
    const char *sep = strstr(name, "://");
    if (origins && (sep == NULL || sep == name || sep[3] == '\0' || strchr(sep + 3, '/'))) {
        snprintf(error, error_size,
                 "%s: '%s' is not an origin (scheme://host[:port], e.g. https://ui.example.com)",
                 flag, name);
        return CR_ERR_INVALID_PARAMS;
    }
    if (!origins && (strchr(name, '/') != NULL || strchr(name, ':') != NULL)) {
        snprintf(error, error_size, "%s: '%s' is not a host name (e.g. crescent.example.com)",
                 flag, name);
        return CR_ERR_INVALID_PARAMS;
    }
    out->count++;
    return CR_OK;
}

int cr_http_names_parse(const char *csv, bool origins, const char *flag,
                        struct cr_http_names *out, char *error, size_t error_size) {
    assert(flag != NULL && out != NULL && error != NULL);
    memset(out, 0, sizeof(*out));
    if (csv == NULL || csv[0] == '\0') return CR_OK;
    for (const char *p = csv;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        int rc = name_add(out, p, len, origins, flag, error, error_size);
        if (rc != CR_OK) return rc;
        if (comma == NULL) return CR_OK;
        p = comma + 1;
    }
}

/* The name part of host[:port] or [v6][:port], into `name`; false if it
 * does not fit or is malformed. */
static bool host_name(const char *host, char *name, size_t name_size, bool *bracketed) {
    size_t len;
    *bracketed = host[0] == '[';
    if (*bracketed) {
        const char *close = strchr(host, ']');
        if (close == NULL || (close[1] != '\0' && close[1] != ':')) return false;
        host++;
        len = (size_t)(close - host);
    } else {
        const char *colon = strchr(host, ':');
        len = colon != NULL ? (size_t)(colon - host) : strlen(host);
    }
    if (len == 0 || len >= name_size) return false;
    memcpy(name, host, len);
    name[len] = '\0';
    return true;
}

bool cr_http_host_allowed(const struct cr_http_names *hosts, const char *host) {
    assert(hosts != NULL);
    if (host == NULL) return true;
    if (hosts->any) return true;
    char name[256];
    bool bracketed;
    if (!host_name(host, name, sizeof(name), &bracketed)) return false;
    unsigned char addr[16];
    if (bracketed) return inet_pton(AF_INET6, name, addr) == 1;
    if (inet_pton(AF_INET, name, addr) == 1) return true;
    size_t len = strlen(name);
    if (name[len - 1] == '.') name[--len] = '\0'; /* "localhost." is localhost */
    if (strcasecmp(name, "localhost") == 0) return true;
    if (len > 10 && strcasecmp(name + len - 10, ".localhost") == 0) return true;
    for (unsigned i = 0; i < hosts->count; i++)
        if (strcasecmp(name, hosts->name[i]) == 0) return true;
    return false;
}

bool cr_http_origin_allowed(const struct cr_http_names *origins, const char *origin,
                            const char *host) {
    assert(origins != NULL);
    if (origin == NULL) return true;
    if (origins->any) return true;
    for (unsigned i = 0; i < origins->count; i++)
        if (strcasecmp(origin, origins->name[i]) == 0) return true;
    const char *sep = strstr(origin, "://");
    return sep != NULL && host != NULL && strcasecmp(sep + 3, host) == 0;
}

bool cr_http_body_type_allowed(const char *content_type) {
    if (content_type == NULL) return false;
    static const char *const types[] = {"application/json", "application/msgpack"};
    while (*content_type == ' ' || *content_type == '\t') content_type++;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        size_t n = strlen(types[i]);
        if (strncasecmp(content_type, types[i], n) != 0) continue;
        char next = content_type[n];
        if (next == '\0' || next == ';' || next == ' ' || next == '\t') return true;
    }
    return false;
}
