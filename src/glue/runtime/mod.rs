//! Layer 0: the thin runtime over the raw module API that everything else
//! stands on: contexts and strings (`ffi`), the panic firewall, the typed
//! module timer, and replies (the one place errors become error replies).

#[macro_use]
pub mod ffi;
pub mod firewall;
pub mod reply;
pub mod timer;
