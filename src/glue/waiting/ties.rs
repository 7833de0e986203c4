//! KEEPALIVE: what a connection holds, tied to it. While the connection
//! lives, the scheduler renews each tie every third of its lease (a `Renew`
//! job per tie); when it closes, the `Closed` job releases everything tied
//! to it. Ties are connection state: never persisted or replicated, gone
//! after a restart or on a replica (the lease is the safety net there).
//!
//! A tie names its key and its holder (the lock's owner; later a read-write
//! owner or a leased permit's id) and only ever acts for that holder: a
//! renewal or a release finds the holder gone (the lock was deleted behind
//! the module's back and taken by someone else) and does nothing but drop
//! the tie. Every change names the holder it is for (`Change`), so no call
//! can untie someone else's tie.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::{HashMap, HashSet};

use crate::core::Lease;
use crate::glue::runtime::ffi::Ctx;
use crate::glue::scheduler::{self, Job, JobId};
use crate::glue::store::ids::ClientId;
use crate::glue::store::{KeyRef, QueueKey};

pub use crate::glue::store::Holder;
pub use crate::glue::store::ids::TieKind;

struct Tie {
    client: ClientId,
    kind: TieKind,
    lease: Lease,
    renew: JobId,
}

type TieRef = (QueueKey, Holder);

#[derive(Default)]
struct Ties {
    keys: HashMap<QueueKey, HashMap<Holder, Tie>>,
    clients: HashMap<ClientId, HashSet<TieRef>>,
    /// Closed connections whose ties are being released, a few per job
    /// (their sets, consumed as they go: no copy of 100,000 keys up front).
    closing: HashMap<ClientId, hashbrown::hash_set::IntoIter<TieRef>>,
}

/// Ties in all: every RELEASE, RENEW and re-entry asks whether its key is
/// tied, and without KEEPALIVE none is. A static answers without a
/// thread-local lookup.
static TIED: AtomicUsize = AtomicUsize::new(0);

/// Whether anything is tied (callers skip even naming the key when not).
pub fn any() -> bool {
    TIED.load(Ordering::Relaxed) != 0
}

thread_local! {
    static TIES: RefCell<Ties> = RefCell::new(Ties::default());
}

fn with<R>(f: impl FnOnce(&mut Ties) -> R) -> R {
    TIES.with(|t| f(&mut t.borrow_mut()))
}

impl Ties {
    fn remove(&mut self, key: &QueueKey, holder: &[u8]) -> Option<(TieRef, Tie)> {
        let at = self.keys.get_mut(key)?;
        let (holder, tie) = at.remove_entry(holder)?;
        if at.is_empty() {
            self.keys.remove(key);
        }
        let tie_ref = (key.clone(), holder);
        if let Some(set) = self.clients.get_mut(&tie.client) {
            set.remove(&tie_ref);
            if set.is_empty() {
                self.clients.remove(&tie.client);
            }
        }
        TIED.fetch_sub(1, Ordering::Relaxed);
        Some((tie_ref, tie))
    }

