//! R6: mutual exclusion on a 3-primary / 3-replica cluster while its
//! topology changes under load.
//!
//! Worker processes (`cluster_worker`) churn on 12 locks, four in the
//! lowest slots of each primary, through a cluster-aware client (RESP2 and
//! RESP3 workers mixed), every grant acknowledged by a replica with
//! `WAIT 1`. Meanwhile the runner changes the topology, one step at a time:
//!
//! - **reshard**: `redis-cli --cluster reshard` moves a primary's two
//!   lowest slots (which hold locks, waiters and counters) to another
//!   primary; moves go back and forth as the lowest slots travel;
//! - **failover**: `CLUSTER FAILOVER` on a primary's replica;
//! - **kill**: a primary is SIGKILLed (after its replica caught up with the
//!   slot moves, whose writes no client acknowledges), its replica is
//!   elected, and the killed node is restarted and rejoins as a replica.
//!
//! Judged by the R1 checker on the acknowledged grants (0 overlapping
//! holds), plus: no call left hanging past its BLOCK time + 1 s, every
//! reshard completes, every node ends with no client blocked.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::cluster::key_in_slot;
use testkit::rng::Rng;
use testkit::{Cluster, Kind, Reply, info_value, wait_until};

use crate::checker::{self, Process, Verdict};
use crate::clock::mono_ns;
use crate::cluster_client::RetryStats;
use crate::history;
use crate::report::{Section, fmt_int};
use crate::servers;
use crate::workers::{self, Slot};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Reshard,
    Failover,
    Kill,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub seed: u64,
    /// The steps, in order; the run repeats them until `duration` passed
    /// (and always does each at least once).
    pub steps: Vec<Step>,
    pub duration: Duration,
    /// Churn between two steps.
    pub pause: Duration,
    pub workers: usize,
    /// False: workers never BLOCK (a harness check: no waiters, so the
    /// module has nothing to hand on wrongly).
    pub blocking: bool,
}

/// One topology change as it happened.
#[derive(Clone, Debug)]
pub struct Event {
    pub at: Duration,
    pub step: Step,
    pub what: String,
    pub took: Duration,
    pub failure: Option<String>,
}

pub struct Outcomes {
    pub config: Config,
    pub version: String,
    pub verdict: Verdict,
    pub events: Vec<Event>,
    pub retries: RetryStats,
    pub counters: u64,
    pub worker_failures: Vec<String>,
    pub server_problems: Vec<String>,
    pub control_overlaps: usize,
    /// Set when a failed step left the cluster unusable: the run stopped early.
    pub aborted: Option<String>,
}

struct Spawner<'a> {
    ports: String,
    keys: String,
    seed: u64,
    until: u64,
    dir: &'a Path,
    blocking: bool,
}

