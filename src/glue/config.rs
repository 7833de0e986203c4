//! Module configuration: `lock.default-lease-ms` (CONFIG GET/SET, a
//! `lock.default-lease-ms` line in redis.conf, or `loadmodule path
//! default-lease-ms N`). Registered in `module.rs`.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::core::Lease;

pub const DEFAULT_LEASE_MS: i64 = Lease::WATCHDOG_DEFAULT.millis();
/// Ten years: a larger default is almost certainly a typo.
pub const MAX_DEFAULT_LEASE_MS: i64 = 10 * 365 * 24 * 3600 * 1000;

static DEFAULT_LEASE: AtomicI64 = AtomicI64::new(DEFAULT_LEASE_MS);

pub fn default_lease_ms() -> i64 {
    DEFAULT_LEASE.load(Ordering::Relaxed)
}

pub fn set_default_lease_ms(ms: i64) {
    DEFAULT_LEASE.store(ms, Ordering::Relaxed);
}

/// The lease used when a command gives none.
pub fn default_lease() -> Lease {
    // The config's bounds (1..=MAX_DEFAULT_LEASE_MS) keep it positive.
    Lease::from_millis(default_lease_ms()).unwrap_or(Lease::WATCHDOG_DEFAULT)
}
