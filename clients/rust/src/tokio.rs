//! The async [`Lock`] for tokio, on redis-rs multiplexed connections.
//!
//! Drop behaviour: a [`LockGuard`] should be given back with
//! `guard.release().await`. A guard dropped without it spawns that release
//! on the current tokio runtime (errors ignored); dropped outside any
//! runtime it cannot, and the hold lasts until the `Lock` and all its
//! guards are gone (with KEEPALIVE the lock's connection then closes and
//! the server releases the lock; without, the watchdog stops and the lease
//! runs out).
//!
//! Cancelling a waiting acquire (dropping its future, e.g. in
//! `tokio::time::timeout` or `select!`) drops its connection, so the server
//! removes the waiter and never grants it the lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};
use tokio::sync::{Mutex, MutexGuard};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::protocol::{self as p, LockInfo, Options, Wait};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// See [`crate::sync::Lock`]: the same rules, async. One `Lock` is one
/// owner: give each task its own.
pub struct Lock {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    name: String,
    owner: String,
    opts: Options,
    /// Held for a whole operation (a wait included), so the operations of
    /// one Lock never interleave.
    state: Mutex<State>,
    lost: AtomicBool,
    /// A release given back by a cancelled wait: awaited before the next
    /// operation, so it cannot drop a hold taken after it.
    cleanup: std::sync::Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    holds: u64,
    tied: Option<MultiplexedConnection>,
    control: Option<MultiplexedConnection>,
    watchdog: Option<AbortOnDrop>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
    pub fn new(client: Client, name: impl Into<String>, opts: Options) -> Lock {
        let owner = opts
            .owner
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Lock {
            inner: Arc::new(Inner {
                client,
                name: name.into(),
                owner,
                opts,
                state: Mutex::new(State::default()),
                lost: AtomicBool::new(false),
                cleanup: std::sync::Mutex::new(None),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.inner.acquire(Wait::No).await
    }

    pub async fn acquire(&self) -> Result<LockGuard> {
        match self.inner.acquire(Wait::Forever).await? {
            Some(g) => Ok(g),
            None => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the server ended the wait without the lock (LOCK.ACQUIRE ... BLOCK 0 answered nil, e.g. CLIENT UNBLOCK)",
            )))),
        }
    }

    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        self.inner.acquire(Wait::For(timeout)).await
    }

    pub async fn info(&self) -> Result<Option<LockInfo>> {
        let mut st = self.inner.lock_state().await;
        let v: Value = self
            .inner
            .on_control(&mut st, p::info_cmd(&self.inner.name))
            .await?;
        p::parse_info(&v)
    }

    pub async fn renew(&self) -> Result<()> {
        self.inner.renew().await
    }

    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
    }
}

impl LockGuard {
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Gives this hold back; returns the holds left (0 = released).
    pub async fn release(mut self) -> Result<u64> {
        self.released = true;
        self.inner.release_one().await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let inner = Arc::clone(&self.inner);
            rt.spawn(async move {
                let _ = inner.release_one().await;
            });
        }
    }
}

fn is_connection_failure(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// Disarmed when a wait ends normally; if the wait's future is dropped
/// (cancelled) after its command went out, gives back a grant that may sit
/// unread in the dropped connection.
struct UnreadGrant {
    inner: Option<Arc<Inner>>,
}

impl Drop for UnreadGrant {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task_inner = Arc::clone(&inner);
        let task = rt.spawn(async move { task_inner.drop_unread_grant().await });
        *inner.cleanup.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }
}

