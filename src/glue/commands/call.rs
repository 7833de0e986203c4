//! What the commands share about the call being served: where it runs
//! (MULTI/EXEC, a script: no blocking, no connection of its own), the
//! REPLICAS and KEEPALIVE rules that follow from that, and how a call
//! blocks: in a queue, or until replicas acknowledge its writes.

use std::cell::Cell;

use crate::core::request::{Block, Replicas};
use crate::core::{LockError, LockResult, Millis};
use crate::glue::config;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::ids::{ClientId, WaiterId};
use crate::glue::store::server;
use crate::glue::waiting::acks::{self, Answer};
use crate::glue::waiting::callbacks;
use crate::glue::waiting::handle::{Blocked, Stage};
use crate::glue::waiting::queues::{self, Waiter};
use crate::glue::waiting::{handoff, ties};

/// The call being served. The context flags are read once, and only by a
/// call that needs them (they cost a full GetContextFlags).
pub struct Call {
    ctx: Ctx,
    flags: Cell<Option<u32>>,
}

impl Call {
    pub fn new(ctx: Ctx) -> Call {
        Call {
            ctx,
            flags: Cell::new(None),
        }
    }

    fn flags(&self) -> u32 {
        match self.flags.get() {
            Some(f) => f,
            None => {
                let f = self.ctx.flags();
                self.flags.set(Some(f));
                f
            }
        }
    }

    /// Not inside MULTI/EXEC or a script (or anything else that cannot block).
    pub fn can_block(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING == 0
    }

    /// KEEPALIVE: the connection to tie the lock to. A script has none of its
    /// own (nor have AOF loading and the replication link, which never run
    /// LOCK.* anyway); MULTI/EXEC ties to the MULTI's connection.
    pub fn tie_to(&self, keepalive: bool) -> LockResult<Option<ClientId>> {
        if !keepalive {
            return Ok(None);
        }
        let no_connection = raw::REDISMODULE_CTX_FLAGS_LUA
            | raw::REDISMODULE_CTX_FLAGS_REPLICATED
            | raw::REDISMODULE_CTX_FLAGS_LOADING;
        if self.flags() & no_connection != 0 {
            return Err(LockError::NotHere(
                "KEEPALIVE cannot be used inside a script: a script has no connection of its own",
            ));
        }
        let id = unsafe { rm!(RedisModule_GetClientId(self.ctx.0)) };
        Ok(Some(ClientId(id)))
    }

    /// REPLICAS as given, or from the config; `None` when the call need not
    /// wait. Refused inside MULTI/EXEC or a script when asked for (nothing
    /// can wait there; the config is skipped there), and NOREPLICAS at once
    /// when fewer replicas are online: all before anything is written.
    pub fn replicas(&self, given: Option<Replicas>) -> LockResult<Option<Replicas>> {
        let (replicas, explicit) = match given {
            Some(r) => (r, true),
            None => match config::default_replicas() {
                Some(r) => (r, false),
                None => return Ok(None),
            },
        };
        if replicas.is_none() {
            return Ok(None);
        }
        if !self.can_block() {
            return match explicit {
                true => Err(LockError::NotHere(
                    "REPLICAS n > 0 cannot wait inside MULTI/EXEC or a script",
                )),
                false => Ok(None),
            };
        }
        replicas.check(self.ctx.now())?;
        let online = server::online_replicas();
        if online < replicas.count {
            return Err(LockError::NoReplicas {
                wanted: replicas.count,
                acked: online,
                waited: false,
            });
        }
        Ok(Some(replicas))
    }
}

/// Blocks the calling client as waiter `id` of the queue at `key`.
pub fn block_queued(ctx: Ctx, key: &RStr, id: WaiterId) -> LockResult<Blocked> {
    // Foreign writes to queued keys must reach the module from now on.
    events::watch_keyspace(ctx)?;
    callbacks::block(ctx, key, Stage::Queued(id))
}

/// Parks a blocked waiter at the tail of the queue at `key`: its BLOCK time
/// runs from now, and the queue is served at the holder's deadline (`ttl`).
pub fn enqueue(
    ctx: Ctx,
    db: i32,
    key: &RStr,
    waiter: Waiter,
    block: Block,
    ttl: Option<Millis>,
) -> LockResult<()> {
    if waiter.replicas.is_some() {
        // Its grant will wait for acknowledgements.
        events::watch_event_loop(ctx)?;
    }
    let id = waiter.id;
    queues::push(db, key.as_ref(), waiter);
    if let Some(ms) = block.timeout_ms {
        let job = scheduler::at(ctx, ctx.now().saturating_add(ms), Job::Timeout(id));
        queues::set_timeout(id, job);
    }
    stats::BLOCKED.bump();
    handoff::arm(ctx, db, key.as_ref(), ttl);
    Ok(())
}

/// Blocks the calling client until `replicas` acknowledged what it just
/// wrote; then its `tie` change takes effect and it gets `answer`. `undo`
/// runs if they do not in time (and the tie is left as it was).
pub fn await_replicas(
    ctx: Ctx,
    key: &RStr,
    answer: Answer,
    tie: ties::Change,
    replicas: Replicas,
    undo: Option<Job>,
) -> LockResult<Reply> {
    events::watch_event_loop(ctx)?;
    let id = acks::next_id();
    let handle = callbacks::block(ctx, key, Stage::Acking(id))?;
    if let Err(too_few) = acks::wait(ctx, id, handle, answer, Some(tie), replicas, undo) {
        // Replicas were counted before the write; they cannot have gone
        // since. Should it happen, undo the call.
        if let Some(undo) = too_few.undo {
            scheduler::soon(ctx, undo);
        }
        too_few.handle.fail(too_few.error);
    }
    Ok(Reply::Blocked)
}
