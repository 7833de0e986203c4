//! One benchmark run: start the server, pin, run every selected workload
//! against that same server, collect the results.

use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use redis::aio::MultiplexedConnection;
use testkit::Kind;

use crate::conn;
use crate::plan::{Plan, Workload};
use crate::scripts;
use crate::setup::{self, Pinning};
use crate::workloads::contender::Waiter;
use crate::workloads::pairs::Pairs;
use crate::workloads::{b1, b2, b3, b4, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16};

pub struct Options {
    pub plan: Plan,
    pub kind: Kind,
    pub only: Vec<Workload>,
    pub pin: bool,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// This benchmark's own binary: B7 and B16 run their lock holders as
    /// `<exe> __holder ...` processes.
    pub holder_exe: std::path::PathBuf,
    /// B11: also measure the client libraries of this git revision.
    pub clients_before: Option<String>,
}

/// Where the numbers come from.
pub struct Meta {
    pub started: SystemTime,
    pub kind: Kind,
    pub server_version: String,
    pub module: String,
    pub pinning: Pinning,
    pub commit: String,
    pub loadavg: String,
    pub cpu_model: String,
    pub cpus_online: usize,
    pub took: Duration,
    /// Wall time per workload, in run order.
    pub workload_took: Vec<(Workload, Duration)>,
    /// Loopback round trip (PING, one connection) as pinned: back to back
    /// (p50, p99), and after 2 ms idle (p50, p99). Every unpipelined figure
    /// is made of these.
    pub rtt_busy: (Duration, Duration),
    pub rtt_idle: (Duration, Duration),
}

pub struct Results {
    pub meta: Meta,
    pub plan: Plan,
    pub ran: Vec<Workload>,
    pub b1: Vec<b1::Row>,
    pub cost: Vec<b1::CostRow>,
    pub b2: Vec<b2::Row>,
    pub b3: Vec<b3::Row>,
    pub b4: Vec<b4::Row>,
    pub b6: Option<b6::Outcome>,
    pub b8: Vec<b8::Row>,
    pub b8_token: Option<b8::TokenCost>,
    /// Where B8's primary and replica ran.
    pub b8_setup: String,
    pub b7: Vec<b7::Row>,
    pub b9: Option<b9::Outcome>,
    pub b10: Option<b10::Outcome>,
    pub b11: Vec<b11::Row>,
    pub b12: Vec<b12::Outcome>,
    pub b13: Vec<b13::Row>,
    pub b14: Vec<b14::Row>,
    pub b15: Vec<b15::Row>,
    pub b16: Vec<b16::Row>,
}

pub fn run(opts: &Options) -> Result<Results> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let loadavg = setup::loadavg();
    let server = setup::start_server(opts.kind)?;
    // Before any other thread of ours exists: they inherit the client CPU.
    let pinning = setup::pin(server.pid(), opts.pin);
    let server_version = server.version();
    // Relative to the repository: no report records this machine's paths.
    let module_path = testkit::module_path();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(std::path::Path::new("/"));
    let module = match module_path.strip_prefix(repo) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => module_path.file_name().map_or_else(
            || "libhashlock.so".into(),
            |n| n.to_string_lossy().into_owned(),
        ),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let mut results = Results {
        meta: Meta {
            started,
            kind: opts.kind,
            server_version,
            module,
            pinning,
            commit: setup::commit(),
            loadavg,
            cpu_model: setup::cpu_model(),
            cpus_online: setup::cpus_online(),
            took: Duration::ZERO,
            workload_took: Vec::new(),
            rtt_busy: (Duration::ZERO, Duration::ZERO),
            rtt_idle: (Duration::ZERO, Duration::ZERO),
        },
        plan: opts.plan.clone(),
        ran: Workload::ALL
            .into_iter()
            .filter(|w| opts.only.is_empty() || opts.only.contains(w))
            .collect(),
        b1: Vec::new(),
        cost: Vec::new(),
        b2: Vec::new(),
        b3: Vec::new(),
        b4: Vec::new(),
        b6: None,
        b8: Vec::new(),
        b8_token: None,
        b8_setup: String::new(),
        b7: Vec::new(),
        b9: None,
        b10: None,
        b11: Vec::new(),
        b12: Vec::new(),
        b13: Vec::new(),
        b14: Vec::new(),
        b15: Vec::new(),
        b16: Vec::new(),
    };
    rt.block_on(run_workloads(server.port, opts, &mut results))?;
    results.meta.took = t0.elapsed();
    drop(server);
    Ok(results)
}

