//! The thin layer over the raw Redis module API that the rest of the glue
//! uses: a context handle, borrowed and owned Redis strings, logging, and
//! the calls a context makes (replication, keyspace notifications,
//! publishing, calling commands, server info).
//!
//! Every raw call goes through `rm!`, which never unwraps: the APIs it names
//! are the Redis 7.0 baseline, checked once at load (`require_api`); newer
//! ones are reached through their `Option` at the call site.
//!
//! The runtime layer is the only place with `unsafe` (every other module of
//! the glue denies it): each block says why it is sound.

use std::ffi::{CStr, CString, c_char, c_int, c_longlong};
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
            // SAFETY: reading a function-pointer static the API init wrote
            // before any module code runs; nothing writes it afterwards.
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
        RedisModule_GetAbsExpire,
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
        RedisModule_ReplyWithArray,
        RedisModule_RegisterNumericConfig,
        RedisModule_LoadConfigs,
        RedisModule_RegisterInfoFunc,
        RedisModule_InfoAddSection,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_InfoAddFieldCString,
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
        RedisModule_ServerInfoGetFieldC,
        RedisModule_FreeServerInfo,
        RedisModule_SignalModifiedKey,
        RedisModule_SetModuleOptions,
        RedisModule_GetClientId,
        RedisModule_GetClientInfoById,
        RedisModule_StringDMA,
        RedisModule_StringTruncate,
        RedisModule_SetExpire,
        RedisModule_Call,
        RedisModule_CallReplyType,
        RedisModule_CallReplyStringPtr,
        RedisModule_CallReplyLength,
        RedisModule_LatencyAddSample,
        RedisModule_RegisterCommandFilter,
        RedisModule_CommandFilterArgsCount,
        RedisModule_CommandFilterArgGet,
        RedisModule_MonotonicMicroseconds,
        RedisModule_CallReplyArrayElement,
        RedisModule_FreeCallReply,
        RedisModule_GetCurrentUserName,
        RedisModule_GetModuleUserFromUserName,
        RedisModule_FreeModuleUser,
        RedisModule_ACLCheckKeyPermissions,
        RedisModule_GetDetachedThreadSafeContext,
        RedisModule_FreeThreadSafeContext,
        RedisModule_ZsetAdd,
        RedisModule_ZsetRem,
        RedisModule_ZsetScore,
        RedisModule_ZsetFirstInScoreRange,
        RedisModule_ZsetRangeCurrentElement,
        RedisModule_ZsetRangeNext,
        RedisModule_ZsetRangeEndReached,
        RedisModule_ZsetRangeStop,
        RedisModule_RegisterCommandFilter,
        RedisModule_CommandFilterArgsCount,
        RedisModule_CommandFilterArgGet,
    );
    Ok(())
}

/// A Redis module context for the duration of one call from Redis.
#[derive(Clone, Copy)]
pub struct Ctx(pub *mut RedisModuleCtx);

/// The module's own context, detached from any call, made at load and freed
/// at unload: what timers are created with when no call is running (a
/// dropped blocked-client handle schedules its answer from anywhere).
static MODULE_CTX: std::sync::atomic::AtomicPtr<RedisModuleCtx> =
    std::sync::atomic::AtomicPtr::new(ptr::null_mut());

impl Ctx {
    /// Makes the module's detached context (at load).
    pub fn init_module(load: Ctx) {
        // SAFETY: the load context; the detached context is ours to free.
        let ctx = unsafe { rm!(RedisModule_GetDetachedThreadSafeContext(load.0)) };
        MODULE_CTX.store(ctx, std::sync::atomic::Ordering::Relaxed);
    }

