//! The blocking Semaphore (with [`Lease`]), [`Latch`], [`ReadWriteLock`]
//! and [`MultiLock`], re-exported by [`crate::sync`].
//!
//! Holds (a lease's permits, read/write holds, multi-key holds) follow the
//! [`crate::sync::Lock`]'s rules, put together once here (a `Tenure`): a
//! blocking acquisition waits on a connection of the library's own, tied
//! (KEEPALIVE) while it waits; with `keepalive` (the default) the holds stay
//! tied to that connection (the server renews them while it lives and
//! releases them when it closes), otherwise they are untied once granted
//! and the library renews them. The monitor thread watches every held
//! object: `is_lost()` turns true as soon as a hold is found gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::{Cmd, Value};

use crate::Acquired;
use crate::error::{Error, Result};
use crate::family::{self as f, Mode, RwLockInfo, SemaphoreInfo};
use crate::pool::{Dedicated, Pool};
use crate::protocol::{self as p, Options, Wait};
use crate::target::Target;
use crate::watch::{Watched, monitor};

pub(crate) fn owner_of(opts: &Options) -> String {
    opts.owner
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

pub(crate) fn ended_without(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "the server ended the wait without granting it (BLOCK 0 answered nil, e.g. CLIENT UNBLOCK)",
        what.to_string(),
    )))
}

// -- the shared tenure ------------------------------------------------------

/// What a held object says about its holds.
pub(crate) trait Kind: Send + Sync + 'static {
    type Holds: Default + Send;
    fn what(&self) -> String;
    fn held(h: &Self::Holds) -> bool;
    /// Commands that renew every hold, each answering 1 while held (0 once
    /// gone); `keepalive` ties, `untie` unties after a tied wait.
    fn renew_cmds(&self, h: &Self::Holds, opts: &Options, keepalive: bool, untie: bool)
    -> Vec<Cmd>;
}

pub(crate) struct St<H> {
    pub holds: H,
    tied: Option<Dedicated>,
    watch: Option<u64>,
    /// The key's lifecycle events, which poke the hold's check.
    events: Option<crate::events::Subscription>,
}

pub(crate) struct Tenure<K: Kind> {
    pool: Arc<Pool>,
    key: String,
    opts: Options,
    kind: K,
    state: Mutex<St<K::Holds>>,
    lost: AtomicBool,
    lost_reason: Mutex<Option<String>>,
}

impl<K: Kind> Tenure<K> {
    fn new(pool: Arc<Pool>, key: String, opts: Options, kind: K) -> Arc<Self> {
        Arc::new(Tenure {
            pool,
            key,
            opts,
            kind,
            state: Mutex::new(St {
                holds: K::Holds::default(),
                tied: None,
                watch: None,
                events: None,
            }),
            lost: AtomicBool::new(false),
            lost_reason: Mutex::new(None),
        })
    }

