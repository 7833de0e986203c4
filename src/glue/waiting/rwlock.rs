//! Read-write locks beyond one command: serving an RW lock's queue, its
//! deadlines, and its deferred work (take-backs, restored renewals, tied
//! owners' renewals and releases).
//!
//! - **Serving** is head-of-line (`serve`): the head is granted if the
//!   rules grant it now, then the next head, and so on; so a READ head is
//!   granted with every READ behind it up to the first WRITE, and a WRITE
//!   head alone. It runs after every change that can make a head
//!   grantable: a release of any kind, a force release, a sweep that found
//!   lapsed holds, a tied owner's connection closing, an undo.
//! - **Deadlines**: after every change the module records each RW lock's
//!   next deadline (the earliest hold that may end: a read hold's timeout
//!   key, or the hash) and who ends then (Redis deletes a lapsed hash
//!   before anyone can read who held it; `rwlock::due`). A lock with
//!   waiters has an `RwDue` job there (its queue's hand-on): the lapsed
//!   holds are swept, their owners get `rwlock.expired`, the queue is
//!   served, a lock whose last live hold ended is deleted. A lock nobody
//!   waits for holds no timer (MODULE UNLOAD stays possible): the rules
//!   keep its hash's lease at its last live hold's, so Redis expires it
//!   then and it is free for Redisson clients too, nobody calling; the
//!   module hears of that expiry, and of each lapsed timeout key, as
//!   keyspace events, and fires the events then.
//! - **Foreign changes**: a keyspace event on a tracked lock's key, or on
//!   any read hold's timeout key (mapped back to its lock by name: a
//!   Redisson reader's hold lapsing, its release deleting the key) brings
//!   the same visit forward (`key_event`).
//! - **KEEPALIVE** ties the owner (`TieKind::Rw`, holder = the owner):
//!   renewal renews every hold of it, a closed connection releases every
//!   hold of it.
//!
//! Jobs act only where the key is served (`with_served`); a visit of a
//! lock nobody waits for whose key is not served here any more is dropped
//! (its slot moved: the new node's module serves it).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashMap;

use super::acks::{self, Answer};
use super::delivery::Verify;
use super::holds;
use super::queues::{self, Ask, Waiter};
use super::slot::Wake;
use super::ties::{self, Granted as HowGranted, TieKind};
use crate::core::Millis;
use crate::core::channel::rwlock_channel;
use crate::core::lease::Lease;
use crate::core::rwlock::{
    self, Queued, RenewUndo, RwAcquired, RwClaim, RwMode, Swept, timeout_key_candidates,
};
use crate::core::slot::key_slot;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::scheduler::{self, Job, JobId, Outcome};
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics;
use crate::glue::store::{Holder, KeyRef, Mode, QueueKey, RwKey, notify, server};

// ---- serving ----

/// Serves the queue at `rw`, head first, for as long as heads can be
/// granted; true if anyone was (nothing is published then). Waiters the
/// lock can never be given to are answered with the error. A head of
/// another primitive is left to its own serving (a `Serve` job).
pub fn serve(ctx: Ctx, rw: &mut RwKey<'_>) -> bool {
    if !queues::any() {
        return false;
    }
    let db = ctx.db();
    let key = rw.name().as_ref();
    let mut granted = false;
    while let Some((id, _, keys)) = queues::front(db, key) {
        match queues::with_waiter(id, |w| matches!(w.ask, Ask::Rw(_))) {
            Some(true) => {}
            Some(false) => {
                if let Some(qk) = keys.into_iter().find(|qk| *qk.name == *key) {
                    scheduler::soon(ctx, Job::Serve(qk));
                }
                break;
            }
            None => break,
        }
        let Some(taken) = queues::take_out(id) else {
            break;
        };
        let Ask::Rw(ask) = &taken.waiter.ask else {
            queues::put_back(taken);
            break;
        };
        let claim = RwClaim {
            owner: ask.owner.as_ref(),
            mode: ask.mode,
            lease: ask.lease,
            token: ask.token,
        };
        // Nothing is queued ahead of the head: it is who the queue waits for.
        match rwlock::acquire(rw, &claim, Queued::NONE) {
            Ok(outcome) => {
                fire_expired(ctx, rw.name(), &outcome.swept);
                match outcome.value {
                    RwAcquired::Granted {
                        holds,
                        token,
                        fresh,
                    } => {
                        if fresh {
                            hold_started(ctx, db, key, ask_owner(&taken), claim.lease);
                            lifecycle::fire(ctx, Event::RwAcquired, rw.name());
                        }
                        cancel_jobs(queues::settle(&taken.keys));
                        deliver(ctx, db, key, taken.waiter, holds, token, fresh);
                        granted = true;
                    }
                    RwAcquired::Busy => {
                        queues::put_back(taken);
                        break;
                    }
                }
            }
            Err(e) => {
                cancel_jobs(queues::settle(&taken.keys));
                cancel_timeout(&taken.waiter);
                taken.waiter.handle.fail(e);
            }
        }
    }
    granted
}

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

