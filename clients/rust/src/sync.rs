//! The blocking [`Lock`].
//!
//! ```no_run
//! # fn main() -> hashlock_client::Result<()> {
//! use std::time::Duration;
//! use hashlock_client::{Acquired, Options, sync::Lock};
//!
//! let lock = Lock::new(redis::Client::open("redis://127.0.0.1:6380/")?, "orders:42", Options::default());
//! // Bind the guard: the lock is held while `guard` lives.
//! if let Acquired::Held(guard) = lock.acquire_timeout(Duration::from_secs(5))? {
//!     // ... work ...
//!     guard.release()?;
//! }
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::Value;

use crate::error::{Error, Result};
use crate::pool::{Dedicated, Pool};
use crate::protocol::{self as p, LockInfo, Options, Wait};
use crate::target::Target;
use crate::watch::{Watched, monitor};

pub use crate::election::sync::{Election, Observer};
pub use crate::family_sync::{
    AcquiredRead, AcquiredWrite, Latch, Lease, MultiGuard, MultiLock, ReadGuard, ReadWriteLock,
    Semaphore, WriteGuard,
};

/// What [`Lock::try_acquire`] and [`Lock::acquire_timeout`] give.
pub type Acquired = crate::Acquired<LockGuard>;

/// A reentrant lock on one key; one `Lock` is one owner (a fresh UUID
/// unless [`Options::owner`] gives one). Give each thread its own `Lock`.
///
/// With `keepalive` (the default) the lock is tied to a connection of the
/// library's own and the server renews the lease while it is open; otherwise
/// the library renews it every third of the lease. Either way the library's
/// monitor thread watches the held lock and [`Lock::is_lost`] turns true as
/// soon as it is found gone: at once when its KEEPALIVE connection ends, or
/// when the key's lifecycle event (`lock.forced`, `lock.expired`, ...: the
/// server's `notify-keyspace-events` needs `K` and `d`) reaches the
/// library's subscriber connection; else at the next check (every third of
/// the lease) after a FORCERELEASE or a lapsed lease.
pub struct Lock {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Arc<Pool>,
    name: String,
    owner: String,
    opts: Options,
    state: Mutex<State>,
    lost: AtomicBool,
    lost_reason: Mutex<Option<String>>,
}

#[derive(Default)]
struct State {
    holds: u64,
    /// keepalive: the connection the lock is tied to (closing it releases).
    tied: Option<Dedicated>,
    /// The monitor's id for the current hold.
    watch: Option<u64>,
    /// The key's lifecycle events, which poke the hold's check.
    events: Option<crate::events::Subscription>,
}

/// One hold of a [`Lock`]. Dropping it releases the hold (errors are
/// ignored there: call [`LockGuard::release`] to see them).
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    inner: Arc<Inner>,
    token: Option<u64>,
    released: bool,
}

impl Lock {
    /// A lock on `name` on `target`: a `redis::Client` (one server) or a
    /// [`Target::cluster`].
    pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Lock {
        let target = target.into();
        let owner = opts
            .owner
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Lock {
            inner: Arc::new(Inner {
                pool: Pool::for_target(&target),
                name: name.into(),
                owner,
                opts,
                state: Mutex::new(State::default()),
                lost: AtomicBool::new(false),
                lost_reason: Mutex::new(None),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Holds this Lock has taken and not given back, as last seen.
    pub fn holds(&self) -> u64 {
        self.inner.state().holds
    }

    /// Takes (or re-enters) the lock if it is free.
    pub fn try_acquire(&self) -> Result<Acquired> {
        self.inner.acquire(Wait::No)
    }

    /// Waits in the server's queue as long as it takes.
    pub fn acquire(&self) -> Result<LockGuard> {
        match self.inner.acquire(Wait::Forever)? {
            Acquired::Held(g) => Ok(g),
            Acquired::NotAcquired => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the server ended the wait without the lock (LOCK.ACQUIRE ... BLOCK 0 answered nil, e.g. CLIENT UNBLOCK)",
            )))),
        }
    }

