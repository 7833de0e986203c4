//! `RwKey`: the read-write lock rules' `RwLockStore` over real keys, in
//! Redisson's `RReadWriteLock` layout: the hash at the lock's key (`mode`,
//! readers' fields, the writer's `<owner>:write`), one string key per read
//! hold (`{key}:<owner>:rwlock_timeout:<n>`, value `1`, that hold's lease
//! as its TTL), and the fencing-token counter (WRITE ... TOKEN).
//!
//! As for `LockKey`: every write is applied through the low-level key API,
//! replicated as its effect with absolute times (HSET / HDEL / PEXPIREAT /
//! PERSIST / DEL on the hash; `SET ... PXAT` / PEXPIREAT / PERSIST / DEL on
//! a timeout key), announced as the keyspace event the equivalent command
//! fires (marked as the module's own), and signalled as modified only when
//! written. Read-only calls (RWLOCK.INFO, re-checks) open everything for
//! reading and change nothing.
//!
//! Timeout keys are opened one at a time, each for the one read or write:
//! never two handles to one key.

use super::token::TokenKey;
use super::{Mode, OwnEvent, server};
use crate::core::channel::rwlock_timeout_key;
use crate::core::rwlock::{KeyTtl, RwLockStore};
use crate::core::slot::rwlock_timeout_key_same_slot;
use crate::core::store::Shape;
use crate::core::{LockError, LockResult, Millis};
use crate::glue::runtime::ffi::{Arg, Ctx, OwnedStr, RStr, raw};
use crate::glue::runtime::key::{KeyKind, RawKey};

pub struct RwKey<'a> {
    ctx: Ctx,
    name: &'a RStr,
    mode: Mode,
    key: RawKey,
    now: Millis,
    /// The hash was written (signalled as modified when closed).
    wrote: bool,
    token: Option<TokenKey>,
    /// Fields set (applied and announced) but not yet replicated: one HSET
    /// carries them all (a grant sets `mode` and the holder's field; each
    /// replicated command costs the server a command lookup), sent before
    /// any other write is replicated and at the latest when the key closes.
    unreplicated: Vec<(OwnedStr, OwnedStr)>,
}

impl<'a> RwKey<'a> {
    /// Opens the lock's hash (for writing, a logically expired hash is
    /// deleted here, as any write command would; that expiry is the
    /// caller's to handle, so its event is marked as the module's own).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> RwKey<'a> {
        let key = {
            let _own = OwnEvent::mark();
            RawKey::open(ctx, name, mode == Mode::Write)
        };
        RwKey {
            ctx,
            name,
            mode,
            key,
            now: ctx.now(),
            wrote: false,
            token: None,
            unreplicated: Vec::new(),
        }
    }

    /// Replicates the fields set since the last write as one HSET, so that
    /// replicas apply every write in the order it was made.
    fn replicate_fields(&mut self) {
        if self.unreplicated.is_empty() {
            return;
        }
        let fields = std::mem::take(&mut self.unreplicated);
        let mut args = Vec::with_capacity(1 + 2 * fields.len());
        args.push(Arg::Str(self.name));
        for (field, value) in &fields {
            args.push(Arg::Str(field));
            args.push(Arg::Str(value));
        }
        self.ctx.replicate(c"HSET", &args);
    }

    /// The lock's key name.
    pub fn name(&self) -> &'a RStr {
        self.name
    }

    /// Whether the key holds nothing at all (a lapsed or deleted lock).
    pub fn is_missing(&self) -> bool {
        self.key.kind() == KeyKind::Empty
    }

    fn notify(&self, class: i32, event: &std::ffi::CStr, key: &RStr) {
        let _own = OwnEvent::mark();
        self.ctx.notify(class, event, key);
    }

    fn hold_name(&self, owner: &[u8], n: i64) -> OwnedStr {
        OwnedStr::new(&rwlock_timeout_key(self.name.as_ref(), owner, n))
    }

    /// Opens a timeout key for one write; its lazy expiry (if it had
    /// lapsed) is the module's own doing.
    fn open_hold(&self, name: &RStr) -> RawKey {
        let _own = OwnEvent::mark();
        RawKey::open(self.ctx, name, true)
    }

    /// After a write to a timeout key: WATCH and client-side caching hear
    /// of it.
    fn hold_written(&self, name: &RStr) {
        self.ctx.signal_modified(name);
    }

    fn token_key(&mut self) -> LockResult<&mut TokenKey> {
        if self.token.is_none() {
            let write = self.mode == Mode::Write;
            self.token = Some(TokenKey::open(
                self.ctx,
                self.name,
                write,
                server::cluster(),
            )?);
        }
        self.token
            .as_mut()
            .ok_or_else(|| LockError::Internal("token key not open".into()))
    }
}

impl Drop for RwKey<'_> {
    fn drop(&mut self) {
        self.replicate_fields();
        if let Some(token) = self.token.take() {
            token.close(self.ctx);
        }
        if self.wrote {
            self.ctx.signal_modified(self.name);
        }
    }
}

