//! B1 uncontended acquire → release pairs.
//!
//! Throughput: C clients, each on its own connection and its own slice of
//! the key space; with pipeline depth P a client sends P acquires (P
//! different keys) in one round trip, then the P releases in the next.
//! Cost: one client, pipeline 16, acquire N fresh keys / re-enter them /
//! release them, each phase its own commandstats window, so the server µs
//! of an acquire is not mixed with a release (both are EVALSHA for Redisson).

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;

use super::contender::owner;
use super::pairs::Pairs;
use crate::conn::{self, CmdStat, Delta, Snapshot};
use crate::timing;

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub variant: Pairs,
    pub clients: usize,
    pub pipeline: usize,
}

pub struct Row {
    pub config: Config,
    pub pairs: u64,
    pub elapsed: Duration,
    /// Client-side latency of one round trip (P commands).
    pub round_trip: Histogram<u64>,
    pub server: Delta,
    /// Share of one core the benchmark client used (all its threads).
    pub client_busy: f64,
}

impl Row {
    /// Adds a later slice of the same configuration.
    pub fn merge(&mut self, other: Row) -> Result<()> {
        let busy = self.client_busy * self.elapsed.as_secs_f64()
            + other.client_busy * other.elapsed.as_secs_f64();
        self.pairs += other.pairs;
        self.elapsed += other.elapsed;
        self.client_busy = busy / self.elapsed.as_secs_f64().max(1e-9);
        self.round_trip
            .add(&other.round_trip)
            .map_err(|e| anyhow::anyhow!("merging histograms: {e:?}"))?;
        self.server.merge(&other.server);
        Ok(())
    }

