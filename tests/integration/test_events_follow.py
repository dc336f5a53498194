"""`crescentctl events --follow` behind a slow reader, against a fake
publisher (kv_publishers.Publisher in the store's layout): the follower's
live buffer is bounded, so a reader that stops reading costs bounded memory
and the batches the publisher then drops come back by replay or are
reported as a gap -- never printed twice, never silently missing."""
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import time

import kv_publishers as kp
from conftest import binary

STALLED_BATCHES = 150000  # published while nobody reads the follower's stdout
RSS_GROWTH_MAX_KB = 10 * 1024  # 10000 unread tiny batches take about 2 MiB
HISTORY = 1000  # the fake publisher's replay buffer
REPLAY_STALL_S = 5  # crescentctl gives up on a replay silent this long


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


class Output:
    """The follower's stdout, read only when the test says so."""

    def __init__(self, proc):
        self.fd = proc.stdout.fileno()
        fcntl.fcntl(self.fd, fcntl.F_SETFL, os.O_NONBLOCK)
        self.buf = b""  # a partial line
        self.seqs = []

    def read(self, timeout_s):
        """Reads what is there (waiting up to timeout_s for something)."""
        got = False
        while select.select([self.fd], [], [], 0 if got else timeout_s)[0]:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            lines = (self.buf + chunk).split(b"\n")
            self.buf = lines.pop()
            self.seqs += [json.loads(line)["seq"] for line in lines]
            got = True
        return got


def joined(proc, pub):
    """The follower's Output once it printed a batch, and the batch sent."""
    out = Output(proc)
    batch = kp.batch([kp.store_remove_all()], "store")
    deadline = time.monotonic() + 10
    while not out.read(0.05):  # the SUB joins asynchronously
        assert time.monotonic() < deadline, "the follower printed nothing"
        pub.send(batch)
    return out, batch


def test_slow_reader_costs_bounded_memory_and_gaps_are_replayed_or_reported():
    # A small kernel send buffer, so that what a stalled follower cannot take
    # is dropped by the PUB rather than queued in the kernel.
    pub = kp.Publisher(topic=b"mooncake", replay_layout="store", history_max=HISTORY,
                       sndbuf=1 << 16)
    proc = subprocess.Popen([binary("crescentctl"), "events", "--follow", "--sub", pub.endpoint,
                             "--replay", pub.replay_endpoint],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, batch = joined(proc, pub)
        # The reader stalls: crescentctl blocks on its full stdout pipe while
        # the publisher goes on.
        before_kb = rss_kb(proc.pid)
        for _ in range(STALLED_BATCHES):
            pub.send(batch)
        time.sleep(0.2)  # what libzmq will take in is in by now
        growth_kb = rss_kb(proc.pid) - before_kb
        assert growth_kb < RSS_GROWTH_MAX_KB, f"{growth_kb} KiB held for a stalled reader"
        # The reader comes back; a batch after the drops shows the hole by seq.
        last = None
        deadline = time.monotonic() + 30
        while (not out.seqs or out.seqs[-1] != last) and time.monotonic() < deadline:
            if not out.read(0.1):
                last = pub.send(batch)
        seqs = out.seqs
        assert seqs[-1] == last, "the follower did not catch up"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        pub.close()
    err = err.decode()
    assert "did not answer" not in err, err
    gaps = [(int(a), int(b)) for a, b in re.findall(r"batches (\d+)\.\.(\d+) were missed", err)]
    # Printed once each, in order; every seq not printed was reported.
    assert seqs == sorted(set(seqs))
    reported = {s for a, b in gaps for s in range(a, b + 1)}
    assert reported.isdisjoint(seqs)
    assert set(seqs) | reported == set(range(seqs[0], last + 1))
    # The bound made the publisher drop: the follower asked for a replay and
    # got the last HISTORY batches from it.
    assert pub.replay_requests, "nothing was dropped: is the live buffer unbounded?"
    assert gaps and set(range(last - HISTORY + 1, last + 1)) <= set(seqs)


def test_a_follower_stopped_while_its_replay_answers_still_takes_the_answer():
    # The follower asks for a replay and is then kept from running (its
    # stdout full, a loaded machine; here SIGSTOP) for longer than a replay
    # may stall, while the answer waits in its socket.  The answer was not
    # late: the hole is filled from it, not reported as missed.
    pub = kp.Publisher(topic=b"mooncake", replay_layout="store")
    proc = subprocess.Popen([binary("crescentctl"), "events", "--follow", "--sub", pub.endpoint,
                             "--replay", pub.replay_endpoint],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, batch = joined(proc, pub)
        pub.replay_gate.clear()  # hold the answer back
        pub.replay_seen.clear()
        lost = pub.send(batch, deliver=False)
        deadline = time.monotonic() + 30
        while not pub.replay_seen.is_set():  # a batch after the hole makes it ask
            assert time.monotonic() < deadline, "the follower never asked for a replay"
            last = pub.send(batch)
            pub.replay_seen.wait(0.1)
        os.kill(proc.pid, signal.SIGSTOP)
        pub.replay_gate.set()  # answered now; the follower reads it only when it runs again
        time.sleep(REPLAY_STALL_S + 1)  # the stimulus: stopped past the replay's bound
        os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while last not in out.seqs or lost not in out.seqs:
            assert time.monotonic() < deadline, f"printed {out.seqs[-5:]}, not {lost} and {last}"
            out.read(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        pub.close()
    err = err.decode()
    assert "did not answer" not in err and "were missed" not in err, err


def test_events_help_tells_the_bound():
    proc = subprocess.run([binary("crescentctl"), "events", "--help"], capture_output=True,
                          text=True, timeout=10)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: crescentctl") and "events --follow" in proc.stdout.splitlines()[0]
    assert "At most 10000 unread" in proc.stdout
