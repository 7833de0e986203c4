//! Subscriptions: keyspace events and server events, decoded into safe
//! values and handed, behind the panic firewall, to the handlers of the
//! layer that subscribes (`Hooks`).

use std::ffi::{CStr, c_char, c_int, c_void};

use super::ffi::{Ctx, RStr, raw};
use super::firewall;

/// A server event, as the module cares about it.
pub enum ServerEvent<'a> {
    /// FLUSHALL (`None`) or FLUSHDB of one database, done.
    Flushed(Option<i32>),
    SwapDb(i32, i32),
    /// A replica came online (finished its sync) or went offline.
    Replica {
        online: bool,
    },
    BecameReplica,
    BecamePrimary,
    /// A client connection closed (real connections only).
    ClientClosed(u64),
    /// Configs changed, by name.
    ConfigChanged(Vec<&'a CStr>),
    /// The event loop is about to sleep.
    BeforeSleep,
}

/// What the subscribing layer does with events.
pub trait Hooks: 'static {
    fn keyspace(ctx: Ctx, event: &CStr, key: &RStr);
    fn server(ctx: Ctx, event: ServerEvent<'_>);
}

/// Subscribes to keyspace events of these REDISMODULE_NOTIFY_* classes.
pub fn subscribe_keyspace<H: Hooks>(ctx: Ctx, classes: i32) -> bool {
    // SAFETY: a live context and a callback of the API's signature.
    let done = unsafe {
        rm!(RedisModule_SubscribeToKeyspaceEvents(
            ctx.0,
            classes,
            Some(keyspace::<H>)
        ))
    };
    done == raw::REDISMODULE_OK as c_int
}

/// Server events the module can subscribe to.
#[derive(Clone, Copy)]
pub enum EventKind {
    FlushDb,
    SwapDb,
    ReplicaChange,
    RoleChanged,
    ClientChange,
    Config,
    EventLoop,
}

pub fn subscribe_server<H: Hooks>(ctx: Ctx, kind: EventKind) -> bool {
    let id = match kind {
        EventKind::FlushDb => raw::REDISMODULE_EVENT_FLUSHDB,
        EventKind::SwapDb => raw::REDISMODULE_EVENT_SWAPDB,
        EventKind::ReplicaChange => raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        EventKind::RoleChanged => raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        EventKind::ClientChange => raw::REDISMODULE_EVENT_CLIENT_CHANGE,
        EventKind::Config => raw::REDISMODULE_EVENT_CONFIG,
        EventKind::EventLoop => raw::REDISMODULE_EVENT_EVENTLOOP,
    };
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: a live context, an event id the server knows (all exist on
    // 7.0), a callback of the API's signature.
    let done = unsafe {
        rm!(RedisModule_SubscribeToServerEvent(
            ctx.0,
            event,
            Some(server::<H>)
        ))
    };
    done == raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn keyspace<H: Hooks>(
    ctx: *mut raw::RedisModuleCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    firewall::callback((), || {
        if key.is_null() || event.is_null() {
            return;
        }
        // SAFETY: Redis passes a NUL-terminated event name and a valid key
        // for the callback's duration.
        let (event, key) = unsafe { (CStr::from_ptr(event), RStr::from_ptr(&key)) };
        H::keyspace(Ctx(ctx), event, key);
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn server<H: Hooks>(
    ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    firewall::callback((), || {
        // SAFETY: for each event id, Redis passes the documented struct.
        let decoded = unsafe { decode(event.id, subevent, data) };
        if let Some(e) = decoded {
            H::server(Ctx(ctx), e);
        }
    })
}

/// # Safety
/// `data` must be what Redis passes with event `id`.
unsafe fn decode<'a>(id: u64, subevent: u64, data: *mut c_void) -> Option<ServerEvent<'a>> {
    Some(match id {
        raw::REDISMODULE_EVENT_FLUSHDB if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
            // SAFETY: a RedisModuleFlushInfo for this event.
            let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
            ServerEvent::Flushed((info.dbnum >= 0).then_some(info.dbnum))
        }
        raw::REDISMODULE_EVENT_SWAPDB => {
            // SAFETY: a RedisModuleSwapDbInfo for this event.
            let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
            ServerEvent::SwapDb(info.dbnum_first, info.dbnum_second)
        }
        raw::REDISMODULE_EVENT_REPLICA_CHANGE => ServerEvent::Replica {
            online: subevent == raw::REDISMODULE_SUBEVENT_REPLICA_CHANGE_ONLINE,
        },
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED => {
            if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
                ServerEvent::BecameReplica
            } else {
                ServerEvent::BecamePrimary
            }
        }
        raw::REDISMODULE_EVENT_CLIENT_CHANGE
            if subevent == raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED =>
        {
            // SAFETY: a RedisModuleClientInfo for this event.
            let info = unsafe { &*(data as *const raw::RedisModuleClientInfo) };
            ServerEvent::ClientClosed(info.id)
        }
        raw::REDISMODULE_EVENT_CONFIG if subevent == raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE => {
            // SAFETY: a RedisModuleConfigChange for this event, with
            // `num_changes` C strings.
            let change = unsafe { &*(data as *const raw::RedisModuleConfigChange) };
            let names = (0..change.num_changes as usize)
                .filter_map(|i| {
                    // SAFETY: i < num_changes.
                    let name = unsafe { *change.config_names.add(i) };
                    // SAFETY: a NUL-terminated name, alive for the callback.
                    (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) })
                })
                .collect();
            ServerEvent::ConfigChanged(names)
        }
        raw::REDISMODULE_EVENT_EVENTLOOP
            if subevent == raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP =>
        {
            ServerEvent::BeforeSleep
        }
        _ => return None,
    })
}

/// The command about to run, as a command filter sees it.
pub struct FilterArgs {
    fctx: *mut raw::RedisModuleCommandFilterCtx,
    count: usize,
    /// The first `FILTER_ARGS` arguments, fetched when first asked for
    /// (most commands are turned away by their count alone).
    args: [std::cell::Cell<*mut raw::RedisModuleString>; FILTER_ARGS],
}

/// How many leading arguments a filter is shown.
const FILTER_ARGS: usize = 3;

impl FilterArgs {
    /// How many arguments the command has, its name included.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Argument `i` (0: the command's name), if it is among the first few.
    pub fn get(&self, i: usize) -> Option<&RStr> {
        let cell = self.args.get(i).filter(|_| i < self.count)?;
        if cell.get().is_null() {
            // SAFETY: the filter context of the running callback (`self`
            // does not outlive it), a position below its argument count.
            cell.set(unsafe { rm!(RedisModule_CommandFilterArgGet(self.fctx, i as c_int)) });
        }
        let arg = cell.as_ptr() as *const *mut raw::RedisModuleString;
        // SAFETY: a string Redis handed the filter for this call, stored in
        // `self`, which does not outlive the callback; a Cell<*mut T> has
        // the layout of *mut T.
        unsafe { (!(*arg).is_null()).then(|| RStr::from_ptr(&*arg)) }
    }
}

/// What a command filter does with the commands it sees (every command:
/// keep it to a few comparisons, no allocation).
pub trait Filter: 'static {
    fn filter(args: &FilterArgs);
}

