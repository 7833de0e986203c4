//! LOCK.MACQUIRE numkeys key [key ...] owner [PX ms | EX s] [BLOCK ms] [KEEPALIVE] [REPLICAS n ms]
//! LOCK.MRELEASE numkeys key [key ...] owner
//!
//! Each key is an ordinary LOCK.* lock; the core's `multi` rules take or
//! release them all at once or not at all. A MACQUIRE that must wait
//! stands in the queue of every key under one ticket of the global arrival
//! order, and is served from any of them (`waiting::lock::serve`) once it
//! heads them all and all are free.

use super::call::{self, Call};
use crate::core::multi::{self, check_same_slot, parse_macquire, parse_mrelease};
use crate::core::rules::{Claim, Released};
use crate::core::store::{LockStore, Shape};
use crate::core::{LockError, LockResult, Millis};
use crate::glue::config;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{LockKey, Mode, QueueKey, server};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::lock;
use crate::glue::waiting::queues::{self, Ask, MultiAsk};
use crate::glue::waiting::slot::Wake;
use crate::glue::waiting::ties;

pub fn acquire(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_macquire(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    if server::cluster() {
        check_same_slot(req.keys)?;
    }
    let db = ctx.db();
    let owner: &RStr = req.owner;
    let block = call::check_block(req.block, ctx.now())?;
    let mut locks: Vec<LockKey<'_>> = req
        .keys
        .iter()
        .map(|k| LockKey::open(ctx, k, Mode::Write))
        .collect();
    let queued: Vec<bool> = req
        .keys
        .iter()
        .map(|k| queues::len(db, k.as_ref()) > 0)
        .collect();
    match multi::acquire(&mut locks, &Claim::new(owner, lease), &queued)? {
        Some(counts) => {
            for ((lock, &holds), &queued) in locks.iter_mut().zip(&counts).zip(&queued) {
                if holds == 1 {
                    stats::ACQUIRED.bump();
                    crate::glue::store::metrics::immediate(
                        crate::glue::store::metrics::Family::Lock,
                    );
                    crate::glue::waiting::holds::start(
                        ctx,
                        crate::glue::store::metrics::Family::Lock,
                        db,
                        lock.name().as_ref(),
                        owner.as_ref(),
                        lease.deadline_from(ctx.now()).ok(),
                    );
                    lifecycle::fire(ctx, Event::LockAcquired, lock.name());
                } else {
                    stats::REENTERED.bump();
                }
                if queued {
                    // A re-entry may have shortened the lease waiters are timed by.
                    lock::deadline_moved(ctx, db, lock);
                }
            }
            drop(locks);
            let keys: Vec<QueueKey> = req
                .keys
                .iter()
                .map(|k| QueueKey::new(db, k.as_ref()))
                .collect();
            let answer = lock::multi_answer(db, &keys, owner.as_ref(), counts, tie_to, lease);
            match replicas {
                None => {
                    let Answer { wake, tie, .. } = answer;
                    if let Some(change) = tie {
                        ties::apply(ctx, change);
                    }
                    match wake {
                        Wake::Reply(reply) => Ok(reply),
                        _ => Err(LockError::Internal("a grant without a reply".into())),
                    }
                }
                // The reply, and the ties, once the replicas acknowledged
                // every key and if the owner still holds them all then; if
                // they do not in time, one hold of each key is taken back.
                Some(replicas) => call::await_replicas(ctx, &req.keys[0], answer, replicas),
            }
        }
        None => match block {
            // Inside MULTI/EXEC or a script the client cannot wait.
            Some(block) if call.can_block() => {
                let deadlines: Vec<Option<Millis>> = locks.iter().map(LockKey::deadline).collect();
                drop(locks);
                let id = queues::next_id();
                // Blocked on its first key: all share one slot, so the
                // server redirects it with the slot.
                let handle = call::block_queued(ctx, &req.keys[0], id)?;
                let ask = Ask::Multi(MultiAsk {
                    owner: OwnedStr::new(owner.as_ref()),
                    lease,
                });
                let waiter = call::waiter(ctx, id, handle, ask, tie_to.is_some(), replicas);
                let names: Vec<&[u8]> = req.keys.iter().map(AsRef::as_ref).collect();
                call::enqueue(ctx, db, &names, waiter, block)?;
                // Each key's queue is served at its holder's deadline.
                for (name, deadline) in names.iter().zip(deadlines) {
                    lock::arm(ctx, db, name, deadline);
                }
                Ok(Reply::Blocked)
            }
            _ => {
                stats::BUSY.bump();
                Ok(Reply::Nil)
            }
        },
    }
}

pub fn release(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_mrelease(args)?;
    if server::cluster() {
        check_same_slot(req.keys)?;
    }
    let owner: &RStr = req.owner;
    let mut locks: Vec<LockKey<'_>> = req
        .keys
        .iter()
        .map(|k| LockKey::open(ctx, k, Mode::Write))
        .collect();
    let released = multi::release(&mut locks, owner).inspect_err(|e| {
        if *e == LockError::NotOwner {
            stats::NOT_OWNER.bump();
        }
    })?;
    // Serving a freed key may open a multi-key waiter's other keys: no key
    // of this call stays open meanwhile.
    drop(locks);
    let freed: Vec<&RStr> = req
        .keys
        .iter()
        .zip(&released)
        .filter(|(_, r)| **r == Released::Freed)
        .map(|(k, _)| k)
        .collect();
    // Every ending event first, then the hand-offs.
    for key in &freed {
        stats::RELEASED.bump();
        crate::glue::waiting::holds::end(ctx.db(), key.as_ref(), owner.as_ref());
        lifecycle::fire(ctx, Event::LockReleased, key);
    }
    for key in freed {
        let mut lock = LockKey::open(ctx, key, Mode::Write);
        // Unless serving an earlier key handed this one on already (a
        // multi-key waiter took both): it is not free, nothing to publish.
        if lock.shape() == Shape::Missing {
            lock::lock_freed(ctx, &mut lock);
        }
    }
    Ok(Reply::Array(
        released
            .into_iter()
            .map(|r| match r {
                Released::Held { holds } => Reply::Int(holds),
                Released::Freed => Reply::Int(0),
            })
            .collect(),
    ))
}
