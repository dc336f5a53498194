/* Replication on the journal's thread (docs/durability.md, "Replication";
 * the stream's frames: repl_wire.h).
 *
 * A leader (--replication-address) accepts standbys.  A standby's HELLO
 * names the last record it has; the leader sends what it lacks from its own
 * state directory (its newest snapshot first when the standby is empty and
 * the logs no longer start at 1), then streams each block of records as
 * journal_write hands it to the file.  Standbys ACK what their own log
 * holds; under --replication sync segments answers a call only once its
 * record was acknowledged (journal_release).
 *
 * A standby (--standby-of, or told to follow through role.h) connects, says
 * HELLO, writes every record it is sent to its own log (so it survives
 * kill -9 too) and hands the same block to segments, which applies it to
 * the store as it comes: a promotion only switches who makes records.
 *
 * Sockets are non-blocking, served from the journal's wait and poll hooks
 * (epoll); what a standby cannot take yet waits in its out buffer, up to
 * REPL_OUT_MAX (then it is dropped and catches up from the log when it
 * reconnects). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "durable/files.h"
#include "durable/journal_internal.h"
#include "durable/repl_wire.h"
#include "msgs/durable_msgs.h"
#include "runtime/stats_extra.h"

#define REPL_TAG_WAKE 0u
#define REPL_TAG_LISTEN 1u
#define REPL_TAG_UP 2u
#define REPL_TAG_PEER 16u
#define REPL_TICK_NS 100000000ull           /* reconnect and lag gauges */
#define REPL_OUT_MAX (256ull << 20)         /* a standby further behind is dropped */
#define REPL_CHUNK (1u << 20)               /* catch-up frames */
#define REPL_EVENTS 32

static uint64_t now_ns(struct journal_state *st) {
    return cr_runtime_now_ns(cr_actor_runtime(st->self));
}

/* ---- sockets ------------------------------------------------------------- */

static int split_host_port(const char *addr, char *host, size_t host_size, char *port,
                           size_t port_size) {
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || colon[1] == '\0' ||
        (size_t)(colon - addr) >= host_size || strlen(colon + 1) >= port_size)
        return CR_ERR_INVALID_PARAMS;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    snprintf(port, port_size, "%s", colon + 1);
    return CR_OK;
}

/* A non-blocking socket bound (listen) or connecting to addr. */
static int open_socket(const char *addr, bool listen_on, int *fd_out, bool *in_progress,
                       char *err, size_t err_len) {
    char host[256], port[16];
    if (split_host_port(addr, host, sizeof(host), port, sizeof(port)) != CR_OK) {
        snprintf(err, err_len, "'%s' is not HOST:PORT", addr);
        return CR_ERR_INVALID_PARAMS;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = listen_on ? AI_PASSIVE : 0};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(err, err_len, "%s: %s", addr, gai_strerror(g));
        return CR_ERR_IO;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = CR_OK;
    if (fd < 0) {
        snprintf(err, err_len, "%s: socket: %s", addr, strerror(errno));
        rc = CR_ERR_IO;
    } else if (listen_on) {
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
            snprintf(err, err_len, "%s: cannot listen: %s", addr, strerror(errno));
            rc = CR_ERR_IO;
        }
    } else {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        *in_progress = false;
        if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
            if (errno == EINPROGRESS) {
                *in_progress = true;
            } else {
                snprintf(err, err_len, "%s: connect: %s", addr, strerror(errno));
                rc = CR_ERR_IO;
            }
        }
    }
    freeaddrinfo(res);
    if (rc != CR_OK && fd >= 0) close(fd);
    if (rc == CR_OK) *fd_out = fd;
    return rc;
}

static struct repl_peer *peer_new(int fd, bool up, const char *name) {
    struct repl_peer *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    p->fd = fd;
    p->up = up;
    cr_buf_init(&p->out);
    snprintf(p->name, sizeof(p->name), "%s", name);
    return p;
}

static uint64_t peer_tag(struct journal_state *st, const struct repl_peer *p) {
    if (p->up) return REPL_TAG_UP;
    for (uint32_t i = 0; i < REPL_PEERS_MAX; i++)
        if (st->repl.peers[i] == p) return REPL_TAG_PEER + i;
    return UINT64_MAX;
}

static void peer_watch(struct journal_state *st, struct repl_peer *p, bool out) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0u),
                             .data.u64 = peer_tag(st, p)};
    if (epoll_ctl(st->repl.epfd, EPOLL_CTL_MOD, p->fd, &ev) != 0 &&
        epoll_ctl(st->repl.epfd, EPOLL_CTL_ADD, p->fd, &ev) != 0)
        CR_ERROR("journal", "replication: epoll_ctl on %s: %s", p->name, strerror(errno));
    p->watch_out = out;
}

