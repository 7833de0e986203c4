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
mod notify;
mod reply;
mod stats;
mod waiters;

use redis_module::{Context, RedisString, Status};

use ffi::{Ctx, Level};

/// Module initialisation (after `redis_module!` has registered the configs).
pub fn init(context: &Context, _args: &[RedisString]) -> Status {
    let ctx = Ctx(context.ctx);
    if let Err(missing) = ffi::require_api() {
        ctx.log(
            Level::Warning,
            &format!("lock module: this server lacks {missing}; Redis 7.0 or later is required"),
        );
        return Status::Err;
    }
    firewall::install_panic_hook();
    // `LockKey` signals modified keys itself, only when it wrote something.
    unsafe {
        rm!(RedisModule_SetModuleOptions(
            ctx.0,
            ffi::raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as std::ffi::c_int
        ))
    };
    key::ONE.init(b"1");
    notify::init(ctx);
    if let Err(e) = commands::register(ctx) {
        ctx.log(Level::Warning, &format!("lock module: {e}"));
        return Status::Err;
    }
    if let Err(e) = events::subscribe(ctx) {
        ctx.log(Level::Warning, &format!("lock module: {e}"));
        return Status::Err;
    }
    info::register(ctx);
    Status::Ok
}
