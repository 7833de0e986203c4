//! SEMAPHORE.* with waiting and time (SPEC Part 2, "Semaphores", "Rules
//! shared by the family", Part 3): one FIFO queue per key for ACQUIRE and
//! LEASE waiters, strictly head-of-line; the queue served whenever the
//! semaphore changes, whoever changed it; leased permits back at their
//! deadline (the server's sweep, no client call); KEEPALIVE permits renewed
//! by the server and back the moment their connection closes (a SIGKILLed
//! process included); REPLICAS with undo; lifecycle events in order.
//! Times are read on the server's clock. Redis 7.0 and Valkey 9.1.

mod common;
mod family;

use std::time::Duration;

use common::*;
use family::*;
use testkit::redisson;

/// A connection queued on `key` with `cmd ... BLOCK 0`, returned once the
/// server counts it among the waiters. Its reply is read later.
#[track_caller]
fn queue(s: &Server, resp3: bool, cmd: &[&str]) -> Client {
    let before = lock_stat(s, "waiting");
    let mut w = if resp3 { s.client_resp3() } else { s.client() };
    w.send(&[cmd, &["BLOCK", "0"]].concat());
    wait_waiting(s, before + 1);
    w
}

/// [`queue`], the reply timed on the server's clock ([`read_timed`]).
#[track_caller]
fn queue_timed(s: &Server, cmd: &[&str]) -> Client {
    let before = lock_stat(s, "waiting");
    let mut w = s.client();
    send_timed(&mut w, &[cmd, &["BLOCK", "0"]].concat());
    wait_waiting(s, before + 1);
    w
}

/// The lease score of `id` (32 hex chars) at `key`.
#[track_caller]
fn score_of(c: &mut Client, key: &str, id: &str) -> f64 {
    let raw = unhex(id.as_bytes());
    leases(c, key)
        .into_iter()
        .find(|(m, _)| *m == raw)
        .unwrap_or_else(|| panic!("{id} not leased at {key}"))
        .1
}

/// ACQUIRE and LEASE waiters share the key's queue, strictly head-of-line:
/// a head asking for 3 is not overtaken by a later waiter asking for 1, and
/// a newcomer never jumps the queue. LOCK.WAITERS shows `lease <n>` and
/// `acquire <n>`. Handing on publishes only what is left.
fn head_of_line(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut sub = s.client();
    subscribe(&mut sub, b"redisson_sc:{s}");
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "0"]), Reply::Int(1));
    let mut w1 = queue(
        &s,
        false,
        &["SEMAPHORE.LEASE", "s", "COUNT", "3", "PX", "60000"],
    );
    let mut w2 = queue(&s, true, &["SEMAPHORE.ACQUIRE", "s"]);
    let mut w3 = queue(&s, false, &["SEMAPHORE.ACQUIRE", "s", "COUNT", "2"]);
    let list = c.cmd(&["LOCK.WAITERS", "s"]);
    let rows = list.as_array();
    assert_eq!(rows.len(), 3, "{kind}: {list:?}");
    for (row, wants) in rows.iter().zip(["lease 3", "acquire 1", "acquire 2"]) {
        let f = row.as_array();
        assert_eq!(f.len(), 5, "{kind}: {row:?}");
        assert!(f[0].as_int() > 0);
        assert!(f[1].is_nil(), "{kind}: no owner: {row:?}");
        assert_eq!(f[2], bulk(wants), "{kind}");
        assert!(f[3].as_int() >= 0);
        assert_eq!(f[4], Reply::Int(-1), "{kind}: BLOCK 0");
    }
    assert_eq!(sem_field(&mut c, "s", "waiters"), 3);
    // 2 free: the head wants 3; nobody behind it is served.
    assert_eq!(
        c.cmd(&["SEMAPHORE.RELEASE", "s", "COUNT", "2"]),
        Reply::Int(2)
    );
    assert!(
        w2.try_read_reply(Duration::from_millis(100)).is_none(),
        "{kind}"
    );
    assert_eq!(message(&mut sub, b"redisson_sc:{s}", SECOND), b"2");
    // A newcomer does not jump the queue, though permits are free.
    assert!(c.cmd(&["SEMAPHORE.ACQUIRE", "s"]).is_nil(), "{kind}");
    assert!(c.cmd(&["SEMAPHORE.LEASE", "s"]).is_nil(), "{kind}");
    // One more: the head gets its 3; the next wants 1 and none is left.
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(0));
    let got = ids(&w1.read_reply());
    assert_eq!(got.len(), 3, "{kind}");
    assert_eq!(leases(&mut c, "s").len(), 3);
    assert!(w2.try_read_reply(Duration::from_millis(50)).is_none());
    silent(
        &mut sub,
        50,
        "nothing is left after the hand-off: nothing published",
    );
    // Three back (RETURN): w2 gets 1, w3 gets 2, nothing left to publish.
    let r = c.cmd(&["SEMAPHORE.RETURN", "s", &got[0], &got[1], &got[2]]);
    assert_eq!(r, Reply::Int(3), "{kind}");
    assert_eq!(w2.read_reply(), Reply::Int(1), "{kind}");
    assert_eq!(w3.read_reply(), Reply::Int(2), "{kind}");
    assert_eq!(c.cmd(&["GET", "s"]), bulk("0"));
    silent(&mut sub, 50, "all handed on");
    assert_eq!(c.cmd(&["LOCK.WAITERS", "s"]), Reply::Array(vec![]));
    assert_eq!(lock_stat(&s, "granted_after_wait"), 3);
    // BLOCK times out: nil (RESP2 null bulk, RESP3 null), nothing taken.
    let mut t2 = s.client();
    let mut t3 = s.client_resp3();
    assert_eq!(
        t2.cmd(&["SEMAPHORE.ACQUIRE", "s", "BLOCK", "30"]),
        Reply::Nil
    );
    assert_eq!(
        t3.cmd(&["SEMAPHORE.LEASE", "s", "BLOCK", "30"]),
        Reply::Null
    );
    assert_eq!(lock_stat(&s, "waiting"), 0);
}

