/* crescent-bench's indexer workloads: POST /query or /route over HTTP/1.1
 * keep-alive connections, one request in flight per connection.
 *
 * So that a fresh crescentd has something to index, the bench runs its own
 * simulated vLLM publishers (a ZMQ PUB socket each, registered with /register
 * under the run's tenant): --prompts prompts of --prompt-tokens tokens, the
 * first --shared-prefix of every prompt the same, prompt p cached whole by
 * instance p mod --instances.  It waits until the indexer has applied every
 * batch (GET /services: last_seq), pre-encodes one /query body per prompt
 * (so encoding is not measured), and unregisters its instances at the end,
 * which drops their blocks. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <msgpack.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "cmd/crescent-bench.h"

#define HTTP_HEAD_MAX 4096u
#define HTTP_BODY_MAX (16u << 20)
#define PUBLISH_WAIT_MS 30000   /* longest the indexer may take to apply our batches */
#define PREFIX_TOKEN_BASE 1u    /* shared-prefix token ids: 1 + position */

/* ---- HTTP/1.1 client ------------------------------------------------------ */

static int http_connect(const char *address, int timeout_ms, int *fd_out) {
    char host[256];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof(host)) return CR_ERR_INVALID_PARAMS;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return CR_ERR_INVALID_PARAMS;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return CR_ERR_IO;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return errno == EINPROGRESS || errno == EAGAIN ? CR_ERR_TIMEOUT : CR_ERR_IO;
    }
    *fd_out = fd;
    return CR_OK;
}

static int send_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? CR_ERR_TIMEOUT
                                                                              : CR_ERR_IO;
        data += n, len -= (size_t)n;
    }
    return CR_OK;
}

/* Reads one response with a Content-Length; *status_out is its HTTP status,
 * the body starts at h->buf + *body_at.  CR_ERR_IO when the peer closed first.
 * With pipelined requests one recv may take the start of the next answer:
 * those bytes stay in h->buf past h->consumed (the byte the body's NUL
 * overwrote kept in h->saved) and are the start of the next read. */
