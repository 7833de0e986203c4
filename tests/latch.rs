//! LATCH.* (SPEC Part 2, "Count-down latches"): RCountDownLatch's layout
//! and channel, replies in RESP2 and RESP3, effects-only replication,
//! events, bad input changing nothing, and LATCH.AWAIT ... BLOCK waiters
//! all answered whatever opens the latch (COUNTDOWN, DEL, a SET to 0, a
//! Redisson countDown, expiry at the key's deadline, FLUSH*, SWAPDB), on
//! primaries and on replicas. Redis 7.0 and Valkey 9.1.

mod common;
mod family;

use std::time::Duration;

use common::*;
use family::*;
use testkit::redisson;

const CH: &[u8] = b"redisson_countdownlatch__channel__{l}";

/// A connection waiting in `LATCH.AWAIT key BLOCK 0`, once queued.
#[track_caller]
fn awaiting(s: &Server, key: &str, resp3: bool) -> Client {
    let before = lock_stat(s, "waiting");
    let mut w = if resp3 { s.client_resp3() } else { s.client() };
    w.send(&["LATCH.AWAIT", key, "BLOCK", "0"]);
    wait_waiting(s, before + 1);
    w
}

/// The replies, the layout (a plain string, no TTL) and the channel:
/// `1` when a count is set, `0` when the latch opens.
fn replies_layout_and_channel(kind: Kind) {
    let s = Server::start(kind);
    let mut sub2 = s.client();
    let mut sub3 = s.client_resp3();
    subscribe(&mut sub2, CH);
    subscribe(&mut sub3, CH);
    for resp3 in [false, true] {
        let mut c = if resp3 { s.client_resp3() } else { s.client() };
        let nil = if resp3 { Reply::Null } else { Reply::Nil };
        // Open when absent.
        assert_eq!(c.cmd(&["LATCH.AWAIT", "l"]), Reply::Int(1), "{kind}");
        assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(0));
        assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
        assert_eq!(
            c.cmd(&["EXISTS", "l"]),
            Reply::Int(0),
            "{kind}: nothing created"
        );
        assert_eq!(c.cmd(&["LATCH.CREATE", "l", "2"]), Reply::Int(1), "{kind}");
        for sub in [&mut sub2, &mut sub3] {
            assert_eq!(message(sub, CH, SECOND), b"1", "{kind}: CREATE");
        }
        assert_eq!(c.cmd(&["GET", "l"]), bulk("2"));
        assert_eq!(c.cmd(&["PTTL", "l"]), Reply::Int(-1));
        assert_eq!(c.cmd(&["LATCH.CREATE", "l", "5"]), Reply::Int(0));
        assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(2));
        assert_eq!(c.cmd(&["LATCH.AWAIT", "l"]), nil, "{kind}");
        assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(1));
        silent(&mut sub2, 20, "a count down that does not open");
        assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
        for sub in [&mut sub2, &mut sub3] {
            assert_eq!(message(sub, CH, SECOND), b"0", "{kind}: opened");
        }
        assert_eq!(
            c.cmd(&["EXISTS", "l"]),
            Reply::Int(0),
            "{kind}: deleted at 0"
        );
        assert_eq!(c.cmd(&["LATCH.AWAIT", "l"]), Reply::Int(1));
        // A count set by hand at 0 or below: open; COUNTDOWN deletes it.
        c.cmd(&["SET", "l", "0"]);
        assert_eq!(c.cmd(&["LATCH.AWAIT", "l"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(0));
        c.cmd(&["SET", "l", "-3"]);
        assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(-3));
        assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
        assert_eq!(c.cmd(&["EXISTS", "l"]), Reply::Int(0));
        for sub in [&mut sub2, &mut sub3] {
            assert_eq!(message(sub, CH, SECOND), b"0", "{kind}");
        }
        // A latch keeps a TTL someone gave it while it counts down.
        c.cmd(&["LATCH.CREATE", "l", "3"]);
        for sub in [&mut sub2, &mut sub3] {
            message(sub, CH, SECOND);
        }
        c.cmd(&["PEXPIRE", "l", "100000"]);
        let deadline = c.cmd(&["PEXPIRETIME", "l"]).as_int();
        assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(2));
        assert_eq!(c.cmd(&["PEXPIRETIME", "l"]).as_int(), deadline, "{kind}");
        c.cmd(&["DEL", "l"]);
    }
    // A key with a hash tag: braces are always added to the channel.
    let mut tagged = s.client();
    subscribe(&mut tagged, b"redisson_countdownlatch__channel__{{t}:l}");
    let mut c = s.client();
    assert_eq!(c.cmd(&["LATCH.CREATE", "{t}:l", "1"]), Reply::Int(1));
    assert_eq!(
        message(
            &mut tagged,
            b"redisson_countdownlatch__channel__{{t}:l}",
            SECOND
        ),
        b"1"
    );
    assert_eq!(
        lock_stat(&s, "latch_opened"),
        4,
        "{kind}: {}",
        s.info("lock")
    );
}

