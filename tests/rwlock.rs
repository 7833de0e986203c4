//! RWLOCK.*: read-write locks in Redisson's `RReadWriteLock` layout (SPEC
//! Part 2, "Read-write locks"), one test per rule, on Redis 7.0 and Valkey
//! 9.1, RESP2 and RESP3 where replies differ: the layout byte for byte, the
//! replies, releases, downgrade and NOUPGRADE, TOKEN with WRITE only, the
//! lease rule, the channel and its payloads, the queue policy (readers
//! together, writers not starved: 20 overlapping readers and a writer,
//! measured on the server clock), KEEPALIVE over every hold of an owner
//! (SIGKILLed holder processes), Redisson readers that died, Redisson
//! clients sharing locks with native callers both ways, timeout-key events
//! mapped back to their lock, lifecycle events, REPLICAS with exact undo,
//! bad input, and a 3-primary cluster.

mod common;
#[path = "support/family.rs"]
mod family;

use std::thread;
use std::time::{Duration, Instant};

use common::*;
use family::*;
use testkit::cluster::Cluster;
use testkit::redisson::rwlock_channel;

const CHANNEL: &str = "redisson_rwlock:{rw}";

#[track_caller]
fn acq(c: &mut Client, key: &str, owner: &str, rest: &[&str]) -> Reply {
    c.cmd(&[&["RWLOCK.ACQUIRE", key, owner][..], rest].concat())
}

#[track_caller]
fn rel(c: &mut Client, key: &str, owner: &str, mode: &str) -> Reply {
    c.cmd(&["RWLOCK.RELEASE", key, owner, mode])
}

#[track_caller]
fn info(c: &mut Client, key: &str) -> Reply {
    c.cmd(&["RWLOCK.INFO", key])
}

#[track_caller]
fn info_int(c: &mut Client, key: &str, field: &str) -> i64 {
    let i = info(c, key);
    i.map_get(field)
        .unwrap_or_else(|| panic!("no {field} in {i:?}"))
        .as_int()
}

/// `{rw}:<owner>:rwlock_timeout:<n>`.
fn tkey(owner: &str, n: i64) -> String {
    format!("{{rw}}:{owner}:rwlock_timeout:{n}")
}

/// Asserts `deadline` is `lease` ms after a moment between `t0` and `t1`.
#[track_caller]
fn deadline_in(deadline: i64, t0: i64, t1: i64, lease: i64, what: &str) {
    assert!(
        deadline >= t0 + lease && deadline <= t1 + lease,
        "{what}: deadline {deadline} not within [{}, {}]",
        t0 + lease,
        t1 + lease
    );
}

// ---- layout and replies ----

/// The hash, the readers' and the writer's fields, one string key `1` per
/// read hold with that hold's lease, Redisson's naming rule with and
/// without a hash tag; the hash lives as long as its latest hold.
fn layout_is_redissons(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let t0 = server_ms(&mut c);
    assert_eq!(
        acq(&mut c, "rw", "r1", &["READ", "PX", "10000"]),
        Reply::Int(1)
    );
    assert_eq!(
        acq(&mut c, "rw", "r1", &["read", "px", "20000"]),
        Reply::Int(2)
    );
    assert_eq!(acq(&mut c, "rw", "r2", &["EX", "5", "READ"]), Reply::Int(1));
    let t1 = server_ms(&mut c);
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "read"), ("r1", "2"), ("r2", "1")])
    );
    let mut want = vec![tkey("r1", 1), tkey("r1", 2), tkey("r2", 1), "rw".into()];
    want.sort();
    assert_eq!(keys(&mut c, "*"), want);
    for (k, lease) in [
        (tkey("r1", 1), 10000),
        (tkey("r1", 2), 20000),
        (tkey("r2", 1), 5000),
    ] {
        assert_eq!(c.cmd(&["TYPE", &k]), Reply::Status("string".into()));
        assert_eq!(c.cmd(&["GET", &k]), bulk("1"));
        deadline_in(pexpiretime(&mut c, k.as_bytes()), t0, t1, lease, &k);
    }
    deadline_in(
        pexpiretime(&mut c, b"rw"),
        t0,
        t1,
        20000,
        "the hash: its latest hold",
    );

    // A key with a hash tag: `key:<owner>:...`, no braces added.
    assert_eq!(acq(&mut c, "u:{42}:rw", "o", &["READ"]), Reply::Int(1));
    assert_eq!(c.cmd(&["GET", "u:{42}:rw:o:rwlock_timeout:1"]), bulk("1"));
    // A writer: `<owner>:write`, no timeout key.
    assert_eq!(
        acq(&mut c, "wl", "w", &["WRITE", "PX", "7000"]),
        Reply::Int(1)
    );
    let t2 = server_ms(&mut c);
    assert_eq!(
        fields(&mut c, b"wl"),
        map(&[("mode", "write"), ("w:write", "1")])
    );
    assert!(keys(&mut c, "{wl}*").is_empty());
    deadline_in(
        pexpiretime(&mut c, b"wl"),
        t1,
        t2,
        7000,
        "the writer's lease",
    );
    // The default lease.
    assert_eq!(acq(&mut c, "dl", "o", &["READ"]), Reply::Int(1));
    let left = pttl(&mut c, b"{dl}:o:rwlock_timeout:1");
    assert!(left > 29000 && left <= 30000, "{left}");
}

/// RWLOCK.INFO's fields in order, a map in RESP3 and a flat array in RESP2;
/// nil without a lock; TOKEN's `[holds, token]`; owner `*`.
fn info_and_replies_in_both_protocols(kind: Kind) {
    let s = Server::start(kind);
    let mut c2 = s.client();
    let mut c3 = s.client_resp3();
    assert_eq!(info(&mut c2, "rw"), Reply::Nil);
    assert_eq!(info(&mut c3, "rw"), Reply::Null);
    acq(&mut c2, "rw", "a", &["READ", "PX", "60000"]);
    acq(&mut c2, "rw", "a", &["READ", "PX", "60000"]);
    acq(&mut c3, "rw", "b", &["READ", "PX", "60000"]);
    let names = [
        "mode",
        "writer",
        "writeholds",
        "readers",
        "readholds",
        "ttl",
        "waiters",
        "keepalive",
    ];
    let flat = info(&mut c2, "rw");
    let items = flat.as_array();
    assert_eq!(items.len(), 16, "{flat:?}");
    for (i, name) in names.iter().enumerate() {
        assert_eq!(items[2 * i], bulk(name), "{flat:?}");
    }
    assert_eq!(items[1], bulk("read"));
    assert_eq!(items[3], Reply::Nil);
    assert_eq!(&items[4..6], &[bulk("writeholds"), Reply::Int(0)]);
    assert_eq!(items[7], Reply::Int(2));
    assert_eq!(items[9], Reply::Int(3));
    let ttl = items[11].as_int();
    assert!(ttl > 59000 && ttl <= 60000, "{ttl}");
    assert_eq!(
        &items[12..],
        &[
            bulk("waiters"),
            Reply::Int(0),
            bulk("keepalive"),
            Reply::Int(0)
        ]
    );
    let m = info(&mut c3, "rw");
    let Reply::Map(pairs) = &m else {
        panic!("RESP3 RWLOCK.INFO is not a map: {m:?}");
    };
    let got: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(got, names);
    assert_eq!(m.map_get("writer"), Some(&Reply::Null));
    assert_eq!(m.map_get("readholds"), Some(&Reply::Int(3)));

    // Write mode, with the writer's own read hold (a downgrade).
    assert_eq!(acq(&mut c2, "w", "me", &["WRITE"]), Reply::Int(1));
    assert_eq!(acq(&mut c2, "w", "me", &["WRITE"]), Reply::Int(2));
    assert_eq!(acq(&mut c2, "w", "me", &["READ"]), Reply::Int(1));
    let m = info(&mut c3, "w");
    assert_eq!(m.map_get("mode"), Some(&bulk("write")));
    assert_eq!(m.map_get("writer"), Some(&bulk("me")));
    assert_eq!(m.map_get("writeholds"), Some(&Reply::Int(2)));
    assert_eq!(m.map_get("readers"), Some(&Reply::Int(1)));
    assert_eq!(m.map_get("readholds"), Some(&Reply::Int(1)));

    // TOKEN: [holds, token]; owner `*`: the owner instead of the count.
    let t = acq(&mut c2, "t", "o", &["WRITE", "TOKEN"]);
    let first = t.as_array()[1].as_int();
    assert_eq!(t, Reply::Array(vec![Reply::Int(1), Reply::Int(first)]));
    let t = acq(&mut c3, "t", "o", &["WRITE", "TOKEN"]);
    assert_eq!(t.as_array()[0], Reply::Int(2));
    assert!(t.as_array()[1].as_int() > first);
    let uuid = acq(&mut c3, "g", "*", &["READ"]);
    assert_eq!(uuid.as_bytes().len(), 36, "{uuid:?}");
    let g = acq(&mut c2, "g2", "*", &["WRITE", "TOKEN"]);
    assert_eq!(g.as_array()[0].as_bytes().len(), 36, "{g:?}");
    // The generated owner holds it.
    let owner = uuid.as_str().to_owned();
    assert_eq!(rel(&mut c2, "g", &owner, "READ"), Reply::Int(0));
    // Busy: nil in both protocols.
    assert_eq!(acq(&mut c2, "w", "x", &["READ"]), Reply::Nil);
    assert_eq!(acq(&mut c3, "w", "x", &["WRITE"]), Reply::Null);
}