static void peer_close(struct journal_state *st, struct repl_peer *p, const char *why) {
    if (p == NULL) return;
    CR_INFO("journal", "replication: %s %s closed: %s", p->up ? "leader" : "standby", p->name,
            why);
    (void)epoll_ctl(st->repl.epfd, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    if (p->up) {
        st->repl.up = NULL;
        cr_role_note_lag(st->repl.leader_lsn > st->pending_lsn
                             ? st->repl.leader_lsn - st->pending_lsn : 0, 0, false);
    }
    for (uint32_t i = 0; i < REPL_PEERS_MAX; i++)
        if (st->repl.peers[i] == p) st->repl.peers[i] = NULL;
    cr_buf_free(&p->out);
    free(p->in);
    free(p);
}

/* Sends what the socket takes now; watches EPOLLOUT for the rest.  False
 * when the peer was closed. */
static bool peer_flush(struct journal_state *st, struct repl_peer *p) {
    if (!cr_buf_ok(&p->out)) {
        peer_close(st, p, "out of memory for its stream");
        return false;
    }
    while (p->out_off < p->out.len) {
        ssize_t w = send(p->fd, p->out.data + p->out_off, p->out.len - p->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w < 0) {
            peer_close(st, p, strerror(errno));
            return false;
        }
        p->out_off += (size_t)w;
        st->repl.bytes_sent += (uint64_t)w;
    }
    if (p->out_off == p->out.len) {
        p->out.len = p->out_off = 0;
        if (p->closing) {
            peer_close(st, p, "refused");
            return false;
        }
    } else if (p->out_off > (1u << 20) && p->out_off * 2 > p->out.len) {
        memmove(p->out.data, p->out.data + p->out_off, p->out.len - p->out_off);
        p->out.len -= p->out_off;
        p->out_off = 0;
    }
    bool want = p->out_off < p->out.len;
    if (want != p->watch_out) peer_watch(st, p, want);
    return true;
}

/* Tells the other side why and closes once that is sent.  Returns false
 * (the peer is done with). */
static bool peer_refuse(struct journal_state *st, struct repl_peer *p, const char *why) {
    CR_WARN("journal", "replication: refusing %s %s: %s", p->up ? "leader" : "standby", p->name,
            why);
    (void)cr_repl_put_refuse(&p->out, why);
    p->closing = true;
    (void)peer_flush(st, p);
    return false;
}

/* ---- the leader's side ----------------------------------------------------- */

static uint64_t record_lsn(const uint8_t *frame) {
    const uint8_t *b = frame + CR_DURABLE_FRAME_HEADER + 1;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* Sends the records of one file's frames [off, len) with lsn in [from, to]
 * in frames of at most REPL_CHUNK bytes of `kind` (a snapshot's last chunk
 * SNAP_END).  Returns false on a damaged file (err set). */
static bool send_frames(struct journal_state *st, struct repl_peer *p, const uint8_t *data,
                        size_t off, size_t len, uint64_t from, uint64_t to, bool snapshot,
                        char *err, size_t err_len) {
    size_t chunk_start = SIZE_MAX, chunk_end = 0;
    while (off < len) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        enum cr_durable_frame_status fs =
            cr_durable_frame_next(data + off, len - off, &body, &body_len, &frame_len);
        if (fs != CR_DURABLE_FRAME_OK) {
            snprintf(err, err_len, "byte %zu: %s", off, cr_durable_frame_status_text(fs));
            return false;
        }
        uint64_t lsn = record_lsn(data + off);
        bool take = snapshot || (lsn >= from && lsn <= to);
        if (!snapshot && lsn > to) break;
        if (take) {
            if (chunk_start == SIZE_MAX) chunk_start = off;
            if (off + frame_len - chunk_start > REPL_CHUNK) {
                (void)cr_repl_put_records(&p->out, snapshot ? CR_REPL_SNAP_PART : CR_REPL_RECORDS,
                                          st->repl.term, st->written_lsn, data + chunk_start,
                                          chunk_end - chunk_start);
                chunk_start = off;
            }
            chunk_end = off + frame_len;
        }
        off += frame_len;
    }
    if (chunk_start != SIZE_MAX)
        (void)cr_repl_put_records(&p->out, snapshot ? CR_REPL_SNAP_END : CR_REPL_RECORDS,
                                  st->repl.term, st->written_lsn, data + chunk_start,
                                  chunk_end - chunk_start);
    return true;
}

/* The catch-up of a standby whose last record is `lsn`: from the newest
 * snapshot when it is empty and the logs do not reach back far enough, then
 * the logs.  Returns false with err when it cannot be caught up. */
static bool catch_up(struct journal_state *st, struct repl_peer *p, uint64_t lsn, char *err,
                     size_t err_len, bool *too_old) {
    char **logs = NULL, **snaps = NULL;
    uint32_t nlogs = 0, nsnaps = 0;
    bool ok = cr_durable_list(st->dir, false, &logs, &nlogs, err, err_len) == CR_OK;
    uint64_t from = lsn + 1;
    uint64_t oldest = nlogs > 0 ? cr_durable_name_lsn(logs[0]) : UINT64_MAX;
    char path[CR_DURABLE_PATH_MAX + 64];
    if (ok && from <= st->written_lsn && oldest > from) {
        ok = lsn == 0 && cr_durable_list(st->dir, true, &snaps, &nsnaps, err, err_len) == CR_OK &&
             nsnaps > 0;
        *too_old = !ok && lsn != 0;
        if (!ok && lsn != 0)
            snprintf(err, err_len, "its last record %" PRIu64 " is older than this leader's "
                     "oldest log (from %" PRIu64 "): start it with an empty --state-dir to be "
                     "sent a snapshot", lsn, oldest);
        else if (!ok && nsnaps == 0)
            snprintf(err, err_len, "no snapshot and no log from lsn 1 in %.200s", st->dir);
        if (ok) {
            snprintf(path, sizeof(path), "%s/%s", st->dir, snaps[nsnaps - 1]);
            uint8_t *data = NULL;
            size_t len = 0;
            ok = cr_durable_read_file(path, &data, &len, err, err_len) == CR_OK;
            uint64_t snap_lsn = cr_durable_name_lsn(snaps[nsnaps - 1]);
            if (ok && len < CR_DURABLE_SNAPSHOT_HEADER) {
                snprintf(err, err_len, "%.300s is truncated", path);
                ok = false;
            }
            if (ok) {
                (void)cr_repl_put_snap_begin(&p->out, st->repl.term, snap_lsn);
                ok = send_frames(st, p, data, CR_DURABLE_SNAPSHOT_HEADER, len, 0, 0, true, err,
                                 err_len);
                st->repl.snapshots_sent += ok;
                from = snap_lsn + 1;
            }
            free(data);
        }
    }
    for (uint32_t i = 0; ok && i < nlogs && from <= st->written_lsn; i++) {
        if (i + 1 < nlogs && cr_durable_name_lsn(logs[i + 1]) <= from) continue; /* all older */
        snprintf(path, sizeof(path), "%s/%s", st->dir, logs[i]);
        uint8_t *data = NULL;
        size_t len = 0;
        ok = cr_durable_read_file(path, &data, &len, err, err_len) == CR_OK;
        if (ok && len >= CR_DURABLE_LOG_HEADER)
            ok = send_frames(st, p, data, CR_DURABLE_LOG_HEADER, len, from, st->written_lsn,
                             false, err, err_len);
        free(data);
    }
    cr_durable_names_free(logs, nlogs);
    cr_durable_names_free(snaps, nsnaps);
    return ok;
}

/* Tells a standby to drop its state and say HELLO from lsn 0 (it then gets
 * this leader's snapshot or whole log).  Returns false (closes next). */
static bool peer_resync(struct journal_state *st, struct repl_peer *p, uint64_t agree,
                        const char *why) {
    CR_WARN("journal", "replication: standby %s starts over: %s", p->name, why);
    (void)cr_repl_put_resync(&p->out, st->repl.term, agree, why);
    st->repl.resyncs_asked++;
    p->closing = true;
    (void)peer_flush(st, p);
    return false;
}

/* Returns false when the peer is refused (maybe closed already). */
static bool on_hello(struct journal_state *st, struct repl_peer *p,
                     const struct cr_repl_frame *f) {
    uint64_t lsn = f->lsn, term = f->term;
    char why[512];
    if (!st->repl.leading || !cr_role_accepts_writes()) {
        cr_role_refusal(why, sizeof(why));
        st->repl.refused_hellos++;
        return peer_refuse(st, p, why);
    }
    if (term > st->repl.term) {
        /* A standby has seen a newer leader: this one is stale and stops
         * taking writes (role.h). */
        (void)cr_role_see_term(term);
        (void)repl_terms_see(st, term);
        snprintf(why, sizeof(why), "this leader's term %" PRIu64 " is older than term %" PRIu64
                 " the standby has seen: it stops taking writes", st->repl.term, term);
        CR_ERROR("journal", "replication: %s", why);
        st->repl.refused_hellos++;
        return peer_refuse(st, p, why);
    }
    journal_write(st); /* the file holds every record handed over so far */
    uint64_t agree = repl_terms_agree(st, &f->history, f->has_history, lsn);
    if (agree < lsn && f->has_history) {
        /* Records past `agree` are not this leader's (a former leader's
         * tail that was never replicated, or another leader's): dropped. */
        snprintf(why, sizeof(why), "its log holds records %" PRIu64 "..%" PRIu64 " this "
                 "leader (term %" PRIu64 ", last lsn %" PRIu64 ") does not have from the same "
                 "leader; they are dropped", agree + 1, lsn, st->repl.term, st->written_lsn);
        return peer_resync(st, p, agree, why);
    }
    if (lsn > st->written_lsn) {
        snprintf(why, sizeof(why), "the standby's last record %" PRIu64 " is ahead of this "
                 "leader's %" PRIu64 ": it holds records never replicated; move its "
                 "--state-dir away to follow", lsn, st->written_lsn);
        st->repl.refused_hellos++;
        return peer_refuse(st, p, why);
    }
    if (st->repl.terms_on) (void)cr_repl_put_terms(&p->out, st->repl.term, &st->repl.terms);
    char err[512];
    bool too_old = false;
    if (!catch_up(st, p, lsn, err, sizeof(err), &too_old)) {
        p->out.len = p->out_off = 0;
        snprintf(why, sizeof(why), "cannot catch it up: %.400s", err);
        if (too_old && f->has_history) return peer_resync(st, p, 0, why);
        st->repl.refused_hellos++;
        return peer_refuse(st, p, why);
    }
    /* A heartbeat saying where the leader is, even with nothing to send. */
    (void)cr_repl_put_records(&p->out, CR_REPL_RECORDS, st->repl.term, st->written_lsn, NULL, 0);
    p->hello = true;
    p->acked = lsn;
    p->catchup_len = p->out.len - p->out_off;
    st->repl.catchups++;
    CR_INFO("journal", "replication: standby %s from lsn %" PRIu64 " (this leader at %" PRIu64
            ", term %" PRIu64 ")", p->name, lsn, st->written_lsn, st->repl.term);
    return peer_flush(st, p);
}

static void on_ack(struct journal_state *st, struct repl_peer *p, uint64_t lsn) {
    if (!p->hello || lsn <= p->acked) return;
    p->acked = lsn;
    uint64_t now = now_ns(st);
    while (p->inflight_count > 0 && p->inflight_lsn[p->inflight_head] <= lsn) {
        uint64_t lag = now - p->inflight_ns[p->inflight_head];
        cr_histogram_observe(&st->repl.lag_hist, lag);
        if (lag > st->repl.lag_max_ns) st->repl.lag_max_ns = lag;
        p->inflight_head = (p->inflight_head + 1) % REPL_INFLIGHT;
        p->inflight_count--;
    }
    if (lsn > st->repl.acked_lsn) st->repl.acked_lsn = lsn;
}

void repl_stream(struct journal_state *st, uint8_t *const *blocks, const size_t *lens,
                 uint32_t count, uint64_t last_lsn) {
    uint64_t now = 0;
    for (uint32_t i = 0; i < REPL_PEERS_MAX; i++) {
        struct repl_peer *p = st->repl.peers[i];
        if (p == NULL || !p->hello) continue;
        for (uint32_t b = 0; b < count; b++)
            (void)cr_repl_put_records(&p->out, CR_REPL_RECORDS, st->repl.term, last_lsn,
                                      blocks[b], lens[b]);
        st->repl.frames_sent += count;
        if (p->inflight_count < REPL_INFLIGHT) {
            if (now == 0) now = now_ns(st);
            uint32_t at = (p->inflight_head + p->inflight_count) % REPL_INFLIGHT;
            p->inflight_lsn[at] = last_lsn;
            p->inflight_ns[at] = now;
            p->inflight_count++;
        }
        if (p->out.len - p->out_off > REPL_OUT_MAX + p->catchup_len) {
            peer_close(st, p, "more than 256 MiB behind: it reconnects and catches up from "
                              "the log");
            continue;
        }
        (void)peer_flush(st, p);
    }
}

static void on_accept(struct journal_state *st) {
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof(sa);
        int fd = accept4(st->repl.listen_fd, (struct sockaddr *)&sa, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                CR_WARN("journal", "replication: accept: %s", strerror(errno));
            return;
        }
        char host[128] = "?", port[16] = "?", name[64];
        (void)getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), port, sizeof(port),
                          NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(name, sizeof(name), "%.40s:%s", host, port);
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        uint32_t slot = REPL_PEERS_MAX;
        for (uint32_t i = 0; i < REPL_PEERS_MAX && slot == REPL_PEERS_MAX; i++)
            if (st->repl.peers[i] == NULL) slot = i;
        struct repl_peer *p = slot < REPL_PEERS_MAX ? peer_new(fd, false, name) : NULL;
        if (p == NULL) {
            CR_WARN("journal", "replication: standby %s refused: %u standbys at most", name,
                    REPL_PEERS_MAX);
            close(fd);
            continue;
        }
        st->repl.peers[slot] = p;
        st->repl.accepts++;
        peer_watch(st, p, false);
    }
}

