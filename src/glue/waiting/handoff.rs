//! Who gets a lock when it stops being held, and what follows.
//!
//! Hand-off is direct: whatever frees the lock writes it for the head of the
//! queue in the same step (effects replicated like any grant), so there is no
//! free window for a newcomer to barge into, and nothing is published. The
//! policy (who is next, what a grant writes) is the core's `serve`; this file
//! runs it against the real key and answers the clients.
//!
//! - RELEASE / FORCERELEASE / a tied connection closing serve inline
//!   (`lock_freed`).
//! - The holder's lease deadline: a `HandOn` job per queued lock (`arm`),
//!   1 ms after the deadline; opening the key then makes Redis expire it at
//!   once instead of 50-100 ms later in its active-expiry cycle.
//! - Anything else (DEL, a Redisson Lua release, eviction, FLUSHALL, SWAPDB,
//!   a grant taken back): a `Serve` job, since callbacks may not write.
//!
//! Jobs act only on a primary, only while writes are not paused, and only
//! while this node still serves the key (`server::serves_key`): a key that
//! left with its slot was moved, not released.

use super::acks::{self, Answer};
use super::queues::{self, Waiter};
use super::ties;
use crate::core::Millis;
use crate::core::rules::{self, Released};
use crate::core::serve::{self, Grant};
use crate::core::store::LockStore;
use crate::glue::runtime::ffi::{Ctx, OwnedStr};
use crate::glue::runtime::reply::Granted;
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::{LockKey, Mode, OwnEvent, QueueKey, notify, server};

/// The lock at `lock` was just freed: the next waiter gets it, or the
/// unlock is published. Any tie it had is gone with it.
pub fn lock_freed(ctx: Ctx, lock: &mut LockKey<'_>) {
    if ties::any() {
        ties::untie(ctx.db(), lock.name().as_ref());
    }
    if !serve(ctx, lock) {
        notify::publish_unlock(ctx, lock.name());
        stats::PUBLISHED.bump();
    }
}

/// Gives the lock to the head of its queue if it can; true if it did.
/// Waiters the lock can never be given to are answered with the error.
pub fn serve(ctx: Ctx, lock: &mut LockKey<'_>) -> bool {
    if !queues::any() {
        return false;
    }
    let db = ctx.db();
    let key = lock.name().as_ref();
    // No queue: the common release has nothing more to do here.
    let Some((qk, mut queue)) = queues::take(db, key) else {
        return false;
    };
    let served = serve::serve(lock, &mut queue);
    let left: Vec<_> = served
        .failed
        .iter()
        .map(|(w, _)| w.id)
        .chain(served.granted.as_ref().map(|(w, _)| w.id))
        .collect();
    let emptied = queues::put_back(&qk, queue, &left);
    for (waiter, error) in served.failed {
        cancel_timeout(&waiter);
        waiter.handle.fail(error);
    }
    let granted = match served.granted {
        Some((waiter, grant)) => {
            deliver(ctx, &qk, waiter, grant);
            true
        }
        None => false,
    };
    match emptied {
        Some(jobs) => jobs.into_iter().for_each(|j| {
            scheduler::cancel(j);
        }),
        // Whoever holds it now, the next waiter is due at its deadline.
        None => rearm(ctx, db, key, lock.ttl()),
    }
    granted
}

fn cancel_timeout(waiter: &Waiter) {
    if let Some(job) = waiter.timeout {
        scheduler::cancel(job);
    }
}

