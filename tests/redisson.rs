//! Interoperation with Redisson's RLock wire protocol. A test-local
//! "Redisson" runs Redisson 4.x's own Lua scripts (RedissonLock:
//! tryLockInnerAsync, unlockInnerAsync with its unlock latch,
//! forceUnlockAsync with the publish command as an argument, and the
//! batched watchdog of renewal/LockTask) through EVAL, with Redisson-style
//! owners `<client uuid>:<thread id>`, next to clients using LOCK.*. Both
//! must see one lock, and Redisson's subscribers must be woken by LOCK.*
//! releases. (The scripts are byte for byte what Redisson 4.7.0 sends:
//! clients/java's RedissonScriptsTest checks testkit::redisson against real
//! Redisson; older Redissons' scripts are tested in blocking.rs and token.rs.)

mod common;

use std::time::Duration;

use common::*;
use testkit::redisson::{
    FORCE_UNLOCK_3_22, RENEW_BATCH, TRY_LOCK, UNLOCK_3_24, UNLOCK_MESSAGE, channel, unlock_latch,
};

/// One Redisson client: a connection and a client UUID; owners are
/// `<uuid>:<thread id>`.
struct Redisson {
    c: Client,
    id: &'static str,
    lease_ms: i64,
    /// Unlock requests sent (each has its own unlock latch).
    requests: u64,
}

impl Redisson {
    fn new(server: &Server, id: &'static str) -> Redisson {
        Redisson {
            c: server.client(),
            id,
            lease_ms: 30000,
            requests: 0,
        }
    }

    fn owner(&self, thread: u32) -> String {
        format!("{}:{thread}", self.id)
    }

    /// `None` = acquired; `Some(pttl)` = held by someone else.
    #[track_caller]
    fn try_lock(&mut self, key: &[u8], thread: u32) -> Option<i64> {
        let owner = self.owner(thread);
        match self
            .c
            .cmd(&args!["EVAL", TRY_LOCK, 1, key, self.lease_ms, owner])
        {
            Reply::Nil => None,
            Reply::Int(pttl) => Some(pttl),
            other => panic!("tryLock replied {other:?}"),
        }
    }

    /// `None` = "attempt to unlock lock, not locked by current thread";
    /// `Some(false)` = still held; `Some(true)` = freed. As Redisson 3.24+
    /// does it: the script reads and then writes the request's unlock
    /// latch; the client deletes the latch afterwards.
    #[track_caller]
    fn unlock(&mut self, key: &[u8], thread: u32) -> Option<bool> {
        let owner = self.owner(thread);
        let ch = channel(key);
        self.requests += 1;
        let latch = unlock_latch(key, format!("{:032x}", self.requests).as_bytes());
        let r = self.c.cmd(&args![
            "EVAL",
            UNLOCK_3_24,
            3,
            key,
            ch,
            latch,
            UNLOCK_MESSAGE,
            self.lease_ms,
            owner,
            "PUBLISH",
            20000
        ]);
        self.c.cmd(&args!["DEL", latch]);
        match r {
            Reply::Nil => None,
            Reply::Int(0) => Some(false),
            Reply::Int(1) => Some(true),
            other => panic!("unlock replied {other:?}"),
        }
    }

    /// The watchdog's batched renewal, for one lock.
    #[track_caller]
    fn renew(&mut self, key: &[u8], thread: u32) -> bool {
        let owner = self.owner(thread);
        match self
            .c
            .cmd(&args!["EVAL", RENEW_BATCH, 1, key, self.lease_ms, owner])
        {
            Reply::Array(v) if v == vec![Reply::Int(1)] => true,
            Reply::Array(v) if v == vec![Reply::Int(0)] => false,
            other => panic!("renewExpiration replied {other:?}"),
        }
    }

    #[track_caller]
    fn force_unlock(&mut self, key: &[u8]) -> bool {
        let ch = channel(key);
        match self.c.cmd(&args![
            "EVAL",
            FORCE_UNLOCK_3_22,
            2,
            key,
            ch,
            UNLOCK_MESSAGE,
            "PUBLISH"
        ]) {
            Reply::Int(n) => n == 1,
            other => panic!("forceUnlock replied {other:?}"),
        }
    }
}

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

#[track_caller]
fn hget(c: &mut Client, key: &[u8], owner: &str) -> Reply {
    c.cmd(&args!["HGET", key, owner])
}

/// A subscriber to one channel, RESP2 or RESP3.
struct Subscriber {
    c: Client,
    resp3: bool,
    channel: Vec<u8>,
}

