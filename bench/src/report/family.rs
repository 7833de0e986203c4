//! The Redisson family's tables (B12–B15): docs/BENCHMARKS.md sections, the
//! README's `semaphores` and `rwlocks` regions, their targets and the rows
//! the smoke test requires.

use std::fmt::Write as _;
use std::time::Duration;

use super::targets::{Target, Verdict};
use super::{fmt_ratio, fmt_us, ratio};
use crate::plan::Workload;
use crate::run::Results;
use crate::timing::{fmt_count, fmt_duration, max, quantile};
use crate::workloads::b12::{Outcome, Seller};
use crate::workloads::b13::{Family, Row as CostRow};
use crate::workloads::b14::{Row as WaitRow, Side};
use crate::workloads::b15::{Row as MultiRow, Variant};

fn b12(r: &Results, s: Seller) -> Option<&Outcome> {
    r.b12.iter().find(|o| o.seller == s)
}

fn b13(r: &Results, f: Family) -> Option<&CostRow> {
    r.b13.iter().find(|c| c.family == f)
}

fn b14(r: &Results, s: Side) -> Option<&WaitRow> {
    r.b14.iter().find(|x| x.side == s)
}

fn b15(r: &Results, v: Variant) -> Option<&MultiRow> {
    r.b15.iter().find(|x| x.variant == v)
}

fn verdict(ok: Option<bool>) -> Verdict {
    match ok {
        Some(true) => Verdict::Met,
        Some(false) => Verdict::Missed,
        None => Verdict::NotRun,
    }
}

// ---- B12 ----

fn b12_table(s: &mut String, r: &Results) {
    let base = b12(r, Seller::RedissonSegments).map(|o| o.sales_per_sec());
    let _ = writeln!(
        s,
        "| seller | sales/s | vs (b) | oversold | stock left | server commands per sale | server CPU per sale | server / client CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for seller in Seller::ALL {
        let Some(o) = b12(r, seller) else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}{} | {} | {:.1} | {:.1} µs | {:.0} % / {:.0} % |",
            seller.short(),
            fmt_count(o.sales_per_sec()),
            fmt_ratio(base.and_then(|b| ratio(o.sales_per_sec(), b))),
            fmt_count(o.oversold as f64),
            if o.oversold > 0 && seller.guarded() {
                " ⚠"
            } else {
                ""
            },
            fmt_count(o.left as f64),
            o.server_cmds_per_sale(),
            o.server_us_per_sale(),
            o.server_busy() * 100.0,
            o.client_busy() * 100.0
        );
    }
}

