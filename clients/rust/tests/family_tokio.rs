//! hashlock_client::tokio's Semaphore (and Lease), Latch, ReadWriteLock and
//! MultiLock against real Redis 7.0 and Valkey 9.1, with abandoned waits
//! raced against the release that would grant them.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use hashlock_client::Acquired;
use hashlock_client::tokio::{Latch, Lock, MultiLock, ReadWriteLock, Semaphore};

/// Trials per race and server (a third of each kind of race).
const TRIALS: usize = 60;

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

async fn until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f()
}

async fn until_queued(a: &mut redis::Connection, k: &str) {
    assert!(
        until(WAIT, || queued(a, k) == 1).await,
        "{k}: the waiter queued"
    );
}

/// Abandons `waiting` in the instant of `release`: before it, while it is
/// on its way, or a staggered moment (0 to 1 ms) after it (the grant, and
/// without keepalive its untie, under way).
async fn abandon_racing<T, R>(
    trial: usize,
    waiting: tokio::task::JoinHandle<T>,
    release: impl Future<Output = R> + Send + 'static,
) -> Option<T>
where
    T: Send + 'static,
    R: Send + 'static,
{
    match trial % 3 {
        0 => {
            waiting.abort();
            release.await;
        }
        1 => {
            let releasing = tokio::spawn(release);
            waiting.abort();
            releasing.await.unwrap();
        }
        _ => {
            release.await;
            let until = Instant::now() + Duration::from_micros(20 * (trial as u64 % 50));
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            waiting.abort();
        }
    }
    waiting.await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_semaphore_lease_latch() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tsem");
        let sem = Arc::new(Semaphore::new(client(&s), &k, opts(true)));
        assert!(sem.create(2).await.unwrap());
        assert!(sem.try_acquire(2).await.unwrap());
        assert!(!sem.try_acquire(1).await.unwrap());
        let s2 = Arc::clone(&sem);
        let waiter = tokio::spawn(async move { s2.acquire_timeout(1, WAIT).await.unwrap() });
        until_queued(&mut a, &k).await;
        assert_eq!(
            sem.release(2).await.unwrap(),
            1,
            "{kind}: one went to the waiter"
        );
        assert!(waiter.await.unwrap());
        assert_eq!(sem.release(1).await.unwrap(), 2);
        // Leases: tied, returned by release, and by a drop in the background.
        let lease = sem.lease(2).await.unwrap();
        assert_eq!(lease.ids().len(), 2);
        assert_eq!(sem_info(&mut a, &k).unwrap().keepalive, 2, "{kind}");
        assert!(matches!(
            sem.try_lease(1).await.unwrap(),
            Acquired::NotAcquired
        ));
        lease.renew().await.unwrap();
        assert_eq!(lease.release().await.unwrap(), 2);
        drop(sem.lease(1).await.unwrap());
        assert!(
            until(WAIT, || sem_info(&mut a, &k).unwrap().available == 2).await,
            "{kind}"
        );
        // A killed connection: lost at once, permits back.
        let lease = sem.lease(2).await.unwrap();
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut a)
            .unwrap();
        tokio::time::timeout(Duration::from_secs(2), lease.lost())
            .await
            .expect("lost at once");
        assert!(matches!(lease.release().await, Err(Error::LockLost(_))));
        // The server unties at once and returns the permits a moment later.
        let back = until(Duration::from_secs(1), || {
            sem_info(&mut a, &k).unwrap().available == 2
        });
        assert!(back.await, "{kind}: the permits came back");

        let k = key("tlatch");
        let latch = Arc::new(Latch::new(client(&s), &k));
        assert!(latch.create(2).await.unwrap());
        assert!(!latch.wait_timeout(Duration::from_millis(50)).await.unwrap());
        let l2 = Arc::clone(&latch);
        let waiter = tokio::spawn(async move { l2.wait().await });
        until_queued(&mut a, &k).await;
        assert_eq!(latch.count_down().await.unwrap(), 1);
        assert_eq!(latch.count().await.unwrap(), 1);
        assert_eq!(latch.count_down().await.unwrap(), 0);
        waiter.await.unwrap().unwrap();
        // A cancelled wait leaves the queue.
        assert!(latch.create(1).await.unwrap());
        assert!(
            tokio::time::timeout(Duration::from_millis(300), latch.wait())
                .await
                .is_err()
        );
        assert!(until(WAIT, || queued(&mut a, &k) == 0).await, "{kind}");
        let _: () = redis::cmd("SET").arg(&k).arg("x").query(&mut a).unwrap();
        assert!(
            matches!(latch.count().await, Err(Error::NotLatch(_))),
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_rwlock_and_multilock() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("trw");
        let r = ReadWriteLock::new(client(&s), &k, opts(true));
        let w = Arc::new(ReadWriteLock::new(client(&s), &k, opts(false).token(true)));
        let rg = r.read().await.unwrap();
        assert!(
            matches!(r.try_write().await, Err(Error::NoUpgrade(_))),
            "{kind}"
        );
        let w2 = Arc::clone(&w);
        let writer = tokio::spawn(async move {
            let g = w2
                .write_timeout(WAIT)
                .await
                .unwrap()
                .into_guard()
                .expect("granted");
            (g.token(), g.downgrade().await.unwrap())
        });
        until_queued(&mut a, &k).await;
        assert_eq!(rg.release().await.unwrap(), 0);
        let (token, read) = writer.await.unwrap();
        assert!(token.is_some(), "{kind}: a token");
        let i = rw_info(&mut a, &k).unwrap();
        assert_eq!(
            (i.mode.as_str(), i.read_holds, i.writer),
            ("read", 1, None),
            "{kind}"
        );
        assert_eq!((w.read_holds(), w.write_holds()), (1, 0));
        assert_eq!(read.release().await.unwrap(), 0);
        assert_eq!(rw_info(&mut a, &k), None);
        // A forced release is found by the watch.
        let r = ReadWriteLock::new(client(&s), &k, opts(true).lease(Duration::from_millis(600)));
        let g = r.write().await.unwrap();
        let _: i64 = redis::cmd("RWLOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        tokio::time::timeout(WAIT, r.lost())
            .await
            .expect("found lost");
        assert!(matches!(g.release().await, Err(Error::LockLost(_))));

        let (k1, k2) = (key("tm"), key("tm"));
        let other = Lock::new(client(&s), &k2, opts(true));
        let held = other.acquire().await.unwrap();
        let m = Arc::new(MultiLock::new(client(&s), [&k1, &k2], opts(true)));
        assert!(matches!(
            m.try_acquire().await.unwrap(),
            Acquired::NotAcquired
        ));
        assert_eq!(info(&mut a, &k1), None, "{kind}: no partial hold");
        let m2 = Arc::clone(&m);
        let waiter = tokio::spawn(async move { m2.acquire().await.unwrap() });
        assert!(until(WAIT, || waiters(&mut a, &k2) == 1).await);
        assert_eq!(held.release().await.unwrap(), 0);
        let g = waiter.await.unwrap();
        assert_eq!(info(&mut a, &k1).unwrap().owner, m.owner());
        assert_eq!(info(&mut a, &k2).unwrap().owner, m.owner());
        let g2 = m
            .try_acquire()
            .await
            .unwrap()
            .into_guard()
            .expect("re-entry");
        assert_eq!(g2.release().await.unwrap(), 1);
        drop(g);
        assert!(
            until(WAIT, || info(&mut a, &k1).is_none()
                && info(&mut a, &k2).is_none())
            .await
        );
    }
}

