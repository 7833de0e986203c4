//! LOCK.ACQUIRE ... BLOCK: the server-side FIFO queue, direct hand-off, and
//! every way a lock stops being held or a waiter leaves. Real servers, both
//! Redis 7.0 and Valkey 9.1.

// Loops over KINDS instead of `per_kind!`: these tests are timing-sensitive,
// so each runs one server at a time, not two in parallel.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use testkit::redisson;

const SECOND: Duration = Duration::from_secs(1);

/// Sends a blocking acquire (the reply is read later).
fn block(c: &mut Client, key: &str, owner: &str, extra: &[&str]) {
    let mut a: Vec<&str> = vec!["LOCK.ACQUIRE", key, owner];
    a.extend_from_slice(extra);
    c.send(&a);
}

/// How many clients wait in all queues together (INFO lock).
fn lock_waiting(s: &Server) -> u64 {
    s.info_field("lock", "lock_waiting")
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Waits until `n` clients wait in all queues together.
#[track_caller]
fn wait_waiting(s: &Server, n: u64) {
    let ok = wait_until(5 * SECOND, || lock_waiting(s) == n);
    assert!(ok, "expected {n} waiters, INFO lock: {}", s.info("lock"));
}

// ---- the fixture most tests start with: a holder, then waiters queued ----

/// A fresh server where "holder" holds "k" (taken with `opts`, e.g. a
/// lease), and the holder's connection.
#[track_caller]
fn held(kind: Kind, opts: &[&str]) -> (Server, Client) {
    let s = Server::start(kind);
    let mut c = s.client();
    let acquire = [&["LOCK.ACQUIRE", "k", "holder"][..], opts].concat();
    assert_eq!(c.cmd(&acquire), Reply::Int(1), "{kind}: the holder takes k");
    (s, c)
}

/// A new connection queued on "k" as `owner` (`opts`, then BLOCK 0),
/// returned once the server counts it among the waiters (so the next one
/// queues behind it). Its reply is read later.
#[track_caller]
fn queue(s: &Server, owner: &str, opts: &[&str]) -> Client {
    enqueue(s, s.client(), owner, opts)
}

/// [`queue`] with a connection of the caller's (RESP3, a known id, ...).
#[track_caller]
fn enqueue(s: &Server, mut w: Client, owner: &str, opts: &[&str]) -> Client {
    let before = lock_waiting(s);
    block(&mut w, "k", owner, &[opts, &["BLOCK", "0"]].concat());
    wait_waiting(s, before + 1);
    w
}

/// [`queue`], with the reply timed on the server's clock: read it with
/// [`read_timed`].
#[track_caller]
fn queue_timed(s: &Server, owner: &str, opts: &[&str]) -> Client {
    let before = lock_waiting(s);
    let mut w = s.client();
    send_timed(
        &mut w,
        &[&["LOCK.ACQUIRE", "k", owner][..], opts, &["BLOCK", "0"]].concat(),
    );
    wait_waiting(s, before + 1);
    w
}

fn waiters_of(c: &mut Client, key: &str) -> i64 {
    let info = c.cmd(&["LOCK.INFO", key]);
    info.map_get("waiters").map_or(0, Reply::as_int)
}

fn owner_of(c: &mut Client, key: &str) -> Option<String> {
    let info = c.cmd(&["LOCK.INFO", key]);
    info.map_get("owner").map(|o| o.as_str().to_owned())
}

fn blocked_clients(s: &Server) -> u64 {
    s.info_field("clients", "blocked_clients")
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Waits until no client is blocked (the server may finish unblocking a
/// killed or unblocked client just after its reply).
fn wait_unblocked(s: &Server) {
    let ok = wait_until(5 * SECOND, || blocked_clients(s) == 0);
    assert!(
        ok,
        "blocked clients left, INFO clients: {}",
        s.info("clients")
    );
}

#[test]
fn fifo_order_and_no_queue_jumping() {
    for kind in KINDS {
        let (s, mut admin) = held(kind, &["PX", "10000"]);
        // Queue order is arrival order: each joins before the next.
        let mut waiters: Vec<Client> = (0..5)
            .map(|i| queue(&s, &format!("w{i}"), &["PX", "10000"]))
            .collect();
        // A late client joins after the five: it must be served after w4.
        let mut late = queue(&s, "late", &["PX", "10000"]);
        assert_eq!(waiters_of(&mut admin, "k"), 6);

        let mut previous = "holder".to_string();
        for i in 0..5 {
            // One that joins with a timeout queues behind everyone, gives up,
            // and leaves the queue as it was.
            let mut quitter = s.client();
            block(&mut quitter, "k", "quitter", &["BLOCK", "30"]);
            assert!(
                quitter.read_reply().is_nil(),
                "{kind}: the quitter timed out"
            );
            assert_eq!(waiters_of(&mut admin, "k"), 6 - i as i64);

            // The release hands the lock to the head inside the command, so
            // an intruder in the same transaction finds it already held: the
            // lock is never free for a moment while anyone is queued.
            admin.send(&["MULTI"]);
            admin.send(&["LOCK.RELEASE", "k", &previous]);
            admin.send(&["LOCK.ACQUIRE", "k", "intruder"]);
            admin.send(&["EXEC"]);
            assert_eq!(admin.read_reply(), Reply::Status("OK".into()));
            assert_eq!(admin.read_reply(), Reply::Status("QUEUED".into()));
            assert_eq!(admin.read_reply(), Reply::Status("QUEUED".into()));
            let exec = admin.read_reply();
            assert_eq!(
                exec,
                Reply::Array(vec![Reply::Int(0), Reply::Nil]),
                "{kind}: step {i}: the intruder never jumps the queue"
            );

            let granted = waiters[i].read_reply();
            assert_eq!(granted, Reply::Int(1), "{kind}: w{i} is served in order");
            assert_eq!(
                owner_of(&mut admin, "k").as_deref(),
                Some(format!("w{i}").as_str())
            );
            assert_eq!(waiters_of(&mut admin, "k"), 5 - i as i64);
            // Nobody else was woken.
            for later in waiters.iter_mut().skip(i + 1) {
                assert!(later.try_read_reply(Duration::from_millis(5)).is_none());
            }
            assert!(
                late.try_read_reply(Duration::from_millis(5)).is_none(),
                "{kind}: the late client is served only after w4"
            );
            previous = format!("w{i}");
        }
        assert_eq!(admin.cmd(&["LOCK.RELEASE", "k", "w4"]).as_int(), 0);
        assert_eq!(late.read_reply(), Reply::Int(1), "{kind}: late is last");
        assert_eq!(owner_of(&mut admin, "k").as_deref(), Some("late"));
        assert_eq!(waiters_of(&mut admin, "k"), 0);
        assert_eq!(admin.cmd(&["LOCK.RELEASE", "k", "late"]).as_int(), 0);
        assert_eq!(blocked_clients(&s), 0);
    }
}

#[test]
fn free_lock_with_block_is_granted_at_once_and_holder_reenters() {
    for kind in KINDS {
        // BLOCK on a free lock: granted at once (checked by `held`).
        let (s, mut c) = held(kind, &["BLOCK", "0"]);
        // The holder re-enters at once, even with others queued.
        let mut w = queue(&s, "other", &[]);
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "k", "holder", "BLOCK", "0"])
                .as_int(),
            2
        );
        assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "holder"]).as_int(), 1);
        assert!(w.try_read_reply(Duration::from_millis(20)).is_none());
        assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "holder"]).as_int(), 0);
        assert_eq!(w.read_reply(), Reply::Int(1));
    }
}

