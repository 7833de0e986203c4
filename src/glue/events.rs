//! Layer 4: what other clients and the server do, as far as locks care.
//!
//! - Keyspace events on queued keys (DEL, UNLINK, expiry, eviction, a
//!   Redisson Lua release, renames, overwrites, MIGRATE): the queue is looked
//!   at again (`Serve` job). FLUSHALL / FLUSHDB / SWAPDB fire no per-key
//!   events: the flush and swapdb server events do the same for every queue
//!   of the databases involved.
//! - A connection closing with tied locks (KEEPALIVE): `Closed` job.
//! - The node becoming a replica: every waiter is answered UNBLOCKED (the
//!   server has already answered those it handles itself), ties and
//!   acknowledgement waits end; LOCK.* writes are refused from now on.
//! - Before the event loop sleeps: replica acknowledgements (REPLICAS).
//! - Replicas coming and going (REPLICAS counts them, `notify` publishes to
//!   them); configuration
//!   changes (`eviction` re-checks the policy).
//!
//! Callbacks here never write: they schedule jobs.
//!
//! The keyspace and event-loop subscriptions are made when first needed (a
//! first waiter, a first REPLICAS wait), not at load: Redis builds a module
//! context for every keyspace event in the server (~700 instructions each,
//! measured) and for every event-loop turn while a module is subscribed, and
//! a server that never queues waiters should not pay for it.

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_void};

use crate::core::{LockError, LockResult};
use crate::glue::eviction;
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::firewall;
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::ids::ClientId;
use crate::glue::store::{QueueKey, is_own_event, server};
use crate::glue::waiting::{acks, queues, ties};

thread_local! {
    static WATCHING_KEYSPACE: Cell<bool> = const { Cell::new(false) };
    static WATCHING_EVENT_LOOP: Cell<bool> = const { Cell::new(false) };
}

fn subscribe_server_event(ctx: Ctx, id: u64, callback: raw::RedisModuleEventCallback) -> bool {
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    let subscribed = unsafe { rm!(RedisModule_SubscribeToServerEvent(ctx.0, event, callback)) };
    subscribed == raw::REDISMODULE_OK as c_int
}

/// Server events, at load.
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    for id in [
        raw::REDISMODULE_EVENT_FLUSHDB,
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_CLIENT_CHANGE,
        raw::REDISMODULE_EVENT_CONFIG,
    ] {
        if !subscribe_server_event(ctx, id, Some(server_event)) {
            return Err(format!("cannot subscribe to server event {id}"));
        }
    }
    Ok(())
}

/// Redis dropped the module's subscriptions (module unload); the next load
/// (which may find this library's statics still in place) subscribes again.
pub fn forget_subscriptions() {
    WATCHING_KEYSPACE.with(|w| w.set(false));
    WATCHING_EVENT_LOOP.with(|w| w.set(false));
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
            classes as c_int,
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

/// The before-sleep event, from the first call that waits for replicas.
pub fn watch_event_loop(ctx: Ctx) -> LockResult<()> {
    if WATCHING_EVENT_LOOP.with(Cell::get) {
        return Ok(());
    }
    if !subscribe_server_event(ctx, raw::REDISMODULE_EVENT_EVENTLOOP, Some(event_loop)) {
        return Err(LockError::Internal(
            "cannot subscribe to event-loop events".into(),
        ));
    }
    WATCHING_EVENT_LOOP.with(|w| w.set(true));
    Ok(())
}

unsafe extern "C" fn keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _class: c_int,
    _event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    firewall::callback((), || {
        if is_own_event() || key.is_null() {
            return;
        }
        let ctx = Ctx(ctx);
        // SAFETY: Redis passes a valid key name for the callback's duration.
        let key = unsafe { RStr::from_ptr(&key) };
        look_again(ctx, ctx.db(), key.as_ref());
    });
    raw::REDISMODULE_OK as c_int
}

/// Schedules one `Serve` of the queue at `key`, if it has one.
fn look_again(ctx: Ctx, db: i32, key: &[u8]) {
    let needed = queues::with_queue(db, key, |q| q.serve.is_none()).unwrap_or(false);
    if !needed {
        return;
    }
    let Some(qk) = queues::queue_key(db, key) else {
        return;
    };
    let job = scheduler::soon(ctx, Job::Serve(qk));
    queues::with_queue(db, key, |q| q.serve = Some(job));
}

unsafe extern "C" fn event_loop(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP {
        return;
    }
    firewall::callback((), || acks::before_sleep(Ctx(ctx)));
}

unsafe extern "C" fn server_event(
    ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    firewall::callback((), || {
        let ctx = Ctx(ctx);
        match event.id {
            raw::REDISMODULE_EVENT_FLUSHDB if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
                // SAFETY: Redis passes a RedisModuleFlushInfo for this event.
                let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
                look_again_in(ctx, (info.dbnum >= 0).then_some(info.dbnum));
            }
            raw::REDISMODULE_EVENT_SWAPDB => {
                // SAFETY: Redis passes a RedisModuleSwapDbInfo for this event.
                let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
                look_again_in(ctx, Some(info.dbnum_first));
                look_again_in(ctx, Some(info.dbnum_second));
            }
            raw::REDISMODULE_EVENT_REPLICA_CHANGE => {
                let online = subevent == raw::REDISMODULE_SUBEVENT_REPLICA_CHANGE_ONLINE;
                server::replica_changed(online);
            }
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED => {
                if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
                    demoted();
                } else {
                    server::set_primary(true);
                }
            }
            raw::REDISMODULE_EVENT_CLIENT_CHANGE
                if subevent == raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED =>
            {
                // SAFETY: Redis passes a RedisModuleClientInfo for this event.
                let info = unsafe { &*(data as *const raw::RedisModuleClientInfo) };
                let client = ClientId(info.id);
                // It fires inside other commands, on replicas, while the
                // server frees clients: act from a job, only for tied ones.
                if ties::has_client(client) {
                    scheduler::soon(ctx, Job::Closed(client));
                }
            }
            raw::REDISMODULE_EVENT_CONFIG
                if subevent == raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE =>
            {
                // SAFETY: Redis passes a RedisModuleConfigChange for this event.
                let change = unsafe { &*(data as *const raw::RedisModuleConfigChange) };
                let names = (0..change.num_changes as usize).filter_map(|i| {
                    // SAFETY: `num_changes` C strings.
                    let name = unsafe { *change.config_names.add(i) };
                    (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) })
                });
                if names.into_iter().any(eviction::concerns) {
                    eviction::check(ctx);
                }
            }
            _ => {}
        }
    })
}

fn look_again_in(ctx: Ctx, db: Option<i32>) {
    for QueueKey { db, name } in queues::keys(db) {
        look_again(ctx, db, &name);
    }
}

/// The node became a replica: it serves no locks now. The server answered
/// the waiters it handles itself (Redis 7.0: UNBLOCKED and a closed
/// connection; Valkey: a redirect); the rest are answered here, so that no
/// waiter is left hanging whatever its client sent with CLIENT CAPA.
fn demoted() {
    server::set_primary(false);
    let (waiters, jobs) = queues::drain();
    for job in jobs {
        scheduler::cancel(job);
    }
    for waiter in waiters {
        if let Some(job) = waiter.timeout {
            scheduler::cancel(job);
        }
        stats::DEMOTED.bump();
        waiter.handle.fail(LockError::Unblocked);
    }
    // Ties are connection state on the primary: the lease is the safety net.
    ties::clear();
    for left in acks::drain() {
        left.handle.fail(LockError::Unblocked);
    }
}
