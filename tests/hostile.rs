//! Malformed input never crashes or stalls the server: 100k option words,
//! 8 MB arguments, and pipelined bursts of valid and random LOCK.* calls
//! from several connections, each answered well-formed, in order. Every
//! command on keys of every other type → WRONGTYPE, no change.
//!
//! The random-vector fuzzer itself (100,000 vectors per server, plain, in
//! MULTI and in EVAL, with untouched sentinels and every kind of answer
//! seen) is R4 of the reliability suite, run short by `make test`
//! (reliability/tests/short.rs).

mod common;

use std::time::{Duration, Instant};

use common::*;
use testkit::hostile::{Via, describe, judge, vector};
use testkit::rng::Rng;

/// Every answer must be well-formed for its command (testkit's judge).
#[track_caller]
fn check_reply(cmd: &[Vec<u8>], r: &Reply) {
    if let Some(why) = judge(cmd, r, Via::Plain) {
        panic!("{why}");
    }
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
    many_and_huge_arguments,
    wrong_type_every_type,
    pipelined_bursts_stay_responsive,
);
