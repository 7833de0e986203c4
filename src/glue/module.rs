//! The module's own entry points: `RedisModule_OnLoad` and
//! `RedisModule_OnUnload`.
//!
//! Written by hand rather than with the crate's `redis_module!` macro, so
//! that every callback Redis can make into the module is ours and goes
//! through the panic firewall, and so that unloading gives back everything
//! loading took (the macro keeps a detached context per load that nothing
//! frees: ~17 KB leaked per MODULE UNLOAD + LOAD, measured).

use std::ffi::{c_int, c_longlong, c_void};

use super::config::{self, SETTINGS, Setting};
use super::runtime::ffi::{self, Ctx, Level, RStr, raw};
use super::runtime::firewall;
use super::store::{ONE, notify, server};
use super::waiting::{acks, queues, ties};
use super::{commands, events, eviction, info, jobs, scheduler};
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

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION`: without it
/// Valkey refuses `CLUSTER MIGRATESLOTS` while the module is loaded. Locks
/// are plain hashes that migrate as they are; the source sees the moved
/// key's deletion, which `server::serves_key` tells from a release.
const VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

fn load(ctx: Ctx, args: &[RStr]) -> Result<(), String> {
    ffi::require_api().map_err(|missing| {
        format!("this server lacks {missing}; Redis 7.0 or later is required")
    })?;
    firewall::install_panic_hook();
    server::init(ctx);
    // `LockKey` signals modified keys itself, only when it wrote something.
    let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
    if server::valkey() {
        options |= VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION;
    }
    unsafe { rm!(RedisModule_SetModuleOptions(ctx.0, options)) };
    let values = module_args(args)?;
    register_configs(ctx, &values)?;
    ONE.init(b"1");
    notify::init();
    scheduler::init(jobs::run);
    commands::register(ctx)?;
    events::subscribe(ctx)?;
    info::register(ctx);
    eviction::check(ctx);
    Ok(())
}

fn unload() -> Result<(), String> {
    // Clients waiting, locks tied, or jobs about to call back into us: not now.
    if queues::totals() != (0, 0)
        || acks::count() > 0
        || ties::count() > 0
        || scheduler::pending() > 0
    {
        return Err(
            "cannot unload while clients wait for locks or locks are tied to connections; try again later"
                .into(),
        );
    }
    ONE.free();
    notify::MESSAGE.free();
    // Redis drops the module's subscriptions; the next load (which may find
    // this library's statics still in place) must subscribe again.
    events::forget_subscriptions();
    drop(std::panic::take_hook());
    Ok(())
}

/// `loadmodule path [name value]...`: any config, e.g. `default-lease-ms N`.
fn module_args(args: &[RStr]) -> Result<Vec<i64>, String> {
    let mut values: Vec<i64> = SETTINGS.iter().map(|s| s.default).collect();
    let mut rest = args;
    while let [name, tail @ ..] = rest {
        let name = String::from_utf8_lossy(name.as_ref()).into_owned();
        let [value, tail @ ..] = tail else {
            return Err(format!("module argument {name} needs a value"));
        };
        let Some(i) = SETTINGS
            .iter()
            .position(|s| name.eq_ignore_ascii_case(s.name))
        else {
            let known: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
            return Err(format!(
                "unknown module argument {name} (expected one of {} followed by a number)",
                known.join(", ")
            ));
        };
        let setting = SETTINGS[i];
        values[i] = parse_i64(value.as_ref())
            .filter(|v| (setting.min..=setting.max).contains(v))
            .ok_or_else(|| format!("{} must be {}..={}", setting.name, setting.min, setting.max))?;
        rest = tail;
    }
    Ok(values)
}

/// The `lock.*` configs for CONFIG GET/SET and redis.conf.
fn register_configs(ctx: Ctx, values: &[i64]) -> Result<(), String> {
    unsafe extern "C" fn get(_name: *const std::ffi::c_char, data: *mut c_void) -> c_longlong {
        // SAFETY: `data` is the &'static Setting registered below.
        let setting = unsafe { &*(data as *const Setting) };
        firewall::callback(setting.default, || setting.get())
    }
    unsafe extern "C" fn set(
        _name: *const std::ffi::c_char,
        value: c_longlong,
        data: *mut c_void,
        _err: *mut *mut raw::RedisModuleString,
    ) -> c_int {
        // SAFETY: as in `get`. Redis has already checked the range.
        let setting = unsafe { &*(data as *const Setting) };
        firewall::callback(ERR, || {
            setting.set(value);
            OK
        })
    }
    for (setting, &value) in SETTINGS.iter().zip(values) {
        setting.set(value);
        let name = std::ffi::CString::new(setting.name).map_err(|e| e.to_string())?;
        let registered = unsafe {
            rm!(RedisModule_RegisterNumericConfig(
                ctx.0,
                name.as_ptr(),
                value,
                raw::REDISMODULE_CONFIG_DEFAULT,
                setting.min,
                setting.max,
                Some(get),
                Some(set),
                None,
                *setting as *const Setting as *mut c_void
            ))
        };
        if registered != OK {
            return Err(format!("cannot register lock.{}", setting.name));
        }
    }
    // Applies `lock.*` lines from redis.conf.
    if unsafe { rm!(RedisModule_LoadConfigs(ctx.0)) } != OK {
        return Err("cannot load the module's configuration".into());
    }
    let _ = config::DEFAULT_LEASE_MS;
    Ok(())
}
