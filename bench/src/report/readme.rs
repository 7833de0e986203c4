//! The README's generated tables: `make bench` writes them into README.md
//! between its `<!-- bench:begin NAME -->` and `<!-- bench:end NAME -->`
//! markers (`--readme`), so every benchmark figure in the README comes from
//! one run and the prose cites these tables instead of restating numbers.

use std::fmt::Write as _;
use std::time::Duration;

use super::{SVG_NAME, b1_row, b3_row, clients_word, fmt_ratio, fmt_us, ratio, server_name, utc};
use crate::run::Results;
use crate::timing::{fmt_count, fmt_duration, max, quantile};
use crate::workloads::b2::Renew;
use crate::workloads::b6::Writer;
use crate::workloads::contender::Waiter;
use crate::workloads::pairs::Pairs;

/// The README's "Performance" section, from this run (heading and the
/// generated regions; docs/BENCHMARKS.md carries it too).
pub fn readme_section(r: &Results) -> String {
    let mut s = String::from("## Performance\n\n");
    for (name, text) in readme_regions(r) {
        let _ = writeln!(
            s,
            "<!-- bench:begin {name} -->\n{text}<!-- bench:end {name} -->\n"
        );
    }
    s
}

/// Every generated region of the README: (marker name, markdown).
pub fn readme_regions(r: &Results) -> Vec<(&'static str, String)> {
    vec![
        ("performance", performance_table(r)),
        ("clients", clients_table(r)),
        ("targets", missed_targets(r)),
        ("semaphores", super::family::semaphores_region(r)),
        ("rwlocks", super::family::rwlocks_region(r)),
    ]
}

/// Regions the README may not have (yet): filled when their markers are
/// there, skipped when they are not (the sections that hold them are
/// written separately from the benchmark).
pub const OPTIONAL_REGIONS: [&str; 2] = ["semaphores", "rwlocks"];

