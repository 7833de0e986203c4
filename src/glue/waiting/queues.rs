//! The queues: every client waiting in the server (any primitive, any
//! command), one FIFO per key, and one arrival order across all keys.
//!
//! A waiter stands in the queue of each key it waits for (one, or several
//! for LOCK.MACQUIRE) under a single ticket from one global counter, so
//! "who came first" means the same on every key: a multi-key waiter is
//! never overtaken on any of its keys by a later waiter, and the earliest
//! waiter of all heads every one of its queues (no deadlock).
//!
//! Touched only in short closures that never call into Redis, so a callback
//! Redis makes while the module is inside a Redis call can always borrow it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashMap;

use super::handle::Blocked;
use crate::core::Millis;
use crate::core::request::Replicas;
use crate::glue::runtime::ffi::Ctx;
use crate::glue::runtime::ffi::OwnedStr;
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::ids::{ClientId, Counter, WaiterId};
use crate::glue::store::{KeyRef, QueueKey};

/// What a waiter asks for: the primitive's request, owned (it outlives the
/// command).
pub enum Ask {
    /// LOCK.ACQUIRE ... BLOCK.
    Lock(LockAsk),
    /// SEMAPHORE.ACQUIRE / SEMAPHORE.LEASE ... BLOCK (one queue for both).
    Semaphore(crate::core::semaphore::Want),
    /// LATCH.AWAIT ... BLOCK.
    Latch,
    /// RWLOCK.ACQUIRE ... BLOCK.
    Rw(RwAsk),
    /// LOCK.MACQUIRE ... BLOCK: every one of its keys (the queues it stands
    /// in, in the order given), all at once.
    Multi(MultiAsk),
}

/// A lock request (LOCK.ACQUIRE).
pub struct LockAsk {
    pub owner: OwnedStr,
    /// `*`: reply with the owner instead of the hold count.
    pub generated: bool,
    pub lease: crate::core::Lease,
    pub token: bool,
}

/// A read or write hold of an RW lock (RWLOCK.ACQUIRE).
pub struct RwAsk {
    pub owner: OwnedStr,
    /// `*`: reply with the owner instead of the hold count.
    pub generated: bool,
    pub mode: crate::core::rwlock::RwMode,
    pub lease: crate::core::Lease,
    pub token: bool,
}

/// Several locks at once (LOCK.MACQUIRE); the keys are where it stands.
pub struct MultiAsk {
    pub owner: OwnedStr,
    pub lease: crate::core::Lease,
}

/// The primitives that queue waiters (a LOCK.MACQUIRE waiter waits for
/// LOCK.* locks: `Lock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Lock,
    Semaphore,
    Latch,
    Rw,
}

impl Ask {
    pub fn family(&self) -> Family {
        match self {
            Ask::Lock(_) | Ask::Multi(_) => Family::Lock,
            Ask::Rw(_) => Family::Rw,
            Ask::Semaphore(_) => Family::Semaphore,
            Ask::Latch => Family::Latch,
        }
    }

    /// The primitive its wait is measured under (`INFO lock`).
    pub fn measured(&self) -> crate::glue::store::metrics::Family {
        use crate::glue::store::metrics::Family as M;
        match self {
            Ask::Lock(_) | Ask::Multi(_) => M::Lock,
            Ask::Rw(_) => M::RwLock,
            Ask::Semaphore(_) => M::Semaphore,
            Ask::Latch => M::Latch,
        }
    }

    /// The owner the request names, if it has one (LOCK.WAITERS).
    pub fn owner(&self) -> Option<&[u8]> {
        match self {
            Ask::Lock(a) => (!a.generated).then_some(a.owner.as_ref()),
            Ask::Semaphore(_) | Ask::Latch => None,
            Ask::Rw(a) => (!a.generated).then_some(a.owner.as_ref()),
            Ask::Multi(a) => Some(a.owner.as_ref()),
        }
    }

    /// What it waits for, as LOCK.WAITERS shows it.
    pub fn describe(&self) -> String {
        match self {
            Ask::Lock(_) | Ask::Multi(_) => "lock".into(),
            Ask::Rw(a) => a.mode.waits_for().into(),
            Ask::Semaphore(want) => want.describe(),
            Ask::Latch => "await".into(),
        }
    }
}

