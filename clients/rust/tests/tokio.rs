//! hashlock_client::tokio::Lock against real Redis 7.0 and Valkey 9.1.
//! Tests named module_feature_* use the module's KEEPALIVE or TOKEN.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hashlock_client::tokio::Lock;

async fn until_async(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

async fn acquire_hand_off_release(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-basic");
        let holder = Lock::new(client(&s), &k, opts(keepalive));
        let g1 = holder.acquire().await.unwrap();
        let g2 = holder
            .try_acquire()
            .await
            .unwrap()
            .into_guard()
            .expect("re-entry");
        assert_eq!(holder.info().await.unwrap().unwrap().holds, 2);
        let waiter = Lock::new(client(&s), &k, opts(keepalive));
        assert!(waiter.try_acquire().await.unwrap().into_guard().is_none());
        let waiting = tokio::spawn(async move {
            let g = waiter.acquire_timeout(WAIT).await.unwrap().into_guard();
            (g, waiter)
        });
        assert!(until_async(|| waiters(&mut a, &k) == 1).await);
        assert_eq!(g2.release().await.unwrap(), 1);
        assert_eq!(g1.release().await.unwrap(), 0);
        let (got, waiter) = waiting.await.unwrap();
        let got = got.expect("handed over");
        assert_eq!(got.token(), None, "no token asked");
        assert_eq!(info(&mut a, &k).unwrap().owner, waiter.owner());
        assert_eq!(got.release().await.unwrap(), 0);
        assert_eq!(info(&mut a, &k), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_acquire_hand_off_release_watchdog() {
    acquire_hand_off_release(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_feature_keepalive_tokio_acquire_hand_off_release() {
    acquire_hand_off_release(true).await;
}

/// A client-side timeout shorter than BLOCK: the dropped future drops its
/// connection, the server forgets the waiter, the release grants no one.
async fn cancelled_wait_is_never_granted(keepalive: bool) {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-cancel");
        let holder = Lock::new(client(&s), &k, opts(keepalive));
        let held = holder.acquire().await.unwrap();
        let waiter = Lock::new(client(&s), &k, opts(keepalive));
        let k2 = k.clone();
        let mut a2 = admin(&s);
        let watcher =
            tokio::task::spawn_blocking(move || wait_until(WAIT, || waiters(&mut a2, &k2) == 1));
        let gave_up = tokio::time::timeout(
            Duration::from_millis(700),
            waiter.acquire_timeout(Duration::from_secs(30)),
        )
        .await;
        assert!(gave_up.is_err(), "{kind}: the client-side timeout fired");
        assert!(
            watcher.await.unwrap(),
            "{kind}: the waiter was queued before it gave up"
        );
        assert!(
            until_async(|| waiters(&mut a, &k) == 0).await,
            "{kind}: the waiter left the queue"
        );
        assert_eq!(held.release().await.unwrap(), 0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            info(&mut a, &k),
            None,
            "{kind}: nobody was granted the lock"
        );
        // The Lock is usable afterwards.
        let g = waiter
            .try_acquire()
            .await
            .unwrap()
            .into_guard()
            .expect("free");
        assert_eq!(g.release().await.unwrap(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_cancelled_wait_is_never_granted_watchdog() {
    cancelled_wait_is_never_granted(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_feature_keepalive_tokio_cancelled_wait_is_never_granted() {
    cancelled_wait_is_never_granted(true).await;
}

/// redis-rs's async default response timeout (500 ms) would abandon this
/// waiter; the lock's own connection waits as long as BLOCK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_wait_outlasts_redis_rs_response_timeout() {
    for kind in KINDS {
        let s = Server::start(kind);
        let k = key("tokio-long");
        let holder = Lock::new(client(&s), &k, opts(false));
        let held = holder.acquire().await.unwrap();
        let waiter = Lock::new(client(&s), &k, opts(false));
        let waiting = tokio::spawn(async move {
            waiter
                .acquire_timeout(WAIT)
                .await
                .map(|g| g.into_guard().is_some())
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(held.release().await.unwrap(), 0);
        assert!(waiting.await.unwrap().unwrap(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_dropped_guard_is_released_in_the_background() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-drop");
        let lock = Lock::new(client(&s), &k, opts(false));
        drop(lock.acquire().await.unwrap());
        assert!(until_async(|| info(&mut a, &k).is_none()).await, "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_errors_and_watchdog() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("tokio-errors");
        let lock = Lock::new(
            client(&s),
            &k,
            opts(false).lease(Duration::from_millis(300)),
        );
        assert!(matches!(lock.renew().await, Err(Error::LockLost(_))));
        let _: () = redis::cmd("SET").arg(&k).arg("x").query(&mut a).unwrap();
        assert!(matches!(lock.try_acquire().await, Err(Error::WrongType(_))));
        let _: () = redis::cmd("DEL").arg(&k).query(&mut a).unwrap();
        let _: () = redis::cmd("HSET")
            .arg(&k)
            .arg("a")
            .arg(1)
            .arg("b")
            .arg(1)
            .query(&mut a)
            .unwrap();
        assert!(matches!(lock.info().await, Err(Error::NotLock(_))));
        let _: () = redis::cmd("DEL").arg(&k).query(&mut a).unwrap();

        let g = lock.acquire().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await; // four leases
        assert_eq!(
            info(&mut a, &k).map(|i| i.owner),
            Some(lock.owner().to_string())
        );
        let _: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        assert!(until_async(|| lock.is_lost()).await);
        assert!(matches!(g.release().await, Err(Error::LockLost(_))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_feature_tokio_token() {
    for kind in KINDS {
        let s = Server::start(kind);
        let k = key("tokio-token");
        let lock = Lock::new(client(&s), &k, opts(true).token(true));
        let g1 = lock.acquire().await.unwrap();
        let g2 = lock.try_acquire().await.unwrap().into_guard().unwrap();
        assert!(g2.token().unwrap() > g1.token().unwrap());
        assert_eq!(lock.info().await.unwrap().unwrap().token, g2.token());
        g2.release().await.unwrap();
        g1.release().await.unwrap();
    }
}
