#!/usr/bin/env bash
# Runs bench/ring ROUNDS times (default 5) with the asymmetric park barrier
# (the default) and, interleaved, with a full fence on every send
# (CRESCENT_NO_MEMBARRIER=1, the baseline), then prints the median of every
# case for both and their ratio.  Interleaving puts both under the same
# machine load, so the ratio means something even on a busy 2-core machine.
#   scripts/bench-ring.sh [ROUNDS] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
node_modules/.bin/zig build bench
out=$(mktemp -d)
for i in $(seq 1 "$rounds"); do
    zig-out/bench/ring "$@" > "$out/asym.$i"
    CRESCENT_NO_MEMBARRIER=1 zig-out/bench/ring "$@" 2>/dev/null > "$out/fence.$i"
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(kind):
    cases = {}
    for i in range(1, rounds + 1):
        for line in open(f"{out}/{kind}.{i}"):
            m = re.match(r"(.{44})\s+(\d+) ops/s(.*)", line.rstrip("\n"))
            if not m:
                continue
            name = m.group(1).strip()
            lat = dict(re.findall(r"(p\d+)\s+([\d.]+) us", m.group(3)))
            cases.setdefault(name, []).append((int(m.group(2)), lat))
    return cases
asym, fence = load("asym"), load("fence")
print(f"bench/ring medians of {rounds} interleaved runs: asymmetric barrier vs full fence per send")
for name, runs in asym.items():
    med = statistics.median(r[0] for r in runs)
    base = statistics.median(r[0] for r in fence.get(name, [(0, {})]))
    lat = ""
    if runs[0][1]:
        p = lambda k, rs: statistics.median(float(r[1][k]) for r in rs)
        lat = (f"  p50 {p('p50', runs):.2f} us  p99 {p('p99', runs):.2f} us  p999 {p('p999', runs):.2f} us"
               f"  (fence p50 {p('p50', fence[name]):.2f} us)")
    ratio = med / base if base else float("nan")
    print(f"{name:44s} {med:12.0f} ops/s  fence {base:12.0f}  x{ratio:.2f}{lat}")
PY
rm -rf "$out"
