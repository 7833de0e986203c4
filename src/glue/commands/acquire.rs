//! LOCK.ACQUIRE key owner [PX ms | EX s] [BLOCK ms] [KEEPALIVE] [TOKEN] [REPLICAS n ms]

use std::ops::Deref;

use super::call::{self, Call};
use crate::core::request::{self, OwnerSpec};
use crate::core::rules::{self, Acquired, Claim};
use crate::core::store::LockStore;
use crate::core::{Lease, LockResult, owner};
use crate::glue::config;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::scheduler::Job;
use crate::glue::stats;
use crate::glue::store::ids::ClientId;
use crate::glue::store::{LockKey, Mode, QueueKey};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::queues::{self, Waiter};
use crate::glue::waiting::{handoff, ties};

/// The owner asking: as the client named it, or a fresh UUID for `*`.
enum Owner<'a> {
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

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_acquire(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    let key: &RStr = req.key;
    let mut lock = LockKey::open(ctx, key, Mode::Write);
    let block = req.block.map(|b| b.check(lock.now())).transpose()?;
    let owner = match req.owner {
        OwnerSpec::Given(given) => Owner::Given(given),
        OwnerSpec::Generate => Owner::Generated(OwnedStr::new(&owner::generate())),
    };
    let db = ctx.db();
    let queued = queues::any() && queues::len(db, key.as_ref()) > 0;
    let claim = Claim {
        owner: &*owner,
        lease,
        token: req.token,
    };
    match rules::acquire(&mut lock, &claim, queued)? {
        Acquired::Granted { holds, token } => {
            if queued {
                // A re-entry may have shortened the lease waiters are timed by.
                handoff::arm(ctx, db, key.as_ref(), lock.ttl());
            }
            if holds == 1 {
                stats::ACQUIRED.bump();
            } else {
                stats::REENTERED.bump();
            }
            let Some(replicas) = replicas else {
                tie_now(ctx, db, key, holds, tie_to, &owner, lease);
                let generated = match owner {
                    Owner::Generated(uuid) => Some(uuid),
                    Owner::Given(_) => None,
                };
                return Ok(Reply::Granted(Granted {
                    holds,
                    generated,
                    token,
                }));
            };
            // The reply, and any tie, once the replicas acknowledged the
            // grant; if they do not in time, the hold it added is taken back.
            drop(lock);
            let qk = QueueKey::new(db, key.as_ref());
            let copy = || OwnedStr::new(owner.as_ref());
            let tie = match tie_to {
                Some(client) => ties::Change::Tie(qk.clone(), client, copy(), lease),
                None if holds > 1 => ties::Change::Retime(qk.clone(), copy(), lease),
                None => ties::Change::Untie(qk.clone()),
            };
            let undo = Job::TakeBack(qk.clone(), copy());
            let answer_owner = copy();
            let generated = match owner {
                Owner::Generated(uuid) => Some(uuid),
                Owner::Given(_) => None,
            };
            let granted = Granted {
                holds,
                generated,
                token,
            };
            let answer = Answer::Granted(granted, qk, answer_owner);
            call::await_replicas(ctx, key, answer, tie, replicas, Some(undo))
        }
        Acquired::Busy => match block {
            // Inside MULTI/EXEC or a script the client cannot wait: answer
            // now, as BLPOP does there.
            Some(block) if call.can_block() => {
                let ttl = lock.ttl();
                drop(lock);
                let (owner, generated) = match owner {
                    // The waiter keeps its owner beyond this command.
                    Owner::Given(given) => (OwnedStr::new(given.as_ref()), false),
                    Owner::Generated(uuid) => (uuid, true),
                };
                let id = queues::next_id();
                let handle = call::block_queued(ctx, key, id)?;
                let waiter = Waiter {
                    id,
                    handle,
                    owner,
                    generated,
                    lease,
                    token: req.token,
                    tie_to,
                    replicas,
                    timeout: None,
                };
                call::enqueue(ctx, db, key, waiter, block, ttl)?;
                Ok(Reply::Blocked)
            }
            _ => {
                stats::BUSY.bump();
                Ok(Reply::Nil)
            }
        },
    }
}

/// A grant's effect on the lock's tie, at once (no REPLICAS): tied to this
/// connection with KEEPALIVE; a re-entry without it keeps the tie at the new
/// lease; a fresh plain grant drops any tie left at the key by a lock that
/// vanished unseen (DEL, FLUSHALL, a lapsed lease). Without KEEPALIVE and
/// with nothing tied anywhere, this costs nothing.
fn tie_now(
    ctx: Ctx,
    db: i32,
    key: &RStr,
    holds: i64,
    tie_to: Option<ClientId>,
    owner: &RStr,
    lease: Lease,
) {
    match tie_to {
        Some(client) => {
            let qk = QueueKey::new(db, key.as_ref());
            ties::tie(ctx, qk, client, OwnedStr::new(owner.as_ref()), lease);
        }
        _ if !ties::any() => {}
        None if holds > 1 => ties::retime(ctx, db, key.as_ref(), owner.as_ref(), lease),
        None => {
            ties::untie(db, key.as_ref());
        }
    }
}
