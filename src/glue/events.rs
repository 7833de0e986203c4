//! What other clients and the server do to queued keys: keyspace events
//! (DEL, UNLINK, expiry, eviction, a Redisson Lua release, renames,
//! overwrites) and server events (FLUSHALL / FLUSHDB / SWAPDB, which fire
//! no per-key events). Each only marks keys for `handoff` to look at again.
//! Also: replicas coming and going (`notify` publishes to them).
//!
//! The keyspace subscription is made at the first BLOCK waiter, not at
//! load: Redis builds a module context for every keyspace event in the
//! server while a module is subscribed (~700 instructions each, measured),
//! and a server that never queues waiters should not pay for it.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};

use super::ffi::{Ctx, RStr, raw};
use super::{firewall, handoff, notify, waiters};
use crate::core::{LockError, LockResult};

thread_local! {
    static OWN_EVENT: Cell<bool> = const { Cell::new(false) };
    static WATCHING_KEYSPACE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (which fires a keyspace event for one of our own writes) so that
/// our subscriber ignores it: the command that wrote already served the queue.
pub fn own_event<R>(f: impl FnOnce() -> R) -> R {
    OWN_EVENT.with(|own| own.set(true));
    let r = f();
    OWN_EVENT.with(|own| own.set(false));
    r
}

/// Server events, at load.
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    let ok = raw::REDISMODULE_OK as c_int;
    for id in [
        raw::REDISMODULE_EVENT_FLUSHDB,
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
    ] {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        if unsafe {
            rm!(RedisModule_SubscribeToServerEvent(
                ctx.0,
                event,
                Some(server_event)
            ))
        } != ok
        {
            return Err(format!("cannot subscribe to server event {id}"));
        }
    }
    Ok(())
}

/// Redis removed our keyspace subscription (module unload).
pub fn forget_keyspace_subscription() {
    WATCHING_KEYSPACE.with(|w| w.set(false));
}

/// Keyspace events, from the first waiter on (a subscription cannot be undone).
pub fn watch_keyspace(ctx: Ctx) -> LockResult<()> {
    if WATCHING_KEYSPACE.with(Cell::get) {
        return Ok(());
    }
    let classes = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_STRING
        | raw::REDISMODULE_NOTIFY_LIST
        | raw::REDISMODULE_NOTIFY_SET
        | raw::REDISMODULE_NOTIFY_HASH
        | raw::REDISMODULE_NOTIFY_ZSET
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED
        | raw::REDISMODULE_NOTIFY_STREAM;
    let subscribed = unsafe {
        rm!(RedisModule_SubscribeToKeyspaceEvents(
            ctx.0,
            classes,
            Some(keyspace_event)
        ))
    };
    if subscribed != raw::REDISMODULE_OK as c_int {
        return Err(LockError::Internal(
            "cannot subscribe to keyspace events".into(),
        ));
    }
    WATCHING_KEYSPACE.with(|w| w.set(true));
    Ok(())
}

unsafe extern "C" fn keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _class: c_int,
    _event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    firewall::callback((), || {
        if OWN_EVENT.with(Cell::get) || key.is_null() {
            return;
        }
        let ctx = Ctx(ctx);
        // SAFETY: Redis passes a valid key name for the callback's duration.
        let key = unsafe { RStr::from_ptr(&key) };
        let db = ctx.db();
        if waiters::count_in(db, key.as_ref()) > 0 {
            handoff::later(ctx, db, key.as_ref().to_vec());
        }
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn server_event(
    ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    firewall::callback((), || {
        let ctx = Ctx(ctx);
        let dbs: Vec<Option<i32>> = match event.id {
            raw::REDISMODULE_EVENT_FLUSHDB if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
                // SAFETY: Redis passes a RedisModuleFlushInfo for this event.
                let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
                vec![(info.dbnum >= 0).then_some(info.dbnum)]
            }
            raw::REDISMODULE_EVENT_REPLICA_CHANGE => {
                notify::replica_changed(
                    subevent == raw::REDISMODULE_SUBEVENT_REPLICA_CHANGE_ONLINE,
                );
                return;
            }
            raw::REDISMODULE_EVENT_SWAPDB => {
                // SAFETY: Redis passes a RedisModuleSwapDbInfo for this event.
                let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
                vec![Some(info.dbnum_first), Some(info.dbnum_second)]
            }
            _ => return,
        };
        for db in dbs {
            for (db, key) in waiters::queued_keys(db) {
                handoff::later(ctx, db, key);
            }
        }
    })
}
