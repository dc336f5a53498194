/* Minimal HTTP/1.0 GET (see admin_http.h). */
#include "client/admin_http.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crescent/error.h"

/* Returns CR_OK with a connected socket in *fd_out, or a status with `error` set. */
static int connect_to(const char *address, int timeout_ms, int *fd_out, char *error,
                      size_t error_size) {
    char host[256];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof(host) || colon == address) {
        snprintf(error, error_size, "'%s' is not HOST:PORT", address);
        return CR_ERR_INVALID_PARAMS;
    }
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &res);
    if (gai != 0) {
        snprintf(error, error_size, "cannot resolve %s: %s", address, gai_strerror(gai));
        return CR_ERR_INVALID_PARAMS;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        snprintf(error, error_size, "cannot connect to %s: %s (is crescentd running?)", address,
                 strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return CR_ERR_IO;
    }
    freeaddrinfo(res);
    *fd_out = fd;
    return CR_OK;
}

static int read_all(int fd, char **out, size_t *len_out, char *error, size_t error_size) {
    size_t cap = 4096, len = 0;
    char *data = malloc(cap);
    for (;;) {
        if (data == NULL) return CR_ERR_NOMEM;
        if (len + 1 == cap) {
            if (cap >= CR_ADMIN_HTTP_RESPONSE_MAX) break;
            char *bigger = realloc(data, cap * 2);
            if (bigger == NULL) break;
            data = bigger;
            cap *= 2;
        }
        ssize_t n = recv(fd, data + len, cap - len - 1, 0);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            int status = (errno == EAGAIN || errno == EWOULDBLOCK) ? CR_ERR_TIMEOUT : CR_ERR_IO;
            snprintf(error, error_size, "reading the response failed: %s", strerror(errno));
            free(data);
            return status;
        }
        len += (size_t)n;
    }
    data[len] = '\0';
    *out = data;
    *len_out = len;
    return CR_OK;
}

int cr_admin_http_get(const char *address, const char *path, int timeout_ms, int *status_out,
                      char **body_out, char *error, size_t error_size) {
    int fd = -1;
    int status = connect_to(address, timeout_ms, &fd, error, error_size);
    if (status != CR_OK) return status;
    char request[512];
    int len = snprintf(request, sizeof(request), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, address);
    if (len <= 0 || (size_t)len >= sizeof(request) || send(fd, request, (size_t)len, MSG_NOSIGNAL) != len) {
        snprintf(error, error_size, "sending the request failed: %s", strerror(errno));
        close(fd);
        return CR_ERR_IO;
    }
    char *response = NULL;
    size_t response_len = 0;
    int rc = read_all(fd, &response, &response_len, error, error_size);
    close(fd);
    if (rc != CR_OK) return rc;
    char *body = strstr(response, "\r\n\r\n");
    if (sscanf(response, "HTTP/%*d.%*d %d", &status) != 1 || body == NULL) {
        snprintf(error, error_size, "%s did not answer HTTP", address);
        free(response);
        return CR_ERR_PROTOCOL;
    }
    body += 4;
    memmove(response, body, response_len - (size_t)(body - response) + 1);
    *status_out = status;
    *body_out = response;
    return CR_OK;
}
