//! The Lua the other variants send: Redisson's lock scripts (testkit's, our
//! own text written from Redisson's wire protocol (README, Redisson compatibility), with Redisson's
//! KEYS/ARGV layout), so a run exercises what a Redisson client makes the
//! server do; and the SET NX lock's compare-and-delete.

use std::sync::LazyLock;

use anyhow::{Result, bail};
use redis::aio::MultiplexedConnection;
use testkit::redisson;

/// One script: its text (sent by EVAL) and SHA1 (sent by EVALSHA).
pub struct Lua {
    pub text: &'static str,
    pub sha: String,
}

impl Lua {
    fn new(text: &'static str) -> Lua {
        Lua {
            text,
            sha: redis::Script::new(text).get_hash().to_string(),
        }
    }

    /// `EVALSHA sha numkeys keys... args...`
    pub fn evalsha(&self, keys: &[&str], args: &[&str]) -> redis::Cmd {
        let mut c = redis::cmd("EVALSHA");
        c.arg(&self.sha).arg(keys.len()).arg(keys).arg(args);
        c
    }

    /// `EVAL text numkeys keys... args...` (the full text every time).
    pub fn eval(&self, keys: &[&str], args: &[&str]) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(self.text).arg(keys.len()).arg(keys).arg(args);
        c
    }
}

pub struct Scripts {
    /// tryLockInnerAsync. KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner.
    /// Free or ours → count + 1, lease from now, nil; else the PTTL.
    pub acquire: Lua,
    /// unlockInnerAsync. KEYS[1] lock, KEYS[2] channel; ARGV[1] message,
    /// ARGV[2] lease ms, ARGV[3] owner. Not ours → nil; count - 1; still
    /// held → lease from now, 0; else delete, publish, 1.
    pub release: Lua,
    /// renewExpiration (the watchdog). KEYS[1] lock; ARGV[1] lease ms,
    /// ARGV[2] owner. Ours → lease from now, 1; else 0.
    pub renew: Lua,
    /// forceUnlock. KEYS[1] lock, KEYS[2] channel; ARGV[1] message.
    pub force: Lua,
    /// The SET NX PX lock's release: delete only if the value is still our
    /// token (the compare-and-delete from the seed documents).
    pub compare_and_delete: Lua,
    /// RSemaphore tryAcquire. KEYS[1] semaphore; ARGV[1] permits. 1 / 0.
    pub sem_try_acquire: Lua,
    /// RSemaphore release. KEYS[1] semaphore, KEYS[2] channel; ARGV[1]
    /// permits, ARGV[2] publish command. INCRBY, publish the count; nil.
    pub sem_release: Lua,
    /// RPermitExpirableSemaphore acquire. KEYS[1] semaphore, KEYS[2] lease
    /// set, KEYS[3] channel; ARGV[1] n, ARGV[2] score, ARGV[3] now, ARGV[4]
    /// no-lease score, ARGV[5] publish command, ARGV[6..] ids. `OK` = taken.
    pub expirable_acquire: Lua,
    /// RPermitExpirableSemaphore release of one id. KEYS[1] semaphore,
    /// KEYS[2] channel, KEYS[3] lease set; ARGV[1] id, ARGV[2] `1`, ARGV[3]
    /// now, ARGV[4] publish command. 1 = a live id returned.
    pub expirable_release: Lua,
    /// RReadWriteLock read acquire. KEYS[1] lock, KEYS[2] the owner's
    /// timeout prefix; ARGV[1] lease ms, ARGV[2] owner, ARGV[3]
    /// `<owner>:write`. nil = acquired, else the PTTL.
    pub rw_read_lock: Lua,
    /// RReadWriteLock read release. KEYS[1] lock, KEYS[2] channel, KEYS[3]
    /// timeout prefix, KEYS[4] key prefix, KEYS[5] unlock latch; ARGV[1]
    /// `0`, ARGV[2] owner, ARGV[3] publish command, ARGV[4] latch PX.
    pub rw_read_unlock: Lua,
    /// RReadWriteLock write acquire. KEYS[1] lock; ARGV[1] lease ms,
    /// ARGV[2] `<owner>:write`. nil = acquired, else the PTTL.
    pub rw_write_lock: Lua,
    /// RReadWriteLock write release. KEYS[1] lock, KEYS[2] channel, KEYS[3]
    /// unlock latch; ARGV[1] `1`, ARGV[2] lease ms, ARGV[3]
    /// `<owner>:write`, ARGV[4] publish command, ARGV[5] latch PX.
    pub rw_write_unlock: Lua,
}

