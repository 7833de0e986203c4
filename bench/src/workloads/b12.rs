//! B12 overselling (issue 20 item 4; `make demo` shows it too): a stock of
//! `stock` items sold to `buyers` concurrent buyers, each on its own
//! connection, each buying again and again until it finds the stock sold
//! out. Sellers:
//!
//! - no lock: GET stock → if > 0, SET stock − 1 (the race: it oversells);
//! - (a) one Redisson-style lock around that GET/SET (`lock()`: the lock
//!   script by EVALSHA, then Redisson's pub/sub wait);
//! - (b) the seed's ten segmented Redisson-style locks: the stock split
//!   into ten segments, each its own key behind its own lock; a buyer tries
//!   a random segment (`tryLock(100 ms wait, 500 ms lease)`), and when it is
//!   empty or busy, every other segment in turn (`tryLock(50 ms, 200 ms)`);
//!   an attempt that found a segment busy and none with stock is retried,
//!   one that found every segment empty (under its lock) is "sold out";
//! - (c) one hashlock lock (`LOCK.ACQUIRE ... BLOCK`) around GET/SET;
//! - (d) `SEMAPHORE.ACQUIRE stock` alone: the stock is the permit count,
//!   one command per sale, nil = sold out;
//! - and, for reference, Redisson's RSemaphore `tryAcquire` script by
//!   EVALSHA on the same kind of key (no lock either).
//!
//! Measured: sales, oversold (sales − stock), what is left of the stock,
//! sales/s (sales ÷ time from the start to the last sale), server commands
//! per sale (`total_commands_processed`, commands inside scripts counted).

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use redis::Value;
use redis::aio::MultiplexedConnection;

use super::redisson::{Jvm, Kind};
use crate::conn::{self, Delta, Snapshot, expect_int, expect_ok};
use crate::scripts::SCRIPTS;

/// The lease of the single locks ((a), (c)): Redisson's watchdog default.
const LEASE: Duration = Duration::from_secs(30);
/// The seed's segmented locks: first segment tryLock(100 ms, 500 ms), the
/// others tryLock(50 ms, 200 ms).
const FIRST_WAIT: Duration = Duration::from_millis(100);
const FIRST_LEASE: Duration = Duration::from_millis(500);
const OTHER_WAIT: Duration = Duration::from_millis(50);
const OTHER_LEASE: Duration = Duration::from_millis(200);
/// No round may take longer.
const ROUND_LIMIT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seller {
    NoLock,
    RedissonLock,
    RedissonSegments,
    HashlockLock,
    Semaphore,
    RedissonSemaphore,
}

impl Seller {
    pub const ALL: [Seller; 6] = [
        Seller::NoLock,
        Seller::RedissonLock,
        Seller::RedissonSegments,
        Seller::HashlockLock,
        Seller::Semaphore,
        Seller::RedissonSemaphore,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Seller::NoLock => "no lock: GET → SET (baseline)",
            Seller::RedissonLock => "(a) one Redisson-style lock around GET/SET",
            Seller::RedissonSegments => "(b) ten segmented Redisson-style locks (the seed's)",
            Seller::HashlockLock => "(c) one hashlock lock (LOCK.ACQUIRE … BLOCK) around GET/SET",
            Seller::Semaphore => "(d) SEMAPHORE.ACQUIRE stock",
            Seller::RedissonSemaphore => "RSemaphore tryAcquire script (EVALSHA), for reference",
        }
    }

    /// A short label for narrow tables.
    pub fn short(self) -> &'static str {
        match self {
            Seller::NoLock => "no lock (baseline)",
            Seller::RedissonLock => "(a) one Redisson-style lock",
            Seller::RedissonSegments => "(b) ten segmented Redisson-style locks",
            Seller::HashlockLock => "(c) one hashlock lock",
            Seller::Semaphore => "(d) `SEMAPHORE.ACQUIRE stock`",
            Seller::RedissonSemaphore => "RSemaphore tryAcquire (reference)",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Seller::NoLock => "nolock",
            Seller::RedissonLock => "rlock",
            Seller::RedissonSegments => "rseg",
            Seller::HashlockLock => "hlock",
            Seller::Semaphore => "sem",
            Seller::RedissonSemaphore => "rsem",
        }
    }

    /// Must not oversell (targets (a)–(d)).
    pub fn guarded(self) -> bool {
        !matches!(self, Seller::NoLock)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub stock: i64,
    pub buyers: usize,
    pub segments: usize,
}

