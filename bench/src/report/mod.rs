//! The markdown report: provenance, the targets with met / missed, one
//! table per workload with ratios against the reference variant; the
//! README section (`readme`) and the target evaluation (`targets`) live
//! beside it.

mod family;
mod readme;
mod targets;

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

pub use readme::{apply_regions, readme_regions, readme_section};
pub use targets::{Target, Verdict, targets};

use crate::plan::{Mode, Workload};
use crate::run::Results;
use crate::timing::{fmt_count, fmt_duration, max, quantile};
use crate::workloads::b2::Renew;
use crate::workloads::b3;
use crate::workloads::b6::Writer;
use crate::workloads::b8::Variant;
use crate::workloads::contender::Waiter;
use crate::workloads::pairs::Pairs;
use targets::b8_row;

/// The SVG's file name, written next to the markdown.
pub const SVG_NAME: &str = "bench-b3-wait.svg";

pub(crate) fn clients_word(n: usize) -> String {
    if n == 1 {
        "1 client".into()
    } else {
        format!("{n} clients")
    }
}

pub(crate) fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

pub(crate) fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.2}×"))
}

pub(crate) fn fmt_us(us: Option<f64>) -> String {
    us.map_or("—".into(), |u| format!("{u:.2}"))
}

pub(crate) fn b1_row(
    r: &Results,
    variant: Pairs,
    clients: usize,
    pipeline: usize,
) -> Option<&crate::workloads::b1::Row> {
    r.b1.iter().find(|x| {
        x.config.variant == variant && x.config.clients == clients && x.config.pipeline == pipeline
    })
}

pub(crate) fn b3_row(r: &Results, waiter: Waiter, k: usize, hold: Duration) -> Option<&b3::Row> {
    r.b3.iter()
        .find(|x| x.config.waiter == waiter && x.config.k == k && x.config.hold == hold)
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Met => "✅ met",
        Verdict::Missed => "❌ **MISSED**",
        Verdict::NotRun => "not run",
    }
}

pub(crate) fn utc(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

pub(crate) fn server_name(r: &Results) -> String {
    match r.meta.kind {
        testkit::Kind::Redis => format!("Redis {}", r.meta.server_version),
        testkit::Kind::Valkey => format!("Valkey {}", r.meta.server_version),
    }
}

/// The whole report (without the README section).
pub fn markdown(r: &Results, svg_name: Option<&str>) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let p = &r.plan;
    let _ = writeln!(s, "# hashlock benchmarks\n");
    let _ = writeln!(s, "| | |\n|---|---|");
    let _ = writeln!(
        s,
        "| run | {} · mode {} · took {} |",
        utc(m.started),
        p.mode.name(),
        fmt_duration(m.took)
    );
    let _ = writeln!(s, "| commit | `{}` |", m.commit);
    let _ = writeln!(
        s,
        "| server | {} (`{}`), RESP2, module `{}` |",
        server_name(r),
        m.kind,
        m.module
    );
    let _ = writeln!(
        s,
        "| machine | {}, {} CPUs online, load average at start {} |",
        m.cpu_model, m.cpus_online, m.loadavg
    );
    let _ = writeln!(s, "| core pinning | {} |", m.pinning.description);
    let _ = writeln!(
        s,
        "| loopback round trip (PING) | back to back p50 {} / p99 {}; after 2 ms idle p50 {} / p99 {} |",
        fmt_duration(m.rtt_busy.0),
        fmt_duration(m.rtt_busy.1),
        fmt_duration(m.rtt_idle.0),
        fmt_duration(m.rtt_idle.1)
    );
    let took: Vec<String> = m
        .workload_took
        .iter()
        .map(|(w, d)| format!("{w:?} {}", fmt_duration(*d)))
        .collect();
    if !took.is_empty() {
        let _ = writeln!(s, "| time per workload | {} |", took.join(" · "));
    }
    let _ = writeln!(
        s,
        "| client | `hashlock-bench`: Rust, tokio (one thread), redis-rs, one connection per client, hdrhistogram; every variant against this same server in this one run |\n"
    );

    let targets = targets(r);
    let missed = targets
        .iter()
        .filter(|t| t.verdict == Verdict::Missed)
        .count();
    let _ = writeln!(s, "## Targets for hashlock\n");
    if missed == 0 {
        let _ = writeln!(s, "Every target that ran was met.\n");
    } else {
        let _ = writeln!(
            s,
            "**{missed} target(s) missed** in this run (marked below).\n"
        );
    }
    let _ = writeln!(
        s,
        "| | target | measured | goal | result |\n|---|---|---|---|---|"
    );
    for t in &targets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            t.workload,
            t.what,
            t.measured,
            t.goal,
            mark(t.verdict)
        );
    }
    s.push('\n');

    if r.ran.contains(&Workload::B1) {
        b1_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B2) {
        b2_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B3) {
        b3_section(&mut s, r, svg_name);
    }
    if r.ran.contains(&Workload::B4) {
        b4_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B6) {
        b6_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B7) {
        b7_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B8) {
        b8_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B9) {
        b9_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B10) {
        b10_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B11) {
        b11_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B12) {
        family::b12_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B13) {
        family::b13_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B14) {
        family::b14_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B15) {
        family::b15_section(&mut s, r);
    }
    if r.ran.contains(&Workload::B16) {
        b16_section(&mut s, r);
    }
    notes(&mut s);
    s
}