/// A READ release drops the owner's highest hold and its timeout key; no
/// release shortens another hold; NOTOWNER changes nothing.
fn read_release_drops_the_highest_hold(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "r1", &["READ", "PX", "50000"]);
    acq(&mut c, "rw", "r1", &["READ", "PX", "3000"]);
    acq(&mut c, "rw", "r2", &["READ", "PX", "20000"]);
    let long = pexpiretime(&mut c, tkey("r1", 1).as_bytes());
    let r2 = pexpiretime(&mut c, tkey("r2", 1).as_bytes());
    assert_eq!(pexpiretime(&mut c, b"rw"), long);
    assert_eq!(rel(&mut c, "rw", "r1", "READ"), Reply::Int(1));
    assert_eq!(c.cmd(&["EXISTS", &tkey("r1", 2)]), Reply::Int(0));
    assert_eq!(pexpiretime(&mut c, tkey("r1", 1).as_bytes()), long);
    assert_eq!(pexpiretime(&mut c, b"rw"), long);
    assert_eq!(rel(&mut c, "rw", "r1", "READ"), Reply::Int(0));
    assert_eq!(fields(&mut c, b"rw"), map(&[("mode", "read"), ("r2", "1")]));
    // The hash now lives as long as the latest hold left: r2's, untouched.
    assert_eq!(pexpiretime(&mut c, b"rw"), r2);
    assert_eq!(pexpiretime(&mut c, tkey("r2", 1).as_bytes()), r2);
    let before = keyspace(&mut c);
    for (owner, mode) in [("r1", "READ"), ("r2", "WRITE"), ("nobody", "READ")] {
        assert_eq!(rel(&mut c, "rw", owner, mode).err_code(), Some("NOTOWNER"));
    }
    assert_eq!(keyspace(&mut c), before);
    assert_eq!(rel(&mut c, "rw", "r2", "READ"), Reply::Int(0));
    assert!(keys(&mut c, "*").is_empty());
    assert_eq!(rel(&mut c, "rw", "r2", "READ").err_code(), Some("NOTOWNER"));
}

/// Downgrade: the writer takes READ; its write release leaves read mode
/// (publishing `1` so Redisson readers wake); an upgrade is NOUPGRADE and
/// changes nothing; a read release that frees the lock publishes `0`.
fn downgrade_noupgrade_and_payloads(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut sub = Subscriber::new(&s, false, CHANNEL.as_bytes());
    let mut sub3 = Subscriber::new(&s, true, CHANNEL.as_bytes());
    assert_eq!(
        acq(&mut c, "rw", "w", &["WRITE", "PX", "10000"]),
        Reply::Int(1)
    );
    assert_eq!(
        acq(&mut c, "rw", "w", &["READ", "PX", "20000"]),
        Reply::Int(1)
    );
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "write"), ("w", "1"), ("w:write", "1")])
    );
    // The writer's read hold that ends later extends the hash.
    let read = pexpiretime(&mut c, tkey("w", 1).as_bytes());
    assert_eq!(pexpiretime(&mut c, b"rw"), read);
    assert!(acq(&mut c, "rw", "x", &["READ"]).is_nil());
    assert!(acq(&mut c, "rw", "x", &["WRITE"]).is_nil());
    // A write re-entry sets the lease from now, never below a live read hold.
    assert_eq!(
        acq(&mut c, "rw", "w", &["WRITE", "PX", "1000"]),
        Reply::Int(2)
    );
    assert_eq!(pexpiretime(&mut c, b"rw"), read);
    assert_eq!(rel(&mut c, "rw", "w", "WRITE"), Reply::Int(1));
    sub.expect_silence("a partial write release");
    assert_eq!(rel(&mut c, "rw", "w", "WRITE"), Reply::Int(0));
    assert_eq!(fields(&mut c, b"rw"), map(&[("mode", "read"), ("w", "1")]));
    assert_eq!(pexpiretime(&mut c, b"rw"), read);
    sub.expect("1", "write mode ended, read holds remain");
    sub3.expect("1", "write mode ended, read holds remain (RESP3)");
    assert_eq!(acq(&mut c, "rw", "x", &["READ"]), Reply::Int(1));
    // NOUPGRADE: nothing changes.
    let before = keyspace(&mut c);
    let r = acq(&mut c, "rw", "x", &["WRITE", "BLOCK", "0"]);
    assert_eq!(r.err_code(), Some("NOUPGRADE"), "{r:?}");
    assert_eq!(keyspace(&mut c), before);
    assert_eq!(rel(&mut c, "rw", "x", "READ"), Reply::Int(0));
    sub.expect_silence("a read release that leaves the lock held");
    assert_eq!(rel(&mut c, "rw", "w", "READ"), Reply::Int(0));
    sub.expect("0", "a read release freed the lock");
    sub3.expect("0", "a read release freed the lock (RESP3)");
    // A write release that frees the lock, and FORCERELEASE: `1`.
    acq(&mut c, "rw", "w", &["WRITE"]);
    rel(&mut c, "rw", "w", "WRITE");
    sub.expect("1", "a write release freed the lock");
    sub3.expect("1", "a write release freed the lock (RESP3)");
    acq(&mut c, "rw", "r", &["READ"]);
    acq(&mut c, "rw", "r", &["READ"]);
    assert_eq!(c.cmd(&["RWLOCK.FORCERELEASE", "rw"]), Reply::Int(1));
    assert!(
        keys(&mut c, "*").is_empty(),
        "every hold and its timeout keys"
    );
    sub.expect("1", "FORCERELEASE");
    sub3.expect("1", "FORCERELEASE (RESP3)");
    assert_eq!(c.cmd(&["RWLOCK.FORCERELEASE", "rw"]), Reply::Int(0));
    // A last read hold that lapses publishes nothing.
    acq(&mut c, "rw", "r", &["READ", "PX", "100"]);
    thread::sleep(Duration::from_millis(250));
    assert!(keys(&mut c, "*").is_empty());
    sub.expect_silence("a lapsed read hold");
    sub3.expect_silence("a lapsed read hold");
}

/// TOKEN with WRITE only, from `redisson_lock_token:{key}` (RFencedLock's
/// and LOCK.*'s counter): re-entries get new tokens, nil and errors leave
/// the counter alone.
fn token_with_write_only(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let before = keyspace(&mut c);
    let r = acq(&mut c, "rw", "o", &["READ", "TOKEN"]);
    assert_eq!(r.err_code(), Some("ERR"), "{r:?}");
    assert!(format!("{r:?}").contains("WRITE only"), "{r:?}");
    assert_eq!(keyspace(&mut c), before);
    let t1 = acq(&mut c, "rw", "w", &["WRITE", "TOKEN"]).as_array()[1].as_int();
    let t2 = acq(&mut c, "rw", "w", &["WRITE", "TOKEN"]).as_array()[1].as_int();
    assert!(t2 > t1);
    assert_eq!(
        c.cmd(&["GET", "redisson_lock_token:{rw}"]),
        bulk(t2.to_string())
    );
    assert!(acq(&mut c, "rw", "other", &["WRITE", "TOKEN"]).is_nil());
    assert_eq!(
        c.cmd(&["GET", "redisson_lock_token:{rw}"]),
        bulk(t2.to_string())
    );
    // The same sequence as LOCK.ACQUIRE ... TOKEN on that name.
    c.cmd(&["RWLOCK.FORCERELEASE", "rw"]);
    let l = c.cmd(&["LOCK.ACQUIRE", "rw", "l", "TOKEN"]).as_array()[1].as_int();
    assert!(l > t2);
}

