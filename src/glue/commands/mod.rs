//! Layer 4: the five commands, one file each, registered from the core's
//! command table (name, arity, flags, key spec, ACL categories and COMMAND
//! DOCS all come from its one entry per command). Each handler reads as:
//! parse the request → the core's decision → effects (writes replicated by
//! `LockKey` as they are made, follow-ups, the reply).

mod acquire;
mod call;
mod docs;
mod force_release;
mod info;
mod release;
mod renew;

use std::ffi::{CString, c_int};

use crate::core::command::{COMMANDS, Command, CommandSpec, KeyAccess};
use crate::core::{LockError, LockResult};
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::reply::{self, Reply};
use crate::glue::store::server;

type Handler = fn(Ctx, &[RStr]) -> LockResult<Reply>;

fn handler(command: Command) -> Handler {
    match command {
        Command::Acquire => acquire::run,
        Command::Release => release::run,
        Command::Renew => renew::run,
        Command::Info => info::run,
        Command::ForceRelease => force_release::run,
    }
}

/// Every call of a LOCK.* command: through the panic firewall, refused on a
/// replica if it writes (a lock taken there would be invisible to the
/// primary, even on a writable replica), then its handler.
fn call(command: Command, ctx: Ctx, argv: &[RStr]) -> c_int {
    reply::respond(ctx, || {
        if command.spec().writes && !server::is_primary() {
            return Err(LockError::ReadOnly);
        }
        handler(command)(ctx, argv.get(1..).unwrap_or_default())
    })
}

/// One `extern "C"` entry per command (Redis passes no user data).
macro_rules! entry {
    ($entry:ident, $command:expr) => {
        unsafe extern "C" fn $entry(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            // SAFETY: Redis passes `argc` valid strings that live for the call.
            let argv = unsafe { RStr::from_argv(argv, argc) };
            call($command, Ctx(ctx), argv)
        }
    };
}

entry!(acquire_entry, Command::Acquire);
entry!(release_entry, Command::Release);
entry!(renew_entry, Command::Renew);
entry!(info_entry, Command::Info);
entry!(force_release_entry, Command::ForceRelease);

type Entry = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

fn entry_of(command: Command) -> Entry {
    match command {
        Command::Acquire => acquire_entry,
        Command::Release => release_entry,
        Command::Renew => renew_entry,
        Command::Info => info_entry,
        Command::ForceRelease => force_release_entry,
    }
}

fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("NUL in {s:?}"))
}

/// Registers every command: key at position 1 (cluster routing, ACL key
/// patterns, COMMAND GETKEYS), arity and docs where the server takes them.
pub fn register(ctx: Ctx) -> Result<(), String> {
    for spec in &COMMANDS {
        let name = cstring(spec.name)?;
        let flags = cstring(spec.flags)?;
        let created = unsafe {
            rm!(RedisModule_CreateCommand(
                ctx.0,
                name.as_ptr(),
                Some(entry_of(spec.command)),
                flags.as_ptr(),
                1,
                1,
                1
            ))
        };
        if created != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {}", spec.name));
        }
        let command = unsafe { rm!(RedisModule_GetCommand(ctx.0, name.as_ptr())) };
        if command.is_null() {
            return Err(format!("cannot find command {}", spec.name));
        }
        set_info(command, spec)?;
        if let Some(set_acl) = unsafe { raw::RedisModule_SetCommandACLCategories } {
            let acl = cstring(spec.acl)?;
            if unsafe { set_acl(command, acl.as_ptr()) } != raw::REDISMODULE_OK as c_int {
                return Err(format!("cannot set ACL categories of {}", spec.name));
            }
        }
    }
    Ok(())
}

fn key_flags(access: KeyAccess) -> u64 {
    let flags = match access {
        KeyAccess::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        // UPDATE, INSERT and DELETE exclude each other: RELEASE both
        // decrements and deletes, so it is an UPDATE.
        KeyAccess::Update => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        KeyAccess::Delete => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_DELETE
        }
    };
    u64::from(flags)
}

fn set_info(command: *mut raw::RedisModuleCommand, spec: &CommandSpec) -> Result<(), String> {
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
    // One key at argument 1. Without this, Redis derives a read-write spec
    // from (1,1,1) and a read-only ACL pattern refuses LOCK.INFO.
    // SAFETY (zeroed): plain C structs; the zeroed second entry ends the list.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = key_flags(spec.access);
    key_specs[0].begin_search_type =
        raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    key_specs[0].bs.index.pos = 1;
    key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    key_specs[0].fk.range.lastkey = 0;
    key_specs[0].fk.range.keystep = 1;
    key_specs[0].fk.range.limit = 0;
    let mut args = docs::for_command(spec);
    let summary = cstring(spec.summary)?;
    let complexity = cstring(spec.complexity)?;
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.key_specs = key_specs.as_mut_ptr();
    info.args = args.as_mut_ptr();
    info.version = &VERSION;
    info.summary = summary.as_ptr();
    info.complexity = complexity.as_ptr();
    info.since = c"1.0.0".as_ptr();
    info.arity = spec.arity;
    if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot set command info of {}", spec.name));
    }
    Ok(())
}
