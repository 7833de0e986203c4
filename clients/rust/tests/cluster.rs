//! sync::Lock and tokio::Lock on a real cluster (two primaries, Redis 7.0
//! and Valkey 9.1, started by testkit): commands go to the key's node, and
//! the library's connections follow ASK (slot migrating) and MOVED (slot
//! moved), as the Python library does; a wait whose slot moves is re-issued
//! on the new node; a KEEPALIVE lock whose slot moves is tied again there.

mod common;

use std::time::Duration;

use common::*;
use hashlock_client::{Target, sync, tokio as tk};
use testkit::cluster::{Cluster, SetSlotOrder, key_in_slot, key_slot};

fn two_primaries(kind: testkit::Kind) -> Cluster {
    Cluster::builder(kind)
        .primaries(2)
        .replicas_per_primary(0)
        .start()
}

fn target(c: &Cluster) -> Target {
    Target::cluster([format!("redis://127.0.0.1:{}/", c.port(0))]).unwrap()
}

fn node(c: &Cluster, i: usize) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/", c.port(i)))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// A key on node 0 (slots 0-8191), its own slot per test.
fn key_on_node0(slot: u16, tag: &str) -> String {
    key_in_slot(slot, &format!("{tag}{}", std::process::id()), ":lock")
}

fn move_key(c: &Cluster, k: &str) {
    let slot = key_slot(k.as_bytes());
    assert!(
        c.move_slot(slot, 0, 1, SetSlotOrder::TargetFirst).ok(),
        "moving slot {slot}"
    );
}

fn count_in_slot(con: &mut redis::Connection, slot: u16) -> i64 {
    redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(con)
        .unwrap()
}

#[test]
fn cluster_sync_and_tokio() {
    for kind in KINDS {
        let c = two_primaries(kind);
        let mut n0 = node(&c, 0);
        let mut n1 = node(&c, 1);

        // Routing and hand-off through Target::cluster, both modes; the
        // keys live on node 1 while the seed is node 0.
        for (i, keepalive) in [false, true].into_iter().enumerate() {
            let k = key_in_slot(9000 + i as u16, "route", ":lock");
            let a = sync::Lock::new(target(&c), &k, opts(keepalive));
            let b = sync::Lock::new(target(&c), &k, opts(keepalive));
            let g1 = a.acquire().unwrap();
            let g2 = a.try_acquire().unwrap().into_guard().expect("re-entry");
            assert_eq!(a.info().unwrap().unwrap().holds, 2);
            std::thread::scope(|s| {
                let t = s.spawn(|| {
                    b.acquire_timeout(WAIT)
                        .unwrap()
                        .into_guard()
                        .map(|g| g.release().unwrap())
                });
                assert!(
                    wait_until(WAIT, || waiters(&mut n1, &k) == 1),
                    "{kind}: queued on the key's node"
                );
                assert_eq!(g2.release().unwrap(), 1);
                assert_eq!(g1.release().unwrap(), 0);
                assert_eq!(t.join().unwrap(), Some(0));
            });
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let t = tk::Lock::new(target(&c), &k, opts(keepalive));
                let g = t.acquire().await.unwrap();
                assert_eq!(t.info().await.unwrap().unwrap().owner, t.owner());
                assert_eq!(g.release().await.unwrap(), 0);
            });
        }

        // ASK: the slot is migrating and the key not on the source yet.
        let asked = key_on_node0(100, "ask");
        let slot = key_slot(asked.as_bytes());
        let lock = sync::Lock::new(target(&c), &asked, opts(false));
        assert_eq!(lock.info().unwrap(), None); // learns the slot map: node 0
        c.begin_migration(slot, 0, 1);
        let g = lock
            .acquire_timeout(WAIT)
            .unwrap()
            .into_guard()
            .expect("ASK followed");
        assert_eq!(
            count_in_slot(&mut n1, slot),
            1,
            "{kind}: granted on the importing node"
        );
        assert_eq!(count_in_slot(&mut n0, slot), 0);
        c.set_slot_owner(slot, 0, 1, SetSlotOrder::TargetFirst);
        assert_eq!(g.release().unwrap(), 0);

        // MOVED: the client's map still says node 0.
        let moved = key_on_node0(200, "moved");
        let lock = sync::Lock::new(target(&c), &moved, opts(true));
        assert_eq!(lock.info().unwrap(), None);
        move_key(&c, &moved);
        let g = lock
            .acquire_timeout(WAIT)
            .unwrap()
            .into_guard()
            .expect("MOVED followed");
        let i = info(&mut n1, &moved).expect("held on node 1");
        assert_eq!((i.owner.as_str(), i.keepalive), (lock.owner(), Some(true)));
        assert_eq!(g.release().unwrap(), 0);

        // A queued wait whose slot moves is re-issued on the new node.
        let k = key_on_node0(300, "follow");
        let holder = sync::Lock::new(target(&c), &k, opts(false));
        let waiter = sync::Lock::new(target(&c), &k, opts(false));
        let held = holder.acquire().unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                waiter
                    .acquire_timeout(Duration::from_secs(20))
                    .unwrap()
                    .into_guard()
            });
            assert!(wait_until(WAIT, || waiters(&mut n0, &k) == 1));
            move_key(&c, &k);
            assert!(
                wait_until(Duration::from_secs(5), || waiters(&mut n1, &k) == 1),
                "{kind}: the wait was not re-issued on the new node"
            );
            assert_eq!(held.release().unwrap(), 0);
            let g = t.join().unwrap().expect("granted on the new node");
            assert_eq!(info(&mut n1, &k).unwrap().owner, waiter.owner());
            assert_eq!(g.release().unwrap(), 0);
        });

        // A KEEPALIVE lock whose slot moves arrives as a plain lease; the
        // library's check (every third of the lease) ties it again there.
        for (i, tokio_side) in [false, true].into_iter().enumerate() {
            let k = key_on_node0(400 + i as u16, "retie");
            let lease = Duration::from_millis(900);
            let check = |n1: &mut redis::Connection, owner: &str| {
                let there = info(n1, &k).expect("the lock lapsed on the new node");
                assert_eq!(there.owner, owner);
                assert_eq!(
                    there.keepalive,
                    Some(true),
                    "{kind}: not tied again on the new node"
                );
            };
            if tokio_side {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let lock = tk::Lock::new(target(&c), &k, opts(true).lease(lease));
                    let g = lock.acquire().await.unwrap();
                    move_key(&c, &k);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    check(&mut n1, lock.owner());
                    assert!(!lock.is_lost());
                    assert_eq!(g.release().await.unwrap(), 0);
                });
            } else {
                let lock = sync::Lock::new(target(&c), &k, opts(true).lease(lease));
                let g = lock.acquire().unwrap();
                move_key(&c, &k);
                std::thread::sleep(Duration::from_secs(2));
                check(&mut n1, lock.owner());
                assert!(!lock.is_lost());
                assert_eq!(g.release().unwrap(), 0);
            }
            assert_eq!(info(&mut n1, &k), None);
        }
    }
}

