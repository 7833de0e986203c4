//! Regression tests for issue 17 on a real cluster (3 primaries): item 2
//! (work deferred while a slot migrates is retried, never dropped) and the
//! cluster half of item 10 (a token counter in another slot is CROSSSLOT).
//! The other items are in `issue17.rs`.

mod common;

use std::time::Duration;

use common::topology::*;
use common::*;
use testkit::cluster::{Cluster, key_in_slot};

const SECOND: Duration = Duration::from_secs(1);

fn ok() -> Reply {
    Reply::Status("OK".into())
}

/// The server clock, in ms.
fn server_ms(c: &mut Client) -> i64 {
    time_us(&c.cmd(&["TIME"])) / 1000
}

/// Waits until the server clock of `c` passes `ms`.
#[track_caller]
fn wait_past(c: &mut Client, ms: i64) {
    let passed = wait_until(30 * SECOND, || server_ms(c) > ms);
    assert!(passed, "the server clock did not pass {ms}");
}

/// `cmd` on `c` preceded by ASKING (the slot is importing there).
#[track_caller]
fn asking(c: &mut Client, cmd: &[&str]) -> Reply {
    assert_eq!(c.cmd(&["ASKING"]), ok());
    c.cmd(cmd)
}

fn lock_waiting(s: &Server) -> Option<i64> {
    s.info_field("lock", "lock_waiting")
        .and_then(|v| v.parse().ok())
}

/// A cluster of three primaries, no replicas (none is needed here).
fn cluster(kind: Kind) -> Cluster {
    Cluster::builder(kind).replicas_per_primary(0).start()
}

/// Item 2a: a waiter that followed ASK to the importing target and queued
/// there (`ASKING` + `LOCK.ACQUIRE ... BLOCK 0`) is granted there when the
/// lease of the migrated lock ends.
///
/// Before the fix: the target's hand-on job asked "is this key served
/// here?" with an EXISTS that, without ASKING, failed as MOVED on an
/// importing slot, and dropped the job: the waiter was never answered.
fn ask_waiter_granted_at_the_target(
    f: &mut Findings,
    c: &Cluster,
    (src, dst): (usize, usize),
    slot: u16,
) {
    let key = key_in_slot(slot, "ask", ":lock");
    let (s, t) = (c.server(src), c.server(dst));
    let mut a = s.client();
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", &key, "A", "PX", "2000"]),
        Reply::Int(1)
    );
    assert_eq!(c.begin_migration(slot, src, dst), (ok(), ok()));
    let moved = c.migrate_keys(slot, src, dst);
    assert!(
        moved.len() == 1 && moved[0].1 == ok(),
        "MIGRATE of {key}: {moved:?}"
    );
    let mut tc = t.client();
    let deadline = asking(&mut tc, &["PEXPIRETIME", &key]).as_int();
    // The key is gone from the source: the waiter is sent to the target.
    let mut w = s.client();
    let r = w.cmd(&["LOCK.ACQUIRE", &key, "W", "BLOCK", "0"]);
    let ask = Answer::from_reply(r);
    f.check(ask.is_ask() && ask.is_redirect_to(t.port), || {
        format!("2a: a waiter on the source was answered {ask:?}, expected ASK to the target")
    });
    // It follows the ASK and queues at the target behind A.
    let mut wt = t.client();
    assert_eq!(wt.cmd(&["ASKING"]), ok());
    wt.send(&["LOCK.ACQUIRE", &key, "W", "BLOCK", "0"]);
    let queued = wait_until(5 * SECOND, || lock_waiting(t) == Some(1));
    f.check(queued, || {
        format!(
            "2a: the waiter did not queue at the target: {}",
            t.info("lock")
        )
    });
    let (answer, took) = answer_within(&mut wt, 2 * SECOND + 10 * SECOND);
    let now = server_ms(&mut tc);
    f.check(answer == Answer::Granted(Reply::Int(1)), || {
        format!(
            "2a: the waiter queued at the importing target (ASKING) was answered {answer:?} \
             after {took:?} (A's lease there ended at {deadline}, the target's clock is {now})"
        )
    });
    if answer == Answer::Granted(Reply::Int(1)) {
        let info = asking(&mut tc, &["LOCK.INFO", &key]);
        f.check(
            info.map_get("owner") == Some(&Reply::Bulk(b"W".to_vec())),
            || format!("2a: LOCK.INFO at the target after the grant: {info:?}"),
        );
    }
}

