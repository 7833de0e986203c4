//! Lifecycle keyspace events: one subscriber connection per target and
//! node (a [`Hub`]), shared by every watcher of a key there, read by a
//! thread of its own (the tokio side uses the same hub: its callbacks only
//! wake tasks). Held locks and the family's holds use it for their loss
//! signal ([`crate::election`] keeps a subscriber connection of its own).
//!
//! The module fires a keyspace event of class `d` on every change of holder
//! (`lock.acquired`, `lock.released`, `lock.expired`, `lock.forced`,
//! `lock.closed`, ...) on `__keyspace@<db>__:<key>`, in the order things
//! happened. A held lock's loss watch hears of a forced release or an
//! expiry as it happens. No polling: the hub's thread blocks on its socket.
//!
//! Whether the server sends them at all is `notify-keyspace-events` (it
//! needs `K` and `d`, or `A`): [`Hub::flags`] reads it, so what needs the
//! events can say so at once ([`crate::Error::EventsDisabled`]) instead of
//! waiting for events that never come.
//!
//! If the subscriber connection ends, the hub opens a new one, subscribes
//! again, and then calls every callback with `""` (events may have been
//! missed meanwhile: look again).
//!
//! Nothing here knows about locks.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use redis::Value;

use crate::error::{Error, Result};
use crate::net::{Address, Conn};
use crate::pool::Pool;

/// What a subscriber is called with: the event's name (`lock.forced`...),
/// or `""` after the subscriber connection was made again.
pub type Callback = Arc<dyn Fn(&str) + Send + Sync>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long a lock's loss watch trusts the node's `notify-keyspace-events`
/// as last read (a setting turned on later is seen within this).
pub const FLAGS_MAX_AGE: Duration = Duration::from_secs(10);

/// True when `notify-keyspace-events` delivers module events on keyspace
/// channels: `K` (`E` alone puts them on keyevent channels, which an
/// observer of one key does not read) and `d` or `A`.
pub fn hears_lifecycle_events(flags: &str) -> bool {
    flags.contains('K') && (flags.contains('d') || flags.contains('A'))
}

/// [`Error::EventsDisabled`] for a server whose setting is `flags`.
pub fn events_disabled(flags: &str) -> Error {
    Error::EventsDisabled(format!(
        "the server's notify-keyspace-events is {flags:?}: it needs K and d for the hashlock \
         lifecycle events an Election (and the event-driven loss signal) listens to; set it \
         with `CONFIG SET notify-keyspace-events Kd` (or `notify-keyspace-events Kd` in redis.conf)"
    ))
}

/// `__keyspace@<db>__:<key>`.
pub fn keyspace_channel(db: i64, key: &[u8]) -> Vec<u8> {
    let mut c = format!("__keyspace@{db}__:").into_bytes();
    c.extend_from_slice(key);
    c
}

/// One callback on one channel; dropping it ends it.
pub struct Subscription {
    hub: Arc<Hub>,
    channel: Vec<u8>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unsubscribe(&self.channel, self.id);
    }
}

/// The process's hubs, per target and node.
type Hubs = HashMap<(String, Address), Arc<Hub>>;

fn hubs() -> MutexGuard<'static, Hubs> {
    static HUBS: OnceLock<Mutex<Hubs>> = OnceLock::new();
    HUBS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A subscriber connection to one node, and the thread reading it.
pub struct Hub {
    pool: Arc<Pool>,
    address: Address,
    state: Mutex<HubState>,
    confirmed: Condvar,
}

#[derive(Default)]
struct HubState {
    /// The subscriber connection's descriptor while the reader has one
    /// (writes happen under the mutex; the reader drops the connection only
    /// after clearing this).
    fd: Option<RawFd>,
    running: bool,
    subs: HashMap<Vec<u8>, Vec<(u64, Callback)>>,
    /// SUBSCRIBEs sent and not confirmed yet, per channel.
    pending: HashMap<Vec<u8>, u32>,
    /// After a reconnection: tell everyone once every channel is confirmed.
    resubscribed: bool,
    next_id: u64,
    /// The node's setting, and when it was read.
    flags: Option<(String, Instant)>,
}

impl Hub {
    /// The hub for the node serving `key` on `pool`'s target, and the key's
    /// keyspace channel.
    pub fn for_key(pool: &Arc<Pool>, key: &[u8]) -> Result<(Arc<Hub>, Vec<u8>)> {
        let address = pool.node_for(key)?;
        let target = &pool.target;
        let db = if target.is_cluster() {
            0
        } else {
            target.inner.info.redis_settings().db()
        };
        let mut hubs = hubs();
        let hub = hubs
            .entry((target.inner.id.clone(), address.clone()))
            .or_insert_with(|| {
                Arc::new(Hub {
                    pool: Arc::clone(pool),
                    address,
                    state: Mutex::new(HubState::default()),
                    confirmed: Condvar::new(),
                })
            })
            .clone();
        Ok((hub, keyspace_channel(db, key)))
    }