/// A permit leased with a deadline goes back to the pool AT its deadline,
/// by the server (no client call): a waiter queued behind it is served
/// then, on the server's clock never before the deadline and at most 50 ms
/// after; `semaphore.expired` comes before `semaphore.acquired`.
fn lease_deadline_serves_the_waiter(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut e = Events::listen(&s);
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "1"]), Reply::Int(1));
    for lease in [100, 250] {
        let held = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", &lease.to_string()]));
        let deadline = score_of(&mut c, "s", &held[0]) as i64;
        e.since(&mut c);
        let mut w = queue_timed(&s, &["SEMAPHORE.LEASE", "s", "PX", "10000"]);
        let got = read_timed(&mut w);
        let id = ids(&got.reply);
        // Its own deadline tells when it was granted, on the server clock.
        let granted = score_of(&mut c, "s", &id[0]) as i64 - 10_000;
        let late = granted - deadline;
        assert!(
            (0..=50).contains(&late),
            "{kind}: lease {lease}: served {late} ms after the deadline"
        );
        assert!(got.answered_us / 1000 >= deadline, "{kind}");
        assert_eq!(
            e.since(&mut c)
                .into_iter()
                .filter(|(ev, _)| ev.starts_with("semaphore."))
                .collect::<Vec<_>>(),
            ev(&[("semaphore.expired", "s"), ("semaphore.acquired", "s")]),
            "{kind}"
        );
        assert_eq!(c.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]), Reply::Int(1));
    }
    assert_eq!(lock_stat(&s, "semaphore_expired"), 2);
}

