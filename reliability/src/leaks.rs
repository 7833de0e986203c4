//! R5: leaks.
//!
//! Millions of acquire/release cycles (with re-entry and renew) and
//! thousands of BLOCK waiters that time out, disconnect or are served must
//! leave the server where it started: `used_memory` within 2% of the
//! baseline, no blocked client, no queue.
//!
//! The baseline is taken after one warm-up round of the same work, not on
//! a fresh server: Redis keeps some memory after any burst of hundreds of
//! connections (~25-75 KB, measured with plain PINGs too) and pools the
//! temporary clients it uses for module blocked-client replies, freeing
//! idle ones down to 8 in its cron (modulesCron), a few seconds later. After
//! the warm-up, more rounds must not grow memory.
//!
//! Valgrind: [`valgrind_section`] runs a bounded workload (every command,
//! errors, waiters that time out / disconnect / are served, undelivered
//! grants, fuzz vectors, DEBUG RELOAD, FLUSHALL with waiters) against a
//! server started under memcheck, shuts it down cleanly and reads the
//! report for invalid accesses and definite leaks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testkit::{Client, Kind, Reply, Server, wait_until};

use crate::report::{Section, fmt_int};
use crate::servers::{self, info_u64};
use testkit::rng::Rng;

/// `used_memory` once every other connection is gone: only `admin` and the
/// INFO connection itself remain.
fn used_memory(s: &Server) -> u64 {
    wait_until(Duration::from_secs(10), || {
        info_u64(s, "clients", "connected_clients") == 2
    });
    info_u64(s, "memory", "used_memory")
}

/// `n` acquire/release cycles over 1000 keys, pipelined; some re-enter or
/// renew. Returns replies that were not as expected.
fn cycles(c: &mut Client, rng: &mut Rng, n: u64) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut done = 0;
    while done < n {
        let batch = 500.min(n - done);
        let mut expect = Vec::new();
        for i in 0..batch {
            let key = format!("leak:{}", (done + i) % 1000);
            let owner = format!("o{}", rng.below(50));
            let reenter = rng.chance(10);
            c.send(&["LOCK.ACQUIRE", &key, &owner, "PX", "60000"]);
            expect.push(Reply::Int(1));
            if reenter {
                c.send(&["LOCK.ACQUIRE", &key, &owner, "PX", "60000"]);
                expect.push(Reply::Int(2));
            }
            if rng.chance(10) {
                c.send(&["LOCK.RENEW", &key, &owner, "PX", "30000"]);
                expect.push(Reply::Int(1));
            }
            if reenter {
                c.send(&["LOCK.RELEASE", &key, &owner]);
                expect.push(Reply::Int(1));
            }
            c.send(&["LOCK.RELEASE", &key, &owner]);
            expect.push(Reply::Int(0));
        }
        for e in expect {
            let r = c.read_reply();
            if r != e && wrong.len() < 10 {
                wrong.push(format!("expected {e:?}, got {r:?}"));
            }
        }
        done += batch;
    }
    wrong
}

