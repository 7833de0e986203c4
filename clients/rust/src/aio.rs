//! The tokio side's connections: a pool of the library's own redis-rs
//! multiplexed connections per [`Target`], and [`Dedicated`], one call site
//! for one key (the key's node, MOVED/ASK followed, a response timeout of its
//! own per call, closed when dropped).
//!
//! Each connection reports its end (closed by the server, reset, failed) on
//! a `watch` channel the moment redis-rs's driver sees it: loss detection
//! waits on it. (redis-rs reports a disconnection only to a push sender, and
//! only on RESP3 connections: the library's connections speak RESP3.)
//!
//! Nothing here knows about locks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, PushInfo, PushKind, Value};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::net::Address;
use crate::pool::{MAX_IDLE, MAX_REDIRECTS};
use crate::target::{Target, redirection};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection and its end.
pub struct Conn {
    conn: MultiplexedConnection,
    ended: watch::Receiver<bool>,
}

impl Conn {
    /// Open: not ended, and its driver (whose push sender holds the other
    /// end of `ended`) still alive: a connection made on a runtime that has
    /// shut down since is not.
    pub fn is_open(&self) -> bool {
        !*self.ended.borrow() && self.ended.has_changed().is_ok()
    }

    /// Resolves when the connection ends.
    pub fn ended(&self) -> watch::Receiver<bool> {
        self.ended.clone()
    }
}

/// The library's connections to one target.
pub struct Pool {
    pub(crate) target: Target,
    idle: Mutex<HashMap<Address, Vec<Conn>>>,
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Pool>>> {
    static R: OnceLock<Mutex<HashMap<String, Weak<Pool>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

fn failure(e: redis::RedisError) -> Error {
    Error::from(e)
}

impl Pool {
    pub fn for_target(target: &Target) -> Arc<Pool> {
        let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = r.get(&target.inner.id).and_then(Weak::upgrade) {
            return p;
        }
        r.retain(|_, w| w.strong_count() > 0);
        let p = Arc::new(Pool {
            target: target.clone(),
            idle: Mutex::new(HashMap::new()),
        });
        r.insert(target.inner.id.clone(), Arc::downgrade(&p));
        p
    }

    pub async fn take(&self, address: &Address) -> Result<Conn> {
        loop {
            let conn = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                idle.get_mut(address).and_then(Vec::pop)
            };
            match conn {
                Some(c) if c.is_open() => return Ok(c),
                Some(_) => continue,
                None => break,
            }
        }
        let info = address.apply(&self.target.inner.info);
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        let (tx, ended) = watch::channel(false);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(None)
            .set_push_sender(move |push: PushInfo| {
                if push.kind == PushKind::Disconnection {
                    let _ = tx.send(true);
                }
                Ok::<(), ()>(())
            });
        let conn = redis::Client::open(info)
            .map_err(failure)?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(failure)?;
        Ok(Conn { conn, ended })
    }

    pub fn give_back(&self, address: Address, conn: Conn) {
        if !conn.is_open() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(address).or_default();
        if list.len() < MAX_IDLE {
            list.push(conn);
        }
    }

    pub async fn node_for(&self, key: &[u8]) -> Result<Address> {
        if let Some(a) = self.target.node_for(key) {
            return Ok(a);
        }
        let seed = self.target.seed();
        let mut c = self.take(&seed).await?;
        let slots: Value = tokio::time::timeout(
            CONNECT_TIMEOUT,
            redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut c.conn),
        )
        .await
        .map_err(|_| timed_out())?
        .map_err(failure)?;
        self.give_back(seed.clone(), c);
        self.target.learn(&slots);
        Ok(self.target.node_for(key).unwrap_or(seed))
    }

    /// One call on a pooled connection for `key` (MOVED/ASK followed).
    pub async fn call(
        self: &Arc<Self>,
        key: &[u8],
        cmd: &Cmd,
        timeout: Option<Duration>,
    ) -> Result<Value> {
        let mut d = Dedicated::new(self, key).await?;
        let r = d.call(cmd, timeout).await;
        if r.as_ref().is_err_and(Error::is_connection_failure) {
            d.close();
        } else {
            d.give_back();
        }
        r
    }
}

fn timed_out() -> Error {
    Error::Redis(redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "hashlock-client: no reply in time",
    )))
}

/// One connection of the caller's own for one key. `give_back()` returns it
/// (only when it holds nothing on the server); dropping it without that
/// closes it (a cancelled wait: the server drops the waiter, and a grant
/// tied to the connection is released).
pub struct Dedicated {
    pool: Arc<Pool>,
    key: Vec<u8>,
    address: Address,
    conn: Option<Conn>,
}

impl Dedicated {
    pub async fn new(pool: &Arc<Pool>, key: &[u8]) -> Result<Dedicated> {
        Ok(Dedicated {
            address: pool.node_for(key).await?,
            pool: Arc::clone(pool),
            key: key.to_vec(),
            conn: None,
        })
    }

    /// Sends `cmd` and waits up to `timeout` (None: no limit) for its reply;
    /// a timeout closes the connection.
    pub async fn call(&mut self, cmd: &Cmd, timeout: Option<Duration>) -> Result<Value> {
        let mut asking = false;
        let mut redirects = 0;
        loop {
            if self.conn.is_none() {
                self.conn = Some(self.pool.take(&self.address).await?);
            }
            let conn = &mut self.conn.as_mut().expect("just set").conn;
            let reply = async {
                if asking {
                    let _: Value = redis::cmd("ASKING").query_async(conn).await?;
                }
                cmd.query_async::<Value>(conn).await
            };
            let reply = match timeout {
                Some(t) => match tokio::time::timeout(t, reply).await {
                    Ok(r) => r,
                    Err(_) => {
                        self.close();
                        return Err(timed_out());
                    }
                },
                None => reply.await,
            };
            let e = match reply {
                Ok(v) => return Ok(v),
                Err(e) => failure(e),
            };
            let Some((ask, to)) = redirection(&e) else {
                if e.is_connection_failure() {
                    self.close();
                }
                return Err(e);
            };
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(e);
            }
            self.give_back();
            if !ask {
                self.pool.target.moved(&self.key, &to);
            }
            self.address = to;
            asking = ask;
        }
    }

    /// The current connection's end, while it has one.
    pub fn ended(&self) -> Option<watch::Receiver<bool>> {
        self.conn.as_ref().map(Conn::ended)
    }

    pub fn is_open(&self) -> bool {
        self.conn.as_ref().is_some_and(Conn::is_open)
    }

    pub fn give_back(&mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.give_back(self.address.clone(), c);
        }
    }

    pub fn close(&mut self) {
        self.conn = None;
    }
}
