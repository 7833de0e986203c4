//! `RwLockStore` over the in-memory database: the hash at the key, each
//! read hold's timeout key by its computed name, the token counter. With
//! `in_cluster`, derived keys in another slot are refused as the glue
//! refuses them in cluster mode.

use std::collections::BTreeMap;

use super::store::{KeyTtl, RwLockStore};
use crate::channel::{rwlock_timeout_key, token_key};
use crate::error::{LockError, LockResult};
use crate::lease::Millis;
use crate::memory::{Entry, MemoryDb, Value};
use crate::number::parse_i64;
use crate::slot::{key_slot, rwlock_timeout_key_same_slot};
use crate::store::Shape;

impl MemoryDb {
    /// The RW lock at `key` (expired keys vanish first, as on a primary).
    pub fn rwlock(&mut self, key: &[u8]) -> MemoryRwLock<'_> {
        self.expire(key);
        self.expire(&token_key(key));
        MemoryRwLock {
            db: self,
            key: key.to_vec(),
            cluster: false,
        }
    }
}

pub struct MemoryRwLock<'a> {
    db: &'a mut MemoryDb,
    key: Vec<u8>,
    cluster: bool,
}

impl MemoryRwLock<'_> {
    /// As on a cluster node: derived keys must share the key's slot.
    pub fn in_cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    fn entry(&self) -> Option<&Entry> {
        self.db.entries.get(&self.key)
    }

    fn hash_mut(&mut self) -> &mut BTreeMap<Vec<u8>, Vec<u8>> {
        let entry = self.db.entries.entry(self.key.clone()).or_insert(Entry {
            value: Value::Hash(BTreeMap::new()),
            deadline: None,
        });
        if !matches!(entry.value, Value::Hash(_)) {
            entry.value = Value::Hash(BTreeMap::new());
        }
        match &mut entry.value {
            Value::Hash(h) => h,
            _ => unreachable!("just made a hash"),
        }
    }

    fn hold_key(&self, owner: &[u8], n: i64) -> Vec<u8> {
        rwlock_timeout_key(&self.key, owner, n)
    }
}

impl RwLockStore for MemoryRwLock<'_> {
    fn now(&self) -> Millis {
        self.db.now
    }

    fn shape(&mut self) -> Shape {
        match self.entry() {
            None => Shape::Missing,
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Shape::Hash { fields: h.len() },
            Some(_) => Shape::Other,
        }
    }

    fn entries(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.entry() {
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => h.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => Vec::new(),
        }
    }

    fn ttl(&mut self) -> Option<Millis> {
        let now = self.db.now;
        self.entry()?.deadline.map(|d| d - now)
    }

    fn set_field(&mut self, field: &[u8], value: &[u8]) {
        self.hash_mut().insert(field.to_vec(), value.to_vec());
    }

    fn delete_field(&mut self, field: &[u8]) {
        let emptied = match self.db.entries.get_mut(&self.key) {
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => {
                h.remove(field);
                h.is_empty()
            }
            _ => false,
        };
        if emptied {
            self.db.entries.remove(&self.key);
        }
    }

    fn set_deadline(&mut self, deadline: Millis) {
        if let Some(entry) = self.db.entries.get_mut(&self.key) {
            entry.deadline = Some(deadline);
        }
    }

    fn clear_deadline(&mut self) {
        if let Some(entry) = self.db.entries.get_mut(&self.key) {
            entry.deadline = None;
        }
    }

    fn delete(&mut self) {
        self.db.entries.remove(&self.key);
    }

    fn check_hold_slot(&mut self, owner: &[u8]) -> LockResult<()> {
        match self.cluster && !rwlock_timeout_key_same_slot(&self.key, owner) {
            true => Err(LockError::RwCrossSlot),
            false => Ok(()),
        }
    }

    fn hold_ttl(&mut self, owner: &[u8], n: i64) -> KeyTtl {
        let name = self.hold_key(owner, n);
        self.db.expire(&name);
        match self.db.entries.get(&name) {
            None => KeyTtl::Missing,
            Some(Entry { deadline: None, .. }) => KeyTtl::Forever,
            Some(Entry {
                deadline: Some(d), ..
            }) => KeyTtl::Left(d - self.db.now),
        }
    }

    fn set_hold(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>) {
        let name = self.hold_key(owner, n);
        self.db.entries.insert(
            name,
            Entry {
                value: Value::Str(b"1".to_vec()),
                deadline,
            },
        );
    }

    fn set_hold_deadline(&mut self, owner: &[u8], n: i64, deadline: Option<Millis>) {
        let name = self.hold_key(owner, n);
        if let Some(entry) = self.db.entries.get_mut(&name) {
            entry.deadline = deadline;
        }
    }

    fn delete_hold(&mut self, owner: &[u8], n: i64) {
        let name = self.hold_key(owner, n);
        self.db.entries.remove(&name);
    }

    fn token(&mut self) -> LockResult<i64> {
        let name = token_key(&self.key);
        if self.cluster && key_slot(&name) != key_slot(&self.key) {
            return Err(LockError::TokenCrossSlot);
        }
        match self.db.entries.get(&name) {
            None => Ok(0),
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => parse_i64(s).ok_or(LockError::TokenNotInteger),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn set_token(&mut self, token: i64) {
        let entry = self
            .db
            .entries
            .entry(token_key(&self.key))
            .or_insert(Entry {
                value: Value::Other,
                deadline: None,
            });
        entry.value = Value::Str(token.to_string().into_bytes());
    }
}
