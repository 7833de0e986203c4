//! Waiters and locks across role changes: `CLUSTER FAILOVER` and back on a
//! real 3x3 cluster, `REPLICAOF` and `FAILOVER` on a standalone pair, and a
//! primary killed with SIGKILL whose replica is elected.
//!
//! The promise (README, "Running on a cluster"): a waiter is answered, never left hanging,
//! when its node becomes a replica: `UNBLOCKED`, or a redirect (`MOVED` /
//! `REDIRECT`) naming the node that now serves the key, on Redis and on
//! Valkey, whatever `CLIENT CAPA` the client sent; nothing is left queued
//! to wedge the key when the node becomes primary again; and a newly
//! promoted primary serves the locks it inherited like its own (waiters
//! queued on it are handed the lock at the deadline and on release).
//!
//! Redis 7.0 has no `CLIENT CAPA` (it answers `ERR unknown subcommand`):
//! there the redirect-capable clients are Valkey's only.

mod common;

use std::time::{Duration, Instant};

use common::topology::*;
use common::*;
use testkit::Cluster;

/// How long a waiter may go unanswered after its node became a replica.
const ANSWER_BOUND: Duration = Duration::from_secs(5);

fn ok() -> Reply {
    Reply::Status("OK".into())
}

/// The kinds of client that wait: (owner, RESP3?, sent `CLIENT CAPA redirect`?).
fn waiter_kinds(kind: Kind, s: &Server) -> Vec<(&'static str, bool, bool)> {
    let mut v = vec![("W2", false, false), ("W3", true, false)];
    let capa = s.client().cmd(&["CLIENT", "CAPA", "redirect"]);
    match kind {
        Kind::Valkey => {
            assert_eq!(capa, ok(), "CLIENT CAPA redirect on Valkey");
            v.extend([("C2", false, true), ("C3", true, true)]);
        }
        Kind::Redis => assert_eq!(
            capa.err_code(),
            Some("ERR"),
            "Redis 7.0 was expected to lack CLIENT CAPA: {capa:?}"
        ),
    }
    v
}

struct Waiter {
    what: String,
    c: Client,
}

#[track_caller]
fn park_all(s: &Server, kind: Kind, key: &str) -> Vec<Waiter> {
    let waiters: Vec<Waiter> = waiter_kinds(kind, s)
        .into_iter()
        .map(|(owner, resp3, capa)| Waiter {
            what: format!(
                "{owner} ({}{})",
                if resp3 { "RESP3" } else { "RESP2" },
                if capa { ", CLIENT CAPA redirect" } else { "" }
            ),
            c: block_on(s, key, owner, resp3, capa),
        })
        .collect();
    assert!(
        wait_waiters(s, key, waiters.len() as i64),
        "waiters did not queue on port {}",
        s.port
    );
    waiters
}

/// Each waiter on the demoted node must have been answered UNBLOCKED or a
/// redirect to `new_port` within `ANSWER_BOUND` of the role change.
fn judge_waiters(f: &mut Findings, label: &str, waiters: &mut [Waiter], new_port: u16) {
    let deadline = Instant::now() + ANSWER_BOUND;
    for w in waiters.iter_mut() {
        let left = deadline.saturating_duration_since(Instant::now());
        let (a, _) = answer_within(&mut w.c, left.max(Duration::from_millis(1)));
        let good = matches!(a, Answer::Unblocked(_)) || a.is_redirect_to(new_port);
        f.check(good, || {
            format!(
                "{label}: waiter {} on the demoted node: expected UNBLOCKED or MOVED/REDIRECT \
                 to port {new_port} within {ANSWER_BOUND:?}, got {a:?}",
                w.what
            )
        });
    }
}

/// `(owner, holds, waiters)` from `LOCK.INFO key`.
#[track_caller]
fn info(c: &mut Client, key: &str) -> Option<(String, i64, i64)> {
    let r = c.cmd(&["LOCK.INFO", key]);
    if r.is_nil() {
        return None;
    }
    let int = |f: &str| match r.map_get(f) {
        Some(Reply::Int(n)) => *n,
        _ => panic!("LOCK.INFO {key}: no integer {f}: {r:?}"),
    };
    let owner = r
        .map_get("owner")
        .unwrap_or_else(|| panic!("LOCK.INFO {key}: no owner: {r:?}"))
        .as_bytes();
    let owner = String::from_utf8_lossy(owner).into_owned();
    Some((owner, int("holds"), int("waiters")))
}

