//! The RW lock rules, run against the in-memory store: the layout byte for
//! byte, each rule of the SPEC, Redisson-written states, then property
//! tests against a reference model written from the SPEC's text.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::channel::{rwlock_timeout_key, token_key};
use crate::error::LockError;
use crate::lease::{Lease, Millis};
use crate::memory::{MemoryDb, Value};
use crate::queue::WaitQueue;

const K: &[u8] = b"rw";
const R: RwMode = RwMode::Read;
const W: RwMode = RwMode::Write;

fn px(ms: i64) -> Lease {
    Lease::from_millis(ms).unwrap()
}

fn claim(owner: &[u8], mode: RwMode, ms: i64) -> RwClaim<'_> {
    RwClaim {
        owner,
        mode,
        lease: px(ms),
        token: false,
    }
}

fn acq_q(
    db: &mut MemoryDb,
    owner: &[u8],
    mode: RwMode,
    ms: i64,
    queued: Queued,
) -> Result<RwAcquired, LockError> {
    acquire(&mut db.rwlock(K), &claim(owner, mode, ms), queued).map(|o| o.value)
}

fn acq(db: &mut MemoryDb, owner: &[u8], mode: RwMode, ms: i64) -> Result<RwAcquired, LockError> {
    acq_q(db, owner, mode, ms, Queued::NONE)
}

fn granted(holds: i64, fresh: bool) -> Result<RwAcquired, LockError> {
    Ok(RwAcquired::Granted {
        holds,
        token: None,
        fresh,
    })
}

fn rel(db: &mut MemoryDb, owner: &[u8], mode: RwMode) -> Result<RwReleased, LockError> {
    release(&mut db.rwlock(K), owner, mode).map(|o| o.value)
}

fn hash(fields: &[(&[u8], &[u8])]) -> Value {
    Value::Hash(
        fields
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn tkey(owner: &[u8], n: i64) -> Vec<u8> {
    rwlock_timeout_key(K, owner, n)
}

fn one() -> Value {
    Value::Str(b"1".to_vec())
}

/// Every live key in the database, with its value and deadline.
fn snapshot(db: &MemoryDb) -> BTreeMap<Vec<u8>, (Value, Option<Millis>)> {
    db.entries
        .iter()
        .filter(|(_, e)| e.deadline.is_none_or(|d| d >= db.now()))
        .map(|(k, e)| (k.clone(), (e.value.clone(), e.deadline)))
        .collect()
}

// ---- the layout, byte for byte ----

#[test]
fn fresh_read_writes_redissons_layout() {
    let mut db = MemoryDb::new(1_000);
    assert_eq!(acq(&mut db, b"u:1", R, 500), granted(1, true));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"u:1", b"1")]))
    );
    assert_eq!(db.deadline(K), Some(1_500));
    assert_eq!(tkey(b"u:1", 1), b"{rw}:u:1:rwlock_timeout:1");
    assert_eq!(db.value(&tkey(b"u:1", 1)), Some(&one()));
    assert_eq!(db.deadline(&tkey(b"u:1", 1)), Some(1_500));
    assert_eq!(snapshot(&db).len(), 2);
}

#[test]
fn fresh_write_writes_redissons_layout() {
    let mut db = MemoryDb::new(1_000);
    assert_eq!(acq(&mut db, b"u:1", W, 500), granted(1, true));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"write"), (b"u:1:write", b"1")]))
    );
    assert_eq!(db.deadline(K), Some(1_500));
    assert_eq!(snapshot(&db).len(), 1);
}

#[test]
fn timeout_keys_follow_suffix_name_with_a_hash_tag() {
    let mut db = MemoryDb::new(0);
    let key = b"user:{42}:rw";
    let r = acquire(&mut db.rwlock(key), &claim(b"o", R, 10), Queued::NONE).unwrap();
    assert!(matches!(r.value, RwAcquired::Granted { holds: 1, .. }));
    assert_eq!(
        db.value(b"user:{42}:rw:o:rwlock_timeout:1"),
        Some(&Value::Str(b"1".to_vec()))
    );
}

#[test]
fn timeout_keys_map_back_to_their_lock() {
    // `{rw}:u:1:rwlock_timeout:12` is also the key `{rw}`'s owner `u:1`,
    // and the key `{rw}:u`'s owner `1`.
    let name = tkey(b"u:1", 12);
    assert_eq!(
        timeout_key_candidates(&name),
        vec![
            (K, &b"u:1"[..], 12),
            (&b"{rw}"[..], &b"u:1"[..], 12),
            (&b"{rw}:u"[..], &b"1"[..], 12)
        ]
    );
    let name = rwlock_timeout_key(b"x:{t}", b"o", 1);
    assert_eq!(
        timeout_key_candidates(&name),
        vec![(&b"x:{t}"[..], &b"o"[..], 1)]
    );
    // The key `{}` contains `{`: `{}:{:...`, not the key `` braced.
    let name = rwlock_timeout_key(b"{}", b"{", 1);
    assert!(timeout_key_candidates(&name).contains(&(&b"{}"[..], &b"{"[..], 1)));
    // Ambiguous splits are all offered.
    let name = rwlock_timeout_key(b"{t}:a", b"b:c", 2);
    let c = timeout_key_candidates(&name);
    assert!(c.contains(&(&b"{t}:a"[..], &b"b:c"[..], 2)));
    assert!(c.contains(&(&b"{t}"[..], &b"a:b:c"[..], 2)));
    for not in [
        &b"{rw}:o:rwlock_timeout:0"[..],
        b"{rw}:o:rwlock_timeout:x",
        b"rw:o",
        b"{rw}::rwlock_timeout:1",
    ] {
        assert!(timeout_key_candidates(not).is_empty(), "{not:?}");
    }
}

proptest! {
    #[test]
    fn every_timeout_key_maps_back(
        key in proptest::collection::vec(prop_oneof![Just(b'{'), Just(b'}'), Just(b':'), Just(b'a')], 0..8),
        owner in proptest::collection::vec(prop_oneof![Just(b'{'), Just(b'}'), Just(b':'), Just(b'b')], 1..8),
        n in 1..100_000i64,
    ) {
        let name = rwlock_timeout_key(&key, &owner, n);
        let c = timeout_key_candidates(&name);
        prop_assert!(c.contains(&(&key[..], &owner[..], n)), "{:?}", c);
        for (k, o, m) in c {
            prop_assert_eq!(rwlock_timeout_key(k, o, m), name.clone());
        }
    }
}

// ---- read holds ----

#[test]
fn each_read_hold_has_its_own_key_and_lease() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    db.advance(10);
    // A re-entry with a shorter lease: hold 2 ends first, the hash keeps hold 1's.
    assert_eq!(acq(&mut db, b"a", R, 50), granted(2, false));
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(100));
    assert_eq!(db.deadline(&tkey(b"a", 2)), Some(60));
    assert_eq!(db.deadline(K), Some(100));
    // Another reader with a longer one: the hash follows the latest.
    assert_eq!(acq(&mut db, b"b", R, 300), granted(1, true));
    assert_eq!(db.deadline(K), Some(310));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"a", b"2"), (b"b", b"1")]))
    );
}

