//! Moving slots between primaries: the manual way (the steps of the Redis
//! Cluster tutorial, each reply returned for the test to judge), with
//! `redis-cli --cluster reshard`, and Valkey's atomic `CLUSTER MIGRATESLOTS`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::Cluster;
use crate::resp::Reply;
use crate::wait_until;

/// Which side `CLUSTER SETSLOT <slot> NODE <target>` is sent to first.
/// redis-cli informs the target first; the Redis tutorial shows either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlotOrder {
    TargetFirst,
    SourceFirst,
}

/// Every reply of a manual slot move, in order, for the test to judge.
#[derive(Clone, Debug)]
pub struct MoveReport {
    pub importing: Reply,
    pub migrating: Reply,
    /// One per `MIGRATE ... KEYS` batch: the keys sent and the reply.
    pub migrates: Vec<(Vec<Vec<u8>>, Reply)>,
    /// `CLUSTER COUNTKEYSINSLOT` on the source after the last MIGRATE.
    pub left_on_source: i64,
    /// `SETSLOT <slot> NODE <target>` sent to the source / the target.
    pub node_on_source: Reply,
    pub node_on_target: Reply,
    /// The same, sent to every other primary: (node, reply).
    pub node_on_others: Vec<(usize, Reply)>,
}

impl MoveReport {
    /// True when every step answered OK and the source kept no key.
    pub fn ok(&self) -> bool {
        let ok = |r: &Reply| matches!(r, Reply::Status(s) if s == "OK");
        ok(&self.importing)
            && ok(&self.migrating)
            && self.migrates.iter().all(|(_, r)| ok(r))
            && self.left_on_source == 0
            && ok(&self.node_on_source)
            && ok(&self.node_on_target)
            && self.node_on_others.iter().all(|(_, r)| ok(r))
    }
}

/// What a `redis-cli` run printed and how it ended.
#[derive(Clone, Debug)]
pub struct CliOutput {
    pub args: Vec<String>,
    pub success: bool,
    /// stdout then stderr.
    pub text: String,
    pub elapsed: Duration,
}

impl CliOutput {
    /// The last `n` lines, for messages.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// `redis-cli`: `$REDIS_CLI`, else the one on PATH. It drives Valkey too
/// (valkey-cli may not be installed).
#[track_caller]
pub fn redis_cli() -> PathBuf {
    if let Some(p) = std::env::var_os("REDIS_CLI") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("redis-cli"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("redis-cli not found: install it (apt-get install redis-tools) or set REDIS_CLI")
        })
}

