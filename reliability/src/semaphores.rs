//! R7: semaphores under churn.
//!
//! One semaphore of N permits, 16 worker processes (this binary re-executed
//! as `sem-worker`) that each mix, round after round:
//! - `SEMAPHORE.ACQUIRE sem COUNT c [BLOCK ms]`, a short hold, then
//!   `SEMAPHORE.RELEASE` (all at once or one by one): anonymous permits;
//! - `SEMAPHORE.LEASE sem COUNT c PX ms KEEPALIVE [BLOCK ms]`, a hold that is
//!   sometimes longer than the lease (the server renews it), then
//!   `SEMAPHORE.RETURN`: permits tied to the connection;
//! - `SEMAPHORE.LEASE sem COUNT c PX ms [BLOCK ms]`, sometimes renewed
//!   midway, sometimes left to lapse (the server returns it at its deadline
//!   and serves the queue), else returned.
//!
//! Every ~2 s one worker is frozen and SIGKILLed (`famproc`: nothing about
//! its last call is left unknown), then restarted. Its `KEEPALIVE` permits
//! return when its connection closes: a subscriber to the key's `d`-class
//! keyspace events times `semaphore.closed` after the kill. Its anonymous
//! permits have no owner and would be lost for good (as with Redisson's
//! RSemaphore); the runner, knowing exactly how many it held, releases them
//! on its behalf, as a recovery process would.
//!
//! Judged by `semcheck` (never more than N permits certainly held at once;
//! every reply one a correct server can give), by conservation at the end
//! (frozen workers: available + leased + anonymous permits held by the
//! workers = N; after every worker is gone and every lease lapsed:
//! available = N, nothing leased, nobody waiting), and by two negative
//! controls on the same histories (leases taken 3x longer; killed workers'
//! KEEPALIVE permits taken to return 50 ms after the kill): both must find
//! oversells, or the checker would not have been exercised.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use testkit::rng::Rng;
use testkit::{Client, Kind, Reply, Server};

use crate::clock::{self, MS, mono_ns};
use crate::famhist::{self, Follower, History, Out, Writer};
use crate::famproc::{Conn, Proc};
use crate::report::{Section, fmt_int, median_max};
use crate::semcheck::{self, Opts, TiedPermits};
use crate::servers;

pub const KEY: &str = "sem";
pub const PERMITS: u64 = 10;
/// Killed workers' KEEPALIVE permits must be back within this (issue 20).
pub const RETURN_BOUND_MS: f64 = 50.0;

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub resp3: bool,
    pub seed: u64,
    pub duration: Duration,
    pub kill_every: Duration,
    pub workers: usize,
    pub permits: u64,
    /// Past `duration`, the run goes on until the workers made this many
    /// calls (long runs), or for `duration` more at most.
    pub min_ops: u64,
}

// ---- the worker process ----

pub struct WorkerArgs {
    pub port: u16,
    pub resp3: bool,
    pub seed: u64,
    pub id: usize,
    pub incarnation: u32,
    pub until_ns: u64,
    pub out: std::path::PathBuf,
}

/// How long a worker waits for a reply beyond its BLOCK time.
const PATIENCE_MS: u64 = 10_000;

struct Worker {
    conn: Conn,
    rng: Rng,
}

impl Worker {
    fn call(&mut self, args: &[String], block: Option<i64>) -> (u64, u64, Out) {
        let patience = PATIENCE_MS + block.unwrap_or(0).max(0) as u64;
        self.conn.call(args, Duration::from_millis(patience))
    }

    fn hold(&mut self, long_ms: (i64, i64), long_chance: u64) {
        let ms = if self.rng.chance(long_chance) {
            self.rng.range(long_ms.0, long_ms.1)
        } else {
            self.rng.range(0, 4)
        };
        self.conn.sleep_ms(ms as u64);
    }

