//! Locks moving with their slot, on a real 3-primary / 3-replica cluster:
//! the manual way (SETSLOT IMPORTING/MIGRATING, MIGRATE ... KEYS, SETSLOT
//! NODE in either order), `redis-cli --cluster reshard` there and back, and
//! Valkey's atomic `CLUSTER MIGRATESLOTS`.
//!
//! The promise (README, "Running on a cluster"): a lock that leaves a node by migration is
//! not released. It arrives at the target with its owner, count and
//! deadline (MIGRATE carries the time left, so the deadline may move by the
//! transfer time, never earlier); nothing is granted on the source to a
//! waiter; the tools complete; each waiter is answered ASK while the slot
//! migrates or MOVED once it has moved (at the latest when the new owner is
//! set), retries at the target and queues there. The source's replica never
//! receives a write for the key (a grant on the source would replicate).

mod common;

use std::time::{Duration, Instant};

use common::topology::*;
use common::*;
use testkit::cluster::{Cluster, SetSlotOrder, key_in_slot};

/// How long a waiter may go unanswered once its node stopped serving the
/// key (generous: the machine is loaded).
const ANSWER_BOUND: Duration = Duration::from_secs(5);

fn ok() -> Reply {
    Reply::Status("OK".into())
}

/// A waiter parked with BLOCK 0, and what it was answered so far.
struct Waiter {
    owner: String,
    resp3: bool,
    c: Client,
    answer: Option<Answer>,
}

impl Waiter {
    #[track_caller]
    fn park(s: &Server, key: &str, owner: &str, resp3: bool) -> Waiter {
        Waiter {
            owner: owner.to_string(),
            resp3,
            c: block_on(s, key, owner, resp3, false),
            answer: None,
        }
    }

    fn proto(&self) -> &'static str {
        if self.resp3 { "RESP3" } else { "RESP2" }
    }
}

/// Polls every unanswered waiter until `deadline`.
fn poll_all(waiters: &mut [Waiter], deadline: Instant) {
    for w in waiters.iter_mut().filter(|w| w.answer.is_none()) {
        let left = deadline.saturating_duration_since(Instant::now());
        match Answer::from_polled(w.c.poll_reply(left.max(Duration::from_millis(1)))) {
            Answer::Nothing => {}
            a => w.answer = Some(a),
        }
    }
}

/// Keyspace events for one key on one server (a replica here): any write
/// replicated to it shows up as an event.
struct WriteWatch {
    c: Client,
}

impl WriteWatch {
    #[track_caller]
    fn start(s: &Server, key: &str) -> WriteWatch {
        let mut cfg = s.client();
        assert_eq!(
            cfg.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]),
            ok()
        );
        let mut c = s.client();
        let r = c.cmd(&["SUBSCRIBE", &format!("__keyspace@0__:{key}")]);
        assert!(matches!(&r, Reply::Array(a) if a.len() == 3), "{r:?}");
        WriteWatch { c }
    }

    /// The events seen so far (e.g. "hset", "del").
    #[track_caller]
    fn events(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Polled::Reply(r) = self.c.poll_reply(Duration::from_millis(100)) {
            if let Reply::Array(m) = &r
                && m.len() == 3
            {
                out.push(String::from_utf8_lossy(m[2].as_bytes()).into_owned());
            }
        }
        out
    }

    /// Events other than the key leaving (`del` by MIGRATE) or expiring.
    fn writes(&mut self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e != "del" && e != "expired")
            .collect()
    }
}

