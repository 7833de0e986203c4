//! LOCK.FORCERELEASE key (Redisson's forceUnlock)

use super::super::ffi::{Ctx, RStr};
use super::super::key::{LockKey, Mode};
use super::super::reply::Reply;
use super::super::{handoff, stats};
use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::core::rules;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::ForceRelease, args)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let removed = rules::force_release(&mut lock)?;
    if removed {
        stats::FORCE_RELEASED.bump();
        handoff::lock_freed(ctx, &mut lock);
    }
    Ok(Reply::Int(i64::from(removed)))
}
