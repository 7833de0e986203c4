//! The semaphore rules, run against the in-memory store.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::memory::{MemoryDb, Score, Value};

const K: &[u8] = b"s";
const T: &[u8] = b"{s}:timeout";

fn px(ms: i64) -> Lease {
    Lease::from_millis(ms).unwrap()
}

fn claim(count: i64, lease: Option<i64>) -> LeaseClaim {
    LeaseClaim {
        count,
        lease: lease.map(px),
    }
}

fn count_at(db: &MemoryDb) -> Option<i64> {
    match db.value(K) {
        Some(Value::Str(s)) => Some(crate::number::parse_i64(s).unwrap()),
        None => None,
        other => panic!("not a count: {other:?}"),
    }
}

fn zset(db: &MemoryDb) -> BTreeMap<Vec<u8>, f64> {
    match db.value(T) {
        Some(Value::Zset(z)) => z.iter().map(|(m, s)| (m.clone(), s.0)).collect(),
        None => BTreeMap::new(),
        other => panic!("not a zset: {other:?}"),
    }
}

fn raw_zset(members: &[(&[u8], f64)]) -> Value {
    Value::Zset(
        members
            .iter()
            .map(|(m, s)| (m.to_vec(), Score(*s)))
            .collect(),
    )
}

fn str_value(s: &str) -> Value {
    Value::Str(s.as_bytes().to_vec())
}

fn leased(o: Outcome<Option<Leased>>) -> Leased {
    o.reply.expect("leased")
}

// ---- CREATE, ADD, DRAIN ----

#[test]
fn create_writes_the_count_once() {
    let mut db = MemoryDb::new(1_000);
    let o = create(&mut db.semaphore(K), 5, None).unwrap();
    assert_eq!(o, Outcome::new(true, vec![], true));
    assert_eq!(db.value(K), Some(&str_value("5")));
    assert_eq!(db.deadline(K), None);
    // A string is there: 0, whatever it holds.
    let o = create(&mut db.semaphore(K), 9, None).unwrap();
    assert!(!o.reply && !o.publish);
    db.put(K, str_value("not a number"), None);
    assert!(!create(&mut db.semaphore(K), 9, None).unwrap().reply);
    assert_eq!(db.value(K), Some(&str_value("not a number")));
    // Another type: WRONGTYPE.
    db.put(K, Value::Other, None);
    assert_eq!(
        create(&mut db.semaphore(K), 9, None),
        Err(LockError::WrongType)
    );
    // With a TTL; 0 permits is a semaphore too.
    let mut db = MemoryDb::new(1_000);
    assert!(
        create(&mut db.semaphore(K), 0, Some(px(500)))
            .unwrap()
            .reply
    );
    assert_eq!(db.value(K), Some(&str_value("0")));
    assert_eq!(db.deadline(K), Some(1_500));
    assert_eq!(
        create(&mut db.semaphore(K), -1, None),
        Err(LockError::Invalid(
            "invalid permits: must be a non-negative integer"
        ))
    );
}

#[test]
fn add_keeps_the_ttl_and_may_go_negative() {
    let mut db = MemoryDb::new(0);
    // Creates the key, as INCRBY does.
    assert_eq!(add(&mut db.semaphore(K), -2).unwrap().reply, -2);
    assert_eq!(db.value(K), Some(&str_value("-2")));
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 3, Some(px(100))).unwrap();
    let o = add(&mut db.semaphore(K), 4).unwrap();
    assert_eq!(o, Outcome::new(7, vec![], true));
    assert_eq!(db.deadline(K), Some(100));
    assert_eq!(add(&mut db.semaphore(K), -10).unwrap().reply, -3);
    assert_eq!(db.deadline(K), Some(100));
    // Overflow: refused, nothing changes.
    db.put(K, str_value(&(i64::MAX - 1).to_string()), None);
    let before = db.clone();
    assert_eq!(add(&mut db.semaphore(K), 2), Err(LockError::CountOverflow));
    assert_eq!(db, before);
}

#[test]
fn drain_takes_what_is_available_and_keeps_the_ttl() {
    let mut db = MemoryDb::new(0);
    assert_eq!(drain(&mut db.semaphore(K)).unwrap().reply, 0);
    assert_eq!(db.value(K), None);
    create(&mut db.semaphore(K), 4, Some(px(100))).unwrap();
    let o = drain(&mut db.semaphore(K)).unwrap();
    assert_eq!(o, Outcome::new(4, vec![], false));
    assert_eq!(db.value(K), Some(&str_value("0")));
    assert_eq!(db.deadline(K), Some(100));
    // A negative count is reset, as Redisson's drainPermits does.
    add(&mut db.semaphore(K), -3).unwrap();
    assert_eq!(drain(&mut db.semaphore(K)).unwrap().reply, -3);
    assert_eq!(db.value(K), Some(&str_value("0")));
}

// ---- ACQUIRE, RELEASE ----

#[test]
fn acquire_takes_anonymous_permits_or_answers_nil() {
    let mut db = MemoryDb::new(0);
    // A missing key has 0 permits.
    assert_eq!(acquire(&mut db.semaphore(K), 1, false).unwrap().reply, None);
    assert_eq!(db.value(K), None);
    create(&mut db.semaphore(K), 3, None).unwrap();
    let o = acquire(&mut db.semaphore(K), 2, false).unwrap();
    assert_eq!(o, Outcome::new(Some(2), vec![], false));
    assert_eq!(db.value(K), Some(&str_value("1")));
    assert_eq!(acquire(&mut db.semaphore(K), 2, false).unwrap().reply, None);
    // Queued waiters: a newcomer never jumps the queue.
    assert_eq!(acquire(&mut db.semaphore(K), 1, true).unwrap().reply, None);
    assert_eq!(db.value(K), Some(&str_value("1")));
    assert_eq!(
        acquire(&mut db.semaphore(K), 0, false),
        Err(LockError::Invalid(
            "invalid COUNT: must be a positive integer"
        ))
    );
}

