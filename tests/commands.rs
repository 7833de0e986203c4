//! Every LOCK.* command's replies and errors, over RESP2 and RESP3, against
//! both servers: re-entry, leases, the default lease and its config, the
//! generated owner `*`, expiry, binary safety, key positions, and "an error
//! changes nothing" (the key's full contents and deadline are compared
//! before and after every refused command). Keys of every other type
//! (WRONGTYPE) are covered in tests/hostile.rs.

mod common;

use std::time::{Duration, Instant};

use common::*;

const NOTOWNER: &str = "NOTOWNER lock not held by this owner (";
const BAD_OWNER: &str = "ERR invalid owner: must be 1 to 1024 bytes";
const BAD_LEASE: &str = "ERR invalid lease: ";
const SYNTAX: &str = "ERR syntax error: ";
const BAD_BLOCK: &str = "ERR invalid BLOCK timeout";

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

/// Asserts an error reply: its code, and that the text starts with `prefix`.
#[track_caller]
fn assert_err(r: &Reply, code: &str, prefix: &str) {
    assert_eq!(r.err_code(), Some(code), "{r:?}");
    match r {
        Reply::Error(text) => assert!(
            text.starts_with(prefix),
            "error {text:?} does not start with {prefix:?}"
        ),
        _ => unreachable!(),
    }
}

/// Runs `cmd` on `c`, asserts it fails with `code`/`prefix`, and that the
/// keys in `watch` are exactly as before.
#[track_caller]
fn refused(c: &mut Client, cmd: &[Vec<u8>], code: &str, prefix: &str, watch: &[&[u8]]) {
    let before: Vec<_> = watch.iter().map(|k| key_state(c, k)).collect();
    let r = c.cmd(cmd);
    assert_err(&r, code, prefix);
    let after: Vec<_> = watch.iter().map(|k| key_state(c, k)).collect();
    assert_eq!(
        before,
        after,
        "{} changed a key although it failed with {r:?}",
        cmd.iter()
            .map(|a| a.escape_ascii().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Builds a command from a name and string arguments.
fn cmdv(name: &str, rest: &[&[u8]]) -> Vec<Vec<u8>> {
    std::iter::once(name.as_bytes().to_vec())
        .chain(rest.iter().map(|a| a.to_vec()))
        .collect()
}

#[track_caller]
fn pttl(c: &mut Client, key: &[u8]) -> i64 {
    c.cmd(&[&b"PTTL"[..], key]).as_int()
}

/// The command just before gave the key a lease of `lease` ms: PTTL is
/// `lease` minus the time since, at most 1.5 s on a loaded machine. A key
/// without an expiry (PTTL -1) or without the key (-2) always fails, however
/// short the lease.
#[track_caller]
fn assert_lease(c: &mut Client, key: &[u8], lease: i64) {
    let t = pttl(c, key);
    assert_lease_left(key, t, lease);
}

/// `pttl` is what is left of a lease of `lease` ms set just before.
#[track_caller]
fn assert_lease_left(key: &[u8], pttl: i64, lease: i64) {
    assert!(
        (0..=lease).contains(&pttl) && pttl > lease - 1500,
        "PTTL of {} is {pttl}, expected {lease} minus at most 1.5 s \
         (-1: no expiry, -2: no key)",
        key.escape_ascii()
    );
}

/// Sends `cmd` and PTTL of `key` in one pipeline: the server runs them back
/// to back, so a lease shorter than a loaded machine's round trip is still
/// seen whole. Returns `cmd`'s reply and the PTTL.
#[track_caller]
fn with_pttl(c: &mut Client, cmd: &[&str], key: &str) -> (Reply, i64) {
    c.send(cmd);
    c.send(&["PTTL", key]);
    (c.read_reply(), c.read_reply().as_int())
}

#[track_caller]
fn holds_of(c: &mut Client, key: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    hash_and_deadline(c, key).0
}

fn pair(f: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (f.to_vec(), v.to_vec())
}

/// A UUID v4 in hyphenated lower case.
#[track_caller]
fn assert_uuid_v4(s: &[u8]) {
    let text = std::str::from_utf8(s).unwrap_or_else(|_| panic!("owner not UTF-8: {s:?}"));
    assert_eq!(text.len(), 36, "{text}");
    for (i, ch) in text.char_indices() {
        if [8, 13, 18, 23].contains(&i) {
            assert_eq!(ch, '-', "{text}");
        } else {
            assert!(
                ch.is_ascii_digit() || ('a'..='f').contains(&ch),
                "{text}: not lower-case hex at {i}"
            );
        }
    }
    assert_eq!(&text[14..15], "4", "{text}: not version 4");
    assert!(
        "89ab".contains(&text[19..20]),
        "{text}: not RFC 4122 variant"
    );
}

// ---------------------------------------------------------------- ACQUIRE

fn acquire_reentry_and_lease(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();

    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", "a", "PX", 10000]),
        Reply::Int(1)
    );
    assert_eq!(holds_of(&mut c, b"k"), vec![pair(b"a", b"1")]);
    assert_lease(&mut c, b"k", 10000);

    // Re-entry: count + 1, lease set from now (longer...)
    assert_eq!(
        c3.cmd(&args!["LOCK.ACQUIRE", "k", "a", "PX", 60000]),
        Reply::Int(2)
    );
    assert_eq!(holds_of(&mut c, b"k"), vec![pair(b"a", b"2")]);
    assert_lease(&mut c, b"k", 60000);
    // ... or shorter: the lease is what this call says, not the longest.
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", "a", "PX", 2000]),
        Reply::Int(3)
    );
    assert_lease(&mut c, b"k", 2000);
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", "a", "EX", 50]),
        Reply::Int(4)
    );
    assert_lease(&mut c, b"k", 50000);
    assert_eq!(holds_of(&mut c, b"k"), vec![pair(b"a", b"4")]);

    // Another owner: nil (RESP2 null bulk, RESP3 null), nothing changes.
    let before = key_state(&mut c, b"k");
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", "b", "PX", 5000]),
        Reply::Nil
    );
    assert_eq!(c3.cmd(&args!["LOCK.ACQUIRE", "k", "b"]), Reply::Null);
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", "*"]), Reply::Nil);
    assert_eq!(
        c3.cmd(&args!["LOCK.ACQUIRE", "k", "*", "EX", 1]),
        Reply::Null
    );
    assert_eq!(key_state(&mut c, b"k"), before);

    // Owners are exact byte strings: case and trailing bytes matter.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", "A"]), Reply::Nil);
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", "a "]), Reply::Nil);
    assert_eq!(key_state(&mut c, b"k"), before);

    // Two keys are two locks.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k2", "b"]), Reply::Int(1));
    assert_eq!(c3.cmd(&args!["LOCK.ACQUIRE", "k3", "a"]), Reply::Int(1));
}

