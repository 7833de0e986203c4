//! Operation histories: what each churn client did, when, and what it got.
//!
//! A worker writes one line when it invokes an operation (before sending it)
//! and one when the reply arrives, each with a single `write(2)` on an
//! unbuffered file. A SIGKILL therefore loses at most the tail of one line
//! (ignored on reading) and never an invocation that reached the server:
//! an operation without a return line may or may not have taken effect, and
//! the checker treats it that way.
//!
//! Format (space-separated, owners hex-encoded, times in ns on the
//! monotonic clock):
//!
//! ```text
//! I <seq> <invoke_ns> ACQ <key> <owner> <lease_ms> <block_ms|-1>
//! I <seq> <invoke_ns> REL <key> <owner>
//! I <seq> <invoke_ns> RENEW <key> <owner> <lease_ms>
//! I <seq> <invoke_ns> GET <key>            (the counter protected by <key>)
//! I <seq> <invoke_ns> SET <key> <value>
//! I <seq> <invoke_ns> WAIT <key>           (WAIT 1 after a write on <key>)
//! R <seq> <return_ns> INT <n> | NIL | OK | BULK <hex> | ERR <text>
//! R <seq> <given_up_ns> HUNG <text>        (no reply in time: unknown)
//! ```

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Acquire {
        key: String,
        owner: Vec<u8>,
        lease_ms: i64,
        block_ms: Option<i64>,
        /// `KEEPALIVE`: tie the lock to the connection.
        keepalive: bool,
    },
    Release {
        key: String,
        owner: Vec<u8>,
    },
    Renew {
        key: String,
        owner: Vec<u8>,
        lease_ms: i64,
        /// `KEEPALIVE` (re-tie); without it a RENEW unties.
        keepalive: bool,
    },
    /// Reads the counter protected by the lock `key`.
    Get {
        key: String,
    },
    /// Writes the counter protected by the lock `key`.
    Set {
        key: String,
        value: i64,
    },
    /// `WAIT 1 <ms>` right after a write on `key` (cluster runs): the
    /// write counts only if a replica acknowledged it.
    Wait {
        key: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Int(i64),
    Nil,
    Ok,
    Bulk(Vec<u8>),
    Err(String),
    /// The client gave up waiting for the reply (its BLOCK time + 1 s, or a
    /// fixed limit): the call's effect is unknown, and that is a finding.
    Hung(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub seq: u64,
    pub op: Op,
    pub invoke: u64,
    /// `None`: the process died before the reply arrived.
    pub ret: Option<(u64, Outcome)>,
}

impl Event {
    pub fn new(seq: u64, op: Op, invoke: u64, ret: Option<(u64, Outcome)>) -> Event {
        Event {
            seq,
            op,
            invoke,
            ret,
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Appends a history, one `write(2)` per line.
pub struct Writer {
    file: File,
    next_seq: u64,
}

impl Writer {
    pub fn create(path: &Path) -> std::io::Result<Writer> {
        Ok(Writer {
            file: File::create(path)?,
            next_seq: 0,
        })
    }

    /// Records an invocation; returns its sequence number for `returned`.
    pub fn invoke(&mut self, op: &Op, at: u64) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let body = match op {
            Op::Acquire {
                key,
                owner,
                lease_ms,
                block_ms,
                keepalive,
            } => format!(
                "ACQ {key} {} {lease_ms} {}{}",
                hex(owner),
                block_ms.unwrap_or(-1),
                if *keepalive { " K" } else { "" }
            ),
            Op::Release { key, owner } => format!("REL {key} {}", hex(owner)),
            Op::Renew {
                key,
                owner,
                lease_ms,
                keepalive,
            } => format!(
                "RENEW {key} {} {lease_ms}{}",
                hex(owner),
                if *keepalive { " K" } else { "" }
            ),
            Op::Get { key } => format!("GET {key}"),
            Op::Set { key, value } => format!("SET {key} {value}"),
            Op::Wait { key } => format!("WAIT {key}"),
        };
        self.line(format!("I {seq} {at} {body}\n"));
        seq
    }

    pub fn returned(&mut self, seq: u64, at: u64, outcome: &Outcome) {
        let body = match outcome {
            Outcome::Int(n) => format!("INT {n}"),
            Outcome::Nil => "NIL".to_string(),
            Outcome::Ok => "OK".to_string(),
            Outcome::Bulk(b) => format!("BULK {}", hex(b)),
            Outcome::Err(e) => format!("ERR {}", e.replace(['\n', '\r'], " ")),
            Outcome::Hung(e) => format!("HUNG {}", e.replace(['\n', '\r'], " ")),
        };
        self.line(format!("R {seq} {at} {body}\n"));
    }

    fn line(&mut self, line: String) {
        // One write: a kill leaves whole lines and at most one torn tail.
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            panic!("cannot write history: {e}");
        }
    }
}

/// Reads a history file; a torn last line (killed mid-write) is dropped.
pub fn read(path: &Path) -> Result<Vec<Event>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every `<name>.hist` file in `dir`, read, by name.
pub fn read_all(dir: &Path) -> Vec<(String, Vec<Event>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hist"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, read(p).unwrap_or_else(|e| panic!("{e}")))
        })
        .collect()
}

