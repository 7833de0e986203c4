//! Helpers for the topology tests: what a blocked waiter was answered, and
//! a list of findings that lets one scenario report every broken promise
//! at once instead of stopping at the first.

use std::time::{Duration, Instant};

use testkit::{Client, Kind, Polled, Reply, Server, wait_until};

/// What a client blocked in `LOCK.ACQUIRE ... BLOCK` ended up with.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A grant: the hold count (or the generated owner).
    Granted(Reply),
    /// Timed out (nil).
    Nil,
    /// `-MOVED <slot> <ip:port>`, `-ASK <slot> <ip:port>` or
    /// `-REDIRECT <ip:port>`.
    Redirect {
        kind: String,
        slot: Option<u16>,
        port: u16,
        text: String,
    },
    /// `-UNBLOCKED ...`.
    Unblocked(String),
    /// Any other error.
    Error(String),
    /// The server closed the connection without a reply.
    Closed(String),
    /// Nothing yet.
    Nothing,
}

impl Answer {
    pub fn from_polled(p: Polled) -> Answer {
        match p {
            Polled::Nothing => Answer::Nothing,
            Polled::Closed(how) => Answer::Closed(how),
            Polled::Reply(r) => Answer::from_reply(r),
        }
    }

    pub fn from_reply(r: Reply) -> Answer {
        match r {
            Reply::Nil | Reply::Null | Reply::NilArray => Answer::Nil,
            Reply::Error(text) => {
                let words: Vec<&str> = text.split_whitespace().collect();
                let port = |addr: &str| addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
                match words[..] {
                    [kind @ ("MOVED" | "ASK"), slot, addr] if port(addr).is_some() => {
                        Answer::Redirect {
                            kind: kind.to_string(),
                            slot: slot.parse().ok(),
                            port: port(addr).unwrap(),
                            text: text.clone(),
                        }
                    }
                    ["REDIRECT", addr] if port(addr).is_some() => Answer::Redirect {
                        kind: "REDIRECT".into(),
                        slot: None,
                        port: port(addr).unwrap(),
                        text: text.clone(),
                    },
                    _ if text.starts_with("UNBLOCKED") => Answer::Unblocked(text),
                    _ => Answer::Error(text),
                }
            }
            other => Answer::Granted(other),
        }
    }

    pub fn is_redirect_to(&self, port: u16) -> bool {
        matches!(self, Answer::Redirect { port: p, .. } if *p == port)
    }

    pub fn is_ask(&self) -> bool {
        matches!(self, Answer::Redirect { kind, .. } if kind == "ASK")
    }
}

/// Polls `c` for up to `timeout`: the answer and when it came.
#[track_caller]
pub fn answer_within(c: &mut Client, timeout: Duration) -> (Answer, Duration) {
    let t = Instant::now();
    let a = Answer::from_polled(c.poll_reply(timeout));
    (a, t.elapsed())
}

/// A client (RESP3 if asked, after `CLIENT CAPA redirect` if asked) sent
/// `LOCK.ACQUIRE key owner BLOCK 0` and left waiting.
#[track_caller]
pub fn block_on(s: &Server, key: &str, owner: &str, resp3: bool, capa_redirect: bool) -> Client {
    let mut w = if resp3 { s.client_resp3() } else { s.client() };
    if capa_redirect {
        assert_eq!(
            w.cmd(&["CLIENT", "CAPA", "redirect"]),
            Reply::Status("OK".into()),
            "CLIENT CAPA redirect on port {}",
            s.port
        );
    }
    w.send(&["LOCK.ACQUIRE", key, owner, "BLOCK", "0"]);
    w
}

/// The `waiters` field of `LOCK.INFO key` on `c` (None: no lock, or no such
/// field, or an error).
#[track_caller]
pub fn waiters_of(c: &mut Client, key: &str) -> Option<i64> {
    match c.cmd(&["LOCK.INFO", key]).map_get("waiters") {
        Some(Reply::Int(n)) => Some(*n),
        _ => None,
    }
}

/// Waits until `LOCK.INFO key` on `s` reports `n` waiters.
#[track_caller]
pub fn wait_waiters(s: &Server, key: &str, n: i64) -> bool {
    let mut c = s.client();
    wait_until(Duration::from_secs(5), || {
        waiters_of(&mut c, key) == Some(n)
    })
}

/// Broken promises found during one scenario; `finish` fails the test
/// with all of them.
pub struct Findings {
    what: String,
    failures: Vec<String>,
}

impl Findings {
    pub fn new(kind: Kind, what: &str) -> Findings {
        Findings {
            what: format!("{kind}: {what}"),
            failures: Vec::new(),
        }
    }

    /// Records a failure when `ok` is false.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) -> bool {
        if !ok {
            let w = what();
            // The first line now (the test may still hang or panic later);
            // everything in the final panic message.
            eprintln!(
                "FINDING [{}]: {}",
                self.what,
                w.lines().next().unwrap_or("")
            );
            self.failures.push(w);
        }
        ok
    }

    pub fn fail(&mut self, what: String) {
        self.check(false, || what);
    }

    /// Panics listing every failure, if any.
    #[track_caller]
    pub fn finish(self) {
        if !self.failures.is_empty() {
            panic!(
                "{}: {} broken promise(s):\n- {}",
                self.what,
                self.failures.len(),
                self.failures.join("\n- ")
            );
        }
    }
}
