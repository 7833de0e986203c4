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
