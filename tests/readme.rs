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
//!     redis-cli prints it on a terminal (RESP2). Two things may differ:
//!     a TTL-like integer (LOCK.INFO's `ttl`, TTL/PTTL/...) shown positive
//!     matches any positive value, a fencing token (an integer of 10^15 or
//!     more: tokens start from the server clock) matches any such token, and
//!     a UUID matches any UUID (a generated owner; later commands that use
//!     the shown UUID get the real one).
//!   - A command with no reply lines is still waiting (a BLOCK): it must not
//!     be answered within 300 ms. Its reply is the first lines of a later
//!     block of the same terminal that start without a command.
//!   - `SUBSCRIBE` (or PSUBSCRIBE, SSUBSCRIBE) of one channel shows redis-cli's
//!     `Reading messages... (press Ctrl-C to quit)` and the confirmation;
//!     the terminal then stays in subscribe mode: each later block of it
//!     that starts without a command shows the messages that arrived
//!     meanwhile, and at the end no other message may be waiting.
//! - Each example block is a session against a fresh server, unless the
//!   line before it (blank lines allowed) is an HTML comment marker:
//!   - `<!-- readme-test: continue -->`: the same server and connections as
//!     the previous example block;
//!   - `<!-- readme-test: continue terminal 2 -->`: the same, on a second
//!     connection (a second terminal of a walk-through; `terminal 1` goes
//!     back to the first);
//!   - `<!-- readme-test: skip -->`: not checked (say why in the README).
//! - A block of redis-cli output with no command and no marker, a marker
//!   not followed by a block, `redis-cli` without `-p 6380`, and any other
//!   `$` command in an example are errors: examples are never skipped by
//!   accident. (A block of shell commands without redis-cli, such as
//!   `$ make run`, is not an example.)
//!
//! `readme_examples` runs them; `checker_*` prove the checker fails when a
//! reply shown is wrong (so a drifted README cannot pass).

mod common;
mod readme_doc;

use common::*;
use readme_doc::{check_all, parse::StepKind, readme, run_session, sessions};

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

/// A subscribed terminal: the confirmation, then the messages as they come.
const SUBSCRIBED: &str = r#"
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
$ redis-cli -p 6380 LOCK.FORCERELEASE k
(integer) 1
```

<!-- readme-test: continue terminal 1 -->
```
1) "message"
2) "__keyspace@0__:k"
3) "lock.acquired"
1) "message"
2) "__keyspace@0__:k"
3) "lock.forced"
```
"#;

#[test]
fn checker_follows_a_subscribed_terminal() {
    play(SUBSCRIBED).unwrap_or_else(|e| panic!("{e}"));
    // A message shown that did not come.
    let wrong = SUBSCRIBED.replace("3) \"lock.forced\"", "3) \"lock.expired\"");
    assert_fails(&wrong, "the README shows");
    // A message that came and is not shown.
    let cut = SUBSCRIBED.replace(
        "1) \"message\"\n2) \"__keyspace@0__:k\"\n3) \"lock.forced\"\n",
        "",
    );
    assert_fails(&cut, "left waiting, but the server replied");
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