#[test]
fn read_release_drops_the_highest_hold_and_never_shortens_another() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"a", R, 400).unwrap();
    acq(&mut db, b"b", R, 200).unwrap();
    assert_eq!(db.deadline(K), Some(400));
    // a's hold 2 (the latest deadline) goes: the hash falls to b's 200.
    let out = rel(&mut db, b"a", R).unwrap();
    assert_eq!(
        out,
        RwReleased {
            holds: 1,
            owner_done: false,
            freed: false,
            write_ended: false
        }
    );
    assert_eq!(db.value(&tkey(b"a", 2)), None);
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(100));
    assert_eq!(db.deadline(K), Some(200));
    // b's release: a's 100 is all that is left.
    let out = rel(&mut db, b"b", R).unwrap();
    assert!(!out.freed && out.owner_done);
    assert_eq!(db.deadline(K), Some(100));
    assert_eq!(out.message(false), None);
    // The last hold: free, `0` published unless a waiter was handed it.
    let out = rel(&mut db, b"a", R).unwrap();
    assert!(out.freed && out.owner_done && !out.write_ended);
    assert_eq!(out.message(false), Some(&b"0"[..]));
    assert_eq!(out.message(true), None);
    assert!(snapshot(&db).is_empty());
    assert_eq!(rel(&mut db, b"a", R), Err(LockError::NotOwner));
}

#[test]
fn a_lapsed_read_hold_is_no_hold() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"b", R, 300).unwrap();
    db.advance(101);
    assert_eq!(rel(&mut db, b"a", R), Err(LockError::NotOwner));
    // The next writing call sweeps it and says so.
    let out = acquire(&mut db.rwlock(K), &claim(b"b", R, 300), Queued::NONE).unwrap();
    assert_eq!(
        out.swept,
        Swept {
            expired: vec![b"a".to_vec()],
            freed: false
        }
    );
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"b", b"2")]))
    );
}

#[test]
fn a_lapsed_middle_hold_moves_the_later_ones_down() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 300).unwrap();
    acq(&mut db, b"a", R, 50).unwrap();
    acq(&mut db, b"a", R, 200).unwrap();
    db.advance(60);
    let swept = sweep(&mut db.rwlock(K)).unwrap();
    assert!(swept.is_empty());
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"a", b"2")]))
    );
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(300));
    assert_eq!(db.deadline(&tkey(b"a", 2)), Some(200));
    assert_eq!(db.value(&tkey(b"a", 3)), None);
    // The highest hold is the one taken last.
    rel(&mut db, b"a", R).unwrap();
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(300));
    assert_eq!(db.value(&tkey(b"a", 2)), None);
}

#[test]
fn the_last_live_hold_ending_frees_the_lock() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"b", R, 100).unwrap();
    assert_eq!(next_deadline(&mut db.rwlock(K)), Ok(Some(100)));
    db.advance(100);
    assert!(info(&mut db.rwlock(K)).unwrap().is_some());
    db.advance(1);
    // Hash and keys lapse together: a writer gets it at once.
    assert_eq!(info(&mut db.rwlock(K)), Ok(None));
    assert_eq!(acq(&mut db, b"w", W, 100), granted(1, true));
}

#[test]
fn due_tells_who_ends_at_the_next_deadline() {
    let mut db = MemoryDb::new(0);
    assert_eq!(due(&mut db.rwlock(K)), Ok(None));
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"a", R, 300).unwrap();
    acq(&mut db, b"b", R, 100).unwrap();
    acq(&mut db, b"c", R, 200).unwrap();
    // At 100: a keeps a hold, b ends; the lock lives on.
    assert_eq!(
        due(&mut db.rwlock(K)),
        Ok(Some(Due {
            at: 100,
            ending: vec![b"b".to_vec()],
            frees: false
        }))
    );
    db.advance(101);
    assert_eq!(
        sweep(&mut db.rwlock(K)).unwrap().expired,
        vec![b"b".to_vec()]
    );
    let d = due(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!((d.at, d.ending, d.frees), (200, vec![b"c".to_vec()], false));
    db.advance(100);
    let d = due(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!((d.at, d.ending, d.frees), (300, vec![b"a".to_vec()], true));
    // The writer ends with the hash; its shorter read hold alone does not end it.
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 50).unwrap();
    let d = due(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!((d.at, d.ending, d.frees), (50, vec![], false));
    db.advance(51);
    let d = due(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!((d.at, d.ending, d.frees), (100, vec![b"w".to_vec()], true));
}

// ---- write holds ----

#[test]
fn write_reentry_sets_the_lease_from_now_not_additively() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 1_000).unwrap();
    db.advance(100);
    assert_eq!(acq(&mut db, b"w", W, 200), granted(2, false));
    assert_eq!(db.deadline(K), Some(300));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"write"), (b"w:write", b"2")]))
    );
    // A partial release keeps the lease.
    let out = rel(&mut db, b"w", W).unwrap();
    assert_eq!(
        out,
        RwReleased {
            holds: 1,
            owner_done: false,
            freed: false,
            write_ended: false
        }
    );
    assert_eq!(out.message(false), None);
    assert_eq!(db.deadline(K), Some(300));
    let out = rel(&mut db, b"w", W).unwrap();
    assert!(out.freed && out.write_ended && out.owner_done);
    assert_eq!(out.message(false), Some(&b"1"[..]));
    assert_eq!(out.message(true), None);
    assert_eq!(db.value(K), None);
}

#[test]
fn a_writer_excludes_everyone_else() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    let before = snapshot(&db);
    assert_eq!(acq(&mut db, b"r", R, 100), Ok(RwAcquired::Busy));
    assert_eq!(acq(&mut db, b"x", W, 100), Ok(RwAcquired::Busy));
    assert_eq!(rel(&mut db, b"r", R), Err(LockError::NotOwner));
    assert_eq!(rel(&mut db, b"w", R), Err(LockError::NotOwner));
    assert_eq!(snapshot(&db), before);
    // Readers exclude writers.
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"r", R, 100).unwrap();
    assert_eq!(acq(&mut db, b"x", W, 100), Ok(RwAcquired::Busy));
    assert_eq!(rel(&mut db, b"r", W), Err(LockError::NotOwner));
}

#[test]
fn upgrade_is_refused_and_changes_nothing() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"r", R, 100).unwrap();
    let before = snapshot(&db);
    assert_eq!(acq(&mut db, b"r", W, 100), Err(LockError::NoUpgrade));
    assert_eq!(
        acq_q(
            &mut db,
            b"r",
            W,
            100,
            Queued {
                any: true,
                write: true
            }
        ),
        Err(LockError::NoUpgrade)
    );
    assert_eq!(snapshot(&db), before);
    // Released first, it may write.
    rel(&mut db, b"r", R).unwrap();
    assert_eq!(acq(&mut db, b"r", W, 100), granted(1, true));
}

#[test]
fn downgrade_then_write_release_leaves_read_mode_and_publishes_1() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    // The writer reads: granted even with writers queued; a longer read
    // hold extends the hash.
    let q = Queued {
        any: true,
        write: true,
    };
    assert_eq!(acq_q(&mut db, b"w", R, 300, q), granted(1, false));
    assert_eq!(db.deadline(K), Some(300));
    assert_eq!(
        db.value(K),
        Some(&hash(&[
            (b"mode", b"write"),
            (b"w", b"1"),
            (b"w:write", b"1")
        ]))
    );
    // Others still wait.
    assert_eq!(acq(&mut db, b"r", R, 100), Ok(RwAcquired::Busy));
    db.advance(50);
    // A write re-entry sets the lease from now but never below the read hold.
    assert_eq!(acq(&mut db, b"w", W, 10), granted(2, false));
    assert_eq!(db.deadline(K), Some(300));
    assert_eq!(acq(&mut db, b"w", W, 1_000), granted(3, false));
    assert_eq!(db.deadline(K), Some(1_050));
    rel(&mut db, b"w", W).unwrap();
    rel(&mut db, b"w", W).unwrap();
    let out = rel(&mut db, b"w", W).unwrap();
    assert_eq!(
        out,
        RwReleased {
            holds: 0,
            owner_done: false,
            freed: false,
            write_ended: true
        }
    );
    // Always `1`, so Redisson readers wake (an intended difference).
    assert_eq!(out.message(true), Some(&b"1"[..]));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"w", b"1")]))
    );
    // Read mode: the hash is the read hold's deadline now.
    assert_eq!(db.deadline(K), Some(300));
    assert_eq!(acq(&mut db, b"r", R, 100), granted(1, true));
}