/// (c) `CLUSTER FAILOVER` with waiters of every kind on the primary; the
/// holder then releases on the new primary (nothing may be granted on the
/// demoted node); then failing back: the key must be usable on the
/// original primary again.
fn cluster_failover_and_back(kind: Kind) {
    let cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "CLUSTER FAILOVER and back");
    let key = "{fo}:lock";
    let p = cluster.node_for_key(key.as_bytes());
    let r = cluster.replica_of(p);
    let s = cluster.server(p);
    let mut a = s.client();
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", key, "A", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(a.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));
    let mut waiters = park_all(s, kind, key);

    let (old, took) = cluster.failover(r, "");
    assert_eq!(old, p);
    cluster.log(&format!("CLUSTER FAILOVER: roles swapped in {took:?}"));
    judge_waiters(&mut f, "CLUSTER FAILOVER", &mut waiters, cluster.port(r));
    let mut rc = cluster.server(r).client_resp3();
    let inherited = info(&mut rc, key);
    f.check(inherited == Some(("A".to_string(), 1, 0)), || {
        format!("the promoted replica has LOCK.INFO (owner, holds, waiters) = {inherited:?}, expected A, 1, 0")
    });

    // The holder releases on the new primary; the release reaches the
    // demoted node by replication. Nothing may be granted there.
    assert_eq!(rc.cmd(&["LOCK.RELEASE", key, "A"]), Reply::Int(0));
    let watch_until = Instant::now() + ANSWER_BOUND;
    for w in &mut waiters {
        let left = watch_until.saturating_duration_since(Instant::now());
        if let Polled::Reply(late) = w.c.poll_reply(left.max(Duration::from_millis(1))) {
            f.check(!matches!(late, Reply::Int(_) | Reply::Bulk(_)), || {
                format!(
                    "waiter {} on the demoted node (a replica now) was GRANTED {late:?} after the \
                     holder released on the new primary",
                    w.what
                )
            });
        }
    }
    let on_replica = cluster.server(p).client().cmd(&["EXISTS", key]);
    let mut ro = cluster.server(p).client();
    assert_eq!(ro.cmd(&["READONLY"]), ok());
    let on_replica = (on_replica, ro.cmd(&["EXISTS", key]));
    f.check(on_replica.1 == Reply::Int(0), || {
        format!("after the release on the new primary, the demoted node (READONLY read) still has the key: {on_replica:?}")
    });
    assert_eq!(
        rc.cmd(&["LOCK.ACQUIRE", key, "A", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(rc.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));

    // Back to the original primary.
    let (old, _) = cluster.failover(p, "");
    assert_eq!(old, r);
    // A waiter never answered must not be handed the lock now either.
    for w in &mut waiters {
        if let Polled::Reply(late) = w.c.poll_reply(Duration::from_millis(200)) {
            f.fail(format!(
                "after failing back, waiter {} (queued before the failover) was answered {late:?}",
                w.what
            ));
        }
    }
    let mut c = s.client();
    let back = info(&mut c, key);
    f.check(back == Some(("A".to_string(), 1, 0)), || {
        format!("after failing back, LOCK.INFO (owner, holds, waiters) = {back:?}, expected A, 1, 0 (no waiter left from before)")
    });
    let forced = c.cmd(&["LOCK.FORCERELEASE", key]);
    f.check(forced == Reply::Int(1), || {
        format!("after failing back, LOCK.FORCERELEASE answered {forced:?}, expected 1")
    });
    let again = c.cmd(&["LOCK.ACQUIRE", key, "X", "PX", "60000"]);
    f.check(again == Reply::Int(1), || {
        format!("after failing back and FORCERELEASE, LOCK.ACQUIRE answered {again:?}, expected 1")
    });
    let fresh = c.cmd(&["LOCK.ACQUIRE", "{fo}:other", "X"]);
    f.check(fresh == Reply::Int(1), || {
        format!("after failing back, LOCK.ACQUIRE of another key answered {fresh:?}")
    });
    f.finish();
}

/// (d) Standalone: the primary becomes a replica by `REPLICAOF` (after its
/// replica was promoted with `REPLICAOF NO ONE`) or by `FAILOVER TO`.
fn standalone_role_change(kind: Kind) {
    let mut f = Findings::new(kind, "standalone REPLICAOF / FAILOVER");
    for how in ["REPLICAOF", "FAILOVER"] {
        let p = Server::start(kind);
        let r = Server::start(kind);
        r.replica_of(&p);
        let key = "lk";
        let mut a = p.client();
        assert_eq!(
            a.cmd(&["LOCK.ACQUIRE", key, "A", "PX", "60000"]),
            Reply::Int(1)
        );
        assert_eq!(a.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));
        let mut waiters = park_all(&p, kind, key);
        let port = r.port.to_string();
        match how {
            "REPLICAOF" => {
                assert_eq!(r.client().cmd(&["REPLICAOF", "NO", "ONE"]), ok());
                assert_eq!(a.cmd(&["REPLICAOF", "127.0.0.1", &port]), ok());
            }
            _ => {
                assert_eq!(a.cmd(&["FAILOVER", "TO", "127.0.0.1", &port]), ok());
                let switched = wait_until(Duration::from_secs(10), || {
                    p.info_field("replication", "role").as_deref() == Some("slave")
                        && r.info_field("replication", "role").as_deref() == Some("master")
                });
                assert!(switched, "FAILOVER TO did not swap roles in 10 s");
            }
        }
        judge_waiters(&mut f, how, &mut waiters, r.port);
        let inherited = info(&mut r.client(), key);
        f.check(inherited == Some(("A".to_string(), 1, 0)), || {
            format!("{how}: the new primary has LOCK.INFO (owner, holds, waiters) = {inherited:?}")
        });
        let left = info(&mut p.client(), key);
        f.check(
            left.as_ref().is_some_and(|(_, _, waiters)| *waiters == 0),
            || format!("{how}: the demoted node still reports {left:?} (waiters must be 0)"),
        );
    }
    f.finish();
}

