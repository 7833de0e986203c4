//! SEMAPHORE.* without waiting (SPEC Part 2, "Semaphores"): Redisson's
//! layout byte for byte, every command's replies in RESP2 and RESP3, the
//! channel and its payloads, effects-only replication, keyspace and
//! lifecycle events, bad input changing nothing, replicas, MULTI/scripts,
//! ACLs of the lease set. On Redis 7.0 and Valkey 9.1.
//! (Queues, deadlines and KEEPALIVE: tests/semaphore_waiting.rs.)

mod common;
mod family;

use common::*;
use family::*;

/// CREATE writes the count as RSemaphore's trySetPermits does (once; with
/// PX/EX the key's TTL); LEASE writes RPermitExpirableSemaphore's lease
/// set: member = the id's 16 raw bytes, score = the server-clock deadline
/// (or 922337203685477 without a lease), the key's TTL copied onto it.
fn layout_is_redissons(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "3"]), Reply::Int(1));
    assert_eq!(c.cmd(&["GET", "s"]), bulk("3"));
    assert_eq!(c.cmd(&["PTTL", "s"]), Reply::Int(-1));
    // Any string there: 0, nothing changes.
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "9"]), Reply::Int(0));
    assert_eq!(c.cmd(&["GET", "s"]), bulk("3"));

    let before = server_ms(&mut c);
    let r = c.cmd(&["SEMAPHORE.LEASE", "s", "COUNT", "2", "PX", "60000"]);
    let after = server_ms(&mut c);
    let timed = ids(&r);
    assert_eq!(timed.len(), 2, "{kind}: {r:?}");
    assert_ne!(timed[0], timed[1]);
    let free = ids(&c.cmd(&["SEMAPHORE.LEASE", "s"]));
    assert_eq!(c.cmd(&["GET", "s"]), bulk("0"), "{kind}");
    let set = leases(&mut c, "s");
    assert_eq!(set.len(), 3, "{kind}: {set:?}");
    for id in &timed {
        let (_, score) = set
            .iter()
            .find(|(m, _)| *m == unhex(id.as_bytes()))
            .unwrap_or_else(|| panic!("{kind}: {id} not in {set:?}"));
        assert!(
            (before + 60_000) as f64 <= *score && *score <= (after + 60_000) as f64,
            "{kind}: score {score} is the server-clock deadline"
        );
    }
    assert_eq!(set[2], (unhex(free[0].as_bytes()), NO_LEASE), "{kind}");
    assert_eq!(
        c.cmd(&["TYPE", "{s}:timeout"]),
        Reply::Status("zset".into())
    );
    assert_eq!(c.cmd(&["PTTL", "{s}:timeout"]), Reply::Int(-1));

    // The key's TTL is copied onto the lease set when a lease is written.
    assert_eq!(
        c.cmd(&["SEMAPHORE.CREATE", "t", "2", "PX", "90000"]),
        Reply::Int(1)
    );
    let ttl = c.cmd(&["PEXPIRETIME", "t"]).as_int();
    assert!(ttl > 0);
    ids(&c.cmd(&["SEMAPHORE.LEASE", "t"]));
    assert_eq!(c.cmd(&["PEXPIRETIME", "{t}:timeout"]).as_int(), ttl);
    assert_eq!(
        c.cmd(&["SEMAPHORE.CREATE", "u", "1", "EX", "100"]),
        Reply::Int(1)
    );
    let pttl = c.cmd(&["PTTL", "u"]).as_int();
    assert!((99_000..=100_000).contains(&pttl), "{kind}: {pttl}");

    // A key with a hash tag: `key:timeout`.
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "{tag}:s", "1"]), Reply::Int(1));
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "{tag}:s"]));
    let member = unhex(id[0].as_bytes());
    assert!(!c.cmd(&args!["ZSCORE", "{tag}:s:timeout", member]).is_nil());
    assert_eq!(leases(&mut c, "{tag}:s").len(), 1);

    // Returning the last id deletes the set, as ZREM does.
    let all: Vec<String> = timed.iter().chain(&free).cloned().collect();
    let mut cmd = vec!["SEMAPHORE.RETURN", "s"];
    cmd.extend(all.iter().map(String::as_str));
    assert_eq!(c.cmd(&cmd), Reply::Int(3));
    assert_eq!(c.cmd(&["EXISTS", "{s}:timeout"]), Reply::Int(0));
    assert_eq!(c.cmd(&["GET", "s"]), bulk("3"));
}