pub(super) fn b12_section(s: &mut String, r: &Results) {
    let c = &r.plan.b12;
    let _ = writeln!(
        s,
        "## B12 — overselling: one lock, ten segmented locks, a semaphore\n\n\
         A stock of {} sold to {} concurrent buyers (each its own connection), {} round(s) per seller, the sellers taking turns round by round; \
         every buyer buys again and again until it finds the stock sold out. \
         Sales/s = sales ÷ time from the start to the last sale. Oversold = sales the buyers made beyond the stock (summed over rounds); \
         stock left = what remained unsold (must be 0). Server commands per sale = `total_commands_processed` delta ÷ sales (commands inside scripts count); server CPU per sale = the server's `used_cpu_user + used_cpu_sys` delta ÷ sales \
         (what a sale costs the server, including the system calls of every request it is woken for: a server that sees one request at a time pays them per request, a busy one amortises them); \
         server / client CPU = share of one core each used while the buyers ran: one benchmark thread drives every buyer, so a client near 100 % means the row measures the client; \
         the lock-based sellers use neither core fully: they are bound by round trips and waits (on this shared machine, by its scheduling too, so their sales/s vary from run to run). \
         Redisson-style sellers are {} threads of one Redisson client (one JVM): the lock scripts by EVALSHA, one pub/sub connection, \
         an unlock message wakes one waiting thread (Redisson's per-JVM latch).\n\n\
         - no lock: `GET` the stock, `SET` it one lower if it is above 0 — the race the design documents start from.\n\
         - (a) `lock()` of one Redisson lock (30 s lease) around that GET/SET.\n\
         - (b) the seed's segmented locks: the stock split into {} keys of {} items, each behind its own Redisson lock; a buyer takes a random segment with \
         `tryLock(100 ms wait, 500 ms lease)`, and when it is empty or busy every other segment in turn with `tryLock(50 ms, 200 ms)`; \
         an attempt that found a segment busy and none with stock starts over ({} such retries here).\n\
         - (c) one hashlock lock: `LOCK.ACQUIRE lock buyer PX 30000 BLOCK 60000` around the same GET/SET, then `LOCK.RELEASE`.\n\
         - (d) `SEMAPHORE.ACQUIRE stock` alone: the stock is the semaphore's permit count (`SEMAPHORE.CREATE stock {}`); one command per sale, nil when sold out.\n\
         - RSemaphore's tryAcquire script by EVALSHA on the same kind of key, for reference: a semaphore needs no lock either way; \
         hashlock's adds a server-side queue (BLOCK), leased permits that come back at their deadline, and permits tied to a connection.\n",
        fmt_count(c.stock as f64),
        c.buyers,
        r.plan.b12_rounds,
        c.buyers,
        c.segments,
        c.stock / c.segments.max(1) as i64,
        b12(r, Seller::RedissonSegments).map_or(0, |o| o.busy_retries),
        c.stock
    );
    b12_table(s, r);
    s.push('\n');
}

// ---- B13 ----

fn b13_rows(s: &mut String, r: &Results, families: &[Family]) {
    let _ = writeln!(
        s,
        "| object | command | hashlock µs | Redisson script (EVALSHA) µs | gain |\n|---|---|---:|---:|---:|"
    );
    for &f in families {
        let Some(c) = b13(r, f) else { continue };
        let (ha, hr) = f.hashlock_ops();
        let (ra, rr) = f.redisson_ops();
        let (ga, gr, gp) = c.gains();
        let (h1, h2) = (
            c.hashlock_acquire.us_per_call(),
            c.hashlock_release.us_per_call(),
        );
        let (r1, r2) = (
            c.redisson_acquire.us_per_call(),
            c.redisson_release.us_per_call(),
        );
        let _ = writeln!(
            s,
            "| {} | `{ha}` vs {ra} | {} | {} | {} |",
            f.label(),
            fmt_us(h1),
            fmt_us(r1),
            fmt_ratio(ga)
        );
        let _ = writeln!(
            s,
            "| | `{hr}` vs {rr} | {} | {} | {} |",
            fmt_us(h2),
            fmt_us(r2),
            fmt_ratio(gr)
        );
        if f.pair_target() {
            let sum = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
            let _ = writeln!(
                s,
                "| | **acquire + release** | **{}** | **{}** | **{}** |",
                fmt_us(sum(h1, h2)),
                fmt_us(sum(r1, r2)),
                fmt_ratio(gp)
            );
        }
    }
}

pub(super) fn b13_section(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "## B13 — server cost per call: semaphores and read-write locks\n\n\
         As B1's cost table: one client, pipeline {}, {} fresh objects per phase × {} round(s), hashlock and Redisson's scripts (EVALSHA) taking turns; \
         `INFO commandstats` µs per call (a script's time includes the commands it runs). Gain = Redisson µs ÷ hashlock µs (higher is better for hashlock). \
         Semaphores: each key holds one permit; acquire takes it, release gives it back (both publish the count: no subscriber listens). \
         Leased permits: a 30 s lease (hashlock `PX 30000`; Redisson's score = client clock + 30 s), returned by id. \
         Read-write locks: a fresh lock, acquired and released by one owner (30 s lease); Redisson's read hold also writes its timeout key.\n",
        crate::workloads::b1::COST_PIPELINE,
        fmt_count(r.plan.b13_keys as f64),
        r.plan.b13_rounds
    );
    b13_rows(s, r, &Family::ALL);
    let dels: Vec<String> = [Family::Read, Family::Write]
        .into_iter()
        .filter_map(|f| {
            b13(r, f)
                .and_then(|c| c.redisson_latch_del)
                .and_then(|d| d.us_per_call())
                .map(|us| {
                    format!(
                        "{} {us:.2} µs",
                        if f == Family::Read { "read" } else { "write" }
                    )
                })
        })
        .collect();
    if !dels.is_empty() {
        let _ = writeln!(
            s,
            "\nRedisson 4.x's read and write unlock scripts also write an unlock latch (`redisson_unlock_latch:{{name}}:<request>`) that the client DELs after the reply: \
             one more command per release ({}), not counted above.",
            dels.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\nServer instructions per call of the same commands (callgrind): `bench/callgrind.sh` (its family phases).\n"
    );
}