fn b1_section(s: &mut String, r: &Results) {
    let p = &r.plan;
    let _ = writeln!(s, "## B1 — uncontended acquire → release\n");
    let _ = writeln!(
        s,
        "### Server cost per command\n\nOne client, pipeline {}, {} keys per phase × {} round(s), variants interleaved. \
         `INFO commandstats` µs per call (a script's time includes the commands it runs); \
         \"vs EVALSHA\" divides by the Redisson EVALSHA figure.\n",
        crate::workloads::b1::COST_PIPELINE,
        fmt_count(p.cost_keys as f64),
        p.cost_rounds
    );
    let _ = writeln!(
        s,
        "| variant | acquire, new key µs | vs EVALSHA | acquire, re-entrant µs | vs EVALSHA | release µs | vs EVALSHA | acquires/s (client) |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    let base = r.cost.iter().find(|c| c.variant == Pairs::RedissonSha);
    for c in &r.cost {
        let new = c.acquire_new.us_per_call();
        let re = c.acquire_reentrant.and_then(|x| x.us_per_call());
        let rel = c.release.us_per_call();
        let bnew = base.and_then(|b| b.acquire_new.us_per_call());
        let bre = base.and_then(|b| b.acquire_reentrant.and_then(|x| x.us_per_call()));
        let brel = base.and_then(|b| b.release.us_per_call());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.variant.label(),
            fmt_us(new),
            fmt_ratio(new.zip(bnew).and_then(|(a, b)| ratio(a, b))),
            fmt_us(re),
            fmt_ratio(re.zip(bre).and_then(|(a, b)| ratio(a, b))),
            fmt_us(rel),
            fmt_ratio(rel.zip(brel).and_then(|(a, b)| ratio(a, b))),
            fmt_count(c.acquire_new.per_sec()),
        );
    }
    let _ = writeln!(
        s,
        "\n### Throughput\n\n{} keys; each client owns its slice of them; pipeline P = P acquires in one round trip, then the P releases in the next. \
         Each row: {} slices of {} (after {} warm-up each), the variants taking turns slice by slice. Round trip = one request of P commands, client side. \
         Server µs/call = acquire and release together. Server / client CPU = share of one core each used \
         (a client near 100 % means the row measures the client, not the server).\n",
        fmt_count(p.b1_keys as f64),
        p.b1_slices,
        fmt_duration(p.b1_slice),
        fmt_duration(p.b1_warmup)
    );
    let _ = writeln!(
        s,
        "| clients | pipeline | variant | pairs/s | vs EVALSHA | round trip p50 | round trip p99 | server µs/call | server CPU | client CPU |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &clients in &p.b1_clients {
        for &pipeline in &p.b1_pipelines {
            let base = b1_row(r, Pairs::RedissonSha, clients, pipeline).map(|x| x.pairs_per_sec());
            for v in Pairs::ALL {
                let Some(row) = b1_row(r, v, clients, pipeline) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "| {clients} | {pipeline} | {} | {} | {} | {} | {} | {} | {:.0} % | {:.0} % |",
                    v.label(),
                    fmt_count(row.pairs_per_sec()),
                    fmt_ratio(base.and_then(|b| ratio(row.pairs_per_sec(), b))),
                    fmt_duration(quantile(&row.round_trip, 0.5)),
                    fmt_duration(quantile(&row.round_trip, 0.99)),
                    fmt_us(row.server_us_per_call()),
                    row.server.server_busy() * 100.0,
                    row.client_busy * 100.0
                );
            }
        }
    }
    // One client is round-trip bound: a fixed cost per round trip that no
    // server-side saving removes caps the ratio. Computed from this run.
    let rtt = r.meta.rtt_busy.0.as_secs_f64() * 1e6;
    for &pipeline in p.b1_pipelines.iter().filter(|&&p| p > 1) {
        let h = b1_row(r, Pairs::Hashlock, 1, pipeline).and_then(|x| x.server_us_per_call());
        let e = b1_row(r, Pairs::RedissonSha, 1, pipeline).and_then(|x| x.server_us_per_call());
        if let (Some(h), Some(e)) = (h, e)
            && rtt > 0.0
        {
            let n = pipeline as f64;
            let _ = writeln!(
                s,
                "\nWith 1 client every round trip also carries a fixed cost no server-side saving removes: the loopback round trip, \
                     {rtt:.0} µs here (PING p50, as pinned). With the server µs/call measured above (hashlock {h:.2}, EVALSHA {e:.2}), \
                     pipeline {pipeline} can gain at most ({rtt:.0} + {pipeline}·{e:.2}) ÷ ({rtt:.0} + {pipeline}·{h:.2}) = {:.2}× at 1 client on this machine.",
                (rtt + n * e) / (rtt + n * h)
            );
        }
    }
    s.push('\n');
}

