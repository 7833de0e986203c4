//! What a blocked client carries with it: the private data Redis keeps for
//! it and hands to every callback (`WakeSlot`), saying where the client
//! stands (`Stage`) and what it will be answered (`Wake`).

use std::cell::RefCell;

use crate::core::LockError;
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::Job;
use crate::glue::store::ids::{AckId, ClientId, PendingId, WaiterId};

/// What a blocked client is answered.
pub enum Wake {
    Nil,
    Reply(Reply),
    Failed(LockError),
}

/// Where a blocked client stands; read by the callbacks Redis makes.
pub enum Stage {
    /// In a queue.
    Queued(WaiterId),
    /// Granted, waiting for replica acknowledgements.
    Acking(AckId),
    /// An answer decided, waiting for the delivery job.
    Pending(PendingId),
    /// To be answered with this (set just before unblocking), and what to
    /// take back if the answer never reaches the client.
    Answer(Wake, Option<Job>),
    /// Answered with a grant: what to take back if the client turns out to
    /// have gone before the reply left.
    Answered(Option<Job>),
    /// Answered, or ended by the server.
    Done,
}

/// The block-time private data: Redis keeps it with the blocked client and
/// hands it to every callback (`callbacks`).
pub struct WakeSlot {
    pub stage: RefCell<Stage>,
    /// The blocked connection.
    pub client: ClientId,
}
