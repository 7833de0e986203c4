//! The lock rules, run against the in-memory store.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::error::LockError;
use super::lease::Lease;
use super::memory::{MemoryDb, Value};
use super::rules::{self, Acquired, Claim, Holder, Released};
use super::store::LockStore;

const K: &[u8] = b"k";

/// ACQUIRE without a token.
fn acquire<S: LockStore<Name = [u8]>>(
    lock: &mut S,
    owner: &[u8],
    lease: Lease,
    queued: bool,
) -> Result<Acquired, LockError> {
    rules::acquire(lock, &Claim::new(owner, lease), queued)
}

fn px(ms: i64) -> Lease {
    Lease::from_millis(ms).unwrap()
}

fn hash(fields: &[(&[u8], &[u8])]) -> Value {
    Value::Hash(
        fields
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

#[test]
fn fresh_acquire_writes_redisson_layout() {
    let mut db = MemoryDb::new(1_000);
    let r = acquire(&mut db.key(K), b"a", px(500), false).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 1,
            token: None
        }
    );
    assert_eq!(db.value(K), Some(&hash(&[(b"a", b"1")])));
    assert_eq!(db.deadline(K), Some(1_500));
}

#[test]
fn reentry_counts_and_resets_the_lease() {
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    db.advance(50);
    let r = acquire(&mut db.key(K), b"a", px(300), false).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 2,
            token: None
        }
    );
    assert_eq!(db.deadline(K), Some(350));
    // The holder re-enters even while others are queued.
    let r = acquire(&mut db.key(K), b"a", px(300), true).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 3,
            token: None
        }
    );
}

#[test]
fn another_owner_is_busy_and_changes_nothing() {
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    let before = db.clone();
    assert_eq!(
        acquire(&mut db.key(K), b"b", px(100), false),
        Ok(Acquired::Busy)
    );
    assert_eq!(db.value(K), before.value(K));
    assert_eq!(db.deadline(K), before.deadline(K));
}

#[test]
fn a_queue_keeps_a_free_lock_from_newcomers() {
    let mut db = MemoryDb::new(0);
    assert_eq!(
        acquire(&mut db.key(K), b"b", px(100), true),
        Ok(Acquired::Busy)
    );
    assert_eq!(db.value(K), None);
}

#[test]
fn release_counts_down_keeping_the_lease_then_frees() {
    let mut db = MemoryDb::new(0);
    for _ in 0..2 {
        acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    }
    db.advance(10);
    assert_eq!(
        rules::release(&mut db.key(K), b"a"),
        Ok(Released::Held { holds: 1 })
    );
    assert_eq!(db.deadline(K), Some(100));
    assert_eq!(rules::release(&mut db.key(K), b"a"), Ok(Released::Freed));
    assert_eq!(db.value(K), None);
    assert_eq!(
        rules::release(&mut db.key(K), b"a"),
        Err(LockError::NotOwner)
    );
}

#[test]
fn release_by_a_stranger_or_after_expiry_is_notowner() {
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    assert_eq!(
        rules::release(&mut db.key(K), b"b"),
        Err(LockError::NotOwner)
    );
    db.advance(101);
    assert_eq!(
        rules::release(&mut db.key(K), b"a"),
        Err(LockError::NotOwner)
    );
}

#[test]
fn renew_only_for_the_holder() {
    let mut db = MemoryDb::new(0);
    assert_eq!(rules::renew(&mut db.key(K), b"a", px(100)), Ok(false));
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    db.advance(60);
    assert_eq!(rules::renew(&mut db.key(K), b"a", px(100)), Ok(true));
    assert_eq!(db.deadline(K), Some(160));
    assert_eq!(rules::renew(&mut db.key(K), b"b", px(999)), Ok(false));
    assert_eq!(db.deadline(K), Some(160));
}

#[test]
fn the_reserved_owner_never_holds() {
    // A hash whose only field is `*` is not a lock, for every command.
    let mut db = MemoryDb::new(0);
    db.put(K, hash(&[(b"*", b"1")]), None);
    let before = db.clone();
    for owner in [&b"*"[..], b"a"] {
        assert_eq!(
            rules::release(&mut db.key(K), owner),
            Err(LockError::NotLock)
        );
        assert_eq!(
            rules::renew(&mut db.key(K), owner, px(5)),
            Err(LockError::NotLock)
        );
        assert_eq!(
            acquire(&mut db.key(K), owner, px(5), false),
            Err(LockError::NotLock)
        );
    }
    assert_eq!(rules::info(&mut db.key(K)), Err(LockError::NotLock));
    assert_eq!(
        rules::force_release(&mut db.key(K)),
        Err(LockError::NotLock)
    );
    assert_eq!(db.value(K), before.value(K));
    // With no such field, `*` simply finds no holder.
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    assert_eq!(
        rules::release(&mut db.key(K), b"*"),
        Err(LockError::NotOwner)
    );
    assert_eq!(rules::renew(&mut db.key(K), b"*", px(5)), Ok(false));
}