// ---- B14 ----

fn b14_table(s: &mut String, r: &Results) {
    let c = &r.plan.b14;
    let _ = writeln!(
        s,
        "| | writer granted | writer wait p50 | p99 | max | not granted within {} | reads/s meanwhile | reader wait p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|",
        fmt_duration(c.cap)
    );
    for side in Side::ALL {
        let Some(x) = b14(r, side) else { continue };
        let g = |q: f64| {
            if x.granted == 0 {
                "—".to_string()
            } else {
                fmt_duration(quantile(&x.wait, q))
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} of {} | {} | {} | {} | {}{} | {} | {} |",
            side.label(),
            x.granted,
            x.granted + x.capped,
            g(0.5),
            g(0.99),
            if x.granted == 0 {
                "—".to_string()
            } else {
                fmt_duration(max(&x.wait))
            },
            x.capped,
            if x.capped > 0 {
                format!(" (waits ≥ {}: capped)", fmt_duration(c.cap))
            } else {
                String::new()
            },
            fmt_count(x.reads_per_sec()),
            fmt_duration(quantile(&x.reader_wait, 0.99))
        );
    }
}

pub(super) fn b14_section(s: &mut String, r: &Results) {
    let c = &r.plan.b14;
    let _ = writeln!(
        s,
        "## B14 — writer wait under a continuous stream of readers\n\n\
         {} readers loop read-lock → hold → unlock on one key, each hold drawn uniformly from {} ± 50 % and their starts staggered, so that the holds overlap (the lock goes free only if every reader is between two holds at once); \
         a writer asks for the write lock {} times, {} apart, holds it {} and releases it. \
         hashlock: native readers with `BLOCK`, the writer `RWLOCK.ACQUIRE … WRITE … BLOCK {}` — once it is queued, new readers queue behind it, \
         so it waits for the read holds already granted: at most one read hold. \
         Redisson-style: the read and write lock scripts by EVALSHA with Redisson's pub/sub wait, every participant a thread of one JVM; \
         Redisson's read lock enters any read-mode lock whatever waits, so the writer gets in only when every reader happens to be between two holds at the same moment: \
         **its wait is unbounded**. Each write attempt is therefore capped at {} (`tryLock({})`); an attempt still waiting then is counted as not granted, \
         and its real wait would have been longer (with Redisson's default `lock()`, it waits as long as readers keep coming).\n",
        c.readers,
        fmt_duration(c.hold),
        c.writes,
        fmt_duration(c.gap),
        fmt_duration(c.writer_hold),
        c.cap.as_millis(),
        fmt_duration(c.cap),
        fmt_duration(c.cap),
    );
    b14_table(s, r);
    if let Some(h) = b14(r, Side::Hashlock) {
        let _ = writeln!(
            s,
            "\nRead holds as really held (sleep + wake-up): {} on average, {} at the longest with hashlock; the bound checked in the targets is the longest read hold + 5 ms = {}.",
            fmt_duration(h.actual_hold),
            fmt_duration(h.longest_hold),
            fmt_duration(h.bound())
        );
    }
    s.push('\n');
}

// ---- B15 ----

