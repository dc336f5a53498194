"""The indexer's recovery against publishers as vLLM's and SGLang's really
behave (kv_publishers.RealisticPublisher: seq from 0, a bounded buffer, a
replay ROUTER with ZMQ's default send high-water mark): a gap after a quiet
period, gaps larger than the publisher's send queue, a gap older than its
buffer, first subscribe to a publisher with history, crescentd restarts.
Each test ends comparing /query answers with what the publisher published
(one chain of blocks: a hole anywhere ends the match there)."""
import time

import kv_publishers as kp
from test_indexer import clean_exit, query, expect, register, service, start, wait_for  # noqa: F401

BS = 4


def held(port, chain, instance):
    """Blocks of the chain the index holds for instance, from the first on."""
    answer = query(port, chain.tokens(), bs=BS)
    return answer.get("default", {}).get(instance, {}).get("longest_matched", 0) // BS


def caught_up(port, pub, instance, timeout=60.0):
    wait_for(lambda: (service(port, instance) or {}).get("last_seq") == pub.seq - 1
             and not service(port, instance)["replaying"],
             f"{instance} to apply seq {pub.seq - 1}", timeout)


def test_gap_after_a_quiet_period_is_replayed(daemon):
    """Before: the replay deadline came from the clock read before the
    actor's idle wait, so after 2 s of quiet the round was abandoned before
    any reply was read and the publisher marked stale."""
    d = start(daemon)
    pub = kp.RealisticPublisher()
    try:
        chain = kp.Chain(BS)
        register(d.port, pub, "q", bs=BS)
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "q")
        time.sleep(2.5)  # the quiet period is what this test is about
        pub.send(chain.next_batch(), deliver=False)  # the cut loses one
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "q")
        s = service(d.port, "q")
        assert s["possibly_stale"] is False, s
        assert s["counters"]["replay_timeouts"] == 0
        assert s["counters"]["replayed_batches"] >= 1
        assert held(d.port, chain, "q") == chain.blocks
    finally:
        pub.close()