/// `n` waiters in waves of up to 1000 connections: a third time out, a
/// third disconnect while waiting, a third are served one after another.
fn waiters(s: &Server, admin: &mut Client, rng: &mut Rng, n: usize) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut left = n;
    let mut wave = 0;
    while left > 0 {
        let size = left.min(999);
        let key = format!("leakw:{}", wave % 10);
        admin.cmd(&["LOCK.ACQUIRE", &key, "holder", "PX", "60000"]);
        let (mut timing_out, mut leaving, mut served) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..size {
            let mut w = if i % 2 == 0 {
                s.client()
            } else {
                s.client_resp3()
            };
            let owner = if rng.chance(10) {
                "*".to_string()
            } else {
                format!("w{wave}.{i}")
            };
            match i % 3 {
                0 => {
                    let ms = rng.range(1, 50).to_string();
                    w.send(&["LOCK.ACQUIRE", &key, &owner, "PX", "1000", "BLOCK", &ms]);
                    timing_out.push(w);
                }
                1 => {
                    w.send(&["LOCK.ACQUIRE", &key, &owner, "BLOCK", "0"]);
                    leaving.push(w);
                }
                _ => {
                    w.send(&["LOCK.ACQUIRE", &key, &owner, "PX", "60000", "BLOCK", "0"]);
                    served.push((owner, w));
                }
            }
        }
        for w in &mut timing_out {
            let r = w.read_reply();
            if !r.is_nil() && wrong.len() < 10 {
                wrong.push(format!("a timed-out waiter got {r:?}"));
            }
        }
        // Exactly the ones that did not time out are queued, and the ones
        // that disconnect leave the queue.
        let expect_waiting = |n: usize, when: &str, wrong: &mut Vec<String>| {
            let reached = wait_until(Duration::from_secs(10), || {
                servers::lock_stats(s).get("waiting") == Some(&(n as u64))
            });
            if !reached && wrong.len() < 10 {
                wrong.push(format!(
                    "{when}: lock_waiting {:?}, expected {n}",
                    servers::lock_stats(s).get("waiting")
                ));
            }
        };
        expect_waiting(
            leaving.len() + served.len(),
            "after the timeouts",
            &mut wrong,
        );
        drop(timing_out);
        drop(leaving);
        expect_waiting(served.len(), "after the disconnects", &mut wrong);
        let mut holder = "holder".to_string();
        for (owner, mut w) in served {
            let r = admin.cmd(&["LOCK.RELEASE", &key, &holder]);
            if r != Reply::Int(0) && wrong.len() < 10 {
                wrong.push(format!("release by {holder} answered {r:?}"));
            }
            let got = w.read_reply();
            holder = match (&got, owner.as_str()) {
                (Reply::Int(1), _) => owner,
                (Reply::Bulk(uuid), "*") => String::from_utf8_lossy(uuid).into_owned(),
                _ => {
                    if wrong.len() < 10 {
                        wrong.push(format!("a served waiter got {got:?}"));
                    }
                    break;
                }
            };
        }
        admin.cmd(&["LOCK.RELEASE", &key, &holder]);
        left -= size;
        wave += 1;
    }
    wrong
}

/// MODULE UNLOAD + LOAD cycles on one connection: used_memory growth per
/// cycle (a module that frees what it allocates at load leaves ~0).
pub fn reload_growth(kind: Kind, cycles: u64) -> (u64, u64, f64) {
    let s = Server::start(kind);
    let mut c = s.client();
    let path = testkit::module_path().display().to_string();
    let cycle = |c: &mut Client| {
        let u = c.cmd(&["MODULE", "UNLOAD", "lock"]);
        let l = c.cmd(&["MODULE", "LOAD", &path]);
        assert!(
            u == Reply::Status("OK".into()) && l == Reply::Status("OK".into()),
            "MODULE UNLOAD/LOAD: {u:?} {l:?}"
        );
    };
    for _ in 0..5 {
        cycle(&mut c);
    }
    let before = used_memory(&s);
    for _ in 0..cycles {
        cycle(&mut c);
    }
    let after = used_memory(&s);
    let per = (after as f64 - before as f64) / cycles as f64;
    (before, after, per)
}

pub fn reload_section(kinds: &[Kind], cycles: u64) -> Section {
    let mut sec = Section::new("R5 Leaks across MODULE UNLOAD + LOAD");
    sec.line(format!(
        "{cycles} MODULE UNLOAD + MODULE LOAD cycles on one connection, after 5 warm-up cycles; \
         used_memory measured with only the measuring connections open. A module that frees at \
         unload what it allocated at load leaves ~0 B per cycle (a minimal C module measured the same way \
         on Redis 7.0.15 grew ~120 B per cycle, with a new connection per command)."
    ));
    sec.line(String::new());
    sec.line("| server | used_memory before | after | growth per cycle |".into());
    sec.line("|---|---|---|---|".into());
    for &kind in kinds {
        let version = Server::start(kind).version();
        let (before, after, per) = reload_growth(kind, cycles);
        sec.line(format!(
            "| {kind} {version} | {} B | {} B | {per:.0} B |",
            fmt_int(before),
            fmt_int(after)
        ));
        sec.check(per <= 1024.0, || {
            format!(
                "{kind}: each MODULE UNLOAD + LOAD leaks ~{per:.0} B of used_memory \
                 (mostly the detached thread-safe context the redis_module! macro creates at each load, never freed; see docs/RELIABILITY.md)"
            )
        });
    }
    sec
}

