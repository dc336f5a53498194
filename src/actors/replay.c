/* The replay actor.  It runs the shared skeleton (answers stats) until its
 * issue gives it work; see subsystems.h. */
#include "actors/subsystems.h"

const struct cr_subsystem_def cr_replay_def = {
    .name = "replay",
    .ops = &cr_skeleton_ops,
    .create = cr_skeleton_create,
    .destroy = cr_skeleton_destroy,
};
