//! The storage the lock rules run against: one key, seen as a small hash with
//! an absolute expiry. The Redis glue implements it with the low-level key
//! API (and replicates each write as it makes it); `memory` implements it in
//! plain Rust for unit and property tests.

use super::error::LockResult;
use super::lease::Millis;

/// What a key holds, before the lock rules look inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Missing,
    Hash {
        fields: usize,
    },
    /// Any type other than a hash.
    Other,
}

pub trait LockStore {
    /// How the store names hash fields (owners): borrowed client arguments in
    /// the glue, so nothing is copied on the hot path.
    type Name: AsRef<[u8]> + ?Sized;
    /// A hash value read from the store.
    type Value: AsRef<[u8]>;

    /// The server clock, in ms since the epoch.
    fn now(&self) -> Millis;
    fn shape(&mut self) -> Shape;
    /// The value of one hash field.
    fn get(&mut self, field: &Self::Name) -> Option<Self::Value>;
    /// The field and value of a hash with exactly one field.
    fn only_entry(&mut self) -> Option<(Vec<u8>, Vec<u8>)>;
    /// Milliseconds until the key expires; `None` if it has no expiry.
    fn ttl(&mut self) -> Option<Millis>;

    /// HSET: creates the key if needed, keeps its expiry.
    fn set_holds(&mut self, owner: &Self::Name, holds: i64);
    /// PEXPIREAT on an existing key.
    fn set_deadline(&mut self, deadline: Millis);
    /// PERSIST: the existing key no longer expires.
    fn clear_deadline(&mut self);
    /// DEL.
    fn delete(&mut self);

    /// The lock's fencing-token counter (RFencedLock's
    /// `redisson_lock_token:{key}`, a string holding an integer): 0 when it
    /// does not exist; WRONGTYPE or an error when INCR would refuse it.
    fn token(&mut self) -> LockResult<i64>;
    /// Sets the counter (keeps any expiry someone gave it).
    fn set_token(&mut self, token: i64);
}

/// A store borrowed mutably is a store: LOCK.MACQUIRE's rules take a slice
/// of stores, and the glue serving one key's queue already has that key
/// open (a second handle to the same key is not allowed) while it opens
/// the multi-key waiter's other keys.
impl<S: LockStore + ?Sized> LockStore for &mut S {
    type Name = S::Name;
    type Value = S::Value;

    fn now(&self) -> Millis {
        (**self).now()
    }
    fn shape(&mut self) -> Shape {
        (**self).shape()
    }
    fn get(&mut self, field: &Self::Name) -> Option<Self::Value> {
        (**self).get(field)
    }
    fn only_entry(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        (**self).only_entry()
    }
    fn ttl(&mut self) -> Option<Millis> {
        (**self).ttl()
    }
    fn set_holds(&mut self, owner: &Self::Name, holds: i64) {
        (**self).set_holds(owner, holds)
    }
    fn set_deadline(&mut self, deadline: Millis) {
        (**self).set_deadline(deadline)
    }
    fn clear_deadline(&mut self) {
        (**self).clear_deadline()
    }
    fn delete(&mut self) {
        (**self).delete()
    }
    fn token(&mut self) -> LockResult<i64> {
        (**self).token()
    }
    fn set_token(&mut self, token: i64) {
        (**self).set_token(token)
    }
}