fn px_and_ex(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "ex", "a", "EX", 7]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"ex", 7000);
    // 7 ms may be gone before a separate PTTL arrives: ask in the same
    // transaction. The key must have a lease (PTTL -1 would be no expiry).
    assert_eq!(c.cmd(&["MULTI"]), Reply::Status("OK".into()));
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "px", "a", "PX", 7]),
        Reply::Status("QUEUED".into())
    );
    assert_eq!(c.cmd(&["PTTL", "px"]), Reply::Status("QUEUED".into()));
    let exec = c.cmd(&["EXEC"]);
    let r = exec.as_array();
    assert_eq!(r.len(), 2, "{exec:?}");
    assert_eq!(r[0], Reply::Int(1));
    let t = r[1].as_int();
    // The lease counts from when LOCK.ACQUIRE ran (the server clock then);
    // Valkey's PTTL counts from when EXEC began (its command-time
    // snapshot): a server descheduled in between (a loaded CI machine saw
    // 8) adds that gap. What matters: milliseconds, not seconds or none.
    assert!(t > 0 && t <= 50, "PTTL of px is {t}, expected 1..=50");
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "px2", "a", "PX", 7000]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"px2", 7000);

    // The deadline is absolute: PEXPIRETIME = server time + lease.
    let t0 = now_ms();
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "abs", "a", "PX", 123456]),
        Reply::Int(1)
    );
    let t1 = now_ms();
    let at = c.cmd(&["PEXPIRETIME", "abs"]).as_int();
    assert!(at >= t0 + 123456 && at <= t1 + 123456, "{t0} {at} {t1}");

    // Huge leases that do not overflow are fine.
    let huge: i64 = 9_000_000_000_000_000_000;
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "huge", "a", "PX", huge]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"huge", huge);
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "huge2", "a", "EX", huge / 1000]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"huge2", huge);
    let info = c.cmd(&["LOCK.INFO", "huge"]);
    let ttl = info.map_get("ttl").unwrap().as_int();
    assert!(ttl > huge - 1500 && ttl <= huge, "{info:?}");
}

fn options_any_case_any_order(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let cases: [(&[&str], i64); 8] = [
        (&["px", "5000"], 5000),
        (&["Px", "6000"], 6000),
        (&["eX", "7"], 7000),
        (&["ex", "8"], 8000),
        (&["block", "10", "px", "9000"], 9000),
        (&["PX", "11000", "BlOcK", "0"], 11000),
        (&["Block", "5", "Ex", "12"], 12000),
        (&["pX", "13000", "bLOCK", "1"], 13000),
    ];
    let mut expected = 0;
    for (opts, lease) in cases {
        let mut cmd = vec!["LOCK.ACQUIRE", "k", "a"];
        cmd.extend_from_slice(opts);
        expected += 1;
        // Held by `a` itself: BLOCK never waits for a re-entry.
        assert_eq!(c.cmd(&cmd), Reply::Int(expected), "{cmd:?}");
        assert_lease(&mut c, b"k", lease);
    }
    // On a free lock BLOCK grants at once, options in any order.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k2", "b", "BLOCK", "5", "EX", "3"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k2", 3000);
    // RENEW takes the same lease options.
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "k", "a", "pX", "4000"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 4000);
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a", "Ex", "44"]), Reply::Int(1));
    assert_lease(&mut c, b"k", 44000);
    // Command names are case-insensitive too.
    assert_eq!(c.cmd(&["lock.acquire", "k", "a"]), Reply::Int(9));
    assert_eq!(c.cmd(&["Lock.Release", "k", "a"]), Reply::Int(8));
    assert_eq!(
        c.cmd(&["lock.info", "k"]).map_get("holds"),
        Some(&Reply::Int(8))
    );
    assert_eq!(c.cmd(&["LOCK.forcerelease", "k"]), Reply::Int(1));
}

fn default_lease_and_config(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock.default-lease-ms"]),
        Reply::Array(vec![bulk("lock.default-lease-ms"), bulk("30000")])
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_lease(&mut c, b"k", 30000);
    // Re-entry without a lease: default again.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "1000000"]),
        Reply::Int(2)
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(3));
    assert_lease(&mut c, b"k", 30000);

    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lock.default-lease-ms", "5000"]),
        Reply::Status("OK".into())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock.default-lease-ms"]),
        Reply::Array(vec![bulk("lock.default-lease-ms"), bulk("5000")])
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k2", "a"]), Reply::Int(1));
    assert_lease(&mut c, b"k2", 5000);
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(1));
    assert_lease(&mut c, b"k", 5000);
    // An explicit lease still wins.
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "k", "a", "PX", "20000"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 20000);

    // Out-of-range values are refused and change nothing.
    for bad in ["0", "-1", "abc", "1.5", "", "315360000001"] {
        let r = c.cmd(&["CONFIG", "SET", "lock.default-lease-ms", bad]);
        assert_eq!(r.err_code(), Some("ERR"), "{bad:?}: {r:?}");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock.default-lease-ms"])
            .as_array()[1],
        bulk("5000")
    );
    // The largest allowed value (ten years).
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lock.default-lease-ms", "315360000000"]),
        Reply::Status("OK".into())
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k3", "a"]), Reply::Int(1));
    assert_lease(&mut c, b"k3", 315360000000);
}

fn default_lease_from_module_args(kind: Kind) {
    // --loadmodule path default-lease-ms 1234
    let s = Server::builder(kind)
        .module_arg("default-lease-ms")
        .module_arg("1234")
        .start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock.default-lease-ms"])
            .as_array()[1],
        bulk("1234")
    );
    let (r, left) = with_pttl(&mut c, &["LOCK.ACQUIRE", "k", "a"], "k");
    assert_eq!(r, Reply::Int(1));
    assert_lease_left(b"k", left, 1234);

    // MODULE LOAD path default-lease-ms N
    let s = Server::builder(kind).no_module().start();
    let mut c = s.client();
    let path = server::module_path();
    let r = c.cmd(&args![
        "MODULE",
        "LOAD",
        path.display().to_string(),
        "default-lease-ms",
        "777"
    ]);
    assert_eq!(r, Reply::Status("OK".into()));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock.default-lease-ms"])
            .as_array()[1],
        bulk("777")
    );
    let (r, left) = with_pttl(&mut c, &["LOCK.ACQUIRE", "k", "a"], "k");
    assert_eq!(r, Reply::Int(1));
    assert_lease_left(b"k", left, 777);
}

