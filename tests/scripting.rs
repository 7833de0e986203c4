//! LOCK.* inside MULTI/EXEC, Lua scripts (EVAL, EVAL_RO) and functions
//! (FCALL): same replies as outside, errors propagate with their codes
//! (redis.call) or come back as error tables (redis.pcall), and BLOCK never
//! waits there (nil when busy, granted when free), as BLPOP does.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn bulk(b: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(b.as_ref().to_vec())
}

const NOTOWNER_TEXT: &str =
    "NOTOWNER lock not held by this owner (expired, released or never acquired)";

#[track_caller]
fn assert_err(r: &Reply, code: &str, prefix: &str) {
    assert_eq!(r.err_code(), Some(code), "{r:?}");
    let Reply::Error(text) = r else {
        unreachable!()
    };
    assert!(
        text.starts_with(prefix),
        "{text:?} does not start with {prefix:?}"
    );
}

/// A client that gives up quickly: if anything blocked, the test fails
/// (instead of hanging) with a timeout.
fn quick(s: &Server, resp3: bool) -> Client {
    let mut c = if resp3 { s.client_resp3() } else { s.client() };
    c.set_timeout(Some(Duration::from_secs(3)));
    c
}

fn multi_exec(kind: Kind) {
    let s = Server::start(kind);
    let mut other = s.client();
    assert_eq!(
        other.cmd(&["LOCK.ACQUIRE", "busy", "x", "PX", "60000"]),
        Reply::Int(1)
    );

    for resp3 in [false, true] {
        let mut c = quick(&s, resp3);
        let nil = if resp3 { Reply::Null } else { Reply::Nil };
        let t0 = Instant::now();
        assert_eq!(c.cmd(&["MULTI"]), Reply::Status("OK".into()));
        let queued: &[&[&str]] = &[
            &["LOCK.ACQUIRE", "k", "a", "PX", "5000"],
            &["LOCK.ACQUIRE", "k", "a"],
            &["LOCK.ACQUIRE", "k", "b", "BLOCK", "1000"],
            &["LOCK.ACQUIRE", "busy", "a", "BLOCK", "0"],
            &["LOCK.INFO", "k"],
            &["LOCK.RENEW", "k", "a", "PX", "7000"],
            &["LOCK.RELEASE", "k", "b"],
            &["LOCK.RELEASE", "k", "a"],
            &["LOCK.FORCERELEASE", "k"],
            &["LOCK.ACQUIRE", "k", "b", "BLOCK", "0"],
            &["LOCK.ACQUIRE", "g", "*", "BLOCK", "100"],
            &["LOCK.ACQUIRE", "busy", "*", "BLOCK", "0", "PX", "100"],
            &["LOCK.ACQUIRE", "busy", "a", "PX", "0"],
            &["LOCK.INFO", "nothing"],
            &["LOCK.RELEASE", "nothing", "a"],
        ];
        for cmd in queued {
            assert_eq!(c.cmd(cmd), Reply::Status("QUEUED".into()), "{cmd:?}");
        }
        let exec = c.cmd(&["EXEC"]);
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        let r = exec.as_array();
        assert_eq!(r.len(), queued.len(), "{exec:?}");
        assert_eq!(r[0], Reply::Int(1));
        assert_eq!(r[1], Reply::Int(2));
        assert_eq!(r[2], nil, "BLOCK in MULTI on a busy lock");
        assert_eq!(r[3], nil, "BLOCK 0 in MULTI on a busy lock");
        if resp3 {
            assert!(matches!(&r[4], Reply::Map(m) if m.len() == 6), "{:?}", r[4]);
        } else {
            assert!(
                matches!(&r[4], Reply::Array(a) if a.len() == 12),
                "{:?}",
                r[4]
            );
        }
        assert_eq!(r[4].map_get("owner"), Some(&bulk("a")));
        assert_eq!(r[4].map_get("holds"), Some(&Reply::Int(2)));
        assert_eq!(r[5], Reply::Int(1));
        assert_eq!(r[6], Reply::Error(NOTOWNER_TEXT.into()));
        assert_eq!(r[7], Reply::Int(1));
        assert_eq!(r[8], Reply::Int(1));
        assert_eq!(r[9], Reply::Int(1), "BLOCK in MULTI on a free lock");
        let Reply::Bulk(uuid) = &r[10] else {
            panic!("{:?}", r[10])
        };
        assert_eq!(uuid.len(), 36);
        assert_eq!(r[11], nil);
        assert_err(&r[12], "ERR", "ERR invalid lease: ");
        assert_eq!(r[13], nil);
        assert_eq!(r[14], Reply::Error(NOTOWNER_TEXT.into()));

        // The transaction's effects are there; "busy" is untouched.
        assert_eq!(
            other.cmd(&["HGETALL", "k"]),
            Reply::Array(vec![bulk("b"), bulk("1")])
        );
        assert_eq!(
            other.cmd(&["HGETALL", "busy"]),
            Reply::Array(vec![bulk("x"), bulk("1")])
        );
        other.cmd(&["DEL", "k", "g"]);
    }
}

fn multi_arity_error_aborts(kind: Kind) {
    let s = Server::start(kind);
    let mut c = quick(&s, false);
    assert_eq!(c.cmd(&["MULTI"]), Reply::Status("OK".into()));
    assert_eq!(
        c.cmd(&["LOCK.ACQUIRE", "k", "a"]),
        Reply::Status("QUEUED".into())
    );
    // Arity is checked when queuing (the module declares it).
    assert_eq!(
        c.cmd(&["LOCK.RELEASE", "k"]),
        Reply::Error("ERR wrong number of arguments for 'lock.release' command".into())
    );
    assert_err(&c.cmd(&["EXEC"]), "EXECABORT", "EXECABORT ");
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
}

fn watch_sees_lock_changes(kind: Kind) {
    let s = Server::start(kind);
    let mut c = quick(&s, false);
    let mut other = s.client();
    // Each write by another client aborts a transaction WATCHing the key.
    let writes: &[&[&str]] = &[
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.RENEW", "k", "b", "PX", "9000"],
        &["LOCK.RELEASE", "k", "b"],
        &["LOCK.FORCERELEASE", "k"],
    ];
    for w in writes {
        assert_eq!(c.cmd(&["WATCH", "k"]), Reply::Status("OK".into()));
        assert!(!other.cmd(w).is_error(), "{w:?}");
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", "marker", "1"]);
        assert_eq!(c.cmd(&["EXEC"]), Reply::NilArray, "after {w:?}");
    }
    assert_eq!(c.cmd(&["EXISTS", "marker"]), Reply::Int(0));
}

/// Commands that change nothing should not look like writes to WATCH (nor
/// to client-side caching): a busy ACQUIRE, a RENEW or RELEASE by a
/// non-holder, a refused command, LOCK.INFO.
fn watch_ignores_lock_no_ops(kind: Kind) {
    let s = Server::start(kind);
    let mut c = quick(&s, false);
    let mut other = s.client();
    assert_eq!(
        other.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "60000"]),
        Reply::Int(1)
    );
    let no_ops: &[&[&str]] = &[
        &["LOCK.INFO", "k"],
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.RENEW", "k", "b"],
        &["LOCK.RELEASE", "k", "b"],
        &["LOCK.ACQUIRE", "k", "a", "PX", "0"],
        &["LOCK.FORCERELEASE", "free"],
    ];
    let mut spurious = Vec::new();
    for op in no_ops {
        assert_eq!(c.cmd(&["WATCH", "k", "free"]), Reply::Status("OK".into()));
        let before = (key_state(&mut other, b"k"), key_state(&mut other, b"free"));
        other.cmd(op);
        let after = (key_state(&mut other, b"k"), key_state(&mut other, b"free"));
        assert_eq!(before, after, "{op:?} is not a no-op");
        c.cmd(&["MULTI"]);
        c.cmd(&["INCR", "marker"]);
        if c.cmd(&["EXEC"]) != Reply::Array(vec![Reply::Int(1)]) {
            spurious.push(op.join(" "));
        }
        c.cmd(&["DEL", "marker"]);
    }
    assert!(
        spurious.is_empty(),
        "these changed nothing but aborted a transaction WATCHing the key: {spurious:?}"
    );
}

fn eval_replies(kind: Kind) {
    let s = Server::start(kind);
    let mut other = s.client();
    assert_eq!(
        other.cmd(&["LOCK.ACQUIRE", "busy", "x", "PX", "60000"]),
        Reply::Int(1)
    );
    let acquire = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], unpack(ARGV, 2))";
    for resp3 in [false, true] {
        let mut c = quick(&s, resp3);
        let nil = if resp3 { Reply::Null } else { Reply::Nil };
        let t0 = Instant::now();
        assert_eq!(
            c.cmd(&["EVAL", acquire, "1", "k", "a", "PX", "5000"]),
            Reply::Int(1)
        );
        assert_eq!(c.cmd(&["EVAL", acquire, "1", "k", "a"]), Reply::Int(2));
        assert_eq!(c.cmd(&["EVAL", acquire, "1", "k", "b"]), nil);
        // BLOCK answers at once in a script.
        assert_eq!(
            c.cmd(&["EVAL", acquire, "1", "busy", "a", "BLOCK", "0"]),
            nil
        );
        assert_eq!(
            c.cmd(&["EVAL", acquire, "1", "busy", "*", "BLOCK", "1000"]),
            nil
        );
        assert_eq!(
            c.cmd(&["EVAL", acquire, "1", "free", "a", "BLOCK", "0"]),
            Reply::Int(1)
        );
        let uuid = c.cmd(&["EVAL", acquire, "1", "gen", "*", "BLOCK", "50"]);
        assert!(matches!(&uuid, Reply::Bulk(b) if b.len() == 36), "{uuid:?}");
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());

        // What the script sees: a busy ACQUIRE is a Lua false (nil).
        let seen = "local r = redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1]); \
                    if r == false then return 'busy' end; return r";
        assert_eq!(c.cmd(&["EVAL", seen, "1", "busy", "a"]), bulk("busy"));

        // LOCK.INFO: a flat array in the script's default RESP2 ...
        let info2 = "return redis.call('LOCK.INFO', KEYS[1])";
        let r = c.cmd(&["EVAL", info2, "1", "k"]);
        assert!(matches!(&r, Reply::Array(a) if a.len() == 12), "{r:?}");
        assert_eq!(r.map_get("holds"), Some(&Reply::Int(2)));
        assert_eq!(r.map_get("owner"), Some(&bulk("a")));
        // ... a map when the script speaks RESP3 (flattened for RESP2 clients).
        let info3 = "redis.setresp(3); return redis.call('LOCK.INFO', KEYS[1])";
        let r = c.cmd(&["EVAL", info3, "1", "k"]);
        if resp3 {
            assert!(matches!(&r, Reply::Map(m) if m.len() == 6), "{r:?}");
        } else {
            assert!(matches!(&r, Reply::Array(a) if a.len() == 12), "{r:?}");
        }
        assert_eq!(r.map_get("holds"), Some(&Reply::Int(2)));
        assert_eq!(c.cmd(&["EVAL", info2, "1", "nothing"]), nil);

        let renew = "return redis.call('LOCK.RENEW', KEYS[1], ARGV[1], 'PX', '9000')";
        assert_eq!(c.cmd(&["EVAL", renew, "1", "k", "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&["EVAL", renew, "1", "k", "b"]), Reply::Int(0));
        let release = "return redis.call('LOCK.RELEASE', KEYS[1], ARGV[1])";
        assert_eq!(c.cmd(&["EVAL", release, "1", "k", "a"]), Reply::Int(1));
        assert_eq!(c.cmd(&["EVAL", release, "1", "k", "a"]), Reply::Int(0));
        let force = "return redis.call('LOCK.FORCERELEASE', KEYS[1])";
        assert_eq!(c.cmd(&["EVAL", force, "1", "free"]), Reply::Int(1));
        assert_eq!(c.cmd(&["EVAL", force, "1", "free"]), Reply::Int(0));
        c.cmd(&["DEL", "gen"]);

        // Several lock operations in one atomic script.
        let both = "local a = redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1]); \
                    local b = redis.call('LOCK.ACQUIRE', KEYS[2], ARGV[1]); \
                    return {a, b}";
        let r = c.cmd(&["EVAL", both, "2", "m1", "m2", "me"]);
        assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Int(1)]));
        c.cmd(&["DEL", "m1", "m2"]);
    }
}

