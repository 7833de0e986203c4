//! The Redis side: opens keys, replicates effects, publishes, blocks and
//! unblocks clients. Lock decisions are the core's (`hashlock-core`);
//! nothing here decides who holds a lock.
//!
//! Layers, each importing only from those below it (docs/DESIGN.md):
//!
//! 0. `runtime`: every raw API call, behind safe wrappers (the only layer
//!    with `unsafe`), the panic firewall, the module timer, replies.
//! 1. `store`: the lock key as a `LockStore`, queue keys, the server's
//!    state, the unlock notification; `config`, `stats`, `eviction`.
//! 2. `scheduler`: one timer for every time-driven job.
//! 3. `waiting`: blocked clients, queues, KEEPALIVE ties, REPLICAS waits,
//!    and the hand-off on top of them.
//! 4. `commands`, `events`, `jobs`, `info`: what Redis calls.
//! 5. `module`: load and unload.

#[macro_use]
pub mod runtime;
#[deny(unsafe_code)]
pub mod config;
#[deny(unsafe_code)]
pub mod eviction;
#[deny(unsafe_code)]
pub mod stats;
#[deny(unsafe_code)]
pub mod store;

#[deny(unsafe_code)]
pub mod scheduler;

#[deny(unsafe_code)]
pub mod waiting;

#[deny(unsafe_code)]
mod commands;
#[deny(unsafe_code)]
mod events;
#[deny(unsafe_code)]
mod info;
#[deny(unsafe_code)]
mod jobs;

#[deny(unsafe_code)]
pub mod module;
