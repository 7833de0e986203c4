//! The async Semaphore (with [`Lease`]), [`Latch`], [`ReadWriteLock`] and
//! [`MultiLock`] for tokio, re-exported by [`crate::tokio`]. The rules are
//! the sync objects' (see [`crate::sync::Semaphore`]).
//!
//! Cancellation: every operation of a held object (an acquisition, a
//! release, a renewal, a downgrade) runs in a task of its own, which the
//! object's next operation waits for; dropping the future that awaits it
//! never leaves a half-done change behind:
//! - a waiting acquisition whose future is dropped ends its wait on the
//!   server (its connection, tied with KEEPALIVE while it waits, is closed:
//!   the server drops the waiter and releases a grant already on its way);
//!   a grant that arrived anyway becomes a guard nobody holds, and is given
//!   back;
//! - an anonymous [`Semaphore::acquire`] (permits cannot be tied to a
//!   connection) is ended with CLIENT UNBLOCK, and permits granted in that
//!   instant are released;
//! - `release().await` completes even if its future is dropped;
//! - a guard dropped without `release()` spawns the release (errors ignored)
//!   on the current runtime; outside any runtime it cannot (with KEEPALIVE
//!   the holds end when the object and its guards are gone and the
//!   connection closes; without, the lease runs out).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::sync::{Mutex, oneshot, watch};
use tokio::task::JoinHandle;

use crate::Acquired;
use crate::aio::{Dedicated, Pool};
use crate::error::{Error, Result};
use crate::family::{self as f, Mode, RwLockInfo, SemaphoreInfo};
use crate::family_sync::{Kind, LeaseKind, MultiKind, RwHolds, RwKind, ended_without, owner_of};
use crate::protocol::{self as p, Options, Wait};
use crate::target::Target;

fn no_answer() -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "the operation's task ended without an answer (its runtime shut down)",
    )))
}

/// Resolves when the future that started an operation was dropped.
struct Abandoned(oneshot::Receiver<()>);

impl Abandoned {
    async fn wait(&mut self) {
        let _ = (&mut self.0).await;
    }
}

/// Runs `f` in a task of its own and waits for its answer. Dropping the
/// returned future lets the task know (its [`Abandoned`] resolves); an
/// answer it can no longer deliver is dropped (a guard then gives its hold
/// back). The task's handle goes to `register`.
async fn in_task<R, Fut>(
    f: impl FnOnce(Abandoned) -> Fut,
    register: impl FnOnce(JoinHandle<()>),
) -> Result<R>
where
    R: Send + 'static,
    Fut: Future<Output = Result<R>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let (alive, abandoned) = oneshot::channel::<()>();
    let fut = f(Abandoned(abandoned));
    register(tokio::spawn(async move {
        let _ = tx.send(fut.await);
    }));
    let answer = rx.await;
    drop(alive);
    answer.unwrap_or_else(|_| Err(no_answer()))
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// -- the shared tenure ------------------------------------------------------

struct St<H> {
    holds: H,
    tied: Option<Dedicated>,
    watch: Option<AbortOnDrop>,
    generation: u64,
}

