//! LOCK.INFO key (read-only: served by replicas too)

use super::super::ffi::{Ctx, RStr};
use super::super::key::{LockKey, Mode};
use super::super::reply::Reply;
use super::super::waiters;
use crate::core::LockResult;
use crate::core::request::{self, Command};
use crate::core::rules;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_key(Command::Info, args)?;
    let mut lock = LockKey::open(ctx, req.key, Mode::Read);
    Ok(match rules::info(&mut lock)? {
        Some(holder) => Reply::Info {
            holder,
            waiters: waiters::count(ctx, req.key),
        },
        None => Reply::Nil,
    })
}
