//! B2 renew (the watchdog's call): LOCK.RENEW vs the Redisson renew script
//! (EVALSHA) vs bare PEXPIRE (the floor: what any renew must at least do),
//! all on the same held locks, one client, pipeline 16.

use std::time::Instant;

use anyhow::Result;
use redis::aio::MultiplexedConnection;

use super::b1::{COST_PIPELINE, Cost};
use super::contender::owner;
use crate::conn::{self, Snapshot, expect_int};
use crate::scripts::SCRIPTS;

const LEASE_MS: &str = "30000";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renew {
    Hashlock,
    RedissonSha,
    Pexpire,
}

impl Renew {
    pub const ALL: [Renew; 3] = [Renew::Hashlock, Renew::RedissonSha, Renew::Pexpire];

    pub fn label(self) -> &'static str {
        match self {
            Renew::Hashlock => "LOCK.RENEW key owner PX 30000",
            Renew::RedissonSha => "Redisson renew script, EVALSHA",
            Renew::Pexpire => "PEXPIRE key 30000 (floor)",
        }
    }

    pub fn stat(self) -> &'static str {
        match self {
            Renew::Hashlock => "lock.renew",
            Renew::RedissonSha => "evalsha",
            Renew::Pexpire => "pexpire",
        }
    }

    fn add(self, p: &mut redis::Pipeline, key: &str, owner: &str) {
        match self {
            Renew::Hashlock => {
                p.cmd("LOCK.RENEW")
                    .arg(key)
                    .arg(owner)
                    .arg("PX")
                    .arg(LEASE_MS);
            }
            Renew::RedissonSha => {
                p.add_command(SCRIPTS.renew.evalsha(&[key], &[LEASE_MS, owner]));
            }
            Renew::Pexpire => {
                p.cmd("PEXPIRE").arg(key).arg(LEASE_MS);
            }
        }
    }
}

pub struct Row {
    pub variant: Renew,
    pub cost: Cost,
}

pub async fn run(
    port: u16,
    admin: &mut MultiplexedConnection,
    keys: usize,
    rounds: usize,
    mut progress: impl FnMut(),
) -> Result<Vec<Row>> {
    let mut conn = conn::connect(port).await?;
    let owner = owner("b2", 1);
    let names: Vec<String> = (0..keys).map(|i| format!("b2:{i:07}")).collect();
    // The locks every variant renews: taken by hashlock, the same hashes a
    // Redisson client would have written.
    for chunk in names.chunks(1000) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            p.cmd("LOCK.ACQUIRE")
                .arg(k)
                .arg(&owner)
                .arg("PX")
                .arg(LEASE_MS);
        }
        for r in conn::pipeline(&mut conn, &p).await? {
            expect_int(&r, 1, "LOCK.ACQUIRE")?;
        }
    }
    let mut rows: Vec<Row> = Renew::ALL
        .iter()
        .map(|&variant| Row {
            variant,
            cost: Cost::default(),
        })
        .collect();
    for _ in 0..rounds {
        for row in rows.iter_mut() {
            let before = Snapshot::take(admin).await?;
            let start = Instant::now();
            for chunk in names.chunks(COST_PIPELINE) {
                let mut p = redis::Pipeline::with_capacity(chunk.len());
                for k in chunk {
                    row.variant.add(&mut p, k, &owner);
                }
                for r in conn::pipeline(&mut conn, &p).await? {
                    expect_int(&r, 1, row.variant.label())?;
                }
            }
            let elapsed = start.elapsed();
            let after = Snapshot::take(admin).await?;
            row.cost
                .add(before.delta(&after).stat(&[row.variant.stat()]), elapsed);
            progress();
        }
    }
    for chunk in names.chunks(1000) {
        let mut p = redis::Pipeline::with_capacity(chunk.len());
        for k in chunk {
            p.cmd("LOCK.RELEASE").arg(k).arg(&owner);
        }
        for r in conn::pipeline(&mut conn, &p).await? {
            expect_int(&r, 0, "LOCK.RELEASE")?;
        }
    }
    Ok(rows)
}
