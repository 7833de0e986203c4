//! SEMAPHORE.* and LATCH.* on a single-node cluster (SPEC Part 2, "Derived
//! keys", "Topology"): a semaphore's lease set `{key}:timeout` lives in the
//! key's slot; a key whose lease set would land in another slot (a `{`
//! without a valid hash tag, a `}` without a `{`) answers CROSSSLOT where
//! the set would be written and changes nothing, while its anonymous
//! permits work; notifications are sharded (SSUBSCRIBE hears them, plain
//! subscribers do not), and skipped when the channel hashes elsewhere
//! (a latch key with a hash tag); the server's sweeps and waiters work.

mod common;
mod family;

use std::time::Duration;

use common::*;
use family::*;

/// One node owning every slot, state ok.
fn single_node_cluster(kind: Kind) -> Server {
    let s = Server::builder(kind)
        .config("cluster-enabled", "yes")
        .config("cluster-config-file", "nodes.conf")
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
fn slot(c: &mut Client, key: &str) -> i64 {
    c.cmd(&["CLUSTER", "KEYSLOT", key]).as_int()
}

#[track_caller]
fn ssubscribe(c: &mut Client, channel: &[u8]) {
    let r = c.cmd(&[&b"SSUBSCRIBE"[..], channel]);
    assert_eq!(r.as_array()[0], bulk("ssubscribe"), "{r:?}");
}

fn semaphores_in_a_cluster(kind: Kind) {
    let s = single_node_cluster(kind);
    let mut c = s.client();
    // Keys whose lease set shares their slot.
    for key in ["s", "{t}:1"] {
        let ts = lease_set(key);
        assert_eq!(slot(&mut c, &ts), slot(&mut c, key), "{kind}: {key}");
        let ch = format!(
            "redisson_sc:{}",
            if key.contains('{') {
                key.to_string()
            } else {
                format!("{{{key}}}")
            }
        );
        let mut sharded = s.client_resp3();
        let mut plain = s.client();
        ssubscribe(&mut sharded, ch.as_bytes());
        subscribe(&mut plain, ch.as_bytes());
        assert_eq!(c.cmd(&["SEMAPHORE.CREATE", key, "2"]), Reply::Int(1));
        assert_eq!(
            message(&mut sharded, ch.as_bytes(), SECOND),
            b"2",
            "{kind}: {key}"
        );
        let id = ids(&c.cmd(&["SEMAPHORE.LEASE", key, "COUNT", "2", "PX", "60000"]));
        let key_slot = slot(&mut c, key).to_string();
        assert_eq!(
            c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &key_slot]),
            Reply::Int(2),
            "{kind}: the key and its lease set, in one slot"
        );
        assert_eq!(c.cmd(&["SEMAPHORE.RENEW", key, &id[0]]), Reply::Int(1));
        assert_eq!(c.cmd(&["SEMAPHORE.RETURN", key, &id[0]]), Reply::Int(1));
        assert_eq!(
            message(&mut sharded, ch.as_bytes(), SECOND),
            b"1",
            "{kind}: {key}"
        );
        assert_eq!(sem_field(&mut c, key, "leased"), 1);
        silent(
            &mut plain,
            50,
            "plain subscribers hear nothing in a cluster",
        );
        // A lease runs out: the server sweeps it here too, and serves.
        let mut w = s.client();
        w.send(&["SEMAPHORE.ACQUIRE", key, "COUNT", "2", "BLOCK", "0"]);
        wait_waiting(&s, 1);
        assert_eq!(
            c.cmd(&["SEMAPHORE.RENEW", key, &id[1], "PX", "100"]),
            Reply::Int(1)
        );
        assert_eq!(w.read_reply(), Reply::Int(2), "{kind}: {key}");
        c.cmd(&["DEL", key]);
    }
    // Keys whose lease set hashes elsewhere: CROSSSLOT where it would be
    // written, nothing changed; anonymous permits work; the channel
    // (elsewhere too) is skipped.
    for key in ["a{b", "x}y"] {
        let ts = lease_set(key);
        assert_ne!(slot(&mut c, &ts), slot(&mut c, key), "{kind}: {key}");
        assert_eq!(
            c.cmd(&["SEMAPHORE.CREATE", key, "3"]),
            Reply::Int(1),
            "{kind}"
        );
        let before = key_state(&mut c, key.as_bytes());
        let unknown = "0123456789abcdef0123456789abcdef";
        for cmd in [
            &["SEMAPHORE.LEASE", key][..],
            &["SEMAPHORE.LEASE", key, "BLOCK", "10"],
            &["SEMAPHORE.RETURN", key, unknown],
            &["SEMAPHORE.RENEW", key, unknown],
        ] {
            let r = c.cmd(cmd);
            assert_eq!(r.err_code(), Some("CROSSSLOT"), "{kind}: {cmd:?} -> {r:?}");
        }
        assert_eq!(key_state(&mut c, key.as_bytes()), before, "{kind}: {key}");
        assert_eq!(
            c.cmd(&["SEMAPHORE.ACQUIRE", key, "COUNT", "2"]),
            Reply::Int(2)
        );
        assert_eq!(c.cmd(&["SEMAPHORE.RELEASE", key]), Reply::Int(2));
        assert_eq!(c.cmd(&["SEMAPHORE.DRAIN", key]), Reply::Int(2));
        assert_eq!(c.cmd(&["SEMAPHORE.ADD", key, "1"]), Reply::Int(1));
        let info = c.cmd(&["SEMAPHORE.INFO", key]);
        assert_eq!(
            info.map_get("available"),
            Some(&Reply::Int(1)),
            "{kind}: {info:?}"
        );
        assert_eq!(
            info.map_get("leased"),
            Some(&Reply::Int(0)),
            "{kind}: {info:?}"
        );
    }
    // Routing is by the key: COMMAND GETKEYS names it alone.
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "SEMAPHORE.LEASE", "s", "COUNT", "2"]),
        Reply::Array(vec![bulk("s")])
    );
    assert!(s.log().lines().all(|l| !l.contains("panic")), "{kind}");
}

