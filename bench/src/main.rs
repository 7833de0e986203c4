//! `hashlock-bench`: runs the workloads, prints the markdown report, writes
//! it (and the B3 chart) to docs/.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;
use hashlock_bench::plan::{Mode, Plan, Workload};
use hashlock_bench::report::{self, SVG_NAME};
use hashlock_bench::run::{self, Options};
use hashlock_bench::svg;
use hashlock_bench::workloads::holder;
use testkit::Kind;

/// Load generator for hashlock: every lock variant against the same server
/// in one run, ratios as markdown.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// About a minute instead of the full run.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// Tiny sizes, seconds: checks every row is produced (numbers mean nothing).
    #[arg(long)]
    smoke: bool,
    /// Server to run against: redis (Debian's redis-server, or $REDIS_SERVER)
    /// or valkey ($VALKEY_SERVER).
    #[arg(long, default_value = "redis", value_parser = ["redis", "valkey"])]
    server: String,
    /// Write the report here (the SVG goes beside it). Nothing is written
    /// without it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these workloads (comma-separated: b1,b2,b3,b4,b6,b7,b8,b9,b10,
    /// b11,b12,b13,b14,b15,b16).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Do not pin the server and the client to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// B11: also measure the client libraries of this git revision (before
    /// and after, side by side).
    #[arg(long)]
    clients_before: Option<String>,
    /// Write the README's generated tables (between its `bench:` markers)
    /// into this file.
    #[arg(long)]
    readme: Option<PathBuf>,
    /// Print the text of one of the Redisson-protocol scripts the benchmark
    /// sends (`bench/callgrind.sh` uses it) and exit: lock, unlock,
    /// sem-try-acquire, rw-read-lock, ... (`--print-lua list` lists them).
    #[arg(long, value_name = "NAME")]
    print_lua: Option<String>,
}

fn main() -> Result<std::process::ExitCode> {
    // B7's lock holders are this binary, run as a process of their own.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(holder::ARG) {
        return Ok(holder::main(&argv[2..]));
    }
    let args = Args::parse();
    if let Some(name) = &args.print_lua {
        let all = hashlock_bench::scripts::SCRIPTS.all();
        if name == "list" {
            for (n, _) in all {
                println!("{n}");
            }
            return Ok(std::process::ExitCode::SUCCESS);
        }
        match all.iter().find(|(n, _)| n == name) {
            Some((_, lua)) => {
                print!("{}", lua.text);
                return Ok(std::process::ExitCode::SUCCESS);
            }
            None => bail!("--print-lua: no script {name:?} (--print-lua list)"),
        }
    }
    let mode = if args.smoke {
        Mode::Smoke
    } else if args.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    let kind = match args.server.as_str() {
        "valkey" => Kind::Valkey,
        _ => Kind::Redis,
    };
    let mut only = Vec::new();
    for w in &args.only {
        match Workload::parse(w.trim()) {
            Some(w) => only.push(w),
            None => {
                bail!(
                    "--only: unknown workload {w:?} (b1, b2, b3, b4, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16)"
                )
            }
        }
    }
    let opts = Options {
        plan: Plan::for_mode(mode),
        kind,
        only,
        pin: !args.no_pin,
        progress: true,
        holder_exe: std::env::current_exe().context("locating this binary")?,
        clients_before: args.clients_before.clone(),
    };
    let results = run::run(&opts)?;

    let svg_name = args.out.as_ref().map(|_| SVG_NAME);
    let mut md = report::markdown(&results, svg_name);
    md.push_str("\n## README section\n\n");
    md.push_str(
        "*What `make bench` writes into README.md's generated tables (from this run).*\n\n",
    );
    md.push_str(&report::readme_section(&results));
    print!("{md}");

    if let Some(out) = &args.out {
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
        let svg_path = out.with_file_name(SVG_NAME);
        let chart = svg::b3_wait_chart(
            &results.b3,
            &results.plan.b3_clients,
            &results.plan.b3_holds,
        );
        std::fs::write(&svg_path, chart)
            .with_context(|| format!("writing {}", svg_path.display()))?;
        eprintln!("bench: wrote {} and {}", out.display(), svg_path.display());
    }
    if let Some(path) = &args.readme {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let updated = report::apply_regions(&text, &report::readme_regions(&results))
            .map_err(|e| anyhow::anyhow!(e))?;
        std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: wrote the generated tables into {}", path.display());
    }
    let missing = report::missing_rows(&results);
    if results.ran.len() == Workload::ALL.len() && !missing.is_empty() {
        bail!("rows missing from the report: {}", missing.join(", "));
    }
    Ok(std::process::ExitCode::SUCCESS)
}
