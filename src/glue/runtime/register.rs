//! What the module registers with the server at load: its commands (name,
//! flags, key specs, ACL categories, COMMAND DOCS, one `extern "C"` entry per
//! command), its numeric configs and its INFO section.
//!
//! A command's entry is a monomorphised trampoline (`entry::<I>`) that
//! looks up the handler registered at index `I` and runs it through
//! `reply::respond`: command table → handler in two hops.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_longlong, c_void};

use super::docs;
use super::ffi::{Ctx, RStr, raw};
use super::firewall;
use super::reply::{self, Reply};
use crate::core::command::{CommandSpec, KeyAccess, Keys};
use crate::core::{LockError, LockResult};

/// A command handler: the arguments after the command name.
pub type Handler = fn(Ctx, &[RStr]) -> LockResult<Reply>;

struct Registered {
    handler: Handler,
    /// Refused on a replica (`READONLY`).
    writes: bool,
}

thread_local! {
    // Redis calls modules on its main thread only.
    static TABLE: RefCell<Vec<Registered>> = const { RefCell::new(Vec::new()) };
    static IS_REPLICA: RefCell<fn() -> bool> = RefCell::new(|| false);
}

/// Tells the entries how to know the node is a replica (writing commands
/// are refused there, even on a writable replica).
pub fn set_replica_check(check: fn() -> bool) {
    IS_REPLICA.with(|c| *c.borrow_mut() = check);
}

fn run(index: usize, ctx: Ctx, args: &[RStr]) -> c_int {
    reply::respond(ctx, || {
        let (handler, writes) = TABLE.with(|t| {
            let t = t.borrow();
            let r = t
                .get(index)
                .ok_or_else(|| LockError::Internal("unregistered command".into()))?;
            Ok::<_, LockError>((r.handler, r.writes))
        })?;
        if writes && IS_REPLICA.with(|c| (c.borrow())()) {
            return Err(LockError::ReadOnly);
        }
        handler(ctx, args.get(1..).unwrap_or_default())
    })
}

unsafe extern "C" fn entry<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis passes `argc` valid strings that live for the call.
    let args = unsafe { RStr::from_argv(argv, argc) };
    run(I, Ctx(ctx), args)
}

type Entry = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

macro_rules! entries {
    ($($i:literal)*) => { [$(entry::<$i> as Entry),*] };
}

/// One entry per possible command index.
const ENTRIES: [Entry; 48] = entries!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
);

fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("NUL in {s:?}"))
}

/// Registers one command with its handler: key specs and arity where the
/// server takes them (7.0+), ACL categories where it can set them (7.2+).
pub fn command(ctx: Ctx, spec: &CommandSpec, handler: Handler) -> Result<(), String> {
    let index = TABLE.with(|t| t.borrow().len());
    let entry = *ENTRIES
        .get(index)
        .ok_or_else(|| "too many commands for the entry table".to_string())?;
    let name = cstring(spec.name)?;
    let flags = cstring(spec.flags)?;
    let (first, last, step) = spec.legacy_key_range();
    // SAFETY: a live load context, NUL-terminated name and flags, an entry
    // of the API's signature.
    let created = unsafe {
        rm!(RedisModule_CreateCommand(
            ctx.0,
            name.as_ptr(),
            Some(entry),
            flags.as_ptr(),
            first,
            last,
            step
        ))
    };
    if created != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot create command {}", spec.name));
    }
    TABLE.with(|t| {
        t.borrow_mut().push(Registered {
            handler,
            writes: spec.writes,
        })
    });
    // SAFETY: a live context and the name just registered.
    let command = unsafe { rm!(RedisModule_GetCommand(ctx.0, name.as_ptr())) };
    if command.is_null() {
        return Err(format!("cannot find command {}", spec.name));
    }
    set_info(command, spec)?;
    // SAFETY: reading an optional API pointer (7.2+).
    if let Some(set_acl) = unsafe { raw::RedisModule_SetCommandACLCategories } {
        let acl = cstring(spec.acl)?;
        // SAFETY: the command handle just found and a NUL-terminated list.
        if unsafe { set_acl(command, acl.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot set ACL categories of {}", spec.name));
        }
    }
    Ok(())
}

/// Whether the server lets modules put commands in ACL categories (7.2+).
pub fn has_acl_categories() -> bool {
    // SAFETY: reading an optional API pointer.
    unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
}

/// Forgets the handlers (module unload).
pub fn clear() {
    TABLE.with(|t| t.borrow_mut().clear());
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

/// The flags `CallerUser::may_access` takes for an access (the ACL check
/// accepts only ACCESS, INSERT, DELETE and UPDATE).
pub fn acl_flags(access: KeyAccess) -> u64 {
    let flags = match access {
        KeyAccess::Read => raw::REDISMODULE_CMD_KEY_ACCESS,
        KeyAccess::Update => raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
        KeyAccess::Delete => raw::REDISMODULE_CMD_KEY_DELETE,
    };
    u64::from(flags)
}

fn set_info(command: *mut raw::RedisModuleCommand, spec: &CommandSpec) -> Result<(), String> {
    // SAFETY: reading an optional API pointer (7.0+).
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
    // SAFETY: plain C structs; the zeroed last entry ends the list.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = key_flags(spec.access);
    key_specs[0].begin_search_type =
        raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    match spec.command.keys() {
        // One key at argument 1. Without this, Redis derives a read-write
        // spec from (1,1,1) and a read-only ACL pattern refuses LOCK.INFO.
        Keys::One => {
            key_specs[0].bs.index.pos = 1;
            key_specs[0].find_keys_type =
                raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            key_specs[0].fk.range.lastkey = 0;
            key_specs[0].fk.range.keystep = 1;
            key_specs[0].fk.range.limit = 0;
        }
        // `numkeys key [key ...]` from argument 1.
        Keys::NumKeys => {
            key_specs[0].bs.index.pos = 1;
            key_specs[0].find_keys_type =
                raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            key_specs[0].fk.keynum.keynumidx = 0;
            key_specs[0].fk.keynum.firstkey = 1;
            key_specs[0].fk.keynum.keystep = 1;
        }
    }
    let mut args = docs::for_command(spec);
    let summary = cstring(spec.summary)?;
    let complexity = cstring(spec.complexity)?;
    // SAFETY: a plain C struct; zero is "not given" for every field.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.key_specs = key_specs.as_mut_ptr();
    info.args = args.as_mut_ptr();
    info.version = &VERSION;
    info.summary = summary.as_ptr();
    info.complexity = complexity.as_ptr();
    info.since = c"1.0.0".as_ptr();
    info.arity = spec.arity;
    // SAFETY: a live command handle; every pointer in `info` outlives the
    // call, and Redis copies what it keeps.
    if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot set command info of {}", spec.name));
    }
    Ok(())
}

