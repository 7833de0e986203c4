//! LOCK.MACQUIRE / LOCK.MRELEASE: several ordinary locks taken or released
//! all at once or not at all (SPEC Part 2, "Multi-key locks"), one test per
//! rule, on Redis 7.0 and Valkey 9.1, RESP2 and RESP3: replies, all or
//! nothing, one arrival order across keys (never overtaken on any key, no
//! partial hold, no deadlock: {a,b} and {b,a} under contention, checked
//! by an observer), waiters counted and shown on every key, KEEPALIVE and
//! REPLICAS over the whole set (a SIGKILLed holder, an exact undo, a stale
//! grant refused and taken back), lifecycle events per key, each key freed
//! handed on or published, Redisson locks on the same names, bad input.
//! The cluster rules (one slot, CROSSSLOT) are in `tests/rwlock.rs`'s
//! 3-primary test.

mod common;
#[path = "support/family.rs"]
mod family;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use common::*;
use family::*;
use testkit::redisson;

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|&n| Reply::Int(n)).collect())
}

#[track_caller]
fn owner_of(c: &mut Client, key: &str) -> Option<String> {
    c.cmd(&["LOCK.INFO", key])
        .map_get("owner")
        .map(|o| o.as_str().to_owned())
}

/// Every key taken (or re-entered) at once, an array of holds in the
/// order given; nil and nothing changed when any key is not available;
/// MRELEASE drops one hold of each or answers NOTOWNER and changes
/// nothing.
fn all_or_nothing(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    let t0 = server_ms(&mut c);
    assert_eq!(
        c.cmd(&["LOCK.MACQUIRE", "3", "a", "b", "c", "me", "PX", "10000"]),
        ints(&[1, 1, 1])
    );
    let t1 = server_ms(&mut c);
    for k in ["a", "b", "c"] {
        assert_eq!(fields(&mut c, k.as_bytes()), map(&[("me", "1")]), "{k}");
        let d = pexpiretime(&mut c, k.as_bytes());
        assert!(d >= t0 + 10000 && d <= t1 + 10000, "{k}: {d}");
    }
    assert_eq!(
        c3.cmd(&["LOCK.MACQUIRE", "2", "c", "a", "me"]),
        ints(&[2, 2])
    );
    assert_eq!(fields(&mut c, b"b"), map(&[("me", "1")]));
    // One key held by someone else: nothing anywhere.
    c.cmd(&["LOCK.ACQUIRE", "d", "x", "PX", "60000"]);
    let before = keyspace(&mut c);
    assert_eq!(c.cmd(&["LOCK.MACQUIRE", "2", "e", "d", "you"]), Reply::Nil);
    assert_eq!(c3.cmd(&["LOCK.MACQUIRE", "2", "a", "d", "me"]), Reply::Null);
    assert_eq!(keyspace(&mut c), before);
    // MRELEASE: all, in the order given.
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "3", "c", "b", "a", "me"]),
        ints(&[1, 0, 1])
    );
    assert_eq!(c.cmd(&["EXISTS", "b"]), Reply::Int(0));
    // NOTOWNER unless it holds every key: nothing changes.
    let before = keyspace(&mut c);
    let r = c.cmd(&["LOCK.MRELEASE", "3", "a", "b", "c", "me"]);
    assert_eq!(r.err_code(), Some("NOTOWNER"), "{r:?}");
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "a", "d", "me"]).err_code(),
        Some("NOTOWNER")
    );
    assert_eq!(keyspace(&mut c), before);
    assert_eq!(
        c3.cmd(&["LOCK.MRELEASE", "2", "a", "c", "me"]),
        ints(&[0, 0])
    );
    // A single key works too, and is an ordinary lock.
    assert_eq!(c.cmd(&["LOCK.MACQUIRE", "1", "k", "me"]), ints(&[1]));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "me"]), Reply::Int(0));
}

