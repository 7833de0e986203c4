//! README.md's redis-cli examples, run against fresh servers (Redis 7.0 and
//! Valkey 9.1, module loaded): README and behaviour cannot drift apart.
//!
//! The convention README examples follow (tests/readme_doc/ implements it):
//!
//! - A fenced code block (no language, or console/text/sh/shell/bash) is an
//!   example when it has a command line:
//!   - `$ redis-cli -p 6380 CMD args...`: one command on a connection of its
//!     own (as the shell runs it; quote `*`, the shell would expand it).
//!     `$ redis-cli -p 6380` alone starts an interactive redis-cli: a new
//!     connection for the block's terminal. The port must be 6380 (`make
//!     run`'s), and no other redis-cli option is understood.
//!   - `redis> CMD args...` or `127.0.0.1:6380> CMD args...`: a command on
//!     the terminal's connection (opened on first use). Arguments split as
//!     redis-cli splits them; there are no comments (a `#` would be sent).
//!   - Every other line is the reply of the command above it, exactly as
//!     redis-cli prints it on a terminal (RESP2). A few things may differ:
//!     a TTL-like integer (the `ttl` of LOCK.INFO, SEMAPHORE.INFO and
//!     RWLOCK.INFO, TTL/PTTL/..., LOCK.WAITERS's ms left) shown positive
//!     matches any positive value; LOCK.WAITERS's client ids and ms waited
//!     shown ≥ 0 match any value ≥ 0; a fencing token (an integer of 10^15
//!     or more: tokens start from the server clock) matches any such token;
//!     and a UUID matches any UUID (a generated owner), a quoted 32-hex
//!     string any such string (a permit id of SEMAPHORE.LEASE): later
//!     commands that use the shown id get the real one.
//!   - `SUBSCRIBE`/`PSUBSCRIBE` on a terminal shows `Reading messages...
//!     (press Ctrl-C to quit)` and the confirmations; from then on the
//!     terminal takes no command, and the lines of its later blocks are the
//!     messages it receives, in order: exactly those (one more arriving
//!     within 300 ms of the session's end is an error).
//!   - A command with no reply lines is still waiting (a BLOCK): it must not
//!     be answered within 300 ms. Its reply is the first lines of a later
//!     block of the same terminal that start without a command.
//! - An interactive `QUIT` shows no reply (redis-cli prints nothing and
//!   exits); its terminal's next command opens a new connection.
//! - Each example block is a session against a fresh server, unless the
//!   line before it (blank lines allowed) is an HTML comment marker:
//!   - `<!-- readme-test: continue -->`: the same server and connections as
//!     the previous example block;
//!   - `<!-- readme-test: continue terminal 2 -->`: the same, on a second
//!     connection (a second terminal of a walk-through; `terminal 1` goes
//!     back to the first);
//!   - `<!-- readme-test: skip -->`: not checked (say why in the README).
//! - What `make bench` writes between `<!-- bench:begin NAME -->` and
//!   `<!-- bench:end NAME -->` is generated, not an example: skipped.
//! - A block of redis-cli output with no command and no marker, a marker
//!   not followed by a block, `redis-cli` without `-p 6380`, and any other
//!   `$` command in an example are errors: examples are never skipped by
//!   accident. (A block of shell commands without redis-cli, such as
//!   `$ make run`, is not an example.)
//!
//! `readme_examples` runs them session by session, each on a fresh server;
//! `readme_as_one_session` runs them all in order on one server, as a reader
//! going top to bottom against one `make run` would; `checker_*` prove the
//! checker fails when a reply shown is wrong (so a drifted README cannot
//! pass).

mod common;
mod readme_doc;

use common::*;
use readme_doc::{check_all, one_session, parse::StepKind, readme, run_session, sessions};

fn readme_examples(kind: Kind) {
    let sessions = sessions(&readme()).unwrap_or_else(|e| panic!("{e}"));
    // The README has examples in the intro, Quick start, Commands and the
    // walk-through; finding none means the parser lost them.
    assert!(
        sessions.len() >= 5,
        "only {} example sessions found in README.md",
        sessions.len()
    );
    let steps: usize = sessions.iter().map(|s| s.steps.len()).sum();
    eprintln!("{kind}: {} README sessions, {steps} steps", sessions.len());
    let outcome = check_all(&sessions, |s| run_session(s, Server::start(kind).port));
    if let Err(e) = outcome {
        panic!("README.md examples differ from {kind}'s behaviour:\n\n{e}");
    }
}
per_kind!(readme_examples);

