//! LOCK.RENEW key owner [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]

use super::call::{self, Call};
use crate::core::LockResult;
use crate::core::request;
use crate::core::rules;
use crate::core::store::LockStore;
use crate::glue::config;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::Job;
use crate::glue::stats;
use crate::glue::store::{LockKey, Mode, QueueKey};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::{handoff, queues, ties};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_renew(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    let key: &RStr = req.key;
    let mut lock = LockKey::open(ctx, key, Mode::Write);
    // What an unacknowledged renewal puts back (`Some(None)`: no expiry).
    let previous = match replicas {
        Some(_) => Some(lock.ttl().map(|ttl| lock.now().saturating_add(ttl))),
        None => None,
    };
    if !rules::renew(&mut lock, req.owner, lease)? {
        return Ok(Reply::Int(0));
    }
    stats::RENEWED.bump();
    let db = ctx.db();
    if queues::any() && queues::len(db, key.as_ref()) > 0 {
        // A shorter lease moves the hand-off to waiters earlier.
        handoff::arm(ctx, db, key.as_ref(), lock.ttl());
    }
    // With KEEPALIVE the lock is tied to this connection (from any other);
    // without, it is a plain lease again.
    let Some(replicas) = replicas else {
        match tie_to {
            Some(client) => {
                let qk = QueueKey::new(db, key.as_ref());
                ties::tie(ctx, qk, client, OwnedStr::new(req.owner.as_ref()), lease);
            }
            None if ties::any() => {
                ties::untie(db, key.as_ref());
            }
            None => {}
        }
        return Ok(Reply::Int(1));
    };
    // Acknowledged first: an undone renewal changes no tie either.
    drop(lock);
    let qk = QueueKey::new(db, key.as_ref());
    let owner = || OwnedStr::new(req.owner.as_ref());
    let tie = match tie_to {
        Some(client) => ties::Change::Tie(qk.clone(), client, owner(), lease),
        None => ties::Change::Untie(qk.clone()),
    };
    let undo = previous.map(|deadline| Job::Restore(qk, owner(), deadline));
    call::await_replicas(ctx, key, Answer::Int(1), tie, replicas, undo)
}