/// Every command's reply, in both protocols.
fn replies(kind: Kind) {
    let s = Server::start(kind);
    for resp3 in [false, true] {
        let mut c = if resp3 { s.client_resp3() } else { s.client() };
        let nil = if resp3 { Reply::Null } else { Reply::Nil };
        let k = if resp3 { "s3" } else { "s2" };
        let what = format!("{kind} RESP{}", if resp3 { 3 } else { 2 });
        // A missing key has 0 permits.
        assert_eq!(c.cmd(&["SEMAPHORE.ACQUIRE", k]), nil, "{what}");
        assert_eq!(c.cmd(&["SEMAPHORE.LEASE", k]), nil, "{what}");
        assert_eq!(c.cmd(&["SEMAPHORE.INFO", k]), nil, "{what}");
        assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", k]), Reply::Int(0), "{what}");
        assert_eq!(
            c.cmd(&["EXISTS", k]),
            Reply::Int(0),
            "{what}: DRAIN of nothing"
        );
        assert_eq!(
            c.cmd(&["SEMAPHORE.CREATE", k, "0"]),
            Reply::Int(1),
            "{what}"
        );
        assert_eq!(c.cmd(&["SEMAPHORE.ADD", k, "5"]), Reply::Int(5), "{what}");
        // COUNT n: the permits taken (never 0).
        assert_eq!(
            c.cmd(&["SEMAPHORE.ACQUIRE", k, "COUNT", "2"]),
            Reply::Int(2)
        );
        assert_eq!(c.cmd(&["SEMAPHORE.ACQUIRE", k]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["SEMAPHORE.ACQUIRE", k, "count", "3"]),
            nil,
            "{what}"
        );
        assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", k]), Reply::Int(3), "{what}");
        assert_eq!(
            c.cmd(&["SEMAPHORE.RELEASE", k, "COUNT", "4"]),
            Reply::Int(7)
        );
        // RELEASE may give back more than was taken (RSemaphore's rule).
        let leased = c.cmd(&["SEMAPHORE.LEASE", k, "COUNT", "3", "PX", "60000"]);
        let got = ids(&leased);
        assert_eq!(got.len(), 3, "{what}: {leased:?}");
        assert!(matches!(leased, Reply::Array(_)), "{what}: {leased:?}");
        // RENEW: 1 if leased, else 0.
        assert_eq!(
            c.cmd(&["SEMAPHORE.RENEW", k, &got[0], "PX", "5000"]),
            Reply::Int(1)
        );
        assert_eq!(
            c.cmd(&["SEMAPHORE.RENEW", k, &got[1].to_uppercase()]),
            Reply::Int(1),
            "{what}: ids in either case"
        );
        assert_eq!(
            c.cmd(&["SEMAPHORE.RENEW", k, "00000000000000000000000000000000"]),
            Reply::Int(0)
        );
        let info = c.cmd(&["SEMAPHORE.INFO", k]);
        let expect = [
            ("available", Reply::Int(4)),
            ("leased", Reply::Int(3)),
            ("waiters", Reply::Int(0)),
            ("keepalive", Reply::Int(0)),
            ("ttl", Reply::Int(-1)),
        ];
        if resp3 {
            let Reply::Map(pairs) = &info else {
                panic!("{what}: a map: {info:?}");
            };
            let got: Vec<(Reply, Reply)> = pairs.clone();
            let want: Vec<(Reply, Reply)> =
                expect.iter().map(|(f, v)| (bulk(f), v.clone())).collect();
            assert_eq!(got, want, "{what}: INFO in this order");
        } else {
            let want: Vec<Reply> = expect
                .iter()
                .flat_map(|(f, v)| [bulk(f), v.clone()])
                .collect();
            assert_eq!(info, Reply::Array(want), "{what}: INFO flat, in this order");
        }
        // RETURN: how many went back; the rest available after.
        assert_eq!(
            c.cmd(&["SEMAPHORE.RETURN", k, &got[0], &got[2].to_uppercase()]),
            Reply::Int(2)
        );
        assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", k]), Reply::Int(6), "{what}");
        assert_eq!(c.cmd(&["GET", k]), bulk("0"));
        // ADD may go negative; DRAIN replies what was there and sets 0.
        assert_eq!(c.cmd(&["SEMAPHORE.ADD", k, "-2"]), Reply::Int(-2), "{what}");
        assert_eq!(c.cmd(&["SEMAPHORE.ACQUIRE", k]), nil);
        assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", k]), Reply::Int(-2), "{what}");
        assert_eq!(c.cmd(&["GET", k]), bulk("0"));
        assert_eq!(
            c.cmd(&["SEMAPHORE.INFO", k]).map_get("leased"),
            Some(&Reply::Int(1))
        );
        // A semaphore made only of leases (no count key) still has INFO.
        c.cmd(&["DEL", k]);
        let info = c.cmd(&["SEMAPHORE.INFO", k]);
        assert_eq!(
            info.map_get("available"),
            Some(&Reply::Int(0)),
            "{what}: {info:?}"
        );
        assert_eq!(
            info.map_get("leased"),
            Some(&Reply::Int(1)),
            "{what}: {info:?}"
        );
        assert_eq!(
            info.map_get("ttl"),
            Some(&Reply::Int(-1)),
            "{what}: {info:?}"
        );
    }
}

/// ADD is INCRBY: it keeps the key's TTL (Redisson's SET drops it: an
/// intended difference), creates the key, may go negative; DRAIN keeps the
/// TTL too and leaves leases alone.
fn add_and_drain_keep_the_ttl(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["SEMAPHORE.CREATE", "s", "2", "PX", "100000"]),
        Reply::Int(1)
    );
    let deadline = c.cmd(&["PEXPIRETIME", "s"]).as_int();
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "s", "3"]), Reply::Int(5));
    assert_eq!(c.cmd(&["PEXPIRETIME", "s"]).as_int(), deadline, "{kind}");
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "s", "-7"]), Reply::Int(-2));
    assert_eq!(c.cmd(&["PEXPIRETIME", "s"]).as_int(), deadline, "{kind}");
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "s", "4"]), Reply::Int(2));
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s"]));
    assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", "s"]), Reply::Int(1));
    assert_eq!(c.cmd(&["PEXPIRETIME", "s"]).as_int(), deadline, "{kind}");
    assert_eq!(leases(&mut c, "s").len(), 1, "{kind}: DRAIN leaves leases");
    assert_eq!(c.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]), Reply::Int(1));
    // ADD creates the key, with no TTL; ADD 0 too.
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "new", "0"]), Reply::Int(0));
    assert_eq!(c.cmd(&["GET", "new"]), bulk("0"));
    assert_eq!(c.cmd(&["PTTL", "new"]), Reply::Int(-1));
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "neg", "-3"]), Reply::Int(-3));
}

