//! The panic firewall. Every entry point from Redis (commands, timers,
//! keyspace and server events, blocked-client callbacks) runs through here:
//! a Rust panic must never unwind into C, where it aborts the whole server.
//! A caught panic becomes an error reply (for commands) and a warning in the
//! server log (the panic hook writes it, with the source location).

use std::any::Any;
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::ffi::{Ctx, Level, log_with, raw};
use super::reply::{self, Reply};
use crate::core::{LockError, LockResult};

/// Routes panic messages to the server log instead of stderr.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        log_with(
            std::ptr::null_mut(),
            Level::Warning,
            &format!("lock module: caught a panic (bug, please report): {info}"),
        );
    }));
}

/// Runs a command handler and sends its reply (or its error).
pub fn command(ctx: Ctx, handler: impl FnOnce() -> LockResult<Reply>) -> c_int {
    let outcome = match catch_unwind(AssertUnwindSafe(handler)) {
        Ok(outcome) => outcome,
        Err(panic) => Err(LockError::Internal(panic_text(&panic))),
    };
    // Replying cannot panic on anything a client sends, but it runs in C's
    // stack too: keep it inside the firewall.
    let sent = catch_unwind(AssertUnwindSafe(|| match outcome {
        Ok(r) => reply::send(ctx, r),
        Err(e) => reply::error(ctx, &e),
    }));
    if sent.is_err() {
        log_with(ctx.0, Level::Warning, "lock module: failed to send a reply");
    }
    raw::REDISMODULE_OK as c_int
}

/// Runs a callback that has no client to answer; a panic is logged and the
/// callback returns `fallback`.
pub fn callback<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

fn panic_text(panic: &Box<dyn Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}
