//! SEMAPHORE.*: Redisson's RSemaphore and RPermitExpirableSemaphore, in
//! the server. The rules run against a `SemaphoreStore` (the permit count at
//! the key, the lease set `{key}:timeout`); the glue turns each outcome into
//! a reply and its follow-ups.
//!
//! The follow-ups, for every writing call:
//! 1. `Outcome::expired`: lapsed ids the call returned to the pool before it
//!    acted (fire `semaphore.expired`, untie them);
//! 2. serve the key's queue (`serve`), whatever the call was;
//! 3. if `Outcome::publish`: publish `available()` on `redisson_sc:{key}`
//!    when it is > 0 (after serving, so the payload is what is left).
//!
//! Leased permits come back **at** their deadline: a lapsed id is one whose
//! score is ≤ now, as Redisson reads it. The glue calls `sweep` at
//! `next_deadline` (then serves and publishes as above); every writing rule
//! also sweeps what has lapsed before it acts, so a call that comes before
//! the sweep timer sees the permits back. `serve` does not sweep: call
//! `sweep` first.
//!
//! Every function validates everything before its first write, so an error
//! always means "nothing changed".

mod memory;
pub mod request;
pub mod store;
#[cfg(test)]
mod tests;

pub use self::memory::MemorySemaphore;
pub use self::store::{SemaphoreStore, SetShape};
pub use crate::served::Served;

use crate::error::{LockError, LockResult};
use crate::lease::{Lease, Millis};
use crate::queue::WaitQueue;

/// The score of a permit without a lease (Redisson's `nonExpirableTimeout`).
pub const NO_LEASE: i64 = 922_337_203_685_477;

/// A permit id: 16 raw bytes in the lease set, 32 lowercase hex chars to
/// clients.
pub type PermitId = [u8; 16];

/// The most permits one SEMAPHORE.LEASE takes (each is an id in the reply
/// and a member written): a call must not stall the server.
pub const MAX_LEASE_COUNT: i64 = 100_000;

/// A fresh random permit id (the 16 bytes of a v4 UUID: 122 random bits).
pub fn new_id() -> PermitId {
    *uuid::Uuid::new_v4().as_bytes()
}

/// The id as clients see it: 32 lowercase hex chars.
pub fn to_hex(id: &PermitId) -> [u8; 32] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in id.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
    out
}

/// An id from 32 hex chars, either case.
pub fn parse_id(hex: &[u8]) -> LockResult<PermitId> {
    const BAD: LockError = LockError::BadPermitId("32 hex characters expected");
    if hex.len() != 32 {
        return Err(BAD);
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(BAD),
    };
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        id[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(id)
}

/// The semaphore keys whose lease set is named `name` (what a write to a
/// `...:timeout` sorted set may concern): `{key}:timeout` for a key without
/// `{`, `key:timeout` for one with. Both readings are offered when they
/// apply (`{a}:timeout` is the lease set of `a` and of `{a}`).
pub fn keys_of_lease_set(name: &[u8]) -> Vec<&[u8]> {
    let mut found = Vec::new();
    let Some(base) = name.strip_suffix(b":timeout") else {
        return found;
    };
    if let [b'{', key @ .., b'}'] = base
        && !key.contains(&b'{')
    {
        found.push(key);
    }
    if base.contains(&b'{') {
        found.push(base);
    }
    found
}

/// Distinct permit ids, at least one (SEMAPHORE.RETURN's arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitIds(Vec<PermitId>);

impl PermitIds {
    /// `ERR` when empty or when an id comes twice.
    pub fn new(ids: Vec<PermitId>) -> LockResult<PermitIds> {
        if ids.is_empty() {
            return Err(LockError::BadPermitId("at least one id expected"));
        }
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(LockError::BadPermitId("the same id given twice"));
        }
        Ok(PermitIds(ids))
    }

    /// Parses client arguments: each 32 hex chars, either case; distinct.
    pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> LockResult<PermitIds> {
        let ids = args
            .iter()
            .map(|a| parse_id(a.as_ref()))
            .collect::<LockResult<Vec<_>>>()?;
        PermitIds::new(ids)
    }

    pub fn as_slice(&self) -> &[PermitId] {
        &self.0
    }
}