impl Spawner<'_> {
    fn spawn(&self, id: usize, incarnation: u32) -> Slot {
        let name = format!("w{id}.{incarnation}");
        let stderr = self.dir.join(format!("{name}.stderr"));
        let err_file = std::fs::File::create(&stderr).expect("stderr file");
        let child = Command::new(std::env::current_exe().expect("current_exe"))
            .arg("cluster-worker")
            .args(["--ports", &self.ports])
            .args(["--keys", &self.keys])
            .args(["--resp", if id % 2 == 1 { "3" } else { "2" }])
            .args(["--seed", &self.seed.to_string()])
            .args(["--id", &id.to_string()])
            .args(["--incarnation", &incarnation.to_string()])
            .args(["--until-ns", &self.until.to_string()])
            .arg("--out")
            .arg(self.dir.join(format!("{name}.hist")))
            .arg("--stats")
            .arg(self.dir.join(format!("{name}.stats")))
            .args(if self.blocking {
                &[][..]
            } else {
                &["--no-block"][..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err_file)
            .spawn()
            .expect("spawn cluster worker");
        Slot {
            id,
            incarnation,
            child,
            stderr,
        }
    }
}

fn panic_text(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(panic)".into())
}

/// The first lines of a long text.
fn head(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Two distinct primaries, at random.
fn two_primaries(cluster: &Cluster, rng: &mut Rng) -> (usize, usize) {
    let p = cluster.primaries();
    let a = p[rng.below(p.len() as u64) as usize];
    let others: Vec<usize> = p.into_iter().filter(|&x| x != a).collect();
    (a, others[rng.below(others.len() as u64) as usize])
}

/// Waits until `primary`'s replica has acknowledged everything written so
/// far (MIGRATE's restores are acknowledged by no client's WAIT).
fn replica_caught_up(cluster: &Cluster, primary: usize) -> bool {
    let target = cluster
        .server(primary)
        .info_field("replication", "master_repl_offset")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    wait_until(Duration::from_secs(3), || {
        let info = cluster.server(primary).info("replication");
        info_value(&info, "slave0")
            .and_then(|v| v.split(',').find_map(|f| f.strip_prefix("offset=")))
            .and_then(|o| o.parse::<u64>().ok())
            .is_some_and(|o| o >= target)
    })
}

/// Waits up to 15 s for the cluster to be stable; why not, if it is not.
fn settle(cluster: &Cluster) -> Option<String> {
    let mut why = None;
    let ok = wait_until(Duration::from_secs(15), || {
        why = cluster.unstable();
        why.is_none()
    });
    if ok { None } else { why }
}

/// Runs one step; Err(text) if it failed. Returns a description.
fn do_step(cluster: &mut Cluster, step: Step, rng: &mut Rng) -> Result<String, String> {
    match step {
        Step::Reshard => {
            let (from, to) = two_primaries(cluster, rng);
            let slots = cluster.lowest_slots(from, 2);
            let out = cluster.reshard(from, to, 2, &[]);
            let what = format!("reshard slots {slots:?} node {from} -> node {to}");
            if !out.success {
                return Err(format!("{what}: redis-cli failed:\n{}", out.tail(12)));
            }
            // The nodes learn the new owners by gossip: give them a moment.
            if let Some(why) = settle(cluster) {
                return Err(format!(
                    "{what}: redis-cli succeeded, but the cluster did not settle in 15 s: {why}"
                ));
            }
            let check = cluster.cli_check();
            if !check.success {
                return Err(format!(
                    "{what}: redis-cli reported success but --cluster check fails:\n{}",
                    check.tail(8)
                ));
            }
            Ok(what)
        }
        Step::Failover => {
            let primaries = cluster.primaries();
            let p = primaries[rng.below(primaries.len() as u64) as usize];
            let r = cluster.replica_of(p);
            let (_, took) = cluster.failover(r, "");
            Ok(format!(
                "CLUSTER FAILOVER: node {r} replaces node {p} (roles swapped and stable in {:.1} s)",
                took.as_secs_f64()
            ))
        }
        Step::Kill => {
            let primaries = cluster.primaries();
            let p = primaries[rng.below(primaries.len() as u64) as usize];
            let caught_up = replica_caught_up(cluster, p);
            let (r, took) = cluster.kill_primary(p);
            let t = Instant::now();
            cluster.restart(p, r);
            Ok(format!(
                "SIGKILL node {p}{}: node {r} elected and cluster ok {:.1} s later; node {p} back as a replica in {:.1} s",
                if caught_up {
                    ""
                } else {
                    " (its replica had not caught up in 3 s)"
                },
                took.as_secs_f64(),
                t.elapsed().as_secs_f64()
            ))
        }
    }
}

pub fn run(cfg: &Config) -> Outcomes {
    let mut cluster = Cluster::builder(cfg.kind)
        // The other shards keep serving while one primary is down.
        .config("cluster-require-full-coverage", "no")
        .start();
    let version = cluster.server(0).version();
    let keys: Vec<String> = cluster
        .primaries()
        .into_iter()
        .flat_map(|p| cluster.lowest_slots(p, 4))
        .map(|slot| key_in_slot(slot, "r6-", ""))
        .collect();
    let ports: Vec<String> = (0..cluster.nodes().len())
        .map(|i| cluster.port(i).to_string())
        .collect();
    let dir = tempfile::Builder::new()
        .prefix("hashlock-r6-")
        .tempdir()
        .expect("temp dir");
    let started = Instant::now();
    let start_ns = mono_ns();
    // Workers stop at `until`; it is moved on if the steps take longer.
    let mut rng = Rng::new(cfg.seed.wrapping_mul(77));
    let steps_time: Duration = cfg.pause * (cfg.steps.len() as u32 + 1);
    let planned = cfg.duration.max(steps_time + Duration::from_secs(8));
    let until = start_ns + planned.as_nanos() as u64;
    let spawner = Spawner {
        ports: ports.join(","),
        keys: keys.join(","),
        seed: cfg.seed,
        until,
        dir: dir.path(),
        blocking: cfg.blocking,
    };
    let mut slots: Vec<Slot> = (0..cfg.workers).map(|id| spawner.spawn(id, 0)).collect();
    let mut worker_failures = Vec::new();
    let mut events = Vec::new();
    let mut aborted = None;
    let mut next_step = Instant::now() + cfg.pause;
    let mut step_i = 0;
    // Leave the workers time at the end to run on the final topology.
    let steps_until = started + planned - Duration::from_secs(4);
    loop {
        let now = Instant::now();
        if now >= steps_until && step_i >= cfg.steps.len() || mono_ns() >= until {
            break;
        }
        for s in &mut slots {
            if let Ok(Some(status)) = s.child.try_wait() {
                worker_failures.push(s.failure(&format!("exited early: {status}")));
                let (id, inc) = (s.id, s.incarnation + 1);
                *s = spawner.spawn(id, inc);
            }
        }
        if aborted.is_none() && now >= next_step && now < steps_until {
            let step = cfg.steps[step_i % cfg.steps.len()];
            step_i += 1;
            let t0 = Instant::now();
            let result = servers::expect_panic(|| do_step(&mut cluster, step, &mut rng))
                .unwrap_or_else(|e| {
                    Err(format!("{step:?} panicked: {}", head(&panic_text(e), 12)))
                });
            let mut event = Event {
                at: t0 - started,
                step,
                what: String::new(),
                took: t0.elapsed(),
                failure: None,
            };
            match result {
                Ok(what) => event.what = what,
                Err(why) => {
                    event.what = format!("{step:?} FAILED");
                    event.failure = Some(why);
                    // Try to leave the cluster usable for the rest of the run.
                    let fix = servers::expect_panic(|| {
                        let fix = cluster.cli_fix();
                        let stable = settle(&cluster);
                        (fix, stable)
                    });
                    let broken = match fix {
                        Ok((fix, None)) => {
                            event.what.push_str(&format!(
                                "; redis-cli --cluster fix: {}",
                                if fix.success { "ok" } else { "failed" }
                            ));
                            None
                        }
                        Ok((fix, Some(why))) => Some(format!(
                            "after `redis-cli --cluster fix` ({}) the cluster is still not stable: {why}",
                            if fix.success { "ok" } else { "failed" }
                        )),
                        Err(e) => Some(format!(
                            "redis-cli --cluster fix panicked: {}",
                            head(&panic_text(e), 6)
                        )),
                    };
                    if let Some(b) = broken {
                        aborted = Some(b);
                    }
                }
            }
            events.push(event);
            next_step = Instant::now() + cfg.pause;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // Workers end on their own at `until`; a hung call is given up after
    // at most BLOCK0_LIMIT + the client's retry time.
    worker_failures.extend(workers::wait_all(
        &mut slots,
        until,
        Duration::from_secs(45),
    ));

    let mut retries = RetryStats::default();
    for entry in std::fs::read_dir(dir.path()).expect("read dir") {
        let Ok(p) = entry.map(|e| e.path()) else {
            continue;
        };
        if p.extension().is_some_and(|x| x == "stats") {
            retries.add(&RetryStats::parse(
                &std::fs::read_to_string(&p).unwrap_or_default(),
            ));
        }
    }
    let histories = history::read_all(dir.path());
    let processes = Process::all(&histories, |_| None);
    let mut counters = HashMap::new();
    let mut server_problems = Vec::new();
    for key in &keys {
        let ctr = format!("ctr:{key}");
        let got =
            servers::expect_panic(|| cluster.client_for_key(ctr.as_bytes()).cmd(&["GET", &ctr]));
        match got {
            Ok(Reply::Bulk(b)) => {
                counters.insert(
                    key.clone(),
                    String::from_utf8_lossy(&b).parse().unwrap_or(-1),
                );
            }
            Ok(Reply::Nil) => {}
            Ok(other) => server_problems.push(format!("GET {ctr} answered {other:?}")),
            Err(e) => server_problems.push(format!("GET {ctr}: {}", head(&panic_text(e), 3))),
        }
    }
    let verdict = checker::check(&processes, &counters);
    let control_overlaps = checker::overlaps_with_leases_tripled(&histories, |_| None);

    for i in 0..cluster.nodes().len() {
        let s = cluster.server(i);
        if std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err() {
            server_problems.push(format!("node {i} is not running at the end"));
            continue;
        }
        for p in servers::health(s) {
            server_problems.push(format!("node {i}: {p}"));
        }
    }
    if aborted.is_none() {
        let check = cluster.cli_check();
        if !check.success {
            server_problems.push(format!(
                "redis-cli --cluster check at the end:\n{}",
                check.tail(8)
            ));
        }
    }
    if !verdict.ok() || !worker_failures.is_empty() {
        let kept = dir.keep();
        worker_failures.push(format!("histories kept in {}", kept.display()));
    }
    Outcomes {
        config: cfg.clone(),
        version,
        verdict,
        events,
        retries,
        counters: counters.values().map(|&v| v.max(0) as u64).sum(),
        worker_failures,
        server_problems,
        control_overlaps,
        aborted,
    }
}

/// Runs one configuration per kind and seed and renders the section.
pub fn section(
    kinds: &[Kind],
    seeds: &[u64],
    steps: &[Step],
    duration: Duration,
    pause: Duration,
    blocking: bool,
) -> Section {
    let mut s = Section::new(if blocking {
        "R6 Mutual exclusion on a changing cluster"
    } else {
        "R6 harness check: the same without BLOCK (no waiters)"
    });
    s.line(format!(
        "3 primaries + 3 replicas, 12 worker processes (RESP2 and RESP3 mixed) on 12 locks (4 in the lowest \
         slots of each primary) through a cluster-aware client that follows MOVED/ASK; every grant, \
         re-entry, renewal and counter write acknowledged with `WAIT 1 {}` or abandoned. Steps, one at a \
         time with {:.1} s of churn between them: {} (repeated for at least {:.0} s).",
        crate::churn::WAIT_ACK_MS,
        pause.as_secs_f64(),
        steps.iter().map(|x| format!("{x:?}").to_lowercase()).collect::<Vec<_>>().join(", "),
        duration.as_secs_f64()
    ));
    s.line(String::new());
    s.line(
        "| server | seed | ops checked | grants | confirmed / not by WAIT | safe windows | exclusive time checked | sections (late) | counter | reshards ok / run | failovers | kills | redirects MOVED / ASK / UNBLOCKED / REDIRECT | CLUSTERDOWN / refused / unknown | hung | control overlaps | violations |"
            .into(),
    );
    s.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    let mut total_control = 0;
    let mut total_violations = 0;
    for &kind in kinds {
        for &seed in seeds {
            let cfg = Config {
                kind,
                seed,
                steps: steps.to_vec(),
                duration,
                pause,
                workers: 12,
                blocking,
            };
            let o = run(&cfg);
            let v = &o.verdict;
            total_control += o.control_overlaps;
            let count = |st: Step| o.events.iter().filter(|e| e.step == st).count();
            let ok = |st: Step| {
                o.events
                    .iter()
                    .filter(|e| e.step == st && e.failure.is_none())
                    .count()
            };
            let failed_steps = o.events.iter().filter(|e| e.failure.is_some()).count();
            let worker_problems: Vec<&String> = o
                .worker_failures
                .iter()
                .filter(|f| !f.starts_with("histories kept"))
                .collect();
            let violations = v.violations.len()
                + failed_steps
                + worker_problems.len()
                + o.server_problems.len()
                + usize::from(o.aborted.is_some());
            total_violations += violations;
            let r = &o.retries;
            s.line(format!(
                "| {kind} {} | {seed} | {} | {} | {} / {} | {} | {:.1} s | {} ({}) | {} (+{} unknown) | {} / {} | {} / {} | {} / {} | {} / {} / {} / {} | {} / {} / {} | **{}** | {} | **{}** |",
                o.version,
                fmt_int(v.ops),
                fmt_int(v.grants),
                fmt_int(v.confirmed),
                v.unconfirmed,
                fmt_int(v.windows),
                v.window_ns as f64 / 1e9,
                fmt_int(v.sections),
                v.late_sections,
                fmt_int(o.counters),
                v.unknown_sets,
                ok(Step::Reshard),
                count(Step::Reshard),
                ok(Step::Failover),
                count(Step::Failover),
                ok(Step::Kill),
                count(Step::Kill),
                r.moved,
                r.ask,
                r.unblocked,
                r.redirect,
                r.clusterdown,
                r.refused,
                r.unknown,
                v.hung,
                o.control_overlaps,
                violations
            ));
            let tag = format!("{kind} seed {seed}");
            for e in &o.events {
                s.note(format!(
                    "{tag}: at {:.1} s: {} ({:.1} s)",
                    e.at.as_secs_f64(),
                    e.what,
                    e.took.as_secs_f64()
                ));
                if let Some(f) = &e.failure {
                    s.fail(format!(
                        "{tag}: RESHARD/FAILOVER/KILL STEP FAILED at {:.1} s: {f}",
                        e.at.as_secs_f64()
                    ));
                }
            }
            if let Some(a) = &o.aborted {
                s.fail(format!(
                    "{tag}: the run stopped changing the topology early: {a}"
                ));
            }
            for x in v.violations.iter().take(20) {
                s.fail(format!("{tag}: {x}"));
            }
            if v.violations.len() > 20 {
                s.fail(format!(
                    "{tag}: ... and {} more violations",
                    v.violations.len() - 20
                ));
            }
            for f in &o.worker_failures {
                if f.starts_with("histories kept") {
                    s.note(format!("{tag}: {f}"));
                } else {
                    s.fail(format!("{tag}: {f}"));
                }
            }
            for p in &o.server_problems {
                s.fail(format!("{tag}: server: {p}"));
            }
        }
    }
    s.check(total_control > 0, || {
        "negative control: no overlap found even with leases taken 3x longer; the checker was not exercised"
            .into()
    });
    s.line(String::new());
    s.line(format!("Total: {total_violations} violations."));
    s.line(
        "\"confirmed / not\": writes a replica acknowledged (judged) / not (abandoned, not judged). \
         \"redirects\": answers the workers' client followed (each means the command was not executed there). \
         \"unknown\": calls whose connection died after sending (e.g. the killed primary); their effect is \
         treated as unknown. \"hung\": calls with no reply within their BLOCK time + 1 s (BLOCK 0: 15 s), a \
         violation. Every other column as in R1."
            .into(),
    );
    s
}