/// One arrival order across keys: a multi-key waiter is not overtaken on
/// any of its keys (a free key stays unavailable to newcomers while it
/// waits for its others), is granted when it heads every queue of its keys
/// and all are free, and counts and shows on every key.
fn arrival_order_across_keys(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "a", "x", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut w1 = s.client();
    w1.send(&["LOCK.MACQUIRE", "2", "a", "b", "w1", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    for key in ["a", "b"] {
        let shown = c.cmd(&["LOCK.WAITERS", key]);
        let w = shown.as_array()[0].as_array();
        assert_eq!(w.len(), 5, "{shown:?}");
        assert_eq!(
            (w[1].as_str(), w[2].as_str()),
            ("w1", "lock"),
            "{key}: {shown:?}"
        );
        assert_eq!(w[4], Reply::Int(-1));
    }
    assert_eq!(
        c.cmd(&["LOCK.INFO", "a"]).map_get("waiters"),
        Some(&Reply::Int(1))
    );
    // b is free, but w1 waits for it: a newcomer is refused.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "b", "newcomer"]), Reply::Nil);
    assert_eq!(c.cmd(&["LOCK.MACQUIRE", "1", "b", "newcomer"]), Reply::Nil);
    let mut w2 = s.client();
    w2.send(&["LOCK.ACQUIRE", "b", "w2", "BLOCK", "0"]);
    wait_waiting(&s, 2);
    let mut w3 = s.client();
    w3.send(&["LOCK.MACQUIRE", "2", "b", "a", "w3", "BLOCK", "0"]);
    wait_waiting(&s, 3);
    assert_eq!(c.cmd(&["LOCK.WAITERS", "b"]).as_array().len(), 3);
    assert_eq!(c.cmd(&["LOCK.WAITERS", "a"]).as_array().len(), 2);
    // a is released: w1 takes both.
    assert_eq!(c.cmd(&["LOCK.RELEASE", "a", "x"]), Reply::Int(0));
    assert_eq!(w1.read_reply(), ints(&[1, 1]));
    assert_eq!(owner_of(&mut c, "a").as_deref(), Some("w1"));
    assert_eq!(owner_of(&mut c, "b").as_deref(), Some("w1"));
    assert_eq!(w2.try_read_reply(Duration::from_millis(50)), None);
    // w1 lets go: w2 (first on b) gets b; w3 waits for b, so a stays free
    // and unavailable.
    assert_eq!(
        w1.cmd(&["LOCK.MRELEASE", "2", "a", "b", "w1"]),
        ints(&[0, 0])
    );
    assert_eq!(w2.read_reply(), Reply::Int(1));
    assert_eq!(w3.try_read_reply(Duration::from_millis(50)), None);
    assert_eq!(c.cmd(&["EXISTS", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "a", "newcomer"]), Reply::Nil);
    assert_eq!(w2.cmd(&["LOCK.RELEASE", "b", "w2"]), Reply::Int(0));
    assert_eq!(w3.read_reply(), ints(&[1, 1]), "in its own key order: b, a");
    assert_eq!(owner_of(&mut c, "a").as_deref(), Some("w3"));
    // A holder's lease running out serves a multi-key waiter too.
    assert_eq!(
        w3.cmd(&["LOCK.MRELEASE", "2", "a", "b", "w3"]),
        ints(&[0, 0])
    );
    c.cmd(&["LOCK.ACQUIRE", "b", "x", "PX", "200"]);
    let deadline = pexpiretime(&mut c, b"b");
    send_timed(
        &mut w1,
        &["LOCK.MACQUIRE", "2", "a", "b", "w1", "BLOCK", "5000"],
    );
    let t = read_timed(&mut w1);
    assert_eq!(t.reply, ints(&[1, 1]));
    let at = t.answered_us / 1000;
    assert!(
        at > deadline && at <= deadline + 250,
        "{kind}: granted at {at}, deadline {deadline}"
    );
}

/// {a,b} and {b,a} taken by many clients at once, BLOCK: every call is
/// granted in turn (no deadlock), and an observer reading both keys in one
/// MULTI/EXEC never sees one taken without the other.
fn contention_ab_and_ba(kind: Kind) {
    const WORKERS: usize = 6;
    const ROUNDS: usize = 15;
    let s = Server::start(kind);
    let port = s.port;
    let done = Arc::new(AtomicBool::new(false));
    let observer = {
        let done = done.clone();
        thread::spawn(move || {
            let mut o = Client::connect(port);
            let (mut seen, mut held) = (0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                o.send_pipeline(&[
                    &["MULTI"][..],
                    &["HGETALL", "a"],
                    &["HGETALL", "b"],
                    &["EXEC"],
                ]);
                for _ in 0..3 {
                    o.read_reply();
                }
                let exec = o.read_reply();
                let a = exec.as_array()[0].as_array().to_vec();
                let b = exec.as_array()[1].as_array().to_vec();
                assert_eq!(a, b, "a partial hold: a = {a:?}, b = {b:?}");
                seen += 1;
                held += u64::from(!a.is_empty());
            }
            (seen, held)
        })
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            thread::spawn(move || {
                let mut c = Client::connect(port);
                let owner = format!("worker{i}");
                let keys = if i % 2 == 0 { ["a", "b"] } else { ["b", "a"] };
                for round in 0..ROUNDS {
                    let r = c.cmd(&[
                        "LOCK.MACQUIRE",
                        "2",
                        keys[0],
                        keys[1],
                        &owner,
                        "PX",
                        "10000",
                        "BLOCK",
                        "10000",
                    ]);
                    assert_eq!(r, ints(&[1, 1]), "{owner} round {round}");
                    for k in keys {
                        let info = c.cmd(&["LOCK.INFO", k]);
                        assert_eq!(info.map_get("owner"), Some(&bulk(&owner)), "{k}");
                    }
                    thread::sleep(Duration::from_millis(1));
                    let r = c.cmd(&["LOCK.MRELEASE", "2", keys[1], keys[0], &owner]);
                    assert_eq!(r, ints(&[0, 0]));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    done.store(true, Ordering::Relaxed);
    let (seen, held) = observer.join().expect("observer");
    eprintln!("{kind}: the observer looked {seen} times, {held} while held");
    assert!(seen > 10);
    assert_eq!(lock_stat(&s, "waiting"), 0);
    // Every call granted once: at once (two keys counted as acquired each)
    // or after waiting.
    let granted = lock_stat(&s, "granted_after_wait") + lock_stat(&s, "acquired") / 2;
    assert_eq!(granted, (WORKERS * ROUNDS) as i64);
}

/// A waiter that times out or whose connection dies leaves every queue it
/// stood in, and the waiters it held back are served.
fn leaving_waiters_serve_the_rest(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LOCK.ACQUIRE", "b", "x", "PX", "60000"]);
    // It heads a (free) and waits for b: z behind it on a waits too.
    let mut m = s.client();
    m.send(&["LOCK.MACQUIRE", "2", "a", "b", "m", "BLOCK", "300"]);
    wait_waiting(&s, 1);
    let mut z = s.client();
    z.send(&["LOCK.ACQUIRE", "a", "z", "BLOCK", "0"]);
    wait_waiting(&s, 2);
    assert!(m.read_reply().is_nil(), "{kind}: timed out");
    assert_eq!(
        z.read_reply(),
        Reply::Int(1),
        "{kind}: served when the head left"
    );
    c.cmd(&["LOCK.RELEASE", "a", "z"]);
    // The same when its connection dies.
    let mut m = s.client();
    m.send(&["LOCK.MACQUIRE", "2", "a", "b", "m", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    z.send(&["LOCK.ACQUIRE", "a", "z", "BLOCK", "0"]);
    wait_waiting(&s, 2);
    drop(m);
    assert_eq!(z.read_reply(), Reply::Int(1));
    assert_eq!(
        fields(&mut c, b"b"),
        map(&[("x", "1")]),
        "never granted to a dead waiter"
    );
    assert_eq!(lock_stat(&s, "waiting"), 0);
    // BLOCK inside MULTI answers at once.
    c.cmd(&["MULTI"]);
    c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "m", "BLOCK", "0"]);
    let exec = c.cmd(&["EXEC"]);
    assert!(exec.as_array()[0].is_nil(), "{exec:?}");
}

/// KEEPALIVE over the whole set: one tie per key for the owner; a SIGKILLed
/// holder process releases every key within milliseconds.
fn keepalive_over_the_set(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut holder = CliHolder::start(s.port);
    assert_eq!(
        holder.cmd("LOCK.MACQUIRE 2 a b dying PX 30000 KEEPALIVE"),
        "1"
    );
    assert_eq!(holder.line(), "1");
    for k in ["a", "b"] {
        assert_eq!(
            c.cmd(&["LOCK.INFO", k]).map_get("keepalive"),
            Some(&Reply::Int(1)),
            "{k}"
        );
    }
    assert_eq!(lock_stat(&s, "tied"), 2);
    let mut w = s.client();
    w.send(&[
        "LOCK.MACQUIRE",
        "2",
        "b",
        "a",
        "next",
        "KEEPALIVE",
        "BLOCK",
        "10000",
    ]);
    wait_waiting(&s, 1);
    let killed = holder.kill9();
    assert_eq!(w.read_reply(), ints(&[1, 1]), "{kind}");
    let delay = killed.elapsed();
    eprintln!("{kind}: SIGKILLed multi-key holder -> waiter granted in {delay:?}");
    assert!(delay < SECOND, "{kind}: {delay:?}");
    for k in ["a", "b"] {
        assert_eq!(owner_of(&mut c, k).as_deref(), Some("next"));
        assert_eq!(
            c.cmd(&["LOCK.INFO", k]).map_get("keepalive"),
            Some(&Reply::Int(1)),
            "{k}"
        );
    }
    drop(w);
    assert!(wait_until(5 * SECOND, || c.cmd(&["EXISTS", "a", "b"]) == Reply::Int(0)));
    // KEEPALIVE in a script: an error, nothing taken.
    let r = c.cmd(&[
        "EVAL",
        "return redis.call('LOCK.MACQUIRE', '2', KEYS[1], KEYS[2], 'o', 'KEEPALIVE')",
        "2",
        "a",
        "b",
    ]);
    assert!(r.is_error(), "{r:?}");
    assert!(keys(&mut c, "*").is_empty());
}

/// A primary and one replica, synced.
fn pair(kind: Kind) -> (Server, Server) {
    let p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    assert!(wait_until(10 * SECOND, || p
        .info("replication")
        .contains("state=online")));
    let mut c = p.client();
    c.cmd(&["SET", "ready", "1"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    c.cmd(&["DEL", "ready"]);
    (p, r)
}

/// SIGSTOPs a server; SIGCONT when dropped.
struct Frozen(u32);

impl Frozen {
    fn new(s: &Server) -> Frozen {
        let ok = std::process::Command::new("kill")
            .args(["-STOP", &s.pid().to_string()])
            .status()
            .is_ok_and(|st| st.success());
        assert!(ok);
        Frozen(s.pid())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// REPLICAS over the whole set: the reply once the replica acknowledged
/// every key; not in time, one hold of every key is taken back (a fresh
/// key is released: its unlock published) and NOREPLICAS answered. A
/// waiter granted every key that loses one before the acknowledgement is
/// refused, and the keys it still held go back.
fn replicas_over_the_whole_set(kind: Kind) {
    let (p, r) = pair(kind);
    let mut c = p.client();
    let mut rc = r.client();
    assert_eq!(
        c.cmd(&[
            "LOCK.MACQUIRE",
            "2",
            "a",
            "b",
            "me",
            "PX",
            "60000",
            "REPLICAS",
            "1",
            "5000"
        ]),
        ints(&[1, 1])
    );
    assert_eq!(
        fields(&mut rc, b"b"),
        map(&[("me", "1")]),
        "{kind}: on the replica when answered"
    );
    let mut sub = Subscriber::new(&p, false, &redisson::channel(b"c"));
    {
        let _frozen = Frozen::new(&r);
        let got = c.cmd(&[
            "LOCK.MACQUIRE",
            "2",
            "a",
            "b",
            "me",
            "PX",
            "90000",
            "REPLICAS",
            "1",
            "200",
        ]);
        assert_eq!(got.err_code(), Some("NOREPLICAS"), "{got:?}");
        // The holds it added are gone; the deadlines are those the re-entry
        // set (LOCK.*'s undo of a re-entry drops the hold, as RELEASE does).
        assert_eq!(fields(&mut c, b"a"), map(&[("me", "1")]));
        assert_eq!(fields(&mut c, b"b"), map(&[("me", "1")]));
        let got = c.cmd(&["LOCK.MACQUIRE", "2", "c", "a", "me", "REPLICAS", "1", "200"]);
        assert_eq!(got.err_code(), Some("NOREPLICAS"), "{got:?}");
        assert_eq!(c.cmd(&["EXISTS", "c"]), Reply::Int(0));
        assert_eq!(fields(&mut c, b"a"), map(&[("me", "1")]));
        sub.expect("0", "an undone fresh key is released");
    }
    // Fewer replicas than asked for: at once, nothing done.
    let before = keyspace(&mut c);
    let got = c.cmd(&["LOCK.MACQUIRE", "2", "x", "y", "me", "REPLICAS", "2", "100"]);
    assert!(format!("{got:?}").contains("nothing was done"), "{got:?}");
    assert_eq!(keyspace(&mut c), before);
    // A stale grant: w is granted both keys, then loses b before the
    // replica acknowledges; it is refused and a goes back.
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "a", "b", "me"]),
        ints(&[0, 0])
    );
    c.cmd(&["LOCK.ACQUIRE", "a", "x", "PX", "60000"]);
    let mut w = p.client();
    w.send(&[
        "LOCK.MACQUIRE",
        "2",
        "a",
        "b",
        "w",
        "BLOCK",
        "0",
        "REPLICAS",
        "1",
        "5000",
    ]);
    wait_waiting(&p, 1);
    {
        let _frozen = Frozen::new(&r);
        assert_eq!(c.cmd(&["LOCK.RELEASE", "a", "x"]), Reply::Int(0));
        assert!(wait_until(5 * SECOND, || owner_of(&mut c, "b").as_deref() == Some("w")));
        assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "b"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LOCK.ACQUIRE", "b", "thief"]), Reply::Int(1));
    }
    let got = w.read_reply();
    assert_eq!(
        got.err_code(),
        Some("NOREPLICAS"),
        "{kind}: a stale grant: {got:?}"
    );
    assert!(
        wait_until(5 * SECOND, || c.cmd(&["EXISTS", "a"]) == Reply::Int(0)),
        "{kind}: the key it still held went back: {:?} {}",
        fields(&mut c, b"a"),
        p.info("lock")
    );
    assert_eq!(owner_of(&mut c, "b").as_deref(), Some("thief"));
}

/// `lock.acquired` on each key an owner takes fresh (not re-entries),
/// `lock.released` on each key MRELEASE frees; each freed key is handed to
/// its waiter or its unlock published.
fn events_and_hand_offs_per_key(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut ea = Events::new(&s, "a");
    let mut eb = Events::new(&s, "b");
    let quiet = Duration::from_millis(150);
    c.cmd(&["LOCK.ACQUIRE", "a", "me"]);
    assert_eq!(
        c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "me"]),
        ints(&[2, 1])
    );
    assert_eq!(ea.drain(quiet), ["lock.acquired"]);
    assert_eq!(eb.drain(quiet), ["lock.acquired"]);
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "a", "b", "me"]),
        ints(&[1, 0])
    );
    assert!(ea.drain(quiet).is_empty());
    assert_eq!(eb.drain(quiet), ["lock.released"]);
    c.cmd(&["LOCK.MACQUIRE", "1", "b", "me"]);
    eb.drain(quiet);
    // A waiter on a; nobody on b: a is handed on, b published.
    let mut sa = Subscriber::new(&s, false, &redisson::channel(b"a"));
    let mut sb = Subscriber::new(&s, true, &redisson::channel(b"b"));
    let mut w = s.client();
    w.send(&["LOCK.ACQUIRE", "a", "next", "BLOCK", "5000"]);
    wait_waiting(&s, 1);
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "b", "a", "me"]),
        ints(&[0, 0])
    );
    assert_eq!(w.read_reply(), Reply::Int(1));
    sb.expect("0", "b freed, nobody waiting");
    sa.expect_silence("a handed on");
    assert_eq!(ea.drain(quiet), ["lock.released", "lock.acquired"]);
    assert_eq!(eb.drain(quiet), ["lock.released"]);
}