/// `redisson_sc:{key}` carries the available count after each change that
/// gives permits back (CREATE, ADD, RELEASE, RETURN), published only when
/// it is > 0 after queued waiters were served; ACQUIRE, LEASE and DRAIN
/// publish nothing.
fn channel_payloads(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let ch = b"redisson_sc:{s}";
    let mut sub2 = s.client();
    let mut sub3 = s.client_resp3();
    subscribe(&mut sub2, ch);
    subscribe(&mut sub3, ch);
    let mut hear = |want: &str, what: &str| {
        assert_eq!(
            message(&mut sub2, ch, 2 * SECOND),
            want.as_bytes(),
            "{kind}: {what}"
        );
        assert_eq!(
            message(&mut sub3, ch, 2 * SECOND),
            want.as_bytes(),
            "{kind}: {what}"
        );
    };
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "2"]), Reply::Int(1));
    hear("2", "CREATE");
    assert_eq!(
        c.cmd(&["SEMAPHORE.ACQUIRE", "s", "COUNT", "2"]),
        Reply::Int(2)
    );
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(1));
    hear("1", "RELEASE");
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "s", "4"]), Reply::Int(5));
    hear("5", "ADD");
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "COUNT", "2"]));
    assert_eq!(c.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]), Reply::Int(1));
    hear("4", "RETURN");
    assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", "s"]), Reply::Int(4));
    assert_eq!(c.cmd(&["SEMAPHORE.ADD", "s", "-1"]), Reply::Int(-1));
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(0));
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "s", "3"]), Reply::Int(0));
    assert_eq!(c.cmd(&["SEMAPHORE.RETURN", "s", &id[1]]), Reply::Int(1));
    hear("1", "RETURN after nothing else was published");
    // CREATE with 0 permits publishes nothing.
    let mut z = s.client();
    subscribe(&mut z, b"redisson_sc:{z}");
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "z", "0"]), Reply::Int(1));
    silent(&mut z, 100, "CREATE 0");
    silent(&mut sub2, 10, "ACQUIRE, LEASE, DRAIN, counts <= 0");
    silent(&mut sub3, 10, "ACQUIRE, LEASE, DRAIN, counts <= 0");
    // A key with `{`: `redisson_sc:key`.
    let mut tagged = s.client();
    subscribe(&mut tagged, b"redisson_sc:{t}:1");
    assert_eq!(
        c.cmd(&["SEMAPHORE.RELEASE", "{t}:1", "COUNT", "2"]),
        Reply::Int(2)
    );
    assert_eq!(message(&mut tagged, b"redisson_sc:{t}:1", 2 * SECOND), b"2");
    assert_eq!(
        lock_stat(&s, "semaphore_published"),
        6,
        "{kind}: {}",
        s.info("lock")
    );
}

/// Replication carries effects only, with absolute times: SET (PXAT),
/// INCRBY, SET ... KEEPTTL, ZADD with the absolute score and the raw id,
/// PEXPIREAT, ZREM; PUBLISH for replicas' subscribers. No SEMAPHORE.*.
fn stream_carries_effects_only(kind: Kind) {
    let primary = Server::start(kind);
    let mut fake = primary.client();
    fake.send(&["SYNC"]);
    let _rdb = fake.read_sync_payload();
    let mut all = Vec::new();
    let mut p = primary.client();
    let v = |parts: &[&[u8]]| -> Vec<Vec<u8>> { parts.iter().map(|x| x.to_vec()).collect() };

    assert_eq!(
        p.cmd(&["SEMAPHORE.CREATE", "s", "3", "PX", "100000"]),
        Reply::Int(1)
    );
    let d = p.cmd(&["PEXPIRETIME", "s"]).as_int().to_string();
    assert_eq!(p.cmd(&["SEMAPHORE.ACQUIRE", "s"]), Reply::Int(1));
    let id = ids(&p.cmd(&["SEMAPHORE.LEASE", "s", "PX", "50000"]));
    let raw = unhex(id[0].as_bytes());
    let score = leases(&mut p, "s")[0].1 as i64;
    let score = score.to_string();
    assert_eq!(
        p.cmd(&["SEMAPHORE.RENEW", "s", &id[0], "PX", "70000"]),
        Reply::Int(1)
    );
    let renewed = (leases(&mut p, "s")[0].1 as i64).to_string();
    assert_eq!(p.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]), Reply::Int(1));
    assert_eq!(p.cmd(&["SEMAPHORE.DRAIN", "s"]), Reply::Int(2));
    assert_eq!(p.cmd(&["SEMAPHORE.ADD", "s", "-1"]), Reply::Int(-1));
    // No-ops and errors replicate nothing.
    assert!(p.cmd(&["SEMAPHORE.ACQUIRE", "s"]).is_nil());
    assert_eq!(p.cmd(&["SEMAPHORE.CREATE", "s", "1"]), Reply::Int(0));
    assert_eq!(p.cmd(&["SEMAPHORE.RENEW", "s", &id[0]]), Reply::Int(0));
    assert!(p.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]).is_error());
    assert!(
        p.cmd(&["SEMAPHORE.INFO", "s"])
            .map_get("available")
            .is_some()
    );
    p.cmd(&["SET", "marker", "1"]);
    let effects = read_stream_until(&mut fake, "1", &mut all);
    let ts = lease_set("s");
    // The fake replica is an online replica: messages go down the stream
    // (not into the AOF), as PUBLISH does.
    let ch: &[u8] = b"redisson_sc:{s}";
    let expected = vec![
        v(&[b"SET", b"s", b"3", b"PXAT", d.as_bytes()]),
        v(&[b"PUBLISH", ch, b"3"]),
        v(&[b"INCRBY", b"s", b"-1"]),
        v(&[b"INCRBY", b"s", b"-1"]),
        v(&[b"ZADD", ts.as_bytes(), score.as_bytes(), &raw]),
        v(&[b"PEXPIREAT", ts.as_bytes(), d.as_bytes()]),
        v(&[b"ZADD", ts.as_bytes(), renewed.as_bytes(), &raw]),
        v(&[b"ZREM", ts.as_bytes(), &raw]),
        v(&[b"INCRBY", b"s", b"1"]),
        v(&[b"PUBLISH", ch, b"2"]),
        v(&[b"SET", b"s", b"0", b"KEEPTTL"]),
        v(&[b"INCRBY", b"s", b"-1"]),
    ];
    assert_eq!(
        effects,
        expected,
        "{kind}\nreplication stream:\n{}",
        show(&all)
    );

    // A lease that lapses: the server's sweep, at the deadline.
    assert_eq!(p.cmd(&["SEMAPHORE.ADD", "s", "2"]), Reply::Int(1));
    let id = ids(&p.cmd(&["SEMAPHORE.LEASE", "s", "PX", "30"]));
    let raw = unhex(id[0].as_bytes());
    let ok = wait_until(2 * SECOND, || count(&mut p, "s") == 1);
    assert!(ok, "{kind}: swept");
    p.cmd(&["SET", "marker", "2"]);
    let effects = read_stream_until(&mut fake, "2", &mut all);
    assert_eq!(effects.len(), 8, "{kind}: {}", show(&all));
    assert_eq!(effects[0], v(&[b"INCRBY", b"s", b"2"]), "{kind}");
    assert_eq!(effects[1], v(&[b"PUBLISH", ch, b"1"]), "{kind}");
    assert_eq!(effects[2], v(&[b"INCRBY", b"s", b"-1"]), "{kind}");
    assert_eq!(effects[3][0], b"ZADD", "{kind}");
    assert_eq!(effects[4][0], b"PEXPIREAT", "{kind}");
    assert_eq!(effects[5], v(&[b"ZREM", ts.as_bytes(), &raw]), "{kind}");
    assert_eq!(effects[6], v(&[b"INCRBY", b"s", b"1"]), "{kind}");
    assert_eq!(effects[7], v(&[b"PUBLISH", ch, b"1"]), "{kind}");
}

