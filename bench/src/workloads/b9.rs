//! B9 KEEPALIVE at scale: N locks tied to one connection with a short
//! lease, so the server renews N locks every third of it. A latency probe
//! (one connection sending PING back to back, each round trip timed) runs
//! while nothing is tied (the floor), while every lock is tied, and while
//! the connection holding them all closes (N releases). Reported: round trip
//! max / p99.9 / p99 per phase and the round trips over 2 ms, the server CPU
//! per renewal (`used_cpu_user + used_cpu_sys` delta ÷ `lock_keepalive_renewed`
//! delta: commandstats never see timer work) and the replication bytes per
//! renewal (`master_repl_offset` delta ÷ renewals; a fake replica reading
//! the stream keeps the backlog fed as a real one would).
//!
//! Its own server (pinned like the benchmark's), so the other workloads'
//! keys and clients do not weigh on it. Synchronous: the probe must not
//! share a thread with anything else. The server and the probe run at
//! real-time priority (SCHED_FIFO) when the system allows it: on a shared
//! machine other processes' time slices would otherwise show up as stalls
//! that are not the server's (the "nothing tied" floor shows what remains).

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use testkit::{Client, Kind, Reply, Server};

use crate::timing;

/// A round trip longer than this counts as a stall (the bound).
pub const STALL: Duration = Duration::from_millis(2);
const BATCH: usize = 1000;

#[derive(Clone, Debug)]
pub struct Config {
    pub locks: usize,
    pub lease: Duration,
    /// Probe time per phase (idle, tied).
    pub window: Duration,
}

/// One probe run: every PING round trip.
pub struct Probe {
    pub rtt: Histogram<u64>,
    pub over_stall: u64,
    pub elapsed: Duration,
}

/// Server counters at one moment.
#[derive(Clone, Copy, Debug)]
struct Counters {
    cpu_secs: f64,
    renewed: u64,
    released: u64,
    offset: u64,
}

pub struct Phase {
    /// None: a quiet window (no probe), for the CPU and byte counts.
    pub probe: Option<Probe>,
    pub elapsed: Duration,
    pub cpu_secs: f64,
    pub renewed: u64,
    pub repl_bytes: u64,
}