impl Subscriber {
    #[track_caller]
    fn new(server: &Server, resp3: bool, channel: &[u8]) -> Subscriber {
        let mut c = if resp3 {
            server.client_resp3()
        } else {
            server.client()
        };
        let r = c.cmd(&args!["SUBSCRIBE", channel]);
        let expect = vec![bulk("subscribe"), bulk(channel), Reply::Int(1)];
        assert_eq!(
            r,
            if resp3 {
                Reply::Push(expect)
            } else {
                Reply::Array(expect)
            }
        );
        Subscriber {
            c,
            resp3,
            channel: channel.to_vec(),
        }
    }

    /// Asserts the next thing received is the unlock message `0`.
    #[track_caller]
    fn expect_unlock(&mut self) {
        let got = self.c.try_read_reply(Duration::from_secs(5));
        let body = vec![bulk("message"), bulk(&self.channel), bulk(UNLOCK_MESSAGE)];
        let want = if self.resp3 {
            Reply::Push(body)
        } else {
            Reply::Array(body)
        };
        assert_eq!(got, Some(want), "on {}", self.channel.escape_ascii());
    }

    /// Asserts nothing arrives for a little while.
    #[track_caller]
    fn expect_silence(&mut self) {
        let got = self.c.try_read_reply(Duration::from_millis(100));
        assert_eq!(got, None, "on {}", self.channel.escape_ascii());
    }
}

// ----------------------------------------------------------------

fn exclusion_both_ways(kind: Kind) {
    let s = Server::start(kind);
    let mut r = Redisson::new(&s, "7c0e4a2e-1111-4c1e-9d1a-0123456789ab");
    let mut c = s.client();

    // Redisson holds → LOCK.ACQUIRE by another owner gets nil.
    assert_eq!(r.try_lock(b"k", 1), None);
    let owner = r.owner(1);
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "native"]), Reply::Nil);
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "*"]), Reply::Nil);
    // Another thread of the same Redisson client is another owner too.
    let other_thread = r.owner(2);
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", other_thread]), Reply::Nil);
    let pttl = r.try_lock(b"k", 2).expect("thread 2 got thread 1's lock");
    assert!(pttl > 28500 && pttl <= 30000, "{pttl}");
    assert_eq!(
        c.cmd(&["HGETALL", "k"]),
        Reply::Array(vec![bulk(&owner), bulk("1")])
    );

    // LOCK.ACQUIRE holds → Redisson's tryLock gets the PTTL.
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k2", "native", "PX", "20000"]),
        Reply::Int(1)
    );
    let pttl = r
        .try_lock(b"k2", 1)
        .expect("Redisson got a lock held natively");
    assert!(pttl > 18000 && pttl <= 20000, "{pttl}");
    assert_eq!(
        c.cmd(&["HGETALL", "k2"]),
        Reply::Array(vec![bulk("native"), bulk("1")])
    );
    // A generated owner too.
    let uuid = c.cmd(&["LOCK.ACQUIRE", "k3", "*"]).as_bytes().to_vec();
    // The default lease, 30 s.
    let pttl = r
        .try_lock(b"k3", 1)
        .expect("Redisson got a lock held by a generated owner");
    assert!(pttl > 28500 && pttl <= 30000, "{pttl}");
    assert_eq!(
        c.cmd(&["HGETALL", "k3"]),
        Reply::Array(vec![bulk(&uuid), bulk("1")])
    );
}

fn reentry_across_protocols(kind: Kind) {
    let s = Server::start(kind);
    let mut r = Redisson::new(&s, "0b7c5a0e-2222-4f00-8000-00000000abcd");
    let mut c = s.client();
    let owner = r.owner(42);

    // Redisson first, then LOCK.ACQUIRE with the same owner re-enters.
    assert_eq!(r.try_lock(b"k", 42), None);
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", owner, "PX", 50000]),
        Reply::Int(2)
    );
    assert_eq!(r.try_lock(b"k", 42), None);
    assert_eq!(hget(&mut c, b"k", &owner), bulk("3"));
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", owner]), Reply::Int(4));
    // Down again, alternating.
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "k", owner]), Reply::Int(3));
    assert_eq!(r.unlock(b"k", 42), Some(false));
    assert_eq!(hget(&mut c, b"k", &owner), bulk("2"));
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "k", owner]), Reply::Int(1));
    assert_eq!(r.unlock(b"k", 42), Some(true));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));

    // LOCK.ACQUIRE first, then Redisson re-enters.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", owner]), Reply::Int(1));
    assert_eq!(r.try_lock(b"k", 42), None);
    assert_eq!(hget(&mut c, b"k", &owner), bulk("2"));
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "k", owner]), Reply::Int(3));
    assert_eq!(r.unlock(b"k", 42), Some(false));
    assert_eq!(r.unlock(b"k", 42), Some(false));
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "k", owner]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
}

