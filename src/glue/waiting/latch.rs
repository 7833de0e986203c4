//! The count-down latch on the shared machinery: wake-all serving.
//!
//! - **Queue policy** (`core::latch::serve`): when the latch is open (no key,
//!   or a count ≤ 0) every queued LATCH.AWAIT is answered 1, in queue
//!   order; while it is closed nobody is; a key that is not a latch fails
//!   them all with its error. Serving writes nothing.
//! - **When**: LATCH.COUNTDOWN to 0 serves inline; anything else that
//!   changes the key (DEL, a SET to 0, a Redisson countDown, FLUSH*,
//!   SWAPDB, eviction) schedules a `Serve` job; the key's own expiry is a
//!   `Due` job at its deadline (+1 ms: Redis expires a key once now >
//!   deadline), armed while waiters are queued, so they are answered at
//!   the deadline rather than when Redis's active expiry gets round to it.
//! - **Nothing to verify, tie or undo**: an AWAIT answer says the latch was
//!   open when it was served, which stays true.
//! - **On a replica** (LATCH.AWAIT ... BLOCK is read-only and allowed
//!   there, as XREAD ... BLOCK is): the queue is served from the writes the
//!   primary replicates (its DEL) and at the key's deadline, reading only.

use super::queues::{self, Ask, Waiter};
use super::slot::Wake;
use crate::core::latch;
use crate::core::queue::WaitQueue;
use crate::core::slot::latch_channel_same_slot;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, monotonic_us};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::{self, Job, JobId, Outcome};
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics::{self, Family};
use crate::glue::store::{LatchKey, Mode, OwnEvent, QueueKey, notify, server};

fn cancel_jobs(jobs: Vec<JobId>) {
    for job in jobs {
        scheduler::cancel(job);
    }
}

fn cancel_timeout(waiter: &Waiter) {
    if let Some((job, _)) = waiter.timeout {
        scheduler::cancel(job);
    }
}

/// Serves the queue at `l`: every waiter answered 1 if the latch is open
/// (or failed if the key is not a latch); else the queue is armed for the
/// key's deadline. Returns how many were answered.
pub fn serve(ctx: Ctx, l: &mut LatchKey<'_>) -> usize {
    if !queues::any() {
        return 0;
    }
    let db = ctx.db();
    let key = l.name().as_ref();
    if queues::len(db, key) == 0 {
        return 0;
    }
    if let Ok(false) = latch::is_open(l) {
        // Closed: nothing to answer; the key's expiry opens it.
        arm(ctx, db, key, l);
        return 0;
    }
    // Open (or not a latch): take the waiters out, in order, as long as
    // they wait for a latch.
    let mut taken = WaitQueue::default();
    while let Some((id, _, _)) = queues::front(db, key) {
        let Some(t) = queues::take_out(id) else { break };
        if !matches!(t.waiter.ask, Ask::Latch) {
            queues::put_back(t);
            if let Some(qk) = queues::queue_key(db, key) {
                scheduler::soon(ctx, Job::Serve(qk));
            }
            break;
        }
        taken.push(t);
    }
    let served = latch::serve(l, &mut taken);
    let mut answered = 0;
    for (t, ()) in served.granted {
        cancel_jobs(queues::settle(&t.keys));
        cancel_timeout(&t.waiter);
        stats::LATCH_RELEASED_WAITERS.bump();
        metrics::waited(
            Family::Latch,
            monotonic_us().saturating_sub(t.waiter.since_us),
        );
        t.waiter
            .handle
            .deliver(Wake::Reply(Reply::Int(1)), None, None, None);
        answered += 1;
    }
    for (t, e) in served.failed {
        cancel_jobs(queues::settle(&t.keys));
        cancel_timeout(&t.waiter);
        t.waiter.handle.fail(e);
    }
    // Whoever the policy left (none, as it stands) keeps their places.
    while let Some((_, t)) = taken.pop_front() {
        queues::put_back(t);
    }
    answered
}

/// Arms the queue's `Due` job at the key's deadline (+1 ms), if it has one.
pub fn arm(ctx: Ctx, db: i32, key: &[u8], l: &mut LatchKey<'_>) {
    let due = latch::next_deadline(l)
        .ok()
        .flatten()
        .map(|d| d.saturating_add(1));
    queues::arm_due(ctx, db, key, due, true);
}

/// The latch at `l` just opened by COUNTDOWN (its key deleted): `0` is
/// published, `latch.opened` fired, every waiter answered.
pub fn opened(ctx: Ctx, l: &mut LatchKey<'_>) {
    stats::LATCH_OPENED.bump();
    publish(ctx, l, latch::OPENED_MESSAGE);
    lifecycle::fire(ctx, Event::LatchOpened, l.name());
    serve(ctx, l);
}

/// Publishes `message` on `redisson_countdownlatch__channel__{key}`
/// (skipped in a cluster, where that channel is in another slot than a key
/// with a hash tag).
pub fn publish(ctx: Ctx, l: &LatchKey<'_>, message: &[u8]) {
    let key = l.name().as_ref();
    if server::cluster() && !latch_channel_same_slot(key) {
        return;
    }
    let channel = OwnedStr::new(&crate::core::channel::latch_channel(key));
    notify::publish(ctx, &channel, &OwnedStr::new(message));
}

/// Runs `f` on the latch at `qk` from a job: on a primary only where the
/// key is served now (`None`: retry later); on a replica, reading what the
/// primary replicated. Opening the key expires it if its deadline passed
/// (on a primary); that `expired` event is the module's own.
fn with_latch<R>(ctx: Ctx, qk: &QueueKey, f: impl FnOnce(&mut LatchKey<'_>) -> R) -> Option<R> {
    if !ctx.select_db(qk.db) {
        return None;
    }
    let name = OwnedStr::new(&qk.name);
    if server::is_primary() && !server::serves_key(ctx, &name) {
        return None;
    }
    let mut l = {
        let _own = OwnEvent::mark();
        LatchKey::open(ctx, &name, Mode::Read)
    };
    Some(f(&mut l))
}

/// Serves the queue at `qk` (the `Serve` job, and the `Due` job at the
/// key's deadline).
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    if queues::len(qk.db, &qk.name) == 0 {
        return Outcome::Done;
    }
    match with_latch(ctx, qk, |l| serve(ctx, l)) {
        Some(_) => Outcome::Done,
        None => Outcome::Retry,
    }
}
