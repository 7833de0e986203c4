//! What a key's queue, or a tie, falls due for — by primitive. The jobs
//! (`jobs.rs`) come here; each primitive's file does the work.

use super::holds::LapseCheck;
use super::queues::{self, Family};
use super::{latch, lock, rwlock, semaphore};
use crate::glue::runtime::ffi::Ctx;
use crate::glue::scheduler::Outcome;
use crate::glue::store::ids::TieKind;
use crate::glue::store::metrics::Family as Measured;
use crate::glue::store::{Holder, QueueKey};

/// Serves the queue at `qk` (something changed its key, or its head left),
/// by the primitive its head waits for.
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    match queues::family(qk) {
        None => Outcome::Done,
        Some(Family::Lock) => lock::serve_key(ctx, qk),
        Some(Family::Semaphore) => semaphore::serve_key(ctx, qk),
        Some(Family::Latch) => latch::serve_key(ctx, qk),
        Some(Family::Rw) => rwlock::serve_key(ctx, qk),
    }
}

/// A deadline at `qk` has come (a lease with waiters queued behind it).
pub fn due(ctx: Ctx, qk: &QueueKey) -> Outcome {
    match queues::family(qk) {
        None => Outcome::Done,
        Some(Family::Lock) => lock::due(ctx, qk),
        // A semaphore's deadlines are its sweeps'; a latch's is its key's
        // expiry, which serving finds.
        Some(Family::Semaphore) => semaphore::serve_key(ctx, qk),
        Some(Family::Latch) => latch::serve_key(ctx, qk),
        Some(Family::Rw) => rwlock::due(ctx, qk),
    }
}

/// Renews a tied hold (the `Renew` job).
pub fn renew_tie(ctx: Ctx, qk: &QueueKey, holder: &Holder, kind: TieKind) -> Outcome {
    match kind {
        TieKind::Lock => lock::renew_tied(ctx, qk, holder),
        TieKind::Permit => semaphore::renew_tied(ctx, qk, holder),
        TieKind::Rw => rwlock::renew_tied(ctx, qk, holder),
    }
}

/// Whether a lapsed hold is really gone (`holds`).
pub fn lapse_check(ctx: Ctx, family: Measured, qk: &QueueKey, holder: &[u8]) -> LapseCheck {
    match family {
        Measured::Lock => lock::lapse_check(ctx, qk, holder),
        _ => LapseCheck::Gone,
    }
}

/// A lapsed hold's `*.expired` event.
pub fn expired(ctx: Ctx, family: Measured, qk: &QueueKey) {
    if family == Measured::Lock {
        lock::expired(ctx, qk);
    }
}

/// Releases a tied hold whose connection closed.
pub fn release_tie(ctx: Ctx, qk: &QueueKey, holder: &Holder, kind: TieKind) -> Outcome {
    match kind {
        TieKind::Lock => lock::release_tied(ctx, qk, holder),
        TieKind::Permit => semaphore::release_tied(ctx, qk, holder),
        TieKind::Rw => rwlock::release_tied(ctx, qk, holder),
    }
}
