/* crescent status codes.
 *
 * The store codes keep the reference master's integer values so that a
 * client ported from it reads the same numbers.  Every function in crescent
 * that can fail returns one of these (0 on success, negative on failure);
 * cr_strerror() gives the one-line text a person can act on. */
#ifndef CRESCENT_ERROR_H
#define CRESCENT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum cr_status {
    CR_OK = 0,

    /* Runtime and transport (crescent's own range). */
    CR_ERR_AGAIN = -1,         /* try again: a ring is full, a peer is busy */
    CR_ERR_TIMEOUT = -2,       /* no answer within the caller's deadline */
    CR_ERR_NOMEM = -3,         /* allocation failed or a bounded table is full */
    CR_ERR_SHUTDOWN = -4,      /* the runtime is stopping and takes no new work */
    CR_ERR_IO = -5,            /* a system call failed; errno was logged */
    CR_ERR_PROTOCOL = -6,      /* a peer sent bytes that do not decode */
    CR_ERR_CHECKSUM = -7,      /* object bytes read do not match the checksum of their put */
    CR_ERR_LEASE_EXPIRED = -8, /* a read finished after its lease ended: bytes may be stale */

    /* Store master (the reference's values). */
    CR_ERR_NO_AVAILABLE_HANDLE = -200, /* no segment has space for the object */
    CR_ERR_INVALID_PARAMS = -600,      /* the request is malformed or out of range */
    CR_ERR_ILLEGAL_CLIENT = -601,      /* the client is not the one that owns this */
    CR_ERR_SEGMENT_NOT_FOUND = -101,   /* no segment of that name is mounted */
    CR_ERR_SEGMENT_ALREADY_EXISTS = -102, /* a segment of that name is mounted */
    CR_ERR_OBJECT_NOT_FOUND = -704,    /* no object with that key (in that tenant) */
    CR_ERR_OBJECT_ALREADY_EXISTS = -705, /* the key exists or is being written */
    CR_ERR_OBJECT_HAS_LEASE = -706,    /* a reader holds a lease on the object */
    CR_ERR_OBJECT_NOT_READY = -707,    /* the put has not ended (no PutEnd yet) */
    CR_ERR_RPC_FAIL = -900,            /* the RPC could not be carried out */
};

/* Returns a static, human-readable description of `status`; never NULL. */
const char *cr_strerror(int status);

/* Returns the status's symbolic name ("OBJECT_HAS_LEASE"); never NULL. */
const char *cr_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif
