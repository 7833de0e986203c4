//! Checks the test harness itself against both servers, without the module
//! (which may not be built yet): reply types on the wire, pipelining,
//! pubsub, timeouts, crash/restart and replication.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// The servers the contract names: Redis 7.0 (Debian 12's) and Valkey 9.1.
fn plain(kind: Kind) -> Server {
    let s = Server::builder(kind).no_module().start();
    let version = s.version();
    eprintln!("{kind} {version} on port {}", s.port);
    let want = match kind {
        Kind::Redis => "7.0.",
        Kind::Valkey => "9.1.",
    };
    assert!(
        version.starts_with(want),
        "{kind} is version {version}, the tests expect {want}x"
    );
    s
}

#[test]
fn reply_types_resp2_and_resp3() {
    for kind in KINDS {
        let s = plain(kind);
        let mut c2 = s.client();
        let mut c3 = s.client_resp3();

        assert_eq!(c2.cmd(&["PING"]), Reply::Status("PONG".into()));
        assert_eq!(c3.cmd(&["PING"]), Reply::Status("PONG".into()));

        // Binary-safe key and value, NULs included.
        let key = &b"bin\0key"[..];
        let val = &b"a\0b\r\nc\xff"[..];
        assert_eq!(c2.cmd(&[&b"SET"[..], key, val]), Reply::Status("OK".into()));
        assert_eq!(c2.cmd(&[&b"GET"[..], key]), Reply::Bulk(val.to_vec()));
        assert_eq!(c3.cmd(&[&b"GET"[..], key]).as_bytes(), val);

        // Mixed argument types through args!.
        let n = 42;
        assert_eq!(c2.cmd(&args!["SET", b"num\0", n]).as_str(), "OK");
        assert_eq!(c2.cmd(&args!["INCRBY", b"num\0", 8]).as_int(), 50);

        // Missing key: RESP2 null bulk vs RESP3 null.
        assert_eq!(c2.cmd(&["GET", "missing"]), Reply::Nil);
        assert_eq!(c3.cmd(&["GET", "missing"]), Reply::Null);
        assert!(c2.cmd(&["GET", "missing"]).is_nil());

        // A RESP2 null array.
        assert_eq!(c2.cmd(&["BLPOP", "missing-list", "0.01"]), Reply::NilArray);

        // HGETALL: flat array in RESP2, map in RESP3; map_get on both.
        assert_eq!(c2.cmd(&["HSET", "h", "f1", "v1", "f2", "v2"]).as_int(), 2);
        let flat = c2.cmd(&["HGETALL", "h"]);
        assert!(matches!(&flat, Reply::Array(v) if v.len() == 4), "{flat:?}");
        assert_eq!(flat.map_get("f2"), Some(&Reply::Bulk(b"v2".to_vec())));
        let map = c3.cmd(&["HGETALL", "h"]);
        assert!(matches!(&map, Reply::Map(v) if v.len() == 2), "{map:?}");
        assert_eq!(map.map_get("f1").map(Reply::as_str), Some("v1"));
        assert_eq!(map.map_get("nope"), None);

        // RESP3-only scalar types.
        c3.cmd(&["ZADD", "z", "1.5", "m"]);
        assert_eq!(c3.cmd(&["ZSCORE", "z", "m"]), Reply::Double("1.5".into()));
        assert_eq!(c2.cmd(&["ZSCORE", "z", "m"]), Reply::Bulk(b"1.5".to_vec()));
        assert_eq!(c3.cmd(&["SMEMBERS", "missing-set"]), Reply::Set(vec![]));

        // Errors keep their full text; err_code is the first word.
        let e = c2.cmd(&["HGET", "h"]);
        assert_eq!(e.err_code(), Some("ERR"), "{e:?}");
        let e = c2.cmd(&["GET", "h"]);
        assert_eq!(e.err_code(), Some("WRONGTYPE"), "{e:?}");
        assert!(matches!(&e, Reply::Error(t) if t.starts_with("WRONGTYPE ")));
        assert_eq!(Reply::Int(1).err_code(), None);

        // Large replies (many partial reads).
        let big = vec![b'x'; 3 << 20];
        c2.cmd(&[&b"SET"[..], b"big", &big]);
        assert_eq!(c2.cmd(&["GET", "big"]).as_bytes().len(), big.len());
        let items: Vec<String> = (0..20_000).map(|i| i.to_string()).collect();
        let mut rpush = vec!["RPUSH".to_string(), "list".to_string()];
        rpush.extend(items.iter().cloned());
        assert_eq!(c2.cmd(&rpush).as_int(), 20_000);
        let all = c3.cmd(&["LRANGE", "list", "0", "-1"]);
        let got: Vec<&str> = all.as_array().iter().map(Reply::as_str).collect();
        assert_eq!(got, items);

        assert!(c2.id() > 0);
        assert_ne!(c2.id(), c3.id());
    }
}

