//! Wait and hold metrics per primitive, for `INFO lock` (section
//! `lock_metrics`) and the LATENCY monitor (`lock-wait`, `lock-hold`).
//!
//! A wait sample is a call that was queued and then granted (immediate
//! grants and timed-out waits are counted apart); a hold sample is a
//! holder's time from grant to its end, whatever ended it. Distributions
//! are log-linear histograms of µs: 16 sub-buckets per power of two, so a
//! reported percentile is within 1/16 (6.25 %) of the true value. Reset by
//! `CONFIG RESETSTAT`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::glue::runtime::ffi::{Ctx, latency_sample};

/// The primitives measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Lock,
    RwLock,
    Semaphore,
    Latch,
}

impl Family {
    const ALL: [Family; 4] = [
        Family::Lock,
        Family::RwLock,
        Family::Semaphore,
        Family::Latch,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The field prefix in `INFO lock`.
    pub fn prefix(self) -> &'static str {
        match self {
            Family::Lock => "lock",
            Family::RwLock => "rwlock",
            Family::Semaphore => "semaphore",
            Family::Latch => "latch",
        }
    }
}

/// Sub-buckets per power of two (relative error 1/16).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Enough buckets for any u64 of µs.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A log-linear histogram of µs values.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    samples: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            samples: 0,
            max: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let sub = ((v >> shift) & (SUB as u64 - 1)) as usize;
    (shift as usize + 1) * SUB + sub
}

/// The smallest value of a bucket, and its width.
fn bucket_range(b: usize) -> (u64, u64) {
    if b < SUB {
        return (b as u64, 1);
    }
    let shift = (b / SUB - 1) as u32;
    let sub = (b % SUB) as u64;
    let low = (SUB as u64 | sub) << shift;
    (low, 1u64 << shift)
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.counts[bucket_of(us)] += 1;
        self.samples += 1;
        self.max = self.max.max(us);
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1): the middle of its bucket, never
    /// above the largest sample.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let rank = ((q * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(b);
                return (low + width / 2).min(self.max);
            }
        }
        self.max
    }
}

/// One primitive's figures.
#[derive(Default, Clone)]
pub struct Figures {
    pub wait: Histogram,
    pub hold: Histogram,
    /// Granted without waiting.
    pub immediate: u64,
    /// Queued, then their BLOCK time ran out.
    pub timed_out: u64,
}

thread_local! {
    static FIGURES: RefCell<Vec<Figures>> =
        RefCell::new(vec![Figures::default(); Family::ALL.len()]);
}

fn with<R>(family: Family, f: impl FnOnce(&mut Figures) -> R) -> R {
    FIGURES.with(|all| f(&mut all.borrow_mut()[family.index()]))
}

/// `latency-monitor-threshold` in ms (0: the monitor is off), read at load
/// and when configs change.
static LATENCY_THRESHOLD: AtomicI64 = AtomicI64::new(0);

/// Reads `latency-monitor-threshold`.
pub fn refresh(ctx: Ctx) {
    let ms = ctx
        .config_get(c"latency-monitor-threshold")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    LATENCY_THRESHOLD.store(ms, Ordering::Relaxed);
}

/// Records `ms` as a LATENCY event if the monitor is on and it is over the
/// threshold (the server's own call would record every sample at 0).
fn latency(event: &std::ffi::CStr, us: u64) {
    let threshold = LATENCY_THRESHOLD.load(Ordering::Relaxed);
    let ms = i64::try_from(us / 1000).unwrap_or(i64::MAX);
    if threshold > 0 && ms >= threshold {
        latency_sample(event, ms);
    }
}

/// A queued call was granted after waiting `us`.
pub fn waited(family: Family, us: u64) {
    with(family, |f| f.wait.record(us));
    latency(c"lock-wait", us);
}

/// A holder's hold ended after `us`.
pub fn held(family: Family, us: u64) {
    with(family, |f| f.hold.record(us));
    latency(c"lock-hold", us);
}

/// A call granted at once.
pub fn immediate(family: Family) {
    with(family, |f| f.immediate += 1);
}

/// A queued call whose BLOCK time ran out.
pub fn timed_out(family: Family) {
    with(family, |f| f.timed_out += 1);
}

/// CONFIG RESETSTAT.
pub fn reset() {
    FIGURES.with(|all| {
        for f in all.borrow_mut().iter_mut() {
            *f = Figures::default();
        }
    });
}

/// Every family's figures (INFO).
pub fn snapshot() -> Vec<(Family, Figures)> {
    FIGURES.with(|all| {
        Family::ALL
            .iter()
            .copied()
            .zip(all.borrow().iter().cloned())
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last && b < BUCKETS, "{v}");
            let (low, width) = bucket_range(b);
            assert!(low <= v && v - low < width, "{v}: {low}+{width}");
            last = b;
        }
    }

    #[test]
    fn quantiles_within_a_sixteenth() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, truth) in [(0.5, 50_000f64), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - truth).abs() / truth <= 1.0 / 16.0, "{q}: {got}");
        }
        assert_eq!(h.max(), 100_000);
        assert_eq!(h.samples(), 100_000);
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
