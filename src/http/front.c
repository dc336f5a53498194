/* The HTTP front (see front.h): one event thread owns every connection
 * (epoll, non-blocking sockets) and reads each request whole (its head
 * parsed by Debian's http_parser as it arrives: request_head.c); complete
 * requests go to a pool of worker threads that run the handlers; the event
 * thread writes the answers.  An idle or slow connection costs a buffer and
 * a slot in the table, never a thread: with CivetWeb (thread per
 * connection), 16 idle connections took the front down for its whole
 * request timeout (docs/architecture.md, "The HTTP front"). */
#include "http/front.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/admin_token.h"
#include "http/browsers.h"
#include "http/request_head.h"

#define WORKERS_MAX 256u
#define TICK_MS 250             /* timeouts are checked this often */

struct route {
    char method[8];
    char path[128];
    bool prefix;
    bool admin_only; /* a mutation: needs the admin token when one is set */
    cr_http_handler handler;
    void *ctx;
    /* Latency histogram (cr_histogram's buckets), bumped by every worker:
     * relaxed atomic adds, three per request, no lock. */
    _Atomic uint64_t count, sum_ns, buckets[CR_HISTOGRAM_BUCKETS];
};

enum conn_state { CONN_READING, CONN_RUNNING, CONN_WRITING };

struct conn {
    int fd;
    enum conn_state state;
    bool gone;       /* the peer hung up while a worker ran its request */
    bool keep_alive; /* after this answer */
    bool token_given; /* the request sent Authorization: Bearer (right or wrong) */
    bool admin;       /* ... and it was right, or crescentd has no admin token */
    char *in;        /* request bytes: head, body, maybe the next request */
    size_t in_len, in_cap;
    size_t head_len, body_len; /* of the request being read, once its head is */
    char saved;                /* the byte after the body, while it is a NUL */
    uint64_t deadline_ms;      /* idle or request timeout */
    uint64_t last_ms;          /* last activity: the oldest idle is dropped first */
    uint64_t read_ns;          /* when the request was read whole (for the latency) */
    /* The answer: its head here, its body as the handler made it (taken,
     * not copied: a /query answer is ~80 KB), sent together by sendmsg. */
    char out_head[320];
    size_t out_head_len;
    char *out_body;
    size_t out_body_len, out_off; /* out_off counts head and body bytes sent */
    struct cr_http_head head;   /* http_parser's view of the request being read */
    struct cr_http_request req; /* points into in; valid while RUNNING */
    struct conn *next_job;      /* in the worker queue or the done list */
};

struct cr_http_front {
    struct route routes[CR_HTTP_ROUTES_MAX];
    unsigned route_count;
    struct cr_admin_token admin; /* len 0: none */
    struct cr_http_names hosts, origins; /* browsers.h: who may reach it from a browser */
    _Atomic uint64_t refused_host, refused_origin, refused_type, refused_token;
    bool any_body_type; /* a peer's protocol, not a browser's JSON API (http_meta.c) */
    struct cr_http_front_limits limits;
    int listen_fd, epoll_fd, wake_fd;
    bool started, io_started;
    atomic_bool stopping;
    pthread_t io_thread;
    pthread_t workers[WORKERS_MAX];
    unsigned worker_count;
    struct conn **conns; /* limits.connections_max slots */
    unsigned conn_count;
    pthread_mutex_t lock; /* jobs and done */
    pthread_cond_t job_ready;
    struct conn *jobs_head, *jobs_tail, *done_head;
};

/* ---- routes and responses ---- */

int cr_http_front_create(struct cr_http_front **out) {
    struct cr_http_front *front = calloc(1, sizeof(*front));
    if (front == NULL) return CR_ERR_NOMEM;
    front->listen_fd = front->epoll_fd = front->wake_fd = -1;
    *out = front;
    return CR_OK;
}