/// `readme` with each region's text between its markers. Every region must
/// have its markers, once, except the [`OPTIONAL_REGIONS`], which may also
/// be absent (then the README is left alone there).
pub fn apply_regions(readme: &str, regions: &[(&'static str, String)]) -> Result<String, String> {
    let mut out = readme.to_string();
    for (name, text) in regions {
        let begin = format!("<!-- bench:begin {name} -->");
        let end = format!("<!-- bench:end {name} -->");
        if OPTIONAL_REGIONS.contains(name) && !out.contains(&begin) && !out.contains(&end) {
            continue;
        }
        let (Some(b), Some(e)) = (out.find(&begin), out.find(&end)) else {
            return Err(format!("README has no `{begin}` ... `{end}` markers"));
        };
        if out.matches(&begin).count() != 1 || e < b {
            return Err(format!(
                "README's `{begin}` markers are repeated or out of order"
            ));
        }
        out = format!("{}{begin}\n{text}{}", &out[..b], &out[e..]);
    }
    Ok(out)
}

/// The main table: hashlock against the Redisson-protocol Lua.
fn performance_table(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let _ = writeln!(
        s,
        "Measured by `make bench` on {} ({} CPUs; {}) against {} with the module loaded, commit `{}`, {}. \
         Every variant ran against the same server in one run; ratios are hashlock ÷ the Redisson-protocol Lua (EVALSHA) unless noted.\n",
        m.cpu_model,
        m.cpus_online,
        m.pinning.description,
        server_name(r),
        m.commit,
        utc(m.started)
    );
    let _ = writeln!(
        s,
        "| | hashlock | Redisson-protocol Lua | ratio |\n|---|---:|---:|---:|"
    );
    let cost = |v: Pairs| r.cost.iter().find(|c| c.variant == v);
    if let (Some(h), Some(e)) = (cost(Pairs::Hashlock), cost(Pairs::RedissonSha)) {
        let (a, b) = (h.acquire_new.us_per_call(), e.acquire_new.us_per_call());
        let _ = writeln!(
            s,
            "| server µs per acquire (new key) | {} | {} | {} |",
            fmt_us(a),
            fmt_us(b),
            fmt_ratio(a.zip(b).and_then(|(a, b)| ratio(a, b)))
        );
        let (a, b) = (h.release.us_per_call(), e.release.us_per_call());
        let _ = writeln!(
            s,
            "| server µs per release | {} | {} | {} |",
            fmt_us(a),
            fmt_us(b),
            fmt_ratio(a.zip(b).and_then(|(a, b)| ratio(a, b)))
        );
    }
    for &clients in &r.plan.b1_clients {
        for &pipeline in &r.plan.b1_pipelines {
            if let (Some(h), Some(e)) = (
                b1_row(r, Pairs::Hashlock, clients, pipeline),
                b1_row(r, Pairs::RedissonSha, clients, pipeline),
            ) {
                let _ = writeln!(
                    s,
                    "| acquire+release pairs/s, {}, pipeline {pipeline} | {} | {} | {} |",
                    clients_word(clients),
                    fmt_count(h.pairs_per_sec()),
                    fmt_count(e.pairs_per_sec()),
                    fmt_ratio(ratio(h.pairs_per_sec(), e.pairs_per_sec()))
                );
            }
        }
    }
    let renew = |v: Renew| {
        r.b2.iter()
            .find(|x| x.variant == v)
            .and_then(|x| x.cost.us_per_call())
    };
    if let (Some(h), Some(e), Some(pe)) = (
        renew(Renew::Hashlock),
        renew(Renew::RedissonSha),
        renew(Renew::Pexpire),
    ) {
        let _ = writeln!(
            s,
            "| server µs per renew (PEXPIRE: {pe:.2}) | {h:.2} | {e:.2} | {} |",
            fmt_ratio(ratio(h, e))
        );
    }
    let (k, hold) = (8, Duration::from_micros(100));
    if let (Some(h), Some(e)) = (
        b3_row(r, Waiter::Hashlock, k, hold),
        b3_row(r, Waiter::Redisson, k, hold),
    ) {
        let _ = writeln!(
            s,
            "| 8 clients on one lock, hold 100 µs: acquisitions/s ¹ | {} | {} | {} |",
            fmt_count(h.per_sec()),
            fmt_count(e.per_sec()),
            fmt_ratio(ratio(h.per_sec(), e.per_sec()))
        );
        let _ = writeln!(
            s,
            "| … server commands per acquisition ¹ | {:.2} | {:.2} | |",
            h.server_cmds_per_acq(),
            e.server_cmds_per_acq()
        );
        let _ = writeln!(
            s,
            "| … worst wait ¹ | {} | {} | |",
            fmt_duration(max(&h.wait)),
            fmt_duration(max(&e.wait))
        );
        let _ = writeln!(
            s,
            "| … fairness (Jain) ¹ | {:.3} | {:.3} | |",
            h.jain(),
            e.jain()
        );
    }
    let b4 = |w: Waiter, lease: Duration| r.b4.iter().find(|x| x.waiter == w && x.lease == lease);
    if let Some(&(lease, _)) = r.plan.b4_leases.first()
        && let (Some(h), Some(e)) = (b4(Waiter::Hashlock, lease), b4(Waiter::Redisson, lease))
    {
        let _ = writeln!(
            s,
            "| holder crashed (lease {}): deadline → next holder, p99 ¹ | {} | {} | |",
            fmt_duration(lease),
            fmt_duration(quantile(&h.delay, 0.99)),
            fmt_duration(quantile(&e.delay, 0.99))
        );
    }
    let b7 = |f: fn(&crate::workloads::b7::Variant) -> bool| r.b7.iter().find(|x| f(&x.variant));
    if let (Some(k), Some(w)) = (
        b7(|v| matches!(v, crate::workloads::b7::Variant::Keepalive)),
        b7(|v| matches!(v, crate::workloads::b7::Variant::Watchdog(_))),
    ) {
        let lease = match w.variant {
            crate::workloads::b7::Variant::Watchdog(l) => l,
            _ => Duration::ZERO,
        };
        let _ = writeln!(
            s,
            "| holder process killed (SIGKILL): kill → next holder, p99 (hashlock KEEPALIVE; Redisson-style watchdog with a {} lease ², Redisson's default 30 s makes it 20–30 s) | {} | {} | |",
            fmt_duration(lease),
            fmt_duration(quantile(&k.delay, 0.99)),
            fmt_duration(quantile(&w.delay, 0.99))
        );
    }
    if let Some(o) = &r.b6 {
        let f = |w: Writer| {
            o.fills
                .iter()
                .find(|f| f.writer == w)
                .map(|f| f.bytes_per_lock(o.locks))
        };
        if let (Some(h), Some(p)) = (f(Writer::Hashlock), f(Writer::HsetPexpire)) {
            let _ = writeln!(
                s,
                "| bytes per held lock ({} locks; plain HSET+PEXPIRE hash: {p:.1}) | {h:.1} | {p:.1} | |",
                fmt_count(o.locks as f64)
            );
        }
    }
    // B8: replica-acknowledged grants against the Redisson way.
    let clients = r.plan.b8_clients.iter().copied().max().unwrap_or(50);
    if let (Some(h), Some(w)) = (
        super::targets::b8_row(r, crate::workloads::b8::Variant::Replicas, clients),
        super::targets::b8_row(r, crate::workloads::b8::Variant::ScriptWait, clients),
    ) {
        let _ = writeln!(
            s,
            "| acquire+release pairs/s with one replica's acknowledgement, {} (hashlock `REPLICAS 1`; Lua: acquire script + `WAIT 1` pipelined) | {} | {} | {} |",
            clients_word(clients),
            fmt_count(h.pairs_per_sec()),
            fmt_count(w.pairs_per_sec()),
            fmt_ratio(ratio(h.pairs_per_sec(), w.pairs_per_sec()))
        );
    }
    if let Some(o) = &r.b9 {
        let worst = o
            .tied
            .probe
            .as_ref()
            .map_or(Duration::ZERO, |p| max(&p.rtt));
        let _ = writeln!(
            s,
            "| {} locks tied with KEEPALIVE (renewed by the server): longest PING round trip; CPU per renewal | {}; {} µs | | |",
            fmt_count(o.config.locks as f64),
            fmt_duration(worst),
            fmt_us(o.us_per_renewal()).trim_end_matches(" µs")
        );
    }
    if let Some(o) = &r.b10 {
        let _ = writeln!(
            s,
            "| {} queued locks whose leases end in the same millisecond: server CPU to hand all on; longest PING round trip | {:.0} ms; {} | | |",
            fmt_count(o.keys as f64),
            o.hand_on_cpu * 1e3,
            fmt_duration(max(&o.probe.rtt))
        );
    }
    s.push_str(&footnotes());
    s
}

fn footnotes() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n¹ Redisson-style client: acquire script via EVAL, then SUBSCRIBE and wait for the unlock message or the returned PTTL, as RedissonLock.lock() does.\n\n\
         ² The watchdog renews the lease every third of it from inside the holder process; a killed holder's lock waits out the rest of the lease.\n\n\
         Reproduce: `make bench` (under 10 minutes on 2 cores; `make bench-quick` takes about a minute). \
         It builds the module, starts its own `redis-server` with it, pins the server and the client to different cores when it can, \
         writes every table (B1–B15, with all variants and targets) to `docs/BENCHMARKS.md` and the wait-time chart to `docs/{SVG_NAME}`, \
         and these tables into README.md (`make bench-quick` writes under `target/bench-quick/` and leaves both alone). \
         `VALKEY_SERVER=/path/to/valkey-server cargo run --release -p hashlock-bench -- --server valkey` runs the same against Valkey."
    );
    s
}

