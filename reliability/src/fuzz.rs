//! R4: hostile input against a live server.
//!
//! Random LOCK.* command vectors (random arity, binary arguments, NULs, huge
//! and negative numbers, `*`, repeated and misordered options in random
//! case, keys of every type), pipelined in batches, alternating RESP2 and
//! RESP3 connections, sent plain, inside MULTI/EXEC and through
//! `EVAL "return redis.pcall(unpack(ARGV))"`. Every reply must be a
//! well-formed value of the right shape or an error with one of the
//! module's codes (the testkit client panics on anything malformed); the
//! server must never crash or stall, log no panic, and keys outside the
//! fuzzed set must be byte-for-byte untouched. Every kind of answer must
//! come back at least once (see [`SHAPES`]), or the vectors no longer reach
//! every path.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use testkit::{Client, Kind, Reply, Server};

use crate::report::{Section, fmt_int};
use crate::servers;
use testkit::hostile::{Via, describe, judge, seed_keys, vector};
use testkit::rng::Rng;

/// Every kind of answer a run must see at least once: each error code, both
/// integer replies (0/1 and a hold count above 1), nil in RESP2 and RESP3,
/// a generated owner, and LOCK.INFO as a RESP2 array and a RESP3 map.
pub const SHAPES: [&str; 11] = [
    "ERR",
    "WRONGTYPE",
    "NOTOWNER",
    "NOTLOCK",
    "integer 0 or 1",
    "integer above 1",
    "RESP2 nil",
    "RESP3 null",
    "bulk",
    "RESP2 array",
    "RESP3 map",
];

#[derive(Default)]
pub struct Tally {
    pub vectors: u64,
    pub by_reply: BTreeMap<&'static str, u64>,
    /// Which of [`SHAPES`] (and others) came back.
    pub shapes: BTreeSet<&'static str>,
    pub bad: Vec<String>,
    pub multi: u64,
    pub eval: u64,
}

impl Tally {
    fn count(&mut self, r: &Reply) {
        self.shapes.insert(match r {
            Reply::Int(n) if *n > 1 => "integer above 1",
            Reply::Int(_) => "integer 0 or 1",
            Reply::Nil => "RESP2 nil",
            Reply::Null => "RESP3 null",
            Reply::Bulk(_) => "bulk",
            Reply::Array(_) => "RESP2 array",
            Reply::Map(_) => "RESP3 map",
            Reply::Error(e) => SHAPES[..4]
                .iter()
                .find(|code| e.split(' ').next() == Some(code))
                .copied()
                .unwrap_or("other error"),
            _ => "other",
        });
        let kind = match r {
            Reply::Error(e) if e.starts_with("ERR ") => "ERR",
            Reply::Error(e) if e.starts_with("WRONGTYPE") => "WRONGTYPE",
            Reply::Error(e) if e.starts_with("NOTOWNER") => "NOTOWNER",
            Reply::Error(e) if e.starts_with("NOTLOCK") => "NOTLOCK",
            Reply::Error(_) => "other error",
            Reply::Int(_) => "integer",
            Reply::Nil | Reply::Null | Reply::Bool(false) => "nil",
            Reply::Bulk(_) => "generated owner",
            Reply::Array(_) | Reply::Map(_) => "info",
            _ => "other",
        };
        *self.by_reply.entry(kind).or_default() += 1;
    }
}

const SCRIPT: &str = "return redis.pcall(unpack(ARGV))";

/// Sends one batch the given way; judges every reply.
fn batch(c: &mut Client, cmds: &[Vec<Vec<u8>>], via: Via, t: &mut Tally) {
    match via {
        Via::Plain => {
            for cmd in cmds {
                c.send(cmd);
            }
            for cmd in cmds {
                let r = c.read_reply();
                t.count(&r);
                t.bad.extend(judge(cmd, &r, via));
            }
        }
        Via::Multi => {
            t.multi += cmds.len() as u64;
            c.send(&["MULTI"]);
            for cmd in cmds {
                c.send(cmd);
            }
            c.send(&["EXEC"]);
            let m = c.read_reply();
            if m != Reply::Status("OK".into()) {
                t.bad.push(format!("MULTI → {m:?}"));
            }
            let mut aborted = false;
            for cmd in cmds {
                match c.read_reply() {
                    Reply::Status(s) if s == "QUEUED" => {}
                    // Arity errors are caught when queueing; EXEC then aborts.
                    r @ Reply::Error(_) => {
                        aborted = true;
                        t.count(&r);
                        t.bad.extend(judge(cmd, &r, via));
                    }
                    other => t
                        .bad
                        .push(format!("queueing {} → {other:?}", describe(cmd))),
                }
            }
            match c.read_reply() {
                Reply::Array(replies) if !aborted && replies.len() == cmds.len() => {
                    for (cmd, r) in cmds.iter().zip(&replies) {
                        t.count(r);
                        t.bad.extend(judge(cmd, r, via));
                    }
                }
                Reply::Error(e) if aborted && e.starts_with("EXECABORT") => {}
                other => t.bad.push(format!("EXEC (aborted: {aborted}) → {other:?}")),
            }
        }
        Via::Eval => {
            t.eval += cmds.len() as u64;
            for cmd in cmds {
                let mut a: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), SCRIPT.into(), b"0".to_vec()];
                a.extend(cmd.iter().cloned());
                c.send(&a);
            }
            for cmd in cmds {
                let r = c.read_reply();
                t.count(&r);
                t.bad.extend(judge(cmd, &r, via));
            }
        }
    }
    t.vectors += cmds.len() as u64;
}

