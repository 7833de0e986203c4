//! LOCK.RENEW key owner [PX ms | EX s]

use super::super::config;
use super::super::ffi::{Ctx, RStr};
use super::super::key::{LockKey, Mode};
use super::super::reply::Reply;
use super::super::stats;
use crate::core::LockResult;
use crate::core::request;
use crate::core::rules;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_renew(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let mut lock = LockKey::open(ctx, req.key, Mode::Write);
    let renewed = rules::renew(&mut lock, req.owner, lease)?;
    if renewed {
        stats::RENEWED.bump();
    }
    Ok(Reply::Int(i64::from(renewed)))
}
