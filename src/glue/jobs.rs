//! Layer 4: what each scheduler job does (the scheduler only keeps time).
//!
//! | job | scheduled by | on a replica | during a write pause |
//! |---|---|---|---|
//! | `Timeout` | a queued BLOCK waiter | runs (answers nil) | runs |
//! | `Deliver` | any answer to a blocked client | runs (a grant there becomes UNBLOCKED) | runs (writes nothing) |
//! | `AckTimeout` | a REPLICAS wait | dropped (the waits were answered at demotion) | waits for the pause to end |
//! | `Due` | a queued lock's lease deadline | dropped | waits |
//! | `Serve` | a foreign write to a queued key, a head leaving, a flush | dropped | waits |
//! | `Renew` | a KEEPALIVE tie, every third of its lease | dropped | waits |
//! | `Closed`, `Release` | a tied connection closing | dropped | waits |
//! | `TakeBack`, `Restore` | an undelivered grant, an unacknowledged call | dropped | waits |
//! | `Sweep` | a semaphore's earliest lease deadline; a foreign write to its `{key}:timeout` | dropped | waits |
//! | `Permits` | a semaphore grant undone (REPLICAS, undelivered), a tied connection's permits | dropped | waits |
//! | `Discover` | the first SEMAPHORE.* command, a promotion: semaphores' lease sets found by SCAN, a step at a time | dropped | waits |
//! | `Serve`, `Due` of a latch queue | as above; a latch's key deadline | run (read-only: answers LATCH.AWAIT ... BLOCK waiters there) | waits |
//! | `RwDue` | a queued RW lock's next deadline (the queue's hand-on); a foreign change to a followed RW lock or to a read hold's timeout key | dropped | waits |
//! | `RwTakeBack`, `RwRestore` | an undelivered or unacknowledged RWLOCK grant / renewal | dropped | waits |
//! | `Many` | LOCK.MACQUIRE's undo (a `TakeBack` per key) | dropped | waits |
//!
//! Jobs that write act only on a primary (a replica grants nothing; its
//! waiters were answered when it was demoted) and never while writes are
//! paused (CLIENT PAUSE WRITE, failover: a write or a propagation then kills
//! the server). A job whose key this node does not serve now (a slot
//! migrating or gone) is retried after a short back-off, never dropped.

use crate::glue::runtime::ffi::Ctx;
use crate::glue::scheduler::{self, Job, Outcome};
use crate::glue::stats;
use crate::glue::store::ids::TieKind;
use crate::glue::store::{metrics, server};
use crate::glue::waiting::{acks, callbacks, delivery, holds, queues, serve, ties};
use crate::glue::waiting::{lock, rwlock, semaphore};

/// How often to look again while writes are paused.
const PAUSE_RETRY_MS: i64 = 5;

/// How soon to try again a job whose key is not served here now.
const NOT_SERVED_RETRY_MS: i64 = 10;

/// A closed connection's tied locks are released a few at a time, while the
/// scheduler's batch has time left; the rest follow in its next batches, so
/// that a connection with 100,000 ties does not stall the server.
const CLOSED_CHUNK: usize = 8;

pub fn run(ctx: Ctx, job: Job) {
    match job {
        // A BLOCK timeout writes nothing: it is answered even on a replica
        // or during a pause.
        Job::Timeout(id) => {
            if let Some((waiter, jobs, headed)) = queues::remove(id) {
                for job in jobs {
                    scheduler::cancel(job);
                }
                stats::TIMED_OUT.bump();
                metrics::timed_out(waiter.ask.measured());
                waiter.handle.nil();
                // A head that timed out may have held others back.
                callbacks::serve_soon(ctx, headed);
            }
        }
        Job::Deliver => delivery::flush(ctx),
        Job::Expire if !server::is_primary() => {}
        Job::Expire => holds::expire_due(ctx),
        // A replica answers its latch waiters from what the primary
        // replicates (serving a latch writes nothing).
        Job::Serve(qk) if !server::is_primary() && is_latch(&qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.serve = None);
            serve::serve_key(ctx, &qk);
        }
        Job::Due(qk) if !server::is_primary() && is_latch(&qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.hand_on = None);
            serve::due(ctx, &qk);
        }
        job if !server::is_primary() => drop(job),
        job if server::writes_paused(ctx) => {
            scheduler::at(ctx, ctx.now().saturating_add(PAUSE_RETRY_MS), job);
        }
        job => {
            if let Some(again) = run_writing(ctx, job) {
                scheduler::at(ctx, ctx.now().saturating_add(NOT_SERVED_RETRY_MS), again);
            }
        }
    }
}