/// B11: each client library's default Lock, acquire + release on one client.
fn clients_table(r: &Results) -> String {
    use crate::workloads::b11::Library;
    let mut s = String::new();
    let before = r.b11.iter().find_map(|x| x.before.clone());
    let _ = writeln!(
        s,
        "| library (default `Lock`: KEEPALIVE, blocking acquire; one client) | acquire+release pairs/s | new connections per 1000 acquisitions |{}\n|---|---:|---:|{}",
        before.as_ref().map_or(String::new(), |rev| format!(
            " before (`{rev}`): pairs/s; connections per 1000 |"
        )),
        if before.is_some() { "---:|" } else { "" }
    );
    for lib in Library::ALL {
        let cell = |b: bool| match r
            .b11
            .iter()
            .find(|x| x.library == lib && x.before.is_some() == b)
            .map(|x| &x.outcome)
        {
            Some(Ok(m)) => (
                fmt_count(m.pairs_per_sec()),
                format!("{:.1}", m.connections_per_1000()),
            ),
            Some(Err(_)) => ("not run".into(), String::new()),
            None => ("—".into(), String::new()),
        };
        let (p, c) = cell(false);
        let then = if before.is_some() {
            let (bp, bc) = cell(true);
            format!(" {bp}; {bc} |")
        } else {
            String::new()
        };
        let _ = writeln!(s, "| {} | {p} | {c} |{then}", lib.label());
    }
    let _ = writeln!(
        s,
        "\nDrivers: `bench/clients/pairs.py`, `pairs.js`, `pairs.rs` (B11 in [docs/BENCHMARKS.md](docs/BENCHMARKS.md)), on the benchmark's client CPU."
    );
    s
}