/// Item 2b: a lease that ends on the source while its slot is MIGRATING
/// (the key still there, so nothing moved) is handed on there once the
/// migration is aborted (SETSLOT STABLE), and nothing is granted on the
/// source while the slot migrates.
///
/// Before the fix: the hand-on's EXISTS saw ASK for the lapsed key and
/// dropped the job for good: after STABLE the waiter was never answered
/// (BLOCK 0: forever), and every newcomer got nil behind it.
fn lease_ends_on_the_source_during_an_aborted_migration(
    f: &mut Findings,
    c: &Cluster,
    (src, dst): (usize, usize),
    slot: u16,
) {
    let key = key_in_slot(slot, "abort", ":lock");
    let s = c.server(src);
    let mut a = s.client();
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", &key, "A", "PX", "1000"]),
        Reply::Int(1)
    );
    let deadline = a.cmd(&["PEXPIRETIME", &key]).as_int();
    let before = lock_waiting(s).unwrap_or(-1);
    let mut w = s.client();
    w.send(&["LOCK.ACQUIRE", &key, "W", "BLOCK", "0"]);
    assert!(
        wait_until(5 * SECOND, || lock_waiting(s) == Some(before + 1)),
        "2b: the waiter did not queue on the source"
    );
    assert_eq!(c.begin_migration(slot, src, dst), (ok(), ok()));
    // A's lease ends while the slot migrates.
    wait_past(&mut a, deadline + 300);
    let early = Answer::from_polled(w.poll_reply(Duration::from_millis(200)));
    f.check(early == Answer::Nothing, || {
        format!("2b: the waiter was answered {early:?} on the source while its slot was MIGRATING")
    });
    // The migration is aborted: the slot is the source's again.
    assert_eq!(c.setslot(dst, slot, &["STABLE"]), ok());
    assert_eq!(c.setslot(src, slot, &["STABLE"]), ok());
    let (answer, took) = answer_within(&mut w, 10 * SECOND);
    f.check(answer == Answer::Granted(Reply::Int(1)), || {
        format!(
            "2b: after SETSLOT STABLE the waiter on the source was answered {answer:?} \
             within {took:?} (A's lease ended at {deadline}, during the migration)"
        )
    });
    let owner = a.cmd(&["LOCK.INFO", &key]);
    f.check(
        owner.map_get("owner") == Some(&Reply::Bulk(b"W".to_vec())),
        || format!("2b: LOCK.INFO on the source after STABLE: {owner:?}"),
    );
    // A newcomer is not served past the queue, and is served after it.
    let r = a.cmd(&["LOCK.ACQUIRE", &key, "N"]);
    f.check(r.is_nil(), || {
        format!("2b: a newcomer while W holds: {r:?}")
    });
}

/// Item 2c: a KEEPALIVE lock taken on the importing target (ASKING) keeps
/// being renewed there while its connection is open: its PEXPIRETIME moves
/// and it outlives its first lease.
///
/// Before the fix: the renewal's EXISTS failed as MOVED on the importing
/// target and the lock was untied at its first renewal; it lapsed with its
/// connection open.
fn tie_on_the_importing_target_keeps_renewing(
    f: &mut Findings,
    c: &Cluster,
    (src, dst): (usize, usize),
    slot: u16,
) {
    let key = key_in_slot(slot, "tie", ":lock");
    let t = c.server(dst);
    assert_eq!(c.begin_migration(slot, src, dst), (ok(), ok()));
    let mut k = t.client();
    let r = asking(
        &mut k,
        &["LOCK.ACQUIRE", &key, "K", "PX", "600", "KEEPALIVE"],
    );
    assert_eq!(
        r,
        Reply::Int(1),
        "2c: KEEPALIVE lock at the importing target"
    );
    let mut tc = t.client();
    let first = asking(&mut tc, &["PEXPIRETIME", &key]).as_int();
    // Two full leases later (renewals every 200 ms), it is still K's, tied.
    wait_past(&mut tc, first + 600);
    let info = asking(&mut tc, &["LOCK.INFO", &key]);
    let now = asking(&mut tc, &["PEXPIRETIME", &key]);
    f.check(
        info.map_get("owner") == Some(&Reply::Bulk(b"K".to_vec()))
            && info.map_get("keepalive") == Some(&Reply::Int(1))
            && matches!(now, Reply::Int(d) if d > first),
        || {
            format!(
                "2c: the tied lock at the importing target, 600 ms past its first deadline \
                 {first}: LOCK.INFO {info:?}, PEXPIRETIME {now:?}"
            )
        },
    );
    drop(k);
}

