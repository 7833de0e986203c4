//! Who gets a lock when it stops being held, and what follows.
//!
//! Hand-off is direct: whatever frees the lock writes it for the head of the
//! queue in the same step (effects replicated like any grant), so there is no
//! free window for a newcomer to barge into, and nothing is published. The
//! policy (who is next, what a grant writes) is the core's; this file runs
//! it against the real key and hands the answers to `delivery`.
//!
//! - RELEASE / FORCERELEASE / a tied connection closing serve inline
//!   (`lock_freed`).
//! - The holder's lease deadline: a `Due` job per queued lock (`arm`),
//!   1 ms after the deadline; opening the key then makes Redis expire it at
//!   once instead of 50-100 ms later in its active-expiry cycle. ("Hand-on":
//!   the lock passes on at a deadline, nobody handing it; "hand-off": a
//!   holder or a command gives it up and the next waiter gets it.)
//! - Anything else (DEL, a Redisson Lua release, eviction, FLUSHALL, SWAPDB,
//!   a grant taken back, a head that left): a `Serve` job, since callbacks
//!   may not write.
//!
//! Jobs act only on a primary, only while writes are not paused, and only
//! while this node serves the key (`server::serves_key`); otherwise they are
//! retried (`Outcome::Retry`), never dropped.

use super::acks::{self, Answer};
use super::delivery::Verify;
use super::slot::Wake;
use super::queues::{self, Ask, Waiter};
use super::ties::{self, Granted as HowGranted, TieKind};
use crate::core::Millis;
use crate::core::rules::{self, Acquired, Claim, Released};
use crate::core::store::LockStore;

use crate::glue::runtime::ffi::{Ctx, OwnedStr, monotonic_us};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::scheduler::{self, Job, Outcome};
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics::{self, Family};
use super::holds::{self, LapseCheck};
use crate::glue::store::{LockKey, Mode, OwnEvent, QueueKey, notify, server};

/// The lock at `lock` was just freed: the next waiter gets it, or the
/// unlock is published. Any tie it had is gone with it.
pub fn lock_freed(ctx: Ctx, lock: &mut LockKey<'_>) {
    ties::clear(ctx.db(), lock.name().as_ref());
    if !serve(ctx, lock) {
        notify::publish_unlock(ctx, lock.name());
        stats::PUBLISHED.bump();
    }
}

/// Serves the queue at `lock`, head first, for as long as heads can be
/// granted; true if anyone was. Waiters the lock can never be given to are
/// answered with the error.
pub fn serve(ctx: Ctx, lock: &mut LockKey<'_>) -> bool {
    if !queues::any() {
        return false;
    }
    let db = ctx.db();
    let key = lock.name().as_ref();
    let mut granted = false;
    while let Some((id, _, _)) = queues::front(db, key) {
        let Some(taken) = queues::take_out(id) else {
            break;
        };
        let Ask::Lock(ask) = &taken.waiter.ask else {
            // Another primitive's waiter heads this key's queue: its own
            // serving (by the head's family) takes over.
            queues::put_back(taken);
            if let Some(qk) = queues::queue_key(db, key) {
                scheduler::soon(ctx, Job::Serve(qk));
            }
            break;
        };
        let claim = Claim {
            owner: &*ask.owner,
            lease: ask.lease,
            token: ask.token,
        };
        // `queued` is false: the head of the queue is who the queue waits for.
        match rules::acquire(lock, &claim, false) {
            Ok(Acquired::Granted { holds, token }) => {
                let deadline = claim.lease.deadline_from(lock.now()).ok();
                metrics::waited(Family::Lock, monotonic_us().saturating_sub(taken.waiter.since_us));
                holds::start(ctx, Family::Lock, db, key, ask.owner.as_ref(), deadline);
                lifecycle::fire(ctx, Event::LockAcquired, lock.name());
                cancel_jobs(queues::settle(&taken.keys));
                deliver(ctx, db, key, taken.waiter, holds, token);
                // A lock has one holder: one grant per serve (a later waiter
                // naming the same owner waits its turn, not a re-entry).
                granted = true;
                break;
            }
            Ok(Acquired::Busy) => {
                queues::put_back(taken);
                break;
            }
            Err(e) => {
                cancel_jobs(queues::settle(&taken.keys));
                cancel_timeout(&taken.waiter);
                taken.waiter.handle.fail(e);
            }
        }
    }
    // Whoever holds it now, the next waiter is due at its deadline.
    rearm(ctx, db, key, lock.deadline());
    granted
}

fn cancel_jobs(jobs: Vec<scheduler::JobId>) {
    for job in jobs {
        scheduler::cancel(job);
    }
}