fn release_renew_and_force_across(kind: Kind) {
    let s = Server::start(kind);
    let mut r = Redisson::new(&s, "11111111-3333-4333-8333-333333333333");
    let mut r2 = Redisson::new(&s, "22222222-4444-4444-8444-444444444444");
    let mut c = s.client();
    let owner = r.owner(1);

    // Redisson-taken, LOCK.RELEASE frees it: anyone can take it next.
    assert_eq!(r.try_lock(b"a", 1), None);
    assert_err_code(&c.cmd(&["LOCK.RELEASE", "a", "native"]), "NOTOWNER");
    assert_eq!(c.cmd(&args!["LOCK.RELEASE", "a", owner]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "a"]), Reply::Int(0));
    assert_eq!(r2.try_lock(b"a", 1), None);

    // LOCK-taken, Redisson's unlock frees it.
    assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", "b", owner]), Reply::Int(1));
    assert_eq!(r2.unlock(b"b", 1), None); // not locked by current thread
    assert_eq!(r.unlock(b"b", 1), Some(true));
    assert_eq!(c.cmd(&["EXISTS", "b"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "b", "native"]), Reply::Int(1));

    // Watchdog renewals both ways.
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "c", owner, "PX", 1000]),
        Reply::Int(1)
    );
    r.lease_ms = 45000;
    assert!(r.renew(b"c", 1));
    let pttl = c.cmd(&["PTTL", "c"]).as_int();
    assert!(pttl > 44000 && pttl <= 45000, "{pttl}");
    assert!(!r2.renew(b"c", 1));
    r.lease_ms = 30000;
    assert_eq!(r.try_lock(b"d", 1), None);
    assert_eq!(
        c.cmd(&args!["LOCK.RENEW", "d", owner, "PX", 60000]),
        Reply::Int(1)
    );
    let pttl = c.cmd(&["PTTL", "d"]).as_int();
    assert!(pttl > 59000 && pttl <= 60000, "{pttl}");
    assert_eq!(c.cmd(&["LOCK.RENEW", "d", "native"]), Reply::Int(0));

    // Force unlock both ways.
    assert!(r2.force_unlock(b"c"));
    assert_eq!(c.cmd(&["EXISTS", "c"]), Reply::Int(0));
    assert!(!r2.force_unlock(b"c"));
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "d"]), Reply::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "d"]), Reply::Int(0));
    assert_eq!(r2.try_lock(b"d", 9), None);
}

#[track_caller]
fn assert_err_code(r: &Reply, code: &str) {
    assert_eq!(r.err_code(), Some(code), "{r:?}");
}

fn unlock_message_reaches_subscribers(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let mut r = Redisson::new(&s, "33333333-5555-4555-8555-555555555555");
    let ch = channel(b"k");
    assert_eq!(ch, b"redisson_lock__channel:{k}");
    let mut subs = [
        Subscriber::new(&s, false, &ch),
        Subscriber::new(&s, true, &ch),
    ];

    // LOCK.RELEASE: nothing for a partial release, `0` when freed.
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(2));
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(1));
    for sub in &mut subs {
        sub.expect_silence();
    }
    assert_eq!(c.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
    for sub in &mut subs {
        sub.expect_unlock();
        sub.expect_silence();
    }

    // Errors and no-ops publish nothing.
    assert_err_code(&c.cmd(&["LOCK.RELEASE", "k", "a"]), "NOTOWNER");
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(0));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.RENEW", "k", "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "b"]), Reply::Nil);
    for sub in &mut subs {
        sub.expect_silence();
    }

    // LOCK.FORCERELEASE: `0`.
    assert_eq!(c.cmd(&["LOCK.FORCERELEASE", "k"]), Reply::Int(1));
    for sub in &mut subs {
        sub.expect_unlock();
        sub.expect_silence();
    }

    // A Redisson-taken lock released natively: same message.
    assert_eq!(r.try_lock(b"k", 1), None);
    assert_eq!(
        c.cmd(&args!["LOCK.RELEASE", "k", r.owner(1)]),
        Reply::Int(0)
    );
    for sub in &mut subs {
        sub.expect_unlock();
    }
    // And Redisson's own unlock, for comparison: identical frames.
    assert_eq!(
        c.cmd(&args!["LOCK.ACQUIRE", "k", r.owner(1)]),
        Reply::Int(1)
    );
    assert_eq!(r.unlock(b"k", 1), Some(true));
    for sub in &mut subs {
        sub.expect_unlock();
        sub.expect_silence();
    }

    // A lease that lapses publishes nothing (as in Redisson).
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "20"]),
        Reply::Int(1)
    );
    assert!(wait_until(Duration::from_secs(2), || {
        c.cmd(&["EXISTS", "k"]) == Reply::Int(0)
    }));
    for sub in &mut subs {
        sub.expect_silence();
    }
}