#[test]
fn release_gives_back_more_than_was_taken_if_asked() {
    let mut db = MemoryDb::new(0);
    let o = release(&mut db.semaphore(K), 2).unwrap();
    assert_eq!(o, Outcome::new(2, vec![], true));
    assert_eq!(release(&mut db.semaphore(K), 1).unwrap().reply, 3);
    db.put(K, str_value(&i64::MAX.to_string()), None);
    let before = db.clone();
    assert_eq!(
        release(&mut db.semaphore(K), 1),
        Err(LockError::CountOverflow)
    );
    assert_eq!(db, before);
}

// ---- LEASE, RETURN, RENEW ----

#[test]
fn lease_writes_redissons_layout() {
    let mut db = MemoryDb::new(1_000);
    create(&mut db.semaphore(K), 3, None).unwrap();
    let l = leased(lease(&mut db.semaphore(K), &claim(2, Some(500)), false).unwrap());
    assert_eq!(l.ids.len(), 2);
    assert_ne!(l.ids[0], l.ids[1]);
    assert_eq!(l.deadline, Some(1_500));
    assert_eq!(db.value(K), Some(&str_value("1")));
    let z = zset(&db);
    assert_eq!(z.len(), 2);
    for id in &l.ids {
        assert_eq!(z.get(id.as_slice()), Some(&1_500.0));
    }
    // No lease: Redisson's no-expiry score.
    let l = leased(lease(&mut db.semaphore(K), &claim(1, None), false).unwrap());
    assert_eq!(l.deadline, None);
    assert_eq!(zset(&db).get(l.ids[0].as_slice()), Some(&(NO_LEASE as f64)));
    assert_eq!(db.value(K), Some(&str_value("0")));
    // Neither key has a TTL: the set has none either.
    assert_eq!(db.deadline(T), None);
    assert_eq!(
        lease(&mut db.semaphore(K), &claim(1, None), false)
            .unwrap()
            .reply,
        None
    );
}

#[test]
fn the_lease_set_takes_the_keys_ttl() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 3, Some(px(10_000))).unwrap();
    lease(&mut db.semaphore(K), &claim(1, Some(50)), false).unwrap();
    assert_eq!(db.deadline(T), Some(10_000));
    // A key that lost its TTL: the set persists at the next lease.
    db.put(K, str_value("2"), None);
    lease(&mut db.semaphore(K), &claim(1, Some(50)), false).unwrap();
    assert_eq!(db.deadline(T), None);
}

#[test]
fn a_lease_returns_at_its_deadline() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 1, None).unwrap();
    let l = leased(lease(&mut db.semaphore(K), &claim(1, Some(100)), false).unwrap());
    assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(Some(100)));
    db.advance(99);
    assert_eq!(sweep(&mut db.semaphore(K)), Ok(vec![]));
    assert_eq!(
        info(&mut db.semaphore(K)).unwrap().unwrap(),
        SemaphoreInfo {
            available: 0,
            leased: 1,
            ttl: None
        }
    );
    db.advance(1);
    // At the deadline (score ≤ now): lapsed. INFO already counts it back.
    assert_eq!(
        info(&mut db.semaphore(K)).unwrap().unwrap(),
        SemaphoreInfo {
            available: 1,
            leased: 0,
            ttl: None
        }
    );
    assert_eq!(sweep(&mut db.semaphore(K)), Ok(vec![l.ids[0].to_vec()]));
    assert_eq!(db.value(K), Some(&str_value("1")));
    assert_eq!(db.value(T), None);
    assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(None));
}

#[test]
fn a_call_before_the_sweep_sees_the_permit_back() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 1, None).unwrap();
    let l = leased(lease(&mut db.semaphore(K), &claim(1, Some(100)), false).unwrap());
    db.advance(100);
    let o = acquire(&mut db.semaphore(K), 1, false).unwrap();
    assert_eq!(o.reply, Some(1));
    assert_eq!(o.expired, vec![l.ids[0].to_vec()]);
    assert!(o.publish);
    assert_eq!(db.value(K), Some(&str_value("0")));
    assert_eq!(db.value(T), None);
}

#[test]
fn redisson_written_ids_are_swept_too() {
    let mut db = MemoryDb::new(5_000);
    let id16 = [7u8; 16];
    // Redisson before 3.17 wrote the hex itself; anything a ZADD wrote.
    let legacy = b"0707070707070707070707070707070707";
    db.put(K, str_value("0"), None);
    db.put(
        T,
        raw_zset(&[
            (&id16, 4_999.0),
            (legacy, 5_000.0),
            (b"later", 5_000.5),
            (b"forever", NO_LEASE as f64),
        ]),
        None,
    );
    // The fractional score lapses at the first whole ms at or past it.
    assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(Some(4_999)));
    let swept = sweep(&mut db.semaphore(K)).unwrap();
    assert_eq!(swept, vec![id16.to_vec(), legacy.to_vec()]);
    assert_eq!(db.value(K), Some(&str_value("2")));
    assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(Some(5_001)));
    db.advance(1);
    assert_eq!(
        sweep(&mut db.semaphore(K)).unwrap(),
        vec![b"later".to_vec()]
    );
    assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(None));
    assert_eq!(zset(&db).len(), 1);
}

#[test]
fn return_is_all_or_nothing() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 3, None).unwrap();
    let a = leased(lease(&mut db.semaphore(K), &claim(2, None), false).unwrap());
    let b = leased(lease(&mut db.semaphore(K), &claim(1, Some(10)), false).unwrap());
    let unknown = [9u8; 16];
    let before = db.clone();
    for ids in [
        vec![a.ids[0], unknown],
        vec![unknown],
        vec![a.ids[1], a.ids[0], unknown],
    ] {
        let ids = PermitIds::new(ids).unwrap();
        assert_eq!(
            return_permits(&mut db.semaphore(K), &ids),
            Err(LockError::NotLeased)
        );
        assert_eq!(db, before);
    }
    // A lapsed id is no longer leased: NOTOWNER, and nothing changes (not
    // even the sweep).
    db.advance(10);
    let before = db.clone();
    let ids = PermitIds::new(vec![a.ids[0], b.ids[0]]).unwrap();
    assert_eq!(
        return_permits(&mut db.semaphore(K), &ids),
        Err(LockError::NotLeased)
    );
    assert_eq!(db, before);
    let ids = PermitIds::new(a.ids.clone()).unwrap();
    let o = return_permits(&mut db.semaphore(K), &ids).unwrap();
    assert_eq!(o, Outcome::new(2, vec![b.ids[0].to_vec()], true));
    assert_eq!(db.value(K), Some(&str_value("3")));
    assert_eq!(db.value(T), None);
    assert_eq!(
        return_permits(&mut db.semaphore(K), &ids),
        Err(LockError::NotLeased)
    );
}

