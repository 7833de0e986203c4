//! LOCK.* arguments and replies, shared by the sync and tokio locks.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{Error, Result};

/// Redisson's watchdog lease and the module's default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// How much longer than BLOCK (plus any REPLICAS wait) a waiter's
/// connection waits for the server's answer. The server answers at BLOCK's
/// end itself; this only guards against a server that stopped answering.
pub const RESPONSE_MARGIN: Duration = Duration::from_secs(10);
/// The read timeout of calls that do not wait.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A lock's settings (see [`crate::sync::Lock`]'s builder methods).
#[derive(Clone, Debug)]
pub struct Options {
    pub lease: Duration,
    pub keepalive: bool,
    pub token: bool,
    pub replicas: Option<(u32, Duration)>,
    pub owner: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease: DEFAULT_LEASE,
            keepalive: true,
            token: false,
            replicas: None,
            owner: None,
        }
    }
}

/// How long acquire waits: the BLOCK argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    No,
    For(Duration),
    Forever,
}

impl Wait {
    /// The BLOCK milliseconds; None = no BLOCK. A zero duration does not
    /// wait (BLOCK 0 would mean forever).
    pub fn block_ms(self) -> Option<u64> {
        match self {
            Wait::No => None,
            Wait::Forever => Some(0),
            Wait::For(d) if d.is_zero() => None,
            Wait::For(d) => Some((d.as_micros().div_ceil(1000) as u64).max(1)),
        }
    }
}

fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// The response timeout a call must allow: None = unlimited (BLOCK 0).
pub fn response_timeout(wait: Wait, opts: &Options) -> Option<Duration> {
    let extra = opts.replicas.map_or(Duration::ZERO, |(_, t)| t);
    match wait.block_ms() {
        Some(0) => None,
        Some(block) => Some(Duration::from_millis(block) + extra + RESPONSE_MARGIN),
        None => Some(CALL_TIMEOUT + extra),
    }
}

pub fn acquire_cmd(name: &str, owner: &str, opts: &Options, wait: Wait) -> Cmd {
    let mut c = redis::cmd("LOCK.ACQUIRE");
    c.arg(name).arg(owner).arg("PX").arg(ms(opts.lease));
    if let Some(block) = wait.block_ms() {
        c.arg("BLOCK").arg(block);
    }
    if opts.keepalive {
        c.arg("KEEPALIVE");
    }
    if opts.token {
        c.arg("TOKEN");
    }
    replicas(&mut c, opts);
    c
}

pub fn renew_cmd(name: &str, owner: &str, opts: &Options, keepalive: bool) -> Cmd {
    let mut c = redis::cmd("LOCK.RENEW");
    c.arg(name).arg(owner).arg("PX").arg(ms(opts.lease));
    if keepalive {
        c.arg("KEEPALIVE");
    }
    replicas(&mut c, opts);
    c
}

fn replicas(c: &mut Cmd, opts: &Options) {
    if let Some((n, t)) = opts.replicas {
        c.arg("REPLICAS").arg(n).arg(ms(t));
    }
}

/// keepalive off, after a wait: the wait was tied to its connection
/// (KEEPALIVE), so that a grant on its way to a wait abandoned on the client
/// side is released by the server when the connection closes; once the grant
/// is read, this makes it a plain lease again. `REPLICAS 0`: the grant itself
/// was acknowledged as asked; a lost untie only leaves the grant's lease.
pub fn untie_cmd(name: &str, owner: &str, opts: &Options) -> Cmd {
    let mut c = redis::cmd("LOCK.RENEW");
    c.arg(name)
        .arg(owner)
        .arg("PX")
        .arg(ms(opts.lease))
        .arg("REPLICAS")
        .arg(0)
        .arg(1000);
    c
}

pub fn release_cmd(name: &str, owner: &str) -> Cmd {
    let mut c = redis::cmd("LOCK.RELEASE");
    c.arg(name).arg(owner);
    c
}

pub fn info_cmd(name: &str) -> Cmd {
    let mut c = redis::cmd("LOCK.INFO");
    c.arg(name);
    c
}

/// An integer reply.
pub fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| unexpected("an integer", v)),
        _ => Err(unexpected("an integer", v)),
    }
}

fn text(v: &Value) -> Result<String> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::VerbatimString { text, .. } => Ok(text.clone()),
        _ => Err(unexpected("a string", v)),
    }
}

fn unexpected(what: &str, v: &Value) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected LOCK.* reply",
        format!("expected {what}, got {v:?}"),
    )))
}

/// LOCK.ACQUIRE's reply: (hold count, token) or None when busy.
pub fn parse_acquire(v: &Value, token: bool) -> Result<Option<(u64, Option<u64>)>> {
    match v {
        Value::Nil => Ok(None),
        Value::Array(items) if token && items.len() == 2 => {
            Ok(Some((int(&items[0])? as u64, Some(int(&items[1])? as u64))))
        }
        _ if token => Err(unexpected("[count, token]", v)),
        _ => Ok(Some((int(v)? as u64, None))),
    }
}

/// LOCK.INFO's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    pub owner: String,
    pub holds: u64,
    /// Milliseconds left; -1 = no expiry.
    pub ttl_ms: i64,
    pub waiters: u64,
    /// Tied to a connection (None: the module does not report it).
    pub keepalive: Option<bool>,
    /// The last fencing token issued for this key (None: not reported).
    pub token: Option<u64>,
}

/// LOCK.INFO in RESP2 (flat field/value array) or RESP3 (map).
pub fn parse_info(v: &Value) -> Result<Option<LockInfo>> {
    let pairs: Vec<(&Value, &Value)> = match v {
        Value::Nil => return Ok(None),
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(a) if a.len() % 2 == 0 => a.chunks(2).map(|p| (&p[0], &p[1])).collect(),
        _ => return Err(unexpected("a map", v)),
    };
    let field = |name: &str| -> Result<Option<&Value>> {
        for (k, v) in &pairs {
            if text(k)? == name {
                return Ok(Some(*v));
            }
        }
        Ok(None)
    };
    let need = |name: &str| field(name)?.ok_or_else(|| unexpected(name, v));
    Ok(Some(LockInfo {
        owner: text(need("owner")?)?,
        holds: int(need("holds")?)? as u64,
        ttl_ms: int(need("ttl")?)?,
        waiters: int(need("waiters")?)? as u64,
        keepalive: field("keepalive")?.map(int).transpose()?.map(|k| k != 0),
        token: field("token")?.map(int).transpose()?.map(|t| t as u64),
    }))
}
