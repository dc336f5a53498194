/* Checksum verification of a batch of same-host reads on a second thread
 * (client_verify.c).
 *
 * A same-host read copies an object out of the peer's mapped segment and
 * must hash what it copied (XXH3-64 against the put's checksum) before the
 * bytes count as read.  On one thread a batch costs copy + hash; here the
 * reading thread copies object after object and publishes each, and a helper
 * thread hashes them in order behind it.  Hashing is slower than copying,
 * so the helper falls behind: whenever it is more than CR_VERIFY_LAG objects
 * behind, the reader hashes the next object itself while copying it (32 KiB
 * at a time, in cache: client_copy.c) instead of publishing it, and once
 * it has copied everything it hashes what is left from the other end, so
 * the two meet wherever the work balances.  The reader never waits for the helper to start or to
 * exit, only for an object the helper is hashing at that moment: on a busy
 * machine where the helper gets no core, the reader does all the work, as
 * on one thread.  The helper touches only the objects it took (the caller's
 * buffers and hash slots) and the pipe: the transfer client, its mappings
 * and the cr_client stay on the reading thread.
 *
 * Used only with CRESCENT_VERIFY_THREAD=1 (client_data.c says why).
 *
 * Cost per batch: one allocation and one detached thread (worth it only when
 * the batch hashes enough bytes, CR_VERIFY_MIN_BYTES); one mutex/condvar
 * signal per object published. */
#ifndef CRESCENT_CLIENT_CLIENT_VERIFY_H
#define CRESCENT_CLIENT_CLIENT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Below this many bytes to hash in one batch, starting a thread (tens of µs)
 * is not repaid: hash on the reading thread. */
#define CR_VERIFY_MIN_BYTES (2u << 20) /* 2 MiB */

/* How many published objects the helper may be behind before the reader
 * hashes the next one itself. */
#define CR_VERIFY_LAG 2u

struct cr_verify_pipe;

/* A pipe for `count` items with its helper thread started, or NULL (no
 * memory, no thread): then the caller hashes on its own thread. */
struct cr_verify_pipe *cr_verify_start(size_t count);

/* Whether item `index` should be left to the helper (published with its
 * bytes): false when the helper is CR_VERIFY_LAG items or more behind, and
 * the caller should hash it itself (and publish it with NULL). */
bool cr_verify_keeping_up(const struct cr_verify_pipe *p, size_t index);

/* Publishes item `index`, which must be the next one (0, 1, 2 ...): hash
 * [buf, buf + len) into *hash; buf NULL publishes nothing to hash. */
void cr_verify_publish(struct cr_verify_pipe *p, size_t index, const void *buf, size_t len,
                       uint64_t *hash);

/* After the last publish: hashes on this thread what the helper has not
 * taken (from the last item backwards), waits for what it is hashing, and
 * lets go of the pipe (the helper frees it if it is still running).  Every
 * published item's *hash is set, and nothing touches the items, when it
 * returns. */
void cr_verify_finish(struct cr_verify_pipe *p);

#endif
