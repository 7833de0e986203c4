//! B7 killed holder: the holder is a PROCESS of its own (this binary as
//! `__holder`) that takes the lock, and is killed with SIGKILL while
//! `waiters` clients wait for it. Measured: the kill → the first waiter's
//! acquisition, over many kills, for
//! - hashlock KEEPALIVE: the lock is released when the connection closes;
//!   waiters use the recommended `LOCK.ACQUIRE key * KEEPALIVE BLOCK ms`;
//! - hashlock with a plain lease (as B4): waiters (BLOCK) get it at the
//!   lease deadline; the holder dies at a uniformly random moment of its
//!   lease, so the wait is the rest of the lease;
//! - a Redisson-style client with a watchdog: its lease renewed every third
//!   of it from inside the holder process (which dies with it); waiters wait
//!   Redisson's way (EVAL + pub/sub, sleeping up to the PTTL). Measured with
//!   a short lease; Redisson's default is 30 s renewed every 10 s.
//!
//! A grant before the kill would be a double grant: counted ("early").

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;

use super::contender::{Contender, MAX_WAIT, Waiter, owner};
use super::holder::{self, Mode};
use crate::conn;
use crate::timing;
use testkit::rng::Rng;

/// Waiters' own lease once they get the lock (they release at once).
const WAITER_LEASE: Duration = Duration::from_secs(30);
/// KEEPALIVE holder's lease: far longer than any measured delay, so a
/// release by lease could never pass for a release by disconnect.
const KEEPALIVE_LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Keepalive,
    Lease(Duration),
    Watchdog(Duration),
}

impl Variant {
    pub fn label(self) -> String {
        match self {
            Variant::Keepalive => "hashlock KEEPALIVE (waiters: KEEPALIVE BLOCK)".into(),
            Variant::Lease(l) => format!(
                "hashlock plain lease {} (waiters: BLOCK), killed at a random moment of it",
                timing::fmt_duration(l)
            ),
            Variant::Watchdog(l) => format!(
                "Redisson-style watchdog: lease {} renewed every {} (Redisson default: 30 s / 10 s)",
                timing::fmt_duration(l),
                timing::fmt_duration(l / 3)
            ),
        }
    }

    fn mode(self) -> Mode {
        match self {
            Variant::Keepalive => Mode::Keepalive,
            Variant::Lease(_) => Mode::Lease,
            Variant::Watchdog(_) => Mode::Watchdog,
        }
    }

    fn lease(self) -> Duration {
        match self {
            Variant::Keepalive => KEEPALIVE_LEASE,
            Variant::Lease(l) | Variant::Watchdog(l) => l,
        }
    }

    fn waiter(self) -> Waiter {
        match self {
            Variant::Keepalive => Waiter::HashlockKeepalive,
            Variant::Lease(_) => Waiter::Hashlock,
            Variant::Watchdog(_) => Waiter::Redisson,
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::Keepalive => "keepalive",
            Variant::Lease(_) => "lease",
            Variant::Watchdog(_) => "watchdog",
        }
    }
}

pub struct Row {
    pub variant: Variant,
    pub waiters: usize,
    /// Kill → first acquisition, one sample per kill.
    pub delay: Histogram<u64>,
    /// Acquisitions seen before the kill (must be 0).
    pub early: u64,
}

pub async fn run(
    port: u16,
    exe: &Path,
    admin: &mut MultiplexedConnection,
    variant: Variant,
    waiters: usize,
    kills: usize,
    seed: u64,
) -> Result<Row> {
    let mut row = Row {
        variant,
        waiters,
        delay: timing::histogram(),
        early: 0,
    };
    let mut rng = Rng::new(seed);
    for trial in 0..kills {
        let limit = variant.lease() * 2 + MAX_WAIT;
        let (killed, first) = tokio::time::timeout(
            limit,
            one_trial(port, exe, admin, variant, waiters, trial, &mut rng),
        )
        .await
        .with_context(|| format!("B7 {} kill did not finish within {limit:?}", variant.slug()))??;
        if first < killed {
            row.early += 1;
        } else {
            timing::record(&mut row.delay, first - killed);
        }
    }
    Ok(row)
}

