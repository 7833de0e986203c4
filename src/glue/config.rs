//! Module configuration: `lock.default-lease-ms` (CONFIG GET/SET, a
//! `lock.default-lease-ms` line in redis.conf, or `MODULE LOAD path
//! default-lease-ms N`).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::core::Lease;

/// Ten years: a larger default is almost certainly a typo.
pub const MAX_DEFAULT_LEASE_MS: i64 = 10 * 365 * 24 * 3600 * 1000;

pub static DEFAULT_LEASE: AtomicI64 = AtomicI64::new(Lease::WATCHDOG_DEFAULT.millis());

/// The lease used when a command gives none.
pub fn default_lease() -> Lease {
    // The config's bounds (1..=MAX_DEFAULT_LEASE_MS) keep it positive.
    Lease::from_millis(DEFAULT_LEASE.load(Ordering::Relaxed)).unwrap_or(Lease::WATCHDOG_DEFAULT)
}
