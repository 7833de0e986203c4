//! `SemaphoreStore` over the in-memory database: the same rules as the
//! server, in unit and property tests.

use std::collections::BTreeMap;

use super::{PermitId, SemaphoreStore, SetShape};
use crate::channel::timeout_key;
use crate::lease::Millis;
use crate::memory::{Entry, MemoryDb, Score, Value};
use crate::number::parse_i64;
use crate::slot::timeout_key_same_slot;
use crate::string::StringValue;

pub struct MemorySemaphore<'a> {
    db: &'a mut MemoryDb,
    key: Vec<u8>,
    timeouts: Vec<u8>,
    in_slot: bool,
}

impl MemoryDb {
    /// The semaphore at `key` (both keys expire first, as on a primary).
    pub fn semaphore(&mut self, key: &[u8]) -> MemorySemaphore<'_> {
        self.open_semaphore(key, true)
    }

    /// As on a cluster node: the lease set is out of reach when it hashes
    /// to another slot than the key.
    pub fn semaphore_in_cluster(&mut self, key: &[u8]) -> MemorySemaphore<'_> {
        self.open_semaphore(key, timeout_key_same_slot(key))
    }

    fn open_semaphore(&mut self, key: &[u8], in_slot: bool) -> MemorySemaphore<'_> {
        let timeouts = timeout_key(key);
        self.expire(key);
        self.expire(&timeouts);
        MemorySemaphore {
            db: self,
            key: key.to_vec(),
            timeouts,
            in_slot,
        }
    }
}

impl MemorySemaphore<'_> {
    fn zset(&self) -> Option<&BTreeMap<Vec<u8>, Score>> {
        if !self.in_slot {
            return None;
        }
        match self.db.entries.get(&self.timeouts) {
            Some(Entry {
                value: Value::Zset(z),
                ..
            }) => Some(z),
            _ => None,
        }
    }

    fn zset_mut(&mut self) -> &mut BTreeMap<Vec<u8>, Score> {
        assert!(self.in_slot, "a lease set in another slot was written");
        let entry = self
            .db
            .entries
            .entry(self.timeouts.clone())
            .or_insert(Entry {
                value: Value::Zset(BTreeMap::new()),
                deadline: None,
            });
        match &mut entry.value {
            Value::Zset(z) => z,
            other => panic!("ZADD on a {other:?}: the rules check types first"),
        }
    }
}

impl SemaphoreStore for MemorySemaphore<'_> {
    type Value = Vec<u8>;
    type Member = Vec<u8>;

    fn now(&self) -> Millis {
        self.db.now
    }

    fn permits(&mut self) -> StringValue<Vec<u8>> {
        match self.db.entries.get(&self.key) {
            None => StringValue::Missing,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => StringValue::Str(s.clone()),
            Some(_) => StringValue::Other,
        }
    }

    fn deadline(&mut self) -> Option<Millis> {
        self.db.entries.get(&self.key)?.deadline
    }

    fn create(&mut self, permits: i64, deadline: Option<Millis>) {
        self.db.entries.insert(
            self.key.clone(),
            Entry {
                value: Value::Str(permits.to_string().into_bytes()),
                deadline,
            },
        );
    }

    fn incr(&mut self, delta: i64) {
        let entry = self.db.entries.entry(self.key.clone()).or_insert(Entry {
            value: Value::Str(b"0".to_vec()),
            deadline: None,
        });
        let Value::Str(s) = &mut entry.value else {
            panic!("INCRBY on a non-string: the rules check types first");
        };
        let n = parse_i64(s)
            .and_then(|n| n.checked_add(delta))
            .expect("INCRBY the rules checked");
        *s = n.to_string().into_bytes();
    }

    fn set_permits(&mut self, value: i64) {
        if let Some(entry) = self.db.entries.get_mut(&self.key) {
            entry.value = Value::Str(value.to_string().into_bytes());
        }
    }

    fn leases_in_slot(&self) -> bool {
        self.in_slot
    }

    fn leases(&mut self) -> SetShape {
        if !self.in_slot {
            return SetShape::Missing;
        }
        match self.db.entries.get(&self.timeouts) {
            None => SetShape::Missing,
            Some(Entry {
                value: Value::Zset(z),
                ..
            }) => SetShape::Zset { len: z.len() },
            Some(_) => SetShape::Other,
        }
    }

    fn score(&mut self, id: &[u8]) -> Option<f64> {
        self.zset()?.get(id).map(|s| s.0)
    }

    fn lapsed(&mut self, now: Millis) -> Vec<Vec<u8>> {
        let Some(z) = self.zset() else {
            return Vec::new();
        };
        let mut lapsed: Vec<(f64, Vec<u8>)> = z
            .iter()
            .filter(|(_, s)| super::lapsed_at(s.0, now))
            .map(|(m, s)| (s.0, m.clone()))
            .collect();
        lapsed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        lapsed.into_iter().map(|(_, m)| m).collect()
    }

    fn live(&mut self, now: Millis) -> usize {
        self.zset().map_or(0, |z| {
            z.values().filter(|s| !super::lapsed_at(s.0, now)).count()
        })
    }

    fn first_score(&mut self) -> Option<f64> {
        self.zset()?.values().map(|s| s.0).min_by(f64::total_cmp)
    }

    fn add_leases(&mut self, ids: &[PermitId], score: f64) {
        let z = self.zset_mut();
        for id in ids {
            z.insert(id.to_vec(), Score(score));
        }
    }

    fn remove_leases<M: AsRef<[u8]>>(&mut self, members: &[M]) {
        let z = self.zset_mut();
        for m in members {
            z.remove(m.as_ref());
        }
        if z.is_empty() {
            self.db.entries.remove(&self.timeouts);
        }
    }

    fn leases_deadline(&mut self) -> Option<Millis> {
        self.zset()?;
        self.db.entries.get(&self.timeouts)?.deadline
    }

    fn set_leases_deadline(&mut self, deadline: Millis) {
        if let Some(entry) = self.db.entries.get_mut(&self.timeouts) {
            entry.deadline = Some(deadline);
        }
    }

    fn persist_leases(&mut self) {
        if let Some(entry) = self.db.entries.get_mut(&self.timeouts) {
            entry.deadline = None;
        }
    }
}
