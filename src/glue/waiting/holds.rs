//! When each hold the module granted began and when its lease ends, so that
//! its end gives a hold sample (`metrics`) and a lapsed lease its
//! `*.expired` lifecycle event at the deadline.
//!
//! Holds are found by a 64-bit hash of (database, key, holder): nothing is
//! allocated per grant unless lifecycle events are on (then the key's name
//! is kept, to fire the event on, and the deadline is filed in an exact
//! index: one `Expire` job at the earliest deadline fires `*.expired` at the
//! deadline, never early, without a job per lock; a lapsed named hold is
//! checked against its key first (`Lapsed`): a lease renewed behind the
//! module's back is followed, not ended). Without events, lapsed holds are
//! found by a sweep of the table whenever it has doubled since the last
//! one (amortised O(1) per grant, so the table never grows with locks
//! nobody releases), and on `INFO lock`: a lapsed hold becomes a sample
//! ending at its deadline.
//!
//! A hold gone at its deadline fires `*.expired` only if the server expired
//! its key at or after that deadline (its `expired` keyspace event, heard
//! from the first named hold on): a lock that DEL, a Redisson script or
//! eviction removed earlier ended without an event of ours, and is only a
//! hold sample.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hash::BuildHasher;

use hashbrown::HashMap;

use crate::core::Millis;
use crate::glue::runtime::ffi::{Ctx, monotonic_us};
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::lifecycle;
use crate::glue::store::metrics::{self, Family};
use crate::glue::store::{KeyRef, QueueKey};

type HoldId = u64;

/// One entry per held lock while hold metrics or lifecycle events are on:
/// kept small (32 bytes; boxed name, deadline without an `Option`'s tag),
/// since a million held locks are a million entries.
struct Hold {
    family: Family,
    since_us: u64,
    /// The lease's deadline, `NO_DEADLINE` for none: read with `deadline()`.
    until: Millis,
    /// Kept while lifecycle events are on: the key and holder, to fire the
    /// expiry on and to check the key.
    named: Option<Box<(QueueKey, Box<[u8]>)>>,
}

const NO_DEADLINE: Millis = Millis::MIN;

const _: () = assert!(std::mem::size_of::<Hold>() == 32);

impl Hold {
    fn new(
        family: Family,
        since_us: u64,
        deadline: Option<Millis>,
        named: Option<Box<(QueueKey, Box<[u8]>)>>,
    ) -> Hold {
        let mut hold = Hold {
            family,
            since_us,
            until: NO_DEADLINE,
            named,
        };
        hold.set_deadline(deadline);
        hold
    }

    fn deadline(&self) -> Option<Millis> {
        (self.until != NO_DEADLINE).then_some(self.until)
    }

    fn set_deadline(&mut self, deadline: Option<Millis>) {
        self.until = deadline.unwrap_or(NO_DEADLINE);
    }
}

/// The table is swept for lapsed holds when it grows past this, then
/// past twice its size after the sweep.
const SWEEP_FLOOR: usize = 1024;

/// The ids are hashes already: no second hashing.
#[derive(Default, Clone)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type ById = HashMap<HoldId, Hold, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct Holds {
    hasher: hashbrown::DefaultHashBuilder,
    holds: ById,
    /// The size at which the table is next swept for lapsed holds.
    sweep_at: usize,
    /// Exact deadlines, filed only while lifecycle events are on (the
    /// `Expire` job fires at the earliest).
    exact: BTreeMap<(Millis, HoldId), ()>,
    /// The `Expire` job (lifecycle events on), and when it falls due.
    watch: Option<(JobId, Millis)>,
    /// Keys with named holds: how many, and when the server last expired
    /// the key (the evidence that a lapsed hold really expired).
    keys: HashMap<QueueKey, KeyWatch>,
}

#[derive(Default)]
struct KeyWatch {
    named: u32,
    expired_at: Option<Millis>,
}

thread_local! {
    static HOLDS: RefCell<Holds> = RefCell::new(Holds::default());
}

fn with<R>(f: impl FnOnce(&mut Holds) -> R) -> R {
    HOLDS.with(|h| f(&mut h.borrow_mut()))
}

impl Holds {
    fn id(&self, db: i32, key: &[u8], holder: &[u8]) -> HoldId {
        self.hasher.hash_one((db, key, holder))
    }

