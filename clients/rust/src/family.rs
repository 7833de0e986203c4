//! SEMAPHORE.*, LATCH.*, RWLOCK.* and LOCK.MACQUIRE/MRELEASE arguments and
//! replies, shared by the sync and tokio objects.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{Error, Result};
use crate::protocol::{self as p, Options, Wait};

fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

fn block(c: &mut Cmd, wait: Wait) {
    if let Some(b) = wait.block_ms() {
        c.arg("BLOCK").arg(b);
    }
}

fn replicas(c: &mut Cmd, opts: &Options) {
    if let Some((n, t)) = opts.replicas {
        c.arg("REPLICAS").arg(n).arg(ms(t));
    }
}

/// `count` ≥ 1 (the server's rule, checked before any call).
pub fn count(n: u64) -> Result<u64> {
    if n == 0 {
        return Err(Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Client,
            "hashlock-client: a permit count must be >= 1",
        ))));
    }
    Ok(n)
}

fn unexpected(what: &str, v: &Value) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        format!("expected {what}, got {v:?}"),
    )))
}

fn text(v: &Value) -> Result<String> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::VerbatimString { text, .. } => Ok(text.clone()),
        _ => Err(unexpected("a string", v)),
    }
}

/// A map reply (RESP3) or a flat field/value array (RESP2) as pairs.
fn pairs(v: &Value) -> Result<Option<Vec<(String, &Value)>>> {
    let raw: Vec<(&Value, &Value)> = match v {
        Value::Nil => return Ok(None),
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(a) if a.len() % 2 == 0 => a.chunks(2).map(|p| (&p[0], &p[1])).collect(),
        _ => return Err(unexpected("a map", v)),
    };
    raw.into_iter()
        .map(|(k, v)| Ok((text(k)?, v)))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn field<'a>(pairs: &[(String, &'a Value)], name: &str, whole: &Value) -> Result<&'a Value> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| unexpected(name, whole))
}

// -- semaphores -------------------------------------------------------------

pub fn sem_create_cmd(name: &str, permits: u64) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.CREATE");
    c.arg(name).arg(permits);
    c
}

pub fn sem_acquire_cmd(name: &str, n: u64, wait: Wait, opts: &Options) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.ACQUIRE");
    c.arg(name).arg("COUNT").arg(n);
    block(&mut c, wait);
    replicas(&mut c, opts);
    c
}

pub fn sem_release_cmd(name: &str, n: u64) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.RELEASE");
    c.arg(name).arg("COUNT").arg(n);
    c
}

/// Always with a lease (PX) and, for a wait, KEEPALIVE (see
/// `protocol::untie_cmd`).
pub fn sem_lease_cmd(name: &str, n: u64, wait: Wait, keepalive: bool, opts: &Options) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.LEASE");
    c.arg(name)
        .arg("COUNT")
        .arg(n)
        .arg("PX")
        .arg(ms(opts.lease));
    block(&mut c, wait);
    if keepalive {
        c.arg("KEEPALIVE");
    }
    replicas(&mut c, opts);
    c
}

pub fn sem_return_cmd(name: &str, ids: &[String]) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.RETURN");
    c.arg(name);
    for id in ids {
        c.arg(id);
    }
    c
}

/// One renew per id (each answers 1 while leased). `untie`: no REPLICAS
/// (the grant itself was acknowledged as asked).
pub fn sem_renew_cmd(name: &str, id: &str, opts: &Options, keepalive: bool, untie: bool) -> Cmd {
    let mut c = redis::cmd("SEMAPHORE.RENEW");
    c.arg(name).arg(id).arg("PX").arg(ms(opts.lease));
    if keepalive {
        c.arg("KEEPALIVE");
    }
    if untie {
        c.arg("REPLICAS").arg(0).arg(1000);
    } else {
        replicas(&mut c, opts);
    }
    c
}

pub fn parse_ids(v: &Value) -> Result<Option<Vec<String>>> {
    match v {
        Value::Nil => Ok(None),
        Value::Array(items) => items.iter().map(text).collect::<Result<_>>().map(Some),
        _ => Err(unexpected("an array of permit ids", v)),
    }
}

/// SEMAPHORE.INFO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemaphoreInfo {
    pub available: i64,
    /// Leased permits that have not lapsed.
    pub leased: u64,
    pub waiters: u64,
    /// Leased permits tied to a connection.
    pub keepalive: u64,
    /// ms; -1 = no expiry.
    pub ttl_ms: i64,
}

pub fn parse_sem_info(v: &Value) -> Result<Option<SemaphoreInfo>> {
    let Some(f) = pairs(v)? else { return Ok(None) };
    let get = |n: &str| field(&f, n, v).and_then(p::int);
    Ok(Some(SemaphoreInfo {
        available: get("available")?,
        leased: get("leased")? as u64,
        waiters: get("waiters")? as u64,
        keepalive: get("keepalive")? as u64,
        ttl_ms: get("ttl")?,
    }))
}

