//! The RW lock as the rules see it: `load` reads and validates everything
//! the key holds (the hash, every read hold's timeout key), `Live` is the
//! lock reduced to its live holds, and `commit` writes the difference
//! between what was stored and the `Live` a rule leaves behind, as the
//! fewest Redis effects.

use super::store::{KeyTtl, RwLockStore};
use super::{MAX_READ_HOLDS, MODE_FIELD, RwMode, WRITE_SUFFIX, writer_field};
use crate::error::{LockError, LockResult};
use crate::lease::Millis;
use crate::number::parse_positive;
use crate::owner;
use crate::store::Shape;

/// An absolute deadline; `None`: no expiry (someone PERSISTed the key).
pub(crate) type Deadline = Option<Millis>;

/// The later of two deadlines (no expiry is the latest).
pub(crate) fn later(a: Deadline, b: Deadline) -> Deadline {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    }
}

/// The earlier of two deadlines (no expiry is the latest).
pub(crate) fn earlier(a: Deadline, b: Deadline) -> Deadline {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Whether a key with this deadline has lapsed at `now` (Redis: once
/// now > deadline).
pub(crate) fn lapsed(deadline: Deadline, now: Millis) -> bool {
    deadline.is_some_and(|d| d < now)
}

/// One reader's field as stored, with the state of each of its holds'
/// timeout keys (`None`: the key is gone, the hold lapsed).
#[derive(Debug, Clone)]
pub(crate) struct StoredReader {
    pub owner: Vec<u8>,
    pub count: i64,
    pub holds: Vec<Option<Deadline>>,
}

/// What the key holds, validated.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub exists: bool,
    pub mode: Option<RwMode>,
    /// The writer (without `:write`) and its write holds.
    pub writer: Option<(Vec<u8>, i64)>,
    pub readers: Vec<StoredReader>,
    /// The hash's deadline (meaningless when it does not exist).
    pub deadline: Deadline,
    pub now: Millis,
}

/// Reads the lock at the store. WRONGTYPE for a non-hash; NOTLOCK
/// (`NotRwLock`) for a hash that is not an RW lock: no `mode` of `read` or
/// `write`, a count that is not a positive integer as HINCRBY reads it (or
/// read counts adding up to more than `MAX_READ_HOLDS`), a field owned by `*`, `mode` or an
/// owner ending in `:write`, read mode with a writer or without readers,
/// write mode without exactly one writer or with a reader other than it.
/// `check_slots`: the call may write timeout keys, so every reader's must
/// be in the key's slot (the store's `check_hold_slot`).
pub(crate) fn load<S: RwLockStore>(store: &mut S, check_slots: bool) -> LockResult<Stored> {
    let now = store.now();
    match store.shape() {
        Shape::Missing => {
            return Ok(Stored {
                exists: false,
                mode: None,
                writer: None,
                readers: Vec::new(),
                deadline: None,
                now,
            });
        }
        Shape::Other => return Err(LockError::WrongType),
        Shape::Hash { .. } => {}
    }
    let mut mode = None;
    let mut writer: Option<(Vec<u8>, i64)> = None;
    let mut readers = Vec::new();
    let mut read_holds: i64 = 0;
    for (field, value) in store.entries() {
        if field == MODE_FIELD {
            mode = Some(match &value[..] {
                b"read" => RwMode::Read,
                b"write" => RwMode::Write,
                _ => return Err(LockError::NotRwLock),
            });
            continue;
        }
        let count = parse_positive(&value).ok_or(LockError::NotRwLock)?;
        if let Some(owner) = field.strip_suffix(WRITE_SUFFIX) {
            if writer.is_some() || !stored_owner(owner) {
                return Err(LockError::NotRwLock);
            }
            writer = Some((owner.to_vec(), count));
        } else {
            read_holds = read_holds.saturating_add(count);
            if !stored_owner(&field) || read_holds > MAX_READ_HOLDS {
                return Err(LockError::NotRwLock);
            }
            readers.push(StoredReader {
                owner: field,
                count,
                holds: Vec::new(),
            });
        }
    }
    let shaped = match mode {
        None => false,
        Some(RwMode::Read) => writer.is_none() && !readers.is_empty(),
        Some(RwMode::Write) => writer.as_ref().is_some_and(|(w, _)| {
            // The writer's own read holds (a downgrade), no one else's.
            readers.iter().all(|r| r.owner == *w)
        }),
    };
    if !shaped {
        return Err(LockError::NotRwLock);
    }
    if check_slots {
        for r in &readers {
            store.check_hold_slot(&r.owner)?;
        }
    }
    for r in &mut readers {
        r.holds = (1..=r.count)
            .map(|n| match store.hold_ttl(&r.owner, n) {
                KeyTtl::Missing => None,
                KeyTtl::Forever => Some(None),
                KeyTtl::Left(ms) => Some(Some(now.saturating_add(ms))),
            })
            .collect();
    }
    let deadline = store.ttl().map(|ms| now.saturating_add(ms));
    Ok(Stored {
        exists: true,
        mode,
        writer,
        readers,
        deadline,
        now,
    })
}

/// An owner a stored field may name: not `*` (never a holder), not `mode`,
/// not ending in `:write`.
fn stored_owner(owner: &[u8]) -> bool {
    !owner::is_reserved(owner) && super::check_owner(owner).is_ok()
}

/// The lock reduced to its live holds: what a rule decides on and changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Live {
    /// The writer and its write holds.
    pub writer: Option<(Vec<u8>, i64)>,
    /// While there is a writer: the write hold's deadline (the hash's, as
    /// stored, until a write acquire or renewal sets it from now).
    pub write_deadline: Deadline,
    /// Readers with at least one live hold, in the hash's order: the
    /// deadline of each hold, hold 1 first.
    pub readers: Vec<(Vec<u8>, Vec<Deadline>)>,
}

