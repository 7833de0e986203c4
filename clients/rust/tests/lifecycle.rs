//! How a hold ends, for sync::Lock and tokio::Lock against real Redis 7.0
//! and Valkey 9.1: a lost lock is reported when it happens (`is_lost()`), in
//! every mode; connections are reused; a cancelled wait racing a release
//! never keeps the lock; a cancelled `release().await` still releases; a
//! server without the module says so. Tests named module_feature_* use the
//! module's KEEPALIVE.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hashlock_client::{Acquired, sync, tokio as tk};

/// Seen "at once": far below a check interval of the 30 s lease used there.
const AT_ONCE: Duration = Duration::from_secs(2);
const TRIALS: usize = 100;

/// On an open connection (opening one to ask would count itself).
fn connections_received(a: &mut redis::Connection) -> u64 {
    let text: String = redis::cmd("INFO").arg("stats").query(a).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .expect("total_connections_received")
        .trim()
        .parse()
        .unwrap()
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
fn module_feature_sync_connection_killed_is_lost_at_once() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("killed");
        let lock = sync::Lock::new(client(&s), &k, opts(true));
        let g = lock.acquire().unwrap();
        assert!(!lock.is_lost());
        let started = Instant::now();
        kill_other_clients(&mut a); // the lock's own connection among them
        assert!(
            wait_until(AT_ONCE, || lock.is_lost()),
            "{kind}: CLIENT KILL not reported"
        );
        assert!(started.elapsed() < AT_ONCE);
        assert!(
            lock.lost_reason().unwrap().contains("connection"),
            "{:?}",
            lock.lost_reason()
        );
        assert_eq!(info(&mut a, &k), None, "{kind}: the server released it");
        assert!(matches!(g.release(), Err(Error::LockLost(_))));
        let g = lock
            .try_acquire()
            .unwrap()
            .into_guard()
            .expect("usable again");
        assert!(!lock.is_lost());
        assert_eq!(g.release().unwrap(), 0);
    }
}

#[test]
fn module_feature_sync_server_gone_is_lost_at_once() {
    for kind in KINDS {
        let mut s = Server::start(kind);
        let lock = sync::Lock::new(client(&s), key("gone"), opts(true));
        let g = lock.acquire().unwrap();
        s.kill9();
        assert!(
            wait_until(AT_ONCE, || lock.is_lost()),
            "{kind}: the server's death not reported"
        );
        std::mem::forget(g); // nothing left to release
    }
}

fn sync_force_release_and_lapse(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("force");
        let lock = sync::Lock::new(
            client(&s),
            &k,
            opts(keepalive).lease(Duration::from_millis(600)),
        );
        let g = lock.acquire().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        assert!(
            !lock.is_lost(),
            "{kind}: a healthy lock is not reported lost"
        );
        let forced: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        assert_eq!(forced, 1);
        assert!(
            wait_until(Duration::from_secs(2), || lock.is_lost()),
            "{kind}: FORCERELEASE not reported"
        );
        assert!(matches!(g.release(), Err(Error::LockLost(_))));
        // The lease ends under the holder (cut short with PEXPIRE).
        let g = lock.acquire().unwrap();
        let _: i64 = redis::cmd("PEXPIRE").arg(&k).arg(1).query(&mut a).unwrap();
        assert!(
            wait_until(Duration::from_secs(2), || lock.is_lost()),
            "{kind}: a lapsed lease not reported"
        );
        std::mem::forget(g);
    }
}

#[test]
fn sync_force_release_and_lapse_are_lost_watchdog() {
    sync_force_release_and_lapse(false);
}

#[test]
fn module_feature_keepalive_sync_force_release_and_lapse_are_lost() {
    sync_force_release_and_lapse(true);
}

fn sync_reuses_connections(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let locks: Vec<sync::Lock> = (0..4)
            .map(|i| sync::Lock::new(client(&s), key(&format!("reuse{i}")), opts(keepalive)))
            .collect();
        for l in &locks {
            l.acquire_timeout(WAIT)
                .unwrap()
                .into_guard()
                .expect("free")
                .release()
                .unwrap();
        }
        let before = connections_received(&mut a);
        for i in 0..200 {
            let l = &locks[i % locks.len()];
            let g = l.acquire_timeout(WAIT).unwrap().into_guard().expect("free");
            assert_eq!(g.release().unwrap(), 0);
            assert_eq!(l.info().unwrap(), None);
        }
        assert_eq!(
            connections_received(&mut a) - before,
            0,
            "{kind}: an acquisition opened a connection"
        );
    }
}

#[test]
fn sync_reuses_connections_watchdog() {
    sync_reuses_connections(false);
}