#[test]
fn a_field_no_owner_could_be_is_not_a_lock() {
    // An empty field, or one longer than an owner may be, is a hash no
    // LOCK.* call can name: NOTLOCK for every command, nothing changed.
    let long = vec![b'x'; crate::owner::MAX_OWNER_LEN + 1];
    for field in [&b""[..], &long] {
        let mut db = MemoryDb::new(0);
        db.put(K, hash(&[(field, b"1")]), None);
        let before = db.clone();
        assert_eq!(
            acquire(&mut db.key(K), b"a", px(5), false),
            Err(LockError::NotLock)
        );
        assert_eq!(
            rules::release(&mut db.key(K), b"a"),
            Err(LockError::NotLock)
        );
        assert_eq!(
            rules::renew(&mut db.key(K), b"a", px(5)),
            Err(LockError::NotLock)
        );
        assert_eq!(rules::info(&mut db.key(K)), Err(LockError::NotLock));
        assert_eq!(
            rules::force_release(&mut db.key(K)),
            Err(LockError::NotLock)
        );
        assert_eq!(db.value(K), before.value(K));
    }
}

#[test]
fn tokens_grow_from_the_counter_and_the_clock() {
    let mut db = MemoryDb::new(5);
    let claim = |owner: &'static [u8]| Claim {
        owner,
        lease: px(100),
        token: true,
    };
    // No counter yet: the clock floor.
    let r = rules::acquire(&mut db.key(K), &claim(b"a"), false).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 1,
            token: Some(5_000)
        }
    );
    // Re-entry in the same millisecond: counter + 1.
    let r = rules::acquire(&mut db.key(K), &claim(b"a"), false).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 2,
            token: Some(5_001)
        }
    );
    assert_eq!(rules::info(&mut db.key(K)).unwrap().unwrap().token, 5_001);
    // Someone else's increments (RFencedLock) far ahead: + 1.
    db.put(
        b"redisson_lock_token:{k}",
        Value::Str(b"9000000".to_vec()),
        None,
    );
    let r = rules::acquire(&mut db.key(K), &claim(b"a"), false).unwrap();
    assert_eq!(
        r,
        Acquired::Granted {
            holds: 3,
            token: Some(9_000_001)
        }
    );
    // Busy and errors leave the counter alone; so does a call without TOKEN.
    assert_eq!(
        rules::acquire(&mut db.key(K), &claim(b"b"), false),
        Ok(Acquired::Busy)
    );
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    assert_eq!(db.key(K).token(), Ok(9_000_001));
    // A counter INCR would refuse: an error, and nothing written.
    db.put(b"redisson_lock_token:{k}", Value::Str(b"x".to_vec()), None);
    let before = db.clone();
    assert_eq!(
        rules::acquire(&mut db.key(K), &claim(b"a"), false),
        Err(LockError::TokenNotInteger)
    );
    db.put(b"redisson_lock_token:{k}", Value::Other, None);
    assert_eq!(
        rules::acquire(&mut db.key(K), &claim(b"a"), false),
        Err(LockError::WrongType)
    );
    assert_eq!(db.value(K), before.value(K));
    assert_eq!(db.deadline(K), before.deadline(K));
    assert_eq!(rules::info(&mut db.key(K)).unwrap().unwrap().token, 0);
    // Overflow is refused, never wraps.
    db.put(
        b"redisson_lock_token:{k}",
        Value::Str(i64::MAX.to_string().into_bytes()),
        None,
    );
    assert_eq!(
        rules::acquire(&mut db.key(K), &claim(b"a"), false),
        Err(LockError::TokenOverflow)
    );
    assert_eq!(rules::next_token(3, 2), Ok(2_000));
    assert_eq!(rules::next_token(2_000, 2), Ok(2_001));
}

