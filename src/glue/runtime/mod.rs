//! Layer 0: the thin runtime over the raw module API that everything else
//! stands on, and the only layer with `unsafe` (every other module of the
//! glue denies it): contexts and strings (`ffi`), open keys (`key`),
//! blocked clients (`blocked`), subscriptions (`hooks`), registration
//! (`register`, `docs`), the panic firewall, the typed module timer, and
//! replies (the one place errors become error replies).

#[macro_use]
pub mod ffi;
pub mod blocked;
mod docs;
pub mod firewall;
pub mod hooks;
pub mod key;
pub mod register;
pub mod reply;
pub mod timer;
