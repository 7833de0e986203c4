//! R7's checker: semaphore histories (`famhist`) judged on one clock.
//!
//! **Certain holds.** A permit is certainly held
//! - when taken by `SEMAPHORE.ACQUIRE` (anonymous): from the *return* of the
//!   grant until the *invocation* of the `SEMAPHORE.RELEASE` that gives it
//!   back (the worker's own, or the runner's on behalf of a killed worker:
//!   anonymous permits have no owner, so a dead worker's stay taken until
//!   someone releases them);
//! - when leased by `SEMAPHORE.LEASE ... PX ms`: from the return of the
//!   grant until the earlier of the invocation of its `RETURN` and its lease
//!   end counted from the *invocation* of the grant (or of a `RENEW` that
//!   extended it), less 1 ms (the server counts whole milliseconds of its
//!   clock, and its current one may have begun up to 1 ms before the call)
//!   — or, when the worker read the lease's deadline from the server right
//!   after the grant (`ZMSCORE {sem}:timeout`, absolute server ms), up to
//!   that deadline (a grant that waited in the queue starts its lease when
//!   granted, not when invoked);
//! - when leased with `KEEPALIVE`: from the return of the grant until the
//!   invocation of its `RETURN` or the kill of its worker, lease or not (the
//!   server renews it while the connection lives).
//!
//! A grant the worker never saw but the runner read from its socket after
//! the kill (`X`) holds from that read: anonymous permits until the
//! runner's release, a plain lease until its lease end; a `KEEPALIVE` one
//! not at all (the connection was already closed).
//!
//! Every bound is conservative (the server grants after the invocation and
//! before the return, and counts a lease from its own receipt of the call),
//! so on a correct server the certain holds never add up to more than the
//! semaphore's permits at any instant; any instant where they do is an
//! oversell.
//!
//! Besides, the checker flags every reply a correct server cannot give: a
//! grant of another count than asked, ids that are not 32 lowercase hex
//! characters or that were granted before, `NOTOWNER` on a `RETURN` while
//! every id was still certainly held when the server ran it (the call's
//! return is the latest it can have run), `RENEW` answered 0 inside the
//! lease, an unexpected error, a call that hung.

use std::collections::{HashMap, HashSet};

use crate::famhist::{Call, History, Item, Out};

const MS: u64 = 1_000_000;
/// End of a hold that only a `RETURN` or the worker's death can end.
const TIED: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub struct Opts {
    pub permits: u64,
    /// Leases taken as this many times what was granted (negative control).
    pub lease_factor: u64,
    /// `KEEPALIVE` holds taken to last this long past their worker's kill
    /// (negative control for the return at the connection's close).
    pub tied_grace_ns: u64,
    /// Failover answers (`NOREPLICAS`, `READONLY`, `UNBLOCKED`, closed
    /// connections) are expected (R7 across promotions).
    pub failover: bool,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC (ns) on this machine: turns the
    /// server's absolute deadlines (ms) into the histories' clock.
    pub realtime_offset_ns: i64,
}

impl Opts {
    pub fn new(permits: u64) -> Opts {
        Opts {
            permits,
            lease_factor: 1,
            tied_grace_ns: 0,
            failover: false,
            realtime_offset_ns: 0,
        }
    }
}

/// A span during which `count` permits were certainly held.
#[derive(Clone, Debug)]
pub struct Seg {
    pub start: u64,
    pub end: u64,
    pub count: u64,
    pub who: String,
}

