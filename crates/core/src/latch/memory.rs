//! `LatchStore` over the in-memory database.

use super::LatchStore;
use crate::lease::Millis;
use crate::memory::{Entry, MemoryDb, Value};
use crate::number::parse_i64;
use crate::string::StringValue;

pub struct MemoryLatch<'a> {
    db: &'a mut MemoryDb,
    key: Vec<u8>,
}

impl MemoryDb {
    /// The latch at `key` (it expires first, as on a primary).
    pub fn latch(&mut self, key: &[u8]) -> MemoryLatch<'_> {
        self.expire(key);
        MemoryLatch {
            db: self,
            key: key.to_vec(),
        }
    }
}

impl LatchStore for MemoryLatch<'_> {
    type Value = Vec<u8>;

    fn count(&mut self) -> StringValue<Vec<u8>> {
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

    fn set_count(&mut self, count: i64) {
        self.db.entries.insert(
            self.key.clone(),
            Entry {
                value: Value::Str(count.to_string().into_bytes()),
                deadline: None,
            },
        );
    }

    fn decrement(&mut self) {
        let Some(Entry {
            value: Value::Str(s),
            ..
        }) = self.db.entries.get_mut(&self.key)
        else {
            panic!("DECR on a missing key or a non-string: the rules check first");
        };
        let n = parse_i64(s)
            .and_then(|n| n.checked_sub(1))
            .expect("DECR the rules checked");
        *s = n.to_string().into_bytes();
    }

    fn delete(&mut self) {
        self.db.entries.remove(&self.key);
    }
}
