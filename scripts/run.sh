#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds and starts crescentd in the foreground
# with its defaults (HTTP on 127.0.0.1:13333).  Arguments go to crescentd:
#   scripts/run.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
node_modules/.bin/zig build
exec zig-out/bin/crescentd "$@"
