//! A minimal cluster-aware client for the R6 workers, built on testkit's
//! `Client`: a slot map from `CLUSTER SLOTS`, one connection per node, and
//! the retry rules a real cluster client applies:
//!
//! - `MOVED <slot> <addr>`: the slot lives elsewhere now; remember and retry
//!   there (and refresh the map).
//! - `ASK <slot> <addr>`: retry once at that node, after `ASKING`.
//! - `UNBLOCKED ...` (Redis 7.0: the node became a replica; it then closes
//!   the connection), `REDIRECT <addr>`, `TRYAGAIN`, `CLUSTERDOWN`,
//!   `READONLY`, `LOADING`, `MASTERDOWN`: not executed; refresh and retry.
//! - A connection refused: the node is down (SIGKILL); refresh and retry.
//!
//! Every such answer means the command was not executed, so one logical
//! call may take several attempts. What the client cannot know is
//! reported as such: a connection closed after the command was sent
//! (`Unknown`), no reply within the call's limit (`Hung`: a waiter left
//! hanging), or no node able to serve it for a long time (`Unavailable`).

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use testkit::cluster::key_slot;
use testkit::{Client, Polled, Reply};

use crate::servers::expect_panic;

/// How long one logical call keeps retrying before giving up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

/// What one logical call ended with.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    Reply(Reply),
    /// Sent, then the connection died: it may or may not have run.
    Unknown(String),
    /// Sent, and no reply within the limit (the connection is dropped).
    Hung(String),
    /// No node served it for `GIVE_UP_AFTER` (never executed).
    Unavailable(String),
}

/// How often each retry rule fired (for the figures).
#[derive(Clone, Debug, Default)]
pub struct RetryStats {
    pub moved: u64,
    pub ask: u64,
    pub unblocked: u64,
    pub redirect: u64,
    pub clusterdown: u64,
    pub tryagain: u64,
    pub other_retry: u64,
    pub refused: u64,
    pub unknown: u64,
    pub hung: u64,
    pub unavailable: u64,
}

impl RetryStats {
    pub fn lines(&self) -> String {
        format!(
            "moved {}\nask {}\nunblocked {}\nredirect {}\nclusterdown {}\ntryagain {}\nother_retry {}\nrefused {}\nunknown {}\nhung {}\nunavailable {}\n",
            self.moved,
            self.ask,
            self.unblocked,
            self.redirect,
            self.clusterdown,
            self.tryagain,
            self.other_retry,
            self.refused,
            self.unknown,
            self.hung,
            self.unavailable
        )
    }

    pub fn parse(text: &str) -> RetryStats {
        let mut s = RetryStats::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(' ') else {
                continue;
            };
            let v: u64 = v.trim().parse().unwrap_or(0);
            match k {
                "moved" => s.moved = v,
                "ask" => s.ask = v,
                "unblocked" => s.unblocked = v,
                "redirect" => s.redirect = v,
                "clusterdown" => s.clusterdown = v,
                "tryagain" => s.tryagain = v,
                "other_retry" => s.other_retry = v,
                "refused" => s.refused = v,
                "unknown" => s.unknown = v,
                "hung" => s.hung = v,
                "unavailable" => s.unavailable = v,
                _ => {}
            }
        }
        s
    }

    pub fn add(&mut self, o: &RetryStats) {
        self.moved += o.moved;
        self.ask += o.ask;
        self.unblocked += o.unblocked;
        self.redirect += o.redirect;
        self.clusterdown += o.clusterdown;
        self.tryagain += o.tryagain;
        self.other_retry += o.other_retry;
        self.refused += o.refused;
        self.unknown += o.unknown;
        self.hung += o.hung;
        self.unavailable += o.unavailable;
    }
}

pub struct ClusterClient {
    ports: Vec<u16>,
    /// The node the last call's last attempt went to (its WAIT goes there).
    last_port: Option<u16>,
    resp3: bool,
    /// slot → port of the primary serving it, as last learned.
    slots: Vec<Option<u16>>,
    conns: HashMap<u16, Client>,
    pub stats: RetryStats,
}

/// The port in `host:port`.
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':')?.1.parse().ok()
}

impl ClusterClient {
    /// `ports`: every node the cluster may ever have (seeds for the map).
    pub fn new(ports: Vec<u16>, resp3: bool) -> ClusterClient {
        let mut c = ClusterClient {
            ports,
            last_port: None,
            resp3,
            slots: vec![None; 16384],
            conns: HashMap::new(),
            stats: RetryStats::default(),
        };
        c.refresh();
        c
    }

    /// A connection to `port`, or None if the node does not accept one.
    fn conn(&mut self, port: u16) -> Option<&mut Client> {
        if !self.conns.contains_key(&port) {
            // Probe first: Client::connect panics on a refused connection.
            TcpStream::connect(("127.0.0.1", port)).ok()?;
            let resp3 = self.resp3;
            let c = expect_panic(|| {
                if resp3 {
                    Client::connect_resp3(port)
                } else {
                    Client::connect(port)
                }
            })
            .ok()?;
            self.conns.insert(port, c);
        }
        self.conns.get_mut(&port)
    }

    fn drop_conn(&mut self, port: u16) {
        self.conns.remove(&port);
    }

