//! Loss detection (sync): one thread per process watches every held lock
//! and reports a lost one as soon as it can tell.
//!
//! What it watches, per hold (a [`Watched`]):
//! - the hold's own connection, when the lock is tied to it (KEEPALIVE): the
//!   server ties the lock to that connection, so its end (CLIENT KILL, the
//!   server's `timeout`, a shutdown, a reset) means the lock is gone. An
//!   idle connection that turns readable has ended: lost, at once.
//! - a periodic check, every third of the lease, whose result says whether
//!   the lock is still held (the watchdog's LOCK.RENEW, or LOCK.RENEW ...
//!   KEEPALIVE on the tied connection, which also re-ties a lock whose tie
//!   did not follow it). A FORCERELEASE, a lapsed lease or a failover that
//!   lost it shows there.
//!
//! - lifecycle keyspace events (`lock.*`, class `d`, see [`crate::events`]):
//!   an event for the key triggers the check at once ([`Monitor::poke`]).
//!
//! Nothing here knows about locks.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// What the monitor calls back. Both run on the monitor thread.
pub trait Watched: Send + Sync {
    /// The periodic check; false: stop watching (lost, or no longer held).
    fn check(&self, id: u64) -> bool;
    /// The watched descriptor turned readable while idle; false: stop watching.
    fn readable(&self, id: u64) -> bool;
}

struct Entry {
    fd: Option<RawFd>,
    interval: Duration,
    due: Instant,
    target: Weak<dyn Watched>,
}

/// The process's monitor thread (started on first use).
pub struct Monitor {
    entries: Mutex<HashMap<u64, Entry>>,
    wake: (RawFd, RawFd),
    next_id: std::sync::atomic::AtomicU64,
}

/// The process's monitor.
pub fn monitor() -> &'static Monitor {
    static M: OnceLock<&'static Monitor> = OnceLock::new();
    M.get_or_init(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: a fresh pipe; both ends are owned by the monitor for the
        // life of the process.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "pipe2 for the hashlock monitor");
        let m: &'static Monitor = Box::leak(Box::new(Monitor {
            entries: Mutex::new(HashMap::new()),
            wake: (fds[0], fds[1]),
            next_id: std::sync::atomic::AtomicU64::new(1),
        }));
        std::thread::Builder::new()
            .name("hashlock-monitor".into())
            .spawn(move || m.run())
            .expect("spawning the hashlock monitor thread");
        m
    })
}

impl Monitor {
    /// Watches `target` (checks every `interval`, and `fd` if given); the id
    /// it will be called back with.
    pub fn add(&self, target: Weak<dyn Watched>, fd: Option<RawFd>, interval: Duration) -> u64 {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Entry {
                    fd,
                    interval,
                    due: Instant::now() + interval,
                    target,
                },
            );
        self.wake();
        id
    }

    /// The watched descriptor changed (a check followed a MOVED).
    pub fn set_fd(&self, id: u64, fd: Option<RawFd>) {
        if let Some(e) = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&id)
        {
            e.fd = fd;
        }
        self.wake();
    }

    /// Runs the check of `id` now (an event said the key changed).
    pub fn poke(&self, id: u64) {
        if let Some(e) = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&id)
        {
            e.due = Instant::now();
        }
        self.wake();
    }

    /// Stops watching. Call it before closing the watched descriptor.
    pub fn remove(&self, id: u64) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.wake();
    }

    fn wake(&self) {
        let b = [1u8];
        // SAFETY: writing one byte to our own non-blocking pipe.
        unsafe { libc::write(self.wake.1, b.as_ptr().cast(), 1) };
    }

    fn run(&self) {
        loop {
            let (mut fds, ids, timeout) = {
                let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                let mut fds = vec![libc::pollfd {
                    fd: self.wake.0,
                    events: libc::POLLIN,
                    revents: 0,
                }];
                let mut ids = vec![0u64];
                let mut next: Option<Instant> = None;
                for (id, e) in entries.iter() {
                    if let Some(fd) = e.fd {
                        fds.push(libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        });
                        ids.push(*id);
                    }
                    next = Some(next.map_or(e.due, |n| n.min(e.due)));
                }
                let timeout = next.map_or(-1, |n| {
                    n.saturating_duration_since(now)
                        .as_millis()
                        .min(i32::MAX as u128) as i32
                });
                (fds, ids, timeout)
            };
            // SAFETY: `fds` is a valid array of pollfd for the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            if fds[0].revents != 0 {
                let mut buf = [0u8; 64];
                // SAFETY: draining our own non-blocking pipe.
                while unsafe { libc::read(self.wake.0, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
            }
            for (p, id) in fds.iter().zip(&ids).skip(1) {
                if p.revents != 0 {
                    self.call(*id, |t| t.readable(*id));
                }
            }
            let due: Vec<u64> = {
                let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                entries
                    .iter_mut()
                    .filter(|(_, e)| e.due <= now)
                    .map(|(id, e)| {
                        e.due = now + e.interval;
                        *id
                    })
                    .collect()
            };
            for id in due {
                self.call(id, |t| t.check(id));
            }
        }
    }

    fn call(&self, id: u64, f: impl FnOnce(&Arc<dyn Watched>) -> bool) {
        let target = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.get(&id).map(|e| e.target.clone())
        };
        let Some(target) = target else { return };
        let keep = match target.upgrade() {
            Some(t) => f(&t),
            None => false,
        };
        if !keep {
            self.remove(id);
        }
    }
}
