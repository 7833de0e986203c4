//! B13 server cost per call of the Redisson family (issue 20 item 4, issue
//! 21 item 5), as B1 measures the lock's: one client, pipeline 16, `keys`
//! fresh objects per phase, each phase its own `INFO commandstats` window,
//! hashlock and the Redisson scripts (by EVALSHA) taking turns.
//!
//! - RSemaphore: `SEMAPHORE.ACQUIRE key` / `SEMAPHORE.RELEASE key` vs the
//!   tryAcquire / release scripts (each key holds one permit).
//! - RPermitExpirableSemaphore: `SEMAPHORE.LEASE key PX 30000` /
//!   `SEMAPHORE.RETURN key id` vs its acquire (a 30 s lease) / release
//!   scripts.
//! - RReadWriteLock: `RWLOCK.ACQUIRE key owner READ|WRITE PX 30000` /
//!   `RWLOCK.RELEASE` vs the read and write lock / unlock scripts. Redisson
//!   4.x's unlock scripts write an unlock latch that the client DELs after
//!   the reply: the DELs are sent as Redisson sends them and timed apart
//!   (not in the ratio).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use redis::Value;
use redis::aio::MultiplexedConnection;

use super::b1::{COST_PIPELINE, Cost};
use super::contender::owner;
use crate::conn::{self, CmdStat, Snapshot, expect_int, expect_nil};
use crate::scripts::{self, SCRIPTS};

/// The lease of every hold and leased permit.
pub const LEASE_MS: &str = "30000";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// RSemaphore: anonymous permits.
    Semaphore,
    /// RPermitExpirableSemaphore: leased permits with ids.
    Expirable,
    /// RReadWriteLock, read side.
    Read,
    /// RReadWriteLock, write side.
    Write,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::Semaphore,
        Family::Expirable,
        Family::Read,
        Family::Write,
    ];

    /// (acquire, release) as hashlock names them.
    pub fn hashlock_ops(self) -> (&'static str, &'static str) {
        match self {
            Family::Semaphore => ("SEMAPHORE.ACQUIRE", "SEMAPHORE.RELEASE"),
            Family::Expirable => ("SEMAPHORE.LEASE … PX 30000", "SEMAPHORE.RETURN"),
            Family::Read => ("RWLOCK.ACQUIRE … READ", "RWLOCK.RELEASE … READ"),
            Family::Write => ("RWLOCK.ACQUIRE … WRITE", "RWLOCK.RELEASE … WRITE"),
        }
    }

    /// (acquire, release) as Redisson's scripts are known.
    pub fn redisson_ops(self) -> (&'static str, &'static str) {
        match self {
            Family::Semaphore => ("RSemaphore tryAcquire", "RSemaphore release"),
            Family::Expirable => (
                "RPermitExpirableSemaphore acquire (30 s lease)",
                "RPermitExpirableSemaphore release",
            ),
            Family::Read => ("RReadWriteLock read lock", "read unlock"),
            Family::Write => ("RReadWriteLock write lock", "write unlock"),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Family::Semaphore => "semaphore (RSemaphore)",
            Family::Expirable => "leased permits (RPermitExpirableSemaphore)",
            Family::Read => "read-write lock, READ",
            Family::Write => "read-write lock, WRITE",
        }
    }

    fn hashlock_stats(self) -> (&'static str, &'static str) {
        match self {
            Family::Semaphore => ("semaphore.acquire", "semaphore.release"),
            Family::Expirable => ("semaphore.lease", "semaphore.return"),
            Family::Read | Family::Write => ("rwlock.acquire", "rwlock.release"),
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Family::Semaphore => "sem",
            Family::Expirable => "exp",
            Family::Read => "read",
            Family::Write => "write",
        }
    }

    /// Whether the pair is compared as a whole (the RW targets are on
    /// acquire + release together; the semaphores' on each command).
    pub fn pair_target(self) -> bool {
        matches!(self, Family::Read | Family::Write)
    }
}

pub struct Row {
    pub family: Family,
    pub hashlock_acquire: Cost,
    pub hashlock_release: Cost,
    pub redisson_acquire: Cost,
    pub redisson_release: Cost,
    /// The DELs of Redisson's unlock latch (read-write only).
    pub redisson_latch_del: Option<Cost>,
}

