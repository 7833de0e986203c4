//! RWLOCK.RENEW key owner [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]

use super::super::call::{self, Call};
use crate::core::LockResult;
use crate::core::rwlock;
use crate::core::rwlock::request::parse_rw_renew;
use crate::glue::config;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::{Mode, RwKey};
use crate::glue::waiting::rwlock as waiting;
use crate::glue::waiting::ties::{self, Granted as HowGranted, TieKind};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_rw_renew(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    let key: &RStr = req.key;
    let owner: &[u8] = req.owner.as_ref();
    // Foreign changes to the lock it follows from now on must reach the module.
    events::watch_keyspace(ctx)?;
    let mut rw = RwKey::open(ctx, key, Mode::Write);
    waiting::overdue(ctx, &mut rw);
    let outcome = rwlock::renew(&mut rw, owner, lease)?;
    waiting::fire_expired(ctx, key, &outcome.swept);
    let swept = !outcome.swept.is_empty();
    // Every hold of the owner moved: so does the lock's next deadline.
    waiting::changed(ctx, &mut rw, swept, |_| None);
    drop(rw);
    let renewed = outcome.value;
    if !renewed.renewed {
        return Ok(Reply::Int(0));
    }
    // With KEEPALIVE the owner is tied to this connection (from any other);
    // without, its holds are plain leases again.
    let db = ctx.db();
    let tie = ties::decide(
        db,
        key.as_ref(),
        owner,
        TieKind::Rw,
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
    let answer = waiting::renew_answer(db, key.as_ref(), owner, renewed.undo, tie);
    call::await_replicas(ctx, key, answer, replicas)
}
