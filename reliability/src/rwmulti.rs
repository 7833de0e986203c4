//! R8: read-write locks and multi-key locks under churn.
//!
//! Two runs per server and protocol, each with 16 worker processes (this
//! binary re-executed as `rw-worker`), one frozen and SIGKILLed every ~2 s
//! and restarted (`famproc`: its last call is never ambiguous), the first 4
//! taking everything with KEEPALIVE (every other kill hits one of them while
//! it holds):
//!
//! - **read-write**: 2 `RWLOCK` keys; rounds of READ (70%) or WRITE, with
//!   and without BLOCK, re-entries, renewals, downgrades (a writer takes READ
//!   and releases WRITE), upgrade attempts (`NOUPGRADE` expected), plain
//!   holders that walk away (the lease frees the lock). Judged by `rwcheck`:
//!   no writer's window overlaps anyone's, readers' only readers'.
//! - **multi-key**: 6 plain locks; rounds over a random set of 1-4 of them in
//!   random order (`LOCK.MACQUIRE`, or `LOCK.ACQUIRE` for a single key),
//!   re-entries of the whole set, `LOCK.MRELEASE`. Owners are named after
//!   their set (`w3.0.17:m0+m2`), so an observer that samples `LOCK.INFO` of
//!   every key in one MULTI/EXEC, as fast as it can, sees any partial hold:
//!   an owner holding some keys of its set but not all. Judged by `rwcheck`
//!   (no two owners' windows of a key overlap), by the observer (no partial
//!   hold), and by progress: every worker keeps getting grants. Negative
//!   control for the observer: a thread that takes sets key by key with
//!   `LOCK.ACQUIRE`, as Redisson's MultiLock does; the observer must catch it
//!   holding part of its set.
//!
//! Both runs subscribe to the keys' `d`-class keyspace events to time a
//! killed KEEPALIVE holder's `*.closed` after the kill, and have R1's two
//! negative controls (leases taken 3x longer; killed tied holders taken to
//! let go 50 ms late: both must show overlaps).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use testkit::rng::Rng;
use testkit::{Client, Kind, Reply, Server};

use crate::clock::{MS, mono_ns};
use crate::famhist::{self, Call, Follower, History, Out};
use crate::famproc::{Conn, Proc};
use crate::report::{Section, fmt_int, median_max};
use crate::rwcheck::{self, Opts};
use crate::servers;

pub const RW_KEYS: usize = 2;
pub const MULTI_KEYS: usize = 8;
pub const KEEPALIVE_WORKERS: usize = 4;
/// No worker may go longer than this without a fresh grant (each wait is
/// bounded by BLOCK <= 600 ms; the longest seen while building this was
/// ~2.6 s).
pub const PROGRESS_BOUND_MS: f64 = 10_000.0;
/// A killed worker's tied holds must be let go within this.
pub const CLOSED_BOUND_MS: f64 = 50.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    ReadWrite,
    Multi,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::ReadWrite => "rw",
            Workload::Multi => "multi",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub resp3: bool,
    pub workload: Workload,
    pub seed: u64,
    pub duration: Duration,
    pub kill_every: Duration,
    pub workers: usize,
}

// ---- the worker process ----

pub struct WorkerArgs {
    pub port: u16,
    pub resp3: bool,
    pub workload: Workload,
    pub keepalive: bool,
    pub seed: u64,
    pub id: usize,
    pub incarnation: u32,
    pub until_ns: u64,
    pub out: std::path::PathBuf,
}

const PATIENCE_MS: u64 = 10_000;

struct Worker {
    conn: Conn,
    rng: Rng,
    keepalive: bool,
    me: String,
    round: u64,
}

fn s(x: &str) -> String {
    x.to_string()
}

impl Worker {
    fn call(&mut self, args: &[String], block: Option<i64>) -> Out {
        let patience = PATIENCE_MS + block.unwrap_or(0).max(0) as u64;
        self.conn.call(args, Duration::from_millis(patience)).2
    }

    fn lease(&mut self) -> i64 {
        if self.keepalive {
            self.rng.range(300, 900)
        } else {
            self.rng.range(50, 400)
        }
    }

    /// `PX lease [KEEPALIVE]`.
    fn lease_args(&mut self) -> Vec<String> {
        let mut a = vec![s("PX"), self.lease().to_string()];
        if self.keepalive {
            a.push(s("KEEPALIVE"));
        }
        a
    }