impl Row {
    /// Redisson µs ÷ hashlock µs for (acquire, release, pair).
    pub fn gains(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let g =
            |r: Option<f64>, h: Option<f64>| r.zip(h).and_then(|(r, h)| crate::report::ratio(r, h));
        let (ha, hr) = (
            self.hashlock_acquire.us_per_call(),
            self.hashlock_release.us_per_call(),
        );
        let (ra, rr) = (
            self.redisson_acquire.us_per_call(),
            self.redisson_release.us_per_call(),
        );
        let pair = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
        (g(ra, ha), g(rr, hr), g(pair(ra, rr), pair(ha, hr)))
    }
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    keys: usize,
    rounds: usize,
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>> {
    let mut conn = conn::connect(port).await?;
    let mut rows: Vec<Row> = Family::ALL
        .iter()
        .map(|&family| Row {
            family,
            hashlock_acquire: Cost::default(),
            hashlock_release: Cost::default(),
            redisson_acquire: Cost::default(),
            redisson_release: Cost::default(),
            redisson_latch_del: matches!(family, Family::Read | Family::Write).then(Cost::default),
        })
        .collect();
    for round in 0..rounds {
        for row in rows.iter_mut() {
            let f = row.family;
            progress(&format!(
                "B13 server cost · {} · round {}/{rounds}",
                f.label(),
                round + 1
            ));
            let stamp = format!("{:?}", Instant::now());
            // Alternate which side goes first, round by round.
            for side in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
                let names: Vec<String> = (0..keys)
                    .map(|i| format!("b13:{}:{side}:{round}:{i:06}", f.slug()))
                    .collect();
                let owner = owner(&format!("b13:{}:{stamp}:{side}", f.slug()), 1);
                if side == 0 {
                    hashlock(&mut conn, admin, f, &names, &owner, row).await?;
                } else {
                    redisson(&mut conn, admin, f, &names, &owner, row).await?;
                }
                // Leave nothing behind (not measured).
                for chunk in names.chunks(512) {
                    let mut del = redis::cmd("DEL");
                    for k in chunk {
                        del.arg(k);
                        if f == Family::Expirable {
                            del.arg(scripts::semaphore_timeout_key(k));
                        }
                    }
                    conn::call(&mut conn, &del).await?;
                }
            }
        }
    }
    Ok(rows)
}

/// Each key holds one permit (semaphores), not measured.
async fn seed(conn: &mut MultiplexedConnection, f: Family, names: &[String]) -> Result<()> {
    if matches!(f, Family::Semaphore | Family::Expirable) {
        for chunk in names.chunks(512) {
            let mut mset = redis::cmd("MSET");
            for k in chunk {
                mset.arg(k).arg(1);
            }
            conn::call(conn, &mset).await?;
        }
    }
    Ok(())
}

async fn hashlock(
    conn: &mut MultiplexedConnection,
    admin: &mut MultiplexedConnection,
    f: Family,
    names: &[String],
    owner: &str,
    row: &mut Row,
) -> Result<()> {
    seed(conn, f, names).await?;
    let (acq, rel) = f.hashlock_stats();
    let mode = if f == Family::Write { "WRITE" } else { "READ" };
    let mut ids: Vec<String> = Vec::with_capacity(names.len());
    let (stat, t, replies) = phase(conn, admin, names, &[acq], |p, k| match f {
        Family::Semaphore => {
            p.cmd("SEMAPHORE.ACQUIRE").arg(k);
        }
        Family::Expirable => {
            p.cmd("SEMAPHORE.LEASE").arg(k).arg("PX").arg(LEASE_MS);
        }
        Family::Read | Family::Write => {
            p.cmd("RWLOCK.ACQUIRE")
                .arg(k)
                .arg(owner)
                .arg(mode)
                .arg("PX")
                .arg(LEASE_MS);
        }
    })
    .await?;
    for v in &replies {
        match (f, v) {
            (Family::Expirable, Value::Array(a)) if a.len() == 1 => match &a[0] {
                Value::BulkString(b) if b.len() == 32 => {
                    ids.push(String::from_utf8_lossy(b).into_owned())
                }
                other => bail!("SEMAPHORE.LEASE: expected one id, got {other:?}"),
            },
            (Family::Expirable, other) => bail!("SEMAPHORE.LEASE: expected one id, got {other:?}"),
            (_, v) => expect_int(v, 1, acq)?,
        }
    }
    row.hashlock_acquire.add(stat, t);
    let mut next = ids.iter();
    let (stat, t, replies) = phase(conn, admin, names, &[rel], |p, k| match f {
        Family::Semaphore => {
            p.cmd("SEMAPHORE.RELEASE").arg(k);
        }
        Family::Expirable => {
            p.cmd("SEMAPHORE.RETURN")
                .arg(k)
                .arg(next.next().map_or("", String::as_str));
        }
        Family::Read | Family::Write => {
            p.cmd("RWLOCK.RELEASE").arg(k).arg(owner).arg(mode);
        }
    })
    .await?;
    for v in &replies {
        let want = if matches!(f, Family::Read | Family::Write) {
            0
        } else {
            1
        };
        expect_int(v, want, rel)?;
    }
    row.hashlock_release.add(stat, t);
    Ok(())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A permit id as Redisson makes it: 16 random bytes (here: distinct).
fn permit_id(i: usize, salt: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&salt.to_le_bytes());
    id[8..].copy_from_slice(&(i as u64).to_le_bytes());
    id
}