/// RENEW gives every hold of the owner (both modes) the new lease and no
/// one else's; the hash follows the lease rule; 0 and nothing changed for
/// an owner that holds nothing.
fn renew_moves_every_hold_of_the_owner(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "r1", &["READ", "PX", "5000"]);
    acq(&mut c, "rw", "r1", &["READ", "PX", "6000"]);
    acq(&mut c, "rw", "r2", &["READ", "PX", "20000"]);
    let r2 = pexpiretime(&mut c, tkey("r2", 1).as_bytes());
    let t0 = server_ms(&mut c);
    assert_eq!(
        c.cmd(&["RWLOCK.RENEW", "rw", "r1", "PX", "60000"]),
        Reply::Int(1)
    );
    let t1 = server_ms(&mut c);
    for n in 1..=2 {
        deadline_in(
            pexpiretime(&mut c, tkey("r1", n).as_bytes()),
            t0,
            t1,
            60000,
            "r1",
        );
    }
    assert_eq!(pexpiretime(&mut c, tkey("r2", 1).as_bytes()), r2);
    deadline_in(pexpiretime(&mut c, b"rw"), t0, t1, 60000, "the hash");
    // Shorter: r1's holds end sooner; the hash never below r2's.
    assert_eq!(
        c.cmd(&["RWLOCK.RENEW", "rw", "r1", "PX", "1000"]),
        Reply::Int(1)
    );
    assert_eq!(pexpiretime(&mut c, b"rw"), r2);
    let before = keyspace(&mut c);
    assert_eq!(
        c.cmd(&["RWLOCK.RENEW", "rw", "nobody", "PX", "1000"]),
        Reply::Int(0)
    );
    assert_eq!(keyspace(&mut c), before);
    // A writer with a read hold: both move.
    acq(&mut c, "wl", "w", &["WRITE", "PX", "5000"]);
    acq(&mut c, "wl", "w", &["READ", "PX", "30000"]);
    let t0 = server_ms(&mut c);
    assert_eq!(
        c.cmd(&["RWLOCK.RENEW", "wl", "w", "EX", "10"]),
        Reply::Int(1)
    );
    let t1 = server_ms(&mut c);
    deadline_in(
        pexpiretime(&mut c, b"{wl}:w:rwlock_timeout:1"),
        t0,
        t1,
        10000,
        "read",
    );
    deadline_in(pexpiretime(&mut c, b"wl"), t0, t1, 10000, "write");
}

// ---- the queue ----

/// Head-of-line: a WRITE head alone, a READ head with every READ behind it
/// up to the first WRITE; a newcomer READ does not pass a queued writer;
/// LOCK.WAITERS shows `read` / `write`.
fn queue_policy(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        acq(&mut c, "rw", "r0", &["READ", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut waiters: Vec<Client> = Vec::new();
    for (i, (owner, mode)) in [
        ("w1", "WRITE"),
        ("r1", "READ"),
        ("r2", "READ"),
        ("w2", "WRITE"),
        ("r3", "READ"),
    ]
    .iter()
    .enumerate()
    {
        let mut w = s.client();
        w.send(&["RWLOCK.ACQUIRE", "rw", owner, mode, "BLOCK", "0"]);
        wait_waiting(&s, i as i64 + 1);
        waiters.push(w);
        if i == 0 {
            // A writer is queued: a newcomer reader is refused, though the
            // lock is in read mode; a re-entry is never queued.
            assert!(acq(&mut c, "rw", "late", &["READ"]).is_nil());
            assert_eq!(
                acq(&mut c, "rw", "r0", &["READ", "PX", "60000"]),
                Reply::Int(2)
            );
            assert_eq!(rel(&mut c, "rw", "r0", "READ"), Reply::Int(1));
        }
    }
    let shown = c.cmd(&["LOCK.WAITERS", "rw"]);
    let wants: Vec<(&str, &str)> = shown
        .as_array()
        .iter()
        .map(|w| (w.as_array()[1].as_str(), w.as_array()[2].as_str()))
        .collect();
    assert_eq!(
        wants,
        [
            ("w1", "write"),
            ("r1", "read"),
            ("r2", "read"),
            ("w2", "write"),
            ("r3", "read")
        ]
    );
    assert_eq!(info_int(&mut c, "rw", "waiters"), 5);
    // The reader leaves: the writer alone.
    assert_eq!(rel(&mut c, "rw", "r0", "READ"), Reply::Int(0));
    assert_eq!(waiters[0].read_reply(), Reply::Int(1));
    for w in &mut waiters[1..] {
        assert_eq!(w.try_read_reply(Duration::from_millis(50)), None);
    }
    assert_eq!(info(&mut c, "rw").map_get("writer"), Some(&bulk("w1")));
    // The writer leaves: both readers together, not the writer behind them.
    assert_eq!(rel(&mut c, "rw", "w1", "WRITE"), Reply::Int(0));
    assert_eq!(waiters[1].read_reply(), Reply::Int(1));
    assert_eq!(waiters[2].read_reply(), Reply::Int(1));
    assert_eq!(waiters[3].try_read_reply(Duration::from_millis(50)), None);
    assert_eq!(waiters[4].try_read_reply(Duration::from_millis(10)), None);
    assert_eq!(info_int(&mut c, "rw", "readers"), 2);
    assert_eq!(info_int(&mut c, "rw", "waiters"), 2);
    rel(&mut c, "rw", "r1", "READ");
    assert_eq!(waiters[3].try_read_reply(Duration::from_millis(50)), None);
    rel(&mut c, "rw", "r2", "READ");
    assert_eq!(waiters[3].read_reply(), Reply::Int(1));
    assert_eq!(waiters[4].try_read_reply(Duration::from_millis(50)), None);
    rel(&mut c, "rw", "w2", "WRITE");
    assert_eq!(waiters[4].read_reply(), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.WAITERS", "rw"]), Reply::Array(vec![]));
    // A BLOCK that times out answers nil and leaves the queue; a waiter
    // whose connection dies is never granted.
    rel(&mut c, "rw", "r3", "READ");
    assert_eq!(
        acq(&mut c, "rw", "holder", &["WRITE", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut t = s.client();
    assert!(acq(&mut t, "rw", "t", &["READ", "BLOCK", "50"]).is_nil());
    let mut gone = s.client();
    gone.send(&["RWLOCK.ACQUIRE", "rw", "gone", "WRITE", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    drop(gone);
    wait_waiting(&s, 0);
    assert!(info(&mut c, "rw").map_get("writer") == Some(&bulk("holder")));
    rel(&mut c, "rw", "holder", "WRITE");
    assert!(keys(&mut c, "*").is_empty());
    // A writer at the head that times out: the readers it held back go in.
    acq(&mut c, "rw", "r", &["READ", "PX", "60000"]);
    let mut w = s.client();
    w.send(&["RWLOCK.ACQUIRE", "rw", "w", "WRITE", "BLOCK", "150"]);
    wait_waiting(&s, 1);
    let mut r = s.client();
    r.send(&["RWLOCK.ACQUIRE", "rw", "r2", "READ", "BLOCK", "5000"]);
    wait_waiting(&s, 2);
    assert!(w.read_reply().is_nil());
    assert_eq!(
        r.read_reply(),
        Reply::Int(1),
        "{kind}: served when the writer left"
    );
    assert_eq!(info_int(&mut c, "rw", "readers"), 2);
}

/// 20 overlapping native readers arrive over 0.8 s, each holding for 300
/// ms; a writer arrives among them. It waits at most one read hold
/// (measured on the server clock): readers that come after it queue behind
/// it, and are granted, together, after it.
fn twenty_readers_and_a_writer(kind: Kind) {
    const HOLD: i64 = 300;
    let s = Server::start(kind);
    let port = s.port;
    let start = Instant::now();
    let readers: Vec<_> = (0..20)
        .map(|i| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(40 * i as u64));
                let mut c = Client::connect(port);
                let owner = format!("reader{i}");
                let r = c.cmd(&[
                    "RWLOCK.ACQUIRE",
                    "rw",
                    &owner,
                    "READ",
                    "PX",
                    &HOLD.to_string(),
                    "BLOCK",
                    "20000",
                ]);
                (i, r)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    let mut w = s.client();
    send_timed(
        &mut w,
        &["RWLOCK.ACQUIRE", "rw", "writer", "WRITE", "BLOCK", "20000"],
    );
    // In the same event-loop pass as the grant: nobody else holds.
    w.send(&["RWLOCK.INFO", "rw"]);
    let timed = read_timed(&mut w);
    let held = w.read_reply();
    assert_eq!(timed.reply, Reply::Int(1), "{kind}");
    let took = timed.took_ms();
    eprintln!("{kind}: the writer waited {took:.1} ms (one read hold: {HOLD} ms)");
    assert_eq!(held.map_get("readers"), Some(&Reply::Int(0)), "{held:?}");
    assert_eq!(held.map_get("writer"), Some(&bulk("writer")));
    // One read hold, and a generous margin for a loaded machine; readers
    // kept arriving for 0.6 s after it, so without the rule it would wait
    // at least that long plus a hold.
    assert!(
        took <= (HOLD + 250) as f64,
        "{kind}: the writer waited {took} ms"
    );
    // Readers are still coming and queue behind the writer.
    thread::sleep(Duration::from_millis(100));
    assert!(
        lock_stat(&s, "waiting") > 0,
        "{kind}: no reader queued behind the writer"
    );
    assert_eq!(rel(&mut w, "rw", "writer", "WRITE"), Reply::Int(0));
    for r in readers {
        let (i, reply) = r.join().expect("reader thread");
        assert_eq!(reply, Reply::Int(1), "{kind}: reader {i}");
    }
    assert!(start.elapsed() < Duration::from_secs(15));
}

// ---- KEEPALIVE ----

/// A KEEPALIVE reader process killed with SIGKILL: its hold goes within
/// milliseconds and the queued writer gets the lock; then a KEEPALIVE
/// writer process killed the same way hands it to the queued readers.
fn sigkilled_keepalive_reader_and_writer(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut reader = CliHolder::start(s.port);
    assert_eq!(
        reader.cmd("RWLOCK.ACQUIRE rw dying-reader READ PX 30000 KEEPALIVE"),
        "1"
    );
    assert_eq!(
        reader.cmd("RWLOCK.ACQUIRE rw dying-reader READ PX 30000"),
        "2"
    );
    let mut w = s.client();
    w.send(&[
        "RWLOCK.ACQUIRE",
        "rw",
        "writer",
        "WRITE",
        "KEEPALIVE",
        "PX",
        "30000",
        "BLOCK",
        "20000",
    ]);
    wait_waiting(&s, 1);
    let killed = reader.kill9();
    assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
    let delay = killed.elapsed();
    eprintln!("{kind}: SIGKILLed reader -> writer granted in {delay:?}");
    assert!(delay < SECOND, "{kind}: granted {delay:?} after the kill");
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "write"), ("writer:write", "1")])
    );
    assert!(
        keys(&mut c, "{rw}*").is_empty(),
        "the dead reader's timeout keys"
    );
    assert_eq!(info_int(&mut c, "rw", "keepalive"), 1);
    rel(&mut w, "rw", "writer", "WRITE");

    let mut writer = CliHolder::start(s.port);
    assert_eq!(
        writer.cmd("RWLOCK.ACQUIRE rw dying-writer WRITE PX 30000 KEEPALIVE"),
        "1"
    );
    assert_eq!(
        writer.cmd("RWLOCK.ACQUIRE rw dying-writer READ PX 30000"),
        "1"
    );
    let mut r1 = s.client();
    let mut r2 = s.client();
    r1.send(&["RWLOCK.ACQUIRE", "rw", "r1", "READ", "BLOCK", "20000"]);
    wait_waiting(&s, 1);
    r2.send(&["RWLOCK.ACQUIRE", "rw", "r2", "READ", "BLOCK", "20000"]);
    wait_waiting(&s, 2);
    let killed = writer.kill9();
    assert_eq!(r1.read_reply(), Reply::Int(1), "{kind}");
    assert_eq!(r2.read_reply(), Reply::Int(1), "{kind}");
    let delay = killed.elapsed();
    eprintln!("{kind}: SIGKILLed writer -> readers granted in {delay:?}");
    assert!(delay < SECOND, "{kind}: granted {delay:?} after the kill");
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "read"), ("r1", "1"), ("r2", "1")])
    );
    assert_eq!(lock_stat(&s, "keepalive_released"), 2);
}

