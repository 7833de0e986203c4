//! B8 surviving failover: what a replica-acknowledged grant costs, and what
//! a fencing token costs.
//!
//! Pairs: C clients loop acquire → release on their own fresh keys against
//! one primary with one replica (started here for B8), three ways:
//! - plain hashlock: `LOCK.ACQUIRE k o PX 30000`, `LOCK.RELEASE k o`;
//! - `LOCK.ACQUIRE k o PX 30000 REPLICAS 1 1000`, then `LOCK.RELEASE k o`;
//! - the Redisson way: the acquire script and `WAIT 1 1000` in one
//!   pipeline (Redisson's synced eval), then the release script.
//!
//! Only the acquire is acknowledged in both safe variants (LOCK.RELEASE
//! takes no REPLICAS; a lost release cannot double-grant).
//!
//! Token cost: one client, pipeline 16, N free locks acquired with and
//! without TOKEN (rounds interleaved), `INFO commandstats` µs per
//! LOCK.ACQUIRE, on the standalone server of the other workloads. A lock's
//! counter lives as long as its name is used (no TTL, as RFencedLock's), so
//! the steady state is a counter that exists; the first TOKEN acquire of a
//! name also creates it, measured separately.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::Value;
use redis::aio::MultiplexedConnection;
use testkit::{Kind, Server};

use super::contender::owner;
use super::pairs::LEASE_MS;
use crate::conn::{self, CmdStat, Delta, Snapshot, expect_int, expect_nil};
use crate::scripts::{self, SCRIPTS};
use crate::timing;

/// `REPLICAS 1 <ms>` / `WAIT 1 <ms>`.
pub const ACK_MS: &str = "1000";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Plain,
    Replicas,
    ScriptWait,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Plain, Variant::Replicas, Variant::ScriptWait];

    pub fn label(self) -> &'static str {
        match self {
            Variant::Plain => "hashlock, no acknowledgement",
            Variant::Replicas => "hashlock `REPLICAS 1`",
            Variant::ScriptWait => "Redisson way: script + `WAIT 1` pipelined",
        }
    }

    /// commandstats names of what the variant sends.
    pub fn stats(self) -> &'static [&'static str] {
        match self {
            Variant::Plain | Variant::Replicas => &["lock.acquire", "lock.release"],
            Variant::ScriptWait => &["evalsha", "wait"],
        }
    }
}

/// A primary with one replica, for B8 only.
pub struct Pair {
    pub primary: Server,
    pub replica: Server,
}

impl Pair {
    /// Starts both (`io-threads 1`, no persistence) and waits until the
    /// primary streams to the replica. `cpus`: (primary, replica) to pin
    /// them to, if pinning is on.
    pub fn start(kind: Kind, cpus: Option<(usize, usize)>) -> Result<Pair> {
        let (primary, replica) = std::panic::catch_unwind(|| {
            let p = Server::builder(kind).config("io-threads", "1").start();
            let r = Server::builder(kind).config("io-threads", "1").start();
            r.replica_of(&p);
            (p, r)
        })
        .map_err(|_| anyhow::anyhow!("starting the B8 primary and replica failed"))?;
        if let Some((p, r)) = cpus {
            crate::setup::pin_process(primary.pid(), p)?;
            crate::setup::pin_process(replica.pid(), r)?;
        }
        Ok(Pair { primary, replica })
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub variant: Variant,
    pub clients: usize,
}

pub struct Row {
    pub config: Config,
    pub pairs: u64,
    pub elapsed: Duration,
    /// Acquire sent → release answered.
    pub pair: Histogram<u64>,
    /// Acquire sent → acquire (and WAIT) answered.
    pub acquire: Histogram<u64>,
    pub server: Delta,
    pub client_busy: f64,
}

impl Row {
    pub fn merge(&mut self, other: Row) -> Result<()> {
        let busy = self.client_busy * self.elapsed.as_secs_f64()
            + other.client_busy * other.elapsed.as_secs_f64();
        self.pairs += other.pairs;
        self.elapsed += other.elapsed;
        self.client_busy = busy / self.elapsed.as_secs_f64().max(1e-9);
        for (mine, theirs) in [
            (&mut self.pair, &other.pair),
            (&mut self.acquire, &other.acquire),
        ] {
            mine.add(theirs)
                .map_err(|e| anyhow::anyhow!("merging histograms: {e:?}"))?;
        }
        self.server.merge(&other.server);
        Ok(())
    }

