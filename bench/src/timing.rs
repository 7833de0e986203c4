//! Client-side timing: precise waits, histograms, fairness.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::oneshot;

/// A sleep that ends within tens of µs of its deadline, the way a client
/// blocked in the kernel is woken: tokio's own timer rounds deadlines up to
/// the next millisecond, which would make "poll every 1 ms" a 1–2 ms poll.
/// A dedicated thread (on the client's CPU) waits in the kernel with 1 ns
/// timer slack and wakes the task through a oneshot channel; the wake-up
/// therefore costs what any sleeping client pays.
pub async fn sleep_until(deadline: Instant) {
    if deadline <= Instant::now() {
        return;
    }
    let (done, woken) = oneshot::channel();
    let entry = Entry {
        at: deadline,
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        done,
    };
    if timer().send(entry).is_err() {
        // The timer thread is gone (cannot happen short of a panic there):
        // fall back to tokio's millisecond timer.
        tokio::time::sleep_until(deadline.into()).await;
        return;
    }
    let _ = woken.await;
}

/// [`sleep_until`] now + `d`.
pub async fn sleep(d: Duration) {
    if !d.is_zero() {
        sleep_until(Instant::now() + d).await;
    }
}

struct Entry {
    at: Instant,
    seq: u64,
    done: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn timer() -> &'static mpsc::Sender<Entry> {
    static TIMER: OnceLock<mpsc::Sender<Entry>> = OnceLock::new();
    TIMER.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        // Started lazily, after pinning: it inherits the client's CPU.
        std::thread::Builder::new()
            .name("bench-timer".into())
            .spawn(move || timer_thread(rx))
            .expect("spawning the benchmark's timer thread");
        tx
    })
}

fn timer_thread(rx: mpsc::Receiver<Entry>) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut due: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while due.peek().is_some_and(|Reverse(e)| e.at <= now) {
            if let Some(Reverse(e)) = due.pop() {
                // The sleeper may have given up (a select! picked another
                // branch): nothing to do then.
                let _ = e.done.send(());
            }
        }
        let next = match due.peek() {
            Some(Reverse(e)) => rx.recv_timeout(e.at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(e) => due.push(Reverse(e)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// CPU time (user + system) this process has used so far.
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return Duration::ZERO;
        }
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A histogram of nanoseconds, 1 ns .. 10 min, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid histogram bounds")
}

/// Records `d` (saturating at the histogram's top).
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_nanos() as u64).max(1));
}

/// Jain's fairness index of per-client counts: 1 = perfectly even,
/// 1/n = one client got everything.
pub fn jain(counts: &[u64]) -> f64 {
    let n = counts.len() as f64;
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if squares == 0.0 {
        0.0
    } else {
        sum * sum / (n * squares)
    }
}

/// A quantile of a nanosecond histogram, as a Duration (zero if empty).
pub fn quantile(h: &Histogram<u64>, q: f64) -> Duration {
    if h.is_empty() {
        Duration::ZERO
    } else {
        Duration::from_nanos(h.value_at_quantile(q))
    }
}

pub fn max(h: &Histogram<u64>) -> Duration {
    if h.is_empty() {
        Duration::ZERO
    } else {
        Duration::from_nanos(h.max())
    }
}

/// A short human duration: "850 ns", "37.2 µs", "1.24 ms", "2.01 s".
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns == 0.0 {
        "0".into()
    } else if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        let us = ns / 1e3;
        if us < 100.0 {
            format!("{us:.1} µs")
        } else {
            format!("{us:.0} µs")
        }
    } else if ns < 1e9 {
        let ms = ns / 1e6;
        if ms < 100.0 {
            format!("{ms:.2} ms")
        } else {
            format!("{ms:.0} ms")
        }
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A rate with thousands separators: 12,345.
pub fn fmt_count(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// CLOCK_MONOTONIC in ns: one clock for every process of the machine (an
/// `Instant` cannot cross a process boundary; this can, as a number).
pub fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_bounds() {
        assert!((jain(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
        assert!((jain(&[20, 0, 0, 0]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(1234567.0), "1,234,567");
        assert_eq!(fmt_count(999.0), "999");
        assert_eq!(fmt_duration(Duration::from_micros(37)), "37.0 µs");
        assert_eq!(fmt_duration(Duration::from_micros(1240)), "1.24 ms");
    }
}
