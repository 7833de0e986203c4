//! What the module tells operators about their deployment, and what it
//! costs them: the eviction-policy warning (log and INFO lock, re-checked
//! when the config changes), the memory a waiter takes, and the README's
//! ACL recipe for Redis 7.0 (issue 17, item 9).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use hashlock_core::command::{COMMANDS, CommandSpec, Keys};

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

/// The README's ACL recipe for Redis 7.0 (Deployment, "ACL rules on Redis
/// 7.0"): its `ACL SETUSER` lines, one user's rules at a time.
fn acl_recipe() -> Vec<(String, Vec<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = readme
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("<!-- ACL recipe for Redis 7.0"))
        .skip(1);
    assert_eq!(
        lines.next().map(|l| l.starts_with("```")),
        Some(true),
        "README.md: the ACL recipe marker is not followed by a code block"
    );
    lines
        .take_while(|l| !l.starts_with("```"))
        .filter(|l| !l.is_empty())
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            assert!(
                words.len() > 3 && words[..2] == ["ACL", "SETUSER"],
                "README.md recipe line: {l}"
            );
            (
                words[2].to_string(),
                words[3..].iter().map(|w| w.to_string()).collect(),
            )
        })
        .collect()
}

/// The module's commands a rule names (`+lock.info`, `-lock.acquire`), with
/// the sign.
fn named_commands(rules: &[String]) -> Vec<(char, String)> {
    rules
        .iter()
        .filter(|r| r.contains('.'))
        .map(|r| {
            let (sign, name) = r.split_at(1);
            (sign.chars().next().unwrap_or(' '), name.to_string())
        })
        .collect()
}

/// Arguments that satisfy a command's arity and key spec, for ACL DRYRUN.
fn dryrun_args(spec: &CommandSpec) -> Vec<String> {
    let mut args = vec![spec.name.to_string()];
    match spec.command.keys() {
        Keys::One => args.push("k".into()),
        Keys::NumKeys => args.extend(["1".to_string(), "k".to_string()]),
    }
    while (args.len() as i32) < spec.arity.abs() {
        args.push("x".into());
    }
    args
}

/// "Allowed" or "denied" per user and command, by `ACL DRYRUN`.
fn dryrun(c: &mut Client, user: &str, spec: &CommandSpec) -> bool {
    let mut cmd = vec!["ACL".to_string(), "DRYRUN".into(), user.into()];
    cmd.extend(dryrun_args(spec));
    match c.cmd(&cmd) {
        Reply::Status(s) if s == "OK" => true,
        Reply::Bulk(b) if String::from_utf8_lossy(&b).contains("has no permissions to run") => {
            false
        }
        other => panic!("{cmd:?}: {other:?}"),
    }
}

