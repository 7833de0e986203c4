//! Read-write locks (RWLOCK.*), in Redisson's `RReadWriteLock` layout byte
//! for byte, so Redisson clients and native callers share one lock:
//!
//! - the hash at the key: `mode` → `read` | `write`; a reader's field
//!   `<owner>` → its read holds; the writer's field `<owner>:write` → its
//!   write holds;
//! - one string key per read hold, `{key}:<owner>:rwlock_timeout:<n>`
//!   (`n` = 1..holds, Redisson's `suffixName` rule: `key:<owner>:...` when
//!   the key contains `{`), value `1`, TTL = that hold's lease;
//! - the channel `redisson_rwlock:{key}` with payloads `0` / `1`.
//!
//! The lease rule (SPEC "Read-write locks"): a read hold ends at its own
//! deadline; in write mode the hash's deadline is the write hold's, extended
//! by a longer read hold of the writer (downgrade); a write re-entry or
//! renewal sets it from now but never below a live read hold; in read mode
//! it is the latest live read hold's deadline; no release or renewal of one
//! hold shortens another's; the lock is free when its last live hold ends.
//!
//! Every rule function reads the whole lock first (`state::load`: the hash
//! and the timeout key of every read hold), validates everything, works out
//! the lock it leaves behind in memory, and only then writes the difference
//! (`state::commit`): an error always means nothing changed. Holds whose
//! timeout keys have lapsed (a crashed Redisson reader, a read lease that
//! ran out) are swept by whichever successful call comes first, and that
//! call reports them (`Swept`) for lifecycle events and for serving the
//! queue; the glue also calls `sweep` at every `next_deadline`.

mod memory;
pub mod request;
mod rules;
mod serve;
mod state;
mod store;
#[cfg(test)]
mod tests;

pub use memory::MemoryRwLock;
pub use rules::{
    Due, Forced, OwnerHolds, Queued, RenewUndo, Renewed, RwAcquired, RwClaim, RwInfo, RwOutcome,
    RwReleased, Swept, acquire, due, force_release, holding, info, next_deadline, release,
    release_all, renew, restore_renewal, sweep, take_back,
};
pub use serve::{RwGrant, RwWaiting, Served, serve};
pub use store::{KeyTtl, RwLockStore};

use crate::error::{LockError, LockResult};

/// Which hold of a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwMode {
    Read,
    Write,
}

impl RwMode {
    /// The `mode` field's value.
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            RwMode::Read => b"read",
            RwMode::Write => b"write",
        }
    }

    /// What LOCK.WAITERS shows a waiter waits for.
    pub fn waits_for(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
        }
    }
}

/// The hash field that holds no owner.
pub const MODE_FIELD: &[u8] = b"mode";
/// What ends a writer's field.
pub const WRITE_SUFFIX: &[u8] = b":write";
/// Most read holds one lock may have, all owners together: each is a key
/// the rules read on every call, so a hash whose counts add up to more is
/// not a lock (NOTLOCK: a hand-written count must not stall the server),
/// and an acquire past it is refused (`ReadHoldLimit`).
pub const MAX_READ_HOLDS: i64 = 100_000;

/// Owners the layout could not tell apart from the `mode` field or from a
/// writer's field: `ERR` on every RWLOCK command.
pub fn check_owner(owner: &[u8]) -> LockResult<()> {
    if owner == MODE_FIELD || owner.ends_with(WRITE_SUFFIX) {
        return Err(LockError::RwOwner);
    }
    Ok(())
}

/// Every way to read `name` as a read hold's timeout key
/// (`channel::rwlock_timeout_key(key, owner, n)`): `(key, owner, n)` for
/// each split that names it, so that a keyspace event on a timeout key
/// (its expiry, a DEL) can be mapped back to its lock; the glue keeps the
/// candidates whose key it serves (a queue, a tie). Names can be ambiguous
/// (keys and owners may both contain `:`, `{`, `}`), hence several.
pub fn timeout_key_candidates(name: &[u8]) -> Vec<(&[u8], &[u8], i64)> {
    const INFIX: &[u8] = b":rwlock_timeout:";
    let mut found = Vec::new();
    // `<base>:rwlock_timeout:<n>`, n as Redisson writes it (decimal, >= 1).
    let Some(at) = name.windows(INFIX.len()).rposition(|w| w == INFIX) else {
        return found;
    };
    let Some(n) = crate::number::parse_positive(&name[at + INFIX.len()..]) else {
        return found;
    };
    let base = &name[..at];
    for (i, _) in base.iter().enumerate().filter(|&(_, &b)| b == b':') {
        let (prefix, owner) = (&base[..i], &base[i + 1..]);
        if owner.is_empty() {
            continue;
        }
        // `{key}:<owner>` for a key without `{`; `key:<owner>` for one with.
        if let [b'{', key @ .., b'}'] = prefix
            && !key.contains(&b'{')
        {
            found.push((key, owner, n));
        }
        if prefix.contains(&b'{') {
            found.push((prefix, owner, n));
        }
    }
    found
}

/// The writer's hash field: `<owner>:write`.
pub fn writer_field(owner: &[u8]) -> Vec<u8> {
    let mut field = Vec::with_capacity(owner.len() + WRITE_SUFFIX.len());
    field.extend_from_slice(owner);
    field.extend_from_slice(WRITE_SUFFIX);
    field
}
