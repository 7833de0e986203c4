//! B16 leader election: the leader is a PROCESS of its own (this binary as
//! `__holder`) and is killed with SIGKILL while other candidates wait and
//! an observer watches. Measured per kill, from just before `kill(2)`:
//! (a) the new leader knows it leads: its campaign returns;
//! (b) an observer knows who leads: it receives an event and reads the
//!     holder.
//!
//! - hashlock: candidates campaign with `LOCK.ACQUIRE key id PX 30000
//!   BLOCK 0 KEEPALIVE TOKEN` (the token is the term); the observer is
//!   subscribed to the key's keyspace channel (lifecycle events, class `d`,
//!   turned on for this workload and restored after) and reads `LOCK.INFO`
//!   at each event. Terms must grow from one leader to the next.
//! - Redisson-style RLock with a watchdog: the leader renews its lease every
//!   third of it from inside the process (the renewals die with it); the
//!   candidates wait Redisson's way (EVAL + pub/sub, sleeping up to the
//!   PTTL: nothing is published when a lease lapses); the observer does the
//!   same (the unlock message or the PTTL), then reads the hash until a new
//!   owner shows. Measured with a short lease; Redisson's default is 30 s
//!   renewed every 10 s.
//!
//! A new leader before the kill would be two leaders: counted ("early").

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use futures_util::{FutureExt, StreamExt};
use hdrhistogram::Histogram;
use redis::Value;
use redis::aio::MultiplexedConnection;

use super::contender::{Contender, MAX_WAIT, Waiter};
use super::holder::{self, Mode};
use crate::conn;
use crate::timing;
use testkit::rng::Rng;

/// Terms' lease with KEEPALIVE: far longer than any measured delay.
const TERM_LEASE: Duration = Duration::from_secs(30);
/// Candidates' lease in the watchdog variant once they lead (they let go at once).
const WAITER_LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Hashlock,
    Watchdog(Duration),
}

impl Variant {
    pub fn label(self) -> String {
        match self {
            Variant::Hashlock => {
                "hashlock Election (KEEPALIVE BLOCK TOKEN; observer: keyspace events + LOCK.INFO)"
                    .into()
            }
            Variant::Watchdog(l) => format!(
                "Redisson-style RLock + watchdog: lease {} renewed every {} (Redisson default: 30 s / 10 s)",
                timing::fmt_duration(l),
                timing::fmt_duration(l / 3)
            ),
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::Hashlock => "hashlock",
            Variant::Watchdog(_) => "watchdog",
        }
    }
}

pub struct Row {
    pub variant: Variant,
    pub candidates: usize,
    /// Kill → the new leader's campaign returned.
    pub leader: Histogram<u64>,
    /// Kill → the observer has read the new leader.
    pub observer: Histogram<u64>,
    /// New leaders seen before the kill (must be 0).
    pub early: u64,
    /// hashlock: every new leader's term was greater than the killed one's.
    pub terms_grow: bool,
}

/// Kills the child (SIGKILL) however the trial ends.
struct Leader(Child);

