//! The one error type of hashlock. Every refusal a client can see is a
//! `LockError`; the glue turns it into a Redis error reply in exactly one
//! place (`glue::reply::error`). The first word of each message is the Redis
//! error code, so clients and `INFO errorstats` can tell them apart.

use std::borrow::Cow;
use std::fmt;

use super::command::Command;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Wrong number of arguments (same text Redis uses for its own commands).
    Arity(Command),
    /// Unknown, repeated or conflicting option.
    Syntax(&'static str),
    /// PX/EX not a positive integer, or a deadline that would overflow.
    BadLease(&'static str),
    /// Owner empty or longer than `MAX_OWNER_LEN`.
    BadOwner,
    /// BLOCK not a non-negative integer, or out of range.
    BadTimeout(&'static str),
    /// The key holds something other than a hash.
    WrongType,
    /// RELEASE by an owner that does not hold the lock. Loud on purpose: a
    /// lost lease must never pass silently.
    NotOwner,
    /// The key holds a hash that is not a lock (several fields, or a hold
    /// count that is not a positive integer).
    NotLock,
    /// Re-entering would overflow the hold count (as HINCRBY would).
    HoldOverflow,
    /// `REPLICAS n ms` with a bad n or ms.
    BadReplicas(&'static str),
    /// An option that cannot work where it was used (KEEPALIVE in a script,
    /// REPLICAS inside MULTI/EXEC): the full message after `ERR `.
    NotHere(&'static str),
    /// The fencing-token counter holds something INCR would refuse.
    TokenNotInteger,
    /// The next fencing token would overflow.
    TokenOverflow,
    /// TOKEN on a key whose token counter hashes to another cluster slot.
    TokenCrossSlot,
    /// Fewer replicas than asked for were online at the call (nothing was
    /// done), or acknowledged its writes in time (they were undone).
    NoReplicas {
        wanted: i64,
        acked: i64,
        waited: bool,
    },
    /// The replicas acknowledged the call, but what it was granted had
    /// lapsed or moved to someone else by then.
    NoReplicasLost,
    /// The caller may not access a key the module derives from its key.
    NoPerm(&'static str),
    /// KEEPALIVE with a lease shorter than renewals can keep alive.
    KeepAliveTooShort { min_ms: i64 },
    /// A LOCK.* write on a replica.
    ReadOnly,
    /// A waiter whose node stopped being a primary.
    Unblocked,
    /// A bug inside the module, caught by the panic firewall.
    Internal(String),
    /// An argument out of its range: the full message after `ERR `
    /// (`invalid COUNT: must be a positive integer`).
    Invalid(&'static str),
    /// The key holds a string that is not a decimal integer (a semaphore).
    NotSemaphore,
    /// The key holds a string that is not a decimal integer (a latch).
    NotLatch,
    /// INCRBY would overflow the permit count (Redis's own refusal).
    CountOverflow,
    /// A permit id that is not 32 hex characters, or given twice.
    BadPermitId(&'static str),
    /// SEMAPHORE.RETURN of an id that is not leased now (never leased,
    /// returned, or lapsed).
    NotLeased,
    /// A semaphore write whose `{key}:timeout` hashes to another slot.
    TimeoutCrossSlot,
    /// RWLOCK.ACQUIRE WRITE by an owner holding READ but not WRITE: an
    /// upgrade would deadlock.
    NoUpgrade,
    /// An RW lock owner named `mode` or ending in `:write` (Redisson's
    /// layout could not tell it from the mode field or a writer).
    RwOwner,
    /// The key holds a hash that is not a read-write lock.
    NotRwLock,
    /// An RW lock would have more read holds than `rwlock::MAX_READ_HOLDS`.
    ReadHoldLimit,
    /// A read hold's timeout key would hash to another cluster slot.
    RwCrossSlot,
    /// `numkeys` of LOCK.MACQUIRE / LOCK.MRELEASE: the full message after `ERR `.
    NumKeys(&'static str),
    /// The same key twice in LOCK.MACQUIRE / LOCK.MRELEASE.
    DuplicateKey,
    /// Owner `*` where the server cannot generate one (LOCK.MACQUIRE / LOCK.MRELEASE).
    OwnerRequired,
    /// LOCK.MACQUIRE / LOCK.MRELEASE keys in different cluster slots.
    KeysCrossSlot,
}

impl LockError {
    /// The Redis error code: the first word of the reply.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::WrongType => "WRONGTYPE",
            LockError::NotOwner => "NOTOWNER",
            LockError::NotLock => "NOTLOCK",
            LockError::TokenCrossSlot | LockError::TimeoutCrossSlot => "CROSSSLOT",
            LockError::NotSemaphore => "NOTSEMAPHORE",
            LockError::NotLatch => "NOTLATCH",
            LockError::NotLeased => "NOTOWNER",
            LockError::NoReplicas { .. } | LockError::NoReplicasLost => "NOREPLICAS",
            LockError::NoPerm(_) => "NOPERM",
            LockError::ReadOnly => "READONLY",
            LockError::Unblocked => "UNBLOCKED",
            LockError::NoUpgrade => "NOUPGRADE",
            LockError::NotRwLock => "NOTLOCK",
            LockError::RwCrossSlot | LockError::KeysCrossSlot => "CROSSSLOT",
            _ => "ERR",
        }
    }

    /// The full error text, code first, as sent to the client.
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            LockError::Arity(cmd) => Cow::Owned(format!(
                "ERR wrong number of arguments for '{}' command",
                cmd.name()
            )),
            LockError::Syntax(why) => Cow::Owned(format!("ERR syntax error: {why}")),
            LockError::BadLease(why) => Cow::Owned(format!("ERR invalid lease: {why}")),
            LockError::BadOwner => Cow::Borrowed("ERR invalid owner: must be 1 to 1024 bytes"),
            LockError::BadTimeout(why) => Cow::Owned(format!("ERR invalid BLOCK timeout: {why}")),
            LockError::WrongType => {
                Cow::Borrowed("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            LockError::NotOwner => Cow::Borrowed(
                "NOTOWNER lock not held by this owner (expired, released or never acquired)",
            ),
            LockError::NotLock => Cow::Borrowed(
                "NOTLOCK key holds a hash that is not a lock (one field with a positive integer hold count expected)",
            ),
            LockError::HoldOverflow => Cow::Borrowed("ERR hold count would overflow"),
            LockError::BadReplicas(why) => Cow::Owned(format!("ERR invalid REPLICAS: {why}")),
            LockError::NotHere(why) => Cow::Owned(format!("ERR {why}")),
            LockError::TokenNotInteger => {
                Cow::Borrowed("ERR the fencing-token counter is not an integer or out of range")
            }
            LockError::TokenOverflow => Cow::Borrowed("ERR the fencing token would overflow"),
            LockError::TokenCrossSlot => Cow::Borrowed(
                "CROSSSLOT the key's fencing-token counter (redisson_lock_token:...) hashes to another slot; give the key a hash tag",
            ),
            LockError::NoReplicas {
                wanted,
                acked,
                waited: false,
            } => Cow::Owned(format!(
                "NOREPLICAS not enough replicas online: {acked} of {wanted}; nothing was done"
            )),
            LockError::NoReplicas {
                wanted,
                acked,
                waited: true,
            } => Cow::Owned(format!(
                "NOREPLICAS not enough replicas acknowledged in time: {acked} of {wanted}; the call was undone"
            )),
            LockError::NoReplicasLost => Cow::Borrowed(
                "NOREPLICAS the grant was lost before the replicas acknowledged it (its lease ran out or it was released or taken meanwhile)",
            ),
            LockError::NoPerm(what) => Cow::Owned(format!(
                "NOPERM this user has no permissions to access {what}"
            )),
            LockError::KeepAliveTooShort { min_ms } => Cow::Owned(format!(
                "ERR KEEPALIVE needs a lease of at least {min_ms} ms (lock.keepalive-min-lease-ms): the server renews it every third of the lease"
            )),
            LockError::ReadOnly => {
                Cow::Borrowed("READONLY You can't write against a read only replica.")
            }
            LockError::Unblocked => Cow::Borrowed(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            ),
            LockError::Internal(what) => Cow::Owned(format!(
                "ERR internal error in the lock module: {what} (details in the server log)"
            )),
            LockError::Invalid(why) => Cow::Owned(format!("ERR {why}")),
            LockError::NotSemaphore => Cow::Borrowed(
                "NOTSEMAPHORE key holds a string that is not a permit count (a decimal integer expected)",
            ),
            LockError::NotLatch => Cow::Borrowed(
                "NOTLATCH key holds a string that is not a latch count (a decimal integer expected)",
            ),
            LockError::CountOverflow => Cow::Borrowed("ERR increment or decrement would overflow"),
            LockError::BadPermitId(why) => Cow::Owned(format!("ERR invalid permit id: {why}")),
            LockError::NotLeased => Cow::Borrowed(
                "NOTOWNER permit not leased (lapsed, returned or never leased); nothing was returned",
            ),
            LockError::TimeoutCrossSlot => Cow::Borrowed(
                "CROSSSLOT the semaphore's lease set ({key}:timeout) hashes to another slot; give the key a hash tag",
            ),
            LockError::NoUpgrade => Cow::Borrowed(
                "NOUPGRADE the owner holds this lock for reading: release READ before taking WRITE (an upgrade would deadlock)",
            ),
            LockError::RwOwner => Cow::Borrowed(
                "ERR invalid owner: a read-write lock owner may not be 'mode' or end in ':write'",
            ),
            LockError::NotRwLock => Cow::Borrowed(
                "NOTLOCK key holds a hash that is not a read-write lock (a mode field 'read' or 'write' and positive integer hold counts expected)",
            ),
            LockError::ReadHoldLimit => {
                Cow::Borrowed("ERR too many read holds on this lock (at most 100000)")
            }
            LockError::RwCrossSlot => Cow::Borrowed(
                "CROSSSLOT a read hold's timeout key ({key}:<owner>:rwlock_timeout:<n>) hashes to another slot; give the key a hash tag",
            ),
            LockError::NumKeys(why) => Cow::Owned(format!("ERR {why}")),
            LockError::DuplicateKey => Cow::Borrowed("ERR the same key is given more than once"),
            LockError::OwnerRequired => Cow::Borrowed(
                "ERR invalid owner: '*' is not allowed here (give the owner that will release the locks)",
            ),
            LockError::KeysCrossSlot => {
                Cow::Borrowed("CROSSSLOT Keys in request don't hash to the same slot")
            }
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for LockError {}

pub type LockResult<T> = Result<T, LockError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_starts_with_its_code() {
        let all = [
            LockError::Arity(Command::Acquire),
            LockError::Syntax("x"),
            LockError::BadLease("x"),
            LockError::BadOwner,
            LockError::BadTimeout("x"),
            LockError::WrongType,
            LockError::NotOwner,
            LockError::NotLock,
            LockError::HoldOverflow,
            LockError::BadReplicas("x"),
            LockError::NotHere("x"),
            LockError::TokenNotInteger,
            LockError::TokenOverflow,
            LockError::TokenCrossSlot,
            LockError::NoReplicas {
                wanted: 2,
                acked: 1,
                waited: true,
            },
            LockError::NoReplicas {
                wanted: 2,
                acked: 0,
                waited: false,
            },
            LockError::NoReplicasLost,
            LockError::NoPerm("x"),
            LockError::KeepAliveTooShort { min_ms: 100 },
            LockError::ReadOnly,
            LockError::Unblocked,
            LockError::Internal("x".into()),
            LockError::Invalid("x"),
            LockError::NotSemaphore,
            LockError::NotLatch,
            LockError::CountOverflow,
            LockError::BadPermitId("x"),
            LockError::NotLeased,
            LockError::TimeoutCrossSlot,
            LockError::NoUpgrade,
            LockError::RwOwner,
            LockError::NotRwLock,
            LockError::ReadHoldLimit,
            LockError::RwCrossSlot,
            LockError::NumKeys("x"),
            LockError::DuplicateKey,
            LockError::OwnerRequired,
            LockError::KeysCrossSlot,
        ];
        for e in all {
            let msg = e.message();
            assert!(msg.starts_with(&format!("{} ", e.code())), "{msg}");
            assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg}");
        }
    }

    #[test]
    fn arity_text_matches_redis() {
        assert_eq!(
            LockError::Arity(Command::Release).message(),
            "ERR wrong number of arguments for 'lock.release' command"
        );
    }
}