/// Hands a waiter the hold just written for it: its answer (re-checked
/// when sent: the owner still holds that mode), its tie change, and with
/// REPLICAS a wait for acknowledgements.
fn deliver(
    ctx: Ctx,
    db: i32,
    key: &[u8],
    waiter: Waiter,
    holds: i64,
    token: Option<i64>,
    fresh: bool,
) {
    cancel_timeout(&waiter);
    stats::GRANTED_AFTER_WAIT.bump();
    metrics::waited(
        metrics::Family::RwLock,
        crate::glue::runtime::ffi::monotonic_us().saturating_sub(waiter.since_us),
    );
    let Ask::Rw(ask) = waiter.ask else {
        return;
    };
    let how = match fresh {
        true => HowGranted::Fresh,
        false => HowGranted::ReEntry,
    };
    let tie = ties::decide(
        db,
        key,
        ask.owner.as_ref(),
        TieKind::Rw,
        how,
        waiter.keepalive.then_some(waiter.client),
        ask.lease,
    );
    let granted = Granted {
        holds,
        generated: ask.generated.then(|| OwnedStr::new(ask.owner.as_ref())),
        token,
    };
    let answer = grant_answer(
        db,
        key,
        ask.owner.as_ref(),
        ask.mode,
        Reply::Granted(granted),
        tie,
    );
    acks::grant(ctx, waiter.handle, answer, waiter.replicas);
}

/// The answer of a grant of `mode` to `owner` (immediate with REPLICAS, or
/// to a waiter): re-checked when sent, taken back if never delivered or
/// not acknowledged.
pub fn grant_answer(
    db: i32,
    key: &[u8],
    owner: &[u8],
    mode: RwMode,
    reply: Reply,
    tie: Option<ties::Change>,
) -> Answer {
    let qk = QueueKey::new(db, key);
    Answer {
        wake: Wake::Reply(reply),
        verify: Some(Verify::Rw {
            key: qk.clone(),
            owner: OwnedStr::new(owner),
            mode: Some(mode),
        }),
        tie,
        undo: Some(Job::RwTakeBack(qk, OwnedStr::new(owner), mode)),
    }
}

/// The answer of a renewal with REPLICAS: re-checked when sent (the owner
/// still holds anything), the previous deadlines put back if not
/// acknowledged.
pub fn renew_answer(
    db: i32,
    key: &[u8],
    owner: &[u8],
    undo: RenewUndo,
    tie: Option<ties::Change>,
) -> Answer {
    let qk = QueueKey::new(db, key);
    Answer {
        wake: Wake::Reply(Reply::Int(1)),
        verify: Some(Verify::Rw {
            key: qk.clone(),
            owner: OwnedStr::new(owner),
            mode: None,
        }),
        tie,
        undo: Some(Job::RwRestore(qk, OwnedStr::new(owner), undo)),
    }
}

// ---- what follows a change ----

/// `rwlock.expired` for each owner the rules found lapsed, in order (before
/// any event of the call itself).
pub fn fire_expired(ctx: Ctx, key: &RStr, swept: &Swept) {
    for owner in &swept.expired {
        holds::end(ctx.db(), key.as_ref(), owner);
        lifecycle::fire(ctx, Event::RwExpired, key);
    }
}

/// An owner started holding the RW lock at `key` (its hold metrics).
pub fn hold_started(ctx: Ctx, db: i32, key: &[u8], owner: &[u8], lease: Lease) {
    let deadline = lease.deadline_from(ctx.now()).ok();
    holds::start(ctx, metrics::Family::RwLock, db, key, owner, deadline);
}

/// An owner holds nothing at `key` any more (its hold metrics).
pub fn hold_ended(db: i32, key: &[u8], owner: &[u8]) {
    holds::end(db, key, owner);
}

fn ask_owner(taken: &queues::TakenOut) -> &[u8] {
    match &taken.waiter.ask {
        Ask::Rw(a) => a.owner.as_ref(),
        _ => &[],
    }
}

