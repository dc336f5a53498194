"""Per-publisher health in /metrics (crescent_indexer_publisher_*, labels
instance, tenant, dp_rank): read with test_metrics' strict parser and checked
against /services, for a publisher that had a gap replayed and one that never
connected."""
import kv_publishers as kp
from conftest import free_port
from test_indexer import clean_exit, post_json, register, service, start  # noqa: F401
from test_indexer_recovery import caught_up, lose
from test_metrics import metrics

BS = 4
FAMILY = "crescent_indexer_publisher_"


def series(families, name):
    """{(instance, tenant, dp_rank): value} of one family; each key once."""
    out = {}
    for sample, labels, value in families[FAMILY + name]["samples"]:
        assert sample == FAMILY + name
        assert set(labels) == {"instance", "tenant", "dp_rank"}, labels
        key = (labels["instance"], labels["tenant"], int(labels["dp_rank"]))
        assert key not in out, f"{name}: {key} twice"
        out[key] = value
    return out


def test_publisher_health_series_match_services(daemon):
    d = start(daemon)
    pub = kp.RealisticPublisher()
    try:
        chain = kp.Chain(BS)
        register(d.port, pub, "live", bs=BS)
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "live")
        lose(pub, chain, 3)
        pub.send(chain.next_batch())
        caught_up(d.port, pub, "live")
        status, answer = post_json(d.port, "/register", {
            "endpoint": f"tcp://127.0.0.1:{free_port()}", "type": "vLLM", "modelname": "m",
            "tenant_id": "t2", "instance_id": "dead", "block_size": BS, "dp_rank": 3})
        assert status == 200, answer

        families = metrics(d)
        live, dead = service(d.port, "live"), service(d.port, "dead", "t2", 3)
        kinds = {"connected": "gauge", "link_age_seconds": "gauge",
                 "last_batch_age_seconds": "gauge", "last_seq": "gauge", "gaps_total": "counter",
                 "replays_total": "counter", "replayed_batches_total": "counter",
                 "lost_batches_total": "counter", "stale": "gauge"}
        for name, kind in kinds.items():
            assert families[FAMILY + name]["type"] == kind, name
        L, D = ("live", "default", 0), ("dead", "t2", 3)
        assert series(families, "connected") == {L: 1.0, D: 0.0}
        assert live["link"] == "connected" and dead["link"] == "never connected"
        assert series(families, "last_seq") == {L: float(live["last_seq"])}  # dead: none yet
        assert live["last_seq"] == pub.seq - 1
        assert set(series(families, "last_batch_age_seconds")) == {L}
        # Ages grow between the two reads: /services was read after /metrics.
        age = series(families, "link_age_seconds")
        assert 0 <= age[L] <= live["link_age_s"] + 0.001 and 0 <= age[D] <= dead["link_age_s"] + 0.001
        for name, field in (("gaps_total", "gaps"), ("replays_total", "replays"),
                            ("replayed_batches_total", "replayed_batches"),
                            ("lost_batches_total", "lost_batches")):
            assert series(families, name) == {L: live["counters"][field],
                                              D: dead["counters"][field]}, name
        assert live["counters"]["gaps"] >= 1 and live["counters"]["replayed_batches"] >= 3
        assert series(families, "stale") == {L: float(live["possibly_stale"]),
                                             D: float(dead["possibly_stale"])}
    finally:
        pub.close()
