#!/bin/sh
# Starts redis-server in the foreground with the shipped redis.conf, which
# loads the module: what `make run` does, and what tests/make_run.rs starts.
#
# redis.conf's paths are relative: data in ./data, the module at
# ../target/release/libhashlock.so seen from there. So the server runs from
# a directory laid out like the repository root:
#
#   RUN_DIR       that directory (default: the repository root); it needs
#                 target/release/libhashlock.so, ./data is created
#   REDIS_SERVER  the server binary (default: redis-server on PATH)
#   arguments     passed on to redis-server after the file, e.g. --port 6390
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
run=${RUN_DIR:-$root}
cd "$run"
if [ ! -f target/release/libhashlock.so ]; then
    echo "run-server: $run/target/release/libhashlock.so not found; build it first (cargo build --release)" >&2
    exit 1
fi
mkdir -p data
server=${REDIS_SERVER:-redis-server}
echo "(in $run) $server $root/redis.conf $*" >&2
exec "$server" "$root/redis.conf" "$@"
