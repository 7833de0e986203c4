//! LOCK.INFO key (read-only: served by replicas too, where `waiters` and
//! `keepalive` are 0: both are connection state on the primary; it changes
//! nothing in the keyspace, not even the token counter's encoding)

use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::core::rules;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::{LockKey, Mode, derived};
use crate::glue::waiting::{queues, ties};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::Info, args)?;
    derived::check_existing_token_read(ctx, req.key)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Read);
    let Some(holder) = rules::info(&mut lock)? else {
        return Ok(Reply::Nil);
    };
    let db = ctx.db();
    let key = req.key.as_ref();
    let waiters = queues::len(db, key);
    let keepalive = ties::is_tied(db, key, &holder.owner);
    // New fields are only ever appended.
    Ok(Reply::Map(vec![
        ("owner", Reply::Bulk(holder.owner)),
        ("holds", Reply::Int(holder.holds)),
        ("ttl", Reply::Int(holder.ttl.unwrap_or(-1))),
        (
            "waiters",
            Reply::Int(i64::try_from(waiters).unwrap_or(i64::MAX)),
        ),
        ("keepalive", Reply::Int(i64::from(keepalive))),
        ("token", Reply::Int(holder.token)),
    ]))
}