fn generated_owner(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();

    let mut seen = std::collections::HashSet::new();
    for i in 0..20 {
        let key = format!("g{i}");
        let c = if i % 2 == 0 { &mut c } else { &mut c3 };
        let r = c.cmd(&args!["LOCK.ACQUIRE", key, "*", "PX", 60000]);
        let Reply::Bulk(owner) = r else {
            panic!("ACQUIRE * replied {r:?}")
        };
        assert_uuid_v4(&owner);
        assert!(seen.insert(owner.clone()), "UUID repeated");
        // The generated owner holds the lock, with count 1 and the lease.
        assert_eq!(
            holds_of(c, key.as_bytes()),
            vec![(owner.clone(), b"1".to_vec())]
        );
        assert_lease(c, key.as_bytes(), 60000);
        assert_eq!(
            c.cmd(&args!["LOCK.INFO", key]).map_get("owner"),
            Some(&bulk(&owner))
        );
    }

    let owner = c.cmd(&["LOCK.ACQUIRE", "k", "*"]).as_bytes().to_vec();
    assert_lease(&mut c, b"k", 30000);
    // `*` again: a new UUID, which is another owner: nil.
    let before = key_state(&mut c, b"k");
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "*"]), Reply::Nil);
    assert_eq!(c3.cmd(&["LOCK.ACQUIRE", "k", "*"]), Reply::Null);
    // `*` never holds anything: RELEASE/RENEW with it find no holder.
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"*"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "*"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "*", "PX", "5"]), Reply::Int(0));
    assert_eq!(key_state(&mut c, b"k"), before);
    // The generated owner behaves like any other owner.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", &owner]), Reply::Int(2));
    assert_eq!(
        c.cmd(&args!["LOCK.RENEW", "k", &owner, "PX", 9000]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 9000);
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "k", &owner]), Reply::Int(1));
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "k", &owner]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    // RELEASE/RENEW with `*` on a free lock: no holder either.
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"*"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "*"]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));

    // A hash whose only field is `*` is not a lock at all (the owner `*`
    // never holds one): every command says NOTLOCK and changes nothing.
    c.cmd(&["HSET", "star", "*", "1"]);
    c.cmd(&["PEXPIRE", "star", "100000"]);
    let before = key_state(&mut c, b"star");
    for cmd in [
        cmdv("LOCK.RELEASE", &[b"star", b"*"]),
        cmdv("LOCK.RELEASE", &[b"star", b"x"]),
        cmdv("LOCK.RENEW", &[b"star", b"*", b"PX", b"10"]),
        cmdv("LOCK.RENEW", &[b"star", b"x"]),
        cmdv("LOCK.ACQUIRE", &[b"star", b"*"]),
        cmdv("LOCK.ACQUIRE", &[b"star", b"x"]),
        cmdv("LOCK.INFO", &[b"star"]),
        cmdv("LOCK.FORCERELEASE", &[b"star"]),
    ] {
        refused(&mut c, &cmd, "NOTLOCK", "NOTLOCK ", &[b"star"]);
    }
    assert_eq!(key_state(&mut c, b"star"), before);

    // With BLOCK on a free lock: granted at once, the reply is the owner.
    let r = c3.cmd(&["LOCK.ACQUIRE", "gb", "*", "BLOCK", "10", "PX", "5000"]);
    let Reply::Bulk(uuid) = &r else {
        panic!("{r:?}")
    };
    assert_uuid_v4(uuid);
    assert_eq!(holds_of(&mut c, b"gb"), vec![(uuid.clone(), b"1".to_vec())]);

    // Owners that merely contain `*` are ordinary owners.
    for o in ["**", "* ", " *", "*\0"] {
        let key = format!("plain{}", o.escape_default());
        assert_eq!(
            c.cmd(&args!["LOCK.ACQUIRE", key, o]),
            Reply::Int(1),
            "{o:?}"
        );
        assert_eq!(
            c.cmd(&args!["LOCK.RELEASE", key, o]),
            Reply::Int(0),
            "{o:?}"
        );
    }
}

// ---------------------------------------------------------------- RELEASE

fn release_counts_down_and_keeps_ttl(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    for n in 1..=3 {
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
            Reply::Int(n)
        );
    }
    let at = c.cmd(&["PEXPIRETIME", "k"]).as_int();
    std::thread::sleep(Duration::from_millis(15));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(2));
    assert_eq!(
        hash_and_deadline(&mut c, b"k"),
        (vec![pair(b"a", b"2")], at)
    );
    std::thread::sleep(Duration::from_millis(15));
    assert_eq!(c3.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(1));
    assert_eq!(
        hash_and_deadline(&mut c, b"k"),
        (vec![pair(b"a", b"1")], at)
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    // Released: the owner holds nothing any more.
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    refused(
        &mut c3,
        &cmdv("LOCK.RELEASE", &[b"k", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    // And someone else can take it.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Int(1));
}

fn release_by_non_holder(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    // Never taken.
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"never", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"never"],
    );
    assert_eq!(c.cmd(&["EXISTS", "never"]), Reply::Int(0));
    // Held by someone else.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "50000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "50000"]),
        Reply::Int(2)
    );
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"b"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"A"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    let r = c.cmd(&["LOCK.RELEASE", "k", "b"]);
    assert_eq!(
        r,
        Reply::Error(
            "NOTOWNER lock not held by this owner (expired, released or never acquired)".into()
        )
    );
    // Force-released under the owner's feet.
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(1));
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
}

fn lease_expiry(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "150"]),
        Reply::Int(1)
    );
    let deadline = c.cmd(&["PEXPIRETIME", "k"]).as_int();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "b", "PX", "10000"]),
        Reply::Nil
    );
    let got = wait_until(Duration::from_secs(3), || {
        c.cmd(&["LOCK.ACQUIRE", "k", "b", "PX", "10000"]) == Reply::Int(1)
    });
    assert!(got, "b never got the lock after a's lease ran out");
    assert!(now_ms() >= deadline, "b got the lock before a's deadline");
    // The old owner's lease is lost, loudly.
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k"],
    );
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Nil);
    let info = c.cmd(&["LOCK.INFO", "k"]);
    assert_eq!(info.map_get("owner"), Some(&bulk("b")));
    assert_eq!(info.map_get("holds"), Some(&Reply::Int(1)));

    // A lapsed lock nobody touched: RELEASE says NOTOWNER, INFO says nil.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k2", "a", "PX", "30"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k2", "a", "PX", "30"]),
        Reply::Int(2)
    );
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(c.cmd(&["LOCK.INFO", "k2"]), Reply::Nil);
    refused(
        &mut c,
        &cmdv("LOCK.RELEASE", &[b"k2", b"a"]),
        "NOTOWNER",
        NOTOWNER,
        &[b"k2"],
    );
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k2"]), Reply::Int(0));
    // Re-entering a lapsed lock starts again at 1.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k2", "a", "PX", "30"]),
        Reply::Int(1)
    );
}

// ---------------------------------------------------------------- RENEW

fn renew(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    // Free: 0, and RENEW does not create anything.
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a", "PX", "100"]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));

    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "1000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "1000"]),
        Reply::Int(2)
    );
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "k", "a", "PX", "50000"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 50000);
    // The count is untouched by renewals.
    assert_eq!(holds_of(&mut c, b"k"), vec![pair(b"a", b"2")]);
    assert_eq!(
        c3.cmd(&["LOCK.RENEW", "k", "a", "EX", "100"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 100000);
    // Shorter is allowed: the lease is set, not extended.
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "k", "a", "PX", "3000"]),
        Reply::Int(1)
    );
    assert_lease(&mut c, b"k", 3000);
    // Default lease.
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(1));
    assert_lease(&mut c, b"k", 30000);
    assert_eq!(holds_of(&mut c, b"k"), vec![pair(b"a", b"2")]);

    // Another owner: 0 and nothing changes.
    let before = key_state(&mut c, b"k");
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "b"]), Reply::Int(0));
    assert_eq!(c3.cmd(&["LOCK.RENEW", "k", "b", "PX", "10"]), Reply::Int(0));
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "k", "A", "EX", "1000"]),
        Reply::Int(0)
    );
    assert_eq!(key_state(&mut c, b"k"), before);

    // After the lease ran out: 0, the key stays gone.
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a", "PX", "20"]), Reply::Int(1));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
}

// ---------------------------------------------------------------- INFO