    fn state(&self) -> MutexGuard<'_, St<K::Holds>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn timeout(&self) -> Option<Duration> {
        p::response_timeout(Wait::No, &self.opts)
    }

    /// A tied acquisition (`cmd` carries KEEPALIVE) on a connection of its
    /// own: the parsed grant and its connection, or None (the connection
    /// given back).
    fn wait<T>(
        &self,
        cmd: &Cmd,
        wait: Wait,
        parse: impl FnOnce(&Value) -> Result<Option<T>>,
    ) -> Result<Option<(T, Dedicated)>> {
        let mut conn = Dedicated::new(&self.pool, self.key.as_bytes())?;
        match conn
            .call(cmd, p::response_timeout(wait, &self.opts))
            .and_then(|v| parse(&v))
        {
            Ok(Some(got)) => Ok(Some((got, conn))),
            Ok(None) => {
                conn.give_back();
                Ok(None)
            }
            Err(e) => {
                // A server error changed nothing; a failed connection closes.
                if conn.healthy() && !e.is_connection_failure() {
                    conn.give_back();
                }
                Err(e)
            }
        }
    }

    /// After a grant (`st.holds` set): keep the connection tied
    /// (keepalive) or untie the holds and give it back; start watching.
    fn settle(self: &Arc<Self>, st: &mut St<K::Holds>, mut conn: Dedicated) -> Result<()> {
        if self.opts.keepalive {
            st.tied = Some(conn);
        } else {
            for cmd in self.kind.renew_cmds(&st.holds, &self.opts, false, true) {
                let r = conn.call(&cmd, self.timeout()).and_then(|v| p::int(&v));
                let err = match r {
                    Ok(0) => Error::LockLost(format!(
                        "{} was gone before the acquisition completed",
                        self.kind.what()
                    )),
                    Ok(_) => continue,
                    Err(e) => e,
                };
                // Closing the connection releases what is still tied.
                conn.close();
                st.holds = K::Holds::default();
                return Err(err);
            }
            conn.give_back();
        }
        self.lost.store(false, Ordering::SeqCst);
        self.start_watch(st);
        Ok(())
    }

    /// A call on the tied connection, or a pooled one. A failure of the
    /// tied connection, or NOTOWNER, is a lost hold.
    fn call(&self, st: &mut St<K::Holds>, cmd: &Cmd) -> Result<Value> {
        let r = match st.tied.as_mut() {
            Some(tied) => tied.call(cmd, self.timeout()).map_err(|e| {
                if e.is_connection_failure() {
                    Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
                } else {
                    e
                }
            }),
            None => self.pool.call(self.key.as_bytes(), cmd, self.timeout()),
        };
        if let Err(Error::LockLost(why)) = &r {
            let close = st.tied.as_ref().is_some_and(|t| !t.healthy());
            self.lose(st, why.clone(), close);
        }
        r
    }

    fn call_pool(&self, cmd: &Cmd) -> Result<Value> {
        self.pool.call(self.key.as_bytes(), cmd, self.timeout())
    }

    fn start_watch(self: &Arc<Self>, st: &mut St<K::Holds>) {
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
            self.key.as_bytes(),
            Arc::new(move |event: &str| {
                if event != "lock.acquired" {
                    monitor().poke(id);
                }
            }),
        );
    }

    /// Back to holding nothing; `lost`: why, if it was lost.
    fn stop(&self, st: &mut St<K::Holds>, lost: Option<String>, close: bool) {
        if let Some(id) = st.watch.take() {
            monitor().remove(id);
        }
        st.events = None;
        st.holds = K::Holds::default();
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

    fn lose(&self, st: &mut St<K::Holds>, why: String, close: bool) {
        self.stop(
            st,
            Some(format!("{} was lost: {why}", self.kind.what())),
            close,
        );
    }

    fn lost_error(&self, st: &mut St<K::Holds>, why: &str) -> Error {
        self.lose(st, why.to_string(), false);
        Error::LockLost(format!("{} was lost: {why}", self.kind.what()))
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    fn lost_reason(&self) -> Option<String> {
        self.lost_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Renews every hold now (keepalive: re-ties them). LockLost if gone.
    fn renew(&self) -> Result<()> {
        let mut st = self.state();
        if !K::held(&st.holds) {
            return Err(Error::LockLost(format!("{} is not held", self.kind.what())));
        }
        let keepalive = st.tied.is_some();
        for cmd in self
            .kind
            .renew_cmds(&st.holds, &self.opts, keepalive, false)
        {
            if p::int(&self.call(&mut st, &cmd)?)? == 0 {
                return Err(self.lost_error(&mut st, "a renewal found it gone"));
            }
        }
        Ok(())
    }
}

impl<K: Kind> Watched for Tenure<K> {
    fn check(&self, id: u64) -> bool {
        let mut st = self.state();
        if st.watch != Some(id) {
            return false;
        }
        let keepalive = st.tied.is_some();
        for cmd in self
            .kind
            .renew_cmds(&st.holds, &self.opts, keepalive, false)
        {
            let r = match st.tied.as_mut() {
                Some(tied) => {
                    let before = tied.fd();
                    let r = tied.call(&cmd, self.timeout());
                    if tied.fd() != before {
                        monitor().set_fd(id, tied.fd());
                    }
                    r
                }
                None => self.call_pool(&cmd),
            };
            match r.and_then(|v| p::int(&v)) {
                Ok(0) => {
                    self.lose(&mut st, "a check (renewal) found it gone".into(), false);
                    return false;
                }
                Ok(_) => {}
                Err(e) if keepalive && e.is_connection_failure() => {
                    self.lose(
                        &mut st,
                        format!("its KEEPALIVE connection failed ({e})"),
                        true,
                    );
                    return false;
                }
                Err(_) => return true, // transient: again at the next turn
            }
        }
        true
    }

    fn readable(&self, id: u64) -> bool {
        let mut st = self.state();
        if st.watch != Some(id) {
            return false;
        }
        if st.tied.as_ref().is_some_and(Dedicated::idle_and_open) {
            return true;
        }
        self.lose(&mut st, "its KEEPALIVE connection ended".into(), true);
        false
    }
}

// -- semaphores -------------------------------------------------------------

/// A counting semaphore (Redisson's RSemaphore / RPermitExpirableSemaphore
/// layout): anonymous permits ([`Semaphore::acquire`] / [`Semaphore::release`],
/// anyone may release them) and leased ones ([`Semaphore::lease`]: a
/// [`Lease`] that gives them back when dropped, tied to the library's
/// connection with `keepalive`, so a crashed holder's permits come back).
pub struct Semaphore {
    pool: Arc<Pool>,
    name: String,
    opts: Options,
}

impl Semaphore {
    /// A semaphore on `name`; `opts`: the lease of leased permits,
    /// keepalive, REPLICAS (owner and token do not apply).
    pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> Semaphore {
        Semaphore {
            pool: Pool::for_target(&target.into()),
            name: name.into(),
            opts,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn call(&self, cmd: &Cmd) -> Result<Value> {
        self.pool.call(
            self.name.as_bytes(),
            cmd,
            p::response_timeout(Wait::No, &self.opts),
        )
    }

    /// Sets the permits if the semaphore does not exist; false if it does.
    pub fn create(&self, permits: u64) -> Result<bool> {
        Ok(p::int(&self.call(&f::sem_create_cmd(&self.name, permits))?)? == 1)
    }

    /// Adds `delta` permits (may be negative); returns those available.
    pub fn add(&self, delta: i64) -> Result<i64> {
        let mut c = redis::cmd("SEMAPHORE.ADD");
        c.arg(&self.name).arg(delta);
        p::int(&self.call(&c)?)
    }

    /// The permits available now.
    pub fn available(&self) -> Result<i64> {
        Ok(self.info()?.map_or(0, |i| i.available))
    }

    /// Takes every available permit; returns how many.
    pub fn drain(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "SEMAPHORE.DRAIN"))?)
    }

    /// SEMAPHORE.INFO; None when the semaphore does not exist.
    pub fn info(&self) -> Result<Option<SemaphoreInfo>> {
        f::parse_sem_info(&self.call(&f::simple(&self.name, "SEMAPHORE.INFO"))?)
    }

    fn acquire_anonymous(&self, n: u64, wait: Wait) -> Result<bool> {
        let cmd = f::sem_acquire_cmd(&self.name, f::count(n)?, wait, &self.opts);
        let v = if wait.block_ms().is_some() {
            let mut conn = Dedicated::new(&self.pool, self.name.as_bytes())?;
            let r = conn.call(&cmd, p::response_timeout(wait, &self.opts));
            if conn.healthy() && !r.as_ref().is_err_and(Error::is_connection_failure) {
                conn.give_back();
            }
            r?
        } else {
            self.call(&cmd)?
        };
        Ok(!matches!(v, Value::Nil))
    }

    /// Takes `n` anonymous permits if available now (and nobody is queued).
    #[must_use = "false: the permits were not taken"]
    pub fn try_acquire(&self, n: u64) -> Result<bool> {
        self.acquire_anonymous(n, Wait::No)
    }

    /// Waits in the server's queue for `n` anonymous permits.
    pub fn acquire(&self, n: u64) -> Result<()> {
        if self.acquire_anonymous(n, Wait::Forever)? {
            Ok(())
        } else {
            Err(ended_without("SEMAPHORE.ACQUIRE"))
        }
    }

    /// Waits up to `timeout` for `n` anonymous permits.
    #[must_use = "false: the permits were not taken"]
    pub fn acquire_timeout(&self, n: u64, timeout: Duration) -> Result<bool> {
        self.acquire_anonymous(n, Wait::For(timeout))
    }

    /// Gives back `n` anonymous permits; returns those available.
    pub fn release(&self, n: u64) -> Result<i64> {
        p::int(&self.call(&f::sem_release_cmd(&self.name, f::count(n)?))?)
    }

    fn take_lease(&self, n: u64, wait: Wait) -> Result<Acquired<Lease>> {
        let n = f::count(n)?;
        let t = Tenure::new(
            Arc::clone(&self.pool),
            self.name.clone(),
            self.opts.clone(),
            LeaseKind {
                name: self.name.clone(),
            },
        );
        let mut st = t.state();
        let cmd = f::sem_lease_cmd(&self.name, n, wait, true, &self.opts);
        let Some((ids, conn)) = t.wait(&cmd, wait, f::parse_ids)? else {
            return Ok(Acquired::NotAcquired);
        };
        st.holds = ids;
        t.settle(&mut st, conn)?;
        drop(st);
        Ok(Acquired::Held(Lease { t, released: false }))
    }

    /// Leases `n` permits if available now.
    pub fn try_lease(&self, n: u64) -> Result<Acquired<Lease>> {
        self.take_lease(n, Wait::No)
    }

    /// Waits in the server's queue for `n` leased permits.
    pub fn lease(&self, n: u64) -> Result<Lease> {
        self.take_lease(n, Wait::Forever)?
            .into_guard()
            .ok_or_else(|| ended_without("SEMAPHORE.LEASE"))
    }

    /// Waits up to `timeout` for `n` leased permits.
    pub fn lease_timeout(&self, n: u64, timeout: Duration) -> Result<Acquired<Lease>> {
        self.take_lease(n, Wait::For(timeout))
    }
}

pub(crate) struct LeaseKind {
    pub(crate) name: String,
}

impl Kind for LeaseKind {
    type Holds = Vec<String>;

    fn what(&self) -> String {
        format!("a lease of semaphore {:?}", self.name)
    }

    fn held(h: &Vec<String>) -> bool {
        !h.is_empty()
    }

    fn renew_cmds(
        &self,
        ids: &Vec<String>,
        opts: &Options,
        keepalive: bool,
        untie: bool,
    ) -> Vec<Cmd> {
        ids.iter()
            .map(|id| f::sem_renew_cmd(&self.name, id, opts, keepalive, untie))
            .collect()
    }
}

/// Leased permits of a [`Semaphore`]. Dropping it returns them (errors
/// ignored there: call [`Lease::release`] to see them).
#[must_use = "dropping the lease returns its permits at once"]
pub struct Lease {
    t: Arc<Tenure<LeaseKind>>,
    released: bool,
}

impl Lease {
    /// The permit ids (32 hex chars each).
    pub fn ids(&self) -> Vec<String> {
        self.t.state().holds.clone()
    }

    /// Returns the permits; returns how many were returned.
    /// [`Error::LockLost`] if they were not leased any more.
    pub fn release(mut self) -> Result<i64> {
        self.released = true;
        self.give_back()
    }

    fn give_back(&self) -> Result<i64> {
        let mut st = self.t.state();
        if st.holds.is_empty() {
            return Err(Error::LockLost(format!(
                "{} is not held",
                self.t.kind.what()
            )));
        }
        let cmd = f::sem_return_cmd(&self.t.kind.name, &st.holds);
        let left = p::int(&self.t.call(&mut st, &cmd)?)?;
        self.t.stop(&mut st, None, false);
        Ok(left)
    }

    /// Sets every permit's lease from now (keepalive: re-ties them).
    pub fn renew(&self) -> Result<()> {
        self.t.renew()
    }

    /// True once the lease was found lost (its KEEPALIVE connection ended,
    /// a check found a permit gone).
    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.give_back();
        }
    }
}

