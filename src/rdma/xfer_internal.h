/* Helpers the transfer layer's files share (not part of its interface). */
#ifndef CRESCENT_RDMA_XFER_INTERNAL_H
#define CRESCENT_RDMA_XFER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

/* Parses "host:port" (IPv4 dotted quad, "localhost", or "[v6]:port") into a
 * socket address without DNS.  Returns CR_OK or CR_ERR_INVALID_PARAMS. */
int cr_xfer_endpoint_parse(const char *endpoint, struct sockaddr_storage *addr,
                           socklen_t *addr_len);

/* Formats a bound address as "host:port" into out (size >= 64). */
void cr_xfer_endpoint_format(const struct sockaddr_storage *addr, char *out, size_t size);

/* The abstract Unix socket name of a server's shm listener, derived from its
 * tcp endpoint: "\0crescent-xfer/<endpoint>".  Returns the sockaddr length. */
socklen_t cr_xfer_shm_address(const char *endpoint, struct sockaddr_un *out);

/* Fills out[] with the part [offset, offset + length) of the byte sequence
 * that iov[0..count) describes; returns the entries used (<= max).  Stops
 * early when max entries are used: the caller moves fewer bytes. */
uint32_t cr_xfer_iov_slice(const struct iovec *iov, uint32_t count, uint64_t offset,
                           uint64_t length, struct iovec *out, uint32_t max);

/* Copies `length` bytes between a flat buffer and the iov sequence at offset. */
void cr_xfer_iov_copy_in(const struct iovec *iov, uint32_t count, uint64_t offset,
                         const void *src, uint64_t length);

uint64_t cr_xfer_now_ns(void);

/* Waits up to timeout_ms for a non-blocking connect on fd to finish.
 * Returns 0, or -1 with errno set (ETIMEDOUT, or the connect's error). */
int cr_xfer_wait_connected(int fd, uint32_t timeout_ms);

/* Sets O_NONBLOCK and TCP_NODELAY; returns false on failure (errno set). */
bool cr_xfer_socket_tune(int fd);

#endif
