//! Role changes: a manual `CLUSTER FAILOVER`, a primary killed with SIGKILL
//! (its replica is elected after `cluster-node-timeout`), and bringing a
//! killed node back (it rejoins as a replica).

use std::time::{Duration, Instant};

use super::Cluster;
use crate::resp::Reply;
use crate::wait_until;

impl Cluster {
    /// `CLUSTER FAILOVER [mode]` on `replica` (mode "" for the default,
    /// coordinated one, or "FORCE" / "TAKEOVER"), then waits until the
    /// replica serves its former primary's slots, the former primary calls
    /// itself a replica of it, and the cluster is stable. Returns the
    /// former primary's index and how long the switch took.
    #[track_caller]
    pub fn failover(&self, replica: usize, mode: &str) -> (usize, Duration) {
        let started = Instant::now();
        let me = self.myself(replica);
        let primary_id = me
            .primary
            .clone()
            .unwrap_or_else(|| panic!("node {replica} is not a replica\n{}", self.describe()));
        let primary = self
            .index_of_id(&primary_id)
            .unwrap_or_else(|| panic!("unknown primary {primary_id}"));
        let mut cmd = vec!["CLUSTER", "FAILOVER"];
        if !mode.is_empty() {
            cmd.push(mode);
        }
        let r = self.server(replica).client().cmd(&cmd);
        assert_eq!(
            r,
            Reply::Status("OK".into()),
            "{cmd:?} on node {replica}\n{}",
            self.describe()
        );
        let replica_id = self.node(replica).id.clone();
        let swapped = wait_until(Duration::from_secs(30), || {
            let new = self.myself(replica);
            let old = self.myself(primary);
            new.is_primary() && !new.slots.is_empty() && old.primary.as_ref() == Some(&replica_id)
        });
        assert!(
            swapped,
            "roles did not swap 30 s after {cmd:?} on node {replica}\n{}",
            self.describe()
        );
        self.wait_stable();
        (primary, started.elapsed())
    }

    /// SIGKILLs `primary` and waits until one of its replicas has been
    /// elected and the cluster is ok again. Returns the promoted replica
    /// and how long the election took from the kill.
    #[track_caller]
    pub fn kill_primary(&mut self, primary: usize) -> (usize, Duration) {
        let replicas = self.replicas_of(primary);
        assert!(
            !replicas.is_empty(),
            "node {primary} has no replica to promote\n{}",
            self.describe()
        );
        let slots = self.slots_of(primary);
        let started = Instant::now();
        self.nodes[primary].server.kill9();
        let mut promoted = None;
        let elected = wait_until(Duration::from_secs(30), || {
            promoted = replicas.iter().copied().find(|&r| {
                let me = self.myself(r);
                me.is_primary() && slots.iter().all(|&(a, _)| me.serves(a))
            });
            promoted.is_some()
        });
        let Some(promoted) = promoted.filter(|_| elected) else {
            panic!(
                "no replica of node {primary} was promoted 30 s after SIGKILL\n{}",
                self.describe()
            );
        };
        let took = started.elapsed();
        self.wait_stable();
        (promoted, took)
    }

    /// SIGKILL of node `i`, whatever its role; nothing is waited for.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].server.kill9();
    }

    /// Starts a killed node again (same port, dir, `nodes.conf`). A former
    /// primary whose slots were taken over turns itself into a replica of
    /// the new owner; if it does not within the node timeout, it is told to
    /// with `CLUSTER REPLICATE`. Waits until the cluster is stable.
    #[track_caller]
    pub fn restart(&mut self, i: usize, replica_of: usize) {
        self.nodes[i].server.restart();
        let primary_id = self.node(replica_of).id.clone();
        let follows = |c: &Cluster| c.myself(i).primary.as_deref() == Some(primary_id.as_str());
        if !wait_until(self.node_timeout * 3, || follows(self)) {
            let r = self
                .server(i)
                .client()
                .cmd(&["CLUSTER", "REPLICATE", &primary_id]);
            self.log(&format!(
                "node {i} did not rejoin as a replica by itself; CLUSTER REPLICATE: {r:?}"
            ));
        }
        self.wait_stable();
    }
}
