//! LOCK.FORCERELEASE key (Redisson's forceUnlock)

use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::core::rules;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{LockKey, Mode};
use crate::glue::waiting::{holds, lock};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::ForceRelease, args)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let removed = rules::force_release(&mut lock)?;
    if let Some(owner) = &removed {
        stats::FORCE_RELEASED.bump();
        holds::end(ctx.db(), req.key.as_ref(), owner);
        lifecycle::fire(ctx, Event::LockForced, req.key);
        lock::lock_freed(ctx, &mut lock);
    }
    Ok(Reply::Int(i64::from(removed.is_some())))
}
