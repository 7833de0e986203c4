//! Property tests of the module's request parser and lock rules, without a
//! server (the `hashlock-core` crate the module runs).
//!
//! - Parsing: a well-formed request rendered with options in any order and
//!   any letter case parses back to itself, owner, lease and BLOCK alike.
//!   (That any input gets a request or an error, never a panic, is
//!   crates/core's own `request::tests::parsing_never_panics`.)
//! - Rules: random sequences of acquire / release / renew / force-release /
//!   info, foreign writes and clock moves, on the in-memory store, agree at
//!   every step with a small reference model written from the command contract (README, Commands); no step
//!   ever leaves two holders; an error never changes anything; leases are
//!   set exactly from "now".
//! - Queue + rules: with waiters queued, a newcomer never takes a free lock,
//!   and serving the queue grants in arrival order.

use std::collections::{BTreeMap, VecDeque};

use hashlock_reliability::core::error::LockError;
use hashlock_reliability::core::lease::Lease;
use hashlock_reliability::core::memory::{MemoryDb, Value};
use hashlock_reliability::core::queue::WaitQueue;
use hashlock_reliability::core::request::{self, Block, OwnerSpec};
use hashlock_reliability::core::rules::{self, Acquired, Claim, Released};
use hashlock_reliability::core::serve::{self, Grant, Waiting};
use proptest::prelude::*;

// ---- the parser ----

#[derive(Clone, Debug)]
struct Wanted {
    owner: Vec<u8>,
    lease: Option<(bool, i64)>, // (EX?, value)
    block: Option<i64>,
}

fn wanted() -> impl Strategy<Value = Wanted> {
    (
        prop_oneof![
            Just(b"*".to_vec()),
            proptest::collection::vec(any::<u8>(), 1..=1024),
        ],
        proptest::option::of((any::<bool>(), 1i64..=1_000_000_000)),
        proptest::option::of(0i64..=1_000_000_000),
    )
        .prop_map(|(owner, lease, block)| Wanted {
            owner,
            lease,
            block,
        })
}

