//! What a key's queue, or a tie, falls due for — by primitive. The jobs
//! (`jobs.rs`) come here; each primitive's file does the work.

use super::queues::{self, Family};
use super::{lock, rwlock};
use crate::glue::runtime::ffi::Ctx;
use crate::glue::scheduler::Outcome;
use crate::glue::store::ids::TieKind;
use crate::glue::store::{Holder, QueueKey};

/// Serves the queue at `qk` (something changed its key, or its head left),
/// by the primitive its head waits for.
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    match queues::family(qk) {
        None => Outcome::Done,
        Some(Family::Lock) => lock::serve_key(ctx, qk),
        Some(Family::Rw) => rwlock::serve_key(ctx, qk),
    }
}

/// A deadline at `qk` has come (a lease with waiters queued behind it).
pub fn due(ctx: Ctx, qk: &QueueKey) -> Outcome {
    match queues::family(qk) {
        None => Outcome::Done,
        Some(Family::Lock) => lock::due(ctx, qk),
        Some(Family::Rw) => rwlock::due(ctx, qk),
    }
}

/// Renews a tied hold (the `Renew` job).
pub fn renew_tie(ctx: Ctx, qk: &QueueKey, holder: &Holder, kind: TieKind) -> Outcome {
    match kind {
        TieKind::Lock => lock::renew_tied(ctx, qk, holder),
        TieKind::Rw => rwlock::renew_tied(ctx, qk, holder),
    }
}

/// Releases a tied hold whose connection closed.
pub fn release_tie(ctx: Ctx, qk: &QueueKey, holder: &Holder, kind: TieKind) -> Outcome {
    match kind {
        TieKind::Lock => lock::release_tied(ctx, qk, holder),
        TieKind::Rw => rwlock::release_tied(ctx, qk, holder),
    }
}
