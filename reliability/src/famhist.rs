//! Histories of the family scenarios (R7 semaphores, R8 read-write and
//! multi-key locks): every call a worker made, exactly as it sent it, and
//! the reply it got, on the machine's monotonic clock.
//!
//! As in R1 (`history`), a worker writes one line before it sends a call
//! and one when the reply is in, each with a single `write(2)`. Unlike R1,
//! the runner also knows how a call in flight at a SIGKILL ended: it shares
//! each worker's socket, freezes the worker at a clean point before killing
//! it, and reads whatever the server still answered on that connection
//! (see `famproc`). It appends that answer (`X`), the kill (`K`) and what
//! it did on the dead worker's behalf afterwards (plain `I`/`R` lines after
//! the `K`: releasing the anonymous permits it left, for instance).
//!
//! ```text
//! I <seq> <invoke_ns> <arg> <arg> ...     (the command as sent)
//! R <seq> <return_ns> <outcome>
//! X <seq> <read_ns> <outcome>             (answered after the worker froze;
//!                                          read by the runner, never seen
//!                                          by the worker)
//! K <ns>                                  (SIGKILL sent)
//! outcome: INT <n> | NIL | OK | ERR <text> | HUNG <text> | BULK <hex>
//!        | ARR <item> ... (item: i<n> | - | x<hex> | ?) | OTHER <text>
//! ```

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use testkit::Reply;

use crate::history::{hex, unhex};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Int(i64),
    Nil,
    Bulk(Vec<u8>),
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    Int(i64),
    Nil,
    Ok,
    Err(String),
    /// No reply within the worker's patience: the effect is unknown, and
    /// that is a finding.
    Hung(String),
    Bulk(Vec<u8>),
    Arr(Vec<Item>),
    /// Anything else (maps, statuses other than OK): not judged.
    Other(String),
}

impl Out {
    pub fn from_reply(r: &Reply) -> Out {
        match r {
            Reply::Int(n) => Out::Int(*n),
            r if r.is_nil() => Out::Nil,
            Reply::Status(s) if s == "OK" => Out::Ok,
            Reply::Error(e) => Out::Err(e.clone()),
            Reply::Bulk(b) => Out::Bulk(b.clone()),
            Reply::Array(a) | Reply::Set(a) => Out::Arr(
                a.iter()
                    .map(|i| match i {
                        Reply::Int(n) => Item::Int(*n),
                        i if i.is_nil() => Item::Nil,
                        Reply::Bulk(b) => Item::Bulk(b.clone()),
                        // RESP3 doubles (ZMSCORE) kept as their text.
                        Reply::Double(d) => Item::Bulk(d.clone().into_bytes()),
                        _ => Item::Other,
                    })
                    .collect(),
            ),
            other => Out::Other(format!("{other:?}")),
        }
    }

    /// The error code (`NOTOWNER`, `NOUPGRADE`, ...), if an error.
    pub fn err_code(&self) -> Option<&str> {
        match self {
            Out::Err(e) => e.split(' ').next(),
            _ => None,
        }
    }

    fn encode(&self) -> String {
        let flat = |s: &str| s.replace(['\n', '\r'], " ");
        match self {
            Out::Int(n) => format!("INT {n}"),
            Out::Nil => "NIL".into(),
            Out::Ok => "OK".into(),
            Out::Err(e) => format!("ERR {}", flat(e)),
            Out::Hung(e) => format!("HUNG {}", flat(e)),
            Out::Bulk(b) => format!("BULK {}", hex(b)),
            Out::Other(s) => format!("OTHER {}", flat(s)),
            Out::Arr(items) => {
                let mut s = String::from("ARR");
                for i in items {
                    s.push(' ');
                    match i {
                        Item::Int(n) => {
                            let _ = write!(s, "i{n}");
                        }
                        Item::Nil => s.push('-'),
                        Item::Bulk(b) => {
                            let _ = write!(s, "x{}", hex(b));
                        }
                        Item::Other => s.push('?'),
                    }
                }
                s
            }
        }
    }

