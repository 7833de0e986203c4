//! B4 crashed holder: a holder takes the lock with a short lease and its
//! connection drops without a release while `waiters` clients wait. Measured:
//! time from the lease deadline to the next acquisition.
//!
//! The deadline is taken as (holder's acquire sent + lease): the server's
//! real deadline is at most one round trip later, so the reported delay is
//! an upper bound, never flattering.

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;

use super::contender::{Contender, MAX_WAIT, Waiter, owner};
use crate::timing;

/// Waiters' own lease once they get the lock (they release at once).
const WAITER_LEASE: Duration = Duration::from_secs(30);

pub struct Row {
    pub waiter: Waiter,
    pub lease: Duration,
    pub waiters: usize,
    /// Deadline → next acquisition, one sample per trial.
    pub delay: Histogram<u64>,
    /// Acquisitions that came before the deadline (must be 0).
    pub early: u64,
}

pub async fn run(
    port: u16,
    waiter: Waiter,
    lease: Duration,
    waiters: usize,
    trials: usize,
) -> Result<Row> {
    let mut row = Row {
        waiter,
        lease,
        waiters,
        delay: timing::histogram(),
        early: 0,
    };
    for trial in 0..trials {
        let limit = lease + MAX_WAIT;
        let (deadline, first) =
            tokio::time::timeout(limit, one_trial(port, waiter, lease, waiters, trial))
                .await
                .with_context(|| {
                    format!(
                        "B4 {} trial did not finish within {limit:?}",
                        waiter.label()
                    )
                })??;
        if first < deadline {
            row.early += 1;
        } else {
            timing::record(&mut row.delay, first - deadline);
        }
    }
    Ok(row)
}

/// One crash: returns (lease deadline, first acquisition after it).
async fn one_trial(
    port: u16,
    waiter: Waiter,
    lease: Duration,
    waiters: usize,
    trial: usize,
) -> Result<(Instant, Instant)> {
    let key = format!("b4:{}:{}ms:{trial}", waiter.slug(), lease.as_millis());
    let label = format!("{key}:{:?}", Instant::now());
    // Everyone connects first, so the waiting starts right after the lock
    // is taken.
    let mut holder = Contender::connect(port, waiter, &key, owner(&label, 0), lease).await?;
    let mut others = try_join_all(
        (0..waiters)
            .map(|i| Contender::connect(port, waiter, &key, owner(&label, i + 1), WAITER_LEASE)),
    )
    .await?;

    let sent = Instant::now();
    holder.lock().await?;
    let deadline = sent + lease;
    let first: Cell<Option<Instant>> = Cell::new(None);

    let waiting = try_join_all(others.iter_mut().map(|c| async {
        c.lock().await?;
        let now = Instant::now();
        if first.get().is_none() {
            first.set(Some(now));
        }
        c.unlock().await?;
        c.finish().await
    }));
    let crash = async {
        // Let the waiters queue / subscribe / start polling, then the
        // holder's process "dies": its connections close, nothing released.
        tokio::time::sleep((lease / 10).min(Duration::from_millis(50))).await;
        drop(holder);
        anyhow::Ok(())
    };
    tokio::try_join!(crash, waiting)?;
    match first.get() {
        Some(t) => Ok((deadline, t)),
        None => bail!("no waiter acquired the lock"),
    }
}
