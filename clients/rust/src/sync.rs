//! The blocking [`Lock`] on a `redis::Client`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::{Client, Connection, Value};

use crate::error::{Error, Result};
use crate::protocol::{self as p, LockInfo, Options, Wait};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A reentrant lock on one key; one `Lock` is one owner (a fresh UUID
/// unless [`Options::owner`] gives one). Give each thread its own `Lock`.
///
/// Each successful acquisition returns a [`LockGuard`]; dropping it (or
/// [`LockGuard::release`]) gives that hold back. With `keepalive` (the
/// default) the lock is tied to a connection of the lock's own and the
/// server renews the lease while it is open; otherwise a watchdog thread
/// renews it every third of the lease.
pub struct Lock {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    name: String,
    owner: String,
    opts: Options,
    state: Mutex<State>,
    lost: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    holds: u64,
    /// keepalive: the connection the lock is tied to (closing it releases).
    tied: Option<Connection>,
    /// Calls that need no connection of their own (info, release, renew
    /// without keepalive), reused.
    control: Option<Connection>,
    watchdog: Option<Watchdog>,
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
                lost: Arc::new(AtomicBool::new(false)),
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

    /// Takes (or re-enters) the lock if it is free; None if another owner
    /// holds it.
    pub fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.inner.acquire(Wait::No)
    }

    /// Waits in the server's queue as long as it takes.
    pub fn acquire(&self) -> Result<LockGuard> {
        match self.inner.acquire(Wait::Forever)? {
            Some(g) => Ok(g),
            None => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the server ended the wait without the lock (LOCK.ACQUIRE ... BLOCK 0 answered nil, e.g. CLIENT UNBLOCK)",
            )))),
        }
    }

    /// Waits in the server's queue up to `timeout`; None if it ran out.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        self.inner.acquire(Wait::For(timeout))
    }

    /// LOCK.INFO; None when the lock is free.
    pub fn info(&self) -> Result<Option<LockInfo>> {
        let mut st = self.inner.state();
        let v: Value = self
            .inner
            .on_control(&mut st, |c| p::info_cmd(&self.inner.name).query(c))?;
        p::parse_info(&v)
    }

    /// Sets the lease to `lease` from now (keepalive: re-ties the lock to
    /// the lock's connection). [`Error::LockLost`] if not held.
    pub fn renew(&self) -> Result<()> {
        self.inner.renew()
    }

    /// True once the watchdog (keepalive off) found the lock gone.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
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

    fn connect(&self, read_timeout: Option<Duration>) -> Result<Connection> {
        let c = self.client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        c.set_read_timeout(read_timeout)?;
        c.set_write_timeout(Some(CONNECT_TIMEOUT))?;
        Ok(c)
    }

    fn guard(self: &Arc<Self>, token: Option<u64>) -> LockGuard {
        LockGuard {
            inner: Arc::clone(self),
            token,
            released: false,
        }
    }

    fn acquire(self: &Arc<Self>, wait: Wait) -> Result<Option<LockGuard>> {
        let mut st = self.state();
        if st.holds > 0 {
            return self.reenter(&mut st).map(Some);
        }
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, wait);
        let timeout = p::response_timeout(wait, &self.opts);
        let got = if self.opts.keepalive || wait.block_ms().is_some() {
            // A connection of its own: no other traffic can delay it, a
            // read timeout longer than BLOCK, and dropped (closed) unless
            // it becomes the lock's KEEPALIVE tie.
            let mut conn = self.connect(timeout)?;
            let reply: Value = match cmd.query(&mut conn) {
                Ok(v) => v,
                Err(e) => {
                    drop(conn);
                    if !self.opts.keepalive
                        && wait.block_ms().is_some()
                        && (e.is_io_error() || e.is_timeout() || e.is_connection_dropped())
                    {
                        self.drop_unread_grant(&mut st);
                    }
                    return Err(e.into());
                }
            };
            let got = p::parse_acquire(&reply, self.opts.token)?;
            if got.is_some() && self.opts.keepalive {
                conn.set_read_timeout(p::response_timeout(Wait::No, &self.opts))?;
                st.tied = Some(conn);
            }
            got
        } else {
            let v: Value = self.on_control(&mut st, |c| cmd.query(c))?;
            p::parse_acquire(&v, self.opts.token)?
        };
        let Some((count, token)) = got else {
            return Ok(None);
        };
        st.holds = count;
        self.lost.store(false, Ordering::SeqCst);
        if !self.opts.keepalive && st.watchdog.is_none() {
            st.watchdog = Some(Watchdog::start(self));
        }
        Ok(Some(self.guard(token)))
    }

    /// The wait failed on the client side (read timeout, I/O error) after
    /// the command was sent: a grant may sit unread in the closed socket.
    /// Give that hold back (NOTOWNER if there was none).
    fn drop_unread_grant(&self, st: &mut State) {
        let _: Result<Value> =
            self.on_control(st, |c| p::release_cmd(&self.name, &self.owner).query(c));
    }

    fn reenter(self: &Arc<Self>, st: &mut State) -> Result<LockGuard> {
        let cmd = p::acquire_cmd(&self.name, &self.owner, &self.opts, Wait::No);
        let v: Value = match st.tied.as_mut() {
            Some(tied) if self.opts.keepalive => tied_call(tied, |c| cmd.query(c)),
            _ => self.on_control(st, |c| cmd.query(c)),
        }
        .inspect_err(|e| {
            if matches!(e, Error::LockLost(_)) {
                self.forget(st);
            }
        })?;
        let got = p::parse_acquire(&v, self.opts.token)?;
        match got {
            Some((count, token)) if count == st.holds + 1 => {
                st.holds = count;
                Ok(self.guard(token))
            }
            other => {
                // Our holds were lost meanwhile: the section they protect is
                // compromised. Give back any fresh hold and say so.
                if other.is_some() {
                    self.drop_unread_grant(st);
                }
                self.forget(st);
                Err(Error::LockLost(format!(
                    "lock {:?} was lost while held by {:?} (re-entry found it gone)",
                    self.name, self.owner
                )))
            }
        }
    }

    fn release_one(&self) -> Result<u64> {
        let mut st = self.state();
        let cmd = p::release_cmd(&self.name, &self.owner);
        let result: Result<i64> = match st.tied.as_mut() {
            Some(tied) if self.opts.keepalive => tied_call(tied, |c| cmd.query(c)),
            _ => self.on_control(&mut st, |c| cmd.query(c)),
        };
        match result {
            Ok(left) => {
                st.holds = left as u64;
                if left == 0 {
                    self.forget(&mut st);
                }
                Ok(left as u64)
            }
            Err(e) => {
                if matches!(e, Error::LockLost(_)) {
                    self.forget(&mut st);
                }
                Err(e)
            }
        }
    }

    fn renew(&self) -> Result<()> {
        let mut st = self.state();
        let cmd = p::renew_cmd(&self.name, &self.owner, &self.opts, self.opts.keepalive);
        let renewed: i64 = if self.opts.keepalive {
            if st.tied.is_none() {
                st.tied = Some(self.connect(p::response_timeout(Wait::No, &self.opts))?);
            }
            tied_call(st.tied.as_mut().expect("just set"), |c| cmd.query(c))
        } else {
            self.on_control(&mut st, |c| cmd.query(c))
        }
        .inspect_err(|e| {
            if matches!(e, Error::LockLost(_)) {
                self.forget(&mut st);
            }
        })?;
        if renewed == 0 {
            self.forget(&mut st);
            return Err(Error::LockLost(format!(
                "lock {:?} is not held by {:?} any more",
                self.name, self.owner
            )));
        }
        Ok(())
    }

    fn on_control<T>(
        &self,
        st: &mut State,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if st.control.is_none() {
            st.control = Some(self.connect(p::response_timeout(Wait::No, &self.opts))?);
        }
        let result = f(st.control.as_mut().expect("just set"));
        if let Err(e) = &result
            && (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error())
        {
            st.control = None; // reconnect next time
        }
        result.map_err(Error::from)
    }

    /// Back to not holding: stop the watchdog, close the tie.
    fn forget(&self, st: &mut State) {
        st.holds = 0;
        st.tied = None;
        st.watchdog = None;
    }
}