impl Drop for Leader {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn run(
    port: u16,
    exe: &Path,
    admin: &mut MultiplexedConnection,
    variant: Variant,
    candidates: usize,
    kills: usize,
    seed: u64,
) -> Result<Row> {
    let mut row = Row {
        variant,
        candidates,
        leader: timing::histogram(),
        observer: timing::histogram(),
        early: 0,
        terms_grow: true,
    };
    // The lifecycle events, for this workload only.
    let before = config_get(admin, "notify-keyspace-events").await?;
    set_events(admin, "Kd").await?;
    let outcome = trials(port, exe, admin, variant, kills, seed, &mut row).await;
    set_events(admin, &before).await?;
    outcome?;
    Ok(row)
}

async fn trials(
    port: u16,
    exe: &Path,
    admin: &mut MultiplexedConnection,
    variant: Variant,
    kills: usize,
    seed: u64,
    row: &mut Row,
) -> Result<()> {
    let key = format!("b16:{}:{}", variant.slug(), seed);
    let mut rng = Rng::new(seed);
    let limit = match variant {
        Variant::Hashlock => MAX_WAIT,
        Variant::Watchdog(l) => l * 3 + MAX_WAIT,
    };
    // A watchdog leader whose lease ran out before the kill (this machine
    // delayed its renewal) is no sample: such a trial is run again, up to
    // three times the kills in all. For hashlock an early leader would be
    // two leaders: counted, and reported as such.
    let mut trial = 0;
    while (row.leader.len() as usize) < kills && trial < kills * 3 {
        trial += 1;
        let t = match variant {
            Variant::Hashlock => {
                tokio::time::timeout(
                    limit,
                    hashlock_trial(port, exe, admin, &key, row.candidates, trial),
                )
                .await
            }
            Variant::Watchdog(lease) => {
                tokio::time::timeout(
                    limit,
                    watchdog_trial(port, exe, &key, lease, row.candidates, trial, &mut rng),
                )
                .await
            }
        }
        .with_context(|| {
            format!(
                "B16 {} kill {trial} did not finish within {limit:?}",
                variant.slug()
            )
        })??;
        if t.elected < t.killed || t.observed < t.killed {
            row.early += 1;
            continue;
        }
        if !t.terms_grow {
            row.terms_grow = false;
        }
        timing::record(&mut row.leader, Duration::from_nanos(t.elected - t.killed));
        timing::record(
            &mut row.observer,
            Duration::from_nanos(t.observed - t.killed),
        );
    }
    Ok(())
}

/// One kill's instants (CLOCK_MONOTONIC ns).
struct Trial {
    killed: u64,
    elected: u64,
    observed: u64,
    terms_grow: bool,
}

fn spawn_leader(
    exe: &Path,
    port: u16,
    key: &str,
    owner: &str,
    mode: Mode,
    lease: Duration,
) -> Result<(Leader, Option<i64>)> {
    let mut child = Command::new(exe)
        .args(holder::args(port, key, owner, mode, lease))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("spawning the leader {}", exe.display()))?;
    let stdout = child.stdout.take().context("leader stdout")?;
    let leader = Leader(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the leader's first line")?;
    let f: Vec<&str> = line.split_whitespace().collect();
    match (mode, f.as_slice()) {
        (Mode::Campaign, ["elected", term, _]) => Ok((leader, term.parse().ok())),
        (Mode::Watchdog, ["ready"]) => Ok((leader, None)),
        _ => bail!("leader for {key} did not take it (said {line:?})"),
    }
}

async fn hashlock_trial(
    port: u16,
    exe: &Path,
    admin: &mut MultiplexedConnection,
    key: &str,
    candidates: usize,
    trial: usize,
) -> Result<Trial> {
    let channel = format!("__keyspace@0__:{key}");
    let (mut sink, mut events) = conn::pubsub(port).await?.split();
    sink.subscribe(&channel).await.context("SUBSCRIBE")?;
    let mut observer = conn::connect(port).await?;
    let (leader, term) = spawn_leader(
        exe,
        port,
        key,
        &format!("leader-{trial}"),
        Mode::Campaign,
        TERM_LEASE,
    )?;
    let old_term = term.context("the leader's term")?;
    // The candidates queue behind the leader, each on its own connection.
    let mut conns = try_join_all((0..candidates).map(|_| conn::connect(port))).await?;
    let mut ids = Vec::new();
    for c in conns.iter_mut() {
        let id = conn::call(c, redis::cmd("CLIENT").arg("ID")).await?;
        ids.push(match id {
            Value::Int(n) => n,
            other => bail!("CLIENT ID: {other:?}"),
        });
    }
    let owners: Vec<String> = (0..candidates)
        .map(|i| format!("candidate-{trial}-{i}"))
        .collect();
    // Queued in this order: each campaign is sent once the one before waits.
    let mut campaigns: Vec<tokio::task::JoinHandle<Result<Value>>> = Vec::new();
    for (i, (c, owner)) in conns.iter().zip(&owners).enumerate() {
        let mut cmd = redis::cmd("LOCK.ACQUIRE");
        cmd.arg(key)
            .arg(owner)
            .arg("PX")
            .arg(TERM_LEASE.as_millis() as u64)
            .arg("BLOCK")
            .arg(0)
            .arg("KEEPALIVE")
            .arg("TOKEN");
        let mut c = c.clone();
        campaigns.push(tokio::spawn(async move { conn::call(&mut c, &cmd).await }));
        let started = Instant::now();
        while waiters(admin, key).await? < i as i64 + 1 {
            if started.elapsed() > Duration::from_secs(10) {
                bail!("B16: candidate {owner} did not queue");
            }
            timing::sleep(Duration::from_millis(1)).await;
        }
    }
    // The leader's own events are behind us.
    while let Some(Some(_)) = events.next().now_or_never() {}
    let mut leader = leader;
    let killed = timing::monotonic_ns();
    let _ = leader.0.kill();
    let first = owners[0].clone();
    let elected_at: Cell<u64> = Cell::new(0);
    let new_term: Cell<i64> = Cell::new(0);
    // (a) the head of the queue's campaign returns.
    let elect = async {
        let reply = (&mut campaigns[0]).await.context("the campaign task")??;
        elected_at.set(timing::monotonic_ns());
        match reply {
            Value::Array(a) => match a.as_slice() {
                [Value::Int(1), Value::Int(t)] => new_term.set(*t),
                _ => bail!("campaign reply {a:?}"),
            },
            other => bail!("campaign reply {other:?}"),
        }
        anyhow::Ok(())
    };
    // (b) the observer: an event, then LOCK.INFO names the new leader.
    let observe = async {
        loop {
            let Some(_msg) = events.next().await else {
                bail!("the observer's subscription ended");
            };
            let info = conn::call(&mut observer, redis::cmd("LOCK.INFO").arg(key)).await?;
            if owner_of(&info).as_deref() == Some(first.as_str()) {
                return anyhow::Ok(timing::monotonic_ns());
            }
        }
    };
    let ((), observed) = tokio::try_join!(elect, observe)?;
    let _ = leader.0.wait();
    // Done: the candidates' connections close (their ties release the key).
    for id in ids {
        let _ = conn::call(admin, redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id)).await;
    }
    for c in campaigns {
        c.abort();
    }
    drop(conns);
    let started = Instant::now();
    while owner_of(&conn::call(admin, redis::cmd("LOCK.INFO").arg(key)).await?).is_some() {
        if started.elapsed() > Duration::from_secs(10) {
            bail!("B16: {key} still held after the trial");
        }
        timing::sleep(Duration::from_millis(1)).await;
    }
    Ok(Trial {
        killed,
        elected: elected_at.get(),
        observed,
        terms_grow: new_term.get() > old_term,
    })
}

