//! The storage the semaphore rules run against: RPermitExpirableSemaphore's
//! two keys. Each write is one Redis effect (what the glue replicates).
//!
//! - the key: a string, the available permits as INCRBY reads it (may be
//!   negative);
//! - the lease set `{key}:timeout` (`channel::timeout_key`): a sorted set,
//!   member = a permit id's 16 raw bytes, score = its absolute deadline in
//!   server ms, or `NO_LEASE` (922337203685477) for a permit without one.

use super::PermitId;
use crate::lease::Millis;
use crate::string::StringValue;

/// What the lease set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetShape {
    Missing,
    Zset {
        len: usize,
    },
    /// Any type other than a sorted set (WRONGTYPE).
    Other,
}

pub trait SemaphoreStore {
    /// The permit count's bytes as read (GET).
    type Value: AsRef<[u8]>;
    /// A member read from the lease set (any bytes: Redisson before 3.17
    /// wrote 32 hex chars, anyone can ZADD anything).
    type Member: AsRef<[u8]>;

    /// The server clock, in ms since the epoch.
    fn now(&self) -> Millis;

    // ---- the key: the permit count ----

    /// GET key.
    fn permits(&mut self) -> StringValue<Self::Value>;
    /// The key's absolute expiry; `None`: no expiry (or no key).
    fn deadline(&mut self) -> Option<Millis>;
    /// `SET key permits` (with `PXAT deadline` when given) on a missing key
    /// (SEMAPHORE.CREATE).
    fn create(&mut self, permits: i64, deadline: Option<Millis>);
    /// `INCRBY key delta`: creates the key at `delta` when missing, keeps
    /// its TTL. The rules never let it overflow.
    fn incr(&mut self, delta: i64);
    /// `SET key value KEEPTTL` on an existing key (SEMAPHORE.DRAIN).
    fn set_permits(&mut self, value: i64);

    // ---- the lease set `{key}:timeout` ----

    /// Whether this node may use the lease set: `false` in cluster mode when
    /// `{key}:timeout` hashes to another slot than the key
    /// (`slot::timeout_key_same_slot`). The set is then never read (the
    /// store reports it `Missing`) nor written: LEASE, RETURN and RENEW
    /// answer CROSSSLOT, anonymous permits work.
    fn leases_in_slot(&self) -> bool;
    /// TYPE and ZCARD of `{key}:timeout`.
    fn leases(&mut self) -> SetShape;
    /// `ZSCORE {key}:timeout id`.
    fn score(&mut self, id: &[u8]) -> Option<f64>;
    /// `ZRANGEBYSCORE {key}:timeout -inf now`: the members whose score is
    /// ≤ `now` (lapsed, as Redisson reads them), lowest score first.
    fn lapsed(&mut self, now: Millis) -> Vec<Self::Member>;
    /// `ZCOUNT {key}:timeout (now +inf`: the members whose score is > `now`.
    fn live(&mut self, now: Millis) -> usize;
    /// The lowest score (`ZRANGE {key}:timeout 0 0 WITHSCORES`).
    fn first_score(&mut self) -> Option<f64>;
    /// `ZADD {key}:timeout score id [score id ...]`: every id at one score
    /// (creates the set; an id already there gets the new score).
    fn add_leases(&mut self, ids: &[PermitId], score: f64);
    /// `ZREM {key}:timeout member [member ...]` (Redis deletes the set when
    /// it becomes empty).
    fn remove_leases<M: AsRef<[u8]>>(&mut self, members: &[M]);
    /// The lease set's absolute expiry; `None`: no expiry (or no set).
    fn leases_deadline(&mut self) -> Option<Millis>;
    /// `PEXPIREAT {key}:timeout deadline` on the existing set.
    fn set_leases_deadline(&mut self, deadline: Millis);
    /// `PERSIST {key}:timeout`.
    fn persist_leases(&mut self);
}