/// With nobody waiting the lapsed permit comes back all the same, at its
/// deadline: never before it (GET still shows it taken), and published.
fn lease_returns_at_its_deadline_without_waiters(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut sub = s.client();
    subscribe(&mut sub, b"redisson_sc:{s}");
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "2"]), Reply::Int(1));
    assert_eq!(message(&mut sub, b"redisson_sc:{s}", SECOND), b"2");
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "COUNT", "2", "PX", "300"]));
    let deadline = score_of(&mut c, "s", &id[0]) as i64;
    assert_eq!(lock_stat(&s, "semaphore_sweeps"), 1);
    // Just before the deadline: still taken (never early).
    let wait = deadline - server_ms(&mut c) - 30;
    if wait > 0 {
        std::thread::sleep(Duration::from_millis(wait as u64));
    }
    if server_ms(&mut c) < deadline - 5 {
        assert_eq!(
            c.cmd(&["GET", "s"]),
            bulk("0"),
            "{kind}: not before the deadline"
        );
    }
    assert_eq!(message(&mut sub, b"redisson_sc:{s}", SECOND), b"2");
    let heard = now_ms();
    assert!(
        heard - deadline <= 100,
        "{kind}: heard {} ms after the deadline",
        heard - deadline
    );
    assert_eq!(c.cmd(&["GET", "s"]), bulk("2"));
    assert_eq!(c.cmd(&["EXISTS", "{s}:timeout"]), Reply::Int(0));
    assert_eq!(
        lock_stat(&s, "semaphore_sweeps"),
        0,
        "{kind}: nothing left to sweep"
    );
}

/// The case: a PROCESS that leased permits with KEEPALIVE is
/// SIGKILLed while a waiter waits for them: the permits are back and the
/// waiter served within 50 ms of the kill, on the server's clock, with
/// `semaphore.closed` (once) before `semaphore.acquired`.
fn sigkilled_keepalive_holder_hands_on(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "2"]), Reply::Int(1));
    let mut holder = CliHolder::start(s.port);
    let held = holder.cmd("SEMAPHORE.LEASE s COUNT 2 KEEPALIVE", 2);
    assert_eq!(held.len(), 2);
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 2, "{kind}");
    let mut e = Events::listen(&s);
    let mut w = queue_timed(&s, &["SEMAPHORE.LEASE", "s", "COUNT", "2", "PX", "10000"]);
    let killed_at = server_ms(&mut c);
    holder.kill9();
    let got = read_timed(&mut w);
    let id = ids(&got.reply);
    assert_eq!(id.len(), 2, "{kind}");
    let granted = score_of(&mut c, "s", &id[0]) as i64 - 10_000;
    eprintln!(
        "{kind}: SIGKILL -> waiter served in {} ms",
        granted - killed_at
    );
    assert!(
        granted - killed_at <= 50,
        "{kind}: served {} ms after the kill",
        granted - killed_at
    );
    for old in &held {
        assert!(
            !leases(&mut c, "s")
                .iter()
                .any(|(m, _)| *m == unhex(old.as_bytes())),
            "{kind}: the killed holder's ids are gone"
        );
    }
    assert_eq!(
        e.since(&mut c)
            .into_iter()
            .filter(|(ev, _)| ev.starts_with("semaphore."))
            .collect::<Vec<_>>(),
        ev(&[("semaphore.closed", "s"), ("semaphore.acquired", "s")]),
        "{kind}"
    );
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 0);
    assert_eq!(lock_stat(&s, "semaphore_keepalive_returned"), 2);
    assert_eq!(lock_stat(&s, "tied"), 0);
}

