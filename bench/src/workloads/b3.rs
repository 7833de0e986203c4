//! B3 contended hand-off: K clients loop lock → hold → unlock on ONE key.
//! Measured: acquisitions/s, hand-off latency (a release is sent → the next
//! acquire returns, whoever gets it), wait per lock() call, server commands
//! per acquisition (total_commands_processed, script-internal calls
//! included), client requests per acquisition, Jain's index.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;

use super::contender::{Contender, MAX_WAIT, Waiter, owner};
use crate::conn::{Delta, Snapshot};
use crate::timing;

/// Long enough that no lease lapses during a run (B4 covers lapses).
const LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub waiter: Waiter,
    pub k: usize,
    pub hold: Duration,
}

pub struct Row {
    pub config: Config,
    pub acquisitions: u64,
    pub elapsed: Duration,
    pub handoff: Histogram<u64>,
    pub wait: Histogram<u64>,
    pub server: Delta,
    pub client_requests: u64,
    pub per_client: Vec<u64>,
    /// Time the holders actually spent holding (a sleep ends a little
    /// after its deadline: the machine's wake-up latency).
    pub hold_total: Duration,
}

impl Row {
    /// Adds a later slice of the same configuration (client i of every
    /// slice counts as the same client for fairness).
    pub fn merge(&mut self, other: Row) -> Result<()> {
        let hist = |e| anyhow::anyhow!("merging histograms: {e:?}");
        self.acquisitions += other.acquisitions;
        self.elapsed += other.elapsed;
        self.handoff.add(&other.handoff).map_err(hist)?;
        self.wait.add(&other.wait).map_err(hist)?;
        self.server.merge(&other.server);
        self.client_requests += other.client_requests;
        self.hold_total += other.hold_total;
        for (mine, theirs) in self.per_client.iter_mut().zip(other.per_client) {
            *mine += theirs;
        }
        Ok(())
    }

    pub fn per_sec(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn server_cmds_per_acq(&self) -> f64 {
        self.server.total_commands as f64 / self.acquisitions.max(1) as f64
    }
    pub fn client_reqs_per_acq(&self) -> f64 {
        self.client_requests as f64 / self.acquisitions.max(1) as f64
    }
    /// Mean time a holder actually held the lock.
    pub fn actual_hold(&self) -> Duration {
        self.hold_total / self.acquisitions.max(1) as u32
    }
    pub fn jain(&self) -> f64 {
        timing::jain(&self.per_client)
    }
    /// The bound: (K−1)·(hold + hand-off p99) + 5 ms.
    pub fn worst_wait_bound(&self) -> Duration {
        let per = self.config.hold + timing::quantile(&self.handoff, 0.99);
        per * (self.config.k as u32 - 1) + Duration::from_millis(5)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measure,
    Stop,
}

/// What the K client loops share (one thread: Cell/RefCell suffice).
struct Shared {
    phase: Cell<Phase>,
    last_release: Cell<Option<Instant>>,
    handoff: RefCell<Histogram<u64>>,
    wait: RefCell<Histogram<u64>>,
    per_client: RefCell<Vec<u64>>,
    requests: Cell<u64>,
    hold_total: Cell<Duration>,
    /// When the measured window opened and closed.
    measure_from: Cell<Option<Instant>>,
    stop_at: Cell<Option<Instant>>,
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    config: Config,
    warmup: Duration,
    measure: Duration,
) -> Result<Row> {
    let Config { waiter, k, hold } = config;
    let key = format!("b3:{}:k{k}:h{}", waiter.slug(), hold.as_micros());
    let run_label = format!("{key}:{:?}", Instant::now());
    let mut contenders = try_join_all(
        (0..k).map(|i| Contender::connect(port, waiter, &key, owner(&run_label, i + 1), LEASE)),
    )
    .await?;

    let shared = Shared {
        phase: Cell::new(Phase::Warmup),
        last_release: Cell::new(None),
        handoff: RefCell::new(timing::histogram()),
        wait: RefCell::new(timing::histogram()),
        per_client: RefCell::new(vec![0; k]),
        requests: Cell::new(0),
        hold_total: Cell::new(Duration::ZERO),
        measure_from: Cell::new(None),
        stop_at: Cell::new(None),
    };

    let clients = try_join_all(
        contenders
            .iter_mut()
            .enumerate()
            .map(|(i, c)| client_loop(i, c, &shared, hold)),
    );
    let conductor = async {
        tokio::time::sleep(warmup).await;
        let before = Snapshot::take(admin).await?;
        shared.measure_from.set(Some(Instant::now()));
        shared.phase.set(Phase::Measure);
        tokio::time::sleep(measure).await;
        let after = Snapshot::take(admin).await?;
        shared.stop_at.set(Some(Instant::now()));
        shared.phase.set(Phase::Stop);
        anyhow::Ok((before, after))
    };
    let limit = warmup + measure + MAX_WAIT;
    let (window, _) = tokio::time::timeout(limit, async { tokio::try_join!(conductor, clients) })
        .await
        .with_context(|| {
            format!(
                "B3 {} K={k} did not finish within {limit:?}",
                waiter.label()
            )
        })??;
    for c in &mut contenders {
        c.finish().await?;
    }
    let (before, after) = window;
    let per_client = shared.per_client.into_inner();
    Ok(Row {
        config,
        acquisitions: per_client.iter().sum(),
        elapsed: after.at.saturating_duration_since(before.at),
        handoff: shared.handoff.into_inner(),
        wait: shared.wait.into_inner(),
        server: before.delta(&after),
        client_requests: shared.requests.get(),
        per_client,
        hold_total: shared.hold_total.get(),
    })
}

async fn client_loop(i: usize, c: &mut Contender, s: &Shared, hold: Duration) -> Result<()> {
    while s.phase.get() != Phase::Stop {
        let want = Instant::now();
        let requests = c.lock().await?;
        let got = Instant::now();
        let released = s.last_release.take();
        // A wait counts if it overlaps the window, even when it only ends
        // after it (a client starved through the whole window ends its
        // wait during the drain: that is the worst wait, not a non-event).
        let overlaps = s.measure_from.get().is_some_and(|from| got >= from)
            && s.stop_at.get().is_none_or(|stop| want < stop);
        if overlaps {
            timing::record(&mut s.wait.borrow_mut(), got - want);
        }
        if s.phase.get() == Phase::Measure {
            s.per_client.borrow_mut()[i] += 1;
            s.requests.set(s.requests.get() + requests);
            if let Some(r) = released {
                timing::record(&mut s.handoff.borrow_mut(), got - r);
            }
        }
        // The critical section: the holder waits `hold` (for its database,
        // say) with the thread idle. Spinning instead would make the
        // host preempt the busy vCPU and add stalls to every variant.
        let held = Instant::now();
        timing::sleep(hold).await;
        if s.phase.get() == Phase::Measure {
            s.hold_total.set(s.hold_total.get() + held.elapsed());
        }
        s.last_release.set(Some(Instant::now()));
        let requests = c.unlock().await?;
        if s.phase.get() == Phase::Measure {
            s.requests.set(s.requests.get() + requests);
        }
    }
    Ok(())
}
