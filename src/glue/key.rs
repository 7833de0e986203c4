//! `LockKey`: the lock rules' `LockStore` over a real Redis key, through the
//! low-level key API (no command-table round trips). Every write is applied,
//! replicated as its effect with absolute times (HSET / PEXPIREAT / DEL, never
//! LOCK.* verbatim: a replica or AOF replay must not restart a lease) and
//! announced as the keyspace event the equivalent command would fire.

use std::ffi::{CStr, c_int, c_longlong, c_void};
use std::ptr;

use super::ffi::{Ctx, OwnedStr, RStr, StaticStr, raw};
use super::{events, firewall};
use crate::core::Millis;
use crate::core::store::{LockStore, Shape};

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
    /// Null when opened for reading and the key does not exist.
    key: *mut raw::RedisModuleKey,
    now: Millis,
    /// Something was written: WATCH and client-side caching must hear of it
    /// (and only then: the module opts out of Redis's implicit signal, which
    /// would fire for every key opened for writing, even by a nil ACQUIRE).
    wrote: bool,
}

impl<'a> LockKey<'a> {
    /// Opens the key (for writing, a logically expired key is deleted here).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> LockKey<'a> {
        let flags = match mode {
            Mode::Read => raw::REDISMODULE_READ,
            Mode::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        };
        let key = unsafe { rm!(RedisModule_OpenKey(ctx.0, name.ptr(), flags as c_int)) };
        LockKey {
            ctx,
            name,
            key,
            now: ctx.now(),
            wrote: false,
        }
    }

    /// The key's name (borrowed from the caller, not from the open key).
    pub fn name(&self) -> &'a RStr {
        self.name
    }

    /// Fires the keyspace event the equivalent command would. Marked as our
    /// own, so the module's subscriber does not re-serve queues we serve.
    fn notify(&self, class: c_int, event: &CStr) {
        events::own_event(|| unsafe {
            rm!(RedisModule_NotifyKeyspaceEvent(
                self.ctx.0,
                class,
                event.as_ptr(),
                self.name.ptr()
            ));
        });
    }
}

impl Drop for LockKey<'_> {
    fn drop(&mut self) {
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
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hset");
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
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
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
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
    }
}
