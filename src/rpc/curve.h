/* CurveZMQ on crescentd's sockets (RPC, event PUB, replay).
 *
 * Off unless both --curve-secret-key-file and --curve-clients are set.  Then
 * each socket is a CURVE server with the daemon's key pair, and a ZAP handler
 * in the socket's ZMQ context admits only clients whose public key is listed:
 * every other handshake is refused before a single request frame is read.
 *
 * Key files hold Z85 text (40 characters, as zmq_curve_keypair and
 * `crescentctl keygen` write them); blank lines and lines starting with '#'
 * are skipped.  --curve-clients names a file of public keys, one a line, or a
 * directory whose every regular file is such a file. */
#ifndef CRESCENT_ACTORS_CURVE_H
#define CRESCENT_ACTORS_CURVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config.h"

#define CR_CURVE_KEY_BYTES 32u
#define CR_CURVE_Z85_LEN 40u
#define CR_CURVE_CLIENTS_MAX 4096u

/* The ZAP handler of one ZMQ context. */
struct cr_curve_server;

/* Whether the config turns CURVE on. */
bool cr_curve_configured(const struct cr_daemon_config *config);

/* When CURVE is configured: reads the keys, starts the ZAP handler in `zctx`
 * and makes `sock` (not bound yet) a CURVE server.  Returns CR_OK with *out
 * NULL when CURVE is off; CR_OK with *out set; or CR_ERR_INVALID_PARAMS /
 * CR_ERR_IO / CR_ERR_NOMEM after printing a line naming the file and the
 * problem on stderr (`who` names the socket: "RPC", "event", "replay"). */
int cr_curve_server_start(void *zctx, void *sock, const struct cr_daemon_config *config,
                          const char *who, struct cr_curve_server **out);

/* Joins the ZAP handler; call after zmq_ctx_term(zctx), which ends it.  NULL is ok. */
void cr_curve_server_join(struct cr_curve_server *server);

/* Handshakes refused and admitted so far (read by stats; racy but monotonic). */
uint64_t cr_curve_server_refused(const struct cr_curve_server *server);

/* Reads the first key of a Z85 key file into z85 (NUL-terminated).  Returns
 * false with a sentence in `error`. */
bool cr_curve_read_key_file(const char *path, char z85[CR_CURVE_Z85_LEN + 1], char *error,
                            size_t error_size);

#endif
