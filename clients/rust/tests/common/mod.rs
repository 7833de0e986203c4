//! Shared by the client tests: real servers (testkit: free port, temp dir,
//! module loaded, killed on drop), a redis-rs admin connection, helpers.
#![allow(dead_code, unused_imports)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use hashlock_client::{Error, LockInfo, Options};
pub use testkit::{KINDS, Server, wait_until};

/// Generous: the machine is loaded; what matters is the order of magnitude.
pub const WAIT: Duration = Duration::from_secs(10);

pub fn client(s: &Server) -> redis::Client {
    redis::Client::open(format!("redis://127.0.0.1:{}/", s.port)).expect("client")
}

pub fn admin(s: &Server) -> redis::Connection {
    client(s).get_connection().expect("admin connection")
}

pub fn key(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "lock:{tag}:{}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn info(con: &mut redis::Connection, key: &str) -> Option<LockInfo> {
    let v: redis::Value = redis::cmd("LOCK.INFO")
        .arg(key)
        .query(con)
        .expect("LOCK.INFO");
    hashlock_client::protocol::parse_info(&v).expect("LOCK.INFO reply")
}

pub fn waiters(con: &mut redis::Connection, key: &str) -> u64 {
    info(con, key).map_or(0, |i| i.waiters)
}

pub fn opts(keepalive: bool) -> Options {
    Options::default().keepalive(keepalive)
}

/// Redisson's acquire script (testkit's copy): None = acquired, else PTTL.
pub fn redisson_try_lock(con: &mut redis::Connection, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(testkit::redisson::TRY_LOCK)
        .arg(1)
        .arg(key)
        .arg(30_000)
        .arg(owner)
        .query(con)
        .expect("redisson tryLock")
}

/// Redisson's unlock script: None = not held by owner, 0 = still held, 1 = freed.
pub fn redisson_unlock(con: &mut redis::Connection, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(testkit::redisson::UNLOCK)
        .arg(2)
        .arg(key)
        .arg(testkit::redisson::channel(key.as_bytes()))
        .arg(testkit::redisson::UNLOCK_MESSAGE)
        .arg(30_000)
        .arg(owner)
        .query(con)
        .expect("redisson unlock")
}