/// `HGETALL` and `PEXPIRETIME` of `key` on `c`, each preceded by `ASKING`
/// when `asking` (the slot may still be importing there).
#[track_caller]
fn lock_at(c: &mut Client, key: &str, asking: bool) -> (HashPairs, i64) {
    if asking {
        assert_eq!(c.cmd(&["ASKING"]), ok());
    }
    let pairs = match c.cmd(&["HGETALL", key]) {
        Reply::Array(flat) => flat
            .chunks_exact(2)
            .map(|kv| (kv[0].as_bytes().to_vec(), kv[1].as_bytes().to_vec()))
            .collect(),
        Reply::Map(m) => m
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
        other => vec![(
            b"(HGETALL answered)".to_vec(),
            format!("{other:?}").into_bytes(),
        )],
    };
    if asking {
        assert_eq!(c.cmd(&["ASKING"]), ok());
    }
    let deadline = match c.cmd(&["PEXPIRETIME", key]) {
        Reply::Int(d) => d,
        _ => -3,
    };
    (pairs, deadline)
}

fn holder(owner: &str, count: i64) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(owner.as_bytes().to_vec(), count.to_string().into_bytes())]
}

/// Checks that `key` is at `c` held by `owner` `count` times with a
/// deadline in `[before - 1, before + slack + 1]` ms.
#[allow(clippy::too_many_arguments)]
fn check_lock_arrived(
    f: &mut Findings,
    label: &str,
    c: &mut Client,
    key: &str,
    asking: bool,
    owner: &str,
    count: i64,
    before: i64,
    slack: Duration,
) {
    let (pairs, deadline) = lock_at(c, key, asking);
    f.check(pairs == holder(owner, count), || {
        format!(
            "{label}: the lock at the target is {:?}, expected {owner} x{count}",
            pairs
                .iter()
                .map(|(k, v)| format!("{}={}", k.escape_ascii(), v.escape_ascii()))
                .collect::<Vec<_>>()
        )
    });
    let slack_ms = slack.as_millis() as i64;
    f.check(
        deadline >= before - 1 && deadline <= before + slack_ms + 1,
        || {
            format!(
                "{label}: deadline at the target {deadline}, at the source it was {before} \
                 (allowed: up to {slack_ms} ms later, the transfer time)"
            )
        },
    );
}

/// Each waiter that was redirected to `target` opens a connection there
/// (sending ASKING first after an ASK) and queues again, one after the
/// other (each is seen queued before the next is sent: two connections'
/// commands reach the server in no guaranteed order). Returns them.
fn retry_at(target: &Server, waiters: Vec<Waiter>, key: &str) -> Vec<Waiter> {
    let mut queued = 0;
    waiters
        .into_iter()
        .filter(|w| {
            w.answer
                .as_ref()
                .is_some_and(|a| a.is_redirect_to(target.port))
        })
        .map(|w| {
            let mut c = if w.resp3 {
                target.client_resp3()
            } else {
                target.client()
            };
            if w.answer.as_ref().is_some_and(Answer::is_ask) {
                assert_eq!(c.cmd(&["ASKING"]), ok());
            }
            c.send(&["LOCK.ACQUIRE", key, &w.owner, "BLOCK", "0"]);
            queued += 1;
            // (If it does not queue, the caller's own check reports it.)
            wait_waiters(target, key, queued);
            Waiter {
                owner: w.owner,
                resp3: w.resp3,
                c,
                answer: None,
            }
        })
        .collect()
}

/// The holder releases `count` holds on `at`; each queued waiter must then
/// be granted in turn (FIFO), and releases in turn.
fn drain_queue(
    f: &mut Findings,
    label: &str,
    at: &Server,
    key: &str,
    owner: &str,
    count: i64,
    waiters: &mut [Waiter],
) {
    let mut c = at.client();
    for left in (0..count).rev() {
        let r = c.cmd(&["LOCK.RELEASE", key, owner]);
        if !f.check(r == Reply::Int(left), || {
            format!(
                "{label}: LOCK.RELEASE by {owner} at the target answered {r:?}, expected {left}"
            )
        }) {
            return;
        }
    }
    for w in waiters.iter_mut() {
        let (a, _) = answer_within(&mut w.c, ANSWER_BOUND);
        if !f.check(a == Answer::Granted(Reply::Int(1)), || {
            format!(
                "{label}: waiter {} ({}) queued at the target, expected the lock after the holder released, got {a:?}",
                w.owner,
                w.proto()
            )
        }) {
            return;
        }
        let r = c.cmd(&["LOCK.RELEASE", key, &w.owner]);
        f.check(r == Reply::Int(0), || {
            format!("{label}: release by {} answered {r:?}", w.owner)
        });
    }
}

