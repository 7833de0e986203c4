//! B15 all-or-nothing multi-key locking under contention (issue 21 item 5):
//! `clients` clients loop: pick `set` distinct keys of a pool of `pool`
//! (random, so the sets overlap), lock them all, hold `hold`, unlock them.
//!
//! - hashlock: `LOCK.MACQUIRE n keys... owner PX 30000 BLOCK ms`, one
//!   command; the server grants the whole set at once in arrival order.
//! - Redisson-style MultiLock (RedissonMultiLock.lock()): the member locks
//!   one by one in the order given, each `tryLock(remaining budget)` with
//!   Redisson's pub/sub wait; when one is not had within the attempt's
//!   budget (members × `per_member`; Redisson's default is 1500 ms per
//!   member), every member taken is unlocked and the attempt starts over
//!   ("restart"); unlocking sends every member's unlock at once, as
//!   Redisson does. Two clients each holding a key the other waits for
//!   deadlock until the budget runs out: with holds this short, a restart
//!   is such a deadlock broken by the timeout.
//! - The same MultiLock with every client listing its keys in one global
//!   (sorted) order: no deadlock is possible, at the price of ordering
//!   being the application's job.
//!
//! Measured: sets locked per second, the time to lock a set (p50, p99,
//! max), restarts, BLOCK timeouts (hashlock), and a check that no key is
//! ever inside two clients' critical sections at once.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::Value;

use super::b12::SmallRng;
use super::contender::MAX_WAIT;
use super::redisson::{Jvm, Kind};
use crate::conn;
use crate::timing;

const LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Hashlock,
    MultiLock,
    MultiLockSorted,
}

