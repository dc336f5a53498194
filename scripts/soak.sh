#!/bin/sh
# Soak run (not in CI): put/get/remove churn with block metadata, vLLM-style
# engine events and /query against one crescentd; prints its RSS every
# minute and the growth after the first minute.  Default 60 minutes.
#   scripts/soak.sh [--minutes N] [--bin path/to/crescentd] [--crescentd-arg=ARG ...]
set -eu
cd "$(dirname "$0")/.."
[ -x zig-out/bin/crescentd ] || zig build
exec /usr/bin/python3 scripts/soak.py "$@"
