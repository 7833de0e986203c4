//! Layer 4: what other clients and the server do, as far as locks care.
//!
//! - Keyspace events on queued keys (DEL, UNLINK, expiry, eviction, a
//!   Redisson Lua release, renames, overwrites, MIGRATE): the queue is looked
//!   at again (`Serve` job). Events on a followed RW lock's key or on any
//!   read hold's timeout key (`...:rwlock_timeout:<n>`, mapped back to its
//!   lock) bring that lock's visit forward (`RwDue` job). FLUSHALL / FLUSHDB / SWAPDB fire no per-key
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
use std::ffi::CStr;

use crate::core::{LockError, LockResult};
use crate::glue::eviction;
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::hooks::{self, EventKind, Hooks, ServerEvent};
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::ids::ClientId;
use crate::glue::store::{QueueKey, is_own_event, server};
use crate::glue::store::{lifecycle, metrics};
use crate::glue::waiting::{self, acks, queues, rwlock, ties};

thread_local! {
    static WATCHING_KEYSPACE: Cell<bool> = const { Cell::new(false) };
    static WATCHING_EVENT_LOOP: Cell<bool> = const { Cell::new(false) };
    static WATCHING_LEASE_SETS: Cell<bool> = const { Cell::new(false) };
    static WATCHING_EXPIRIES: Cell<bool> = const { Cell::new(false) };
}

/// The module's handlers of keyspace and server events.
struct Events;

/// Server events, at load.
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    for kind in [
        EventKind::FlushDb,
        EventKind::SwapDb,
        EventKind::ReplicaChange,
        EventKind::RoleChanged,
        EventKind::ClientChange,
        EventKind::Config,
    ] {
        if !hooks::subscribe_server::<Events>(ctx, kind) {
            return Err("cannot subscribe to a server event".into());
        }
    }
    Ok(())
}

/// Redis dropped the module's subscriptions (module unload); the next load
/// (which may find this library's statics still in place) subscribes again.
pub fn forget_subscriptions() {
    WATCHING_KEYSPACE.with(|w| w.set(false));
    WATCHING_EVENT_LOOP.with(|w| w.set(false));
    WATCHING_LEASE_SETS.with(|w| w.set(false));
    WATCHING_EXPIRIES.with(|w| w.set(false));
}

/// The server's `expired` events, from the first hold granted while
/// lifecycle events are on: a hold gone at its deadline fires `*.expired`
/// only if its key really expired (not if DEL or a script removed it
/// earlier). Expirations only, and only once lifecycle events were on: a
/// server without them pays nothing.
pub fn watch_expiries(ctx: Ctx) {
    if WATCHING_EXPIRIES.with(Cell::get) {
        return;
    }
    if hooks::subscribe_keyspace::<Expiries>(ctx, raw::REDISMODULE_NOTIFY_EXPIRED) {
        WATCHING_EXPIRIES.with(|w| w.set(true));
    }
}

struct Expiries;

impl Hooks for Expiries {
    fn keyspace(ctx: Ctx, _event: &CStr, key: &RStr) {
        // Own expirations too: opening a lapsed key to check it expires it.
        waiting::holds::key_expired(ctx.db(), key.as_ref(), ctx.now());
    }

    fn server(_ctx: Ctx, _event: ServerEvent<'_>) {}
}

/// Sorted-set writes, from the first SEMAPHORE.* command on: a Redisson
/// client's lease written to a semaphore's `{key}:timeout` must reach the
/// semaphore's sweep (its permit goes back at its deadline). Sorted-set
/// events only, and only once semaphores are in use: every other server
/// pays nothing.
pub fn watch_lease_sets(ctx: Ctx) -> LockResult<()> {
    if WATCHING_LEASE_SETS.with(Cell::get) {
        return Ok(());
    }
    if !hooks::subscribe_keyspace::<LeaseSets>(ctx, raw::REDISMODULE_NOTIFY_ZSET) {
        return Err(LockError::Internal(
            "cannot subscribe to keyspace events".into(),
        ));
    }
    WATCHING_LEASE_SETS.with(|w| w.set(true));
    // Leases written before now are found and swept at their deadlines too.
    if server::is_primary() {
        waiting::semaphore::discover_all(ctx);
    }
    Ok(())
}

/// The module's command filter, registered at load: it sees every command
/// (a few comparisons, no allocation) for the two the server tells modules
/// nothing of:
///
/// - `CONFIG RESETSTAT`: the wait and hold metrics are reset with the
///   server's statistics.
/// - `MODULE UNLOAD lock`: MODULE UNLOAD succeeds whenever no client waits
///   and nothing is tied, but Redis refuses to unload a module that holds a
///   timer, before the module is asked. So just before it runs, with nothing
///   else pending, the jobs that are no reason to stay are dropped: a
///   semaphore's sweeps at lease deadlines (the leases lapse on their own;
///   the next call sweeps and arms again) and the expiry watch of lifecycle
///   events.
struct ModuleFilter;

impl hooks::Filter for ModuleFilter {
    fn filter(args: &hooks::FilterArgs) {
        let n = args.count();
        if n != 2 && n != 3 {
            return;
        }
        let is = |i: usize, word: &[u8]| {
            args.get(i)
                .is_some_and(|a| a.as_ref().eq_ignore_ascii_case(word))
        };
        if n == 2 && is(0, b"config") && is(1, b"resetstat") {
            metrics::reset();
        } else if n == 3 && is(0, b"module") && is(1, b"unload") && is(2, b"lock") {
            let droppable = waiting::semaphore::sweeps() + waiting::holds::watching();
            let quiet = queues::totals() == (0, 0)
                && acks::count() == 0
                && ties::count() == 0
                && waiting::delivery::count() == 0
                && scheduler::pending() == droppable;
            if quiet && droppable > 0 {
                waiting::semaphore::drop_sweeps();
                waiting::holds::stop_watch();
            }
        }
    }
}

/// The command filter (at load).
pub fn filter_commands(ctx: Ctx) -> Result<(), String> {
    match hooks::register_filter::<ModuleFilter>(ctx) {
        true => Ok(()),
        false => Err("cannot register the module's command filter".into()),
    }
}

/// The handler of sorted-set events (`watch_lease_sets`).
struct LeaseSets;

impl Hooks for LeaseSets {
    fn keyspace(ctx: Ctx, _event: &CStr, key: &RStr) {
        // A replica sweeps nothing (its primary's writes come replicated).
        if is_own_event() || !server::is_primary() {
            return;
        }
        let db = ctx.db();
        for semaphore in crate::core::semaphore::keys_of_lease_set(key.as_ref()) {
            waiting::semaphore::sweep_soon(ctx, db, semaphore);
        }
    }

