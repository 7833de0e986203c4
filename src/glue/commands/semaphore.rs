//! SEMAPHORE.*: RSemaphore and RPermitExpirableSemaphore in the server.
//!
//! Each handler: parse → the core's rule over the real keys (`SemKey`:
//! every write replicated as its effect) → its own event → the follow-ups
//! every change gets (`waiting::semaphore::follow_up`: lapsed ids, the queue
//! served, `available` published, the next sweep armed) → the reply, or a
//! wait (BLOCK in the queue, REPLICAS for acknowledgements).

use super::call::{self, Call};
use crate::core::LockResult;
use crate::core::command::{Command, KeyAccess};
use crate::core::request::parse_key;
use crate::core::semaphore::{self, Grant, Renewed, Want, request};
use crate::glue::config;
use crate::glue::events;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::scheduler::{Job, Permits};
use crate::glue::stats;
use crate::glue::store::lifecycle::Event;
use crate::glue::store::metrics::{self, Family};
use crate::glue::store::{Mode, QueueKey, SemKey, derived};
use crate::glue::waiting::acks::Answer;
use crate::glue::waiting::delivery::Verify;
use crate::glue::waiting::queues::{self, Ask};
use crate::glue::waiting::semaphore::{self as sem_wait, answered, follow_up};
use crate::glue::waiting::slot::Wake;
use crate::glue::waiting::ties::{self, Granted as HowGranted, TieKind};

/// What every SEMAPHORE.* command does first: from now on, writes other
/// clients make to lease sets reach the sweeps; the key and its lease set
/// are opened (for writing unless `access` is a read); and the caller must
/// be allowed to touch the lease set (`always`: the call may create it;
/// otherwise only a set that exists is read or written).
fn open<'a>(ctx: Ctx, key: &'a RStr, access: KeyAccess, always: bool) -> LockResult<SemKey<'a>> {
    events::watch_lease_sets(ctx)?;
    let mode = match access {
        KeyAccess::Read => Mode::Read,
        _ => Mode::Write,
    };
    let sem = SemKey::open(ctx, key, mode);
    match sem.lease_set() {
        // The set as opened: its name built and its key looked up once.
        Some((name, exists)) => derived::check_lease_set_access(ctx, name, exists, access, always)?,
        None => derived::check_timeout_access(ctx, key, access, always)?,
    }
    Ok(sem)
}

fn is_queued(db: i32, key: &[u8]) -> bool {
    queues::any() && queues::len(db, key) > 0
}

/// `SEMAPHORE.CREATE key permits [PX ms | EX s]`
pub fn create(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_create(args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Update, false)?;
    let o = semaphore::create(&mut sem, req.permits, req.lease)?;
    follow_up(ctx, &mut sem, &o.expired, None, o.publish);
    Ok(Reply::Int(i64::from(o.reply)))
}

/// `SEMAPHORE.ADD key delta`: the available count after serving.
pub fn add(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_add(args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Update, false)?;
    let o = semaphore::add(&mut sem, req.delta)?;
    follow_up(ctx, &mut sem, &o.expired, None, o.publish);
    Ok(Reply::Int(semaphore::available(&mut sem)?))
}