/// A client parked in one or more queues, and what it asked for.
pub struct Waiter {
    pub id: WaiterId,
    pub handle: Blocked,
    /// Its connection (LOCK.WAITERS; KEEPALIVE ties to it when asked).
    pub client: ClientId,
    pub ask: Ask,
    /// KEEPALIVE: tie what it is granted to its connection.
    pub keepalive: bool,
    /// REPLICAS: the grant is answered once acknowledged.
    pub replicas: Option<Replicas>,
    /// When it was queued (server clock, and the monotonic clock in µs for
    /// its wait sample).
    pub since: Millis,
    pub since_us: u64,
    /// Its BLOCK timeout job and when it falls due, if it has one.
    pub timeout: Option<(JobId, Millis)>,
}

/// One key's queue.
#[derive(Default)]
pub struct KeyQueue {
    /// Waiters by ticket (the global arrival order).
    order: BTreeMap<u64, WaiterId>,
    /// The hand-on at the holder's lease deadline.
    pub hand_on: Option<JobId>,
    /// A `Serve` already scheduled (foreign writes come in bursts).
    pub serve: Option<JobId>,
}

/// A waiter and where it stands.
struct Standing {
    waiter: Waiter,
    ticket: u64,
    keys: Vec<QueueKey>,
}

#[derive(Default)]
struct Registry {
    ids: Counter,
    tickets: u64,
    waiters: HashMap<WaiterId, Standing>,
    /// Keys are shared with every `QueueKey` of the queue.
    queues: HashMap<QueueKey, KeyQueue>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// How many clients wait, in all queues: every call asks whether anyone
/// waits for its key, and almost always nobody does anywhere. A static
/// answers that without a thread-local lookup.
static WAITING: AtomicUsize = AtomicUsize::new(0);

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

impl Registry {
    /// Takes `id` out of its queues' order (the queues stay, even empty:
    /// `settle` drops those left empty).
    fn unlink(&mut self, id: WaiterId) -> Option<Standing> {
        let standing = self.waiters.remove(&id)?;
        for qk in &standing.keys {
            if let Some(q) = self.queues.get_mut(qk) {
                q.order.remove(&standing.ticket);
            }
        }
        WAITING.fetch_sub(1, Ordering::Relaxed);
        Some(standing)
    }

    fn link(&mut self, standing: Standing) {
        for qk in &standing.keys {
            let q = match self.queues.get_mut(qk) {
                Some(q) => q,
                None => self.queues.entry(qk.clone()).or_default(),
            };
            q.order.insert(standing.ticket, standing.waiter.id);
        }
        WAITING.fetch_add(1, Ordering::Relaxed);
        self.waiters.insert(standing.waiter.id, standing);
    }

