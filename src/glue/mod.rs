//! The Redis side: opens keys, replicates effects, publishes, blocks and
//! unblocks clients. Lock decisions are the core's (`hashlock-core`);
//! nothing here decides who holds a lock.
//!
//! Layers, each importing only from those below it (docs/DESIGN.md):
//!
//! 0. `runtime`: contexts and strings over the raw API, the panic
//!    firewall, the module timer, replies.
//! 1. `store`: the lock key as a `LockStore`, queue keys, the server's
//!    state, the unlock notification; `config`, `stats`, `eviction`.
//! 2. `scheduler`: one timer for every time-driven job.
//! 3. `waiting`: blocked clients, queues, KEEPALIVE ties, REPLICAS waits,
//!    and the hand-off on top of them.
//! 4. `commands`, `events`, `jobs`, `info`: what Redis calls.
//! 5. `module`: load and unload.

#[macro_use]
pub mod runtime;
pub mod config;
pub mod eviction;
pub mod stats;
pub mod store;

pub mod scheduler;

pub mod waiting;

mod commands;
mod events;
mod info;
mod jobs;

mod module;