/// Registers a command filter: `F::filter` sees every command before it
/// runs (the module's own calls excepted). Redis drops it at unload.
pub fn register_filter<F: Filter>(ctx: Ctx) -> bool {
    // SAFETY: a live context and a callback of the API's signature.
    let filter = unsafe {
        rm!(RedisModule_RegisterCommandFilter(
            ctx.0,
            Some(filter::<F>),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int
        ))
    };
    !filter.is_null()
}

unsafe extern "C" fn filter<F: Filter>(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    firewall::callback((), || {
        // SAFETY: the filter context Redis passes, valid for the callback.
        let count = unsafe { rm!(RedisModule_CommandFilterArgsCount(fctx)) };
        F::filter(&FilterArgs {
            fctx,
            count: usize::try_from(count).unwrap_or(0),
            args: Default::default(),
        });
    })
}

/// `INFO <section>`, freed on drop.
pub struct ServerInfo {
    ctx: Ctx,
    info: std::ptr::NonNull<raw::RedisModuleServerInfoData>,
}

impl ServerInfo {
    pub fn section(ctx: Ctx, section: &CStr) -> Option<ServerInfo> {
        // SAFETY: a live context and a NUL-terminated section name.
        let info = unsafe { rm!(RedisModule_GetServerInfo(ctx.0, section.as_ptr())) };
        std::ptr::NonNull::new(info).map(|info| ServerInfo { ctx, info })
    }

    pub fn text(&self, field: &CStr) -> Option<String> {
        // SAFETY: a live snapshot and a NUL-terminated field name.
        let p = unsafe {
            rm!(RedisModule_ServerInfoGetFieldC(
                self.info.as_ptr(),
                field.as_ptr()
            ))
        };
        if p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the snapshot; copied out.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    pub fn number(&self, field: &CStr) -> Option<i64> {
        let mut err: c_int = 0;
        // SAFETY: as `text`.
        let n = unsafe {
            rm!(RedisModule_ServerInfoGetFieldSigned(
                self.info.as_ptr(),
                field.as_ptr(),
                &mut err
            ))
        };
        (err == 0).then_some(n)
    }
}

impl Drop for ServerInfo {
    fn drop(&mut self) {
        // SAFETY: the snapshot from GetServerInfo, freed once.
        unsafe { rm!(RedisModule_FreeServerInfo(self.ctx.0, self.info.as_ptr())) };
    }
}

/// Module options (`REDISMODULE_OPTION_*`, and Valkey's bits).
pub fn set_module_options(ctx: Ctx, options: c_int) {
    // SAFETY: a live load context.
    unsafe { rm!(RedisModule_SetModuleOptions(ctx.0, options)) };
}
