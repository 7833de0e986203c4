//! R3: failover.
//!
//! A primary and a replica. A writer drives locks on the primary, each call
//! followed by `WAIT 1 1000`; a call counts as acknowledged only if WAIT saw
//! the replica. Clients wait (BLOCK 0) on the primary for locks held with
//! long leases. Then the replica is promoted (`REPLICAOF NO ONE`), in two
//! ways:
//!
//! - **crash**: the primary is killed with SIGKILL while the writer runs;
//! - **switch-over**: the writer stops, the replica is promoted and the old
//!   primary is made a replica of it.
//!
//! Every acknowledged grant must be on the promoted server with the same
//! owner, count and deadline; the waiters on the old primary must get an
//! error or a closed connection, never a grant; and the promoted server must
//! serve: a lock replicated with a short lease is handed to a waiter at its
//! deadline (its timers take over), a release hands off, and the writer
//! carries on there with every reply as the model predicts.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::{Client, Kind, Reply, Server, wait_until};

use crate::clock::wall_ms;
use crate::crash::{keys, plan};
use crate::model::{self, Model, Step};
use crate::report::{Section, fmt_int};
use crate::servers;
use testkit::rng::Rng;

const WAITERS: usize = 8;

#[derive(Default)]
struct Log {
    steps: Vec<Step>,
    /// Number of leading steps all acknowledged by WAIT (the last acked
    /// index + 1).
    acked_prefix: usize,
    acked: usize,
    unacked: usize,
    mismatches: Vec<String>,
}

/// Runs the writer: one call, then `WAIT 1 1000` (if `wait`: a server with
/// no replica left would make every WAIT take its full second), until
/// `until` or until the connection dies (a panic inside the testkit client).
fn write_with_wait(
    c: &mut Client,
    model: &mut Model,
    log: &Mutex<Log>,
    rng: &mut Rng,
    until: Instant,
    wait: bool,
) {
    let _ = servers::expect_panic(|| {
        while Instant::now() < until {
            let op = plan(model, rng, 1).remove(0);
            let invoke = wall_ms();
            {
                let mut l = log.lock().unwrap();
                l.steps.push(Step {
                    op: op.clone(),
                    invoke_ms: invoke,
                    ret_ms: None,
                });
            }
            c.send(&op.args());
            if wait {
                c.send(&["WAIT", "1", "1000"]);
            }
            let reply = c.read_reply();
            let ret = wall_ms();
            let expect = model.apply(&op, invoke, ret);
            let waited = if wait { c.read_reply() } else { Reply::Int(0) };
            let mut l = log.lock().unwrap();
            let n = l.steps.len();
            l.steps[n - 1].ret_ms = Some(ret);
            if !expect.matches(&reply) {
                l.mismatches.push(format!(
                    "{:?}: expected {expect:?}, got {reply:?}",
                    op.args()
                ));
            }
            if matches!(waited, Reply::Int(r) if r >= 1) {
                l.acked += 1;
                l.acked_prefix = n;
            } else {
                l.unacked += 1;
            }
        }
    });
}

#[derive(Default)]
struct WaiterOutcomes {
    errors: usize,
    closed: usize,
    granted: usize,
    stuck: usize,
}

/// Clients blocked on the old primary: each must end with an error or a
/// closed connection.
fn waiter_outcomes(
    waiters: Vec<Client>,
    sec: &mut Section,
    kind: Kind,
    how: &str,
) -> WaiterOutcomes {
    let mut o = WaiterOutcomes::default();
    for mut w in waiters {
        let got = servers::expect_panic(|| w.try_read_reply(Duration::from_secs(5)));
        match got {
            Ok(Some(Reply::Error(_))) => o.errors += 1,
            Ok(Some(other)) => {
                o.granted += 1;
                sec.fail(format!(
                    "{kind} {how}: a waiter on the old primary got {other:?}"
                ));
            }
            Ok(None) => {
                o.stuck += 1;
                sec.fail(format!(
                    "{kind} {how}: a waiter on the old primary is still blocked 5 s later"
                ));
            }
            Err(_) => o.closed += 1,
        }
    }
    o
}

/// Blocks `WAITERS` clients on the primary for locks held with long leases.
fn park_waiters(p: &Server) -> Vec<Client> {
    let mut c = p.client();
    let waiters: Vec<Client> = (0..WAITERS)
        .map(|i| {
            let key = format!("fo:w{i}");
            c.cmd(&["LOCK.ACQUIRE", &key, "holder", "PX", "120000"]);
            let mut w = if i % 2 == 0 {
                p.client()
            } else {
                p.client_resp3()
            };
            w.send(&["LOCK.ACQUIRE", &key, &format!("waiter{i}"), "BLOCK", "0"]);
            w
        })
        .collect();
    let parked = wait_until(Duration::from_secs(5), || {
        servers::lock_stats(p).get("waiting") == Some(&(WAITERS as u64))
    });
    assert!(parked, "waiters did not queue on the primary");
    c.cmd(&["WAIT", "1", "2000"]);
    waiters
}

