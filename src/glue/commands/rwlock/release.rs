//! RWLOCK.RELEASE key owner READ|WRITE

use crate::core::LockResult;
use crate::core::rwlock;
use crate::core::rwlock::request::parse_rw_release;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{Mode, QueueKey, RwKey};
use crate::glue::waiting::rwlock as waiting;
use crate::glue::waiting::ties;

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_rw_release(args)?;
    let key: &RStr = req.key;
    let owner: &[u8] = req.owner.as_ref();
    // Foreign changes to the lock it follows from now on must reach the module.
    events::watch_keyspace(ctx)?;
    let mut rw = RwKey::open(ctx, key, Mode::Write);
    waiting::overdue(ctx, &mut rw);
    let outcome = rwlock::release(&mut rw, owner, req.mode)?;
    waiting::fire_expired(ctx, key, &outcome.swept);
    let released = outcome.value;
    if released.owner_done {
        waiting::hold_ended(ctx.db(), key.as_ref(), owner);
        lifecycle::fire(ctx, Event::RwReleased, key);
        // The tie was the owner's: it holds nothing here any more.
        if ties::any() {
            ties::untie(&QueueKey::new(ctx.db(), key.as_ref()), owner);
        }
    }
    // Whatever was released, a head may be grantable now (a downgrade's
    // write release leaves read mode: READ heads go in).
    waiting::changed(ctx, &mut rw, true, |handed_on| released.message(handed_on));
    Ok(Reply::Int(released.holds))
}