fn b2_section(s: &mut String, r: &Results) {
    let p = &r.plan;
    let _ = writeln!(
        s,
        "## B2 — renew (watchdog)\n\nThe same {} held locks renewed by each variant in turn, one client, pipeline {}, {} round(s).\n",
        fmt_count(p.b2_keys as f64),
        crate::workloads::b1::COST_PIPELINE,
        p.b2_rounds
    );
    let _ = writeln!(
        s,
        "| renew | server µs/call | vs PEXPIRE | renews/s (client) |\n|---|---:|---:|---:|"
    );
    let floor =
        r.b2.iter()
            .find(|x| x.variant == Renew::Pexpire)
            .and_then(|x| x.cost.us_per_call());
    for row in &r.b2 {
        let us = row.cost.us_per_call();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            row.variant.label(),
            fmt_us(us),
            fmt_ratio(us.zip(floor).and_then(|(a, b)| ratio(a, b))),
            fmt_count(row.cost.per_sec())
        );
    }
    s.push('\n');
}

fn b3_section(s: &mut String, r: &Results, svg_name: Option<&str>) {
    let p = &r.plan;
    let _ = writeln!(
        s,
        "## B3 — contended hand-off\n\nK clients loop lock → hold → unlock on one key; each row: {} slices of {} (after {} warm-up each), the variants taking turns slice by slice. \
         Hand-off = a release is sent → the next acquire returns (whoever gets it). Wait = one lock() call. \
         Server cmds/acq = `total_commands_processed` delta ÷ acquisitions (commands run inside scripts count); \
         client reqs/acq = requests the clients sent (SUBSCRIBE/UNSUBSCRIBE included). \
         Bound = (K−1)·(hold + hand-off p99) + 5 ms. \
         The holder holds by sleeping (a critical section waiting on I/O); actual hold = the mean it really held, the sleep plus the wake-up. \
         Redisson-style waits for the unlock message or the returned PTTL, as RedissonLock.lock() does.\n",
        p.b3_slices,
        fmt_duration(p.b3_slice),
        fmt_duration(p.b3_warmup)
    );
    let _ = writeln!(
        s,
        "| K | hold | variant | acq/s | vs Redisson | hand-off p50 | hand-off p99 | wait p50 | wait p99 | worst wait | bound | server cmds/acq | client reqs/acq | Jain | actual hold |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &k in &p.b3_clients {
        for &hold in &p.b3_holds {
            let base = b3_row(r, Waiter::Redisson, k, hold).map(|x| x.per_sec());
            for w in Waiter::ALL {
                let Some(row) = b3_row(r, w, k, hold) else {
                    continue;
                };
                let worst = max(&row.wait);
                let bound = row.worst_wait_bound();
                let _ = writeln!(
                    s,
                    "| {k} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} | {} | {:.2} | {:.2} | {:.3} | {} |",
                    fmt_duration(hold),
                    w.label(),
                    fmt_count(row.per_sec()),
                    fmt_ratio(base.and_then(|b| ratio(row.per_sec(), b))),
                    fmt_duration(quantile(&row.handoff, 0.5)),
                    fmt_duration(quantile(&row.handoff, 0.99)),
                    fmt_duration(quantile(&row.wait, 0.5)),
                    fmt_duration(quantile(&row.wait, 0.99)),
                    fmt_duration(worst),
                    if worst > bound { " ⚠" } else { "" },
                    fmt_duration(bound),
                    row.server_cmds_per_acq(),
                    row.client_reqs_per_acq(),
                    row.jain(),
                    if hold.is_zero() {
                        "—".to_string()
                    } else {
                        fmt_duration(row.actual_hold())
                    }
                );
            }
        }
    }
    // What the target row is made of, from this run's numbers: a cycle is
    // hold + hand-off; medians give the ratio without the machine's stalls.
    let (k, hold) = (8, Duration::from_micros(100));
    if let (Some(h), Some(e)) = (
        b3_row(r, Waiter::Hashlock, k, hold),
        b3_row(r, Waiter::Redisson, k, hold),
    ) {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let (hh, eh) = (us(quantile(&h.handoff, 0.5)), us(quantile(&e.handoff, 0.5)));
        let (h_hold, e_hold) = (us(h.actual_hold()), us(e.actual_hold()));
        let _ = writeln!(
            s,
            "\nAt K = {k}, hold {}: one lock cycle is the hold (as really held: hashlock {h_hold:.0} µs, Redisson-style {e_hold:.0} µs) \
             plus a hand-off. With the median hand-offs \
             (hashlock {hh:.0} µs, Redisson-style {eh:.0} µs) the cycles would be {:.0} µs and {:.0} µs, a ratio of {:.2}×; \
             the measured acquisitions/s give mean cycles of {:.0} µs and {:.0} µs ({:.2}×). \
             The difference is the hand-off tail: p99 {} and {} (this machine's loopback PING p99: {}).",
            fmt_duration(hold),
            h_hold + hh,
            e_hold + eh,
            (e_hold + eh) / (h_hold + hh),
            1e6 / h.per_sec().max(1e-9),
            1e6 / e.per_sec().max(1e-9),
            ratio(h.per_sec(), e.per_sec()).unwrap_or(0.0),
            fmt_duration(quantile(&h.handoff, 0.99)),
            fmt_duration(quantile(&e.handoff, 0.99)),
            fmt_duration(r.meta.rtt_busy.1)
        );
    }
    if let Some(svg) = svg_name {
        let _ = writeln!(
            s,
            "\n![B3 wait-time distributions per variant]({svg})\n\n*Wait per lock() call, percentile distribution, one panel per K and hold ({svg}).*"
        );
    }
    s.push('\n');
}

