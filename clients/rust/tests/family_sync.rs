//! hashlock_client::sync's Semaphore (and Lease), Latch, ReadWriteLock and
//! MultiLock against real Redis 7.0 and Valkey 9.1.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hashlock_client::Acquired;
use hashlock_client::sync::{Latch, Lock, MultiLock, ReadWriteLock, Semaphore};

fn sem_info(a: &mut redis::Connection, k: &str) -> Option<hashlock_client::SemaphoreInfo> {
    let v: redis::Value = redis::cmd("SEMAPHORE.INFO").arg(k).query(a).unwrap();
    hashlock_client::family::parse_sem_info(&v).unwrap()
}

fn rw_info(a: &mut redis::Connection, k: &str) -> Option<hashlock_client::RwLockInfo> {
    let v: redis::Value = redis::cmd("RWLOCK.INFO").arg(k).query(a).unwrap();
    hashlock_client::family::parse_rw_info(&v).unwrap()
}

fn queued(a: &mut redis::Connection, k: &str) -> usize {
    let v: Vec<redis::Value> = redis::cmd("LOCK.WAITERS").arg(k).query(a).unwrap();
    v.len()
}

fn kill_other_clients(a: &mut redis::Connection) {
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(a)
        .unwrap();
}

#[test]
fn sync_semaphore_anonymous_permits() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("sem");
        let sem = Semaphore::new(client(&s), &k, Options::default());
        assert!(sem.create(2).unwrap());
        assert!(!sem.create(5).unwrap(), "{kind}: exists");
        assert!(sem.try_acquire(2).unwrap());
        assert!(!sem.try_acquire(1).unwrap(), "{kind}: none left");
        assert_eq!(sem.available().unwrap(), 0);
        assert!(matches!(sem.try_acquire(0), Err(Error::Redis(_))));
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| sem.acquire_timeout(2, WAIT).unwrap());
            assert!(wait_until(WAIT, || queued(&mut a, &k) == 1), "{kind}");
            assert_eq!(sem.release(1).unwrap(), 1, "{kind}: the head wants 2");
            assert_eq!(sem.release(1).unwrap(), 0, "{kind}: handed to the waiter");
            assert!(waiter.join().unwrap());
        });
        assert!(!sem.acquire_timeout(1, Duration::from_millis(50)).unwrap());
        assert_eq!(sem.add(3).unwrap(), 3);
        assert_eq!(sem.drain().unwrap(), 3);
        assert_eq!(sem_info(&mut a, &k).unwrap().available, 0);
        let _: () = redis::cmd("SET").arg(&k).arg("x").query(&mut a).unwrap();
        assert!(
            matches!(sem.try_acquire(1), Err(Error::NotSemaphore(_))),
            "{kind}"
        );
    }
}

fn lease_round_trip(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("lease");
        let sem = Semaphore::new(client(&s), &k, opts(keepalive));
        assert!(sem.create(3).unwrap());
        let lease = sem.lease(2).unwrap();
        assert_eq!(lease.ids().len(), 2);
        assert!(lease.ids().iter().all(|id| id.len() == 32));
        let i = sem_info(&mut a, &k).unwrap();
        assert_eq!((i.available, i.leased), (1, 2), "{kind}");
        assert_eq!(i.keepalive, if keepalive { 2 } else { 0 }, "{kind}");
        assert!(matches!(sem.try_lease(2).unwrap(), Acquired::NotAcquired));
        lease.renew().unwrap();
        // A waiter is handed the permits the lease gives back.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                sem.lease_timeout(3, WAIT)
                    .unwrap()
                    .into_guard()
                    .expect("handed over")
            });
            assert!(wait_until(WAIT, || queued(&mut a, &k) == 1), "{kind}");
            assert_eq!(lease.release().unwrap(), 2, "{kind}: permits returned");
            let got = waiter.join().unwrap();
            assert_eq!(got.ids().len(), 3);
            drop(got); // returns them
        });
        assert_eq!(sem_info(&mut a, &k).unwrap().available, 3, "{kind}");
        assert_eq!(sem_info(&mut a, &k).unwrap().leased, 0, "{kind}");
        // Returned by someone else: the lease is lost.
        let lease = sem.lease(1).unwrap();
        let _: i64 = redis::cmd("SEMAPHORE.RETURN")
            .arg(&k)
            .arg(&lease.ids()[0])
            .query(&mut a)
            .unwrap();
        assert!(matches!(lease.release(), Err(Error::LockLost(_))), "{kind}");
        assert_eq!(sem.available().unwrap(), 3);
    }
}

