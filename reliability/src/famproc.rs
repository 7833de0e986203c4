//! Worker processes whose SIGKILL loses nothing the checker needs (R7, R8).
//!
//! The runner opens each worker's connection itself and hands it down as
//! fd 3, keeping its own handle on the same socket. To kill a worker it
//! first *freezes* it: SIGUSR1, whose handler stops the process, and which
//! the worker blocks everywhere except while it sleeps or waits for a reply
//! it has not read yet. A frozen worker is therefore always at a clean
//! point: its history is complete except, at most, one call that is sent
//! and unanswered, or answered only in the socket. Then SIGKILL; the runner
//! shuts its side of the socket for writing right away (the server sees the
//! connection close, as for any dead process) and reads everything the
//! server still sent before closing it: the reply to that call, if there
//! was one. Nothing is ambiguous any more, so a killed worker's anonymous
//! semaphore permits, for instance, are known exactly.
//!
//! The server sees the connection close when the runner shuts it, a few
//! microseconds after the SIGKILL, instead of when the kernel reaps the
//! dead process: the same FIN, from the same socket.

use std::io::Write as _;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use testkit::{Client, Polled, Reply};

use crate::clock::{MS, mono_ns};
use crate::famhist::{self, Out, Writer};

/// The fd a worker finds its connection on.
pub const CONN_FD: RawFd = 3;

// ---- the worker side ----

