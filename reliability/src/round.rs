//! One round of the churn workload after the lock request is chosen:
//! acquire, maybe re-enter, a read-modify-write of the counter inside the
//! hold (renewing first if the lease is short), maybe renew, then release
//! every hold or walk away. Shared by R1 (one server, `churn`) and R6 (a
//! cluster, `cluster_worker`); the worker supplies the recorded call and
//! what must follow a successful write (nothing on one server, a replica's
//! acknowledgement on a cluster).

use std::time::Duration;

use testkit::rng::Rng;

use crate::clock::{MS, mono_ns};
use crate::history::{Op, Outcome};

/// Leaves this much of the safe window free before each step of a critical
/// section: the next reply must come back within it (a client paused longer
/// than that writes "late", which the checker reports separately).
const MARGIN_BEFORE_SECTION_MS: u64 = 30;
const MARGIN_BEFORE_WRITE_MS: u64 = 20;

/// A worker as a round sees it.
pub trait Driver {
    /// Why the round had to stop early (a call with an unknown outcome, a
    /// write no replica confirmed).
    type Abandon;
    fn rng(&mut self) -> &mut Rng;
    /// One call, recorded: (invoke ns, outcome).
    fn call(&mut self, op: Op) -> Result<(u64, Outcome), Self::Abandon>;
    /// After each write the worker counts on (grant, re-entry, renewal,
    /// counter write).
    fn confirm(&mut self, key: &str) -> Result<(), Self::Abandon>;
}

/// The counter's value from a `GET` (absent: 0).
pub fn counter_value(got: &Outcome) -> i64 {
    match got {
        Outcome::Bulk(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// Renews with a plain lease; true with `end` moved when renewed (and
/// confirmed), else `end` is 0: the safe window is over.
pub fn renew<D: Driver>(
    d: &mut D,
    key: &str,
    owner: &[u8],
    lease_ms: i64,
    end: &mut u64,
) -> Result<bool, D::Abandon> {
    let (t0, out) = d.call(Op::Renew {
        key: key.to_string(),
        owner: owner.to_vec(),
        lease_ms,
        keepalive: false,
    })?;
    if out == Outcome::Int(1) {
        d.confirm(key)?;
        *end = t0 + lease_ms as u64 * MS;
        Ok(true)
    } else {
        *end = 0;
        Ok(false)
    }
}

/// The round for `LOCK.ACQUIRE key owner PX 50..500 [BLOCK block]`.
pub fn plain<D: Driver>(
    d: &mut D,
    key: String,
    owner: Vec<u8>,
    block: Option<i64>,
) -> Result<(), D::Abandon> {
    let lease = d.rng().range(50, 500);
    let (t0, out) = d.call(Op::Acquire {
        key: key.clone(),
        owner: owner.clone(),
        lease_ms: lease,
        block_ms: block,
        keepalive: false,
    })?;
    // More than 1: this owner walked away from the lock earlier and the
    // lease has not run out yet, so this is a re-entry.
    let (owner, first_holds) = match out {
        Outcome::Int(n) if n >= 1 => (owner, n),
        Outcome::Bulk(uuid) => (uuid, 1),
        _ => {
            // Busy (or an error the checker reports): try again soon.
            let pause = d.rng().below(3);
            std::thread::sleep(Duration::from_millis(pause));
            return Ok(());
        }
    };
    d.confirm(&key)?;
    // The safe window ends `lease` after the invocation.
    let mut end = t0 + lease as u64 * MS;
    let mut holds = first_holds;

    if d.rng().chance(20) {
        let lease = d.rng().range(50, 500);
        let (t0, out) = d.call(Op::Acquire {
            key: key.clone(),
            owner: owner.clone(),
            lease_ms: lease,
            block_ms: None,
            keepalive: false,
        })?;
        match out {
            Outcome::Int(n) => {
                d.confirm(&key)?;
                holds = n;
                end = t0 + lease as u64 * MS;
            }
            _ => end = 0,
        }
    }

    if d.rng().chance(85) && end > 0 {
        let hold = d.rng().range(0, 20) as u64;
        if mono_ns() + (hold + MARGIN_BEFORE_SECTION_MS) * MS > end {
            // Not enough lease left for the section: the watchdog's job.
            let lease = d.rng().range((hold as i64 + 60).max(50), 500);
            renew(d, &key, &owner, lease, &mut end)?;
        }
        if end > 0 && mono_ns() + (hold + MARGIN_BEFORE_SECTION_MS) * MS <= end {
            let (_, got) = d.call(Op::Get { key: key.clone() })?;
            let value = counter_value(&got);
            if d.rng().chance(15) {
                std::thread::sleep(Duration::from_millis(hold / 2));
                let lease = d.rng().range(60, 500);
                renew(d, &key, &owner, lease, &mut end)?;
                std::thread::sleep(Duration::from_millis(hold - hold / 2));
            } else {
                std::thread::sleep(Duration::from_millis(hold));
            }
            // Write only with time to spare; otherwise abandon the
            // section (the write could land after someone else's read).
            if end > 0 && mono_ns() + MARGIN_BEFORE_WRITE_MS * MS < end {
                let (_, set) = d.call(Op::Set {
                    key: key.clone(),
                    value: value + 1,
                })?;
                if set == Outcome::Ok {
                    d.confirm(&key)?;
                }
            }
        }
    }

    if d.rng().chance(10) && end > 0 {
        let lease = d.rng().range(50, 500);
        renew(d, &key, &owner, lease, &mut end)?;
    }
    if d.rng().chance(5) {
        // Walk away: the lease frees the lock (and serves waiters).
        return Ok(());
    }
    for _ in 0..holds {
        let (_, out) = d.call(Op::Release {
            key: key.clone(),
            owner: owner.clone(),
        })?;
        if !matches!(out, Outcome::Int(n) if n > 0) {
            break;
        }
    }
    Ok(())
}
