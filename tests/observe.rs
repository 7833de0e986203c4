//! What hashlock lets operators and programs see (README "Observing locks";
//! SPEC Part 2 "Lifecycle events and introspection"), checked as a black
//! box on Redis 7.0 and Valkey 9.1:
//!
//! - lifecycle keyspace events (class `d`): exactly one per change of
//!   holder, none on a re-entry, none while `notify-keyspace-events` cannot
//!   deliver them, the ending event before `*.acquired` on a hand-off (and
//!   LOCK.INFO already showing the new holder when the first arrives),
//!   `lock.expired` at the deadline (never early, at most 50 ms late),
//!   `lock.forced`, `lock.closed`, a REPLICAS undo as `lock.released`, and
//!   only the server's own events for DEL or a Redisson script;
//! - LOCK.WAITERS: five fields per waiter, against CLIENT ID and the
//!   server clock, RESP2 and RESP3; empty for any key without a queue and on
//!   a replica;
//! - the metrics of `INFO lock` (section `lock_metrics`) against waits and
//!   holds of known length, immediate grants and timeouts counted apart,
//!   CONFIG RESETSTAT; LATENCY events `lock-wait` / `lock-hold`;
//! - the Prometheus collector (docs/observability/hashlock-collector.lua)
//!   run with EVAL as redis_exporter runs it, the real redis_exporter
//!   scraping it, and the Grafana dashboard built on its series.
//!
//! The primitives are described by [`Prim`] so that the read-write lock,
//! the semaphore and the latch can join each table-driven test (the metric
//! tests already run LOCK.* and RWLOCK.*).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use testkit::{free_port, redisson};

const SECOND: Duration = Duration::from_secs(1);
/// How long an expected event may take to arrive (a loaded machine).
const ARRIVES: Duration = Duration::from_secs(5);

// ---- helpers -------------------------------------------------------------

#[track_caller]
fn ok(r: Reply) {
    assert_eq!(r, Reply::Status("OK".into()));
}

/// `CONFIG SET notify-keyspace-events <flags>`.
#[track_caller]
fn notify(s: &Server, flags: &str) {
    ok(s.client()
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", flags]));
}

/// A subscriber to the keyspace channels (`__keyspace@0__:<key>`) of some
/// keys, over RESP2 or RESP3 (where messages are push frames).
struct Listener {
    c: Client,
    resp3: bool,
}

impl Listener {
    #[track_caller]
    fn new(s: &Server, resp3: bool, keys: &[&str]) -> Listener {
        let c = if resp3 { s.client_resp3() } else { s.client() };
        let channels: Vec<String> = keys.iter().map(|k| format!("__keyspace@0__:{k}")).collect();
        Listener::on(c, resp3, "SUBSCRIBE", &channels)
    }

    /// Subscribed with `cmd` (SUBSCRIBE, PSUBSCRIBE) to `channels`.
    #[track_caller]
    fn on(mut c: Client, resp3: bool, cmd: &str, channels: &[String]) -> Listener {
        let mut args = vec![cmd.to_string()];
        args.extend(channels.iter().cloned());
        c.send(&args);
        for ch in channels {
            let ack = c.read_reply();
            let parts = frame(&ack, resp3);
            assert_eq!(parts[0].as_str(), cmd.to_ascii_lowercase(), "{ack:?}");
            assert_eq!(parts[1].as_str(), ch, "{ack:?}");
        }
        Listener { c, resp3 }
    }

    /// The next message as (key or channel suffix, payload), within `within`.
    #[track_caller]
    fn next(&mut self, within: Duration) -> Option<(String, String)> {
        let m = self.c.try_read_reply(within)?;
        let parts = frame(&m, self.resp3);
        let (channel, payload) = match parts[0].as_str() {
            "message" => (&parts[1], &parts[2]),
            "pmessage" => (&parts[2], &parts[3]),
            other => panic!("not a message ({other}): {m:?}"),
        };
        let channel = channel.as_str();
        let key = channel
            .strip_prefix("__keyspace@0__:")
            .or_else(|| channel.strip_prefix("__keyevent@0__:"))
            .unwrap_or(channel);
        Some((key.to_string(), payload.as_str().to_string()))
    }

    /// The next message's (key, event), which must come within [`ARRIVES`].
    #[track_caller]
    fn expect_next(&mut self, what: &str) -> (String, String) {
        self.next(ARRIVES)
            .unwrap_or_else(|| panic!("{what}: no event within {ARRIVES:?}"))
    }

    /// The next messages are exactly `want` ((key, event), in order).
    #[track_caller]
    fn expect(&mut self, want: &[(&str, &str)], what: &str) {
        for (i, (k, e)) in want.iter().enumerate() {
            let got = self.expect_next(&format!("{what} (#{i}: {k} {e})"));
            assert_eq!(
                (got.0.as_str(), got.1.as_str()),
                (*k, *e),
                "{what}: event #{i} (expected {want:?})"
            );
        }
    }

    /// Nothing arrives for `ms`.
    #[track_caller]
    fn silent(&mut self, ms: u64, what: &str) {
        let got = self.next(Duration::from_millis(ms));
        assert_eq!(got, None, "{what}: nothing expected");
    }
}

/// A pub/sub frame's parts: an array (RESP2) or a push (RESP3).
#[track_caller]
fn frame(m: &Reply, resp3: bool) -> &[Reply] {
    match (m, resp3) {
        (Reply::Array(p), false) | (Reply::Push(p), true) => p,
        other => panic!("pub/sub frame of the wrong type (resp3 {resp3}): {other:?}"),
    }
}

/// A marker event: `lock.acquired` then `lock.released` on `key` (which the
/// listener must hear). Every event fired before it has arrived when the
/// marker's do: pub/sub keeps the order, so "nothing before the marker" is
/// exact, with no sleep.
#[track_caller]
fn marker(c: &mut Client, l: &mut Listener, key: &str, what: &str) {
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", key, "marker", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", key, "marker"]), Reply::Int(0));
    l.expect(
        &[(key, "lock.acquired"), (key, "lock.released")],
        &format!("{what}: the marker comes next"),
    );
}

/// LOCK.INFO's `owner`, or None when no lock is held.
#[track_caller]
fn owner_of(c: &mut Client, key: &str) -> Option<String> {
    let r = c.cmd(&["LOCK.INFO", key]);
    if r.is_nil() {
        return None;
    }
    let owner = match &r {
        Reply::Map(_) => r.map_get("owner").cloned(),
        Reply::Array(flat) => flat
            .chunks_exact(2)
            .find(|kv| kv[0].as_bytes() == b"owner")
            .map(|kv| kv[1].clone()),
        other => panic!("LOCK.INFO {key}: {other:?}"),
    };
    Some(owner.expect("LOCK.INFO has an owner").as_str().to_string())
}

/// Waits until `n` callers are queued (INFO lock `lock_waiting`).
#[track_caller]
fn wait_queued(s: &Server, n: u64) {
    let ok = wait_until(5 * SECOND, || lock_field(s, "lock_waiting") == n);
    assert!(ok, "expected {n} queued callers: {}", s.info("lock"));
}