async fn watchdog_trial(
    port: u16,
    exe: &Path,
    key: &str,
    lease: Duration,
    candidates: usize,
    trial: usize,
    rng: &mut Rng,
) -> Result<Trial> {
    let mut others = try_join_all((0..candidates).map(|i| {
        Contender::connect(
            port,
            Waiter::Redisson,
            key,
            format!("candidate-{trial}-{i}"),
            WAITER_LEASE,
        )
    }))
    .await?;
    let (mut sink, mut unlocks) = conn::pubsub(port).await?.split();
    sink.subscribe(crate::scripts::channel(key))
        .await
        .context("SUBSCRIBE")?;
    let mut observer = conn::connect(port).await?;
    let old = format!("leader-{trial}");
    let (mut leader, _) = spawn_leader(exe, port, key, &old, Mode::Watchdog, lease)?;
    let taken = Instant::now();
    // Killed after it renewed a few times, at a random moment of its lease.
    let kill_after = lease + lease.mul_f64(rng.below(1000) as f64 / 1000.0);
    let killed: Cell<u64> = Cell::new(0);
    let elected: Cell<u64> = Cell::new(0);
    let seen: Cell<bool> = Cell::new(false);
    let waiting = try_join_all(others.iter_mut().map(|c| async {
        c.lock().await?;
        if elected.get() == 0 {
            elected.set(timing::monotonic_ns());
        }
        // It leads until the observer has seen it.
        while !seen.get() {
            timing::sleep(Duration::from_millis(1)).await;
        }
        c.unlock().await?;
        c.finish().await
    }));
    let kill = async {
        timing::sleep(Duration::from_millis(20)).await; // the candidates are subscribed
        timing::sleep_until(taken + kill_after).await;
        killed.set(timing::monotonic_ns());
        let _ = leader.0.kill();
        let _ = leader.0.wait();
        anyhow::Ok(())
    };
    // The observer, Redisson's way: it reads the hash; while the old
    // leader holds it, it waits for the unlock message or the PTTL (a lapse
    // publishes nothing); while nobody does, it looks again in 1 ms.
    let observe = async {
        loop {
            let owners = conn::call(&mut observer, redis::cmd("HKEYS").arg(key)).await?;
            let owner = match &owners {
                Value::Array(a) => match a.first() {
                    Some(Value::BulkString(o)) => Some(o.clone()),
                    _ => None,
                },
                _ => None,
            };
            match owner {
                Some(o) if o.as_slice() != old.as_bytes() => {
                    let at = timing::monotonic_ns();
                    seen.set(true);
                    return anyhow::Ok(at);
                }
                Some(_) => {
                    let pttl = match conn::call(&mut observer, redis::cmd("PTTL").arg(key)).await? {
                        Value::Int(n) if n > 0 => n as u64,
                        _ => 1,
                    };
                    let _ = tokio::time::timeout(Duration::from_millis(pttl), unlocks.next()).await;
                }
                None => timing::sleep(Duration::from_millis(1)).await,
            }
        }
    };
    let (_, (), observed) = tokio::try_join!(waiting, kill, observe)?;
    let _ = conn::call(&mut observer, redis::cmd("DEL").arg(key)).await;
    Ok(Trial {
        killed: killed.get(),
        elected: elected.get(),
        observed,
        terms_grow: true,
    })
}