struct Tenure<K: Kind> {
    pool: Arc<Pool>,
    key: String,
    opts: Options,
    kind: K,
    /// Locked by each operation's task for the whole operation.
    state: Mutex<St<K::Holds>>,
    lost: AtomicBool,
    lost_reason: std::sync::Mutex<Option<String>>,
    lost_tx: watch::Sender<bool>,
    /// Operations running in tasks of their own: awaited before the next
    /// operation starts.
    pending: std::sync::Mutex<Vec<JoinHandle<()>>>,
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
                generation: 0,
            }),
            lost: AtomicBool::new(false),
            lost_reason: std::sync::Mutex::new(None),
            lost_tx: watch::channel(false).0,
            pending: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn timeout(&self) -> Option<Duration> {
        p::response_timeout(Wait::No, &self.opts)
    }

    fn add_pending(&self, task: JoinHandle<()>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|t| !t.is_finished());
        pending.push(task);
    }

    fn spawn_pending(&self, f: impl Future<Output = ()> + Send + 'static) {
        if tokio::runtime::Handle::try_current().is_ok() {
            self.add_pending(tokio::spawn(f));
        }
    }

    async fn settle(&self) {
        loop {
            let task = self.pending.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match task {
                Some(t) => {
                    let _ = t.await;
                }
                None => return,
            }
        }
    }

    /// One operation, in a task the next operation waits for (see the
    /// module's doc). Inside, lock `state` directly.
    async fn op<R, Fut>(self: &Arc<Self>, f: impl FnOnce(Arc<Self>, Abandoned) -> Fut) -> Result<R>
    where
        R: Send + 'static,
        Fut: Future<Output = Result<R>> + Send + 'static,
    {
        self.settle().await;
        let me = Arc::clone(self);
        in_task(|ab| f(me, ab), |task| self.add_pending(task)).await
    }

    /// A tied acquisition (`cmd` carries KEEPALIVE) on a connection of its
    /// own; None when not granted, or when abandoned (the connection then
    /// closes: the server drops the waiter, and a tied grant with it).
    async fn wait<T>(
        &self,
        cmd: &Cmd,
        wait: Wait,
        ab: &mut Abandoned,
        parse: impl FnOnce(&Value) -> Result<Option<T>>,
    ) -> Result<Option<(T, Dedicated)>> {
        let mut conn = Dedicated::new(&self.pool, self.key.as_bytes()).await?;
        let reply = tokio::select! {
            r = conn.call(cmd, p::response_timeout(wait, &self.opts)) => r,
            _ = ab.wait() => return Ok(None),
        };
        match reply.and_then(|v| parse(&v)) {
            Ok(Some(got)) => Ok(Some((got, conn))),
            Ok(None) => {
                conn.give_back();
                Ok(None)
            }
            Err(e) => {
                if conn.is_open() && !e.is_connection_failure() {
                    conn.give_back();
                }
                Err(e)
            }
        }
    }

    /// After a grant (`st.holds` set): keep the connection tied
    /// (keepalive) or untie the holds and give it back; start watching.
    async fn settle_grant(
        self: &Arc<Self>,
        st: &mut St<K::Holds>,
        mut conn: Dedicated,
    ) -> Result<()> {
        if self.opts.keepalive {
            st.tied = Some(conn);
        } else {
            for cmd in self.kind.renew_cmds(&st.holds, &self.opts, false, true) {
                let err = match conn
                    .call(&cmd, self.timeout())
                    .await
                    .and_then(|v| p::int(&v))
                {
                    Ok(0) => Error::LockLost(format!(
                        "{} was gone before the acquisition completed",
                        self.kind.what()
                    )),
                    Ok(_) => continue,
                    Err(e) => e,
                };
                conn.close(); // releases what is still tied
                st.holds = K::Holds::default();
                return Err(err);
            }
            conn.give_back();
        }
        self.lost.store(false, Ordering::SeqCst);
        self.lost_tx.send_replace(false);
        self.start_watch(st);
        Ok(())
    }

    /// A call on the tied connection, or a pooled one; a failure of the
    /// tied connection, or NOTOWNER, is a lost hold.
    async fn call(&self, st: &mut St<K::Holds>, cmd: &Cmd) -> Result<Value> {
        let r = match st.tied.as_mut() {
            Some(tied) => tied.call(cmd, self.timeout()).await.map_err(|e| {
                if e.is_connection_failure() {
                    Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
                } else {
                    e
                }
            }),
            None => self.call_pool(cmd).await,
        };
        if let Err(Error::LockLost(why)) = &r {
            let close = st.tied.as_ref().is_some_and(|t| !t.is_open());
            self.lose(st, why.clone(), close);
        }
        r
    }

    async fn call_pool(&self, cmd: &Cmd) -> Result<Value> {
        self.pool
            .call(self.key.as_bytes(), cmd, self.timeout())
            .await
    }

    fn start_watch(self: &Arc<Self>, st: &mut St<K::Holds>) {
        if st.watch.is_some() {
            return;
        }
        st.generation += 1;
        let ended = st.tied.as_ref().and_then(Dedicated::ended);
        let interval = (self.opts.lease / 3).max(Duration::from_millis(1));
        let events = crate::tokio::HoldEvents::start(&self.pool.target, self.key.as_bytes());
        st.watch = Some(AbortOnDrop(tokio::spawn(watch_hold(
            Arc::downgrade(self),
            st.generation,
            ended,
            interval,
            events,
        ))));
    }

    fn stop(&self, st: &mut St<K::Holds>, lost: Option<String>, close: bool) {
        st.holds = K::Holds::default();
        if let Some(mut tied) = st.tied.take() {
            if close || !tied.is_open() {
                tied.close();
            } else {
                tied.give_back();
            }
        }
        if let Some(why) = lost {
            *self.lost_reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            self.lost.store(true, Ordering::SeqCst);
            self.lost_tx.send_replace(true);
        }
        st.watch = None; // last: this may be the watch task itself
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

    async fn lost(&self) {
        let mut rx = self.lost_tx.subscribe();
        let _ = rx.wait_for(|lost| *lost).await;
    }

    async fn renew(self: &Arc<Self>) -> Result<()> {
        self.op(|t, _| async move {
            let mut st = t.state.lock().await;
            if !K::held(&st.holds) {
                return Err(Error::LockLost(format!("{} is not held", t.kind.what())));
            }
            let keepalive = st.tied.is_some();
            for cmd in t.kind.renew_cmds(&st.holds, &t.opts, keepalive, false) {
                if p::int(&t.call(&mut st, &cmd).await?)? == 0 {
                    return Err(t.lost_error(&mut st, "a renewal found it gone"));
                }
            }
            Ok(())
        })
        .await
    }

    /// The periodic check; false: stop watching.
    async fn check(&self, generation: u64, ended: &mut Option<watch::Receiver<bool>>) -> bool {
        let mut st = self.state.lock().await;
        if st.generation != generation || st.watch.is_none() {
            return false;
        }
        let keepalive = st.tied.is_some();
        for cmd in self
            .kind
            .renew_cmds(&st.holds, &self.opts, keepalive, false)
        {
            let r = match st.tied.as_mut() {
                Some(tied) => {
                    let r = tied.call(&cmd, self.timeout()).await;
                    *ended = tied.ended();
                    r
                }
                None => self.call_pool(&cmd).await,
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
                Err(_) => return true,
            }
        }
        true
    }

    async fn connection_ended(&self, generation: u64) {
        let mut st = self.state.lock().await;
        if st.generation == generation && st.watch.is_some() {
            self.lose(&mut st, "its KEEPALIVE connection ended".into(), true);
        }
    }
}