fn info_replies(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    assert_eq!(c.cmd(&["LOCK.INFO", "k"]), Reply::Nil);
    assert_eq!(c3.cmd(&["LOCK.INFO", "k"]), Reply::Null);

    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "own\0er", "PX", "40000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "own\0er", "PX", "40000"]),
        Reply::Int(2)
    );
    let before = key_state(&mut c, b"k");

    // RESP2: a flat array, fields in this order.
    let r2 = c.cmd(&["LOCK.INFO", "k"]);
    let Reply::Array(flat) = &r2 else {
        panic!("RESP2 LOCK.INFO: {r2:?}")
    };
    assert_eq!(flat.len(), 12, "{r2:?}");
    let ttl = flat[5].as_int();
    assert!(ttl > 38000 && ttl <= 40000, "{r2:?}");
    assert_eq!(
        r2,
        Reply::Array(vec![
            bulk("owner"),
            bulk("own\0er"),
            bulk("holds"),
            Reply::Int(2),
            bulk("ttl"),
            Reply::Int(ttl),
            bulk("waiters"),
            Reply::Int(0),
            bulk("keepalive"),
            Reply::Int(0),
            bulk("token"),
            Reply::Int(0),
        ])
    );
    // RESP3: a map with the same pairs.
    let r3 = c3.cmd(&["LOCK.INFO", "k"]);
    let Reply::Map(pairs) = &r3 else {
        panic!("RESP3 LOCK.INFO: {r3:?}")
    };
    let ttl3 = pairs[2].1.as_int();
    assert!(ttl3 > 38000 && ttl3 <= ttl, "{r3:?}");
    assert_eq!(
        r3,
        Reply::Map(vec![
            (bulk("owner"), bulk("own\0er")),
            (bulk("holds"), Reply::Int(2)),
            (bulk("ttl"), Reply::Int(ttl3)),
            (bulk("waiters"), Reply::Int(0)),
            (bulk("keepalive"), Reply::Int(0)),
            (bulk("token"), Reply::Int(0)),
        ])
    );
    // Read-only.
    assert_eq!(key_state(&mut c, b"k"), before);

    // A lock written by hand without expiry: ttl -1.
    assert_eq!(c.cmd(&["HSET", "hand", "who", "5"]), Reply::Int(1));
    for r in [
        c.cmd(&["LOCK.INFO", "hand"]),
        c3.cmd(&["LOCK.INFO", "hand"]),
    ] {
        assert_eq!(r.map_get("owner"), Some(&bulk("who")), "{r:?}");
        assert_eq!(r.map_get("holds"), Some(&Reply::Int(5)), "{r:?}");
        assert_eq!(r.map_get("ttl"), Some(&Reply::Int(-1)), "{r:?}");
        assert_eq!(r.map_get("waiters"), Some(&Reply::Int(0)), "{r:?}");
    }
    // ... which the module then treats as a lock of that owner.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "hand", "who", "PX", "5000"]),
        Reply::Int(6)
    );
    assert_lease(&mut c, b"hand", 5000);
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "hand", "other"]), Reply::Nil);
    // A large hand-written count.
    c.cmd(&["HSET", "big", "o", "9223372036854775807"]);
    assert_eq!(
        c.cmd(&["LOCK.INFO", "big"]).map_get("holds"),
        Some(&Reply::Int(i64::MAX))
    );
}

// ---------------------------------------------------------------- FORCERELEASE

fn force_release(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(0));
    assert_eq!(c3.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(0));
    for n in 1..=3 {
        assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(n));
    }
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    assert_eq!(c3.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(0));
    // Now anyone can take it.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Int(1));
    assert_eq!(c3.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(1));
    // A hand-written lock (no expiry) is a lock too.
    c.cmd(&["HSET", "hand", "x", "7"]);
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "hand"]), Reply::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "hand"]), Reply::Int(0));
    // A lapsed lease: nothing to remove.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "gone", "a", "PX", "10"]),
        Reply::Int(1)
    );
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "gone"]), Reply::Int(0));
}

// ---------------------------------------------------------------- errors

fn arity_errors(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]);
    let cases: &[(&str, &str, &[&str])] = &[
        ("LOCK.ACQUIRE", "lock.acquire", &[]),
        ("LOCK.ACQUIRE", "lock.acquire", &["k"]),
        ("lock.acquire", "lock.acquire", &["k"]),
        ("LOCK.RELEASE", "lock.release", &[]),
        ("LOCK.RELEASE", "lock.release", &["k"]),
        ("LOCK.RELEASE", "lock.release", &["k", "a", "x"]),
        ("LOCK.RELEASE", "lock.release", &["k", "a", "PX", "10"]),
        ("LOCK.RENEW", "lock.renew", &[]),
        ("LOCK.RENEW", "lock.renew", &["k"]),
        ("LOCK.INFO", "lock.info", &[]),
        ("LOCK.INFO", "lock.info", &["k", "x"]),
        ("LOCK.FORCERELEASE", "lock.forcerelease", &[]),
        ("LOCK.FORCERELEASE", "lock.forcerelease", &["k", "x"]),
    ];
    for (cmd, name, rest) in cases {
        let mut v = vec![*cmd];
        v.extend_from_slice(rest);
        let want = Reply::Error(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        let before = key_state(&mut c, b"k");
        assert_eq!(c.cmd(&v), want, "{v:?}");
        assert_eq!(c3.cmd(&v), want, "{v:?} (RESP3)");
        assert_eq!(key_state(&mut c, b"k"), before, "{v:?}");
    }
}

const LEASE_VALUES: &[&[u8]] = &[
    b"0",
    b"-1",
    b"-9223372036854775808",
    b"1.5",
    b"1e3",
    b"abc",
    b"",
    b" 1",
    b"1 ",
    b"+1",
    b"01",
    b"0x10",
    b"1\0",
    b"\xff",
    b"99999999999999999999",
    b"9223372036854775808",
];

fn lease_errors(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LOCK.ACQUIRE", "held", "a", "PX", "60000"]);
    c.cmd(&["LOCK.ACQUIRE", "held", "a", "PX", "60000"]);
    let keys: &[&[u8]] = &[b"held", b"free"];
    for key in keys {
        for opt in [&b"PX"[..], b"EX", b"px", b"ex"] {
            for v in LEASE_VALUES {
                for owner in [&b"a"[..], b"b", b"*"] {
                    let cmd = cmdv("LOCK.ACQUIRE", &[key, owner, opt, v]);
                    refused(&mut c, &cmd, "ERR", BAD_LEASE, keys);
                }
                for owner in [&b"a"[..], b"b"] {
                    let cmd = cmdv("LOCK.RENEW", &[key, owner, opt, v]);
                    refused(&mut c, &cmd, "ERR", BAD_LEASE, keys);
                }
            }
        }
        // Overflow: EX * 1000, or now + lease, past i64.
        let overflow: &[(&[u8], &[u8])] = &[
            (b"EX", b"9223372036854776"),
            (b"EX", b"9223372036854775"),
            (b"EX", b"9223372036854775807"),
            (b"PX", b"9223372036854775000"),
            (b"PX", b"9223372036854775807"),
            (b"PX", b"9223372036854000000"),
        ];
        for (opt, v) in overflow {
            for owner in [&b"a"[..], b"b"] {
                refused(
                    &mut c,
                    &cmdv("LOCK.ACQUIRE", &[key, owner, opt, v]),
                    "ERR",
                    BAD_LEASE,
                    keys,
                );
                refused(
                    &mut c,
                    &cmdv("LOCK.RENEW", &[key, owner, opt, v]),
                    "ERR",
                    BAD_LEASE,
                    keys,
                );
            }
        }
        // With BLOCK around it, the lease is still checked.
        refused(
            &mut c,
            &cmdv("LOCK.ACQUIRE", &[key, b"a", b"BLOCK", b"10", b"PX", b"0"]),
            "ERR",
            BAD_LEASE,
            keys,
        );
    }
    assert_eq!(c.cmd(&["EXISTS", "free"]), Reply::Int(0));
}

