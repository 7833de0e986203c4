//! Replicas and the unlock notification beyond one server.
//!
//! - A *writable* replica (`replica-read-only no`) refuses every LOCK.*
//!   command but LOCK.INFO with `READONLY`, also inside MULTI/EXEC and
//!   scripts: a lock taken there would be invisible to the primary (and,
//!   before the fix, was never replicated and its waiters never served).
//!   LOCK.INFO there reports `waiters` 0 (and `keepalive` 0 once that field
//!   exists): both are connection state on the primary.
//! - In a 3x3 cluster the unlock message is a sharded publish that reaches
//!   SSUBSCRIBE subscribers on the shard's primary and on its replica; a
//!   replica read (READONLY connection) reports waiters 0, and a write sent
//!   there is redirected to the primary; a key whose channel lands in
//!   another slot (`a{b`) still locks.

mod common;

use std::time::Duration;

use common::topology::*;
use common::*;
use testkit::Cluster;
use testkit::redisson::channel;

fn ok() -> Reply {
    Reply::Status("OK".into())
}

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

fn proto(resp3: bool) -> &'static str {
    if resp3 { "RESP3" } else { "RESP2" }
}

/// Every LOCK.* write, with `key` held by `holder` and `free` not held.
fn lock_writes<'a>(key: &'a str, holder: &'a str, free: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["LOCK.ACQUIRE", free, "o"],
        vec!["LOCK.ACQUIRE", free, "*"],
        vec!["LOCK.ACQUIRE", free, "o", "PX", "1000", "BLOCK", "100"],
        vec!["LOCK.ACQUIRE", key, "o", "BLOCK", "100"],
        vec!["LOCK.ACQUIRE", key, holder],
        vec!["LOCK.RELEASE", key, holder],
        vec!["LOCK.RENEW", key, holder, "PX", "1000"],
        vec!["LOCK.FORCERELEASE", key],
    ]
}

