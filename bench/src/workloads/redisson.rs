//! A Redisson client process (a "JVM") as several of its threads use it,
//! for the family workloads (B12 overselling, B14 writer wait, B15
//! MultiLock): the lock scripts by EVALSHA (Redisson 4.x loads them and
//! sends EVALSHA), one command connection per thread, and ONE pub/sub
//! connection per JVM with Redisson's per-channel entry: the first waiting
//! thread SUBSCRIBEs, the last one to leave UNSUBSCRIBEs (without waiting
//! for it), and an unlock message releases permits of the entry's latch,
//! as `LockPubSub.onMessage` does: `0` wakes ONE waiting thread of the JVM,
//! the read-write channel's `1` wakes all of them. A waiting thread sleeps
//! on that latch for at most the PTTL the script returned (a lapsed lease
//! publishes nothing), or its remaining wait time, then tries again:
//! `RedissonLock.tryLock(waitTime, ...)` / `lock()`.
//!
//! (B3 and B4 keep their own contender, one process per client; the family
//! workloads put every Redisson-style thread in one JVM, which wakes one
//! thread per unlock instead of all of them: the kinder model for Redisson.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use redis::Value;
use redis::aio::{MultiplexedConnection, PubSubSink};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::contender::{MAX_WAIT, uuid_for};
use crate::conn::{self, expect_int};
use crate::scripts::{self, SCRIPTS};
use crate::timing;

/// One channel's entry (`RedissonLockEntry`): the latch and how many of
/// the JVM's threads wait on it.
struct Entry {
    latch: Semaphore,
    subscribers: AtomicUsize,
}

struct Inner {
    id: String,
    sink: PubSubSink,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Serialises SUBSCRIBE/UNSUBSCRIBE of the JVM (Redisson's per-channel
    /// AsyncSemaphore, simplified to one for all channels).
    ops: tokio::sync::Mutex<()>,
}

/// A Redisson client process: its id (the owner prefix) and pub/sub side.
#[derive(Clone)]
pub struct Jvm {
    inner: Arc<Inner>,
    dispatcher: Arc<JoinHandle<()>>,
}

impl Jvm {
    pub async fn connect(port: u16, label: &str) -> Result<Jvm> {
        let (sink, mut stream) = conn::pubsub(port).await?.split();
        let inner = Arc::new(Inner {
            id: uuid_for(label),
            sink,
            entries: Mutex::new(HashMap::new()),
            ops: tokio::sync::Mutex::new(()),
        });
        let weak = Arc::downgrade(&inner);
        let dispatcher = tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                let Some(inner) = weak.upgrade() else { return };
                let channel = msg.get_channel_name().to_string();
                let payload: Vec<u8> = msg.get_payload().unwrap_or_default();
                let entry = inner
                    .entries
                    .lock()
                    .ok()
                    .and_then(|e| e.get(&channel).cloned());
                if let Some(entry) = entry {
                    let all = channel.starts_with("redisson_rwlock:") && payload == b"1";
                    let n = if all {
                        entry.subscribers.load(Ordering::Relaxed).max(1)
                    } else {
                        1
                    };
                    entry.latch.add_permits(n);
                }
            }
        });
        Ok(Jvm {
            inner,
            dispatcher: Arc::new(dispatcher),
        })
    }

    /// A thread of this JVM with its own command connection; its owner
    /// name is `<jvm id>:<thread>`.
    pub async fn thread(&self, port: u16, thread: usize) -> Result<RThread> {
        Ok(RThread {
            jvm: self.clone(),
            conn: conn::connect(port).await?,
            owner: format!("{}:{thread}", self.inner.id),
            request: 0,
        })
    }

    async fn subscribe(&self, channel: &str) -> Result<Arc<Entry>> {
        let _g = self.inner.ops.lock().await;
        let existing = self
            .inner
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("entries lock poisoned"))?
            .get(channel)
            .cloned();
        if let Some(e) = existing {
            e.subscribers.fetch_add(1, Ordering::Relaxed);
            return Ok(e);
        }
        let e = Arc::new(Entry {
            latch: Semaphore::new(0),
            subscribers: AtomicUsize::new(1),
        });
        self.inner
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("entries lock poisoned"))?
            .insert(channel.to_string(), e.clone());
        self.inner
            .sink
            .clone()
            .subscribe(channel)
            .await
            .with_context(|| format!("SUBSCRIBE {channel}"))?;
        Ok(e)
    }

    /// Leaves the channel's entry; the last thread out UNSUBSCRIBEs. The
    /// caller does not wait (Redisson's unsubscribe is asynchronous).
    fn unsubscribe(&self, channel: &str) {
        let inner = self.inner.clone();
        let channel = channel.to_string();
        tokio::spawn(async move {
            let _g = inner.ops.lock().await;
            let last = {
                let Ok(mut entries) = inner.entries.lock() else {
                    return;
                };
                match entries.get(&channel) {
                    Some(e) if e.subscribers.fetch_sub(1, Ordering::Relaxed) == 1 => {
                        entries.remove(&channel);
                        true
                    }
                    _ => false,
                }
            };
            if last {
                let _ = inner.sink.clone().unsubscribe(&channel).await;
            }
        });
    }

    /// Waits until every pending UNSUBSCRIBE went out, so a run ends clean.
    pub async fn finish(&self) {
        for _ in 0..200 {
            let idle = self.inner.entries.lock().map_or(true, |e| e.is_empty());
            if idle {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _g = self.inner.ops.lock().await;
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        if Arc::strong_count(&self.dispatcher) == 1 {
            self.dispatcher.abort();
        }
    }
}

/// What a thread acquires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RLock (tryLockInnerAsync / unlockInnerAsync).
    Lock,
    /// RReadWriteLock.readLock().
    Read,
    /// RReadWriteLock.writeLock().
    Write,
}

