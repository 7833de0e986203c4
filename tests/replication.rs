//! Primary + replica: the replica holds exactly the primary's locks (same
//! hashes, same absolute deadlines), serves LOCK.INFO, refuses writes, and
//! its subscribers hear unlocks. The replication stream itself, read as a
//! fake replica (SYNC), carries effects only (HSET / PEXPIREAT with the
//! absolute deadline / DEL / PUBLISH), never LOCK.* verbatim.
//!
//! (MONITOR on a replica does not show commands coming from its primary on
//! either server, Redis 7.0 or Valkey 9.1, so the stream is read directly.)

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use testkit::redisson::channel;

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

fn pair(kind: Kind) -> (Server, Server) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replica_of(&primary);
    (primary, replica)
}

#[track_caller]
fn wait_replicated(p: &mut Client) {
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
}

#[track_caller]
fn keys(c: &mut Client) -> BTreeSet<Vec<u8>> {
    c.cmd(&["KEYS", "*"])
        .as_array()
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect()
}

fn replica_mirrors_locks(kind: Kind) {
    let (primary, replica) = pair(kind);
    let mut p = primary.client();
    let mut r = replica.client();

    // A mix of everything that writes.
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "a", "o1", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "a", "o1", "PX", "70000"]),
        Reply::Int(2)
    );
    assert_eq!(p.cmd(&["LOCK.RELEASE", "a", "o1"]), Reply::Int(1));
    assert_eq!(p.cmd(&["LOCK.ACQUIRE", "b", "o2"]), Reply::Int(1));
    assert_eq!(
        p.cmd(&["LOCK.RENEW", "b", "o2", "PX", "90000"]),
        Reply::Int(1)
    );
    for n in 1..=3 {
        assert_eq!(p.cmd(&["LOCK.ACQUIRE", "c", "o3"]), Reply::Int(n));
    }
    for n in (0..3).rev() {
        assert_eq!(p.cmd(&["LOCK.RELEASE", "c", "o3"]), Reply::Int(n));
    }
    assert_eq!(p.cmd(&["LOCK.ACQUIRE", "d", "o4"]), Reply::Int(1));
    assert_eq!(p.cmd(&["LOCK.FORCERELEASE", "d"]), Reply::Int(1));
    let uuid = p
        .cmd(&["LOCK.ACQUIRE", "e", "*", "EX", "200"])
        .as_bytes()
        .to_vec();
    assert_eq!(
        p.cmd(&args![
            "LOCK.ACQUIRE",
            b"f\0\xff",
            b"o\0\r\n\xff",
            "EX",
            100
        ]),
        Reply::Int(1)
    );
    p.cmd(&["HSET", "g", "o5", "2"]);
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "g", "o5", "PX", "50000"]),
        Reply::Int(3)
    );
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "h", "o6", "PX", "30"]),
        Reply::Int(1)
    );
    for n in 1..=5 {
        assert_eq!(
            p.cmd(&["LOCK.ACQUIRE", "i", "o7", "PX", "80000"]),
            Reply::Int(n)
        );
    }
    assert_eq!(p.cmd(&["LOCK.RELEASE", "i", "o7"]), Reply::Int(4));
    assert_eq!(p.cmd(&["LOCK.RELEASE", "i", "o7"]), Reply::Int(3));
    assert_eq!(p.cmd(&["LOCK.RENEW", "j", "nobody"]), Reply::Int(0));
    // A lease far in the future (deadline near i64::MAX).
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "huge", "o8", "PX", "9000000000000000000"]),
        Reply::Int(1)
    );
    assert_eq!(p.cmd(&["LOCK.ACQUIRE", "a", "other"]), Reply::Nil);
    assert_eq!(
        p.cmd(&["LOCK.RELEASE", "a", "other"]).err_code(),
        Some("NOTOWNER")
    );
    assert_eq!(p.cmd(&["LOCK.RENEW", "a", "other"]), Reply::Int(0));
    // `h` lapses.
    assert!(wait_until(Duration::from_secs(2), || {
        p.cmd(&["EXISTS", "h"]) == Reply::Int(0)
    }));
    // Another database: key `a` there is another lock.
    let mut p5 = primary.client();
    p5.cmd(&["SELECT", "5"]);
    assert_eq!(
        p5.cmd(&["LOCK.ACQUIRE", "a", "db5", "PX", "55000"]),
        Reply::Int(1)
    );
    assert_eq!(
        p5.cmd(&["LOCK.ACQUIRE", "a", "db5", "PX", "55000"]),
        Reply::Int(2)
    );
    wait_replicated(&mut p);
    let mut r5 = replica.client();
    r5.cmd(&["SELECT", "5"]);
    assert_eq!(keys(&mut r5), keys(&mut p5));
    assert_eq!(
        hash_and_deadline(&mut r5, b"a"),
        hash_and_deadline(&mut p5, b"a")
    );
    assert_eq!(
        r5.cmd(&["LOCK.INFO", "a"]).map_get("owner"),
        Some(&bulk("db5"))
    );

    let on_primary = keys(&mut p);
    let expected: BTreeSet<Vec<u8>> = [&b"a"[..], b"b", b"e", b"f\0\xff", b"g", b"huge", b"i"]
        .iter()
        .map(|k| k.to_vec())
        .collect();
    assert_eq!(on_primary, expected);
    assert_eq!(keys(&mut r), on_primary);
    for key in on_primary
        .iter()
        .chain([b"c".to_vec(), b"d".to_vec(), b"h".to_vec()].iter())
    {
        let want = hash_and_deadline(&mut p, key);
        assert_eq!(
            hash_and_deadline(&mut r, key),
            want,
            "key {}",
            key.escape_ascii()
        );
    }
    assert_eq!(
        hash_and_deadline(&mut r, b"e").0,
        vec![(uuid.clone(), b"1".to_vec())]
    );
    assert_eq!(
        hash_and_deadline(&mut r, b"i").0,
        vec![(b"o7".to_vec(), b"3".to_vec())]
    );

    // The replica serves LOCK.INFO, RESP2 and RESP3.
    let mut r3 = replica.client_resp3();
    for key in &on_primary {
        let want = p.cmd(&args!["LOCK.INFO", key]);
        for got in [
            r.cmd(&args!["LOCK.INFO", key]),
            r3.cmd(&args!["LOCK.INFO", key]),
        ] {
            for field in ["owner", "holds", "waiters"] {
                assert_eq!(
                    got.map_get(field),
                    want.map_get(field),
                    "{got:?} vs {want:?}"
                );
            }
            let (tr, tp) = (
                got.map_get("ttl").unwrap().as_int(),
                want.map_get("ttl").unwrap().as_int(),
            );
            assert!((tr - tp).abs() < 500, "ttl {tr} on replica vs {tp}");
        }
        assert!(matches!(r3.cmd(&args!["LOCK.INFO", key]), Reply::Map(_)));
    }
    for key in ["c", "d", "h", "j"] {
        assert_eq!(r.cmd(&["LOCK.INFO", key]), Reply::Nil);
        assert_eq!(r3.cmd(&["LOCK.INFO", key]), Reply::Null);
    }

    // The replica takes over: promoted, it runs the lock logic on the same
    // state (same owners and counts).
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]).as_str(), "OK");
    assert_eq!(r.cmd(&["LOCK.ACQUIRE", "i", "o7"]), Reply::Int(4));
    assert_eq!(r.cmd(&["LOCK.ACQUIRE", "a", "other"]), Reply::Nil);
    assert_eq!(r.cmd(&["LOCK.RELEASE", "a", "o1"]), Reply::Int(0));
    assert_eq!(r.cmd(&args!["LOCK.RELEASE", "e", uuid]), Reply::Int(0));
    assert_eq!(r.cmd(&["LOCK.ACQUIRE", "c", "o9"]), Reply::Int(1));
}

