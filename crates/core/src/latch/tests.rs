//! The latch rules, run against the in-memory store.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::memory::{MemoryDb, Value};

const K: &[u8] = b"l";

fn str_value(s: &str) -> Value {
    Value::Str(s.as_bytes().to_vec())
}

#[test]
fn create_sets_a_count_once() {
    let mut db = MemoryDb::new(0);
    assert_eq!(create(&mut db.latch(K), 3), Ok(true));
    assert_eq!(db.value(K), Some(&str_value("3")));
    assert_eq!(db.deadline(K), None);
    assert_eq!(create(&mut db.latch(K), 5), Ok(false));
    assert_eq!(db.value(K), Some(&str_value("3")));
    // Any string: 0, nothing changes.
    db.put(K, str_value("junk"), None);
    assert_eq!(create(&mut db.latch(K), 5), Ok(false));
    db.put(K, Value::Other, None);
    assert_eq!(create(&mut db.latch(K), 5), Err(LockError::WrongType));
    assert_eq!(
        create(&mut db.latch(b"other"), 0),
        Err(LockError::Invalid(
            "invalid count: must be a positive integer"
        ))
    );
    assert_eq!(db.value(b"other"), None);
}

#[test]
fn count_down_opens_at_zero() {
    let mut db = MemoryDb::new(0);
    create(&mut db.latch(K), 2).unwrap();
    db.put(K, str_value("2"), Some(1_000));
    assert_eq!(count_down(&mut db.latch(K)), Ok(CountedDown::Left(1)));
    assert_eq!(db.value(K), Some(&str_value("1")));
    assert_eq!(db.deadline(K), Some(1_000));
    assert_eq!(is_open(&mut db.latch(K)), Ok(false));
    assert_eq!(count(&mut db.latch(K)), Ok(1));
    assert_eq!(count_down(&mut db.latch(K)), Ok(CountedDown::Opened));
    assert_eq!(CountedDown::Opened.reply(), 0);
    assert_eq!(db.value(K), None);
    assert_eq!(is_open(&mut db.latch(K)), Ok(true));
    assert_eq!(count(&mut db.latch(K)), Ok(0));
    // No latch: 0, nothing changes (no key is created and deleted).
    assert_eq!(count_down(&mut db.latch(K)), Ok(CountedDown::Missing));
    assert_eq!(CountedDown::Missing.reply(), 0);
    assert_eq!(CountedDown::Left(4).reply(), 4);
    assert_eq!(db.value(K), None);
    // A count set to 0 or below by hand is open; COUNTDOWN deletes it.
    for v in ["0", "-5", &i64::MIN.to_string()] {
        db.put(K, str_value(v), None);
        assert_eq!(is_open(&mut db.latch(K)), Ok(true));
        assert_eq!(count_down(&mut db.latch(K)), Ok(CountedDown::Opened));
        assert_eq!(db.value(K), None);
    }
}

#[test]
fn notlatch_and_wrongtype_change_nothing() {
    for (value, want) in [
        (str_value("x"), LockError::NotLatch),
        (str_value("1.0"), LockError::NotLatch),
        (str_value(""), LockError::NotLatch),
        (Value::Other, LockError::WrongType),
    ] {
        let mut db = MemoryDb::new(0);
        db.put(K, value.clone(), Some(50));
        let before = db.clone();
        assert_eq!(count_down(&mut db.latch(K)), Err(want.clone()));
        assert_eq!(is_open(&mut db.latch(K)), Err(want.clone()));
        assert_eq!(count(&mut db.latch(K)), Err(want.clone()));
        assert_eq!(next_deadline(&mut db.latch(K)), Err(want.clone()));
        let mut q = WaitQueue::default();
        q.push(1);
        q.push(2);
        let s = serve(&mut db.latch(K), &mut q);
        assert_eq!(s.failed, vec![(1, want.clone()), (2, want.clone())]);
        assert!(s.granted.is_empty() && q.is_empty());
        assert_eq!(db, before, "{value:?}");
    }
}

#[test]
fn serving_wakes_everyone_when_open() {
    let mut db = MemoryDb::new(0);
    create(&mut db.latch(K), 1).unwrap();
    db.put(K, str_value("1"), Some(100));
    let mut q = WaitQueue::default();
    for w in 1..=3 {
        q.push(w);
    }
    let s = serve(&mut db.latch(K), &mut q);
    assert!(s.granted.is_empty() && s.failed.is_empty());
    assert_eq!(q.len(), 3);
    // Closed with a TTL: the queue is served when the key expires.
    assert_eq!(next_deadline(&mut db.latch(K)), Ok(Some(100)));
    db.advance(101);
    assert_eq!(next_deadline(&mut db.latch(K)), Ok(None));
    let s = serve(&mut db.latch(K), &mut q);
    assert_eq!(s.granted, vec![(1, ()), (2, ()), (3, ())]);
    assert!(q.is_empty());
}

// ---- property test: the rules against a reference model ----

#[derive(Debug, Clone)]
enum Op {
    Create(i64),
    CountDown,
    Await(bool),
    Count,
    /// Someone else's write: DEL, SET (a count, junk), another type.
    Del,
    Set(i64),
    SetJunk,
    SetOther,
    /// Someone gives the key a TTL.
    Expire(i64),
    Leave(usize),
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4i64).prop_map(Op::Create),
        4 => Just(Op::CountDown),
        4 => any::<bool>().prop_map(Op::Await),
        1 => Just(Op::Count),
        1 => Just(Op::Del),
        1 => (-2..4i64).prop_map(Op::Set),
        1 => Just(Op::SetJunk),
        1 => Just(Op::SetOther),
        1 => (1..100i64).prop_map(Op::Expire),
        1 => (0..4usize).prop_map(Op::Leave),
        2 => (0..80i64).prop_map(Op::Advance),
    ]
}

