//! Helpers the SEMAPHORE.* and LATCH.* tests share: permit ids, INFO
//! fields, pub/sub and keyspace-event readers, waiting counters, a holder
//! in its own process.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::common::*;

pub const SECOND: Duration = Duration::from_secs(1);

/// Redisson's score of a permit without a lease.
pub const NO_LEASE: f64 = 922_337_203_685_477.0;

pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

/// An id as clients see it (32 lowercase hex chars) → its 16 raw bytes.
#[track_caller]
pub fn unhex(hex: &[u8]) -> Vec<u8> {
    assert_eq!(
        hex.len(),
        32,
        "an id of 32 hex chars: {:?}",
        hex.escape_ascii().to_string()
    );
    hex.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// 16 raw bytes → 32 lowercase hex chars.
pub fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// The ids of a SEMAPHORE.LEASE reply (asserting their form).
#[track_caller]
pub fn ids(r: &Reply) -> Vec<String> {
    r.as_array()
        .iter()
        .map(|id| {
            let s = id.as_str().to_string();
            assert!(
                s.len() == 32
                    && s.bytes()
                        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
                "a permit id is 32 lowercase hex chars: {s:?}"
            );
            s
        })
        .collect()
}

/// `{key}:timeout`, or `key:timeout` when the key has a `{`.
pub fn lease_set(key: &str) -> String {
    if key.contains('{') {
        format!("{key}:timeout")
    } else {
        format!("{{{key}}}:timeout")
    }
}

/// The lease set as (member bytes, score), lowest score first (any protocol).
#[track_caller]
pub fn leases(c: &mut Client, key: &str) -> Vec<(Vec<u8>, f64)> {
    let r = c.cmd(&["ZRANGE", &lease_set(key), "0", "-1", "WITHSCORES"]);
    let score = |r: &Reply| -> f64 {
        match r {
            Reply::Double(d) => d.parse().expect("double"),
            other => other.as_str().parse().expect("score"),
        }
    };
    let items = r.as_array();
    if items.iter().all(|i| matches!(i, Reply::Array(_))) && !items.is_empty() {
        // RESP3: [member, score] pairs.
        items
            .iter()
            .map(|p| (p.as_array()[0].as_bytes().to_vec(), score(&p.as_array()[1])))
            .collect()
    } else {
        items
            .chunks_exact(2)
            .map(|p| (p[0].as_bytes().to_vec(), score(&p[1])))
            .collect()
    }
}

/// One SEMAPHORE.INFO field (panics when there is no semaphore).
#[track_caller]
pub fn sem_field(c: &mut Client, key: &str, field: &str) -> i64 {
    let r = c.cmd(&["SEMAPHORE.INFO", key]);
    r.map_get(field)
        .unwrap_or_else(|| panic!("no {field} in SEMAPHORE.INFO {key}: {r:?}"))
        .as_int()
}

/// GET key as an integer (0 when missing).
#[track_caller]
pub fn count(c: &mut Client, key: &str) -> i64 {
    let r = c.cmd(&["GET", key]);
    if r.is_nil() {
        return 0;
    }
    r.as_str().parse().expect("an integer count")
}

/// The server's clock in ms.
#[track_caller]
pub fn server_ms(c: &mut Client) -> i64 {
    time_us(&c.cmd(&["TIME"])) / 1000
}

#[track_caller]
pub fn lock_stat(s: &Server, field: &str) -> i64 {
    s.info_field("lock", &format!("lock_{field}"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no lock_{field} in INFO lock:\n{}", s.info("lock")))
}

/// Waits until `n` clients wait in all queues together.
#[track_caller]
pub fn wait_waiting(s: &Server, n: i64) {
    let ok = wait_until(5 * SECOND, || lock_stat(s, "waiting") == n);
    assert!(ok, "expected {n} waiters, INFO lock: {}", s.info("lock"));
}

/// Subscribes `c` to `channel` (SUBSCRIBE, any protocol).
#[track_caller]
pub fn subscribe(c: &mut Client, channel: &[u8]) {
    let r = c.cmd(&[&b"SUBSCRIBE"[..], channel]);
    assert_eq!(r.as_array()[0], bulk("subscribe"), "{r:?}");
}

/// The next message on a subscribed connection: its payload, asserting its
/// frame (RESP2 array, RESP3 push) and channel.
#[track_caller]
pub fn message(sub: &mut Client, channel: &[u8], within: Duration) -> Vec<u8> {
    let msg = sub
        .try_read_reply(within)
        .unwrap_or_else(|| panic!("no message on {} within {within:?}", channel.escape_ascii()));
    let parts = match &msg {
        Reply::Array(p) | Reply::Push(p) => p,
        other => panic!("a message in the wrong frame: {other:?}"),
    };
    assert_eq!(parts.len(), 3, "{msg:?}");
    assert!(
        parts[0] == bulk("message") || parts[0] == bulk("smessage"),
        "{msg:?}"
    );
    assert_eq!(parts[1], bulk(channel), "{msg:?}");
    parts[2].as_bytes().to_vec()
}

/// Nothing arrives on `sub` for `ms`.
#[track_caller]
pub fn silent(sub: &mut Client, ms: u64, what: &str) {
    let got = sub.try_read_reply(Duration::from_millis(ms));
    assert!(got.is_none(), "{what}: got {got:?}");
}

/// A connection listening to every keyspace event of db 0 (the server's
/// `notify-keyspace-events` set to `KEA`): `events` reads them up to a
/// marker key's `set`.
pub struct Events {
    sub: Client,
    marker: u32,
}

impl Events {
    #[track_caller]
    pub fn listen(s: &Server) -> Events {
        let mut admin = s.client();
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
            Reply::Status("OK".into())
        );
        let mut sub = s.client();
        let r = sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
        assert_eq!(r.as_array()[0], bulk("psubscribe"), "{r:?}");
        Events { sub, marker: 0 }
    }

    /// The (event, key) pairs fired since the last call, in order, up to
    /// the `set` of a marker key written now on `c`.
    #[track_caller]
    pub fn since(&mut self, c: &mut Client) -> Vec<(String, Vec<u8>)> {
        self.marker += 1;
        let marker = format!("events-marker-{}", self.marker);
        c.cmd(&["SET", &marker, "1"]);
        let mut got = Vec::new();
        loop {
            let r = self
                .sub
                .try_read_reply(5 * SECOND)
                .unwrap_or_else(|| panic!("no marker event; so far {got:?}"));
            let parts = r.as_array();
            let channel = parts[2].as_str().to_string();
            let event = channel
                .strip_prefix("__keyevent@0__:")
                .unwrap_or(&channel)
                .to_string();
            let key = parts[3].as_bytes().to_vec();
            if event == "set" && key == marker.as_bytes() {
                return got;
            }
            got.push((event, key));
        }
    }
}

/// (event, key) pairs written compactly: `ev(&[("incrby", "s"), ...])`.
pub fn ev(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    pairs
        .iter()
        .map(|(e, k)| (e.to_string(), k.as_bytes().to_vec()))
        .collect()
}

/// A client in its own process: `redis-cli` reading commands from a pipe,
/// so it keeps its connection open until it exits or is killed.
pub struct CliHolder {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl CliHolder {
    #[track_caller]
    pub fn start(port: u16) -> CliHolder {
        let mut child = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redis-cli: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        CliHolder {
            child,
            stdin,
            lines,
        }
    }

    /// Sends one command line and returns the first `n` lines of its reply.
    #[track_caller]
    pub fn cmd(&mut self, line: &str, n: usize) -> Vec<String> {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to redis-cli");
        stdin.flush().expect("flush redis-cli stdin");
        (0..n)
            .map(|_| {
                self.lines
                    .recv_timeout(10 * SECOND)
                    .unwrap_or_else(|e| panic!("redis-cli did not answer {line:?}: {e}"))
            })
            .collect()
    }

    /// SIGKILL: no chance to say goodbye. Returns when it is dead.
    pub fn kill9(&mut self) -> Instant {
        let at = Instant::now();
        let _ = self.child.kill();
        let _ = self.child.wait();
        at
    }
}

impl Drop for CliHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
