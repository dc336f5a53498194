/* The message every actor channel carries.
 *
 * A message is 64 bytes, one cache line, copied by value into the receiver's
 * ring slot: there is no envelope to allocate, pool or free, and no memory
 * crosses threads except what a body's pointer explicitly hands over.  Each
 * message type has one body struct (declared in src/msgs/<subsystem>_msgs.h)
 * that fits in `body`; CR_MSG_BODY() checks that at compile time.
 *
 * Ownership rule: a pointer in a body transfers ownership of what it points
 * to, unless the message is an ask (CR_MSG_ASK), whose pointers refer to the
 * asking thread's memory and stay valid until the actor replies. */
#ifndef CRESCENT_MSGS_MSG_H
#define CRESCENT_MSGS_MSG_H

#include <assert.h>
#include <stdint.h>

#define CR_MSG_BODY_BYTES 40u

/* Sender id of a thread that is not an actor (HTTP workers, main, tests). */
#define CR_SENDER_EXTERNAL 0xffffu

enum cr_msg_flags {
    CR_MSG_ASK = 1u << 0, /* the sender waits for cr_reply(); see runtime/ask.h */
};

/* Message types.  0 is never valid so a zeroed message is caught. */
enum cr_msg_type {
    CR_MSG_INVALID = 0,
    /* Runtime: handled by the actor loop itself. */
    /* 1 is unused: stopping is a flag, not a message (see cr_runtime_stop). */
    CR_MSG_STATS = 2, /* ask: fill struct cr_actor_stats (body: cr_msg_stats) */
    CR_MSG_WIRE = 3,  /* the daemon hands over the peer table (body.ptr[0]), once */
    /* Runtime tests and benchmarks. */
    CR_MSG_TEST_SEQ = 16,  /* body: producer id and sequence number */
    CR_MSG_TEST_ECHO = 17, /* ask: reply with the body's value */
    /* Subsystems allocate from 64 up, in their own headers. */
    CR_MSG_SUBSYSTEM_BASE = 64,
};

struct cr_ask_slot;

struct cr_msg {
    uint16_t type;    /* enum cr_msg_type or a subsystem's type */
    uint16_t flags;   /* enum cr_msg_flags */
    uint16_t sender;  /* sending actor's id or CR_SENDER_EXTERNAL */
    uint16_t reserved;
    uint32_t ask_seq; /* with CR_MSG_ASK: the asker's sequence number */
    uint32_t reserved2;
    struct cr_ask_slot *ask; /* with CR_MSG_ASK: where the reply goes */
    union {
        uint8_t bytes[CR_MSG_BODY_BYTES];
        uint64_t u64[CR_MSG_BODY_BYTES / 8];
        void *ptr[CR_MSG_BODY_BYTES / sizeof(void *)];
    } body;
};

static_assert(sizeof(struct cr_msg) == 64, "a message is one cache line");

/* Typed view of a message body, checked to fit at compile time. */
#define CR_MSG_BODY(msg, type)                                                   \
    (__extension__({                                                             \
        static_assert(sizeof(type) <= CR_MSG_BODY_BYTES, #type " fits a body"); \
        (type *)(void *)(msg)->body.bytes;                                       \
    }))

/* Body of CR_MSG_TEST_SEQ. */
struct cr_msg_test_seq {
    uint32_t producer;
    uint32_t pad;
    uint64_t seq;
};

/* Body of CR_MSG_TEST_ECHO (ask): the actor writes `value` into *out. */
struct cr_msg_test_echo {
    uint64_t value;
    uint64_t *out;
};

#endif
