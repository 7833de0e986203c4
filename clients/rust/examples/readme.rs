//! The README's examples as a program (tests/readme.rs checks that every
//! line of them is here, and runs it): `cargo run --example readme -- 6380`.

use hashlock_client::sync::{Latch, MultiLock, ReadWriteLock, Semaphore};
use hashlock_client::{Acquired, Options, sync::Lock};
use std::time::Duration;

fn ship_order(n: u32) {
    println!("shipped {n}");
}

fn download(n: u32) {
    println!("downloaded {n}");
}

async fn ship_order_async(n: u32) {
    println!("shipped {n}");
}

fn sync_example(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let lock = Lock::new(client, "orders:42", Options::default()); // owner: a fresh UUID
    if let Acquired::Held(guard) = lock.acquire_timeout(Duration::from_secs(5))? {
        // waits up to 5 s in the server's queue
        ship_order(42); // the server keeps the lease alive (KEEPALIVE)
        guard.release()?; // Err(Error::LockLost(_)) if it was lost; dropping the guard releases too
    }
    Ok(())
}

fn family_example(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let sem = Semaphore::new(client.clone(), "downloads", Options::default());
    sem.create(3)?; // 3 permits, unless the semaphore exists already
    let lease = sem.lease(1)?; // waits for a permit; KEEPALIVE: back if this process dies
    download(1);
    lease.release()?; // dropping the lease returns the permit too
    let rw = ReadWriteLock::new(client.clone(), "catalog", Options::default());
    let write = rw.write()?; // one writer, or many readers
    let read = write.downgrade()?; // a read hold; no other writer got in between
    read.release()?;
    let both = MultiLock::new(client.clone(), ["{acct}:1", "{acct}:2"], Options::default());
    let guard = both.acquire()?; // every key at once, or none (no deadlock)
    guard.release()?;
    let latch = Latch::new(client, "workers");
    latch.create(1)?;
    latch.count_down()?; // 0: open
    latch.wait()?; // returns at once: the latch is open
    Ok(())
}

async fn tokio_example(client: redis::Client) -> Result<(), Box<dyn std::error::Error>> {
    let lock = hashlock_client::tokio::Lock::new(client, "orders:42", Options::default());
    let guard = lock.acquire().await?; // waits as long as it takes
    ship_order_async(42).await;
    guard.release().await?; // release explicitly (see "Drop" below)
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::args().nth(1).unwrap_or_else(|| "6380".into());
    let url = format!("redis://127.0.0.1:{port}/");
    let u = url.clone();
    tokio::task::spawn_blocking(move || {
        sync_example(&u)
            .and_then(|()| family_example(&u))
            .map_err(|e| e.to_string())
    })
    .await??;
    tokio_example(redis::Client::open(url)?).await
}
