//! The targets for hashlock, evaluated on one run: met, missed, or
//! not run (that workload was not selected).

use std::time::Duration;

use super::{b1_row, b3_row, clients_word, fmt_ratio, ratio};
use crate::run::Results;
use crate::timing::{fmt_count, fmt_duration, max, quantile};
use crate::workloads::b2::Renew;
use crate::workloads::b6::Writer;
use crate::workloads::b8::Variant;
use crate::workloads::contender::Waiter;
use crate::workloads::pairs::Pairs;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    NotRun,
}

pub struct Target {
    pub workload: &'static str,
    pub what: String,
    pub measured: String,
    pub goal: String,
    pub verdict: Verdict,
}

fn verdict(ok: Option<bool>) -> Verdict {
    match ok {
        Some(true) => Verdict::Met,
        Some(false) => Verdict::Missed,
        None => Verdict::NotRun,
    }
}

/// The targets, evaluated on this run.
pub fn targets(r: &Results) -> Vec<Target> {
    let mut t = Vec::new();

    // B1: server cost per acquire.
    let cost = |v: Pairs| {
        r.cost
            .iter()
            .find(|c| c.variant == v)
            .and_then(|c| c.acquire_new.us_per_call())
    };
    let (h, e) = (cost(Pairs::Hashlock), cost(Pairs::RedissonSha));
    let x = h.zip(e).and_then(|(h, e)| ratio(h, e));
    t.push(Target {
        workload: "B1",
        what: "server µs per acquire (new key), hashlock ÷ EVALSHA".into(),
        measured: match (h, e) {
            (Some(h), Some(e)) => format!("{} ({h:.2} vs {e:.2} µs)", fmt_ratio(x)),
            _ => "—".into(),
        },
        goal: "≤ 0.60×".into(),
        verdict: verdict(x.map(|x| x <= 0.6)),
    });

    // B1: throughput ratios.
    for &pipeline in &r.plan.b1_pipelines {
        for &clients in &r.plan.b1_clients {
            let h = b1_row(r, Pairs::Hashlock, clients, pipeline).map(|x| x.pairs_per_sec());
            let e = b1_row(r, Pairs::RedissonSha, clients, pipeline).map(|x| x.pairs_per_sec());
            let x = h.zip(e).and_then(|(h, e)| ratio(h, e));
            let (goal, limit, what) = if pipeline > 1 {
                (
                    "≥ 1.60×".to_string(),
                    1.6,
                    format!(
                        "pairs/s at pipeline {pipeline}, {}, hashlock ÷ EVALSHA",
                        clients_word(clients)
                    ),
                )
            } else {
                // "At least on par": within 5 % (run-to-run noise) or better.
                (
                    "≥ 0.95× (on par)".to_string(),
                    0.95,
                    format!(
                        "pairs/s unpipelined, {}, hashlock ÷ EVALSHA",
                        clients_word(clients)
                    ),
                )
            };
            t.push(Target {
                workload: "B1",
                what,
                measured: match (h, e) {
                    (Some(h), Some(e)) => {
                        format!("{} ({} vs {})", fmt_ratio(x), fmt_count(h), fmt_count(e))
                    }
                    _ => "—".into(),
                },
                goal,
                verdict: verdict(x.map(|x| x >= limit)),
            });
        }
    }

    // B2: renew vs PEXPIRE.
    let renew = |v: Renew| {
        r.b2.iter()
            .find(|x| x.variant == v)
            .and_then(|x| x.cost.us_per_call())
    };
    let (h, p) = (renew(Renew::Hashlock), renew(Renew::Pexpire));
    let x = h.zip(p).and_then(|(h, p)| ratio(h, p));
    t.push(Target {
        workload: "B2",
        what: "server µs per renew, LOCK.RENEW ÷ PEXPIRE".into(),
        measured: match (h, p) {
            (Some(h), Some(p)) => format!("{} ({h:.2} vs {p:.2} µs)", fmt_ratio(x)),
            _ => "—".into(),
        },
        goal: "≤ 1.20×".into(),
        verdict: verdict(x.map(|x| x <= 1.2)),
    });

    // B3 at K=8, hold 100 µs.
    let (k, hold) = (8, Duration::from_micros(100));
    let h = b3_row(r, Waiter::Hashlock, k, hold);
    let red = b3_row(r, Waiter::Redisson, k, hold);
    let x = h
        .zip(red)
        .and_then(|(h, e)| ratio(h.per_sec(), e.per_sec()));
    t.push(Target {
        workload: "B3",
        what: "K=8, hold 100 µs: acquisitions/s, hashlock ÷ Redisson-style".into(),
        measured: match (h, red) {
            (Some(h), Some(e)) => format!(
                "{} ({} vs {})",
                fmt_ratio(x),
                fmt_count(h.per_sec()),
                fmt_count(e.per_sec())
            ),
            _ => "—".into(),
        },
        goal: "≥ 2.00×".into(),
        verdict: verdict(x.map(|x| x >= 2.0)),
    });
    t.push(Target {
        workload: "B3",
        what: "K=8, hold 100 µs: server commands per acquisition (hashlock)".into(),
        measured: h.map_or("—".into(), |h| format!("{:.2}", h.server_cmds_per_acq())),
        goal: "≤ 2.1".into(),
        verdict: verdict(h.map(|h| h.server_cmds_per_acq() <= 2.1)),
    });
    t.push(Target {
        workload: "B3",
        what: "K=8, hold 100 µs: Jain's fairness index (hashlock)".into(),
        measured: h.map_or("—".into(), |h| format!("{:.4}", h.jain())),
        goal: "≥ 0.99".into(),
        verdict: verdict(h.map(|h| h.jain() >= 0.99)),
    });
    t.push(Target {
        workload: "B3",
        what: "K=8, hold 100 µs: worst wait (hashlock) vs (K−1)·(hold + hand-off p99) + 5 ms"
            .into(),
        measured: h.map_or("—".into(), |h| {
            format!(
                "{} (bound {})",
                fmt_duration(max(&h.wait)),
                fmt_duration(h.worst_wait_bound())
            )
        }),
        goal: "≤ bound".into(),
        verdict: verdict(h.map(|h| max(&h.wait) <= h.worst_wait_bound())),
    });

    // B4: hashlock p99 per lease.
    for &(lease, _) in &r.plan.b4_leases {
        let row =
            r.b4.iter()
                .find(|x| x.waiter == Waiter::Hashlock && x.lease == lease);
        t.push(Target {
            workload: "B4",
            what: format!(
                "lease {}: lease deadline → next acquisition p99 (hashlock)",
                fmt_duration(lease)
            ),
            measured: row.map_or("—".into(), |x| {
                format!(
                    "{}{}",
                    fmt_duration(quantile(&x.delay, 0.99)),
                    if x.early > 0 {
                        format!(", {} EARLY", x.early)
                    } else {
                        String::new()
                    }
                )
            }),
            goal: "≤ 5 ms".into(),
            verdict: verdict(
                row.map(|x| x.early == 0 && quantile(&x.delay, 0.99) <= Duration::from_millis(5)),
            ),
        });
    }

    // B6: no bytes beyond the plain hash; back to baseline.
    let fill = |w: Writer| {
        r.b6.as_ref()
            .and_then(|o| o.fills.iter().find(|f| f.writer == w).map(|f| (f, o.locks)))
    };
    let (h, p) = (fill(Writer::Hashlock), fill(Writer::HsetPexpire));
    let extra = h
        .zip(p)
        .map(|((h, n), (p, _))| h.bytes_per_lock(n) - p.bytes_per_lock(n));
    t.push(Target {
        workload: "B6",
        what: "bytes per held lock beyond the plain hash (HSET + PEXPIRE)".into(),
        measured: match (h, p, extra) {
            (Some((h, n)), Some((p, _)), Some(x)) => format!(
                "{x:+.1} B ({:.1} vs {:.1} B/lock)",
                h.bytes_per_lock(n),
                p.bytes_per_lock(n)
            ),
            _ => "—".into(),
        },
        goal: "≤ 0 (±1 B noise)".into(),
        verdict: verdict(extra.map(|x| x <= 1.0)),
    });
    t.push(Target {
        workload: "B6",
        what: "used_memory back to baseline after releasing every lock (hashlock)".into(),
        measured: h.map_or("—".into(), |(h, _)| {
            format!("{:+} B after {}", h.residual, fmt_duration(h.settled_after))
        }),
        goal: "within max(0.1 %, 64 KiB)".into(),
        verdict: verdict(
            h.map(|(h, _)| h.residual <= crate::workloads::b6::tolerance(h.baseline) as i64),
        ),
    });

    // B8: REPLICAS 1 against the Redisson way (script + WAIT 1 pipelined).
    for &clients in &r.plan.b8_clients {
        let h = b8_row(r, Variant::Replicas, clients);
        let w = b8_row(r, Variant::ScriptWait, clients);
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            let (hq, wq) = (
                h.map(|x| quantile(&x.pair, q)),
                w.map(|x| quantile(&x.pair, q)),
            );
            let x = hq
                .zip(wq)
                .and_then(|(a, b)| ratio(a.as_secs_f64(), b.as_secs_f64()));
            t.push(Target {
                workload: "B8",
                what: format!(
                    "acquire + release latency {name}, {}, `REPLICAS 1` ÷ script + `WAIT 1`",
                    clients_word(clients)
                ),
                measured: match (hq, wq) {
                    (Some(a), Some(b)) => format!(
                        "{} ({} vs {})",
                        fmt_ratio(x),
                        fmt_duration(a),
                        fmt_duration(b)
                    ),
                    _ => "—".into(),
                },
                // "At least on par": within 5 % (run-to-run noise) or better.
                goal: "≤ 1.05× (on par)".into(),
                verdict: verdict(x.map(|x| x <= 1.05)),
            });
        }
    }
    let clients = r.plan.b8_clients.iter().copied().max().unwrap_or(50);
    let h = b8_row(r, Variant::Replicas, clients).map(|x| x.pairs_per_sec());
    let w = b8_row(r, Variant::ScriptWait, clients).map(|x| x.pairs_per_sec());
    let x = h.zip(w).and_then(|(a, b)| ratio(a, b));
    t.push(Target {
        workload: "B8",
        what: format!(
            "pairs/s, {}, `REPLICAS 1` ÷ script + `WAIT 1`",
            clients_word(clients)
        ),
        measured: match (h, w) {
            (Some(a), Some(b)) => {
                format!("{} ({} vs {})", fmt_ratio(x), fmt_count(a), fmt_count(b))
            }
            _ => "—".into(),
        },
        goal: "≥ 1.30×".into(),
        verdict: verdict(x.map(|x| x >= 1.3)),
    });
    let tc = r.b8_token.as_ref();
    let x = tc.and_then(|c| c.ratio());
    t.push(Target {
        workload: "B8",
        what: "server µs per acquire of a free lock, with TOKEN (counter exists) ÷ without".into(),
        measured: match (
            tc.and_then(|c| c.token.us_per_call()),
            tc.and_then(|c| c.plain.us_per_call()),
        ) {
            (Some(a), Some(b)) => format!("{} ({a:.2} vs {b:.2} µs)", fmt_ratio(x)),
            _ => "—".into(),
        },
        goal: "≤ 1.30×".into(),
        verdict: verdict(x.map(|x| x <= 1.3)),
    });

    // B7: a killed KEEPALIVE holder's lock moves on in milliseconds.
    let row =
        r.b7.iter()
            .find(|x| x.variant == crate::workloads::b7::Variant::Keepalive);
    t.push(Target {
        workload: "B7",
        what: "holder process SIGKILLed → next waiter's grant p99 (hashlock KEEPALIVE)".into(),
        measured: row.map_or("—".into(), |x| {
            format!(
                "{}{}",
                fmt_duration(quantile(&x.delay, 0.99)),
                if x.early > 0 {
                    format!(", {} DOUBLE GRANTS", x.early)
                } else {
                    String::new()
                }
            )
        }),
        goal: "≤ 5 ms".into(),
        verdict: verdict(
            row.map(|x| x.early == 0 && quantile(&x.delay, 0.99) <= Duration::from_millis(5)),
        ),
    });

    // B16: a killed leader is replaced, and observers know, in milliseconds.
    let row = r
        .b16
        .iter()
        .find(|x| x.variant == crate::workloads::b16::Variant::Hashlock);
    for (what, observer) in [
        (
            "leader SIGKILLed → the new leader's campaign returns p99 (hashlock Election)",
            false,
        ),
        (
            "leader SIGKILLed → an observer knows who leads p99 (event + LOCK.INFO)",
            true,
        ),
    ] {
        let h = |x: &crate::workloads::b16::Row| {
            if observer {
                x.observer.clone()
            } else {
                x.leader.clone()
            }
        };
        t.push(Target {
            workload: "B16",
            what: what.into(),
            measured: row.map_or("—".into(), |x| {
                format!(
                    "{} ({} kills){}{}",
                    fmt_duration(quantile(&h(x), 0.99)),
                    h(x).len(),
                    if x.early > 0 {
                        format!(", {} TWO LEADERS", x.early)
                    } else {
                        String::new()
                    },
                    if x.terms_grow {
                        ""
                    } else {
                        ", TERMS DID NOT GROW"
                    }
                )
            }),
            goal: "≤ 5 ms".into(),
            verdict: verdict(row.map(|x| {
                x.early == 0 && x.terms_grow && quantile(&h(x), 0.99) <= Duration::from_millis(5)
            })),
        });
    }

    // B9: many tied locks do not stall the server.
    let b9 = r.b9.as_ref();
    t.push(Target {
        workload: "B9",
        what: "100,000 tied locks renewing: longest PING round trip (event-loop stall)".into(),
        measured: b9.map_or("—".into(), |o| {
            let worst = |p: &crate::workloads::b9::Phase| {
                p.probe.as_ref().map_or(Duration::ZERO, |p| max(&p.rtt))
            };
            format!(
                "{} renewing, {} closing ({} locks; floor with nothing tied {})",
                fmt_duration(worst(&o.tied)),
                fmt_duration(worst(&o.closing)),
                fmt_count(o.config.locks as f64),
                fmt_duration(worst(&o.idle))
            )
        }),
        goal: "≤ 2 ms".into(),
        verdict: verdict(b9.map(|o| {
            [&o.tied, &o.closing].iter().all(|p| {
                p.probe
                    .as_ref()
                    .is_some_and(|p| max(&p.rtt) <= crate::workloads::b9::STALL)
            })
        })),
    });

    // B10: queued locks sharing a deadline are handed on cheaply.
    let b10 = r.b10.as_ref();
    t.push(Target {
        workload: "B10",
        what: "queued locks sharing one deadline: server CPU to hand them all on".into(),
        measured: b10.map_or("—".into(), |o| {
            format!(
                "{:.0} ms for {} keys (+{:.0} ms to arm them)",
                o.hand_on_cpu * 1e3,
                fmt_count(o.keys as f64),
                o.arm_cpu * 1e3
            )
        }),
        goal: "≤ 200 ms for 20,000".into(),
        // Scaled to the keys this machine's open-file limit allowed.
        verdict: verdict(b10.map(|o| o.hand_on_cpu <= 0.2 * o.keys as f64 / 20_000.0)),
    });
    t.push(Target {
        workload: "B10",
        what: "queued locks sharing one deadline: longest PING round trip meanwhile".into(),
        measured: b10.map_or("—".into(), |o| fmt_duration(max(&o.probe.rtt))),
        goal: "≤ 50 ms".into(),
        verdict: verdict(b10.map(|o| max(&o.probe.rtt) <= crate::workloads::b10::STALL)),
    });

    // B12–B15: the Redisson family.
    super::family::targets(r, &mut t);
    t
}

pub(crate) fn b8_row(
    r: &Results,
    v: Variant,
    clients: usize,
) -> Option<&crate::workloads::b8::Row> {
    r.b8.iter()
        .find(|x| x.config.variant == v && x.config.clients == clients)
}