/// Item 9 of issue 17: the README's ACL recipe for Redis 7.0, applied as
/// written on Redis 7.0 and on Valkey. It names every command of the
/// command table (the writing ones denied to `reporter`, the reading ones
/// allowed to `viewer`, all allowed to `app`); each `ACL SETUSER` line is
/// taken, except lines naming only commands this build does not register
/// (refused as unknown). Then every command the server knows is allowed or
/// denied as the README says, checked with ACL DRYRUN, and run for real
/// where cheap. Without the named rules Redis 7.0's categories miss the
/// module's commands (what the recipe is for) and Valkey's work; the module
/// says so in its log at load on 7.0.
///
/// Before the fix: no warning at load on Redis 7.0.
fn acl_recipe_from_the_readme(kind: Kind) {
    let s = Server::start(kind);
    let mut admin = s.client();
    // Categories alone: on Redis 7.0 they miss every command of the module
    // (the gap the recipe closes), on Valkey they work.
    for (user, rules) in [
        ("nowrite", "+@all -@write"),
        ("readonly", "+@read"),
        ("readwrite", "+@read +@write"),
    ] {
        let mut cmd = vec!["ACL", "SETUSER", user, "on", "nopass", "~*", "&*"];
        cmd.extend(rules.split(' '));
        assert_eq!(admin.cmd(&cmd), Reply::Status("OK".into()));
    }
    let acquire = COMMANDS
        .iter()
        .find(|c| c.name == "lock.acquire")
        .expect("lock.acquire");
    let info = COMMANDS
        .iter()
        .find(|c| c.name == "lock.info")
        .expect("lock.info");
    let categories_work = kind == Kind::Valkey;
    assert_eq!(
        (
            dryrun(&mut admin, "nowrite", acquire),
            dryrun(&mut admin, "readonly", info),
            dryrun(&mut admin, "readwrite", acquire),
            dryrun(&mut admin, "readwrite", info),
        ),
        (
            !categories_work,
            categories_work,
            categories_work,
            categories_work
        ),
        "{kind}: (+@all -@write may LOCK.ACQUIRE, +@read may LOCK.INFO, \
         +@read +@write may LOCK.ACQUIRE, LOCK.INFO)"
    );
    let warned = s
        .log()
        .contains("cannot put module commands in ACL categories (Redis 7.0)");
    assert_eq!(
        warned,
        !categories_work,
        "{kind}: the warning at load:\n{}",
        s.log()
    );

    // The recipe names exactly the command table's commands.
    let recipe = acl_recipe();
    let writing: BTreeSet<&str> = COMMANDS
        .iter()
        .filter(|c| c.writes)
        .map(|c| c.name)
        .collect();
    let all: BTreeSet<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let reading: BTreeSet<&str> = all.difference(&writing).copied().collect();
    let mut by_user: BTreeMap<&str, BTreeSet<(char, String)>> = BTreeMap::new();
    for (user, rules) in &recipe {
        by_user
            .entry(user.as_str())
            .or_default()
            .extend(named_commands(rules));
    }
    let signed = |sign: char, names: &BTreeSet<&str>| -> BTreeSet<(char, String)> {
        names.iter().map(|n| (sign, n.to_string())).collect()
    };
    assert_eq!(
        by_user.get("reporter"),
        Some(&signed('-', &writing)),
        "reporter"
    );
    assert_eq!(
        by_user.get("viewer"),
        Some(&signed('+', &reading)),
        "viewer"
    );
    assert_eq!(by_user.get("app"), Some(&signed('+', &all)), "app");

    let known =
        |c: &mut Client, name: &str| !c.cmd(&["COMMAND", "INFO", name]).as_array()[0].is_nil();
    for (user, rules) in &recipe {
        let mut cmd = vec!["ACL".to_string(), "SETUSER".into(), user.clone()];
        cmd.extend(rules.iter().cloned());
        let r = admin.cmd(&cmd);
        if r == Reply::Status("OK".into()) {
            continue;
        }
        // Refused: only a line of a family this build does not register.
        let unknown = matches!(&r, Reply::Error(e) if e.contains("Unknown command"));
        let names = named_commands(rules);
        let absent = names.iter().all(|(_, n)| !known(&mut admin, n));
        assert!(
            unknown && !names.is_empty() && absent,
            "{kind}: {cmd:?}: {r:?} (the commands it names: {names:?})"
        );
    }

    // What each user may run, for every command this build registers.
    let served: Vec<&CommandSpec> = COMMANDS
        .iter()
        .filter(|c| known(&mut admin, c.name))
        .collect();
    assert!(
        served.iter().any(|c| c.name == "lock.acquire")
            && served.iter().any(|c| c.name == "lock.info"),
        "{kind}: {served:?}"
    );
    for spec in &served {
        let expect = [
            ("reporter", !spec.writes),
            ("viewer", !spec.writes),
            ("app", true),
        ];
        for (user, allowed) in expect {
            assert_eq!(
                dryrun(&mut admin, user, spec),
                allowed,
                "{kind}: {user} may{} run {}",
                if allowed { "" } else { " not" },
                spec.name
            );
        }
    }
    // Built-in commands follow the categories as usual.
    let set = ["ACL", "DRYRUN", "reporter", "SET", "k", "v"];
    assert_ne!(admin.cmd(&set), Reply::Status("OK".into()), "{kind}");
    // And for real: the reporter cannot take a lock, the app can.
    let mut reporter = s.client();
    assert_eq!(
        reporter.cmd(&["AUTH", "reporter", "reporter-secret"]),
        Reply::Status("OK".into())
    );
    let r = reporter.cmd(&["LOCK.ACQUIRE", "k", "r"]);
    assert_eq!(r.err_code(), Some("NOPERM"), "{kind}: {r:?}");
    let info = reporter.cmd(&["LOCK.INFO", "k"]);
    assert!(info.is_nil(), "{kind}: {info:?}");
    let mut app = s.client();
    assert_eq!(
        app.cmd(&["AUTH", "app", "app-secret"]),
        Reply::Status("OK".into())
    );
    assert_eq!(app.cmd(&["LOCK.ACQUIRE", "k", "a"]), Reply::Int(1));
    assert_eq!(app.cmd(&["LOCK.RELEASE", "k", "a"]), Reply::Int(0));
}

per_kind!(
    eviction_policy_warning,
    key_copy_is_shared_per_queue,
    acl_recipe_from_the_readme
);
