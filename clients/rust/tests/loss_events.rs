//! The event-driven loss signal, against real Redis 7.0 and Valkey 9.1: a
//! FORCERELEASE or an expiry reaches `is_lost()` / `lost()` as it happens
//! (the key's lifecycle keyspace event pokes the hold's check), for a Lock
//! (sync and tokio) and a ReadWriteLock of the family; the library's
//! subscriber connection killed is made again and the signal still works;
//! with `notify-keyspace-events` off, locks work and the periodic check
//! (every third of the lease) still finds a loss.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hashlock_client::sync;
use hashlock_client::tokio as tk;

/// "As it happens", with room for a loaded machine: the periodic check alone
/// would take ~10 s with the 30 s lease used here.
const PROMPT: Duration = Duration::from_millis(500);
const LEASE: Duration = Duration::from_secs(30);

fn events_on(a: &mut redis::Connection, flags: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg(flags)
        .query(a)
        .unwrap();
}

fn subscribers(a: &mut redis::Connection, k: &str) -> i64 {
    let v: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("__keyspace@0__:{k}"))
        .query(a)
        .unwrap();
    match &v[1] {
        redis::Value::Int(n) => *n,
        other => panic!("{other:?}"),
    }
}

fn force(a: &mut redis::Connection, cmd: &str, k: &str) {
    let n: i64 = redis::cmd(cmd).arg(k).query(a).unwrap();
    assert_eq!(n, 1, "{cmd} {k}");
}

async fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[test]
fn module_feature_forced_release_seen_at_once() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        events_on(&mut a, "Kd");
        for keepalive in [true, false] {
            let k = key("forced");
            let lock = sync::Lock::new(client(&s), &k, opts(keepalive).lease(LEASE));
            let g = lock.acquire().unwrap();
            assert!(
                wait_until(WAIT, || subscribers(&mut a, &k) >= 1),
                "{kind}: not subscribed"
            );
            let started = Instant::now();
            force(&mut a, "LOCK.FORCERELEASE", &k);
            assert!(wait_until(WAIT, || lock.is_lost()), "{kind}: not seen");
            let took = started.elapsed();
            eprintln!("{kind} keepalive={keepalive}: FORCERELEASE seen in {took:?}");
            assert!(took < PROMPT, "{kind}: FORCERELEASE seen after {took:?}");
            assert!(matches!(g.release(), Err(Error::LockLost(_))));
            assert!(
                wait_until(WAIT, || subscribers(&mut a, &k) == 0),
                "{kind}: unsubscribed once not held"
            );
        }
        // An expiry: a watchdog lock's lease cut to 200 ms behind its back.
        let k = key("expiry");
        let lock = sync::Lock::new(client(&s), &k, opts(false).lease(LEASE));
        let _g = lock.acquire().unwrap();
        assert!(wait_until(WAIT, || subscribers(&mut a, &k) >= 1));
        let cut = Instant::now();
        let n: i64 = redis::cmd("LOCK.RENEW")
            .arg(&k)
            .arg(lock.owner())
            .arg("PX")
            .arg(200)
            .query(&mut a)
            .unwrap();
        assert_eq!(n, 1);
        assert!(wait_until(WAIT, || lock.is_lost()), "{kind}: expiry");
        let took = cut.elapsed();
        eprintln!("{kind}: expiry (200 ms lease) seen after {took:?}");
        assert!(took >= Duration::from_millis(200), "{kind}: {took:?}");
        assert!(
            took < Duration::from_millis(200) + PROMPT,
            "{kind}: {took:?}"
        );
        // The family's holds: a ReadWriteLock's writer.
        for keepalive in [true, false] {
            let k = key("rwforced");
            let rw = sync::ReadWriteLock::new(client(&s), &k, opts(keepalive).lease(LEASE));
            let _w = rw.write().unwrap();
            assert!(wait_until(WAIT, || subscribers(&mut a, &k) >= 1));
            let started = Instant::now();
            force(&mut a, "RWLOCK.FORCERELEASE", &k);
            assert!(wait_until(WAIT, || rw.is_lost()), "{kind}: rw not seen");
            let took = started.elapsed();
            eprintln!("{kind} keepalive={keepalive}: RWLOCK.FORCERELEASE seen in {took:?}");
            assert!(
                took < PROMPT,
                "{kind}: RWLOCK.FORCERELEASE seen after {took:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_feature_tokio_forced_release_seen_at_once() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        events_on(&mut a, "Kd");
        for keepalive in [true, false] {
            let k = key("tforced");
            let lock = tk::Lock::new(client(&s), &k, opts(keepalive).lease(LEASE));
            let _g = lock.acquire().await.unwrap();
            assert!(wait_for(WAIT, || subscribers(&mut a, &k) >= 1).await);
            let started = Instant::now();
            force(&mut a, "LOCK.FORCERELEASE", &k);
            tokio::time::timeout(WAIT, lock.lost())
                .await
                .expect("FORCERELEASE seen");
            let took = started.elapsed();
            eprintln!("{kind} keepalive={keepalive}: FORCERELEASE seen in {took:?}");
            assert!(lock.is_lost() && took < PROMPT, "{kind}: after {took:?}");
        }
        let k = key("texpiry");
        let lock = tk::Lock::new(client(&s), &k, opts(false).lease(LEASE));
        let _g = lock.acquire().await.unwrap();
        assert!(wait_for(WAIT, || subscribers(&mut a, &k) >= 1).await);
        let cut = Instant::now();
        let n: i64 = redis::cmd("LOCK.RENEW")
            .arg(&k)
            .arg(lock.owner())
            .arg("PX")
            .arg(200)
            .query(&mut a)
            .unwrap();
        assert_eq!(n, 1);
        tokio::time::timeout(WAIT, lock.lost())
            .await
            .expect("expiry seen");
        let took = cut.elapsed();
        eprintln!("{kind}: expiry (200 ms lease) seen after {took:?}");
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_millis(200) + PROMPT,
            "{kind}: {took:?}"
        );
        for keepalive in [true, false] {
            let k = key("trwforced");
            let rw = tk::ReadWriteLock::new(client(&s), &k, opts(keepalive).lease(LEASE));
            let _w = rw.write().await.unwrap();
            assert!(wait_for(WAIT, || subscribers(&mut a, &k) >= 1).await);
            let started = Instant::now();
            force(&mut a, "RWLOCK.FORCERELEASE", &k);
            assert!(wait_for(WAIT, || rw.is_lost()).await, "{kind}: rw not seen");
            let took = started.elapsed();
            eprintln!("{kind} keepalive={keepalive}: RWLOCK.FORCERELEASE seen in {took:?}");
            assert!(
                took < PROMPT,
                "{kind}: RWLOCK.FORCERELEASE seen after {took:?}"
            );
        }
    }
}

