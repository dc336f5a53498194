"""The SSD tier's way back and its bookkeeping (docs/tiers.md, "Local SSD
tier"), end to end: crescentd with a low eviction watermark, a crescent-store
with --ssd-dir, crescentctl as the client.

- Promotion: an object whose gets the SSD served --promotion-hits times
  within the window is copied back to memory (a memory replica beside the
  local_disk one); with --promotion-hits 0 it stays on the SSD.
- The SSD's own eviction is reported: a local_disk replica whose file the
  server's LRU dropped is dropped at the master too, never offered.
- A server killed and restarted with the same --ssd-dir re-registers every
  whole file (objects readable from its SSD again); a corrupted file is
  dropped, never served."""
import os
import re
import signal
import urllib.request

import pytest

from conftest import free_port, wait_for
from store_server import ctl, metric, tiers
from test_ssd_offload import OBJ, crs_files, put_many, ssd_store


def start(daemon, tmp_path, *flags, ttl="30"):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--client-ttl", ttl, *flags)
    return d, rpc


@pytest.fixture
def stores():
    started = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.stop(signal.SIGKILL)


def offloaded_keys(d, rpc, payloads, at_least=8):
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= at_least,
             "offloads committed")
    return [k for k in payloads if tiers(rpc, k) == ["local_disk"]]


# Mooncake's spellings (docs/mooncake.md) too: --promotion_admission_threshold
# is --promotion-hits (3 here: the scan's hit and the two gets), and
# --promotion_on_hit=false turns promotion off even with a threshold after it.
@pytest.mark.parametrize("flags,promotes", [
    (("--promotion-hits", "2"), True), (("--promotion-hits", "0"), False),
    (("--promotion_admission_threshold", "3"), True),
    (("--promotion_on_hit=false", "--promotion_admission_threshold", "3"), False)])
def test_ssd_reads_promote_back_to_memory(daemon, tmp_path, stores, flags, promotes):
    d, rpc = start(daemon, tmp_path, *flags)
    stores.append(ssd_store(rpc, tmp_path / "store.log", tmp_path / "ssd"))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 48)
    cold = offloaded_keys(d, rpc, payloads)
    assert len(cold) >= 2
    key = cold[0]
    for _ in range(2):
        assert ctl(rpc, "get", key).stdout == payloads[key]
    if not promotes:
        # Nothing asks for a copy back: the object stays on the SSD.
        assert ctl(rpc, "get", key).stdout == payloads[key]
        assert tiers(rpc, key) == ["local_disk"]
        assert metric(d, "crescent_segments_promotions_started_total") == 0
        return
    wait_for(lambda: (metric(d, "crescent_segments_promotions_done_total") or 0) >= 1,
             "promotion committed")
    assert tiers(rpc, key) == ["local_disk", "memory"]
    assert ctl(rpc, "get", key).stdout == payloads[key]  # from memory now, checked
    assert metric(d, "crescent_segments_promotion_hits_total") >= 2
    assert metric(d, "crescent_segments_promotions_failed_total") == 0
    # Mooncake's promotion families on --metrics-port count the same.
    mport = int(d.args[d.args.index("--metrics-port") + 1])
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
        mc = dict(line.rsplit(" ", 1) for line in r.read().decode().splitlines()
                  if line and not line.startswith("#"))
    assert int(mc["master_promotion_completed_total"]) >= 1
    assert int(mc["master_promotion_completed_bytes_total"]) >= OBJ
    assert int(mc["master_promotion_admitted_total"]) >= int(mc["master_promotion_completed_total"])
    assert int(mc["master_promotion_failed_total"]) == 0
    # (`crescentctl replicas` is a GetReplicaList too: the scan above counted
    # one hit on every object, so no other object is checked for staying.)


def test_ssd_eviction_is_reported_and_the_replica_dropped(daemon, tmp_path, stores):
    d, rpc = start(daemon, tmp_path, "--promotion-hits", "0")
    ssd = tmp_path / "ssd"
    # Room for 6 files of 1 MiB (headers included): older offloads are evicted
    # from the SSD as newer ones come.
    stores.append(ssd_store(rpc, tmp_path / "store.log", ssd, ssd_size=6 * OBJ + 6 * 8192))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 56)
    wait_for(lambda: (metric(d, "crescent_segments_local_disk_gone_total") or 0) >= 4,
             "SSD evictions reported")
    wait_for(lambda: metric(d, "crescent_segments_local_disk_replicas") <= 6,
             "local_disk replicas down to what the SSD holds")
    assert len(crs_files(ssd)) <= 6
    # Every local_disk replica offered is readable: none points to a gone file.
    for k in payloads:
        t = tiers(rpc, k) if ctl(rpc, "replicas", k, check=False).returncode == 0 else None
        if t == ["local_disk"]:
            assert ctl(rpc, "get", k).stdout == payloads[k]


