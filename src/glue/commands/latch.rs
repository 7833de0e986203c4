//! LATCH.*: RCountDownLatch in the server. The count is a string at the
//! key (`LatchKey`: writes replicated as their effects); LATCH.AWAIT ...
//! BLOCK waits in the key's queue and every waiter is answered when the
//! latch opens, whatever opens it (`waiting::latch`).

use super::call::{self, Call};
use crate::core::LockResult;
use crate::core::command::Command;
use crate::core::latch::{self, CountedDown, request};
use crate::core::request::parse_key;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::stats;
use crate::glue::store::{LatchKey, Mode};
use crate::glue::waiting::latch as latch_wait;
use crate::glue::waiting::queues::{self, Ask};

/// `LATCH.CREATE key count`: 1 if set (`1` published), 0 if a string is
/// there already.
pub fn create(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_create(args)?;
    let mut l = LatchKey::open(ctx, req.key, Mode::Write);
    // Waiters still queued at a latch found open were owed their answer
    // (the key went earlier in this event-loop turn, its `Serve` job not
    // run yet): they get it before the latch closes again.
    if queues::any() && queues::len(ctx.db(), req.key.as_ref()) > 0 {
        latch_wait::serve(ctx, &mut l);
    }
    let set = latch::create(&mut l, req.count)?;
    if set {
        latch_wait::publish(ctx, &l, latch::NEW_COUNT_MESSAGE);
    }
    Ok(Reply::Int(i64::from(set)))
}

/// `LATCH.COUNTDOWN key`: the count left; at 0 the key is deleted, `0`
/// published and every waiter answered.
pub fn count_down(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_key(Command::LatchCountDown, args)?;
    let mut l = LatchKey::open(ctx, req.key, Mode::Write);
    let counted = latch::count_down(&mut l)?;
    if counted != CountedDown::Missing {
        stats::LATCH_COUNTED_DOWN.bump();
    }
    if counted == CountedDown::Opened {
        latch_wait::opened(ctx, &mut l);
    }
    Ok(Reply::Int(counted.reply()))
}

/// `LATCH.AWAIT key [BLOCK ms]`: 1 when open; else nil, or with BLOCK a
/// wait in the key's queue until it opens (nil at the timeout). Read-only,
/// so it is served by replicas too, BLOCK included (answered when the
/// primary's writes, or the key's deadline, open the latch there).
pub fn await_open(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_await(args)?;
    let call = Call::new(ctx);
    let block = call::check_block(req.block, ctx.now())?;
    let mut l = LatchKey::open(ctx, req.key, Mode::Read);
    if latch::is_open(&mut l)? {
        crate::glue::store::metrics::immediate(crate::glue::store::metrics::Family::Latch);
        return Ok(Reply::Int(1));
    }
    match block {
        // Inside MULTI/EXEC or a script the client cannot wait: answer now.
        Some(block) if call.can_block() => {
            let db = ctx.db();
            let key = req.key;
            let id = queues::next_id();
            let handle = call::block_queued(ctx, key, id)?;
            let waiter = call::waiter(ctx, id, handle, Ask::Latch, false, None);
            call::enqueue(ctx, db, &[key.as_ref()], waiter, block)?;
            // The key's expiry opens it: answered at its deadline.
            latch_wait::arm(ctx, db, key.as_ref(), &mut l);
            Ok(Reply::Blocked)
        }
        _ => Ok(Reply::Nil),
    }
}

/// `LATCH.COUNT key`: the count, 0 when absent. Read-only.
pub fn count(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_key(Command::LatchCount, args)?;
    let mut l = LatchKey::open(ctx, req.key, Mode::Read);
    Ok(Reply::Int(latch::count(&mut l)?))
}