/// Each key is an ordinary Redisson RLock: Redisson's scripts see the
/// holds, and a Redisson unlock (a script: DEL and publish) serves a
/// queued multi-key waiter.
fn redisson_locks_on_the_same_names(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let owner = "6e3814a1-e847-452b-a982-45baf93a1df2:1";
    assert_eq!(
        c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "native", "PX", "20000"]),
        ints(&[1, 1])
    );
    let pttl = c.cmd(&args!["EVAL", redisson::TRY_LOCK, 1, "a", 30000, owner]);
    assert!(matches!(pttl, Reply::Int(n) if n > 19000), "{pttl:?}");
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "a", "b", "native"]),
        ints(&[0, 0])
    );
    // Redisson holds b: MACQUIRE waits, nothing taken meanwhile.
    assert_eq!(
        c.cmd(&args!["EVAL", redisson::TRY_LOCK, 1, "b", 30000, owner]),
        Reply::Nil
    );
    assert_eq!(
        c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "native"]),
        Reply::Nil
    );
    assert_eq!(c.cmd(&["EXISTS", "a"]), Reply::Int(0));
    let mut w = s.client();
    w.send(&["LOCK.MACQUIRE", "2", "a", "b", "native", "BLOCK", "5000"]);
    wait_waiting(&s, 1);
    let unlocked = c.cmd(&args![
        "EVAL",
        redisson::UNLOCK,
        2,
        "b",
        redisson::channel(b"b"),
        redisson::UNLOCK_MESSAGE,
        30000,
        owner
    ]);
    assert_eq!(unlocked, Reply::Int(1));
    assert_eq!(w.read_reply(), ints(&[1, 1]));
}