#[test]
fn module_feature_keepalive_sync_reuses_connections() {
    sync_reuses_connections(true);
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn until_async(mut f: impl FnMut() -> bool, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f()
}

#[test]
fn module_feature_tokio_connection_killed_is_lost_at_once() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-killed");
        rt().block_on(async {
            let lock = tk::Lock::new(client(&s), &k, opts(true));
            let g = lock.acquire().await.unwrap();
            kill_other_clients(&mut a);
            let lost = tokio::time::timeout(AT_ONCE, lock.lost()).await;
            assert!(lost.is_ok(), "{kind}: CLIENT KILL not reported");
            assert!(lock.is_lost());
            assert!(matches!(g.release().await, Err(Error::LockLost(_))));
        });
    }
}

fn tokio_force_release_and_lapse(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-force");
        rt().block_on(async {
            let lock = tk::Lock::new(
                client(&s),
                &k,
                opts(keepalive).lease(Duration::from_millis(600)),
            );
            let g = lock.acquire().await.unwrap();
            let forced: i64 = redis::cmd("LOCK.FORCERELEASE")
                .arg(&k)
                .query(&mut a)
                .unwrap();
            assert_eq!(forced, 1);
            assert!(
                until_async(|| lock.is_lost(), Duration::from_secs(2)).await,
                "{kind}: FORCERELEASE not reported"
            );
            assert!(matches!(g.release().await, Err(Error::LockLost(_))));
            let g = lock.acquire().await.unwrap();
            let _: i64 = redis::cmd("PEXPIRE").arg(&k).arg(1).query(&mut a).unwrap();
            assert!(
                until_async(|| lock.is_lost(), Duration::from_secs(2)).await,
                "{kind}: a lapsed lease not reported"
            );
            std::mem::forget(g);
        });
    }
}

#[test]
fn tokio_force_release_and_lapse_are_lost_watchdog() {
    tokio_force_release_and_lapse(false);
}

#[test]
fn module_feature_keepalive_tokio_force_release_and_lapse_are_lost() {
    tokio_force_release_and_lapse(true);
}

fn tokio_reuses_connections(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        rt().block_on(async {
            let locks: Vec<tk::Lock> = (0..4)
                .map(|i| tk::Lock::new(client(&s), key(&format!("treuse{i}")), opts(keepalive)))
                .collect();
            for l in &locks {
                let g = l
                    .acquire_timeout(WAIT)
                    .await
                    .unwrap()
                    .into_guard()
                    .expect("free");
                g.release().await.unwrap();
            }
            let before = connections_received(&mut a);
            for i in 0..200 {
                let l = &locks[i % locks.len()];
                let g = l
                    .acquire_timeout(WAIT)
                    .await
                    .unwrap()
                    .into_guard()
                    .expect("free");
                assert_eq!(g.release().await.unwrap(), 0);
            }
            assert_eq!(
                connections_received(&mut a) - before,
                0,
                "{kind}: an acquisition opened a connection"
            );
        });
    }
}

#[test]
fn tokio_reuses_connections_watchdog() {
    tokio_reuses_connections(false);
}

#[test]
fn module_feature_keepalive_tokio_reuses_connections() {
    tokio_reuses_connections(true);
}

/// A waiter cancelled in the same instant as the holder's release (its task
/// aborted right after the release goes out, or right before): whatever the
/// order the server sees them in, the lock ends free or granted and
/// released, never kept by the cancelled waiter.
fn tokio_cancel_racing_release(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let kept = rt().block_on(async {
            let mut kept = 0;
            for trial in 0..TRIALS {
                let k = key("race");
                let holder = tk::Lock::new(client(&s), &k, opts(keepalive));
                let waiter = std::sync::Arc::new(tk::Lock::new(client(&s), &k, opts(keepalive)));
                let held = holder.acquire().await.unwrap();
                let w = std::sync::Arc::clone(&waiter);
                let waiting = tokio::spawn(async move {
                    match w.acquire_timeout(Duration::from_secs(30)).await {
                        Ok(Acquired::Held(g)) => {
                            let _ = g.release().await;
                            true
                        }
                        _ => false,
                    }
                });
                while waiters(&mut a, &k) != 1 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                if trial % 2 == 0 {
                    waiting.abort();
                    assert_eq!(held.release().await.unwrap(), 0);
                } else {
                    let releasing = tokio::spawn(held.release());
                    waiting.abort();
                    assert_eq!(releasing.await.unwrap().unwrap(), 0);
                }
                let _ = waiting.await;
                if !until_async(|| info(&mut a, &k).is_none(), Duration::from_secs(2)).await {
                    kept += 1;
                    let _: i64 = redis::cmd("LOCK.FORCERELEASE")
                        .arg(&k)
                        .query(&mut a)
                        .unwrap();
                }
            }
            kept
        });
        assert_eq!(
            kept, 0,
            "{kind}: the cancelled waiter kept the lock in {kept} of {TRIALS} trials"
        );
    }
}

