//! Layer 3: clients waiting, and locks the server keeps for connections.
//!
//! - `handle`: the blocked-client handle, answered exactly once.
//! - `queues`: the FIFO queue per lock, where each waiter stands.
//! - `ties`: KEEPALIVE, locks tied to a connection.
//! - `acks`: REPLICAS, calls waiting for replica acknowledgements.
//! - `delivery`: every answer to a blocked client, re-checked and sent
//!   from a job.
//! - `callbacks`: what Redis calls for a blocked client.
//! - `holds`: when each granted hold began and ends (hold metrics, expiry
//!   events at the deadline).
//! - `lock`: serving a lock's queue when it stops being held (LOCK.MACQUIRE
//!   waiters included), and the lock's deferred work (take-backs, tied
//!   renewals and releases).
//! - `rwlock`: the same for read-write locks, and their deadlines.
//! - `semaphore`: serving a semaphore's queue, its lease deadlines
//!   (sweeps), its tied permits and its undos.
//! - `latch`: answering a latch's waiters when it opens.
//! - `serve`: what a queue or a tie falls due for, by primitive.

pub mod acks;
pub mod callbacks;
pub mod delivery;
pub mod handle;
pub mod holds;
pub mod latch;
pub mod lock;
pub mod queues;
pub mod rwlock;
pub mod semaphore;
pub mod serve;
pub mod slot;
pub mod ties;
