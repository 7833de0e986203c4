//! The sync side's connections: a pool of the library's own connections per
//! [`Target`], and [`Dedicated`], one call site for one key that takes a
//! connection for the key's node and follows MOVED/ASK.
//!
//! Why a pool: opening a TCP connection per acquisition caps a process at a
//! few thousand acquisitions a second and leaves a socket in TIME_WAIT for
//! each. A connection whose lock was released cleanly holds nothing on the
//! server (no lock, no queue entry) and serves the next acquisition. Only a
//! wait abandoned on the client side (a client-side timeout) or a connection
//! that failed is closed: closing is what takes its queue entry, and any
//! grant tied to it, off the server.
//!
//! Nothing here knows about locks: the same pieces serve every primitive.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::Result;
use crate::net::{Address, Conn};
use crate::target::{Target, redirection};

/// MOVED/ASK redirections followed for one call.
pub const MAX_REDIRECTS: usize = 5;
/// Idle connections a pool keeps per node; more are closed when given back.
pub const MAX_IDLE: usize = 64;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The library's connections to one target.
pub struct Pool {
    pub(crate) target: Target,
    idle: Mutex<HashMap<Address, Vec<Conn>>>,
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Pool>>> {
    static R: std::sync::OnceLock<Mutex<HashMap<String, Weak<Pool>>>> = std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

impl Pool {
    /// The pool for `target`: one per target (shared by every Lock on it, kept
    /// while any of them lives).
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

    /// An open connection to `address`: an idle one, or a new one.
    pub fn take(&self, address: &Address) -> Result<Conn> {
        loop {
            let conn = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                idle.get_mut(address).and_then(Vec::pop)
            };
            match conn {
                Some(c) if c.idle_and_open() => return Ok(c),
                Some(_) => continue, // closed by the server meanwhile: dropped
                None => break,
            }
        }
        Conn::connect(&self.target.inner.info, address, CONNECT_TIMEOUT)
    }

    /// A connection that holds nothing on the server: kept for reuse.
    pub fn give_back(&self, address: Address, conn: Conn) {
        if !conn.healthy() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(address).or_default();
        if list.len() < MAX_IDLE {
            list.push(conn);
        }
    }

    /// The node serving `key`, learning the cluster's slot map if needed.
    pub fn node_for(&self, key: &[u8]) -> Result<Address> {
        if let Some(a) = self.target.node_for(key) {
            return Ok(a);
        }
        let seed = self.target.seed();
        let mut c = self.take(&seed)?;
        let slots = c.call(
            &redis::cmd("CLUSTER").arg("SLOTS").clone(),
            Some(CONNECT_TIMEOUT),
        )?;
        self.give_back(seed.clone(), c);
        self.target.learn(&slots);
        Ok(self.target.node_for(key).unwrap_or(seed))
    }

    /// One call on a pooled connection for `key` (MOVED/ASK followed).
    pub fn call(
        self: &Arc<Self>,
        key: &[u8],
        cmd: &Cmd,
        timeout: Option<Duration>,
    ) -> Result<Value> {
        let mut d = Dedicated::new(self, key)?;
        let r = d.call(cmd, timeout);
        if d.healthy() {
            d.give_back();
        }
        r
    }
}

/// One connection of the caller's own for one key, taken from the pool for
/// the node that serves it, following MOVED/ASK. `give_back()` returns it
/// (only when it holds nothing on the server); dropping it without that
/// closes it.
pub struct Dedicated {
    pool: Arc<Pool>,
    key: Vec<u8>,
    address: Address,
    conn: Option<Conn>,
}

impl Dedicated {
    pub fn new(pool: &Arc<Pool>, key: &[u8]) -> Result<Dedicated> {
        Ok(Dedicated {
            address: pool.node_for(key)?,
            pool: Arc::clone(pool),
            key: key.to_vec(),
            conn: None,
        })
    }

    pub fn call(&mut self, cmd: &Cmd, timeout: Option<Duration>) -> Result<Value> {
        let mut asking = false;
        let mut redirects = 0;
        loop {
            if self.conn.is_none() {
                self.conn = Some(self.pool.take(&self.address)?);
            }
            let conn = self.conn.as_mut().expect("just set");
            if asking {
                conn.call(&redis::cmd("ASKING"), timeout)?;
            }
            match conn.call(cmd, timeout) {
                Err(e) => {
                    let Some((ask, to)) = redirection(&e) else {
                        return Err(e);
                    };
                    redirects += 1;
                    if redirects > MAX_REDIRECTS {
                        return Err(e);
                    }
                    // The redirected command did nothing there: a clean connection.
                    self.give_back();
                    if !ask {
                        self.pool.target.moved(&self.key, &to);
                    }
                    self.address = to;
                    asking = ask;
                }
                ok => return ok,
            }
        }
    }

    /// The connection's descriptor, while it has one.
    pub fn fd(&self) -> Option<RawFd> {
        self.conn.as_ref().map(Conn::fd)
    }

    /// True while it has a connection that did not fail.
    pub fn healthy(&self) -> bool {
        self.conn.as_ref().is_some_and(Conn::healthy)
    }

    /// An idle connection still usable (nothing to read: not closed by the server).
    pub fn idle_and_open(&self) -> bool {
        self.conn.as_ref().is_some_and(Conn::idle_and_open)
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