/// (f) A writable replica: every LOCK.* write refused, directly, in
/// MULTI/EXEC and in scripts; LOCK.INFO served with waiters 0.
fn writable_replica_refuses_lock_writes(kind: Kind) {
    let mut f = Findings::new(kind, "writable replica");
    let p = Server::start(kind);
    let r = Server::builder(kind)
        .config("replica-read-only", "no")
        .start();
    r.replica_of(&p);
    let mut pc = p.client();
    assert_eq!(
        pc.cmd(&["LOCK.ACQUIRE", "k", "A", "PX", "60000"]),
        Reply::Int(1)
    );
    let _waiter = block_on(&p, "k", "W", false, false);
    assert!(wait_waiters(&p, "k", 1));
    assert_eq!(pc.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));
    // The setup really is writable: a plain write is accepted there.
    let mut probe = r.client();
    assert_eq!(probe.cmd(&["SET", "plain", "v"]), ok());
    assert_eq!(probe.cmd(&["DEL", "plain"]), Reply::Int(1));
    let state = |c: &mut Client| (c.cmd(&["DBSIZE"]), hash_and_deadline(c, b"k"));
    let before = state(&mut probe);

    // LOCK.INFO first (while the replicated lock is intact): served from
    // the replicated hash, waiters 0 although one client waits on the primary.
    for resp3 in [false, true] {
        let pr = proto(resp3);
        let mut c = if resp3 { r.client_resp3() } else { r.client() };
        let info = c.cmd(&["LOCK.INFO", "k"]);
        let shape_ok = if resp3 {
            matches!(info, Reply::Map(_))
        } else {
            matches!(info, Reply::Array(_))
        };
        f.check(
            shape_ok
                && info.map_get("owner") == Some(&bulk("A"))
                && info.map_get("holds") == Some(&Reply::Int(1))
                && info.map_get("waiters") == Some(&Reply::Int(0)),
            || format!("{pr} LOCK.INFO k on the replica answered {info:?}, expected owner A, holds 1, waiters 0"),
        );
        // `keepalive` is checked once the primary reports it.
        let on_primary = pc.cmd(&["LOCK.INFO", "k"]);
        if on_primary.map_get("keepalive").is_some() {
            f.check(info.map_get("keepalive") == Some(&Reply::Int(0)), || {
                format!(
                    "{pr} LOCK.INFO k on the replica reports keepalive {:?} (must be 0)",
                    info.map_get("keepalive")
                )
            });
        }
    }

    for resp3 in [false, true] {
        let pr = proto(resp3);
        let mut c = if resp3 { r.client_resp3() } else { r.client() };
        let mut accepted = Vec::new();
        for cmd in lock_writes("k", "A", "free") {
            let got = c.cmd(&cmd);
            if got.err_code() != Some("READONLY") {
                accepted.push(format!("{} -> {got:?}", cmd.join(" ")));
            }
        }
        f.check(accepted.is_empty(), || {
            format!(
                "{pr}: LOCK.* writes on a writable replica not refused with READONLY: {accepted:#?}"
            )
        });

        // MULTI/EXEC: refused at queueing or inside EXEC.
        assert_eq!(c.cmd(&["MULTI"]), ok());
        let queued: Vec<Reply> = lock_writes("k", "A", "free")
            .iter()
            .map(|cmd| c.cmd(cmd))
            .collect();
        let exec = c.cmd(&["EXEC"]);
        let all_refused = match &exec {
            Reply::Array(results) => {
                queued.iter().all(|q| *q == Reply::Status("QUEUED".into()))
                    && results.len() == queued.len()
                    && results.iter().all(|x| x.err_code() == Some("READONLY"))
            }
            Reply::Error(e) => {
                e.starts_with("EXECABORT")
                    && queued.iter().all(|q| q.err_code() == Some("READONLY"))
            }
            _ => false,
        };
        f.check(all_refused, || {
            format!("{pr}: MULTI/EXEC of every LOCK.* write on a writable replica: queued {queued:?}, EXEC {exec:?}")
        });

        // Scripts: the module's error as redis.pcall returns it, and the
        // error redis.call raises.
        let mut accepted = Vec::new();
        for cmd in lock_writes("k", "A", "free") {
            let args = cmd[2..]
                .iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(", ");
            let sep = if args.is_empty() { "" } else { ", " };
            for call in ["pcall", "call"] {
                let script = format!("return redis.{call}('{}', KEYS[1]{sep}{args})", cmd[0]);
                let got = c.cmd(&["EVAL", &script, "1", cmd[1]]);
                let refused = match &got {
                    Reply::Error(e) if call == "pcall" => e.starts_with("READONLY"),
                    Reply::Error(e) => e.contains("READONLY"),
                    _ => false,
                };
                if !refused {
                    accepted.push(format!("EVAL \"{script}\" 1 {} -> {got:?}", cmd[1]));
                }
            }
        }
        f.check(accepted.is_empty(), || {
            format!("{pr}: LOCK.* writes inside scripts on a writable replica not refused with READONLY: {accepted:#?}")
        });
    }
    let after = state(&mut probe);
    f.check(after == before, || {
        format!("the writable replica changed: before {before:?}, after {after:?}")
    });
    let primary_view = pc.cmd(&["LOCK.INFO", "k"]);
    f.check(
        primary_view.map_get("owner") == Some(&bulk("A"))
            && primary_view.map_get("waiters") == Some(&Reply::Int(1)),
        || format!("the primary's lock changed: {primary_view:?}"),
    );
    f.finish();
}

/// A sharded subscriber: (where, RESP3?, connection).
struct Sub {
    what: String,
    resp3: bool,
    c: Client,
}

impl Sub {
    #[track_caller]
    fn start(s: &Server, at: &str, ch: &str, resp3: bool) -> Sub {
        let mut c = if resp3 { s.client_resp3() } else { s.client() };
        let ack = vec![bulk("ssubscribe"), bulk(ch), Reply::Int(1)];
        let expected = if resp3 {
            Reply::Push(ack)
        } else {
            Reply::Array(ack)
        };
        assert_eq!(
            c.cmd(&["SSUBSCRIBE", ch]),
            expected,
            "SSUBSCRIBE on the {at}"
        );
        Sub {
            what: format!("SSUBSCRIBE on the {at} ({})", proto(resp3)),
            resp3,
            c,
        }
    }

    fn message(&self, ch: &str) -> Reply {
        let m = vec![bulk("smessage"), bulk(ch), bulk("0")];
        if self.resp3 {
            Reply::Push(m)
        } else {
            Reply::Array(m)
        }
    }
}

