"""Replicated indexers: three crescentd subscribed to the same engines (publishers
as vLLM's behave, kv_publishers.RealisticPublisher, named in one --indexer-config
file) answer /query alike; one is killed (kill -9) while the engines go on storing
and evicting, and restarted: it catches up through the engines' replay, and the
three answer alike again.  docs/indexer-replicas.md says how to run them."""
import json

import kv_publishers as kp
from test_indexer import query, service, start, wait_for

BS = 4
ENGINES = 3


def caught_up(port, pubs):
    for name, pub in pubs.items():
        wait_for(lambda: (service(port, name) or {}).get("last_seq") == pub.seq - 1
                 and not service(port, name)["replaying"],
                 f"{name} to apply seq {pub.seq - 1} on :{port}", 60.0)


def answers(port, chains):
    """Every engine's chain queried whole, and one query by a prompt no one holds."""
    out = {name: query(port, chain.tokens(), bs=BS) for name, chain in chains.items()}
    out["cold"] = query(port, [999999 + i for i in range(4 * BS)], bs=BS)
    return out


def grow(pubs, chains, blocks):
    for _ in range(blocks):
        for name, pub in pubs.items():
            pub.send(chains[name].next_batch())


def evict_tail(pubs, chains, blocks):
    """Each engine evicts the last `blocks` of its chain (BlockRemoved)."""
    for name, pub in pubs.items():
        chain = chains[name]
        hashes = [(chain.base << 32) + i + 1 for i in range(chain.blocks - blocks, chain.blocks)]
        pub.send(kp.batch([kp.vllm_removed(hashes)]))
        chain.blocks -= blocks


def test_three_indexers_agree_through_a_kill_and_restart(daemon, tmp_path):
    pubs = {f"engine-{i}": kp.RealisticPublisher() for i in range(ENGINES)}
    chains = {name: kp.Chain(BS, base=1 + 1000 * i) for i, name in enumerate(pubs)}
    try:
        conf = tmp_path / "conductor_config.json"
        conf.write_text(json.dumps({"kvevent_instance": {
            name: {"endpoint": pub.endpoint, "replay_endpoint": pub.replay_endpoint,
                   "modelname": "m", "block_size": BS} for name, pub in pubs.items()}}))
        replicas = [start(daemon, "--indexer-config", str(conf)) for _ in range(3)]
        grow(pubs, chains, 40)
        for d in replicas:
            caught_up(d.port, pubs)
        first = answers(replicas[0].port, chains)
        for name in pubs:  # the answer is the truth, not only the same everywhere
            assert first[name]["default"][name]["longest_matched"] == 40 * BS
        assert first["cold"] == {}
        for d in replicas[1:]:
            assert answers(d.port, chains) == first

        # Replica 1 dies hard; the engines go on storing and evicting meanwhile.
        replicas[1].proc.kill()
        replicas[1].proc.wait(timeout=10)
        grow(pubs, chains, 25)
        evict_tail(pubs, chains, 10)
        grow(pubs, chains, 5)
        for d in (replicas[0], replicas[2]):
            caught_up(d.port, pubs)
        live = answers(replicas[0].port, chains)
        assert answers(replicas[2].port, chains) == live
        for name in pubs:
            assert live[name]["default"][name]["longest_matched"] == 60 * BS

        # Restarted (a fresh process, nothing saved): the first-subscribe replay
        # brings every engine's history back.
        replicas[1] = start(daemon, "--indexer-config", str(conf))
        caught_up(replicas[1].port, pubs)
        assert answers(replicas[1].port, chains) == live
        for name in pubs:
            assert service(replicas[1].port, name)["possibly_stale"] is False

        # And they stay together on what comes next.
        evict_tail(pubs, chains, 30)
        grow(pubs, chains, 3)
        for d in replicas:
            caught_up(d.port, pubs)
        after = answers(replicas[0].port, chains)
        for name in pubs:
            assert after[name]["default"][name]["longest_matched"] == 33 * BS
        for d in replicas[1:]:
            assert answers(d.port, chains) == after
        for d in replicas:
            code, err = d.stop()
            assert code == 0 and "Sanitizer" not in err, err[-3000:]
    finally:
        for pub in pubs.values():
            pub.close()