impl std::ops::Deref for PermitIds {
    type Target = [PermitId];
    fn deref(&self) -> &[PermitId] {
        &self.0
    }
}

/// What a LEASE asks for: `count` permits, each with `lease` (`None`: no
/// expiry). The glue resolves KEEPALIVE without PX/EX to the default lease
/// (`request::LeaseRequest::claim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseClaim {
    pub count: i64,
    pub lease: Option<Lease>,
}

/// Permits leased: their fresh ids and their common deadline (`None`: no
/// expiry, score `NO_LEASE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    pub ids: Vec<PermitId>,
    pub deadline: Option<Millis>,
}

/// A writing call's result and what must follow it (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T> {
    pub reply: T,
    /// Members whose lease had lapsed, returned to the pool by this call
    /// before it acted (`semaphore.expired`; untie them). Usually 16-byte
    /// ids; anything a foreign ZADD put there is returned too.
    pub expired: Vec<Vec<u8>>,
    /// Permits were added or came back: after serving the queue, publish
    /// `available()` when it is > 0.
    pub publish: bool,
}

impl<T> Outcome<T> {
    fn new(reply: T, expired: Vec<Vec<u8>>, publish: bool) -> Outcome<T> {
        Outcome {
            reply,
            expired,
            publish,
        }
    }
}

/// SEMAPHORE.INFO's facts from the keys (`waiters` and `keepalive` are the
/// glue's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemaphoreInfo {
    /// The permit count, plus lapsed ids not yet swept (they are back).
    pub available: i64,
    /// Ids in the lease set that have not lapsed.
    pub leased: usize,
    /// The key's ms left; `None`: no expiry (or no key).
    pub ttl: Option<Millis>,
}

/// SEMAPHORE.RENEW's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Renewed {
    /// The id's new deadline, and the score it replaced (for a REPLICAS
    /// undo: `restore_lease`).
    Renewed { deadline: Millis, previous: f64 },
    /// Not leased now (unknown, returned or lapsed): nothing changed.
    NotLeased,
}

/// Whether a permit with this score has lapsed at `now`. Redis scores are
/// doubles; Redisson compares them with `<=`.
pub fn lapsed_at(score: f64, now: Millis) -> bool {
    score <= now as f64
}

/// The checked permit count (`None`: no key) and the lease set's type.
fn check<S: SemaphoreStore>(s: &mut S) -> LockResult<Option<i64>> {
    let count = s.permits().integer(LockError::NotSemaphore)?;
    if s.leases() == SetShape::Other {
        return Err(LockError::WrongType);
    }
    Ok(count)
}

/// The semaphore as a call finds it: checked, with the lapsed ids that its
/// sweep returns to the pool.
struct Pool<M> {
    count: Option<i64>,
    lapsed: Vec<M>,
}

fn pool<S: SemaphoreStore>(s: &mut S) -> LockResult<Pool<S::Member>> {
    let count = check(s)?;
    let lapsed = match s.leases() {
        SetShape::Zset { .. } => {
            let now = s.now();
            s.lapsed(now)
        }
        SetShape::Missing | SetShape::Other => Vec::new(),
    };
    Ok(Pool { count, lapsed })
}

impl<M: AsRef<[u8]>> Pool<M> {
    /// The permits available once the lapsed ones are back; an error if
    /// INCRBY would refuse to take them back.
    fn available(&self) -> LockResult<i64> {
        let lapsed = i64::try_from(self.lapsed.len()).map_err(|_| LockError::CountOverflow)?;
        self.count
            .unwrap_or(0)
            .checked_add(lapsed)
            .ok_or(LockError::CountOverflow)
    }

    /// Returns the lapsed ids to the pool: ZREM, then INCRBY (which creates
    /// the key if needed). Only after `available` succeeded.
    fn sweep<S: SemaphoreStore<Member = M>>(self, s: &mut S) -> Vec<Vec<u8>> {
        if self.lapsed.is_empty() {
            return Vec::new();
        }
        s.remove_leases(&self.lapsed);
        s.incr(self.lapsed.len() as i64);
        self.lapsed
            .into_iter()
            .map(|m| m.as_ref().to_vec())
            .collect()
    }
}