impl RwLockStore for RwKey<'_> {
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

    fn entries(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut all = Vec::with_capacity(self.key.len());
        self.key.scan(|field, value| {
            all.push((field.to_vec(), value.to_vec()));
            true
        });
        all
    }

    fn ttl(&mut self) -> Option<Millis> {
        self.key.deadline().map(|at| at - self.now)
    }

    fn set_field(&mut self, field: &[u8], value: &[u8]) {
        self.wrote = true;
        let (field, value) = (OwnedStr::new(field), OwnedStr::new(value));
        self.key.hash_set(&field, &value);
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hset", self.name);
        self.unreplicated.push((field, value));
    }

    fn replicate_writes(&mut self) {
        self.replicate_fields();
    }

    fn delete_field(&mut self, field: &[u8]) {
        self.replicate_fields();
        self.wrote = true;
        let field = OwnedStr::new(field);
        self.key.hash_del(&field);
        self.ctx
            .replicate(c"HDEL", &[Arg::Str(self.name), Arg::Str(&field)]);
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hdel", self.name);
    }

    fn set_deadline(&mut self, deadline: Millis) {
        self.replicate_fields();
        self.wrote = true;
        self.key.set_deadline(deadline);
        self.ctx
            .replicate(c"PEXPIREAT", &[Arg::Str(self.name), Arg::Int(deadline)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", self.name);
    }

    fn clear_deadline(&mut self) {
        self.replicate_fields();
        self.wrote = true;
        self.key.persist();
        self.ctx.replicate(c"PERSIST", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist", self.name);
    }

    fn delete(&mut self) {
        self.replicate_fields();
        self.wrote = true;
        self.key.delete();
        self.ctx.replicate(c"DEL", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", self.name);
    }

    fn check_hold_slot(&mut self, owner: &[u8]) -> LockResult<()> {
        match server::cluster() && !rwlock_timeout_key_same_slot(self.name.as_ref(), owner) {
            true => Err(LockError::RwCrossSlot),
            false => Ok(()),
        }
    }

    fn hold_ttl(&mut self, owner: &[u8], n: i64) -> KeyTtl {
        let name = self.hold_name(owner, n);
        let key = {
            let _own = OwnEvent::mark();
            RawKey::open(self.ctx, &name, false)
        };
        if key.kind() == KeyKind::Empty {
            return KeyTtl::Missing;
        }
        match key.deadline() {
            None => KeyTtl::Forever,
            // Lapsed but not yet deleted (a replica): gone.
            Some(at) if at < self.now => KeyTtl::Missing,
            Some(at) => KeyTtl::Left(at - self.now),
        }
    }

    fn set_hold(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>) {
        self.replicate_fields();
        let name = self.hold_name(owner, n);
        let key = self.open_hold(&name);
        key.set_string(&OwnedStr::new(b"1"));
        if let Some(at) = deadline {
            key.set_deadline(at);
        }
        drop(key);
        match deadline {
            Some(at) => self.ctx.replicate(
                c"SET",
                &[
                    Arg::Str(&name),
                    Arg::Word(c"1"),
                    Arg::Word(c"PXAT"),
                    Arg::Int(at),
                ],
            ),
            None => self
                .ctx
                .replicate(c"SET", &[Arg::Str(&name), Arg::Word(c"1")]),
        }
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set", &name);
        if deadline.is_some() {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", &name);
        }
        self.hold_written(&name);
    }

    fn set_hold_deadline(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>) {
        self.replicate_fields();
        let name = self.hold_name(owner, n);
        let key = self.open_hold(&name);
        if key.kind() == KeyKind::Empty {
            return;
        }
        match deadline {
            Some(at) => {
                key.set_deadline(at);
                drop(key);
                self.ctx
                    .replicate(c"PEXPIREAT", &[Arg::Str(&name), Arg::Int(at)]);
                self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", &name);
            }
            None => {
                key.persist();
                drop(key);
                self.ctx.replicate(c"PERSIST", &[Arg::Str(&name)]);
                self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist", &name);
            }
        }
        self.hold_written(&name);
    }

    fn delete_hold(&mut self, owner: &[u8], n: i64) {
        self.replicate_fields();
        let name = self.hold_name(owner, n);
        let key = self.open_hold(&name);
        if key.kind() == KeyKind::Empty {
            return;
        }
        key.delete();
        drop(key);
        self.ctx.replicate(c"DEL", &[Arg::Str(&name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", &name);
        self.hold_written(&name);
    }

    fn token(&mut self) -> LockResult<i64> {
        let ctx = self.ctx;
        self.token_key()?.read(ctx)
    }

    fn set_token(&mut self, token: i64) {
        self.replicate_fields();
        let ctx = self.ctx;
        let Ok(key) = self.token_key() else {
            // `token()` was called (and succeeded) before any write.
            panic!("set_token before a successful token()");
        };
        key.write(ctx, token);
    }
}
