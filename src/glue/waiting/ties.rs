//! KEEPALIVE: locks tied to the connection that took them. While the
//! connection lives, the scheduler renews the lease every third of it (a
//! `Renew` job per tie); when it closes, the `Closed` job releases every
//! tied lock at once. Ties are connection state: never persisted or
//! replicated, gone after a restart or on a replica (the lease is the
//! safety net there).
//!
//! A tie names the owner it was made for: it only ever renews or releases
//! the lock while that owner holds it, so a stale tie (the lock was deleted
//! behind the module's back and taken by someone else) does nothing and is
//! dropped.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::{HashMap, HashSet, hash_set};

use crate::core::Lease;
use crate::glue::runtime::ffi::{Ctx, OwnedStr};
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::ids::ClientId;
use crate::glue::store::{KeyRef, QueueKey};

struct Tie {
    client: ClientId,
    owner: OwnedStr,
    lease: Lease,
    renew: JobId,
}

#[derive(Default)]
struct Ties {
    keys: HashMap<QueueKey, Tie>,
    clients: HashMap<ClientId, HashSet<QueueKey>>,
    /// Closed connections whose locks are being released, a few per job
    /// (their sets, consumed as they go: no copy of 100,000 keys up front).
    closing: HashMap<ClientId, hash_set::IntoIter<QueueKey>>,
}

/// Tied locks: every RELEASE, RENEW and re-entry asks whether its lock is
/// tied, and without KEEPALIVE none is. A static answers without a
/// thread-local lookup.
static TIED: AtomicUsize = AtomicUsize::new(0);

fn none_tied() -> bool {
    TIED.load(Ordering::Relaxed) == 0
}

/// Whether any lock is tied (callers skip even naming the key when not).
pub fn any() -> bool {
    !none_tied()
}

thread_local! {
    static TIES: RefCell<Ties> = RefCell::new(Ties::default());
}

fn with<R>(f: impl FnOnce(&mut Ties) -> R) -> R {
    TIES.with(|t| f(&mut t.borrow_mut()))
}

impl Ties {
    fn remove(&mut self, db: i32, key: &[u8]) -> Option<(QueueKey, Tie)> {
        let (qk, tie) = self.keys.remove_entry(&KeyRef { db, name: key })?;
        if let Some(set) = self.clients.get_mut(&tie.client) {
            set.remove(&qk);
            if set.is_empty() {
                self.clients.remove(&tie.client);
            }
        }
        TIED.fetch_sub(1, Ordering::Relaxed);
        Some((qk, tie))
    }
}

/// What a call does to a lock's tie. Applied at once, or, for a call that
/// waits for replica acknowledgements (REPLICAS), when it is answered: a call
/// that is undone (NOREPLICAS) changes no tie.
pub enum Change {
    /// KEEPALIVE: tie the lock to this connection (from any other).
    Tie(QueueKey, ClientId, OwnedStr, Lease),
    /// LOCK.RENEW without KEEPALIVE: a plain lease again. A fresh grant
    /// without KEEPALIVE also drops whatever tie was left at its key (a tied
    /// lock that vanished unseen: DEL, FLUSHALL, a lapsed lease).
    Untie(QueueKey),
    /// A re-entry without KEEPALIVE: the tie stays, renewed by the new lease.
    Retime(QueueKey, OwnedStr, Lease),
}

/// Applies a change (see `Change`).
pub fn apply(ctx: Ctx, change: Change) {
    match change {
        Change::Tie(qk, client, owner, lease) => tie(ctx, qk, client, owner, lease),
        Change::Untie(qk) => {
            untie(qk.db, &qk.name);
        }
        Change::Retime(qk, owner, lease) => retime(ctx, qk.db, &qk.name, owner.as_ref(), lease),
    }
}

/// Tied locks (INFO).
pub fn count() -> usize {
    TIED.load(Ordering::Relaxed)
}

/// Ties the lock at `qk`, held by `owner`, to `client` (moving any tie it
/// had to another connection), and schedules its first renewal.
pub fn tie(ctx: Ctx, qk: QueueKey, client: ClientId, owner: OwnedStr, lease: Lease) {
    untie(qk.db, &qk.name);
    let renew = scheduler::at(
        ctx,
        ctx.now().saturating_add(lease.renew_every()),
        Job::Renew(qk.clone()),
    );
    with(|t| {
        t.clients.entry(client).or_default().insert(qk.clone());
        t.keys.insert(
            qk,
            Tie {
                client,
                owner,
                lease,
                renew,
            },
        );
        TIED.fetch_add(1, Ordering::Relaxed);
    });
}

