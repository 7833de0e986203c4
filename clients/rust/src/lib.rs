//! Lock objects for the hashlock Redis/Valkey module (`LOCK.*` commands) on
//! redis-rs: [`sync::Lock`] on a `redis::Client`, and [`tokio::Lock`] (feature
//! `tokio`, on by default).
//!
//! What they do for you: one owner id per `Lock` (a UUID); a blocking
//! acquire on a connection of its own whose response timeout outlasts the
//! wait (redis-rs's async default of 500 ms would abandon a waiter the
//! server may still grant the lock to), closed when the wait is given up;
//! KEEPALIVE (the server renews the lease while the lock's connection
//! lives) or a watchdog when it is off; NOTOWNER as [`Error::LockLost`].

#[cfg(feature = "tokio")]
pub mod aio;
mod election;
pub mod error;
pub mod events;
pub mod family;
mod family_sync;
#[cfg(feature = "tokio")]
mod family_tokio;
pub mod net;
pub mod pool;
pub mod protocol;
pub mod sync;
pub mod target;
#[cfg(feature = "tokio")]
pub mod tokio;
pub mod watch;

pub use election::{Leader, LeaderChange};
pub use error::{Error, Result};
pub use family::{Mode, RwLockInfo, SemaphoreInfo};
pub use protocol::{DEFAULT_LEASE, LockInfo, Options};
pub use target::Target;

/// What `try_acquire` and `acquire_timeout` give (sync and tokio): the lock
/// with its guard, or not. There is deliberately no `is_held()`: a guard
/// tested and dropped in one expression (`if lock.try_acquire()?.is_some()`
/// with an `Option`) would release the lock before the code it guards runs.
/// Bind the guard instead:
///
/// ```no_run
/// # fn f(lock: &hashlock_client::sync::Lock) -> hashlock_client::Result<()> {
/// use hashlock_client::Acquired;
/// if let Acquired::Held(guard) = lock.try_acquire()? {
///     // the lock is held while `guard` lives
///     guard.release()?;
/// }
/// # Ok(()) }
/// ```
///
/// What does not compile (these doctests check it):
///
/// ```compile_fail
/// # fn f(lock: &hashlock_client::sync::Lock) -> hashlock_client::Result<()> {
/// if lock.try_acquire()?.is_some() {} // no such method: bind the guard
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # fn f(lock: &hashlock_client::sync::Lock) -> hashlock_client::Result<()> {
/// lock.try_acquire()?; // unused `Acquired`: a warning (an error here)
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # fn f(lock: &hashlock_client::sync::Lock) -> hashlock_client::Result<()> {
/// lock.acquire()?; // unused `LockGuard`: released at once; a warning (an error here)
/// # Ok(()) }
/// ```
#[must_use = "bind the guard (`if let Acquired::Held(guard) = ...`): the lock is released when it is dropped"]
pub enum Acquired<G> {
    /// Held; the guard gives the hold back.
    Held(G),
    /// Another owner holds it (or the wait ran out).
    NotAcquired,
}

impl<G> Acquired<G> {
    /// The guard, if held.
    pub fn into_guard(self) -> Option<G> {
        match self {
            Acquired::Held(g) => Some(g),
            Acquired::NotAcquired => None,
        }
    }
}

impl Options {
    /// The lease set by every acquire and renew (default 30 s).
    pub fn lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Tie the lock to the lock's connection (default true); false runs a
    /// watchdog instead.
    pub fn keepalive(mut self, on: bool) -> Self {
        self.keepalive = on;
        self
    }

    /// Ask for a fencing token with every acquisition.
    pub fn token(mut self, on: bool) -> Self {
        self.token = on;
        self
    }

    /// REPLICAS n ms: answer only once `n` replicas have the write.
    pub fn replicas(mut self, n: u32, timeout: std::time::Duration) -> Self {
        self.replicas = Some((n, timeout));
        self
    }

    /// The owner id (default: a fresh UUID per Lock).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }
}