/// An instant where the certain holds exceed the permits.
#[derive(Clone, Debug)]
pub struct Over {
    pub at: u64,
    pub held: u64,
    pub holders: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Verdict {
    /// Semaphore calls judged.
    pub ops: u64,
    pub acquires: u64,
    pub leases: u64,
    pub permits_granted: u64,
    /// The most permits certainly held at one instant.
    pub max_held: u64,
    /// Maximal periods where more than `permits` were certainly held.
    pub overs: usize,
    /// The first few, described.
    pub over_examples: Vec<Over>,
    /// Replies a correct server cannot give.
    pub anomalies: Vec<String>,
    /// Plain leases whose worker left them to lapse (or learnt of the lapse
    /// by NOTOWNER).
    pub lapsed: u64,
    /// Anonymous permits released by the runner for killed workers.
    pub released_by_proxy: u64,
}

impl Verdict {
    pub fn violations(&self) -> usize {
        self.overs + self.anomalies.len()
    }
}

struct Lease {
    start: u64,
    /// No later than the server's grant (or renewal) of it: the lease runs
    /// from then.
    from: u64,
    lease_ms: u64,
    /// `Opts::lease_factor`.
    factor: u64,
    tied: bool,
}

impl Lease {
    /// The server counts leases in whole milliseconds of its clock: its
    /// deadline is the current ms + the lease, and that ms may have begun
    /// up to 1 ms before the call was invoked.
    fn end(&self) -> u64 {
        if self.tied {
            TIED
        } else {
            (self.from + self.lease_ms * self.factor * MS).saturating_sub(MS)
        }
    }
}

fn is_id(b: &[u8]) -> bool {
    b.len() == 32
        && b.iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

fn failover_answer(out: &Out) -> bool {
    match out {
        Out::Err(_) => matches!(
            out.err_code(),
            Some("NOREPLICAS" | "READONLY" | "UNBLOCKED" | "LOADING" | "MASTERDOWN")
        ),
        Out::Hung(_) => false,
        _ => false,
    }
}

/// Scans one history into certain holds.
fn scan(
    h: &History,
    o: &Opts,
    segs: &mut Vec<Seg>,
    v: &mut Verdict,
    ids_seen: &mut HashSet<Vec<u8>>,
) {
    let mut anon: Vec<(u64, u64)> = Vec::new(); // (start, count)
    let mut leases: HashMap<String, Lease> = HashMap::new();
    let mut last_time = 0;
    let who = |c: &Call, what: &str| format!("{} op {} ({what})", h.name, c.seq);
    let anomaly = |v: &mut Verdict, c: &Call, what: String| {
        v.anomalies.push(format!(
            "{} op {} `{}` -> {:?}: {what}",
            h.name,
            c.seq,
            c.args.join(" "),
            c.out()
        ));
    };
    for c in &h.calls {
        last_time = last_time.max(c.invoke);
        if let Some((t, _)) = &c.ret {
            last_time = last_time.max(*t);
        }
        let cmd = c.cmd();
        if cmd == "ZMSCORE" {
            // The server's deadlines of leases just granted (absolute ms):
            // the lease runs from the deadline less the lease, which for a
            // grant that waited is later than the call's invocation.
            if let Some(Out::Arr(items)) = c.out() {
                for (id, item) in c.args[2..].iter().zip(items) {
                    let (Some(l), Item::Bulk(score)) = (leases.get_mut(id), item) else {
                        continue;
                    };
                    let Some(ms) = std::str::from_utf8(score)
                        .ok()
                        .and_then(|s| s.parse::<f64>().ok())
                    else {
                        continue;
                    };
                    // The permit returns at (never before) this ms; `end`
                    // takes 1 ms off for the server's ms granularity, so
                    // count the lease from 1 ms later.
                    let deadline = (ms as i64 * MS as i64 - o.realtime_offset_ns).max(0) as u64;
                    let from = (deadline + MS).saturating_sub(l.lease_ms * MS);
                    if !l.tied && from > l.from {
                        l.from = from;
                    }
                }
            }
            continue;
        }
        if !cmd.starts_with("SEMAPHORE.") {
            if let Some(Out::Hung(_)) = c.out() {
                anomaly(v, c, "hung".into());
            }
            continue;
        }
        v.ops += 1;
        let out = c.out();
        if let Some(Out::Hung(_)) = out {
            anomaly(v, c, "no reply in time".into());
            continue;
        }
        let tolerated = |out: &Out| o.failover && failover_answer(out);
        match cmd.as_str() {
            "SEMAPHORE.ACQUIRE" => {
                let n = c.opt("COUNT").unwrap_or(1) as u64;
                match &c.ret {
                    Some((t, Out::Int(k))) if *k as u64 == n => {
                        anon.push((*t, n));
                        v.acquires += 1;
                        v.permits_granted += n;
                    }
                    None | Some((_, Out::Nil)) => {}
                    Some((_, out)) if tolerated(out) => {}
                    Some(_) => anomaly(v, c, format!("expected {n} or nil")),
                }
            }
            "SEMAPHORE.RELEASE" => {
                let mut n = c.opt("COUNT").unwrap_or(1) as u64;
                if c.by_proxy {
                    v.released_by_proxy += n;
                }
                while n > 0 {
                    let Some((start, count)) = anon.pop() else {
                        anomaly(v, c, "releases permits the worker does not hold".into());
                        break;
                    };
                    let take = count.min(n);
                    segs.push(Seg {
                        start,
                        end: c.invoke,
                        count: take,
                        who: who(c, "anonymous permits up to this release"),
                    });
                    if count > take {
                        anon.push((start, count - take));
                    }
                    n -= take;
                }
                match out {
                    None | Some(Out::Int(_)) => {}
                    Some(out) if tolerated(out) => {}
                    Some(_) => anomaly(v, c, "expected the available count".into()),
                }
            }
            "SEMAPHORE.LEASE" => {
                let n = c.opt("COUNT").unwrap_or(1) as usize;
                let tied = c.flag("KEEPALIVE");
                let px = c.opt("PX").unwrap_or(0).max(0) as u64;
                match &c.ret {
                    Some((t, Out::Arr(items))) => {
                        let ids: Vec<&[u8]> = items
                            .iter()
                            .filter_map(|i| match i {
                                Item::Bulk(b) if is_id(b) => Some(&b[..]),
                                _ => None,
                            })
                            .collect();
                        if ids.len() != n || items.len() != n {
                            anomaly(v, c, format!("expected {n} ids of 32 lowercase hex chars"));
                            continue;
                        }
                        v.leases += 1;
                        v.permits_granted += n as u64;
                        for id in ids {
                            if !ids_seen.insert(id.to_vec()) {
                                anomaly(
                                    v,
                                    c,
                                    format!("id {} granted twice", String::from_utf8_lossy(id)),
                                );
                            }
                            if c.recovered && tied {
                                // Returned when the connection closed,
                                // before the runner read this.
                                continue;
                            }
                            leases.insert(
                                String::from_utf8_lossy(id).into_owned(),
                                Lease {
                                    start: *t,
                                    from: c.invoke,
                                    lease_ms: px,
                                    factor: o.lease_factor,
                                    tied,
                                },
                            );
                        }
                    }
                    None | Some((_, Out::Nil)) => {}
                    Some((_, out)) if tolerated(out) => {}
                    Some(_) => anomaly(v, c, format!("expected {n} ids or nil")),
                }
            }
            "SEMAPHORE.RETURN" => {
                let ids = &c.args[2..];
                // Held when the server ran the call (no later than its
                // return): then NOTOWNER is wrong.
                let ret = c.ret.as_ref().map_or(c.invoke, |(t, _)| *t);
                let all_held = ids
                    .iter()
                    .all(|id| leases.get(id).is_some_and(|l| ret < l.end()));
                let mut close = |leases: &mut HashMap<String, Lease>, id: &String| {
                    if let Some(l) = leases.remove(id) {
                        let end = l.end().min(c.invoke);
                        if end > l.start {
                            segs.push(Seg {
                                start: l.start,
                                end,
                                count: 1,
                                who: who(c, "leased permit up to this return"),
                            });
                        }
                    }
                };
                match out {
                    Some(Out::Int(k)) if *k as usize == ids.len() => {
                        for id in ids {
                            close(&mut leases, id);
                        }
                    }
                    Some(Out::Err(_)) if out.unwrap().err_code() == Some("NOTOWNER") => {
                        if all_held {
                            anomaly(v, c, "NOTOWNER while every id was certainly leased".into());
                        }
                        // Nothing changed: the ids certainly leased when the
                        // server ran it stay leased; the others may have
                        // lapsed.
                        for id in ids {
                            if leases.get(id).is_some_and(|l| ret >= l.end()) {
                                v.lapsed += 1;
                                close(&mut leases, id);
                            }
                        }
                    }
                    None => {
                        for id in ids {
                            close(&mut leases, id);
                        }
                    }
                    Some(out) if tolerated(out) => {
                        for id in ids {
                            close(&mut leases, id);
                        }
                    }
                    Some(_) => {
                        anomaly(v, c, format!("expected {} or NOTOWNER", ids.len()));
                        for id in ids {
                            close(&mut leases, id);
                        }
                    }
                }
            }
            "SEMAPHORE.RENEW" => {
                let id = c.args.get(2).cloned().unwrap_or_default();
                let px = c.opt("PX").unwrap_or(0).max(0) as u64;
                let tied = c.flag("KEEPALIVE");
                let renewed = Lease {
                    start: 0,
                    from: c.invoke,
                    lease_ms: px,
                    factor: o.lease_factor,
                    tied,
                };
                match &c.ret {
                    Some((t, Out::Int(1))) => match leases.get_mut(&id) {
                        Some(l) if c.invoke < l.end() => {
                            *l = Lease {
                                start: l.start,
                                ..renewed
                            };
                        }
                        Some(l) => {
                            // Lapsed for us, yet renewed: a new span.
                            segs.push(Seg {
                                start: l.start,
                                end: l.end(),
                                count: 1,
                                who: who(c, "leased permit up to its lease end"),
                            });
                            *l = Lease {
                                start: *t,
                                ..renewed
                            };
                        }
                        None => anomaly(v, c, "renewed an id this worker does not lease".into()),
                    },
                    Some((t, Out::Int(0))) => {
                        if leases.get(&id).is_some_and(|l| *t < l.end()) {
                            anomaly(v, c, "renew answered 0 inside the lease".into());
                        }
                        if let Some(l) = leases.remove(&id) {
                            v.lapsed += 1;
                            segs.push(Seg {
                                start: l.start,
                                end: l.end().min(c.invoke),
                                count: 1,
                                who: who(c, "leased permit up to its lease end"),
                            });
                        }
                    }
                    None => {
                        // It may have shortened the lease.
                        if let Some(l) = leases.get_mut(&id)
                            && !tied
                            && renewed.end() < l.end()
                        {
                            *l = Lease {
                                start: l.start,
                                ..renewed
                            };
                        }
                    }
                    Some((_, out)) if tolerated(out) => {}
                    Some(_) => anomaly(v, c, "expected 1 or 0".into()),
                }
            }
            _ => {}
        }
    }
    // What is still held at the end of the history.
    for (start, count) in anon {
        segs.push(Seg {
            start,
            end: last_time.max(start),
            count,
            who: format!("{}: anonymous permits still held at the end", h.name),
        });
    }
    for (id, l) in leases {
        let end = if l.tied {
            match h.killed_at {
                Some(k) => k + o.tied_grace_ns,
                None => last_time,
            }
        } else {
            // Left to lapse: the server returns it at its deadline.
            v.lapsed += 1;
            l.end()
        };
        if end > l.start {
            segs.push(Seg {
                start: l.start,
                end,
                count: 1,
                who: format!(
                    "{}: {} permit {id} until {}",
                    h.name,
                    if l.tied { "KEEPALIVE" } else { "leased" },
                    if l.tied {
                        "its worker's death"
                    } else {
                        "its lease end"
                    }
                ),
            });
        }
    }
}

/// Judges every history.
pub fn check(hists: &[History], o: &Opts) -> Verdict {
    let mut v = Verdict::default();
    let mut segs = Vec::new();
    let mut ids = HashSet::new();
    for h in hists {
        scan(h, o, &mut segs, &mut v, &mut ids);
    }
    sweep(&segs, o.permits, &mut v);
    v
}

/// The most held at once, and the periods over `permits`.
fn sweep(segs: &[Seg], permits: u64, v: &mut Verdict) {
    // (time, +count / -count): ends before starts at the same instant.
    let mut events: Vec<(u64, i64)> = Vec::with_capacity(segs.len() * 2);
    for s in segs.iter().filter(|s| s.end > s.start) {
        events.push((s.start, s.count as i64));
        events.push((s.end, -(s.count as i64)));
    }
    events.sort_unstable();
    let mut held: i64 = 0;
    let mut over = false;
    for (t, d) in events {
        held += d;
        v.max_held = v.max_held.max(held.max(0) as u64);
        if held as u64 > permits && held > 0 {
            if !over {
                v.overs += 1;
                if v.over_examples.len() < 5 {
                    v.over_examples.push(Over {
                        at: t,
                        held: held as u64,
                        holders: segs
                            .iter()
                            .filter(|s| s.start <= t && t < s.end)
                            .map(|s| format!("{} x{} [{}..{}]", s.who, s.count, s.start, s.end))
                            .collect(),
                    });
                }
            }
            over = true;
        } else {
            over = false;
        }
    }
}

/// Anonymous permits a history holds at its end, from the worker's own
/// calls (and the recovered answer to its last one when `with_recovered`).
pub fn anonymous_held(h: &History, with_recovered: bool) -> u64 {
    let mut held: i64 = 0;
    for c in h.own() {
        match (c.cmd().as_str(), c.out()) {
            ("SEMAPHORE.ACQUIRE", Some(Out::Int(k))) if with_recovered || !c.recovered => {
                held += k;
            }
            ("SEMAPHORE.RELEASE", _) => {
                // Released once invoked: a RELEASE cannot fail, and one in
                // flight at a freeze has reached the server (see famproc).
                held -= c.opt("COUNT").unwrap_or(1);
            }
            _ => {}
        }
    }
    held.max(0) as u64
}

/// Permits leased with KEEPALIVE that a history still holds at its end
/// (with the recovered answer to its last call): what its connection's
/// close returns.
pub fn tied_held(h: &History) -> u64 {
    let mut t = TiedPermits::default();
    for c in h.own() {
        t.apply(c);
    }
    t.held()
}

/// The KEEPALIVE permits a worker holds, call after call.
#[derive(Default)]
pub struct TiedPermits {
    ids: HashSet<Vec<u8>>,
}

impl TiedPermits {
    pub fn apply(&mut self, c: &Call) {
        match (c.cmd().as_str(), c.out()) {
            ("SEMAPHORE.LEASE", Some(Out::Arr(items))) if c.flag("KEEPALIVE") => {
                for i in items {
                    if let Item::Bulk(b) = i {
                        self.ids.insert(b.clone());
                    }
                }
            }
            ("SEMAPHORE.RETURN", out) if !matches!(out, Some(Out::Err(_))) => {
                for id in &c.args[2..] {
                    self.ids.remove(id.as_bytes());
                }
            }
            _ => {}
        }
    }

    pub fn held(&self) -> u64 {
        self.ids.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::famhist::parse;

    fn hist(name: &str, text: &str) -> History {
        parse(text, name).unwrap()
    }

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210";

    fn ids(list: &[&str]) -> String {
        list.iter()
            .map(|i| format!("x{}", crate::history::hex(i.as_bytes())))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn anonymous_permits_handed_on_in_order_pass() {
        // 2 permits: w0 holds 2 until 100 ms; w1 gets 2 at 101 ms.
        let w0 = hist(
            "w0",
            "I 0 0 SEMAPHORE.ACQUIRE sem COUNT 2\nR 0 1000000 INT 2\n\
             I 1 100000000 SEMAPHORE.RELEASE sem COUNT 2\nR 1 100500000 INT 2\n",
        );
        let w1 = hist(
            "w1",
            "I 0 50000000 SEMAPHORE.ACQUIRE sem COUNT 2 BLOCK 500\nR 0 101000000 INT 2\n\
             I 1 150000000 SEMAPHORE.RELEASE sem COUNT 1\nR 1 150100000 INT 1\n\
             I 2 151000000 SEMAPHORE.RELEASE sem COUNT 1\nR 2 151100000 INT 2\n",
        );
        let v = check(&[w0, w1], &Opts::new(2));
        assert_eq!(v.violations(), 0, "{v:?}");
        assert_eq!(v.max_held, 2);
        assert_eq!((v.acquires, v.permits_granted), (2, 4));
    }

    #[test]
    fn an_oversell_is_found() {
        // w1 is granted while w0 still holds both permits.
        let w0 = hist(
            "w0",
            "I 0 0 SEMAPHORE.ACQUIRE sem COUNT 2\nR 0 1000000 INT 2\n\
             I 1 100000000 SEMAPHORE.RELEASE sem COUNT 2\nR 1 100500000 INT 2\n",
        );
        let w1 = hist(
            "w1",
            "I 0 50000000 SEMAPHORE.ACQUIRE sem\nR 0 60000000 INT 1\n\
             I 1 70000000 SEMAPHORE.RELEASE sem\nR 1 70100000 INT 1\n",
        );
        let v = check(&[w0, w1], &Opts::new(2));
        assert_eq!(v.overs, 1, "{v:?}");
        assert_eq!(v.max_held, 3);
        assert_eq!(v.over_examples[0].holders.len(), 2);
    }

    #[test]
    fn leases_end_at_their_deadline_and_tripled_leases_overlap() {
        // 1 permit: w0 leases PX 100 and walks away; w1 is granted at 120 ms.
        let w0 = hist(
            "w0",
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem COUNT 1 PX 100\nR 0 1000000 ARR {}\n",
                ids(&[A])
            ),
        );
        let w1 = hist(
            "w1",
            &format!(
                "I 0 10000000 SEMAPHORE.LEASE sem PX 100 BLOCK 500\nR 0 120000000 ARR {}\n\
                 I 1 130000000 SEMAPHORE.RETURN sem {B}\nR 1 130100000 INT 1\n",
                ids(&[B])
            ),
        );
        let hs = [w0, w1];
        let v = check(&hs, &Opts::new(1));
        assert_eq!(v.violations(), 0, "{v:?}");
        assert_eq!(v.lapsed, 1);
        let mut tripled = Opts::new(1);
        tripled.lease_factor = 3;
        assert_eq!(check(&hs, &tripled).overs, 1);
    }

    #[test]
    fn keepalive_holds_last_until_the_kill() {
        // w0 leases KEEPALIVE PX 100 and holds it for 1 s (the server
        // renews); w1 is granted 2 ms after w0 is killed at 1000 ms.
        let w0 = hist(
            "w0",
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem PX 100 KEEPALIVE\nR 0 1000000 ARR {}\nK 1000000000\n",
                ids(&[A])
            ),
        );
        let w1 = hist(
            "w1",
            &format!(
                "I 0 500000000 SEMAPHORE.LEASE sem PX 1000 BLOCK 0\nR 0 1002000000 ARR {}\n\
                 I 1 1010000000 SEMAPHORE.RETURN sem {B}\nR 1 1010100000 INT 1\n",
                ids(&[B])
            ),
        );
        let hs = [w0.clone(), w1.clone()];
        assert_eq!(check(&hs, &Opts::new(1)).violations(), 0);
        let mut late = Opts::new(1);
        late.tied_grace_ns = 50 * MS;
        let v = check(&hs, &late);
        assert_eq!(v.overs, 1, "{v:?}");
        // Granted before the kill: an oversell.
        let early = hist(
            "w1",
            &format!(
                "I 0 500000000 SEMAPHORE.LEASE sem PX 1000 BLOCK 0\nR 0 900000000 ARR {}\n",
                ids(&[B])
            ),
        );
        assert_eq!(check(&[w0, early], &Opts::new(1)).overs, 1);
    }

    #[test]
    fn wrong_replies_are_anomalies() {
        let bad = hist(
            "w0",
            &format!(
                "I 0 0 SEMAPHORE.ACQUIRE sem COUNT 2\nR 0 1 INT 1\n\
                 I 1 2 SEMAPHORE.LEASE sem COUNT 1 PX 100\nR 1 3 ARR {}\n\
                 I 2 4 SEMAPHORE.RETURN sem {A}\nR 2 5 ERR NOTOWNER no such id\n\
                 I 3 6 SEMAPHORE.LEASE sem COUNT 1 PX 100\nR 3 7 ARR {}\n\
                 I 4 8 SEMAPHORE.LEASE sem COUNT 1 PX 100\nR 4 9 ARR xabcd\n\
                 I 5 10 SEMAPHORE.ACQUIRE sem BLOCK 10\nR 5 11 HUNG no reply\n",
                ids(&[A]),
                ids(&[A])
            ),
        );
        let v = check(&[bad], &Opts::new(5));
        // wrong count, NOTOWNER inside the lease, id twice, not an id, hung.
        assert_eq!(v.anomalies.len(), 5, "{:#?}", v.anomalies);
    }

    #[test]
    fn notowner_is_judged_when_the_server_may_have_run_the_call() {
        // Lease PX 50 from 0; a RETURN invoked at 40 ms but answered at
        // 60 ms may have run after the deadline: NOTOWNER is possible.
        let slow = hist(
            "w0",
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem PX 50\nR 0 1000000 ARR {}\n\
                 I 1 40000000 SEMAPHORE.RETURN sem {A}\nR 1 60000000 ERR NOTOWNER lapsed\n",
                ids(&[A])
            ),
        );
        let v = check(&[slow], &Opts::new(1));
        assert_eq!(v.violations(), 0, "{v:?}");
        // Answered at 45 ms: it ran inside the lease.
        let fast = hist(
            "w0",
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem PX 50\nR 0 1000000 ARR {}\n\
                 I 1 40000000 SEMAPHORE.RETURN sem {A}\nR 1 45000000 ERR NOTOWNER lapsed\n",
                ids(&[A])
            ),
        );
        assert_eq!(check(&[fast], &Opts::new(1)).anomalies.len(), 1);
    }

