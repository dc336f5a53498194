/* The shm transport's map protocol (see xfer_server_shm.c for the design),
 * shared by the server and the client.  Both ends are on one host and run
 * the same build, so the messages are native structs on a SOCK_SEQPACKET
 * socket; the server still validates each one completely. */
#ifndef CRESCENT_RDMA_XFER_SHM_H
#define CRESCENT_RDMA_XFER_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rdma/xfer.h"

#define CR_XFER_SHM_MAGIC 0x33534d58u /* "XMS3": with file requests (XMS2 had none, XMS1 no
                                         capability) */
#define CR_XFER_SHM_CONTROL_BYTES 4096u /* one generation per segment slot */

/* cap: the capability of the op that made the client ask (core/xfer_cap.h
 * wire form), when has_cap; a server that requires capabilities hands a
 * segment's memfd out only for one (any mode and range, not expired): the
 * mapping then reads and writes the whole segment without the server.
 *
 * kind CR_XFER_SHM_FILE asks instead for the file holding [addr, addr +
 * length) of a reader segment (a store server's SSD tier): checked as a tcp
 * READ of that range is (the capability's mode, range and expiry), then
 * opened read-only by the segment's opener and passed. */
enum { CR_XFER_SHM_MAP = 0, CR_XFER_SHM_FILE = 1 };

struct cr_xfer_shm_request {
    uint32_t magic;
    uint8_t name_len;
    uint8_t has_cap;
    uint8_t kind; /* CR_XFER_SHM_MAP or CR_XFER_SHM_FILE */
    char name[CR_XFER_SEGMENT_NAME_MAX];
    uint8_t cap[CR_CAP_BYTES];
    uint64_t addr, length; /* CR_XFER_SHM_FILE only */
};

/* With status CR_OK, two fds ride along (SCM_RIGHTS): the segment's memfd and
 * the control memfd whose uint64_t[slot] is the slot's live generation.  A
 * CR_XFER_SHM_FILE reply with CR_OK carries one fd, the file's, with base
 * the offset of the range's first byte in it and size its length. */
struct cr_xfer_shm_reply {
    uint32_t magic;
    int32_t status;
    uint32_t slot;
    uint64_t generation;
    uint64_t base; /* the segment's registered base: remote addresses are base + offset */
    uint64_t size;
};

struct cr_xfer_server;

/* Whether a process running as peer_uid may map the segments of a server
 * running as server_uid: the same user, or root (who can read any process's
 * memory anyway).  The shm socket is abstract, so it has no file permissions
 * to keep other users out: this check, on the peer's SO_PEERCRED, does. */
bool cr_xfer_shm_peer_allowed(uid_t server_uid, uid_t peer_uid);

/* Whether a request (n bytes received) is well formed: the magic, a valid
 * name, has_cap 0 or 1 with a capability that decodes (into *cap), a known
 * kind, and for a file a range that does not wrap.  Anything else closes the
 * connection. */
bool cr_xfer_shm_request_valid(const struct cr_xfer_shm_request *req, size_t n,
                               struct cr_cap *cap);

/* Server side (xfer_server_shm.c). */
int cr_xfer_shm_listen(struct cr_xfer_server *srv);
void cr_xfer_shm_accept(struct cr_xfer_server *srv);
void cr_xfer_shm_readable(void *tag);
void cr_xfer_shm_bump(struct cr_xfer_server *srv, uint32_t slot);
void cr_xfer_shm_close_all(struct cr_xfer_server *srv);

#endif