/// One numeric field of INFO lock (u64::MAX if missing).
fn lock_field(s: &Server, name: &str) -> u64 {
    s.info_field("lock", name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Every numeric `lock_*` field of INFO lock, by name.
fn lock_fields(s: &Server) -> BTreeMap<String, String> {
    numeric_fields(&s.info("lock"))
}

fn numeric_fields(info: &str) -> BTreeMap<String, String> {
    info.lines()
        .filter_map(|l| l.trim_end().split_once(':'))
        .filter(|(k, v)| k.starts_with("lock_") && v.parse::<f64>().is_ok())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A SIGSTOPped server, SIGCONT when dropped (also when a test fails).
struct Frozen(u32);

fn signal(pid: u32, sig: &str) {
    let done = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(done, "kill {sig} {pid}");
}

impl Frozen {
    fn new(s: &Server) -> Frozen {
        signal(s.pid(), "-STOP");
        Frozen(s.pid())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// `TIME` on the server's clock, in µs.
fn server_us(c: &mut Client) -> i64 {
    time_us(&c.cmd(&["TIME"]))
}

// ---- the primitives --------------------------------------------------------

/// A primitive as the event and metric tests drive it: the INFO prefix of
/// its metrics, its event names, how to take it and give it back.
struct Prim {
    /// `lock`, `rwlock`, `semaphore`, `latch`: INFO lock's
    /// `lock_<family>_*` fields and the events' prefix.
    family: &'static str,
    /// The call that takes `key` for `owner` with a lease, blocking `block`
    /// ms if given.
    take: fn(key: &str, owner: &str, lease_ms: u64, block: Option<u64>) -> Vec<String>,
    /// The call that gives it back.
    give: fn(key: &str, owner: &str) -> Vec<String>,
    /// The reply of a grant.
    granted: Reply,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn with_block(mut v: Vec<String>, block: Option<u64>) -> Vec<String> {
    if let Some(ms) = block {
        v.extend(["BLOCK".to_string(), ms.to_string()]);
    }
    v
}

const LOCK: Prim = Prim {
    family: "lock",
    take: |key, owner, lease, block| {
        with_block(
            strings(&["LOCK.ACQUIRE", key, owner, "PX", &lease.to_string()]),
            block,
        )
    },
    give: |key, owner| strings(&["LOCK.RELEASE", key, owner]),
    granted: Reply::Int(1),
};

const RWLOCK_WRITE: Prim = Prim {
    family: "rwlock",
    take: |key, owner, lease, block| {
        with_block(
            strings(&[
                "RWLOCK.ACQUIRE",
                key,
                owner,
                "WRITE",
                "PX",
                &lease.to_string(),
            ]),
            block,
        )
    },
    give: |key, owner| strings(&["RWLOCK.RELEASE", key, owner, "WRITE"]),
    granted: Reply::Int(1),
};

/// The primitives whose metrics are checked (SEMAPHORE.* and LATCH.* hold
/// and wait differently: permits leased by id, awaits without a hold).
const MEASURED: [&Prim; 2] = [&LOCK, &RWLOCK_WRITE];

// ---- lifecycle events ------------------------------------------------------

/// One event per change of holder, none for a re-entry, a renewal or a
/// partial release; the same on RESP2 and RESP3 subscribers.
fn one_event_per_change(kind: Kind) {
    let s = Server::start(kind);
    notify(&s, "Kd");
    let mut l2 = Listener::new(&s, false, &["ev:a", "ev:b", "ev:m"]);
    let mut l3 = Listener::new(&s, true, &["ev:a", "ev:b", "ev:m"]);
    let mut c = s.client();

    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "ev:a", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    // A re-entry, a renewal (KEEPALIVE too), a partial release: nothing.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "ev:a", "me", "PX", "60000"]),
        Reply::Int(2)
    );
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "ev:a", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", "ev:a", "me"]), Reply::Int(1));
    // A busy call and a release by a non-holder change nothing.
    assert!(
        c.cmd(&["LOCK.ACQUIRE", "ev:a", "other", "PX", "60000"])
            .is_nil()
    );
    assert!(c.cmd(&["LOCK.RELEASE", "ev:a", "other"]).is_error());
    assert_eq!(c.cmd(&["LOCK.RELEASE", "ev:a", "me"]), Reply::Int(0));
    // A generated owner with TOKEN.
    let r = c.cmd(&["LOCK.ACQUIRE", "ev:b", "*", "PX", "60000", "TOKEN"]);
    assert!(!r.is_nil() && !r.is_error(), "{r:?}");
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "ev:b"]), Reply::Int(1));
    // FORCERELEASE of nothing: nothing.
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "ev:b"]), Reply::Int(0));
    for (name, l) in [("RESP2", &mut l2), ("RESP3", &mut l3)] {
        l.expect(
            &[
                ("ev:a", "lock.acquired"),
                ("ev:a", "lock.released"),
                ("ev:b", "lock.acquired"),
                ("ev:b", "lock.forced"),
            ],
            &format!("{kind} {name}"),
        );
    }
    // Nothing else came: the marker is next for both.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "ev:m", "marker", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", "ev:m", "marker"]), Reply::Int(0));
    for (name, l) in [("RESP2", &mut l2), ("RESP3", &mut l3)] {
        l.expect(
            &[("ev:m", "lock.acquired"), ("ev:m", "lock.released")],
            &format!("{kind} {name}: the marker comes next"),
        );
    }
}

/// Events need `K` or `E` and `d` (or `A`): none otherwise, whatever else
/// is on; `E` sends them to `__keyevent@0__:lock.*` with the key as message.
fn events_follow_the_setting(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut l = Listener::new(&s, false, &["off:k", "off:m"]);
    let cycle = |c: &mut Client| {
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "off:k", "me", "PX", "60000"]),
            Reply::Int(1)
        );
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "off:k", "me", "PX", "60000"]),
            Reply::Int(2)
        );
        assert_eq!(c.cmd(&["LOCK.RELEASE", "off:k", "me"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "off:k"]), Reply::Int(1));
    };
    for flags in ["", "K", "E", "d", "A", "Eg", "KEg$lshzxetm", "Ad"] {
        notify(&s, flags);
        cycle(&mut c);
        // The marker is sent with `Kd`: whatever came before it was fired
        // under `flags` (the server's own events for `g`, `h` ...).
        notify(&s, "Kd");
        let got = lock_events(&mut c, &mut l, "off:m");
        assert_eq!(
            got,
            vec![],
            "{kind}: lock.* events with notify-keyspace-events {flags:?}"
        );
    }
    for flags in ["Kd", "KA", "KEA", "Kgd"] {
        notify(&s, flags);
        cycle(&mut c);
        let got = lock_events(&mut c, &mut l, "off:m");
        let want = [("off:k", "lock.acquired"), ("off:k", "lock.forced")];
        assert_eq!(got, pairs(&want), "{kind}: notify-keyspace-events {flags}");
    }
    notify(&s, "Ed");
    let mut e = Listener::on(
        s.client(),
        false,
        "SUBSCRIBE",
        &[
            "__keyevent@0__:lock.acquired".into(),
            "__keyevent@0__:lock.forced".into(),
        ],
    );
    cycle(&mut c);
    // keyevent: the channel names the event, the message the key.
    e.expect(
        &[("lock.acquired", "off:k"), ("lock.forced", "off:k")],
        &format!("{kind} Ed"),
    );
    e.silent(50, &format!("{kind}: Ed"));
    l.silent(
        100,
        &format!("{kind}: Ed sends nothing to keyspace channels"),
    );
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Runs a marker on `marker_key` (which must be on with `K` and `d`) and
/// returns the `lock.*` events heard before it, in order; the server's own
/// events are left out.
#[track_caller]
fn lock_events(c: &mut Client, l: &mut Listener, marker_key: &str) -> Vec<(String, String)> {
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", marker_key, "marker", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.RELEASE", marker_key, "marker"]),
        Reply::Int(0)
    );
    let mut got = Vec::new();
    let mut marks = Vec::new();
    while marks.last().map(String::as_str) != Some("lock.released") {
        let (k, e) = l.expect_next(&format!(
            "waiting for the marker on {marker_key} after {got:?}"
        ));
        if !e.starts_with("lock.") {
            continue;
        }
        if k == marker_key {
            marks.push(e);
        } else {
            got.push((k, e));
        }
    }
    assert_eq!(
        marks,
        ["lock.acquired", "lock.released"],
        "the marker's events"
    );
    got
}

