"""Mooncake's Python store over an etcd:// master (docs/ha.md, "Clients
follow the leader"): crescent's MooncakeDistributedStore, imported as
engines import Mooncake's, hosts its segment and puts through the leader it
finds in etcd; the leader is killed with -9, a standby (streaming the log,
--replication sync; a third crescentd is its standby then) takes over, and the store's next calls succeed there:
what was put before is read back with its bytes, and new puts land."""
import os
import sys

from conftest import free_port, wait_for
from test_ha import etcd, leader_of, nodes, pytestmark  # noqa: F401 (fixtures, etcd check)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "compat"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from mooncake.store import MooncakeDistributedStore  # noqa: E402

MiB = 1 << 20


def test_mooncake_store_over_etcd_survives_kill9_of_the_leader(etcd, nodes, tmp_path):
    e = etcd()
    cluster = []
    for i in range(3):  # under --replication sync a new leader needs a standby
        cluster += nodes(e.endpoints(), 1, "--state-dir", str(tmp_path / f"state{i}"),
                         "--durability", "sync", "--replication", "sync",
                         "--replication-address", f"127.0.0.1:{free_port()}",
                         "--client-ttl", "30")
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    wait_for(lambda: all(n.ha_all().get("connected") for n in cluster if n is not leader),
             "the standbys streaming", timeout=30)

    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "", 64 * MiB, 16 * MiB, "tcp", "", f"etcd://{e.endpoints()}")
    assert rc == 0, getattr(store, "last_error", rc)
    values = {f"m{i}": os.urandom(1000 + i) for i in range(20)}
    for k, v in values.items():
        assert store.put(k, v) == 0, k
    assert store.get("m3") == values["m3"]

    leader.proc.kill()
    leader.proc.wait(timeout=10)
    new, new_term = wait_for(lambda: leader_of(cluster, exclude=(leader,)), "a new leader",
                             timeout=30)
    assert new_term > term
    # The next calls go to the new leader: reads of what was put before
    # (its bytes are in this process's segment), then new puts.
    for k, v in values.items():
        assert store.get(k) == v, k
    assert store.is_exist("m0") == 1
    assert store.put("after", b"z" * 3000) == 0
    assert store.get("after") == b"z" * 3000
    assert store.remove("m1", force=True) == 0  # its read lease from the get above
    assert store.is_exist("m1") == 0
    store.close()
