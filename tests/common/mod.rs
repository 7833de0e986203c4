//! Shared integration-test harness: a RESP client ([`resp`]) and real
//! Redis / Valkey servers ([`server`]). Each test binary uses `mod common;`
//! and a subset of this, hence the `dead_code` allowance.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod resp;
pub mod server;

pub(crate) use resp::args;
pub use resp::{Client, Reply, ToArg};
pub use server::{KINDS, Kind, Server, ServerBuilder};

use std::time::{Duration, Instant};

/// Polls `f` every 10 ms until it returns true (→ true) or `timeout`
/// passes (→ false). `f` is always called at least once.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
