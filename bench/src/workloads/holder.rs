//! The lock holder of B7 and B16, as a process of its own (this binary run
//! as `hashlock-bench __holder ...`), so that it can be killed with SIGKILL
//! like a crashing service: it takes the lock, prints `ready`, then holds it
//! the way its variant does until it is killed. The watchdog variant renews
//! from inside the process, so the renewals die with it, as Redisson's do.
//! The campaign variant (B16, `make demo-election`) is an election
//! candidate: it waits in the queue until elected, then prints
//! `elected <term> <CLOCK_MONOTONIC ns>`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use testkit::{Client, Reply, redisson};

/// The argument that turns the benchmark binary into a holder.
pub const ARG: &str = "__holder";

/// How a holder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `LOCK.ACQUIRE ... KEEPALIVE`: the server renews while the connection lives.
    Keepalive,
    /// `LOCK.ACQUIRE ... PX lease`, never renewed.
    Lease,
    /// Redisson's lock script, then its renew script every third of the lease.
    Watchdog,
    /// An election candidate: `LOCK.ACQUIRE key owner PX lease BLOCK 0
    /// KEEPALIVE TOKEN` (the token is the term), waiting until elected.
    Campaign,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Keepalive => "keepalive",
            Mode::Lease => "lease",
            Mode::Watchdog => "watchdog",
            Mode::Campaign => "campaign",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        [Mode::Keepalive, Mode::Lease, Mode::Watchdog, Mode::Campaign]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// The arguments after [`ARG`]: port, key, owner, mode, lease in ms.
pub fn args(port: u16, key: &str, owner: &str, mode: Mode, lease: Duration) -> Vec<String> {
    vec![
        ARG.to_string(),
        port.to_string(),
        key.to_string(),
        owner.to_string(),
        mode.name().to_string(),
        lease.as_millis().to_string(),
    ]
}

/// The holder process's main.
pub fn main(args: &[String]) -> ExitCode {
    let [port, key, owner, mode, lease_ms] = args else {
        eprintln!(
            "usage: {ARG} <port> <key> <owner> <keepalive|lease|watchdog|campaign> <lease ms>"
        );
        return ExitCode::from(2);
    };
    let (Ok(port), Some(mode), Ok(lease)) = (
        port.parse::<u16>(),
        Mode::parse(mode),
        lease_ms.parse::<u64>(),
    ) else {
        eprintln!("holder: bad arguments {args:?}");
        return ExitCode::from(2);
    };
    let mut c = Client::connect(port);
    let lease_arg = lease.to_string();
    let took = match mode {
        Mode::Keepalive => c.cmd(&["LOCK.ACQUIRE", key, owner, "PX", &lease_arg, "KEEPALIVE"]),
        Mode::Lease => c.cmd(&["LOCK.ACQUIRE", key, owner, "PX", &lease_arg]),
        Mode::Watchdog => c.cmd(&["EVAL", redisson::TRY_LOCK, "1", key, &lease_arg, owner]),
        Mode::Campaign => c.cmd(&[
            "LOCK.ACQUIRE",
            key,
            owner,
            "PX",
            &lease_arg,
            "BLOCK",
            "0",
            "KEEPALIVE",
            "TOKEN",
        ]),
    };
    let ok = match (mode, &took) {
        (Mode::Watchdog, _) => took.is_nil(),
        (Mode::Campaign, Reply::Array(a)) => {
            if let [Reply::Int(1), Reply::Int(term)] = a.as_slice() {
                println!("elected {term} {}", crate::timing::monotonic_ns());
                let _ = std::io::stdout().flush();
                true
            } else {
                false
            }
        }
        _ => took == Reply::Int(1),
    };
    if !ok {
        eprintln!("holder: could not take {key}: {took:?}");
        return ExitCode::FAILURE;
    }
    if mode != Mode::Campaign {
        println!("ready");
        let _ = std::io::stdout().flush();
    }
    loop {
        match mode {
            Mode::Watchdog => {
                std::thread::sleep(Duration::from_millis(lease / 3));
                let r = c.cmd(&["EVAL", redisson::RENEW, "1", key, &lease_arg, owner]);
                if r != Reply::Int(1) {
                    eprintln!("holder: watchdog renew of {key}: {r:?}");
                    return ExitCode::FAILURE;
                }
            }
            _ => std::thread::sleep(Duration::from_secs(3600)),
        }
    }
}