/* ---- the standby's side ---------------------------------------------------- */

static void standby_connect(struct journal_state *st) {
    /* Not before crescentd wired its actors: records go to segments. */
    if (st->repl.up != NULL || st->repl.leading || st->repl.leader[0] == '\0' ||
        st->peers == NULL)
        return;
    if (st->repl.retry_at_ns != 0 && now_ns(st) < st->repl.retry_at_ns) return;
    st->repl.retry_at_ns = 0;
    char err[512];
    int fd;
    bool in_progress = false;
    if (open_socket(st->repl.leader, false, &fd, &in_progress, err, sizeof(err)) != CR_OK) {
        CR_DEBUG("journal", "replication: cannot reach the leader: %s", err);
        return;
    }
    struct repl_peer *p = peer_new(fd, true, st->repl.leader);
    if (p == NULL) {
        close(fd);
        return;
    }
    st->repl.up = p;
    st->repl.reconnects++;
    st->repl.leader_terms_on = false; /* until this leader's TERMS */
    p->connecting = in_progress;
    if (st->repl.terms_on)
        (void)cr_repl_put_hello_terms(&p->out, st->pending_lsn, cr_role_see_term(0),
                                      &st->repl.terms);
    else
        (void)cr_repl_put_hello(&p->out, st->pending_lsn, cr_role_see_term(0));
    peer_watch(st, p, true);
}