#[test]
fn the_writers_read_hold_released_keeps_the_write_lease() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 300).unwrap();
    let out = rel(&mut db, b"w", R).unwrap();
    assert_eq!(
        out,
        RwReleased {
            holds: 0,
            owner_done: false,
            freed: false,
            write_ended: false
        }
    );
    // The write hold was extended by the read hold: it keeps that.
    assert_eq!(db.deadline(K), Some(300));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"write"), (b"w:write", b"1")]))
    );
}

// ---- the queue, as a newcomer sees it ----

#[test]
fn newcomers_respect_the_queue() {
    let write_queued = Queued {
        any: true,
        write: true,
    };
    let reads_queued = Queued {
        any: true,
        write: false,
    };
    // Free but queued: the queue's.
    let mut db = MemoryDb::new(0);
    for mode in [R, W] {
        assert_eq!(
            acq_q(&mut db, b"n", mode, 100, reads_queued),
            Ok(RwAcquired::Busy)
        );
    }
    // Read mode: new readers wait behind a queued writer, not behind readers.
    acq(&mut db, b"r", R, 100).unwrap();
    assert_eq!(
        acq_q(&mut db, b"n", R, 100, write_queued),
        Ok(RwAcquired::Busy)
    );
    assert_eq!(acq_q(&mut db, b"n", R, 100, reads_queued), granted(1, true));
    // A re-entry is never queued.
    assert_eq!(
        acq_q(&mut db, b"r", R, 100, write_queued),
        granted(2, false)
    );
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    assert_eq!(
        acq_q(&mut db, b"w", W, 100, write_queued),
        granted(2, false)
    );
}

// ---- tokens ----

#[test]
fn tokens_with_write_only() {
    let mut db = MemoryDb::new(7);
    let mut c = claim(b"w", W, 100);
    c.token = true;
    let out = acquire(&mut db.rwlock(K), &c, Queued::NONE).unwrap();
    assert_eq!(
        out.value,
        RwAcquired::Granted {
            holds: 1,
            token: Some(7_000),
            fresh: true
        }
    );
    let out = acquire(&mut db.rwlock(K), &c, Queued::NONE).unwrap();
    assert!(matches!(
        out.value,
        RwAcquired::Granted {
            token: Some(7_001),
            ..
        }
    ));
    assert_eq!(db.value(&token_key(K)), Some(&Value::Str(b"7001".to_vec())));
    // Busy leaves the counter alone; so does a broken one (an error).
    let mut other = c;
    other.owner = b"x";
    let out = acquire(&mut db.rwlock(K), &other, Queued::NONE).unwrap();
    assert_eq!(out.value, RwAcquired::Busy);
    assert_eq!(db.value(&token_key(K)), Some(&Value::Str(b"7001".to_vec())));
    db.put(&token_key(K), Value::Str(b"x".to_vec()), None);
    let before = snapshot(&db);
    assert_eq!(
        acquire(&mut db.rwlock(K), &c, Queued::NONE),
        Err(LockError::TokenNotInteger)
    );
    assert_eq!(snapshot(&db), before);
    let mut read = claim(b"r", R, 100);
    read.token = true;
    assert!(matches!(
        acquire(&mut MemoryDb::new(0).rwlock(K), &read, Queued::NONE),
        Err(LockError::Syntax(_))
    ));
}

// ---- renewal ----

#[test]
fn renew_moves_every_hold_of_the_owner_and_no_one_elses() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"a", R, 200).unwrap();
    acq(&mut db, b"b", R, 500).unwrap();
    db.advance(50);
    let out = renew(&mut db.rwlock(K), b"a", px(1_000)).unwrap();
    assert!(out.value.renewed);
    assert_eq!(out.value.undo.reads, vec![Some(100), Some(200)]);
    assert_eq!(out.value.undo.write, None);
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(1_050));
    assert_eq!(db.deadline(&tkey(b"a", 2)), Some(1_050));
    assert_eq!(db.deadline(&tkey(b"b", 1)), Some(500));
    assert_eq!(db.deadline(K), Some(1_050));
    // Shorter: a's holds shrink, never b's; the hash follows the latest.
    let short = renew(&mut db.rwlock(K), b"a", px(10)).unwrap();
    assert_eq!(db.deadline(&tkey(b"a", 1)), Some(60));
    assert_eq!(db.deadline(K), Some(500));
    // Undone (REPLICAS): the deadlines come back.
    let back = restore_renewal(&mut db.rwlock(K), b"a", &short.value.undo).unwrap();
    assert!(back.value);
    assert_eq!(db.deadline(&tkey(b"a", 2)), Some(1_050));
    assert_eq!(db.deadline(K), Some(1_050));
    // Not a holder: 0, nothing changed.
    let before = snapshot(&db);
    let out = renew(&mut db.rwlock(K), b"z", px(10)).unwrap();
    assert!(!out.value.renewed);
    assert_eq!(snapshot(&db), before);
}

#[test]
fn renewing_the_writer_moves_its_read_holds_too() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 50).unwrap();
    db.advance(20);
    let out = renew(&mut db.rwlock(K), b"w", px(30)).unwrap();
    assert_eq!(out.value.undo.write, Some(Some(100)));
    assert_eq!(db.deadline(K), Some(50));
    assert_eq!(db.deadline(&tkey(b"w", 1)), Some(50));
    // A restore to a deadline already past ends that hold.
    let undo = RenewUndo {
        reads: vec![Some(70)],
        write: Some(Some(200)),
    };
    let mut db2 = MemoryDb::new(0);
    acq(&mut db2, b"w", W, 100).unwrap();
    acq(&mut db2, b"w", R, 100).unwrap();
    db2.advance(80);
    let back = restore_renewal(&mut db2.rwlock(K), b"w", &undo).unwrap();
    assert!(back.value);
    assert_eq!(db2.value(&tkey(b"w", 1)), None);
    assert_eq!(
        db2.value(K),
        Some(&hash(&[(b"mode", b"write"), (b"w:write", b"1")]))
    );
    assert_eq!(db2.deadline(K), Some(200));
}

// ---- other ways out ----

#[test]
fn release_all_and_take_back() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 100).unwrap();
    let out = release_all(&mut db.rwlock(K), b"w").unwrap();
    assert_eq!(
        out.value,
        Some(RwReleased {
            holds: 0,
            owner_done: true,
            freed: true,
            write_ended: true
        })
    );
    assert!(snapshot(&db).is_empty());
    assert_eq!(release_all(&mut db.rwlock(K), b"w").unwrap().value, None);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"b", R, 100).unwrap();
    let out = take_back(&mut db.rwlock(K), b"a", R).unwrap().unwrap();
    assert!(out.value.owner_done && !out.value.freed);
    assert_eq!(take_back(&mut db.rwlock(K), b"a", R), Ok(None));
    assert_eq!(take_back(&mut db.rwlock(K), b"b", W), Ok(None));
}

#[test]
fn force_release_removes_every_hold_and_key() {
    let mut db = MemoryDb::new(0);
    assert_eq!(
        force_release(&mut db.rwlock(K)).unwrap().value,
        Forced { owners: vec![] }
    );
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"b", R, 100).unwrap();
    let out = force_release(&mut db.rwlock(K)).unwrap().value;
    assert_eq!(out.owners, vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(out.message(false), Some(&b"1"[..]));
    assert_eq!(out.message(true), None);
    assert!(snapshot(&db).is_empty());
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 100).unwrap();
    let out = force_release(&mut db.rwlock(K)).unwrap().value;
    assert_eq!(out.owners, vec![b"w".to_vec()]);
    assert!(snapshot(&db).is_empty());
}

