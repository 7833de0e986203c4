//! Locks survive restarts as plain hashes with their absolute deadlines:
//! AOF (`appendfsync always`) after kill -9, an AOF rewrite, RDB snapshots
//! and DEBUG RELOAD. The AOF holds effects only (no LOCK.*, no PUBLISH), so
//! a replay never restarts a lease, and a lease that ran out while the
//! server was down is gone afterwards.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;

type State = BTreeMap<Vec<u8>, (Vec<(Vec<u8>, Vec<u8>)>, i64)>;

#[track_caller]
fn snapshot(c: &mut Client, keys: &[&[u8]]) -> State {
    keys.iter()
        .map(|k| (k.to_vec(), hash_and_deadline(c, k)))
        .collect()
}

/// Takes a varied set of locks; returns the keys that must survive and the
/// keys that must be gone.
fn take_locks(c: &mut Client) -> (Vec<&'static [u8]>, Vec<&'static [u8]>) {
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "l1", "o1", "PX", "60000"]),
        Reply::Int(1)
    );
    for n in 1..=2 {
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "l2", "o2", "PX", "70000"]),
            Reply::Int(n)
        );
    }
    for n in 1..=3 {
        assert_eq!(
            c.cmd(&args!["LOCK.ACQUIRE", b"l3\0", b"o\0\r\n\xff", "EX", 80]),
            Reply::Int(n)
        );
    }
    assert!(matches!(
        c.cmd(&["LOCK.ACQUIRE", "gen", "*", "PX", "90000"]),
        Reply::Bulk(_)
    ));
    for n in 1..=3 {
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "part", "o", "PX", "65000"]),
            Reply::Int(n)
        );
    }
    assert_eq!(c.cmd(&["LOCK.RELEASE", "part", "o"]), Reply::Int(2));
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "renewed", "o", "PX", "1000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "renewed", "o", "PX", "100000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "huge", "o", "PX", "9000000000000000000"]),
        Reply::Int(1)
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "freed", "o"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "freed", "o"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "forced", "o"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "forced"]), Reply::Int(1));
    (
        vec![b"l1", b"l2", b"l3\0", b"gen", b"part", b"renewed", b"huge"],
        vec![b"freed", b"forced"],
    )
}

#[track_caller]
fn assert_locks_back(c: &mut Client, live: &[&[u8]], gone: &[&[u8]], before: &State) {
    assert_eq!(&snapshot(c, live), before);
    for (key, (pairs, _)) in before {
        let info = c.cmd(&args!["LOCK.INFO", key]);
        assert_eq!(
            info.map_get("owner").map(Reply::as_bytes),
            Some(&pairs[0].0[..])
        );
        let holds: i64 = String::from_utf8_lossy(&pairs[0].1).parse().unwrap();
        assert_eq!(info.map_get("holds"), Some(&Reply::Int(holds)), "{info:?}");
        assert!(info.map_get("ttl").unwrap().as_int() > 0, "{info:?}");
    }
    for key in gone {
        assert_eq!(
            c.cmd(&args!["EXISTS", key]),
            Reply::Int(0),
            "{}",
            key.escape_ascii()
        );
        assert_eq!(c.cmd(&args!["LOCK.INFO", key]), Reply::Nil);
    }
}

/// Every file of the multi-part AOF, concatenated, lower-cased.
fn aof_text(s: &Server) -> Vec<u8> {
    let dir = s.dir().join("appendonlydir");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(!names.is_empty());
    let mut all = Vec::new();
    for f in names {
        all.extend(std::fs::read(&f).unwrap().to_ascii_lowercase());
    }
    all
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[track_caller]
fn assert_aof_has_effects_only(s: &Server) {
    let aof = aof_text(s);
    for banned in [&b"lock."[..], b"publish", b"redisson_lock__channel"] {
        assert!(
            !contains(&aof, banned),
            "AOF contains {:?}:\n{}",
            String::from_utf8_lossy(banned),
            aof.escape_ascii()
        );
    }
    for wanted in [&b"hset"[..], b"pexpireat"] {
        assert!(
            contains(&aof, wanted),
            "AOF lacks {:?}:\n{}",
            String::from_utf8_lossy(wanted),
            aof.escape_ascii()
        );
    }
}

fn aof_kill9_restart(kind: Kind) {
    let mut s = Server::builder(kind)
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start();
    let mut c = s.client();
    let (live, mut gone) = take_locks(&mut c);
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "short", "o", "PX", "300"]),
        Reply::Int(1)
    );
    let short_deadline = c.cmd(&["PEXPIRETIME", "short"]).as_int();
    gone.push(b"short");
    let before = snapshot(&mut c, &live);
    for (key, (pairs, deadline)) in &before {
        assert_eq!(pairs.len(), 1, "{}", key.escape_ascii());
        assert!(*deadline > now_ms() + 50_000, "{}", key.escape_ascii());
    }
    drop(c);
    s.kill9();
    assert_aof_has_effects_only(&s);

    // Stay down until the short lease has run out.
    let wait = (short_deadline - now_ms() + 20).max(0) as u64;
    std::thread::sleep(Duration::from_millis(wait));
    s.restart();
    let mut c = s.client();
    // Same owners, counts and deadlines: nothing was extended.
    assert_locks_back(&mut c, &live, &gone, &before);
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "short", "other"]), Reply::Int(1));
    // The lock logic runs on the restored locks.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "l2", "o2"]), Reply::Int(3));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "l1", "o2"]), Reply::Nil);
    assert_eq!(c.cmd(&["LOCK.RELEASE", "part", "o"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "part", "o"]), Reply::Int(0));

    // After an AOF rewrite (base = snapshot) and another crash: the same.
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    assert!(wait_until(Duration::from_secs(10), || {
        s.info_field("persistence", "aof_rewrite_in_progress")
            .as_deref()
            == Some("0")
            && s.info_field("persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")
    }));
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "after", "o", "PX", "70000"]),
        Reply::Int(1)
    );
    let mut keys = live.clone();
    keys.retain(|k| *k != b"part");
    keys.push(b"after");
    keys.push(b"short");
    let before = snapshot(&mut c, &keys);
    drop(c);
    s.kill9();
    assert_aof_has_effects_only(&s);
    s.restart();
    let mut c = s.client();
    assert_locks_back(&mut c, &keys, &[b"part", b"freed", b"forced"], &before);
}

fn rdb_restart_and_debug_reload(kind: Kind) {
    let mut s = Server::start(kind);
    let mut c = s.client();
    let (live, gone) = take_locks(&mut c);
    let before = snapshot(&mut c, &live);

    // DEBUG RELOAD: save and load the RDB in place.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Status("OK".into()));
    assert_locks_back(&mut c, &live, &gone, &before);
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "l1", "o1", "PX", "60000"]),
        Reply::Int(2)
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", "l1", "o1"]), Reply::Int(1));
    let before = snapshot(&mut c, &live);

    // SAVE, crash, restart from dump.rdb.
    assert_eq!(c.cmd(&["SAVE"]), Reply::Status("OK".into()));
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_locks_back(&mut c, &live, &gone, &before);
    assert_eq!(c.cmd(&["LOCK.RELEASE", "l2", "o2"]), Reply::Int(1));
}

per_kind!(aof_kill9_restart, rdb_restart_and_debug_reload);
