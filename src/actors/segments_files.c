/* The shared file tier on the master's side (docs/tiers.md): crescentd's
 * --root_fs_dir, --cluster_id and --global_file_segment_size, handed to
 * GetVersion and DiskReplicaReport (rpc_methods.c), and the deletion of the
 * files whose disk replicas the store lets go of.
 *
 * Who deletes a file: the master decides when a disk replica goes (removal,
 * the file tier's eviction, a report of a corrupt file), so it deletes the
 * file, when it can see the shared directory (checked at start: crescentd
 * usually runs where the file system is mounted).  When it cannot, the file
 * is left (counted in file_tier_files_left_total and said once in the log):
 * metadata never points to it again, a later put of the same key overwrites
 * it, and a reader never serves it (its header and checksum are checked). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/segments_internal.h"
#include "core/log.h"
#include "daemon/config.h"

void segments_files_init(struct segments_state *st, const struct cr_daemon_config *config) {
    struct cr_rpc_files *f = &st->files;
    memset(f, 0, sizeof(*f));
    f->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)st;
    f->quota_bytes = config->global_file_segment_size >= (uint64_t)INT64_MAX
                         ? UINT64_MAX : config->global_file_segment_size;
    if (config->root_fs_dir[0] == '\0') return;
    /* The config's strings are bounded by CR_CONFIG_ADDRESS_MAX (256). */
    snprintf(f->root, sizeof(f->root), "%s", config->root_fs_dir);
    size_t n = strlen(f->root);
    while (n > 1 && f->root[n - 1] == '/') f->root[--n] = '\0'; /* one spelling of it */
    snprintf(f->cluster, sizeof(f->cluster), "%s",
             config->cluster_id[0] ? config->cluster_id : "mooncake_cluster");
    snprintf(f->dir, sizeof(f->dir), "%s/%s", f->root, f->cluster);
}

/* The store's file hook: on the store's thread, one unlink per disk replica
 * let go (removals, file-tier evictions, dropped reports): only objects of
 * the file tier pay it, never the memory-only paths. */
static void delete_file(void *ctx, const char *path) {
    struct segments_state *st = ctx;
    if (!st->files_can_delete) {
        st->files_left++;
        return;
    }
    if (unlink(path) == 0 || errno == ENOENT) {
        st->files_deleted++;
        return;
    }
    st->files_delete_failed++;
    st->files_left++;
    if (cr_log_ratelimit(&st->files_last_log_ns, st->now_ms * 1000000u, 60ull * 1000000000u))
        CR_WARN("segments", "cannot delete %s of a dropped disk replica: %s (left in place)",
                path, strerror(errno));
}

void segments_files_start(struct segments_state *st) {
    struct cr_rpc_files *f = &st->files;
    if (f->root[0] == '\0') return;
    if (mkdir(f->dir, 0755) != 0 && errno != EEXIST)
        CR_WARN("segments", "file tier: cannot make %s: %s", f->dir, strerror(errno));
    st->files_can_delete = access(f->dir, W_OK | X_OK) == 0;
    char quota[32];
    if (f->quota_bytes == UINT64_MAX) snprintf(quota, sizeof(quota), "unlimited");
    else snprintf(quota, sizeof(quota), "%" PRIu64 " bytes", f->quota_bytes);
    if (st->files_can_delete)
        CR_INFO("segments", "file tier at %s (--global_file_segment_size %s); crescentd "
                "deletes the files of disk replicas it drops", f->dir, quota);
    else
        CR_WARN("segments", "file tier at %s (%s), which crescentd cannot write here: files "
                "of dropped disk replicas are left for a later put of their key to replace",
                f->dir, quota);
    /* Set after the log's restore, so that nothing restored is deleted. */
    cr_store_set_file_hook(st->store, delete_file, st);
}