static int read_response(struct bench_http *h, int *status_out, size_t *body_at) {
    size_t have = h->have - h->consumed;
    if (have > 0) {
        h->buf[h->consumed] = h->saved;
        memmove(h->buf, h->buf + h->consumed, have);
    }
    h->have = have, h->consumed = 0;
    h->buf[have] = '\0';
    char *end = strstr(h->buf, "\r\n\r\n");
    while (end == NULL) {
        if (have >= HTTP_HEAD_MAX) return CR_ERR_PROTOCOL;
        ssize_t n = recv(h->fd, h->buf + have, HTTP_HEAD_MAX - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? CR_ERR_TIMEOUT
                                                                              : CR_ERR_IO;
        have += (size_t)n;
        h->have = have;
        h->buf[have] = '\0';
        end = strstr(h->buf, "\r\n\r\n");
    }
    size_t head = (size_t)(end - h->buf) + 4;
    const char *cl = strcasestr(h->buf, "\r\ncontent-length:");
    if (sscanf(h->buf, "HTTP/1.%*d %d", status_out) != 1 || cl == NULL || cl > end)
        return CR_ERR_PROTOCOL;
    unsigned long length = strtoul(cl + 17, NULL, 10);
    if (length > HTTP_BODY_MAX) return CR_ERR_PROTOCOL;
    if (head + length + 1 > h->cap) {
        char *bigger = realloc(h->buf, head + length + 1);
        if (bigger == NULL) return CR_ERR_NOMEM;
        h->buf = bigger, h->cap = head + length + 1;
    }
    while (have < head + length) {
        ssize_t n = recv(h->fd, h->buf + have, head + length - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? CR_ERR_TIMEOUT : CR_ERR_IO;
        have += (size_t)n;
    }
    h->have = have;
    h->consumed = head + length;
    h->saved = h->buf[head + length];
    h->buf[head + length] = '\0';
    *body_at = head;
    return CR_OK;
}

static void http_close(struct bench_http *h) {
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
    h->have = h->consumed = 0;
}

/* Sends `request` (a whole HTTP request) and reads the answer, reconnecting
 * once when a kept-alive connection turns out closed. */
int bench_http_exchange(struct bench_http *h, const struct bench_options *opt,
                         const char *request, size_t len, int *status, size_t *body_at) {
    for (int attempt = 0; attempt < 2; attempt++) {
        if (h->fd < 0) {
            int rc = http_connect(opt->http_address, opt->timeout_ms, &h->fd);
            if (rc != CR_OK) return rc;
        }
        int rc = send_all(h->fd, request, len);
        if (rc == CR_OK) rc = read_response(h, status, body_at);
        if (rc == CR_OK) return CR_OK;
        http_close(h);
        if (rc != CR_ERR_IO) return rc;
    }
    return CR_ERR_IO;
}

char *bench_format_request(const struct bench_options *opt, const char *method,
                            const char *path, const char *body, size_t *len_out) {
    size_t body_len = body != NULL ? strlen(body) : 0;
    size_t cap = body_len + 256 + strlen(path) + strlen(opt->http_address);
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    int n = snprintf(out, cap, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", method, path, opt->http_address, body_len,
                     body != NULL ? body : "");
    assert(n > 0 && (size_t)n < cap);
    *len_out = (size_t)n;
    return out;
}

/* One request outside the measured run (set-up, clean-up); returns the parsed
 * JSON answer of a 200, else NULL after a message naming the route. */
json_t *bench_http_call(struct bench_http *h, const struct bench_options *opt,
                         const char *method, const char *path, json_t *body) {
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    size_t len;
    char *request = bench_format_request(opt, method, path, text, &len);
    free(text);
    int status = 0;
    size_t at = 0;
    int rc = request != NULL ? bench_http_exchange(h, opt, request, len, &status, &at) : CR_ERR_NOMEM;
    free(request);
    if (rc != CR_OK || status != 200) {
        fprintf(stderr, "crescent-bench: %s %s on %s: %s%s\n", method, path, opt->http_address,
                rc != CR_OK ? cr_strerror(rc) : "", rc != CR_OK ? " (--http?)" : h->buf);
        return NULL;
    }
    return json_loads(h->buf + at, 0, NULL);
}

/* ---- simulated publishers ---------------------------------------------------- */

static uint32_t token_at(const struct bench_options *opt, uint64_t prompt, unsigned pos) {
    unsigned shared = (unsigned)(opt->shared_prefix * opt->prompt_tokens);
    if (pos < shared) return PREFIX_TOKEN_BASE + pos;
    return (uint32_t)((prompt + 1) * 65536u + pos); /* prompts <= 65535, tokens <= 65536 */
}

static void pack_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* A vLLM batch [ts, [BlockStored ...], nil] with prompt p's complete blocks,
 * engine hashes (p + 1) << 20 | block (unique per instance and prompt). */
static void pack_prompt(const struct bench_options *opt, uint64_t p, msgpack_sbuffer *sb) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    unsigned blocks = opt->prompt_tokens / opt->block_size;
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 0.0);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 8);
    pack_str(&pk, "BlockStored");
    msgpack_pack_array(&pk, blocks);
    for (unsigned b = 0; b < blocks; b++) msgpack_pack_uint64(&pk, ((p + 1) << 20) | b);
    msgpack_pack_nil(&pk); /* parent: the chain starts here */
    msgpack_pack_array(&pk, blocks * opt->block_size);
    for (unsigned t = 0; t < blocks * opt->block_size; t++)
        msgpack_pack_uint32(&pk, token_at(opt, p, t));
    msgpack_pack_uint32(&pk, opt->block_size);
    msgpack_pack_nil(&pk); /* lora_id */
    msgpack_pack_nil(&pk); /* medium */
    msgpack_pack_nil(&pk); /* lora_name */
    msgpack_pack_nil(&pk); /* the batch's data-parallel rank */
}