/// The module's writes fire the events the equivalent commands fire, and
/// the lifecycle events (class `d`): `semaphore.acquired` once per ACQUIRE
/// or LEASE call whatever COUNT, `semaphore.released` once per RELEASE or
/// RETURN call; CREATE, ADD and DRAIN fire none.
fn keyspace_and_lifecycle_events(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut e = Events::listen(&s);
    let ts = lease_set("s");
    let ts = ts.as_str();
    c.cmd(&["SEMAPHORE.CREATE", "s", "5", "PX", "100000"]);
    assert_eq!(
        e.since(&mut c),
        ev(&[("set", "s"), ("expire", "s")]),
        "{kind}"
    );
    c.cmd(&["SEMAPHORE.ACQUIRE", "s", "COUNT", "2"]);
    assert_eq!(
        e.since(&mut c),
        ev(&[("incrby", "s"), ("semaphore.acquired", "s")]),
        "{kind}"
    );
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "COUNT", "2", "PX", "60000"]));
    assert_eq!(
        e.since(&mut c),
        ev(&[
            ("incrby", "s"),
            ("zadd", ts),
            ("expire", ts),
            ("semaphore.acquired", "s")
        ]),
        "{kind}"
    );
    c.cmd(&["SEMAPHORE.RENEW", "s", &id[0]]);
    assert_eq!(e.since(&mut c), ev(&[("zadd", ts)]), "{kind}");
    c.cmd(&["SEMAPHORE.RETURN", "s", &id[0]]);
    assert_eq!(
        e.since(&mut c),
        ev(&[("zrem", ts), ("incrby", "s"), ("semaphore.released", "s")]),
        "{kind}"
    );
    c.cmd(&["SEMAPHORE.RETURN", "s", &id[1]]);
    assert_eq!(
        e.since(&mut c),
        ev(&[
            ("zrem", ts),
            ("del", ts),
            ("incrby", "s"),
            ("semaphore.released", "s")
        ]),
        "{kind}: the set goes with its last id"
    );
    c.cmd(&["SEMAPHORE.RELEASE", "s", "COUNT", "2"]);
    assert_eq!(
        e.since(&mut c),
        ev(&[("incrby", "s"), ("semaphore.released", "s")]),
        "{kind}"
    );
    c.cmd(&["SEMAPHORE.ADD", "s", "1"]);
    assert_eq!(e.since(&mut c), ev(&[("incrby", "s")]), "{kind}");
    c.cmd(&["SEMAPHORE.DRAIN", "s"]);
    assert_eq!(e.since(&mut c), ev(&[("set", "s")]), "{kind}");
    // Nothing done, nothing fired.
    c.cmd(&["SEMAPHORE.ACQUIRE", "s"]);
    c.cmd(&["SEMAPHORE.CREATE", "s", "1"]);
    c.cmd(&["SEMAPHORE.INFO", "s"]);
    c.cmd(&["SEMAPHORE.ACQUIRE", "s", "COUNT", "0"]);
    assert_eq!(e.since(&mut c), ev(&[]), "{kind}");
    // Only `d`: the lifecycle events alone.
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kd"]);
    let mut only = s.client();
    only.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    c.cmd(&["SEMAPHORE.RELEASE", "s"]);
    c.cmd(&["SEMAPHORE.ACQUIRE", "s"]);
    let got: Vec<Vec<u8>> = (0..2)
        .map(|_| only.read_reply().as_array()[3].as_bytes().to_vec())
        .collect();
    assert_eq!(
        got,
        vec![
            b"semaphore.released".to_vec(),
            b"semaphore.acquired".to_vec()
        ],
        "{kind}"
    );
    silent(&mut only, 50, "nothing else with Kd");
}

/// The state of the semaphore `s` and its lease set.
fn both(c: &mut Client) -> [(Reply, Reply, Reply); 2] {
    [key_state(c, b"s"), key_state(c, b"{s}:timeout")]
}