/// What the key holds, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    Missing,
    Count(i64),
    Junk,
    Other,
}

impl Held {
    fn read(self) -> LockResult<Option<i64>> {
        match self {
            Held::Missing => Ok(None),
            Held::Count(n) => Ok(Some(n)),
            Held::Junk => Err(LockError::NotLatch),
            Held::Other => Err(LockError::WrongType),
        }
    }

    fn open(self) -> LockResult<bool> {
        Ok(self.read()?.is_none_or(|n| n <= 0))
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut db = MemoryDb::new(0);
    let mut held = Held::Missing;
    let mut deadline: Option<Millis> = None;
    let mut queue: VecDeque<u32> = VecDeque::new();
    let mut q = WaitQueue::default();
    let mut next = 0u32;
    for op in ops {
        let before = db.clone();
        match op {
            Op::Create(n) => {
                let got = create(&mut db.latch(K), n);
                let want = match held {
                    _ if n < 1 => Err(LockError::Invalid(
                        "invalid count: must be a positive integer",
                    )),
                    Held::Missing => {
                        held = Held::Count(n);
                        deadline = None;
                        Ok(true)
                    }
                    Held::Count(_) | Held::Junk => Ok(false),
                    Held::Other => Err(LockError::WrongType),
                };
                if want.is_err() || want == Ok(false) {
                    prop_assert_eq!(&db, &before);
                }
                prop_assert_eq!(got, want);
            }
            Op::CountDown => {
                let got = count_down(&mut db.latch(K));
                let want = held.read().map(|n| match n {
                    None => CountedDown::Missing,
                    Some(n) if n > 1 => {
                        held = Held::Count(n - 1);
                        CountedDown::Left(n - 1)
                    }
                    Some(_) => {
                        held = Held::Missing;
                        deadline = None;
                        CountedDown::Opened
                    }
                });
                if matches!(want, Err(_) | Ok(CountedDown::Missing)) {
                    prop_assert_eq!(&db, &before);
                }
                prop_assert_eq!(got, want);
            }
            Op::Await(block) => {
                let got = is_open(&mut db.latch(K));
                prop_assert_eq!(&got, &held.open());
                prop_assert_eq!(&db, &before);
                if got == Ok(false) && block {
                    next += 1;
                    q.push(next);
                    queue.push_back(next);
                }
            }
            Op::Count => {
                let got = count(&mut db.latch(K));
                prop_assert_eq!(got, held.read().map(|n| n.unwrap_or(0)));
                prop_assert_eq!(&db, &before);
            }
            Op::Del => {
                db.put(K, Value::Other, None);
                db.latch(K).delete();
                held = Held::Missing;
                deadline = None;
            }
            Op::Set(n) => {
                db.put(K, str_value(&n.to_string()), None);
                held = Held::Count(n);
                deadline = None;
            }
            Op::SetJunk => {
                db.put(K, str_value("junk"), None);
                held = Held::Junk;
                deadline = None;
            }
            Op::SetOther => {
                db.put(K, Value::Other, None);
                held = Held::Other;
                deadline = None;
            }
            Op::Expire(ms) => {
                if let Some(v) = db.value(K).cloned() {
                    let d = db.now() + ms;
                    db.put(K, v, Some(d));
                    deadline = Some(d);
                }
            }
            Op::Leave(i) => {
                if !queue.is_empty() {
                    let i = i % queue.len();
                    let gone = queue.remove(i).unwrap();
                    // Find its ticket: rebuild the queue without it.
                    let mut rebuilt = WaitQueue::default();
                    while let Some((_, w)) = q.pop_front() {
                        if w != gone {
                            rebuilt.push(w);
                        }
                    }
                    q = rebuilt;
                }
            }
            Op::Advance(ms) => {
                db.advance(ms);
                if deadline.is_some_and(|d| db.now() > d) {
                    held = Held::Missing;
                    deadline = None;
                }
            }
        }
        // The key expires when the model says so.
        prop_assert_eq!(db.value(K).is_none(), held == Held::Missing);
        prop_assert_eq!(
            next_deadline(&mut db.latch(K)).ok().flatten(),
            if held.open() == Ok(false) {
                deadline
            } else {
                None
            }
        );
        // The glue serves the queue after every change (and at deadlines).
        let served = serve(&mut db.latch(K), &mut q);
        let waiting: Vec<u32> = queue.drain(..).collect();
        match held.open() {
            // Wake-all: everyone, in order.
            Ok(true) => {
                prop_assert_eq!(
                    served.granted.iter().map(|(w, ())| *w).collect::<Vec<_>>(),
                    waiting
                );
                prop_assert!(served.failed.is_empty());
            }
            Ok(false) => {
                prop_assert!(served.granted.is_empty() && served.failed.is_empty());
                queue.extend(waiting);
            }
            Err(e) => {
                prop_assert!(served.failed.iter().all(|(_, f)| *f == e));
                prop_assert_eq!(
                    served.failed.iter().map(|(w, _)| *w).collect::<Vec<_>>(),
                    waiting
                );
            }
        }
        prop_assert_eq!(q.len(), queue.len());
        // Serving writes nothing.
        let after = db.clone();
        serve(&mut db.latch(K), &mut WaitQueue::<u32>::default());
        prop_assert_eq!(&db, &after);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every reply matches a reference model whatever else writes the key;
    /// waiters are all answered (in order) exactly when the latch is open,
    /// failed when the key is not a latch, untouched while it is closed;
    /// errors and reads change nothing; the deadline to serve at is the
    /// key's while it is closed.
    #[test]
    fn latch_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