/// Publishes `message` on `redisson_rwlock:{key}` (PUBLISH standalone,
/// SPUBLISH in a cluster; skipped in a cluster when the channel hashes to
/// another slot than the key).
pub fn publish(ctx: Ctx, key: &RStr, message: &[u8]) {
    let channel = rwlock_channel(key.as_ref());
    if server::cluster() && key_slot(&channel) != key_slot(key.as_ref()) {
        return;
    }
    notify::publish(ctx, &OwnedStr::new(&channel), &OwnedStr::new(message));
}

/// What follows a change the module made to the lock at `rw`: with
/// `serve`, the queue is served (true if a waiter was handed something),
/// then `message(handed_on)` is published if it says so, and the next
/// deadline is recorded (`arm`).
pub fn changed(
    ctx: Ctx,
    rw: &mut RwKey<'_>,
    serve_queue: bool,
    message: impl FnOnce(bool) -> Option<&'static [u8]>,
) -> bool {
    let handed_on = serve_queue && serve(ctx, rw);
    if let Some(m) = message(handed_on) {
        publish(ctx, rw.name(), m);
    }
    arm(ctx, rw);
    handed_on
}

// ---- deadlines ----

/// What the module knows of a lock it follows: its next deadline and who
/// ends then (Redis deletes a lapsed hash before anyone could read who
/// held it), and a visit brought forward by a foreign change.
#[derive(Default)]
struct Tracked {
    /// The next deadline and the owners that end at it.
    due: Option<(Millis, Vec<Holder>)>,
    /// A visit scheduled soon (a foreign change).
    check: Option<JobId>,
}

thread_local! {
    static TRACKED: RefCell<HashMap<QueueKey, Tracked>> = RefCell::new(HashMap::new());
}

/// Locks followed (a static: the keyspace callback asks on every event).
static FOLLOWED: AtomicUsize = AtomicUsize::new(0);

fn with<R>(f: impl FnOnce(&mut HashMap<QueueKey, Tracked>) -> R) -> R {
    TRACKED.with(|t| {
        let mut t = t.borrow_mut();
        let r = f(&mut t);
        FOLLOWED.store(t.len(), Ordering::Relaxed);
        r
    })
}

fn any_followed() -> bool {
    FOLLOWED.load(Ordering::Relaxed) != 0
}

/// The lock's `QueueKey`: its queue's, the one already followed, or new.
fn queue_key(db: i32, name: &[u8]) -> QueueKey {
    let known = with(|t| {
        t.get_key_value(&KeyRef { db, name })
            .map(|(qk, _)| qk.clone())
    });
    queues::queue_key(db, name)
        .or(known)
        .unwrap_or_else(|| QueueKey::new(db, name))
}

/// Records the lock's next deadline and who ends then (replacing what was
/// known, and any visit brought forward: the lock was just read as it
/// is); no deadline (no lock, or nothing expires): not followed. With
/// waiters queued, an `RwDue` job runs 1 ms after the deadline (Redis
/// expires a key once now > deadline), as the queue's hand-on: it goes
/// with the queue. A lock nobody waits for holds no timer (MODULE UNLOAD
/// must stay possible while locks are held): its hash's lease is its last
/// live hold's (the rules keep it so), Redis expires it then, and the
/// module hears of it (`key_event`).
pub fn arm(ctx: Ctx, rw: &mut RwKey<'_>) {
    let db = ctx.db();
    let name = rw.name().as_ref();
    let due = rwlock::due(rw).ok().flatten();
    let old = with(|t| t.remove(&KeyRef { db, name }));
    if let Some(job) = old.and_then(|o| o.check) {
        scheduler::cancel(job);
    }
    let hand_on = queues::with_queue(db, name, |q| q.hand_on.take()).flatten();
    if let Some(job) = hand_on {
        scheduler::cancel(job);
    }
    let Some(due) = due else {
        return;
    };
    let qk = queue_key(db, name);
    if let Some(queue) = queues::queue_key(db, name) {
        let job = scheduler::at(ctx, due.at.saturating_add(1), Job::RwDue(queue));
        queues::with_queue(db, name, |q| q.hand_on = Some(job));
    }
    let ending = due.ending.iter().map(|o| Holder::from(&o[..])).collect();
    with(|t| {
        t.insert(
            qk,
            Tracked {
                due: Some((due.at, ending)),
                check: None,
            },
        )
    });
}