/// A hand-off fires the ending event, then `lock.acquired`; LOCK.INFO shows
/// the new holder as soon as the first arrives. For each way a holder ends:
/// RELEASE, FORCERELEASE, its KEEPALIVE connection closing, its lease.
fn hand_off_order(kind: Kind) {
    let s = Server::start(kind);
    notify(&s, "Kd");
    let mut c = s.client();
    let mut l = Listener::new(&s, false, &["ho:rel", "ho:force", "ho:closed", "ho:lease"]);
    let cases = ["ho:rel", "ho:force", "ho:closed", "ho:lease"];
    for key in cases {
        let mut holder = s.client();
        let lease = if key == "ho:lease" { "300" } else { "60000" };
        let mut take = vec!["LOCK.ACQUIRE", key, "old", "PX", lease];
        if key == "ho:closed" {
            take.push("KEEPALIVE");
        }
        assert_eq!(holder.cmd(&take), Reply::Int(1), "{kind} {key}");
        l.expect(&[(key, "lock.acquired")], &format!("{kind} {key}: holder"));
        let mut waiter = s.client();
        waiter.send(&["LOCK.ACQUIRE", key, "new", "PX", "60000", "BLOCK", "0"]);
        wait_queued(&s, 1);
        let ending = match key {
            "ho:rel" => {
                assert_eq!(holder.cmd(&["LOCK.RELEASE", key, "old"]), Reply::Int(0));
                "lock.released"
            }
            "ho:force" => {
                assert_eq!(c.cmd(&["LOCK.FORCERELEASE", key]), Reply::Int(1));
                "lock.forced"
            }
            "ho:closed" => {
                let id = holder.id().to_string();
                assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id]), Reply::Int(1));
                "lock.closed"
            }
            _ => "lock.expired",
        };
        let first = l.expect_next(&format!("{kind} {key}"));
        // LOCK.INFO at once: the new holder is already written.
        let shown = owner_of(&mut c, key);
        assert_eq!(first, (key.to_string(), ending.to_string()), "{kind} {key}");
        assert_eq!(
            shown.as_deref(),
            Some("new"),
            "{kind} {key}: LOCK.INFO when `{ending}` arrived"
        );
        l.expect(
            &[(key, "lock.acquired")],
            &format!("{kind} {key}: then the new holder"),
        );
        assert_eq!(waiter.read_reply(), Reply::Int(1), "{kind} {key}");
        assert_eq!(c.cmd(&["LOCK.FORCERELEASE", key]), Reply::Int(1));
        l.expect(&[(key, "lock.forced")], &format!("{kind} {key}: cleanup"));
    }
    l.silent(100, &format!("{kind}: nothing more"));
}

/// `lock.expired` fires at the deadline: after the server expired the key
/// (its own `expired` event comes first, so never early) and at most 50 ms
/// after the deadline on the server clock, for a lock nobody waits for and
/// for one with a waiter (then `lock.acquired` follows).
fn expired_at_the_deadline(kind: Kind) {
    let s = Server::start(kind);
    // `x`: the server's own expired events, to order ours after them.
    notify(&s, "Kdx");
    let mut c = s.client();
    let mut l = Listener::new(&s, false, &["dl:alone", "dl:queued", "dl:reentered"]);
    let mut worst = 0;
    for round in 0..3 {
        for key in ["dl:alone", "dl:queued", "dl:reentered"] {
            let lease = 200 + 50 * round;
            let lease_s = lease.to_string();
            assert_eq!(
                c.cmd(&["LOCK.ACQUIRE", key, "me", "PX", &lease_s]),
                Reply::Int(1)
            );
            if key == "dl:reentered" {
                // A re-entry moves the deadline: the event follows it.
                std::thread::sleep(Duration::from_millis(50));
                assert_eq!(
                    c.cmd(&["LOCK.ACQUIRE", key, "me", "PX", &lease_s]),
                    Reply::Int(2)
                );
            }
            let deadline = c.cmd(&["PEXPIRETIME", key]).as_int();
            assert!(deadline > 0, "{kind} {key}");
            l.expect(&[(key, "lock.acquired")], &format!("{kind} {key}"));
            let mut waiter = None;
            if key == "dl:queued" {
                let mut w = s.client();
                w.send(&["LOCK.ACQUIRE", key, "next", "PX", "60000", "BLOCK", "0"]);
                wait_queued(&s, 1);
                waiter = Some(w);
            }
            l.expect(
                &[(key, "expired")],
                &format!("{kind} {key}: the server expires the key first"),
            );
            let (k, e) = l.expect_next(&format!("{kind} {key}"));
            let heard = now_ms();
            assert_eq!(
                (k.as_str(), e.as_str()),
                (key, "lock.expired"),
                "{kind} round {round}"
            );
            // Heard after the deadline (Redis expires a key once now > deadline)...
            assert!(
                heard > deadline,
                "{kind} {key}: heard at {heard}, deadline {deadline}"
            );
            // ... and at most 50 ms after it (an upper bound: heard, not fired).
            let late = heard - deadline;
            worst = worst.max(late);
            assert!(
                late <= 50,
                "{kind} {key} round {round}: `lock.expired` {late} ms after the deadline"
            );
            if let Some(mut w) = waiter {
                l.expect(
                    &[(key, "lock.acquired")],
                    &format!("{kind} {key}: handed on"),
                );
                assert_eq!(w.read_reply(), Reply::Int(1));
                assert_eq!(c.cmd(&["LOCK.RELEASE", key, "next"]), Reply::Int(0));
                l.expect(&[(key, "lock.released")], &format!("{kind} {key}"));
            }
        }
    }
    eprintln!("{kind}: lock.expired heard at most {worst} ms after the deadline");
    l.silent(100, &format!("{kind}: nothing more"));
}

/// `lock.forced` for FORCERELEASE and `lock.closed` when a KEEPALIVE
/// holder's connection is killed, with nobody waiting (the hand-off cases
/// are in `hand_off_order`); a closed connection whose lock had been
/// released already fires nothing.
fn forced_and_closed(kind: Kind) {
    let s = Server::start(kind);
    notify(&s, "Kd");
    let mut c = s.client();
    let mut l = Listener::new(&s, false, &["fc:f", "fc:c", "fc:gone", "fc:m"]);
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "fc:f", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "fc:f"]), Reply::Int(1));
    l.expect(
        &[("fc:f", "lock.acquired"), ("fc:f", "lock.forced")],
        &format!("{kind}: forced"),
    );

    let mut holder = s.client();
    assert_eq!(
        holder.cmd(&["LOCK.ACQUIRE", "fc:c", "me", "PX", "60000", "KEEPALIVE"]),
        Reply::Int(1)
    );
    l.expect(&[("fc:c", "lock.acquired")], &format!("{kind}: tied"));
    let id = holder.id().to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id]), Reply::Int(1));
    l.expect(
        &[("fc:c", "lock.closed")],
        &format!("{kind}: connection killed"),
    );
    assert_eq!(owner_of(&mut c, "fc:c"), None);

    // Released before the connection closed: only `lock.released`.
    let mut holder = s.client();
    assert_eq!(
        holder.cmd(&["LOCK.ACQUIRE", "fc:gone", "me", "PX", "60000", "KEEPALIVE"]),
        Reply::Int(1)
    );
    assert_eq!(
        holder.cmd(&["LOCK.RELEASE", "fc:gone", "me"]),
        Reply::Int(0)
    );
    drop(holder);
    l.expect(
        &[("fc:gone", "lock.acquired"), ("fc:gone", "lock.released")],
        &format!("{kind}"),
    );
    assert!(wait_until(5 * SECOND, || lock_field(&s, "lock_tied") == 0));
    marker(
        &mut c,
        &mut l,
        "fc:m",
        &format!("{kind}: nothing for the closed connection"),
    );
}

/// A grant that replicas did not acknowledge in time is undone: its
/// `lock.acquired` is followed by `lock.released`, once.
fn replicas_undo_fires_released(kind: Kind) {
    let p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    let mut c = p.client();
    assert!(wait_until(10 * SECOND, || {
        p.info("replication").contains("state=online")
    }));
    c.cmd(&["SET", "ready", "1"]);
    assert_eq!(
        c.cmd(&["WAIT", "1", "5000"]),
        Reply::Int(1),
        "{kind}: replica streaming"
    );
    notify(&p, "Kd");
    let mut l = Listener::new(&p, false, &["ru:k", "ru:m"]);
    let frozen = Frozen::new(&r);
    let reply = c.cmd(&[
        "LOCK.ACQUIRE",
        "ru:k",
        "me",
        "PX",
        "60000",
        "REPLICAS",
        "1",
        "200",
    ]);
    match &reply {
        Reply::Error(e) => assert!(
            e.starts_with("NOREPLICAS") && e.contains("undone"),
            "{kind}: {e}"
        ),
        other => panic!("{kind}: expected NOREPLICAS, got {other:?}"),
    }
    l.expect(
        &[("ru:k", "lock.acquired"), ("ru:k", "lock.released")],
        &format!("{kind}: undo"),
    );
    drop(frozen);
    marker(&mut c, &mut l, "ru:m", &format!("{kind}: once"));
}