/// Every queued AWAIT is answered 1 when COUNTDOWN opens the latch (wake-
/// all, RESP2 and RESP3), after `0` is published; `latch.opened` fires.
fn countdown_answers_every_waiter(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut sub = s.client();
    subscribe(&mut sub, CH);
    c.cmd(&["LATCH.CREATE", "l", "2"]);
    assert_eq!(message(&mut sub, CH, SECOND), b"1");
    let mut ws: Vec<Client> = (0..4).map(|i| awaiting(&s, "l", i % 2 == 1)).collect();
    let list = c.cmd(&["LOCK.WAITERS", "l"]);
    assert_eq!(list.as_array().len(), 4, "{kind}");
    for row in list.as_array() {
        assert_eq!(row.as_array()[2], bulk("await"), "{kind}: {row:?}");
        assert!(row.as_array()[1].is_nil());
    }
    let mut e = Events::listen(&s);
    assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(1));
    for w in &mut ws {
        assert!(
            w.try_read_reply(Duration::from_millis(20)).is_none(),
            "{kind}"
        );
    }
    assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    for w in &mut ws {
        assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
    }
    assert_eq!(message(&mut sub, CH, SECOND), b"0");
    assert_eq!(
        e.since(&mut c),
        ev(&[("decrby", "l"), ("del", "l"), ("latch.opened", "l")]),
        "{kind}"
    );
    assert_eq!(lock_stat(&s, "waiting"), 0);
    assert_eq!(lock_stat(&s, "latch_awaits_answered"), 4);
    // A timeout: nil, and the latch stays as it is.
    c.cmd(&["LATCH.CREATE", "l", "1"]);
    let mut t2 = s.client();
    let mut t3 = s.client_resp3();
    assert_eq!(t2.cmd(&["LATCH.AWAIT", "l", "BLOCK", "20"]), Reply::Nil);
    assert_eq!(t3.cmd(&["LATCH.AWAIT", "l", "block", "20"]), Reply::Null);
    assert_eq!(c.cmd(&["LATCH.COUNT", "l"]), Reply::Int(1));
    // BLOCK is ignored inside MULTI and scripts.
    c.cmd(&["MULTI"]);
    c.cmd(&["LATCH.AWAIT", "l", "BLOCK", "0"]);
    assert!(c.cmd(&["EXEC"]).as_array()[0].is_nil(), "{kind}");
    let r = c.cmd(&[
        "EVAL",
        "return redis.call('LATCH.AWAIT', KEYS[1], 'BLOCK', '0')",
        "1",
        "l",
    ]);
    assert!(r.is_nil(), "{kind}: {r:?}");
}

