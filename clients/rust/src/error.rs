//! One error type; the module's error codes become variants.

use std::fmt;

use redis::RedisError;

/// What a lock operation can fail with.
#[derive(Debug)]
pub enum Error {
    /// This owner does not hold the lock any more (the server's NOTOWNER on
    /// release, a renew or re-entry that found it gone, a KEEPALIVE
    /// connection that failed): its lease ran out, it was force-released,
    /// or its connection closed. Stop touching what it protected.
    LockLost(String),
    /// The key holds a hash that is not a lock (NOTLOCK).
    NotLock(String),
    /// The key holds a value that is not a hash (WRONGTYPE).
    WrongType(String),
    /// REPLICAS n ms: fewer than n replicas acknowledged in time; the call
    /// was undone (NOREPLICAS).
    NoReplicas(String),
    /// RWLOCK write asked by an owner that holds only read holds
    /// (NOUPGRADE): an upgrade would deadlock; release the read holds first.
    NoUpgrade(String),
    /// The key holds a string that is not a semaphore's count (NOTSEMAPHORE).
    NotSemaphore(String),
    /// The key holds a string that is not a latch's count (NOTLATCH).
    NotLatch(String),
    /// The keys (or a key and what it derives) hash to different cluster
    /// slots (CROSSSLOT): nothing changed.
    CrossSlot(String),
    /// The server's `notify-keyspace-events` does not deliver the module's
    /// lifecycle events an Election observer listens to (it needs `K` and
    /// `d`).
    EventsDisabled(String),
    /// The server does not know LOCK.*: the hashlock module is not loaded
    /// there.
    ModuleNotLoaded(String),
    /// Anything else: connection errors, other server errors.
    Redis(RedisError),
}

/// The server's name for [`Error::LockLost`] on LOCK.RELEASE.
pub const NOT_OWNER: &str = "NOTOWNER";

pub type Result<T> = std::result::Result<T, Error>;

impl From<RedisError> for Error {
    fn from(e: RedisError) -> Self {
        let text = || match e.detail() {
            Some(d) => format!("{} {d}", e.code().unwrap_or_default()),
            None => e.to_string(),
        };
        let unknown_lock_command = e.code() == Some("ERR")
            && e.detail().is_some_and(|d| {
                let d = d.to_ascii_lowercase();
                ["lock.", "semaphore.", "latch.", "rwlock."]
                    .iter()
                    .any(|p| d.starts_with(&format!("unknown command '{p}")))
            });
        if unknown_lock_command {
            return Error::ModuleNotLoaded(format!(
                "the hashlock module is not loaded on this server ({})",
                text()
            ));
        }
        match e.code() {
            Some(NOT_OWNER) => Error::LockLost(text()),
            Some("NOTLOCK") => Error::NotLock(text()),
            Some("WRONGTYPE") => Error::WrongType(text()),
            Some("NOREPLICAS") => Error::NoReplicas(text()),
            Some("NOUPGRADE") => Error::NoUpgrade(text()),
            Some("NOTSEMAPHORE") => Error::NotSemaphore(text()),
            Some("NOTLATCH") => Error::NotLatch(text()),
            Some("CROSSSLOT") => Error::CrossSlot(text()),
            _ => Error::Redis(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LockLost(m) => write!(f, "lock lost: {m}"),
            Error::NotLock(m)
            | Error::WrongType(m)
            | Error::NoReplicas(m)
            | Error::NoUpgrade(m)
            | Error::NotSemaphore(m)
            | Error::NotLatch(m)
            | Error::CrossSlot(m)
            | Error::EventsDisabled(m)
            | Error::ModuleNotLoaded(m) => f.write_str(m),
            Error::Redis(e) => e.fmt(f),
        }
    }
}

impl Error {
    /// True for a failure of the connection itself (I/O, timeout, dropped),
    /// as opposed to an answer from the server.
    pub fn is_connection_failure(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_unrecoverable_error()
            }
            _ => false,
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}