pub struct Figures {
    pub version: String,
    pub baseline: u64,
    pub peak: u64,
    pub after: u64,
    pub settle: Duration,
    pub blocked: u64,
    pub waiting: u64,
    pub queues: u64,
    pub cycles: u64,
    pub waiters: usize,
    pub elapsed: Duration,
}

pub fn run(kind: Kind, n_cycles: u64, n_waiters: usize, sec: &mut Section) -> Figures {
    let s = Server::start(kind);
    let version = s.version();
    let mut admin = s.client();
    let mut rng = Rng::new(5);
    let per_step = (n_cycles / 10).max(1);
    let waiters_per_step = n_waiters.div_ceil(10);
    // Warm-up: one smaller round of everything, with the run's largest burst
    // of waiters: what the server keeps after a burst grows with its size
    // and lasts longer than the idle below (measured, short run: a 999-waiter
    // warm-up gave a baseline of 2.9 MB, 1.2 MB after the run), and a
    // baseline above the steady state would hide a leak of the difference.
    let mut wrong = cycles(&mut admin, &mut rng, 20_000);
    wrong.extend(waiters(&s, &mut admin, &mut rng, waiters_per_step));
    std::thread::sleep(Duration::from_secs(3));
    let baseline = used_memory(&s);
    let t0 = Instant::now();
    let mut peak = baseline;
    let mut done = 0;
    // Interleave, sampling memory on the way.
    let mut waited = 0;
    while done < n_cycles || waited < n_waiters {
        if done < n_cycles {
            let n = per_step.min(n_cycles - done);
            wrong.extend(cycles(&mut admin, &mut rng, n));
            done += n;
        }
        if waited < n_waiters {
            let n = waiters_per_step.min(n_waiters - waited);
            wrong.extend(waiters(&s, &mut admin, &mut rng, n));
            waited += n;
        }
        peak = peak.max(info_u64(&s, "memory", "used_memory"));
    }
    let elapsed = t0.elapsed();
    for w in wrong.iter().take(10) {
        sec.fail(format!("{kind}: {w}"));
    }
    let settled = Instant::now();
    let idle = wait_until(Duration::from_secs(20), || {
        info_u64(&s, "clients", "blocked_clients") == 0
            && servers::lock_stats(&s).get("waiting") == Some(&0)
    });
    sec.check(idle, || {
        format!("{kind}: clients still blocked after the run")
    });
    // The same 3 s of idle as before the baseline; pooled reply clients are
    // freed by the cron over a few seconds, so look again for a while.
    std::thread::sleep(Duration::from_secs(3));
    let mut after = used_memory(&s);
    let limit = baseline + baseline / 50;
    while after > limit && settled.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
        after = used_memory(&s);
    }
    let stats = servers::lock_stats(&s);
    let f = Figures {
        version,
        baseline,
        peak,
        after,
        settle: settled.elapsed(),
        blocked: info_u64(&s, "clients", "blocked_clients"),
        waiting: stats.get("waiting").copied().unwrap_or(u64::MAX),
        queues: stats.get("queues").copied().unwrap_or(u64::MAX),
        cycles: n_cycles,
        waiters: n_waiters,
        elapsed,
    };
    sec.check(after <= limit, || {
        format!("{kind}: used_memory {baseline} → {after} (more than 2% above the baseline)")
    });
    sec.check(f.blocked == 0 && f.waiting == 0 && f.queues == 0, || {
        format!(
            "{kind}: blocked_clients {}, lock_waiting {}, lock_queues {} after the run",
            f.blocked, f.waiting, f.queues
        )
    });
    let dbsize = admin.cmd(&["DBSIZE"]);
    sec.check(dbsize == Reply::Int(0), || {
        format!("{kind}: keys left behind: DBSIZE {dbsize:?}")
    });
    for p in servers::log_problems(&s.log()) {
        sec.fail(format!("{kind}: {p}"));
    }
    f
}

