//! Replies. Handlers return a `Reply` value (or a `LockError`) and
//! `respond` sends it, so a handler never half-replies; errors become Redis
//! error replies only here.

use std::ffi::{CString, c_char, c_int};

use super::ffi::{Ctx, Level, OwnedStr, log_with, raw};
use super::firewall;
use crate::core::{LockError, LockResult};

pub enum Reply {
    Int(i64),
    Nil,
    /// Client data or generated text, as a bulk string.
    Bulk(Vec<u8>),
    /// A successful acquisition: the hold count, or the generated owner for
    /// `*`; with TOKEN, `[that, token]`.
    Granted(Granted),
    /// Fields and values: a map in RESP3, a flat array in RESP2.
    Map(Vec<(&'static str, Reply)>),
    Array(Vec<Reply>),
    /// The client is blocked; its reply comes later.
    Blocked,
}

/// The one "hold count or generated owner, perhaps with a token" rule, for
/// immediate grants and grants after waiting alike.
pub struct Granted {
    pub holds: i64,
    /// `Some` when the owner was generated (`*`): the reply is the owner.
    pub generated: Option<OwnedStr>,
    pub token: Option<i64>,
}

/// Runs a command handler inside the panic firewall and sends its reply.
pub fn respond(ctx: Ctx, handler: impl FnOnce() -> LockResult<Reply>) -> c_int {
    let outcome = firewall::guard(handler).unwrap_or_else(|panic| Err(LockError::Internal(panic)));
    send_guarded(ctx, outcome);
    raw::REDISMODULE_OK as c_int
}

/// Sends an outcome. Replying cannot panic on anything a client sends, but
/// it runs in C's stack too: it stays inside the firewall.
pub fn send_guarded(ctx: Ctx, outcome: LockResult<Reply>) {
    if firewall::guard(|| send_outcome(ctx, outcome)).is_err() {
        log_with(ctx.0, Level::Warning, "lock module: failed to send a reply");
    }
}

fn send_outcome(ctx: Ctx, outcome: LockResult<Reply>) {
    match outcome {
        Ok(r) => send(ctx, r),
        Err(e) => error(ctx, &e),
    }
}

fn send(ctx: Ctx, reply: Reply) {
    match reply {
        Reply::Int(n) => int(ctx, n),
        // SAFETY: (this and every reply call below) the context of the call
        // being answered; buffers are valid for the call and copied.
        Reply::Nil => unsafe {
            rm!(RedisModule_ReplyWithNull(ctx.0));
        },
        Reply::Bulk(bytes) => bulk(ctx, &bytes),
        Reply::Granted(g) => {
            if let Some(token) = g.token {
                array(ctx, 2);
                granted_value(ctx, g.holds, g.generated.as_ref());
                int(ctx, token);
            } else {
                granted_value(ctx, g.holds, g.generated.as_ref());
            }
        }
        Reply::Map(fields) => {
            // A map in RESP3; Redis flattens it to field/value pairs in RESP2.
            // SAFETY: as above.
            unsafe {
                rm!(RedisModule_ReplyWithMap(
                    ctx.0,
                    fields.len() as std::ffi::c_long
                ))
            };
            for (name, value) in fields {
                bulk(ctx, name.as_bytes());
                send(ctx, value);
            }
        }
        Reply::Array(items) => {
            array(ctx, items.len());
            for item in items {
                send(ctx, item);
            }
        }
        Reply::Blocked => {}
    }
}

fn array(ctx: Ctx, len: usize) {
    // SAFETY: as in `send`.
    unsafe { rm!(RedisModule_ReplyWithArray(ctx.0, len as std::ffi::c_long)) };
}

fn granted_value(ctx: Ctx, holds: i64, generated: Option<&OwnedStr>) {
    match generated {
        // SAFETY: as in `send`.
        Some(owner) => unsafe {
            rm!(RedisModule_ReplyWithString(ctx.0, owner.ptr()));
        },
        None => int(ctx, holds),
    }
}

fn int(ctx: Ctx, n: i64) {
    // SAFETY: as in `send`.
    unsafe {
        rm!(RedisModule_ReplyWithLongLong(ctx.0, n));
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
    // SAFETY: as in `send`; a NUL-terminated message.
    unsafe {
        rm!(RedisModule_ReplyWithError(ctx.0, text.as_ptr()));
    }
}

/// Client data always goes out as a bulk string (binary-safe).
fn bulk(ctx: Ctx, bytes: &[u8]) {
    // SAFETY: as in `send`.
    unsafe {
        rm!(RedisModule_ReplyWithStringBuffer(
            ctx.0,
            bytes.as_ptr() as *const c_char,
            bytes.len()
        ));
    }
}