/// KEEPALIVE ties the owner: every hold of it (both modes, later ones
/// included) is renewed by the server; RENEW without KEEPALIVE unties it,
/// RENEW KEEPALIVE ties it to another connection, whose closing releases
/// every hold.
fn keepalive_ties_every_hold_of_the_owner(kind: Kind) {
    let s = Server::start(kind);
    let mut a = s.client();
    let mut obs = s.client();
    assert_eq!(
        acq(&mut a, "rw", "o", &["WRITE", "PX", "600", "KEEPALIVE"]),
        Reply::Int(1)
    );
    // A later hold without KEEPALIVE: the owner stays tied.
    assert_eq!(
        acq(&mut a, "rw", "o", &["READ", "PX", "600"]),
        Reply::Int(1)
    );
    assert_eq!(acq(&mut obs, "rw", "other", &["READ"]), Reply::Nil);
    assert_eq!(info_int(&mut obs, "rw", "keepalive"), 1);
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        fields(&mut obs, b"rw"),
        map(&[("mode", "write"), ("o", "1"), ("o:write", "1")]),
        "{kind}: two and a half leases later"
    );
    assert!(
        pttl(&mut obs, tkey("o", 1).as_bytes()) > 0,
        "the read hold renewed too"
    );
    // Untied: plain leases again, they lapse.
    assert_eq!(
        obs.cmd(&["RWLOCK.RENEW", "rw", "o", "PX", "600"]),
        Reply::Int(1)
    );
    assert_eq!(info_int(&mut obs, "rw", "keepalive"), 0);
    // Tied again, from another connection, which then closes.
    let mut b = s.client();
    assert_eq!(
        b.cmd(&["RWLOCK.RENEW", "rw", "o", "PX", "600", "KEEPALIVE"]),
        Reply::Int(1)
    );
    assert_eq!(info_int(&mut obs, "rw", "keepalive"), 1);
    assert_eq!(lock_stat(&s, "tied"), 1);
    let mut w = s.client();
    w.send(&["RWLOCK.ACQUIRE", "rw", "next", "WRITE", "BLOCK", "5000"]);
    wait_waiting(&s, 1);
    drop(b);
    assert_eq!(w.read_reply(), Reply::Int(1), "{kind}: every hold released");
    assert_eq!(
        fields(&mut obs, b"rw"),
        map(&[("mode", "write"), ("next:write", "1")])
    );
    assert!(keys(&mut obs, "{rw}*").is_empty());
    // KEEPALIVE in a script is an error; inside MULTI it ties to the MULTI's
    // connection; BLOCK inside MULTI answers at once.
    let r = obs.cmd(&[
        "EVAL",
        "return redis.call('RWLOCK.ACQUIRE', KEYS[1], 'o', 'READ', 'KEEPALIVE')",
        "1",
        "s",
    ]);
    assert!(
        r.is_error() && format!("{r:?}").contains("KEEPALIVE"),
        "{r:?}"
    );
    let mut m = s.client();
    m.cmd(&["MULTI"]);
    m.cmd(&["RWLOCK.ACQUIRE", "mk", "o", "READ", "KEEPALIVE"]);
    m.cmd(&["RWLOCK.ACQUIRE", "rw", "o", "READ", "BLOCK", "0"]);
    let exec = m.cmd(&["EXEC"]);
    assert_eq!(exec.as_array()[0], Reply::Int(1));
    assert!(exec.as_array()[1].is_nil(), "{exec:?}");
    assert_eq!(info_int(&mut obs, "mk", "keepalive"), 1);
    drop(m);
    assert!(wait_until(5 * SECOND, || obs.cmd(&["EXISTS", "mk"]) == Reply::Int(0)));
}

// ---- Redisson ----

