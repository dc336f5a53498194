"""Publishers that connect to crescentd ("bind": true in /register and the
config file): crescentd binds the SUB, the publisher's PUB connects, replay
still goes to the publisher's ROUTER; bind addresses are validated."""
import json

import kv_publishers as kp
from conftest import free_port
from test_indexer import clean_exit, connect, post_json, service, start  # noqa: F401
from test_indexer_recovery import caught_up, held, lose

BS = 4


def registration(instance, endpoint, **extra):
    return {"endpoint": endpoint, "type": "vLLM", "modelname": "m", "instance_id": instance,
            "block_size": BS, "bind": True, **extra}


def test_publisher_connects_to_bound_sub_and_gaps_are_replayed(daemon):
    d = start(daemon)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    status, answer = post_json(d.port, "/register", registration("c", endpoint))
    assert status == 200, answer
    pub = kp.ConnectingPublisher(endpoint)
    try:
        # crescentd bound first: the publisher connects to it.
        status, answer = post_json(d.port, "/register",
                                   registration("c", endpoint,
                                                replay_endpoint=pub.replay_endpoint))
        assert status == 200, answer  # the same key binding the same address again
        connect(d.port, pub, "c")
        chain = kp.Chain(BS)
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "c")
        lose(pub, chain, 3)
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "c")
        s = service(d.port, "c")
        assert s["bind"] is True and s["link"] == "connected", s
        assert s["counters"]["replayed_batches"] >= 3 and s["possibly_stale"] is False, s
        assert held(d.port, chain, "c") == chain.blocks
        # Another key on the address in use: a clear refusal, nothing changed.
        status, answer = post_json(d.port, "/register", registration("other", endpoint))
        assert status == 400 and "in use" in json.dumps(answer), answer
        assert service(d.port, "other") is None
    finally:
        pub.close()


def test_bind_addresses_are_validated(daemon):
    d = start(daemon)
    port = free_port()
    refused = [
        (f"tcp://*:{port}", "every interface"),
        (f"tcp://0.0.0.0:{port}", "every interface"),
        ("tcp://127.0.0.1:0", "port 1 to 65535"),
        ("tcp://127.0.0.1", "tcp://HOST:PORT"),
        (f"udp://127.0.0.1:{port}", "tcp://HOST:PORT"),
    ]
    for endpoint, why in refused:
        status, answer = post_json(d.port, "/register", registration("v", endpoint))
        assert status == 400 and why in json.dumps(answer), (endpoint, answer)
    status, answer = post_json(d.port, "/register",
                               registration("v", f"tcp://127.0.0.1:{port}", bind="yes"))
    assert status == 400 and "true or false" in json.dumps(answer), answer
    assert service(d.port, "v") is None


def test_config_file_and_state_dir_keep_bind(daemon, tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"kvevent_instance": {"cfg": {
        "endpoint": endpoint, "modelname": "m", "block_size": BS, "bind": True}}}))
    state = tmp_path / "state"
    d = start(daemon, "--indexer-config", str(conf), "--state-dir", str(state))
    pub = kp.ConnectingPublisher(endpoint, replay_layout=None)
    try:
        connect(d.port, pub, "cfg")
        assert service(d.port, "cfg")["bind"] is True
        dyn = f"tcp://127.0.0.1:{free_port()}"
        status, answer = post_json(d.port, "/register", registration("dyn", dyn))
        assert status == 200, answer
        saved = json.loads((state / "indexer-registrations.json").read_text())
        assert saved["kvevent_instance"]["dyn|default|0"]["bind"] is True, saved
    finally:
        pub.close()