fn latches_in_a_cluster(kind: Kind) {
    let s = single_node_cluster(kind);
    let mut c = s.client();
    let ch = b"redisson_countdownlatch__channel__{l}";
    let mut sharded = s.client();
    let mut plain = s.client_resp3();
    ssubscribe(&mut sharded, ch);
    subscribe(&mut plain, ch);
    assert_eq!(c.cmd(&["LATCH.CREATE", "l", "1"]), Reply::Int(1));
    assert_eq!(message(&mut sharded, ch, SECOND), b"1", "{kind}");
    let mut w = s.client();
    w.send(&["LATCH.AWAIT", "l", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "l"]), Reply::Int(0));
    assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
    assert_eq!(message(&mut sharded, ch, SECOND), b"0", "{kind}");
    silent(
        &mut plain,
        50,
        "plain subscribers hear nothing in a cluster",
    );
    // A key with a hash tag: the latch works, its channel (always braced,
    // in another slot) is skipped, as Redisson's scripts could not use it.
    let tagged = b"redisson_countdownlatch__channel__{{x}}";
    assert_ne!(
        slot(&mut c, std::str::from_utf8(tagged).unwrap()),
        slot(&mut c, "{x}")
    );
    let mut other = s.client();
    ssubscribe(&mut other, tagged);
    assert_eq!(c.cmd(&["LATCH.CREATE", "{x}", "1"]), Reply::Int(1));
    let mut w = s.client();
    w.send(&["LATCH.AWAIT", "{x}", "BLOCK", "0"]);
    wait_waiting(&s, 1);
    assert_eq!(c.cmd(&["LATCH.COUNTDOWN", "{x}"]), Reply::Int(0));
    assert_eq!(w.read_reply(), Reply::Int(1), "{kind}");
    silent(&mut other, 50, "a channel in another slot is skipped");
    // Expiry opens it at the deadline here too.
    c.cmd(&["LATCH.CREATE", "e", "1"]);
    c.cmd(&["PEXPIRE", "e", "100"]);
    assert_eq!(
        c.cmd(&["LATCH.AWAIT", "e", "BLOCK", "2000"]),
        Reply::Int(1),
        "{kind}"
    );
}

per_kind!(semaphores_in_a_cluster, latches_in_a_cluster);