    fn holders_at(&self, key: &QueueKey) -> Vec<Holder> {
        self.keys
            .get(key)
            .map(|at| at.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// How a call came to hold what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granted {
    /// A fresh grant (ACQUIRE, or a hand-off to a waiter).
    Fresh,
    /// A re-entry by the holder.
    ReEntry,
    /// A renewal (RENEW).
    Renewal,
}

/// What a call does to the ties at a key. Decided once (`decide`), applied
/// at once, or, for a call that waits for replica acknowledgements or a
/// waiter's delivery, when it is answered — and only if what it was granted
/// still holds then (`delivery`): an undone call changes no tie.
pub enum Change {
    /// KEEPALIVE: tie `holder`'s hold to `client` (from any other).
    Tie {
        key: QueueKey,
        holder: Holder,
        client: ClientId,
        lease: Lease,
        kind: TieKind,
    },
    /// RENEW without KEEPALIVE: `holder`'s hold is a plain lease again.
    Untie { key: QueueKey, holder: Holder },
    /// A fresh plain grant of a lock: any tie left at the key was a lock
    /// that vanished unseen (DEL, FLUSHALL, a lapsed lease).
    Clear { key: QueueKey },
    /// A re-entry without KEEPALIVE: `holder`'s tie (if any) stays,
    /// renewed by the new lease.
    Retime {
        key: QueueKey,
        holder: Holder,
        lease: Lease,
    },
    /// Several changes, in order (a LEASE ties each of its permits;
    /// LOCK.MACQUIRE changes one per key).
    Many(Vec<Change>),
}

/// The tie change of a call on `key` in `db` by `holder`: with KEEPALIVE
/// (`tie_to`), a tie to that connection; without, per how it holds. `None`
/// when there is nothing to do (no KEEPALIVE and nothing tied anywhere):
/// the hot path allocates nothing.
pub fn decide(
    db: i32,
    key: &[u8],
    holder: &[u8],
    kind: TieKind,
    granted: Granted,
    tie_to: Option<ClientId>,
    lease: Lease,
) -> Option<Change> {
    if tie_to.is_none() && !any() {
        return None;
    }
    let key = QueueKey::new(db, key);
    let holder: Holder = Rc::from(holder);
    Some(match (tie_to, granted) {
        (Some(client), _) => Change::Tie {
            key,
            holder,
            client,
            lease,
            kind,
        },
        // A lock has one holder: any tie left at its key is stale. Other
        // primitives have several holders (an RW lock's owners): only this
        // holder's own stale tie goes.
        (None, Granted::Fresh) if kind == TieKind::Lock => Change::Clear { key },
        (None, Granted::Fresh) => Change::Untie { key, holder },
        (None, Granted::ReEntry) => Change::Retime { key, holder, lease },
        (None, Granted::Renewal) => Change::Untie { key, holder },
    })
}

/// Applies a change (see `Change`).
pub fn apply(ctx: Ctx, change: Change) {
    match change {
        Change::Tie {
            key,
            holder,
            client,
            lease,
            kind,
        } => tie(ctx, key, holder, client, lease, kind),
        Change::Untie { key, holder } => {
            untie(&key, &holder);
        }
        Change::Clear { key } => clear_key(&key),
        Change::Retime { key, holder, lease } => retime(ctx, key, holder, lease),
        Change::Many(changes) => {
            for change in changes {
                apply(ctx, change);
            }
        }
    }
}

/// Ties in all (INFO).
pub fn count() -> usize {
    TIED.load(Ordering::Relaxed)
}

/// Ties `holder`'s hold at `key` to `client` (moving it from any other
/// connection), and schedules its first renewal.
fn tie(ctx: Ctx, key: QueueKey, holder: Holder, client: ClientId, lease: Lease, kind: TieKind) {
    untie(&key, &holder);
    let renew = scheduler::at(
        ctx,
        ctx.now().saturating_add(lease.renew_every()),
        Job::Renew(key.clone(), holder.clone(), kind),
    );
    with(|t| {
        t.clients
            .entry(client)
            .or_default()
            .insert((key.clone(), holder.clone()));
        t.keys.entry(key).or_default().insert(
            holder,
            Tie {
                client,
                kind,
                lease,
                renew,
            },
        );
        TIED.fetch_add(1, Ordering::Relaxed);
    });
}

/// Unties `holder`'s hold at `key`; true if it was tied.
pub fn untie(key: &QueueKey, holder: &[u8]) -> bool {
    if !any() {
        return false;
    }
    match with(|t| t.remove(key, holder)) {
        Some((_, tie)) => {
            scheduler::cancel(tie.renew);
            true
        }
        None => false,
    }
}

/// Drops every tie at `key` (a lock that was freed, or vanished).
pub fn clear_key(key: &QueueKey) {
    if !any() {
        return;
    }
    for holder in with(|t| t.holders_at(key)) {
        untie(key, &holder);
    }
}

/// Drops every tie at the lock named by `db`/`key` (borrowed: the freed
/// path of RELEASE, which must not allocate when nothing is tied).
pub fn clear(db: i32, key: &[u8]) {
    if !any() {
        return;
    }
    let qk = with(|t| {
        t.keys
            .get_key_value(&KeyRef { db, name: key })
            .map(|(qk, _)| qk.clone())
    });
    if let Some(qk) = qk {
        clear_key(&qk);
    }
}

/// `holder`'s hold was just given a new lease by its holder (a re-entry):
/// its tie, if any, renews by the new lease from now on.
fn retime(ctx: Ctx, key: QueueKey, holder: Holder, lease: Lease) {
    if !any() {
        return;
    }
    let found = with(|t| {
        let tie = t.keys.get_mut(&key)?.get_mut(&holder)?;
        tie.lease = lease;
        Some(())
    });
    if found.is_some() {
        reschedule(ctx, key, holder);
    }
}

/// Whether `holder`'s hold at `key` is tied (LOCK.INFO).
pub fn is_tied(db: i32, key: &[u8], holder: &[u8]) -> bool {
    if !any() {
        return false;
    }
    with(|t| {
        t.keys
            .get(&KeyRef { db, name: key })
            .is_some_and(|at| at.contains_key(holder))
    })
}

/// The holders tied at `key` (SEMAPHORE.INFO's `keepalive`).
pub fn holders_at(db: i32, key: &[u8]) -> Vec<Holder> {
    if !any() {
        return Vec::new();
    }
    with(|t| {
        t.keys
            .get(&KeyRef { db, name: key })
            .map(|at| at.keys().cloned().collect())
            .unwrap_or_default()
    })
}

/// What a due renewal needs: the tie's kind and lease.
pub fn renewal(key: &QueueKey, holder: &[u8]) -> Option<(TieKind, Lease)> {
    with(|t| {
        let tie = t.keys.get(key)?.get(holder)?;
        Some((tie.kind, tie.lease))
    })
}

/// Schedules the next renewal of a tie, one interval from now.
pub fn reschedule(ctx: Ctx, key: QueueKey, holder: Holder) {
    let Some((kind, lease)) = renewal(&key, &holder) else {
        return;
    };
    let due = ctx.now().saturating_add(lease.renew_every());
    let job = scheduler::at(ctx, due, Job::Renew(key.clone(), holder.clone(), kind));
    let stale = with(|t| {
        let tie = t.keys.get_mut(&key)?.get_mut(&holder)?;
        Some(std::mem::replace(&mut tie.renew, job))
    });
    match stale {
        Some(stale) => {
            scheduler::cancel(stale);
        }
        None => {
            scheduler::cancel(job);
        }
    }
}

/// Whether `client` has ties (a disconnect worth acting on).
pub fn has_client(client: ClientId) -> bool {
    any() && with(|t| t.clients.contains_key(&client))
}

/// A tie of a closed connection, released.
pub struct Released {
    pub key: QueueKey,
    pub holder: Holder,
    pub kind: TieKind,
}

/// Removes up to `max` ties of a closed connection: what to release, and
/// whether more are left (a connection may hold 100,000 ties: releasing
/// them all in one go would stall the server). Ties still waiting stay in
/// place, renewed as before; one moved meanwhile to another connection
/// (RENEW KEEPALIVE) is skipped.
pub fn closed(client: ClientId, max: usize) -> (Vec<Released>, bool) {
    let (removed, more) = with(|t| {
        if !t.closing.contains_key(&client) {
            let refs = t.clients.remove(&client).unwrap_or_default();
            t.closing.insert(client, refs.into_iter());
        }
        let mut removed: Vec<(TieRef, Tie)> = Vec::new();
        while removed.len() < max {
            let Some((key, holder)) = t.closing.get_mut(&client).and_then(Iterator::next) else {
                break;
            };
            let still_ours = t
                .keys
                .get(&key)
                .and_then(|at| at.get(&holder))
                .is_some_and(|tie| tie.client == client);
            if still_ours {
                // The client's set was taken already; `remove` skips it.
                removed.extend(t.remove(&key, &holder));
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
        .map(|((key, holder), tie)| {
            scheduler::cancel(tie.renew);
            Released {
                key,
                holder,
                kind: tie.kind,
            }
        })
        .collect();
    (removed, more)
}

/// Drops every tie (the node stopped being a primary).
pub fn drain() {
    let all = with(std::mem::take);
    TIED.store(0, Ordering::Relaxed);
    for (_, at) in all.keys {
        for (_, tie) in at {
            scheduler::cancel(tie.renew);
        }
    }
}
