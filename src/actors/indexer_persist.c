/* Registrations made with POST /register persist across restarts: the
 * indexer rewrites <state-dir>/indexer-registrations.json after every
 * /register and /unregister, and reads it at start (after the static
 * config file).  The file has the conductor_config.json shape, keyed by
 * instance|tenant|dp_rank, so it is parsed and validated by the same code.
 * Written atomically (a temporary file, fsync, rename, fsync of the
 * directory): a crash leaves the old file or the new one, never half of
 * one.  The file is written before the registration is applied: a save that
 * fails refuses the /register or /unregister (with the path and the reason)
 * and changes nothing, so what a client was told succeeded is what a
 * restart brings back.  What is read back is checked as a /register body is
 * (fields, then the endpoints: not crescentd's own ports, not link-local).
 * Runs on the indexer's thread, except indexer_persist_load (create, on
 * main). */
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
#include "daemon/state_dir.h"

#define STATE_FILE "indexer-registrations.json"

/* A saved registration passes what a /register body passes after parsing
 * (cr_indexer_conf_load did that): its endpoints are not crescentd's own
 * addresses nor link-local.  A file edited by hand, or flags changed since
 * it was saved, must not make crescentd connect where /register refuses. */
static int check_saved(const struct indexer_state *st, const struct cr_indexer_registration *r,
                       char *error, size_t error_size) {
    int rc = cr_indexer_endpoint_check(&st->config, "endpoint", r->endpoint, error, error_size);
    if (rc == CR_OK)
        rc = cr_indexer_endpoint_check(&st->config, "replay_endpoint", r->replay_endpoint, error,
                                       error_size);
    return rc;
}

int indexer_persist_load(struct indexer_state *st, const char *dir, char *error,
                         size_t error_size) {
    assert(st != NULL && dir != NULL);
    if (dir[0] == '\0') return CR_OK;
    int rc = cr_daemon_state_dir_check(dir, error, error_size);
    if (rc != CR_OK) return rc;
    int n = snprintf(st->persist_path, sizeof(st->persist_path), "%s/%s", dir, STATE_FILE);
    if (n < 0 || (size_t)n >= sizeof(st->persist_path) - 8) { /* room for ".tmp" */
        snprintf(error, error_size, "--state-dir %.200s: path too long", dir);
        return CR_ERR_INVALID_PARAMS;
    }
    if (access(st->persist_path, F_OK) != 0 && errno == ENOENT) return CR_OK; /* none yet */
    char why[CR_INDEXER_ERROR_MAX + 512];
    rc = cr_indexer_conf_load(st->persist_path, &st->saved_regs, &st->saved_count, why,
                              sizeof(why));
    for (uint32_t i = 0; rc == CR_OK && i < st->saved_count; i++) {
        char bad[CR_INDEXER_ERROR_MAX];
        rc = check_saved(st, &st->saved_regs[i], bad, sizeof(bad));
        if (rc != CR_OK)
            snprintf(why, sizeof(why), "%.64s|%.64s|%u: %s", st->saved_regs[i].instance_id,
                     st->saved_regs[i].tenant_id, st->saved_regs[i].dp_rank, bad);
    }
    if (rc != CR_OK) {
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

static bool same_key(const struct cr_indexer_registration *a, const char *instance,
                     const char *tenant, uint32_t dp_rank) {
    return a->dp_rank == dp_rank && strcmp(a->instance_id, instance) == 0 &&
           strcmp(a->tenant_id, tenant) == 0;
}

/* Saves the dynamic registrations as they will be once `add` is registered
 * (replacing its key) or the key `skip` is removed (add NULL).  CR_OK, or
 * CR_ERR_IO with `error` naming the file and the reason. */
static int save_as(struct indexer_state *st, const struct cr_indexer_registration *add,
                   const struct cr_indexer_registration *skip, char *error, size_t error_size) {
    json_t *all = json_object();
    for (uint32_t i = 0; all != NULL && i < CR_INDEXER_SOURCES_MAX; i++) {
        const struct indexer_source *s = &st->sources[i];
        if (!s->used || !s->dynamic) continue;
        if (skip != NULL && same_key(&s->reg, skip->instance_id, skip->tenant_id, skip->dp_rank))
            continue;
        char key[3 * CR_INDEXER_NAME_MAX + 16];
        snprintf(key, sizeof(key), "%s|%s|%u", s->reg.instance_id, s->reg.tenant_id,
                 s->reg.dp_rank);
        json_object_set_new(all, key, registration_json(&s->reg));
    }
    if (all != NULL && add != NULL) {
        char key[3 * CR_INDEXER_NAME_MAX + 16];
        snprintf(key, sizeof(key), "%s|%s|%u", add->instance_id, add->tenant_id, add->dp_rank);
        json_object_set_new(all, key, registration_json(add));
    }
    json_t *root = all != NULL ? json_pack("{s:o}", "kvevent_instance", all) : NULL;
    char *text = root != NULL ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    int err = text != NULL ? write_atomically(st->persist_path, text) : ENOMEM;
    free(text);
    if (err == 0) return CR_OK;
    st->persist_failures++;
    snprintf(error, error_size, "cannot save the registrations to %.200s: %s; nothing changed",
             st->persist_path, strerror(err));
    CR_ERROR("indexer", "%s", error);
    return CR_ERR_IO;
}

int indexer_persist_register(struct indexer_state *st, const struct cr_indexer_registration *reg,
                             char *error, size_t error_size) {
    assert(st != NULL && reg != NULL && error != NULL);
    bool saving = st->persist_path[0] != '\0';
    if (saving) {
        int rc = save_as(st, reg, reg, error, error_size);
        if (rc != CR_OK) return rc;
    }
    int rc = indexer_source_add(st, reg, error, error_size);
    if (rc != CR_OK) {
        /* Refused, and nothing changed in memory: the file goes back to
         * what is registered (a failure here is logged and counted). */
        char again[CR_INDEXER_ERROR_MAX + 256];
        if (saving) save_as(st, NULL, NULL, again, sizeof(again));
        return rc;
    }
    indexer_persist_mark(st, reg);
    return CR_OK;
}

int indexer_persist_unregister(struct indexer_state *st, const char *instance, const char *tenant,
                               uint32_t dp_rank, char *error, size_t error_size) {
    assert(st != NULL && instance != NULL && tenant != NULL && error != NULL);
    const struct indexer_source *found = NULL;
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX && found == NULL; i++)
        if (st->sources[i].used && same_key(&st->sources[i].reg, instance, tenant, dp_rank))
            found = &st->sources[i];
    if (found == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    if (st->persist_path[0] != '\0' && found->dynamic) {
        int rc = save_as(st, NULL, &found->reg, error, error_size);
        if (rc != CR_OK) return rc;
    }
    return indexer_source_remove(st, instance, tenant, dp_rank);
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
