//! The keyspace events the module fires for its own writes (so tools and
//! WATCH see them) must not make the module's own subscriber serve the
//! queue again: the command that wrote already did. `OwnEvent` marks the
//! span; it is a guard, so a panic inside the span (caught by the firewall)
//! cannot leave the mark set and silence every later foreign event.

use std::cell::Cell;

thread_local! {
    static OWN_EVENT: Cell<bool> = const { Cell::new(false) };
}

pub struct OwnEvent {
    was: bool,
}

impl OwnEvent {
    pub fn mark() -> OwnEvent {
        OwnEvent {
            was: OWN_EVENT.with(|own| own.replace(true)),
        }
    }
}

impl Drop for OwnEvent {
    fn drop(&mut self) {
        OWN_EVENT.with(|own| own.set(self.was));
    }
}

/// Whether the event being delivered now is one of the module's own.
pub fn is_own_event() -> bool {
    OWN_EVENT.with(Cell::get)
}
