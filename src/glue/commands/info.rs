//! LOCK.INFO key (read-only: served by replicas too, where `waiters` and
//! `keepalive` are 0: both are connection state on the primary)

use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::core::rules;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::{LockKey, Mode};
use crate::glue::waiting::{queues, ties};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::Info, args)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Read);
    let Some(holder) = rules::info(&mut lock)? else {
        return Ok(Reply::Nil);
    };
    let db = ctx.db();
    let key = req.key.as_ref();
    Ok(Reply::Info {
        waiters: queues::len(db, key),
        keepalive: ties::is_tied(db, key, &holder.owner),
        holder,
    })
}
