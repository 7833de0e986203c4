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
    /// The last fencing token issued for the key (0: none, or unreadable).
    pub token: i64,
}

/// What one owner asks for: the lock, for a lease, perhaps with a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a, N: ?Sized> {
    pub owner: &'a N,
    pub lease: Lease,
    /// Issue a fencing token with the grant.
    pub token: bool,
}

impl<'a, N: ?Sized> Claim<'a, N> {
    pub fn new(owner: &'a N, lease: Lease) -> Claim<'a, N> {
        Claim {
            owner,
            lease,
            token: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// Taken or re-entered: the hold count after this call, and the fencing
    /// token issued with it (if one was asked for).
    Granted { holds: i64, token: Option<i64> },
    /// Held by another owner, or free but promised to queued waiters.
    Busy,
}

/// Tokens never fall below the server clock in ms times this: far above
/// any plain counter, and above every token issued before a failover that
/// took longer than the servers' clocks differ (a lock is acquired at most a
/// few hundred times a millisecond, so the counter never outruns it).
pub const TOKEN_FLOOR_PER_MS: i64 = 1000;

/// The token that follows `current` at `now`: strictly above it, and never
/// below the clock floor.
pub fn next_token(current: i64, now: Millis) -> LockResult<i64> {
    let next = current.checked_add(1).ok_or(LockError::TokenOverflow)?;
    Ok(next.max(now.saturating_mul(TOKEN_FLOOR_PER_MS)))
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
    parse_positive(value.as_ref())
        .filter(|_| !owner::is_reserved(owner.as_ref()))
        .map(|holds| Holding::Mine { holds })
        // A field literally named `*` can be written by hand, but `*` never
        // holds a lock: such a hash is not a lock at all.
        .ok_or(LockError::NotLock)
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
/// a positive integer and the owner is not `*`.
fn only_holder<S: LockStore>(lock: &mut S) -> LockResult<(Vec<u8>, i64)> {
    let (owner, value) = lock.only_entry().ok_or(LockError::NotLock)?;
    let holds = parse_positive(&value).ok_or(LockError::NotLock)?;
    // A field no LOCK.* call could name (`*`, empty, over 1024 bytes) is not
    // a lock's owner.
    if owner::is_reserved(&owner) || owner::validate(&owner).is_err() {
        return Err(LockError::NotLock);
    }
    Ok((owner, holds))
}

/// LOCK.ACQUIRE without waiting. `queued`: clients are waiting for this key,
/// so a free lock is theirs, not a newcomer's.
pub fn acquire<S: LockStore>(
    lock: &mut S,
    claim: &Claim<'_, S::Name>,
    queued: bool,
) -> LockResult<Acquired> {
    let deadline = claim.lease.deadline_from(lock.now())?;
    let holds = match holding(lock, claim.owner)? {
        Holding::Mine { holds } => holds.checked_add(1).ok_or(LockError::HoldOverflow)?,
        Holding::Free if !queued => 1,
        Holding::Free | Holding::Theirs => return Ok(Acquired::Busy),
    };
    // Read (and check) the counter before the first write.
    let token = match claim.token {
        true => Some(next_token(lock.token()?, lock.now())?),
        false => None,
    };
    lock.set_holds(claim.owner, holds);
    lock.set_deadline(deadline);
    if let Some(token) = token {
        lock.set_token(token);
    }
    Ok(Acquired::Granted { holds, token })
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

/// LOCK.FORCERELEASE: removes any lock. The owner it had, if there was one.
pub fn force_release<S: LockStore>(lock: &mut S) -> LockResult<Option<Vec<u8>>> {
    if !lock_shaped(lock)? {
        return Ok(None);
    }
    let (owner, _) = only_holder(lock)?;
    lock.delete();
    Ok(Some(owner))
}

/// LOCK.INFO: who holds the lock, if anyone.
pub fn info<S: LockStore>(lock: &mut S) -> LockResult<Option<Holder>> {
    if !lock_shaped(lock)? {
        return Ok(None);
    }
    let (owner, holds) = only_holder(lock)?;
    let ttl = lock.ttl();
    // A counter someone broke does not make the lock unreadable.
    let token = lock.token().unwrap_or(0);
    Ok(Some(Holder {
        owner,
        holds,
        ttl,
        token,
    }))
}

/// Takes back one hold `owner` was given but must not keep: a grant whose
/// client vanished before its reply, or a grant or re-entry the replicas did
/// not acknowledge in time. `None` if `owner` no longer holds the lock (its
/// lease ran out, or someone removed it): there is nothing to give back.
pub fn take_back<S: LockStore>(lock: &mut S, owner: &S::Name) -> LockResult<Option<Released>> {
    match release(lock, owner) {
        Ok(released) => Ok(Some(released)),
        Err(LockError::NotOwner) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Puts back the deadline a renewal replaced (the replicas did not
/// acknowledge it), if `owner` still holds the lock. `None`: the lock had
/// no expiry before the renewal, and has none again.
pub fn restore_deadline<S: LockStore>(
    lock: &mut S,
    owner: &S::Name,
    deadline: Option<Millis>,
) -> LockResult<bool> {
    match holding(lock, owner)? {
        Holding::Mine { .. } => {
            match deadline {
                Some(deadline) => lock.set_deadline(deadline),
                None => lock.clear_deadline(),
            }
            Ok(true)
        }
        Holding::Free | Holding::Theirs => Ok(false),
    }
}

/// Every hold of `owner`, dropped at once (its tied connection closed).
/// `true` if it held the lock, which is now free.
pub fn release_all<S: LockStore>(lock: &mut S, owner: &S::Name) -> LockResult<bool> {
    match holding(lock, owner)? {
        Holding::Mine { .. } => {
            lock.delete();
            Ok(true)
        }
        Holding::Free | Holding::Theirs => Ok(false),
    }
}