// -- latches ----------------------------------------------------------------

/// A count-down latch (Redisson's RCountDownLatch layout).
pub struct Latch {
    pool: Arc<Pool>,
    name: String,
}

impl Latch {
    pub fn new(target: impl Into<Target>, name: impl Into<String>) -> Latch {
        Latch {
            pool: Pool::for_target(&target.into()),
            name: name.into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn call(&self, cmd: &Cmd) -> Result<Value> {
        self.pool
            .call(self.name.as_bytes(), cmd, Some(p::CALL_TIMEOUT))
    }

    /// Sets the count (≥ 1) if the latch does not exist; false if it does.
    pub fn create(&self, count: u64) -> Result<bool> {
        Ok(p::int(&self.call(&f::latch_create_cmd(&self.name, count))?)? == 1)
    }

    /// Counts down once; returns the count left (0: open).
    pub fn count_down(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "LATCH.COUNTDOWN"))?)
    }

    /// The count (0: open, or no latch).
    pub fn count(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "LATCH.COUNT"))?)
    }

    fn await_open(&self, wait: Wait) -> Result<bool> {
        let cmd = f::latch_await_cmd(&self.name, wait);
        if wait.block_ms().is_none() {
            return Ok(!matches!(self.call(&cmd)?, Value::Nil));
        }
        let mut conn = Dedicated::new(&self.pool, self.name.as_bytes())?;
        let r = conn.call(&cmd, p::response_timeout(wait, &Options::default()));
        if conn.healthy() && !r.as_ref().is_err_and(Error::is_connection_failure) {
            conn.give_back();
        }
        Ok(!matches!(r?, Value::Nil))
    }

    /// Waits until the latch is open.
    pub fn wait(&self) -> Result<()> {
        if self.await_open(Wait::Forever)? {
            Ok(())
        } else {
            Err(ended_without("LATCH.AWAIT"))
        }
    }

    /// Waits up to `timeout` for the latch to open; false if it did not.
    #[must_use = "false: the latch is still closed"]
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.await_open(Wait::For(timeout))
    }
}