pub fn section(kinds: &[Kind], n_cycles: u64, n_waiters: usize) -> Section {
    let mut sec = Section::new("R5 Leaks");
    sec.line(format!(
        "{} acquire/release cycles (1000 keys, pipelined, 10% re-entry, 10% renew) and {} BLOCK waiters \
         (waves of up to 999 connections, RESP2/RESP3: a third time out after 1-50 ms, a third disconnect \
         while queued, a third are served in turn; 10% use the generated owner), interleaved. The baseline is \
         taken after a warm-up round (20,000 cycles + {} waiters, the run's largest burst) and 3 s of idle, with only the measuring \
         connections open, because Redis keeps some memory after bursts of connections and pools the \
         temporary clients of blocked-client replies until its cron frees them.",
        fmt_int(n_cycles),
        fmt_int(n_waiters as u64),
        fmt_int(n_waiters.div_ceil(10) as u64)
    ));
    sec.line(String::new());
    sec.line("| server | work | took | used_memory baseline | peak | after | change | settled after | blocked_clients / lock_waiting / lock_queues |".into());
    sec.line("|---|---|---|---|---|---|---|---|---|".into());
    for &kind in kinds {
        let f = run(kind, n_cycles, n_waiters, &mut sec);
        let change = (f.after as f64 - f.baseline as f64) / f.baseline as f64 * 100.0;
        sec.line(format!(
            "| {kind} {} | {} cycles + {} waiters | {:.1} s | {} B | {} B | {} B | {change:+.2}% | {:.1} s | {} / {} / {} |",
            f.version,
            fmt_int(f.cycles),
            fmt_int(f.waiters as u64),
            f.elapsed.as_secs_f64(),
            fmt_int(f.baseline),
            fmt_int(f.peak),
            fmt_int(f.after),
            f.settle.as_secs_f64(),
            f.blocked,
            f.waiting,
            f.queues
        ));
    }
    sec
}

// ---- valgrind ----

/// A shell script that runs the real server under memcheck, for
/// REDIS_SERVER / VALKEY_SERVER.
fn wrapper(dir: &Path, real: &Path, jemalloc: bool) -> PathBuf {
    wrapper_named(dir, "server-under-valgrind.sh", real, jemalloc)
}