#[test]
fn generated_owner_is_returned_after_waiting() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &[]);
        let mut w = enqueue(&s, s.client_resp3(), "*", &["PX", "5000"]);
        c.cmd(&["LOCK.RELEASE", "k", "holder"]);
        let owner = w.read_reply();
        let owner = owner.as_str().to_owned();
        assert_eq!(owner.len(), 36, "{kind}: a UUID: {owner}");
        assert_eq!(owner_of(&mut c, "k").as_deref(), Some(owner.as_str()));
        assert_eq!(c.cmd(&["LOCK.RELEASE", "k", &owner]).as_int(), 0);
    }
}

#[test]
fn timeouts_answer_nil_on_time() {
    for kind in KINDS {
        let (s, mut holder) = held(kind, &["PX", "60000"]);
        for (w, ms) in [
            (s.client(), 50.0),
            (s.client_resp3(), 150.0),
            (s.client(), 300.0),
        ] {
            let mut w = w;
            // On the server's clock: this process may be slow to read.
            send_timed(
                &mut w,
                &["LOCK.ACQUIRE", "k", "w", "BLOCK", &ms.to_string()],
            );
            let t = read_timed(&mut w);
            assert!(t.reply.is_nil(), "{kind}: {:?}", t.reply);
            // The server counts the timeout in whole ms from its arrival.
            let took = t.took_ms();
            assert!(
                took > ms - 1.0 && took <= ms + 100.0,
                "{kind}: BLOCK {ms} answered after {took} ms of server time"
            );
        }
        // RESP3 nil is the null type, RESP2 the null bulk.
        let mut w3 = s.client_resp3();
        assert_eq!(
            w3.cmd(&["LOCK.ACQUIRE", "k", "w", "BLOCK", "10"]),
            Reply::Null
        );
        let mut w2 = s.client();
        assert_eq!(
            w2.cmd(&["LOCK.ACQUIRE", "k", "w", "BLOCK", "10"]),
            Reply::Nil
        );
        assert_eq!(waiters_of(&mut holder, "k"), 0);
        assert_eq!(blocked_clients(&s), 0);
    }
}

