//! hashlock's lock rules in plain Rust, a crate of their own so that nothing
//! Redis can creep in. Every command is described once (`command`), its
//! arguments parsed into a request (`request`), decided against a
//! `LockStore` (`rules`), and the outcome tells the module what to reply and
//! what follows (publish, hand-off). Who gets a freed lock is `serve`, over
//! the FIFO `queue`. `memory` runs the same rules in memory for tests.
//! The family beside the lock: `semaphore` (SEMAPHORE.*) and `latch`
//! (LATCH.*), each with its store trait, rules, serve policy and parsers.
//! `rwlock` is the read-write lock (RWLOCK.*), `multi` the all-or-nothing
//! multi-key lock (LOCK.MACQUIRE / LOCK.MRELEASE) over ordinary locks.

pub mod channel;
pub mod command;
pub mod error;
pub mod latch;
pub mod lease;
pub mod memory;
pub mod multi;
pub mod number;
pub mod owner;
pub mod queue;
pub mod request;
pub mod rules;
pub mod rwlock;
pub mod semaphore;
pub mod serve;
pub mod served;
pub mod slot;
pub mod store;
pub mod string;

#[cfg(test)]
mod tests;

pub use error::{LockError, LockResult};
pub use lease::{Lease, Millis};
