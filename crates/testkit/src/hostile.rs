//! Hostile input for LOCK.*: random command vectors (random arity, binary
//! arguments, NULs, huge and negative numbers, `*`, repeated and misordered
//! options in random case, keys of every type) and the judge of what a
//! well-formed answer to each is. Shared by the integration test
//! (tests/hostile.rs) and the soak fuzzer (reliability, R4).

use crate::rng::Rng;
use crate::{Client, Reply};

pub const COMMANDS: [&str; 5] = [
    "LOCK.ACQUIRE",
    "LOCK.RELEASE",
    "LOCK.RENEW",
    "LOCK.INFO",
    "LOCK.FORCERELEASE",
];

/// Keys the fuzzer may touch; `seed_keys` gives several other types or
/// non-lock hashes.
pub const KEYS: [&[u8]; 14] = [
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

pub const OWNERS: [&[u8]; 9] = [
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

pub const NUMBERS: [&str; 30] = [
    "0",
    "1",
    "2",
    "1000",
    "-1",
    "-0",
    "00",
    "01",
    "+1",
    " 1",
    "1.5",
    "1e3",
    "0x10",
    "9223372036854775807",
    "9223372036854775806",
    "-9223372036854775808",
    "9223372036854775808",
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

pub fn random_case(rng: &mut Rng, s: &str) -> Vec<u8> {
    s.bytes()
        .map(|b| {
            if rng.chance(50) {
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
            let o = *rng.pick(&["PX", "EX", "BLOCK"]);
            random_case(rng, o)
        }
        7 | 8 => rng.pick(&NUMBERS).as_bytes().to_vec(),
        9 => (rng.next_u64() as i64).to_string().into_bytes(),
        10 => (1 + rng.below(100_000)).to_string().into_bytes(),
        11 => Vec::new(),
        12 => {
            let n = rng.below(40) as usize;
            rng.bytes(n)
        }
        13 => {
            // Around the owner length limit, sometimes far beyond it.
            let n = *rng.pick(&[1023usize, 1024, 1025, 4096, 70_000]);
            vec![rng.next_u64() as u8; n]
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

/// One random command vector: sometimes shaped like a real call, sometimes
/// noise.
pub fn vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    let name = {
        let c = *rng.pick(&COMMANDS);
        random_case(rng, c)
    };
    let which = name.to_ascii_uppercase();
    let mut args = vec![name];
    match rng.below(10) {
        7..=9 => {
            // Well-formed arity, plausible values, options in either order.
            let key = if rng.chance(25) {
                rng.pick(&KEYS)
            } else {
                rng.pick(&KEYS[..5])
            };
            args.push(key.to_vec());
            if which != b"LOCK.INFO" && which != b"LOCK.FORCERELEASE" {
                args.push(rng.pick(&OWNERS).to_vec());
            }
            let value = |rng: &mut Rng| -> Vec<u8> {
                if rng.chance(20) {
                    rng.pick(&NUMBERS).as_bytes().to_vec()
                } else {
                    (1 + rng.below(5000)).to_string().into_bytes()
                }
            };
            if (which == b"LOCK.ACQUIRE" || which == b"LOCK.RENEW") && rng.chance(50) {
                let o = *rng.pick(&["PX", "EX"]);
                args.push(random_case(rng, o));
                args.push(value(rng));
            }
            if which == b"LOCK.ACQUIRE" && rng.chance(33) {
                args.push(random_case(rng, "BLOCK"));
                args.push(value(rng));
                if args.len() == 7 && rng.chance(50) {
                    args[3..].rotate_left(2);
                }
            }
            if (which == b"LOCK.ACQUIRE" || which == b"LOCK.RENEW") && rng.chance(20) {
                args.push(random_case(rng, "KEEPALIVE"));
            }
            if which == b"LOCK.ACQUIRE" && rng.chance(20) {
                args.push(random_case(rng, "TOKEN"));
            }
            if (which == b"LOCK.ACQUIRE" || which == b"LOCK.RENEW") && rng.chance(10) {
                // No replicas in these runs: n > 0 is refused at once.
                args.push(random_case(rng, "REPLICAS"));
                args.push(rng.below(3).to_string().into_bytes());
                args.push(value(rng));
            }
        }
        4..=6 => {
            let n = rng.below(9);
            for i in 0..n {
                args.push(match i {
                    0 => rng.pick(&KEYS).to_vec(),
                    1 => rng.pick(&OWNERS).to_vec(),
                    i if i % 2 == 0 => {
                        let o = *rng.pick(&["PX", "EX", "BLOCK", "KEEPALIVE", "TOKEN", "REPLICAS"]);
                        random_case(rng, o)
                    }
                    _ if rng.chance(33) => token(rng),
                    _ => rng.pick(&NUMBERS).as_bytes().to_vec(),
                });
            }
        }
        _ => {
            for _ in 0..rng.below(9) {
                args.push(token(rng));
            }
        }
    }
    // A valid BLOCK timeout really waits: keep it to a few ms (i64::MAX
    // stays: it overflows the clock and must be refused).
    for i in 1..args.len().saturating_sub(1) {
        if args[i].eq_ignore_ascii_case(b"BLOCK") {
            let v = &args[i + 1];
            let canonical = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|n| n.to_string().as_bytes() == &v[..]);
            if let Some(n) = canonical
                && n >= 0
                && n != i64::MAX
            {
                args[i + 1] = (1 + rng.below(5)).to_string().into_bytes();
            }
        }
    }
    args
}

/// Gives several fuzzed keys other types, or hashes that are not locks.
pub fn seed_keys(c: &mut Client) {
    for cmd in [
        &[
            "DEL", "str", "list", "set", "zset", "stream", "hash2", "hash0",
        ][..],
        &["SET", "str", "v"],
        &["RPUSH", "list", "a", "b"],
        &["SADD", "set", "a"],
        &["ZADD", "zset", "1", "a"],
        &["XADD", "stream", "*", "f", "v"],
        &["HSET", "hash2", "a", "1", "b", "1"],
        &["HSET", "hash0", "a", "0"],
        &["PEXPIRE", "hash0", "100000"],
    ] {
        c.send(cmd);
    }
    for _ in 0..9 {
        c.read_reply();
    }
}

/// How a vector was delivered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Via {
    Plain,
    /// Inside MULTI/EXEC.
    Multi,
    /// Through `EVAL "return redis.pcall(unpack(ARGV))"`.
    Eval,
}

/// Is `r` an acceptable answer to `cmd`? `None` if so, else why not.
pub fn judge(cmd: &[Vec<u8>], r: &Reply, via: Via) -> Option<String> {
    let name = cmd[0].to_ascii_lowercase();
    let ok = match r {
        Reply::Error(text) => {
            ["ERR ", "WRONGTYPE ", "NOTOWNER ", "NOTLOCK ", "NOREPLICAS "]
                .iter()
                .any(|code| text.starts_with(code))
                && !text.contains("internal error")
        }
        Reply::Int(_) => name != b"lock.info",
        Reply::Nil | Reply::Null => name == b"lock.acquire" || name == b"lock.info",
        // Lua turns nil into false, which RESP3 clients may see as a boolean.
        Reply::Bool(false) => via == Via::Eval && (name == b"lock.acquire" || name == b"lock.info"),
        // A generated owner.
        Reply::Bulk(b) => {
            name == b"lock.acquire" && cmd.get(2).is_some_and(|o| o == b"*") && b.len() == 36
        }
        // LOCK.INFO of a held lock (a map flattens in RESP2 and in Lua).
        Reply::Array(a) if name == b"lock.info" => a.len() == 12,
        Reply::Map(m) => name == b"lock.info" && m.len() == 6,
        // LOCK.ACQUIRE ... TOKEN: [hold count or owner, token].
        Reply::Array(a) => {
            name == b"lock.acquire"
                && cmd.iter().any(|w| w.eq_ignore_ascii_case(b"TOKEN"))
                && matches!(a.as_slice(), [Reply::Int(_) | Reply::Bulk(_), Reply::Int(t)] if *t > 0)
        }
        _ => false,
    };
    (!ok).then(|| format!("{} → {r:?}", describe(cmd)))
}

pub fn describe(cmd: &[Vec<u8>]) -> String {
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
