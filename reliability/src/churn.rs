//! R1: mutual exclusion under churn.
//!
//! 16 worker *processes* (this binary re-executed as `worker`) hammer a few
//! locks with a random mix of acquire (with and without BLOCK, sometimes
//! the generated owner `*`), re-entry, renew and release, holding 0–20 ms
//! with leases of 50–500 ms and doing a slow read-modify-write of a counter
//! inside each hold. Every few seconds one worker is SIGKILLed (possibly
//! while holding, waiting or mid-write) and restarted under a new owner.
//! Each worker records its history (see `history`); the checker then proves
//! no two owners' safe windows overlapped and the counters add up.
//!
//! Some workers take their locks with KEEPALIVE (tied to their connection),
//! often holding them longer than the lease (the server renews), and every
//! other kill hits one of them, preferably while it holds a tied lock. Their
//! safe window lasts until their release or their death, whatever the
//! lease; after each such kill the runner watches (LOCK.INFO) the killed
//! holder's tied locks move on, and the checker requires it within a bound
//! far below their leases.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use testkit::{Client, Kind, Reply, Server};

use crate::checker::{self, Process, Verdict};
use crate::clock::{MS, mono_ns};
use crate::history::{self, Op, Outcome};
use crate::report::{Section, fmt_int};
use crate::round;
use crate::servers;
use crate::workers::{self, Slot};
use testkit::rng::Rng;

/// A killed holder's tied lock must move on within this (KEEPALIVE
/// workers' leases are 900-1800 ms and renewed every third: a lock left to
/// its lease would take at least 600 ms).
pub const MOVED_ON_BOUND_MS: f64 = 400.0;

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub resp3: bool,
    pub seed: u64,
    pub duration: Duration,
    pub kill_every: Duration,
    pub workers: usize,
    /// Of which this many (the first ids) use KEEPALIVE.
    pub keepalive_workers: usize,
    pub keys: usize,
}

/// What one run found.
pub struct Outcomes {
    pub config: Config,
    pub version: String,
    pub verdict: Verdict,
    pub kills: u64,
    pub counters: u64,
    /// Worker processes that died on their own (a panic: I/O error,
    /// protocol error, closed connection), with their stderr.
    pub worker_failures: Vec<String>,
    pub server_problems: Vec<String>,
    pub lock_stats: HashMap<String, u64>,
    /// Negative control: overlaps the checker finds in the same histories
    /// when every lease is taken as 3× longer than granted (a client that
    /// trusts its lease past the server's deadline). Shows the checker has
    /// teeth on real data: expired leases were really taken over.
    pub control_overlaps: usize,
    /// Negative control for the tied locks: overlaps found when every killed
    /// process is taken to have died 50 ms after it did (a server that
    /// released tied locks only then). Non-zero: the next holder really got
    /// a killed holder's tied lock within 50 ms of the kill.
    pub control_tied_overlaps: usize,
    /// KEEPALIVE workers killed, and their tied locks watched moving on.
    pub keepalive_kills: u64,
    pub handovers: Vec<checker::Handover>,
}

// ---- the worker process ----

pub struct WorkerArgs {
    pub port: u16,
    pub resp3: bool,
    pub keepalive: bool,
    pub seed: u64,
    pub id: usize,
    pub incarnation: u32,
    pub until_ns: u64,
    pub keys: usize,
    pub out: PathBuf,
}

struct Worker {
    keepalive: bool,
    c: Client,
    h: history::Writer,
    rng: Rng,
    me: Vec<u8>,
    keys: usize,
    until: u64,
}

pub fn worker(a: WorkerArgs) {
    let mut c = if a.resp3 {
        Client::connect_resp3(a.port)
    } else {
        Client::connect(a.port)
    };
    // BLOCK 0 may wait for several leases in a busy queue.
    c.set_timeout(Some(Duration::from_secs(60)));
    let mut w = Worker {
        keepalive: a.keepalive,
        c,
        h: history::Writer::create(&a.out).expect("history file"),
        rng: Rng::new(a.seed ^ ((a.id as u64) << 32) ^ (u64::from(a.incarnation) << 48)),
        me: format!("w{}.{}", a.id, a.incarnation).into_bytes(),
        keys: a.keys,
        until: a.until_ns,
    };
    while mono_ns() < w.until {
        if w.keepalive {
            w.round_keepalive();
        } else {
            w.round();
        }
    }
}