/// Why a target is missed, for those that are (no figures: the table has them).
fn why_missed(what: &str) -> &'static str {
    let reasons: [(&str, &str); 11] = [
        (
            "LOCK.RENEW ÷ PEXPIRE",
            "`LOCK.RENEW` must replicate its new deadline as `PEXPIREAT`, and `RedisModule_Replicate` costs thousands of instructions per call on Redis 7.0 (command lookup plus argument building) whether or not a replica or AOF exists; `PEXPIRE` rewrites its own arguments instead, which a module cannot. It is still cheaper than Redisson's renew script.",
        ),
        (
            "pipeline",
            "the loopback round trip caps what the server's savings can buy one client; with 50 clients the server is the bottleneck.",
        ),
        (
            "acquisitions/s",
            "every hand-off is one network round trip to the next waiter in line; the Redisson-style clients get their rate by letting the releasing client take the lock straight back (see the fairness and worst-wait rows).",
        ),
        (
            "TOKEN",
            "the token is a second key, read and written in place, and a third replicated effect (`SET ... KEEPTTL`).",
        ),
        (
            "server CPU to hand them all on",
            "each lock costs two replicated effects, the key's expiry, and unblocking and answering a client; the server never stalls for it.",
        ),
        (
            "REPLICAS",
            "the one-client latency swings with the machine between runs.",
        ),
        (
            "PING",
            "the longest round trip is this shared machine's own noise as much as the renewals (compare the same figure with nothing tied in B9).",
        ),
        (
            "worst wait",
            "a waiter's wait includes every hand-off before it, each a round trip on a loaded machine.",
        ),
        (
            "÷ ten segmented",
            "the semaphore's sales are bound by the benchmark's one client thread (see server / client CPU in B12), the segmented locks' by round trips and waits, which swing with this shared machine's load.",
        ),
        (
            "Redisson script ÷ hashlock",
            "Redisson's semaphore scripts are short (a GET, then DECRBY or INCRBY); the native command also replicates its effect with `RedisModule_Replicate` (about 2,800 instructions a call on Redis 7.0, a quarter of `SEMAPHORE.ACQUIRE`), looks at the lease set `{key}:timeout` and records its metrics. Counted in instructions (`bench/callgrind.sh`) the gain is 2.1× for ACQUIRE (10,404 against 21,606), 2.0× for RELEASE (11,934 against 23,652), 2.2× for LEASE and 1.7–2.2× for RETURN (Redisson's release script costs 43,600–55,900 as its set varies); the µs figures swing between runs on this machine.",
        ),
        (
            "Redisson scripts ÷ hashlock",
            "the releases are about 3–4× cheaper than Redisson's scripts, the acquisitions hardly (WRITE: about even): a grant replicates its effects (`RedisModule_Replicate`: about 8,900 of the 54,000 instructions of `RWLOCK.ACQUIRE … READ`) and files its hold's deadline and metrics. Counted in instructions (`bench/callgrind.sh`) the gain is 2.3× for READ and 2.4× for WRITE acquire + release; the µs figures swing between runs on this machine.",
        ),
    ];
    reasons
        .iter()
        .find(|(k, _)| what.contains(k))
        .map_or("", |(_, why)| why)
}

/// The targets this run missed, each with its goal, its figure and why.
fn missed_targets(r: &Results) -> String {
    use super::targets::{Verdict, targets};
    let missed: Vec<_> = targets(r)
        .into_iter()
        .filter(|t| t.verdict == Verdict::Missed)
        .collect();
    if missed.is_empty() {
        return "Every target that ran was met in this run.\n".into();
    }
    let mut s = String::new();
    for t in missed {
        let why = why_missed(&t.what);
        let _ = writeln!(
            s,
            "- **{} ({})**: {}, goal {}.{}",
            t.what,
            t.workload,
            t.measured,
            t.goal,
            if why.is_empty() {
                String::new()
            } else {
                format!(" {why}")
            }
        );
    }
    s
}
