//! Where locks live: one server ([`Target::from`] a `redis::Client`), or a
//! cluster ([`Target::cluster`] with seed nodes). In a cluster the library
//! sends each command to the node that serves its key (CRC16 slot, hash tags
//! honoured), learns the slot map with `CLUSTER SLOTS`, and follows `MOVED`
//! (remembering the slot's new node) and `ASK` (one `ASKING` call), as the
//! Python library does. A wait redirected while queued is re-issued on the
//! new node, at the tail of its queue.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use redis::{ConnectionInfo, IntoConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::net::Address;

/// CRC16 (XMODEM) of the key or of its non-empty `{hash tag}`, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let mut k = key;
    if let Some(open) = k.iter().position(|&b| b == b'{')
        && let Some(len) = k[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        k = &k[open + 1..open + 1 + len];
    }
    let mut crc: u16 = 0;
    for &b in k {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The server or cluster a [`crate::sync::Lock`] or [`crate::tokio::Lock`]
/// talks to. Cheap to clone; clones share the cluster's slot map (and the
/// library's connection pool).
#[derive(Clone)]
pub struct Target {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Credentials, database, protocol: every connection's template.
    pub(crate) info: ConnectionInfo,
    pub(crate) seeds: Vec<Address>,
    pub(crate) cluster: bool,
    /// Cluster: slot ranges as `CLUSTER SLOTS` reported them, and the single
    /// slots learnt from MOVED since.
    slots: RwLock<Slots>,
    /// One string per target, for the pool registry.
    pub(crate) id: String,
}

#[derive(Default)]
struct Slots {
    ranges: Vec<(u16, u16, Address)>,
    moved: HashMap<u16, Address>,
}

impl From<redis::Client> for Target {
    fn from(c: redis::Client) -> Target {
        Target::standalone(c.get_connection_info().clone())
    }
}

impl From<&redis::Client> for Target {
    fn from(c: &redis::Client) -> Target {
        Target::standalone(c.get_connection_info().clone())
    }
}

impl Target {
    fn standalone(info: ConnectionInfo) -> Target {
        let seeds = Address::of(&info).into_iter().collect();
        Target::new(info, seeds, false)
    }

    fn new(info: ConnectionInfo, seeds: Vec<Address>, cluster: bool) -> Target {
        let settings = info.redis_settings();
        let id = format!(
            "{}|{:?}|{}|{}",
            if cluster { "cluster" } else { "server" },
            seeds,
            settings.db(),
            settings.username().unwrap_or("")
        );
        Target {
            inner: Arc::new(Inner {
                info,
                seeds,
                cluster,
                slots: RwLock::new(Slots::default()),
                id,
            }),
        }
    }

    /// A cluster, reached through any of `nodes` (URLs such as
    /// `redis://127.0.0.1:7000/`, or anything redis-rs turns into a
    /// `ConnectionInfo`); credentials come from the first.
    pub fn cluster<T: IntoConnectionInfo>(nodes: impl IntoIterator<Item = T>) -> Result<Target> {
        let mut infos = Vec::new();
        for n in nodes {
            infos.push(n.into_connection_info()?);
        }
        let Some(first) = infos.first().cloned() else {
            return Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "Target::cluster needs at least one node",
            ))));
        };
        let seeds = infos.iter().map(Address::of).collect::<Result<Vec<_>>>()?;
        Ok(Target::new(first, seeds, true))
    }

    /// True for a cluster target.
    pub fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    /// The node serving `key`: the server itself, or in a cluster the slot's
    /// node as last learnt (None: the slot map is not known yet).
    pub(crate) fn node_for(&self, key: &[u8]) -> Option<Address> {
        if !self.inner.cluster {
            return self.inner.seeds.first().cloned();
        }
        let slot = key_slot(key);
        let slots = self.inner.slots.read().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = slots.moved.get(&slot) {
            return Some(a.clone());
        }
        slots
            .ranges
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
            .map(|(_, _, a)| a.clone())
    }

    /// A node to ask for the slot map.
    pub(crate) fn seed(&self) -> Address {
        self.inner.seeds[0].clone()
    }

    /// Learns the slot map from a `CLUSTER SLOTS` reply.
    pub(crate) fn learn(&self, reply: &Value) {
        let Value::Array(entries) = reply else { return };
        let mut ranges = Vec::new();
        for e in entries {
            let Value::Array(parts) = e else { continue };
            let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(master))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                continue;
            };
            let host = match master.first() {
                Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Value::SimpleString(h)) => h.clone(),
                _ => continue,
            };
            let Some(Value::Int(port)) = master.get(1) else {
                continue;
            };
            // An empty host means "the node you asked".
            let host = if host.is_empty() {
                match self.seed() {
                    Address::Tcp(h, _) => h,
                    Address::Unix(_) => continue,
                }
            } else {
                host
            };
            ranges.push((*lo as u16, *hi as u16, Address::Tcp(host, *port as u16)));
        }
        let mut slots = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
        slots.ranges = ranges;
        slots.moved.clear();
    }

    /// A MOVED reply: the slot of `key` now lives at `to`.
    pub(crate) fn moved(&self, key: &[u8], to: &Address) {
        if self.inner.cluster {
            let mut slots = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
            slots.moved.insert(key_slot(key), to.clone());
        }
    }
}

/// A MOVED or ASK error: (ask, node).
pub(crate) fn redirection(e: &Error) -> Option<(bool, Address)> {
    let Error::Redis(re) = e else { return None };
    let (node, _) = re.redirect_node()?;
    let ask = re.code() == Some("ASK");
    Some((ask, Address::parse(node)?))
}

#[cfg(test)]
mod tests {
    use super::key_slot;

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"a{b"), 13340);
    }
}