/// Progress: a bar on a terminal, one line per step otherwise.
struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(enabled: bool, steps: u64) -> Progress {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress { bar }
    }
    fn step(&self, what: &str) {
        match &self.bar {
            Some(b) => b.set_message(what.to_string()),
            None => eprintln!("bench: {what}"),
        }
    }
    fn done(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn steps(plan: &Plan, ran: &[Workload]) -> u64 {
    let mut n = 0;
    for w in ran {
        n += match w {
            Workload::B1 => {
                plan.b1_clients.len() * plan.b1_pipelines.len()
                    + plan.cost_rounds * Pairs::ALL.len()
            }
            Workload::B2 => plan.b2_rounds * b2::Renew::ALL.len(),
            Workload::B3 => {
                plan.b3_clients.len() * plan.b3_holds.len() * plan.b3_slices * Waiter::ALL.len()
            }
            Workload::B4 => plan.b4_leases.len() * Waiter::ALL.len(),
            Workload::B6 => 2,
            Workload::B8 => plan.b8_clients.len() * plan.b8_slices * b8::Variant::ALL.len() + 1,
            Workload::B7 => 3,
            Workload::B9 => 1,
            Workload::B10 => 1,
            Workload::B11 => 1,
            Workload::B12 => plan.b12_rounds * b12::Seller::ALL.len(),
            Workload::B13 => plan.b13_rounds * b13::Family::ALL.len(),
            Workload::B14 => b14::Side::ALL.len(),
            Workload::B15 => b15::Variant::ALL.len(),
            Workload::B16 => 2,
        };
    }
    n as u64
}

async fn run_workloads(port: u16, opts: &Options, r: &mut Results) -> Result<()> {
    let plan = &opts.plan;
    let progress = Progress::new(opts.progress, steps(plan, &r.ran));
    let mut admin: MultiplexedConnection = conn::connect(port).await?;
    scripts::load(&mut admin).await?;
    progress.step("calibrating: PING round trips");
    (r.meta.rtt_busy, r.meta.rtt_idle) = calibrate(&mut admin).await?;
    let ran = r.ran.clone();
    for w in ran {
        let started = Instant::now();
        match w {
            Workload::B1 => {
                progress.step("B1 server cost per command");
                r.cost = b1::cost(port, &mut admin, plan.cost_keys, plan.cost_rounds, || {
                    progress.done()
                })
                .await?;
                for &clients in &plan.b1_clients {
                    for &pipeline in &plan.b1_pipelines {
                        // Variants take turns, slice by slice.
                        let mut rows: Vec<Option<b1::Row>> =
                            Pairs::ALL.iter().map(|_| None).collect();
                        for slice in 0..plan.b1_slices {
                            for (i, variant) in Pairs::ALL.into_iter().enumerate() {
                                progress.step(&format!(
                                    "B1 {} · {clients} clients · pipeline {pipeline} · slice {}/{}",
                                    variant.label(),
                                    slice + 1,
                                    plan.b1_slices
                                ));
                                let config = b1::Config {
                                    variant,
                                    clients,
                                    pipeline,
                                };
                                let row = b1::run(
                                    port,
                                    &mut admin,
                                    plan.b1_keys,
                                    config,
                                    plan.b1_warmup,
                                    plan.b1_slice,
                                )
                                .await?;
                                match &mut rows[i] {
                                    Some(acc) => acc.merge(row)?,
                                    slot => *slot = Some(row),
                                }
                                progress.done();
                            }
                        }
                        r.b1.extend(rows.into_iter().flatten());
                    }
                }
            }
            Workload::B2 => {
                progress.step("B2 renew");
                r.b2 = b2::run(port, &mut admin, plan.b2_keys, plan.b2_rounds, || {
                    progress.done()
                })
                .await?;
            }
            Workload::B3 => {
                for &k in &plan.b3_clients {
                    for &hold in &plan.b3_holds {
                        let mut rows: Vec<Option<b3::Row>> =
                            Waiter::ALL.iter().map(|_| None).collect();
                        for slice in 0..plan.b3_slices {
                            for (i, waiter) in Waiter::ALL.into_iter().enumerate() {
                                progress.step(&format!(
                                    "B3 {} · K={k} · hold {} · slice {}/{}",
                                    waiter.label(),
                                    crate::timing::fmt_duration(hold),
                                    slice + 1,
                                    plan.b3_slices
                                ));
                                let config = b3::Config { waiter, k, hold };
                                let row = b3::run(
                                    port,
                                    &mut admin,
                                    config,
                                    plan.b3_warmup,
                                    plan.b3_slice,
                                )
                                .await?;
                                match &mut rows[i] {
                                    Some(acc) => acc.merge(row)?,
                                    slot => *slot = Some(row),
                                }
                                progress.done();
                            }
                        }
                        r.b3.extend(rows.into_iter().flatten());
                    }
                }
            }
            Workload::B4 => {
                for &(lease, trials) in &plan.b4_leases {
                    for waiter in Waiter::ALL {
                        progress.step(&format!(
                            "B4 {} · lease {} · {trials} crashes",
                            waiter.label(),
                            crate::timing::fmt_duration(lease)
                        ));
                        r.b4.push(b4::run(port, waiter, lease, plan.b4_waiters, trials).await?);
                        progress.done();
                    }
                }
            }
            Workload::B6 => {
                progress.step(&format!("B6 memory · {} locks", plan.b6_locks));
                r.b6 = Some(
                    b6::run(port, &mut admin, plan.b6_locks, plan.b6_settle, || {
                        progress.done()
                    })
                    .await?,
                );
            }
            Workload::B8 => {
                progress.step("B8 starting a primary and a replica");
                run_b8(port, &mut admin, opts, r, &progress).await?;
            }
            Workload::B7 => {
                let variants = [
                    (b7::Variant::Keepalive, plan.b7_keepalive_kills),
                    (b7::Variant::Lease(plan.b7_lease.0), plan.b7_lease.1),
                    (
                        b7::Variant::Watchdog(plan.b7_watchdog.0),
                        plan.b7_watchdog.1,
                    ),
                ];
                for (i, (variant, kills)) in variants.into_iter().enumerate() {
                    progress.step(&format!("B7 {} · {kills} kills", variant.label()));
                    r.b7.push(
                        b7::run(
                            port,
                            &opts.holder_exe,
                            &mut admin,
                            variant,
                            plan.b7_waiters,
                            kills,
                            0xb7 + i as u64,
                        )
                        .await?,
                    );
                    progress.done();
                }
            }
            Workload::B9 => {
                progress.step(&format!(
                    "B9 KEEPALIVE at scale · {} tied locks",
                    plan.b9.locks
                ));
                let server_cpu = r.meta.pinning.cpus.map(|(server, _)| server);
                r.b9 = Some(b9::run(opts.kind, server_cpu, &plan.b9)?);
                progress.done();
            }
            Workload::B10 => {
                progress.step(&format!(
                    "B10 {} queued locks sharing one deadline",
                    plan.b10.keys
                ));
                let server_cpu = r.meta.pinning.cpus.map(|(server, _)| server);
                r.b10 = Some(b10::run(opts.kind, server_cpu, &plan.b10)?);
                progress.done();
            }
            Workload::B11 => {
                r.b11 = b11::run(
                    port,
                    plan.b11_each,
                    opts.clients_before.as_deref(),
                    |what| progress.step(what),
                )?;
                progress.done();
            }
            Workload::B12 => {
                r.b12 = b12::run(port, &mut admin, plan.b12, plan.b12_rounds, |what| {
                    progress.done();
                    progress.step(what)
                })
                .await?;
                progress.done();
            }
            Workload::B13 => {
                r.b13 = b13::run(port, &mut admin, plan.b13_keys, plan.b13_rounds, |what| {
                    progress.done();
                    progress.step(what)
                })
                .await?;
                progress.done();
            }
            Workload::B14 => {
                for side in b14::Side::ALL {
                    progress.step(&format!(
                        "B14 writer wait under {} readers · {}",
                        plan.b14.readers,
                        side.label()
                    ));
                    r.b14.push(b14::run(port, side, plan.b14).await?);
                    progress.done();
                }
            }
            Workload::B15 => {
                for variant in b15::Variant::ALL {
                    progress.step(&format!(
                        "B15 {} keys of {} · {} clients · {}",
                        plan.b15.set,
                        plan.b15.pool,
                        plan.b15.clients,
                        variant.label()
                    ));
                    r.b15
                        .push(b15::run(port, variant, plan.b15, plan.b15_window).await?);
                    progress.done();
                }
            }
            Workload::B16 => {
                let variants = [
                    (b16::Variant::Hashlock, plan.b16_kills),
                    (
                        b16::Variant::Watchdog(plan.b16_watchdog.0),
                        plan.b16_watchdog.1,
                    ),
                ];
                for (i, (variant, kills)) in variants.into_iter().enumerate() {
                    progress.step(&format!("B16 {} · {kills} leader kills", variant.label()));
                    r.b16.push(
                        b16::run(
                            port,
                            &opts.holder_exe,
                            &mut admin,
                            variant,
                            plan.b16_candidates,
                            kills,
                            0xb16 + i as u64,
                        )
                        .await?,
                    );
                    progress.done();
                }
            }
        }
        r.meta.workload_took.push((w, started.elapsed()));
    }
    progress.finish();
    Ok(())
}

/// B8: pairs against a primary with one replica (started here, pinned like
/// the main server, the replica beside the client), then TOKEN's cost on
/// the main server.
async fn run_b8(
    port: u16,
    admin: &mut MultiplexedConnection,
    opts: &Options,
    r: &mut Results,
    progress: &Progress,
) -> Result<()> {
    let plan = &opts.plan;
    let cpus = r.meta.pinning.cpus;
    let pair = b8::Pair::start(opts.kind, cpus)?;
    r.b8_setup = match cpus {
        Some((s, c)) => format!(
            "primary on CPU {s} (as the main server), replica on CPU {c} (with the client), both `io-threads 1`, loopback replication"
        ),
        None => "primary and replica not pinned, both `io-threads 1`, loopback replication".into(),
    };
    let mut primary_admin = conn::connect(pair.primary.port).await?;
    scripts::load(&mut primary_admin).await?;
    for &clients in &plan.b8_clients {
        let mut rows: Vec<Option<b8::Row>> = b8::Variant::ALL.iter().map(|_| None).collect();
        for slice in 0..plan.b8_slices {
            for (i, variant) in b8::Variant::ALL.into_iter().enumerate() {
                progress.step(&format!(
                    "B8 {} · {clients} clients · slice {}/{}",
                    variant.label(),
                    slice + 1,
                    plan.b8_slices
                ));
                let config = b8::Config { variant, clients };
                let row = b8::run(
                    pair.primary.port,
                    &mut primary_admin,
                    config,
                    plan.b8_warmup,
                    plan.b8_slice,
                )
                .await?;
                match &mut rows[i] {
                    Some(acc) => acc.merge(row)?,
                    slot => *slot = Some(row),
                }
                progress.done();
            }
        }
        r.b8.extend(rows.into_iter().flatten());
    }
    drop(pair);
    progress.step("B8 TOKEN cost per acquire");
    r.b8_token = Some(b8::token_cost(port, admin, plan.b8_token_keys, plan.b8_token_rounds).await?);
    progress.done();
    Ok(())
}

/// PING round trips on one connection: back to back, and each after 2 ms
/// of idleness (both CPUs may have gone idle: what a lock hand-off between
/// otherwise idle clients pays). Returns (p50, p99) of each.
async fn calibrate(
    conn: &mut MultiplexedConnection,
) -> Result<((Duration, Duration), (Duration, Duration))> {
    use crate::timing::{histogram, quantile, record};
    let ping = redis::cmd("PING");
    let mut busy = histogram();
    for i in 0..2200 {
        let t = Instant::now();
        conn::call(conn, &ping).await?;
        if i >= 200 {
            record(&mut busy, t.elapsed());
        }
    }
    let mut idle = histogram();
    for _ in 0..300 {
        crate::timing::sleep(Duration::from_millis(2)).await;
        let t = Instant::now();
        conn::call(conn, &ping).await?;
        record(&mut idle, t.elapsed());
    }
    Ok((
        (quantile(&busy, 0.5), quantile(&busy, 0.99)),
        (quantile(&idle, 0.5), quantile(&idle, 0.99)),
    ))
}