/// The holder's lease runs out: the head gets the lock at the deadline (a
/// module timer), not when Redis's active expiry gets round to the key.
#[test]
fn lease_deadline_hands_on_promptly() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut c = s.client();
        for lease in [100, 250] {
            c.cmd(&["LOCK.ACQUIRE", "k", "crashed", "PX", &lease.to_string()]);
            let old_deadline = c.cmd(&["PEXPIRETIME", "k"]).as_int();
            let mut w = s.client();
            block(&mut w, "k", "next", &["PX", "10000", "BLOCK", "0"]);
            assert_eq!(w.read_reply(), Reply::Int(1));
            // Server clock: when was the lock granted?
            let granted_at = c.cmd(&["PEXPIRETIME", "k"]).as_int() - 10_000;
            let late = granted_at - old_deadline;
            // Never within the deadline millisecond itself: Redis's expiry
            // (now > deadline) is what keeps the old holder's lease whole.
            assert!(
                (1..=50).contains(&late),
                "{kind}: lease {lease}: handed on {late} ms after the deadline"
            );
            assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "next"]).as_int(), 0);
        }
    }
}

#[test]
fn disconnected_waiter_is_never_granted() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &[]);
        let gone = queue(&s, "gone", &[]);
        let mut killed = s.client();
        let killed_id = killed.id();
        let _killed = enqueue(&s, killed, "killed", &[]);
        let mut next = queue(&s, "next", &[]);

        drop(gone);
        assert_eq!(c.cmd(&args!["CLIENT", "KILL", "ID", killed_id]).as_int(), 1);
        wait_waiting(&s, 1);
        c.cmd(&["LOCK.RELEASE", "k", "holder"]);
        assert_eq!(next.read_reply(), Reply::Int(1));
        assert_eq!(owner_of(&mut c, "k").as_deref(), Some("next"));
        assert_eq!(
            s.info_field("lock", "lock_disconnected").as_deref(),
            Some("2"),
            "{kind}"
        );
        assert_eq!(blocked_clients(&s), 0);
    }
}

