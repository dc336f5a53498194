"""--keep-diverged (docs/ha.md, "A former leader comes back"): the
DIR/diverged-<ms>/ directories a standby's start over leaves are bounded; a
crescentd starting with more than N deletes the oldest, says so in its log,
and /health and /metrics say how many it keeps.  (A start over itself, and
that the directory it makes counts: tests/integration/test_ha_rejoin.py.)"""
import json

from conftest import free_port, http_get, wait_for
from test_replication import leader_args


def make_aside(state, ms, files=1):
    d = state / f"diverged-{ms}"
    d.mkdir(parents=True)
    for i in range(files):
        (d / f"store-{i + 1:016x}.log").write_bytes(b"a former leader's records")
    return d


def health_ha(d):
    status, body = http_get(d.port, "/health")
    assert status == 200, (status, body)
    return json.loads(body)["ha"]


def test_oldest_diverged_directories_are_deleted_at_start(daemon, tmp_path):
    state = tmp_path / "leader"
    # Named as a start over names them; 900 is the oldest though it sorts last.
    for ms, files in ((900, 2), (1000, 1), (2000, 0), (3000, 3)):
        make_aside(state, ms, files)
    other = state / "diverged-notes"  # not one of them: left alone
    other.mkdir()
    repl = f"127.0.0.1:{free_port()}"
    d = daemon(*leader_args(tmp_path, f"tcp://127.0.0.1:{free_port()}", repl,
                            "--keep-diverged", "2", mode="async"))
    wait_for(lambda: health_ha(d)["role"] == "leader", "the leader serving")
    assert sorted(p.name for p in state.iterdir() if p.name.startswith("diverged-")) == [
        "diverged-2000", "diverged-3000", "diverged-notes"]
    assert len(list((state / "diverged-3000").iterdir())) == 3
    assert health_ha(d)["diverged_kept"] == 2
    status, body = http_get(d.port, "/metrics")
    assert "crescent_journal_diverged_kept 2" in body.decode(), body.decode()[:2000]
    code, err = d.stop()
    assert code == 0, err
    assert "diverged-900 deleted: --keep-diverged 2" in err, err
    assert "diverged-1000 deleted" in err, err

    # Restarted with the default (2): nothing more goes.
    d = daemon(*leader_args(tmp_path, f"tcp://127.0.0.1:{free_port()}", repl, mode="async"))
    wait_for(lambda: health_ha(d)["role"] == "leader", "the leader serving again")
    assert health_ha(d)["diverged_kept"] == 2
    assert (state / "diverged-2000").exists()
    code, err = d.stop()
    assert "deleted: --keep-diverged" not in err, err

    # 0 keeps none.
    d = daemon(*leader_args(tmp_path, f"tcp://127.0.0.1:{free_port()}", repl,
                            "--keep-diverged", "0", mode="async"))
    wait_for(lambda: health_ha(d)["role"] == "leader", "the leader serving a third time")
    assert health_ha(d)["diverged_kept"] == 0
    assert sorted(p.name for p in state.iterdir() if p.name.startswith("diverged-")) == [
        "diverged-notes"]