fn wrapper_named(dir: &Path, name: &str, real: &Path, jemalloc: bool) -> PathBuf {
    let script = dir.join(name);
    let synonyms = if jemalloc {
        // Debian's redis-server links the system libjemalloc: point memcheck's
        // malloc replacement at it, or it sees nothing.
        "--soname-synonyms=somalloc=libjemalloc.so* "
    } else {
        ""
    };
    let text = format!(
        "#!/bin/sh\nexec valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
         --errors-for-leak-kinds=definite --num-callers=30 {synonyms}--log-file={}/valgrind.%p.log {} \"$@\"\n",
        dir.display(),
        real.display()
    );
    std::fs::write(&script, text).expect("write wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// The workload run against a server under valgrind (in a child process,
/// so that the server binary can be swapped through the environment).
pub fn valgrind_workload(kind: Kind) {
    let mut s = Server::builder(kind).start();
    let mut c = s.client();
    let mut c3 = s.client_resp3();
    // Every command and error path.
    for cmd in [
        &["LOCK.ACQUIRE", "k", "a", "PX", "5000"][..],
        &["LOCK.ACQUIRE", "k", "a", "EX", "5"],
        &["LOCK.ACQUIRE", "k", "b"],
        &["LOCK.INFO", "k"],
        &["LOCK.RENEW", "k", "a"],
        &["LOCK.RENEW", "k", "b", "PX", "10"],
        &["LOCK.RELEASE", "k", "b"],
        &["LOCK.RELEASE", "k", "a"],
        &["LOCK.RELEASE", "k", "a"],
        &["LOCK.ACQUIRE", "g", "*", "PX", "5000"],
        &["LOCK.FORCERELEASE", "g"],
        &["LOCK.FORCERELEASE", "g"],
        &["SET", "s", "v"],
        &["LOCK.ACQUIRE", "s", "a"],
        &["HSET", "h", "a", "1", "b", "2"],
        &["LOCK.INFO", "h"],
        &["LOCK.ACQUIRE", "k", "a", "PX", "0"],
        &["LOCK.ACQUIRE", "k", "a", "BLOCK", "-1"],
        &["LOCK.ACQUIRE", "k", "a", "NOPE", "1"],
        &["LOCK.ACQUIRE", "k"],
    ] {
        c.cmd(cmd);
        c3.cmd(cmd);
    }
    c3.cmd(&["LOCK.ACQUIRE", "k", "a", "PX", "5000"]);
    c3.cmd(&["LOCK.INFO", "k"]);
    // Waiters: timeout, disconnect, served by release, by the lease deadline,
    // by DEL, by FLUSHALL, and a grant whose client vanished (undelivered).
    c.cmd(&["LOCK.ACQUIRE", "w", "holder", "PX", "800"]);
    let ws: Vec<Client> = (0..6)
        .map(|i| {
            let mut w = s.client();
            w.set_timeout(Some(Duration::from_secs(60)));
            let block = if i == 0 { "30" } else { "0" };
            w.send(&[
                "LOCK.ACQUIRE",
                "w",
                &format!("w{i}"),
                "PX",
                "60000",
                "BLOCK",
                block,
            ]);
            w
        })
        .collect();
    wait_until(Duration::from_secs(30), || {
        servers::lock_stats(&s).get("waiting") == Some(&6)
    });
    let [mut w0, w1, mut w2, mut w3, mut w4, mut w5] =
        <[Client; 6]>::try_from(ws).ok().expect("six waiters");
    w0.read_reply(); // timed out
    drop(w1); // disconnects while queued
    w2.read_reply(); // granted at the holder's lease deadline
    c.cmd(&["LOCK.RELEASE", "w", "w2"]);
    w3.read_reply(); // by release
    c.cmd(&["DEL", "w"]);
    w4.read_reply(); // by DEL
    c.cmd(&["FLUSHALL"]);
    w5.read_reply(); // by FLUSHALL
    // An undelivered grant: the waiter's connection is killed as the lock
    // is handed to it.
    c.cmd(&["LOCK.ACQUIRE", "u", "holder", "PX", "60000"]);
    let mut u = s.client();
    let uid = u.id();
    u.send(&["LOCK.ACQUIRE", "u", "gone", "BLOCK", "0"]);
    wait_until(Duration::from_secs(30), || {
        servers::lock_stats(&s).get("waiting") == Some(&1)
    });
    c.send(&["MULTI"]);
    c.send(&["LOCK.RELEASE", "u", "holder"]);
    c.send(&["CLIENT", "KILL", "ID", &uid.to_string()]);
    c.send(&["EXEC"]);
    for _ in 0..4 {
        c.read_reply();
    }
    drop(u);
    // Fuzz vectors, plain, in MULTI and in EVAL.
    let mut rng = Rng::new(42);
    for i in 0..60 {
        let cmds: Vec<Vec<Vec<u8>>> = (0..50)
            .map(|_| testkit::hostile::vector(&mut rng))
            .collect();
        let target = if i % 2 == 0 { &mut c } else { &mut c3 };
        for cmd in &cmds {
            target.send(cmd);
        }
        for _ in &cmds {
            target.read_reply();
        }
    }
    c.cmd(&["LOCK.ACQUIRE", "kept", "a", "PX", "60000"]);
    c.cmd(&["DEBUG", "RELOAD"]);
    // Unload and load the module again.
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["MODULE", "UNLOAD", "lock"]);
    let path = testkit::module_path();
    c.cmd(&["MODULE", "LOAD", &path.display().to_string()]);
    c.cmd(&["LOCK.ACQUIRE", "after-reload", "a"]);
    drop(c3);
    // A clean shutdown, so that memcheck runs its leak check.
    c.send(&["SHUTDOWN", "NOSAVE"]);
    wait_until(Duration::from_secs(180), || !s.is_running());
}

/// What memcheck reported, from its logs.
#[derive(Default)]
pub struct Reports {
    /// Invalid read / write / free records.
    pub invalid: usize,
    /// Uses of uninitialised values.
    pub uninit: usize,
    /// "definitely lost" records, and their bytes (direct + indirect).
    pub leaks: usize,
    pub leaked_bytes: u64,
    /// One line per record that involves the module: what and where.
    pub module: Vec<String>,
    /// The first line and frame of the other records (the server's own).
    pub others: Vec<String>,
    pub summaries: Vec<String>,
}

/// Reads every `valgrind.<pid>.log` in `dir`.
pub fn read_reports(dir: &Path) -> Reports {
    let mut r = Reports::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return r;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("valgrind."))
        {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        // Records are separated by blank lines ("==pid== ").
        let mut record: Vec<String> = Vec::new();
        let mut flush = |record: &mut Vec<String>| {
            let rec = std::mem::take(record);
            let Some(first) = rec.first() else { return };
            let invalid = first.starts_with("Invalid") || first.starts_with("Mismatched free");
            let uninit =
                first.contains("uninitialised") && !first.starts_with("Use --track-origins");
            let leak = first.contains("definitely lost in loss record");
            if !(invalid || uninit || leak) {
                return;
            }
            r.invalid += usize::from(invalid);
            r.uninit += usize::from(uninit);
            if leak {
                r.leaks += 1;
                let bytes: String = first
                    .split_whitespace()
                    .next()
                    .unwrap_or("0")
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect();
                r.leaked_bytes += bytes.parse::<u64>().unwrap_or(0);
            }
            let all = rec.join("\n");
            // The module's frames: named while it is loaded; after MODULE
            // UNLOAD they are `???`, but the allocation still sits under the
            // server's moduleLoad (the module's OnLoad).
            let in_module = all.contains("hashlock")
                || all.contains("redis_module")
                || all.contains("RedisModule_OnLoad")
                || all.contains("moduleLoad (")
                || all.contains("moduleLoadFromQueue");
            // Who asked for the memory: the first frame of hashlock or of
            // the redis-module crate, else the first that is neither the
            // allocator nor the server's module API.
            let frames: Vec<&str> = rec.iter().skip(1).map(|l| l.trim()).collect();
            let origin = frames
                .iter()
                .find(|l| l.contains("hashlock::") || l.contains("redis_module::"))
                .or_else(|| {
                    frames.iter().find(|l| {
                        !(l.contains("vgpreload")
                            || l.contains("malloc")
                            || l.contains("alloc (")
                            || l.contains("VM_")
                            || l.contains("RM_")
                            || l.contains("library/")
                            || l.contains("UnknownInlinedFun")
                            || l.contains("createEmbeddedStringObject")
                            || l.contains("createStringObject")
                            || l.contains("???"))
                    })
                })
                .map_or("?".to_string(), |l| {
                    // Drop the "by 0x...: " prefix.
                    l.split_once(": ")
                        .map_or(l.to_string(), |(_, f)| f.to_string())
                });
            if in_module {
                r.module.push(format!("{first} — {origin}"));
            } else {
                r.others.push(format!("{first} — {origin}"));
            }
        };
        for line in text.lines() {
            let body = line.split_once("== ").map_or("", |(_, b)| b);
            if body.trim().is_empty() {
                flush(&mut record);
            } else {
                record.push(body.to_string());
            }
            if body.starts_with("ERROR SUMMARY") || body.starts_with("definitely lost:") {
                r.summaries.push(format!(
                    "{}: {body}",
                    p.file_name().unwrap().to_string_lossy()
                ));
            }
        }
        flush(&mut record);
    }
    r
}

