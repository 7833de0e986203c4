//! Lifecycle events: a keyspace event of class `d` (module events) on the
//! object's key at every change of holder, so holders and observers learn
//! of it without polling (leader election observes `lock.acquired`).
//!
//! Per owner: `*.acquired` when an owner goes from holding nothing there to
//! holding (never a re-entry), and one ending event when it goes back to
//! nothing. On a hand-off the ending event comes first, then `*.acquired`;
//! both are fired after the new holder is written, so LOCK.INFO already
//! shows it when they arrive.
//!
//! Firing costs nothing worth measuring when nobody can hear: the events go
//! out only while `notify-keyspace-events` has `K` or `E`, and `d` (or `A`),
//! which is read at load and whenever the config changes.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use super::OwnEvent;
use crate::glue::runtime::ffi::{Ctx, RStr, raw};

/// A change of holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    LockAcquired,
    /// Its own RELEASE/MRELEASE to 0, or a REPLICAS undo of its grant.
    LockReleased,
    /// The lease lapsed.
    LockExpired,
    /// FORCERELEASE.
    LockForced,
    /// Its tied connection closed.
    LockClosed,
    RwAcquired,
    RwReleased,
    RwExpired,
    RwForced,
    RwClosed,
    /// One per ACQUIRE or LEASE call, whatever COUNT.
    SemaphoreAcquired,
    /// One per RELEASE or RETURN call.
    SemaphoreReleased,
    /// Leased permits lapsed.
    SemaphoreExpired,
    /// A connection's tied permits were returned.
    SemaphoreClosed,
    /// COUNTDOWN reached 0.
    LatchOpened,
}

impl Event {
    pub fn name(self) -> &'static CStr {
        match self {
            Event::LockAcquired => c"lock.acquired",
            Event::LockReleased => c"lock.released",
            Event::LockExpired => c"lock.expired",
            Event::LockForced => c"lock.forced",
            Event::LockClosed => c"lock.closed",
            Event::RwAcquired => c"rwlock.acquired",
            Event::RwReleased => c"rwlock.released",
            Event::RwExpired => c"rwlock.expired",
            Event::RwForced => c"rwlock.forced",
            Event::RwClosed => c"rwlock.closed",
            Event::SemaphoreAcquired => c"semaphore.acquired",
            Event::SemaphoreReleased => c"semaphore.released",
            Event::SemaphoreExpired => c"semaphore.expired",
            Event::SemaphoreClosed => c"semaphore.closed",
            Event::LatchOpened => c"latch.opened",
        }
    }
}

/// Whether anyone can hear module keyspace events now.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether lifecycle events go out (callers skip work that only serves them).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Reads `notify-keyspace-events` (at load, and when configs change).
pub fn refresh(ctx: Ctx) {
    let on = config_flags(ctx).is_some_and(|flags| hears_module_events(&flags));
    ENABLED.store(on, Ordering::Relaxed);
}

fn config_flags(ctx: Ctx) -> Option<String> {
    ctx.config_get(c"notify-keyspace-events")
}

/// `K` or `E` (where events go) and `d` or `A` (module events).
fn hears_module_events(flags: &str) -> bool {
    let channel = flags.contains('K') || flags.contains('E');
    let module = flags.contains('d') || flags.contains('A');
    channel && module
}

/// Fires `event` on `key`.
pub fn fire(ctx: Ctx, event: Event, key: &RStr) {
    if !enabled() {
        return;
    }
    let _own = OwnEvent::mark();
    ctx.notify(raw::REDISMODULE_NOTIFY_MODULE, event.name(), key);
}

#[cfg(test)]
mod tests {
    use super::hears_module_events;

    #[test]
    fn flags() {
        assert!(hears_module_events("Kd"));
        assert!(hears_module_events("EA"));
        assert!(hears_module_events("KEA"));
        assert!(!hears_module_events("d"));
        assert!(!hears_module_events("Kx"));
        assert!(!hears_module_events(""));
    }
}