/* A copy of block[0..len) to segments, to apply.  False when it could not
 * be handed over (no memory, segments stopping or its ring full past the
 * send wait): the caller then takes nothing of the frame and drops the
 * link, so the log never holds a record the store lacks; the catch-up
 * after the reconnect sends it again. */
static bool send_apply(struct journal_state *st, const uint8_t *block, size_t len,
                       uint64_t last_lsn) {
    uint8_t *copy = malloc(len);
    struct cr_msg msg = {.type = CR_MSG_REPL_APPLY};
    struct cr_msg_durable_append *a = CR_MSG_BODY(&msg, struct cr_msg_durable_append);
    *a = (struct cr_msg_durable_append){.block = copy, .len = len, .last_lsn = last_lsn};
    if (copy != NULL) memcpy(copy, block, len);
    if (copy == NULL || st->peers == NULL ||
        cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        free(copy);
        st->repl.apply_dropped++;
        CR_WARN("journal", "replication: records up to lsn %" PRIu64 " could not be handed to "
                "the store (no memory, or segments busy or stopping): the link is dropped and "
                "they are sent again", last_lsn);
        return false;
    }
    return true;
}

static bool term_ok(struct journal_state *st, struct repl_peer *p, uint64_t term) {
    uint64_t seen = cr_role_see_term(0);
    if (term < seen) {
        st->repl.stale_refused++;
        char why[256];
        snprintf(why, sizeof(why), "records of term %" PRIu64 " refused: term %" PRIu64
                 " was seen (a stale leader)", term, seen);
        peer_close(st, p, why);
        return false;
    }
    (void)cr_role_see_term(term);
    if (!repl_terms_see(st, term)) {
        peer_close(st, p, "the term cannot be kept in the state directory");
        return false;
    }
    st->repl.term = term;
    return true;
}

static void snap_drop(struct journal_state *st) {
    if (st->repl.snap_fd >= 0) close(st->repl.snap_fd);
    st->repl.snap_fd = -1;
    st->repl.snap_on = false;
}

/* The leader's snapshot, for a standby that starts empty: written to
 * snapshot-LSN.tmp, synced and renamed at its end; only then does the log
 * go on at LSN + 1 (a crash before leaves an empty standby again). */