int cr_http_front_add_route(struct cr_http_front *front, const char *method, const char *path,
                            cr_http_handler handler, void *ctx) {
    assert(front != NULL && !front->started && handler != NULL);
    if (front->route_count == CR_HTTP_ROUTES_MAX || strlen(method) >= 8 || strlen(path) >= 128 ||
        path[0] != '/')
        return CR_ERR_INVALID_PARAMS;
    struct route *r = &front->routes[front->route_count++];
    snprintf(r->method, sizeof(r->method), "%s", method);
    snprintf(r->path, sizeof(r->path), "%s", path);
    size_t len = strlen(path);
    r->prefix = len > 1 && path[len - 1] == '/';
    r->handler = handler;
    r->ctx = ctx;
    return CR_OK;
}

int cr_http_front_set_admin_token(struct cr_http_front *front, const char *token) {
    assert(front != NULL && !front->started);
    size_t len = token != NULL ? strlen(token) : 0;
    if (len > CR_ADMIN_TOKEN_MAX) return CR_ERR_INVALID_PARAMS;
    memcpy(front->admin.text, token != NULL ? token : "", len + 1);
    front->admin.len = len;
    return CR_OK;
}

int cr_http_front_require_admin(struct cr_http_front *front, const char *method,
                                const char *path) {
    assert(front != NULL && !front->started);
    for (unsigned i = 0; i < front->route_count; i++) {
        struct route *r = &front->routes[i];
        if (strcmp(r->method, method) == 0 && strcmp(r->path, path) == 0) {
            r->admin_only = true;
            return CR_OK;
        }
    }
    return CR_ERR_INVALID_PARAMS;
}

int cr_http_front_set_browsers(struct cr_http_front *front, const char *hosts,
                               const char *origins, char *error, size_t error_size) {
    assert(front != NULL && !front->started);
    int rc = cr_http_names_parse(hosts, false, "--http-allowed-hosts", &front->hosts, error,
                                 error_size);
    if (rc != CR_OK) return rc;
    return cr_http_names_parse(origins, true, "--http-allowed-origins", &front->origins, error,
                               error_size);
}

void cr_http_front_refusals(const struct cr_http_front *front, struct cr_http_refusals *out) {
    assert(front != NULL && out != NULL);
    out->host = atomic_load_explicit(&front->refused_host, memory_order_relaxed);
    out->origin = atomic_load_explicit(&front->refused_origin, memory_order_relaxed);
    out->content_type = atomic_load_explicit(&front->refused_type, memory_order_relaxed);
    out->admin_token = atomic_load_explicit(&front->refused_token, memory_order_relaxed);
}

/* Returns the route for the request; *path_known says whether some route
 * has this path under another method (405 rather than 404). */
static struct route *route_find(struct cr_http_front *front, const char *method,
                                const char *path, bool *path_known) {
    *path_known = false;
    for (unsigned i = 0; i < front->route_count; i++) {
        struct route *r = &front->routes[i];
        bool match = r->prefix ? strncmp(path, r->path, strlen(r->path)) == 0
                               : strcmp(path, r->path) == 0;
        if (!match) continue;
        *path_known = true;
        if (strcmp(method, r->method) == 0) return r;
    }
    return NULL;
}

void cr_http_respond_json(struct cr_http_response *resp, int status, char *json_text) {
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = json_text;
    resp->body_len = json_text != NULL ? strlen(json_text) : 0;
}

void cr_http_respond_error(struct cr_http_response *resp, int status, const char *error,
                           const char *detail) {
    json_t *obj = json_pack("{s:s, s:s}", "error", error, "detail", detail ? detail : "");
    cr_http_respond_json(resp, status, obj ? json_dumps(obj, JSON_COMPACT) : NULL);
    json_decref(obj);
}