    /// Waits in the server's queue up to `timeout`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Acquired> {
        self.inner.acquire(Wait::For(timeout))
    }

    /// LOCK.INFO; None when the lock is free.
    pub fn info(&self) -> Result<Option<LockInfo>> {
        let v = self.inner.pool.call(
            self.inner.name.as_bytes(),
            &p::info_cmd(&self.inner.name),
            p::response_timeout(Wait::No, &self.inner.opts),
        )?;
        p::parse_info(&v)
    }

    /// Sets the lease to `lease` from now (keepalive: re-ties the lock to
    /// the lock's connection). [`Error::LockLost`] if not held.
    pub fn renew(&self) -> Result<()> {
        self.inner.renew()
    }

    /// True once the lock this object held was found lost (its KEEPALIVE
    /// connection ended, or a check or renewal found it gone), until the next
    /// successful acquisition.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
    }

    /// Why the lock was found lost, while [`Lock::is_lost`].
    pub fn lost_reason(&self) -> Option<String> {
        self.inner
            .lost_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl LockGuard {
    /// The fencing token of this acquisition (with `token`).
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Gives this hold back; returns the holds left (0 = released).
    pub fn release(mut self) -> Result<u64> {
        self.released = true;
        self.inner.release_one()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.inner.release_one();
        }
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn guard(self: &Arc<Self>, token: Option<u64>) -> LockGuard {
        LockGuard {
            inner: Arc::clone(self),
            token,
            released: false,
        }
    }

    fn key(&self) -> &[u8] {
        self.name.as_bytes()
    }

    fn call_timeout(&self) -> Option<Duration> {
        p::response_timeout(Wait::No, &self.opts)
    }

    fn acquire(self: &Arc<Self>, wait: Wait) -> Result<Acquired> {
        let mut st = self.state();
        if st.holds > 0 {
            return self.reenter(&mut st).map(Acquired::Held);
        }
        let got = if self.opts.keepalive || wait.block_ms().is_some() {
            self.acquire_dedicated(&mut st, wait)?
        } else {
            let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, wait);
            let v = self.pool.call(self.key(), &cmd, self.call_timeout())?;
            p::parse_acquire(&v, self.opts.token)?
        };
        let Some((count, token)) = got else {
            return Ok(Acquired::NotAcquired);
        };
        st.holds = count;
        self.lost.store(false, Ordering::SeqCst);
        self.start_watch(&mut st);
        Ok(Acquired::Held(self.guard(token)))
    }

    /// An acquire on a connection of the library's own. It is always tied
    /// (KEEPALIVE): if the wait ends on the client side (its read timeout),
    /// closing the connection takes it off the server's queue and releases a
    /// grant already on its way. keepalive off unties it once the grant is
    /// read. A connection that ends holding nothing goes back to the pool.
    fn acquire_dedicated(&self, st: &mut State, wait: Wait) -> Result<Option<(u64, Option<u64>)>> {
        let mut conn = Dedicated::new(&self.pool, self.key())?;
        let tied_opts = Options {
            keepalive: true,
            ..self.opts.clone()
        };
        let cmd = p::acquire_cmd(&self.name, &self.owner, &tied_opts, wait);
        let got = match conn
            .call(&cmd, p::response_timeout(wait, &self.opts))
            .and_then(|v| p::parse_acquire(&v, self.opts.token))
        {
            Ok(g) => g,
            Err(e) => {
                // A server error changed nothing (the connection is clean);
                // a failed one is dropped, and closes.
                if conn.healthy() {
                    conn.give_back();
                }
                return Err(e);
            }
        };
        if got.is_none() {
            conn.give_back();
            return Ok(None);
        }
        if self.opts.keepalive {
            st.tied = Some(conn);
            return Ok(got);
        }
        let untied = conn
            .call(
                &p::untie_cmd(&self.name, &self.owner, &self.opts),
                self.call_timeout(),
            )
            .and_then(|v| p::int(&v));
        if conn.healthy() {
            conn.give_back();
        }
        match untied {
            Ok(0) => Err(Error::LockLost(format!(
                "lock {:?} was gone before the acquisition completed",
                self.name
            ))),
            Ok(_) => Ok(got),
            Err(e) => Err(e),
        }
    }

    fn reenter(self: &Arc<Self>, st: &mut State) -> Result<LockGuard> {
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, Wait::No);
        let v = match self.on_tied_or_pool(st, &cmd) {
            Ok(v) => v,
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    self.stop(st, Some(e.to_string()), e.is_connection_failure());
                }
                return Err(e);
            }
        };
        match p::parse_acquire(&v, self.opts.token)? {
            Some((count, token)) if count == st.holds + 1 => {
                st.holds = count;
                Ok(self.guard(token))
            }
            other => {
                // Our holds were lost meanwhile: the section they protect is
                // compromised. Give back any fresh hold and say so.
                if other.is_some() {
                    let _ = self.pool.call(
                        self.key(),
                        &p::release_cmd(&self.name, &self.owner),
                        self.call_timeout(),
                    );
                }
                let why = format!(
                    "lock {:?} was lost while held by {:?} (re-entry found it gone)",
                    self.name, self.owner
                );
                self.stop(st, Some(why.clone()), false);
                Err(Error::LockLost(why))
            }
        }
    }

    fn release_one(&self) -> Result<u64> {
        let mut st = self.state();
        let cmd = p::release_cmd(&self.name, &self.owner);
        match self.on_tied_or_pool(&mut st, &cmd).and_then(|v| p::int(&v)) {
            Ok(left) => {
                st.holds = left as u64;
                if left == 0 {
                    self.stop(&mut st, None, false);
                }
                Ok(left as u64)
            }
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    let close = st.tied.as_ref().is_some_and(|t| !t.healthy());
                    self.stop(&mut st, Some(e.to_string()), close);
                }
                Err(e)
            }
        }
    }

    fn renew(self: &Arc<Self>) -> Result<()> {
        let mut st = self.state();
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, self.opts.keepalive);
        let renewed = if self.opts.keepalive && st.tied.is_none() {
            let mut conn = Dedicated::new(&self.pool, self.key())?;
            let r = conn
                .call(&cmd, self.call_timeout())
                .and_then(|v| p::int(&v));
            match r {
                Ok(n) if n != 0 => {
                    // Held, and now tied to this connection: watch it.
                    self.stop(&mut st, None, false);
                    st.tied = Some(conn);
                    st.holds = st.holds.max(1);
                    self.lost.store(false, Ordering::SeqCst);
                    self.start_watch(&mut st);
                    Ok(n)
                }
                other => {
                    if conn.healthy() {
                        conn.give_back();
                    }
                    other
                }
            }
        } else {
            self.on_tied_or_pool(&mut st, &cmd).and_then(|v| p::int(&v))
        };
        let renewed = renewed.inspect_err(|e| {
            if matches!(e, Error::LockLost(_)) {
                self.stop(&mut st, Some(e.to_string()), e.is_connection_failure());
            }
        })?;
        if renewed == 0 {
            let why = format!(
                "lock {:?} is not held by {:?} any more",
                self.name, self.owner
            );
            self.stop(&mut st, Some(why.clone()), false);
            return Err(Error::LockLost(why));
        }
        Ok(())
    }

    /// A call on the tied connection (keepalive) or a pooled one. A failure
    /// of the tied connection itself is a lost lock: the tie is gone, and
    /// with it (the server released it) the lock.
    fn on_tied_or_pool(&self, st: &mut State, cmd: &redis::Cmd) -> Result<Value> {
        match st.tied.as_mut() {
            Some(tied) if self.opts.keepalive => tied.call(cmd, self.call_timeout()).map_err(|e| {
                if e.is_connection_failure() {
                    Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
                } else {
                    e
                }
            }),
            _ => self.pool.call(self.key(), cmd, self.call_timeout()),
        }
    }

    // -- loss detection ---------------------------------------------------

    fn start_watch(self: &Arc<Self>, st: &mut State) {
        if st.watch.is_some() {
            return;
        }
        let fd = st.tied.as_ref().and_then(Dedicated::fd);
        let me: Arc<dyn Watched> = Arc::clone(self) as Arc<dyn Watched>;
        let interval = (self.opts.lease / 3).max(Duration::from_millis(1));
        let id = monitor().add(Arc::downgrade(&me), fd, interval);
        st.watch = Some(id);
        // Every event but an acquisition (the ending of a hold, a
        // resubscription) has the hold checked at once.
        st.events = crate::events::follow(
            &self.pool,
            self.key(),
            Arc::new(move |event: &str| {
                if event != "lock.acquired" {
                    monitor().poke(id);
                }
            }),
        );
    }

    /// Back to not holding: stop watching; the tied connection goes back to
    /// the pool, or is closed (`close`: it failed or ended). `lost`: why the
    /// lock was lost, if it was.
    fn stop(&self, st: &mut State, lost: Option<String>, close: bool) {
        if let Some(id) = st.watch.take() {
            monitor().remove(id);
        }
        st.events = None;
        st.holds = 0;
        if let Some(mut tied) = st.tied.take() {
            if close || !tied.healthy() {
                tied.close();
            } else {
                tied.give_back();
            }
        }
        if let Some(why) = lost {
            *self.lost_reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            self.lost.store(true, Ordering::SeqCst);
        }
    }

    fn lose(&self, st: &mut State, why: String, close: bool) {
        self.stop(
            st,
            Some(format!(
                "lock {:?} held by {:?} was lost: {why}",
                self.name, self.owner
            )),
            close,
        );
    }
}

