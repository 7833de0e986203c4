//! LOCK.RELEASE key owner

use crate::core::request;
use crate::core::rules::{self, Released};
use crate::core::{LockError, LockResult};
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::stats;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{LockKey, Mode};
use crate::glue::waiting::{holds, lock};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_release(args)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    match rules::release(&mut lock, req.owner) {
        Ok(Released::Held { holds }) => Ok(Reply::Int(holds)),
        Ok(Released::Freed) => {
            stats::RELEASED.bump();
            holds::end(ctx.db(), req.key.as_ref(), req.owner.as_ref());
            lifecycle::fire(ctx, Event::LockReleased, req.key);
            lock::lock_freed(ctx, &mut lock);
            Ok(Reply::Int(0))
        }
        Err(e) => {
            if e == LockError::NotOwner {
                stats::NOT_OWNER.bump();
            }
            Err(e)
        }
    }
}