fn b4_section(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "## B4 — crashed holder\n\nThe holder takes the lock with the lease below and its connection drops without a release while {} clients wait \
         (hashlock: BLOCK, handed on at the deadline by the module's timer; Redisson-style: no unlock message comes, waiters sleep up to the PTTL; \
         polling: next poll). Delay = lease deadline (acquire sent + lease: an upper bound by one round trip) → next acquisition.\n",
        r.plan.b4_waiters
    );
    let _ = writeln!(
        s,
        "| lease | variant | crashes | delay p50 | delay p99 | delay max | acquired before the deadline |\n|---:|---|---:|---:|---:|---:|---:|"
    );
    for &(lease, _) in &r.plan.b4_leases {
        for w in Waiter::ALL {
            let Some(row) = r.b4.iter().find(|x| x.waiter == w && x.lease == lease) else {
                continue;
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                fmt_duration(lease),
                w.label(),
                row.delay.len() + row.early,
                fmt_duration(quantile(&row.delay, 0.5)),
                fmt_duration(quantile(&row.delay, 0.99)),
                fmt_duration(max(&row.delay)),
                row.early
            );
        }
    }
    s.push('\n');
}

fn b6_section(s: &mut String, r: &Results) {
    let Some(o) = &r.b6 else { return };
    let _ = writeln!(
        s,
        "## B6 — memory\n\n{} locks held at once (owner `<uuid>:<thread>`, lease 1 h); bytes per lock = `used_memory` delta ÷ locks. \
         Residual = `used_memory` after releasing / deleting them all, minus the baseline before the fill. Keys present before B6: {}.\n",
        fmt_count(o.locks as f64),
        o.keys_before
    );
    let _ = writeln!(
        s,
        "| written by | bytes/lock | vs plain hash | MEMORY USAGE (one key) | residual after release | settled in |\n|---|---:|---:|---:|---:|---:|"
    );
    let plain = o
        .fills
        .iter()
        .find(|f| f.writer == Writer::HsetPexpire)
        .map(|f| f.bytes_per_lock(o.locks));
    for f in &o.fills {
        let b = f.bytes_per_lock(o.locks);
        let _ = writeln!(
            s,
            "| {} | {b:.1} | {} | {} B | {:+} B | {} |",
            f.writer.label(),
            plain.map_or("—".into(), |p| format!("{:+.1} B", b - p)),
            f.memory_usage,
            f.residual,
            fmt_duration(f.settled_after)
        );
    }
    s.push('\n');
}

