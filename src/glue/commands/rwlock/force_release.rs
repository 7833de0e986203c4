//! RWLOCK.FORCERELEASE key (Redisson's forceUnlock, for both modes)

use crate::core::LockResult;
use crate::core::command::Command;
use crate::core::rwlock;
use crate::core::rwlock::request::parse_rw_key;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{Mode, RwKey};
use crate::glue::waiting::rwlock as waiting;
use crate::glue::waiting::ties;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_rw_key(Command::RwForceRelease, args)?;
    let key: &RStr = req.key;
    // Foreign changes to the lock it follows from now on must reach the module.
    events::watch_keyspace(ctx)?;
    let mut rw = RwKey::open(ctx, key, Mode::Write);
    waiting::overdue(ctx, &mut rw);
    let outcome = rwlock::force_release(&mut rw)?;
    waiting::fire_expired(ctx, key, &outcome.swept);
    let forced = outcome.value;
    for owner in &forced.owners {
        waiting::hold_ended(ctx.db(), key.as_ref(), owner);
        lifecycle::fire(ctx, Event::RwForced, key);
    }
    if forced.removed() {
        // Every owner's tie goes with its holds.
        ties::clear(ctx.db(), key.as_ref());
    }
    waiting::changed(ctx, &mut rw, true, |handed_on| forced.message(handed_on));
    Ok(Reply::Int(i64::from(forced.removed())))
}