/// A grant made for a client that vanishes before its reply is sent is given
/// back, and the lock moves on. `MULTI; RELEASE; CLIENT KILL; EXEC` makes the
/// window deterministic: the grant and the kill happen in one step.
#[test]
fn undelivered_grant_moves_on() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &[]);
        let mut doomed = s.client();
        let doomed_id = doomed.id();
        let _doomed = enqueue(&s, doomed, "doomed", &[]);
        let mut next = queue(&s, "next", &[]);

        c.cmd(&["MULTI"]);
        c.cmd(&["LOCK.RELEASE", "k", "holder"]);
        c.cmd(&args!["CLIENT", "KILL", "ID", doomed_id]);
        let exec = c.cmd(&["EXEC"]);
        assert_eq!(
            exec,
            Reply::Array(vec![Reply::Int(0), Reply::Int(1)]),
            "{kind}"
        );
        assert_eq!(
            next.read_reply(),
            Reply::Int(1),
            "{kind}: the lock moved on"
        );
        assert_eq!(owner_of(&mut c, "k").as_deref(), Some("next"));
        assert_eq!(
            s.info_field("lock", "lock_undelivered").as_deref(),
            Some("1")
        );
        wait_unblocked(&s);

        // With nobody left, an undelivered grant frees the lock and says so.
        let mut sub = s.client();
        sub.cmd(&args!["SUBSCRIBE", redisson::channel(b"k")]);
        let mut doomed = s.client();
        let doomed_id = doomed.id();
        let _doomed = enqueue(&s, doomed, "doomed", &[]);
        c.cmd(&["MULTI"]);
        c.cmd(&["LOCK.RELEASE", "k", "next"]);
        c.cmd(&args!["CLIENT", "KILL", "ID", doomed_id]);
        c.cmd(&["EXEC"]);
        assert!(wait_until(SECOND, || c.cmd(&["EXISTS", "k"]).as_int() == 0));
        let msg = sub.try_read_reply(SECOND).expect("unlock published");
        assert_eq!(msg.as_array()[2].as_str(), "0");
        assert_eq!(
            s.info_field("lock", "lock_undelivered").as_deref(),
            Some("2"),
            "{kind}"
        );
        wait_waiting(&s, 0);
        wait_unblocked(&s);
    }
}

#[test]
fn client_unblock_timeout_and_error() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &[]);
        let mut w = s.client();
        let id = w.id();
        let mut w = enqueue(&s, w, "w", &[]);
        assert_eq!(c.cmd(&args!["CLIENT", "UNBLOCK", id]).as_int(), 1);
        assert!(w.read_reply().is_nil(), "{kind}: CLIENT UNBLOCK → nil");

        let mut w = enqueue(&s, w, "w", &[]);
        assert_eq!(c.cmd(&args!["CLIENT", "UNBLOCK", id, "ERROR"]).as_int(), 1);
        let e = w.read_reply();
        assert_eq!(e.err_code(), Some("UNBLOCKED"), "{kind}: {e:?}");

        wait_waiting(&s, 0);
        assert_eq!(waiters_of(&mut c, "k"), 0);
        // The connection still works and never gets the lock.
        c.cmd(&["LOCK.RELEASE", "k", "holder"]);
        assert!(w.try_read_reply(Duration::from_millis(30)).is_none());
        assert_eq!(w.cmd(&["PING"]), Reply::Status("PONG".into()));
        assert_eq!(c.cmd(&["EXISTS", "k"]).as_int(), 0);
        wait_unblocked(&s);
    }
}

/// tests/scripting.rs checks the replies of BLOCK in MULTI and scripts; this
/// checks that such a call leaves no waiter queued and no client blocked.
#[test]
fn multi_and_eval_never_block() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut c = s.client();
        let mut other = s.client();
        other.cmd(&["LOCK.ACQUIRE", "busy", "other"]);

        c.cmd(&["MULTI"]);
        c.cmd(&["LOCK.ACQUIRE", "busy", "me", "BLOCK", "0"]);
        c.cmd(&["LOCK.ACQUIRE", "free", "me", "BLOCK", "0"]);
        let exec = c.cmd(&["EXEC"]);
        assert_eq!(exec.as_array().len(), 2, "{kind}: {exec:?}");
        assert!(exec.as_array()[0].is_nil());
        assert_eq!(exec.as_array()[1], Reply::Int(1));

        // BLOCK 0 inside a script answers at once (server clock), with nil
        // on a busy lock.
        let script = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 'BLOCK', '0')";
        for (key, want) in [("busy", Reply::Nil), ("free2", Reply::Int(1))] {
            send_timed(&mut c, &["EVAL", script, "1", key, "me"]);
            let t = read_timed(&mut c);
            assert_eq!(t.reply, want, "{kind}: {key}");
            assert!(t.took_ms() < 1000.0, "{kind}: {key}: {t:?}");
        }
        assert_eq!(blocked_clients(&s), 0);
        assert_eq!(waiters_of(&mut c, "busy"), 0);
    }
}

