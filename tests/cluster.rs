//! A single-node cluster: LOCK.* works, keys are routed by their position
//! (argument 1), and the unlock notification is a sharded publish: it
//! reaches SSUBSCRIBE subscribers of the channel and not plain SUBSCRIBE /
//! PSUBSCRIBE ones (checked on both servers).

mod common;

use std::time::Duration;

use common::*;
use testkit::redisson::channel;

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

/// One node owning every slot, state ok.
fn single_node_cluster(kind: Kind) -> Server {
    let s = Server::builder(kind)
        .config("cluster-enabled", "yes")
        .config("cluster-config-file", "nodes.conf")
        // So that one unserved slot does not take the whole node down.
        .config("cluster-require-full-coverage", "no")
        .start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        Reply::Status("OK".into())
    );
    let ok = wait_until(Duration::from_secs(15), || {
        let info = c.cmd(&["CLUSTER", "INFO"]);
        String::from_utf8_lossy(info.as_bytes()).contains("cluster_state:ok")
    });
    assert!(ok, "cluster never became ok");
    s
}

#[track_caller]
fn slot(c: &mut Client, key: &[u8]) -> i64 {
    c.cmd(&args!["CLUSTER", "KEYSLOT", key]).as_int()
}

fn cluster(kind: Kind) {
    let s = single_node_cluster(kind);
    let mut c = s.client();
    let mut c3 = s.client_resp3();

    // ---- the commands work, routed by their key
    for key in [&b"k"[..], b"{user1}:lock", b"bin\0\xff"] {
        assert_eq!(
            c.cmd(&args!["LOCK.ACQUIRE", key, "a", "PX", 60000]),
            Reply::Int(1)
        );
        assert_eq!(c3.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(2));
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "b"]), Reply::Nil);
        assert_eq!(c3.cmd(&args!["LOCK.ACQUIRE", key, "*"]), Reply::Null);
        let s_ = slot(&mut c, key);
        assert_eq!(
            c.cmd(&args!["CLUSTER", "COUNTKEYSINSLOT", s_]),
            Reply::Int(1)
        );
        let info = c3.cmd(&args!["LOCK.INFO", key]);
        assert!(matches!(&info, Reply::Map(_)), "{info:?}");
        assert_eq!(info.map_get("holds"), Some(&Reply::Int(2)));
        assert_eq!(
            c.cmd(&args!["LOCK.RENEW", key, "a", "PX", 5000]),
            Reply::Int(1)
        );
        assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(0));
        assert_eq!(
            c.cmd(&args!["LOCK.RELEASE", key, "a"]).err_code(),
            Some("NOTOWNER")
        );
        assert!(matches!(
            c.cmd(&args!["LOCK.ACQUIRE", key, "*"]),
            Reply::Bulk(_)
        ));
        assert_eq!(c.cmd(&args!["LOCK.FORCERELEASE", key]), Reply::Int(1));
        assert_eq!(
            c.cmd(&args![
                "COMMAND",
                "GETKEYS",
                "LOCK.ACQUIRE",
                key,
                "o",
                "PX",
                "1"
            ]),
            Reply::Array(vec![bulk(key)])
        );
    }

    // ---- the unlock message is sharded
    for key in [&b"k"[..], b"{user1}:lock"] {
        let ch = channel(key);
        let mut ss2 = s.client();
        let mut ss3 = s.client_resp3();
        let mut plain = s.client();
        let mut pattern = s.client_resp3();
        let ack = vec![bulk("ssubscribe"), bulk(&ch), Reply::Int(1)];
        assert_eq!(ss2.cmd(&args!["SSUBSCRIBE", ch]), Reply::Array(ack.clone()));
        assert_eq!(ss3.cmd(&args!["SSUBSCRIBE", ch]), Reply::Push(ack));
        assert_eq!(
            plain.cmd(&args!["SUBSCRIBE", ch]),
            Reply::Array(vec![bulk("subscribe"), bulk(&ch), Reply::Int(1)])
        );
        pattern.cmd(&["PSUBSCRIBE", "redisson_lock__channel:*"]);
        let message = vec![bulk("smessage"), bulk(&ch), bulk("0")];

        // Partial release: nothing.
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(2));
        assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(1));
        assert_eq!(ss2.try_read_reply(Duration::from_millis(100)), None);

        for how in ["release", "force"] {
            if how == "release" {
                assert_eq!(c.cmd(&args!["LOCK.RELEASE", key, "a"]), Reply::Int(0));
            } else {
                assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "b"]), Reply::Int(1));
                assert_eq!(c.cmd(&args!["LOCK.FORCERELEASE", key]), Reply::Int(1));
            }
            assert_eq!(
                ss2.try_read_reply(Duration::from_secs(5)),
                Some(Reply::Array(message.clone())),
                "{how}"
            );
            assert_eq!(
                ss3.try_read_reply(Duration::from_secs(5)),
                Some(Reply::Push(message.clone())),
                "{how}"
            );
        }
        // Plain and pattern subscribers hear nothing.
        assert_eq!(plain.try_read_reply(Duration::from_millis(100)), None);
        assert_eq!(pattern.try_read_reply(Duration::from_millis(10)), None);
        assert_eq!(ss2.try_read_reply(Duration::from_millis(10)), None);
    }

    // ---- routing uses argument 1: a key in an unserved slot is refused
    let k_slot = slot(&mut c, b"k");
    let other = (0..1000)
        .map(|i| format!("other{i}"))
        .find(|k| slot(&mut c, k.as_bytes()) != k_slot)
        .unwrap();
    assert_eq!(
        c.cmd(&args!["CLUSTER", "DELSLOTS", k_slot]),
        Reply::Status("OK".into())
    );
    for cmd in [
        &["LOCK.ACQUIRE", "k", "a"][..],
        &["LOCK.RELEASE", "k", "a"],
        &["LOCK.RENEW", "k", "a"],
        &["LOCK.INFO", "k"],
        &["LOCK.FORCERELEASE", "k"],
    ] {
        let r = c.cmd(cmd);
        assert_eq!(r.err_code(), Some("CLUSTERDOWN"), "{cmd:?}: {r:?}");
    }
    // The owner argument is not a key: an owner named like a key of the
    // removed slot changes nothing.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", other, "k"]), Reply::Int(1));
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", other, "k"]), Reply::Int(0));
}

per_kind!(cluster);
