/* HELP text of the subsystem counters in /metrics (see metrics.h).  A counter
 * missing here still gets a HELP line, made from its name. */
#include <stdio.h>
#include <string.h>

#include "http/metrics.h"

static const struct {
    const char *name; /* "<actor>_<counter>" */
    const char *help;
} helps[] = {
    {"rpc_replies_total", "Replies written to store RPC clients."},
    {"rpc_malformed_total", "RPC requests refused for their frame layout or size."},
    {"rpc_unknown_method_total", "RPC requests naming a method crescentd does not know."},
    {"rpc_decode_errors_total", "RPC request bodies protobuf could not decode."},
    {"rpc_invalid_total", "RPC requests decoded but refused by validation."},
    {"rpc_busy_total", "RPC requests refused because the store master was busy or stopping."},
    {"rpc_send_dropped_total", "RPC replies dropped because the client could not take them."},
    {"rpc_in_flight", "RPC requests handed to the store master and not answered yet."},
    {"rpc_replies_refused_unread_total", "ZMQ replies refused busy: their client had 64 MiB of replies unread."},
    {"rpc_shm_clients_hello_timeout_total", "shm connections closed: no hello within --rpc-shm-hello-timeout-ms."},
    {"segments_calls_at_tasks", "RPC calls at the tasks actor, not answered yet (at most 1024)."},
    {"segments_tasks_busy_total", "RPC task calls refused busy: 1024 were at the tasks actor."},
    {"tasks_replies_waiting", "Answers kept for a full ring back to their gateway, sent again each round."},
    {"tasks_replies_delayed_total", "Times an answer had to wait for a full ring back to its gateway."},
    {"tasks_replies_lost_total", "Answers to a gateway that was stopping."},
    {"data_transfer_shm_refused_unsealed_total", "shm map requests refused: the segment's memfd size is not sealed."},
    {"data_transfer_shm_files_total", "SSD-tier files handed to same-host readers over shm (read there, not by tcp)."},
    {"data_transfer_shm_files_refused_total", "SSD-tier file requests over shm refused (capability, object gone, ...): that read went by tcp."},
    {"data_transfer_capability_refused_total", "Transfer requests refused by the capability check (missing, forged, expired, out of range, wrong mode)."},
    {"data_transfer_capability_refused_missing_total", "Transfers refused: no capability sent and --data-require-capability is on (Mooncake clients send none)."},
    {"data_transfer_capability_refused_no_key_total", "Transfers refused: capabilities required and the segment has no key."},
    {"data_transfer_capability_refused_bad_mac_total", "Transfers refused: the capability's MAC does not verify (forged, or another segment's)."},
    {"data_transfer_capability_refused_expired_total", "Transfers refused: the capability expired (lease or put deadline past, plus the skew)."},
    {"data_transfer_capability_refused_out_of_range_total", "Transfers refused: the request leaves the capability's range."},
    {"data_transfer_capability_refused_wrong_mode_total", "Transfers refused: a read with a write capability, or the reverse."},
    {"data_transfer_capability_checked_total", "Transfers whose capability the check allowed."},
    {"segments_capacity_bytes", "Bytes of all mounted segments."},
    {"segments_used_bytes", "Bytes allocated to replicas."},
    {"segments_objects", "Objects in the store (complete or being put)."},
    {"segments_max_objects", "Objects the store may hold (--max-objects)."},
    {"segments_key_index_slots", "Slots of the key index (it doubles at half full)."},
    {"segments_inflight_puts", "Puts started and not ended or revoked."},
    {"segments_replicas", "Replicas of all objects."},
    {"segments_leases_active", "Objects under a read lease."},
    {"segments_segments", "Mounted segments."},
    {"segments_clients", "Clients crescentd tracks for liveness."},
    {"segments_evictions_total", "Objects evicted to stay under the high watermark."},
    {"segments_evicted_bytes_total", "Bytes freed by eviction."},
    {"segments_room_evictions_total", "Objects a PutStart evicted itself (a full object table, or no segment with room)."},
    {"segments_zombies_preempted_total", "Puts never ended, taken back after their discard timeout."},
    {"segments_zombie_bytes_reclaimed_total", "Bytes of preempted puts reclaimed."},
    {"segments_discarded_parked", "Preempted puts whose replicas wait to be freed."},
    {"segments_clients_expired_total", "Clients dropped (and their segments unmounted) after --client-ttl."},
    {"segments_calls_total", "Store master calls run."},
    {"segments_log_records_total", "Records of store changes handed to the operation log (--state-dir)."},
    {"segments_log_calls_held_total", "Calls answered only once their records were on disk (--durability sync)."},
    {"segments_log_blocks_dropped_total", "Rounds of log records lost (no memory, or the journal stopped)."},
    {"segments_restored_objects", "Objects the last start restored from --state-dir."},
    {"journal_log_bytes_total", "Bytes written to the store's operation log."},
    {"journal_log_blocks_total", "Blocks of records (one per round of store calls) written to the log."},
    {"journal_log_syncs_total", "fdatasync calls on the operation log (one per group of rounds)."},
    {"journal_log_sync_ns_max", "The slowest fdatasync of the operation log, in nanoseconds."},
    {"journal_log_written_lsn", "Last log record written."},
    {"journal_snapshots_total", "Snapshots of the store written (--snapshot-every-records)."},
    {"journal_snapshot_bytes_total", "Bytes of snapshots written."},
    {"journal_snapshot_failures_total", "Snapshots dropped because a write failed (the logs were kept)."},
    {"journal_snapshots_skipped_total", "A standby's snapshots not begun: a cut of a state dropped by a start over, or not after the leader's snapshot it received."},
    {"journal_repl_lag_max_us", "The longest a block of records took from its sending to a standby's acknowledgement (microseconds, since start)."},
    {"journal_diverged_kept", "DIR/diverged-<ms>/ directories a start over left, kept (--keep-diverged)."},
    {"segments_snapshots_begun_total", "Snapshots of the store begun (a slice per round)."},
    {"segments_snapshot_slice_ns_max", "The longest a snapshot slice held the store thread, in nanoseconds (since start)."},
    {"segments_snapshot_slices_total", "Slices of snapshots taken (SNAPSHOT_SLICE_OBJECTS objects each, paced)."},
    {"journal_log_synced_lsn", "Last log record known to be on disk."},
    {"segments_call_errors_total", "Store master calls that answered an error status."},
    {"segments_replies_dropped_total", "Replies segments could not hand back to the gateway."},
    {"segments_events_sent_total", "Store events handed to the event plane and the indexer."},
    {"segments_events_dropped_total", "Store events dropped before the event plane (its ring full)."},
    {"segments_evict_polls_total", "Eviction polls answered."},
    {"segments_evictions_refused_total", "Eviction victims segments refused (leased, pinned, gone)."},
    {"segments_eviction_samples_dropped_total", "Eviction samples dropped."},
    {"leases_polls_total", "Eviction polls sent to segments."},
    {"leases_eviction_passes_total", "Eviction passes run above the high watermark."},
    {"leases_count_eviction_passes_total", "Eviction passes run for the object count (--max-objects, --max-allocations-per-segment)."},
    {"leases_victims_chosen_total", "Objects chosen for eviction."},
    {"leases_unmet_passes_total", "Eviction passes that could not get under the low watermark."},
    {"leases_used_bytes", "Bytes used at the last eviction poll."},
    {"leases_capacity_bytes", "Capacity at the last eviction poll."},
    {"leases_heap_trims_total", "Times free heap memory was given back to the system (malloc_trim after a spike of frees)."},
    {"leases_heap_released_bytes_total", "Resident bytes those trims gave back."},
    {"leases_heap_free_bytes", "Bytes free in the heap's free lists at the last check (every 2 s)."},
    {"publisher_seq", "Sequence number of the next event batch."},
    {"publisher_batches_total", "Event batches published on ZMQ."},
    {"publisher_events_total", "Events published on ZMQ."},
    {"publisher_block_store_events_total", "BlockStoreEvent events published."},
    {"publisher_block_update_events_total", "BlockUpdateEvent events published."},
    {"publisher_remove_all_events_total", "RemoveAllEvent events published."},
    {"publisher_events_pending", "Events waiting for the next batch."},
    {"publisher_send_drops_total", "Batches ZMQ dropped (subscribers past --event-send-hwm)."},
    {"publisher_encode_errors_total", "Batches that could not be encoded."},
    {"publisher_handoff_drops_total", "Batches the replay buffer did not get."},
    {"replay_sessions_total", "Replay requests served."},
    {"replay_sessions_active", "Replay sessions in progress."},
    {"replay_batches_kept", "Batches in the replay buffer."},
    {"replay_bytes_kept", "Bytes in the replay buffer."},
    {"replay_oldest_seq", "Oldest sequence number the replay buffer holds."},
    {"replay_newest_seq", "Newest sequence number the replay buffer holds."},
    {"replay_batches_replayed_total", "Batches sent to replaying subscribers."},
    {"indexer_publishers", "KV-event publishers the indexer subscribes to."},
    {"indexer_publishers_possibly_stale", "Publishers with a gap not recovered yet."},
    {"indexer_batches_total", "KV-event batches received from publishers."},
    {"indexer_events_total", "KV events applied to the index."},
    {"indexer_malformed_batches_total", "KV-event batches that could not be decoded."},
    {"indexer_gaps_total", "Sequence gaps seen in publishers' batches."},
    {"indexer_restarts_total", "Publisher restarts seen (sequence going back)."},
    {"indexer_replays_total", "Replays asked of publishers to fill gaps."},
    {"indexer_blocks", "Prefix blocks in the index."},
    {"indexer_block_instance_pairs", "(block, instance) pairs in the index."},
    {"indexer_index_bytes", "Memory the prefix index uses."},
    {"indexer_queries_total", "Prefix queries answered (/query, /query_by_hash, /route)."},
    {"indexer_route_requests_total", "/route requests answered."},
    {"indexer_route_request_tokens_total", "Prompt tokens of /route requests."},
    {"indexer_route_hit_tokens_total", "Prompt tokens the chosen instance already held (hit rate = hit / request tokens)."},
    {"indexer_nats_events_total", "Dynamo RouterEvents from NATS applied to the index."},
    {"indexer_nats_metrics_total", "Dynamo ForwardPassMetrics from NATS taken as load."},
    {"indexer_nats_refused_bad_json_total", "NATS payloads refused: not JSON, too deep or too large."},
    {"indexer_nats_refused_bad_field_total", "NATS payloads refused: a field missing or mistyped."},
    {"indexer_nats_refused_bad_kind_total", "NATS RouterEvents refused: not Stored, Removed or Cleared."},
    {"indexer_nats_refused_bad_hash_total", "NATS RouterEvents refused: a block hash not in u64."},
    {"indexer_nats_refused_bad_tokens_total", "NATS RouterEvents refused: a token id not in u32."},
    {"indexer_nats_refused_over_limit_total", "NATS RouterEvents refused: too many hashes or tokens."},
    {"indexer_nats_apply_refused_total", "Decoded NATS RouterEvents the index could not take whole."},
    {"indexer_nats_orphan_runs_total", "NATS stored runs without token ids or with an unknown parent."},
    {"indexer_nats_dropped_total", "NATS messages dropped because the indexer's ring stayed full."},
    {"indexer_nats_workers", "Dynamo workers seen on NATS."},
    {"indexer_nats_workers_refused_total", "NATS messages of workers past the tracked bound."},
    {"indexer_nats_workers_stale", "Dynamo workers whose metrics are older than --nats-stale-ms."},
    {"indexer_nats_stale_marks_total", "Times a Dynamo worker was marked stale."},
    {"indexer_nats_hit_rate_published_total", "KVHitRateEvents published after /route."},
    {"indexer_nats_hit_rate_publish_failures_total", "KVHitRateEvents libnats refused to publish."},
    {"indexer_load_only_instances", "Instances known only from /load reports."},
};

const char *cr_metrics_help(const char *actor, const char *name, char *scratch, size_t size) {
    size_t actor_len = strlen(actor);
    for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
        const char *h = helps[i].name;
        if (strncmp(h, actor, actor_len) == 0 && h[actor_len] == '_' &&
            strcmp(h + actor_len + 1, name) == 0)
            return helps[i].help;
    }
    size_t len = strlen(name);
    if (strcmp(actor, "rpc") == 0 && strncmp(name, "requests_", 9) == 0 && len > 15) {
        snprintf(scratch, size, "Store RPC requests of method %.*s received.", (int)(len - 15),
                 name + 9);
        return scratch;
    }
    /* "evict_polls_total" of segments -> "The segments actor's evict polls." */
    if (len > 6 && strcmp(name + len - 6, "_total") == 0) len -= 6;
    int n = snprintf(scratch, size, "The %s actor's ", actor);
    for (size_t i = 0; i < len && n > 0 && (size_t)n + 2 < size; i++)
        scratch[n++] = name[i] == '_' ? ' ' : name[i];
    if (n > 0 && (size_t)n + 1 < size) scratch[n++] = '.', scratch[n] = '\0';
    return scratch;
}