#[test]
fn info_and_holding() {
    let mut db = MemoryDb::new(0);
    assert_eq!(info(&mut db.rwlock(K)), Ok(None));
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", W, 100).unwrap();
    acq(&mut db, b"w", R, 300).unwrap();
    db.advance(30);
    assert_eq!(
        info(&mut db.rwlock(K)),
        Ok(Some(RwInfo {
            mode: W,
            writer: Some(b"w".to_vec()),
            write_holds: 2,
            readers: 1,
            read_holds: 1,
            ttl: Some(270),
            owners: vec![(b"w".to_vec(), 1, 2)],
        }))
    );
    assert_eq!(
        holding(&mut db.rwlock(K), b"w"),
        Ok(OwnerHolds {
            reads: 1,
            writes: 2
        })
    );
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"a", R, 100).unwrap();
    acq(&mut db, b"b", R, 50).unwrap();
    let i = info(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!(
        (
            i.mode,
            i.writer,
            i.write_holds,
            i.readers,
            i.read_holds,
            i.ttl
        ),
        (R, None, 0, 2, 3, Some(100))
    );
    assert_eq!(next_deadline(&mut db.rwlock(K)), Ok(Some(50)));
    // INFO writes nothing, not even a sweep.
    db.advance(60);
    let before = db.value(K).cloned();
    let i = info(&mut db.rwlock(K)).unwrap().unwrap();
    assert_eq!((i.readers, i.read_holds), (1, 2));
    assert_eq!(db.value(K).cloned(), before);
}

// ---- bad data, bad owners, other slots ----

fn every_command(db: &mut MemoryDb, who: &[u8]) -> Vec<Result<(), LockError>> {
    let mut s = db.rwlock(K);
    vec![
        acquire(&mut s, &claim(who, R, 5), Queued::NONE).map(|_| ()),
        acquire(&mut s, &claim(who, W, 5), Queued::NONE).map(|_| ()),
        release(&mut s, who, R).map(|_| ()),
        release(&mut s, who, W).map(|_| ()),
        renew(&mut s, who, px(5)).map(|_| ()),
        release_all(&mut s, who).map(|_| ()),
        take_back(&mut s, who, R).map(|_| ()),
        restore_renewal(
            &mut s,
            who,
            &RenewUndo {
                reads: vec![],
                write: None,
            },
        )
        .map(|_| ()),
    ]
}

fn every_keyed_command(db: &mut MemoryDb) -> Vec<Result<(), LockError>> {
    let mut s = db.rwlock(K);
    vec![
        force_release(&mut s).map(|_| ()),
        sweep(&mut s).map(|_| ()),
        info(&mut s).map(|_| ()),
        next_deadline(&mut s).map(|_| ()),
        holding(&mut s, b"a").map(|_| ()),
    ]
}

#[test]
fn wrongtype_and_notlock_everywhere_and_nothing_changes() {
    let big = (MAX_READ_HOLDS + 1).to_string();
    let bad: Vec<(Value, LockError)> = vec![
        (Value::Other, LockError::WrongType),
        (Value::Str(b"1".to_vec()), LockError::WrongType),
        // A plain lock, and hashes almost like an RW lock.
        (hash(&[(b"a", b"1")]), LockError::NotRwLock),
        (hash(&[(b"mode", b"read")]), LockError::NotRwLock),
        (hash(&[(b"mode", b"write")]), LockError::NotRwLock),
        (
            hash(&[(b"mode", b"READ"), (b"a", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"a", b"0")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"a", b"01")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"a", b"x")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"a", big.as_bytes())]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"*", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"read"), (b"a:write", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"a", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"a:write", b"1"), (b"b:write", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"a:write", b"1"), (b"b", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"*:write", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"x:write:write", b"1")]),
            LockError::NotRwLock,
        ),
        (
            hash(&[(b"mode", b"write"), (b"a:write", b"-1")]),
            LockError::NotRwLock,
        ),
        (hash(&[(b"a", b"1"), (b"b", b"1")]), LockError::NotRwLock),
    ];
    for (value, want) in bad {
        for who in [&b"a"[..], b"b"] {
            let mut db = MemoryDb::new(0);
            db.put(K, value.clone(), Some(1_000));
            db.put(&tkey(b"a", 1), one(), Some(500));
            let before = snapshot(&db);
            for r in every_command(&mut db, who)
                .into_iter()
                .chain(every_keyed_command(&mut db))
            {
                assert_eq!(r, Err(want.clone()), "{value:?} as {who:?}");
            }
            assert_eq!(snapshot(&db), before, "{value:?}");
        }
    }
}

#[test]
fn owners_an_rw_lock_cannot_tell_apart_are_refused_everywhere() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    let before = snapshot(&db);
    for who in [&b"mode"[..], b"a:write", b":write"] {
        for r in every_command(&mut db, who) {
            assert_eq!(r, Err(LockError::RwOwner), "{who:?}");
        }
    }
    assert_eq!(snapshot(&db), before);
}

#[test]
fn crossslot_for_timeout_keys_in_another_slot() {
    for key in [&b"a{b"[..], b"a}b", b"{}x"] {
        let mut db = MemoryDb::new(0);
        let c = claim(b"o", R, 100);
        assert_eq!(
            acquire(&mut db.rwlock(key).in_cluster(), &c, Queued::NONE),
            Err(LockError::RwCrossSlot),
            "{key:?}"
        );
        assert!(db.entries.is_empty());
        // WRITE writes no timeout key; its TOKEN counter may be elsewhere too.
        let w = claim(b"o", W, 100);
        let out = acquire(&mut db.rwlock(key).in_cluster(), &w, Queued::NONE).unwrap();
        assert!(matches!(out.value, RwAcquired::Granted { .. }));
        let mut t = claim(b"o", W, 100);
        t.token = true;
        let before = snapshot(&db);
        let r = acquire(&mut db.rwlock(key).in_cluster(), &t, Queued::NONE);
        assert_eq!(r, Err(LockError::TokenCrossSlot), "{key:?}");
        assert_eq!(snapshot(&db), before);
        // The downgrade would write a timeout key; so would anyone's READ.
        for who in [&b"o"[..], b"p"] {
            let r = acquire(
                &mut db.rwlock(key).in_cluster(),
                &claim(who, R, 100),
                Queued::NONE,
            );
            assert_eq!(r, Err(LockError::RwCrossSlot), "{key:?}");
        }
        assert_eq!(snapshot(&db), before);
    }
    // A hash tag keeps every owner's keys in the slot; outside a cluster
    // anything goes.
    let mut db = MemoryDb::new(0);
    let c = claim(b"x}y", R, 100);
    assert!(acquire(&mut db.rwlock(b"{t}rw").in_cluster(), &c, Queued::NONE).is_ok());
    assert!(acquire(&mut db.rwlock(b"a{b"), &c, Queued::NONE).is_ok());
}

