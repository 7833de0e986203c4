//! R7 across promotions: with `REPLICAS 1`, no permit is granted twice.
//!
//! As R3's churn across promotions (`promotions`): a primary and two
//! replicas, worker threads on whatever server is the primary now, the
//! primary SIGKILLed or SIGSTOPped (alternately), the replica with the
//! highest offset promoted, the other replica and the old primary following
//! it (a stopped primary first runs as a primary for a moment). The threads
//! take permits of one semaphore: `SEMAPHORE.ACQUIRE ... REPLICAS 1 ms`
//! then `RELEASE`, or `SEMAPHORE.LEASE ... PX ms REPLICAS 1 ms` then
//! `RETURN`, sometimes with BLOCK, each give-back followed by `WAIT 1`.
//!
//! Judged by
//! - `semcheck` over all threads across all promotions: never more than N
//!   permits certainly held at once (a grant the promoted server never saw
//!   lets it grant the same permit again);
//! - leases lost at promotion: ids a client certainly held at a promotion
//!   that the promoted server's `{sem}:timeout` lacks;
//! - the books after each promotion: the threads pause between rounds, the
//!   leases left behind lapse, and the promoted server must have at most N
//!   available: more means a permit taken on the old primary came back
//!   without ever having been taken here (**duplicated**); fewer, releases
//!   the old primary had not replicated (lost to the pool: releases are not
//!   acknowledged, so this is expected). The runner then sets the count
//!   back to N (`SEMAPHORE.ADD`) and the threads go on.
//!
//! The same run without REPLICAS shows what they are for.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::rng::Rng;
use testkit::{Client, Kind, Reply, Server};

use crate::clock::{MS, mono_ns};
use crate::famhist::{Call, History, Item, Out};
use crate::promotions::{fail_and_promote, rejoin, streaming};
use crate::report::{Section, fmt_int};

/// A worker's id and its calls, each with the epoch it was sent in.
type WorkerCalls = (usize, Vec<(u64, Call)>);
use crate::semcheck::{self, Opts};
use crate::servers;

const KEY: &str = "sem";
const CLIENT_TIMEOUT_MS: u64 = 1500;
const REPLICAS_MS: &str = "300";

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub replicas: bool,
    pub promotions: usize,
    pub churn: Duration,
    pub workers: usize,
    pub permits: u64,
    pub seed: u64,
}

pub struct Outcome {
    pub config: Config,
    pub verdict: semcheck::Verdict,
    pub kills: usize,
    pub stops: usize,
    pub noreplicas: u64,
    pub lost_leases: usize,
    /// Per promotion: permits available beyond N (duplicated) and below N
    /// (lost releases), once every thread paused and every lease lapsed.
    pub duplicated: i64,
    pub lost_releases: i64,
    pub problems: Vec<String>,
}

struct Shared {
    epoch: AtomicU64,
    port: AtomicU16,
    stop: AtomicBool,
    pause: AtomicBool,
    paused: AtomicUsize,
}

struct Worker {
    id: usize,
    cfg: Config,
    shared: Arc<Shared>,
    conn: Option<(u64, Client)>,
    calls: Vec<(u64, Call)>,
    seq: u64,
    rng: Rng,
}