    pub fn pairs_per_sec(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    /// Server µs per call over acquire and release together.
    pub fn server_us_per_call(&self) -> Option<f64> {
        self.server.stat(&self.config.variant.stats()).us_per_call()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measure,
    Stop,
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    keys: usize,
    config: Config,
    warmup: Duration,
    measure: Duration,
) -> Result<Row> {
    let Config {
        variant,
        clients,
        pipeline,
    } = config;
    let label = format!("b1:{variant:?}:{clients}:{pipeline}:{:?}", Instant::now());
    let mut conns = try_join_all((0..clients).map(|_| conn::connect(port))).await?;
    let phase = Cell::new(Phase::Warmup);
    let pairs = Cell::new(0u64);
    let hist = std::cell::RefCell::new(timing::histogram());
    let stride = (keys / clients).max(pipeline);

    let workers = try_join_all(conns.iter_mut().enumerate().map(|(c, conn)| {
        let owner = owner(&label, c + 1);
        let (phase, pairs, hist) = (&phase, &pairs, &hist);
        async move {
            let mut next = 0usize;
            let mut batch: Vec<String> = Vec::with_capacity(pipeline);
            while phase.get() != Phase::Stop {
                batch.clear();
                for _ in 0..pipeline {
                    batch.push(format!("b1:{:07}", c * stride + next % stride));
                    next += 1;
                }
                let measuring = phase.get() == Phase::Measure;
                let mut p = redis::Pipeline::with_capacity(pipeline);
                for k in &batch {
                    variant.acquire(&mut p, k, &owner);
                }
                let t0 = Instant::now();
                let replies = conn::pipeline(conn, &p).await?;
                let t1 = Instant::now();
                for v in &replies {
                    variant.check_acquire(v, 1)?;
                }
                let mut p = redis::Pipeline::with_capacity(pipeline);
                for k in &batch {
                    variant.release(&mut p, k, &owner);
                }
                let t2 = Instant::now();
                let replies = conn::pipeline(conn, &p).await?;
                let t3 = Instant::now();
                for v in &replies {
                    variant.check_release(v, 0)?;
                }
                if measuring {
                    pairs.set(pairs.get() + pipeline as u64);
                    let mut h = hist.borrow_mut();
                    timing::record(&mut h, t1 - t0);
                    timing::record(&mut h, t3 - t2);
                }
            }
            anyhow::Ok(())
        }
    }));
    let conductor = async {
        tokio::time::sleep(warmup).await;
        let before = Snapshot::take(admin).await?;
        let cpu = timing::process_cpu();
        phase.set(Phase::Measure);
        tokio::time::sleep(measure).await;
        let cpu = timing::process_cpu().saturating_sub(cpu);
        let after = Snapshot::take(admin).await?;
        phase.set(Phase::Stop);
        anyhow::Ok((before, after, cpu))
    };
    let limit = warmup + measure + Duration::from_secs(30);
    let ((before, after, cpu), _) =
        tokio::time::timeout(limit, async { tokio::try_join!(conductor, workers) })
            .await
            .with_context(|| format!("B1 {} did not finish within {limit:?}", variant.label()))??;
    let elapsed = after.at.saturating_duration_since(before.at);
    Ok(Row {
        config,
        pairs: pairs.get(),
        elapsed,
        client_busy: cpu.as_secs_f64() / elapsed.as_secs_f64().max(1e-9),
        round_trip: hist.into_inner(),
        server: before.delta(&after),
    })
}

/// Server µs per call of one command kind, and the client's rate for it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub stat: CmdStat,
    pub elapsed: Duration,
}

impl Cost {
    pub fn add(&mut self, stat: CmdStat, elapsed: Duration) {
        self.stat.calls += stat.calls;
        self.stat.usec += stat.usec;
        self.elapsed += elapsed;
    }
    pub fn us_per_call(&self) -> Option<f64> {
        self.stat.us_per_call()
    }
    pub fn per_sec(&self) -> f64 {
        self.stat.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub struct CostRow {
    pub variant: Pairs,
    pub acquire_new: Cost,
    /// None for SET NX (not re-entrant).
    pub acquire_reentrant: Option<Cost>,
    pub release: Cost,
}

/// Depth of the cost measurement's pipeline (the reference numbers were measured at 16).
pub const COST_PIPELINE: usize = 16;

/// Runs `rounds` rounds; in each, every variant in turn does its phases over
/// `keys` keys (interleaved, so drift hits all variants alike).
pub async fn cost(
    port: u16,
    admin: &mut MultiplexedConnection,
    keys: usize,
    rounds: usize,
    mut progress: impl FnMut(),
) -> Result<Vec<CostRow>> {
    let mut conn = conn::connect(port).await?;
    let mut rows: Vec<CostRow> = Pairs::ALL
        .iter()
        .map(|&variant| CostRow {
            variant,
            acquire_new: Cost::default(),
            acquire_reentrant: variant.reentrant().then(Cost::default),
            release: Cost::default(),
        })
        .collect();
    let names: Vec<String> = (0..keys).map(|i| format!("cost:{i:07}")).collect();
    for round in 0..rounds {
        for row in rows.iter_mut() {
            let v = row.variant;
            let owner = owner(&format!("cost:{v:?}:{round}"), 1);
            // Acquire, fresh keys.
            let (stat, t) = phase(
                &mut conn,
                admin,
                &names,
                v.acquire_stat(),
                |p, k| v.acquire(p, k, &owner),
                |r| v.check_acquire(r, 1),
            )
            .await?;
            row.acquire_new.add(stat, t);
            if let Some(cost) = row.acquire_reentrant.as_mut() {
                let (stat, t) = phase(
                    &mut conn,
                    admin,
                    &names,
                    v.acquire_stat(),
                    |p, k| v.acquire(p, k, &owner),
                    |r| v.check_acquire(r, 2),
                )
                .await?;
                cost.add(stat, t);
                // Back to one hold (not measured: a release that keeps the lock).
                phase(
                    &mut conn,
                    admin,
                    &names,
                    v.release_stat(),
                    |p, k| v.release(p, k, &owner),
                    |r| v.check_release(r, 1),
                )
                .await?;
            }
            let (stat, t) = phase(
                &mut conn,
                admin,
                &names,
                v.release_stat(),
                |p, k| v.release(p, k, &owner),
                |r| v.check_release(r, 0),
            )
            .await?;
            row.release.add(stat, t);
            progress();
        }
    }
    Ok(rows)
}

/// One command over every key, pipelined; the commandstats delta of `stat`
/// and the time it took.
async fn phase(
    conn: &mut MultiplexedConnection,
    admin: &mut MultiplexedConnection,
    keys: &[String],
    stat: &str,
    add: impl Fn(&mut redis::Pipeline, &str),
    check: impl Fn(&redis::Value) -> Result<()>,
) -> Result<(CmdStat, Duration)> {
    let before = Snapshot::take(admin).await?;
    let start = Instant::now();
    for chunk in keys.chunks(COST_PIPELINE) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            add(&mut p, k);
        }
        for r in conn::pipeline(conn, &p).await? {
            check(&r)?;
        }
    }
    let elapsed = start.elapsed();
    let after = Snapshot::take(admin).await?;
    Ok((before.delta(&after).stat(&[stat]), elapsed))
}