#[test]
fn return_ids_skips_what_is_no_longer_leased() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 3, None).unwrap();
    let a = leased(lease(&mut db.semaphore(K), &claim(2, Some(50)), false).unwrap());
    let b = leased(lease(&mut db.semaphore(K), &claim(1, Some(10)), false).unwrap());
    db.advance(10);
    let mut tied = vec![a.ids[0], b.ids[0], [1u8; 16], a.ids[0]];
    tied.push(a.ids[1]);
    let o = return_ids(&mut db.semaphore(K), &tied).unwrap();
    let mut back = o.reply.clone();
    back.sort_unstable();
    let mut want = a.ids.clone();
    want.sort_unstable();
    assert_eq!(back, want);
    assert_eq!(o.expired, vec![b.ids[0].to_vec()]);
    assert!(o.publish);
    assert_eq!(db.value(K), Some(&str_value("3")));
    let o = return_ids(&mut db.semaphore(K), &tied).unwrap();
    assert_eq!(o, Outcome::new(vec![], vec![], false));
}

#[test]
fn lease_set_names_map_back_to_their_keys() {
    use crate::channel::timeout_key;
    for key in [
        &b"s"[..],
        b"{s}",
        b"{s}:1",
        b"a{b",
        b"x}y",
        b"",
        b"{}",
        b"a:timeout",
    ] {
        let name = timeout_key(key);
        let found = keys_of_lease_set(&name);
        assert!(found.contains(&key), "{key:?} -> {found:?}");
        for k in found {
            assert_eq!(timeout_key(k), name);
        }
    }
    assert_eq!(keys_of_lease_set(b"{a}:timeout"), vec![&b"a"[..], b"{a}"]);
    assert!(keys_of_lease_set(b"plain").is_empty());
    assert!(keys_of_lease_set(b"nobraces:timeout").is_empty());
}

#[test]
fn all_leased_is_what_a_deferred_grant_is_checked_against() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 3, None).unwrap();
    let a = leased(lease(&mut db.semaphore(K), &claim(2, Some(50)), false).unwrap());
    let b = leased(lease(&mut db.semaphore(K), &claim(1, None), false).unwrap());
    let before = db.clone();
    assert!(all_leased(&mut db.semaphore(K), &a.ids));
    assert!(all_leased(&mut db.semaphore(K), &[a.ids[1], b.ids[0]]));
    assert!(!all_leased(&mut db.semaphore(K), &[a.ids[0], [7u8; 16]]));
    assert_eq!(db, before, "read-only");
    // At the deadline the permits have lapsed (score <= now), swept or not.
    db.advance(50);
    assert!(!all_leased(&mut db.semaphore(K), &a.ids[..1]));
    assert!(all_leased(&mut db.semaphore(K), &b.ids));
    // Returned: no longer leased.
    return_permits(
        &mut db.semaphore(K),
        &PermitIds::new(b.ids.clone()).unwrap(),
    )
    .unwrap();
    assert!(!all_leased(&mut db.semaphore(K), &b.ids));
    // Not a semaphore any more: nothing stands.
    let b2 = leased(lease(&mut db.semaphore(K), &claim(1, None), false).unwrap());
    db.put(K, str_value("x"), None);
    assert!(!all_leased(&mut db.semaphore(K), &b2.ids));
    // Out of this node's reach (a cluster slot elsewhere): nothing stands.
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(b"a{b"), 1, None).unwrap();
    let l = leased(lease(&mut db.semaphore(b"a{b"), &claim(1, None), false).unwrap());
    assert!(all_leased(&mut db.semaphore(b"a{b"), &l.ids));
    assert!(!all_leased(&mut db.semaphore_in_cluster(b"a{b"), &l.ids));
}

#[test]
fn renew_sets_a_new_deadline_for_a_leased_id_only() {
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore(K), 2, Some(px(1_000))).unwrap();
    let l = leased(lease(&mut db.semaphore(K), &claim(1, Some(100)), false).unwrap());
    let id = l.ids[0];
    db.advance(60);
    assert_eq!(
        renew(&mut db.semaphore(K), &id, px(100)),
        Ok(Renewed::Renewed {
            deadline: 160,
            previous: 100.0
        })
    );
    assert_eq!(zset(&db).get(id.as_slice()), Some(&160.0));
    assert_eq!(db.deadline(T), Some(1_000));
    assert_eq!(
        renew(&mut db.semaphore(K), &[3u8; 16], px(100)),
        Ok(Renewed::NotLeased)
    );
    // REPLICAS undo: the old score back.
    assert_eq!(restore_lease(&mut db.semaphore(K), &id, 100.0), Ok(true));
    assert_eq!(zset(&db).get(id.as_slice()), Some(&100.0));
    assert_eq!(
        restore_lease(&mut db.semaphore(K), &[3u8; 16], 1.0),
        Ok(false)
    );
    db.advance(40);
    // Lapsed at 100: not renewable, nothing changes.
    let before = db.clone();
    assert_eq!(
        renew(&mut db.semaphore(K), &id, px(100)),
        Ok(Renewed::NotLeased)
    );
    assert_eq!(db, before);
    // A lease past the no-expiry score is refused.
    let mut db = MemoryDb::new(NO_LEASE - 10);
    create(&mut db.semaphore(K), 2, None).unwrap();
    assert_eq!(
        lease(&mut db.semaphore(K), &claim(1, Some(10)), false),
        Err(LockError::BadLease("deadline would overflow"))
    );
    assert!(lease(&mut db.semaphore(K), &claim(1, Some(9)), false).is_ok());
}

