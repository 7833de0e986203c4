//! `Blocked`: a client the module has blocked and must answer exactly once.
//!
//! The handle is owned: a grant or a failure consumes it (`grant`, `fail`),
//! dropping it answers nil, and when the server ends the block itself (the
//! client disconnected, `CLIENT UNBLOCK`, a cluster redirect, a role change)
//! the callback that learns of it `abandon`s it without answering. So
//! "unblocked exactly once" holds by construction: there is no way to answer
//! twice or to forget.
//!
//! Clients are blocked on their lock's key (`RedisModule_BlockClientOnKeys`),
//! never woken by it (a hash never signals a key as ready, and our reply
//! callback declines if anything else does): it is what makes the server
//! itself redirect a waiter with `MOVED` when the key's slot leaves the node,
//! and on Valkey on failover. Unblocking such a client makes the server call
//! the timeout callback at once, with the private data given at block time:
//! the `WakeSlot`, which says what to answer.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use crate::core::LockError;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr, raw};
use crate::glue::runtime::reply::Granted;
use crate::glue::store::QueueKey;
use crate::glue::store::ids::{AckId, WaiterId};

type BlockedClient = raw::RedisModuleBlockedClient;
type ReplyFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// What a blocked client is answered.
pub enum Wake {
    Nil,
    Granted(Granted),
    /// A renewal's `1`, once acknowledged.
    Int(i64),
    Failed(LockError),
}

/// Where a blocked client stands; read by the callbacks Redis makes.
pub enum Stage {
    /// In a queue.
    Queued(WaiterId),
    /// Granted, waiting for replica acknowledgements.
    Acking(AckId),
    /// To be answered with this (set just before unblocking).
    Answer(Wake),
    /// Answered, or ended by the server.
    Done,
}

/// The block-time private data: Redis keeps it with the blocked client and
/// hands it to every callback; `callbacks::freed` frees it.
pub struct WakeSlot {
    pub stage: RefCell<Stage>,
    /// Set with a grant: the lock and owner to take the hold back from if
    /// the reply never reaches the client.
    pub undo: RefCell<Option<(QueueKey, OwnedStr)>>,
}

/// The callbacks a blocked client is registered with.
pub struct Callbacks {
    pub reply: ReplyFn,
    pub timeout: ReplyFn,
    pub free: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void),
    pub disconnect: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut BlockedClient),
}

pub struct Blocked {
    bc: NonNull<BlockedClient>,
    /// Owned by Redis from `block` on (freed in the free callback, which
    /// runs only after the client was unblocked); valid while `self` lives.
    slot: NonNull<WakeSlot>,
}

impl Blocked {
    /// Blocks the client running `ctx` on `key`. The caller has checked that
    /// the client can block (not in MULTI/EXEC or a script).
    pub fn block(
        ctx: Ctx,
        key: &RStr,
        stage: Stage,
        callbacks: &Callbacks,
    ) -> Result<Blocked, LockError> {
        let slot = Box::into_raw(Box::new(WakeSlot {
            stage: RefCell::new(stage),
            undo: RefCell::new(None),
        }));
        let mut keys = [key.ptr()];
        let bc = unsafe {
            rm!(RedisModule_BlockClientOnKeys(
                ctx.0,
                Some(callbacks.reply),
                Some(callbacks.timeout),
                Some(callbacks.free),
                // No server timeout: BLOCK times are the scheduler's (Redis
                // checks blocked clients' timeouts only every 1/hz).
                0,
                keys.as_mut_ptr(),
                1,
                slot as *mut c_void
            ))
        };
        let (Some(bc), Some(slot)) = (NonNull::new(bc), NonNull::new(slot)) else {
            // SAFETY: Redis did not take the slot.
            drop(unsafe { Box::from_raw(slot) });
            return Err(LockError::Internal("cannot block the client".into()));
        };
        unsafe {
            rm!(RedisModule_SetDisconnectCallback(
                bc.as_ptr(),
                Some(callbacks.disconnect)
            ))
        };
        Ok(Blocked { bc, slot })
    }

    fn slot(&self) -> &WakeSlot {
        // SAFETY: see the field.
        unsafe { self.slot.as_ref() }
    }

    /// Moves the client on (queued → waiting for acknowledgements).
    pub fn set_stage(&self, stage: Stage) {
        *self.slot().stage.borrow_mut() = stage;
    }

    /// Answers with a grant; `undo` is what to take back if the answer never
    /// reaches the client.
    pub fn grant(self, granted: Granted, undo: (QueueKey, OwnedStr)) {
        *self.slot().undo.borrow_mut() = Some(undo);
        self.finish(Wake::Granted(granted));
    }

    pub fn answer_int(self, n: i64) {
        self.finish(Wake::Int(n));
    }

    pub fn fail(self, error: LockError) {
        self.finish(Wake::Failed(error));
    }

    /// The server ended the block itself (disconnect, CLIENT UNBLOCK, a
    /// redirect, a role change) and answered if an answer was due: forget
    /// the client without unblocking it again.
    pub fn abandon(self) {
        self.slot().stage.replace(Stage::Done);
        std::mem::forget(self);
    }

    fn finish(self, wake: Wake) {
        let this = std::mem::ManuallyDrop::new(self);
        this.unblock(wake);
    }

    fn unblock(&self, wake: Wake) {
        self.slot().stage.replace(Stage::Answer(wake));
        // Calls the timeout callback now (or, on servers that defer it,
        // before the client is next served), which sends the answer.
        unsafe {
            rm!(RedisModule_UnblockClient(
                self.bc.as_ptr(),
                std::ptr::null_mut()
            ))
        };
    }
}

impl Drop for Blocked {
    /// Nobody granted or refused the client: it gets nil, like a BLOCK that
    /// timed out.
    fn drop(&mut self) {
        self.unblock(Wake::Nil);
    }
}
