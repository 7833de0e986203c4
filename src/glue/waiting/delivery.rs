//! Delivery: every answer to a blocked client goes out from here, from a
//! scheduler job, never from inside a command or a callback.
//!
//! - **Re-checked when sent.** A grant (a BLOCK waiter served, a REPLICAS
//!   call acknowledged) is checked against the key at the moment it is
//!   sent, as etcd's mutex re-checks ownership after waiting: if what was
//!   granted has lapsed or moved to someone else meanwhile, the client gets
//!   its refusal (nil, or NOREPLICAS) and never a success, the call's tie
//!   change is not applied, and what may be left of the grant is taken
//!   back (a LOCK.MACQUIRE that lost one key still held the others). Only a
//!   grant that still holds applies its tie change.
//! - **Sent from a timer.** On Redis 7.0 the server writes a blocked-on-keys
//!   client's reply the moment the module unblocks it, but keeps the client
//!   flagged blocked until before-sleep; a `CLIENT UNBLOCK` in between (in
//!   the same MULTI, pipelined, or from another client later in the same
//!   event-loop turn) would unblock it again: the module would see a
//!   vanished client and take back a grant the client was told of, or the
//!   server would append `-UNBLOCKED` to it. Timers run after every client's
//!   commands of the turn and just before before-sleep, so from a job
//!   nothing can come between.
//!
//! A client unblocked or gone while its answer is pending leaves the list
//! (`leave`), and a grant it will never hear of is taken back.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::slot::{Stage, Wake, WakeSlot};
use super::ties;
use crate::core::LockError;
use crate::core::rules::{self, Holding};
use crate::core::rwlock::{self, RwMode};
use crate::glue::runtime::blocked::BlockedClient;
use crate::glue::runtime::ffi::{Ctx, OwnedStr};
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::stats;
use crate::glue::store::ids::{Counter, PendingId};
use crate::glue::store::{LockKey, Mode, QueueKey, RwKey, SemKey, server};

/// What a grant is checked against when it is sent.
pub enum Verify {
    /// `owner` still holds the lock at `key`.
    Lock { key: QueueKey, owner: OwnedStr },
    /// Anonymous semaphore permits: they cannot lapse or move, so the
    /// grant stands whatever happened to the key; only the node's role is
    /// checked (a node demoted since grants nothing).
    Anonymous,
    /// Every one of `ids` is still leased at the semaphore at `key`.
    Permits {
        key: QueueKey,
        ids: Vec<crate::core::semaphore::PermitId>,
    },
    /// `owner` still holds the RW lock at `key`: a hold of `mode`, or
    /// (`None`, a renewal) any hold.
    Rw {
        key: QueueKey,
        owner: OwnedStr,
        mode: Option<RwMode>,
    },
    /// Every one of these stands (LOCK.MACQUIRE: the owner holds every key).
    All(Vec<Verify>),
}

impl Verify {
    /// Whether the grant still stands.
    fn holds(&self, ctx: Ctx) -> bool {
        match self {
            Verify::Lock { key, owner } => {
                if !ctx.select_db(key.db) {
                    return false;
                }
                let name = OwnedStr::new(&key.name);
                let mut lock = LockKey::open(ctx, &name, Mode::Read);
                matches!(rules::holding(&mut lock, owner), Ok(Holding::Mine { .. }))
            }
            Verify::Anonymous => true,
            Verify::Permits { key, ids } => {
                if !ctx.select_db(key.db) {
                    return false;
                }
                let name = OwnedStr::new(&key.name);
                let mut sem = SemKey::open(ctx, &name, Mode::Read);
                crate::core::semaphore::all_leased(&mut sem, ids)
            }
            Verify::Rw { key, owner, mode } => {
                if !ctx.select_db(key.db) {
                    return false;
                }
                let name = OwnedStr::new(&key.name);
                let mut rw = RwKey::open(ctx, &name, Mode::Read);
                match (rwlock::holding(&mut rw, owner.as_ref()), mode) {
                    (Ok(h), Some(RwMode::Read)) => h.reads > 0,
                    (Ok(h), Some(RwMode::Write)) => h.writes > 0,
                    (Ok(h), None) => h.any(),
                    (Err(_), _) => false,
                }
            }
            Verify::All(all) => all.iter().all(|v| v.holds(ctx)),
        }
    }

    /// Whether a grant that no longer stands when sent is still taken back
    /// (its undo runs): permit ids are this grant's alone, so the ones
    /// still leased (if some lapsed or were returned by hand) must go back
    /// to the pool, and a multi-key grant that lost one key must not keep
    /// the others; a single lock's owner may hold it again by another call.
    fn takes_back_refused(&self) -> bool {
        matches!(self, Verify::Permits { .. } | Verify::All(_))
    }
}