impl Variant {
    pub const ALL: [Variant; 3] = [
        Variant::Hashlock,
        Variant::MultiLock,
        Variant::MultiLockSorted,
    ];
    pub fn label(self) -> &'static str {
        match self {
            Variant::Hashlock => "hashlock LOCK.MACQUIRE … BLOCK",
            Variant::MultiLock => "Redisson-style MultiLock, keys in the order given",
            Variant::MultiLockSorted => "Redisson-style MultiLock, keys sorted by every client",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub clients: usize,
    pub pool: usize,
    pub set: usize,
    pub hold: Duration,
    /// MultiLock's per-attempt budget per member.
    pub per_member: Duration,
}

pub struct Row {
    pub variant: Variant,
    pub config: Config,
    pub sets: u64,
    pub elapsed: Duration,
    /// Time to lock a whole set.
    pub latency: Histogram<u64>,
    /// MultiLock attempts abandoned (budget ran out; members unlocked).
    pub restarts: u64,
    /// hashlock: MACQUIRE ... BLOCK that timed out.
    pub timeouts: u64,
    /// A key inside two critical sections at once (must be 0).
    pub overlaps: u64,
    pub per_client: Vec<u64>,
}

impl Row {
    pub fn per_sec(&self) -> f64 {
        self.sets as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn restarts_per_1000(&self) -> f64 {
        self.restarts as f64 * 1000.0 / self.sets.max(1) as f64
    }
    pub fn jain(&self) -> f64 {
        timing::jain(&self.per_client)
    }
}

enum Client {
    Native(redis::aio::MultiplexedConnection, String),
    Redisson(super::redisson::RThread),
}

pub async fn run(port: u16, variant: Variant, config: Config, window: Duration) -> Result<Row> {
    let Config {
        clients,
        pool,
        set,
        hold,
        per_member,
    } = config;
    if set > pool {
        bail!("B15: a set of {set} keys from a pool of {pool}");
    }
    let tag = format!("b15:{variant:?}:{:?}", Instant::now());
    let keys: Vec<String> = (0..pool).map(|i| format!("{tag}:account-{i}")).collect();
    let jvm = match variant {
        Variant::Hashlock => None,
        _ => Some(Jvm::connect(port, &tag).await?),
    };
    let mut cs: Vec<Client> = match &jvm {
        None => try_join_all((0..clients).map(|_| conn::connect(port)))
            .await?
            .into_iter()
            .enumerate()
            .map(|(i, c)| Client::Native(c, format!("{tag}:client-{i}")))
            .collect(),
        Some(j) => try_join_all((0..clients).map(|i| j.thread(port, i + 1)))
            .await?
            .into_iter()
            .map(Client::Redisson)
            .collect(),
    };

    let stop = Cell::new(false);
    let measuring = Cell::new(false);
    let holders: RefCell<Vec<Option<usize>>> = RefCell::new(vec![None; pool]);
    let overlaps = Cell::new(0u64);
    let restarts = Cell::new(0u64);
    let timeouts = Cell::new(0u64);
    let latency = RefCell::new(timing::histogram());
    let per_client = RefCell::new(vec![0u64; clients]);
    let budget = per_member * set as u32;

    let loops =
        try_join_all(
            cs.iter_mut().enumerate().map(|(ci, c)| {
                let (
                    stop,
                    measuring,
                    holders,
                    overlaps,
                    restarts,
                    timeouts,
                    latency,
                    per_client,
                    keys,
                ) = (
                    &stop,
                    &measuring,
                    &holders,
                    &overlaps,
                    &restarts,
                    &timeouts,
                    &latency,
                    &per_client,
                    &keys,
                );
                async move {
                    let mut rng = SmallRng::new(0xb15 + ci as u64);
                    while !stop.get() {
                        // A random set, in a random order (the application's).
                        let mut picked: Vec<usize> = (0..keys.len()).collect();
                        for i in 0..set {
                            let j = i + rng.below(keys.len() - i);
                            picked.swap(i, j);
                        }
                        picked.truncate(set);
                        if variant == Variant::MultiLockSorted {
                            picked.sort_unstable();
                        }
                        let names: Vec<&str> = picked.iter().map(|&i| keys[i].as_str()).collect();
                        let t = Instant::now();
                        let got = match c {
                            Client::Native(conn, owner) => {
                                let mut a = redis::cmd("LOCK.MACQUIRE");
                                a.arg(set)
                                    .arg(&names)
                                    .arg(&*owner)
                                    .arg("PX")
                                    .arg(LEASE.as_millis() as u64);
                                a.arg("BLOCK").arg(MAX_WAIT.as_millis() as u64 / 6);
                                match conn::call(conn, &a).await? {
                                    Value::Array(v) if v.len() == set => true,
                                    Value::Nil => false,
                                    other => bail!("LOCK.MACQUIRE replied {other:?}"),
                                }
                            }
                            Client::Redisson(th) => {
                                // lock(): tryLock(budget) until it succeeds.
                                loop {
                                    if multilock_try(th, &names, budget).await? {
                                        break true;
                                    }
                                    if measuring.get() {
                                        restarts.set(restarts.get() + 1);
                                    }
                                    if stop.get() {
                                        break false;
                                    }
                                }
                            }
                        };
                        let took = t.elapsed();
                        if !got {
                            if matches!(c, Client::Native(..)) && measuring.get() {
                                timeouts.set(timeouts.get() + 1);
                            }
                            continue;
                        }
                        {
                            let mut h = holders.borrow_mut();
                            for &k in &picked {
                                if h[k].is_some() {
                                    overlaps.set(overlaps.get() + 1);
                                }
                                h[k] = Some(ci);
                            }
                        }
                        if measuring.get() {
                            timing::record(&mut latency.borrow_mut(), took);
                            per_client.borrow_mut()[ci] += 1;
                        }
                        timing::sleep(hold).await;
                        {
                            let mut h = holders.borrow_mut();
                            for &k in &picked {
                                if h[k] == Some(ci) {
                                    h[k] = None;
                                }
                            }
                        }
                        match c {
                            Client::Native(conn, owner) => {
                                let mut r = redis::cmd("LOCK.MRELEASE");
                                r.arg(set).arg(&names).arg(&*owner);
                                match conn::call(conn, &r).await? {
                                    Value::Array(v) if v.len() == set => {}
                                    other => bail!("LOCK.MRELEASE replied {other:?}"),
                                }
                            }
                            // unlock(): every member's unlock sent at once.
                            Client::Redisson(th) => th.release_locks(&names, LEASE).await?,
                        }
                    }
                    anyhow::Ok(())
                }
            }),
        );
    let conductor = async {
        timing::sleep(Duration::from_millis(50)).await;
        measuring.set(true);
        let t = Instant::now();
        timing::sleep(window).await;
        measuring.set(false);
        stop.set(true);
        anyhow::Ok(t.elapsed())
    };
    let limit = window + budget * 4 + MAX_WAIT;
    let (elapsed, _) = tokio::time::timeout(limit, async { tokio::try_join!(conductor, loops) })
        .await
        .with_context(|| format!("B15 {} did not finish within {limit:?}", variant.label()))??;
    drop(cs);
    if let Some(j) = &jvm {
        j.finish().await;
    }
    let per_client = per_client.into_inner();
    Ok(Row {
        variant,
        config,
        sets: per_client.iter().sum(),
        elapsed,
        latency: latency.into_inner(),
        restarts: restarts.get(),
        timeouts: timeouts.get(),
        overlaps: overlaps.get(),
        per_client,
    })
}

/// RedissonMultiLock.tryLock(waitTime = budget): members in order, each
/// `tryLock(remaining)`; on a failure every member taken is unlocked and
/// the attempt fails (its budget is spent).
async fn multilock_try(
    th: &mut super::redisson::RThread,
    names: &[&str],
    budget: Duration,
) -> Result<bool> {
    let start = Instant::now();
    let mut taken: Vec<&str> = Vec::with_capacity(names.len());
    for &k in names {
        let left = budget.saturating_sub(start.elapsed());
        let ok = !left.is_zero() && th.acquire(Kind::Lock, k, LEASE, Some(left)).await?;
        if !ok {
            // unlockInner(acquiredLocks): every unlock sent, then awaited.
            th.release_locks(&taken, LEASE).await?;
            return Ok(false);
        }
        taken.push(k);
    }
    Ok(true)
}