fn b15_table(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "| variant | sets locked/s | time to lock a set p50 | p99 | max | restarts (deadlocks broken by the budget) | per 1000 sets | BLOCK timeouts | key in two critical sections | Jain |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for v in Variant::ALL {
        let Some(x) = b15(r, v) else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3} |",
            v.label(),
            fmt_count(x.per_sec()),
            fmt_duration(quantile(&x.latency, 0.5)),
            fmt_duration(quantile(&x.latency, 0.99)),
            fmt_duration(max(&x.latency)),
            if v == Variant::Hashlock {
                "— (one command)".to_string()
            } else {
                fmt_count(x.restarts as f64)
            },
            if x.sets == 0 {
                "— (no set locked)".to_string()
            } else {
                format!("{:.1}", x.restarts_per_1000())
            },
            if v == Variant::Hashlock {
                x.timeouts.to_string()
            } else {
                "—".into()
            },
            x.overlaps,
            x.jain()
        );
    }
}

pub(super) fn b15_section(s: &mut String, r: &Results) {
    let c = &r.plan.b15;
    let _ = writeln!(
        s,
        "## B15 — all-or-nothing multi-key locks: LOCK.MACQUIRE vs Redisson's MultiLock\n\n\
         {} clients loop: pick {} distinct keys of a pool of {} at random (the sets overlap), lock all of them, hold {}, unlock them; {} measured per variant. \
         hashlock: `LOCK.MACQUIRE {} k… owner PX 30000 BLOCK ms` (one command: the server grants the whole set at once, in arrival order across keys), \
         `LOCK.MRELEASE`. Redisson-style MultiLock (`RedissonMultiLock.lock()`): the member locks one by one in the order given, each `tryLock(remaining budget)` \
         with Redisson's pub/sub wait; when a member is not had within the attempt's budget, every member taken is unlocked and the attempt starts over (a restart). \
         The budget is members × {} here; **Redisson's default is members × 1500 ms**, so each restart below would cost up to {} instead. \
         With holds of {}, a member busy for the whole budget means a deadlock (two clients each holding a key the other waits for) broken by the timeout. \
         \"Sorted\": every client lists its keys in one global order, which rules the deadlock out (MultiLock does not do it for you). \
         Time to lock a set = from the first request to holding every key, restarts included. \
         \"Key in two critical sections\" is checked by the benchmark on every grant (must be 0).\n",
        c.clients,
        c.set,
        c.pool,
        fmt_duration(c.hold),
        fmt_duration(r.plan.b15_window),
        c.set,
        fmt_duration(c.per_member),
        fmt_duration(Duration::from_millis(1500) * c.set as u32),
        fmt_duration(c.hold),
    );
    b15_table(s, r);
    s.push('\n');
}

// ---- README regions ----

/// The README's "Semaphores" region: the overselling table and the
/// semaphores' server cost.
pub(super) fn semaphores_region(r: &Results) -> String {
    let mut s = String::new();
    let c = &r.plan.b12;
    let _ = writeln!(
        s,
        "The seed's overselling scenario, measured by `make bench` (B12 and B13 in [docs/BENCHMARKS.md](docs/BENCHMARKS.md), same run as the performance table): \
         a stock of {} sold to {} concurrent buyers. \"Oversold\" = sales beyond the stock; \"vs (b)\" divides by the ten segmented locks' sales/s.\n",
        fmt_count(c.stock as f64),
        c.buyers
    );
    b12_table(&mut s, r);
    let _ = writeln!(
        s,
        "\nRedisson's own RSemaphore (its tryAcquire script, last row) sells about as fast: what removes the lock is the semaphore. \
         hashlock's adds a server-side FIFO queue for buyers that wait (`BLOCK`), leased permits the server takes back at their deadline, \
         and permits tied to a connection (`KEEPALIVE`). The fast rows are bound by the benchmark's one client thread, not the server (B12's CPU columns)."
    );
    let _ = writeln!(
        s,
        "\nServer cost per call against Redisson's scripts by EVALSHA (`INFO commandstats`; gain = Redisson µs ÷ hashlock µs):\n"
    );
    b13_rows(&mut s, r, &[Family::Semaphore, Family::Expirable]);
    s
}

