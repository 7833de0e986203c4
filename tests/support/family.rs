//! Helpers shared by the read-write lock and multi-key lock tests
//! (`tests/rwlock.rs`, `tests/multi.rs`): holders that die as processes,
//! a Redisson read-write lock client driving Redisson's scripts, the whole
//! keyspace as a value, the server clock, lifecycle-event listeners.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use testkit::redisson::{
    RW_READ_LOCK, RW_READ_RENEW, RW_READ_UNLOCK, RW_READ_UNLOCK_MESSAGE, RW_UNLOCK_MESSAGE,
    RW_WRITE_LOCK, RW_WRITE_UNLOCK, rwlock_channel, rwlock_key_prefix, rwlock_timeout_prefix,
    rwlock_writer, unlock_latch,
};
use testkit::{Client, Reply, Server, args, wait_until};

pub const SECOND: Duration = Duration::from_secs(1);

pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

/// An `INFO lock` counter.
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

/// The server clock in ms (`TIME`).
#[track_caller]
pub fn server_ms(c: &mut Client) -> i64 {
    let t = c.cmd(&["TIME"]);
    let part = |i: usize| -> i64 { t.as_array()[i].as_str().parse().expect("TIME") };
    part(0) * 1000 + part(1) / 1000
}

/// A hash's fields and values as text (empty when there is no key).
#[track_caller]
pub fn fields(c: &mut Client, key: &[u8]) -> BTreeMap<String, String> {
    let r = c.cmd(&args!["HGETALL", key]);
    let pairs: Vec<(String, String)> = match &r {
        Reply::Array(flat) => flat
            .chunks_exact(2)
            .map(|kv| (kv[0].as_str().to_owned(), kv[1].as_str().to_owned()))
            .collect(),
        Reply::Map(m) => m
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
            .collect(),
        other => panic!("HGETALL: {other:?}"),
    };
    pairs.into_iter().collect()
}

/// `[(field, value)]` as a map, for comparing with `fields`.
pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The keys matching `pattern`, sorted.
#[track_caller]
pub fn keys(c: &mut Client, pattern: &str) -> Vec<String> {
    let mut k: Vec<String> = c
        .cmd(&["KEYS", pattern])
        .as_array()
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    k.sort();
    k
}

#[track_caller]
pub fn pexpiretime(c: &mut Client, key: &[u8]) -> i64 {
    c.cmd(&args!["PEXPIRETIME", key]).as_int()
}

#[track_caller]
pub fn pttl(c: &mut Client, key: &[u8]) -> i64 {
    c.cmd(&args!["PTTL", key]).as_int()
}

/// The whole keyspace of the current database: every key with its type,
/// its serialized value and its absolute deadline. Equal before and after
/// a command: the command changed nothing.
#[track_caller]
pub fn keyspace(c: &mut Client) -> BTreeMap<Vec<u8>, (Reply, Reply, Reply)> {
    let names: Vec<Vec<u8>> = c
        .cmd(&["KEYS", "*"])
        .as_array()
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    names
        .into_iter()
        .map(|k| {
            let state = (
                c.cmd(&args!["TYPE", k]),
                c.cmd(&args!["DUMP", k]),
                c.cmd(&args!["PEXPIRETIME", k]),
            );
            (k, state)
        })
        .collect()
}

