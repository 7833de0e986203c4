//! One node's view of the cluster: `CLUSTER NODES` parsed.
//!
//! Line format (Redis 7.0 and Valkey 9.1):
//! `<id> <ip:port@cport[,hostname]> <flags> <primary id|-> <ping-sent>
//! <pong-recv> <config-epoch> <link-state> <slot|a-b|[slot->-id]|[slot-<-id]> ...`

use std::collections::BTreeMap;

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    pub id: String,
    pub port: u16,
    pub flags: Vec<String>,
    /// The primary's id for a replica, `None` for a primary.
    pub primary: Option<String>,
    pub config_epoch: u64,
    pub connected: bool,
    /// Slots this node serves, as ranges (inclusive).
    pub slots: Vec<(u16, u16)>,
    /// Only on the `myself` line: `[slot->-id]` (migrating to id).
    pub migrating: Vec<(u16, String)>,
    /// Only on the `myself` line: `[slot-<-id]` (importing from id).
    pub importing: Vec<(u16, String)>,
}

impl NodeLine {
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub fn is_primary(&self) -> bool {
        self.has_flag("master")
    }

    pub fn is_myself(&self) -> bool {
        self.has_flag("myself")
    }

    /// Marked as failing (`fail` or `fail?`) or still in the handshake.
    pub fn is_suspect(&self) -> bool {
        self.has_flag("fail")
            || self.has_flag("fail?")
            || self.has_flag("handshake")
            || self.has_flag("noaddr")
    }

    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }

    pub fn slot_count(&self) -> usize {
        self.slots
            .iter()
            .map(|&(a, b)| usize::from(b - a) + 1)
            .sum()
    }
}

/// Parses the text of `CLUSTER NODES`; panics on a line it cannot read.
pub fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("cannot parse CLUSTER NODES line {l:?}")))
        .collect()
}

fn parse_line(line: &str) -> Option<NodeLine> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    // ip:port@cport[,hostname]
    let addr = f[1].split([',', '@']).next()?;
    let port = addr.rsplit_once(':')?.1.parse().ok()?;
    let mut node = NodeLine {
        id: f[0].to_string(),
        port,
        flags: f[2].split(',').map(str::to_string).collect(),
        primary: (f[3] != "-").then(|| f[3].to_string()),
        config_epoch: f[6].parse().ok()?,
        connected: f[7] == "connected",
        slots: Vec::new(),
        migrating: Vec::new(),
        importing: Vec::new(),
    };
    for s in &f[8..] {
        if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            if let Some((slot, id)) = inner.split_once("->-") {
                node.migrating.push((slot.parse().ok()?, id.to_string()));
            } else if let Some((slot, id)) = inner.split_once("-<-") {
                node.importing.push((slot.parse().ok()?, id.to_string()));
            }
        } else if let Some((a, b)) = s.split_once('-') {
            node.slots.push((a.parse().ok()?, b.parse().ok()?));
        } else {
            let n = s.parse().ok()?;
            node.slots.push((n, n));
        }
    }
    Some(node)
}

/// A node's place in the cluster: its primary (None for a primary) and
/// the slot ranges it serves.
pub type Place = (Option<String>, Vec<(u16, u16)>);

/// What a whole view says, reduced to what must agree across nodes once
/// the cluster is stable: each node's role, primary and slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// node id → its place
    pub nodes: BTreeMap<String, Place>,
}

pub fn topology(view: &[NodeLine]) -> Topology {
    Topology {
        nodes: view
            .iter()
            .map(|n| (n.id.clone(), (n.primary.clone(), n.slots.clone())))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_servers_formats() {
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [5461->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 7000 [5461-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
";
        let v = parse_nodes(text);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].port, 30004);
        assert_eq!(
            v[0].primary.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert!(!v[0].is_primary());
        assert_eq!(v[1].slots, vec![(5461, 10922)]);
        assert_eq!(v[1].migrating.len(), 1);
        assert!(v[2].is_myself() && v[2].is_primary());
        assert_eq!(v[2].slots, vec![(0, 5460), (7000, 7000)]);
        assert_eq!(v[2].importing[0].0, 5461);
        assert!(v[2].serves(7000) && !v[2].serves(7001));
        assert_eq!(v[2].slot_count(), 5462);
    }
}
