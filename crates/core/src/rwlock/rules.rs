//! The RW lock's rules: one function per command (and per thing the glue
//! does on its own: sweeping at a deadline, a tied connection closing, an
//! undo for REPLICAS). Each reads the lock (`state::load`), validates
//! everything, decides on the live holds, then writes the difference: an
//! error always means nothing changed.

use super::state::{self, Deadline, Live, Stored};
use super::store::RwLockStore;
use super::{MAX_READ_HOLDS, RwMode, check_owner};
use crate::channel::{RW_READ_UNLOCK_MESSAGE, RW_WRITE_UNLOCK_MESSAGE};
use crate::error::{LockError, LockResult};
use crate::lease::{Lease, Millis};
use crate::rules::next_token;

/// What one owner asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwClaim<'a> {
    pub owner: &'a [u8],
    pub mode: RwMode,
    pub lease: Lease,
    /// Issue a fencing token with the grant (WRITE only).
    pub token: bool,
}

/// Who waits in the key's queue, as a newcomer's ACQUIRE must respect it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Queued {
    /// Anyone is queued: a free lock is theirs, not a newcomer's.
    pub any: bool,
    /// A WRITE waiter is queued: a read-mode lock takes no new readers.
    pub write: bool,
}

impl Queued {
    /// No one is queued (and what `serve` passes for the head).
    pub const NONE: Queued = Queued {
        any: false,
        write: false,
    };
}

/// What a successful call found lapsed and cleaned up before doing its
/// own work (the lazy sweep): one `rwlock.expired` event per owner in
/// `expired`, in this order, before any event of the call itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Owners whose every hold had lapsed (their fields are gone now).
    pub expired: Vec<Vec<u8>>,
    /// The lock was stored but held by no one live any more: it was free
    /// before this call (serve the queue if the call did not take it).
    pub freed: bool,
}

impl Swept {
    fn between(stored: &Stored, live: &Live) -> Swept {
        Swept {
            expired: stored
                .readers
                .iter()
                .filter(|r| live.reads_of(&r.owner) == 0 && live.writes_of(&r.owner) == 0)
                .map(|r| r.owner.clone())
                .collect(),
            freed: stored.exists && live.is_free(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.expired.is_empty() && !self.freed
    }
}

/// A rule's answer, with what its sweep found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwOutcome<T> {
    pub value: T,
    pub swept: Swept,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwAcquired {
    /// Taken or re-entered: the owner's holds of the claimed mode after the
    /// call, the token issued (WRITE with TOKEN), and whether the owner held
    /// nothing here before (`rwlock.acquired`).
    Granted {
        holds: i64,
        token: Option<i64>,
        fresh: bool,
    },
    /// Not grantable now (reply nil, or queue with BLOCK).
    Busy,
}

/// The outcome of a release (RELEASE, a tied connection closing, an undo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwReleased {
    /// The owner's holds of the released mode left (the reply).
    pub holds: i64,
    /// The owner holds nothing here any more (`rwlock.released` /
    /// `rwlock.closed`).
    pub owner_done: bool,
    /// The lock is free: serve the queue.
    pub freed: bool,
    /// Write mode ended (the last write hold went).
    pub write_ended: bool,
}

impl RwReleased {
    /// The message to publish on `redisson_rwlock:{key}`, given whether the
    /// queue was then served (`handed_on`: a waiter was granted): `1` when
    /// write mode ended (always, if read holds remain after a downgrade, so
    /// Redisson readers wake; if the lock was freed, unless handed on); `0`
    /// when a read release freed the lock and no one was handed it.
    pub fn message(&self, handed_on: bool) -> Option<&'static [u8]> {
        match (self.write_ended, self.freed) {
            (true, false) => Some(RW_WRITE_UNLOCK_MESSAGE),
            (true, true) if !handed_on => Some(RW_WRITE_UNLOCK_MESSAGE),
            (false, true) if !handed_on => Some(RW_READ_UNLOCK_MESSAGE),
            _ => None,
        }
    }
}

/// How a renewal can be undone (REPLICAS timed out): the owner's deadlines
/// before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewUndo {
    /// Each read hold's deadline, hold 1 first (`None` inside: no expiry).
    pub reads: Vec<Deadline>,
    /// The write hold's deadline, if the owner was the writer.
    pub write: Option<Deadline>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewed {
    /// The owner holds the lock in either mode: every hold of it now ends
    /// at the new deadline (reply 1); else nothing changed (reply 0).
    pub renewed: bool,
    pub undo: RenewUndo,
}