    fn state(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's `notify-keyspace-events`, as read within the last
    /// [`FLAGS_MAX_AGE`] (`refresh`: read now). None: CONFIG GET was
    /// refused (the events may still come).
    pub fn flags(&self, refresh: bool) -> Result<Option<String>> {
        if !refresh
            && let Some((f, at)) = self.state().flags.clone()
            && at.elapsed() < FLAGS_MAX_AGE
        {
            return Ok(Some(f));
        }
        let mut conn = self.pool.take(&self.address)?;
        let reply = conn.call(
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("notify-keyspace-events"),
            Some(CONNECT_TIMEOUT),
        );
        if conn.healthy() {
            self.pool.give_back(self.address.clone(), conn);
        }
        let reply = match reply {
            Ok(r) => r,
            Err(Error::Redis(e)) if e.code().is_some() => return Ok(None),
            Err(e) => return Err(e),
        };
        let value = match &reply {
            Value::Array(a) => a.get(1),
            Value::Map(m) => m.first().map(|(_, v)| v),
            _ => None,
        };
        let flags = match value {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => return Ok(None),
        };
        self.state().flags = Some((flags.clone(), Instant::now()));
        Ok(Some(flags))
    }

    /// Fails with [`Error::EventsDisabled`] when the node does not send
    /// the lifecycle events (asked now, not from memory).
    pub fn require_events(&self) -> Result<()> {
        match self.flags(true)? {
            Some(f) if !hears_lifecycle_events(&f) => Err(events_disabled(&f)),
            _ => Ok(()),
        }
    }

    /// Calls `callback(event)` for every message on `channel` until the
    /// subscription is dropped. `wait`: returns once the server confirmed
    /// the channel (events after that are delivered).
    pub fn subscribe(
        self: &Arc<Self>,
        channel: &[u8],
        callback: Callback,
        wait: bool,
    ) -> Result<Subscription> {
        let mut st = self.state();
        if !st.running {
            let conn = Conn::connect(&self.pool.target.inner.info, &self.address, CONNECT_TIMEOUT)?;
            st.fd = Some(conn.fd());
            st.running = true;
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name("hashlock-events".into())
                .spawn(move || me.run(conn))
                .map_err(|e| Error::Redis(e.into()))?;
        }
        st.next_id += 1;
        let id = st.next_id;
        let subs = st.subs.entry(channel.to_vec()).or_default();
        subs.push((id, callback));
        if subs.len() == 1 {
            *st.pending.entry(channel.to_vec()).or_default() += 1;
            send(&mut st, "SUBSCRIBE", channel);
        }
        let sub = Subscription {
            hub: Arc::clone(self),
            channel: channel.to_vec(),
            id,
        };
        if wait {
            let deadline = Instant::now() + CONFIRM_TIMEOUT;
            while st.pending.get(channel).copied().unwrap_or(0) > 0 || st.fd.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    drop(st);
                    return Err(Error::Redis(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "hashlock-client: the server did not confirm a SUBSCRIBE in time",
                    ))));
                }
                st = self
                    .confirmed
                    .wait_timeout(st, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        Ok(sub)
    }

    fn unsubscribe(&self, channel: &[u8], id: u64) {
        let mut st = self.state();
        let Some(subs) = st.subs.get_mut(channel) else {
            return;
        };
        subs.retain(|(i, _)| *i != id);
        if subs.is_empty() {
            st.subs.remove(channel);
            send(&mut st, "UNSUBSCRIBE", channel);
        }
    }

    fn run(self: Arc<Self>, mut conn: Conn) {
        loop {
            match conn.read(None) {
                Ok(msg) => self.dispatch(msg),
                Err(_) => {
                    let Some(c) = self.reconnect() else { return };
                    conn = c;
                }
            }
        }
    }