/// KEEPALIVE permits are renewed by the server every third of their lease
/// while the connection lives; RENEW ... KEEPALIVE from another connection
/// moves the tie; RENEW without KEEPALIVE unties (the lease runs out);
/// QUIT returns what is still tied.
fn keepalive_renews_moves_and_unties(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "3"]);
    let mut a = s.client();
    let id = ids(&a.cmd(&[
        "SEMAPHORE.LEASE",
        "s",
        "COUNT",
        "3",
        "KEEPALIVE",
        "PX",
        "300",
    ]));
    let first = score_of(&mut c, "s", &id[0]);
    std::thread::sleep(Duration::from_millis(700));
    let now = server_ms(&mut c) as f64;
    for i in &id {
        let score = score_of(&mut c, "s", i);
        assert!(
            score > first && score - now >= 100.0,
            "{kind}: renewed: {score} at {now}"
        );
    }
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 3);
    assert!(lock_stat(&s, "keepalive_renewed") >= 3);
    // id[0] moves to b; id[1] is untied by its own RENEW.
    let mut b = s.client();
    assert_eq!(
        b.cmd(&["SEMAPHORE.RENEW", "s", &id[0], "PX", "300", "KEEPALIVE"]),
        Reply::Int(1)
    );
    assert_eq!(
        a.cmd(&["SEMAPHORE.RENEW", "s", &id[1], "PX", "200"]),
        Reply::Int(1)
    );
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 2);
    // a quits: id[2] goes back at once; id[0] stays (b's), id[1] runs out.
    assert_eq!(a.cmd(&["QUIT"]), Reply::Status("OK".into()));
    let ok = wait_until(SECOND, || sem_field(&mut c, "s", "available") >= 1);
    assert!(ok, "{kind}: a's tied permit went back");
    // (Swept, not only lapsed: INFO counts a lapsed id as available
    // before the sweep has removed it.)
    let ok = wait_until(2 * SECOND, || leases(&mut c, "s").len() == 1);
    assert!(ok, "{kind}: the untied one ran out");
    assert_eq!(leases(&mut c, "s")[0].0, unhex(id[0].as_bytes()), "{kind}");
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 1);
    drop(b);
    let ok = wait_until(SECOND, || count(&mut c, "s") == 3);
    assert!(ok, "{kind}: b's tied permit went back");
    assert_eq!(lock_stat(&s, "tied"), 0);
    // A waiter with KEEPALIVE is tied from its grant on (its own
    // connection), and its permits go when it closes.
    c.cmd(&["SEMAPHORE.DRAIN", "s"]);
    let mut w = queue(
        &s,
        true,
        &[
            "SEMAPHORE.LEASE",
            "s",
            "COUNT",
            "2",
            "KEEPALIVE",
            "PX",
            "300",
        ],
    );
    assert_eq!(
        c.cmd(&["SEMAPHORE.RELEASE", "s", "COUNT", "2"]),
        Reply::Int(0)
    );
    assert_eq!(ids(&w.read_reply()).len(), 2, "{kind}");
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 2, "{kind}");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        sem_field(&mut c, "s", "leased"),
        2,
        "{kind}: renewed past its lease"
    );
    drop(w);
    let ok = wait_until(SECOND, || count(&mut c, "s") == 2);
    assert!(ok, "{kind}: the waiter's tied permits went back");
    // A RENEW ... KEEPALIVE of a permit leased without it ties it.
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s"]));
    let mut t = s.client();
    assert_eq!(
        t.cmd(&["SEMAPHORE.RENEW", "s", &id[0], "KEEPALIVE"]),
        Reply::Int(1)
    );
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 1, "{kind}");
    drop(t);
    let ok = wait_until(SECOND, || count(&mut c, "s") == 2);
    assert!(ok, "{kind}: tied by RENEW, returned on close");
}

/// SWAPDB moves a semaphore with its leases: they still go back at their
/// deadline in the database they moved to.
fn swapdb_moves_the_sweep(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "1"]);
    ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "200"]));
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), Reply::Status("OK".into()));
    c.cmd(&["SELECT", "1"]);
    assert_eq!(c.cmd(&["GET", "s"]), bulk("0"));
    let ok = wait_until(SECOND, || count(&mut c, "s") == 1);
    assert!(ok, "{kind}: swept in the database it moved to");
    assert_eq!(c.cmd(&["EXISTS", "{s}:timeout"]), Reply::Int(0));
}

