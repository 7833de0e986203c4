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
});

pub use testkit::redisson::UNLOCK_MESSAGE;

/// Redisson's channel for a lock (testkit's rule), as a string.
pub fn channel(key: &str) -> String {
    String::from_utf8_lossy(&redisson::channel(key.as_bytes())).into_owned()
}

/// Loads every script (SCRIPT LOAD), so EVALSHA never misses, and checks
/// that the server computes the same SHA1.
pub async fn load(conn: &mut MultiplexedConnection) -> Result<()> {
    let s = &*SCRIPTS;
    for lua in [
        &s.acquire,
        &s.release,
        &s.renew,
        &s.force,
        &s.compare_and_delete,
    ] {
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