/// Bad input on every command: a clear error, and nothing changed at the
/// key or its lease set.
fn bad_input_changes_nothing(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "5", "PX", "100000"]);
    let id = ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "100000"]))[0].clone();
    let unknown = "0123456789abcdef0123456789abcdef";
    let max = i64::MAX.to_string();
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["SEMAPHORE.CREATE"], "ERR", "wrong number of arguments"),
        (
            vec!["SEMAPHORE.CREATE", "s"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["SEMAPHORE.CREATE", "s", "-1"], "ERR", "permits"),
        (vec!["SEMAPHORE.CREATE", "s", "x"], "ERR", "permits"),
        (
            vec!["SEMAPHORE.CREATE", "s", "1", "BLOCK", "5"],
            "ERR",
            "syntax",
        ),
        (
            vec!["SEMAPHORE.CREATE", "s", "1", "PX", "0"],
            "ERR",
            "lease",
        ),
        (vec!["SEMAPHORE.CREATE", "s", "1", "PX"], "ERR", "syntax"),
        (
            vec!["SEMAPHORE.CREATE", "s", "1", "PX", "1", "EX", "1"],
            "ERR",
            "",
        ),
        (
            vec!["SEMAPHORE.ADD", "s"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["SEMAPHORE.ADD", "s", "1", "2"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["SEMAPHORE.ADD", "s", "1.5"], "ERR", "delta"),
        (vec!["SEMAPHORE.ADD", "s", &max], "ERR", "overflow"),
        (
            vec!["SEMAPHORE.ACQUIRE"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "s", "COUNT", "0"], "ERR", "COUNT"),
        (
            vec!["SEMAPHORE.ACQUIRE", "s", "COUNT", "-1"],
            "ERR",
            "COUNT",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "s", "COUNT", "x"], "ERR", "COUNT"),
        (vec!["SEMAPHORE.ACQUIRE", "s", "COUNT"], "ERR", "syntax"),
        (
            vec!["SEMAPHORE.ACQUIRE", "s", "COUNT", "1", "COUNT", "1"],
            "ERR",
            "syntax",
        ),
        (
            vec!["SEMAPHORE.ACQUIRE", "s", "KEEPALIVE"],
            "ERR",
            "KEEPALIVE",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "s", "PX", "10"], "ERR", "syntax"),
        (
            vec!["SEMAPHORE.ACQUIRE", "s", "BLOCK", "-1"],
            "ERR",
            "BLOCK",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "s", "REPLICAS", "1"], "ERR", ""),
        (
            vec!["SEMAPHORE.ACQUIRE", "s", "REPLICAS", "1", "100"],
            "NOREPLICAS",
            "nothing was done",
        ),
        (vec!["SEMAPHORE.RELEASE", "s", "COUNT", "0"], "ERR", "COUNT"),
        (
            vec!["SEMAPHORE.RELEASE", "s", "BLOCK", "1"],
            "ERR",
            "syntax",
        ),
        (
            vec!["SEMAPHORE.RELEASE", "s", "COUNT", &max],
            "ERR",
            "overflow",
        ),
        (vec!["SEMAPHORE.LEASE", "s", "COUNT", "0"], "ERR", "COUNT"),
        (
            vec!["SEMAPHORE.LEASE", "s", "COUNT", "100001"],
            "ERR",
            "100000",
        ),
        (vec!["SEMAPHORE.LEASE", "s", "PX", "0"], "ERR", "lease"),
        (vec!["SEMAPHORE.LEASE", "s", "EX", "-1"], "ERR", "lease"),
        (vec!["SEMAPHORE.LEASE", "s", "TOKEN"], "ERR", "syntax"),
        (
            vec!["SEMAPHORE.LEASE", "s", "KEEPALIVE", "PX", "10"],
            "ERR",
            "KEEPALIVE",
        ),
        (
            vec!["SEMAPHORE.RETURN", "s"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["SEMAPHORE.RETURN", "s", "abc"], "ERR", "permit id"),
        (
            vec!["SEMAPHORE.RETURN", "s", "0123456789abcdef0123456789abcdeg"],
            "ERR",
            "permit id",
        ),
        (vec!["SEMAPHORE.RETURN", "s", &id, &id], "ERR", "twice"),
        (
            vec!["SEMAPHORE.RETURN", "s", unknown],
            "NOTOWNER",
            "not leased",
        ),
        (
            vec!["SEMAPHORE.RETURN", "s", &id, unknown],
            "NOTOWNER",
            "nothing was returned",
        ),
        (
            vec!["SEMAPHORE.RENEW", "s"],
            "ERR",
            "wrong number of arguments",
        ),
        (vec!["SEMAPHORE.RENEW", "s", "abc"], "ERR", "permit id"),
        (
            vec!["SEMAPHORE.RENEW", "s", &id, "COUNT", "1"],
            "ERR",
            "syntax",
        ),
        (vec!["SEMAPHORE.RENEW", "s", &id, "PX", "0"], "ERR", "lease"),
        (
            vec!["SEMAPHORE.RENEW", "s", &id, "KEEPALIVE", "PX", "5"],
            "ERR",
            "KEEPALIVE",
        ),
        (vec!["SEMAPHORE.INFO"], "ERR", "wrong number of arguments"),
        (
            vec!["SEMAPHORE.INFO", "s", "x"],
            "ERR",
            "wrong number of arguments",
        ),
        (
            vec!["SEMAPHORE.DRAIN", "s", "x"],
            "ERR",
            "wrong number of arguments",
        ),
    ];
    for (cmd, code, text) in &cases {
        let before = both(&mut c);
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some(*code), "{kind}: {cmd:?} -> {r:?}");
        let Reply::Error(msg) = &r else {
            unreachable!()
        };
        assert!(msg.contains(text), "{kind}: {cmd:?} -> {msg}");
        assert_eq!(both(&mut c), before, "{kind}: {cmd:?} changed something");
    }
    // Another type at the key: WRONGTYPE everywhere (CREATE included).
    c.cmd(&["RPUSH", "l", "x"]);
    let l_id = unknown;
    for cmd in [
        &["SEMAPHORE.CREATE", "l", "1"][..],
        &["SEMAPHORE.ADD", "l", "1"],
        &["SEMAPHORE.ACQUIRE", "l"],
        &["SEMAPHORE.RELEASE", "l"],
        &["SEMAPHORE.LEASE", "l"],
        &["SEMAPHORE.RETURN", "l", l_id],
        &["SEMAPHORE.RENEW", "l", l_id],
        &["SEMAPHORE.INFO", "l"],
        &["SEMAPHORE.DRAIN", "l"],
    ] {
        let before = key_state(&mut c, b"l");
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some("WRONGTYPE"), "{kind}: {cmd:?} -> {r:?}");
        assert_eq!(key_state(&mut c, b"l"), before, "{kind}: {cmd:?}");
    }
    // A string that is not a permit count: NOTSEMAPHORE (CREATE: 0).
    c.cmd(&["SET", "n", "three"]);
    for cmd in [
        &["SEMAPHORE.ADD", "n", "1"][..],
        &["SEMAPHORE.ACQUIRE", "n"],
        &["SEMAPHORE.RELEASE", "n"],
        &["SEMAPHORE.LEASE", "n"],
        &["SEMAPHORE.RETURN", "n", l_id],
        &["SEMAPHORE.RENEW", "n", l_id],
        &["SEMAPHORE.INFO", "n"],
        &["SEMAPHORE.DRAIN", "n"],
    ] {
        let before = key_state(&mut c, b"n");
        let r = c.cmd(cmd);
        assert_eq!(
            r.err_code(),
            Some("NOTSEMAPHORE"),
            "{kind}: {cmd:?} -> {r:?}"
        );
        assert_eq!(key_state(&mut c, b"n"), before, "{kind}: {cmd:?}");
    }
    assert_eq!(c.cmd(&["SEMAPHORE.CREATE", "n", "1"]), Reply::Int(0));
    assert_eq!(c.cmd(&["GET", "n"]), bulk("three"));
    // A lease set of another type: WRONGTYPE, nothing changed.
    c.cmd(&["SET", "w", "4"]);
    c.cmd(&["SET", "{w}:timeout", "junk"]);
    for cmd in [
        &["SEMAPHORE.CREATE", "w", "1"][..],
        &["SEMAPHORE.ADD", "w", "1"],
        &["SEMAPHORE.ACQUIRE", "w"],
        &["SEMAPHORE.RELEASE", "w"],
        &["SEMAPHORE.LEASE", "w"],
        &["SEMAPHORE.RETURN", "w", l_id],
        &["SEMAPHORE.RENEW", "w", l_id],
        &["SEMAPHORE.INFO", "w"],
        &["SEMAPHORE.DRAIN", "w"],
    ] {
        let before = [key_state(&mut c, b"w"), key_state(&mut c, b"{w}:timeout")];
        let r = c.cmd(cmd);
        if cmd[0] == "SEMAPHORE.CREATE" {
            // A string is at the key: 0, whatever else there is.
            assert!(
                matches!(r, Reply::Int(0) | Reply::Error(_)),
                "{kind}: {r:?}"
            );
        } else {
            assert_eq!(r.err_code(), Some("WRONGTYPE"), "{kind}: {cmd:?} -> {r:?}");
        }
        let after = [key_state(&mut c, b"w"), key_state(&mut c, b"{w}:timeout")];
        assert_eq!(after, before, "{kind}: {cmd:?}");
    }
    // The overflow of a count at the top of the range.
    c.cmd(&["SET", "big", &max]);
    let before = key_state(&mut c, b"big");
    for cmd in [
        &["SEMAPHORE.RELEASE", "big"][..],
        &["SEMAPHORE.ADD", "big", "1"],
    ] {
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some("ERR"), "{kind}: {cmd:?} -> {r:?}");
    }
    assert_eq!(key_state(&mut c, b"big"), before);
    assert!(s.log().lines().all(|l| !l.contains("panic")), "{kind}");
}