fn b8_section(s: &mut String, r: &Results) {
    let p = &r.plan;
    let ack = crate::workloads::b8::ACK_MS;
    let _ = writeln!(s, "## B8 — surviving failover: `REPLICAS 1` and `TOKEN`\n");
    let _ = writeln!(
        s,
        "### Replica-acknowledged acquire\n\n\
         A primary with one replica, started for B8 ({}). C clients loop acquire → release on fresh keys of their own; \
         only the acquire is acknowledged. `REPLICAS 1` = `LOCK.ACQUIRE k o PX 30000 REPLICAS 1 {ack}` then `LOCK.RELEASE`; \
         script + `WAIT 1` = Redisson's acquire script (EVALSHA) and `WAIT 1 {ack}` in one pipeline, then the release script \
         (Redisson's synced eval would also WAIT after the release); no acknowledgement = plain `LOCK.ACQUIRE` / `LOCK.RELEASE`. \
         Each row: {} slices of {} (after {} warm-up each), the variants taking turns slice by slice. \
         Latency = client side, acquire sent → release answered (\"acquire\": until the acquire, and WAIT, answered). \
         Primary µs/call = its commandstats over what the variant sends (WAIT included).\n",
        r.b8_setup,
        p.b8_slices,
        fmt_duration(p.b8_slice),
        fmt_duration(p.b8_warmup),
    );
    let _ = writeln!(
        s,
        "| clients | variant | pairs/s | vs script + WAIT | latency p50 | latency p99 | acquire p50 | acquire p99 | primary µs/call | primary CPU | client CPU |
|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &clients in &p.b8_clients {
        let base = b8_row(r, Variant::ScriptWait, clients).map(|x| x.pairs_per_sec());
        for v in Variant::ALL {
            let Some(row) = b8_row(r, v, clients) else {
                continue;
            };
            let _ = writeln!(
                s,
                "| {clients} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} % | {:.0} % |",
                v.label(),
                fmt_count(row.pairs_per_sec()),
                fmt_ratio(base.and_then(|b| ratio(row.pairs_per_sec(), b))),
                fmt_duration(quantile(&row.pair, 0.5)),
                fmt_duration(quantile(&row.pair, 0.99)),
                fmt_duration(quantile(&row.acquire, 0.5)),
                fmt_duration(quantile(&row.acquire, 0.99)),
                fmt_us(row.server_us_per_call()),
                row.server.server_busy() * 100.0,
                row.client_busy * 100.0
            );
        }
    }
    if let Some(tc) = &r.b8_token {
        let _ = writeln!(
            s,
            "\n### Fencing token cost\n\n\
             One client, pipeline 16, {} free locks per phase; first one `TOKEN` acquisition of each (it creates the lock's counter), \
             then {} round(s) each with and without `TOKEN`, taking turns, on the main (standalone) server. `INFO commandstats` µs per \
             `LOCK.ACQUIRE`: a token acquire also reads and writes the counter `redisson_lock_token:{{key}}` and replicates it as \
             `SET ... KEEPTTL` (a third effect after HSET and PEXPIREAT). The counter has no TTL, so every acquisition of a lock name \
             but its first finds it: the steady state.\n\n\
             | acquire of a free lock | calls | µs/call | vs without |\n|---|---:|---:|---:|\n\
             | without TOKEN | {} | {} | 1.00× |\n| with TOKEN (counter exists) | {} | {} | {} |\n\
             | with TOKEN, a name's first (creates the counter) | {} | {} | {} |",
            fmt_count(p.b8_token_keys as f64),
            p.b8_token_rounds,
            fmt_count(tc.plain.calls as f64),
            fmt_us(tc.plain.us_per_call()),
            fmt_count(tc.token.calls as f64),
            fmt_us(tc.token.us_per_call()),
            fmt_ratio(tc.ratio()),
            fmt_count(tc.token_first.calls as f64),
            fmt_us(tc.token_first.us_per_call()),
            fmt_ratio(tc.first_ratio()),
        );
    }
    s.push('\n');
}

fn b7_section(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "## B7 — holder process killed (SIGKILL)\n\nThe holder is a process of its own (`hashlock-bench __holder`) that takes the lock and is killed with SIGKILL \
         while {} clients wait on their own connections. Delay = the kill (just before `kill(2)`) → the first waiter's acquisition returns, client side. \
         KEEPALIVE: the server releases the lock when the dead process's connection closes and hands it to the head of the queue. \
         Plain lease: the waiters are handed the lock at its deadline; the holder dies at a uniformly random moment of its lease. \
         Redisson-style watchdog: the holder renews its lease every third of it from inside the process (the renewals die with it); \
         the waiters wait Redisson's way (EVAL + pub/sub, sleeping up to the PTTL: no unlock message ever comes from a dead holder). \
         It is measured with a short lease; with Redisson's default watchdog (30 s lease renewed every 10 s) the wait is the rest of the lease, 20–30 s.\n",
        r.plan.b7_waiters
    );
    let _ = writeln!(
        s,
        "| holder | kills | kill → grant p50 | p99 | max | granted before the kill |\n|---|---:|---:|---:|---:|---:|"
    );
    for row in &r.b7 {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            row.variant.label(),
            row.delay.len() + row.early,
            fmt_duration(quantile(&row.delay, 0.5)),
            fmt_duration(quantile(&row.delay, 0.99)),
            fmt_duration(max(&row.delay)),
            row.early
        );
    }
    let _ = writeln!(
        s,
        "\n\"Granted before the kill\": for KEEPALIVE a double grant (must be 0); for a plain lease it can only mean the lease ran out before a late kill (the machine delayed the killer).\n"
    );
}