static bool on_snapshot(struct journal_state *st, struct repl_peer *p,
                        const struct cr_repl_frame *f) {
    char path[CR_DURABLE_PATH_MAX], err[512];
    if (f->kind == CR_REPL_SNAP_BEGIN) {
        if (st->pending_lsn != 0) {
            peer_close(st, p, "the leader sent a snapshot to a standby that has records");
            return false;
        }
        snap_drop(st);
        st->repl.snap_lsn = f->lsn;
        cr_durable_snapshot_path(st->dir, f->lsn, true, path, sizeof(path));
        st->repl.snap_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
        cr_durable_snapshot_header(f->lsn, header);
        st->repl.snap_on = st->repl.snap_fd >= 0 &&
                           write(st->repl.snap_fd, header, sizeof(header)) == sizeof(header);
        if (!st->repl.snap_on) {
            CR_ERROR("journal", "replication: cannot write %s: %s", path, strerror(errno));
            snap_drop(st);
            peer_close(st, p, "the snapshot cannot be written here");
            return false;
        }
        return true;
    }
    if (!st->repl.snap_on) {
        peer_close(st, p, "snapshot records without its beginning");
        return false;
    }
    size_t off = 0;
    while (off < f->records_len) {
        ssize_t w = write(st->repl.snap_fd, f->records + off, f->records_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            CR_ERROR("journal", "replication: writing the snapshot: %s", strerror(errno));
            snap_drop(st);
            peer_close(st, p, "the snapshot cannot be written here");
            return false;
        }
        off += (size_t)w;
    }
    if (f->records_len > 0 && !send_apply(st, f->records, f->records_len, st->repl.snap_lsn)) {
        snap_drop(st); /* the .tmp is removed at the next start; the store is not whole */
        peer_close(st, p, "the snapshot could not be handed to the store");
        return false;
    }
    if (f->kind == CR_REPL_SNAP_PART) return true;
    /* The end: the file, its name, the directory; then the log at lsn + 1. */
    char tmp[CR_DURABLE_PATH_MAX], log_path[CR_DURABLE_PATH_MAX];
    uint64_t lsn = st->repl.snap_lsn;
    cr_durable_snapshot_path(st->dir, lsn, true, tmp, sizeof(tmp));
    cr_durable_snapshot_path(st->dir, lsn, false, path, sizeof(path));
    int fd = -1;
    bool ok = fdatasync(st->repl.snap_fd) == 0 && rename(tmp, path) == 0 &&
              cr_durable_sync_dir(st->dir, err, sizeof(err)) == CR_OK &&
              cr_durable_log_create(st->dir, lsn + 1, log_path, sizeof(log_path), &fd, err,
                                    sizeof(err)) == CR_OK;
    snap_drop(st);
    if (!ok) {
        CR_ERROR("journal", "replication: the leader's snapshot %s could not be kept: %s", path,
                 errno != 0 ? strerror(errno) : err);
        peer_close(st, p, "the snapshot cannot be kept here");
        return false;
    }
    close(st->fd);
    st->fd = fd;
    snprintf(st->path, sizeof(st->path), "%s", log_path);
    st->written_lsn = st->synced_lsn = st->pending_lsn = lsn;
    /* Everything up to lsn is this leader's now. */
    st->repl.terms.count = 0;
    if (!repl_terms_take(st, st->repl.term, 1, lsn)) {
        peer_close(st, p, "the term history cannot be kept here");
        return false;
    }
    (void)cr_durable_drop_redundant(st->dir, lsn, err, sizeof(err));
    st->repl.received_snap_lsn = lsn;
    st->repl.snapshots_received++;
    CR_INFO("journal", "replication: the leader's snapshot at lsn %" PRIu64 " received", lsn);
    return true;
}

static bool on_records(struct journal_state *st, struct repl_peer *p,
                       const struct cr_repl_frame *f) {
    st->repl.leader_lsn = f->lsn;
    size_t skip;
    char why[256];
    switch (cr_repl_judge(f, cr_role_see_term(0), st->pending_lsn, &skip, why, sizeof(why))) {
    case CR_REPL_HAVE_ALL: return true;
    case CR_REPL_STALE_TERM: st->repl.stale_refused++; /* fall through */
    case CR_REPL_GAP: peer_close(st, p, why); return false;
    case CR_REPL_TAKE: break;
    }
    const uint8_t *r = f->records + skip;
    size_t len = f->records_len - skip;
    if (!repl_terms_take(st, f->term, st->pending_lsn + 1, f->last_lsn)) {
        peer_close(st, p, "the term history cannot be kept here");
        return false;
    }
    uint8_t *copy = malloc(len);
    if (copy == NULL || !send_apply(st, r, len, f->last_lsn)) {
        free(copy);
        peer_close(st, p, "records not taken");
        return false;
    }
    memcpy(copy, r, len);
    journal_take(st, copy, len, f->last_lsn);
    return true;
}

/* One whole checked frame from the leader.  False when the link closed. */
static bool standby_frame(struct journal_state *st, struct repl_peer *p,
                          const struct cr_repl_frame *f) {
    switch (f->kind) {
    case CR_REPL_REFUSE:
        CR_WARN("journal", "replication: leader %s refused this standby: %s (again in 1 s)",
                p->name, f->text);
        st->repl.retry_at_ns = now_ns(st) + 1000000000ull;
        peer_close(st, p, "refused by the leader");
        return false;
    case CR_REPL_TERMS:
        if (!term_ok(st, p, f->term)) return false;
        st->repl.leader_terms = f->history;
        st->repl.leader_terms_on = true;
        return true;
    case CR_REPL_RESYNC:
        if (!term_ok(st, p, f->term)) return false;
        peer_close(st, p, "told to start over");
        (void)repl_terms_start_over(st, f->text);
        return false;
    case CR_REPL_RECORDS:
        return term_ok(st, p, f->term) && on_records(st, p, f);
    case CR_REPL_SNAP_BEGIN:
    case CR_REPL_SNAP_PART:
    case CR_REPL_SNAP_END:
        return term_ok(st, p, f->term) && on_snapshot(st, p, f);
    default:
        peer_close(st, p, "a frame a leader does not send");
        return false;
    }
}

static bool leader_frame(struct journal_state *st, struct repl_peer *p,
                         const struct cr_repl_frame *f) {
    switch (f->kind) {
    case CR_REPL_HELLO:
        if (p->hello) break;
        return on_hello(st, p, f);
    case CR_REPL_ACK: on_ack(st, p, f->lsn); return true;
    default: break;
    }
    peer_close(st, p, "a frame a standby does not send");
    return false;
}

/* Reads what the socket has and handles every whole frame.  False when the
 * peer was closed. */