/// Where both single-slot migrations start: A holds `key` on `src` twice
/// (count 2), two waiters (RESP2, RESP3) queue behind it, and the source's
/// replica is watched for writes to the key.
struct HeldWithWaiters {
    holder: Client,
    deadline: i64,
    replica: usize,
    watch: WriteWatch,
    waiters: Vec<Waiter>,
}

#[track_caller]
fn hold_with_waiters(
    cluster: &Cluster,
    src: usize,
    key: &str,
    waiters: [&str; 2],
) -> HeldWithWaiters {
    let s = cluster.server(src);
    let mut holder = s.client();
    for n in 1..=2 {
        assert_eq!(
            holder.cmd(&["LOCK.ACQUIRE", key, "A", "PX", "60000"]),
            Reply::Int(n)
        );
    }
    let deadline = holder.cmd(&["PEXPIRETIME", key]).as_int();
    let replica = cluster.replica_of(src);
    let watch = WriteWatch::start(cluster.server(replica), key);
    let waiters = vec![
        Waiter::park(s, key, waiters[0], false),
        Waiter::park(s, key, waiters[1], true),
    ];
    assert!(wait_waiters(s, key, 2), "waiters did not queue on {key}");
    HeldWithWaiters {
        holder,
        deadline,
        replica,
        watch,
        waiters,
    }
}

/// Every waiter on the source `source` must be answered ASK/MOVED to
/// `target` within ANSWER_BOUND of `after`. A waiter already answered
/// something else is not reported again (its wrong answer was).
fn check_redirected(
    f: &mut Findings,
    label: &str,
    waiters: &mut [Waiter],
    source: &str,
    target: &Server,
    after: &str,
) {
    let wrong_before: Vec<bool> = waiters
        .iter()
        .map(|w| {
            w.answer
                .as_ref()
                .is_some_and(|a| !a.is_redirect_to(target.port))
        })
        .collect();
    poll_all(waiters, Instant::now() + ANSWER_BOUND);
    for (w, _) in waiters.iter().zip(wrong_before).filter(|(_, wrong)| !wrong) {
        f.check(
            w.answer
                .as_ref()
                .is_some_and(|a| a.is_redirect_to(target.port)),
            || {
                format!(
                    "{label}: waiter {} ({}) on {source}: expected ASK/MOVED to port {} within \
                     {ANSWER_BOUND:?} of {after}, got {:?}",
                    w.owner,
                    w.proto(),
                    target.port,
                    w.answer.clone().unwrap_or(Answer::Nothing)
                )
            },
        );
    }
}

/// The redirected waiters queue again at `target` and are served there in
/// turn once `owner` releases its `count` holds.
fn served_at_target(
    f: &mut Findings,
    label: &str,
    target: &Server,
    key: &str,
    (owner, count): (&str, i64),
    waiters: Vec<Waiter>,
) {
    let n = waiters.len();
    let mut retried = retry_at(target, waiters, key);
    if retried.len() == n {
        f.check(wait_waiters(target, key, n as i64), || {
            format!("{label}: the redirected waiters did not queue at the target")
        });
        drain_queue(f, label, target, key, owner, count, &mut retried);
    }
}

