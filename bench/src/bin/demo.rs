//! `make demo`: the overselling example (库存超卖), live against a server
//! with hashlock loaded.
//!
//! 1. 20 buyers × 50 attempts on a stock of 100, read-modify-write with no
//!    lock: GET stock → if > 0, SET stock − 1. It oversells.
//! 2. The same with hashlock (LOCK.ACQUIRE … BLOCK around it): exactly 100.
//! 3. A buyer process takes the lock with a plain lease and is killed
//!    (SIGKILL) without releasing; the next buyer, queued with BLOCK, is
//!    served at the lease deadline.
//! 4. The same with KEEPALIVE: the lock is tied to the dead buyer's
//!    connection, and the queued buyer has it as soon as the kernel closes
//!    that connection (well under a millisecond after the kill here).
//! 5. The design documents' seckill (秒杀) scenario at its own size: a stock
//!    of 1000 sold to 50 concurrent buyers with no lock, one Redisson-style
//!    lock, the seed's ten segmented Redisson-style locks, one hashlock lock,
//!    and `SEMAPHORE.ACQUIRE stock` alone (bench workload B12, one round).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, IsTerminal};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;
use hashlock_bench::conn::{self, expect_int, expect_ok};
use hashlock_bench::setup;
use hashlock_bench::timing::{fmt_duration, histogram, max, quantile, record};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use redis::Value;
use redis::aio::MultiplexedConnection;
use testkit::Kind;

const STOCK: i64 = 100;
const BUYERS: usize = 20;
const ATTEMPTS: usize = 50;
const STOCK_KEY: &str = "stock";
const LOCK_KEY: &str = "stock:lock";
/// Lease of the buyer that dies (its lock must lapse on its own).
const CRASH_LEASE_MS: u64 = 2000;