pub fn valgrind_section(kinds: &[Kind]) -> Section {
    let mut sec = Section::new("R5 Valgrind (memcheck)");
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
    {
        sec.note("valgrind is not installed (apt-get install valgrind): not run".into());
        return sec;
    }
    sec.line(
        "A bounded workload against a server started under memcheck: every command and error path in RESP2 and RESP3, \
         waiters that time out, disconnect, and are served by release, lease deadline, DEL and FLUSHALL, an undelivered grant, \
         3,000 fuzz vectors, DEBUG RELOAD, MODULE UNLOAD + LOAD, then a clean SHUTDOWN so memcheck checks for leaks."
            .into(),
    );
    sec.line(String::new());
    sec.line("| server | allocator as seen by memcheck | took | invalid reads/writes/frees | uses of uninitialised values | definite leaks (bytes) | records involving the module |".into());
    sec.line("|---|---|---|---|---|---|---|".into());
    for &kind in kinds {
        let dir = tempfile::Builder::new()
            .prefix("hashlock-valgrind-")
            .tempdir()
            .expect("temp dir");
        let real = kind.binary();
        let jemalloc = kind == Kind::Redis;
        let script = wrapper(dir.path(), &real, jemalloc);
        let var = match kind {
            Kind::Redis => "REDIS_SERVER",
            Kind::Valkey => "VALKEY_SERVER",
        };
        let t0 = Instant::now();
        let status = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args(["valgrind-workload", "--kind", &kind.to_string()])
            .env(var, &script)
            .status();
        let took = t0.elapsed();
        let r = read_reports(dir.path());
        sec.check(matches!(status, Ok(s) if s.success()), || {
            format!("{kind}: the workload under valgrind failed ({status:?})")
        });
        let allocator = if jemalloc {
            "system jemalloc, replaced via --soname-synonyms"
        } else {
            "libc malloc (fully visible)"
        };
        sec.line(format!(
            "| {kind} | {allocator} | {:.0} s | {} | {} | {} ({} B) | **{}** |",
            took.as_secs_f64(),
            r.invalid,
            r.uninit,
            r.leaks,
            fmt_int(r.leaked_bytes),
            r.module.len()
        ));
        for m in &r.module {
            sec.fail(format!("{kind}: memcheck, in the module: {m}"));
        }
        let mut others: Vec<&String> = r.others.iter().collect();
        others.sort();
        others.dedup();
        for o in others.iter().take(5) {
            sec.note(format!("{kind}, not in the module: {o}"));
        }
        if r.invalid + r.leaks > 0 {
            sec.note(format!(
                "{kind}: memcheck logs kept in {}",
                dir.keep().display()
            ));
        }
    }
    // The project's own integration tests with both servers under memcheck:
    // many servers there are killed rather than shut down (so no leak check
    // for those), and timing assertions fail under valgrind's slowdown, but
    // every invalid access is still reported as it happens.
    let dir = tempfile::Builder::new()
        .prefix("hashlock-valgrind-suite-")
        .tempdir()
        .expect("temp dir");
    let redis = wrapper_named(dir.path(), "redis.sh", &Kind::Redis.binary(), true);
    let valkey = wrapper_named(dir.path(), "valkey.sh", &Kind::Valkey.binary(), false);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tests = ["blocking", "hostile", "persistence", "replication"];
    let mut cmd = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
    cmd.current_dir(&root)
        .args(["test", "--release", "--no-fail-fast"])
        .env("REDIS_SERVER", &redis)
        .env("VALKEY_SERVER", &valkey)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    for t in tests {
        cmd.args(["--test", t]);
    }
    let t0 = Instant::now();
    match cmd.spawn() {
        Err(e) => sec.note(format!(
            "integration suite under valgrind not run: cannot start cargo: {e}"
        )),
        Ok(mut child) => {
            let mut out = child.stdout.take().expect("stdout");
            let reader = std::thread::spawn(move || {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut out, &mut text);
                text
            });
            // Bounded: 12 minutes at most.
            let done = wait_until(Duration::from_secs(720), || {
                matches!(child.try_wait(), Ok(Some(_)))
            });
            if !done {
                let _ = child.kill();
                let _ = child.wait();
            }
            let text = reader.join().unwrap_or_default();
            let (mut passed, mut failed) = (0, 0);
            for l in text.lines().filter(|l| l.starts_with("test result:")) {
                let num = |word: &str| -> u64 {
                    l.split(';')
                        .find(|p| p.contains(word))
                        .and_then(|p| p.split_whitespace().rev().nth(1)?.parse().ok())
                        .unwrap_or(0)
                };
                passed += num("passed");
                failed += num("failed");
            }
            let r = read_reports(dir.path());
            let logs = std::fs::read_dir(dir.path())
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("valgrind."))
                        .count()
                })
                .unwrap_or(0);
            sec.line(format!(
                "| both, integration tests {} | as above | {:.0} s{} | {} | {} | {} ({} B) | **{}** |",
                tests.join(", "),
                t0.elapsed().as_secs_f64(),
                if done { "" } else { " (stopped at the bound)" },
                r.invalid,
                r.uninit,
                r.leaks,
                fmt_int(r.leaked_bytes),
                r.module.len()
            ));
            sec.note(format!(
                "integration suite under valgrind: {logs} server processes; tests {passed} passed, {failed} failed \
                 (failures there are timing assertions under valgrind's ~20-50x slowdown, not counted); \
                 most servers are killed at the end of a test, so their leaks are not checked"
            ));
            for m in &r.module {
                sec.fail(format!("integration suite, memcheck, in the module: {m}"));
            }
            let mut others: Vec<&String> = r.others.iter().collect();
            others.sort();
            others.dedup();
            for o in others.iter().take(5) {
                sec.note(format!("integration suite, not in the module: {o}"));
            }
            if r.invalid + r.uninit + r.leaks > 0 {
                sec.note(format!(
                    "integration suite memcheck logs kept in {}",
                    dir.keep().display()
                ));
            }
        }
    }
    sec
}
