//! The keyspace events the module fires for its own writes (so tools and
//! WATCH see them) must not make the module's own subscriber serve the
//! queue again: the command that wrote already did. `OwnEvent` marks the
//! span; it is a guard, so a panic inside the span (caught by the firewall)
//! cannot leave the mark set and silence every later foreign event.

use std::sync::atomic::{AtomicBool, Ordering};

/// A static, not a thread-local: Redis calls modules on one thread, and a
/// thread-local in a shared library costs a TLS lookup on every write.
static OWN_EVENT: AtomicBool = AtomicBool::new(false);

pub struct OwnEvent {
    was: bool,
}

impl OwnEvent {
    pub fn mark() -> OwnEvent {
        OwnEvent {
            was: OWN_EVENT.swap(true, Ordering::Relaxed),
        }
    }
}

impl Drop for OwnEvent {
    fn drop(&mut self) {
        OWN_EVENT.store(self.was, Ordering::Relaxed);
    }
}

/// Whether the event being delivered now is one of the module's own.
pub fn is_own_event() -> bool {
    OWN_EVENT.load(Ordering::Relaxed)
}