/// A lock holder in its own process: `redis-cli` reading commands from a
/// pipe, so it keeps its connection open until it exits or is killed.
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

    /// Sends one command line and returns the first line of its reply.
    #[track_caller]
    pub fn cmd(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to redis-cli");
        stdin.flush().expect("flush redis-cli stdin");
        self.lines
            .recv_timeout(10 * SECOND)
            .unwrap_or_else(|e| panic!("redis-cli did not answer {line:?}: {e}"))
    }

    /// The next line of output (the rest of a multi-line reply).
    #[track_caller]
    pub fn line(&mut self) -> String {
        self.lines
            .recv_timeout(10 * SECOND)
            .unwrap_or_else(|e| panic!("redis-cli said nothing more: {e}"))
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

/// A Redisson client using `RReadWriteLock` through Redisson's scripts
/// (`testkit::redisson`), with Redisson's owners `<uuid>:<thread>`.
pub struct RedissonRw {
    pub c: Client,
    pub id: &'static str,
    /// The publish command Redisson passes (`PUBLISH`; `SPUBLISH` on a
    /// cluster).
    pub publish: &'static str,
    requests: u64,
}

impl RedissonRw {
    pub fn new(c: Client, id: &'static str) -> RedissonRw {
        RedissonRw {
            c,
            id,
            publish: "PUBLISH",
            requests: 0,
        }
    }

    pub fn owner(&self, thread: u32) -> String {
        format!("{}:{thread}", self.id)
    }

    /// `None` = acquired; `Some(pttl)` = not now.
    #[track_caller]
    pub fn read_lock(&mut self, key: &[u8], thread: u32, lease_ms: i64) -> Option<i64> {
        let owner = self.owner(thread);
        let prefix = rwlock_timeout_prefix(key, owner.as_bytes());
        let writer = rwlock_writer(owner.as_bytes());
        match self.c.cmd(&args![
            "EVAL",
            RW_READ_LOCK,
            2,
            key,
            prefix,
            lease_ms,
            owner,
            writer
        ]) {
            Reply::Nil => None,
            Reply::Int(pttl) => Some(pttl),
            other => panic!("read lock replied {other:?}"),
        }
    }

    /// `None` = not held; `Some(false)` = still locked; `Some(true)` =
    /// this owner's last read hold went and the lock was deleted.
    #[track_caller]
    pub fn read_unlock(&mut self, key: &[u8], thread: u32) -> Option<bool> {
        let owner = self.owner(thread);
        self.requests += 1;
        let latch = unlock_latch(key, format!("{}-{}", self.id, self.requests).as_bytes());
        let r = self.c.cmd(&args![
            "EVAL",
            RW_READ_UNLOCK,
            5,
            key,
            rwlock_channel(key),
            rwlock_timeout_prefix(key, owner.as_bytes()),
            rwlock_key_prefix(key),
            latch,
            RW_UNLOCK_MESSAGE,
            owner,
            self.publish,
            30000
        ]);
        self.c.cmd(&args!["DEL", latch]);
        match r {
            Reply::Nil => None,
            Reply::Int(0) => Some(false),
            Reply::Int(1) => Some(true),
            other => panic!("read unlock replied {other:?}"),
        }
    }

    /// `None` = acquired; `Some(pttl)` = not now.
    #[track_caller]
    pub fn write_lock(&mut self, key: &[u8], thread: u32, lease_ms: i64) -> Option<i64> {
        let writer = rwlock_writer(self.owner(thread).as_bytes());
        match self
            .c
            .cmd(&args!["EVAL", RW_WRITE_LOCK, 1, key, lease_ms, writer])
        {
            Reply::Nil => None,
            Reply::Int(pttl) => Some(pttl),
            other => panic!("write lock replied {other:?}"),
        }
    }

    /// `None` = not held; `Some(false)` = still held; `Some(true)` = write
    /// mode ended.
    #[track_caller]
    pub fn write_unlock(&mut self, key: &[u8], thread: u32) -> Option<bool> {
        let writer = rwlock_writer(self.owner(thread).as_bytes());
        self.requests += 1;
        let latch = unlock_latch(key, format!("{}-{}", self.id, self.requests).as_bytes());
        let r = self.c.cmd(&args![
            "EVAL",
            RW_WRITE_UNLOCK,
            3,
            key,
            rwlock_channel(key),
            latch,
            RW_READ_UNLOCK_MESSAGE,
            30000,
            writer,
            self.publish,
            30000
        ]);
        self.c.cmd(&args!["DEL", latch]);
        match r {
            Reply::Nil => None,
            Reply::Int(0) => Some(false),
            Reply::Int(1) => Some(true),
            other => panic!("write unlock replied {other:?}"),
        }
    }

    /// The read-lock watchdog's renewal of `thread`'s holds: true if it
    /// held any.
    #[track_caller]
    pub fn read_renew(&mut self, key: &[u8], thread: u32, lease_ms: i64) -> bool {
        let owner = self.owner(thread);
        let r = self.c.cmd(&args![
            "EVAL",
            RW_READ_RENEW,
            2,
            key,
            rwlock_key_prefix(key),
            lease_ms,
            1,
            owner
        ]);
        r.as_array()[0] == Reply::Int(1)
    }
}

/// Listens to the lifecycle events (class `d`) fired on one key, after
/// `CONFIG SET notify-keyspace-events Kd` on the server.
pub struct Events {
    c: Client,
}

impl Events {
    #[track_caller]
    pub fn new(s: &Server, key: &str) -> Events {
        let mut admin = s.client();
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kd"]),
            Reply::Status("OK".into())
        );
        let mut c = s.client();
        let channel = format!("__keyspace@0__:{key}");
        c.cmd(&["SUBSCRIBE", &channel]);
        Events { c }
    }

    /// The next event's name (`rwlock.acquired`, ...), within `within`.
    #[track_caller]
    pub fn next(&mut self, within: Duration) -> Option<String> {
        let m = self.c.try_read_reply(within)?;
        let parts = m.as_array();
        assert_eq!(parts[0], bulk("message"), "{m:?}");
        Some(parts[2].as_str().to_owned())
    }

    /// The events that arrive until `quiet` passes without one.
    #[track_caller]
    pub fn drain(&mut self, quiet: Duration) -> Vec<String> {
        let mut all = Vec::new();
        while let Some(e) = self.next(quiet) {
            all.push(e);
        }
        all
    }
}

