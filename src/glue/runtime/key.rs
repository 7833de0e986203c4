//! `RawKey`: an open key, through the low-level key API (no command-table
//! round trips). Safe methods over the raw calls; what the writes mean
//! (replication, keyspace events) is the store layer's business.

use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

use super::ffi::{Ctx, OwnedStr, RStr, raw};
use super::firewall;
use crate::core::Millis;

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    String,
    Hash,
    Zset,
    Other,
}

pub struct RawKey {
    /// Null when opened for reading and the key does not exist.
    key: *mut raw::RedisModuleKey,
}

impl RawKey {
    /// Opens `name` in the context's database. For writing, a logically
    /// expired key is deleted here (as any write command would).
    pub fn open(ctx: Ctx, name: &RStr, write: bool) -> RawKey {
        let flags = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: a live context and a valid name; the key handle is closed
        // exactly once, in Drop.
        let key = unsafe { rm!(RedisModule_OpenKey(ctx.0, name.ptr(), flags as c_int)) };
        RawKey { key }
    }

    fn handle(&self) -> Option<NonNull<raw::RedisModuleKey>> {
        NonNull::new(self.key)
    }

    pub fn kind(&self) -> KeyKind {
        let Some(key) = self.handle() else {
            return KeyKind::Empty;
        };
        // SAFETY: an open key.
        match unsafe { rm!(RedisModule_KeyType(key.as_ptr())) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Fields of a hash, members of a sorted set, bytes of a string.
    pub fn len(&self) -> usize {
        match self.handle() {
            // SAFETY: an open key.
            Some(key) => unsafe { rm!(RedisModule_ValueLength(key.as_ptr())) },
            None => 0,
        }
    }

    pub fn hash_get(&self, field: &RStr) -> Option<OwnedStr> {
        let key = self.handle()?;
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: an open key, one (field, out-pointer) pair and the NULL
        // terminator the variadic call expects; the value is ours to free.
        unsafe {
            rm!(RedisModule_HashGet(
                key.as_ptr(),
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>()
            ));
        }
        OwnedStr::adopt(value)
    }

    /// HSET of one field (creates the hash; keeps the key's expiry).
    pub fn hash_set(&self, field: &RStr, value: &RStr) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing, one (field, value) pair and
        // the NULL terminator; Redis copies both.
        unsafe {
            rm!(RedisModule_HashSet(
                key.as_ptr(),
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr(),
                value.ptr(),
                ptr::null_mut::<c_void>()
            ));
        }
    }

    /// HDEL of one field (the key goes when its last field does).
    pub fn hash_del(&self, field: &RStr) {
        let Some(key) = self.handle() else { return };
        // SAFETY: as `hash_set`; REDISMODULE_HASH_DELETE is the API's marker
        // value for "delete this field".
        unsafe {
            rm!(RedisModule_HashSet(
                key.as_ptr(),
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr(),
                raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>()
            ));
        }
    }

    /// Calls `f` with every (field, value) of a hash (or member, score-text
    /// of a set), stopping early when it returns false.
    pub fn scan(&self, mut f: impl FnMut(&[u8], &[u8]) -> bool) {
        let Some(key) = self.handle() else { return };
        type Visit<'a> = (&'a mut dyn FnMut(&[u8], &[u8]) -> bool, bool);
        unsafe extern "C" fn visit(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            out: *mut c_void,
        ) {
            firewall::callback((), || {
                // SAFETY: `out` is the `Visit` passed below, alive for the
                // scan; field and value are valid for this callback (value may
                // be NULL for set members).
                let (f, going, field, value) = unsafe {
                    let (f, going) = &mut *(out as *mut Visit<'_>);
                    let value: &[u8] = match value.is_null() {
                        true => &[],
                        false => RStr::from_ptr(&value).as_ref(),
                    };
                    (f, going, RStr::from_ptr(&field).as_ref(), value)
                };
                if *going {
                    *going = f(field, value);
                }
            })
        }
        let mut state: Visit<'_> = (&mut f, true);
        // SAFETY: a cursor created and destroyed here around an open key;
        // `visit` only touches `state` through the pointer, while it lives.
        unsafe {
            let cursor = rm!(RedisModule_ScanCursorCreate());
            while state.1
                && rm!(RedisModule_ScanKey(
                    key.as_ptr(),
                    cursor,
                    Some(visit),
                    &mut state as *mut Visit<'_> as *mut c_void
                )) != 0
            {}
            rm!(RedisModule_ScanCursorDestroy(cursor));
        }
    }

    /// The absolute deadline (ms on the server clock); `None`: no expiry or
    /// no key. Absolute, not `now + ttl`: since 7.2 the relative TTL counts
    /// from the command's start, which `now` may have passed.
    pub fn deadline(&self) -> Option<Millis> {
        let key = self.handle()?;
        // SAFETY: an open key.
        let at = unsafe { rm!(RedisModule_GetAbsExpire(key.as_ptr())) };
        (at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at)
    }

    pub fn set_deadline(&self, deadline: Millis) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing.
        unsafe { rm!(RedisModule_SetAbsExpire(key.as_ptr(), deadline)) };
    }

