//! TOKEN on LOCK.ACQUIRE (README, "Surviving failover"): `[count, token]` /
//! `[owner, token]` replies, the counter RFencedLock uses
//! (`redisson_lock_token:{key}`), tokens that never go backwards: across
//! re-entries, Redisson's own increments, kill -9 restarts with the AOF, and
//! a failover to a replica that missed the last increments (the clock
//! floor). Real servers, Redis 7.0 and Valkey 9.1, RESP2 and RESP3.

mod common;

use std::time::Duration;

use common::*;
use testkit::redisson::{self, FENCED_TRY_LOCK, token_key};

/// `LOCK.ACQUIRE ... TOKEN` succeeded: (count or owner, token).
#[track_caller]
fn granted(r: &Reply) -> (Reply, i64) {
    match r {
        Reply::Array(a) if a.len() == 2 => (a[0].clone(), a[1].as_int()),
        other => panic!("expected [count|owner, token], got {other:?}"),
    }
}

fn counter(c: &mut Client, key: &str) -> Option<i64> {
    match c.cmd(&args!["GET", token_key(key.as_bytes())]) {
        Reply::Bulk(b) => Some(String::from_utf8_lossy(&b).parse().expect("integer")),
        r if r.is_nil() => None,
        other => panic!("GET counter of {key}: {other:?}"),
    }
}

fn info_token(c: &mut Client, key: &str) -> i64 {
    let info = c.cmd(&["LOCK.INFO", key]);
    match info.map_get("token") {
        Some(t) => t.as_int(),
        None => panic!("LOCK.INFO {key} has no token: {info:?}"),
    }
}

/// RFencedLock's acquire, run as Redisson runs it: `(pttl, token)`.
fn fenced_acquire(c: &mut Client, key: &str, owner: &str, lease_ms: u64) -> (i64, i64) {
    let r = c.cmd(&args![
        "EVAL",
        FENCED_TRY_LOCK,
        2,
        key,
        token_key(key.as_bytes()),
        lease_ms,
        owner
    ]);
    let a = r.as_array();
    (a[0].as_int(), a[1].as_int())
}