fn syntax_errors(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LOCK.ACQUIRE", "held", "a", "PX", "60000"]);
    let keys: &[&[u8]] = &[b"held", b"free"];
    let acquire: &[&[&[u8]]] = &[
        &[b"NX"],
        &[b"XX", b"1"],
        &[b"PXX", b"10"],
        &[b""],
        &[b"PX\0", b"10"],
        &[b"PX"],
        &[b"EX"],
        &[b"BLOCK"],
        &[b"px"],
        &[b"PX", b"10", b"PX", b"10"],
        &[b"px", b"10", b"Px", b"20"],
        &[b"PX", b"10", b"EX", b"1"],
        &[b"EX", b"1", b"PX", b"10"],
        &[b"EX", b"1", b"EX", b"1"],
        &[b"BLOCK", b"1", b"BLOCK", b"1"],
        &[b"block", b"1", b"PX", b"10", b"Block", b"2"],
        &[b"PX", b"10", b"NX"],
        &[b"PX", b"10", b"BLOCK"],
        &[b"BLOCK", b"10", b"PX"],
        &[b"PX", b"10", b"BLOCK", b"10", b"EX", b"1"],
        &[b"10"],
    ];
    for key in keys {
        for opts in acquire {
            for owner in [&b"a"[..], b"b", b"*"] {
                let mut args: Vec<&[u8]> = vec![key, owner];
                args.extend_from_slice(opts);
                refused(&mut c, &cmdv("LOCK.ACQUIRE", &args), "ERR", SYNTAX, keys);
            }
        }
    }
    let renew: &[&[&[u8]]] = &[
        &[b"BLOCK", b"1"],
        &[b"NX"],
        &[b"PX"],
        &[b"EX"],
        &[b"PX", b"10", b"PX", b"10"],
        &[b"PX", b"10", b"EX", b"1"],
        &[b"PX", b"10", b"BLOCK", b"1"],
        &[b"PX", b"10", b"x"],
    ];
    for key in keys {
        for opts in renew {
            for owner in [&b"a"[..], b"b"] {
                let mut args: Vec<&[u8]> = vec![key, owner];
                args.extend_from_slice(opts);
                refused(&mut c, &cmdv("LOCK.RENEW", &args), "ERR", SYNTAX, keys);
            }
        }
    }
    assert_eq!(
        c.cmd(&["LOCK.RENEW", "held", "a", "BLOCK", "1"]),
        Reply::Error(
            "ERR syntax error: unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms"
                .into()
        )
    );
}

fn block_argument_validation(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["LOCK.ACQUIRE", "held", "a", "PX", "60000"]);
    let keys: &[&[u8]] = &[b"held", b"free"];
    for key in keys {
        for owner in [&b"a"[..], b"b", b"*"] {
            let r = c.cmd(&cmdv("LOCK.ACQUIRE", &[key, owner, b"BLOCK", b"-1"]));
            assert_eq!(
                r,
                Reply::Error("ERR invalid BLOCK timeout: timeout is negative".into())
            );
            for v in [
                &b"-1"[..],
                b"-100",
                b"-9223372036854775808",
                b"x",
                b"",
                b"1.5",
                b"0.1",
                b"+1",
                b"01",
                b" 1",
                b"99999999999999999999",
                // Valid as a number, but now + timeout overflows.
                b"9223372036854775807",
            ] {
                refused(
                    &mut c,
                    &cmdv("LOCK.ACQUIRE", &[key, owner, b"BLOCK", v]),
                    "ERR",
                    BAD_BLOCK,
                    keys,
                );
                refused(
                    &mut c,
                    &cmdv("LOCK.ACQUIRE", &[key, owner, b"PX", b"100", b"block", v]),
                    "ERR",
                    BAD_BLOCK,
                    keys,
                );
            }
        }
    }
    // A bad BLOCK never takes a free lock.
    assert_eq!(c.cmd(&["EXISTS", "free"]), Reply::Int(0));
}

fn not_a_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    // Hashes that are not locks: several fields, or a count that is not a
    // positive integer as HINCRBY reads it.
    let shapes: &[(&str, &[&[u8]])] = &[
        ("two", &[b"a", b"1", b"b", b"1"]),
        ("three", &[b"a", b"1", b"b", b"2", b"c", b"3"]),
        ("zero", &[b"a", b"0"]),
        ("neg", &[b"a", b"-1"]),
        ("lead0", &[b"a", b"01"]),
        ("text", &[b"a", b"x"]),
        ("float", &[b"a", b"1.5"]),
        ("space", &[b"a", b" 1"]),
        ("plus", &[b"a", b"+1"]),
        ("empty", &[b"a", b""]),
        ("nul", &[b"a", b"1\0"]),
        ("toobig", &[b"a", b"9223372036854775808"]),
        ("negzero", &[b"a", b"-0"]),
        ("star0", &[b"*", b"0"]),
        ("other0", &[b"b", b"0"]),
    ];
    for (i, (key, fields)) in shapes.iter().enumerate() {
        let mut hset: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
        hset.extend_from_slice(fields);
        c.cmd(&hset);
        if i % 2 == 0 {
            c.cmd(&["PEXPIRE", key, "100000"]);
        }
    }
    let all: Vec<&[u8]> = shapes.iter().map(|(k, _)| k.as_bytes()).collect();
    for key in &all {
        let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
        for owner in [&b"a"[..], b"b", b"*", b"zz"] {
            cmds.push(cmdv("LOCK.ACQUIRE", &[key, owner]));
            cmds.push(cmdv("LOCK.ACQUIRE", &[key, owner, b"PX", b"100"]));
            cmds.push(cmdv("LOCK.ACQUIRE", &[key, owner, b"BLOCK", b"10"]));
            cmds.push(cmdv("LOCK.RELEASE", &[key, owner]));
            cmds.push(cmdv("LOCK.RENEW", &[key, owner]));
            cmds.push(cmdv("LOCK.RENEW", &[key, owner, b"PX", b"100"]));
        }
        cmds.push(cmdv("LOCK.INFO", &[key]));
        cmds.push(cmdv("LOCK.FORCERELEASE", &[key]));
        for cmd in &cmds {
            refused(&mut c, cmd, "NOTLOCK", "NOTLOCK ", &all);
        }
    }
    let mut c3 = s.client_resp3();
    assert_err(&c3.cmd(&["LOCK.INFO", "two"]), "NOTLOCK", "NOTLOCK ");
}

fn hold_count_overflow(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["HSET", "max", "a", "9223372036854775807"]);
    c.cmd(&["PEXPIRE", "max", "100000"]);
    for cmd in [
        cmdv("LOCK.ACQUIRE", &[b"max", b"a"]),
        cmdv("LOCK.ACQUIRE", &[b"max", b"a", b"PX", b"5"]),
    ] {
        let before = key_state(&mut c, b"max");
        assert_eq!(
            c.cmd(&cmd),
            Reply::Error("ERR hold count would overflow".into())
        );
        assert_eq!(key_state(&mut c, b"max"), before);
    }
    // Another owner: simply busy.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "max", "b"]), Reply::Nil);
    // Right below the limit: fine, up to i64::MAX, and back down.
    c.cmd(&["HSET", "almost", "a", "9223372036854775806"]);
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "almost", "a", "PX", "10000"]),
        Reply::Int(i64::MAX)
    );
    assert_eq!(c.cmd(&["HGET", "almost", "a"]), bulk("9223372036854775807"));
    assert_eq!(
        c.cmd(&["LOCK.RELEASE", "almost", "a"]),
        Reply::Int(i64::MAX - 1)
    );
    assert_eq!(c.cmd(&["LOCK.RENEW", "max", "a"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["LOCK.RELEASE", "max", "a"]),
        Reply::Int(i64::MAX - 1)
    );
}