/// DEL and a Redisson script change locks outside LOCK.*: only the server's
/// own events fire (then `lock.acquired` when a waiter is handed the lock),
/// never a `lock.*` ending event, not even at the removed lease's deadline.
fn foreign_changes_fire_only_server_events(kind: Kind) {
    let s = Server::start(kind);
    notify(&s, "KA");
    let mut c = s.client();
    let keys = ["fx:del", "fx:script", "fx:queued", "fx:m"];
    let mut l = Listener::new(&s, false, &keys);
    // Short leases: their deadlines pass while we listen.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "fx:del", "me", "PX", "300"]),
        Reply::Int(1)
    );
    // A module lock with a Redisson-shaped owner, freed by Redisson's unlock.
    let owner = "11111111-2222-4333-8444-555555555555:1";
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "fx:script", owner, "PX", "300"]),
        Reply::Int(1)
    );
    let mut w = s.client();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "fx:queued", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    w.send(&[
        "LOCK.ACQUIRE",
        "fx:queued",
        "next",
        "PX",
        "60000",
        "BLOCK",
        "0",
    ]);
    wait_queued(&s, 1);

    assert_eq!(c.cmd(&["DEL", "fx:del"]), Reply::Int(1));
    let ch = redisson::channel(b"fx:script");
    let r = c.cmd(&args![
        "EVAL",
        redisson::UNLOCK,
        2,
        "fx:script",
        ch,
        redisson::UNLOCK_MESSAGE,
        30000,
        owner
    ]);
    assert_eq!(r, Reply::Int(1), "{kind}: Redisson's unlock");
    assert_eq!(c.cmd(&["DEL", "fx:queued"]), Reply::Int(1));
    assert_eq!(
        w.read_reply(),
        Reply::Int(1),
        "{kind}: the waiter is handed the lock"
    );

    // Until the removed leases' deadlines have passed (300 ms), then a
    // marker: what came before it.
    std::thread::sleep(Duration::from_millis(500));
    let got = lock_events(&mut c, &mut l, "fx:m");
    let want = [
        ("fx:del", "lock.acquired"),
        ("fx:script", "lock.acquired"),
        ("fx:queued", "lock.acquired"),
        ("fx:queued", "lock.acquired"),
    ];
    assert_eq!(
        got,
        pairs(&want),
        "{kind}: lock.* events (DEL, Redisson's unlock, DEL with a waiter)"
    );
}

// ---- LOCK.WAITERS -----------------------------------------------------------

/// The fields of one waiter: client id, owner, what, waited, left.
#[track_caller]
fn waiter_fields(w: &Reply) -> (i64, Option<String>, String, i64, i64) {
    let f = w.as_array();
    assert_eq!(f.len(), 5, "exactly five elements per waiter: {w:?}");
    let owner = if f[1].is_nil() {
        None
    } else {
        Some(f[1].as_str().to_string())
    };
    (
        f[0].as_int(),
        owner,
        f[2].as_str().to_string(),
        f[3].as_int(),
        f[4].as_int(),
    )
}

/// Each waiter in queue order: its CLIENT ID, owner (nil for `*`), `lock`,
/// ms waited and ms left (-1 for BLOCK 0), against the server clock, over
/// RESP2 and RESP3 (whose nil is the null type).
fn waiters_fields(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "wt:k", "holder", "PX", "60000"]),
        Reply::Int(1)
    );
    // Waiters in order: a named one forever, a generated owner for 5 s, a
    // KEEPALIVE one over RESP3 for 8 s.
    let mut ws = [s.client(), s.client(), s.client_resp3()];
    let ids: Vec<i64> = ws.iter_mut().map(|w| w.id()).collect();
    let calls: [&[&str]; 3] = [
        &["LOCK.ACQUIRE", "wt:k", "w1", "PX", "60000", "BLOCK", "0"],
        &["LOCK.ACQUIRE", "wt:k", "*", "PX", "60000", "BLOCK", "5000"],
        &[
            "LOCK.ACQUIRE",
            "wt:k",
            "w3",
            "PX",
            "60000",
            "BLOCK",
            "8000",
            "KEEPALIVE",
        ],
    ];
    let mut sent_ms = Vec::new();
    for (i, (w, call)) in ws.iter_mut().zip(calls).enumerate() {
        // TIME just before the call, on the server's clock.
        send_timed(w, call);
        sent_ms.push(time_us(&w.read_reply()) / 1000);
        wait_queued(&s, i as u64 + 1);
    }
    std::thread::sleep(Duration::from_millis(150));
    for (proto, cl) in [("RESP2", &mut c), ("RESP3", &mut c3)] {
        let before_ms = server_us(cl) / 1000;
        let r = cl.cmd(&["LOCK.WAITERS", "wt:k"]);
        let after_ms = server_us(cl) / 1000;
        let list = r.as_array();
        assert_eq!(list.len(), 3, "{kind} {proto}: {r:?}");
        if proto == "RESP3" {
            assert_eq!(
                list[1].as_array()[1],
                Reply::Null,
                "{kind}: RESP3 nil owner"
            );
        } else {
            assert_eq!(list[1].as_array()[1], Reply::Nil, "{kind}: RESP2 nil owner");
        }
        let blocks = [None, Some(5000), Some(8000)];
        let owners = [Some("w1"), None, Some("w3")];
        for (i, w) in list.iter().enumerate() {
            let (id, owner, what, waited, left) = waiter_fields(w);
            let what_ = format!("{kind} {proto} waiter {i}: {w:?}");
            assert_eq!(id, ids[i], "{what_}: CLIENT ID");
            assert_eq!(owner.as_deref(), owners[i], "{what_}");
            assert_eq!(what, "lock", "{what_}");
            // Queued after `sent`, looked at between before and after.
            let (lo, hi) = (before_ms - sent_ms[i] - 1, after_ms - sent_ms[i] + 1);
            assert!(
                (lo..=hi).contains(&waited),
                "{what_}: waited {waited}, expected {lo}..={hi}"
            );
            match blocks[i] {
                None => assert_eq!(left, -1, "{what_}"),
                Some(b) => {
                    let (lo, hi) = (
                        b - (after_ms - sent_ms[i]) - 1,
                        b - (before_ms - sent_ms[i]) + 1,
                    );
                    assert!(
                        (lo..=hi).contains(&left),
                        "{what_}: left {left}, expected {lo}..={hi}"
                    );
                }
            }
        }
    }
    // Read-only: the lock's key is as it was.
    let before = key_state(&mut c, b"wt:k");
    c.cmd(&["LOCK.WAITERS", "wt:k"]);
    assert_eq!(key_state(&mut c, b"wt:k"), before, "{kind}");
    // The head goes first: the rest move up, in order.
    assert_eq!(c.cmd(&["LOCK.RELEASE", "wt:k", "holder"]), Reply::Int(0));
    assert_eq!(ws[0].read_reply(), Reply::Int(1));
    let r = c.cmd(&["LOCK.WAITERS", "wt:k"]);
    let left: Vec<i64> = r.as_array().iter().map(|w| waiter_fields(w).0).collect();
    assert_eq!(left, ids[1..].to_vec(), "{kind}: {r:?}");
    // A waiter that leaves (its connection closed) is gone from the list.
    let id = ids[1].to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id]), Reply::Int(1));
    assert!(wait_until(5 * SECOND, || {
        c.cmd(&["LOCK.WAITERS", "wt:k"]).as_array().len() == 1
    }));
}

/// No queue: an empty array, whatever the key holds (nothing, a lock with
/// no waiter, any type), in both protocols.
fn waiters_empty_for_any_key(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    c.cmd(&["SET", "we:string", "x"]);
    c.cmd(&["HSET", "we:hash", "f", "1"]);
    c.cmd(&["RPUSH", "we:list", "a"]);
    c.cmd(&["SADD", "we:set", "a"]);
    c.cmd(&["ZADD", "we:zset", "1", "a"]);
    c.cmd(&["XADD", "we:stream", "*", "f", "v"]);
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "we:lock", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    // A queue that emptied: its waiter timed out.
    let mut w = s.client();
    assert!(
        w.cmd(&[
            "LOCK.ACQUIRE",
            "we:lock",
            "other",
            "PX",
            "60000",
            "BLOCK",
            "50"
        ])
        .is_nil()
    );
    for key in [
        "we:none",
        "we:string",
        "we:hash",
        "we:list",
        "we:set",
        "we:zset",
        "we:stream",
        "we:lock",
    ] {
        let before = key_state(&mut c, key.as_bytes());
        assert_eq!(
            c.cmd(&["LOCK.WAITERS", key]),
            Reply::Array(vec![]),
            "{kind} {key}"
        );
        assert_eq!(
            c3.cmd(&["LOCK.WAITERS", key]),
            Reply::Array(vec![]),
            "{kind} {key} RESP3"
        );
        assert_eq!(
            key_state(&mut c, key.as_bytes()),
            before,
            "{kind} {key}: unchanged"
        );
    }
    // Arity.
    assert!(c.cmd(&["LOCK.WAITERS"]).is_error());
    assert!(c.cmd(&["LOCK.WAITERS", "a", "b"]).is_error());
}