/// On a replica every writing command answers READONLY; SEMAPHORE.INFO
/// works there (waiters and keepalive 0: connection state on the primary)
/// and reads what the primary wrote.
fn replicas_refuse_writes_and_serve_info(kind: Kind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replica_of(&primary);
    let mut p = primary.client();
    let mut r = replica.client();
    assert_eq!(
        p.cmd(&["SEMAPHORE.CREATE", "s", "3", "PX", "100000"]),
        Reply::Int(1)
    );
    let id = ids(&p.cmd(&["SEMAPHORE.LEASE", "s", "KEEPALIVE", "PX", "60000"]));
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(
        leases(&mut r, "s"),
        leases(&mut p, "s"),
        "{kind}: same lease set"
    );
    assert_eq!(r.cmd(&["PEXPIRETIME", "s"]), p.cmd(&["PEXPIRETIME", "s"]));
    let on_primary = p.cmd(&["SEMAPHORE.INFO", "s"]);
    assert_eq!(on_primary.map_get("keepalive"), Some(&Reply::Int(1)));
    let info = r.cmd(&["SEMAPHORE.INFO", "s"]);
    assert_eq!(
        info.map_get("available"),
        Some(&Reply::Int(2)),
        "{kind}: {info:?}"
    );
    assert_eq!(
        info.map_get("leased"),
        Some(&Reply::Int(1)),
        "{kind}: {info:?}"
    );
    assert_eq!(info.map_get("waiters"), Some(&Reply::Int(0)));
    assert_eq!(info.map_get("keepalive"), Some(&Reply::Int(0)));
    assert!(info.map_get("ttl").unwrap().as_int() > 0);
    let before = [key_state(&mut r, b"s"), key_state(&mut r, b"{s}:timeout")];
    for cmd in [
        &["SEMAPHORE.CREATE", "x", "1"][..],
        &["SEMAPHORE.ADD", "s", "1"],
        &["SEMAPHORE.ACQUIRE", "s"],
        &["SEMAPHORE.RELEASE", "s"],
        &["SEMAPHORE.LEASE", "s"],
        &["SEMAPHORE.RETURN", "s", &id[0]],
        &["SEMAPHORE.RENEW", "s", &id[0]],
        &["SEMAPHORE.DRAIN", "s"],
    ] {
        let got = r.cmd(cmd);
        assert_eq!(
            got.err_code(),
            Some("READONLY"),
            "{kind}: {cmd:?} -> {got:?}"
        );
    }
    let after = [key_state(&mut r, b"s"), key_state(&mut r, b"{s}:timeout")];
    assert_eq!(after, before, "{kind}");
    // Read-only means read-only: not even the value's encoding changes.
    assert_eq!(r.cmd(&["OBJECT", "ENCODING", "s"]), bulk("int"), "{kind}");
}

