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
