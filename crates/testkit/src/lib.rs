//! Real Redis / Valkey servers started on demand (free port, temp dir,
//! killed on drop) and a small synchronous RESP2/RESP3 client that keeps the
//! exact reply types; a real 3x3 cluster of them; plus what several tools
//! drive servers with: Redisson's lock scripts, hostile input, a seeded RNG.
//! Shared by the integration tests, `make bench` and `make soak`.

use std::time::{Duration, Instant};

pub mod cluster;
pub mod hostile;
pub mod redisson;
pub mod resp;
pub mod rng;
pub mod server;

pub use cluster::{Cluster, ClusterBuilder, SetSlotOrder};
pub use resp::{Client, Polled, Reply, ToArg};
pub use server::{KINDS, Kind, Server, ServerBuilder, free_port, info_value, module_path};

/// Polls `f` every 10 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Raises this process's open-file limit (soft, and hard if allowed) to at
/// least `want`, so that it and the servers it starts (which inherit it) can
/// hold that many connections. Returns the soft limit now in force.
pub fn raise_fd_limit(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur >= want {
            return lim.rlim_cur;
        }
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max.max(want),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
            // Not allowed to raise the hard limit: go as far as it allows.
            let capped = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &capped);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}
