//! LOCK.ACQUIRE key owner [PX ms | EX s] [BLOCK ms] [KEEPALIVE] [TOKEN] [REPLICAS n ms]

use super::call::{self, Call, Owner};
use crate::core::command::KeyAccess;
use crate::core::request::{self, OwnerSpec};
use crate::core::rules::{self, Acquired, Claim};
use crate::core::store::LockStore;
use crate::core::{LockResult, owner};
use crate::glue::config;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::scheduler::Job;
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::metrics::{self, Family};
use crate::glue::store::{LockKey, Mode, QueueKey, derived};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::delivery::Verify;
use crate::glue::waiting::holds;
use crate::glue::waiting::lock;
use crate::glue::waiting::queues::{self, Ask, LockAsk};
use crate::glue::waiting::slot::Wake;
use crate::glue::waiting::ties::{self, Granted as HowGranted, TieKind};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_acquire(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    let key: &RStr = req.key;
    if req.token {
        derived::check_token_access(ctx, key, KeyAccess::Update)?;
    }
    let mut lock = LockKey::open(ctx, key, Mode::Write);
    let block = call::check_block(req.block, lock.now())?;
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
                lock::deadline_moved(ctx, db, &mut lock);
            }
            let deadline = lease.deadline_from(lock.now()).ok();
            let how = if holds == 1 {
                stats::ACQUIRED.bump();
                metrics::immediate(Family::Lock);
                holds::start(
                    ctx,
                    Family::Lock,
                    db,
                    key.as_ref(),
                    owner.as_ref(),
                    deadline,
                );
                lifecycle::fire(ctx, Event::LockAcquired, key);
                HowGranted::Fresh
            } else {
                stats::REENTERED.bump();
                holds::renewed(ctx, db, key.as_ref(), owner.as_ref(), deadline);
                HowGranted::ReEntry
            };
            let tie = ties::decide(
                db,
                key.as_ref(),
                owner.as_ref(),
                TieKind::Lock,
                how,
                tie_to,
                lease,
            );
            let Some(replicas) = replicas else {
                if let Some(change) = tie {
                    ties::apply(ctx, change);
                }
                return Ok(Reply::Granted(Granted {
                    holds,
                    generated: owner.generated(),
                    token,
                }));
            };
            // The reply, and any tie, once the replicas acknowledged the
            // grant and if it still holds then; if they do not in time, the
            // hold it added is taken back.
            drop(lock);
            let qk = QueueKey::new(db, key.as_ref());
            let verify = Verify::Lock {
                key: qk.clone(),
                owner: OwnedStr::new(owner.as_ref()),
            };
            let undo = Job::TakeBack(qk, OwnedStr::new(owner.as_ref()));
            let answer = Answer {
                wake: Wake::Reply(Reply::Granted(Granted {
                    holds,
                    generated: owner.generated(),
                    token,
                })),
                verify: Some(verify),
                tie,
                undo: Some(undo),
            };
            call::await_replicas(ctx, key, answer, replicas)
        }
        Acquired::Busy => match block {
            // Inside MULTI/EXEC or a script the client cannot wait: answer
            // now, as BLPOP does there.
            Some(block) if call.can_block() => {
                let deadline = lock.deadline();
                drop(lock);
                let (owner, generated) = match owner {
                    // The waiter keeps its owner beyond this command.
                    Owner::Given(given) => (OwnedStr::new(given.as_ref()), false),
                    Owner::Generated(uuid) => (uuid, true),
                };
                let id = queues::next_id();
                let handle = call::block_queued(ctx, key, id)?;
                let ask = Ask::Lock(LockAsk {
                    owner,
                    generated,
                    lease,
                    token: req.token,
                });
                let waiter = call::waiter(ctx, id, handle, ask, tie_to.is_some(), replicas);
                call::enqueue(ctx, db, &[key.as_ref()], waiter, block)?;
                lock::arm(ctx, db, key.as_ref(), deadline);
                Ok(Reply::Blocked)
            }
            _ => {
                stats::BUSY.bump();
                Ok(Reply::Nil)
            }
        },
    }
}