/// The queue is served whenever the semaphore changes, whoever changed
/// it: Redisson's release and addPermits scripts, SET, INCRBY, a key
/// restored, SWAPDB; on the server's clock within 200 ms of the change.
fn foreign_changes_serve_the_queue(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let ch = redisson::semaphore_channel(b"s");
    let actions: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "Redisson release",
            args![
                "EVAL",
                redisson::SEMAPHORE_RELEASE,
                "2",
                "s",
                ch.clone(),
                "1",
                "PUBLISH"
            ]
            .to_vec(),
        ),
        (
            "Redisson addPermits",
            args![
                "EVAL",
                redisson::SEMAPHORE_ADD_PERMITS,
                "2",
                "s",
                ch.clone(),
                "1",
                "PUBLISH"
            ]
            .to_vec(),
        ),
        ("SET", args!["SET", "s", "1"].to_vec()),
        ("INCRBY", args!["INCRBY", "s", "1"].to_vec()),
        ("SWAPDB", args!["SWAPDB", "0", "1"].to_vec()),
    ];
    for (name, action) in &actions {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["SEMAPHORE.CREATE", "s", "0"]);
        if *name == "SWAPDB" {
            c.cmd(&["SELECT", "1"]);
            c.cmd(&["SET", "s", "1"]);
            c.cmd(&["SELECT", "0"]);
        }
        let mut w = queue_timed(&s, &["SEMAPHORE.ACQUIRE", "s"]);
        send_timed(&mut c, action);
        let acted = read_timed(&mut c);
        assert!(!acted.reply.is_error(), "{kind}: {name}: {:?}", acted.reply);
        let got = read_timed(&mut w);
        assert_eq!(got.reply, Reply::Int(1), "{kind}: {name}");
        let late = (got.answered_us - acted.sent_us) / 1000;
        assert!(late < 200, "{kind}: {name} took {late} ms");
        assert_eq!(c.cmd(&["GET", "s"]), bulk("0"), "{kind}: {name}");
    }
}

/// A waiter that leaves (timeout, disconnect, CLIENT KILL) is never granted,
/// and the next one, held back by it, is served.
fn leavers_let_the_next_through(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "1"]);
    // The head wants 2 and times out: the next wants 1 and gets it.
    let mut head = s.client();
    head.send(&["SEMAPHORE.ACQUIRE", "s", "COUNT", "2", "BLOCK", "150"]);
    wait_waiting(&s, 1);
    let mut next = queue(&s, false, &["SEMAPHORE.ACQUIRE", "s"]);
    assert!(head.read_reply().is_nil(), "{kind}");
    assert_eq!(next.read_reply(), Reply::Int(1), "{kind}");
    // The head disconnects; then one is killed: the last is served.
    let gone = queue(&s, false, &["SEMAPHORE.ACQUIRE", "s", "COUNT", "2"]);
    let mut killed = s.client();
    let killed_id = killed.id();
    killed.send(&["SEMAPHORE.LEASE", "s", "COUNT", "2", "BLOCK", "0"]);
    wait_waiting(&s, 2);
    let mut last = queue(&s, true, &["SEMAPHORE.LEASE", "s"]);
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(1));
    drop(gone);
    assert_eq!(
        c.cmd(&args!["CLIENT", "KILL", "ID", killed_id]),
        Reply::Int(1)
    );
    assert_eq!(ids(&last.read_reply()).len(), 1, "{kind}");
    assert_eq!(c.cmd(&["GET", "s"]), bulk("0"));
    assert_eq!(lock_stat(&s, "waiting"), 0);
    assert_eq!(
        lock_stat(&s, "disconnected"),
        2,
        "{kind}: {}",
        s.info("lock")
    );
}

/// SIGSTOPs a server; SIGCONT when dropped (also when a test fails).
struct Frozen(u32);

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

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid}");
}

#[track_caller]
fn assert_noreplicas(r: &Reply, what: &str) {
    let Reply::Error(text) = r else {
        panic!("{what}: expected NOREPLICAS, got {r:?}");
    };
    assert!(
        text.starts_with("NOREPLICAS ") && text.contains("undone"),
        "{what}: {text}"
    );
}