    #[test]
    fn recovered_grants_and_proxy_releases() {
        // Killed while queued; the runner read a grant of 2 from the socket
        // and released them on its behalf.
        let w0 = hist(
            "w0",
            "I 0 0 SEMAPHORE.ACQUIRE sem COUNT 1\nR 0 1000000 INT 1\n\
             I 1 2000000 SEMAPHORE.ACQUIRE sem COUNT 2 BLOCK 100\n\
             X 1 10000000 INT 2\nK 9000000\n\
             I 2 11000000 SEMAPHORE.RELEASE sem COUNT 3\nR 2 11100000 INT 3\n",
        );
        // The worker's own calls: the runner's release is not one.
        assert_eq!(anonymous_held(&w0, true), 3);
        let before = hist(
            "w0",
            "I 0 0 SEMAPHORE.ACQUIRE sem COUNT 1\nR 0 1000000 INT 1\n\
             I 1 2000000 SEMAPHORE.ACQUIRE sem COUNT 2 BLOCK 100\nX 1 10000000 INT 2\nK 9000000\n",
        );
        assert_eq!(anonymous_held(&before, true), 3);
        assert_eq!(anonymous_held(&before, false), 1);
        let v = check(&[w0], &Opts::new(3));
        assert_eq!(v.violations(), 0, "{v:?}");
        assert_eq!((v.max_held, v.released_by_proxy), (3, 3));
        let tied = hist(
            "w1",
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem COUNT 2 KEEPALIVE\nR 0 1 ARR {}\n\
                 I 1 2 SEMAPHORE.RETURN sem {A}\nR 1 3 INT 1\n",
                ids(&[A, B])
            ),
        );
        assert_eq!(tied_held(&tied), 1);
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;
    use crate::famhist::parse;