    pub fn pairs_per_sec(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Primary µs per command of the variant (acquire, release, WAIT).
    pub fn server_us_per_call(&self) -> Option<f64> {
        self.server.stat(self.config.variant.stats()).us_per_call()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measure,
    Stop,
}

fn wait_acked(v: &Value) -> Result<()> {
    match v {
        Value::Int(n) if *n >= 1 => Ok(()),
        other => bail!("WAIT 1: no replica acknowledged in time: {other:?}"),
    }
}

async fn acquire(
    conn: &mut MultiplexedConnection,
    v: Variant,
    key: &str,
    owner: &str,
) -> Result<()> {
    match v {
        Variant::Plain | Variant::Replicas => {
            let mut c = redis::cmd("LOCK.ACQUIRE");
            c.arg(key).arg(owner).arg("PX").arg(LEASE_MS);
            if v == Variant::Replicas {
                c.arg("REPLICAS").arg(1).arg(ACK_MS);
            }
            expect_int(&conn::call(conn, &c).await?, 1, "LOCK.ACQUIRE")
        }
        Variant::ScriptWait => {
            let mut p = redis::Pipeline::with_capacity(2);
            p.add_command(SCRIPTS.acquire.evalsha(&[key], &[LEASE_MS, owner]));
            p.cmd("WAIT").arg(1).arg(ACK_MS);
            let r = conn::pipeline(conn, &p).await?;
            expect_nil(&r[0], "Redisson acquire script")?;
            wait_acked(&r[1])
        }
    }
}

async fn release(
    conn: &mut MultiplexedConnection,
    v: Variant,
    key: &str,
    owner: &str,
) -> Result<()> {
    match v {
        Variant::Plain | Variant::Replicas => {
            let mut c = redis::cmd("LOCK.RELEASE");
            c.arg(key).arg(owner);
            expect_int(&conn::call(conn, &c).await?, 0, "LOCK.RELEASE")
        }
        Variant::ScriptWait => {
            let c = SCRIPTS.release.evalsha(
                &[key, &scripts::channel(key)],
                &[scripts::UNLOCK_MESSAGE, LEASE_MS, owner],
            );
            expect_int(&conn::call(conn, &c).await?, 1, "Redisson release script")
        }
    }
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    config: Config,
    warmup: Duration,
    measure: Duration,
) -> Result<Row> {
    let Config { variant, clients } = config;
    let label = format!("b8:{variant:?}:{clients}:{:?}", Instant::now());
    let mut conns = try_join_all((0..clients).map(|_| conn::connect(port))).await?;
    let phase = Cell::new(Phase::Warmup);
    let pairs = Cell::new(0u64);
    let hists = RefCell::new((timing::histogram(), timing::histogram()));
    let workers = try_join_all(conns.iter_mut().enumerate().map(|(c, conn)| {
        let owner = owner(&label, c + 1);
        let (phase, pairs, hists, label) = (&phase, &pairs, &hists, &label);
        async move {
            let mut n = 0u64;
            while phase.get() != Phase::Stop {
                let key = format!("{label}:{c}:{n}");
                n += 1;
                let measuring = phase.get() == Phase::Measure;
                let t0 = Instant::now();
                acquire(conn, variant, &key, &owner).await?;
                let t1 = Instant::now();
                release(conn, variant, &key, &owner).await?;
                let t2 = Instant::now();
                if measuring {
                    pairs.set(pairs.get() + 1);
                    let (pair, acq) = &mut *hists.borrow_mut();
                    timing::record(pair, t2 - t0);
                    timing::record(acq, t1 - t0);
                }
            }
            anyhow::Ok(())
        }
    }));
    let conductor = async {
        timing::sleep(warmup).await;
        let before = Snapshot::take(admin).await?;
        let cpu = timing::process_cpu();
        phase.set(Phase::Measure);
        timing::sleep(measure).await;
        // A pair slower than the whole slice (a replica stalled by a busy
        // machine) would leave the row empty: the slice lasts until one
        // measured pair is done (the rate is over the slice as it ran).
        while pairs.get() == 0 {
            timing::sleep(Duration::from_millis(5)).await;
        }
        let cpu = timing::process_cpu().saturating_sub(cpu);
        let after = Snapshot::take(admin).await?;
        phase.set(Phase::Stop);
        anyhow::Ok((before, after, cpu))
    };
    let limit = warmup + measure + Duration::from_secs(30);
    let ((before, after, cpu), _) =
        tokio::time::timeout(limit, async { tokio::try_join!(conductor, workers) })
            .await
            .with_context(|| format!("B8 {} did not finish within {limit:?}", variant.label()))??;
    let elapsed = after.at.saturating_duration_since(before.at);
    let (pair, acquire) = hists.into_inner();
    Ok(Row {
        config,
        pairs: pairs.get(),
        elapsed,
        pair,
        acquire,
        client_busy: cpu.as_secs_f64() / elapsed.as_secs_f64().max(1e-9),
        server: before.delta(&after),
    })
}

/// Server µs per LOCK.ACQUIRE of a free lock, without and with TOKEN.
pub struct TokenCost {
    pub plain: CmdStat,
    /// With TOKEN, the counter exists (every acquisition but a name's first).
    pub token: CmdStat,
    /// With TOKEN, the first acquisition of each name (creates the counter).
    pub token_first: CmdStat,
}

impl TokenCost {
    pub fn ratio(&self) -> Option<f64> {
        ratio_of(self.token, self.plain)
    }
    pub fn first_ratio(&self) -> Option<f64> {
        ratio_of(self.token_first, self.plain)
    }
}

fn ratio_of(a: CmdStat, b: CmdStat) -> Option<f64> {
    let (a, b) = (a.us_per_call()?, b.us_per_call()?);
    (b > 0.0).then(|| a / b)
}

const COST_PIPELINE: usize = 16;

/// Acquires `keys` fresh keys (pipelined) with or without TOKEN, then
/// releases them; returns the acquires' commandstats delta.
async fn token_phase(
    conn: &mut MultiplexedConnection,
    admin: &mut MultiplexedConnection,
    names: &[String],
    owner: &str,
    token: bool,
) -> Result<CmdStat> {
    let before = Snapshot::take(admin).await?;
    for chunk in names.chunks(COST_PIPELINE) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            let c = p
                .cmd("LOCK.ACQUIRE")
                .arg(k)
                .arg(owner)
                .arg("PX")
                .arg(LEASE_MS);
            if token {
                c.arg("TOKEN");
            }
        }
        for r in conn::pipeline(conn, &p).await? {
            match (token, &r) {
                (false, Value::Int(1)) => {}
                (true, Value::Array(a)) if a.len() == 2 && a[0] == Value::Int(1) => {}
                _ => bail!("LOCK.ACQUIRE (TOKEN: {token}) answered {r:?}"),
            }
        }
    }
    let after = Snapshot::take(admin).await?;
    for chunk in names.chunks(COST_PIPELINE) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            p.cmd("LOCK.RELEASE").arg(k).arg(owner);
        }
        for r in conn::pipeline(conn, &p).await? {
            expect_int(&r, 0, "LOCK.RELEASE")?;
        }
    }
    Ok(before.delta(&after).stat(&["lock.acquire"]))
}

