//! LOCK.MACQUIRE / LOCK.MRELEASE: several ordinary locks (each key an
//! RLock-layout hash, exactly as LOCK.* keeps it), taken or released all at
//! once or not at all. The rules read and check every key first (WRONGTYPE
//! and NOTLOCK on any key, overflow), decide, and only then write: nil,
//! NOTOWNER and errors leave every key as it was.
//!
//! Waiting is the glue's: a multi-key waiter sits in the queue of each of
//! its keys, in one arrival order, and is granted (with `acquire` and no
//! key counted as queued) when it heads every one of those queues.

use std::collections::BTreeMap;

use super::command::Command;
use super::error::{LockError, LockResult};
use super::lease::Lease;
use super::number::parse_i64;
use super::owner;
use super::request::{Block, Replicas, parse_options};
use super::rules::{self, Claim, Holding, Released};
use super::store::LockStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MAcquireRequest<'a, A> {
    /// The keys, in the order given (replies follow it).
    pub keys: &'a [A],
    pub owner: &'a A,
    pub lease: Option<Lease>,
    pub block: Option<Block>,
    pub keepalive: bool,
    pub replicas: Option<Replicas>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MReleaseRequest<'a, A> {
    pub keys: &'a [A],
    pub owner: &'a A,
}

/// `numkeys key [key ...] owner rest...`: the keys, the owner, the rest.
fn split<A: AsRef<[u8]>>(command: Command, args: &[A]) -> LockResult<(&[A], &A, &[A])> {
    let [numkeys, rest @ ..] = args else {
        return Err(LockError::Arity(command));
    };
    let n = match parse_i64(numkeys.as_ref()) {
        Some(n) if n > 0 => n,
        Some(_) => return Err(LockError::NumKeys("numkeys must be positive")),
        None => {
            return Err(LockError::NumKeys(
                "numkeys is not an integer or out of range",
            ));
        }
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > rest.len() {
        return Err(LockError::NumKeys(
            "numkeys is greater than the number of keys given",
        ));
    }
    let (keys, rest) = rest.split_at(n);
    let [owner, rest @ ..] = rest else {
        return Err(LockError::Arity(command));
    };
    let mut sorted: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(LockError::DuplicateKey);
    }
    let owner_bytes = owner.as_ref();
    owner::validate(owner_bytes)?;
    if owner::is_reserved(owner_bytes) {
        return Err(LockError::OwnerRequired);
    }
    Ok((keys, owner, rest))
}

/// `LOCK.MACQUIRE numkeys key [key ...] owner [PX ms | EX s] [BLOCK ms]
/// [KEEPALIVE] [REPLICAS n ms]` (arguments after the command name). A
/// `numkeys` smaller than the keys given makes the next key the owner and
/// the owner an unknown option: a syntax error.
pub fn parse_macquire<A: AsRef<[u8]>>(args: &[A]) -> LockResult<MAcquireRequest<'_, A>> {
    let (keys, owner, options) = split(Command::MAcquire, args)?;
    let o = parse_options(Command::MAcquire, options)?;
    Ok(MAcquireRequest {
        keys,
        owner,
        lease: o.lease,
        block: o.block,
        keepalive: o.keepalive,
        replicas: o.replicas,
    })
}

/// `LOCK.MRELEASE numkeys key [key ...] owner`.
pub fn parse_mrelease<A: AsRef<[u8]>>(args: &[A]) -> LockResult<MReleaseRequest<'_, A>> {
    let (keys, owner, rest) = split(Command::MRelease, args)?;
    parse_options(Command::MRelease, rest)?;
    Ok(MReleaseRequest { keys, owner })
}

/// Reads every lock as `owner` sees it, erroring on the first key that is
/// not a lock: the first pass of every multi-key rule.
fn holdings<S: LockStore>(locks: &mut [S], owner: &S::Name) -> LockResult<Vec<Holding>> {
    locks
        .iter_mut()
        .map(|lock| rules::holding(lock, owner))
        .collect()
}

