//! A lock's fencing-token counter (`redisson_lock_token:{key}`, RFencedLock's
//! string counter), as the lock stores use it: a second key, opened only by
//! a call that reads or issues a token. Shared by `LockKey` (LOCK.*) and
//! `RwKey` (RWLOCK.* ... WRITE TOKEN): one sequence per key name.

use crate::core::channel::token_key;
use crate::core::number::parse_i64;
use crate::core::slot::key_slot;
use crate::core::{LockError, LockResult};
use crate::glue::runtime::ffi::{Arg, Ctx, OwnedStr, RStr, raw};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::store::OwnEvent;

/// The open token counter.
pub struct TokenKey {
    name: OwnedStr,
    /// Open only for writing calls; read-only calls read with GET.
    key: Option<RawKey>,
    wrote: bool,
}

/// `value` in decimal, written into `buf`.
fn decimal(value: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = value.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

impl TokenKey {
    /// Opens the counter of the lock at `lock`. In a cluster (`cluster`) it
    /// must share the lock's slot: this node may not serve any other.
    pub fn open(ctx: Ctx, lock: &RStr, write: bool, cluster: bool) -> LockResult<TokenKey> {
        let name = token_key(lock.as_ref());
        if cluster && key_slot(&name) != key_slot(lock.as_ref()) {
            return Err(LockError::TokenCrossSlot);
        }
        let name = OwnedStr::new(&name);
        let key = write.then(|| RawKey::open(ctx, &name, true));
        Ok(TokenKey {
            name,
            key,
            wrote: false,
        })
    }

    /// Its value, 0 when it does not exist; WRONGTYPE or an error when INCR
    /// would refuse it.
    pub fn read(&self, ctx: Ctx) -> LockResult<i64> {
        match &self.key {
            // A writing call: read in place (it writes the counter next).
            Some(key) => match key.kind() {
                KeyKind::Empty => Ok(0),
                KeyKind::String => key
                    .with_string(parse_i64)
                    .flatten()
                    .ok_or(LockError::TokenNotInteger),
                _ => Err(LockError::WrongType),
            },
            // A read-only call: GET, which leaves the value's encoding alone
            // (direct access would turn an `int` into a string of its own).
            None => match ctx.call_for_bytes(c"GET", &[&self.name]) {
                Ok(Some(bytes)) => parse_i64(&bytes).ok_or(LockError::TokenNotInteger),
                Ok(None) => Ok(0),
                Err(()) => Err(LockError::WrongType),
            },
        }
    }

    /// Sets the counter (after a successful `read`), replicated as `SET ...
    /// KEEPTTL` and announced as INCRBY's event.
    pub fn write(&mut self, ctx: Ctx, value: i64) {
        let Some(key) = &self.key else {
            panic!("set_token on a read-only lock key");
        };
        self.wrote = true;
        let mut buf = [0u8; 20];
        let digits = decimal(value, &mut buf);
        // The digits are written in place: `read()` read the counter in
        // place, which left it a plain string of its own (a new counter is
        // created as one, with no TTL, as RFencedLock's). Unlike replacing
        // the value, this keeps any TTL someone gave it, as INCR does, and
        // costs far less.
        key.write_string(digits);
        ctx.replicate(
            c"SET",
            &[
                Arg::Str(&self.name),
                Arg::Bytes(digits),
                Arg::Word(c"KEEPTTL"),
            ],
        );
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_STRING, c"incrby", &self.name);
    }

    /// Closes the counter; WATCH and client-side caching hear of a write.
    pub fn close(self, ctx: Ctx) {
        if self.wrote {
            ctx.signal_modified(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn decimal_digits() {
        let mut buf = [0u8; 20];
        for v in [0, 7, 10, 1795392008466000, i64::MAX, -1, i64::MIN] {
            assert_eq!(decimal(v, &mut buf), v.to_string().as_bytes());
        }
    }
}
