#!/bin/sh
# Starts redis-server in the foreground with the shipped redis.conf and the
# module: what `make run` does, and what tests/make_run.rs starts.
#
# The paths go on the command line, absolute: redis-server changes into
# `dir` while it reads its configuration and loads modules only afterwards,
# so a relative `loadmodule` path would be looked up inside the data dir.
#
#   DATA_DIR        data directory (default <repo>/data, created if missing)
#   HASHLOCK_MODULE the module (default <repo>/target/release/libhashlock.so)
#   REDIS_SERVER    the server binary (default redis-server on PATH)
#   arguments       passed on to redis-server after the file, e.g. --port 6390
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
data=${DATA_DIR:-$root/data}
mkdir -p "$data"
data=$(cd "$data" && pwd)
module=${HASHLOCK_MODULE:-$root/target/release/libhashlock.so}
case $module in /*) ;; *) module=$(pwd)/$module ;; esac
if [ ! -f "$module" ]; then
    echo "run-server: $module not found; build it first (cargo build --release)" >&2
    exit 1
fi
server=${REDIS_SERVER:-redis-server}
echo "$server $root/redis.conf --dir $data --loadmodule $module $*" >&2
exec "$server" "$root/redis.conf" --dir "$data" --loadmodule "$module" "$@"