/// How long a worker's `WAIT 1 <ms>` waits for a replica (cluster runs).
pub const WAIT_ACK_MS: u64 = 500;

/// The command for an operation.
pub fn op_args(op: &Op) -> Vec<Vec<u8>> {
    let s = |x: &str| x.as_bytes().to_vec();
    match op {
        Op::Acquire {
            key,
            owner,
            lease_ms,
            block_ms,
            keepalive,
        } => {
            let mut a = vec![s("LOCK.ACQUIRE"), s(key), owner.clone()];
            a.extend([s("PX"), s(&lease_ms.to_string())]);
            if *keepalive {
                a.push(s("KEEPALIVE"));
            }
            if let Some(b) = block_ms {
                a.extend([s("BLOCK"), s(&b.to_string())]);
            }
            a
        }
        Op::Release { key, owner } => vec![s("LOCK.RELEASE"), s(key), owner.clone()],
        Op::Renew {
            key,
            owner,
            lease_ms,
            keepalive,
        } => {
            let mut a = vec![
                s("LOCK.RENEW"),
                s(key),
                owner.clone(),
                s("PX"),
                s(&lease_ms.to_string()),
            ];
            if *keepalive {
                a.push(s("KEEPALIVE"));
            }
            a
        }
        Op::Get { key } => vec![s("GET"), s(&format!("ctr:{key}"))],
        Op::Set { key, value } => vec![s("SET"), s(&format!("ctr:{key}")), s(&value.to_string())],
        Op::Wait { .. } => vec![s("WAIT"), s("1"), s(&WAIT_ACK_MS.to_string())],
    }
}

/// A reply as the history records it.
pub fn outcome(r: Reply) -> Outcome {
    match r {
        Reply::Int(n) => Outcome::Int(n),
        Reply::Nil | Reply::Null | Reply::NilArray => Outcome::Nil,
        Reply::Status(s) if s == "OK" => Outcome::Ok,
        Reply::Bulk(b) => Outcome::Bulk(b),
        Reply::Error(e) => Outcome::Err(e),
        other => Outcome::Err(format!("(unexpected reply type) {other:?}")),
    }
}

/// One server: every call has a reply, and nothing needs confirming.
impl round::Driver for Worker {
    type Abandon = std::convert::Infallible;

    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn call(&mut self, op: Op) -> Result<(u64, Outcome), Self::Abandon> {
        let args = op_args(&op);
        let t0 = mono_ns();
        let seq = self.h.invoke(&op, t0);
        let reply = self.c.cmd(&args);
        let t1 = mono_ns();
        let out = outcome(reply);
        self.h.returned(seq, t1, &out);
        Ok((t0, out))
    }

    fn confirm(&mut self, _key: &str) -> Result<(), Self::Abandon> {
        Ok(())
    }
}

impl Worker {
    /// One call, recorded: (invoke ns, outcome).
    fn call(&mut self, op: Op) -> (u64, Outcome) {
        let Ok(done) = round::Driver::call(self, op);
        done
    }

    fn round(&mut self) {
        let rng = &mut self.rng;
        let key = format!("lk{}", rng.below(self.keys as u64));
        let owner = if rng.chance(5) {
            b"*".to_vec()
        } else {
            self.me.clone()
        };
        let left_ms = self.until.saturating_sub(mono_ns()) / MS;
        let block = if rng.chance(50) {
            Some(if rng.chance(3) && left_ms > 3000 {
                0
            } else {
                rng.range(1, 600)
            })
        } else {
            None
        };
        let Ok(()) = round::plain(self, key, owner, block);
    }
}