    fn decode(s: &str) -> Option<Out> {
        let (word, rest) = s.split_once(' ').unwrap_or((s, ""));
        Some(match word {
            "INT" => Out::Int(rest.parse().ok()?),
            "NIL" => Out::Nil,
            "OK" => Out::Ok,
            "ERR" => Out::Err(rest.to_string()),
            "HUNG" => Out::Hung(rest.to_string()),
            "BULK" => Out::Bulk(unhex(rest)?),
            "OTHER" => Out::Other(rest.to_string()),
            "ARR" => Out::Arr(
                rest.split(' ')
                    .filter(|t| !t.is_empty())
                    .map(|t| {
                        Some(match t.as_bytes()[0] {
                            b'i' => Item::Int(t[1..].parse().ok()?),
                            b'-' => Item::Nil,
                            b'x' => Item::Bulk(unhex(&t[1..])?),
                            _ => Item::Other,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        })
    }
}

/// One call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub seq: u64,
    pub invoke: u64,
    pub args: Vec<String>,
    /// When and what it returned; `None`: the worker died first and the
    /// server answered nothing on its connection afterwards.
    pub ret: Option<(u64, Out)>,
    /// The reply was read by the runner after the worker froze (`X`).
    pub recovered: bool,
    /// Made by the runner on the dead worker's behalf (after its `K`).
    pub by_proxy: bool,
}

impl Call {
    /// The command name, upper case.
    pub fn cmd(&self) -> String {
        self.args
            .first()
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default()
    }

    /// The value after option `name` (any case), parsed.
    pub fn opt(&self, name: &str) -> Option<i64> {
        let i = self
            .args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(name))?;
        self.args.get(i + 1)?.parse().ok()
    }

    pub fn flag(&self, name: &str) -> bool {
        self.args.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// The outcome, and whether the worker itself saw it.
    pub fn out(&self) -> Option<&Out> {
        self.ret.as_ref().map(|(_, o)| o)
    }
}

/// A worker incarnation's history.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub name: String,
    pub calls: Vec<Call>,
    /// When the runner sent SIGKILL, if it did.
    pub killed_at: Option<u64>,
}

impl History {
    /// Calls the worker made itself (not the runner's proxies).
    pub fn own(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| !c.by_proxy)
    }

    /// `CLIENT ID` of its connection, if it asked.
    pub fn client_id(&self) -> Option<i64> {
        self.calls
            .iter()
            .find_map(|c| match (c.cmd().as_str(), c.out()) {
                ("CLIENT", Some(Out::Int(id))) if c.args.len() == 2 => Some(*id),
                _ => None,
            })
    }

    /// The call in flight at the end (no reply of its own).
    pub fn in_flight(&self) -> Option<&Call> {
        self.own().last().filter(|c| c.ret.is_none() || c.recovered)
    }
}

/// Appends to a history, one `write(2)` per line.
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

    /// Appends to an existing history (the runner, after a kill),
    /// continuing its sequence numbers.
    pub fn append(path: &Path, next_seq: u64) -> std::io::Result<Writer> {
        Ok(Writer {
            file: OpenOptions::new().append(true).open(path)?,
            next_seq,
        })
    }

    pub fn invoke(&mut self, args: &[String], at: u64) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!(args.iter().all(|a| !a.contains([' ', '\n'])));
        self.line(format!("I {seq} {at} {}\n", args.join(" ")));
        seq
    }

    pub fn returned(&mut self, seq: u64, at: u64, out: &Out) {
        self.line(format!("R {seq} {at} {}\n", out.encode()));
    }

    pub fn recovered(&mut self, seq: u64, at: u64, out: &Out) {
        self.line(format!("X {seq} {at} {}\n", out.encode()));
    }

    pub fn killed(&mut self, at: u64) {
        self.line(format!("K {at}\n"));
    }

    fn line(&mut self, line: String) {
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            panic!("cannot write history: {e}");
        }
    }
}

/// Follows a history as its worker writes it: each `poll` returns the calls
/// answered since the last one, reading only what was appended.
pub struct Follower {
    path: std::path::PathBuf,
    offset: u64,
    partial: String,
    open: Option<Call>,
    /// `I` lines seen so far.
    pub invoked: u64,
}

impl Follower {
    pub fn new(path: &Path) -> Follower {
        Follower {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
            open: None,
            invoked: 0,
        }
    }

    pub fn poll(&mut self) -> Vec<Call> {
        use std::io::{Read, Seek, SeekFrom};
        let mut done = Vec::new();
        let Ok(mut f) = File::open(&self.path) else {
            return done;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return done;
        }
        let mut bytes = Vec::new();
        if f.read_to_end(&mut bytes).is_err() {
            return done;
        }
        self.offset += bytes.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let Some(cut) = self.partial.rfind('\n') else {
            return done;
        };
        let complete: String = self.partial.drain(..=cut).collect();
        for line in complete.lines() {
            let f: Vec<&str> = line.splitn(4, ' ').collect();
            let (kind, seq, at, rest) = match f[..] {
                [k, s, a, r] => (k, s, a, r),
                [k, s, a] => (k, s, a, ""),
                _ => continue,
            };
            let (Ok(seq), Ok(at)) = (seq.parse::<u64>(), at.parse::<u64>()) else {
                continue;
            };
            match kind {
                "I" => {
                    self.invoked += 1;
                    self.open = Some(Call {
                        seq,
                        invoke: at,
                        args: rest.split(' ').map(str::to_string).collect(),
                        ret: None,
                        recovered: false,
                        by_proxy: false,
                    });
                }
                "R" | "X" => {
                    if let (Some(mut c), Some(out)) = (self.open.take(), Out::decode(rest))
                        && c.seq == seq
                    {
                        c.ret = Some((at, out));
                        c.recovered = kind == "X";
                        done.push(c);
                    }
                }
                _ => {}
            }
        }
        done
    }
}