fn binary_keys_and_owners(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    let keys: &[&[u8]] = &[b"k\0\r\n\xff", b"\0", b"\xff\xfe", b"{\0}", b"\r\n"];
    let owners: &[&[u8]] = &[b"o\0w\r\nn\xff", b"\0", b"\xff", b"\r\n", b"\0\0\0", b" "];
    for key in keys {
        for owner in owners {
            assert_eq!(
                c.cmd(&args!["LOCK.ACQUIRE", key, owner, "PX", 30000]),
                Reply::Int(1)
            );
            assert_eq!(holds_of(&mut c, key), vec![pair(owner, b"1")]);
            for r in [
                c.cmd(&args!["LOCK.INFO", key]),
                c3.cmd(&args!["LOCK.INFO", key]),
            ] {
                assert_eq!(r.map_get("owner"), Some(&bulk(owner)), "{r:?}");
            }
            // Another binary owner differs by one byte: busy.
            let mut other = owner.to_vec();
            other.push(0);
            assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, other]), Reply::Nil);
            assert_eq!(c3.cmd(&args!["LOCK.ACQUIRE", key, owner]), Reply::Int(2));
            assert_eq!(
                c.cmd(&args!["LOCK.RENEW", key, owner, "PX", 20000]),
                Reply::Int(1)
            );
            assert_eq!(c.cmd(&args!["LOCK.RENEW", key, other]), Reply::Int(0));
            refused(
                &mut c,
                &cmdv("LOCK.RELEASE", &[key, &other]),
                "NOTOWNER",
                NOTOWNER,
                &[key],
            );
            assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, owner]), Reply::Int(1));
            assert_eq!(c3.cmd(&args!["LOCK.RELEASE", key, owner]), Reply::Int(0));
            assert_eq!(c.cmd(&args!["EXISTS", key]), Reply::Int(0));
        }
    }

    // Owner length: 1..=1024 bytes, any bytes.
    let max: Vec<u8> = (0..1024u32).map(|i| (i * 7 % 256) as u8).collect();
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "long", &max]), Reply::Int(1));
    assert_eq!(
        holds_of(&mut c, b"long"),
        vec![(max.clone(), b"1".to_vec())]
    );
    assert_eq!(
        c.cmd(&args!["LOCK.INFO", "long"]).map_get("owner"),
        Some(&bulk(&max))
    );
    assert_eq!(c.cmd(&args!["LOCK.RENEW", "long", &max]), Reply::Int(1));
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "long", &max]), Reply::Int(0));

    let too_long = vec![b'o'; 1025];
    let huge = vec![b'o'; 1 << 20];
    c.cmd(&["LOCK.ACQUIRE", "held", "a"]);
    let keys: &[&[u8]] = &[b"held", b"free"];
    for key in keys {
        for owner in [&too_long[..], &huge, b""] {
            for cmd in [
                cmdv("LOCK.ACQUIRE", &[key, owner]),
                cmdv("LOCK.ACQUIRE", &[key, owner, b"PX", b"100"]),
                cmdv("LOCK.RELEASE", &[key, owner]),
                cmdv("LOCK.RENEW", &[key, owner]),
                cmdv("LOCK.RENEW", &[key, owner, b"EX", b"1"]),
            ] {
                let before: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
                assert_eq!(c.cmd(&cmd), Reply::Error(BAD_OWNER.into()));
                assert_eq!(c3.cmd(&cmd), Reply::Error(BAD_OWNER.into()));
                let after: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
                assert_eq!(before, after);
            }
        }
    }

    // A large binary key is fine.
    let big_key: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", &big_key, "a"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&args!["LOCK.INFO", &big_key]).map_get("holds"),
        Some(&Reply::Int(1))
    );
    assert_eq!(c.cmd(&args!["LOCK.FORCERELEASE", &big_key]), Reply::Int(1));
}

// ---------------------------------------------------------------- server integration

fn command_info_and_getkeys(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let samples: &[(&str, i64, &[&str])] = &[
        (
            "lock.acquire",
            -3,
            &["LOCK.ACQUIRE", "the-key", "o", "PX", "10", "BLOCK", "5"],
        ),
        ("lock.release", 3, &["LOCK.RELEASE", "the-key", "o"]),
        ("lock.renew", -3, &["LOCK.RENEW", "the-key", "o", "EX", "1"]),
        ("lock.info", 2, &["LOCK.INFO", "the-key"]),
        ("lock.forcerelease", 2, &["LOCK.FORCERELEASE", "the-key"]),
    ];
    for (name, arity, sample) in samples {
        let mut getkeys = vec!["COMMAND", "GETKEYS"];
        getkeys.extend_from_slice(sample);
        assert_eq!(
            c.cmd(&getkeys),
            Reply::Array(vec![bulk("the-key")]),
            "{getkeys:?}"
        );
        let info = c.cmd(&["COMMAND", "INFO", name]);
        let entry = info.as_array()[0].as_array();
        assert_eq!(entry[0], bulk(name));
        assert_eq!(entry[1], Reply::Int(*arity), "{name} arity");
        let flags: Vec<&str> = entry[2].as_array().iter().map(Reply::as_str).collect();
        if *name == "lock.info" {
            assert!(flags.contains(&"readonly"), "{name}: {flags:?}");
            assert!(!flags.contains(&"write"), "{name}: {flags:?}");
        } else {
            assert!(flags.contains(&"write"), "{name}: {flags:?}");
        }
        if *name == "lock.acquire" {
            assert!(flags.contains(&"denyoom"), "{name}: {flags:?}");
        }
        // first key, last key, step
        assert_eq!(&entry[3..6], &[Reply::Int(1), Reply::Int(1), Reply::Int(1)]);
        // The documentation is there too.
        let docs = c.cmd(&["COMMAND", "DOCS", name]);
        let doc = docs.map_get(name).unwrap_or_else(|| panic!("{docs:?}"));
        assert!(
            !doc.map_get("summary").unwrap().as_bytes().is_empty(),
            "{docs:?}"
        );
        assert_eq!(doc.map_get("group").map(Reply::as_str), Some("module"));
    }
}

