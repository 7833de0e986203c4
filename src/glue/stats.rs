//! Counters for `INFO lock`. Relaxed atomics: Redis calls us from one thread.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Fresh locks granted at once.
pub static ACQUIRED: Counter = Counter::new();
/// Re-entries by the holder.
pub static REENTERED: Counter = Counter::new();
/// ACQUIRE answered nil (held by another owner or promised to waiters).
pub static BUSY: Counter = Counter::new();
/// Locks freed by RELEASE or FORCERELEASE.
pub static RELEASED: Counter = Counter::new();
pub static FORCE_RELEASED: Counter = Counter::new();
pub static RENEWED: Counter = Counter::new();
/// RELEASE by a non-holder (a lost lease, usually).
pub static NOT_OWNER: Counter = Counter::new();
/// Unlock notifications published.
pub static PUBLISHED: Counter = Counter::new();
/// ACQUIRE ... BLOCK calls that had to wait.
pub static BLOCKED: Counter = Counter::new();
/// Locks handed to a waiter.
pub static GRANTED_AFTER_WAIT: Counter = Counter::new();
/// Waiters whose BLOCK time ran out (or CLIENT UNBLOCK ... TIMEOUT).
pub static TIMED_OUT: Counter = Counter::new();
/// Waiters whose connection closed (or CLIENT UNBLOCK ... ERROR).
pub static DISCONNECTED: Counter = Counter::new();
/// Grants whose client vanished before the reply: the hold was given back.
pub static UNDELIVERED: Counter = Counter::new();
/// Waiters answered UNBLOCKED because the node became a replica.
pub static DEMOTED: Counter = Counter::new();
/// Renewals of locks tied to their connection (KEEPALIVE).
pub static KEEPALIVE_RENEWED: Counter = Counter::new();
/// Tied locks released because their connection closed.
pub static KEEPALIVE_RELEASED: Counter = Counter::new();
/// Calls undone and answered NOREPLICAS after their REPLICAS time ran out.
pub static NOREPLICAS: Counter = Counter::new();
/// Grants that had lapsed or moved on before their answer was sent: the
/// client was refused (nil, or NOREPLICAS), never told it holds.
pub static STALE_GRANTS: Counter = Counter::new();

// ---- semaphores (SEMAPHORE.*) ----

/// SEMAPHORE.ACQUIRE calls granted at once.
pub static SEM_ACQUIRED: Counter = Counter::new();
/// SEMAPHORE.LEASE calls granted at once.
pub static SEM_LEASED: Counter = Counter::new();
/// SEMAPHORE.ACQUIRE / SEMAPHORE.LEASE answered nil at once (not enough
/// permits, or waiters queued).
pub static SEM_BUSY: Counter = Counter::new();
/// SEMAPHORE.RELEASE calls.
pub static SEM_RELEASED: Counter = Counter::new();
/// SEMAPHORE.RETURN calls that returned their ids.
pub static SEM_RETURNED: Counter = Counter::new();
/// SEMAPHORE.RETURN refused (an id not leased: lapsed, returned, unknown).
pub static SEM_NOT_LEASED: Counter = Counter::new();
/// SEMAPHORE.RENEW calls that renewed.
pub static SEM_RENEWED: Counter = Counter::new();
/// Leased permits that lapsed and went back to the pool (server sweeps and
/// sweeps by calls, Redisson-written ids included).
pub static SEM_EXPIRED: Counter = Counter::new();
/// Tied permits returned because their connection closed.
pub static SEM_KEEPALIVE_RETURNED: Counter = Counter::new();
/// Grants taken back (REPLICAS not acknowledged, reply never delivered).
pub static SEM_TAKEN_BACK: Counter = Counter::new();
/// Available counts published on `redisson_sc:{key}`.
pub static SEM_PUBLISHED: Counter = Counter::new();

// ---- latches (LATCH.*) ----

/// LATCH.COUNTDOWN calls that opened a latch.
pub static LATCH_OPENED: Counter = Counter::new();
/// LATCH.COUNTDOWN calls.
pub static LATCH_COUNTED_DOWN: Counter = Counter::new();
/// LATCH.AWAIT waiters answered 1 when the latch opened.
pub static LATCH_RELEASED_WAITERS: Counter = Counter::new();
