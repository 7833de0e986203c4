//! The async [`Lock`] for tokio.
//!
//! Cancellation:
//! - Cancelling a waiting acquire (dropping its future, e.g. in
//!   `tokio::time::timeout` or `select!`) drops its connection, so the
//!   server removes the waiter; the wait is tied to that connection
//!   (KEEPALIVE), so a grant already on its way is released with it.
//!   Without keepalive the grant is untied once read, in a task of its own:
//!   cancelled in that instant, the grant is given back (LOCK.RELEASE)
//!   before the `Lock`'s next operation.
//! - `guard.release().await` is cancellation-safe: the release runs in a
//!   task of its own, which finishes even if the future awaiting it is
//!   dropped, and the `Lock`'s next operation waits for it.
//! - A guard dropped without `release()` spawns that release on the current
//!   runtime (errors ignored). Dropped outside any runtime it cannot: the
//!   hold then lasts until the `Lock` and its guards are gone (with
//!   KEEPALIVE the lock's connection then closes and the server releases
//!   the lock; without, the lease runs out).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::Value;
use tokio::sync::{Mutex, MutexGuard, oneshot, watch};
use tokio::task::JoinHandle;

use crate::aio::{Dedicated, Pool};
use crate::error::{Error, Result};
use crate::protocol::{self as p, LockInfo, Options, Wait};
use crate::target::Target;

pub use crate::election::tokio::{Election, Observer};
pub use crate::family_tokio::{
    AcquiredRead, AcquiredWrite, Latch, Lease, MultiGuard, MultiLock, ReadGuard, ReadWriteLock,
    Semaphore, WriteGuard,
};

/// What [`Lock::try_acquire`] and [`Lock::acquire_timeout`] give.
pub type Acquired = crate::Acquired<LockGuard>;

/// See [`crate::sync::Lock`]: the same rules, async. One `Lock` is one
/// owner: give each task its own.
pub struct Lock {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Arc<Pool>,
    name: String,
    owner: String,
    opts: Options,
    /// Held for a whole operation (a wait included), so the operations of
    /// one Lock never interleave.
    state: Mutex<State>,
    lost: AtomicBool,
    lost_reason: std::sync::Mutex<Option<String>>,
    /// true while the last hold is lost (for [`Lock::lost`]).
    lost_tx: watch::Sender<bool>,
    /// Releases running in tasks of their own (a `release()` whose future may
    /// have been dropped, a dropped guard): awaited before the next
    /// operation, so they cannot drop a hold taken after them.
    pending: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    holds: u64,
    tied: Option<Dedicated>,
    watch: Option<AbortOnDrop>,
    /// Which hold the watch task is watching.
    generation: u64,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A fresh grant on its way from the untie task to its acquisition: given
/// back (LOCK.RELEASE) if dropped armed, i.e. never delivered.
struct GiveBack {
    inner: Arc<Inner>,
    armed: bool,
}

impl Drop for GiveBack {
    fn drop(&mut self) {
        if !self.armed || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let inner = Arc::clone(&self.inner);
        self.inner.spawn_pending(async move {
            let cmd = p::release_cmd(&inner.name, &inner.owner);
            let _ = inner
                .pool
                .call(inner.key(), &cmd, inner.call_timeout())
                .await;
        });
    }
}

/// One hold of a [`Lock`]; give it back with [`LockGuard::release`].
#[must_use = "a guard should be released with .release().await"]
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
                lost_reason: std::sync::Mutex::new(None),
                lost_tx: watch::channel(false).0,
                pending: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    pub async fn try_acquire(&self) -> Result<Acquired> {
        self.inner.acquire(Wait::No).await
    }

    pub async fn acquire(&self) -> Result<LockGuard> {
        match self.inner.acquire(Wait::Forever).await? {
            Acquired::Held(g) => Ok(g),
            Acquired::NotAcquired => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the server ended the wait without the lock (LOCK.ACQUIRE ... BLOCK 0 answered nil, e.g. CLIENT UNBLOCK)",
            )))),
        }
    }

    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Acquired> {
        self.inner.acquire(Wait::For(timeout)).await
    }

    pub async fn info(&self) -> Result<Option<LockInfo>> {
        self.inner.settle().await;
        let v = self
            .inner
            .pool
            .call(
                self.inner.key(),
                &p::info_cmd(&self.inner.name),
                self.inner.call_timeout(),
            )
            .await?;
        p::parse_info(&v)
    }

    pub async fn renew(&self) -> Result<()> {
        self.inner.renew().await
    }

    /// True once the lock this object held was found lost, until the next
    /// successful acquisition (see [`crate::sync::Lock::is_lost`]).
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

    /// Resolves when the held lock is found lost (at once if it already
    /// is): for `select!` against the work it protects.
    pub async fn lost(&self) {
        let mut rx = self.inner.lost_tx.subscribe();
        let _ = rx.wait_for(|lost| *lost).await;
    }
}

