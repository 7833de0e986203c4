//! Layer 2: the deadline scheduler, owner of every time-driven action: a
//! queued lock's lease deadline (hand it on), a waiter's BLOCK time, a tied
//! lock's renewal, work deferred out of callbacks that may not write (a
//! foreign delete, a closed connection, an undelivered grant), a REPLICAS
//! timeout.
//!
//! One ordered index of jobs in module memory and ONE server timer, armed
//! for the earliest. Redis's own timer table degrades quadratically when
//! many timers fall due in the same millisecond (it probes for a free slot:
//! 16,000 queued keys sharing a deadline took 11.5 s of server time and
//! stalled PING for 2.9 s), so the module never keeps more than one.
//!
//! Work is spread: one firing runs due jobs for at most `BUDGET`, then lets
//! the event loop serve clients before it continues (Redis runs a timer
//! created inside a timer callback no sooner than 1 ms later). A burst of
//! 100,000 renewals due together therefore never stalls the server.
//!
//! Jobs are data; what they do is the top layer's (`jobs.rs`), registered
//! at load, so this layer depends on nothing above it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::runtime::ffi::{Ctx, OwnedStr};
use super::runtime::timer::{self, Timer};
use super::store::ids::{AckId, ClientId, TieKind, WaiterId};
use super::store::{Holder, QueueKey, server};
use crate::core::Millis;
use crate::core::rwlock::{RenewUndo, RwMode};
use crate::core::semaphore::PermitId;

/// Longest stretch of jobs run in one go.
const BUDGET: Duration = Duration::from_millis(1);

/// What a job that writes did: done, or its key is not served here now
/// (a slot migrating or gone): try again later, never drop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Retry,
}

pub enum Job {
    /// A deadline at this key comes (a queued lock's lease runs out: hand
    /// it on).
    Due(QueueKey),
    /// Look at a queue again: something else changed its key, its head
    /// left, or a hand-off had to wait for a write pause to end.
    Serve(QueueKey),
    /// A waiter's BLOCK time is over.
    Timeout(WaiterId),
    /// Renew a hold tied to its connection (KEEPALIVE).
    Renew(QueueKey, Holder, TieKind),
    /// A connection with ties closed.
    Closed(ClientId),
    /// Release one tied hold of a closed connection (one that could not be
    /// released at once: its key was not served here then).
    Release(QueueKey, Holder, TieKind),
    /// Take back a hold given to this owner: its grant never reached the
    /// client, or the replicas did not acknowledge it.
    TakeBack(QueueKey, OwnedStr),
    /// Put back the deadline a renewal replaced (the replicas did not
    /// acknowledge it), if this owner still holds the lock; `None`: it had
    /// no expiry.
    Restore(QueueKey, OwnedStr, Option<Millis>),
    /// A call's replicas did not acknowledge in time.
    AckTimeout(AckId),
    /// A semaphore's lease deadline (or a foreign write to its lease set):
    /// return the lapsed permits, serve the queue, arm the next one.
    Sweep(QueueKey),
    /// Give permits back to a semaphore (an undo, or a closed connection's).
    Permits(QueueKey, Permits),
    /// Look for semaphores' lease sets in a database (from a SCAN cursor),
    /// to sweep them at their deadlines: those the server has not seen
    /// written (loaded at start, inherited by a promoted replica).
    Discover(i32, Vec<u8>),
    /// Send the answers waiting for delivery.
    Deliver,
    /// Holds whose leases ran out get their expiry (lifecycle events on).
    Expire,
    /// A queued RW lock's next deadline has come, or something changed an
    /// RW lock or one of its read holds' timeout keys: sweep what lapsed,
    /// serve its queue, record (and with waiters, arm) the next deadline.
    RwDue(QueueKey),
    /// Take back one hold of this mode given to this owner of an RW lock
    /// (undelivered, or not acknowledged by the replicas).
    RwTakeBack(QueueKey, OwnedStr, RwMode),
    /// Put back the deadlines an RW renewal replaced (not acknowledged).
    RwRestore(QueueKey, OwnedStr, RenewUndo),
    /// Several jobs as one (LOCK.MACQUIRE's undo: a take-back per key).
    Many(Vec<Job>),
}

/// What a `Permits` job gives back to a semaphore.
pub enum Permits {
    /// Anonymous permits taken by an ACQUIRE that replicas did not
    /// acknowledge, or whose client never heard of them.
    Acquired(i64),
    /// Leased permits, the same (those still leased go back).
    Leased(Vec<PermitId>),
    /// The tied permits of closed connections, gathered for this key (the
    /// job takes them from the semaphore's list).
    Closed,
    /// A renewal replicas did not acknowledge: this id's previous score.
    Renewal(PermitId, f64),
}