    fn round(&mut self) {
        let rng = &mut self.rng;
        let count = match rng.below(10) {
            0..=5 => 1,
            6..=8 => 2,
            _ => 3,
        };
        let block = rng.chance(70).then(|| rng.range(1, 800));
        let s = |x: &str| x.to_string();
        let with_block = |mut a: Vec<String>| {
            if let Some(b) = block {
                a.extend([s("BLOCK"), b.to_string()]);
            }
            a
        };
        match rng.below(100) {
            // Anonymous permits.
            0..=39 => {
                let args = with_block(vec![
                    s("SEMAPHORE.ACQUIRE"),
                    s(KEY),
                    s("COUNT"),
                    count.to_string(),
                ]);
                let (_, _, out) = self.call(&args, block);
                if out != Out::Int(count) {
                    return;
                }
                self.hold((10, 50), 3);
                if count > 1 && self.rng.chance(20) {
                    for _ in 0..count {
                        self.call(&[s("SEMAPHORE.RELEASE"), s(KEY)], None);
                    }
                } else {
                    let args = [
                        s("SEMAPHORE.RELEASE"),
                        s(KEY),
                        s("COUNT"),
                        count.to_string(),
                    ];
                    self.call(&args, None);
                }
            }
            // Leased with KEEPALIVE: tied to this connection.
            40..=74 => {
                // Leases a server stall cannot outlast: a tied lease is
                // renewed every third of it, so one of 100 ms lapsed when
                // the server (on a loaded 2-core CI machine) stalled for
                // 70 ms: the KEEPALIVE floor the README's Deployment
                // section states, not what this run is about (as R8).
                let lease = rng.range(300, 900);
                let args = with_block(vec![
                    s("SEMAPHORE.LEASE"),
                    s(KEY),
                    s("COUNT"),
                    count.to_string(),
                    s("PX"),
                    lease.to_string(),
                    s("KEEPALIVE"),
                ]);
                let (_, _, out) = self.call(&args, block);
                let Some(ids) = ids_of(&out) else { return };
                // One hold in 50 outlives its lease (the server renews).
                self.hold((950, 1500), 2);
                self.give_back(ids);
            }
            // Leased with a plain lease.
            _ => {
                let lease = rng.range(20, 200);
                let args = with_block(vec![
                    s("SEMAPHORE.LEASE"),
                    s(KEY),
                    s("COUNT"),
                    count.to_string(),
                    s("PX"),
                    lease.to_string(),
                ]);
                let (_, _, out) = self.call(&args, block);
                let Some(ids) = ids_of(&out) else { return };
                // The server's deadlines (a grant that waited runs its
                // lease from the grant): the checker counts from them.
                // (Members are the ids' 16 raw bytes; the history keeps
                // them as hex.)
                let mut args = vec![s("ZMSCORE"), format!("{{{KEY}}}:timeout")];
                args.extend(ids.iter().cloned());
                let sent: Vec<Vec<u8>> = args[..2]
                    .iter()
                    .map(|a| a.as_bytes().to_vec())
                    .chain(
                        ids.iter()
                            .map(|id| crate::history::unhex(id).unwrap_or_default()),
                    )
                    .collect();
                self.conn
                    .call_as(&args, &sent, Duration::from_millis(PATIENCE_MS));
                if self.rng.chance(10) {
                    self.hold((0, 1), 0);
                    let lease = self.rng.range(20, 200);
                    let args = [
                        s("SEMAPHORE.RENEW"),
                        s(KEY),
                        ids[0].clone(),
                        s("PX"),
                        lease.to_string(),
                    ];
                    self.call(&args, None);
                }
                self.hold((20, 300), 3);
                if self.rng.chance(5) {
                    // Walk away: the server returns them at the deadline.
                    return;
                }
                self.give_back(ids);
            }
        }
        let idle = self.rng.below(3);
        self.conn.sleep_ms(idle);
    }

    /// RETURN every id (at once, or one by one); after NOTOWNER (one of
    /// them lapsed), one by one.
    fn give_back(&mut self, ids: Vec<String>) {
        let s = |x: &str| x.to_string();
        if ids.len() == 1 || self.rng.chance(80) {
            let mut args = vec![s("SEMAPHORE.RETURN"), s(KEY)];
            args.extend(ids.iter().cloned());
            let (_, _, out) = self.call(&args, None);
            if !matches!(out, Out::Err(_)) || ids.len() == 1 {
                return;
            }
        }
        for id in ids {
            self.call(&[s("SEMAPHORE.RETURN"), s(KEY), id], None);
        }
    }
}

