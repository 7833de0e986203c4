//! sync::Election and tokio::Election against real Redis 7.0 and Valkey 9.1.

mod common;

use std::time::Duration;

use common::*;
use hashlock_client::{sync, tokio as tk};

const ROUNDS: usize = 30;

/// Takeovers, alternating FORCERELEASE of the leader's lock and its
/// resignation: the waiting candidate is elected each time, terms only
/// grow, the old leader sees it is no longer leading.
#[test]
fn sync_election_takeovers() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("election");
        let lease = Duration::from_millis(600);
        let x = sync::Election::new(client(&s), &k, Options::default().lease(lease));
        let y = sync::Election::new(client(&s), &k, Options::default().lease(lease));
        assert_eq!(x.leader().unwrap(), None);
        let mut term = x.campaign().unwrap();
        assert!(x.is_leader());
        assert_eq!(x.campaign().unwrap(), term, "already leading");
        assert_eq!(
            x.leader().unwrap(),
            Some(hashlock_client::Leader {
                owner: x.owner().to_string(),
                term
            })
        );
        assert_eq!(y.campaign_timeout(Duration::from_millis(50)).unwrap(), None);
        let (mut leader, mut other) = (&x, &y);
        for round in 0..ROUNDS {
            std::thread::scope(|scope| {
                let waiting = scope.spawn(|| other.campaign_timeout(WAIT));
                if !wait_until(WAIT, || waiters(&mut a, &k) == 1) {
                    panic!(
                        "{kind}: not queued: {:?} {:?}",
                        waiting.join().unwrap(),
                        info(&mut a, &k)
                    );
                }
                if round % 2 == 0 {
                    let _: i64 = redis::cmd("LOCK.FORCERELEASE")
                        .arg(&k)
                        .query(&mut a)
                        .unwrap();
                    assert!(
                        wait_until(WAIT, || !leader.is_leader()),
                        "{kind}: the old leader saw it"
                    );
                    assert_eq!(leader.term(), None);
                } else {
                    leader.resign().unwrap();
                    assert!(!leader.is_leader());
                }
                let won = waiting.join().unwrap().unwrap().expect("elected");
                assert!(won > term, "{kind}: terms grow ({won} after {term})");
                term = won;
            });
            assert!(other.is_leader());
            assert_eq!(other.term(), Some(term));
            let now = info(&mut a, &k).unwrap();
            assert_eq!((now.owner.as_str(), now.token), (other.owner(), Some(term)));
            std::mem::swap(&mut leader, &mut other);
        }
        leader.resign().unwrap();
        assert_eq!(info(&mut a, &k), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_election() {
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("telection");
        let opts = Options::default().lease(Duration::from_millis(600));
        let x = tk::Election::new(client(&s), &k, opts.clone());
        let y = std::sync::Arc::new(tk::Election::new(client(&s), &k, opts));
        let t1 = x.campaign().await.unwrap();
        // A cancelled campaign never leaves its candidate leading.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), y.campaign())
                .await
                .is_err()
        );
        assert!(!y.is_leader());
        let y2 = std::sync::Arc::clone(&y);
        let waiting = tokio::spawn(async move { y2.campaign().await.unwrap() });
        let queued = || waiters(&mut a, &k) == 1;
        assert!(wait_until(WAIT, queued), "{kind}");
        let _: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        tokio::time::timeout(WAIT, x.revoked())
            .await
            .expect("revoked");
        assert!(!x.is_leader());
        let t2 = waiting.await.unwrap();
        assert!(t2 > t1, "{kind}");
        assert_eq!(y.leader().await.unwrap().unwrap().term, t2);
        y.resign().await.unwrap();
        assert!(x.campaign().await.unwrap() > t2, "{kind}: a new term");
        x.resign().await.unwrap();
        assert_eq!(info(&mut a, &k), None);
    }
}

fn set_events(a: &mut redis::Connection, flags: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg(flags)
        .query(a)
        .unwrap();
}

/// An observer sees every leader in order, from lifecycle events: the
/// current one first, then a vacancy and the new leader at each takeover
/// (terms only grow); EventsDisabled at once without the events.
#[test]
fn sync_election_observer() {
    use hashlock_client::{Leader, LeaderChange};
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        let k = key("observed");
        let lease = Duration::from_millis(600);
        let x = sync::Election::new(client(&s), &k, Options::default().lease(lease));
        let y = sync::Election::new(client(&s), &k, Options::default().lease(lease));
        set_events(&mut a, "");
        assert!(
            matches!(x.observe(), Err(Error::EventsDisabled(_))),
            "{kind}"
        );
        set_events(&mut a, "Kd");
        let mut term = x.campaign().unwrap();
        let obs = y.observe().unwrap();
        let next = || obs.next_timeout(WAIT).expect("a change");
        let elected = |e: &sync::Election, term| {
            LeaderChange::Elected(Leader {
                owner: e.owner().to_string(),
                term,
            })
        };
        assert_eq!(
            next(),
            elected(&x, term),
            "{kind}: the current leader first"
        );
        let (mut leader, mut other) = (&x, &y);
        for round in 0..10 {
            std::thread::scope(|scope| {
                let waiting = scope.spawn(|| other.campaign_timeout(WAIT));
                if !wait_until(WAIT, || waiters(&mut a, &k) == 1) {
                    panic!(
                        "{kind}: not queued: {:?} {:?}",
                        waiting.join().unwrap(),
                        info(&mut a, &k)
                    );
                }
                if round % 2 == 0 {
                    let _: i64 = redis::cmd("LOCK.FORCERELEASE")
                        .arg(&k)
                        .query(&mut a)
                        .unwrap();
                } else {
                    leader.resign().unwrap();
                }
                term = waiting.join().unwrap().unwrap().expect("elected");
            });
            assert_eq!(next(), LeaderChange::Vacant, "{kind} round {round}");
            assert_eq!(next(), elected(other, term), "{kind} round {round}");
            std::mem::swap(&mut leader, &mut other);
        }
        leader.resign().unwrap();
        assert_eq!(next(), LeaderChange::Vacant, "{kind}");
        assert_eq!(
            obs.next_timeout(Duration::from_millis(300)),
            None,
            "{kind}: nothing more"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_election_observer() {
    use hashlock_client::LeaderChange;
    for kind in KINDS {
        let s = Server::start(kind);
        let mut a = admin(&s);
        set_events(&mut a, "Kd");
        let k = key("tobserved");
        let x = tk::Election::new(client(&s), &k, Options::default());
        let mut obs = x.observe().await.unwrap();
        let t1 = x.campaign().await.unwrap();
        let change = tokio::time::timeout(WAIT, obs.next())
            .await
            .unwrap()
            .unwrap();
        match change {
            LeaderChange::Elected(l) => assert_eq!((l.owner.as_str(), l.term), (x.owner(), t1)),
            other => panic!("{kind}: {other:?}"),
        }
        let _: i64 = redis::cmd("LOCK.FORCERELEASE")
            .arg(&k)
            .query(&mut a)
            .unwrap();
        let change = tokio::time::timeout(WAIT, obs.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            change,
            LeaderChange::Vacant,
            "{kind}: at once, from the event"
        );
    }
}