/// A scheduled job: when, and a sequence number (ties run in order).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct JobId {
    pub due: Millis,
    seq: u64,
}

#[derive(Default)]
struct Scheduler {
    jobs: BTreeMap<JobId, Job>,
    seq: u64,
    /// The server timer, and the time it fires.
    armed: Option<(Timer<()>, Millis)>,
    /// Inside `fire`: arming waits until the batch is done.
    running: bool,
    /// When the batch being run started.
    batch_started: Option<Instant>,
    run: Option<fn(Ctx, Job)>,
    /// Runs after every batch (the delivery of answers).
    after_batch: Option<fn(Ctx)>,
}

thread_local! {
    // Redis calls module code on its main thread only.
    static SCHEDULER: RefCell<Scheduler> = RefCell::new(Scheduler::default());
}

fn with<R>(f: impl FnOnce(&mut Scheduler) -> R) -> R {
    SCHEDULER.with(|s| f(&mut s.borrow_mut()))
}

/// Sets what runs a due job (the top layer) and what runs after every
/// batch, at load.
pub fn init(run: fn(Ctx, Job), after_batch: fn(Ctx)) {
    with(|s| {
        s.run = Some(run);
        s.after_batch = Some(after_batch);
    });
}

/// Runs `job` at `due` (server clock, ms).
pub fn at(ctx: Ctx, due: Millis, job: Job) -> JobId {
    let id = with(|s| {
        s.seq += 1;
        let id = JobId { due, seq: s.seq };
        s.jobs.insert(id, job);
        id
    });
    arm(ctx);
    id
}

/// Runs `job` as soon as the event loop comes round (never inside the
/// callback that asked).
pub fn soon(ctx: Ctx, job: Job) -> JobId {
    at(ctx, ctx.now(), job)
}

/// Takes a job back before it runs. When nothing is left to run, the
/// server timer is stopped too (a module holding a timer cannot be
/// unloaded); otherwise it is left alone: if it was armed for this job, it
/// finds nothing due and re-arms.
pub fn cancel(id: JobId) -> Option<Job> {
    let (job, idle) = with(|s| {
        let job = s.jobs.remove(&id);
        let idle = s.jobs.is_empty() && !s.running;
        (job, idle.then(|| s.armed.take()).flatten())
    });
    if let Some((timer, _)) = idle {
        timer::stop(Ctx::module(), timer);
    }
    job
}

/// What is left of the running batch's budget (zero outside a batch): a job
/// with much to do (a closed connection's tied locks) does a part and
/// schedules the rest, instead of stretching the batch.
pub fn time_left() -> Duration {
    with(|s| s.batch_started).map_or(Duration::ZERO, |started| {
        BUDGET.saturating_sub(started.elapsed())
    })
}

/// Jobs waiting (the module must not unload while there are any).
pub fn pending() -> usize {
    with(|s| s.jobs.len())
}

/// Whether a job is still waiting to run.
pub fn is_pending(id: JobId) -> bool {
    with(|s| s.jobs.contains_key(&id))
}

/// Makes sure the server timer fires by the earliest job.
fn arm(ctx: Ctx) {
    let stale = with(|s| {
        if s.running {
            return None;
        }
        let first = s.jobs.keys().next()?.due;
        match s.armed {
            Some((_, at)) if at <= first => None,
            _ => Some((s.armed.take(), first)),
        }
    });
    let Some((old, first)) = stale else { return };
    if let Some((old, _)) = old {
        timer::stop(ctx, old);
    }
    let now = ctx.now();
    let at = first.max(now);
    let t = timer::start(ctx, at - now, (), fire);
    with(|s| s.armed = Some((t, at)));
}

fn fire(ctx: Ctx, (): ()) {
    // Jobs scheduled while this batch runs wait for the next one, so a job
    // that keeps asking to run "soon" cannot keep the batch going.
    let (run, after_batch, last) = with(|s| {
        s.armed = None;
        s.running = true;
        (s.run, s.after_batch, s.seq)
    });
    // The cluster's slots are read at most once per batch.
    server::forget_slots();
    let started = Instant::now();
    with(|s| s.batch_started = Some(started));
    while started.elapsed() < BUDGET {
        let now = ctx.now();
        let job = with(|s| {
            let id = *s
                .jobs
                .keys()
                .take_while(|id| id.due <= now)
                .find(|id| id.seq <= last)?;
            s.jobs.remove(&id)
        });
        let Some(job) = job else { break };
        if let Some(run) = run {
            // A panic in one job must not stop the others.
            super::runtime::firewall::callback((), || run(ctx, job));
        }
    }
    if let Some(after_batch) = after_batch {
        super::runtime::firewall::callback((), || after_batch(ctx));
    }
    with(|s| {
        s.running = false;
        s.batch_started = None;
    });
    arm(ctx);
}
