/* CurveZMQ on libcrescent's sockets (the RPC DEALER; the event follower's
 * SUB and replay DEALER).  The keys are Z85 text (40 characters): the
 * daemon's public key and the client's key pair.  Each one not given is
 * taken from the environment: CRESCENT_CURVE_SERVER_KEY,
 * CRESCENT_CURVE_PUBLIC_KEY, CRESCENT_CURVE_SECRET_KEY.  None at all: plain
 * TCP, as before. */
#ifndef CRESCENT_CLIENT_CURVE_H
#define CRESCENT_CLIENT_CURVE_H

#include <stdbool.h>
#include <stddef.h>

struct cr_curve_client_keys {
    const char *server_key, *public_key, *secret_key; /* NULL: from the environment */
};

/* Makes `sock` (not connected yet) a CURVE client when keys are set.
 * Returns CR_OK (also when none is set), or CR_ERR_INVALID_PARAMS with a
 * sentence in `error` (some but not all set, not Z85, no CURVE in libzmq). */
int cr_curve_client_setup(void *sock, const struct cr_curve_client_keys *keys, char *error,
                          size_t error_size);

/* Whether any CURVE key is set, in `keys` or the environment: a native
 * (crescent://) endpoint is then refused, since it cannot encrypt. */
bool cr_curve_client_wanted(const struct cr_curve_client_keys *keys);

#endif