/// Before a call changes the lock at `rw`: if its hash lapsed at the
/// recorded deadline and Redis deleted it before the module looked, its
/// holders get `rwlock.expired` now (the call is about to re-arm).
pub fn overdue(ctx: Ctx, rw: &mut RwKey<'_>) {
    if !any_followed() || !rw.is_missing() {
        return;
    }
    let db = ctx.db();
    let name = rw.name().as_ref();
    let now = ctx.now();
    let ending = with(|t| {
        let tracked = t.get_mut(&KeyRef { db, name })?;
        if tracked.due.as_ref().is_some_and(|(at, _)| *at < now) {
            return tracked.due.take();
        }
        None
    });
    if let Some((_, ending)) = ending {
        for owner in &ending {
            holds::end(ctx.db(), rw.name().as_ref(), owner);
            lifecycle::fire(ctx, Event::RwExpired, rw.name());
        }
    }
}

/// Brings a visit of the lock at `name` forward (a foreign change).
fn check_soon(ctx: Ctx, db: i32, name: &[u8]) {
    let pending = with(|t| t.get(&KeyRef { db, name }).map(|r| r.check.is_some()));
    if pending == Some(true) {
        return;
    }
    let qk = queue_key(db, name);
    let job = scheduler::soon(ctx, Job::RwDue(qk.clone()));
    with(|t| t.entry(qk).or_default().check = Some(job));
}

const TIMEOUT_INFIX: &[u8] = b":rwlock_timeout:";

/// A keyspace event someone else caused (the module's own are filtered
/// out before): on a followed RW lock's key (its expiry included), or on a
/// read hold's timeout key (mapped back to its lock by name: every way to
/// read the name, in a cluster only those in the event key's slot).
/// Returns the locks it maps to that have a queue: the caller looks at
/// those queues again (their `Serve` job does this visit too).
pub fn key_event(ctx: Ctx, db: i32, name: &[u8]) -> Vec<Vec<u8>> {
    let mut queued = Vec::new();
    if !server::is_primary() {
        return queued;
    }
    if any_followed()
        && queues::len(db, name) == 0
        && with(|t| t.contains_key(&KeyRef { db, name }))
    {
        check_soon(ctx, db, name);
    }
    if !name
        .windows(TIMEOUT_INFIX.len())
        .any(|w| w == TIMEOUT_INFIX)
    {
        return queued;
    }
    let slot = key_slot(name);
    for (key, _, _) in timeout_key_candidates(name) {
        if server::cluster() && key_slot(key) != slot {
            continue;
        }
        if queues::len(db, key) > 0 {
            queued.push(key.to_vec());
        } else {
            check_soon(ctx, db, key);
        }
    }
    queued
}

/// FLUSHDB / FLUSHALL / SWAPDB (no per-key events): every followed lock of
/// the databases involved is looked at again.
pub fn look_again_in(ctx: Ctx, db: Option<i32>) {
    if !any_followed() {
        return;
    }
    let keys: Vec<QueueKey> = with(|t| {
        t.keys()
            .filter(|qk| db.is_none_or(|db| qk.db == db))
            .cloned()
            .collect()
    });
    for qk in keys {
        check_soon(ctx, qk.db, &qk.name);
    }
}

/// The node became a replica: it follows no lock now (its jobs would be
/// dropped there anyway).
pub fn forget_all() {
    let all = with(std::mem::take);
    for job in all.values().filter_map(|t| t.check) {
        scheduler::cancel(job);
    }
}

/// Runs `f` on the lock at `qk` from a job, if this node serves the key
/// now. `None`: not now.
fn with_served<R>(ctx: Ctx, qk: &QueueKey, f: impl FnOnce(&mut RwKey<'_>) -> R) -> Option<R> {
    if !ctx.select_db(qk.db) {
        return None;
    }
    let name = OwnedStr::new(&qk.name);
    if !server::serves_key(ctx, &name) {
        return None;
    }
    let mut rw = RwKey::open(ctx, &name, Mode::Write);
    Some(f(&mut rw))
}

/// Retried while someone waits or holds a tie there; a lock nobody waits
/// for whose key is not served here now is left to whoever serves it.
fn outcome<R>(qk: &QueueKey, done: Option<R>) -> Outcome {
    match done {
        Some(_) => Outcome::Done,
        None if queues::len(qk.db, &qk.name) > 0 => Outcome::Retry,
        None => {
            if let Some(job) = with(|t| t.remove(qk)).and_then(|old| old.check) {
                scheduler::cancel(job);
            }
            Outcome::Done
        }
    }
}

/// The `RwDue` job: the lock's deadline came, or a foreign change brought
/// the visit forward. A hash Redis deleted at the deadline: its holders
/// get `rwlock.expired`; one that is there: lapsed holds are swept (their
/// owners get `rwlock.expired`, a lock left with no live hold is deleted,
/// publishing nothing). Then the queue is served and the next deadline
/// recorded (`arm`).
pub fn due(ctx: Ctx, qk: &QueueKey) -> Outcome {
    let done = with_served(ctx, qk, |rw| {
        overdue(ctx, rw);
        let swept = match rw.is_missing() {
            true => Swept::default(),
            false => rwlock::sweep(rw).unwrap_or_default(),
        };
        fire_expired(ctx, rw.name(), &swept);
        changed(ctx, rw, true, |_| None);
    });
    outcome(qk, done)
}

/// The `Serve` job for a queue headed by an RW waiter: as `due`.
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    due(ctx, qk)
}