/// Whatever opens the latch answers its waiters: DEL, UNLINK, a SET to 0
/// or below, a Redisson countDown, FLUSHALL, FLUSHDB, SWAPDB, and a DEL
/// followed at once by a new count (the opening is not missed); on the
/// server's clock within 200 ms of the change.
fn every_opening_answers(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let ch = redisson::latch_channel(b"l");
    let actions: Vec<(&str, Vec<Vec<Vec<u8>>>)> = vec![
        ("DEL", vec![args!["DEL", "l"].to_vec()]),
        ("UNLINK", vec![args!["UNLINK", "l"].to_vec()]),
        ("SET 0", vec![args!["SET", "l", "0"].to_vec()]),
        ("SET -1", vec![args!["SET", "l", "-1"].to_vec()]),
        (
            "Redisson countDown",
            vec![
                args![
                    "EVAL",
                    redisson::LATCH_COUNT_DOWN,
                    "2",
                    "l",
                    ch.clone(),
                    "0",
                    "PUBLISH"
                ]
                .to_vec(),
            ],
        ),
        ("FLUSHALL", vec![args!["FLUSHALL"].to_vec()]),
        ("FLUSHDB", vec![args!["FLUSHDB"].to_vec()]),
        ("SWAPDB", vec![args!["SWAPDB", "0", "1"].to_vec()]),
        (
            "DEL then a new count",
            vec![
                args!["MULTI"].to_vec(),
                args!["DEL", "l"].to_vec(),
                args!["LATCH.CREATE", "l", "1"].to_vec(),
                args!["EXEC"].to_vec(),
            ],
        ),
    ];
    for (name, cmds) in &actions {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["LATCH.CREATE", "l", "1"]);
        let mut w = s.client();
        send_timed(&mut w, &["LATCH.AWAIT", "l", "BLOCK", "0"]);
        wait_waiting(&s, 1);
        let before = server_ms(&mut c);
        for cmd in cmds {
            let r = c.cmd(cmd);
            assert!(!r.is_error(), "{kind}: {name}: {r:?}");
        }
        let got = read_timed(&mut w);
        assert_eq!(got.reply, Reply::Int(1), "{kind}: {name}");
        let late = got.answered_us / 1000 - before;
        assert!(late < 200, "{kind}: {name} took {late} ms");
    }
    // Redisson's trySetCount on a missing key closes it again: nobody is
    // answered until it opens.
    c.cmd(&["FLUSHALL"]);
    assert_eq!(
        c.cmd(&args![
            "EVAL",
            redisson::LATCH_TRY_SET_COUNT,
            "2",
            "l",
            ch,
            "1",
            "2",
            "PUBLISH"
        ]),
        Reply::Int(1)
    );
    let mut w = awaiting(&s, "l", false);
    c.cmd(&args![
        "EVAL",
        redisson::LATCH_COUNT_DOWN,
        "2",
        "l",
        ch,
        "0",
        "PUBLISH"
    ]);
    assert!(
        w.try_read_reply(Duration::from_millis(50)).is_none(),
        "{kind}"
    );
    c.cmd(&args![
        "EVAL",
        redisson::LATCH_COUNT_DOWN,
        "2",
        "l",
        ch,
        "0",
        "PUBLISH"
    ]);
    assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
}

/// A latch whose key expires opens at its deadline: its waiters are
/// answered then, never before, at most 50 ms late (server clock).
fn expiry_opens_at_the_deadline(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    for ms in [100, 250] {
        c.cmd(&["LATCH.CREATE", "l", "3"]);
        c.cmd(&["PEXPIRE", "l", &ms.to_string()]);
        let deadline = c.cmd(&["PEXPIRETIME", "l"]).as_int();
        let mut w = s.client();
        send_timed(&mut w, &["LATCH.AWAIT", "l", "BLOCK", "0"]);
        let got = read_timed(&mut w);
        assert_eq!(got.reply, Reply::Int(1), "{kind}");
        let late = got.answered_us / 1000 - deadline;
        assert!(
            (0..=50).contains(&late),
            "{kind}: {ms} ms: answered {late} ms after the deadline"
        );
    }
    // A deadline moved while waiting: answered at the new one.
    c.cmd(&["LATCH.CREATE", "l", "1"]);
    c.cmd(&["PEXPIRE", "l", "100"]);
    let mut w = awaiting(&s, "l", true);
    c.cmd(&["PEXPIRE", "l", "400"]);
    let deadline = c.cmd(&["PEXPIRETIME", "l"]).as_int();
    assert!(
        w.try_read_reply(Duration::from_millis(200)).is_none(),
        "{kind}: not at the old deadline"
    );
    assert_eq!(w.read_reply(), Reply::Int(1));
    assert!(now_ms() >= deadline, "{kind}");
}