/// A numeric config's value, kept by the layer that owns configs.
pub trait NumericConfig: Sync + 'static {
    fn get(&self) -> i64;
    fn set(&self, value: i64);
    fn default_value(&self) -> i64;
}

/// Registers `lock.<name>` for CONFIG GET/SET and redis.conf.
pub fn numeric_config<T: NumericConfig>(
    ctx: Ctx,
    name: &str,
    value: i64,
    min: i64,
    max: i64,
    config: &'static T,
) -> Result<(), String> {
    unsafe extern "C" fn get<T: NumericConfig>(
        _name: *const c_char,
        data: *mut c_void,
    ) -> c_longlong {
        // SAFETY: `data` is the &'static T registered below.
        let config = unsafe { &*(data as *const T) };
        firewall::callback(config.default_value(), || config.get())
    }
    unsafe extern "C" fn set<T: NumericConfig>(
        _name: *const c_char,
        value: c_longlong,
        data: *mut c_void,
        _err: *mut *mut raw::RedisModuleString,
    ) -> c_int {
        // SAFETY: as in `get`. Redis has already checked the range.
        let config = unsafe { &*(data as *const T) };
        firewall::callback(raw::REDISMODULE_ERR as c_int, || {
            config.set(value);
            raw::REDISMODULE_OK as c_int
        })
    }
    let cname = cstring(name)?;
    // SAFETY: a live load context, a NUL-terminated name, callbacks of the
    // API's signature and a 'static payload they read.
    let registered = unsafe {
        rm!(RedisModule_RegisterNumericConfig(
            ctx.0,
            cname.as_ptr(),
            value,
            raw::REDISMODULE_CONFIG_DEFAULT,
            min,
            max,
            Some(get::<T>),
            Some(set::<T>),
            None,
            config as *const T as *mut c_void
        ))
    };
    if registered != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot register lock.{name}"));
    }
    Ok(())
}

/// Applies `lock.*` lines from redis.conf.
pub fn load_configs(ctx: Ctx) -> Result<(), String> {
    // SAFETY: a live load context.
    if unsafe { rm!(RedisModule_LoadConfigs(ctx.0)) } != raw::REDISMODULE_OK as c_int {
        return Err("cannot load the module's configuration".into());
    }
    Ok(())
}

/// Adds fields to `INFO lock`.
pub struct InfoSink(*mut raw::RedisModuleInfoCtx);

impl InfoSink {
    /// Starts section `lock_<name>`.
    pub fn section(&mut self, name: &CStr) {
        // SAFETY: the info context of the running callback.
        unsafe { rm!(RedisModule_InfoAddSection(self.0, name.as_ptr())) };
    }

    pub fn field(&mut self, name: &CStr, value: u64) {
        // SAFETY: as `section`.
        unsafe {
            rm!(RedisModule_InfoAddFieldULongLong(
                self.0,
                name.as_ptr(),
                value
            ))
        };
    }

    pub fn text(&mut self, name: &CStr, value: &str) {
        let value = CString::new(value.replace('\0', " ")).unwrap_or_default();
        // SAFETY: as `section`; Redis copies the value.
        unsafe {
            rm!(RedisModule_InfoAddFieldCString(
                self.0,
                name.as_ptr(),
                value.as_ptr()
            ))
        };
    }
}

thread_local! {
    static INFO: RefCell<Option<fn(&mut InfoSink)>> = const { RefCell::new(None) };
}

/// Registers what `INFO lock` shows.
pub fn info(ctx: Ctx, f: fn(&mut InfoSink)) {
    unsafe extern "C" fn call(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
        firewall::callback((), || {
            if let Some(f) = INFO.with(|i| *i.borrow()) {
                f(&mut InfoSink(ctx));
            }
        })
    }
    INFO.with(|i| *i.borrow_mut() = Some(f));
    // SAFETY: a live load context and a callback of the API's signature.
    unsafe { rm!(RedisModule_RegisterInfoFunc(ctx.0, Some(call))) };
}

/// The module's name and API version, bound first thing at load.
///
/// # Safety
/// `ctx` must be the context of `RedisModule_OnLoad`.
pub unsafe fn init_api(ctx: *mut raw::RedisModuleCtx, name: &CStr, version: c_int) -> bool {
    // SAFETY: the caller's promise.
    let init = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            name.as_ptr(),
            version,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    init != raw::REDISMODULE_ERR as c_int
}
