//! The five commands, one file each, and their registration with Redis.
//! Each handler reads as: parse the request → the core's decision → effects
//! (writes already replicated by `LockKey`, follow-ups, the reply).

mod acquire;
mod docs;
mod force_release;
mod info;
mod release;
mod renew;

use std::ffi::{CStr, c_int};

use super::ffi::{Ctx, RStr, raw};
use super::firewall;
use super::reply::Reply;
use crate::core::LockResult;
use crate::core::request::Command;

type Handler = fn(Ctx, &[RStr]) -> LockResult<Reply>;

const KEY_RO: u32 = raw::REDISMODULE_CMD_KEY_RO;
const KEY_RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const KEY_ACCESS: u32 = raw::REDISMODULE_CMD_KEY_ACCESS;
const KEY_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_UPDATE;
const KEY_DELETE: u32 = raw::REDISMODULE_CMD_KEY_DELETE;

struct Spec {
    command: Command,
    name: &'static CStr,
    entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
    flags: &'static CStr,
    /// How the command uses its key (ACL %R~/%W~ patterns, COMMAND INFO).
    key_flags: u32,
    /// ACL categories, set where the server supports it (7.2+).
    acl: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
}

/// One `extern "C"` entry per command, each through the panic firewall.
macro_rules! entry {
    ($entry:ident, $handler:path) => {
        unsafe extern "C" fn $entry(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            let ctx = Ctx(ctx);
            firewall::command(ctx, || {
                // SAFETY: Redis passes `argc` valid strings that live for the call.
                let argv = unsafe { RStr::from_argv(argv, argc) };
                let handler: Handler = $handler;
                handler(ctx, argv.get(1..).unwrap_or_default())
            })
        }
    };
}

entry!(acquire_entry, acquire::run);
entry!(release_entry, release::run);
entry!(renew_entry, renew::run);
entry!(info_entry, info::run);
entry!(force_release_entry, force_release::run);

const SPECS: [Spec; 5] = [
    Spec {
        command: Command::Acquire,
        name: c"lock.acquire",
        key_flags: KEY_RW | KEY_ACCESS | KEY_UPDATE,
        entry: acquire_entry,
        flags: c"write deny-oom",
        acl: c"write slow blocking",
        summary: c"Takes or re-enters a reentrant lock, optionally waiting in a FIFO queue",
        complexity: c"O(1)",
    },
    Spec {
        command: Command::Release,
        name: c"lock.release",
        key_flags: KEY_RW | KEY_ACCESS | KEY_UPDATE,
        entry: release_entry,
        flags: c"write fast",
        acl: c"write fast",
        summary: c"Drops one hold of a lock; at zero frees it and serves the next waiter",
        complexity: c"O(1)",
    },
    Spec {
        command: Command::Renew,
        name: c"lock.renew",
        key_flags: KEY_RW | KEY_ACCESS | KEY_UPDATE,
        entry: renew_entry,
        flags: c"write fast",
        acl: c"write fast",
        summary: c"Extends the lease of a lock held by the owner (watchdog)",
        complexity: c"O(1)",
    },
    Spec {
        command: Command::Info,
        name: c"lock.info",
        key_flags: KEY_RO | KEY_ACCESS,
        entry: info_entry,
        flags: c"readonly fast",
        acl: c"read fast",
        summary: c"Shows the owner, hold count, lease and waiters of a lock",
        complexity: c"O(1)",
    },
    Spec {
        command: Command::ForceRelease,
        name: c"lock.forcerelease",
        key_flags: KEY_RW | KEY_ACCESS | KEY_DELETE,
        entry: force_release_entry,
        flags: c"write fast",
        acl: c"write fast",
        summary: c"Removes a lock whoever holds it and serves the next waiter",
        complexity: c"O(1)",
    },
];

/// Registers every command: key at position 1 (cluster routing, ACL key
/// patterns, COMMAND GETKEYS), arity and docs where the server takes them.
pub fn register(ctx: Ctx) -> Result<(), String> {
    for spec in &SPECS {
        let created = unsafe {
            rm!(RedisModule_CreateCommand(
                ctx.0,
                spec.name.as_ptr(),
                Some(spec.entry),
                spec.flags.as_ptr(),
                1,
                1,
                1
            ))
        };
        if created != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {}", spec.command.name()));
        }
        let command = unsafe { rm!(RedisModule_GetCommand(ctx.0, spec.name.as_ptr())) };
        if command.is_null() {
            return Err(format!("cannot find command {}", spec.command.name()));
        }
        set_info(command, spec)?;
        if let Some(set_acl) = unsafe { raw::RedisModule_SetCommandACLCategories } {
            if unsafe { set_acl(command, spec.acl.as_ptr()) } != raw::REDISMODULE_OK as c_int {
                return Err(format!(
                    "cannot set ACL categories of {}",
                    spec.command.name()
                ));
            }
        }
    }
    Ok(())
}

fn set_info(command: *mut raw::RedisModuleCommand, spec: &Spec) -> Result<(), String> {
    let Some(set_info) = (unsafe { raw::RedisModule_SetCommandInfo }) else {
        return Ok(());
    };
    // Version 1 of the struct (Redis 7.0); no arrays are passed, so the sizes
    // only have to be those of this header.
    static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    // One key at argument 1 (UPDATE, INSERT and DELETE exclude each other:
    // RELEASE both decrements and deletes, so it is an UPDATE). Without this, Redis derives a read-write spec
    // from (1,1,1) and a read-only ACL pattern refuses LOCK.INFO.
    // SAFETY (zeroed): plain C structs; the zeroed second entry ends the list.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = u64::from(spec.key_flags);
    key_specs[0].begin_search_type =
        raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    key_specs[0].bs.index.pos = 1;
    key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    key_specs[0].fk.range.lastkey = 0;
    key_specs[0].fk.range.keystep = 1;
    key_specs[0].fk.range.limit = 0;
    let mut args = docs::for_command(spec.command);
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.key_specs = key_specs.as_mut_ptr();
    info.args = args.as_mut_ptr();
    info.version = &VERSION;
    info.summary = spec.summary.as_ptr();
    info.complexity = spec.complexity.as_ptr();
    info.since = c"1.0.0".as_ptr();
    info.arity = spec.command.arity();
    if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
        return Err(format!(
            "cannot set command info of {}",
            spec.command.name()
        ));
    }
    Ok(())
}