/// Every way the lock stops being held other than its holder's LOCK.RELEASE
/// (the administrative LOCK.FORCERELEASE included) wakes the head.
#[test]
fn foreign_releases_serve_the_queue() {
    let ok = || Reply::Status("OK".into());
    let paths: Vec<(&str, Vec<Vec<u8>>, Reply)> = vec![
        (
            "LOCK.FORCERELEASE",
            args!["LOCK.FORCERELEASE", "k"].to_vec(),
            Reply::Int(1),
        ),
        ("DEL", args!["DEL", "k"].to_vec(), Reply::Int(1)),
        ("UNLINK", args!["UNLINK", "k"].to_vec(), Reply::Int(1)),
        (
            "PEXPIRE",
            args!["PEXPIRE", "k", "20"].to_vec(),
            Reply::Int(1),
        ),
        ("FLUSHALL", args!["FLUSHALL"].to_vec(), ok()),
        ("FLUSHALL ASYNC", args!["FLUSHALL", "ASYNC"].to_vec(), ok()),
        ("FLUSHDB", args!["FLUSHDB"].to_vec(), ok()),
        ("SWAPDB", args!["SWAPDB", "0", "1"].to_vec(), ok()),
        ("RENAME", args!["RENAME", "k", "elsewhere"].to_vec(), ok()),
        (
            "Redisson unlock script",
            args![
                "EVAL",
                redisson::UNLOCK,
                "2",
                "k",
                redisson::channel(b"k"),
                redisson::UNLOCK_MESSAGE,
                "30000",
                "holder",
            ]
            .to_vec(),
            Reply::Int(1),
        ),
    ];
    for kind in KINDS {
        let s = Server::start(kind);
        let mut c = s.client();
        for (name, action, answer) in &paths {
            c.cmd(&["FLUSHALL"]);
            assert_eq!(
                c.cmd(&["LOCK.ACQUIRE", "k", "holder", "PX", "60000"])
                    .as_int(),
                1
            );
            let mut w = queue_timed(&s, "waiter", &["PX", "5000"]);
            send_timed(&mut c, action);
            let acted = read_timed(&mut c);
            assert_eq!(acted.reply, *answer, "{kind}: {name}");
            let granted = read_timed(&mut w);
            assert_eq!(
                granted.reply,
                Reply::Int(1),
                "{kind}: {name} served the head"
            );
            // On the server's clock: from the action to the grant's reply
            // (PEXPIRE's 20 ms included).
            let late_ms = (granted.answered_us - acted.sent_us) / 1000;
            assert!(late_ms < 200, "{kind}: {name} took {late_ms} ms");
            assert_eq!(
                owner_of(&mut c, "k").as_deref(),
                Some("waiter"),
                "{kind}: {name}"
            );
        }
    }
}

