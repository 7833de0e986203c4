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

/// xorshift64*: tiny, deterministic, good enough to pick test inputs.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

const COMMANDS: [&str; 5] = [
    "LOCK.ACQUIRE",
    "LOCK.RELEASE",
    "LOCK.RENEW",
    "LOCK.INFO",
    "LOCK.FORCERELEASE",
];

/// Keys the fuzzer may touch; `seed_keys` gives several of them other types
/// or non-lock hashes.
const KEYS: [&[u8]; 14] = [
    b"k0",
    b"k1",
    b"k2",
    b"{t}k3",
    b"\0bin\xff",
    b"",
    b"*",
    b"str",
    b"list",
    b"set",
    b"zset",
    b"stream",
    b"hash2",
    b"hash0",
];

const OWNERS: [&[u8]; 9] = [
    b"a",
    b"b",
    b"*",
    b"**",
    b"\0",
    b"\xff\xfe",
    b"o\r\nw",
    b"PX",
    b"BLOCK",
];

const OPTIONS: [&str; 3] = ["PX", "EX", "BLOCK"];

const NUMBERS: [&str; 34] = [
    "0",
    "1",
    "2",
    "10",
    "100",
    "1000",
    "-1",
    "-0",
    "00",
    "01",
    "+1",
    " 1",
    "1 ",
    "1.5",
    "1e3",
    "0x10",
    "9223372036854775807",
    "9223372036854775806",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999",
    "999999999999999999999999999999",
    "9223372036854776",
    "9223372036854775",
    "9223372036854775000",
    "315360000000",
    "inf",
    "nan",
    "-",
    "\u{0663}",
    "1\0",
    "\0",
];

fn random_case(rng: &mut Rng, s: &str) -> Vec<u8> {
    s.bytes()
        .map(|b| {
            if rng.below(2) == 0 {
                b.to_ascii_lowercase()
            } else {
                b.to_ascii_uppercase()
            }
        })
        .collect()
}

fn token(rng: &mut Rng) -> Vec<u8> {
    match rng.below(16) {
        0..=2 => rng.pick(&KEYS).to_vec(),
        3 => rng.pick(&OWNERS).to_vec(),
        4 => b"*".to_vec(),
        5 | 6 => {
            let o = *rng.pick(&OPTIONS);
            random_case(rng, o)
        }
        7 | 8 => rng.pick(&NUMBERS).as_bytes().to_vec(),
        9 => (rng.next() as i64).to_string().into_bytes(),
        10 => (1 + rng.below(100_000)).to_string().into_bytes(),
        11 => Vec::new(),
        12 => {
            let n = rng.below(40);
            rng.bytes(n)
        }
        13 => {
            // Around the owner length limit, sometimes far beyond it.
            let n = *rng.pick(&[1023usize, 1024, 1025, 1026, 4096, 70_000]);
            let fill = rng.next() as u8;
            vec![fill; n]
        }
        14 => {
            let n = 1 + rng.below(25);
            (0..n).map(|_| b'0' + rng.below(10) as u8).collect()
        }
        _ => {
            let c = *rng.pick(&COMMANDS);
            random_case(rng, c)
        }
    }
}