async fn ended_of(ended: &mut Option<watch::Receiver<bool>>) {
    match ended {
        Some(rx) => {
            let _ = rx.wait_for(|e| *e).await;
        }
        None => std::future::pending().await,
    }
}

/// Watches one hold: its connection's end at once, a check every interval
/// and at each of the key's lifecycle events.
async fn watch_hold<K: Kind>(
    t: std::sync::Weak<Tenure<K>>,
    generation: u64,
    mut ended: Option<watch::Receiver<bool>>,
    interval: Duration,
    events: crate::tokio::HoldEvents,
) {
    let (_events, poke) = events.follow().await;
    loop {
        tokio::select! {
            _ = poke.notified() => {
                let Some(t) = t.upgrade() else { return };
                if !t.check(generation, &mut ended).await {
                    return;
                }
            }
            _ = ended_of(&mut ended) => {
                if let Some(t) = t.upgrade() {
                    t.connection_ended(generation).await;
                }
                return;
            }
            _ = tokio::time::sleep(interval) => {
                let Some(t) = t.upgrade() else { return };
                if !t.check(generation, &mut ended).await {
                    return;
                }
            }
        }
    }
}

// -- semaphores -------------------------------------------------------------

/// See [`crate::sync::Semaphore`]: the same rules, async.
pub struct Semaphore {
    pool: Arc<Pool>,
    name: String,
    opts: Options,
}

/// Anonymous permits a wait was granted, on their way to the caller:
/// released if dropped before they were taken.
struct Permits {
    pool: Arc<Pool>,
    name: String,
    n: u64,
    taken: bool,
}

