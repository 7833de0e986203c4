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
//! undone (`handoff::undo`) and answered NOREPLICAS.
//!
//! Nothing is sent to replicas while clients are paused: the wait goes on
//! (its time runs), the GETACK it is owed goes out on the first turn after
//! the pause (as WAIT's does), and the undo of a call that timed out waits
//! for the pause to end.

use std::cell::RefCell;
use std::collections::HashMap;

use super::handle::{Blocked, Stage};
use super::ties;
use crate::core::LockError;
use crate::core::request::Replicas;
use crate::glue::runtime::ffi::{Ctx, OwnedStr};
use crate::glue::runtime::reply::Granted;
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::QueueKey;
use crate::glue::store::ids::{AckId, Counter};
use crate::glue::store::server;

/// What the call answers once acknowledged.
pub enum Answer {
    /// A grant, and what to take back if its reply never reaches the client.
    Granted(Granted, QueueKey, OwnedStr),
    /// LOCK.RENEW's 1.
    Int(i64),
}

struct Wait {
    handle: Blocked,
    answer: Answer,
    /// What the call does to the lock's tie, once acknowledged.
    tie: Option<ties::Change>,
    wanted: i64,
    /// The offset to be acknowledged; set before the server next sleeps.
    target: Option<i64>,
    acked: i64,
    timeout: JobId,
    /// The job that undoes the call: `TakeBack` (a fresh grant or a
    /// re-entry drops the hold it added) or `Restore` (a renewal puts the
    /// previous deadline back, or no expiry if it had none).
    undo: Option<Job>,
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
/// them. `id` must be the one its handle's stage names.
pub fn wait(
    ctx: Ctx,
    id: AckId,
    handle: Blocked,
    answer: Answer,
    tie: Option<ties::Change>,
    replicas: Replicas,
    undo: Option<Job>,
) -> Result<(), TooFew> {
    let online = server::online_replicas();
    if online < replicas.count {
        return Err(TooFew {
            handle,
            undo,
            error: LockError::NoReplicas {
                wanted: replicas.count,
                acked: online,
                waited: false,
            },
        });
    }
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
                tie,
                wanted: replicas.count,
                target: None,
                acked: 0,
                timeout,
                undo,
            },
        )
    });
    Ok(())
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
        undo: wait.undo,
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
/// their target, ask the replicas for their offsets, answer the calls
/// whose writes enough replicas acknowledged.
pub fn before_sleep(ctx: Ctx) {
    if with(|a| a.waits.is_empty()) {
        return;
    }
    let Some(repl) = server::replication(ctx) else {
        return;
    };
    let paused = server::writes_paused();
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
        // Not into the AOF (`A`): only replicas act on it.
        unsafe {
            rm!(RedisModule_Replicate(
                ctx.0,
                c"REPLCONF".as_ptr(),
                c"ccA".as_ptr(),
                c"GETACK".as_ptr(),
                c"*".as_ptr()
            ));
        }
    }
    for w in done {
        scheduler::cancel(w.timeout);
        if let Some(change) = w.tie {
            ties::apply(ctx, change);
        }
        match w.answer {
            Answer::Granted(g, qk, owner) => w.handle.grant(g, (qk, owner)),
            Answer::Int(n) => w.handle.answer_int(n),
        }
    }
}