    fn hold(&mut self) {
        let ms = if !self.keepalive {
            self.rng.range(0, 5)
        } else if self.rng.chance(4) {
            // Past the lease: the server renews.
            self.rng.range(300, 1200)
        } else {
            self.rng.range(5, 100)
        };
        self.conn.sleep_ms(ms as u64);
    }

    /// Between rounds; KEEPALIVE workers, with their long holds, leave the
    /// keys to the others for a while.
    fn idle(&mut self) {
        let ms = if self.keepalive {
            self.rng.below(200)
        } else {
            self.rng.below(3)
        };
        self.conn.sleep_ms(ms);
    }

    fn rw_round(&mut self) {
        let key = format!("rw{}", self.rng.below(RW_KEYS as u64));
        let owner = format!("{}.{}", self.me, self.round);
        let write = self.rng.chance(30);
        let mode = if write { "WRITE" } else { "READ" };
        let block = self.rng.chance(60).then(|| self.rng.range(1, 600));
        let mut a = vec![s("RWLOCK.ACQUIRE"), key.clone(), owner.clone(), s(mode)];
        a.extend(self.lease_args());
        if let Some(b) = block {
            a.extend([s("BLOCK"), b.to_string()]);
        }
        if self.call(&a, block) != Out::Int(1) {
            let pause = self.rng.below(3);
            self.conn.sleep_ms(pause);
            return;
        }
        let mut holds = 1;
        self.hold();
        if self.rng.chance(10) {
            let mut a = vec![s("RWLOCK.ACQUIRE"), key.clone(), owner.clone(), s(mode)];
            a.extend(self.lease_args());
            if let Out::Int(n) = self.call(&a, None) {
                holds = n;
            }
        }
        if !write && self.rng.chance(5) {
            // An upgrade: refused with NOUPGRADE.
            let mut a = vec![s("RWLOCK.ACQUIRE"), key.clone(), owner.clone(), s("WRITE")];
            a.extend(self.lease_args());
            self.call(&a, None);
        }
        if self.rng.chance(10) {
            let mut a = vec![s("RWLOCK.RENEW"), key.clone(), owner.clone()];
            a.extend(self.lease_args());
            self.call(&a, None);
        }
        if write && self.rng.chance(20) {
            // Downgrade: READ while writing, then let WRITE go.
            let mut a = vec![s("RWLOCK.ACQUIRE"), key.clone(), owner.clone(), s("READ")];
            a.extend(self.lease_args());
            let read = self.call(&a, None) == Out::Int(1);
            self.release(&key, &owner, "WRITE", holds);
            if read {
                self.hold();
                self.release(&key, &owner, "READ", 1);
            }
        } else {
            if !self.keepalive && self.rng.chance(5) {
                // Walk away: the lease frees it.
                return;
            }
            self.release(&key, &owner, mode, holds);
        }
        self.idle();
    }

    fn release(&mut self, key: &str, owner: &str, mode: &str, holds: i64) {
        for _ in 0..holds {
            let a = [s("RWLOCK.RELEASE"), s(key), s(owner), s(mode)];
            if !matches!(self.call(&a, None), Out::Int(n) if n > 0) {
                break;
            }
        }
    }