/// (a) One slot moved by hand while A holds the lock (count 2) and two
/// waiters (RESP2, RESP3) are queued on the source.
fn migrate_one_slot(
    cluster: &Cluster,
    f: &mut Findings,
    (src, dst): (usize, usize),
    slot: u16,
    order: SetSlotOrder,
) {
    let label = format!("slot {slot}, SETSLOT NODE {order:?}");
    let key = key_in_slot(slot, "mig", ":lock");
    let t = cluster.server(dst);
    let HeldWithWaiters {
        holder: mut a,
        deadline,
        replica,
        mut watch,
        mut waiters,
    } = hold_with_waiters(cluster, src, &key, ["B2", "B3"]);

    let (importing, migrating) = cluster.begin_migration(slot, src, dst);
    assert_eq!((importing, migrating), (ok(), ok()), "{label}");
    let t0 = Instant::now();
    let batches = cluster.migrate_keys(slot, src, dst);
    let took = t0.elapsed();
    let one_batch = batches.len() == 1 && batches[0].1 == ok() && batches[0].0 == [key.as_bytes()];
    f.check(one_batch, || {
        let shown: Vec<String> = batches
            .iter()
            .map(|(keys, r)| {
                let keys: Vec<String> = keys.iter().map(|k| k.escape_ascii().to_string()).collect();
                format!("MIGRATE KEYS {keys:?} -> {r:?}")
            })
            .collect();
        format!(
            "{label}: {shown:?} (a second batch means the key came back on the source after it \
             was migrated)"
        )
    });

    // While the slot migrates: nothing granted on the source.
    poll_all(&mut waiters, Instant::now() + Duration::from_millis(300));
    for w in &waiters {
        if let Some(a) = &w.answer {
            f.check(a.is_redirect_to(t.port), || {
                format!(
                    "{label}: waiter {} ({}) on the source was answered {a:?} right after MIGRATE \
                     (only ASK/MOVED to port {} or nothing yet is allowed)",
                    w.owner,
                    w.proto(),
                    t.port
                )
            });
        }
    }
    let left = a.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    f.check(left == Reply::Int(0), || {
        format!("{label}: the source holds {left:?} keys of the slot after MIGRATE (a lock granted there?)")
    });
    let mut tc = t.client();
    check_lock_arrived(f, &label, &mut tc, &key, true, "A", 2, deadline, took);

    // The new owner is set on both sides: every waiter must have an answer.
    let (on_source, on_target, others) = cluster.set_slot_owner(slot, src, dst, order);
    f.check(on_source == ok(), || {
        format!(
            "{label}: CLUSTER SETSLOT {slot} NODE <target> on the source answered {on_source:?}"
        )
    });
    f.check(on_target == ok(), || {
        format!(
            "{label}: CLUSTER SETSLOT {slot} NODE <target> on the target answered {on_target:?}"
        )
    });
    for (i, r) in others {
        f.check(r == ok(), || {
            format!("{label}: SETSLOT NODE on node {i} answered {r:?}")
        });
    }
    check_redirected(f, &label, &mut waiters, "the source", t, "SETSLOT NODE");
    check_lock_arrived(f, &label, &mut tc, &key, false, "A", 2, deadline, took);
    let stray = watch.writes();
    f.check(stray.is_empty(), || {
        format!(
            "{label}: the source's replica received writes {stray:?} for {key} after the \
             migration began (a grant on the source, replicated)"
        )
    });
    let on_replica =
        cluster
            .server(replica)
            .client()
            .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    f.check(on_replica == Reply::Int(0), || {
        format!("{label}: the source's replica holds {on_replica:?} keys of the moved slot")
    });

    served_at_target(f, &label, t, &key, ("A", 2), waiters);
}

fn manual_slot_migration(kind: Kind) {
    let cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "manual slot migration (MIGRATE + SETSLOT)");
    let primaries = cluster.primaries();
    let (src, dst) = (primaries[0], primaries[1]);
    let first = cluster.slots_of(src)[0].0;
    migrate_one_slot(
        &cluster,
        &mut f,
        (src, dst),
        first + 100,
        SetSlotOrder::TargetFirst,
    );
    migrate_one_slot(
        &cluster,
        &mut f,
        (src, dst),
        first + 101,
        SetSlotOrder::SourceFirst,
    );
    f.finish();
}