// -- read-write locks -------------------------------------------------------

pub(crate) struct RwKind {
    pub(crate) name: String,
    pub(crate) owner: String,
}

#[derive(Default, Clone, Copy)]
pub(crate) struct RwHolds {
    pub(crate) reads: u64,
    pub(crate) writes: u64,
}

impl RwHolds {
    pub(crate) fn of(&self, mode: Mode) -> u64 {
        match mode {
            Mode::Read => self.reads,
            Mode::Write => self.writes,
        }
    }

    pub(crate) fn set(&mut self, mode: Mode, n: u64) {
        match mode {
            Mode::Read => self.reads = n,
            Mode::Write => self.writes = n,
        }
    }
}

impl Kind for RwKind {
    type Holds = RwHolds;

    fn what(&self) -> String {
        format!("read-write lock {:?} held by {:?}", self.name, self.owner)
    }

    fn held(h: &RwHolds) -> bool {
        h.reads + h.writes > 0
    }

    fn renew_cmds(&self, _: &RwHolds, opts: &Options, keepalive: bool, untie: bool) -> Vec<Cmd> {
        vec![f::rw_renew_cmd(
            &self.name,
            &self.owner,
            opts,
            keepalive,
            untie,
        )]
    }
}

/// A read-write lock (Redisson's RReadWriteLock layout): many readers or one
/// writer; reentrant per mode; a writer may take read holds (downgrade,
/// [`WriteGuard::downgrade`]); a reader asking to write gets
/// [`Error::NoUpgrade`] (an upgrade would deadlock). One object is one
/// owner: give each thread its own.
pub struct ReadWriteLock {
    t: Arc<Tenure<RwKind>>,
}

