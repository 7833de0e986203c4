//! Lease math. All times are milliseconds on the server's wall clock and
//! deadlines are absolute, so a replica or an AOF replay never extends a lease.

use super::error::{LockError, LockResult};

/// Milliseconds since the Unix epoch (server clock) or a duration in ms.
pub type Millis = i64;

/// PX or EX given zero, a negative number or no number at all.
pub(crate) const NOT_POSITIVE: LockError = LockError::BadLease("PX and EX take a positive integer");

/// A lease length: a positive number of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease(Millis);

impl Lease {
    /// Redisson's watchdog default (lockWatchdogTimeout): 30 s.
    pub const WATCHDOG_DEFAULT: Lease = Lease(30_000);

    /// `PX ms`.
    pub fn from_millis(ms: i64) -> LockResult<Lease> {
        if ms <= 0 {
            return Err(NOT_POSITIVE);
        }
        Ok(Lease(ms))
    }

    /// `EX s`.
    pub fn from_secs(s: i64) -> LockResult<Lease> {
        if s <= 0 {
            return Err(NOT_POSITIVE);
        }
        s.checked_mul(1000)
            .map(Lease)
            .ok_or(LockError::BadLease("deadline would overflow"))
    }

    pub const fn millis(self) -> Millis {
        self.0
    }

    /// How often the server renews a lease tied to a connection (KEEPALIVE):
    /// every third of it, so a renewal that runs late (the event loop was
    /// busy) still lands with two thirds of the lease to spare.
    pub fn renew_every(self) -> Millis {
        (self.0 / 3).max(1)
    }

    /// The absolute deadline of a lease starting at `now`.
    pub fn deadline_from(self, now: Millis) -> LockResult<Millis> {
        now.checked_add(self.0)
            .ok_or(LockError::BadLease("deadline would overflow"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_only() {
        assert!(Lease::from_millis(0).is_err());
        assert!(Lease::from_millis(-5).is_err());
        assert!(Lease::from_secs(0).is_err());
        assert_eq!(Lease::from_secs(3).unwrap().millis(), 3000);
    }

    #[test]
    fn renewals_come_every_third() {
        assert_eq!(Lease::WATCHDOG_DEFAULT.renew_every(), 10_000);
        assert_eq!(Lease::from_millis(2).unwrap().renew_every(), 1);
    }

    #[test]
    fn overflow_is_refused() {
        assert!(Lease::from_secs(i64::MAX / 1000 + 1).is_err());
        let lease = Lease::from_millis(i64::MAX - 10).unwrap();
        assert!(lease.deadline_from(11).is_err());
        assert_eq!(lease.deadline_from(10).unwrap(), i64::MAX);
    }
}
