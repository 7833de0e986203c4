//! The lock-history checker (Jepsen style): pure, deterministic, and judged
//! only by what the clients saw on one monotonic clock.
//!
//! **Safe windows.** An owner may act on a lock from the *return* of the
//! acquire that granted it until the earlier of
//! - the *invocation* of the release that frees it (or of any release whose
//!   outcome is unknown), and
//! - the lease end counted from the *invocation* of the grant, or of the
//!   last renew / re-entry that extended it.
//!
//! Both ends are conservative: the server received the call after its
//! invocation, so its deadline (its receipt time + lease, and Redis keeps a
//! key until `now > deadline`) is never earlier than ours, and a grant is
//! certain only once its reply is back. A renew or re-entry invoked after the
//! window already ended starts a new window at its return. So if the server
//! is right, no two owners' windows of one key ever overlap; any overlap is a
//! double grant.
//!
//! Besides overlaps the checker flags everything else a correct server
//! cannot answer: a holder told NOTOWNER / renew 0 / a fresh count 1 while
//! its window is still open (a lock lost before its lease), hold counts that
//! do not follow the owner's own calls, grants out of nowhere, and any error
//! the workload never provokes.
//!
//! **Failover answers.** `NOREPLICAS` (REPLICAS n ms) means the call was
//! not acknowledged and was undone: an acquire granted nothing (a re-entry
//! keeps the lease it set, so the window ends no later than that lease), a
//! renew changed nothing. `UNBLOCKED` / `READONLY` (a waiter on a primary
//! that was demoted, a call that reached it afterwards) granted, renewed or
//! released nothing that the windows rely on.
//!
//! **Protected counters.** Inside a window a worker reads a counter (GET),
//! sleeps 0–20 ms, and writes it back plus one (SET). With exclusion the
//! final counter equals the number of completed sections; a SET whose
//! reply never came (killed worker) may or may not count. A section whose
//! SET returned after its window had ended ("late": the client itself was
//! paused past its lease, Kleppmann's case) is no fault of the server; the
//! checker reports such sections and does not call a counter mismatch a
//! violation when any exist, since a late write *may* legitimately be lost.
//!
//! **Replica acknowledgements (cluster runs).** Where a primary can be
//! killed, a write counts only if a replica acknowledged it: the worker
//! follows each grant, re-entry, renewal and counter write with `WAIT 1`
//! (a `Wait` op). If that WAIT does not report a replica, the write is
//! treated as never confirmed: a grant opens no window, an extension is
//! undone, a counter write becomes "unknown" (the worker abandons the lock).
//! Histories without `Wait` ops (R1) are judged exactly as before.
//!
//! **Hung calls.** A call the client gave up waiting for (`Hung`: no reply
//! within its BLOCK time + 1 s) is a violation; its effect is unknown.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::history::{Event, Op, Outcome, hex};

/// One process's history (a worker incarnation), events in order.
pub struct Process<'a> {
    pub name: String,
    pub events: &'a [Event],
    /// When the runner SIGKILLed it (same clock), if it did: a lock tied to
    /// its connection (KEEPALIVE) is its until then, lease or not.
    pub killed_at: Option<u64>,
}

impl<'a> Process<'a> {
    /// A process for each (name, events) history, SIGKILLed when
    /// `killed_at(name)` says.
    pub fn all(
        histories: &'a [(String, Vec<Event>)],
        killed_at: impl Fn(&str) -> Option<u64>,
    ) -> Vec<Process<'a>> {
        histories
            .iter()
            .map(|(name, events)| Process {
                name: name.clone(),
                events,
                killed_at: killed_at(name),
            })
            .collect()
    }
}

/// Negative control: the overlaps found in the same histories when every
/// lease is taken as 3x what was granted (a client that trusts its lease
/// past the server's deadline). Non-zero shows the checker has teeth on
/// this data: expired leases really were taken over.
pub fn overlaps_with_leases_tripled(
    histories: &[(String, Vec<Event>)],
    killed_at: impl Fn(&str) -> Option<u64>,
) -> usize {
    let inflated: Vec<(String, Vec<Event>)> = histories
        .iter()
        .map(|(name, events)| {
            let events = events
                .iter()
                .cloned()
                .map(|mut e| {
                    if let Op::Acquire { lease_ms, .. } | Op::Renew { lease_ms, .. } = &mut e.op {
                        *lease_ms *= 3;
                    }
                    e
                })
                .collect();
            (name.clone(), events)
        })
        .collect();
    check(&Process::all(&inflated, killed_at), &HashMap::new()).overlaps()
}