fn check_count(count: i64) -> LockResult<()> {
    if count < 1 {
        return Err(LockError::Invalid(
            "invalid COUNT: must be a positive integer",
        ));
    }
    Ok(())
}

fn check_lease_count(count: i64) -> LockResult<()> {
    check_count(count)?;
    if count > MAX_LEASE_COUNT {
        return Err(LockError::Invalid(
            "invalid COUNT: SEMAPHORE.LEASE takes at most 100000 permits at once",
        ));
    }
    Ok(())
}

fn in_slot<S: SemaphoreStore>(s: &S) -> LockResult<()> {
    match s.leases_in_slot() {
        true => Ok(()),
        false => Err(LockError::TimeoutCrossSlot),
    }
}

/// The score of a lease from `now`, and its deadline. A deadline at or past
/// `NO_LEASE` (year 31197) would read as "no lease": refused.
fn lease_score(lease: Option<Lease>, now: Millis) -> LockResult<(f64, Option<Millis>)> {
    let Some(lease) = lease else {
        return Ok((NO_LEASE as f64, None));
    };
    let deadline = lease.deadline_from(now)?;
    if deadline >= NO_LEASE {
        return Err(LockError::BadLease("deadline would overflow"));
    }
    Ok((deadline as f64, Some(deadline)))
}

/// `count` ids that are in neither the lease set nor each other.
fn fresh_ids<S: SemaphoreStore>(s: &mut S, count: i64) -> Vec<PermitId> {
    loop {
        let ids: Vec<PermitId> = (0..count).map(|_| new_id()).collect();
        let distinct = count == 1 || PermitIds::new(ids.clone()).is_ok();
        if distinct && ids.iter().all(|id| s.score(id).is_none()) {
            return ids;
        }
    }
}

/// The lease set takes the key's TTL when a lease is written (as
/// RPermitExpirableSemaphore does; a key without one makes the set persist).
fn copy_ttl<S: SemaphoreStore>(s: &mut S) {
    let key = s.deadline();
    if s.leases_deadline() != key {
        match key {
            Some(deadline) => s.set_leases_deadline(deadline),
            None => s.persist_leases(),
        }
    }
}

/// Writes a lease grant: DECRBY, ZADD the fresh ids, the key's TTL on the
/// set. The caller checked that `count` permits are available.
fn write_lease<S: SemaphoreStore>(
    s: &mut S,
    count: i64,
    score: f64,
    deadline: Option<Millis>,
) -> Leased {
    let ids = fresh_ids(s, count);
    s.incr(-count);
    s.add_leases(&ids, score);
    copy_ttl(s);
    Leased { ids, deadline }
}

/// SEMAPHORE.CREATE: sets `permits` (with a TTL if `lease`) when no string
/// is at the key. `reply`: `true` if created; `false` if a string exists,
/// whatever it holds (nothing changes).
pub fn create<S: SemaphoreStore>(
    s: &mut S,
    permits: i64,
    lease: Option<Lease>,
) -> LockResult<Outcome<bool>> {
    if permits < 0 {
        return Err(LockError::Invalid(
            "invalid permits: must be a non-negative integer",
        ));
    }
    let deadline = lease.map(|l| l.deadline_from(s.now())).transpose()?;
    let exists = match s.permits() {
        crate::string::StringValue::Missing => false,
        crate::string::StringValue::Str(_) => true,
        crate::string::StringValue::Other => return Err(LockError::WrongType),
    };
    if s.leases() == SetShape::Other {
        return Err(LockError::WrongType);
    }
    if exists {
        return Ok(Outcome::new(false, Vec::new(), false));
    }
    let pool = pool(s)?;
    permits
        .checked_add(pool.available()?)
        .ok_or(LockError::CountOverflow)?;
    s.create(permits, deadline);
    let expired = pool.sweep(s);
    Ok(Outcome::new(true, expired, true))
}

/// SEMAPHORE.ADD: INCRBY `delta` (any sign; creates the key, keeps its TTL).
/// `reply`: the available count after (before serving the queue).
pub fn add<S: SemaphoreStore>(s: &mut S, delta: i64) -> LockResult<Outcome<i64>> {
    let pool = pool(s)?;
    let after = pool
        .available()?
        .checked_add(delta)
        .ok_or(LockError::CountOverflow)?;
    let expired = pool.sweep(s);
    s.incr(delta);
    Ok(Outcome::new(after, expired, true))
}

