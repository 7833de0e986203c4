//! hashlock_client::sync::Lock against real Redis 7.0 and Valkey 9.1.
//! Tests named module_feature_* use the module's KEEPALIVE, TOKEN or
//! REPLICAS.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use hashlock_client::sync::Lock;

fn acquire_reenter_release(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("basic");
        let lock = Lock::new(
            client(&s),
            &k,
            opts(keepalive).lease(Duration::from_secs(20)),
        );
        assert_eq!(lock.owner().len(), 36, "a UUID of its own");
        let first = lock.try_acquire().unwrap().into_guard().expect("free lock");
        let second = lock.try_acquire().unwrap().into_guard().expect("re-entry");
        assert_eq!(lock.holds(), 2);
        let i = lock.info().unwrap().unwrap();
        assert_eq!((i.owner.as_str(), i.holds, i.waiters), (lock.owner(), 2, 0));
        assert!(i.ttl_ms > 0 && i.ttl_ms <= 20_000);
        let hash: Vec<(String, String)> = redis::cmd("HGETALL").arg(&k).query(&mut a).unwrap();
        assert_eq!(
            hash,
            vec![(lock.owner().to_string(), "2".to_string())],
            "Redisson's layout"
        );
        let other = Lock::new(client(&s), &k, opts(keepalive));
        assert!(other.try_acquire().unwrap().into_guard().is_none());
        assert!(
            other
                .acquire_timeout(Duration::from_millis(50))
                .unwrap()
                .into_guard()
                .is_none()
        );
        assert_eq!(second.release().unwrap(), 1);
        drop(first); // the guard's drop gives the last hold back
        assert_eq!(info(&mut a, &k), None);
        assert_eq!(lock.holds(), 0);
    }
}

#[test]
fn acquire_reenter_release_watchdog() {
    acquire_reenter_release(false);
}

#[test]
fn module_feature_keepalive_acquire_reenter_release() {
    acquire_reenter_release(true);
}

fn block_hands_off(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("handoff");
        let holder = Lock::new(client(&s), &k, opts(keepalive));
        let waiter = Lock::new(client(&s), &k, opts(keepalive));
        let held = holder.acquire().unwrap();
        std::thread::scope(|scope| {
            let t = scope.spawn(|| {
                waiter
                    .acquire_timeout(WAIT)
                    .unwrap()
                    .into_guard()
                    .map(|g| g.release().unwrap())
            });
            assert!(wait_until(WAIT, || waiters(&mut a, &k) == 1));
            assert_eq!(held.release().unwrap(), 0);
            // The waiter got it (and gave it back: 0 holds left).
            assert_eq!(t.join().unwrap(), Some(0));
        });
        assert_eq!(info(&mut a, &k), None);
    }
}

#[test]
fn block_hands_off_watchdog() {
    block_hands_off(false);
}

#[test]
fn module_feature_keepalive_block_hands_off() {
    block_hands_off(true);
}

#[test]
fn server_side_timeout_returns_none_and_leaves_the_queue() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("timeout");
        let holder = Lock::new(client(&s), &k, opts(false));
        let _held = holder.try_acquire().unwrap().into_guard().unwrap();
        let waiter = Lock::new(client(&s), &k, opts(false));
        let started = Instant::now();
        assert!(
            waiter
                .acquire_timeout(Duration::from_millis(300))
                .unwrap()
                .into_guard()
                .is_none()
        );
        assert!(started.elapsed() >= Duration::from_millis(290));
        assert_eq!(waiters(&mut a, &k), 0);
    }
}

#[test]
fn errors_are_typed() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("errors");
        let lock = Lock::new(client(&s), &k, opts(false));
        assert!(matches!(lock.renew(), Err(Error::LockLost(_))));

        let _: () = redis::cmd("SET").arg(&k).arg("x").query(&mut a).unwrap();
        assert!(matches!(lock.try_acquire(), Err(Error::WrongType(_))));
        assert!(matches!(lock.info(), Err(Error::WrongType(_))));
        let _: () = redis::cmd("DEL").arg(&k).query(&mut a).unwrap();

        let _: () = redis::cmd("HSET")
            .arg(&k)
            .arg("a")
            .arg(1)
            .arg("b")
            .arg(1)
            .query(&mut a)
            .unwrap();
        assert!(matches!(lock.try_acquire(), Err(Error::NotLock(_))));
        assert!(matches!(lock.acquire_timeout(WAIT), Err(Error::NotLock(_))));
        let _: () = redis::cmd("DEL").arg(&k).query(&mut a).unwrap();

        // Lost while held: release and re-entry are loud.
        let g = lock.try_acquire().unwrap().into_guard().unwrap();
        let forced: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        assert_eq!(forced, 1);
        let e = g.release().unwrap_err();
        assert!(
            matches!(e, Error::LockLost(ref m) if m.starts_with("NOTOWNER")),
            "{e}"
        );
        let g = lock.try_acquire().unwrap().into_guard().unwrap();
        let _: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        let other = Lock::new(client(&s), &k, opts(false));
        let og = other.try_acquire().unwrap().into_guard().unwrap();
        assert!(matches!(lock.try_acquire(), Err(Error::LockLost(_))));
        assert_eq!(og.release().unwrap(), 0);
        std::mem::forget(g); // its hold is gone already
    }
}

