//! LOCK.WAITERS key: the key's queue in order, whatever the primitive. One
//! array of exactly five elements per waiter: client id, owner (nil when
//! the server will generate it or the primitive has none), what it waits
//! for (`lock`, `read`, `write`, `acquire <n>`, `lease <n>`, `await`), ms
//! waited, ms left before its BLOCK timeout (-1: forever). Read-only: the
//! queue is connection state (on a replica only LATCH.AWAIT ... BLOCK
//! waiters queue).

use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::waiting::queues;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::Waiters, args)?;
    let now = ctx.now();
    let shown = queues::show(ctx.db(), req.key.as_ref());
    Ok(Reply::Array(
        shown
            .into_iter()
            .map(|w| {
                Reply::Array(vec![
                    Reply::Int(i64::try_from(w.client.0).unwrap_or(i64::MAX)),
                    w.owner.map_or(Reply::Nil, Reply::Bulk),
                    Reply::Bulk(w.wants.into_bytes()),
                    Reply::Int(now.saturating_sub(w.since).max(0)),
                    Reply::Int(w.timeout_at.map_or(-1, |at| at.saturating_sub(now).max(0))),
                ])
            })
            .collect(),
    ))
}