fn b9_section(s: &mut String, r: &Results) {
    let Some(o) = &r.b9 else { return };
    let c = &o.config;
    let _ = writeln!(
        s,
        "## B9 — KEEPALIVE at scale\n\n{} locks tied to one connection with a {} lease: the server renews each every {} \
         ({} renewals/s expected). A probe sends PING back to back on its own connection and times every round trip, \
         on a server of its own (pinned like the others) with a replica link (a fake replica reading the stream): \
         first with nothing tied (the floor: this machine's own noise), then with every lock tied (after one lease, in steady state), \
         then while the connection holding them all closes (every lock released). \
         CPU per renewal = server `used_cpu_user + used_cpu_sys` delta ÷ `lock_keepalive_renewed` delta over the tied window \
         (\"net\": minus the idle server's CPU over the same time), both over windows without the probe; bytes per renewal = `master_repl_offset` delta ÷ renewals. \
         Tying them took {} (pipelined). Priority: {}.\n",
        fmt_count(c.locks as f64),
        fmt_duration(c.lease),
        fmt_duration(c.lease / 3),
        fmt_count(c.locks as f64 * 3.0 / c.lease.as_secs_f64()),
        fmt_duration(o.tie_took),
        match &o.realtime {
            Ok(()) => "server and probe at real-time priority (SCHED_FIFO 10), so that other processes on this shared machine do not pass for server stalls".to_string(),
            Err(why) => format!("normal (real-time priority refused: {why}); other processes' time slices show up in the round trips"),
        }
    );
    let _ = writeln!(
        s,
        "| phase | time | PINGs | round trip p50 | p99 | p99.9 | max | round trips > {} | renewals/s | server CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        fmt_duration(crate::workloads::b9::STALL)
    );
    for (name, p) in [
        ("nothing tied (floor)", &o.idle),
        ("all tied, renewing", &o.tied),
        ("holder's connection closes", &o.closing),
    ] {
        let Some(probe) = &p.probe else { continue };
        let h = &probe.rtt;
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} % |",
            fmt_duration(p.elapsed),
            fmt_count(h.len() as f64),
            fmt_duration(quantile(h, 0.5)),
            fmt_duration(quantile(h, 0.99)),
            fmt_duration(quantile(h, 0.999)),
            fmt_duration(max(h)),
            probe.over_stall,
            fmt_count(p.renewals_per_sec()),
            p.cpu_share() * 100.0
        );
    }
    let _ = writeln!(
        s,
        "\nThe floor row is the same probe with nothing tied at all: round trips over {} there are this machine's \
         (a virtual machine: its vCPUs are descheduled now and then, the kernel counts steal time, and interrupts preempt even real-time threads), not the module's. \
         The module's renewal batches show in p99 and p99.9: about the scheduler's 1 ms budget per batch.",
        fmt_duration(crate::workloads::b9::STALL)
    );
    let _ = writeln!(
        s,
        "\n| per renewal | |\n|---|---:|\n| server CPU (quiet window: {} renewals/s, server {:.1} % of a core; nothing tied: {:.1} %) | {} µs ({} µs net) |\n| replication bytes | {} B |\n| locks still held after the tied windows | {} of {} |\n| all {} released after the close in | {} ({} released) |\n",
        fmt_count(o.tied_quiet.renewals_per_sec()),
        o.tied_quiet.cpu_share() * 100.0,
        o.idle_quiet.cpu_share() * 100.0,
        fmt_us(o.us_per_renewal()),
        fmt_us(o.us_per_renewal_net()),
        o.bytes_per_renewal()
            .map_or("—".into(), |b| format!("{b:.1}")),
        fmt_count(o.held_after as f64),
        fmt_count(c.locks as f64),
        fmt_count(c.locks as f64),
        fmt_duration(o.release_took),
        fmt_count(o.released as f64)
    );
}

fn b10_section(s: &mut String, r: &Results) {
    let Some(o) = &r.b10 else { return };
    let _ = writeln!(
        s,
        "## B10 — queued locks sharing one deadline\n\n{} held locks, each with one waiter blocked on its own connection \
         (`LOCK.ACQUIRE ... BLOCK 0`), on a server of their own (pinned like the others); then every lock's deadline is moved to the \
         same millisecond 3 s ahead (`PEXPIREAT`, which schedules each lock's hand-on: \"arming\"). Server CPU = `used_cpu_user + used_cpu_sys` \
         delta: for arming, and from 300 ms before the deadline until the last waiter has its reply. A probe sends one PING a millisecond \
         meanwhile. With one server timer per queued key (before the module's scheduler) Redis's timer table probed quadratically: \
         16,000 keys took 11.5 s of server time and stalled PING for 2.9 s.{}{}\n",
        fmt_count(o.keys as f64),
        match o.capped_by {
            Some(limit) => format!(
                " The open-file limit ({limit}) capped the keys here: every waiter is a connection in this process and in the server."
            ),
            None => String::new(),
        },
        match &o.realtime {
            Ok(()) => " Server and probe at real-time priority.".to_string(),
            Err(why) => format!(" Normal priority (real-time refused: {why})."),
        }
    );
    let _ = writeln!(
        s,
        "| keys | arm: server CPU | hand on: server CPU | per key | deadline → last reply | PING p99 | p99.9 | max | PINGs > {} |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        fmt_duration(crate::workloads::b10::STALL)
    );
    let h = &o.probe.rtt;
    let _ = writeln!(
        s,
        "| {} | {:.0} ms | {:.0} ms | {:.1} µs | {} | {} | {} | {} | {} |\n",
        fmt_count(o.keys as f64),
        o.arm_cpu * 1e3,
        o.hand_on_cpu * 1e3,
        o.hand_on_cpu * 1e6 / o.keys.max(1) as f64,
        fmt_duration(o.last_grant),
        fmt_duration(quantile(h, 0.99)),
        fmt_duration(quantile(h, 0.999)),
        fmt_duration(max(h)),
        o.probe.over_stall
    );
}