static const char *status_text(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

/* Sets the connection's answer: the head formatted into c->out_head, the
 * body taken from resp (resp->body is NULL after). */
static void answer(struct conn *c, struct cr_http_response *resp) {
    int status = resp->status;
    const char *type = resp->content_type ? resp->content_type : "text/plain";
    size_t body_len = resp->body_len;
    if (resp->body == NULL && status >= 200) { /* a handler or json_dumps ran out of memory */
        status = 500;
        type = "text/plain";
        body_len = 0;
    }
    const char *extra = resp->header != NULL && resp->body != NULL ? resp->header : NULL;
    assert(extra == NULL || strlen(extra) < 64); /* a static line: fits out_head */
    int n = snprintf(c->out_head, sizeof(c->out_head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%s%s%s\r\n",
                     status, status_text(status), type, body_len, extra ? extra : "",
                     extra ? "\r\n" : "", c->keep_alive ? "" : "Connection: close\r\n");
    assert(n > 0 && (size_t)n < sizeof(c->out_head));
    free(c->out_body);
    c->out_head_len = (size_t)n;
    c->out_body = body_len > 0 ? resp->body : NULL;
    c->out_body_len = body_len;
    c->out_off = 0;
    if (c->out_body == NULL) free(resp->body);
    resp->body = NULL;
}

static void answer_error(struct conn *c, int status, const char *error, const char *detail) {
    struct cr_http_response resp = {.status = 500};
    cr_http_respond_error(&resp, status, error, detail);
    c->keep_alive = false; /* the rest of the stream cannot be trusted */
    answer(c, &resp);
}

/* ---- workers ---- */

static void observe(struct route *r, uint64_t ns) {
    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->buckets[cr_histogram_bucket(ns)], 1, memory_order_relaxed);
}

uint32_t cr_http_front_latency(const struct cr_http_front *front,
                               struct cr_http_route_latency *out, uint32_t max) {
    uint32_t n = 0;
    for (unsigned i = 0; i < front->route_count && n < max; i++) {
        const struct route *r = &front->routes[i];
        struct cr_http_route_latency *l = &out[n++];
        l->method = r->method;
        l->path = r->path;
        l->h.count = atomic_load_explicit(&r->count, memory_order_relaxed);
        l->h.sum_ns = atomic_load_explicit(&r->sum_ns, memory_order_relaxed);
        for (unsigned b = 0; b < CR_HISTOGRAM_BUCKETS; b++)
            l->h.buckets[b] = atomic_load_explicit(&r->buckets[b], memory_order_relaxed);
    }
    return n;
}

static void bump(_Atomic uint64_t *counter) {
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* The browser checks (browsers.h), before any route is looked at: true if
 * the request may go on, else `resp` says why it may not. */
static bool browser_allowed(struct cr_http_front *front, const struct cr_http_request *req,
                            struct cr_http_response *resp) {
    char detail[384];
    if (!cr_http_host_allowed(&front->hosts, req->host)) {
        bump(&front->refused_host);
        snprintf(detail, sizeof(detail),
                 "Host '%.100s' is not a name of this crescentd (DNS rebinding?): use an IP "
                 "address or localhost, or start crescentd with --http-allowed-hosts NAME",
                 req->host);
        cr_http_respond_error(resp, 403, "host not allowed", detail);
        return false;
    }
    bool changes = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
    if (changes && !cr_http_origin_allowed(&front->origins, req->origin, req->host)) {
        bump(&front->refused_origin);
        snprintf(detail, sizeof(detail),
                 "%s %s from a page on '%.100s' (cross-site): start crescentd with "
                 "--http-allowed-origins ORIGIN to let that front end in",
                 req->method, req->path, req->origin);
        cr_http_respond_error(resp, 403, "origin not allowed", detail);
        return false;
    }
    if (changes && req->body_len > 0 && !front->any_body_type &&
        !cr_http_body_type_allowed(req->content_type)) {
        bump(&front->refused_type);
        snprintf(detail, sizeof(detail),
                 "%s %s: the body's Content-Type is '%.100s'; send application/json "
                 "(curl --json BODY) or application/msgpack",
                 req->method, req->path, req->content_type != NULL ? req->content_type : "none");
        cr_http_respond_error(resp, 415, "unsupported content type", detail);
        return false;
    }
    return true;
}

static void run_request(struct cr_http_front *front, struct conn *c) {
    struct cr_http_response resp = {.status = 500};
    bool path_known;
    struct route *route = route_find(front, c->req.method, c->req.path, &path_known);
    if (!browser_allowed(front, &c->req, &resp)) {
        /* answered: no route runs for a page that may not reach crescentd */
    } else if (route == NULL) {
        cr_http_respond_error(&resp, path_known ? 405 : 404,
                              path_known ? "method not allowed" : "not found", c->req.path);
    } else if (route->admin_only && !c->req.admin) {
        bump(&front->refused_token);
        char detail[384];
        snprintf(detail, sizeof(detail),
                 "%s %s changes crescentd's state and this crescentd runs with "
                 "--admin-token-file: send Authorization: Bearer <token>",
                 route->method, route->path);
        cr_http_respond_error(&resp, 401,
                              c->token_given ? "wrong admin token" : "admin token required",
                              detail);
    } else {
        route->handler(route->ctx, &c->req, &resp);
        observe(route, cr_monotonic_ns() - c->read_ns);
    }
    answer(c, &resp);
}

static void *worker_main(void *arg) {
    struct cr_http_front *front = arg;
    pthread_mutex_lock(&front->lock);
    for (;;) {
        while (front->jobs_head == NULL && !atomic_load(&front->stopping))
            pthread_cond_wait(&front->job_ready, &front->lock);
        struct conn *c = front->jobs_head;
        if (c == NULL) break; /* stopping, and nothing left to run */
        front->jobs_head = c->next_job;
        if (front->jobs_head == NULL) front->jobs_tail = NULL;
        pthread_mutex_unlock(&front->lock);
        run_request(front, c);
        pthread_mutex_lock(&front->lock);
        c->next_job = front->done_head;
        front->done_head = c;
        uint64_t one = 1;
        ssize_t w = write(front->wake_fd, &one, sizeof(one));
        (void)w; /* a full eventfd counter is still a wake */
    }
    pthread_mutex_unlock(&front->lock);
    return NULL;
}

/* ---- connections (event thread only) ---- */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void conn_close(struct cr_http_front *front, struct conn *c) {
    for (unsigned i = 0; i < front->conn_count; i++) {
        if (front->conns[i] != c) continue;
        front->conns[i] = front->conns[--front->conn_count];
        break;
    }
    if (!c->gone) epoll_ctl(front->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out_body);
    free(c);
}

static void conn_watch(struct cr_http_front *front, struct conn *c, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(front->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Waiting for a request: the keep-alive idle timeout, or the request timeout
 * once its first byte has come. */
static void conn_wait_request(struct cr_http_front *front, struct conn *c) {
    c->state = CONN_READING;
    c->head_len = c->body_len = 0;
    cr_http_head_init(&c->head);
    uint32_t ms = c->in_len > 0 ? front->limits.request_timeout_ms : front->limits.idle_timeout_ms;
    c->deadline_ms = now_ms() + ms;
    conn_watch(front, c, EPOLLIN | EPOLLRDHUP);
}

/* The request whose head http_parser has read (request_head.c): its body's
 * length, keep-alive, and whether it carries the admin token.  The strings
 * are set in conn_parse once the body is in (c->in may move until then). */
static void request_from_head(struct cr_http_front *front, struct conn *c) {
    const struct cr_http_head *head = &c->head;
    c->head_len = head->head_len;
    c->body_len = head->body_len;
    c->keep_alive = head->keep_alive;
    const char *auth = head->authorization_at != 0 ? c->in + head->authorization_at : NULL;
    c->token_given = auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0;
    c->admin = front->admin.len == 0 ||
               (c->token_given &&
                cr_admin_token_allows(&front->admin, auth + 7, strlen(auth + 7)));
    if (head->expect_continue && c->in_len < c->head_len + c->body_len) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t w = send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* a client that cannot take 25 bytes sends the body anyway */
    }
}

static void conn_queue(struct cr_http_front *front, struct conn *c) {
    c->state = CONN_RUNNING;
    conn_watch(front, c, 0); /* nothing more is read until it is answered */
    pthread_mutex_lock(&front->lock);
    c->next_job = NULL;
    if (front->jobs_tail != NULL)
        front->jobs_tail->next_job = c;
    else
        front->jobs_head = c;
    front->jobs_tail = c;
    pthread_cond_signal(&front->job_ready);
    pthread_mutex_unlock(&front->lock);
}

static void conn_write(struct cr_http_front *front, struct conn *c);

/* Looks at what has been read: a complete request is queued for a worker;
 * a malformed one answered and the connection closed after. */
static void conn_parse(struct cr_http_front *front, struct conn *c) {
    if (c->head_len == 0) {
        int status = cr_http_head_parse(&c->head, c->in, c->in_len, front->limits.body_max);
        if (status == CR_HTTP_HEAD_INCOMPLETE) return; /* http_parser bounds the head */
        if (status != CR_HTTP_HEAD_COMPLETE) {
            answer_error(c, status,
                         status == 413   ? "body too large"
                         : status == 431 ? "request head too large"
                                         : "bad request",
                         c->head.why);
            conn_write(front, c);
            return;
        }
        c->deadline_ms = now_ms() + front->limits.request_timeout_ms;
        request_from_head(front, c);
    }
    if (c->in_len < c->head_len + c->body_len) return;
    /* The body, NUL-terminated in place (in_cap keeps a byte spare); the
     * byte it covers, the start of a pipelined request, is put back after
     * the answer. */
    const struct cr_http_head *head = &c->head;
    c->saved = c->in[c->head_len + c->body_len];
    c->in[c->head_len + c->body_len] = '\0';
    c->req = (struct cr_http_request){
        .method = head->method,
        .path = c->in + head->path,
        .query = head->query != 0 ? c->in + head->query : NULL,
        .content_type = head->content_type_at != 0 ? c->in + head->content_type_at : NULL,
        .host = head->host_at != 0 ? c->in + head->host_at : NULL,
        .origin = head->origin_at != 0 ? c->in + head->origin_at : NULL,
        .body = c->in + c->head_len,
        .body_len = c->body_len,
        .admin = c->admin};
    c->read_ns = cr_monotonic_ns();
    conn_queue(front, c);
}

static void conn_read(struct cr_http_front *front, struct conn *c) {
    for (;;) {
        size_t want = c->head_len > 0 ? c->head_len + c->body_len + 1 : CR_HTTP_HEAD_MAX + 2;
        if (want < c->in_len + 4096) want = c->in_len + 4096;
        if (c->in_cap < want) {
            /* The head is known by offsets (request_head.h): c->in may move
             * (a body read in several parts grows it after the head). */
            char *bigger = realloc(c->in, want);
            if (bigger == NULL) {
                conn_close(front, c);
                return;
            }
            c->in = bigger;
            c->in_cap = want;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            c->last_ms = now_ms();
            /* Bounded: a head is looked at once CR_HTTP_HEAD_MAX bytes are in. */
            if (c->head_len == 0 ? c->in_len <= CR_HTTP_HEAD_MAX + 1
                                 : c->in_len < c->head_len + c->body_len)
                continue;
            break;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0 && errno == EINTR) continue;
        conn_close(front, c); /* EOF or error */
        return;
    }
    if (c->deadline_ms == 0 || c->head_len == 0)
        c->deadline_ms = now_ms() + front->limits.request_timeout_ms;
    conn_parse(front, c);
}

/* Writes what is left of the answer; then the next request, or close. */
static void conn_write(struct cr_http_front *front, struct conn *c) {
    c->state = CONN_WRITING;
    size_t total = c->out_head_len + c->out_body_len;
    while (c->out_off < total) {
        struct iovec iov[2];
        int parts = 0;
        if (c->out_off < c->out_head_len)
            iov[parts++] = (struct iovec){c->out_head + c->out_off, c->out_head_len - c->out_off};
        size_t body_off = c->out_off > c->out_head_len ? c->out_off - c->out_head_len : 0;
        if (body_off < c->out_body_len)
            iov[parts++] = (struct iovec){c->out_body + body_off, c->out_body_len - body_off};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)parts};
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->deadline_ms = now_ms() + front->limits.request_timeout_ms;
            conn_watch(front, c, EPOLLOUT);
            return;
        }
        conn_close(front, c);
        return;
    }
    if (!c->keep_alive) {
        conn_close(front, c);
        return;
    }
    free(c->out_body);
    c->out_body = NULL;
    c->out_head_len = c->out_body_len = c->out_off = 0;
    size_t used = c->head_len + c->body_len;
    c->in[used] = c->saved;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    c->last_ms = now_ms();
    conn_wait_request(front, c);
    if (c->in_len > 0) conn_parse(front, c); /* pipelined */
}