/// `SEMAPHORE.ACQUIRE key [COUNT n] [BLOCK ms] [REPLICAS n ms]`
pub fn acquire(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_acquire(args)?;
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let key: &RStr = req.key;
    let block = call::check_block(req.block, ctx.now())?;
    let mut sem = open(ctx, key, KeyAccess::Update, false)?;
    let db = ctx.db();
    let o = semaphore::acquire(&mut sem, req.count, is_queued(db, key.as_ref()))?;
    let Some(count) = o.reply else {
        // What the call swept back may serve those queued before it.
        follow_up(ctx, &mut sem, &o.expired, None, o.publish);
        drop(sem);
        return wait_or_nil(
            &call,
            key,
            block,
            Ask::Semaphore(Want::Acquire { count: req.count }),
            false,
            replicas,
        );
    };
    stats::SEM_ACQUIRED.bump();
    metrics::immediate(Family::Semaphore);
    follow_up(
        ctx,
        &mut sem,
        &o.expired,
        Some(Event::SemaphoreAcquired),
        o.publish,
    );
    let Some(replicas) = replicas else {
        return Ok(Reply::Int(count));
    };
    // Answered once acknowledged; released if they do not in time.
    drop(sem);
    let qk = QueueKey::new(db, key.as_ref());
    let a = answered(
        &qk,
        Grant::Acquired { count },
        None,
        config::default_lease(),
    );
    let answer = Answer {
        wake: Wake::Reply(a.reply),
        verify: a.verify,
        tie: None,
        undo: Some(a.undo),
    };
    call::await_replicas(ctx, key, answer, replicas)
}

/// Queues the caller (BLOCK, where it can wait) or answers nil.
fn wait_or_nil(
    call: &Call,
    key: &RStr,
    block: Option<crate::core::request::Block>,
    ask: Ask,
    keepalive: bool,
    replicas: Option<crate::core::request::Replicas>,
) -> LockResult<Reply> {
    match block {
        // Inside MULTI/EXEC or a script the client cannot wait: answer now.
        Some(block) if call.can_block() => {
            let ctx = call.ctx();
            let id = queues::next_id();
            let handle = call::block_queued(ctx, key, id)?;
            let waiter = call::waiter(ctx, id, handle, ask, keepalive, replicas);
            call::enqueue(ctx, ctx.db(), &[key.as_ref()], waiter, block)?;
            Ok(Reply::Blocked)
        }
        _ => {
            stats::SEM_BUSY.bump();
            Ok(Reply::Nil)
        }
    }
}

/// `SEMAPHORE.RELEASE key [COUNT n]`: the available count after serving.
pub fn release(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_release(args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Update, false)?;
    let o = semaphore::release(&mut sem, req.count)?;
    stats::SEM_RELEASED.bump();
    follow_up(
        ctx,
        &mut sem,
        &o.expired,
        Some(Event::SemaphoreReleased),
        o.publish,
    );
    Ok(Reply::Int(semaphore::available(&mut sem)?))
}

/// `SEMAPHORE.LEASE key [COUNT n] [PX ms | EX s] [KEEPALIVE] [BLOCK ms]
/// [REPLICAS n ms]`: the permit ids.
pub fn lease(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_lease(args)?;
    let default_lease = config::default_lease();
    let claim = req.claim(default_lease);
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    let tie_lease = claim.lease.unwrap_or(default_lease);
    if tie_to.is_some() {
        config::check_keepalive_lease(tie_lease)?;
    }
    let key: &RStr = req.key;
    let block = call::check_block(req.block, ctx.now())?;
    let mut sem = open(ctx, key, KeyAccess::Update, true)?;
    let db = ctx.db();
    let o = semaphore::lease(&mut sem, &claim, is_queued(db, key.as_ref()))?;
    let Some(leased) = o.reply else {
        follow_up(ctx, &mut sem, &o.expired, None, o.publish);
        drop(sem);
        return wait_or_nil(
            &call,
            key,
            block,
            Ask::Semaphore(Want::Lease(claim)),
            tie_to.is_some(),
            replicas,
        );
    };
    stats::SEM_LEASED.bump();
    metrics::immediate(Family::Semaphore);
    crate::glue::waiting::semaphore::leased(ctx, db, key.as_ref(), &leased);
    follow_up(
        ctx,
        &mut sem,
        &o.expired,
        Some(Event::SemaphoreAcquired),
        o.publish,
    );
    drop(sem);
    let qk = QueueKey::new(db, key.as_ref());
    let a = answered(&qk, Grant::Leased(leased), tie_to, tie_lease);
    let Some(replicas) = replicas else {
        if let Some(tie) = a.tie {
            ties::apply(ctx, tie);
        }
        return Ok(a.reply);
    };
    // Answered (and tied) once acknowledged, if the ids are still leased
    // then; returned if they are not acknowledged in time.
    let answer = Answer {
        wake: Wake::Reply(a.reply),
        verify: a.verify,
        tie: a.tie,
        undo: Some(a.undo),
    };
    call::await_replicas(ctx, key, answer, replicas)
}

