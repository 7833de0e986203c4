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
use super::queues::{self, Ask, Waiter};
use super::slot::Wake;
use super::ties::{self, Granted as HowGranted, TieKind};
use crate::core::multi;
use crate::core::rules::{self, Acquired, Claim, Released};
use crate::core::store::LockStore;
use crate::core::{Lease, Millis};
use crate::glue::store::ids::{ClientId, WaiterId};

use super::holds::{self, LapseCheck};
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr, monotonic_us};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::scheduler::{self, Job, Outcome};
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics::{self, Family};
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
/// answered with the error. A LOCK.MACQUIRE waiter at the head is granted
/// all its keys at once, when it heads the queue of every one of them and
/// all are free (its other keys are opened here: the caller must hold no
/// other key open). A head of another primitive is left to its own serving
/// (a `Serve` job dispatches by the head's primitive).
pub fn serve(ctx: Ctx, lock: &mut LockKey<'_>) -> bool {
    if !queues::any() {
        return false;
    }
    let db = ctx.db();
    let key = lock.name().as_ref();
    let mut granted = false;
    while let Some((id, ticket, keys)) = queues::front(db, key) {
        let kind = queues::with_waiter(id, |w| match &w.ask {
            Ask::Lock(_) => Head::One,
            Ask::Multi(_) => Head::Multi,
            _ => Head::Other,
        });
        match kind {
            Some(Head::One) => {}
            Some(Head::Multi) => match serve_multi(ctx, db, lock, id, ticket, &keys) {
                Some(true) => {
                    granted = true;
                    break;
                }
                Some(false) => continue,
                None => break,
            },
            Some(Head::Other) => {
                if let Some(qk) = keys.iter().find(|qk| *qk.name == *key) {
                    scheduler::soon(ctx, Job::Serve(qk.clone()));
                }
                break;
            }
            None => break,
        }
        let Some(taken) = queues::take_out(id) else {
            break;
        };
        let Ask::Lock(ask) = &taken.waiter.ask else {
            queues::put_back(taken);
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
                metrics::waited(
                    Family::Lock,
                    monotonic_us().saturating_sub(taken.waiter.since_us),
                );
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

/// What heads a lock's queue.
enum Head {
    /// LOCK.ACQUIRE.
    One,
    /// LOCK.MACQUIRE.
    Multi,
    /// Another primitive's waiter.
    Other,
}

/// Serves a LOCK.MACQUIRE waiter heading the queue at `lock`: `Some(true)`
/// granted (every key taken at once), `Some(false)` refused with an error
/// (the next head may be served), `None` it must wait (it does not head
/// every queue of its keys yet, a key is held, or not served here now).
fn serve_multi(
    ctx: Ctx,
    db: i32,
    lock: &mut LockKey<'_>,
    id: WaiterId,
    ticket: u64,
    keys: &[QueueKey],
) -> Option<bool> {
    let here = lock.name().as_ref();
    let others: Vec<&QueueKey> = keys.iter().filter(|qk| *qk.name != *here).collect();
    // Never overtaken: it waits until it heads every one of its queues.
    if !others.iter().all(|qk| queues::heads(qk, ticket)) {
        return None;
    }
    let names: Vec<OwnedStr> = others.iter().map(|qk| OwnedStr::new(&qk.name)).collect();
    // One slot, but a migrating slot may have moved some keys already.
    if !names.iter().all(|n| server::serves_key(ctx, n)) {
        return None;
    }
    let mut opened: Vec<LockKey<'_>> = names
        .iter()
        .map(|n| LockKey::open(ctx, n, Mode::Write))
        .collect();
    let taken = queues::take_out(id)?;
    let Ask::Multi(ask) = &taken.waiter.ask else {
        queues::put_back(taken);
        return None;
    };
    // In the order the keys were given (the reply follows it).
    // As trait objects: the key open here and those opened above borrow
    // their names for different lifetimes.
    type Store<'s> = dyn LockStore<Name = RStr, Value = OwnedStr> + 's;
    let mut this: Option<&mut Store<'_>> = Some(lock);
    let mut rest = opened.iter_mut();
    let mut locks: Vec<&mut Store<'_>> = Vec::with_capacity(taken.keys.len());
    for qk in &taken.keys {
        let next = match *qk.name == *here {
            true => this.take(),
            false => rest.next().map(|l| l as &mut Store<'_>),
        };
        match next {
            Some(l) => locks.push(l),
            None => {
                queues::put_back(taken);
                return None;
            }
        }
    }
    let claim = Claim::new(&*ask.owner, ask.lease);
    let queued = vec![false; locks.len()];
    match multi::acquire(&mut locks, &claim, &queued) {
        Ok(Some(counts)) => {
            drop(locks);
            metrics::waited(
                Family::Lock,
                monotonic_us().saturating_sub(taken.waiter.since_us),
            );
            for (qk, &holds) in taken.keys.iter().zip(&counts) {
                if holds == 1 {
                    let deadline = ask.lease.deadline_from(ctx.now()).ok();
                    holds::start(
                        ctx,
                        Family::Lock,
                        qk.db,
                        &qk.name,
                        ask.owner.as_ref(),
                        deadline,
                    );
                    lifecycle::fire(ctx, Event::LockAcquired, &OwnedStr::new(&qk.name));
                }
            }
            let deadlines: Vec<(Vec<u8>, Option<Millis>)> = opened
                .iter()
                .map(|l| (l.name().as_ref().to_vec(), l.deadline()))
                .collect();
            drop(opened);
            cancel_jobs(queues::settle(&taken.keys));
            // Its other keys' queues: their next waiters are due at the
            // new holder's deadline.
            for (name, deadline) in deadlines {
                rearm(ctx, db, &name, deadline);
            }
            deliver_multi(ctx, db, taken, counts);
            Some(true)
        }
        Ok(None) => {
            queues::put_back(taken);
            None
        }
        Err(e) => {
            drop(locks);
            cancel_jobs(queues::settle(&taken.keys));
            cancel_timeout(&taken.waiter);
            taken.waiter.handle.fail(e);
            Some(false)
        }
    }
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
    let answer = Answer {
        wake: Wake::Reply(Reply::Granted(granted)),
        verify: Some(verify),
        tie,
        undo: Some(Job::TakeBack(qk, ask.owner)),
    };
    acks::grant(ctx, waiter.handle, answer, waiter.replicas);
}

/// What a LOCK.MACQUIRE grant writes for its owner beyond the keys, for
/// every key: a tie change each (KEEPALIVE ties each key to the client), a
/// re-check that it still holds every key when answered, and the undo
/// that takes back one hold of each (REPLICAS not acknowledged, or never
/// delivered).
pub fn multi_answer(
    db: i32,
    keys: &[QueueKey],
    owner: &[u8],
    counts: Vec<i64>,
    tie_to: Option<ClientId>,
    lease: Lease,
) -> Answer {
    let ties: Vec<ties::Change> = keys
        .iter()
        .zip(&counts)
        .filter_map(|(qk, &holds)| {
            let how = match holds {
                1 => HowGranted::Fresh,
                _ => HowGranted::ReEntry,
            };
            ties::decide(db, &qk.name, owner, TieKind::Lock, how, tie_to, lease)
        })
        .collect();
    let verify = Verify::All(
        keys.iter()
            .map(|qk| Verify::Lock {
                key: qk.clone(),
                owner: OwnedStr::new(owner),
            })
            .collect(),
    );
    let undo = Job::Many(
        keys.iter()
            .map(|qk| Job::TakeBack(qk.clone(), OwnedStr::new(owner)))
            .collect(),
    );
    Answer {
        wake: Wake::Reply(Reply::Array(counts.into_iter().map(Reply::Int).collect())),
        verify: Some(verify),
        tie: (!ties.is_empty()).then_some(ties::Change::Many(ties)),
        undo: Some(undo),
    }
}

/// Hands a LOCK.MACQUIRE waiter every key just written for it.
fn deliver_multi(ctx: Ctx, db: i32, taken: queues::TakenOut, counts: Vec<i64>) {
    let waiter = taken.waiter;
    cancel_timeout(&waiter);
    stats::GRANTED_AFTER_WAIT.bump();
    let Ask::Multi(ask) = &waiter.ask else {
        return;
    };
    let tie_to = waiter.keepalive.then_some(waiter.client);
    let answer = multi_answer(
        db,
        &taken.keys,
        ask.owner.as_ref(),
        counts,
        tie_to,
        ask.lease,
    );
    acks::grant(ctx, waiter.handle, answer, waiter.replicas);
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
    // The server may have expired the key before the `Due` job ran: its
    // `lock.expired` goes before the hand-on's `lock.acquired`.
    holds::settle_lapsed(ctx, usize::MAX);
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
