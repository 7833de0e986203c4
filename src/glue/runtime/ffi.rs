//! The thin layer over the raw Redis module API that the rest of the glue
//! uses: a context handle, borrowed and owned Redis strings, logging.
//!
//! Every raw call goes through `rm!`, which never unwraps: the APIs it names
//! are the Redis 7.0 baseline, checked once at load (`require_api`); newer
//! ones are reached through their `Option` at the call site.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::{self, NonNull};

use raw::{RedisModuleCtx, RedisModuleString};
pub use redis_module::raw;

/// Calls a Redis module API function. Missing functions cannot happen past
/// `require_api` (the module refuses to load); the panic is the firewall's.
macro_rules! rm {
    ($name:ident ( $($arg:expr),* $(,)? )) => {
        match $crate::glue::runtime::ffi::raw::$name {
            Some(f) => f($($arg),*),
            None => $crate::glue::runtime::ffi::missing(stringify!($name)),
        }
    };
}

#[cold]
pub fn missing(name: &str) -> ! {
    panic!("Redis module API {name} is not available on this server")
}

/// The module API functions hashlock needs on every server (Redis 7.0 baseline).
pub fn require_api() -> Result<(), &'static str> {
    macro_rules! check {
        ($($name:ident),* $(,)?) => {
            $( if unsafe { raw::$name }.is_none() { return Err(stringify!($name)); } )*
        };
    }
    check!(
        RedisModule_CreateCommand,
        RedisModule_GetCommand,
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_ValueLength,
        RedisModule_HashGet,
        RedisModule_HashSet,
        RedisModule_DeleteKey,
        RedisModule_SetAbsExpire,
        RedisModule_GetExpire,
        RedisModule_ScanCursorCreate,
        RedisModule_ScanCursorDestroy,
        RedisModule_ScanKey,
        RedisModule_Replicate,
        RedisModule_StringPtrLen,
        RedisModule_CreateString,
        RedisModule_CreateStringFromLongLong,
        RedisModule_FreeString,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithNull,
        RedisModule_ReplyWithError,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_ReplyWithMap,
        RedisModule_ReplyWithString,
        RedisModule_RegisterNumericConfig,
        RedisModule_LoadConfigs,
        RedisModule_RegisterInfoFunc,
        RedisModule_InfoAddSection,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_GetContextFlags,
        RedisModule_Milliseconds,
        RedisModule_PublishMessage,
        RedisModule_NotifyKeyspaceEvent,
        RedisModule_Log,
        RedisModule_BlockClientOnKeys,
        RedisModule_UnblockClient,
        RedisModule_GetBlockedClientPrivateData,
        RedisModule_BlockedClientDisconnected,
        RedisModule_SetDisconnectCallback,
        RedisModule_CreateTimer,
        RedisModule_StopTimer,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
        RedisModule_GetSelectedDb,
        RedisModule_SelectDb,
        RedisModule_AvoidReplicaTraffic,
        RedisModule_GetServerInfo,
        RedisModule_ServerInfoGetFieldSigned,
        RedisModule_FreeServerInfo,
        RedisModule_SignalModifiedKey,
        RedisModule_SetModuleOptions,
        RedisModule_GetClientId,
        RedisModule_StringDMA,
        RedisModule_StringTruncate,
        RedisModule_SetExpire,
        RedisModule_Call,
        RedisModule_FreeCallReply,
        RedisModule_ServerInfoGetFieldC,
        RedisModule_InfoAddFieldCString,
        RedisModule_ReplyWithArray,
    );
    Ok(())
}

/// A Redis module context for the duration of one call from Redis.
#[derive(Clone, Copy)]
pub struct Ctx(pub *mut RedisModuleCtx);

impl Ctx {
    pub fn flags(self) -> u32 {
        unsafe { rm!(RedisModule_GetContextFlags(self.0)) as u32 }
    }

    /// The server clock in ms since the epoch (what Redis expires keys by).
    pub fn now(self) -> i64 {
        unsafe { rm!(RedisModule_Milliseconds()) }
    }

    pub fn log(self, level: Level, message: &str) {
        log_with(self.0, level, message);
    }
}

#[derive(Clone, Copy)]
pub enum Level {
    Warning,
}

