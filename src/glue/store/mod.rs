//! Layer 1: the keyspace as the lock rules see it. `LockKey` is the core's
//! `LockStore` over a real key (low-level key API, effects replicated as
//! they are made), `SemKey` the `SemaphoreStore` (the permit count and the
//! lease set), `LatchKey` the `LatchStore`, `RwKey` the `RwLockStore` (the
//! hash and the read holds' timeout keys), `token` the fencing-token counter
//! `LockKey` and `RwKey` use; `QueueKey` names a lock across calls (a
//! database and the key's bytes, shared by everything that refers to it);
//! `own_event` marks the keyspace events the module fires for its own
//! writes.

mod key;
mod latch;
mod own_event;
mod queue_key;
mod rw_key;
mod semaphore;
mod token;

pub use key::{LockKey, Mode, ONE};
pub use latch::LatchKey;
pub use own_event::{OwnEvent, is_own_event};
pub use queue_key::{Holder, KeyRef, QueueKey};
pub use rw_key::RwKey;
pub use semaphore::SemKey;

pub mod derived;
pub mod ids;
pub mod lifecycle;
pub mod metrics;
pub mod notify;
pub mod server;