    fn multi_round(&mut self) {
        let size = match self.rng.below(100) {
            0..=19 => 1,
            20..=64 => 2,
            65..=89 => 3,
            _ => 4,
        };
        let mut keys: Vec<usize> = (0..MULTI_KEYS).collect();
        // A random subset in random order.
        for i in (1..keys.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            keys.swap(i, j);
        }
        keys.truncate(size);
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let set: Vec<String> = sorted.iter().map(|k| format!("m{k}")).collect();
        let keys: Vec<String> = keys.iter().map(|k| format!("m{k}")).collect();
        let owner = format!("{}.{}:{}", self.me, self.round, set.join("+"));
        let block = self.rng.chance(70).then(|| self.rng.range(1, 600));
        let single = size == 1 && self.rng.chance(50);
        let acquire = |w: &mut Worker, block: Option<i64>| -> Vec<String> {
            let mut a = if single {
                vec![s("LOCK.ACQUIRE"), keys[0].clone(), owner.clone()]
            } else {
                let mut a = vec![s("LOCK.MACQUIRE"), keys.len().to_string()];
                a.extend(keys.iter().cloned());
                a.push(owner.clone());
                a
            };
            a.extend(w.lease_args());
            if let Some(b) = block {
                a.extend([s("BLOCK"), b.to_string()]);
            }
            a
        };
        let a = acquire(self, block);
        let granted = match self.call(&a, block) {
            Out::Int(1) => true,
            Out::Arr(items) => items.len() == keys.len(),
            _ => false,
        };
        if !granted {
            let pause = self.rng.below(3);
            self.conn.sleep_ms(pause);
            return;
        }
        let mut holds = 1;
        self.hold();
        if self.rng.chance(10) {
            let a = acquire(self, None);
            match self.call(&a, None) {
                Out::Int(n) => holds = n,
                Out::Arr(items) if !items.is_empty() => {
                    if let famhist::Item::Int(n) = items[0] {
                        holds = n;
                    }
                }
                _ => {}
            }
        }
        if !self.keepalive && self.rng.chance(5) {
            return;
        }
        for _ in 0..holds {
            let a = if single {
                vec![s("LOCK.RELEASE"), keys[0].clone(), owner.clone()]
            } else {
                let mut a = vec![s("LOCK.MRELEASE"), keys.len().to_string()];
                a.extend(keys.iter().cloned());
                a.push(owner.clone());
                a
            };
            let left = match self.call(&a, None) {
                Out::Int(n) => n,
                Out::Arr(items) => match items.first() {
                    Some(famhist::Item::Int(n)) => *n,
                    _ => 0,
                },
                _ => 0,
            };
            if left <= 0 {
                break;
            }
        }
        self.idle();
    }
}

pub fn worker(a: WorkerArgs) {
    let conn = Conn::inherited(a.port, a.resp3, &a.out);
    let mut w = Worker {
        conn,
        rng: Rng::new(a.seed ^ ((a.id as u64) << 32) ^ (u64::from(a.incarnation) << 48)),
        keepalive: a.keepalive,
        me: format!("w{}.{}", a.id, a.incarnation),
        round: 0,
    };
    while mono_ns() < a.until_ns {
        match a.workload {
            Workload::ReadWrite => w.rw_round(),
            Workload::Multi => w.multi_round(),
        }
        w.round += 1;
    }
}

// ---- the observer (multi-key) ----

#[derive(Default, Debug)]
pub struct Observed {
    pub samples: u64,
    /// Partial holds by workers (violations), described.
    pub partial: Vec<String>,
    pub partial_count: u64,
    /// Partial holds of the key-by-key control thread (must be > 0).
    pub control_partial: u64,
    /// Samples where a multi-key set (2+ keys) was seen whole.
    pub whole_sets: u64,
}