    /// The module's detached context (for timers).
    pub fn module() -> Ctx {
        Ctx(MODULE_CTX.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Frees the module's detached context (at unload).
    pub fn free_module() {
        let ctx = MODULE_CTX.swap(ptr::null_mut(), std::sync::atomic::Ordering::Relaxed);
        if !ctx.is_null() {
            // SAFETY: the context from `init_module`, freed once.
            unsafe { rm!(RedisModule_FreeThreadSafeContext(ctx)) };
        }
    }
}

impl Ctx {
    pub fn flags(self) -> u32 {
        // SAFETY: `self.0` is the context Redis passed to the running callback.
        unsafe { rm!(RedisModule_GetContextFlags(self.0)) as u32 }
    }

    /// The server clock in ms since the epoch (what Redis expires keys by).
    pub fn now(self) -> i64 {
        // SAFETY: no arguments; callable from any module code on the main thread.
        unsafe { rm!(RedisModule_Milliseconds()) }
    }

    pub fn log(self, level: Level, message: &str) {
        log_with(self.0, level, message);
    }

    /// The database the context works on.
    pub fn db(self) -> i32 {
        // SAFETY: a live context.
        unsafe { rm!(RedisModule_GetSelectedDb(self.0)) }
    }

    pub fn select_db(self, db: i32) -> bool {
        // SAFETY: a live context; an out-of-range db is refused, not UB.
        unsafe { rm!(RedisModule_SelectDb(self.0, db)) == raw::REDISMODULE_OK as c_int }
    }

    /// The calling client's id (`CLIENT ID`); 0 when there is none.
    pub fn client_id(self) -> u64 {
        // SAFETY: a live context.
        unsafe { rm!(RedisModule_GetClientId(self.0)) }
    }

    /// Whether a client with this id is connected.
    pub fn client_exists(self, id: u64) -> bool {
        // SAFETY: a NULL info pointer asks only whether the client exists.
        unsafe {
            rm!(RedisModule_GetClientInfoById(ptr::null_mut(), id)) == raw::REDISMODULE_OK as c_int
        }
    }

    /// Clients are paused for writes (CLIENT PAUSE WRITE, failover): no
    /// writes or propagation from timers or events now, or the server dies.
    pub fn writes_paused(self) -> bool {
        // SAFETY: no arguments.
        unsafe { rm!(RedisModule_AvoidReplicaTraffic()) != 0 }
    }

    /// Fires a keyspace event (`class` is a REDISMODULE_NOTIFY_* bit).
    pub fn notify(self, class: i32, event: &CStr, key: &RStr) {
        // SAFETY: `event` is NUL-terminated and `key` a valid Redis string,
        // both alive for the call; Redis copies what it keeps.
        unsafe {
            rm!(RedisModule_NotifyKeyspaceEvent(
                self.0,
                class,
                event.as_ptr(),
                key.ptr()
            ));
        }
    }

    /// WATCH and client-side caching hear that `key` changed.
    pub fn signal_modified(self, key: &RStr) {
        // SAFETY: a live context and a valid key name.
        unsafe { rm!(RedisModule_SignalModifiedKey(self.0, key.ptr())) };
    }

    /// Publishes `message` on `channel`: sharded (SPUBLISH) when `shard` and
    /// the server has it, else to every subscriber of this node (and, in a
    /// cluster, over the bus).
    pub fn publish(self, channel: &RStr, message: &RStr, shard: bool) {
        // SAFETY: valid strings for the duration of the call; reading the
        // optional API pointer is a plain load.
        unsafe {
            match raw::RedisModule_PublishMessageShard {
                Some(shard_publish) if shard => {
                    shard_publish(self.0, channel.ptr(), message.ptr());
                }
                _ => {
                    rm!(RedisModule_PublishMessage(
                        self.0,
                        channel.ptr(),
                        message.ptr()
                    ));
                }
            }
        }
    }

    /// Propagates one command to replicas and the AOF (wrapped in MULTI/EXEC
    /// with the rest of this call's effects). `args` go out as they are.
    pub fn replicate(self, command: &CStr, args: &[Arg<'_>]) {
        self.replicate_with(command, args, false);
    }

    /// Propagates one command to replicas only, never to the AOF (PUBLISH,
    /// REPLCONF GETACK).
    pub fn replicate_to_replicas(self, command: &CStr, args: &[Arg<'_>]) {
        self.replicate_with(command, args, true);
    }

    fn replicate_with(self, command: &CStr, args: &[Arg<'_>], replicas_only: bool) {
        // The hot shapes go out without creating strings; anything else as a
        // vector of Redis strings (`v`).
        // SAFETY: (all arms) every pointer is to a string or buffer alive
        // for the call, each format letter matches its argument's C type
        // (`s` RedisModuleString*, `b` char* + size_t, `l` long long, `c` a
        // NUL-terminated char*, `v` an array of RedisModuleString* and its
        // length), and Redis copies what it propagates.
        unsafe {
            match (args, replicas_only) {
                ([Arg::Str(k)], false) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"s".as_ptr(),
                        k.ptr()
                    ));
                }
                ([Arg::Str(k), Arg::Int(n)], false) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"sl".as_ptr(),
                        k.ptr(),
                        *n as c_longlong
                    ));
                }
                ([Arg::Str(k), Arg::Str(f), Arg::Int(n)], false) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"ssl".as_ptr(),
                        k.ptr(),
                        f.ptr(),
                        *n as c_longlong
                    ));
                }
                ([Arg::Str(k), Arg::Bytes(b), Arg::Word(w)], false) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"sbc".as_ptr(),
                        k.ptr(),
                        b.as_ptr() as *const c_char,
                        b.len(),
                        w.as_ptr()
                    ));
                }
                ([Arg::Str(c), Arg::Str(m)], true) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"Ass".as_ptr(),
                        c.ptr(),
                        m.ptr()
                    ));
                }
                ([Arg::Word(a), Arg::Word(b)], true) => {
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        c"ccA".as_ptr(),
                        a.as_ptr(),
                        b.as_ptr()
                    ));
                }
                _ => {
                    let owned: Vec<OwnedStr> = args.iter().map(Arg::to_owned_str).collect();
                    let mut ptrs: Vec<*mut RedisModuleString> =
                        owned.iter().map(|s| s.ptr()).collect();
                    let format = if replicas_only { c"vA" } else { c"v" };
                    rm!(RedisModule_Replicate(
                        self.0,
                        command.as_ptr(),
                        format.as_ptr(),
                        ptrs.as_mut_ptr(),
                        ptrs.len()
                    ));
                }
            }
        }
    }

    /// Runs a read-only command through `RM_Call` and returns its reply as
    /// bytes: `Ok(None)` for a nil or non-string reply, `Err(())` when the
    /// server refused the call (in a cluster: the key is not served here).
    pub fn call_for_bytes(self, command: &CStr, args: &[&RStr]) -> Result<Option<Vec<u8>>, ()> {
        let reply = match args {
            // SAFETY: format `s` with one valid string.
            [a] => unsafe {
                rm!(RedisModule_Call(
                    self.0,
                    command.as_ptr(),
                    c"s".as_ptr(),
                    a.ptr()
                ))
            },
            // SAFETY: format `c` with one NUL-terminated string.
            [] => unsafe { rm!(RedisModule_Call(self.0, command.as_ptr(), c"".as_ptr())) },
            _ => return Err(()),
        };
        let reply = CallReply::adopt(reply).ok_or(())?;
        Ok(reply.bytes())
    }

    /// A config's value (`CONFIG GET name`), as text.
    pub fn config_get(self, name: &CStr) -> Option<String> {
        // SAFETY: format `cc` with two NUL-terminated strings.
        let reply = unsafe {
            rm!(RedisModule_Call(
                self.0,
                c"CONFIG".as_ptr(),
                c"cc".as_ptr(),
                c"GET".as_ptr(),
                name.as_ptr()
            ))
        };
        let reply = CallReply::adopt(reply)?;
        // A two-element array: the name, the value.
        // SAFETY: a live reply; element 1 of a 2-element array.
        let value = unsafe {
            if rm!(RedisModule_CallReplyLength(reply.0.as_ptr())) < 2 {
                return None;
            }
            rm!(RedisModule_CallReplyArrayElement(reply.0.as_ptr(), 1))
        };
        if value.is_null() {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: an element owned by the reply, read before it is freed.
        let bytes = unsafe {
            let p = rm!(RedisModule_CallReplyStringPtr(value, &mut len));
            if p.is_null() {
                return Some(String::new());
            }
            std::slice::from_raw_parts(p as *const u8, len).to_vec()
        };
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `RM_Call` of a command with constant word arguments (`CLUSTER NODES`).
    pub fn call_words(self, command: &CStr, word: &CStr) -> Option<Vec<u8>> {
        // SAFETY: format `c` with one NUL-terminated string.
        let reply = unsafe {
            rm!(RedisModule_Call(
                self.0,
                command.as_ptr(),
                c"c".as_ptr(),
                word.as_ptr()
            ))
        };
        CallReply::adopt(reply)?.bytes()
    }

    /// One step of `SCAN cursor MATCH pattern TYPE kind COUNT count` in the
    /// selected database: the next cursor (`0`: done) and the names found.
    pub fn scan(
        self,
        cursor: &[u8],
        pattern: &CStr,
        kind: &CStr,
        count: i64,
    ) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
        // SAFETY: format `b` (a buffer and its length), five NUL-terminated
        // strings (`c`) and a long long (`l`), matching the arguments.
        let reply = unsafe {
            rm!(RedisModule_Call(
                self.0,
                c"SCAN".as_ptr(),
                c"bcccccl".as_ptr(),
                cursor.as_ptr() as *const c_char,
                cursor.len(),
                c"MATCH".as_ptr(),
                pattern.as_ptr(),
                c"TYPE".as_ptr(),
                kind.as_ptr(),
                c"COUNT".as_ptr(),
                count as c_longlong
            ))
        };
        let reply = CallReply::adopt(reply)?;
        let next = reply.element(0)?.bytes()?;
        let names = reply.element(1)?;
        let names = (0..names.len())
            .filter_map(|i| names.element(i).and_then(|n| n.bytes()))
            .collect();
        Some((next, names))
    }
}

