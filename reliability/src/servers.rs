//! Small helpers around testkit servers shared by the scenarios.

use std::collections::HashMap;
use std::time::Duration;

use testkit::{Reply, Server, wait_until};

/// `INFO lock` counters, without the `lock_` prefix.
pub fn lock_stats(s: &Server) -> HashMap<String, u64> {
    s.info("lock")
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.strip_prefix("lock_")?.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

pub fn info_u64(s: &Server, section: &str, field: &str) -> u64 {
    s.info_field(section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

/// What is wrong with a server after a run: it must still answer, have no
/// client left blocked or queued, and have logged no module panic.
pub fn health(s: &Server) -> Vec<String> {
    let mut problems = Vec::new();
    let mut c = s.client();
    let pong = c.cmd(&["PING"]);
    if pong != Reply::Status("PONG".into()) {
        problems.push(format!("PING answered {pong:?}"));
    }
    let idle = wait_until(Duration::from_secs(10), || {
        info_u64(s, "clients", "blocked_clients") == 0 && lock_stats(s).get("waiting") == Some(&0)
    });
    if !idle {
        problems.push(format!(
            "clients still blocked 10 s after the run: blocked_clients={}, lock_waiting={:?}",
            info_u64(s, "clients", "blocked_clients"),
            lock_stats(s).get("waiting")
        ));
    }
    problems.extend(log_problems(&s.log()));
    problems
}

/// Lines of a server log that show a module bug or a crash.
pub fn log_problems(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains("caught a panic")
                || l.contains("internal error")
                || l.contains("crashed by signal")
                || l.contains("ASSERTION FAILED")
                || l.contains("Guru Meditation")
        })
        .take(10)
        .map(|l| format!("server log: {l}"))
        .collect()
}

thread_local! {
    static EXPECTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, catching a panic that is part of the test (the testkit client
/// panics when a server closes a connection, which is what a killed primary
/// does) without printing it.
pub fn expect_panic<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !EXPECTED.with(|e| e.get()) {
                default(info);
            }
        }));
    });
    EXPECTED.with(|e| e.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    EXPECTED.with(|e| e.set(false));
    r
}
