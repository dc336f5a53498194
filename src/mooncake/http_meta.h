/* Mooncake's HTTP metadata server ("Builtin Metadata Server"; the reference's
 * mooncake-store/src/http_metadata_server.cpp), which Mooncake's Transfer
 * Engine uses to publish and find segment descriptors when no etcd is
 * configured: --enable-http-metadata-server, on
 * --http-metadata-server-host:--http-metadata-server-port (8080).
 *
 *   GET    /metadata?key=K   200 the value (application/json) | 404 "metadata not found"
 *   PUT    /metadata?key=K   200 "metadata updated" (body = value); a key containing
 *                            "rpc_meta" that exists with another value: 400
 *                            "Duplicate rpc_meta key not allowed" (same value: 200
 *                            "metadata unchanged")
 *   DELETE /metadata?key=K   200 "metadata deleted" | 404 "metadata not found"
 *   GET    /health           200 "OK"
 * A missing or empty key is 400 "Missing key parameter", as the reference answers.
 *
 * The keys live in memory only (as the reference's).  Its own HTTP front
 * (http/front.h) serves it on two workers; the map is theirs, under one
 * mutex, which the segments thread also takes when a client expires with
 * --enable-metadata-cleanup-on-timeout: a few descriptors per client, read
 * at connect, never on the store's path. */
#ifndef CRESCENT_MOONCAKE_HTTP_META_H
#define CRESCENT_MOONCAKE_HTTP_META_H

#include <stddef.h>

struct cr_mc_meta;

#define CR_MC_META_KEY_MAX 4096u
#define CR_MC_META_VALUE_MAX (1u << 20)
#define CR_MC_META_KEYS_MAX (1u << 20)
#define CR_MC_META_PREFIX_MAX 256u

/* Starts serving on HOST:PORT.  CR_ERR_IO with one line in `error` when it
 * cannot (a busy port); CR_ERR_NOMEM. */
int cr_mc_meta_start(const char *address, struct cr_mc_meta **out, char *error,
                     size_t error_size);
/* Removes the keys Mooncake's Transfer Engine publishes for segment `name`
 * (PREFIX ram/NAME and PREFIX rpc_meta/NAME, PREFIX "mooncake/" or, with
 * MC_METADATA_CLUSTER_ID set, "mooncake/ID/", as Mooncake's master removes
 * them when it expires a client).  Any thread; takes the map's lock.
 * Returns the keys removed (0 to 2). */
size_t cr_mc_meta_forget_segment(struct cr_mc_meta *meta, const char *name);

/* Stops serving and frees every key; NULL is ignored. */
void cr_mc_meta_stop(struct cr_mc_meta *meta);

#endif
