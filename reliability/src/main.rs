//! `hashlock-reliability`: runs the reliability scenarios against real
//! Redis 7.0 and Valkey 9.1 servers and prints the figures as markdown.
//!
//! ```text
//! hashlock-reliability all --short|--long [--out FILE]
//! hashlock-reliability churn|crash|failover|fuzz|leaks|reload|cluster|semaphores|rwmulti [--short|--long]
//! hashlock-reliability valgrind
//! ```
//!
//! Servers come from testkit: `redis-server` on PATH (or `$REDIS_SERVER`),
//! `$VALKEY_SERVER`, and the module at `$HASHLOCK_MODULE` or
//! `target/release/libhashlock.so`.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use hashlock_reliability::report::Section;
use hashlock_reliability::{
    churn, cluster_churn, cluster_worker, crash, failover, fuzz, leaks, rwmulti, semaphores,
    servers,
};
use testkit::{KINDS, Kind};

/// How long each scenario runs: `--short` (CI) or `--long` (soak).
#[derive(Clone, Copy, PartialEq)]
enum Length {
    Short,
    Long,
}

const USAGE: &str = "usage: hashlock-reliability <all|churn|crash|failover|fuzz|leaks|reload|cluster|semaphores|rwmulti|valgrind> [--short|--long] [--out FILE]";