impl Worker {
    fn connect(&mut self) -> bool {
        let epoch = self.shared.epoch.load(Ordering::SeqCst);
        if self.conn.as_ref().is_some_and(|(e, _)| *e == epoch) {
            return true;
        }
        self.conn = None;
        let port = self.shared.port.load(Ordering::SeqCst);
        match servers::expect_panic(|| Client::connect(port)) {
            Ok(c) => {
                self.conn = Some((epoch, c));
                true
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(5));
                false
            }
        }
    }

    /// One call; None if its outcome is unknown.
    fn call(&mut self, args: Vec<String>) -> Option<Out> {
        if self.conn.as_ref().map(|(e, _)| *e) != Some(self.shared.epoch.load(Ordering::SeqCst)) {
            self.conn = None;
            return None;
        }
        let (epoch, mut c) = self.conn.take()?;
        let invoke = mono_ns();
        let seq = self.seq;
        self.seq += 1;
        let deadline = invoke + CLIENT_TIMEOUT_MS * MS;
        let got = servers::expect_panic(|| {
            c.send(&args);
            loop {
                if let Some(r) = c.try_read_reply(Duration::from_millis(20)) {
                    return Some(r);
                }
                if mono_ns() > deadline {
                    return None;
                }
            }
        });
        let ret = mono_ns();
        let mut call = Call {
            seq,
            invoke,
            args,
            ret: None,
            recovered: false,
            by_proxy: false,
        };
        let out = match got {
            Ok(Some(r)) => {
                let out = Out::from_reply(&r);
                call.ret = Some((ret, out.clone()));
                self.conn = Some((epoch, c));
                Some(out)
            }
            _ => None,
        };
        self.calls.push((epoch, call));
        out
    }

    fn with_options(&mut self, mut a: Vec<String>) -> Vec<String> {
        if self.rng.chance(40) {
            a.extend(["BLOCK".into(), self.rng.range(50, 300).to_string()]);
        }
        if self.cfg.replicas {
            a.extend(["REPLICAS".into(), "1".into(), REPLICAS_MS.into()]);
        }
        a
    }

    fn wait_ack(&mut self) {
        self.call(vec!["WAIT".into(), "1".into(), "200".into()]);
    }

    fn cycle(&mut self) {
        if !self.connect() {
            return;
        }
        let count = 1 + self.rng.below(2);
        if self.rng.chance(50) {
            let a = vec![
                "SEMAPHORE.ACQUIRE".into(),
                KEY.into(),
                "COUNT".into(),
                count.to_string(),
            ];
            let a = self.with_options(a);
            if self.call(a) != Some(Out::Int(count as i64)) {
                std::thread::sleep(Duration::from_millis(self.rng.below(3)));
                return;
            }
            std::thread::sleep(Duration::from_millis(self.rng.below(5)));
            let a = vec![
                "SEMAPHORE.RELEASE".into(),
                KEY.into(),
                "COUNT".into(),
                count.to_string(),
            ];
            self.give_back(a);
        } else {
            let lease = self.rng.range(150, 600);
            let a = vec![
                "SEMAPHORE.LEASE".into(),
                KEY.into(),
                "COUNT".into(),
                count.to_string(),
                "PX".into(),
                lease.to_string(),
            ];
            let a = self.with_options(a);
            let ids: Vec<String> = match self.call(a) {
                Some(Out::Arr(items)) => items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
                        _ => None,
                    })
                    .collect(),
                _ => {
                    std::thread::sleep(Duration::from_millis(self.rng.below(3)));
                    return;
                }
            };
            std::thread::sleep(Duration::from_millis(self.rng.below(5)));
            let mut a = vec!["SEMAPHORE.RETURN".into(), KEY.into()];
            a.extend(ids);
            self.give_back(a);
        }
    }

    /// Sends a RELEASE or RETURN, on the new primary if the old one was
    /// replaced before it could be sent, until it is sent once; then WAIT.
    fn give_back(&mut self, a: Vec<String>) {
        loop {
            let sent_before = self.calls.len();
            if self.connect() {
                if self.call(a.clone()).is_some() {
                    self.wait_ack();
                    return;
                }
                if self.calls.len() > sent_before {
                    // Sent, outcome unknown: the hold ends at its invocation.
                    return;
                }
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}

fn timeout_ids(s: &Server) -> HashSet<Vec<u8>> {
    let mut c = s.client();
    match c.cmd(&["ZRANGE", &format!("{{{KEY}}}:timeout"), "0", "-1"]) {
        Reply::Array(a) => a.iter().map(|m| m.as_bytes().to_vec()).collect(),
        _ => HashSet::new(),
    }
}

struct Promotion {
    epoch: u64,
    at: u64,
    ids: HashSet<Vec<u8>>,
}

pub fn run(cfg: &Config) -> Outcome {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start(cfg.kind)).collect();
    servers[1].replica_of(&servers[0]);
    servers[2].replica_of(&servers[0]);
    let mut problems = Vec::new();
    servers[0]
        .client()
        .cmd(&["SEMAPHORE.CREATE", KEY, &cfg.permits.to_string()]);
    if !streaming(&servers[0], 2) {
        problems.push("replicas did not stream at the start".into());
    }
    let shared = Arc::new(Shared {
        epoch: AtomicU64::new(1),
        port: AtomicU16::new(servers[0].port),
        stop: AtomicBool::new(false),
        pause: AtomicBool::new(false),
        paused: AtomicUsize::new(0),
    });
    let results: Arc<Mutex<Vec<WorkerCalls>>> = Arc::default();
    let handles: Vec<_> = (0..cfg.workers)
        .map(|id| {
            let (cfg, shared, results) = (cfg.clone(), shared.clone(), results.clone());
            std::thread::spawn(move || {
                let mut w = Worker {
                    id,
                    rng: Rng::new(cfg.seed ^ ((id as u64 + 1) << 40)),
                    cfg,
                    shared,
                    conn: None,
                    calls: Vec::new(),
                    seq: 0,
                };
                while !w.shared.stop.load(Ordering::SeqCst) {
                    if w.shared.pause.load(Ordering::SeqCst) {
                        w.shared.paused.fetch_add(1, Ordering::SeqCst);
                        while w.shared.pause.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        w.shared.paused.fetch_sub(1, Ordering::SeqCst);
                    }
                    w.cycle();
                }
                results.lock().unwrap().push((w.id, w.calls));
            })
        })
        .collect();

    let mut rng = Rng::new(cfg.seed.wrapping_mul(7919));
    let mut primary = 0;
    let mut promotions = Vec::new();
    let (mut kills, mut stops) = (0, 0);
    let (mut duplicated, mut lost_releases) = (0, 0);
    for p in 0..cfg.promotions {
        let churn = cfg.churn.as_millis() as u64;
        std::thread::sleep(Duration::from_millis(churn / 2 + rng.below(churn.max(1))));
        let kill = p % 2 == 0;
        let old = primary;
        match kill {
            true => kills += 1,
            false => stops += 1,
        }
        let (best, other, at) = fail_and_promote(&mut servers, old, kill, &mut problems);
        let epoch = shared.epoch.load(Ordering::SeqCst) + 1;
        promotions.push(Promotion {
            epoch,
            at,
            ids: timeout_ids(&servers[best]),
        });
        let port = servers[best].port.to_string();
        servers[other]
            .client()
            .cmd(&["REPLICAOF", "127.0.0.1", &port]);
        shared.port.store(servers[best].port, Ordering::SeqCst);
        shared.epoch.store(epoch, Ordering::SeqCst);
        rejoin(&mut servers, old, best, kill, &mut rng, p, &mut problems);
        primary = best;
        // The books: pause the threads, let leases left behind lapse.
        shared.pause.store(true, Ordering::SeqCst);
        let t = mono_ns();
        while shared.paused.load(Ordering::SeqCst) < cfg.workers && mono_ns() < t + 5_000 * MS {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut c = servers[best].client();
        let mut info = (0, 0);
        while mono_ns() < t + 5_000 * MS {
            let r = c.cmd(&["SEMAPHORE.INFO", KEY]);
            let f = |n: &str| r.map_get(n).map_or(-1, |v| v.as_int());
            info = (f("available"), f("leased"));
            if info.1 == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if info.1 != 0 {
            problems.push(format!(
                "promotion {p}: {} permits still leased 5 s later",
                info.1
            ));
        }
        let diff = info.0 - cfg.permits as i64;
        if diff > 0 {
            duplicated += diff;
        } else {
            lost_releases -= diff;
        }
        if diff != 0 {
            c.cmd(&["SEMAPHORE.ADD", KEY, &(-diff).to_string()]);
            c.cmd(&["WAIT", "2", "1000"]);
        }
        shared.pause.store(false, Ordering::SeqCst);
    }
    std::thread::sleep(cfg.churn);
    shared.stop.store(true, Ordering::SeqCst);
    for h in handles {
        if h.join().is_err() {
            problems.push("a worker thread panicked".into());
        }
    }
    for (i, s) in servers.iter().enumerate() {
        if i == primary {
            problems.extend(servers::health(s));
        } else {
            problems.extend(servers::log_problems(&s.log()));
        }
    }
    let mut results = Arc::try_unwrap(results)
        .expect("workers joined")
        .into_inner()
        .unwrap();
    results.sort_by_key(|(id, _)| *id);
    let hists: Vec<History> = results
        .iter()
        .map(|(id, calls)| History {
            name: format!("t{id}"),
            calls: calls.iter().map(|(_, c)| c.clone()).collect(),
            killed_at: None,
        })
        .collect();
    let verdict = semcheck::check(
        &hists,
        &Opts {
            failover: true,
            ..Opts::new(cfg.permits)
        },
    );
    let noreplicas = hists
        .iter()
        .flat_map(|h| h.calls.iter())
        .filter(|c| c.out().and_then(Out::err_code) == Some("NOREPLICAS"))
        .count() as u64;
    Outcome {
        config: cfg.clone(),
        lost_leases: lost_leases(&results, &promotions),
        verdict,
        kills,
        stops,
        noreplicas,
        duplicated,
        lost_releases,
        problems,
    }
}

/// Leases a client certainly held at a promotion, granted by the primary it
/// replaced, that the promoted server does not have.
fn lost_leases(results: &[(usize, Vec<(u64, Call)>)], promotions: &[Promotion]) -> usize {
    let mut lost = 0;
    for (_, calls) in results {
        // id -> (epoch, granted at, certain until)
        let mut held: Vec<(u64, u64, u64, Vec<u8>)> = Vec::new();
        let mut open: std::collections::HashMap<Vec<u8>, usize> = Default::default();
        for (epoch, c) in calls {
            match (c.cmd().as_str(), &c.ret) {
                ("SEMAPHORE.LEASE", Some((t, Out::Arr(items)))) => {
                    let px = c.opt("PX").unwrap_or(0) as u64;
                    for i in items {
                        if let Item::Bulk(b) = i {
                            open.insert(b.clone(), held.len());
                            held.push((*epoch, *t, c.invoke + px * MS, b.clone()));
                        }
                    }
                }
                ("SEMAPHORE.RETURN", _) => {
                    for id in &c.args[2..] {
                        if let Some(i) = open.remove(id.as_bytes()) {
                            held[i].2 = held[i].2.min(c.invoke);
                        }
                    }
                }
                _ => {}
            }
        }
        for (epoch, start, end, id) in held {
            if promotions
                .iter()
                .any(|p| epoch + 1 == p.epoch && start < p.at && p.at < end && !p.ids.contains(&id))
            {
                lost += 1;
            }
        }
    }
    lost
}

/// Runs each server with REPLICAS (and, unless `replicas_only`, without)
/// and adds the table to `sec`.
pub fn lines(
    sec: &mut Section,
    kinds: &[Kind],
    promotions: usize,
    churn: Duration,
    replicas_only: bool,
) {
    let permits = 4;
    sec.line(String::new());
    sec.line("### Semaphores across promotions (REPLICAS)".into());
    sec.line(String::new());
    sec.line(format!(
        "A primary and two replicas; 8 threads take permits of one semaphore of {permits} on the current primary: \
         ACQUIRE COUNT 1-2 then RELEASE, or LEASE COUNT 1-2 PX 150-600 then RETURN (40% with BLOCK 50-300 ms; holds 0-5 ms; \
         every give-back followed by WAIT 1 200). {promotions} times per run, after ~{:.1} s of churn, the primary is SIGKILLed or \
         SIGSTOPped (alternately) and the replica with the highest offset promoted, as in R3; after each promotion the threads \
         pause, leases left behind lapse, and the promoted server's count is compared with N. With REPLICAS, every ACQUIRE \
         and LEASE carries `REPLICAS 1 {REPLICAS_MS}`.",
        churn.as_secs_f64()
    ));
    sec.line(String::new());
    sec.line("| server | REPLICAS | promotions (kill / stop) | ops checked | grants (ACQUIRE / LEASE) | NOREPLICAS | most held at once | **more than N held** | **leases lost at promotion** | **permits duplicated** | releases lost at promotion | other replies a correct server cannot give |".into());
    sec.line("|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    for &kind in kinds {
        for replicas in [true, false] {
            if !replicas && replicas_only {
                continue;
            }
            let cfg = Config {
                kind,
                replicas,
                promotions,
                churn,
                workers: 8,
                permits,
                seed: 700 + promotions as u64,
            };
            let o = run(&cfg);
            let v = &o.verdict;
            sec.line(format!(
                "| {kind} | {} | {} ({} / {}) | {} | {} / {} | {} | {} | **{}** | **{}** | **{}** | {} | {} |",
                if replicas { "`REPLICAS 1`" } else { "none" },
                o.kills + o.stops,
                o.kills,
                o.stops,
                fmt_int(v.ops),
                fmt_int(v.acquires),
                fmt_int(v.leases),
                o.noreplicas,
                v.max_held,
                v.overs,
                o.lost_leases,
                o.duplicated,
                o.lost_releases,
                v.anomalies.len(),
            ));
            let what = format!(
                "{kind} {}",
                if replicas {
                    "with REPLICAS"
                } else {
                    "without REPLICAS"
                }
            );
            if replicas {
                for x in &v.over_examples {
                    sec.fail(format!(
                        "{what}: {} permits held at {}: {}",
                        x.held,
                        x.at,
                        x.holders.join("; ")
                    ));
                }
                for a in v.anomalies.iter().take(10) {
                    sec.fail(format!("{what}: {a}"));
                }
                sec.check(o.lost_leases == 0, || {
                    format!("{what}: {} leases lost at promotion", o.lost_leases)
                });
                sec.check(o.duplicated == 0, || {
                    format!("{what}: {} permits duplicated", o.duplicated)
                });
            } else {
                for a in v.anomalies.iter().take(2) {
                    sec.note(format!("{what} (expected): {a}"));
                }
            }
            sec.check(v.acquires > 0 && v.leases > 0, || {
                format!("{what}: no grants")
            });
            for p in &o.problems {
                sec.fail(format!("{what}: {p}"));
            }
        }
    }
    sec.line(String::new());
    sec.line(
        "\"more than N held\": periods during which the permits clients certainly held (as in the table above) add up to more \
         than N, across all promotions. \"leases lost\": ids a client certainly held at a promotion, granted by the replaced \
         primary, missing from the promoted server's `{sem}:timeout`. \"permits duplicated\": permits the promoted server had \
         beyond N once every thread paused and every lease lapsed (a grant it never saw, given back to it); \"releases lost\": \
         permits it had below N (a RELEASE or RETURN the old primary had not replicated: releases are not acknowledged, so \
         the pool shrinks; the runner puts them back). \"other replies\": NOTOWNER for a lease the promoted server lacks, and \
         the like."
            .into(),
    );
}
