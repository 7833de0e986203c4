//! `LockKey`: the lock rules' `LockStore` over a real Redis key, through the
//! low-level key API (no command-table round trips). Every write is applied,
//! replicated as its effect with absolute times (HSET / PEXPIREAT / DEL / SET,
//! never LOCK.* verbatim: a replica or AOF replay must not restart a lease or
//! run lock logic) and announced as the keyspace event the equivalent
//! command would fire.
//!
//! The lock's fencing-token counter (`redisson_lock_token:{key}`) is a
//! second key, opened only by a call that reads or issues a token.

use crate::core::channel::token_key;
use crate::core::number::parse_i64;
use crate::core::slot::key_slot;
use crate::core::store::{LockStore, Shape};
use crate::core::{LockError, LockResult, Millis};
use crate::glue::runtime::ffi::{Arg, Ctx, OwnedStr, RStr, StaticStr, raw};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::store::OwnEvent;

/// The hold count `1`, written by every fresh acquire.
pub static ONE: StaticStr = StaticStr::empty();

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A read-only command (LOCK.INFO): changes nothing, not even a value's
    /// encoding.
    Read,
    Write,
}

pub struct LockKey<'a> {
    ctx: Ctx,
    name: &'a RStr,
    mode: Mode,
    key: RawKey,
    now: Millis,
    /// Something was written: WATCH and client-side caching must hear of it
    /// (and only then: the module opts out of Redis's implicit signal, which
    /// would fire for every key opened for writing, even by a nil ACQUIRE).
    wrote: bool,
    token: Option<TokenKey>,
}

/// The open token counter.
struct TokenKey {
    name: OwnedStr,
    /// Open only for writing calls; read-only calls read with GET.
    key: Option<RawKey>,
    wrote: bool,
}

impl<'a> LockKey<'a> {
    /// Opens the key (for writing, a logically expired key is deleted here).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> LockKey<'a> {
        LockKey {
            ctx,
            name,
            mode,
            key: RawKey::open(ctx, name, mode == Mode::Write),
            now: ctx.now(),
            wrote: false,
            token: None,
        }
    }

    /// The key's name (borrowed from the caller, not from the open key).
    pub fn name(&self) -> &'a RStr {
        self.name
    }

    /// The absolute deadline of the lease (`None`: no expiry, or no lock).
    pub fn deadline(&self) -> Option<Millis> {
        self.key.deadline()
    }

    /// Fires the keyspace event the equivalent command would. Marked as our
    /// own, so the module's subscriber does not re-serve queues we serve.
    fn notify(&self, class: i32, event: &std::ffi::CStr, key: &RStr) {
        let _own = OwnEvent::mark();
        self.ctx.notify(class, event, key);
    }

    /// The token counter, opened on first use. In a cluster it must share
    /// the lock's slot: this node may not serve any other.
    fn token_key(&mut self) -> LockResult<&mut TokenKey> {
        if self.token.is_none() {
            let name = token_key(self.name.as_ref());
            if crate::glue::store::server::cluster()
                && key_slot(&name) != key_slot(self.name.as_ref())
            {
                return Err(LockError::TokenCrossSlot);
            }
            let name = OwnedStr::new(&name);
            let key = (self.mode == Mode::Write).then(|| RawKey::open(self.ctx, &name, true));
            self.token = Some(TokenKey {
                name,
                key,
                wrote: false,
            });
        }
        self.token
            .as_mut()
            .ok_or_else(|| LockError::Internal("token key not open".into()))
    }
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

impl Drop for LockKey<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take()
            && token.wrote
        {
            self.ctx.signal_modified(&token.name);
        }
        if self.wrote {
            self.ctx.signal_modified(self.name);
        }
    }
}

impl LockStore for LockKey<'_> {
    type Name = RStr;
    type Value = OwnedStr;

    fn now(&self) -> Millis {
        self.now
    }

    fn shape(&mut self) -> Shape {
        match self.key.kind() {
            KeyKind::Empty => Shape::Missing,
            KeyKind::Hash => Shape::Hash {
                fields: self.key.len(),
            },
            _ => Shape::Other,
        }
    }

    fn get(&mut self, field: &RStr) -> Option<OwnedStr> {
        self.key.hash_get(field)
    }

    fn only_entry(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut first = None;
        let mut count = 0usize;
        self.key.scan(|field, value| {
            count += 1;
            if first.is_none() {
                first = Some((field.to_vec(), value.to_vec()));
            }
            count < 2
        });
        first.filter(|_| count == 1)
    }

    fn ttl(&mut self) -> Option<Millis> {
        self.key.deadline().map(|at| at - self.now)
    }

    fn set_holds(&mut self, owner: &RStr, holds: i64) {
        self.wrote = true;
        let created;
        let value: &RStr = if holds == 1 {
            ONE.get()
        } else {
            created = OwnedStr::from_i64(holds);
            &created
        };
        self.key.hash_set(owner, value);
        self.ctx
            .replicate(c"HSET", &[Arg::Str(self.name), Arg::Str(owner), Arg::Int(holds)]);
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hset", self.name);
    }

    fn set_deadline(&mut self, deadline: Millis) {
        self.wrote = true;
        self.key.set_deadline(deadline);
        self.ctx
            .replicate(c"PEXPIREAT", &[Arg::Str(self.name), Arg::Int(deadline)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", self.name);
    }

    fn clear_deadline(&mut self) {
        self.wrote = true;
        self.key.persist();
        self.ctx.replicate(c"PERSIST", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist", self.name);
    }

    fn delete(&mut self) {
        self.wrote = true;
        self.key.delete();
        self.ctx.replicate(c"DEL", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", self.name);
    }

    fn token(&mut self) -> LockResult<i64> {
        let ctx = self.ctx;
        let token = self.token_key()?;
        match &token.key {
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
            None => match ctx.call_for_bytes(c"GET", &[&token.name]) {
                Ok(Some(bytes)) => parse_i64(&bytes).ok_or(LockError::TokenNotInteger),
                Ok(None) => Ok(0),
                Err(()) => Err(LockError::WrongType),
            },
        }
    }

    fn set_token(&mut self, value: i64) {
        let ctx = self.ctx;
        let Ok(token) = self.token_key() else {
            // `token()` was called (and succeeded) before any write.
            panic!("set_token before a successful token()");
        };
        let Some(key) = &token.key else {
            panic!("set_token on a read-only lock key");
        };
        token.wrote = true;
        let mut buf = [0u8; 20];
        let digits = decimal(value, &mut buf);
        // The digits are written in place: `token()` read the counter in
        // place, which left it a plain string of its own (a new counter is
        // created as one, with no TTL, as RFencedLock's). Unlike replacing
        // the value, this keeps any TTL someone gave it, as INCR does, and
        // costs far less.
        key.write_string(digits);
        ctx.replicate(
            c"SET",
            &[
                Arg::Str(&token.name),
                Arg::Bytes(digits),
                Arg::Word(c"KEEPTTL"),
            ],
        );
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_STRING, c"incrby", &token.name);
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
