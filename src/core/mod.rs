//! The lock rules in plain Rust: no `redis_module` in here. Requests are
//! parsed (`request`), decided against a `LockStore` (`rules`), and the
//! outcome tells the glue what to reply and what follows (publish, hand-off).

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