/// The README's "Read-write locks" region: RW costs, writer wait, and
/// MACQUIRE against MultiLock.
pub(super) fn rwlocks_region(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Measured by `make bench` (B13–B15 in [docs/BENCHMARKS.md](docs/BENCHMARKS.md), same run as the performance table). \
         Server cost per call against Redisson's read/write lock scripts by EVALSHA (`INFO commandstats`; gain = Redisson µs ÷ hashlock µs):\n"
    );
    b13_rows(&mut s, r, &[Family::Read, Family::Write]);
    let c = &r.plan.b14;
    let _ = writeln!(
        s,
        "\nA writer under a continuous stream of {} overlapping readers (read holds {} ± 50 %): hashlock queues new readers behind a waiting writer; \
         Redisson readers enter past it, so the Redisson-style writer's wait is unbounded — each attempt here was capped at {} and counted as not granted then.\n",
        c.readers,
        fmt_duration(c.hold),
        fmt_duration(c.cap)
    );
    b14_table(&mut s, r);
    let m = &r.plan.b15;
    let _ = writeln!(
        s,
        "\n{} clients locking random overlapping sets of {} keys out of {} (hold {}): one `LOCK.MACQUIRE` against Redisson's MultiLock, which locks the members one by one \
         and, when one stays busy for the attempt's budget (here {} per member; Redisson's default 1500 ms), unlocks everything and starts over.\n",
        m.clients,
        m.set,
        m.pool,
        fmt_duration(m.hold),
        fmt_duration(m.per_member)
    );
    b15_table(&mut s, r);
    s
}

// ---- targets ----

/// (what, gain, hashlock µs, Redisson µs).
type GainRow = (String, Option<f64>, Option<f64>, Option<f64>);

