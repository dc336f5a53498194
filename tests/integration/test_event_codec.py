"""Seed-000 event batches from crescent's encoder, checked with Python's msgpack.

Drives tests/tools/event_codec_dump (found in $CRESCENT_BIN_DIR, default
zig-out/bin) and checks every batch it writes:
  * byte equality with Python's canonical packing:
    msgpack.packb(msgpack.unpackb(raw), use_bin_type=True) == raw
  * element counts and msgpack types of every field of all three events
  * the StoreEventInfo defaults when unset, the batch cap and seq numbering
  * that the C JSON decoder (--json) agrees with Python's decoding.

Run with Debian's interpreter: /usr/bin/python3 -m pytest tests/integration/test_event_codec.py
"""

import json
import os
import pathlib
import struct
import subprocess

import msgpack
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("CRESCENT_BIN_DIR", "zig-out/bin"))
if not BIN_DIR.is_absolute():
    BIN_DIR = REPO_ROOT / BIN_DIR
DUMP = BIN_DIR / "event_codec_dump"

pytestmark = pytest.mark.skipif(
    not os.access(DUMP, os.X_OK),
    reason=f"{DUMP} not built (zig build, or set CRESCENT_BIN_DIR to its directory)",
)

REPLICA_TYPES = {"memory", "disk", "local_disk"}
U32_MAX = 2**32 - 1
TS = 1700000000.25