/// LOCK.MACQUIRE without waiting: every key taken (a fresh hold: 1) or
/// re-entered (count + 1), each with the lease from now, and the hold
/// counts returned in key order; or `None` and nothing written when any
/// key is held by another owner, or is free but has waiters queued
/// (`queued[i]`, for key `i`) and is not the owner's already. WRONGTYPE /
/// NOTLOCK on any key and hold-count or lease overflow are errors, before
/// any write. The claim's `token` must be false (MACQUIRE issues none).
pub fn acquire<S: LockStore>(
    locks: &mut [S],
    claim: &Claim<'_, S::Name>,
    queued: &[bool],
) -> LockResult<Option<Vec<i64>>> {
    if claim.token {
        return Err(LockError::Syntax("TOKEN is not taken by LOCK.MACQUIRE"));
    }
    // One deadline for the whole set, from the earliest clock any key was
    // opened at: keys opened across a millisecond boundary would otherwise
    // lapse one by one (a partial hold at the end of the lease).
    let now = locks
        .iter()
        .map(|lock| lock.now())
        .min()
        .unwrap_or_default();
    let deadline = claim.lease.deadline_from(now)?;
    let held = holdings(locks, claim.owner)?;
    let mut counts = Vec::with_capacity(held.len());
    let mut busy = false;
    for (i, h) in held.iter().enumerate() {
        match *h {
            Holding::Mine { holds } => {
                counts.push(holds.checked_add(1).ok_or(LockError::HoldOverflow)?)
            }
            Holding::Free if !queued.get(i).copied().unwrap_or(false) => counts.push(1),
            Holding::Free | Holding::Theirs => busy = true,
        }
    }
    if busy {
        return Ok(None);
    }
    for (lock, &holds) in locks.iter_mut().zip(&counts) {
        lock.set_holds(claim.owner, holds);
        lock.set_deadline(deadline);
    }
    Ok(Some(counts))
}

/// LOCK.MRELEASE: one hold of every key dropped (a key at 0 is deleted:
/// hand it on or publish its unlock, as LOCK.RELEASE does), the outcome
/// per key in key order; NOTOWNER and nothing written unless the owner
/// holds every key. WRONGTYPE / NOTLOCK on any key come first.
pub fn release<S: LockStore>(locks: &mut [S], owner: &S::Name) -> LockResult<Vec<Released>> {
    let held = holdings(locks, owner)?;
    let mut counts = Vec::with_capacity(held.len());
    for h in held {
        match h {
            Holding::Mine { holds } => counts.push(holds),
            Holding::Free | Holding::Theirs => return Err(LockError::NotOwner),
        }
    }
    Ok(locks
        .iter_mut()
        .zip(counts)
        .map(|(lock, holds)| {
            if holds > 1 {
                lock.set_holds(owner, holds - 1);
                Released::Held { holds: holds - 1 }
            } else {
                lock.delete();
                Released::Freed
            }
        })
        .collect())
}

/// Takes back what a MACQUIRE grant added (its replicas did not
/// acknowledge it in time, or its client vanished): one hold of each key
/// the owner still holds (`None` for a key it no longer holds). A key
/// error stops before any write.
pub fn take_back<S: LockStore>(
    locks: &mut [S],
    owner: &S::Name,
) -> LockResult<Vec<Option<Released>>> {
    let held = holdings(locks, owner)?;
    Ok(locks
        .iter_mut()
        .zip(held)
        .map(|(lock, h)| match h {
            Holding::Mine { holds } if holds > 1 => {
                lock.set_holds(owner, holds - 1);
                Some(Released::Held { holds: holds - 1 })
            }
            Holding::Mine { .. } => {
                lock.delete();
                Some(Released::Freed)
            }
            Holding::Free | Holding::Theirs => None,
        })
        .collect())
}

/// The keys grouped by cluster slot: LOCK.MACQUIRE / LOCK.MRELEASE answer
/// CROSSSLOT in cluster mode unless there is one group (`slot::all_same_slot`).
pub fn slots<A: AsRef<[u8]>>(keys: &[A]) -> BTreeMap<u16, Vec<usize>> {
    let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        groups
            .entry(super::slot::key_slot(k.as_ref()))
            .or_default()
            .push(i);
    }
    groups
}

