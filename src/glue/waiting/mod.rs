//! Layer 3: clients waiting, and locks the server keeps for connections.
//!
//! - `handle`: the blocked-client handle, answered exactly once.
//! - `queues`: the FIFO queue per lock, where each waiter stands.
//! - `ties`: KEEPALIVE, locks tied to a connection.
//! - `acks`: REPLICAS, calls waiting for replica acknowledgements.
//! - `delivery`: every answer to a blocked client, re-checked and sent
//!   from a job.
//! - `callbacks`: what Redis calls for a blocked client.
//! - `handoff`: serving a queue when its lock stops being held (on top of
//!   the others).

pub mod acks;
pub mod callbacks;
pub mod delivery;
pub mod handle;
pub mod handoff;
pub mod queues;
pub mod slot;
pub mod ties;
