//! An in-memory `LockStore`: a tiny model of a Redis database (hashes, other
//! types, absolute expiry, a clock you move by hand). It runs the same rules
//! as the server, in unit tests, property tests and fuzz targets.

use std::collections::BTreeMap;

use super::channel::token_key;
use super::error::{LockError, LockResult};
use super::lease::Millis;
use super::number::parse_i64;
use super::store::{LockStore, Shape};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A string (token counters, permit and latch counts).
    Str(Vec<u8>),
    /// A sorted set (a semaphore's lease set): member → score.
    Zset(BTreeMap<Vec<u8>, Score>),
    /// Any other value (a list, a set...).
    Other,
}

/// A sorted-set score: a double, as Redis keeps it (equal when bitwise
/// equal, so `Value` stays comparable in tests).
#[derive(Debug, Clone, Copy)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Score) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Score {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) deadline: Option<Millis>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryDb {
    pub(crate) now: Millis,
    pub(crate) entries: BTreeMap<Vec<u8>, Entry>,
}

impl MemoryDb {
    pub fn new(now: Millis) -> MemoryDb {
        MemoryDb {
            now,
            entries: BTreeMap::new(),
        }
    }

    pub fn now(&self) -> Millis {
        self.now
    }

    pub fn advance(&mut self, ms: Millis) {
        self.now += ms;
    }

    /// The store for one key (expired keys vanish first, as on a primary;
    /// like Redis, a key expires once now > deadline).
    pub fn key(&mut self, key: &[u8]) -> MemoryLock<'_> {
        self.expire(key);
        self.expire(&token_key(key));
        MemoryLock {
            db: self,
            key: key.to_vec(),
        }
    }

    pub(crate) fn expire(&mut self, key: &[u8]) {
        let now = self.now;
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.deadline.is_some_and(|d| d < now))
        {
            self.entries.remove(key);
        }
    }

    /// Writes a raw value (what other clients can do behind the module's back).
    pub fn put(&mut self, key: &[u8], value: Value, deadline: Option<Millis>) {
        self.entries.insert(key.to_vec(), Entry { value, deadline });
    }

    /// A key that has not expired (now > deadline), as a reader sees it.
    fn live(&self, key: &[u8]) -> Option<&Entry> {
        self.entries
            .get(key)
            .filter(|e| e.deadline.is_none_or(|d| d >= self.now))
    }

    pub fn value(&self, key: &[u8]) -> Option<&Value> {
        self.live(key).map(|e| &e.value)
    }

    pub fn deadline(&self, key: &[u8]) -> Option<Millis> {
        self.live(key).and_then(|e| e.deadline)
    }
}

pub struct MemoryLock<'a> {
    db: &'a mut MemoryDb,
    key: Vec<u8>,
}

impl MemoryLock<'_> {
    fn entry(&self) -> Option<&Entry> {
        self.db.entries.get(&self.key)
    }

    fn hash(&self) -> Option<&BTreeMap<Vec<u8>, Vec<u8>>> {
        match self.entry() {
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Some(h),
            _ => None,
        }
    }
}

impl LockStore for MemoryLock<'_> {
    type Name = [u8];
    type Value = Vec<u8>;

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

    fn get(&mut self, field: &[u8]) -> Option<Vec<u8>> {
        self.hash()?.get(field).cloned()
    }

    fn only_entry(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        let h = self.hash()?;
        if h.len() != 1 {
            return None;
        }
        h.iter().next().map(|(k, v)| (k.clone(), v.clone()))
    }

    fn ttl(&mut self) -> Option<Millis> {
        let now = self.db.now;
        self.entry()?.deadline.map(|d| d - now)
    }

    fn set_holds(&mut self, owner: &[u8], holds: i64) {
        let entry = self.db.entries.entry(self.key.clone()).or_insert(Entry {
            value: Value::Hash(BTreeMap::new()),
            deadline: None,
        });
        if let Value::Hash(h) = &mut entry.value {
            h.insert(owner.to_vec(), holds.to_string().into_bytes());
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

    fn token(&mut self) -> LockResult<i64> {
        match self.db.entries.get(&token_key(&self.key)) {
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