/// Bad input: a clear error and nothing changed; NOTLATCH for a string
/// that is not a count, WRONGTYPE for another type.
fn bad_input_changes_nothing(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LATCH.CREATE", "l", "2"]);
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["LATCH.CREATE"], "ERR", "wrong number of arguments"),
        (
            vec!["LATCH.CREATE", "l"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["LATCH.CREATE", "l", "1", "2"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["LATCH.CREATE", "x", "0"], "ERR", "count"),
        (vec!["LATCH.CREATE", "x", "-1"], "ERR", "count"),
        (vec!["LATCH.CREATE", "x", "two"], "ERR", "count"),
        (vec!["LATCH.COUNTDOWN"], "ERR", "wrong number of arguments"),
        (
            vec!["LATCH.COUNTDOWN", "l", "1"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["LATCH.AWAIT"], "ERR", "wrong number of arguments"),
        (vec!["LATCH.AWAIT", "l", "BLOCK"], "ERR", "syntax"),
        (vec!["LATCH.AWAIT", "l", "BLOCK", "-1"], "ERR", "BLOCK"),
        (vec!["LATCH.AWAIT", "l", "BLOCK", "x"], "ERR", "BLOCK"),
        (vec!["LATCH.AWAIT", "l", "PX", "5"], "ERR", "syntax"),
        (
            vec!["LATCH.AWAIT", "l", "BLOCK", "5", "BLOCK", "5"],
            "ERR",
            "syntax",
        ),
        (vec!["LATCH.COUNT"], "ERR", "wrong number of arguments"),
        (
            vec!["LATCH.COUNT", "l", "x"],
            "ERR",
            "wrong number of arguments",
        ),
    ];
    for (cmd, code, text) in &cases {
        let before = [key_state(&mut c, b"l"), key_state(&mut c, b"x")];
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some(*code), "{kind}: {cmd:?} -> {r:?}");
        let Reply::Error(msg) = &r else {
            unreachable!()
        };
        assert!(msg.contains(text), "{kind}: {cmd:?} -> {msg}");
        let after = [key_state(&mut c, b"l"), key_state(&mut c, b"x")];
        assert_eq!(after, before, "{kind}: {cmd:?}");
    }
    c.cmd(&["SET", "n", "many"]);
    c.cmd(&["HSET", "h", "f", "1"]);
    for (key, code) in [("n", "NOTLATCH"), ("h", "WRONGTYPE")] {
        for cmd in [
            &["LATCH.COUNTDOWN", key][..],
            &["LATCH.AWAIT", key],
            &["LATCH.AWAIT", key, "BLOCK", "10"],
            &["LATCH.COUNT", key],
        ] {
            let before = key_state(&mut c, key.as_bytes());
            let r = c.cmd(cmd);
            assert_eq!(r.err_code(), Some(code), "{kind}: {cmd:?} -> {r:?}");
            assert_eq!(key_state(&mut c, key.as_bytes()), before, "{kind}: {cmd:?}");
        }
    }
    assert_eq!(
        c.cmd(&["LATCH.CREATE", "n", "1"]),
        Reply::Int(0),
        "{kind}: a string is there"
    );
    assert_eq!(
        c.cmd(&["LATCH.CREATE", "h", "1"]).err_code(),
        Some("WRONGTYPE")
    );
    // Waiters on a key that becomes something else get its error.
    let mut w = awaiting(&s, "l", false);
    c.cmd(&["SET", "l", "not a count"]);
    assert_eq!(w.read_reply().err_code(), Some("NOTLATCH"), "{kind}");
    // Read-only commands leave the value's encoding alone.
    c.cmd(&["SET", "e", "7"]);
    let enc = c.cmd(&["OBJECT", "ENCODING", "e"]);
    c.cmd(&["LATCH.COUNT", "e"]);
    c.cmd(&["LATCH.AWAIT", "e"]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "e"]), enc, "{kind}");
}