/// REPLICAS n ms: the reply waits for the replica's acknowledgement (it
/// holds the writes when the reply comes); not acknowledged in time, the
/// call is undone before NOREPLICAS: an ACQUIRE's permits released, a
/// LEASE's ids returned, a RENEW's previous deadline back; a waiter's grant
/// too.
fn replicas_acknowledge_or_undo(kind: Kind) {
    let p = Server::start(kind);
    let r = Server::start(kind);
    r.replica_of(&p);
    let mut c = p.client();
    c.cmd(&["SET", "ready", "1"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    c.cmd(&["SEMAPHORE.CREATE", "s", "3"]);
    // Acknowledged: the replica has it when the reply comes.
    let frozen = Frozen::new(&r);
    c.send(&[
        "SEMAPHORE.LEASE",
        "s",
        "PX",
        "60000",
        "REPLICAS",
        "1",
        "5000",
    ]);
    assert!(
        c.try_read_reply(Duration::from_millis(150)).is_none(),
        "{kind}"
    );
    drop(frozen);
    let id = ids(&c.read_reply());
    assert_eq!(leases(&mut r.client(), "s"), leases(&mut c, "s"), "{kind}");
    assert_eq!(count(&mut r.client(), "s"), 2);
    // Not acknowledged in time: undone.
    let renewed_from = score_of(&mut c, "s", &id[0]);
    let frozen = Frozen::new(&r);
    let before = [key_state(&mut c, b"s"), key_state(&mut c, b"{s}:timeout")];
    let a = c.cmd(&[
        "SEMAPHORE.ACQUIRE",
        "s",
        "COUNT",
        "2",
        "REPLICAS",
        "1",
        "100",
    ]);
    assert_noreplicas(&a, "ACQUIRE");
    assert_eq!(count(&mut c, "s"), 2, "{kind}: ACQUIRE undone");
    let l = c.cmd(&[
        "SEMAPHORE.LEASE",
        "s",
        "COUNT",
        "2",
        "KEEPALIVE",
        "REPLICAS",
        "1",
        "100",
    ]);
    assert_noreplicas(&l, "LEASE");
    assert_eq!(count(&mut c, "s"), 2, "{kind}: LEASE undone");
    assert_eq!(leases(&mut c, "s").len(), 1, "{kind}: its ids returned");
    let n = c.cmd(&[
        "SEMAPHORE.RENEW",
        "s",
        &id[0],
        "PX",
        "90000",
        "REPLICAS",
        "1",
        "100",
    ]);
    assert_noreplicas(&n, "RENEW");
    assert_eq!(
        score_of(&mut c, "s", &id[0]),
        renewed_from,
        "{kind}: RENEW undone"
    );
    let after = [key_state(&mut c, b"s"), key_state(&mut c, b"{s}:timeout")];
    assert_eq!(after[1], before[1], "{kind}: the lease set as it was");
    assert_eq!(count(&mut c, "s"), 2);
    assert_eq!(
        sem_field(&mut c, "s", "keepalive"),
        0,
        "{kind}: no tie from an undone call"
    );
    // A waiter with REPLICAS: granted, not acknowledged, undone; the
    // permits go to the next waiter.
    c.cmd(&["SEMAPHORE.DRAIN", "s"]);
    let mut w1 = queue(
        &p,
        false,
        &["SEMAPHORE.ACQUIRE", "s", "REPLICAS", "1", "100"],
    );
    let mut w2 = queue(&p, false, &["SEMAPHORE.ACQUIRE", "s"]);
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(0));
    assert_noreplicas(&w1.read_reply(), "a waiter's grant");
    assert_eq!(
        w2.read_reply(),
        Reply::Int(1),
        "{kind}: handed on after the undo"
    );
    drop(frozen);
    // Re-checked when sent: ids that lapsed before the replica acknowledged
    // them are not a success (NOREPLICAS), and no tie is made.
    c.cmd(&["SEMAPHORE.RELEASE", "s", "COUNT", "2"]);
    let frozen = Frozen::new(&r);
    c.send(&[
        "SEMAPHORE.LEASE",
        "s",
        "COUNT",
        "2",
        "PX",
        "150",
        "KEEPALIVE",
        "REPLICAS",
        "1",
        "5000",
    ]);
    assert!(
        c.try_read_reply(Duration::from_millis(400)).is_none(),
        "{kind}"
    );
    drop(frozen);
    let lost = c.read_reply();
    let Reply::Error(text) = &lost else {
        panic!("{kind}: a lapsed grant answered {lost:?}");
    };
    assert!(
        text.starts_with("NOREPLICAS ") && text.contains("lost"),
        "{kind}: {text}"
    );
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 0, "{kind}");
    assert_eq!(count(&mut c, "s"), 2, "{kind}: swept back at the deadline");
    assert!(lock_stat(&p, "stale_grants") >= 1);
    assert!(lock_stat(&p, "noreplicas") >= 4);
    assert_eq!(
        lock_stat(&p, "semaphore_taken_back"),
        3,
        "{kind}: {}",
        p.info("lock")
    );
}