fn cancel_timeout(waiter: &Waiter) {
    if let Some((job, _)) = waiter.timeout {
        scheduler::cancel(job);
    }
}

/// Hands a waiter the lock just written for it: its answer (re-checked when
/// sent), its tie change, and with REPLICAS a wait for acknowledgements.
fn deliver(ctx: Ctx, db: i32, key: &[u8], waiter: Waiter, holds: i64, token: Option<i64>) {
    cancel_timeout(&waiter);
    stats::GRANTED_AFTER_WAIT.bump();
    let Ask::Lock(ask) = waiter.ask else {
        return;
    };
    let qk = QueueKey::new(db, key);
    let tie = ties::decide(
        db,
        key,
        ask.owner.as_ref(),
        TieKind::Lock,
        HowGranted::Fresh,
        waiter.keepalive.then_some(waiter.client),
        ask.lease,
    );
    let granted = Granted {
        holds,
        generated: ask.generated.then(|| OwnedStr::new(ask.owner.as_ref())),
        token,
    };
    let verify = Verify::Lock {
        key: qk.clone(),
        owner: OwnedStr::new(ask.owner.as_ref()),
    };
    let undo = Job::TakeBack(qk, ask.owner);
    let wake = Wake::Reply(Reply::Granted(granted));
    match waiter.replicas.filter(|r| !r.is_none()) {
        None => waiter
            .handle
            .deliver(wake, Some((verify, Wake::Nil)), tie, Some(undo)),
        Some(replicas) => {
            let answer = Answer {
                wake,
                verify: Some(verify),
                tie,
                undo: Some(undo),
            };
            if let Err(too_few) = acks::wait(ctx, waiter.handle, answer, replicas) {
                // Not enough replicas to wait for: the grant goes back (the
                // next waiter is served) as soon as the event loop comes round.
                if let Some(undo) = too_few.undo {
                    scheduler::soon(ctx, undo);
                }
                too_few.handle.fail(too_few.error);
            }
        }
    }
}

/// Makes sure the queue at `key` is served when the current lease runs out
/// (at `deadline`; `None`: no expiry, only a release frees it). An earlier
/// hand-on already scheduled is kept: it finds the lock held, and arms again.
pub fn arm(ctx: Ctx, db: i32, key: &[u8], deadline: Option<Millis>) {
    schedule_hand_on(ctx, db, key, deadline, false);
}

/// Like `arm`, but replaces whatever hand-on there was (the lock has a new
/// holder, or its deadline was moved back).
fn rearm(ctx: Ctx, db: i32, key: &[u8], deadline: Option<Millis>) {
    schedule_hand_on(ctx, db, key, deadline, true);
}

fn schedule_hand_on(ctx: Ctx, db: i32, key: &[u8], deadline: Option<Millis>, replace: bool) {
    // Redis expires a key once now > deadline. Handing on any earlier, even
    // within the deadline millisecond, could overlap the holder's lease
    // (measured: `make bench` B4 saw a grant 0.5 ms early). So run 1 ms
    // after the deadline and let Redis expire the key when it is opened.
    let due = deadline.map(|d| d.saturating_add(1));
    queues::arm_due(ctx, db, key, due, replace);
}

/// Runs `f` on the lock at `qk` from a job, if this node serves the key
/// now (in a cluster the key's slot may be migrating, or gone: nothing may
/// be written for it here then). `None`: not now, retry later.
/// `serving`: the job serves the key's queue itself, so the `expired` event
/// that opening a lapsed key fires is the module's own to ignore.
fn with_served_lock<R>(
    ctx: Ctx,
    qk: &QueueKey,
    serving: bool,
    f: impl FnOnce(&mut LockKey<'_>) -> R,
) -> Option<R> {
    if !ctx.select_db(qk.db) {
        return None;
    }
    let name = OwnedStr::new(&qk.name);
    if !server::serves_key(ctx, &name) {
        return None;
    }
    let mut lock = {
        let _own = serving.then(OwnEvent::mark);
        LockKey::open(ctx, &name, Mode::Write)
    };
    Some(f(&mut lock))
}

fn outcome<R>(done: Option<R>) -> Outcome {
    match done {
        Some(_) => Outcome::Done,
        None => Outcome::Retry,
    }
}

/// Serves a lock's queue outside any command (the `Serve` job: something
/// else changed the key).
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    if queues::len(qk.db, &qk.name) == 0 {
        return Outcome::Done;
    }
    outcome(with_served_lock(ctx, qk, true, |lock| serve(ctx, lock)))
}