/// A Redisson reader whose process died (no watchdog renews it) does not
/// hold a native writer off past its hold's deadline, even when the hash
/// outlives it (Redisson's write release leaves the hash's TTL as it was);
/// and nobody has to call: the lock is freed at that deadline for Redisson
/// writers too.
fn crashed_redisson_reader_does_not_hold_off_a_writer(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut red = RedissonRw::new(s.client(), "9a8b7c6d-0000-4000-8000-000000000001");
    // The plain case: a reader with a 400 ms lease, then nothing.
    assert_eq!(red.read_lock(b"rw", 1, 400), None);
    let deadline = pexpiretime(
        &mut c,
        format!("{{rw}}:{}:rwlock_timeout:1", red.owner(1)).as_bytes(),
    );
    let mut w = s.client();
    send_timed(
        &mut w,
        &["RWLOCK.ACQUIRE", "rw", "native", "WRITE", "BLOCK", "10000"],
    );
    let t = read_timed(&mut w);
    assert_eq!(t.reply, Reply::Int(1), "{kind}");
    let granted_ms = t.answered_us / 1000;
    assert!(
        granted_ms > deadline,
        "{kind}: granted before the reader's deadline"
    );
    assert!(
        granted_ms <= deadline + 250,
        "{kind}: granted {} ms after the reader's deadline",
        granted_ms - deadline
    );
    rel(&mut c, "rw", "native", "WRITE");

    // The hash outlives the read hold: a Redisson writer downgrades (its
    // read hold: 300 ms) and releases its write hold (the hash keeps the
    // write lease, 20 s), then dies.
    assert_eq!(red.write_lock(b"rw", 2, 20000), None);
    assert_eq!(red.read_lock(b"rw", 2, 300), None);
    assert_eq!(red.write_unlock(b"rw", 2), Some(true));
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "read"), (&red.owner(2), "1")])
    );
    let deadline = pexpiretime(
        &mut c,
        format!("{{rw}}:{}:rwlock_timeout:1", red.owner(2)).as_bytes(),
    );
    // The module saw the scripts' writes to the timeout key and repairs
    // the hash's lease: in read mode, its latest live hold's deadline.
    assert!(
        wait_until(SECOND, || pexpiretime(&mut c, b"rw") == deadline),
        "{kind}: the hash lives until {}, its last hold until {deadline}",
        pexpiretime(&mut c, b"rw")
    );
    send_timed(
        &mut w,
        &["RWLOCK.ACQUIRE", "rw", "native", "WRITE", "BLOCK", "10000"],
    );
    let t = read_timed(&mut w);
    assert_eq!(t.reply, Reply::Int(1), "{kind}");
    let granted_ms = t.answered_us / 1000;
    assert!(
        granted_ms > deadline && granted_ms <= deadline + 250,
        "{kind}: granted at {granted_ms}, the dead reader's deadline {deadline}"
    );
    rel(&mut c, "rw", "native", "WRITE");

    // Nobody calls: the lock is gone at the deadline, and a Redisson
    // writer (which only looks at `mode`) gets it.
    assert_eq!(red.write_lock(b"rw", 3, 20000), None);
    assert_eq!(red.read_lock(b"rw", 3, 300), None);
    assert_eq!(red.write_unlock(b"rw", 3), Some(true));
    let deadline = pexpiretime(
        &mut c,
        format!("{{rw}}:{}:rwlock_timeout:1", red.owner(3)).as_bytes(),
    );
    assert!(wait_until(3 * SECOND, || c.cmd(&["EXISTS", "rw"]) == Reply::Int(0)));
    let gone = server_ms(&mut c);
    assert!(gone > deadline, "{kind}: freed before the deadline");
    assert!(
        gone <= deadline + 500,
        "{kind}: freed {} ms late",
        gone - deadline
    );
    assert_eq!(red.write_lock(b"rw", 4, 1000), None);
}

/// Redisson clients and native callers share read and write locks both
/// ways: readers of both kinds overlap, each kind's writer waits for the
/// other's readers and excludes them, Redisson's releases serve the native
/// queue, native releases wake Redisson subscribers, the read watchdog's
/// renewal is seen.
fn redisson_and_native_share_locks(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut red = RedissonRw::new(s.client(), "5e1f2a3b-0000-4000-8000-0000000000aa");
    let mut sub = Subscriber::new(&s, false, CHANNEL.as_bytes());
    // Readers of both kinds share read mode.
    assert_eq!(red.read_lock(b"rw", 1, 30000), None);
    assert_eq!(acq(&mut c, "rw", "native-r", &["READ"]), Reply::Int(1));
    assert_eq!(info_int(&mut c, "rw", "readers"), 2);
    // Neither kind's writer gets in.
    assert!(red.write_lock(b"rw", 2, 30000).is_some());
    let mut w = s.client();
    w.send(&[
        "RWLOCK.ACQUIRE",
        "rw",
        "native-w",
        "WRITE",
        "BLOCK",
        "10000",
    ]);
    wait_waiting(&s, 1);
    // Redisson's release of its reader: the native reader still holds.
    assert_eq!(red.read_unlock(b"rw", 1), Some(false));
    assert_eq!(w.try_read_reply(Duration::from_millis(100)), None);
    // The native reader's release: the native writer.
    assert_eq!(rel(&mut c, "rw", "native-r", "READ"), Reply::Int(0));
    assert_eq!(w.read_reply(), Reply::Int(1));
    sub.expect_silence("handed to the native writer");
    // The native writer excludes Redisson's readers and writers.
    assert!(red.read_lock(b"rw", 3, 30000).is_some());
    assert!(red.write_lock(b"rw", 3, 30000).is_some());
    // Its release wakes Redisson's subscribers (`1`: everyone).
    assert_eq!(rel(&mut w, "rw", "native-w", "WRITE"), Reply::Int(0));
    sub.expect("1", "the native writer's release");

    // A Redisson writer: native readers and writers wait, and its release
    // (a script: DEL and its own publish) serves the native queue at once.
    assert_eq!(red.write_lock(b"rw", 4, 30000), None);
    assert!(acq(&mut c, "rw", "native-r", &["READ"]).is_nil());
    let mut r = s.client();
    send_timed(
        &mut r,
        &["RWLOCK.ACQUIRE", "rw", "native-r", "READ", "BLOCK", "10000"],
    );
    wait_waiting(&s, 1);
    assert_eq!(red.write_unlock(b"rw", 4), Some(true));
    let t = read_timed(&mut r);
    assert_eq!(t.reply, Reply::Int(1), "{kind}");
    sub.expect("1", "Redisson's own publish");
    // A Redisson reader enters a native read lock; Redisson readers read
    // only `mode`, so they pass queued native writers (README).
    w.send(&[
        "RWLOCK.ACQUIRE",
        "rw",
        "native-w",
        "WRITE",
        "BLOCK",
        "10000",
    ]);
    wait_waiting(&s, 1);
    assert_eq!(red.read_lock(b"rw", 5, 30000), None);
    assert_eq!(rel(&mut c, "rw", "native-r", "READ"), Reply::Int(0));
    assert_eq!(w.try_read_reply(Duration::from_millis(100)), None);
    // The read watchdog renews its holds; the module follows the new lease.
    assert!(red.read_renew(b"rw", 5, 60000));
    let ttl = info_int(&mut c, "rw", "ttl");
    assert!(ttl > 59000, "{ttl}");
    assert_eq!(red.read_unlock(b"rw", 5), Some(true));
    assert_eq!(
        w.read_reply(),
        Reply::Int(1),
        "{kind}: Redisson's last reader left"
    );
    // A native owner named as Redisson names them releases Redisson's hold
    // and the other way round: one layout.
    rel(&mut w, "rw", "native-w", "WRITE");
    assert_eq!(red.read_lock(b"rw", 6, 30000), None);
    assert_eq!(rel(&mut c, "rw", &red.owner(6), "READ"), Reply::Int(0));
    assert!(keys(&mut c, "*").is_empty());
    assert_eq!(acq(&mut c, "rw", &red.owner(7), &["READ"]), Reply::Int(1));
    assert_eq!(red.read_unlock(b"rw", 7), Some(true));
    assert!(keys(&mut c, "*").is_empty());
}

/// A read hold's timeout key deleted by someone else ends that hold: the
/// event on the timeout key is mapped back to its lock, and the queue is
/// served at once (not at the hold's 60 s lease).
fn timeout_key_events_map_back_to_the_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "r", &["READ", "PX", "60000"]);
    acq(&mut c, "u:{1}:rw", "r", &["READ", "PX", "60000"]);
    for (key, tk) in [
        ("rw", tkey("r", 1)),
        ("u:{1}:rw", "u:{1}:rw:r:rwlock_timeout:1".into()),
    ] {
        let mut w = s.client();
        w.send(&["RWLOCK.ACQUIRE", key, "w", "WRITE", "BLOCK", "10000"]);
        wait_waiting(&s, 1);
        let at = Instant::now();
        assert_eq!(c.cmd(&["DEL", &tk]), Reply::Int(1));
        assert_eq!(w.read_reply(), Reply::Int(1), "{kind} {key}");
        assert!(at.elapsed() < SECOND, "{kind}: {:?}", at.elapsed());
        assert_eq!(
            fields(&mut c, key.as_bytes()),
            map(&[("mode", "write"), ("w:write", "1")])
        );
    }
    // DEL of the lock itself serves the queue too, and so does FLUSHALL.
    let mut w = s.client();
    w.send(&["RWLOCK.ACQUIRE", "rw", "w2", "READ", "BLOCK", "10000"]);
    wait_waiting(&s, 1);
    c.cmd(&["DEL", "rw"]);
    assert_eq!(w.read_reply(), Reply::Int(1));
    w.send(&["RWLOCK.ACQUIRE", "rw", "w3", "WRITE", "BLOCK", "10000"]);
    wait_waiting(&s, 1);
    c.cmd(&["FLUSHALL"]);
    assert_eq!(w.read_reply(), Reply::Int(1));
}

