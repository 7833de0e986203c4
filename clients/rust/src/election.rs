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
//! An observer of changes (the other libraries' `observe()`) is not here.

use crate::protocol::{LockInfo, Options};

/// Who leads, and in which term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    pub owner: String,
    pub term: u64,
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

pub mod sync {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::{Leader, candidate, leader_of};
    use crate::Acquired;
    use crate::error::Result;
    use crate::protocol::Options;
    use crate::sync::{Lock, LockGuard};
    use crate::target::Target;

    /// A candidate for leadership of `name` (one owner: give each process
    /// or thread its own).
    pub struct Election {
        lock: Lock,
        held: Mutex<Option<(LockGuard, u64)>>,
    }

    impl Election {
        /// `opts`: the lease (the leader's safety net) and the owner id;
        /// keepalive and token are always on.
        pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Election {
            Election {
                lock: Lock::new(target, name, candidate(opts)),
                held: Mutex::new(None),
            }
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

        fn forget_lost(&self) {
            if self.lock.is_lost() {
                if let Some((guard, _)) = self.held().take() {
                    let _ = guard.release(); // LockLost: nothing to give back
                }
            }
        }

        /// Waits to lead as long as it takes; returns the term (already
        /// leading: the current term).
        pub fn campaign(&self) -> Result<u64> {
            self.forget_lost();
            if let Some(term) = self.term() {
                return Ok(term);
            }
            let guard = self.lock.acquire()?;
            Ok(self.won(guard))
        }

        /// Waits up to `timeout` to lead; None if the wait ran out.
        pub fn campaign_timeout(&self, timeout: Duration) -> Result<Option<u64>> {
            self.forget_lost();
            if let Some(term) = self.term() {
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

    use super::{Leader, candidate, leader_of};
    use crate::Acquired;
    use crate::error::Result;
    use crate::protocol::Options;
    use crate::target::Target;
    use crate::tokio::{Lock, LockGuard};

    /// See [`super::sync::Election`]: the same rules, async.
    pub struct Election {
        lock: Lock,
        held: Mutex<Option<(LockGuard, u64)>>,
    }

    impl Election {
        pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Election {
            Election {
                lock: Lock::new(target, name, candidate(opts)),
                held: Mutex::new(None),
            }
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

        async fn forget_lost(&self) {
            if self.lock.is_lost() {
                let held = self.held().take();
                if let Some((guard, _)) = held {
                    let _ = guard.release().await;
                }
            }
        }

        /// Waits to lead as long as it takes; returns the term. Cancelling
        /// it never leaves this candidate leading (see [`crate::tokio::Lock`]).
        pub async fn campaign(&self) -> Result<u64> {
            self.forget_lost().await;
            if let Some(term) = self.term() {
                return Ok(term);
            }
            let guard = self.lock.acquire().await?;
            Ok(self.won(guard))
        }

        pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Option<u64>> {
            self.forget_lost().await;
            if let Some(term) = self.term() {
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