    fn file(&mut self, id: HoldId, deadline: Option<Millis>, exact: bool) {
        if let Some(d) = deadline
            && exact
        {
            self.exact.insert((d, id), ());
        }
    }

    /// Takes out every unnamed hold whose deadline has passed (named ones
    /// go through the exact index and their key's check).
    fn sweep_unnamed(&mut self, now: Millis) -> Vec<(Millis, Hold)> {
        let mut lapsed = Vec::new();
        self.holds.retain(|_, h| match h.deadline() {
            Some(d) if d < now && h.named.is_none() => {
                lapsed.push((d, Hold::new(h.family, h.since_us, Some(d), None)));
                false
            }
            _ => true,
        });
        self.sweep_at = (2 * self.holds.len()).max(SWEEP_FLOOR);
        self.shrink_if_sparse();
        lapsed
    }

    fn name(&mut self, qk: &QueueKey) {
        self.keys.entry(qk.clone()).or_default().named += 1;
    }

    /// A named hold on `qk` is gone; whether the server expired the key at
    /// or after `deadline` meanwhile.
    fn unname(&mut self, qk: &QueueKey, deadline: Option<Millis>) -> bool {
        let Some(w) = self.keys.get_mut(qk) else {
            return false;
        };
        let expired = matches!((w.expired_at, deadline), (Some(at), Some(d)) if at >= d);
        w.named = w.named.saturating_sub(1);
        if w.named == 0 {
            self.keys.remove(qk);
        }
        expired
    }

    fn unfile(&mut self, id: HoldId, deadline: Option<Millis>) {
        if let Some(d) = deadline
            && !self.exact.is_empty()
        {
            self.exact.remove(&(d, id));
        }
    }

    /// No hold is left: every id still filed is of a hold that ended, and
    /// would stay filed until its bucket passed and a later grant looked.
    /// Give the memory of past bursts back (100,000 acquire/release cycles
    /// left ~1.3 MB of such ids behind).
    fn forget_all(&mut self) {
        self.exact = BTreeMap::new();
        self.holds.shrink_to_fit();
        self.sweep_at = SWEEP_FLOOR;
    }

    /// A table that held many more holds than it does now gives most of
    /// its memory back (a hash table never shrinks by itself: a million
    /// locks released one by one left their 80 MB behind while a single
    /// hold that lapsed unreleased kept `forget_all` from running). Only
    /// when eight times too big, to half-full: each shrink follows a fall
    /// by at least half, so rehashing stays amortised O(1) per hold.
    fn shrink_if_sparse(&mut self) {
        let cap = self.holds.capacity();
        if cap > 4 * SWEEP_FLOOR && self.holds.len() * 8 < cap {
            self.holds.shrink_to(self.holds.len() * 2);
        }
    }

    /// Takes out a hold whose deadline has passed (`now > deadline`): from
    /// the exact index first, else from a bucket that has wholly passed.
    fn take_lapsed(&mut self, now: Millis) -> Option<(Millis, HoldId, Hold)> {
        while let Some((&(d, id), _)) = self.exact.first_key_value() {
            if d >= now {
                break;
            }
            self.exact.remove(&(d, id));
            if self.holds.get(&id).is_some_and(|h| h.deadline() == Some(d)) {
                let hold = self.holds.remove(&id)?;
                return Some((d, id, hold));
            }
        }
        None
    }
}

/// Hold samples for unnamed holds that lapsed (ending at their deadline).
fn sample_lapsed(now: Millis, lapsed: Vec<(Millis, Hold)>) {
    let now_us = monotonic_us();
    for (deadline, hold) in lapsed {
        let late_us = (now.saturating_sub(deadline).max(0) as u64).saturating_mul(1000);
        metrics::held(
            hold.family,
            now_us.saturating_sub(hold.since_us).saturating_sub(late_us),
        );
    }
}

/// Unnamed holds that lapsed become hold samples (`INFO lock`).
pub fn settle_unnamed(now: Millis) {
    let lapsed = with(|h| h.sweep_unnamed(now));
    sample_lapsed(now, lapsed);
}

