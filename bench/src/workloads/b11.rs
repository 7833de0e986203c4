//! B11 the client libraries: each library's default `Lock` (KEEPALIVE,
//! blocking acquire) doing acquire + release in a loop on one client, against
//! the benchmark's server: acquire/release pairs per second, and new
//! connections the server accepted per 1000 acquisitions (counted by the
//! driver on its own client, after a warm-up). Before issue 18 every
//! blocking or KEEPALIVE acquisition opened a connection (1000 per 1000);
//! with the pool of the libraries' own connections it opens none in steady
//! state.
//!
//! The drivers: `bench/clients/pairs.py` (Python, sync and asyncio, run by
//! `.deps/clients-venv`), `bench/clients/pairs.js` (Node.js, node-redis and
//! ioredis, on `clients/node/dist`), `bench/clients/pairs.rs` (Rust, sync
//! and tokio, in this process). Each runs as this process's child, so it
//! inherits the client CPU when the benchmark pins.
//!
//! `--clients-before <git revision>` also measures the libraries of that
//! revision with the same drivers (its sources extracted under
//! `target/bench-before/`; its Node.js library compiled there, its Rust
//! library built as an example).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

#[path = "../../clients/pairs.rs"]
mod pairs;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    PythonSync,
    PythonAsyncio,
    NodeRedis,
    Ioredis,
    RustSync,
    RustTokio,
}

impl Library {
    pub const ALL: [Library; 6] = [
        Library::PythonSync,
        Library::PythonAsyncio,
        Library::NodeRedis,
        Library::Ioredis,
        Library::RustSync,
        Library::RustTokio,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Library::PythonSync => "Python, redis-py (sync)",
            Library::PythonAsyncio => "Python, redis-py (asyncio)",
            Library::NodeRedis => "Node.js, node-redis",
            Library::Ioredis => "Node.js, ioredis",
            Library::RustSync => "Rust, sync",
            Library::RustTokio => "Rust, tokio",
        }
    }
}

/// One library's measurement.
#[derive(Clone, Debug)]
pub struct Row {
    pub library: Library,
    /// None: the libraries of this checkout; Some(rev): of `--clients-before`.
    pub before: Option<String>,
    pub outcome: Result<Measured, String>,
}

#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub pairs: u64,
    pub seconds: f64,
    pub connections: u64,
}

impl Measured {
    pub fn pairs_per_sec(&self) -> f64 {
        self.pairs as f64 / self.seconds.max(1e-9)
    }
    /// New connections per 1000 acquisitions.
    pub fn connections_per_1000(&self) -> f64 {
        self.connections as f64 * 1000.0 / (self.pairs.max(1) as f64)
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate is in the repository")
        .to_path_buf()
}

/// The drivers' sources for `before` (None: this checkout).
struct Sources {
    python_src: PathBuf,
    node_dist: PathBuf,
    /// An example binary built from `pairs.rs` against the old library.
    rust_driver: Option<PathBuf>,
}

fn parse_json(out: &str) -> Result<Measured> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("no JSON line")?;
    let field = |name: &str| -> Result<f64> {
        let at = line
            .find(&format!("\"{name}\""))
            .with_context(|| format!("no {name} in {line}"))?;
        let rest = line[at + name.len() + 2..]
            .trim_start()
            .trim_start_matches(':')
            .trim_start();
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        rest[..end]
            .trim()
            .parse::<f64>()
            .with_context(|| format!("{name} in {line}"))
    };
    Ok(Measured {
        pairs: field("pairs")? as u64,
        seconds: field("seconds")?,
        connections: field("connections")? as u64,
    })
}

fn run_child(mut cmd: Command) -> Result<Measured> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    parse_json(&String::from_utf8_lossy(&out.stdout))
}

fn python() -> Result<PathBuf> {
    let p = repo().join(".deps/clients-venv/bin/python");
    if p.is_file() {
        Ok(p)
    } else {
        bail!("no .deps/clients-venv (make bench and make test-python create it)")
    }
}

fn node_ready(dist: &Path) -> Result<()> {
    if !dist.join("index.js").is_file() {
        bail!(
            "{} is not built (make bench and make test-node build it)",
            dist.display()
        );
    }
    if !repo().join("clients/node/node_modules/redis").is_dir() {
        bail!("clients/node/node_modules is missing (npm ci there)");
    }
    Ok(())
}

fn measure(lib: Library, port: u16, secs: f64, src: &Sources) -> Result<Measured> {
    let drivers = repo().join("bench/clients");
    match lib {
        Library::PythonSync | Library::PythonAsyncio => {
            let mut c = Command::new(python()?);
            c.arg(drivers.join("pairs.py"))
                .arg(port.to_string())
                .arg(secs.to_string())
                .arg(if lib == Library::PythonSync {
                    "sync"
                } else {
                    "asyncio"
                })
                .arg(&src.python_src);
            run_child(c)
        }
        Library::NodeRedis | Library::Ioredis => {
            node_ready(&src.node_dist)?;
            let mut c = Command::new("node");
            c.arg(drivers.join("pairs.js"))
                .arg(port.to_string())
                .arg(secs.to_string())
                .arg(if lib == Library::NodeRedis {
                    "node-redis"
                } else {
                    "ioredis"
                })
                .arg(&src.node_dist);
            run_child(c)
        }
        Library::RustSync | Library::RustTokio => {
            let sync = lib == Library::RustSync;
            match &src.rust_driver {
                Some(exe) => {
                    let mut c = Command::new(exe);
                    c.arg(port.to_string()).arg(secs.to_string()).arg(if sync {
                        "sync"
                    } else {
                        "tokio"
                    });
                    run_child(c)
                }
                None => {
                    // In a thread of its own: tokio_pairs builds a runtime,
                    // which cannot be done on the benchmark's runtime thread.
                    let (n, s, c) = std::thread::spawn(move || {
                        if sync {
                            pairs::sync_pairs(port, secs)
                        } else {
                            pairs::tokio_pairs(port, secs)
                        }
                        .map_err(|e| e.to_string())
                    })
                    .join()
                    .map_err(|_| anyhow::anyhow!("the Rust driver panicked"))?
                    .map_err(|e| anyhow::anyhow!(e))?;
                    Ok(Measured {
                        pairs: n,
                        seconds: s,
                        connections: c,
                    })
                }
            }
        }
    }
}

