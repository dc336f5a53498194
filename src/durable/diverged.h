/* The directories a standby's start over leaves in its state directory
 * (DIR/diverged-<unix ms>/, docs/ha.md "A former leader comes back"): the
 * logs and snapshots it held that its new leader did not have, kept for an
 * operator and never read again.  --keep-diverged N bounds how many stay:
 * the oldest beyond N are deleted when crescentd starts and after each
 * start over. */
#ifndef CRESCENT_DURABLE_DIVERGED_H
#define CRESCENT_DURABLE_DIVERGED_H

#include <stddef.h>
#include <stdint.h>

#define CR_DIVERGED_PREFIX "diverged-"

/* Deletes all but the `keep` newest diverged-<ms> directories of dir (by
 * the ms in their names), each with the files in it, logging each one
 * deleted.  *kept: how many remain.  Returns CR_OK, or an error with err
 * set (what was deleted before it stays deleted). */
int cr_durable_diverged_prune(const char *dir, uint32_t keep, uint32_t *kept, char *err,
                              size_t err_len);

#endif
