//! Layer 4: what each scheduler job does (the scheduler only keeps time).
//!
//! Jobs that write act only on a primary (a replica grants nothing; its
//! waiters were answered when it was demoted) and never while writes are
//! paused (CLIENT PAUSE WRITE, failover: a write or a propagation then kills
//! the server): they wait for the pause to end.

use crate::glue::runtime::ffi::Ctx;
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::server;
use crate::glue::waiting::{acks, handoff, queues, ties};

/// How often to look again while writes are paused.
const PAUSE_RETRY_MS: i64 = 5;

/// A closed connection's tied locks are released a few at a time, while the
/// scheduler's batch has time left; the rest follow in its next batches, so
/// that a connection with 100,000 ties does not stall the server.
const CLOSED_CHUNK: usize = 8;

pub fn run(ctx: Ctx, job: Job) {
    // A BLOCK timeout writes nothing: it is answered even on a replica or
    // during a pause.
    if let Job::Timeout(id) = job {
        if let Some((waiter, jobs)) = queues::remove(id) {
            jobs.into_iter().for_each(|j| {
                scheduler::cancel(j);
            });
            stats::TIMED_OUT.bump();
            // Dropping the handle answers nil.
            drop(waiter.handle);
        }
        return;
    }
    if !server::is_primary() {
        return;
    }
    if server::writes_paused() {
        scheduler::at(ctx, ctx.now().saturating_add(PAUSE_RETRY_MS), job);
        return;
    }
    match job {
        Job::HandOn(qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.hand_on = None);
            handoff::serve_key(ctx, &qk);
        }
        Job::Serve(qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.serve = None);
            handoff::serve_key(ctx, &qk);
        }
        Job::Renew(qk) => handoff::renew_tied(ctx, &qk),
        Job::Closed(client) => loop {
            let (locks, more) = ties::closed(client, CLOSED_CHUNK);
            for (qk, owner) in locks {
                handoff::release_tied(ctx, &qk, &owner);
            }
            if !more {
                break;
            }
            if scheduler::time_left().is_zero() {
                scheduler::soon(ctx, Job::Closed(client));
                break;
            }
        },
        Job::TakeBack(qk, owner) => handoff::take_back(ctx, &qk, &owner),
        Job::Restore(qk, owner, deadline) => handoff::restore(ctx, &qk, &owner, deadline),
        Job::AckTimeout(id) => {
            if let Some(left) = acks::leave(id) {
                // Undo first: when the client hears NOREPLICAS, its call has
                // already had no effect.
                if let Some(undo) = left.undo {
                    run(ctx, undo);
                }
                stats::NOREPLICAS.bump();
                left.handle.fail(left.error);
            }
        }
        Job::Timeout(_) => {}
    }
}