/// Unties the lock at `key` (LOCK.RENEW without KEEPALIVE, the lock freed).
pub fn untie(db: i32, key: &[u8]) -> bool {
    if none_tied() {
        return false;
    }
    let removed = with(|t| t.remove(db, key));
    match removed {
        Some((_, tie)) => {
            scheduler::cancel(tie.renew);
            true
        }
        None => false,
    }
}

/// The tied lock's lease was just set by its owner (a re-entry): renew by
/// the new lease from now on.
pub fn retime(ctx: Ctx, db: i32, key: &[u8], owner: &[u8], lease: Lease) {
    if none_tied() {
        return;
    }
    let old = with(|t| {
        let tie = t.keys.get_mut(&KeyRef { db, name: key })?;
        if tie.owner.as_ref() != owner {
            return None;
        }
        tie.lease = lease;
        Some(tie.renew)
    });
    if let Some(old) = old {
        scheduler::cancel(old);
        let qk = with(|t| {
            let (qk, _) = t.keys.get_key_value(&KeyRef { db, name: key })?;
            Some(qk.clone())
        });
        if let Some(qk) = qk {
            reschedule(ctx, qk);
        }
    }
}

/// Whether the lock at `key` is tied for `owner` (LOCK.INFO).
pub fn is_tied(db: i32, key: &[u8], owner: &[u8]) -> bool {
    if none_tied() {
        return false;
    }
    with(|t| {
        t.keys
            .get(&KeyRef { db, name: key })
            .is_some_and(|tie| tie.owner.as_ref() == owner)
    })
}

/// What a due renewal needs: the owner (a copy: the renewal calls into
/// Redis, where the table may not stay borrowed) and the lease.
pub fn renewal(qk: &QueueKey) -> Option<(OwnedStr, Lease)> {
    with(|t| {
        let tie = t.keys.get(qk)?;
        Some((OwnedStr::new(tie.owner.as_ref()), tie.lease))
    })
}

/// Schedules the next renewal of a tie, one interval from now.
pub fn reschedule(ctx: Ctx, qk: QueueKey) {
    let Some(lease) = with(|t| Some(t.keys.get(&qk)?.lease)) else {
        return;
    };
    let due = ctx.now().saturating_add(lease.renew_every());
    let job = scheduler::at(ctx, due, Job::Renew(qk.clone()));
    let stale = with(|t| {
        let tie = t.keys.get_mut(&qk)?;
        Some(std::mem::replace(&mut tie.renew, job))
    });
    if let Some(stale) = stale {
        scheduler::cancel(stale);
    }
}

/// Whether `client` has tied locks (a disconnect worth acting on).
pub fn has_client(client: ClientId) -> bool {
    !none_tied() && with(|t| t.clients.contains_key(&client))
}

/// Removes up to `max` ties of a closed connection: the locks to release,
/// each with the owner it was tied for, and whether more are left (a
/// connection may hold 100,000 ties: releasing them all in one go would
/// stall the server). Ties still waiting stay in place, renewed as before;
/// one moved meanwhile to another connection (RENEW KEEPALIVE) is skipped.
pub fn closed(client: ClientId, max: usize) -> (Vec<(QueueKey, OwnedStr)>, bool) {
    let (removed, more) = with(|t| {
        if !t.closing.contains_key(&client) {
            let keys = t.clients.remove(&client).unwrap_or_default();
            t.closing.insert(client, keys.into_iter());
        }
        let mut removed: Vec<(QueueKey, Tie)> = Vec::new();
        while removed.len() < max {
            let Some(qk) = t.closing.get_mut(&client).and_then(Iterator::next) else {
                break;
            };
            let still_ours = t.keys.get(&qk).is_some_and(|tie| tie.client == client);
            if still_ours {
                // The client's set was taken already; `remove` skips it.
                removed.extend(t.remove(qk.db, &qk.name));
            }
        }
        let more = t.closing.get(&client).is_some_and(|left| left.len() > 0);
        if !more {
            t.closing.remove(&client);
        }
        (removed, more)
    });
    let removed = removed
        .into_iter()
        .map(|(qk, tie)| {
            scheduler::cancel(tie.renew);
            (qk, tie.owner)
        })
        .collect();
    (removed, more)
}

/// Drops every tie (the node stopped being a primary).
pub fn clear() {
    let all = with(std::mem::take);
    TIED.store(0, Ordering::Relaxed);
    for (_, tie) in all.keys {
        scheduler::cancel(tie.renew);
    }
}
