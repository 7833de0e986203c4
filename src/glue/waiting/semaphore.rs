//! The semaphore on the shared machinery: serving its queue, returning
//! leased permits at their deadlines, and its deferred work (undos, tied
//! permits renewed and returned).
//!
//! - **Queue policy**: strictly head-of-line, ACQUIRE and LEASE waiters in
//!   one queue (`core::semaphore::serve`): the head is granted if its
//!   permits are there, then the next head; a head that cannot be served
//!   yet stops the serving (a head asking for 3 is not overtaken by a
//!   later waiter asking for 1). Every writing call, and every `Serve` job
//!   (a foreign write, a head that left), serves the queue.
//! - **Follow-ups of every writing call** (`follow_up`): the ids the call
//!   swept back (`semaphore.expired`, untied), its own event, the queue
//!   served (one `semaphore.acquired` per grant), then `available` is
//!   published on `redisson_sc:{key}` when the call gave permits back and
//!   some are left, then the sweep is armed at the next lease deadline.
//! - **Sweeps** (`Job::Sweep`): one per semaphore with a timed lease, at
//!   its earliest deadline, whether or not anyone waits, Redisson-written
//!   ids included (a foreign write to `{key}:timeout` re-arms it): the
//!   lapsed permits go back **at** their deadline, the queue is served.
//! - **Ties** (`TieKind::Permit`): each permit of a LEASE ... KEEPALIVE is
//!   tied to the connection by its id; renewed by the server every third
//!   of its lease; when the connection closes, its tied permits at each key
//!   are gathered and returned in one go (`semaphore.closed`).
//! - **Undo** (`Job::Permits`): an ACQUIRE's permits are released, a
//!   LEASE's ids still leased are returned, a RENEW's previous score is put
//!   back; for a grant whose client never heard of it, or that replicas
//!   did not acknowledge in time.
//! - **Verify**: a deferred LEASE or RENEW answer stands only if its ids
//!   are all still leased when sent; anonymous permits cannot lapse.

use std::cell::RefCell;
use std::rc::Rc;

use hashbrown::HashMap;

use super::acks::{self, Answer};
use super::delivery::Verify;
use super::holds;
use super::queues::{self, Ask, TakenOut, Waiter};
use super::slot::Wake;
use super::ties::{self, Change, TieKind};
use crate::core::Millis;
use crate::core::lease::Lease;
use crate::core::queue::WaitQueue;
use crate::core::semaphore::{self, Grant, PermitId, SemaphoreWaiting, Want};
use crate::core::slot::semaphore_channel_same_slot;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, monotonic_us};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::{self, Job, JobId, Outcome, Permits};
use crate::glue::stats;
use crate::glue::store::ids::ClientId;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics::{self, Family};
use crate::glue::store::{KeyRef, Mode, OwnEvent, QueueKey, SemKey, notify, server};