/// The end of a window tied to its connection: none until the connection
/// closes (a release, or the process's death).
const TIED: u64 = u64::MAX;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub key: String,
    pub owner: Vec<u8>,
    pub process: String,
    pub start: u64,
    pub end: u64,
    /// Sequence number of the grant that opened it.
    pub from_seq: u64,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} owner {} [{} .. {}] ({} ms, from {} op {})",
            self.key,
            String::from_utf8_lossy(&self.owner),
            self.start,
            self.end,
            (self.end - self.start) as f64 / 1e6,
            self.process,
            self.from_seq
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two owners' safe windows overlap: a double grant.
    Overlap { first: Window, second: Window },
    /// The server said the owner no longer holds the lock (or granted it
    /// afresh) while its safe window was still open: for the whole call,
    /// since the server may have seen it as late as its return (a slow
    /// reply, a paused server).
    LostEarly {
        process: String,
        seq: u64,
        what: String,
    },
    /// A hold count that does not follow from the owner's own calls.
    Count {
        process: String,
        seq: u64,
        expected: i64,
        got: i64,
    },
    /// A success for an owner that was never granted the lock.
    Phantom {
        process: String,
        seq: u64,
        what: String,
    },
    /// A reply the workload never provokes.
    Unexpected {
        process: String,
        seq: u64,
        what: String,
    },
    /// No reply within the call's BLOCK time + 1 s (or its fixed limit).
    Hung {
        process: String,
        seq: u64,
        what: String,
    },
    /// The protected counter does not equal the completed sections.
    Counter {
        key: String,
        completed: u64,
        unknown: u64,
        actual: i64,
    },
    /// A SIGKILLed process's tied lock did not move on (to a waiter, or
    /// free) within the bound after the kill.
    NotMovedOn {
        process: String,
        key: String,
        owner: Vec<u8>,
        /// µs from the kill until it moved, None if it never did.
        after_us: Option<u64>,
        bound_us: u64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap { first, second } => {
                write!(f, "OVERLAP: {first} and {second}")
            }
            Violation::LostEarly { process, seq, what } => {
                write!(f, "LOST EARLY: {process} op {seq}: {what}")
            }
            Violation::Count {
                process,
                seq,
                expected,
                got,
            } => write!(
                f,
                "COUNT: {process} op {seq}: expected hold count {expected}, got {got}"
            ),
            Violation::Phantom { process, seq, what } => {
                write!(f, "PHANTOM: {process} op {seq}: {what}")
            }
            Violation::Unexpected { process, seq, what } => {
                write!(f, "UNEXPECTED: {process} op {seq}: {what}")
            }
            Violation::Hung { process, seq, what } => {
                write!(f, "HUNG: {process} op {seq}: {what}")
            }
            Violation::Counter {
                key,
                completed,
                unknown,
                actual,
            } => write!(
                f,
                "COUNTER: {key}: {completed} completed sections (+{unknown} unknown), counter is {actual}"
            ),
            Violation::NotMovedOn {
                process,
                key,
                owner,
                after_us,
                bound_us,
            } => match after_us {
                Some(us) => write!(
                    f,
                    "NOT MOVED ON: {process} killed holding {key} (owner {}, tied): moved on only {:.1} ms later (bound {:.0} ms)",
                    owner_text(owner),
                    *us as f64 / 1e3,
                    *bound_us as f64 / 1e3
                ),
                None => write!(
                    f,
                    "NOT MOVED ON: {process} killed holding {key} (owner {}, tied): still held when the runner gave up",
                    owner_text(owner)
                ),
            },
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Operations read from the histories.
    pub ops: u64,
    /// Of which the reply was seen (the others: killed in flight).
    pub completed_ops: u64,
    pub grants: u64,
    pub windows: u64,
    /// Sections whose SET was acknowledged.
    pub sections: u64,
    /// Sections whose SET returned after the window ended.
    pub late_sections: u64,
    /// SETs in flight when their worker was killed.
    pub unknown_sets: u64,
    /// Sum of all window lengths, ns (how much exclusive time was checked).
    pub window_ns: u128,
    /// Writes followed by a `Wait` that saw a replica / that did not.
    pub confirmed: u64,
    pub unconfirmed: u64,
    /// Calls given up on (also listed as violations).
    pub hung: u64,
    pub violations: Vec<Violation>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many of the violations are two owners at once.
    pub fn overlaps(&self) -> usize {
        self.violations
            .iter()
            .filter(|v| matches!(v, Violation::Overlap { .. }))
            .count()
    }
}

/// The window an owner currently has on a key, as one process sees it.
#[derive(Clone)]
struct Open {
    start: u64,
    /// `TIED` while tied to the connection.
    end: u64,
    holds: i64,
    from_seq: u64,
}

/// The last write of a process, until its `Wait` confirms or undoes it.
enum Pending {
    /// A grant, re-entry or renewal of (key, owner); `before`: the window
    /// as it was (None: there was none).
    Window {
        key: (String, Vec<u8>),
        before: Option<Open>,
    },
    /// A counter write counted as a completed section (`late` if it was).
    Section { key: String, late: bool },
}

#[derive(Default)]
struct Sections {
    completed: u64,
    unknown: u64,
    late: u64,
}