#[test]
fn read_holds_are_capped() {
    let mut db = MemoryDb::new(0);
    let a = MAX_READ_HOLDS - 1;
    let a_s = a.to_string();
    db.put(
        K,
        hash(&[(b"mode", b"read"), (b"a", a_s.as_bytes()), (b"b", b"1")]),
        Some(100),
    );
    for n in 1..=a {
        db.put(&tkey(b"a", n), one(), Some(100));
    }
    db.put(&tkey(b"b", 1), one(), Some(100));
    let before = snapshot(&db);
    for who in [&b"a"[..], b"b", b"c"] {
        assert_eq!(acq(&mut db, who, R, 10), Err(LockError::ReadHoldLimit));
    }
    assert_eq!(snapshot(&db), before);
    // One hold less, and there is room for one more.
    rel(&mut db, b"b", R).unwrap();
    assert_eq!(acq(&mut db, b"c", R, 10), granted(1, true));
    // Counts adding up to more are not a lock, however few the fields.
    let mut db = MemoryDb::new(0);
    db.put(
        K,
        hash(&[(b"mode", b"read"), (b"a", a_s.as_bytes()), (b"b", b"2")]),
        Some(100),
    );
    assert_eq!(acq(&mut db, b"c", R, 10), Err(LockError::NotRwLock));
    let m = "ERR too many read holds on this lock (at most ".to_string();
    assert_eq!(
        LockError::ReadHoldLimit.message(),
        format!("{m}{MAX_READ_HOLDS})")
    );
}

#[test]
fn a_lease_lasts_through_its_deadline_millisecond() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"a", R, 100).unwrap();
    db.advance(100);
    assert_eq!(acq(&mut db, b"w", W, 10), Ok(RwAcquired::Busy));
    db.advance(1);
    assert_eq!(acq(&mut db, b"w", W, 10), granted(1, true));
}

// ---- what Redisson clients leave behind ----

#[test]
fn a_crashed_redisson_reader_lapses_with_its_timeout_key() {
    // Redisson's write re-entry is additive and its write release leaves
    // read mode with the hash's TTL as it was: the hash outlives the only
    // read hold (REDISSON-FAMILY.md 1.5).
    let mut db = MemoryDb::new(0);
    db.put(K, hash(&[(b"mode", b"read"), (b"u:1", b"1")]), Some(60_000));
    db.put(&tkey(b"u:1", 1), one(), Some(30_000));
    assert_eq!(next_deadline(&mut db.rwlock(K)), Ok(Some(30_000)));
    db.advance(30_001);
    // The hash is still there, but no hold is live: the lock is free.
    assert_eq!(next_deadline(&mut db.rwlock(K)), Ok(Some(30_001)));
    assert_eq!(
        due(&mut db.rwlock(K)),
        Ok(Some(Due {
            at: 30_001,
            ending: vec![],
            frees: true
        }))
    );
    assert_eq!(info(&mut db.rwlock(K)), Ok(None));
    let swept = sweep(&mut db.rwlock(K)).unwrap();
    assert_eq!(
        swept,
        Swept {
            expired: vec![b"u:1".to_vec()],
            freed: true
        }
    );
    assert!(snapshot(&db).is_empty());
    // Or the next call does it and says so.
    db.put(K, hash(&[(b"mode", b"read"), (b"u:1", b"2")]), Some(90_000));
    let out = acquire(&mut db.rwlock(K), &claim(b"w", W, 100), Queued::NONE).unwrap();
    assert!(out.swept.freed);
    assert!(matches!(out.value, RwAcquired::Granted { fresh: true, .. }));
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"write"), (b"w:write", b"1")]))
    );
    // Any writing call puts the hash back to the lease rule (here a nil).
    db.put(K, hash(&[(b"mode", b"read"), (b"u:1", b"1")]), Some(90_000));
    db.put(&tkey(b"u:1", 1), one(), Some(40_000));
    assert_eq!(acq(&mut db, b"x", W, 100), Ok(RwAcquired::Busy));
    assert_eq!(db.deadline(K), Some(40_000));
    db.advance(10_000);
    // Queued waiters keep the freed lock from a newcomer: serve them.
    db.put(K, hash(&[(b"mode", b"read"), (b"u:1", b"1")]), Some(90_000));
    let q = Queued {
        any: true,
        write: true,
    };
    let out = acquire(&mut db.rwlock(K), &claim(b"n", R, 100), q).unwrap();
    assert_eq!(out.value, RwAcquired::Busy);
    assert!(out.swept.freed);
    assert!(snapshot(&db).is_empty());
}

#[test]
fn a_redisson_watchdog_that_shortened_the_hash_is_repaired() {
    // ReadLockTask sets the hash to its own lease, below another reader's.
    let mut db = MemoryDb::new(0);
    db.put(
        K,
        hash(&[(b"mode", b"read"), (b"u:1", b"1"), (b"n", b"1")]),
        Some(30_000),
    );
    db.put(&tkey(b"u:1", 1), one(), Some(30_000));
    db.put(&tkey(b"n", 1), one(), Some(90_000));
    assert!(sweep(&mut db.rwlock(K)).unwrap().is_empty());
    assert_eq!(db.deadline(K), Some(90_000));
    // A Redisson partial write release reset the hash below the writer's
    // own read hold: extended again.
    db.put(
        K,
        hash(&[(b"mode", b"write"), (b"w:write", b"1"), (b"w", b"1")]),
        Some(10_000),
    );
    db.put(&tkey(b"w", 1), one(), Some(20_000));
    sweep(&mut db.rwlock(K)).unwrap();
    assert_eq!(db.deadline(K), Some(20_000));
}

#[test]
fn redisson_holds_are_understood() {
    let mut db = MemoryDb::new(0);
    db.put(
        K,
        hash(&[
            (b"mode", b"write"),
            (b"6e38:1:write", b"2"),
            (b"6e38:1", b"1"),
        ]),
        Some(30_000),
    );
    db.put(&tkey(b"6e38:1", 1), one(), Some(30_000));
    assert_eq!(acq(&mut db, b"n", R, 100), Ok(RwAcquired::Busy));
    assert_eq!(
        holding(&mut db.rwlock(K), b"6e38:1"),
        Ok(OwnerHolds {
            reads: 1,
            writes: 2
        })
    );
    rel(&mut db, b"6e38:1", W).unwrap();
    let out = rel(&mut db, b"6e38:1", W).unwrap();
    assert!(out.write_ended && !out.freed);
    assert_eq!(
        db.value(K),
        Some(&hash(&[(b"mode", b"read"), (b"6e38:1", b"1")]))
    );
    assert_eq!(acq(&mut db, b"n", R, 100), granted(1, true));
}

#[test]
fn persisted_holds_never_lapse() {
    let mut db = MemoryDb::new(0);
    db.put(K, hash(&[(b"mode", b"read"), (b"a", b"1")]), None);
    db.put(&tkey(b"a", 1), one(), None);
    assert_eq!(next_deadline(&mut db.rwlock(K)), Ok(None));
    assert_eq!(acq(&mut db, b"b", R, 100), granted(1, true));
    assert_eq!(db.deadline(K), None);
    rel(&mut db, b"a", R).unwrap();
    assert_eq!(db.deadline(K), Some(100));
}

// ---- serving the queue ----

#[derive(Debug, Clone, PartialEq)]
struct Wt(&'static [u8], RwMode);

impl RwWaiting for Wt {
    fn claim(&self) -> RwClaim<'_> {
        claim(self.0, self.1, 100)
    }
}

fn names<G>(v: &[(Wt, G)]) -> Vec<&'static [u8]> {
    v.iter().map(|(w, _)| w.0).collect()
}

#[test]
fn a_read_head_takes_every_read_up_to_the_first_write() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"w0", W, 100).unwrap();
    let mut q = WaitQueue::default();
    for w in [
        Wt(b"r1", R),
        Wt(b"r2", R),
        Wt(b"w1", W),
        Wt(b"r3", R),
        Wt(b"w2", W),
    ] {
        q.push(w);
    }
    let s = serve(&mut db.rwlock(K), &mut q);
    assert!(s.granted.is_empty() && s.failed.is_empty());
    assert_eq!(q.len(), 5);
    rel(&mut db, b"w0", W).unwrap();
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(names(&s.granted), vec![&b"r1"[..], b"r2"]);
    assert!(s.granted.iter().all(|(_, g)| g.fresh && g.holds == 1));
    assert_eq!(q.front(), Some(&Wt(b"w1", W)));
    rel(&mut db, b"r1", R).unwrap();
    assert!(serve(&mut db.rwlock(K), &mut q).granted.is_empty());
    rel(&mut db, b"r2", R).unwrap();
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(names(&s.granted), vec![&b"w1"[..]]);
    assert_eq!(s.granted[0].1.mode, W);
    rel(&mut db, b"w1", W).unwrap();
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(names(&s.granted), vec![&b"r3"[..]]);
    // The last writer gets it when the reader's lease runs out.
    db.advance(101);
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(names(&s.granted), vec![&b"w2"[..]]);
    assert!(q.is_empty());
}

