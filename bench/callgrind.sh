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
# Needs valgrind, redis-server, redis-cli, python3, and the benchmark binary
# (for the family's scripts: built if missing). REDIS_SERVER, HASHLOCK_MODULE
# and BENCH override the binaries (defaults: redis-server on PATH,
# target/release/libhashlock.so, target/release/hashlock-bench);
# MODULE_ARGS adds module arguments (e.g. "hold-metrics 0").
set -eu
cd "$(dirname "$0")/.."
N=${1:-20000}
SERVER=${REDIS_SERVER:-redis-server}
MODULE=${HASHLOCK_MODULE:-$PWD/target/release/libhashlock.so}
BENCH=${BENCH:-$PWD/target/release/hashlock-bench}
[ -x "$BENCH" ] || cargo build --release -q -p hashlock-bench
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
# Placeholders: {k} the key, {c} its lock channel, {sc} its semaphore
# channel, {t} its lease set, {rw} its read-write channel, {tp} the owner's
# read-timeout prefix, {kp} its key prefix, {l} an unlock latch, {i} a
# 16-byte permit id, {id} the first element of the previous phase's reply to
# the same key (a permit id from SEMAPHORE.LEASE).
seq=0
: >"$dir/phases"
: >"$dir/replies"
phase() {
    name=$1; shift
    seq=$((seq + 1))
    printf 'p%s\t%s\n' "$seq" "$name" >>"$dir/phases"
    python3 - "$port" "$N" "$dir/replies" "$OWNER" "$@" <<'PY'
import socket, sys
port, n, replies_path, owner = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
tmpl = sys.argv[5:]
try:
    prev = open(replies_path, "rb").read().split(b"\n")
except OSError:
    prev = []
def tag(k):
    return k if b"{" in k else b"{" + k + b"}"
def args_for(i):
    k = b"lock:%07d" % i
    sub = {
        "{k}": k,
        "{c}": b"redisson_lock__channel:" + tag(k),
        "{sc}": b"redisson_sc:" + tag(k),
        "{t}": tag(k) + b":timeout",
        "{rw}": b"redisson_rwlock:" + tag(k),
        "{tp}": tag(k) + b":" + owner.encode() + b":rwlock_timeout",
        "{kp}": tag(k),
        "{l}": b"redisson_unlock_latch:" + tag(k) + b":%d" % i,
        "{i}": b"permit-id-%07d" % i,
        "{id}": prev[i] if i < len(prev) else b"",
    }
    out = []
    for a in tmpl:
        b = a.encode()
        for ph, v in sub.items():
            b = b.replace(ph.encode(), v)
        out.append(b)
    return out
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def read():
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t == b"-":
        errors.append(rest)
        return rest
    if t in (b"+", b":"):
        return rest
    if t == b"$":
        ln = int(rest)
        if ln < 0:
            return b""
        data = f.read(ln + 2)[:-2]
        return data
    if t == b"*":
        ln = int(rest)
        items = [read() for _ in range(max(ln, 0))]
        return items[0] if items else b""
    raise SystemExit("unexpected reply %r" % line)
got = []
errors = []
for start in range(0, n, 16):
    buf = []
    for i in range(start, min(n, start + 16)):
        a = args_for(i)
        buf.append(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
    s.sendall(b"".join(buf))
    for i in range(start, min(n, start + 16)):
        got.append(read())
open(replies_path, "wb").write(b"\n".join(got))
PY
    callgrind_control --dump="p$seq" "$vg" >/dev/null 2>&1
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

# The Redisson family (issue 20 item 4, issue 21 item 5): hashlock's
# commands next to the Redisson-protocol scripts the benchmark sends (B13).
now=$(date +%s%3N)
until_ms=$((now + 30000))
lua() { "$BENCH" --print-lua "$1"; }
sta=$(redis-cli -p "$port" script load "$(lua sem-try-acquire)")
srl=$(redis-cli -p "$port" script load "$(lua sem-release)")
eac=$(redis-cli -p "$port" script load "$(lua expirable-acquire)")
erl=$(redis-cli -p "$port" script load "$(lua expirable-release)")
rrl=$(redis-cli -p "$port" script load "$(lua rw-read-lock)")
rru=$(redis-cli -p "$port" script load "$(lua rw-read-unlock)")
rwl=$(redis-cli -p "$port" script load "$(lua rw-write-lock)")
rwu=$(redis-cli -p "$port" script load "$(lua rw-write-unlock)")
phase "(setup: one permit per key)"         SET "{k}" 1
phase "SEMAPHORE.ACQUIRE"                   SEMAPHORE.ACQUIRE "{k}"
phase "SEMAPHORE.RELEASE"                   SEMAPHORE.RELEASE "{k}"
phase "RSemaphore tryAcquire, EVALSHA"      EVALSHA "$sta" 1 "{k}" 1
phase "RSemaphore release, EVALSHA"         EVALSHA "$srl" 2 "{k}" "{sc}" 1 PUBLISH
phase "SEMAPHORE.LEASE PX 30000"            SEMAPHORE.LEASE "{k}" PX 30000
phase "SEMAPHORE.RETURN"                    SEMAPHORE.RETURN "{k}" "{id}"
phase "RPermitExpirableSemaphore acquire, EVALSHA" EVALSHA "$eac" 3 "{k}" "{t}" "{sc}" 1 "$until_ms" "$now" 922337203685477 PUBLISH "{i}"
phase "RPermitExpirableSemaphore release, EVALSHA" EVALSHA "$erl" 3 "{k}" "{sc}" "{t}" "{i}" 1 "$now" PUBLISH
phase "(cleanup)"                           DEL "{k}"
phase "RWLOCK.ACQUIRE READ"                 RWLOCK.ACQUIRE "{k}" "$OWNER" READ PX 30000
phase "RWLOCK.RELEASE READ"                 RWLOCK.RELEASE "{k}" "$OWNER" READ
phase "Redisson read lock, EVALSHA"         EVALSHA "$rrl" 2 "{k}" "{tp}" 30000 "$OWNER" "$OWNER:write"
phase "Redisson read unlock, EVALSHA"       EVALSHA "$rru" 5 "{k}" "{rw}" "{tp}" "{kp}" "{l}" 0 "$OWNER" PUBLISH 18000
phase "(Redisson: DEL of the unlock latch)" DEL "{l}"
phase "RWLOCK.ACQUIRE WRITE"                RWLOCK.ACQUIRE "{k}" "$OWNER" WRITE PX 30000
phase "RWLOCK.RELEASE WRITE"                RWLOCK.RELEASE "{k}" "$OWNER" WRITE
phase "Redisson write lock, EVALSHA"        EVALSHA "$rwl" 1 "{k}" 30000 "$OWNER:write"
phase "Redisson write unlock, EVALSHA"      EVALSHA "$rwu" 3 "{k}" "{rw}" "{l}" 1 30000 "$OWNER:write" PUBLISH 18000
phase "(Redisson: DEL of the unlock latch)" DEL "{l}"

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