impl Worker {
    /// A KEEPALIVE worker's round: the lock tied to this connection, held
    /// for up to 400 ms, one time in five up to 2 s (past a third of its
    /// lease, often past all of it: the server renews it), then up to 2 s
    /// without a lock; a read-modify-write of the counter that never checks
    /// the lease.
    /// Sometimes a re-entry without KEEPALIVE (keeps the tie) or a RENEW
    /// KEEPALIVE midway; sometimes a RENEW without it just before releasing
    /// (unties: a plain lease again).
    fn round_keepalive(&mut self) {
        let rng = &mut self.rng;
        let key = format!("lk{}", rng.below(self.keys as u64));
        let lease = rng.range(900, 1800);
        let owner = if rng.chance(10) {
            b"*".to_vec()
        } else {
            self.me.clone()
        };
        let block = rng.chance(70).then(|| rng.range(100, 3000));
        let (_, out) = self.call(Op::Acquire {
            key: key.clone(),
            owner: owner.clone(),
            lease_ms: lease,
            block_ms: block,
            keepalive: true,
        });
        let (owner, mut holds) = match out {
            Outcome::Int(n) if n >= 1 => (owner, n),
            Outcome::Bulk(uuid) => (uuid, 1),
            _ => {
                let pause = self.rng.below(5);
                std::thread::sleep(Duration::from_millis(pause));
                return;
            }
        };
        if self.rng.chance(20) {
            let lease = self.rng.range(900, 1800);
            if let (_, Outcome::Int(n)) = self.call(Op::Acquire {
                key: key.clone(),
                owner: owner.clone(),
                lease_ms: lease,
                block_ms: None,
                keepalive: false,
            }) {
                holds = n;
            }
        }
        if self.rng.chance(85) {
            // Mostly short; one in five up to 2 s, past the whole lease.
            let hold = if self.rng.chance(20) {
                self.rng.range(400, 2000)
            } else {
                self.rng.range(0, 400)
            } as u64;
            let (_, got) = self.call(Op::Get { key: key.clone() });
            let value = round::counter_value(&got);
            if self.rng.chance(15) {
                std::thread::sleep(Duration::from_millis(hold / 2));
                let lease = self.rng.range(900, 1800);
                self.call(Op::Renew {
                    key: key.clone(),
                    owner: owner.clone(),
                    lease_ms: lease,
                    keepalive: true,
                });
                std::thread::sleep(Duration::from_millis(hold - hold / 2));
            } else {
                std::thread::sleep(Duration::from_millis(hold));
            }
            self.call(Op::Set {
                key: key.clone(),
                value: value + 1,
            });
        }
        if self.rng.chance(10) {
            let lease = self.rng.range(900, 1800);
            self.call(Op::Renew {
                key: key.clone(),
                owner: owner.clone(),
                lease_ms: lease,
                keepalive: false,
            });
        }
        for _ in 0..holds {
            let (_, out) = self.call(Op::Release {
                key: key.clone(),
                owner: owner.clone(),
            });
            if !matches!(out, Outcome::Int(n) if n > 0) {
                break;
            }
        }
        // Long holders, but not all the time: the plain workers keep
        // their share of the three locks.
        let idle = self.rng.below(2000);
        std::thread::sleep(Duration::from_millis(idle));
    }
}

// ---- the runner ----

fn spawn(cfg: &Config, port: u16, dir: &Path, id: usize, incarnation: u32, until: u64) -> Slot {
    let out = dir.join(format!("w{id}.{incarnation}.hist"));
    let stderr = dir.join(format!("w{id}.{incarnation}.stderr"));
    let err_file = std::fs::File::create(&stderr).expect("stderr file");
    let exe = std::env::current_exe().expect("current_exe");
    let child = Command::new(exe)
        .arg("worker")
        .args(["--port", &port.to_string()])
        .args(["--resp", if cfg.resp3 { "3" } else { "2" }])
        .args(["--seed", &cfg.seed.to_string()])
        .args(["--id", &id.to_string()])
        .args(["--incarnation", &incarnation.to_string()])
        .args(["--until-ns", &until.to_string()])
        .args(["--keys", &cfg.keys.to_string()])
        .args([
            "--keepalive",
            if id < cfg.keepalive_workers { "1" } else { "0" },
        ])
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .expect("spawn worker");
    Slot {
        id,
        incarnation,
        child,
        stderr,
    }
}