/// SEMAPHORE.ACQUIRE without waiting: takes `count` anonymous permits.
/// `queued`: clients wait for this key, so nothing is a newcomer's.
/// `reply`: `Some(count)` taken, `None` (not enough, or queued).
pub fn acquire<S: SemaphoreStore>(
    s: &mut S,
    count: i64,
    queued: bool,
) -> LockResult<Outcome<Option<i64>>> {
    check_count(count)?;
    let pool = pool(s)?;
    let available = pool.available()?;
    let expired = pool.sweep(s);
    let publish = !expired.is_empty();
    let reply = (!queued && available >= count).then(|| {
        s.incr(-count);
        count
    });
    Ok(Outcome::new(reply, expired, publish))
}

/// SEMAPHORE.RELEASE: INCRBY `count`. `reply`: the available count after
/// (before serving the queue).
pub fn release<S: SemaphoreStore>(s: &mut S, count: i64) -> LockResult<Outcome<i64>> {
    check_count(count)?;
    let pool = pool(s)?;
    let after = pool
        .available()?
        .checked_add(count)
        .ok_or(LockError::CountOverflow)?;
    let expired = pool.sweep(s);
    s.incr(count);
    Ok(Outcome::new(after, expired, true))
}

/// SEMAPHORE.LEASE without waiting: takes `claim.count` permits with fresh
/// ids. `reply`: the ids, or `None` (not enough, or queued). CROSSSLOT when
/// the lease set is in another slot; a deadline past `NO_LEASE` is refused.
pub fn lease<S: SemaphoreStore>(
    s: &mut S,
    claim: &LeaseClaim,
    queued: bool,
) -> LockResult<Outcome<Option<Leased>>> {
    check_lease_count(claim.count)?;
    in_slot(s)?;
    let (score, deadline) = lease_score(claim.lease, s.now())?;
    let pool = pool(s)?;
    let available = pool.available()?;
    let expired = pool.sweep(s);
    let publish = !expired.is_empty();
    let reply =
        (!queued && available >= claim.count).then(|| write_lease(s, claim.count, score, deadline));
    Ok(Outcome::new(reply, expired, publish))
}

/// SEMAPHORE.RETURN: every id must be leased now (in the set, not lapsed),
/// else NOTOWNER and nothing changes. ZREM + INCRBY. `reply`: how many.
pub fn return_permits<S: SemaphoreStore>(s: &mut S, ids: &PermitIds) -> LockResult<Outcome<i64>> {
    in_slot(s)?;
    let pool = pool(s)?;
    let now = s.now();
    for id in ids.iter() {
        match s.score(id) {
            Some(score) if !lapsed_at(score, now) => {}
            _ => return Err(LockError::NotLeased),
        }
    }
    let n = ids.len() as i64;
    pool.available()?
        .checked_add(n)
        .ok_or(LockError::CountOverflow)?;
    let expired = pool.sweep(s);
    s.remove_leases(ids.as_slice());
    s.incr(n);
    Ok(Outcome::new(n, expired, true))
}

/// Gives back the ids among `ids` that are still leased, skipping the rest
/// (lapsed ones are swept with the call: `expired`): a KEEPALIVE
/// connection's tied permits when it closes, or a LEASE grant whose REPLICAS
/// acknowledgement did not come. `reply`: the ids returned.
pub fn return_ids<S: SemaphoreStore>(
    s: &mut S,
    ids: &[PermitId],
) -> LockResult<Outcome<Vec<PermitId>>> {
    if !s.leases_in_slot() {
        // Nothing can have been leased here.
        return Ok(Outcome::new(Vec::new(), Vec::new(), false));
    }
    let pool = pool(s)?;
    let now = s.now();
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let back: Vec<PermitId> = unique
        .into_iter()
        .filter(|id| s.score(id).is_some_and(|score| !lapsed_at(score, now)))
        .collect();
    let n = back.len() as i64;
    pool.available()?
        .checked_add(n)
        .ok_or(LockError::CountOverflow)?;
    let expired = pool.sweep(s);
    if n > 0 {
        s.remove_leases(&back);
        s.incr(n);
    }
    let publish = n > 0 || !expired.is_empty();
    Ok(Outcome::new(back, expired, publish))
}