/// The lease of a queued lock ran out (the `Due` job, 1 ms after its
/// deadline): opening the key expires it, `lock.expired` is fired, and the
/// queue is served. A lock renewed meanwhile is still held: the next
/// hand-on is armed at its new deadline.
pub fn due(ctx: Ctx, qk: &QueueKey) -> Outcome {
    if queues::len(qk.db, &qk.name) == 0 {
        return Outcome::Done;
    }
    // Lapsed holds first: their hold samples, and `lock.expired` (fired
    // before the hand-off's `lock.acquired`).
    holds::settle_lapsed(ctx, usize::MAX);
    outcome(with_served_lock(ctx, qk, true, |lock| serve(ctx, lock)))
}

/// Whether a lapsed hold of `holder` at `qk` is really gone (`holds`).
pub fn lapse_check(ctx: Ctx, qk: &QueueKey, holder: &[u8]) -> LapseCheck {
    if !ctx.select_db(qk.db) {
        return LapseCheck::Gone;
    }
    let name = OwnedStr::new(&qk.name);
    if !server::serves_key(ctx, &name) {
        return LapseCheck::Later;
    }
    let mut lock = LockKey::open(ctx, &name, Mode::Read);
    let owner = OwnedStr::new(holder);
    match rules::holding(&mut lock, &owner) {
        Ok(rules::Holding::Mine { .. }) => LapseCheck::Held(lock.deadline()),
        _ => LapseCheck::Gone,
    }
}

/// A lapsed hold's `lock.expired`.
pub fn expired(ctx: Ctx, qk: &QueueKey) {
    if ctx.select_db(qk.db) {
        let name = OwnedStr::new(&qk.name);
        lifecycle::fire(ctx, Event::LockExpired, &name);
    }
}

/// Takes back one hold from `owner` (a grant whose client never heard of
/// it, or that replicas did not acknowledge): the lock moves on if that was
/// its last. If the lease already ran out or the lock was taken from it,
/// there is nothing to give back.
pub fn take_back(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr) -> Outcome {
    outcome(with_served_lock(ctx, qk, false, |lock| {
        if let Ok(Some(Released::Freed)) = rules::take_back(lock, owner) {
            holds::end(qk.db, &qk.name, owner.as_ref());
            lifecycle::fire(ctx, Event::LockReleased, lock.name());
            lock_freed(ctx, lock);
        }
    }))
}

/// Puts back the deadline a renewal replaced, if `owner` still holds it.
pub fn restore(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr, deadline: Option<Millis>) -> Outcome {
    outcome(with_served_lock(ctx, qk, false, |lock| {
        if let Ok(true) = rules::restore_deadline(lock, owner, deadline) {
            holds::renewed(ctx, qk.db, &qk.name, owner.as_ref(), deadline);
            rearm(ctx, qk.db, &qk.name, lock.deadline());
        }
    }))
}

/// A tied connection closed: every hold of `owner` goes, and the lock moves
/// on (as LOCK.RELEASE down to 0 would).
pub fn release_tied(ctx: Ctx, qk: &QueueKey, owner: &[u8]) -> Outcome {
    let owner = OwnedStr::new(owner);
    outcome(with_served_lock(ctx, qk, false, |lock| {
        if let Ok(true) = rules::release_all(lock, &owner) {
            stats::KEEPALIVE_RELEASED.bump();
            holds::end(qk.db, &qk.name, owner.as_ref());
            lifecycle::fire(ctx, Event::LockClosed, lock.name());
            lock_freed(ctx, lock);
        }
    }))
}

/// Renews a tied lock (the `Renew` job); unties it if its owner no longer
/// holds it. Not served here now: tried again later, still tied.
pub fn renew_tied(ctx: Ctx, qk: &QueueKey, owner: &ties::Holder) -> Outcome {
    let Some((_, lease)) = ties::renewal(qk, owner) else {
        return Outcome::Done;
    };
    let name = OwnedStr::new(owner);
    let renewed = with_served_lock(ctx, qk, false, |lock| {
        let renewed = rules::renew(lock, &name, lease);
        if let Ok(true) = renewed {
            holds::renewed(ctx, qk.db, &qk.name, owner, lock.deadline());
        }
        renewed
    });
    match renewed {
        Some(Ok(true)) => {
            stats::KEEPALIVE_RENEWED.bump();
            ties::reschedule(ctx, qk.clone(), owner.clone());
            Outcome::Done
        }
        Some(_) => {
            ties::untie(qk, owner);
            Outcome::Done
        }
        None => Outcome::Retry,
    }
}

/// Moves every hand-on of `lock` to its current deadline (after a write
/// that may have shortened the lease: a re-entry, a renewal).
pub fn deadline_moved(ctx: Ctx, db: i32, lock: &mut LockKey<'_>) {
    if queues::any() && queues::len(db, lock.name().as_ref()) > 0 {
        let deadline = lock.deadline();
        arm(ctx, db, lock.name().as_ref(), deadline);
    }
}