/// Keys outside the fuzzed set, of every type, and a held lock.
fn sentinels(c: &mut Client) -> Vec<String> {
    let mut keys = Vec::new();
    for i in 0..50 {
        let k = format!("sentinel:{i}");
        match i % 5 {
            0 => c.cmd(&["SET", &k, &format!("value\0{i}")]),
            1 => c.cmd(&["RPUSH", &k, "a", "b"]),
            2 => c.cmd(&["HSET", &k, "f", "1", "g", "2"]),
            3 => c.cmd(&["ZADD", &k, "1", "m"]),
            _ => c.cmd(&["LOCK.ACQUIRE", &k, "keeper", "PX", "3600000"]),
        };
        keys.push(k);
    }
    keys
}

fn sentinel_state(c: &mut Client, keys: &[String]) -> Vec<(Reply, Reply)> {
    keys.iter()
        .map(|k| (c.cmd(&["DUMP", k]), c.cmd(&["PEXPIRETIME", k])))
        .collect()
}

pub struct Run {
    pub kind: Kind,
    pub version: String,
    pub tally: Tally,
    pub elapsed: Duration,
    pub problems: Vec<String>,
}

pub fn run(kind: Kind, vectors: u64, seed: u64) -> Run {
    let mut s = Server::start(kind);
    let version = s.version();
    let mut admin = s.client();
    let keys = sentinels(&mut admin);
    let before = sentinel_state(&mut admin, &keys);
    let mut c2 = s.client();
    let mut c3 = s.client_resp3();
    let mut rng = Rng::new(seed);
    let mut tally = Tally::default();
    let mut problems = Vec::new();
    let t0 = Instant::now();
    let mut n = 0u64;
    while tally.vectors < vectors {
        if n.is_multiple_of(10) {
            seed_keys(&mut admin);
        }
        let via = match rng.below(10) {
            0..=5 => Via::Plain,
            6 | 7 => Via::Multi,
            _ => Via::Eval,
        };
        let size = if via == Via::Plain {
            200
        } else {
            1 + rng.below(200) as usize
        };
        let cmds: Vec<Vec<Vec<u8>>> = (0..size).map(|_| vector(&mut rng)).collect();
        let c = if n.is_multiple_of(2) {
            &mut c2
        } else {
            &mut c3
        };
        let sent = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| batch(c, &cmds, via, &mut tally)));
        if let Err(e) = outcome {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            problems.push(format!(
                "batch {n} broke the connection or the protocol: {why}; first command {}",
                describe(&cmds[0])
            ));
            break;
        }
        if sent.elapsed() > Duration::from_secs(5) {
            problems.push(format!("batch {n} took {:?}: a stall", sent.elapsed()));
        }
        n += 1;
    }
    let elapsed = t0.elapsed();
    if !s.is_running() {
        problems.push("the server is not running".into());
    } else {
        let mut admin = s.client();
        let after = sentinel_state(&mut admin, &keys);
        for ((k, b), a) in keys.iter().zip(&before).zip(&after) {
            if b != a {
                problems.push(format!("sentinel {k} changed: {b:?} → {a:?}"));
            }
        }
        problems.extend(servers::health(&s));
    }
    Run {
        kind,
        version,
        tally,
        elapsed,
        problems,
    }
}

pub fn section(kinds: &[Kind], per_server: u64) -> Section {
    let mut sec = Section::new("R4 Hostile input");
    sec.line(format!(
        "{} random LOCK.* vectors per server: random arity (0-8 arguments), binary arguments, \
         huge/negative/malformed numbers, random option order and case, keys of every type; \
         pipelined in batches of 200, or sent inside MULTI/EXEC or through `EVAL \"return redis.pcall(unpack(ARGV))\"` \
         in batches of 1-200; RESP2 and RESP3 connections alternate batch by batch.",
        fmt_int(per_server)
    ));
    sec.line(String::new());
    sec.line("| server | vectors | of which in MULTI / in EVAL | rate | replies | malformed or wrong-shaped replies | crashes, stalls, panics, sentinel changes |".into());
    sec.line("|---|---|---|---|---|---|---|".into());
    for (i, &kind) in kinds.iter().enumerate() {
        let r = run(kind, per_server, 0xF022 + i as u64);
        let replies = r
            .tally
            .by_reply
            .iter()
            .map(|(k, v)| format!("{k} {}", fmt_int(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        sec.line(format!(
            "| {kind} {} | {} | {} / {} | {:.0}/s | {replies} | **{}** | **{}** |",
            r.version,
            fmt_int(r.tally.vectors),
            fmt_int(r.tally.multi),
            fmt_int(r.tally.eval),
            r.tally.vectors as f64 / r.elapsed.as_secs_f64(),
            r.tally.bad.len(),
            r.problems.len()
        ));
        for b in r.tally.bad.iter().take(10) {
            sec.fail(format!("{kind}: {b}"));
        }
        let missing: Vec<&str> = SHAPES
            .into_iter()
            .filter(|shape| !r.tally.shapes.contains(shape))
            .collect();
        sec.check(missing.is_empty(), || {
            format!(
                "{kind}: never answered {missing:?} (seen: {:?}): the vectors no longer reach every path",
                r.tally.shapes
            )
        });
        for p in &r.problems {
            sec.fail(format!("{kind}: {p}"));
        }
    }
    sec.line(String::new());
    sec.line(
        "Property tests of the same code without a server: `cargo test -p hashlock-reliability --test core_props` \
         (the request parser and the lock rules against a reference model, via proptest)."
            .into(),
    );
    sec
}