fn channel_naming_rule(kind: Kind) {
    let s = Server::start(kind);
    let mut c = s.client();
    let cases: &[(&[u8], &[u8])] = &[
        (b"orders", b"redisson_lock__channel:{orders}"),
        (b"{user1}:lock", b"redisson_lock__channel:{user1}:lock"),
        (b"a{b", b"redisson_lock__channel:a{b"),
        (b"x}y", b"redisson_lock__channel:{x}y}"),
        (b"{}", b"redisson_lock__channel:{}"),
        (b"\0\xff", b"redisson_lock__channel:{\0\xff}"),
        (b"sp ace\r\n", b"redisson_lock__channel:{sp ace\r\n}"),
    ];
    // One pattern subscriber catches every channel the module publishes on.
    let mut all = s.client_resp3();
    assert_eq!(
        all.cmd(&["PSUBSCRIBE", "redisson_lock__channel:*"]),
        Reply::Push(vec![
            bulk("psubscribe"),
            bulk("redisson_lock__channel:*"),
            Reply::Int(1),
        ])
    );
    let unlocked = |ch: &[u8]| {
        Reply::Push(vec![
            bulk("pmessage"),
            bulk("redisson_lock__channel:*"),
            bulk(ch),
            bulk(UNLOCK_MESSAGE),
        ])
    };
    for (key, want) in cases {
        assert_eq!(channel(key), *want, "test's own rule");
        let mut sub = Subscriber::new(&s, false, want);
        for how in ["release", "force"] {
            assert_eq!(c.cmd(&args!["LOCK.ACQUIRE", key, "a"]), Reply::Int(1));
            // RELEASE answers the holds left (0: freed), FORCERELEASE 1
            // (a lock was there).
            let r = match how {
                "release" => c.cmd(&args!["LOCK.RELEASE", key, "a"]),
                _ => c.cmd(&args!["LOCK.FORCERELEASE", key]),
            };
            let freed = if how == "release" { 0 } else { 1 };
            assert_eq!(r, Reply::Int(freed), "{}: {how}", key.escape_ascii());
            sub.expect_unlock();
            let got = all.try_read_reply(Duration::from_secs(5));
            assert_eq!(got, Some(unlocked(want)), "{}: {how}", key.escape_ascii());
            // Exactly one message per unlock.
            assert_eq!(all.try_read_reply(Duration::from_millis(50)), None);
        }
        // The same channel as Redisson's own unlock uses.
        let mut r = Redisson::new(&s, "44444444-6666-4666-8666-666666666666");
        assert_eq!(r.try_lock(key, 1), None);
        assert_eq!(r.unlock(key, 1), Some(true));
        sub.expect_unlock();
        assert_eq!(
            all.try_read_reply(Duration::from_secs(5)),
            Some(unlocked(want)),
            "{}: Redisson's unlock",
            key.escape_ascii()
        );
        assert_eq!(all.try_read_reply(Duration::from_millis(50)), None);
    }
}

fn info_describes_redisson_lock(kind: Kind) {
    let s = Server::start(kind);
    let mut r = Redisson::new(&s, "55555555-7777-4777-8777-777777777777");
    r.lease_ms = 20000;
    assert_eq!(r.try_lock(b"k", 7), None);
    assert_eq!(r.try_lock(b"k", 7), None);
    let owner = r.owner(7);
    for mut c in [s.client(), s.client_resp3()] {
        let info = c.cmd(&["LOCK.INFO", "k"]);
        assert_eq!(info.map_get("owner"), Some(&bulk(&owner)), "{info:?}");
        assert_eq!(info.map_get("holds"), Some(&Reply::Int(2)), "{info:?}");
        let ttl = info.map_get("ttl").unwrap().as_int();
        assert!(ttl > 18500 && ttl <= 20000, "{info:?}");
        assert_eq!(info.map_get("waiters"), Some(&Reply::Int(0)), "{info:?}");
    }
    // Redisson's partial unlock resets the lease (pexpire); LOCK.INFO sees it.
    r.lease_ms = 90000;
    assert_eq!(r.unlock(b"k", 7), Some(false));
    let mut c = s.client();
    let info = c.cmd(&["LOCK.INFO", "k"]);
    assert_eq!(info.map_get("holds"), Some(&Reply::Int(1)), "{info:?}");
    assert!(info.map_get("ttl").unwrap().as_int() > 88000, "{info:?}");
    assert_eq!(r.unlock(b"k", 7), Some(true));
    assert_eq!(c.cmd(&["LOCK.INFO", "k"]), Reply::Nil);
}

per_kind!(
    exclusion_both_ways,
    reentry_across_protocols,
    release_renew_and_force_across,
    unlock_message_reaches_subscribers,
    channel_naming_rule,
    info_describes_redisson_lock,
);
