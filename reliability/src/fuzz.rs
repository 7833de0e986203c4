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
//! fuzzed set must be byte-for-byte untouched.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use testkit::{Client, Kind, Reply, Server};

use crate::report::{Section, fmt_int};
use crate::rng::Rng;
use crate::servers;

const COMMANDS: [&str; 5] = [
    "LOCK.ACQUIRE",
    "LOCK.RELEASE",
    "LOCK.RENEW",
    "LOCK.INFO",
    "LOCK.FORCERELEASE",
];

/// Keys the fuzzer may touch; `seed_keys` gives several other types or
/// non-lock hashes.
const KEYS: [&[u8]; 14] = [
    b"k0",
    b"k1",
    b"k2",
    b"{t}k3",
    b"\0bin\xff",
    b"",
    b"*",
    b"str",
    b"list",
    b"set",
    b"zset",
    b"stream",
    b"hash2",
    b"hash0",
];

const OWNERS: [&[u8]; 9] = [
    b"a",
    b"b",
    b"*",
    b"**",
    b"\0",
    b"\xff\xfe",
    b"o\r\nw",
    b"PX",
    b"BLOCK",
];

const NUMBERS: [&str; 30] = [
    "0",
    "1",
    "2",
    "1000",
    "-1",
    "-0",
    "00",
    "01",
    "+1",
    " 1",
    "1.5",
    "1e3",
    "0x10",
    "9223372036854775807",
    "9223372036854775806",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551616",
    "99999999999999999999",
    "999999999999999999999999999999",
    "9223372036854776",
    "9223372036854775",
    "9223372036854775000",
    "315360000000",
    "inf",
    "nan",
    "-",
    "\u{0663}",
    "1\0",
    "\0",
];

fn random_case(rng: &mut Rng, s: &str) -> Vec<u8> {
    s.bytes()
        .map(|b| {
            if rng.chance(50) {
                b.to_ascii_lowercase()
            } else {
                b.to_ascii_uppercase()
            }
        })
        .collect()
}

fn token(rng: &mut Rng) -> Vec<u8> {
    match rng.below(16) {
        0..=2 => rng.pick(&KEYS).to_vec(),
        3 => rng.pick(&OWNERS).to_vec(),
        4 => b"*".to_vec(),
        5 | 6 => {
            let o = *rng.pick(&["PX", "EX", "BLOCK"]);
            random_case(rng, o)
        }
        7 | 8 => rng.pick(&NUMBERS).as_bytes().to_vec(),
        9 => (rng.next_u64() as i64).to_string().into_bytes(),
        10 => (1 + rng.below(100_000)).to_string().into_bytes(),
        11 => Vec::new(),
        12 => {
            let n = rng.below(40) as usize;
            rng.bytes(n)
        }
        13 => {
            // Around the owner length limit, sometimes far beyond it.
            let n = *rng.pick(&[1023usize, 1024, 1025, 4096, 70_000]);
            vec![rng.next_u64() as u8; n]
        }
        14 => {
            let n = 1 + rng.below(25);
            (0..n).map(|_| b'0' + rng.below(10) as u8).collect()
        }
        _ => {
            let c = *rng.pick(&COMMANDS);
            random_case(rng, c)
        }
    }
}