/// A hold was granted (fresh, not a re-entry), lasting until `deadline`.
pub fn start(
    ctx: Ctx,
    family: Family,
    db: i32,
    key: &[u8],
    holder: &[u8],
    deadline: Option<Millis>,
) {
    let events = lifecycle::enabled();
    if !events && crate::glue::config::HOLD_METRICS.get() == 0 {
        return;
    }
    let named = events.then(|| Box::new((QueueKey::new(db, key), Box::from(holder))));
    if events {
        watch_expiries(ctx);
    }
    let now_us = monotonic_us();
    let lapsed = with(|h| {
        let id = h.id(db, key, holder);
        if let Some(n) = &named {
            h.name(&n.0);
        }
        let hold = Hold::new(family, now_us, deadline, named);
        if let Some(old) = h.holds.insert(id, hold) {
            h.unfile(id, old.deadline());
            if let Some(n) = &old.named {
                h.unname(&n.0, None);
            }
        }
        h.file(id, deadline, events);
        // Old lapsed holds nobody came back to: swept when the table has
        // doubled since the last sweep.
        (h.holds.len() > h.sweep_at.max(SWEEP_FLOOR)).then(|| h.sweep_unnamed(ctx.now()))
    });
    if let Some(lapsed) = lapsed {
        sample_lapsed(ctx.now(), lapsed);
    }
    if events {
        watch(ctx);
    }
}

/// A hold's lease moved (a renewal, a re-entry).
pub fn renewed(ctx: Ctx, db: i32, key: &[u8], holder: &[u8], deadline: Option<Millis>) {
    let events = lifecycle::enabled();
    let moved = with(|h| {
        let id = h.id(db, key, holder);
        let hold = h.holds.get_mut(&id)?;
        let old = hold.deadline();
        hold.set_deadline(deadline);
        if old == deadline {
            return Some(());
        }
        h.unfile(id, old);
        h.file(id, deadline, events);
        Some(())
    });
    if moved.is_some() && events {
        watch(ctx);
    }
}

/// A hold ended now (its release, a forced release, its connection closed,
/// an undo): its hold sample.
pub fn end(db: i32, key: &[u8], holder: &[u8]) {
    let ended = with(|h| {
        let id = h.id(db, key, holder);
        let hold = h.holds.remove(&id)?;
        h.unfile(id, hold.deadline());
        if let Some(n) = &hold.named {
            h.unname(&n.0, None);
        }
        if h.holds.is_empty() {
            h.forget_all();
        } else {
            h.shrink_if_sparse();
        }
        Some(hold)
    });
    if let Some(hold) = ended {
        metrics::held(hold.family, monotonic_us().saturating_sub(hold.since_us));
    }
}

/// Whether a lapsed hold is really gone: its key no longer holds it.
pub type Lapsed = fn(Ctx, Family, &QueueKey, &[u8]) -> LapseCheck;

/// What a lapsed hold's key says.
pub enum LapseCheck {
    /// Gone: the lease ran out. Fire its expiry (if named).
    Gone,
    /// Still held, until this new deadline (renewed behind the module's back).
    Held(Option<Millis>),
    /// The key cannot be looked at here now: look again later.
    Later,
}

/// How a lapsed hold's expiry is announced (the primitive's event).
type Expired = fn(Ctx, Family, &QueueKey);

thread_local! {
    static CHECK: RefCell<Option<Lapsed>> = const { RefCell::new(None) };
    static EXPIRED: RefCell<Option<Expired>> = const { RefCell::new(None) };
}

/// How to check a lapsed hold's key, and how to announce its expiry (the
/// primitives' business, above this layer), at load.
pub fn init(check: Lapsed, expired: Expired) {
    CHECK.with(|c| *c.borrow_mut() = Some(check));
    EXPIRED.with(|e| *e.borrow_mut() = Some(expired));
}

thread_local! {
    static WATCH_EXPIRIES: RefCell<Option<fn(Ctx)>> = const { RefCell::new(None) };
}

/// How to hear the server's `expired` keyspace events (`key_expired`), at
/// load: subscribed from the first named hold on.
pub fn init_expiries(watch: fn(Ctx)) {
    WATCH_EXPIRIES.with(|w| *w.borrow_mut() = Some(watch));
}

fn watch_expiries(ctx: Ctx) {
    if let Some(watch) = WATCH_EXPIRIES.with(|w| *w.borrow()) {
        watch(ctx);
    }
}

/// The server expired `key` (its `expired` keyspace event) at `now`.
pub fn key_expired(db: i32, key: &[u8], now: Millis) {
    with(|h| {
        if let Some(w) = h.keys.get_mut(&KeyRef { db, name: key }) {
            w.expired_at = Some(now);
        }
    });
}