    /// Drops the queues of `keys` that are empty; returns their jobs.
    fn settle(&mut self, keys: &[QueueKey]) -> Vec<JobId> {
        let mut jobs = Vec::new();
        for qk in keys {
            if self.queues.get(qk).is_some_and(|q| q.order.is_empty())
                && let Some(q) = self.queues.remove(qk)
            {
                jobs.extend(q.hand_on.into_iter().chain(q.serve));
            }
        }
        if self.queues.is_empty() {
            // Give the memory of past bursts back.
            self.queues = HashMap::new();
            self.waiters = HashMap::new();
        }
        jobs
    }
}

pub fn next_id() -> WaiterId {
    with(|r| WaiterId(r.ids.next()))
}

/// Whether anyone waits anywhere (callers skip even naming the key when not).
pub fn any() -> bool {
    WAITING.load(Ordering::Relaxed) != 0
}

/// How many clients wait for `key`.
pub fn len(db: i32, key: &[u8]) -> usize {
    if !any() {
        return 0;
    }
    with(|r| {
        r.queues
            .get(&KeyRef { db, name: key })
            .map_or(0, |q| q.order.len())
    })
}

/// The `QueueKey` of the queue at `key`, if there is one.
pub fn queue_key(db: i32, key: &[u8]) -> Option<QueueKey> {
    if !any() {
        return None;
    }
    with(|r| {
        let (qk, _) = r.queues.get_key_value(&KeyRef { db, name: key })?;
        Some(qk.clone())
    })
}

/// Every waiter, and the number of keys they wait for (INFO).
pub fn totals() -> (usize, usize) {
    with(|r| (r.waiters.len(), r.queues.len()))
}

/// Queues in `db` (all dbs if `None`): what a flush may have freed.
pub fn keys(db: Option<i32>) -> Vec<QueueKey> {
    with(|r| {
        r.queues
            .keys()
            .filter(|qk| db.is_none_or(|db| qk.db == db))
            .cloned()
            .collect()
    })
}

/// Parks a waiter at the tail of the queue of each of `keys` (one ticket
/// for all). The keys are the names it waits for, in `db`.
pub fn push(db: i32, keys: &[&[u8]], waiter: Waiter) -> Vec<QueueKey> {
    with(|r| {
        r.tickets += 1;
        let ticket = r.tickets;
        let keys: Vec<QueueKey> = keys
            .iter()
            .map(|&name| match r.queues.get_key_value(&KeyRef { db, name }) {
                Some((qk, _)) => qk.clone(),
                None => QueueKey::new(db, name),
            })
            .collect();
        r.link(Standing {
            waiter,
            ticket,
            keys: keys.clone(),
        });
        keys
    })
}

/// Sets a waiter's timeout job (scheduled once it is queued).
pub fn set_timeout(id: WaiterId, job: JobId, due: Millis) {
    with(|r| {
        if let Some(s) = r.waiters.get_mut(&id) {
            s.waiter.timeout = Some((job, due));
        }
    })
}

/// The head of the queue at `key`: its id, its ticket and every key it
/// waits for.
pub fn front(db: i32, key: &[u8]) -> Option<(WaiterId, u64, Vec<QueueKey>)> {
    if !any() {
        return None;
    }
    with(|r| {
        let q = r.queues.get(&KeyRef { db, name: key })?;
        let (&ticket, &id) = q.order.first_key_value()?;
        let keys = r.waiters.get(&id)?.keys.clone();
        Some((id, ticket, keys))
    })
}

/// The primitive the head of the queue at `qk` waits for.
pub fn family(qk: &QueueKey) -> Option<Family> {
    with(|r| {
        let q = r.queues.get(qk)?;
        let (_, id) = q.order.first_key_value()?;
        Some(r.waiters.get(id)?.waiter.ask.family())
    })
}

/// Whether the waiter with `ticket` heads the queue at `qk`.
pub fn heads(qk: &QueueKey, ticket: u64) -> bool {
    with(|r| {
        r.queues
            .get(qk)
            .and_then(|q| q.order.first_key_value())
            .is_some_and(|(&t, _)| t == ticket)
    })
}

/// Looks at a waiter where it stands (without taking it out).
pub fn with_waiter<R>(id: WaiterId, f: impl FnOnce(&Waiter) -> R) -> Option<R> {
    with(|r| r.waiters.get(&id).map(|s| f(&s.waiter)))
}

/// Whether any waiter queued at `key` asks for something `f` accepts (a
/// newcomer's RWLOCK.ACQUIRE READ: is a WRITE waiter queued?).
pub fn any_asking(db: i32, key: &[u8], f: impl Fn(&Ask) -> bool) -> bool {
    if !any() {
        return false;
    }
    with(|r| {
        r.queues.get(&KeyRef { db, name: key }).is_some_and(|q| {
            q.order
                .values()
                .filter_map(|id| r.waiters.get(id))
                .any(|s| f(&s.waiter.ask))
        })
    })
}

/// A waiter out of its queues, with where it stood (to be put back in its
/// place if it cannot be served yet).
pub struct TakenOut {
    pub waiter: Waiter,
    ticket: u64,
    pub keys: Vec<QueueKey>,
}

/// Takes a waiter out of every queue it stands in, to serve it. The queues
/// stay even if empty: `put_back` returns it to its place, `settle` drops
/// the queues it leaves empty.
pub fn take_out(id: WaiterId) -> Option<TakenOut> {
    let s = with(|r| r.unlink(id))?;
    Some(TakenOut {
        waiter: s.waiter,
        ticket: s.ticket,
        keys: s.keys,
    })
}

/// Puts a waiter taken out back in its place in each of its queues.
pub fn put_back(taken: TakenOut) {
    with(|r| {
        r.link(Standing {
            waiter: taken.waiter,
            ticket: taken.ticket,
            keys: taken.keys,
        })
    })
}

/// Drops the queues of `keys` that are now empty; returns their jobs to
/// cancel.
pub fn settle(keys: &[QueueKey]) -> Vec<JobId> {
    with(|r| r.settle(keys))
}

/// Removes a waiter wherever it stands (timeout, disconnect). Returns it,
/// the jobs of its queues to cancel if they are now gone, and the keys
/// where it stood first and that still have waiters (the next of them may
/// now be served: a head asking for more, or for more keys, held it back).
pub fn remove(id: WaiterId) -> Option<(Waiter, Vec<JobId>, Vec<QueueKey>)> {
    with(|r| {
        let standing = r.waiters.get(&id)?;
        let ticket = standing.ticket;
        let headed: Vec<QueueKey> = standing
            .keys
            .iter()
            .filter(|qk| {
                r.queues
                    .get(*qk)
                    .and_then(|q| q.order.first_key_value())
                    .is_some_and(|(&t, _)| t == ticket)
            })
            .cloned()
            .collect();
        let s = r.unlink(id)?;
        let jobs = r.settle(&s.keys);
        let headed = headed
            .into_iter()
            .filter(|qk| r.queues.contains_key(qk))
            .collect();
        Some((s.waiter, jobs, headed))
    })
}

/// Makes sure the queue at `key` is looked at (a `Due` job) at `due`
/// (`None`: no deadline matters now). Unless `replace`, an earlier one
/// already scheduled is kept: it finds nothing to do and arms again.
pub fn arm_due(ctx: Ctx, db: i32, key: &[u8], due: Option<Millis>, replace: bool) {
    // The queue's current one; nothing to do without a queue.
    let Some(current) = with_queue(db, key, |q| q.hand_on) else {
        return;
    };
    if let Some(job) = current {
        if !replace && due.is_some_and(|due| job.due <= due) {
            return;
        }
        scheduler::cancel(job);
        with_queue(db, key, |q| q.hand_on = None);
    }
    let (Some(due), Some(qk)) = (due, queue_key(db, key)) else {
        return;
    };
    let job = scheduler::at(ctx, due, Job::Due(qk));
    with_queue(db, key, |q| q.hand_on = Some(job));
}

/// The key's queue, to read or change its jobs.
pub fn with_queue<R>(db: i32, key: &[u8], f: impl FnOnce(&mut KeyQueue) -> R) -> Option<R> {
    with(|r| r.queues.get_mut(&KeyRef { db, name: key }).map(f))
}

/// What LOCK.WAITERS shows of one waiter.
pub struct Shown {
    pub client: ClientId,
    pub owner: Option<Vec<u8>>,
    pub wants: String,
    pub since: Millis,
    pub timeout_at: Option<Millis>,
}

/// The queue at `key`, in order.
pub fn show(db: i32, key: &[u8]) -> Vec<Shown> {
    if !any() {
        return Vec::new();
    }
    with(|r| {
        let Some(q) = r.queues.get(&KeyRef { db, name: key }) else {
            return Vec::new();
        };
        q.order
            .values()
            .filter_map(|id| r.waiters.get(id))
            .map(|s| Shown {
                client: s.waiter.client,
                owner: s.waiter.ask.owner().map(<[u8]>::to_vec),
                wants: s.waiter.ask.describe(),
                since: s.waiter.since,
                timeout_at: s.waiter.timeout.map(|(_, due)| due),
            })
            .collect()
    })
}

/// Empties every queue (the node stopped being a primary). Returns the
/// waiters and every queue job to cancel.
pub fn drain() -> (Vec<Waiter>, Vec<JobId>) {
    with(|r| {
        let mut jobs = Vec::new();
        for (_, q) in r.queues.drain() {
            jobs.extend(q.hand_on.into_iter().chain(q.serve));
        }
        let waiters = r.waiters.drain().map(|(_, s)| s.waiter).collect();
        WAITING.store(0, Ordering::Relaxed);
        (waiters, jobs)
    })
}