impl Drop for Permits {
    fn drop(&mut self) {
        if self.taken || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let (pool, name, n) = (Arc::clone(&self.pool), self.name.clone(), self.n);
        tokio::spawn(async move {
            let cmd = f::sem_release_cmd(&name, n);
            let _ = pool
                .call(name.as_bytes(), &cmd, Some(p::CALL_TIMEOUT))
                .await;
        });
    }
}

impl Semaphore {
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

    async fn call(&self, cmd: &Cmd) -> Result<Value> {
        self.pool
            .call(
                self.name.as_bytes(),
                cmd,
                p::response_timeout(Wait::No, &self.opts),
            )
            .await
    }

    pub async fn create(&self, permits: u64) -> Result<bool> {
        Ok(p::int(&self.call(&f::sem_create_cmd(&self.name, permits)).await?)? == 1)
    }

    pub async fn add(&self, delta: i64) -> Result<i64> {
        let mut c = redis::cmd("SEMAPHORE.ADD");
        c.arg(&self.name).arg(delta);
        p::int(&self.call(&c).await?)
    }

    pub async fn available(&self) -> Result<i64> {
        Ok(self.info().await?.map_or(0, |i| i.available))
    }

    pub async fn drain(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "SEMAPHORE.DRAIN")).await?)
    }

    pub async fn info(&self) -> Result<Option<SemaphoreInfo>> {
        f::parse_sem_info(&self.call(&f::simple(&self.name, "SEMAPHORE.INFO")).await?)
    }

    #[must_use = "false: the permits were not taken"]
    pub async fn try_acquire(&self, n: u64) -> Result<bool> {
        let cmd = f::sem_acquire_cmd(&self.name, f::count(n)?, Wait::No, &self.opts);
        Ok(!matches!(self.call(&cmd).await?, Value::Nil))
    }

    /// Waits for `n` anonymous permits (see the module's doc on
    /// cancellation).
    pub async fn acquire(&self, n: u64) -> Result<()> {
        if self.acquire_waiting(n, Wait::Forever).await? {
            Ok(())
        } else {
            Err(ended_without("SEMAPHORE.ACQUIRE"))
        }
    }

    #[must_use = "false: the permits were not taken"]
    pub async fn acquire_timeout(&self, n: u64, timeout: Duration) -> Result<bool> {
        if timeout.is_zero() {
            return self.try_acquire(n).await;
        }
        self.acquire_waiting(n, Wait::For(timeout)).await
    }

    async fn acquire_waiting(&self, n: u64, wait: Wait) -> Result<bool> {
        let n = f::count(n)?;
        let cmd = f::sem_acquire_cmd(&self.name, n, wait, &self.opts);
        let timeout = p::response_timeout(wait, &self.opts);
        let (pool, name) = (Arc::clone(&self.pool), self.name.clone());
        let got = in_task(
            move |ab| anonymous_wait(pool, name, n, cmd, timeout, ab),
            drop,
        )
        .await?;
        Ok(got.map(|mut permits| permits.taken = true).is_some())
    }

    /// Releases `n` anonymous permits; returns those available. The call
    /// runs in a task of its own: a release whose caller stops awaiting it
    /// (a cancelled task, a timeout) still reaches the server, since
    /// anonymous permits have no owner that could find them again.
    pub async fn release(&self, n: u64) -> Result<i64> {
        let cmd = f::sem_release_cmd(&self.name, f::count(n)?);
        let (pool, name) = (Arc::clone(&self.pool), self.name.clone());
        let timeout = p::response_timeout(Wait::No, &self.opts);
        tokio::spawn(async move { p::int(&pool.call(name.as_bytes(), &cmd, timeout).await?) })
            .await
            .unwrap_or_else(|_| Err(no_answer()))
    }

    async fn take_lease(&self, n: u64, wait: Wait) -> Result<Acquired<Lease>> {
        let n = f::count(n)?;
        let t = Tenure::new(
            Arc::clone(&self.pool),
            self.name.clone(),
            self.opts.clone(),
            LeaseKind {
                name: self.name.clone(),
            },
        );
        t.op(move |t, mut ab| async move {
            let mut st = t.state.lock().await;
            let cmd = f::sem_lease_cmd(&t.kind.name, n, wait, true, &t.opts);
            let Some((ids, conn)) = t.wait(&cmd, wait, &mut ab, f::parse_ids).await? else {
                return Ok(Acquired::NotAcquired);
            };
            st.holds = ids.clone();
            t.settle_grant(&mut st, conn).await?;
            drop(st);
            Ok(Acquired::Held(Lease {
                t: Arc::clone(&t),
                ids,
                released: false,
            }))
        })
        .await
    }

    pub async fn try_lease(&self, n: u64) -> Result<Acquired<Lease>> {
        self.take_lease(n, Wait::No).await
    }

    pub async fn lease(&self, n: u64) -> Result<Lease> {
        self.take_lease(n, Wait::Forever)
            .await?
            .into_guard()
            .ok_or_else(|| ended_without("SEMAPHORE.LEASE"))
    }

    pub async fn lease_timeout(&self, n: u64, timeout: Duration) -> Result<Acquired<Lease>> {
        self.take_lease(n, Wait::For(timeout)).await
    }
}