/// Settles up to `max` holds whose deadline has passed: a hold sample
/// ending at its deadline, and the expiry event if they are named.
pub fn settle_lapsed(ctx: Ctx, max: usize) {
    let now = ctx.now();
    // Holds whose key the server still has although their deadline has
    // passed on our clock: looked at again in a later pass, not this one.
    let mut again: Vec<(HoldId, Hold)> = Vec::new();
    for _ in 0..max {
        let Some((deadline, id, hold)) = with(|h| h.take_lapsed(now)) else {
            break;
        };
        let check = CHECK.with(|c| *c.borrow());
        let verdict = match (&hold.named, check) {
            (Some(n), Some(check)) => check(ctx, hold.family, &n.0, &n.1),
            _ => LapseCheck::Gone,
        };
        let events = lifecycle::enabled();
        match verdict {
            LapseCheck::Gone => {
                // Expired (the server said so at or after the deadline), or
                // removed earlier by something else: no event of ours then.
                let expired = match &hold.named {
                    Some(n) => with(|h| h.unname(&n.0, Some(deadline))),
                    None => false,
                };
                // It ended at its deadline, not when it was noticed.
                let late_us = (now.saturating_sub(deadline).max(0) as u64).saturating_mul(1000);
                let us = monotonic_us()
                    .saturating_sub(hold.since_us)
                    .saturating_sub(late_us);
                metrics::held(hold.family, us);
                if let (true, Some(n), Some(announce)) =
                    (expired, &hold.named, EXPIRED.with(|e| *e.borrow()))
                {
                    announce(ctx, hold.family, &n.0);
                }
            }
            // Valkey and Redis >= 7.2 expire keys by the time taken when the
            // current callback began (`commandTimeSnapshot`: a job batch that
            // started in millisecond d and runs into d+1 still sees a key
            // with deadline d as live), while `now` is the clock's: the key
            // goes at the next batch. Taken back into this pass it would be
            // taken out again at once, for ever (found by analysis after a
            // server answered nothing for 10 s under R8's multi-key churn on
            // Valkey; Redis 7.0 expires by the clock outside commands).
            LapseCheck::Held(Some(held_until)) if held_until < now => again.push((id, hold)),
            LapseCheck::Held(deadline) => with(|h| {
                h.file(id, deadline, events);
                let mut hold = hold;
                hold.set_deadline(deadline);
                h.holds.insert(id, hold);
            }),
            LapseCheck::Later => with(|h| {
                let later = Some(now.saturating_add(10));
                h.file(id, later, events);
                let mut hold = hold;
                hold.set_deadline(later);
                h.holds.insert(id, hold);
            }),
        }
    }
    let look_again = !again.is_empty();
    with(|h| {
        for (id, hold) in again {
            h.file(id, hold.deadline(), true);
            h.holds.insert(id, hold);
        }
        if h.holds.is_empty() {
            h.forget_all();
        } else {
            h.shrink_if_sparse();
        }
    });
    if look_again {
        watch(ctx);
    }
}

/// While lifecycle events are on, one `Expire` job waits for the earliest
/// deadline (1 ms after it: Redis expires a key once now > deadline).
fn watch(ctx: Ctx) {
    if !lifecycle::enabled() {
        return;
    }
    let (first, current) = with(|h| (h.exact.keys().next().map(|&(d, _)| d), h.watch));
    let Some(first) = first else { return };
    let due = first.saturating_add(1);
    if current.is_some_and(|(_, at)| at <= due) {
        return;
    }
    if let Some((job, _)) = current {
        scheduler::cancel(job);
    }
    let job = scheduler::at(ctx, due, Job::Expire);
    with(|h| h.watch = Some((job, due)));
}

/// The `Expire` job: lapsed holds get their expiry, then the next watch.
pub fn expire_due(ctx: Ctx) {
    with(|h| h.watch = None);
    settle_lapsed(ctx, usize::MAX);
    watch(ctx);
}

/// Holds tracked (INFO, tests).
pub fn count() -> usize {
    with(|h| h.holds.len())
}

/// Whether the expiry watch job is pending (0 or 1).
pub fn watching() -> usize {
    usize::from(with(|h| h.watch.is_some()))
}

/// Drops the expiry watch (module unload: it is no reason to stay loaded).
pub fn stop_watch() {
    if let Some((job, _)) = with(|h| h.watch.take()) {
        scheduler::cancel(job);
    }
}