    fn server(_ctx: Ctx, _event: ServerEvent<'_>) {}
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
    if !hooks::subscribe_keyspace::<Events>(ctx, classes) {
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
    if !hooks::subscribe_server::<Events>(ctx, EventKind::EventLoop) {
        return Err(LockError::Internal(
            "cannot subscribe to event-loop events".into(),
        ));
    }
    WATCHING_EVENT_LOOP.with(|w| w.set(true));
    Ok(())
}

impl Hooks for Events {
    fn keyspace(ctx: Ctx, _event: &CStr, key: &RStr) {
        if is_own_event() {
            return;
        }
        let db = ctx.db();
        look_again(ctx, db, key.as_ref());
        // RW locks: a followed lock's key, or a read hold's timeout key.
        for lock in rwlock::key_event(ctx, db, key.as_ref()) {
            look_again(ctx, db, &lock);
        }
    }

    fn server(ctx: Ctx, event: ServerEvent<'_>) {
        match event {
            ServerEvent::Flushed(db) => look_again_in(ctx, db),
            ServerEvent::SwapDb(a, b) => {
                look_again_in(ctx, Some(a));
                look_again_in(ctx, Some(b));
                waiting::semaphore::swapped(ctx, a, b);
            }
            ServerEvent::Replica { online } => server::replica_changed(online),
            ServerEvent::BecameReplica => demoted(),
            ServerEvent::BecamePrimary => {
                server::set_primary(true);
                // The leases this node inherited are swept here now.
                if WATCHING_LEASE_SETS.with(Cell::get) {
                    waiting::semaphore::discover_all(ctx);
                }
            }
            ServerEvent::ClientClosed(id) => {
                let client = ClientId(id);
                // It fires inside other commands, on replicas, while the
                // server frees clients: act from a job, only for tied ones.
                if ties::has_client(client) {
                    scheduler::soon(ctx, Job::Closed(client));
                }
            }
            ServerEvent::ConfigChanged(names) => {
                if names.iter().any(|n| eviction::concerns(n)) {
                    eviction::check(ctx);
                }
                if names
                    .iter()
                    .any(|n| n.to_bytes() == b"notify-keyspace-events")
                {
                    lifecycle::refresh(ctx);
                }
                if names
                    .iter()
                    .any(|n| n.to_bytes() == b"latency-monitor-threshold")
                {
                    metrics::refresh(ctx);
                }
            }
            ServerEvent::BeforeSleep => acks::before_sleep(ctx),
        }
    }
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

fn look_again_in(ctx: Ctx, db: Option<i32>) {
    for QueueKey { db, name } in queues::keys(db) {
        look_again(ctx, db, &name);
    }
    rwlock::look_again_in(ctx, db);
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
        if let Some((job, _)) = waiter.timeout {
            scheduler::cancel(job);
        }
        stats::DEMOTED.bump();
        waiter.handle.fail(LockError::Unblocked);
    }
    // Ties are connection state on the primary: the lease is the safety net.
    ties::drain();
    rwlock::forget_all();
    for left in acks::drain() {
        left.handle.fail(LockError::Unblocked);
    }
    // Answers already on their way: the grants among them become UNBLOCKED
    // when sent (`delivery` checks the role).
}
