"""The README followed as a new user would: every sh and python example, in the
README's order, on one crescentd started as `scripts/run.sh` starts it (its
defaults: the 1 GiB local segment on).  A long-running command (a store server,
a mount --keepalive) runs in the background, as in its own terminal, and is
stopped with Ctrl-C at the end; variables a block sets stay set for the next
ones, as in one terminal; an
example that fails fails the test, naming it.  Left out, and why: the blocks
that install or build (scripts/run.sh, scripts/test.sh, scripts/setup.sh, zig
build: the test runs on the built tree) and the blocks that are not sh/python
(CURVE's key files under /etc, the C compiler line)."""
import json
import os
import re
import signal
import subprocess
import sys

from conftest import BIN_DIR, free_port, http_get, wait_for
from test_docs import ROOT, fenced_blocks, read, start

BUILD_STEPS = ("scripts/run.sh", "scripts/test.sh", "scripts/setup.sh", "zig build")


def readme_examples():
    """[(lang, body)] of the README's sh and python blocks, in order."""
    return [(lang, body) for lang, body, _, _ in fenced_blocks(read("README.md"))
            if lang in ("sh", "python") and not any(s in body for s in BUILD_STEPS)]


def segment_names(d):
    status, body = http_get(d.port, "/api/v1/segments")
    assert status == 200
    return {s["name"] for s in json.loads(body)["segments"]}


class Walkthrough:
    """Rewrites the README's default addresses to the test daemon's."""

    def __init__(self, d, env, tmp_path):
        self.d, self.env, self.tmp = d, env, str(tmp_path)
        self.rpc = env["CRESCENT_RPC"]
        self.native = d.args[d.args.index("--rpc-tcp-address") + 1]
        self.http = f"127.0.0.1:{d.port}"

    def localize(self, text):
        bins = os.path.abspath(BIN_DIR)
        # Run in a scratch directory: files the examples write stay there.
        # (/tmp/ first: the shared folder itself may live under /tmp, as in CI)
        text = text.replace("/tmp/", self.tmp + "/")
        text = text.replace("../shared/", os.path.abspath(os.path.join(ROOT, "..", "shared")) + "/")
        text = text.replace("crescent://127.0.0.1:50052", f"crescent://{self.native}")
        text = text.replace("tcp://127.0.0.1:50051", self.rpc)
        text = text.replace('"127.0.0.1:50051"', '"' + self.rpc[len("tcp://"):] + '"')
        text = text.replace("127.0.0.1:13333", self.http)
        text = text.replace("B=zig-out/bin", f"B={bins}").replace("zig-out/bin/", bins + "/")
        # crescent-bench and crescent-store take no environment: name the daemon.
        text = re.sub(r"(crescent-bench)( |$)", rf"\1 --rpc {self.rpc} --http {self.http}\2",
                      text, flags=re.M)
        text = re.sub(r"(crescent-store)( |$)", rf"\1 --master {self.rpc}\2", text, flags=re.M)
        return text


def run_python(body, w, where):
    first = body.splitlines()[0]
    path = "python/compat:python" if "python/compat" in first else "python"
    env = dict(w.env, PYTHONPATH=os.path.join(ROOT, path.split(":")[0]) +
               (":" + os.path.join(ROOT, "python") if ":" in path else ""))
    r = subprocess.run([sys.executable, "-c", w.localize(body)], env=env, cwd=w.tmp,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{where}\n{body}\n{r.stdout}\n{r.stderr}"


def test_readme_examples_run_in_order_on_a_default_daemon(daemon, tmp_path):
    d, env = start(daemon, "--local-segment-size", "1G")
    w = Walkthrough(d, env, tmp_path)
    background = []
    assignments = []  # a terminal keeps what earlier blocks set (B=..., export ...)
    examples = readme_examples()
    assert len(examples) >= 8, examples
    try:
        for n, (lang, body) in enumerate(examples):
            where = f"README example {n + 1} ({lang})"
            if lang == "python":
                run_python(body, w, where)
                continue
            command = w.localize(body)
            lines = [l for l in command.splitlines() if l.strip() and not l.startswith("#")]
            if len(lines) == 1 and ("crescent-store" in lines[0] or "--keepalive" in lines[0]):
                # Runs until Ctrl-C, in its own terminal: wait for its segment.
                before = segment_names(d)
                p = subprocess.Popen(["bash", "-c", "exec " + lines[0].split("#")[0]], env=env,
                                     cwd=w.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
                background.append(p)
                wait_for(lambda: len(segment_names(d) - before) == 1 or p.poll() is not None,
                         f"{where} mounts its segment")
                assert p.poll() is None, f"{where}\n{body}\n{p.stderr.read()}"
                continue
            script = "\n".join(assignments + [command])
            assignments += [l for l in command.splitlines()
                            if re.match(r"^(export )?[A-Z_]+=", l)]
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=w.tmp,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, f"{where}\n{body}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    finally:
        for p in background:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
            _, err = p.communicate(timeout=30)
            assert p.returncode == 0, err
    # Ctrl-C unmounted what the store servers mounted: only the local segment is left.
    wait_for(lambda: len(segment_names(d)) == 1, "the store servers' segments unmounted")