/// Every reply form, both protocols: fresh grant, re-entry, generated
/// owner, grants after BLOCK, nil; LOCK.INFO's `token`.
fn replies(kind: Kind) {
    let s = Server::start(kind);
    for resp3 in [false, true] {
        let mut c = if resp3 { s.client_resp3() } else { s.client() };
        let p = if resp3 { "RESP3" } else { "RESP2" };
        let k = format!("k{p}");
        let before = now_ms();
        let (count, t1) = granted(&c.cmd(&["LOCK.ACQUIRE", &k, "a", "TOKEN"]));
        let after = now_ms();
        assert_eq!(count, Reply::Int(1), "{kind} {p}");
        // A new counter starts at the clock floor: the server's ms × 1000.
        assert!(
            t1 >= before * 1000 && t1 <= (after + 1) * 1000,
            "{kind} {p}: first token {t1} not at the clock floor ({before}..{after} ms)"
        );
        let (count, t2) = granted(&c.cmd(&["LOCK.ACQUIRE", &k, "a", "PX", "60000", "TOKEN"]));
        assert_eq!(count, Reply::Int(2), "{kind} {p}: re-entry");
        assert!(t2 > t1, "{kind} {p}: re-entry token {t2} after {t1}");
        assert_eq!(counter(&mut c, &k), Some(t2), "{kind} {p}: the counter");
        assert_eq!(info_token(&mut c, &k), t2, "{kind} {p}: LOCK.INFO token");
        // Another owner: nil, counter untouched.
        let nil = c.cmd(&["LOCK.ACQUIRE", &k, "b", "TOKEN"]);
        let expected_nil = if resp3 { Reply::Null } else { Reply::Nil };
        assert_eq!(nil, expected_nil, "{kind} {p}");
        assert_eq!(
            counter(&mut c, &k),
            Some(t2),
            "{kind} {p}: nil left the counter"
        );

        // Grants after BLOCK: [1, token] and [uuid, token].
        let mut w = if resp3 { s.client_resp3() } else { s.client() };
        w.send(&["LOCK.ACQUIRE", &k, "w", "BLOCK", "5000", "TOKEN"]);
        assert!(wait_until(Duration::from_secs(5), || {
            s.info_field("lock", "lock_waiting").as_deref() == Some("1")
        }));
        assert_eq!(c.cmd(&["LOCK.RELEASE", &k, "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LOCK.RELEASE", &k, "a"]), Reply::Int(0));
        let (count, t3) = granted(&w.read_reply());
        assert_eq!(count, Reply::Int(1), "{kind} {p}: handed off");
        assert!(t3 > t2, "{kind} {p}: {t3} after {t2}");
        w.send(&["LOCK.ACQUIRE", &k, "*", "BLOCK", "5000", "TOKEN"]);
        assert!(wait_until(Duration::from_secs(5), || {
            s.info_field("lock", "lock_waiting").as_deref() == Some("1")
        }));
        assert_eq!(c.cmd(&["LOCK.RELEASE", &k, "w"]), Reply::Int(0));
        let (owner, t4) = granted(&w.read_reply());
        let owner = owner.as_str().to_owned();
        assert_eq!(owner.len(), 36, "{kind} {p}: a UUID");
        assert!(t4 > t3, "{kind} {p}: {t4} after {t3}");
        assert_eq!(info_token(&mut c, &k), t4, "{kind} {p}");
        assert_eq!(c.cmd(&["LOCK.RELEASE", &k, &owner]), Reply::Int(0));
        // Generated owner, immediate.
        let (owner, t5) = granted(&c.cmd(&["LOCK.ACQUIRE", &k, "*", "TOKEN"]));
        assert_eq!(owner.as_str().len(), 36, "{kind} {p}");
        assert!(t5 > t4, "{kind} {p}");
        // The counter has no TTL (RFencedLock's).
        assert_eq!(
            c.cmd(&args!["PTTL", token_key(k.as_bytes())]),
            Reply::Int(-1)
        );
        // Inside MULTI and a script, too.
        c.cmd(&["MULTI"]);
        c.cmd(&["LOCK.ACQUIRE", "m", "a", "TOKEN"]);
        c.cmd(&["LOCK.ACQUIRE", "m", "a", "TOKEN"]);
        let exec = c.cmd(&["EXEC"]);
        let (c1, m1) = granted(&exec.as_array()[0]);
        let (c2, m2) = granted(&exec.as_array()[1]);
        assert_eq!((c1, c2), (Reply::Int(1), Reply::Int(2)), "{kind} {p}");
        assert!(m2 > m1, "{kind} {p}");
        let script = "return redis.call('LOCK.ACQUIRE', KEYS[1], 'a', 'TOKEN')";
        let (c3, m3) = granted(&c.cmd(&["EVAL", script, "1", "m"]));
        assert_eq!(c3, Reply::Int(3), "{kind} {p}");
        assert!(m3 > m2, "{kind} {p}");
        c.cmd(&["DEL", "m", "redisson_lock_token:{m}"]);
    }
}

/// The counter's name follows Redisson's braces rule, and TOKEN creates
/// nothing else.
fn counter_name(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    for key in ["plain", "a{b}c", "{tag}x", "x{", "sp ace"] {
        let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", key, "o", "TOKEN"]));
        let name = token_key(key.as_bytes());
        let want = if key.contains('{') {
            format!("redisson_lock_token:{key}")
        } else {
            format!("redisson_lock_token:{{{key}}}")
        };
        assert_eq!(name, want.as_bytes(), "the testkit rule");
        assert_eq!(counter(&mut c, key), Some(t), "{kind}: {want}");
    }
    assert_eq!(
        c.cmd(&["DBSIZE"]),
        Reply::Int(10),
        "{kind}: 5 locks, 5 counters"
    );
}

