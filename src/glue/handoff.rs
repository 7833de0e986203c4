//! Who gets a lock when it stops being held.
//!
//! Hand-off is direct: whatever frees the lock writes it for the head of the
//! queue in the same step (effects replicated like any grant), so there is no
//! free window for a newcomer to barge into, and nothing is published.
//!
//! - RELEASE / FORCERELEASE serve inline (`lock_freed`).
//! - The holder's lease deadline: a module timer per queued key
//!   (`arm_deadline`); opening the key at the deadline makes Redis expire it
//!   at once instead of 50-100 ms later in its active-expiry cycle.
//! - Anything else (DEL, a Redisson Lua release, eviction, FLUSHALL, SWAPDB,
//!   an undelivered grant): the key is marked and served by a 0 ms timer,
//!   because Redis 7.0 forbids writes inside keyspace callbacks.
//!
//! Timers only act on a primary, and wait while writes are paused (CLIENT
//! PAUSE WRITE, failover), when Redis must not see writes from them.

use std::cell::RefCell;
use std::collections::BTreeSet;

use super::ffi::{Ctx, OwnedStr, start_timer, stop_timer};
use super::key::{LockKey, Mode};
use super::{notify, stats, waiters};
use crate::core::Millis;
use crate::core::rules::{self, Acquired, Released};
use crate::core::store::LockStore;

/// How often to look again while writes are paused.
const PAUSE_RETRY_MS: i64 = 5;

/// The lock at `lock` was just freed by this command: serve the next waiter,
/// or tell everyone it is free.
pub fn lock_freed(ctx: Ctx, lock: &mut LockKey<'_>) {
    if !serve(ctx, lock) {
        notify::publish_unlock(ctx, lock.name());
        stats::PUBLISHED.bump();
    }
}

/// Gives the lock to the first waiter that can take it; true if one did.
/// Waiters the lock cannot be given to (the key is no longer a lock) are
/// woken with the error.
fn serve(ctx: Ctx, lock: &mut LockKey<'_>) -> bool {
    let db = ctx.db();
    let key = lock.name().as_ref();
    // No queue, no deadline timer either (a queue is dropped with its timer
    // once empty): the common release has nothing more to do here.
    if waiters::count_in(db, key) == 0 {
        return false;
    }
    let granted = loop {
        let Some((ticket, waiter)) = waiters::pop_head(db, key) else {
            break false;
        };
        match rules::acquire(lock, &waiter.owner, waiter.lease, false) {
            Ok(Acquired::Granted { holds }) => {
                waiters::grant(ctx, db, key, waiter, holds);
                break true;
            }
            Ok(Acquired::Busy) => {
                waiters::restore(db, key, ticket, waiter);
                break false;
            }
            Err(e) => waiters::fail(ctx, waiter, e),
        }
    };
    // Whoever holds it now, the next waiter (if any) is due at its deadline.
    waiters::forget_if_empty(ctx, db, key);
    arm_deadline(ctx, db, key, lock.ttl());
    granted
}

/// Makes sure the key's queue is served when the current lease runs out
/// (`ttl` ms from now; `None`: no expiry, only a release frees it).
pub fn arm_deadline(ctx: Ctx, db: i32, key: &[u8], ttl: Option<Millis>) {
    let Some(ttl) = ttl else { return };
    // Redis expires a key once now > deadline, and stores the deadline as
    // (arrival ms, rounded down) + lease: its expiry is therefore always
    // after the holder's own "sent + lease". Handing on any earlier, even
    // within the deadline millisecond, could overlap the holder's lease
    // (measured: `make bench` B4 saw a grant 0.5 ms early). So fire 1 ms
    // after the deadline and let Redis expire the key when we open it.
    let delay = ttl.saturating_add(1);
    let at = ctx.now().saturating_add(delay);
    let (stop, start) = waiters::swap_deadline(db, key, at);
    if let Some(old) = stop {
        stop_timer(ctx, old);
    }
    if start {
        let id = start_timer(ctx, delay, (db, key.to_vec()), deadline_reached);
        waiters::set_deadline(db, key, Some((id, at)));
    }
}

fn deadline_reached(ctx: Ctx, (db, key): (i32, Vec<u8>)) {
    waiters::set_deadline(db, &key, None);
    serve_key(ctx, db, &key);
}

/// Serves a key's queue outside any command (timers).
fn serve_key(ctx: Ctx, db: i32, key: &[u8]) {
    if !ctx.is_primary() || waiters::count_in(db, key) == 0 {
        return;
    }
    if ctx.writes_paused() {
        later(ctx, db, key.to_vec());
        return;
    }
    if !ctx.select_db(db) {
        return;
    }
    let name = OwnedStr::new(key);
    let mut lock = LockKey::open(ctx, &name, Mode::Write);
    serve(ctx, &mut lock);
}

// ---- deferred work: keys to look at again, grants to take back ----

#[derive(Default)]
struct Pending {
    keys: BTreeSet<(i32, Vec<u8>)>,
    /// Grants that never reached their client: (db, key, owner).
    undo: Vec<(i32, Vec<u8>, OwnedStr)>,
    armed: bool,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Serve this key's queue soon (the next event-loop turn).
pub fn later(ctx: Ctx, db: i32, key: Vec<u8>) {
    PENDING.with(|p| p.borrow_mut().keys.insert((db, key)));
    schedule(ctx);
}

/// A grant was never delivered (the client vanished before its reply): give
/// the hold back, so the lock moves on to the next waiter or becomes free.
pub fn undo_grant(ctx: Ctx, db: i32, key: Vec<u8>, owner: OwnedStr) {
    PENDING.with(|p| p.borrow_mut().undo.push((db, key, owner)));
    schedule(ctx);
}

/// Deferred work or its timer exists (the module must not unload).
pub fn work_pending() -> bool {
    PENDING.with(|p| {
        let p = p.borrow();
        p.armed || !p.keys.is_empty() || !p.undo.is_empty()
    })
}

fn schedule(ctx: Ctx) {
    let arm = PENDING.with(|p| !std::mem::replace(&mut p.borrow_mut().armed, true));
    if arm {
        let paused = ctx.writes_paused();
        start_timer(
            ctx,
            if paused { PAUSE_RETRY_MS } else { 0 },
            (),
            run_pending,
        );
    }
}

fn run_pending(ctx: Ctx, (): ()) {
    PENDING.with(|p| p.borrow_mut().armed = false);
    if !ctx.is_primary() {
        // A replica grants nothing; its waiters were unblocked with an error.
        PENDING.with(|p| *p.borrow_mut() = Pending::default());
        return;
    }
    if ctx.writes_paused() {
        schedule(ctx);
        return;
    }
    let Pending { keys, undo, .. } = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    for (db, key, owner) in undo {
        if !ctx.select_db(db) {
            continue;
        }
        let name = OwnedStr::new(&key);
        let mut lock = LockKey::open(ctx, &name, Mode::Write);
        // Drop the one hold we granted; if the lease already ran out or the
        // lock was taken from it, there is nothing to give back.
        if let Ok(Released::Freed) = rules::release(&mut lock, &owner) {
            lock_freed(ctx, &mut lock);
        }
    }
    for (db, key) in keys {
        serve_key(ctx, db, &key);
    }
}