/// An element of a command-call reply (owned by its parent: not freed).
struct CallReplyElement(NonNull<raw::RedisModuleCallReply>);

/// What both a reply and its elements are read as.
trait ReplyView {
    fn raw(&self) -> *mut raw::RedisModuleCallReply;

    /// The reply's bytes if it is a string (bulk, simple or verbatim).
    fn bytes(&self) -> Option<Vec<u8>> {
        // SAFETY: a live reply (or element of one).
        let kind = unsafe { rm!(RedisModule_CallReplyType(self.raw())) };
        let string_like = kind == raw::REDISMODULE_REPLY_STRING as c_int
            || kind == raw::REDISMODULE_REPLY_VERBATIM_STRING as c_int;
        if !string_like {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: the pointer stays valid while the reply lives; we copy out.
        unsafe {
            let p = rm!(RedisModule_CallReplyStringPtr(self.raw(), &mut len));
            if p.is_null() {
                return Some(Vec::new());
            }
            Some(std::slice::from_raw_parts(p as *const u8, len).to_vec())
        }
    }

    /// Elements of an array reply (0 for anything else).
    fn len(&self) -> usize {
        // SAFETY: a live reply.
        let kind = unsafe { rm!(RedisModule_CallReplyType(self.raw())) };
        if kind != raw::REDISMODULE_REPLY_ARRAY as c_int {
            return 0;
        }
        // SAFETY: a live array reply.
        unsafe { rm!(RedisModule_CallReplyLength(self.raw())) }
    }

    /// Element `i` of an array reply.
    fn element(&self, i: usize) -> Option<CallReplyElement> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: a live array reply and an index below its length; the
        // element lives as long as the reply.
        let e = unsafe { rm!(RedisModule_CallReplyArrayElement(self.raw(), i)) };
        NonNull::new(e).map(CallReplyElement)
    }
}

