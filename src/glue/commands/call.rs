//! What the commands share about the call being served: where it runs
//! (MULTI/EXEC, a script: no blocking, no connection of its own), the
//! REPLICAS and KEEPALIVE rules that follow from that, and how a call
//! blocks: in a queue, or until replicas acknowledge its writes.

use std::cell::Cell;
use std::ops::Deref;

use crate::core::request::{Block, Replicas};
use crate::core::{LockError, LockResult, Millis};
use crate::glue::config;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr, raw};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::{self, Job};
use crate::glue::stats;
use crate::glue::store::ids::{ClientId, WaiterId};
use crate::glue::store::server;
use crate::glue::waiting::acks::{self, Answer};
use crate::glue::waiting::handle::Blocked;
use crate::glue::waiting::queues::{self, Waiter};
use crate::glue::waiting::slot::Stage;

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

    /// The call's context.
    pub fn ctx(&self) -> Ctx {
        self.ctx
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

    /// KEEPALIVE: the connection to tie to. A script has none of its own
    /// (nor have AOF loading and the replication link, which never run
    /// these commands anyway); MULTI/EXEC ties to the MULTI's connection.
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
        Ok(Some(ClientId(self.ctx.client_id())))
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

/// Blocks the calling client as waiter `id`, on `key`.
pub fn block_queued(ctx: Ctx, key: &RStr, id: WaiterId) -> LockResult<Blocked> {
    // Foreign writes to queued keys must reach the module from now on.
    events::watch_keyspace(ctx)?;
    Blocked::block(ctx, key, Stage::Queued(id))
}

/// Parks a blocked waiter at the tail of the queues of `keys`: its BLOCK
/// time runs from now. Returns the waiter's keys' queue names.
pub fn enqueue(ctx: Ctx, db: i32, keys: &[&[u8]], waiter: Waiter, block: Block) -> LockResult<()> {
    if waiter.replicas.is_some() {
        // Its grant will wait for acknowledgements.
        events::watch_event_loop(ctx)?;
    }
    let id = waiter.id;
    queues::push(db, keys, waiter);
    if let Some(ms) = block.timeout_ms {
        let due = ctx.now().saturating_add(ms);
        let job = scheduler::at(ctx, due, Job::Timeout(id));
        queues::set_timeout(id, job, due);
    }
    stats::BLOCKED.bump();
    Ok(())
}

/// A new waiter as the queues keep it.
pub fn waiter(
    ctx: Ctx,
    id: WaiterId,
    handle: Blocked,
    ask: queues::Ask,
    keepalive: bool,
    replicas: Option<Replicas>,
) -> Waiter {
    Waiter {
        id,
        client: handle.client(),
        handle,
        ask,
        keepalive,
        replicas,
        since: ctx.now(),
        since_us: crate::glue::runtime::ffi::monotonic_us(),
        timeout: None,
    }
}

/// Blocks the calling client until `replicas` acknowledged what it just
/// wrote; then (if what it was granted still holds) its tie change takes
/// effect and it gets its answer. The undo runs if they do not in time.
pub fn await_replicas(
    ctx: Ctx,
    key: &RStr,
    answer: Answer,
    replicas: Replicas,
) -> LockResult<Reply> {
    events::watch_event_loop(ctx)?;
    let handle = Blocked::block(ctx, key, Stage::Done)?;
    if let Err(too_few) = acks::wait(ctx, handle, answer, replicas) {
        // Replicas were counted before the write; they cannot have gone
        // since. Should it happen, undo the call.
        if let Some(undo) = too_few.undo {
            scheduler::soon(ctx, undo);
        }
        too_few.handle.fail(too_few.error);
    }
    Ok(Reply::Blocked)
}

/// The absolute end of a BLOCK, checked against overflow.
pub fn check_block(block: Option<Block>, now: Millis) -> LockResult<Option<Block>> {
    block.map(|b| b.check(now)).transpose()
}

/// The owner asking: as the client named it, or a fresh UUID for `*`.
pub enum Owner<'a> {
    Given(&'a RStr),
    Generated(OwnedStr),
}

impl Deref for Owner<'_> {
    type Target = RStr;
    fn deref(&self) -> &RStr {
        match self {
            Owner::Given(given) => given,
            Owner::Generated(uuid) => uuid,
        }
    }
}

impl<'a> Owner<'a> {
    /// As the request names it: given, or `*` (a fresh UUID).
    pub fn of(spec: crate::core::request::OwnerSpec<'a, RStr>) -> Owner<'a> {
        match spec {
            crate::core::request::OwnerSpec::Given(given) => Owner::Given(given),
            crate::core::request::OwnerSpec::Generate => {
                Owner::Generated(OwnedStr::new(&crate::core::owner::generate()))
            }
        }
    }

    /// The generated owner, which the reply names.
    pub fn generated(self) -> Option<OwnedStr> {
        match self {
            Owner::Generated(uuid) => Some(uuid),
            Owner::Given(_) => None,
        }
    }

    /// The owner a waiter keeps beyond this command, and whether the
    /// server generated it.
    pub fn keep(self) -> (OwnedStr, bool) {
        match self {
            Owner::Given(given) => (OwnedStr::new(given.as_ref()), false),
            Owner::Generated(uuid) => (uuid, true),
        }
    }
}