/// On a replica LOCK.WAITERS works and is empty (queues are connection
/// state on the primary), while the primary has waiters.
fn waiters_on_a_replica(kind: Kind) {
    let p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    let mut c = p.client();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "wr:k", "me", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut w = p.client();
    w.send(&["LOCK.ACQUIRE", "wr:k", "next", "PX", "60000", "BLOCK", "0"]);
    wait_queued(&p, 1);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["LOCK.WAITERS", "wr:k"]).as_array().len(),
        1,
        "{kind}: primary"
    );
    let mut rc = r.client();
    assert_eq!(
        rc.cmd(&["EXISTS", "wr:k"]),
        Reply::Int(1),
        "{kind}: replicated"
    );
    assert_eq!(
        rc.cmd(&["LOCK.WAITERS", "wr:k"]),
        Reply::Array(vec![]),
        "{kind}: replica"
    );
    assert_eq!(
        rc.cmd(&["LOCK.WAITERS", "wr:none"]),
        Reply::Array(vec![]),
        "{kind}: replica"
    );
    assert_eq!(
        r.client_resp3().cmd(&["LOCK.WAITERS", "wr:k"]),
        Reply::Array(vec![])
    );
}

// ---- metrics -----------------------------------------------------------------

/// `lock_<family>_<name>` of INFO lock.
fn metric(s: &Server, family: &str, name: &str) -> i64 {
    let field = format!("lock_{family}_{name}");
    let v = lock_field(s, &field);
    assert_ne!(v, u64::MAX, "INFO lock has no {field}: {}", s.info("lock"));
    v as i64
}

/// A value that the histogram reports for a true value within [lo, hi] µs:
/// a bucket's middle is within 1/16 of any value in it.
#[track_caller]
fn within_bucket(got: i64, lo: i64, hi: i64, what: &str) {
    let (min, max) = (lo - lo / 16 - 1000, hi + hi / 16 + 1000);
    assert!(
        (min..=max).contains(&got),
        "{what}: {got} µs, true value {lo}..={hi} µs (bucket error 1/16, 1 ms slack)"
    );
}

/// Known waits and holds come back as the percentiles and maxima of INFO
/// lock within the histogram's bucket error; samples are counted; immediate
/// grants and timed-out waits are counted apart; CONFIG RESETSTAT resets.
/// Timed on the server clock: a waiter queued at t0 (TIME just before its
/// call) and granted by a release run between r0 and r1 waited r0-t0..r1-t0.
fn wait_and_hold_metrics(kind: Kind) {
    let s = Server::start(kind);
    for p in MEASURED {
        let f = p.family;
        let mut c = s.client();
        ok(c.cmd(&["CONFIG", "RESETSTAT"]));
        for name in [
            "wait_samples",
            "hold_samples",
            "granted_immediately",
            "wait_timeouts",
            "wait_max_us",
            "hold_max_us",
        ] {
            assert_eq!(metric(&s, f, name), 0, "{kind} {f}: {name} after RESETSTAT");
        }
        let key = format!("m:{f}");
        let (mut a, mut b, mut d) = (s.client(), s.client(), s.client());
        // a holds from a0 to a release between r0 and r1.
        send_timed(&mut a, &(p.take)(&key, "a", 60000, None));
        let a_took = read_timed(&mut a);
        assert_eq!(a_took.reply, p.granted, "{kind} {f}");
        // b waits ~200 ms, d ~500 ms.
        send_timed(&mut b, &(p.take)(&key, "b", 60000, Some(10000)));
        let b0 = time_us(&b.read_reply());
        wait_queued(&s, 1);
        send_timed(&mut d, &(p.take)(&key, "d", 60000, Some(10000)));
        let d0 = time_us(&d.read_reply());
        wait_queued(&s, 2);
        // A third waiter gives up after 100 ms: a timeout, not a wait sample.
        let mut t = s.client();
        assert!(
            t.cmd(&(p.take)(&key, "t", 60000, Some(100))).is_nil(),
            "{kind} {f}: timed out"
        );
        sleep_until_server(&mut c, b0 + 200_000);
        send_timed(&mut a, &(p.give)(&key, "a"));
        let a_rel = read_timed(&mut a);
        assert_eq!(b.read_reply(), p.granted, "{kind} {f}: b granted");
        time_us(&b.read_reply());
        // b holds ~300 ms.
        sleep_until_server(&mut c, a_rel.answered_us + 300_000);
        send_timed(&mut b, &(p.give)(&key, "b"));
        let b_rel = read_timed(&mut b);
        assert_eq!(d.read_reply(), p.granted, "{kind} {f}: d granted");
        time_us(&d.read_reply());
        send_timed(&mut d, &(p.give)(&key, "d"));
        let d_rel = read_timed(&mut d);
        // A re-entry: not a new hold, not an immediate grant of a new hold.
        assert_eq!(c.cmd(&(p.take)(&key, "e", 60000, None)), p.granted);
        let what = |n: &str| format!("{kind} {f}: {n}");

        // Waits: b's ~200 ms, d's ~500 ms.
        let wait_b = (a_rel.sent_us - b0, a_rel.answered_us - b0);
        let wait_d = (b_rel.sent_us - d0, b_rel.answered_us - d0);
        assert_eq!(metric(&s, f, "wait_samples"), 2, "{}", what("wait samples"));
        assert_eq!(metric(&s, f, "wait_timeouts"), 1, "{}", what("timeouts"));
        // a and e at once; b and d waited.
        assert_eq!(
            metric(&s, f, "granted_immediately"),
            2,
            "{}",
            what("immediate grants")
        );
        // Of two samples, p50 is the smaller, p99 and p999 the larger.
        within_bucket(
            metric(&s, f, "wait_p50_us"),
            wait_b.0,
            wait_b.1,
            &what("wait p50"),
        );
        within_bucket(
            metric(&s, f, "wait_p99_us"),
            wait_d.0,
            wait_d.1,
            &what("wait p99"),
        );
        within_bucket(
            metric(&s, f, "wait_p999_us"),
            wait_d.0,
            wait_d.1,
            &what("wait p999"),
        );
        let max = metric(&s, f, "wait_max_us");
        assert!(
            (wait_d.0 - 1000..=wait_d.1 + 1000).contains(&max),
            "{}: {max} not in {wait_d:?}",
            what("wait max (exact)")
        );
        assert!(
            metric(&s, f, "wait_p99_us") <= max,
            "{}",
            what("p99 <= max")
        );

        // Holds: a's (a0..r), b's ~300 ms, d's (short); e still holds.
        let hold_a = (
            a_rel.sent_us - a_took.answered_us,
            a_rel.answered_us - a_took.sent_us,
        );
        let hold_b = (
            b_rel.sent_us - a_rel.answered_us,
            b_rel.answered_us - a_rel.sent_us,
        );
        let hold_d = (
            d_rel.sent_us - b_rel.answered_us,
            d_rel.answered_us - b_rel.sent_us,
        );
        assert_eq!(metric(&s, f, "hold_samples"), 3, "{}", what("hold samples"));
        let mut holds = [hold_a, hold_b, hold_d];
        holds.sort();
        // Ranks of 3 samples: p50 -> 2nd, p99 and p999 -> 3rd.
        within_bucket(
            metric(&s, f, "hold_p50_us"),
            holds[1].0,
            holds[1].1,
            &what("hold p50"),
        );
        within_bucket(
            metric(&s, f, "hold_p99_us"),
            holds[2].0,
            holds[2].1,
            &what("hold p99"),
        );
        within_bucket(
            metric(&s, f, "hold_p999_us"),
            holds[2].0,
            holds[2].1,
            &what("hold p999"),
        );
        let max = metric(&s, f, "hold_max_us");
        assert!(
            (holds[2].0 - 1000..=holds[2].1 + 1000).contains(&max),
            "{}: {max}",
            what("hold max")
        );
        eprintln!(
            "{kind} {f}: waits p50 {} p99 {} max {} µs, holds p50 {} p99 {} max {} µs",
            metric(&s, f, "wait_p50_us"),
            metric(&s, f, "wait_p99_us"),
            metric(&s, f, "wait_max_us"),
            metric(&s, f, "hold_p50_us"),
            metric(&s, f, "hold_p99_us"),
            metric(&s, f, "hold_max_us"),
        );
        // The other families saw nothing of it.
        for other in MEASURED.iter().filter(|o| o.family != f) {
            assert_eq!(
                metric(&s, other.family, "wait_samples"),
                0,
                "{}",
                what(other.family)
            );
            assert_eq!(
                metric(&s, other.family, "hold_samples"),
                0,
                "{}",
                what(other.family)
            );
        }
        // RESETSTAT: all back to 0.
        ok(c.cmd(&["CONFIG", "RESETSTAT"]));
        for (name, v) in lock_fields(&s) {
            if name.starts_with(&format!("lock_{f}_")) {
                assert_eq!(v, "0", "{kind}: {name} after CONFIG RESETSTAT");
            }
        }
        // e's hold goes on counting after the reset.
        assert_eq!(c.cmd(&(p.give)(&key, "e")), reply_of_last_release(f));
        assert_eq!(
            metric(&s, f, "hold_samples"),
            1,
            "{}",
            what("a hold ended after the reset")
        );
    }
}

