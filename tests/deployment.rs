//! What the module tells operators about their deployment, and what it
//! costs them: the eviction-policy warning (log and INFO lock, re-checked
//! when the config changes) and the memory a waiter takes.

mod common;

use std::time::Duration;

use common::*;

fn eviction_warning(c: &mut Client, s: &Server) -> Option<String> {
    let _ = c;
    s.info_field("lock", "lock_eviction")
}

fn eviction_policy_warning(kind: Kind) {
    // Loaded into a server whose policy can evict locks: warned at load.
    let s = Server::builder(kind)
        .config("maxmemory-policy", "allkeys-lru")
        .start();
    let mut c = s.client();
    let w = eviction_warning(&mut c, &s).expect("INFO lock warns at load");
    assert!(w.contains("allkeys-lru") && w.contains("noeviction"), "{w}");
    assert!(
        s.log()
            .contains("maxmemory-policy allkeys-lru can evict held locks"),
        "{}",
        s.log()
    );
    // Fixed at run time: the warning goes.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        Reply::Status("OK".into())
    );
    assert_eq!(eviction_warning(&mut c, &s), None);
    assert!(!s.info("lock").contains("lock_warnings"));
    // Every lock has a TTL: a volatile-* policy evicts locks too.
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    let w = eviction_warning(&mut c, &s).expect("volatile-ttl warns");
    assert!(w.contains("volatile-ttl"), "{w}");
    assert!(w.contains("if maxmemory is set"), "{w}");
    // ... and says so more urgently once a limit is set.
    c.cmd(&["CONFIG", "SET", "maxmemory", "1gb"]);
    let w = eviction_warning(&mut c, &s).expect("still warns");
    assert!(w.contains("when memory reaches maxmemory"), "{w}");
    // The default policy never warns.
    let quiet = Server::start(kind);
    let mut q = quiet.client();
    assert_eq!(eviction_warning(&mut q, &quiet), None);
    assert!(!quiet.log().contains("can evict held locks"));
}

/// How much `used_memory` grows per client blocked by `command` (each on
/// its own connection), once all are blocked.
fn memory_per_blocked_client(s: &Server, command: &[&[u8]], clients: usize) -> (i64, Vec<Client>) {
    let used = || -> i64 {
        s.info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let blocked = || -> usize {
        s.info_field("clients", "blocked_clients")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let already = blocked();
    let before = used();
    let waiters: Vec<Client> = (0..clients)
        .map(|_| {
            let mut c = s.client();
            c.send(command);
            c
        })
        .collect();
    let all = wait_until(Duration::from_secs(10), || blocked() == already + clients);
    assert!(all, "{}", s.info("clients"));
    ((used() - before) / clients as i64, waiters)
}

/// A waiter's copy of the key is shared per queue: a LOCK.ACQUIRE waiter
/// costs what a BLPOP waiter on the same key costs (the server keeps each
/// blocked client's command, key included, and its buffers), give or take
/// the module's small bookkeeping. Copying the key per waiter, as the
/// module once did, cost 3.5-4 MB per waiter with a 1 MB key name, against
/// ~2-3 MB for BLPOP.
fn key_copy_is_shared_per_queue(kind: Kind) {
    let s = Server::builder(kind).config("appendonly", "no").start();
    let mut admin = s.client();
    let key = vec![b'k'; 1 << 20];
    assert_eq!(
        admin.cmd(&[&b"LOCK.ACQUIRE"[..], &key, b"holder", b"PX", b"60000"]),
        Reply::Int(1)
    );
    const WAITERS: usize = 8;
    let mut list_key = key.clone();
    list_key[0] = b'l';
    let (blpop, _blpop_waiters) =
        memory_per_blocked_client(&s, &[b"BLPOP", &list_key, b"0"], WAITERS);
    let (lock, mut waiters) =
        memory_per_blocked_client(&s, &[b"LOCK.ACQUIRE", &key, b"w", b"BLOCK", b"0"], WAITERS);
    eprintln!("{kind}: per waiter on a 1 MB key: LOCK.ACQUIRE {lock} B, BLPOP {blpop} B");
    assert!(
        lock < blpop + (256 << 10),
        "LOCK.ACQUIRE waiter {lock} B vs BLPOP waiter {blpop} B on a 1 MB key"
    );
    // The queue still works: FIFO hand-off of the big key.
    assert_eq!(
        admin.cmd(&[&b"LOCK.RELEASE"[..], &key, b"holder"]),
        Reply::Int(0)
    );
    assert_eq!(waiters[0].read_reply(), Reply::Int(1));
    assert_eq!(admin.cmd(&[&b"LOCK.FORCERELEASE"[..], &key]), Reply::Int(1));
    assert_eq!(waiters[1].read_reply(), Reply::Int(1));
}

per_kind!(eviction_policy_warning, key_copy_is_shared_per_queue);
