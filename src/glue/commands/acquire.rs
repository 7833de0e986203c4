//! LOCK.ACQUIRE key owner [PX ms | EX s] [BLOCK ms]

use super::super::config;
use super::super::ffi::{Ctx, OwnedStr, RStr, raw};
use super::super::key::{LockKey, Mode};
use super::super::reply::Reply;
use super::super::{handoff, stats, waiters};
use crate::core::LockResult;
use crate::core::owner;
use crate::core::request::{self, OwnerSpec};
use crate::core::rules::{self, Acquired};
use crate::core::store::LockStore;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_acquire(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let block = req.block.map(|b| b.check(lock.now())).transpose()?;

    // `*`: a fresh UUID owns the lock and the reply names it.
    let generated = match req.owner {
        OwnerSpec::Given(_) => None,
        OwnerSpec::Generate => Some(OwnedStr::new(ctx.0, &owner::generate())),
    };
    let owner: &RStr = match (req.owner, &generated) {
        (OwnerSpec::Given(given), _) => given,
        (OwnerSpec::Generate, Some(uuid)) => uuid,
        (OwnerSpec::Generate, None) => unreachable!("generated above"),
    };

    let queued = waiters::is_queued(ctx, req.key);
    match rules::acquire(&mut lock, owner, lease, queued)? {
        Acquired::Granted { holds } => {
            if queued {
                // A re-entry may have shortened the lease waiters are timed by.
                handoff::arm_deadline(ctx, ctx.db(), req.key.as_ref(), lock.ttl());
            }
            if holds == 1 {
                stats::ACQUIRED.bump();
            } else {
                stats::REENTERED.bump();
            }
            Ok(match generated {
                Some(uuid) => Reply::Owner(uuid),
                None => Reply::Int(holds),
            })
        }
        Acquired::Busy => {
            // Inside MULTI/EXEC or a script the client cannot wait: answer now,
            // as BLPOP does there.
            match block {
                Some(block) if !ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING) => {
                    let ttl = lock.ttl();
                    drop(lock);
                    let generated = generated.is_some();
                    waiters::enqueue(ctx, req.key, owner, generated, lease, block, ttl)
                }
                _ => {
                    stats::BUSY.bump();
                    Ok(Reply::Nil)
                }
            }
        }
    }
}