fn main() -> ExitCode {
    raise_fd_limit();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let flags = Flags::parse(&args[1..]);
    match cmd.as_str() {
        // Internal: a churn client process, and the valgrind workload.
        "worker" => {
            churn::worker(churn::WorkerArgs {
                port: flags.num("port") as u16,
                resp3: flags.num("resp") == 3,
                keepalive: flags.num("keepalive") == 1,
                seed: flags.num("seed"),
                id: flags.num("id") as usize,
                incarnation: flags.num("incarnation") as u32,
                until_ns: flags.num("until-ns"),
                keys: flags.num("keys") as usize,
                out: PathBuf::from(flags.get("out").expect("--out")),
            });
            ExitCode::SUCCESS
        }
        "sem-worker" => {
            semaphores::worker(semaphores::WorkerArgs {
                port: flags.num("port") as u16,
                resp3: flags.num("resp") == 3,
                seed: flags.num("seed"),
                id: flags.num("id") as usize,
                incarnation: flags.num("incarnation") as u32,
                until_ns: flags.num("until-ns"),
                out: PathBuf::from(flags.get("out").expect("--out")),
            });
            ExitCode::SUCCESS
        }
        "rw-worker" => {
            rwmulti::worker(rwmulti::WorkerArgs {
                port: flags.num("port") as u16,
                resp3: flags.num("resp") == 3,
                workload: match flags.get("workload") {
                    Some("rw") => rwmulti::Workload::ReadWrite,
                    _ => rwmulti::Workload::Multi,
                },
                keepalive: flags.num("keepalive") == 1,
                seed: flags.num("seed"),
                id: flags.num("id") as usize,
                incarnation: flags.num("incarnation") as u32,
                until_ns: flags.num("until-ns"),
                out: PathBuf::from(flags.get("out").expect("--out")),
            });
            ExitCode::SUCCESS
        }
        // Internal: one R8 run (to iterate on it).
        "rw-one" => {
            let kind = match flags.get("kind") {
                Some("redis") => Kind::Redis,
                _ => Kind::Valkey,
            };
            let s = rwmulti::section(
                &[kind],
                &[flags.get("resp") == Some("3")],
                Duration::from_secs(flags.num("secs")),
                Duration::from_secs(2),
            );
            print!("{}", s.render());
            if s.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        "cluster-worker" => {
            let list = |name: &str| -> Vec<String> {
                flags
                    .get(name)
                    .unwrap_or_else(|| panic!("--{name} a,b,c required"))
                    .split(',')
                    .map(str::to_string)
                    .collect()
            };
            cluster_worker::worker(cluster_worker::ClusterWorkerArgs {
                ports: list("ports")
                    .iter()
                    .map(|p| p.parse().expect("--ports: numbers"))
                    .collect(),
                resp3: flags.num("resp") == 3,
                seed: flags.num("seed"),
                id: flags.num("id") as usize,
                incarnation: flags.num("incarnation") as u32,
                until_ns: flags.num("until-ns"),
                keys: list("keys"),
                out: PathBuf::from(flags.get("out").expect("--out")),
                stats: PathBuf::from(flags.get("stats").expect("--stats")),
                blocking: !flags.has("no-block"),
            });
            ExitCode::SUCCESS
        }
        "valgrind-workload" => {
            let kind = match flags.get("kind") {
                Some("redis") => Kind::Redis,
                _ => Kind::Valkey,
            };
            leaks::valgrind_workload(kind);
            ExitCode::SUCCESS
        }
        // Internal: re-checks the histories an R7 run kept.
        "sem-check" => {
            let hists = hashlock_reliability::famhist::read_all(std::path::Path::new(
                flags.get("dir").expect("--dir"),
            ));
            let opts = hashlock_reliability::semcheck::Opts {
                realtime_offset_ns: hashlock_reliability::clock::realtime_offset_ns(),
                ..hashlock_reliability::semcheck::Opts::new(flags.num("permits"))
            };
            let v = hashlock_reliability::semcheck::check(&hists, &opts);
            println!(
                "ops {} max_held {} overs {} anomalies {} lapsed {} by proxy {}",
                v.ops,
                v.max_held,
                v.overs,
                v.anomalies.len(),
                v.lapsed,
                v.released_by_proxy
            );
            for x in &v.over_examples {
                println!(
                    "over at {}: {} held: {}",
                    x.at,
                    x.held,
                    x.holders.join("; ")
                );
            }
            for a in v.anomalies.iter().take(20) {
                println!("anomaly: {a}");
            }
            ExitCode::SUCCESS
        }
        // Internal: one R7 run (to iterate on it).
        "sem-one" => {
            let kind = match flags.get("kind") {
                Some("redis") => Kind::Redis,
                _ => Kind::Valkey,
            };
            let s = semaphores::section(
                &[kind],
                &[flags.get("resp") == Some("3")],
                Duration::from_secs(flags.num("secs")),
                flags.get("ops").map_or(0, |p| p.parse().unwrap_or(0)),
                flags
                    .get("promotions")
                    .map_or(0, |p| p.parse().unwrap_or(0)),
                Duration::from_millis(500),
                !flags.has("both"),
            );
            print!("{}", s.render());
            if s.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        // Internal: only R3's churn across promotions (to iterate on it).
        "promotions" => {
            let long = flags.has("long");
            let (promotions, churn_ms) = if long { (30, 1500) } else { (4, 500) };
            let mut s = Section::new("R3 churn across promotions");
            hashlock_reliability::promotions::lines(
                &mut s,
                &KINDS,
                promotions,
                Duration::from_millis(churn_ms),
            );
            print!("{}", s.render());
            if s.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        "all" | "churn" | "crash" | "failover" | "fuzz" | "leaks" | "reload" | "cluster"
        | "cluster-noblock" | "valgrind" | "semaphores" | "rwmulti" => {
            let length = if flags.has("long") {
                Length::Long
            } else {
                Length::Short
            };
            let which: Vec<&str> = match cmd.as_str() {
                "all" if length == Length::Long => {
                    vec![
                        "churn",
                        "crash",
                        "failover",
                        "fuzz",
                        "leaks",
                        "reload",
                        "cluster",
                        "semaphores",
                        "valgrind",
                    ]
                }
                "all" => vec![
                    "churn",
                    "crash",
                    "failover",
                    "fuzz",
                    "leaks",
                    "reload",
                    "cluster",
                    "semaphores",
                    "rwmulti",
                ],
                one => vec![one],
            };
            run(&which, length, flags.get("out").map(PathBuf::from))
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(which: &[&str], length: Length, out: Option<PathBuf>) -> ExitCode {
    let started = Instant::now();
    let mut text = header(length);
    print!("{text}");
    let mut failed = 0;
    let mut passed = 0;
    for name in which {
        let t0 = Instant::now();
        let outcome = servers::expect_panic(|| scenario(name, length));
        let mut section = match outcome {
            Ok(s) => s,
            Err(e) => {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let mut s = Section::new(name);
                s.fail(format!("the scenario panicked: {why}"));
                s
            }
        };
        section.note(format!("{name} took {:.0} s", t0.elapsed().as_secs_f64()));
        if section.failures.is_empty() {
            passed += 1;
        } else {
            failed += 1;
        }
        let rendered = section.render() + "\n";
        print!("{rendered}");
        let _ = std::io::stdout().flush();
        text.push_str(&rendered);
    }
    let summary = format!(
        "Total time {:.0} s.\n\nreliability: {passed} passed, {failed} failed\n",
        started.elapsed().as_secs_f64()
    );
    print!("{summary}");
    text.push_str(&summary);
    if let Some(path) = out {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn scenario(name: &str, length: Length) -> Section {
    let long = length == Length::Long;
    match name {
        "churn" => {
            let (secs, kill_every) = if long { (45, 3.0) } else { (4, 1.5) };
            churn::section(
                &KINDS,
                &[1, 2, 3],
                Duration::from_secs(secs),
                Duration::from_secs_f64(kill_every),
            )
        }
        "crash" => {
            let (rounds, write_ms) = if long { (5, 2000) } else { (1, 800) };
            crash::section(&KINDS, rounds, Duration::from_millis(write_ms))
        }
        "failover" => {
            let (rounds, write_ms) = if long { (3, 3000) } else { (1, 800) };
            let (promotions, churn_ms) = if long { (30, 1500) } else { (4, 500) };
            failover::section(
                &KINDS,
                rounds,
                Duration::from_millis(write_ms),
                promotions,
                Duration::from_millis(churn_ms),
            )
        }
        "fuzz" => fuzz::section(&KINDS, if long { 1_000_000 } else { 100_000 }),
        "leaks" => {
            if long {
                leaks::section(&KINDS, 1_000_000, 10_000)
            } else {
                leaks::section(&KINDS, 100_000, 1_000)
            }
        }
        "reload" => leaks::reload_section(&KINDS, if long { 200 } else { 50 }),
        "cluster" => {
            use cluster_churn::Step::{Failover, Kill, Reshard};
            if long {
                cluster_churn::section(
                    &KINDS,
                    &[1, 2],
                    &[Reshard, Failover, Reshard, Kill],
                    Duration::from_secs(120),
                    Duration::from_secs(3),
                    true,
                )
            } else {
                cluster_churn::section(
                    &KINDS,
                    &[1],
                    &[Reshard, Failover, Reshard, Kill, Reshard],
                    Duration::from_secs(30),
                    Duration::from_millis(1500),
                    true,
                )
            }
        }
        // Not in `all`: validates R6's harness (clients, chaos, checker) on
        // a workload without waiters; expected to pass even where R6 fails.
        "cluster-noblock" => cluster_churn::section(
            &KINDS,
            &[1],
            &[
                cluster_churn::Step::Reshard,
                cluster_churn::Step::Failover,
                cluster_churn::Step::Reshard,
                cluster_churn::Step::Kill,
                cluster_churn::Step::Reshard,
            ],
            Duration::from_secs(if long { 120 } else { 30 }),
            Duration::from_millis(1500),
            false,
        ),
        "semaphores" => {
            if long {
                semaphores::section(
                    &KINDS,
                    &[false, true],
                    Duration::from_secs(120),
                    300_000,
                    30,
                    Duration::from_millis(1500),
                    false,
                )
            } else {
                semaphores::section(
                    &KINDS,
                    &[false, true],
                    Duration::from_secs(4),
                    0,
                    2,
                    Duration::from_millis(500),
                    true,
                )
            }
        }
        "rwmulti" => rwmulti::section(
            &KINDS,
            &[false, true],
            Duration::from_secs(if long { 60 } else { 3 }),
            Duration::from_secs(if long { 2 } else { 1 }),
        ),
        "valgrind" => leaks::valgrind_section(&KINDS),
        other => panic!("unknown scenario {other}"),
    }
}

/// Where and on what the figures were measured.
fn header(length: Length) -> String {
    let sh = |cmd: &str| {
        std::process::Command::new("sh")
            .args(["-c", cmd])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let version = |kind: Kind| {
        std::process::Command::new(kind.binary())
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|e| format!("({e})"))
    };
    format!(
        "# hashlock reliability figures ({})\n\n\
         - date: {}\n- commit: {}\n- machine: {} cores, {}\n- module: {}\n- {}\n- {}\n\n",
        if length == Length::Long { "long / soak" } else { "short / CI" },
        sh("date -u '+%Y-%m-%d %H:%M UTC'"),
        sh("git rev-parse --short HEAD 2>/dev/null; git status --porcelain 2>/dev/null | grep -q . && echo '(with uncommitted changes)'")
            .replace('\n', " "),
        sh("nproc"),
        sh("uname -sr"),
        testkit::module_path().display(),
        version(Kind::Redis),
        version(Kind::Valkey),
    )
}

/// The leak scenario holds ~1000 connections at once: lift the soft limit
/// on open files to the hard one (often 1024 vs much more).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// `--name value` and bare `--flag` arguments.
struct Flags(HashMap<String, Option<String>>);

impl Flags {
    fn parse(args: &[String]) -> Flags {
        let mut map = HashMap::new();
        let mut i = 0;
        while i < args.len() {
            let Some(name) = args[i].strip_prefix("--") else {
                eprintln!("unexpected argument {}\n{USAGE}", args[i]);
                std::process::exit(2);
            };
            let value = args.get(i + 1).filter(|v| !v.starts_with("--")).cloned();
            i += if value.is_some() { 2 } else { 1 };
            map.insert(name.to_string(), value);
        }
        Flags(map)
    }

    fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.as_deref())
    }

    fn num(&self, name: &str) -> u64 {
        self.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("--{name} <number> required"))
    }
}