/// On the promoted server: a short lease replicated from the old primary is
/// handed to a waiter at its deadline; a release hands off; the writer
/// carries on. Returns (hand-off ms after the deadline, ops written).
fn takeover(
    r: &Server,
    model: &mut Model,
    rng: &mut Rng,
    sec: &mut Section,
    kind: Kind,
    how: &str,
) -> (Option<i64>, usize) {
    let mut c = r.client();
    let mut late = None;
    let deadline = c.cmd(&["PEXPIRETIME", "fo:short"]);
    match deadline {
        Reply::Int(d) if d > wall_ms() => {
            let r = c.cmd(&["LOCK.ACQUIRE", "fo:short", "new-waiter", "PX", "5000", "BLOCK", "10000"]);
            let at = wall_ms();
            if r == Reply::Int(1) {
                late = Some(at - d);
            } else {
                sec.fail(format!("{kind} {how}: waiter for the short lease on the promoted server got {r:?}"));
            }
        }
        other => sec.fail(format!(
            "{kind} {how}: the short lease is not on the promoted server with a future deadline: {other:?}"
        )),
    }
    // Hand-off by release.
    let mut w = r.client();
    w.send(&["LOCK.ACQUIRE", "fo:w0", "after", "BLOCK", "5000"]);
    wait_until(Duration::from_secs(2), || {
        servers::lock_stats(r).get("waiting") == Some(&1)
    });
    let rel = c.cmd(&["LOCK.RELEASE", "fo:w0", "holder"]);
    let got = w.read_reply();
    sec.check(rel == Reply::Int(0) && got == Reply::Int(1), || {
        format!(
            "{kind} {how}: release/hand-off on the promoted server: release {rel:?}, waiter {got:?}"
        )
    });
    // The writer goes on against the new primary.
    let log = Mutex::new(Log::default());
    // After a crash the promoted server has no replica to WAIT for.
    let wait = r.info_field("replication", "connected_slaves").as_deref() != Some("0");
    write_with_wait(
        &mut c,
        model,
        &log,
        rng,
        Instant::now() + Duration::from_millis(500),
        wait,
    );
    let log = log.into_inner().unwrap();
    for m in log.mismatches.iter().take(5) {
        sec.fail(format!(
            "{kind} {how}: promoted server answered differently from the model: {m}"
        ));
    }
    (late, log.steps.len())
}

struct Figures {
    acked: usize,
    unacked: usize,
    lost: usize,
    waiters: WaiterOutcomes,
    handoff_late: Option<i64>,
    after_ops: usize,
}