/// A lock for the reshard scenario: key, holder, count, deadline, waiters.
struct Held {
    key: String,
    owner: &'static str,
    count: i64,
    deadline: i64,
    waiters: Vec<Waiter>,
}

/// One `redis-cli --cluster reshard` of the `slots` (the source's lowest)
/// from `from` to `to`, judged; the redirected waiters then queue at `to`.
/// Returns false if the reshard did not complete (nothing more to check).
fn reshard_round(
    cluster: &Cluster,
    f: &mut Findings,
    (from, to): (usize, usize),
    slots: &[u16],
    locks: &mut [Held],
) -> bool {
    let label = format!("reshard node {from} -> node {to}");
    let t = cluster.server(to);
    let out = cluster.reshard(from, to, slots.len(), &[]);
    if !f.check(out.success, || {
        format!(
            "{label}: redis-cli --cluster reshard failed after {:?}:\n{}",
            out.elapsed,
            out.tail(14)
        )
    }) {
        let check = cluster.cli_check();
        f.fail(format!(
            "{label}: cluster left like this (redis-cli --cluster check):\n{}",
            check.tail(8)
        ));
        return false;
    }
    // The other nodes learn the new owners by gossip: let them agree first.
    let mut unsettled = None;
    let settled = wait_until(Duration::from_secs(15), || {
        unsettled = cluster.unstable();
        unsettled.is_none()
    });
    f.check(settled, || {
        format!("{label}: the cluster did not settle within 15 s of the reshard: {unsettled:?}")
    });
    let check = cluster.cli_check();
    f.check(check.success, || {
        format!(
            "{label}: redis-cli --cluster check after the reshard:\n{}",
            check.tail(10)
        )
    });
    for &slot in slots {
        let owner = cluster.node_for_slot(slot);
        f.check(owner == to, || {
            format!("{label}: slot {slot} is served by node {owner} after the reshard")
        });
        let left =
            cluster
                .server(from)
                .client()
                .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
        f.check(left == Reply::Int(0), || {
            format!("{label}: node {from} still holds {left:?} keys of slot {slot}")
        });
    }
    let mut tc = t.client();
    for l in locks.iter_mut() {
        let lbl = format!("{label}, {}", l.key);
        check_lock_arrived(
            f,
            &lbl,
            &mut tc,
            &l.key,
            false,
            l.owner,
            l.count,
            l.deadline,
            out.elapsed,
        );
        // The deadline may have moved by the transfer: judge the next round from here.
        l.deadline = lock_at(&mut tc, &l.key, false).1.max(l.deadline);
        let source = format!("node {from}");
        check_redirected(f, &lbl, &mut l.waiters, &source, t, "the reshard");
        let n = l.waiters.len();
        let waiters = std::mem::take(&mut l.waiters);
        l.waiters = retry_at(t, waiters, &l.key);
        if l.waiters.len() != n {
            return false;
        }
        f.check(wait_waiters(t, &l.key, n as i64) || n == 0, || {
            format!("{lbl}: the redirected waiters did not queue at node {to}")
        });
    }
    true
}