/// What [`ReadWriteLock::try_read`] and [`ReadWriteLock::read_timeout`] give.
pub type AcquiredRead = Acquired<ReadGuard>;
/// What [`ReadWriteLock::try_write`] and [`ReadWriteLock::write_timeout`] give.
pub type AcquiredWrite = Acquired<WriteGuard>;

/// One read hold; dropping it releases it.
#[must_use = "dropping the guard releases the read hold at once"]
pub struct ReadGuard {
    t: Arc<Tenure<RwKind>>,
    released: bool,
}

/// One write hold; dropping it releases it.
#[must_use = "dropping the guard releases the write hold at once"]
pub struct WriteGuard {
    t: Arc<Tenure<RwKind>>,
    token: Option<u64>,
    released: bool,
}

impl ReadWriteLock {
    /// A read-write lock on `name`; `opts` as for [`crate::sync::Lock`]
    /// (`token`: a fencing token with every write acquisition).
    pub fn new(target: impl Into<Target>, name: impl Into<String>, opts: Options) -> ReadWriteLock {
        let name = name.into();
        let kind = RwKind {
            name: name.clone(),
            owner: owner_of(&opts),
        };
        ReadWriteLock {
            t: Tenure::new(Pool::for_target(&target.into()), name, opts, kind),
        }
    }