/// A grant whose client is gone before its answer went out (here `CLIENT
/// UNBLOCK ... ERROR` in the same event-loop turn as the release) is
/// taken back, and the lock moves on to the next waiter.
fn undelivered_grant_is_taken_back(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "h", &["WRITE"]);
    let mut w1 = s.client();
    let id = w1.id();
    w1.send(&["RWLOCK.ACQUIRE", "rw", "w1", "READ", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    let mut w2 = s.client();
    w2.send(&["RWLOCK.ACQUIRE", "rw", "w2", "WRITE", "BLOCK", "0"]);
    wait_waiting(&s, 2);
    let id = id.to_string();
    c.send_pipeline(&[
        &["RWLOCK.RELEASE", "rw", "h", "WRITE"][..],
        &["CLIENT", "UNBLOCK", &id, "ERROR"],
    ]);
    assert_eq!(c.read_reply(), Reply::Int(0));
    assert_eq!(c.read_reply(), Reply::Int(1));
    let r = w1.read_reply();
    assert_eq!(r.err_code(), Some("UNBLOCKED"), "{kind}: {r:?}");
    assert_eq!(w2.read_reply(), Reply::Int(1), "{kind}: the lock moved on");
    assert_eq!(
        fields(&mut c, b"rw"),
        map(&[("mode", "write"), ("w2:write", "1")])
    );
    assert!(keys(&mut c, "{rw}*").is_empty());
}

/// MODULE UNLOAD succeeds while RW and multi-key locks are held (no
/// waiter, tie or replica wait): the module holds no timer for them; they
/// are plain keys that are locks again once it is back. With a waiter it
/// is refused.
fn module_unload_with_locks_held(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "r", &["READ", "PX", "60000"]);
    acq(&mut c, "rw", "r", &["READ", "PX", "30000"]);
    acq(&mut c, "wl", "w", &["WRITE", "PX", "60000"]);
    c.cmd(&["LOCK.MACQUIRE", "2", "a", "b", "m", "PX", "60000"]);
    let mut w = s.client();
    w.send(&["RWLOCK.ACQUIRE", "wl", "x", "READ", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    assert!(c.cmd(&["MODULE", "UNLOAD", "lock"]).is_error());
    drop(w);
    wait_waiting(&s, 0);
    let before = keyspace(&mut c);
    assert!(
        wait_until(5 * SECOND, || c.cmd(&["MODULE", "UNLOAD", "lock"])
            == Reply::Status("OK".into())),
        "{kind}: MODULE UNLOAD refused with locks held and nobody waiting"
    );
    assert_eq!(keyspace(&mut c), before);
    let path = testkit::server::module_path();
    assert_eq!(
        c.cmd(&args!["MODULE", "LOAD", path.display().to_string()]),
        Reply::Status("OK".into())
    );
    assert!(acq(&mut c, "rw", "x", &["WRITE"]).is_nil());
    assert_eq!(rel(&mut c, "rw", "r", "READ"), Reply::Int(1));
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "b", "a", "m"]),
        Reply::Array(vec![Reply::Int(0), Reply::Int(0)])
    );
}

/// WATCH and client-side caching hear of every write: to the hash, and to
/// a read hold's timeout key.
fn watch_sees_rw_writes(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut other = s.client();
    for (watched, write) in [
        ("rw", &["RWLOCK.ACQUIRE", "rw", "x", "READ"][..]),
        (
            "{rw}:x:rwlock_timeout:1",
            &["RWLOCK.RENEW", "rw", "x", "PX", "5000"],
        ),
        (
            "{rw}:x:rwlock_timeout:1",
            &["RWLOCK.RELEASE", "rw", "x", "READ"],
        ),
    ] {
        c.cmd(&["WATCH", watched]);
        assert!(!other.cmd(write).is_error(), "{write:?}");
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        assert!(
            c.cmd(&["EXEC"]).is_nil(),
            "{kind}: {write:?} did not touch {watched}"
        );
    }
    // A call that changes nothing touches nothing.
    acq(&mut other, "rw", "y", &["WRITE"]);
    c.cmd(&["WATCH", "rw"]);
    assert!(acq(&mut other, "rw", "z", &["READ"]).is_nil());
    info(&mut other, "rw");
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(vec![Reply::Status("PONG".into())])
    );
}

// ---- lifecycle events ----

/// Per owner: `rwlock.acquired` (fresh, not re-entries), then one ending
/// event: `released`, `expired` (at the deadline, never early), `forced`,
/// `closed`; on a hand-off the ending event comes first.
fn lifecycle_events_per_owner(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut ev = Events::new(&s, "rw");
    let quiet = Duration::from_millis(150);
    acq(&mut c, "rw", "a", &["READ"]);
    acq(&mut c, "rw", "a", &["READ"]);
    acq(&mut c, "rw", "b", &["READ"]);
    assert_eq!(ev.drain(quiet), ["rwlock.acquired", "rwlock.acquired"]);
    rel(&mut c, "rw", "a", "READ");
    assert!(ev.drain(quiet).is_empty());
    rel(&mut c, "rw", "a", "READ");
    assert_eq!(ev.drain(quiet), ["rwlock.released"]);
    // Two owners forced.
    acq(&mut c, "rw", "a", &["READ"]);
    c.cmd(&["RWLOCK.FORCERELEASE", "rw"]);
    assert_eq!(
        ev.drain(quiet),
        ["rwlock.acquired", "rwlock.forced", "rwlock.forced"]
    );
    // Expired: fired once the hold lapsed, never before; with a waiter,
    // at the deadline (the module's own timer), and the waiter's
    // `acquired` after it.
    acq(&mut c, "rw", "a", &["READ", "PX", "200"]);
    let deadline = pexpiretime(&mut c, tkey("a", 1).as_bytes());
    let mut b = s.client();
    b.send(&["RWLOCK.ACQUIRE", "rw", "b", "WRITE", "BLOCK", "5000"]);
    assert_eq!(ev.next(quiet).as_deref(), Some("rwlock.acquired"));
    assert_eq!(ev.next(2 * SECOND).as_deref(), Some("rwlock.expired"));
    let seen = server_ms(&mut c);
    assert!(seen > deadline, "{kind}: expired before its deadline");
    assert!(
        seen <= deadline + 250,
        "{kind}: expired {} ms late",
        seen - deadline
    );
    assert_eq!(ev.next(quiet).as_deref(), Some("rwlock.acquired"));
    assert_eq!(b.read_reply(), Reply::Int(1));
    rel(&mut b, "rw", "b", "WRITE");
    assert_eq!(ev.drain(quiet), ["rwlock.released"]);
    // Nobody waiting: the module holds no timer; it hears of the lapse
    // when Redis expires the hash (its lease is the last hold's).
    acq(&mut c, "rw", "a", &["READ", "PX", "200"]);
    let deadline = pexpiretime(&mut c, tkey("a", 1).as_bytes());
    assert_eq!(ev.next(quiet).as_deref(), Some("rwlock.acquired"));
    assert_eq!(ev.next(3 * SECOND).as_deref(), Some("rwlock.expired"));
    assert!(
        server_ms(&mut c) > deadline,
        "{kind}: expired before its deadline"
    );
    // A hand-off: the ending event, then `acquired`.
    acq(&mut c, "rw", "h", &["WRITE"]);
    let mut w = s.client();
    w.send(&["RWLOCK.ACQUIRE", "rw", "next", "READ", "BLOCK", "5000"]);
    wait_waiting(&s, 1);
    rel(&mut c, "rw", "h", "WRITE");
    assert_eq!(w.read_reply(), Reply::Int(1));
    assert_eq!(
        ev.drain(quiet),
        ["rwlock.acquired", "rwlock.released", "rwlock.acquired"]
    );
    // Closed, and a DEL by someone else fires none of ours.
    let mut k = s.client();
    acq(&mut k, "rw", "tied", &["READ", "KEEPALIVE"]);
    drop(k);
    assert_eq!(ev.drain(quiet), ["rwlock.acquired", "rwlock.closed"]);
    c.cmd(&["DEL", "rw"]);
    assert!(ev.drain(quiet).is_empty());
}

// ---- REPLICAS ----

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

