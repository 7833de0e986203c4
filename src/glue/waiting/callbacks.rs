//! What the module does when Redis calls back for a blocked client
//! (`runtime::blocked` makes the calls, behind the panic firewall). It
//! depends on the client's `Stage`:
//!
//! - timeout: the module unblocked the client (`Stage::Answer`): send the
//!   answer. Otherwise `CLIENT UNBLOCK ... TIMEOUT`: the client leaves its
//!   queue (nil), its wait for replicas (the call is undone: NOREPLICAS) or
//!   the delivery list (a grant it has not heard of is taken back).
//! - disconnect: the client closed, was killed, got `CLIENT UNBLOCK ...
//!   ERROR`, a cluster redirect or a role-change error: it leaves for good;
//!   what it was granted and not told of is taken back.
//! - free: the last word. A grant whose client was gone before its reply
//!   went out is taken back, so the lock moves on; one whose reply was
//!   written to a connection that is still open stands.
//!
//! Callbacks may not write (some run inside other commands or while the
//! server frees a client): taking something back is a job.

use super::slot::{Stage, Wake, WakeSlot};
use super::{acks, delivery, queues};
use crate::core::LockError;
use crate::glue::runtime::blocked::BlockedData;
use crate::glue::runtime::ffi::Ctx;
use crate::glue::runtime::reply::{self, Reply};
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::QueueKey;
use crate::glue::store::ids::{AckId, PendingId, WaiterId};

impl BlockedData for WakeSlot {
    fn timeout(ctx: Ctx, slot: &WakeSlot) {
        let stage = slot.stage.replace(Stage::Done);
        let outcome = match stage {
            Stage::Answer(wake, undo) => {
                if let (Wake::Reply(_), Some(undo)) = (&wake, undo) {
                    slot.stage.replace(Stage::Answered(Some(undo)));
                }
                wake_outcome(wake)
            }
            // CLIENT UNBLOCK ... TIMEOUT: as if its time ran out.
            Stage::Queued(id) => {
                if leave_queue(ctx, id) {
                    stats::TIMED_OUT.bump();
                }
                Ok(Reply::Nil)
            }
            Stage::Acking(id) => match leave_acks(ctx, id) {
                Some(error) => Err(error),
                None => Ok(Reply::Nil),
            },
            Stage::Pending(id) => match leave_delivery(ctx, id) {
                Some(wake) => wake_outcome(wake),
                None => Ok(Reply::Nil),
            },
            // Answered already: nothing more to say.
            stage @ (Stage::Answered(_) | Stage::Done) => {
                slot.stage.replace(stage);
                return;
            }
        };
        reply::send_guarded(ctx, outcome);
    }

    fn disconnected(ctx: Ctx, slot: &WakeSlot) {
        let stage = slot.stage.replace(Stage::Done);
        let left = match stage {
            Stage::Queued(id) => leave_queue(ctx, id),
            Stage::Acking(id) => leave_acks(ctx, id).is_some(),
            Stage::Pending(id) => leave_delivery(ctx, id).is_some(),
            other => {
                slot.stage.replace(other);
                false
            }
        };
        if left {
            stats::DISCONNECTED.bump();
        }
    }

    fn freed(ctx: Ctx, slot: Box<WakeSlot>, client_gone: bool) {
        if !client_gone {
            return;
        }
        let undo = match slot.stage.into_inner() {
            // Written to a client that is still connected: Redis 7.0 reports
            // a client it unblocked twice (a CLIENT UNBLOCK right after the
            // module's) as gone. The client was told: the grant stands.
            Stage::Answered(undo) if !ctx.client_exists(slot.client.0) => undo,
            // Never written: the client went first.
            Stage::Answer(Wake::Reply(_), undo) => undo,
            _ => None,
        };
        if let Some(undo) = undo {
            stats::UNDELIVERED.bump();
            scheduler::soon(ctx, undo);
        }
    }
}

fn wake_outcome(wake: Wake) -> Result<Reply, LockError> {
    match wake {
        Wake::Nil => Ok(Reply::Nil),
        Wake::Reply(r) => Ok(r),
        Wake::Failed(e) => Err(e),
    }
}

/// A queued waiter the server unblocked itself leaves its queue (its handle
/// abandoned: the server answers it). False if it was not queued.
fn leave_queue(ctx: Ctx, id: WaiterId) -> bool {
    let Some((waiter, jobs, headed)) = queues::remove(id) else {
        return false;
    };
    for job in jobs.into_iter().chain(waiter.timeout.map(|(job, _)| job)) {
        scheduler::cancel(job);
    }
    waiter.handle.abandon();
    serve_soon(ctx, headed);
    true
}

/// The queues a leaving head held back are looked at again.
pub fn serve_soon(ctx: Ctx, keys: Vec<QueueKey>) {
    for qk in keys {
        scheduler::soon(ctx, Job::Serve(qk));
    }
}

/// A call waiting for replicas that the server unblocked itself: its effect
/// is undone (from a job) and the error it would get is returned.
fn leave_acks(ctx: Ctx, id: AckId) -> Option<LockError> {
    let left = acks::leave(id)?;
    left.handle.abandon();
    if let Some(undo) = left.undo {
        scheduler::soon(ctx, undo);
    }
    Some(left.error)
}

/// A client whose answer was pending: it gets what it would have (a grant
/// becomes its refusal), and a grant it never heard of is taken back.
fn leave_delivery(ctx: Ctx, id: PendingId) -> Option<Wake> {
    let left = delivery::leave(id)?;
    if let Some(undo) = left.undo {
        stats::UNDELIVERED.bump();
        scheduler::soon(ctx, undo);
    }
    Some(left.wake)
}