impl Watched for Inner {
    fn check(&self, id: u64) -> bool {
        let mut st = self.state();
        if st.watch != Some(id) {
            return false;
        }
        let keepalive = self.opts.keepalive && st.tied.is_some();
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, keepalive);
        let result = if keepalive {
            let tied = st.tied.as_mut().expect("checked");
            let before = tied.fd();
            let r = tied.call(&cmd, self.call_timeout());
            if tied.fd() != before {
                monitor().set_fd(id, tied.fd()); // it followed a MOVED
            }
            r
        } else {
            self.pool.call(self.key(), &cmd, self.call_timeout())
        };
        match result.and_then(|v| p::int(&v)) {
            Ok(0) => {
                self.lose(&mut st, "a check (LOCK.RENEW) found it gone".into(), false);
                false
            }
            Ok(_) => true,
            Err(e) if keepalive && e.is_connection_failure() => {
                self.lose(
                    &mut st,
                    format!("its KEEPALIVE connection failed ({e})"),
                    true,
                );
                false
            }
            Err(_) => true, // transient: tried again at the next turn
        }
    }

    fn readable(&self, id: u64) -> bool {
        let mut st = self.state();
        if st.watch != Some(id) {
            return false;
        }
        if st.tied.as_ref().is_some_and(Dedicated::idle_and_open) {
            return true; // a reply the owner has read by now
        }
        self.lose(&mut st, "its KEEPALIVE connection ended".into(), true);
        false
    }
}