    #[test]
    fn a_queued_lease_runs_from_the_servers_deadline() {
        // 1 permit. w0's lease PX 100 waited 400 ms in the queue: counted
        // from its invocation it would be over before its grant; the
        // server's deadline (read right after) says it runs to 500 ms. w1 is
        // granted at 450 ms: an oversell only the server's deadline shows.
        let id = "0123456789abcdef0123456789abcdef";
        let x = format!("x{}", crate::history::hex(id.as_bytes()));
        let offset: i64 = 1_000_000_000_000_000; // realtime - mono
        let deadline_ms = (500 * MS as i64 + offset) / MS as i64;
        let w0 = parse(
            &format!(
                "I 0 0 SEMAPHORE.LEASE sem PX 100 BLOCK 1000\nR 0 400000000 ARR {x}\n\
                 I 1 400100000 ZMSCORE {{sem}}:timeout {id}\nR 1 400200000 ARR x{}\n",
                crate::history::hex(deadline_ms.to_string().as_bytes())
            ),
            "w0",
        )
        .unwrap();
        let y = format!(
            "x{}",
            crate::history::hex(b"fedcba9876543210fedcba9876543210")
        );
        let w1 = parse(
            &format!(
                "I 0 300000000 SEMAPHORE.LEASE sem PX 1000 BLOCK 1000\nR 0 450000000 ARR {y}\n"
            ),
            "w1",
        )
        .unwrap();
        let mut o = Opts::new(1);
        o.realtime_offset_ns = offset;
        let v = check(&[w0.clone(), w1.clone()], &o);
        assert_eq!(v.overs, 1, "{v:?}");
        // Without the deadline nothing is certain about w0 after 100 ms.
        o.realtime_offset_ns = offset + 1_000 * MS as i64;
        assert_eq!(check(&[w0, w1], &o).overs, 0);
    }
}
