//! LOCK.RENEW key owner [PX ms | EX s]

use super::super::config;
use super::super::ffi::{Ctx, RStr};
use super::super::key::{LockKey, Mode};
use super::super::reply::Reply;
use super::super::{handoff, stats, waiters};
use crate::core::LockResult;
use crate::core::request;
use crate::core::rules;
use crate::core::store::LockStore;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_renew(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let renewed = rules::renew(&mut lock, req.owner, lease)?;
    if renewed {
        stats::RENEWED.bump();
        if waiters::is_queued(ctx, req.key) {
            // A shorter lease moves the hand-off to waiters earlier.
            handoff::arm_deadline(ctx, ctx.db(), req.key.as_ref(), lock.ttl());
        }
    }
    Ok(Reply::Int(i64::from(renewed)))
}