/// One random command: sometimes shaped like a real call (key, owner,
/// option/value pairs), sometimes pure noise.
fn vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    let name = {
        let c = *rng.pick(&COMMANDS);
        random_case(rng, c)
    };
    let n = rng.below(9);
    let mut args = vec![name];
    let mode = rng.below(10);
    if mode >= 7 {
        // Well-formed: the right arity, plausible values (sometimes not).
        let which = args[0].to_ascii_uppercase();
        // Mostly lock keys, so that locks are taken, re-entered and freed.
        let key = if rng.below(4) == 0 {
            rng.pick(&KEYS)
        } else {
            rng.pick(&KEYS[..5])
        };
        args.push(key.to_vec());
        if which != b"LOCK.INFO" && which != b"LOCK.FORCERELEASE" {
            args.push(rng.pick(&OWNERS).to_vec());
        }
        let value = |rng: &mut Rng| -> Vec<u8> {
            if rng.below(5) == 0 {
                rng.pick(&NUMBERS).as_bytes().to_vec()
            } else {
                (1 + rng.below(5000)).to_string().into_bytes()
            }
        };
        if which == b"LOCK.ACQUIRE" || which == b"LOCK.RENEW" {
            if rng.below(2) == 0 {
                let o = *rng.pick(&["PX", "EX"]);
                args.push(random_case(rng, o));
                args.push(value(rng));
            }
        }
        if which == b"LOCK.ACQUIRE" && rng.below(3) == 0 {
            args.push(random_case(rng, "BLOCK"));
            args.push(value(rng));
            if rng.below(2) == 0 && args.len() == 7 {
                // Options in the other order.
                args[3..].rotate_left(2);
            }
        }
    } else if mode >= 4 {
        for i in 0..n {
            args.push(match i {
                0 => rng.pick(&KEYS).to_vec(),
                1 => rng.pick(&OWNERS).to_vec(),
                i if i % 2 == 0 => {
                    let o = *rng.pick(&OPTIONS);
                    random_case(rng, o)
                }
                _ => {
                    if rng.below(3) == 0 {
                        token(rng)
                    } else {
                        rng.pick(&NUMBERS).as_bytes().to_vec()
                    }
                }
            });
        }
    } else {
        for _ in 0..n {
            args.push(token(rng));
        }
    }
    // A valid BLOCK timeout may one day really wait: keep it to a few ms
    // (i64::MAX stays: it overflows the clock and must be refused).
    for i in 1..args.len().saturating_sub(1) {
        if args[i].eq_ignore_ascii_case(b"BLOCK") {
            let v = &args[i + 1];
            let canonical = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|n| n.to_string().as_bytes() == &v[..]);
            if let Some(n) = canonical {
                if n >= 0 && n != i64::MAX {
                    args[i + 1] = (1 + rng.below(5)).to_string().into_bytes();
                }
            }
        }
    }
    args
}

fn seed_keys(c: &mut Client) {
    c.cmd(&[
        "DEL", "str", "list", "set", "zset", "stream", "hash2", "hash0",
    ]);
    c.cmd(&["SET", "str", "v"]);
    c.cmd(&["RPUSH", "list", "a", "b"]);
    c.cmd(&["SADD", "set", "a"]);
    c.cmd(&["ZADD", "zset", "1", "a"]);
    c.cmd(&["XADD", "stream", "*", "f", "v"]);
    c.cmd(&["HSET", "hash2", "a", "1", "b", "1"]);
    c.cmd(&["HSET", "hash0", "a", "0"]);
    c.cmd(&["PEXPIRE", "hash0", "100000"]);
}

fn describe(cmd: &[Vec<u8>]) -> String {
    cmd.iter()
        .map(|a| {
            if a.len() > 40 {
                format!("<{} bytes>", a.len())
            } else {
                format!("{:?}", a.escape_ascii().to_string())
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[track_caller]
fn check_reply(cmd: &[Vec<u8>], r: &Reply) {
    let name = cmd[0].to_ascii_lowercase();
    let ok = match r {
        Reply::Error(text) => {
            ["ERR ", "WRONGTYPE ", "NOTOWNER ", "NOTLOCK "]
                .iter()
                .any(|code| text.starts_with(code))
                && !text.contains("internal error")
        }
        Reply::Int(_) => name != b"lock.info",
        Reply::Nil | Reply::Null => name == b"lock.acquire" || name == b"lock.info",
        // A generated owner.
        Reply::Bulk(b) => name == b"lock.acquire" && cmd[2] == b"*" && b.len() == 36,
        // LOCK.INFO of a held lock.
        Reply::Array(a) => name == b"lock.info" && a.len() == 8,
        Reply::Map(m) => name == b"lock.info" && m.len() == 4,
        _ => false,
    };
    assert!(ok, "{} → {r:?}", describe(cmd));
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
    for key in keys {
        let cmds: Vec<Vec<&[u8]>> = vec![
            vec![b"LOCK.ACQUIRE", key, b"a"],
            vec![b"LOCK.ACQUIRE", key, b"*"],
            vec![b"LOCK.ACQUIRE", key, b"v"],
            vec![b"LOCK.ACQUIRE", key, b"a", b"PX", b"100"],
            vec![b"LOCK.ACQUIRE", key, b"a", b"EX", b"1", b"BLOCK", b"5"],
            vec![b"LOCK.RELEASE", key, b"a"],
            vec![b"LOCK.RELEASE", key, b"*"],
            vec![b"LOCK.RENEW", key, b"a"],
            vec![b"LOCK.RENEW", key, b"a", b"PX", b"100"],
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