fn replica_refuses_writes(kind: Kind) {
    let (primary, replica) = pair(kind);
    let mut p = primary.client();
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
        Reply::Int(1)
    );
    wait_replicated(&mut p);
    let mut r = replica.client();
    let before = key_state(&mut r, b"k");
    for cmd in [
        &["LOCK.ACQUIRE", "k", "a"][..],
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.ACQUIRE", "free", "a"],
        &["LOCK.ACQUIRE", "free", "*"],
        &["LOCK.RELEASE", "k", "a"],
        &["LOCK.RENEW", "k", "a"],
        &["LOCK.RENEW", "k", "a", "PX", "100"],
        &["LOCK.FORCERELEASE", "k"],
    ] {
        let got = r.cmd(cmd);
        assert_eq!(got.err_code(), Some("READONLY"), "{cmd:?}: {got:?}");
    }
    assert_eq!(key_state(&mut r, b"k"), before);
    assert_eq!(r.cmd(&["EXISTS", "free"]), Reply::Int(0));
    assert_eq!(
        r.cmd(&["LOCK.INFO", "k"]).map_get("owner"),
        Some(&bulk("a"))
    );
    // The primary still owns the truth.
    assert_eq!(p.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
}

fn replica_subscribers_hear_unlocks(kind: Kind) {
    let (primary, replica) = pair(kind);
    let mut p = primary.client();
    for key in [&b"k"[..], b"{tag}k", b"bin\0"] {
        let ch = channel(key);
        let mut s2 = replica.client();
        let mut s3 = replica.client_resp3();
        s2.cmd(&args!["SUBSCRIBE", ch]);
        s3.cmd(&args!["SUBSCRIBE", ch]);
        let message = vec![bulk("message"), bulk(&ch), bulk("0")];

        assert_eq!(p.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(1));
        assert_eq!(p.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(2));
        assert_eq!(p.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(1));
        wait_replicated(&mut p);
        assert_eq!(s2.try_read_reply(Duration::from_millis(100)), None);
        assert_eq!(s3.try_read_reply(Duration::from_millis(10)), None);

        assert_eq!(p.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(0));
        assert_eq!(
            s2.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Array(message.clone()))
        );
        assert_eq!(
            s3.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Push(message.clone()))
        );

        assert_eq!(p.cmd(&args!["LOCK.ACQUIRE", key, "b"]), Reply::Int(1));
        assert_eq!(p.cmd(&args!["LOCK.FORCERELEASE", key]), Reply::Int(1));
        assert_eq!(
            s2.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Array(message.clone()))
        );
        assert_eq!(
            s3.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Push(message))
        );
        wait_replicated(&mut p);
        assert_eq!(s2.try_read_reply(Duration::from_millis(50)), None);
        assert_eq!(s3.try_read_reply(Duration::from_millis(10)), None);
    }
}