/// Checks all histories of a run. `counters`: the final value of each
/// key's protected counter (missing: the counter was never written).
pub fn check(processes: &[Process<'_>], counters: &HashMap<String, i64>) -> Verdict {
    let mut v = Verdict::default();
    let mut windows: Vec<Window> = Vec::new();
    let mut sections: BTreeMap<String, Sections> = BTreeMap::new();
    for p in processes {
        check_process(p, &mut v, &mut windows, &mut sections);
    }
    v.windows = windows.len() as u64;
    v.window_ns = windows.iter().map(|w| u128::from(w.end - w.start)).sum();
    v.violations.extend(overlaps(windows));
    let keys: std::collections::BTreeSet<&String> =
        sections.keys().chain(counters.keys()).collect();
    for key in keys {
        let s = sections.get(key.as_str());
        let (completed, unknown, late) = s.map_or((0, 0, 0), |s| (s.completed, s.unknown, s.late));
        let actual = counters.get(key.as_str()).copied().unwrap_or(0);
        let consistent = actual >= completed as i64 && actual <= (completed + unknown) as i64;
        if !consistent && late == 0 {
            v.violations.push(Violation::Counter {
                key: key.clone(),
                completed,
                unknown,
                actual,
            });
        }
    }
    for s in sections.values() {
        v.sections += s.completed;
        v.unknown_sets += s.unknown;
        v.late_sections += s.late;
    }
    v
}

fn check_process(
    p: &Process<'_>,
    v: &mut Verdict,
    windows: &mut Vec<Window>,
    sections: &mut BTreeMap<String, Sections>,
) {
    let mut open: BTreeMap<(String, Vec<u8>), Open> = BTreeMap::new();
    // Per key: the owner of the section in progress (set by GET).
    let mut in_section: HashMap<String, Option<Vec<u8>>> = HashMap::new();
    // Which owner this process last got each key for (`*` owners vary).
    let mut owner_of: HashMap<String, Vec<u8>> = HashMap::new();
    let name = || p.name.clone();

    let close = |open: &mut BTreeMap<(String, Vec<u8>), Open>,
                 windows: &mut Vec<Window>,
                 key: &str,
                 owner: &[u8],
                 at: u64| {
        if let Some(o) = open.remove(&(key.to_string(), owner.to_vec())) {
            let end = o.end.min(at);
            if end > o.start {
                windows.push(Window {
                    key: key.to_string(),
                    owner: owner.to_vec(),
                    process: p.name.clone(),
                    start: o.start,
                    end,
                    from_seq: o.from_seq,
                });
            }
        }
    };

    let mut pending: Option<Pending> = None;
    for e in p.events {
        v.ops += 1;
        if let Op::Wait { key } = &e.op {
            let acked = matches!(&e.ret, Some((_, Outcome::Int(n))) if *n >= 1);
            if let Some((_, Outcome::Hung(text))) = &e.ret {
                v.hung += 1;
                v.violations.push(Violation::Hung {
                    process: name(),
                    seq: e.seq,
                    what: format!("WAIT after a write on {key}: {text}"),
                });
            }
            match pending.take() {
                Some(_) if acked => v.confirmed += 1,
                Some(Pending::Window { key, before }) => {
                    v.unconfirmed += 1;
                    match before {
                        Some(o) => {
                            open.insert(key, o);
                        }
                        None => {
                            open.remove(&key);
                        }
                    }
                }
                Some(Pending::Section { key, late }) => {
                    v.unconfirmed += 1;
                    let s = sections.entry(key).or_default();
                    s.completed -= 1;
                    s.unknown += 1;
                    if late {
                        s.late -= 1;
                    }
                }
                None => {}
            }
            if e.ret.is_some() {
                v.completed_ops += 1;
            }
            continue;
        }
        pending = None;
        let hung = match &e.ret {
            Some((_, Outcome::Hung(text))) => Some(text),
            _ => None,
        };
        if let Some(text) = hung {
            v.hung += 1;
            v.violations.push(Violation::Hung {
                process: name(),
                seq: e.seq,
                what: format!("{:?}: {text}", e.op),
            });
        }
        let known = e.ret.as_ref().filter(|_| hung.is_none());
        let Some((ret, outcome)) = known else {
            // No reply: the call may or may not have taken effect.
            match &e.op {
                // A release that may have happened ends the window at its invocation.
                Op::Release { key, owner } => close(&mut open, windows, key, owner, e.invoke),
                // A renew or re-entry that may have happened may have
                // shortened the lease.
                Op::Renew {
                    key,
                    owner,
                    lease_ms,
                    ..
                }
                | Op::Acquire {
                    key,
                    owner,
                    lease_ms,
                    ..
                } => shorten(&mut open, key, owner, e.invoke, *lease_ms),
                Op::Set { key, .. } => sections.entry(key.clone()).or_default().unknown += 1,
                _ => {}
            }
            continue;
        };
        v.completed_ops += 1;
        let (ret, invoke, seq) = (*ret, e.invoke, e.seq);
        let unexpected = |what: String| Violation::Unexpected {
            process: name(),
            seq,
            what,
        };
        match &e.op {
            Op::Acquire {
                key,
                owner,
                lease_ms,
                keepalive,
                ..
            } => {
                let lease_end = invoke + *lease_ms as u64 * 1_000_000;
                let (owner, holds) = match outcome {
                    Outcome::Int(n) if *n >= 1 => (owner.clone(), *n),
                    Outcome::Bulk(uuid) if owner == b"*" => (uuid.clone(), 1),
                    Outcome::Err(text) if is_no_grant(text) => {
                        // An unacknowledged re-entry was undone but kept its
                        // lease: the window ends no later than that.
                        let k = (key.clone(), owner.clone());
                        if let Some(o) = open.get_mut(&k) {
                            o.end = o.end.min(lease_end);
                        }
                        continue;
                    }
                    Outcome::Nil => {
                        let k = (key.clone(), owner.clone());
                        if let Some(o) = open.get(&k) {
                            if ret < o.end {
                                v.violations.push(Violation::LostEarly {
                                    process: name(),
                                    seq,
                                    what: format!(
                                        "re-entry of {key} refused (nil) with {:.1} ms of its window left when answered",
                                        (o.end - ret) as f64 / 1e6
                                    ),
                                });
                            }
                            close(&mut open, windows, key, owner, invoke);
                        }
                        continue;
                    }
                    other => {
                        v.violations
                            .push(unexpected(format!("ACQUIRE {key} answered {other:?}")));
                        continue;
                    }
                };
                v.grants += 1;
                owner_of.insert(key.clone(), owner.clone());
                let k = (key.clone(), owner.clone());
                if holds == 1 {
                    if let Some(o) = open.get(&k).filter(|o| ret < o.end) {
                        v.violations.push(Violation::LostEarly {
                            process: name(),
                            seq,
                            what: format!(
                                "re-entry of {key} granted afresh (count 1, was {}) with {:.1} ms of its window left when answered",
                                o.holds,
                                (o.end - ret) as f64 / 1e6
                            ),
                        });
                    }
                    close(&mut open, windows, key, &owner, invoke);
                    pending = Some(Pending::Window {
                        key: k.clone(),
                        before: None,
                    });
                    open.insert(
                        k,
                        Open {
                            start: ret,
                            end: if *keepalive { TIED } else { lease_end },
                            holds: 1,
                            from_seq: seq,
                        },
                    );
                    continue;
                }
                // A re-entry.
                let Some(o) = open.get_mut(&k) else {
                    v.violations.push(Violation::Phantom {
                        process: name(),
                        seq,
                        what: format!(
                            "re-entry of {key} answered count {holds} but this owner holds nothing"
                        ),
                    });
                    continue;
                };
                pending = Some(Pending::Window {
                    key: k.clone(),
                    before: Some(o.clone()),
                });
                if o.holds + 1 != holds {
                    v.violations.push(Violation::Count {
                        process: name(),
                        seq,
                        expected: o.holds + 1,
                        got: holds,
                    });
                }
                o.holds = holds;
                // A re-entry without KEEPALIVE keeps a tie; with it, ties.
                let tied = *keepalive || o.end == TIED;
                extend(&mut open, windows, p, &k, invoke, ret, lease_end);
                if tied {
                    open.get_mut(&k).expect("extended").end = TIED;
                }
            }
            Op::Renew {
                key,
                owner,
                lease_ms,
                keepalive,
            } => {
                let k = (key.clone(), owner.clone());
                let lease_end = invoke + *lease_ms as u64 * 1_000_000;
                match outcome {
                    Outcome::Int(1) => {
                        pending = open.get(&k).map(|o| Pending::Window {
                            key: k.clone(),
                            before: Some(o.clone()),
                        });
                        if !open.contains_key(&k) {
                            v.violations.push(Violation::Phantom {
                                process: name(),
                                seq,
                                what: format!(
                                    "RENEW of {key} answered 1 but this owner holds nothing"
                                ),
                            });
                            continue;
                        }
                        // With KEEPALIVE it is tied; without, a plain lease
                        // from this call on.
                        extend(&mut open, windows, p, &k, invoke, ret, lease_end);
                        if *keepalive {
                            open.get_mut(&k).expect("extended").end = TIED;
                        }
                    }
                    Outcome::Int(0) => {
                        if let Some(o) = open.get(&k).filter(|o| ret < o.end) {
                            v.violations.push(Violation::LostEarly {
                                process: name(),
                                seq,
                                what: format!(
                                    "RENEW of {key} answered 0 with {:.1} ms of its window left when answered",
                                    (o.end - ret) as f64 / 1e6
                                ),
                            });
                        }
                        close(&mut open, windows, key, owner, invoke);
                    }
                    // Refused by a demoted node: nothing changed.
                    Outcome::Err(text) if text.starts_with("READONLY") => {}
                    // Unacknowledged: the previous deadline was put back, but
                    // a promoted replica may have the renewal without the
                    // undo; or cut short by a demotion: it may have happened.
                    Outcome::Err(text) if is_no_grant(text) => {
                        shorten(&mut open, key, owner, invoke, *lease_ms)
                    }
                    other => v
                        .violations
                        .push(unexpected(format!("RENEW {key} answered {other:?}"))),
                }
            }
            Op::Release { key, owner } => {
                let k = (key.clone(), owner.clone());
                match outcome {
                    Outcome::Int(left) if *left >= 0 => {
                        let Some(o) = open.get_mut(&k) else {
                            v.violations.push(Violation::Phantom {
                                process: name(),
                                seq,
                                what: format!(
                                    "RELEASE of {key} answered {left} but this owner holds nothing"
                                ),
                            });
                            continue;
                        };
                        if o.holds - 1 != *left {
                            v.violations.push(Violation::Count {
                                process: name(),
                                seq,
                                expected: o.holds - 1,
                                got: *left,
                            });
                        }
                        o.holds = *left;
                        if *left == 0 {
                            close(&mut open, windows, key, owner, invoke);
                        }
                    }
                    // Refused by a demoted node: nothing released.
                    Outcome::Err(text) if text.starts_with("READONLY") => {}
                    Outcome::Err(text) if text.starts_with("NOTOWNER") => {
                        if let Some(o) = open.get(&k).filter(|o| ret < o.end) {
                            v.violations.push(Violation::LostEarly {
                                process: name(),
                                seq,
                                what: format!(
                                    "RELEASE of {key} answered NOTOWNER with {:.1} ms of its window left when answered",
                                    (o.end - ret) as f64 / 1e6
                                ),
                            });
                        }
                        close(&mut open, windows, key, owner, invoke);
                    }
                    other => v
                        .violations
                        .push(unexpected(format!("RELEASE {key} answered {other:?}"))),
                }
            }
            Op::Get { key } => {
                match outcome {
                    Outcome::Bulk(_) | Outcome::Nil => {}
                    other => v.violations.push(unexpected(format!(
                        "GET of {key}'s counter answered {other:?}"
                    ))),
                }
                in_section.insert(key.clone(), owner_of.get(key).cloned());
            }
            Op::Set { key, .. } => {
                if !matches!(outcome, Outcome::Ok) {
                    v.violations.push(unexpected(format!(
                        "SET of {key}'s counter answered {outcome:?}"
                    )));
                    continue;
                }
                let s = sections.entry(key.clone()).or_default();
                s.completed += 1;
                // Late: no window of this owner covers the whole section.
                let owner = in_section.remove(key).flatten();
                let covered = owner
                    .and_then(|o| open.get(&(key.clone(), o)))
                    .is_some_and(|o| ret <= o.end);
                if !covered {
                    s.late += 1;
                }
                pending = Some(Pending::Section {
                    key: key.clone(),
                    late: !covered,
                });
            }
            // Handled before the match.
            Op::Wait { .. } => {}
        }
    }
    // The end of a history (clean exit or SIGKILL) releases nothing: the
    // lock stays held until its lease ends. A tied one is released by the
    // connection closing: its window ends at the kill (or, without one, at
    // the last thing the process did: less to check, never a false overlap).
    let last = p
        .events
        .last()
        .map_or(0, |e| e.ret.as_ref().map_or(e.invoke, |(t, _)| *t));
    let rest: Vec<(String, Vec<u8>)> = open.keys().cloned().collect();
    for (key, owner) in rest {
        let tied = open
            .get(&(key.clone(), owner.clone()))
            .is_some_and(|o| o.end == TIED);
        let at = if tied {
            p.killed_at.unwrap_or(last)
        } else {
            u64::MAX
        };
        close(&mut open, windows, &key, &owner, at);
    }
}

/// A renew or re-entry that may have set a lease of `lease_ms` at
/// `invoke`: the window ends no later than that.
fn shorten(
    open: &mut BTreeMap<(String, Vec<u8>), Open>,
    key: &str,
    owner: &[u8],
    invoke: u64,
    lease_ms: i64,
) {
    if let Some(o) = open.get_mut(&(key.to_string(), owner.to_vec())) {
        o.end = o.end.min(invoke + lease_ms as u64 * 1_000_000);
    }
}

/// Errors after which an acquire holds nothing new: NOREPLICAS (undone, or
/// refused at once), UNBLOCKED (the node was demoted while it waited),
/// READONLY (it reached a demoted node).
fn is_no_grant(text: &str) -> bool {
    ["NOREPLICAS", "UNBLOCKED", "READONLY"]
        .iter()
        .any(|code| text.starts_with(code))
}

/// The locks a process holds tied to its connection when its history ends
/// (it was killed), by its own account: (key, owner). Left out: a RENEW
/// without KEEPALIVE in flight (it may have untied the lock, which then
/// waits for its lease), and acquires still in flight (mostly waiters).
pub fn tied_at_end(events: &[Event]) -> Vec<(String, Vec<u8>)> {
    let mut tied: BTreeMap<(String, Vec<u8>), bool> = BTreeMap::new();
    for e in events {
        match (&e.op, &e.ret) {
            (
                Op::Acquire {
                    key,
                    owner,
                    keepalive,
                    ..
                },
                Some((_, out)),
            ) => {
                let (owner, holds) = match out {
                    Outcome::Int(n) if *n >= 1 => (owner.clone(), *n),
                    Outcome::Bulk(uuid) => (uuid.clone(), 1),
                    _ => {
                        tied.remove(&(key.clone(), owner.clone()));
                        continue;
                    }
                };
                let k = (key.clone(), owner);
                let was = holds > 1 && tied.get(&k).copied().unwrap_or(false);
                tied.insert(k, *keepalive || was);
            }
            (
                Op::Renew {
                    key,
                    owner,
                    keepalive,
                    ..
                },
                Some((_, out)),
            ) => {
                let k = (key.clone(), owner.clone());
                if *out == Outcome::Int(1) {
                    tied.insert(k, *keepalive);
                } else {
                    tied.remove(&k);
                }
            }
            (Op::Renew { key, owner, .. }, None) => {
                tied.remove(&(key.clone(), owner.clone()));
            }
            (Op::Release { key, owner }, Some((_, out))) if !matches!(out, Outcome::Int(n) if *n > 0) =>
            {
                tied.remove(&(key.clone(), owner.clone()));
            }
            _ => {}
        }
    }
    tied.into_iter()
        .filter(|(_, t)| *t)
        .map(|(k, _)| k)
        .collect()
}

/// A killed process's tied lock, as the runner watched it move on.
#[derive(Clone, Debug)]
pub struct Handover {
    pub process: String,
    pub key: String,
    pub owner: Vec<u8>,
    pub killed_at: u64,
    /// When LOCK.INFO first showed another owner or no lock.
    pub moved_at: Option<u64>,
}

impl Handover {
    pub fn after_ms(&self) -> Option<f64> {
        self.moved_at
            .map(|m| m.saturating_sub(self.killed_at) as f64 / 1e6)
    }
}

/// Every killed holder's tied lock must have moved on within `bound_ms`.
pub fn check_handovers(handovers: &[Handover], bound_ms: f64) -> Vec<Violation> {
    handovers
        .iter()
        .filter(|h| h.after_ms().is_none_or(|ms| ms > bound_ms))
        .map(|h| Violation::NotMovedOn {
            process: h.process.clone(),
            key: h.key.clone(),
            owner: h.owner.clone(),
            after_us: h.moved_at.map(|m| m.saturating_sub(h.killed_at) / 1_000),
            bound_us: (bound_ms * 1e3) as u64,
        })
        .collect()
}

/// A renew or re-entry confirmed at `invoke`: the window now ends at
/// `lease_end`; if it had already ended, a new one starts at `ret`.
fn extend(
    open: &mut BTreeMap<(String, Vec<u8>), Open>,
    windows: &mut Vec<Window>,
    p: &Process<'_>,
    k: &(String, Vec<u8>),
    invoke: u64,
    ret: u64,
    lease_end: u64,
) {
    let o = open.get_mut(k).expect("caller checked");
    if invoke < o.end {
        o.end = lease_end;
        return;
    }
    if o.end > o.start {
        windows.push(Window {
            key: k.0.clone(),
            owner: k.1.clone(),
            process: p.name.clone(),
            start: o.start,
            end: o.end,
            from_seq: o.from_seq,
        });
    }
    o.start = ret;
    o.end = lease_end;
}

/// Every pair of overlapping windows of different owners on one key.
pub fn overlaps(mut windows: Vec<Window>) -> Vec<Violation> {
    windows.sort_by(|a, b| (&a.key, a.start, a.end).cmp(&(&b.key, b.start, b.end)));
    let mut found = Vec::new();
    let mut active: Vec<&Window> = Vec::new();
    for w in &windows {
        active.retain(|a| a.key == w.key && a.end > w.start);
        for a in &active {
            if a.owner != w.owner {
                found.push(Violation::Overlap {
                    first: (*a).clone(),
                    second: w.clone(),
                });
            }
        }
        active.push(w);
    }
    found
}

/// A short, human description of an owner for reports.
pub fn owner_text(owner: &[u8]) -> String {
    if owner.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(owner).into_owned()
    } else {
        format!("0x{}", hex(owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Event, Op, Outcome};

    const MS: u64 = 1_000_000;

    /// A tiny DSL: times in ms.
    fn acq(seq: u64, key: &str, owner: &str, lease: i64, at: u64, ret: u64, out: Outcome) -> Event {
        Event::new(
            seq,
            Op::Acquire {
                key: key.into(),
                owner: owner.as_bytes().to_vec(),
                lease_ms: lease,
                block_ms: None,
                keepalive: false,
            },
            at * MS,
            Some((ret * MS, out)),
        )
    }
    fn rel(seq: u64, key: &str, owner: &str, at: u64, ret: Option<(u64, Outcome)>) -> Event {
        Event::new(
            seq,
            Op::Release {
                key: key.into(),
                owner: owner.as_bytes().to_vec(),
            },
            at * MS,
            ret.map(|(t, o)| (t * MS, o)),
        )
    }
    fn renew(
        seq: u64,
        key: &str,
        owner: &str,
        lease: i64,
        at: u64,
        ret: u64,
        out: Outcome,
    ) -> Event {
        Event::new(
            seq,
            Op::Renew {
                key: key.into(),
                owner: owner.as_bytes().to_vec(),
                lease_ms: lease,
                keepalive: false,
            },
            at * MS,
            Some((ret * MS, out)),
        )
    }
    fn get(seq: u64, key: &str, at: u64, ret: u64, v: Option<i64>) -> Event {
        let out = v.map_or(Outcome::Nil, |v| Outcome::Bulk(v.to_string().into_bytes()));
        Event::new(
            seq,
            Op::Get { key: key.into() },
            at * MS,
            Some((ret * MS, out)),
        )
    }
    fn set(seq: u64, key: &str, value: i64, at: u64, ret: Option<u64>) -> Event {
        Event::new(
            seq,
            Op::Set {
                key: key.into(),
                value,
            },
            at * MS,
            ret.map(|t| (t * MS, Outcome::Ok)),
        )
    }

    fn wait(seq: u64, key: &str, at: u64, ret: Option<(u64, Outcome)>) -> Event {
        Event::new(
            seq,
            Op::Wait { key: key.into() },
            at * MS,
            ret.map(|(t, o)| (t * MS, o)),
        )
    }

    fn run(histories: &[Vec<Event>], counters: &[(&str, i64)]) -> Verdict {
        let procs: Vec<Process<'_>> = histories
            .iter()
            .enumerate()
            .map(|(i, h)| Process {
                name: format!("p{i}"),
                events: h,
                killed_at: None,
            })
            .collect();
        let counters = counters.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        check(&procs, &counters)
    }

    /// Like `run`, with kill times (ms) per process.
    fn run_killed(histories: &[(Vec<Event>, Option<u64>)]) -> Verdict {
        let procs: Vec<Process<'_>> = histories
            .iter()
            .enumerate()
            .map(|(i, (h, killed))| Process {
                name: format!("p{i}"),
                events: h,
                killed_at: killed.map(|ms| ms * MS),
            })
            .collect();
        check(&procs, &HashMap::new())
    }

    /// Marks an ACQUIRE or RENEW event as KEEPALIVE.
    fn tied(mut e: Event) -> Event {
        match &mut e.op {
            Op::Acquire { keepalive, .. } | Op::Renew { keepalive, .. } => *keepalive = true,
            _ => panic!("not an acquire or renew"),
        }
        e
    }

    fn kinds(v: &Verdict) -> Vec<&'static str> {
        v.violations
            .iter()
            .map(|x| match x {
                Violation::Overlap { .. } => "overlap",
                Violation::LostEarly { .. } => "lost",
                Violation::Count { .. } => "count",
                Violation::Phantom { .. } => "phantom",
                Violation::Unexpected { .. } => "unexpected",
                Violation::Hung { .. } => "hung",
                Violation::Counter { .. } => "counter",
                Violation::NotMovedOn { .. } => "not moved on",
            })
            .collect()
    }

    #[test]
    fn a_tied_window_lasts_until_the_kill_not_the_lease() {
        // a: KEEPALIVE, lease 100, killed at 1000.
        let a = vec![tied(acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)))];
        let b_early = vec![acq(0, "k", "b", 1000, 400, 500, Outcome::Int(1))];
        assert_eq!(
            kinds(&run_killed(&[(a.clone(), Some(1000)), (b_early, None)])),
            ["overlap"]
        );
        let b_after = vec![acq(0, "k", "b", 1000, 400, 1001, Outcome::Int(1))];
        assert!(run_killed(&[(a.clone(), Some(1000)), (b_after, None)]).ok());
        // Without KEEPALIVE the same history is fine: the lease ended at 100.
        let plain = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))];
        let b_early = vec![acq(0, "k", "b", 1000, 400, 500, Outcome::Int(1))];
        assert!(run_killed(&[(plain, Some(1000)), (b_early, None)]).ok());
        // A tied lock refused while tied is lost early, whatever the lease.
        let a = vec![
            tied(acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))),
            renew(1, "k", "a", 100, 700, 701, Outcome::Int(0)),
        ];
        assert_eq!(kinds(&run_killed(&[(a, Some(1000))])), ["lost"]);
    }

    #[test]
    fn reentry_keeps_the_tie_and_renew_without_keepalive_unties() {
        let a = vec![
            tied(acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))),
            acq(1, "k", "a", 100, 10, 11, Outcome::Int(2)),
        ];
        let b = vec![acq(0, "k", "b", 1000, 400, 500, Outcome::Int(1))];
        assert_eq!(
            kinds(&run_killed(&[(a, Some(1000)), (b.clone(), None)])),
            ["overlap"]
        );
        // RENEW without KEEPALIVE at 200: a plain lease to 300.
        let a = vec![
            tied(acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))),
            renew(1, "k", "a", 100, 200, 201, Outcome::Int(1)),
        ];
        assert!(run_killed(&[(a.clone(), Some(1000)), (b, None)]).ok());
        let b = vec![acq(0, "k", "b", 100, 250, 290, Outcome::Int(1))];
        assert_eq!(
            kinds(&run_killed(&[(a.clone(), Some(1000)), (b, None)])),
            ["overlap"]
        );
        // RENEW KEEPALIVE ties again.
        let mut a = a;
        a.push(tied(renew(2, "k", "a", 100, 250, 251, Outcome::Int(1))));
        let b = vec![acq(0, "k", "b", 1000, 400, 500, Outcome::Int(1))];
        assert_eq!(
            kinds(&run_killed(&[(a, Some(1000)), (b, None)])),
            ["overlap"]
        );
    }

    #[test]
    fn tied_at_end_follows_the_ties() {
        let h = vec![
            tied(acq(0, "a", "w", 100, 0, 1, Outcome::Int(1))),
            acq(1, "a", "w", 100, 2, 3, Outcome::Int(2)),
            tied(acq(2, "b", "w", 100, 4, 5, Outcome::Int(1))),
            rel(3, "b", "w", 6, Some((7, Outcome::Int(0)))),
            tied(acq(4, "c", "w", 100, 8, 9, Outcome::Int(1))),
            renew(5, "c", "w", 100, 10, 11, Outcome::Int(1)),
            acq(6, "d", "w", 100, 12, 13, Outcome::Int(1)),
            tied(acq(
                7,
                "e",
                "*",
                100,
                14,
                15,
                Outcome::Bulk(b"u-1".to_vec()),
            )),
            Event::new(
                8,
                Op::Acquire {
                    key: "f".into(),
                    owner: b"w".to_vec(),
                    lease_ms: 100,
                    block_ms: Some(0),
                    keepalive: true,
                },
                16,
                None,
            ),
        ];
        assert_eq!(
            tied_at_end(&h),
            vec![
                ("a".to_string(), b"w".to_vec()),
                ("e".to_string(), b"u-1".to_vec()),
            ]
        );
    }

    #[test]
    fn handovers_must_be_prompt() {
        let h = |moved: Option<u64>| Handover {
            process: "w1.0".into(),
            key: "k".into(),
            owner: b"w1.0".to_vec(),
            killed_at: 1000 * MS,
            moved_at: moved.map(|m| m * MS),
        };
        assert!(check_handovers(&[h(Some(1003))], 400.0).is_empty());
        assert_eq!(check_handovers(&[h(Some(1500))], 400.0).len(), 1);
        assert_eq!(check_handovers(&[h(None)], 400.0).len(), 1);
    }

    #[test]
    fn sequential_owners_with_sections_pass() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            get(1, "k", 2, 3, None),
            set(2, "k", 1, 10, Some(11)),
            rel(3, "k", "a", 12, Some((13, Outcome::Int(0)))),
        ];
        // b is granted after a's release was invoked: no overlap.
        let b = vec![
            acq(0, "k", "b", 100, 5, 12, Outcome::Int(1)),
            get(1, "k", 13, 14, Some(1)),
            set(2, "k", 2, 20, Some(21)),
            rel(3, "k", "b", 22, Some((23, Outcome::Int(0)))),
        ];
        let v = run(&[a, b], &[("k", 2)]);
        assert!(v.ok(), "{:?}", v.violations);
        assert_eq!((v.ops, v.grants, v.windows, v.sections), (8, 2, 2, 2));
        assert_eq!(v.late_sections, 0);
    }

    #[test]
    fn overlapping_grants_are_caught() {
        let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))];
        // b granted at 50 while a's lease (0 + 100) still runs.
        let b = vec![acq(0, "k", "b", 100, 40, 50, Outcome::Int(1))];
        let v = run(&[a, b], &[]);
        assert_eq!(kinds(&v), ["overlap"]);
        // Other keys do not conflict.
        let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))];
        let b = vec![acq(0, "j", "b", 100, 40, 50, Outcome::Int(1))];
        assert!(run(&[a, b], &[]).ok());
    }

    #[test]
    fn lease_end_counts_from_the_invocation() {
        // a's lease runs 0..100 from its invocation; the grant took 30 ms.
        let a = vec![acq(0, "k", "a", 100, 0, 30, Outcome::Int(1))];
        let b_ok = vec![acq(0, "k", "b", 100, 95, 100, Outcome::Int(1))];
        assert!(run(&[a.clone(), b_ok], &[]).ok());
        let b_bad = vec![acq(0, "k", "b", 100, 95, 99, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b_bad], &[])), ["overlap"]);
    }

    #[test]
    fn renew_extends_only_from_its_invocation() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            renew(1, "k", "a", 100, 80, 81, Outcome::Int(1)),
        ];
        // Window now ends at 180: a grant to b at 150 overlaps.
        let b = vec![acq(0, "k", "b", 100, 140, 150, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a.clone(), b], &[])), ["overlap"]);
        let b = vec![acq(0, "k", "b", 100, 170, 181, Outcome::Int(1))];
        assert!(run(&[a, b], &[]).ok());
        // A renew invoked after the window ended starts a new window at its return.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            renew(1, "k", "a", 100, 120, 130, Outcome::Int(1)),
        ];
        let b = vec![
            acq(0, "k", "b", 10, 101, 102, Outcome::Int(1)),
            rel(1, "k", "b", 105, Some((106, Outcome::Int(0)))),
        ];
        assert!(run(&[a.clone(), b], &[]).ok());
        let b = vec![acq(0, "k", "b", 100, 101, 125, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"]);
    }

    #[test]
    fn reentry_counts_and_resets_the_lease() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            acq(1, "k", "a", 20, 10, 11, Outcome::Int(2)),
            rel(2, "k", "a", 12, Some((13, Outcome::Int(1)))),
        ];
        // The re-entry shortened the lease to 10 + 20: b may come at 31.
        let b = vec![acq(0, "k", "b", 100, 25, 31, Outcome::Int(1))];
        assert!(run(&[a.clone(), b], &[]).ok());
        let b = vec![acq(0, "k", "b", 100, 25, 29, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"]);
        // Wrong counts.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            acq(1, "k", "a", 100, 2, 3, Outcome::Int(3)),
            rel(2, "k", "a", 4, Some((5, Outcome::Int(0)))),
        ];
        assert_eq!(kinds(&run(&[a], &[])), ["count", "count"]);
    }

    #[test]
    fn losing_a_lock_early_is_caught() {
        let lost = [
            rel(
                1,
                "k",
                "a",
                50,
                Some((51, Outcome::Err("NOTOWNER x".into()))),
            ),
            renew(1, "k", "a", 100, 50, 51, Outcome::Int(0)),
            acq(1, "k", "a", 100, 50, 51, Outcome::Nil),
            acq(1, "k", "a", 100, 50, 51, Outcome::Int(1)),
        ];
        for e in lost {
            let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)), e.clone()];
            assert_eq!(kinds(&run(&[a], &[])), ["lost"], "{e:?}");
            // The same answers after the lease ran out are fine.
            let mut late = e;
            late.invoke = 150 * MS;
            late.ret = late.ret.map(|(_, o)| (151 * MS, o));
            let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)), late.clone()];
            assert!(run(&[a], &[]).ok(), "{late:?}");
        }
    }

    #[test]
    fn unknown_release_ends_the_window_at_its_invocation() {
        // a was killed while releasing: b may have been granted right after.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            rel(1, "k", "a", 20, None),
        ];
        let b = vec![acq(0, "k", "b", 100, 5, 21, Outcome::Int(1))];
        assert!(run(&[a.clone(), b], &[]).ok());
        // A killed holder keeps the lock until its lease ends.
        let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1))];
        let b = vec![acq(0, "k", "b", 100, 5, 60, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"]);
    }

    #[test]
    fn phantoms_and_unexpected_errors() {
        let a = vec![
            rel(0, "k", "a", 0, Some((1, Outcome::Int(0)))),
            renew(1, "k", "a", 100, 2, 3, Outcome::Int(1)),
            acq(2, "k", "a", 100, 4, 5, Outcome::Int(2)),
            acq(
                3,
                "k",
                "a",
                100,
                6,
                7,
                Outcome::Err("ERR internal error".into()),
            ),
        ];
        assert_eq!(
            kinds(&run(&[a], &[])),
            ["phantom", "phantom", "phantom", "unexpected"]
        );
    }

    #[test]
    fn generated_owner_is_the_reply() {
        let a = vec![
            acq(0, "k", "*", 100, 0, 1, Outcome::Bulk(b"u-1".to_vec())),
            rel(1, "k", "u-1", 10, Some((11, Outcome::Int(0)))),
        ];
        let b = vec![acq(0, "k", "b", 100, 5, 12, Outcome::Int(1))];
        let v = run(&[a, b], &[]);
        assert!(v.ok(), "{:?}", v.violations);
        assert_eq!(v.windows, 2);
    }

    #[test]
    fn counter_must_match_completed_sections() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            get(1, "k", 2, 3, None),
            set(2, "k", 1, 10, Some(11)),
            get(3, "k", 12, 13, Some(1)),
            // Killed with the SET in flight: 1 or 2 are both right.
            set(4, "k", 2, 20, None),
        ];
        assert!(run(std::slice::from_ref(&a), &[("k", 1)]).ok());
        assert!(run(std::slice::from_ref(&a), &[("k", 2)]).ok());
        assert_eq!(
            kinds(&run(std::slice::from_ref(&a), &[("k", 3)])),
            ["counter"]
        );
        assert_eq!(kinds(&run(&[a], &[("k", 0)])), ["counter"]);
        // A lost update with no late section is a violation.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            get(1, "k", 2, 3, None),
            set(2, "k", 1, 10, Some(11)),
        ];
        let v = run(&[a], &[("k", 0)]);
        assert_eq!(kinds(&v), ["counter"]);
    }

    #[test]
    fn late_sections_are_reported_not_blamed() {
        // The SET came back after the lease (0 + 50) ended: a paused client.
        let a = vec![
            acq(0, "k", "a", 50, 0, 1, Outcome::Int(1)),
            get(1, "k", 2, 3, None),
            set(2, "k", 1, 40, Some(60)),
        ];
        let v = run(&[a], &[("k", 0)]);
        assert!(v.ok(), "{:?}", v.violations);
        assert_eq!((v.sections, v.late_sections), (1, 1));
    }

    #[test]
    fn unconfirmed_grants_open_no_window() {
        let acked = |n| Some((3, Outcome::Int(n)));
        // b is granted while a's lease runs: a double grant only if a's
        // grant was acknowledged by a replica.
        let b = vec![
            acq(0, "k", "b", 100, 40, 50, Outcome::Int(1)),
            wait(1, "k", 51, Some((52, Outcome::Int(1)))),
        ];
        for (a_ack, overlap) in [(acked(0), false), (None, false), (acked(1), true)] {
            let a = vec![
                acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
                wait(1, "k", 2, a_ack.clone()),
            ];
            let v = run(&[a, b.clone()], &[]);
            let expected: &[&str] = if overlap { &["overlap"] } else { &[] };
            assert_eq!(kinds(&v), expected, "{a_ack:?}");
            assert_eq!(v.confirmed, if overlap { 2 } else { 1 });
        }
        // A WAIT that hangs is a violation too, and confirms nothing.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            wait(1, "k", 2, Some((3, Outcome::Hung("no reply".into())))),
        ];
        let v = run(&[a, b], &[]);
        assert_eq!(kinds(&v), ["hung"]);
        assert_eq!((v.unconfirmed, v.hung), (1, 1));
    }

    #[test]
    fn unconfirmed_extensions_are_undone() {
        // The renewal (80 + 100 = 180) is undone when no replica saw it:
        // the window ends at 100 and b's grant at 150 is fine.
        let b = vec![acq(0, "k", "b", 100, 140, 150, Outcome::Int(1))];
        for (ack, overlap) in [(0, false), (1, true)] {
            let a = vec![
                acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
                wait(1, "k", 2, Some((3, Outcome::Int(1)))),
                renew(2, "k", "a", 100, 80, 81, Outcome::Int(1)),
                wait(3, "k", 82, Some((83, Outcome::Int(ack)))),
            ];
            let expected: &[&str] = if overlap { &["overlap"] } else { &[] };
            assert_eq!(kinds(&run(&[a, b.clone()], &[])), expected, "ack {ack}");
        }
        // The same for a re-entry (lease 10 + 200 = 210), count restored.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            wait(1, "k", 2, Some((3, Outcome::Int(1)))),
            acq(2, "k", "a", 200, 10, 11, Outcome::Int(2)),
            wait(3, "k", 12, Some((13, Outcome::Int(0)))),
        ];
        assert!(run(&[a, b], &[]).ok());
    }

    #[test]
    fn unconfirmed_counter_writes_are_unknown() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            wait(1, "k", 2, Some((3, Outcome::Int(1)))),
            get(2, "k", 4, 5, None),
            set(3, "k", 1, 10, Some(11)),
            wait(4, "k", 12, Some((13, Outcome::Int(0)))),
        ];
        // Lost with the primary, or not: both are right.
        assert!(run(std::slice::from_ref(&a), &[("k", 0)]).ok());
        assert!(run(std::slice::from_ref(&a), &[("k", 1)]).ok());
        assert_eq!(kinds(&run(&[a], &[("k", 2)])), ["counter"]);
    }

    #[test]
    fn hung_calls_are_violations_with_unknown_effect() {
        let mut hung = acq(0, "k", "a", 100, 0, 1, Outcome::Nil);
        hung.op = Op::Acquire {
            key: "k".into(),
            owner: b"a".to_vec(),
            lease_ms: 100,
            block_ms: Some(0),
            keepalive: false,
        };
        hung.ret = Some((20_000 * MS, Outcome::Hung("no reply in 15 s".into())));
        let b = vec![acq(0, "k", "b", 100, 40, 50, Outcome::Int(1))];
        let v = run(&[vec![hung], b], &[]);
        assert_eq!(kinds(&v), ["hung"]);
        assert_eq!(v.hung, 1);
    }

    #[test]
    fn failover_errors_grant_nothing() {
        let no = |code: &str| Outcome::Err(format!("{code} x"));
        // A refused fresh acquire opens no window: b may come right after.
        for code in ["NOREPLICAS", "UNBLOCKED", "READONLY"] {
            let a = vec![acq(0, "k", "a", 100, 0, 10, no(code))];
            let b = vec![acq(0, "k", "b", 100, 5, 11, Outcome::Int(1))];
            assert!(run(&[a, b], &[]).ok(), "{code}");
        }
        // An undone re-entry keeps its (shorter) lease: the window ends
        // with it, so b at 31 is fine, at 29 an overlap.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            acq(1, "k", "a", 20, 10, 15, no("NOREPLICAS")),
        ];
        let b = vec![acq(0, "k", "b", 100, 25, 31, Outcome::Int(1))];
        assert!(run(&[a.clone(), b], &[]).ok());
        let b = vec![acq(0, "k", "b", 100, 25, 29, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"]);
        // An undone renewal extends nothing, and a shorter one may have
        // survived on a promoted replica (so may one whose reply was lost).
        for out in [Some(no("NOREPLICAS")), Some(no("UNBLOCKED")), None] {
            let r = |lease, ret| {
                let mut e = renew(1, "k", "a", lease, 50, ret, Outcome::Nil);
                e.ret = out.clone().map(|o| (ret * MS, o));
                e
            };
            let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)), r(500, 60)];
            let b = vec![acq(0, "k", "b", 100, 90, 101, Outcome::Int(1))];
            assert!(run(&[a.clone(), b], &[]).ok(), "{out:?}");
            let b = vec![acq(0, "k", "b", 100, 90, 99, Outcome::Int(1))];
            assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"], "{out:?}");
            let a = vec![acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)), r(20, 60)];
            let b = vec![acq(0, "k", "b", 100, 65, 71, Outcome::Int(1))];
            assert!(run(&[a, b], &[]).ok(), "{out:?}");
        }
        // READONLY: refused, nothing changed.
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            renew(1, "k", "a", 20, 50, 60, no("READONLY")),
        ];
        let b = vec![acq(0, "k", "b", 100, 65, 71, Outcome::Int(1))];
        assert_eq!(kinds(&run(&[a, b], &[])), ["overlap"]);
        // Other errors stay unexpected.
        let a = vec![renew(0, "k", "a", 100, 0, 1, no("ERR"))];
        assert_eq!(kinds(&run(&[a], &[])), ["unexpected"]);
    }

    #[test]
    fn same_owner_windows_may_touch() {
        let a = vec![
            acq(0, "k", "a", 100, 0, 1, Outcome::Int(1)),
            renew(1, "k", "a", 100, 150, 151, Outcome::Int(1)),
        ];
        let v = run(&[a], &[]);
        assert!(v.ok());
        assert_eq!(v.windows, 2);
    }
}
