#!/bin/sh
# Server instructions per command, by valgrind --tool=callgrind: what one
# LOCK.* call costs the server next to the Redisson-protocol Lua (EVALSHA /
# EVAL), SET NX PX and bare PEXPIRE. Counts everything under
# processCommand (lookup, ACL, call(), the command, propagation, keyspace
# events), not the socket reads/writes or protocol parsing, which are the
# same for every variant.
#
#   bench/callgrind.sh [N]          N commands per phase (default 20000)
#
# Needs valgrind, redis-server, redis-cli, python3. REDIS_SERVER and
# HASHLOCK_MODULE override the binaries (defaults: redis-server on PATH,
# target/release/libhashlock.so); MODULE_ARGS adds module arguments (e.g.
# "hold-metrics 0").
set -eu
cd "$(dirname "$0")/.."
N=${1:-20000}
SERVER=${REDIS_SERVER:-redis-server}
MODULE=${HASHLOCK_MODULE:-$PWD/target/release/libhashlock.so}
for tool in valgrind callgrind_control "$SERVER" redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "callgrind.sh: $tool not found" >&2; exit 2; }
done
[ -f "$MODULE" ] || { echo "callgrind.sh: module $MODULE not found (make build)" >&2; exit 2; }

dir=$(mktemp -d /tmp/hashlock-callgrind.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --collect-atstart=no --toggle-collect=processCommand \
    --callgrind-out-file="$dir/cg.out" \
    "$SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/server.log" --loadmodule "$MODULE" ${MODULE_ARGS:-} \
    >"$dir/valgrind.log" 2>&1 &
vg=$!
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$vg" 2>/dev/null; wait "$vg" 2>/dev/null || true' EXIT
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "server did not start" >&2; cat "$dir/valgrind.log" >&2; exit 1; }
    sleep 0.1
done

# The Lua, as the benchmark sends it (bench/src/scripts.rs).
ACQ="if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
REL="if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;"
REN="if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;"
CAD="if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
acq=$(redis-cli -p "$port" script load "$ACQ")
rel=$(redis-cli -p "$port" script load "$REL")
ren=$(redis-cli -p "$port" script load "$REN")
cad=$(redis-cli -p "$port" script load "$CAD")
OWNER="0f0e0d0c-0b0a-4098-a765-43210fedcba9:1"

# phase NAME TEMPLATE: N commands, {k} = a key per command, sent pipelined;
# then a callgrind dump, so each dump holds one phase. (Dumps are labelled
# p1, p2, ... because callgrind_control passes the label through a shell.)
seq=0
: >"$dir/phases"
phase() {
    name=$1; shift
    seq=$((seq + 1))
    printf 'p%s\t%s\n' "$seq" "$name" >>"$dir/phases"
    python3 - "$N" "$@" <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
n = int(sys.argv[1]); tmpl = sys.argv[2:]
out = sys.stdout.buffer
for i in range(n):
    args = [a.replace("{k}", "lock:%07d" % i).replace("{c}", "redisson_lock__channel:{lock:%07d}" % i).encode() for a in tmpl]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
    callgrind_control --dump="p$seq" "$vg" >/dev/null
}
callgrind_control --zero "$vg" >/dev/null

phase "hashlock acquire (new key)"      LOCK.ACQUIRE "{k}" "$OWNER" PX 30000
phase "hashlock acquire (re-entrant)"   LOCK.ACQUIRE "{k}" "$OWNER" PX 30000
phase "hashlock renew"                  LOCK.RENEW "{k}" "$OWNER" PX 30000
phase "PEXPIRE (renew floor)"           PEXPIRE "{k}" 30000
phase "Redisson renew, EVALSHA"         EVALSHA "$ren" 1 "{k}" 30000 "$OWNER"
phase "hashlock release (2 -> 1)"       LOCK.RELEASE "{k}" "$OWNER"
phase "hashlock release (1 -> 0)"       LOCK.RELEASE "{k}" "$OWNER"
phase "Redisson acquire (new), EVALSHA" EVALSHA "$acq" 1 "{k}" 30000 "$OWNER"
phase "Redisson acquire (re-entrant), EVALSHA" EVALSHA "$acq" 1 "{k}" 30000 "$OWNER"
phase "Redisson release (2 -> 1), EVALSHA" EVALSHA "$rel" 2 "{k}" "{c}" 0 30000 "$OWNER"
phase "Redisson release (1 -> 0), EVALSHA" EVALSHA "$rel" 2 "{k}" "{c}" 0 30000 "$OWNER"
phase "Redisson acquire (new), full-text EVAL" EVAL "$ACQ" 1 "{k}" 30000 "$OWNER"
phase "Redisson release (1 -> 0), full-text EVAL" EVAL "$REL" 2 "{k}" "{c}" 0 30000 "$OWNER"
phase "SET NX PX (new key)"             SET "{k}" "$OWNER" NX PX 30000
phase "compare-and-delete, EVALSHA"     EVALSHA "$cad" 1 "{k}" "$OWNER"
phase "HSET (same hash, plain)"         HSET "{k}" "$OWNER" 1
phase "DEL"                             DEL "{k}"

echo "Server instructions per command (callgrind, inclusive under processCommand), $N commands per phase, $("$SERVER" --version | cut -d' ' -f3):"
echo
printf '| %-44s | %12s |\n' "command" "instr/call"
printf '|%s|%s|\n' "----------------------------------------------" "-------------:"
for i in $(seq 1 "$seq"); do
    f="$dir/cg.out.$i"
    label=$(sed -n 's/^desc: Trigger: dump //p' "$f")
    name=$(awk -F'\t' -v l="$label" '$1 == l { print $2 }' "$dir/phases")
    total=$(sed -n 's/^summary: //p' "$f" | head -1)
    [ -n "$name" ] && printf '| %-44s | %12s |\n' "$name" "$(python3 -c "print(f'{$total/$N:,.0f}')")"
done
echo
echo "callgrind files: $dir (callgrind_annotate --inclusive=yes FILE for the breakdown)"
