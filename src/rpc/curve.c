/* CurveZMQ server side and its ZAP handler (see curve.h).
 *
 * libzmq asks a ZAP handler, bound at inproc://zeromq.zap.01 in the
 * socket's own context, about every CURVE handshake (RFC 27).  crescentd's
 * three sockets live in three contexts, so each gets a handler: one thread
 * blocked on a REP socket, answering from a sorted table of allowed keys.
 * The thread ends when the context is terminated (its recv returns ETERM and
 * it closes its socket, which lets zmq_ctx_term finish); the owner then
 * joins it.  A thread rather than a slot in the actors' poll loops: a
 * handshake is rare, and the handler must answer even while an actor is
 * busy, or the handshake stalls. */
#include "rpc/curve.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "core/log.h"
#include "crescent/error.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES 7u /* version, request id, domain, address, identity, mechanism, key */
#define ZAP_FRAME_MAX 256u

struct cr_curve_server {
    void *rep;
    pthread_t thread;
    uint8_t (*keys)[CR_CURVE_KEY_BYTES]; /* sorted */
    size_t key_count;
    char who[16];
    atomic_uint_fast64_t refused;
};

bool cr_curve_configured(const struct cr_daemon_config *config) {
    return config->curve_secret_key_file[0] != '\0' || config->curve_clients[0] != '\0';
}

/* ---- key files ---- */

/* Calls fn for each key line of the file; false with `error` on a bad file. */
static bool each_key(const char *path, bool (*fn)(void *ctx, const char *z85), void *ctx,
                     char *error, size_t error_size) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(error, error_size, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    char line[256];
    bool ok = true;
    for (unsigned n = 1; ok && fgets(line, sizeof(line), f) != NULL; n++) {
        size_t len = strcspn(line, "\r\n");
        line[len] = '\0';
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = '\0';
        const char *p = line + strspn(line, " \t");
        if (*p == '\0' || *p == '#') continue;
        uint8_t raw[CR_CURVE_KEY_BYTES];
        if (strlen(p) != CR_CURVE_Z85_LEN || zmq_z85_decode(raw, p) == NULL) {
            snprintf(error, error_size,
                     "%s line %u: not a Z85 CURVE key (40 characters, as `crescentctl keygen` "
                     "writes)",
                     path, n);
            ok = false;
        } else if (!fn(ctx, p)) {
            snprintf(error, error_size, "%s line %u: more than %u client keys", path, n,
                     CR_CURVE_CLIENTS_MAX);
            ok = false;
        }
    }
    fclose(f);
    return ok;
}

static bool take_first(void *ctx, const char *z85) {
    char *out = ctx;
    if (out[0] == '\0') memcpy(out, z85, CR_CURVE_Z85_LEN + 1);
    return true;
}

bool cr_curve_read_key_file(const char *path, char z85[CR_CURVE_Z85_LEN + 1], char *error,
                            size_t error_size) {
    z85[0] = '\0';
    if (!each_key(path, take_first, z85, error, error_size)) return false;
    if (z85[0] != '\0') return true;
    snprintf(error, error_size, "%s holds no key", path);
    return false;
}

static bool add_client(void *ctx, const char *z85) {
    struct cr_curve_server *s = ctx;
    if (s->key_count == CR_CURVE_CLIENTS_MAX) return false;
    zmq_z85_decode(s->keys[s->key_count++], z85);
    return true;
}

static int key_cmp(const void *a, const void *b) {
    return memcmp(a, b, CR_CURVE_KEY_BYTES);
}

/* A file of keys, or a directory of such files (hidden files skipped). */
static bool load_clients(struct cr_curve_server *s, const char *path, char *error,
                         size_t error_size) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(error, error_size, "cannot read %s (curve_clients): %s", path, strerror(errno));
        return false;
    }
    bool ok = true;
    if (!S_ISDIR(sb.st_mode)) {
        ok = each_key(path, add_client, s, error, error_size);
    } else {
        DIR *dir = opendir(path);
        if (dir == NULL) {
            snprintf(error, error_size, "cannot list %s: %s", path, strerror(errno));
            return false;
        }
        struct dirent *e;
        while (ok && (e = readdir(dir)) != NULL) {
            char file[1024];
            if (e->d_name[0] == '.') continue;
            snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
            if (stat(file, &sb) == 0 && S_ISREG(sb.st_mode))
                ok = each_key(file, add_client, s, error, error_size);
        }
        closedir(dir);
    }
    if (ok && s->key_count == 0) {
        snprintf(error, error_size, "%s lists no client key: nobody could connect", path);
        ok = false;
    }
    qsort(s->keys, s->key_count, CR_CURVE_KEY_BYTES, key_cmp);
    return ok;
}

/* ---- the ZAP handler ---- */

static bool allowed(const struct cr_curve_server *s, const uint8_t *key, size_t len) {
    return len == CR_CURVE_KEY_BYTES &&
           bsearch(key, s->keys, s->key_count, CR_CURVE_KEY_BYTES, key_cmp) != NULL;
}