fn case(word: &str, mask: u32) -> Vec<u8> {
    word.bytes()
        .enumerate()
        .map(|(i, b)| {
            if mask >> (i % 32) & 1 == 1 {
                b.to_ascii_lowercase()
            } else {
                b
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rendered_requests_parse_back(w in wanted(), swap: bool, mask: u32) {
        let mut options: Vec<[Vec<u8>; 2]> = Vec::new();
        if let Some((ex, v)) = w.lease {
            options.push([case(if ex { "EX" } else { "PX" }, mask), v.to_string().into_bytes()]);
        }
        if let Some(b) = w.block {
            options.push([case("BLOCK", mask >> 3), b.to_string().into_bytes()]);
        }
        if swap {
            options.reverse();
        }
        let mut args = vec![b"key".to_vec(), w.owner.clone()];
        args.extend(options.into_iter().flatten());
        let r = request::parse_acquire(&args).expect("well-formed");
        prop_assert_eq!(r.key, &b"key".to_vec());
        match r.owner {
            OwnerSpec::Generate => prop_assert_eq!(&w.owner, b"*"),
            OwnerSpec::Given(o) => prop_assert_eq!(o, &w.owner),
        }
        prop_assert_eq!(r.lease.map(|l| l.millis()), w.lease.map(|(ex, v)| if ex { v * 1000 } else { v }));
        prop_assert_eq!(r.block, w.block.map(|b| Block { timeout_ms: (b > 0).then_some(b) }));
        // RENEW takes the same lease, and refuses BLOCK.
        let mut renew = vec![b"key".to_vec(), w.owner.clone()];
        if let Some((ex, v)) = w.lease {
            renew.extend([case(if ex { "EX" } else { "PX" }, mask), v.to_string().into_bytes()]);
        }
        let parsed = request::parse_renew(&renew).expect("well-formed renew");
        prop_assert_eq!(parsed.lease.map(|l| l.millis()), r.lease.map(|l| l.millis()));
        if w.block.is_some() {
            prop_assert!(request::parse_renew(&args).is_err());
        }
    }
}

// ---- the rules against a reference model ----

const KEYS: [&[u8]; 2] = [b"k0", b"k1"];
const OWNERS: [&[u8]; 3] = [b"a", b"b", b"c"];

#[derive(Clone, Debug)]
enum Step {
    Acquire {
        key: usize,
        owner: usize,
        lease: i64,
        queued: bool,
    },
    Release {
        key: usize,
        owner: usize,
    },
    Renew {
        key: usize,
        owner: usize,
        lease: i64,
    },
    Force {
        key: usize,
    },
    Info {
        key: usize,
    },
    Advance(i64),
    /// Another client writes something that is not a lock.
    PutOther {
        key: usize,
    },
    PutHash {
        key: usize,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let key = 0..KEYS.len();
    let owner = 0..OWNERS.len();
    let lease = prop_oneof![1i64..500, Just(i64::MAX)];
    prop_oneof![
        6 => (key.clone(), owner.clone(), lease.clone(), proptest::bool::weighted(0.2))
            .prop_map(|(key, owner, lease, queued)| Step::Acquire { key, owner, lease, queued }),
        5 => (key.clone(), owner.clone()).prop_map(|(key, owner)| Step::Release { key, owner }),
        3 => (key.clone(), owner.clone(), lease).prop_map(|(key, owner, lease)| Step::Renew { key, owner, lease }),
        1 => key.clone().prop_map(|key| Step::Force { key }),
        2 => key.clone().prop_map(|key| Step::Info { key }),
        3 => (0i64..300).prop_map(Step::Advance),
        1 => key.clone().prop_map(|key| Step::PutOther { key }),
        1 => (key, proptest::collection::vec(
                (prop_oneof![Just(b"a".to_vec()), Just(b"*".to_vec()), Just(b"z".to_vec())],
                 prop_oneof![Just(b"1".to_vec()), Just(b"3".to_vec()), Just(b"0".to_vec()), Just(b"-2".to_vec()), Just(b"01".to_vec()), Just(b"x".to_vec())]),
                0..3))
            .prop_map(|(key, fields)| Step::PutHash { key, fields }),
    ]
}

/// What the contract says a key is, from the lock's point of view.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    Free,
    Held { owner: Vec<u8>, holds: i64 },
    WrongType,
    NotLock,
}

fn shape(db: &MemoryDb, key: &[u8]) -> Shape {
    match db.value(key) {
        None => Shape::Free,
        Some(Value::Other | Value::Str(_) | Value::Zset(_)) => Shape::WrongType,
        Some(Value::Hash(h)) => {
            let positive = |v: &[u8]| {
                let s = std::str::from_utf8(v).ok()?;
                let n: i64 = s.parse().ok()?;
                (n > 0 && n.to_string() == s).then_some(n)
            };
            match h.iter().collect::<Vec<_>>()[..] {
                // The owner `*` never holds a lock.
                [(owner, _)] if owner == b"*" => Shape::NotLock,
                [(owner, v)] => match positive(v) {
                    Some(holds) => Shape::Held {
                        owner: owner.clone(),
                        holds,
                    },
                    None => Shape::NotLock,
                },
                _ => Shape::NotLock,
            }
        }
    }
}

fn shape_error(s: &Shape) -> Option<LockError> {
    match s {
        Shape::WrongType => Some(LockError::WrongType),
        Shape::NotLock => Some(LockError::NotLock),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn rules_follow_the_spec(steps in proptest::collection::vec(step(), 1..80)) {
        let mut db = MemoryDb::new(1_000_000);
        for step in steps {
            let before = db.clone();
            let now = db.now();
            let foreign = matches!(step, Step::PutOther { .. } | Step::PutHash { .. } | Step::Advance(_));
            match step {
                Step::Acquire { key, owner, lease, queued } => {
                    let (k, o) = (KEYS[key], OWNERS[owner]);
                    let s = shape(&db, k);
                    let got = acquire(&mut db.key(k), o, Lease::from_millis(lease).unwrap(), queued);
                    let want = if now.checked_add(lease).is_none() {
                        Err(LockError::BadLease("deadline would overflow"))
                    } else if let Some(e) = shape_error(&s) {
                        Err(e)
                    } else {
                        match &s {
                            Shape::Held { owner, holds } if owner == o => Ok(Acquired::Granted { holds: holds + 1, token: None }),
                            Shape::Held { .. } => Ok(Acquired::Busy),
                            _ if queued => Ok(Acquired::Busy),
                            _ => Ok(Acquired::Granted { holds: 1, token: None }),
                        }
                    };
                    prop_assert_eq!(&got, &want);
                    if let Ok(Acquired::Granted { holds, .. }) = got {
                        prop_assert_eq!(shape(&db, k), Shape::Held { owner: o.to_vec(), holds });
                        prop_assert_eq!(db.deadline(k), Some(now + lease));
                    }
                }
                Step::Release { key, owner } => {
                    let (k, o) = (KEYS[key], OWNERS[owner]);
                    let s = shape(&db, k);
                    let deadline = db.deadline(k);
                    let got = rules::release(&mut db.key(k), o);
                    let want = match &s {
                        _ if shape_error(&s).is_some() => Err(shape_error(&s).unwrap()),
                        Shape::Held { owner, holds } if owner == o && *holds > 1 => Ok(Released::Held { holds: holds - 1 }),
                        Shape::Held { owner, .. } if owner == o => Ok(Released::Freed),
                        _ => Err(LockError::NotOwner),
                    };
                    prop_assert_eq!(&got, &want);
                    match got {
                        Ok(Released::Held { holds }) => {
                            prop_assert_eq!(shape(&db, k), Shape::Held { owner: o.to_vec(), holds });
                            // The lease is left as it was.
                            prop_assert_eq!(db.deadline(k), deadline);
                        }
                        Ok(Released::Freed) => prop_assert_eq!(shape(&db, k), Shape::Free),
                        Err(_) => {}
                    }
                }
                Step::Renew { key, owner, lease } => {
                    let (k, o) = (KEYS[key], OWNERS[owner]);
                    let s = shape(&db, k);
                    let got = rules::renew(&mut db.key(k), o, Lease::from_millis(lease).unwrap());
                    let want = if now.checked_add(lease).is_none() {
                        Err(LockError::BadLease("deadline would overflow"))
                    } else if let Some(e) = shape_error(&s) {
                        Err(e)
                    } else {
                        Ok(matches!(&s, Shape::Held { owner, .. } if owner == o))
                    };
                    prop_assert_eq!(&got, &want);
                    if got == Ok(true) {
                        prop_assert_eq!(db.deadline(k), Some(now + lease));
                        prop_assert_eq!(shape(&db, k), s);
                    }
                }
                Step::Force { key } => {
                    let k = KEYS[key];
                    let s = shape(&db, k);
                    let got = rules::force_release(&mut db.key(k));
                    let want = match shape_error(&s) {
                        Some(e) => Err(e),
                        // The owner it removed, if any.
                        None => Ok(match &s {
                            Shape::Held { owner, .. } => Some(owner.clone()),
                            _ => None,
                        }),
                    };
                    prop_assert_eq!(&got, &want);
                    if got.is_ok() {
                        prop_assert_eq!(shape(&db, k), Shape::Free);
                    }
                }
                Step::Info { key } => {
                    let k = KEYS[key];
                    let s = shape(&db, k);
                    let got = rules::info(&mut db.key(k));
                    match (&got, &s) {
                        (Err(e), _) => prop_assert_eq!(Some(e.clone()), shape_error(&s)),
                        (Ok(None), Shape::Free) => {}
                        (Ok(Some(h)), Shape::Held { owner, holds }) => {
                            prop_assert_eq!(&h.owner, owner);
                            prop_assert_eq!(h.holds, *holds);
                            prop_assert_eq!(h.ttl, db.deadline(k).map(|d| d - now));
                        }
                        other => prop_assert!(false, "info {:?}", other),
                    }
                }
                Step::Advance(ms) => db.advance(ms),
                Step::PutOther { key } => db.put(KEYS[key], Value::Other, None),
                Step::PutHash { key, fields } => {
                    let h: BTreeMap<Vec<u8>, Vec<u8>> = fields.into_iter().collect();
                    db.put(KEYS[key], Value::Hash(h), Some(now + 1000));
                }
            }
            // No lock call ever leaves a multi-field hash it did not find.
            for k in KEYS.iter().filter(|_| !foreign) {
                if let (Some(Value::Hash(h)), Some(Value::Hash(h0))) = (db.value(k), before.value(k))
                    && h.len() > 1
                {
                    prop_assert_eq!(h, h0, "a lock call produced a multi-field hash");
                }
            }
        }
    }

    #[test]
    fn errors_change_nothing(steps in proptest::collection::vec(step(), 1..60), probe in step()) {
        let mut db = MemoryDb::new(5_000);
        for s in steps {
            let _ = apply(&mut db, s);
        }
        let before = db.clone();
        if apply(&mut db, probe).is_err() {
            for k in KEYS {
                // (An expired key may be dropped on access: compare live keys.)
                prop_assert_eq!(db.value(k), before.value(k));
                if before.value(k).is_some() {
                    prop_assert_eq!(db.deadline(k), before.deadline(k));
                }
            }
        }
    }

    /// With waiters queued, newcomers are refused and the queue is served
    /// in arrival order by the module's own serve policy (`core::serve`),
    /// whatever the interleaving of arrivals, leavers, releases and lapsed
    /// leases.
    #[test]
    fn queue_is_served_in_order(events in proptest::collection::vec(0u8..6, 1..120)) {
        let mut db = MemoryDb::new(0);
        let mut q: WaitQueue<W> = WaitQueue::default();
        let mut order: VecDeque<u32> = VecDeque::new();
        let mut tickets = Vec::new();
        let mut next = 0u32;
        let mut holder: Option<u32> = None;
        const LEASE: i64 = 50;
        let lease = Lease::from_millis(LEASE).unwrap();
        for e in events {
            match e {
                // A newcomer: takes the lock only if it is free and nobody waits.
                0 | 1 => {
                    next += 1;
                    let me = W::new(next);
                    let got = acquire(&mut db.key(b"k"), &me.owner, lease, !q.is_empty()).unwrap();
                    match got {
                        Acquired::Granted { holds: 1, token: None } => {
                            prop_assert!(holder.is_none() && q.is_empty(), "newcomer barged in");
                            holder = Some(next);
                        }
                        Acquired::Busy => {
                            prop_assert!(holder.is_some() || !q.is_empty());
                            tickets.push((next, q.push(me)));
                            order.push_back(next);
                        }
                        other => prop_assert!(false, "{:?}", other),
                    }
                }
                // The holder releases; the queue is served.
                2 => if let Some(h) = holder.take() {
                    prop_assert_eq!(rules::release(&mut db.key(b"k"), &W::new(h).owner[..]), Ok(Released::Freed));
                    holder = served(&mut db, &mut q, &mut order, lease)?;
                },
                // A waiter leaves (timeout, disconnect).
                3 => if let Some((id, t)) = tickets.pop() && q.remove(t).is_some() {
                    order.retain(|w| *w != id);
                },
                // The lease lapses (the holder crashed); the deadline serves the queue.
                4 => {
                    db.advance(LEASE + 1);
                    if holder.is_some() {
                        prop_assert_eq!(db.value(b"k"), None);
                        holder = None;
                    }
                    let s = served(&mut db, &mut q, &mut order, lease)?;
                    holder = s.or(holder);
                }
                // Time passes well within the lease.
                _ => db.advance(1),
            }
            // One holder at most, and it is the one the store says.
            let stored = db.value(b"k").is_some();
            prop_assert_eq!(stored, holder.is_some());
        }
    }
}

/// A queued client of the queue test.
#[derive(Debug)]
struct W {
    id: u32,
    owner: Vec<u8>,
}

impl W {
    fn new(id: u32) -> W {
        W {
            id,
            owner: id.to_string().into_bytes(),
        }
    }
}

impl Waiting<[u8]> for W {
    fn claim(&self) -> Claim<'_, [u8]> {
        Claim::new(&self.owner, Lease::from_millis(50).unwrap())
    }
}

/// Serves the queue with the module's policy; checks it served the head.
fn served(
    db: &mut MemoryDb,
    q: &mut WaitQueue<W>,
    order: &mut VecDeque<u32>,
    _lease: Lease,
) -> Result<Option<u32>, TestCaseError> {
    let s = serve::serve(&mut db.key(b"k"), q);
    prop_assert!(s.failed.is_empty());
    Ok(match s.granted {
        Some((w, grant)) => {
            prop_assert_eq!(Some(w.id), order.pop_front(), "served out of order");
            prop_assert_eq!(
                grant,
                Grant {
                    holds: 1,
                    token: None
                }
            );
            Some(w.id)
        }
        None => {
            prop_assert!(q.is_empty() || db.value(b"k").is_some());
            None
        }
    })
}

/// ACQUIRE without a token.
fn acquire(
    lock: &mut hashlock_reliability::core::memory::MemoryLock<'_>,
    owner: &[u8],
    lease: Lease,
    queued: bool,
) -> Result<Acquired, LockError> {
    rules::acquire(lock, &Claim::new(owner, lease), queued)
}

fn apply(db: &mut MemoryDb, s: Step) -> Result<(), LockError> {
    let lease = |ms: i64| Lease::from_millis(ms).unwrap();
    match s {
        Step::Acquire {
            key,
            owner,
            lease: l,
            queued,
        } => acquire(&mut db.key(KEYS[key]), OWNERS[owner], lease(l), queued).map(|_| ()),
        Step::Release { key, owner } => {
            rules::release(&mut db.key(KEYS[key]), OWNERS[owner]).map(|_| ())
        }
        Step::Renew {
            key,
            owner,
            lease: l,
        } => rules::renew(&mut db.key(KEYS[key]), OWNERS[owner], lease(l)).map(|_| ()),
        Step::Force { key } => rules::force_release(&mut db.key(KEYS[key])).map(|_| ()),
        Step::Info { key } => rules::info(&mut db.key(KEYS[key])).map(|_| ()),
        Step::Advance(ms) => {
            db.advance(ms);
            Ok(())
        }
        Step::PutOther { key } => {
            db.put(KEYS[key], Value::Other, None);
            Ok(())
        }
        Step::PutHash { key, fields } => {
            let now = db.now();
            db.put(
                KEYS[key],
                Value::Hash(fields.into_iter().collect()),
                Some(now + 1000),
            );
            Ok(())
        }
    }
}