/// An anonymous SEMAPHORE.ACQUIRE ... BLOCK in a task of its own. Abandoned
/// while it waits: CLIENT UNBLOCK (again, until its answer comes: the
/// UNBLOCK may overtake the wait); whatever it was granted meanwhile is
/// released when the undelivered answer is dropped.
async fn anonymous_wait(
    pool: Arc<Pool>,
    name: String,
    n: u64,
    cmd: Cmd,
    timeout: Option<Duration>,
    mut ab: Abandoned,
) -> Result<Option<Permits>> {
    let mut conn = Dedicated::new(&pool, name.as_bytes()).await?;
    let id = p::int(
        &conn
            .call(
                &redis::cmd("CLIENT").arg("ID").clone(),
                Some(p::CALL_TIMEOUT),
            )
            .await?,
    )?;
    let reply = {
        let call = conn.call(&cmd, timeout);
        tokio::pin!(call);
        tokio::select! {
            r = &mut call => r,
            _ = ab.wait() => loop {
                let unblock = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).clone();
                let _ = pool.call(name.as_bytes(), &unblock, Some(p::CALL_TIMEOUT)).await;
                tokio::select! {
                    r = &mut call => break r,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            },
        }
    };
    match reply {
        Ok(v) => {
            conn.give_back();
            Ok((!matches!(v, Value::Nil)).then(|| Permits {
                pool: Arc::clone(&pool),
                name: name.clone(),
                n,
                taken: false,
            }))
        }
        Err(e) => {
            if conn.is_open() && !e.is_connection_failure() {
                conn.give_back();
            }
            Err(e)
        }
    }
}

/// Leased permits of a [`Semaphore`]; give them back with
/// [`Lease::release`].
#[must_use = "a lease should be given back with .release().await"]
pub struct Lease {
    t: Arc<Tenure<LeaseKind>>,
    ids: Vec<String>,
    released: bool,
}

async fn give_back_lease(t: Arc<Tenure<LeaseKind>>) -> Result<i64> {
    let mut st = t.state.lock().await;
    if st.holds.is_empty() {
        return Err(Error::LockLost(format!("{} is not held", t.kind.what())));
    }
    let cmd = f::sem_return_cmd(&t.kind.name, &st.holds);
    let returned = p::int(&t.call(&mut st, &cmd).await?)?;
    t.stop(&mut st, None, false);
    Ok(returned)
}

impl Lease {
    /// The permit ids (32 hex chars each).
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Returns the permits; returns how many were returned. Cancellation-safe.
    pub async fn release(mut self) -> Result<i64> {
        self.released = true;
        self.t.op(|t, _| give_back_lease(t)).await
    }

    pub async fn renew(&self) -> Result<()> {
        self.t.renew().await
    }

    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }

    /// Resolves when the lease is found lost.
    pub async fn lost(&self) {
        self.t.lost().await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            let t = Arc::clone(&self.t);
            self.t.spawn_pending(async move {
                let _ = give_back_lease(t).await;
            });
        }
    }
}

// -- latches ----------------------------------------------------------------