fn observe(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Observed> {
    std::thread::spawn(move || {
        let mut c = Client::connect(port);
        let keys: Vec<String> = (0..MULTI_KEYS).map(|k| format!("m{k}")).collect();
        let mut o = Observed::default();
        while !stop.load(Ordering::SeqCst) {
            let mut cmds: Vec<Vec<String>> = vec![vec![s("MULTI")]];
            for k in &keys {
                cmds.push(vec![s("LOCK.INFO"), k.clone()]);
            }
            cmds.push(vec![s("EXEC")]);
            let refs: Vec<&[String]> = cmds.iter().map(|c| c.as_slice()).collect();
            c.send_pipeline(&refs);
            let mut exec = Reply::Nil;
            for _ in 0..cmds.len() {
                exec = c.read_reply();
            }
            let at = mono_ns();
            let infos = exec.as_array();
            let holder: HashMap<&str, String> = keys
                .iter()
                .zip(infos)
                .filter_map(|(k, i)| {
                    i.map_get("owner").map(|o| {
                        (
                            k.as_str(),
                            String::from_utf8_lossy(o.as_bytes()).into_owned(),
                        )
                    })
                })
                .collect();
            o.samples += 1;
            let mut seen = std::collections::HashSet::new();
            for owner in holder.values() {
                if !seen.insert(owner.clone()) {
                    continue;
                }
                let Some((_, set)) = owner.split_once(':') else {
                    continue;
                };
                let set: Vec<&str> = set.split('+').collect();
                let missing: Vec<&str> = set
                    .iter()
                    .copied()
                    .filter(|k| holder.get(k) != Some(owner))
                    .collect();
                if missing.is_empty() {
                    if set.len() > 1 {
                        o.whole_sets += 1;
                    }
                } else if owner.starts_with("ml.") {
                    o.control_partial += 1;
                } else {
                    o.partial_count += 1;
                    if o.partial.len() < 5 {
                        let ttls: Vec<String> = keys
                            .iter()
                            .zip(infos)
                            .filter(|(_, i)| !i.is_nil())
                            .map(|(k, i)| {
                                format!(
                                    "{k}: {} ttl {:?} holds {:?}",
                                    i.map_get("owner").map_or(String::new(), |o| {
                                        String::from_utf8_lossy(o.as_bytes()).into_owned()
                                    }),
                                    i.map_get("ttl"),
                                    i.map_get("holds")
                                )
                            })
                            .collect();
                        o.partial.push(format!(
                            "at {at}: {owner} seen without {} ({})",
                            missing.join(", "),
                            ttls.join("; ")
                        ));
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        o
    })
}

/// The negative control of the observer: takes a set key by key with
/// LOCK.ACQUIRE (Redisson's MultiLock), recorded as process `ml`.
fn key_by_key(port: u16, stop: Arc<AtomicBool>, seed: u64) -> std::thread::JoinHandle<History> {
    std::thread::spawn(move || {
        let mut c = Client::connect(port);
        let mut rng = Rng::new(seed);
        let mut calls = Vec::new();
        let mut seq = 0;
        let mut call = |c: &mut Client, args: Vec<String>, calls: &mut Vec<Call>| -> Out {
            let invoke = mono_ns();
            let r = c.cmd(&args);
            let out = Out::from_reply(&r);
            calls.push(Call {
                seq,
                invoke,
                args,
                ret: Some((mono_ns(), out.clone())),
                recovered: false,
                by_proxy: false,
            });
            seq += 1;
            out
        };
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            let a = rng.below(MULTI_KEYS as u64);
            let b = (a + 1 + rng.below(MULTI_KEYS as u64 - 1)) % MULTI_KEYS as u64;
            let (lo, hi) = (a.min(b), a.max(b));
            let owner = format!("ml.{n}:m{lo}+m{hi}");
            n += 1;
            let mut got = Vec::new();
            for k in [a, b] {
                let key = format!("m{k}");
                let args = vec![
                    s("LOCK.ACQUIRE"),
                    key.clone(),
                    owner.clone(),
                    s("PX"),
                    s("300"),
                    s("BLOCK"),
                    s("100"),
                ];
                if call(&mut c, args, &mut calls) != Out::Int(1) {
                    break;
                }
                got.push(key);
                std::thread::sleep(Duration::from_millis(3));
            }
            std::thread::sleep(Duration::from_millis(2));
            for key in got {
                call(
                    &mut c,
                    vec![s("LOCK.RELEASE"), key, owner.clone()],
                    &mut calls,
                );
            }
            std::thread::sleep(Duration::from_millis(20 + rng.below(30)));
        }
        History {
            name: "ml".into(),
            calls,
            killed_at: None,
        }
    })
}

/// `*.closed` keyspace events of every key (mono ns, key, event).
fn subscribe(
    port: u16,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(u64, String, String)>> {
    let mut c = Client::connect(port);
    c.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    std::thread::spawn(move || {
        let mut events = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Some(r) = c.try_read_reply(Duration::from_millis(50)) {
                let at = mono_ns();
                if let Reply::Array(a) | Reply::Push(a) = &r
                    && a.len() == 4
                    && a[0].as_bytes() == b"pmessage"
                {
                    let event = String::from_utf8_lossy(a[3].as_bytes()).into_owned();
                    if event.ends_with(".closed") {
                        let key = String::from_utf8_lossy(a[2].as_bytes()).into_owned();
                        events.push((at, key, event));
                    }
                }
            }
        }
        events
    })
}

// ---- the runner ----

#[derive(Clone, Debug)]
pub struct Kill {
    pub name: String,
    pub at: u64,
    /// Keys it held tied to its connection when it froze.
    pub tied_keys: Vec<String>,
    /// The first `*.closed` event on one of them, after the kill (ms).
    pub closed_ms: Option<f64>,
}

pub struct Outcome {
    pub config: Config,
    pub version: String,
    pub verdict: rwcheck::Verdict,
    pub kills: Vec<Kill>,
    pub control_tripled: usize,
    pub control_tied_late: usize,
    pub observed: Option<Observed>,
    pub longest_without_grant_ms: f64,
    pub starved: Vec<String>,
    pub problems: Vec<String>,
    pub stats: HashMap<String, u64>,
}

/// Keys a history holds tied at its end: grants made with KEEPALIVE not
/// yet released to zero.
fn tied_keys(h: &History) -> Vec<String> {
    let mut t = TiedLocks::default();
    for c in h.own() {
        t.apply(c);
    }
    t.keys()
}

/// The locks a worker holds with KEEPALIVE, call after call: (key, owner
/// and mode) -> holds.
#[derive(Default)]
struct TiedLocks {
    holds: HashMap<(String, String), i64>,
}

impl TiedLocks {
    fn single(c: &Call) -> (String, String) {
        let a = &c.args;
        let mode = if c.cmd().starts_with("RWLOCK.") {
            a[3].to_ascii_uppercase()
        } else {
            String::new()
        };
        (a[1].clone(), format!("{} {mode}", a[2]))
    }

    fn apply(&mut self, c: &Call) {
        let a = &c.args;
        let tied = c.flag("KEEPALIVE");
        match (c.cmd().as_str(), c.out()) {
            ("RWLOCK.ACQUIRE" | "LOCK.ACQUIRE", Some(Out::Int(n))) if tied => {
                self.holds.insert(Self::single(c), *n);
            }
            ("LOCK.MACQUIRE", Some(Out::Arr(items))) if tied => {
                let (keys, owner) = rwcheck::multi_args(a);
                for (k, i) in keys.into_iter().zip(items) {
                    if let famhist::Item::Int(n) = i {
                        self.holds.insert((k, format!("{owner} ")), *n);
                    }
                }
            }
            ("RWLOCK.RELEASE" | "LOCK.RELEASE", out) => {
                let left = match out {
                    Some(Out::Int(n)) => *n,
                    _ => 0,
                };
                if let Some(h) = self.holds.get_mut(&Self::single(c)) {
                    *h = left;
                }
            }
            ("LOCK.MRELEASE", out) => {
                let (keys, owner) = rwcheck::multi_args(a);
                for (i, k) in keys.into_iter().enumerate() {
                    let left = match out {
                        Some(Out::Arr(items)) => match items.get(i) {
                            Some(famhist::Item::Int(n)) => *n,
                            _ => 0,
                        },
                        _ => 0,
                    };
                    if let Some(h) = self.holds.get_mut(&(k, format!("{owner} "))) {
                        *h = left;
                    }
                }
            }
            _ => {}
        }
        self.holds.retain(|_, n| *n > 0);
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.holds.keys().map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

fn worker_args(cfg: &Config, until: u64, keepalive: bool) -> Vec<String> {
    vec![
        s("rw-worker"),
        s("--workload"),
        s(cfg.workload.name()),
        s("--resp"),
        s(if cfg.resp3 { "3" } else { "2" }),
        s("--seed"),
        cfg.seed.to_string(),
        s("--keepalive"),
        s(if keepalive { "1" } else { "0" }),
        s("--until-ns"),
        (until + 120_000 * MS).to_string(),
    ]
}

pub fn run(cfg: &Config) -> Outcome {
    let server = Server::builder(cfg.kind)
        .config("notify-keyspace-events", "Kd")
        .start();
    let version = server.version();
    let port = server.port;
    let dir = tempfile::Builder::new()
        .prefix("hashlock-r8-")
        .tempdir()
        .expect("temp dir");
    let mut problems = Vec::new();
    let stop = Arc::new(AtomicBool::new(false));
    let events = subscribe(port, stop.clone());
    let (observer, control) = if cfg.workload == Workload::Multi {
        (
            Some(observe(port, stop.clone())),
            Some(key_by_key(port, stop.clone(), cfg.seed)),
        )
    } else {
        (None, None)
    };
    let mut rng = Rng::new(cfg.seed.wrapping_mul(7927));
    let start = mono_ns();
    let until = start + cfg.duration.as_nanos() as u64;
    let spawn = |id: usize, inc: u32| {
        let args = worker_args(cfg, until, id < KEEPALIVE_WORKERS);
        Proc::spawn(port, dir.path(), id, inc, &args)
    };
    let mut procs: Vec<Proc> = (0..cfg.workers).map(|id| spawn(id, 0)).collect();
    let mut tracks: Vec<(Follower, TiedLocks)> = procs
        .iter()
        .map(|p| (Follower::new(&p.hist), TiedLocks::default()))
        .collect();
    let mut kills = Vec::new();
    let kill_ns = cfg.kill_every.as_nanos() as u64;
    let mut next_kill = start + kill_ns * 3 / 4 + rng.below(kill_ns / 2 + 1);
    while mono_ns() < until {
        let now = mono_ns();
        for (p, t) in procs.iter_mut().zip(&mut tracks) {
            if p.exited() {
                problems.push(p.failure("exited on its own"));
                p.close();
                let (id, inc) = (p.id, p.incarnation + 1);
                *p = spawn(id, inc);
                *t = (Follower::new(&p.hist), TiedLocks::default());
            }
        }
        if now >= next_kill {
            let holding: Vec<usize> = (0..KEEPALIVE_WORKERS.min(procs.len()))
                .filter(|&i| {
                    let (f, t) = &mut tracks[i];
                    for c in f.poll() {
                        t.apply(&c);
                    }
                    !t.keys().is_empty()
                })
                .collect();
            let tied_turn = kills.len() % 2 == 0;
            if tied_turn && holding.is_empty() && now < next_kill + 500 * MS {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let i = if tied_turn && !holding.is_empty() {
                holding[rng.below(holding.len() as u64) as usize]
            } else {
                rng.below(procs.len() as u64) as usize
            };
            let p = &mut procs[i];
            if p.started() {
                match p.freeze() {
                    Ok(()) => {
                        let k = p.kill_and_recover();
                        problems.extend(k.problems);
                        let h = famhist::read(&p.hist, &p.name()).unwrap_or_default();
                        kills.push(Kill {
                            name: p.name(),
                            at: k.at,
                            tied_keys: if p.id < KEEPALIVE_WORKERS {
                                tied_keys(&h)
                            } else {
                                Vec::new()
                            },
                            closed_ms: None,
                        });
                    }
                    Err(e) => {
                        problems.push(p.failure(&e));
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                    }
                }
                p.close();
                let (id, inc) = (p.id, p.incarnation + 1);
                *p = spawn(id, inc);
                tracks[i] = (Follower::new(&p.hist), TiedLocks::default());
            }
            next_kill = now + kill_ns * 3 / 4 + rng.below(kill_ns / 2 + 1);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // The end: every worker frozen, then killed.
    for p in &mut procs {
        while !p.started() && !p.exited() {
            std::thread::sleep(Duration::from_millis(5));
        }
        match p.freeze() {
            Ok(()) => {
                let k = p.kill_and_recover();
                problems.extend(k.problems);
            }
            Err(e) => problems.push(p.failure(&format!("at the end: {e}"))),
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let events = events.join().unwrap_or_default();
    let observed = observer.map(|o| o.join().unwrap_or_default());
    let mut hists = famhist::read_all(dir.path());
    if let Some(c) = control {
        match c.join() {
            Ok(h) => hists.push(h),
            Err(_) => problems.push("the key-by-key control thread panicked".into()),
        }
    }
    let verdict = rwcheck::check(&hists, &Opts::default());
    let control_tripled = rwcheck::check(
        &hists,
        &Opts {
            lease_factor: 3,
            ..Opts::default()
        },
    )
    .overlaps;
    let control_tied_late = rwcheck::check(
        &hists,
        &Opts {
            tied_grace_ns: 50 * MS,
            ..Opts::default()
        },
    )
    .overlaps;
    for k in kills.iter_mut().filter(|k| !k.tied_keys.is_empty()) {
        k.closed_ms = events
            .iter()
            .find(|(t, key, _)| {
                *t >= k.at
                    && k.tied_keys
                        .iter()
                        .any(|tk| key.ends_with(&format!(":{tk}")))
            })
            .map(|(t, _, _)| (t - k.at) as f64 / 1e6)
            .filter(|ms| *ms < 1000.0);
    }
    let workers: Vec<History> = hists.iter().filter(|h| h.name != "ml").cloned().collect();
    let (longest, starved) = rwcheck::progress(&workers, &verdict, 3_000 * MS);
    problems.extend(servers::health(&server));
    let stats = servers::lock_stats(&server);
    if verdict.violations() > 0
        || !problems.is_empty()
        || observed.as_ref().is_some_and(|o| o.partial_count > 0)
        || std::env::var_os("HASHLOCK_KEEP_HISTORIES").is_some()
    {
        let kept = dir.keep();
        problems.push(format!("histories kept in {}", kept.display()));
    }
    Outcome {
        config: cfg.clone(),
        version,
        verdict,
        kills,
        control_tripled,
        control_tied_late,
        observed,
        longest_without_grant_ms: longest as f64 / 1e6,
        starved,
        problems,
        stats,
    }
}

/// Runs every server × protocol × workload and renders the section.
pub fn section(
    kinds: &[Kind],
    protos: &[bool],
    duration: Duration,
    kill_every: Duration,
) -> Section {
    let mut s = Section::new("R8 Read-write and multi-key locks under churn");
    s.line(format!(
        "16 worker processes per run, {} s per run, one frozen and SIGKILLed every ~{:.0} s and restarted (every other kill one of \
         the 4 KEEPALIVE workers while it holds); holds 0-5 ms (KEEPALIVE workers: 5-100 ms, one in 25 for 300-1200 ms, past \
         the lease, and 0-200 ms between rounds); leases 50-400 ms (KEEPALIVE 300-900 ms). **read-write**: 2 keys, READ 70% / WRITE 30%, 60% with BLOCK \
         1-600 ms, re-entries, RENEW, downgrades (20% of writers), upgrade attempts (5% of readers), 5% of plain holders \
         walk away. **multi-key**: {MULTI_KEYS} keys, sets of 1-4 keys in random order (`LOCK.MACQUIRE`; half the single keys by \
         `LOCK.ACQUIRE`), 70% with BLOCK 1-600 ms, re-entries of the set, `LOCK.MRELEASE`; an observer samples `LOCK.INFO` \
         of all {MULTI_KEYS} keys in one MULTI/EXEC every ~0.3 ms; a control thread takes sets of 2 key by key (`LOCK.ACQUIRE`, \
         Redisson's MultiLock).",
        duration.as_secs_f64(),
        kill_every.as_secs_f64()
    ));
    s.line(String::new());
    s.line("| workload | server | proto | ops checked | grants | safe windows (time) | **overlapping windows** | **bad replies** | observer samples: **partial holds** / whole sets seen | longest without a grant (s) | kills (holding tied locks) | tied locks let go after a kill: p50 / max ms | control: overlaps with leases 3× / killed holders 50 ms late; key-by-key sets seen partial |".into());
    s.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    let mut totals = (0u64, 0usize, 0usize);
    let mut per_workload: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    let mut closed_all = Vec::new();
    for workload in [Workload::ReadWrite, Workload::Multi] {
        for &kind in kinds {
            for &resp3 in protos {
                let cfg = Config {
                    kind,
                    resp3,
                    workload,
                    seed: 8,
                    duration,
                    kill_every,
                    workers: 16,
                };
                let o = run(&cfg);
                let v = &o.verdict;
                totals.0 += v.ops;
                totals.1 += v.violations();
                totals.2 += o.kills.len();
                let closed: Vec<f64> = o.kills.iter().filter_map(|k| k.closed_ms).collect();
                closed_all.extend(&closed);
                let (c50, cmax) = median_max(&closed);
                let tied_kills = o.kills.iter().filter(|k| !k.tied_keys.is_empty()).count();
                let proto = if resp3 { 3 } else { 2 };
                let what = format!("{} {kind} RESP{proto}", workload.name());
                let (obs, ctl) = match &o.observed {
                    Some(ob) => (
                        format!(
                            "{}: **{}** / {}",
                            fmt_int(ob.samples),
                            ob.partial_count,
                            fmt_int(ob.whole_sets)
                        ),
                        format!("; {}", ob.control_partial),
                    ),
                    None => ("-".into(), String::new()),
                };
                s.line(format!(
                    "| {} | {kind} {} | RESP{proto} | {} | {} | {} ({:.1} s) | **{}** | **{}** | {obs} | {:.1} | {} ({tied_kills}) | {c50:.1} / {cmax:.1} | {} / {}{ctl} |",
                    if workload == Workload::ReadWrite { "read-write" } else { "multi-key" },
                    o.version,
                    fmt_int(v.ops),
                    fmt_int(v.grants),
                    fmt_int(v.windows),
                    v.window_ns as f64 / 1e9,
                    v.overlaps,
                    v.anomalies.len(),
                    o.longest_without_grant_ms / 1e3,
                    o.kills.len(),
                    o.control_tripled,
                    o.control_tied_late,
                ));
                for x in &v.overlap_examples {
                    s.fail(format!("{what}: {x}"));
                }
                for a in v.anomalies.iter().take(20) {
                    s.fail(format!("{what}: {a}"));
                }
                if let Some(ob) = &o.observed {
                    for p in &ob.partial {
                        s.fail(format!("{what}: partial hold: {p}"));
                    }
                    s.check(ob.control_partial > 0, || {
                        format!("{what}: control: the observer never saw the key-by-key thread holding part of its set")
                    });
                    s.check(ob.whole_sets > 0, || {
                        format!("{what}: the observer never saw a whole set held")
                    });
                }
                for x in &o.starved {
                    s.fail(format!("{what}: no progress: {x}"));
                }
                s.check(o.longest_without_grant_ms <= PROGRESS_BOUND_MS, || {
                    format!(
                        "{what}: a worker went {:.1} s without a grant (bound {:.0} s)",
                        o.longest_without_grant_ms / 1e3,
                        PROGRESS_BOUND_MS / 1e3
                    )
                });
                for k in o.kills.iter().filter(|k| !k.tied_keys.is_empty()) {
                    match k.closed_ms {
                        Some(ms) if ms <= CLOSED_BOUND_MS => {}
                        other => s.fail(format!(
                            "{what}: {} held {:?} tied; *.closed after {other:?} ms (bound {CLOSED_BOUND_MS} ms)",
                            k.name, k.tied_keys
                        )),
                    }
                }
                let t = per_workload.entry(workload.name()).or_insert((0, 0, 0));
                t.0 += tied_kills;
                t.1 += o.control_tripled;
                t.2 += o.control_tied_late;
                for p in &o.problems {
                    if p.starts_with("histories kept") {
                        s.note(format!("{what}: {p}"));
                    } else {
                        s.fail(format!("{what}: {p}"));
                    }
                }
                let stat = |k: &str| o.stats.get(k).copied().unwrap_or(0);
                s.note(format!(
                    "{what}: server counters: granted_after_wait {}, timed_out {}, keepalive_released {}, undelivered {}, stale_grants {}",
                    stat("granted_after_wait"),
                    stat("timed_out"),
                    stat("keepalive_released"),
                    stat("undelivered"),
                    stat("stale_grants"),
                ));
            }
        }
    }
    for (w, (tied_kills, tripled, late)) in per_workload {
        s.check(tied_kills > 0, || {
            format!("{w}: no worker was killed holding a tied lock")
        });
        s.check(tripled > 0, || {
            format!("{w}: control: no overlap with leases taken 3x longer: no lease lapsed under a waiter")
        });
        s.check(late > 0, || {
            format!("{w}: control: no overlap with killed holders 50 ms late: no tied lock moved on within 50 ms")
        });
    }
    let (c50, cmax) = median_max(&closed_all);
    s.line(String::new());
    s.line(format!(
        "Total: {} calls checked, {} violations, {} workers killed; killed holders' tied locks let go after p50 {c50:.1} ms, \
         max {cmax:.1} ms ({} kills; the first `rwlock.closed` / `lock.closed` keyspace event on one of its keys after the \
         SIGKILL; bound {CLOSED_BOUND_MS:.0} ms).",
        fmt_int(totals.0),
        totals.1,
        totals.2,
        closed_all.len()
    ));
    s.line(
        "\"safe windows\": as in R1, from a grant's return to the invocation of its release or its lease end counted \
         from the call's invocation (less 1 ms: the server counts whole milliseconds), or — KEEPALIVE — the holder's kill; \
         a window in write mode (or of a plain lock) may overlap no other owner's window on that key, read windows only \
         other read windows. \"bad replies\": hold counts that do not follow, a re-entry or downgrade refused, an upgrade \
         granted, NOUPGRADE without a read hold, NOTOWNER or RENEW 0 inside a window, errors, hung calls. \"partial \
         holds\": observer samples in which an owner held some keys of its set but not all. \"longest without a grant\": the \
         longest any worker went without a fresh grant, from its start to its first grant, between grants, and from its \
         last grant to its end (bound 10 s: every worker must keep making progress; BLOCK timeouts bound each wait). \
         \"control\": the same histories re-checked with leases 3× longer and with killed holders letting go 50 ms late \
         (both must find overlaps), and the observer's sightings of the key-by-key thread holding part of its set (must \
         not be 0)."
            .into(),
    );
    s
}