/// A subscriber to one channel (RESP2 or RESP3), for the notification
/// messages.
pub struct Subscriber {
    pub c: Client,
    resp3: bool,
    channel: Vec<u8>,
    /// `message` (SUBSCRIBE) or `smessage` (SSUBSCRIBE).
    kind: &'static str,
}

impl Subscriber {
    #[track_caller]
    pub fn new(s: &Server, resp3: bool, channel: &[u8]) -> Subscriber {
        let c = if resp3 { s.client_resp3() } else { s.client() };
        Subscriber::on(c, resp3, channel, false)
    }

    #[track_caller]
    pub fn on(mut c: Client, resp3: bool, channel: &[u8], sharded: bool) -> Subscriber {
        let (cmd, ack, kind) = match sharded {
            true => ("SSUBSCRIBE", "ssubscribe", "smessage"),
            false => ("SUBSCRIBE", "subscribe", "message"),
        };
        let r = c.cmd(&args![cmd, channel]);
        assert_eq!(r.as_array()[0], bulk(ack), "{r:?}");
        Subscriber {
            c,
            resp3,
            channel: channel.to_vec(),
            kind,
        }
    }

    /// The next message's payload, within `within`, in the protocol's frame.
    #[track_caller]
    pub fn next(&mut self, within: Duration) -> Option<String> {
        let m = self.c.try_read_reply(within)?;
        let parts = match (&m, self.resp3) {
            (Reply::Array(p), false) | (Reply::Push(p), true) => p,
            other => panic!(
                "message in the wrong frame (resp3 {}): {other:?}",
                self.resp3
            ),
        };
        assert_eq!(parts[0], bulk(self.kind), "{m:?}");
        assert_eq!(parts[1], bulk(&self.channel), "{m:?}");
        Some(parts[2].as_str().to_owned())
    }

    #[track_caller]
    pub fn expect(&mut self, payload: &str, what: &str) {
        assert_eq!(
            self.next(5 * SECOND).as_deref(),
            Some(payload),
            "{what}: expected `{payload}` on {}",
            self.channel.escape_ascii()
        );
    }

    #[track_caller]
    pub fn expect_silence(&mut self, what: &str) {
        let got = self.next(Duration::from_millis(100));
        assert_eq!(got, None, "{what}: on {}", self.channel.escape_ascii());
    }
}
