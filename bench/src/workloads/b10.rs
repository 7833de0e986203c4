//! B10 queued locks sharing one deadline: N held locks, each with one
//! waiter blocked on its own connection, whose leases all end in the same
//! millisecond. The module hands every one on at that deadline. With one
//! server timer per queued key (hashlock before its deadline scheduler),
//! Redis's timer table probed quadratically: 16,000 such keys took 11.5 s
//! of server time and stalled PING for 2.9 s. Reported: server CPU from just
//! before the deadline until the last waiter has its reply, arming included
//! separately (moving N deadlines schedules N hand-ons), and the PING round
//! trips of a probe meanwhile (max, p99.9, and how many exceeded 50 ms).
//!
//! N is limited by the open-file limit: every waiter is a connection, held
//! by this process and by the server. Its own server, pinned like the
//! benchmark's; server and probe at real-time priority when allowed (as B9).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use testkit::{Client, Kind, Reply, Server};

use super::b9::{Probe, probe, realtime_pid};

/// A round trip longer than this counts as a stall (the bound).
pub const STALL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct Config {
    /// Queued keys wanted (fewer if the open-file limit does not allow it).
    pub keys: usize,
}

pub struct Outcome {
    /// Queued keys measured.
    pub keys: usize,
    /// Server CPU to move every deadline to the shared one (arming).
    pub arm_cpu: f64,
    /// Server CPU from just before the deadline to the last grant.
    pub hand_on_cpu: f64,
    /// The deadline → the last waiter's reply read (client side).
    pub last_grant: Duration,
    pub probe: Probe,
    /// Open-file limit that capped `keys`, if it did.
    pub capped_by: Option<u64>,
    pub realtime: Result<(), String>,
}

fn cpu_seconds(c: &mut Client) -> Result<f64> {
    let info = c.cmd(&["INFO", "cpu"]);
    let text = String::from_utf8_lossy(info.as_bytes()).into_owned();
    let field = |f: &str| -> Result<f64> {
        testkit::info_value(&text, f)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no {f} in INFO cpu"))
    };
    Ok(field("used_cpu_user")? + field("used_cpu_sys")?)
}

fn server_ms(c: &mut Client) -> Result<i64> {
    let t = c.cmd(&["TIME"]);
    let part = |i: usize| -> Result<i64> {
        t.as_array()
            .get(i)
            .and_then(|p| p.as_str().parse().ok())
            .ok_or_else(|| anyhow::anyhow!("TIME replied {t:?}"))
    };
    Ok(part(0)? * 1000 + part(1)? / 1000)
}

pub fn run(kind: Kind, server_cpu: Option<usize>, cfg: &Config) -> Result<Outcome> {
    // Each waiter is a connection here and in the server (which inherits
    // this process's limit); keep ~100 descriptors for everything else.
    let limit = testkit::raise_fd_limit(cfg.keys as u64 + 200);
    let keys = cfg.keys.min(limit.saturating_sub(200) as usize);
    let capped_by = (keys < cfg.keys).then_some(limit);
    let server = std::panic::catch_unwind(|| {
        Server::builder(kind)
            .config("maxclients", (keys + 100).to_string())
            .config("io-threads", "1")
            .start()
    })
    .map_err(|_| anyhow::anyhow!("starting the B10 server failed (details above)"))?;
    if let Some(cpu) = server_cpu {
        crate::setup::pin_process(server.pid(), cpu)?;
    }
    let realtime = realtime_pid(server.pid());
    let port = server.port;
    let mut admin = Client::connect(port);
    admin.set_timeout(Some(Duration::from_secs(60)));
    let far = server_ms(&mut admin)? + 3_600_000;
    for i in 0..keys {
        admin.send(&["HSET", &key(i), "holder", "1"]);
        admin.send(&["PEXPIREAT", &key(i), &far.to_string()]);
    }
    for _ in 0..2 * keys {
        admin.read_reply();
    }
    let mut waiters: Vec<Client> = (0..keys)
        .map(|i| {
            let mut c = Client::connect(port);
            c.send(&["LOCK.ACQUIRE", &key(i), "w", "PX", "60000", "BLOCK", "0"]);
            c
        })
        .collect();
    let started = Instant::now();
    loop {
        let info = admin.cmd(&["INFO", "lock"]);
        let text = String::from_utf8_lossy(info.as_bytes()).into_owned();
        if testkit::info_value(&text, "lock_waiting") == Some(&keys.to_string()) {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("waiters not queued: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // Arm: every deadline moved to the same millisecond, 3 s from now.
    let cpu0 = cpu_seconds(&mut admin)?;
    let deadline = server_ms(&mut admin)? + 3000;
    for i in 0..keys {
        admin.send(&["PEXPIREAT", &key(i), &deadline.to_string()]);
    }
    for i in 0..keys {
        let r = admin.read_reply();
        if r != Reply::Int(1) {
            bail!("PEXPIREAT {}: {r:?}", key(i));
        }
    }
    // Let the arming jobs run, then measure from just before the deadline.
    let wait = deadline - server_ms(&mut admin)? - 300;
    std::thread::sleep(Duration::from_millis(wait.max(0) as u64));
    let cpu1 = cpu_seconds(&mut admin)?;
    let stop = Arc::new(AtomicBool::new(false));
    // A PING a millisecond (not back to back as B9's: its CPU would count
    // as the hand-on's).
    let probing = probe(
        port,
        stop.clone(),
        Duration::MAX,
        STALL,
        Duration::from_millis(1),
    );
    for w in waiters.iter_mut() {
        w.set_timeout(Some(Duration::from_secs(60)));
        let r = w.read_reply();
        if r != Reply::Int(1) {
            bail!("a waiter was answered {r:?}");
        }
    }
    let last_ms = server_ms(&mut admin)?;
    let cpu2 = cpu_seconds(&mut admin)?;
    stop.store(true, Ordering::Relaxed);
    let probe = probing
        .join()
        .map_err(|_| anyhow::anyhow!("probe thread panicked"))?;
    Ok(Outcome {
        keys,
        arm_cpu: cpu1 - cpu0,
        hand_on_cpu: cpu2 - cpu1,
        last_grant: Duration::from_millis((last_ms - deadline).max(0) as u64),
        probe,
        capped_by,
        realtime,
    })
}

fn key(i: usize) -> String {
    format!("b10:{i:06}")
}
