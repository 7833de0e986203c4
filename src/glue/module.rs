//! The module's own entry points: `RedisModule_OnLoad` and
//! `RedisModule_OnUnload`.
//!
//! Written by hand rather than with the crate's `redis_module!` macro, so
//! that every callback Redis can make into the module is ours and goes
//! through the panic firewall, and so that unloading gives back everything
//! loading took (the macro keeps a detached context per load that nothing
//! frees: ~17 KB leaked per MODULE UNLOAD + LOAD, measured).

use std::ffi::{c_int, c_longlong, c_void};

use super::ffi::{Ctx, Level, RStr, raw};
use super::{commands, config, events, firewall, handoff, info, key, notify, waiters};
use crate::core::number::parse_i64;

const OK: c_int = raw::REDISMODULE_OK as c_int;
const ERR: c_int = raw::REDISMODULE_ERR as c_int;
/// MODULE LIST `ver`: 1.0.0.
const VERSION: c_int = 1_00_00;

/// # Safety
/// Called by Redis, once per load, with its arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // Binds the RedisModule_* API; nothing may allocate before this (the
    // global allocator is Redis's).
    let init = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            c"lock".as_ptr(),
            VERSION,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    if init == ERR {
        return ERR;
    }
    let ctx = Ctx(ctx);
    firewall::callback(ERR, || {
        // SAFETY: Redis passes `argc` valid strings for the call.
        let args = unsafe { RStr::from_argv(argv, argc) };
        match load(ctx, args) {
            Ok(()) => OK,
            Err(e) => {
                ctx.log(Level::Warning, &format!("lock module: {e}"));
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
    firewall::callback(ERR, || match unload() {
        Ok(()) => OK,
        Err(e) => {
            ctx.log(Level::Warning, &format!("lock module: {e}"));
            ERR
        }
    })
}

fn load(ctx: Ctx, args: &[RStr]) -> Result<(), String> {
    super::ffi::require_api().map_err(|missing| {
        format!("this server lacks {missing}; Redis 7.0 or later is required")
    })?;
    firewall::install_panic_hook();
    // `LockKey` signals modified keys itself, only when it wrote something.
    unsafe {
        rm!(RedisModule_SetModuleOptions(
            ctx.0,
            raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int
        ))
    };
    let default_lease = module_args(args)?;
    register_config(ctx, default_lease)?;
    key::ONE.init(b"1");
    notify::init(ctx);
    commands::register(ctx)?;
    events::subscribe(ctx)?;
    info::register(ctx);
    Ok(())
}

fn unload() -> Result<(), String> {
    // Clients waiting, or timers about to call back into us: not now.
    if waiters::totals() != (0, 0) || handoff::work_pending() {
        return Err("cannot unload while clients wait for locks; try again later".into());
    }
    key::ONE.free();
    notify::MESSAGE.free();
    // Redis drops the module's keyspace subscription; the next load (which may
    // find this library's statics still in place) must subscribe again.
    events::forget_keyspace_subscription();
    drop(std::panic::take_hook());
    Ok(())
}

/// `loadmodule path [default-lease-ms N]`: the lease default at load.
fn module_args(args: &[RStr]) -> Result<i64, String> {
    let mut default_lease = config::DEFAULT_LEASE_MS;
    let mut rest = args;
    while let [name, tail @ ..] = rest {
        let name = String::from_utf8_lossy(name.as_ref()).into_owned();
        let [value, tail @ ..] = tail else {
            return Err(format!("module argument {name} needs a value"));
        };
        if !name.eq_ignore_ascii_case("default-lease-ms") {
            return Err(format!(
                "unknown module argument {name} (expected default-lease-ms N)"
            ));
        }
        default_lease = parse_i64(value.as_ref())
            .filter(|ms| (1..=config::MAX_DEFAULT_LEASE_MS).contains(ms))
            .ok_or_else(|| {
                format!(
                    "default-lease-ms must be 1..={} ms",
                    config::MAX_DEFAULT_LEASE_MS
                )
            })?;
        rest = tail;
    }
    Ok(default_lease)
}

/// `lock.default-lease-ms` for CONFIG GET/SET and redis.conf.
fn register_config(ctx: Ctx, default_lease: i64) -> Result<(), String> {
    unsafe extern "C" fn get(_name: *const std::ffi::c_char, _data: *mut c_void) -> c_longlong {
        firewall::callback(config::DEFAULT_LEASE_MS, config::default_lease_ms)
    }
    unsafe extern "C" fn set(
        _name: *const std::ffi::c_char,
        value: c_longlong,
        _data: *mut c_void,
        _err: *mut *mut raw::RedisModuleString,
    ) -> c_int {
        // Redis has already checked the range given at registration.
        firewall::callback(ERR, || {
            config::set_default_lease_ms(value);
            OK
        })
    }
    config::set_default_lease_ms(default_lease);
    let registered = unsafe {
        rm!(RedisModule_RegisterNumericConfig(
            ctx.0,
            c"default-lease-ms".as_ptr(),
            default_lease,
            raw::REDISMODULE_CONFIG_DEFAULT,
            1,
            config::MAX_DEFAULT_LEASE_MS,
            Some(get),
            Some(set),
            None,
            std::ptr::null_mut()
        ))
    };
    if registered != OK {
        return Err("cannot register lock.default-lease-ms".into());
    }
    // Applies `lock.default-lease-ms` lines from redis.conf.
    if unsafe { rm!(RedisModule_LoadConfigs(ctx.0)) } != OK {
        return Err("cannot load the module's configuration".into());
    }
    Ok(())
}
