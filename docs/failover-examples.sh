#!/bin/sh
# Runs every example of the README section "Surviving failover" against a real primary and
# replica (redis-server with the module) and sqlite3, printing each command
# and what it answered, so the draft's outputs can be checked against it.
#
#   docs/failover-examples.sh
#
# Needs redis-server, redis-cli, sqlite3 and the built module
# (target/release/libhashlock.so, or HASHLOCK_MODULE).
set -eu
cd "$(dirname "$0")/.."
MODULE=${HASHLOCK_MODULE:-$PWD/target/release/libhashlock.so}
SERVER=${REDIS_SERVER:-redis-server}
dir=$(mktemp -d /tmp/hashlock-failover-examples.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P=$(free_port)
R=$(free_port)
start() { # port name [extra args...]
    port=$1; name=$2; shift 2
    "$SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$dir" --dbfilename "$name.rdb" --logfile "$dir/$name.log" \
        --pidfile "$dir/$name.pid" --repl-diskless-sync-delay 0 \
        --loadmodule "$MODULE" "$@" --daemonize yes
    until [ -s "$dir/$name.pid" ] && redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
    # The port must be served by this server, not by one another program
    # started on it meanwhile.
    served_by=$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')
    [ "$served_by" = "$(cat "$dir/$name.pid")" ] || { echo "port $port is not ours" >&2; exit 1; }
}
cleanup() {
    kill -CONT "$(cat "$dir/replica.pid" 2>/dev/null)" 2>/dev/null || true
    redis-cli -p "$P" shutdown nosave >/dev/null 2>&1 || true
    redis-cli -p "$R" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
start "$P" primary
start "$R" replica --replicaof 127.0.0.1 "$P"
until redis-cli -p "$P" info replication | grep -q "port=$R,state=online"; do sleep 0.05; done
redis-cli -p "$P" set warmup 1 >/dev/null
[ "$(redis-cli -p "$P" wait 1 5000)" = 1 ] || { echo "the replica does not acknowledge" >&2; exit 1; }
# Only our replica: a program that reused a port may not attach another.
[ "$(redis-cli -p "$P" info replication | tr -d "\r" | sed -n "s/^connected_slaves://p")" = 1 ] || { echo "unexpected replicas" >&2; exit 1; }

run() { # shows the command as a redis-cli line and its reply
    echo "> $*"
    redis-cli --no-raw -p "$P" "$@"
}

echo "## REPLICAS"
run LOCK.ACQUIRE stock:42 worker-1 PX 30000 REPLICAS 1 200
echo "(on the replica) > HGETALL stock:42"
redis-cli --no-raw -p "$R" HGETALL stock:42
run LOCK.RENEW stock:42 worker-1 PX 30000 REPLICAS 1 200
run LOCK.ACQUIRE stock:43 worker-1 PX 30000 REPLICAS 2 200
echo "(replica frozen with SIGSTOP)"
kill -STOP "$(cat "$dir/replica.pid")"
run LOCK.ACQUIRE stock:44 worker-1 PX 30000 REPLICAS 1 200
run LOCK.INFO stock:44
kill -CONT "$(cat "$dir/replica.pid")"
run LOCK.RELEASE stock:42 worker-1

echo "## TOKEN"
run LOCK.ACQUIRE stock:42 worker-1 PX 30000 TOKEN REPLICAS 1 200
T1=$(redis-cli -p "$P" GET 'redisson_lock_token:{stock:42}')
run LOCK.RELEASE stock:42 worker-1
run LOCK.ACQUIRE stock:42 worker-2 PX 30000 TOKEN REPLICAS 1 200
T2=$(redis-cli -p "$P" GET 'redisson_lock_token:{stock:42}')
run LOCK.INFO stock:42
run GET 'redisson_lock_token:{stock:42}'

echo "## SQL fence (sqlite3), worker-1 holds token $T1, worker-2 token $T2"
db="$dir/shop.db"
sqlite3 "$db" "CREATE TABLE stock (item TEXT PRIMARY KEY, qty INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0);
               INSERT INTO stock (item, qty) VALUES ('42', 10);"
write() { # token who
    changed=$(sqlite3 "$db" "UPDATE stock SET qty = qty - 1, fence = $1 WHERE item = '42' AND fence < $1; SELECT changes();")
    echo "$2 (token $1): rows changed = $changed"
}
write "$T2" worker-2
write "$T1" "worker-1, paused past its lease, wakes up"
write "$T2" "worker-2 again"
sqlite3 "$db" "SELECT item, qty, fence FROM stock;"

echo "## Redis-kept data fence (Lua check-and-set)"
FENCED_HSET="local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local token = tonumber(ARGV[1])
if token <= fence then
  return redis.error_reply('STALE fencing token ' .. ARGV[1] .. ' is not above ' .. string.format('%d', fence))
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], unpack(ARGV, 2))
return 1"
run EVAL "$FENCED_HSET" 1 order:7 "$T2" status shipped
run EVAL "$FENCED_HSET" 1 order:7 "$T1" status cancelled
run HGETALL order:7