pub fn read(path: &Path, name: &str) -> Result<History, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, name).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every `<name>.hist` file in `dir`, by name.
pub fn read_all(dir: &Path) -> Vec<History> {
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
            read(p, &name).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

pub fn parse(text: &str, name: &str) -> Result<History, String> {
    let mut h = History {
        name: name.to_string(),
        ..History::default()
    };
    // A torn last line (SIGKILL mid-write) is dropped.
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    for (n, line) in complete.lines().enumerate() {
        let bad = || format!("line {}: cannot parse {line:?}", n + 1);
        if let Some(at) = line.strip_prefix("K ") {
            h.killed_at = Some(at.parse().map_err(|_| bad())?);
            continue;
        }
        let f: Vec<&str> = line.splitn(4, ' ').collect();
        let (kind, seq, at, rest) = match f[..] {
            [k, s, a, r] => (k, s, a, r),
            [k, s, a] => (k, s, a, ""),
            _ => return Err(bad()),
        };
        let seq: u64 = seq.parse().map_err(|_| bad())?;
        let at: u64 = at.parse().map_err(|_| bad())?;
        match kind {
            "I" => h.calls.push(Call {
                seq,
                invoke: at,
                args: rest.split(' ').map(str::to_string).collect(),
                ret: None,
                recovered: false,
                by_proxy: h.killed_at.is_some(),
            }),
            "R" | "X" => {
                let out = Out::decode(rest).ok_or_else(bad)?;
                match h.calls.iter_mut().rev().find(|c| c.seq == seq) {
                    Some(c) if c.ret.is_none() => {
                        c.ret = Some((at, out));
                        c.recovered = kind == "X";
                    }
                    _ => return Err(format!("line {}: reply without its call", n + 1)),
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_recovery_kill_and_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w0.0.hist");
        let mut w = Writer::create(&path).unwrap();
        let args = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let s = w.invoke(&args("CLIENT ID"), 1);
        w.returned(s, 2, &Out::Int(17));
        let s = w.invoke(&args("SEMAPHORE.LEASE sem COUNT 2 KEEPALIVE"), 3);
        let ids = Out::Arr(vec![
            Item::Bulk(b"0123456789abcdef0123456789abcdef".to_vec()),
            Item::Nil,
            Item::Int(-3),
        ]);
        w.returned(s, 4, &ids);
        let s = w.invoke(&args("SEMAPHORE.ACQUIRE sem COUNT 1 BLOCK 50"), 5);
        drop(w);
        let mut w = Writer::append(&path, s + 1).unwrap();
        w.recovered(s, 9, &Out::Int(1));
        w.killed(8);
        let p = w.invoke(&args("SEMAPHORE.RELEASE sem COUNT 1"), 10);
        w.returned(p, 11, &Out::Err("ERR x\ny".into()));
        drop(w);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"I 9 12 SEMA")
            .unwrap();
        let h = read(&path, "w0.0").unwrap();
        assert_eq!(h.client_id(), Some(17));
        assert_eq!(h.killed_at, Some(8));
        assert_eq!(h.calls.len(), 4);
        assert_eq!(h.calls[1].out(), Some(&ids));
        assert_eq!(h.calls[1].opt("count"), Some(2));
        assert!(h.calls[1].flag("KEEPALIVE"));
        assert!(h.calls[2].recovered && !h.calls[2].by_proxy);
        assert_eq!(h.in_flight().map(|c| c.seq), Some(2));
        assert!(h.calls[3].by_proxy);
        assert_eq!(h.calls[3].out(), Some(&Out::Err("ERR x y".into())));
        assert_eq!(h.calls[3].out().unwrap().err_code(), Some("ERR"));
    }

    #[test]
    fn a_follower_reads_only_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w0.0.hist");
        let mut f = Follower::new(&path);
        assert!(f.poll().is_empty());
        let mut w = Writer::create(&path).unwrap();
        let s = w.invoke(&["CLIENT".into(), "ID".into()], 1);
        assert!(f.poll().is_empty());
        w.returned(s, 2, &Out::Int(3));
        let s = w.invoke(&["SEMAPHORE.ACQUIRE".into(), "sem".into()], 3);
        let got = f.poll();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].out(), Some(&Out::Int(3)));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(format!("R {s} 4 IN").as_bytes())
            .unwrap();
        assert!(f.poll().is_empty());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"T 1\n")
            .unwrap();
        let got = f.poll();
        assert_eq!((got.len(), f.invoked), (1, 2));
        assert_eq!(got[0].out(), Some(&Out::Int(1)));
    }
}
