//! REPLICAS n ms: calls whose reply waits until n replicas acknowledged the
//! replication offset that holds their writes.
//!
//! `RM_Call("WAIT")` cannot do it (the temporary client's write offset is 0,
//! and on 7.0 it can trip an assertion). Instead the client is blocked with
//! its grant in place; once per event-loop turn, before the server sleeps
//! (when this turn's writes have been propagated), every new wait takes the
//! current `master_repl_offset` as its target and one `REPLCONF GETACK *`
//! goes to the replicas, which answer within a round trip (WAIT does the
//! same). Later turns read the replicas' acknowledged offsets and answer
//! each call whose target n of them reached. A call whose time runs out is
//! undone (its undo job) and answered NOREPLICAS.
//!
//! Nothing is sent to replicas while clients are paused: the wait goes on
//! (its time runs), the GETACK it is owed goes out on the first turn after
//! the pause (as WAIT's does), and the undo of a call that timed out waits
//! for the pause to end.

use std::cell::RefCell;
use std::collections::HashMap;

use super::delivery::{self, Verify};
use super::handle::Blocked;
use super::slot::{Stage, Wake};
use super::ties;
use crate::core::LockError;
use crate::core::request::Replicas;
use crate::glue::runtime::ffi::{Arg, Ctx};
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::ids::{AckId, Counter};
use crate::glue::store::server;

/// What a call answers once acknowledged, and what comes with it.
pub struct Answer {
    pub wake: Wake,
    /// What it was granted, re-checked when the answer is sent.
    pub verify: Option<Verify>,
    /// Its tie change, applied only then.
    pub tie: Option<ties::Change>,
    /// What undoes the call: `TakeBack` (a fresh grant or a re-entry drops
    /// the hold it added) or `Restore` (a renewal puts the previous
    /// deadline back, or no expiry if it had none). Runs if the replicas do
    /// not acknowledge in time, or the client never hears the answer.
    pub undo: Option<Job>,
}

struct Wait {
    handle: Blocked,
    answer: Answer,
    wanted: i64,
    /// The offset to be acknowledged; set before the server next sleeps.
    target: Option<i64>,
    acked: i64,
    timeout: JobId,
}

#[derive(Default)]
struct Acks {
    ids: Counter,
    waits: HashMap<AckId, Wait>,
    /// A wait took its target while clients were paused, so no GETACK went
    /// out for it: send one as soon as the pause is over.
    ask_owed: bool,
}

thread_local! {
    static ACKS: RefCell<Acks> = RefCell::new(Acks::default());
}

fn with<R>(f: impl FnOnce(&mut Acks) -> R) -> R {
    ACKS.with(|a| f(&mut a.borrow_mut()))
}

pub fn next_id() -> AckId {
    with(|a| AckId(a.ids.next()))
}

/// Calls waiting (INFO, unload).
pub fn count() -> usize {
    with(|a| a.waits.len())
}

/// A call that cannot wait: fewer replicas online than it asks for.
pub struct TooFew {
    pub handle: Blocked,
    pub undo: Option<Job>,
    pub error: LockError,
}

/// Parks a blocked call (its writes made) until `replicas` acknowledge
/// them.
pub fn wait(ctx: Ctx, handle: Blocked, answer: Answer, replicas: Replicas) -> Result<(), TooFew> {
    let online = server::online_replicas();
    if online < replicas.count {
        return Err(TooFew {
            handle,
            undo: answer.undo,
            error: LockError::NoReplicas {
                wanted: replicas.count,
                acked: online,
                waited: false,
            },
        });
    }
    let id = next_id();
    handle.set_stage(Stage::Acking(id));
    let timeout = scheduler::at(
        ctx,
        ctx.now().saturating_add(replicas.timeout_ms),
        Job::AckTimeout(id),
    );
    with(|a| {
        a.waits.insert(
            id,
            Wait {
                handle,
                answer,
                wanted: replicas.count,
                target: None,
                acked: 0,
                timeout,
            },
        )
    });
    Ok(())
}

