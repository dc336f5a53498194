/* Mooncake master's command-line flags, each honoured with the reference's
 * meaning or refused with a reason (docs/mooncake.md).
 *
 * The table in flags.c has one line per flag of the reference
 * (docs/mooncake-flags.tsv, generated from mooncake_master's own --help at a
 * pinned commit); tests/integration/test_mooncake_flags.py fails when the two
 * lists differ.  A line says one of:
 *   SETTING  the value goes to a crescent setting (its name), parsed by it;
 *   WHEN     crescent behaves as the reference does with one value (e.g.
 *            --enable_ha=false): that value is accepted, any other refused;
 *   SWITCH   a bool turning a crescent feature on or off: =true accepted (the
 *            feature is on by default), =false sets the setting (target) to 0
 *            after every other flag, so it wins whatever their order;
 *   IGNORED  the reference itself ignores the flag (deprecated): accepted;
 *   REFUSED  refused with the reason.
 * Switching a refused flag to honoured is its one line becoming SETTING. */
#ifndef CRESCENT_MOONCAKE_FLAGS_H
#define CRESCENT_MOONCAKE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum cr_mooncake_flag_kind {
    CR_MC_SETTING, CR_MC_WHEN, CR_MC_IGNORED, CR_MC_REFUSED, CR_MC_SWITCH
};

struct cr_mooncake_flag {
    const char *name;                /* the reference's spelling: enable_ha */
    bool is_bool;                    /* gflags bool: bare --flag, --noflag, =true/false/1/0 */
    enum cr_mooncake_flag_kind kind;
    const char *target;              /* SETTING, SWITCH: crescent's setting; WHEN: the
                                        accepted value */
    const char *reason;              /* WHEN/REFUSED: why other values are refused, naming
                                        crescent's equivalent or why there is none
                                        (SWITCH: what each value does) */
};

/* The flag named `name` (underscores or dashes), or NULL. */
const struct cr_mooncake_flag *cr_mooncake_flag_find(const char *name);

/* Every flag, for --help-mooncake and the docs. */
const struct cr_mooncake_flag *cr_mooncake_flags(size_t *count);

/* Rewrites argv for crescent's own parser: --flagfile=FILE is expanded (gflags'
 * format: one --flag=value per line, '#' comments), Mooncake's flags become
 * crescent's (--setting=value) or are dropped when accepted as they are, and
 * the first refused one fails the parse; anything else is left as it is.  On
 * success *out_argv (NULL-terminated, *out_argc entries) is owned by the
 * caller: free it with cr_mooncake_argv_free.  On failure `error` holds one line. */
bool cr_mooncake_flags_rewrite(int argc, char **argv, int *out_argc, char ***out_argv,
                               char *error, size_t error_size);
void cr_mooncake_argv_free(int argc, char **argv);

/* Prints the table as TSV: flag, disposition, crescent setting or value, reason. */
void cr_mooncake_flags_print(FILE *out);

#endif