/// A lock handed straight to a queued waiter is never free, so nothing is
/// published on its unlock channel, whatever handed it on (RELEASE,
/// FORCERELEASE, the lease deadline). Once nobody is queued, RELEASE and
/// FORCERELEASE publish `0`.
#[test]
fn hand_off_publishes_nothing() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &["PX", "60000"]);
        let ch = redisson::channel(b"k");
        let bulk = |b: &[u8]| Reply::Bulk(b.to_vec());
        let mut sub = s.client();
        assert_eq!(
            sub.cmd(&args!["SUBSCRIBE", &ch]),
            Reply::Array(vec![bulk(b"subscribe"), bulk(&ch), Reply::Int(1)])
        );
        let unlocked = Reply::Array(vec![
            bulk(b"message"),
            bulk(&ch),
            bulk(redisson::UNLOCK_MESSAGE.as_bytes()),
        ]);
        let mut quiet = |what: &str| {
            let got = sub.try_read_reply(Duration::from_millis(50));
            assert_eq!(got, None, "{kind}: {what} published");
        };

        let mut w1 = queue(&s, "w1", &["PX", "60000"]);
        let mut w2 = queue(&s, "w2", &["PX", "100"]);
        let mut w3 = queue(&s, "w3", &["PX", "60000"]);

        assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "holder"]).as_int(), 0);
        assert_eq!(w1.read_reply(), Reply::Int(1), "{kind}");
        quiet("a hand-off by LOCK.RELEASE");

        assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]).as_int(), 1);
        assert_eq!(w2.read_reply(), Reply::Int(1), "{kind}");
        quiet("a hand-off by LOCK.FORCERELEASE");

        // w2's 100 ms lease runs out: the deadline timer hands on to w3.
        assert_eq!(w3.read_reply(), Reply::Int(1), "{kind}");
        assert_eq!(owner_of(&mut c, "k").as_deref(), Some("w3"));
        quiet("a hand-off at the lease deadline");

        // Nobody queued any more: the lock is freed, and that is published.
        assert_eq!(waiters_of(&mut c, "k"), 0);
        assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "w3"]).as_int(), 0);
        assert_eq!(
            sub.try_read_reply(SECOND),
            Some(unlocked.clone()),
            "{kind}: RELEASE with nobody queued"
        );
        assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]).as_int(), 1);
        assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]).as_int(), 1);
        assert_eq!(
            sub.try_read_reply(SECOND),
            Some(unlocked),
            "{kind}: FORCERELEASE with nobody queued"
        );
        assert_eq!(sub.try_read_reply(Duration::from_millis(50)), None);
        assert_eq!(blocked_clients(&s), 0);
    }
}

/// A key evicted under maxmemory pressure frees the lock like any other removal.
#[test]
fn eviction_serves_the_queue() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &["PX", "600000"]);
        let mut w = queue(&s, "waiter", &["PX", "600000"]);
        // The lock is the only key with a TTL: volatile-ttl evicts it first.
        let used: u64 = s
            .info_field("memory", "used_memory")
            .unwrap()
            .parse()
            .unwrap();
        c.cmd(&args!["CONFIG", "SET", "maxmemory", used + 256 * 1024]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
        let filler = "x".repeat(16 * 1024);
        for i in 0..64 {
            let r = c.cmd(&args!["SET", format!("fill{i}"), &filler]);
            if r.is_error() {
                break;
            }
        }
        let granted = w.try_read_reply(2 * SECOND);
        assert_eq!(
            granted,
            Some(Reply::Int(1)),
            "{kind}: eviction served the head"
        );
        let evicted: u64 = s
            .info_field("stats", "evicted_keys")
            .unwrap()
            .parse()
            .unwrap();
        assert!(evicted >= 1, "{kind}");
    }
}

#[test]
fn shorter_lease_moves_the_hand_off_earlier() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &["PX", "60000"]);
        let mut w = queue_timed(&s, "w", &[]);
        // Re-entry with a short lease, then RENEW with a shorter one, each
        // read with the deadline it set (one pipeline: the server's clock).
        c.send_pipeline(&[
            &["LOCK.ACQUIRE", "k", "holder", "PX", "400"][..],
            &["LOCK.RENEW", "k", "holder", "PX", "100"],
            &["PEXPIRETIME", "k"],
        ]);
        assert_eq!(c.read_reply(), Reply::Int(2));
        assert_eq!(c.read_reply(), Reply::Int(1));
        let deadline = c.read_reply().as_int();
        let granted = read_timed(&mut w);
        assert_eq!(granted.reply, Reply::Int(1));
        // Handed on just after the renewed deadline (the re-entry's was 300
        // ms later), as promptly as `lease_deadline_hands_on_promptly` asks.
        let late = granted.answered_us / 1000 - deadline;
        assert!(
            (1..=50).contains(&late),
            "{kind}: handed on {late} ms after the renewed deadline"
        );
    }
}