fn b11_section(s: &mut String, r: &Results) {
    if r.b11.is_empty() {
        return;
    }
    let before = r.b11.iter().find_map(|x| x.before.clone());
    let _ = writeln!(
        s,
        "## B11 — the client libraries\n\nEach library's default `Lock` (KEEPALIVE, blocking acquire) doing acquire + release in a loop on one client \
         ({} each, after 50 pairs of warm-up), against this run's server: pairs per second, and the connections the server accepted meanwhile \
         per 1000 acquisitions (counted by the driver on its own client). Drivers: `bench/clients/pairs.py`, `pairs.js`, `pairs.rs`; \
         they run as this benchmark's children, so on its client CPU when it pins.{}\n",
        fmt_duration(r.plan.b11_each),
        match &before {
            Some(rev) => format!(
                " \"before\": the same drivers on the libraries of `{rev}` (`--clients-before {rev}`), taking turns with this checkout's."
            ),
            None => String::new(),
        }
    );
    if before.is_some() {
        let _ = writeln!(
            s,
            "| library | pairs/s before | new connections per 1000 acquisitions before | pairs/s | new connections per 1000 acquisitions | pairs/s ratio |\n|---|---:|---:|---:|---:|---:|"
        );
    } else {
        let _ = writeln!(
            s,
            "| library | pairs/s | new connections per 1000 acquisitions |\n|---|---:|---:|"
        );
    }
    let cell = |m: Option<&Result<crate::workloads::b11::Measured, String>>| match m {
        Some(Ok(m)) => (
            fmt_count(m.pairs_per_sec()),
            format!("{:.1}", m.connections_per_1000()),
        ),
        Some(Err(e)) => (format!("not run: {e}"), String::new()),
        None => ("—".into(), String::new()),
    };
    for lib in crate::workloads::b11::Library::ALL {
        let now = r
            .b11
            .iter()
            .find(|x| x.library == lib && x.before.is_none())
            .map(|x| &x.outcome);
        let then = r
            .b11
            .iter()
            .find(|x| x.library == lib && x.before.is_some())
            .map(|x| &x.outcome);
        let (p, c) = cell(now);
        if before.is_some() {
            let (bp, bc) = cell(then);
            let ratio = match (now, then) {
                (Some(Ok(a)), Some(Ok(b))) => {
                    fmt_ratio(ratio(a.pairs_per_sec(), b.pairs_per_sec()))
                }
                _ => String::new(),
            };
            let _ = writeln!(s, "| {} | {bp} | {bc} | {p} | {c} | {ratio} |", lib.label());
        } else {
            let _ = writeln!(s, "| {} | {p} | {c} |", lib.label());
        }
    }
    let _ = writeln!(s);
}

/// etcd's Election, cited (not run here): where its takeover time comes from.
pub const ETCD_ELECTION: &str = "etcd's `concurrency.Election` (not run here): a candidate's campaign key lives on its \
session's lease, so a leader whose process dies is replaced when that lease expires — up to the session TTL after its \
last keep-alive, 60 s by default (`defaultSessionTTL = 60` in etcd's client, \
[clientv3/concurrency/session.go](https://github.com/etcd-io/etcd/blob/v3.2.0-rc.0/clientv3/concurrency/session.go); \
`concurrency.WithTTL` sets it). Observers learn of the change through a watch. The etcd cluster's own leader (Raft) \
fails over after its election timeout, 1000 ms by default with a 100 ms heartbeat \
([etcd tuning guide](https://etcd.io/docs/v3.5/tuning/)).";

fn b16_section(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "## B16 — leader election: the leader process killed (SIGKILL)\n\nThe leader is a process of its own (`hashlock-bench __holder`), \
         elected on one key; {} more candidates wait on their own connections and an observer watches. Per kill, from just before `kill(2)`: \
         **new leader** = the head of the queue's campaign returns (it knows it leads); **observer** = an observer knows who leads. \
         hashlock: candidates campaign with `LOCK.ACQUIRE key id PX 30000 BLOCK 0 KEEPALIVE TOKEN` (the token is the term); the observer \
         is subscribed to the key's keyspace channel (`notify-keyspace-events Kd`, on for this workload only) and reads `LOCK.INFO` at \
         each event (the library's `observe()`). Redisson-style: the leader holds an RLock renewed by a watchdog from inside the process \
         (the renewals die with it); candidates wait Redisson's way (EVAL + pub/sub, sleeping up to the PTTL: a lapse publishes nothing), \
         and so does the observer, which then reads the hash; measured with a short lease — with Redisson's default (30 s renewed every \
         10 s) the wait is the rest of the lease, 20–30 s. \
         \"Leaders before the kill\": for hashlock two leaders at once (must be 0); for the watchdog a lease that ran out before the kill \
         (the machine delayed a renewal), whose kill is run again.\n",
        r.plan.b16_candidates
    );
    let _ = writeln!(
        s,
        "| leader | kills | new leader p50 | p99 | max | observer p50 | p99 | max | terms grow | leaders before the kill |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    );
    for row in &r.b16 {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.variant.label(),
            row.leader.len() + row.early,
            fmt_duration(quantile(&row.leader, 0.5)),
            fmt_duration(quantile(&row.leader, 0.99)),
            fmt_duration(max(&row.leader)),
            fmt_duration(quantile(&row.observer, 0.5)),
            fmt_duration(quantile(&row.observer, 0.99)),
            fmt_duration(max(&row.observer)),
            match row.variant {
                crate::workloads::b16::Variant::Hashlock => {
                    if row.terms_grow { "yes" } else { "NO" }
                }
                crate::workloads::b16::Variant::Watchdog(_) => "— (no term)",
            },
            row.early
        );
    }
    let _ = writeln!(s, "\n{ETCD_ELECTION}\n");
}