/// Every subscriber hears exactly one `0` (within 5 s) — or, with `none`,
/// nothing within 200 ms.
fn hear(f: &mut Findings, subs: &mut [Sub], ch: &str, when: &str, none: bool) {
    for s in subs.iter_mut() {
        let wait = if none {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        let got = s.c.poll_reply(wait);
        let expected = if none {
            Polled::Nothing
        } else {
            Polled::Reply(s.message(ch))
        };
        f.check(got == expected, || {
            format!(
                "{when}: {} of {ch} got {got:?}, expected {expected:?}",
                s.what
            )
        });
    }
}

/// (g) Sharded unlock notifications on the shard's primary and replica;
/// replica reads in the cluster; a key whose channel is in another slot.
fn cluster_notifications_and_replica_reads(kind: Kind) {
    let cluster = Cluster::start(kind);
    let mut f = Findings::new(kind, "cluster notifications and replica reads");
    for key in ["{user1}:lock", "plainkey"] {
        let ch = String::from_utf8(channel(key.as_bytes())).unwrap();
        let p = cluster.node_for_key(key.as_bytes());
        let r = cluster.replica_of(p);
        let (ps, rs) = (cluster.server(p), cluster.server(r));
        let mut subs = vec![
            Sub::start(ps, "primary", &ch, false),
            Sub::start(ps, "primary", &ch, true),
            Sub::start(rs, "replica", &ch, false),
            Sub::start(rs, "replica", &ch, true),
        ];
        let mut a = ps.client();
        assert_eq!(a.cmd(&["LOCK.ACQUIRE", key, "A"]), Reply::Int(1));
        assert_eq!(a.cmd(&["LOCK.ACQUIRE", key, "A"]), Reply::Int(2));
        assert_eq!(a.cmd(&["LOCK.RELEASE", key, "A"]), Reply::Int(1));
        hear(
            &mut f,
            &mut subs,
            &ch,
            &format!("{key}: a partial release"),
            true,
        );
        assert_eq!(a.cmd(&["LOCK.RELEASE", key, "A"]), Reply::Int(0));
        hear(
            &mut f,
            &mut subs,
            &ch,
            &format!("{key}: LOCK.RELEASE to 0"),
            false,
        );
        assert_eq!(a.cmd(&["LOCK.ACQUIRE", key, "B"]), Reply::Int(1));
        assert_eq!(a.cmd(&["LOCK.FORCERELEASE", key]), Reply::Int(1));
        hear(
            &mut f,
            &mut subs,
            &ch,
            &format!("{key}: LOCK.FORCERELEASE"),
            false,
        );

        // Handed to a waiter: not free, nothing published.
        assert_eq!(a.cmd(&["LOCK.ACQUIRE", key, "C"]), Reply::Int(1));
        let mut w = block_on(ps, key, "W", true, false);
        assert!(wait_waiters(ps, key, 1));

        // A replica read while someone waits on the primary.
        let mut rr = rs.client_resp3();
        assert_eq!(rr.cmd(&["READONLY"]), ok());
        assert_eq!(a.cmd(&["WAIT", "1", "2000"]), Reply::Int(1));
        let info = rr.cmd(&["LOCK.INFO", key]);
        f.check(
            info.map_get("owner") == Some(&bulk("C"))
                && info.map_get("waiters") == Some(&Reply::Int(0)),
            || format!("{key}: LOCK.INFO on the replica (READONLY connection) answered {info:?}, expected owner C, waiters 0"),
        );
        let write = rr.cmd(&["LOCK.ACQUIRE", key, "X"]);
        let a_ = Answer::from_reply(write.clone());
        f.check(
            matches!(&a_, Answer::Redirect { kind, .. } if kind == "MOVED") && a_.is_redirect_to(ps.port),
            || format!("{key}: LOCK.ACQUIRE on a READONLY connection to the replica answered {write:?}, expected MOVED to port {}", ps.port),
        );

        assert_eq!(a.cmd(&["LOCK.RELEASE", key, "C"]), Reply::Int(0));
        assert_eq!(w.read_reply(), Reply::Int(1));
        hear(
            &mut f,
            &mut subs,
            &ch,
            &format!("{key}: a hand-off to a waiter"),
            true,
        );
        assert_eq!(a.cmd(&["LOCK.RELEASE", key, "W"]), Reply::Int(0));
        hear(
            &mut f,
            &mut subs,
            &ch,
            &format!("{key}: the waiter's release"),
            false,
        );
    }

    // `a{b` contains `{`, so Redisson adds no braces: the channel
    // `redisson_lock__channel:a{b` hashes as a whole, into another slot
    // than the key. The lock still works.
    let odd = "a{b";
    assert_ne!(
        testkit::cluster::key_slot(odd.as_bytes()),
        testkit::cluster::key_slot(&channel(odd.as_bytes()))
    );
    let mut c = cluster.client_for_key(odd.as_bytes());
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", odd, "A"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", odd, "B"]), Reply::Nil);
    let r = c.cmd(&["LOCK.RELEASE", odd, "A"]);
    f.check(r == Reply::Int(0), || {
        format!("LOCK.RELEASE {odd} answered {r:?}")
    });
    f.finish();
}

per_kind!(
    writable_replica_refuses_lock_writes,
    cluster_notifications_and_replica_reads
);