impl Phase {
    pub fn renewals_per_sec(&self) -> f64 {
        self.renewed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    /// Server CPU share of one core over the phase.
    pub fn cpu_share(&self) -> f64 {
        self.cpu_secs / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub struct Outcome {
    pub config: Config,
    /// Server and probe ran at SCHED_FIFO (else: why not).
    pub realtime: Result<(), String>,
    pub tie_took: Duration,
    /// Quiet windows (no probe): the server's CPU and replication bytes
    /// with nothing tied, and with everything tied.
    pub idle_quiet: Phase,
    pub tied_quiet: Phase,
    /// Probe windows.
    pub idle: Phase,
    pub tied: Phase,
    /// The holder's connection closes: every lock released.
    pub closing: Phase,
    pub release_took: Duration,
    pub released: u64,
    /// Locks still held by their owner after the tied phase (must be all).
    pub held_after: usize,
}

impl Outcome {
    /// Server µs per renewal over a quiet window: all of the server's CPU
    /// (its cron included) ÷ renewals.
    pub fn us_per_renewal(&self) -> Option<f64> {
        let q = &self.tied_quiet;
        (q.renewed > 0).then(|| q.cpu_secs * 1e6 / q.renewed as f64)
    }
    /// The same, minus what the server uses with nothing tied.
    pub fn us_per_renewal_net(&self) -> Option<f64> {
        let q = &self.tied_quiet;
        let extra = q.cpu_secs - self.idle_quiet.cpu_share() * q.elapsed.as_secs_f64();
        (q.renewed > 0).then(|| extra.max(0.0) * 1e6 / q.renewed as f64)
    }
    pub fn bytes_per_renewal(&self) -> Option<f64> {
        let q = &self.tied_quiet;
        (q.renewed > 0).then(|| q.repl_bytes as f64 / q.renewed as f64)
    }
}

fn counters(c: &mut Client) -> Result<Counters> {
    let text = match c.cmd(&["INFO", "everything"]) {
        Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => bail!("INFO: {other:?}"),
    };
    let num = |f: &str| -> Result<f64> {
        testkit::info_value(&text, f)
            .with_context(|| format!("INFO has no {f}"))?
            .parse::<f64>()
            .with_context(|| format!("INFO {f} is not a number"))
    };
    Ok(Counters {
        cpu_secs: num("used_cpu_user")? + num("used_cpu_sys")?,
        renewed: num("lock_keepalive_renewed")? as u64,
        released: num("lock_keepalive_released")? as u64,
        offset: num("master_repl_offset")? as u64,
    })
}

/// PINGs on its own connection, `pause` apart (zero: back to back), until
/// `stop` or `limit`; a round trip over `stall` counts as a stall. (B10
/// probes with it too.)
pub fn probe(
    port: u16,
    stop: Arc<AtomicBool>,
    limit: Duration,
    stall: Duration,
    pause: Duration,
) -> JoinHandle<Probe> {
    std::thread::spawn(move || {
        let _ = realtime_self();
        let mut c = Client::connect(port);
        let mut rtt = timing::histogram();
        let mut over = 0;
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
            let t = Instant::now();
            c.cmd(&["PING"]);
            let d = t.elapsed();
            if d > stall {
                over += 1;
            }
            timing::record(&mut rtt, d);
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
        Probe {
            rtt,
            over_stall: over,
            elapsed: started.elapsed(),
        }
    })
}

fn phase(admin: &mut Client, port: u16, window: Duration, probing: bool) -> Result<Phase> {
    let before = counters(admin)?;
    let started = Instant::now();
    let probe = if probing {
        let stop = Arc::new(AtomicBool::new(false));
        Some(
            probe(port, stop, window, STALL, Duration::ZERO)
                .join()
                .map_err(|_| anyhow::anyhow!("probe thread panicked"))?,
        )
    } else {
        std::thread::sleep(window);
        None
    };
    let elapsed = started.elapsed();
    let after = counters(admin)?;
    Ok(Phase {
        probe,
        elapsed,
        cpu_secs: after.cpu_secs - before.cpu_secs,
        renewed: after.renewed - before.renewed,
        repl_bytes: after.offset - before.offset,
    })
}

/// A replica that only reads: the primary keeps a backlog and writes every
/// renewal to a replica socket, as with a real one, at no CPU cost to the
/// probe's core.
fn fake_replica(port: u16) -> Client {
    let mut c = Client::connect(port);
    c.send(&["SYNC"]);
    c.read_sync_payload();
    c
}

pub fn run(kind: Kind, server_cpu: Option<usize>, cfg: &Config) -> Result<Outcome> {
    let server = std::panic::catch_unwind(|| {
        Server::builder(kind)
            .config("io-threads", "1")
            // Big enough for a burst of renewals between two reads.
            .config("client-output-buffer-limit", "replica 0 0 0")
            .start()
    })
    .map_err(|_| anyhow::anyhow!("starting the B9 server failed (details above)"))?;
    if let Some(cpu) = server_cpu {
        crate::setup::pin_process(server.pid(), cpu)?;
    }
    let realtime = realtime_pid(server.pid()).and_then(|()| {
        std::thread::spawn(realtime_self)
            .join()
            .map_err(|_| "probe thread panicked".to_string())?
    });
    let port = server.port;
    let mut admin = Client::connect(port);
    let replica = fake_replica(port);
    // Drain the stream in the background.
    let drain_stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let stop = drain_stop.clone();
        let mut stream = replica;
        std::thread::spawn(move || {
            stream.set_timeout(Some(Duration::from_millis(200)));
            let (early, mut sock) = stream.into_parts();
            let mut buf = vec![0u8; 1 << 16];
            let mut total = early.len() as u64;
            while !stop.load(Ordering::Relaxed) {
                match sock.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => total += n as u64,
                    Err(_) => {}
                }
            }
            total
        })
    };

    let idle_quiet = phase(&mut admin, port, cfg.window, false)?;
    let idle = phase(&mut admin, port, cfg.window, true)?;

    // Tie every lock to one connection, pipelined.
    let lease_ms = cfg.lease.as_millis().to_string();
    let mut holder = Client::connect(port);
    holder.set_timeout(Some(Duration::from_secs(60)));
    let started = Instant::now();
    for from in (0..cfg.locks).step_by(BATCH) {
        let to = (from + BATCH).min(cfg.locks);
        for i in from..to {
            holder.send(&[
                "LOCK.ACQUIRE",
                &key(i),
                "b9-owner",
                "PX",
                &lease_ms,
                "KEEPALIVE",
            ]);
        }
        for i in from..to {
            let r = holder.read_reply();
            if r != Reply::Int(1) {
                bail!("LOCK.ACQUIRE {} KEEPALIVE: {r:?}", key(i));
            }
        }
    }
    let tie_took = started.elapsed();
    // One lease in, the renewals run in their steady rhythm.
    std::thread::sleep(cfg.lease);
    let tied_quiet = phase(&mut admin, port, cfg.window, false)?;
    let tied = phase(&mut admin, port, cfg.window, true)?;
    let dbsize = admin.cmd(&["DBSIZE"]).as_int() as usize;
    let tied_now: usize = info_field(&mut admin, "lock_tied")?.parse()?;
    let held_after = dbsize.min(tied_now);

    // Close the holder: N releases.
    let before = counters(&mut admin)?;
    let stop = Arc::new(AtomicBool::new(false));
    let probe_handle = probe(
        port,
        stop.clone(),
        Duration::from_secs(120),
        STALL,
        Duration::ZERO,
    );
    std::thread::sleep(Duration::from_millis(200));
    let closed_at = Instant::now();
    drop(holder);
    let mut release_took = Duration::ZERO;
    let mut watcher = Client::connect(port);
    loop {
        let released: u64 = info_field(&mut watcher, "lock_keepalive_released")?.parse()?;
        if released >= before.released + cfg.locks as u64 {
            release_took = closed_at.elapsed();
            break;
        }
        if closed_at.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let probe = probe_handle
        .join()
        .map_err(|_| anyhow::anyhow!("probe thread panicked"))?;
    let after = counters(&mut admin)?;
    let closing = Phase {
        elapsed: probe.elapsed,
        probe: Some(probe),
        cpu_secs: after.cpu_secs - before.cpu_secs,
        renewed: after.renewed - before.renewed,
        repl_bytes: after.offset - before.offset,
    };
    drain_stop.store(true, Ordering::Relaxed);
    let _ = drain.join();
    Ok(Outcome {
        config: cfg.clone(),
        realtime,
        tie_took,
        idle_quiet,
        tied_quiet,
        idle,
        tied,
        closing,
        release_took,
        released: after.released - before.released,
        held_after,
    })
}

/// SCHED_FIFO priority for the server and the probe.
const RT_PRIORITY: i32 = 10;

/// Puts every thread of `pid` at SCHED_FIFO.
pub fn realtime_pid(pid: u32) -> Result<(), String> {
    let out = std::process::Command::new("chrt")
        .args(["-f", "-a", "-p", &RT_PRIORITY.to_string(), &pid.to_string()])
        .output()
        .map_err(|e| format!("chrt: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "chrt: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Puts the calling thread at SCHED_FIFO.
pub fn realtime_self() -> Result<(), String> {
    let param = libc::sched_param {
        sched_priority: RT_PRIORITY,
    };
    // SAFETY: pid 0 = the calling thread; a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sched_setscheduler: {}",
            std::io::Error::last_os_error()
        ))
    }
}

fn info_field(c: &mut Client, field: &str) -> Result<String> {
    let text = match c.cmd(&["INFO", "lock"]) {
        Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => bail!("INFO lock: {other:?}"),
    };
    testkit::info_value(&text, field)
        .map(str::to_string)
        .with_context(|| format!("INFO lock has no {field}"))
}

fn key(i: usize) -> String {
    format!("b9:{i:06}")
}