/// An answer waiting for the delivery job.
pub struct Pending {
    handle: BlockedClient<WakeSlot>,
    /// The answer, if the grant (if any) still stands when sent.
    wake: Wake,
    /// A grant: what to check, and what the client gets if it no longer
    /// stands (nil for a BLOCK grant, NOREPLICAS for a REPLICAS call).
    grant: Option<(Verify, Wake)>,
    /// The call's tie change, applied only if the grant still stands.
    tie: Option<ties::Change>,
    /// What to take back if the client never hears of the grant.
    undo: Option<Job>,
}

impl Pending {
    /// See `handle::Blocked::deliver`.
    pub fn new(
        handle: BlockedClient<WakeSlot>,
        wake: Wake,
        grant: Option<(Verify, Wake)>,
        tie: Option<ties::Change>,
        undo: Option<Job>,
    ) -> Pending {
        Pending {
            handle,
            wake,
            grant,
            tie,
            undo,
        }
    }
}

/// Sends `wake` to a blocked client now; `undo` is what to take back if a
/// grant never reaches it.
fn unblock(client: BlockedClient<WakeSlot>, wake: Wake, undo: Option<Job>) {
    client.data().stage.replace(Stage::Answer(wake, undo));
    // Calls the timeout callback now (or, on servers that defer it, before
    // the client is next served), which sends the answer.
    client.unblock();
}

#[derive(Default)]
struct Deliveries {
    ids: Counter,
    pending: BTreeMap<PendingId, Pending>,
    job: Option<JobId>,
}

thread_local! {
    static DELIVERIES: RefCell<Deliveries> = RefCell::new(Deliveries::default());
}

fn with<R>(f: impl FnOnce(&mut Deliveries) -> R) -> R {
    DELIVERIES.with(|d| f(&mut d.borrow_mut()))
}

/// Queues an answer; the delivery job sends it as soon as the event loop
/// comes round (or at the end of the running scheduler batch).
pub fn push(pending: Pending) {
    let id = with(|d| PendingId(d.ids.next()));
    pending.handle.data().stage.replace(Stage::Pending(id));
    let schedule = with(|d| {
        d.pending.insert(id, pending);
        d.job.is_none()
    });
    if schedule {
        let ctx = Ctx::module();
        let job = scheduler::soon(ctx, Job::Deliver);
        with(|d| d.job = Some(job));
    }
}

/// Answers waiting (unload).
pub fn count() -> usize {
    with(|d| d.pending.len())
}

/// What a client that left before its answer was sent gets back: the
/// answer it would have had (a grant becomes its refusal), and what to undo.
pub struct Left {
    pub wake: Wake,
    pub undo: Option<Job>,
}

/// A client left (CLIENT UNBLOCK, disconnect) before its answer went out.
pub fn leave(id: PendingId) -> Option<Left> {
    let pending = with(|d| d.pending.remove(&id))?;
    let Pending {
        handle,
        wake,
        grant,
        undo,
        ..
    } = pending;
    handle.data().stage.replace(Stage::Done);
    handle.forget();
    Some(match grant {
        Some((_, refusal)) => Left {
            wake: refusal,
            undo,
        },
        None => Left { wake, undo: None },
    })
}

/// Sends every pending answer (the `Deliver` job, and the end of every
/// scheduler batch).
pub fn flush(ctx: Ctx) {
    let job = with(|d| d.job.take());
    if let Some(job) = job {
        scheduler::cancel(job);
    }
    loop {
        // One at a time: sending may call back into the module.
        let Some((_, pending)) = with(|d| d.pending.pop_first()) else {
            break;
        };
        send(ctx, pending);
    }
}

fn send(ctx: Ctx, pending: Pending) {
    let Pending {
        handle,
        wake,
        grant,
        tie,
        undo,
    } = pending;
    let Some((verify, refusal)) = grant else {
        if let Some(change) = tie {
            ties::apply(ctx, change);
        }
        unblock(handle, wake, undo);
        return;
    };
    if !server::is_primary() {
        // Demoted since: the grant was this node's, which serves no locks now.
        unblock(handle, Wake::Failed(LockError::Unblocked), None);
        return;
    }
    if !verify.holds(ctx) {
        stats::STALE_GRANTS.bump();
        if verify.takes_back_refused()
            && let Some(undo) = undo
        {
            scheduler::soon(ctx, undo);
        }
        unblock(handle, refusal, None);
        return;
    }
    if let Some(change) = tie {
        ties::apply(ctx, change);
    }
    unblock(handle, wake, undo);
}