#[test]
fn watchdog_renews_and_notices_loss() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("watchdog");
        let lock = Lock::new(
            client(&s),
            &k,
            opts(false).lease(Duration::from_millis(300)),
        );
        let g = lock.acquire().unwrap();
        std::thread::sleep(Duration::from_millis(1200)); // four leases
        assert_eq!(
            info(&mut a, &k).map(|i| i.owner),
            Some(lock.owner().to_string())
        );
        let _: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        assert!(wait_until(WAIT, || lock.is_lost()));
        assert!(matches!(g.release(), Err(Error::LockLost(_))));
    }
}

fn redisson_interop(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("redisson");
        let redisson_owner = "1b8d0b36-6a52-4a47-9d6b-0fcb3d7b1a1e:1";
        assert_eq!(redisson_try_lock(&mut a, &k, redisson_owner), None);
        let lock = Lock::new(client(&s), &k, opts(keepalive));
        assert!(lock.try_acquire().unwrap().into_guard().is_none());
        std::thread::scope(|scope| {
            let t = scope.spawn(|| lock.acquire_timeout(WAIT).unwrap().into_guard());
            assert!(wait_until(WAIT, || waiters(&mut a, &k) == 1));
            // Redisson's unlock script serves our waiter.
            assert_eq!(redisson_unlock(&mut a, &k, redisson_owner), Some(1));
            let g = t.join().unwrap().expect("handed over");
            assert!(
                redisson_try_lock(&mut a, &k, redisson_owner).unwrap() > 0,
                "Redisson sees it held"
            );
            assert_eq!(g.release().unwrap(), 0);
        });
        assert_eq!(redisson_try_lock(&mut a, &k, redisson_owner), None);
        // Redisson's owner id re-enters Redisson's lock.
        let same = Lock::new(client(&s), &k, opts(false).owner(redisson_owner));
        let g = same.try_acquire().unwrap().into_guard().unwrap();
        assert_eq!(same.holds(), 2);
        assert_eq!(redisson_unlock(&mut a, &k, redisson_owner), Some(0));
        assert_eq!(g.release().unwrap(), 0);
    }
}

#[test]
fn redisson_interop_watchdog() {
    redisson_interop(false);
}

#[test]
fn module_feature_keepalive_redisson_interop() {
    redisson_interop(true);
}

/// The `hold` example, built next to this test binary by `cargo test`.
fn hold_example() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("examples").join("hold");
    assert!(
        p.is_file(),
        "{} missing: run through `cargo test`",
        p.display()
    );
    p
}

#[test]
fn module_feature_keepalive_killed_holder_hands_on_at_once() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("killed");
        let mut holder = Command::new(hold_example())
            .args([s.port.to_string(), k.clone(), "30000".into()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "held\n");
        let i = info(&mut a, &k).unwrap();
        assert_eq!(i.keepalive, Some(true));
        let waiter = Lock::new(client(&s), &k, opts(true));
        let took = std::thread::scope(|scope| {
            let t = scope.spawn(|| {
                waiter
                    .acquire_timeout(Duration::from_secs(25))
                    .unwrap()
                    .into_guard()
            });
            assert!(wait_until(WAIT, || waiters(&mut a, &k) == 1));
            let killed = Instant::now();
            holder.kill().unwrap(); // SIGKILL
            let g = t.join().unwrap();
            let took = killed.elapsed();
            assert!(g.is_some(), "{kind}: the waiter did not get the lock");
            took
        });
        let _ = holder.wait();
        assert!(
            took < Duration::from_secs(5),
            "{kind}: took {took:?}; the lease was 30 s"
        );
    }
}

#[test]
fn module_feature_token() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("token");
        let lock = Lock::new(client(&s), &k, opts(false).token(true));
        let g1 = lock.acquire().unwrap();
        let t1 = g1.token().expect("a token");
        assert!(t1 > 0);
        let g2 = lock.try_acquire().unwrap().into_guard().unwrap();
        let t2 = g2.token().unwrap();
        assert!(t2 > t1, "re-entry issues a new token");
        assert_eq!(info(&mut a, &k).unwrap().token, Some(t2));
        let counter: u64 = redis::cmd("GET")
            .arg(format!("redisson_lock_token:{{{k}}}"))
            .query(&mut a)
            .unwrap();
        assert_eq!(counter, t2);
        drop(g2);
        drop(g1);
        let g3 = Lock::new(client(&s), &k, opts(false).token(true))
            .acquire()
            .unwrap();
        assert!(g3.token().unwrap() > t2);
    }
}

#[test]
fn module_feature_replicas_without_replicas() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("replicas");
        let lock = Lock::new(
            client(&s),
            &k,
            opts(false).replicas(1, Duration::from_millis(200)),
        );
        assert!(matches!(lock.try_acquire(), Err(Error::NoReplicas(_))));
        assert_eq!(info(&mut a, &k), None);
    }
}

#[test]
fn info_in_resp3() {
    for kind in KINDS {
        let s = Server::start(kind);
        let k = key("resp3");
        let resp3 =
            redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", s.port)).unwrap();
        let lock = Lock::new(resp3, &k, opts(false));
        let g = lock.try_acquire().unwrap().into_guard().unwrap();
        let i = lock.info().unwrap().unwrap();
        assert_eq!((i.owner.as_str(), i.holds, i.waiters), (lock.owner(), 1, 0));
        assert_eq!(g.release().unwrap(), 0);
        assert_eq!(lock.info().unwrap(), None);
    }
}
