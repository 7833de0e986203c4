//! Keys the module derives from a command's key (the fencing-token counter
//! `redisson_lock_token:{key}`, an RW lock's read-hold timeout keys
//! `{key}:<owner>:rwlock_timeout:<n>`) are not declared in the command's key spec,
//! so Redis checks no ACL key pattern for them: the module checks the
//! calling user's access itself, before anything is written.

use crate::core::channel::{rwlock_timeout_key, timeout_key, token_key};
use crate::core::command::KeyAccess;
use crate::core::{LockError, LockResult};
use crate::glue::runtime::ffi::{CallerUser, Ctx, OwnedStr, RStr};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::runtime::register::acl_flags;

/// NOPERM unless the calling user may access the token counter of `key`
/// as `access`. Calls without a user (jobs) pass.
pub fn check_token_access(ctx: Ctx, key: &RStr, access: KeyAccess) -> LockResult<()> {
    let name = OwnedStr::new(&token_key(key.as_ref()));
    check(ctx, &name, access, TOKEN)
}

const TOKEN: &str = "the lock's fencing-token counter (redisson_lock_token:...)";

/// NOPERM unless the calling user may write `owner`'s read-hold timeout
/// keys of the RW lock at `key` (the keys an RWLOCK.ACQUIRE READ creates;
/// checked on the name of its first hold, `{key}:<owner>:rwlock_timeout:1`:
/// a key pattern that admits one admits them all in practice).
pub fn check_rw_hold_access(ctx: Ctx, key: &RStr, owner: &[u8]) -> LockResult<()> {
    let name = OwnedStr::new(&rwlock_timeout_key(key.as_ref(), owner, 1));
    check(
        ctx,
        &name,
        KeyAccess::Update,
        "the read hold's timeout key ({key}:<owner>:rwlock_timeout:<n>)",
    )
}

/// For a read (LOCK.INFO): only a counter that exists is read, so only one
/// that exists needs the permission; a user whose patterns cover the lock
/// but not `redisson_lock_token:*` can still look at locks that never
/// issued a token.
pub fn check_existing_token_read(ctx: Ctx, key: &RStr) -> LockResult<()> {
    let name = OwnedStr::new(&token_key(key.as_ref()));
    if RawKey::open(ctx, &name, false).kind() == KeyKind::Empty {
        return Ok(());
    }
    check(ctx, &name, KeyAccess::Read, TOKEN)
}

/// NOPERM unless the calling user may access the lease set
/// `{key}:timeout` of the semaphore at `key` as `access`. `always`: the
/// call may create the set (SEMAPHORE.LEASE); otherwise only a set that
/// exists is read or written, so only then is the permission needed.
pub fn check_timeout_access(
    ctx: Ctx,
    key: &RStr,
    access: KeyAccess,
    always: bool,
) -> LockResult<()> {
    let name = OwnedStr::new(&timeout_key(key.as_ref()));
    if !always && RawKey::open(ctx, &name, false).kind() == KeyKind::Empty {
        return Ok(());
    }
    check(
        ctx,
        &name,
        access,
        "the semaphore's lease set ({key}:timeout)",
    )
}

/// As `check_timeout_access`, for a lease set already opened: `name` and
/// whether it exists.
pub fn check_lease_set_access(
    ctx: Ctx,
    name: &RStr,
    exists: bool,
    access: KeyAccess,
    always: bool,
) -> LockResult<()> {
    if !always && !exists {
        return Ok(());
    }
    check(
        ctx,
        name,
        access,
        "the semaphore's lease set ({key}:timeout)",
    )
}

fn check(ctx: Ctx, name: &RStr, access: KeyAccess, what: &'static str) -> LockResult<()> {
    let Some(user) = CallerUser::of(ctx) else {
        return Ok(());
    };
    match user.may_access(name, acl_flags(access)) {
        true => Ok(()),
        false => Err(LockError::NoPerm(what)),
    }
}