/// CROSSSLOT unless every key hashes to one slot.
pub fn check_same_slot<A: AsRef<[u8]>>(keys: &[A]) -> LockResult<()> {
    match super::slot::all_same_slot(keys) {
        true => Ok(()),
        false => Err(LockError::KeysCrossSlot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryDb, Value};
    use proptest::prelude::*;

    fn args(s: &str) -> Vec<Vec<u8>> {
        s.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn parse_forms() {
        let a = args("2 a b me PX 100 block 0 KEEPALIVE replicas 1 10");
        let r = parse_macquire(&a).unwrap();
        assert_eq!(r.keys, &a[1..3]);
        assert_eq!(r.owner, &b"me".to_vec());
        assert_eq!(r.lease, Some(Lease::from_millis(100).unwrap()));
        assert_eq!(r.block, Some(Block { timeout_ms: None }));
        assert!(r.keepalive);
        assert_eq!(r.replicas.unwrap().count, 1);
        let a = args("1 k me");
        let r = parse_macquire(&a).unwrap();
        assert_eq!(r.keys.len(), 1);
        assert!(r.lease.is_none() && r.block.is_none() && !r.keepalive);
        let a = args("3 a b c me");
        let r = parse_mrelease(&a).unwrap();
        assert_eq!((r.keys.len(), r.owner), (3, &b"me".to_vec()));
    }

    #[test]
    fn parse_errors() {
        let m = Command::MAcquire;
        let cases = [
            ("", LockError::Arity(m)),
            (
                "1",
                LockError::NumKeys("numkeys is greater than the number of keys given"),
            ),
            ("1 k", LockError::Arity(m)),
            ("2 a b", LockError::Arity(m)),
            ("0 me", LockError::NumKeys("numkeys must be positive")),
            ("-1 a me", LockError::NumKeys("numkeys must be positive")),
            (
                "x a me",
                LockError::NumKeys("numkeys is not an integer or out of range"),
            ),
            (
                "01 a me",
                LockError::NumKeys("numkeys is not an integer or out of range"),
            ),
            (
                "99999999999999999999 a me",
                LockError::NumKeys("numkeys is not an integer or out of range"),
            ),
            // Three keys and no owner.
            ("3 a b me", LockError::Arity(m)),
            ("2 a a me", LockError::DuplicateKey),
            ("3 a b a me", LockError::DuplicateKey),
            ("2 a b *", LockError::OwnerRequired),
            // numkeys short of the keys: the extra key is the owner, the
            // owner an unknown option.
            (
                "1 a b me",
                LockError::Syntax(
                    "unknown option, expected PX ms, EX s, BLOCK ms, KEEPALIVE or REPLICAS n ms",
                ),
            ),
            (
                "1 a me TOKEN",
                LockError::Syntax(
                    "unknown option, expected PX ms, EX s, BLOCK ms, KEEPALIVE or REPLICAS n ms",
                ),
            ),
            (
                "1 a me PX 0",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            ("1 a me PX", LockError::Syntax("option without a value")),
        ];
        for (input, want) in cases {
            assert_eq!(parse_macquire(&args(input)).err(), Some(want), "{input}");
        }
        let r = Command::MRelease;
        let cases = [
            ("", LockError::Arity(r)),
            ("1 k", LockError::Arity(r)),
            (
                "2 a b me x",
                LockError::Syntax("this command takes no options"),
            ),
            (
                "1 a b me",
                LockError::Syntax("this command takes no options"),
            ),
            ("2 a a me", LockError::DuplicateKey),
            ("1 a *", LockError::OwnerRequired),
            ("0 me", LockError::NumKeys("numkeys must be positive")),
        ];
        for (input, want) in cases {
            assert_eq!(parse_mrelease(&args(input)).err(), Some(want), "{input}");
        }
        let empty = vec![b"1".to_vec(), b"k".to_vec(), vec![]];
        assert_eq!(parse_macquire(&empty).err(), Some(LockError::BadOwner));
        // A huge numkeys is refused without allocating for it.
        let a = args("9223372036854775807 a me");
        assert!(matches!(parse_macquire(&a), Err(LockError::NumKeys(_))));
    }

    #[test]
    fn slots_and_crossslot() {
        assert_eq!(check_same_slot(&[b"{t}a", b"{t}b"]), Ok(()));
        assert_eq!(
            check_same_slot(&[&b"a"[..], b"b"]),
            Err(LockError::KeysCrossSlot)
        );
        let groups = slots(&[&b"{t}a"[..], b"x", b"{t}b"]);
        assert_eq!(groups.len(), 2);
        assert!(groups.values().any(|v| v == &vec![0, 2]));
    }

    // ---- the rules, over one MemoryDb per key (one clock for all) ----

    const KEYS: [&[u8]; 4] = [b"k0", b"k1", b"k2", b"k3"];

    fn px(ms: i64) -> Lease {
        Lease::from_millis(ms).unwrap()
    }

    fn dbs(n: usize, now: i64) -> Vec<MemoryDb> {
        vec![MemoryDb::new(now); n]
    }

    fn macq(
        dbs: &mut [MemoryDb],
        owner: &[u8],
        ms: i64,
        queued: &[bool],
    ) -> LockResult<Option<Vec<i64>>> {
        let mut locks: Vec<_> = dbs.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
        acquire(&mut locks, &Claim::new(owner, px(ms)), queued)
    }

    fn mrel(dbs: &mut [MemoryDb], owner: &[u8]) -> LockResult<Vec<Released>> {
        let mut locks: Vec<_> = dbs.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
        release(&mut locks, owner)
    }

    fn state(dbs: &[MemoryDb]) -> Vec<(Option<Value>, Option<i64>)> {
        dbs.iter()
            .zip(KEYS)
            .map(|(db, k)| (db.value(k).cloned(), db.deadline(k)))
            .collect()
    }

    #[test]
    fn all_or_nothing() {
        let mut d = dbs(3, 0);
        assert_eq!(
            macq(&mut d, b"a", 100, &[false; 3]),
            Ok(Some(vec![1, 1, 1]))
        );
        assert_eq!(macq(&mut d, b"a", 200, &[true; 3]), Ok(Some(vec![2, 2, 2])));
        assert!(
            d.iter()
                .zip(KEYS)
                .all(|(db, k)| db.deadline(k) == Some(200))
        );
        // b wants k2 and a fourth free key: nothing at all.
        let mut e = vec![d[2].clone(), MemoryDb::new(0)];
        let before = state(&e);
        let mut locks: Vec<_> = e
            .iter_mut()
            .zip([KEYS[2], KEYS[3]])
            .map(|(db, k)| db.key(k))
            .collect();
        assert_eq!(
            acquire(&mut locks, &Claim::new(&b"b"[..], px(5)), &[false; 2]),
            Ok(None)
        );
        drop(locks);
        assert_eq!(state(&e), before);
        // A free key with waiters is theirs.
        let mut f = dbs(2, 0);
        assert_eq!(macq(&mut f, b"b", 5, &[false, true]), Ok(None));
        assert_eq!(state(&f), vec![(None, None), (None, None)]);
        // Release: all or NOTOWNER (a lost k1: NOTOWNER, k0 and k2 kept).
        d[1].key(KEYS[1]).delete();
        let before = state(&d);
        assert_eq!(mrel(&mut d, b"a"), Err(LockError::NotOwner));
        assert_eq!(state(&d), before);
        let mut d = dbs(2, 0);
        macq(&mut d, b"a", 100, &[false; 2]).unwrap();
        let mut locks: Vec<_> = d.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
        rules::acquire(&mut locks[0], &Claim::new(&b"a"[..], px(100)), false).unwrap();
        drop(locks);
        assert_eq!(
            mrel(&mut d, b"a"),
            Ok(vec![Released::Held { holds: 1 }, Released::Freed])
        );
        assert_eq!(mrel(&mut d, b"a"), Err(LockError::NotOwner));
    }

    /// The glue opens the keys of one call one after another, each reading
    /// the server clock as it is opened: a call that straddles a
    /// millisecond sees two clocks. Its keys must still share one deadline,
    /// or the set lapses key by key and is partly held for a moment (R8's
    /// observer saw it under load; 5000 keys in one call show it on an idle
    /// server).
    #[test]
    fn one_deadline_for_the_set_whatever_clock_each_key_was_opened_at() {
        let mut d = vec![
            MemoryDb::new(1000),
            MemoryDb::new(1001),
            MemoryDb::new(1001),
        ];
        assert_eq!(
            macq(&mut d, b"a", 100, &[false; 3]),
            Ok(Some(vec![1, 1, 1]))
        );
        let deadlines: Vec<Option<i64>> =
            d.iter().zip(KEYS).map(|(db, k)| db.deadline(k)).collect();
        assert_eq!(deadlines, vec![Some(1100); 3]);
        // A re-entry too (clocks 1010, 1011, 1011).
        for db in &mut d {
            db.advance(10);
        }
        assert_eq!(macq(&mut d, b"a", 100, &[true; 3]), Ok(Some(vec![2, 2, 2])));
        let deadlines: Vec<Option<i64>> =
            d.iter().zip(KEYS).map(|(db, k)| db.deadline(k)).collect();
        assert_eq!(deadlines, vec![Some(1110); 3]);
    }

    #[test]
    fn errors_on_any_key_come_first_and_change_nothing() {
        for (bad, want) in [
            (Value::Other, LockError::WrongType),
            (
                Value::Hash(
                    [
                        (b"x".to_vec(), b"1".to_vec()),
                        (b"y".to_vec(), b"1".to_vec()),
                    ]
                    .into(),
                ),
                LockError::NotLock,
            ),
        ] {
            let mut d = dbs(3, 0);
            // k0 held by another owner, k2 not a lock.
            let mut l = d[0].key(KEYS[0]);
            rules::acquire(&mut l, &Claim::new(&b"z"[..], px(100)), false).unwrap();
            d[2].put(KEYS[2], bad.clone(), None);
            let before = state(&d);
            assert_eq!(macq(&mut d, b"a", 100, &[false; 3]), Err(want.clone()));
            assert_eq!(mrel(&mut d, b"z"), Err(want.clone()));
            let mut locks: Vec<_> = d.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
            assert_eq!(take_back(&mut locks, &b"z"[..]), Err(want.clone()));
            drop(locks);
            assert_eq!(state(&d), before);
        }
        // Overflow on one key: nothing written anywhere.
        let mut d = dbs(2, 0);
        d[1].put(
            KEYS[1],
            Value::Hash([(b"a".to_vec(), i64::MAX.to_string().into_bytes())].into()),
            Some(9),
        );
        let before = state(&d);
        assert_eq!(
            macq(&mut d, b"a", 100, &[false; 2]),
            Err(LockError::HoldOverflow)
        );
        assert_eq!(state(&d), before);
        d.iter_mut().for_each(|db| db.advance(10));
        assert!(matches!(
            macq(&mut d, b"a", i64::MAX, &[false; 2]),
            Err(LockError::BadLease(_))
        ));
        let mut locks: Vec<_> = d.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
        let c = Claim {
            owner: &b"a"[..],
            lease: px(5),
            token: true,
        };
        assert!(matches!(
            acquire(&mut locks, &c, &[false; 2]),
            Err(LockError::Syntax(_))
        ));
    }

    #[test]
    fn take_back_drops_one_hold_where_still_held() {
        let mut d = dbs(3, 0);
        macq(&mut d, b"a", 100, &[false; 3]).unwrap();
        macq(&mut d, b"a", 100, &[false; 3]).unwrap();
        d[2].advance(101);
        let mut locks: Vec<_> = d.iter_mut().zip(KEYS).map(|(db, k)| db.key(k)).collect();
        assert_eq!(
            take_back(&mut locks, &b"a"[..]),
            Ok(vec![
                Some(Released::Held { holds: 1 }),
                Some(Released::Held { holds: 1 }),
                None
            ])
        );
    }

    #[test]
    fn stores_borrowed_mutably_work_too() {
        // The glue passes keys it has open already as `&mut` stores.
        let mut d = dbs(2, 0);
        let (a, b) = d.split_at_mut(1);
        let mut first = a[0].key(KEYS[0]);
        let mut second = b[0].key(KEYS[1]);
        let mut locks = vec![&mut first, &mut second];
        assert_eq!(
            acquire(&mut locks, &Claim::new(&b"a"[..], px(10)), &[false; 2]),
            Ok(Some(vec![1, 1]))
        );
        assert_eq!(
            release(&mut locks, &b"a"[..]),
            Ok(vec![Released::Freed, Released::Freed])
        );
    }

    // ---- properties ----

    #[derive(Debug, Clone)]
    enum Pre {
        Free,
        Mine(i64),
        Theirs,
    }

    fn pre() -> impl Strategy<Value = Pre> {
        prop_oneof![
            Just(Pre::Free),
            (1..4i64).prop_map(Pre::Mine),
            Just(Pre::Theirs)
        ]
    }

    fn setup(pres: &[Pre]) -> Vec<MemoryDb> {
        let mut d = dbs(pres.len(), 1_000);
        for ((db, k), p) in d.iter_mut().zip(KEYS).zip(pres) {
            let field: (&[u8], i64) = match p {
                Pre::Free => continue,
                Pre::Mine(n) => (b"me", *n),
                Pre::Theirs => (b"other", 1),
            };
            db.put(
                k,
                Value::Hash([(field.0.to_vec(), field.1.to_string().into_bytes())].into()),
                Some(1_500),
            );
        }
        d
    }

    proptest! {
        // MACQUIRE changes every key or none, and when it changes them it
        // does on each exactly what LOCK.ACQUIRE alone would; nil exactly
        // when one key alone would refuse.
        #[test]
        fn macquire_is_atomic_and_equals_single_key_rules(
            pres in proptest::collection::vec(pre(), 1..=4),
            queued in proptest::collection::vec(any::<bool>(), 4),
            ms in 1..500i64,
        ) {
            let mut d = setup(&pres);
            let before = state(&d);
            let mut single = d.clone();
            let one_by_one: Vec<_> = single.iter_mut().zip(KEYS).zip(&queued)
                .map(|((db, k), &q)| rules::acquire(&mut db.key(k), &Claim::new(&b"me"[..], px(ms)), q).unwrap())
                .collect();
            let all_granted = one_by_one.iter().all(|a| matches!(a, rules::Acquired::Granted { .. }));
            let got = macq(&mut d, b"me", ms, &queued[..pres.len()]).unwrap();
            match got {
                Some(counts) => {
                    prop_assert!(all_granted);
                    let want: Vec<i64> = one_by_one.iter().map(|a| match a {
                        rules::Acquired::Granted { holds, .. } => *holds,
                        rules::Acquired::Busy => unreachable!(),
                    }).collect();
                    prop_assert_eq!(counts, want);
                    prop_assert_eq!(state(&d), state(&single));
                }
                None => {
                    prop_assert!(!all_granted);
                    prop_assert_eq!(state(&d), before);
                }
            }
        }

        // MRELEASE changes every key or none, and when it does, each as
        // LOCK.RELEASE alone would; NOTOWNER exactly when one would.
        #[test]
        fn mrelease_is_atomic_and_equals_single_key_rules(
            pres in proptest::collection::vec(pre(), 1..=4),
        ) {
            let mut d = setup(&pres);
            let before = state(&d);
            let mut single = d.clone();
            let one_by_one: Vec<_> = single.iter_mut().zip(KEYS)
                .map(|(db, k)| rules::release(&mut db.key(k), &b"me"[..]))
                .collect();
            match mrel(&mut d, b"me") {
                Ok(out) => {
                    let want: Vec<Released> = one_by_one.into_iter().collect::<Result<_, _>>().unwrap();
                    prop_assert_eq!(out, want);
                    prop_assert_eq!(state(&d), state(&single));
                }
                Err(e) => {
                    prop_assert_eq!(e, LockError::NotOwner);
                    prop_assert!(one_by_one.iter().any(|r| r.is_err()));
                    prop_assert_eq!(state(&d), before);
                }
            }
        }

        // Parsing answers whatever arrives, and what it accepts has
        // distinct keys and a real owner.
        #[test]
        fn parsing_never_panics(input in proptest::collection::vec(prop_oneof![
            Just(b"1".to_vec()), Just(b"2".to_vec()), Just(b"a".to_vec()), Just(b"b".to_vec()),
            Just(b"*".to_vec()), Just(b"PX".to_vec()), Just(b"BLOCK".to_vec()),
            Just(b"KEEPALIVE".to_vec()), "-?[0-9]{1,21}".prop_map(|s| s.into_bytes()),
        ], 0..8)) {
            let accepted = [
                parse_macquire(&input).map(|r| (r.keys, r.owner)),
                parse_mrelease(&input).map(|r| (r.keys, r.owner)),
            ];
            for (keys, owner) in accepted.into_iter().flatten() {
                prop_assert!(!keys.is_empty());
                let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
                prop_assert_eq!(distinct.len(), keys.len());
                prop_assert!(owner != &b"*".to_vec());
            }
        }
    }
}