/// Answers a grant made to a blocked client (a waiter served): through
/// delivery, re-checked when sent; with REPLICAS, once acknowledged. If
/// fewer replicas are online than it asks for, the grant goes back (`undo`,
/// as soon as the event loop comes round) and the client gets NOREPLICAS.
pub fn grant(ctx: Ctx, handle: Blocked, answer: Answer, replicas: Option<Replicas>) {
    match replicas.filter(|r| !r.is_none()) {
        None => {
            let Answer {
                wake,
                verify,
                tie,
                undo,
            } = answer;
            handle.deliver(wake, verify.map(|v| (v, Wake::Nil)), tie, undo);
        }
        Some(replicas) => {
            if let Err(too_few) = wait(ctx, handle, answer, replicas) {
                if let Some(undo) = too_few.undo {
                    scheduler::soon(ctx, undo);
                }
                too_few.handle.fail(too_few.error);
            }
        }
    }
}

/// A call leaves without its acknowledgements (time ran out, the client
/// went away, the node stopped being a primary): its handle, what to undo,
/// and the error it gets.
pub struct Left {
    pub handle: Blocked,
    pub undo: Option<Job>,
    pub error: LockError,
}

pub fn leave(id: AckId) -> Option<Left> {
    let wait = with(|a| a.waits.remove(&id))?;
    scheduler::cancel(wait.timeout);
    Some(Left {
        handle: wait.handle,
        undo: wait.answer.undo,
        error: LockError::NoReplicas {
            wanted: wait.wanted,
            acked: wait.acked,
            waited: true,
        },
    })
}

/// Every waiting call (the node stopped being a primary).
pub fn drain() -> Vec<Left> {
    let ids: Vec<AckId> = with(|a| a.waits.keys().copied().collect());
    ids.into_iter().filter_map(leave).collect()
}

/// Once per event-loop turn, before the server sleeps: give new waits
/// their target, ask the replicas for their offsets, and answer the calls
/// whose writes enough replicas acknowledged (through `delivery`, which
/// re-checks what they were granted). They are sent from here, not from a
/// job: a timer made now would wait for the poll the server has already
/// timed (up to 1/hz). On Redis 7.0 this hook runs right before the server
/// finishes unblocking clients, so nothing can come between.
pub fn before_sleep(ctx: Ctx) {
    if with(|a| a.waits.is_empty()) {
        return;
    }
    let Some(repl) = server::replication(ctx) else {
        return;
    };
    let paused = server::writes_paused(ctx);
    let mut ask = false;
    let done: Vec<Wait> = with(|a| {
        let mut done = Vec::new();
        let ids: Vec<AckId> = a.waits.keys().copied().collect();
        for id in ids {
            let Some(w) = a.waits.get_mut(&id) else {
                continue;
            };
            let target = *w.target.get_or_insert_with(|| {
                ask = true;
                repl.offset
            });
            w.acked = repl.acked.iter().filter(|&&o| o >= target).count() as i64;
            if w.acked >= w.wanted {
                done.extend(a.waits.remove(&id));
            }
        }
        done
    });
    let ask = with(|a| {
        let owed = a.ask_owed || ask;
        a.ask_owed = owed && paused;
        owed && !paused
    });
    if ask {
        // Not into the AOF: only replicas act on it.
        ctx.replicate_to_replicas(c"REPLCONF", &[Arg::Word(c"GETACK"), Arg::Word(c"*")]);
    }
    for w in done {
        scheduler::cancel(w.timeout);
        let Answer {
            wake,
            verify,
            tie,
            undo,
        } = w.answer;
        let refusal = Wake::Failed(LockError::NoReplicasLost);
        w.handle
            .deliver(wake, verify.map(|v| (v, refusal)), tie, undo);
    }
    delivery::flush(ctx);
}