    pub fn persist(&self) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing.
        unsafe {
            rm!(RedisModule_SetExpire(
                key.as_ptr(),
                raw::REDISMODULE_NO_EXPIRE as std::ffi::c_longlong
            ))
        };
    }

    pub fn delete(&self) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing.
        unsafe { rm!(RedisModule_DeleteKey(key.as_ptr())) };
    }

    /// Calls `f` with a string value's bytes, read in place. Writes: it
    /// leaves an `int`- or `embstr`-encoded value a plain string of its own
    /// (Redis unshares it for direct access), so read-only commands read
    /// through `Ctx::call_for_bytes` instead.
    pub fn with_string<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let key = self.handle()?;
        let mut len = 0usize;
        // SAFETY: an open string key; the bytes are valid until the key is
        // written or closed, which cannot happen while `f` runs.
        unsafe {
            let p = rm!(RedisModule_StringDMA(
                key.as_ptr(),
                &mut len,
                raw::REDISMODULE_READ as c_int
            ));
            if p.is_null() {
                return None;
            }
            Some(f(std::slice::from_raw_parts(p as *const u8, len)))
        }
    }

    /// Overwrites a string value with `bytes` in place, keeping its TTL
    /// (creating the key if it does not exist).
    pub fn write_string(&self, bytes: &[u8]) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing; Truncate sizes (or creates)
        // the string, DMA WRITE then gives exactly `len` writable bytes.
        unsafe {
            if rm!(RedisModule_StringTruncate(key.as_ptr(), bytes.len()))
                != raw::REDISMODULE_OK as c_int
            {
                return;
            }
            let mut len = 0usize;
            let p = rm!(RedisModule_StringDMA(
                key.as_ptr(),
                &mut len,
                raw::REDISMODULE_WRITE as c_int
            ));
            assert!(!p.is_null() && len == bytes.len(), "string DMA");
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p as *mut u8, len);
        }
    }

    /// SET: replaces whatever the key holds (any type) with the string
    /// `value`, with no expiry (creating the key if it does not exist).
    pub fn set_string(&self, value: &RStr) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing (a key opened for writing
        // always has a handle); Redis copies or retains the string itself.
        unsafe { rm!(RedisModule_StringSet(key.as_ptr(), value.ptr())) };
    }

    /// ZADD one member.
    pub fn zset_add(&self, score: f64, member: &RStr) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open key opened for writing; NULL flags = plain ZADD.
        unsafe {
            rm!(RedisModule_ZsetAdd(
                key.as_ptr(),
                score,
                member.ptr(),
                ptr::null_mut()
            ))
        };
    }

    /// ZREM one member; true if it was there.
    pub fn zset_rem(&self, member: &RStr) -> bool {
        let Some(key) = self.handle() else {
            return false;
        };
        let mut deleted: c_int = 0;
        // SAFETY: an open key opened for writing.
        unsafe {
            rm!(RedisModule_ZsetRem(
                key.as_ptr(),
                member.ptr(),
                &mut deleted
            ))
        };
        deleted != 0
    }

    /// ZSCORE.
    pub fn zset_score(&self, member: &RStr) -> Option<f64> {
        let key = self.handle()?;
        let mut score = 0f64;
        // SAFETY: an open sorted set.
        let found = unsafe {
            rm!(RedisModule_ZsetScore(
                key.as_ptr(),
                member.ptr(),
                &mut score
            ))
        };
        (found == raw::REDISMODULE_OK as c_int).then_some(score)
    }

    /// Calls `f` with the members scored `min..=max` in score order, stopping
    /// when it returns false.
    pub fn zset_range(&self, min: f64, max: f64, mut f: impl FnMut(&[u8], f64) -> bool) {
        let Some(key) = self.handle() else { return };
        // SAFETY: an open sorted set; the range is stopped before returning;
        // each element string is ours to free (adopted).
        unsafe {
            if rm!(RedisModule_ZsetFirstInScoreRange(
                key.as_ptr(),
                min,
                max,
                0,
                0
            )) != raw::REDISMODULE_OK as c_int
            {
                return;
            }
            while rm!(RedisModule_ZsetRangeEndReached(key.as_ptr())) == 0 {
                let mut score = 0f64;
                let member = rm!(RedisModule_ZsetRangeCurrentElement(
                    key.as_ptr(),
                    &mut score
                ));
                let Some(member) = OwnedStr::adopt(member) else {
                    break;
                };
                if !f(member.as_ref(), score) {
                    break;
                }
                if rm!(RedisModule_ZsetRangeNext(key.as_ptr())) == 0 {
                    break;
                }
            }
            rm!(RedisModule_ZsetRangeStop(key.as_ptr()));
        }
    }
}

impl Drop for RawKey {
    fn drop(&mut self) {
        if let Some(key) = self.handle() {
            // SAFETY: opened by `open`, closed once.
            unsafe { rm!(RedisModule_CloseKey(key.as_ptr())) }
        }
    }
}