fn is_latch(qk: &crate::glue::store::QueueKey) -> bool {
    queues::family(qk) == Some(queues::Family::Latch)
}

/// After every batch of jobs: the answers they produced go out.
pub fn after_batch(ctx: Ctx) {
    if delivery::count() > 0 {
        delivery::flush(ctx);
    }
}

/// Runs a job that may write; returns it if it must be tried again later.
fn run_writing(ctx: Ctx, job: Job) -> Option<Job> {
    let retry = |outcome: Outcome, job: Job| (outcome == Outcome::Retry).then_some(job);
    match job {
        Job::Due(qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.hand_on = None);
            let outcome = serve::due(ctx, &qk);
            retry(outcome, Job::Due(qk))
        }
        Job::Serve(qk) => {
            queues::with_queue(qk.db, &qk.name, |q| q.serve = None);
            let outcome = serve::serve_key(ctx, &qk);
            retry(outcome, Job::Serve(qk))
        }
        Job::Renew(qk, holder, kind) => {
            let outcome = serve::renew_tie(ctx, &qk, &holder, kind);
            retry(outcome, Job::Renew(qk, holder, kind))
        }
        Job::Closed(client) => {
            loop {
                let (released, more) = ties::closed(client, CLOSED_CHUNK);
                for r in released {
                    release(ctx, r.key, r.holder, r.kind);
                }
                if !more {
                    break;
                }
                if scheduler::time_left().is_zero() {
                    scheduler::soon(ctx, Job::Closed(client));
                    break;
                }
            }
            None
        }
        Job::Release(qk, holder, kind) => {
            release(ctx, qk, holder, kind);
            None
        }
        Job::TakeBack(qk, owner) => {
            let outcome = lock::take_back(ctx, &qk, &owner);
            retry(outcome, Job::TakeBack(qk, owner))
        }
        Job::Restore(qk, owner, deadline) => {
            let outcome = lock::restore(ctx, &qk, &owner, deadline);
            retry(outcome, Job::Restore(qk, owner, deadline))
        }
        Job::RwDue(qk) => {
            let outcome = rwlock::due(ctx, &qk);
            retry(outcome, Job::RwDue(qk))
        }
        Job::RwTakeBack(qk, owner, mode) => {
            let outcome = rwlock::take_back(ctx, &qk, &owner, mode);
            retry(outcome, Job::RwTakeBack(qk, owner, mode))
        }
        Job::RwRestore(qk, owner, undo) => {
            let outcome = rwlock::restore(ctx, &qk, &owner, &undo);
            retry(outcome, Job::RwRestore(qk, owner, undo))
        }
        Job::Many(jobs) => {
            let again: Vec<Job> = jobs
                .into_iter()
                .filter_map(|job| run_writing(ctx, job))
                .collect();
            (!again.is_empty()).then_some(Job::Many(again))
        }
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
            None
        }
        Job::Sweep(qk) => {
            let outcome = semaphore::sweep(ctx, &qk);
            retry(outcome, Job::Sweep(qk))
        }
        Job::Permits(qk, permits) => {
            let outcome = semaphore::give_back(ctx, &qk, &permits);
            retry(outcome, Job::Permits(qk, permits))
        }
        Job::Discover(db, cursor) => {
            if let Some(next) = semaphore::discover(ctx, db, &cursor) {
                scheduler::soon(ctx, Job::Discover(db, next));
            }
            None
        }
        Job::Timeout(_) | Job::Deliver | Job::Expire => None,
    }
}

/// Releases one tied hold of a closed connection; tried again later if its
/// key is not served here now.
fn release(ctx: Ctx, qk: crate::glue::store::QueueKey, holder: ties::Holder, kind: TieKind) {
    let outcome = serve::release_tie(ctx, &qk, &holder, kind);
    if outcome == Outcome::Retry {
        scheduler::at(
            ctx,
            ctx.now().saturating_add(NOT_SERVED_RETRY_MS),
            Job::Release(qk, holder, kind),
        );
    }
}