/// A call on the KEEPALIVE connection: if the connection itself fails, the
/// tie is gone, and with it (the server released it) the lock.
fn tied_call<T>(
    conn: &mut Connection,
    f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
) -> Result<T> {
    f(conn).map_err(|e| {
        if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
            Error::LockLost(format!("its KEEPALIVE connection failed: {e}"))
        } else {
            Error::from(e)
        }
    })
}

/// keepalive off: renews every third of the lease on its own connection;
/// stops when dropped; sets `lost` when LOCK.RENEW answers 0.
struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    stopped: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(inner: &Inner) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        let stopped = Arc::new(AtomicBool::new(false));
        let (client, lost, stopped2) = (
            inner.client.clone(),
            Arc::clone(&inner.lost),
            Arc::clone(&stopped),
        );
        let cmd = p::renew_cmd(&inner.name, &inner.owner, &inner.opts, false);
        let interval = inner.opts.lease / 3;
        let timeout = p::response_timeout(Wait::No, &inner.opts);
        std::thread::Builder::new()
            .name("hashlock-watchdog".into())
            .spawn(move || {
                let mut conn: Option<Connection> = None;
                loop {
                    match rx.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    if conn.is_none() {
                        conn = client.get_connection_with_timeout(CONNECT_TIMEOUT).ok();
                        if let Some(c) = &conn {
                            let _ = c.set_read_timeout(timeout);
                        }
                    }
                    let Some(c) = conn.as_mut() else { continue };
                    match cmd.query::<i64>(c) {
                        Ok(0) => {
                            if !stopped2.load(Ordering::SeqCst) {
                                lost.store(true, Ordering::SeqCst);
                            }
                            return;
                        }
                        Ok(_) => {}
                        // Transient: the lease is the safety net until the next try.
                        Err(_) => conn = None,
                    }
                }
            })
            .expect("spawning the watchdog thread");
        Watchdog {
            stop: Some(tx),
            stopped,
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.stop.take(); // disconnects the channel: the thread ends
    }
}
