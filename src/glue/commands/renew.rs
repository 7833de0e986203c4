//! LOCK.RENEW key owner [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]

use super::call::{self, Call};
use crate::core::LockResult;
use crate::core::request;
use crate::core::rules;
use crate::core::store::LockStore;
use crate::glue::config;
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::Job;
use crate::glue::stats;
use crate::glue::store::{LockKey, Mode, QueueKey};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::delivery::Verify;
use crate::glue::waiting::slot::Wake;
use crate::glue::waiting::ties::{self, Granted as HowGranted, TieKind};
use crate::glue::waiting::{holds, lock};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_renew(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    let key: &RStr = req.key;
    let mut lock = LockKey::open(ctx, key, Mode::Write);
    // What an unacknowledged renewal puts back (`Some(None)`: no expiry):
    // the absolute deadline, read before the renewal replaces it.
    let previous = replicas.map(|_| lock.deadline());
    if !rules::renew(&mut lock, req.owner, lease)? {
        return Ok(Reply::Int(0));
    }
    stats::RENEWED.bump();
    let db = ctx.db();
    holds::renewed(
        ctx,
        db,
        key.as_ref(),
        req.owner.as_ref(),
        lease.deadline_from(LockStore::now(&lock)).ok(),
    );
    // A shorter lease moves the hand-off to waiters earlier.
    lock::deadline_moved(ctx, db, &mut lock);
    // With KEEPALIVE the lock is tied to this connection (from any other);
    // without, it is a plain lease again.
    let tie = ties::decide(
        db,
        key.as_ref(),
        req.owner.as_ref(),
        TieKind::Lock,
        HowGranted::Renewal,
        tie_to,
        lease,
    );
    let Some(replicas) = replicas else {
        if let Some(change) = tie {
            ties::apply(ctx, change);
        }
        return Ok(Reply::Int(1));
    };
    // Acknowledged (and still held) first: an undone renewal changes no tie.
    drop(lock);
    let qk = QueueKey::new(db, key.as_ref());
    let owner = || OwnedStr::new(req.owner.as_ref());
    let answer = Answer {
        wake: Wake::Reply(Reply::Int(1)),
        verify: Some(Verify::Lock {
            key: qk.clone(),
            owner: owner(),
        }),
        tie,
        undo: previous.map(|deadline| Job::Restore(qk, owner(), deadline)),
    };
    call::await_replicas(ctx, key, answer, replicas)
}