pub async fn token_cost(
    port: u16,
    admin: &mut MultiplexedConnection,
    keys: usize,
    rounds: usize,
) -> Result<TokenCost> {
    let mut conn = conn::connect(port).await?;
    let names: Vec<String> = (0..keys).map(|i| format!("b8tok:{i:07}")).collect();
    let mut cost = TokenCost {
        plain: CmdStat::default(),
        token: CmdStat::default(),
        token_first: CmdStat::default(),
    };
    // First acquisitions: every counter is created here.
    let owner0 = owner("b8tok:first", 1);
    cost.token_first = token_phase(&mut conn, admin, &names, &owner0, true).await?;
    for round in 0..rounds {
        // Alternate which goes first: a drifting machine hits both alike.
        for token in if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        } {
            let owner = owner(&format!("b8tok:{round}:{token}"), 1);
            let s = token_phase(&mut conn, admin, &names, &owner, token).await?;
            let acc = if token {
                &mut cost.token
            } else {
                &mut cost.plain
            };
            acc.calls += s.calls;
            acc.usec += s.usec;
        }
    }
    // The counters stay (as RFencedLock's do); remove them for later runs.
    let mut p = redis::Pipeline::new();
    for chunk in names.chunks(500) {
        let counters: Vec<String> = chunk
            .iter()
            .map(|k| format!("redisson_lock_token:{{{k}}}"))
            .collect();
        p.cmd("DEL").arg(counters);
    }
    conn::pipeline(&mut conn, &p).await?;
    Ok(cost)
}