fn replica_never_extends_a_lease(kind: Kind) {
    let (primary, replica) = pair(kind);
    let mut p = primary.client();
    // The primary never deletes expired keys by itself now, so no DEL
    // reaches the replica: it must judge the deadline on its own.
    assert_eq!(p.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).as_str(), "OK");
    // Long enough for WAIT and the checks below on a loaded machine.
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "1000"]),
        Reply::Int(1)
    );
    let deadline = p.cmd(&["PEXPIRETIME", "k"]).as_int();
    wait_replicated(&mut p);
    let mut r = replica.client();
    assert_eq!(r.cmd(&["PEXPIRETIME", "k"]).as_int(), deadline);
    let info = r.cmd(&["LOCK.INFO", "k"]);
    let ttl = info.map_get("ttl").map(Reply::as_int);
    assert!(ttl.is_some_and(|t| t > 0 && t <= 1000), "{info:?}");
    let wait = (deadline - now_ms() + 30).max(0) as u64;
    std::thread::sleep(Duration::from_millis(wait));
    assert_eq!(r.cmd(&["LOCK.INFO", "k"]), Reply::Nil);
    assert_eq!(r.cmd(&["EXISTS", "k"]), Reply::Int(0));
    // The primary agrees (and frees the key when touched).
    assert_eq!(p.cmd(&["LOCK.INFO", "k"]), Reply::Nil);
    assert_eq!(p.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Int(1));
    wait_replicated(&mut p);
    assert_eq!(
        r.cmd(&["LOCK.INFO", "k"]).map_get("owner"),
        Some(&bulk("b"))
    );
}

