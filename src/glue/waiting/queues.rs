//! The queues: one FIFO `WaitQueue` of `Waiter`s per lock (database, key),
//! and where each waiter stands, so a waiter can leave from anywhere (its
//! BLOCK time ran out, it disconnected) in O(log n).
//!
//! Touched only in short closures that never call into Redis, so a callback
//! Redis makes while the module is inside a Redis call can always borrow it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashMap;

use super::handle::Blocked;
use crate::core::Lease;
use crate::core::queue::{Ticket, WaitQueue};
use crate::core::request::Replicas;
use crate::core::rules::Claim;
use crate::core::serve::Waiting;
use crate::glue::runtime::ffi::{OwnedStr, RStr};
use crate::glue::scheduler::JobId;
use crate::glue::store::ids::{ClientId, Counter, WaiterId};
use crate::glue::store::{KeyRef, QueueKey};

/// A client parked in a queue, and what it asked for.
pub struct Waiter {
    pub id: WaiterId,
    pub handle: Blocked,
    /// Copied out of the command's arguments: it outlives the command.
    pub owner: OwnedStr,
    /// `*`: reply with the owner instead of the hold count.
    pub generated: bool,
    pub lease: Lease,
    pub token: bool,
    /// KEEPALIVE: tie the lock to this connection (the waiter's) when granted.
    pub tie_to: Option<ClientId>,
    /// REPLICAS: the grant is answered once acknowledged.
    pub replicas: Option<Replicas>,
    /// Its BLOCK timeout, if it has one.
    pub timeout: Option<JobId>,
}

impl Waiting<RStr> for Waiter {
    fn claim(&self) -> Claim<'_, RStr> {
        Claim {
            owner: &self.owner,
            lease: self.lease,
            token: self.token,
        }
    }
}

#[derive(Default)]
pub struct KeyQueue {
    pub queue: WaitQueue<Waiter>,
    /// The hand-on at the holder's lease deadline.
    pub hand_on: Option<JobId>,
    /// A `Serve` already scheduled (foreign writes come in bursts).
    pub serve: Option<JobId>,
}

#[derive(Default)]
struct Registry {
    ids: Counter,
    /// Keys are shared with every `QueueKey` of the queue.
    queues: HashMap<QueueKey, KeyQueue>,
    places: HashMap<WaiterId, (QueueKey, Ticket)>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// How many clients wait, in all queues: every LOCK.* call asks whether
/// anyone waits for its key, and almost always nobody does anywhere. A
/// static answers that without a thread-local lookup.
static WAITING: AtomicUsize = AtomicUsize::new(0);

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

impl Registry {
    fn queue_mut(&mut self, db: i32, name: &[u8]) -> Option<&mut KeyQueue> {
        self.queues.get_mut(&KeyRef { db, name })
    }