/// (h) A primary is killed; its replica is elected and serves the locks it
/// inherited: a waiter queued on it gets a lease-limited lock at its
/// deadline, another gets a lock when the holder releases it there. The
/// killed node then rejoins as a replica and mirrors the new grants.
fn promoted_primary_serves_inherited_locks(kind: Kind) {
    let mut cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "promoted primary after SIGKILL");
    let short = "{pr}:short";
    let long = "{pr}:long";
    let p = cluster.node_for_key(short.as_bytes());
    let mut a = cluster.server(p).client();
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", short, "A", "PX", "9000"]),
        Reply::Int(1)
    );
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", long, "A", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", long, "A", "PX", "60000"]),
        Reply::Int(2)
    );
    let d_short = a.cmd(&["PEXPIRETIME", short]).as_int();
    assert_eq!(a.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));
    drop(a);

    let (r, took) = cluster.kill_primary(p);
    cluster.log(&format!(
        "SIGKILL: replica {r} elected {took:?} after the kill"
    ));
    let s = cluster.server(r);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["PEXPIRETIME", short]).as_int(),
        d_short,
        "the promoted replica has another deadline for {short}"
    );
    assert!(
        d_short > now_ms() + 300,
        "the election took {took:?}: {short}'s lease ran out before the test could queue a waiter"
    );
    let mut at_deadline = s.client();
    at_deadline.send(&["LOCK.ACQUIRE", short, "D", "PX", "10000", "BLOCK", "0"]);
    let mut on_release = s.client_resp3();
    on_release.send(&["LOCK.ACQUIRE", long, "R", "PX", "60000", "BLOCK", "0"]);
    f.check(
        wait_waiters(s, short, 1) && wait_waiters(s, long, 1),
        || "waiters did not queue on the promoted primary".into(),
    );

    // On release.
    assert_eq!(c.cmd(&["LOCK.RELEASE", long, "A"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.RELEASE", long, "A"]), Reply::Int(0));
    let (got, _) = answer_within(&mut on_release, ANSWER_BOUND);
    f.check(got == Answer::Granted(Reply::Int(1)), || {
        format!(
            "the waiter for {long} on the promoted primary got {got:?} after the holder released"
        )
    });

    // At the deadline (server clock: the grant's lease is 10 s).
    let wait_for = Duration::from_millis((d_short - now_ms()).max(0) as u64) + ANSWER_BOUND;
    let (got, _) = answer_within(&mut at_deadline, wait_for);
    if f.check(got == Answer::Granted(Reply::Int(1)), || {
        format!("the waiter for {short} on the promoted primary got {got:?} by its deadline + {ANSWER_BOUND:?}")
    }) {
        let granted_at = c.cmd(&["PEXPIRETIME", short]).as_int() - 10_000;
        let late = granted_at - d_short;
        f.check((1..=250).contains(&late), || {
            format!("{short} was handed on {late} ms after its deadline (expected 1..=250)")
        });
    }

    // The killed node comes back as a replica of the promoted one.
    cluster.restart(p, r);
    let mut back = cluster.server(p).client();
    assert_eq!(back.cmd(&["READONLY"]), ok());
    let mirrored = info(&mut back, long);
    f.check(
        mirrored
            .as_ref()
            .is_some_and(|(o, h, w)| o == "R" && *h == 1 && *w == 0),
        || format!("the restarted node (now a replica) reports {mirrored:?} for {long}"),
    );
    f.finish();
}

per_kind!(
    cluster_failover_and_back,
    standalone_role_change,
    promoted_primary_serves_inherited_locks
);