#[test]
fn tokio_cancel_racing_release_never_keeps_the_lock_watchdog() {
    tokio_cancel_racing_release(false);
}

#[test]
fn module_feature_keepalive_tokio_cancel_racing_release_never_keeps_the_lock() {
    tokio_cancel_racing_release(true);
}

/// `guard.release().await` cancelled at once (its future dropped): the
/// release still happens, though the Lock (and its watchdog) lives on.
fn tokio_cancelled_release_still_releases(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("cancelled-release");
        rt().block_on(async {
            let lock = tk::Lock::new(
                client(&s),
                &k,
                opts(keepalive).lease(Duration::from_millis(900)),
            );
            for trial in 0..20 {
                let g = lock.acquire().await.unwrap();
                // Polled 1 to 4 times, then dropped: cancelled before, while
                // and after the release goes out.
                tokio::select! {
                    biased;
                    _ = g.release() => {}
                    _ = yields(trial % 4) => {}
                }
                assert!(
                    until_async(|| info(&mut a, &k).is_none(), Duration::from_secs(2)).await,
                    "{kind}, trial {trial}: the lock stayed held after a cancelled release"
                );
            }
            // The Lock is usable afterwards, and the next acquisition is not undone.
            let g = lock.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(
                info(&mut a, &k).map(|i| i.owner),
                Some(lock.owner().to_string())
            );
            assert_eq!(g.release().await.unwrap(), 0);
        });
    }
}

#[test]
fn tokio_cancelled_release_still_releases_watchdog() {
    tokio_cancelled_release_still_releases(false);
}

#[test]
fn module_feature_keepalive_tokio_cancelled_release_still_releases() {
    tokio_cancelled_release_still_releases(true);
}

#[test]
fn module_not_loaded() {
    for kind in KINDS {
        let s = Server::builder(kind).no_module().start();
        for keepalive in [false, true] {
            let lock = sync::Lock::new(client(&s), key("bare"), opts(keepalive));
            let e = lock.try_acquire().err().expect("an error");
            assert!(matches!(e, Error::ModuleNotLoaded(_)), "{kind}: {e}");
            assert!(
                e.to_string().contains("the hashlock module is not loaded"),
                "{e}"
            );
            rt().block_on(async {
                let lock = tk::Lock::new(client(&s), key("bare"), opts(keepalive));
                let e = lock.try_acquire().await.err().expect("an error");
                assert!(matches!(e, Error::ModuleNotLoaded(_)), "{kind}: {e}");
            });
        }
    }
}

/// Ready after yielding to the scheduler `n` times.
async fn yields(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Watchdog mode: a wait's grant is untied once read. A waiter cancelled at
/// staggered moments after the release (0 to 1 ms: before, during and
/// after the grant and its untie) never keeps the lock, and its `Lock`
/// stays usable (a later acquisition is a fresh one, not a re-entry of a
/// forgotten grant).
#[test]
fn tokio_cancel_during_untie_never_keeps_the_lock_watchdog() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let kept = rt().block_on(async {
            let mut kept = 0;
            for trial in 0..TRIALS {
                let k = key("untie-race");
                let holder = tk::Lock::new(client(&s), &k, opts(false));
                let waiter = std::sync::Arc::new(tk::Lock::new(client(&s), &k, opts(false)));
                let held = holder.acquire().await.unwrap();
                let w = std::sync::Arc::clone(&waiter);
                let waiting = tokio::spawn(async move {
                    if let Ok(Acquired::Held(g)) = w.acquire_timeout(Duration::from_secs(30)).await
                    {
                        let _ = g.release().await;
                    }
                });
                while waiters(&mut a, &k) != 1 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                assert_eq!(held.release().await.unwrap(), 0);
                let until = Instant::now() + Duration::from_micros(10 * (trial as u64 % 100));
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                waiting.abort();
                let _ = waiting.await;
                let free = || info(&mut a, &k).is_none();
                if !until_async(free, Duration::from_secs(2)).await {
                    kept += 1;
                    let _: i64 = redis::cmd("LOCK.FORCERELEASE")
                        .arg(&k)
                        .query(&mut a)
                        .unwrap();
                }
                let g = waiter
                    .try_acquire()
                    .await
                    .unwrap()
                    .into_guard()
                    .expect("free");
                assert_eq!(g.release().await.unwrap(), 0, "{kind}: a fresh hold");
            }
            kept
        });
        assert_eq!(kept, 0, "{kind}: kept in {kept} of {TRIALS} trials");
    }
}