#[test]
fn info_reports_both_keys() {
    let mut db = MemoryDb::new(0);
    assert_eq!(info(&mut db.semaphore(K)), Ok(None));
    create(&mut db.semaphore(K), 3, Some(px(1_000))).unwrap();
    lease(&mut db.semaphore(K), &claim(2, Some(100)), false).unwrap();
    db.advance(30);
    assert_eq!(
        info(&mut db.semaphore(K)),
        Ok(Some(SemaphoreInfo {
            available: 1,
            leased: 2,
            ttl: Some(970)
        }))
    );
    // The set alone (the key deleted behind our back): still a semaphore.
    let mut db = MemoryDb::new(0);
    db.put(T, raw_zset(&[(&[1u8; 16], 10.0)]), None);
    assert_eq!(
        info(&mut db.semaphore(K)),
        Ok(Some(SemaphoreInfo {
            available: 0,
            leased: 1,
            ttl: None
        }))
    );
    assert_eq!(available(&mut db.semaphore(K)), Ok(0));
}

/// Every command refuses a key or a lease set of the wrong kind, and
/// changes nothing.
#[test]
fn wrongtype_and_notsemaphore_everywhere() {
    let id = [5u8; 16];
    let cases: Vec<(Option<Value>, Option<Value>, LockError)> = vec![
        (Some(Value::Other), None, LockError::WrongType),
        (
            Some(Value::Hash(BTreeMap::new())),
            None,
            LockError::WrongType,
        ),
        (Some(str_value("x")), None, LockError::NotSemaphore),
        (Some(str_value("1.5")), None, LockError::NotSemaphore),
        (Some(str_value("")), None, LockError::NotSemaphore),
        (
            Some(str_value("5")),
            Some(Value::Other),
            LockError::WrongType,
        ),
        (None, Some(str_value("5")), LockError::WrongType),
    ];
    for (key, set, want) in cases {
        let mut db = MemoryDb::new(0);
        if let Some(v) = key.clone() {
            db.put(K, v, Some(1_000));
        }
        if let Some(v) = set.clone() {
            db.put(T, v, Some(1_000));
        }
        let before = db.clone();
        let ids = PermitIds::new(vec![id]).unwrap();
        let results = [
            add(&mut db.semaphore(K), 1).map(|_| ()),
            acquire(&mut db.semaphore(K), 1, false).map(|_| ()),
            release(&mut db.semaphore(K), 1).map(|_| ()),
            lease(&mut db.semaphore(K), &claim(1, None), false).map(|_| ()),
            return_permits(&mut db.semaphore(K), &ids).map(|_| ()),
            return_ids(&mut db.semaphore(K), &[id]).map(|_| ()),
            renew(&mut db.semaphore(K), &id, px(5)).map(|_| ()),
            restore_lease(&mut db.semaphore(K), &id, 5.0).map(|_| ()),
            drain(&mut db.semaphore(K)).map(|_| ()),
            info(&mut db.semaphore(K)).map(|_| ()),
            available(&mut db.semaphore(K)).map(|_| ()),
            sweep(&mut db.semaphore(K)).map(|_| ()),
            next_deadline(&mut db.semaphore(K)).map(|_| ()),
        ];
        for (i, r) in results.into_iter().enumerate() {
            assert_eq!(r, Err(want.clone()), "#{i} {key:?} {set:?}");
        }
        // CREATE answers 0 for any string, else the type error.
        let created = create(&mut db.semaphore(K), 1, None).map(|o| o.reply);
        match (&key, &set) {
            (Some(Value::Str(_)), Some(Value::Other)) | (None, _) | (Some(Value::Other), _) => {
                assert_eq!(created, Err(LockError::WrongType))
            }
            (Some(Value::Hash(_)), _) => assert_eq!(created, Err(LockError::WrongType)),
            (Some(Value::Str(_)), _) => assert_eq!(created, Ok(false)),
            _ => unreachable!(),
        }
        assert_eq!(db, before, "{key:?} {set:?}");
    }
}

#[test]
fn crossslot_only_where_the_lease_set_is_written() {
    let key: &[u8] = b"a}b";
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore_in_cluster(key), 3, None).unwrap();
    assert_eq!(
        acquire(&mut db.semaphore_in_cluster(key), 1, false)
            .unwrap()
            .reply,
        Some(1)
    );
    let before = db.clone();
    let id = [1u8; 16];
    assert_eq!(
        lease(&mut db.semaphore_in_cluster(key), &claim(1, None), false),
        Err(LockError::TimeoutCrossSlot)
    );
    assert_eq!(
        return_permits(
            &mut db.semaphore_in_cluster(key),
            &PermitIds::new(vec![id]).unwrap()
        ),
        Err(LockError::TimeoutCrossSlot)
    );
    assert_eq!(
        renew(&mut db.semaphore_in_cluster(key), &id, px(5)),
        Err(LockError::TimeoutCrossSlot)
    );
    assert_eq!(db, before);
    // Outside a cluster the same key works.
    assert!(
        lease(&mut db.semaphore(key), &claim(1, None), false)
            .unwrap()
            .reply
            .is_some()
    );
    assert_eq!(
        db.value(b"{a}b}:timeout")
            .map(|v| matches!(v, Value::Zset(_))),
        Some(true)
    );
}

// ---- serving the queue ----

#[derive(Debug, Clone, PartialEq)]
struct W(u32, Want);

impl SemaphoreWaiting for W {
    fn want(&self) -> Want {
        self.1
    }
}

fn acq(id: u32, count: i64) -> W {
    W(id, Want::Acquire { count })
}

fn lea(id: u32, count: i64, lease: Option<i64>) -> W {
    W(id, Want::Lease(claim(count, lease)))
}

