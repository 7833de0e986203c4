//! The uncontended lock variants of B1: how each one acquires and releases
//! a free lock, which replies prove it worked, and which commandstats
//! entries hold its server time.

use anyhow::Result;
use redis::Value;

use crate::conn::{expect_int, expect_nil, expect_ok};
use crate::scripts::{self, SCRIPTS};

/// Lease of every B1 lock (Redisson's watchdog default).
pub const LEASE_MS: &str = "30000";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// LOCK.ACQUIRE key owner PX 30000 / LOCK.RELEASE key owner.
    Hashlock,
    /// The Redisson scripts via EVALSHA (script cache).
    RedissonSha,
    /// The same via EVAL with the full text (what Redisson sends).
    RedissonEval,
    /// SET key token NX PX 30000 / compare-and-delete Lua via EVALSHA.
    SetNx,
}

impl Pairs {
    pub const ALL: [Pairs; 4] = [
        Pairs::Hashlock,
        Pairs::RedissonSha,
        Pairs::RedissonEval,
        Pairs::SetNx,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Pairs::Hashlock => "hashlock (LOCK.*)",
            Pairs::RedissonSha => "Redisson Lua, EVALSHA",
            Pairs::RedissonEval => "Redisson Lua, full-text EVAL",
            Pairs::SetNx => "SET NX PX + Lua compare-and-delete",
        }
    }

    /// commandstats names of the acquire and release commands.
    pub fn acquire_stat(self) -> &'static str {
        match self {
            Pairs::Hashlock => "lock.acquire",
            Pairs::RedissonSha => "evalsha",
            Pairs::RedissonEval => "eval",
            Pairs::SetNx => "set",
        }
    }

    pub fn release_stat(self) -> &'static str {
        match self {
            Pairs::Hashlock => "lock.release",
            Pairs::RedissonSha => "evalsha",
            Pairs::RedissonEval => "eval",
            Pairs::SetNx => "evalsha",
        }
    }

    /// Every top-level command the variant sends (deduplicated).
    pub fn stats(self) -> Vec<&'static str> {
        let (a, r) = (self.acquire_stat(), self.release_stat());
        if a == r { vec![a] } else { vec![a, r] }
    }

    /// Whether the lock can be re-entered by its owner.
    pub fn reentrant(self) -> bool {
        self != Pairs::SetNx
    }

    pub fn acquire(self, p: &mut redis::Pipeline, key: &str, owner: &str) {
        match self {
            Pairs::Hashlock => {
                p.cmd("LOCK.ACQUIRE")
                    .arg(key)
                    .arg(owner)
                    .arg("PX")
                    .arg(LEASE_MS);
            }
            Pairs::RedissonSha => {
                p.add_command(SCRIPTS.acquire.evalsha(&[key], &[LEASE_MS, owner]));
            }
            Pairs::RedissonEval => {
                p.add_command(SCRIPTS.acquire.eval(&[key], &[LEASE_MS, owner]));
            }
            Pairs::SetNx => {
                p.cmd("SET")
                    .arg(key)
                    .arg(owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(LEASE_MS);
            }
        }
    }

    pub fn release(self, p: &mut redis::Pipeline, key: &str, owner: &str) {
        let channel = || scripts::channel(key);
        match self {
            Pairs::Hashlock => {
                p.cmd("LOCK.RELEASE").arg(key).arg(owner);
            }
            Pairs::RedissonSha => {
                p.add_command(SCRIPTS.release.evalsha(
                    &[key, &channel()],
                    &[scripts::UNLOCK_MESSAGE, LEASE_MS, owner],
                ));
            }
            Pairs::RedissonEval => {
                p.add_command(SCRIPTS.release.eval(
                    &[key, &channel()],
                    &[scripts::UNLOCK_MESSAGE, LEASE_MS, owner],
                ));
            }
            Pairs::SetNx => {
                p.add_command(SCRIPTS.compare_and_delete.evalsha(&[key], &[owner]));
            }
        }
    }

    /// Checks the reply to an acquire that must succeed; `holds` is the
    /// hold count it must reach (1 = fresh).
    pub fn check_acquire(self, v: &Value, holds: i64) -> Result<()> {
        match self {
            Pairs::Hashlock => expect_int(v, holds, "LOCK.ACQUIRE"),
            Pairs::RedissonSha | Pairs::RedissonEval => expect_nil(v, "Redisson acquire script"),
            Pairs::SetNx => expect_ok(v, "SET NX PX"),
        }
    }

    /// Checks the reply to a release; `left` is the hold count after it.
    pub fn check_release(self, v: &Value, left: i64) -> Result<()> {
        match self {
            Pairs::Hashlock => expect_int(v, left, "LOCK.RELEASE"),
            Pairs::RedissonSha | Pairs::RedissonEval => {
                expect_int(v, if left == 0 { 1 } else { 0 }, "Redisson release script")
            }
            Pairs::SetNx => expect_int(v, 1, "compare-and-delete"),
        }
    }
}
