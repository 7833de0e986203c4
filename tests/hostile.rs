//! Malformed input never crashes or stalls the server. Thousands of random
//! LOCK.* calls (deterministic xorshift, 0..8 binary arguments: NULs, huge
//! and negative numbers, `*`, repeated options, random case, keys of every
//! type) must each get a well-formed value or an error with one of the
//! module's codes; afterwards the server answers PING, keys outside the
//! fuzzed set are untouched, and the log shows no panic.
//! Also: every command on keys of every other type → WRONGTYPE, no change.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testkit::hostile::{Via, describe, judge, seed_keys, vector};
use testkit::rng::Rng;

/// Every answer must be well-formed for its command (testkit's judge).
#[track_caller]
fn check_reply(cmd: &[Vec<u8>], r: &Reply) {
    if let Some(why) = judge(cmd, r, Via::Plain) {
        panic!("{why}");
    }
}

fn random_vectors(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    // Sentinels: never in the fuzzed key set.
    admin.cmd(&["SET", "sentinel:str", "keep\0me"]);
    admin.cmd(&["LOCK.ACQUIRE", "sentinel:lock", "keeper", "PX", "600000"]);
    admin.cmd(&["LOCK.ACQUIRE", "sentinel:lock", "keeper", "PX", "600000"]);
    let sentinels = [
        key_state(&mut admin, b"sentinel:str"),
        key_state(&mut admin, b"sentinel:lock"),
    ];

    let mut rng = Rng::new(0x5eed_1234_abcd_0001 ^ kind as u64);
    let mut c2 = s.client();
    let mut c3 = s.client_resp3();
    let t0 = Instant::now();
    const BATCHES: usize = 60;
    const PER_BATCH: usize = 100;
    let mut errors = 0;
    let mut values = 0;
    // What kinds of answers came back: each should show up.
    let mut seen = std::collections::BTreeMap::new();
    for batch in 0..BATCHES {
        seed_keys(&mut admin);
        let c = if batch % 2 == 0 { &mut c2 } else { &mut c3 };
        let cmds: Vec<Vec<Vec<u8>>> = (0..PER_BATCH).map(|_| vector(&mut rng)).collect();
        for cmd in &cmds {
            c.send(cmd);
        }
        for cmd in &cmds {
            let r = c.read_reply();
            check_reply(cmd, &r);
            if r.is_error() {
                errors += 1;
            } else {
                values += 1;
            }
            let answer: String = match &r {
                Reply::Error(t) => t.split(' ').next().unwrap().to_string(),
                Reply::Int(n) if *n > 1 => "Int>1".to_string(),
                other => format!("{:?}", other).chars().take(4).collect(),
            };
            *seen.entry(answer).or_insert(0) += 1;
        }
    }
    eprintln!(
        "{kind}: {} vectors ({values} values, {errors} errors) in {:?}: {seen:?}",
        BATCHES * PER_BATCH,
        t0.elapsed()
    );
    assert!(
        values > 1000 && errors > 1000,
        "{values} values, {errors} errors"
    );
    for kind_of_answer in [
        "ERR",
        "WRONGTYPE",
        "NOTOWNER",
        "NOTLOCK",
        "Int(",
        "Int>1",
        "Nil",
        "Null",
        "Bulk",
        "Arra",
        "Map{",
    ] {
        assert!(
            seen.contains_key(kind_of_answer),
            "no {kind_of_answer} among {seen:?}"
        );
    }

    assert_eq!(admin.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert_eq!(c2.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert_eq!(
        [
            key_state(&mut admin, b"sentinel:str"),
            key_state(&mut admin, b"sentinel:lock"),
        ],
        sentinels
    );
    assert_eq!(
        admin.cmd(&["LOCK.RELEASE", "sentinel:lock", "keeper"]),
        Reply::Int(1)
    );
    let log = s.log().to_lowercase();
    assert!(!log.contains("panic"), "panic in the server log:\n{log}");
}

fn many_and_huge_arguments(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.set_timeout(Some(Duration::from_secs(10)));
    // 100k option words.
    let mut cmd: Vec<Vec<u8>> = vec![b"LOCK.ACQUIRE".to_vec(), b"k".to_vec(), b"o".to_vec()];
    for _ in 0..50_000 {
        cmd.push(b"PX".to_vec());
        cmd.push(b"1".to_vec());
    }
    let r = c.cmd(&cmd);
    assert!(
        matches!(&r, Reply::Error(t) if t.starts_with("ERR syntax error: ")),
        "{r:?}"
    );
    cmd[0] = b"LOCK.RENEW".to_vec();
    let r = c.cmd(&cmd);
    assert!(
        matches!(&r, Reply::Error(t) if t.starts_with("ERR syntax error: ")),
        "{r:?}"
    );
    cmd[0] = b"LOCK.RELEASE".to_vec();
    assert_eq!(c.cmd(&cmd).err_code(), Some("ERR"));
    // 8 MB owner and key.
    let big = vec![b'x'; 8 << 20];
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", &big]),
        Reply::Error("ERR invalid owner: must be 1 to 1024 bytes".into())
    );
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", &big, "o"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&args!["LOCK.INFO", &big]).map_get("holds"),
        Some(&Reply::Int(1))
    );
    assert_eq!(c.cmd(&args!["LOCK.FORCERELEASE", &big]), Reply::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert!(!s.log().to_lowercase().contains("panic"));
}

fn wrong_type_every_type(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    c.cmd(&["SET", "string", "v"]);
    c.cmd(&["RPUSH", "list", "a", "b"]);
    c.cmd(&["SADD", "set", "a", "b"]);
    c.cmd(&["SADD", "intset", "1", "2"]);
    c.cmd(&["ZADD", "zset", "1", "a"]);
    c.cmd(&["XADD", "stream", "*", "f", "v"]);
    c.cmd(&["SET", "number", "1"]);
    c.cmd(&["PFADD", "hll", "a"]);
    // Some with an expiry, which must survive untouched too.
    for k in ["list", "zset", "number"] {
        c.cmd(&["PEXPIRE", k, "100000"]);
    }
    let keys: [&[u8]; 8] = [
        b"string", b"list", b"set", b"intset", b"zset", b"stream", b"number", b"hll",
    ];
    let all_before: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
    for key in keys {
        let cmds: Vec<Vec<&[u8]>> = vec![
            vec![b"LOCK.ACQUIRE", key, b"a"],
            vec![b"LOCK.ACQUIRE", key, b"*"],
            vec![b"LOCK.ACQUIRE", key, b"v"],
            vec![b"LOCK.ACQUIRE", key, b"a", b"PX", b"100"],
            vec![b"LOCK.ACQUIRE", key, b"a", b"BLOCK", b"10"],
            vec![b"LOCK.ACQUIRE", key, b"a", b"EX", b"1", b"BLOCK", b"5"],
            vec![b"LOCK.RELEASE", key, b"a"],
            vec![b"LOCK.RELEASE", key, b"*"],
            vec![b"LOCK.RENEW", key, b"a"],
            vec![b"LOCK.RENEW", key, b"a", b"PX", b"100"],
            vec![b"LOCK.RENEW", key, b"a", b"EX", b"1"],
            vec![b"LOCK.INFO", key],
            vec![b"LOCK.FORCERELEASE", key],
        ];
        for cmd in &cmds {
            for conn in [&mut c, &mut c3] {
                let before = key_state(conn, key);
                let r = conn.cmd(cmd);
                assert_eq!(
                    r,
                    Reply::Error(
                        "WRONGTYPE Operation against a key holding the wrong kind of value".into()
                    ),
                    "{}",
                    describe(&cmd.iter().map(|a| a.to_vec()).collect::<Vec<_>>())
                );
                assert_eq!(key_state(conn, key), before);
            }
        }
    }
    // Nor did any refusal touch another key.
    let all_after: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
    assert_eq!(all_after, all_before);
    assert!(!s.log().to_lowercase().contains("panic"));
}

fn pipelined_bursts_stay_responsive(kind: Kind) {
    // A flood of valid and invalid calls from several connections at once:
    // every one answered, in order, and quickly.
    let s = Server::start(kind);
    let port = s.port;
    let t0 = Instant::now();
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                let mut rng = Rng::new(0xfeed + t);
                for _ in 0..10 {
                    let mut sent = Vec::new();
                    for i in 0..200 {
                        let owner = format!("t{t}");
                        let cmd: Vec<Vec<u8>> = match i % 4 {
                            0 => args!["LOCK.ACQUIRE", "shared", owner, "PX", 50].to_vec(),
                            1 => args!["LOCK.RELEASE", "shared", owner].to_vec(),
                            2 => args!["LOCK.INFO", "shared"].to_vec(),
                            _ => vector(&mut rng),
                        };
                        c.send(&cmd);
                        sent.push(cmd);
                    }
                    for cmd in &sent {
                        let r = c.read_reply();
                        check_reply(cmd, &r);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread failed");
    }
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(s.client().cmd(&["PING"]), Reply::Status("PONG".into()));
    assert!(!s.log().to_lowercase().contains("panic"));
}

per_kind!(
    random_vectors,
    many_and_huge_arguments,
    wrong_type_every_type,
    pipelined_bursts_stay_responsive,
);