pub(super) fn targets(r: &Results, t: &mut Vec<Target>) {
    // B12: nothing oversold with a lock or a semaphore; (d) ≥ 10× (b).
    for seller in [
        Seller::RedissonLock,
        Seller::RedissonSegments,
        Seller::HashlockLock,
        Seller::Semaphore,
    ] {
        let o = b12(r, seller);
        t.push(Target {
            workload: "B12",
            what: format!("overselling: items oversold, {}", seller.short()),
            measured: o.map_or("—".into(), |o| {
                format!(
                    "{} oversold, {} left ({} sales of {})",
                    o.oversold,
                    o.left,
                    fmt_count(o.sales as f64),
                    fmt_count(o.stock as f64)
                )
            }),
            goal: "0 oversold, 0 left".into(),
            verdict: verdict(o.map(|o| o.oversold == 0 && o.left == 0 && o.sales == o.stock)),
        });
    }
    let (d, b) = (b12(r, Seller::Semaphore), b12(r, Seller::RedissonSegments));
    let x = d
        .zip(b)
        .and_then(|(d, b)| ratio(d.sales_per_sec(), b.sales_per_sec()));
    t.push(Target {
        workload: "B12",
        what:
            "overselling: sales/s, `SEMAPHORE.ACQUIRE stock` ÷ ten segmented Redisson-style locks"
                .into(),
        measured: match (d, b) {
            (Some(d), Some(b)) => format!(
                "{} ({} vs {})",
                fmt_ratio(x),
                fmt_count(d.sales_per_sec()),
                fmt_count(b.sales_per_sec())
            ),
            _ => "—".into(),
        },
        goal: "≥ 10×".into(),
        verdict: verdict(x.map(|x| x >= 10.0)),
    });

    // B13: ≥ 2× per semaphore command, per RW acquire + release.
    for f in Family::ALL {
        let c = b13(r, f);
        let (ha, hr) = f.hashlock_ops();
        let items: Vec<GainRow> = match c {
            None => vec![(
                format!("{} server µs, Redisson ÷ hashlock", f.label()),
                None,
                None,
                None,
            )],
            Some(c) => {
                let (ga, gr, gp) = c.gains();
                let (h1, h2) = (
                    c.hashlock_acquire.us_per_call(),
                    c.hashlock_release.us_per_call(),
                );
                let (r1, r2) = (
                    c.redisson_acquire.us_per_call(),
                    c.redisson_release.us_per_call(),
                );
                if f.pair_target() {
                    let sum = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
                    vec![(
                        format!(
                            "{} acquire + release: server µs, Redisson scripts ÷ hashlock",
                            f.label()
                        ),
                        gp,
                        sum(h1, h2),
                        sum(r1, r2),
                    )]
                } else {
                    vec![
                        (
                            format!("`{ha}`: server µs, Redisson script ÷ hashlock"),
                            ga,
                            h1,
                            r1,
                        ),
                        (
                            format!("`{hr}`: server µs, Redisson script ÷ hashlock"),
                            gr,
                            h2,
                            r2,
                        ),
                    ]
                }
            }
        };
        for (what, gain, h, e) in items {
            t.push(Target {
                workload: "B13",
                what,
                measured: match (gain, h, e) {
                    (Some(g), Some(h), Some(e)) => format!("{g:.2}× ({e:.2} vs {h:.2} µs)"),
                    _ => "—".into(),
                },
                goal: "≥ 2×".into(),
                verdict: verdict(gain.map(|g| g >= 2.0)),
            });
        }
    }

    // B14: the writer waits at most one read hold.
    let h = b14(r, Side::Hashlock);
    t.push(Target {
        workload: "B14",
        what: "writer under a stream of readers: longest write wait (hashlock) vs the longest read hold + 5 ms"
            .into(),
        measured: h.map_or("—".into(), |h| {
            format!(
                "{} (bound {}; {} of {} granted)",
                fmt_duration(h.worst()),
                fmt_duration(h.bound()),
                h.granted,
                h.granted + h.capped
            )
        }),
        goal: "≤ bound, every attempt granted".into(),
        verdict: verdict(h.map(|h| h.capped == 0 && h.granted > 0 && h.worst() <= h.bound())),
    });

    // B15: all or nothing, no deadlock.
    let m = b15(r, Variant::Hashlock);
    t.push(Target {
        workload: "B15",
        what: "LOCK.MACQUIRE of 4 overlapping keys: keys in two critical sections, timeouts".into(),
        measured: m.map_or("—".into(), |m| {
            format!(
                "{} overlaps, {} timeouts ({} sets)",
                m.overlaps,
                m.timeouts,
                fmt_count(m.sets as f64)
            )
        }),
        goal: "0 and 0".into(),
        verdict: verdict(m.map(|m| m.sets > 0 && m.overlaps == 0 && m.timeouts == 0)),
    });
}

// ---- smoke ----

pub(super) fn missing(r: &Results, missing: &mut Vec<String>) {
    if r.ran.contains(&Workload::B12) {
        for seller in Seller::ALL {
            match b12(r, seller) {
                Some(o) if o.sales > 0 && o.sell_out > Duration::ZERO => {}
                _ => missing.push(format!("B12 {}", seller.short())),
            }
        }
    }
    if r.ran.contains(&Workload::B13) {
        for f in Family::ALL {
            match b13(r, f) {
                Some(c) if c.gains().2.is_some() => {}
                _ => missing.push(format!("B13 {}", f.label())),
            }
        }
    }
    if r.ran.contains(&Workload::B14) {
        for side in Side::ALL {
            match b14(r, side) {
                Some(x) if x.granted + x.capped > 0 && x.reads > 0 => {}
                _ => missing.push(format!("B14 {}", side.label())),
            }
        }
    }
    if r.ran.contains(&Workload::B15) {
        for v in Variant::ALL {
            // A MultiLock in livelock may lock no set at all in a short
            // window: the row still measured something if it restarted.
            match b15(r, v) {
                Some(x) if x.sets > 0 || (v != Variant::Hashlock && x.restarts > 0) => {}
                _ => missing.push(format!("B15 {}", v.label())),
            }
        }
    }
}
