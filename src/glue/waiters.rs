//! Clients waiting with BLOCK (issue 3: not built yet).

use super::ffi::{Ctx, RStr};
use super::reply::Reply;
use crate::core::request::Block;
use crate::core::{Lease, LockResult};

pub fn is_queued(_ctx: Ctx, _key: &RStr) -> bool {
    false
}

pub fn count(_ctx: Ctx, _key: &RStr) -> usize {
    0
}

pub fn enqueue(
    _ctx: Ctx,
    _key: &RStr,
    _owner: &RStr,
    _generated: bool,
    _lease: Lease,
    _block: Block,
) -> LockResult<Reply> {
    Ok(Reply::Nil)
}