// ---- deferred work ----

/// Takes back one hold of `mode` from `owner` (a grant its client never
/// heard of, or that replicas did not acknowledge): it publishes as its
/// release would, and the queue is served.
pub fn take_back(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr, mode: RwMode) -> Outcome {
    let done = with_served(ctx, qk, |rw| {
        overdue(ctx, rw);
        match rwlock::take_back(rw, owner.as_ref(), mode) {
            Ok(Some(outcome)) => {
                fire_expired(ctx, rw.name(), &outcome.swept);
                let released = outcome.value;
                if released.owner_done {
                    holds::end(qk.db, &qk.name, owner.as_ref());
                    lifecycle::fire(ctx, Event::RwReleased, rw.name());
                    ties::untie(qk, owner.as_ref());
                }
                changed(ctx, rw, true, |handed_on| released.message(handed_on));
            }
            Ok(None) => {
                changed(ctx, rw, true, |_| None);
            }
            Err(_) => {}
        }
    });
    outcome(qk, done)
}

/// Puts back the deadlines a renewal replaced (its replicas did not
/// acknowledge it); holds whose old deadline has passed end now.
pub fn restore(ctx: Ctx, qk: &QueueKey, owner: &OwnedStr, undo: &RenewUndo) -> Outcome {
    let done = with_served(ctx, qk, |rw| {
        overdue(ctx, rw);
        let Ok(outcome) = rwlock::restore_renewal(rw, owner.as_ref(), undo) else {
            return;
        };
        fire_expired(ctx, rw.name(), &outcome.swept);
        if outcome.value && rwlock::holding(rw, owner.as_ref()).is_ok_and(|h| !h.any()) {
            holds::end(qk.db, &qk.name, owner.as_ref());
            lifecycle::fire(ctx, Event::RwExpired, rw.name());
        }
        changed(ctx, rw, true, |_| None);
    });
    outcome(qk, done)
}

/// Renews every hold of a tied owner (the `Renew` job); unties it if it
/// holds nothing any more. Not served here now: tried again later.
pub fn renew_tied(ctx: Ctx, qk: &QueueKey, owner: &Holder) -> Outcome {
    let Some((_, lease)) = ties::renewal(qk, owner) else {
        return Outcome::Done;
    };
    let renewed = with_served(ctx, qk, |rw| {
        overdue(ctx, rw);
        match rwlock::renew(rw, owner, lease) {
            Ok(outcome) => {
                fire_expired(ctx, rw.name(), &outcome.swept);
                changed(ctx, rw, !outcome.swept.is_empty(), |_| None);
                outcome.value.renewed
            }
            Err(_) => false,
        }
    });
    match renewed {
        Some(true) => {
            stats::KEEPALIVE_RENEWED.bump();
            ties::reschedule(ctx, qk.clone(), owner.clone());
            Outcome::Done
        }
        Some(false) => {
            ties::untie(qk, owner);
            Outcome::Done
        }
        None => Outcome::Retry,
    }
}

/// A tied owner's connection closed: every hold of it goes (`rwlock.closed`),
/// published as its releases would, and the queue is served.
pub fn release_tied(ctx: Ctx, qk: &QueueKey, owner: &Holder) -> Outcome {
    let done = with_served(ctx, qk, |rw| {
        overdue(ctx, rw);
        let Ok(outcome) = rwlock::release_all(rw, owner) else {
            return;
        };
        fire_expired(ctx, rw.name(), &outcome.swept);
        match outcome.value {
            Some(released) => {
                stats::KEEPALIVE_RELEASED.bump();
                holds::end(ctx.db(), rw.name().as_ref(), owner.as_ref());
                lifecycle::fire(ctx, Event::RwClosed, rw.name());
                changed(ctx, rw, true, |handed_on| released.message(handed_on));
            }
            None => {
                changed(ctx, rw, !outcome.swept.is_empty(), |_| None);
            }
        }
    });
    match done {
        Some(()) => Outcome::Done,
        None => Outcome::Retry,
    }
}