#[test]
fn sync_lease_watchdog() {
    lease_round_trip(false);
}

#[test]
fn module_feature_keepalive_sync_lease() {
    lease_round_trip(true);
}

#[test]
fn module_feature_keepalive_sync_lease_connection_killed_returns_permits() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("lease-kill");
        let sem = Semaphore::new(client(&s), &k, opts(true));
        assert!(sem.create(2).unwrap());
        let lease = sem.lease(2).unwrap();
        let started = Instant::now();
        kill_other_clients(&mut a);
        assert!(wait_until(WAIT, || lease.is_lost()), "{kind}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{kind}: at once"
        );
        assert!(lease.lost_reason().unwrap().contains("connection"));
        // The server unties at once and returns the permits a moment later.
        let back = || sem_info(&mut a, &k).unwrap().available == 2;
        assert!(wait_until(Duration::from_secs(1), back), "{kind}: returned");
        assert!(matches!(lease.release(), Err(Error::LockLost(_))));
    }
}

#[test]
fn sync_latch() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("latch");
        let latch = Latch::new(client(&s), &k);
        assert!(
            latch.wait_timeout(Duration::ZERO).unwrap(),
            "{kind}: no latch is open"
        );
        assert!(latch.create(2).unwrap());
        assert!(!latch.create(2).unwrap());
        assert_eq!(latch.count().unwrap(), 2);
        assert!(!latch.wait_timeout(Duration::from_millis(100)).unwrap());
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| latch.wait_timeout(WAIT).unwrap());
            let forever = scope.spawn(|| latch.wait().unwrap());
            assert!(wait_until(WAIT, || queued(&mut a, &k) == 2), "{kind}");
            assert_eq!(latch.count_down().unwrap(), 1);
            assert!(!waiter.is_finished());
            assert_eq!(latch.count_down().unwrap(), 0);
            assert!(waiter.join().unwrap());
            forever.join().unwrap();
        });
        assert_eq!(latch.count().unwrap(), 0);
        let _: () = redis::cmd("SET").arg(&k).arg("x").query(&mut a).unwrap();
        assert!(
            matches!(latch.count_down(), Err(Error::NotLatch(_))),
            "{kind}"
        );
    }
}