/// SEMAPHORE.RENEW: a leased id's deadline set to `lease` from now (ZADD);
/// the lease set takes the key's TTL. A lapsed or unknown id: `NotLeased`,
/// nothing changes.
pub fn renew<S: SemaphoreStore>(s: &mut S, id: &PermitId, lease: Lease) -> LockResult<Renewed> {
    in_slot(s)?;
    let now = s.now();
    let (score, deadline) = lease_score(Some(lease), now)?;
    let count = check(s)?;
    match s.score(id) {
        Some(previous) if !lapsed_at(previous, now) => {
            s.add_leases(&[*id], score);
            if count.is_some() {
                copy_ttl(s);
            }
            Ok(Renewed::Renewed {
                deadline: deadline.unwrap_or(NO_LEASE),
                previous,
            })
        }
        _ => Ok(Renewed::NotLeased),
    }
}

/// Whether every one of `ids` is leased now (in the lease set, not
/// lapsed), the semaphore being what it should be: what a deferred LEASE or
/// RENEW answer is re-checked against when it is sent. Read-only.
pub fn all_leased<S: SemaphoreStore>(s: &mut S, ids: &[PermitId]) -> bool {
    if check(s).is_err() || !s.leases_in_slot() {
        return false;
    }
    let now = s.now();
    ids.iter()
        .all(|id| s.score(id).is_some_and(|score| !lapsed_at(score, now)))
}