    /// Drops the queue at `qk` if it is empty; returns its jobs to cancel.
    fn drop_if_empty(&mut self, qk: &QueueKey) -> Vec<JobId> {
        if !self.queues.get(qk).is_some_and(|q| q.queue.is_empty()) {
            return Vec::new();
        }
        let jobs = self
            .queues
            .remove(qk)
            .map(|q| q.hand_on.into_iter().chain(q.serve).collect())
            .unwrap_or_default();
        if self.queues.is_empty() {
            // Give the memory of past bursts back.
            self.queues = HashMap::new();
            self.places = HashMap::new();
        }
        jobs
    }
}

/// The `QueueKey` of the queue at `key`, if there is one.
pub fn queue_key(db: i32, key: &[u8]) -> Option<QueueKey> {
    with(|r| {
        let (qk, _) = r.queues.get_key_value(&KeyRef { db, name: key })?;
        Some(qk.clone())
    })
}

pub fn next_id() -> WaiterId {
    with(|r| WaiterId(r.ids.next()))
}

/// Whether anyone waits anywhere (callers skip even naming the key when not).
pub fn any() -> bool {
    WAITING.load(Ordering::Relaxed) != 0
}

/// How many clients wait for the lock at `key`.
pub fn len(db: i32, key: &[u8]) -> usize {
    if WAITING.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    with(|r| r.queue_mut(db, key).map_or(0, |q| q.queue.len()))
}

/// Every waiter, and the number of keys they wait for (INFO).
pub fn totals() -> (usize, usize) {
    with(|r| (r.places.len(), r.queues.len()))
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

/// Parks a waiter at the tail of the key's queue.
pub fn push(db: i32, key: &[u8], waiter: Waiter) -> QueueKey {
    with(|r| {
        let id = waiter.id;
        let (qk, ticket) = match r.queues.get_key_value_mut(&KeyRef { db, name: key }) {
            Some((qk, q)) => (qk.clone(), q.queue.push(waiter)),
            None => {
                let qk = QueueKey::new(db, key);
                let mut q = KeyQueue::default();
                let ticket = q.queue.push(waiter);
                r.queues.insert(qk.clone(), q);
                (qk, ticket)
            }
        };
        r.places.insert(id, (qk.clone(), ticket));
        WAITING.fetch_add(1, Ordering::Relaxed);
        qk
    })
}

/// Sets a waiter's timeout job (scheduled once it is queued).
pub fn set_timeout(id: WaiterId, job: JobId) {
    with(|r| {
        let Some((qk, ticket)) = r.places.get(&id) else {
            return;
        };
        let ticket = *ticket;
        let qk = qk.clone();
        if let Some(w) = r.queues.get_mut(&qk).and_then(|q| q.queue.get_mut(ticket)) {
            w.timeout = Some(job);
        }
    })
}

/// Takes a waiter out wherever it stands. Returns it and the jobs of its
/// queue to cancel if the queue is now empty.
pub fn remove(id: WaiterId) -> Option<(Waiter, Vec<JobId>)> {
    with(|r| {
        let (qk, ticket) = r.places.remove(&id)?;
        let waiter = r.queues.get_mut(&qk)?.queue.remove(ticket)?;
        WAITING.fetch_sub(1, Ordering::Relaxed);
        let jobs = r.drop_if_empty(&qk);
        Some((waiter, jobs))
    })
}

/// Takes a key's whole queue out to be served (`put_back` returns it).
/// While it is out, the key looks unqueued to nested callbacks, which is
/// right: it is being served.
pub fn take(db: i32, key: &[u8]) -> Option<(QueueKey, WaitQueue<Waiter>)> {
    if WAITING.load(Ordering::Relaxed) == 0 {
        return None;
    }
    with(|r| {
        let (qk, q) = r.queues.get_key_value_mut(&KeyRef { db, name: key })?;
        Some((qk.clone(), q.queue.detach()))
    })
}

/// Puts a served queue back. The waiters served from it (granted or
/// failed) have left: `left` forgets where they stood. Returns the jobs to
/// cancel if the queue is now empty (then it is gone).
pub fn put_back(qk: &QueueKey, queue: WaitQueue<Waiter>, left: &[WaiterId]) -> Option<Vec<JobId>> {
    with(|r| {
        for id in left {
            if r.places.remove(id).is_some() {
                WAITING.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let q = r.queues.get_mut(qk)?;
        q.queue.attach(queue);
        let empty = q.queue.is_empty();
        empty.then(|| r.drop_if_empty(qk))
    })
}

/// The key's queue, to read or change its jobs.
pub fn with_queue<R>(db: i32, key: &[u8], f: impl FnOnce(&mut KeyQueue) -> R) -> Option<R> {
    with(|r| r.queue_mut(db, key).map(f))
}

/// Empties every queue (the node stopped being a primary). Returns the
/// waiters and every queue job to cancel.
pub fn drain() -> (Vec<Waiter>, Vec<JobId>) {
    with(|r| {
        let mut waiters = Vec::new();
        let mut jobs = Vec::new();
        for (_, mut q) in r.queues.drain() {
            jobs.extend(q.hand_on.into_iter().chain(q.serve));
            while let Some((_, w)) = q.queue.pop_front() {
                waiters.push(w);
            }
        }
        r.places.clear();
        WAITING.store(0, Ordering::Relaxed);
        (waiters, jobs)
    })
}