/// One thread of a Redisson client.
pub struct RThread {
    jvm: Jvm,
    pub conn: MultiplexedConnection,
    pub owner: String,
    /// Unlock-latch request ids (one per release).
    request: u64,
}

impl RThread {
    /// One script call: None = acquired, Some(pttl) = held by another.
    async fn try_once(&mut self, kind: Kind, key: &str, lease_ms: &str) -> Result<Option<i64>> {
        let c = match kind {
            Kind::Lock => SCRIPTS.acquire.evalsha(&[key], &[lease_ms, &self.owner]),
            Kind::Read => SCRIPTS.rw_read_lock.evalsha(
                &[key, &scripts::rwlock_timeout_prefix(key, &self.owner)],
                &[lease_ms, &self.owner, &format!("{}:write", self.owner)],
            ),
            Kind::Write => SCRIPTS
                .rw_write_lock
                .evalsha(&[key], &[lease_ms, &format!("{}:write", self.owner)]),
        };
        match conn::call(&mut self.conn, &c).await? {
            Value::Nil => Ok(None),
            Value::Int(ttl) => Ok(Some(ttl)),
            other => bail!("Redisson {kind:?} acquire script replied {other:?}"),
        }
    }

    /// `tryLock(wait, lease)` with `Some(wait)`; `lock()` with None (bounded
    /// by [`MAX_WAIT`], an error past it). True when acquired.
    pub async fn acquire(
        &mut self,
        kind: Kind,
        key: &str,
        lease: Duration,
        wait: Option<Duration>,
    ) -> Result<bool> {
        let start = Instant::now();
        let lease_ms = lease.as_millis().to_string();
        if self.try_once(kind, key, &lease_ms).await?.is_none() {
            return Ok(true);
        }
        let limit = start + wait.unwrap_or(MAX_WAIT);
        if Instant::now() >= limit {
            return Ok(false);
        }
        let channel = match kind {
            Kind::Lock => scripts::channel(key),
            Kind::Read | Kind::Write => scripts::rwlock_channel(key),
        };
        let entry = self.jvm.subscribe(&channel).await?;
        let got = loop {
            let Some(ttl) = self.try_once(kind, key, &lease_ms).await? else {
                break true;
            };
            let now = Instant::now();
            if now >= limit {
                break false;
            }
            let until = if ttl >= 0 {
                (now + Duration::from_millis(ttl as u64)).min(limit)
            } else {
                limit
            };
            tokio::select! {
                permit = entry.latch.acquire() => {
                    permit.context("latch closed")?.forget();
                }
                _ = timing::sleep_until(until) => {}
            }
        };
        self.jvm.unsubscribe(&channel);
        if !got && wait.is_none() {
            bail!("Redisson-style lock() of {key} did not succeed within {MAX_WAIT:?}");
        }
        Ok(got)
    }

