#!/bin/sh
# What lifecycle events (`notify-keyspace-events` with `d`) cost the server:
# instructions per LOCK.ACQUIRE (new key) and LOCK.RELEASE (1 -> 0) by
# valgrind --tool=callgrind, inclusive under processCommand (the command,
# its keyspace events, pub/sub delivery into subscribers' output buffers;
# not the socket reads and writes), with notifications off, with `Kd` and
# nobody subscribed, and with `Kd` and one subscriber to every key's
# keyspace channel (PSUBSCRIBE __keyspace@0__:*). README, "Observing locks".
#
#   bench/callgrind-events.sh [N]     N commands per phase (default 20000)
#
# Needs valgrind, redis-server, redis-cli, python3 (REDIS_SERVER and
# HASHLOCK_MODULE override the binaries, as for bench/callgrind.sh).
set -eu
cd "$(dirname "$0")/.."
N=${1:-20000}
SERVER=${REDIS_SERVER:-redis-server}
MODULE=${HASHLOCK_MODULE:-$PWD/target/release/libhashlock.so}
for tool in valgrind callgrind_control "$SERVER" redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "callgrind-events.sh: $tool not found" >&2; exit 2; }
done
[ -f "$MODULE" ] || { echo "callgrind-events.sh: module $MODULE not found (make build)" >&2; exit 2; }

dir=$(mktemp -d /tmp/hashlock-callgrind-events.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --collect-atstart=no --toggle-collect=processCommand \
    --callgrind-out-file="$dir/cg.out" \
    "$SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/server.log" --loadmodule "$MODULE" \
    >"$dir/valgrind.log" 2>&1 &
vg=$!
sub=""
trap '[ -n "$sub" ] && kill "$sub" 2>/dev/null; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$vg" 2>/dev/null; wait "$vg" 2>/dev/null || true' EXIT
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "server did not start" >&2; cat "$dir/valgrind.log" >&2; exit 1; }
    sleep 0.1
done

seq=0
: >"$dir/phases"
# phase NAME ARGS...: N commands, {k} = a key per command, pipelined; then
# a callgrind dump.
phase() {
    name=$1; shift
    seq=$((seq + 1))
    printf 'p%s\t%s\n' "$seq" "$name" >>"$dir/phases"
    python3 - "$N" "$@" <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
n = int(sys.argv[1]); tmpl = sys.argv[2:]
out = sys.stdout.buffer
for i in range(n):
    args = [a.replace("{k}", "ev:%07d" % i).encode() for a in tmpl]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
    callgrind_control --dump="p$seq" "$vg" >/dev/null
}
pair() {
    phase "LOCK.ACQUIRE (new key), $1" LOCK.ACQUIRE "{k}" owner-1 PX 30000
    phase "LOCK.RELEASE (1 -> 0), $1" LOCK.RELEASE "{k}" owner-1
}
redis-cli -p "$port" config set notify-keyspace-events "" >/dev/null
callgrind_control --zero "$vg" >/dev/null
pair "notifications off"
redis-cli -p "$port" config set notify-keyspace-events Kd >/dev/null
callgrind_control --zero "$vg" >/dev/null
pair "Kd, no subscriber"
redis-cli -p "$port" psubscribe '__keyspace@0__:*' >"$dir/subscriber.out" &
sub=$!
i=0
until redis-cli -p "$port" pubsub numpat | grep -qx 1; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "subscriber did not start" >&2; exit 1; }
    sleep 0.1
done
callgrind_control --zero "$vg" >/dev/null
pair "Kd, one subscriber"
redis-cli -p "$port" config set notify-keyspace-events "" >/dev/null
callgrind_control --zero "$vg" >/dev/null
pair "notifications off again"

echo "Server instructions per command (callgrind, inclusive under processCommand), $N commands per phase, $("$SERVER" --version | cut -d' ' -f3):"
echo
printf '| %-48s | %12s |\n' "command, notify-keyspace-events" "instr/call"
printf '|%s|%s|\n' "--------------------------------------------------" "-------------:"
for i in $(seq 1 "$seq"); do
    f="$dir/cg.out.$i"
    label=$(sed -n 's/^desc: Trigger: dump //p' "$f")
    name=$(awk -F'\t' -v l="$label" '$1 == l { print $2 }' "$dir/phases")
    total=$(sed -n 's/^summary: //p' "$f" | head -1)
    [ -n "$name" ] && printf '| %-48s | %12s |\n' "$name" "$(python3 -c "print(f'{$total/$N:,.0f}')")"
done
echo
echo "callgrind files: $dir (callgrind_annotate --inclusive=yes FILE for the breakdown)"