impl Live {
    /// The live holds of what is stored: read holds whose timeout keys are
    /// gone are dropped (the later holds of the same owner move down, so
    /// holds stay numbered 1..count), and readers left with none.
    pub fn of(stored: &Stored) -> Live {
        Live {
            writer: stored.writer.clone(),
            write_deadline: stored.deadline,
            readers: stored
                .readers
                .iter()
                .map(|r| (r.owner.clone(), r.holds.iter().flatten().copied().collect()))
                .filter(|(_, holds): &(Vec<u8>, Vec<Deadline>)| !holds.is_empty())
                .collect(),
        }
    }

    pub fn is_free(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty()
    }

    pub fn mode(&self) -> Option<RwMode> {
        match (&self.writer, self.readers.is_empty()) {
            (Some(_), _) => Some(RwMode::Write),
            (None, false) => Some(RwMode::Read),
            (None, true) => None,
        }
    }

    pub fn writes_of(&self, owner: &[u8]) -> i64 {
        match &self.writer {
            Some((w, n)) if w == owner => *n,
            _ => 0,
        }
    }

    pub fn read_holds(&self, owner: &[u8]) -> Option<&Vec<Deadline>> {
        self.readers
            .iter()
            .find(|(o, _)| o == owner)
            .map(|(_, h)| h)
    }

    /// Every live read hold, all owners together.
    pub fn read_hold_count(&self) -> i64 {
        self.readers.iter().map(|(_, h)| h.len() as i64).sum()
    }

    pub fn reads_of(&self, owner: &[u8]) -> i64 {
        self.read_holds(owner).map_or(0, |h| h.len() as i64)
    }

    /// The owner's read holds, the reader added (last) if it had none.
    pub fn read_holds_mut(&mut self, owner: &[u8]) -> &mut Vec<Deadline> {
        let i = match self.readers.iter().position(|(o, _)| o == owner) {
            Some(i) => i,
            None => {
                self.readers.push((owner.to_vec(), Vec::new()));
                self.readers.len() - 1
            }
        };
        &mut self.readers[i].1
    }

    /// Drops readers left without holds.
    pub fn tidy(&mut self) {
        self.readers.retain(|(_, holds)| !holds.is_empty());
    }

    /// Drops what has lapsed at `now` (a deadline put back into the past):
    /// read holds, then the writer if neither its deadline nor a read hold
    /// keeps the hash alive.
    pub fn prune(&mut self, now: Millis) {
        for (_, holds) in &mut self.readers {
            holds.retain(|d| !lapsed(*d, now));
        }
        self.tidy();
        if self.writer.is_some() && self.target().is_some_and(|d| lapsed(d, now)) {
            self.writer = None;
        }
    }

    /// The latest deadline of any live read hold; `None` if there is none.
    fn latest_read(&self) -> Option<Deadline> {
        self.readers
            .iter()
            .flat_map(|(_, holds)| holds.iter().copied())
            .reduce(later)
    }