pub fn parse(text: &str) -> Result<Vec<Event>, String> {
    let mut events: Vec<Event> = Vec::new();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    for (n, line) in complete.lines().enumerate() {
        let bad = || format!("line {}: cannot parse {line:?}", n + 1);
        let f: Vec<&str> = line.splitn(4, ' ').collect();
        let [kind, seq, at, rest] = f[..] else {
            return Err(bad());
        };
        let seq: u64 = seq.parse().map_err(|_| bad())?;
        let at: u64 = at.parse().map_err(|_| bad())?;
        match kind {
            "I" => {
                let op = parse_op(rest).ok_or_else(bad)?;
                events.push(Event::new(seq, op, at, None));
            }
            "R" => {
                let outcome = parse_outcome(rest).ok_or_else(bad)?;
                // Operations are sequential: a return answers the last invoke.
                match events.last_mut() {
                    Some(e) if e.seq == seq && e.ret.is_none() => e.ret = Some((at, outcome)),
                    _ => return Err(format!("line {}: return without its invoke", n + 1)),
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(events)
}

fn parse_op(s: &str) -> Option<Op> {
    let mut f: Vec<&str> = s.split(' ').collect();
    // A trailing `K`: KEEPALIVE.
    let keepalive = f.len() > 1 && f.last() == Some(&"K");
    if keepalive {
        f.pop();
    }
    Some(match f[..] {
        ["ACQ", key, owner, lease, block] => Op::Acquire {
            key: key.to_string(),
            owner: unhex(owner)?,
            lease_ms: lease.parse().ok()?,
            block_ms: match block.parse().ok()? {
                -1 => None,
                ms => Some(ms),
            },
            keepalive,
        },
        ["REL", key, owner] => Op::Release {
            key: key.to_string(),
            owner: unhex(owner)?,
        },
        ["RENEW", key, owner, lease] => Op::Renew {
            key: key.to_string(),
            owner: unhex(owner)?,
            lease_ms: lease.parse().ok()?,
            keepalive,
        },
        ["GET", key] => Op::Get {
            key: key.to_string(),
        },
        ["SET", key, value] => Op::Set {
            key: key.to_string(),
            value: value.parse().ok()?,
        },
        ["WAIT", key] => Op::Wait {
            key: key.to_string(),
        },
        _ => return None,
    })
}

fn parse_outcome(s: &str) -> Option<Outcome> {
    let (word, rest) = s.split_once(' ').unwrap_or((s, ""));
    Some(match word {
        "INT" => Outcome::Int(rest.parse().ok()?),
        "NIL" => Outcome::Nil,
        "OK" => Outcome::Ok,
        "BULK" => Outcome::Bulk(unhex(rest)?),
        "ERR" => Outcome::Err(rest.to_string()),
        "HUNG" => Outcome::Hung(rest.to_string()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h");
        let mut w = Writer::create(&path).unwrap();
        let acq = Op::Acquire {
            key: "lk0".into(),
            owner: b"w\0\xff".to_vec(),
            lease_ms: 120,
            block_ms: Some(0),
            keepalive: false,
        };
        let tied = Op::Acquire {
            key: "lk1".into(),
            owner: b"w".to_vec(),
            lease_ms: 900,
            block_ms: None,
            keepalive: true,
        };
        let retie = Op::Renew {
            key: "lk1".into(),
            owner: b"w".to_vec(),
            lease_ms: 900,
            keepalive: true,
        };
        let s = w.invoke(&tied, 1);
        w.returned(s, 2, &Outcome::Int(1));
        let s = w.invoke(&retie, 3);
        w.returned(s, 4, &Outcome::Int(1));
        let s = w.invoke(&acq, 10);
        w.returned(s, 20, &Outcome::Int(1));
        let s = w.invoke(
            &Op::Set {
                key: "lk0".into(),
                value: 7,
            },
            30,
        );
        w.returned(s, 31, &Outcome::Err("ERR x\ny".into()));
        let s = w.invoke(&Op::Wait { key: "lk0".into() }, 32);
        w.returned(s, 33, &Outcome::Hung("no reply in 1.5 s".into()));
        w.invoke(
            &Op::Release {
                key: "lk0".into(),
                owner: b"w".to_vec(),
            },
            40,
        );
        drop(w);
        // A SIGKILL in the middle of the next line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"R 5 5")
            .unwrap();
        let events = read(&path).unwrap();
        assert_eq!(events.len(), 6);
        assert_eq!(
            events[0],
            Event::new(0, tied, 1, Some((2, Outcome::Int(1))))
        );
        assert_eq!(
            events[1],
            Event::new(1, retie, 3, Some((4, Outcome::Int(1))))
        );
        assert_eq!(
            events[2],
            Event::new(2, acq, 10, Some((20, Outcome::Int(1))))
        );
        assert_eq!(events[3].ret, Some((31, Outcome::Err("ERR x y".into()))));
        assert_eq!(events[4].op, Op::Wait { key: "lk0".into() });
        assert_eq!(
            events[4].ret,
            Some((33, Outcome::Hung("no reply in 1.5 s".into())))
        );
        assert_eq!(events[5].ret, None);
    }
}