/// RPermitExpirableSemaphore clients on the same semaphore: ids leased by
/// either side are returned by the other (16 raw bytes in the set, hex to
/// clients); a Redisson lease (client clock) lapses and the server returns
/// it at its deadline, serving a native waiter; RSemaphore's tryAcquire
/// and release work on the same count, and its release wakes the queue.
fn redisson_clients_share_the_semaphore(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let ch = redisson::semaphore_channel(b"s");
    let ts = redisson::timeout_key(b"s");
    assert_eq!(
        c.cmd(&args![
            "EVAL",
            redisson::SEMAPHORE_TRY_SET_PERMITS,
            "2",
            "s",
            ch,
            "3",
            "PUBLISH"
        ]),
        Reply::Int(1)
    );
    // Redisson leases two ids (no lease), the module returns them by hex.
    let r1 = [0x11u8; 16];
    let r2 = [0xabu8; 16];
    let now = server_ms(&mut c).to_string();
    let ok = c.cmd(&args![
        "EVAL",
        redisson::EXPIRABLE_ACQUIRE,
        "3",
        "s",
        ts,
        ch,
        "2",
        redisson::NO_LEASE,
        now,
        redisson::NO_LEASE,
        "PUBLISH",
        r1,
        r2
    ]);
    assert_eq!(ok, bulk("OK"), "{kind}");
    assert_eq!(sem_field(&mut c, "s", "leased"), 2);
    assert_eq!(
        c.cmd(&["SEMAPHORE.RETURN", "s", &hex(&r1), &hex(&r2).to_uppercase()]),
        Reply::Int(2),
        "{kind}"
    );
    // The module leases; Redisson releases it by its raw bytes.
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "60000"]));
    let now = server_ms(&mut c).to_string();
    assert_eq!(
        c.cmd(&args![
            "EVAL",
            redisson::EXPIRABLE_TRY_RELEASE,
            "3",
            "s",
            ch,
            ts,
            unhex(id[0].as_bytes()),
            "1",
            now,
            "PUBLISH"
        ]),
        Reply::Int(1),
        "{kind}"
    );
    assert_eq!(c.cmd(&["GET", "s"]), bulk("3"));
    // RSemaphore tryAcquire takes them all; a native waiter queues.
    assert_eq!(
        c.cmd(&args![
            "EVAL",
            redisson::SEMAPHORE_TRY_ACQUIRE,
            "1",
            "s",
            "3"
        ]),
        Reply::Int(1)
    );
    let mut w = queue_timed(&s, &["SEMAPHORE.LEASE", "s", "PX", "10000"]);
    // A Redisson lease of a permit released at once, lapsing in 150 ms
    // (Redisson's score is its own clock's: here the same machine's).
    assert_eq!(
        c.cmd(&args![
            "EVAL",
            redisson::SEMAPHORE_RELEASE,
            "2",
            "s",
            ch,
            "1",
            "PUBLISH"
        ]),
        Reply::Nil
    );
    let got = read_timed(&mut w);
    assert_eq!(
        ids(&got.reply).len(),
        1,
        "{kind}: Redisson's release woke the queue"
    );
    // Redisson leases with a deadline; nobody calls; a waiter is served at it.
    c.cmd(&args![
        "EVAL",
        redisson::SEMAPHORE_RELEASE,
        "2",
        "s",
        ch,
        "1",
        "PUBLISH"
    ]);
    let now = server_ms(&mut c);
    let deadline = now + 150;
    let ok = c.cmd(&args![
        "EVAL",
        redisson::EXPIRABLE_ACQUIRE,
        "3",
        "s",
        ts,
        ch,
        "1",
        deadline,
        now,
        redisson::NO_LEASE,
        "PUBLISH",
        r1
    ]);
    assert_eq!(ok, bulk("OK"), "{kind}");
    let mut w = queue_timed(&s, &["SEMAPHORE.LEASE", "s", "PX", "10000"]);
    let got = read_timed(&mut w);
    let mine = ids(&got.reply);
    let granted = score_of(&mut c, "s", &mine[0]) as i64 - 10_000;
    assert!(
        (0..=50).contains(&(granted - deadline)),
        "{kind}: a Redisson lease swept {} ms after its deadline",
        granted - deadline
    );
    // And without any waiter: back at its deadline.
    c.cmd(&args![
        "EVAL",
        redisson::SEMAPHORE_RELEASE,
        "2",
        "s",
        ch,
        "1",
        "PUBLISH"
    ]);
    let now = server_ms(&mut c);
    c.cmd(&args![
        "EVAL",
        redisson::EXPIRABLE_ACQUIRE,
        "3",
        "s",
        ts,
        ch,
        "1",
        now + 100,
        now,
        redisson::NO_LEASE,
        "PUBLISH",
        r2
    ]);
    assert_eq!(c.cmd(&["GET", "s"]), bulk("0"));
    let ok = wait_until(SECOND, || count(&mut c, "s") == 1);
    assert!(ok, "{kind}: the server swept Redisson's lease");
}

