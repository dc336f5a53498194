#!/usr/bin/env python3
"""crescentd's restart from a state directory, end to end: the time from
starting crescentd on a copy of DIR (bench/durable_recover.c writes one) to
its first answered store call (`crescentctl ping`, then `exist` of a key the
directory holds), beside crescentd's own CPU time (utime + stime from
/proc, what the machine's load does not inflate), its resident size after
the `exist` (VmRSS, and VmHWM: the peak) and its "restored from" log line.  The ceiling of the same round: `cat` of the directory's files to
/dev/null (reading what a restart must read).

    CRESCENT_BIN_DIR=zig-out/bin python3 bench/durable_restart.py DIR [ROUNDS]

Each round copies DIR (a restart appends to the newest log) into a
temporary directory beside it, and prints `uptime`'s load average."""
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

BIN = os.environ.get("CRESCENT_BIN_DIR", "zig-out/bin")
KEY = "bench-object-00000000001"  # written again in place by the log: present


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mem_mib(pid):
    """VmRSS and VmHWM (the peak) of the process, MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def ceiling(state):
    t0 = time.monotonic()
    for name in sorted(os.listdir(state)):
        with open(os.path.join(state, name), "rb") as f:
            while f.read(8 << 20):
                pass
    return time.monotonic() - t0


def one_round(src, work):
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    rpc = f"tcp://127.0.0.1:{free_port()}"
    args = [os.path.join(BIN, "crescentd"), "--no-pin", "--http-address",
            f"127.0.0.1:{free_port()}", "--rpc-address", rpc,
            "--event-address", f"tcp://127.0.0.1:{free_port()}",
            "--replay-address", f"tcp://127.0.0.1:{free_port()}",
            "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
            "--mooncake-rpc-address", f"127.0.0.1:{free_port()}",
            "--metrics-port", str(free_port()), "--local-segment-size", "0",
            "--state-dir", work, "--durability", "async"]
    ctl = [os.path.join(BIN, "crescentctl"), "--rpc", rpc, "--timeout-ms", "500"]
    log = open(os.path.join(os.path.dirname(work), "restart.log"), "w+")
    t0 = time.monotonic()
    d = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        first = None
        while first is None:
            if d.poll() is not None:
                log.seek(0)
                sys.exit(f"crescentd exited {d.returncode}:\n{log.read()[-2000:]}")
            r = subprocess.run(ctl + ["ping"], capture_output=True)
            if r.returncode == 0:
                first = time.monotonic() - t0
            else:
                time.sleep(0.05)
        cpu = cpu_s(d.pid)
        # A loaded machine may take longer than the ping's 500 ms here.
        r = subprocess.run(ctl[:-1] + ["5000", "exist", KEY], capture_output=True)
        assert r.returncode == 0, f"{KEY} not restored: {r.stderr!r}"
        rss, hwm = mem_mib(d.pid)
    finally:
        d.send_signal(signal.SIGKILL)
        d.wait()
    log.seek(0)
    restored = [l.strip() for l in log if "restored from" in l]
    log.close()
    shutil.rmtree(work, ignore_errors=True)
    return first, cpu, restored[-1] if restored else "(no restore line)", rss, hwm


def main():
    src = sys.argv[1].rstrip("/")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    work = src + ".restart"
    firsts, cpus, ceils = [], [], []
    for i in range(rounds):
        c = ceiling(src)
        first, cpu, line, rss, hwm = one_round(src, work)
        firsts.append(first)
        cpus.append(cpu)
        ceils.append(c)
        print(f"round {i + 1} (load {load()}): ceiling (read the files) {c:.2f} s; "
              f"first answered call {first:.2f} s after start, crescentd CPU {cpu:.2f} s, "
              f"resident {rss:.0f} MiB (peak {hwm:.0f} MiB)\n"
              f"  {line}", flush=True)
    print(f"median of {rounds}: first answered call {statistics.median(firsts):.2f} s, "
          f"crescentd CPU {statistics.median(cpus):.2f} s, ceiling "
          f"{statistics.median(ceils):.2f} s")


if __name__ == "__main__":
    main()
