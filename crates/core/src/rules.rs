//! The lock rules: reentrancy, owner checks, leases. Each command is one
//! function from the key's current state (read through `LockStore`) to the
//! writes it makes and an outcome the glue turns into a reply and follow-ups
//! (publish the unlock, hand the lock to the next waiter).
//!
//! Every function validates everything before its first write, so an error
//! always means "nothing changed".

use super::error::{LockError, LockResult};
use super::lease::{Lease, Millis};
use super::number::parse_positive;
use super::owner;
use super::store::{LockStore, Shape};

/// The lock at a key, from one owner's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    Free,
    Mine { holds: i64 },
    Theirs,
}

/// Who holds a lock (LOCK.INFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub owner: Vec<u8>,
    pub holds: i64,
    /// Milliseconds left; `None`: no expiry.
    pub ttl: Option<Millis>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// Taken or re-entered; the hold count after this call.
    Granted { holds: i64 },
    /// Held by another owner, or free but promised to queued waiters.
    Busy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Still held by the same owner, this many times.
    Held { holds: i64 },
    /// The key is gone: publish the unlock or serve the next waiter.
    Freed,
}

/// Reads the lock as `owner` sees it, enforcing the lock shape: WRONGTYPE for
/// non-hashes, NOTLOCK for a hash that is not exactly one positive count.
pub fn holding<S: LockStore>(lock: &mut S, owner: &S::Name) -> LockResult<Holding> {
    if !lock_shaped(lock)? {
        return Ok(Holding::Free);
    }
    let Some(value) = lock.get(owner) else {
        only_holder(lock)?;
        return Ok(Holding::Theirs);
    };
    let holds = parse_positive(value.as_ref()).ok_or(LockError::NotLock)?;
    // A field literally named `*` can be written by hand, but `*` never
    // holds a lock.
    if owner::is_reserved(owner.as_ref()) {
        return Ok(Holding::Theirs);
    }
    Ok(Holding::Mine { holds })
}

/// Whether the key can hold a lock: `false` when there is no key, WRONGTYPE
/// for a non-hash, NOTLOCK for a hash of several fields.
fn lock_shaped<S: LockStore>(lock: &mut S) -> LockResult<bool> {
    match lock.shape() {
        Shape::Missing => Ok(false),
        Shape::Other => Err(LockError::WrongType),
        Shape::Hash { fields: 1 } => Ok(true),
        Shape::Hash { .. } => Err(LockError::NotLock),
    }
}

/// The owner and hold count of a one-field hash; NOTLOCK unless the count is
/// a positive integer.
fn only_holder<S: LockStore>(lock: &mut S) -> LockResult<(Vec<u8>, i64)> {
    let (owner, value) = lock.only_entry().ok_or(LockError::NotLock)?;
    let holds = parse_positive(&value).ok_or(LockError::NotLock)?;
    Ok((owner, holds))
}

/// LOCK.ACQUIRE without waiting. `queued`: clients are waiting for this key,
/// so a free lock is theirs, not a newcomer's.
pub fn acquire<S: LockStore>(
    lock: &mut S,
    owner: &S::Name,
    lease: Lease,
    queued: bool,
) -> LockResult<Acquired> {
    let deadline = lease.deadline_from(lock.now())?;
    let holds = match holding(lock, owner)? {
        Holding::Mine { holds } => holds.checked_add(1).ok_or(LockError::HoldOverflow)?,
        Holding::Free if !queued => 1,
        Holding::Free | Holding::Theirs => return Ok(Acquired::Busy),
    };
    lock.set_holds(owner, holds);
    lock.set_deadline(deadline);
    Ok(Acquired::Granted { holds })
}

/// LOCK.RELEASE: drops one hold; the lease is left as it is until the last.
pub fn release<S: LockStore>(lock: &mut S, owner: &S::Name) -> LockResult<Released> {
    match holding(lock, owner)? {
        Holding::Mine { holds } if holds > 1 => {
            lock.set_holds(owner, holds - 1);
            Ok(Released::Held { holds: holds - 1 })
        }
        Holding::Mine { .. } => {
            lock.delete();
            Ok(Released::Freed)
        }
        Holding::Free | Holding::Theirs => Err(LockError::NotOwner),
    }
}

/// LOCK.RENEW: the watchdog call. `true` if `owner` holds the lock.
pub fn renew<S: LockStore>(lock: &mut S, owner: &S::Name, lease: Lease) -> LockResult<bool> {
    let deadline = lease.deadline_from(lock.now())?;
    match holding(lock, owner)? {
        Holding::Mine { .. } => {
            lock.set_deadline(deadline);
            Ok(true)
        }
        Holding::Free | Holding::Theirs => Ok(false),
    }
}

/// LOCK.FORCERELEASE: removes any lock. `true` if there was one.
pub fn force_release<S: LockStore>(lock: &mut S) -> LockResult<bool> {
    if !lock_shaped(lock)? {
        return Ok(false);
    }
    only_holder(lock)?;
    lock.delete();
    Ok(true)
}

/// LOCK.INFO: who holds the lock, if anyone.
pub fn info<S: LockStore>(lock: &mut S) -> LockResult<Option<Holder>> {
    if !lock_shaped(lock)? {
        return Ok(None);
    }
    let (owner, holds) = only_holder(lock)?;
    let ttl = lock.ttl();
    Ok(Some(Holder { owner, holds, ttl }))
}
