//! One client competing for a lock, the way each variant's users do it.
//! Used by B3 (contended hand-off) and B4 (crashed holder).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::{FutureExt, StreamExt};
use redis::Value;
use redis::aio::{MultiplexedConnection, PubSubSink, PubSubStream};
use tokio::task::JoinHandle;

use crate::conn::{self, expect_int, expect_ok};
use crate::scripts::{self, SCRIPTS};
use crate::timing;

/// No single lock() may take longer than this: every loop is bounded.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How a client waits for a lock it cannot take at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// `LOCK.ACQUIRE key owner PX lease BLOCK ms`: queued server-side, handed
    /// the lock on release (or at the holder's lease deadline).
    Hashlock,
    /// The same with KEEPALIVE (the recommended pattern): tied to the
    /// connection from its grant. Used by B7 only (not in `ALL`).
    HashlockKeepalive,
    /// Redisson's RedissonLock.lock(): acquire script; on failure SUBSCRIBE
    /// to the lock's channel, then retry / wait for the unlock message or the
    /// returned PTTL / retry; UNSUBSCRIBE once acquired. Scripts go as EVAL
    /// with the full text, as Redisson sends them.
    Redisson,
    /// `SET key token NX PX lease`, sleeping this long between attempts;
    /// released by the compare-and-delete script.
    Poll(Duration),
}

impl Waiter {
    pub const ALL: [Waiter; 4] = [
        Waiter::Hashlock,
        Waiter::Redisson,
        Waiter::Poll(Duration::from_millis(1)),
        Waiter::Poll(Duration::from_millis(10)),
    ];

    pub fn label(self) -> String {
        match self {
            Waiter::Hashlock => "hashlock BLOCK".into(),
            Waiter::HashlockKeepalive => "hashlock KEEPALIVE BLOCK".into(),
            Waiter::Redisson => "Redisson-style (EVAL + pub/sub)".into(),
            Waiter::Poll(d) => format!("poll SET NX PX / {} ms", d.as_millis()),
        }
    }

    /// A key-safe short name.
    pub fn slug(self) -> String {
        match self {
            Waiter::Hashlock => "hashlock".into(),
            Waiter::HashlockKeepalive => "keepalive".into(),
            Waiter::Redisson => "redisson".into(),
            Waiter::Poll(d) => format!("poll{}ms", d.as_millis()),
        }
    }
}

/// Redisson's pub/sub side: one connection per client process, kept open;
/// the channel is subscribed for the duration of one lock() call.
struct Subscription {
    sink: PubSubSink,
    stream: PubSubStream,
    /// The UNSUBSCRIBE of the previous lock() call. Redisson does not wait
    /// for it, but orders it before the next SUBSCRIBE of the same channel
    /// (its per-channel semaphore); awaiting it there does the same.
    pending_unsubscribe: Option<JoinHandle<redis::RedisResult<()>>>,
}

pub struct Contender {
    waiter: Waiter,
    conn: MultiplexedConnection,
    sub: Option<Subscription>,
    key: String,
    channel: String,
    owner: String,
    lease_ms: String,
}

impl Contender {
    pub async fn connect(
        port: u16,
        waiter: Waiter,
        key: &str,
        owner: String,
        lease: Duration,
    ) -> Result<Contender> {
        let conn = conn::connect(port).await?;
        let sub = match waiter {
            Waiter::Redisson => {
                let (sink, stream) = conn::pubsub(port).await?.split();
                Some(Subscription {
                    sink,
                    stream,
                    pending_unsubscribe: None,
                })
            }
            _ => None,
        };
        Ok(Contender {
            waiter,
            conn,
            sub,
            key: key.to_string(),
            channel: scripts::channel(key),
            owner,
            lease_ms: lease.as_millis().to_string(),
        })
    }

    /// Takes the lock, waiting as this variant does. Returns how many
    /// requests the client sent.
    pub async fn lock(&mut self) -> Result<u64> {
        let started = Instant::now();
        match self.waiter {
            Waiter::Hashlock | Waiter::HashlockKeepalive => {
                let mut c = redis::cmd("LOCK.ACQUIRE");
                c.arg(&self.key)
                    .arg(&self.owner)
                    .arg("PX")
                    .arg(&self.lease_ms);
                if self.waiter == Waiter::HashlockKeepalive {
                    c.arg("KEEPALIVE");
                }
                c.arg("BLOCK").arg(MAX_WAIT.as_millis() as u64);
                let v = conn::call(&mut self.conn, &c).await?;
                if v == Value::Nil {
                    bail!("LOCK.ACQUIRE ... BLOCK timed out after {MAX_WAIT:?}");
                }
                expect_int(&v, 1, "LOCK.ACQUIRE ... BLOCK")?;
                Ok(1)
            }
            Waiter::Poll(interval) => {
                let mut requests = 0;
                loop {
                    let mut c = redis::cmd("SET");
                    c.arg(&self.key)
                        .arg(&self.owner)
                        .arg("NX")
                        .arg("PX")
                        .arg(&self.lease_ms);
                    let v = conn::call(&mut self.conn, &c).await?;
                    requests += 1;
                    if v != Value::Nil {
                        expect_ok(&v, "SET NX PX")?;
                        return Ok(requests);
                    }
                    if started.elapsed() > MAX_WAIT {
                        bail!("SET NX polling found the lock busy for {MAX_WAIT:?}");
                    }
                    timing::sleep(interval).await;
                }
            }
            Waiter::Redisson => self.lock_redisson(started).await,
        }
    }