/* Answers one request; false when the context is gone. */
static bool zap_serve_one(struct cr_curve_server *s) {
    uint8_t frame[ZAP_FRAMES][ZAP_FRAME_MAX];
    int len[ZAP_FRAMES];
    size_t n = 0;
    int more = 1;
    size_t more_size = sizeof(more);
    while (more) {
        uint8_t scratch[ZAP_FRAME_MAX];
        int got = zmq_recv(s->rep, n < ZAP_FRAMES ? frame[n] : scratch, ZAP_FRAME_MAX, 0);
        if (got < 0) return zmq_errno() != ETERM;
        if (n < ZAP_FRAMES) len[n] = got > (int)ZAP_FRAME_MAX ? (int)ZAP_FRAME_MAX : got;
        n++;
        if (zmq_getsockopt(s->rep, ZMQ_RCVMORE, &more, &more_size) != 0) return false;
    }
    /* libzmq only sends well-formed requests; anything else is refused. */
    bool ok = n == ZAP_FRAMES && len[5] == 5 && memcmp(frame[5], "CURVE", 5) == 0 &&
              allowed(s, frame[6], (size_t)len[6]);
    if (!ok) {
        atomic_fetch_add(&s->refused, 1);
        char key[CR_CURVE_Z85_LEN + 1] = "?";
        if (n == ZAP_FRAMES && len[6] == CR_CURVE_KEY_BYTES) zmq_z85_encode(key, frame[6], 32);
        CR_WARN("curve", "%s socket: refused a client from %.*s with key %s: not in curve_clients",
                s->who, n > 3 ? len[3] : 0, n > 3 ? (const char *)frame[3] : "", key);
    }
    const char *code = ok ? "200" : "400";
    const char *text = ok ? "OK" : "client key not allowed";
    int flags = ZMQ_SNDMORE;
    if (zmq_send(s->rep, "1.0", 3, flags) < 0 ||
        zmq_send(s->rep, frame[1], n > 1 ? (size_t)len[1] : 0, flags) < 0 ||
        zmq_send(s->rep, code, 3, flags) < 0 || zmq_send(s->rep, text, strlen(text), flags) < 0 ||
        zmq_send(s->rep, "", 0, flags) < 0 || zmq_send(s->rep, "", 0, 0) < 0)
        return zmq_errno() != ETERM;
    return true;
}

static void *zap_main(void *arg) {
    struct cr_curve_server *s = arg;
    while (zap_serve_one(s)) {
    }
    zmq_close(s->rep); /* lets zmq_ctx_term return */
    return NULL;
}

static void server_free(struct cr_curve_server *s) {
    free(s->keys);
    free(s);
}

static int fail(struct cr_curve_server *s, const char *who, const char *why, int rc) {
    fprintf(stderr, "crescentd: CURVE on the %s socket: %s\n", who, why);
    if (s != NULL) {
        if (s->rep != NULL) zmq_close(s->rep);
        server_free(s);
    }
    return rc;
}

int cr_curve_server_start(void *zctx, void *sock, const struct cr_daemon_config *config,
                          const char *who, struct cr_curve_server **out) {
    *out = NULL;
    if (!cr_curve_configured(config)) return CR_OK;
    if (config->curve_secret_key_file[0] == '\0' || config->curve_clients[0] == '\0')
        return fail(NULL, who,
                    "--curve-secret-key-file and --curve-clients go together: set both",
                    CR_ERR_INVALID_PARAMS);
    if (!zmq_has("curve"))
        return fail(NULL, who, "this libzmq is built without CURVE (libsodium)", CR_ERR_IO);
    char error[512], secret[CR_CURVE_Z85_LEN + 1], public[CR_CURVE_Z85_LEN + 1];
    if (!cr_curve_read_key_file(config->curve_secret_key_file, secret, error, sizeof(error)))
        return fail(NULL, who, error, CR_ERR_INVALID_PARAMS);
    if (zmq_curve_public(public, secret) != 0)
        return fail(NULL, who, "cannot derive the public key from curve_secret_key_file",
                    CR_ERR_INVALID_PARAMS);
    struct cr_curve_server *s = calloc(1, sizeof(*s));
    if (s != NULL) s->keys = calloc(CR_CURVE_CLIENTS_MAX, CR_CURVE_KEY_BYTES);
    if (s == NULL || s->keys == NULL) {
        if (s != NULL) free(s);
        return fail(NULL, who, "out of memory", CR_ERR_NOMEM);
    }
    snprintf(s->who, sizeof(s->who), "%s", who);
    if (!load_clients(s, config->curve_clients, error, sizeof(error)))
        return fail(s, who, error, CR_ERR_INVALID_PARAMS);
    int one = 1, zero = 0;
    s->rep = zmq_socket(zctx, ZMQ_REP);
    if (s->rep == NULL || zmq_setsockopt(s->rep, ZMQ_LINGER, &zero, sizeof(zero)) != 0 ||
        zmq_bind(s->rep, ZAP_ENDPOINT) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, CR_CURVE_Z85_LEN) != 0)
        return fail(s, who, zmq_strerror(zmq_errno()), CR_ERR_IO);
    if (pthread_create(&s->thread, NULL, zap_main, s) != 0)
        return fail(s, who, "cannot start the ZAP handler thread", CR_ERR_IO);
    CR_INFO("curve", "%s socket: CURVE on, server key %s, %zu client key(s) allowed", who, public,
            s->key_count);
    *out = s;
    return CR_OK;
}

void cr_curve_server_join(struct cr_curve_server *server) {
    if (server == NULL) return;
    pthread_join(server->thread, NULL);
    server_free(server);
}

uint64_t cr_curve_server_refused(const struct cr_curve_server *server) {
    return server != NULL ? atomic_load(&((struct cr_curve_server *)server)->refused) : 0;
}
