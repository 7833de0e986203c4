//! make bench B11, Rust: one Lock (the default: KEEPALIVE, blocking
//! acquire), acquire + release in a loop (sync on a thread, tokio on a
//! current-thread runtime), for `secs` after a warm-up. Written against the
//! API that did not change with issue 18 (`Lock::new(redis::Client, ..)`,
//! `acquire()`, `release()`), so the same file measures the library before
//! and after (B11 builds it as an example of an older checkout).

use std::time::{Duration, Instant};

use hashlock_client::Options;

const WARMUP: usize = 50;

/// One measurement: pairs, seconds, connections the server accepted
/// meanwhile (counted on a connection opened before the warm-up).
pub type Measured = (u64, f64, u64);

fn received(admin: &mut redis::Connection) -> Result<u64, Box<dyn std::error::Error>> {
    let text: String = redis::cmd("INFO").arg("stats").query(admin)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .ok_or("no total_connections_received")?
        .trim()
        .parse()?)
}

/// Acquire + release on one sync Lock.
pub fn sync_pairs(port: u16, secs: f64) -> Result<Measured, Box<dyn std::error::Error>> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut admin = client.get_connection()?;
    let lock = hashlock_client::sync::Lock::new(client, "bench:b11:rust-sync", Options::default());
    for _ in 0..WARMUP {
        lock.acquire()?.release()?;
    }
    let before = received(&mut admin)?;
    let (mut n, t0) = (0u64, Instant::now());
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        for _ in 0..64 {
            lock.acquire()?.release()?;
            n += 1;
        }
    }
    let took = t0.elapsed().as_secs_f64();
    Ok((n, took, received(&mut admin)? - before))
}

/// Acquire + release on one tokio Lock.
pub fn tokio_pairs(port: u16, secs: f64) -> Result<Measured, Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut admin = client.get_connection()?;
    let (n, took, before) = rt.block_on(async {
        let lock =
            hashlock_client::tokio::Lock::new(client, "bench:b11:rust-tokio", Options::default());
        for _ in 0..WARMUP {
            lock.acquire().await?.release().await?;
        }
        let before = received(&mut admin)?;
        let (mut n, t0) = (0u64, Instant::now());
        while t0.elapsed() < Duration::from_secs_f64(secs) {
            for _ in 0..64 {
                lock.acquire().await?.release().await?;
                n += 1;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>((n, t0.elapsed().as_secs_f64(), before))
    })?;
    Ok((n, took, received(&mut admin)? - before))
}