async fn redisson(
    conn: &mut MultiplexedConnection,
    admin: &mut MultiplexedConnection,
    f: Family,
    names: &[String],
    owner: &str,
    row: &mut Row,
) -> Result<()> {
    seed(conn, f, names).await?;
    let writer = format!("{owner}:write");
    let salt = now_ms() ^ 0x5eed;
    let lease_until = (now_ms() + 30_000).to_string();
    let now = now_ms().to_string();
    let mut i = 0usize;
    let (stat, t, replies) = phase(conn, admin, names, &["evalsha"], |p, k| match f {
        Family::Semaphore => {
            p.add_command(SCRIPTS.sem_try_acquire.evalsha(&[k], &["1"]));
        }
        Family::Expirable => {
            let id = permit_id(i, salt);
            i += 1;
            let mut c = redis::cmd("EVALSHA");
            c.arg(&SCRIPTS.expirable_acquire.sha)
                .arg(3)
                .arg(k)
                .arg(scripts::semaphore_timeout_key(k))
                .arg(scripts::semaphore_channel(k))
                .arg(1)
                .arg(&lease_until)
                .arg(&now)
                .arg(testkit::redisson::NO_LEASE)
                .arg("PUBLISH")
                .arg(&id[..]);
            p.add_command(c);
        }
        Family::Read => {
            p.add_command(SCRIPTS.rw_read_lock.evalsha(
                &[k, &scripts::rwlock_timeout_prefix(k, owner)],
                &[LEASE_MS, owner, &writer],
            ));
        }
        Family::Write => {
            p.add_command(SCRIPTS.rw_write_lock.evalsha(&[k], &[LEASE_MS, &writer]));
        }
    })
    .await?;
    for v in &replies {
        match f {
            Family::Semaphore => expect_int(v, 1, "RSemaphore tryAcquire")?,
            Family::Expirable => match v {
                Value::Okay => {}
                Value::SimpleString(s) if s == "OK" => {}
                Value::BulkString(b) if b == b"OK" => {}
                other => bail!("RPermitExpirableSemaphore acquire: expected OK, got {other:?}"),
            },
            Family::Read | Family::Write => expect_nil(v, "Redisson RW lock script")?,
        }
    }
    row.redisson_acquire.add(stat, t);

    let mut i = 0usize;
    let mut latches = Vec::new();
    let (stat, t, replies) = phase(conn, admin, names, &["evalsha"], |p, k| match f {
        Family::Semaphore => {
            p.add_command(
                SCRIPTS
                    .sem_release
                    .evalsha(&[k, &scripts::semaphore_channel(k)], &["1", "PUBLISH"]),
            );
        }
        Family::Expirable => {
            let id = permit_id(i, salt);
            i += 1;
            let mut c = redis::cmd("EVALSHA");
            c.arg(&SCRIPTS.expirable_release.sha)
                .arg(3)
                .arg(k)
                .arg(scripts::semaphore_channel(k))
                .arg(scripts::semaphore_timeout_key(k))
                .arg(&id[..])
                .arg(1)
                .arg(&now)
                .arg("PUBLISH");
            p.add_command(c);
        }
        Family::Read => {
            let latch = scripts::unlock_latch(k, &format!("{owner}:{i}"));
            i += 1;
            p.add_command(SCRIPTS.rw_read_unlock.evalsha(
                &[
                    k,
                    &scripts::rwlock_channel(k),
                    &scripts::rwlock_timeout_prefix(k, owner),
                    &scripts::rwlock_key_prefix(k),
                    &latch,
                ],
                &["0", owner, "PUBLISH", scripts::UNLOCK_LATCH_PX],
            ));
            latches.push(latch);
        }
        Family::Write => {
            let latch = scripts::unlock_latch(k, &format!("{owner}:{i}"));
            i += 1;
            p.add_command(SCRIPTS.rw_write_unlock.evalsha(
                &[k, &scripts::rwlock_channel(k), &latch],
                &["1", LEASE_MS, &writer, "PUBLISH", scripts::UNLOCK_LATCH_PX],
            ));
            latches.push(latch);
        }
    })
    .await?;
    for v in &replies {
        match f {
            Family::Semaphore => expect_nil(v, "RSemaphore release")?,
            Family::Expirable => expect_int(v, 1, "RPermitExpirableSemaphore release")?,
            Family::Read | Family::Write => expect_int(v, 1, "Redisson RW unlock script")?,
        }
    }
    row.redisson_release.add(stat, t);
    if let Some(cost) = row.redisson_latch_del.as_mut() {
        let (stat, t, replies) = phase(conn, admin, &latches, &["del"], |p, k| {
            p.cmd("DEL").arg(k);
        })
        .await?;
        for v in &replies {
            expect_int(v, 1, "DEL of the unlock latch")?;
        }
        cost.add(stat, t);
    }
    Ok(())
}

/// One command per key, pipelined; the commandstats delta of `stats`, the
/// time it took and the replies.
async fn phase(
    conn: &mut MultiplexedConnection,
    admin: &mut MultiplexedConnection,
    keys: &[String],
    stats: &[&str],
    mut add: impl FnMut(&mut redis::Pipeline, &str),
) -> Result<(CmdStat, Duration, Vec<Value>)> {
    let before = Snapshot::take(admin).await?;
    let start = Instant::now();
    let mut replies = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(COST_PIPELINE) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            add(&mut p, k);
        }
        replies.extend(conn::pipeline(conn, &p).await?);
    }
    let elapsed = start.elapsed();
    let after = Snapshot::take(admin).await?;
    Ok((before.delta(&after).stat(stats), elapsed, replies))
}