#[test]
fn serving_fails_who_can_never_be_granted() {
    let mut db = MemoryDb::new(0);
    acq(&mut db, b"x", R, 100).unwrap();
    let mut q = WaitQueue::default();
    // x's WRITE would wait for itself: NOUPGRADE; the next head is tried.
    q.push(Wt(b"x", W));
    q.push(Wt(b"r", R));
    q.push(Wt(b"y", W));
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(s.failed, vec![(Wt(b"x", W), LockError::NoUpgrade)]);
    assert_eq!(names(&s.granted), vec![&b"r"[..]]);
    assert_eq!(q.front(), Some(&Wt(b"y", W)));
    db.put(K, Value::Other, None);
    let s = serve(&mut db.rwlock(K), &mut q);
    assert_eq!(s.failed, vec![(Wt(b"y", W), LockError::WrongType)]);
    assert!(q.is_empty());
}

// ---- property tests against a reference model ----

const OWNERS: [&[u8]; 3] = [b"a", b"b\0", b"c:1"];

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize, RwMode, i64, bool, bool),
    Release(usize, RwMode),
    ReleaseAll(usize),
    Renew(usize, i64),
    Force,
    Sweep,
    Info,
    Advance(i64),
}

fn mode() -> impl Strategy<Value = RwMode> {
    prop_oneof![Just(R), Just(W)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, mode(), 1..200i64, prop::bool::weighted(0.15), prop::bool::weighted(0.15))
            .prop_map(|(o, m, l, a, w)| Op::Acquire(o, m, l, a, w)),
        3 => (0..3usize, mode()).prop_map(|(o, m)| Op::Release(o, m)),
        1 => (0..3usize).prop_map(Op::ReleaseAll),
        2 => (0..3usize, 1..200i64).prop_map(|(o, l)| Op::Renew(o, l)),
        1 => Just(Op::Force),
        1 => Just(Op::Sweep),
        1 => Just(Op::Info),
        3 => (0..120i64).prop_map(Op::Advance),
    ]
}

/// The SPEC's rules, written plainly: who holds what, until when.
#[derive(Debug, Clone, Default)]
struct Model {
    writer: Option<(usize, i64)>,
    /// Write mode: the hash's deadline (the write hold's, as extended).
    write_deadline: i64,
    /// Each reader's holds' deadlines, hold 1 first.
    readers: BTreeMap<usize, Vec<i64>>,
    /// Readers whose holds lapsed while the lock lived on, not yet
    /// reported by a writing call.
    pending: BTreeSet<usize>,
}

impl Model {
    fn free(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty()
    }

    fn reads(&self, o: usize) -> i64 {
        self.readers.get(&o).map_or(0, |h| h.len() as i64)
    }

    fn writes(&self, o: usize) -> i64 {
        match self.writer {
            Some((w, n)) if w == o => n,
            _ => 0,
        }
    }

    fn max_read(&self) -> Option<i64> {
        self.readers.values().flatten().copied().max()
    }

    /// The lease rule: the hash's deadline.
    fn hash_deadline(&self) -> Option<i64> {
        match self.writer {
            Some(_) => Some(self.write_deadline.max(self.max_read().unwrap_or(i64::MIN))),
            None => self.max_read(),
        }
    }

    /// Time passes: holds end at their deadlines (now > deadline).
    fn lapse(&mut self, now: i64) {
        if self.writer.is_some() && self.hash_deadline().is_some_and(|d| d < now) {
            // The hash lapses, and every read hold with it.
            *self = Model::default();
            return;
        }
        let before: Vec<usize> = self.readers.keys().copied().collect();
        for h in self.readers.values_mut() {
            h.retain(|&d| d >= now);
        }
        self.readers.retain(|_, h| !h.is_empty());
        if self.free() {
            // Read mode: the hash lapsed with its last hold; nothing to report.
            self.pending.clear();
            return;
        }
        for o in before {
            if self.reads(o) == 0 && self.writes(o) == 0 {
                self.pending.insert(o);
            }
        }
    }

    fn take_pending(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|o| OWNERS[o].to_vec())
            .collect()
    }

    /// The keys this state is stored as.
    fn layout(&self) -> BTreeMap<Vec<u8>, (Value, Option<Millis>)> {
        let mut keys = BTreeMap::new();
        if self.free() {
            return keys;
        }
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mode: &[u8] = if self.writer.is_some() {
            b"write"
        } else {
            b"read"
        };
        fields.push((b"mode".to_vec(), mode.to_vec()));
        if let Some((w, n)) = self.writer {
            fields.push((writer_field(OWNERS[w]), n.to_string().into_bytes()));
        }
        for (&o, holds) in &self.readers {
            fields.push((OWNERS[o].to_vec(), holds.len().to_string().into_bytes()));
            for (i, &d) in holds.iter().enumerate() {
                keys.insert(tkey(OWNERS[o], i as i64 + 1), (one(), Some(d)));
            }
        }
        let refs: Vec<(&[u8], &[u8])> = fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
        keys.insert(K.to_vec(), (hash(&refs), self.hash_deadline()));
        keys
    }
}