pub static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Lua::new(redisson::TRY_LOCK),
    release: Lua::new(redisson::UNLOCK),
    renew: Lua::new(redisson::RENEW),
    force: Lua::new(redisson::FORCE_UNLOCK),
    compare_and_delete: Lua::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then \
           return redis.call('del', KEYS[1]) \
         else \
           return 0 \
         end",
    ),
    sem_try_acquire: Lua::new(redisson::SEMAPHORE_TRY_ACQUIRE),
    sem_release: Lua::new(redisson::SEMAPHORE_RELEASE),
    expirable_acquire: Lua::new(redisson::EXPIRABLE_ACQUIRE),
    expirable_release: Lua::new(redisson::EXPIRABLE_TRY_RELEASE),
    rw_read_lock: Lua::new(redisson::RW_READ_LOCK),
    rw_read_unlock: Lua::new(redisson::RW_READ_UNLOCK),
    rw_write_lock: Lua::new(redisson::RW_WRITE_LOCK),
    rw_write_unlock: Lua::new(redisson::RW_WRITE_UNLOCK),
});

impl Scripts {
    /// Every script, with a short name (`--print-lua NAME` prints its text
    /// for bench/callgrind.sh).
    pub fn all(&self) -> [(&'static str, &Lua); 13] {
        [
            ("lock", &self.acquire),
            ("unlock", &self.release),
            ("renew", &self.renew),
            ("force", &self.force),
            ("compare-and-delete", &self.compare_and_delete),
            ("sem-try-acquire", &self.sem_try_acquire),
            ("sem-release", &self.sem_release),
            ("expirable-acquire", &self.expirable_acquire),
            ("expirable-release", &self.expirable_release),
            ("rw-read-lock", &self.rw_read_lock),
            ("rw-read-unlock", &self.rw_read_unlock),
            ("rw-write-lock", &self.rw_write_lock),
            ("rw-write-unlock", &self.rw_write_unlock),
        ]
    }
}

pub use testkit::redisson::UNLOCK_MESSAGE;

/// Redisson's channel for a lock (testkit's rule), as a string.
pub fn channel(key: &str) -> String {
    String::from_utf8_lossy(&redisson::channel(key.as_bytes())).into_owned()
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

/// `redisson_sc:{name}`: a semaphore's channel.
pub fn semaphore_channel(key: &str) -> String {
    text(redisson::semaphore_channel(key.as_bytes()))
}

/// `{name}:timeout`: an expirable semaphore's lease set.
pub fn semaphore_timeout_key(key: &str) -> String {
    text(redisson::timeout_key(key.as_bytes()))
}

/// `redisson_rwlock:{name}`: a read-write lock's channel.
pub fn rwlock_channel(key: &str) -> String {
    text(redisson::rwlock_channel(key.as_bytes()))
}

/// `{name}:<owner>:rwlock_timeout`: a reader's timeout-key prefix.
pub fn rwlock_timeout_prefix(key: &str, owner: &str) -> String {
    text(redisson::rwlock_timeout_prefix(
        key.as_bytes(),
        owner.as_bytes(),
    ))
}

/// `{name}`: the prefix of every timeout key of a read-write lock.
pub fn rwlock_key_prefix(key: &str) -> String {
    text(redisson::rwlock_key_prefix(key.as_bytes()))
}

/// `redisson_unlock_latch:{name}:<request id>`.
pub fn unlock_latch(key: &str, request: &str) -> String {
    text(redisson::unlock_latch(key.as_bytes(), request.as_bytes()))
}

/// The unlock latch's PX (Redisson passes its client's total retry time;
/// the value does not change what the script costs).
pub const UNLOCK_LATCH_PX: &str = "18000";

/// Loads every script (SCRIPT LOAD), so EVALSHA never misses, and checks
/// that the server computes the same SHA1.
pub async fn load(conn: &mut MultiplexedConnection) -> Result<()> {
    for (_, lua) in SCRIPTS.all() {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(lua.text)
            .query_async(conn)
            .await?;
        if sha != lua.sha {
            bail!("SCRIPT LOAD returned {sha}, expected {}", lua.sha);
        }
    }
    Ok(())
}
