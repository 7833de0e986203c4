//! `LockKey`: the lock rules' `LockStore` over a real Redis key, through the
//! low-level key API (no command-table round trips). Every write is applied,
//! replicated as its effect with absolute times (HSET / PEXPIREAT / DEL / SET,
//! never LOCK.* verbatim: a replica or AOF replay must not restart a lease or
//! run lock logic) and announced as the keyspace event the equivalent
//! command would fire.
//!
//! The lock's fencing-token counter (`redisson_lock_token:{key}`) is a
//! second key, opened only by a call that reads or issues a token.

use super::token::TokenKey;
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

    /// The token counter, opened on first use.
    fn token_key(&mut self) -> LockResult<&mut TokenKey> {
        if self.token.is_none() {
            let cluster = crate::glue::store::server::cluster();
            let write = self.mode == Mode::Write;
            self.token = Some(TokenKey::open(self.ctx, self.name, write, cluster)?);
        }
        self.token
            .as_mut()
            .ok_or_else(|| LockError::Internal("token key not open".into()))
    }
}

impl Drop for LockKey<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            token.close(self.ctx);
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
        self.ctx.replicate(
            c"HSET",
            &[Arg::Str(self.name), Arg::Str(owner), Arg::Int(holds)],
        );
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
        self.token_key()?.read(ctx)
    }

    fn set_token(&mut self, value: i64) {
        let ctx = self.ctx;
        let Ok(token) = self.token_key() else {
            // `token()` was called (and succeeded) before any write.
            panic!("set_token before a successful token()");
        };
        token.write(ctx, value);
    }
}