/// Bad input: a clear error and nothing changed.
fn bad_input_changes_nothing(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "me", "PX", "60000"]);
    c.cmd(&["SET", "str", "x"]);
    c.cmd(&["RWLOCK.ACQUIRE", "rw", "o", "READ", "PX", "60000"]);
    let before = keyspace(&mut c);
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["LOCK.MACQUIRE"], "ERR", "wrong number of arguments"),
        (
            vec!["LOCK.MACQUIRE", "1", "k"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["LOCK.MACQUIRE", "0", "a", "me"], "ERR", "numkeys"),
        (vec!["LOCK.MACQUIRE", "-1", "a", "me"], "ERR", "numkeys"),
        (vec!["LOCK.MACQUIRE", "x", "a", "me"], "ERR", "numkeys"),
        (vec!["LOCK.MACQUIRE", "5", "a", "me"], "ERR", "numkeys"),
        (
            vec!["LOCK.MACQUIRE", "3", "a", "b", "me"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["LOCK.MACQUIRE", "2", "c", "c", "me"],
            "ERR",
            "same key",
        ),
        (vec!["LOCK.MACQUIRE", "2", "c", "d", "*"], "ERR", ""),
        (vec!["LOCK.MACQUIRE", "2", "c", "d", ""], "ERR", "owner"),
        (
            vec!["LOCK.MACQUIRE", "1", "c", "me", "TOKEN"],
            "ERR",
            "unknown option",
        ),
        (
            vec!["LOCK.MACQUIRE", "1", "c", "me", "PX", "0"],
            "ERR",
            "lease",
        ),
        (
            vec!["LOCK.MACQUIRE", "1", "c", "me", "BLOCK", "-1"],
            "ERR",
            "BLOCK",
        ),
        (
            vec!["LOCK.MACQUIRE", "1", "c", "me", "KEEPALIVE", "PX", "10"],
            "ERR",
            "KEEPALIVE",
        ),
        (
            vec!["LOCK.MACQUIRE", "1", "c", "me", "REPLICAS", "1", "0"],
            "ERR",
            "REPLICAS",
        ),
        (
            vec!["LOCK.MACQUIRE", "2", "c", "str", "me"],
            "WRONGTYPE",
            "",
        ),
        (vec!["LOCK.MACQUIRE", "2", "c", "rw", "me"], "NOTLOCK", ""),
        (
            vec!["LOCK.MACQUIRE", "2", "a", "str", "me"],
            "WRONGTYPE",
            "",
        ),
        (
            vec!["LOCK.MRELEASE", "1", "a"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["LOCK.MRELEASE", "2", "a", "b", "me", "x"],
            "ERR",
            "no options",
        ),
        (
            vec!["LOCK.MRELEASE", "2", "a", "a", "me"],
            "ERR",
            "same key",
        ),
        (vec!["LOCK.MRELEASE", "1", "a", "*"], "ERR", ""),
        (vec!["LOCK.MRELEASE", "0", "a", "me"], "ERR", "numkeys"),
        (vec!["LOCK.MRELEASE", "2", "a", "c", "me"], "NOTOWNER", ""),
        (
            vec!["LOCK.MRELEASE", "2", "a", "str", "me"],
            "WRONGTYPE",
            "",
        ),
        (vec!["LOCK.MRELEASE", "2", "a", "rw", "me"], "NOTLOCK", ""),
    ];
    for (cmd, code, text) in &cases {
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some(*code), "{kind}: {cmd:?} -> {r:?}");
        assert!(format!("{r:?}").contains(text), "{kind}: {cmd:?} -> {r:?}");
        assert_eq!(
            keyspace(&mut c),
            before,
            "{kind}: {cmd:?} changed something"
        );
    }
    c.cmd(&["MULTI"]);
    c.cmd(&["LOCK.MACQUIRE", "1", "c", "me", "REPLICAS", "1", "100"]);
    let exec = c.cmd(&["EXEC"]);
    assert_eq!(exec.as_array()[0].err_code(), Some("ERR"), "{exec:?}");
    assert_eq!(keyspace(&mut c), before);
}

per_kind!(
    all_or_nothing,
    arrival_order_across_keys,
    contention_ab_and_ba,
    leaving_waiters_serve_the_rest,
    keepalive_over_the_set,
    replicas_over_the_whole_set,
    events_and_hand_offs_per_key,
    redisson_locks_on_the_same_names,
    bad_input_changes_nothing,
);
