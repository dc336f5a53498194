"""The documentation cannot drift: every example in docs/http-api.md runs against
a real crescentd and its answer is compared with the one shown; the indexer
config file shown there starts a crescentd; the README's walkthrough runs as
written and still works after crescentd's client TTL has passed."""
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import BIN_DIR, free_port, http_get, wait_for

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOC_PORT = "127.0.0.1:13333"
# Values that differ from run to run: compared by type only.
VOLATILE = {"uptime_seconds", "version", "ts", "put_start", "last_access", "messages_handled", "parks", "wakes", "timers_fired", "rings",
            "ring_depth", "bytes_used", "index_bytes", "cpu"}
ELLIPSIS = "…"


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def fenced_blocks(text):
    """[(lang, body, start, end)] for every ``` block, in order."""
    return [(m.group(1), m.group(2), m.start(), m.end())
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def examples(text):
    """[(command, (lang, expected) or None)]: each sh block and the answer block
    right after it, if any."""
    blocks = fenced_blocks(text)
    out = []
    for i, (lang, body, _, end) in enumerate(blocks):
        if lang != "sh":
            continue
        answer = None
        if i + 1 < len(blocks) and blocks[i + 1][0] in ("json", "http", "text") and \
                text[end:blocks[i + 1][2]].strip() == "":
            answer = (blocks[i + 1][0], blocks[i + 1][1])
        out.append((body, answer))
    return out


def same_json(expected, actual, where="$", key=None):
    """Asserts actual matches expected: "…" matches anything, a "…" key allows
    more keys, a last "…" element more elements; VOLATILE keys by type."""
    if expected == ELLIPSIS:
        return
    if key in VOLATILE:
        assert type(actual) is type(expected) or (
            isinstance(actual, (int, float)) and isinstance(expected, (int, float))), where
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
        keys = set(expected) - {ELLIPSIS}
        if ELLIPSIS in expected:
            assert keys <= set(actual), f"{where}: missing {keys - set(actual)}"
        else:
            assert keys == set(actual), f"{where}: keys {sorted(actual)} != {sorted(keys)}"
        for k in keys:
            same_json(expected[k], actual[k], f"{where}.{k}", k)
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: {actual!r} is not an array"
        open_ended = expected and expected[-1] == ELLIPSIS
        items = expected[:-1] if open_ended else expected
        if open_ended:
            assert len(actual) >= len(items), f"{where}: {len(actual)} elements"
        else:
            assert len(actual) == len(items), f"{where}: {len(actual)} != {len(items)} elements"
        for n, (e, a) in enumerate(zip(items, actual)):
            same_json(e, a, f"{where}[{n}]")
    elif isinstance(expected, float) or isinstance(actual, float):
        assert isinstance(actual, (int, float)) and abs(actual - expected) <= 1e-9 * max(
            1.0, abs(expected)), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def line_pattern(line):
    """A text answer's line: exact, except a trailing number (a sample value)."""
    m = re.match(r"^(.*\s)(-?[0-9][0-9.e+-]*)$", line)
    if m is None:
        return re.compile(re.escape(line) + "$")
    return re.compile(re.escape(m.group(1)) + r"-?[0-9][0-9.e+-]*$")


def check_answer(answer, out):
    lang, expected = answer
    if lang == "json":
        same_json(json.loads(expected), json.loads(out))
    elif lang == "text":
        lines = out.splitlines()
        at = 0
        for want in expected.splitlines():
            pattern = line_pattern(want)
            while at < len(lines) and not pattern.match(lines[at]):
                at += 1
            assert at < len(lines), f"line {want!r} not found (in order) in:\n{out}"
            at += 1
    else:  # http: status line, headers that must be there, blank line, JSON body
        head, _, body = out.replace("\r\n", "\n").partition("\n\n")
        want_head, _, want_body = expected.partition("\n\n")
        status, *headers = head.split("\n")
        want_status, *want_headers = want_head.split("\n")
        assert status == want_status
        lowered = {h.lower() for h in headers}
        for h in want_headers:
            assert h.lower() in lowered, f"header {h!r} missing from {headers}"
        if want_body.lstrip().startswith(("{", "[")):
            same_json(json.loads(want_body), json.loads(body))
        else:
            assert body.strip() == want_body.strip(), body


def shell(command, env, timeout=60):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def doc_env(d, rpc, events, replay):
    env = dict(os.environ, CRESCENT_HTTP=f"127.0.0.1:{d.port}", CRESCENT_RPC=rpc,
               CRESCENT_EVENTS=events, CRESCENT_REPLAY=replay)
    env.pop("CRESCENT_CLIENT_ID", None)
    return env


def localize(command, d):
    """The doc's commands name the default ports and zig-out/bin."""
    metrics = d.args[d.args.index("--metrics-port") + 1]
    return command.replace(DOC_PORT, f"127.0.0.1:{d.port}").replace(
        "127.0.0.1:9003", f"127.0.0.1:{metrics}").replace(
        "zig-out/bin/", os.path.abspath(BIN_DIR) + "/").replace(
        "B=zig-out/bin", f"B={os.path.abspath(BIN_DIR)}")


def start(daemon, *extra):
    rpc, events, replay = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
    d = daemon("--rpc-address", rpc, "--event-address", events, "--replay-address", replay,
               *extra)
    return d, doc_env(d, rpc, events, replay)


def test_http_api_examples(daemon):
    d, env = start(daemon, "--client-ttl", "600")
    found = examples(read("docs/http-api.md"))
    assert len(found) >= 20
    for command, answer in found:
        result = shell(localize(command, d), env)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        if answer is not None:
            try:
                check_answer(answer, result.stdout)
            except AssertionError as e:
                raise AssertionError(f"{command}\nanswered:\n{result.stdout}\n{e}") from e


def test_http_api_indexer_config_example(daemon, tmp_path):
    text = read("docs/http-api.md")
    section = text[text.index("## The indexer's config file"):]
    conf = [body for lang, body, _, _ in fenced_blocks(section) if lang == "json"][0]
    path = tmp_path / "conductor_config.json"
    path.write_text(conf)
    d, _ = start(daemon, "--indexer-config", str(path))
    status, body = http_get(d.port, "/services")
    assert status == 200
    names = sorted(s["instance_id"] for s in json.loads(body)["services"])
    assert names == sorted(json.loads(conf)["kvevent_instance"])


def walkthrough_blocks():
    text = read("README.md")
    section = text[text.index("## Using it"):]
    section = section[:section.index("\n## ", 1)]
    return [body for lang, body, _, _ in fenced_blocks(section) if lang == "sh"]


def segment_names(d):
    status, body = http_get(d.port, "/api/v1/segments")
    assert status == 200
    return {s["name"] for s in json.loads(body)["segments"]}


def test_readme_walkthrough_outlives_the_client_ttl(daemon):
    """Terminal 1's store server keeps seg0 mounted; terminal 2's commands all
    succeed, and `replicas key1` still does once crescentd has expired a client
    that stayed quiet; Ctrl-C in terminal 1 unmounts seg0."""
    d, env = start(daemon, "--client-ttl", "1")
    terminal1, terminal2 = walkthrough_blocks()
    rpc = env["CRESCENT_RPC"]
    keeper = subprocess.Popen(["bash", "-c", "exec " + localize(terminal1, d).strip().replace(
                                  "crescent-store ", f"crescent-store --master {rpc} ")],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        wait_for(lambda: "seg0" in segment_names(d) or keeper.poll() is not None,
                 "terminal 1 mounts seg0")
        assert keeper.poll() is None, keeper.stderr.read()
        result = shell(localize(terminal2, d), env)
        assert result.returncode == 0, result.stderr
        assert "COMPLETE" in result.stdout and '"key":"key1"' in result.stdout
        # A client that mounts and goes quiet: once crescentd has dropped it,
        # more than a TTL has passed for the walkthrough too.
        probe = shell(f"{BIN_DIR}/crescentctl mount probe 1M --endpoint 10.0.0.9:1", env)
        assert probe.returncode == 0, probe.stderr
        wait_for(lambda: "probe" not in segment_names(d), "crescentd expires a quiet client")
        assert "seg0" in segment_names(d)
        again = shell(f"{BIN_DIR}/crescentctl replicas key1", env)
        assert again.returncode == 0, again.stderr
        assert "COMPLETE" in again.stdout
    finally:
        os.killpg(keeper.pid, signal.SIGINT)
        out, err = keeper.communicate(timeout=30)
    assert keeper.returncode == 0, err
    assert "seg0" not in segment_names(d)


def test_readme_run_command_stores_a_file(daemon, tmp_path):
    """The README's first walkthrough: crescentd as run.sh starts it (its local
    segment on, the default size named because conftest turns it off) stores a
    file with `crescentctl put` and gives the same bytes back with `get`."""
    d, env = start(daemon, "--local-segment-size", "1G")
    text = read("README.md")
    block = next(body for lang, body, _, _ in fenced_blocks(text)
                 if lang == "sh" and "crescentctl put kv-block" in body)
    # The README's own /tmp paths, before the binaries' path goes in: a
    # checkout under /tmp must keep its zig-out/bin.
    command = localize(block.replace("/tmp/", f"{tmp_path}/"), d)
    result = shell(command, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "same"
    assert (tmp_path / "kv-copy.bin").read_bytes() == (tmp_path / "kv-block.bin").read_bytes()