/// The README read top to bottom against one `make run` server: every
/// example in order on the same server, so keys one section leaves held
/// must not change another section's replies.
fn readme_as_one_session(kind: Kind) {
    let sessions = sessions(&readme()).unwrap_or_else(|e| panic!("{e}"));
    let whole = one_session(&sessions);
    let server = Server::start(kind);
    if let Err(e) = run_session(&whole, server.port) {
        panic!("README.md read top to bottom on one {kind} server differs:\n\n{e}");
    }
}
per_kind!(readme_as_one_session);

/// A small README in the convention, right and then wrong in one place.
const GOOD: &str = r#"
## Walk-through
```
$ redis-cli -p 6380 LOCK.ACQUIRE k me PX 60000
(integer) 1
redis> LOCK.INFO k
 1) "owner"
 2) "me"
 3) "holds"
 4) (integer) 1
 5) "ttl"
 6) (integer) 12
 7) "waiters"
 8) (integer) 0
 9) "keepalive"
10) (integer) 0
11) "token"
12) (integer) 0
redis> LOCK.ACQUIRE job * EX 60
"0a9d0d8a-1f59-4e6b-9a51-7a1b2c3d4e5f"
redis> LOCK.RELEASE job 0a9d0d8a-1f59-4e6b-9a51-7a1b2c3d4e5f
(integer) 0
```

<!-- readme-test: continue terminal 2 -->
```
$ redis-cli -p 6380
127.0.0.1:6380> LOCK.ACQUIRE k other PX 60000 BLOCK 30000
```

<!-- readme-test: continue -->
```
127.0.0.1:6380> LOCK.RELEASE k me
(integer) 0
```

<!-- readme-test: continue terminal 2 -->
```
(integer) 1
```
"#;

/// Plays `text` against one fresh Redis server per session.
fn play(text: &str) -> Result<(), String> {
    let sessions = sessions(text)?;
    check_all(&sessions, |s| {
        run_session(s, Server::start(Kind::Redis).port)
    })
}

/// `GOOD` with `from` replaced by `to` (which must occur once).
fn variant(from: &str, to: &str) -> String {
    assert_eq!(GOOD.matches(from).count(), 1, "{from:?}");
    GOOD.replace(from, to)
}

#[track_caller]
fn assert_fails(text: &str, expect: &str) {
    match play(text) {
        Ok(()) => panic!("the checker accepted a wrong example:\n{text}"),
        Err(e) => assert!(e.contains(expect), "failed, but not with {expect:?}:\n{e}"),
    }
}

