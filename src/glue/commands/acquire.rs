//! LOCK.ACQUIRE key owner [PX ms | EX s] [BLOCK ms]

use std::ops::Deref;

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
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let block = req.block.map(|b| b.check(lock.now())).transpose()?;
    let owner = match req.owner {
        OwnerSpec::Given(given) => Owner::Given(given),
        OwnerSpec::Generate => Owner::Generated(OwnedStr::new(&owner::generate())),
    };

    let queued = waiters::is_queued(ctx, req.key);
    match rules::acquire(&mut lock, &owner, lease, queued)? {
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
            Ok(match owner {
                Owner::Generated(uuid) => Reply::Owner(uuid),
                Owner::Given(_) => Reply::Int(holds),
            })
        }
        Acquired::Busy => {
            // Inside MULTI/EXEC or a script the client cannot wait: answer now,
            // as BLPOP does there.
            match block {
                Some(block) if !ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING) => {
                    let ttl = lock.ttl();
                    drop(lock);
                    // The waiter keeps its owner beyond this command.
                    let (owner, generated) = match owner {
                        Owner::Given(given) => (OwnedStr::new(given.as_ref()), false),
                        Owner::Generated(uuid) => (uuid, true),
                    };
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