/// An anonymous acquire abandoned while it waits is unblocked on the
/// server (its connection stays open: permits cannot be tied to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_abandoned_anonymous_acquire_is_unblocked() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tsem-unblock");
        let sem = Semaphore::new(client(&s), &k, Options::default());
        assert!(sem.create(0).await.unwrap());
        let gave_up = tokio::time::timeout(Duration::from_millis(500), sem.acquire(1)).await;
        assert!(gave_up.is_err());
        assert!(
            until(WAIT, || queued(&mut a, &k) == 0).await,
            "{kind}: unblocked"
        );
        assert_eq!(
            sem.release(1).await.unwrap(),
            1,
            "{kind}: nobody was granted it"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(sem.available().await.unwrap(), 1);
    }
}

/// Races: a wait abandoned (its task aborted) in the instant of the release
/// that grants it. Whatever order the server sees them in, nothing is kept:
/// permits are conserved, locks end free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_abandoned_semaphore_waits_keep_nothing() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        for leased in [false, true] {
            let k = key("tsem-race");
            let sem = Arc::new(Semaphore::new(client(&s), &k, opts(leased)));
            assert!(sem.create(1).await.unwrap());
            let (mut kept, mut granted) = (0, 0);
            for trial in 0..TRIALS {
                assert!(sem.try_acquire(1).await.unwrap());
                let s2 = Arc::clone(&sem);
                let waiting = tokio::spawn(async move {
                    if leased {
                        match s2.lease_timeout(1, Duration::from_secs(30)).await {
                            Ok(Acquired::Held(l)) => l.release().await.is_ok(),
                            _ => false,
                        }
                    } else {
                        match s2.acquire_timeout(1, Duration::from_secs(30)).await {
                            Ok(true) => s2.release(1).await.is_ok(),
                            _ => false,
                        }
                    }
                });
                until_queued(&mut a, &k).await;
                let s3 = Arc::clone(&sem);
                let got =
                    abandon_racing(trial, waiting, async move { s3.release(1).await.unwrap() })
                        .await;
                granted += usize::from(got == Some(true));
                let conserved = || {
                    sem_info(&mut a, &k).is_some_and(|i| i.available == 1 && i.leased == 0)
                        && queued(&mut a, &k) == 0
                };
                if !until(Duration::from_secs(3), conserved).await {
                    kept += 1;
                    let _: () = redis::cmd("SET").arg(&k).arg(1).query(&mut a).unwrap();
                    let _: () = redis::cmd("DEL")
                        .arg(format!("{{{k}}}:timeout"))
                        .query(&mut a)
                        .unwrap();
                }
            }
            assert_eq!(
                kept, 0,
                "{kind} leased={leased}: permits lost in {kept} of {TRIALS} trials ({granted} completed)"
            );
        }
    }
}

