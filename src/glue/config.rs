//! Module configuration: `lock.default-lease-ms`, `lock.replicas`,
//! `lock.replicas-timeout-ms` (CONFIG GET/SET, lines in redis.conf, or
//! `loadmodule path name value`). Registered in `module.rs`.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::core::request::{MAX_REPLICAS, Replicas};
use crate::core::{Lease, LockError};

pub const DEFAULT_LEASE_MS: i64 = Lease::WATCHDOG_DEFAULT.millis();
/// Ten years: a larger default is almost certainly a typo.
pub const MAX_DEFAULT_LEASE_MS: i64 = 10 * 365 * 24 * 3600 * 1000;
pub const DEFAULT_REPLICAS: i64 = 0;
pub const DEFAULT_REPLICAS_TIMEOUT_MS: i64 = 1000;
/// A day: a longer wait for replicas is almost certainly a typo.
pub const MAX_REPLICAS_TIMEOUT_MS: i64 = 24 * 3600 * 1000;
pub const MAX_DEFAULT_REPLICAS: i64 = MAX_REPLICAS;

/// One numeric setting.
pub struct Setting {
    pub name: &'static str,
    pub default: i64,
    pub min: i64,
    pub max: i64,
    value: AtomicI64,
}

impl Setting {
    const fn new(name: &'static str, default: i64, min: i64, max: i64) -> Setting {
        Setting {
            name,
            default,
            min,
            max,
            value: AtomicI64::new(default),
        }
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    pub fn set(&self, v: i64) {
        self.value.store(v, Ordering::Relaxed);
    }
}

impl crate::glue::runtime::register::NumericConfig for Setting {
    fn get(&self) -> i64 {
        Setting::get(self)
    }
    fn set(&self, value: i64) {
        Setting::set(self, value)
    }
    fn default_value(&self) -> i64 {
        self.default
    }
}

pub static DEFAULT_LEASE: Setting = Setting::new(
    "default-lease-ms",
    DEFAULT_LEASE_MS,
    1,
    MAX_DEFAULT_LEASE_MS,
);
pub static REPLICAS: Setting = Setting::new("replicas", DEFAULT_REPLICAS, 0, MAX_DEFAULT_REPLICAS);
pub static REPLICAS_TIMEOUT: Setting = Setting::new(
    "replicas-timeout-ms",
    DEFAULT_REPLICAS_TIMEOUT_MS,
    1,
    MAX_REPLICAS_TIMEOUT_MS,
);

/// The shortest lease a KEEPALIVE tie may have. Renewals come every third
/// of the lease, so a tied lease survives an event-loop stall of up to two
/// thirds of it; below ~100 ms the renewal timer's own granularity (1 ms
/// batches) and ordinary stalls lapse it with its connection open.
pub const DEFAULT_KEEPALIVE_MIN_LEASE_MS: i64 = 100;
pub static KEEPALIVE_MIN_LEASE: Setting = Setting::new(
    "keepalive-min-lease-ms",
    DEFAULT_KEEPALIVE_MIN_LEASE_MS,
    1,
    MAX_DEFAULT_LEASE_MS,
);

/// 1: every hold the module grants is timed (INFO lock's hold
/// distributions); 0: not (a grant then costs ~3 % fewer instructions;
/// lifecycle events still time holds, to fire `*.expired`).
pub static HOLD_METRICS: Setting = Setting::new("hold-metrics", 1, 0, 1);

pub static SETTINGS: [&Setting; 5] = [
    &DEFAULT_LEASE,
    &REPLICAS,
    &REPLICAS_TIMEOUT,
    &KEEPALIVE_MIN_LEASE,
    &HOLD_METRICS,
];

/// Refuses a KEEPALIVE lease shorter than renewals can keep alive.
pub fn check_keepalive_lease(lease: Lease) -> Result<(), LockError> {
    let min_ms = KEEPALIVE_MIN_LEASE.get();
    match lease.millis() < min_ms {
        true => Err(LockError::KeepAliveTooShort { min_ms }),
        false => Ok(()),
    }
}

/// The lease used when a command gives none.
pub fn default_lease() -> Lease {
    // The config's bounds (1..=MAX_DEFAULT_LEASE_MS) keep it positive.
    Lease::from_millis(DEFAULT_LEASE.get()).unwrap_or(Lease::WATCHDOG_DEFAULT)
}

/// `REPLICAS n ms` for calls that give none; `None` when n is 0.
pub fn default_replicas() -> Option<Replicas> {
    let count = REPLICAS.get();
    (count > 0).then(|| Replicas {
        count,
        timeout_ms: REPLICAS_TIMEOUT.get(),
    })
}