/// See [`crate::sync::Latch`]. A cancelled wait closes its connection.
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

    async fn call(&self, cmd: &Cmd) -> Result<Value> {
        self.pool
            .call(self.name.as_bytes(), cmd, Some(p::CALL_TIMEOUT))
            .await
    }

    pub async fn create(&self, count: u64) -> Result<bool> {
        Ok(p::int(&self.call(&f::latch_create_cmd(&self.name, count)).await?)? == 1)
    }

    pub async fn count_down(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "LATCH.COUNTDOWN")).await?)
    }

    pub async fn count(&self) -> Result<i64> {
        p::int(&self.call(&f::simple(&self.name, "LATCH.COUNT")).await?)
    }

    async fn await_open(&self, wait: Wait) -> Result<bool> {
        let cmd = f::latch_await_cmd(&self.name, wait);
        if wait.block_ms().is_none() {
            return Ok(!matches!(self.call(&cmd).await?, Value::Nil));
        }
        let mut conn = Dedicated::new(&self.pool, self.name.as_bytes()).await?;
        let r = conn
            .call(&cmd, p::response_timeout(wait, &Options::default()))
            .await;
        if conn.is_open() && !r.as_ref().is_err_and(Error::is_connection_failure) {
            conn.give_back();
        }
        Ok(!matches!(r?, Value::Nil))
    }

    pub async fn wait(&self) -> Result<()> {
        if self.await_open(Wait::Forever).await? {
            Ok(())
        } else {
            Err(ended_without("LATCH.AWAIT"))
        }
    }

    #[must_use = "false: the latch is still closed"]
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.await_open(Wait::For(timeout)).await
    }
}

// -- read-write locks -------------------------------------------------------

/// See [`crate::sync::ReadWriteLock`]: the same rules, async. One object
/// is one owner: give each task its own.
pub struct ReadWriteLock {
    t: Arc<Tenure<RwKind>>,
}

pub type AcquiredRead = Acquired<ReadGuard>;
pub type AcquiredWrite = Acquired<WriteGuard>;

#[must_use = "a guard should be released with .release().await"]
pub struct ReadGuard {
    t: Arc<Tenure<RwKind>>,
    released: bool,
}

#[must_use = "a guard should be released with .release().await"]
pub struct WriteGuard {
    t: Arc<Tenure<RwKind>>,
    token: Option<u64>,
    released: bool,
}

/// One acquisition, in the operation's task: Some(token) when granted.
async fn rw_acquire(
    t: &Arc<Tenure<RwKind>>,
    mode: Mode,
    wait: Wait,
    ab: &mut Abandoned,
) -> Result<Option<Option<u64>>> {
    let token = t.opts.token && mode == Mode::Write;
    let k = &t.kind;
    let mut st = t.state.lock().await;
    if RwKind::held(&st.holds) {
        let keepalive = st.tied.is_some();
        let cmd = f::rw_acquire_cmd(&k.name, &k.owner, mode, &t.opts, keepalive, Wait::No);
        let got = p::parse_acquire(&t.call(&mut st, &cmd).await?, token)?;
        let expected = st.holds.of(mode) + 1;
        return match got {
            Some((count, tok)) if count == expected => {
                st.holds.set(mode, count);
                Ok(Some(tok))
            }
            other => {
                if other.is_some() {
                    let _ = t
                        .call_pool(&f::rw_release_cmd(&k.name, &k.owner, mode))
                        .await;
                }
                Err(t.lost_error(&mut st, "a re-entry found it gone"))
            }
        };
    }
    let cmd = f::rw_acquire_cmd(&k.name, &k.owner, mode, &t.opts, true, wait);
    let Some(((count, tok), conn)) = t
        .wait(&cmd, wait, ab, |v| p::parse_acquire(v, token))
        .await?
    else {
        return Ok(None);
    };
    st.holds.set(mode, count);
    t.settle_grant(&mut st, conn).await?;
    Ok(Some(tok))
}