const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Colours only on a terminal.
fn paint(style: &str, text: &str) -> String {
    if std::io::stdout().is_terminal() {
        format!("{style}{text}{RESET}")
    } else {
        text.to_string()
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    // Hidden role: the buyer process that takes the lock and then dies.
    if args.get(1).map(String::as_str) == Some("--hold-and-wait") {
        return hold_and_wait(&args[2..]);
    }
    let kind = if args.iter().any(|a| a == "--server=valkey" || a == "valkey") {
        Kind::Valkey
    } else {
        Kind::Redis
    };
    let server = setup::start_server(kind)?;
    let version = server.version();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    rt.block_on(demo(server.port, kind, &version))
}

async fn demo(port: u16, kind: Kind, version: &str) -> Result<()> {
    println!(
        "{}",
        paint(
            BOLD,
            "hashlock demo — overselling (库存超卖): no lock, hashlock, a buyer that dies holding the lock, and the seckill stock of 1000"
        )
    );
    println!(
        "server: {} {version} with the hashlock module, 127.0.0.1:{port}",
        if kind == Kind::Redis {
            "Redis"
        } else {
            "Valkey"
        }
    );
    println!(
        "stock: {STOCK} items · {BUYERS} buyers × {ATTEMPTS} attempts each, all at once · every buyer has its own connection\n"
    );
    let mut admin = conn::connect(port).await?;

    // 1. No lock.
    println!(
        "{}",
        paint(
            BOLD,
            "1. Without a lock: GET stock → if > 0: SET stock (stock − 1)"
        )
    );
    reset_stock(&mut admin).await?;
    let sales = run_buyers(port, false).await?;
    let left: i64 = redis::cmd("GET")
        .arg(STOCK_KEY)
        .query_async(&mut admin)
        .await?;
    let sold = sales.len() as i64;
    if sold > STOCK {
        println!(
            "   {} sold {sold} items from a stock of {STOCK}: {} (stock now {left})",
            paint(RED, "✗"),
            paint(RED, &format!("OVERSOLD by {}", sold - STOCK))
        );
    } else {
        println!(
            "   sold {sold} items from a stock of {STOCK}; no oversell this time (stock now {left})"
        );
    }
    if let Some((item, buyers)) = worst_duplicate(&sales) {
        let mut distinct = buyers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let shown: Vec<String> = distinct.iter().take(6).map(|b| format!("#{b}")).collect();
        println!(
            "   {}",
            paint(
                DIM,
                &format!(
                    "e.g. the item at stock = {item} was sold {} times, to {} different buyers ({}{}): each read {item} before anyone wrote {}",
                    buyers.len(),
                    distinct.len(),
                    shown.join(", "),
                    if distinct.len() > shown.len() {
                        ", …"
                    } else {
                        ""
                    },
                    item - 1
                )
            )
        );
    }
    println!();

    // 2. hashlock.
    println!(
        "{}",
        paint(
            BOLD,
            &format!(
                "2. With hashlock: LOCK.ACQUIRE {LOCK_KEY} <buyer> PX 5000 BLOCK 10000 → GET/SET → LOCK.RELEASE"
            )
        )
    );
    reset_stock(&mut admin).await?;
    let before = lock_stats(&mut admin).await?;
    let start = Instant::now();
    let sales = run_buyers(port, true).await?;
    let took = start.elapsed();
    let after = lock_stats(&mut admin).await?;
    let left: i64 = redis::cmd("GET")
        .arg(STOCK_KEY)
        .query_async(&mut admin)
        .await?;
    let sold = sales.len() as i64;
    let mark = if sold == STOCK && left == 0 {
        paint(GREEN, "✓")
    } else {
        paint(RED, "✗")
    };
    println!(
        "   {mark} sold exactly {sold} of {STOCK}, oversold {} · stock left {left} · {} attempts found it sold out · {}",
        (sold - STOCK).max(0),
        BUYERS * ATTEMPTS - sales.len(),
        fmt_duration(took)
    );
    println!(
        "   {}",
        paint(
            DIM,
            &format!(
                "{} acquisitions waited in the server's FIFO queue and were handed the lock on release (INFO lock)",
                after.get("granted_after_wait").unwrap_or(&0)
                    - before.get("granted_after_wait").unwrap_or(&0)
            )
        )
    );
    if sold != STOCK || left != 0 {
        bail!("with hashlock the demo sold {sold} (stock left {left}): this is a bug");
    }
    println!();

    // 3. A buyer dies holding the lock: a plain lease, then KEEPALIVE.
    crash_demo(port, &mut admin).await?;
    keepalive_crash_demo(port, &mut admin).await
}

async fn reset_stock(admin: &mut MultiplexedConnection) -> Result<()> {
    let v = conn::call(admin, redis::cmd("SET").arg(STOCK_KEY).arg(STOCK)).await?;
    expect_ok(&v, "SET stock")
}

/// One sale: which buyer sold which item (the stock value it read).
struct Sale {
    buyer: usize,
    item: i64,
}

/// All buyers at once; returns every sale they believe they made.
async fn run_buyers(port: u16, locked: bool) -> Result<Vec<Sale>> {
    let bar = progress_bar((BUYERS * ATTEMPTS) as u64);
    let mut conns = try_join_all((0..BUYERS).map(|_| conn::connect(port))).await?;
    let sales = std::cell::RefCell::new(Vec::new());
    let waits = std::cell::RefCell::new(histogram());
    try_join_all(conns.iter_mut().enumerate().map(|(i, c)| {
        let (bar, sales, waits) = (&bar, &sales, &waits);
        async move {
            let buyer = i + 1;
            let owner = format!("buyer-{buyer}");
            for _ in 0..ATTEMPTS {
                if locked {
                    let t = Instant::now();
                    let mut acquire = redis::cmd("LOCK.ACQUIRE");
                    acquire
                        .arg(LOCK_KEY)
                        .arg(&owner)
                        .arg("PX")
                        .arg(5000)
                        .arg("BLOCK")
                        .arg(10_000);
                    let v = conn::call(c, &acquire).await?;
                    expect_int(&v, 1, "LOCK.ACQUIRE")?;
                    record(&mut waits.borrow_mut(), t.elapsed());
                }
                // The business logic, unchanged: check, deduct, write.
                let stock: i64 = redis::cmd("GET").arg(STOCK_KEY).query_async(c).await?;
                if stock > 0 {
                    let v = conn::call(c, redis::cmd("SET").arg(STOCK_KEY).arg(stock - 1)).await?;
                    expect_ok(&v, "SET stock")?;
                    let mut s = sales.borrow_mut();
                    s.push(Sale { buyer, item: stock });
                    bar.set_message(format!(
                        "sold {} · stock {} · {}",
                        s.len(),
                        stock - 1,
                        if s.len() as i64 > STOCK {
                            format!("oversold {}", s.len() as i64 - STOCK)
                        } else {
                            "oversold 0".to_string()
                        }
                    ));
                }
                if locked {
                    let v =
                        conn::call(c, redis::cmd("LOCK.RELEASE").arg(LOCK_KEY).arg(&owner)).await?;
                    expect_int(&v, 0, "LOCK.RELEASE")?;
                }
                bar.inc(1);
            }
            anyhow::Ok(())
        }
    }))
    .await?;
    bar.finish_and_clear();
    if locked {
        let w = waits.into_inner();
        println!(
            "   {}",
            paint(
                DIM,
                &format!(
                    "lock waits: p50 {}, p99 {}, worst {}",
                    fmt_duration(quantile(&w, 0.5)),
                    fmt_duration(quantile(&w, 0.99)),
                    fmt_duration(max(&w))
                )
            )
        );
    }
    Ok(sales.into_inner())
}

/// The item sold most often (several buyers read the same stock value).
fn worst_duplicate(sales: &[Sale]) -> Option<(i64, Vec<usize>)> {
    let mut by_item: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for s in sales {
        by_item.entry(s.item).or_default().push(s.buyer);
    }
    by_item
        .into_iter()
        .filter(|(_, b)| b.len() > 1)
        .max_by_key(|(item, b)| (b.len(), *item))
}

fn progress_bar(len: u64) -> ProgressBar {
    let target = if std::io::stdout().is_terminal() {
        ProgressDrawTarget::stdout()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(len), target);
    bar.set_style(
        ProgressStyle::with_template("   [{bar:30}] {pos}/{len} attempts · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

async fn lock_stats(admin: &mut MultiplexedConnection) -> Result<BTreeMap<String, i64>> {
    let text: String = redis::cmd("INFO").arg("lock").query_async(admin).await?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.strip_prefix("lock_")?.to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

async fn crash_demo(port: u16, admin: &mut MultiplexedConnection) -> Result<()> {
    println!(
        "{}",
        paint(
            BOLD,
            &format!(
                "3. A buyer dies while holding the lock with a plain lease ({CRASH_LEASE_MS} ms)"
            )
        )
    );
    let exe = std::env::current_exe().context("finding the demo binary")?;
    let mut child = Command::new(exe)
        .args([
            "--hold-and-wait",
            &port.to_string(),
            LOCK_KEY,
            "buyer-crashy",
            &CRASH_LEASE_MS.to_string(),
        ])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("starting the buyer process")?;
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("buyer process stdout")?)
        .read_line(&mut line)
        .context("reading the buyer process")?;
    if line.trim() != "1" {
        let _ = child.kill();
        bail!("the buyer process could not take the lock: {line:?}");
    }
    // The lease deadline as the server has it (absolute ms).
    let deadline: i64 = redis::cmd("PEXPIRETIME")
        .arg(LOCK_KEY)
        .query_async(admin)
        .await?;
    println!(
        "   buyer-crashy (pid {pid}): LOCK.ACQUIRE {LOCK_KEY} buyer-crashy PX {CRASH_LEASE_MS} → 1 (holds the lock)"
    );
    child.kill().context("killing the buyer process")?;
    let _ = child.wait();
    println!(
        "   {} kill -9 {pid}: its connection is gone and nobody released the lock",
        paint(RED, "✗")
    );
    println!(
        "   buyer-21: LOCK.ACQUIRE {LOCK_KEY} buyer-21 PX 5000 BLOCK 10000 … queued in the server"
    );

    let mut waiter = conn::connect(port).await?;
    let mut acquire = redis::cmd("LOCK.ACQUIRE");
    acquire
        .arg(LOCK_KEY)
        .arg("buyer-21")
        .arg("PX")
        .arg(5000)
        .arg("BLOCK")
        .arg(10_000);
    let started = Instant::now();
    let mut blocked = waiter.clone();
    let mut served = std::pin::pin!(async move { conn::call(&mut blocked, &acquire).await });
    // While it waits: what the server says about the lock, live.
    let spinner = if std::io::stdout().is_terminal() {
        let s = ProgressBar::new_spinner();
        s.set_style(
            ProgressStyle::with_template("   {spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        s.enable_steady_tick(Duration::from_millis(80));
        Some(s)
    } else {
        None
    };
    let mut last_print = Instant::now() - Duration::from_secs(1);
    let reply = loop {
        tokio::select! {
            r = &mut served => break r?,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {
                let info: Value = redis::cmd("LOCK.INFO").arg(LOCK_KEY).query_async(admin).await?;
                let msg = describe_info(&info, started.elapsed());
                match &spinner {
                    Some(s) => s.set_message(msg),
                    None if last_print.elapsed() >= Duration::from_millis(500) => {
                        println!("   {msg}");
                        last_print = Instant::now();
                    }
                    None => {}
                }
            }
        }
    };
    let now_ms = epoch_ms();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    expect_int(&reply, 1, "LOCK.ACQUIRE ... BLOCK")?;
    let late = now_ms - deadline as f64;
    println!(
        "   {} buyer-21 got the lock after {} — {:.1} ms after buyer-crashy's lease deadline (served by the module's timer, no polling)",
        paint(GREEN, "✓"),
        fmt_duration(started.elapsed()),
        late.max(0.0)
    );
    let v = conn::call(
        &mut waiter,
        redis::cmd("LOCK.RELEASE").arg(LOCK_KEY).arg("buyer-21"),
    )
    .await?;
    expect_int(&v, 0, "LOCK.RELEASE")?;
    println!();
    Ok(())
}

/// Step 4: the buyer that dies holds a KEEPALIVE lock; queued first, the next
/// buyer is handed the lock as soon as the dead buyer's connection closes.
async fn keepalive_crash_demo(port: u16, admin: &mut MultiplexedConnection) -> Result<()> {
    println!(
        "{}",
        paint(
            BOLD,
            &format!(
                "4. A buyer dies while holding a KEEPALIVE lock (lease {CRASH_LEASE_MS} ms, tied to its connection)"
            )
        )
    );
    let exe = std::env::current_exe().context("finding the demo binary")?;
    let mut child = Command::new(exe)
        .args([
            "--hold-and-wait",
            &port.to_string(),
            LOCK_KEY,
            "buyer-tied",
            &CRASH_LEASE_MS.to_string(),
            "KEEPALIVE",
        ])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("starting the buyer process")?;
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("buyer process stdout")?)
        .read_line(&mut line)
        .context("reading the buyer process")?;
    if line.trim() != "1" {
        let _ = child.kill();
        bail!("the buyer process could not take the lock: {line:?}");
    }
    println!(
        "   buyer-tied (pid {pid}): LOCK.ACQUIRE {LOCK_KEY} buyer-tied PX {CRASH_LEASE_MS} KEEPALIVE → 1 (holds the lock)"
    );
    let mut waiter = conn::connect(port).await?;
    let mut acquire = redis::cmd("LOCK.ACQUIRE");
    acquire
        .arg(LOCK_KEY)
        .arg("buyer-22")
        .arg("PX")
        .arg(5000)
        .arg("BLOCK")
        .arg(10_000);
    let mut blocked = waiter.clone();
    let served = tokio::spawn(async move {
        let r = conn::call(&mut blocked, &acquire).await;
        (r, Instant::now())
    });
    // Queued before the kill, so the hand-on itself is what is timed.
    loop {
        let info: Value = redis::cmd("LOCK.INFO")
            .arg(LOCK_KEY)
            .query_async(admin)
            .await?;
        if describe_info(&info, Duration::ZERO).contains(" 1 waiter(s)") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "   buyer-22: LOCK.ACQUIRE {LOCK_KEY} buyer-22 PX 5000 BLOCK 10000 … queued in the server"
    );
    let killed = Instant::now();
    child.kill().context("killing the buyer process")?;
    let _ = child.wait();
    println!(
        "   {} kill -9 {pid}: nobody released the lock, but the kernel closes the dead buyer's connection",
        paint(RED, "✗")
    );
    let (reply, at) = served.await.context("the waiting buyer")?;
    expect_int(&reply?, 1, "LOCK.ACQUIRE ... BLOCK")?;
    println!(
        "   {} buyer-22 got the lock {} after the kill, not at the lease deadline {CRASH_LEASE_MS} ms later: \
         the server released it the moment the tied connection closed",
        paint(GREEN, "✓"),
        fmt_duration(at.saturating_duration_since(killed))
    );
    let v = conn::call(
        &mut waiter,
        redis::cmd("LOCK.RELEASE").arg(LOCK_KEY).arg("buyer-22"),
    )
    .await?;
    expect_int(&v, 0, "LOCK.RELEASE")?;
    println!();
    seckill_demo(port, admin).await?;
    println!("\ndone.");
    Ok(())
}

/// 5. The seed's scenario: one lock, ten segmented locks, a semaphore.
async fn seckill_demo(port: u16, admin: &mut MultiplexedConnection) -> Result<()> {
    use hashlock_bench::workloads::b12::{Config, Seller, sell};
    let config = Config {
        stock: 1000,
        buyers: 50,
        segments: 10,
    };
    println!(
        "{}",
        paint(
            BOLD,
            &format!(
                "5. The seckill scenario of the design documents: a stock of {} sold to {} concurrent buyers",
                config.stock, config.buyers
            )
        )
    );
    println!(
        "   {}",
        paint(
            DIM,
            "every buyer buys until it sees the stock sold out; Redisson-style sellers are threads of one Redisson client (scripts by EVALSHA, pub/sub wait)"
        )
    );
    // The Redisson-protocol scripts go by EVALSHA: load them first.
    hashlock_bench::scripts::load(admin).await?;
    let mut segments = None;
    let mut rows = Vec::new();
    for seller in Seller::ALL {
        let spinner = if std::io::stdout().is_terminal() {
            let s = ProgressBar::new_spinner();
            s.set_style(
                ProgressStyle::with_template("   {spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            s.set_message(seller.label().to_string());
            s.enable_steady_tick(Duration::from_millis(80));
            Some(s)
        } else {
            None
        };
        let o = sell(port, admin, seller, config, 0).await?;
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        if seller == Seller::RedissonSegments {
            segments = Some(o.sales_per_sec());
        }
        let ok = o.oversold == 0 && o.left == 0;
        let mark = if ok {
            paint(GREEN, "✓")
        } else {
            paint(RED, "✗")
        };
        println!(
            "   {mark} {:<62} {:>8} sales/s · sold {:>4} · {} · {:.1} server commands per sale",
            seller.label(),
            hashlock_bench::timing::fmt_count(o.sales_per_sec()),
            o.sales,
            if o.oversold > 0 {
                paint(RED, &format!("OVERSOLD by {}", o.oversold))
            } else {
                "oversold 0".to_string()
            },
            o.server_cmds_per_sale()
        );
        if seller.guarded() && !ok {
            bail!(
                "{} oversold {} (stock left {}): this is a bug",
                seller.label(),
                o.oversold,
                o.left
            );
        }
        rows.push(o);
    }
    if let (Some(b), Some(d)) = (
        segments,
        rows.iter()
            .find(|o| o.seller == Seller::Semaphore)
            .map(|o| o.sales_per_sec()),
    ) {
        println!(
            "   {}",
            paint(
                DIM,
                &format!(
                    "SEMAPHORE.ACQUIRE sold {:.1}× as fast as the ten segmented locks, with one command per sale and no lock at all (one run on this machine; `make bench` B12 has the averaged figures)",
                    d / b.max(1e-9)
                )
            )
        );
    }
    Ok(())
}

/// "held by buyer-crashy · ttl 1234 ms · 1 waiter" from a LOCK.INFO reply.
fn describe_info(info: &Value, waited: Duration) -> String {
    let Value::Array(items) = info else {
        return format!("t+{:.1} s  lock free", waited.as_secs_f64());
    };
    let mut fields = BTreeMap::new();
    for pair in items.chunks(2) {
        if let [Value::BulkString(k), v] = pair {
            let v = match v {
                Value::Int(n) => n.to_string(),
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            fields.insert(String::from_utf8_lossy(k).into_owned(), v);
        }
    }
    let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
    format!(
        "t+{:.1} s  lock held by {} (dead) · lease left {} ms · {} waiter(s) queued",
        waited.as_secs_f64(),
        get("owner"),
        get("ttl"),
        get("waiters")
    )
}

/// The dying buyer: takes the lock, says so on stdout, waits to be killed.
fn hold_and_wait(args: &[String]) -> Result<()> {
    let (port, key, owner, lease, keepalive) = match args {
        [port, key, owner, lease] => (port, key, owner, lease, false),
        [port, key, owner, lease, k] if k == "KEEPALIVE" => (port, key, owner, lease, true),
        _ => bail!("usage: demo --hold-and-wait PORT KEY OWNER LEASE_MS [KEEPALIVE]"),
    };
    let port: u16 = port.parse().context("port")?;
    let mut c = testkit::Client::connect(port);
    let mut cmd = vec![
        "LOCK.ACQUIRE",
        key.as_str(),
        owner.as_str(),
        "PX",
        lease.as_str(),
    ];
    if keepalive {
        cmd.push("KEEPALIVE");
    }
    let r = c.cmd(&cmd);
    println!(
        "{}",
        if r.is_nil() {
            "nil".to_string()
        } else {
            r.as_int().to_string()
        }
    );
    // Bounded: the parent kills this process long before.
    std::thread::sleep(Duration::from_secs(60));
    Ok(())
}