#[test]
fn head_of_line_is_never_overtaken() {
    let mut db = MemoryDb::new(0);
    let mut q = WaitQueue::default();
    q.push(acq(1, 3));
    q.push(lea(2, 1, Some(100)));
    q.push(acq(3, 1));
    release(&mut db.semaphore(K), 2).unwrap();
    let s = serve(&mut db.semaphore(K), &mut q);
    assert!(s.granted.is_empty() && s.failed.is_empty());
    assert_eq!(q.len(), 3);
    release(&mut db.semaphore(K), 2).unwrap();
    let s = serve(&mut db.semaphore(K), &mut q);
    let granted: Vec<u32> = s.granted.iter().map(|(w, _)| w.0).collect();
    assert_eq!(granted, vec![1, 2]);
    assert_eq!(s.granted[0].1, Grant::Acquired { count: 3 });
    let Grant::Leased(l) = &s.granted[1].1 else {
        panic!("a lease")
    };
    assert_eq!((l.ids.len(), l.deadline), (1, Some(100)));
    assert_eq!(db.value(K), Some(&str_value("0")));
    assert_eq!(q.front(), Some(&acq(3, 1)));
    assert_eq!(available(&mut db.semaphore(K)), Ok(0));
}

#[test]
fn waiters_that_can_never_be_served_are_failed() {
    let mut db = MemoryDb::new(0);
    db.put(K, str_value("oops"), None);
    let mut q = WaitQueue::default();
    q.push(acq(1, 1));
    q.push(lea(2, 1, None));
    let s = serve(&mut db.semaphore(K), &mut q);
    assert_eq!(
        s.failed,
        vec![
            (acq(1, 1), LockError::NotSemaphore),
            (lea(2, 1, None), LockError::NotSemaphore)
        ]
    );
    assert!(q.is_empty());
    // In a cluster, a lease on a key whose set is elsewhere fails alone.
    let key: &[u8] = b"a{b";
    let mut db = MemoryDb::new(0);
    create(&mut db.semaphore_in_cluster(key), 2, None).unwrap();
    let mut q = WaitQueue::default();
    q.push(lea(1, 1, None));
    q.push(acq(2, 1));
    let s = serve(&mut db.semaphore_in_cluster(key), &mut q);
    assert_eq!(
        s.failed,
        vec![(lea(1, 1, None), LockError::TimeoutCrossSlot)]
    );
    assert_eq!(s.granted, vec![(acq(2, 1), Grant::Acquired { count: 1 })]);
}

#[test]
fn wants_describe_themselves() {
    assert_eq!(Want::Acquire { count: 3 }.describe(), "acquire 3");
    assert_eq!(Want::Lease(claim(2, None)).describe(), "lease 2");
    assert_eq!(Want::Lease(claim(2, None)).count(), 2);
}

#[test]
fn ids_are_hex_to_clients() {
    let id = [0xab; 16];
    assert_eq!(&to_hex(&id), b"abababababababababababababababab");
    assert_eq!(parse_id(b"ABABABABABABABABABABABABABABABAB"), Ok(id));
    assert!(parse_id(b"ab").is_err());
    assert!(parse_id(b"ababababababababababababababab+b").is_err());
    assert_ne!(new_id(), new_id());
}

// ---- property tests ----

/// A queued client of the property test.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Queued(u32, Want);

impl SemaphoreWaiting for Queued {
    fn want(&self) -> Want {
        self.1
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create(i64, Option<i64>),
    Add(i64),
    Acquire(i64, bool),
    Release(i64),
    Lease(i64, Option<i64>, bool),
    /// Return these held ids (indices), plus an id that is not leased.
    Return(Vec<usize>, bool),
    /// A tied connection closes with these held ids and a stranger.
    ReturnIds(Vec<usize>),
    Renew(usize, i64),
    Drain,
    Info,
    /// A queued client's BLOCK ran out.
    Leave(usize),
    /// The clock moves; `true`: the sweep timer fires on time.
    Advance(i64, bool),
    /// A Redisson client's acquire script: n ids, lease ms, client clock skew.
    Redisson(i64, i64, i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..6i64, proptest::option::weighted(0.2, 1..400i64)).prop_map(|(p, t)| Op::Create(p, t)),
        2 => (-3..6i64).prop_map(Op::Add),
        4 => (1..4i64, any::<bool>()).prop_map(|(n, b)| Op::Acquire(n, b)),
        3 => (1..4i64).prop_map(Op::Release),
        4 => (1..4i64, proptest::option::weighted(0.7, 1..200i64), any::<bool>())
            .prop_map(|(n, l, b)| Op::Lease(n, l, b)),
        3 => (proptest::collection::vec(0..8usize, 1..4), proptest::bool::weighted(0.2))
            .prop_map(|(i, bad)| Op::Return(i, bad)),
        1 => proptest::collection::vec(0..8usize, 0..4).prop_map(Op::ReturnIds),
        2 => (0..8usize, 1..200i64).prop_map(|(i, ms)| Op::Renew(i, ms)),
        1 => Just(Op::Drain),
        1 => Just(Op::Info),
        1 => (0..4usize).prop_map(Op::Leave),
        4 => (0..120i64, proptest::bool::weighted(0.7)).prop_map(|(ms, s)| Op::Advance(ms, s)),
        1 => (1..3i64, 1..200i64, -20..20i64).prop_map(|(n, ms, skew)| Op::Redisson(n, ms, skew)),
    ]
}

/// What the test knows independently of the rules.
#[derive(Debug, Default)]
struct Model {
    /// Permits that exist: created + added − drained (+ what expired keys
    /// took with them, see `key_expired`).
    total: i128,
    /// Anonymous permits out with clients: acquired − released.
    anon: i128,
    /// Leased ids and their deadlines (`None`: no lease).
    leased: BTreeMap<PermitId, Option<Millis>>,
    /// The queue, in order.
    queue: VecDeque<Queued>,
    /// The key's deadline, if it has one.
    key_deadline: Option<Millis>,
}

impl Model {
    fn live(&self, id: &PermitId, now: Millis) -> bool {
        self.leased
            .get(id)
            .is_some_and(|d| d.is_none_or(|d| d > now))
    }

    fn lapsed(&self, now: Millis) -> usize {
        self.leased
            .values()
            .filter(|d| d.is_some_and(|d| d <= now))
            .count()
    }

