//! One clock for every process of a run. CLOCK_MONOTONIC is system-wide on
//! Linux, so invoke/return times written by different worker processes can
//! be compared directly; `Instant` would do too, but its value is opaque and
//! cannot be written to a history file.

/// Nanoseconds on the system-wide monotonic clock.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The wall clock in ms since the epoch: the servers' clock (they run on
/// this machine), which lease deadlines are expressed in.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock before 1970")
        .as_millis() as i64
}

pub const MS: u64 = 1_000_000;

/// CLOCK_REALTIME - CLOCK_MONOTONIC in ns: turns a server's absolute
/// deadline (wall-clock ms) into the histories' clock.
pub fn realtime_offset_ns() -> i64 {
    let mut best = i64::MAX;
    let mut offset = 0;
    // The pair read closest together wins.
    for _ in 0..5 {
        let a = mono_ns() as i64;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let b = mono_ns() as i64;
        let real = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
        if b - a < best {
            best = b - a;
            offset = real - (a + b) / 2;
        }
    }
    offset
}