int bench_publish(struct bench_indexer *ix, unsigned instance, const void *data, size_t len) {
    uint8_t seq[8];
    uint64_t s = ix->sent[instance]++;
    for (int i = 0; i < 8; i++) seq[i] = (uint8_t)(s >> (56 - 8 * i));
    void *pub = ix->pubs[instance];
    if (zmq_send(pub, "", 0, ZMQ_SNDMORE) < 0 || zmq_send(pub, seq, 8, ZMQ_SNDMORE) < 0 ||
        zmq_send(pub, data, len, 0) < 0)
        return CR_ERR_IO;
    return CR_OK;
}

/* last_seq the indexer reports for our instance; -1 when none yet. */
int64_t bench_applied_seq(struct bench_indexer *ix, unsigned instance) {
    json_t *answer = bench_http_call(&ix->control, ix->opt, "GET", "/services", NULL);
    int64_t seq = -1;
    size_t i;
    json_t *svc;
    json_array_foreach(json_object_get(answer, "services"), i, svc) {
        if (strcmp(json_string_value(json_object_get(svc, "instance_id")) ?: "",
                   ix->names[instance]) != 0 ||
            strcmp(json_string_value(json_object_get(svc, "tenant_id")) ?: "",
                   ix->opt->tenant) != 0)
            continue;
        json_t *last = json_object_get(svc, "last_seq");
        if (json_is_integer(last)) seq = json_integer_value(last);
    }
    json_decref(answer);
    return seq;
}

static void nap_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Registers instance i's publisher and waits for its SUB to connect. */
static int bench_start_publisher(struct bench_indexer *ix, unsigned i, void *zmq_ctx) {
    const struct bench_options *opt = ix->opt;
    char endpoint[256];
    size_t size = sizeof(endpoint);
    ix->pubs[i] = zmq_socket(zmq_ctx, ZMQ_PUB);
    int linger = 0;
    zmq_setsockopt(ix->pubs[i], ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_bind(ix->pubs[i], "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(ix->pubs[i], ZMQ_LAST_ENDPOINT, endpoint, &size) != 0) {
        fprintf(stderr, "crescent-bench: publisher socket: %s\n", zmq_strerror(errno));
        return BENCH_EXIT_UNREACHABLE;
    }
    snprintf(ix->names[i], sizeof(ix->names[i]), "%s-i%u", opt->run_id, i);
    json_t *body = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "instance_id", ix->names[i],
                             "endpoint", endpoint, "modelname", opt->model, "block_size",
                             (int)opt->block_size, "tenant_id", opt->tenant, "type", "vLLM");
    json_t *answer = bench_http_call(&ix->control, opt, "POST", "/register", body);
    json_decref(body);
    if (answer == NULL) return BENCH_EXIT_UNREACHABLE;
    json_decref(answer);
    ix->registered = i + 1;
    static const uint8_t empty[] = {0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0xc0}; /* [0.0,[],nil] */
    for (long waited = 0; waited < PUBLISH_WAIT_MS; waited += 20) {
        if (bench_publish(ix, i, empty, sizeof(empty)) != CR_OK) return BENCH_EXIT_UNREACHABLE;
        if (bench_applied_seq(ix, i) >= 0) return BENCH_EXIT_OK;
        nap_ms(20);
    }
    fprintf(stderr, "crescent-bench: the indexer did not subscribe to %s within %d s\n",
            endpoint, PUBLISH_WAIT_MS / 1000);
    return BENCH_EXIT_UNREACHABLE;
}

