//! R8's checker: read-write and multi-key lock histories (`famhist`).
//!
//! **Safe windows**, as R1's checker (`checker`) builds them: an owner may
//! act on what it holds from the *return* of the grant until the earlier of
//! the *invocation* of the release that frees it (or of any release whose
//! outcome is unknown) and its lease end counted from the *invocation* of
//! the grant or of the renewal / re-entry that set it, less 1 ms (the
//! server counts whole milliseconds of its clock). An owner whose holds are
//! tied to its connection (`KEEPALIVE`) keeps them until its release or its
//! worker's kill, lease or not. A grant the worker never saw, read by the
//! runner from its socket after the kill (`X`), opens a window from that
//! read to its lease end (none for a tied one: the connection was closed
//! first).
//!
//! - `RWLOCK.*`: one window per (key, owner, mode). A window in `write`
//!   mode may overlap no window of another owner; `read` windows overlap
//!   only other `read` windows. With several read holds the window ends at
//!   the earliest of their lease ends (each hold has its own).
//! - `LOCK.MACQUIRE` / `LOCK.ACQUIRE` and their releases: one window per
//!   (key, owner), exclusive.
//!
//! It also flags every reply a correct server cannot give: hold counts that
//! do not follow from the owner's calls, a re-entry or downgrade refused, an
//! upgrade granted or refused without a reason, `NOTOWNER` or renew 0 while
//! a window is open, a multi-key grant of the wrong shape, unexpected errors,
//! hung calls. "While a window is open" means still open at the call's
//! *return*: the server ran the call at some point before that.

use std::collections::HashMap;
use std::fmt;

use crate::famhist::{Call, History, Item, Out};

const MS: u64 = 1_000_000;
const TIED: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Read,
    Write,
    /// A plain (multi-key or single) lock.
    Excl,
}

#[derive(Clone, Debug)]
pub struct Window {
    pub key: String,
    pub owner: String,
    pub mode: Mode,
    pub process: String,
    pub start: u64,
    pub end: u64,
    pub seq: u64,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} by {} [{} .. {}] ({:.1} ms, {} op {})",
            self.key,
            self.mode,
            self.owner,
            self.start,
            if self.end == TIED {
                "tied".into()
            } else {
                self.end.to_string()
            },
            (self.end.min(self.start + 3_600_000 * MS) - self.start) as f64 / 1e6,
            self.process,
            self.seq
        )
    }
}

#[derive(Clone, Debug)]
pub struct Opts {
    pub lease_factor: u64,
    pub tied_grace_ns: u64,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            lease_factor: 1,
            tied_grace_ns: 0,
        }
    }
}

#[derive(Debug, Default)]
pub struct Verdict {
    pub ops: u64,
    pub grants: u64,
    pub windows: u64,
    /// Total time covered by windows (ns).
    pub window_ns: u64,
    pub overlaps: usize,
    pub overlap_examples: Vec<String>,
    pub anomalies: Vec<String>,
    /// Per process: the times of its grants (fresh, not re-entries), for
    /// progress.
    pub grant_times: HashMap<String, Vec<u64>>,
}

impl Verdict {
    pub fn violations(&self) -> usize {
        self.overlaps + self.anomalies.len()
    }
}

#[derive(Clone, Debug)]
struct Open {
    start: u64,
    end: u64,
    seq: u64,
}

#[derive(Default)]
struct Holder {
    tied: bool,
    holds: HashMap<Mode, i64>,
    open: HashMap<Mode, Open>,
}

struct Scan<'a> {
    h: &'a History,
    o: &'a Opts,
    v: &'a mut Verdict,
    windows: &'a mut Vec<Window>,
    state: HashMap<(String, String), Holder>,
    last: u64,
}