impl LockGuard {
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Gives this hold back; returns the holds left (0 = released).
    /// Cancellation-safe: the release runs in a task of its own and
    /// completes even if this future is dropped.
    pub async fn release(mut self) -> Result<u64> {
        self.released = true;
        let (tx, rx) = oneshot::channel();
        let inner = Arc::clone(&self.inner);
        self.inner.spawn_pending(async move {
            let _ = tx.send(inner.release_one().await);
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the release task ended without an answer (its runtime shut down)",
            ))))
        })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let inner = Arc::clone(&self.inner);
        self.inner.spawn_pending(async move {
            let _ = inner.release_one().await;
        });
    }
}

impl Inner {
    fn key(&self) -> &[u8] {
        self.name.as_bytes()
    }

    fn call_timeout(&self) -> Option<Duration> {
        p::response_timeout(Wait::No, &self.opts)
    }

    /// Runs `f` in a task the next operation waits for.
    fn spawn_pending(&self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        let task = tokio::spawn(f);
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|t| !t.is_finished());
        pending.push(task);
    }

    /// Waits for the releases running in the background.
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

    async fn lock_state(&self) -> MutexGuard<'_, State> {
        self.settle().await;
        self.state.lock().await
    }

    fn guard(self: &Arc<Self>, token: Option<u64>) -> LockGuard {
        LockGuard {
            inner: Arc::clone(self),
            token,
            released: false,
        }
    }

    async fn acquire(self: &Arc<Self>, wait: Wait) -> Result<Acquired> {
        let mut st = self.lock_state().await;
        if st.holds > 0 {
            return self.reenter(&mut st).await.map(Acquired::Held);
        }
        let got = if self.opts.keepalive || wait.block_ms().is_some() {
            self.acquire_dedicated(&mut st, wait).await?
        } else {
            let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, wait);
            let v = self
                .pool
                .call(self.key(), &cmd, self.call_timeout())
                .await?;
            p::parse_acquire(&v, self.opts.token)?
        };
        let Some((count, token)) = got else {
            return Ok(Acquired::NotAcquired);
        };
        st.holds = count;
        self.lost.store(false, Ordering::SeqCst);
        self.lost_tx.send_replace(false);
        self.start_watch(&mut st);
        Ok(Acquired::Held(self.guard(token)))
    }

    /// See `sync::Inner::acquire_dedicated`: always tied while it waits, so
    /// a cancelled wait (its connection dropped) never keeps a grant.
    async fn acquire_dedicated(
        self: &Arc<Self>,
        st: &mut State,
        wait: Wait,
    ) -> Result<Option<(u64, Option<u64>)>> {
        let mut conn = Dedicated::new(&self.pool, self.key()).await?;
        let tied_opts = Options {
            keepalive: true,
            ..self.opts.clone()
        };
        let cmd = p::acquire_cmd(&self.name, &self.owner, &tied_opts, wait);
        let got = match conn.call(&cmd, p::response_timeout(wait, &self.opts)).await {
            Ok(v) => p::parse_acquire(&v, self.opts.token),
            Err(e) => Err(e),
        };
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                if conn.is_open() && !e.is_connection_failure() {
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
        // The untie runs in a task of its own: if this future is dropped
        // while it is under way, the server may untie the grant anyway
        // (closing the connection would then not release it), so the
        // task's answer, undelivered, gives it back (before this Lock's
        // next operation, which waits for the task).
        let (tx, rx) = oneshot::channel();
        let untie = p::untie_cmd(&self.name, &self.owner, &self.opts);
        let timeout = self.call_timeout();
        let inner = Arc::clone(self);
        self.spawn_pending(async move {
            let untied = match conn.call(&untie, timeout).await {
                Ok(v) => p::int(&v),
                Err(e) => Err(e),
            };
            if conn.is_open() {
                conn.give_back();
            }
            let _ = tx.send(untied.map(|n| {
                let armed = n != 0;
                (n, GiveBack { inner, armed })
            }));
        });
        match rx.await {
            Ok(Ok((0, _))) => Err(Error::LockLost(format!(
                "lock {:?} was gone before the acquisition completed",
                self.name
            ))),
            Ok(Ok((_, mut taken))) => {
                taken.armed = false;
                Ok(got)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the acquisition's task ended without an answer (its runtime shut down)",
            )))),
        }
    }

    async fn reenter(self: &Arc<Self>, st: &mut State) -> Result<LockGuard> {
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, Wait::No);
        let v = match self.on_tied_or_pool(st, &cmd).await {
            Ok(v) => v,
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    let close = e.is_connection_failure();
                    self.stop(st, Some(e.to_string()), close);
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
                if other.is_some() {
                    let _ = self
                        .pool
                        .call(
                            self.key(),
                            &p::release_cmd(&self.name, &self.owner),
                            self.call_timeout(),
                        )
                        .await;
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

    /// One release, on the state directly (it runs as a pending task itself).
    async fn release_one(&self) -> Result<u64> {
        let mut st = self.state.lock().await;
        let cmd = p::release_cmd(&self.name, &self.owner);
        match self
            .on_tied_or_pool(&mut st, &cmd)
            .await
            .and_then(|v| p::int(&v))
        {
            Ok(left) => {
                st.holds = left as u64;
                if left == 0 {
                    self.stop(&mut st, None, false);
                }
                Ok(left as u64)
            }
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    let close = st.tied.as_ref().is_some_and(|t| !t.is_open());
                    self.stop(&mut st, Some(e.to_string()), close);
                }
                Err(e)
            }
        }
    }

    async fn renew(self: &Arc<Self>) -> Result<()> {
        let mut st = self.lock_state().await;
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, self.opts.keepalive);
        let renewed = if self.opts.keepalive && st.tied.is_none() {
            let mut conn = Dedicated::new(&self.pool, self.key()).await?;
            let r = match conn.call(&cmd, self.call_timeout()).await {
                Ok(v) => p::int(&v),
                Err(e) => Err(e),
            };
            match r {
                Ok(n) if n != 0 => {
                    self.stop(&mut st, None, false);
                    st.tied = Some(conn);
                    st.holds = st.holds.max(1);
                    self.lost.store(false, Ordering::SeqCst);
                    self.lost_tx.send_replace(false);
                    self.start_watch(&mut st);
                    Ok(n)
                }
                other => {
                    if conn.is_open() {
                        conn.give_back();
                    }
                    other
                }
            }
        } else {
            self.on_tied_or_pool(&mut st, &cmd)
                .await
                .and_then(|v| p::int(&v))
        };
        let renewed = match renewed {
            Ok(n) => n,
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    let close = e.is_connection_failure();
                    self.stop(&mut st, Some(e.to_string()), close);
                }
                return Err(e);
            }
        };
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

    /// A call on the tied connection (keepalive) or a pooled one; a failure
    /// of the tied connection itself is a lost lock.
    async fn on_tied_or_pool(&self, st: &mut State, cmd: &redis::Cmd) -> Result<Value> {
        match st.tied.as_mut() {
            Some(tied) if self.opts.keepalive => {
                tied.call(cmd, self.call_timeout()).await.map_err(|e| {
                    if e.is_connection_failure() {
                        Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
                    } else {
                        e
                    }
                })
            }
            _ => self.pool.call(self.key(), cmd, self.call_timeout()).await,
        }
    }

    // -- loss detection ---------------------------------------------------

    fn start_watch(self: &Arc<Self>, st: &mut State) {
        if st.watch.is_some() {
            return;
        }
        st.generation += 1;
        let ended = st.tied.as_ref().and_then(Dedicated::ended);
        let interval = (self.opts.lease / 3).max(Duration::from_millis(1));
        // The key's lifecycle events (all but an acquisition) check at once:
        // subscribed before the acquisition returns when that needs no
        // network wait, else by the watch task.
        let events = HoldEvents::start(&self.pool.target, self.key());
        st.watch = Some(AbortOnDrop(tokio::spawn(watch_hold(
            Arc::downgrade(self),
            st.generation,
            ended,
            interval,
            events,
        ))));
    }

    /// Back to not holding: stop watching; the tied connection goes back to
    /// the pool, or is closed (`close`). `lost`: why it was lost, if it was.
    fn stop(&self, st: &mut State, lost: Option<String>, close: bool) {
        st.holds = 0;
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
        // Last: this may be the watch task itself, which then ends at its
        // next await.
        st.watch = None;
    }

    fn lose(&self, st: &mut State, why: &str, close: bool) {
        self.stop(
            st,
            Some(format!(
                "lock {:?} held by {:?} was lost: {why}",
                self.name, self.owner
            )),
            close,
        );
    }

    /// The periodic check; false: stop watching.
    async fn check(&self, generation: u64, ended: &mut Option<watch::Receiver<bool>>) -> bool {
        let mut st = self.state.lock().await;
        if st.generation != generation || st.watch.is_none() {
            return false;
        }
        let keepalive = self.opts.keepalive && st.tied.is_some();
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, keepalive);
        let result = if keepalive {
            let tied = st.tied.as_mut().expect("checked");
            let r = tied.call(&cmd, self.call_timeout()).await;
            // It may have followed a MOVED: watch the new connection's end.
            *ended = tied.ended();
            r
        } else {
            self.pool.call(self.key(), &cmd, self.call_timeout()).await
        };
        match result.and_then(|v| p::int(&v)) {
            Ok(0) => {
                self.lose(&mut st, "a check (LOCK.RENEW) found it gone", false);
                false
            }
            Ok(_) => true,
            Err(e) if keepalive && e.is_connection_failure() => {
                self.lose(
                    &mut st,
                    &format!("its KEEPALIVE connection failed ({e})"),
                    true,
                );
                false
            }
            Err(_) => true, // transient: tried again at the next turn
        }
    }

    async fn connection_ended(&self, generation: u64) {
        let mut st = self.state.lock().await;
        if st.generation == generation && st.watch.is_some() {
            self.lose(&mut st, "its KEEPALIVE connection ended", true);
        }
    }
}

