//! Layer 5: loading and unloading the module (the `RedisModule_OnLoad` and
//! `RedisModule_OnUnload` entry points in `lib.rs` call `load` and `unload`).
//!
//! Written by hand rather than with the crate's `redis_module!` macro, so
//! that every callback Redis can make into the module is ours and goes
//! through the panic firewall, and so that unloading gives back everything
//! loading took (the macro keeps a detached context per load that nothing
//! frees: ~17 KB leaked per MODULE UNLOAD + LOAD, measured).

use std::ffi::c_int;

use super::config::{SETTINGS, Setting};
use super::runtime::ffi::{self, Ctx, Level, RStr, raw};
use super::runtime::{firewall, hooks, register};
use super::store::{ONE, lifecycle, metrics, notify, server};
use super::waiting::{acks, delivery, holds, queues, semaphore, serve, ties};
use super::{commands, events, eviction, info, jobs, scheduler};
use crate::core::number::parse_i64;

/// MODULE LIST `ver`: 1.0.0.
pub const VERSION: c_int = 1_00_00;

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION`: without it
/// Valkey refuses `CLUSTER MIGRATESLOTS` while the module is loaded. Locks
/// are plain hashes that migrate as they are; the source sees the moved
/// key's deletion, which `server::serves_key` tells from a release.
const VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

pub fn load(ctx: Ctx, args: &[RStr]) -> Result<(), String> {
    ffi::require_api().map_err(|missing| {
        format!("this server lacks {missing}; Redis 7.0 or later is required")
    })?;
    firewall::install_panic_hook();
    Ctx::init_module(ctx);
    server::init(ctx);
    // The stores signal modified keys themselves, only when they wrote.
    let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
    if server::valkey() {
        options |= VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION;
    }
    hooks::set_module_options(ctx, options);
    let values = module_args(args)?;
    for (setting, &value) in SETTINGS.iter().zip(&values) {
        setting.set(value);
        register::numeric_config(ctx, setting.name, value, setting.min, setting.max, *setting)?;
    }
    register::load_configs(ctx)?;
    ONE.init(b"1");
    notify::init();
    scheduler::init(jobs::run, jobs::after_batch);
    commands::register(ctx)?;
    events::subscribe(ctx)?;
    info::register(ctx);
    eviction::check(ctx);
    lifecycle::refresh(ctx);
    metrics::refresh(ctx);
    holds::init(serve::lapse_check, serve::expired);
    holds::init_expiries(events::watch_expiries);
    events::filter_commands(ctx)?;
    if !register::has_acl_categories() {
        ctx.log(
            Level::Warning,
            "lock module: this server cannot put module commands in ACL categories (Redis 7.0): \
             LOCK.* commands are in @all only, so -@write does not deny them and +@write does not \
             allow them; name them in ACL rules (README, Deployment)",
        );
    }
    Ok(())
}

pub fn unload() -> Result<(), String> {
    // Clients waiting, ties, answers on their way or jobs about to call back
    // into us: not now.
    // A semaphore's sweep at a lease deadline is not a client waiting: it
    // is dropped (the leases lapse on their own; the next call sweeps).
    if queues::totals() != (0, 0)
        || acks::count() > 0
        || ties::count() > 0
        || delivery::count() > 0
        || scheduler::pending() > semaphore::sweeps()
    {
        return Err(
            "cannot unload while clients wait for locks or locks are tied to connections; try again later"
                .into(),
        );
    }
    semaphore::drop_sweeps();
    ONE.free();
    notify::MESSAGE.free();
    register::clear();
    // Redis drops the module's subscriptions; the next load (which may find
    // this library's statics still in place) must subscribe again.
    events::forget_subscriptions();
    Ctx::free_module();
    drop(std::panic::take_hook());
    Ok(())
}

/// Logs why loading or unloading failed.
pub fn log_failure(ctx: Ctx, e: &str) {
    ctx.log(Level::Warning, &format!("lock module: {e}"));
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
        let setting: &Setting = SETTINGS[i];
        values[i] = parse_i64(value.as_ref())
            .filter(|v| (setting.min..=setting.max).contains(v))
            .ok_or_else(|| format!("{} must be {}..={}", setting.name, setting.min, setting.max))?;
        rest = tail;
    }
    Ok(values)
}
