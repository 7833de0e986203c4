//! `LockKey`: the lock rules' `LockStore` over a real Redis key, through the
//! low-level key API (no command-table round trips). Every write is applied,
//! replicated as its effect with absolute times (HSET / PEXPIREAT / DEL / SET,
//! never LOCK.* verbatim: a replica or AOF replay must not restart a lease or
//! run lock logic) and announced as the keyspace event the equivalent
//! command would fire.
//!
//! The lock's fencing-token counter (`redisson_lock_token:{key}`) is a
//! second key, opened only by a call that reads or issues a token.

use std::ffi::{CStr, c_char, c_int, c_longlong, c_void};
use std::ptr;

use super::OwnEvent;
use crate::core::channel::token_key;
use crate::core::number::parse_i64;
use crate::core::slot::key_slot;
use crate::core::store::{LockStore, Shape};
use crate::core::{LockError, LockResult, Millis};
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr, StaticStr, raw};
use crate::glue::runtime::firewall;

/// The hold count `1`, written by every fresh acquire.
pub static ONE: StaticStr = StaticStr::empty();

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

pub struct LockKey<'a> {
    ctx: Ctx,
    name: &'a RStr,
    mode: Mode,
    /// Null when opened for reading and the key does not exist.
    key: *mut raw::RedisModuleKey,
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
    key: *mut raw::RedisModuleKey,
    wrote: bool,
}

impl<'a> LockKey<'a> {
    /// Opens the key (for writing, a logically expired key is deleted here).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> LockKey<'a> {
        let key = open_raw(ctx, name, mode);
        LockKey {
            ctx,
            name,
            mode,
            key,
            now: ctx.now(),
            wrote: false,
            token: None,
        }
    }

    /// The key's name (borrowed from the caller, not from the open key).
    pub fn name(&self) -> &'a RStr {
        self.name
    }

    /// Fires the keyspace event the equivalent command would. Marked as our
    /// own, so the module's subscriber does not re-serve queues we serve.
    fn notify(&self, class: c_int, event: &CStr, key: &RStr) {
        let _own = OwnEvent::mark();
        unsafe {
            rm!(RedisModule_NotifyKeyspaceEvent(
                self.ctx.0,
                class,
                event.as_ptr(),
                key.ptr()
            ));
        }
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
            let key = open_raw(self.ctx, &name, self.mode);
            self.token = Some(TokenKey {
                name,
                key,
                wrote: false,
            });
        }
        // Set just above.
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

fn open_raw(ctx: Ctx, name: &RStr, mode: Mode) -> *mut raw::RedisModuleKey {
    let flags = match mode {
        Mode::Read => raw::REDISMODULE_READ,
        Mode::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
    };
    unsafe { rm!(RedisModule_OpenKey(ctx.0, name.ptr(), flags as c_int)) }
}