fn v(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn stream_carries_effects_only(kind: Kind) {
    let primary = Server::start(kind);
    let mut fake = primary.client();
    fake.send(&["SYNC"]);
    let rdb = fake.read_sync_payload();
    assert!(
        rdb.starts_with(b"REDIS") || rdb.starts_with(b"VALKEY"),
        "{:?}",
        &rdb[..rdb.len().min(16)]
    );
    let mut all = Vec::new();
    let mut p = primary.client();
    let deadline = |p: &mut Client, k: &[u8]| p.cmd(&[&b"PEXPIRETIME"[..], k]).as_int().to_string();

    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "k", "o", "PX", "60000"]),
        Reply::Int(1)
    );
    let d1 = deadline(&mut p, b"k");
    std::thread::sleep(Duration::from_millis(3));
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "k", "o", "PX", "70000"]),
        Reply::Int(2)
    );
    let d2 = deadline(&mut p, b"k");
    assert_eq!(
        p.cmd(&["LOCK.RENEW", "k", "o", "PX", "80000"]),
        Reply::Int(1)
    );
    let d3 = deadline(&mut p, b"k");
    assert_eq!(p.cmd(&["LOCK.RELEASE", "k", "o"]), Reply::Int(1));
    // No-ops and errors replicate nothing.
    assert_eq!(p.cmd(&["LOCK.RENEW", "k", "other"]), Reply::Int(0));
    assert_eq!(p.cmd(&["LOCK.ACQUIRE", "k", "other"]), Reply::Nil);
    assert_eq!(
        p.cmd(&["LOCK.RELEASE", "k", "other"]).err_code(),
        Some("NOTOWNER")
    );
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "k", "o", "PX", "0"]).err_code(),
        Some("ERR")
    );
    assert!(p.cmd(&["LOCK.INFO", "k"]).map_get("owner").is_some());
    assert_eq!(p.cmd(&["LOCK.FORCERELEASE", "none"]), Reply::Int(0));
    assert_eq!(p.cmd(&["LOCK.RELEASE", "k", "o"]), Reply::Int(0));
    let uuid = p.cmd(&["LOCK.ACQUIRE", "k2", "*"]).as_bytes().to_vec();
    let d4 = deadline(&mut p, b"k2");
    assert_eq!(p.cmd(&["LOCK.FORCERELEASE", "k2"]), Reply::Int(1));
    assert_eq!(
        p.cmd(&args!["LOCK.ACQUIRE", b"b\0{x}", b"o\0\xff", "EX", 5]),
        Reply::Int(1)
    );
    let d5 = deadline(&mut p, b"b\0{x}");
    p.cmd(&["SET", "marker", "1"]);

    let effects = read_stream_until(&mut fake, "1", &mut all);
    let expected = vec![
        v(&[b"HSET", b"k", b"o", b"1"]),
        v(&[b"PEXPIREAT", b"k", d1.as_bytes()]),
        v(&[b"HSET", b"k", b"o", b"2"]),
        v(&[b"PEXPIREAT", b"k", d2.as_bytes()]),
        v(&[b"PEXPIREAT", b"k", d3.as_bytes()]),
        v(&[b"HSET", b"k", b"o", b"1"]),
        v(&[b"DEL", b"k"]),
        v(&[b"PUBLISH", b"redisson_lock__channel:{k}", b"0"]),
        v(&[b"HSET", b"k2", &uuid, b"1"]),
        v(&[b"PEXPIREAT", b"k2", d4.as_bytes()]),
        v(&[b"DEL", b"k2"]),
        v(&[b"PUBLISH", b"redisson_lock__channel:{k2}", b"0"]),
        v(&[b"HSET", b"b\0{x}", b"o\0\xff", b"1"]),
        v(&[b"PEXPIREAT", b"b\0{x}", d5.as_bytes()]),
    ];
    assert_eq!(effects, expected, "\nreplication stream:\n{}", show(&all));

    // A lapsed lease: the primary's expiry deletes it, nothing is published.
    assert_eq!(
        p.cmd(&["LOCK.ACQUIRE", "lapse", "o", "PX", "20"]),
        Reply::Int(1)
    );
    let d6 = deadline(&mut p, b"lapse");
    assert!(wait_until(Duration::from_secs(2), || {
        p.cmd(&["EXISTS", "lapse"]) == Reply::Int(0)
    }));
    p.cmd(&["SET", "marker", "2"]);
    let mut effects = read_stream_until(&mut fake, "2", &mut all);
    if effects
        .get(2)
        .is_some_and(|c| c[0].eq_ignore_ascii_case(b"UNLINK"))
    {
        effects[2][0] = b"DEL".to_vec(); // lazyfree-lazy-expire
    }
    assert_eq!(
        effects,
        vec![
            v(&[b"HSET", b"lapse", b"o", b"1"]),
            v(&[b"PEXPIREAT", b"lapse", d6.as_bytes()]),
            v(&[b"DEL", b"lapse"]),
        ],
        "\nreplication stream:\n{}",
        show(&all)
    );

    // Inside MULTI/EXEC, a script, and another database: effects again.
    p.cmd(&["MULTI"]);
    p.cmd(&["LOCK.ACQUIRE", "t1", "o", "PX", "60000"]);
    p.cmd(&["LOCK.ACQUIRE", "t1", "o2"]);
    p.cmd(&["LOCK.RENEW", "t1", "other"]);
    assert_eq!(
        p.cmd(&["EXEC"]),
        Reply::Array(vec![Reply::Int(1), Reply::Nil, Reply::Int(0)])
    );
    let d7 = deadline(&mut p, b"t1");
    let script = "redis.call('LOCK.ACQUIRE', KEYS[1], 'o', 'PX', '50000'); \
                  redis.call('LOCK.ACQUIRE', KEYS[1], 'o', 'PX', '50000'); \
                  redis.call('LOCK.RELEASE', KEYS[1], 'o'); \
                  return redis.call('LOCK.RELEASE', KEYS[1], 'o')";
    let t_before = now_ms();
    assert_eq!(p.cmd(&["EVAL", script, "1", "t3"]), Reply::Int(0));
    let t_after = now_ms();
    let mut p9 = primary.client();
    p9.cmd(&["SELECT", "9"]);
    assert_eq!(
        p9.cmd(&["LOCK.ACQUIRE", "t1", "db9", "PX", "60000"]),
        Reply::Int(1)
    );
    let d8 = deadline(&mut p9, b"t1");
    p.cmd(&["SET", "marker", "3"]);
    let start = all.len();
    let effects = read_stream_until(&mut fake, "3", &mut all);
    // The script's deadlines are not observable from outside: check range.
    let lease_of =
        |cmd: &Vec<Vec<u8>>| -> i64 { String::from_utf8_lossy(&cmd[2]).parse::<i64>().unwrap() };
    assert_eq!(effects.len(), 11, "\nreplication stream:\n{}", show(&all));
    for i in [3, 5] {
        assert_eq!(
            effects[i][..2],
            v(&[b"PEXPIREAT", b"t3"])[..],
            "{}",
            show(&all)
        );
        let at = lease_of(&effects[i]);
        assert!(at >= t_before + 50000 && at <= t_after + 50000, "{at}");
    }
    assert_eq!(
        [&effects[..3], &effects[4..5], &effects[6..]].concat(),
        vec![
            v(&[b"HSET", b"t1", b"o", b"1"]),
            v(&[b"PEXPIREAT", b"t1", d7.as_bytes()]),
            v(&[b"HSET", b"t3", b"o", b"1"]),
            // PEXPIREAT t3 ...
            v(&[b"HSET", b"t3", b"o", b"2"]),
            // PEXPIREAT t3 ...
            v(&[b"HSET", b"t3", b"o", b"1"]),
            v(&[b"DEL", b"t3"]),
            v(&[b"PUBLISH", b"redisson_lock__channel:{t3}", b"0"]),
            v(&[b"HSET", b"t1", b"db9", b"1"]),
            v(&[b"PEXPIREAT", b"t1", d8.as_bytes()]),
        ],
        "\nreplication stream:\n{}",
        show(&all)
    );
    // db 9's effects come after a SELECT 9.
    let hset9 = all[start..]
        .iter()
        .position(|c| c == &v(&[b"HSET", b"t1", b"db9", b"1"]))
        .unwrap()
        + start;
    let select = all[..hset9]
        .iter()
        .rev()
        .find(|c| c[0].eq_ignore_ascii_case(b"SELECT"))
        .unwrap();
    assert_eq!(select, &v(&[b"SELECT", b"9"]), "{}", show(&all));

    // Nowhere a LOCK.* command.
    for cmd in &all {
        assert!(
            !cmd[0].to_ascii_lowercase().starts_with(b"lock."),
            "LOCK.* in the replication stream:\n{}",
            show(&all)
        );
    }
}

per_kind!(
    replica_mirrors_locks,
    replica_refuses_writes,
    replica_subscribers_hear_unlocks,
    replica_never_extends_a_lease,
    stream_carries_effects_only,
);