/// Writes are paused (CLIENT PAUSE WRITE, as in a failover): a hand-off that
/// falls due waits for the pause to end, and the server is fine.
#[test]
fn hand_off_waits_for_a_write_pause() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &["PX", "60000"]);
        let mut w = queue(&s, "w", &[]);
        // The lease is cut short only now, with the waiter queued, and the
        // pause starts at once after (one pipeline).
        let started = Instant::now();
        c.send_pipeline(&[
            &["LOCK.RENEW", "k", "holder", "PX", "50"][..],
            &["CLIENT", "PAUSE", "300", "WRITE"],
        ]);
        assert_eq!(c.read_reply(), Reply::Int(1));
        assert_eq!(c.read_reply().as_str(), "OK");
        assert_eq!(w.read_reply(), Reply::Int(1));
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "{kind}: {:?}",
            started.elapsed()
        );
        assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
        assert_eq!(owner_of(&mut c, "k").as_deref(), Some("w"));
    }
}

/// The hand-off reaches the replica as plain effects with the same deadline.
#[test]
fn hand_off_is_replicated() {
    for kind in KINDS {
        let (primary, mut p) = held(kind, &["PX", "60000"]);
        let replica = Server::start(kind);
        replica.replica_of(&primary);
        let mut r = replica.client();
        let mut w = queue(&primary, "waiter", &["PX", "45000"]);
        p.cmd(&["LOCK.RELEASE", "k", "holder"]);
        assert_eq!(w.read_reply(), Reply::Int(1));
        assert_eq!(p.cmd(&["WAIT", "1", "2000"]).as_int(), 1);
        assert_eq!(
            hash_and_deadline(&mut r, b"k"),
            hash_and_deadline(&mut p, b"k"),
            "{kind}"
        );
        assert_eq!(owner_of(&mut r, "k").as_deref(), Some("waiter"));
        // The replica holds no queue of its own.
        assert_eq!(waiters_of(&mut r, "k"), 0);
    }
}

/// A hand-off made by the deadline timer (no command running) is replicated
/// too, into the waiter's database, with the same deadline.
#[test]
fn timer_hand_off_is_replicated_in_its_database() {
    for kind in KINDS {
        let primary = Server::start(kind);
        let replica = Server::start(kind);
        replica.replica_of(&primary);
        let mut p = primary.client();
        let mut r = replica.client();
        p.cmd(&["SELECT", "3"]);
        r.cmd(&["SELECT", "3"]);
        p.cmd(&["LOCK.ACQUIRE", "k", "crashed", "PX", "100"]);
        let mut w = primary.client();
        w.cmd(&["SELECT", "3"]);
        block(&mut w, "k", "next", &["PX", "45000", "BLOCK", "0"]);
        assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
        assert_eq!(p.cmd(&["WAIT", "1", "2000"]).as_int(), 1);
        assert_eq!(owner_of(&mut r, "k").as_deref(), Some("next"), "{kind}");
        assert_eq!(
            hash_and_deadline(&mut r, b"k"),
            hash_and_deadline(&mut p, b"k"),
            "{kind}"
        );
        // Nothing leaked into database 0.
        r.cmd(&["SELECT", "0"]);
        assert_eq!(r.cmd(&["DBSIZE"]).as_int(), 0);
    }
}

/// What a blocked client gets from Redis 7.0 and Valkey 9.1 when its server
/// becomes a replica (the server's own reply, not the module's).
const STEPPED_DOWN: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// A primary that becomes a replica drops its waiters, RESP2 and RESP3,
/// with the server's error; the server may close the connection after it.
#[test]
fn waiters_get_an_error_when_the_primary_steps_down() {
    for kind in KINDS {
        let (s, mut c) = held(kind, &[]);
        let other = Server::start(kind);
        let mut w2 = queue(&s, "w2", &[]);
        let mut w3 = enqueue(&s, s.client_resp3(), "w3", &[]);
        c.cmd(&args!["REPLICAOF", "127.0.0.1", other.port]);
        for (name, w) in [("RESP2", &mut w2), ("RESP3", &mut w3)] {
            let reply = w.try_read_reply(5 * SECOND);
            assert_eq!(
                reply,
                Some(Reply::Error(STEPPED_DOWN.into())),
                "{kind}: a {name} waiter gets the server's error, never a grant"
            );
        }
        wait_waiting(&s, 0);
        assert_eq!(blocked_clients(&s), 0);
    }
}