/// LOCK.INFO's owner (RESP2 flat array); None when free.
fn owner_of(info: &Value) -> Option<String> {
    let Value::Array(flat) = info else {
        return None;
    };
    flat.chunks_exact(2)
        .find(|kv| matches!(&kv[0], Value::BulkString(b) if b == b"owner"))
        .and_then(|kv| match &kv[1] {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
}

async fn waiters(admin: &mut MultiplexedConnection, key: &str) -> Result<i64> {
    let info = conn::call(admin, redis::cmd("LOCK.INFO").arg(key)).await?;
    let Value::Array(flat) = info else {
        return Ok(0);
    };
    Ok(flat
        .chunks_exact(2)
        .find(|kv| matches!(&kv[0], Value::BulkString(b) if b == b"waiters"))
        .and_then(|kv| match kv[1] {
            Value::Int(n) => Some(n),
            _ => None,
        })
        .unwrap_or(0))
}

async fn config_get(admin: &mut MultiplexedConnection, name: &str) -> Result<String> {
    match conn::call(admin, redis::cmd("CONFIG").arg("GET").arg(name)).await? {
        Value::Array(a) if a.len() == 2 => match &a[1] {
            Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
            other => bail!("CONFIG GET {name}: {other:?}"),
        },
        other => bail!("CONFIG GET {name}: {other:?}"),
    }
}

async fn set_events(admin: &mut MultiplexedConnection, flags: &str) -> Result<()> {
    let v = conn::call(
        admin,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags),
    )
    .await?;
    conn::expect_ok(&v, "CONFIG SET notify-keyspace-events")
}