    fn held(&self, i: usize) -> Option<PermitId> {
        let n = self.leased.len();
        (n > 0).then(|| *self.leased.keys().nth(i % n).unwrap())
    }

    /// Ids a rule or a sweep returned as lapsed: each was leased and had
    /// lapsed by now.
    fn expired(&mut self, ids: &[Vec<u8>], now: Millis) -> Result<(), TestCaseError> {
        for m in ids {
            let id: PermitId = m.as_slice().try_into().unwrap();
            let deadline = self.leased.remove(&id);
            prop_assert!(
                deadline.is_some_and(|d| d.is_some_and(|d| d <= now)),
                "{id:?} swept at {now} with deadline {deadline:?}"
            );
        }
        Ok(())
    }

    fn granted(&mut self, grant: &Grant) {
        match grant {
            Grant::Acquired { count } => self.anon += i128::from(*count),
            Grant::Leased(l) => {
                for id in &l.ids {
                    assert!(self.leased.insert(*id, l.deadline).is_none());
                }
            }
        }
    }
}

fn stored(db: &MemoryDb) -> i64 {
    count_at(db).unwrap_or(0)
}

/// What the glue does after a change: serve the queue (after a sweep, when
/// `swept`), and check head-of-line order and that no grant overdraws.
fn serve_and_check(db: &mut MemoryDb, model: &mut Model) -> Result<(), TestCaseError> {
    let mut q = WaitQueue::default();
    for w in &model.queue {
        q.push(*w);
    }
    let served = serve(&mut db.semaphore(K), &mut q);
    prop_assert!(served.failed.is_empty());
    // The granted are the first in line, in order.
    for (w, grant) in &served.granted {
        let head = model.queue.pop_front().unwrap();
        prop_assert_eq!(w, &head);
        match (head.1, grant) {
            (Want::Acquire { count }, Grant::Acquired { count: c }) => prop_assert_eq!(count, *c),
            (Want::Lease(claim), Grant::Leased(l)) => {
                prop_assert_eq!(l.ids.len() as i64, claim.count);
                prop_assert_eq!(l.deadline, claim.lease.map(|l| db.now() + l.millis()));
            }
            _ => prop_assert!(false, "{:?} got {:?}", head, grant),
        }
        model.granted(grant);
    }
    if !served.granted.is_empty() {
        prop_assert!(stored(db) >= 0, "grants overdrew: {}", stored(db));
    }
    // Whoever is first now cannot be served.
    if let Some(head) = model.queue.front() {
        prop_assert!(head.1.count() > stored(db));
    }
    prop_assert_eq!(q.len(), model.queue.len());
    Ok(())
}

