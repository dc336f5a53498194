"""The two processes of test_mooncake_client.py, run with Mooncake's own
client (PYTHONPATH = ../shared/mooncake, Debian's /usr/bin/python3):

  mooncake_roles.py A MASTER METADATA READY DONE   hosts a segment, puts, waits
  mooncake_roles.py B MASTER METADATA              gets from A's segment, removes
  mooncake_roles.py C MASTER METADATA              calls upsert (a call crescentd does not serve)
  mooncake_roles.py D MASTER METADATA READY        hosts a segment and idles until killed

Each prints one JSON line of what every call returned, for the test to
compare between mooncake_master and crescentd."""
import json
import os
import sys
import time

from mooncake.store import MooncakeDistributedStore

VALUE = bytes(range(256)) * 400 + b"tail"  # 102404 bytes, not one repeated byte
HASH_KEYS = ["0x1f2e3d4c5b6a7988", "1234567890123456789"]


def setup(master, metadata):
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", metadata, 64 << 20, 16 << 20, "tcp", "", master)
    return s, rc


def role_a(master, metadata, ready, done):
    s, rc = setup(master, metadata)
    out = {"setup": rc}
    if rc == 0:
        out["put"] = s.put("k", VALUE)
        out["put_duplicate"] = s.put("k", b"other")
        out["put_batch"] = s.put_batch(["b1", "b2", "c1"], [b"1" * 1000, b"2" * 2000, b"3" * 3000])
        # Keys in Mooncake's block-hash form (a u64 sequence hash, hex or decimal).
        out["put_hash_keys"] = s.put_batch(HASH_KEYS, [b"h" * 500, b"d" * 500])
        out["is_exist"] = s.is_exist("k")
    print(json.dumps(out), flush=True)
    open(ready, "w").write("ready")
    deadline = time.monotonic() + 120
    while not os.path.exists(done) and time.monotonic() < deadline:
        time.sleep(0.05)
    if rc == 0:
        s.close()


def role_b(master, metadata):
    s, rc = setup(master, metadata)
    out = {"setup": rc}
    if rc == 0:
        got = s.get("k")
        out["get_len"] = len(got)
        out["get_equal"] = got == VALUE
        out["get_missing"] = len(s.get("nope"))
        out["is_exist"] = [s.is_exist("k"), s.is_exist("nope")]
        out["batch_is_exist"] = s.batch_is_exist(["k", "b1", "nope"])
        out["get_batch"] = [bytes(x)[:1].decode() + str(len(x)) for x in
                            s.get_batch(["b1", "b2", "nope"])]
        out["remove_under_lease"] = s.remove("k")
        out["remove_missing"] = s.remove("nope")
        out["remove_force"] = s.remove("k", True)
        out["is_exist_after_remove"] = s.is_exist("k")
        out["remove_by_regex_under_lease"] = s.remove_by_regex("^b")
        out["batch_remove"] = s.batch_remove(["c1", "nope"])
        out["get_size_removed"] = s.get_size("c1")
        out["remove_by_regex_force"] = s.remove_by_regex("^b", True)
        out["is_exist_b1"] = s.is_exist("b1")
        out["remove_all"] = s.remove_all()
        s.close()
    print(json.dumps(out), flush=True)


def role_c(master, metadata):
    s, rc = setup(master, metadata)
    out = {"setup": rc}
    if rc == 0:
        out["upsert"] = s.upsert("u", b"x" * 100)
        out["is_exist_after"] = s.is_exist("k")  # the connection still serves
        s.close()
    print(json.dumps(out), flush=True)


def role_d(master, metadata, ready):
    """Mounts a segment (its Transfer Engine publishes the segment's keys on
    the metadata server), says its name, then waits to be killed."""
    s, rc = setup(master, metadata)
    print(json.dumps({"setup": rc, "name": s.get_hostname() if rc == 0 else ""}), flush=True)
    open(ready, "w").write("ready")
    time.sleep(600)


if __name__ == "__main__":
    if sys.argv[1] == "A":
        role_a(*sys.argv[2:6])
    elif sys.argv[1] == "B":
        role_b(*sys.argv[2:4])
    elif sys.argv[1] == "D":
        role_d(*sys.argv[2:5])
    else:
        role_c(*sys.argv[2:4])
