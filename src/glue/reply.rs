//! Replies. Handlers return a `Reply` value and the firewall sends it, so a
//! handler never half-replies; errors map to Redis error replies only here.

use std::ffi::{CString, c_char};

use super::ffi::{Ctx, OwnedStr};
use crate::core::LockError;
use crate::core::rules::Holder;

pub enum Reply {
    Int(i64),
    Nil,
    /// A generated owner (`*`): a UUID.
    Owner(OwnedStr),
    /// LOCK.INFO of a held lock.
    Info {
        holder: Holder,
        waiters: usize,
    },
    /// The client is blocked; its reply comes later.
    Blocked,
}

pub fn send(ctx: Ctx, reply: Reply) {
    unsafe {
        match reply {
            Reply::Int(n) => {
                rm!(RedisModule_ReplyWithLongLong(ctx.0, n));
            }
            Reply::Nil => {
                rm!(RedisModule_ReplyWithNull(ctx.0));
            }
            Reply::Owner(owner) => {
                rm!(RedisModule_ReplyWithString(ctx.0, owner.ptr()));
            }
            Reply::Info { holder, waiters } => {
                // A map in RESP3; Redis flattens it to field/value pairs in RESP2.
                rm!(RedisModule_ReplyWithMap(ctx.0, 4));
                bulk(ctx, b"owner");
                bulk(ctx, &holder.owner);
                bulk(ctx, b"holds");
                rm!(RedisModule_ReplyWithLongLong(ctx.0, holder.holds));
                bulk(ctx, b"ttl");
                rm!(RedisModule_ReplyWithLongLong(
                    ctx.0,
                    holder.ttl.unwrap_or(-1)
                ));
                bulk(ctx, b"waiters");
                rm!(RedisModule_ReplyWithLongLong(
                    ctx.0,
                    i64::try_from(waiters).unwrap_or(i64::MAX)
                ));
            }
            Reply::Blocked => {}
        }
    }
}

/// The one place a `LockError` becomes a Redis error reply.
pub fn error(ctx: Ctx, e: &LockError) {
    let message = e.message();
    // Only an internal error can carry a NUL (from a panic message).
    let text = match CString::new(message.as_bytes()) {
        Ok(text) => text,
        Err(_) => CString::new(message.replace('\0', " ")).unwrap_or_default(),
    };
    unsafe {
        rm!(RedisModule_ReplyWithError(ctx.0, text.as_ptr()));
    }
}

/// Client data always goes out as a bulk string (binary-safe).
pub fn bulk(ctx: Ctx, bytes: &[u8]) {
    unsafe {
        rm!(RedisModule_ReplyWithStringBuffer(
            ctx.0,
            bytes.as_ptr() as *const c_char,
            bytes.len()
        ));
    }
}
