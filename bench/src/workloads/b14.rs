//! B14 writer wait under a continuous stream of readers (issue 21 item 5).
//!
//! `readers` clients loop read-lock → hold → unlock on one key, each hold
//! drawn uniformly from [hold/2, 3·hold/2] and the readers' starts
//! staggered, so that read holds overlap and the lock never goes free (with
//! equal holds the readers fall into step after each write and leave the
//! lock free together, which is not a stream); a
//! writer asks for the write lock `writes` times (`gap` apart), holds it
//! for `writer_hold` and releases it. Measured: the writer's wait for each
//! grant, the readers' waits, reads per second.
//!
//! - hashlock: readers `RWLOCK.ACQUIRE key owner READ PX 30000 BLOCK ms`,
//!   the writer `... WRITE ... BLOCK cap`: once the writer is queued, new
//!   readers queue behind it, so it waits for the read holds already
//!   granted: at most one read hold.
//! - Redisson-style: the read and write lock scripts by EVALSHA with
//!   Redisson's pub/sub wait (one JVM). Redisson readers enter a read-mode
//!   lock whatever waits, so the writer gets in only when every reader
//!   happens to be between two holds at once: its wait is unbounded. Each
//!   attempt is capped (`tryLock(cap)`); a capped attempt counts apart.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hdrhistogram::Histogram;
use redis::Value;
use redis::aio::MultiplexedConnection;

use super::contender::MAX_WAIT;
use super::redisson::{Jvm, Kind};
use crate::conn::{self, expect_int};
use crate::timing;

const LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Hashlock,
    Redisson,
}

