//! LATCH.*: Redisson's RCountDownLatch, in the server. The key is a string
//! holding the count (no TTL unless someone gives it one); the channel is
//! `redisson_countdownlatch__channel__{key}` (`channel::latch_channel`,
//! braces always added): `1` when a count is set, `0` when the latch opens.
//!
//! A latch is open when its key is absent or its count is ≤ 0. Serving is
//! wake-all: when the latch is open, every queued AWAIT is answered. The
//! glue serves the queue whenever the key changes (COUNTDOWN, DEL, SET,
//! FLUSH*, SWAPDB) and at the key's deadline (`next_deadline`).
//!
//! Every function validates everything before its first write, so an error
//! always means "nothing changed".

mod memory;
pub mod request;
#[cfg(test)]
mod tests;

pub use self::memory::MemoryLatch;
pub use crate::served::Served;

use crate::error::{LockError, LockResult};
use crate::lease::Millis;
use crate::queue::WaitQueue;
use crate::string::StringValue;

/// Published when the latch opens (Redisson's `ZERO_COUNT_MESSAGE`).
pub const OPENED_MESSAGE: &[u8] = b"0";
/// Published when a count is set (Redisson's `NEW_COUNT_MESSAGE`).
pub const NEW_COUNT_MESSAGE: &[u8] = b"1";

/// The storage the latch rules run against: one string key. Each write is
/// one Redis effect.
pub trait LatchStore {
    /// The count's bytes as read (GET).
    type Value: AsRef<[u8]>;

    /// GET key.
    fn count(&mut self) -> StringValue<Self::Value>;
    /// The key's absolute expiry; `None`: no expiry (or no key).
    fn deadline(&mut self) -> Option<Millis>;
    /// `SET key count` on a missing key (LATCH.CREATE).
    fn set_count(&mut self, count: i64);
    /// `DECR key` on a key holding more than 1 (keeps its TTL).
    fn decrement(&mut self);
    /// `DEL key`.
    fn delete(&mut self);
}

/// The count at the key (`None`: no key): NOTLATCH for a string that is not
/// a decimal integer, WRONGTYPE for another type.
fn read<S: LatchStore>(s: &mut S) -> LockResult<Option<i64>> {
    s.count().integer(LockError::NotLatch)
}

/// LATCH.CREATE: sets `count` (≥ 1) when no string is at the key. `true`:
/// set (publish `NEW_COUNT_MESSAGE`); `false`: a string exists, whatever it
/// holds, and nothing changes.
pub fn create<S: LatchStore>(s: &mut S, count: i64) -> LockResult<bool> {
    if count < 1 {
        return Err(LockError::Invalid(
            "invalid count: must be a positive integer",
        ));
    }
    match s.count() {
        StringValue::Missing => {
            s.set_count(count);
            Ok(true)
        }
        StringValue::Str(_) => Ok(false),
        StringValue::Other => Err(LockError::WrongType),
    }
}

/// LATCH.COUNTDOWN's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedDown {
    /// No latch at the key: reply 0, nothing changed, nothing published.
    Missing,
    /// Still closed: reply the count left (≥ 1).
    Left(i64),
    /// The count reached 0 or less: the key is deleted. Reply 0, publish
    /// `OPENED_MESSAGE`, serve the queue (every waiter), fire
    /// `latch.opened`.
    Opened,
}

impl CountedDown {
    /// The integer reply.
    pub fn reply(self) -> i64 {
        match self {
            CountedDown::Left(n) => n,
            CountedDown::Missing | CountedDown::Opened => 0,
        }
    }
}

/// LATCH.COUNTDOWN: DECR, or DEL when the count would reach 0 or less (a
/// count already ≤ 0, set by hand, opens too).
pub fn count_down<S: LatchStore>(s: &mut S) -> LockResult<CountedDown> {
    match read(s)? {
        None => Ok(CountedDown::Missing),
        Some(n) if n > 1 => {
            s.decrement();
            Ok(CountedDown::Left(n - 1))
        }
        Some(_) => {
            s.delete();
            Ok(CountedDown::Opened)
        }
    }
}

/// LATCH.AWAIT without waiting: `true` when open (no key, or count ≤ 0).
/// Read-only.
pub fn is_open<S: LatchStore>(s: &mut S) -> LockResult<bool> {
    Ok(read(s)?.is_none_or(|n| n <= 0))
}

/// LATCH.COUNT: the count, 0 when absent. Read-only.
pub fn count<S: LatchStore>(s: &mut S) -> LockResult<i64> {
    Ok(read(s)?.unwrap_or(0))
}

/// When the queue must next be served without any write: the key's
/// deadline, while the latch is closed (it opens when the key expires).
/// `None`: no deadline, or already open.
pub fn next_deadline<S: LatchStore>(s: &mut S) -> LockResult<Option<Millis>> {
    if is_open(s)? {
        return Ok(None);
    }
    Ok(s.deadline())
}

/// Serves `queue`, wake-all: when the latch is open every waiter is granted
/// (in queue order); when it is closed nobody is; when the key holds
/// something that is not a latch, every waiter is failed with the error.
/// Writes nothing.
pub fn serve<S: LatchStore, W>(s: &mut S, queue: &mut WaitQueue<W>) -> Served<W, ()> {
    let mut served = Served::default();
    match is_open(s) {
        Ok(false) => {}
        Ok(true) => {
            while let Some((_, waiter)) = queue.pop_front() {
                served.granted.push((waiter, ()));
            }
        }
        Err(e) => {
            while let Some((_, waiter)) = queue.pop_front() {
                served.failed.push((waiter, e.clone()));
            }
        }
    }
    served
}