#[test]
fn taking_back_and_restoring() {
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    assert_eq!(
        rules::take_back(&mut db.key(K), b"a"),
        Ok(Some(Released::Held { holds: 1 }))
    );
    assert_eq!(
        rules::restore_deadline(&mut db.key(K), b"a", Some(42)),
        Ok(true)
    );
    assert_eq!(db.deadline(K), Some(42));
    assert_eq!(
        rules::restore_deadline(&mut db.key(K), b"a", None),
        Ok(true)
    );
    assert_eq!(db.deadline(K), None);
    assert_eq!(
        rules::restore_deadline(&mut db.key(K), b"b", Some(7)),
        Ok(false)
    );
    assert_eq!(rules::take_back(&mut db.key(K), b"b"), Ok(None));
    assert_eq!(
        rules::take_back(&mut db.key(K), b"a"),
        Ok(Some(Released::Freed))
    );
    assert_eq!(rules::take_back(&mut db.key(K), b"a"), Ok(None));
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    assert_eq!(rules::release_all(&mut db.key(K), b"b"), Ok(false));
    assert_eq!(rules::release_all(&mut db.key(K), b"a"), Ok(true));
    assert_eq!(db.value(K), None);
}

#[test]
fn force_release_and_info() {
    let mut db = MemoryDb::new(0);
    assert_eq!(rules::info(&mut db.key(K)), Ok(None));
    assert_eq!(rules::force_release(&mut db.key(K)), Ok(None));
    acquire(&mut db.key(K), b"a\0b", px(100), false).unwrap();
    acquire(&mut db.key(K), b"a\0b", px(100), false).unwrap();
    db.advance(30);
    assert_eq!(
        rules::info(&mut db.key(K)),
        Ok(Some(Holder {
            owner: b"a\0b".to_vec(),
            holds: 2,
            ttl: Some(70),
            token: 0
        }))
    );
    assert!(matches!(rules::force_release(&mut db.key(K)), Ok(Some(_))));
    assert_eq!(db.value(K), None);
}

#[test]
fn a_lease_lasts_through_its_deadline_millisecond() {
    // Redis expires a key once now > deadline; the store does the same, so a
    // holder keeps the lock for the whole last millisecond of its lease.
    let mut db = MemoryDb::new(0);
    acquire(&mut db.key(K), b"a", px(100), false).unwrap();
    db.advance(100);
    assert_eq!(rules::renew(&mut db.key(K), b"a", px(5)), Ok(true));
    db.advance(6);
    assert_eq!(rules::renew(&mut db.key(K), b"a", px(5)), Ok(false));
}

#[test]
fn info_reports_no_expiry() {
    let mut db = MemoryDb::new(0);
    db.put(K, hash(&[(b"x", b"3")]), None);
    assert_eq!(rules::info(&mut db.key(K)).unwrap().unwrap().ttl, None);
}

#[test]
fn hold_count_overflow_is_refused_and_changes_nothing() {
    let mut db = MemoryDb::new(0);
    let max = i64::MAX.to_string();
    db.put(K, hash(&[(b"a", max.as_bytes())]), Some(77));
    assert_eq!(
        acquire(&mut db.key(K), b"a", px(100), false),
        Err(LockError::HoldOverflow)
    );
    assert_eq!(db.deadline(K), Some(77));
}

#[test]
fn lease_overflow_is_refused_before_any_change() {
    let mut db = MemoryDb::new(10);
    let r = acquire(&mut db.key(K), b"a", px(i64::MAX), false);
    assert!(matches!(r, Err(LockError::BadLease(_))));
    assert_eq!(db.value(K), None);
}

/// Every command refuses wrong types and non-lock hashes, and changes nothing.
#[test]
fn wrongtype_and_notlock_everywhere() {
    let bad: Vec<(Value, LockError)> = vec![
        (Value::Other, LockError::WrongType),
        (hash(&[(b"a", b"1"), (b"b", b"1")]), LockError::NotLock),
        (hash(&[(b"a", b"0")]), LockError::NotLock),
        (hash(&[(b"a", b"-1")]), LockError::NotLock),
        (hash(&[(b"a", b"01")]), LockError::NotLock),
        (hash(&[(b"a", b"x")]), LockError::NotLock),
        (hash(&[(b"z", b"1.5")]), LockError::NotLock),
    ];
    for (value, want) in bad {
        for who in [&b"a"[..], b"b"] {
            let mut db = MemoryDb::new(0);
            db.put(K, value.clone(), Some(1000));
            let before = db.value(K).cloned();
            let results = [
                acquire(&mut db.key(K), who, px(5), false).map(|_| ()),
                rules::release(&mut db.key(K), who).map(|_| ()),
                rules::renew(&mut db.key(K), who, px(5)).map(|_| ()),
                rules::info(&mut db.key(K)).map(|_| ()),
                rules::force_release(&mut db.key(K)).map(|_| ()),
            ];
            for r in results {
                assert_eq!(r, Err(want.clone()), "{value:?} as {who:?}");
            }
            assert_eq!(db.value(K).cloned(), before);
            assert_eq!(db.deadline(K), Some(1000));
        }
    }
}