/// Logs to the server log. `ctx` may be null (no command running).
pub fn log_with(ctx: *mut RedisModuleCtx, level: Level, message: &str) {
    let level: &CStr = match level {
        Level::Warning => c"warning",
    };
    // Client bytes may carry NULs; the message goes through "%s", never as a format.
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            log(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}

/// A Redis string we do not own: a command argument, valid for the call.
/// `repr(transparent)` so the argv array can be viewed as `&[RStr]` for free.
#[repr(transparent)]
pub struct RStr(*mut RedisModuleString);

impl RStr {
    /// Views Redis's argv as arguments.
    ///
    /// # Safety
    /// `argv` must point to `argc` valid strings that outlive the slice.
    pub unsafe fn from_argv<'a>(argv: *mut *mut RedisModuleString, argc: c_int) -> &'a [RStr] {
        match (NonNull::new(argv), usize::try_from(argc)) {
            (Some(argv), Ok(n)) => unsafe {
                std::slice::from_raw_parts(argv.as_ptr() as *const RStr, n)
            },
            _ => &[],
        }
    }

    /// # Safety
    /// `s` must be a valid Redis string that outlives the reference.
    pub unsafe fn from_ptr(s: &*mut RedisModuleString) -> &RStr {
        unsafe { &*(s as *const *mut RedisModuleString as *const RStr) }
    }

    pub fn ptr(&self) -> *mut RedisModuleString {
        self.0
    }
}

impl AsRef<[u8]> for RStr {
    fn as_ref(&self) -> &[u8] {
        bytes_of(self.0)
    }
}

fn bytes_of<'a>(s: *const RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    unsafe {
        let p = rm!(RedisModule_StringPtrLen(s, &mut len));
        if p.is_null() || len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// A Redis string we own (created by us or returned to us): freed on drop.
/// Made and freed without a context: the module never uses automatic
/// memory, and a string may outlive the call that made it (a waiter's
/// owner, a pending grant), so it must not remember that call's context.
pub struct OwnedStr {
    s: NonNull<RedisModuleString>,
}

impl OwnedStr {
    /// Copies `bytes` into a new Redis string (binary-safe).
    pub fn new(bytes: &[u8]) -> OwnedStr {
        let s = unsafe {
            rm!(RedisModule_CreateString(
                ptr::null_mut(),
                bytes.as_ptr() as *const c_char,
                bytes.len()
            ))
        };
        match NonNull::new(s) {
            Some(s) => OwnedStr { s },
            None => panic!("RedisModule_CreateString returned NULL"),
        }
    }

    /// A new Redis string holding `n` in decimal.
    pub fn from_i64(n: i64) -> OwnedStr {
        let s = unsafe { rm!(RedisModule_CreateStringFromLongLong(ptr::null_mut(), n)) };
        match NonNull::new(s) {
            Some(s) => OwnedStr { s },
            None => panic!("RedisModule_CreateStringFromLongLong returned NULL"),
        }
    }

    /// Takes ownership of a string Redis handed us (HashGet and friends).
    pub fn adopt(s: *mut RedisModuleString) -> Option<OwnedStr> {
        NonNull::new(s).map(|s| OwnedStr { s })
    }

    pub fn ptr(&self) -> *mut RedisModuleString {
        self.s.as_ptr()
    }

    /// Keeps the string for the life of the process (static replies).
    pub fn leak(self) -> *mut RedisModuleString {
        let p = self.s.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl std::ops::Deref for OwnedStr {
    type Target = RStr;
    fn deref(&self) -> &RStr {
        // SAFETY: `s` is a field of self, RStr is repr(transparent) over it.
        unsafe { &*(&self.s as *const NonNull<RedisModuleString> as *const RStr) }
    }
}

impl AsRef<[u8]> for OwnedStr {
    fn as_ref(&self) -> &[u8] {
        bytes_of(self.s.as_ptr())
    }
}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        unsafe { rm!(RedisModule_FreeString(ptr::null_mut(), self.s.as_ptr())) }
    }
}

/// A Redis string created once at load and kept forever (the `0` unlock
/// message, the `1` hold count), so the hot path allocates nothing for them.
pub struct StaticStr(std::sync::atomic::AtomicPtr<RedisModuleString>);

impl StaticStr {
    pub const fn empty() -> StaticStr {
        StaticStr(std::sync::atomic::AtomicPtr::new(ptr::null_mut()))
    }

    pub fn init(&self, bytes: &[u8]) {
        let s = OwnedStr::new(bytes).leak();
        self.0.store(s, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> *mut RedisModuleString {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Gives the string back (module unload).
    pub fn free(&self) {
        let s = self
            .0
            .swap(ptr::null_mut(), std::sync::atomic::Ordering::Relaxed);
        if !s.is_null() {
            unsafe { rm!(RedisModule_FreeString(ptr::null_mut(), s)) }
        }
    }
}

impl Ctx {
    /// The database the context works on.
    pub fn db(self) -> i32 {
        unsafe { rm!(RedisModule_GetSelectedDb(self.0)) }
    }

    pub fn select_db(self, db: i32) -> bool {
        unsafe { rm!(RedisModule_SelectDb(self.0, db)) == raw::REDISMODULE_OK as c_int }
    }
}
