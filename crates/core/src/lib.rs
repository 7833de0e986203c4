//! hashlock's lock rules in plain Rust, a crate of their own so that nothing
//! Redis can creep in. Requests are parsed (`request`), decided against a
//! `LockStore` (`rules`), and the outcome tells the module what to reply and
//! what follows (publish, hand-off). `memory` runs the same rules in memory
//! for tests; `queue` is the FIFO wait-queue policy.

pub mod channel;
pub mod error;
pub mod lease;
pub mod memory;
pub mod number;
pub mod owner;
pub mod queue;
pub mod request;
pub mod rules;
pub mod store;

#[cfg(test)]
mod tests;

pub use error::{LockError, LockResult};
pub use lease::{Lease, Millis};