    /// Reloads the slot map from the first node that answers CLUSTER SLOTS.
    pub fn refresh(&mut self) {
        let ports = self.ports.clone();
        for port in ports {
            let Some(c) = self.conn(port) else {
                continue;
            };
            let r = match expect_panic(|| {
                c.set_timeout(Some(Duration::from_secs(2)));
                let r = c.cmd(&["CLUSTER", "SLOTS"]);
                c.set_timeout(Some(testkit::resp::DEFAULT_TIMEOUT));
                r
            }) {
                Ok(r) => r,
                Err(_) => {
                    self.drop_conn(port);
                    continue;
                }
            };
            let Reply::Array(ranges) = r else {
                continue;
            };
            let mut map = vec![None; 16384];
            for range in &ranges {
                let Reply::Array(f) = range else { continue };
                let (Some(Reply::Int(a)), Some(Reply::Int(b)), Some(Reply::Array(node))) =
                    (f.first(), f.get(1), f.get(2))
                else {
                    continue;
                };
                let Some(Reply::Int(p)) = node.get(1) else {
                    continue;
                };
                for slot in *a..=*b {
                    map[slot as usize] = Some(*p as u16);
                }
            }
            self.slots = map;
            return;
        }
    }

    /// Runs `args` (whose key is `key`) wherever the cluster says it
    /// belongs. `limit`: how long one attempt may wait for its reply.
    pub fn call(&mut self, args: &[Vec<u8>], key: &[u8], limit: Duration) -> CallResult {
        let slot = usize::from(key_slot(key));
        let started = Instant::now();
        let mut target = self.slots[slot];
        let mut asking = false;
        loop {
            if started.elapsed() > GIVE_UP_AFTER {
                self.stats.unavailable += 1;
                return CallResult::Unavailable(format!(
                    "slot {slot}: no node served the call for {GIVE_UP_AFTER:?}"
                ));
            }
            let Some(port) = target else {
                self.refresh();
                target = self.slots[slot];
                if target.is_none() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            };
            if self.conn(port).is_none() {
                // Refused: never sent.
                self.stats.refused += 1;
                std::thread::sleep(Duration::from_millis(50));
                self.refresh();
                target = self.slots[slot];
                asking = false;
                continue;
            };
            self.last_port = Some(port);
            let c = self.conns.get_mut(&port).expect("connected above");
            let sent = expect_panic(|| {
                if asking {
                    c.send(&["ASKING"]);
                }
                c.send(args);
            });
            if sent.is_err() {
                // A write to a dead peer: whether the bytes arrived is unknown.
                self.drop_conn(port);
                self.stats.unknown += 1;
                return CallResult::Unknown(format!("sending to port {port} failed"));
            }
            let polled = expect_panic(|| {
                if asking {
                    match c.poll_reply(limit) {
                        Polled::Reply(_) => {}
                        other => return other,
                    }
                }
                c.poll_reply(limit)
            })
            .unwrap_or_else(|_| Polled::Closed("protocol error".into()));
            asking = false;
            let reply = match polled {
                Polled::Reply(r) => r,
                Polled::Nothing => {
                    self.drop_conn(port);
                    self.stats.hung += 1;
                    return CallResult::Hung(format!(
                        "no reply from port {port} within {limit:?} ({:.1} s after the call began)",
                        started.elapsed().as_secs_f64()
                    ));
                }
                Polled::Closed(how) => {
                    self.drop_conn(port);
                    self.stats.unknown += 1;
                    return CallResult::Unknown(format!("port {port}: {how}"));
                }
            };
            let Reply::Error(text) = &reply else {
                return CallResult::Reply(reply);
            };
            let words: Vec<&str> = text.split_whitespace().collect();
            match words[..] {
                ["MOVED", _, addr, ..] => {
                    self.stats.moved += 1;
                    target = port_of(addr);
                    self.slots[slot] = target;
                }
                ["ASK", _, addr, ..] => {
                    self.stats.ask += 1;
                    target = port_of(addr);
                    asking = true;
                }
                ["REDIRECT", addr, ..] => {
                    self.stats.redirect += 1;
                    self.drop_conn(port);
                    target = port_of(addr);
                }
                ["UNBLOCKED", ..] => {
                    // Redis 7.0 closes the connection after this error.
                    self.stats.unblocked += 1;
                    self.drop_conn(port);
                    self.refresh();
                    target = self.slots[slot];
                }
                ["TRYAGAIN", ..] => {
                    self.stats.tryagain += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                ["CLUSTERDOWN", ..] => {
                    self.stats.clusterdown += 1;
                    std::thread::sleep(Duration::from_millis(100));
                    self.refresh();
                    target = self.slots[slot];
                }
                ["READONLY" | "LOADING" | "MASTERDOWN", ..] => {
                    self.stats.other_retry += 1;
                    std::thread::sleep(Duration::from_millis(50));
                    self.refresh();
                    target = self.slots[slot];
                }
                _ => return CallResult::Reply(reply),
            }
        }
    }

    /// Runs `args` on the connection the last call ended on, with no
    /// redirects (for `WAIT`, which must follow the write on its own
    /// connection: a WAIT elsewhere acknowledges nothing).
    pub fn call_on_last(&mut self, args: &[Vec<u8>], limit: Duration) -> CallResult {
        let Some(port) = self.last_port else {
            return CallResult::Unknown("no previous call".into());
        };
        let Some(c) = self.conns.get_mut(&port) else {
            self.stats.unknown += 1;
            return CallResult::Unknown(format!("the connection to port {port} is gone"));
        };
        let polled = expect_panic(|| {
            c.send(args);
            c.poll_reply(limit)
        })
        .unwrap_or_else(|_| Polled::Closed("send failed".into()));
        match polled {
            Polled::Reply(r) => CallResult::Reply(r),
            Polled::Nothing => {
                self.drop_conn(port);
                self.stats.hung += 1;
                CallResult::Hung(format!("no reply from port {port} within {limit:?}"))
            }
            Polled::Closed(how) => {
                self.drop_conn(port);
                self.stats.unknown += 1;
                CallResult::Unknown(format!("port {port}: {how}"))
            }
        }
    }
}
