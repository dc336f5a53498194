/* libcrescent's client handle: opening one ZMQ DEALER per cr_client
 * (tcp://, ipc://), one native TCP connection (crescent://HOST:PORT,
 * client_tcp.c) or one pair of same-host shared-memory rings (shm://NAME,
 * client_shm.c); its options, identity and secret, and closing it.  Calls
 * (sending, receiving, matching replies) are client_call.c.  Not locked: one
 * cr_client per thread. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <zmq.h>

#include "client/client_curve.h"
#include "client/client_internal.h"
#include "msgs/rpc_shm.h"
#include "msgs/rpc_stream.h"

#define TIMEOUT_MS_MAX 3600000
#define ENDPOINT_MAX 256u


static int64_t monotonic_ms(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


int cr_client_fail(cr_client *c, int status, const char *fmt, ...) {
    assert(c != NULL && status != CR_OK);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof(c->error), fmt, ap);
    va_end(ap);
    return status;
}

static void random_uuid(uint8_t id[CR_CLIENT_ID_BYTES]) {
    ssize_t got = getrandom(id, CR_CLIENT_ID_BYTES, 0);
    if (got != (ssize_t)CR_CLIENT_ID_BYTES) {
        /* getrandom cannot fail for 16 bytes once the pool is ready; if it
         * does, time and address still make the id unique enough per host. */
        uint64_t t = (uint64_t)monotonic_ms(NULL) ^ (uint64_t)(uintptr_t)id;
        memcpy(id, &t, sizeof(t));
        memcpy(id + 8, &t, sizeof(t));
    }
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* version 4 */
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

/* The process's ZMQ context, shared by every client opened without one of
 * the caller's: ZMQ's own advice (one context per process), and one I/O
 * thread for all connections instead of a thread per client, which on a
 * small machine cost more CPU in wake-ups than the requests themselves.
 * Made by the first such client, terminated when the last one closes. */
static pthread_mutex_t process_context_lock = PTHREAD_MUTEX_INITIALIZER;
static void *process_context;
static unsigned process_context_users;

static void *process_context_acquire(void) {
    pthread_mutex_lock(&process_context_lock);
    if (process_context == NULL) process_context = zmq_ctx_new();
    if (process_context != NULL) process_context_users++;
    void *context = process_context;
    pthread_mutex_unlock(&process_context_lock);
    return context;
}

static void process_context_release(void) {
    pthread_mutex_lock(&process_context_lock);
    assert(process_context_users > 0);
    if (--process_context_users == 0) {
        zmq_ctx_term(process_context); /* every socket is closed: returns at once */
        process_context = NULL;
    }
    pthread_mutex_unlock(&process_context_lock);
}

int cr_client_transport_open(cr_client *c, const char *endpoint,
                             const struct cr_client_options *options, char *error,
                             size_t error_size) {
    if (strncmp(endpoint, CR_CLIENT_NATIVE_SCHEME, strlen(CR_CLIENT_NATIVE_SCHEME)) == 0) {
        struct cr_curve_client_keys keys = {0};
        if (options != NULL)
            keys = (struct cr_curve_client_keys){options->curve_server_key,
                                                 options->curve_public_key,
                                                 options->curve_secret_key};
        if (cr_curve_client_wanted(&keys)) {
            snprintf(error, error_size,
                     "'%s' is crescentd's native endpoint, which has no encryption, and CURVE "
                     "keys are set (options or CRESCENT_CURVE_*): use its tcp:// endpoint",
                     endpoint);
            return CR_ERR_INVALID_PARAMS;
        }
        return cr_client_tcp_open(c, endpoint, error, error_size);
    }
    /* Same host only, and crescentd lets only its own user (or root) map
     * the rings: nothing crosses a network, so CURVE keys do not matter. */
    if (strncmp(endpoint, CR_RPC_SHM_SCHEME, strlen(CR_RPC_SHM_SCHEME)) == 0)
        return cr_client_shm_open(c, endpoint, error, error_size);
    void *shared_context = options != NULL ? options->zmq_context : NULL;
    c->uses_process_context = shared_context == NULL;
    c->context = shared_context != NULL ? shared_context : process_context_acquire();
    if (c->context == NULL) {
        snprintf(error, error_size, "zmq_ctx_new: %s", zmq_strerror(errno));
        return CR_ERR_IO;
    }
    c->socket = zmq_socket(c->context, ZMQ_DEALER);
    c->rcvtimeo_ms = -1;
    int linger = 0; /* close never waits for a crescentd that is gone */
    if (c->socket == NULL ||
        zmq_setsockopt(c->socket, ZMQ_LINGER, &linger, sizeof(linger)) != 0) {
        snprintf(error, error_size, "zmq socket: %s", zmq_strerror(errno));
        return CR_ERR_IO;
    }
    struct cr_curve_client_keys keys = {0};
    if (options != NULL)
        keys = (struct cr_curve_client_keys){options->curve_server_key, options->curve_public_key,
                                             options->curve_secret_key};
    int rc = cr_curve_client_setup(c->socket, &keys, error, error_size);
    if (rc == CR_OK) rc = cr_client_monitor_open(c, error, error_size);
    if (rc != CR_OK) return rc;
    if (zmq_connect(c->socket, endpoint) != 0) {
        int code = errno;
        snprintf(error, error_size,
                 "cannot connect to '%s': %s (want tcp://HOST:PORT, crescent://HOST:PORT "
                 "for the native endpoint, or shm://@NAME on the same host)",
                 endpoint, zmq_strerror(code));
        return code == EINVAL || code == EPROTONOSUPPORT ? CR_ERR_INVALID_PARAMS : CR_ERR_IO;
    }
    return CR_OK;
}

