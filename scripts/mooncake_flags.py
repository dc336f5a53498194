#!/usr/bin/env python3
"""Regenerates docs/mooncake-flags.tsv, the reference list of Mooncake master's
flags, from the reference binary's own gflags help:

    scripts/mooncake_flags.py /path/to/bin/mooncake_master COMMIT > docs/mooncake-flags.tsv

`mooncake_master --helpon=master` lists exactly the flags defined in
mooncake-store/src/master.cpp (not glog's or other libraries'), with their
types and defaults as compiled in. COMMIT is the Mooncake commit the binary was
built from; it goes into the file's first line so the list says where it came from.
Columns: flag, type, default (as gflags prints it), help (one line).

    scripts/mooncake_flags.py --markdown zig-out/bin/crescentd > docs/mooncake-flags.md.part

    scripts/mooncake_flags.py --endpoints master_admin_service.cpp COMMIT > docs/mooncake-endpoints.tsv

lists the reference's admin routes (method, path);
    scripts/mooncake_flags.py --metrics SAVED_METRICS COMMIT > docs/mooncake-metrics.tsv
lists the metric families a bare mooncake_master serves on /metrics (curl it first).  --markdown prints docs/mooncake.md's flag table: each reference flag with what crescentd
does with it (crescentd --help-mooncake), for pasting between the markers."""
import re
import subprocess
import sys


def parse(text):
    entries, current = [], None
    for line in text.splitlines():
        m = re.match(r"^    -(\w+) \((.*)$", line)
        if m:
            current = [m.group(1), m.group(2)]
            entries.append(current)
        elif current is not None and line.startswith("      "):
            current[1] += " " + line.strip()
    flags = []
    for name, rest in entries:
        m = re.match(r"^(.*)\) type: (\w+) default: (.*)$", rest)
        if m is None:
            raise SystemExit(f"cannot parse the help of -{name}: {rest!r}")
        help_text, type_, default = m.groups()
        flags.append((name, type_, default.strip(), re.sub(r"\s+", " ", help_text).strip()))
    return flags


def markdown(crescentd):
    import os
    tsv = os.path.join(os.path.dirname(__file__), "..", "docs", "mooncake-flags.tsv")
    with open(tsv) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if not l.startswith("#")][1:]
    out = subprocess.run([crescentd, "--help-mooncake"], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1:]
    ours = {l.split("\t")[0]: l.split("\t") for l in out}
    print("| flag | crescent | reference default | what crescentd does |")
    print("|---|---|---|---|")
    for name, _type, default, _help in rows:
        _, kind, target, reason = ours[name]
        if kind == "setting":
            what = f"`--{target}` takes the value"
        elif kind == "when":
            what = f"accepted as `={target}`; other values refused: {reason}"
        elif kind == "switch":
            what = f"turns crescent's `--{target}` feature on or off: {reason}"
        elif kind == "ignored":
            what = "accepted and ignored: " + reason
        else:
            what = "refused: " + reason
        print(f"| `--{name}` | {kind} | `{default}` | {what} |")


def endpoints(source, commit):
    """docs/mooncake-endpoints.tsv from master_admin_service.cpp's RegisterHandler."""
    text = open(source).read()
    found = re.findall(r'set_http_handler<(\w+)>\(\s*"([^"]+)"', text)
    print(f"# master_admin_service.cpp's routes, kvcache-ai/Mooncake commit {commit}; "
          f"{len(found)} routes; regenerate with scripts/mooncake_flags.py --endpoints")
    print("method\tpath")
    for method, path in found:
        print(f"{'DELETE' if method == 'DEL' else method}\t{path}")


def metrics(path, commit):
    """docs/mooncake-metrics.tsv from a bare mooncake_master's GET /metrics (saved)."""
    helps, types = {}, {}
    for line in open(path):
        m = re.match(r"^# (HELP|TYPE) (\S+) ?(.*)$", line.rstrip("\n"))
        if m:
            (helps if m.group(1) == "HELP" else types)[m.group(2)] = m.group(3)
    print(f"# mooncake_master's GET /metrics, kvcache-ai/Mooncake commit {commit}; "
          f"{len(types)} metrics; regenerate with scripts/mooncake_flags.py --metrics")
    print("name\ttype\thelp")
    for name in types:
        print(f"{name}\t{types[name]}\t{helps.get(name, '')}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--metrics":
        return metrics(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 4 and sys.argv[1] == "--endpoints":
        return endpoints(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        return markdown(sys.argv[2])
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    binary, commit = sys.argv[1], sys.argv[2]
    out = subprocess.run([binary, "--helpon=master"], capture_output=True, text=True)
    flags = parse(out.stdout + out.stderr)
    print(f"# mooncake_master --helpon=master, kvcache-ai/Mooncake commit {commit}; "
          f"{len(flags)} flags; regenerate with scripts/mooncake_flags.py")
    print("flag\ttype\tdefault\thelp")
    for f in sorted(flags):
        assert "\t" not in "".join(f)
        print("\t".join(f))


if __name__ == "__main__":
    main()