async fn rw_release(t: &Tenure<RwKind>, mode: Mode) -> Result<u64> {
    let mut st = t.state.lock().await;
    let cmd = f::rw_release_cmd(&t.kind.name, &t.kind.owner, mode);
    let left = p::int(&t.call(&mut st, &cmd).await?)? as u64;
    st.holds.set(mode, left);
    if !RwKind::held(&st.holds) {
        t.stop(&mut st, None, false);
    }
    Ok(left)
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

impl ReadWriteLock {
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

    /// The holds of each mode, as last seen (None while an operation runs).
    fn holds(&self) -> Option<RwHolds> {
        self.t.state.try_lock().ok().map(|st| st.holds)
    }

    pub fn read_holds(&self) -> u64 {
        self.holds().map_or(0, |h| h.reads)
    }

    pub fn write_holds(&self) -> u64 {
        self.holds().map_or(0, |h| h.writes)
    }

    async fn read_with(&self, wait: Wait) -> Result<AcquiredRead> {
        self.t
            .op(move |t, mut ab| async move {
                Ok(match rw_acquire(&t, Mode::Read, wait, &mut ab).await? {
                    Some(_) => Acquired::Held(read_guard(&t)),
                    None => Acquired::NotAcquired,
                })
            })
            .await
    }

    async fn write_with(&self, wait: Wait) -> Result<AcquiredWrite> {
        self.t
            .op(move |t, mut ab| async move {
                Ok(match rw_acquire(&t, Mode::Write, wait, &mut ab).await? {
                    Some(token) => Acquired::Held(write_guard(&t, token)),
                    None => Acquired::NotAcquired,
                })
            })
            .await
    }

    pub async fn try_read(&self) -> Result<AcquiredRead> {
        self.read_with(Wait::No).await
    }

    pub async fn read(&self) -> Result<ReadGuard> {
        self.read_with(Wait::Forever)
            .await?
            .into_guard()
            .ok_or_else(|| ended_without("RWLOCK.ACQUIRE READ"))
    }

    pub async fn read_timeout(&self, timeout: Duration) -> Result<AcquiredRead> {
        self.read_with(Wait::For(timeout)).await
    }

    pub async fn try_write(&self) -> Result<AcquiredWrite> {
        self.write_with(Wait::No).await
    }

    pub async fn write(&self) -> Result<WriteGuard> {
        self.write_with(Wait::Forever)
            .await?
            .into_guard()
            .ok_or_else(|| ended_without("RWLOCK.ACQUIRE WRITE"))
    }

    pub async fn write_timeout(&self, timeout: Duration) -> Result<AcquiredWrite> {
        self.write_with(Wait::For(timeout)).await
    }

    pub async fn renew(&self) -> Result<()> {
        self.t.renew().await
    }

    pub async fn info(&self) -> Result<Option<RwLockInfo>> {
        self.t.settle().await;
        f::parse_rw_info(
            &self
                .t
                .call_pool(&f::simple(&self.t.key, "RWLOCK.INFO"))
                .await?,
        )
    }

    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }

    /// Resolves when the held lock is found lost.
    pub async fn lost(&self) {
        self.t.lost().await
    }
}

impl ReadGuard {
    /// Gives this read hold back; returns the read holds left.
    /// Cancellation-safe.
    pub async fn release(mut self) -> Result<u64> {
        self.released = true;
        self.t
            .op(|t, _| async move { rw_release(&t, Mode::Read).await })
            .await
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        if !self.released {
            let t = Arc::clone(&self.t);
            self.t.spawn_pending(async move {
                let _ = rw_release(&t, Mode::Read).await;
            });
        }
    }
}

impl WriteGuard {
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Gives this write hold back; returns the write holds left.
    /// Cancellation-safe.
    pub async fn release(mut self) -> Result<u64> {
        self.released = true;
        self.t
            .op(|t, _| async move { rw_release(&t, Mode::Write).await })
            .await
    }

    /// Takes a read hold, then gives this write hold back (no other writer
    /// gets in between). Cancellation-safe: both happen, or the read hold
    /// taken is given back.
    pub async fn downgrade(mut self) -> Result<ReadGuard> {
        self.released = true;
        self.t
            .op(|t, mut ab| async move {
                // If the read hold cannot be taken, the write hold is still
                // given back (as dropping this guard would).
                let read = rw_acquire(&t, Mode::Read, Wait::No, &mut ab).await;
                let released = rw_release(&t, Mode::Write).await;
                let read = read?.map(|_| read_guard(&t));
                released?;
                read.ok_or_else(|| ended_without("RWLOCK.ACQUIRE READ (downgrade)"))
            })
            .await
    }
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        if !self.released {
            let t = Arc::clone(&self.t);
            self.t.spawn_pending(async move {
                let _ = rw_release(&t, Mode::Write).await;
            });
        }
    }
}

