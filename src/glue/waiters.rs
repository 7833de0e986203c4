//! Clients waiting with `LOCK.ACQUIRE ... BLOCK ms`: one FIFO `WaitQueue`
//! per (db, key), the blocked-client handles, and every way a waiter leaves.
//!
//! Blocking is built on `RedisModule_BlockClient` + direct hand-off, which
//! works on Redis 7.0 (blocking on keys does not: a lock is freed by deleting
//! its key, and 7.0 only wakes module waiters on keys that exist).
//!
//! Invariant: a waiter is in the registry exactly until `RedisModule_UnblockClient`
//! is called for its handle, which happens exactly once, whichever comes
//! first: grant, our timeout timer, CLIENT UNBLOCK, disconnect.
//!
//! The registry is touched only in short closures that never call into Redis,
//! so a callback Redis makes while we are inside a Redis call (a keyspace
//! event, say) can always borrow it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr;

use super::ffi::{Ctx, OwnedStr, RStr, Timer, raw, start_timer, stop_timer};
use super::reply::Reply;
use super::{events, firewall, handoff, stats};
use crate::core::queue::{Ticket, WaitQueue};
use crate::core::request::Block;
use crate::core::{Lease, LockError, LockResult, Millis};

type BlockedClient = *mut raw::RedisModuleBlockedClient;

/// A waiter's BLOCK timeout; its payload is the waiter's id.
type TimeoutTimer = Timer<u64>;

/// The hand-on at the holder's lease deadline; its payload is (db, key).
pub type DeadlineTimer = Timer<(i32, Vec<u8>)>;

/// A client parked in a queue.
pub struct Waiter {
    id: u64,
    bc: BlockedClient,
    /// Copied out of the command's arguments: it outlives the command.
    pub owner: OwnedStr,
    /// `*`: reply with the owner instead of the hold count.
    pub generated: bool,
    pub lease: Lease,
    timeout: Option<TimeoutTimer>,
}

/// How a blocked client is woken: passed to `UnblockClient`, read by the
/// reply callback, freed by `free_wakeup`. A waiter that leaves without the
/// lock (timeout, CLIENT UNBLOCK) is unblocked with null instead: nil.
enum Wakeup {
    Granted {
        holds: i64,
        owner: OwnedStr,
        generated: bool,
        db: i32,
        key: Vec<u8>,
    },
    Failed(LockError),
}

#[derive(Default)]
struct KeyQueue {
    queue: WaitQueue<Waiter>,
    /// Timer at the holder's lease deadline, and when it fires (ms).
    deadline: Option<(DeadlineTimer, Millis)>,
}

struct Location {
    db: i32,
    key: Vec<u8>,
    ticket: Ticket,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    keys: HashMap<i32, HashMap<Vec<u8>, KeyQueue>>,
    by_id: HashMap<u64, Location>,
    by_client: HashMap<usize, u64>,
}

