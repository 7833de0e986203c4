//! B6 memory: N locks held at once, bytes per lock (used_memory delta / N)
//! for hashlock vs the same hashes written with HSET + PEXPIRE, and whether
//! used_memory comes back to the baseline once every lock is gone.
//!
//! hashlock goes first: if the server's dicts had not shrunk back before
//! the plain fill, the plain hashes would look cheaper, never hashlock.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures_util::future::try_join_all;
use redis::aio::MultiplexedConnection;

use super::contender::owner;
use crate::conn::{self, Snapshot, expect_int};

/// Long enough that nothing expires during the measurement.
const LEASE_MS: &str = "3600000";
const CONNECTIONS: usize = 4;
const BATCH: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Hashlock,
    HsetPexpire,
}

impl Writer {
    pub fn label(self) -> &'static str {
        match self {
            Writer::Hashlock => "hashlock (LOCK.ACQUIRE)",
            Writer::HsetPexpire => "plain hash (HSET + PEXPIRE)",
        }
    }
}

pub struct Fill {
    pub writer: Writer,
    pub baseline: u64,
    pub filled: u64,
    /// MEMORY USAGE of one of the keys.
    pub memory_usage: i64,
    /// used_memory after every lock is gone, minus the baseline.
    pub residual: i64,
    pub settled_after: Duration,
}

impl Fill {
    pub fn bytes_per_lock(&self, locks: usize) -> f64 {
        (self.filled as f64 - self.baseline as f64) / locks as f64
    }
}

pub struct Outcome {
    pub locks: usize,
    /// Keys present before B6 started (earlier workloads leave none).
    pub keys_before: i64,
    pub fills: Vec<Fill>,
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    locks: usize,
    settle_limit: Duration,
    mut progress: impl FnMut(),
) -> Result<Outcome> {
    let keys_before: i64 = redis::cmd("DBSIZE").query_async(admin).await?;
    let owner = owner("b6", 1);
    // The server allocates a latency histogram (~25 KB) the first time a
    // command runs: run every command B6 uses once before any baseline.
    for writer in [Writer::Hashlock, Writer::HsetPexpire] {
        write_all(port, CONNECTIONS, &owner, writer, true).await?;
        memory_usage(admin).await?;
        write_all(port, CONNECTIONS, &owner, writer, false).await?;
    }
    let mut fills = Vec::new();
    for writer in [Writer::Hashlock, Writer::HsetPexpire] {
        settle(admin, None, settle_limit).await?;
        let baseline = used_memory(admin).await?;
        write_all(port, locks, &owner, writer, true).await?;
        // Writers' connections closed, rehashing done: only the locks remain.
        settle(admin, None, settle_limit).await?;
        let filled = used_memory(admin).await?;
        let memory_usage = memory_usage(admin).await?;
        write_all(port, locks, &owner, writer, false).await?;
        let (residual, settled_after) = settle(admin, Some(baseline), settle_limit).await?;
        fills.push(Fill {
            writer,
            baseline,
            filled,
            memory_usage,
            residual,
            settled_after,
        });
        progress();
    }
    Ok(Outcome {
        locks,
        keys_before,
        fills,
    })
}

fn key(i: usize) -> String {
    format!("b6:{i:08}")
}

/// How far above the baseline still counts as "back": 0.1 % or 64 KiB,
/// whichever is more (connection buffers, INFO/DEBUG replies, allocator
/// rounding; 64 KiB is 0.07 B per lock at 1M locks).
pub fn tolerance(baseline: u64) -> u64 {
    (baseline / 1000).max(64 * 1024)
}

async fn memory_usage(admin: &mut MultiplexedConnection) -> Result<i64> {
    let v: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key(0))
        .arg("SAMPLES")
        .arg(0)
        .query_async(admin)
        .await?;
    Ok(v.unwrap_or(0))
}

async fn used_memory(admin: &mut MultiplexedConnection) -> Result<u64> {
    Ok(Snapshot::take(admin).await?.used_memory)
}