/// A waiter that sent `CLIENT CAPA redirect` is answered too when its
/// primary steps down, never granted: Valkey 9.1 redirects it to the new
/// primary itself (`REDIRECT host:port`: waiters are blocked on their key),
/// exactly once. Redis 7.0 has no `CLIENT CAPA`: its clients are covered
/// by the test above. (This is not cluster mode: no `MOVED`, no slot.)
#[test]
fn redirect_capable_waiters_get_an_error_when_the_primary_steps_down() {
    let kind = Kind::Valkey;
    let (s, mut c) = held(kind, &[]);
    let other = Server::start(kind);
    let mut w = s.client_resp3();
    assert_eq!(
        w.cmd(&["CLIENT", "CAPA", "redirect"]),
        Reply::Status("OK".into())
    );
    let mut w = enqueue(&s, w, "w", &[]);
    c.cmd(&args!["REPLICAOF", "127.0.0.1", other.port]);
    assert_eq!(
        w.try_read_reply(5 * SECOND),
        Some(Reply::Error(format!("REDIRECT 127.0.0.1:{}", other.port))),
        "{kind}: a waiter that sent CLIENT CAPA redirect is answered when the primary steps down"
    );
    assert_eq!(
        w.try_read_reply(Duration::from_millis(300)),
        None,
        "{kind}: one answer"
    );
    wait_waiting(&s, 0);
    assert_eq!(blocked_clients(&s), 0);
}

/// 32 clients × 50 acquisitions, all through BLOCK: every one granted, never
/// two holders at once, and nothing left behind.
#[test]
fn many_clients_contend_without_loss() {
    const CLIENTS: usize = 32;
    const ROUNDS: usize = 50;
    for kind in KINDS {
        let s = Server::start(kind);
        let held = Arc::new(AtomicBool::new(false));
        let granted = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let mut c = if i % 2 == 0 {
                    s.client()
                } else {
                    s.client_resp3()
                };
                let (held, granted) = (held.clone(), granted.clone());
                thread::spawn(move || {
                    let owner = format!("client-{i}");
                    for _ in 0..ROUNDS {
                        let r = c.cmd(&[
                            "LOCK.ACQUIRE",
                            "hot",
                            &owner,
                            "PX",
                            "10000",
                            "BLOCK",
                            "20000",
                        ]);
                        assert_eq!(r, Reply::Int(1), "{owner}");
                        assert!(!held.swap(true, Ordering::SeqCst), "two holders at once");
                        // While it holds, the server agrees: one hold, its own
                        // (and the flag above spans this round trip).
                        let info = c.cmd(&["LOCK.INFO", "hot"]);
                        assert_eq!(
                            info.map_get("owner").map(Reply::as_str),
                            Some(owner.as_str()),
                            "{info:?}"
                        );
                        assert_eq!(info.map_get("holds"), Some(&Reply::Int(1)), "{info:?}");
                        granted.fetch_add(1, Ordering::SeqCst);
                        held.store(false, Ordering::SeqCst);
                        assert_eq!(c.cmd(&["LOCK.RELEASE", "hot", &owner]), Reply::Int(0));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
        assert_eq!(granted.load(Ordering::SeqCst), CLIENTS * ROUNDS);
        let mut c = s.client();
        assert_eq!(c.cmd(&["EXISTS", "hot"]).as_int(), 0);
        wait_waiting(&s, 0);
        assert_eq!(s.info_field("lock", "lock_queues").as_deref(), Some("0"));
        assert_eq!(blocked_clients(&s), 0, "{kind}");
    }
}