#[test]
fn module_feature_subscriber_connection_killed_is_made_again() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        events_on(&mut a, "Kd");
        let lock = sync::Lock::new(client(&s), key("resub"), opts(true).lease(LEASE));
        let _g = lock.acquire().unwrap();
        let k = lock.name().to_string();
        assert!(wait_until(WAIT, || subscribers(&mut a, &k) >= 1));
        // The library's subscriber connection (and only it) is killed.
        let n: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut a)
            .unwrap();
        assert_eq!(
            n, 1,
            "{kind}: one subscriber connection per target and node"
        );
        assert!(
            wait_until(WAIT, || subscribers(&mut a, &k) >= 1),
            "{kind}: not subscribed again"
        );
        assert!(!lock.is_lost(), "{kind}: the look again found it held");
        let started = Instant::now();
        force(&mut a, "LOCK.FORCERELEASE", &k);
        assert!(wait_until(WAIT, || lock.is_lost()), "{kind}");
        let took = started.elapsed();
        eprintln!("{kind}: FORCERELEASE after resubscribing seen in {took:?}");
        assert!(took < PROMPT, "{kind}: {took:?}");
    }
}

#[test]
fn events_off_falls_back_to_the_periodic_check() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        events_on(&mut a, "");
        // A lease of 900 ms: the periodic check every 300 ms.
        let lease = Duration::from_millis(900);
        for keepalive in [true, false] {
            let k = key("off");
            let lock = sync::Lock::new(client(&s), &k, opts(keepalive).lease(lease));
            let g = lock.acquire().unwrap();
            assert_eq!(subscribers(&mut a, &k), 0, "{kind}: nothing to hear");
            assert_eq!(g.release().unwrap(), 0, "{kind}: works without events");
            let _g = lock.acquire().unwrap();
            let started = Instant::now();
            force(&mut a, "LOCK.FORCERELEASE", &k);
            assert!(wait_until(WAIT, || lock.is_lost()), "{kind}: not seen");
            let took = started.elapsed();
            eprintln!("{kind} keepalive={keepalive}: events off, FORCERELEASE seen in {took:?}");
            assert!(took < lease, "{kind}: the periodic check: {took:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_events_off_falls_back_to_the_periodic_check() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        events_on(&mut a, "");
        let lease = Duration::from_millis(900);
        let k = key("toff");
        let lock = tk::Lock::new(client(&s), &k, opts(false).lease(lease));
        let g = lock.acquire().await.unwrap();
        assert_eq!(subscribers(&mut a, &k), 0, "{kind}: nothing to hear");
        assert_eq!(
            g.release().await.unwrap(),
            0,
            "{kind}: works without events"
        );
        let _g = lock.acquire().await.unwrap();
        let started = Instant::now();
        force(&mut a, "LOCK.FORCERELEASE", &k);
        tokio::time::timeout(WAIT, lock.lost())
            .await
            .expect("FORCERELEASE seen");
        let took = started.elapsed();
        eprintln!("{kind}: events off, FORCERELEASE seen in {took:?}");
        assert!(took < lease, "{kind}: the periodic check: {took:?}");
    }
}