impl Drop for LockKey<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            if token.wrote {
                unsafe { rm!(RedisModule_SignalModifiedKey(self.ctx.0, token.name.ptr())) };
            }
            if !token.key.is_null() {
                unsafe { rm!(RedisModule_CloseKey(token.key)) }
            }
        }
        if self.wrote {
            unsafe { rm!(RedisModule_SignalModifiedKey(self.ctx.0, self.name.ptr())) };
        }
        if !self.key.is_null() {
            unsafe { rm!(RedisModule_CloseKey(self.key)) }
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
        if self.key.is_null() {
            return Shape::Missing;
        }
        match unsafe { rm!(RedisModule_KeyType(self.key)) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Shape::Missing,
            raw::REDISMODULE_KEYTYPE_HASH => Shape::Hash {
                fields: unsafe { rm!(RedisModule_ValueLength(self.key)) },
            },
            _ => Shape::Other,
        }
    }

    fn get(&mut self, field: &RStr) -> Option<OwnedStr> {
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        unsafe {
            rm!(RedisModule_HashGet(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>()
            ));
        }
        OwnedStr::adopt(value)
    }

    fn only_entry(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        /// The first entry, and how many the scan saw.
        type Seen = (Option<(Vec<u8>, Vec<u8>)>, usize);
        unsafe extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            out: *mut c_void,
        ) {
            firewall::callback((), || unsafe {
                let (first, count) = &mut *(out as *mut Seen);
                *count += 1;
                if first.is_none() {
                    let field = RStr::from_ptr(&field).as_ref().to_vec();
                    let value = RStr::from_ptr(&value).as_ref().to_vec();
                    *first = Some((field, value));
                }
            })
        }
        let mut seen: Seen = (None, 0);
        unsafe {
            let cursor = rm!(RedisModule_ScanCursorCreate());
            while rm!(RedisModule_ScanKey(
                self.key,
                cursor,
                Some(collect),
                &mut seen as *mut Seen as *mut c_void
            )) != 0
            {}
            rm!(RedisModule_ScanCursorDestroy(cursor));
        }
        match seen {
            (entry, 1) => entry,
            _ => None,
        }
    }

    fn ttl(&mut self) -> Option<Millis> {
        let ttl = unsafe { rm!(RedisModule_GetExpire(self.key)) };
        (ttl != raw::REDISMODULE_NO_EXPIRE as i64).then_some(ttl)
    }

    fn set_holds(&mut self, owner: &RStr, holds: i64) {
        self.wrote = true;
        let created;
        let value = if holds == 1 {
            ONE.get()
        } else {
            created = OwnedStr::from_i64(holds);
            created.ptr()
        };
        unsafe {
            rm!(RedisModule_HashSet(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                owner.ptr(),
                value,
                ptr::null_mut::<c_void>()
            ));
            rm!(RedisModule_Replicate(
                self.ctx.0,
                c"HSET".as_ptr(),
                c"ssl".as_ptr(),
                self.name.ptr(),
                owner.ptr(),
                holds as c_longlong
            ));
        }
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hset", self.name);
    }

    fn set_deadline(&mut self, deadline: Millis) {
        self.wrote = true;
        unsafe {
            rm!(RedisModule_SetAbsExpire(self.key, deadline));
            rm!(RedisModule_Replicate(
                self.ctx.0,
                c"PEXPIREAT".as_ptr(),
                c"sl".as_ptr(),
                self.name.ptr(),
                deadline as c_longlong
            ));
        }
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", self.name);
    }

    fn clear_deadline(&mut self) {
        self.wrote = true;
        unsafe {
            rm!(RedisModule_SetExpire(
                self.key,
                raw::REDISMODULE_NO_EXPIRE as c_longlong
            ));
            rm!(RedisModule_Replicate(
                self.ctx.0,
                c"PERSIST".as_ptr(),
                c"s".as_ptr(),
                self.name.ptr()
            ));
        }
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist", self.name);
    }

    fn delete(&mut self) {
        self.wrote = true;
        unsafe {
            rm!(RedisModule_DeleteKey(self.key));
            rm!(RedisModule_Replicate(
                self.ctx.0,
                c"DEL".as_ptr(),
                c"s".as_ptr(),
                self.name.ptr()
            ));
        }
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", self.name);
    }

    fn token(&mut self) -> LockResult<i64> {
        let token = self.token_key()?;
        if token.key.is_null() {
            return Ok(0);
        }
        match unsafe { rm!(RedisModule_KeyType(token.key)) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Ok(0),
            raw::REDISMODULE_KEYTYPE_STRING => {
                let mut len = 0usize;
                let p = unsafe {
                    rm!(RedisModule_StringDMA(
                        token.key,
                        &mut len,
                        raw::REDISMODULE_READ as c_int
                    ))
                };
                if p.is_null() {
                    return Err(LockError::TokenNotInteger);
                }
                // SAFETY: DMA gives `len` readable bytes while the key is open.
                let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
                parse_i64(bytes).ok_or(LockError::TokenNotInteger)
            }
            _ => Err(LockError::WrongType),
        }
    }

    fn set_token(&mut self, value: i64) {
        let ctx = self.ctx;
        let Ok(token) = self.token_key() else {
            // `token()` was called (and succeeded) before any write.
            panic!("set_token before a successful token()");
        };
        token.wrote = true;
        let mut buf = [0u8; 20];
        let digits = decimal(value, &mut buf);
        unsafe {
            // The digits are written in place: `token()` read the counter
            // through DMA, which left it a plain string of its own (a new
            // counter is created as one, with no TTL, as RFencedLock's).
            // Unlike replacing the value (setKey), this keeps any TTL
            // someone gave it, as INCR does, and costs far less.
            rm!(RedisModule_StringTruncate(token.key, digits.len()));
            let mut len = 0usize;
            let p = rm!(RedisModule_StringDMA(
                token.key,
                &mut len,
                raw::REDISMODULE_WRITE as c_int
            ));
            assert!(!p.is_null() && len == digits.len(), "counter DMA");
            std::ptr::copy_nonoverlapping(digits.as_ptr(), p as *mut u8, len);
            rm!(RedisModule_Replicate(
                ctx.0,
                c"SET".as_ptr(),
                c"sbc".as_ptr(),
                token.name.ptr(),
                digits.as_ptr() as *const c_char,
                digits.len(),
                c"KEEPTTL".as_ptr() as *const c_char
            ));
        }
        let name: &RStr = &token.name;
        let _own = OwnEvent::mark();
        unsafe {
            rm!(RedisModule_NotifyKeyspaceEvent(
                ctx.0,
                raw::REDISMODULE_NOTIFY_STRING as c_int,
                c"incrby".as_ptr(),
                name.ptr()
            ));
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
