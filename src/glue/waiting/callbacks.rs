//! The callbacks Redis makes for a blocked client, each behind the panic
//! firewall. What they do depends on the client's `Stage`:
//!
//! - timeout: the module unblocked the client (`Blocked::finish`): send the
//!   answer it left in the slot. Otherwise `CLIENT UNBLOCK ... TIMEOUT`: the
//!   client leaves its queue (nil) or its wait for replicas (the call is
//!   undone: NOREPLICAS).
//! - disconnect: the client closed, was killed, got `CLIENT UNBLOCK ...
//!   ERROR`, a cluster redirect or a role-change error: it leaves for good;
//!   a grant still waiting for replicas is taken back.
//! - free: the last word. A grant whose client was gone before its reply
//!   went out is taken back, so the lock moves on.
//! - reply: a key this client waits on was signalled ready by something
//!   else: decline (the module hands locks over itself).
//!
//! Callbacks may not write (some run inside other commands or while the
//! server frees a client): taking a grant back is a `TakeBack` job.

use std::ffi::{c_int, c_void};

use super::acks;
use super::handle::{Blocked, Callbacks, Stage, Wake, WakeSlot};
use super::queues;
use crate::core::{LockError, LockResult};
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::firewall;
use crate::glue::runtime::reply::{self, Reply};
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::ids::{AckId, WaiterId};

pub const CALLBACKS: Callbacks = Callbacks {
    reply: key_ready,
    timeout: answer,
    free: freed,
    disconnect: disconnected,
};

/// Blocks the client running `ctx` on `key`, in `stage`.
pub fn block(ctx: Ctx, key: &RStr, stage: Stage) -> LockResult<Blocked> {
    Blocked::block(ctx, key, stage, &CALLBACKS)
}

fn slot_of<'a>(ctx: Ctx) -> Option<&'a WakeSlot> {
    let data = unsafe { rm!(RedisModule_GetBlockedClientPrivateData(ctx.0)) };
    // SAFETY: every client is blocked with a WakeSlot, freed only in `freed`,
    // after the last callback that can see it.
    unsafe { (data as *const WakeSlot).as_ref() }
}

unsafe extern "C" fn key_ready(
    _ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let declined = raw::REDISMODULE_ERR as c_int;
    firewall::callback(declined, || declined)
}

/// A queued waiter the server unblocked itself leaves its queue (its
/// handle abandoned: the server answers it). False if it was not queued.
fn leave_queue(id: WaiterId) -> bool {
    let Some((waiter, jobs)) = queues::remove(id) else {
        return false;
    };
    for job in jobs.into_iter().chain(waiter.timeout) {
        scheduler::cancel(job);
    }
    waiter.handle.abandon();
    true
}

/// A call waiting for replicas that the server unblocked itself: its effect
/// is undone (from a job) and the error it would get is returned.
fn leave_acks(ctx: Ctx, id: AckId) -> Option<LockError> {
    let left = acks::leave(id)?;
    left.handle.abandon();
    undo_later(ctx, left.undo);
    Some(left.error)
}

unsafe extern "C" fn answer(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    reply::respond(ctx, || {
        let Some(slot) = slot_of(ctx) else {
            return Ok(Reply::Nil);
        };
        let stage = slot.stage.replace(Stage::Done);
        Ok(match stage {
            Stage::Answer(Wake::Nil) => Reply::Nil,
            Stage::Answer(Wake::Granted(g)) => Reply::Granted(g),
            Stage::Answer(Wake::Int(n)) => Reply::Int(n),
            Stage::Answer(Wake::Failed(e)) => return Err(e),
            // CLIENT UNBLOCK ... TIMEOUT: as if its time ran out.
            Stage::Queued(id) => {
                if leave_queue(id) {
                    stats::TIMED_OUT.bump();
                }
                Reply::Nil
            }
            Stage::Acking(id) => match leave_acks(ctx, id) {
                Some(error) => return Err(error),
                None => Reply::Nil,
            },
            // Answered already: nothing more to say (never expected).
            Stage::Done => Reply::Blocked,
        })
    })
}

unsafe extern "C" fn disconnected(
    ctx: *mut raw::RedisModuleCtx,
    _bc: *mut raw::RedisModuleBlockedClient,
) {
    let ctx = Ctx(ctx);
    firewall::callback((), || {
        let Some(slot) = slot_of(ctx) else { return };
        let stage = slot.stage.replace(Stage::Done);
        let left = match stage {
            Stage::Queued(id) => leave_queue(id),
            Stage::Acking(id) => leave_acks(ctx, id).is_some(),
            other => {
                slot.stage.replace(other);
                false
            }
        };
        if left {
            stats::DISCONNECTED.bump();
        }
    })
}

unsafe extern "C" fn freed(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: the WakeSlot `Blocked::block` gave Redis; freed only here.
    let slot = unsafe { Box::from_raw(data as *mut WakeSlot) };
    let ctx = Ctx(ctx);
    firewall::callback((), move || {
        let gone = unsafe { rm!(RedisModule_BlockedClientDisconnected(ctx.0)) } != 0;
        if let (true, Some((qk, owner))) = (gone, slot.undo.take()) {
            stats::UNDELIVERED.bump();
            scheduler::soon(ctx, Job::TakeBack(qk, owner));
        }
    })
}

/// The call's effect is undone from a job: callbacks may not write.
fn undo_later(ctx: Ctx, undo: Option<Job>) {
    if let Some(undo) = undo {
        scheduler::soon(ctx, undo);
    }
}