impl Inner {
    async fn lock_state(&self) -> MutexGuard<'_, State> {
        let pending = self
            .cleanup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = pending {
            let _ = task.await;
        }
        self.state.lock().await
    }

    async fn connect(&self, response_timeout: Option<Duration>) -> Result<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(response_timeout);
        Ok(self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?)
    }

    async fn control(&self, st: &mut State) -> Result<MultiplexedConnection> {
        if st.control.is_none() {
            st.control = Some(
                self.connect(p::response_timeout(Wait::No, &self.opts))
                    .await?,
            );
        }
        Ok(st.control.clone().expect("just set"))
    }

    /// A call on the control connection; a failed connection is replaced
    /// next time.
    async fn on_control<T: redis::FromRedisValue>(
        &self,
        st: &mut State,
        cmd: redis::Cmd,
    ) -> Result<T> {
        let mut c = self.control(st).await?;
        match cmd.query_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => {
                if is_connection_failure(&e) {
                    st.control = None;
                }
                Err(e.into())
            }
        }
    }

    /// A call on the KEEPALIVE connection: if it fails, the tie and with
    /// it the lock are gone.
    async fn on_tied<T: redis::FromRedisValue>(
        &self,
        mut conn: MultiplexedConnection,
        cmd: redis::Cmd,
    ) -> Result<T> {
        cmd.query_async(&mut conn).await.map_err(|e| {
            if is_connection_failure(&e) {
                Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
            } else {
                Error::from(e)
            }
        })
    }

    fn guard(self: &Arc<Self>, token: Option<u64>) -> LockGuard {
        LockGuard {
            inner: Arc::clone(self),
            token,
            released: false,
        }
    }

    async fn acquire(self: &Arc<Self>, wait: Wait) -> Result<Option<LockGuard>> {
        let mut st = self.lock_state().await;
        if st.holds > 0 {
            return self.reenter(&mut st).await.map(Some);
        }
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, wait);
        let waits = wait.block_ms().is_some();
        let got = if self.opts.keepalive || waits {
            // A connection of its own with a response timeout longer than
            // BLOCK; dropped (closed) unless it becomes the KEEPALIVE tie.
            let mut conn = self.connect(p::response_timeout(wait, &self.opts)).await?;
            let mut unread = UnreadGrant {
                inner: (waits && !self.opts.keepalive).then(|| Arc::clone(self)),
            };
            let reply: redis::RedisResult<Value> = cmd.query_async(&mut conn).await;
            let reply = match reply {
                Ok(v) => {
                    unread.inner = None;
                    v
                }
                Err(e) => {
                    if !is_connection_failure(&e) {
                        unread.inner = None; // a server error: nothing was granted
                    }
                    drop(conn);
                    drop(unread);
                    return Err(e.into());
                }
            };
            let got = p::parse_acquire(&reply, self.opts.token)?;
            if got.is_some() && self.opts.keepalive {
                st.tied = Some(conn);
            }
            got
        } else {
            let v: Value = self.on_control(&mut st, cmd).await?;
            p::parse_acquire(&v, self.opts.token)?
        };
        let Some((count, token)) = got else {
            return Ok(None);
        };
        st.holds = count;
        self.lost.store(false, Ordering::SeqCst);
        if !self.opts.keepalive && st.watchdog.is_none() {
            st.watchdog = Some(AbortOnDrop(tokio::spawn(watch(Arc::downgrade(self)))));
        }
        Ok(Some(self.guard(token)))
    }

    async fn drop_unread_grant(&self) {
        let mut st = self.state.lock().await;
        let _: Result<Value> = self
            .on_control(&mut st, p::release_cmd(&self.name, &self.owner))
            .await;
    }

    async fn reenter(self: &Arc<Self>, st: &mut State) -> Result<LockGuard> {
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, Wait::No);
        let result: Result<Value> = match st.tied.clone() {
            Some(tied) if self.opts.keepalive => self.on_tied(tied, cmd).await,
            _ => self.on_control(st, cmd).await,
        };
        let v = result.inspect_err(|e| {
            if matches!(e, Error::LockLost(_)) {
                forget(st);
            }
        })?;
        match p::parse_acquire(&v, self.opts.token)? {
            Some((count, token)) if count == st.holds + 1 => {
                st.holds = count;
                Ok(self.guard(token))
            }
            other => {
                if other.is_some() {
                    let _: Result<Value> = self
                        .on_control(st, p::release_cmd(&self.name, &self.owner))
                        .await;
                }
                forget(st);
                Err(Error::LockLost(format!(
                    "lock {:?} was lost while held by {:?} (re-entry found it gone)",
                    self.name, self.owner
                )))
            }
        }
    }

    async fn release_one(&self) -> Result<u64> {
        let mut st = self.lock_state().await;
        let cmd = p::release_cmd(&self.name, &self.owner);
        let result: Result<i64> = match st.tied.clone() {
            Some(tied) if self.opts.keepalive => self.on_tied(tied, cmd).await,
            _ => self.on_control(&mut st, cmd).await,
        };
        match result {
            Ok(left) => {
                st.holds = left as u64;
                if left == 0 {
                    forget(&mut st);
                }
                Ok(left as u64)
            }
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    forget(&mut st);
                }
                Err(e)
            }
        }
    }

    async fn renew(&self) -> Result<()> {
        let mut st = self.lock_state().await;
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, self.opts.keepalive);
        let result: Result<i64> = if self.opts.keepalive {
            if st.tied.is_none() {
                st.tied = Some(
                    self.connect(p::response_timeout(Wait::No, &self.opts))
                        .await?,
                );
            }
            let tied = st.tied.clone().expect("just set");
            self.on_tied(tied, cmd).await
        } else {
            self.on_control(&mut st, cmd).await
        };
        let renewed = result.inspect_err(|e| {
            if matches!(e, Error::LockLost(_)) {
                forget(&mut st);
            }
        })?;
        if renewed == 0 {
            forget(&mut st);
            return Err(Error::LockLost(format!(
                "lock {:?} is not held by {:?} any more",
                self.name, self.owner
            )));
        }
        Ok(())
    }
}

/// Back to not holding: stop the watchdog, close the tie.
fn forget(st: &mut State) {
    st.holds = 0;
    st.tied = None;
    st.watchdog = None;
}

/// keepalive off: renew every third of the lease; a 0 marks the lock lost.
/// Holds only a weak reference, so a forgotten Lock does not live forever.
async fn watch(inner: std::sync::Weak<Inner>) {
    let Some(first) = inner.upgrade() else { return };
    let interval = first.opts.lease / 3;
    let cmd = p::renew_cmd(&first.name, &first.owner, &first.opts, false);
    let timeout = p::response_timeout(Wait::No, &first.opts);
    let client = first.client.clone();
    drop(first);
    let mut conn: Option<MultiplexedConnection> = None;
    loop {
        tokio::time::sleep(interval).await;
        if conn.is_none() {
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(timeout);
            conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        match cmd.query_async::<i64>(c).await {
            Ok(0) => {
                if let Some(inner) = inner.upgrade() {
                    inner.lost.store(true, Ordering::SeqCst);
                }
                return;
            }
            Ok(_) => {}
            Err(_) => conn = None, // transient: the lease is the safety net
        }
    }
}