static bool peer_read(struct journal_state *st, struct repl_peer *p) {
    for (;;) {
        if (p->in_cap - p->in_len < 65536) {
            size_t cap = p->in_cap < 131072 ? 131072 : p->in_cap * 2;
            if (cap > CR_REPL_BODY_MAX + 2u * CR_REPL_FRAME_HEADER + 131072) {
                peer_close(st, p, "a frame larger than the stream allows");
                return false;
            }
            uint8_t *in = realloc(p->in, cap);
            if (in == NULL) {
                peer_close(st, p, "out of memory for its input");
                return false;
            }
            p->in = in;
            p->in_cap = cap;
        }
        ssize_t r = recv(p->fd, p->in + p->in_len, p->in_cap - p->in_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r <= 0) {
            peer_close(st, p, r == 0 ? "the other side closed" : strerror(errno));
            return false;
        }
        p->in_len += (size_t)r;
        st->repl.bytes_received += (uint64_t)r;
        size_t off = 0;
        for (;;) {
            struct cr_repl_frame f;
            size_t used;
            char err[256];
            enum cr_repl_status s = cr_repl_decode(p->in + off, p->in_len - off, &f, &used, err,
                                                   sizeof(err));
            if (s == CR_REPL_NEED_MORE) break;
            if (s == CR_REPL_BAD) {
                st->repl.bad_frames++;
                peer_close(st, p, err);
                return false;
            }
            st->repl.frames_received++;
            bool alive = p->up ? standby_frame(st, p, &f) : leader_frame(st, p, &f);
            if (!alive) return false;
            off += used;
        }
        if (off > 0) {
            memmove(p->in, p->in + off, p->in_len - off);
            p->in_len -= off;
        }
    }
    return true;
}

static void peer_io(struct journal_state *st, struct repl_peer *p, uint32_t events) {
    if (p->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int e = 0;
        socklen_t el = sizeof(e);
        (void)getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e != 0) {
            CR_DEBUG("journal", "replication: connect to %s: %s", p->name, strerror(e));
            peer_close(st, p, strerror(e));
            return;
        }
        p->connecting = false;
        CR_INFO("journal", "replication: following leader %s from lsn %" PRIu64, p->name,
                st->pending_lsn);
        cr_role_note_lag(0, 0, true);
    }
    if (p->connecting) return;
    if ((events & EPOLLOUT) && !peer_flush(st, p)) return;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) (void)peer_read(st, p);
}

/* After socket input: a standby writes what it took and acknowledges it; a
 * leader may answer the calls its standbys' ACKs release. */
static void after_io(struct journal_state *st) {
    if (st->repl.leading) {
        journal_release(st);
        return;
    }
    struct repl_peer *up = st->repl.up;
    if (st->pending > 0) {
        journal_write(st);
        if (st->mode == CR_DURABILITY_SYNC) journal_sync(st);
    }
    uint64_t have = st->mode == CR_DURABILITY_SYNC ? st->synced_lsn : st->written_lsn;
    if (up != NULL && !up->connecting && have > st->repl.acked_sent) {
        (void)cr_repl_put_ack(&up->out, have);
        st->repl.acked_sent = have;
        (void)peer_flush(st, up);
    }
}

static uint32_t handle_events(struct journal_state *st, const struct epoll_event *ev, int n,
                              bool *woken) {
    uint32_t work = 0;
    for (int i = 0; i < n; i++) {
        uint64_t tag = ev[i].data.u64;
        if (tag == REPL_TAG_WAKE) {
            *woken = true;
            continue;
        }
        work++;
        if (tag == REPL_TAG_LISTEN) {
            on_accept(st);
        } else if (tag == REPL_TAG_UP) {
            if (st->repl.up != NULL) peer_io(st, st->repl.up, ev[i].events);
        } else if (tag >= REPL_TAG_PEER && tag < REPL_TAG_PEER + REPL_PEERS_MAX) {
            struct repl_peer *p = st->repl.peers[tag - REPL_TAG_PEER];
            if (p != NULL) peer_io(st, p, ev[i].events);
        }
    }
    if (work > 0) after_io(st);
    return work;
}

void repl_wait(struct journal_state *st, int wake_fd, int64_t timeout_ns) {
    if (!st->repl.on) {
        struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
        (void)poll(&pfd, 1, cr_timeout_ms(timeout_ns));
        return;
    }
    if (!st->repl.wake_added) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = REPL_TAG_WAKE};
        st->repl.wake_added = epoll_ctl(st->repl.epfd, EPOLL_CTL_ADD, wake_fd, &ev) == 0;
        if (!st->repl.wake_added) {
            struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
            (void)poll(&pfd, 1, cr_timeout_ms(timeout_ns) > 10 ? 10 : cr_timeout_ms(timeout_ns));
            return;
        }
    }
    struct epoll_event ev[REPL_EVENTS];
    int n = epoll_wait(st->repl.epfd, ev, REPL_EVENTS, cr_timeout_ms(timeout_ns));
    bool woken = false;
    if (n > 0) (void)handle_events(st, ev, n, &woken);
}

uint32_t repl_poll(struct journal_state *st) {
    if (!st->repl.on) return 0;
    struct epoll_event ev[REPL_EVENTS];
    int n = epoll_wait(st->repl.epfd, ev, REPL_EVENTS, 0);
    bool woken = false;
    return n > 0 ? handle_events(st, ev, n, &woken) : 0;
}

/* ---- the timer, role changes, set-up --------------------------------------- */

