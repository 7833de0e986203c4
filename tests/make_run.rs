//! `make run` as a user meets it: the server is started exactly as the
//! Makefile starts it (scripts/run-server.sh with the shipped redis.conf),
//! only the port and the data dir are overridden, and the README's Quick
//! start examples run against it. Before this test, a relative `loadmodule`
//! in redis.conf was resolved inside `dir` and the server refused to start.
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
    data: tempfile::TempDir,
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
        let data = tempfile::Builder::new()
            .prefix("hashlock-make-run-")
            .tempdir()
            .unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = File::create(data.path().join("stdout.log")).unwrap();
        let child = Command::new(repo.join("scripts/run-server.sh"))
            .args(["--port", &port.to_string()])
            .env("DATA_DIR", data.path())
            .env("HASHLOCK_MODULE", module_path())
            .env("REDIS_SERVER", kind.binary())
            // A reader runs it from anywhere: not the repository root.
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run scripts/run-server.sh: {e}"));
        MakeRun { child, port, data }
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
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let info = Client::connect(self.port).cmd(&["INFO", "server"]);
                let info = String::from_utf8_lossy(info.as_bytes()).into_owned();
                if testkit::info_value(&info, "process_id") == Some(pid.as_str()) {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "no answer from pid {pid} on port {} within {READY:?}",
            self.port
        ))
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.data.path().join("stdout.log")).unwrap_or_default()
    }

    fn config(&self, name: &str) -> String {
        let r = Client::connect(self.port).cmd(&["CONFIG", "GET", name]);
        r.as_array()[1].as_str().to_string()
    }
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
    assert_eq!(
        canonical(Path::new(&s.config("dir"))),
        canonical(s.data.path())
    );
    // The module, from its absolute path.
    let modules = Client::connect(s.port).cmd(&["MODULE", "LIST"]);
    let lock = modules
        .as_array()
        .iter()
        .find(|m| m.map_get("name").map(Reply::as_str) == Some("lock"))
        .unwrap_or_else(|| panic!("module `lock` not loaded: {modules:?}"));
    assert_eq!(
        PathBuf::from(lock.map_get("path").unwrap().as_str()),
        module_path()
    );
    // The rest of redis.conf applied.
    assert_eq!(s.config("lock.default-lease-ms"), "30000");
    assert_eq!(s.config("maxmemory-policy"), "noeviction");
    assert_eq!(s.config("appendonly"), "yes");
    assert_eq!(s.config("bind"), "127.0.0.1 -::1");
    // Persistence writes into the data dir given, not next to redis.conf.
    let aof = s.data.path().join("appendonlydir");
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