    /// Redisson's attempt: None = acquired, Some(pttl) = held by another.
    async fn try_acquire_redisson(&mut self) -> Result<Option<i64>> {
        let c = SCRIPTS
            .acquire
            .eval(&[&self.key], &[&self.lease_ms, &self.owner]);
        match conn::call(&mut self.conn, &c).await? {
            Value::Nil => Ok(None),
            Value::Int(ttl) => Ok(Some(ttl)),
            other => bail!("Redisson acquire script replied {other:?}"),
        }
    }

    async fn lock_redisson(&mut self, started: Instant) -> Result<u64> {
        let mut requests = 1;
        if self.try_acquire_redisson().await?.is_none() {
            return Ok(requests);
        }
        let sub = self
            .sub
            .as_mut()
            .context("Redisson contender without pub/sub")?;
        if let Some(prev) = sub.pending_unsubscribe.take() {
            prev.await
                .context("UNSUBSCRIBE task")?
                .context("UNSUBSCRIBE")?;
        }
        // A fresh subscription starts with no permits: drop unlock messages
        // that arrived for the previous one.
        while let Some(Some(_)) = sub.stream.next().now_or_never() {}
        sub.sink
            .subscribe(&self.channel)
            .await
            .with_context(|| format!("SUBSCRIBE {}", self.channel))?;
        requests += 1;
        loop {
            requests += 1;
            let Some(ttl) = self.try_acquire_redisson().await? else {
                break;
            };
            if started.elapsed() > MAX_WAIT {
                bail!("Redisson-style waiter did not get the lock in {MAX_WAIT:?}");
            }
            // Wait for an unlock message, or at most the holder's PTTL (a
            // lapsed lease publishes nothing). ttl < 0: no expiry, message only.
            let deadline = if ttl >= 0 {
                Instant::now() + Duration::from_millis(ttl as u64)
            } else {
                started + MAX_WAIT
            };
            let sub = self
                .sub
                .as_mut()
                .context("Redisson contender without pub/sub")?;
            tokio::select! {
                msg = sub.stream.next() => {
                    if msg.is_none() {
                        bail!("pub/sub connection closed");
                    }
                }
                _ = timing::sleep_until(deadline) => {}
            }
        }
        // Acquired: unsubscribe without waiting (as Redisson does).
        let sub = self
            .sub
            .as_mut()
            .context("Redisson contender without pub/sub")?;
        let mut sink = sub.sink.clone();
        let channel = self.channel.clone();
        sub.pending_unsubscribe =
            Some(tokio::spawn(async move { sink.unsubscribe(channel).await }));
        requests += 1;
        Ok(requests)
    }

    /// Releases the lock (one request).
    pub async fn unlock(&mut self) -> Result<u64> {
        match self.waiter {
            Waiter::Hashlock | Waiter::HashlockKeepalive => {
                let mut c = redis::cmd("LOCK.RELEASE");
                c.arg(&self.key).arg(&self.owner);
                let v = conn::call(&mut self.conn, &c).await?;
                expect_int(&v, 0, "LOCK.RELEASE")?;
            }
            Waiter::Redisson => {
                let c = SCRIPTS.release.eval(
                    &[&self.key, &self.channel],
                    &[scripts::UNLOCK_MESSAGE, &self.lease_ms, &self.owner],
                );
                let v = conn::call(&mut self.conn, &c).await?;
                expect_int(&v, 1, "Redisson release script")?;
            }
            Waiter::Poll(_) => {
                let c = SCRIPTS
                    .compare_and_delete
                    .evalsha(&[&self.key], &[&self.owner]);
                let v = conn::call(&mut self.conn, &c).await?;
                expect_int(&v, 1, "compare-and-delete")?;
            }
        }
        Ok(1)
    }

    /// Waits for a fire-and-forget UNSUBSCRIBE, so the run ends clean.
    pub async fn finish(&mut self) -> Result<()> {
        if let Some(sub) = self.sub.as_mut()
            && let Some(prev) = sub.pending_unsubscribe.take()
        {
            prev.await
                .context("UNSUBSCRIBE task")?
                .context("UNSUBSCRIBE")?;
        }
        Ok(())
    }
}

/// A Redisson-style owner: `<uuid>:<thread id>`.
pub fn owner(run: &str, client: usize) -> String {
    format!("{}:{client}", uuid_for(run))
}

/// A UUID-shaped token, different per run label and process.
pub fn uuid_for(run: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(run.as_bytes());
    let a = h.finish();
    let mut h2 = std::collections::hash_map::RandomState::new().build_hasher();
    h2.write_u64(a);
    let b = h2.finish();
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        (a >> 32) as u32,
        (a >> 16) as u16,
        (a & 0xfff) as u16,
        (b >> 52) as u16 & 0xfff,
        b & 0xffff_ffff_ffff
    )
}
