//! The Redis side: opens keys, replicates effects, publishes, blocks and
//! unblocks clients. Lock decisions are the core's; nothing here decides who
//! holds a lock.

pub mod config;
#[macro_use]
pub mod ffi;
mod commands;
mod events;
mod firewall;
mod handoff;
mod info;
mod key;
mod module;
mod notify;
mod reply;
mod stats;
mod waiters;
