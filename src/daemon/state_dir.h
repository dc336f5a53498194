/* --state-dir's check, made once at start before any actor uses it: the
 * store's operation log (src/durable), the event sequence mark and the
 * indexer's saved registrations all live there. */
#ifndef CRESCENT_DAEMON_STATE_DIR_H
#define CRESCENT_DAEMON_STATE_DIR_H

#include <stddef.h>

/* Creates `dir` if missing and checks that it is a directory crescentd can
 * write (a probe file is created and removed).  Returns CR_OK, or
 * CR_ERR_INVALID_PARAMS with one line in `error` naming the path and what
 * to do.  A directory that is a file or read-only would otherwise start and
 * never save. */
int cr_daemon_state_dir_check(const char *dir, char *error, size_t error_size);

#endif