// -- multi-key locks --------------------------------------------------------

/// See [`crate::sync::MultiLock`]: the same rules, async.
pub struct MultiLock {
    t: Arc<Tenure<MultiKind>>,
}

#[must_use = "a guard should be released with .release().await"]
pub struct MultiGuard {
    t: Arc<Tenure<MultiKind>>,
    released: bool,
}

async fn mtake(
    t: &Arc<Tenure<MultiKind>>,
    wait: Wait,
    ab: &mut Abandoned,
) -> Result<Acquired<MultiGuard>> {
    let k = &t.kind;
    if k.names.is_empty() {
        return Err(Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Client,
            "hashlock-client: a MultiLock needs at least one key",
        ))));
    }
    let mut st = t.state.lock().await;
    if st.holds > 0 {
        let keepalive = st.tied.is_some();
        let cmd = f::macquire_cmd(&k.names, &k.owner, &t.opts, keepalive, Wait::No);
        let counts = f::parse_counts(&t.call(&mut st, &cmd).await?)?;
        let expected = st.holds + 1;
        if counts
            .as_ref()
            .is_some_and(|c| c.iter().all(|&n| n == expected))
        {
            st.holds = expected;
        } else {
            if counts.is_some() {
                let _ = t.call_pool(&f::mrelease_cmd(&k.names, &k.owner)).await;
            }
            return Err(t.lost_error(&mut st, "a re-entry found it gone"));
        }
    } else {
        let cmd = f::macquire_cmd(&k.names, &k.owner, &t.opts, true, wait);
        let Some((counts, conn)) = t.wait(&cmd, wait, ab, f::parse_counts).await? else {
            return Ok(Acquired::NotAcquired);
        };
        st.holds = counts.iter().copied().min().unwrap_or(0);
        t.settle_grant(&mut st, conn).await?;
    }
    Ok(Acquired::Held(MultiGuard {
        t: Arc::clone(t),
        released: false,
    }))
}

async fn mrelease(t: &Tenure<MultiKind>) -> Result<u64> {
    let mut st = t.state.lock().await;
    let cmd = f::mrelease_cmd(&t.kind.names, &t.kind.owner);
    let left = f::parse_counts(&t.call(&mut st, &cmd).await?)?
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

    /// Holds of every key, as last seen (0 while an operation runs).
    pub fn holds(&self) -> u64 {
        self.t.state.try_lock().map_or(0, |st| st.holds)
    }

    async fn take(&self, wait: Wait) -> Result<Acquired<MultiGuard>> {
        self.t
            .op(move |t, mut ab| async move { mtake(&t, wait, &mut ab).await })
            .await
    }

    pub async fn try_acquire(&self) -> Result<Acquired<MultiGuard>> {
        self.take(Wait::No).await
    }

    pub async fn acquire(&self) -> Result<MultiGuard> {
        self.take(Wait::Forever)
            .await?
            .into_guard()
            .ok_or_else(|| ended_without("LOCK.MACQUIRE"))
    }

    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Acquired<MultiGuard>> {
        self.take(Wait::For(timeout)).await
    }

    pub async fn renew(&self) -> Result<()> {
        self.t.renew().await
    }

    pub fn is_lost(&self) -> bool {
        self.t.is_lost()
    }

    pub fn lost_reason(&self) -> Option<String> {
        self.t.lost_reason()
    }

    pub async fn lost(&self) {
        self.t.lost().await
    }
}

impl MultiGuard {
    /// Gives one hold of every key back; returns the holds left.
    /// Cancellation-safe.
    pub async fn release(mut self) -> Result<u64> {
        self.released = true;
        self.t.op(|t, _| async move { mrelease(&t).await }).await
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        if !self.released {
            let t = Arc::clone(&self.t);
            self.t.spawn_pending(async move {
                let _ = mrelease(&t).await;
            });
        }
    }
}