/// Replication carries effects only: SET, DECR, DEL, and the messages
/// (PUBLISH) for replicas' subscribers.
fn stream_carries_effects_only(kind: Kind) {
    let primary = Server::start(kind);
    let mut fake = primary.client();
    fake.send(&["SYNC"]);
    let _rdb = fake.read_sync_payload();
    let mut all = Vec::new();
    let mut p = primary.client();
    let v = |parts: &[&[u8]]| -> Vec<Vec<u8>> { parts.iter().map(|x| x.to_vec()).collect() };
    assert_eq!(p.cmd(&["LATCH.CREATE", "l", "2"]), Reply::Int(1));
    assert_eq!(p.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(1));
    assert_eq!(p.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    // Nothing replicated for no-ops and reads.
    assert_eq!(p.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    assert_eq!(p.cmd(&["LATCH.CREATE", "x", "0"]).err_code(), Some("ERR"));
    p.cmd(&["LATCH.COUNT", "l"]);
    p.cmd(&["LATCH.AWAIT", "l"]);
    p.cmd(&["SET", "marker", "1"]);
    let effects = read_stream_until(&mut fake, "1", &mut all);
    assert_eq!(
        effects,
        vec![
            v(&[b"SET", b"l", b"2"]),
            v(&[b"PUBLISH", CH, b"1"]),
            v(&[b"DECR", b"l"]),
            v(&[b"DEL", b"l"]),
            v(&[b"PUBLISH", CH, b"0"]),
        ],
        "{kind}\n{}",
        show(&all)
    );
}

/// On a replica: LATCH.COUNT and LATCH.AWAIT work (read-only), the writes
/// answer READONLY, and AWAIT ... BLOCK waits there (as XREAD ... BLOCK
/// does): answered when the primary's COUNTDOWN reaches the replica, or at
/// the key's deadline.
fn replicas_read_and_wait(kind: Kind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replica_of(&primary);
    let mut p = primary.client();
    let mut r = replica.client();
    p.cmd(&["LATCH.CREATE", "l", "2"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(r.cmd(&["LATCH.COUNT", "l"]), Reply::Int(2));
    assert!(r.cmd(&["LATCH.AWAIT", "l"]).is_nil());
    assert_eq!(r.cmd(&["LATCH.AWAIT", "none"]), Reply::Int(1));
    for cmd in [&["LATCH.CREATE", "x", "1"][..], &["LATCH.COUNTDOWN", "l"]] {
        assert_eq!(r.cmd(cmd).err_code(), Some("READONLY"), "{kind}: {cmd:?}");
    }
    assert_eq!(r.cmd(&["LATCH.COUNT", "l"]), Reply::Int(2));
    // Waiting on the replica: opened by the primary.
    let mut w2 = awaiting(&replica, "l", false);
    let mut w3 = awaiting(&replica, "l", true);
    assert_eq!(p.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(1));
    assert!(
        w2.try_read_reply(Duration::from_millis(50)).is_none(),
        "{kind}"
    );
    assert_eq!(p.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    assert_eq!(w2.read_reply(), Reply::Int(1), "{kind}");
    assert_eq!(w3.read_reply(), Reply::Int(1), "{kind}");
    // At the key's deadline, as the replica reads it (expired keys read as
    // absent there before the primary's DEL arrives).
    p.cmd(&["LATCH.CREATE", "e", "1"]);
    p.cmd(&["PEXPIRE", "e", "200"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let deadline = r.cmd(&["PEXPIRETIME", "e"]).as_int();
    let mut w = replica.client();
    send_timed(&mut w, &["LATCH.AWAIT", "e", "BLOCK", "0"]);
    let got = read_timed(&mut w);
    assert_eq!(got.reply, Reply::Int(1), "{kind}");
    let late = got.answered_us / 1000 - deadline;
    assert!(
        (0..=50).contains(&late),
        "{kind}: {late} ms after the deadline"
    );
    // A waiter on a replica times out as anywhere.
    p.cmd(&["LATCH.CREATE", "t", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert!(r.cmd(&["LATCH.AWAIT", "t", "BLOCK", "30"]).is_nil());
}

per_kind!(
    replies_layout_and_channel,
    countdown_answers_every_waiter,
    every_opening_answers,
    expiry_opens_at_the_deadline,
    bad_input_changes_nothing,
    stream_carries_effects_only,
    replicas_read_and_wait,
);