/// One random command vector: sometimes shaped like a real call, sometimes
/// noise.
pub fn vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    let name = {
        let c = *rng.pick(&COMMANDS);
        random_case(rng, c)
    };
    let which = name.to_ascii_uppercase();
    let mut args = vec![name];
    match rng.below(10) {
        7..=9 => {
            // Well-formed arity, plausible values, options in either order.
            let key = if rng.chance(25) {
                rng.pick(&KEYS)
            } else {
                rng.pick(&KEYS[..5])
            };
            args.push(key.to_vec());
            if which != b"LOCK.INFO" && which != b"LOCK.FORCERELEASE" {
                args.push(rng.pick(&OWNERS).to_vec());
            }
            let value = |rng: &mut Rng| -> Vec<u8> {
                if rng.chance(20) {
                    rng.pick(&NUMBERS).as_bytes().to_vec()
                } else {
                    (1 + rng.below(5000)).to_string().into_bytes()
                }
            };
            if (which == b"LOCK.ACQUIRE" || which == b"LOCK.RENEW") && rng.chance(50) {
                let o = *rng.pick(&["PX", "EX"]);
                args.push(random_case(rng, o));
                args.push(value(rng));
            }
            if which == b"LOCK.ACQUIRE" && rng.chance(33) {
                args.push(random_case(rng, "BLOCK"));
                args.push(value(rng));
                if args.len() == 7 && rng.chance(50) {
                    args[3..].rotate_left(2);
                }
            }
        }
        4..=6 => {
            let n = rng.below(9);
            for i in 0..n {
                args.push(match i {
                    0 => rng.pick(&KEYS).to_vec(),
                    1 => rng.pick(&OWNERS).to_vec(),
                    i if i % 2 == 0 => {
                        let o = *rng.pick(&["PX", "EX", "BLOCK"]);
                        random_case(rng, o)
                    }
                    _ if rng.chance(33) => token(rng),
                    _ => rng.pick(&NUMBERS).as_bytes().to_vec(),
                });
            }
        }
        _ => {
            for _ in 0..rng.below(9) {
                args.push(token(rng));
            }
        }
    }
    // A valid BLOCK timeout really waits: keep it to a few ms (i64::MAX
    // stays: it overflows the clock and must be refused).
    for i in 1..args.len().saturating_sub(1) {
        if args[i].eq_ignore_ascii_case(b"BLOCK") {
            let v = &args[i + 1];
            let canonical = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|n| n.to_string().as_bytes() == &v[..]);
            if let Some(n) = canonical
                && n >= 0
                && n != i64::MAX
            {
                args[i + 1] = (1 + rng.below(5)).to_string().into_bytes();
            }
        }
    }
    args
}

fn seed_keys(c: &mut Client) {
    for cmd in [
        &[
            "DEL", "str", "list", "set", "zset", "stream", "hash2", "hash0",
        ][..],
        &["SET", "str", "v"],
        &["RPUSH", "list", "a", "b"],
        &["SADD", "set", "a"],
        &["ZADD", "zset", "1", "a"],
        &["XADD", "stream", "*", "f", "v"],
        &["HSET", "hash2", "a", "1", "b", "1"],
        &["HSET", "hash0", "a", "0"],
        &["PEXPIRE", "hash0", "100000"],
    ] {
        c.send(cmd);
    }
    for _ in 0..9 {
        c.read_reply();
    }
}

/// How a vector was delivered.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Plain,
    Multi,
    Eval,
}

/// Is `r` an acceptable answer to `cmd`? `None` if so, else why not.
fn judge(cmd: &[Vec<u8>], r: &Reply, via: Via) -> Option<String> {
    let name = cmd[0].to_ascii_lowercase();
    let ok = match r {
        Reply::Error(text) => {
            ["ERR ", "WRONGTYPE ", "NOTOWNER ", "NOTLOCK "]
                .iter()
                .any(|code| text.starts_with(code))
                && !text.contains("internal error")
        }
        Reply::Int(_) => name != b"lock.info",
        Reply::Nil | Reply::Null => name == b"lock.acquire" || name == b"lock.info",
        // Lua turns nil into false, which RESP3 clients may see as a boolean.
        Reply::Bool(false) => via == Via::Eval && (name == b"lock.acquire" || name == b"lock.info"),
        // A generated owner.
        Reply::Bulk(b) => {
            name == b"lock.acquire" && cmd.get(2).is_some_and(|o| o == b"*") && b.len() == 36
        }
        // LOCK.INFO of a held lock (a map flattens in RESP2 and in Lua).
        Reply::Array(a) => name == b"lock.info" && a.len() == 8,
        Reply::Map(m) => name == b"lock.info" && m.len() == 4,
        _ => false,
    };
    (!ok).then(|| format!("{} → {r:?}", describe(cmd)))
}

fn describe(cmd: &[Vec<u8>]) -> String {
    cmd.iter()
        .map(|a| {
            if a.len() > 40 {
                format!("<{} bytes>", a.len())
            } else {
                format!("{:?}", a.escape_ascii().to_string())
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Default)]
pub struct Tally {
    pub vectors: u64,
    pub by_reply: BTreeMap<&'static str, u64>,
    pub bad: Vec<String>,
    pub multi: u64,
    pub eval: u64,
}

impl Tally {
    fn count(&mut self, r: &Reply) {
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