/// REPLICAS: the reply waits for the replica; not acknowledged in time,
/// the call is undone exactly (a fresh READ or WRITE, a re-entry, a
/// renewal: every key and deadline as it was) and answered NOREPLICAS; an
/// undone fresh grant publishes as its release would. Fewer replicas than
/// asked for: NOREPLICAS at once, nothing changed. On the replica: every
/// writing command is READONLY, RWLOCK.INFO works, the keys and absolute
/// deadlines are the primary's.
fn replicas_with_exact_undo(kind: Kind) {
    let (p, r) = pair(kind);
    let mut c = p.client();
    let mut rc = r.client();
    assert_eq!(
        acq(
            &mut c,
            "rw",
            "a",
            &["READ", "PX", "60000", "REPLICAS", "1", "5000"]
        ),
        Reply::Int(1)
    );
    assert_eq!(
        acq(&mut c, "rw", "a", &["READ", "PX", "90000"]),
        Reply::Int(2)
    );
    c.cmd(&["WAIT", "1", "5000"]);
    assert_eq!(
        keyspace(&mut rc),
        keyspace(&mut c),
        "{kind}: the replica holds what the primary holds"
    );
    assert_eq!(info_int(&mut rc, "rw", "readholds"), 2);
    for cmd in [
        &["RWLOCK.ACQUIRE", "rw", "b", "READ"][..],
        &["RWLOCK.RELEASE", "rw", "a", "READ"],
        &["RWLOCK.RENEW", "rw", "a"],
        &["RWLOCK.FORCERELEASE", "rw"],
        &["LOCK.MACQUIRE", "1", "m", "o"],
        &["LOCK.MRELEASE", "1", "m", "o"],
    ] {
        assert_eq!(rc.cmd(cmd).err_code(), Some("READONLY"), "{cmd:?}");
    }
    let mut sub = Subscriber::new(&p, false, CHANNEL.as_bytes());
    let before = keyspace(&mut c);
    {
        let _frozen = Frozen::new(&r);
        for (owner, mode) in [("b", "READ"), ("a", "READ")] {
            let got = acq(
                &mut c,
                "rw",
                owner,
                &[mode, "PX", "120000", "REPLICAS", "1", "200"],
            );
            assert_eq!(
                got.err_code(),
                Some("NOREPLICAS"),
                "{kind} {owner}: {got:?}"
            );
            assert_eq!(
                keyspace(&mut c),
                before,
                "{kind}: {owner} {mode} undone exactly"
            );
        }
        let got = c.cmd(&[
            "RWLOCK.RENEW",
            "rw",
            "a",
            "PX",
            "5000",
            "REPLICAS",
            "1",
            "200",
        ]);
        assert_eq!(got.err_code(), Some("NOREPLICAS"), "{got:?}");
        assert_eq!(
            keyspace(&mut c),
            before,
            "{kind}: the renewal undone exactly"
        );
        sub.expect_silence("undone holds that did not free the lock");
        // A fresh WRITE undone: released as its release would, `1`.
        let mut wsub = Subscriber::new(&p, false, &rwlock_channel(b"w"));
        let got = acq(&mut c, "w", "x", &["WRITE", "REPLICAS", "1", "200"]);
        assert_eq!(got.err_code(), Some("NOREPLICAS"), "{got:?}");
        assert_eq!(c.cmd(&["EXISTS", "w"]), Reply::Int(0));
        wsub.expect("1", "an undone fresh WRITE");
        let got = acq(&mut c, "w", "x", &["READ", "REPLICAS", "1", "200"]);
        assert_eq!(got.err_code(), Some("NOREPLICAS"), "{got:?}");
        wsub.expect("0", "an undone fresh READ that freed the lock");
    }
    // More replicas than there are: at once, nothing done.
    let before = keyspace(&mut c);
    let got = acq(&mut c, "rw", "a", &["READ", "REPLICAS", "2", "1000"]);
    assert!(format!("{got:?}").contains("nothing was done"), "{got:?}");
    assert_eq!(keyspace(&mut c), before);
    // REPLICAS n > 0 in MULTI: an error.
    c.cmd(&["MULTI"]);
    c.cmd(&["RWLOCK.ACQUIRE", "rw", "a", "READ", "REPLICAS", "1", "100"]);
    let exec = c.cmd(&["EXEC"]);
    assert_eq!(exec.as_array()[0].err_code(), Some("ERR"), "{exec:?}");
    // A BLOCK waiter's grant waits for the replica too.
    c.cmd(&["RWLOCK.FORCERELEASE", "rw"]);
    acq(&mut c, "rw", "h", &["WRITE"]);
    let mut w = p.client();
    w.send(&[
        "RWLOCK.ACQUIRE",
        "rw",
        "q",
        "READ",
        "BLOCK",
        "5000",
        "REPLICAS",
        "1",
        "3000",
    ]);
    wait_waiting(&p, 1);
    rel(&mut c, "rw", "h", "WRITE");
    assert_eq!(w.read_reply(), Reply::Int(1));
    assert_eq!(
        info_int(&mut rc, "rw", "readholds"),
        1,
        "{kind}: on the replica when answered"
    );
    assert_eq!(info_int(&mut rc, "rw", "waiters"), 0);
    // A stale grant: the waiter's hold is taken from it (FORCERELEASE, a
    // new writer) before the replica acknowledges: it is refused, never
    // told it holds.
    rel(&mut w, "rw", "q", "READ");
    acq(&mut c, "rw", "h", &["WRITE"]);
    w.send(&[
        "RWLOCK.ACQUIRE",
        "rw",
        "q",
        "READ",
        "BLOCK",
        "0",
        "REPLICAS",
        "1",
        "5000",
    ]);
    wait_waiting(&p, 1);
    {
        let _frozen = Frozen::new(&r);
        rel(&mut c, "rw", "h", "WRITE");
        assert!(wait_until(5 * SECOND, || info(&mut c, "rw")
            .map_get("readers")
            == Some(&Reply::Int(1))));
        assert_eq!(c.cmd(&["RWLOCK.FORCERELEASE", "rw"]), Reply::Int(1));
        assert_eq!(acq(&mut c, "rw", "thief", &["WRITE"]), Reply::Int(1));
    }
    let got = w.read_reply();
    assert_eq!(
        got.err_code(),
        Some("NOREPLICAS"),
        "{kind}: a stale grant: {got:?}"
    );
    assert_eq!(info(&mut c, "rw").map_get("writer"), Some(&bulk("thief")));
}

// ---- bad input ----