    pub fn name(&self) -> &str {
        &self.t.key
    }

    pub fn owner(&self) -> &str {
        &self.t.kind.owner
    }

    pub fn read_holds(&self) -> u64 {
        self.t.state().holds.reads
    }

    pub fn write_holds(&self) -> u64 {
        self.t.state().holds.writes
    }

    pub fn try_read(&self) -> Result<AcquiredRead> {
        Ok(match rw_acquire(&self.t, Mode::Read, Wait::No)? {
            Some(_) => Acquired::Held(read_guard(&self.t)),
            None => Acquired::NotAcquired,
        })
    }

    pub fn read(&self) -> Result<ReadGuard> {
        rw_acquire(&self.t, Mode::Read, Wait::Forever)?
            .map(|_| read_guard(&self.t))
            .ok_or_else(|| ended_without("RWLOCK.ACQUIRE READ"))
    }

    pub fn read_timeout(&self, timeout: Duration) -> Result<AcquiredRead> {
        Ok(match rw_acquire(&self.t, Mode::Read, Wait::For(timeout))? {
            Some(_) => Acquired::Held(read_guard(&self.t)),
            None => Acquired::NotAcquired,
        })
    }

    pub fn try_write(&self) -> Result<AcquiredWrite> {
        Ok(match rw_acquire(&self.t, Mode::Write, Wait::No)? {
            Some(token) => Acquired::Held(write_guard(&self.t, token)),
            None => Acquired::NotAcquired,
        })
    }

    pub fn write(&self) -> Result<WriteGuard> {
        rw_acquire(&self.t, Mode::Write, Wait::Forever)?
            .map(|token| write_guard(&self.t, token))
            .ok_or_else(|| ended_without("RWLOCK.ACQUIRE WRITE"))
    }

    pub fn write_timeout(&self, timeout: Duration) -> Result<AcquiredWrite> {
        Ok(
            match rw_acquire(&self.t, Mode::Write, Wait::For(timeout))? {
                Some(token) => Acquired::Held(write_guard(&self.t, token)),
                None => Acquired::NotAcquired,
            },
        )
    }

    /// Renews every hold of this owner (keepalive: re-ties them).
    pub fn renew(&self) -> Result<()> {
        self.t.renew()
    }

    /// RWLOCK.INFO; None when no one holds it.
    pub fn info(&self) -> Result<Option<RwLockInfo>> {
        f::parse_rw_info(&self.t.call_pool(&f::simple(&self.t.key, "RWLOCK.INFO"))?)
    }

    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }
}

fn read_guard(t: &Arc<Tenure<RwKind>>) -> ReadGuard {
    ReadGuard {
        t: Arc::clone(t),
        released: false,
    }
}

fn write_guard(t: &Arc<Tenure<RwKind>>, token: Option<u64>) -> WriteGuard {
    WriteGuard {
        t: Arc::clone(t),
        token,
        released: false,
    }
}

