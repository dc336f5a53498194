/* Messages between the store's actors and the event plane / indexer.
 *
 * The message carries a cr_store_event_chain (src/msgs/store_event.h): store
 * events in order, all of one tenant, in one heap block.  The receiver owns
 * one reference to the chain and drops it with cr_store_event_chain_release
 * once it has read the events (its discard hook likewise).  The segment
 * manager sends the same chain to the publisher and the indexer. */
#ifndef CRESCENT_MSGS_STORE_MSGS_H
#define CRESCENT_MSGS_STORE_MSGS_H

#include <stdint.h>

#include "msgs/msg.h"

struct cr_store_event_chain;

enum cr_store_msg_type {
    /* segments → publisher, segments → indexer: body cr_msg_store_event. */
    CR_MSG_STORE_EVENT = CR_MSG_SUBSYSTEM_BASE + 0,
    /* Store-master RPC and policy messages: 65..127 (src/msgs/master_msgs.h). */
    CR_MSG_STORE_FIRST = CR_MSG_SUBSYSTEM_BASE + 1,
    /* Event plane (publisher, replay): 128..191 (src/msgs/event_msgs.h). */
    CR_MSG_EVENTS_FIRST = CR_MSG_SUBSYSTEM_BASE + 64,
    /* Prefix indexer: 192..255 (src/msgs/indexer_msgs.h). */
    CR_MSG_INDEXER_FIRST = CR_MSG_SUBSYSTEM_BASE + 128,
};

struct cr_msg_store_event {
    struct cr_store_event_chain *chain; /* one reference, owned by the receiver */
    char tenant[24];              /* tenant of every key in it; "" means "default" */
    /* The runtime clock when the chain's first event happened (0: unknown,
     * take it as now): the publisher counts its flush window from it, so an
     * event's delay on the way (a lazy send) is part of the window, not
     * added to it. */
    uint64_t since_ns;
};

#endif