/// Kills the child (SIGKILL) however the trial ends.
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_holder(exe: &Path, port: u16, key: &str, owner: &str, variant: Variant) -> Result<Holder> {
    let mut child = Command::new(exe)
        .args(holder::args(
            port,
            key,
            owner,
            variant.mode(),
            variant.lease(),
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("spawning the holder {}", exe.display()))?;
    let stdout = child.stdout.take().context("holder stdout")?;
    let holder = Holder(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the holder's ready line")?;
    if line.trim() != "ready" {
        bail!("holder for {key} did not take the lock (said {line:?})");
    }
    Ok(holder)
}

/// One kill: returns (kill instant, first acquisition after it).
async fn one_trial(
    port: u16,
    exe: &Path,
    admin: &mut MultiplexedConnection,
    variant: Variant,
    waiters: usize,
    trial: usize,
    rng: &mut Rng,
) -> Result<(Instant, Instant)> {
    let key = format!("b7:{}:{trial}", variant.slug());
    let label = format!("{key}:{:?}", Instant::now());
    let mut others = try_join_all((0..waiters).map(|i| {
        Contender::connect(
            port,
            variant.waiter(),
            &key,
            owner(&label, i + 1),
            WAITER_LEASE,
        )
    }))
    .await?;
    let mut holder = spawn_holder(exe, port, &key, &owner(&label, 0), variant)?;
    let taken = Instant::now();
    // When the holder dies: KEEPALIVE at once (once the waiters wait);
    // a plain lease at a random moment of it; a watchdog after it renewed
    // the lease a few times.
    let kill_after = match variant {
        Variant::Keepalive => Duration::ZERO,
        Variant::Lease(l) => l.mul_f64(0.1 + 0.8 * rng.below(1000) as f64 / 1000.0),
        Variant::Watchdog(l) => l + l.mul_f64(rng.below(1000) as f64 / 1000.0),
    };
    let first: Cell<Option<Instant>> = Cell::new(None);
    let killed: Cell<Option<Instant>> = Cell::new(None);

    let waiting = try_join_all(others.iter_mut().map(|c| async {
        c.lock().await?;
        let now = Instant::now();
        if first.get().is_none() {
            first.set(Some(now));
        }
        c.unlock().await?;
        c.finish().await
    }));
    let kill = async {
        // The waiters are queued (hashlock) or subscribed (Redisson-style)
        // before the holder dies.
        match variant {
            Variant::Keepalive | Variant::Lease(_) => {
                let queued = Instant::now();
                loop {
                    let mut c = redis::cmd("LOCK.INFO");
                    c.arg(&key);
                    let info = conn::call(admin, &c).await?;
                    if waiters_in(&info) >= waiters as i64 {
                        break;
                    }
                    if queued.elapsed() > Duration::from_secs(10) {
                        bail!("B7: waiters did not queue for {key}: {info:?}");
                    }
                    timing::sleep(Duration::from_millis(1)).await;
                }
            }
            Variant::Watchdog(_) => timing::sleep(Duration::from_millis(20)).await,
        }
        timing::sleep_until(taken + kill_after).await;
        let at = Instant::now();
        killed.set(Some(at));
        // SIGKILL, then reap it.
        let _ = holder.0.kill();
        let _ = holder.0.wait();
        anyhow::Ok(())
    };
    tokio::try_join!(kill, waiting)?;
    match (killed.get(), first.get()) {
        (Some(k), Some(f)) => Ok((k, f)),
        _ => bail!("B7 {}: no waiter acquired the lock", variant.slug()),
    }
}

/// LOCK.INFO's `waiters` (RESP2 flat array); 0 when there is no lock.
fn waiters_in(info: &redis::Value) -> i64 {
    let redis::Value::Array(flat) = info else {
        return 0;
    };
    flat.chunks_exact(2)
        .find(|kv| matches!(&kv[0], redis::Value::BulkString(b) if b == b"waiters"))
        .and_then(|kv| match kv[1] {
            redis::Value::Int(n) => Some(n),
            _ => None,
        })
        .unwrap_or(0)
}