/// Every malformed call answers a clear error and changes nothing: the
/// keyspace (the hash, its timeout keys, the token counter) is the same
/// afterwards.
fn bad_input_changes_nothing(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    acq(&mut c, "rw", "r", &["READ", "PX", "60000"]);
    acq(&mut c, "rw", "r", &["READ", "PX", "60000"]);
    acq(&mut c, "wl", "w", &["WRITE", "PX", "60000", "TOKEN"]);
    c.cmd(&["SET", "str", "x"]);
    c.cmd(&["LOCK.ACQUIRE", "plain", "o", "PX", "60000"]);
    c.cmd(&["HSET", "junk", "mode", "maybe", "o", "1"]);
    c.cmd(&["HSET", "junk2", "mode", "read", "o", "zero"]);
    let long = "o".repeat(1025);
    let before = keyspace(&mut c);
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["RWLOCK.ACQUIRE"], "ERR", "wrong number of arguments"),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "PX", "10"],
            "ERR",
            "READ or WRITE",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "WRITE"],
            "ERR",
            "syntax",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "READ"],
            "ERR",
            "syntax",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "TOKEN"],
            "ERR",
            "WRITE only",
        ),
        (vec!["RWLOCK.ACQUIRE", "rw", "mode", "READ"], "ERR", ""),
        (vec!["RWLOCK.ACQUIRE", "rw", "x:write", "WRITE"], "ERR", ""),
        (vec!["RWLOCK.ACQUIRE", "rw", "", "READ"], "ERR", "owner"),
        (vec!["RWLOCK.ACQUIRE", "rw", &long, "READ"], "ERR", "owner"),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "PX", "0"],
            "ERR",
            "lease",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "EX", "-1"],
            "ERR",
            "lease",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "PX", "1", "EX", "1"],
            "ERR",
            "",
        ),
        (
            vec![
                "RWLOCK.ACQUIRE",
                "rw",
                "o",
                "READ",
                "PX",
                "9223372036854775807",
            ],
            "ERR",
            "lease",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "BLOCK", "-1"],
            "ERR",
            "BLOCK",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "BLOCK"],
            "ERR",
            "",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "REPLICAS", "1"],
            "ERR",
            "",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "REPLICAS", "-1", "10"],
            "ERR",
            "REPLICAS",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "REPLICAS", "1", "0"],
            "ERR",
            "REPLICAS",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "NX"],
            "ERR",
            "unknown option",
        ),
        (
            vec!["RWLOCK.ACQUIRE", "rw", "o", "READ", "KEEPALIVE", "PX", "50"],
            "ERR",
            "KEEPALIVE",
        ),
        (vec!["RWLOCK.ACQUIRE", "rw", "r", "WRITE"], "NOUPGRADE", ""),
        (vec!["RWLOCK.ACQUIRE", "str", "o", "READ"], "WRONGTYPE", ""),
        (vec!["RWLOCK.ACQUIRE", "plain", "o", "READ"], "NOTLOCK", ""),
        (vec!["RWLOCK.ACQUIRE", "junk", "o", "WRITE"], "NOTLOCK", ""),
        (vec!["RWLOCK.ACQUIRE", "junk2", "o", "READ"], "NOTLOCK", ""),
        (
            vec!["RWLOCK.RELEASE", "rw", "r"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["RWLOCK.RELEASE", "rw", "r", "READ", "x"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["RWLOCK.RELEASE", "rw", "r", "PX"], "ERR", ""),
        (vec!["RWLOCK.RELEASE", "rw", "mode", "READ"], "ERR", ""),
        (vec!["RWLOCK.RELEASE", "rw", "r", "WRITE"], "NOTOWNER", ""),
        (vec!["RWLOCK.RELEASE", "str", "r", "READ"], "WRONGTYPE", ""),
        (vec!["RWLOCK.RELEASE", "plain", "o", "READ"], "NOTLOCK", ""),
        (
            vec!["RWLOCK.RENEW", "rw"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["RWLOCK.RENEW", "rw", "r", "READ"],
            "ERR",
            "unknown option",
        ),
        (vec!["RWLOCK.RENEW", "rw", "r", "PX", "-5"], "ERR", "lease"),
        (vec!["RWLOCK.RENEW", "rw", "x:write"], "ERR", ""),
        (vec!["RWLOCK.RENEW", "str", "r"], "WRONGTYPE", ""),
        (vec!["RWLOCK.RENEW", "junk", "r"], "NOTLOCK", ""),
        (vec!["RWLOCK.INFO"], "ERR", "wrong number of arguments"),
        (
            vec!["RWLOCK.INFO", "rw", "x"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["RWLOCK.INFO", "str"], "WRONGTYPE", ""),
        (vec!["RWLOCK.INFO", "plain"], "NOTLOCK", ""),
        (
            vec!["RWLOCK.FORCERELEASE", "rw", "x"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["RWLOCK.FORCERELEASE", "str"], "WRONGTYPE", ""),
        (vec!["RWLOCK.FORCERELEASE", "junk"], "NOTLOCK", ""),
        (vec!["LOCK.ACQUIRE", "rw", "o"], "NOTLOCK", ""),
        (vec!["LOCK.INFO", "wl"], "NOTLOCK", ""),
        (vec!["LOCK.FORCERELEASE", "rw"], "NOTLOCK", ""),
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
    // Inside a script: KEEPALIVE is an error, REPLICAS too; nothing changed.
    for script in [
        "return redis.call('RWLOCK.ACQUIRE', KEYS[1], 'o', 'READ', 'KEEPALIVE')",
        "return redis.call('RWLOCK.ACQUIRE', KEYS[1], 'o', 'READ', 'REPLICAS', '1', '10')",
        "return redis.call('RWLOCK.RENEW', KEYS[1], 'r', 'KEEPALIVE')",
    ] {
        let r = c.cmd(&["EVAL", script, "1", "rw"]);
        assert!(r.is_error(), "{kind}: {script}: {r:?}");
        assert_eq!(keyspace(&mut c), before);
    }
    // BLOCK in a script answers at once.
    let r = c.cmd(&[
        "EVAL",
        "return redis.call('RWLOCK.ACQUIRE', KEYS[1], 'o', 'WRITE', 'BLOCK', '0')",
        "1",
        "rw",
    ]);
    assert!(r.is_nil(), "{r:?}");
    assert_eq!(keyspace(&mut c), before);
}

// ---- a cluster ----

/// Three primaries: every command routed by its key (MOVED elsewhere);
/// CROSSSLOT for a read hold's timeout key or a token counter in another
/// slot (nothing changed), while a WRITE there that writes no derived key
/// works; the channel is sharded; a queued writer is served; LOCK.MACQUIRE
/// of keys in one slot works and CROSSSLOT otherwise.
fn cluster_three_primaries(kind: Kind) {
    let cluster = Cluster::builder(kind)
        .primaries(3)
        .replicas_per_primary(0)
        .start();
    for key in ["rw", "user:{42}:rw"] {
        let node = cluster.node_for_key(key.as_bytes());
        let mut c = cluster.client_for_key(key.as_bytes());
        let other = (0..3).find(|&i| i != node).expect("another node");
        let mut elsewhere = Client::connect(cluster.port(other));
        let moved = acq(&mut elsewhere, key, "o", &["READ"]);
        assert_eq!(moved.err_code(), Some("MOVED"), "{moved:?}");
        let channel = rwlock_channel(key.as_bytes());
        let mut sub = Subscriber::on(
            cluster.client_for_key(key.as_bytes()),
            false,
            &channel,
            true,
        );
        assert_eq!(
            acq(&mut c, key, "r", &["READ", "PX", "60000"]),
            Reply::Int(1)
        );
        let tk = format!(
            "{}:r:rwlock_timeout:1",
            if key.contains('{') {
                key.to_string()
            } else {
                format!("{{{key}}}")
            }
        );
        assert_eq!(c.cmd(&["GET", &tk]), bulk("1"));
        let mut w = cluster.client_for_key(key.as_bytes());
        w.send(&["RWLOCK.ACQUIRE", key, "w", "WRITE", "BLOCK", "10000"]);
        assert!(wait_until(5 * SECOND, || info_int(&mut c, key, "waiters") == 1));
        assert_eq!(rel(&mut c, key, "r", "READ"), Reply::Int(0));
        assert_eq!(w.read_reply(), Reply::Int(1));
        assert_eq!(rel(&mut w, key, "w", "WRITE"), Reply::Int(0));
        sub.expect("1", "a write release in a cluster: SPUBLISH");
    }
    // Derived keys in another slot: `a}b` (its timeout keys and token
    // counter are `{a}b}:...`), `a{b` (no valid tag).
    for key in ["a}b", "a{b"] {
        let mut c = cluster.client_for_key(key.as_bytes());
        let before = keyspace(&mut c);
        let r = acq(&mut c, key, "o", &["READ"]);
        assert_eq!(r.err_code(), Some("CROSSSLOT"), "{key}: {r:?}");
        let r = acq(&mut c, key, "o", &["WRITE", "TOKEN"]);
        assert_eq!(r.err_code(), Some("CROSSSLOT"), "{key}: {r:?}");
        assert_eq!(keyspace(&mut c), before);
        // A WRITE writes only the hash: fine; a downgrade would write a
        // timeout key elsewhere: CROSSSLOT.
        assert_eq!(acq(&mut c, key, "o", &["WRITE"]), Reply::Int(1));
        assert_eq!(
            acq(&mut c, key, "o", &["READ"]).err_code(),
            Some("CROSSSLOT")
        );
        assert_eq!(rel(&mut c, key, "o", "WRITE"), Reply::Int(0));
    }
    // LOCK.MACQUIRE: one slot.
    let mut c = cluster.client_for_key(b"{t}a");
    assert_eq!(
        c.cmd(&["LOCK.MACQUIRE", "2", "{t}a", "{t}b", "me"]),
        Reply::Array(vec![Reply::Int(1), Reply::Int(1)])
    );
    assert_eq!(
        c.cmd(&[
            "COMMAND",
            "GETKEYS",
            "LOCK.MACQUIRE",
            "2",
            "{t}a",
            "{t}b",
            "me",
            "PX",
            "10"
        ]),
        Reply::Array(vec![bulk("{t}a"), bulk("{t}b")])
    );
    let r = c.cmd(&["LOCK.MACQUIRE", "2", "{t}a", "{u}b", "me"]);
    assert_eq!(r.err_code(), Some("CROSSSLOT"), "{r:?}");
    let r = c.cmd(&["LOCK.MRELEASE", "2", "{t}a", "{u}b", "me"]);
    assert_eq!(r.err_code(), Some("CROSSSLOT"), "{r:?}");
    let mut w = cluster.client_for_key(b"{t}a");
    w.send(&[
        "LOCK.MACQUIRE",
        "2",
        "{t}b",
        "{t}a",
        "you",
        "BLOCK",
        "10000",
    ]);
    assert!(wait_until(5 * SECOND, || c
        .cmd(&["LOCK.WAITERS", "{t}a"])
        .as_array()
        .len()
        == 1));
    assert_eq!(
        c.cmd(&["LOCK.MRELEASE", "2", "{t}a", "{t}b", "me"]),
        Reply::Array(vec![Reply::Int(0), Reply::Int(0)])
    );
    assert_eq!(
        w.read_reply(),
        Reply::Array(vec![Reply::Int(1), Reply::Int(1)])
    );
}

per_kind!(
    layout_is_redissons,
    info_and_replies_in_both_protocols,
    read_release_drops_the_highest_hold,
    downgrade_noupgrade_and_payloads,
    token_with_write_only,
    renew_moves_every_hold_of_the_owner,
    queue_policy,
    twenty_readers_and_a_writer,
    sigkilled_keepalive_reader_and_writer,
    keepalive_ties_every_hold_of_the_owner,
    crashed_redisson_reader_does_not_hold_off_a_writer,
    redisson_and_native_share_locks,
    timeout_key_events_map_back_to_the_lock,
    undelivered_grant_is_taken_back,
    module_unload_with_locks_held,
    watch_sees_rw_writes,
    lifecycle_events_per_owner,
    replicas_with_exact_undo,
    bad_input_changes_nothing,
    cluster_three_primaries,
);
