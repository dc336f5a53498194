"""The highest term a master has seen survives its restart (DIR/terms,
docs/ha.md "Fencing"): a standby promoted to term 1, killed with -9 and
started again as a standby of the old leader (still at term 0) refuses that
leader's records, and its HELLO tells the stale leader to stop taking
writes.  A damaged term file is refused at start, naming the file."""
import pytest

from conftest import free_port, wait_for
from test_replication import Store, CrescentError, ha, leader_args, promote, standby_args


def test_highest_term_survives_kill9(daemon, tmp_path):
    repl_a = f"127.0.0.1:{free_port()}"
    rpc_a, rpc_b = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    a = daemon(*leader_args(tmp_path, rpc_a, repl_a, mode="async"))
    args_b = standby_args(tmp_path, "standby", rpc_b, repl_a)
    b = daemon(*args_b)
    wait_for(lambda: ha(b)["connected"], "the standby following")
    status, body = promote(b)
    assert status == 200 and body["term"] == 1, body
    b.proc.kill()
    b.proc.wait()
    # Back as a standby of the old leader, which never heard of term 1.
    b = daemon(*args_b)
    wait_for(lambda: ha(a)["fenced"], "the stale leader fenced by the standby's hello")
    assert ha(a)["highest_term"] == 1
    hb = ha(b)
    assert hb["role"] == "standby" and hb["highest_term"] == 1 and not hb["connected"], hb
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_a, timeout_ms=10000)
    with pytest.raises(CrescentError) as e:
        s.put("stale", b"x" * 100)
    assert "not the leader" in str(e.value), e.value
    s.close()
    rc, err = b.stop()
    assert rc == 0
    assert "highest term seen before this start: 1" in err, err


def test_damaged_term_file_is_refused(daemon, tmp_path):
    state = tmp_path / "state"
    d = daemon("--state-dir", str(state), "--replication-address", f"127.0.0.1:{free_port()}")
    assert d.stop()[0] == 0
    terms = state / "terms"
    data = bytearray(terms.read_bytes())
    data[17] ^= 0x40
    terms.write_bytes(bytes(data))
    with pytest.raises(AssertionError) as e:
        daemon("--state-dir", str(state), "--replication-address", f"127.0.0.1:{free_port()}")
    assert str(terms) in str(e.value) and "checksum" in str(e.value), e.value