impl Side {
    pub const ALL: [Side; 2] = [Side::Hashlock, Side::Redisson];
    pub fn label(self) -> &'static str {
        match self {
            Side::Hashlock => "hashlock (RWLOCK.* BLOCK, writer queued)",
            Side::Redisson => "Redisson-style (read/write lock scripts + pub/sub)",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub readers: usize,
    pub hold: Duration,
    pub writes: usize,
    pub writer_hold: Duration,
    pub gap: Duration,
    /// Longest one write attempt may wait.
    pub cap: Duration,
}

pub struct Row {
    pub side: Side,
    pub config: Config,
    /// Writer waits of the attempts that were granted.
    pub wait: Histogram<u64>,
    /// Attempts that were not granted within the cap.
    pub capped: usize,
    pub granted: usize,
    /// Read holds granted while the writer was at work, and over how long.
    pub reads: u64,
    pub elapsed: Duration,
    pub reader_wait: Histogram<u64>,
    /// Mean read hold as really held (sleep + wake-up).
    pub actual_hold: Duration,
    /// Longest read hold as really held.
    pub longest_hold: Duration,
}

impl Row {
    pub fn reads_per_sec(&self) -> f64 {
        self.reads as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    /// The bound hashlock promises: one read hold (the longest, as really
    /// held) + 5 ms.
    pub fn bound(&self) -> Duration {
        self.longest_hold + Duration::from_millis(5)
    }
    /// The longest wait, counting a capped attempt as the cap.
    pub fn worst(&self) -> Duration {
        if self.capped > 0 {
            self.config.cap.max(timing::max(&self.wait))
        } else {
            timing::max(&self.wait)
        }
    }
}

enum Reader<'a> {
    Native(MultiplexedConnection, String),
    Redisson(&'a mut super::redisson::RThread),
}

pub async fn run(port: u16, side: Side, config: Config) -> Result<Row> {
    let Config {
        readers,
        hold,
        writes,
        writer_hold,
        gap,
        cap,
    } = config;
    let key = format!("b14:{side:?}:{:?}", Instant::now());
    let jvm = match side {
        Side::Redisson => Some(Jvm::connect(port, &key).await?),
        Side::Hashlock => None,
    };
    let mut threads = match &jvm {
        Some(j) => try_join_all((0..=readers).map(|i| j.thread(port, i + 1))).await?,
        None => Vec::new(),
    };
    let mut writer_thread = threads.pop();
    let mut reader_sides: Vec<Reader> = match side {
        Side::Hashlock => {
            let conns = try_join_all((0..readers).map(|_| conn::connect(port))).await?;
            conns
                .into_iter()
                .enumerate()
                .map(|(i, c)| Reader::Native(c, format!("{key}:reader-{i}")))
                .collect()
        }
        Side::Redisson => threads.iter_mut().map(Reader::Redisson).collect(),
    };
    let mut writer_conn = conn::connect(port).await?;

    let stop = Cell::new(false);
    let counting = Cell::new(false);
    let reads = Cell::new(0u64);
    let held = Cell::new((Duration::ZERO, 0u32));
    let longest = Cell::new(Duration::ZERO);
    let reader_wait = RefCell::new(timing::histogram());
    let lease_ms = LEASE.as_millis() as u64;
    let block_ms = MAX_WAIT.as_millis() as u64;

    let reader_loops = try_join_all(reader_sides.iter_mut().enumerate().map(|(i, r)| {
        let (stop, counting, reads, held, longest, reader_wait, key) = (
            &stop,
            &counting,
            &reads,
            &held,
            &longest,
            &reader_wait,
            &key,
        );
        async move {
            let mut rng = super::b12::SmallRng::new(0xb14 + i as u64);
            // Staggered starts: the read holds overlap.
            timing::sleep(hold * i as u32 / readers as u32).await;
            while !stop.get() {
                let t = Instant::now();
                match r {
                    Reader::Native(c, owner) => {
                        let mut a = redis::cmd("RWLOCK.ACQUIRE");
                        a.arg(key)
                            .arg(&*owner)
                            .arg("READ")
                            .arg("PX")
                            .arg(lease_ms)
                            .arg("BLOCK")
                            .arg(block_ms);
                        expect_int(&conn::call(c, &a).await?, 1, "RWLOCK.ACQUIRE READ BLOCK")?;
                    }
                    Reader::Redisson(th) => {
                        th.acquire(Kind::Read, key, LEASE, None).await?;
                    }
                }
                let got = Instant::now();
                if counting.get() {
                    reads.set(reads.get() + 1);
                    timing::record(&mut reader_wait.borrow_mut(), got - t);
                }
                let this = hold / 2 + hold * rng.below(1001) as u32 / 1000;
                timing::sleep(this).await;
                if counting.get() {
                    let (sum, n) = held.get();
                    let h = got.elapsed();
                    held.set((sum + h, n + 1));
                    longest.set(longest.get().max(h));
                }
                match r {
                    Reader::Native(c, owner) => {
                        let v = conn::call(
                            c,
                            redis::cmd("RWLOCK.RELEASE")
                                .arg(key)
                                .arg(&*owner)
                                .arg("READ"),
                        )
                        .await?;
                        expect_int(&v, 0, "RWLOCK.RELEASE READ")?;
                    }
                    Reader::Redisson(th) => th.release_last(Kind::Read, key, LEASE).await?,
                }
            }
            anyhow::Ok(())
        }
    }));

    let writer = async {
        let mut wait = timing::histogram();
        let (mut granted, mut capped) = (0usize, 0usize);
        // Let the readers' stream settle first.
        timing::sleep(hold * 5).await;
        counting.set(true);
        let started = Instant::now();
        let owner = format!("{key}:writer");
        for _ in 0..writes {
            let t = Instant::now();
            let got = match writer_thread.as_mut() {
                None => {
                    let mut a = redis::cmd("RWLOCK.ACQUIRE");
                    a.arg(&key)
                        .arg(&owner)
                        .arg("WRITE")
                        .arg("PX")
                        .arg(lease_ms)
                        .arg("BLOCK")
                        .arg(cap.as_millis() as u64);
                    match conn::call(&mut writer_conn, &a).await? {
                        Value::Int(1) => true,
                        Value::Nil => false,
                        other => bail!("RWLOCK.ACQUIRE WRITE BLOCK replied {other:?}"),
                    }
                }
                Some(th) => th.acquire(Kind::Write, &key, LEASE, Some(cap)).await?,
            };
            if got {
                timing::record(&mut wait, t.elapsed());
                granted += 1;
                timing::sleep(writer_hold).await;
                match writer_thread.as_mut() {
                    None => {
                        let v = conn::call(
                            &mut writer_conn,
                            redis::cmd("RWLOCK.RELEASE")
                                .arg(&key)
                                .arg(&owner)
                                .arg("WRITE"),
                        )
                        .await?;
                        expect_int(&v, 0, "RWLOCK.RELEASE WRITE")?;
                    }
                    Some(th) => th.release_last(Kind::Write, &key, LEASE).await?,
                }
            } else {
                capped += 1;
            }
            timing::sleep(gap).await;
        }
        let elapsed = started.elapsed();
        counting.set(false);
        stop.set(true);
        anyhow::Ok((wait, granted, capped, elapsed))
    };
    let limit = (cap + gap + writer_hold + hold * 2) * writes as u32 + MAX_WAIT;
    let ((wait, granted, capped, elapsed), _) =
        tokio::time::timeout(limit, async { tokio::try_join!(writer, reader_loops) })
            .await
            .with_context(|| format!("B14 {} did not finish within {limit:?}", side.label()))??;
    drop(reader_sides);
    if let Some(j) = &jvm {
        j.finish().await;
    }
    let (sum, n) = held.get();
    Ok(Row {
        side,
        config,
        wait,
        capped,
        granted,
        reads: reads.get(),
        elapsed,
        reader_wait: reader_wait.into_inner(),
        actual_hold: if n > 0 { sum / n } else { hold },
        longest_hold: longest.get().max(hold * 3 / 2),
    })
}
