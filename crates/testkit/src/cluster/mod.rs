//! A real Redis / Valkey cluster started per test: by default 3 primaries
//! with one replica each, the module loaded on every node, each node a
//! [`Server`] (own port, own temp dir, killed on drop).
//!
//! Started the fast way: slots assigned with `CLUSTER ADDSLOTSRANGE`, nodes
//! joined with `CLUSTER MEET`, replicas attached with `CLUSTER REPLICATE`
//! (no `redis-cli --cluster create`, which sleeps between steps). The bus
//! port is chosen explicitly: the default (port + 10000) may be taken or
//! past 65535 for the high ports the OS hands out.
//!
//! Nodes keep their index for the life of the cluster; their roles change
//! (failover, SIGKILL). Who serves what is always asked from the nodes
//! themselves (`CLUSTER NODES`), never remembered.

mod failover;
mod migrate;
pub mod slots;
pub mod view;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

pub use migrate::{CliOutput, MoveReport, SetSlotOrder, redis_cli};
pub use slots::{key_in_slot, key_slot, tag_for_slot};
pub use view::{NodeLine, parse_nodes};

use crate::resp::{Client, Reply};
use crate::server::{Kind, Server, free_port, info_value};
use crate::wait_until;

/// How long to wait for the cluster to settle after any change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Configuration of a cluster to start. From [`Cluster::builder`].
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    kind: Kind,
    primaries: usize,
    replicas_per_primary: usize,
    node_timeout_ms: u64,
    config: Vec<(String, String)>,
}

impl ClusterBuilder {
    pub fn primaries(mut self, n: usize) -> Self {
        assert!(n >= 1, "a cluster needs a primary");
        self.primaries = n;
        self
    }

    pub fn replicas_per_primary(mut self, n: usize) -> Self {
        self.replicas_per_primary = n;
        self
    }

    /// `cluster-node-timeout`: how long a node may not answer before it is
    /// considered failing. Low values make failover after a crash fast;
    /// too low ones make a loaded machine fail nodes over on its own.
    pub fn node_timeout_ms(mut self, ms: u64) -> Self {
        self.node_timeout_ms = ms;
        self
    }

    /// Any other directive, on every node.
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push((name.into(), value.into()));
        self
    }

    #[track_caller]
    pub fn start(self) -> Cluster {
        let started = Instant::now();
        let total = self.primaries * (1 + self.replicas_per_primary);
        // Start every process at once: each spends most of its start-up
        // waiting to be polled.
        let servers: Vec<Server> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..total)
                .map(|_| s.spawn(|| self.node_builder().start()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let nodes: Vec<Node> = servers
            .into_iter()
            .map(|server| {
                let id = server.client().cmd(&["CLUSTER", "MYID"]);
                let id = String::from_utf8_lossy(id.as_bytes()).into_owned();
                Node { server, id }
            })
            .collect();
        let cluster = Cluster {
            kind: self.kind,
            nodes,
            node_timeout: Duration::from_millis(self.node_timeout_ms),
        };
        cluster.assign_slots(self.primaries);
        cluster.meet_all();
        for r in self.primaries..total {
            let primary = (r - self.primaries) % self.primaries;
            cluster.attach_replica(r, primary);
        }
        cluster.wait_stable();
        cluster.log(&format!(
            "cluster of {total} {} nodes ready in {:.1} s",
            self.kind,
            started.elapsed().as_secs_f64()
        ));
        cluster
    }

    fn node_builder(&self) -> crate::server::ServerBuilder {
        let mut b = Server::builder(self.kind)
            .config("cluster-enabled", "yes")
            .config("cluster-config-file", "nodes.conf")
            .config("cluster-port", free_port().to_string())
            .config("cluster-node-timeout", self.node_timeout_ms.to_string())
            // Replicas stay with their primary: a reshard or failover must
            // not move them around behind a test's back.
            .config("cluster-allow-replica-migration", "no")
            // A replica may always take over, however long it was cut off.
            .config("cluster-replica-validity-factor", "0");
        for (k, v) in &self.config {
            b = b.config(k.clone(), v.clone());
        }
        b
    }
}

/// One node: its server process and its cluster node id (kept across
/// restarts: it is in the node's `nodes.conf`).
pub struct Node {
    pub server: Server,
    pub id: String,
}

pub struct Cluster {
    pub kind: Kind,
    nodes: Vec<Node>,
    node_timeout: Duration,
}

impl Cluster {
    /// 3 primaries with one replica each, node timeout 2 s.
    #[track_caller]
    pub fn start(kind: Kind) -> Cluster {
        Cluster::builder(kind).start()
    }