    /// The hash's deadline the lease rule asks for; `None` when the lock is
    /// free. Write mode: the write hold's, extended by any later read hold;
    /// read mode: the latest read hold's.
    pub fn target(&self) -> Option<Deadline> {
        let reads = self.latest_read();
        match &self.writer {
            Some(_) => Some(reads.map_or(self.write_deadline, |r| later(self.write_deadline, r))),
            None => reads,
        }
    }

    /// The earliest deadline at which a hold may end: a read hold's, or the
    /// hash's (the write hold's, or the last read hold's).
    pub fn next_deadline(&self) -> Option<Millis> {
        let reads = self
            .readers
            .iter()
            .flat_map(|(_, holds)| holds.iter().copied())
            .fold(None, earlier);
        let hash = self.target().flatten();
        earlier(reads, hash)
    }

    /// Every owner with a live hold (the writer first), with its read and
    /// write holds.
    pub fn owners(&self) -> Vec<(Vec<u8>, i64, i64)> {
        let mut owners: Vec<(Vec<u8>, i64, i64)> = Vec::new();
        if let Some((w, n)) = &self.writer {
            owners.push((w.clone(), self.reads_of(w), *n));
        }
        for (o, holds) in &self.readers {
            if self.writes_of(o) == 0 {
                owners.push((o.clone(), holds.len() as i64, 0));
            }
        }
        owners
    }
}

fn decimal(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// Writes what differs between `stored` and `live`: the hash (mode, fields,
/// deadline, or DEL when `live` is free) and the timeout keys (SET for a
/// hold that has none, PEXPIREAT for one whose deadline moved, DEL for one
/// that is gone). Keys the load did not read (beyond a reader's stored
/// count) are only ever overwritten.
pub(crate) fn commit<S: RwLockStore>(store: &mut S, stored: &Stored, live: &Live) {
    match live.target() {
        None => {
            if stored.exists {
                store.delete();
            }
        }
        Some(deadline) => {
            let mode = live.mode().unwrap_or(RwMode::Read);
            if stored.mode != Some(mode) {
                store.set_field(MODE_FIELD, mode.as_bytes());
            }
            if let Some((w, _)) = &stored.writer
                && live.writer.as_ref().is_none_or(|(o, _)| o != w)
            {
                store.delete_field(&writer_field(w));
            }
            if let Some((w, n)) = &live.writer
                && stored.writer.as_ref() != Some(&(w.clone(), *n))
            {
                store.set_field(&writer_field(w), &decimal(*n));
            }
            for r in &stored.readers {
                if live.reads_of(&r.owner) == 0 {
                    store.delete_field(&r.owner);
                }
            }
            for (o, holds) in &live.readers {
                let count = holds.len() as i64;
                let before = stored.readers.iter().find(|r| r.owner == *o);
                if before.is_none_or(|r| r.count != count) {
                    store.set_field(o, &decimal(count));
                }
            }
            if !stored.exists || stored.deadline != deadline {
                match deadline {
                    Some(d) => store.set_deadline(d),
                    None if stored.exists => store.clear_deadline(),
                    None => {}
                }
            }
        }
    }
    // Timeout keys: of everyone stored, then of readers new to the hash.
    const NONE: &[Option<Deadline>] = &[];
    const NO_HOLDS: &[Deadline] = &[];
    for r in &stored.readers {
        let after = live.read_holds(&r.owner).map_or(NO_HOLDS, |h| &h[..]);
        commit_holds(store, &r.owner, &r.holds, after);
    }
    for (o, holds) in &live.readers {
        if !stored.readers.iter().any(|r| r.owner == *o) {
            commit_holds(store, o, NONE, holds);
        }
    }
    store.replicate_writes();
}

fn commit_holds<S: RwLockStore>(
    store: &mut S,
    owner: &[u8],
    before: &[Option<Deadline>],
    after: &[Deadline],
) {
    for i in 0..before.len().max(after.len()) {
        let n = i as i64 + 1;
        match (before.get(i).copied().flatten(), after.get(i)) {
            (Some(old), Some(&new)) if old == new => {}
            (Some(_), Some(&new)) => store.set_hold_deadline(owner, n, new),
            (None, Some(&new)) => store.set_hold(owner, n, new),
            (Some(_), None) => store.delete_hold(owner, n),
            (None, None) => {}
        }
    }
}
