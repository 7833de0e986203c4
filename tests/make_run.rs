//! `make run` as a user meets it: the server is started exactly as the
//! Makefile starts it (scripts/run-server.sh: `redis-server redis.conf`
//! with the shipped file, which loads the module itself), only the port and
//! the directory it runs from are changed (a scratch copy of the repository
//! root's layout: `target/release/libhashlock.so` and `data/`), and the
//! README's Quick start examples run against it. redis.conf's paths are
//! relative and the server changes into `dir` before it loads modules: a
//! `loadmodule` path not relative to `dir` (as shipped once) does not start.
//! Also run with Valkey as the server, for users who copy redis.conf there.

mod common;
mod readme_doc;

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use readme_doc::{check_all, readme, run_session, sessions};
use testkit::module_path;

const READY: Duration = Duration::from_secs(15);

/// The server `make run` starts, killed on drop (its output is printed
/// first if the test is failing).
struct MakeRun {
    child: Child,
    port: u16,
    /// Where it runs: `target/release/libhashlock.so` (a link to the module
    /// under test) and `data/`, as in the repository root.
    run: tempfile::TempDir,
}

impl MakeRun {
    /// Starts it on a free port; a port lost to another test's server in the
    /// meantime is retried on another one.
    #[track_caller]
    fn start(kind: Kind) -> MakeRun {
        for _ in 0..5 {
            let mut s = MakeRun::spawn(kind);
            match s.wait_ready() {
                Ok(()) => return s,
                Err(why) if s.output().contains("Address already in use") => {
                    eprintln!("port {} taken ({why}); retrying", s.port);
                }
                Err(why) => panic!("the server of `make run` did not start: {why}"),
            }
        }
        panic!("the server of `make run` found no free port in 5 tries")
    }

    fn spawn(kind: Kind) -> MakeRun {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let run = tempfile::Builder::new()
            .prefix("hashlock-make-run-")
            .tempdir()
            .unwrap();
        let release = run.path().join("target/release");
        std::fs::create_dir_all(&release).unwrap();
        std::os::unix::fs::symlink(module_path(), release.join("libhashlock.so")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = File::create(run.path().join("stdout.log")).unwrap();
        let child = Command::new(repo.join("scripts/run-server.sh"))
            .args(["--port", &port.to_string()])
            .env("RUN_DIR", run.path())
            .env("REDIS_SERVER", kind.binary())
            // A reader runs `make` from the clone, but the script must not
            // depend on the caller's directory.
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run scripts/run-server.sh: {e}"));
        MakeRun { child, port, run }
    }

    /// Until our process (run-server.sh execs the server, so the pid is the
    /// server's) answers on the port, or has exited.
    fn wait_ready(&mut self) -> Result<(), String> {
        let pid = self.child.id().to_string();
        let deadline = std::time::Instant::now() + READY;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}"));
            }
            if let Some(info) = server_info(self.port)
                && testkit::info_value(&info, "process_id") == Some(pid.as_str())
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "no answer from pid {pid} on port {} within {READY:?}",
            self.port
        ))
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.run.path().join("stdout.log")).unwrap_or_default()
    }

    fn config(&self, name: &str) -> String {
        let r = Client::connect(self.port).cmd(&["CONFIG", "GET", name]);
        r.as_array()[1].as_str().to_string()
    }
}

/// `INFO server` from whatever answers on `port`, or `None` if nothing
/// does yet (or it hangs up: a server still starting, or one that lost the
/// port and is exiting).
fn server_info(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    // One bulk reply; read until its `process_id` line is complete.
    let has_pid = |r: &[u8]| {
        let text = String::from_utf8_lossy(r);
        text.split_once("process_id:")
            .is_some_and(|(_, rest)| rest.contains("\r\n"))
    };
    while !has_pid(&reply) {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    Some(String::from_utf8_lossy(&reply).into_owned())
}

impl Drop for MakeRun {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- output of scripts/run-server.sh ---\n{}", self.output());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn shipped_config_serves_the_module(kind: Kind) {
    let s = MakeRun::start(kind);
    let canonical = |p: &Path| {
        p.canonicalize()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let data = s.run.path().join("data");
    assert_eq!(canonical(Path::new(&s.config("dir"))), canonical(&data));
    // The module, loaded by redis.conf itself, found from the data dir.
    let modules = Client::connect(s.port).cmd(&["MODULE", "LIST"]);
    let lock = modules
        .as_array()
        .iter()
        .find(|m| m.map_get("name").map(Reply::as_str) == Some("lock"))
        .unwrap_or_else(|| panic!("module `lock` not loaded: {modules:?}"));
    let path = PathBuf::from(lock.map_get("path").unwrap().as_str());
    assert_eq!(path, PathBuf::from("../target/release/libhashlock.so"));
    assert_eq!(canonical(&data.join(&path)), canonical(&module_path()));
    // The rest of redis.conf applied.
    assert_eq!(s.config("lock.default-lease-ms"), "30000");
    assert_eq!(s.config("maxmemory-policy"), "noeviction");
    assert_eq!(s.config("appendonly"), "yes");
    assert_eq!(s.config("bind"), "127.0.0.1 -::1");
    // Persistence writes into the data dir given, not next to redis.conf.
    let aof = data.join("appendonlydir");
    assert!(aof.is_dir(), "{} missing", aof.display());
}
per_kind!(shipped_config_serves_the_module);

/// The Quick start's redis-cli examples, each session on a fresh `make run`.
fn quick_start_examples(kind: Kind) {
    let all = sessions(&readme()).unwrap_or_else(|e| panic!("{e}"));
    let quick: Vec<_> = all
        .into_iter()
        .filter(|s| s.heading == "Quick start")
        .collect();
    assert!(
        !quick.is_empty(),
        "no redis-cli example under README.md's `## Quick start`"
    );
    let outcome = check_all(&quick, |session| {
        run_session(session, MakeRun::start(kind).port)
    });
    if let Err(e) = outcome {
        panic!("README.md's Quick start against `make run` ({kind}):\n\n{e}");
    }
}
per_kind!(quick_start_examples);