/// The family in a cluster: a multi-lock over keys of one slot (hash tag)
/// works; over two slots it is refused with CrossSlot and nothing changes;
/// a semaphore, a latch and a read-write lock are served by their key's
/// node.
#[test]
fn cluster_family() {
    for kind in KINDS {
        let c = two_primaries(kind);
        let mut n1 = node(&c, 1);
        let tag = format!("{{fam{}}}", std::process::id());
        let (a, b) = (format!("{tag}:a"), format!("{tag}:b"));
        let m = sync::MultiLock::new(target(&c), [&a, &b], opts(true));
        let g = m.acquire().unwrap();
        assert_eq!(g.release().unwrap(), 0);
        let (x, y) = (key_on_node0(500, "fx"), key_on_node0(501, "fy"));
        let m = sync::MultiLock::new(target(&c), [&x, &y], opts(true));
        assert!(
            matches!(m.try_acquire(), Err(Error::CrossSlot(_))),
            "{kind}: keys in two slots"
        );
        let mut n0 = node(&c, 0);
        assert_eq!(info(&mut n0, &x), None, "{kind}: nothing changed");

        // Keys served by node 1 (slots 8192-16383): routed there.
        let k = key_in_slot(9000, &format!("sem{}", std::process::id()), ":s");
        let sem = sync::Semaphore::new(target(&c), &k, opts(true));
        assert!(sem.create(1).unwrap());
        let lease = sem.lease(1).unwrap();
        let v: redis::Value = redis::cmd("SEMAPHORE.INFO").arg(&k).query(&mut n1).unwrap();
        let i = hashlock_client::family::parse_sem_info(&v)
            .unwrap()
            .unwrap();
        assert_eq!((i.leased, i.keepalive), (1, 1), "{kind}: on node 1");
        assert_eq!(lease.release().unwrap(), 1);
        let k = key_in_slot(9001, &format!("rw{}", std::process::id()), ":rw");
        let rw = sync::ReadWriteLock::new(target(&c), &k, opts(true));
        let g = rw.write().unwrap();
        assert_eq!(
            rw.info().unwrap().unwrap().writer.as_deref(),
            Some(rw.owner())
        );
        assert_eq!(g.release().unwrap(), 0);
        let k = key_in_slot(9002, &format!("latch{}", std::process::id()), ":l");
        let latch = sync::Latch::new(target(&c), &k);
        assert!(latch.create(1).unwrap());
        assert_eq!(latch.count_down().unwrap(), 0);
        assert!(latch.wait_timeout(Duration::from_millis(10)).unwrap());
    }
}