/// One acquisition: Some(token) when granted.
fn rw_acquire(t: &Arc<Tenure<RwKind>>, mode: Mode, wait: Wait) -> Result<Option<Option<u64>>> {
    let token = t.opts.token && mode == Mode::Write;
    let k = &t.kind;
    let mut st = t.state();
    if RwKind::held(&st.holds) {
        // Re-entry, downgrade or NOUPGRADE: answered at once.
        let keepalive = st.tied.is_some();
        let cmd = f::rw_acquire_cmd(&k.name, &k.owner, mode, &t.opts, keepalive, Wait::No);
        let got = p::parse_acquire(&t.call(&mut st, &cmd)?, token)?;
        let expected = st.holds.of(mode) + 1;
        return match got {
            Some((count, tok)) if count == expected => {
                st.holds.set(mode, count);
                Ok(Some(tok))
            }
            other => {
                if other.is_some() {
                    let _ = t.call_pool(&f::rw_release_cmd(&k.name, &k.owner, mode));
                }
                Err(t.lost_error(&mut st, "a re-entry found it gone"))
            }
        };
    }
    let cmd = f::rw_acquire_cmd(&k.name, &k.owner, mode, &t.opts, true, wait);
    let Some(((count, tok), conn)) = t.wait(&cmd, wait, |v| p::parse_acquire(v, token))? else {
        return Ok(None);
    };
    st.holds.set(mode, count);
    t.settle(&mut st, conn)?;
    Ok(Some(tok))
}

fn rw_release(t: &Tenure<RwKind>, mode: Mode) -> Result<u64> {
    let mut st = t.state();
    let cmd = f::rw_release_cmd(&t.kind.name, &t.kind.owner, mode);
    let left = p::int(&t.call(&mut st, &cmd)?)? as u64;
    st.holds.set(mode, left);
    if !RwKind::held(&st.holds) {
        t.stop(&mut st, None, false);
    }
    Ok(left)
}

impl ReadGuard {
    /// Gives this read hold back; returns the read holds left.
    pub fn release(mut self) -> Result<u64> {
        self.released = true;
        rw_release(&self.t, Mode::Read)
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = rw_release(&self.t, Mode::Read);
        }
    }
}

impl WriteGuard {
    /// The fencing token of this acquisition (with `token`).
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Gives this write hold back; returns the write holds left.
    pub fn release(mut self) -> Result<u64> {
        self.released = true;
        rw_release(&self.t, Mode::Write)
    }

    /// Takes a read hold, then gives this write hold back: no other writer
    /// can get in between.
    pub fn downgrade(mut self) -> Result<ReadGuard> {
        rw_acquire(&self.t, Mode::Read, Wait::No)?
            .ok_or_else(|| ended_without("RWLOCK.ACQUIRE READ (downgrade)"))?;
        let read = read_guard(&self.t);
        self.released = true;
        rw_release(&self.t, Mode::Write)?;
        Ok(read)
    }
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = rw_release(&self.t, Mode::Write);
        }
    }
}

// -- multi-key locks --------------------------------------------------------

pub(crate) struct MultiKind {
    pub(crate) names: Vec<String>,
    pub(crate) owner: String,
}

impl Kind for MultiKind {
    type Holds = u64;

    fn what(&self) -> String {
        format!("multi-lock {:?} held by {:?}", self.names, self.owner)
    }

    fn held(h: &u64) -> bool {
        *h > 0
    }

    fn renew_cmds(&self, _: &u64, opts: &Options, keepalive: bool, untie: bool) -> Vec<Cmd> {
        f::mrenew_cmds(&self.names, &self.owner, opts, keepalive, untie)
    }
}

/// Several ordinary locks (each a [`crate::sync::Lock`] key, Redisson's
/// RLock layout) taken all at once or not at all (LOCK.MACQUIRE): no
/// partial hold, no deadlock whatever order others name them in. In a
/// cluster every key must hash to one slot ([`Error::CrossSlot`]).
/// Reentrant; one object is one owner.
pub struct MultiLock {
    t: Arc<Tenure<MultiKind>>,
}

