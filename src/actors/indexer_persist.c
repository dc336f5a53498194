/* Registrations made with POST /register persist across restarts: the
 * indexer rewrites <state-dir>/indexer-registrations.json after every
 * /register and /unregister, and reads it at start (after the static
 * config file).  The file has the conductor_config.json shape, keyed by
 * instance|tenant|dp_rank, so it is parsed and validated by the same code.
 * Written atomically (a temporary file, fsync, rename, fsync of the
 * directory): a crash leaves the old file or the new one, never half of
 * one.  Runs on the indexer's thread, except indexer_persist_load (create,
 * on main). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"

#define STATE_FILE "indexer-registrations.json"

int indexer_persist_load(struct indexer_state *st, const char *dir, char *error,
                         size_t error_size) {
    assert(st != NULL && dir != NULL);
    if (dir[0] == '\0') return CR_OK;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(error, error_size, "--state-dir %.200s: cannot create it: %s", dir,
                 strerror(errno));
        return CR_ERR_INVALID_PARAMS;
    }
    int n = snprintf(st->persist_path, sizeof(st->persist_path), "%s/%s", dir, STATE_FILE);
    if (n < 0 || (size_t)n >= sizeof(st->persist_path) - 8) { /* room for ".tmp" */
        snprintf(error, error_size, "--state-dir %.200s: path too long", dir);
        return CR_ERR_INVALID_PARAMS;
    }
    if (access(st->persist_path, F_OK) != 0) return CR_OK; /* nothing saved yet */
    char why[CR_INDEXER_ERROR_MAX + 512];
    if (cr_indexer_conf_load(st->persist_path, &st->saved_regs, &st->saved_count, why,
                             sizeof(why)) != CR_OK) {
        snprintf(error, error_size, "%.300s: %.400s (move it away to start without it)",
                 st->persist_path, why);
        return CR_ERR_INVALID_PARAMS;
    }
    return CR_OK;
}

static json_t *registration_json(const struct cr_indexer_registration *r) {
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:b}", "instance_id",
                     r->instance_id, "tenant_id", r->tenant_id, "dp_rank", (json_int_t)r->dp_rank,
                     "endpoint", r->endpoint, "replay_endpoint", r->replay_endpoint, "type",
                     r->type, "modelname", r->model, "lora_name", r->lora_name, "block_size",
                     (json_int_t)r->block_size, "additionalsalt", r->salt, "bind", r->bind);
}

/* Writes text to path through path.tmp; returns 0 or an errno. */
static int write_atomically(const char *path, const char *text) {
    char tmp[sizeof(((struct indexer_state *)0)->persist_path) + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    size_t len = strlen(text), done = 0;
    int err = 0;
    while (done < len && err == 0) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno != EINTR) err = errno;
        if (w > 0) done += (size_t)w;
    }
    if (err == 0 && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(tmp, path) != 0) err = errno;
    if (err != 0) {
        unlink(tmp);
        return err;
    }
    /* The rename itself is durable once the directory is synced. */
    char dir[sizeof(tmp)];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
    int dfd = open(slash != NULL ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0) err = errno;
        close(dfd);
    }
    return err;
}

void indexer_persist_save(struct indexer_state *st) {
    assert(st != NULL);
    if (st->persist_path[0] == '\0') return;
    json_t *all = json_object();
    for (uint32_t i = 0; all != NULL && i < CR_INDEXER_SOURCES_MAX; i++) {
        const struct indexer_source *s = &st->sources[i];
        if (!s->used || !s->dynamic) continue;
        char key[3 * CR_INDEXER_NAME_MAX + 16];
        snprintf(key, sizeof(key), "%s|%s|%u", s->reg.instance_id, s->reg.tenant_id,
                 s->reg.dp_rank);
        json_object_set_new(all, key, registration_json(&s->reg));
    }
    json_t *root = all != NULL ? json_pack("{s:o}", "kvevent_instance", all) : NULL;
    char *text = root != NULL ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    int err = text != NULL ? write_atomically(st->persist_path, text) : ENOMEM;
    free(text);
    if (err != 0) {
        st->persist_failures++;
        CR_ERROR("indexer", "cannot save the registrations to %s: %s (they are kept in memory; "
                 "they will be missing after a restart unless a later save succeeds)",
                 st->persist_path, strerror(err));
    }
}

/* Marks the registration of reg's key as made by /register (saved). */
void indexer_persist_mark(struct indexer_state *st, const struct cr_indexer_registration *reg) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        struct indexer_source *s = &st->sources[i];
        if (s->used && s->reg.dp_rank == reg->dp_rank &&
            strcmp(s->reg.instance_id, reg->instance_id) == 0 &&
            strcmp(s->reg.tenant_id, reg->tenant_id) == 0)
            s->dynamic = true;
    }
}