/* A request finished by a worker: its answer goes out. */
static void take_done(struct cr_http_front *front) {
    uint64_t count;
    ssize_t r = read(front->wake_fd, &count, sizeof(count));
    (void)r;
    pthread_mutex_lock(&front->lock);
    struct conn *c = front->done_head;
    front->done_head = NULL;
    pthread_mutex_unlock(&front->lock);
    while (c != NULL) {
        struct conn *next = c->next_job;
        if (c->gone)
            conn_close(front, c);
        else
            conn_write(front, c);
        c = next;
    }
}

/* Makes room for one more connection: the one idle the longest goes (a
 * connection waiting for its answer is never dropped).  False if none. */
static bool drop_oldest_idle(struct cr_http_front *front) {
    struct conn *oldest = NULL;
    for (unsigned i = 0; i < front->conn_count; i++) {
        struct conn *c = front->conns[i];
        if (c->state == CONN_READING && c->in_len == 0 &&
            (oldest == NULL || c->last_ms < oldest->last_ms))
            oldest = c;
    }
    if (oldest == NULL) return false;
    conn_close(front, oldest);
    return true;
}

static void accept_all(struct cr_http_front *front) {
    for (;;) {
        int fd = accept4(front->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                CR_WARN("http", "accept: %s", strerror(errno)); /* EMFILE: retried next tick */
            return;
        }
        if (front->conn_count == front->limits.connections_max && !drop_oldest_idle(front)) {
            close(fd); /* every connection is mid-request: the client retries */
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (c == NULL || epoll_ctl(front->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            continue;
        }
        int one = 1; /* headers and body leave in one write; still, no Nagle delay */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        cr_http_head_init(&c->head);
        c->last_ms = now_ms();
        c->deadline_ms = c->last_ms + front->limits.idle_timeout_ms;
        front->conns[front->conn_count++] = c;
    }
}

static void expire(struct cr_http_front *front) {
    uint64_t now = now_ms();
    for (unsigned i = 0; i < front->conn_count;) {
        struct conn *c = front->conns[i];
        if (c->state != CONN_RUNNING && now >= c->deadline_ms) {
            conn_close(front, c); /* moves the last one into slot i */
            continue;
        }
        i++;
    }
}

static void on_event(struct cr_http_front *front, struct conn *c, uint32_t events) {
    if (c->state == CONN_RUNNING) {
        /* Hung up while a worker runs it: forget the socket now (an
         * unwatched hang-up would be reported again and again), free the
         * connection when the worker is done. */
        if (events & (EPOLLHUP | EPOLLERR)) {
            epoll_ctl(front->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
            c->gone = true;
        }
        return;
    }
    if (c->state == CONN_WRITING) {
        if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) conn_write(front, c);
        return;
    }
    conn_read(front, c);
}

static void *io_main(void *arg) {
    struct cr_http_front *front = arg;
    struct epoll_event events[64];
    uint64_t next_tick = now_ms() + TICK_MS;
    while (!atomic_load(&front->stopping)) {
        int n = epoll_wait(front->epoll_fd, events, 64, TICK_MS);
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &front->listen_fd)
                accept_all(front);
            else if (p == &front->wake_fd)
                take_done(front);
            else
                on_event(front, p, events[i].events);
        }
        if (now_ms() >= next_tick) {
            expire(front);
            next_tick = now_ms() + TICK_MS;
        }
    }
    return NULL;
}

