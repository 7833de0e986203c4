//! RWLOCK.ACQUIRE key owner READ|WRITE [PX ms | EX s] [BLOCK ms] [KEEPALIVE] [TOKEN] [REPLICAS n ms]

use super::super::call::{self, Call, Owner};
use crate::core::LockResult;
use crate::core::command::KeyAccess;
use crate::core::rwlock::request::parse_rw_acquire;
use crate::core::rwlock::{self, Queued, RwAcquired, RwClaim, RwMode};
use crate::glue::config;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::{Granted, Reply};
use crate::glue::store::lifecycle::{self, Event};
use crate::glue::store::{Mode, RwKey, derived};
use crate::glue::waiting::queues::{self, Ask, RwAsk};
use crate::glue::waiting::rwlock as waiting;
use crate::glue::waiting::ties::{self, Granted as HowGranted, TieKind};

/// Who waits at `key`, as a newcomer must respect it.
fn queued(db: i32, key: &[u8]) -> Queued {
    if queues::len(db, key) == 0 {
        return Queued::NONE;
    }
    Queued {
        any: true,
        write: queues::any_asking(
            db,
            key,
            |ask| matches!(ask, Ask::Rw(a) if a.mode == RwMode::Write),
        ),
    }
}

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_rw_acquire(args)?;
    let lease = req.lease.unwrap_or_else(config::default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    let key: &RStr = req.key;
    if req.token {
        derived::check_token_access(ctx, key, KeyAccess::Update)?;
    }
    let owner = Owner::of(req.owner);
    if req.mode == RwMode::Read {
        derived::check_rw_hold_access(ctx, key, owner.as_ref())?;
    }
    // Foreign changes to RW locks (Redisson scripts, their read holds'
    // timeout keys lapsing) must reach the module from now on.
    events::watch_keyspace(ctx)?;
    let mut rw = RwKey::open(ctx, key, Mode::Write);
    let block = call::check_block(req.block, ctx.now())?;
    let db = ctx.db();
    let claim = RwClaim {
        owner: owner.as_ref(),
        mode: req.mode,
        lease,
        token: req.token,
    };
    waiting::overdue(ctx, &mut rw);
    let mut outcome = rwlock::acquire(&mut rw, &claim, queued(db, key.as_ref()))?;
    waiting::fire_expired(ctx, key, &outcome.swept);
    let swept = !outcome.swept.is_empty();
    if swept && outcome.value == RwAcquired::Busy && queues::len(db, key.as_ref()) > 0 {
        // Holds had lapsed unnoticed: the waiters come first, then this
        // call, as if it had arrived just after.
        waiting::serve(ctx, &mut rw);
        outcome = rwlock::acquire(&mut rw, &claim, queued(db, key.as_ref()))?;
    }
    match outcome.value {
        RwAcquired::Granted {
            holds,
            token,
            fresh,
        } => {
            if fresh {
                crate::glue::store::metrics::immediate(crate::glue::store::metrics::Family::RwLock);
                waiting::hold_started(ctx, db, key.as_ref(), owner.as_ref(), claim.lease);
                lifecycle::fire(ctx, Event::RwAcquired, key);
            }
            let how = match fresh {
                true => HowGranted::Fresh,
                false => HowGranted::ReEntry,
            };
            let tie = ties::decide(
                db,
                key.as_ref(),
                owner.as_ref(),
                TieKind::Rw,
                how,
                tie_to,
                lease,
            );
            waiting::changed(ctx, &mut rw, swept, |_| None);
            drop(rw);
            let owner_bytes = owner.as_ref().to_vec();
            let granted = Reply::Granted(Granted {
                holds,
                generated: owner.generated(),
                token,
            });
            let Some(replicas) = replicas else {
                if let Some(change) = tie {
                    ties::apply(ctx, change);
                }
                return Ok(granted);
            };
            // The reply, and any tie, once the replicas acknowledged the
            // grant and if the owner still holds that mode then; if they do
            // not in time, the hold it added is taken back.
            let answer =
                waiting::grant_answer(db, key.as_ref(), &owner_bytes, req.mode, granted, tie);
            call::await_replicas(ctx, key, answer, replicas)
        }
        RwAcquired::Busy => match block {
            // Inside MULTI/EXEC or a script the client cannot wait.
            Some(block) if call.can_block() => {
                let (owner, generated) = owner.keep();
                let id = queues::next_id();
                let handle = call::block_queued(ctx, key, id)?;
                let ask = Ask::Rw(RwAsk {
                    owner,
                    generated,
                    mode: req.mode,
                    lease,
                    token: req.token,
                });
                let waiter = call::waiter(ctx, id, handle, ask, tie_to.is_some(), replicas);
                call::enqueue(ctx, db, &[key.as_ref()], waiter, block)?;
                // The queue is served at the lock's next deadline.
                waiting::changed(ctx, &mut rw, false, |_| None);
                Ok(Reply::Blocked)
            }
            _ => {
                // Follow the lock (its deadline, who ends then).
                waiting::changed(ctx, &mut rw, false, |_| None);
                Ok(Reply::Nil)
            }
        },
    }
}