fn scenario(kind: Kind, crash: bool, write_for: Duration, seed: u64, sec: &mut Section) -> Figures {
    let how = if crash { "crash" } else { "switch-over" };
    let mut p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    let waiters = park_waiters(&p);
    let keys = keys(32);
    let model = Model::new(&keys);
    let log = Arc::new(Mutex::new(Log::default()));
    let mut rng = Rng::new(seed);

    // The short lease that the promoted server's timers must hand off.
    let mut c = p.client();
    let writer_model = if crash {
        // It must outlive the writer's run and still be held at promotion.
        let lease = (write_for.as_millis() + 1500).to_string();
        c.cmd(&["LOCK.ACQUIRE", "fo:short", "short-holder", "PX", &lease]);
        c.cmd(&["WAIT", "1", "1000"]);
        let mut wc = p.client();
        let log2 = log.clone();
        let mut m = model;
        let mut rng2 = rng.clone();
        let handle = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(60);
            write_with_wait(&mut wc, &mut m, &log2, &mut rng2, until, true);
        });
        std::thread::sleep(write_for);
        p.kill9();
        handle.join().expect("writer thread");
        None
    } else {
        let mut m = model;
        let mut wc = p.client();
        write_with_wait(
            &mut wc,
            &mut m,
            &log,
            &mut rng,
            Instant::now() + write_for,
            true,
        );
        c.cmd(&["LOCK.ACQUIRE", "fo:short", "short-holder", "PX", "1500"]);
        c.cmd(&["WAIT", "1", "1000"]);
        Some(m)
    };
    let before = (!crash).then(|| {
        let mut all = keys.clone();
        all.extend((0..WAITERS).map(|i| format!("fo:w{i}")));
        (model::snapshot(&mut c, &all), all)
    });

    // Promote the replica; in a switch-over, demote the old primary.
    let mut rc = r.client();
    let promoted = rc.cmd(&["REPLICAOF", "NO", "ONE"]);
    sec.check(matches!(&promoted, Reply::Status(s) if s == "OK"), || {
        format!("{kind} {how}: REPLICAOF NO ONE answered {promoted:?}")
    });
    if !crash {
        let demoted = c.cmd(&["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
        sec.check(matches!(&demoted, Reply::Status(s) if s == "OK"), || {
            format!("{kind} {how}: REPLICAOF on the old primary answered {demoted:?}")
        });
    }
    let waiter_figures = waiter_outcomes(waiters, sec, kind, how);

    // Every acknowledged call is on the promoted server, exactly.
    let log = Arc::try_unwrap(log)
        .ok()
        .expect("writer done")
        .into_inner()
        .unwrap();
    for m in log.mismatches.iter().take(5) {
        sec.fail(format!("{kind} {how}: reply differs from the model: {m}"));
    }
    let actual = model::snapshot(&mut rc, &keys);
    let crash_ms = wall_ms();
    let prefixes = model::matching_prefixes(&keys, &log.steps, &actual, crash_ms);
    let durable = prefixes.last().copied();
    let lost = match durable {
        Some(d) if d >= log.acked_prefix => 0,
        Some(d) => {
            sec.fail(format!(
                "{kind} {how}: the promoted server lacks acknowledged calls: {}",
                model::differences(&keys, &log.steps, log.acked_prefix, &actual, crash_ms)
                    .into_iter()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            log.acked_prefix - d
        }
        None => {
            sec.fail(format!(
                "{kind} {how}: the promoted server's locks match no prefix of the writer's calls: {}",
                model::differences(&keys, &log.steps, log.acked_prefix, &actual, crash_ms)
                    .into_iter()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            log.acked
        }
    };
    if let Some((before, all)) = &before {
        let after = model::snapshot(&mut rc, all);
        for (k, v) in before {
            if after.get(k) != Some(v) {
                sec.fail(format!(
                    "{kind} {how}: {k} was {} on the old primary, {} on the promoted one",
                    model::show_actual(v),
                    after.get(k).map_or("missing".into(), model::show_actual)
                ));
            }
        }
    }

    // The promoted server serves; the writer resumes from the state it has.
    let mut m = writer_model.unwrap_or_else(|| {
        let mut m = Model::new(&keys);
        for s in &log.steps[..durable.unwrap_or(0)] {
            m.apply(&s.op, s.invoke_ms, s.ret_ms.unwrap_or(crash_ms));
        }
        m
    });
    let (handoff_late, after_ops) = takeover(&r, &mut m, &mut rng, sec, kind, how);
    if !crash {
        // The old primary follows the new one.
        let synced = wait_until(Duration::from_secs(10), || {
            p.info_field("replication", "master_link_status").as_deref() == Some("up")
        });
        sec.check(synced, || {
            format!("{kind} {how}: old primary did not sync from the promoted one")
        });
        if synced {
            rc.cmd(&["WAIT", "1", "2000"]);
            let a = model::snapshot(&mut rc, &keys);
            let b = model::snapshot(&mut p.client(), &keys);
            sec.check(a == b, || {
                format!("{kind} {how}: old primary does not mirror the promoted one")
            });
        }
        for x in servers::log_problems(&p.log()) {
            sec.fail(format!("{kind} {how} old primary: {x}"));
        }
    }
    for x in servers::health(&r) {
        sec.fail(format!("{kind} {how} promoted server: {x}"));
    }
    drop(p);
    Figures {
        acked: log.acked,
        unacked: log.unacked,
        lost,
        waiters: waiter_figures,
        handoff_late,
        after_ops,
    }
}

pub fn section(
    kinds: &[Kind],
    rounds: usize,
    write_for: Duration,
    promotions: usize,
    churn: Duration,
) -> Section {
    let mut sec = Section::new("R3 Failover");
    sec.line(format!(
        "Primary + replica. A writer drives 32 locks on the primary for {:.1} s, each call followed by `WAIT 1 1000`; \
         {WAITERS} clients wait with BLOCK 0 on the primary. Then the replica is promoted with `REPLICAOF NO ONE`. \
         crash = the primary is SIGKILLed mid-write; switch-over = the writer stops and the old primary becomes a replica of the promoted one. \
         {rounds} round(s) of each per server.",
        write_for.as_secs_f64()
    ));
    sec.line(String::new());
    sec.line("| server | failover | calls acked by WAIT | not acked | acked calls lost | waiters: error / closed / **granted** / stuck | short lease handed off on the promoted server | calls served after promotion |".into());
    sec.line("|---|---|---|---|---|---|---|---|".into());
    for &kind in kinds {
        for crash in [true, false] {
            for round in 0..rounds {
                let f = scenario(kind, crash, write_for, 500 + round as u64, &mut sec);
                sec.line(format!(
                    "| {kind} | {} | {} | {} | **{}** | {} / {} / **{}** / {} | {} | {} |",
                    if crash {
                        "crash (kill -9)"
                    } else {
                        "switch-over"
                    },
                    fmt_int(f.acked as u64),
                    f.unacked,
                    f.lost,
                    f.waiters.errors,
                    f.waiters.closed,
                    f.waiters.granted,
                    f.waiters.stuck,
                    f.handoff_late
                        .map_or("-".into(), |ms| format!("{ms} ms after its deadline")),
                    f.after_ops
                ));
            }
        }
    }
    crate::promotions::lines(&mut sec, kinds, promotions, churn);
    sec
}
