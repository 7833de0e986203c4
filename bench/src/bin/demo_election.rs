//! `make demo-election`: leader election with hashlock, live.
//!
//! Three candidate processes campaign on one key (`LOCK.ACQUIRE key id PX
//! 30000 BLOCK 0 KEEPALIVE TOKEN`: the server queues them, the token is the
//! term); an observer follows the key's lifecycle keyspace events
//! (`notify-keyspace-events Kd`) and reads LOCK.INFO at each. The leader is
//! killed with SIGKILL, twice: each time the next in line takes over.
//! Printed: who leads, the terms, and per takeover how long after the kill
//! the new leader's campaign returned and the observer knew.

use std::io::{BufRead, BufReader, IsTerminal};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use hashlock_bench::conn;
use hashlock_bench::timing::{fmt_duration, monotonic_ns};
use hashlock_bench::workloads::holder::{self, Mode};
use redis::Value;
use testkit::{Kind, Server};
use tokio::sync::mpsc;

const KEY: &str = "service:leader";
const CANDIDATES: usize = 3;
const TERM_LEASE: Duration = Duration::from_secs(30);
/// How long any step may take before the demo gives up.
const PATIENCE: Duration = Duration::from_secs(10);

const BOLD: &str = "\x1b[1m";
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

fn paint(style: &str, text: &str) -> String {
    if std::io::stdout().is_terminal() {
        format!("{style}{text}{RESET}")
    } else {
        text.to_string()
    }
}

/// A candidate's line: `elected <term> <CLOCK_MONOTONIC ns>`.
struct Elected {
    who: usize,
    term: i64,
    at: u64,
}

/// What the observer saw: a new leader (or none) at an instant.
struct Seen {
    owner: Option<String>,
    term: i64,
    at: u64,
}

struct Candidate {
    name: String,
    child: Child,
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    // Hidden role: a candidate process (the benchmark's holder, campaigning).
    if args.get(1).map(String::as_str) == Some(holder::ARG) {
        return match holder::main(&args[2..]) {
            c if c == std::process::ExitCode::SUCCESS => Ok(()),
            _ => bail!("candidate failed"),
        };
    }
    let kind = if args.iter().any(|a| a == "--server=valkey" || a == "valkey") {
        Kind::Valkey
    } else {
        Kind::Redis
    };
    let server = std::panic::catch_unwind(|| {
        Server::builder(kind)
            .config("io-threads", "1")
            .config("notify-keyspace-events", "Kd")
            .start()
    })
    .map_err(|_| anyhow::anyhow!("starting the {kind} server failed (details above)"))?;
    let version = server.version();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    rt.block_on(demo(server.port, kind, &version))
}

fn spawn(port: u16, n: usize, tx: mpsc::UnboundedSender<Elected>) -> Result<Candidate> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let name = format!("candidate-{n}");
    let mut child = Command::new(exe)
        .args(holder::args(port, KEY, &name, Mode::Campaign, TERM_LEASE))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawning a candidate")?;
    let out = child.stdout.take().context("candidate stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["elected", term, at] = f.as_slice()
                && let (Ok(term), Ok(at)) = (term.parse(), at.parse())
            {
                let _ = tx.send(Elected { who: n, term, at });
            }
        }
    });
    Ok(Candidate { name, child })
}