static int publish_prompts(struct bench_indexer *ix) {
    const struct bench_options *opt = ix->opt;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (uint64_t p = 0; p < opt->keys; p++) {
        msgpack_sbuffer_clear(&sb);
        pack_prompt(opt, p, &sb);
        if (bench_publish(ix, (unsigned)(p % opt->instances), sb.data, sb.size) != CR_OK) {
            msgpack_sbuffer_destroy(&sb);
            return BENCH_EXIT_UNREACHABLE;
        }
    }
    msgpack_sbuffer_destroy(&sb);
    for (unsigned i = 0; i < opt->instances; i++) {
        long waited = 0;
        while (bench_applied_seq(ix, i) < (int64_t)ix->sent[i] - 1) {
            if ((waited += 20) > PUBLISH_WAIT_MS) {
                fprintf(stderr, "crescent-bench: the indexer applied only part of %s's %" PRIu64
                        " batches within %d s\n", ix->names[i], ix->sent[i], PUBLISH_WAIT_MS / 1000);
                return BENCH_EXIT_UNREACHABLE;
            }
            nap_ms(20);
        }
    }
    return BENCH_EXIT_OK;
}

/* Pre-encodes the request of each prompt for the measured run. */
static int encode_requests(struct bench_indexer *ix, const char *path) {
    const struct bench_options *opt = ix->opt;
    ix->requests = calloc(opt->keys, sizeof(*ix->requests));
    ix->request_lens = calloc(opt->keys, sizeof(*ix->request_lens));
    if (ix->requests == NULL || ix->request_lens == NULL) return BENCH_EXIT_ERRORS;
    for (uint64_t p = 0; p < opt->keys; p++) {
        json_t *tokens = json_array();
        for (unsigned t = 0; t < opt->prompt_tokens; t++)
            json_array_append_new(tokens, json_integer(token_at(opt, p, t)));
        json_t *body = json_pack("{s:s, s:i, s:o, s:s}", "model", opt->model, "block_size",
                                 (int)opt->block_size, "token_ids", tokens, "tenant_id",
                                 opt->tenant);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (text == NULL) return BENCH_EXIT_ERRORS;
        ix->requests[p] = bench_format_request(opt, "POST", path, text, &ix->request_lens[p]);
        free(text);
        if (ix->requests[p] == NULL) return BENCH_EXIT_ERRORS;
    }
    return BENCH_EXIT_OK;
}

/* Checks that the indexer answers prompt 0 with instance 0 holding every
 * complete block: else the numbers would time misses. */
static int check_hit(struct bench_indexer *ix) {
    const struct bench_options *opt = ix->opt;
    json_t *tokens = json_array();
    for (unsigned t = 0; t < opt->prompt_tokens; t++)
        json_array_append_new(tokens, json_integer(token_at(opt, 0, t)));
    json_t *body = json_pack("{s:s, s:i, s:o, s:s}", "model", opt->model, "block_size",
                             (int)opt->block_size, "token_ids", tokens, "tenant_id", opt->tenant);
    json_t *answer = bench_http_call(&ix->control, opt, "POST", "/query", body);
    json_decref(body);
    json_t *hit = json_object_get(json_object_get(json_object_get(answer, opt->tenant),
                                                  ix->names[0]), "longest_matched");
    json_int_t want = (json_int_t)(opt->prompt_tokens / opt->block_size * opt->block_size);
    bool ok = json_is_integer(hit) && json_integer_value(hit) == want;
    if (!ok) {
        char *text = answer != NULL ? json_dumps(answer, JSON_COMPACT) : NULL;
        fprintf(stderr, "crescent-bench: the indexer does not report %s holding the %" PRId64
                " tokens it published: /query answered %.300s\n", ix->names[0], (int64_t)want,
                text != NULL ? text : "nothing");
        free(text);
        json_t *services = bench_http_call(&ix->control, opt, "GET", "/services", NULL);
        text = services != NULL ? json_dumps(services, JSON_COMPACT) : NULL;
        fprintf(stderr, "crescent-bench: /services answered %.2000s\n", text != NULL ? text : "nothing");
        free(text);
        json_decref(services);
    }
    json_decref(answer);
    return ok ? BENCH_EXIT_OK : BENCH_EXIT_UNREACHABLE;
}