/// Puts back the score a renewal replaced (REPLICAS did not acknowledge
/// it), if the id is still leased. `false`: nothing to restore. If the old
/// score has passed meanwhile, the id is now lapsed: sweep and serve.
pub fn restore_lease<S: SemaphoreStore>(
    s: &mut S,
    id: &PermitId,
    previous: f64,
) -> LockResult<bool> {
    if !s.leases_in_slot() {
        return Ok(false);
    }
    check(s)?;
    let now = s.now();
    match s.score(id) {
        Some(score) if !lapsed_at(score, now) => {
            s.add_leases(&[*id], previous);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// SEMAPHORE.DRAIN: takes every available permit: the count set to 0
/// (`SET 0 KEEPTTL`), leases untouched, nothing published. `reply`: the
/// count taken (as Redisson's drainPermits: a negative count is reset to 0
/// and replied as it was).
pub fn drain<S: SemaphoreStore>(s: &mut S) -> LockResult<Outcome<i64>> {
    let pool = pool(s)?;
    let available = pool.available()?;
    let expired = pool.sweep(s);
    // A missing key with nothing swept has 0 permits: nothing to write.
    if available != 0 {
        s.set_permits(0);
    }
    Ok(Outcome::new(available, expired, false))
}

/// SEMAPHORE.INFO: `None` when neither the key nor its lease set exists.
/// Read-only: lapsed ids not yet swept count as available, not leased.
pub fn info<S: SemaphoreStore>(s: &mut S) -> LockResult<Option<SemaphoreInfo>> {
    let count = s.permits().integer(LockError::NotSemaphore)?;
    let len = match s.leases() {
        SetShape::Missing => None,
        SetShape::Zset { len } => Some(len),
        SetShape::Other => return Err(LockError::WrongType),
    };
    if count.is_none() && len.is_none() {
        return Ok(None);
    }
    let now = s.now();
    let leased = match len {
        Some(_) => s.live(now),
        None => 0,
    };
    let lapsed = len.unwrap_or(0).saturating_sub(leased);
    let ttl = match count {
        Some(_) => s.deadline().map(|d| (d - now).max(0)),
        None => None,
    };
    Ok(Some(SemaphoreInfo {
        available: count
            .unwrap_or(0)
            .saturating_add(i64::try_from(lapsed).unwrap_or(i64::MAX)),
        leased,
        ttl,
    }))
}

/// The permit count now (0 without a key): the reply of ADD and RELEASE and
/// the payload to publish, read after serving the queue.
pub fn available<S: SemaphoreStore>(s: &mut S) -> LockResult<i64> {
    Ok(check(s)?.unwrap_or(0))
}

/// Returns every lapsed id to the pool (the server's job at each lease
/// deadline, Redisson-written ids included). `Ok(ids)`: the members
/// returned (none: nothing had lapsed); then serve the queue and, if any
/// came back, publish `available()` when > 0. An error (the key now holds
/// another type, or the count cannot take them back) changed nothing: wait
/// for the next change rather than retrying at the same deadline.
pub fn sweep<S: SemaphoreStore>(s: &mut S) -> LockResult<Vec<Vec<u8>>> {
    let pool = pool(s)?;
    pool.available()?;
    Ok(pool.sweep(s))
}

/// When `sweep` must next run: the earliest lease deadline (the lowest
/// score below `NO_LEASE`, rounded up to a whole ms; at or before now when
/// something has lapsed already). `None`: no lease ends. An error when
/// `sweep` would fail now (do not arm a timer; the next change re-checks).
pub fn next_deadline<S: SemaphoreStore>(s: &mut S) -> LockResult<Option<Millis>> {
    check(s)?;
    if s.leases() == SetShape::Missing {
        return Ok(None);
    }
    let Some(score) = s.first_score().filter(|&score| score < NO_LEASE as f64) else {
        return Ok(None);
    };
    // `as` saturates: -inf reads as the distant past.
    let deadline = score.ceil() as Millis;
    if deadline <= s.now() {
        pool(s)?.available()?;
    }
    Ok(Some(deadline))
}

/// What a queued client waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// SEMAPHORE.ACQUIRE: `count` anonymous permits.
    Acquire { count: i64 },
    /// SEMAPHORE.LEASE.
    Lease(LeaseClaim),
}

impl Want {
    pub fn count(self) -> i64 {
        match self {
            Want::Acquire { count } => count,
            Want::Lease(claim) => claim.count,
        }
    }

    /// As LOCK.WAITERS shows it: `acquire <n>` or `lease <n>`.
    pub fn describe(self) -> String {
        match self {
            Want::Acquire { count } => format!("acquire {count}"),
            Want::Lease(claim) => format!("lease {}", claim.count),
        }
    }
}

/// A queued client, as the serve policy sees it.
pub trait SemaphoreWaiting {
    fn want(&self) -> Want;
}

/// What a waiter was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// `count` anonymous permits (the reply is `count`).
    Acquired {
        count: i64,
    },
    Leased(Leased),
}

/// Grants `want` if the permits are there now (no sweep: the caller swept).
fn grant<S: SemaphoreStore>(s: &mut S, want: Want) -> LockResult<Option<Grant>> {
    match want {
        Want::Acquire { count } => {
            check_count(count)?;
            let available = check(s)?.unwrap_or(0);
            Ok((available >= count).then(|| {
                s.incr(-count);
                Grant::Acquired { count }
            }))
        }
        Want::Lease(claim) => {
            check_lease_count(claim.count)?;
            in_slot(s)?;
            let (score, deadline) = lease_score(claim.lease, s.now())?;
            let available = check(s)?.unwrap_or(0);
            Ok((available >= claim.count)
                .then(|| Grant::Leased(write_lease(s, claim.count, score, deadline))))
        }
    }
}

/// Serves `queue`, strictly head-of-line: the head is granted if its
/// permits are available now, then the next head, and so on; a head that
/// cannot be granted yet goes back in its place and serving stops (a head
/// asking for 3 is never overtaken by a later waiter asking for 1). A head
/// that can never be granted (wrong type, not a semaphore, CROSSSLOT, a
/// lease that would end past `NO_LEASE`) is failed and the next tried.
/// Writes the grants through the store; does not sweep (call `sweep`
/// first); the caller answers the clients, then publishes.
pub fn serve<S, W>(s: &mut S, queue: &mut WaitQueue<W>) -> Served<W, Grant>
where
    S: SemaphoreStore,
    W: SemaphoreWaiting,
{
    let mut served = Served::default();
    while let Some((ticket, waiter)) = queue.pop_front() {
        match grant(s, waiter.want()) {
            Ok(Some(grant)) => served.granted.push((waiter, grant)),
            Ok(None) => {
                queue.restore(ticket, waiter);
                break;
            }
            Err(e) => served.failed.push((waiter, e)),
        }
    }
    served
}