async fn rw_and_multi_races(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let mut kept = 0;
        for trial in 0..TRIALS {
            let k = key("trw-race");
            let reader = ReadWriteLock::new(client(&s), &k, opts(keepalive));
            let writer = Arc::new(ReadWriteLock::new(client(&s), &k, opts(keepalive)));
            let hold = reader.read().await.unwrap();
            let w = Arc::clone(&writer);
            let waiting = tokio::spawn(async move {
                if let Ok(Acquired::Held(g)) = w.write_timeout(Duration::from_secs(30)).await {
                    let _ = g.release().await;
                }
            });
            until_queued(&mut a, &k).await;
            abandon_racing(trial, waiting, async move { hold.release().await.unwrap() }).await;
            if !until(Duration::from_secs(3), || rw_info(&mut a, &k).is_none()).await {
                kept += 1;
                let _: i64 = redis::cmd("RWLOCK.FORCERELEASE")
                    .arg(&k)
                    .query(&mut a)
                    .unwrap();
            }
            // The writer's object is usable at once.
            let g = writer.try_write().await.unwrap().into_guard();
            assert!(g.is_some(), "{kind}: free for the abandoned writer");
            drop(g);
        }
        assert_eq!(
            kept, 0,
            "{kind}: a write hold kept in {kept} of {TRIALS} trials"
        );

        let mut kept = 0;
        for trial in 0..TRIALS {
            let (k1, k2) = (key("tm-race"), key("tm-race"));
            let holder = Lock::new(client(&s), &k2, opts(keepalive));
            let held = holder.acquire().await.unwrap();
            let m = Arc::new(MultiLock::new(client(&s), [&k1, &k2], opts(keepalive)));
            let m2 = Arc::clone(&m);
            let waiting = tokio::spawn(async move {
                if let Ok(Acquired::Held(g)) = m2.acquire_timeout(Duration::from_secs(30)).await {
                    let _ = g.release().await;
                }
            });
            assert!(until(WAIT, || waiters(&mut a, &k2) == 1).await);
            abandon_racing(trial, waiting, async move { held.release().await.unwrap() }).await;
            let free = || info(&mut a, &k1).is_none() && info(&mut a, &k2).is_none();
            if !until(Duration::from_secs(3), free).await {
                kept += 1;
                for k in [&k1, &k2] {
                    let _: i64 = redis::cmd("LOCK.FORCERELEASE")
                        .arg(k)
                        .query(&mut a)
                        .unwrap();
                }
            }
        }
        assert_eq!(
            kept, 0,
            "{kind}: a multi-lock kept in {kept} of {TRIALS} trials"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_abandoned_rw_and_multi_waits_keep_nothing_watchdog() {
    rw_and_multi_races(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_feature_keepalive_tokio_abandoned_rw_and_multi_waits_keep_nothing() {
    rw_and_multi_races(true).await;
}

/// `release().await` dropped at once: the release still happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_cancelled_releases_still_release() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("trel");
        let rw = ReadWriteLock::new(client(&s), &k, opts(true));
        let g = rw.write().await.unwrap();
        drop(tokio::time::timeout(Duration::ZERO, g.release()).await);
        assert!(
            until(WAIT, || rw_info(&mut a, &k).is_none()).await,
            "{kind}"
        );
        let sem = Semaphore::new(client(&s), &k, opts(false));
        assert!(sem.create(1).await.unwrap());
        let l = sem.lease(1).await.unwrap();
        drop(tokio::time::timeout(Duration::ZERO, l.release()).await);
        assert!(
            until(WAIT, || sem_info(&mut a, &k).unwrap().available == 1).await,
            "{kind}"
        );
    }
}
