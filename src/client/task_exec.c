/* The executor's side of a copy/move task (see task_exec.h). */
#include "client/task_exec.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <xxhash.h>

#include "core/store.h"
#include "crescent/error.h"
#include "rdma/xfer.h"

_Static_assert(CR_TASK_EXEC_TARGETS_MAX == CR_STORE_REPLICAS_MAX,
               "a task has at most one target per replica slot");

#define POLL_SLICE_MS 1000

struct writes {
    uint32_t pending;
    int status;
    char why[CR_XFER_MESSAGE_MAX];
};

static void write_done(void *arg, int status, const char *message) {
    struct writes *w = arg;
    assert(w->pending > 0);
    w->pending--;
    if (status != CR_OK && w->status == CR_OK) {
        w->status = status;
        snprintf(w->why, sizeof(w->why), "%s", message != NULL ? message : cr_strerror(status));
    }
}

/* The replica's capability for an op (copied at submit), or NULL. */
static const struct cr_cap *replica_cap(const struct cr_task_exec_replica *r, struct cr_cap *out) {
    if (r->cap == NULL || cr_cap_decode(r->cap, out) != 0) return NULL;
    return out;
}

/* Submits op, polling for room while the client is at max_ops; counts it
 * in w, or records the submit's failure there. */
static bool submit_counted(struct cr_xfer_client *xfer, const struct cr_xfer_op *op,
                           struct writes *w) {
    int rc;
    while ((rc = cr_xfer_submit(xfer, op)) == CR_ERR_AGAIN)
        cr_xfer_client_poll(xfer, POLL_SLICE_MS); /* at max_ops: make room */
    if (rc == CR_OK) {
        w->pending++;
        return true;
    }
    if (w->status == CR_OK) {
        w->status = rc;
        snprintf(w->why, sizeof(w->why), "%s", cr_xfer_client_last_error(xfer));
    }
    return false;
}

static int fail(char *why, size_t why_len, int status, const char *fmt, const char *a,
                const char *b) {
    if (why_len > 0) snprintf(why, why_len, fmt, a, b);
    return status;
}

/* The source bytes: mapped in place (same host) or read into *owned. */
static int read_source(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job,
                       const void **bytes, void **owned, char *why, size_t why_len) {
    const struct cr_task_exec_replica *s = &job->source;
    void *mapped = NULL;
    *owned = NULL;
    struct cr_cap map_cap;
    if (cr_xfer_client_map_cap(xfer, s->endpoint, s->segment, s->buffer, job->size,
                               replica_cap(s, &map_cap), &mapped) == CR_OK) {
        *bytes = mapped;
        return CR_OK;
    }
    *owned = malloc(job->size);
    if (*owned == NULL)
        return fail(why, why_len, CR_ERR_NOMEM, "no memory to stage the object from %s %s",
                    s->endpoint, s->segment);
    /* With the source's capability: a store server that requires them
     * hands out neither its memfd (the map above) nor a byte without one. */
    struct writes r = {.status = CR_OK};
    struct iovec iov = {.iov_base = *owned, .iov_len = job->size};
    struct cr_cap cap;
    struct cr_xfer_op op = {.opcode = CR_XFER_READ, .endpoint = s->endpoint,
                            .segment = s->segment, .remote_addr = s->buffer, .iov = &iov,
                            .iov_count = 1, .done = write_done, .arg = &r,
                            .cap = replica_cap(s, &cap)};
    submit_counted(xfer, &op, &r);
    while (r.pending > 0) cr_xfer_client_poll(xfer, POLL_SLICE_MS);
    if (r.status != CR_OK)
        return fail(why, why_len, r.status, "reading the source: %s%s", r.why, "");
    *bytes = *owned;
    return CR_OK;
}

/* Every target written at once; the first failure is the verdict. */
static int write_targets(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job,
                         const void *bytes, char *why, size_t why_len) {
    struct writes w = {.status = CR_OK};
    struct iovec iov = {.iov_base = (void *)bytes, .iov_len = job->size};
    for (uint32_t i = 0; i < job->target_count; i++) {
        const struct cr_task_exec_replica *t = &job->targets[i];
        struct cr_cap cap;
        struct cr_xfer_op op = {.opcode = CR_XFER_WRITE, .endpoint = t->endpoint,
                                .segment = t->segment, .remote_addr = t->buffer, .iov = &iov,
                                .iov_count = 1, .done = write_done, .arg = &w,
                                .cap = replica_cap(t, &cap)};
        if (!submit_counted(xfer, &op, &w)) break;
    }
    while (w.pending > 0) cr_xfer_client_poll(xfer, POLL_SLICE_MS);
    if (w.status != CR_OK)
        return fail(why, why_len, w.status, "writing a target: %s%s", w.why, "");
    return CR_OK;
}

int cr_task_exec_run(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job, char *why,
                     size_t why_len) {
    assert(xfer != NULL && job != NULL && (why != NULL || why_len == 0));
    if (why_len > 0) why[0] = '\0';
    if (job->target_count == 0 || job->target_count > CR_TASK_EXEC_TARGETS_MAX ||
        job->source.endpoint == NULL || job->source.segment == NULL)
        return fail(why, why_len, CR_ERR_INVALID_PARAMS, "a task needs a source and 1 to 8 "
                    "targets%s%s", "", "");
    if (job->size == 0) return CR_OK; /* an empty object: its targets need no bytes */
    const void *bytes = NULL;
    void *owned = NULL;
    int rc = read_source(xfer, job, &bytes, &owned, why, why_len);
    if (rc == CR_OK) rc = cr_task_exec_write(xfer, job, bytes, why, why_len);
    free(owned);
    return rc;
}

int cr_task_exec_write(struct cr_xfer_client *xfer, const struct cr_task_exec_job *job,
                       const void *bytes, char *why, size_t why_len) {
    assert(xfer != NULL && job != NULL && bytes != NULL && (why != NULL || why_len == 0));
    assert(job->target_count > 0 && job->target_count <= CR_TASK_EXEC_TARGETS_MAX);
    if (job->has_checksum && XXH3_64bits(bytes, job->size) != job->checksum)
        return fail(why, why_len, CR_ERR_RPC_FAIL, "the bytes read from %s %s do not match the "
                    "object's checksum: no target written", job->source.endpoint,
                    job->source.segment);
    return write_targets(xfer, job, bytes, why, why_len);
}