/// redis-cli --cluster colours its output even into a pipe.
fn strip_colors(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn ok(r: &Reply) -> bool {
    matches!(r, Reply::Status(s) if s == "OK")
}

impl Cluster {
    /// `CLUSTER SETSLOT <slot> <args...>` on node `on`.
    #[track_caller]
    pub fn setslot(&self, on: usize, slot: u16, args: &[&str]) -> Reply {
        let slot = slot.to_string();
        let mut cmd = vec!["CLUSTER", "SETSLOT", slot.as_str()];
        cmd.extend_from_slice(args);
        self.server(on).client().cmd(&cmd)
    }

    /// Step 1: `SETSLOT IMPORTING` on the target, then `MIGRATING` on the
    /// source. Returns (importing reply, migrating reply).
    #[track_caller]
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) -> (Reply, Reply) {
        let from_id = self.node(from).id.clone();
        let to_id = self.node(to).id.clone();
        let importing = self.setslot(to, slot, &["IMPORTING", &from_id]);
        let migrating = self.setslot(from, slot, &["MIGRATING", &to_id]);
        (importing, migrating)
    }

    /// Step 2: `MIGRATE 127.0.0.1 <target port> "" 0 5000 KEYS ...` until
    /// `CLUSTER GETKEYSINSLOT` on the source is empty (at most 10 rounds:
    /// a key that keeps coming back is reported, not chased forever).
    #[track_caller]
    pub fn migrate_keys(&self, slot: u16, from: usize, to: usize) -> Vec<(Vec<Vec<u8>>, Reply)> {
        let mut c = self.server(from).client();
        let port = self.port(to).to_string();
        let mut batches = Vec::new();
        for _ in 0..10 {
            let keys = c.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"]);
            let keys: Vec<Vec<u8>> = keys
                .as_array()
                .iter()
                .map(|k| k.as_bytes().to_vec())
                .collect();
            if keys.is_empty() {
                break;
            }
            let mut cmd: Vec<Vec<u8>> = ["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect();
            cmd.extend(keys.iter().cloned());
            let r = c.cmd(&cmd);
            let failed = !ok(&r);
            batches.push((keys, r));
            if failed {
                break;
            }
        }
        batches
    }

    /// Step 3: `SETSLOT <slot> NODE <target>` on the source and the target
    /// in `order`, then on every other primary (as redis-cli does).
    /// Returns (reply on the source, reply on the target, others).
    #[track_caller]
    pub fn set_slot_owner(
        &self,
        slot: u16,
        from: usize,
        to: usize,
        order: SetSlotOrder,
    ) -> (Reply, Reply, Vec<(usize, Reply)>) {
        let to_id = self.node(to).id.clone();
        let node = |on: usize| self.setslot(on, slot, &["NODE", &to_id]);
        let (on_source, on_target) = match order {
            SetSlotOrder::TargetFirst => {
                let t = node(to);
                (node(from), t)
            }
            SetSlotOrder::SourceFirst => {
                let s = node(from);
                (s, node(to))
            }
        };
        let others = self
            .primaries()
            .into_iter()
            .filter(|&i| i != from && i != to)
            .map(|i| (i, node(i)))
            .collect();
        (on_source, on_target, others)
    }

    /// All three steps, as an operator following the tutorial would; every
    /// reply is in the report (nothing is asserted here).
    #[track_caller]
    pub fn move_slot(&self, slot: u16, from: usize, to: usize, order: SetSlotOrder) -> MoveReport {
        let (importing, migrating) = self.begin_migration(slot, from, to);
        let migrates = self.migrate_keys(slot, from, to);
        let left_on_source = self
            .server(from)
            .client()
            .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
            .as_int();
        let (node_on_source, node_on_target, node_on_others) =
            self.set_slot_owner(slot, from, to, order);
        MoveReport {
            importing,
            migrating,
            migrates,
            left_on_source,
            node_on_source,
            node_on_target,
            node_on_others,
        }
    }

    /// Runs `redis-cli <args>` (with a 120 s limit: a hung reshard is a
    /// finding, not a hung test).
    #[track_caller]
    pub fn cli(&self, args: &[String]) -> CliOutput {
        let started = Instant::now();
        let mut child = Command::new(redis_cli())
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redis-cli: {e}"));
        let finished = wait_until(Duration::from_secs(120), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !finished {
            let _ = child.kill();
        }
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("redis-cli: {e}"));
        let mut text = strip_colors(&String::from_utf8_lossy(&out.stdout));
        text.push_str(&strip_colors(&String::from_utf8_lossy(&out.stderr)));
        if !finished {
            text.push_str("\n(killed by the test after 120 s)");
        }
        CliOutput {
            args: args.to_vec(),
            success: finished && out.status.success(),
            text,
            elapsed: started.elapsed(),
        }
    }

    /// `redis-cli --cluster reshard` moving `slots` slots (the source's
    /// lowest) from node `from` to node `to`, without questions.
    #[track_caller]
    pub fn reshard(&self, from: usize, to: usize, slots: usize, extra: &[&str]) -> CliOutput {
        let mut args: Vec<String> = vec![
            "--cluster".into(),
            "reshard".into(),
            self.addr(to),
            "--cluster-from".into(),
            self.node(from).id.clone(),
            "--cluster-to".into(),
            self.node(to).id.clone(),
            "--cluster-slots".into(),
            slots.to_string(),
            "--cluster-yes".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        self.cli(&args)
    }

    /// `redis-cli --cluster check`: succeeds when every slot is covered,
    /// all nodes agree and no slot is left open.
    #[track_caller]
    pub fn cli_check(&self) -> CliOutput {
        let any = self.primaries()[0];
        self.cli(&["--cluster".into(), "check".into(), self.addr(any)])
    }

    /// `redis-cli --cluster fix`: closes slots a failed reshard left open.
    #[track_caller]
    pub fn cli_fix(&self) -> CliOutput {
        let any = self.primaries()[0];
        self.cli(&[
            "--cluster".into(),
            "fix".into(),
            self.addr(any),
            "--cluster-yes".into(),
        ])
    }

    /// Valkey 9: `CLUSTER MIGRATESLOTS SLOTSRANGE a b NODE <target>` on the
    /// source. Returns the reply (the migration itself runs in the
    /// background: see [`Cluster::wait_slot_owner`]).
    #[track_caller]
    pub fn migrateslots(&self, from: usize, to: usize, first: u16, last: u16) -> Reply {
        let to_id = self.node(to).id.clone();
        self.server(from).client().cmd(&[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &first.to_string(),
            &last.to_string(),
            "NODE",
            &to_id,
        ])
    }

    /// Waits until node `owner` serves `slot` in every running node's view
    /// (no open slots left); false after `timeout`.
    pub fn wait_slot_owner(&self, slot: u16, owner: usize, timeout: Duration) -> bool {
        let id = self.node(owner).id.clone();
        wait_until(timeout, || {
            self.running_now().into_iter().all(|i| {
                self.view(i)
                    .iter()
                    .any(|n| n.id == id && n.is_primary() && n.serves(slot))
            })
        })
    }
}