fn eval_errors(kind: Kind) {
    let s = Server::start(kind);
    let mut c = quick(&s, false);
    c.cmd(&["SET", "str", "v"]);
    c.cmd(&["HSET", "hash", "a", "1", "b", "1"]);
    let call = "return redis.call(unpack(ARGV))";
    let pcall = "return redis.pcall(unpack(ARGV))";
    let err_field = "local r = redis.pcall(unpack(ARGV)); \
                     if type(r) == 'table' and r.err then return 'caught: ' .. r.err end; \
                     return 'no error'";
    let cases: &[(&[&str], &str, &str)] = &[
        (&["LOCK.RELEASE", "k", "nobody"], "NOTOWNER", NOTOWNER_TEXT),
        (
            &["LOCK.ACQUIRE", "str", "a"],
            "WRONGTYPE",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (&["LOCK.INFO", "hash"], "NOTLOCK", "NOTLOCK "),
        (
            &["LOCK.ACQUIRE", "k", "a", "PX", "0"],
            "ERR",
            "ERR invalid lease: ",
        ),
        (
            &["LOCK.ACQUIRE", "k", "a", "BLOCK", "-1"],
            "ERR",
            "ERR invalid BLOCK timeout: timeout is negative",
        ),
        (
            &["LOCK.ACQUIRE", "k", "a", "NX"],
            "ERR",
            "ERR syntax error: ",
        ),
        (
            &["LOCK.ACQUIRE", "k", ""],
            "ERR",
            "ERR invalid owner: must be 1 to 1024 bytes",
        ),
        (&["LOCK.INFO"], "ERR", "ERR "),
        (&["LOCK.RELEASE", "k", "a", "b"], "ERR", "ERR "),
    ];
    for (cmd, code, prefix) in cases {
        let mut eval = vec!["EVAL", call, "0"];
        eval.extend_from_slice(cmd);
        // redis.call: the error propagates with its code.
        assert_err(&c.cmd(&eval), code, prefix);
        // redis.pcall: the error table, returned as is.
        eval[1] = pcall;
        assert_err(&c.cmd(&eval), code, prefix);
        // ... which the script can inspect.
        eval[1] = err_field;
        let r = c.cmd(&eval);
        let text = r.as_str();
        assert!(
            text.starts_with(&format!("caught: {prefix}")),
            "{cmd:?}: {text:?}"
        );
        assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    }
    // The exact module text comes through pcall.
    assert_eq!(
        c.cmd(&["EVAL", pcall, "0", "LOCK.RELEASE", "k", "nobody"]),
        Reply::Error(NOTOWNER_TEXT.into())
    );
    // A script that fails half-way keeps its earlier writes (no rollback
    // in Redis scripts); the failing call itself changed nothing.
    let half = "redis.call('LOCK.ACQUIRE', KEYS[1], 'a'); \
                return redis.call('LOCK.RELEASE', KEYS[1], 'b')";
    assert_err(&c.cmd(&["EVAL", half, "1", "h"]), "NOTOWNER", "NOTOWNER ");
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        Reply::Array(vec![bulk("a"), bulk("1")])
    );
}

fn read_only_scripts_and_functions(kind: Kind) {
    let s = Server::start(kind);
    let mut c = quick(&s, false);
    assert_eq!(c.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    // EVAL_RO may look (LOCK.INFO is read-only) but not take.
    let r = c.cmd(&[
        "EVAL_RO",
        "return redis.call('LOCK.INFO', KEYS[1])",
        "1",
        "k",
    ]);
    assert_eq!(r.map_get("owner"), Some(&bulk("a")), "{r:?}");
    let r = c.cmd(&[
        "EVAL_RO",
        "return redis.call('LOCK.ACQUIRE', KEYS[1], 'b')",
        "1",
        "k2",
    ]);
    assert_eq!(r.err_code(), Some("ERR"), "{r:?}");
    assert_eq!(c.cmd(&["EXISTS", "k2"]), Reply::Int(0));

    // Functions.
    let lib = "#!lua name=locklib\n\
        redis.register_function('take', function(keys, args) \
            return redis.call('LOCK.ACQUIRE', keys[1], args[1], 'BLOCK', '0') end)\n\
        redis.register_function{function_name='peek', callback=function(keys, args) \
            return redis.call('LOCK.INFO', keys[1]) end, flags={'no-writes'}}\n\
        redis.register_function('give', function(keys, args) \
            return redis.call('LOCK.RELEASE', keys[1], args[1]) end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("locklib"));
    assert_eq!(c.cmd(&["FCALL", "take", "1", "f", "me"]), Reply::Int(1));
    assert_eq!(c.cmd(&["FCALL", "take", "1", "f", "me"]), Reply::Int(2));
    assert_eq!(c.cmd(&["FCALL", "take", "1", "f", "you"]), Reply::Nil);
    let r = c.cmd(&["FCALL_RO", "peek", "1", "f"]);
    assert_eq!(r.map_get("holds"), Some(&Reply::Int(2)), "{r:?}");
    assert_eq!(c.cmd(&["FCALL", "give", "1", "f", "me"]), Reply::Int(1));
    assert_err(
        &c.cmd(&["FCALL", "give", "1", "f", "you"]),
        "NOTOWNER",
        "NOTOWNER ",
    );
}

per_kind!(
    multi_exec,
    multi_arity_error_aborts,
    watch_sees_lock_changes,
    watch_ignores_lock_no_ops,
    eval_replies,
    eval_errors,
    read_only_scripts_and_functions,
);