/// BLOCK is ignored inside MULTI/EXEC and scripts (answered at once, as
/// BLPOP there); KEEPALIVE in a script is an ERR; REPLICAS n > 0 is an ERR
/// in both; KEEPALIVE in MULTI ties to the MULTI's connection.
fn multi_and_scripts(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "1"]);
    assert_eq!(c.cmd(&["MULTI"]), Reply::Status("OK".into()));
    c.cmd(&["SEMAPHORE.ACQUIRE", "s", "BLOCK", "0"]);
    c.cmd(&["SEMAPHORE.ACQUIRE", "s", "BLOCK", "0"]);
    c.cmd(&["SEMAPHORE.LEASE", "s", "BLOCK", "0"]);
    c.cmd(&["SEMAPHORE.ACQUIRE", "s", "REPLICAS", "1", "100"]);
    let r = c.cmd(&["EXEC"]);
    let items = r.as_array();
    assert_eq!(items[0], Reply::Int(1), "{kind}: {r:?}");
    assert!(items[1].is_nil(), "{kind}: {r:?}");
    assert!(items[2].is_nil(), "{kind}: {r:?}");
    assert_eq!(items[3].err_code(), Some("ERR"), "{kind}: {r:?}");
    let script = |cmd: &str| format!("return redis.call({cmd})");
    let r = c.cmd(&[
        "EVAL",
        &script("'SEMAPHORE.ACQUIRE', KEYS[1], 'BLOCK', '0'"),
        "1",
        "s",
    ]);
    assert!(r.is_nil(), "{kind}: {r:?}");
    let r = c.cmd(&[
        "EVAL",
        &script("'SEMAPHORE.LEASE', KEYS[1], 'KEEPALIVE'"),
        "1",
        "s",
    ]);
    assert_eq!(r.err_code(), Some("ERR"), "{kind}: {r:?}");
    assert!(format!("{r:?}").contains("script"), "{kind}: {r:?}");
    c.cmd(&["SEMAPHORE.RELEASE", "s", "COUNT", "2"]);
    let r = c.cmd(&["EVAL", &script("'SEMAPHORE.LEASE', KEYS[1]"), "1", "s"]);
    assert_eq!(r.as_array().len(), 1, "{kind}: a script can lease: {r:?}");
    // MULTI: tied to the MULTI's connection.
    c.cmd(&["MULTI"]);
    c.cmd(&["SEMAPHORE.LEASE", "s", "KEEPALIVE"]);
    let r = c.cmd(&["EXEC"]);
    assert_eq!(r.as_array()[0].as_array().len(), 1, "{kind}: {r:?}");
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 1, "{kind}");
    drop(c);
    let mut c = s.client();
    let ok = wait_until(2 * SECOND, || sem_field(&mut c, "s", "leased") == 1);
    assert!(ok, "{kind}: the MULTI connection's tied permit went back");
    assert_eq!(sem_field(&mut c, "s", "keepalive"), 0);
}

/// The lease set is a key the module derives: a user without access to it
/// gets NOPERM from commands that would touch it, and nothing changes.
fn acl_covers_the_lease_set(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    admin.cmd(&["SEMAPHORE.CREATE", "s", "2"]);
    let r = admin.cmd(&[
        "ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~s", "~other",
    ]);
    assert_eq!(r, Reply::Status("OK".into()), "{kind}");
    let mut bob = s.client();
    assert_eq!(bob.cmd(&["AUTH", "bob", "x"]), Reply::Status("OK".into()));
    // Anonymous permits on a semaphore without leases: allowed.
    assert_eq!(bob.cmd(&["SEMAPHORE.ACQUIRE", "s"]), Reply::Int(1));
    assert_eq!(bob.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(2));
    let before = both(&mut admin);
    let r = bob.cmd(&["SEMAPHORE.LEASE", "s"]);
    assert_eq!(r.err_code(), Some("NOPERM"), "{kind}: {r:?}");
    assert_eq!(both(&mut admin), before, "{kind}");
    // Once the set exists, every command that may sweep it needs it.
    ids(&admin.cmd(&["SEMAPHORE.LEASE", "s"]));
    let before = both(&mut admin);
    for cmd in [&["SEMAPHORE.ACQUIRE", "s"][..], &["SEMAPHORE.INFO", "s"]] {
        let r = bob.cmd(cmd);
        assert_eq!(r.err_code(), Some("NOPERM"), "{kind}: {cmd:?} -> {r:?}");
    }
    assert_eq!(both(&mut admin), before, "{kind}");
}