    /// The release script of `kind`; returns its reply (Lock: 1 freed, 0
    /// still held; Read/Write: 1 = this owner's last hold of the mode).
    /// Read and write releases use Redisson 4.x's unlock latch, which the
    /// client DELs afterwards without waiting, as Redisson does.
    pub async fn release(&mut self, kind: Kind, key: &str, lease: Duration) -> Result<i64> {
        let lease_ms = lease.as_millis().to_string();
        let (c, latch) = match kind {
            Kind::Lock => (
                SCRIPTS.release.evalsha(
                    &[key, &scripts::channel(key)],
                    &[scripts::UNLOCK_MESSAGE, &lease_ms, &self.owner],
                ),
                None,
            ),
            Kind::Read => {
                self.request += 1;
                let latch = scripts::unlock_latch(key, &format!("{}:{}", self.owner, self.request));
                (
                    SCRIPTS.rw_read_unlock.evalsha(
                        &[
                            key,
                            &scripts::rwlock_channel(key),
                            &scripts::rwlock_timeout_prefix(key, &self.owner),
                            &scripts::rwlock_key_prefix(key),
                            &latch,
                        ],
                        &["0", &self.owner, "PUBLISH", scripts::UNLOCK_LATCH_PX],
                    ),
                    Some(latch),
                )
            }
            Kind::Write => {
                self.request += 1;
                let latch = scripts::unlock_latch(key, &format!("{}:{}", self.owner, self.request));
                (
                    SCRIPTS.rw_write_unlock.evalsha(
                        &[key, &scripts::rwlock_channel(key), &latch],
                        &[
                            "1",
                            &lease_ms,
                            &format!("{}:write", self.owner),
                            "PUBLISH",
                            scripts::UNLOCK_LATCH_PX,
                        ],
                    ),
                    Some(latch),
                )
            }
        };
        let v = conn::call(&mut self.conn, &c).await?;
        if let Some(latch) = latch {
            let mut conn = self.conn.clone();
            tokio::spawn(async move {
                let _ = redis::cmd("DEL")
                    .arg(latch)
                    .query_async::<Value>(&mut conn)
                    .await;
            });
        }
        match v {
            Value::Int(n) => Ok(n),
            other => bail!("Redisson {kind:?} release script on {key} replied {other:?}"),
        }
    }

    /// Releases several plain locks at once, as RedissonMultiLock's
    /// `unlock()` does (every member's unlock sent, then all awaited); each
    /// must be this owner's last hold.
    pub async fn release_locks(&mut self, keys: &[&str], lease: Duration) -> Result<()> {
        let lease_ms = lease.as_millis().to_string();
        let calls = keys.iter().map(|key| {
            let c = SCRIPTS.release.evalsha(
                &[key, &scripts::channel(key)],
                &[scripts::UNLOCK_MESSAGE, &lease_ms, &self.owner],
            );
            let mut conn = self.conn.clone();
            async move { conn::call(&mut conn, &c).await }
        });
        for v in futures_util::future::try_join_all(calls).await? {
            expect_int(&v, 1, "Redisson release script")?;
        }
        Ok(())
    }

    /// Releases a hold that must be this owner's last one of its kind
    /// (the read unlock answers 0 when other readers still hold the lock,
    /// 1 when it freed it).
    pub async fn release_last(&mut self, kind: Kind, key: &str, lease: Duration) -> Result<()> {
        let n = self.release(kind, key, lease).await?;
        if kind == Kind::Read && n == 0 {
            return Ok(());
        }
        expect_int(&Value::Int(n), 1, "Redisson release script")
    }
}
