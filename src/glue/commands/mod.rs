//! Layer 4: the commands, one file each, registered from the core's command
//! table (name, arity, flags, key spec, ACL categories and COMMAND DOCS all
//! come from its one entry per command). Each handler reads as: parse the
//! request → the core's decision → effects (writes replicated by the store
//! as they are made, follow-ups, the reply).
//!
//! Dispatch is two hops: Redis calls the entry registered for the command's
//! index (`runtime::register`), which calls the handler given here.

mod acquire;
mod call;
mod force_release;
mod info;
mod latch;
mod multi;
mod release;
mod renew;
mod rwlock;
mod semaphore;
mod waiters;

use crate::core::command::{COMMANDS, Command};
use crate::glue::runtime::ffi::Ctx;
use crate::glue::runtime::register::{self, Handler};
use crate::glue::store::server;

/// The handler of each command the module serves (`None`: not served yet).
fn handler(command: Command) -> Option<Handler> {
    Some(match command {
        Command::Acquire => acquire::run,
        Command::Release => release::run,
        Command::Renew => renew::run,
        Command::Info => info::run,
        Command::ForceRelease => force_release::run,
        Command::Waiters => waiters::run,
        Command::SemCreate => semaphore::create,
        Command::SemAdd => semaphore::add,
        Command::SemAcquire => semaphore::acquire,
        Command::SemRelease => semaphore::release,
        Command::SemLease => semaphore::lease,
        Command::SemReturn => semaphore::return_permits,
        Command::SemRenew => semaphore::renew,
        Command::SemInfo => semaphore::info,
        Command::SemDrain => semaphore::drain,
        Command::LatchCreate => latch::create,
        Command::LatchCountDown => latch::count_down,
        Command::LatchAwait => latch::await_open,
        Command::LatchCount => latch::count,
        Command::RwAcquire => rwlock::acquire::run,
        Command::RwRelease => rwlock::release::run,
        Command::RwRenew => rwlock::renew::run,
        Command::RwInfo => rwlock::info::run,
        Command::RwForceRelease => rwlock::force_release::run,
        Command::MAcquire => multi::acquire,
        Command::MRelease => multi::release,
    })
}

/// Registers every command of the table. Writing commands are refused on a
/// replica (a lock taken there would be invisible to the primary, even on a
/// writable replica).
pub fn register(ctx: Ctx) -> Result<(), String> {
    register::set_replica_check(|| !server::is_primary());
    for spec in &COMMANDS {
        if let Some(handler) = handler(spec.command) {
            register::command(ctx, spec, handler)?;
        }
    }
    Ok(())
}