/// (b) `redis-cli --cluster reshard` moves three slots holding locks (one
/// with two waiters, one re-entered with one waiter, one without) and a
/// plain key, then moves them back with the waiters queued on the way.
fn cli_reshard(kind: Kind) {
    let cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "redis-cli --cluster reshard");
    let primaries = cluster.primaries();
    let (p0, p1) = (primaries[0], primaries[1]);
    let slots = cluster.lowest_slots(p0, 3);
    let s = cluster.server(p0);
    let mut c = s.client();
    // Key suffix, holder, holds, waiters (owner, RESP3).
    type Plan<'a> = (&'a str, &'static str, i64, &'a [(&'a str, bool)]);
    let plan: [Plan; 3] = [
        (":a", "A", 1, &[("W2", false), ("W3", true)]),
        (":b", "B", 2, &[("V3", true)]),
        (":c", "C", 1, &[]),
    ];
    let mut locks: Vec<Held> = plan
        .iter()
        .zip(&slots)
        .map(|(&(suffix, owner, count, waiters), &slot)| {
            let key = key_in_slot(slot, "rs", suffix);
            for n in 1..=count {
                assert_eq!(
                    c.cmd(&["LOCK.ACQUIRE", &key, owner, "PX", "120000"]),
                    Reply::Int(n)
                );
            }
            let deadline = c.cmd(&["PEXPIRETIME", &key]).as_int();
            let waiters = waiters
                .iter()
                .map(|&(o, resp3)| Waiter::park(s, &key, o, resp3))
                .collect();
            Held {
                key,
                owner,
                count,
                deadline,
                waiters,
            }
        })
        .collect();
    let plain = key_in_slot(slots[0], "rs", ":plain");
    assert_eq!(c.cmd(&["SET", &plain, "v"]), ok());
    for l in &locks {
        assert!(wait_waiters(s, &l.key, l.waiters.len() as i64));
    }

    if reshard_round(&cluster, &mut f, (p0, p1), &slots, &mut locks) {
        // The same slots are now node p1's lowest: move them back.
        assert_eq!(cluster.lowest_slots(p1, 3), slots);
        if reshard_round(&cluster, &mut f, (p1, p0), &slots, &mut locks) {
            let back = cluster.server(p0);
            let mut bc = back.client();
            f.check(
                bc.cmd(&["GET", &plain]) == Reply::Bulk(b"v".to_vec()),
                || "the plain key did not survive the round trip".into(),
            );
            for l in &mut locks {
                let label = format!("after the round trip, {}", l.key);
                drain_queue(
                    &mut f,
                    &label,
                    back,
                    &l.key,
                    l.owner,
                    l.count,
                    &mut l.waiters,
                );
            }
        }
    }
    f.finish();
}

/// (e) Valkey's atomic slot migration with a lock (count 2) and two waiters.
#[test]
fn atomic_slot_migration_valkey() {
    let kind = Kind::Valkey;
    let cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "CLUSTER MIGRATESLOTS");
    let primaries = cluster.primaries();
    let (src, dst) = (primaries[0], primaries[1]);
    let slot = cluster.slots_of(src)[0].0 + 7;
    let key = key_in_slot(slot, "asm", ":lock");
    let s = cluster.server(src);
    let t = cluster.server(dst);
    let HeldWithWaiters {
        holder: mut a,
        deadline,
        mut watch,
        mut waiters,
        ..
    } = hold_with_waiters(&cluster, src, &key, ["W2", "W3"]);

    let t0 = Instant::now();
    let r = cluster.migrateslots(src, dst, slot, slot);
    if !f.check(r == ok(), || {
        format!("CLUSTER MIGRATESLOTS SLOTSRANGE {slot} {slot} NODE <target> answered {r:?}")
    }) {
        f.finish();
        return;
    }
    let moved = cluster.wait_slot_owner(slot, dst, Duration::from_secs(30));
    let took = t0.elapsed();
    if !f.check(moved, || {
        let m = s.client().cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
        format!("slot {slot} did not reach the target in 30 s; GETSLOTMIGRATIONS: {m:?}")
    }) {
        f.finish();
        return;
    }
    let label = format!("slot {slot} by MIGRATESLOTS");
    let mut tc = t.client();
    check_lock_arrived(&mut f, &label, &mut tc, &key, false, "A", 2, deadline, took);
    check_redirected(
        &mut f,
        &label,
        &mut waiters,
        "the source",
        t,
        "the migration",
    );
    let left = a.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    f.check(left == Reply::Int(0), || {
        format!("{label}: the source holds {left:?} keys of the slot")
    });
    let stray = watch.writes();
    f.check(stray.is_empty(), || {
        format!("{label}: the source's replica received writes {stray:?} for {key}")
    });
    served_at_target(&mut f, &label, t, &key, ("A", 2), waiters);
    f.finish();
}

per_kind!(manual_slot_migration, cli_reshard);