thread_local! {
    // Redis runs module code on its main thread only.
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

impl Registry {
    fn queue(&self, db: i32, key: &[u8]) -> Option<&KeyQueue> {
        self.keys.get(&db)?.get(key)
    }

    fn queue_mut(&mut self, db: i32, key: &[u8]) -> Option<&mut KeyQueue> {
        self.keys.get_mut(&db)?.get_mut(key)
    }

    /// Drops an empty queue; returns its deadline timer for the caller to stop.
    fn drop_if_empty(&mut self, db: i32, key: &[u8]) -> Option<DeadlineTimer> {
        let per_db = self.keys.get_mut(&db)?;
        if !per_db.get(key)?.queue.is_empty() {
            return None;
        }
        let timer = per_db
            .remove(key)
            .and_then(|q| q.deadline)
            .map(|(id, _)| id);
        if per_db.is_empty() {
            self.keys.remove(&db);
        }
        if self.keys.is_empty() {
            // Give the memory of past bursts back.
            let next_id = self.next_id;
            *self = Registry {
                next_id,
                ..Registry::default()
            };
        }
        timer
    }

    fn unindex(&mut self, waiter: &Waiter) {
        self.by_id.remove(&waiter.id);
        self.by_client.remove(&(waiter.bc as usize));
    }

    /// Removes a waiter wherever it stands.
    fn leave(&mut self, id: u64) -> Option<(Waiter, Option<DeadlineTimer>)> {
        let loc = self.by_id.get(&id)?;
        let (db, key, ticket) = (loc.db, loc.key.clone(), loc.ticket);
        let waiter = self.queue_mut(db, &key)?.queue.remove(ticket)?;
        self.unindex(&waiter);
        let deadline = self.drop_if_empty(db, &key);
        Some((waiter, deadline))
    }
}

pub fn is_queued(ctx: Ctx, key: &RStr) -> bool {
    count_in(ctx.db(), key.as_ref()) > 0
}

pub fn count(ctx: Ctx, key: &RStr) -> usize {
    count_in(ctx.db(), key.as_ref())
}

pub fn count_in(db: i32, key: &[u8]) -> usize {
    with(|r| r.queue(db, key).map_or(0, |q| q.queue.len()))
}

/// Every waiter, and the number of keys they wait for (INFO).
pub fn totals() -> (usize, usize) {
    with(|r| {
        let keys = r.keys.values().map(HashMap::len).sum();
        (r.by_id.len(), keys)
    })
}

/// Keys with waiters in `db` (all dbs if `None`): what a flush may have freed.
pub fn queued_keys(db: Option<i32>) -> Vec<(i32, Vec<u8>)> {
    with(|r| {
        r.keys
            .iter()
            .filter(|(d, _)| db.is_none_or(|db| **d == db))
            .flat_map(|(d, keys)| keys.keys().map(|k| (*d, k.clone())))
            .collect()
    })
}

/// Parks the client at the tail of the key's queue. `ttl`: the holder's
/// lease left, to arm the hand-off at its deadline.
pub fn enqueue(
    ctx: Ctx,
    key: &RStr,
    owner: OwnedStr,
    generated: bool,
    lease: Lease,
    block: Block,
    ttl: Option<Millis>,
) -> LockResult<Reply> {
    events::watch_keyspace(ctx)?;
    // Everything that could fail comes before blocking: a blocked client must
    // end up in the registry, or nothing would ever unblock it.
    let db = ctx.db();
    let key_bytes = key.as_ref().to_vec();
    let id = with(|r| {
        r.next_id += 1;
        r.next_id
    });
    // Redis's own timeout is off (0): it only fires on the next event-loop
    // turn (up to 1/hz late); our timer below fires on time. The timeout
    // callback still serves CLIENT UNBLOCK.
    let bc = unsafe {
        rm!(RedisModule_BlockClient(
            ctx.0,
            Some(reply_wakeup),
            Some(unblocked_by_command),
            Some(free_wakeup),
            0
        ))
    };
    if bc.is_null() {
        return Err(LockError::Internal("cannot block the client".into()));
    }
    unsafe { rm!(RedisModule_SetDisconnectCallback(bc, Some(disconnected))) };
    let timeout = block
        .timeout_ms
        .map(|ms| start_timer(ctx, ms, id, timed_out));
    let waiter = Waiter {
        id,
        bc,
        owner,
        generated,
        lease,
        timeout,
    };
    with(|r| {
        let ticket = r
            .keys
            .entry(db)
            .or_default()
            .entry(key_bytes.clone())
            .or_default()
            .queue
            .push(waiter);
        r.by_id.insert(
            id,
            Location {
                db,
                key: key_bytes.clone(),
                ticket,
            },
        );
        r.by_client.insert(bc as usize, id);
    });
    stats::BLOCKED.bump();
    handoff::arm_deadline(ctx, db, &key_bytes, ttl);
    Ok(Reply::Blocked)
}

/// The head of the queue, taken out to be served; `restore` puts it back.
pub fn pop_head(db: i32, key: &[u8]) -> Option<(Ticket, Waiter)> {
    with(|r| {
        let (ticket, waiter) = r.queue_mut(db, key)?.queue.pop_front()?;
        r.unindex(&waiter);
        Some((ticket, waiter))
    })
}

pub fn restore(db: i32, key: &[u8], ticket: Ticket, waiter: Waiter) {
    with(|r| {
        r.by_id.insert(
            waiter.id,
            Location {
                db,
                key: key.to_vec(),
                ticket,
            },
        );
        r.by_client.insert(waiter.bc as usize, waiter.id);
        r.keys
            .entry(db)
            .or_default()
            .entry(key.to_vec())
            .or_default()
            .queue
            .restore(ticket, waiter);
    })
}

/// The deadline timer of a key's queue: replaced if `new` fires earlier.
/// Returns the timer to stop, and whether the caller should start `new`.
pub fn swap_deadline(db: i32, key: &[u8], at: Millis) -> (Option<DeadlineTimer>, bool) {
    with(|r| match r.queue(db, key) {
        None => (None, false),
        Some(q) => match q.deadline {
            Some((_, current)) if current <= at => (None, false),
            Some((id, _)) => (Some(id), true),
            None => (None, true),
        },
    })
}

pub fn set_deadline(db: i32, key: &[u8], timer: Option<(DeadlineTimer, Millis)>) {
    with(|r| {
        if let Some(q) = r.queue_mut(db, key) {
            q.deadline = timer;
        }
    })
}

/// After serving: if the queue is now empty, forget it (and its timer).
pub fn forget_if_empty(ctx: Ctx, db: i32, key: &[u8]) {
    if let Some(timer) = with(|r| r.drop_if_empty(db, key)) {
        stop_timer(ctx, timer);
    }
}

/// Hands the lock to a waiter already taken from its queue (it now holds it
/// `holds` times), or tells it why not.
pub fn grant(ctx: Ctx, db: i32, key: &[u8], waiter: Waiter, holds: i64) {
    stats::GRANTED_AFTER_WAIT.bump();
    let wakeup = Wakeup::Granted {
        holds,
        owner: waiter.owner,
        generated: waiter.generated,
        db,
        key: key.to_vec(),
    };
    wake(ctx, waiter.bc, waiter.timeout, wakeup);
}

pub fn fail(ctx: Ctx, waiter: Waiter, error: LockError) {
    wake(ctx, waiter.bc, waiter.timeout, Wakeup::Failed(error));
}

fn wake(ctx: Ctx, bc: BlockedClient, timeout: Option<TimeoutTimer>, wakeup: Wakeup) {
    if let Some(timer) = timeout {
        stop_timer(ctx, timer);
    }
    let data = Box::into_raw(Box::new(wakeup)) as *mut c_void;
    unsafe { rm!(RedisModule_UnblockClient(bc, data)) };
}

/// Our BLOCK timeout fired: the waiter leaves with nil.
fn timed_out(ctx: Ctx, id: u64) {
    if leave_with_nil(ctx, id, true) {
        stats::TIMED_OUT.bump();
    }
}

/// Removes the waiter blocked on `bc` (CLIENT UNBLOCK, disconnect) and
/// releases its handle; false if it was already woken.
fn leave_by_client(ctx: Ctx, bc: BlockedClient) -> bool {
    match with(|r| r.by_client.get(&(bc as usize)).copied()) {
        Some(id) => leave_with_nil(ctx, id, false),
        None => false,
    }
}

/// Takes a waiter out of its queue, stops its timers and unblocks it with no
/// private data, which the reply callback answers with nil. False if it was
/// already woken. `timer_fired`: its timeout timer is the caller, and a timer
/// that has fired must not be stopped again.
fn leave_with_nil(ctx: Ctx, id: u64, timer_fired: bool) -> bool {
    let Some((waiter, deadline)) = with(|r| r.leave(id)) else {
        return false;
    };
    if let Some(timer) = waiter.timeout.filter(|_| !timer_fired) {
        stop_timer(ctx, timer);
    }
    if let Some(timer) = deadline {
        stop_timer(ctx, timer);
    }
    unsafe { rm!(RedisModule_UnblockClient(waiter.bc, ptr::null_mut())) };
    true
}

/// Reply callback: runs in the event loop after `UnblockClient`.
unsafe extern "C" fn reply_wakeup(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    firewall::command(ctx, || {
        let data = unsafe { rm!(RedisModule_GetBlockedClientPrivateData(ctx.0)) };
        // SAFETY: UnblockClient passes a Wakeup box from `wake`, or null
        // (`leave_with_nil`: timeout, CLIENT UNBLOCK), which answers nil.
        let Some(wakeup) = (unsafe { (data as *const Wakeup).as_ref() }) else {
            return Ok(Reply::Nil);
        };
        match wakeup {
            Wakeup::Granted {
                owner,
                generated,
                holds,
                ..
            } => {
                if *generated {
                    Ok(Reply::Owner(OwnedStr::new(owner.as_ref())))
                } else {
                    Ok(Reply::Int(*holds))
                }
            }
            Wakeup::Failed(e) => Err(e.clone()),
        }
    })
}

/// Timeout callback: only CLIENT UNBLOCK gets here (our own timeouts use a
/// timer). TIMEOUT → nil, like a timed-out BLOCK.
unsafe extern "C" fn unblocked_by_command(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    firewall::command(ctx, || {
        let bc = unsafe { rm!(RedisModule_GetBlockedClientHandle(ctx.0)) };
        if leave_by_client(ctx, bc) {
            stats::TIMED_OUT.bump();
        }
        Ok(Reply::Nil)
    })
}

/// The client went away while waiting (closed, CLIENT KILL, CLIENT UNBLOCK
/// ERROR, or the server became a replica): it leaves the queue for good.
unsafe extern "C" fn disconnected(ctx: *mut raw::RedisModuleCtx, bc: BlockedClient) {
    let ctx = Ctx(ctx);
    firewall::callback((), || {
        if leave_by_client(ctx, bc) {
            stats::DISCONNECTED.bump();
        }
    })
}

/// Frees a wakeup. If the client vanished between its grant and the reply,
/// the grant was never delivered: give the hold back (the lock moves on).
unsafe extern "C" fn free_wakeup(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is a Wakeup box from `wake`, freed only here.
    let wakeup = unsafe { Box::from_raw(data as *mut Wakeup) };
    let ctx = Ctx(ctx);
    firewall::callback((), move || {
        let undelivered = unsafe { rm!(RedisModule_BlockedClientDisconnected(ctx.0)) } != 0;
        if let Wakeup::Granted { owner, db, key, .. } = *wakeup {
            if undelivered {
                stats::UNDELIVERED.bump();
                handoff::undo_grant(ctx, db, key, owner);
            }
        }
    })
}
