//! redis-rs 1.8 against LOCK.ACQUIRE (README: client libraries): the README
//! snippet verbatim, then the timeouts of the sync and async connections and
//! what a timeout leaves queued. Usage: readme-checks PORT
use std::time::{Duration, Instant};

include!(concat!(env!("OUT_DIR"), "/readme_snippet.rs"));

fn lock_info(con: &mut redis::Connection, key: &str) -> String {
    let v: redis::Value = redis::cmd("LOCK.INFO").arg(key).query(con).unwrap();
    format!("{v:?}")
}

fn hold(admin: &mut redis::Connection) -> redis::RedisResult<()> {
    let _: () = redis::cmd("DEL").arg("check:rs").query(admin)?;
    let _: i64 = redis::cmd("LOCK.ACQUIRE").arg("check:rs").arg("holder").arg("PX").arg(600_000).query(admin)?;
    Ok(())
}

fn acquire(key: &str, owner: &str, block_ms: u64) -> redis::Cmd {
    let mut c = redis::cmd("LOCK.ACQUIRE");
    c.arg(key).arg(owner).arg("PX").arg(30_000).arg("BLOCK").arg(block_ms);
    c
}

#[tokio::main]
async fn main() -> redis::RedisResult<()> {
    let port: u16 = std::env::args().nth(1).expect("PORT").parse().expect("PORT");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut admin = client.get_connection()?;

    let _: () = redis::cmd("DEL").arg("orders:42").arg("jobs:nightly").query(&mut admin)?;
    println!("README snippet: (held, job_owner) = {:?}", readme_snippet(&client, "me-1")?);
    println!("again, jobs:nightly now taken: {:?}", readme_snippet(&client, "me-2")?);
    let r: redis::RedisResult<Option<i64>> =
        redis::cmd("LOCK.ACQUIRE").arg("jobs:other").arg("*").arg("EX").arg(600).query(&mut admin);
    println!("owner * read as Option<i64>: {r:?}");
    let _: () = redis::cmd("DEL").arg("orders:42").arg("jobs:nightly").arg("jobs:other").query(&mut admin)?;

    // Sync connection: no read timeout by default; a shorter one leaves the waiter queued.
    hold(&mut admin)?;
    let mut con = client.get_connection()?;
    let t = Instant::now();
    let r: Option<i64> = acquire("check:rs", "w", 3_000).query(&mut con)?;
    println!("sync defaults, BLOCK 3000 (held): {r:?} after {:.1} s", t.elapsed().as_secs_f64());
    con.set_read_timeout(Some(Duration::from_millis(1_000)))?;
    let t = Instant::now();
    let r: redis::RedisResult<Option<i64>> = acquire("check:rs", "w", 3_000).query(&mut con);
    println!("sync, read timeout 1 s, BLOCK 3000: {r:?} after {:.1} s", t.elapsed().as_secs_f64());
    println!("  LOCK.INFO while the Connection lives: {}", lock_info(&mut admin, "check:rs"));
    drop(con);
    std::thread::sleep(Duration::from_millis(100));
    println!("  after dropping it: {}", lock_info(&mut admin, "check:rs"));

    // Async, default config (500 ms response timeout): gives up, stays queued, gets the lock.
    hold(&mut admin)?;
    let mut acon = client.get_multiplexed_async_connection().await?;
    let t = Instant::now();
    let r: redis::RedisResult<Option<i64>> = acquire("check:rs", "gave-up", 3_000).query_async(&mut acon).await;
    println!("async defaults, BLOCK 3000: {r:?} after {:.1} s", t.elapsed().as_secs_f64());
    println!("  LOCK.INFO right after: {}", lock_info(&mut admin, "check:rs"));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let _: i64 = redis::cmd("LOCK.RELEASE").arg("check:rs").arg("holder").query(&mut admin)?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!("  the holder released: {}", lock_info(&mut admin, "check:rs"));
    drop(acon);

    // Async with a response timeout above BLOCK; three waiters on one multiplexed connection.
    hold(&mut admin)?;
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(20)));
    let acon = client.get_multiplexed_async_connection_with_config(&config).await?;
    let t = Instant::now();
    let tasks: Vec<_> = (1..=3)
        .map(|i| {
            let mut c = acon.clone();
            tokio::spawn(async move {
                let r: Option<i64> = acquire("check:rs", &format!("w{i}"), 2_000).query_async(&mut c).await.unwrap();
                format!("{r:?}@{:.1}s", t.elapsed().as_secs_f64())
            })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    println!("response timeout 20 s, 3 x BLOCK 2000 on one multiplexed connection: {}", out.join(" "));
    let _: () = redis::cmd("DEL").arg("check:rs").query(&mut admin)?;
    Ok(())
}