/// Item 2 (a, b, c) on one cluster, each on its own slot.
fn deferred_work_survives_slot_migration(kind: Kind) {
    let c = cluster(kind);
    let mut f = Findings::new(kind, "deferred work during slot migration");
    let primaries = c.primaries();
    let (src, dst) = (primaries[0], primaries[1]);
    let first = c.slots_of(src)[0].0;
    ask_waiter_granted_at_the_target(&mut f, &c, (src, dst), first + 10);
    lease_ends_on_the_source_during_an_aborted_migration(&mut f, &c, (src, dst), first + 11);
    tie_on_the_importing_target_keeps_renewing(&mut f, &c, (src, dst), first + 12);
    f.finish();
}

/// Item 10, cluster half: a key whose token counter hashes to another slot
/// (`}` without `{`, or `{` without a valid hash tag) answers CROSSSLOT for
/// TOKEN and changes nothing; the lock itself still works without TOKEN,
/// and LOCK.INFO reads it (token 0).
///
/// Before the fix: the counter was created in a slot the node may not own
/// (DBSIZE grew by the lock and the counter).
fn token_counter_in_another_slot_is_crossslot(kind: Kind) {
    let c = cluster(kind);
    let mut f = Findings::new(kind, "token counter in another slot");
    for key in ["a}b", "a{b", "a{}b"] {
        let mut n = c.client_for_key(key.as_bytes());
        let size = n.cmd(&["DBSIZE"]);
        for call in [
            &["LOCK.ACQUIRE", key, "o", "TOKEN"][..],
            &["LOCK.ACQUIRE", key, "*", "TOKEN", "PX", "1000"],
        ] {
            let r = n.cmd(call);
            f.check(r.err_code() == Some("CROSSSLOT"), || {
                format!("{call:?}: {r:?}")
            });
            let now = n.cmd(&["DBSIZE"]);
            f.check(now == size, || {
                format!("{call:?}: DBSIZE {size:?} before, {now:?} after")
            });
        }
        assert_eq!(n.cmd(&["LOCK.ACQUIRE", key, "o"]), Reply::Int(1), "{key}");
        let r = n.cmd(&["LOCK.ACQUIRE", key, "o", "TOKEN"]);
        f.check(r.err_code() == Some("CROSSSLOT"), || {
            format!("{key}: re-entry with TOKEN: {r:?}")
        });
        let info = n.cmd(&["LOCK.INFO", key]);
        f.check(
            info.map_get("holds") == Some(&Reply::Int(1))
                && info.map_get("token") == Some(&Reply::Int(0)),
            || format!("{key}: LOCK.INFO {info:?}"),
        );
        assert_eq!(n.cmd(&["LOCK.RELEASE", key, "o"]), Reply::Int(0), "{key}");
    }
    // A key with a valid hash tag has its counter in its own slot.
    let key = "{a}b";
    let mut n = c.client_for_key(key.as_bytes());
    let r = n.cmd(&["LOCK.ACQUIRE", key, "o", "TOKEN"]);
    f.check(
        matches!(&r, Reply::Array(a) if a.len() == 2 && a[0] == Reply::Int(1)),
        || format!("{key}: {r:?}"),
    );
    f.finish();
}

per_kind!(
    deferred_work_survives_slot_migration,
    token_counter_in_another_slot_is_crossslot
);
