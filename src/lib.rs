//! hashlock: Redisson-compatible locks and synchronizers as native
//! Redis/Valkey commands (module `lock`).
//!
//! The rules live in the `hashlock-core` crate (plain Rust, no Redis);
//! `glue` is the Redis module around them, loaded by the two entry points
//! below.

pub use hashlock_core as core;

mod glue;

use std::ffi::c_int;

use glue::runtime::ffi::{Ctx, RStr, raw};
use glue::runtime::{firewall, register};

// Module memory is Redis's (INFO memory, maxmemory). Unit tests run without
// a server, so they keep the system allocator.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;

const OK: c_int = raw::REDISMODULE_OK as c_int;
const ERR: c_int = raw::REDISMODULE_ERR as c_int;

/// # Safety
/// Called by Redis, once per load, with its context and arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // Binds the RedisModule_* API; nothing may allocate before this (the
    // global allocator is Redis's).
    // SAFETY: this is OnLoad's context.
    if !unsafe { register::init_api(ctx, c"lock", glue::module::VERSION) } {
        return ERR;
    }
    let ctx = Ctx(ctx);
    firewall::callback(ERR, || {
        // SAFETY: Redis passes `argc` valid strings for the call.
        let args = unsafe { RStr::from_argv(argv, argc) };
        match glue::module::load(ctx, args) {
            Ok(()) => OK,
            Err(e) => {
                glue::module::log_failure(ctx, &e);
                ERR
            }
        }
    })
}

/// # Safety
/// Called by Redis on MODULE UNLOAD; refusing leaves the module loaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn RedisModule_OnUnload(ctx: *mut raw::RedisModuleCtx) -> c_int {
    let ctx = Ctx(ctx);
    firewall::callback(ERR, || match glue::module::unload() {
        Ok(()) => OK,
        Err(e) => {
            glue::module::log_failure(ctx, &e);
            ERR
        }
    })
}