/// Only this property test's keys (the token counter is not modelled).
fn rw_keys(db: &MemoryDb) -> BTreeMap<Vec<u8>, (Value, Option<Millis>)> {
    snapshot(db)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // Every call answers as the model does, leaves exactly the layout the
    // model describes (so the TTL rule holds after every operation), never
    // lets a writer overlap anyone, frees the lock exactly when no live
    // hold remains, and changes nothing when it fails.
    #[test]
    fn rules_match_the_reference_model(ops in proptest::collection::vec(op(), 1..80)) {
        let mut db = MemoryDb::new(1_000_000);
        let mut m = Model::default();
        for op in ops {
            let now = db.now();
            m.lapse(now);
            let before = rw_keys(&db);
            // `Some(swept)`: the call wrote (a sweep is reported).
            let swept: Option<Result<Swept, LockError>> = match op {
                Op::Acquire(o, mode, l, any, write) => {
                    let queued = Queued { any: any || write, write };
                    let got = acquire(&mut db.rwlock(K), &claim(OWNERS[o], mode, l), queued);
                    let (r, w) = (m.reads(o), m.writes(o));
                    let d = now + l;
                    let want = match mode {
                        RwMode::Read if r > 0 || w > 0 || (m.free() && !queued.any)
                            || (m.writer.is_none() && !m.free() && !write) => {
                            m.readers.entry(o).or_default().push(d);
                            if m.writer.is_some() {
                                m.write_deadline = m.write_deadline.max(d);
                            }
                            Ok(RwAcquired::Granted { holds: r + 1, token: None, fresh: r + w == 0 })
                        }
                        RwMode::Write if w > 0 => {
                            m.writer = Some((o, w + 1));
                            m.write_deadline = d.max(m.max_read().unwrap_or(i64::MIN));
                            Ok(RwAcquired::Granted { holds: w + 1, token: None, fresh: false })
                        }
                        RwMode::Write if r > 0 => Err(LockError::NoUpgrade),
                        RwMode::Write if m.free() && !queued.any => {
                            m.writer = Some((o, 1));
                            m.write_deadline = d;
                            Ok(RwAcquired::Granted { holds: 1, token: None, fresh: true })
                        }
                        _ => Ok(RwAcquired::Busy),
                    };
                    prop_assert_eq!(got.clone().map(|o| o.value), want, "{:?}", op);
                    match got { Ok(o) => Some(Ok(o.swept)), Err(e) => Some(Err(e)) }
                }
                Op::Release(o, mode) => {
                    let got = release(&mut db.rwlock(K), OWNERS[o], mode);
                    let had_writer = m.writer.is_some();
                    let want = match mode {
                        RwMode::Read if m.reads(o) > 0 => {
                            let h = m.readers.get_mut(&o).unwrap();
                            h.pop();
                            let left = h.len() as i64;
                            if left == 0 { m.readers.remove(&o); }
                            Ok(left)
                        }
                        RwMode::Write if m.writes(o) > 0 => {
                            let left = m.writes(o) - 1;
                            m.writer = (left > 0).then_some((o, left));
                            Ok(left)
                        }
                        _ => Err(LockError::NotOwner),
                    };
                    let want = want.map(|holds| RwReleased {
                        holds,
                        owner_done: m.reads(o) + m.writes(o) == 0,
                        freed: m.free(),
                        write_ended: had_writer && m.writer.is_none(),
                    });
                    prop_assert_eq!(got.clone().map(|o| o.value), want, "{:?}", op);
                    match got { Ok(o) => Some(Ok(o.swept)), Err(e) => Some(Err(e)) }
                }
                Op::ReleaseAll(o) => {
                    let got = release_all(&mut db.rwlock(K), OWNERS[o]).unwrap();
                    let had_writer = m.writer.is_some();
                    let held = m.reads(o) + m.writes(o) > 0;
                    m.readers.remove(&o);
                    if m.writes(o) > 0 { m.writer = None; }
                    let want = held.then(|| RwReleased {
                        holds: 0, owner_done: true, freed: m.free(),
                        write_ended: had_writer && m.writer.is_none(),
                    });
                    prop_assert_eq!(got.value, want);
                    Some(Ok(got.swept))
                }
                Op::Renew(o, l) => {
                    let got = renew(&mut db.rwlock(K), OWNERS[o], px(l)).unwrap();
                    let held = m.reads(o) + m.writes(o) > 0;
                    if let Some(h) = m.readers.get_mut(&o) {
                        h.iter_mut().for_each(|d| *d = now + l);
                    }
                    if m.writes(o) > 0 {
                        m.write_deadline = (now + l).max(m.max_read().unwrap_or(i64::MIN));
                    }
                    prop_assert_eq!(got.value.renewed, held);
                    Some(Ok(got.swept))
                }
                Op::Force => {
                    let got = force_release(&mut db.rwlock(K)).unwrap();
                    prop_assert_eq!(got.value.removed(), !m.free());
                    m.writer = None;
                    m.readers.clear();
                    Some(Ok(got.swept))
                }
                Op::Sweep => Some(sweep(&mut db.rwlock(K))),
                Op::Info => {
                    let got = info(&mut db.rwlock(K)).unwrap();
                    let want = (!m.free()).then(|| (
                        if m.writer.is_some() { W } else { R },
                        m.writer.map(|(w, _)| OWNERS[w].to_vec()),
                        m.writer.map_or(0, |(_, n)| n),
                        m.readers.len() as i64,
                        m.readers.values().map(|h| h.len() as i64).sum::<i64>(),
                        m.hash_deadline().map(|d| d - now),
                    ));
                    let got = got.map(|i| (i.mode, i.writer, i.write_holds, i.readers, i.read_holds, i.ttl));
                    prop_assert_eq!(got, want);
                    None
                }
                Op::Advance(ms) => {
                    db.advance(ms);
                    None
                }
            };
            match swept {
                // Errors change nothing.
                Some(Err(_)) => prop_assert_eq!(rw_keys(&db), before),
                // A writing call left exactly the model's layout, and
                // reported the holds that had lapsed.
                Some(Ok(swept)) => {
                    prop_assert_eq!(rw_keys(&db), m.layout(), "after {:?}", op);
                    let mut got = swept.expired.clone();
                    got.sort();
                    let mut want = m.take_pending();
                    want.sort();
                    prop_assert_eq!(got, want, "after {:?}", op);
                    prop_assert!(!swept.freed);
                }
                None => {}
            }
            // `due` predicts who ends at the next deadline.
            if let Some(d) = due(&mut db.rwlock(K)).unwrap() {
                let owners = |db: &mut MemoryDb| -> BTreeSet<Vec<u8>> {
                    info(&mut db.rwlock(K)).unwrap().map_or_else(BTreeSet::new, |i| {
                        i.owners.into_iter().map(|(o, _, _)| o).collect()
                    })
                };
                let mut later = db.clone();
                later.advance(d.at + 1 - later.now());
                let after = owners(&mut later);
                let ended: BTreeSet<_> = owners(&mut db).difference(&after).cloned().collect();
                prop_assert_eq!(ended, d.ending.into_iter().collect::<BTreeSet<_>>());
                prop_assert_eq!(d.frees, after.is_empty());
            }
            // A writer overlaps no one; free exactly when nothing is live.
            m.lapse(db.now());
            if let Some((w, _)) = m.writer {
                prop_assert!(m.readers.keys().all(|&r| r == w));
            }
            let live = info(&mut db.rwlock(K)).unwrap();
            prop_assert_eq!(live.is_none(), m.free());
            if let Some(i) = live {
                prop_assert!(i.writer.is_none() || i.owners.len() == 1);
            }
        }
    }
}

// ---- the queue policy against a model of the queue ----

#[derive(Debug, Clone)]
enum QOp {
    /// A newcomer: acquired at once if it may, else queued.
    Arrive(usize, RwMode),
    Release(usize, RwMode),
    Advance(i64),
}

fn qop() -> impl Strategy<Value = QOp> {
    prop_oneof![
        4 => (0..4usize, mode()).prop_map(|(o, m)| QOp::Arrive(o, m)),
        3 => (0..4usize, mode()).prop_map(|(o, m)| QOp::Release(o, m)),
        2 => (1..80i64).prop_map(QOp::Advance),
    ]
}

const QOWNERS: [&[u8]; 4] = [b"p", b"q", b"r", b"s"];

#[derive(Debug, Clone, PartialEq)]
struct Qw(usize, RwMode, u32);

