//! The storage an RW lock's rules run against: the hash at the key, the
//! timeout key of every read hold (by its computed name), and the fencing
//! token counter. Each write is one Redis effect; the glue replicates it as
//! that effect with absolute times.

use crate::error::LockResult;
use crate::lease::Millis;
use crate::store::Shape;

/// PTTL of a key, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// No such key (it lapsed, or was never written): PTTL -2.
    Missing,
    /// The key exists and never expires: PTTL -1.
    Forever,
    /// Milliseconds left (0 in its last millisecond).
    Left(Millis),
}

pub trait RwLockStore {
    /// The server clock, in ms since the epoch.
    fn now(&self) -> Millis;

    // ---- the hash at the key ----

    /// TYPE of the key.
    fn shape(&mut self) -> Shape;
    /// HGETALL: every field and value (only called on a hash).
    fn entries(&mut self) -> Vec<(Vec<u8>, Vec<u8>)>;
    /// PTTL of the hash: ms left, `None` when it has no expiry (only called
    /// when it exists).
    fn ttl(&mut self) -> Option<Millis>;
    /// HSET field value (creates the hash, keeps its expiry).
    fn set_field(&mut self, field: &[u8], value: &[u8]);
    /// Every write made so far is replicated (a store may batch field
    /// writes; `commit` ends with this).
    fn replicate_writes(&mut self) {}
    /// HDEL field (the rules never remove the last field this way: `mode`
    /// stays until `delete`).
    fn delete_field(&mut self, field: &[u8]);
    /// PEXPIREAT on the existing hash.
    fn set_deadline(&mut self, deadline: Millis);
    /// PERSIST the existing hash.
    fn clear_deadline(&mut self);
    /// DEL the hash.
    fn delete(&mut self);

    // ---- read holds' timeout keys: `channel::rwlock_timeout_key(key, owner, n)` ----

    /// Whether `owner`'s timeout keys may be read and written here: in
    /// cluster mode, `CROSSSLOT` (`LockError::RwCrossSlot`) when they hash
    /// to another slot than the key (`slot::rwlock_timeout_key_same_slot`). The
    /// rules ask before touching any timeout key of that owner.
    fn check_hold_slot(&mut self, owner: &[u8]) -> LockResult<()>;
    /// PTTL of hold `n`'s timeout key.
    fn hold_ttl(&mut self, owner: &[u8], n: i64) -> KeyTtl;
    /// `SET <timeout key> 1 PXAT deadline` (`SET <timeout key> 1` for
    /// `None`): creates or overwrites hold `n`'s key.
    fn set_hold(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>);
    /// PEXPIREAT (PERSIST for `None`) on hold `n`'s existing key.
    fn set_hold_deadline(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>);
    /// DEL hold `n`'s key.
    fn delete_hold(&mut self, owner: &[u8], n: i64);

    // ---- the fencing-token counter `redisson_lock_token:{key}` (as LOCK.*) ----

    /// Its value, 0 when it does not exist; WRONGTYPE or an error when INCR
    /// would refuse it; CROSSSLOT (`TokenCrossSlot`) in cluster mode when
    /// it hashes to another slot.
    fn token(&mut self) -> LockResult<i64>;
    /// SET the counter (keeps any expiry someone gave it).
    fn set_token(&mut self, token: i64);
}