/// `SEMAPHORE.RETURN key id [id ...]`: how many went back (all or none).
pub fn return_permits(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_return(args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Update, false)?;
    let o = match semaphore::return_permits(&mut sem, &req.ids) {
        Ok(o) => o,
        Err(e) => {
            if e == crate::core::LockError::NotLeased {
                stats::SEM_NOT_LEASED.bump();
            }
            return Err(e);
        }
    };
    stats::SEM_RETURNED.bump();
    sem_wait::untie_ids(ctx.db(), req.key.as_ref(), &req.ids);
    follow_up(
        ctx,
        &mut sem,
        &o.expired,
        Some(Event::SemaphoreReleased),
        o.publish,
    );
    Ok(Reply::Int(o.reply))
}

/// `SEMAPHORE.RENEW key id [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]`
pub fn renew(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = request::parse_renew(args)?;
    let lease = req.lease_or(config::default_lease());
    let call = Call::new(ctx);
    let replicas = call.replicas(req.replicas)?;
    let tie_to = call.tie_to(req.keepalive)?;
    if tie_to.is_some() {
        config::check_keepalive_lease(lease)?;
    }
    let key: &RStr = req.key;
    let mut sem = open(ctx, key, KeyAccess::Update, false)?;
    let previous = match semaphore::renew(&mut sem, &req.id, lease)? {
        Renewed::NotLeased => return Ok(Reply::Int(0)),
        Renewed::Renewed { previous, .. } => previous,
    };
    stats::SEM_RENEWED.bump();
    // The earliest deadline may have moved.
    sem_wait::arm_sweep(ctx, &mut sem);
    drop(sem);
    let db = ctx.db();
    // KEEPALIVE ties the permit to this connection (from any other); its
    // absence unties it.
    let tie = ties::decide(
        db,
        key.as_ref(),
        &req.id,
        TieKind::Permit,
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
    let qk = QueueKey::new(db, key.as_ref());
    let answer = Answer {
        wake: Wake::Reply(Reply::Int(1)),
        verify: Some(Verify::Permits {
            key: qk.clone(),
            ids: vec![req.id],
        }),
        tie,
        undo: Some(Job::Permits(qk, Permits::Renewal(req.id, previous))),
    };
    call::await_replicas(ctx, key, answer, replicas)
}

/// `SEMAPHORE.INFO key` (read-only; on a replica `waiters` and `keepalive`
/// are 0: both are connection state on the primary).
pub fn info(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_key(Command::SemInfo, args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Read, false)?;
    let Some(info) = semaphore::info(&mut sem)? else {
        return Ok(Reply::Nil);
    };
    let db = ctx.db();
    let key = req.key.as_ref();
    let count = |n: usize| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let tied = sem_wait::tied_count(ctx, &mut sem);
    Ok(Reply::Map(vec![
        ("available", Reply::Int(info.available)),
        ("leased", count(info.leased)),
        ("waiters", count(queues::len(db, key))),
        ("keepalive", count(tied)),
        ("ttl", Reply::Int(info.ttl.unwrap_or(-1))),
    ]))
}

/// `SEMAPHORE.DRAIN key`: the available permits taken.
pub fn drain(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_key(Command::SemDrain, args)?;
    let mut sem = open(ctx, req.key, KeyAccess::Update, false)?;
    let o = semaphore::drain(&mut sem)?;
    follow_up(ctx, &mut sem, &o.expired, None, o.publish);
    Ok(Reply::Int(o.reply))
}