int bench_indexer_open(struct bench_indexer *ix, const struct bench_options *opt) {
    ix->opt = opt;
    ix->control = (struct bench_http){.fd = -1, .buf = malloc(HTTP_HEAD_MAX + 1),
                                      .cap = HTTP_HEAD_MAX + 1};
    ix->zmq_ctx = zmq_ctx_new();
    ix->pubs = calloc(opt->instances, sizeof(*ix->pubs));
    ix->sent = calloc(opt->instances, sizeof(*ix->sent));
    ix->names = calloc(opt->instances, sizeof(*ix->names));
    if (ix->control.buf == NULL || ix->zmq_ctx == NULL || ix->pubs == NULL || ix->sent == NULL ||
        ix->names == NULL)
        return fprintf(stderr, "crescent-bench: out of memory\n"), BENCH_EXIT_ERRORS;
    json_t *health = bench_http_call(&ix->control, opt, "GET", "/health", NULL);
    if (health == NULL) return BENCH_EXIT_UNREACHABLE;
    json_decref(health);
    ix->reachable = true;
    for (unsigned i = 0; i < opt->instances; i++) {
        int rc = bench_start_publisher(ix, i, ix->zmq_ctx);
        if (rc != BENCH_EXIT_OK) return rc;
    }
    return BENCH_EXIT_OK;
}

int bench_indexer_set_up(struct bench_indexer *ix, const struct bench_options *opt) {
    int rc = bench_indexer_open(ix, opt);
    if (rc == BENCH_EXIT_OK) rc = publish_prompts(ix);
    if (rc == BENCH_EXIT_OK) rc = check_hit(ix);
    if (rc != BENCH_EXIT_OK) return rc;
    return encode_requests(ix, opt->mix[OP_ROUTE] > 0 ? "/route" : "/query");
}

void bench_indexer_clean_up(struct bench_indexer *ix) {
    for (unsigned i = 0; ix->reachable && i < ix->registered; i++) {
        json_t *body = json_pack("{s:s, s:s}", "instance_id", ix->names[i], "tenant_id",
                                 ix->opt->tenant);
        json_decref(bench_http_call(&ix->control, ix->opt, "POST", "/unregister", body));
        json_decref(body);
    }
    for (unsigned i = 0; ix->pubs != NULL && i < ix->opt->instances; i++)
        if (ix->pubs[i] != NULL) zmq_close(ix->pubs[i]);
    if (ix->zmq_ctx != NULL) zmq_ctx_term(ix->zmq_ctx);
    for (uint64_t p = 0; ix->requests != NULL && p < ix->opt->keys; p++) free(ix->requests[p]);
    free(ix->requests);
    free(ix->request_lens);
    free(ix->pubs);
    free(ix->sent);
    free(ix->names);
    if (ix->control.fd >= 0) close(ix->control.fd);
    free(ix->control.buf);
}

/* ---- the measured loop ------------------------------------------------------ */

/* A request sent on the worker's connection whose answer is not read yet. */
struct sent_request {
    uint64_t due_ns, sent_ns;
    bool measured;
};

/* Reads the oldest unanswered request's answer (HTTP/1.1 answers a
 * connection's requests in order) and records it; a connection lost fails
 * every request still on it, and the next send reconnects. */
static void read_oldest(struct bench_worker *w, struct bench_http *h, enum bench_op op,
                        struct sent_request *ring, unsigned *head, unsigned *count) {
    int status = 0;
    size_t at = 0;
    int rc = read_response(h, &status, &at);
    if (rc == CR_OK && status != 200) rc = status; /* an HTTP status, counted by its code */
    unsigned lost = rc == CR_OK || rc > 0 ? 1 : *count;
    if (lost > 1 || (rc != CR_OK && rc <= 0)) http_close(h);
    for (unsigned i = 0; i < lost; i++) {
        const struct sent_request *r = &ring[*head];
        bench_record(w, op, r->measured, r->due_ns, r->sent_ns, 1, rc);
        *head = (*head + 1) % w->opt->depth;
        (*count)--;
    }
}