    pub fn builder(kind: Kind) -> ClusterBuilder {
        ClusterBuilder {
            kind,
            primaries: 3,
            replicas_per_primary: 1,
            node_timeout_ms: 2000,
            config: Vec::new(),
        }
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    pub fn server(&self, i: usize) -> &Server {
        &self.nodes[i].server
    }

    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].server.port
    }

    /// `127.0.0.1:<port>` of node `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.port(i))
    }

    pub fn index_of_id(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    pub fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.server.port == port)
    }

    /// Nodes that accept connections (a killed one does not).
    pub fn running_now(&self) -> Vec<usize> {
        // `Server::is_running` needs &mut to reap; a connect is enough here.
        (0..self.nodes.len())
            .filter(|&i| std::net::TcpStream::connect(("127.0.0.1", self.port(i))).is_ok())
            .collect()
    }

    /// `CLUSTER NODES` as node `i` sees it.
    #[track_caller]
    pub fn view(&self, i: usize) -> Vec<NodeLine> {
        let r = self.server(i).client().cmd(&["CLUSTER", "NODES"]);
        match &r {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => parse_nodes(&String::from_utf8_lossy(b)),
            other => panic!("CLUSTER NODES on node {i}: {other:?}"),
        }
    }

    /// Node `i` as it sees itself.
    #[track_caller]
    pub fn myself(&self, i: usize) -> NodeLine {
        self.view(i)
            .into_iter()
            .find(NodeLine::is_myself)
            .unwrap_or_else(|| panic!("node {i} has no myself line"))
    }

    #[track_caller]
    pub fn is_primary(&self, i: usize) -> bool {
        self.myself(i).is_primary()
    }

    /// Running primaries that serve at least one slot (in their own view).
    #[track_caller]
    pub fn primaries(&self) -> Vec<usize> {
        self.running_now()
            .into_iter()
            .filter(|&i| {
                let me = self.myself(i);
                me.is_primary() && !me.slots.is_empty()
            })
            .collect()
    }

    /// Running replicas of node `primary` (in their own view).
    #[track_caller]
    pub fn replicas_of(&self, primary: usize) -> Vec<usize> {
        let id = &self.nodes[primary].id;
        self.running_now()
            .into_iter()
            .filter(|&i| self.myself(i).primary.as_ref() == Some(id))
            .collect()
    }

    /// The one running replica of `primary`; panics if there is not exactly one.
    #[track_caller]
    pub fn replica_of(&self, primary: usize) -> usize {
        match self.replicas_of(primary)[..] {
            [r] => r,
            ref other => panic!(
                "node {primary} has replicas {other:?}, expected exactly one\n{}",
                self.describe()
            ),
        }
    }

    /// The running node that serves `slot`: of the primaries claiming it in
    /// their own view, the one with the highest config epoch (after
    /// `SETSLOT NODE` on the target only, or during a failover, two claim it
    /// for a moment; the newer claim wins in the cluster too).
    #[track_caller]
    pub fn node_for_slot(&self, slot: u16) -> usize {
        self.running_now()
            .into_iter()
            .filter_map(|i| {
                let me = self.myself(i);
                (me.is_primary() && me.serves(slot)).then_some((me.config_epoch, i))
            })
            .max()
            .map(|(_, i)| i)
            .unwrap_or_else(|| panic!("no running node serves slot {slot}\n{}", self.describe()))
    }

    #[track_caller]
    pub fn node_for_key(&self, key: &[u8]) -> usize {
        self.node_for_slot(key_slot(key))
    }

    /// A RESP2 connection to the node serving `key`.
    #[track_caller]
    pub fn client_for_key(&self, key: &[u8]) -> Client {
        self.server(self.node_for_key(key)).client()
    }

    /// A RESP3 connection to the node serving `key`.
    #[track_caller]
    pub fn client3_for_key(&self, key: &[u8]) -> Client {
        self.server(self.node_for_key(key)).client_resp3()
    }

    /// The slot ranges node `i` serves (own view).
    #[track_caller]
    pub fn slots_of(&self, i: usize) -> Vec<(u16, u16)> {
        self.myself(i).slots
    }

    /// The lowest slot node `i` serves: `redis-cli --cluster reshard` moves
    /// a source's slots lowest first.
    #[track_caller]
    pub fn lowest_slots(&self, i: usize, n: usize) -> Vec<u16> {
        let mut all: Vec<u16> = self
            .slots_of(i)
            .into_iter()
            .flat_map(|(a, b)| a..=b)
            .collect();
        all.sort_unstable();
        all.truncate(n);
        all
    }

    /// Waits until every running node reports `cluster_state:ok`, all of
    /// them agree on roles and slots, none suspects another running node,
    /// no slot is importing or migrating, and every replica is in sync.
    /// Panics with every node's view if that does not happen in 30 s.
    #[track_caller]
    pub fn wait_stable(&self) {
        let mut why = String::new();
        let ok = wait_until(SETTLE_TIMEOUT, || match self.unstable() {
            None => true,
            Some(w) => {
                why = w;
                false
            }
        });
        if !ok {
            panic!(
                "cluster not stable after {SETTLE_TIMEOUT:?}: {why}\n{}",
                self.describe()
            );
        }
    }

    /// Why the cluster is not stable right now, or `None` if it is.
    pub fn unstable(&self) -> Option<String> {
        let running = self.running_now();
        let running_ids: Vec<&str> = running.iter().map(|&i| self.nodes[i].id.as_str()).collect();
        let mut first: Option<view::Topology> = None;
        for &i in &running {
            let mut c = self.server(i).client();
            let info = c.cmd(&["CLUSTER", "INFO"]);
            let info = String::from_utf8_lossy(info.as_bytes()).into_owned();
            if info_value(&info, "cluster_state") != Some("ok") {
                return Some(format!("node {i}: cluster_state is not ok"));
            }
            let v = self.view(i);
            for n in &v {
                if running_ids.contains(&n.id.as_str())
                    && !n.is_myself()
                    && (n.is_suspect() || !n.connected)
                {
                    return Some(format!(
                        "node {i} sees running node {} as {:?}",
                        n.id, n.flags
                    ));
                }
                if n.is_myself() && (!n.migrating.is_empty() || !n.importing.is_empty()) {
                    return Some(format!(
                        "node {i} has open slots: migrating {:?} importing {:?}",
                        n.migrating, n.importing
                    ));
                }
            }
            if running_ids.iter().any(|id| !v.iter().any(|n| n.id == *id)) {
                return Some(format!("node {i} does not know every running node yet"));
            }
            let t = view::topology(&v);
            match &first {
                None => first = Some(t),
                Some(f) if *f != t => {
                    return Some(format!("node {i} disagrees about roles or slots"));
                }
                Some(_) => {}
            }
            let me = v.iter().find(|n| n.is_myself()).cloned();
            if let Some(me) = me
                && !me.is_primary()
            {
                let repl = self.server(i).info("replication");
                if info_value(&repl, "master_link_status") != Some("up")
                    || info_value(&repl, "master_sync_in_progress") != Some("0")
                {
                    return Some(format!("replica {i} is not in sync with its primary"));
                }
            }
        }
        None
    }

    /// Every node's view, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let _ = writeln!(s, "--- node {i} port {} id {}", n.server.port, n.id);
            match std::net::TcpStream::connect(("127.0.0.1", n.server.port)) {
                Ok(_) => {
                    let nodes = n.server.client().cmd(&["CLUSTER", "NODES"]);
                    let _ = write!(s, "{}", String::from_utf8_lossy(nodes.as_bytes()));
                }
                Err(_) => {
                    let _ = writeln!(s, "(not running)");
                }
            }
        }
        s
    }

    /// A line in the test output, prefixed with the server kind.
    pub fn log(&self, msg: &str) {
        eprintln!("[{} cluster] {msg}", self.kind);
    }

    // ---- start-up steps ----

    #[track_caller]
    fn assign_slots(&self, primaries: usize) {
        let total = usize::from(slots::SLOTS);
        for p in 0..primaries {
            // The split redis-cli --cluster create makes: 0-5460, 5461-10922, 10923-16383.
            let first = (p * total + primaries / 2) / primaries;
            let last = ((p + 1) * total + primaries / 2) / primaries - 1;
            let r = self.server(p).client().cmd(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string(),
            ]);
            assert_eq!(r, Reply::Status("OK".into()), "ADDSLOTSRANGE on node {p}");
        }
    }

    #[track_caller]
    fn meet_all(&self) {
        let mut c = self.server(0).client();
        for i in 1..self.nodes.len() {
            let bus = self.bus_port(i);
            let r = c.cmd(&[
                "CLUSTER",
                "MEET",
                "127.0.0.1",
                &self.port(i).to_string(),
                &bus.to_string(),
            ]);
            assert_eq!(r, Reply::Status("OK".into()), "CLUSTER MEET node {i}");
        }
        let ids: Vec<String> = self.nodes.iter().map(|n| n.id.clone()).collect();
        let all_known = wait_until(SETTLE_TIMEOUT, || {
            (0..self.nodes.len()).all(|i| {
                let v = self.view(i);
                ids.iter().all(|id| {
                    v.iter().any(|n| {
                        &n.id == id && !n.has_flag("handshake") && (n.is_myself() || n.connected)
                    })
                })
            })
        });
        assert!(all_known, "nodes did not all meet\n{}", self.describe());
    }

    #[track_caller]
    fn attach_replica(&self, replica: usize, primary: usize) {
        let mut c = self.server(replica).client();
        let id = self.nodes[primary].id.clone();
        let mut last = Reply::Nil;
        let attached = wait_until(SETTLE_TIMEOUT, || {
            last = c.cmd(&["CLUSTER", "REPLICATE", &id]);
            last == Reply::Status("OK".into())
        });
        assert!(
            attached,
            "CLUSTER REPLICATE {id} on node {replica}: {last:?}\n{}",
            self.describe()
        );
    }

    #[track_caller]
    fn bus_port(&self, i: usize) -> u16 {
        let r = self
            .server(i)
            .client()
            .cmd(&["CONFIG", "GET", "cluster-port"]);
        let v = match &r {
            Reply::Array(a) if a.len() == 2 => a[1].as_str().to_string(),
            Reply::Map(m) if m.len() == 1 => m[0].1.as_str().to_string(),
            other => panic!("CONFIG GET cluster-port on node {i}: {other:?}"),
        };
        v.parse()
            .unwrap_or_else(|_| panic!("cluster-port of node {i} is {v:?}"))
    }
}