pub struct Outcome {
    pub seller: Seller,
    pub rounds: usize,
    /// Stock offered over all rounds.
    pub stock: i64,
    /// Sales the buyers believe they made.
    pub sales: i64,
    /// Sales beyond the stock, summed over rounds.
    pub oversold: i64,
    /// Items left at the end, summed over rounds (must be 0).
    pub left: i64,
    /// Start → last sale, summed over rounds.
    pub sell_out: Duration,
    /// Start → every buyer has seen the stock sold out.
    pub took: Duration,
    /// Attempts that found a segment busy and had to start over ((b)).
    pub busy_retries: u64,
    pub server: Delta,
    /// CPU the benchmark client (every buyer, one thread) used meanwhile.
    pub client_cpu: Duration,
}

impl Outcome {
    pub fn sales_per_sec(&self) -> f64 {
        self.sales as f64 / self.sell_out.as_secs_f64().max(1e-9)
    }
    /// Server CPU (user + system) per sale, µs: what a sale costs the
    /// server whoever is the bottleneck.
    pub fn server_us_per_sale(&self) -> f64 {
        self.server.cpu_secs * 1e6 / self.sales.max(1) as f64
    }
    /// Share of one core the benchmark client used while the buyers ran.
    pub fn client_busy(&self) -> f64 {
        self.client_cpu.as_secs_f64() / self.took.as_secs_f64().max(1e-9)
    }
    /// Share of one core the server used while the buyers ran.
    pub fn server_busy(&self) -> f64 {
        self.server.cpu_secs / self.took.as_secs_f64().max(1e-9)
    }
    pub fn server_cmds_per_sale(&self) -> f64 {
        self.server.total_commands as f64 / self.sales.max(1) as f64
    }
    fn merge(&mut self, o: Outcome) {
        self.rounds += o.rounds;
        self.stock += o.stock;
        self.sales += o.sales;
        self.oversold += o.oversold;
        self.left += o.left;
        self.sell_out += o.sell_out;
        self.took += o.took;
        self.busy_retries += o.busy_retries;
        self.server.merge(&o.server);
        self.client_cpu += o.client_cpu;
    }
}