/// With a baseline: waits until used_memory is back to it (within
/// [`tolerance`]) or `limit` passes, and returns the residual and the time
/// it took. Without one: waits until the server's dicts are not rehashing (a
/// dict mid-rehash holds both bucket arrays: 1 MB more at 200k keys, and
/// used_memory stays flat until the server's cron finishes it) and
/// used_memory has not fallen for three polls in a row.
async fn settle(
    admin: &mut MultiplexedConnection,
    baseline: Option<u64>,
    limit: Duration,
) -> Result<(i64, Duration)> {
    let start = Instant::now();
    let mut last = used_memory(admin).await?;
    let mut steady = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = used_memory(admin).await?;
        let done = match baseline {
            Some(b) => now <= b + tolerance(b),
            None => {
                steady = if now >= last { steady + 1 } else { 0 };
                steady >= 3 && rehashing(admin).await != Some(true)
            }
        };
        if done || start.elapsed() > limit {
            let residual = baseline.map_or(0, |b| now as i64 - b as i64);
            return Ok((residual, start.elapsed()));
        }
        last = now;
    }
}

/// Whether db 0's dicts are mid-rehash (`DEBUG HTSTATS`; None if the server
/// refuses DEBUG). Redis 7.0 lists a "rehashing target" table; Valkey 8+
/// prints "rehashing index: -1" when idle.
async fn rehashing(admin: &mut MultiplexedConnection) -> Option<bool> {
    let text: String = redis::cmd("DEBUG")
        .arg("HTSTATS")
        .arg(0)
        .query_async(admin)
        .await
        .ok()?;
    let text = text.to_ascii_lowercase();
    let busy_index = text.lines().any(|l| {
        l.trim()
            .strip_prefix("rehashing index:")
            .is_some_and(|v| v.trim() != "-1")
    });
    Some(text.contains("rehashing target") || busy_index)
}

/// Writes (`fill`) or removes every lock, CONNECTIONS connections pipelining
/// BATCH commands. The connections are closed before returning, so their
/// buffers are not counted in used_memory.
async fn write_all(port: u16, locks: usize, owner: &str, writer: Writer, fill: bool) -> Result<()> {
    let per = locks.div_ceil(CONNECTIONS);
    try_join_all((0..CONNECTIONS).map(|c| async move {
        let mut conn = conn::connect(port).await?;
        let range = (c * per)..((c + 1) * per).min(locks);
        let idx: Vec<usize> = range.collect();
        for chunk in idx.chunks(BATCH) {
            let mut p = redis::Pipeline::with_capacity(chunk.len() * 2);
            for &i in chunk {
                let k = key(i);
                match (writer, fill) {
                    (Writer::Hashlock, true) => {
                        p.cmd("LOCK.ACQUIRE")
                            .arg(&k)
                            .arg(owner)
                            .arg("PX")
                            .arg(LEASE_MS);
                    }
                    (Writer::Hashlock, false) => {
                        p.cmd("LOCK.RELEASE").arg(&k).arg(owner);
                    }
                    (Writer::HsetPexpire, true) => {
                        p.cmd("HSET").arg(&k).arg(owner).arg(1);
                        p.cmd("PEXPIRE").arg(&k).arg(LEASE_MS);
                    }
                    (Writer::HsetPexpire, false) => {
                        p.cmd("DEL").arg(&k);
                    }
                }
            }
            let want = match (writer, fill) {
                (Writer::Hashlock, true) => 1,
                (Writer::Hashlock, false) => 0,
                _ => 1,
            };
            for r in conn::pipeline(&mut conn, &p).await? {
                expect_int(&r, want, "B6 write")?;
            }
        }
        anyhow::Ok(())
    }))
    .await?;
    if fill {
        let n: i64 = redis::cmd("DBSIZE")
            .query_async(&mut conn::connect(port).await?)
            .await?;
        if n < locks as i64 {
            bail!("B6: {n} keys after writing {locks} locks");
        }
    }
    Ok(())
}
