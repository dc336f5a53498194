/* The connections of a stream edge (rpc_tcp.c, the native endpoint;
 * src/mooncake/mc_edge.c, Mooncake's coro_rpc endpoint): a table of slots,
 * each with a generation bumped at every close, so a reply for a connection
 * closed meanwhile finds another generation and is dropped; accepting
 * without blocking; the read buffer and the non-blocking reads and writes;
 * and the list of connections with replies to write at the round's end.
 * What a frame is, how replies are queued and when a connection may read
 * stay the edge's.
 *
 * An edge's connection embeds struct cr_stream_conn first; the table
 * allocates it (conn_size bytes, zeroed) and frees it, calling the edge's
 * `release` for what the edge added (its reply buffer).  Everything runs on
 * the segments thread, like the edge (edge.h), except init (create, main
 * thread) and free (destroy). */
#ifndef CRESCENT_RPC_STREAM_CONNS_H
#define CRESCENT_RPC_STREAM_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cr_edge;

struct cr_stream_conn {
    int fd;          /* -1 once closed (kept while on the flush list) */
    uint32_t slot;   /* in the table; the epoll tag of fd */
    uint32_t events; /* registered with epoll */
    uint32_t in_flight; /* calls at segments or another actor */
    uint8_t *in;     /* bytes read, not yet a whole frame */
    size_t in_len, in_cap;
    bool dirty;      /* on the flush list */
    struct cr_stream_conn *next_dirty;
    char peer[64];   /* host:port, for logs */
};

struct cr_stream_conns {
    struct cr_edge *edge;
    const char *log_tag;   /* the edge's in log lines: "rpc_tcp" */
    const char *address;   /* where it listens, for log lines */
    const char *full_hint; /* after "N connections are open": the flag, or "" */
    size_t conn_size;      /* the edge's connection, cr_stream_conn first */
    void (*release)(struct cr_stream_conn *c); /* frees what the edge added */
    struct cr_stream_conn **conns; /* by slot */
    uint32_t *generation;          /* by slot; bumped at every close */
    uint32_t *free_slots;
    uint32_t max, free_count, open;
    struct cr_stream_conn *dirty;  /* the flush list */
    uint64_t accepted, refused_full, last_log_ns;
};

/* Room for `max` connections (the fields above up to conn_size set by the
 * caller).  CR_OK, or CR_ERR_NOMEM with nothing allocated. */
int cr_stream_conns_init(struct cr_stream_conns *t, uint32_t max);

/* Closes and frees every connection, open or on the flush list, and the
 * table (init's allocations); the listening socket stays the edge's. */
void cr_stream_conns_free(struct cr_stream_conns *t);

/* Accepts the connections waiting on listen_fd, at most 64: each gets a
 * slot, TCP_NODELAY and EPOLLIN (tag: its slot).  One past `max` is
 * accepted and closed at once, counted in refused_full and logged (rate
 * limited); so is one that cannot be set up. */
void cr_stream_conns_accept(struct cr_stream_conns *t, int listen_fd, uint64_t now_ns);

/* The open connection in `slot` if its generation is still `gen`, else
 * NULL (closed meanwhile, or slot out of range). */
struct cr_stream_conn *cr_stream_conns_find(const struct cr_stream_conns *t, uint32_t slot,
                                            uint32_t gen);

/* Closes c (logged at debug with `why`): its slot is freed for another
 * generation and its buffers released.  c itself is freed now unless it is
 * on the flush list, which frees it (fd -1) when it reaches it. */
void cr_stream_conn_close(struct cr_stream_conns *t, struct cr_stream_conn *c, const char *why);

/* Registers `events` for c's fd with segments' epoll set (nothing when
 * they are already those; a failure is logged). */
void cr_stream_conn_set_events(struct cr_stream_conns *t, struct cr_stream_conn *c,
                               uint32_t events);

/* Puts c on the flush list (once). */
void cr_stream_conn_mark_dirty(struct cr_stream_conns *t, struct cr_stream_conn *c);

/* Writes each connection on the flush list with `write` (the edge's: send
 * what is queued, then take what the replies made room for), freeing the
 * ones closed while listed.  A connection `write` puts back on the list is
 * written again before this returns. */
void cr_stream_conns_flush(struct cr_stream_conns *t,
                           void (*write)(struct cr_stream_conns *t, struct cr_stream_conn *c));

/* Sends buf[*off, len) without blocking, advancing *off, until all is sent
 * or the socket is full.  False when the connection was closed (a send
 * error): c is then not to be used. */
bool cr_stream_conn_send(struct cr_stream_conns *t, struct cr_stream_conn *c,
                         const uint8_t *buf, size_t len, size_t *off);

/* Reads what the socket has into c->in, first growing it to hold `want`
 * bytes in all.  Returns the bytes read (> 0; *drained when they took less
 * than the room there was: the socket has no more now), 0 when it had none,
 * or -1 when the connection was closed (the peer closed it, an error, no
 * memory for the buffer): c is then not to be used. */
ssize_t cr_stream_conn_read(struct cr_stream_conns *t, struct cr_stream_conn *c, size_t want,
                            bool *drained);

#endif
