"""Every flag of Mooncake's master, driven from docs/mooncake-flags.tsv (generated
from the reference's own --help at the commit on its first line): each is
honoured (crescent's setting takes the value; or the one value crescent does is
accepted; or the reference ignores it too) or refused with a named reason.
crescentd --print-config resolves the command line without starting anything."""
import json
import os
import re
import subprocess

import pytest

from conftest import binary

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TSV = os.path.join(ROOT, "docs", "mooncake-flags.tsv")
DOC = os.path.join(ROOT, "docs", "mooncake.md")


def reference():
    with open(TSV) as f:
        lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
    header = lines[0].split("\t")
    return {row[0]: dict(zip(header, row)) for row in (l.split("\t") for l in lines[1:])}


def table():
    out = subprocess.run([binary("crescentd"), "--help-mooncake"], capture_output=True,
                         text=True, timeout=30, check=True).stdout.splitlines()
    header = out[0].split("\t")
    return {row[0]: dict(zip(header, row)) for row in (l.split("\t") for l in out[1:])}


def crescentd(*args, cwd=None):
    return subprocess.run([binary("crescentd"), "--print-config", *args], capture_output=True,
                          text=True, timeout=30, cwd=cwd)


def resolved(*args):
    r = crescentd(*args)
    assert r.returncode == 0, (args, r.stderr)
    return json.loads(r.stdout)


# A value for each flag crescent honours through one of its settings, different
# from crescent's default, and what the setting then holds.  A flag switched to
# SETTING without an entry here fails test_every_flag.
SETTING_VALUES = {
    "allow_evict_soft_pinned_objects": ("false", False),
    "client_ttl": ("7", 7),
    "cluster_id": ("prod-a", "prod-a"),
    "global_file_segment_size": ("1G", 1 << 30),
    "root_fs_dir": ("/mnt/dfs", "/mnt/dfs"),
    "default_kv_lease_ttl": ("10000", 10000),
    "default_kv_soft_pin_ttl": ("2m", 120000),
    "eviction_high_watermark_ratio": ("0.9", 0.9),
    "eviction_ratio": ("0.1", 0.1),
    "max_total_finished_tasks": ("123", 123),
    "metrics_host": ("0.0.0.0", "0.0.0.0"),
    "metrics_port": ("9100", 9100),
    "put_start_discard_timeout_sec": ("40", 40),
    "put_start_release_timeout_sec": ("700", 700),
    "enable_http_metadata_server": ("true", True),
    "enable_metadata_cleanup_on_timeout": ("true", True),
    "cluster_id": ("prod-a", "prod-a"),
    "enable_ha": ("true", True),
    "etcd_endpoints": ("10.0.0.1:2379;10.0.0.2:2379", "10.0.0.1:2379;10.0.0.2:2379"),
    "http_metadata_server_host": ("127.0.0.2", "127.0.0.2"),
    "http_metadata_server_port": ("18080", 18080),
    "promotion_admission_threshold": ("3", 3),
    # Mooncake's RPC flags edit the host or port of its own endpoint
    # (--mooncake-rpc-address), a setting of another name: (value, expected, key).
    "port": ("5555", "127.0.0.1:5555", "mooncake_rpc_address"),
    "rpc_port": ("5556", "127.0.0.1:5556", "mooncake_rpc_address"),
    "rpc_address": ("127.0.0.2", "127.0.0.2:50053", "mooncake_rpc_address"),
}

# Honoured with a warning: crescent's Mooncake endpoint runs on the store's own
# thread, so a thread count has no effect; the value must still be a number.
WARNED = {"rpc_thread_num", "max_threads"}

# A refusal names crescent's equivalent (a --flag or a command) or says why none.
NAMED = re.compile(r"--[a-z]|crescentctl|not supported yet|crescent has no|not built|crescentd does not|"
                   r"crescent does not|cannot|ignores it")


def test_table_covers_the_reference_exactly():
    ref, ours = reference(), table()
    assert len(ref) == 97
    assert sorted(ref) == sorted(ours), (set(ref) ^ set(ours))
    for name, row in ours.items():
        assert row["kind"] in ("setting", "when", "ignored", "refused", "switch"), row
        if row["kind"] != "setting":
            assert NAMED.search(row["reason"]), row


@pytest.mark.parametrize("name", sorted(reference()))
def test_every_flag(name):
    ref, row = reference()[name], table()[name]
    kind, is_bool = row["kind"], ref["type"] == "bool"
    if kind == "setting" and name in WARNED:
        r = crescentd(f"--{name}=4")
        assert r.returncode == 0 and "has no effect" in r.stderr, r.stderr
        assert crescentd(f"--{name}=many").returncode == 2
        return
    if kind == "setting":
        value, expected, *key = SETTING_VALUES[name]
        key = key[0] if key else row["target"].replace("-", "_")
        assert resolved()[key] != expected, "pick a value that differs from the default"
        assert resolved(f"--{name}={value}")[key] == expected
        if is_bool:
            assert resolved(f"--no{name}")[key] is False
            assert resolved(f"-{name}")[key] is True
            assert resolved(f"--{name}", "0")[key] is False
        else:
            assert resolved(f"-{name}", value)[key] == expected
        return
    if kind == "switch":
        key = row["target"].replace("-", "_")
        assert resolved()[key] != 0, "a switch turns off a feature that is on by default"
        assert resolved(f"--{name}=true")[key] == resolved()[key]
        for off in (f"--{name}=false", f"--no{name}"):
            assert resolved(off)[key] == 0
        assert crescentd(f"--{name}=maybe").returncode == 2
        return
    if kind == "ignored":
        assert crescentd(f"--{name}=x" if not is_bool else f"--{name}").returncode == 0
        return
    if kind == "when":
        assert crescentd(f"--{name}={row['target']}").returncode == 0
        if is_bool:
            other = "true" if row["target"] == "false" else "false"
            assert crescentd(f"--no{name}" if other == "false" else f"--{name}").returncode == 2
        else:
            other = "something-else"
        r = crescentd(f"--{name}={other}")
    else:
        default = ref["default"].strip('"') or "x"
        r = crescentd(f"--{name}" if is_bool else f"--{name}={default}")
    assert r.returncode == 2, r.stdout
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"--{name}" in r.stderr and row["reason"] in r.stderr, r.stderr