/* Whether the connection has an answer to read within timeout_ms. */
static bool answer_ready(const struct bench_http *h, int timeout_ms) {
    if (h->have > h->consumed) return true;
    struct pollfd p = {.fd = h->fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) > 0;
}

/* --depth requests in flight on one keep-alive connection (HTTP/1.1
 * pipelining): each is sent when due while fewer than --depth are
 * unanswered, and answers are read as they come; --depth 1 is a request,
 * then its answer. */
void bench_indexer_run(struct bench_worker *w) {
    const struct bench_options *opt = w->opt;
    const struct bench_indexer *ix = w->indexer;
    struct bench_http h = {.fd = -1, .buf = malloc(HTTP_HEAD_MAX + 1), .cap = HTTP_HEAD_MAX + 1};
    struct sent_request *ring = calloc(opt->depth, sizeof(*ring));
    if (h.buf == NULL || ring == NULL) {
        snprintf(w->failure, sizeof(w->failure), "out of memory");
        free(h.buf);
        free(ring);
        return;
    }
    enum bench_op op = opt->mix[OP_ROUTE] > 0 ? OP_ROUTE : OP_QUERY;
    double interval_ns = opt->rate > 0.0 ? 1e9 * opt->connections / opt->rate : 0.0;
    uint64_t issued_measured = 0;
    unsigned head = 0, count = 0;
    bool issuing = true;
    while (issuing || count > 0) {
        uint64_t now = bench_now_ns();
        uint64_t due = opt->rate > 0.0
                           ? w->start_ns + (uint64_t)(interval_ns * (double)w->sent_scheduled)
                           : now;
        if (!issuing || count == opt->depth) {
            read_oldest(w, &h, op, ring, &head, &count);
            continue;
        }
        if (due > now && count > 0) {
            /* Not due yet: read what is answered meanwhile. */
            if (answer_ready(&h, (int)((due - now + 999999) / 1000000)))
                read_oldest(w, &h, op, ring, &head, &count);
            continue;
        }
        bool measured;
        if (!bench_may_issue(w, due, issued_measured, &measured)) {
            issuing = false;
            continue;
        }
        if (due > now) bench_sleep_until(due);
        w->sent_scheduled++;
        uint64_t sent = bench_now_ns();
        if (measured) bench_note_sent(w, due, sent, issued_measured++);
        uint64_t p = bench_pick_key(w);
        int rc = CR_OK;
        /* Nothing asked, yet something to read: the server closed the idle
         * connection (or broke the protocol); start a new one. */
        if (h.fd >= 0 && count == 0 && answer_ready(&h, 0)) http_close(&h);
        if (h.fd < 0) rc = http_connect(opt->http_address, opt->timeout_ms, &h.fd);
        if (rc == CR_OK) rc = send_all(h.fd, ix->requests[p], ix->request_lens[p]);
        if (rc != CR_OK) {
            /* This request failed, and with it every one still on the connection. */
            bench_record(w, op, measured, due, sent, 1, rc);
            while (count > 0) {
                const struct sent_request *r = &ring[head];
                bench_record(w, op, r->measured, r->due_ns, r->sent_ns, 1, rc);
                head = (head + 1) % opt->depth;
                count--;
            }
            http_close(&h);
            continue;
        }
        ring[(head + count) % opt->depth] =
            (struct sent_request){.due_ns = due, .sent_ns = sent, .measured = measured};
        count++;
    }
    http_close(&h);
    free(h.buf);
    free(ring);
}