/// What the release of a last hold replies.
fn reply_of_last_release(_family: &str) -> Reply {
    Reply::Int(0)
}

/// Sleeps until the server's clock reads `us`.
fn sleep_until_server(c: &mut Client, us: i64) {
    loop {
        let now = server_us(c);
        if now >= us {
            return;
        }
        std::thread::sleep(Duration::from_micros((us - now) as u64));
    }
}

/// A lock that lapses is a hold sample too, ending at its deadline (not
/// when the module noticed): at the deadline while lifecycle events are on
/// (the module then watches deadlines), else once a later grant finds it
/// (grants settle lapsed holds whose 1,024 ms deadline bucket has passed).
fn lapsed_hold_is_a_sample(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    for events in [true, false] {
        notify(&s, if events { "Kd" } else { "" });
        ok(c.cmd(&["CONFIG", "RESETSTAT"]));
        let key = format!("lh:{events}");
        send_timed(&mut c, &["LOCK.ACQUIRE", &key, "me", "PX", "200"]);
        let t = read_timed(&mut c);
        assert_eq!(t.reply, Reply::Int(1));
        let what = format!("{kind} (lifecycle events {events})");
        if events {
            assert!(
                wait_until(5 * SECOND, || metric(&s, "lock", "hold_samples") == 1),
                "{what}: {}",
                s.info("lock")
            );
        } else {
            // Without events nothing watches the deadline: INFO settles it.
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(
                metric(&s, "lock", "hold_samples"),
                1,
                "{what}: INFO lock counts the lapsed lease"
            );
        }
        let took = t.answered_us - t.sent_us;
        within_bucket(
            metric(&s, "lock", "hold_max_us"),
            199_000 - took,
            201_000 + took,
            &format!("{what}: a 200 ms lease"),
        );
        c.cmd(&["DEL", "lh:other"]);
    }
}

/// LATENCY LATEST / HISTORY show `lock-wait` and `lock-hold` over
/// `latency-monitor-threshold`, nothing below it, and nothing with the
/// monitor off.
fn latency_events(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    // A wait of ~200 ms and a hold of ~300 ms, a short hold and wait.
    let play = |c: &mut Client| {
        let mut a = s.client();
        let mut b = s.client();
        assert_eq!(
            a.cmd(&["LOCK.ACQUIRE", "lat:k", "a", "PX", "60000"]),
            Reply::Int(1)
        );
        b.send(&["LOCK.ACQUIRE", "lat:k", "b", "PX", "60000", "BLOCK", "5000"]);
        wait_queued(&s, 1);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(a.cmd(&["LOCK.RELEASE", "lat:k", "a"]), Reply::Int(0));
        assert_eq!(b.read_reply(), Reply::Int(1));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(b.cmd(&["LOCK.RELEASE", "lat:k", "b"]), Reply::Int(0));
        // Below any threshold: nothing.
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "lat:short", "a", "PX", "60000"]),
            Reply::Int(1)
        );
        assert_eq!(c.cmd(&["LOCK.RELEASE", "lat:short", "a"]), Reply::Int(0));
    };
    let latest = |c: &mut Client| -> BTreeMap<String, (i64, i64)> {
        c.cmd(&["LATENCY", "LATEST"])
            .as_array()
            .iter()
            .map(|e| {
                let f = e.as_array();
                (f[0].as_str().to_string(), (f[2].as_int(), f[3].as_int()))
            })
            .collect()
    };

    // Off (the default threshold 0): nothing recorded.
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-monitor-threshold"])
            .as_array()[1]
            .as_str(),
        "0"
    );
    play(&mut c);
    let l = latest(&mut c);
    assert!(
        !l.contains_key("lock-wait") && !l.contains_key("lock-hold"),
        "{kind}: monitor off: {l:?}"
    );
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY", "lock-wait"]),
        Reply::Array(vec![])
    );

    ok(c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "100"]));
    play(&mut c);
    let l = latest(&mut c);
    let (wait_latest, _) = l
        .get("lock-wait")
        .copied()
        .unwrap_or_else(|| panic!("{kind}: no lock-wait in {l:?}"));
    let (hold_latest, hold_max) = l
        .get("lock-hold")
        .copied()
        .unwrap_or_else(|| panic!("{kind}: no lock-hold in {l:?}"));
    assert!(
        (195..=400).contains(&wait_latest),
        "{kind}: lock-wait {wait_latest} ms"
    );
    assert!(
        (295..=600).contains(&hold_latest),
        "{kind}: lock-hold {hold_latest} ms"
    );
    assert!(hold_max >= hold_latest);
    // a's hold (~200 ms, the wait) is over the threshold too; the short hold
    // is not: every history entry is over 100 ms.
    for event in ["lock-wait", "lock-hold"] {
        let h = c.cmd(&["LATENCY", "HISTORY", event]);
        assert!(!h.as_array().is_empty(), "{kind}: {event}: {h:?}");
        for e in h.as_array() {
            let ms = e.as_array()[1].as_int();
            assert!(
                ms >= 100,
                "{kind}: {event} history {ms} ms under the threshold"
            );
        }
    }
    // Threshold back to 0 and reset: nothing new.
    ok(c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "0"]));
    c.cmd(&["LATENCY", "RESET"]);
    play(&mut c);
    let l = latest(&mut c);
    assert!(
        !l.contains_key("lock-wait") && !l.contains_key("lock-hold"),
        "{kind}: off again: {l:?}"
    );
}