int cr_client_open(const char *endpoint, const struct cr_client_options *options,
                   cr_client **out, char *error, size_t error_size) {
    assert(out != NULL);
    char ignored[8];
    if (error == NULL) {
        error = ignored;
        error_size = sizeof(ignored);
    }
    *out = NULL;
    int timeout_ms = options != NULL && options->timeout_ms != 0 ? options->timeout_ms
                                                                 : CR_CLIENT_TIMEOUT_MS_DEFAULT;
    if (endpoint == NULL || endpoint[0] == '\0' || strlen(endpoint) >= ENDPOINT_MAX) {
        snprintf(error, error_size, "the endpoint is empty or longer than %u bytes",
                 ENDPOINT_MAX - 1);
        return CR_ERR_INVALID_PARAMS;
    }
    if (timeout_ms < 1 || timeout_ms > TIMEOUT_MS_MAX) {
        snprintf(error, error_size, "timeout %d ms is outside 1..%d", timeout_ms, TIMEOUT_MS_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    cr_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(error, error_size, "out of memory");
        return CR_ERR_NOMEM;
    }
    c->timeout_ms = timeout_ms;
    c->tcp_fd = -1;
    c->clock_ms = monotonic_ms;
    c->put_retry.deadline_ms = -1; /* $CRESCENT_PUT_RETRY_MS at the first put */
    c->next_seq = 1;
    if (options != NULL && options->client_id != NULL)
        memcpy(c->id, options->client_id, CR_CLIENT_ID_BYTES);
    else
        random_uuid(c->id);
    const char *token = options != NULL && options->admin_token != NULL
                            ? options->admin_token
                            : getenv("CRESCENT_ADMIN_TOKEN");
    if (token != NULL && token[0] != '\0' && (c->admin_token = strdup(token)) == NULL) {
        snprintf(error, error_size, "out of memory");
        cr_client_close(c);
        return CR_ERR_NOMEM;
    }
    /* A secret handed over from the process that registered this id. */
    const char *secret = getenv("CRESCENT_CLIENT_SECRET");
    if (secret != NULL && secret[0] != '\0') {
        if (strlen(secret) != 2 * CR_CLIENT_SECRET_BYTES ||
            cr_client_uuid_parse(secret, c->secret) != CR_OK) {
            snprintf(error, error_size,
                     "CRESCENT_CLIENT_SECRET must be the 32 hex digits crescentctl printed");
            cr_client_close(c);
            return CR_ERR_INVALID_PARAMS;
        }
        c->has_secret = true;
    }
    int rc = strncmp(endpoint, CR_CLIENT_ETCD_SCHEME, strlen(CR_CLIENT_ETCD_SCHEME)) == 0
                 ? cr_client_follow_open(c, endpoint, options, error, error_size)
                 : cr_client_transport_open(c, endpoint, options, error, error_size);
    if (rc != CR_OK) {
        cr_client_close(c);
        return rc;
    }
    *out = c;
    return CR_OK;
}

void cr_client_transport_close(cr_client *c) {
    cr_client_tcp_close(c);
    c->rx_len = c->rx_cap = c->rx_taken = 0;
    cr_client_shm_close(c);
    cr_client_monitor_close(c);
    if (c->socket != NULL) zmq_close(c->socket);
    c->socket = NULL;
    c->link_up = false;
    c->connect_retries = 0;
    if (c->context != NULL && c->uses_process_context) process_context_release();
    c->context = NULL;
}

void cr_client_close(cr_client *c) {
    if (c == NULL) return;
    cr_client_files_close(c); /* its last report needs the connection */
    free(c->root_fs_dir);
    cr_client_transport_close(c);
    cr_client_follow_close(c);
    free(c->admin_token);
    free(c->scratch);
    free(c->stash);
    free(c->pending);
    cr_client_data_close(c);
    free(c);
}

int cr_client_set_timeout(cr_client *c, int timeout_ms) {
    assert(c != NULL);
    if (timeout_ms < 1 || timeout_ms > TIMEOUT_MS_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "timeout %d ms is outside 1..%d",
                              timeout_ms, TIMEOUT_MS_MAX);
    c->timeout_ms = timeout_ms;
    return CR_OK;
}

void cr_client_set_id(cr_client *c, const uint8_t id[CR_CLIENT_ID_BYTES]) {
    assert(c != NULL && id != NULL);
    if (memcmp(c->id, id, CR_CLIENT_ID_BYTES) != 0) c->has_secret = false; /* another id's */
    memcpy(c->id, id, CR_CLIENT_ID_BYTES);
}

bool cr_client_get_secret(const cr_client *c, uint8_t secret[CR_CLIENT_SECRET_BYTES]) {
    assert(c != NULL && secret != NULL);
    if (c->has_secret) memcpy(secret, c->secret, CR_CLIENT_SECRET_BYTES);
    return c->has_secret;
}

void cr_client_set_secret(cr_client *c, const uint8_t secret[CR_CLIENT_SECRET_BYTES]) {
    assert(c != NULL && secret != NULL);
    memcpy(c->secret, secret, CR_CLIENT_SECRET_BYTES);
    c->has_secret = true;
}

void cr_client_get_id(const cr_client *c, uint8_t id[CR_CLIENT_ID_BYTES]) {
    assert(c != NULL && id != NULL);
    memcpy(id, c->id, CR_CLIENT_ID_BYTES);
}

const char *cr_client_last_error(const cr_client *c) {
    assert(c != NULL);
    return c->error;
}

size_t cr_client_in_flight(const cr_client *c) {
    assert(c != NULL);
    return c->pending_live + c->stash_count;
}

static int hex_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int cr_client_uuid_parse(const char *text, uint8_t id[CR_CLIENT_ID_BYTES]) {
    assert(id != NULL);
    if (text == NULL) return CR_ERR_INVALID_PARAMS;
    size_t len = strlen(text);
    bool dashed = len == 36;
    if (len != 32 && !dashed) return CR_ERR_INVALID_PARAMS;
    uint8_t out[CR_CLIENT_ID_BYTES];
    size_t pos = 0;
    for (unsigned i = 0; i < CR_CLIENT_ID_BYTES; i++) {
        if (dashed && (pos == 8 || pos == 13 || pos == 18 || pos == 23)) {
            if (text[pos] != '-') return CR_ERR_INVALID_PARAMS;
            pos++;
        }
        int hi = hex_value(text[pos]), lo = hex_value(text[pos + 1]);
        if (hi < 0 || lo < 0) return CR_ERR_INVALID_PARAMS;
        out[i] = (uint8_t)(hi << 4 | lo);
        pos += 2;
    }
    memcpy(id, out, sizeof(out));
    return CR_OK;
}

void cr_client_uuid_format(const uint8_t id[CR_CLIENT_ID_BYTES], char text[CR_CLIENT_UUID_TEXT]) {
    assert(id != NULL && text != NULL);
    static const char digits[] = "0123456789abcdef";
    size_t pos = 0;
    for (unsigned i = 0; i < CR_CLIENT_ID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text[pos++] = '-';
        text[pos++] = digits[id[i] >> 4];
        text[pos++] = digits[id[i] & 15];
    }
    text[pos] = '\0';
}