/// Resolves when the connection ends (never without one).
async fn ended_of(ended: &mut Option<watch::Receiver<bool>>) {
    match ended {
        Some(rx) => {
            if rx.wait_for(|e| *e).await.is_err() {
                // The driver is gone (its runtime shut down): as good as ended.
            }
        }
        None => std::future::pending().await,
    }
}

/// A hold's lifecycle events on the library's subscriber connection (see
/// [`crate::events`]), each (but an acquisition) poking the hold's watch.
pub(crate) struct HoldEvents {
    target: Target,
    key: Vec<u8>,
    poke: Arc<tokio::sync::Notify>,
    events: std::result::Result<Option<crate::events::Subscription>, ()>,
}

impl HoldEvents {
    /// Subscribes now when that needs no network wait (else
    /// [`HoldEvents::follow`] does, off the runtime).
    pub(crate) fn start(target: &Target, key: &[u8]) -> HoldEvents {
        let poke = Arc::new(tokio::sync::Notify::new());
        let events = crate::events::follow_now(
            &crate::pool::Pool::for_target(target),
            key,
            poke_on_event(&poke),
        );
        HoldEvents {
            target: target.clone(),
            key: key.to_vec(),
            poke,
            events,
        }
    }

    /// The subscription (None: no events; the periodic check remains) and
    /// what it pokes.
    pub(crate) async fn follow(
        self,
    ) -> (
        Option<crate::events::Subscription>,
        Arc<tokio::sync::Notify>,
    ) {
        let sub = match self.events {
            Ok(s) => s,
            Err(()) => {
                let (target, key, poke) = (self.target, self.key, Arc::clone(&self.poke));
                tokio::task::spawn_blocking(move || {
                    let pool = crate::pool::Pool::for_target(&target);
                    crate::events::follow(&pool, &key, poke_on_event(&poke))
                })
                .await
                .ok()
                .flatten()
            }
        };
        (sub, self.poke)
    }
}

fn poke_on_event(poke: &Arc<tokio::sync::Notify>) -> crate::events::Callback {
    let poke = Arc::clone(poke);
    Arc::new(move |event: &str| {
        if event != "lock.acquired" {
            poke.notify_one();
        }
    })
}

/// Watches one hold: its connection's end at once, a check every interval
/// and at each of the key's lifecycle events.
/// Holds only a weak reference, so a forgotten Lock does not live forever.
async fn watch_hold(
    inner: std::sync::Weak<Inner>,
    generation: u64,
    mut ended: Option<watch::Receiver<bool>>,
    interval: Duration,
    events: HoldEvents,
) {
    let (_events, poke) = events.follow().await;
    loop {
        tokio::select! {
            _ = poke.notified() => {
                let Some(inner) = inner.upgrade() else { return };
                if !inner.check(generation, &mut ended).await {
                    return;
                }
            }
            _ = ended_of(&mut ended) => {
                if let Some(inner) = inner.upgrade() {
                    inner.connection_ended(generation).await;
                }
                return;
            }
            _ = tokio::time::sleep(interval) => {
                let Some(inner) = inner.upgrade() else { return };
                if !inner.check(generation, &mut ended).await {
                    return;
                }
            }
        }
    }
}