async fn demo(port: u16, kind: Kind, version: &str) -> Result<()> {
    println!(
        "{}",
        paint(
            BOLD,
            "hashlock demo — leader election: the leader is killed, the next in line takes over"
        )
    );
    println!(
        "server: {} {version} with the hashlock module, 127.0.0.1:{port}, notify-keyspace-events Kd",
        if kind == Kind::Redis {
            "Redis"
        } else {
            "Valkey"
        }
    );
    println!(
        "{}",
        paint(
            DIM,
            &format!(
                "candidates: {CANDIDATES} processes, each LOCK.ACQUIRE {KEY} <id> PX 30000 BLOCK 0 KEEPALIVE TOKEN (the token is the term)\n\
                 observer: SUBSCRIBE __keyspace@0__:{KEY}, LOCK.INFO at each event\n"
            )
        )
    );
    let mut admin = conn::connect(port).await?;

    // The observer.
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<Seen>();
    let (mut sink, mut events) = conn::pubsub(port).await?.split();
    sink.subscribe(format!("__keyspace@0__:{KEY}"))
        .await
        .context("SUBSCRIBE")?;
    let mut observer = conn::connect(port).await?;
    tokio::spawn(async move {
        let mut last: Option<(Option<String>, i64)> = None;
        while events.next().await.is_some() {
            let Ok(info) = conn::call(&mut observer, redis::cmd("LOCK.INFO").arg(KEY)).await else {
                return;
            };
            let at = monotonic_ns();
            let now = (
                field_str(&info, "owner"),
                field_int(&info, "token").unwrap_or(0),
            );
            if last.as_ref() != Some(&now) {
                last = Some(now.clone());
                let _ = seen_tx.send(Seen {
                    owner: now.0,
                    term: now.1,
                    at,
                });
            }
        }
    });

    // The candidates: the first leads, the others queue behind it.
    let (tx, mut elected) = mpsc::unbounded_channel::<Elected>();
    let mut candidates: Vec<Option<Candidate>> = Vec::new();
    candidates.push(Some(spawn(port, 1, tx.clone())?));
    let first = recv(&mut elected, "the first election").await?;
    let mut terms = vec![(first.who, first.term)];
    print_candidate(&candidates, 0, "campaigns");
    println!(
        "   {} {} leads, term {}",
        paint(GREEN, "✓"),
        name(first.who),
        first.term
    );
    for n in 2..=CANDIDATES {
        candidates.push(Some(spawn(port, n, tx.clone())?));
        let queued = n as i64 - 1;
        let started = Instant::now();
        while field_int(
            &conn::call(&mut admin, redis::cmd("LOCK.INFO").arg(KEY)).await?,
            "waiters",
        ) != Some(queued)
        {
            if started.elapsed() > PATIENCE {
                bail!("{} did not queue", name(n));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        print_candidate(&candidates, n - 1, "campaigns");
        println!(
            "   … waits in the server's queue ({} in line)",
            ordinal(n - 1)
        );
    }
    let s = recv(&mut seen, "the observer").await?;
    println!(
        "   observer: leader {} term {}\n",
        s.owner.as_deref().unwrap_or("none"),
        s.term
    );

    let mut leader = first.who;
    let mut takeovers = Vec::new();
    for round in 1..CANDIDATES {
        let victim = candidates[leader - 1]
            .as_mut()
            .context("the leader's process")?;
        println!(
            "{}",
            paint(
                BOLD,
                &format!(
                    "{round}. SIGKILL {} (pid {}), the leader",
                    victim.name,
                    victim.child.id()
                )
            )
        );
        let killed = monotonic_ns();
        victim.child.kill().context("kill")?;
        let next = recv(&mut elected, "the next election").await?;
        let mut s = recv(&mut seen, "the observer").await?;
        // A moment with no leader may show first (never here: the next in
        // line is handed the lock as the connection closes).
        while s.owner.is_none() {
            s = recv(&mut seen, "the observer").await?;
        }
        let prev = terms.last().map(|t| t.1).unwrap_or(0);
        let campaign = Duration::from_nanos(next.at.saturating_sub(killed));
        let observed = Duration::from_nanos(s.at.saturating_sub(killed));
        println!(
            "   {} {} leads, term {} ({} the last) — its campaign returned {} after the kill",
            if next.term > prev {
                paint(GREEN, "✓")
            } else {
                paint(RED, "✗")
            },
            name(next.who),
            next.term,
            if next.term > prev { ">" } else { "NOT >" },
            fmt_duration(campaign)
        );
        println!(
            "   observer: leader {} term {}, known {} after the kill (event + LOCK.INFO)\n",
            s.owner.as_deref().unwrap_or("none"),
            s.term,
            fmt_duration(observed)
        );
        if s.owner.as_deref() != Some(name(next.who).as_str()) || s.term != next.term {
            bail!(
                "the observer saw {:?} term {}, the new leader is {} term {}",
                s.owner,
                s.term,
                name(next.who),
                next.term
            );
        }
        if next.term <= prev {
            bail!("the term did not grow: {} after {prev}", next.term);
        }
        candidates[leader - 1] = None; // reaped
        terms.push((next.who, next.term));
        takeovers.push((campaign, observed));
        leader = next.who;
    }
    let chain: Vec<String> = terms
        .iter()
        .map(|(who, t)| format!("{} {t}", name(*who)))
        .collect();
    println!(
        "{}",
        paint(BOLD, "Terms (each greater than the one before):")
    );
    println!("   {}", chain.join("  <  "));
    println!(
        "{}",
        paint(
            BOLD,
            "Takeover (kill → new leader's campaign returned / observer knew):"
        )
    );
    for (i, (c, o)) in takeovers.iter().enumerate() {
        println!("   {}: {} / {}", i + 1, fmt_duration(*c), fmt_duration(*o));
    }
    println!(
        "{}",
        paint(
            DIM,
            "\nWith a lease-based lock and a watchdog (Redisson's RLock: 30 s lease renewed every 10 s), the next leader \
             would learn at the lease's end: 20–30 s. See `make bench`, B16."
        )
    );
    Ok(())
}

fn name(n: usize) -> String {
    format!("candidate-{n}")
}

fn ordinal(n: usize) -> &'static str {
    match n {
        1 => "2nd",
        2 => "3rd",
        _ => "later",
    }
}

fn print_candidate(c: &[Option<Candidate>], i: usize, what: &str) {
    if let Some(Some(c)) = c.get(i) {
        println!("{} (pid {}) {what}", c.name, c.child.id());
    }
}

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> Result<T> {
    match tokio::time::timeout(PATIENCE, rx.recv()).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => bail!("{what}: the channel closed"),
        Err(_) => bail!("{what}: nothing within {PATIENCE:?}"),
    }
}

/// A field of LOCK.INFO's flat RESP2 array.
fn field(info: &Value, name: &str) -> Option<Value> {
    let Value::Array(flat) = info else {
        return None;
    };
    flat.chunks_exact(2)
        .find(|kv| matches!(&kv[0], Value::BulkString(b) if b == name.as_bytes()))
        .map(|kv| kv[1].clone())
}

fn field_str(info: &Value, name: &str) -> Option<String> {
    match field(info, name) {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

fn field_int(info: &Value, name: &str) -> Option<i64> {
    match field(info, name) {
        Some(Value::Int(n)) => Some(n),
        _ => None,
    }
}