impl ReplyView for CallReply {
    fn raw(&self) -> *mut raw::RedisModuleCallReply {
        self.0.as_ptr()
    }
}

impl ReplyView for CallReplyElement {
    fn raw(&self) -> *mut raw::RedisModuleCallReply {
        self.0.as_ptr()
    }
}

/// A command-call reply, freed on drop.
struct CallReply(NonNull<raw::RedisModuleCallReply>);

impl CallReply {
    fn adopt(reply: *mut raw::RedisModuleCallReply) -> Option<CallReply> {
        NonNull::new(reply).map(CallReply)
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        // SAFETY: the reply was returned to us by RM_Call and is freed once.
        unsafe { rm!(RedisModule_FreeCallReply(self.0.as_ptr())) };
    }
}

/// One argument of a propagated command.
pub enum Arg<'a> {
    Str(&'a RStr),
    Bytes(&'a [u8]),
    Int(i64),
    /// A constant word (a subcommand or flag: `KEEPTTL`, `GETACK`).
    Word(&'a CStr),
}

impl Arg<'_> {
    fn to_owned_str(&self) -> OwnedStr {
        match self {
            Arg::Str(s) => OwnedStr::new(s.as_ref()),
            Arg::Bytes(b) => OwnedStr::new(b),
            Arg::Int(n) => OwnedStr::from_i64(*n),
            Arg::Word(w) => OwnedStr::new(w.to_bytes()),
        }
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
    // SAFETY: a null or live context; "%s" consumes exactly the one
    // NUL-terminated argument given; reading the optional API pointer is a
    // plain load (logging must work even before `require_api` ran).
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            log(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}

/// Adds a LATENCY event sample (ms). Callers check the threshold: the
/// server records every sample when the monitor is off (threshold 0).
pub fn latency_sample(event: &CStr, ms: i64) {
    // SAFETY: a NUL-terminated event name; Redis copies it.
    unsafe { rm!(RedisModule_LatencyAddSample(event.as_ptr(), ms)) };
}

/// The server's monotonic clock in µs (durations: waits, holds).
pub fn monotonic_us() -> u64 {
    // SAFETY: no arguments.
    unsafe { rm!(RedisModule_MonotonicMicroseconds()) }
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
            // SAFETY: the caller's promise; RStr is repr(transparent).
            (Some(argv), Ok(n)) => unsafe {
                std::slice::from_raw_parts(argv.as_ptr() as *const RStr, n)
            },
            _ => &[],
        }
    }

    /// # Safety
    /// `s` must be a valid Redis string that outlives the reference.
    pub unsafe fn from_ptr(s: &*mut RedisModuleString) -> &RStr {
        // SAFETY: RStr is repr(transparent) over the pointer.
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
    // SAFETY: `s` is a valid string (an RStr's or OwnedStr's), and the bytes
    // stay valid while it does, which the borrow of its owner guarantees.
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
        // SAFETY: a buffer and its length; a NULL context makes an unmanaged string.
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
        // SAFETY: as in `new`.
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
        // SAFETY: we own the string and free it once, without a context as
        // it was made.
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

    /// The string, as an argument to pass on.
    pub fn get(&self) -> &RStr {
        let p = self.0.as_ptr() as *const *mut RedisModuleString;
        // SAFETY: the atomic holds a pointer set by `init` (a leaked string
        // that lives until `free` at unload, after which nothing calls us);
        // AtomicPtr has the layout of the pointer, RStr is repr(transparent).
        unsafe { &*(p as *const RStr) }
    }

    /// Gives the string back (module unload).
    pub fn free(&self) {
        let s = self
            .0
            .swap(ptr::null_mut(), std::sync::atomic::Ordering::Relaxed);
        if !s.is_null() {
            // SAFETY: the leaked string from `init`, freed once.
            unsafe { rm!(RedisModule_FreeString(ptr::null_mut(), s)) }
        }
    }
}

/// The user a command runs as, for checking the keys the module derives
/// itself (the token counter): Redis checks only declared keys.
pub struct CallerUser(NonNull<raw::RedisModuleUser>);

impl CallerUser {
    /// The calling client's user; `None` outside a client command.
    pub fn of(ctx: Ctx) -> Option<CallerUser> {
        // SAFETY: a live context; the name string is ours to free.
        let name = OwnedStr::adopt(unsafe { rm!(RedisModule_GetCurrentUserName(ctx.0)) })?;
        // SAFETY: a valid name; the user handle is ours to free.
        let user = unsafe { rm!(RedisModule_GetModuleUserFromUserName(name.ptr())) };
        NonNull::new(user).map(CallerUser)
    }

    /// Whether the user may access `key` as `flags` (REDISMODULE_CMD_KEY_*).
    pub fn may_access(&self, key: &RStr, flags: u64) -> bool {
        // SAFETY: a live user handle and a valid key name.
        unsafe {
            rm!(RedisModule_ACLCheckKeyPermissions(
                self.0.as_ptr(),
                key.ptr(),
                flags as c_int
            )) == raw::REDISMODULE_OK as c_int
        }
    }
}

impl Drop for CallerUser {
    fn drop(&mut self) {
        // SAFETY: the handle from GetModuleUserFromUserName, freed once.
        unsafe { rm!(RedisModule_FreeModuleUser(self.0.as_ptr())) };
    }
}