pub fn run(cfg: &Config) -> Outcomes {
    let server = Server::builder(cfg.kind).start();
    let version = server.version();
    let dir = tempfile::Builder::new()
        .prefix("hashlock-churn-")
        .tempdir()
        .expect("temp dir");
    let mut rng = Rng::new(cfg.seed.wrapping_mul(31));
    let start = mono_ns();
    let until = start + cfg.duration.as_nanos() as u64;
    let mut slots: Vec<Slot> = (0..cfg.workers)
        .map(|id| spawn(cfg, server.port, dir.path(), id, 0, until))
        .collect();
    let mut worker_failures = Vec::new();
    let mut kills = 0;
    let mut keepalive_kills = 0;
    let mut handovers = Vec::new();
    // "w<id>.<incarnation>" → when it was SIGKILLed.
    let mut killed_at: HashMap<String, u64> = HashMap::new();
    let mut admin = server.client();
    let kill_ns = cfg.kill_every.as_nanos() as u64;
    // Jittered: 50%..150% of the period.
    let mut next_kill = start + kill_ns / 2 + rng.below(kill_ns.max(1));
    loop {
        let now = mono_ns();
        if now >= until {
            break;
        }
        // A worker that exits before the end died on its own.
        for s in &mut slots {
            if let Ok(Some(status)) = s.child.try_wait() {
                worker_failures.push(s.failure(&format!("exited early: {status}")));
                s.incarnation += 1;
                let (id, inc) = (s.id, s.incarnation);
                *s = spawn(cfg, server.port, dir.path(), id, inc, until);
            }
        }
        if now >= next_kill {
            // Every other kill hits a KEEPALIVE worker, one holding a tied
            // lock if any does.
            let keepalive_turn = cfg.keepalive_workers > 0 && kills % 2 == 1;
            // KEEPALIVE workers holding a tied lock, by their history and
            // by the server (LOCK.INFO: that owner, keepalive 1).
            let holding: Vec<(usize, Vec<TiedLock>)> = (0..cfg.keepalive_workers)
                .map(|i| {
                    let held = tied_now(dir.path(), &slots[i])
                        .into_iter()
                        .filter(|(key, owner)| tied_by_server(&mut admin, key, owner))
                        .collect::<Vec<_>>();
                    (i, held)
                })
                .filter(|(_, held)| !held.is_empty())
                .collect();
            let (i, watched) = if keepalive_turn && !holding.is_empty() {
                holding[rng.below(holding.len() as u64) as usize].clone()
            } else if keepalive_turn {
                (rng.below(cfg.keepalive_workers as u64) as usize, Vec::new())
            } else {
                let i = rng.below(slots.len() as u64) as usize;
                let held = holding
                    .iter()
                    .find(|(h, _)| *h == i)
                    .map(|(_, held)| held.clone())
                    .unwrap_or_default();
                (i, held)
            };
            let s = &mut slots[i];
            let name = format!("w{}.{}", s.id, s.incarnation);
            let at = mono_ns();
            let _ = s.child.kill(); // SIGKILL
            let _ = s.child.wait();
            killed_at.insert(name.clone(), at);
            kills += 1;
            if s.id < cfg.keepalive_workers {
                keepalive_kills += 1;
                for (key, owner) in watched {
                    let moved_at = watch_move(&mut admin, &key, &owner, at);
                    handovers.push(checker::Handover {
                        process: name.clone(),
                        key,
                        owner,
                        killed_at: at,
                        moved_at,
                    });
                }
            }
            let (id, inc) = (s.id, s.incarnation + 1);
            *s = spawn(cfg, server.port, dir.path(), id, inc, until);
            next_kill = now + kill_ns / 2 + rng.below(kill_ns.max(1));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Workers stop on their own at `until` (a BLOCK may keep one a little).
    worker_failures.extend(workers::wait_all(
        &mut slots,
        until,
        Duration::from_secs(20),
    ));

    // The histories and the final counters.
    let histories = history::read_all(dir.path());
    let processes = Process::all(&histories, |name| killed_at.get(name).copied());
    let mut admin = server.client();
    let mut counters = HashMap::new();
    for k in 0..cfg.keys {
        let key = format!("lk{k}");
        if let Reply::Bulk(b) = admin.cmd(&["GET", &format!("ctr:{key}")]) {
            let v = String::from_utf8_lossy(&b).parse().unwrap_or(-1);
            counters.insert(key, v);
        }
    }
    let mut verdict = checker::check(&processes, &counters);
    verdict
        .violations
        .extend(checker::check_handovers(&handovers, MOVED_ON_BOUND_MS));
    // Negative controls (see `Outcomes`).
    let control_overlaps =
        checker::overlaps_with_leases_tripled(&histories, |name| killed_at.get(name).copied());
    let late = Process::all(&histories, |name| killed_at.get(name).map(|&k| k + 50 * MS));
    let control_tied_overlaps = checker::check(&late, &HashMap::new()).overlaps();
    let server_problems = servers::health(&server);
    let lock_stats = servers::lock_stats(&server);
    if !verdict.ok() || !worker_failures.is_empty() {
        // Keep the evidence.
        let kept = dir.keep();
        worker_failures.push(format!("histories kept in {}", kept.display()));
    }
    Outcomes {
        config: cfg.clone(),
        version,
        verdict,
        kills,
        counters: counters.values().map(|&v| v.max(0) as u64).sum(),
        worker_failures,
        server_problems,
        lock_stats,
        control_overlaps,
        control_tied_overlaps,
        keepalive_kills,
        handovers,
    }
}

/// A lock tied to a worker's connection: (key, owner).
type TiedLock = (String, Vec<u8>);

/// The locks a worker holds tied to its connection, by its history so far.
fn tied_now(dir: &Path, s: &Slot) -> Vec<TiedLock> {
    let path = dir.join(format!("w{}.{}.hist", s.id, s.incarnation));
    history::read(&path)
        .map(|events| checker::tied_at_end(&events))
        .unwrap_or_default()
}

/// Whether the server has `key` held by `owner` and tied (LOCK.INFO).
fn tied_by_server(admin: &mut Client, key: &str, owner: &[u8]) -> bool {
    let info = admin.cmd(&["LOCK.INFO", key]);
    info.map_get("owner").is_some_and(|o| o.as_bytes() == owner)
        && info.map_get("keepalive") == Some(&Reply::Int(1))
}

/// Polls LOCK.INFO until `key` is no longer held by `owner` (handed to a
/// waiter, or free); returns when (None: not within 5 s).
fn watch_move(admin: &mut Client, key: &str, owner: &[u8], killed: u64) -> Option<u64> {
    loop {
        let info = admin.cmd(&["LOCK.INFO", key]);
        let held = info.map_get("owner").is_some_and(|o| o.as_bytes() == owner);
        let now = mono_ns();
        if !held {
            return Some(now);
        }
        if now > killed + 5_000 * MS {
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs every combination and renders the section.
pub fn section(kinds: &[Kind], seeds: &[u64], duration: Duration, kill_every: Duration) -> Section {
    let mut s = Section::new("R1 Mutual exclusion under churn");
    s.line(format!(
        "16 worker processes, 3 locks, {} s per run, one worker SIGKILLed and restarted every ~{:.1} s; \
         holds 0-20 ms, leases 50-500 ms, ~50% of acquires with BLOCK. 3 of the 16 take their locks with KEEPALIVE \
         (leases 900-1800 ms; holds 0-400 ms, one in five 400-2000 ms, with no lease check: the server renews; \
         0-2 s between rounds; ~70% BLOCK; some re-entries, \
         RENEW KEEPALIVE midway, RENEW without it before releasing); every other kill hits one of them, preferably \
         while it holds a tied lock, and the runner then watches that lock move on (LOCK.INFO): the checker requires \
         it within {MOVED_ON_BOUND_MS:.0} ms (left to its lease it would take 600 ms or more).",
        duration.as_secs_f64(),
        kill_every.as_secs_f64()
    ));
    s.line(String::new());
    s.line(
        "| server | proto | seed | ops checked | grants | safe windows | exclusive time checked | sections (late) | counter | kills (of tied holders) | tied locks moved on: count, max ms | keepalive renewed / released | waits granted / timed out / undelivered | control: overlaps with leases taken 3× / with killed holders dying 50 ms later | violations |"
            .into(),
    );
    s.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    let (mut total_ops, mut total_violations, mut total_control) = (0, 0, 0);
    let mut moved_ms: Vec<f64> = Vec::new();
    let mut total_tied_kills = 0;
    for &kind in kinds {
        for resp3 in [false, true] {
            for &seed in seeds {
                let cfg = Config {
                    kind,
                    resp3,
                    seed,
                    duration,
                    kill_every,
                    workers: 16,
                    keepalive_workers: 3,
                    keys: 3,
                };
                let o = run(&cfg);
                let v = &o.verdict;
                total_ops += v.ops;
                total_control += o.control_overlaps;
                let violations = v.violations.len()
                    + o.worker_failures
                        .iter()
                        .filter(|f| !f.starts_with("histories kept"))
                        .count()
                    + o.server_problems.len();
                total_violations += violations;
                let stat = |k: &str| o.lock_stats.get(k).copied().unwrap_or(0);
                let moved: Vec<f64> = o.handovers.iter().filter_map(|h| h.after_ms()).collect();
                let max_moved = moved.iter().copied().fold(0.0, f64::max);
                moved_ms.extend(&moved);
                total_tied_kills += o.keepalive_kills;
                s.line(format!(
                    "| {kind} {} | RESP{} | {seed} | {} | {} | {} | {:.1} s | {} ({}) | {} (+{} unknown) | {} ({}) | {}, {max_moved:.1} | {} / {} | {} / {} / {} | {} / {} | **{}** |",
                    o.version,
                    if resp3 { 3 } else { 2 },
                    fmt_int(v.ops),
                    fmt_int(v.grants),
                    fmt_int(v.windows),
                    v.window_ns as f64 / 1e9,
                    fmt_int(v.sections),
                    v.late_sections,
                    fmt_int(o.counters),
                    v.unknown_sets,
                    o.kills,
                    o.keepalive_kills,
                    o.handovers.len(),
                    fmt_int(stat("keepalive_renewed")),
                    fmt_int(stat("keepalive_released")),
                    fmt_int(stat("granted_after_wait")),
                    fmt_int(stat("timed_out")),
                    stat("undelivered"),
                    o.control_overlaps,
                    o.control_tied_overlaps,
                    violations
                ));
                for x in v.violations.iter().take(20) {
                    s.fail(format!(
                        "{kind} RESP{} seed {seed}: {x}",
                        if resp3 { 3 } else { 2 }
                    ));
                }
                if v.violations.len() > 20 {
                    s.fail(format!(
                        "... and {} more violations",
                        v.violations.len() - 20
                    ));
                }
                for f in &o.worker_failures {
                    if f.starts_with("histories kept") {
                        s.note(f.clone());
                    } else {
                        s.fail(format!("{kind} seed {seed}: {f}"));
                    }
                }
                for p in &o.server_problems {
                    s.fail(format!("{kind} seed {seed}: server: {p}"));
                }
            }
        }
    }
    s.check(total_control > 0, || {
        "negative control: no overlap found even with leases taken 3× longer; the workload \
         never lets a lease expire under a waiter, so the checker was not exercised"
            .into()
    });
    s.check(!moved_ms.is_empty(), || {
        "no KEEPALIVE worker was killed while holding a tied lock: the hand-over on death was not exercised"
            .into()
    });
    moved_ms.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        moved_ms
            .get(((moved_ms.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    s.line(String::new());
    s.line(format!(
        "Total: {} operations checked, {total_violations} violations. KEEPALIVE workers killed: {total_tied_kills}; \
         tied locks of killed holders watched: {}, moved on after p50 {:.1} ms, max {:.1} ms (bound {MOVED_ON_BOUND_MS:.0} ms; \
         measured by the runner polling LOCK.INFO every 0.2 ms after the kill).",
        fmt_int(total_ops),
        moved_ms.len(),
        pct(0.5),
        pct(1.0)
    ));
    s.line(
        "\"sections\": read-modify-write critical sections whose write was acknowledged; \"late\": \
         sections whose write returned after the client's own safe window ended (a client paused \
         past its lease; counted, never blamed on the server). \"counter\": the sum of the final \
         protected counters, which must equal the sections (+ writes in flight when a worker was killed). \
         \"control\": the same histories re-checked as if every lease had been 3× longer than granted; the \
         overlaps found there are real take-overs of expired leases, which shows the checker detects \
         overlaps in these histories (it is the column that must NOT be zero); the second figure re-checks them as if \
         every killed worker had died 50 ms later than it did: overlaps there are tied locks the next holder got \
         within 50 ms of the kill."
            .into(),
    );
    s
}
