//! Takes a lock (KEEPALIVE, the default) and holds it until killed:
//! `cargo run --example hold -- <port> <key> [lease ms]`. The client tests
//! SIGKILL it to show the server releasing a dead holder's lock at once.

use std::time::Duration;

use hashlock_client::Options;
use hashlock_client::sync::Lock;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port = args.next().ok_or("usage: hold <port> <key> [lease ms]")?;
    let key = args.next().ok_or("usage: hold <port> <key> [lease ms]")?;
    let lease_ms: u64 = args.next().map_or(Ok(30_000), |s| s.parse())?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let lock = Lock::new(
        client,
        key,
        Options::default().lease(Duration::from_millis(lease_ms)),
    );
    let _held = lock.try_acquire()?.into_guard().ok_or("the lock is busy")?;
    println!("held");
    std::thread::sleep(Duration::from_secs(600));
    Ok(())
}
