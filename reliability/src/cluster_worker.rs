//! R6's worker process: R1's churn (acquire with and without BLOCK,
//! re-entry, renew, a read-modify-write of a counter inside each hold,
//! release, sometimes walking away) through a cluster-aware client, on
//! keys spread over every primary.
//!
//! Differences from R1, because a primary can die here:
//! - every grant, re-entry, renewal and counter write is followed by
//!   `WAIT 1 <ms>` on the same connection (recorded as a `Wait` op); without
//!   a replica's acknowledgement the worker abandons the lock, as a client
//!   that requires durable grants would (the checker then does not count it);
//! - a call whose outcome is unknown (connection lost after sending, no
//!   reply in time, cluster unavailable) also abandons the lock;
//! - after abandoning, the worker takes a new owner name ("generation"), so
//!   a hold it may still have under the old name can never be confused with
//!   a new one.
//!
//! A call that gets no reply within its BLOCK time + 1 s (BLOCK 0: 15 s;
//! anything else: 10 s) is recorded as `Hung`: a waiter left hanging.

use std::path::PathBuf;
use std::time::Duration;

use testkit::rng::Rng;

use crate::churn::{WAIT_ACK_MS, op_args, outcome};
use crate::clock::{MS, mono_ns};
use crate::cluster_client::{CallResult, ClusterClient};
use crate::history::{self, Op, Outcome};
use crate::round;

/// How long a BLOCK 0 waiter may wait before it counts as hung: far more
/// than a queue of every other worker holding for a full lease.
pub const BLOCK0_LIMIT: Duration = Duration::from_secs(15);
/// How long any other call may take.
const CALL_LIMIT: Duration = Duration::from_secs(10);

pub struct ClusterWorkerArgs {
    pub ports: Vec<u16>,
    pub resp3: bool,
    pub seed: u64,
    pub id: usize,
    pub incarnation: u32,
    pub until_ns: u64,
    pub keys: Vec<String>,
    pub out: PathBuf,
    pub stats: PathBuf,
    /// False: no BLOCK at all (validates the harness where the module has
    /// no waiters to mishandle).
    pub blocking: bool,
}

/// The lock was given up (unconfirmed or unknown): end the round.
struct Abandon;

struct Worker {
    c: ClusterClient,
    h: history::Writer,
    rng: Rng,
    id: usize,
    incarnation: u32,
    generation: u32,
    keys: Vec<String>,
    until: u64,
    blocking: bool,
}

pub fn worker(a: ClusterWorkerArgs) {
    let mut w = Worker {
        c: ClusterClient::new(a.ports, a.resp3),
        h: history::Writer::create(&a.out).expect("history file"),
        rng: Rng::new(a.seed ^ ((a.id as u64) << 32) ^ (u64::from(a.incarnation) << 48)),
        id: a.id,
        incarnation: a.incarnation,
        generation: 0,
        keys: a.keys,
        until: a.until_ns,
        blocking: a.blocking,
    };
    while mono_ns() < w.until {
        if w.round().is_err() {
            w.generation += 1;
        }
    }
    let _ = std::fs::write(&a.stats, w.c.stats.lines());
}

/// How long the reply to `op` may take.
fn limit(op: &Op) -> Duration {
    match op {
        Op::Acquire {
            block_ms: Some(0), ..
        } => BLOCK0_LIMIT,
        Op::Acquire {
            block_ms: Some(b), ..
        } => Duration::from_millis(*b as u64) + Duration::from_secs(1),
        Op::Wait { .. } => Duration::from_millis(WAIT_ACK_MS) + Duration::from_secs(1),
        _ => CALL_LIMIT,
    }
}

fn key_of(op: &Op) -> &str {
    match op {
        Op::Acquire { key, .. }
        | Op::Release { key, .. }
        | Op::Renew { key, .. }
        | Op::Get { key }
        | Op::Set { key, .. }
        | Op::Wait { key } => key,
    }
}

/// A cluster: a call may have no known outcome, and a write counts only
/// once a replica has it.
impl round::Driver for Worker {
    type Abandon = Abandon;

    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// One call, recorded. `Err`: its outcome is unknown (nothing or HUNG
    /// recorded), the round must end.
    fn call(&mut self, op: Op) -> Result<(u64, Outcome), Abandon> {
        let args = op_args(&op);
        let lim = limit(&op);
        let t0 = mono_ns();
        let seq = self.h.invoke(&op, t0);
        let res = match &op {
            Op::Wait { .. } => self.c.call_on_last(&args, lim),
            _ => self.c.call(&args, key_of(&op).as_bytes(), lim),
        };
        match res {
            CallResult::Reply(r) => {
                let out = outcome(r);
                self.h.returned(seq, mono_ns(), &out);
                Ok((t0, out))
            }
            CallResult::Hung(why) => {
                self.h.returned(seq, mono_ns(), &Outcome::Hung(why));
                Err(Abandon)
            }
            // No return line: may or may not have happened.
            CallResult::Unknown(_) | CallResult::Unavailable(_) => Err(Abandon),
        }
    }

    /// `WAIT 1` after a write on `key`: Ok only if a replica has it.
    fn confirm(&mut self, key: &str) -> Result<(), Abandon> {
        match self.call(Op::Wait {
            key: key.to_string(),
        })? {
            (_, Outcome::Int(n)) if n >= 1 => Ok(()),
            _ => Err(Abandon),
        }
    }
}

impl Worker {
    fn me(&self) -> Vec<u8> {
        format!("w{}.{}.{}", self.id, self.incarnation, self.generation).into_bytes()
    }

    fn round(&mut self) -> Result<(), Abandon> {
        let key = self.keys[self.rng.below(self.keys.len() as u64) as usize].clone();
        let owner = if self.rng.chance(5) {
            b"*".to_vec()
        } else {
            self.me()
        };
        let left_ms = self.until.saturating_sub(mono_ns()) / MS;
        let block = if self.rng.chance(50) && self.blocking {
            // More BLOCK 0 than R1: a waiter with no timeout is the one a
            // role change can leave hanging for ever.
            Some(if self.rng.chance(15) && left_ms > 3000 {
                0
            } else {
                self.rng.range(1, 600)
            })
        } else {
            None
        };
        round::plain(self, key, owner, block)
    }
}