/// FORCERELEASE's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forced {
    /// Every owner that held the lock (`rwlock.forced` each); empty: there
    /// was no lock (reply 0).
    pub owners: Vec<Vec<u8>>,
}

impl Forced {
    pub fn removed(&self) -> bool {
        !self.owners.is_empty()
    }

    /// `1` if a lock was removed and no waiter was handed it.
    pub fn message(&self, handed_on: bool) -> Option<&'static [u8]> {
        (self.removed() && !handed_on).then_some(RW_WRITE_UNLOCK_MESSAGE)
    }
}

/// One owner's live holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OwnerHolds {
    pub reads: i64,
    pub writes: i64,
}

impl OwnerHolds {
    pub fn any(self) -> bool {
        self.reads > 0 || self.writes > 0
    }
}

/// RWLOCK.INFO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwInfo {
    pub mode: RwMode,
    /// The writer (without `:write`).
    pub writer: Option<Vec<u8>>,
    pub write_holds: i64,
    /// Distinct reader owners.
    pub readers: i64,
    /// Their read holds in all.
    pub read_holds: i64,
    /// Milliseconds left on the hash; `None`: no expiry.
    pub ttl: Option<Millis>,
    /// Every owner with a live hold (the writer first): owner, read holds,
    /// write holds (for the `keepalive` count of tied owners).
    pub owners: Vec<(Vec<u8>, i64, i64)>,
}

/// Loads the lock for a writing call: owner checked, every stored reader's
/// timeout keys in the key's slot.
fn load_for_write<S: RwLockStore>(
    store: &mut S,
    owner: Option<&[u8]>,
) -> LockResult<(Stored, Live, Swept)> {
    if let Some(owner) = owner {
        check_owner(owner)?;
    }
    let stored = state::load(store, true)?;
    let live = Live::of(&stored);
    let swept = Swept::between(&stored, &live);
    Ok((stored, live, swept))
}

/// RWLOCK.ACQUIRE without waiting. READ is granted to a re-entry or a
/// downgrade (the owner is the writer) whatever is queued, else when the
/// lock is free and no one is queued, or in read mode when no WRITE waiter
/// is queued. WRITE is granted to a re-entry, else when the lock is free
/// and no one is queued; `NOUPGRADE` when the owner holds READ but not
/// WRITE. `Busy` writes nothing but the sweep.
pub fn acquire<S: RwLockStore>(
    store: &mut S,
    claim: &RwClaim<'_>,
    queued: Queued,
) -> LockResult<RwOutcome<RwAcquired>> {
    let owner = claim.owner;
    if claim.token && claim.mode == RwMode::Read {
        return Err(LockError::Syntax("TOKEN is allowed with WRITE only"));
    }
    let deadline = claim.lease.deadline_from(store.now())?;
    let (stored, mut live, swept) = load_for_write(store, Some(owner))?;
    if claim.mode == RwMode::Read {
        store.check_hold_slot(owner)?;
    }
    let reads = live.reads_of(owner);
    let writes = live.writes_of(owner);
    let grantable = match claim.mode {
        RwMode::Read if reads > 0 || writes > 0 => true,
        RwMode::Write if writes > 0 => true,
        RwMode::Write if reads > 0 => return Err(LockError::NoUpgrade),
        _ => match live.mode() {
            None => !queued.any,
            Some(RwMode::Read) => claim.mode == RwMode::Read && !queued.write,
            Some(RwMode::Write) => false,
        },
    };
    if !grantable {
        state::commit(store, &stored, &live);
        return Ok(RwOutcome {
            value: RwAcquired::Busy,
            swept,
        });
    }
    let holds = match claim.mode {
        RwMode::Read => {
            if live.read_hold_count() >= MAX_READ_HOLDS {
                return Err(LockError::ReadHoldLimit);
            }
            live.read_holds_mut(owner).push(Some(deadline));
            reads + 1
        }
        RwMode::Write => {
            let holds = writes.checked_add(1).ok_or(LockError::HoldOverflow)?;
            live.writer = Some((owner.to_vec(), holds));
            live.write_deadline = Some(deadline);
            holds
        }
    };
    // Read (and check) the counter before the first write.
    let token = match claim.token {
        true => Some(next_token(store.token()?, store.now())?),
        false => None,
    };
    state::commit(store, &stored, &live);
    if let Some(token) = token {
        store.set_token(token);
    }
    Ok(RwOutcome {
        value: RwAcquired::Granted {
            holds,
            token,
            fresh: reads == 0 && writes == 0,
        },
        swept,
    })
}