// ---- the Prometheus collector and the Grafana dashboard ---------------------

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn collector_script() -> String {
    let path = repo_file("docs/observability/hashlock-collector.lua");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The collector as redis_exporter runs it (`EVAL script 0 0`): the flat
/// name/value array of strings.
#[track_caller]
fn run_collector(c: &mut Client) -> BTreeMap<String, String> {
    let r = c.cmd(&["EVAL", &collector_script(), "0", "0"]);
    let flat = match &r {
        Reply::Array(flat) => flat,
        other => panic!("the collector replied {other:?}"),
    };
    assert_eq!(flat.len() % 2, 0, "{r:?}");
    let mut out = BTreeMap::new();
    for kv in flat.chunks_exact(2) {
        // Both strings (bulk), as redis_exporter's StringMap needs.
        assert!(
            matches!(kv[0], Reply::Bulk(_)) && matches!(kv[1], Reply::Bulk(_)),
            "{kv:?}"
        );
        let v = kv[1].as_str().to_string();
        assert!(v.parse::<f64>().is_ok(), "{kv:?}: not a number");
        assert!(
            out.insert(kv[0].as_str().to_string(), v).is_none(),
            "{kv:?} twice"
        );
    }
    out
}

/// The collector returns every number of INFO lock under its field name,
/// plus `lock_module_loaded` and `lock_warning_eviction`; on RESP3 too, on a
/// replica, and on a server without the module.
fn collector_returns_info_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    // Something to count: a held lock, a waiter, a tie.
    let mut tied = s.client();
    assert_eq!(
        tied.cmd(&["LOCK.ACQUIRE", "co:k", "me", "PX", "60000", "KEEPALIVE"]),
        Reply::Int(1)
    );
    let mut w = s.client();
    w.send(&["LOCK.ACQUIRE", "co:k", "next", "PX", "60000", "BLOCK", "0"]);
    wait_queued(&s, 1);
    let got = run_collector(&mut c);
    let mut want = lock_fields(&s);
    want.insert("lock_module_loaded".into(), "1".into());
    want.insert("lock_warning_eviction".into(), "0".into());
    assert_eq!(got, want, "{kind}: the collector against INFO lock");
    for name in [
        "lock_waiting",
        "lock_queues",
        "lock_tied",
        "lock_stale_grants",
        "lock_busy",
        "lock_timed_out",
        "lock_lock_wait_p99_us",
        "lock_lock_hold_p999_us",
        "lock_rwlock_wait_samples",
        "lock_semaphore_granted_immediately",
        "lock_latch_wait_timeouts",
    ] {
        assert!(got.contains_key(name), "{kind}: {name} missing: {got:?}");
    }
    assert_eq!(got["lock_waiting"], "1");
    assert_eq!(got["lock_tied"], "1");
    assert_eq!(got["lock_lock_granted_immediately"], "1");
    // RESP3: the same flat array.
    let mut c3 = s.client_resp3();
    let r3 = run_collector(&mut c3);
    assert_eq!(
        r3.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "{kind}: RESP3"
    );

    // An eviction warning: flagged.
    ok(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]));
    assert_eq!(
        run_collector(&mut c)["lock_warning_eviction"],
        "1",
        "{kind}"
    );
    ok(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]));

    // A replica (read-only): it runs there.
    let r = Server::start(kind);
    r.replica_of(&s);
    let on_replica = run_collector(&mut r.client());
    assert_eq!(on_replica["lock_module_loaded"], "1", "{kind}: replica");
    assert_eq!(on_replica["lock_waiting"], "0", "{kind}: replica");

    // No module: says so, and nothing else.
    let bare = Server::builder(kind).no_module().start();
    let got = run_collector(&mut bare.client());
    let want: BTreeMap<String, String> =
        [("lock_module_loaded", "0"), ("lock_warning_eviction", "0")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert_eq!(got, want, "{kind}: without the module");
}