/// A Redisson client writes with HINCRBY: LOCK.* must read its locks.
#[test]
fn redisson_written_locks_are_understood() {
    let mut db = MemoryDb::new(0);
    db.put(K, hash(&[(b"uuid-1:42", b"2")]), Some(30_000));
    assert_eq!(
        acquire(&mut db.key(K), b"me", px(5), false),
        Ok(Acquired::Busy)
    );
    assert_eq!(
        rules::release(&mut db.key(K), b"uuid-1:42"),
        Ok(Released::Held { holds: 1 })
    );
    assert_eq!(
        rules::release(&mut db.key(K), b"uuid-1:42"),
        Ok(Released::Freed)
    );
}

// ---- property test: the rules against a straightforward reference model ----

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize, i64, bool),
    Release(usize),
    Renew(usize, i64),
    Force,
    Info,
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 1..200i64, any::<bool>()).prop_map(|(o, l, q)| Op::Acquire(o, l, q)),
        (0..3usize).prop_map(Op::Release),
        (0..3usize, 1..200i64).prop_map(|(o, l)| Op::Renew(o, l)),
        Just(Op::Force),
        Just(Op::Info),
        (0..150i64).prop_map(Op::Advance),
    ]
}

/// The reference: who holds the lock, how often, until when.
#[derive(Debug, Default)]
struct Model {
    held: Option<(usize, i64, i64)>,
}

proptest! {
    #[test]
    fn rules_match_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        const OWNERS: [&[u8]; 3] = [b"a", b"b\0", b"c:1"];
        let mut db = MemoryDb::new(1_000_000);
        let mut model = Model::default();
        for op in ops {
            let now = db.now();
            if model.held.is_some_and(|(_, _, d)| d < now) {
                model.held = None;
            }
            match op {
                Op::Acquire(o, l, queued) => {
                    let got = acquire(&mut db.key(K), OWNERS[o], px(l), queued).unwrap();
                    let want = match model.held {
                        Some((h, n, _)) if h == o => { model.held = Some((o, n + 1, now + l)); Acquired::Granted { holds: n + 1, token: None } }
                        None if !queued => { model.held = Some((o, 1, now + l)); Acquired::Granted { holds: 1, token: None } }
                        _ => Acquired::Busy,
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Release(o) => {
                    let got = rules::release(&mut db.key(K), OWNERS[o]);
                    let want = match model.held {
                        Some((h, n, d)) if h == o && n > 1 => { model.held = Some((o, n - 1, d)); Ok(Released::Held { holds: n - 1 }) }
                        Some((h, _, _)) if h == o => { model.held = None; Ok(Released::Freed) }
                        _ => Err(LockError::NotOwner),
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Renew(o, l) => {
                    let got = rules::renew(&mut db.key(K), OWNERS[o], px(l)).unwrap();
                    let want = match model.held {
                        Some((h, n, _)) if h == o => { model.held = Some((o, n, now + l)); true }
                        _ => false,
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Force => {
                    let got = rules::force_release(&mut db.key(K)).unwrap();
                    prop_assert_eq!(got, model.held.take().map(|(o, _, _)| OWNERS[o].to_vec()));
                }
                Op::Info => {
                    let got = rules::info(&mut db.key(K)).unwrap();
                    let want = model.held.map(|(o, n, d)| Holder { owner: OWNERS[o].to_vec(), holds: n, ttl: Some(d - now), token: 0 });
                    prop_assert_eq!(got, want);
                }
                Op::Advance(ms) => db.advance(ms),
            }
            // Invariant: a present key is always a well-formed lock with a lease.
            if let Some(v) = db.value(K) {
                let Value::Hash(h) = v else { panic!("not a hash") };
                prop_assert_eq!(h.len(), 1);
                prop_assert!(db.deadline(K).is_some());
            }
        }
    }
}