// -- read-write locks -------------------------------------------------------

/// READ or WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "READ",
            Mode::Write => "WRITE",
        }
    }
}

pub fn rw_acquire_cmd(
    name: &str,
    owner: &str,
    mode: Mode,
    opts: &Options,
    keepalive: bool,
    wait: Wait,
) -> Cmd {
    let mut c = redis::cmd("RWLOCK.ACQUIRE");
    c.arg(name)
        .arg(owner)
        .arg(mode.as_str())
        .arg("PX")
        .arg(ms(opts.lease));
    block(&mut c, wait);
    if keepalive {
        c.arg("KEEPALIVE");
    }
    if opts.token && mode == Mode::Write {
        c.arg("TOKEN");
    }
    replicas(&mut c, opts);
    c
}

pub fn rw_release_cmd(name: &str, owner: &str, mode: Mode) -> Cmd {
    let mut c = redis::cmd("RWLOCK.RELEASE");
    c.arg(name).arg(owner).arg(mode.as_str());
    c
}

pub fn rw_renew_cmd(name: &str, owner: &str, opts: &Options, keepalive: bool, untie: bool) -> Cmd {
    let mut c = redis::cmd("RWLOCK.RENEW");
    c.arg(name).arg(owner).arg("PX").arg(ms(opts.lease));
    if keepalive {
        c.arg("KEEPALIVE");
    }
    if untie {
        c.arg("REPLICAS").arg(0).arg(1000);
    } else {
        replicas(&mut c, opts);
    }
    c
}

/// RWLOCK.INFO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RwLockInfo {
    /// "read" or "write".
    pub mode: String,
    pub writer: Option<String>,
    pub write_holds: u64,
    /// Distinct reader owners.
    pub readers: u64,
    pub read_holds: u64,
    pub ttl_ms: i64,
    pub waiters: u64,
    /// Owners whose holds are tied to a connection.
    pub keepalive: u64,
}

pub fn parse_rw_info(v: &Value) -> Result<Option<RwLockInfo>> {
    let Some(f) = pairs(v)? else { return Ok(None) };
    let get = |n: &str| field(&f, n, v).and_then(p::int);
    let writer = match field(&f, "writer", v)? {
        Value::Nil => None,
        w => Some(text(w)?),
    };
    Ok(Some(RwLockInfo {
        mode: text(field(&f, "mode", v)?)?,
        writer,
        write_holds: get("writeholds")? as u64,
        readers: get("readers")? as u64,
        read_holds: get("readholds")? as u64,
        ttl_ms: get("ttl")?,
        waiters: get("waiters")? as u64,
        keepalive: get("keepalive")? as u64,
    }))
}

// -- multi-key locks --------------------------------------------------------

pub fn macquire_cmd(
    names: &[String],
    owner: &str,
    opts: &Options,
    keepalive: bool,
    wait: Wait,
) -> Cmd {
    let mut c = redis::cmd("LOCK.MACQUIRE");
    c.arg(names.len())
        .arg(names)
        .arg(owner)
        .arg("PX")
        .arg(ms(opts.lease));
    block(&mut c, wait);
    if keepalive {
        c.arg("KEEPALIVE");
    }
    replicas(&mut c, opts);
    c
}

pub fn mrelease_cmd(names: &[String], owner: &str) -> Cmd {
    let mut c = redis::cmd("LOCK.MRELEASE");
    c.arg(names.len()).arg(names).arg(owner);
    c
}

/// An array of integers (MACQUIRE/MRELEASE); None for nil.
pub fn parse_counts(v: &Value) -> Result<Option<Vec<u64>>> {
    match v {
        Value::Nil => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|i| p::int(i).map(|n| n as u64))
            .collect::<Result<_>>()
            .map(Some),
        _ => Err(unexpected("an array of hold counts", v)),
    }
}

/// LOCK.RENEW for each key of a multi-lock (1 while held).
pub fn mrenew_cmds(
    names: &[String],
    owner: &str,
    opts: &Options,
    keepalive: bool,
    untie: bool,
) -> Vec<Cmd> {
    names
        .iter()
        .map(|n| {
            if untie {
                p::untie_cmd(n, owner, opts)
            } else {
                p::renew_cmd(n, owner, opts, keepalive)
            }
        })
        .collect()
}

// -- latches ----------------------------------------------------------------

pub fn latch_create_cmd(name: &str, count: u64) -> Cmd {
    let mut c = redis::cmd("LATCH.CREATE");
    c.arg(name).arg(count);
    c
}

pub fn latch_await_cmd(name: &str, wait: Wait) -> Cmd {
    let mut c = redis::cmd("LATCH.AWAIT");
    c.arg(name);
    block(&mut c, wait);
    c
}

pub fn simple(name: &str, command: &str) -> Cmd {
    let mut c = redis::cmd(command);
    c.arg(name);
    c
}