fn module_list_and_info_section(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let list = c.cmd(&["MODULE", "LIST"]);
    // The module loaded from our .so is named `lock`, version 1.0.0
    // (major * 10000 + minor * 100 + patch, as Redis modules number
    // themselves). (Valkey lists its built-in `lua` too.)
    let path = testkit::module_path().display().to_string();
    let ours = list
        .as_array()
        .iter()
        .find(|m| m.map_get("path") == Some(&Reply::Bulk(path.clone().into_bytes())))
        .unwrap_or_else(|| panic!("{kind}: no module loaded from {path} in {list:?}"));
    assert_eq!(
        (ours.map_get("name"), ours.map_get("ver")),
        (
            Some(&Reply::Bulk(b"lock".to_vec())),
            Some(&Reply::Int(10000))
        ),
        "{kind}: {ours:?}"
    );

    let stats = |s: &Server| -> std::collections::HashMap<String, u64> {
        let text = s.info("lock");
        assert!(text.contains("# lock_stats"), "{text}");
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
            .collect()
    };
    let before = stats(&s);
    for field in [
        "lock_acquired",
        "lock_reentered",
        "lock_busy",
        "lock_released",
        "lock_force_released",
        "lock_renewed",
        "lock_not_owner",
        "lock_unlock_published",
    ] {
        assert!(before.contains_key(field), "{field} missing: {before:?}");
    }
    c.cmd(&["LOCK.ACQUIRE", "k", "a"]); // acquired
    c.cmd(&["LOCK.ACQUIRE", "k", "a"]); // reentered
    c.cmd(&["LOCK.ACQUIRE", "k", "b"]); // busy
    c.cmd(&["LOCK.RENEW", "k", "a"]); // renewed
    c.cmd(&["LOCK.RENEW", "k", "b"]); // not renewed
    c.cmd(&["LOCK.RELEASE", "k", "b"]); // not_owner
    c.cmd(&["LOCK.RELEASE", "k", "a"]); // partial
    c.cmd(&["LOCK.RELEASE", "k", "a"]); // released + published
    c.cmd(&["LOCK.ACQUIRE", "k", "a"]); // acquired
    c.cmd(&["LOCK.FORCERELEASE", "k"]); // force_released + published
    c.cmd(&["LOCK.FORCERELEASE", "k"]); // nothing
    let after = stats(&s);
    let delta = |f: &str| after[f] - before[f];
    assert_eq!(delta("lock_acquired"), 2);
    assert_eq!(delta("lock_reentered"), 1);
    assert_eq!(delta("lock_busy"), 1);
    assert_eq!(delta("lock_renewed"), 1);
    assert_eq!(delta("lock_not_owner"), 1);
    assert_eq!(delta("lock_released"), 1);
    assert_eq!(delta("lock_force_released"), 1);
    assert_eq!(delta("lock_unlock_published"), 2);
    // The section is also part of INFO everything.
    assert!(s.info("everything").contains("lock_acquired:"));
}

fn out_of_memory(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).as_str(), "OK");
    // Taking locks needs memory (deny-oom) ...
    assert_err(&c.cmd(&["LOCK.ACQUIRE", "new", "a"]), "OOM", "OOM ");
    assert_err(&c.cmd(&["LOCK.ACQUIRE", "k", "a"]), "OOM", "OOM ");
    // ... giving them back and looking at them does not.
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["LOCK.INFO", "k"]).map_get("holds"),
        Some(&Reply::Int(1))
    );
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(0));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).as_str(), "OK");
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "new", "a"]), Reply::Int(1));
}

fn acl_key_patterns(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all"]),
        Reply::Status("OK".into())
    );
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "app", "pw"]), Reply::Status("OK".into()));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "app:1", "a"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["LOCK.INFO", "app:1"]).map_get("holds"),
        Some(&Reply::Int(1))
    );
    for cmd in [
        &["LOCK.ACQUIRE", "other", "a"][..],
        &["LOCK.RELEASE", "other", "a"],
        &["LOCK.RENEW", "other", "a"],
        &["LOCK.INFO", "other"],
        &["LOCK.FORCERELEASE", "other"],
    ] {
        assert_err(&c.cmd(cmd), "NOPERM", "NOPERM ");
    }
    assert_eq!(c.cmd(&["LOCK.RELEASE", "app:1", "a"]), Reply::Int(0));
}

/// LOCK.INFO only reads its key, so a read-only key pattern (`%R~`) should
/// allow it, as it allows HGETALL or PTTL, and refuse the writing commands.
fn acl_read_only_pattern_allows_info(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "ro", "on", ">pw", "%R~ro:*", "+@all"]),
        Reply::Status("OK".into())
    );
    admin.cmd(&["LOCK.ACQUIRE", "ro:1", "a"]);
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "ro", "pw"]), Reply::Status("OK".into()));
    // Built-in read commands are allowed on the key ...
    assert_eq!(c.cmd(&["HGETALL", "ro:1"]).as_array().len(), 2);
    // ... and writes are not.
    assert_err(&c.cmd(&["LOCK.ACQUIRE", "ro:1", "a"]), "NOPERM", "NOPERM ");
    assert_err(&c.cmd(&["LOCK.FORCERELEASE", "ro:1"]), "NOPERM", "NOPERM ");
    // LOCK.INFO is read-only (flag `readonly`): it should be allowed.
    let r = c.cmd(&["LOCK.INFO", "ro:1"]);
    assert_eq!(r.map_get("holds"), Some(&Reply::Int(1)), "{r:?}");
}