static void publish_lag(struct journal_state *st) {
    uint64_t now = now_ns(st);
    if (st->repl.leading) {
        struct cr_role_standby list[CR_ROLE_STANDBYS_MAX];
        uint32_t n = 0;
        for (uint32_t i = 0; i < REPL_PEERS_MAX && n < CR_ROLE_STANDBYS_MAX; i++) {
            const struct repl_peer *p = st->repl.peers[i];
            if (p == NULL || !p->hello) continue;
            struct cr_role_standby *s = &list[n++];
            snprintf(s->name, sizeof(s->name), "%s", p->name);
            s->acked_lsn = p->acked;
            s->lag_records = st->written_lsn > p->acked ? st->written_lsn - p->acked : 0;
            s->lag_ms = p->inflight_count > 0
                            ? (now - p->inflight_ns[p->inflight_head]) / 1000000u : 0;
        }
        cr_role_note_standby_list(list, n);
        return;
    }
    uint64_t behind = st->repl.leader_lsn > st->pending_lsn ? st->repl.leader_lsn - st->pending_lsn
                                                            : 0;
    if (behind == 0) st->repl.behind_since_ns = 0;
    else if (st->repl.behind_since_ns == 0) st->repl.behind_since_ns = now;
    uint64_t ms = behind > 0 ? (now - st->repl.behind_since_ns) / 1000000u : 0;
    cr_role_note_lag(behind, ms, st->repl.up != NULL && !st->repl.up->connecting);
}

static void arm_tick(struct journal_state *st) {
    struct cr_msg tick = {.type = CR_MSG_REPL_TICK};
    if (cr_actor_timer_after(st->self, REPL_TICK_NS, &tick, NULL) != CR_OK)
        CR_ERROR("journal", "replication: cannot arm its timer: no reconnects, no lag gauges");
}

void repl_tick(struct journal_state *st) {
    if (!st->repl.on) return;
    (void)repl_terms_see(st, cr_role_see_term(0));
    if (st->repl.storage_ticks++ % 10 == 0) repl_note_storage(st); /* once a second */
    standby_connect(st);
    publish_lag(st);
    arm_tick(st);
}

static void tell_segments(struct journal_state *st, uint64_t term, bool standby) {
    struct cr_msg msg = {.type = CR_MSG_REPL_ROLE};
    *CR_MSG_BODY(&msg, struct cr_msg_repl_role) =
        (struct cr_msg_repl_role){.term = term, .last_lsn = st->pending_lsn, .standby = standby};
    if (st->peers == NULL || cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK)
        CR_ERROR("journal", "replication: segments took no role change (stopping?)");
}

static bool ensure_epoll(struct journal_state *st) {
    if (st->repl.epfd >= 0) return true;
    st->repl.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->repl.epfd < 0) {
        CR_ERROR("journal", "replication: epoll_create1: %s", strerror(errno));
        return false;
    }
    st->repl.on = true;
    st->repl.wake_added = false;
    return true;
}

void repl_role_request(struct journal_state *st, const struct cr_role_request *req) {
    if (req->kind == CR_ROLE_REQUEST_LEAD) {
        if (st->repl.snap_on) {
            CR_ERROR("journal", "cannot lead: a snapshot from the leader is half received (the "
                     "store is not whole); wait for it to end");
            return;
        }
        if (st->repl.terms_on && req->term < st->repl.terms.highest) {
            CR_ERROR("journal", "cannot lead at term %" PRIu64 ": term %" PRIu64 " was seen "
                     "(kept in %s/%s)", req->term, st->repl.terms.highest, st->dir,
                     CR_TERMS_FILE);
            return;
        }
        if (st->repl.up != NULL) peer_close(st, st->repl.up, "promoted: this master leads now");
        st->repl.leader[0] = '\0';
        journal_write(st);
        journal_sync(st);
        /* Its records from here on are of this term, on disk before any is
         * made (a restart must not lead or follow at an older term). */
        if (!repl_terms_note(st, req->term, st->written_lsn + 1)) return;
        bool was_leading = st->repl.leading;
        st->repl.leading = true;
        st->repl.term = req->term;
        st->told_lsn = st->written_lsn;
        if (!was_leading) {
            /* segments sets the role once it makes the records (role.h). */
            tell_segments(st, req->term, false);
        } else {
            cr_role_set(CR_ROLE_LEADER, req->term, "");
            /* Its standbys tag what follows with the new term. */
            for (uint32_t i = 0; i < REPL_PEERS_MAX; i++) {
                struct repl_peer *p = st->repl.peers[i];
                if (p == NULL || !p->hello) continue;
                (void)cr_repl_put_terms(&p->out, req->term, &st->repl.terms);
                (void)peer_flush(st, p);
            }
        }
        CR_INFO("journal", "leading at term %" PRIu64 " from lsn %" PRIu64, req->term,
                st->written_lsn);
        return;
    }
    if (st->fd < 0) {
        CR_ERROR("journal", "cannot follow %s: this master keeps no log (--state-dir with "
                 "--durability async or sync)", req->addr);
        return;
    }
    if (!ensure_epoll(st)) return;
    (void)repl_terms_see(st, req->term);
    if (st->repl.leading) {
        for (uint32_t i = 0; i < REPL_PEERS_MAX; i++)
            if (st->repl.peers[i] != NULL) peer_close(st, st->repl.peers[i], "stepped down");
        st->repl.leading = false;
        tell_segments(st, req->term, true);
    }
    if (st->repl.up != NULL) peer_close(st, st->repl.up, "told to follow another leader");
    snprintf(st->repl.leader, sizeof(st->repl.leader), "%s", req->addr);
    st->repl.acked_sent = 0;
    cr_role_set(CR_ROLE_STANDBY, req->term, req->addr);
    CR_INFO("journal", "standby of %s (term %" PRIu64 ")", req->addr, req->term);
    if (!st->repl.tick_armed) {
        st->repl.tick_armed = true;
        arm_tick(st);
    }
    standby_connect(st);
}

