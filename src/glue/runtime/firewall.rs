//! The panic firewall. Every entry point from Redis (commands, timers,
//! keyspace and server events, blocked-client callbacks) runs through here:
//! a Rust panic must never unwind into C, where it aborts the whole server.
//! A caught panic becomes a warning in the server log (the panic hook writes
//! it, with the source location) and, for commands, an error reply
//! (`reply::respond`).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::ffi::{Level, log_with};

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

/// Runs `f`; a panic comes back as its message.
pub fn guard<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| panic_text(&panic))
}

/// Runs a callback that has no client to answer; a panic is logged (by the
/// hook) and the callback returns `fallback`.
pub fn callback<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    guard(f).unwrap_or(fallback)
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