    /// The connection ended: a new one, every channel subscribed again
    /// (None: nobody listens any more; the thread ends).
    fn reconnect(&self) -> Option<Conn> {
        {
            let mut st = self.state();
            st.fd = None;
            st.pending.clear();
        }
        loop {
            if self.state().subs.is_empty() {
                let mut st = self.state();
                if st.subs.is_empty() {
                    st.running = false;
                    return None;
                }
            }
            std::thread::sleep(RECONNECT_PAUSE);
            let Ok(conn) =
                Conn::connect(&self.pool.target.inner.info, &self.address, CONNECT_TIMEOUT)
            else {
                continue;
            };
            let mut st = self.state();
            st.fd = Some(conn.fd());
            st.resubscribed = true;
            let channels: Vec<Vec<u8>> = st.subs.keys().cloned().collect();
            for ch in channels {
                *st.pending.entry(ch.clone()).or_default() += 1;
                send(&mut st, "SUBSCRIBE", &ch);
            }
            return Some(conn);
        }
    }

    fn dispatch(&self, msg: Value) {
        let items = match msg {
            Value::Array(a) => a,
            Value::Push { data, .. } => data,
            _ => return,
        };
        let text = |v: Option<&Value>| -> Option<Vec<u8>> {
            match v? {
                Value::BulkString(b) => Some(b.clone()),
                Value::SimpleString(s) => Some(s.clone().into_bytes()),
                _ => None,
            }
        };
        let (Some(kind), Some(channel)) = (text(items.first()), text(items.get(1))) else {
            return;
        };
        let mut calls: Vec<(Callback, String)> = Vec::new();
        {
            let mut st = self.state();
            match kind.as_slice() {
                b"subscribe" => {
                    if let Some(n) = st.pending.get_mut(&channel) {
                        *n = n.saturating_sub(1);
                    }
                    self.confirmed.notify_all();
                    if st.resubscribed && st.pending.values().all(|n| *n == 0) {
                        st.resubscribed = false;
                        for subs in st.subs.values() {
                            calls
                                .extend(subs.iter().map(|(_, cb)| (Arc::clone(cb), String::new())));
                        }
                    }
                }
                b"message" => {
                    let event = text(items.get(2))
                        .map(|e| String::from_utf8_lossy(&e).into_owned())
                        .unwrap_or_default();
                    if let Some(subs) = st.subs.get(&channel) {
                        calls.extend(subs.iter().map(|(_, cb)| (Arc::clone(cb), event.clone())));
                    }
                }
                _ => {}
            }
        }
        for (cb, event) in calls {
            cb(&event);
        }
    }
}

/// Writes one command to the subscriber connection (nothing if there is
/// none: the reader subscribes every channel when it makes a new one).
fn send(st: &mut HubState, command: &str, channel: &[u8]) {
    let Some(fd) = st.fd else { return };
    let packed = redis::cmd(command).arg(channel).get_packed_command();
    let mut off = 0;
    while off < packed.len() {
        // SAFETY: `fd` is the reader's open connection: it is closed only
        // after `st.fd` is cleared, under the mutex held here.
        let n = unsafe { libc::write(fd, packed[off..].as_ptr().cast(), packed.len() - off) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // The connection failed: the reader sees it end and starts over.
            return;
        }
        off += n as usize;
    }
}

/// Events on `key` for a loss watch: None when the server does not send
/// them (the watch's other sources remain) or cannot be asked.
pub fn follow(pool: &Arc<Pool>, key: &[u8], callback: Callback) -> Option<Subscription> {
    let (hub, channel) = Hub::for_key(pool, key).ok()?;
    match hub.flags(false) {
        Ok(Some(f)) if !hears_lifecycle_events(&f) => return None,
        Err(_) => return None,
        _ => {}
    }
    hub.subscribe(&channel, callback, false).ok()
}

/// [`follow`] when it can be done without waiting on the network (the
/// node's hub runs and its setting is known): `Err(())` otherwise. The tokio
/// side subscribes this way before the acquisition returns, and falls back
/// to [`follow`] off the runtime the first time.
#[allow(clippy::result_unit_err)]
pub fn follow_now(
    pool: &Arc<Pool>,
    key: &[u8],
    callback: Callback,
) -> std::result::Result<Option<Subscription>, ()> {
    let target = &pool.target;
    let address = target.node_for(key).ok_or(())?;
    let hub = hubs()
        .get(&(target.inner.id.clone(), address))
        .cloned()
        .ok_or(())?;
    let db = if target.is_cluster() {
        0
    } else {
        target.inner.info.redis_settings().db()
    };
    {
        let st = hub.state();
        if !st.running {
            return Err(());
        }
        match &st.flags {
            Some((_, at)) if at.elapsed() >= FLAGS_MAX_AGE => return Err(()),
            None => return Err(()),
            Some((f, _)) if !hears_lifecycle_events(f) => return Ok(None),
            Some(_) => {}
        }
    }
    Ok(hub
        .subscribe(&keyspace_channel(db, key), callback, false)
        .ok())
}