def dump(spec, *args):
    """Runs the dump tool on `spec`; returns [(seq, payload bytes), ...]."""
    result = subprocess.run(
        [str(DUMP), "--ts", repr(TS), *args],
        input=spec.encode(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    out, batches, offset = result.stdout, [], 0
    while offset < len(out):
        seq, length = struct.unpack_from(">QI", out, offset)
        offset += 12
        batches.append((seq, out[offset : offset + length]))
        offset += length
    assert offset == len(out), "trailing bytes in the dump output"
    return batches


def dump_json(spec, *args):
    result = subprocess.run(
        [str(DUMP), "--ts", repr(TS), "--json", *args],
        input=spec.encode(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def assert_canonical(raw):
    decoded = msgpack.unpackb(raw, raw=False)
    assert msgpack.packb(decoded, use_bin_type=True) == raw
    return decoded


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_replicas(replicas):
    assert isinstance(replicas, list)
    for replica in replicas:
        assert isinstance(replica, list) and len(replica) == 2
        assert isinstance(replica[0], str) and replica[0] in REPLICA_TYPES
        assert isinstance(replica[1], str)


def check_event(event):
    assert isinstance(event, list) and event and isinstance(event[0], str)
    kind = event[0]
    if kind == "RemoveAllEvent":
        assert len(event) == 1
        return
    assert isinstance(event[1], str)
    check_replicas(event[2])
    if kind == "BlockUpdateEvent":
        assert len(event) == 3
        return
    assert kind == "BlockStoreEvent" and len(event) == 8
    _, _, _, model_name, block_size, block_hash, parent, token_ids = event
    assert isinstance(model_name, str)
    assert is_int(block_size) and 0 <= block_size <= U32_MAX
    assert isinstance(block_hash, str) and isinstance(parent, str)
    assert isinstance(token_ids, list)
    assert all(is_int(t) and 0 <= t <= U32_MAX for t in token_ids)


def check_batch(raw):
    batch = assert_canonical(raw)
    assert isinstance(batch, list) and len(batch) == 2
    ts, events = batch
    assert isinstance(ts, float) and ts == TS
    assert raw[1] == 0xCB, "ts must be a msgpack float64"
    assert struct.unpack(">d", raw[2:10])[0] == TS
    assert isinstance(events, list) and events
    for event in events:
        check_event(event)
    return events


SEED_EXAMPLE = " ".join([
    "store key=key_12345 replica=memory:tcp://192.168.1.10:6000",
    "replica=disk:/data/blocks/block_12345.bin replica=local_disk:tcp://192.168.1.10:7000",
    "model=llama2-7b block_size=512 hash=0x41234125 parent=0x51512342 tokens=1,2,3,4,5",
])

MIXED_SPEC = f"""
# the seed's example, then each kind with and without optional fields
{SEED_EXAMPLE}
update key=key_12345 replica=memory:tcp://192.168.1.10:6000
removeall
store key=k2
update key=k3
store key=k4 block_size=4294967295 tokens=0,127,128,255,256,65535,65536,4294967295
"""


def test_mixed_batch_shapes_and_values():
    batches = dump(MIXED_SPEC)
    assert [seq for seq, _ in batches] == [0]
    events = check_batch(batches[0][1])
    assert [e[0] for e in events] == [
        "BlockStoreEvent", "BlockUpdateEvent", "RemoveAllEvent",
        "BlockStoreEvent", "BlockUpdateEvent", "BlockStoreEvent",
    ]
    assert events[0] == [
        "BlockStoreEvent", "key_12345",
        [["memory", "tcp://192.168.1.10:6000"],
         ["disk", "/data/blocks/block_12345.bin"],
         ["local_disk", "tcp://192.168.1.10:7000"]],
        "llama2-7b", 512, "0x41234125", "0x51512342", [1, 2, 3, 4, 5],
    ]
    assert events[1] == ["BlockUpdateEvent", "key_12345", [["memory", "tcp://192.168.1.10:6000"]]]
    assert events[2] == ["RemoveAllEvent"]
    assert events[4] == ["BlockUpdateEvent", "k3", []]
    assert events[5][4] == U32_MAX
    assert events[5][7] == [0, 127, 128, 255, 256, 65535, 65536, U32_MAX]


def test_unset_store_event_info_defaults():
    (_, raw), = dump("store key=only-the-key replica=disk:/p\n")
    events = check_batch(raw)
    assert events == [["BlockStoreEvent", "only-the-key", [["disk", "/p"]], "", 0, "", "", []]]


@pytest.mark.parametrize("length", [0, 1, 31, 32, 255, 256, 65535, 65536])
def test_string_lengths_pack_canonically(length):
    spec = f"store key=*{length} model=*{length} hash=*{length} replica=memory:*{length}\n"
    (_, raw), = dump(spec)
    events = check_batch(raw)
    event = events[0]
    assert event[1] == "x" * length and event[3] == "x" * length
    assert event[2] == [["memory", "x" * length]]


@pytest.mark.parametrize("count", [0, 15, 16, 65535, 65536])
def test_token_list_lengths_pack_canonically(count):
    (_, raw), = dump(f"store key=k tokens=count:{count}\n")
    events = check_batch(raw)
    assert events[0][7] == list(range(count))


def test_batch_cap_and_seq_numbering():
    spec = "removeall\n" * 120
    batches = dump(spec)
    assert [seq for seq, _ in batches] == [0, 1, 2]
    assert [len(check_batch(raw)) for _, raw in batches] == [50, 50, 20]
    batches = dump(spec, "--max-events", "16")
    assert [len(check_batch(raw)) for _, raw in batches] == [16] * 7 + [8]
    assert [seq for seq, _ in batches] == list(range(8))


def test_flush_splits_batches():
    batches = dump("removeall\nflush\nflush\nupdate key=a\nupdate key=b\n")
    assert [seq for seq, _ in batches] == [0, 1]
    assert [len(check_batch(raw)) for _, raw in batches] == [1, 2]


def test_json_decoder_agrees_with_python():
    spec = MIXED_SPEC + "flush\nremoveall\n"
    expected = []
    for seq, raw in dump(spec):
        ts, events = msgpack.unpackb(raw, raw=False)
        for event in events:
            line = {"seq": seq, "ts": ts, "type": event[0]}
            if len(event) >= 3:
                line["key"] = event[1]
                line["replicas"] = [{"type": t, "location": l} for t, l in event[2]]
            if len(event) == 8:
                line.update(zip(
                    ["model_name", "block_size", "block_hash", "parent_block_hash", "token_ids"],
                    event[3:],
                ))
            expected.append(line)
    assert dump_json(spec) == expected


def test_bad_spec_is_refused():
    result = subprocess.run([str(DUMP)], input=b"store replica=ram:x\n", capture_output=True)
    assert result.returncode == 1
    assert b"bad directive" in result.stderr