fn notes(s: &mut String) {
    let _ = writeln!(
        s,
        "## How this was measured\n\n\
         - One server, started by the benchmark with the module loaded (`io-threads 1`, no persistence); every variant runs against it in one run, interleaved per configuration.\n\
         - Redisson variants run our own Lua written from Redisson's wire protocol (tryLockInnerAsync, unlockInnerAsync with PUBLISH, renewExpiration), with Redisson's KEYS/ARGV layout and `<uuid>:<thread>` owners; \"full-text EVAL\" sends the script text every call as Redisson does.\n\
         - B12–B15 (the Redisson family) run Redisson's semaphore, read-write and lock scripts as the repository's own texts (`crates/testkit/src/redisson.rs`, written from the documented protocol) by EVALSHA, as Redisson 4.x sends them; their Redisson-style clients are threads of one Redisson client process: one pub/sub connection, a per-channel latch, an unlock message waking one waiting thread (a read-write `1` wakes all), waits bounded by the returned PTTL — the kinder model for Redisson than B3's one process per client.\n\
         - Client sleeps (a hold, a poll interval, Redisson's wait for the PTTL) are woken by a timer thread waiting in the kernel with 1 ns slack, so \"every 1 ms\" is 1 ms plus the machine's wake-up latency, not tokio's 1 ms timer granularity; B3 shows the holds as they really were.\n\
         - Server instructions per command (callgrind, every variant): `bench/callgrind.sh`.\n\
         - Replies are checked on every call (a wrong reply aborts the run), and nothing here is asserted on timing: targets are reported, not enforced.\n\
         - Reproduce: `make bench` (full) or `make bench-quick`; `cargo run --release -p hashlock-bench -- --help` for options (`--server valkey`, `--only b3`, `--no-pin`).\n"
    );
}

/// Every row a complete run must have, as (workload, description); used by
/// the smoke test.
pub fn missing_rows(r: &Results) -> Vec<String> {
    let p = &r.plan;
    let mut missing = Vec::new();
    for &clients in &p.b1_clients {
        for &pipeline in &p.b1_pipelines {
            for v in Pairs::ALL {
                match b1_row(r, v, clients, pipeline) {
                    Some(row) if row.pairs > 0 && row.server_us_per_call().is_some() => {}
                    _ => missing.push(format!("B1 {} {clients}c p{pipeline}", v.label())),
                }
            }
        }
    }
    for v in Pairs::ALL {
        match r.cost.iter().find(|c| c.variant == v) {
            Some(c)
                if c.acquire_new.us_per_call().is_some() && c.release.us_per_call().is_some() => {}
            _ => missing.push(format!("B1 cost {}", v.label())),
        }
    }
    for v in Renew::ALL {
        if r.b2
            .iter()
            .find(|x| x.variant == v)
            .and_then(|x| x.cost.us_per_call())
            .is_none()
        {
            missing.push(format!("B2 {}", v.label()));
        }
    }
    for &k in &p.b3_clients {
        for &hold in &p.b3_holds {
            for w in Waiter::ALL {
                match b3_row(r, w, k, hold) {
                    Some(row) if row.acquisitions > 0 => {}
                    _ => missing.push(format!("B3 {} K={k} hold {hold:?}", w.label())),
                }
            }
        }
    }
    for &(lease, _) in &p.b4_leases {
        for w in Waiter::ALL {
            match r.b4.iter().find(|x| x.waiter == w && x.lease == lease) {
                Some(row) if !row.delay.is_empty() => {}
                _ => missing.push(format!("B4 {} lease {lease:?}", w.label())),
            }
        }
    }
    match &r.b6 {
        Some(o) if o.fills.len() == 2 => {}
        _ => missing.push("B6".into()),
    }
    for &clients in &p.b8_clients {
        for v in Variant::ALL {
            match b8_row(r, v, clients) {
                Some(row) if row.pairs > 0 && row.server_us_per_call().is_some() => {}
                _ => missing.push(format!("B8 {} {clients}c", v.label())),
            }
        }
    }
    if r.b8_token.as_ref().and_then(|t| t.ratio()).is_none() {
        missing.push("B8 token cost".into());
    }
    if r.b7.len() != 3 || r.b7.iter().any(|x| x.delay.is_empty()) {
        missing.push("B7".into());
    }
    match &r.b9 {
        Some(o)
            if o.tied_quiet.renewed > 0
                && o.tied.probe.as_ref().is_some_and(|p| !p.rtt.is_empty()) => {}
        _ => missing.push("B9".into()),
    }
    if r.b10
        .as_ref()
        .is_none_or(|o| o.keys == 0 || o.probe.rtt.is_empty())
    {
        missing.push("B10".into());
    }
    // The Rust libraries always run (they are in this binary); Python and
    // Node.js need their environments (make bench prepares them).
    for lib in [
        crate::workloads::b11::Library::RustSync,
        crate::workloads::b11::Library::RustTokio,
    ] {
        if r.ran.contains(&Workload::B11)
            && !r
                .b11
                .iter()
                .any(|x| x.library == lib && x.before.is_none() && x.outcome.is_ok())
        {
            missing.push(format!("B11 {}", lib.label()));
        }
    }
    family::missing(r, &mut missing);
    if r.ran.contains(&Workload::B16)
        && (r.b16.len() != 2
            || r.b16
                .iter()
                .any(|x| x.leader.is_empty() || x.observer.is_empty()))
    {
        missing.push("B16".into());
    }
    if p.mode == Mode::Smoke && targets(r).iter().any(|t| t.verdict == Verdict::NotRun) {
        missing.push("a target could not be evaluated".into());
    }
    missing
}