impl Scan<'_> {
    fn anomaly(&mut self, c: &Call, what: impl Into<String>) {
        self.v.anomalies.push(format!(
            "{} op {} `{}` -> {:?}: {}",
            self.h.name,
            c.seq,
            c.args.join(" "),
            c.out(),
            what.into()
        ));
    }

    fn lease_end(&self, c: &Call, tied: bool) -> u64 {
        if tied {
            return TIED;
        }
        let px = c.opt("PX").unwrap_or(0).max(0) as u64;
        (c.invoke + px * self.o.lease_factor * MS).saturating_sub(MS)
    }

    fn push(&mut self, key: &str, owner: &str, mode: Mode, w: Open) {
        if w.end > w.start {
            self.v.windows += 1;
            self.v.window_ns += w.end.min(self.last.max(w.start)) - w.start;
            self.windows.push(Window {
                key: key.to_string(),
                owner: owner.to_string(),
                mode,
                process: self.h.name.clone(),
                start: w.start,
                end: w.end,
                seq: w.seq,
            });
        }
    }

    /// Whether `mode`'s window of (key, owner) is open at `t`.
    fn open_at(&self, key: &str, owner: &str, mode: Mode, t: u64) -> bool {
        self.state
            .get(&(key.to_string(), owner.to_string()))
            .and_then(|s| s.open.get(&mode))
            .is_some_and(|w| t < w.end)
    }

    fn holds(&self, key: &str, owner: &str, mode: Mode) -> i64 {
        self.state
            .get(&(key.to_string(), owner.to_string()))
            .and_then(|s| s.holds.get(&mode).copied())
            .unwrap_or(0)
    }

    /// A grant of `mode` answered `n` holds at `ret` (by `c`, lease from
    /// its invocation).
    fn granted(&mut self, c: &Call, key: &str, owner: &str, mode: Mode, n: i64, ret: u64) {
        let tied_call = c.flag("KEEPALIVE");
        // Held for certain while the server ran the call (its window still
        // open at the return): then the count must follow exactly.
        let certain = self.open_at(key, owner, mode, ret);
        let before = self.holds(key, owner, mode);
        if certain && n != before + 1 {
            self.anomaly(c, format!("{n} holds, expected {}", before + 1));
        } else if !certain && !(1..=before + 1).contains(&n) {
            self.anomaly(c, format!("{n} holds, expected 1 to {}", before + 1));
        }
        // A continued hold only if the server counted the earlier ones.
        let continued = before > 0 && n > 1 && self.open_at(key, owner, mode, c.invoke);
        if !continued {
            self.v.grants += 1;
            self.v
                .grant_times
                .entry(self.h.name.clone())
                .or_default()
                .push(ret);
        }
        let k = (key.to_string(), owner.to_string());
        let st = self.state.entry(k.clone()).or_default();
        st.tied |= tied_call;
        let tied = st.tied;
        st.holds.insert(mode, n);
        let end = self.lease_end(c, tied);
        if c.recovered && tied {
            // The connection closed before the runner read this.
            return;
        }
        let st = self.state.get_mut(&k).expect("just made");
        match st.open.get_mut(&mode) {
            Some(w) if continued => {
                // Re-entry: a write (or plain) lock's lease is set from now;
                // another read hold has its own, the window ends at the
                // earliest.
                w.end = if mode == Mode::Read {
                    w.end.min(end)
                } else {
                    end
                };
            }
            _ => {
                let old = st.open.insert(
                    mode,
                    Open {
                        start: ret,
                        end,
                        seq: c.seq,
                    },
                );
                if let Some(w) = old {
                    self.push(key, owner, mode, w);
                }
            }
        }
    }

    /// A release of `mode` answered `left` (None: unknown or NOTOWNER).
    fn released(&mut self, c: &Call, key: &str, owner: &str, mode: Mode, left: Option<i64>) {
        let k = (key.to_string(), owner.to_string());
        let Some(st) = self.state.get_mut(&k) else {
            return;
        };
        match left {
            Some(n) if n > 0 => {
                st.holds.insert(mode, n);
            }
            _ => {
                st.holds.insert(mode, 0);
                if let Some(mut w) = st.open.remove(&mode) {
                    w.end = w.end.min(c.invoke);
                    self.push(key, owner, mode, w);
                }
            }
        }
    }

    /// RENEW answered 1: every open window of the owner gets the new lease
    /// (tied with KEEPALIVE, untied without).
    fn renewed(&mut self, c: &Call, key: &str, owner: &str, ret: u64) {
        let k = (key.to_string(), owner.to_string());
        let tied = c.flag("KEEPALIVE");
        let end = self.lease_end(c, tied);
        let Some(st) = self.state.get_mut(&k) else {
            self.anomaly(c, "renewed a lock this owner does not hold");
            return;
        };
        st.tied = tied;
        let modes: Vec<Mode> = st
            .holds
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(m, _)| *m)
            .collect();
        let mut closed = Vec::new();
        for m in modes {
            match st.open.get_mut(&m) {
                Some(w) if c.invoke < w.end => w.end = end,
                _ => {
                    if let Some(w) = st.open.insert(
                        m,
                        Open {
                            start: ret,
                            end,
                            seq: c.seq,
                        },
                    ) {
                        closed.push((m, w));
                    }
                }
            }
        }
        for (m, w) in closed {
            self.push(key, owner, m, w);
        }
    }

    fn any_open(&self, key: &str, owner: &str, t: u64) -> bool {
        [Mode::Read, Mode::Write, Mode::Excl]
            .iter()
            .any(|m| self.open_at(key, owner, *m, t))
    }

    // The replies it flags are checked in the arm's body, not in a guard:
    // a guard that fails falls through to "unexpected reply" (clippy's
    // collapsible_match fix did exactly that and flagged every legitimate
    // NOUPGRADE and busy nil).
    #[allow(clippy::collapsible_match)]
    fn call(&mut self, c: &Call) {
        self.last = self.last.max(c.invoke);
        if let Some((t, _)) = &c.ret {
            self.last = self.last.max(*t);
        }
        let cmd = c.cmd();
        if let Some(Out::Hung(_)) = c.out() {
            self.anomaly(c, "no reply in time");
            return;
        }
        let a = &c.args;
        match cmd.as_str() {
            "RWLOCK.ACQUIRE" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                let mode = if a[3].eq_ignore_ascii_case("WRITE") {
                    Mode::Write
                } else {
                    Mode::Read
                };
                let reads = self.holds(key, owner, Mode::Read);
                let writes = self.holds(key, owner, Mode::Write);
                // Certainly held while the server ran the call.
                let ret = c.ret.as_ref().map_or(c.invoke, |(t, _)| *t);
                let read_open = self.open_at(key, owner, Mode::Read, ret);
                let write_open = self.open_at(key, owner, Mode::Write, ret);
                let certain_upgrade = mode == Mode::Write && read_open && writes == 0;
                match &c.ret {
                    Some((t, Out::Int(n))) => {
                        if certain_upgrade {
                            self.anomaly(c, "an upgrade (WRITE while holding READ) was granted");
                        }
                        self.granted(c, key, owner, mode, *n, *t);
                    }
                    Some((_, Out::Nil)) => {
                        let reentry = match mode {
                            Mode::Read => read_open || write_open,
                            _ => write_open,
                        };
                        if reentry {
                            self.anomaly(c, "a re-entry or downgrade was refused");
                        }
                    }
                    Some((_, out @ Out::Err(_))) if out.err_code() == Some("NOUPGRADE") => {
                        // Right only for WRITE by an owner holding READ
                        // (certainly, or possibly: its read window may have
                        // ended while the server still had the hold).
                        if !(mode == Mode::Write && reads > 0 && writes == 0) {
                            self.anomaly(c, "NOUPGRADE without a read hold");
                        }
                    }
                    None => {}
                    Some(_) => self.anomaly(c, "unexpected reply"),
                }
            }
            "RWLOCK.RELEASE" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                let mode = if a[3].eq_ignore_ascii_case("WRITE") {
                    Mode::Write
                } else {
                    Mode::Read
                };
                self.release_reply(c, key, owner, mode);
            }
            "RWLOCK.RENEW" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                self.renew_reply(c, key, owner);
            }
            "LOCK.ACQUIRE" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                match &c.ret {
                    Some((t, Out::Int(n))) => self.granted(c, key, owner, Mode::Excl, *n, *t),
                    Some((t, Out::Nil)) => {
                        if self.open_at(key, owner, Mode::Excl, *t) {
                            self.anomaly(c, "a re-entry was refused");
                        }
                    }
                    None => {}
                    Some(_) => self.anomaly(c, "unexpected reply"),
                }
            }
            "LOCK.RELEASE" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                self.release_reply(c, key, owner, Mode::Excl);
            }
            "LOCK.RENEW" => {
                self.v.ops += 1;
                let (key, owner) = (a[1].as_str(), a[2].as_str());
                self.renew_reply(c, key, owner);
            }
            "LOCK.MACQUIRE" => {
                self.v.ops += 1;
                let (keys, owner) = multi_args(a);
                match &c.ret {
                    Some((t, Out::Arr(items))) => {
                        if items.len() != keys.len() {
                            self.anomaly(c, "a grant of another number of keys");
                            return;
                        }
                        let fresh = keys.iter().all(|k| self.holds(k, owner, Mode::Excl) == 0)
                            || items.iter().all(|i| *i == Item::Int(1));
                        for (k, i) in keys.iter().zip(items) {
                            let Item::Int(n) = i else {
                                self.anomaly(c, "a count that is not an integer");
                                continue;
                            };
                            self.granted(c, k, owner, Mode::Excl, *n, *t);
                        }
                        // One grant for the set, not one per key.
                        if fresh && keys.len() > 1 {
                            self.v.grants -= keys.len() as u64 - 1;
                            if let Some(g) = self.v.grant_times.get_mut(&self.h.name) {
                                let keep = g.len() - (keys.len() - 1);
                                g.truncate(keep);
                            }
                        }
                    }
                    Some((t, Out::Nil)) => {
                        if keys.iter().all(|k| self.open_at(k, owner, Mode::Excl, *t)) {
                            self.anomaly(c, "a re-entry of the whole set was refused");
                        }
                    }
                    None => {}
                    Some(_) => self.anomaly(c, "unexpected reply"),
                }
            }
            "LOCK.MRELEASE" => {
                self.v.ops += 1;
                let (keys, owner) = multi_args(a);
                match &c.ret {
                    Some((t, Out::Arr(items))) if items.len() == keys.len() => {
                        for (k, i) in keys.iter().zip(items) {
                            let left = match i {
                                Item::Int(n) => *n,
                                _ => 0,
                            };
                            let expected = self.holds(k, owner, Mode::Excl) - 1;
                            if self.open_at(k, owner, Mode::Excl, *t) && left != expected {
                                self.anomaly(
                                    c,
                                    format!("{k}: {left} holds left, expected {expected}"),
                                );
                            }
                            self.released(c, k, owner, Mode::Excl, Some(left));
                        }
                    }
                    Some((t, out @ Out::Err(_))) if out.err_code() == Some("NOTOWNER") => {
                        if keys.iter().all(|k| self.open_at(k, owner, Mode::Excl, *t)) {
                            self.anomaly(c, "NOTOWNER while every key's window was open");
                        }
                        for k in &keys {
                            self.released(c, k, owner, Mode::Excl, None);
                        }
                    }
                    other => {
                        if other.is_some() {
                            self.anomaly(c, "unexpected reply");
                        }
                        for k in &keys {
                            self.released(c, k, owner, Mode::Excl, None);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn release_reply(&mut self, c: &Call, key: &str, owner: &str, mode: Mode) {
        // Certainly held while the server ran it.
        let ret = c.ret.as_ref().map_or(c.invoke, |(t, _)| *t);
        let open = self.open_at(key, owner, mode, ret);
        match c.out() {
            Some(Out::Int(n)) => {
                let expected = self.holds(key, owner, mode) - 1;
                if open && *n != expected {
                    self.anomaly(c, format!("{n} holds left, expected {expected}"));
                }
                self.released(c, key, owner, mode, Some(*n));
            }
            Some(out @ Out::Err(_)) if out.err_code() == Some("NOTOWNER") => {
                if open {
                    self.anomaly(c, "NOTOWNER inside the window");
                }
                self.released(c, key, owner, mode, None);
            }
            None => self.released(c, key, owner, mode, None),
            Some(_) => {
                self.anomaly(c, "unexpected reply");
                self.released(c, key, owner, mode, None);
            }
        }
    }

    fn renew_reply(&mut self, c: &Call, key: &str, owner: &str) {
        match &c.ret {
            Some((t, Out::Int(1))) => self.renewed(c, key, owner, *t),
            Some((t, Out::Int(0))) => {
                if self.any_open(key, owner, *t) {
                    self.anomaly(c, "renew answered 0 inside the window");
                }
            }
            None => {
                // May have shortened the lease (untied now, if it was).
                let end = self.lease_end(c, c.flag("KEEPALIVE"));
                if let Some(st) = self.state.get_mut(&(key.to_string(), owner.to_string())) {
                    for w in st.open.values_mut() {
                        w.end = w.end.min(end);
                    }
                }
            }
            Some(_) => self.anomaly(c, "unexpected reply"),
        }
    }

    /// What is still open at the end: tied windows end at the kill.
    fn finish(mut self) {
        let kill = self.h.killed_at;
        let state = std::mem::take(&mut self.state);
        for ((key, owner), st) in state {
            for (mode, mut w) in st.open {
                if w.end == TIED {
                    w.end = match kill {
                        Some(k) => k + self.o.tied_grace_ns,
                        None => self.last,
                    };
                }
                self.push(&key, &owner, mode, w);
            }
        }
    }
}

/// `LOCK.MACQUIRE|MRELEASE numkeys key... owner ...`: (keys, owner).
pub fn multi_args(a: &[String]) -> (Vec<String>, &str) {
    let n: usize = a.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    let keys = a.iter().skip(2).take(n).cloned().collect();
    let owner = a.get(2 + n).map(String::as_str).unwrap_or("");
    (keys, owner)
}

/// Every pair of windows of different owners on one key that overlap, where
/// at least one is not a read.
pub fn overlaps(mut windows: Vec<Window>) -> (usize, Vec<String>) {
    windows.sort_by(|a, b| (&a.key, a.start, a.end).cmp(&(&b.key, b.start, b.end)));
    let mut found = 0;
    let mut examples = Vec::new();
    let mut active: Vec<&Window> = Vec::new();
    let mut current_key = String::new();
    for w in &windows {
        if w.key != current_key {
            active.clear();
            current_key = w.key.clone();
        }
        active.retain(|a| a.end > w.start);
        for a in &active {
            if a.owner != w.owner && !(a.mode == Mode::Read && w.mode == Mode::Read) {
                found += 1;
                if examples.len() < 5 {
                    examples.push(format!("{a} overlaps {w}"));
                }
            }
        }
        active.push(w);
    }
    (found, examples)
}

pub fn check(hists: &[History], o: &Opts) -> Verdict {
    let mut v = Verdict::default();
    let mut windows = Vec::new();
    for h in hists {
        let mut s = Scan {
            h,
            o,
            v: &mut v,
            windows: &mut windows,
            state: HashMap::new(),
            last: 0,
        };
        for c in &h.calls {
            s.call(c);
        }
        s.finish();
    }
    let (n, examples) = overlaps(windows);
    v.overlaps = n;
    v.overlap_examples = examples;
    v
}

/// The longest time any process went without a fresh grant (from its first
/// call to its first grant, between grants, from its last grant to its last
/// call), and the processes that lived at least `min_life` without any.
pub fn progress(hists: &[History], v: &Verdict, min_life: u64) -> (u64, Vec<String>) {
    let mut longest = 0;
    let mut starved = Vec::new();
    for h in hists {
        let own: Vec<&Call> = h.own().collect();
        let (Some(first), Some(last)) = (own.first(), own.last()) else {
            continue;
        };
        let end = last.ret.as_ref().map_or(last.invoke, |(t, _)| *t);
        let end = h.killed_at.unwrap_or(end).max(end);
        let mut times = v.grant_times.get(&h.name).cloned().unwrap_or_default();
        times.sort_unstable();
        if times.is_empty() {
            if end - first.invoke >= min_life {
                starved.push(format!(
                    "{} made no grant in {:.1} s",
                    h.name,
                    (end - first.invoke) as f64 / 1e9
                ));
            }
            continue;
        }
        let mut prev = first.invoke;
        for t in times.iter().copied().chain([end]) {
            longest = longest.max(t.saturating_sub(prev));
            prev = t;
        }
    }
    (longest, starved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::famhist::parse;

    fn hist(name: &str, text: &str) -> History {
        parse(text, name).unwrap()
    }

    #[test]
    fn readers_share_writers_do_not() {
        let r1 = hist(
            "r1",
            "I 0 0 RWLOCK.ACQUIRE k a READ PX 1000\nR 0 1000000 INT 1\n\
             I 1 100000000 RWLOCK.RELEASE k a READ\nR 1 101000000 INT 0\n",
        );
        let r2 = hist(
            "r2",
            "I 0 10000000 RWLOCK.ACQUIRE k b READ PX 1000\nR 0 11000000 INT 1\n\
             I 1 90000000 RWLOCK.RELEASE k b READ\nR 1 91000000 INT 0\n",
        );
        let w_after = hist(
            "w",
            "I 0 20000000 RWLOCK.ACQUIRE k c WRITE PX 1000 BLOCK 500\nR 0 100500000 INT 1\n\
             I 1 150000000 RWLOCK.RELEASE k c WRITE\nR 1 151000000 INT 0\n",
        );
        let v = check(&[r1.clone(), r2.clone(), w_after], &Opts::default());
        assert_eq!(v.violations(), 0, "{v:?}");
        assert_eq!(v.grants, 3);
        let w_during = hist(
            "w",
            "I 0 20000000 RWLOCK.ACQUIRE k c WRITE PX 1000 BLOCK 500\nR 0 95000000 INT 1\n\
             I 1 150000000 RWLOCK.RELEASE k c WRITE\nR 1 151000000 INT 0\n",
        );
        let v = check(&[r1, r2, w_during], &Opts::default());
        assert_eq!(v.overlaps, 1, "{v:?}");
    }

    #[test]
    fn downgrade_and_upgrade() {
        // WRITE, then READ by the same owner (downgrade), then WRITE released:
        // another reader may join after the write release only.
        let w = hist(
            "w",
            "I 0 0 RWLOCK.ACQUIRE k a WRITE PX 1000\nR 0 1000000 INT 1\n\
             I 1 2000000 RWLOCK.ACQUIRE k a READ PX 1000\nR 1 3000000 INT 1\n\
             I 2 50000000 RWLOCK.RELEASE k a WRITE\nR 2 51000000 INT 0\n\
             I 3 80000000 RWLOCK.RELEASE k a READ\nR 3 81000000 INT 0\n",
        );
        let r = hist(
            "r",
            "I 0 10000000 RWLOCK.ACQUIRE k b READ PX 1000 BLOCK 100\nR 0 52000000 INT 1\n\
             I 1 60000000 RWLOCK.RELEASE k b READ\nR 1 61000000 INT 0\n",
        );
        assert_eq!(check(&[w.clone(), r], &Opts::default()).violations(), 0);
        let early = hist(
            "r",
            "I 0 10000000 RWLOCK.ACQUIRE k b READ PX 1000 BLOCK 100\nR 0 40000000 INT 1\n",
        );
        assert_eq!(check(&[w, early], &Opts::default()).overlaps, 1);
        // READ then WRITE by one owner: NOUPGRADE is right, a grant is not.
        let up = hist(
            "u",
            "I 0 0 RWLOCK.ACQUIRE k a READ PX 1000\nR 0 1 INT 1\n\
             I 1 2 RWLOCK.ACQUIRE k a WRITE PX 1000\nR 1 3 ERR NOUPGRADE release READ first\n\
             I 2 4 RWLOCK.ACQUIRE k a WRITE PX 1000\nR 2 5 INT 1\n\
             I 3 6 RWLOCK.ACQUIRE k z WRITE PX 1000\nR 3 7 ERR NOUPGRADE release READ first\n\
             I 4 8 RWLOCK.ACQUIRE k a READ PX 1000\nR 4 9 NIL\n",
        );
        let v = check(&[up], &Opts::default());
        // granted upgrade; NOUPGRADE without a read hold; re-entry refused.
        assert_eq!(v.anomalies.len(), 3, "{:#?}", v.anomalies);
    }

    #[test]
    fn leases_and_kills() {
        // A plain writer walks away (PX 100); a reader enters at 120 ms.
        let w = hist(
            "w",
            "I 0 0 RWLOCK.ACQUIRE k a WRITE PX 100\nR 0 1000000 INT 1\n",
        );
        let r = hist(
            "r",
            "I 0 5000000 RWLOCK.ACQUIRE k b READ PX 100 BLOCK 500\nR 0 120000000 INT 1\n",
        );
        let hs = [w, r];
        assert_eq!(check(&hs, &Opts::default()).violations(), 0);
        let tripled = Opts {
            lease_factor: 3,
            ..Opts::default()
        };
        assert_eq!(check(&hs, &tripled).overlaps, 1);
        // A tied writer holds past its lease until killed at 500 ms.
        let t = hist(
            "t",
            "I 0 0 RWLOCK.ACQUIRE k a WRITE PX 100 KEEPALIVE\nR 0 1000000 INT 1\nK 500000000\n",
        );
        let after = hist(
            "r",
            "I 0 5000000 RWLOCK.ACQUIRE k b READ PX 1000 BLOCK 0\nR 0 503000000 INT 1\n",
        );
        let hs = [t.clone(), after];
        assert_eq!(check(&hs, &Opts::default()).violations(), 0);
        let late = Opts {
            tied_grace_ns: 50 * MS,
            ..Opts::default()
        };
        assert_eq!(check(&hs, &late).overlaps, 1);
        let before = hist(
            "r",
            "I 0 5000000 RWLOCK.ACQUIRE k b READ PX 1000 BLOCK 0\nR 0 300000000 INT 1\n",
        );
        assert_eq!(check(&[t, before], &Opts::default()).overlaps, 1);
    }

    #[test]
    fn a_slow_reentry_that_finds_the_lock_lapsed_starts_a_new_window() {
        // a: WRITE PX 50; a re-entry invoked at 40 ms, answered at 60 ms with
        // a fresh grant (1): the lease had lapsed, and b held it in between.
        let a = hist(
            "a",
            "I 0 0 RWLOCK.ACQUIRE k a WRITE PX 50\nR 0 1000000 INT 1\n\
             I 1 40000000 RWLOCK.ACQUIRE k a WRITE PX 50\nR 1 60000000 INT 1\n\
             I 2 70000000 RWLOCK.RELEASE k a WRITE\nR 2 71000000 INT 0\n",
        );
        let b = hist(
            "b",
            "I 0 10000000 RWLOCK.ACQUIRE k b WRITE PX 50 BLOCK 100\nR 0 52000000 INT 1\n\
             I 1 55000000 RWLOCK.RELEASE k b WRITE\nR 1 55500000 INT 0\n",
        );
        let v = check(&[a, b], &Opts::default());
        assert_eq!(v.violations(), 0, "{v:?}");
        // A NOTOWNER answered after the lease may have run after it.
        let slow = hist(
            "a",
            "I 0 0 RWLOCK.ACQUIRE k a READ PX 50\nR 0 1000000 INT 1\n\
             I 1 40000000 RWLOCK.RELEASE k a READ\nR 1 60000000 ERR NOTOWNER gone\n",
        );
        assert_eq!(check(&[slow], &Opts::default()).violations(), 0);
    }

    #[test]
    fn multi_key_windows() {
        let a = hist(
            "a",
            "I 0 0 LOCK.MACQUIRE 2 x y a:x+y PX 1000\nR 0 1000000 ARR i1 i1\n\
             I 1 2000000 LOCK.MACQUIRE 2 x y a:x+y PX 1000\nR 1 3000000 ARR i2 i2\n\
             I 2 40000000 LOCK.MRELEASE 2 x y a:x+y\nR 2 41000000 ARR i1 i1\n\
             I 3 50000000 LOCK.MRELEASE 2 x y a:x+y\nR 3 51000000 ARR i0 i0\n",
        );
        let b = hist(
            "b",
            "I 0 10000000 LOCK.MACQUIRE 2 y z b:y+z PX 1000 BLOCK 500\nR 0 52000000 ARR i1 i1\n\
             I 1 60000000 LOCK.MRELEASE 2 y z b:y+z\nR 1 61000000 ARR i0 i0\n",
        );
        let v = check(&[a.clone(), b], &Opts::default());
        assert_eq!(v.violations(), 0, "{v:?}");
        assert_eq!(v.grants, 2);
        let (longest, starved) = progress(std::slice::from_ref(&a), &v, 1);
        assert!(starved.is_empty());
        assert_eq!(longest, 50000000);
        let c = hist(
            "c",
            "I 0 10000000 LOCK.ACQUIRE y c:y PX 1000 BLOCK 500\nR 0 45000000 INT 1\n",
        );
        assert_eq!(check(&[a.clone(), c], &Opts::default()).overlaps, 1);
        let bad = hist(
            "d",
            "I 0 0 LOCK.MACQUIRE 2 p q d:p+q PX 1000\nR 0 1 ARR i1\n\
             I 1 2 LOCK.MACQUIRE 2 p q e:p+q PX 1000\nR 1 3 ARR i1 i1\n\
             I 2 4 LOCK.MRELEASE 2 p q e:p+q\nR 2 5 ERR NOTOWNER no\n",
        );
        assert_eq!(check(&[bad], &Opts::default()).anomalies.len(), 2);
    }
}