/// RWLOCK.RELEASE: drops one hold of `mode` (READ: its highest hold, whose
/// timeout key goes). `NOTOWNER` (nothing written) if the owner has no live
/// hold of that mode.
pub fn release<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
    mode: RwMode,
) -> LockResult<RwOutcome<RwReleased>> {
    let (stored, mut live, swept) = load_for_write(store, Some(owner))?;
    let had_writer = live.writer.is_some();
    let holds = match mode {
        RwMode::Read => {
            let holds = live
                .readers
                .iter_mut()
                .find(|(o, _)| o == owner)
                .map(|(_, h)| h)
                .ok_or(LockError::NotOwner)?;
            holds.pop();
            let left = holds.len() as i64;
            live.tidy();
            left
        }
        RwMode::Write => {
            let writes = live.writes_of(owner);
            if writes == 0 {
                return Err(LockError::NotOwner);
            }
            live.writer = (writes > 1).then(|| (owner.to_vec(), writes - 1));
            writes - 1
        }
    };
    state::commit(store, &stored, &live);
    Ok(RwOutcome {
        value: released(&live, owner, holds, had_writer),
        swept,
    })
}

fn released(live: &Live, owner: &[u8], holds: i64, had_writer: bool) -> RwReleased {
    RwReleased {
        holds,
        owner_done: live.reads_of(owner) == 0 && live.writes_of(owner) == 0,
        freed: live.is_free(),
        write_ended: had_writer && live.writer.is_none(),
    }
}

/// Every hold of `owner`, both modes, dropped at once (its tied connection
/// closed). `None` (only the sweep written) if it held nothing.
pub fn release_all<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
) -> LockResult<RwOutcome<Option<RwReleased>>> {
    let (stored, mut live, swept) = load_for_write(store, Some(owner))?;
    let had_writer = live.writer.is_some();
    let held = live.reads_of(owner) > 0 || live.writes_of(owner) > 0;
    if held {
        live.readers.retain(|(o, _)| o != owner);
        if live.writes_of(owner) > 0 {
            live.writer = None;
        }
    }
    state::commit(store, &stored, &live);
    Ok(RwOutcome {
        value: held.then(|| released(&live, owner, 0, had_writer)),
        swept,
    })
}

/// Takes back one hold of `mode` that `owner` was given but must not keep
/// (a grant whose client vanished, a REPLICAS timeout): as `release`, but
/// `None` (nothing written) if it holds none of that mode any more.
pub fn take_back<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
    mode: RwMode,
) -> LockResult<Option<RwOutcome<RwReleased>>> {
    match release(store, owner, mode) {
        Ok(outcome) => Ok(Some(outcome)),
        Err(LockError::NotOwner) => Ok(None),
        Err(e) => Err(e),
    }
}

/// RWLOCK.RENEW: if `owner` holds the lock in either mode, every hold of
/// it (each read hold's timeout key, the write hold) ends at now + lease;
/// the hash's deadline follows the lease rule (never below another
/// owner's live hold).
pub fn renew<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
    lease: Lease,
) -> LockResult<RwOutcome<Renewed>> {
    let deadline = lease.deadline_from(store.now())?;
    let (stored, mut live, swept) = load_for_write(store, Some(owner))?;
    let undo = RenewUndo {
        reads: live.read_holds(owner).cloned().unwrap_or_default(),
        write: (live.writes_of(owner) > 0).then_some(live.write_deadline),
    };
    let renewed = !undo.reads.is_empty() || undo.write.is_some();
    if renewed {
        // (`load_for_write` checked the slot of every reader's keys.)
        if let Some(holds) = live.readers.iter_mut().find(|(o, _)| o == owner) {
            holds.1.iter_mut().for_each(|d| *d = Some(deadline));
        }
        if undo.write.is_some() {
            live.write_deadline = Some(deadline);
        }
    }
    state::commit(store, &stored, &live);
    Ok(RwOutcome {
        value: Renewed { renewed, undo },
        swept,
    })
}

/// Puts back the deadlines a renewal replaced (its replicas did not
/// acknowledge it in time), for the holds `owner` still has; a deadline
/// already past ends its hold. `false` if the owner holds nothing.
pub fn restore_renewal<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
    undo: &RenewUndo,
) -> LockResult<RwOutcome<bool>> {
    let (stored, mut live, swept) = load_for_write(store, Some(owner))?;
    let held = live.reads_of(owner) > 0 || live.writes_of(owner) > 0;
    if held {
        if let Some(holds) = live.readers.iter_mut().find(|(o, _)| o == owner) {
            for (d, old) in holds.1.iter_mut().zip(&undo.reads) {
                *d = *old;
            }
        }
        if let (true, Some(old)) = (live.writes_of(owner) > 0, undo.write) {
            live.write_deadline = old;
        }
        live.prune(stored.now);
    }
    state::commit(store, &stored, &live);
    Ok(RwOutcome { value: held, swept })
}

