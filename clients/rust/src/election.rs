//! Leader election on a lock: [`sync::Election`] and (feature `tokio`)
//! [`tokio::Election`], re-exported by [`crate::sync`] and [`crate::tokio`].
//!
//! `campaign()` waits in the server's queue for the lock (KEEPALIVE, TOKEN)
//! and returns the term: the fencing token of the winning acquisition,
//! which grows with every leader, so a resource can refuse an old leader's
//! writes. The leadership is tied to the library's connection: a leader
//! that dies is replaced at once by the next candidate in the queue. A
//! leadership lost otherwise (a FORCERELEASE, its connection killed) is
//! reported by `is_leader()` turning false (and, tokio, `revoked().await`).
//!
//! `observe()` follows who leads from the module's lifecycle keyspace
//! events (never polling): a thread of its own subscribes to the key's
//! keyspace channel on the node serving it and, at each event, asks
//! LOCK.INFO who leads. Changes closer together than that round trip may be
//! reported as one (the terms show it). The server's
//! `notify-keyspace-events` must include `K` and `d`
//! ([`crate::Error::EventsDisabled`] otherwise).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::net::Conn;
use crate::pool::Pool;
use crate::protocol::{self as p, LockInfo, Options};
use crate::target::Target;

/// Who leads, and in which term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    pub owner: String,
    pub term: u64,
}

/// A change of leader, in the order they happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderChange {
    /// A new leader, with its term (terms only grow).
    Elected(Leader),
    /// The leadership ended (reported before the next `Elected`).
    Vacant,
}

fn leader_of(info: Option<LockInfo>) -> Option<Leader> {
    info.map(|i| Leader {
        owner: i.owner,
        term: i.token.unwrap_or(0),
    })
}

/// The lock options of a candidate: KEEPALIVE and TOKEN always.
fn candidate(opts: Options) -> Options {
    opts.keepalive(true).token(true)
}

const OBSERVER_IO: Duration = Duration::from_secs(5);

fn leader_now(pool: &Arc<Pool>, name: &str) -> Result<Option<Leader>> {
    let v = pool.call(name.as_bytes(), &p::info_cmd(name), Some(OBSERVER_IO))?;
    Ok(leader_of(p::parse_info(&v)?))
}

