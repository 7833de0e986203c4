//! The server under test (started through testkit, so the module and the
//! binaries are found the same way as in the tests), CPU pinning, and what
//! the report says about where the numbers come from.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use testkit::{Kind, Server};

/// Starts `kind` with the module loaded. testkit reports failures by
/// panicking (it was written for tests); turn that into an error here.
pub fn start_server(kind: Kind) -> Result<Server> {
    std::panic::catch_unwind(|| {
        Server::builder(kind)
            // One main thread doing all command work: what the µs/call and
            // the pinning assume (both servers default to this already).
            .config("io-threads", "1")
            .start()
    })
    .map_err(|_| anyhow::anyhow!("starting the {kind} server failed (details above)"))
}

/// Which CPUs the server and this client run on, as the report states it.
#[derive(Clone, Debug)]
pub struct Pinning {
    pub pinned: bool,
    pub description: String,
    /// (server CPU, client CPU) when pinned.
    pub cpus: Option<(usize, usize)>,
}

/// CPUs this process may run on.
fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Pins the calling thread (and so every thread it starts later: call this
/// before the async runtime exists) to `cpu`.
fn pin_self(cpu: usize) -> Result<()> {
    // SAFETY: as in allowed_cpus.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!(
                "sched_setaffinity(cpu {cpu}): {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// The CPU lists of every thread of `pid`, as the kernel reports them.
fn thread_cpus(pid: u32) -> Result<Vec<String>> {
    let mut lists = Vec::new();
    let dir = format!("/proc/{pid}/task");
    for task in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let status = task
            .with_context(|| format!("reading {dir}"))?
            .path()
            .join("status");
        let text = std::fs::read_to_string(&status)
            .with_context(|| format!("reading {}", status.display()))?;
        if let Some(l) = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            lists.push(l.trim().to_string());
        }
    }
    lists.sort();
    lists.dedup();
    Ok(lists)
}

/// Server (all its threads) on the first allowed CPU, this process on the
/// second, when there are two; otherwise nothing is pinned and the report
/// says so. Must run before any other thread of this process starts.
pub fn pin(server_pid: u32, enabled: bool) -> Pinning {
    if !enabled {
        return Pinning {
            pinned: false,
            description: "not pinned (--no-pin)".into(),
            cpus: None,
        };
    }
    match try_pin(server_pid) {
        Ok(p) => p,
        Err(e) => Pinning {
            pinned: false,
            description: format!("not pinned: {e:#}"),
            cpus: None,
        },
    }
}

fn try_pin(server_pid: u32) -> Result<Pinning> {
    let cpus = allowed_cpus()?;
    if cpus.len() < 2 {
        return Ok(Pinning {
            pinned: false,
            description: format!(
                "not pinned: only {} CPU available, server and client share it",
                cpus.len()
            ),
            cpus: None,
        });
    }
    let (server_cpu, client_cpu) = (cpus[0], cpus[1]);
    pin_process(server_pid, server_cpu)?;
    pin_self(client_cpu)?;
    let server_lists = thread_cpus(server_pid)?;
    if server_lists != [server_cpu.to_string()] {
        bail!("server threads report CPUs {server_lists:?} after taskset");
    }
    Ok(Pinning {
        pinned: true,
        description: format!(
            "server (all threads) on CPU {server_cpu}, benchmark client on CPU {client_cpu} \
             ({} CPUs online)",
            cpus.len()
        ),
        cpus: Some((server_cpu, client_cpu)),
    })
}

/// Pins every thread of process `pid` to `cpu` (taskset -a: main, bio,
/// jemalloc threads, not only the main one).
pub fn pin_process(pid: u32, cpu: usize) -> Result<()> {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()])
        .output()
        .context("running taskset (util-linux)")?;
    if !out.status.success() {
        bail!(
            "taskset failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The commit the module was built from, with a note if the work tree
/// differs from it.
pub fn commit() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        None => "unknown (not a git checkout)".into(),
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(s) if !s.is_empty() => format!("{head} (work tree has uncommitted changes)"),
            _ => head,
        },
    }
}

/// Load average when the run started: other work on a 2-core machine
/// skews every number, so the report shows it.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            let v: Vec<&str> = s.split_whitespace().take(3).collect();
            (v.len() == 3).then(|| v.join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// CPU model name, for "this class of machine".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// CPUs online on the machine (not only those this thread may use).
pub fn cpus_online() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}