/// Answers a waiter the lock was just written for (or, with REPLICAS,
/// parks it until the replicas acknowledged the grant).
fn deliver(ctx: Ctx, qk: &QueueKey, waiter: Waiter, grant: Grant) {
    cancel_timeout(&waiter);
    stats::GRANTED_AFTER_WAIT.bump();
    // Tied to the waiter's connection if it asked; otherwise any tie left at
    // the key was a vanished lock's.
    let tie = match waiter.tie_to {
        Some(client) => {
            let owner = OwnedStr::new(waiter.owner.as_ref());
            ties::Change::Tie(qk.clone(), client, owner, waiter.lease)
        }
        None => ties::Change::Untie(qk.clone()),
    };
    let granted = Granted {
        holds: grant.holds,
        generated: waiter
            .generated
            .then(|| OwnedStr::new(waiter.owner.as_ref())),
        token: grant.token,
    };
    match waiter.replicas.filter(|r| !r.is_none()) {
        None => {
            ties::apply(ctx, tie);
            waiter.handle.grant(granted, (qk.clone(), waiter.owner));
        }
        Some(replicas) => {
            let id = acks::next_id();
            let answer = Answer::Granted(granted, qk.clone(), OwnedStr::new(waiter.owner.as_ref()));
            let undo = Some(Job::TakeBack(qk.clone(), waiter.owner));
            let acked = acks::wait(ctx, id, waiter.handle, answer, Some(tie), replicas, undo);
            if let Err(too_few) = acked {
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
/// (`ttl` ms from now; `None`: no expiry, only a release frees it). An
/// earlier hand-on already scheduled is kept: it finds the lock held, and
/// arms again.
pub fn arm(ctx: Ctx, db: i32, key: &[u8], ttl: Option<Millis>) {
    schedule_hand_on(ctx, db, key, ttl, false);
}

/// Like `arm`, but replaces whatever hand-on there was (the lock has a new
/// holder, or its deadline was moved back).
fn rearm(ctx: Ctx, db: i32, key: &[u8], ttl: Option<Millis>) {
    schedule_hand_on(ctx, db, key, ttl, true);
}

fn schedule_hand_on(ctx: Ctx, db: i32, key: &[u8], ttl: Option<Millis>, replace: bool) {
    // Redis expires a key once now > deadline, and stores the deadline as
    // (arrival ms, rounded down) + lease: its expiry is therefore always
    // after the holder's own "sent + lease". Handing on any earlier, even
    // within the deadline millisecond, could overlap the holder's lease
    // (measured: `make bench` B4 saw a grant 0.5 ms early). So run 1 ms
    // after the deadline and let Redis expire the key when it is opened.
    let due = ttl.map(|ttl| ctx.now().saturating_add(ttl).saturating_add(1));
    // The queue's current hand-on; nothing to do without a queue.
    let Some(current) = queues::with_queue(db, key, |q| q.hand_on) else {
        return;
    };
    if let Some(job) = current {
        if !replace && due.is_some_and(|due| job.due <= due) {
            return;
        }
        scheduler::cancel(job);
        queues::with_queue(db, key, |q| q.hand_on = None);
    }
    let (Some(due), Some(qk)) = (due, queues::queue_key(db, key)) else {
        return;
    };
    let job = scheduler::at(ctx, due, Job::HandOn(qk));
    queues::with_queue(db, key, |q| q.hand_on = Some(job));
}

/// Runs `f` on the lock at `qk` from a job, if this node still serves the
/// key (in a cluster the key may have left with its slot: that is not a
/// release, and nothing may be written for it here). `None` if it does not.
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

/// Serves a queue outside any command (the `HandOn` and `Serve` jobs). If
/// the key left with its slot, the server redirects these waiters (they are
/// blocked on the key) when the slot's new owner is set.
pub fn serve_key(ctx: Ctx, qk: &QueueKey) {
    if queues::len(qk.db, &qk.name) == 0 {
        return;
    }
    with_served_lock(ctx, qk, true, |lock| serve(ctx, lock));
}

/// Takes back one hold from `owner` (a grant whose client vanished before
/// its reply, or that replicas did not acknowledge): the lock moves on if
/// that was its last. If the lease already ran out or the lock was taken
/// from it, there is nothing to give back.
pub fn take_back(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr) {
    with_served_lock(ctx, qk, false, |lock| {
        if let Ok(Some(Released::Freed)) = rules::take_back(lock, owner) {
            lock_freed(ctx, lock);
        }
    });
}

/// Puts back the deadline a renewal replaced, if `owner` still holds it.
pub fn restore(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr, deadline: Option<Millis>) {
    with_served_lock(ctx, qk, false, |lock| {
        if let Ok(true) = rules::restore_deadline(lock, owner, deadline) {
            rearm(ctx, qk.db, &qk.name, lock.ttl());
        }
    });
}

/// A tied connection closed: every hold of `owner` goes, and the lock moves
/// on (as LOCK.RELEASE down to 0 would).
pub fn release_tied(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr) {
    with_served_lock(ctx, qk, false, |lock| {
        if let Ok(true) = rules::release_all(lock, owner) {
            stats::KEEPALIVE_RELEASED.bump();
            lock_freed(ctx, lock);
        }
    });
}

/// Renews a tied lock (the `Renew` job); unties it if its owner no longer
/// holds it, or the key is no longer served here.
pub fn renew_tied(ctx: Ctx, qk: &QueueKey) {
    let Some((owner, lease)) = ties::renewal(qk) else {
        return;
    };
    let renewed = with_served_lock(ctx, qk, false, |lock| rules::renew(lock, &owner, lease));
    if let Some(Ok(true)) = renewed {
        stats::KEEPALIVE_RENEWED.bump();
        ties::reschedule(ctx, qk.clone());
    } else {
        ties::untie(qk.db, &qk.name);
    }
}