impl RwWaiting for Qw {
    fn claim(&self) -> RwClaim<'_> {
        claim(QOWNERS[self.0], self.1, 50)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // Serving is strictly head-of-line: the waiters granted are always a
    // prefix of the queue, after serving the head cannot be granted, a READ
    // group ends at the first WRITE, a WRITE is granted to no one else's
    // company, and a newcomer READ never enters while a WRITE waits.
    #[test]
    fn the_queue_is_served_in_order(ops in proptest::collection::vec(qop(), 1..80)) {
        let mut db = MemoryDb::new(0);
        let mut q: WaitQueue<Qw> = WaitQueue::default();
        let mut order: Vec<Qw> = Vec::new();
        let mut n = 0u32;
        for op in ops {
            match op {
                QOp::Arrive(o, mode) => {
                    let queued = Queued {
                        any: !q.is_empty(),
                        write: order.iter().any(|w| w.1 == W),
                    };
                    let got = acquire(&mut db.rwlock(K), &claim(QOWNERS[o], mode, 50), queued);
                    let holds = holding(&mut db.rwlock(K), QOWNERS[o]).unwrap();
                    match got.map(|o| o.value) {
                        Ok(RwAcquired::Busy) => {
                            n += 1;
                            let w = Qw(o, mode, n);
                            q.push(w.clone());
                            order.push(w);
                        }
                        Ok(RwAcquired::Granted { .. }) => {
                            // Past a queued writer only as a re-entry or downgrade.
                            if queued.write && mode == R {
                                prop_assert!(holds.reads > 1 || holds.writes > 0);
                            }
                        }
                        Err(e) => prop_assert_eq!(e, LockError::NoUpgrade),
                    }
                }
                QOp::Release(o, mode) => {
                    let _ = release(&mut db.rwlock(K), QOWNERS[o], mode);
                }
                QOp::Advance(ms) => db.advance(ms),
            }
            let s = serve(&mut db.rwlock(K), &mut q);
            let done: Vec<Qw> = s.granted.iter().map(|(w, _)| w.clone())
                .chain(s.failed.iter().map(|(w, _)| w.clone())).collect();
            // A prefix of the queue, in order.
            let k = done.len();
            let mut done_sorted = done.clone();
            done_sorted.sort_by_key(|w| w.2);
            prop_assert_eq!(&done_sorted[..], &order[..k]);
            order.drain(..k);
            // A READ group never crosses a WRITE by someone else.
            let modes: Vec<(usize, RwMode)> = s.granted.iter().map(|(w, _)| (w.0, w.1)).collect();
            if let Some(&(first, _)) = modes.iter().find(|(_, m)| *m == W) {
                prop_assert!(modes.iter().all(|&(o, _)| o == first), "{:?}", modes);
            }
            for (w, e) in &s.failed {
                prop_assert_eq!(e, &LockError::NoUpgrade, "{:?}", w);
            }
            // The head left waiting cannot be granted now.
            if let Some(head) = q.front() {
                let mut probe = db.clone();
                let got = acquire(&mut probe.rwlock(K), &head.claim(), Queued::NONE);
                prop_assert_eq!(got.map(|o| o.value), Ok(RwAcquired::Busy));
            }
            prop_assert_eq!(q.len(), order.len());
            // The exclusion invariant, on what is stored.
            if let Some(i) = info(&mut db.rwlock(K)).unwrap()
                && i.mode == W
            {
                prop_assert_eq!(i.owners.len(), 1);
            }
        }
    }
}

// ---- Redisson's scripts and ours agree where the SPEC does not differ ----

/// The hash at `K` as a map (empty when missing).
fn fields(db: &MemoryDb) -> BTreeMap<Vec<u8>, Vec<u8>> {
    match db.value(K) {
        Some(Value::Hash(h)) => h.clone(),
        _ => BTreeMap::new(),
    }
}

/// PTTL as Redis answers it: -2 missing, -1 no expiry.
fn pttl(db: &MemoryDb, key: &[u8]) -> i64 {
    match (db.value(key), db.deadline(key)) {
        (None, _) => -2,
        (Some(_), None) => -1,
        (Some(_), Some(d)) => d - db.now(),
    }
}

fn put_fields(db: &mut MemoryDb, h: BTreeMap<Vec<u8>, Vec<u8>>, deadline: Option<Millis>) {
    if h.is_empty() {
        db.entries.remove(K);
    } else {
        db.put(K, Value::Hash(h), deadline);
    }
}

/// RedissonReadLock's acquire, step by step (REDISSON-FAMILY.md 1.2):
/// `true` = acquired.
fn redisson_read_lock(db: &mut MemoryDb, owner: &[u8], lease: i64) -> bool {
    let now = db.now();
    let mut h = fields(db);
    let mode = h.get(&b"mode"[..]).cloned();
    let mine = h.contains_key(&writer_field(owner));
    match mode.as_deref() {
        None | Some(b"read") => {}
        Some(b"write") if mine => {}
        _ => return false,
    }
    if mode.is_none() {
        h.insert(b"mode".to_vec(), b"read".to_vec());
    }
    let n = h.get(owner).map_or(0, |v| {
        std::str::from_utf8(v).unwrap().parse::<i64>().unwrap()
    }) + 1;
    h.insert(owner.to_vec(), n.to_string().into_bytes());
    let left = pttl(db, K);
    let deadline = match mode {
        None => Some(now + lease),
        Some(_) => Some(now + left.max(lease)),
    };
    put_fields(db, h, deadline);
    db.put(&tkey(owner, n), one(), Some(now + lease));
    true
}

/// RedissonReadLock's release in read mode (1.3): `Some(freed)`, `None`
/// when not held.
fn redisson_read_unlock(db: &mut MemoryDb, owner: &[u8]) -> Option<bool> {
    let mut h = fields(db);
    let n: i64 = std::str::from_utf8(h.get(owner)?).unwrap().parse().unwrap();
    if n == 1 {
        h.remove(owner);
    } else {
        h.insert(owner.to_vec(), (n - 1).to_string().into_bytes());
    }
    db.entries.remove(&tkey(owner, n));
    let deadline = db.deadline(K);
    if h.len() > 1 {
        let mut longest = -3;
        for (f, v) in &h {
            if let Ok(count) = std::str::from_utf8(v).unwrap_or("x").parse::<i64>() {
                for i in 1..=count {
                    longest = longest.max(pttl(db, &tkey(f, i)));
                }
            }
        }
        if longest > 0 {
            put_fields(db, h, Some(db.now() + longest));
            return Some(false);
        }
    }
    let _ = deadline;
    db.entries.remove(K);
    Some(true)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // From any lock our rules leave (all holds live), a Redisson reader
    // entering or leaving changes the keys exactly as a native reader's
    // RWLOCK.ACQUIRE/RELEASE READ does; so they share one lock.
    #[test]
    fn redisson_readers_and_native_readers_agree(
        ops in proptest::collection::vec(op(), 0..40),
        who in 0..3usize,
        lease in 1..300i64,
    ) {
        let mut db = MemoryDb::new(1_000_000);
        for op in ops {
            let mut s = db.rwlock(K);
            let _ = match op {
                Op::Acquire(o, m, l, _, _) => acquire(&mut s, &claim(OWNERS[o], m, l), Queued::NONE).map(|_| ()),
                Op::Release(o, m) => release(&mut s, OWNERS[o], m).map(|_| ()),
                Op::ReleaseAll(o) => release_all(&mut s, OWNERS[o]).map(|_| ()),
                Op::Renew(o, l) => renew(&mut s, OWNERS[o], px(l)).map(|_| ()),
                Op::Force => force_release(&mut s).map(|_| ()),
                Op::Sweep | Op::Info => Ok(()),
                Op::Advance(ms) => { db.advance(ms / 4); Ok(()) }
            };
        }
        sweep(&mut db.rwlock(K)).unwrap();
        let owner = OWNERS[who];
        // Entering.
        let mut theirs = db.clone();
        let mut ours = db.clone();
        let entered = redisson_read_lock(&mut theirs, owner, lease);
        let got = acquire(&mut ours.rwlock(K), &claim(owner, R, lease), Queued::NONE).unwrap();
        prop_assert_eq!(entered, matches!(got.value, RwAcquired::Granted { .. }));
        prop_assert_eq!(snapshot(&theirs), snapshot(&ours));
        // Leaving, in read mode.
        if fields(&db).get(&b"mode"[..]).map(|m| &m[..]) == Some(b"read") {
            let mut theirs = db.clone();
            let mut ours = db.clone();
            let left = redisson_read_unlock(&mut theirs, owner);
            let got = release(&mut ours.rwlock(K), owner, R);
            match left {
                None => prop_assert_eq!(got, Err(LockError::NotOwner)),
                Some(freed) => prop_assert_eq!(got.unwrap().value.freed, freed),
            }
            prop_assert_eq!(snapshot(&theirs), snapshot(&ours));
        }
    }
}