#[test]
fn pipelining() {
    for kind in KINDS {
        let s = plain(kind);
        let mut c = s.client();
        for i in 0..100 {
            c.send(&args!["RPUSH", "p", i]);
        }
        for i in 0..100 {
            assert_eq!(c.read_reply(), Reply::Int(i + 1));
        }
        assert_eq!(c.cmd(&["LLEN", "p"]).as_int(), 100);
    }
}

#[test]
fn pubsub_and_try_read_reply() {
    for kind in KINDS {
        let s = plain(kind);
        let mut publisher = s.client();

        // Nothing pending: None within about the timeout, and the
        // connection is still usable afterwards.
        let mut idle = s.client();
        let t0 = Instant::now();
        assert_eq!(idle.try_read_reply(Duration::from_millis(200)), None);
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        assert_eq!(idle.cmd(&["PING"]), Reply::Status("PONG".into()));

        // RESP2: subscribe confirmation and messages are arrays.
        let mut sub2 = s.client();
        let r = sub2.cmd(&["SUBSCRIBE", "chan"]);
        assert_eq!(
            r,
            Reply::Array(vec![
                Reply::Bulk(b"subscribe".to_vec()),
                Reply::Bulk(b"chan".to_vec()),
                Reply::Int(1)
            ])
        );
        // RESP3: they are pushes.
        let mut sub3 = s.client_resp3();
        let r = sub3.cmd(&["SUBSCRIBE", "chan"]);
        assert!(
            matches!(&r, Reply::Push(v) if v[0].as_str() == "subscribe"),
            "{r:?}"
        );

        assert_eq!(sub2.try_read_reply(Duration::from_millis(100)), None);
        assert_eq!(publisher.cmd(&["PUBLISH", "chan", "hello\0"]).as_int(), 2);

        let expect = vec![
            Reply::Bulk(b"message".to_vec()),
            Reply::Bulk(b"chan".to_vec()),
            Reply::Bulk(b"hello\0".to_vec()),
        ];
        assert_eq!(
            sub2.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Array(expect.clone()))
        );
        assert_eq!(
            sub3.try_read_reply(Duration::from_secs(5)),
            Some(Reply::Push(expect))
        );
        assert_eq!(sub3.try_read_reply(Duration::from_millis(50)), None);
    }
}

#[test]
fn kill9_and_restart_keeps_aof_data() {
    for kind in KINDS {
        let mut s = Server::builder(kind)
            .no_module()
            .config("appendonly", "yes")
            .config("appendfsync", "always")
            .start();
        let port = s.port;
        let pid = s.pid();
        let mut c = s.client();
        assert_eq!(c.cmd(&["SET", "durable", "v1"]).as_str(), "OK");
        s.kill9();
        assert!(!s.is_running());
        s.restart();
        assert_eq!(s.port, port);
        assert_ne!(s.pid(), pid);
        assert_eq!(
            s.client().cmd(&["GET", "durable"]),
            Reply::Bulk(b"v1".to_vec())
        );
        assert_eq!(
            s.info_field("persistence", "aof_enabled").as_deref(),
            Some("1")
        );

        // Clean shutdown, and restart with a changed config.
        s.shutdown(&["NOSAVE"]);
        s.restart_with(|b| b.config("appendonly", "no"));
        assert_eq!(
            s.info_field("persistence", "aof_enabled").as_deref(),
            Some("0")
        );
        assert!(s.log().contains("Ready to accept connections"));
    }
}

#[test]
fn replication() {
    for kind in KINDS {
        let primary = plain(kind);
        let replica = plain(kind);
        let mut p = primary.client();
        p.cmd(&["SET", "before", "1"]);
        replica.replica_of(&primary);

        let mut r = replica.client();
        assert_eq!(r.cmd(&["GET", "before"]).as_str(), "1");

        p.cmd(&["SET", "after", "2"]);
        assert_eq!(p.cmd(&["WAIT", "1", "5000"]).as_int(), 1);
        assert_eq!(r.cmd(&["GET", "after"]).as_str(), "2");
        assert_eq!(r.cmd(&["SET", "x", "y"]).err_code(), Some("READONLY"));
    }
}
