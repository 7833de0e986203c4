//! Starts a 3x3 cluster with the module loaded for experiments by hand
//! (client libraries, redis-cli) and keeps it up until stdin closes.
//!
//! ```text
//! cargo run --release -p testkit --example cluster_up -- redis|valkey
//! ```
//!
//! Prints one line per node: `<index> <port> <role> <node id> <slots>`.

use std::io::Read;

use testkit::{Cluster, Kind};

fn main() {
    let kind = match std::env::args().nth(1).as_deref() {
        Some("valkey") => Kind::Valkey,
        _ => Kind::Redis,
    };
    let cluster = Cluster::start(kind);
    for i in 0..cluster.nodes().len() {
        let me = cluster.myself(i);
        println!(
            "{i} {} {} {} {:?}",
            cluster.port(i),
            if me.is_primary() {
                "primary"
            } else {
                "replica"
            },
            me.id,
            me.slots
        );
    }
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