extern "C" fn freeze_handler(_: libc::c_int) {
    // SAFETY: kill and getpid are async-signal-safe.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}

fn usr1_mask(how: libc::c_int) {
    // SAFETY: plain signal-mask calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Runs `f` with the freeze signal deliverable.
fn freezable<R>(f: impl FnOnce() -> R) -> R {
    usr1_mask(libc::SIG_UNBLOCK);
    let r = f();
    usr1_mask(libc::SIG_BLOCK);
    r
}

/// A worker's recorded connection.
pub struct Conn {
    pub c: Client,
    pub h: Writer,
    fd: RawFd,
}

impl Conn {
    /// Installs the freeze handler (blocked from now on), takes the inherited
    /// connection, creates the history and records `HELLO 3` (RESP3) and
    /// `CLIENT ID`.
    pub fn inherited(port: u16, resp3: bool, out: &Path) -> Conn {
        usr1_mask(libc::SIG_BLOCK);
        // SAFETY: installing a handler that only calls async-signal-safe
        // functions; SA_RESTART so an interrupted sleep or poll resumes.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = freeze_handler as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        // SAFETY: the runner dup'ed our socket to CONN_FD; we own it now.
        let stream = unsafe { TcpStream::from_raw_fd(CONN_FD) };
        let mut conn = Conn {
            c: Client::from_stream(port, stream),
            h: Writer::create(out).expect("history file"),
            fd: CONN_FD,
        };
        if resp3 {
            conn.call(&["HELLO", "3"], Duration::from_secs(10));
        }
        conn.call(&["CLIENT", "ID"], Duration::from_secs(10));
        conn
    }

    /// One call, recorded: (invoke ns, return ns, outcome). Waits at most
    /// `patience` for the reply: then it records `HUNG` and exits (the
    /// runner reports a worker that died on its own).
    pub fn call<S: AsRef<str>>(&mut self, args: &[S], patience: Duration) -> (u64, u64, Out) {
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
        let sent: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.call_as(&args, &sent, patience)
    }

    /// Like `call`, but sends `sent` (binary arguments) while the history
    /// records `args` (their printable form).
    pub fn call_as(
        &mut self,
        args: &[String],
        sent: &[Vec<u8>],
        patience: Duration,
    ) -> (u64, u64, Out) {
        let t0 = mono_ns();
        let seq = self.h.invoke(args, t0);
        self.c.send(sent);
        let deadline = t0 + patience.as_nanos() as u64;
        if self.c.buffered_len() == 0 {
            loop {
                let left = deadline.saturating_sub(mono_ns()) / MS;
                if left == 0 {
                    let t1 = mono_ns();
                    let out = Out::Hung(format!("no reply in {} ms", patience.as_millis()));
                    self.h.returned(seq, t1, &out);
                    eprintln!("{}: {out:?}", args.join(" "));
                    std::process::exit(3);
                }
                let mut pfd = libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let n = freezable(|| unsafe { libc::poll(&mut pfd, 1, left.min(1000) as i32) });
                if n > 0 {
                    break;
                }
            }
        }
        let reply = self.c.read_reply();
        let t1 = mono_ns();
        let out = Out::from_reply(&reply);
        self.h.returned(seq, t1, &out);
        (t0, t1, out)
    }

    /// Sleeps; the runner may freeze (and kill) the worker meanwhile.
    pub fn sleep_ms(&self, ms: u64) {
        if ms > 0 {
            freezable(|| std::thread::sleep(Duration::from_millis(ms)));
        }
    }
}

// ---- the runner side ----

/// A worker process as the runner holds it.
pub struct Proc {
    pub id: usize,
    pub incarnation: u32,
    pub child: Child,
    /// The runner's handle on the worker's connection.
    sock: TcpStream,
    port: u16,
    pub hist: PathBuf,
    pub stderr: PathBuf,
}

/// What a kill left.
pub struct Killed {
    /// When SIGKILL was sent (mono ns).
    pub at: u64,
    /// The server's answer to the call the worker had in flight, read from
    /// the socket after the kill (None: nothing was answered).
    pub recovered: Option<Out>,
    /// Anything odd (a worker that would not freeze, stray bytes).
    pub problems: Vec<String>,
}

impl Proc {
    /// `exe worker_args... --out <dir>/w<id>.<inc>.hist` with the
    /// connection on fd 3.
    pub fn spawn(
        port: u16,
        dir: &Path,
        id: usize,
        incarnation: u32,
        worker_args: &[String],
    ) -> Proc {
        let name = format!("w{id}.{incarnation}");
        let hist = dir.join(format!("{name}.hist"));
        let stderr = dir.join(format!("{name}.stderr"));
        let sock = TcpStream::connect(("127.0.0.1", port)).expect("connect for a worker");
        let _ = sock.set_nodelay(true);
        let fd = sock.as_raw_fd();
        let exe = std::env::current_exe().expect("current_exe");
        let mut cmd = Command::new(exe);
        cmd.args(worker_args)
            .args(["--port", &port.to_string(), "--id", &id.to_string()])
            .args(["--incarnation", &incarnation.to_string()])
            .arg("--out")
            .arg(&hist)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if fd == CONN_FD {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, CONN_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn worker");
        Proc {
            id,
            incarnation,
            child,
            sock,
            port,
            hist,
            stderr,
        }
    }

    pub fn name(&self) -> String {
        format!("w{}.{}", self.id, self.incarnation)
    }

    /// `worker w<id>.<inc> <what>: <its first stderr lines>`.
    pub fn failure(&self, what: &str) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let err: String = err.lines().take(6).collect::<Vec<_>>().join(" | ");
        format!("worker {} {what}: {err}", self.name())
    }

    /// Whether the worker has set itself up (its history has a line): only
    /// then does SIGUSR1 freeze it rather than kill it.
    pub fn started(&self) -> bool {
        std::fs::metadata(&self.hist).is_ok_and(|m| m.len() > 0)
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Freezes the worker at a clean point (see the module doc). Err: it
    /// did not stop within 3 s (or exited).
    pub fn freeze(&mut self) -> Result<(), String> {
        let pid = self.child.id() as i32;
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(pid, libc::SIGUSR1);
        }
        let until = mono_ns() + 3_000 * MS;
        loop {
            if stopped(pid) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited instead of freezing: {status}"));
            }
            if mono_ns() > until {
                return Err("did not freeze within 3 s".into());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// SIGKILL (after `freeze`), then closes the connection and reads the
    /// server's last answers on it; appends `X` and `K` to the history.
    pub fn kill_and_recover(&mut self) -> Killed {
        let _ = self.child.kill();
        let at = mono_ns();
        let _ = self.sock.shutdown(Shutdown::Write);
        let _ = self.child.wait();
        let (replies, mut problems) = drain(&self.sock, self.port);
        let h = famhist::read(&self.hist, &self.name()).unwrap_or_default();
        let next_seq = h.calls.last().map_or(0, |c| c.seq + 1);
        let mut w = Writer::append(&self.hist, next_seq).expect("append history");
        let pending = h.calls.last().filter(|c| c.ret.is_none()).map(|c| c.seq);
        let mut recovered = None;
        for (i, r) in replies.iter().enumerate() {
            match (i, pending) {
                (0, Some(seq)) => {
                    let out = Out::from_reply(r);
                    w.recovered(seq, mono_ns(), &out);
                    recovered = Some(out);
                }
                _ => problems.push(format!(
                    "{}: the server sent {r:?} after the kill with no call waiting for it",
                    self.name()
                )),
            }
        }
        w.killed(at);
        Killed {
            at,
            recovered,
            problems,
        }
    }

    /// After the worker exited by itself: closes the runner's handle.
    pub fn close(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

/// Every reply the server still sends on a connection we shut for writing,
/// until it closes it (at most 5 s).
fn drain(sock: &TcpStream, port: u16) -> (Vec<Reply>, Vec<String>) {
    let mut problems = Vec::new();
    let Ok(clone) = sock.try_clone() else {
        return (Vec::new(), vec!["cannot clone a worker socket".into()]);
    };
    let mut c = Client::from_stream(port, clone);
    let mut replies = Vec::new();
    let until = mono_ns() + 5_000 * MS;
    loop {
        match c.poll_reply(Duration::from_millis(100)) {
            Polled::Reply(r) => replies.push(r),
            Polled::Closed(_) => break,
            Polled::Nothing if mono_ns() > until => {
                problems.push("the server kept a killed worker's connection open 5 s".into());
                break;
            }
            Polled::Nothing => {}
        }
    }
    (replies, problems)
}

/// Whether `pid` is in the stopped state.
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(") ")?.1;
            after.chars().next()
        })
        .is_some_and(|st| st == 'T' || st == 't')
}

/// Freezes every worker (clean points), then kills and recovers each:
/// the end of a run. Returns (worker index, kill) in order.
pub fn freeze_all(procs: &mut [Proc]) -> Vec<(usize, Result<(), String>)> {
    procs
        .iter_mut()
        .enumerate()
        .map(|(i, p)| {
            (
                i,
                if p.exited() {
                    Err("exited".into())
                } else {
                    p.freeze()
                },
            )
        })
        .collect()
}

/// A note for a failed write of the runner's own file.
pub fn note(path: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