/// No call without TOKEN creates the counter; nil, errors and
/// FORCERELEASE leave it as it is; LOCK.INFO reads it (0 when missing,
/// Redisson's increments included); RENEW takes no TOKEN.
fn counter_is_touched_only_by_token_grants(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut w = s.client();
    c.cmd(&["LOCK.ACQUIRE", "k", "a"]);
    c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "1000"]);
    c.cmd(&["LOCK.RENEW", "k", "a", "PX", "60000"]);
    assert_eq!(info_token(&mut c, "k"), 0, "{kind}: no counter: token 0");
    w.send(&["LOCK.ACQUIRE", "k", "w", "BLOCK", "5000"]);
    assert!(wait_until(Duration::from_secs(5), || {
        s.info_field("lock", "lock_waiting").as_deref() == Some("1")
    }));
    c.cmd(&["LOCK.RELEASE", "k", "a"]);
    c.cmd(&["LOCK.RELEASE", "k", "a"]);
    assert_eq!(w.read_reply(), Reply::Int(1));
    c.cmd(&["LOCK.FORCERELEASE", "k"]);
    let r = c.cmd(&["LOCK.RENEW", "k", "a", "TOKEN"]);
    assert_eq!(
        r.err_code(),
        Some("ERR"),
        "{kind}: RENEW takes no TOKEN: {r:?}"
    );
    assert_eq!(
        c.cmd(&["KEYS", "redisson_lock_token:*"]),
        Reply::Array(vec![])
    );

    let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]));
    // Each call's exact answer: a nil, errors (a bad lease, a syntax error,
    // no replica to acknowledge), a force-release.
    let nil = |r: &Reply| r.is_nil();
    let err = |code: &'static str| move |r: &Reply| r.err_code() == Some(code);
    let one = |r: &Reply| *r == Reply::Int(1);
    type Expected<'a> = &'a dyn Fn(&Reply) -> bool;
    let calls: [(&[&str], Expected); 5] = [
        (&["LOCK.ACQUIRE", "k", "b", "TOKEN"], &nil),
        (&["LOCK.ACQUIRE", "k", "b", "TOKEN", "PX", "0"], &err("ERR")),
        (&["LOCK.ACQUIRE", "k", "b", "TOKEN", "BOGUS"], &err("ERR")),
        (
            &["LOCK.ACQUIRE", "k", "a", "TOKEN", "REPLICAS", "1", "100"],
            &err("NOREPLICAS"),
        ),
        (&["LOCK.FORCERELEASE", "k"], &one),
    ];
    for (call, expected) in calls {
        let r = c.cmd(call);
        assert!(expected(&r), "{kind}: {call:?}: {r:?}");
        assert_eq!(
            counter(&mut c, "k"),
            Some(t),
            "{kind}: {call:?} touched the counter"
        );
    }
    // A lock key that is not a lock: the error leaves the counter.
    c.cmd(&["SET", "k", "string"]);
    let r = c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]);
    assert_eq!(r.err_code(), Some("WRONGTYPE"), "{kind}: {r:?}");
    c.cmd(&["DEL", "k"]);
    c.cmd(&["HSET", "k", "x", "1", "y", "2"]);
    let r = c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]);
    assert_eq!(r.err_code(), Some("NOTLOCK"), "{kind}: {r:?}");
    assert_eq!(
        counter(&mut c, "k"),
        Some(t),
        "{kind}: errors touched the counter"
    );
    c.cmd(&["DEL", "k"]);
    // Redisson's increments show in LOCK.INFO.
    c.cmd(&["LOCK.ACQUIRE", "k", "a"]);
    c.cmd(&args!["INCRBY", token_key(b"k"), 5]);
    assert_eq!(info_token(&mut c, "k"), t + 5, "{kind}");
}