/// MODULE UNLOAD succeeds while leases have deadlines (a sweep is not a
/// client waiting), refuses while a client waits; after a reload the
/// semaphore is the same and its leases go back at their deadline again.
fn module_unload_with_leases_pending(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SEMAPHORE.CREATE", "s", "2"]);
    ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "60000"]));
    c.cmd(&["LATCH.CREATE", "l", "1"]);
    let mut w = s.client();
    w.send(&["LATCH.AWAIT", "l", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    assert_eq!(lock_stat(&s, "semaphore_sweeps"), 1);
    let r = c.cmd(&["MODULE", "UNLOAD", "lock"]);
    assert_eq!(r.err_code(), Some("ERR"), "{kind}: a client waits: {r:?}");
    assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    assert_eq!(w.read_reply(), Reply::Int(1));
    let before = both(&mut c);
    assert_eq!(
        c.cmd(&["MODULE", "UNLOAD", "lock"]),
        Reply::Status("OK".into()),
        "{kind}"
    );
    assert_eq!(both(&mut c), before, "{kind}");
    let path = testkit::module_path();
    assert_eq!(
        c.cmd(&args!["MODULE", "LOAD", path.display().to_string()]),
        Reply::Status("OK".into())
    );
    assert_eq!(sem_field(&mut c, "s", "leased"), 1, "{kind}");
    assert_eq!(c.cmd(&["SEMAPHORE.ACQUIRE", "s"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", "s"]), Reply::Int(1));
    ids(&c.cmd(&["SEMAPHORE.LEASE", "s", "PX", "50"]));
    let ok = wait_until(2 * SECOND, || count(&mut c, "s") == 1);
    assert!(ok, "{kind}: swept at its deadline after the reload");
}

/// Random SEMAPHORE.* and LATCH.* calls (random arity, options, numbers,
/// ids, binary junk; plain, in MULTI, in EVAL) on semaphores, latches and
/// keys of other types: every one answered, the server alive, a key no
/// call names untouched, nothing panicked.
fn random_calls_never_crash(kind: Kind) {
    use testkit::rng::Rng;
    let s = Server::start(kind);
    let mut c = s.client();
    c.cmd(&["SET", "sentinel", "keep"]);
    let sentinel = key_state(&mut c, b"sentinel");
    let names = [
        "SEMAPHORE.CREATE",
        "SEMAPHORE.ADD",
        "SEMAPHORE.ACQUIRE",
        "SEMAPHORE.RELEASE",
        "SEMAPHORE.LEASE",
        "SEMAPHORE.RETURN",
        "SEMAPHORE.RENEW",
        "SEMAPHORE.INFO",
        "SEMAPHORE.DRAIN",
        "LATCH.CREATE",
        "LATCH.COUNTDOWN",
        "LATCH.AWAIT",
        "LATCH.COUNT",
    ];
    let words = [
        "COUNT",
        "PX",
        "EX",
        "BLOCK",
        "KEEPALIVE",
        "REPLICAS",
        "TOKEN",
        "count",
        "px",
    ];
    let numbers = [
        "0",
        "1",
        "2",
        "3",
        "-1",
        "10",
        "100",
        "100000",
        "100001",
        "9223372036854775807",
        "-9223372036854775808",
        "1.5",
        "",
        "0x10",
        " 1",
    ];
    let keys = ["s", "l", "{s}:timeout", "list", "hash", "str", "a{b"];
    c.cmd(&["RPUSH", "list", "x"]);
    c.cmd(&["HSET", "hash", "f", "v"]);
    c.cmd(&["SET", "str", "abc"]);
    let mut ids: Vec<Vec<u8>> = vec![b"0123456789abcdef0123456789ABCDEF".to_vec()];
    let mut rng = Rng::new(0x5e4a ^ kind as u64);
    for i in 0..3000 {
        let name = *rng.pick(&names);
        let mut cmd: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
        if !rng.chance(3) {
            cmd.push(rng.pick(&keys).as_bytes().to_vec());
        }
        for _ in 0..rng.below(6) {
            cmd.push(match rng.below(6) {
                0 | 1 => rng.pick(&words).as_bytes().to_vec(),
                2 | 3 => rng.pick(&numbers).as_bytes().to_vec(),
                4 => rng.pick(&ids).clone(),
                _ => {
                    let n = rng.below(40) as usize;
                    rng.bytes(n)
                }
            });
        }
        // BLOCK 0 would wait: give every BLOCK a short time.
        for j in 0..cmd.len() {
            if cmd[j].eq_ignore_ascii_case(b"BLOCK") && j + 1 < cmd.len() {
                cmd[j + 1] = b"5".to_vec();
            }
        }
        let r = match i % 10 {
            8 => {
                c.cmd(&["MULTI"]);
                let queued = c.cmd(&cmd);
                let exec = c.cmd(&["EXEC"]);
                if queued.is_error() {
                    exec
                } else {
                    exec.as_array()[0].clone()
                }
            }
            9 => {
                let mut eval: Vec<Vec<u8>> = vec![
                    b"EVAL".to_vec(),
                    b"return redis.pcall(unpack(ARGV))".to_vec(),
                    b"0".to_vec(),
                ];
                eval.extend(cmd.iter().cloned());
                c.cmd(&eval)
            }
            _ => c.cmd(&cmd),
        };
        if let Reply::Array(items) = &r {
            for it in items {
                if let Reply::Bulk(b) = it
                    && b.len() == 32
                {
                    ids.push(b.clone());
                }
            }
        }
        if let Reply::Error(e) = &r {
            assert!(!e.contains("internal error"), "{kind}: {cmd:?} -> {e}");
        }
    }
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()), "{kind}");
    assert_eq!(key_state(&mut c, b"sentinel"), sentinel, "{kind}");
    assert!(s.log().lines().all(|l| !l.contains("panic")), "{kind}");
}

per_kind!(
    random_calls_never_crash,
    module_unload_with_leases_pending,
    layout_is_redissons,
    replies,
    add_and_drain_keep_the_ttl,
    channel_payloads,
    stream_carries_effects_only,
    keyspace_and_lifecycle_events,
    bad_input_changes_nothing,
    replicas_refuse_writes_and_serve_info,
    multi_and_scripts,
    acl_covers_the_lease_set,
);