/// `notify-keyspace-events` as CONFIG GET answers it (None: refused).
fn keyspace_flags(conn: &mut Conn) -> Result<Option<String>> {
    let v = match conn.call(
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events"),
        Some(OBSERVER_IO),
    ) {
        Ok(v) => v,
        Err(e) if !e.is_connection_failure() => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    Ok(match &v {
        redis::Value::Array(a) if a.len() == 2 => text(&a[1]),
        redis::Value::Map(m) if m.len() == 1 => text(&m[0].1),
        _ => None,
    })
}

/// A connection to the node serving `name`, subscribed to its keyspace
/// channel.
fn subscribe(target: &Target, pool: &Arc<Pool>, name: &str, check: bool) -> Result<Conn> {
    let address = pool.node_for(name.as_bytes())?;
    let info = &target.inner.info;
    let mut conn = Conn::connect(info, &address, OBSERVER_IO)?;
    if check {
        if let Some(flags) = keyspace_flags(&mut conn)? {
            if !(flags.contains('K') && (flags.contains('d') || flags.contains('A'))) {
                return Err(Error::EventsDisabled(format!(
                    "the server's notify-keyspace-events is {flags:?}: it needs K and d for the \
                     hashlock lifecycle events an Election observer listens to; set it with \
                     `CONFIG SET notify-keyspace-events Kd`"
                )));
            }
        }
    }
    let db = info.redis_settings().db();
    let channel = format!("__keyspace@{db}__:{name}");
    conn.call(redis::cmd("SUBSCRIBE").arg(channel), Some(OBSERVER_IO))?;
    Ok(conn)
}

/// Starts an observer thread: `sink` gets each change (false from it: the
/// receiver is gone, the thread ends); `stop` ends it too.
fn start_observer(
    target: Target,
    name: String,
    stop: Arc<AtomicBool>,
    mut sink: impl FnMut(LeaderChange) -> bool + Send + 'static,
) -> Result<()> {
    let pool = Pool::for_target(&target);
    let first = subscribe(&target, &pool, &name, true)?;
    std::thread::Builder::new()
        .name("hashlock-observer".into())
        .spawn(move || {
            let mut conn = Some(first);
            let mut last: Option<Leader> = None;
            let mut look = true; // at the start, and after every event
            while !stop.load(Ordering::SeqCst) {
                if look {
                    match leader_now(&pool, &name) {
                        Ok(now) => {
                            look = false;
                            let changed = match (&last, &now) {
                                (None, None) => false,
                                (Some(a), Some(b)) => a.term != b.term || a.owner != b.owner,
                                _ => true,
                            };
                            if changed {
                                if last.is_some() && !sink(LeaderChange::Vacant) {
                                    return;
                                }
                                if let Some(l) = &now {
                                    if !sink(LeaderChange::Elected(l.clone())) {
                                        return;
                                    }
                                }
                                last = now;
                            }
                        }
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    }
                }
                match conn.as_mut() {
                    None => match subscribe(&target, &pool, &name, false) {
                        Ok(c) => {
                            conn = Some(c);
                            look = true; // events may have been missed
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(200)),
                    },
                    Some(c) => {
                        if c.wait_readable(100) {
                            match c.read(Some(OBSERVER_IO)) {
                                Ok(_) => look = true,
                                Err(_) => conn = None,
                            }
                        }
                    }
                }
            }
        })
        .map_err(|e| Error::Redis(redis::RedisError::from(e)))?;
    Ok(())
}

pub mod sync {
    use std::sync::Mutex;
    use std::time::Duration;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    use super::{Leader, LeaderChange, candidate, leader_of, start_observer};
    use crate::Acquired;
    use crate::error::{Error, Result};
    use crate::protocol::Options;
    use crate::sync::{Lock, LockGuard};
    use crate::target::Target;

    /// A candidate for leadership of `name` (one owner: give each process
    /// or thread its own).
    pub struct Election {
        lock: Lock,
        target: Target,
        held: Mutex<Option<(LockGuard, u64)>>,
    }

    /// Changes of leader (see [`Election::observe`]): iterate it, or
    /// [`Observer::next_timeout`]. Dropping it (or `close()`) stops it.
    pub struct Observer {
        rx: mpsc::Receiver<LeaderChange>,
        stop: Arc<AtomicBool>,
    }

    impl Observer {
        /// The next change, waiting up to `timeout`; None if none came.
        pub fn next_timeout(&self, timeout: Duration) -> Option<LeaderChange> {
            self.rx.recv_timeout(timeout).ok()
        }

        pub fn close(&self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    impl Iterator for Observer {
        type Item = LeaderChange;

        /// The next change, waiting as long as it takes.
        fn next(&mut self) -> Option<LeaderChange> {
            self.rx.recv().ok()
        }
    }

    impl Drop for Observer {
        fn drop(&mut self) {
            self.close();
        }
    }

    impl Election {
        /// `opts`: the lease (the leader's safety net) and the owner id;
        /// keepalive and token are always on.
        pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Election {
            let target = target.into();
            Election {
                lock: Lock::new(target.clone(), name, candidate(opts)),
                target,
                held: Mutex::new(None),
            }
        }

        /// Follows who leads, from lifecycle events: the first change is
        /// the current state (`Elected`, if someone leads), then each end
        /// of a leadership (`Vacant`) and each new leader, in order.
        /// [`crate::Error::EventsDisabled`] at once if the server's
        /// `notify-keyspace-events` does not deliver the events.
        pub fn observe(&self) -> Result<Observer> {
            let (tx, rx) = mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            let name = self.lock.name().to_string();
            start_observer(self.target.clone(), name, Arc::clone(&stop), move |c| {
                tx.send(c).is_ok()
            })?;
            Ok(Observer { rx, stop })
        }

        pub fn owner(&self) -> &str {
            self.lock.owner()
        }

        fn held(&self) -> std::sync::MutexGuard<'_, Option<(LockGuard, u64)>> {
            self.held.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// True while this candidate leads, as far as it knows (false as
        /// soon as the loss is seen).
        pub fn is_leader(&self) -> bool {
            self.held().is_some() && !self.lock.is_lost()
        }

        /// The term won by the last campaign, while leading.
        pub fn term(&self) -> Option<u64> {
            let held = self.held();
            held.as_ref()
                .filter(|_| !self.lock.is_lost())
                .map(|(_, t)| *t)
        }

        fn won(&self, guard: LockGuard) -> u64 {
            let term = guard.token().unwrap_or(0);
            *self.held() = Some((guard, term));
            term
        }

        /// The term, if this candidate still leads: asked of the server
        /// (a loss the watch has not seen yet counts); a lost leadership
        /// is forgotten.
        fn still_leading(&self) -> Result<Option<u64>> {
            if self.term().is_some() {
                match self.lock.renew() {
                    Ok(()) => return Ok(self.term()),
                    Err(Error::LockLost(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            let held = self.held().take();
            if let Some((guard, _)) = held {
                let _ = guard.release(); // LockLost: nothing to give back
            }
            Ok(None)
        }

        /// Waits to lead as long as it takes; returns the term (already
        /// leading: the current term).
        pub fn campaign(&self) -> Result<u64> {
            if let Some(term) = self.still_leading()? {
                return Ok(term);
            }
            let guard = self.lock.acquire()?;
            Ok(self.won(guard))
        }

        /// Waits up to `timeout` to lead; None if the wait ran out.
        pub fn campaign_timeout(&self, timeout: Duration) -> Result<Option<u64>> {
            if let Some(term) = self.still_leading()? {
                return Ok(Some(term));
            }
            Ok(match self.lock.acquire_timeout(timeout)? {
                Acquired::Held(guard) => Some(self.won(guard)),
                Acquired::NotAcquired => None,
            })
        }

        /// Stops leading (the next candidate is elected at once).
        pub fn resign(&self) -> Result<()> {
            let held = self.held().take();
            match held {
                Some((guard, _)) if !self.lock.is_lost() => guard.release().map(|_| ()),
                _ => Ok(()),
            }
        }

        /// Who leads now, and in which term; None when no one does.
        pub fn leader(&self) -> Result<Option<Leader>> {
            Ok(leader_of(self.lock.info()?))
        }
    }
}

#[cfg(feature = "tokio")]
pub mod tokio {
    use std::sync::Mutex;
    use std::time::Duration;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::{Leader, LeaderChange, candidate, leader_of, start_observer};
    use crate::Acquired;
    use crate::error::{Error, Result};
    use crate::protocol::Options;
    use crate::target::Target;
    use crate::tokio::{Lock, LockGuard};

    /// See [`super::sync::Election`]: the same rules, async.
    pub struct Election {
        lock: Lock,
        target: Target,
        held: Mutex<Option<(LockGuard, u64)>>,
    }

    /// Changes of leader (see [`Election::observe`]). Dropping it (or
    /// `close()`) stops it.
    pub struct Observer {
        rx: ::tokio::sync::mpsc::UnboundedReceiver<LeaderChange>,
        stop: Arc<AtomicBool>,
    }

    impl Observer {
        /// The next change; None once closed.
        pub async fn next(&mut self) -> Option<LeaderChange> {
            self.rx.recv().await
        }

        pub fn close(&self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    impl Drop for Observer {
        fn drop(&mut self) {
            self.close();
        }
    }

    impl Election {
        pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Election {
            let target = target.into();
            Election {
                lock: Lock::new(target.clone(), name, candidate(opts)),
                target,
                held: Mutex::new(None),
            }
        }

        /// See [`super::sync::Election::observe`] (its thread reads the
        /// events; this sets it up on a blocking thread).
        pub async fn observe(&self) -> Result<Observer> {
            let (tx, rx) = ::tokio::sync::mpsc::unbounded_channel();
            let stop = Arc::new(AtomicBool::new(false));
            let (target, name, s) = (
                self.target.clone(),
                self.lock.name().to_string(),
                Arc::clone(&stop),
            );
            ::tokio::task::spawn_blocking(move || {
                start_observer(target, name, s, move |c| tx.send(c).is_ok())
            })
            .await
            .map_err(|e| Error::Redis(redis::RedisError::from(std::io::Error::other(e))))??;
            Ok(Observer { rx, stop })
        }

        pub fn owner(&self) -> &str {
            self.lock.owner()
        }

        fn held(&self) -> std::sync::MutexGuard<'_, Option<(LockGuard, u64)>> {
            self.held.lock().unwrap_or_else(|e| e.into_inner())
        }

        pub fn is_leader(&self) -> bool {
            self.held().is_some() && !self.lock.is_lost()
        }

        pub fn term(&self) -> Option<u64> {
            let held = self.held();
            held.as_ref()
                .filter(|_| !self.lock.is_lost())
                .map(|(_, t)| *t)
        }

        fn won(&self, guard: LockGuard) -> u64 {
            let term = guard.token().unwrap_or(0);
            *self.held() = Some((guard, term));
            term
        }

        /// See `sync::Election::still_leading`.
        async fn still_leading(&self) -> Result<Option<u64>> {
            if self.term().is_some() {
                match self.lock.renew().await {
                    Ok(()) => return Ok(self.term()),
                    Err(Error::LockLost(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            let held = self.held().take();
            if let Some((guard, _)) = held {
                let _ = guard.release().await;
            }
            Ok(None)
        }

        /// Waits to lead as long as it takes; returns the term. Cancelling
        /// it never leaves this candidate leading (see [`crate::tokio::Lock`]).
        pub async fn campaign(&self) -> Result<u64> {
            if let Some(term) = self.still_leading().await? {
                return Ok(term);
            }
            let guard = self.lock.acquire().await?;
            Ok(self.won(guard))
        }

        pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Option<u64>> {
            if let Some(term) = self.still_leading().await? {
                return Ok(Some(term));
            }
            Ok(match self.lock.acquire_timeout(timeout).await? {
                Acquired::Held(guard) => Some(self.won(guard)),
                Acquired::NotAcquired => None,
            })
        }

        /// Stops leading (cancellation-safe: the release completes).
        pub async fn resign(&self) -> Result<()> {
            let held = self.held().take();
            match held {
                Some((guard, _)) if !self.lock.is_lost() => guard.release().await.map(|_| ()),
                _ => Ok(()),
            }
        }

        /// Resolves when the leadership this candidate holds is found lost.
        pub async fn revoked(&self) {
            self.lock.lost().await
        }

        pub async fn leader(&self) -> Result<Option<Leader>> {
            Ok(leader_of(self.lock.info().await?))
        }
    }
}