/// A counter INCR would refuse is refused, with nothing changed.
fn broken_counters_are_refused(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let tk = token_key(b"k");
    let cases: [(&[&str], &str); 4] = [
        (&["HSET", "#", "f", "v"], "WRONGTYPE"),
        (&["SET", "#", "abc"], "ERR"),
        (&["SET", "#", "9223372036854775807"], "ERR"),
        (&["SET", "#", "12.5"], "ERR"),
    ];
    for (setup, code) in cases {
        c.cmd(&args!["DEL", "k", &tk]);
        let setup: Vec<Vec<u8>> = setup
            .iter()
            .map(|a| {
                if *a == "#" {
                    tk.clone()
                } else {
                    a.as_bytes().to_vec()
                }
            })
            .collect();
        c.cmd(&setup);
        // A held lock (re-entry) and a free one (fresh grant).
        for held in [false, true] {
            if held {
                c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]);
            }
            let before = (key_state(&mut c, b"k"), key_state(&mut c, &tk));
            let r = c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]);
            assert_eq!(
                r.err_code(),
                Some(code),
                "{kind}: {setup:?} held={held}: {r:?}"
            );
            let after = (key_state(&mut c, b"k"), key_state(&mut c, &tk));
            assert_eq!(
                before, after,
                "{kind}: {setup:?} held={held}: something changed"
            );
        }
        // LOCK.INFO still answers (token 0 when unreadable).
        let readable = code == "ERR" && setup[2] == b"9223372036854775807";
        let want = if readable { i64::MAX } else { 0 };
        assert_eq!(info_token(&mut c, "k"), want, "{kind}: {setup:?}");
    }
    // A counter someone gave a TTL keeps it (INCR would).
    c.cmd(&args!["DEL", "k", &tk]);
    c.cmd(&args!["SET", &tk, "5", "PX", "100000"]);
    let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]));
    assert!(t > 5);
    let pttl = c.cmd(&args!["PTTL", &tk]).as_int();
    assert!(pttl > 90_000 && pttl <= 100_000, "{kind}: TTL kept: {pttl}");
}

/// LOCK.ACQUIRE TOKEN and RFencedLock's own acquire script share one
/// strictly increasing sequence, and see each other's locks.
fn shared_with_redisson_fenced_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut issued = Vec::new();
    // Redisson first: a plain INCR counter.
    let (pttl, t) = fenced_acquire(&mut c, "k", "r1", 60000);
    assert_eq!((pttl, t), (-1, 1), "{kind}: Redisson's first token");
    issued.push(t);
    let (pttl, t) = fenced_acquire(&mut c, "k", "r1", 60000);
    assert_eq!(pttl, -1, "{kind}: Redisson re-entry");
    issued.push(t);
    // LOCK.* sees Redisson's lock.
    assert!(c.cmd(&["LOCK.ACQUIRE", "k", "m1", "TOKEN"]).is_nil());
    let unlock = sha1_of(&mut c, redisson::UNLOCK);
    // Redisson's unlock: 0 (a hold left), then 1 (released).
    for expected in [0, 1] {
        let r = c.cmd(&args![
            "EVALSHA",
            &unlock,
            2,
            "k",
            redisson::channel(b"k"),
            "0",
            60000,
            "r1"
        ]);
        assert_eq!(r, Reply::Int(expected), "{kind}: Redisson's unlock");
    }
    // Alternate, with re-entries on both sides.
    for round in 0..20 {
        if round % 2 == 0 {
            let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "m1", "TOKEN"]));
            issued.push(t);
            let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "m1", "TOKEN"]));
            issued.push(t);
            // Redisson's acquire sees LOCK.ACQUIRE's lock as taken.
            let (pttl, none) = fenced_acquire(&mut c, "k", "r1", 60000);
            assert!(pttl > 0 && none == -1, "{kind}: {pttl} {none}");
            c.cmd(&["LOCK.RELEASE", "k", "m1"]);
            c.cmd(&["LOCK.RELEASE", "k", "m1"]);
        } else {
            let (_, t) = fenced_acquire(&mut c, "k", "r1", 60000);
            issued.push(t);
            // LOCK.ACQUIRE re-enters Redisson's lock with the same owner.
            let (count, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "r1", "TOKEN"]));
            assert_eq!(count, Reply::Int(2), "{kind}");
            issued.push(t);
            assert_eq!(info_token(&mut c, "k"), t, "{kind}: LOCK.INFO");
            c.cmd(&["LOCK.FORCERELEASE", "k"]);
        }
    }
    for pair in issued.windows(2) {
        assert!(
            pair[1] > pair[0],
            "{kind}: tokens went {} then {}: {issued:?}",
            pair[0],
            pair[1]
        );
    }
    assert_eq!(counter(&mut c, "k"), issued.last().copied(), "{kind}");
}

