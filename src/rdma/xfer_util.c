/* Helpers shared by the transfer layer's server and client. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_internal.h"

static bool parse_port(const char *text, uint16_t *out) {
    if (*text == '\0') return false;
    char *end = NULL;
    errno = 0;
    unsigned long port = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || port > 65535) return false;
    *out = (uint16_t)port;
    return true;
}

int cr_xfer_endpoint_parse(const char *endpoint, struct sockaddr_storage *addr,
                           socklen_t *addr_len) {
    assert(addr != NULL && addr_len != NULL);
    if (endpoint == NULL) return CR_ERR_INVALID_PARAMS;
    size_t len = strlen(endpoint);
    if (len == 0 || len > CR_XFER_ENDPOINT_MAX) return CR_ERR_INVALID_PARAMS;
    char host[CR_XFER_ENDPOINT_MAX + 1];
    const char *colon = strrchr(endpoint, ':');
    if (colon == NULL) return CR_ERR_INVALID_PARAMS;
    size_t host_len = (size_t)(colon - endpoint);
    memcpy(host, endpoint, host_len);
    host[host_len] = '\0';
    uint16_t port = 0;
    if (!parse_port(colon + 1, &port)) return CR_ERR_INVALID_PARAMS;
    memset(addr, 0, sizeof(*addr));
    if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
        host[host_len - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1) return CR_ERR_INVALID_PARAMS;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *addr_len = sizeof(*in6);
        return CR_OK;
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)addr;
    if (strcmp(host, "localhost") == 0) snprintf(host, sizeof(host), "127.0.0.1");
    if (inet_pton(AF_INET, host, &in4->sin_addr) != 1) return CR_ERR_INVALID_PARAMS;
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    *addr_len = sizeof(*in4);
    return CR_OK;
}

void cr_xfer_endpoint_format(const struct sockaddr_storage *addr, char *out, size_t size) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(out, size, "[%s]:%u", host, ntohs(in6->sin6_port));
        return;
    }
    const struct sockaddr_in *in4 = (const struct sockaddr_in *)addr;
    inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
    snprintf(out, size, "%s:%u", host, ntohs(in4->sin_port));
}

socklen_t cr_xfer_shm_address(const char *endpoint, struct sockaddr_un *out) {
    memset(out, 0, sizeof(*out));
    out->sun_family = AF_UNIX;
    /* sun_path[0] = '\0': the abstract namespace, no file to clean up. */
    int n = snprintf(out->sun_path + 1, sizeof(out->sun_path) - 1, "crescent-xfer/%s", endpoint);
    assert(n > 0 && (size_t)n < sizeof(out->sun_path) - 1);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

uint32_t cr_xfer_iov_slice(const struct iovec *iov, uint32_t count, uint64_t offset,
                           uint64_t length, struct iovec *out, uint32_t max) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < count && length > 0 && used < max; i++) {
        uint64_t entry = iov[i].iov_len;
        if (offset >= entry) {
            offset -= entry;
            continue;
        }
        uint64_t take = entry - offset < length ? entry - offset : length;
        out[used].iov_base = (char *)iov[i].iov_base + offset;
        out[used].iov_len = take;
        used++;
        length -= take;
        offset = 0;
    }
    return used;
}

void cr_xfer_iov_copy_in(const struct iovec *iov, uint32_t count, uint64_t offset,
                         const void *src, uint64_t length) {
    struct iovec slice[CR_XFER_OP_IOV_MAX];
    uint32_t n = cr_xfer_iov_slice(iov, count, offset, length, slice, CR_XFER_OP_IOV_MAX);
    const char *from = src;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(slice[i].iov_base, from, slice[i].iov_len);
        from += slice[i].iov_len;
    }
    assert((uint64_t)(from - (const char *)src) == length);
}

int cr_xfer_wait_connected(int fd, uint32_t timeout_ms) {
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int n;
    do {
        n = poll(&pfd, 1, (int)timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    errno = err;
    return err == 0 ? 0 : -1;
}

uint64_t cr_xfer_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool cr_xfer_socket_tune(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return false;
    int one = 1;
    /* Unix sockets have no Nagle: only tcp gets the option. */
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    if (getsockname(fd, (struct sockaddr *)&addr, &len) == 0 && addr.ss_family != AF_UNIX)
        return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
    return true;
}