fn rwlock_modes(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("rw");
        let r1 = ReadWriteLock::new(client(&s), &k, opts(keepalive));
        let r2 = ReadWriteLock::new(client(&s), &k, opts(keepalive));
        let w = ReadWriteLock::new(client(&s), &k, opts(keepalive).token(true));
        let g1 = r1.read().unwrap();
        let g1b = r1.try_read().unwrap().into_guard().expect("re-entry");
        let g2 = r2.read().unwrap();
        let i = rw_info(&mut a, &k).unwrap();
        assert_eq!(
            (i.mode.as_str(), i.readers, i.read_holds),
            ("read", 2, 3),
            "{kind}"
        );
        assert!(matches!(w.try_write().unwrap(), Acquired::NotAcquired));
        // Upgrading would deadlock: refused, nothing changed.
        assert!(matches!(r1.try_write(), Err(Error::NoUpgrade(_))), "{kind}");
        assert_eq!(r1.read_holds(), 2);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                w.write_timeout(WAIT)
                    .unwrap()
                    .into_guard()
                    .expect("granted")
            });
            assert!(wait_until(WAIT, || queued(&mut a, &k) == 1), "{kind}");
            // A queued writer: a new reader waits behind it.
            assert!(
                matches!(r2.try_read().unwrap(), Acquired::Held(_)),
                "re-entry still enters"
            );
            drop(g2);
            assert_eq!(g1b.release().unwrap(), 1);
            assert_eq!(g1.release().unwrap(), 0);
            let wg = writer.join().unwrap();
            assert!(wg.token().is_some(), "{kind}: a token with the write");
            assert_eq!(
                rw_info(&mut a, &k).unwrap().writer.as_deref(),
                Some(w.owner())
            );
            // Downgrade: a read hold, then the write hold given back.
            let rg = wg.downgrade().unwrap();
            assert_eq!((w.read_holds(), w.write_holds()), (1, 0));
            let i = rw_info(&mut a, &k).unwrap();
            assert_eq!((i.mode.as_str(), i.read_holds), ("read", 1), "{kind}");
            assert!(
                r1.try_read().unwrap().into_guard().is_some(),
                "readers share"
            );
            assert_eq!(rg.release().unwrap(), 0);
        });
        assert_eq!(rw_info(&mut a, &k), None, "{kind}: free");
        // Lost: a FORCERELEASE is found by the watch.
        let lock = ReadWriteLock::new(
            client(&s),
            &k,
            opts(keepalive).lease(Duration::from_millis(600)),
        );
        let g = lock.write().unwrap();
        let _: i64 = redis::cmd("RWLOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        assert!(wait_until(WAIT, || lock.is_lost()), "{kind}");
        assert!(matches!(g.release(), Err(Error::LockLost(_))));
        assert!(
            lock.try_write().unwrap().into_guard().is_some(),
            "usable again"
        );
        assert!(!lock.is_lost());
    }
}

#[test]
fn sync_rwlock_watchdog() {
    rwlock_modes(false);
}

#[test]
fn module_feature_keepalive_sync_rwlock() {
    rwlock_modes(true);
}

fn multilock_all_or_nothing(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let (k1, k2, k3) = (key("m"), key("m"), key("m"));
        let other = Lock::new(client(&s), &k2, opts(keepalive));
        let held = other.acquire().unwrap();
        let m = MultiLock::new(client(&s), [&k1, &k2, &k3], opts(keepalive));
        assert!(matches!(m.try_acquire().unwrap(), Acquired::NotAcquired));
        assert_eq!(info(&mut a, &k1), None, "{kind}: no partial hold");
        assert_eq!(info(&mut a, &k3), None);
        std::thread::scope(|scope| {
            let waiter =
                scope.spawn(|| m.acquire_timeout(WAIT).unwrap().into_guard().expect("all"));
            assert!(wait_until(WAIT, || waiters(&mut a, &k2) == 1), "{kind}");
            assert_eq!(held.release().unwrap(), 0);
            let g = waiter.join().unwrap();
            for k in [&k1, &k2, &k3] {
                let i = info(&mut a, k).unwrap();
                assert_eq!((i.owner.as_str(), i.holds), (m.owner(), 1), "{kind}");
            }
            let g2 = m.try_acquire().unwrap().into_guard().expect("re-entry");
            assert_eq!(m.holds(), 2);
            assert_eq!(g2.release().unwrap(), 1);
            assert_eq!(g.release().unwrap(), 0);
        });
        for k in [&k1, &k2, &k3] {
            assert_eq!(info(&mut a, k), None, "{kind}: all released");
        }
        // Opposite orders, many rounds: no deadlock, never both at once.
        let x = MultiLock::new(client(&s), [&k1, &k3], opts(keepalive));
        let y = MultiLock::new(client(&s), [&k3, &k1], opts(keepalive));
        let inside = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for m in [&x, &y] {
                let inside = &inside;
                scope.spawn(move || {
                    for _ in 0..100 {
                        let g = m
                            .acquire_timeout(WAIT)
                            .unwrap()
                            .into_guard()
                            .expect("no deadlock");
                        assert!(!inside.swap(true, std::sync::atomic::Ordering::SeqCst));
                        inside.store(false, std::sync::atomic::Ordering::SeqCst);
                        g.release().unwrap();
                    }
                });
            }
        });
    }
}

#[test]
fn sync_multilock_watchdog() {
    multilock_all_or_nothing(false);
}

#[test]
fn module_feature_keepalive_sync_multilock() {
    multilock_all_or_nothing(true);
}