/// Every library of this checkout (and of `before`, if given), `secs` each.
pub fn run(
    port: u16,
    secs: Duration,
    before: Option<&str>,
    mut done: impl FnMut(&str),
) -> Result<Vec<Row>> {
    let here = Sources {
        python_src: repo().join("clients/python/src"),
        node_dist: repo().join("clients/node/dist/src"),
        rust_driver: None,
    };
    let old = match before {
        Some(rev) => Some((rev.to_string(), prepare_before(rev)?)),
        None => None,
    };
    let mut rows = Vec::new();
    for lib in Library::ALL {
        // Before and after take turns, library by library.
        if let Some((rev, src)) = &old {
            done(&format!("B11 {} at {rev}", lib.label()));
            rows.push(Row {
                library: lib,
                before: Some(rev.clone()),
                outcome: measure(lib, port, secs.as_secs_f64(), src).map_err(|e| format!("{e:#}")),
            });
        }
        done(&format!("B11 {}", lib.label()));
        rows.push(Row {
            library: lib,
            before: None,
            outcome: measure(lib, port, secs.as_secs_f64(), &here).map_err(|e| format!("{e:#}")),
        });
    }
    Ok(rows)
}

/// `main` of the Rust driver built against an older checkout.
const OLD_DRIVER_MAIN: &str = r#"mod pairs;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (port, secs) = (a[1].parse().unwrap(), a[2].parse().unwrap());
    let (n, s, c) = if a[3] == "sync" {
        pairs::sync_pairs(port, secs)
    } else {
        pairs::tokio_pairs(port, secs)
    }
    .unwrap();
    println!("{{\"pairs\": {n}, \"seconds\": {s}, \"connections\": {c}}}");
}
"#;

/// The libraries of `rev`, ready to drive: sources from `git archive`, the
/// Node.js library compiled with this checkout's TypeScript, the Rust driver
/// built as an example of the old crate.
fn prepare_before(rev: &str) -> Result<Sources> {
    let repo = repo();
    let dir = repo.join("target/bench-before").join(rev);
    if !dir.join("clients").is_dir() {
        std::fs::create_dir_all(&dir)?;
        let archive = Command::new("git")
            .current_dir(&repo)
            .args(["archive", "--format=tar", rev, "clients", "crates"])
            .output()
            .context("git archive")?;
        if !archive.status.success() {
            bail!(
                "git archive {rev}: {}",
                String::from_utf8_lossy(&archive.stderr)
            );
        }
        let mut tar = Command::new("tar")
            .current_dir(&dir)
            .arg("-x")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .context("tar")?;
        use std::io::Write;
        tar.stdin
            .take()
            .expect("piped")
            .write_all(&archive.stdout)?;
        if !tar.wait()?.success() {
            bail!("tar -x failed");
        }
    }
    // Node.js: compile with this checkout's dependencies.
    let node = dir.join("clients/node");
    let modules = node.join("node_modules");
    if !modules.exists() {
        std::os::unix::fs::symlink(repo.join("clients/node/node_modules"), &modules)?;
    }
    if !node.join("dist/src/index.js").is_file() {
        let tsc = repo.join("clients/node/node_modules/.bin/tsc");
        let st = Command::new(tsc)
            .current_dir(&node)
            .args(["-p", "."])
            .status()?;
        if !st.success() {
            bail!("compiling the Node.js library of {rev}");
        }
    }
    // Rust: the same driver, as an example of the old crate (outside this workspace).
    let crate_dir = dir.join("clients/rust");
    let manifest = crate_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)?;
    if !text.contains("[workspace]") {
        std::fs::write(&manifest, format!("{text}\n[workspace]\n"))?;
    }
    let example = crate_dir.join("examples/b11_pairs");
    std::fs::create_dir_all(&example)?;
    std::fs::write(
        example.join("pairs.rs"),
        include_str!("../../clients/pairs.rs"),
    )?;
    std::fs::write(example.join("main.rs"), OLD_DRIVER_MAIN)?;
    let target = repo.join("target/bench-before/target");
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "-q",
            "--example",
            "b11_pairs",
            "--manifest-path",
        ])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .context("cargo build of the old Rust library")?;
    if !st.success() {
        bail!("building the Rust driver against {rev}");
    }
    Ok(Sources {
        python_src: dir.join("clients/python/src"),
        node_dist: node.join("dist/src"),
        rust_driver: Some(target.join("release/examples/b11_pairs")),
    })
}