fn replies_are_immediate(kind: Kind) {
    // Without BLOCK nothing waits, not even on a busy lock: 1600 calls answer
    // well within seconds, each with its value.
    let s = Server::start(kind);
    let mut other = s.client();
    assert_eq!(
        other.cmd(&["LOCK.ACQUIRE", "busy", "x", "PX", "60000"]),
        Reply::Int(1)
    );
    let mut c = s.client();
    c.set_timeout(Some(Duration::from_secs(2)));
    let t0 = Instant::now();
    for i in 0..200 {
        let key = format!("k{}", i % 7);
        assert_eq!(
            c.cmd(&args!["LOCK.ACQUIRE", key, "a", "PX", 10000]),
            Reply::Int(1),
            "{key}"
        );
        // Refused at once: the lock is busy.
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "b"]), Reply::Nil);
        assert_eq!(c.cmd(&["LOCK.ACQUIRE", "busy", "a"]), Reply::Nil);
        assert_eq!(
            c.cmd(&["LOCK.ACQUIRE", "busy", "*", "PX", "100"]),
            Reply::Nil
        );
        let info = c.cmd(&args!["LOCK.INFO", key]);
        assert_eq!(info.map_get("owner"), Some(&bulk("a")), "{info:?}");
        assert_eq!(info.map_get("holds"), Some(&Reply::Int(1)), "{info:?}");
        assert_eq!(info.map_get("waiters"), Some(&Reply::Int(0)), "{info:?}");
        assert_eq!(c.cmd(&args!["LOCK.RENEW", key, "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&["LOCK.RENEW", "busy", "a"]), Reply::Int(0));
        assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(0));
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // Nothing was queued and the busy lock is untouched.
    let info = c.cmd(&["LOCK.INFO", "busy"]);
    assert_eq!(info.map_get("owner"), Some(&bulk("x")), "{info:?}");
    assert_eq!(info.map_get("holds"), Some(&Reply::Int(1)), "{info:?}");
    assert_eq!(info.map_get("waiters"), Some(&Reply::Int(0)), "{info:?}");
    assert_eq!(c.cmd(&["DBSIZE"]).as_int(), 1);
}

fn locks_are_per_database(kind: Kind) {
    let s = Server::start(kind);
    let mut c1 = s.client();
    let mut c2 = s.client_resp3();
    assert_eq!(c1.cmd(&["SELECT", "1"]).as_str(), "OK");
    assert_eq!(c2.cmd(&["SELECT", "2"]).as_str(), "OK");
    // Same key name, two databases: two locks.
    assert_eq!(c1.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(c2.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Int(1));
    assert_eq!(
        c1.cmd(&["LOCK.INFO", "k"]).map_get("owner"),
        Some(&bulk("a"))
    );
    assert_eq!(
        c2.cmd(&["LOCK.INFO", "k"]).map_get("owner"),
        Some(&bulk("b"))
    );
    let mut c0 = s.client();
    assert_eq!(c0.cmd(&["LOCK.INFO", "k"]), Reply::Nil);
    // SWAPDB swaps the locks too.
    assert_eq!(c0.cmd(&["SWAPDB", "1", "2"]).as_str(), "OK");
    assert_eq!(
        c1.cmd(&["LOCK.INFO", "k"]).map_get("owner"),
        Some(&bulk("b"))
    );
    assert_eq!(c1.cmd(&["LOCK.RELEASE", "k", "b"]), Reply::Int(0));
    assert_err(&c2.cmd(&["LOCK.RELEASE", "k", "b"]), "NOTOWNER", NOTOWNER);
    assert_eq!(c2.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
    // MOVE carries a lock (lease included) to another database.
    assert_eq!(
        c1.cmd(&["LOCK.ACQUIRE", "m", "a", "PX", "40000"]),
        Reply::Int(1)
    );
    assert_eq!(c1.cmd(&["MOVE", "m", "2"]), Reply::Int(1));
    assert_eq!(c2.cmd(&["LOCK.ACQUIRE", "m", "a"]), Reply::Int(2));
    assert_eq!(c1.cmd(&["LOCK.ACQUIRE", "m", "b"]), Reply::Int(1));
}

fn module_unload_and_reload(kind: Kind) {
    // Locks are plain hashes: they outlive the module and are locks again
    // once it is back.
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
        Reply::Int(2)
    );
    let before = key_state(&mut c, b"k");
    assert_eq!(
        c.cmd(&["MODULE", "UNLOAD", "lock"]),
        Reply::Status("OK".into())
    );
    assert_eq!(c.cmd(&["LOCK.INFO", "k"]).err_code(), Some("ERR"));
    assert_eq!(key_state(&mut c, b"k"), before);
    let path = server::module_path();
    assert_eq!(
        c.cmd(&args!["MODULE", "LOAD", path.display().to_string()]),
        Reply::Status("OK".into())
    );
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Nil);
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
}

/// Client-side caching: a client that read a lock is told when it changes.
fn client_tracking_sees_lock_writes(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut t = s.client_resp3();
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on"]).as_str(), "OK");
    let invalidate = Reply::Push(vec![bulk("invalidate"), Reply::Array(vec![bulk("k")])]);
    for write in [
        &["LOCK.ACQUIRE", "k", "a"][..],
        &["LOCK.RENEW", "k", "a"],
        &["LOCK.RELEASE", "k", "a"],
        &["LOCK.FORCERELEASE", "k"],
    ] {
        t.cmd(&["HGETALL", "k"]);
        assert!(!c.cmd(write).is_error(), "{write:?}");
        assert_eq!(
            t.try_read_reply(Duration::from_secs(2)),
            Some(invalidate.clone()),
            "{write:?}"
        );
    }
}

/// ... and not told anything when a command changed nothing.
fn client_tracking_ignores_lock_no_ops(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut t = s.client_resp3();
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
        Reply::Int(1)
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on"]).as_str(), "OK");
    let mut spurious = Vec::new();
    for op in [
        &["LOCK.INFO", "k"][..],
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.RENEW", "k", "b"],
        &["LOCK.RELEASE", "k", "b"],
        &["LOCK.FORCERELEASE", "free"],
    ] {
        t.cmd(&["HGETALL", "k"]);
        t.cmd(&["HGETALL", "free"]);
        c.cmd(op);
        if let Some(r) = t.try_read_reply(Duration::from_millis(100)) {
            spurious.push(format!("{} → {r:?}", op.join(" ")));
        }
    }
    assert!(
        spurious.is_empty(),
        "changed nothing but invalidated: {spurious:#?}"
    );
}

/// CLIENT PAUSE WRITE (used by failover) holds the writing commands back
/// and lets LOCK.INFO through, as the command flags say. No clock: the held
/// write shows as a blocked client, and the pause ends by CLIENT UNPAUSE.
fn client_pause_write(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    let mut c = s.client();
    let mut writer = s.client();
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    let blocked = || s.info_field("clients", "blocked_clients");
    assert_eq!(blocked().as_deref(), Some("0"));
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]).as_str(),
        "OK"
    );
    writer.send(&["LOCK.ACQUIRE", "k", "a"]);
    assert!(
        wait_until(Duration::from_secs(5), || blocked().as_deref() == Some("1")),
        "LOCK.ACQUIRE is not held by the pause: {:?}",
        writer.try_read_reply(Duration::ZERO)
    );
    // Answered while the write is still held.
    assert_eq!(
        c.cmd(&["LOCK.INFO", "k"]).map_get("holds"),
        Some(&Reply::Int(1))
    );
    assert_eq!(blocked().as_deref(), Some("1"));
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]).as_str(), "OK");
    assert_eq!(writer.read_reply(), Reply::Int(2));
    assert_eq!(blocked().as_deref(), Some("0"));
}

/// A hash that once had many fields (hashtable encoding, maybe still
/// rehashing after the deletes) and is now down to one owner is a lock.
fn shrunk_hash_is_a_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    for round in 0..3 {
        let key = format!("h{round}");
        let mut hset = vec!["HSET".to_string(), key.clone()];
        for i in 0..500 {
            hset.push(format!("field-{i}-{}", "x".repeat(80)));
            hset.push("1".to_string());
        }
        c.cmd(&hset);
        c.cmd(&args!["HSET", key, "o", 2]);
        let mut hdel = vec!["HDEL".to_string(), key.clone()];
        hdel.extend(hset[2..].iter().step_by(2).cloned());
        assert_eq!(c.cmd(&hdel), Reply::Int(500));
        assert_eq!(c.cmd(&args!["HLEN", key]), Reply::Int(1));
        let info = c.cmd(&args!["LOCK.INFO", key]);
        assert_eq!(info.map_get("owner"), Some(&bulk("o")), "{info:?}");
        assert_eq!(info.map_get("holds"), Some(&Reply::Int(2)), "{info:?}");
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "other"]), Reply::Nil);
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "o"]), Reply::Int(3));
        assert_eq!(c.cmd(&args!["LOCK.FORCERELEASE", key]), Reply::Int(1));
    }
}

per_kind!(
    acquire_reentry_and_lease,
    px_and_ex,
    options_any_case_any_order,
    default_lease_and_config,
    default_lease_from_module_args,
    generated_owner,
    release_counts_down_and_keeps_ttl,
    release_by_non_holder,
    lease_expiry,
    renew,
    info_replies,
    force_release,
    arity_errors,
    lease_errors,
    syntax_errors,
    block_argument_validation,
    not_a_lock,
    hold_count_overflow,
    binary_keys_and_owners,
    command_info_and_getkeys,
    module_list_and_info_section,
    out_of_memory,
    acl_key_patterns,
    acl_read_only_pattern_allows_info,
    replies_are_immediate,
    locks_are_per_database,
    module_unload_and_reload,
    client_tracking_sees_lock_writes,
    client_pause_write,
    shrunk_hash_is_a_lock,
    client_tracking_ignores_lock_no_ops,
);