/// One hold of every key of a [`MultiLock`]; dropping it releases it.
#[must_use = "dropping the guard releases every key at once"]
pub struct MultiGuard {
    t: Arc<Tenure<MultiKind>>,
    released: bool,
}

impl MultiLock {
    pub fn new<N: Into<String>>(
        target: impl Into<Target>,
        names: impl IntoIterator<Item = N>,
        opts: Options,
    ) -> MultiLock {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        let kind = MultiKind {
            names: names.clone(),
            owner: owner_of(&opts),
        };
        let first = names.first().cloned().unwrap_or_default();
        MultiLock {
            t: Tenure::new(Pool::for_target(&target.into()), first, opts, kind),
        }
    }

    pub fn names(&self) -> &[String] {
        &self.t.kind.names
    }

    pub fn owner(&self) -> &str {
        &self.t.kind.owner
    }

    /// Holds of every key taken and not given back.
    pub fn holds(&self) -> u64 {
        self.t.state().holds
    }

    fn take(&self, wait: Wait) -> Result<Acquired<MultiGuard>> {
        let t = &self.t;
        let k = &t.kind;
        if k.names.is_empty() {
            return Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::Client,
                "hashlock-client: a MultiLock needs at least one key",
            ))));
        }
        let mut st = t.state();
        if st.holds > 0 {
            let keepalive = st.tied.is_some();
            let cmd = f::macquire_cmd(&k.names, &k.owner, &t.opts, keepalive, Wait::No);
            let counts = f::parse_counts(&t.call(&mut st, &cmd)?)?;
            let expected = st.holds + 1;
            if counts
                .as_ref()
                .is_some_and(|c| c.iter().all(|&n| n == expected))
            {
                st.holds = expected;
            } else {
                if counts.is_some() {
                    let _ = t.call_pool(&f::mrelease_cmd(&k.names, &k.owner));
                }
                return Err(t.lost_error(&mut st, "a re-entry found it gone"));
            }
        } else {
            let cmd = f::macquire_cmd(&k.names, &k.owner, &t.opts, true, wait);
            let Some((counts, conn)) = t.wait(&cmd, wait, f::parse_counts)? else {
                return Ok(Acquired::NotAcquired);
            };
            st.holds = counts.iter().copied().min().unwrap_or(0);
            t.settle(&mut st, conn)?;
        }
        Ok(Acquired::Held(MultiGuard {
            t: Arc::clone(t),
            released: false,
        }))
    }

    /// Takes every key if all are free (or held by this owner) now.
    pub fn try_acquire(&self) -> Result<Acquired<MultiGuard>> {
        self.take(Wait::No)
    }

    /// Waits until every key can be taken at once.
    pub fn acquire(&self) -> Result<MultiGuard> {
        self.take(Wait::Forever)?
            .into_guard()
            .ok_or_else(|| ended_without("LOCK.MACQUIRE"))
    }

    /// Waits up to `timeout` until every key can be taken at once.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Acquired<MultiGuard>> {
        self.take(Wait::For(timeout))
    }

    /// Renews every key (keepalive: re-ties them).
    pub fn renew(&self) -> Result<()> {
        self.t.renew()
    }

    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }
}

fn mrelease(t: &Tenure<MultiKind>) -> Result<u64> {
    let mut st = t.state();
    let cmd = f::mrelease_cmd(&t.kind.names, &t.kind.owner);
    let left = f::parse_counts(&t.call(&mut st, &cmd)?)?
        .unwrap_or_default()
        .into_iter()
        .max()
        .unwrap_or(0);
    st.holds = left;
    if left == 0 {
        t.stop(&mut st, None, false);
    }
    Ok(left)
}

impl MultiGuard {
    /// Gives one hold of every key back; returns the holds left (0: free).
    pub fn release(mut self) -> Result<u64> {
        self.released = true;
        mrelease(&self.t)
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = mrelease(&self.t);
        }
    }
}