/// Leases the server never saw written come back at their deadline too:
/// a Redisson lease written before any SEMAPHORE.* command (found when the
/// first one runs), and the leases a replica inherits when it is promoted.
fn leases_written_before_are_found(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SET", "s", "1"]);
    let now = server_ms(&mut c);
    let ok = c.cmd(&args![
        "EVAL",
        redisson::EXPIRABLE_ACQUIRE,
        "3",
        "s",
        redisson::timeout_key(b"s"),
        redisson::semaphore_channel(b"s"),
        "1",
        now + 300,
        now,
        redisson::NO_LEASE,
        "PUBLISH",
        [7u8; 16]
    ]);
    assert_eq!(ok, bulk("OK"), "{kind}");
    // The first SEMAPHORE.* command, on another key.
    assert!(c.cmd(&["SEMAPHORE.INFO", "other"]).is_nil());
    if server_ms(&mut c) < now + 280 {
        assert_eq!(count(&mut c, "s"), 0, "{kind}: not before the deadline");
    }
    let ok = wait_until(2 * SECOND, || count(&mut c, "s") == 1);
    assert!(ok, "{kind}: found and swept at its deadline");
    assert!(server_ms(&mut c) >= now + 300);

    // A promoted replica sweeps the leases it inherited.
    let replica = Server::start(kind);
    replica.replica_of(&s);
    let mut r = replica.client();
    assert!(r.cmd(&["SEMAPHORE.INFO", "other"]).is_nil());
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "1500"]));
    let deadline = score_of(&mut c, "s", &id[0]) as i64;
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    drop(c);
    drop(s);
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Reply::Status("OK".into())
    );
    if server_ms(&mut r) < deadline - 20 {
        assert_eq!(count(&mut r, "s"), 0, "{kind}: not before the deadline");
    }
    let ok = wait_until(4 * SECOND, || count(&mut r, "s") == 1);
    assert!(ok, "{kind}: the promoted replica swept the inherited lease");
    assert!(server_ms(&mut r) >= deadline, "{kind}");
}

per_kind!(
    leases_written_before_are_found,
    head_of_line,
    lease_deadline_serves_the_waiter,
    lease_returns_at_its_deadline_without_waiters,
    sigkilled_keepalive_holder_hands_on,
    keepalive_renews_moves_and_unties,
    swapdb_moves_the_sweep,
    foreign_changes_serve_the_queue,
    leavers_let_the_next_through,
    replicas_acknowledge_or_undo,
    redisson_clients_share_the_semaphore,
);