fn sha1_of(c: &mut Client, script: &str) -> String {
    c.cmd(&["SCRIPT", "LOAD", script]).as_str().to_owned()
}

/// kill -9 with `appendfsync always`, then a restart from the AOF: the
/// counter is back and the next token is above every token issued before,
/// also when the counter runs ahead of the clock floor (so only the
/// persisted counter can keep it increasing).
fn survives_kill9_restarts(kind: Kind) {
    let mut s = Server::builder(kind)
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start();
    let mut c = s.client();
    let mut last = 0;
    for _ in 0..3 {
        let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]));
        assert!(t > last);
        last = t;
    }
    // Far ahead of the clock floor (as many Redisson increments would put it).
    let ahead = now_ms() * 1000 + 1_000_000_000_000;
    c.cmd(&args!["SET", token_key(b"far"), ahead]);
    let (_, far) = granted(&c.cmd(&["LOCK.ACQUIRE", "far", "a", "TOKEN"]));
    assert_eq!(far, ahead + 1, "{kind}");
    for round in 0..2 {
        s.kill9();
        s.restart();
        let mut c = s.client();
        assert_eq!(counter(&mut c, "k"), Some(last), "{kind} restart {round}");
        assert_eq!(
            counter(&mut c, "far"),
            Some(far + round),
            "{kind} restart {round}"
        );
        let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "TOKEN"]));
        assert!(t > last, "{kind}: {t} after {last}");
        last = t;
        let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "far", "a", "TOKEN"]));
        assert_eq!(
            t,
            far + round + 1,
            "{kind}: counter, not clock, after restart"
        );
    }
}

/// A kill -9 failover to a replica that missed the last increments: the
/// promoted server's counter is behind the tokens already issued, and its
/// next token is still above all of them (the clock floor).
fn survives_failover_to_a_stale_replica(kind: Kind) {
    let mut p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    let mut c = p.client();
    let mut last = 0;
    for _ in 0..3 {
        let (_, t) = granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000", "TOKEN"]));
        last = t;
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let replicated = last;
    // The replica stops receiving (its link is cut; it reconnects only from
    // its once-a-second cron, and it is frozen meanwhile); the primary goes
    // on issuing tokens, also through Redisson's script, then dies.
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &r.pid().to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    assert_eq!(c.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), Reply::Int(1));
    for i in 0..50 {
        let t = if i % 5 == 4 {
            fenced_acquire(&mut c, "k", "a", 60000).1
        } else {
            granted(&c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000", "TOKEN"])).1
        };
        assert!(t > last);
        last = t;
    }
    p.kill9();
    let cont = std::process::Command::new("kill")
        .args(["-CONT", &r.pid().to_string()])
        .status()
        .unwrap();
    assert!(cont.success());
    let mut rc = r.client();
    assert_eq!(
        rc.cmd(&["REPLICAOF", "NO", "ONE"]),
        Reply::Status("OK".into())
    );
    let stale = counter(&mut rc, "k").expect("counter replicated");
    assert_eq!(
        stale, replicated,
        "{kind}: the replica missed the last increments"
    );
    // A plain counter would now go backwards: stale + 1 <= last.
    assert!(stale < last, "{kind}");
    let (count, t) = granted(&rc.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000", "TOKEN"]));
    assert_eq!(
        count,
        Reply::Int(4),
        "{kind}: the replicated holds, re-entered"
    );
    assert!(
        t > last,
        "{kind}: token {t} after failover, {last} issued before"
    );
    // Redisson's INCR continues above it too.
    rc.cmd(&["LOCK.FORCERELEASE", "k"]);
    let (_, tr) = fenced_acquire(&mut rc, "k", "r", 60000);
    assert!(tr > t, "{kind}");
}

per_kind!(
    replies,
    counter_name,
    counter_is_touched_only_by_token_grants,
    broken_counters_are_refused,
    shared_with_redisson_fenced_lock,
    survives_kill9_restarts,
    survives_failover_to_a_stale_replica,
);