/* ---- start and stop ---- */

void cr_http_front_limits_default(struct cr_http_front_limits *out) {
    *out = (struct cr_http_front_limits){.workers = 16,
                                         .connections_max = 4096,
                                         .request_timeout_ms = 30000,
                                         .idle_timeout_ms = 60000,
                                         .body_max = CR_HTTP_BODY_MAX};
}

/* Binds HOST:PORT (or [V6]:PORT, or PORT on every address). */
static int listen_on(const char *address, char *error, size_t error_size) {
    char host[256] = "", port[16];
    const char *colon = strrchr(address, ':');
    if (colon == NULL) {
        snprintf(port, sizeof(port), "%s", address);
    } else {
        size_t hl = (size_t)(colon - address);
        if (hl >= 2 && address[0] == '[' && address[hl - 1] == ']') address++, hl -= 2;
        if (hl >= sizeof(host) || strlen(colon + 1) >= sizeof(port)) {
            snprintf(error, error_size, "cannot serve HTTP on %s: not HOST:PORT", address);
            return -1;
        }
        memcpy(host, address, hl);
        host[hl] = '\0';
        snprintf(port, sizeof(port), "%s", colon + 1);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        snprintf(error, error_size, "cannot serve HTTP on %s: %s", address, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(error, error_size, "cannot serve HTTP on %s: cannot bind: %s", address,
                 strerror(errno));
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

int cr_http_front_start(struct cr_http_front *front, const char *address,
                        const struct cr_http_front_limits *limits, char *error,
                        size_t error_size) {
    assert(front != NULL && !front->started && limits != NULL);
    assert(limits->workers >= 1 && limits->workers <= WORKERS_MAX && limits->connections_max >= 1);
    front->limits = *limits;
    free(front->conns); /* a start that failed to bind may be tried again */
    front->conns = calloc(limits->connections_max, sizeof(*front->conns));
    front->listen_fd = front->conns != NULL ? listen_on(address, error, error_size) : -1;
    if (front->listen_fd < 0) {
        if (front->conns == NULL) snprintf(error, error_size, "out of memory");
        return CR_ERR_IO;
    }
    front->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    front->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &front->listen_fd};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &front->wake_fd};
    if (front->epoll_fd < 0 || front->wake_fd < 0 ||
        epoll_ctl(front->epoll_fd, EPOLL_CTL_ADD, front->listen_fd, &lev) != 0 ||
        epoll_ctl(front->epoll_fd, EPOLL_CTL_ADD, front->wake_fd, &wev) != 0) {
        snprintf(error, error_size, "cannot serve HTTP on %s: epoll: %s", address,
                 strerror(errno));
        return CR_ERR_IO;
    }
    pthread_mutex_init(&front->lock, NULL);
    pthread_cond_init(&front->job_ready, NULL);
    front->started = true;
    for (unsigned i = 0; i < limits->workers; i++) {
        if (pthread_create(&front->workers[i], NULL, worker_main, front) != 0) break;
        pthread_setname_np(front->workers[i], "http-worker");
        front->worker_count++;
    }
    bool io = front->worker_count == limits->workers &&
              pthread_create(&front->io_thread, NULL, io_main, front) == 0;
    if (!io) {
        snprintf(error, error_size, "cannot serve HTTP on %s: cannot start threads", address);
        return CR_ERR_IO;
    }
    pthread_setname_np(front->io_thread, "http-io");
    front->io_started = true;
    return CR_OK;
}

void cr_http_front_destroy(struct cr_http_front *front) {
    if (front == NULL) return;
    if (front->started) {
        /* Workers finish what they run and stop; then the event thread. */
        pthread_mutex_lock(&front->lock);
        atomic_store(&front->stopping, true);
        pthread_cond_broadcast(&front->job_ready);
        pthread_mutex_unlock(&front->lock);
        for (unsigned i = 0; i < front->worker_count; i++) pthread_join(front->workers[i], NULL);
        if (front->io_started) pthread_join(front->io_thread, NULL);
        while (front->conn_count > 0) conn_close(front, front->conns[0]);
        pthread_cond_destroy(&front->job_ready);
        pthread_mutex_destroy(&front->lock);
    }
    if (front->listen_fd >= 0) close(front->listen_fd);
    if (front->epoll_fd >= 0) close(front->epoll_fd);
    if (front->wake_fd >= 0) close(front->wake_fd);
    free(front->conns);
    free(front);
}

void cr_http_front_accept_any_body(struct cr_http_front *front) {
    assert(front != NULL);
    front->any_body_type = true;
}