fn check_invariants(db: &mut MemoryDb, model: &Model) -> Result<(), TestCaseError> {
    let now = db.now();
    let z = zset(db);
    // Conservation: available + leased (lapsed or not) + anonymous held.
    let sum = i128::from(stored(db)) + z.len() as i128 + model.anon;
    prop_assert_eq!(
        sum,
        model.total,
        "count {} set {} anon {}",
        stored(db),
        z.len(),
        model.anon
    );
    // The lease set is exactly the leased ids, with their deadlines.
    let want: BTreeMap<Vec<u8>, f64> = model
        .leased
        .iter()
        .map(|(id, d)| (id.to_vec(), d.map_or(NO_LEASE as f64, |d| d as f64)))
        .collect();
    prop_assert_eq!(&z, &want);
    // The glue can schedule the next sweep exactly.
    let next = model.leased.values().flatten().min().copied();
    prop_assert_eq!(next_deadline(&mut db.semaphore(K)), Ok(next));
    // INFO agrees (read-only).
    let before = db.clone();
    let got = info(&mut db.semaphore(K)).unwrap();
    prop_assert_eq!(&*db, &before);
    if db.value(K).is_some() || !z.is_empty() {
        let live = model.leased.keys().filter(|id| model.live(id, now)).count();
        let got = got.unwrap();
        prop_assert_eq!(got.available, stored(db) + model.lapsed(now) as i64);
        prop_assert_eq!(got.leased, live);
        prop_assert_eq!(got.ttl, model.key_deadline.map(|d| d - now));
    } else {
        prop_assert_eq!(got, None);
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut db = MemoryDb::new(1_000_000);
    let mut model = Model::default();
    let mut next_waiter = 0u32;
    for op in ops {
        let now = db.now();
        let queued = !model.queue.is_empty();
        let before = db.clone();
        // What an immediate grant could use: the count plus what has lapsed.
        let usable = stored(&db) + model.lapsed(now) as i64;
        match op {
            Op::Create(permits, ttl) => {
                let o = create(&mut db.semaphore(K), permits, ttl.map(px)).unwrap();
                prop_assert_eq!(o.reply, before.value(K).is_none());
                if o.reply {
                    model.total += i128::from(permits);
                    model.key_deadline = ttl.map(|t| now + t);
                }
                model.expired(&o.expired, now)?;
            }
            Op::Add(delta) => {
                let o = add(&mut db.semaphore(K), delta).unwrap();
                prop_assert_eq!(o.reply, usable + delta);
                model.total += i128::from(delta);
                model.expired(&o.expired, now)?;
            }
            Op::Acquire(n, block) => {
                let o = acquire(&mut db.semaphore(K), n, queued).unwrap();
                let want = (!queued && usable >= n).then_some(n);
                prop_assert_eq!(o.reply, want);
                model.expired(&o.expired, now)?;
                if want.is_some() {
                    model.anon += i128::from(n);
                    prop_assert!(stored(&db) >= 0);
                } else if block {
                    next_waiter += 1;
                    model
                        .queue
                        .push_back(Queued(next_waiter, Want::Acquire { count: n }));
                }
            }
            Op::Release(n) => {
                let o = release(&mut db.semaphore(K), n).unwrap();
                prop_assert_eq!(o.reply, usable + n);
                model.anon -= i128::from(n);
                model.expired(&o.expired, now)?;
            }
            Op::Lease(n, lease_ms, block) => {
                let c = claim(n, lease_ms);
                let o = lease(&mut db.semaphore(K), &c, queued).unwrap();
                model.expired(&o.expired, now)?;
                let grant = !queued && usable >= n;
                prop_assert_eq!(o.reply.is_some(), grant);
                if let Some(l) = o.reply {
                    prop_assert_eq!(l.ids.len() as i64, n);
                    prop_assert_eq!(l.deadline, lease_ms.map(|ms| now + ms));
                    model.granted(&Grant::Leased(l));
                    prop_assert!(stored(&db) >= 0);
                } else if block {
                    next_waiter += 1;
                    model.queue.push_back(Queued(next_waiter, Want::Lease(c)));
                }
            }
            Op::Return(picks, bad) => {
                let mut ids: Vec<PermitId> = picks.iter().filter_map(|&i| model.held(i)).collect();
                ids.sort_unstable();
                ids.dedup();
                if bad {
                    ids.push([0xee; 16]);
                }
                if let Ok(ids) = PermitIds::new(ids) {
                    let all_live = ids.iter().all(|id| model.live(id, now));
                    match return_permits(&mut db.semaphore(K), &ids) {
                        Ok(o) => {
                            prop_assert!(all_live);
                            prop_assert_eq!(o.reply, ids.len() as i64);
                            model.expired(&o.expired, now)?;
                            for id in ids.iter() {
                                model.leased.remove(id);
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e, LockError::NotLeased);
                            prop_assert!(!all_live);
                            // Errors change nothing.
                            prop_assert_eq!(&db, &before);
                        }
                    }
                }
            }
            Op::ReturnIds(picks) => {
                let mut ids: Vec<PermitId> = picks.iter().filter_map(|&i| model.held(i)).collect();
                ids.push([0xdd; 16]);
                let o = return_ids(&mut db.semaphore(K), &ids).unwrap();
                let mut want: Vec<PermitId> = ids
                    .iter()
                    .copied()
                    .filter(|id| model.live(id, now))
                    .collect();
                want.sort_unstable();
                want.dedup();
                let mut got = o.reply.clone();
                got.sort_unstable();
                prop_assert_eq!(&got, &want);
                model.expired(&o.expired, now)?;
                for id in &got {
                    model.leased.remove(id);
                }
            }
            Op::Renew(i, ms) => {
                let id = model.held(i).unwrap_or([0xcc; 16]);
                let live = model.live(&id, now);
                let r = renew(&mut db.semaphore(K), &id, px(ms)).unwrap();
                if live {
                    let renewed =
                        matches!(r, Renewed::Renewed { deadline, .. } if deadline == now + ms);
                    prop_assert!(renewed, "{:?}", r);
                    model.leased.insert(id, Some(now + ms));
                } else {
                    prop_assert_eq!(r, Renewed::NotLeased);
                    prop_assert_eq!(&db, &before);
                }
            }
            Op::Drain => {
                let o = drain(&mut db.semaphore(K)).unwrap();
                prop_assert_eq!(o.reply, usable);
                model.total -= i128::from(usable);
                model.expired(&o.expired, now)?;
                prop_assert!(!o.publish);
            }
            Op::Info => {}
            Op::Leave(i) => {
                if !model.queue.is_empty() {
                    let i = i % model.queue.len();
                    model.queue.remove(i);
                }
            }
            Op::Advance(ms, on_time) => {
                db.advance(ms);
                let now = db.now();
                // The key (and the lease set, which took its TTL) expired:
                // what was in them is gone; anonymous permits are still out.
                if model.key_deadline.is_some_and(|d| now > d) {
                    model.total = model.anon;
                    model.leased.clear();
                    model.key_deadline = None;
                    prop_assert_eq!(db.value(K), None);
                    prop_assert_eq!(db.value(T), None);
                }
                if on_time {
                    // The timer fires at the deadline: sweep, then serve.
                    let swept = sweep(&mut db.semaphore(K)).unwrap();
                    model.expired(&swept, now)?;
                    prop_assert_eq!(model.lapsed(now), 0);
                }
            }
            Op::Redisson(n, ms, skew) => {
                // Redisson's acquire: sweep, take if enough, ZADD its ids with
                // its own clock, the key's TTL on the set.
                let swept = sweep(&mut db.semaphore(K)).unwrap();
                model.expired(&swept, now)?;
                if stored(&db) >= n {
                    let mut s = db.semaphore(K);
                    let ids: Vec<PermitId> = (0..n).map(|_| new_id()).collect();
                    s.incr(-n);
                    let deadline = now + skew + ms;
                    s.add_leases(&ids, deadline as f64);
                    if let Some(d) = s.deadline() {
                        s.set_leases_deadline(d);
                    }
                    for id in ids {
                        model.leased.insert(id, Some(deadline));
                    }
                }
            }
        }
        // The glue serves the queue after every change.
        serve_and_check(&mut db, &mut model)?;
        check_invariants(&mut db, &model)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Permits are conserved (available + leased + anonymous held = created
    /// + added − drained), no grant overdraws, head-of-line order holds,
    /// leases come back at their deadline (and not before), each rule's
    /// reply matches an independent model, and errors change nothing.
    #[test]
    fn permits_are_conserved_and_served_in_order(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

// ---- errors change nothing, whatever the keys hold ----

fn key_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        (-5..5i64).prop_map(|n| Some(str_value(&n.to_string()))),
        Just(Some(str_value(&(i64::MAX - 1).to_string()))),
        Just(Some(str_value(&i64::MIN.to_string()))),
        Just(Some(str_value("x"))),
        Just(Some(Value::Other)),
    ]
}

fn set_value() -> impl Strategy<Value = Option<Value>> {
    let member = prop_oneof![
        (0..4u8).prop_map(|b| vec![b; 16]),
        Just(b"not an id".to_vec()),
    ];
    let score = prop_oneof![
        (-10..30i64).prop_map(|s| s as f64),
        Just(NO_LEASE as f64),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(12.5),
    ];
    prop_oneof![
        Just(None),
        proptest::collection::btree_map(member, score.prop_map(Score), 1..4)
            .prop_map(|z| Some(Value::Zset(z))),
        Just(Some(Value::Other)),
    ]
}

#[derive(Debug, Clone)]
enum Call {
    Create(i64),
    Add(i64),
    Acquire(i64, bool),
    Release(i64),
    Lease(i64, Option<i64>, bool),
    Return(Vec<u8>),
    ReturnIds(Vec<u8>),
    Renew(u8, i64),
    Restore(u8, i64),
    Drain,
    Info,
    Sweep,
    NextDeadline,
    Serve(Vec<(i64, bool)>),
}

fn call() -> impl Strategy<Value = Call> {
    let ids = proptest::collection::vec(0..5u8, 1..3);
    prop_oneof![
        (-1..3i64).prop_map(Call::Create),
        prop_oneof![Just(i64::MAX), Just(i64::MIN), -3..3i64].prop_map(Call::Add),
        (0..3i64, any::<bool>()).prop_map(|(n, q)| Call::Acquire(n, q)),
        prop_oneof![Just(i64::MAX), -1..3i64].prop_map(Call::Release),
        (
            0..3i64,
            proptest::option::of(prop_oneof![Just(i64::MAX), 1..20i64]),
            any::<bool>()
        )
            .prop_map(|(n, l, q)| Call::Lease(n, l, q)),
        ids.clone().prop_map(Call::Return),
        ids.prop_map(Call::ReturnIds),
        (0..5u8, prop_oneof![Just(i64::MAX), 1..20i64]).prop_map(|(i, ms)| Call::Renew(i, ms)),
        (0..5u8, -5..30i64).prop_map(|(i, s)| Call::Restore(i, s)),
        Just(Call::Drain),
        Just(Call::Info),
        Just(Call::Sweep),
        Just(Call::NextDeadline),
        proptest::collection::vec((0..3i64, any::<bool>()), 0..3).prop_map(Call::Serve),
    ]
}

fn id_of(b: u8) -> PermitId {
    [b; 16]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever the keys hold (broken counts, other types, odd scores,
    /// counts at the edge of i64), every call either succeeds or fails
    /// having changed nothing; read-only calls never change anything; a
    /// key that was a semaphore stays one.
    #[test]
    fn errors_change_nothing(key in key_value(), set in set_value(), ttl: bool, cluster: bool,
                             at in 0..25i64, c in call()) {
        let mut db = MemoryDb::new(at);
        if let Some(v) = key.clone() {
            db.put(K, v, ttl.then_some(40));
        }
        if let Some(v) = set.clone() {
            db.put(T, v, ttl.then_some(40));
        }
        // `s{` has no valid tag: in a cluster its lease set is elsewhere.
        let k: &[u8] = if cluster { b"s{" } else { K };
        if cluster && let Some(v) = key {
            db.put(k, v, None);
        }
        let before = db.clone();
        fn open<'a>(db: &'a mut MemoryDb, k: &[u8], cluster: bool) -> MemorySemaphore<'a> {
            if cluster { db.semaphore_in_cluster(k) } else { db.semaphore(k) }
        }
        let (result, read_only): (LockResult<()>, bool) = match c {
            Call::Create(p) => (create(&mut open(&mut db, k, cluster), p, None).map(|_| ()), false),
            Call::Add(d) => (add(&mut open(&mut db, k, cluster), d).map(|_| ()), false),
            Call::Acquire(n, q) => (acquire(&mut open(&mut db, k, cluster), n, q).map(|_| ()), false),
            Call::Release(n) => (release(&mut open(&mut db, k, cluster), n).map(|_| ()), false),
            Call::Lease(n, l, q) => {
                let c = LeaseClaim { count: n, lease: l.map(px) };
                (lease(&mut open(&mut db, k, cluster), &c, q).map(|_| ()), false)
            }
            Call::Return(ids) => match PermitIds::new(ids.into_iter().map(id_of).collect()) {
                Ok(ids) => (return_permits(&mut open(&mut db, k, cluster), &ids).map(|_| ()), false),
                Err(_) => (Ok(()), true),
            },
            Call::ReturnIds(ids) => {
                let ids: Vec<PermitId> = ids.into_iter().map(id_of).collect();
                (return_ids(&mut open(&mut db, k, cluster), &ids).map(|_| ()), false)
            }
            Call::Renew(i, ms) => (renew(&mut open(&mut db, k, cluster), &id_of(i), px(ms)).map(|_| ()), false),
            Call::Restore(i, s) => (restore_lease(&mut open(&mut db, k, cluster), &id_of(i), s as f64).map(|_| ()), false),
            Call::Drain => (drain(&mut open(&mut db, k, cluster)).map(|_| ()), false),
            Call::Info => (info(&mut open(&mut db, k, cluster)).map(|_| ()), true),
            Call::Sweep => (sweep(&mut open(&mut db, k, cluster)).map(|_| ()), false),
            Call::NextDeadline => (next_deadline(&mut open(&mut db, k, cluster)).map(|_| ()), true),
            Call::Serve(waiters) => {
                let mut q = WaitQueue::default();
                for (i, (n, leased)) in waiters.into_iter().enumerate() {
                    let want = if leased { Want::Lease(claim(n, None)) } else { Want::Acquire { count: n } };
                    q.push(Queued(i as u32, want));
                }
                let served = serve(&mut open(&mut db, k, cluster), &mut q);
                if served.granted.is_empty() {
                    prop_assert_eq!(&db, &before);
                }
                (Ok(()), false)
            }
        };
        match result {
            Err(_) => prop_assert_eq!(&db, &before),
            Ok(()) if read_only => prop_assert_eq!(&db, &before),
            Ok(()) => {
                // Still a semaphore (or nothing), never a broken one.
                let mut s = open(&mut db, k, cluster);
                if let crate::string::StringValue::Str(v) = s.permits() {
                    let was_int = matches!(before.value(k), Some(Value::Str(b)) if crate::number::parse_i64(b).is_some());
                    let created = before.value(k).is_none();
                    if was_int || created {
                        prop_assert!(crate::number::parse_i64(&v).is_some());
                    }
                }
            }
        }
    }
}