/// redis_exporter's binary: $REDIS_EXPORTER, else `redis_exporter` or
/// Debian's `prometheus-redis-exporter` on PATH (scripts/deps.sh test
/// installs the latter).
fn exporter_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("REDIS_EXPORTER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var("PATH").unwrap_or_default();
    for name in ["redis_exporter", "prometheus-redis-exporter"] {
        for dir in path.split(':') {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The exporter process, killed when dropped.
struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` on 127.0.0.1:`port` (HTTP/1.0: the body until close).
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(10 * SECOND)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then_some(())?;
    head.contains(" 200 ").then(|| body.to_string())
}

/// `redis_script_values{key="<name>"...} value` lines of a scrape.
fn script_values(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("redis_script_values{"))
        .filter_map(|l| {
            let key = l.split("key=\"").nth(1)?.split('"').next()?;
            let value = l.rsplit(' ').next()?.parse().ok()?;
            Some((key.to_string(), value))
        })
        .collect()
}

/// The real redis_exporter with `--script` the collector, scraped over
/// HTTP: every series the collector returns is there as
/// `redis_script_values{key=...}` with INFO lock's value, and the LATENCY
/// events as `redis_latency_spike_*{event_name="lock-hold"}`.
fn real_exporter_scrapes_the_collector(kind: Kind) {
    let Some(bin) = exporter_binary() else {
        panic!(
            "redis_exporter not found: run scripts/deps.sh test (installs Debian's \
             prometheus-redis-exporter) or set REDIS_EXPORTER"
        );
    };
    let s = Server::start(kind);
    let mut c = s.client();
    ok(c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "50"]));
    // A wait of ~100 ms, a hold of ~150 ms, a waiter left queued.
    let mut a = s.client();
    assert_eq!(
        a.cmd(&["LOCK.ACQUIRE", "ex:k", "a", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut b = s.client();
    b.send(&["LOCK.ACQUIRE", "ex:k", "b", "PX", "60000", "BLOCK", "5000"]);
    wait_queued(&s, 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(a.cmd(&["LOCK.RELEASE", "ex:k", "a"]), Reply::Int(0));
    assert_eq!(b.read_reply(), Reply::Int(1));
    let mut w = s.client();
    w.send(&["LOCK.ACQUIRE", "ex:k", "w", "PX", "60000", "BLOCK", "0"]);
    wait_queued(&s, 1);

    let port = free_port();
    let script = repo_file("docs/observability/hashlock-collector.lua");
    let child = Command::new(&bin)
        .arg("-redis.addr")
        .arg(format!("redis://127.0.0.1:{}", s.port))
        .arg("-web.listen-address")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-script")
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let mut exporter = Exporter(child);
    let mut scraped = None;
    let started = Instant::now();
    while started.elapsed() < 20 * SECOND {
        if let Some(body) = http_get(port, "/metrics")
            && body.contains("redis_script_values")
        {
            scraped = Some(body);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let Some(body) = scraped else {
        let _ = exporter.0.kill();
        let mut err = String::new();
        if let Some(mut e) = exporter.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!(
            "{kind}: no redis_script_values scraped from {} within 20 s:\n{err}",
            bin.display()
        );
    };
    let values = script_values(&body);
    let direct = run_collector(&mut c);
    assert_eq!(
        values.keys().collect::<Vec<_>>(),
        direct.keys().collect::<Vec<_>>(),
        "{kind}: every series of the collector is exported"
    );
    assert_eq!(values["lock_module_loaded"], 1.0);
    assert_eq!(values["lock_waiting"], 1.0, "{kind}: the queued waiter");
    assert_eq!(values["lock_lock_wait_samples"], 1.0);
    assert_eq!(values["lock_lock_hold_samples"], 1.0, "{kind}: a's hold");
    let p99 = values["lock_lock_wait_p99_us"];
    assert!(
        (90_000.0..=400_000.0).contains(&p99),
        "{kind}: wait p99 {p99} µs"
    );
    assert!(
        body.contains("redis_latency_spike_duration_seconds{event_name=\"lock-wait\"}"),
        "{kind}: {body}"
    );
    eprintln!(
        "{kind}: {} scraped {} redis_script_values series, e.g. lock_lock_wait_p99_us {p99}",
        bin.display(),
        values.len()
    );
    drop(exporter);
}

/// The dashboard is valid JSON, and every query asks for series that the
/// collector returns (or redis_exporter's own LATENCY series).
#[test]
fn grafana_dashboard_uses_the_collectors_series() {
    let path = repo_file("docs/observability/grafana-hashlock.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let d: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
    assert!(d["title"].as_str().is_some_and(|t| t.contains("hashlock")));
    assert!(d["uid"].as_str().is_some());
    assert!(d["schemaVersion"].as_i64().is_some());
    let panels = d["panels"].as_array().expect("panels");
    // Every INFO lock field the collector can return (server-independent:
    // from a fresh Redis).
    let s = Server::start(Kind::Redis);
    let series = run_collector(&mut s.client());
    let mut titles = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap_or_default().to_string();
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("panel {title}: no targets"));
        assert!(!targets.is_empty(), "panel {title}: no targets");
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title}: target without expr"));
            // Each key="..." or key=~"..." selector names collector series.
            for sel in expr.split("key=").skip(1) {
                let (regex, rest) = match sel.strip_prefix('~') {
                    Some(r) => (true, r),
                    None => (false, sel),
                };
                let pat = rest.trim_start_matches('"').split('"').next().unwrap();
                let matched: Vec<&String> = series
                    .keys()
                    .filter(|k| {
                        if regex {
                            regex_lite_match(pat, k)
                        } else {
                            *k == pat
                        }
                    })
                    .collect();
                assert!(
                    !matched.is_empty(),
                    "panel {title}: `{pat}` matches no series of the collector"
                );
                used.extend(matched.into_iter().cloned());
            }
            assert!(
                expr.contains("redis_script_values") || expr.contains("redis_latency_spike"),
                "panel {title}: {expr}"
            );
        }
        titles.push(title);
    }
    // What the dashboard must show.
    for (what, key) in [
        ("wait percentiles", "lock_lock_wait_p99_us"),
        ("hold percentiles", "lock_lock_hold_p99_us"),
        ("rwlock waits", "lock_rwlock_wait_p99_us"),
        ("semaphore waits", "lock_semaphore_wait_p99_us"),
        ("latch waits", "lock_latch_wait_p99_us"),
        ("waiters", "lock_waiting"),
        ("contention", "lock_busy"),
        ("timeouts", "lock_timed_out"),
        ("stale grants", "lock_stale_grants"),
        ("keepalive ties", "lock_tied"),
        ("keepalive releases", "lock_keepalive_released"),
    ] {
        assert!(
            used.contains(key),
            "the dashboard shows no {what} ({key}); panels: {titles:?}"
        );
    }
}

/// README "Observing locks" names every field INFO lock prints, exactly as
/// printed (a metric field as `lock_<p>_...` for the four primitives).
#[test]
fn readme_names_every_info_lock_field() {
    let readme = std::fs::read_to_string(repo_file("README.md")).expect("README.md");
    let start = readme
        .find("\n## Observing locks")
        .expect("README has \"## Observing locks\"");
    let rest = &readme[start + 1..];
    let section = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3)];
    let s = Server::start(Kind::Redis);
    // The warnings section too.
    ok(s.client()
        .cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]));
    let info = s.info("lock");
    let fields: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .filter(|k| k.starts_with("lock_"))
        .collect();
    assert!(fields.len() > 80, "{info}");
    assert!(fields.contains(&"lock_eviction"), "{info}");
    let mut missing = Vec::new();
    for f in fields {
        let generic = ["lock", "rwlock", "semaphore", "latch"]
            .iter()
            .find_map(|p| {
                f.strip_prefix(&format!("lock_{p}_"))
                    .filter(|rest| {
                        rest.starts_with("wait_")
                            || rest.starts_with("hold_")
                            || *rest == "granted_immediately"
                    })
                    .map(|rest| format!("`lock_<p>_{rest}`"))
            });
        let named = section.contains(&format!("`{f}`"));
        if !named && !generic.is_some_and(|g| section.contains(&g)) {
            missing.push(f);
        }
    }
    assert!(
        missing.is_empty(),
        "README \"Observing locks\" does not name {missing:?}"
    );
}

/// The small regular expressions the dashboard uses (anchored, as
/// Prometheus anchors them): literals, `(a|b|c)` alternations and `.*`.
fn regex_lite_match(pat: &str, s: &str) -> bool {
    fn m(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'.') if p.get(1) == Some(&b'*') => (0..=s.len()).any(|i| m(&p[2..], &s[i..])),
            Some(b'(') => {
                let close = p.iter().position(|&c| c == b')').expect("unclosed (");
                let rest = &p[close + 1..];
                p[1..close]
                    .split(|&c| c == b'|')
                    .any(|alt| s.starts_with(alt) && m(rest, &s[alt.len()..]))
            }
            Some(&c) => s.first() == Some(&c) && m(&p[1..], &s[1..]),
        }
    }
    m(pat.as_bytes(), s.as_bytes())
}

/// Timing holds (INFO lock's hold metrics, on by default) costs memory per
/// held lock, and that memory comes back when the locks are released even
/// while another hold stays: 100,000 locks taken and released beside one
/// long hold leave used_memory within 1 MiB of where it was once the
/// server's cron has shrunk its own tables (the hold table used to keep its
/// 2^17 buckets, 11 MB, for as long as any hold was left).
fn hold_memory_comes_back(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let used = |s: &Server| -> i64 {
        s.info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .expect("used_memory")
    };
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "stays", "o", "PX", "600000"]),
        Reply::Int(1)
    );
    let base = used(&s);
    let (n, batch) = (100_000, 1000);
    for op in ["LOCK.ACQUIRE", "LOCK.RELEASE"] {
        for start in (0..n).step_by(batch) {
            let keys: Vec<String> = (start..start + batch).map(|i| format!("h:{i}")).collect();
            let cmds: Vec<Vec<&str>> = keys
                .iter()
                .map(|k| match op {
                    "LOCK.ACQUIRE" => vec![op, k.as_str(), "o", "PX", "600000"],
                    _ => vec![op, k.as_str(), "o"],
                })
                .collect();
            let refs: Vec<&[&str]> = cmds.iter().map(|v| v.as_slice()).collect();
            c.send_pipeline(&refs);
            for _ in 0..batch {
                let r = c.read_reply();
                assert!(!r.is_error(), "{kind}: {op}: {r:?}");
            }
        }
    }
    let mut grew = 0;
    let back = wait_until(Duration::from_secs(5), || {
        grew = used(&s) - base;
        grew < 1 << 20
    });
    assert!(
        back,
        "{kind}: used_memory still {grew} B above its baseline 5 s after 100,000 locks were taken and released"
    );
    assert_eq!(
        c.cmd(&["EXISTS", "stays"]),
        Reply::Int(1),
        "{kind}: the long hold stays"
    );
}

/// Lapsed holds are settled by the module's job batches, and Valkey (like
/// Redis >= 7.2) expires keys by the time taken when a batch began: a batch
/// that started in millisecond d and ran into d+1 still saw a lock with
/// deadline d as live while the module's clock said it had lapsed. The hold
/// was filed again and taken out again in the same pass, for ever: the
/// server answered nothing (first seen under R8's multi-key churn). Here 800
/// locks whose deadlines are spread over 200 ms, each with a queued waiter
/// (one hand-on per lock: batches that cross millisecond boundaries), with
/// lifecycle events on: the server must keep answering PING. (Before the
/// fix it stopped answering in every trial on Valkey.)
fn settling_lapsed_holds_never_loops(kind: Kind) {
    const KEYS: usize = 800;
    testkit::raise_fd_limit(2 * KEYS as u64 + 1000);
    let s = Server::start(kind);
    notify(&s, "Kd");
    let mut c = s.client();
    let keys: Vec<String> = (0..KEYS).map(|i| format!("spread:{i}")).collect();
    let leases: Vec<String> = (0..KEYS).map(|i| (400 + i % 200).to_string()).collect();
    let cmds: Vec<Vec<&str>> = keys
        .iter()
        .zip(&leases)
        .map(|(k, px)| vec!["LOCK.ACQUIRE", k.as_str(), "h", "PX", px.as_str()])
        .collect();
    let refs: Vec<&[&str]> = cmds.iter().map(|v| v.as_slice()).collect();
    c.send_pipeline(&refs);
    for k in &keys {
        assert_eq!(c.read_reply(), Reply::Int(1), "{kind}: {k}");
    }
    let mut waiters: Vec<Client> = Vec::with_capacity(KEYS);
    for k in &keys {
        let mut w = s.client();
        w.send(&[
            "LOCK.ACQUIRE",
            k.as_str(),
            "w",
            "PX",
            "30000",
            "BLOCK",
            "5000",
        ]);
        waiters.push(w);
    }
    // The deadlines pass within ~600 ms of the first acquisition.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let mut p = s.client();
        p.send(&["PING"]);
        let t0 = Instant::now();
        let reply = p.try_read_reply(Duration::from_secs(5));
        assert_eq!(
            reply,
            Some(Reply::Status("PONG".into())),
            "{kind}: the server did not answer PING within 5 s (after {:?})",
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every waiter got its lock in the end.
    for (k, w) in keys.iter().zip(&mut waiters) {
        assert_eq!(
            w.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Int(1)),
            "{kind}: {k}"
        );
    }
}

per_kind!(
    one_event_per_change,
    events_follow_the_setting,
    hand_off_order,
    expired_at_the_deadline,
    forced_and_closed,
    replicas_undo_fires_released,
    foreign_changes_fire_only_server_events,
    waiters_fields,
    waiters_empty_for_any_key,
    waiters_on_a_replica,
    wait_and_hold_metrics,
    hold_memory_comes_back,
    settling_lapsed_holds_never_loops,
    lapsed_hold_is_a_sample,
    latency_events,
    collector_returns_info_lock,
    real_exporter_scrapes_the_collector,
);