#[test]
fn checker_accepts_a_right_example() {
    let s = sessions(GOOD).unwrap();
    assert_eq!(s.len(), 1, "one session across the four blocks");
    assert!(matches!(
        s[0].steps.last().unwrap().kind,
        StepKind::LateReply { .. }
    ));
    play(GOOD).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn checker_fails_on_a_wrong_reply() {
    assert_fails(
        &variant("4) (integer) 1\n", "4) (integer) 2\n"),
        "README.md:6 (terminal 1): `LOCK.INFO k`: the README shows",
    );
    assert_fails(
        &variant("8) (integer) 0\n", "8) (integer) 0\n9) \"extra\"\n"),
        "the README shows",
    );
    // A late reply that differs.
    assert_fails(
        &variant("```\n(integer) 1\n```", "```\n(nil)\n```"),
        "(sent at line 28)",
    );
    // A UUID is only a UUID where the server sent one.
    assert_fails(
        &variant("2) \"me\"", "2) \"0a9d0d8a-1f59-4e6b-9a51-7a1b2c3d4e5f\""),
        "the README shows",
    );
    // A time left only matches a time left.
    assert_fails(
        &variant(
            "(integer) 1\nredis> LOCK.INFO",
            "(integer) 7\nredis> LOCK.INFO",
        ),
        "the README shows",
    );
}

#[test]
fn checker_fails_on_wrong_waiting() {
    // Shown waiting, but the lock is free: the server answers at once.
    assert_fails(
        &variant(
            "LOCK.ACQUIRE k other PX 60000 BLOCK 30000",
            "LOCK.ACQUIRE free other PX 60000 BLOCK 30000",
        ),
        "shown waiting, but the server replied",
    );
    // Left waiting at the end, but it was served.
    let cut = GOOD
        .rfind("<!-- readme-test: continue terminal 2 -->")
        .unwrap();
    assert_fails(&GOOD[..cut], "left waiting, but the server replied");
}

#[test]
fn checker_refuses_what_a_reader_could_not_run() {
    let parse_err = |text: &str| sessions(text).expect_err(text);
    let e = parse_err("```\n$ redis-cli LOCK.INFO k\n(nil)\n```\n");
    assert!(e.contains("say `redis-cli -p 6380`"), "{e}");
    let e = parse_err("```\n$ redis-cli -p 6380 LOCK.ACQUIRE k * EX 60\n\"x\"\n```\n");
    assert!(e.contains("the shell would expand it"), "{e}");
    let e = parse_err("```\n127.0.0.1:6379> PING\nPONG\n```\n");
    assert!(e.contains("use `redis>`"), "{e}");
    let e = parse_err("```\n$ make run\n$ redis-cli -p 6380 PING\nPONG\n```\n");
    assert!(e.contains("only redis-cli runs in an example"), "{e}");
    assert!(
        sessions("```\n$ make run\n$ cargo build\n```\n")
            .unwrap()
            .is_empty()
    );
    let e = parse_err("```\n(integer) 1\n```\n");
    assert!(e.contains("looks like redis-cli output"), "{e}");
    let e = parse_err("<!-- readme-test: continue -->\ntext\n```\nredis> PING\nPONG\n```\n");
    assert!(e.contains("marker not followed by a code block"), "{e}");
    // An inline comment is sent as arguments, as redis-cli would send it.
    assert_fails(
        "```\nredis> LOCK.ACQUIRE k me PX 1000   # take it\n(integer) 1\n```\n",
        "ERR syntax error",
    );
    // Skipped blocks are not checked.
    assert!(
        sessions("<!-- readme-test: skip -->\n```\nredis> PING\nWRONG\n```\n")
            .unwrap()
            .is_empty()
    );
}

/// A subscribed terminal: the messages shown are checked in order, a
/// missing, wrong or extra message fails, and it takes no command.
#[test]
fn checker_follows_a_subscribed_terminal() {
    let good = r#"
```
$ redis-cli -p 6380
127.0.0.1:6380> CONFIG SET notify-keyspace-events Kd
OK
127.0.0.1:6380> SUBSCRIBE __keyspace@0__:k
Reading messages... (press Ctrl-C to quit)
1) "subscribe"
2) "__keyspace@0__:k"
3) (integer) 1
```

<!-- readme-test: continue terminal 2 -->
```
$ redis-cli -p 6380 LOCK.ACQUIRE k me PX 60000
(integer) 1
$ redis-cli -p 6380 LOCK.RELEASE k me
(integer) 0
```

<!-- readme-test: continue terminal 1 -->
```
1) "message"
2) "__keyspace@0__:k"
3) "lock.acquired"
1) "message"
2) "__keyspace@0__:k"
3) "lock.released"
```
"#;
    play(good).unwrap_or_else(|e| panic!("{e}"));
    let fails = |text: &str, why: &str| {
        let e = play(text).expect_err(text);
        assert!(e.contains(why), "expected `{why}` in: {e}");
    };
    // A wrong message.
    fails(
        &good.replacen("3) \"lock.released\"", "3) \"lock.expired\"", 1),
        "3) \"lock.expired\"",
    );
    // A message the README does not show.
    let cut = good.rfind("1) \"message\"").unwrap();
    fails(
        &format!("{}```\n", &good[..cut]),
        "a message the README does not show",
    );
    // redis-cli's line first.
    fails(
        &good.replacen("Reading messages... (press Ctrl-C to quit)\n", "", 1),
        "Reading messages",
    );
    // No command once subscribed.
    fails(
        &good.replacen(
            "3) (integer) 1\n```",
            "3) (integer) 1\n127.0.0.1:6380> PING\nPONG\n```",
            1,
        ),
        "takes no command",
    );
}

/// Permit ids of SEMAPHORE.LEASE are random: any quoted 32-hex id matches
/// one, and a later command that uses the shown id sends the real one.
#[test]
fn checker_matches_permit_ids() {
    let text = r#"
```
redis> SEMAPHORE.CREATE pool 2
(integer) 1
redis> SEMAPHORE.LEASE pool COUNT 2 PX 60000
1) "0123456789abcdef0123456789abcdef"
2) "fedcba9876543210fedcba9876543210"
redis> SEMAPHORE.RETURN pool fedcba9876543210fedcba9876543210
(integer) 1
```
"#;
    play(text).unwrap_or_else(|e| panic!("{e}"));
    // An id the server did not hand out is sent as written: refused.
    assert_fails(
        &text.replace(
            "RETURN pool fedcba9876543210fedcba9876543210",
            "RETURN pool 00000000000000000000000000000000",
        ),
        "NOTOWNER",
    );
    // A permit id is only a permit id where the server sent one.
    assert_fails(
        &text.replace(
            "(integer) 1\nredis> SEMAPHORE.LEASE",
            "\"0123456789abcdef0123456789abcdef\"\nredis> SEMAPHORE.LEASE",
        ),
        "the README shows",
    );
}

/// LOCK.WAITERS: client ids and ms waited match any value ≥ 0, ms left any
/// positive value; the rest is exact.
#[test]
fn checker_matches_lock_waiters() {
    let text = r#"
```
redis> LOCK.ACQUIRE w holder PX 60000
(integer) 1
```

<!-- readme-test: continue terminal 2 -->
```
redis> LOCK.ACQUIRE w next BLOCK 20000
```

<!-- readme-test: continue terminal 3 -->
```
redis> LOCK.ACQUIRE w * BLOCK 0
```

<!-- readme-test: continue terminal 1 -->
```
redis> LOCK.WAITERS w
1) 1) (integer) 7
   2) "next"
   3) "lock"
   4) (integer) 0
   5) (integer) 19000
2) 1) (integer) 8
   2) (nil)
   3) "lock"
   4) (integer) 1234
   5) (integer) -1
redis> LOCK.FORCERELEASE w
(integer) 1
```

<!-- readme-test: continue terminal 2 -->
```
(integer) 1
```

<!-- readme-test: continue terminal 1 -->
```
redis> LOCK.FORCERELEASE w
(integer) 1
```

<!-- readme-test: continue terminal 3 -->
```
"2f0d8a58-5b0e-4c39-9d3e-0c7a4b7c6f11"
```
"#;
    play(text).unwrap_or_else(|e| panic!("{e}"));
    assert_fails(
        &text.replace("2) \"next\"", "2) \"other\""),
        "the README shows",
    );
    assert_fails(
        &text.replace(
            "3) \"lock\"\n   4) (integer) 0",
            "3) \"read\"\n   4) (integer) 0",
        ),
        "the README shows",
    );
    // Waiting forever is exact; a time left is not forever.
    assert_fails(
        &text.replace("(integer) -1", "(integer) 5"),
        "the README shows",
    );
    assert_fails(
        &text.replace("(integer) 19000", "(integer) -1"),
        "the README shows",
    );
}

/// A region `make bench` generates is skipped, whatever it holds; a region
/// left open is an error.
#[test]
fn checker_skips_bench_regions() {
    let region = "<!-- bench:begin t -->\n```\nredis> PING\nWRONG\n```\n<!-- bench:end t -->\n";
    let text = format!("```\nredis> PING\nPONG\n```\n\n{region}\n```\nredis> ECHO a\n\"a\"\n```\n");
    let s = sessions(&text).unwrap();
    assert_eq!(s.len(), 2);
    play(&text).unwrap_or_else(|e| panic!("{e}"));
    let e = sessions("<!-- bench:begin t -->\nplaceholder\n").expect_err("open region");
    assert!(e.contains("without its `bench:end t`"), "{e}");
}