def test_gflags_value_forms():
    assert resolved("--client_ttl", "9")["client_ttl"] == 9
    assert resolved("-client_ttl=9")["client_ttl"] == 9
    for text, want in (("true", True), ("false", False), ("1", True), ("0", False),
                       ("yes", True), ("n", False)):
        assert resolved(f"--allow_evict_soft_pinned_objects={text}")[
            "allow_evict_soft_pinned_objects"] is want
    assert resolved("--enable_ha=false", "--enable_ha", "0", "--noenable_ha")["client_ttl"] == 10
    r = crescentd("--allow_evict_soft_pinned_objects=maybe")
    assert r.returncode == 2 and "not true or false" in r.stderr
    r = crescentd("--client_ttl")
    assert r.returncode == 2 and "needs a value" in r.stderr


def test_flagfile(tmp_path):
    inner = tmp_path / "inner.flags"
    inner.write_text("--eviction_ratio=0.2\n")
    outer = tmp_path / "master.flags"
    outer.write_text(f"# Mooncake launch flags\n\n--client_ttl=11\n  --enable_ha=false\n"
                     f"--flagfile={inner}\n--metrics-port=0\n")
    conf = resolved(f"--flagfile={outer}")
    assert (conf["client_ttl"], conf["eviction_ratio"], conf["metrics_port"]) == (11, 0.2, 0)
    # flags after the file win, as in gflags
    assert resolved("--flagfile", str(outer), "--client_ttl=12")["client_ttl"] == 12
    outer.write_text("--enable_oplog=true\n")
    r = crescentd(f"--flagfile={outer}")
    assert r.returncode == 2 and "--enable_oplog" in r.stderr
    outer.write_text("client_ttl=3\n")
    r = crescentd(f"--flagfile={outer}")
    assert r.returncode == 2 and ":1:" in r.stderr
    outer.write_text(f"--flagfile={outer}\n")
    r = crescentd(f"--flagfile={outer}")
    assert r.returncode == 2 and "loop" in r.stderr
    r = crescentd(f"--flagfile={tmp_path / 'nope'}")
    assert r.returncode == 2 and "No such file" in r.stderr


def test_crescent_rpc_address_endpoint_is_not_mooncakes_host():
    conf = resolved("--rpc_address", "tcp://127.0.0.1:6000")
    assert conf["rpc_address"] == "tcp://127.0.0.1:6000"
    # A host is Mooncake's: the host of the Mooncake endpoint, crescent's stays.
    conf = resolved("--rpc_address", "127.0.0.2")
    assert conf["mooncake_rpc_address"] == "127.0.0.2:50053"
    assert conf["rpc_address"] == "tcp://127.0.0.1:50051"


@pytest.mark.parametrize("args", [["--rpc-tcp-address", ""], ["--rpc-tcp-address="],
                                  ["--rpc_tcp_address", ""]])
def test_rpc_tcp_address_empty_is_off(args):
    assert resolved(*args)["rpc_tcp_address"] == ""


def test_rpc_tcp_address_empty_in_config_file(tmp_path):
    conf = tmp_path / "c.json"
    conf.write_text('{"rpc_tcp_address": ""}')
    assert resolved("--config", str(conf))["rpc_tcp_address"] == ""
    # an address setting without an "off" still wants one
    r = crescentd("--rpc-address", "")
    assert r.returncode == 2 and "rpc-address" in r.stderr


def test_print_config_round_trips(tmp_path):
    conf = resolved("--client-ttl", "33", "--metrics-host", "0.0.0.0")
    path = tmp_path / "c.json"
    path.write_text(json.dumps(conf))
    assert resolved("--config", str(path)) == conf


def test_docs_list_every_flag_with_its_kind():
    text = open(DOC).read()
    commit = open(TSV).readline().split("commit ")[1].split(";")[0]
    assert commit in text
    for name, row in table().items():
        m = re.search(rf"^\| `--{name}` \| (\w+) \|", text, re.M)
        assert m is not None, f"docs/mooncake.md has no row for --{name}"
        assert m.group(1) == row["kind"], name


def test_promotion_flags_change_promotion():
    """--promotion_admission_threshold is crescent's --promotion-hits, and
    --promotion_on_hit=false turns promotion off whatever the order; the
    resolved value is what the segments actor hands the store (docs/tiers.md)."""
    assert resolved()["promotion_hits"] == 2
    assert resolved("--promotion_admission_threshold", "3")["promotion_hits"] == 3
    assert resolved("--promotion_admission_threshold=3",
                    "--promotion_on_hit=true")["promotion_hits"] == 3
    assert resolved("--promotion_on_hit=false",
                    "--promotion_admission_threshold=3")["promotion_hits"] == 0
    assert resolved("--promotion-hits=5", "--nopromotion_on_hit")["promotion_hits"] == 0
    assert resolved("--promotion_on_hit=false", "--promotion_on_hit")["promotion_hits"] == 2
    r = crescentd("--promotion_admission_threshold=many")
    assert r.returncode == 2 and "promotion-hits" in r.stderr, r.stderr
