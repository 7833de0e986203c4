//! What happens when a lock stops being held.

use super::ffi::Ctx;
use super::key::LockKey;
use super::{notify, stats};

/// The lock at `lock` was just freed by this command: serve the next waiter,
/// or tell everyone it is free.
pub fn lock_freed(ctx: Ctx, lock: &mut LockKey<'_>) {
    notify::publish_unlock(ctx, lock.name());
    stats::PUBLISHED.bump();
}