/// The ids of a LEASE grant.
fn ids_of(out: &Out) -> Option<Vec<String>> {
    match out {
        Out::Arr(items) => items
            .iter()
            .map(|i| match i {
                famhist::Item::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

pub fn worker(a: WorkerArgs) {
    let conn = Conn::inherited(a.port, a.resp3, &a.out);
    let mut w = Worker {
        conn,
        rng: Rng::new(a.seed ^ ((a.id as u64) << 32) ^ (u64::from(a.incarnation) << 48)),
    };
    while mono_ns() < a.until_ns {
        w.round();
    }
}

// ---- the runner ----

/// A kill, as the runner saw it.
#[derive(Clone, Debug)]
pub struct Kill {
    pub name: String,
    pub at: u64,
    /// KEEPALIVE permits it held (with a grant read after the kill).
    pub tied: u64,
    /// Anonymous permits it held, released by the runner.
    pub anonymous: u64,
    /// Someone was queued on the semaphore when it froze.
    pub waiters: bool,
    /// The reply to its call in flight, read after the kill (None: no call
    /// was in flight, or it was never answered).
    pub recovered: Option<Out>,
    /// A call was in flight when it froze.
    pub in_flight: bool,
    /// `semaphore.closed` arrived this long after the kill.
    pub returned_ms: Option<f64>,
    /// A queued worker's grant returned this long after the kill.
    pub waiter_granted_ms: Option<f64>,
}

pub struct Outcome {
    pub config: Config,
    pub version: String,
    pub verdict: semcheck::Verdict,
    pub kills: Vec<Kill>,
    /// At the end, all workers frozen: (available, leased, anonymous held
    /// by the workers).
    pub snapshot: Option<(i64, u64, u64)>,
    /// After every worker was gone and every lease lapsed: (available,
    /// leased, waiters, keepalive).
    pub final_info: (i64, i64, i64, i64),
    pub control_tripled: usize,
    pub control_tied_late: usize,
    pub problems: Vec<String>,
    pub stats: HashMap<String, u64>,
}

fn worker_args(cfg: &Config, until: u64) -> Vec<String> {
    vec![
        "sem-worker".into(),
        "--resp".into(),
        if cfg.resp3 { "3" } else { "2" }.into(),
        "--seed".into(),
        cfg.seed.to_string(),
        "--until-ns".into(),
        // The runner freezes and kills them at the end.
        (until + cfg.duration.as_nanos() as u64 + 120_000 * MS).to_string(),
    ]
}

/// SEMAPHORE.INFO as (available, leased, waiters, keepalive).
fn sem_info(c: &mut Client) -> (i64, i64, i64, i64) {
    let r = c.cmd(&["SEMAPHORE.INFO", KEY]);
    let f = |name: &str| match r.map_get(name) {
        Some(Reply::Int(n)) => *n,
        _ => -1,
    };
    if r.is_nil() {
        return (0, 0, 0, 0);
    }
    (f("available"), f("leased"), f("waiters"), f("keepalive"))
}

/// Collects `semaphore.*` keyspace events of the key (mono ns, event).
fn subscribe(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u64, String)>> {
    let mut c = Client::connect(port);
    let channel = format!("__keyspace@0__:{KEY}");
    c.cmd(&["SUBSCRIBE", &channel]);
    std::thread::spawn(move || {
        let mut events = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Some(r) = c.try_read_reply(Duration::from_millis(50)) {
                let at = mono_ns();
                if let Reply::Array(a) | Reply::Push(a) = &r
                    && a.len() == 3
                    && a[0].as_bytes() == b"message"
                {
                    events.push((at, String::from_utf8_lossy(a[2].as_bytes()).into_owned()));
                }
            }
        }
        events
    })
}

/// Releases, on a killed worker's behalf, the anonymous permits it held;
/// recorded in its history (after its `K`). Returns how many.
fn release_for(admin: &mut Client, p: &Proc) -> u64 {
    let h = famhist::read(&p.hist, &p.name()).unwrap_or_default();
    let held = semcheck::anonymous_held(&h, true);
    if held > 0 {
        let next = h.calls.last().map_or(0, |c| c.seq + 1);
        let mut w = Writer::append(&p.hist, next).expect("append history");
        let args = vec![
            "SEMAPHORE.RELEASE".to_string(),
            KEY.to_string(),
            "COUNT".to_string(),
            held.to_string(),
        ];
        let seq = w.invoke(&args, mono_ns());
        let r = admin.cmd(&args);
        w.returned(seq, mono_ns(), &Out::from_reply(&r));
    }
    held
}

pub fn run(cfg: &Config) -> Outcome {
    let server = Server::builder(cfg.kind)
        .config("notify-keyspace-events", "Kd")
        .start();
    let version = server.version();
    let port = server.port;
    let dir = tempfile::Builder::new()
        .prefix("hashlock-r7-")
        .tempdir()
        .expect("temp dir");
    let mut admin = server.client();
    let mut problems = Vec::new();
    let created = admin.cmd(&["SEMAPHORE.CREATE", KEY, &cfg.permits.to_string()]);
    if created != Reply::Int(1) {
        problems.push(format!("SEMAPHORE.CREATE answered {created:?}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let events = subscribe(port, stop.clone());
    let mut rng = Rng::new(cfg.seed.wrapping_mul(7907));
    let start = mono_ns();
    let until = start + cfg.duration.as_nanos() as u64;
    let args = worker_args(cfg, until);
    let mut procs: Vec<Proc> = (0..cfg.workers)
        .map(|id| Proc::spawn(port, dir.path(), id, 0, &args))
        .collect();
    // What each live worker holds tied, followed as it writes its history.
    let mut tracks: Vec<(Follower, TiedPermits)> = procs
        .iter()
        .map(|p| (Follower::new(&p.hist), TiedPermits::default()))
        .collect();
    let mut calls_of_the_dead = 0;
    let mut kills: Vec<Kill> = Vec::new();
    let kill_ns = cfg.kill_every.as_nanos() as u64;
    let mut next_kill = start + kill_ns * 3 / 4 + rng.below(kill_ns / 2 + 1);
    let hard_until = until + cfg.duration.as_nanos() as u64;
    let mut next_count = until;
    loop {
        let now = mono_ns();
        if now >= until && now >= next_count {
            let live: u64 = tracks.iter().map(|(f, _)| f.invoked).sum();
            if now >= hard_until || calls_of_the_dead + live >= cfg.min_ops {
                break;
            }
            next_count = now + 5_000 * MS;
        }
        for (p, t) in procs.iter_mut().zip(&mut tracks) {
            if p.exited() {
                problems.push(p.failure("exited on its own"));
                p.close();
                let (id, inc) = (p.id, p.incarnation + 1);
                *p = Proc::spawn(port, dir.path(), id, inc, &args);
                calls_of_the_dead += t.0.invoked;
                *t = (Follower::new(&p.hist), TiedPermits::default());
            }
        }
        if now >= next_kill {
            // Every other kill hits a worker holding KEEPALIVE permits.
            let tied_holders: Vec<usize> = tracks
                .iter_mut()
                .enumerate()
                .filter_map(|(i, (f, t))| {
                    for c in f.poll() {
                        t.apply(&c);
                    }
                    (t.held() > 0).then_some(i)
                })
                .collect();
            let tied_turn = kills.len().is_multiple_of(2);
            if tied_turn && tied_holders.is_empty() && now < next_kill + 500 * MS {
                // Wait a little for a worker holding KEEPALIVE permits.
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let i = if tied_turn && !tied_holders.is_empty() {
                tied_holders[rng.below(tied_holders.len() as u64) as usize]
            } else {
                rng.below(procs.len() as u64) as usize
            };
            let p = &mut procs[i];
            if p.started() {
                match p.freeze() {
                    Ok(()) => {
                        let me = famhist::read(&p.hist, &p.name())
                            .ok()
                            .and_then(|h| h.client_id());
                        let queue = admin.cmd(&["LOCK.WAITERS", KEY]);
                        let waiters = queue
                            .as_array()
                            .iter()
                            .any(|w| Some(w.as_array()[0].as_int()) != me);
                        let k = p.kill_and_recover();
                        problems.extend(k.problems);
                        let h = famhist::read(&p.hist, &p.name()).unwrap_or_default();
                        let tied = semcheck::tied_held(&h);
                        let anonymous = release_for(&mut admin, p);
                        kills.push(Kill {
                            name: p.name(),
                            recovered: k.recovered.clone(),
                            in_flight: h
                                .own()
                                .last()
                                .is_some_and(|c| c.ret.is_none() || c.recovered),
                            at: k.at,
                            tied,
                            anonymous,
                            waiters,
                            returned_ms: None,
                            waiter_granted_ms: None,
                        });
                    }
                    Err(e) => {
                        problems.push(p.failure(&e));
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                    }
                }
                let (id, inc) = (p.id, p.incarnation + 1);
                p.close();
                *p = Proc::spawn(port, dir.path(), id, inc, &args);
                tracks[i].0.poll();
                calls_of_the_dead += tracks[i].0.invoked;
                tracks[i] = (Follower::new(&p.hist), TiedPermits::default());
            }
            next_kill = now + kill_ns * 3 / 4 + rng.below(kill_ns / 2 + 1);
        }
        std::thread::sleep(Duration::from_millis(5));
    }

    // The end: every worker frozen, the books balanced, then all killed.
    for p in &mut procs {
        while !p.started() && !p.exited() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Err(e) = p.freeze() {
            problems.push(p.failure(&format!("at the end: {e}")));
        }
    }
    let snap = snapshot(&mut admin, &procs);
    let mut queued_at_snapshot = Vec::new();
    for p in &mut procs {
        let h = famhist::read(&p.hist, &p.name()).unwrap_or_default();
        let id = h.client_id();
        queued_at_snapshot.push(
            snap.as_ref()
                .is_some_and(|s| id.is_some_and(|id| s.queued.contains(&id))),
        );
        let k = p.kill_and_recover();
        problems.extend(k.problems);
    }
    let mut held_by_workers = 0;
    for (p, queued) in procs.iter().zip(&queued_at_snapshot) {
        let h = famhist::read(&p.hist, &p.name()).unwrap_or_default();
        held_by_workers += semcheck::anonymous_held(&h, !queued);
        release_for(&mut admin, p);
    }
    let snapshot = snap.map(|s| (s.available, s.leased, held_by_workers));
    // Plain leases of killed workers lapse within 400 ms.
    let mut final_info = sem_info(&mut admin);
    let t = mono_ns();
    while (final_info.1 != 0 || final_info.0 != cfg.permits as i64) && mono_ns() < t + 3_000 * MS {
        std::thread::sleep(Duration::from_millis(20));
        final_info = sem_info(&mut admin);
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let events = events.join().unwrap_or_default();

    let hists = famhist::read_all(dir.path());
    let opts = Opts {
        realtime_offset_ns: clock::realtime_offset_ns(),
        ..Opts::new(cfg.permits)
    };
    let verdict = semcheck::check(&hists, &opts);
    let control_tripled = semcheck::check(
        &hists,
        &Opts {
            lease_factor: 3,
            ..opts.clone()
        },
    )
    .overs;
    let control_tied_late = semcheck::check(
        &hists,
        &Opts {
            tied_grace_ns: 50 * MS,
            ..opts.clone()
        },
    )
    .overs;
    time_returns(&mut kills, &events, &hists);
    problems.extend(servers::health(&server));
    let stats = servers::lock_stats(&server);
    if verdict.violations() > 0
        || !problems.is_empty()
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
        snapshot,
        final_info,
        control_tripled,
        control_tied_late,
        problems,
        stats,
    }
}

struct Snapshot {
    available: i64,
    leased: u64,
    /// Client ids queued on the semaphore.
    queued: Vec<i64>,
}

/// With every worker frozen: the semaphore, its leases and its queue in
/// one transaction, once no worker has an unread command in the server's
/// query buffer.
fn snapshot(admin: &mut Client, procs: &[Proc]) -> Option<Snapshot> {
    let ids: Vec<i64> = procs
        .iter()
        .filter_map(|p| famhist::read(&p.hist, &p.name()).ok()?.client_id())
        .collect();
    let timeout = format!("{{{KEY}}}:timeout");
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(20));
        admin.cmd(&["MULTI"]);
        admin.cmd(&["GET", KEY]);
        admin.cmd(&["ZCARD", &timeout]);
        admin.cmd(&["LOCK.WAITERS", KEY]);
        admin.cmd(&["CLIENT", "LIST"]);
        let r = admin.cmd(&["EXEC"]);
        let a = r.as_array();
        let available = std::str::from_utf8(a[0].as_bytes()).ok()?.parse().ok()?;
        let leased = a[1].as_int() as u64;
        let queued: Vec<i64> = a[2]
            .as_array()
            .iter()
            .map(|w| w.as_array()[0].as_int())
            .collect();
        let list = String::from_utf8_lossy(a[3].as_bytes()).into_owned();
        let pending = list.lines().any(|l| {
            let field = |name: &str| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .and_then(|v| v.parse::<i64>().ok())
            };
            field("id=").is_some_and(|id| ids.contains(&id))
                && field("qbuf=").is_some_and(|q| q > 0)
        });
        if !pending {
            return Some(Snapshot {
                available,
                leased,
                queued,
            });
        }
    }
    None
}

/// For each kill: when `semaphore.closed` came (only kills of workers with
/// KEEPALIVE permits close with one), and when a worker that was queued
/// at the kill got its grant.
fn time_returns(kills: &mut [Kill], events: &[(u64, String)], hists: &[History]) {
    for k in kills.iter_mut() {
        if k.tied > 0 {
            k.returned_ms = events
                .iter()
                .find(|(t, e)| *t >= k.at && e == "semaphore.closed")
                .map(|(t, _)| (t - k.at) as f64 / 1e6)
                .filter(|ms| *ms < 1000.0);
            if k.waiters {
                k.waiter_granted_ms = hists
                    .iter()
                    .flat_map(|h| h.own())
                    .filter(|c| {
                        c.invoke < k.at
                            && !c.recovered
                            && matches!(c.cmd().as_str(), "SEMAPHORE.ACQUIRE" | "SEMAPHORE.LEASE")
                            && matches!(c.out(), Some(Out::Int(_) | Out::Arr(_)))
                    })
                    .filter_map(|c| c.ret.as_ref().map(|(t, _)| *t))
                    .filter(|t| *t >= k.at)
                    .min()
                    .map(|t| (t - k.at) as f64 / 1e6)
                    .filter(|ms| *ms < 1000.0);
            }
        }
    }
}

/// Runs each server × protocol and renders the section.
pub fn section(
    kinds: &[Kind],
    protos: &[bool],
    duration: Duration,
    min_ops: u64,
    promotions: usize,
    churn: Duration,
    replicas_only: bool,
) -> Section {
    let mut s = Section::new("R7 Semaphores under churn");
    let permits = PERMITS;
    s.line(format!(
        "One semaphore of {permits} permits; 16 worker processes, {} s per run{}, each round (COUNT 1 60%, 2 30%, 3 10%; \
         70% of the grants asked with BLOCK 1-800 ms) one of: ACQUIRE (40%), a hold of 0-4 ms (3%: 10-50 ms), RELEASE at \
         once or one permit at a time; LEASE PX 300-900 KEEPALIVE (35%), a hold of 0-4 ms (2%: 950-1500 ms, past the lease: \
         the server renews), RETURN; LEASE PX 20-200 (25%), the server's deadlines read back (ZMSCORE), 10% RENEW midway, a \
         hold of 0-4 ms (3%: 20-300 ms, past the lease: RETURN answers NOTOWNER), 5% left to lapse (the server returns \
         them at the deadline and serves the queue), else RETURN; 0-2 ms between rounds. Every ~2 s one worker is \
         frozen and SIGKILLed (every other kill one holding KEEPALIVE permits), then restarted; the runner reads the \
         server's last answer on its connection and releases the anonymous permits it held, as a recovery process would.",
        duration.as_secs_f64(),
        if min_ops > 0 {
            format!(", then on until the workers made {} calls", fmt_int(min_ops))
        } else {
            String::new()
        }
    ));
    s.line(String::new());
    s.line("| server | proto | ops checked | grants (ACQUIRE / LEASE) | permits granted | most held at once | **more than N held** | **bad replies** | kills (holding KEEPALIVE permits) | anonymous permits released for killed workers | KEEPALIVE permits back after a kill: p50 / max ms | queued waiter served after such a kill: p50 / max ms | at the end, frozen: available + leased + held by workers | after: available / leased / waiters | control: oversells with leases taken 3× / with killed workers' permits back 50 ms late |".into());
    s.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    let mut total_ops = 0;
    let mut total_viol = 0;
    let mut returned: Vec<f64> = Vec::new();
    let mut granted: Vec<f64> = Vec::new();
    let mut total_kills = 0;
    let mut controls = (0, 0);
    for &kind in kinds {
        for &resp3 in protos {
            let cfg = Config {
                kind,
                resp3,
                seed: 7,
                duration,
                kill_every: Duration::from_secs(2),
                workers: 16,
                permits,
                min_ops,
            };
            let o = run(&cfg);
            let v = &o.verdict;
            total_ops += v.ops;
            total_viol += v.violations();
            total_kills += o.kills.len();
            controls.0 += o.control_tripled;
            controls.1 += o.control_tied_late;
            let r: Vec<f64> = o.kills.iter().filter_map(|k| k.returned_ms).collect();
            let g: Vec<f64> = o.kills.iter().filter_map(|k| k.waiter_granted_ms).collect();
            let (r50, rmax) = median_max(&r);
            let (g50, gmax) = median_max(&g);
            returned.extend(&r);
            granted.extend(&g);
            let tied_kills = o.kills.iter().filter(|k| k.tied > 0).count();
            let proto = if resp3 { 3 } else { 2 };
            let snap = match o.snapshot {
                Some((a, l, h)) => format!("{a} + {l} + {h} = {}", a + l as i64 + h as i64),
                None => "no snapshot".into(),
            };
            s.line(format!(
                "| {kind} {} | RESP{proto} | {} | {} / {} | {} | {} | **{}** | **{}** | {} ({tied_kills}) | {} | {r50:.1} / {rmax:.1} | {g50:.1} / {gmax:.1} | {snap} | {} / {} / {} | {} / {} |",
                o.version,
                fmt_int(v.ops),
                fmt_int(v.acquires),
                fmt_int(v.leases),
                fmt_int(v.permits_granted),
                v.max_held,
                v.overs,
                v.anomalies.len(),
                o.kills.len(),
                o.kills.iter().map(|k| k.anonymous).sum::<u64>(),
                o.final_info.0,
                o.final_info.1,
                o.final_info.2,
                o.control_tripled,
                o.control_tied_late,
            ));
            let what = format!("{kind} RESP{proto}");
            for x in &v.over_examples {
                s.fail(format!(
                    "{what}: {} permits held at {} (N = {permits}): {}",
                    x.held,
                    x.at,
                    x.holders.join("; ")
                ));
            }
            for a in v.anomalies.iter().take(20) {
                s.fail(format!("{what}: {a}"));
            }
            match o.snapshot {
                Some((a, l, h)) => s.check(a + l as i64 + h as i64 == permits as i64, || {
                    format!("{what}: at the end {a} available + {l} leased + {h} held by workers != {permits}")
                }),
                None => s.fail(format!("{what}: no consistent snapshot at the end")),
            }
            s.check(
                o.final_info == (permits as i64, 0, 0, 0),
                || format!("{what}: after the run SEMAPHORE.INFO showed (available, leased, waiters, keepalive) = {:?}", o.final_info),
            );
            for k in o.kills.iter().filter(|k| k.tied > 0) {
                match k.returned_ms {
                    Some(ms) if ms <= RETURN_BOUND_MS => {}
                    other => s.fail(format!(
                        "{what}: {} held {} KEEPALIVE permits; semaphore.closed after {other:?} ms (bound {RETURN_BOUND_MS} ms)",
                        k.name, k.tied
                    )),
                }
            }
            s.check(v.max_held == permits, || {
                format!("{what}: at most {} permits were held at once: the semaphore was never saturated", v.max_held)
            });
            for p in &o.problems {
                if p.starts_with("histories kept") {
                    s.note(format!("{what}: {p}"));
                } else {
                    s.fail(format!("{what}: {p}"));
                }
            }
            let in_flight = o.kills.iter().filter(|k| k.in_flight).count();
            let answered: Vec<String> = o
                .kills
                .iter()
                .filter_map(|k| k.recovered.as_ref())
                .map(|r| format!("{r:?}"))
                .collect();
            s.note(format!(
                "{what}: {in_flight} of {} kills caught a call in flight; {} of those were answered only after the freeze (read from the socket): {}",
                o.kills.len(),
                answered.len(),
                answered.join(", ")
            ));
            let stat = |k: &str| o.stats.get(k).copied().unwrap_or(0);
            s.note(format!(
                "{what}: server counters: semaphore_keepalive_returned {}, semaphore_expired {}, semaphore_taken_back {}, undelivered {}, granted_after_wait {}, timed_out {}",
                stat("semaphore_keepalive_returned"),
                stat("semaphore_expired"),
                stat("semaphore_taken_back"),
                stat("undelivered"),
                stat("granted_after_wait"),
                stat("timed_out"),
            ));
        }
    }
    s.check(!returned.is_empty(), || {
        "no worker was killed holding KEEPALIVE permits".into()
    });
    s.check(controls.0 > 0, || {
        "control: no oversell found with leases taken 3x longer: the checker was not exercised"
            .into()
    });
    s.check(controls.1 > 0, || "control: no oversell found with killed workers' permits back 50 ms late: no tied permit moved on within 50 ms".into());
    returned.sort_by(f64::total_cmp);
    let (r50, rmax) = median_max(&returned);
    let (g50, gmax) = median_max(&granted);
    s.line(String::new());
    s.line(format!(
        "Total: {} semaphore calls checked, {total_violations} violations; {total_kills} workers killed, {} of them holding KEEPALIVE \
         permits: back after p50 {r50:.1} ms, max {rmax:.1} ms (bound {RETURN_BOUND_MS:.0} ms; the `semaphore.closed` keyspace event \
         after the SIGKILL, on the machine's monotonic clock that the server shares); a worker queued at such a kill was \
         granted p50 {g50:.1} ms, max {gmax:.1} ms after it ({} kills).",
        fmt_int(total_ops),
        returned.len(),
        granted.len(),
        total_violations = total_viol,
    ));
    s.line(
        "\"more than N held\": maximal periods during which the permits the workers certainly held (from a grant's return \
         to the invocation of its RELEASE/RETURN, the end of its lease counted from the call's invocation, or — \
         KEEPALIVE — the worker's kill) add up to more than N. \"bad replies\": replies a correct server cannot give (a grant \
         of another count, malformed or repeated ids, NOTOWNER or RENEW 0 inside a lease, errors, hung calls). \"control\": \
         the same histories re-checked as if every lease had been 3× longer (real hand-overs of lapsed leases appear as \
         oversells) and as if killed workers' KEEPALIVE permits had come back only 50 ms after the kill (oversells there \
         are permits regranted within 50 ms of a kill): both must be non-zero."
            .into(),
    );
    if promotions > 0 {
        crate::sempromo::lines(&mut s, kinds, promotions, churn, replicas_only);
    }
    s
}