/// `rounds` rounds, the sellers taking turns round by round.
pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    config: Config,
    rounds: usize,
    mut progress: impl FnMut(&str),
) -> Result<Vec<Outcome>> {
    let mut out: Vec<Option<Outcome>> = Seller::ALL.iter().map(|_| None).collect();
    for round in 0..rounds {
        for (i, seller) in Seller::ALL.into_iter().enumerate() {
            progress(&format!(
                "B12 overselling · {} · round {}/{rounds}",
                seller.short(),
                round + 1
            ));
            let o = sell(port, admin, seller, config, round).await?;
            match &mut out[i] {
                Some(acc) => acc.merge(o),
                slot => *slot = Some(o),
            }
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// How one buyer's attempt ended.
enum Attempt {
    Sold,
    SoldOut,
    /// (b): a segment was busy and none had stock: try again.
    Busy,
}

/// One round of one seller: the stock is set, every buyer buys until it
/// sees it sold out.
pub async fn sell(
    port: u16,
    admin: &mut MultiplexedConnection,
    seller: Seller,
    config: Config,
    round: usize,
) -> Result<Outcome> {
    let Config {
        stock,
        buyers,
        segments,
    } = config;
    let tag = format!("b12:{}:{round}:{:?}", seller.slug(), Instant::now());
    let stock_key = format!("{tag}:stock");
    let lock_key = format!("{tag}:lock");
    let segment_keys: Vec<(String, String)> = (0..segments)
        .map(|i| {
            (
                format!("{tag}:segment_stock_{i}"),
                format!("{tag}:segment_lock_{i}"),
            )
        })
        .collect();
    // The stock.
    match seller {
        Seller::RedissonSegments => {
            let (per, rem) = (stock / segments as i64, stock % segments as i64);
            for (i, (k, _)) in segment_keys.iter().enumerate() {
                let n = per + i64::from((i as i64) < rem);
                expect_ok(
                    &conn::call(admin, redis::cmd("SET").arg(k).arg(n)).await?,
                    "SET segment",
                )?;
            }
        }
        Seller::Semaphore => {
            let v = conn::call(
                admin,
                redis::cmd("SEMAPHORE.CREATE").arg(&stock_key).arg(stock),
            )
            .await?;
            expect_int(&v, 1, "SEMAPHORE.CREATE")?;
        }
        _ => {
            expect_ok(
                &conn::call(admin, redis::cmd("SET").arg(&stock_key).arg(stock)).await?,
                "SET stock",
            )?;
        }
    }

    let jvm = match seller {
        Seller::RedissonLock | Seller::RedissonSegments => Some(Jvm::connect(port, &tag).await?),
        _ => None,
    };
    let mut conns = try_join_all((0..buyers).map(|_| conn::connect(port))).await?;
    let mut threads = match &jvm {
        Some(j) => Some(try_join_all((0..buyers).map(|i| j.thread(port, i + 1))).await?),
        None => None,
    };

    let sales = Cell::new(0i64);
    let last_sale = Cell::new(None::<Instant>);
    let busy = Cell::new(0u64);
    let before = Snapshot::take(admin).await?;
    let cpu = crate::timing::process_cpu();
    let start = Instant::now();
    let buyers_done = {
        let sales = &sales;
        let last_sale = &last_sale;
        let busy = &busy;
        let stock_key = &stock_key;
        let lock_key = &lock_key;
        let segment_keys = &segment_keys;
        let tag = &tag;
        let slots: Vec<Option<&mut super::redisson::RThread>> = match threads.as_mut() {
            Some(t) => t.iter_mut().map(Some).collect(),
            None => (0..buyers).map(|_| None).collect(),
        };
        let work = try_join_all(conns.iter_mut().zip(slots).enumerate().map(
            |(b, (c, mut thread))| async move {
                let owner = format!("{tag}:buyer-{b}");
                let mut rng = Rng::new(b as u64 + 1 + round as u64 * 1000);
                loop {
                    let outcome = match seller {
                        Seller::NoLock => get_set(c, stock_key).await?,
                        Seller::HashlockLock => {
                            let mut a = redis::cmd("LOCK.ACQUIRE");
                            a.arg(lock_key)
                                .arg(&owner)
                                .arg("PX")
                                .arg(LEASE.as_millis() as u64)
                                .arg("BLOCK")
                                .arg(super::contender::MAX_WAIT.as_millis() as u64);
                            expect_int(&conn::call(c, &a).await?, 1, "LOCK.ACQUIRE ... BLOCK")?;
                            let r = get_set(c, stock_key).await?;
                            let v =
                                conn::call(c, redis::cmd("LOCK.RELEASE").arg(lock_key).arg(&owner))
                                    .await?;
                            expect_int(&v, 0, "LOCK.RELEASE")?;
                            r
                        }
                        Seller::RedissonLock => {
                            let t = thread.as_mut().context("no Redisson thread")?;
                            t.acquire(Kind::Lock, lock_key, LEASE, None).await?;
                            let r = get_set(&mut t.conn, stock_key).await?;
                            t.release_last(Kind::Lock, lock_key, LEASE).await?;
                            r
                        }
                        Seller::RedissonSegments => {
                            let t = thread.as_mut().context("no Redisson thread")?;
                            let first = rng.below(segment_keys.len());
                            segmented(t, segment_keys, first).await?
                        }
                        Seller::Semaphore => {
                            let v = conn::call(c, redis::cmd("SEMAPHORE.ACQUIRE").arg(stock_key))
                                .await?;
                            match v {
                                Value::Int(1) => Attempt::Sold,
                                Value::Nil => Attempt::SoldOut,
                                other => bail!("SEMAPHORE.ACQUIRE replied {other:?}"),
                            }
                        }
                        Seller::RedissonSemaphore => {
                            let v = conn::call(
                                c,
                                &SCRIPTS.sem_try_acquire.evalsha(&[stock_key], &["1"]),
                            )
                            .await?;
                            match v {
                                Value::Int(1) => Attempt::Sold,
                                Value::Int(0) => Attempt::SoldOut,
                                other => bail!("RSemaphore tryAcquire replied {other:?}"),
                            }
                        }
                    };
                    match outcome {
                        Attempt::Sold => {
                            sales.set(sales.get() + 1);
                            last_sale.set(Some(Instant::now()));
                        }
                        Attempt::SoldOut => break,
                        Attempt::Busy => busy.set(busy.get() + 1),
                    }
                }
                anyhow::Ok(())
            },
        ));
        tokio::time::timeout(ROUND_LIMIT, work)
            .await
            .with_context(|| {
                format!(
                    "B12 {} did not sell out within {ROUND_LIMIT:?}",
                    seller.short()
                )
            })??;
        Instant::now()
    };
    let client_cpu = crate::timing::process_cpu().saturating_sub(cpu);
    let after = Snapshot::take(admin).await?;
    if let Some(j) = &jvm {
        j.finish().await;
    }
    // What is left.
    let mut left = 0i64;
    let keys: Vec<&String> = match seller {
        Seller::RedissonSegments => segment_keys.iter().map(|(k, _)| k).collect(),
        _ => vec![&stock_key],
    };
    for k in keys {
        let v: Option<i64> = redis::cmd("GET").arg(k).query_async(admin).await?;
        left += v.unwrap_or(0);
    }
    let sales = sales.get();
    Ok(Outcome {
        seller,
        rounds: 1,
        stock,
        sales,
        oversold: (sales - stock).max(0),
        left,
        sell_out: last_sale
            .get()
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(start)),
        took: buyers_done.saturating_duration_since(start),
        busy_retries: busy.get(),
        server: before.delta(&after),
        client_cpu,
    })
}

/// The business logic, unchanged: check, deduct, write.
async fn get_set(c: &mut MultiplexedConnection, key: &str) -> Result<Attempt> {
    let stock: i64 = redis::cmd("GET")
        .arg(key)
        .query_async(c)
        .await
        .context("GET stock")?;
    if stock <= 0 {
        return Ok(Attempt::SoldOut);
    }
    expect_ok(
        &conn::call(c, redis::cmd("SET").arg(key).arg(stock - 1)).await?,
        "SET stock",
    )?;
    Ok(Attempt::Sold)
}

/// The seed's segmented sale: the chosen segment, then the others in turn.
async fn segmented(
    t: &mut super::redisson::RThread,
    segments: &[(String, String)],
    first: usize,
) -> Result<Attempt> {
    let mut busy = false;
    let order = std::iter::once(first).chain((0..segments.len()).filter(|&i| i != first));
    for (n, i) in order.enumerate() {
        let (stock_key, lock_key) = &segments[i];
        let (wait, lease) = if n == 0 {
            (FIRST_WAIT, FIRST_LEASE)
        } else {
            (OTHER_WAIT, OTHER_LEASE)
        };
        if !t.acquire(Kind::Lock, lock_key, lease, Some(wait)).await? {
            busy = true;
            continue;
        }
        let r = get_set(&mut t.conn, stock_key).await?;
        // A lease that lapsed before this release answers nil: the lock
        // had already moved on (and the sale may have oversold).
        t.release(Kind::Lock, lock_key, lease).await.ok();
        if let Attempt::Sold = r {
            return Ok(Attempt::Sold);
        }
    }
    Ok(if busy {
        Attempt::Busy
    } else {
        Attempt::SoldOut
    })
}

/// xorshift64*: the buyers' segment choice (deterministic per buyer).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

pub(crate) use Rng as SmallRng;