#[derive(Default)]
struct State {
    /// The sweep of each semaphore with a timed lease, at its earliest
    /// deadline.
    sweeps: HashMap<QueueKey, JobId>,
    /// Tied permits of closed connections, gathered per key until their
    /// `Permits::Closed` job (its id here) returns them together.
    closing: HashMap<QueueKey, (Vec<PermitId>, Option<JobId>)>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

// ---- what a grant answers ----

/// A grant as the client gets it, with what comes with it.
pub struct Answered {
    pub reply: Reply,
    /// Re-checked when a deferred answer is sent.
    pub verify: Option<Verify>,
    /// KEEPALIVE: each leased permit tied to the connection.
    pub tie: Option<Change>,
    /// What takes the grant back.
    pub undo: Job,
}

/// The ids as the client sees them: 32 lowercase hex chars each.
pub fn ids_reply(ids: &[PermitId]) -> Reply {
    Reply::Array(
        ids.iter()
            .map(|id| Reply::Bulk(semaphore::to_hex(id).to_vec()))
            .collect(),
    )
}

/// What `grant` answers, ties and undoes. `tie_to` (KEEPALIVE) ties each
/// leased permit, renewed by `lease`.
pub fn answered(qk: &QueueKey, grant: Grant, tie_to: Option<ClientId>, lease: Lease) -> Answered {
    match grant {
        Grant::Acquired { count } => Answered {
            reply: Reply::Int(count),
            verify: Some(Verify::Anonymous),
            tie: None,
            undo: Job::Permits(qk.clone(), Permits::Acquired(count)),
        },
        Grant::Leased(leased) => {
            let tie = tie_to.map(|client| {
                Change::Many(
                    leased
                        .ids
                        .iter()
                        .map(|id| Change::Tie {
                            key: qk.clone(),
                            holder: Rc::from(&id[..]),
                            client,
                            lease,
                            kind: TieKind::Permit,
                        })
                        .collect(),
                )
            });
            Answered {
                reply: ids_reply(&leased.ids),
                verify: Some(Verify::Permits {
                    key: qk.clone(),
                    ids: leased.ids.clone(),
                }),
                tie,
                undo: Job::Permits(qk.clone(), Permits::Leased(leased.ids)),
            }
        }
    }
}

// ---- follow-ups of every change ----

/// What follows every writing call (and every job) at a semaphore, in the
/// order things happened: the ids it swept back (`semaphore.expired`,
/// untied), `then` (the call's own event), the queue served, `available`
/// published if `publish` and > 0, the next sweep armed.
pub fn follow_up(
    ctx: Ctx,
    sem: &mut SemKey<'_>,
    expired: &[Vec<u8>],
    then: Option<Event>,
    publish: bool,
) {
    if !expired.is_empty() {
        lapsed(ctx, sem, expired);
    }
    if let Some(event) = then {
        lifecycle::fire(ctx, event, sem.name());
    }
    serve(ctx, sem);
    if publish {
        publish_available(ctx, sem);
    }
    arm_sweep(ctx, sem);
}

/// Ids that lapsed went back to the pool: their ties go, the event fires.
fn lapsed(ctx: Ctx, sem: &mut SemKey<'_>, ids: &[Vec<u8>]) {
    stats::SEM_EXPIRED.add(ids.len() as u64);
    let db = ctx.db();
    for id in ids {
        holds::end(db, sem.name().as_ref(), id);
    }
    if ties::any() {
        let qk = QueueKey::new(ctx.db(), sem.name().as_ref());
        for id in ids {
            ties::untie(&qk, id);
        }
    }
    lifecycle::fire(ctx, Event::SemaphoreExpired, sem.name());
}

/// Leased ids granted (at once or after waiting): their holds begin
/// (`INFO lock` hold metrics, expiry at their deadline).
pub fn leased(ctx: Ctx, db: i32, key: &[u8], leased: &semaphore::Leased) {
    let deadline: Option<Millis> = leased.deadline;
    for id in &leased.ids {
        holds::start(ctx, Family::Semaphore, db, key, id, deadline);
    }
}

/// Unties ids returned by their holder (RETURN) or taken back.
pub fn untie_ids(db: i32, key: &[u8], ids: &[PermitId]) {
    for id in ids {
        holds::end(db, key, id);
    }
    if !ties::any() {
        return;
    }
    let qk = QueueKey::new(db, key);
    for id in ids {
        ties::untie(&qk, id);
    }
}

/// Publishes the available count on `redisson_sc:{key}` when it is > 0
/// (skipped in a cluster when the channel hashes to another slot).
pub fn publish_available(ctx: Ctx, sem: &mut SemKey<'_>) {
    let key = sem.name().as_ref();
    if server::cluster() && !semaphore_channel_same_slot(key) {
        return;
    }
    let Ok(available) = semaphore::available(sem) else {
        return;
    };
    if available > 0 {
        let channel = OwnedStr::new(&crate::core::channel::semaphore_channel(key));
        notify::publish(ctx, &channel, &OwnedStr::from_i64(available));
        stats::SEM_PUBLISHED.bump();
    }
}

// ---- the queue ----

/// A queued waiter taken out to be served, as the core's serve sees it.
struct Head {
    taken: TakenOut,
    want: Want,
}

impl SemaphoreWaiting for Head {
    fn want(&self) -> Want {
        self.want
    }
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

/// Serves the queue at `sem`, strictly head-of-line (the core decides each
/// head); true if anyone was granted. Sweep first: this does not.
pub fn serve(ctx: Ctx, sem: &mut SemKey<'_>) -> bool {
    if !queues::any() {
        return false;
    }
    let db = ctx.db();
    let key = sem.name().as_ref();
    let mut granted = false;
    while let Some((id, _, _)) = queues::front(db, key) {
        let Some(taken) = queues::take_out(id) else {
            break;
        };
        let Ask::Semaphore(want) = &taken.waiter.ask else {
            // Another primitive's waiter heads the queue: its own serving
            // takes over.
            queues::put_back(taken);
            if let Some(qk) = queues::queue_key(db, key) {
                scheduler::soon(ctx, Job::Serve(qk));
            }
            break;
        };
        let want = *want;
        let mut one = WaitQueue::default();
        one.push(Head { taken, want });
        let served = semaphore::serve(sem, &mut one);
        if let Some((head, grant)) = served.granted.into_iter().next() {
            lifecycle::fire(ctx, Event::SemaphoreAcquired, sem.name());
            cancel_jobs(queues::settle(&head.taken.keys));
            deliver(ctx, db, key, head.taken.waiter, head.want, grant);
            granted = true;
            continue;
        }
        if let Some((head, e)) = served.failed.into_iter().next() {
            cancel_jobs(queues::settle(&head.taken.keys));
            cancel_timeout(&head.taken.waiter);
            head.taken.waiter.handle.fail(e);
            continue;
        }
        // Not enough permits for the head: it keeps its place, and nobody
        // behind it overtakes it.
        if let Some((_, head)) = one.pop_front() {
            queues::put_back(head.taken);
        }
        break;
    }
    granted
}

/// Hands a waiter the permits just written for it: its answer (a lease
/// re-checked when sent), its ties, with REPLICAS a wait for replicas.
fn deliver(ctx: Ctx, db: i32, key: &[u8], waiter: Waiter, want: Want, grant: Grant) {
    cancel_timeout(&waiter);
    stats::GRANTED_AFTER_WAIT.bump();
    metrics::waited(
        Family::Semaphore,
        monotonic_us().saturating_sub(waiter.since_us),
    );
    if let Grant::Leased(l) = &grant {
        leased(ctx, db, key, l);
    }
    let qk = QueueKey::new(db, key);
    let lease = match want {
        Want::Lease(claim) => claim.lease,
        Want::Acquire { .. } => None,
    };
    let tie_to = (waiter.keepalive && lease.is_some()).then_some(waiter.client);
    let a = answered(&qk, grant, tie_to, lease.unwrap_or(Lease::WATCHDOG_DEFAULT));
    let wake = Wake::Reply(a.reply);
    match waiter.replicas.filter(|r| !r.is_none()) {
        None => waiter
            .handle
            .deliver(wake, a.verify.map(|v| (v, Wake::Nil)), a.tie, Some(a.undo)),
        Some(replicas) => {
            let answer = Answer {
                wake,
                verify: a.verify,
                tie: a.tie,
                undo: Some(a.undo),
            };
            if let Err(too_few) = acks::wait(ctx, waiter.handle, answer, replicas) {
                if let Some(undo) = too_few.undo {
                    scheduler::soon(ctx, undo);
                }
                too_few.handle.fail(too_few.error);
            }
        }
    }
}

// ---- sweeps at lease deadlines ----

/// Arms the sweep of `sem` at its next lease deadline (or drops it: no
/// timed lease left).
pub fn arm_sweep(ctx: Ctx, sem: &mut SemKey<'_>) {
    let db = ctx.db();
    let key = sem.name().as_ref();
    let registered = with(|s| !s.sweeps.is_empty())
        && with(|s| s.sweeps.contains_key(&KeyRef { db, name: key }));
    if !registered && !sem_has_leases(sem) {
        return;
    }
    let next = semaphore::next_deadline(sem).ok().flatten();
    set_sweep(ctx, db, key, next, true);
}

fn sem_has_leases(sem: &mut SemKey<'_>) -> bool {
    use crate::core::semaphore::{SemaphoreStore, SetShape};
    matches!(sem.leases(), SetShape::Zset { .. })
}

/// Schedules the sweep at `key` for `due` (`None`: none). Unless
/// `replace`, one due earlier is kept.
fn set_sweep(ctx: Ctx, db: i32, key: &[u8], due: Option<Millis>, replace: bool) {
    let current = with(|s| s.sweeps.get(&KeyRef { db, name: key }).copied());
    if let Some(job) = current {
        let pending = scheduler::is_pending(job);
        let keep = pending
            && match due {
                Some(due) => job.due == due || (!replace && job.due <= due),
                None => false,
            };
        if keep {
            return;
        }
        scheduler::cancel(job);
        with(|s| s.sweeps.remove(&KeyRef { db, name: key }));
    }
    let Some(due) = due else { return };
    let qk = QueueKey::new(db, key);
    let job = scheduler::at(ctx, due, Job::Sweep(qk.clone()));
    with(|s| s.sweeps.insert(qk, job));
}

/// Something else wrote the lease set of the semaphore at `key` (a
/// Redisson acquire, release or renewal): sweep and re-arm soon.
pub fn sweep_soon(ctx: Ctx, db: i32, key: &[u8]) {
    set_sweep(ctx, db, key, Some(ctx.now()), false);
}

/// SWAPDB exchanged two databases: the semaphores with sweeps in either
/// are looked at in the other too (their leases moved with their data).
pub fn swapped(ctx: Ctx, a: i32, b: i32) {
    let moved: Vec<(i32, std::rc::Rc<[u8]>)> = with(|s| {
        s.sweeps
            .keys()
            .filter(|qk| qk.db == a || qk.db == b)
            .map(|qk| (if qk.db == a { b } else { a }, qk.name.clone()))
            .collect()
    });
    for (db, name) in moved {
        sweep_soon(ctx, db, &name);
    }
}

/// The tied permits at `key` still leased (SEMAPHORE.INFO's `keepalive`:
/// a tie whose permit was returned behind the module's back goes at its
/// next renewal; it is not counted meanwhile).
pub fn tied_count(ctx: Ctx, sem: &mut SemKey<'_>) -> usize {
    if !ties::any() {
        return 0;
    }
    ties::holders_at(ctx.db(), sem.name().as_ref())
        .iter()
        .filter_map(|h| permit_id(h))
        .filter(|id| semaphore::all_leased(sem, std::slice::from_ref(id)))
        .count()
}

/// How many keys one discovery step looks at.
const DISCOVER_STEP: i64 = 500;

/// Starts looking for every semaphore's lease set in every database (a
/// `Discover` job per database, a SCAN step at a time): leases written
/// before the server watched (loaded at start, inherited by a promoted
/// replica, written before the first SEMAPHORE.* command) go back at
/// their deadline too.
pub fn discover_all(ctx: Ctx) {
    let databases = ctx
        .config_get(c"databases")
        .and_then(|n| n.trim().parse::<i32>().ok())
        .unwrap_or(16);
    for db in 0..databases.max(1) {
        scheduler::soon(ctx, Job::Discover(db, b"0".to_vec()));
    }
}

/// One discovery step in `db` from `cursor`: every lease set found gets
/// its sweep (soon: it arms the next at its deadline). The next cursor, or
/// `None` when the database is done.
pub fn discover(ctx: Ctx, db: i32, cursor: &[u8]) -> Option<Vec<u8>> {
    if !ctx.select_db(db) {
        return None;
    }
    let (next, names) = ctx.scan(cursor, c"*:timeout", c"zset", DISCOVER_STEP)?;
    for name in &names {
        for key in semaphore::keys_of_lease_set(name) {
            sweep_soon(ctx, db, key);
        }
    }
    (next != b"0").then_some(next)
}

/// Sweeps waiting to run (MODULE UNLOAD drops them: a lease deadline is
/// not a client waiting).
pub fn sweeps() -> usize {
    with(|s| {
        s.sweeps
            .values()
            .filter(|&&job| scheduler::is_pending(job))
            .count()
    })
}

/// Drops every sweep (MODULE UNLOAD).
pub fn drop_sweeps() {
    let jobs: Vec<JobId> = with(|s| s.sweeps.drain().map(|(_, job)| job).collect());
    cancel_jobs(jobs);
}

// ---- jobs ----

/// Runs `f` on the semaphore at `qk` from a job, if this node serves the
/// key now; `None`: not now, retry later. `serving`: the job serves the
/// queue itself, so the `expired` events that opening lapsed keys fires
/// are the module's own.
fn with_served<R>(
    ctx: Ctx,
    qk: &QueueKey,
    serving: bool,
    f: impl FnOnce(&mut SemKey<'_>) -> R,
) -> Option<R> {
    if !ctx.select_db(qk.db) {
        return None;
    }
    let name = OwnedStr::new(&qk.name);
    if !server::serves_key(ctx, &name) {
        return None;
    }
    let mut sem = {
        let _own = serving.then(OwnEvent::mark);
        SemKey::open(ctx, &name, Mode::Write)
    };
    Some(f(&mut sem))
}

/// A job that could not act (its key not served here now): retried,
/// unless nothing of the semaphore is here any more (its slot moved away
/// with its keys): there is nothing left to do here.
fn not_now(ctx: Ctx, qk: &QueueKey) -> Outcome {
    if !ctx.select_db(qk.db) {
        return Outcome::Done;
    }
    let name = OwnedStr::new(&qk.name);
    let lease_set = OwnedStr::new(&crate::core::channel::timeout_key(&qk.name));
    let here = |key: &OwnedStr| RawKey::open(ctx, key, false).kind() != KeyKind::Empty;
    match here(&name) || here(&lease_set) {
        true => Outcome::Retry,
        false => Outcome::Done,
    }
}

fn outcome<R>(ctx: Ctx, qk: &QueueKey, done: Option<R>) -> Outcome {
    match done {
        Some(_) => Outcome::Done,
        None => not_now(ctx, qk),
    }
}

/// Sweeps what lapsed and serves; a semaphore that is not one any more
/// fails its waiters with the error.
fn sweep_and_serve(ctx: Ctx, sem: &mut SemKey<'_>) {
    match semaphore::sweep(sem) {
        Ok(expired) => {
            let back = !expired.is_empty();
            follow_up(ctx, sem, &expired, None, back);
        }
        Err(_) => {
            serve(ctx, sem);
        }
    }
}

/// Serves the queue at `qk` (the `Serve` job: something else changed the
/// key, or its head left).
pub fn serve_key(ctx: Ctx, qk: &QueueKey) -> Outcome {
    if queues::len(qk.db, &qk.name) == 0 {
        return Outcome::Done;
    }
    outcome(
        ctx,
        qk,
        with_served(ctx, qk, true, |sem| sweep_and_serve(ctx, sem)),
    )
}

/// A lease deadline came (the `Sweep` job): the lapsed permits go back,
/// the queue is served, the next sweep armed.
pub fn sweep(ctx: Ctx, qk: &QueueKey) -> Outcome {
    with(|s| s.sweeps.remove(qk));
    outcome(
        ctx,
        qk,
        with_served(ctx, qk, true, |sem| sweep_and_serve(ctx, sem)),
    )
}

/// Gives permits back (the `Permits` job).
pub fn give_back(ctx: Ctx, qk: &QueueKey, permits: &Permits) -> Outcome {
    let done = with_served(ctx, qk, false, |sem| give_back_here(ctx, qk, sem, permits));
    let outcome = outcome(ctx, qk, done);
    if outcome == Outcome::Done && matches!(permits, Permits::Closed) {
        // Gone from here with its slot: nothing of it left to return.
        with(|s| s.closing.remove(qk));
    }
    outcome
}

fn give_back_here(ctx: Ctx, qk: &QueueKey, sem: &mut SemKey<'_>, permits: &Permits) {
    match permits {
        Permits::Acquired(n) => {
            if let Ok(o) = semaphore::release(sem, *n) {
                stats::SEM_TAKEN_BACK.bump();
                follow_up(
                    ctx,
                    sem,
                    &o.expired,
                    Some(Event::SemaphoreReleased),
                    o.publish,
                );
            }
        }
        Permits::Leased(ids) => {
            if let Ok(o) = semaphore::return_ids(sem, ids) {
                untie_ids(qk.db, &qk.name, &o.reply);
                let event = (!o.reply.is_empty()).then_some(Event::SemaphoreReleased);
                if event.is_some() {
                    stats::SEM_TAKEN_BACK.bump();
                }
                follow_up(ctx, sem, &o.expired, event, o.publish);
            }
        }
        Permits::Closed => {
            let ids = with(|s| s.closing.remove(qk))
                .map(|(ids, _)| ids)
                .unwrap_or_default();
            if let Ok(o) = semaphore::return_ids(sem, &ids) {
                let event = (!o.reply.is_empty()).then_some(Event::SemaphoreClosed);
                stats::SEM_KEEPALIVE_RETURNED.add(o.reply.len() as u64);
                follow_up(ctx, sem, &o.expired, event, o.publish);
            }
        }
        Permits::Renewal(id, previous) => {
            if let Ok(true) = semaphore::restore_lease(sem, id, *previous) {
                arm_sweep(ctx, sem);
            }
        }
    }
}

fn permit_id(holder: &[u8]) -> Option<PermitId> {
    holder.try_into().ok()
}

/// A tied connection closed: its permit `holder` at `qk` goes back with the
/// others it had there (one `Permits::Closed` job per key returns them
/// together, as soon as the event loop comes round).
pub fn release_tied(ctx: Ctx, qk: &QueueKey, holder: &[u8]) -> Outcome {
    let Some(id) = permit_id(holder) else {
        return Outcome::Done;
    };
    let job = with(|s| {
        let (ids, job) = s.closing.entry(qk.clone()).or_default();
        ids.push(id);
        *job
    });
    // One job per key gathers them (a job dropped meanwhile, on a node
    // that was a replica for a while, is replaced).
    if !job.is_some_and(scheduler::is_pending) {
        let job = scheduler::soon(ctx, Job::Permits(qk.clone(), Permits::Closed));
        with(|s| {
            if let Some(entry) = s.closing.get_mut(qk) {
                entry.1 = Some(job);
            }
        });
    }
    Outcome::Done
}

/// Renews a tied permit (the `Renew` job); unties it if it is no longer
/// leased. Not served here now: tried again later, still tied.
pub fn renew_tied(ctx: Ctx, qk: &QueueKey, holder: &ties::Holder) -> Outcome {
    let Some((_, lease)) = ties::renewal(qk, holder) else {
        return Outcome::Done;
    };
    let Some(id) = permit_id(holder) else {
        ties::untie(qk, holder);
        return Outcome::Done;
    };
    let renewed = with_served(ctx, qk, false, |sem| {
        let renewed = semaphore::renew(sem, &id, lease);
        if let Ok(semaphore::Renewed::Renewed { .. }) = renewed {
            arm_sweep(ctx, sem);
        }
        renewed
    });
    match renewed {
        Some(Ok(semaphore::Renewed::Renewed { .. })) => {
            stats::KEEPALIVE_RENEWED.bump();
            ties::reschedule(ctx, qk.clone(), holder.clone());
            Outcome::Done
        }
        Some(_) => {
            ties::untie(qk, holder);
            Outcome::Done
        }
        None => match not_now(ctx, qk) {
            Outcome::Retry => Outcome::Retry,
            // Gone with its slot: nothing here to keep alive.
            Outcome::Done => {
                ties::untie(qk, holder);
                Outcome::Done
            }
        },
    }
}