/// RWLOCK.FORCERELEASE: removes the lock (the hash and the timeout key of
/// every live read hold), whoever holds it.
pub fn force_release<S: RwLockStore>(store: &mut S) -> LockResult<RwOutcome<Forced>> {
    let (stored, mut live, swept) = load_for_write(store, None)?;
    let owners = live.owners().into_iter().map(|(o, _, _)| o).collect();
    live = Live {
        writer: None,
        write_deadline: None,
        readers: Vec::new(),
    };
    state::commit(store, &stored, &live);
    Ok(RwOutcome {
        value: Forced { owners },
        swept,
    })
}

/// Drops lapsed read holds, sets the hash's deadline by the lease rule, and
/// deletes the hash when no live hold is left (`Swept::freed`: serve the
/// queue). The glue runs it at every `next_deadline` (and when a timeout
/// key's expiry or deletion is seen).
pub fn sweep<S: RwLockStore>(store: &mut S) -> LockResult<Swept> {
    let (stored, live, swept) = load_for_write(store, None)?;
    state::commit(store, &stored, &live);
    Ok(swept)
}

/// The earliest deadline at which a hold of the lock may end (a read
/// hold's timeout key, or the hash), for the glue's scheduler: sweep and
/// serve just after it. `None`: no lock, or nothing expires. A stored lock
/// with no live hold is due now. Reads only.
pub fn next_deadline<S: RwLockStore>(store: &mut S) -> LockResult<Option<Millis>> {
    let stored = state::load(store, false)?;
    let live = Live::of(&stored);
    if stored.exists && live.is_free() {
        return Ok(Some(stored.now));
    }
    Ok(live.next_deadline())
}

/// What ends at the lock's next deadline, if nothing changes before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// `next_deadline`: sweep and serve just after it (once now > at).
    pub at: Millis,
    /// Owners that will hold nothing then (`rwlock.expired` each). Redis
    /// deletes a lapsed hash before anyone reads it, so the glue keeps this
    /// from when it arms the deadline (re-armed after every change).
    pub ending: Vec<Vec<u8>>,
    /// The lock will be free then.
    pub frees: bool,
}

/// The lock's next deadline and what ends at it; `None` when there is no
/// lock or nothing expires. A stored lock with no live hold is due now
/// (its sweep reports the lapsed owners). Reads only.
pub fn due<S: RwLockStore>(store: &mut S) -> LockResult<Option<Due>> {
    let stored = state::load(store, false)?;
    let live = Live::of(&stored);
    if stored.exists && live.is_free() {
        return Ok(Some(Due {
            at: stored.now,
            ending: Vec::new(),
            frees: true,
        }));
    }
    let Some(at) = live.next_deadline() else {
        return Ok(None);
    };
    let ends = |d: &Deadline| d.is_some_and(|d| d <= at);
    let hash_ends = live.target().is_some_and(|t| ends(&t));
    let ending = live
        .owners()
        .into_iter()
        .filter(|(o, _, writes)| {
            let reads_end = live.read_holds(o).is_none_or(|h| h.iter().all(ends));
            reads_end && (*writes == 0 || hash_ends)
        })
        .map(|(o, _, _)| o)
        .collect();
    Ok(Some(Due {
        at,
        ending,
        frees: hash_ends,
    }))
}

/// RWLOCK.INFO: `None` when no live hold remains. Reads only (lapsed holds
/// are left for the next writing call).
pub fn info<S: RwLockStore>(store: &mut S) -> LockResult<Option<RwInfo>> {
    let stored = state::load(store, false)?;
    let live = Live::of(&stored);
    let Some(mode) = live.mode() else {
        return Ok(None);
    };
    Ok(Some(RwInfo {
        mode,
        writer: live.writer.as_ref().map(|(w, _)| w.clone()),
        write_holds: live.writer.as_ref().map_or(0, |(_, n)| *n),
        readers: live.readers.len() as i64,
        read_holds: live.readers.iter().map(|(_, h)| h.len() as i64).sum(),
        ttl: stored.deadline.map(|d| d - stored.now),
        owners: live.owners(),
    }))
}

/// One owner's live holds. Reads only.
pub fn holding<S: RwLockStore>(store: &mut S, owner: &[u8]) -> LockResult<OwnerHolds> {
    let stored = state::load(store, false)?;
    let live = Live::of(&stored);
    Ok(OwnerHolds {
        reads: live.reads_of(owner),
        writes: live.writes_of(owner),
    })
}