def test_restarted_store_re_registers_its_ssd(daemon, tmp_path, stores):
    # A short client TTL: the killed server's segment (and its replicas) go.
    d, rpc = start(daemon, tmp_path, "--promotion-hits", "0", ttl="2")
    ssd = tmp_path / "ssd"
    stores.append(ssd_store(rpc, tmp_path / "store0.log", ssd))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 48)
    cold = offloaded_keys(d, rpc, payloads)
    stores[0].proc.send_signal(signal.SIGKILL)
    stores[0].proc.wait(timeout=30)
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment expired",
             timeout=60)
    assert ctl(rpc, "get", cold[0], check=False).returncode != 0  # gone with it
    # Corrupt one file: flip a byte of its value.
    files = crs_files(ssd)
    victim = ssd / files[0]
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF
    victim.write_bytes(bytes(raw))
    stores.append(ssd_store(rpc, tmp_path / "store1.log", ssd))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment remounted")
    wait_for(lambda: (metric(d, "crescent_segments_local_disk_registered_total") or 0)
             >= len(files) - 1, "files re-registered")
    assert not victim.exists()
    readable = 0
    for k in cold:
        p = ctl(rpc, "get", k, check=False)
        if p.returncode == 0:
            assert p.stdout == payloads[k]  # never a corrupt value
            assert tiers(rpc, k) == ["local_disk"]
            readable += 1
    assert readable >= len(cold) - 1
    log = (tmp_path / "store1.log").read_bytes().decode(errors="replace")
    assert "1 bad file(s) dropped" in log


def test_master_restart_keeps_local_disk_replicas(daemon, tmp_path, stores):
    """crescentd killed and restarted with --state-dir: the log brings the
    local_disk replicas back (restored, not re-created), and the server's
    re-registration after its remount finds them recorded already."""
    state = tmp_path / "state"
    flags = ("--promotion-hits", "0", "--state-dir", str(state), "--durability", "sync")
    d, rpc = start(daemon, tmp_path, *flags)
    stores.append(ssd_store(rpc, tmp_path / "store.log", tmp_path / "ssd"))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 48)
    cold = offloaded_keys(d, rpc, payloads)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--client-ttl", "30", *flags)
    assert metric(d, "crescent_segments_restored_objects") >= len(cold)
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment remounted")
    for k in cold[:6]:
        assert tiers(rpc, k) == ["local_disk"]
        assert ctl(rpc, "get", k).stdout == payloads[k]
    # The server re-registered its files after the remount, and they were
    # recorded already: none re-created or moved.
    wait_for(lambda: "registered with the master, 0 refused" in
             (tmp_path / "store.log").read_bytes().decode(errors="replace"), "re-registration")
    assert metric(d, "crescent_segments_local_disk_registered_total") == 0


def test_keys_removed_or_put_again_while_on_a_stopped_stores_ssd_stay_so(daemon, tmp_path,
                                                                          stores):
    """A restarted server's files come back only for the objects the master
    parked when its segment went, of keys neither removed nor put since: a
    key removed (while its only copy sat on the SSD, or after the segment
    went) or put again with other bytes never returns with its old bytes,
    and the server deletes those files (docs/tiers.md, "What the server
    reports")."""
    d, rpc = start(daemon, tmp_path, "--promotion-hits", "0", ttl="2")
    ssd = tmp_path / "ssd"
    stores.append(ssd_store(rpc, tmp_path / "store0.log", ssd))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 48)
    cold = offloaded_keys(d, rpc, payloads)
    assert len(cold) >= 6
    removed, replaced, removed_away, kept = cold[0], cold[1], cold[2], cold[3:]
    ctl(rpc, "rm", removed, "--force")  # its only copy is on the SSD
    ctl(rpc, "rm", replaced, "--force")
    newer = os.urandom(OBJ)
    (tmp_path / "newer.bin").write_bytes(newer)
    ctl(rpc, "put", replaced, str(tmp_path / "newer.bin"))  # memory, on the same server
    files = crs_files(ssd)
    stores[0].proc.send_signal(signal.SIGKILL)
    stores[0].proc.wait(timeout=30)
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment expired",
             timeout=60)
    assert ctl(rpc, "get", removed_away, check=False).returncode != 0  # gone with it
    ctl(rpc, "rm", removed_away, check=False)  # and removed while the server is away
    stores.append(ssd_store(rpc, tmp_path / "store1.log", ssd))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment remounted")
    log = tmp_path / "store1.log"
    wait_for(lambda: "registered with the master" in log.read_bytes().decode(errors="replace"),
             "re-registration")
    for k in (removed, removed_away):
        assert ctl(rpc, "get", k, check=False).returncode != 0, k
    p = ctl(rpc, "get", replaced, check=False)
    assert p.returncode != 0 or p.stdout == newer  # never the old bytes
    for k in kept:
        assert ctl(rpc, "get", k).stdout == payloads[k]
    text = log.read_bytes().decode(errors="replace")
    refused = int(re.search(r"registered with the master, (\d+) refused", text).group(1))
    assert refused >= 3, text
    assert len(crs_files(ssd)) <= len(files) - 3  # the server deleted what was refused


def test_a_master_restarted_without_state_takes_a_servers_files_back(daemon, tmp_path, stores):
    """A crescentd that knows nothing of a server's segment (restarted
    without --state-dir) re-creates the objects of the files it registers:
    they are the only record there is."""
    d, rpc = start(daemon, tmp_path, "--promotion-hits", "0")
    stores.append(ssd_store(rpc, tmp_path / "store.log", tmp_path / "ssd"))
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payloads = put_many(rpc, tmp_path, 48)
    cold = offloaded_keys(d, rpc, payloads)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0", "--promotion-hits", "0",
               "--client-ttl", "30")
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment remounted")
    wait_for(lambda: (metric(d, "crescent_segments_local_disk_registered_total") or 0)
             >= len(cold), "files re-registered")
    for k in cold[:6]:
        assert tiers(rpc, k) == ["local_disk"]
        assert ctl(rpc, "get", k).stdout == payloads[k]