int repl_create(struct journal_state *st, const struct cr_daemon_config *config) {
    struct repl_state *r = &st->repl;
    r->epfd = r->listen_fd = r->snap_fd = -1;
    r->sync = strcmp(config->replication, "sync") == 0;
    /* A standby by flag, or made one before crescentd's actors were created
     * (the HA election starts every master as a standby without a leader,
     * role.h): it follows once told whom. */
    struct cr_role_status before;
    cr_role_get(&before);
    bool preset_standby = before.role == CR_ROLE_STANDBY;
    r->leading = config->standby_of[0] == '\0' && !preset_standby;
    bool listen_on = config->replication_address[0] != '\0';
    if (!listen_on && r->leading) return CR_OK; /* no replication */
    if (st->fd < 0) {
        fprintf(stderr, "crescentd: replication needs --state-dir with --durability async or "
                        "sync\n");
        return CR_ERR_INVALID_PARAMS;
    }
    if (!ensure_epoll(st)) return CR_ERR_IO;
    char terr[1024];
    if (repl_terms_open(st, terr, sizeof(terr)) != CR_OK) {
        fprintf(stderr, "crescentd: --state-dir: %s\n", terr);
        return CR_ERR_IO;
    }
    if (listen_on) {
        char err[512];
        bool unused;
        if (open_socket(config->replication_address, true, &r->listen_fd, &unused, err,
                        sizeof(err)) != CR_OK) {
            fprintf(stderr, "crescentd: --replication-address: %s\n", err);
            return CR_ERR_IO;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = REPL_TAG_LISTEN};
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->listen_fd, &ev) != 0) {
            fprintf(stderr, "crescentd: --replication-address: epoll: %s\n", strerror(errno));
            return CR_ERR_IO;
        }
    }
    if (r->leading) {
        /* A leader by flags goes on at the highest term it has seen. */
        r->term = r->terms.highest;
        cr_role_set(CR_ROLE_LEADER, r->term, "");
        if (!repl_terms_note(st, r->term, st->written_lsn + 1)) return CR_ERR_IO;
    } else {
        snprintf(r->leader, sizeof(r->leader), "%s", config->standby_of);
        cr_role_set(CR_ROLE_STANDBY, before.term > r->terms.highest ? before.term
                                                                     : r->terms.highest,
                    r->leader);
    }
    return CR_OK;
}

void repl_start(struct journal_state *st) {
    if (!st->repl.on) return;
    st->repl.tick_armed = true;
    arm_tick(st);
    if (!st->repl.leading)
        CR_INFO("journal", "standby of %s from lsn %" PRIu64 "; mutating calls are refused",
                st->repl.leader[0] != '\0' ? st->repl.leader : "(a leader not named yet)",
                st->pending_lsn);
}

void repl_destroy(struct journal_state *st) {
    struct repl_state *r = &st->repl;
    for (uint32_t i = 0; i < REPL_PEERS_MAX; i++)
        if (r->peers[i] != NULL) peer_close(st, r->peers[i], "crescentd stops");
    if (r->up != NULL) peer_close(st, r->up, "crescentd stops");
    snap_drop(st);
    if (r->listen_fd >= 0) close(r->listen_fd);
    if (r->epfd >= 0) close(r->epfd);
    r->listen_fd = r->epfd = -1;
}

void repl_stats(const struct journal_state *st, struct cr_actor_stats *out) {
    const struct repl_state *r = &st->repl;
    uint64_t lag_records_max = 0;
    for (uint32_t i = 0; i < REPL_PEERS_MAX; i++)
        if (r->peers[i] != NULL && r->peers[i]->hello && st->written_lsn > r->peers[i]->acked &&
            st->written_lsn - r->peers[i]->acked > lag_records_max)
            lag_records_max = st->written_lsn - r->peers[i]->acked;
    struct cr_role_status s;
    cr_role_get(&s);
    cr_actor_stats_add(out, "repl_role", (uint64_t)s.role);
    cr_actor_stats_add(out, "repl_term", s.term);
    cr_actor_stats_add(out, "repl_standbys", s.standbys);
    cr_actor_stats_add(out, "repl_lag_records_max", r->leading ? lag_records_max : s.lag_records);
    cr_actor_stats_add(out, "repl_standby_lag_ms", s.lag_ms);
    cr_actor_stats_add(out, "repl_acked_lsn", r->acked_lsn);
    cr_actor_stats_add(out, "repl_lag_max_us", r->lag_max_ns / 1000u);
    cr_actor_stats_add(out, "repl_bytes_sent_total", r->bytes_sent);
    cr_actor_stats_add(out, "repl_bytes_received_total", r->bytes_received);
    cr_actor_stats_add(out, "repl_reconnects_total", r->reconnects);
    cr_actor_stats_add(out, "repl_accepts_total", r->accepts);
    cr_actor_stats_add(out, "repl_stale_term_refused_total", r->stale_refused);
    cr_actor_stats_add(out, "repl_bad_frames_total", r->bad_frames);
    cr_actor_stats_add(out, "repl_refused_standbys_total", r->refused_hellos);
    cr_actor_stats_add(out, "repl_snapshots_sent_total", r->snapshots_sent);
    cr_actor_stats_add(out, "repl_snapshots_received_total", r->snapshots_received);
    cr_actor_stats_add(out, "repl_highest_term", r->terms.highest);
    cr_actor_stats_add(out, "repl_state_log_bytes", s.log_bytes);
    cr_actor_stats_add(out, "repl_state_snapshot_lsn", s.snapshot_lsn);
    cr_actor_stats_add(out, "repl_resyncs_asked_total", r->resyncs_asked);
    cr_actor_stats_add(out, "repl_resyncs_total", r->resyncs);
    cr_actor_stats_add(out, "repl_terms_write_failures_total", r->terms_failures);
    if (out->histograms != NULL && out->histogram_count < out->histograms_max && r->on) {
        out->histograms[out->histogram_count++] = (struct cr_actor_histogram){
            .name = "replication_lag_seconds",
            .help = "a block of records from its sending to a standby's acknowledgement",
            .label = "stream",
            .label_value = "store",
            .h = r->lag_hist};
    }
}
