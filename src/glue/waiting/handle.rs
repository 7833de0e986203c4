//! `Blocked`: a client the module has blocked and must answer exactly once.
//!
//! The handle is owned: an answer consumes it (`answer`, `fail`), dropping
//! it answers nil, and when the server ends the block itself (the client
//! disconnected, `CLIENT UNBLOCK`, a cluster redirect, a role change) the
//! callback that learns of it `abandon`s it without answering. So
//! "unblocked exactly once" holds by construction.
//!
//! An answer is never sent from inside a command: it goes to the delivery
//! list (`delivery`), and a scheduler job sends it (re-checking a grant
//! against the key first). Redis 7.0 writes a blocked-on-keys client's
//! reply the moment the module unblocks it but keeps the client flagged
//! blocked until before-sleep; a `CLIENT UNBLOCK` later in the same
//! event-loop turn would then unblock it a second time (taking back a
//! grant it was already told of, or appending `-UNBLOCKED` to it). From a
//! timer, nothing runs between the unblock and before-sleep.

use std::cell::RefCell;

use super::delivery::{self, Pending, Verify};
use super::slot::{Stage, Wake, WakeSlot};
use super::ties;
use crate::core::LockError;
use crate::glue::runtime::blocked::BlockedClient;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::scheduler::Job;
use crate::glue::store::ids::ClientId;

pub struct Blocked {
    /// `None` once handed on or abandoned.
    client: Option<BlockedClient<WakeSlot>>,
}

impl Blocked {
    /// Blocks the client running `ctx` on `key`, in `stage`. The caller has
    /// checked that the client can block (not in MULTI/EXEC or a script).
    pub fn block(ctx: Ctx, key: &RStr, stage: Stage) -> Result<Blocked, LockError> {
        let slot = WakeSlot {
            stage: RefCell::new(stage),
            client: ClientId(ctx.client_id()),
        };
        BlockedClient::block_on_key(ctx, key, slot)
            .map(|client| Blocked {
                client: Some(client),
            })
            .ok_or_else(|| LockError::Internal("cannot block the client".into()))
    }

    fn slot(&self) -> Option<&WakeSlot> {
        self.client.as_ref().map(BlockedClient::data)
    }

    /// The blocked connection.
    pub fn client(&self) -> ClientId {
        self.slot().map_or(ClientId(0), |s| s.client)
    }

    /// Moves the client on (queued → waiting for acknowledgements...).
    pub fn set_stage(&self, stage: Stage) {
        if let Some(slot) = self.slot() {
            *slot.stage.borrow_mut() = stage;
        }
    }

    /// Hands the client to the delivery job with its answer: `wake`, or, if
    /// it is a grant (`grant`: what to re-check, and the refusal) that no
    /// longer stands when sent, the refusal; `tie` is applied only with
    /// `wake`; `undo` takes a grant back if the client never hears of it.
    pub fn deliver(
        mut self,
        wake: Wake,
        grant: Option<(Verify, Wake)>,
        tie: Option<ties::Change>,
        undo: Option<Job>,
    ) {
        if let Some(client) = self.client.take() {
            delivery::push(Pending::new(client, wake, grant, tie, undo));
        }
    }

    /// Fails the client.
    pub fn fail(self, error: LockError) {
        self.deliver(Wake::Failed(error), None, None, None);
    }

    /// Answers nil.
    pub fn nil(self) {
        self.deliver(Wake::Nil, None, None, None);
    }

    /// The server ended the block itself (disconnect, CLIENT UNBLOCK, a
    /// redirect, a role change) and answered if an answer was due: forget
    /// the client without unblocking it again.
    pub fn abandon(mut self) {
        if let Some(client) = self.client.take() {
            client.data().stage.replace(Stage::Done);
            client.forget();
        }
    }
}

impl Drop for Blocked {
    /// Nobody answered the client: it gets nil, like a BLOCK that timed out.
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            delivery::push(Pending::new(client, Wake::Nil, None, None, None));
        }
    }
}
